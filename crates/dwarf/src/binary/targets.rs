//! The targets expressions are evaluated against: [`Snapshot`] (owned, writable), [`State`]
//! (one frame of a snapshot, a core file or a process, with entry values) and [`WithFrame`]
//! (adds a function's frame base and base types to any target).

extern crate std;

use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;

use super::variable::{evaluate_nested, BaseType, Decoded, Variable};
use crate::access::Target;
use crate::callsite::EntryValues;
use crate::{
    Encoding, Entry, Evaluation, LocationDescription, Op, Storage, Unavailable, Value, ValueType,
};

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

    /// The snapshot as a borrowed [`State`] (the [`Target`] [`run`](super::run) and
    /// [`evaluate_variable`](super::evaluate_variable) evaluate against).
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
            tls_block: None,
            nesting: Nesting::default(),
        }
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

/// How many nested evaluations (frame bases, entry values) one [`run`](super::run) may
/// start, at every depth together. Each has the evaluator's own step limit,
/// so without a cap a loop around `DW_OP_entry_value` multiplies it (a
/// 40-byte expression took 20 s), and nesting multiplies again.
pub const MAX_NESTED_EVALUATIONS: u32 = 64;

/// How deep a target is among the evaluations one run started, and how many
/// nested ones it has started so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Nesting {
    depth: u32,
    started: u32,
}

impl Nesting {
    /// One more nested evaluation, one level deeper; refused past
    /// [`MAX_NESTING`] or [`MAX_NESTED_EVALUATIONS`].
    fn enter(&mut self) -> Result<Nesting, Unavailable> {
        if self.depth >= MAX_NESTING {
            return Err(Unavailable::NestedTooDeeply);
        }
        if self.started >= MAX_NESTED_EVALUATIONS {
            return Err(Unavailable::TooManyNested(MAX_NESTED_EVALUATIONS));
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
    /// Where the current thread's static TLS block of the module the expression is in
    /// starts: `DW_OP_form_tls_address` (`DW_OP_GNU_push_tls_address`) adds its offset
    /// ([`crate::stopped::static_tls_block`]); `None`: thread-local storage is refused.
    pub tls_block: Option<u64>,
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
            tls_block: None,
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
    fn entry_expression(
        &mut self,
        expression: &[u8],
        encoding: Encoding,
    ) -> Result<Entry, Unavailable> {
        let mut inner = State {
            registers: self.entry_registers,
            nesting: self.nesting.enter()?,
            ..self.clone()
        };
        let mut eval = Evaluation::new(expression, encoding);
        let done = eval.evaluate_with(&mut inner);
        self.nesting.leave(inner.nesting);
        done.map_err(|e| Unavailable::Failed(Box::new(e)))?;
        eval.take_result().ok_or_else(|| {
            Unavailable::OptimizedOut(
                "entry value: the entry-value expression left an empty stack".to_owned(),
            )
        })
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
) -> Result<Entry, Unavailable> {
    match entry_registers.get(&r) {
        Some(bytes) => Ok(Entry::Value(Value::from_bytes(
            ValueType::Generic,
            bytes,
            address_size,
        ))),
        None => Err(Unavailable::OptimizedOut(format!(
            "entry value: register {r} at function entry is not in the snapshot"
        ))),
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

    fn lane(&mut self) -> Result<u64, Unavailable> {
        self.lane.ok_or(Unavailable::Missing)
    }

    fn iteration(&mut self) -> Result<u64, Unavailable> {
        self.iteration.ok_or(Unavailable::Missing)
    }

    fn frame_base(&mut self) -> Result<u64, Unavailable> {
        self.frame_base.ok_or(Unavailable::Missing)
    }

    fn call_frame_cfa(&mut self) -> Result<u64, Unavailable> {
        self.cfa.ok_or(Unavailable::Missing)
    }

    fn object_address(&mut self) -> Result<u64, Unavailable> {
        self.object_address.ok_or(Unavailable::Missing)
    }

    fn object_location(&mut self) -> Option<LocationDescription> {
        self.object_location.cloned()
    }

    fn base_type(&mut self, offset: u64) -> Result<(u8, u64), Unavailable> {
        match self.base_types.iter().find(|b| b.offset == offset) {
            Some(b) => Ok((b.encoding, b.byte_size)),
            None => Err(Unavailable::Missing),
        }
    }

    fn entry_value(
        &mut self,
        expression: &[u8],
        register: Option<u16>,
        encoding: Encoding,
    ) -> Result<Entry, Unavailable> {
        let size = encoding.address_size;
        match (self.entry, register) {
            (Some(entry), Some(r)) => entry
                .register(r)
                .map(|b| generic(b, size))
                .map_err(Unavailable::OptimizedOut),
            (Some(entry), None) => match pointee_register(expression, encoding) {
                Some((r, n)) => entry
                    .pointee(r)
                    .map(|b| generic(b.get(..n).unwrap_or(b), size))
                    .map_err(Unavailable::OptimizedOut),
                None => Err(Unavailable::OptimizedOut(format!(
                    "DW_OP_entry_value of {}: gdb takes only a register's value or its pointee's on entry",
                    crate::decode(expression, encoding)
                        .map(|ops| crate::to_text(&ops.into_iter().map(|(_, op)| op).collect::<Vec<_>>()))
                        .unwrap_or_else(|e| e.to_string())
                ))),
            },
            (None, Some(r)) => entry_register_value(self.entry_registers, r, size),
            (None, None) => self.entry_expression(expression, encoding),
        }
    }

    fn parameter_ref(&mut self, offset: u64) -> Result<Entry, Unavailable> {
        let Some(entry) = self.entry else {
            return Err(Unavailable::OptimizedOut(format!(
                "no call site is known for the entry value of the parameter at unit offset {offset:#x}"
            )));
        };
        let die = self.unit_offset.wrapping_add(offset);
        entry
            .parameter(die)
            .map(|b| generic(b, self.address_size))
            .map_err(Unavailable::OptimizedOut)
    }

    fn tls_address(&mut self, offset: u64) -> Result<u64, Unavailable> {
        self.tls_block
            .map(|block| block.wrapping_add(offset))
            .ok_or(Unavailable::Unsupported)
    }

    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, Unavailable> {
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
    pub(super) nesting: Nesting,
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
    fn frame_base_address(&mut self, expr: &Decoded, enc: Encoding) -> Result<u64, Unavailable> {
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
        done.map_err(|e| Unavailable::Failed(Box::new(e)))?;
        let bad = || Unavailable::NotAnAddress;
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
    fn lane(&mut self) -> Result<u64, Unavailable> {
        self.target.lane()
    }
    fn iteration(&mut self) -> Result<u64, Unavailable> {
        self.target.iteration()
    }
    fn frame_base(&mut self) -> Result<u64, Unavailable> {
        match (self.target.frame_base(), self.frame.frame_base) {
            (Ok(fb), _) => Ok(fb),
            (Err(_), Some((expr, enc))) => self.frame_base_address(expr, enc),
            (Err(e), None) => Err(e),
        }
    }
    fn call_frame_cfa(&mut self) -> Result<u64, Unavailable> {
        self.target.call_frame_cfa()
    }
    fn object_address(&mut self) -> Result<u64, Unavailable> {
        self.target.object_address()
    }
    fn object_location(&mut self) -> Option<LocationDescription> {
        self.target.object_location()
    }
    fn base_type(&mut self, offset: u64) -> Result<(u8, u64), Unavailable> {
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
    ) -> Result<Entry, Unavailable> {
        self.target.entry_value(expression, register, encoding)
    }
    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, Unavailable> {
        self.target.entry_register(register)
    }
    fn parameter_ref(&mut self, offset: u64) -> Result<Entry, Unavailable> {
        self.target.parameter_ref(offset)
    }
    /// The value of a variable in scope ([`Frame::variables`]), evaluated in this frame
    /// (nested as entry values are); others are asked of the target.
    fn variable_value(&mut self, offset: u64) -> Result<Entry, Unavailable> {
        let scope = self.frame.variables;
        let Some(v) = scope.iter().find(|v| v.die == offset) else {
            return self.target.variable_value(offset);
        };
        let inner = self.nesting.enter()?;
        let target: &mut dyn Target = &mut self.target;
        // Named, as the user knows it; the request keeps the DIE offset.
        let (evaluated, inner) =
            evaluate_nested(v, scope, target, inner).map_err(|e| Unavailable::VariableFailed {
                name: v.name.clone(),
                error: Box::new(e),
            })?;
        self.nesting.leave(inner);
        let bits = &evaluated.bits;
        if !bits.is_fully_defined() || bits.bytes().is_empty() {
            return Err(Unavailable::OptimizedOut(format!(
                "the value of `{}` is optimized out",
                v.name
            )));
        }
        let n = bits.bytes().len().min(8);
        let size = v.encoding.address_size;
        Ok(Entry::Value(Value::from_bytes(
            ValueType::Generic,
            &bits.bytes()[..n],
            size,
        )))
    }
    fn callee(&mut self, offset: u64, unit_relative: bool) -> Result<Vec<u8>, Unavailable> {
        self.target.callee(offset, unit_relative)
    }
    fn indexed_address(&mut self, index: u64, is_address: bool) -> Result<u64, Unavailable> {
        self.target.indexed_address(index, is_address)
    }
    fn tls_address(&mut self, offset: u64) -> Result<u64, Unavailable> {
        self.target.tls_address(offset)
    }
}

/// The snapshot as a [`Target`]: reads, writes (`locus dwarf eval --write`)
/// into the registers and memory blocks it has, and the requests its fields
/// answer. Entry values of other expressions than a lone register need the
/// nesting bounds of a [`State`]: evaluate with [`Snapshot::state`] (as
/// [`run`](super::run) does) for them.
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

    fn lane(&mut self) -> Result<u64, Unavailable> {
        self.state().lane()
    }

    fn frame_base(&mut self) -> Result<u64, Unavailable> {
        self.state().frame_base()
    }

    fn call_frame_cfa(&mut self) -> Result<u64, Unavailable> {
        self.state().call_frame_cfa()
    }

    fn object_address(&mut self) -> Result<u64, Unavailable> {
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
    ) -> Result<Entry, Unavailable> {
        match register {
            Some(r) => entry_register_value(&self.entry_registers, r, encoding.address_size),
            // Other expressions need the nesting bounds of a `State`
            // (`Snapshot::state`).
            None => Err(Unavailable::Unsupported),
        }
    }

    fn entry_register(&mut self, register: u16) -> Result<LocationDescription, Unavailable> {
        Ok(entry_register_location(&self.entry_registers, register))
    }
}
