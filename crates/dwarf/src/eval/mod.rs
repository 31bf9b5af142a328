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
//! One way in: [`Evaluation::new`] of an [`Expression`], either decoded
//! [`Op`]s (from [`parse_text`](crate::parse_text) or [`decode`]) or the
//! encoded bytes, run directly, each operation decoded as it executes (the
//! common ones without building an `Op`), as gimli does. For many
//! expressions, [`Evaluation::restart`] (or [`Evaluation::into_buffers`] and
//! [`Evaluation::new_in`], gimli's shape) keeps the stack's allocation from
//! one to the next. One way out: [`Evaluation::result`] borrows the result
//! ([`Evaluation::location_result`] reads it where a location is needed).
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
//! | [`RequiresIteration`](EvaluationResult::RequiresIteration) | [`resume_with_iteration`](Evaluation::resume_with_iteration) |
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
//! assert_eq!(eval.result(), Some(&Entry::Location(Location::composite(vec![part]))));
//! # Ok::<(), locus_dwarf::Error>(())
//! ```

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::access::{plan_read, Bits, Fetch, Place};
use crate::error::Error;
use crate::location::{Bytes, LocationDescription, Part, Storage};
use crate::op::{byte_offsets, decode, decode_at, op_offsets, Encoding, Op};
use crate::value::{BinaryOp, CompareOp, UnaryOp, Value, ValueError, ValueType};
use crate::ErrorDetail;

mod api;

mod fast;
mod run;
mod stack;
mod step;

pub use crate::error::ErrorKind;

/// Default maximum number of operations one evaluation may execute.
pub const DEFAULT_MAX_STEPS: u64 = 100_000;

/// Maximum number of stack entries.
pub const MAX_STACK: usize = 1024;

/// Maximum [`LocationDescription::weight`](crate::LocationDescription::weight) of a location description the evaluator
/// builds (composites, `DW_OP_extend`, `DW_OP_select_bit_piece`).
pub const MAX_LOCATION_WEIGHT: usize = 1024;

/// Maximum nesting of `DW_OP_call2`/`call4`/`call_ref`.
pub const MAX_CALL_DEPTH: usize = 64;

/// log2 of [`MAX_LOCATION_WEIGHT`] (a power of two).
const LARGE_PART_SHIFT: u32 = MAX_LOCATION_WEIGHT.trailing_zeros();
const _: () = assert!(MAX_LOCATION_WEIGHT.is_power_of_two());

// Slots are written in place in the hot loop: keep them 32 bytes.
const _: () = assert!(core::mem::size_of::<Slot>() == 32);
// Requests and their results are returned in two registers.
const _: () = assert!(core::mem::size_of::<EvaluationResult>() <= 16);
const _: () = assert!(core::mem::size_of::<Result<EvaluationResult, Error>>() <= 16);

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
///
/// At most 16 bytes, so that `Result<EvaluationResult, Error>` (the error
/// is one pointer) is returned in two registers: the answer loop of a
/// caller that evaluates many expressions copies no more.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
        /// Address space (0: global memory). 32 bits (LLVM's are 24): a
        /// read in a larger one is [`ErrorKind::MemoryUnavailable`].
        address_space: u32,
    },
    /// Answer with [`Evaluation::resume_with_lane`].
    RequiresLane,
    /// Answer with [`Evaluation::resume_with_iteration`]
    /// (`DW_OP_LLVM_push_iteration`: the concurrent loop iteration the user
    /// is focused on).
    RequiresIteration,
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
    /// and what the nested expression,
    /// [`Evaluation::entry_value_expression`], had on entry to the current
    /// function (from a call site's `DW_AT_call_value`, or a debugger's saved
    /// state).
    RequiresEntryValue {
        /// The register if the nested expression is only `DW_OP_regN` or
        /// `DW_OP_regx N` (the usual case: "register N's value on entry").
        register: Option<u16>,
    },
    /// `DW_OP_GNU_parameter_ref`: answer with
    /// [`Evaluation::resume_with_entry_value`] and the value on entry of the
    /// formal parameter at unit offset `offset` (from the caller's call-site
    /// parameter bound to it).
    RequiresParameterRef {
        /// Unit-relative offset of the `DW_TAG_formal_parameter` DIE.
        offset: u64,
    },
    /// `DW_OP_GNU_variable_value`: answer with
    /// [`Evaluation::resume_with_entry_value`] and the value of the variable
    /// at `.debug_info` offset `offset` in the current frame.
    RequiresVariableValue {
        /// `.debug_info` offset of the variable's DIE.
        offset: u64,
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
    /// [`LocationDescription::undefined`](crate::LocationDescription::undefined) if unknown, [`LocationDescription::register`](crate::LocationDescription::register) if it was
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
    /// A composite that the DWARF 6 draft's `DW_OP_composite` began: a
    /// location like any other, which a piece operation right above it
    /// extends (fields as for `Incomplete`).
    Open(Vec<Part>, u32, bool),
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
            Slot::Incomplete(parts, ..) | Slot::Open(parts, ..) => {
                Entry::Location(LocationDescription::composite(parts))
            }
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
    /// A deref: the bits so far and the register/memory accesses left
    /// (boxed: rare, and four times the size of the other requests, which
    /// every evaluation wrote and dropped).
    Read(Box<Read>),
    Lane,
    Iteration,
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

/// A deref in progress ([`Pending::Read`]).
#[derive(Clone, Debug)]
struct Read {
    ty: ValueType,
    bits: Bits,
    fetches: Vec<Fetch>,
    next: usize,
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
    /// Given by the caller and not checked yet ([`Decoded`](crate::binary::Decoded)
    /// evaluations): checked at the first branch, then `Borrowed`, or
    /// `Unknown` (re-encoded) if they do not fit the operations. Checking
    /// them up front cost every evaluation a pass over them.
    #[cfg_attr(not(feature = "binary"), allow(dead_code))]
    Unchecked(&'a [usize]),
}

fn check_offsets(ops: &[Op], offsets: &[usize]) -> Result<(), Error> {
    let increasing = offsets.windows(2).all(|w| w[0] < w[1]);
    if offsets.len() != ops.len() + 1 || !increasing {
        return Err(ErrorDetail::BadEncoding {
            what: "byte offsets must be one per operation plus the length, increasing",
        }
        .into());
    }
    Ok(())
}

/// What an [`Evaluation`] runs: the encoded bytes of an expression (each
/// operation decoded as it is executed, as gimli does) or decoded [`Op`]s,
/// with the byte offsets of the original bytes when the caller has them.
/// Built with `From` (`&[u8]`, `&Vec<u8>`, `&[u8; N]`, `&[Op]`, `&Vec<Op>`,
/// `&[Op; N]`) or [`Expression::with_offsets`]; given to
/// [`Evaluation::new`], [`Evaluation::new_in`] and [`Evaluation::restart`].
///
/// From bytes, nothing is materialised and, with [`Evaluation::restart`],
/// nothing is allocated for expressions whose stack entries are values,
/// single places and short implicit bytes; bytes are only checked as they
/// are reached: an ill-formed operation (or branch target) is reported when
/// executed, as the decoding [`Error`] naming its byte offset. Operation
/// indices ([`Evaluation::pc`], errors) count operations from the start
/// either way.
#[derive(Clone, Copy, Debug)]
pub struct Expression<'a> {
    ops: &'a [Op],
    /// The encoded expression (`ops` is then empty).
    bytes: Option<&'a [u8]>,
    /// The operations' byte offsets, then the length; `bool`: checked.
    offsets: Option<(&'a [usize], bool)>,
}

impl<'a> Expression<'a> {
    /// Decoded operations with the byte offset of each in the original
    /// expression, then its total length, as [`decode`] and
    /// [`decode_into`](crate::decode_into) give them: branch targets are
    /// found in these offsets instead of by re-encoding the operations
    /// (which differ from the original when it used non-minimal LEB128
    /// operands). Fails unless there is one offset per operation plus the
    /// length, strictly increasing.
    pub fn with_offsets(ops: &'a [Op], offsets: &'a [usize]) -> Result<Expression<'a>, Error> {
        check_offsets(ops, offsets)?;
        Ok(Expression {
            ops,
            bytes: None,
            offsets: Some((offsets, true)),
        })
    }

    /// [`Expression::with_offsets`] with the offsets checked only if a
    /// branch needs them (and, if they do not fit, the operations
    /// re-encoded instead): for offsets that are right by construction,
    /// without a pass over them and a `Result` per evaluation.
    #[cfg_attr(not(feature = "binary"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn with_unchecked_offsets(ops: &'a [Op], offsets: &'a [usize]) -> Expression<'a> {
        Expression {
            ops,
            bytes: None,
            offsets: Some((offsets, false)),
        }
    }

    /// The root offsets an evaluation of this expression starts with.
    #[inline(always)]
    fn root_offsets(self) -> RootOffsets<'a> {
        match self.offsets {
            None => RootOffsets::Unknown,
            Some((o, true)) => RootOffsets::Borrowed(o),
            Some((o, false)) => RootOffsets::Unchecked(o),
        }
    }
}

impl<'a> From<&'a [u8]> for Expression<'a> {
    #[inline(always)]
    fn from(bytes: &'a [u8]) -> Expression<'a> {
        Expression {
            ops: &[],
            bytes: Some(bytes),
            offsets: None,
        }
    }
}

impl<'a> From<&'a Vec<u8>> for Expression<'a> {
    #[inline(always)]
    fn from(bytes: &'a Vec<u8>) -> Expression<'a> {
        Expression::from(bytes.as_slice())
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Expression<'a> {
    #[inline(always)]
    fn from(bytes: &'a [u8; N]) -> Expression<'a> {
        Expression::from(bytes.as_slice())
    }
}

impl<'a> From<&'a [Op]> for Expression<'a> {
    #[inline(always)]
    fn from(ops: &'a [Op]) -> Expression<'a> {
        Expression {
            ops,
            bytes: None,
            offsets: None,
        }
    }
}

impl<'a> From<&'a Vec<Op>> for Expression<'a> {
    #[inline(always)]
    fn from(ops: &'a Vec<Op>) -> Expression<'a> {
        Expression::from(ops.as_slice())
    }
}

impl<'a, const N: usize> From<&'a [Op; N]> for Expression<'a> {
    #[inline(always)]
    fn from(ops: &'a [Op; N]) -> Expression<'a> {
        Expression::from(ops.as_slice())
    }
}

/// A called expression (`DW_OP_call*`), decoded.
#[derive(Clone, Debug)]
struct Code {
    ops: Vec<Op>,
    offsets: Vec<usize>,
}

/// The reusable allocations of an [`Evaluation`] (its stack, call returns and
/// the vector of a composite's parts), carried from one expression to the next with
/// [`Evaluation::into_buffers`] and [`Evaluation::new_in`] (as gimli's
/// `Evaluation::new_in` takes its storage): for expressions that do not all
/// live as long as one evaluation ([`Evaluation::restart`] reuses an
/// evaluation in place otherwise).
#[derive(Debug, Default)]
pub struct Buffers {
    stack: Vec<Slot>,
    parts: Vec<Part>,
    rare: Option<Box<Rare>>,
}

impl Buffers {
    /// Empties every buffer, keeping its allocation.
    fn clear(&mut self) {
        self.stack.clear();
        self.parts.clear();
        if let Some(r) = &mut self.rare {
            r.returns.clear();
            r.base_types.clear();
            r.register_sizes.clear();
            r.lanes = None;
            r.iterations = None;
        }
    }
}

/// The parts of an evaluation's state most expressions never use, boxed so
/// that an [`Evaluation`] is small: building, restarting and dropping one
/// wrote, tested and dropped each of them (five vectors and options) per
/// expression. Allocated by the first call, base type or setting.
#[derive(Clone, Debug, Default)]
struct Rare {
    /// Callers of the running expression: their code and the index of the
    /// call operation.
    returns: Vec<(Option<Arc<Code>>, usize)>,
    base_types: Vec<(u64, ValueType)>,
    /// Register sizes in bits the caller gave ([`Evaluation::set_register_size`]):
    /// offsets and parts in these registers are checked against them.
    register_sizes: Vec<(u16, u64)>,
    /// `DW_AT_LLVM_lanes`, if the caller gave it ([`Evaluation::set_lane_count`]).
    lanes: Option<u64>,
    /// `DW_AT_LLVM_iterations`, if the caller gave it
    /// ([`Evaluation::set_iteration_count`]).
    iterations: Option<u64>,
}

/// A pause-and-resume evaluation of one expression.
#[derive(Clone, Debug)]
pub struct Evaluation<'a> {
    ops: &'a [Op],
    /// The root expression's bytes when evaluating straight from them
    /// ([`Expression`] from bytes); `ops` is then empty.
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
    pc: usize,
    stack: Vec<Slot>,
    steps: u64,
    max_steps: u64,
    pending: Option<Pending>,
    /// The request the last step stopped for (see [`Step`]).
    asked: Option<EvaluationResult>,
    /// The nested expression of a pending `DW_OP_entry_value`
    /// ([`Evaluation::entry_value_expression`]; kept here, not in the
    /// request, so that requests are two registers).
    entry_expression: Bytes,
    complete: bool,
    /// Constructed or restarted, not run and nothing pushed: the state in
    /// which `shortcut` may stand for the loop (the stack, the call state
    /// and the result are empty, no step counted).
    fresh: bool,
    /// Once complete, the result, moved off the stack (so a compact slot
    /// becomes an [`Entry`] that can be borrowed).
    top: Option<Entry>,
    /// An empty vector with room for parts, from an earlier composite: the
    /// next `DW_OP_piece` starting a composite fills it instead of
    /// allocating one.
    parts: Vec<Part>,
    trace: bool,
    /// Calls, base types and settings, if any.
    rare: Option<Box<Rare>>,
}

/// What one operation (or an answer) led to: `Ok` goes on, or stops with
/// the request it stored in `Evaluation::asked`. One pointer wide on purpose
/// (the error is boxed, the request kept aside): the hot loop passes one of
/// these per operation, and a larger result type made that copy stall.
type Step = Result<(), Box<ErrorKind>>;

/// The size in bits of an address space's memory with `address_size`-byte
/// addresses.
fn address_space_bits(address_size: u8) -> u128 {
    1u128 << (8 * u32::from(address_size.min(8)) + 3)
}

/// Whether dropping `e` frees anything (it is not a value or a single
/// register, memory, undefined or short implicit place).
#[inline(always)]
fn owns_memory(e: &Entry) -> bool {
    match e {
        Entry::Value(_) => false,
        Entry::Location(l) => owns_memory_at(l),
    }
}

/// `owns_memory` of a location.
#[inline(always)]
fn owns_memory_at(l: &LocationDescription) -> bool {
    match l {
        l if !l.places.is_inline() => true,
        l => match l.places.as_slice() {
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
