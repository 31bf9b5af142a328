//! Real binaries (feature `binary`): find the variables in scope at a PC in an
//! ELF file's DWARF (read with gimli: `.debug_info`, `.debug_loclists`,
//! `.debug_loc`, `.debug_addr`), and evaluate their location expressions with
//! Locus against a [`Snapshot`] of the target (registers, memory, entry
//! values, CFA).
//!
//! The evaluator core stays pure and answers its requests through the
//! [`Target`] trait ([`Evaluation::evaluate_with`]); this module supplies the
//! targets: [`Snapshot`] (owned, writable), [`State`] (borrowed: one frame of
//! a snapshot, a core file or a process, with entry values evaluated against
//! the registers at function entry) and [`WithFrame`] (adds the function's
//! `DW_AT_frame_base` and its unit's base types to any target), and reads the
//! object's bits through the resulting location description
//! ([`evaluate_variable_with`], [`read`], with [`crate::access`]).
//! [`Binary::parse`] reads an object's DWARF once for any number of PCs.
//! `DW_OP_addrx`/`DW_OP_constx` are resolved against `.debug_addr` when the
//! variable is found, and addresses are moved by the load bias of a
//! position-independent file. Location-list entries with an empty range
//! (gcc's location views) never match a PC.
//!
//! ```no_run
//! use locus_dwarf::binary::{evaluate_variable, Binary, Snapshot};
//!
//! let data = std::fs::read("a.out")?;
//! let binary = Binary::parse(&data)?;
//! let mut snapshot = Snapshot::default();
//! snapshot.registers.insert(7, 0x7fff_ffff_e000u64.to_le_bytes().to_vec()); // rsp
//! for v in binary.variables_at(0x401130)? {
//!     let value = evaluate_variable(&v, &snapshot)?;
//!     println!("{} = {}", v.name, value.bits.to_hex());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

extern crate std;

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use gimli::{AttributeValue, EndianSlice, LittleEndian};
use object::{Object as _, ObjectSection as _};

use crate::access::{self, Bits, Target};
use crate::callsite::{CallSites, EntryValues};
pub use crate::sections::DEFAULT_MAX_SECTION_BYTES;
use crate::{
    decode, Encoding, Entry, Error, EvalError, Evaluation, LocationDescription, Op, Storage, Value,
    ValueType,
};

impl From<gimli::Error> for Error {
    fn from(e: gimli::Error) -> Self {
        Error::Dwarf {
            what: e.to_string(),
        }
    }
}

/// A block of target memory: `bytes` at `address` of `space`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryBlock {
    /// Address space (0: global memory).
    pub space: u64,
    /// Address of the first byte.
    pub address: u64,
    /// The bytes, in target order.
    pub bytes: Vec<u8>,
}

/// What a debugger knows about the stopped target: enough to answer every
/// request of an evaluation. Bytes outside `memory` are unreadable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Address size in bytes (4 or 8).
    pub address_size: u8,
    /// Register contents by DWARF register number, little-endian.
    pub registers: BTreeMap<u16, Vec<u8>>,
    /// Readable memory.
    pub memory: Vec<MemoryBlock>,
    /// The current lane (`DW_OP_push_lane`).
    pub lane: Option<u64>,
    /// The current concurrent loop iteration (`DW_OP_push_iteration`).
    pub iteration: Option<u64>,
    /// The frame base, if known directly (otherwise computed from the
    /// function's `DW_AT_frame_base`).
    pub frame_base: Option<u64>,
    /// The canonical frame address (`DW_OP_call_frame_cfa`).
    pub cfa: Option<u64>,
    /// The object address (`DW_OP_push_object_address`).
    pub object_address: Option<u64>,
    /// The object's location description, when it is more than an address
    /// in global memory (`DW_OP_push_object_address`; takes precedence over
    /// `object_address`): registers, other address spaces, implicit or
    /// composite storage, or several places at once.
    pub object_location: Option<LocationDescription>,
    /// Registers at the function's entry, by DWARF number
    /// (`DW_OP_entry_value(DW_OP_regN)`).
    pub entry_registers: BTreeMap<u16, Vec<u8>>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            address_size: 8,
            registers: BTreeMap::new(),
            memory: Vec::new(),
            lane: None,
            iteration: None,
            frame_base: None,
            cfa: None,
            object_address: None,
            object_location: None,
            entry_registers: BTreeMap::new(),
        }
    }
}

impl Snapshot {
    /// `size` bytes at `address` of `space`, if one block holds them all.
    pub fn read_memory(&self, space: u64, address: u64, size: usize) -> Option<&[u8]> {
        read_blocks(&self.memory, space, address, size)
    }

    /// The snapshot as a borrowed [`State`] (the [`Target`] [`run`] and
    /// [`evaluate_variable`] evaluate against).
    pub fn state(&self) -> State<'_> {
        State {
            address_size: self.address_size,
            registers: &self.registers,
            memory: &self.memory,
            lane: self.lane,
            iteration: self.iteration,
            frame_base: self.frame_base,
            cfa: self.cfa,
            object_address: self.object_address,
            object_location: self.object_location.as_ref(),
            entry_registers: &self.entry_registers,
            entry: None,
            unit_offset: 0,
            base_types: &[],
            nesting: Nesting::default(),
        }
    }
}

/// A base type DIE the typed operations may name: unit offset,
/// `DW_AT_encoding`, `DW_AT_byte_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaseType {
    /// Unit-relative offset of the `DW_TAG_base_type` DIE.
    pub offset: u64,
    /// Its `DW_ATE_*` encoding.
    pub encoding: u8,
    /// Its size in bytes.
    pub byte_size: u64,
}

/// An expression decoded from bytes: its operations and the byte offset of
/// each (then the length), so that branches are resolved against the
/// original bytes ([`Evaluation::set_byte_offsets`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The operations.
    pub ops: Vec<Op>,
    /// Byte offset of each operation, then the expression's length.
    pub offsets: Vec<usize>,
}

impl Decoded {
    /// Decodes `bytes`.
    pub fn new(bytes: &[u8], encoding: Encoding) -> Result<Decoded, Error> {
        let decoded = decode(bytes, encoding)?;
        let mut offsets = Vec::with_capacity(decoded.len() + 1);
        let mut ops = Vec::with_capacity(decoded.len());
        for (at, op) in decoded {
            offsets.push(at);
            ops.push(op);
        }
        offsets.push(bytes.len());
        Ok(Decoded { ops, offsets })
    }

    /// A fresh evaluation of the operations, with their byte offsets.
    pub fn evaluation(&self, encoding: Encoding) -> Evaluation<'_> {
        // The offsets are borrowed, not copied (a copy was an allocation per
        // evaluation), and checked only by a branch. They fit for
        // `Decoded::new`'s offsets (increasing, one per operation plus the
        // length); others may not (the fields are public): branches then
        // re-encode instead.
        Evaluation::with_unchecked_offsets(&self.ops, &self.offsets, encoding)
    }
}

/// What the function being inspected adds to the snapshot: its frame base
/// expression and its unit's base types.
#[derive(Clone, Copy, Debug, Default)]
pub struct Frame<'f> {
    /// The function's `DW_AT_frame_base`, decoded, with its encoding.
    pub frame_base: Option<(&'f Decoded, Encoding)>,
    /// The unit's base types.
    pub base_types: &'f [BaseType],
    /// The variables in scope (`DW_OP_GNU_variable_value` names one by DIE).
    pub variables: &'f [Variable],
}

/// Nesting limit for entry values and frame bases evaluated while
/// answering a request.
const MAX_NESTING: u32 = 8;

/// How many nested evaluations (frame bases, entry values) one [`run`] may
/// start, at every depth together. Each has the evaluator's own step limit,
/// so without a cap a loop around `DW_OP_entry_value` multiplies it (a
/// 40-byte expression took 20 s), and nesting multiplies again.
pub const MAX_NESTED_EVALUATIONS: u32 = 64;

/// How deep a target is among the evaluations one run started, and how many
/// nested ones it has started so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Nesting {
    depth: u32,
    started: u32,
}

impl Nesting {
    /// One more nested evaluation, one level deeper; refused past
    /// [`MAX_NESTING`] or [`MAX_NESTED_EVALUATIONS`].
    fn enter(&mut self) -> Result<Nesting, String> {
        if self.depth >= MAX_NESTING {
            return Err("nested too deeply".to_owned());
        }
        if self.started >= MAX_NESTED_EVALUATIONS {
            return Err(format!(
                "more than {MAX_NESTED_EVALUATIONS} nested evaluations (frame bases and entry values)"
            ));
        }
        self.started += 1;
        Ok(Nesting {
            depth: self.depth + 1,
            started: self.started,
        })
    }

    /// Takes back the count of a nested evaluation's own nested ones.
    fn leave(&mut self, inner: Nesting) {
        self.started = self.started.max(inner.started);
    }
}

/// One frame of a stopped thread, borrowed: registers and memory, and what
/// else a [`Snapshot`] knows. A [`Target`] (it answers registers, memory, the
/// lane, the frame base when known, the CFA, the object address, entry values
/// and entry registers); read-only. [`Snapshot::state`] and
/// [`crate::stopped::Stopped::state`] make one without copying memory.
///
/// `DW_OP_entry_value` of `DW_OP_regN` is answered from `entry_registers`;
/// any other entry-value expression is evaluated against this state with the
/// registers at entry (at most [`MAX_NESTED_EVALUATIONS`] of them per state,
/// nested at most 8 deep; its typed operations use `base_types`, a frame base
/// inside it is unanswered unless `frame_base` is set).
#[derive(Clone, Debug)]
pub struct State<'s> {
    /// Address size in bytes (4 or 8).
    pub address_size: u8,
    /// Register contents by DWARF register number, little-endian.
    pub registers: &'s BTreeMap<u16, Vec<u8>>,
    /// Readable memory.
    pub memory: &'s [MemoryBlock],
    /// The current lane (`DW_OP_push_lane`).
    pub lane: Option<u64>,
    /// The current concurrent loop iteration (`DW_OP_push_iteration`).
    pub iteration: Option<u64>,
    /// The frame base, if known directly.
    pub frame_base: Option<u64>,
    /// The canonical frame address (`DW_OP_call_frame_cfa`).
    pub cfa: Option<u64>,
    /// The object address (`DW_OP_push_object_address`).
    pub object_address: Option<u64>,
    /// The object's location description (`DW_OP_push_object_address`;
    /// takes precedence over `object_address`).
    pub object_location: Option<&'s LocationDescription>,
    /// Registers at the function's entry, by DWARF number.
    pub entry_registers: &'s BTreeMap<u16, Vec<u8>>,
    /// What the caller's call site says of the function's entry, when the
    /// frame is one of a stopped target: entry values are then answered as gdb
    /// answers them, from these only (`entry_registers` is not used): a lone
    /// register's value, a register's pointee (`DW_OP_bregN 0;
    /// DW_OP_deref_size S`: the call site's `DW_AT_call_data_value`) and a
    /// formal parameter's (`DW_OP_GNU_parameter_ref`); any other entry-value
    /// expression is refused.
    pub entry: Option<&'s EntryValues>,
    /// The `.debug_info` offset of the unit of the expression evaluated
    /// (`DW_OP_GNU_parameter_ref` names a DIE of its unit).
    pub unit_offset: u64,
    /// The unit's base types (typed operations, also inside entry values).
    pub base_types: &'s [BaseType],
    nesting: Nesting,
}

impl<'s> State<'s> {
    /// A state of `registers` and `memory` (address size 8, nothing else
    /// known; set the public fields for more).
    pub fn new(registers: &'s BTreeMap<u16, Vec<u8>>, memory: &'s [MemoryBlock]) -> State<'s> {
        State {
            address_size: 8,
            registers,
            memory,
            lane: None,
            iteration: None,
            frame_base: None,
            cfa: None,
            object_address: None,
            object_location: None,
            entry_registers: registers_none(),
            entry: None,
            unit_offset: 0,
            base_types: &[],
            nesting: Nesting::default(),
        }
    }

    /// This state for a variable's expressions: its unit's base types and offset.
    pub fn with_variable(self, variable: &'s Variable) -> State<'s> {
        State {
            base_types: &variable.base_types,
            unit_offset: variable.unit_offset,
            ..self
        }
    }

    /// This state with the base types of a unit (a [`Variable`]'s).
    pub fn with_base_types(self, base_types: &'s [BaseType]) -> State<'s> {
        State { base_types, ..self }
    }

    /// `size` bytes at `address` of `space`, if one block holds them all.
    pub fn read(&self, space: u64, address: u64, size: usize) -> Option<&'s [u8]> {
        read_blocks(self.memory, space, address, size)
    }

    /// The value of `expression` (not a lone register) on entry: evaluated
    /// against this state with the registers at entry.
    fn entry_expression(&mut self, expression: &[u8], encoding: Encoding) -> Result<Entry, String> {
        let mut inner = State {
            registers: self.entry_registers,
            nesting: self.nesting.enter()?,
            ..self.clone()
        };
        let mut eval = Evaluation::from_bytes(expression, encoding);
        let done = eval.evaluate_with(&mut inner);
        self.nesting.leave(inner.nesting);
        done.map_err(|e| format!("entry value: {e}"))?;
        eval.into_result()
            .ok_or_else(|| "entry value: the entry-value expression left an empty stack".to_owned())
    }
}

/// An empty register map that lives forever.
fn registers_none() -> &'static BTreeMap<u16, Vec<u8>> {
    static NONE: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
    &NONE
}

fn read_blocks(memory: &[MemoryBlock], space: u64, address: u64, size: usize) -> Option<&[u8]> {
    memory
        .iter()
        .find_map(|b| b.bytes.get(block_range(b, space, address, size)?))
}

/// Where `address .. address + size` of space `space` lies in block `b`'s
/// bytes, if it starts there (the end is checked by the caller's `get`).
fn block_range(
    b: &MemoryBlock,
    space: u64,
    address: u64,
    size: usize,
) -> Option<std::ops::Range<usize>> {
    if b.space != space || address < b.address {
        return None;
    }
    byte_range(address - b.address, size)
}

/// Copies `found` into `buf`: whether there was anything to copy.
fn fill(buf: &mut [u8], found: Option<&[u8]>) -> bool {
    found.map(|b| buf.copy_from_slice(b)).is_some()
}

/// Copies `bytes` into `place`: whether there was a place to write.
fn store(place: Option<&mut [u8]>, bytes: &[u8]) -> bool {
    place.map(|b| b.copy_from_slice(bytes)).is_some()
}

fn read_register_bytes(
    registers: &BTreeMap<u16, Vec<u8>>,
    register: u16,
    byte_offset: u64,
    buf: &mut [u8],
) -> bool {
    let bytes = registers
        .get(&register)
        .zip(byte_range(byte_offset, buf.len()))
        .and_then(|(reg, range)| reg.get(range));
    fill(buf, bytes)
}

/// The bytes `byte_offset .. byte_offset + len` of a register, if they are addressable.
fn byte_range(byte_offset: u64, len: usize) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(byte_offset).ok()?;
    Some(start..start.checked_add(len)?)
}

/// The value of register `r` at entry, as a generic value.
fn entry_register_value(
    entry_registers: &BTreeMap<u16, Vec<u8>>,
    r: u16,
    address_size: u8,
) -> Result<Entry, String> {
    match entry_registers.get(&r) {
        Some(bytes) => Ok(Entry::Value(Value::from_bytes(
            ValueType::Generic,
            bytes,
            address_size,
        ))),
        None => Err(format!(
            "entry value: register {r} at function entry is not in the snapshot"
        )),
    }
}

/// The location holding register `r`'s value at entry: the snapshot has the
/// value, not where it was saved, so an implicit location holding it
/// (undefined if unknown).
fn entry_register_location(
    entry_registers: &BTreeMap<u16, Vec<u8>>,
    r: u16,
) -> LocationDescription {
    match entry_registers.get(&r) {
        Some(bytes) => LocationDescription::single(Storage::Implicit(bytes.as_slice().into()), 0),
        None => LocationDescription::undefined(),
    }
}

impl Target for State<'_> {
    fn read_memory(&mut self, address_space: u64, address: u64, buf: &mut [u8]) -> bool {
        fill(buf, self.read(address_space, address, buf.len()))
    }

    fn read_register(&mut self, register: u16, byte_offset: u64, buf: &mut [u8]) -> bool {
        read_register_bytes(self.registers, register, byte_offset, buf)
    }

    fn register_size(&mut self, register: u16) -> Option<u64> {
        self.registers.get(&register).map(|b| b.len() as u64)
    }

    fn register_sizes(&mut self, each: &mut dyn FnMut(u16, u64)) {
        for (r, bytes) in self.registers {
            each(*r, bytes.len() as u64);
        }
    }

    fn lane(&mut self) -> Result<u64, String> {
        self.lane.ok_or_else(|| "no lane in the context".to_owned())
    }

    fn iteration(&mut self) -> Result<u64, String> {
        self.iteration
            .ok_or_else(|| "no iteration in the context".to_owned())
    }

    fn frame_base(&mut self) -> Result<u64, String> {
        self.frame_base
            .ok_or_else(|| "no frame base in the context".to_owned())
    }

    fn call_frame_cfa(&mut self) -> Result<u64, String> {
        self.cfa.ok_or_else(|| "no CFA in the context".to_owned())
    }

    fn object_address(&mut self) -> Result<u64, String> {
        self.object_address
            .ok_or_else(|| "no object address in the context".to_owned())
    }

    fn object_location(&mut self) -> Option<LocationDescription> {
        self.object_location.cloned()
    }

    fn base_type(&mut self, offset: u64) -> Result<(u8, u64), String> {
        match self.base_types.iter().find(|b| b.offset == offset) {
            Some(b) => Ok((b.encoding, b.byte_size)),
            None => Err(crate::target::no_base_type(offset)),
        }
    }

    fn entry_value(
        &mut self,
        expression: &[u8],
        register: Option<u16>,
        encoding: Encoding,
    ) -> Result<Entry, String> {
        let size = encoding.address_size;
        match (self.entry, register) {
            (Some(entry), Some(r)) => entry.register(r).map(|b| generic(b, size)),
            (Some(entry), None) => match pointee_register(expression, encoding) {
                Some((r, n)) => entry.pointee(r).map(|b| generic(b.get(..n).unwrap_or(b), size)),
                None => Err(format!(
                    "DW_OP_entry_value of {}: gdb takes only a register's value or its pointee's on entry",
                    crate::decode(expression, encoding)
                        .map(|ops| crate::to_text(&ops.into_iter().map(|(_, op)| op).collect::<Vec<_>>()))
                        .unwrap_or_else(|e| e.to_string())
                )),
            },
            (None, Some(r)) => entry_register_value(self.entry_registers, r, size),
            (None, None) => self.entry_expression(expression, encoding),
        }
    }

    fn parameter_ref(&mut self, offset: u64) -> Result<Entry, String> {
        let Some(entry) = self.entry else {
            return Err(format!(
                "no call site is known for the entry value of the parameter at unit offset {offset:#x}"
            ));
        };
        let die = self.unit_offset.wrapping_add(offset);
        entry.parameter(die).map(|b| generic(b, self.address_size))
    }

    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, String> {
        Ok(entry_register_location(self.entry_registers, register))
    }
}

/// Bytes as a generic value.
fn generic(bytes: &[u8], address_size: u8) -> Entry {
    Entry::Value(Value::from_bytes(ValueType::Generic, bytes, address_size))
}

/// `DW_OP_bregN 0; DW_OP_deref_size S` (or `DW_OP_deref`): register N and S,
/// the entry-value expression of what a register pointed to on entry.
fn pointee_register(expression: &[u8], encoding: Encoding) -> Option<(u16, usize)> {
    let ops = crate::decode(expression, encoding).ok()?;
    let (register, size) = match ops.as_slice() {
        [(_, Op::Breg(r, 0)), (_, Op::Deref)] => (u64::from(*r), encoding.address_size),
        [(_, Op::Breg(r, 0)), (_, Op::DerefSize(n))] => (u64::from(*r), *n),
        [(_, Op::Bregx(r, 0)), (_, Op::Deref)] => (*r, encoding.address_size),
        [(_, Op::Bregx(r, 0)), (_, Op::DerefSize(n))] => (*r, *n),
        _ => return None,
    };
    Some((u16::try_from(register).ok()?, usize::from(size)))
}

/// A target with what the function being inspected adds: its
/// `DW_AT_frame_base` (evaluated against the target when the target has no
/// frame base of its own) and its unit's base types. Nested frame-base
/// evaluations are bounded as entry values are ([`MAX_NESTED_EVALUATIONS`]).
#[derive(Debug)]
pub struct WithFrame<'f, T> {
    /// The target.
    pub target: T,
    /// The function's frame base and base types.
    pub frame: Frame<'f>,
    nesting: Nesting,
}

impl<'f, T: Target> WithFrame<'f, T> {
    /// `target` in the function of `frame`.
    pub fn new(target: T, frame: Frame<'f>) -> WithFrame<'f, T> {
        WithFrame {
            target,
            frame,
            nesting: Nesting::default(),
        }
    }

    /// Evaluates the `DW_AT_frame_base` expression to an address: a register
    /// location gives the register's value, a memory location its address.
    fn frame_base_address(&mut self, expr: &Decoded, enc: Encoding) -> Result<u64, String> {
        // `dyn`: one instantiation however deep frame bases would nest.
        let target: &mut dyn Target = &mut self.target;
        let mut inner = WithFrame {
            target,
            frame: Frame {
                frame_base: None,
                ..self.frame
            },
            nesting: self.nesting.enter()?,
        };
        let mut eval = expr.evaluation(enc);
        let done = eval.evaluate_with(&mut inner);
        self.nesting.leave(inner.nesting);
        done.map_err(|e| format!("frame base: {e}"))?;
        let bad = || "frame base: the frame base is not an address or a register".to_owned();
        let loc = eval.location_result();
        let place = loc
            .as_ref()
            .and_then(|l| l.places.first())
            .ok_or_else(bad)?;
        match &place.storage {
            Storage::Memory { .. } => Ok((place.bit_offset / 8) as u64),
            Storage::Register(r) => {
                let size = self.target.register_size(*r).ok_or_else(bad)?;
                let mut buf = [0u8; 8];
                let n = usize::try_from(size).map_or(8, |s| s.min(8));
                if !self.target.read_register(*r, 0, &mut buf[..n]) {
                    return Err(bad());
                }
                Ok(Value::from_bytes(ValueType::Generic, &buf[..n], enc.address_size).to_u64())
            }
            _ => Err(bad()),
        }
    }
}

impl<T: Target> Target for WithFrame<'_, T> {
    fn read_memory(&mut self, address_space: u64, address: u64, buf: &mut [u8]) -> bool {
        self.target.read_memory(address_space, address, buf)
    }
    fn read_register(&mut self, register: u16, byte_offset: u64, buf: &mut [u8]) -> bool {
        self.target.read_register(register, byte_offset, buf)
    }
    fn write_memory(&mut self, address_space: u64, address: u64, bytes: &[u8]) -> bool {
        self.target.write_memory(address_space, address, bytes)
    }
    fn write_register(&mut self, register: u16, byte_offset: u64, bytes: &[u8]) -> bool {
        self.target.write_register(register, byte_offset, bytes)
    }
    fn register_size(&mut self, register: u16) -> Option<u64> {
        self.target.register_size(register)
    }
    fn register_sizes(&mut self, each: &mut dyn FnMut(u16, u64)) {
        self.target.register_sizes(each)
    }
    fn lane(&mut self) -> Result<u64, String> {
        self.target.lane()
    }
    fn iteration(&mut self) -> Result<u64, String> {
        self.target.iteration()
    }
    fn frame_base(&mut self) -> Result<u64, String> {
        match (self.target.frame_base(), self.frame.frame_base) {
            (Ok(fb), _) => Ok(fb),
            (Err(_), Some((expr, enc))) => self.frame_base_address(expr, enc),
            (Err(e), None) => Err(e),
        }
    }
    fn call_frame_cfa(&mut self) -> Result<u64, String> {
        self.target.call_frame_cfa()
    }
    fn object_address(&mut self) -> Result<u64, String> {
        self.target.object_address()
    }
    fn object_location(&mut self) -> Option<LocationDescription> {
        self.target.object_location()
    }
    fn base_type(&mut self, offset: u64) -> Result<(u8, u64), String> {
        match self.frame.base_types.iter().find(|b| b.offset == offset) {
            Some(b) => Ok((b.encoding, b.byte_size)),
            None => self.target.base_type(offset),
        }
    }
    fn entry_value(
        &mut self,
        expression: &[u8],
        register: Option<u16>,
        encoding: Encoding,
    ) -> Result<Entry, String> {
        self.target.entry_value(expression, register, encoding)
    }
    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, String> {
        self.target.entry_register(register)
    }
    fn parameter_ref(&mut self, offset: u64) -> Result<Entry, String> {
        self.target.parameter_ref(offset)
    }
    /// The value of a variable in scope ([`Frame::variables`]), evaluated in this frame
    /// (nested as entry values are); others are asked of the target.
    fn variable_value(&mut self, offset: u64) -> Result<Entry, String> {
        let scope = self.frame.variables;
        let Some(v) = scope.iter().find(|v| v.die == offset) else {
            return self.target.variable_value(offset);
        };
        let inner = self.nesting.enter()?;
        let target: &mut dyn Target = &mut self.target;
        let (evaluated, inner) = evaluate_nested(v, scope, target, inner)
            .map_err(|e| format!("the value of `{}`: {e}", v.name))?;
        self.nesting.leave(inner);
        let bits = &evaluated.bits;
        if !bits.is_fully_defined() || bits.bytes().is_empty() {
            return Err(format!("the value of `{}` is optimized out", v.name));
        }
        let n = bits.bytes().len().min(8);
        let size = v.encoding.address_size;
        Ok(Entry::Value(Value::from_bytes(
            ValueType::Generic,
            &bits.bytes()[..n],
            size,
        )))
    }
    fn callee(&mut self, offset: u64, unit_relative: bool) -> Result<Vec<u8>, String> {
        self.target.callee(offset, unit_relative)
    }
    fn indexed_address(&mut self, index: u64, is_address: bool) -> Result<u64, String> {
        self.target.indexed_address(index, is_address)
    }
    fn tls_address(&mut self, offset: u64) -> Result<u64, String> {
        self.target.tls_address(offset)
    }
}

/// Runs `eval` to completion, answering its requests from `snapshot` and
/// `frame` (`eval.evaluate_with(&mut WithFrame::new(snapshot.state(), frame))`).
/// A frame-base request is answered by `snapshot.frame_base`, else by
/// evaluating `frame.frame_base`; an entry value by evaluating its expression
/// against the registers at entry. The snapshot's registers give their sizes
/// ([`Evaluation::set_register_size`]), so offsets and parts past a register's
/// end are errors of the operation that makes them. `ops` is no longer used
/// (the evaluation names its operations itself).
pub fn run(
    eval: &mut Evaluation<'_>,
    ops: &[Op],
    snapshot: &Snapshot,
    frame: Frame<'_>,
) -> Result<(), Error> {
    let _ = ops;
    eval.evaluate_with(&mut WithFrame::new(snapshot.state(), frame))
}

/// [`run`] for an evaluation with [`Evaluation::set_trace`] on: `on_step`
/// sees the evaluation after every executed operation
/// ([`crate::EvaluationResult::Stepped`]: [`Evaluation::stack`] shows its effect,
/// [`Evaluation::pc`] the next operation); nested evaluations (frame base,
/// entry values) are not traced.
pub fn run_traced<'a>(
    eval: &mut Evaluation<'a>,
    ops: &[Op],
    snapshot: &Snapshot,
    frame: Frame<'_>,
    on_step: &mut dyn FnMut(&Evaluation<'a>),
) -> Result<(), Error> {
    let _ = ops;
    eval.evaluate_traced_with(&mut WithFrame::new(snapshot.state(), frame), on_step)
}

/// The snapshot as a [`Target`]: reads, writes (`locus dwarf eval --write`)
/// into the registers and memory blocks it has, and the requests its fields
/// answer. Entry values of other expressions than a lone register need the
/// nesting bounds of a [`State`]: evaluate with [`Snapshot::state`] (as
/// [`run`] does) for them.
impl Target for Snapshot {
    fn read_memory(&mut self, address_space: u64, address: u64, buf: &mut [u8]) -> bool {
        fill(
            buf,
            Snapshot::read_memory(self, address_space, address, buf.len()),
        )
    }

    fn read_register(&mut self, register: u16, byte_offset: u64, buf: &mut [u8]) -> bool {
        read_register_bytes(&self.registers, register, byte_offset, buf)
    }

    /// Writes inside one memory block; bytes outside every block are
    /// unwritable, as they are unreadable.
    fn write_memory(&mut self, address_space: u64, address: u64, bytes: &[u8]) -> bool {
        let block = self.memory.iter_mut().find_map(|b| {
            let range = block_range(b, address_space, address, bytes.len())?;
            b.bytes.get_mut(range)
        });
        store(block, bytes)
    }

    /// Writes inside a register the snapshot has, within its size.
    fn write_register(&mut self, register: u16, byte_offset: u64, bytes: &[u8]) -> bool {
        let place = self
            .registers
            .get_mut(&register)
            .zip(byte_range(byte_offset, bytes.len()))
            .and_then(|(reg, range)| reg.get_mut(range));
        store(place, bytes)
    }

    fn register_size(&mut self, register: u16) -> Option<u64> {
        self.state().register_size(register)
    }

    fn register_sizes(&mut self, each: &mut dyn FnMut(u16, u64)) {
        self.state().register_sizes(each)
    }

    fn lane(&mut self) -> Result<u64, String> {
        self.state().lane()
    }

    fn frame_base(&mut self) -> Result<u64, String> {
        self.state().frame_base()
    }

    fn call_frame_cfa(&mut self) -> Result<u64, String> {
        self.state().call_frame_cfa()
    }

    fn object_address(&mut self) -> Result<u64, String> {
        self.state().object_address()
    }

    fn object_location(&mut self) -> Option<LocationDescription> {
        self.object_location.clone()
    }

    fn entry_value(
        &mut self,
        _expression: &[u8],
        register: Option<u16>,
        encoding: Encoding,
    ) -> Result<Entry, String> {
        match register {
            Some(r) => entry_register_value(&self.entry_registers, r, encoding.address_size),
            None => Err(
                "entry value: only a lone register's is answered by a Snapshot itself (evaluate with Snapshot::state())"
                    .to_owned(),
            ),
        }
    }

    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, String> {
        Ok(entry_register_location(&self.entry_registers, register))
    }
}

/// Reads `bit_len` bits through `location` from the snapshot
/// ([`crate::access::read`]: undefined bits stay undefined, unreadable
/// registers or memory are an error).
pub fn read(
    location: &LocationDescription,
    bit_len: u64,
    snapshot: &Snapshot,
) -> Result<Bits, Error> {
    access::read(location, bit_len, &mut snapshot.state())
}

/// Whether a variable is a formal parameter or a local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VariableKind {
    /// `DW_TAG_formal_parameter`.
    Parameter,
    /// `DW_TAG_variable`.
    Variable,
}

/// Where a variable is at the PC, as the DWARF says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VariableLocation {
    /// A location expression (from `DW_AT_location` or the location-list
    /// entry covering the PC).
    Expression(Vec<u8>),
    /// `DW_AT_const_value`, as target bytes.
    Const(Vec<u8>),
    /// No location at this PC (optimized out).
    None,
}

/// A variable or parameter in scope at a PC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    /// Source name.
    pub name: String,
    /// Parameter or variable.
    pub kind: VariableKind,
    /// The enclosing function (inlined subroutines name the inlined one).
    pub function: String,
    /// Offset of the DIE in `.debug_info`.
    pub die: u64,
    /// The type's name as far as it can be said briefly.
    pub type_name: String,
    /// The type's size in bytes, if known.
    pub byte_size: Option<u64>,
    /// The base type the variable's type is, through typedefs and
    /// qualifiers (its offset in the unit, `DW_ATE_*` encoding and size);
    /// `None` for pointers, enumerations, aggregates and unknown types.
    /// [`Variable::number`] prints a value of it.
    pub base_type: Option<BaseType>,
    /// Where it is.
    pub location: VariableLocation,
    /// The encoding of the expression bytes (address and offset size).
    pub encoding: Encoding,
    /// The enclosing concrete function's `DW_AT_frame_base` expression.
    pub frame_base: Option<Vec<u8>>,
    /// The unit's base types (for typed operations such as `DW_OP_convert`).
    pub base_types: Vec<BaseType>,
    /// The `.debug_info` offset of its unit (`DW_OP_GNU_parameter_ref` names
    /// a DIE of the unit).
    pub unit_offset: u64,
}

/// A location expression with the encoding it was written in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationExpression {
    /// The expression's bytes.
    pub bytes: Vec<u8>,
    /// Its encoding.
    pub encoding: Encoding,
    /// Whether it is an entry of a location list (else the attribute's
    /// single expression).
    pub in_list: bool,
}

pub(crate) type R<'a> = EndianSlice<'a, LittleEndian>;

/// The DWARF sections of an object, decompressed (`SHF_COMPRESSED`: zlib or
/// zstd, as `-gz` writes them) where they are compressed, by name; the
/// [`gimli::Dwarf`] of [`Sections::dwarf`] borrows from them.
pub(crate) struct Sections<'d> {
    by_name: BTreeMap<String, alloc::borrow::Cow<'d, [u8]>>,
}

impl<'d> Sections<'d> {
    /// Reads the `.debug_*` sections of `data`, at most `limit` bytes
    /// decompressed in all; a relocatable object's with its relocations
    /// applied (see [`crate::sections::relocate`]). Refused: big-endian
    /// objects, relocatable objects with several code sections and objects
    /// without `.debug_info` (unless `split`: a `.dwo`, whose sections end
    /// in `.dwo`).
    pub(crate) fn read(data: &'d [u8], split: bool, limit: u64) -> Result<Sections<'d>, Error> {
        let file = object::File::parse(data).map_err(|e| Error::Object {
            what: e.to_string(),
        })?;
        if !file.is_little_endian() {
            return Err(Error::Object {
                what: format!(
                    "a big-endian object ({:?}): only little-endian targets are supported",
                    file.architecture()
                ),
            });
        }
        if !split {
            check_debug_info(&file)?;
            check_one_code_section(&file)?;
        }
        // A `.dwo` or `.dwp` (`split`) is relocatable too, but has no relocations.
        let relocatable = !split && file.kind() == object::ObjectKind::Relocatable;
        let mut by_name = BTreeMap::new();
        let mut decompressed = 0;
        for section in file.sections() {
            let Ok(name) = section.name() else { continue };
            // `.zdebug_*`: GNU's older compressed sections, decompressed alike.
            let name = match name.strip_prefix(".zdebug_") {
                Some(rest) => format!(".debug_{rest}"),
                None if name.starts_with(".debug_") => name.to_owned(),
                None => continue,
            };
            let mut bytes =
                crate::sections::section_bytes(&section, &name, limit, &mut decompressed)?;
            if relocatable {
                crate::sections::relocate(&file, &section, &name, &mut bytes)?;
            }
            by_name.insert(name, bytes);
        }
        Ok(Sections { by_name })
    }

    /// The DWARF over these sections (`.dwo` names when `split`).
    pub(crate) fn dwarf(&self, split: bool) -> Result<gimli::Dwarf<R<'_>>, Error> {
        gimli::Dwarf::load(|id| -> Result<R<'_>, Error> {
            let name = if split {
                id.dwo_name()
            } else {
                Some(id.name())
            };
            let bytes = name
                .and_then(|n| self.by_name.get(n))
                .map_or(&[][..], |b| &b[..]);
            Ok(EndianSlice::new(bytes, LittleEndian))
        })
    }

    /// The DWARF package over these sections (a `.dwp`'s, read with
    /// `split`).
    pub(crate) fn package(&self) -> Result<gimli::DwarfPackage<R<'_>>, Error> {
        let empty = EndianSlice::new(&[][..], LittleEndian);
        gimli::DwarfPackage::load(
            |id| -> Result<R<'_>, Error> {
                let bytes = id
                    .dwo_name()
                    .and_then(|n| self.by_name.get(n))
                    .map_or(&[][..], |b| &b[..]);
                Ok(EndianSlice::new(bytes, LittleEndian))
            },
            empty,
        )
    }
}

/// Refuses a relocatable object (`.o`) with more than one non-empty code
/// section (`-ffunction-sections`, C++ inline functions): its relocations
/// are applied with every section at address 0 (as llvm-dwarfdump reads
/// it), so two code sections would give their functions the same addresses.
fn check_one_code_section(file: &object::File<'_>) -> Result<(), Error> {
    if file.kind() != object::ObjectKind::Relocatable {
        return Ok(());
    }
    let code = file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text && s.size() > 0)
        .count();
    if code <= 1 {
        return Ok(());
    }
    Err(Error::Object {
        what: format!(
            "a relocatable object (.o) with {code} code sections: their addresses overlap \
             until linked; link it first"
        ),
    })
}

/// Refuses a file without DWARF to read: no `.debug_info` (stripped, or
/// built without `-g`; `.zdebug_info` is the old compressed spelling).
fn check_debug_info(file: &object::File<'_>) -> Result<(), Error> {
    let size = [".debug_info", ".zdebug_info"]
        .iter()
        .filter_map(|n| file.section_by_name(n))
        .map(|s| s.size())
        .max()
        .unwrap_or(0);
    if size > 0 {
        return Ok(());
    }
    let why = if file.section_by_name(".gnu_debuglink").is_some() {
        "stripped (its DWARF is in a separate file named by .gnu_debuglink)"
    } else if file.symbols().next().is_none() {
        "stripped"
    } else {
        "built without -g, or its debug sections were stripped"
    };
    Err(Error::Object {
        what: format!("no DWARF: the file has no .debug_info section ({why})"),
    })
}

/// Refuses a split-DWARF skeleton unit (`-gsplit-dwarf`) where its `.dwo` is
/// not followed ([`location_expressions`]).
fn check_not_skeleton(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>) -> Result<(), Error> {
    if unit.dwo_id.is_none() {
        return Ok(());
    }
    let mut entries = unit.entries();
    let mut dwo = String::from("?");
    if let Some((_, root)) = entries.next_dfs()? {
        for at in [gimli::DW_AT_dwo_name, gimli::DW_AT_GNU_dwo_name] {
            if let Some(v) = root.attr_value(at)? {
                dwo = dwarf.attr_string(unit, v)?.to_string_lossy().into_owned();
            }
        }
    }
    Err(Error::Object {
        what: format!(
            "split DWARF (-gsplit-dwarf): the unit at .debug_info offset {:#x} is a skeleton; \
             its variables are in {dwo} (.dwo/.dwp files are not read)",
            unit.header
                .offset()
                .as_debug_info_offset()
                .map_or(0, |o| o.0)
        ),
    })
}

pub(crate) fn encoding_of(unit: &gimli::Unit<R<'_>>) -> Encoding {
    let e = unit.encoding();
    Encoding {
        address_size: e.address_size,
        offset_size: e.format.word_size(),
        ..Encoding::default()
    }
}

/// An object file's DWARF, read once: the object parsed, its `.debug_*`
/// sections found and decompressed by [`Binary::parse`]; then
/// [`Binary::variables_at`] as many PCs as needed (each frame of each thread
/// of a core file) without reading the file again.
///
/// ```no_run
/// use locus_dwarf::binary::{evaluate_variable, Binary, Snapshot};
///
/// let data = std::fs::read("a.out")?;
/// let binary = Binary::parse(&data)?.with_load_bias(0x5555_5555_4000);
/// let snapshot = Snapshot::default();
/// for pc in [0x5555_5555_5130, 0x5555_5555_5190] {
///     for v in binary.variables_at(pc)? {
///         println!("{} = {:?}", v.name, evaluate_variable(&v, &snapshot).map(|e| e.bits.to_hex()));
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Binary<'d> {
    data: &'d [u8],
    sections: Sections<'d>,
    /// A DWARF package's sections (`.dwp`), for split units.
    package: Option<Sections<'d>>,
    load_bias: u64,
    /// The bound on each file's decompressed sections, together.
    limit: u64,
}

impl<'d> Binary<'d> {
    /// Reads the object's DWARF sections (refused: not an object file,
    /// big-endian, no `.debug_info`, a relocatable object with several code
    /// sections). A relocatable object (`.o`) is read as llvm-dwarfdump
    /// reads it: its relocations applied, its code section at address 0.
    /// Sections are decompressed to at most
    /// [`DEFAULT_MAX_SECTION_BYTES`] in all (see [`Binary::parse_bounded`]).
    pub fn parse(data: &'d [u8]) -> Result<Binary<'d>, Error> {
        Binary::parse_bounded(data, DEFAULT_MAX_SECTION_BYTES)
    }

    /// [`Binary::parse`], with a compressed section (`-gz`, `.zdebug_*`)
    /// refused when its header claims, or its stream produces, more than
    /// what is left of `limit` bytes for the object's decompressed sections
    /// together; the bound applies alike (per file) to
    /// [`Binary::with_package`] and split units' `.dwo` files.
    pub fn parse_bounded(data: &'d [u8], limit: u64) -> Result<Binary<'d>, Error> {
        Ok(Binary {
            data,
            sections: Sections::read(data, false, limit)?,
            package: None,
            load_bias: 0,
            limit,
        })
    }

    /// Adds a DWARF package (`.dwp`, as `llvm-dwp` or `dwp` write it): the
    /// variables of a split-DWARF skeleton unit are looked up in it by DWO
    /// id, and in the `.dwo` file the skeleton names only when the package
    /// does not have the unit. gdb reads `BINARY.dwp` beside the binary;
    /// `locus dwarf vars` does the same. Refused: not an object, big-endian,
    /// a malformed `.debug_cu_index`.
    pub fn with_package(mut self, dwp: &'d [u8]) -> Result<Binary<'d>, Error> {
        let sections = Sections::read(dwp, true, self.limit)?;
        sections.package()?;
        self.package = Some(sections);
        Ok(self)
    }

    /// Sets how far the file was moved when loaded (see [`variables_at`]).
    pub fn with_load_bias(mut self, load_bias: u64) -> Binary<'d> {
        self.load_bias = load_bias;
        self
    }

    /// The load bias.
    pub fn load_bias(&self) -> u64 {
        self.load_bias
    }

    /// The object's bytes.
    pub fn data(&self) -> &'d [u8] {
        self.data
    }

    /// The variables and formal parameters in scope at `pc` (an address in
    /// the running program), as [`variables_at`] finds them.
    pub fn variables_at(&self, pc: u64) -> Result<Vec<Variable>, Error> {
        Ok(self.scopes_at(pc)?.variables)
    }

    /// The functions whose code holds `pc` (an address in the running program): the
    /// concrete function, then each function inlined there, innermost last (the frames
    /// gdb shows for one frame of the call-frame information, innermost first there).
    pub fn functions_at(&self, pc: u64) -> Result<Vec<String>, Error> {
        Ok(self.scopes_at(pc)?.functions)
    }

    fn scopes_at(&self, pc: u64) -> Result<Found, Error> {
        let dwarf = self.sections.dwarf(false)?;
        let package = self.package.as_ref().map(Sections::package).transpose()?;
        let load_bias = self.load_bias;
        let pc = pc.wrapping_sub(load_bias);
        let mut out = Found::default();
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            if unit.dwo_id.is_some() {
                scan_dwo(
                    &dwarf,
                    package.as_ref(),
                    &unit,
                    (pc, load_bias),
                    self.limit,
                    &mut out,
                )?;
                continue;
            }
            scan_unit(&dwarf, &unit, pc, load_bias, &mut out)?;
        }
        Ok(out)
    }

    /// Every location expression in the binary, as [`location_expressions`].
    pub fn location_expressions(&self) -> Result<Vec<LocationExpression>, Error> {
        let dwarf = self.sections.dwarf(false)?;
        let mut out = Vec::new();
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            check_not_skeleton(&dwarf, &unit)?;
            let encoding = encoding_of(&unit);
            let mut entries = unit.entries();
            while let Some((_, entry)) = entries.next_dfs()? {
                for at in [gimli::DW_AT_location, gimli::DW_AT_frame_base] {
                    let Some(value) = entry.attr_value(at)? else {
                        continue;
                    };
                    if let AttributeValue::Exprloc(e) = value {
                        out.push(LocationExpression {
                            bytes: e.0.slice().to_vec(),
                            encoding,
                            in_list: false,
                        });
                    } else if let Some(mut list) = dwarf.attr_locations(&unit, value)? {
                        while let Some(le) = list.next()? {
                            out.push(LocationExpression {
                                bytes: le.data.0.slice().to_vec(),
                                encoding,
                                in_list: true,
                            });
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The call sites and functions of the binary, for the entry values of
    /// frames ([`CallSites::entry_values`]), with this binary's load bias.
    pub fn call_sites(&self) -> Result<CallSites, Error> {
        let dwarf = self.sections.dwarf(false)?;
        CallSites::read(&dwarf, self.load_bias)
    }

    /// The address of symbol `name` in the object's symbol table, if present.
    pub fn symbol_address(&self, name: &str) -> Result<Option<u64>, Error> {
        symbol_address(self.data, name)
    }
}

/// The address of symbol `name` in the object's symbol table, if present.
pub fn symbol_address(data: &[u8], name: &str) -> Result<Option<u64>, Error> {
    use object::ObjectSymbol as _;
    let file = object::File::parse(data).map_err(|e| Error::Object {
        what: e.to_string(),
    })?;
    Ok(file
        .symbols()
        .find(|s| s.name() == Ok(name))
        .map(|s| s.address()))
}

/// Every location expression in the binary: each `DW_AT_location` and
/// `DW_AT_frame_base` expression and every entry of every location list.
pub fn location_expressions(data: &[u8]) -> Result<Vec<LocationExpression>, Error> {
    Binary::parse(data)?.location_expressions()
}

/// The variables and formal parameters in scope at `pc`: those of every
/// subprogram, lexical block and inlined subroutine whose ranges contain
/// `pc`, innermost scope last. Reads the file each time: for several PCs of
/// one file, [`Binary::parse`] it once.
///
/// `pc` is an address in the running program, and `load_bias` how far the
/// file was moved when loaded: 0 for a position-dependent executable, the
/// load base for a position-independent one (0x555555554000 under gdb) or a
/// shared library. Scopes and location lists are matched at
/// `pc - load_bias`, and every `DW_OP_addr` (and `DW_OP_addrx`) address in
/// the expressions handed out is moved by `load_bias`, so that they name
/// the running program's memory.
pub fn variables_at(data: &[u8], pc: u64, load_bias: u64) -> Result<Vec<Variable>, Error> {
    Binary::parse(data)?
        .with_load_bias(load_bias)
        .variables_at(pc)
}

/// Adds the variables in scope at `pc` (file address) of one unit to `out`.
fn scan_unit(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    pc: u64,
    load_bias: u64,
    out: &mut Found,
) -> Result<(), Error> {
    let mut tree = unit.entries_tree(None)?;
    let root = tree.root()?;
    let base_types = base_types(unit)?;
    let mut scan = Scan {
        dwarf,
        unit,
        pc,
        load_bias,
        out,
        base_types,
    };
    scan.children(root, None, "", 0)
}

/// A split-DWARF skeleton unit (`-gsplit-dwarf`): the unit of the same DWO id in the
/// package when there is one and it has the unit, else in the `.dwo` file its
/// `DW_AT_dwo_name` names (relative to `DW_AT_comp_dir`); read with the skeleton's
/// `.debug_addr` and bases. A `.dwo` that cannot be read is an error naming it.
fn scan_dwo(
    dwarf: &gimli::Dwarf<R<'_>>,
    package: Option<&gimli::DwarfPackage<R<'_>>>,
    skeleton: &gimli::Unit<R<'_>>,
    (pc, load_bias): (u64, u64),
    limit: u64,
    out: &mut Found,
) -> Result<(), Error> {
    if let (Some(package), Some(id)) = (package, skeleton.dwo_id) {
        let in_package = |e: gimli::Error| Error::Object {
            what: format!("the DWARF package (.dwp), unit of DWO id {:#x}: {e}", id.0),
        };
        if let Some(dwo) = package.find_cu(id, dwarf).map_err(in_package)? {
            let mut units = dwo.units();
            if let Some(header) = units.next().map_err(in_package)? {
                let mut unit = dwo.unit(header).map_err(in_package)?;
                unit.copy_relocated_attributes(skeleton);
                return scan_unit(&dwo, &unit, pc, load_bias, out);
            }
        }
    }
    let path = dwo_path(dwarf, skeleton)?;
    let package_note = if package.is_some() {
        "; the package (.dwp) does not have it"
    } else {
        ""
    };
    let fail = |what: String| Error::Object {
        what: format!(
            "split DWARF (-gsplit-dwarf): the unit at .debug_info offset {:#x} is a skeleton \
             whose variables are in {path}: {what}{package_note}",
            skeleton
                .header
                .offset()
                .as_debug_info_offset()
                .map_or(0, |o| o.0)
        ),
    };
    let data = std::fs::read(&path).map_err(|e| fail(e.to_string()))?;
    let sections = Sections::read(&data, true, limit).map_err(|e| fail(e.to_string()))?;
    let mut dwo = sections.dwarf(true)?;
    dwo.make_dwo(dwarf);
    let mut units = dwo.units();
    while let Some(header) = units.next()? {
        let mut unit = dwo.unit(header)?;
        if unit.dwo_id != skeleton.dwo_id {
            continue;
        }
        unit.copy_relocated_attributes(skeleton);
        return scan_unit(&dwo, &unit, pc, load_bias, out);
    }
    Err(fail("no unit with the skeleton's DWO id".to_owned()))
}

/// Where a skeleton unit's `.dwo` is: `DW_AT_dwo_name` (`DW_AT_GNU_dwo_name`), under
/// `DW_AT_comp_dir` when relative.
fn dwo_path(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>) -> Result<String, Error> {
    let mut entries = unit.entries();
    let mut name = None;
    if let Some((_, root)) = entries.next_dfs()? {
        for at in [gimli::DW_AT_dwo_name, gimli::DW_AT_GNU_dwo_name] {
            if let Some(v) = root.attr_value(at)? {
                name = Some(dwarf.attr_string(unit, v)?.to_string_lossy().into_owned());
            }
        }
    }
    let name = name.ok_or_else(|| Error::Object {
        what: "split DWARF: a skeleton unit without DW_AT_dwo_name".to_owned(),
    })?;
    if name.starts_with('/') {
        return Ok(name);
    }
    Ok(match &unit.comp_dir {
        Some(dir) => format!("{}/{name}", dir.to_string_lossy()),
        None => name,
    })
}

/// What a scan finds at a PC: the variables in scope and the functions (concrete, then
/// inlined) whose code holds it.
#[derive(Default)]
struct Found {
    variables: Vec<Variable>,
    functions: Vec<String>,
}

struct Scan<'s, 'a> {
    dwarf: &'s gimli::Dwarf<R<'a>>,
    unit: &'s gimli::Unit<R<'a>>,
    /// The PC at the file's own addresses (the load bias taken off).
    pc: u64,
    load_bias: u64,
    out: &'s mut Found,
    base_types: Vec<BaseType>,
}

/// Every `DW_TAG_base_type` of a unit.
pub(crate) fn base_types(unit: &gimli::Unit<R<'_>>) -> Result<Vec<BaseType>, Error> {
    let mut out = Vec::new();
    let mut entries = unit.entries();
    while let Some((_, entry)) = entries.next_dfs()? {
        if entry.tag() != gimli::DW_TAG_base_type {
            continue;
        }
        let encoding = match entry.attr_value(gimli::DW_AT_encoding)? {
            Some(AttributeValue::Encoding(e)) => e.0,
            _ => continue,
        };
        let Some(byte_size) = entry
            .attr_value(gimli::DW_AT_byte_size)?
            .and_then(|v| v.udata_value())
        else {
            continue;
        };
        out.push(BaseType {
            offset: entry.offset().0 as u64,
            encoding,
            byte_size,
        });
    }
    Ok(out)
}

/// How deep [`Scan::children`] follows nested scopes (subprograms, lexical
/// blocks, inlined subroutines): real code nests a few dozen at most.
const MAX_SCOPE_DEPTH: u32 = 256;

/// How many `DW_AT_abstract_origin`/`DW_AT_specification` links an
/// attribute is looked for through (real files chain two or three).
const MAX_ORIGIN_LINKS: u32 = 8;

type Node<'abbrev, 'unit, 'tree, 'a> = gimli::EntriesTreeNode<'abbrev, 'unit, 'tree, R<'a>>;
type Die<'abbrev, 'unit, 'a> = gimli::DebuggingInformationEntry<'abbrev, 'unit, R<'a>>;

impl<'a> Scan<'_, 'a> {
    /// Whether the DIE's `DW_AT_ranges`, or `DW_AT_low_pc` to `DW_AT_high_pc`, hold the PC.
    /// (Not gimli's `die_ranges`: it adds a `DW_AT_high_pc` size to `DW_AT_low_pc` without
    /// checking, which panics in a debug build when a file makes it overflow. A range that
    /// runs past the top of the address space ends there.)
    fn contains_pc(&self, entry: &Die<'_, '_, 'a>) -> Result<bool, Error> {
        let (mut low, mut high, mut size) = (None, None, None);
        let mut attrs = entry.attrs();
        while let Some(attr) = attrs.next()? {
            match attr.name() {
                gimli::DW_AT_low_pc => {
                    low = Some(
                        self.dwarf
                            .attr_address(self.unit, attr.value())?
                            .ok_or(gimli::Error::UnsupportedAttributeForm)?,
                    );
                }
                gimli::DW_AT_high_pc => match attr.value() {
                    AttributeValue::Udata(n) => size = Some(n),
                    v => {
                        high = Some(
                            self.dwarf
                                .attr_address(self.unit, v)?
                                .ok_or(gimli::Error::UnsupportedAttributeForm)?,
                        );
                    }
                },
                gimli::DW_AT_ranges => {
                    if let Some(mut ranges) = self.dwarf.attr_ranges(self.unit, attr.value())? {
                        while let Some(r) = ranges.next()? {
                            if r.begin <= self.pc && self.pc < r.end {
                                return Ok(true);
                            }
                        }
                        return Ok(false);
                    }
                }
                _ => {}
            }
        }
        let end = match (low, size) {
            (Some(low), Some(size)) => Some(low.saturating_add(size)),
            _ => high,
        };
        Ok(matches!((low, end), (Some(low), Some(end)) if low <= self.pc && self.pc < end))
    }

    /// Walks the children of a scope `depth` scopes deep; `frame_base` is the
    /// enclosing concrete function's, `function` its (or the inlined
    /// subroutine's) name. Scopes nested deeper than [`MAX_SCOPE_DEPTH`] are
    /// an error (each level is a stack frame here).
    fn children(
        &mut self,
        node: Node<'_, '_, '_, 'a>,
        frame_base: Option<&[u8]>,
        function: &str,
        depth: u32,
    ) -> Result<(), Error> {
        if depth > MAX_SCOPE_DEPTH {
            return Err(Error::Dwarf {
                what: format!("scopes nested more than {MAX_SCOPE_DEPTH} deep"),
            });
        }
        let mut children = node.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            match entry.tag() {
                gimli::DW_TAG_subprogram
                | gimli::DW_TAG_lexical_block
                | gimli::DW_TAG_inlined_subroutine => {
                    if !self.contains_pc(entry)? {
                        continue;
                    }
                    let (fb, name) = if entry.tag() == gimli::DW_TAG_lexical_block {
                        (frame_base.map(<[u8]>::to_vec), function.to_owned())
                    } else {
                        let fb = match entry.attr_value(gimli::DW_AT_frame_base)? {
                            Some(AttributeValue::Exprloc(e)) => Some(e.0.slice().to_vec()),
                            _ => frame_base.map(<[u8]>::to_vec),
                        };
                        let name = self.name(entry)?.unwrap_or_default();
                        self.out.functions.push(name.clone());
                        (fb, name)
                    };
                    self.children(child, fb.as_deref(), &name, depth + 1)?;
                }
                // Only locals: the CU's globals are not "in scope at a PC" in
                // the sense of a frame.
                gimli::DW_TAG_formal_parameter | gimli::DW_TAG_variable if !function.is_empty() => {
                    let v = self.variable(entry, frame_base, function)?;
                    self.out.variables.push(v);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The DIE an attribute of `entry` refers to, within this unit.
    fn referenced(
        &self,
        entry: &Die<'_, '_, 'a>,
        at: gimli::DwAt,
    ) -> Result<Option<gimli::UnitOffset>, Error> {
        Ok(match entry.attr_value(at)? {
            Some(AttributeValue::UnitRef(o)) => Some(o),
            Some(AttributeValue::DebugInfoRef(o)) => o.to_unit_offset(&self.unit.header),
            _ => None,
        })
    }

    /// An attribute of `entry` or, failing that, of its abstract origin or
    /// specification (followed at most [`MAX_ORIGIN_LINKS`] deep: a file can
    /// make them a cycle).
    fn attr_or_origin(
        &self,
        entry: &Die<'_, '_, 'a>,
        at: gimli::DwAt,
    ) -> Result<Option<AttributeValue<R<'a>>>, Error> {
        self.attr_or_origin_within(entry, at, MAX_ORIGIN_LINKS)
    }

    fn attr_or_origin_within(
        &self,
        entry: &Die<'_, '_, 'a>,
        at: gimli::DwAt,
        links: u32,
    ) -> Result<Option<AttributeValue<R<'a>>>, Error> {
        if let Some(v) = entry.attr_value(at)? {
            return Ok(Some(v));
        }
        if links == 0 {
            return Ok(None);
        }
        for link in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
            if let Some(o) = self.referenced(entry, link)? {
                let origin = self.unit.entry(o)?;
                if let Some(v) = self.attr_or_origin_within(&origin, at, links - 1)? {
                    return Ok(Some(v));
                }
            }
        }
        Ok(None)
    }

    fn name(&self, entry: &Die<'_, '_, 'a>) -> Result<Option<String>, Error> {
        match self.attr_or_origin(entry, gimli::DW_AT_name)? {
            Some(v) => {
                let s = self.dwarf.attr_string(self.unit, v)?;
                Ok(Some(s.to_string_lossy().into_owned()))
            }
            None => Ok(None),
        }
    }

    /// The type's name and size in bytes.
    fn type_info(&self, entry: &Die<'_, '_, 'a>) -> Result<(String, Option<u64>), Error> {
        let offset = match self.attr_or_origin(entry, gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(o)) => o,
            _ => return Ok(("?".to_owned(), None)),
        };
        let t = self.unit.entry(offset)?;
        let name = match t.tag() {
            gimli::DW_TAG_pointer_type => "pointer".to_owned(),
            gimli::DW_TAG_array_type => "array".to_owned(),
            _ => self.name(&t)?.unwrap_or_else(|| "?".to_owned()),
        };
        Ok((name, self.type_size(offset, 0)?))
    }

    /// The base type `entry`'s `DW_AT_type` is, through typedefs and
    /// qualifiers (`const`, `volatile`, `restrict`, `_Atomic`); `None` for
    /// any other type (pointers, enumerations, aggregates) or none.
    fn base_type_of(&self, entry: &Die<'_, '_, 'a>) -> Result<Option<BaseType>, Error> {
        let mut offset = match self.attr_or_origin(entry, gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(o)) => o,
            _ => return Ok(None),
        };
        for _ in 0..32 {
            let t = self.unit.entry(offset)?;
            match t.tag() {
                gimli::DW_TAG_base_type => {
                    let encoding = t.attr_value(gimli::DW_AT_encoding)?;
                    let size = t
                        .attr_value(gimli::DW_AT_byte_size)?
                        .and_then(|v| v.udata_value());
                    return Ok(match (encoding, size) {
                        (Some(AttributeValue::Encoding(e)), Some(byte_size)) => Some(BaseType {
                            offset: offset.0 as u64,
                            encoding: e.0,
                            byte_size,
                        }),
                        _ => None,
                    });
                }
                gimli::DW_TAG_typedef
                | gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type => match t.attr_value(gimli::DW_AT_type)? {
                    Some(AttributeValue::UnitRef(o)) => offset = o,
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// A type's size in bytes, through typedefs and qualifiers; arrays are
    /// their element size times their subranges' counts.
    fn type_size(&self, offset: gimli::UnitOffset, depth: u32) -> Result<Option<u64>, Error> {
        if depth > 32 {
            return Ok(None);
        }
        let t = self.unit.entry(offset)?;
        if let Some(size) = t
            .attr_value(gimli::DW_AT_byte_size)?
            .and_then(|v| v.udata_value())
        {
            return Ok(Some(size));
        }
        if matches!(
            t.tag(),
            gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type
        ) {
            return Ok(Some(u64::from(self.unit.encoding().address_size)));
        }
        let inner = match t.attr_value(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(o)) => self.type_size(o, depth + 1)?,
            _ => None,
        };
        if t.tag() != gimli::DW_TAG_array_type {
            return Ok(inner);
        }
        let mut total = match inner {
            Some(n) => n,
            None => return Ok(None),
        };
        let mut tree = self.unit.entries_tree(Some(offset))?;
        let root = tree.root()?;
        let mut children = root.children();
        while let Some(child) = children.next()? {
            let sub = child.entry();
            if sub.tag() != gimli::DW_TAG_subrange_type {
                continue;
            }
            let count = match sub
                .attr_value(gimli::DW_AT_count)?
                .and_then(|v| v.udata_value())
            {
                Some(c) => c,
                None => {
                    let upper = sub
                        .attr_value(gimli::DW_AT_upper_bound)?
                        .and_then(|v| v.udata_value());
                    let lower = sub
                        .attr_value(gimli::DW_AT_lower_bound)?
                        .and_then(|v| v.udata_value())
                        .unwrap_or(0);
                    match upper {
                        Some(u) => u.saturating_sub(lower).saturating_add(1),
                        None => return Ok(None),
                    }
                }
            };
            total = total.saturating_mul(count);
        }
        Ok(Some(total))
    }

    fn variable(
        &self,
        entry: &Die<'_, '_, 'a>,
        frame_base: Option<&[u8]>,
        function: &str,
    ) -> Result<Variable, Error> {
        let encoding = encoding_of(self.unit);
        let name = self.name(entry)?.unwrap_or_default();
        let (type_name, byte_size) = self.type_info(entry)?;
        let base_type = self.base_type_of(entry)?;
        let location = match entry.attr_value(gimli::DW_AT_location)? {
            Some(AttributeValue::Exprloc(e)) => {
                VariableLocation::Expression(self.resolve(e.0.slice(), encoding)?)
            }
            Some(v) => {
                let mut found = VariableLocation::None;
                if let Some(mut list) = self.dwarf.attr_locations(self.unit, v)? {
                    while let Some(le) = list.next()? {
                        if le.range.begin <= self.pc && self.pc < le.range.end {
                            found = VariableLocation::Expression(
                                self.resolve(le.data.0.slice(), encoding)?,
                            );
                            break;
                        }
                    }
                }
                found
            }
            None => match self.attr_or_origin(entry, gimli::DW_AT_const_value)? {
                Some(v) => VariableLocation::Const(const_bytes(v, byte_size)),
                None => VariableLocation::None,
            },
        };
        let frame_base = match frame_base {
            Some(fb) => Some(self.resolve(fb, encoding)?),
            None => None,
        };
        Ok(Variable {
            name,
            kind: if entry.tag() == gimli::DW_TAG_formal_parameter {
                VariableKind::Parameter
            } else {
                VariableKind::Variable
            },
            function: function.to_owned(),
            die: entry
                .offset()
                .to_debug_info_offset(&self.unit.header)
                .map_or(0, |o| o.0 as u64),
            type_name,
            byte_size,
            base_type,
            location,
            encoding,
            frame_base,
            base_types: self.base_types.clone(),
            unit_offset: self
                .unit
                .header
                .offset()
                .as_debug_info_offset()
                .map_or(0, |o| o.0 as u64),
        })
    }

    /// Replaces `DW_OP_addrx`/`DW_OP_constx` by `DW_OP_addr`/`DW_OP_constu`
    /// with the `.debug_addr` entry, so the evaluator needs no index
    /// requests, and moves every address by the load bias. Expressions with
    /// branches keep their operations (the index rewrite changes operation
    /// sizes); their `DW_OP_addr` operands are moved in place.
    fn resolve(&self, bytes: &[u8], encoding: Encoding) -> Result<Vec<u8>, Error> {
        let Ok(ops) = decode(bytes, encoding) else {
            return Ok(bytes.to_vec());
        };
        let has_index = ops
            .iter()
            .any(|(_, op)| matches!(op, Op::Addrx(_) | Op::Constx(_)));
        let has_branch = ops
            .iter()
            .any(|(_, op)| matches!(op, Op::Bra(_) | Op::Skip(_)));
        let bias = self.load_bias;
        if has_index && !has_branch {
            let mut out = Vec::with_capacity(ops.len());
            for (_, op) in ops {
                out.push(match op {
                    Op::Addrx(i) => Op::Addr(self.address(i)?.wrapping_add(bias)),
                    // Not an address in the loaded image (e.g. a TLS offset).
                    Op::Constx(i) => Op::Constu(self.address(i)?),
                    Op::Addr(a) => Op::Addr(a.wrapping_add(bias)),
                    other => other,
                });
            }
            return crate::encode(&out, encoding);
        }
        let mut out = bytes.to_vec();
        move_decoded_addresses(&mut out, &ops, encoding, bias);
        Ok(out)
    }

    fn address(&self, index: u64) -> Result<u64, Error> {
        let i = usize::try_from(index).map_err(|_| Error::Dwarf {
            what: "address index".into(),
        })?;
        Ok(self.dwarf.address(self.unit, gimli::DebugAddrIndex(i))?)
    }
}

/// Moves every `DW_OP_addr` operand of the expression `bytes` by `bias`, in
/// place (an expression that does not decode is left as it is).
pub(crate) fn move_addresses(bytes: &mut [u8], encoding: Encoding, bias: u64) {
    if let Ok(ops) = decode(bytes, encoding) {
        move_decoded_addresses(bytes, &ops, encoding, bias);
    }
}

/// [`move_addresses`] with the expression already decoded (`ops`).
fn move_decoded_addresses(bytes: &mut [u8], ops: &[(usize, Op)], encoding: Encoding, bias: u64) {
    if bias == 0 {
        return;
    }
    let size = usize::from(encoding.address_size);
    for (at, op) in ops {
        if let Op::Addr(a) = op {
            let moved = a.wrapping_add(bias).to_le_bytes();
            // The operand follows the opcode byte; `decode` read it there.
            if let (Some(dst), Some(src)) =
                (bytes.get_mut(at + 1..at + 1 + size), moved.get(..size))
            {
                dst.copy_from_slice(src);
            }
        }
    }
}

fn const_bytes(v: AttributeValue<R<'_>>, size: Option<u64>) -> Vec<u8> {
    let n = size
        .and_then(|s| usize::try_from(s).ok())
        .unwrap_or(8)
        .min(8);
    match v {
        AttributeValue::Block(b) => b.slice().to_vec(),
        AttributeValue::Sdata(s) => s.to_le_bytes()[..n].to_vec(),
        other => other.udata_value().unwrap_or(0).to_le_bytes()[..n].to_vec(),
    }
}

/// The result of evaluating a variable's location against a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluated {
    /// The location description (none for constants and optimized-out
    /// variables).
    pub location: Option<LocationDescription>,
    /// The object's bits, `byte_size` bytes of them, with what is undefined.
    pub bits: Bits,
}

/// Evaluates `variable`'s location at the snapshot and reads its bytes
/// ([`evaluate_variable_with`] the snapshot's [`State`] with the variable's
/// base types).
pub fn evaluate_variable(variable: &Variable, snapshot: &Snapshot) -> Result<Evaluated, Error> {
    let mut state = snapshot.state().with_variable(variable);
    evaluate_variable_with(variable, &mut state)
}

/// Evaluates `variable`'s location against `target` (with the variable's
/// frame base and base types, [`WithFrame`]; entry-value expressions see the
/// base types only if the target has them, as a [`State::with_base_types`]
/// does) and reads its bytes through the result ([`Entry::into_location`]: a value result is an address if generic,
/// the object's bits otherwise).
pub fn evaluate_variable_with<T: Target + ?Sized>(
    variable: &Variable,
    target: &mut T,
) -> Result<Evaluated, Error> {
    evaluate_variable_in(variable, &[], target)
}

/// [`evaluate_variable_with`] among the variables in scope, `scope` (those of the same
/// [`Binary::variables_at`]): `DW_OP_GNU_variable_value` of one of them gives its value
/// in the same frame, as gdb does.
pub fn evaluate_variable_in<T: Target + ?Sized>(
    variable: &Variable,
    scope: &[Variable],
    target: &mut T,
) -> Result<Evaluated, Error> {
    evaluate_nested(variable, scope, target, Nesting::default()).map(|(e, _)| e)
}

/// [`evaluate_variable_in`] nested `nesting` deep (`DW_OP_GNU_variable_value`); also gives
/// back the nested evaluations' count.
fn evaluate_nested<T: Target + ?Sized>(
    variable: &Variable,
    scope: &[Variable],
    target: &mut T,
    nesting: Nesting,
) -> Result<(Evaluated, Nesting), Error> {
    let size = variable.byte_size.unwrap_or(0);
    let bit_len = size.saturating_mul(8).min(access::MAX_ACCESS_BITS);
    let bytes = match &variable.location {
        VariableLocation::None => {
            let bits = Bits::undefined(bit_len).map_err(|error| Error::Access { error })?;
            return Ok((
                Evaluated {
                    location: None,
                    bits,
                },
                nesting,
            ));
        }
        VariableLocation::Const(b) => {
            let bits = Bits::from_bytes(b);
            return Ok((
                Evaluated {
                    location: None,
                    bits,
                },
                nesting,
            ));
        }
        VariableLocation::Expression(b) => b,
    };
    let enc = variable.encoding;
    let expr = Decoded::new(bytes, enc)?;
    let frame_base = match &variable.frame_base {
        Some(fb) => Some(Decoded::new(fb, enc)?),
        None => None,
    };
    let frame = Frame {
        frame_base: frame_base.as_ref().map(|f| (f, enc)),
        base_types: &variable.base_types,
        variables: scope,
    };
    let mut eval = expr.evaluation(enc);
    let mut with_frame = WithFrame {
        target: &mut *target,
        frame,
        nesting,
    };
    eval.evaluate_with(&mut with_frame)?;
    let nesting = with_frame.nesting;
    // The result is moved out, not cloned.
    let location = match eval.into_result() {
        Some(e) => e.into_location(enc.address_size),
        None => LocationDescription::undefined(),
    };
    let bits = access::read(&location, bit_len, target)?;
    let evaluated = Evaluated {
        bits,
        location: Some(location),
    };
    Ok((evaluated, nesting))
}

impl Variable {
    /// The variable's bits as gdb prints a value of its base type
    /// ([`Variable::base_type`], [`crate::Value::number`]): signed and
    /// unsigned integers in decimal, floats of 4 and 8 bytes as C's `%g` with
    /// enough digits to read back, `true`/`false` for a boolean 0 or 1, and
    /// characters as their number and the character (`65 'A'`, `10 '\n'`,
    /// `-1 '\377'`). `None` if some bit is undefined, the type is no base
    /// type, or its size or encoding is one of the others (`long double`,
    /// 128-bit integers, UTF characters, complex, decimal floats).
    pub fn number(&self, bits: &Bits) -> Option<String> {
        let base = self.base_type?;
        let size = u8::try_from(base.byte_size).ok()?;
        if !matches!(size, 1 | 2 | 4 | 8)
            || !bits.is_fully_defined()
            || bits.bit_len() != u64::from(size) * 8
        {
            return None;
        }
        let mut raw = [0u8; 8];
        raw.get_mut(..usize::from(size))?
            .copy_from_slice(bits.bytes().get(..usize::from(size))?);
        let raw = u64::from_le_bytes(raw);
        let address_size = self.encoding.address_size;
        let number = |ty| Value::new(ty, raw, address_size).number(address_size);
        Some(match gimli::DwAte(base.encoding) {
            gimli::DW_ATE_boolean if raw <= 1 => String::from(["false", "true"][raw as usize]),
            gimli::DW_ATE_boolean | gimli::DW_ATE_unsigned => {
                number(ValueType::Unsigned(size)).to_string()
            }
            gimli::DW_ATE_signed => number(ValueType::Signed(size)).to_string(),
            gimli::DW_ATE_float if size >= 4 => number(ValueType::Float(size)).to_string(),
            gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char if size == 1 => {
                let ty = if base.encoding == gimli::DW_ATE_signed_char.0 {
                    ValueType::Signed(1)
                } else {
                    ValueType::Unsigned(1)
                };
                format!("{} {}", number(ty), gdb_char(raw as u8))
            }
            _ => return None,
        })
    }
}

/// A byte as gdb prints a C character: `'A'`, its escapes (`'\n'`,
/// `'\''`), and octal for the rest (`'\377'`).
fn gdb_char(b: u8) -> String {
    let escaped = match b {
        7 => "\\a",
        8 => "\\b",
        9 => "\\t",
        10 => "\\n",
        11 => "\\v",
        12 => "\\f",
        13 => "\\r",
        b'\'' => "\\'",
        b'\\' => "\\\\",
        0x20..=0x7e => return format!("'{}'", char::from(b)),
        _ => return format!("'\\{b:03o}'"),
    };
    format!("'{escaped}'")
}

/// The evaluator's error inside an [`Error`], if that is what it is.
pub fn eval_error(e: &Error) -> Option<&EvalError> {
    match e {
        Error::Eval { error, .. } => Some(error),
        _ => None,
    }
}
