//! The program being inspected, as one trait: what [`crate::access`] reads
//! and writes through a location description, and what
//! [`Evaluation::evaluate_with`] answers an evaluation's requests from.
//!
//! Design: the evaluator itself stays pause-and-resume ([`Evaluation::evaluate`]
//! returns a request, a `resume_with_*` method answers it: see [`crate::eval`]),
//! so a caller that answers asynchronously or from several places keeps full
//! control. Most callers answer every request the same way, though: from the
//! registers and memory of a stopped thread. [`Evaluation::evaluate_with`] is that
//! loop, written once, over a [`Target`]: registers and memory are the only
//! required methods; every other request (lane, frame base, CFA, object
//! address or location, base types, entry values, the location of a register at entry,
//! called expressions, `.debug_addr`, TLS) has a default that cannot answer, so
//! a target implements what it knows. An unanswered request ends the evaluation
//! with [`ErrorDetail::Unanswered`] naming the operation that asked, the [`Request`]
//! and the target's reason, an [`Unavailable`].
//!
//! Implementations in this crate (feature `binary`): `binary::Snapshot` (a JSON
//! snapshot's registers and memory), `binary::State` (the same, borrowed: one
//! frame of a core file or a process, `stopped::Stopped::state`) and
//! `binary::WithFrame` (adds a function's `DW_AT_frame_base` and its unit's base
//! types to any target).
//!
//! ```
//! use locus_dwarf::{parse_text, Encoding, Entry, Evaluation, Target, Unavailable, Value};
//!
//! /// rsp (DWARF 7) is 0x1000; memory holds 0x2a at 0x1008; the lane is 3.
//! struct Thread;
//! impl Target for Thread {
//!     fn read_memory(&mut self, space: u64, address: u64, buf: &mut [u8]) -> bool {
//!         if space != 0 || address != 0x1008 || buf.len() > 8 { return false; }
//!         buf.copy_from_slice(&0x2au64.to_le_bytes()[..buf.len()]);
//!         true
//!     }
//!     fn read_register(&mut self, register: u16, at: u64, buf: &mut [u8]) -> bool {
//!         let bytes = 0x1000u64.to_le_bytes();
//!         match bytes.get(at as usize..at as usize + buf.len()) {
//!             Some(b) if register == 7 => { buf.copy_from_slice(b); true }
//!             _ => false,
//!         }
//!     }
//!     fn register_size(&mut self, register: u16) -> Option<u64> {
//!         (register == 7).then_some(8)
//!     }
//!     fn lane(&mut self) -> Result<u64, Unavailable> {
//!         Ok(3)
//!     }
//! }
//!
//! let ops = parse_text("DW_OP_breg7 8; DW_OP_deref; DW_OP_push_lane; DW_OP_plus", |_| None)?;
//! let mut eval = Evaluation::new(&ops, Encoding::default());
//! eval.evaluate_with(&mut Thread)?;
//! assert_eq!(eval.result(), Some(&Entry::Value(Value::generic(0x2d, 8))));
//!
//! // A request the target cannot answer names the operation that asked.
//! let ops = parse_text("DW_OP_call_frame_cfa", |_| None)?;
//! let mut eval = Evaluation::new(&ops, Encoding::default());
//! let e = eval.evaluate_with(&mut Thread).unwrap_err();
//! assert_eq!(e.to_string(), "op #0 DW_OP_call_frame_cfa: the target has no CFA");
//! # Ok::<(), locus_dwarf::Error>(())
//! ```

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::error::{Error, Request};
use crate::eval::{Entry, Evaluation, EvaluationResult};
use crate::location::LocationDescription;
use crate::op::Encoding;
use crate::ErrorDetail;

/// Registers, memory and what else an evaluation may ask of the program
/// being inspected.
///
/// The access methods return `false` if the access is impossible (unknown
/// register, offset past its end, unmapped memory, read-only target); the
/// request methods return `Err` with the reason they cannot answer (by
/// default [`Unavailable::Unsupported`]). [`crate::access`] uses the four access
/// methods; [`Evaluation::evaluate_with`] all of them. Request methods
/// answer `Err` with an [`Unavailable`] reason.
pub trait Target {
    /// Fills `buf` from `address` in `address_space` (0: global memory).
    fn read_memory(&mut self, address_space: u64, address: u64, buf: &mut [u8]) -> bool;

    /// Fills `buf` from register `register` starting at byte `byte_offset`
    /// (little-endian register contents).
    fn read_register(&mut self, register: u16, byte_offset: u64, buf: &mut [u8]) -> bool;

    /// Writes `bytes` at `address` in `address_space`. By default memory is
    /// read-only.
    fn write_memory(&mut self, address_space: u64, address: u64, bytes: &[u8]) -> bool {
        let _ = (address_space, address, bytes);
        false
    }

    /// Writes `bytes` into register `register` at byte `byte_offset`. By
    /// default registers are read-only.
    fn write_register(&mut self, register: u16, byte_offset: u64, bytes: &[u8]) -> bool {
        let _ = (register, byte_offset, bytes);
        false
    }

    /// The size in bytes of register `register`, if the target has it: a
    /// [`RequiresRegister`](EvaluationResult::RequiresRegister) is answered
    /// with that many bytes from [`Target::read_register`]. By default no
    /// register can be read whole (reads through locations still work).
    fn register_size(&mut self, register: u16) -> Option<u64> {
        let _ = register;
        None
    }

    /// Calls `each` with every register the target has and its size in
    /// bytes, so that [`Evaluation::evaluate_with`] can tell the evaluation
    /// ([`Evaluation::set_register_size`]): offsets and parts past a
    /// register's end are then errors of the operation that makes them. By
    /// default none.
    fn register_sizes(&mut self, each: &mut dyn FnMut(u16, u64)) {
        let _ = each;
    }

    /// The current lane (`DW_OP_LLVM_push_lane`).
    fn lane(&mut self) -> Result<u64, Unavailable> {
        Err(Unavailable::Unsupported)
    }

    /// The current concurrent loop iteration (`DW_OP_LLVM_push_iteration`).
    fn iteration(&mut self) -> Result<u64, Unavailable> {
        Err(Unavailable::Unsupported)
    }

    /// The frame base address (`DW_OP_fbreg`).
    fn frame_base(&mut self) -> Result<u64, Unavailable> {
        Err(Unavailable::Unsupported)
    }

    /// The canonical frame address (`DW_OP_call_frame_cfa`).
    fn call_frame_cfa(&mut self) -> Result<u64, Unavailable> {
        Err(Unavailable::Unsupported)
    }

    /// The object's address in global memory (`DW_OP_push_object_address`),
    /// asked when [`Target::object_location`] has none.
    fn object_address(&mut self) -> Result<u64, Unavailable> {
        Err(Unavailable::Unsupported)
    }

    /// The object's location description (`DW_OP_push_object_address`) when
    /// it is more than an address in global memory: the extension lets the
    /// current object be in registers, another address space, composite or
    /// implicit storage, or in several places at once (a
    /// [`LocationDescription`] of several places: reads may use any, writes
    /// through it must update all). `Some` is pushed as it is; `None` (the
    /// default) leaves the answer to [`Target::object_address`].
    fn object_location(&mut self) -> Option<LocationDescription> {
        None
    }

    /// The `DW_AT_encoding` and `DW_AT_byte_size` of the base type DIE at
    /// unit offset `offset` (typed operations).
    fn base_type(&mut self, offset: u64) -> Result<(u8, u64), Unavailable> {
        let _ = offset;
        Err(Unavailable::Unsupported)
    }

    /// What `expression` (encoded in `encoding`) had on entry to the current
    /// function (`DW_OP_entry_value`); `register` is set when the expression
    /// is only `DW_OP_regN`/`DW_OP_regx N`.
    fn entry_value(
        &mut self,
        expression: &[u8],
        register: Option<u16>,
        encoding: Encoding,
    ) -> Result<Entry, Unavailable> {
        let _ = (expression, register, encoding);
        Err(Unavailable::Unsupported)
    }

    /// Where register `register`'s value on entry to the current function is
    /// (`DW_OP_LLVM_call_frame_entry_reg`): [`LocationDescription::undefined`] if
    /// unknown, [`LocationDescription::register`] if it was not saved.
    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, Unavailable> {
        let _ = register;
        Err(Unavailable::Unsupported)
    }

    /// The value on entry of the formal parameter at unit offset `offset`
    /// (`DW_OP_GNU_parameter_ref`), from the caller's call site.
    fn parameter_ref(&mut self, offset: u64) -> Result<Entry, Unavailable> {
        let _ = offset;
        Err(Unavailable::Unsupported)
    }

    /// The value of the variable at `.debug_info` offset `offset` in the
    /// current frame (`DW_OP_GNU_variable_value`).
    fn variable_value(&mut self, offset: u64) -> Result<Entry, Unavailable> {
        let _ = offset;
        Err(Unavailable::Unsupported)
    }

    /// The encoded `DW_AT_location` of the DIE at `offset` (`DW_OP_call*`;
    /// unit-relative unless `call_ref`); empty if it has none.
    fn callee(&mut self, offset: u64, unit_relative: bool) -> Result<Vec<u8>, Unavailable> {
        let _ = (offset, unit_relative);
        Err(Unavailable::Unsupported)
    }

    /// Entry `index` of the unit's `.debug_addr` (`DW_OP_addrx`, or
    /// `DW_OP_constx` when `!is_address`).
    fn indexed_address(&mut self, index: u64, is_address: bool) -> Result<u64, Unavailable> {
        let _ = (index, is_address);
        Err(Unavailable::Unsupported)
    }

    /// The address of the thread-local storage at `offset` for the current
    /// thread (`DW_OP_form_tls_address`).
    fn tls_address(&mut self, offset: u64) -> Result<u64, Unavailable> {
        let _ = offset;
        Err(Unavailable::Unsupported)
    }
}

impl<T: Target + ?Sized> Target for &mut T {
    fn read_memory(&mut self, address_space: u64, address: u64, buf: &mut [u8]) -> bool {
        (**self).read_memory(address_space, address, buf)
    }
    fn read_register(&mut self, register: u16, byte_offset: u64, buf: &mut [u8]) -> bool {
        (**self).read_register(register, byte_offset, buf)
    }
    fn write_memory(&mut self, address_space: u64, address: u64, bytes: &[u8]) -> bool {
        (**self).write_memory(address_space, address, bytes)
    }
    fn write_register(&mut self, register: u16, byte_offset: u64, bytes: &[u8]) -> bool {
        (**self).write_register(register, byte_offset, bytes)
    }
    fn register_size(&mut self, register: u16) -> Option<u64> {
        (**self).register_size(register)
    }
    fn register_sizes(&mut self, each: &mut dyn FnMut(u16, u64)) {
        (**self).register_sizes(each)
    }
    fn lane(&mut self) -> Result<u64, Unavailable> {
        (**self).lane()
    }
    fn iteration(&mut self) -> Result<u64, Unavailable> {
        (**self).iteration()
    }
    fn frame_base(&mut self) -> Result<u64, Unavailable> {
        (**self).frame_base()
    }
    fn call_frame_cfa(&mut self) -> Result<u64, Unavailable> {
        (**self).call_frame_cfa()
    }
    fn object_address(&mut self) -> Result<u64, Unavailable> {
        (**self).object_address()
    }
    fn object_location(&mut self) -> Option<LocationDescription> {
        (**self).object_location()
    }
    fn base_type(&mut self, offset: u64) -> Result<(u8, u64), Unavailable> {
        (**self).base_type(offset)
    }
    fn entry_value(
        &mut self,
        expression: &[u8],
        register: Option<u16>,
        encoding: Encoding,
    ) -> Result<Entry, Unavailable> {
        (**self).entry_value(expression, register, encoding)
    }
    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, Unavailable> {
        (**self).entry_register(register)
    }
    fn parameter_ref(&mut self, offset: u64) -> Result<Entry, Unavailable> {
        (**self).parameter_ref(offset)
    }
    fn variable_value(&mut self, offset: u64) -> Result<Entry, Unavailable> {
        (**self).variable_value(offset)
    }
    fn callee(&mut self, offset: u64, unit_relative: bool) -> Result<Vec<u8>, Unavailable> {
        (**self).callee(offset, unit_relative)
    }
    fn indexed_address(&mut self, index: u64, is_address: bool) -> Result<u64, Unavailable> {
        (**self).indexed_address(index, is_address)
    }
    fn tls_address(&mut self, offset: u64) -> Result<u64, Unavailable> {
        (**self).tls_address(offset)
    }
}

/// Registers up to this size are read into a buffer on the machine stack.
const REGISTER_BUFFER: usize = 256;

impl<'a> Evaluation<'a> {
    /// Runs the evaluation to completion, answering every request from
    /// `target` (see [`crate::target`]): the loop a caller of
    /// [`Evaluation::evaluate`] would otherwise write. First tells the
    /// evaluation the target's register sizes
    /// ([`Target::register_sizes`]). On success the result is in
    /// [`Evaluation::result`]; a request the target cannot answer is
    /// [`ErrorDetail::Unanswered`].
    pub fn evaluate_with<T: Target + ?Sized>(&mut self, target: &mut T) -> Result<(), Error> {
        self.evaluate_traced_with(target, &mut |_| {})
    }

    /// [`Evaluation::evaluate_with`] for an evaluation with
    /// [`Evaluation::set_trace`] on: `on_step` sees the evaluation after
    /// every executed operation ([`Evaluation::stack`] shows its effect,
    /// [`Evaluation::pc`] the next operation).
    pub fn evaluate_traced_with<T: Target + ?Sized>(
        &mut self,
        target: &mut T,
        on_step: &mut dyn FnMut(&Evaluation<'a>),
    ) -> Result<(), Error> {
        target.register_sizes(&mut |register, bytes| self.set_register_size(register, bytes));
        let mut r = self.evaluate()?;
        loop {
            r = match r {
                EvaluationResult::Complete => return Ok(()),
                EvaluationResult::Stepped => {
                    on_step(self);
                    self.evaluate()?
                }
                EvaluationResult::RequiresRegister { register } => {
                    self.answer_register(register, target)?
                }
                EvaluationResult::RequiresMemory {
                    address,
                    size,
                    address_space,
                } => {
                    let address_space = u64::from(address_space);
                    let mut buf = [0u8; 255];
                    let buf = &mut buf[..usize::from(size)];
                    if !target.read_memory(address_space, address, buf) {
                        let request = Request::Memory {
                            address_space,
                            address,
                            size,
                        };
                        return Err(self.unanswered(request, Unavailable::Missing));
                    }
                    self.resume_with_memory(buf)?
                }
                EvaluationResult::RequiresLane => {
                    let lane = target
                        .lane()
                        .map_err(|w| self.unanswered(Request::Lane, w))?;
                    self.resume_with_lane(lane)?
                }
                EvaluationResult::RequiresIteration => {
                    let it = target
                        .iteration()
                        .map_err(|w| self.unanswered(Request::Iteration, w))?;
                    self.resume_with_iteration(it)?
                }
                EvaluationResult::RequiresFrameBase => {
                    let fb = target
                        .frame_base()
                        .map_err(|w| self.unanswered(Request::FrameBase, w))?;
                    self.resume_with_frame_base(fb)?
                }
                EvaluationResult::RequiresCallFrameCfa => {
                    let cfa = target
                        .call_frame_cfa()
                        .map_err(|w| self.unanswered(Request::CallFrameCfa, w))?;
                    self.resume_with_call_frame_cfa(cfa)?
                }
                EvaluationResult::RequiresObjectAddress => match target.object_location() {
                    Some(l) => self.resume_with_object_location(l)?,
                    None => {
                        let a = target
                            .object_address()
                            .map_err(|w| self.unanswered(Request::ObjectAddress, w))?;
                        self.resume_with_object_address(a)?
                    }
                },
                EvaluationResult::RequiresBaseType { offset } => {
                    let (encoding, size) = target
                        .base_type(offset)
                        .map_err(|w| self.unanswered(Request::BaseType(offset), w))?;
                    self.resume_with_base_type(encoding, size)?
                }
                EvaluationResult::RequiresEntryValue { register } => {
                    let entry = target
                        .entry_value(self.entry_value_expression(), register, self.encoding())
                        .map_err(|w| self.unanswered(Request::EntryValue, w))?;
                    self.resume_with_entry_value(entry)?
                }
                EvaluationResult::RequiresParameterRef { offset } => {
                    let entry = target
                        .parameter_ref(offset)
                        .map_err(|w| self.unanswered(Request::ParameterRef(offset), w))?;
                    self.resume_with_entry_value(entry)?
                }
                EvaluationResult::RequiresVariableValue { offset } => {
                    let entry = target
                        .variable_value(offset)
                        .map_err(|w| self.unanswered(Request::VariableValue(offset), w))?;
                    self.resume_with_entry_value(entry)?
                }
                EvaluationResult::RequiresEntryRegister { register } => {
                    let l = target
                        .entry_register(register)
                        .map_err(|w| self.unanswered(Request::EntryRegister(register), w))?;
                    self.resume_with_entry_register(l)?
                }
                EvaluationResult::RequiresCallee {
                    offset,
                    unit_relative,
                } => {
                    let bytes = target
                        .callee(offset, unit_relative)
                        .map_err(|w| self.unanswered(Request::Callee(offset), w))?;
                    self.resume_with_callee(&bytes)?
                }
                EvaluationResult::RequiresIndexedAddress { index, is_address } => {
                    let a = target
                        .indexed_address(index, is_address)
                        .map_err(|w| self.unanswered(Request::IndexedAddress(index), w))?;
                    self.resume_with_indexed_address(a)?
                }
                EvaluationResult::RequiresTlsAddress { offset } => {
                    let a = target
                        .tls_address(offset)
                        .map_err(|w| self.unanswered(Request::TlsAddress(offset), w))?;
                    self.resume_with_tls_address(a)?
                }
            };
        }
    }

    /// Answers a register request with the register's whole contents.
    fn answer_register<T: Target + ?Sized>(
        &mut self,
        register: u16,
        target: &mut T,
    ) -> Result<EvaluationResult, Error> {
        let missing = |e: &Self| e.unanswered(Request::Register(register), Unavailable::Missing);
        let size = target
            .register_size(register)
            .ok_or_else(|| missing(self))?;
        let size = usize::try_from(size).map_err(|_| missing(self))?;
        let mut small = [0u8; REGISTER_BUFFER];
        let mut large;
        let buf = match small.get_mut(..size) {
            Some(b) => b,
            None => {
                large = vec![0u8; size];
                &mut large[..]
            }
        };
        if !target.read_register(register, 0, buf) {
            return Err(missing(self));
        }
        self.resume_with_register(buf)
    }

    /// [`ErrorDetail::Unanswered`] for the request the evaluation is waiting on.
    pub(crate) fn unanswered(&self, request: Request, reason: Unavailable) -> Error {
        let index = self.pc();
        ErrorDetail::Unanswered {
            index,
            op: self.root_name(index),
            request,
            reason,
        }
        .into()
    }
}

/// Why a [`Target`] cannot answer a request: what its request methods
/// return instead of an answer, and what [`ErrorDetail::Unanswered`] reports with
/// the [`Request`]. A debugger shows the variables such errors leave unknown
/// as `<optimized out>`, as gdb does, and the others as errors.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unavailable {
    /// The target has no such thing at all: every request method's default
    /// (no lanes, no CFI, no entry values, ...).
    Unsupported,
    /// The target has such things, but not this one: a register or memory
    /// it does not hold, a context without a frame base, an unlisted base
    /// type DIE.
    Missing,
    /// It cannot be known at this point of the program (gdb's `<optimized
    /// out>`): why, in words for the user (e.g. no call site provably gives
    /// this entry value, and which).
    OptimizedOut(String),
    /// An evaluation made to answer (a frame base, an entry-value
    /// expression, a caller's `DW_AT_call_value`, another variable) failed
    /// with this error.
    Failed(Box<Error>),
    /// The evaluation of the variable a `DW_OP_GNU_variable_value` names
    /// ([`Request::VariableValue`], which gives its DIE offset) failed with
    /// this error.
    VariableFailed {
        /// The variable's name (`DW_AT_name`).
        name: String,
        /// Why its evaluation failed.
        error: Box<Error>,
    },
    /// What an evaluation made to answer gave is not an address (a frame
    /// base that is neither a memory location nor a readable register).
    NotAnAddress,
    /// Evaluations made to answer were nested too deeply.
    NestedTooDeeply,
    /// More than this many nested evaluations for one evaluation (each has
    /// its own step limit: a loop around `DW_OP_entry_value` would multiply
    /// it).
    TooManyNested(u32),
}

impl Unavailable {
    /// The message for `request`.
    pub(crate) fn describe(&self, request: &Request, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Unsupported => write!(f, "the target has no {request}"),
            Unavailable::Missing => match request {
                Request::Memory { .. } => write!(f, "{request} is not readable"),
                _ => write!(f, "{request} is not in the target"),
            },
            Unavailable::OptimizedOut(why) => f.write_str(why),
            // The nested error is the `Error`'s source: one layer here.
            Unavailable::Failed(_) => write!(f, "{request}"),
            Unavailable::VariableFailed { name, .. } => match request {
                Request::VariableValue(o) => {
                    write!(f, "value of the variable `{name}` (DIE at {o:#x})")
                }
                _ => write!(f, "{request} (`{name}`)"),
            },
            Unavailable::NotAnAddress => {
                write!(
                    f,
                    "{request}: the {request} is not an address or a register"
                )
            }
            Unavailable::NestedTooDeeply => write!(f, "{request}: nested too deeply"),
            Unavailable::TooManyNested(n) => write!(
                f,
                "{request}: more than {n} nested evaluations (frame bases and entry values)"
            ),
        }
    }
}

impl fmt::Display for Unavailable {
    /// The reason without the request it answers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Unsupported => f.write_str("not supported by the target"),
            Unavailable::Missing => f.write_str("not in the target"),
            Unavailable::OptimizedOut(why) => f.write_str(why),
            // No `source` here: the whole chain.
            Unavailable::Failed(e) => write!(f, "{}", e.report()),
            Unavailable::VariableFailed { name, error } => {
                write!(f, "`{name}`: {}", error.report())
            }
            Unavailable::NotAnAddress => f.write_str("not an address or a register"),
            Unavailable::NestedTooDeeply => f.write_str("nested too deeply"),
            Unavailable::TooManyNested(n) => write!(
                f,
                "more than {n} nested evaluations (frame bases and entry values)"
            ),
        }
    }
}
