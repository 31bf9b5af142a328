//! The pause-and-resume evaluator (spec 001, "Stack Location Description
//! Operations").
//!
//! Design: like gimli's `Evaluation`, [`Evaluation::evaluate`] runs until the
//! expression ends or it needs something only the caller knows (a register,
//! memory, the current lane, the frame base, a base type DIE, a called
//! expression, ...). It then returns an [`EvaluationResult`] request; the
//! caller answers with the matching `resume_with_*` method, which continues
//! the evaluation. No callbacks, no trait objects, no I/O: the caller may
//! answer from a live process, a core file or a JSON snapshot, synchronously
//! or not, and the evaluator never needs a lifetime or a generic parameter
//! for it. The only allocations are the stack, the location descriptions
//! other than the common compact ones (a value; one register; one
//! byte-aligned memory place; the implicit bytes of a value) while they are
//! on the stack (a composite's vector of parts is kept by
//! [`Evaluation::restart`] for the next one), an entry-value or implicit
//! value block longer than 16 bytes and, for `DW_OP_call*`, the decoded
//! callee. Stack slots are 32 bytes, written in place: pushing and popping
//! them is most of the hot loop's memory traffic.
//!
//! Two ways in: [`Evaluation::new`] runs decoded [`Op`]s (from
//! [`parse_text`](crate::parse_text) or [`decode`]);
//! [`Evaluation::from_bytes`] runs the encoded bytes directly, decoding each
//! operation as it executes it (the common ones without building an `Op`),
//! as gimli does. For many expressions, [`Evaluation::restart`] (or
//! [`Evaluation::into_buffers`] and [`Evaluation::from_bytes_in`]) keeps the
//! stack's allocation from one to the next, and [`Evaluation::result_ref`]
//! borrows the result instead of cloning it.
//!
//! Each stack entry is an [`Entry`]: a typed [`Value`] or a [`LocationDescription`]
//! description. Generic values convert implicitly to memory locations in
//! address space 0 where a location is needed, and such locations convert
//! back to generic values (their address) where a value is needed.
//!
//! | request | answer with |
//! |---|---|
//! | [`RequiresRegister`](EvaluationResult::RequiresRegister) | [`resume_with_register`](Evaluation::resume_with_register) |
//! | [`RequiresMemory`](EvaluationResult::RequiresMemory) | [`resume_with_memory`](Evaluation::resume_with_memory) |
//! | [`RequiresLane`](EvaluationResult::RequiresLane) | [`resume_with_lane`](Evaluation::resume_with_lane) |
//! | [`RequiresFrameBase`](EvaluationResult::RequiresFrameBase) | [`resume_with_frame_base`](Evaluation::resume_with_frame_base) |
//! | [`RequiresCallFrameCfa`](EvaluationResult::RequiresCallFrameCfa) | [`resume_with_call_frame_cfa`](Evaluation::resume_with_call_frame_cfa) |
//! | [`RequiresObjectAddress`](EvaluationResult::RequiresObjectAddress) | [`resume_with_object_address`](Evaluation::resume_with_object_address) or [`resume_with_object_location`](Evaluation::resume_with_object_location) |
//! | [`RequiresBaseType`](EvaluationResult::RequiresBaseType) | [`resume_with_base_type`](Evaluation::resume_with_base_type) |
//! | [`RequiresEntryValue`](EvaluationResult::RequiresEntryValue) | [`resume_with_entry_value`](Evaluation::resume_with_entry_value) |
//! | [`RequiresCallee`](EvaluationResult::RequiresCallee) | [`resume_with_callee`](Evaluation::resume_with_callee) |
//! | [`RequiresIndexedAddress`](EvaluationResult::RequiresIndexedAddress) | [`resume_with_indexed_address`](Evaluation::resume_with_indexed_address) |
//! | [`RequiresTlsAddress`](EvaluationResult::RequiresTlsAddress) | [`resume_with_tls_address`](Evaluation::resume_with_tls_address) |
//! | [`RequiresEntryRegister`](EvaluationResult::RequiresEntryRegister) | [`resume_with_entry_register`](Evaluation::resume_with_entry_register) |
//! | [`Stepped`](EvaluationResult::Stepped) (only with [`set_trace`](Evaluation::set_trace)) | [`evaluate`](Evaluation::evaluate) |
//!
//! Limits keep every input finite: [`DEFAULT_MAX_STEPS`] operations (loops),
//! [`MAX_STACK`] entries, [`MAX_LOCATION_WEIGHT`] single locations and parts
//! per location description (`DW_OP_extend` and friends), [`MAX_CALL_DEPTH`]
//! nested `DW_OP_call*`.
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

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::access::{plan_read, Bits, Fetch, Place};
use crate::error::Error;
use crate::location::{Bytes, LocationDescription, Part, Storage};
use crate::op::{byte_offsets, decode, decode_at, op_offsets, Encoding, Op};
use crate::value::{BinaryOp, CompareOp, UnaryOp, Value, ValueError, ValueType};

/// Default maximum number of operations one evaluation may execute.
pub const DEFAULT_MAX_STEPS: u64 = 100_000;

/// Maximum number of stack entries.
pub const MAX_STACK: usize = 1024;

/// Maximum [`Location::weight`] of a location description the evaluator
/// builds (composites, `DW_OP_extend`, `DW_OP_select_bit_piece`).
pub const MAX_LOCATION_WEIGHT: usize = 1024;

/// Maximum nesting of `DW_OP_call2`/`call4`/`call_ref`.
pub const MAX_CALL_DEPTH: usize = 64;

/// log2 of [`MAX_LOCATION_WEIGHT`] (a power of two).
const LARGE_PART_SHIFT: u32 = MAX_LOCATION_WEIGHT.trailing_zeros();
const _: () = assert!(MAX_LOCATION_WEIGHT.is_power_of_two());

// Slots are written in place in the hot loop: keep them 32 bytes.
const _: () = assert!(core::mem::size_of::<Slot>() == 32);

const STACK_OP_ON_INCOMPLETE: &str =
    "a stack operation accesses an incomplete composite location description";

/// A stack entry: a value or a location description.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// A typed value.
    Value(Value),
    /// A location description.
    Location(LocationDescription),
}

impl Entry {
    /// The entry where a value is needed: a value as it is, a memory
    /// location in address space 0 as its address (a generic value, DWARF
    /// 5's implicit conversion); `None` for any other location.
    pub fn to_value(&self, address_size: u8) -> Option<Value> {
        match self {
            Entry::Value(v) => Some(*v),
            Entry::Location(l) => l
                .as_default_address()
                .map(|a| Value::generic(a, address_size)),
        }
    }

    /// The entry where a location is needed (a variable's `DW_AT_location`,
    /// bytes to read or write): a location as it is, a generic value as a
    /// memory location in address space 0 (DWARF 5), a typed value as
    /// implicit storage holding its bytes (the object's bits).
    pub fn into_location(self, address_size: u8) -> LocationDescription {
        match self {
            Entry::Location(l) => l,
            Entry::Value(v) if v.ty == ValueType::Generic => LocationDescription::memory(0, v.bits),
            Entry::Value(v) => {
                LocationDescription::single(Storage::Implicit(v.to_bytes(address_size).into()), 0)
            }
        }
    }
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
    /// Answer with [`Evaluation::resume_with_object_address`] or
    /// [`Evaluation::resume_with_object_location`].
    RequiresObjectAddress,
    /// A typed operation names the base type DIE at unit offset `offset`:
    /// answer with [`Evaluation::resume_with_base_type`] and the DIE's
    /// `DW_AT_encoding` and `DW_AT_byte_size`. Answers are remembered for the
    /// rest of the evaluation (see also [`Evaluation::set_base_type`]).
    RequiresBaseType {
        /// Unit-relative offset of the `DW_TAG_base_type` DIE.
        offset: u64,
    },
    /// `DW_OP_entry_value`: answer with [`Evaluation::resume_with_entry_value`]
    /// and what `expression` had on entry to the current function (from a
    /// call site's `DW_AT_call_value`, or a debugger's saved state).
    RequiresEntryValue {
        /// The encoded nested expression (same [`Encoding`]); short ones,
        /// the usual case, are stored inline (no allocation per request).
        expression: Bytes,
        /// The register if the nested expression is only `DW_OP_regN` or
        /// `DW_OP_regx N` (the usual case: "register N's value on entry").
        register: Option<u16>,
    },
    /// `DW_OP_call2`/`call4`/`call_ref`: answer with
    /// [`Evaluation::resume_with_callee`] and the bytes of the DIE's
    /// `DW_AT_location` expression (empty if it has none).
    RequiresCallee {
        /// The DIE's offset.
        offset: u64,
        /// Whether `offset` is relative to the current unit (`call2`,
        /// `call4`) or to `.debug_info` (`call_ref`).
        unit_relative: bool,
    },
    /// `DW_OP_addrx` (a location) or `DW_OP_constx` (a value): answer with
    /// [`Evaluation::resume_with_indexed_address`] and entry `index` of the
    /// unit's `.debug_addr` table.
    RequiresIndexedAddress {
        /// Index into `.debug_addr` (after the unit's `DW_AT_addr_base`).
        index: u64,
        /// `true` for `DW_OP_addrx`, `false` for `DW_OP_constx`.
        is_address: bool,
    },
    /// `DW_OP_form_tls_address`: answer with
    /// [`Evaluation::resume_with_tls_address`] and the address of the
    /// thread-local storage at `offset` for the current thread.
    RequiresTlsAddress {
        /// The popped TLS offset.
        offset: u64,
    },
    /// `DW_OP_call_frame_entry_reg`: answer with
    /// [`Evaluation::resume_with_entry_register`] and the location holding
    /// the register's value on entry to the current function (from CFI;
    /// [`Location::undefined`] if unknown, [`Location::register`] if it was
    /// not saved).
    RequiresEntryRegister {
        /// DWARF register number.
        register: u16,
    },
    /// Only with [`Evaluation::set_trace`]: one operation has been executed
    /// ([`Evaluation::stack`] shows its effect, [`Evaluation::pc`] the next
    /// one). Continue with [`Evaluation::evaluate`].
    Stepped,
}

/// What went wrong while evaluating one operation (or accessing a location).
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
    /// A size operand larger than the address size or than its type, a
    /// `DW_OP_const_type` block of the wrong size, or a piece too large.
    BadSize(u64),
    /// The caller answered a request wrongly (wrong method, too few bytes).
    BadResume(&'static str),
    /// Not supported by this evaluator (yet).
    Unsupported(&'static str),
    /// The base type DIE the caller described cannot be computed with
    /// (unknown encoding, a size other than 1, 2, 4, 8, or 4/8 for floats).
    UnsupportedBaseType {
        /// Unit offset of the DIE.
        offset: u64,
        /// Its `DW_AT_encoding`.
        encoding: u8,
        /// Its `DW_AT_byte_size`.
        byte_size: u64,
    },
    /// The target could not read or write this memory.
    MemoryUnavailable {
        /// Address space.
        address_space: u64,
        /// First byte.
        address: u64,
        /// Number of bytes.
        size: u64,
    },
    /// The target could not read or write this register (unknown, or the
    /// access goes past its end).
    RegisterUnavailable {
        /// DWARF register number.
        register: u16,
    },
    /// `DW_OP_overlay`/`DW_OP_bit_overlay` with a negative size or offset,
    /// or an overlay past the end of the base location's storage.
    BadOverlay(&'static str),
    /// An expression the normative text calls ill-formed, in its words: a
    /// part past the end of its storage, a composite larger than an address
    /// space, `DW_OP_extend`/`DW_OP_select_bit_piece` with a zero size or
    /// count, an incomplete composite where a stack operation, a value or a
    /// location description is needed, a lane outside the lanes set with
    /// [`Evaluation::set_lane_count`].
    IllFormed(&'static str),
    /// A write to storage that cannot be written (implicit, undefined).
    NotWritable(&'static str),
    /// A limit on the size of the stack, of a location description or of an
    /// access was reached.
    TooLarge(&'static str),
    /// `DW_OP_call*` nested deeper than [`MAX_CALL_DEPTH`] (recursion).
    CallDepthExceeded(usize),
    /// The callee's expression bytes do not decode.
    IllFormedCallee(String),
    /// An error inside an expression run by `DW_OP_call*`: the callee's
    /// operation index and name, and the error.
    InCall {
        /// Index of the operation within the callee's expression.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// What went wrong.
        error: Box<EvalError>,
    },
}

impl core::error::Error for EvalError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            EvalError::InCall { error, .. } => Some(&**error),
            _ => None,
        }
    }
}

impl EvalError {
    /// Whether the error shows the expression is ill-formed (an operand no
    /// evaluation could accept) rather than a failure of this evaluation.
    pub fn is_ill_formed(&self) -> bool {
        match self {
            EvalError::BadBranchTarget(_)
            | EvalError::BadRegister(_)
            | EvalError::BadSize(_)
            | EvalError::BadOverlay(_)
            | EvalError::IllFormed(_)
            | EvalError::IllFormedCallee(_) => true,
            EvalError::InCall { error, .. } => error.is_ill_formed(),
            _ => false,
        }
    }
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
            EvalError::BadOverlay(what) => write!(f, "ill-formed overlay: {what}"),
            EvalError::IllFormed(what) => write!(f, "ill-formed: {what}"),
            EvalError::BadResume(what) => write!(f, "bad resume: {what}"),
            EvalError::Unsupported(what) => write!(f, "unsupported: {what}"),
            EvalError::UnsupportedBaseType {
                offset,
                encoding,
                byte_size,
            } => write!(
                f,
                "base type DIE {offset:#x} (encoding {encoding:#x}, {byte_size} bytes) is not supported"
            ),
            EvalError::MemoryUnavailable {
                address_space,
                address,
                size,
            } => write!(
                f,
                "cannot access {size} bytes of memory at {address:#x} (address space {address_space})"
            ),
            EvalError::RegisterUnavailable { register } => {
                write!(f, "cannot access register {register}")
            }
            EvalError::NotWritable(what) => write!(f, "cannot write to {what}"),
            EvalError::TooLarge(what) => write!(f, "too large: {what}"),
            EvalError::CallDepthExceeded(n) => {
                write!(f, "DW_OP_call nesting deeper than {n} (recursion?)")
            }
            EvalError::IllFormedCallee(e) => write!(f, "ill-formed callee expression: {e}"),
            EvalError::InCall { index, op, error } => {
                write!(f, "in the called expression, op #{index} {op}: {error}")
            }
        }
    }
}

/// An internal stack slot: an entry, or an incomplete composite (only
/// `DW_OP_piece`, `DW_OP_bit_piece` and `DW_OP_piece_end` consume these)
/// with its weight. The entries compiled code pushes most (values, one
/// register, one byte of memory, a `DW_OP_stack_value`) have compact forms
/// so that a slot is 32 bytes, not an [`Entry`]'s 64: pushing and popping
/// them is the hot loop's main memory traffic. Anything else is boxed.
#[derive(Clone, Debug)]
enum Slot {
    Value(Value),
    /// One register place.
    Register {
        register: u16,
        bit_offset: u64,
    },
    /// One byte-aligned memory place.
    Memory {
        address_space: u64,
        address: u64,
    },
    /// One implicit place at offset 0 holding the first `len` (at most 8)
    /// little-endian bytes of `bytes`.
    Implicit {
        len: u8,
        bytes: u64,
    },
    Entry(Box<Entry>),
    /// The parts, their weight and whether one is larger than
    /// 1/[`MAX_LOCATION_WEIGHT`] of an address space (then the composite's
    /// size is checked at each piece).
    Incomplete(Vec<Part>, u32, bool),
}

impl Slot {
    fn location(l: LocationDescription) -> Slot {
        if let [p] = l.places.as_slice() {
            match &p.storage {
                Storage::Register(register) => {
                    if let Ok(bit_offset) = u64::try_from(p.bit_offset) {
                        return Slot::Register {
                            register: *register,
                            bit_offset,
                        };
                    }
                }
                Storage::Memory { address_space } if p.bit_offset % 8 == 0 => {
                    if let Ok(address) = u64::try_from(p.bit_offset / 8) {
                        return Slot::Memory {
                            address_space: *address_space,
                            address,
                        };
                    }
                }
                Storage::Implicit(b) if p.bit_offset == 0 && b.len() <= 8 => {
                    let mut bytes = [0u8; 8];
                    bytes[..b.len()].copy_from_slice(b);
                    return Slot::Implicit {
                        len: b.len() as u8,
                        bytes: u64::from_le_bytes(bytes),
                    };
                }
                _ => {}
            }
        }
        Slot::Entry(Box::new(Entry::Location(l)))
    }

    fn entry(e: Entry) -> Slot {
        match e {
            Entry::Value(v) => Slot::Value(v),
            Entry::Location(l) => Slot::location(l),
        }
    }

    /// The entry; an incomplete composite is completed.
    fn into_entry(self) -> Entry {
        match self {
            Slot::Value(v) => Entry::Value(v),
            Slot::Register {
                register,
                bit_offset,
            } => Entry::Location(LocationDescription::single(
                Storage::Register(register),
                u128::from(bit_offset),
            )),
            Slot::Memory {
                address_space,
                address,
            } => Entry::Location(LocationDescription::memory(address_space, address)),
            Slot::Implicit { len, bytes } => Entry::Location(LocationDescription::single(
                Storage::Implicit(Bytes::from_le(bytes, len)),
                0,
            )),
            Slot::Entry(e) => *e,
            Slot::Incomplete(parts, ..) => Entry::Location(LocationDescription::composite(parts)),
        }
    }
}

#[derive(Clone, Debug)]
enum Pending {
    /// breg/bregx/aspace_bregx: register value + offset.
    Breg {
        offset: i64,
        address_space: Option<u64>,
    },
    /// regval_type.
    Regval {
        ty: ValueType,
    },
    /// A deref of `size` whole bytes at a byte offset of one register
    /// (`register_offset`) or memory: the common case, without allocation.
    ReadSimple {
        ty: ValueType,
        size: u8,
        register_offset: Option<usize>,
    },
    /// A deref: the bits so far and the register/memory accesses left.
    Read {
        ty: ValueType,
        bits: Bits,
        fetches: Vec<Fetch>,
        next: usize,
    },
    Lane,
    FrameBase {
        offset: i64,
    },
    CallFrameCfa,
    ObjectAddress,
    BaseType {
        offset: u64,
    },
    EntryValue,
    Callee,
    IndexedAddress {
        is_address: bool,
    },
    Tls,
    EntryRegister,
}

/// Byte offsets of the root expression's operations, then its length.
#[derive(Clone, Debug)]
enum RootOffsets<'a> {
    /// Not needed yet: computed by encoding at the first branch.
    Unknown,
    /// Computed, or given; `None` if some operation cannot be encoded.
    Computed(Option<Vec<usize>>),
    /// Given by the caller.
    Borrowed(&'a [usize]),
}

fn check_offsets(ops: &[Op], offsets: &[usize]) -> Result<(), Error> {
    let increasing = offsets.windows(2).all(|w| w[0] < w[1]);
    if offsets.len() != ops.len() + 1 || !increasing {
        return Err(Error::BadEncoding {
            what: "byte offsets must be one per operation plus the length, increasing",
        });
    }
    Ok(())
}

/// A called expression (`DW_OP_call*`), decoded.
#[derive(Clone, Debug)]
struct Code {
    ops: Vec<Op>,
    offsets: Vec<usize>,
}

/// The reusable allocations of an [`Evaluation`] (its stack, call returns and
/// the vector of a composite's parts), carried from one expression to the next with
/// [`Evaluation::into_buffers`] and [`Evaluation::from_bytes_in`].
#[derive(Debug, Default)]
pub struct Buffers {
    stack: Vec<Slot>,
    returns: Vec<(Option<Arc<Code>>, usize)>,
    base_types: Vec<(u64, ValueType)>,
    parts: Vec<Part>,
}

/// A pause-and-resume evaluation of one expression.
#[derive(Clone, Debug)]
pub struct Evaluation<'a> {
    ops: &'a [Op],
    /// The root expression's bytes when evaluating straight from them
    /// ([`Evaluation::from_bytes`]); `ops` is then empty.
    bytes: Option<&'a [u8]>,
    /// From bytes: the byte offset of the root operation at `pc` (or waiting
    /// at a call), and of the one after it.
    byte_pc: usize,
    next_byte: usize,
    encoding: Encoding,
    address_size: u8,
    /// Byte offset of each root operation, then the total length; computed
    /// at the first branch. `Some(None)`: some operation cannot be encoded.
    root_offsets: RootOffsets<'a>,
    /// The called expression being run, if any.
    callee: Option<Arc<Code>>,
    /// Callers of the running expression: their code and the index of the
    /// call operation.
    returns: Vec<(Option<Arc<Code>>, usize)>,
    pc: usize,
    stack: Vec<Slot>,
    steps: u64,
    max_steps: u64,
    pending: Option<Pending>,
    /// The request the last step stopped for (see [`Step`]).
    asked: Option<EvaluationResult>,
    complete: bool,
    /// Once complete, the result, moved off the stack (so a compact slot
    /// becomes an [`Entry`] that can be borrowed).
    top: Option<Entry>,
    base_types: Vec<(u64, ValueType)>,
    /// An empty vector with room for parts, from an earlier composite: the
    /// next `DW_OP_piece` starting a composite fills it instead of
    /// allocating one.
    parts: Vec<Part>,
    trace: bool,
    /// Register sizes in bits the caller gave ([`Evaluation::set_register_size`]):
    /// offsets and parts in these registers are checked against them.
    register_sizes: Vec<(u16, u64)>,
    /// `DW_AT_LLVM_lanes`, if the caller gave it ([`Evaluation::set_lane_count`]).
    lanes: Option<u64>,
}

/// What one operation (or an answer) led to: `Ok` goes on, or stops with
/// the request it stored in `Evaluation::asked`. One pointer wide on purpose
/// (the error is boxed, the request kept aside): the hot loop passes one of
/// these per operation, and a larger result type made that copy stall.
type Step = Result<(), Box<EvalError>>;

impl<'a> Evaluation<'a> {
    /// A new evaluation of `ops` (branch displacements are in bytes of
    /// `encoding`), with an empty initial stack.
    pub fn new(ops: &'a [Op], encoding: Encoding) -> Evaluation<'a> {
        Evaluation {
            ops,
            bytes: None,
            byte_pc: 0,
            next_byte: 0,
            encoding,
            address_size: encoding.address_size.clamp(1, 8),
            root_offsets: RootOffsets::Unknown,
            callee: None,
            returns: Vec::new(),
            pc: 0,
            stack: Vec::new(),
            steps: 0,
            max_steps: DEFAULT_MAX_STEPS,
            pending: None,
            asked: None,
            complete: false,
            top: None,
            base_types: Vec::new(),
            parts: Vec::new(),
            trace: false,
            register_sizes: Vec::new(),
            lanes: None,
        }
    }

    /// A new evaluation of the encoded expression `bytes`, decoding each
    /// operation as it is executed (as gimli does): nothing is materialised
    /// and, with [`Evaluation::restart`], nothing is allocated for
    /// expressions whose stack entries are values, single places and short
    /// implicit bytes. An invalid [`Encoding`] is reported by the first
    /// [`Evaluation::evaluate`]. Operation indices
    /// ([`Evaluation::pc`], errors) count operations from the start, as for
    /// [`Evaluation::new`] on the decoded operations. Unlike [`decode`],
    /// bytes are only checked as they are reached: an ill-formed operation
    /// (or branch target) is reported when executed, as the decoding
    /// [`Error`] naming its byte offset.
    pub fn from_bytes(bytes: &'a [u8], encoding: Encoding) -> Evaluation<'a> {
        let mut eval = Evaluation::new(&[], encoding);
        eval.bytes = Some(bytes);
        eval
    }

    /// A fresh evaluation of `bytes` (as [`Evaluation::from_bytes`]) that
    /// reuses this one's buffers (stack, call returns, base types), so that
    /// a caller evaluating many expressions allocates them once. Keeps the
    /// step limit, the trace setting, the register sizes and the lane count;
    /// forgets the base types.
    pub fn reuse<'b>(mut self, bytes: &'b [u8], encoding: Encoding) -> Evaluation<'b> {
        let (max_steps, trace, lanes) = (self.max_steps, self.trace, self.lanes);
        let register_sizes = core::mem::take(&mut self.register_sizes);
        let mut eval = Evaluation::from_bytes_in(bytes, encoding, self.into_buffers());
        eval.max_steps = max_steps;
        eval.trace = trace;
        eval.register_sizes = register_sizes;
        eval.lanes = lanes;
        eval
    }

    /// Starts over on `bytes` (as [`Evaluation::from_bytes`]) in place,
    /// keeping this evaluation's buffers, step limit, trace setting, register
    /// sizes and lane count, and forgetting its base types: the cheapest way to evaluate many
    /// expressions that live as long as the evaluation (e.g. all borrowed
    /// from one loaded binary).
    #[inline]
    pub fn restart(&mut self, bytes: &'a [u8], encoding: Encoding) {
        // After an evaluation almost everything is already empty: one test
        // of it all, and the clearing out of line, keep this small enough to
        // inline into the caller's loop.
        if self.needs_clearing() {
            self.clear_state();
        }
        // Nothing to free (`needs_clearing`): skip the drop code.
        core::mem::forget(self.top.take());
        self.ops = &[];
        self.bytes = Some(bytes);
        self.byte_pc = 0;
        self.next_byte = 0;
        self.encoding = encoding;
        self.address_size = encoding.address_size.clamp(1, 8);
        self.pc = 0;
        self.steps = 0;
        self.complete = false;
    }

    /// Whether `restart` has anything to free or empty besides plain fields.
    #[inline(always)]
    fn needs_clearing(&self) -> bool {
        !matches!(self.root_offsets, RootOffsets::Unknown)
            | self.callee.is_some()
            | !self.returns.is_empty()
            | !self.stack.is_empty()
            | self.pending.is_some()
            | self.asked.is_some()
            | !self.base_types.is_empty()
            | self.top.as_ref().is_some_and(owns_memory)
    }

    #[cold]
    #[inline(never)]
    fn clear_state(&mut self) {
        self.root_offsets = RootOffsets::Unknown;
        self.callee = None;
        self.returns.clear();
        self.stack.clear();
        self.pending = None;
        self.asked = None;
        self.base_types.clear();
        // A composite result's vector of parts is kept for the next one.
        if let Some(Entry::Location(mut l)) = self.top.take() {
            if let [p] = l.places.as_mut_slice() {
                if let Storage::Composite(parts) = &mut p.storage {
                    if parts.capacity() > self.parts.capacity() {
                        parts.clear();
                        core::mem::swap(parts, &mut self.parts);
                    }
                }
            }
        }
    }

    /// The evaluation's buffers, emptied, for
    /// [`Evaluation::from_bytes_in`]: keep them between expressions so
    /// that evaluating many allocates the stack once.
    pub fn into_buffers(self) -> Buffers {
        let Evaluation {
            mut returns,
            mut stack,
            mut base_types,
            parts,
            ..
        } = self;
        returns.clear();
        stack.clear();
        base_types.clear();
        Buffers {
            stack,
            returns,
            base_types,
            parts,
        }
    }

    /// [`Evaluation::from_bytes`] using `buffers` (from
    /// [`Evaluation::into_buffers`], or [`Buffers::default`]).
    pub fn from_bytes_in(bytes: &'a [u8], encoding: Encoding, buffers: Buffers) -> Evaluation<'a> {
        let Buffers {
            mut stack,
            mut returns,
            mut base_types,
            mut parts,
        } = buffers;
        stack.clear();
        returns.clear();
        base_types.clear();
        parts.clear();
        Evaluation {
            ops: &[],
            bytes: Some(bytes),
            byte_pc: 0,
            next_byte: 0,
            encoding,
            address_size: encoding.address_size.clamp(1, 8),
            root_offsets: RootOffsets::Unknown,
            callee: None,
            returns,
            pc: 0,
            stack,
            steps: 0,
            max_steps: DEFAULT_MAX_STEPS,
            pending: None,
            asked: None,
            complete: false,
            top: None,
            base_types,
            parts,
            trace: false,
            register_sizes: Vec::new(),
            lanes: None,
        }
    }

    /// Sets the maximum number of operations to execute (default
    /// [`DEFAULT_MAX_STEPS`]).
    pub fn set_max_steps(&mut self, max_steps: u64) {
        self.max_steps = max_steps;
    }

    /// Stops after every executed operation with
    /// [`EvaluationResult::Stepped`], so a debugger can show the stack step
    /// by step (`locus dwarf eval --trace`).
    pub fn set_trace(&mut self, trace: bool) {
        self.trace = trace;
    }

    /// Tells the evaluation the type of the base type DIE at unit offset
    /// `offset`, so that it does not ask with
    /// [`EvaluationResult::RequiresBaseType`].
    pub fn set_base_type(&mut self, offset: u64, ty: ValueType) {
        match self.base_types.iter_mut().find(|(o, _)| *o == offset) {
            Some(slot) => slot.1 = ty,
            None => self.base_types.push((offset, ty)),
        }
    }

    /// Tells the evaluation that register `register` holds `bytes` bytes, so
    /// that `DW_OP_offset` & co. past its end and parts larger than what
    /// remains of it are errors when they are evaluated (the normative
    /// text's rules), not when the location is later read. Registers whose
    /// size is not given are not checked until read. Kept by
    /// [`Evaluation::restart`] and [`Evaluation::reuse`]: sizes belong to the
    /// target, not to one expression.
    pub fn set_register_size(&mut self, register: u16, bytes: u64) {
        let bits = bytes.saturating_mul(8);
        match self.register_sizes.iter_mut().find(|(r, _)| *r == register) {
            Some(slot) => slot.1 = bits,
            None => self.register_sizes.push((register, bits)),
        }
    }

    /// Tells the evaluation the value of `DW_AT_LLVM_lanes` (the number of
    /// lanes of the current thread): a lane given to
    /// [`Evaluation::resume_with_lane`] that is not below it makes the
    /// expression ill-formed (the normative text's rule for
    /// `DW_OP_LLVM_push_lane`). Unchecked unless given; kept as
    /// [`Evaluation::set_register_size`]'s sizes are.
    pub fn set_lane_count(&mut self, lanes: u64) {
        self.lanes = Some(lanes);
    }

    /// Gives the byte offset of each operation in the original expression,
    /// then its total length, as [`decode`] returns them:
    /// branch targets are then found in these offsets instead of by
    /// re-encoding the operations (which differ from the original when it
    /// used non-minimal LEB128 operands). Also saves the re-encoding. Fails
    /// unless there is one offset per operation plus the length, strictly
    /// increasing.
    pub fn set_byte_offsets(&mut self, offsets: Vec<usize>) -> Result<(), Error> {
        check_offsets(self.ops, &offsets)?;
        self.root_offsets = RootOffsets::Computed(Some(offsets));
        Ok(())
    }

    /// [`Evaluation::new`] with the operations' byte offsets borrowed (see
    /// [`Evaluation::set_byte_offsets`]), as [`decode_into`](crate::decode_into)
    /// gives them: with reused buffers, nothing is allocated before the
    /// first push.
    pub fn with_offsets(
        ops: &'a [Op],
        offsets: &'a [usize],
        encoding: Encoding,
    ) -> Result<Evaluation<'a>, Error> {
        check_offsets(ops, offsets)?;
        let mut eval = Evaluation::new(ops, encoding);
        eval.root_offsets = RootOffsets::Borrowed(offsets);
        Ok(eval)
    }

    /// The result, as [`Evaluation::result`], moved out instead of cloned.
    pub fn into_result(self) -> Option<Entry> {
        if !self.complete {
            return None;
        }
        self.top
    }

    /// The encoding the evaluation was created with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Pushes an initial entry (e.g. an object address) before evaluating.
    pub fn push(&mut self, entry: Entry) {
        self.restore_top();
        self.stack.push(Slot::entry(entry));
    }

    /// Puts a completed evaluation's result back on the stack (before
    /// pushing or running again).
    fn restore_top(&mut self) {
        if let Some(e) = self.top.take() {
            self.stack.push(Slot::entry(e));
        }
    }

    /// Index of the next operation to execute (or of the one waiting for a
    /// request's answer); inside a called expression, the index of the
    /// outermost `DW_OP_call*`.
    pub fn pc(&self) -> usize {
        self.returns.first().map_or(self.pc, |r| r.1)
    }

    /// The current stack, bottom first; incomplete composites are shown as
    /// composites.
    pub fn stack(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.stack.iter().map(|s| s.clone().into_entry()).collect();
        v.extend(self.top.iter().cloned());
        v
    }

    /// Runs until the end of the expression or a request.
    #[inline]
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
        self.top.clone()
    }

    /// The result, as [`Evaluation::result`], borrowed instead of cloned.
    pub fn result_ref(&self) -> Option<&Entry> {
        if !self.complete {
            return None;
        }
        self.top.as_ref()
    }

    /// The result in a location context: a generic value becomes a memory
    /// location in address space 0; an empty stack is undefined.
    pub fn location_result(&self) -> Option<LocationDescription> {
        if !self.complete {
            return None;
        }
        match self.result() {
            None => Some(LocationDescription::undefined()),
            Some(Entry::Location(l)) => Some(l),
            Some(Entry::Value(v)) if v.ty == ValueType::Generic => {
                Some(LocationDescription::memory(0, v.bits))
            }
            Some(Entry::Value(_)) => None,
        }
    }

    /// Answers [`EvaluationResult::RequiresRegister`] with the register's
    /// contents (little-endian, the register's full size).
    pub fn resume_with_register(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        if self.reading_from(|p| matches!(p, Place::Memory(_))) {
            return Err(self.error(EvalError::BadResume("no register was requested")));
        }
        let a = self.address_size;
        let r = match self.pending.take() {
            Some(Pending::ReadSimple {
                ty,
                size,
                register_offset: Some(start),
            }) => match start
                .checked_add(usize::from(size))
                .and_then(|end| bytes.get(start..end))
            {
                Some(b) => {
                    self.push_value(Value::from_bytes(ty, b, a));
                    self.advance()
                }
                None => Err(EvalError::ReadOutOfRange.into()),
            },
            Some(Pending::Breg {
                offset,
                address_space,
            }) => {
                let v = Value::from_bytes(ValueType::Generic, bytes, a);
                let addr = Value::generic(v.bits.wrapping_add(offset as u64), a);
                match address_space {
                    None => self.push_value(addr),
                    Some(s) => self.push_loc(LocationDescription::memory(s, addr.bits)),
                }
                self.advance()
            }
            Some(Pending::Regval { ty }) => {
                if bytes.len() < usize::from(ty.size(a)) {
                    Err(EvalError::ReadOutOfRange.into())
                } else {
                    self.push_value(Value::from_bytes(ty, bytes, a));
                    self.advance()
                }
            }
            Some(Pending::Read {
                ty,
                mut bits,
                fetches,
                next,
            }) => match fetches.get(next) {
                Some(
                    f @ Fetch {
                        place: Place::Register(_),
                        ..
                    },
                ) => {
                    let got = f.span().and_then(|(first, n)| {
                        let first =
                            usize::try_from(first).map_err(|_| EvalError::ReadOutOfRange)?;
                        first
                            .checked_add(n as usize)
                            .and_then(|end| bytes.get(first..end))
                            .ok_or(EvalError::ReadOutOfRange)
                    });
                    match got {
                        Ok(span) => {
                            bits.fill(span, f.shift(), f.dst_bit, f.len);
                            self.continue_read(ty, bits, fetches, next + 1)
                        }
                        Err(e) => Err(e.into()),
                    }
                }
                _ => Err(EvalError::BadResume("no register was requested").into()),
            },
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no register was requested").into())
            }
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresMemory`] with at least the
    /// requested number of bytes.
    pub fn resume_with_memory(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        if self.reading_from(|p| matches!(p, Place::Register(_))) {
            return Err(self.error(EvalError::BadResume("no memory was requested")));
        }
        if let Some(Pending::Read { fetches, next, .. }) = &self.pending {
            let short = fetches
                .get(*next)
                .and_then(|f| f.span().ok())
                .is_some_and(|(_, n)| (bytes.len() as u64) < n);
            if short {
                return Err(self.error(EvalError::BadResume("fewer bytes than requested")));
            }
        }
        if let Some(Pending::ReadSimple {
            size,
            register_offset: None,
            ..
        }) = &self.pending
        {
            if bytes.len() < usize::from(*size) {
                return Err(self.error(EvalError::BadResume("fewer bytes than requested")));
            }
        }
        let r = match self.pending.take() {
            Some(Pending::ReadSimple {
                ty,
                size,
                register_offset: None,
            }) => {
                let b = bytes.get(..usize::from(size)).unwrap_or(bytes);
                self.push_value(Value::from_bytes(ty, b, self.address_size));
                self.advance()
            }
            Some(Pending::Read {
                ty,
                mut bits,
                fetches,
                next,
            }) => match fetches.get(next) {
                Some(
                    f @ Fetch {
                        place: Place::Memory(_),
                        ..
                    },
                ) => match f.span() {
                    Ok((_, n)) => match bytes.get(..n as usize) {
                        Some(span) => {
                            bits.fill(span, f.shift(), f.dst_bit, f.len);
                            self.continue_read(ty, bits, fetches, next + 1)
                        }
                        None => Err(EvalError::BadResume("fewer bytes than requested").into()),
                    },
                    Err(e) => Err(e.into()),
                },
                _ => Err(EvalError::BadResume("no memory was requested").into()),
            },
            other => {
                self.pending = other;
                Err(EvalError::BadResume("no memory was requested").into())
            }
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresLane`].
    pub fn resume_with_lane(&mut self, lane: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Lane) if self.lanes.is_some_and(|n| lane >= n) => {
                Err(EvalError::IllFormed("the lane is not less than DW_AT_LLVM_lanes").into())
            }
            Some(Pending::Lane) => {
                self.push_value(Value::generic(lane, self.address_size));
                self.advance()
            }
            other => self.wrong(other, "no lane was requested"),
        };
        self.after_resume(r)
    }

    /// Pushes a memory location in the default address space at `address`
    /// (cut to the address size), and goes on: how the CFA, TLS and indexed
    /// addresses answer their requests.
    fn push_global_address(&mut self, address: u64) -> Step {
        let a = Value::generic(address, self.address_size).bits;
        self.push_loc(LocationDescription::memory(0, a));
        self.advance()
    }

    /// Answers [`EvaluationResult::RequiresFrameBase`] with the frame base
    /// address.
    pub fn resume_with_frame_base(&mut self, frame_base: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::FrameBase { offset }) => {
                let v = frame_base.wrapping_add(offset as u64);
                self.push_value(Value::generic(v, self.address_size));
                self.advance()
            }
            other => self.wrong(other, "no frame base was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresCallFrameCfa`].
    pub fn resume_with_call_frame_cfa(&mut self, cfa: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::CallFrameCfa) => self.push_global_address(cfa),
            other => self.wrong(other, "no CFA was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresObjectAddress`] with an address
    /// in global memory.
    pub fn resume_with_object_address(&mut self, address: u64) -> Result<EvaluationResult, Error> {
        let a = Value::generic(address, self.address_size).bits;
        self.resume_with_object_location(LocationDescription::memory(0, a))
    }

    /// Answers [`EvaluationResult::RequiresObjectAddress`] with any location
    /// (the extension lets the object live in a register, another address
    /// space, a composite, ...).
    pub fn resume_with_object_location(
        &mut self,
        location: LocationDescription,
    ) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::ObjectAddress) => {
                self.push_loc(location);
                self.advance()
            }
            other => self.wrong(other, "no object address was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresBaseType`] with the DIE's
    /// `DW_AT_encoding` (`DW_ATE_*`) and `DW_AT_byte_size`. The operation
    /// that asked is then run again.
    pub fn resume_with_base_type(
        &mut self,
        encoding: u8,
        byte_size: u64,
    ) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::BaseType { offset }) => {
                match ValueType::from_encoding(encoding, byte_size) {
                    Some(ty) => {
                        self.set_base_type(offset, ty);
                        // The operation runs again; do not count it twice.
                        self.steps = self.steps.saturating_sub(1);
                        return self.run();
                    }
                    None => Err(EvalError::UnsupportedBaseType {
                        offset,
                        encoding,
                        byte_size,
                    }
                    .into()),
                }
            }
            other => self.wrong(other, "no base type was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresEntryValue`] with the entry value
    /// (usually [`Entry::Value`] with a generic value).
    pub fn resume_with_entry_value(&mut self, entry: Entry) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::EntryValue) => {
                self.stack.push(Slot::entry(entry));
                self.advance()
            }
            other => self.wrong(other, "no entry value was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresCallee`] with the encoded
    /// expression of the callee's `DW_AT_location` (same [`Encoding`]); it
    /// runs on the same stack, then the caller continues. Empty bytes (no
    /// location attribute) make the call a no-op.
    pub fn resume_with_callee(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Callee) => self.enter_call(bytes),
            other => self.wrong(other, "no callee was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresIndexedAddress`] with the
    /// `.debug_addr` entry.
    pub fn resume_with_indexed_address(&mut self, value: u64) -> Result<EvaluationResult, Error> {
        let a = self.address_size;
        let r = match self.pending.take() {
            Some(Pending::IndexedAddress { is_address: true }) => self.push_global_address(value),
            Some(Pending::IndexedAddress { is_address: false }) => {
                self.push_value(Value::generic(value, a));
                self.advance()
            }
            other => self.wrong(other, "no indexed address was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresTlsAddress`] with the address
    /// (in global memory) of the thread-local storage.
    pub fn resume_with_tls_address(&mut self, address: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Tls) => self.push_global_address(address),
            other => self.wrong(other, "no TLS address was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresEntryRegister`] with the location
    /// of the register's value on entry to the current function.
    pub fn resume_with_entry_register(
        &mut self,
        location: LocationDescription,
    ) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::EntryRegister) => {
                self.push_loc(location);
                self.advance()
            }
            other => self.wrong(other, "no entry register was requested"),
        };
        self.after_resume(r)
    }

    /// Whether a read is waiting for an access to a place matching `kind`.
    fn reading_from(&self, kind: impl Fn(Place) -> bool) -> bool {
        match &self.pending {
            Some(Pending::Read { fetches, next, .. }) => {
                fetches.get(*next).is_some_and(|f| kind(f.place))
            }
            _ => false,
        }
    }

    fn wrong(&mut self, other: Option<Pending>, what: &'static str) -> Step {
        self.pending = other;
        Err(EvalError::BadResume(what).into())
    }

    fn advance(&mut self) -> Step {
        self.pc += 1;
        if self.callee.is_none() {
            self.byte_pc = self.next_byte;
        }
        Ok(())
    }

    /// `advance` in the root expression (`fast_step` runs only there).
    #[inline(always)]
    fn advance_root(&mut self) -> Step {
        self.pc += 1;
        self.byte_pc = self.next_byte;
        Ok(())
    }

    fn after_resume(&mut self, r: Step) -> Result<EvaluationResult, Error> {
        match r {
            Err(e) => Err(self.error(*e)),
            Ok(()) if self.asked.is_some() => self.take_asked(),
            Ok(()) if self.trace => Ok(EvaluationResult::Stepped),
            Ok(()) => self.run(),
        }
    }

    /// Name of root operation `index` (from bytes: the one at `byte_pc`,
    /// which is `index` whenever an error is reported).
    pub(crate) fn root_name(&self, index: usize) -> &'static str {
        match self.bytes {
            Some(bytes) => decode_at(bytes, &mut self.byte_pc.clone(), self.encoding)
                .map_or("end of expression", |op| op.name()),
            None => self.ops.get(index).map_or("end of expression", Op::name),
        }
    }

    fn at_end(&self) -> bool {
        match (&self.callee, self.bytes) {
            (Some(code), _) => self.pc >= code.ops.len(),
            (None, Some(bytes)) => self.byte_pc >= bytes.len(),
            (None, None) => self.pc >= self.ops.len(),
        }
    }

    fn error(&self, error: EvalError) -> Error {
        let here = match &self.callee {
            Some(code) => code.ops.get(self.pc).map_or("end of expression", Op::name),
            None => self.root_name(self.pc),
        };
        match self.returns.first() {
            None => Error::Eval {
                index: self.pc,
                op: here,
                error,
            },
            Some(&(_, site)) => Error::Eval {
                index: site,
                op: self.root_name(site),
                error: EvalError::InCall {
                    index: self.pc,
                    op: here,
                    error: Box::new(error),
                },
            },
        }
    }

    fn run(&mut self) -> Result<EvaluationResult, Error> {
        match (&self.callee, self.bytes) {
            (None, Some(bytes)) if !self.trace => self.run_bytes(bytes),
            _ => self.run_general(),
        }
    }

    /// The root expression straight from its bytes, without tracing: the
    /// hot loop (what `run_general` does in that case, with fewer tests per
    /// operation).
    fn run_bytes(&mut self, bytes: &'a [u8]) -> Result<EvaluationResult, Error> {
        // As `decode` would (the shortcuts in `fast_step` skip `decode_at`).
        self.encoding.check()?;
        self.restore_top();
        while let Some(&code) = bytes.get(self.byte_pc) {
            self.count_step()?;
            let at = (self.pc, self.byte_pc);
            let r = self.root_step(bytes, code)?;
            if let Some(request) = self.stop_after(at, r)? {
                return Ok(request);
            }
            if self.callee.is_some() {
                // A `DW_OP_call*` entered its callee.
                return self.run_general();
            }
        }
        Ok(self.finish())
    }

    /// Counts one more operation against the step limit.
    #[inline(always)]
    fn count_step(&mut self) -> Result<(), Error> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(self.error(EvalError::StepLimitExceeded(self.max_steps)));
        }
        Ok(())
    }

    /// Runs the root operation at `byte_pc`, whose first byte is `code`:
    /// through `fast_step` if it takes it, else decoded.
    #[inline(always)]
    fn root_step(&mut self, bytes: &'a [u8], code: u8) -> Result<Step, Error> {
        match self.fast_step(bytes, code) {
            Some(r) => Ok(r),
            None => self.slow_step(bytes),
        }
    }

    /// Whether the evaluation stops after the operation that started at
    /// `at` (operation index, byte offset) and ended in `r`: with its error,
    /// a stack grown too large, or (`Some`) a request to the caller.
    #[inline(always)]
    fn stop_after(
        &mut self,
        at: (usize, usize),
        r: Step,
    ) -> Result<Option<EvaluationResult>, Error> {
        if let Err(e) = r {
            return Err(self.error(*e));
        }
        if self.asked.is_some() {
            return self.take_asked().map(Some);
        }
        if self.stack.len() > MAX_STACK {
            // Report it at the operation that overflowed.
            (self.pc, self.byte_pc) = at;
            return Err(self.error(EvalError::TooLarge("more than 1024 stack entries")));
        }
        Ok(None)
    }

    /// A root operation that `fast_step` does not take, decoded then run
    /// (`Err`: it does not decode).
    #[inline(never)]
    fn slow_step(&mut self, bytes: &'a [u8]) -> Result<Step, Error> {
        let mut next = self.byte_pc;
        let op = decode_at(bytes, &mut next, self.encoding)?;
        self.next_byte = next;
        Ok(match op {
            // The decoded block moves into the request (kept if long).
            Op::EntryValue(expression) => self.entry_value(expression.into()),
            op => self.step(&op),
        })
    }

    fn run_general(&mut self) -> Result<EvaluationResult, Error> {
        if self.bytes.is_some() {
            // As `decode` would (the shortcuts in `fast_step` skip `decode_at`).
            self.encoding.check()?;
        }
        self.restore_top();
        loop {
            if self.at_end() {
                match self.returns.pop() {
                    Some((code, site)) => {
                        self.callee = code;
                        self.pc = site + 1;
                        if self.callee.is_none() {
                            // Back in the root: after the call operation.
                            self.byte_pc = self.next_byte;
                        }
                        continue;
                    }
                    None => break,
                }
            }
            self.count_step()?;
            let at = (self.pc, self.byte_pc);
            let r = match (&self.callee, self.bytes) {
                (None, Some(bytes)) => match bytes.get(self.byte_pc) {
                    Some(&code) => self.root_step(bytes, code)?,
                    None => self.slow_step(bytes)?,
                },
                (None, None) => {
                    let ops = self.ops;
                    match ops.get(self.pc) {
                        Some(op) => self.step(op),
                        None => Ok(()),
                    }
                }
                (Some(code), _) => {
                    let code = Arc::clone(code);
                    match code.ops.get(self.pc) {
                        Some(op) => self.step(op),
                        None => Ok(()),
                    }
                }
            };
            if let Some(request) = self.stop_after(at, r)? {
                return Ok(request);
            }
            if self.trace {
                return Ok(EvaluationResult::Stepped);
            }
        }
        Ok(self.finish())
    }

    /// Ends the evaluation: the result moves off the stack as an `Entry`
    /// (an incomplete composite is completed), so it can be borrowed
    /// (`result_ref`). Compact slots are read field by field where they lie
    /// and each kind's entry is written straight into `top` (building one
    /// `Entry` for all kinds and then moving it copied it byte by byte).
    #[inline(always)]
    fn finish(&mut self) -> EvaluationResult {
        // `top` is empty (`restore_top`): nothing to drop when it is set.
        core::mem::forget(self.top.take());
        match self.stack.last() {
            Some(&Slot::Value(Value { ty, bits })) => {
                // A compact slot owns nothing (see `pop_value`).
                core::mem::forget(self.stack.pop());
                self.top = Some(Entry::Value(Value { ty, bits }));
            }
            Some(&Slot::Register {
                register,
                bit_offset,
            }) => {
                core::mem::forget(self.stack.pop());
                self.top = Some(Entry::Location(LocationDescription::single(
                    Storage::Register(register),
                    u128::from(bit_offset),
                )));
            }
            Some(&Slot::Implicit { len, bytes }) => {
                core::mem::forget(self.stack.pop());
                self.top = Some(Entry::Location(LocationDescription::single(
                    Storage::Implicit(Bytes::from_le(bytes, len)),
                    0,
                )));
            }
            _ => self.finish_other(),
        }
        self.complete = true;
        EvaluationResult::Complete
    }

    /// `finish` for the slots that are not moved field by field.
    #[inline(never)]
    fn finish_other(&mut self) {
        self.top = self.stack.pop().map(Slot::into_entry);
    }

    // -- stack helpers ------------------------------------------------------

    /// Makes room for one more slot, growing out of line. Called before
    /// the slot is built, so that the following `push` (whose own check
    /// the compiler then drops) writes it straight into the buffer instead
    /// of assembling it on the machine stack and copying it (a
    /// store-forwarding stall per push).
    #[inline(always)]
    fn make_room(&mut self) {
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack();
        }
    }

    #[cold]
    #[inline(never)]
    fn grow_stack(&mut self) {
        self.stack.reserve(16);
    }

    #[inline(always)]
    fn push_value(&mut self, v: Value) {
        self.push_scalar(v.ty, v.bits);
    }

    /// Pushes a value. Out of line and given the parts in registers on
    /// purpose: inlined, the compiler shares one copy of the push among
    /// all its callers, each first assembling its slot on the machine
    /// stack (and the copy then stalls on those narrower stores).
    #[inline(always)]
    fn push_scalar(&mut self, ty: ValueType, bits: u64) {
        self.make_room();
        self.push_in_place(Slot::Value(Value { ty, bits }));
    }

    /// `Vec::push` of a slot that owns nothing (a value or a compact
    /// location), after `make_room`. `push` keeps its argument in memory
    /// for its unwinding path (dropping it if growing panics), so the slot
    /// was assembled on the machine stack with narrow stores and copied
    /// with wide loads that stall; here it is written straight into the
    /// buffer.
    #[inline(always)]
    fn push_in_place(&mut self, s: Slot) {
        let len = self.stack.len();
        match self.stack.spare_capacity_mut().first_mut() {
            Some(dst) => {
                dst.write(s);
                // SAFETY: element `len` (within the capacity) was just
                // initialised.
                unsafe { self.stack.set_len(len + 1) };
            }
            // Unreachable after `make_room`. `s` owns nothing: forgetting
            // it leaks nothing (and dropping it would need it in memory).
            None => core::mem::forget(s),
        }
    }

    /// Pushes register `register` at offset 0 (see `push_scalar`).
    #[inline(always)]
    fn push_register(&mut self, register: u16) {
        self.make_room();
        self.push_in_place(Slot::Register {
            register,
            bit_offset: 0,
        });
    }

    fn push_loc(&mut self, l: LocationDescription) {
        self.stack.push(Slot::location(l));
    }

    fn pop_slot(&mut self) -> Result<Slot, EvalError> {
        // A `match`, not `ok_or`: that built the error and ran its drop
        // code on every pop.
        match self.stack.pop() {
            Some(s) => Ok(s),
            None => Err(EvalError::StackUnderflow),
        }
    }

    fn pop_value(&mut self) -> Result<Value, EvalError> {
        // A value owns nothing: forgetting it skips the drop code the
        // compiler would otherwise call for every popped slot.
        match self.stack.pop() {
            Some(s) => {
                if let Slot::Value(v) = s {
                    core::mem::forget(s);
                    Ok(v)
                } else {
                    self.slot_value(s)
                }
            }
            None => Err(EvalError::StackUnderflow),
        }
    }

    /// [`Evaluation::pop_value`] of a slot that is not a value.
    #[inline(never)]
    fn slot_value(&self, s: Slot) -> Result<Value, EvalError> {
        const NOT_AN_ADDRESS: EvalError = EvalError::TypeMismatch(
            "expected a value, found a location description that is not a memory address",
        );
        match s {
            Slot::Value(v) => Ok(v),
            Slot::Memory {
                address_space: 0,
                address,
            } => Ok(Value::generic(address, self.address_size)),
            Slot::Memory { .. } | Slot::Register { .. } | Slot::Implicit { .. } => {
                Err(NOT_AN_ADDRESS)
            }
            Slot::Entry(e) => match *e {
                Entry::Value(v) => Ok(v),
                Entry::Location(l) => match l.as_default_address() {
                    Some(a) => Ok(Value::generic(a, self.address_size)),
                    None => Err(NOT_AN_ADDRESS),
                },
            },
            Slot::Incomplete(..) => Err(EvalError::TypeMismatch(
                "expected a value, found an incomplete composite",
            )),
        }
    }

    /// Pops an integral value (address spaces, offsets, masks).
    fn pop_integral(&mut self) -> Result<Value, EvalError> {
        let v = self.pop_value()?;
        if v.ty.is_integral() {
            Ok(v)
        } else {
            Err(EvalError::TypeMismatch("expected an integral value"))
        }
    }

    fn pop_location(&mut self) -> Result<LocationDescription, EvalError> {
        let v = match self.pop_slot()? {
            Slot::Value(v) => v,
            Slot::Incomplete(..) => {
                return Err(EvalError::IllFormed(
                    "a location description is needed, found an incomplete composite",
                ))
            }
            s => match s.into_entry() {
                Entry::Location(l) => return Ok(l),
                Entry::Value(v) => v,
            },
        };
        if v.ty == ValueType::Generic {
            Ok(LocationDescription::memory(0, v.bits))
        } else {
            Err(EvalError::TypeMismatch(
                "expected a location description, found a non-generic value",
            ))
        }
    }

    fn peek(&self, depth: usize) -> Result<Slot, EvalError> {
        let len = self.stack.len();
        if depth >= len {
            return Err(EvalError::StackUnderflow);
        }
        match &self.stack[len - 1 - depth] {
            Slot::Incomplete(..) => Err(EvalError::IllFormed(STACK_OP_ON_INCOMPLETE)),
            s => Ok(s.clone()),
        }
    }

    /// The normative text's rule for the stack operations: none may touch
    /// an incomplete composite (copies would share its storage).
    fn need_complete(&self, n: usize) -> Result<(), EvalError> {
        self.need(n)?;
        let top = &self.stack[self.stack.len() - n..];
        if top.iter().any(|s| matches!(s, Slot::Incomplete(..))) {
            return Err(EvalError::IllFormed(STACK_OP_ON_INCOMPLETE));
        }
        Ok(())
    }

    fn register_bits(&self, register: u16) -> Option<u64> {
        self.register_sizes
            .iter()
            .find(|(r, _)| *r == register)
            .map(|(_, bits)| *bits)
    }

    /// The size in bits of `storage`, if known: [`Storage::bit_size`], or a
    /// register's size from [`Evaluation::set_register_size`].
    fn storage_bits(&self, storage: &Storage) -> Option<u128> {
        match storage {
            Storage::Register(r) => self.register_bits(*r).map(u128::from),
            s => s.bit_size(self.address_size),
        }
    }

    /// The offset rule for registers of known size; `offset_bits` checked
    /// every other storage.
    fn check_register_offsets(&self, l: &LocationDescription) -> Result<(), EvalError> {
        if self.register_sizes.is_empty() {
            return Ok(());
        }
        for p in l.places.iter() {
            if let Storage::Register(r) = p.storage {
                if self
                    .register_bits(r)
                    .is_some_and(|size| p.bit_offset >= u128::from(size))
                {
                    return Err(EvalError::OffsetOutOfRange);
                }
            }
        }
        Ok(())
    }

    /// A part of `bit_size` bits at `l`: its bits must be within the storage
    /// of every place (storage of unknown size is not checked).
    fn check_part(&self, l: &LocationDescription, bit_size: u64) -> Result<(), EvalError> {
        for p in l.places.iter() {
            if let Some(size) = self.storage_bits(&p.storage) {
                if p.bit_offset.saturating_add(u128::from(bit_size)) > size {
                    return Err(EvalError::IllFormed(
                        "a part is larger than what remains of its location storage",
                    ));
                }
            }
        }
        Ok(())
    }

    /// A composite of `bits` bits may be no larger than the memory of an
    /// address space.
    fn check_composite_bits(&self, bits: u128) -> Result<(), EvalError> {
        if bits > address_space_bits(self.address_size) {
            return Err(EvalError::IllFormed(
                "the composite is larger than the largest address space",
            ));
        }
        Ok(())
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
            ValueError::IntegralRequired => {
                EvalError::TypeMismatch("the operation needs integral operands")
            }
            ValueError::BadConversion => EvalError::TypeMismatch(
                "cannot convert or reinterpret to that type (sizes differ?)",
            ),
            ValueError::UnsupportedForType => EvalError::TypeMismatch(
                "not defined for this type (neg of unsigned, shr of signed, shra of unsigned, negative shift)",
            ),
        }
    }

    /// The type of base type DIE `offset` (0: generic), if known.
    fn base_type(&self, offset: u64) -> Option<ValueType> {
        if offset == 0 {
            return Some(ValueType::Generic);
        }
        self.base_types
            .iter()
            .find(|(o, _)| *o == offset)
            .map(|(_, t)| *t)
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
        let r = a.unary(op, self.address_size).map_err(Self::value_err)?;
        self.push_value(r);
        Ok(())
    }

    fn branch(&mut self, displacement: i16) -> Result<(), EvalError> {
        let offsets: &[usize] = match &self.callee {
            Some(code) => &code.offsets,
            None => {
                if matches!(self.root_offsets, RootOffsets::Unknown) {
                    self.root_offsets = RootOffsets::Computed(match self.bytes {
                        Some(bytes) => Some(byte_offsets(bytes, self.encoding)),
                        None => op_offsets(self.ops, self.encoding),
                    });
                }
                match &self.root_offsets {
                    RootOffsets::Computed(Some(o)) => o,
                    RootOffsets::Borrowed(o) => o,
                    _ => {
                        return Err(EvalError::Unsupported(
                            "branch in an expression that cannot be encoded",
                        ))
                    }
                }
            }
        };
        let next = offsets.get(self.pc + 1).copied().unwrap_or(0) as i64;
        let target = next + i64::from(displacement);
        let idx = usize::try_from(target)
            .ok()
            .and_then(|t| offsets.binary_search(&t).ok())
            .ok_or(EvalError::BadBranchTarget(target))?;
        let byte = offsets.get(idx).copied();
        if self.callee.is_none() {
            self.byte_pc = byte.unwrap_or(usize::MAX);
        }
        self.pc = idx;
        Ok(())
    }

    /// An offset operand as a signed number of units.
    fn amount(&self, v: Value) -> i128 {
        match v.ty {
            ValueType::Unsigned(_) => i128::from(v.bits),
            _ => i128::from(v.to_i64(self.address_size)),
        }
    }

    fn offset(&mut self, bits: i128) -> Result<(), EvalError> {
        let mut l = self.pop_location()?;
        l.offset_bits(bits, self.address_size)
            .map_err(|_| EvalError::OffsetOutOfRange)?;
        self.check_register_offsets(&l)?;
        self.push_loc(l);
        Ok(())
    }

    fn piece(&mut self, bit_size: u64, bit_offset: u64) -> Result<(), EvalError> {
        let mut loc = match self.stack.last() {
            None | Some(Slot::Incomplete(..)) => LocationDescription::undefined(),
            Some(_) => self.pop_location()?,
        };
        if bit_offset != 0 {
            loc.offset_bits(i128::from(bit_offset), self.address_size)
                .map_err(|_| EvalError::OffsetOutOfRange)?;
            self.check_register_offsets(&loc)?;
        }
        self.check_part(&loc, bit_size)?;
        let (mut parts, weight, large) = match self.stack.last() {
            Some(Slot::Incomplete(..)) => match self.stack.pop() {
                Some(Slot::Incomplete(p, w, l)) => (p, w, l),
                _ => (Vec::new(), 0, false),
            },
            // A new composite: in the vector a previous one left (`restart`).
            _ => (core::mem::take(&mut self.parts), 0, false),
        };
        let weight = (weight as usize).saturating_add(1 + loc.weight());
        if weight > MAX_LOCATION_WEIGHT {
            return Err(EvalError::TooLarge("composite with too many parts"));
        }
        parts.push(Part {
            location: loc,
            bit_size,
        });
        // At most MAX_LOCATION_WEIGHT parts of at most 1/MAX_LOCATION_WEIGHT
        // of an address space fit in one: the parts are summed only once a
        // larger one is in.
        let large = large
            || u128::from(bit_size) > address_space_bits(self.address_size) >> LARGE_PART_SHIFT;
        if large {
            let bits = parts
                .iter()
                .map(|p| u128::from(p.bit_size))
                .fold(0, u128::saturating_add);
            self.check_composite_bits(bits)?;
        }
        // At most MAX_LOCATION_WEIGHT, so it fits.
        self.stack
            .push(Slot::Incomplete(parts, weight as u32, large));
        Ok(())
    }

    /// Starts a read of `size` bytes of type `ty` through `loc` (its first
    /// place: all places hold the same bits).
    fn start_read(&mut self, loc: &LocationDescription, size: u8, ty: ValueType) -> Step {
        let Some(place) = loc.places.first() else {
            return Err(EvalError::UndefinedRead.into());
        };
        if matches!(place.storage, Storage::ImplicitPointer { .. }) {
            return Err(
                EvalError::Unsupported("dereferencing an implicit pointer location").into(),
            );
        }
        // Bits past the end of any place's storage are an evaluation error
        // now, not undefined bits (registers of unknown size: when answered).
        let len = u128::from(size) * 8;
        for p in loc.places.iter() {
            if let Some(bits) = self.storage_bits(&p.storage) {
                if p.bit_offset.saturating_add(len) > bits {
                    return Err(EvalError::ReadOutOfRange.into());
                }
            }
        }
        // Whole bytes of memory or of one register: ask directly.
        if place.bit_offset % 8 == 0 {
            let byte = place.bit_offset / 8;
            match place.storage {
                Storage::Memory { address_space } => {
                    if let Ok(address) = u64::try_from(byte) {
                        self.pending = Some(Pending::ReadSimple {
                            ty,
                            size,
                            register_offset: None,
                        });
                        return self.ask(EvaluationResult::RequiresMemory {
                            address,
                            size,
                            address_space,
                        });
                    }
                }
                Storage::Register(register) => {
                    if let Ok(start) = usize::try_from(byte) {
                        self.pending = Some(Pending::ReadSimple {
                            ty,
                            size,
                            register_offset: Some(start),
                        });
                        return self.ask(EvaluationResult::RequiresRegister { register });
                    }
                }
                _ => {}
            }
        }
        let len = u64::from(size) * 8;
        let mut bits = Bits::undefined(len)?;
        let mut fetches = Vec::new();
        plan_read(
            &place.storage,
            place.bit_offset,
            0,
            len,
            &mut bits,
            &mut fetches,
            0,
        )?;
        self.continue_read(ty, bits, fetches, 0)
    }

    /// Asks for the next register or memory access of a read, or finishes it.
    fn continue_read(
        &mut self,
        ty: ValueType,
        bits: Bits,
        fetches: Vec<Fetch>,
        next: usize,
    ) -> Step {
        if let Some(f) = fetches.get(next).copied() {
            let (first, n) = f.span()?;
            let request = match f.place {
                Place::Memory(address_space) => EvaluationResult::RequiresMemory {
                    address: first,
                    // At most 8 bytes are read, so a span is at most 9.
                    size: u8::try_from(n).map_err(|_| EvalError::BadSize(n))?,
                    address_space,
                },
                Place::Register(register) => EvaluationResult::RequiresRegister { register },
            };
            self.pending = Some(Pending::Read {
                ty,
                bits,
                fetches,
                next,
            });
            return self.ask(request);
        }
        if !bits.is_fully_defined() {
            return Err(EvalError::UndefinedRead.into());
        }
        self.push_value(Value::from_bytes(ty, bits.bytes(), self.address_size));
        self.advance()
    }

    /// `DW_OP_deref*` of `size` bytes with result type `ty`.
    fn deref(&mut self, size: u8, ty: ValueType) -> Step {
        if size == 0 || size > ty.size(self.address_size) {
            return Err(EvalError::BadSize(u64::from(size)).into());
        }
        // Whole bytes of memory or of one register, straight from a compact
        // slot: as `start_read` does, without building the location.
        match self.stack.last() {
            Some(&Slot::Value(Value {
                ty: ValueType::Generic,
                bits: address,
            })) => {
                // Owns nothing (see `pop_value`).
                core::mem::forget(self.stack.pop());
                return self.read_memory(address, 0, size, ty);
            }
            Some(&Slot::Memory {
                address_space,
                address,
            }) => {
                core::mem::forget(self.stack.pop());
                return self.read_memory(address, address_space, size, ty);
            }
            _ => {}
        }
        let loc = self.pop_location()?;
        self.start_read(&loc, size, ty)
    }

    fn read_memory(&mut self, address: u64, address_space: u64, size: u8, ty: ValueType) -> Step {
        if u128::from(address) + u128::from(size) > address_space_bits(self.address_size) / 8 {
            return Err(EvalError::ReadOutOfRange.into());
        }
        self.pending = Some(Pending::ReadSimple {
            ty,
            size,
            register_offset: None,
        });
        self.ask(EvaluationResult::RequiresMemory {
            address,
            size,
            address_space,
        })
    }

    fn xderef(&mut self, size: u8, ty: ValueType) -> Step {
        if size == 0 || size > ty.size(self.address_size) {
            return Err(EvalError::BadSize(u64::from(size)).into());
        }
        self.need(2)?;
        // DWARF 5 §2.5.1.3: the address is on top, the address space below.
        let addr = self.pop_integral()?;
        let space = self.pop_integral()?;
        let loc = LocationDescription::memory(space.bits, addr.bits);
        self.start_read(&loc, size, ty)
    }

    /// `DW_OP_call2`/`call4` (a unit-relative DIE offset) and `DW_OP_call_ref`
    /// (a `.debug_info` offset): the caller is asked for the callee.
    fn call(&mut self, offset: u64, unit_relative: bool) -> Step {
        self.request(
            Pending::Callee,
            EvaluationResult::RequiresCallee {
                offset,
                unit_relative,
            },
        )
    }

    fn request(&mut self, p: Pending, r: EvaluationResult) -> Step {
        self.pending = Some(p);
        self.ask(r)
    }

    fn ask(&mut self, r: EvaluationResult) -> Step {
        self.asked = Some(r);
        Ok(())
    }

    fn take_asked(&mut self) -> Result<EvaluationResult, Error> {
        match self.asked.take() {
            Some(r) => Ok(r),
            None => Err(self.error(EvalError::BadResume("no request was made"))),
        }
    }

    fn plus_uconst(&mut self, n: u64) -> Result<(), EvalError> {
        let a = self.address_size;
        let v = self.pop_value()?;
        // The constant is taken in the popped value's type (DWARF 5
        // §2.5.1.4), converted for floats.
        let rhs = if v.ty.is_integral() {
            Value::new(v.ty, n, a)
        } else {
            Value::new(ValueType::Unsigned(8), n, a)
                .convert(v.ty, a)
                .map_err(Self::value_err)?
        };
        let r = v.binary(BinaryOp::Plus, rhs, a).map_err(Self::value_err)?;
        self.push_value(r);
        Ok(())
    }

    fn piece_bytes(&mut self, n: u64) -> Result<(), EvalError> {
        // A `match`, not `ok_or` (see `pop_slot`).
        let Some(bits) = n.checked_mul(8) else {
            return Err(EvalError::BadSize(n));
        };
        self.piece(bits, 0)
    }

    #[inline(always)]
    fn stack_value(&mut self) -> Result<(), EvalError> {
        let a = self.address_size;
        // A value on top (the usual case) becomes its implicit bytes where
        // it lies: the value's bits are masked to its size, its first `len`
        // bytes.
        if let Some(top) = self.stack.last_mut() {
            if let Slot::Value(Value { ty, bits }) = *top {
                let len = ty.size(a).min(8);
                // The value owns nothing: no drop code for the overwrite.
                core::mem::forget(core::mem::replace(top, Slot::Implicit { len, bytes: bits }));
                return Ok(());
            }
        }
        let v = self.pop_value()?;
        let len = v.ty.size(a).min(8);
        self.make_room();
        self.push_in_place(Slot::Implicit { len, bytes: v.bits });
        Ok(())
    }

    /// The most common operations of compiled code, executed straight from
    /// the bytes without building an [`Op`]: `DW_OP_lit*`, `DW_OP_reg*`,
    /// `DW_OP_breg*`, `DW_OP_fbreg`, `DW_OP_stack_value`, `DW_OP_constu`,
    /// `DW_OP_consts`, `DW_OP_plus_uconst`, `DW_OP_piece`, `DW_OP_deref`,
    /// `DW_OP_implicit_value`, `DW_OP_entry_value` and the binary arithmetic
    /// operations. Exactly what [`Evaluation::step`] does for them; `None`
    /// for anything else (or an operand this shortcut does not read), which
    /// then takes the general path. Only for the root expression (not in a
    /// callee).
    #[inline(always)]
    fn fast_step(&mut self, bytes: &[u8], code: u8) -> Option<Step> {
        let pos = self.byte_pc;
        let a = self.address_size;
        Some(match code {
            0x30..=0x4f => {
                self.next_byte = pos + 1;
                self.push_value(Value::generic(u64::from(code - 0x30), a));
                self.advance_root()
            }
            0x50..=0x6f => {
                self.next_byte = pos + 1;
                self.push_register(u16::from(code - 0x50));
                self.advance_root()
            }
            0x9f => {
                self.next_byte = pos + 1;
                match self.stack_value() {
                    Ok(()) => self.advance_root(),
                    Err(e) => Err(e.into()),
                }
            }
            0x06 => {
                self.next_byte = pos + 1;
                self.deref(a, ValueType::Generic)
            }
            0x10 | 0x11 | 0x23 | 0x93 => {
                let (n, next) = short_leb(bytes, pos + 1, code == 0x11)?;
                self.next_byte = next;
                let r = match code {
                    0x10 | 0x11 => {
                        self.push_value(Value::generic(n as u64, a));
                        Ok(())
                    }
                    0x23 => self.plus_uconst(n as u64),
                    _ => self.piece_bytes(n as u64),
                };
                match r {
                    Ok(()) => self.advance_root(),
                    Err(e) => Err(e.into()),
                }
            }
            0x1a..=0x1e | 0x21 | 0x22 | 0x24..=0x27 => {
                self.next_byte = pos + 1;
                let op = match code {
                    0x1a => BinaryOp::And,
                    0x1b => BinaryOp::Div,
                    0x1c => BinaryOp::Minus,
                    0x1d => BinaryOp::Mod,
                    0x1e => BinaryOp::Mul,
                    0x21 => BinaryOp::Or,
                    0x22 => BinaryOp::Plus,
                    0x24 => BinaryOp::Shl,
                    0x25 => BinaryOp::Shr,
                    0x26 => BinaryOp::Shra,
                    _ => BinaryOp::Xor,
                };
                match self.binary(op) {
                    Ok(()) => self.advance_root(),
                    Err(e) => Err(e.into()),
                }
            }
            0x70..=0x8f | 0x91 => {
                let (offset, next) = short_leb(bytes, pos + 1, true)?;
                self.next_byte = next;
                if code == 0x91 {
                    self.request(
                        Pending::FrameBase { offset },
                        EvaluationResult::RequiresFrameBase,
                    )
                } else {
                    self.request(
                        Pending::Breg {
                            offset,
                            address_space: None,
                        },
                        EvaluationResult::RequiresRegister {
                            register: u16::from(code - 0x70),
                        },
                    )
                }
            }
            0x9e => {
                // DW_OP_implicit_value: short blocks are stored inline.
                let (len, start) = short_leb(bytes, pos + 1, false)?;
                let end = start.checked_add(usize::try_from(len).ok()?)?;
                let block = bytes.get(start..end)?;
                self.next_byte = end;
                self.push_loc(LocationDescription::single(
                    Storage::Implicit(Bytes::from(block)),
                    0,
                ));
                self.advance_root()
            }
            0xa3 => {
                // DW_OP_entry_value: the block is copied into the request
                // (inline if short).
                let (len, start) = short_leb(bytes, pos + 1, false)?;
                let end = start.checked_add(usize::try_from(len).ok()?)?;
                let block = bytes.get(start..end)?;
                self.next_byte = end;
                self.entry_value(Bytes::from(block))
            }
            _ => return None,
        })
    }

    fn entry_value(&mut self, expression: Bytes) -> Step {
        let register = entry_register(&expression);
        self.request(
            Pending::EntryValue,
            EvaluationResult::RequiresEntryValue {
                expression,
                register,
            },
        )
    }

    fn need_type(&mut self, offset: u64) -> Step {
        self.request(
            Pending::BaseType { offset },
            EvaluationResult::RequiresBaseType { offset },
        )
    }

    fn enter_call(&mut self, bytes: &[u8]) -> Step {
        let decoded =
            decode(bytes, self.encoding).map_err(|e| EvalError::IllFormedCallee(e.to_string()))?;
        if decoded.is_empty() {
            return self.advance();
        }
        if self.returns.len() >= MAX_CALL_DEPTH {
            return Err(EvalError::CallDepthExceeded(MAX_CALL_DEPTH).into());
        }
        let mut offsets: Vec<usize> = decoded.iter().map(|(o, _)| *o).collect();
        offsets.push(bytes.len());
        let ops = decoded.into_iter().map(|(_, op)| op).collect();
        let code = Arc::new(Code { ops, offsets });
        self.returns.push((self.callee.take(), self.pc));
        self.callee = Some(code);
        self.pc = 0;
        Ok(())
    }

    fn extend(&mut self, bit_size: u64, count: u64) -> Result<(), EvalError> {
        if bit_size == 0 || count == 0 {
            return Err(EvalError::IllFormed(
                "the element bit size or count of DW_OP_LLVM_extend is 0",
            ));
        }
        let loc = self.pop_location()?;
        self.check_part(&loc, bit_size)?;
        self.check_composite_bits(u128::from(bit_size) * u128::from(count))?;
        let weight = (loc.weight() as u128 + 1).saturating_mul(u128::from(count));
        if weight >= MAX_LOCATION_WEIGHT as u128 {
            return Err(EvalError::TooLarge("DW_OP_extend makes too many parts"));
        }
        let parts = (0..count)
            .map(|_| Part {
                location: loc.clone(),
                bit_size,
            })
            .collect();
        self.push_loc(LocationDescription::composite(parts));
        Ok(())
    }

    fn select_bit_piece(&mut self, bit_size: u64, count: u64) -> Result<(), EvalError> {
        if bit_size == 0 || count == 0 {
            return Err(EvalError::IllFormed(
                "the element bit size or count of DW_OP_LLVM_select_bit_piece is 0",
            ));
        }
        self.need(3)?;
        let mask = self.pop_integral()?;
        let one = self.pop_location()?;
        let zero = self.pop_location()?;
        // The mask must have a bit for every part.
        if count > u64::from(mask.ty.size(self.address_size)) * 8 {
            return Err(EvalError::BadSize(count));
        }
        self.check_composite_bits(u128::from(bit_size) * u128::from(count))?;
        let weight =
            (one.weight().max(zero.weight()) as u128 + 1).saturating_mul(u128::from(count));
        if weight >= MAX_LOCATION_WEIGHT as u128 {
            return Err(EvalError::TooLarge(
                "DW_OP_select_bit_piece makes too many parts",
            ));
        }
        let mut parts = Vec::with_capacity(count as usize);
        for i in 0..count {
            let selected = u32::try_from(i)
                .ok()
                .and_then(|i| mask.bits.checked_shr(i))
                .unwrap_or(0)
                & 1
                != 0;
            let mut l = if selected { one.clone() } else { zero.clone() };
            l.offset_bits(i128::from(i) * i128::from(bit_size), self.address_size)
                .map_err(|_| EvalError::OffsetOutOfRange)?;
            self.check_register_offsets(&l)?;
            self.check_part(&l, bit_size)?;
            parts.push(Part {
                location: l,
                bit_size,
            });
        }
        self.push_loc(LocationDescription::composite(parts));
        Ok(())
    }

    /// rbss(L) of the normative text: the fewest bits left in the storage of
    /// any of `l`'s places after its offset (memory: the address space's
    /// size). `None` if some place's storage has no size known to the
    /// evaluator (a register not given to
    /// [`Evaluation::set_register_size`], undefined storage).
    fn remaining_bits(&self, l: &LocationDescription) -> Option<u128> {
        let mut min = None::<u128>;
        for place in l.places.iter() {
            let left = self
                .storage_bits(&place.storage)?
                .saturating_sub(place.bit_offset);
            min = Some(min.map_or(left, |m| m.min(left)));
        }
        min
    }

    /// `DW_OP_overlay` (`unit` 8) and `DW_OP_bit_overlay` (`unit` 1): the
    /// base location BL with the overlay OL over `size` units from `offset`
    /// units, as the composite the normative text's four steps build.
    fn overlay(&mut self, unit: u64) -> Result<(), EvalError> {
        self.need(4)?;
        let size = self.pop_integral()?;
        let offset = self.pop_integral()?;
        let (size, offset) = (self.amount(size), self.amount(offset));
        let overlay = self.pop_location()?;
        let base = self.pop_location()?;
        if size < 0 || offset < 0 {
            return Err(EvalError::BadOverlay(
                "the overlay's size or offset is negative",
            ));
        }
        let too_large = EvalError::TooLarge("overlay larger than 2^64 bits");
        let scale = |n: i128| u64::try_from(n).ok().and_then(|n| n.checked_mul(unit));
        let (Some(bs), Some(bo)) = (scale(size), scale(offset)) else {
            return Err(too_large);
        };
        let end = u128::from(bs) + u128::from(bo);
        // rbss(BL); `None` when a place's storage size is not known here
        // (registers, undefined storage): those are not checked.
        let rbss = self.remaining_bits(&base);
        if rbss.is_some_and(|r| r < end) {
            return Err(EvalError::BadOverlay(
                "the overlay extends past the end of the base location's storage",
            ));
        }
        if bs == 0 {
            self.push_loc(base);
            return Ok(());
        }
        if bo == 0 && rbss == Some(end) {
            self.push_loc(overlay);
            return Ok(());
        }
        // Parts are at most 2^64 - 1 bits: the tail of a larger (memory) or
        // unknown-size storage stops there.
        let Ok(end) = u64::try_from(end) else {
            return Err(too_large);
        };
        let tail = rbss.unwrap_or(u128::MAX).min(u128::from(u64::MAX)) as u64 - end;
        let weight = 2 * base.weight() + overlay.weight() + 3;
        if weight >= MAX_LOCATION_WEIGHT {
            return Err(EvalError::TooLarge("DW_OP_overlay makes too many parts"));
        }
        let mut parts = Vec::with_capacity(3);
        if bo != 0 {
            parts.push(Part {
                location: base.clone(),
                bit_size: bo,
            });
        }
        parts.push(Part {
            location: overlay,
            bit_size: bs,
        });
        if tail != 0 {
            let mut rest = base;
            rest.offset_bits(i128::from(end), self.address_size)
                .map_err(|_| EvalError::OffsetOutOfRange)?;
            parts.push(Part {
                location: rest,
                bit_size: tail,
            });
        }
        self.push_loc(LocationDescription::composite(parts));
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Step {
        let a = self.address_size;
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
                self.push_loc(LocationDescription::memory(0, addr));
            }
            Op::Addrx(index) | Op::Constx(index) => {
                let is_address = matches!(op, Op::Addrx(_));
                return self.request(
                    Pending::IndexedAddress { is_address },
                    EvaluationResult::RequiresIndexedAddress {
                        index: *index,
                        is_address,
                    },
                );
            }
            Op::ConstType { type_offset, value } => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                if value.len() != usize::from(ty.size(a)) {
                    return Err(EvalError::BadSize(value.len() as u64).into());
                }
                self.push_value(Value::from_bytes(ty, value, a));
            }
            Op::Dup => {
                let s = self.peek(0)?;
                self.stack.push(s);
            }
            Op::Drop => {
                self.need_complete(1)?;
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
                self.need_complete(2)?;
                let len = self.stack.len();
                self.stack.swap(len - 1, len - 2);
            }
            Op::Rot => {
                self.need_complete(3)?;
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
            Op::PlusUconst(n) => self.plus_uconst(*n)?,
            Op::Eq => self.compare(CompareOp::Eq)?,
            Op::Ge => self.compare(CompareOp::Ge)?,
            Op::Gt => self.compare(CompareOp::Gt)?,
            Op::Le => self.compare(CompareOp::Le)?,
            Op::Lt => self.compare(CompareOp::Lt)?,
            Op::Ne => self.compare(CompareOp::Ne)?,
            Op::Skip(d) => {
                self.branch(*d)?;
                return Ok(());
            }
            Op::Bra(d) => {
                let v = self.pop_value()?;
                if v.bits != 0 {
                    self.branch(*d)?;
                    return Ok(());
                }
            }
            Op::Reg(r) => self.push_loc(LocationDescription::register(u16::from(*r))),
            Op::Regx(r) => {
                let r = Self::reg(*r)?;
                self.push_loc(LocationDescription::register(r));
            }
            Op::Breg(r, offset) => {
                return self.request(
                    Pending::Breg {
                        offset: *offset,
                        address_space: None,
                    },
                    EvaluationResult::RequiresRegister {
                        register: u16::from(*r),
                    },
                );
            }
            Op::Bregx(r, offset) => {
                let register = Self::reg(*r)?;
                return self.request(
                    Pending::Breg {
                        offset: *offset,
                        address_space: None,
                    },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::AspaceBregx { register, offset } => {
                let register = Self::reg(*register)?;
                let space = self.pop_integral()?;
                return self.request(
                    Pending::Breg {
                        offset: *offset,
                        address_space: Some(space.bits),
                    },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::RegvalType {
                register,
                type_offset,
            } => {
                let register = Self::reg(*register)?;
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                return self.request(
                    Pending::Regval { ty },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::Fbreg(offset) => {
                return self.request(
                    Pending::FrameBase { offset: *offset },
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
            Op::Deref => return self.deref(a, ValueType::Generic),
            Op::DerefSize(n) => return self.deref(*n, ValueType::Generic),
            Op::DerefType { size, type_offset } => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                // S must be the type's byte size (deref_size may be smaller).
                if *size != ty.size(a) {
                    return Err(EvalError::BadSize(u64::from(*size)).into());
                }
                return self.deref(*size, ty);
            }
            Op::Xderef => return self.xderef(a, ValueType::Generic),
            Op::XderefSize(n) => return self.xderef(*n, ValueType::Generic),
            Op::XderefType { size, type_offset } => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                if *size != ty.size(a) {
                    return Err(EvalError::BadSize(u64::from(*size)).into());
                }
                return self.xderef(*size, ty);
            }
            Op::Convert(type_offset) | Op::Reinterpret(type_offset) => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                let v = self.pop_value()?;
                let r = if matches!(op, Op::Convert(_)) {
                    v.convert(ty, a)
                } else {
                    v.reinterpret(ty, a)
                };
                self.push_value(r.map_err(Self::value_err)?);
            }
            Op::Call2(die) => return self.call(u64::from(*die), true),
            Op::Call4(die) => return self.call(u64::from(*die), true),
            Op::CallRef(die) => return self.call(*die, false),
            Op::EntryValue(expression) => {
                return self.entry_value(Bytes::from(expression.as_slice()))
            }
            Op::FormTlsAddress => {
                let v = self.pop_integral()?;
                return self.request(
                    Pending::Tls,
                    EvaluationResult::RequiresTlsAddress { offset: v.bits },
                );
            }
            Op::CallFrameEntryReg(r) => {
                let register = Self::reg(*r)?;
                return self.request(
                    Pending::EntryRegister,
                    EvaluationResult::RequiresEntryRegister { register },
                );
            }
            Op::FormAspaceAddress => {
                self.need(2)?;
                let space = self.pop_integral()?;
                let addr = self.pop_integral()?;
                self.push_loc(LocationDescription::memory(space.bits, addr.bits));
            }
            Op::Offset => {
                self.need(2)?;
                let v = self.pop_integral()?;
                let n = self.amount(v);
                self.offset(n * 8)?;
            }
            Op::OffsetUconst(n) => self.offset(i128::from(*n) * 8)?,
            Op::BitOffset => {
                self.need(2)?;
                let v = self.pop_integral()?;
                let n = self.amount(v);
                self.offset(n)?;
            }
            Op::Piece(n) => self.piece_bytes(*n)?,
            Op::BitPiece { size, offset } => self.piece(*size, *offset)?,
            Op::PieceEnd => match self.pop_slot()? {
                Slot::Incomplete(parts, ..) => self.push_loc(LocationDescription::composite(parts)),
                _ => {
                    return Err(EvalError::IllFormed(
                        "the top of the stack is not an incomplete composite location description",
                    )
                    .into())
                }
            },
            Op::ImplicitValue(bytes) => {
                let l = LocationDescription::single(Storage::Implicit(bytes.as_slice().into()), 0);
                self.push_loc(l);
            }
            Op::StackValue => self.stack_value()?,
            Op::ImplicitPointer { die, offset } => {
                let l = LocationDescription::single(
                    Storage::ImplicitPointer {
                        die: *die,
                        byte_offset: *offset,
                        address_space: None,
                    },
                    0,
                );
                self.push_loc(l);
            }
            Op::AspaceImplicitPointer { die, offset } => {
                let space = self.pop_integral()?;
                let l = LocationDescription::single(
                    Storage::ImplicitPointer {
                        die: *die,
                        byte_offset: *offset,
                        address_space: Some(space.bits),
                    },
                    0,
                );
                self.push_loc(l);
            }
            Op::Extend { bit_size, count } => self.extend(*bit_size, *count)?,
            Op::SelectBitPiece { bit_size, count } => self.select_bit_piece(*bit_size, *count)?,
            Op::Undefined => self.push_loc(LocationDescription::undefined()),
            Op::Overlay => self.overlay(8)?,
            Op::BitOverlay => self.overlay(1)?,
            Op::Nop | Op::LlvmNop => {}
        }
        self.advance()
    }
}

/// A LEB128 (signed or not) of at most 9 bytes (63 bits: it cannot
/// overflow) at `pos`, and the offset after it; `None` if longer or truncated
/// (the general decoder then reports or handles it). Unsigned values are
/// below 2^63, so they fit the `i64`.
#[inline(always)]
fn short_leb(bytes: &[u8], pos: usize, signed: bool) -> Option<(i64, usize)> {
    // One byte, the usual case.
    let b = *bytes.get(pos)?;
    if b & 0x80 == 0 {
        let value = if signed && b & 0x40 != 0 {
            i64::from(b) - 0x80
        } else {
            i64::from(b)
        };
        return Some((value, pos + 1));
    }
    short_leb_long(bytes, pos, signed)
}

/// `short_leb` of two bytes or more.
#[inline(never)]
fn short_leb_long(bytes: &[u8], pos: usize, signed: bool) -> Option<(i64, usize)> {
    let mut value = 0i64;
    for i in 0..9 {
        let b = *bytes.get(pos + i)?;
        value |= i64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let shift = 7 * (i + 1);
            if signed && shift < 64 && b & 0x40 != 0 {
                value |= -1i64 << shift;
            }
            return Some((value, pos + i + 1));
        }
    }
    None
}

/// The size in bits of an address space's memory with `address_size`-byte
/// addresses.
fn address_space_bits(address_size: u8) -> u128 {
    1u128 << (8 * u32::from(address_size.min(8)) + 3)
}

/// Whether dropping `e` frees anything (it is not a value or a single
/// register, memory, undefined or short implicit place).
fn owns_memory(e: &Entry) -> bool {
    match e {
        Entry::Value(_) => false,
        Entry::Location(l) if !l.places.is_inline() => true,
        Entry::Location(l) => match l.places.as_slice() {
            [p] => match &p.storage {
                Storage::Memory { .. } | Storage::Register(_) | Storage::Undefined => false,
                Storage::ImplicitPointer { .. } => false,
                Storage::Implicit(b) => !b.is_inline(),
                Storage::Composite(_) => true,
            },
            // Several places are kept in a vector.
            _ => true,
        },
    }
}

/// The register of an entry-value expression that is only `DW_OP_regN` or
/// `DW_OP_regx N` (decoded by hand: this runs for every entry value).
fn entry_register(expression: &[u8]) -> Option<u16> {
    match expression {
        [code @ 0x50..=0x6f] => Some(u16::from(code - 0x50)),
        [0x90, rest @ ..] => {
            let mut value = 0u64;
            for (i, b) in rest.iter().enumerate() {
                if i >= 3 {
                    return None;
                }
                value |= u64::from(b & 0x7f) << (7 * i);
                if b & 0x80 == 0 {
                    return (i + 1 == rest.len())
                        .then(|| u16::try_from(value).ok())
                        .flatten();
                }
            }
            None
        }
        _ => None,
    }
}
