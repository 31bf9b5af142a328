//! The pause-and-resume evaluator (spec 001, "Stack Location Description
//! Operations").
//!
//! Design: like gimli's `Evaluation`, [`Evaluation::evaluate`] runs until the
//! expression ends or it needs something only the caller knows (a register,
//! memory, the current lane, the frame base, ...). It then returns an
//! [`EvaluationResult`] request; the caller answers with the matching
//! `resume_with_*` method, which continues the evaluation. No callbacks, no
//! trait objects, no I/O; the only allocations are the stack and the
//! location descriptions themselves.
//!
//! Each stack entry is an [`Entry`]: a typed [`Value`] or a [`Location`]
//! description. Generic values convert implicitly to memory locations in
//! address space 0 where a location is needed, and such locations convert
//! back to generic values (their address) where a value is needed.
//!
//! ```
//! use locus_dwarf::{parse_text, Encoding, Entry, Evaluation, EvaluationResult, Location, Part, Storage};
//!
//! let vgpr = |name: &str| (name == "VGPR0").then_some(2560u16);
//! let ops = parse_text("DW_OP_regx VGPR0; DW_OP_push_lane; DW_OP_lit4; DW_OP_mul; DW_OP_offset; DW_OP_piece 4", vgpr)?;
//! let mut eval = Evaluation::new(&ops, Encoding::default());
//! assert_eq!(eval.evaluate()?, EvaluationResult::RequiresLane);
//! assert_eq!(eval.resume_with_lane(5)?, EvaluationResult::Complete);
//! let part = Part { location: Location::single(Storage::Register(2560), 5 * 32), bit_size: 32 };
//! assert_eq!(eval.result(), Some(Entry::Location(Location::composite(vec![part]))));
//! # Ok::<(), locus_dwarf::Error>(())
//! ```

use alloc::vec::Vec;
use core::fmt;

use crate::error::Error;
use crate::location::{Location, Part, SingleLocation, Storage};
use crate::op::{encode, Encoding, Op};
use crate::value::{BinaryOp, CompareOp, UnaryOp, Value, ValueError, ValueType};

/// Default maximum number of operations one evaluation may execute.
pub const DEFAULT_MAX_STEPS: u64 = 100_000;

/// A stack entry: a value or a location description.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// A typed value.
    Value(Value),
    /// A location description.
    Location(Location),
}

/// What [`Evaluation::evaluate`] (or a `resume_with_*`) stopped for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EvaluationResult {
    /// The expression ended; see [`Evaluation::result`].
    Complete,
    /// Answer with [`Evaluation::resume_with_register`]: the register's
    /// whole contents, little-endian.
    RequiresRegister {
        /// DWARF register number.
        register: u16,
    },
    /// Answer with [`Evaluation::resume_with_memory`]: `size` bytes.
    RequiresMemory {
        /// Byte address.
        address: u64,
        /// Number of bytes.
        size: u8,
        /// Address space (0: global memory).
        address_space: u64,
    },
    /// Answer with [`Evaluation::resume_with_lane`].
    RequiresLane,
    /// Answer with [`Evaluation::resume_with_frame_base`] (the frame base
    /// as an address).
    RequiresFrameBase,
    /// Answer with [`Evaluation::resume_with_call_frame_cfa`].
    RequiresCallFrameCfa,
    /// Answer with [`Evaluation::resume_with_object_address`].
    RequiresObjectAddress,
}

/// What went wrong while evaluating one operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EvalError {
    /// The operation needs more stack entries than there are.
    StackUnderflow,
    /// An operand of the wrong kind or type.
    TypeMismatch(&'static str),
    /// Division or modulo by zero.
    DivisionByZero,
    /// The evaluation executed more operations than allowed (a loop).
    StepLimitExceeded(u64),
    /// A register number that does not fit in 16 bits.
    BadRegister(u64),
    /// An offset moved a location outside its storage.
    OffsetOutOfRange,
    /// A branch to a byte offset that is not an operation boundary.
    BadBranchTarget(i64),
    /// A read of undefined storage.
    UndefinedRead,
    /// A read past the end of a register or implicit storage.
    ReadOutOfRange,
    /// A size operand larger than the address size, or a piece too large.
    BadSize(u64),
    /// The caller answered a request wrongly (wrong method, too few bytes).
    BadResume(&'static str),
    /// Not supported by this evaluator (yet).
    Unsupported(&'static str),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::StackUnderflow => write!(f, "stack underflow"),
            EvalError::TypeMismatch(what) => write!(f, "type mismatch: {what}"),
            EvalError::DivisionByZero => write!(f, "division by zero"),
            EvalError::StepLimitExceeded(n) => {
                write!(f, "step limit of {n} operations exceeded (infinite loop?)")
            }
            EvalError::BadRegister(r) => write!(f, "register number {r} is too large"),
            EvalError::OffsetOutOfRange => {
                write!(f, "offset moves the location outside its storage")
            }
            EvalError::BadBranchTarget(t) => {
                write!(f, "branch target byte {t} is not an operation boundary")
            }
            EvalError::UndefinedRead => write!(f, "read of an undefined location"),
            EvalError::ReadOutOfRange => write!(f, "read past the end of the storage"),
            EvalError::BadSize(n) => write!(f, "bad size {n}"),
            EvalError::BadResume(what) => write!(f, "bad resume: {what}"),
            EvalError::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

/// An internal stack slot: an entry, or an incomplete composite (only
/// `DW_OP_piece`, `DW_OP_bit_piece` and `DW_OP_piece_end` consume these).
#[derive(Clone, Debug)]
enum Slot {
    Entry(Entry),
    Incomplete(Vec<Part>),
}

#[derive(Clone, Debug)]
enum Pending {
    /// breg/bregx/aspace_bregx: register value + offset.
    Breg {
        offset: i64,
        address_space: Option<u64>,
    },
    /// regval_type with the generic type.
    Regval,
    DerefRegister {
        byte_offset: u64,
        size: u8,
    },
    DerefMemory {
        size: u8,
    },
    Lane,
    FrameBase {
        offset: i64,
    },
    CallFrameCfa,
    ObjectAddress,
}

/// A pause-and-resume evaluation of one expression.
#[derive(Clone, Debug)]
pub struct Evaluation<'a> {
    ops: &'a [Op],
    address_size: u8,
    /// Byte offset of each operation, then the total length; `None` if some
    /// operation cannot be encoded (branches then fail).
    offsets: Option<Vec<usize>>,
    pc: usize,
    stack: Vec<Slot>,
    steps: u64,
    max_steps: u64,
    pending: Option<Pending>,
    complete: bool,
}

type Step = Result<Option<EvaluationResult>, EvalError>;

impl<'a> Evaluation<'a> {
    /// A new evaluation of `ops` (branch displacements are in bytes of
    /// `encoding`), with an empty initial stack.
    pub fn new(ops: &'a [Op], encoding: Encoding) -> Evaluation<'a> {
        let mut offsets = Vec::with_capacity(ops.len() + 1);
        let mut pos = 0usize;
        let mut ok = true;
        for op in ops {
            offsets.push(pos);
            match encode(core::slice::from_ref(op), encoding) {
                Ok(b) => pos += b.len(),
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        offsets.push(pos);
        Evaluation {
            ops,
            address_size: encoding.address_size.clamp(1, 8),
            offsets: ok.then_some(offsets),
            pc: 0,
            stack: Vec::new(),
            steps: 0,
            max_steps: DEFAULT_MAX_STEPS,
            pending: None,
            complete: false,
        }
    }

    /// Sets the maximum number of operations to execute (default
    /// [`DEFAULT_MAX_STEPS`]).
    pub fn set_max_steps(&mut self, max_steps: u64) {
        self.max_steps = max_steps;
    }

    /// Pushes an initial entry (e.g. an object address) before evaluating.
    pub fn push(&mut self, entry: Entry) {
        self.stack.push(Slot::Entry(entry));
    }

    /// Index of the next operation to execute (or of the one waiting for a
    /// request's answer).
    pub fn pc(&self) -> usize {
        self.pc
    }

    /// The current stack, bottom first; incomplete composites are shown as
    /// composites.
    pub fn stack(&self) -> Vec<Entry> {
        self.stack.iter().map(slot_entry).collect()
    }

    /// Runs until the end of the expression or a request.
    pub fn evaluate(&mut self) -> Result<EvaluationResult, Error> {
        if self.pending.is_some() {
            return Err(self.error(EvalError::BadResume(
                "evaluate() called while a request is outstanding",
            )));
        }
        self.run()
    }

    /// The result once [`EvaluationResult::Complete`]: the top stack entry
    /// (an incomplete composite is completed). `None` before completion or if
    /// the stack is empty.
    pub fn result(&self) -> Option<Entry> {
        if !self.complete {
            return None;
        }
        self.stack.last().map(slot_entry)
    }

    /// The result in a location context: a generic value becomes a memory
    /// location in address space 0; an empty stack is undefined.
    pub fn location_result(&self) -> Option<Location> {
        if !self.complete {
            return None;
        }
        match self.result() {
            None => Some(Location::undefined()),
            Some(Entry::Location(l)) => Some(l),
            Some(Entry::Value(v)) if v.ty == ValueType::Generic => {
                Some(Location::memory(0, v.bits))
            }
            Some(Entry::Value(_)) => None,
        }
    }

    /// Answers [`EvaluationResult::RequiresRegister`] with the register's
    /// contents (little-endian, the register's full size).
    pub fn resume_with_register(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        let a = self.address_size;
        let r = match self.pending.take() {
            Some(Pending::Breg {
                offset,
                address_space,
            }) => {
                let v = Value::from_bytes(ValueType::Generic, bytes, a);
                let addr = v.bits.wrapping_add(offset as u64);
                match address_space {
                    None => self.push_value(Value::generic(addr, a)),
                    Some(s) => {
                        let addr = Value::generic(addr, a).bits;
                        self.push_loc(Location::memory(s, addr));
                    }
                }
                Ok(())
            }
            Some(Pending::Regval) => {
                self.push_value(Value::from_bytes(ValueType::Generic, bytes, a));
                Ok(())
            }
            Some(Pending::DerefRegister { byte_offset, size }) => {
                let start = usize::try_from(byte_offset).unwrap_or(usize::MAX);
                match start
                    .checked_add(usize::from(size))
                    .and_then(|end| bytes.get(start..end))
                {
                    Some(b) => {
                        self.push_value(Value::from_bytes(ValueType::Generic, b, a));
                        Ok(())
                    }
                    None => Err(EvalError::ReadOutOfRange),
                }
            }
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no register was requested"))
            }
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresMemory`] with at least the
    /// requested number of bytes.
    pub fn resume_with_memory(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::DerefMemory { size }) => match bytes.get(..usize::from(size)) {
                Some(b) => {
                    self.push_value(Value::from_bytes(ValueType::Generic, b, self.address_size));
                    Ok(())
                }
                None => Err(EvalError::BadResume("fewer bytes than requested")),
            },
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no memory was requested"))
            }
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresLane`].
    pub fn resume_with_lane(&mut self, lane: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Lane) => {
                self.push_value(Value::generic(lane, self.address_size));
                Ok(())
            }
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no lane was requested"))
            }
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresFrameBase`] with the frame base
    /// address.
    pub fn resume_with_frame_base(&mut self, frame_base: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::FrameBase { offset }) => {
                let v = frame_base.wrapping_add(offset as u64);
                self.push_value(Value::generic(v, self.address_size));
                Ok(())
            }
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no frame base was requested"))
            }
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresCallFrameCfa`].
    pub fn resume_with_call_frame_cfa(&mut self, cfa: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::CallFrameCfa) => {
                let cfa = Value::generic(cfa, self.address_size).bits;
                self.push_loc(Location::memory(0, cfa));
                Ok(())
            }
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no CFA was requested"))
            }
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresObjectAddress`].
    pub fn resume_with_object_address(&mut self, address: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::ObjectAddress) => {
                let a = Value::generic(address, self.address_size).bits;
                self.push_loc(Location::memory(0, a));
                Ok(())
            }
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no object address was requested"))
            }
        };
        self.after_resume(r)
    }

    fn after_resume(&mut self, r: Result<(), EvalError>) -> Result<EvaluationResult, Error> {
        r.map_err(|e| self.error(e))?;
        self.pc += 1;
        self.run()
    }

    fn error(&self, error: EvalError) -> Error {
        Error::Eval {
            index: self.pc,
            op: self.ops.get(self.pc).map_or("end of expression", Op::name),
            error,
        }
    }

    fn run(&mut self) -> Result<EvaluationResult, Error> {
        while self.pc < self.ops.len() {
            self.steps += 1;
            if self.steps > self.max_steps {
                return Err(self.error(EvalError::StepLimitExceeded(self.max_steps)));
            }
            match self.step() {
                Ok(None) => {}
                Ok(Some(request)) => return Ok(request),
                Err(e) => return Err(self.error(e)),
            }
        }
        self.complete = true;
        Ok(EvaluationResult::Complete)
    }

    // -- stack helpers ------------------------------------------------------

    fn push_value(&mut self, v: Value) {
        self.stack.push(Slot::Entry(Entry::Value(v)));
    }

    fn push_loc(&mut self, l: Location) {
        self.stack.push(Slot::Entry(Entry::Location(l)));
    }

    fn pop_slot(&mut self) -> Result<Slot, EvalError> {
        self.stack.pop().ok_or(EvalError::StackUnderflow)
    }

    fn pop_value(&mut self) -> Result<Value, EvalError> {
        match self.pop_slot()? {
            Slot::Entry(Entry::Value(v)) => Ok(v),
            Slot::Entry(Entry::Location(l)) => match l.as_default_address() {
                Some(a) => Ok(Value::generic(a, self.address_size)),
                None => Err(EvalError::TypeMismatch(
                    "expected a value, found a location description that is not a memory address",
                )),
            },
            Slot::Incomplete(_) => Err(EvalError::TypeMismatch(
                "expected a value, found an incomplete composite",
            )),
        }
    }

    fn pop_location(&mut self) -> Result<Location, EvalError> {
        match self.pop_slot()? {
            Slot::Entry(Entry::Location(l)) => Ok(l),
            Slot::Entry(Entry::Value(v)) if v.ty == ValueType::Generic => {
                Ok(Location::memory(0, v.bits))
            }
            Slot::Entry(Entry::Value(_)) => Err(EvalError::TypeMismatch(
                "expected a location description, found a non-generic value",
            )),
            Slot::Incomplete(_) => Err(EvalError::TypeMismatch(
                "expected a location description, found an incomplete composite",
            )),
        }
    }

    fn peek(&self, depth: usize) -> Result<Slot, EvalError> {
        let len = self.stack.len();
        if depth >= len {
            return Err(EvalError::StackUnderflow);
        }
        Ok(self.stack[len - 1 - depth].clone())
    }

    fn need(&self, n: usize) -> Result<(), EvalError> {
        if self.stack.len() < n {
            Err(EvalError::StackUnderflow)
        } else {
            Ok(())
        }
    }

    fn reg(r: u64) -> Result<u16, EvalError> {
        u16::try_from(r).map_err(|_| EvalError::BadRegister(r))
    }

    fn value_err(e: ValueError) -> EvalError {
        match e {
            ValueError::TypeMismatch => {
                EvalError::TypeMismatch("operands have different base types")
            }
            ValueError::DivisionByZero => EvalError::DivisionByZero,
        }
    }

    // -- operations ---------------------------------------------------------

    fn binary(&mut self, op: BinaryOp) -> Result<(), EvalError> {
        self.need(2)?;
        let b = self.pop_value()?;
        let a = self.pop_value()?;
        let r = a
            .binary(op, b, self.address_size)
            .map_err(Self::value_err)?;
        self.push_value(r);
        Ok(())
    }

    fn compare(&mut self, op: CompareOp) -> Result<(), EvalError> {
        self.need(2)?;
        let b = self.pop_value()?;
        let a = self.pop_value()?;
        let r = a
            .compare(op, b, self.address_size)
            .map_err(Self::value_err)?;
        self.push_value(Value::generic(u64::from(r), self.address_size));
        Ok(())
    }

    fn unary(&mut self, op: UnaryOp) -> Result<(), EvalError> {
        let a = self.pop_value()?;
        self.push_value(a.unary(op, self.address_size));
        Ok(())
    }

    fn branch(&mut self, displacement: i16) -> Result<(), EvalError> {
        let offsets = self.offsets.as_ref().ok_or(EvalError::Unsupported(
            "branch in an expression that cannot be encoded",
        ))?;
        let next = offsets.get(self.pc + 1).copied().unwrap_or(0) as i64;
        let target = next + i64::from(displacement);
        let idx = usize::try_from(target)
            .ok()
            .and_then(|t| offsets.binary_search(&t).ok())
            .ok_or(EvalError::BadBranchTarget(target))?;
        self.pc = idx;
        Ok(())
    }

    fn offset(&mut self, bits: i128) -> Result<(), EvalError> {
        let mut l = self.pop_location()?;
        l.offset_bits(bits, self.address_size)
            .map_err(|_| EvalError::OffsetOutOfRange)?;
        self.push_loc(l);
        Ok(())
    }

    fn piece(&mut self, bit_size: u64, bit_offset: u64) -> Result<(), EvalError> {
        let mut loc = match self.stack.last() {
            None | Some(Slot::Incomplete(_)) => Location::undefined(),
            Some(Slot::Entry(_)) => self.pop_location()?,
        };
        if bit_offset != 0 {
            loc.offset_bits(i128::from(bit_offset), self.address_size)
                .map_err(|_| EvalError::OffsetOutOfRange)?;
        }
        let mut parts = match self.stack.last() {
            Some(Slot::Incomplete(_)) => match self.stack.pop() {
                Some(Slot::Incomplete(p)) => p,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        parts.push(Part {
            location: loc,
            bit_size,
        });
        self.stack.push(Slot::Incomplete(parts));
        Ok(())
    }

    /// Starts a read of `size` bytes through the location on top of the stack.
    fn deref(&mut self, size: u8) -> Step {
        if size == 0 || size > self.address_size {
            return Err(EvalError::BadSize(u64::from(size)));
        }
        let loc = self.pop_location()?;
        let Some(place) = loc.places.first() else {
            return Err(EvalError::UndefinedRead);
        };
        self.read(place, size)
    }

    fn read(&mut self, place: &SingleLocation, size: u8) -> Step {
        if !place.bit_offset.is_multiple_of(8) {
            return Err(EvalError::Unsupported("reads at a non-byte bit offset"));
        }
        let byte_offset = (place.bit_offset / 8) as u64;
        match &place.storage {
            Storage::Memory { address_space } => {
                self.pending = Some(Pending::DerefMemory { size });
                Ok(Some(EvaluationResult::RequiresMemory {
                    address: byte_offset,
                    size,
                    address_space: *address_space,
                }))
            }
            Storage::Register(r) => {
                self.pending = Some(Pending::DerefRegister { byte_offset, size });
                Ok(Some(EvaluationResult::RequiresRegister { register: *r }))
            }
            Storage::Implicit(bytes) => {
                let start = usize::try_from(byte_offset).map_err(|_| EvalError::ReadOutOfRange)?;
                let b = start
                    .checked_add(usize::from(size))
                    .and_then(|end| bytes.get(start..end))
                    .ok_or(EvalError::ReadOutOfRange)?;
                let v = Value::from_bytes(ValueType::Generic, b, self.address_size);
                self.push_value(v);
                self.pc += 1;
                Ok(None)
            }
            Storage::Undefined => Err(EvalError::UndefinedRead),
            Storage::ImplicitPointer { .. } => Err(EvalError::Unsupported(
                "reading through an implicit pointer",
            )),
            Storage::Composite(_) => Err(EvalError::Unsupported(
                "reading through a composite location",
            )),
        }
    }

    fn request(&mut self, p: Pending, r: EvaluationResult) -> Step {
        self.pending = Some(p);
        Ok(Some(r))
    }

    fn step(&mut self) -> Step {
        let a = self.address_size;
        let ops = self.ops;
        let op = &ops[self.pc];
        match op {
            Op::Lit(n) => self.push_value(Value::generic(u64::from(*n), a)),
            Op::Const1u(v) => self.push_value(Value::generic(u64::from(*v), a)),
            Op::Const2u(v) => self.push_value(Value::generic(u64::from(*v), a)),
            Op::Const4u(v) => self.push_value(Value::generic(u64::from(*v), a)),
            Op::Const8u(v) | Op::Constu(v) => self.push_value(Value::generic(*v, a)),
            Op::Const1s(v) => self.push_value(Value::generic(i64::from(*v) as u64, a)),
            Op::Const2s(v) => self.push_value(Value::generic(i64::from(*v) as u64, a)),
            Op::Const4s(v) => self.push_value(Value::generic(i64::from(*v) as u64, a)),
            Op::Const8s(v) | Op::Consts(v) => self.push_value(Value::generic(*v as u64, a)),
            Op::Addr(addr) => {
                let addr = Value::generic(*addr, a).bits;
                self.push_loc(Location::memory(0, addr));
            }
            Op::Dup => {
                let s = self.peek(0)?;
                self.stack.push(s);
            }
            Op::Drop => {
                self.pop_slot()?;
            }
            Op::Over => {
                let s = self.peek(1)?;
                self.stack.push(s);
            }
            Op::Pick(i) => {
                let s = self.peek(usize::from(*i))?;
                self.stack.push(s);
            }
            Op::Swap => {
                self.need(2)?;
                let len = self.stack.len();
                self.stack.swap(len - 1, len - 2);
            }
            Op::Rot => {
                self.need(3)?;
                let len = self.stack.len();
                // [.., a, b, c] -> [.., c, a, b]
                self.stack[len - 3..].rotate_right(1);
            }
            Op::Abs => self.unary(UnaryOp::Abs)?,
            Op::Neg => self.unary(UnaryOp::Neg)?,
            Op::Not => self.unary(UnaryOp::Not)?,
            Op::And => self.binary(BinaryOp::And)?,
            Op::Div => self.binary(BinaryOp::Div)?,
            Op::Minus => self.binary(BinaryOp::Minus)?,
            Op::Mod => self.binary(BinaryOp::Mod)?,
            Op::Mul => self.binary(BinaryOp::Mul)?,
            Op::Or => self.binary(BinaryOp::Or)?,
            Op::Plus => self.binary(BinaryOp::Plus)?,
            Op::Shl => self.binary(BinaryOp::Shl)?,
            Op::Shr => self.binary(BinaryOp::Shr)?,
            Op::Shra => self.binary(BinaryOp::Shra)?,
            Op::Xor => self.binary(BinaryOp::Xor)?,
            Op::PlusUconst(n) => {
                let v = self.pop_value()?;
                let rhs = Value::new(v.ty, *n, a);
                let r = v.binary(BinaryOp::Plus, rhs, a).map_err(Self::value_err)?;
                self.push_value(r);
            }
            Op::Eq => self.compare(CompareOp::Eq)?,
            Op::Ge => self.compare(CompareOp::Ge)?,
            Op::Gt => self.compare(CompareOp::Gt)?,
            Op::Le => self.compare(CompareOp::Le)?,
            Op::Lt => self.compare(CompareOp::Lt)?,
            Op::Ne => self.compare(CompareOp::Ne)?,
            Op::Skip(d) => {
                let d = *d;
                self.branch(d)?;
                return Ok(None);
            }
            Op::Bra(d) => {
                let d = *d;
                let v = self.pop_value()?;
                if v.bits != 0 {
                    self.branch(d)?;
                    return Ok(None);
                }
            }
            Op::Reg(r) => self.push_loc(Location::register(u16::from(*r))),
            Op::Regx(r) => {
                let r = Self::reg(*r)?;
                self.push_loc(Location::register(r));
            }
            Op::Breg(r, offset) => {
                let (register, offset) = (u16::from(*r), *offset);
                return self.request(
                    Pending::Breg {
                        offset,
                        address_space: None,
                    },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::Bregx(r, offset) => {
                let (register, offset) = (Self::reg(*r)?, *offset);
                return self.request(
                    Pending::Breg {
                        offset,
                        address_space: None,
                    },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::AspaceBregx { register, offset } => {
                let (register, offset) = (Self::reg(*register)?, *offset);
                let space = self.pop_value()?;
                return self.request(
                    Pending::Breg {
                        offset,
                        address_space: Some(space.bits),
                    },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::RegvalType {
                register,
                type_offset,
            } => {
                if *type_offset != 0 {
                    return Err(EvalError::Unsupported(
                        "base types other than generic need the type DIE",
                    ));
                }
                let register = Self::reg(*register)?;
                return self.request(
                    Pending::Regval,
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::Fbreg(offset) => {
                let offset = *offset;
                return self.request(
                    Pending::FrameBase { offset },
                    EvaluationResult::RequiresFrameBase,
                );
            }
            Op::CallFrameCfa => {
                return self.request(
                    Pending::CallFrameCfa,
                    EvaluationResult::RequiresCallFrameCfa,
                )
            }
            Op::PushObjectAddress => {
                return self.request(
                    Pending::ObjectAddress,
                    EvaluationResult::RequiresObjectAddress,
                )
            }
            Op::PushLane => return self.request(Pending::Lane, EvaluationResult::RequiresLane),
            Op::Deref => return self.deref(a),
            Op::DerefSize(n) => {
                let n = *n;
                return self.deref(n);
            }
            Op::DerefType { size, type_offset } => {
                if *type_offset != 0 {
                    return Err(EvalError::Unsupported(
                        "base types other than generic need the type DIE",
                    ));
                }
                let n = *size;
                return self.deref(n);
            }
            Op::Xderef | Op::XderefSize(_) => {
                let size = match op {
                    Op::XderefSize(n) => *n,
                    _ => a,
                };
                if size == 0 || size > a {
                    return Err(EvalError::BadSize(u64::from(size)));
                }
                self.need(2)?;
                let space = self.pop_value()?;
                let addr = self.pop_value()?;
                let place = SingleLocation::memory(space.bits, addr.bits);
                return self.read(&place, size);
            }
            Op::FormAspaceAddress => {
                self.need(2)?;
                let space = self.pop_value()?;
                let addr = self.pop_value()?;
                self.push_loc(Location::memory(space.bits, addr.bits));
            }
            Op::Offset => {
                self.need(2)?;
                let v = self.pop_value()?;
                self.offset(i128::from(v.to_i64(a)) * 8)?;
            }
            Op::OffsetUconst(n) => self.offset(i128::from(*n) * 8)?,
            Op::BitOffset => {
                self.need(2)?;
                let v = self.pop_value()?;
                self.offset(i128::from(v.to_i64(a)))?;
            }
            Op::Piece(n) => {
                let bits = n.checked_mul(8).ok_or(EvalError::BadSize(*n))?;
                self.piece(bits, 0)?;
            }
            Op::BitPiece { size, offset } => {
                let (size, offset) = (*size, *offset);
                self.piece(size, offset)?;
            }
            Op::PieceEnd => match self.pop_slot()? {
                Slot::Incomplete(parts) => self.push_loc(Location::composite(parts)),
                _ => {
                    return Err(EvalError::TypeMismatch(
                        "DW_OP_piece_end needs an incomplete composite on top of the stack",
                    ))
                }
            },
            Op::ImplicitValue(bytes) => {
                let l = Location::single(Storage::Implicit(bytes.clone()), 0);
                self.push_loc(l);
            }
            Op::StackValue => {
                let v = self.pop_value()?;
                self.push_loc(Location::single(Storage::Implicit(v.to_bytes(a)), 0));
            }
            Op::ImplicitPointer { die, offset } => {
                let l = Location::single(
                    Storage::ImplicitPointer {
                        die: *die,
                        byte_offset: *offset,
                    },
                    0,
                );
                self.push_loc(l);
            }
            Op::Undefined => self.push_loc(Location::undefined()),
            Op::Nop => {}
            _ => return Err(EvalError::Unsupported("operation not implemented yet")),
        }
        self.pc += 1;
        Ok(None)
    }
}

fn slot_entry(s: &Slot) -> Entry {
    match s {
        Slot::Entry(e) => e.clone(),
        Slot::Incomplete(parts) => Entry::Location(Location::composite(parts.clone())),
    }
}
