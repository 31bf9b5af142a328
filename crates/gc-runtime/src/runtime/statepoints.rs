//! Roots from statepoint stack maps, and the copying collector they allow.
//!
//! Code rewritten by `locus_gc::lower::statepoint` keeps no GC frame. At each call that may
//! collect (a `gc.statepoint`), LLVM's stack map record for the call's return address lists
//! every GC pointer live across it as a (base, derived) pair of stack slots, and the code
//! reloads those slots after the call. So a collection finds its roots by walking the
//! machine stack:
//!
//! - the runtime's `locus_gc_sp_*` entries are called by small wrappers compiled into the
//!   module, which pass their own frame address; every JIT-compiled function keeps its
//!   frame pointer (`"frame-pointer"="all"`), so from there the chain of saved frame
//!   pointers leads through every compiled frame: on x86-64 `[fp]` is the caller's frame
//!   pointer, `[fp + 8]` the return address into the caller, and the caller's stack pointer
//!   at the call was `fp + 16`; AArch64's frame record (`x29`) is laid out the same, but
//!   sits below the callee-saved registers, so the stack pointer is not a fixed distance
//!   away: there the stack maps turn the stack-pointer-relative slots LLVM writes into
//!   frame-pointer-relative ones with each function's frame size and call frame
//!   information (`crate::stackmaps`), and for a frame of no fixed size (its stack
//!   realigned for an over-aligned spill) the walk takes the caller's stack pointer to be
//!   the callee's CFA, which that information places off the callee's frame pointer;
//! - each return address is looked up in the [`StackMaps`] built from the JIT's
//!   `.llvm_stackmaps` section; a location `[rsp + off]` or `[rbp + off]` is a slot of the
//!   caller's frame. A return address outside the compiled code ends the walk (the host's
//!   frame that called the entry); when the host called through
//!   [`super::Runtime::call_compiled`], a return address into compiled code between there
//!   and the host's frame means foreign code called compiled code back (`qsort`'s
//!   comparator), whose callers' frames the chain does not lead to: reported
//!   ([`GcFault::ForeignFrame`]), as their roots would be lost;
//! - the deopt operands are not roots; a base slot holding an address the heap does not
//!   know (a constant object the program made from a plain pointer) is skipped, one holding
//!   a freed object's address is a dangling reference.
//!
//! With [`StackMaps`] installed ([`super::Config::stack_maps`]) a collection takes its roots
//! from the walk, the frame chain (callee-rooted arguments link frames of their own) and
//! the pinned objects, marks, sweeps, and then, when moving ([`super::Config::moving`]),
//! copies every live object that is not pinned to a new block: base slots are given the
//! new address, each derived slot moves by the same delta as its base, pointer fields are
//! rewritten. In stress mode the old copy is freed as the stress collector frees objects
//! (its pages made inaccessible, never reused), so a stale pointer faults and is reported
//! naming the object; otherwise its block goes back to the allocator once every object of
//! the collection is copied, so a long run's memory stays bounded by what is live.
//!
//! Each frame's return address is found by binary search in vectors sorted by address
//! (built at the first walk), and a base naming a live object costs one registry probe.
//!
//! Pinned (never moved): objects named by `gc_preserve` or a `jl_roots` bundle while they
//! hold them ([`super::locus_gc_pin`]), objects whose address escaped through
//! `julia.pointer_from_objref` ([`super::locus_gc_pin_forever`]), objects rooted by the frame
//! chain, tagged objects (Julia's layouts, scanned conservatively: their words cannot be
//! rewritten, and a `GenericMemory` points into itself) and objects reached through a tagged
//! object's words or through a base slot holding an interior pointer.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::OnceLock;

use super::collector::{bad, could_be_static};
use super::fault::{GcFault, Referrer};
use super::frames::{self, StackBounds};
use super::heap::{Heap, Lookup, Scan, Trace};
use super::Collection;

/// Where a statepoint keeps one value, relative to the caller's frame at the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// `[sp + offset]`: the caller's stack pointer at the call, which is the callee's CFA.
    /// The x86-64 walk finds it from the callee's frame pointer (+ 16). On AArch64 the
    /// callee's frame record is no fixed distance from its CFA, so the stack maps turn
    /// these into [`Slot::Fp`] slots where the caller's frame has a fixed size
    /// (`crate::stackmaps`); for the others the walk adds the callee's CFA offset at its
    /// call ([`StackMaps::add_cfa`]).
    Sp(i32),
    /// `[fp + offset]`: the caller's frame pointer (`rbp`, `x29`).
    Fp(i32),
    /// A constant (a null pointer): nothing to visit.
    Constant,
}

/// The DWARF numbers of the stack and frame pointers: x86-64's `rsp` and `rbp`.
#[cfg(not(target_arch = "aarch64"))]
const DWARF_SP_FP: (u16, u16) = (7, 6);
/// The DWARF numbers of the stack and frame pointers: AArch64's `sp` and `x29` (the
/// numbers `llvm-readobj-19 --stackmap` prints as `R#31` and `R#29`).
#[cfg(target_arch = "aarch64")]
const DWARF_SP_FP: (u16, u16) = (31, 29);

/// Whether the caller's stack pointer at a call is the callee's frame pointer + 16: on
/// x86-64 the call pushes the return address and the callee pushes `rbp` right after.
const SP_FROM_CALLEE_FP: bool = cfg!(target_arch = "x86_64");

impl Slot {
    /// Where a statepoint record's location keeps a GC pointer, with its number of 8-byte
    /// lanes; `Err` says where else it is (`"in DWARF register 3"`): the collector reads
    /// and rewrites stack slots only, so a record keeping a pointer anywhere else cannot
    /// be used.
    pub fn of_location(location: locus_stackmap::Location) -> Result<(Slot, u16), String> {
        use locus_stackmap::Location;
        match location {
            Location::Indirect {
                dwarf_reg,
                offset,
                size,
            } => {
                let lanes = (size / 8).max(1);
                match dwarf_reg {
                    r if r == DWARF_SP_FP.0 => Ok((Slot::Sp(offset), lanes)),
                    r if r == DWARF_SP_FP.1 => Ok((Slot::Fp(offset), lanes)),
                    // LLVM addresses a frame's slots off a third register only when it is
                    // both realigned and of variable size: a base pointer.
                    _ => Err(format!(
                        "in memory off DWARF register {dwarf_reg} (a base pointer: the frame \
                         is both realigned and of variable size)"
                    )),
                }
            }
            Location::Constant { .. } | Location::ConstantIndex { .. } => Ok((Slot::Constant, 1)),
            Location::Register { dwarf_reg, .. } => Err(format!("in DWARF register {dwarf_reg}")),
            Location::Direct { .. } => Err("as the address of a stack object".into()),
        }
    }
}

/// One relocated pointer of a statepoint: where its base is, where the derived pointer is,
/// and how many 8-byte lanes (more than one for a vector of pointers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPair {
    /// The base object's slot.
    pub base: Slot,
    /// The (possibly interior) pointer's slot.
    pub derived: Slot,
    /// 8-byte lanes in each slot.
    pub lanes: u16,
}

impl SlotPair {
    /// Whether either slot is off the stack pointer ([`Slot::Sp`]).
    pub fn off_sp(&self) -> bool {
        matches!(self.base, Slot::Sp(_)) || matches!(self.derived, Slot::Sp(_))
    }
}

/// The statepoint records of compiled code by return address, and where the code is.
///
/// A walk looks each frame's return address up by binary search in vectors sorted by
/// address, built at the first walk after the last addition: no hashing, and the pairs of
/// all records in one vector.
#[derive(Clone, Debug, Default)]
pub struct StackMaps {
    records: Vec<(usize, Vec<SlotPair>)>,
    code: Vec<(usize, usize)>,
    /// (return address, N): the function's CFA at that call is its frame pointer + N.
    cfas: Vec<(usize, i32)>,
    index: OnceLock<Index>,
}

/// [`StackMaps`] sorted for lookup.
#[derive(Clone, Debug, Default)]
struct Index {
    /// Distinct return addresses, increasing.
    returns: Vec<usize>,
    /// For each of `returns`, its pairs in `pairs`.
    spans: Vec<Range<usize>>,
    pairs: Vec<SlotPair>,
    /// Code ranges sorted by start.
    code: Vec<(usize, usize)>,
    /// CFA offsets from the frame pointer by return address, sorted.
    cfas: Vec<(usize, i32)>,
}

impl Index {
    fn new(maps: &StackMaps) -> Index {
        let records = &maps.records;
        let mut order: Vec<usize> = (0..records.len()).collect();
        // Stable: the pairs of one address stay in the order they were added.
        order.sort_by_key(|&k| records[k].0);
        let mut index = Index::default();
        for k in order {
            let (ret, pairs) = &records[k];
            if index.returns.last() != Some(ret) {
                index.returns.push(*ret);
                index.spans.push(index.pairs.len()..index.pairs.len());
            }
            index.pairs.extend_from_slice(pairs);
            if let Some(span) = index.spans.last_mut() {
                span.end = index.pairs.len();
            }
        }
        index.code = maps.code.clone();
        index.code.sort_unstable();
        index.cfas = maps.cfas.clone();
        index.cfas.sort_unstable();
        index
    }

    fn in_code(&self, addr: usize) -> bool {
        self.code_end(addr).is_some()
    }

    /// The end of the range of compiled code that holds `addr`.
    fn code_end(&self, addr: usize) -> Option<usize> {
        // The last range starting at or before `addr` (sections do not overlap; sorted by
        // (start, end), an empty section comes before a real one at the same start).
        let after = self.code.partition_point(|&(s, _)| s <= addr);
        after
            .checked_sub(1)
            .and_then(|k| self.code.get(k))
            .map(|&(_, e)| e)
            .filter(|&e| addr < e)
    }

    /// Whether `return_address` returns into compiled code: the call before it is. A call
    /// to a `noreturn` function can end a function, so its return address is the function's
    /// end, outside the function's range (and outside a section that ends there).
    fn returns_into_code(&self, return_address: usize) -> bool {
        return_address
            .checked_sub(1)
            .is_some_and(|a| self.in_code(a))
    }

    fn pairs(&self, return_address: usize) -> Option<&[SlotPair]> {
        let k = self.returns.binary_search(&return_address).ok()?;
        self.pairs.get(self.spans.get(k)?.clone())
    }

    /// N where the CFA of the function stopped at the call returning to `return_address`
    /// is its frame pointer + N.
    fn cfa(&self, return_address: usize) -> Option<i32> {
        let k = self
            .cfas
            .binary_search_by_key(&return_address, |&(r, _)| r)
            .ok()?;
        self.cfas.get(k).map(|&(_, n)| n)
    }
}

impl StackMaps {
    /// No records, no code.
    pub fn new() -> StackMaps {
        StackMaps::default()
    }

    /// Adds compiled code at `start..end`: a return address in it continues the walk.
    pub fn add_code(&mut self, start: usize, end: usize) {
        self.code.push((start, end));
        self.index = OnceLock::new();
    }

    /// Adds the statepoint whose call returns to `return_address`.
    pub fn add_record(&mut self, return_address: usize, pairs: Vec<SlotPair>) {
        self.records.push((return_address, pairs));
        self.index = OnceLock::new();
    }

    /// Adds where the CFA of the function stopped at the call returning to `return_address`
    /// is: its frame pointer + `offset`. An AArch64 caller's stack pointer at a call is the
    /// callee's CFA, so this places the slots of a statepoint whose caller's frame has no
    /// fixed size (see [`Slot::Sp`]).
    pub fn add_cfa(&mut self, return_address: usize, offset: i32) {
        self.cfas.push((return_address, offset));
        self.index = OnceLock::new();
    }

    /// Statepoints recorded (distinct return addresses).
    pub fn len(&self) -> usize {
        self.index().returns.len()
    }

    /// No statepoint recorded.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn index(&self) -> &Index {
        self.index.get_or_init(|| Index::new(self))
    }
}

/// (base slot address, derived slot address) of one lane; `None` for a constant.
type Lane = (Option<usize>, Option<usize>);

/// A machine frame of compiled code at a statepoint: the slots of its pairs, resolved.
struct SpFrame {
    index: usize,
    return_address: usize,
    /// Its lanes in the walk's vector of lanes.
    lanes: Range<usize>,
}

/// What a walk found: the statepoint frames and all their lanes.
#[derive(Default)]
struct Walked {
    frames: Vec<SpFrame>,
    lanes: Vec<Lane>,
}

impl Walked {
    fn lanes(&self, frame: &SpFrame) -> &[Lane] {
        self.lanes.get(frame.lanes.clone()).unwrap_or(&[])
    }

    /// Appends another thread's walk (its frames keep their lanes).
    fn append(&mut self, other: Walked) {
        let base = self.lanes.len();
        self.lanes.extend(other.lanes);
        self.frames.extend(other.frames.into_iter().map(|mut f| {
            f.lanes = f.lanes.start + base..f.lanes.end + base;
            f
        }));
    }
}

/// The most compiled frames one walk visits.
const MAX_SP_FRAMES: usize = 1 << 22;

fn frame_fault(index: usize, return_address: usize, problem: &'static str, number: u64) -> GcFault {
    GcFault::StatepointFrame {
        frame: index,
        return_address,
        problem,
        collection: number,
    }
}

/// Walks the frame-pointer chain from `fp` (a wrapper's frame), collecting the slots of
/// every statepoint frame. `entered` is a stack address in the frame of the host function
/// that called the compiled code ([`super::Runtime::call_compiled`]), 0 if unknown: the
/// walk that stops at a frame of foreign code below it looks there for compiled frames the
/// foreign code hid ([`GcFault::ForeignFrame`]).
fn walk(
    maps: &StackMaps,
    fp: usize,
    bounds: Option<StackBounds>,
    entered: usize,
    number: u64,
) -> Result<(Walked, usize), GcFault> {
    let index = maps.index();
    let mut out = Walked::default();
    let mut fp = fp;
    let mut walked = 0;
    // The return address into the function whose frame record `fp` is, `None` for the
    // wrapper (the entry's caller, which the walk starts from).
    let mut callee_return: Option<usize> = None;
    let in_stack = |a: usize| bounds.is_none_or(|b| a >= b.low && a + 16 <= b.high);
    loop {
        if fp == 0 || !fp.is_multiple_of(8) || !in_stack(fp) {
            return Err(frame_fault(
                walked,
                0,
                "has a frame pointer outside the stack",
                number,
            ));
        }
        // SAFETY: `fp` and `fp + 8` are aligned words inside this thread's stack (checked
        // above), the frame record of a running function: [caller's fp, return address].
        let caller_fp = unsafe { read(fp) };
        // SAFETY: as above.
        let ret = unsafe { read(fp + 8) };
        if !index.returns_into_code(ret) {
            if let Some(compiled_return) = hidden_compiled_frame(index, fp, bounds, entered) {
                return Err(GcFault::ForeignFrame {
                    frame: walked,
                    return_address: ret,
                    compiled_return,
                    collection: number,
                });
            }
            break;
        }
        if let Some(pairs) = index.pairs(ret) {
            // The caller's stack pointer at the call, the callee's CFA: looked up only for
            // a record that needs it (on AArch64, a realigned frame's).
            let sp = if !pairs.iter().any(SlotPair::off_sp) {
                None
            } else {
                match callee_return {
                    Some(r) if !SP_FROM_CALLEE_FP => {
                        index.cfa(r).and_then(|n| fp.checked_add_signed(n as isize))
                    }
                    // x86-64: the return address and the saved `rbp` lie right below the
                    // CFA. A wrapper keeps no register but its frame record, which AArch64
                    // puts there too.
                    _ => Some(fp + 16),
                }
                .ok_or_else(|| {
                    frame_fault(
                        walked,
                        ret,
                        "names a slot off the stack pointer, and no call frame information \
                         places the frame it called",
                        number,
                    )
                })
                .map(Some)?
            };
            let at = |slot: Slot| match slot {
                Slot::Sp(off) => sp?.checked_add_signed(off as isize),
                Slot::Fp(off) => caller_fp.checked_add_signed(off as isize),
                Slot::Constant => None,
            };
            let first = out.lanes.len();
            for pair in pairs {
                for lane in 0..usize::from(pair.lanes) {
                    let base = at(pair.base).map(|a| a + 8 * lane);
                    let derived = at(pair.derived).map(|a| a + 8 * lane);
                    for a in [base, derived].into_iter().flatten() {
                        if !a.is_multiple_of(8) || !in_stack(a) {
                            return Err(frame_fault(
                                walked,
                                ret,
                                "names a slot outside the stack",
                                number,
                            ));
                        }
                    }
                    out.lanes.push((base, derived));
                }
            }
            out.frames.push(SpFrame {
                index: walked,
                return_address: ret,
                lanes: first..out.lanes.len(),
            });
        }
        walked += 1;
        if caller_fp <= fp || walked > MAX_SP_FRAMES {
            return Err(frame_fault(
                walked,
                ret,
                "has a saved frame pointer that does not lead outwards",
                number,
            ));
        }
        fp = caller_fp;
        callee_return = Some(ret);
    }
    Ok((out, walked))
}

/// An address of compiled code in the stack between the frame record at `fp` (of a
/// compiled function called from foreign code) and `entered` (where the host called the
/// compiled code, 0 if unknown): the return address of a compiled frame that called the
/// foreign code. Not only a statepoint's: RS4GC takes a call of a C library function
/// (`qsort`) for one that cannot collect, so the caller's live pointers are not even in
/// its stack map. Between a compiled entry and the host that called it lies only the
/// host's call, so nothing is found there.
fn hidden_compiled_frame(
    index: &Index,
    fp: usize,
    bounds: Option<StackBounds>,
    entered: usize,
) -> Option<usize> {
    let inside = bounds.is_some_and(|b| entered <= b.high);
    if entered == 0 || entered <= fp || !inside {
        return None;
    }
    let first = fp + 16;
    let words = entered.saturating_sub(first) / 8;
    (0..words).map(|k| first + 8 * k).find_map(|a| {
        // SAFETY: `a` is an aligned word of this thread's stack between a running compiled
        // frame's record and a running host frame (`fp` was checked to lie in the stack,
        // `entered` lies above it inside the stack's bounds).
        let word = unsafe { read(a) };
        (index.returns_into_code(word) && follows_call(index, word)).then_some(word)
    })
}

/// Whether the instruction before `addr` (a return address into compiled code, possibly
/// the end of a range of it) is a call, as it is before a return address (a function's own
/// address, which foreign code keeps to call it back, is not one). x86-64: `call rel32`
/// (`e8`, 5 bytes) or `call r/m64` (`ff /2`, 2 to 7 bytes); AArch64: `bl` or `blr`.
fn follows_call(index: &Index, addr: usize) -> bool {
    const BACK: usize = if cfg!(target_arch = "aarch64") { 4 } else { 7 };
    let Some(start) = addr
        .checked_sub(BACK)
        .filter(|&a| index.code_end(a).is_some_and(|end| addr <= end))
    else {
        return false;
    };
    let mut before = [0u8; BACK];
    for (k, b) in before.iter_mut().enumerate() {
        // SAFETY: `start..addr` lies inside one range of compiled code (checked above),
        // which is mapped and readable.
        *b = unsafe { ((start + k) as *const u8).read_volatile() };
    }
    if cfg!(target_arch = "aarch64") {
        let insn = u32::from_le_bytes([
            before[BACK - 4],
            before[BACK - 3],
            before[BACK - 2],
            before[BACK - 1],
        ]);
        insn & 0xfc00_0000 == 0x9400_0000 || insn & 0xffff_fc1f == 0xd63f_0000
    } else {
        // `ff` with ModRM's reg field 2, the ModRM byte `len - 1` bytes before `addr`
        // (prefix bytes, REX, SIB and displacement make the 2 to 7).
        let indirect = (2..=BACK)
            .any(|len| before[BACK - len] == 0xff && before[BACK - len + 1] & 0x38 == 0x10);
        before[BACK - 5] == 0xe8 || indirect
    }
}

/// The lanes of every statepoint frame from the wrapper frame `fp` outwards, as (base
/// slot, derived slot) addresses (the derived slot the base one when the lane has none; a
/// constant lane is left out), and how many compiled frames were walked: the roots an MMTk
/// collection is handed (`crate::mmtk::RootSet::statepoint`).
///
/// # Errors
/// A frame the walk cannot follow, numbered for collection `number`.
pub(crate) fn slot_lanes(
    maps: &StackMaps,
    fp: usize,
    bounds: Option<StackBounds>,
    entered: usize,
    number: u64,
) -> Result<(Vec<(usize, usize)>, usize), GcFault> {
    let (walked, frames) = walk(maps, fp, bounds, entered, number)?;
    let lanes = walked
        .lanes
        .iter()
        .filter_map(|&(base, derived)| base.map(|b| (b, derived.unwrap_or(b))))
        .collect();
    Ok((lanes, frames))
}

/// Reads a slot.
///
/// # Safety
/// `addr` was checked by `walk` (aligned, in the stack) and its frame is still running.
unsafe fn read(addr: usize) -> usize {
    // SAFETY: the caller's promise.
    unsafe { (addr as *const usize).read() }
}

/// Writes a slot.
///
/// # Safety
/// As [`read`].
unsafe fn write(addr: usize, value: usize) {
    // SAFETY: the caller's promise.
    unsafe { (addr as *mut usize).write(value) }
}

/// An object to scan: its address, what to scan, and whether what it reaches is pinned.
struct Grey {
    addr: usize,
    scan: Scan,
    root: (usize, usize),
}

struct Marker<'h> {
    heap: &'h mut Heap,
    /// The mutators' stacks: an address there is no static object.
    stacks: Vec<StackBounds>,
    stack: Vec<Grey>,
    pinned: HashSet<usize>,
    done: Collection,
}

impl Marker<'_> {
    /// Traces `target` found at `from`; `pin` if it must not move.
    fn trace(
        &mut self,
        target: usize,
        root: (usize, usize),
        pin: bool,
        from: impl FnOnce(&Heap) -> Referrer,
    ) -> Result<(), GcFault> {
        let traced = self.heap.trace(target);
        self.record(target, root, pin, traced, from)
    }

    /// What [`Marker::trace`] does with what tracing `target` found.
    fn record(
        &mut self,
        target: usize,
        root: (usize, usize),
        pin: bool,
        traced: Trace,
        from: impl FnOnce(&Heap) -> Referrer,
    ) -> Result<(), GcFault> {
        let collection = self.done.number;
        match traced {
            Trace::Marked(scan) => {
                self.done.marked += 1;
                if pin || matches!(scan, Scan::Words(_)) {
                    self.pinned.insert(target);
                }
                if !matches!(scan, Scan::Fields(0) | Scan::Words(0)) {
                    self.stack.push(Grey {
                        addr: target,
                        scan,
                        root,
                    });
                }
                Ok(())
            }
            Trace::AlreadyMarked => {
                if pin {
                    self.pinned.insert(target);
                }
                Ok(())
            }
            Trace::CorruptHeader(object) => Err(GcFault::CorruptHeader {
                from: from(self.heap),
                object,
                collection,
            }),
            // A static object (see `super::collector`).
            Trace::Bad(Lookup::Nothing) if could_be_static(target, &self.stacks) => Ok(()),
            Trace::Bad(lookup) => Err(bad(from(self.heap), target, lookup, collection)),
        }
    }

    fn drain(&mut self) -> Result<(), GcFault> {
        while let Some(grey) = self.stack.pop() {
            let (words, precise) = match grey.scan {
                Scan::Fields(n) => (n, true),
                Scan::Words(n) => (n, false),
            };
            for field in 0..words {
                // SAFETY: `grey.addr` is a live object whose body holds at least `words`
                // aligned 8-byte words.
                let target = unsafe { read(grey.addr + 8 * field) };
                if target == 0 || (!precise && !self.heap.is_live(target)) {
                    continue;
                }
                let from = |heap: &Heap| Referrer::Field {
                    object: grey.addr,
                    serial: heap.info(grey.addr).map_or(0, |o| o.serial),
                    field,
                    root: grey.root,
                };
                // A word of a tagged object cannot be rewritten: what it names stays put.
                self.trace(target, grey.root, !precise, from)?;
            }
        }
        Ok(())
    }
}

/// What a statepoint collection is given.
pub(crate) struct Roots<'a> {
    pub(crate) maps: &'a StackMaps,
    /// Every mutator's roots, the collecting thread first. A thread's `fp` is its
    /// wrapper's frame address, 0 when it is not stopped in a `locus_gc_sp_*` entry (then
    /// only its chain and regions are scanned).
    pub(crate) threads: &'a [frames::ThreadRoots],
    /// The global root regions: their objects are pinned.
    pub(crate) globals: &'a [(usize, usize)],
    pub(crate) moving: bool,
}

/// Collects with statepoint roots: walk, mark, sweep, and move when asked.
pub(crate) fn collect(
    heap: &mut Heap,
    roots: &Roots<'_>,
    number: u64,
) -> Result<Collection, GcFault> {
    let chain = frames::walk_threads(roots.threads, number)?;
    let mut sp_frames = Walked::default();
    let mut walked = 0;
    for t in roots.threads.iter().filter(|t| t.fp != 0) {
        let (w, n) = walk(roots.maps, t.fp, t.bounds, t.entered, number)?;
        sp_frames.append(w);
        walked += n;
    }
    let mut m = Marker {
        heap,
        stacks: roots.threads.iter().filter_map(|t| t.bounds).collect(),
        stack: Vec::new(),
        pinned: HashSet::new(),
        done: Collection {
            number,
            frames: walked + chain.len(),
            ..Collection::default()
        },
    };
    let marked = roots
        .threads
        .iter()
        .try_for_each(|t| mark_regions(&mut m, t))
        .and_then(|()| mark_globals(&mut m, roots.globals))
        .and_then(|()| mark_all(&mut m, &chain, &sp_frames));
    let Marker {
        heap,
        pinned,
        mut done,
        ..
    } = m;
    if let Err(fault) = marked {
        heap.clear_marks();
        return Err(fault);
    }
    let (objects, bytes) = heap.sweep(number);
    done.freed_objects = objects;
    done.freed_bytes = bytes;
    if roots.moving {
        move_objects(heap, &pinned, &sp_frames, number, &mut done);
    }
    Ok(done)
}

/// Marks and pins every object the global root regions name (each word null or a live
/// object, as a frame's root slot).
fn mark_globals(m: &mut Marker<'_>, globals: &[(usize, usize)]) -> Result<(), GcFault> {
    // SAFETY: the promise of `locus_gc_add_root_region`.
    for (region, word, target) in unsafe { frames::global_roots(globals) } {
        m.done.roots += 1;
        let from = |_: &Heap| Referrer::Global { region, word };
        m.trace(target, (usize::MAX, word), true, from)?;
    }
    m.drain()
}

/// Marks and pins every live object a word of `thread`'s registered regions names.
fn mark_regions(m: &mut Marker<'_>, thread: &frames::ThreadRoots) -> Result<(), GcFault> {
    for word in frames::region_words(thread) {
        if m.heap.is_live(word) {
            m.done.roots += 1;
            let from = |_: &Heap| Referrer::Pinned { object: word };
            m.trace(word, (usize::MAX, 0), true, from)?;
        }
    }
    m.drain()
}

fn mark_all(
    m: &mut Marker<'_>,
    chain: &[frames::FrameRef],
    sp_frames: &Walked,
) -> Result<(), GcFault> {
    for frame in chain {
        m.done.max_roots = m.done.max_roots.max(frame.nroots);
        for slot in 0..frame.nroots {
            // SAFETY: `walk` checked the frame, which is still linked; `slot < nroots`.
            let target = unsafe { frame.root(slot) };
            if target == 0 {
                continue;
            }
            m.done.roots += 1;
            let from = |_: &Heap| Referrer::Root {
                frame: frame.index,
                frame_addr: frame.addr,
                nroots: frame.nroots,
                slot,
            };
            m.trace(target, (frame.index, slot), true, from)?;
        }
    }
    for addr in m.heap.pinned_objects() {
        m.done.roots += 1;
        let from = |_: &Heap| Referrer::Pinned { object: addr };
        m.trace(addr, (usize::MAX, 0), true, from)?;
    }
    m.drain()?;
    for frame in &sp_frames.frames {
        let lanes = sp_frames.lanes(frame);
        m.done.max_roots = m.done.max_roots.max(lanes.len());
        for (pair, &(base, _)) in lanes.iter().enumerate() {
            let Some(slot) = base else { continue };
            // SAFETY: checked by `walk`; the frame is running.
            let target = unsafe { read(slot) };
            if target == 0 {
                continue;
            }
            let from = |_: &Heap| Referrer::Statepoint {
                frame: frame.index,
                return_address: frame.return_address,
                pair,
                slot,
            };
            // Traced first: a live object (most bases) costs one registry probe; only
            // what is not one is looked up.
            match m.heap.trace(target) {
                // An interior pointer as a base (a derived pointer RS4GC could not trace
                // to its object, say one loaded from memory): keep its object, in place.
                Trace::Bad(Lookup::Inside { object, offset })
                    if offset >= 0 && object.freed_in.is_none() =>
                {
                    m.done.roots += 1;
                    m.trace(object.addr, (frame.index, pair), true, from)?;
                }
                // Not the heap's: a constant object made from a plain pointer.
                Trace::Bad(Lookup::Nothing) => continue,
                traced => {
                    m.done.roots += 1;
                    m.record(target, (frame.index, pair), false, traced, from)?;
                }
            }
        }
        m.drain()?;
    }
    Ok(())
}

/// A slot's address and the value read from it.
type Read = (usize, usize);

/// Copies every live object not pinned and rewrites what points to it.
fn move_objects(
    heap: &mut Heap,
    pinned: &HashSet<usize>,
    sp_frames: &Walked,
    number: u64,
    done: &mut Collection,
) {
    let movable: Vec<usize> = heap
        .live_addresses()
        .into_iter()
        .filter(|a| !pinned.contains(a) && !heap.is_immovable(*a))
        .collect();
    let mut moved: HashMap<usize, usize> = HashMap::new();
    for old in movable {
        // An object that cannot be copied (the kernel refused pages) stays where it is.
        if let Some(new) = heap.relocate(old, number) {
            moved.insert(old, new);
        }
    }
    heap.release_pages();
    done.moved = moved.len() as u64;
    if moved.is_empty() {
        return;
    }
    heap.rewrite_fields(&moved);
    for frame in &sp_frames.frames {
        // Read every slot before writing any: a slot may be both a base and a derived one.
        // SAFETY: every slot was checked by `walk` and its frame is running.
        let value = |a: usize| (a, unsafe { read(a) });
        let values: Vec<(Option<Read>, Option<Read>)> = sp_frames
            .lanes(frame)
            .iter()
            .map(|&(b, d)| (b.map(value), d.map(value)))
            .collect();
        for (base, derived) in values {
            let Some((base_slot, old_base)) = base else {
                continue;
            };
            let Some(&new_base) = moved.get(&old_base) else {
                continue;
            };
            if let Some((derived_slot, old_derived)) = derived {
                let moved_derived = old_derived.wrapping_add(new_base.wrapping_sub(old_base));
                // SAFETY: as above.
                unsafe { write(derived_slot, moved_derived) };
            }
            // SAFETY: as above.
            unsafe { write(base_slot, new_base) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(off: i32) -> SlotPair {
        SlotPair {
            base: Slot::Sp(off),
            derived: Slot::Sp(off),
            lanes: 1,
        }
    }

    /// Records added out of order, one address twice, are found by binary search with
    /// their pairs in the order added; code ranges answer by their half-open bounds.
    #[test]
    fn lookup_by_return_address() {
        let mut maps = StackMaps::new();
        maps.add_code(0x3000, 0x3100);
        maps.add_code(0x1000, 0x1100);
        maps.add_code(0x2000, 0x2000);
        maps.add_record(0x3010, vec![pair(8)]);
        maps.add_record(0x1020, vec![pair(16)]);
        maps.add_record(0x3010, vec![pair(24), pair(32)]);
        assert_eq!(maps.len(), 2);
        let index = maps.index();
        assert_eq!(
            index.pairs(0x3010),
            Some(&[pair(8), pair(24), pair(32)][..])
        );
        assert_eq!(index.pairs(0x1020), Some(&[pair(16)][..]));
        assert_eq!(index.pairs(0x1021), None);
        for (addr, inside) in [
            (0xfff, false),
            (0x1000, true),
            (0x10ff, true),
            (0x1100, false),
            (0x2000, false),
            (0x30ff, true),
            (0x3100, false),
        ] {
            assert_eq!(index.in_code(addr), inside, "{addr:#x}");
        }
        // A return address is the end of a call: one at a range's end (a `noreturn` call
        // ending a function) returns into it, one at its start does not.
        for (ret, inside) in [
            (0x1000, false),
            (0x1001, true),
            (0x1100, true),
            (0x1101, false),
        ] {
            assert_eq!(index.returns_into_code(ret), inside, "{ret:#x}");
        }
        // An addition after a lookup is seen by the next one.
        maps.add_record(0x1030, vec![pair(40)]);
        assert_eq!(maps.index().pairs(0x1030), Some(&[pair(40)][..]));
        assert_eq!(maps.len(), 3);
    }
}
