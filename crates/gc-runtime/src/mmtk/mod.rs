//! MMTk behind the runtime (issue 26 §3): the `mmtk` crate's production plans collecting
//! objects of the runtime's layout, with roots from frame chains and statepoint slots.
//!
//! The runtime runs on it when its collector is [`crate::runtime::Collector::Mmtk`]
//! (`locus gc run --collector mmtk:PLAN`, `LOCUS_GC_COLLECTOR=mmtk:PLAN` for a built
//! executable): frame roots on a pinning plan, statepoint roots on every plan, any number
//! of mutator threads (see "The seam with the runtime" for what is wired and tested). Its
//! objects have the runtime's layout with a shorter header: `nptrs` tracked pointer fields
//! then raw bytes, 16-byte aligned, after one header word (`nptrs` and `nbytes` in the
//! word at `obj - 8`, [`crate::contract::untagged_header_word`]; tagged objects with the
//! type tag there, as in the runtime's own 32-byte
//! [`ObjectHeader`](crate::runtime::heap::ObjectHeader)) and no more
//! (the own heap's magic, state and serial serve its freed-object detection): an object
//! takes the bytes a Boehm-collected one of the same fields takes, and compiled code,
//! which reads only a tagged object's tag, cannot tell which heap made it. An allocation that fits in the
//! thread's allocation buffer takes a fast path ([`MmtkMutator::try_alloc`]: a bump
//! pointer, the header, the valid-object bit). Each collection's stop-the-world pause is
//! measured ([`MmtkStats::pause_median_ns`], [`MmtkStats::pause_max_ns`]).
//!
//! # Plans
//!
//! [`Plan`], chosen by name (`marksweep`, `immix`, `stickyimmix`, `semispace`, `gencopy`):
//!
//! | plan | moves objects | frame roots | generational (needs write barriers) |
//! |---|---|---|---|
//! | MarkSweep | never | pinned (nothing moves anyway) | no |
//! | Immix | when it defragments | pinned, with all they reach, for the collection | no |
//! | StickyImmix | when a full-heap collection defragments (the nursery never copies) | pinned, with all they reach, for the collection | yes |
//! | SemiSpace | every live object, every collection | rewritten (cannot pin) | no |
//! | GenCopy | every live object it collects | rewritten (cannot pin) | yes |
//!
//! # Roots
//!
//! A thread's roots are asked for only when a collection stops it: each allocation (and
//! [`MmtkMutator::collect`]) takes a closure that fills a [`RootSet`]:
//! - [`RootSet::push_frame`]: the innermost frame of a Julia-style frame chain (what
//!   `*pgcstack` holds); every object a linked frame names is a root. On a plan that can
//!   pin (MarkSweep, Immix, StickyImmix) it is pinned for that collection, as Julia's MMTk
//!   binding pins its frame roots, because lowered code keeps using the value it stored
//!   in the frame; transitively (with every object it reaches), because the code also
//!   keeps in registers pointers it loaded from the object's fields (Julia's Loaded
//!   pointers, addrspace 13) and from what those point to, rooted only by the object in
//!   the frame (with only the frame's objects pinned, Immix's defragmentation moved such
//!   a pointer's target and `vector_masked_loads` returned 4240 for 4242). Julia's binding
//!   does the same: the objects its shadow stacks name are transitively pinning roots
//!   (mmtk-julia's `scan_roots_in_mutator_thread`). The cost: what frames keep is never
//!   defragmented, so a program that keeps much in frames needs a larger Immix heap (the
//!   4-thread `churn` bench fits in 96 MiB, not in 64). The same holds
//!   for objects pinned for a region or an interior statepoint base. SemiSpace and GenCopy
//!   cannot pin: they rewrite the frame's slot, so on
//!   those plans code must reload a rooted value from its slot after a call that may
//!   collect (statepoint code does, frame code does not: use a pinning plan for it).
//! - [`RootSet::push_slot`]: statepoint slots (a `[sp + off]` / `[fp + off]` the stack maps
//!   name, resolved to an address), each null or an object's address, rewritten when the
//!   object moves.
//! - [`RootSet::push_derived`]: (base slot, derived slot) pairs: the base is a root as above,
//!   and the derived slot moves by as much as its base did (done by the thread itself when
//!   the collection ends).
//! - [`RootSet::push_statepoint`]: a statepoint's lanes as (base slot, derived slot): a base
//!   holding an object's address as in `slots` and `derived`; one holding a pointer into
//!   an object (RS4GC could not trace it to its object) keeps that object, pinned on a
//!   pinning plan, and on a copying one both slots move by as much as the object (through
//!   a cell off the stack that stands in as the base slot); one holding an address outside
//!   MMTk's memory (a constant object made from a plain pointer) is skipped; anything else
//!   in MMTk's memory is a fault (a dangling reference).
//! - [`RootSet::push_region`]: memory scanned conservatively (a `locus_gc_push_region`
//!   alloca, a global root region): each aligned word that is an object's address is a
//!   root, pinned on a pinning plan. The contract of these regions is that what they name
//!   stays in place (the lowering keeps values across `setjmp` in them, and the code keeps
//!   using the values it stored): on a copying plan, a region naming an object that moves
//!   is a fault (the word is rewritten and the object kept, but the program may hold the
//!   old address), as a pin is.
//!
//! Besides, [`MmtkHeap::pin`] makes the object holding an address a root that never moves
//! until [`MmtkHeap::unpin`] (`gc_preserve`, `jl_roots` and `pointer_from_objref` under
//! statepoints): on a pinning plan any object, on SemiSpace and GenCopy only one in the
//! large object space, which never moves ([`PinRefused::Moves`] for the others: the
//! runtime reports it as a fault at the pin, one `locus: gc: pin: ...` line, rather than
//! let the program's raw pointer go stale).
//!
//! A root or a pointer field holding an address outside MMTk's memory names a *static
//! object* (spec 003 lets code cast a plain pointer to a constant object into the tracked
//! space: Julia's `nothing`, a module's global): it is skipped, never traced, moved or
//! freed (fields reach MMTk's `vm_trace_object`, which returns it as it is), so the objects
//! it names must be static too or held by a root region. A root in MMTk's memory that is
//! not an object's address is a fault: it is recorded ([`MmtkHeap::take_faults`]) and not
//! traced; so is a broken frame (misaligned, flag bits set, a root count over
//! [`MAX_FRAME_ROOTS`], linked twice, a chain over [`MAX_FRAMES`]). Fields are traced as
//! MMTk traces them: a field holding garbage in MMTk's memory is undefined behaviour, as in
//! compiled code (MMTk's debug assertions catch some in a debug build).
//!
//! # Heap size
//!
//! [`MmtkOptions::heap`]: a fixed size ([`HeapSize::Fixed`]: a collection when it is full)
//! or one that grows within bounds ([`HeapSize::Dynamic`]).
//! The runtime makes a fixed heap when its `Config::heap_bytes` or `LOCUS_GC_HEAP_SIZE`
//! (e.g. `256M`) asks for one, else [`HeapSize::default_dynamic`] (32 MiB up to half the
//! physical memory, MMTk's own default limit). [`HeapSize::parse`] reads the variable's
//! text: `N` is fixed, `MIN..MAX` (or `MIN..`, `..MAX`) dynamic. An allocation that does
//! not fit after a collection is [`MmtkError::OutOfMemory`].
//!
//! A dynamic heap is sized by the binding's policy, as Boehm sizes its heap: it starts at
//! MIN, and after each full-heap collection its limit grows to 1.5 times what the
//! collection kept when that is more, up to MAX; it never shrinks, since MMTk 0.33 keeps
//! every page it touched (freed blocks stay mapped for reuse) and a lower limit would
//! cost collections without saving memory. MMTk's own MemBalancer, used before, set the
//! limit to the live size plus a square-root term computed in pages that stayed within a
//! few hundred KiB of it, so a program whose live data passed MIN collected after every
//! few hundred KiB: GCBench at 16M..64M took 160 collections and 3.3 s (33 and 0.85 s
//! now), and GCBench with a 100 MB long-lived tree in the default heap 696 collections
//! and 118 s (59 and 6.7 s now; 21 and 10.9 s in a fixed 256M heap, 271 MB against
//! 189 MB peak). GCBench's own live data at a collection is 10.5 MB at most (its 25 MB
//! stretch tree is built between two collections), so any MIN from 27 MiB (the smallest
//! heap it runs in) behaves as a fixed heap of MIN. What a collection kept is counted in
//! whole Immix blocks, so fragmentation counts as live: the 4-thread `churn` bench with
//! frame roots (25 MB live, every object pinned) grows to a 162 MB limit and a 170 MB
//! peak in 7 collections and 1.75 s, where MemBalancer stayed at 80 MB with 28
//! collections and 3.7 s; a fixed heap bounds it (96M: 108 MB, 9 collections).
//!
//! What the resident set holds besides the heap, measured on GCBench with a fixed 27 MiB
//! Immix heap (45 MB peak; Boehm's build 37.5 MB): the spaces' pages (32.6 MB: Immix
//! touches every block of each 4 MiB chunk it takes before it reuses freed ones, so its
//! space reaches whole chunks, 28.7 MB, and the large object space holds the 3.9 MB array;
//! the limit counts the side metadata's estimate too); side metadata, 2.3 MB (7% of the
//! spaces' pages: valid-object, mark, pinning and 2 forwarding bits per 8 bytes, line
//! marks); 4.4 MB of `malloc` that MMTk makes at start-up whatever the heap (the state of
//! each 4 MiB chunk of the 17 TiB it reserves for side metadata, 8 KiB per 32 GiB:
//! mmtk-core issue 1220); the executable's and libraries' pages (5.9 MB). One GC worker
//! thread instead of two saves under 0.5 MB and costs 15 to 25% of the time. MMTk 0.33's StickyImmix does not get there:
//! when its heap is exhausted a GC worker panics inside MMTk (an index out of bounds in
//! its free list of pages), which ends the process with `locus: mmtk: an MMTk GC worker
//! thread panicked`.
//!
//! # Tagged objects
//!
//! A tagged object (Julia's `gc_alloc_bytes`: a layout only the program knows) is
//! allocated in a space that never moves (MarkSweep's own space, Immix's non-moving space,
//! the large object space under the other plans, where each takes whole pages: MMTk 0.33's
//! non-moving space fails under them) and scanned conservatively: each aligned word that is an object's address
//! (MMTk's valid-object bits say which) keeps that object alive. On a pinning plan every
//! object a tagged object's word names is pinned before the trace, so the word stays
//! right. SemiSpace and GenCopy cannot pin: they rewrite such a word to the object's new
//! address, which is wrong only for a word that is an integer equal to an object's
//! address by chance; Julia's code, which allocates tagged objects, uses frames and so
//! a pinning plan anyway.
//!
//! # Write barriers
//!
//! StickyImmix and GenCopy collect their young objects alone, so a store of a pointer into
//! an object must be followed by [`MmtkMutator::write_barrier`] on that object (what
//! `locus_gc_write_barrier` is for) or [`MmtkMutator::write_field`] used instead.
//!
//! # Threads and stop-the-world
//!
//! MMTk's GC work runs on worker threads of its own ([`MmtkOptions::workers`]). A mutator
//! thread that triggers a collection (in an allocation, or [`MmtkMutator::collect`])
//! publishes its roots and blocks until the collection ends; the workers start tracing once
//! every bound mutator is so parked. With several threads, a collection sets a flag when
//! it starts stopping them ([`MmtkHeap::collection_pending`], one relaxed load), which
//! every safepoint and `locus_gc_poll` reads: the thread then [`MmtkMutator::park`]s,
//! handing over its roots, until the collection ends. A thread in a safe region
//! ([`MmtkMutator::enter_safe_region`]) handed its roots over when it entered and counts
//! as parked, so collections run without it; leaving waits for a running collection to
//! end. A thread that asked for a collection waits until one has ended since it asked
//! (not for "the next one": MMTk may have merged its request into a collection that
//! ended before it parked), or none is pending. Binding and unbinding wait for a running
//! collection.
//!
//! # The seam with the runtime
//!
//! What the runtime's entry points call when its collector is an MMTk plan (per thread, a
//! [`MmtkMutator`] in the thread's runtime; `roots` a closure over that runtime which
//! pushes `*pgcstack` to [`RootSet::push_frame`] once the chain passed the runtime's own
//! checks (`runtime::frames`: on this thread's stack, above the stack pointer; a chain that
//! fails them is the runtime's `corrupt frame` fault), and with statepoint roots walks the stack
//! from the `locus_gc_sp_*` frame address as `runtime::statepoints` does, pushing each
//! lane's base slot address to [`RootSet::push_slot`] and each (base, derived) pair whose
//! slots differ to [`RootSet::push_derived`], the pushed `locus_gc_push_region` ranges and the
//! global root regions to [`RootSet::push_region`]):
//!
//! | entry point | calls |
//! |---|---|
//! | `locus_gc_init` / thread attach | [`MmtkHeap::new`] once per process (else [`MmtkHeap::get`]), then [`MmtkHeap::bind_mutator`]; detach drops the mutator |
//! | `locus_gc_alloc(nptrs, nbytes)` | [`MmtkMutator::alloc`]`(nptrs, nbytes, roots)` |
//! | `locus_gc_alloc_bytes(ptls, size, tag)` | [`MmtkMutator::alloc_tagged`]`(size, tag, roots)` |
//! | `locus_gc_alloc_genericmemory(ptls, n, tag)` | `alloc_tagged(16 + n, tag, roots)`, then word 1 = `obj + 16` |
//! | `locus_gc_safepoint`, `locus_gc_poll` | [`MmtkMutator::park`]`(roots)` when [`MmtkHeap::collection_pending`] (another thread's collection); MMTk itself collects when an allocation finds the heap full |
//! | `locus_gc_enter_safe_region` / `leave` | [`MmtkMutator::enter_safe_region`]`(roots)` / [`MmtkMutator::leave_safe_region`] |
//! | `locus_gc_write_barrier(parent)` | [`MmtkMutator::write_barrier`]`(parent)` |
//! | `locus_gc_write_barrier_interior(addr)` | [`MmtkMutator::write_barrier_interior`]`(addr)` |
//! | `locus_gc_pin` / `unpin` / `pin_forever` | [`MmtkHeap::pin`] / [`MmtkHeap::unpin`] / `pin` never undone (the object's address: resolve an interior pointer first) |
//! | stats, faults | [`MmtkHeap::stats`], [`MmtkHeap::take_faults`] (each a `GcFault` for the handler) |
//!
//! Wired today ([`crate::runtime`]): the allocation entries, `locus_gc_collect`-style
//! collections, write barriers, pins, foreign reads, stats (objects moved included) and
//! faults, with frame roots on MarkSweep, Immix and StickyImmix and statepoint roots on all
//! five plans. Tested (cli `gc_mmtk`, MMTk collecting at every call that may collect,
//! `LOCUS_GC_MMTK_COLLECT_EVERY=1`, Immix and StickyImmix defragmenting at each,
//! `LOCUS_GC_MMTK_DEFRAG=1`): with statepoint roots, the GC suite's 38 programs
//! give the stress collector's results under MarkSweep and Immix (38 of 38) and SemiSpace
//! (27; the other 11 are refused with one line: 5 pin objects, 6 keep values in stack
//! root regions); GenCopy refuses the same 11 and gives the others' results, and so does
//! StickyImmix for all: the lowering places the write barriers these two plans need where
//! the frontend placed none (`locus_gc::lower::WriteBarriers`; without them
//! `callee_rooted_field`, `vector_loaded` and `vector_masked_loads` stored young objects
//! into old ones unremembered and gave wrong results). StickyImmix's nursery does not copy
//! (MMTk's feature `sticky_immix_non_moving_nursery`): with a copying nursery and frame
//! roots, `vector_loaded` gave 4200 and `vector_masked_loads` and `gc_loaded` wrong
//! results, barriers or not, because a nursery collection does not trace the old object
//! a frame names, so the transitive pin of frame roots stops there; the young objects its
//! fields refer to were reached through the remembered set instead and copied while the
//! code still held the Loaded (13) pointers it had read from those fields. Several mutator
//! threads (cli `gc_threads`, gc-runtime `mmtk_runtime`): the threaded `share` program (5
//! threads, a global root table, a holder blocked in a foreign call under `jl_roots`, main
//! joining in a safe region) gives the stress collector's 202250 under MarkSweep and Immix
//! with frame roots, and under Immix with statepoint roots; `spin` with
//! `--safepoint-polls` ends, without polls it holds the collection up. On SemiSpace and
//! GenCopy `share` is refused at its `jl_roots` pin.
//!
//! # One heap per process
//!
//! MMTk keeps process-wide state (its address-space map, side metadata), and its binding
//! is found through static functions, so a process has at most one [`MmtkHeap`], made by
//! [`MmtkHeap::new`] and never freed (its worker threads run until the process ends).
//!
//! # Example
//!
//! Rust code playing a compiled function with one frame root (as in the [`crate::runtime`]
//! docs), on Immix:
//!
//! ```
//! use locus_gc_runtime::mmtk::{MmtkHeap, MmtkOptions, Plan, RootSet};
//! use locus_gc_runtime::runtime::GcFrame;
//!
//! let heap = MmtkHeap::new(MmtkOptions::new(Plan::Immix, 16 << 20)).unwrap();
//! let mut m = heap.bind_mutator();
//! let mut frame = [GcFrame::header_word(1), 0, 0]; // [1 << 2, prev, root 0]
//! let fp = frame.as_mut_ptr() as usize;
//! // SAFETY: `frame` is a GC frame with an empty `prev` link, alive and touched by no
//! // one else while the collections below run.
//! let mut roots = |set: &mut RootSet| unsafe { set.push_frame(fp) };
//! let obj = m.alloc(1, 8, &mut roots).unwrap(); // one pointer field, 8 raw bytes
//! unsafe { ((obj + 8) as *mut u64).write(42) };
//! frame[2] = obj; // root it
//! m.collect(&mut roots);
//! assert!(heap.is_object(obj));
//! assert_eq!(unsafe { ((obj + 8) as *const u64).read() }, 42);
//! assert!(heap.take_faults().is_empty());
//! ```

mod binding;
mod fast_path;
mod layout;
mod vm_layout;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use mmtk::util::alloc::{AllocatorSelector, BumpAllocator, BumpPointer, ImmixAllocator};
use mmtk::util::options::{GCTriggerSelector, PlanSelector};
use mmtk::util::{Address, ObjectReference};
use mmtk::vm::slot::SimpleSlot;
use mmtk::{memory_manager, AllocationSemantics, MMTKBuilder, MMTK};

pub use binding::Locus;
use binding::MutatorRecord;

use crate::contract::UNTAGGED_HEADER_FLAG;
use crate::runtime::collector::Pauses;
use crate::runtime::frames::{GcFrame, MAX_FRAMES, MAX_FRAME_ROOTS, ROOT_FLAGS_MASK};
use crate::runtime::heap::OBJECT_ALIGN;

/// An MMTk plan the runtime can collect with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Plan {
    /// Mark-sweep: never moves an object.
    MarkSweep,
    /// Immix: mark-region, moves objects only when it defragments.
    Immix,
    /// Sticky-mark-bits generational Immix.
    StickyImmix,
    /// Semi-space copying: moves every live object at every collection.
    SemiSpace,
    /// Generational copying: a copying nursery and a semi-space mature space.
    GenCopy,
}

impl Plan {
    /// Every plan, in the order of the names.
    pub const ALL: [Plan; 5] = [
        Plan::MarkSweep,
        Plan::Immix,
        Plan::StickyImmix,
        Plan::SemiSpace,
        Plan::GenCopy,
    ];

    /// Its name: `marksweep`, `immix`, `stickyimmix`, `semispace` or `gencopy`.
    pub fn name(self) -> &'static str {
        match self {
            Plan::MarkSweep => "marksweep",
            Plan::Immix => "immix",
            Plan::StickyImmix => "stickyimmix",
            Plan::SemiSpace => "semispace",
            Plan::GenCopy => "gencopy",
        }
    }

    /// The plan of a name ([`Plan::name`]).
    pub fn from_name(name: &str) -> Result<Plan, MmtkError> {
        Plan::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| MmtkError::UnknownPlan(name.to_string()))
    }

    /// Whether it can pin an object, so that frame roots, tagged objects' targets and
    /// [`MmtkHeap::pin`] keep objects in place (MarkSweep, Immix, StickyImmix).
    pub fn pins(self) -> bool {
        matches!(self, Plan::MarkSweep | Plan::Immix | Plan::StickyImmix)
    }

    /// Whether it may move an object.
    pub fn moves(self) -> bool {
        self != Plan::MarkSweep
    }

    /// Whether it collects young objects alone (and so needs write barriers).
    pub fn generational(self) -> bool {
        matches!(self, Plan::StickyImmix | Plan::GenCopy)
    }

    fn selector(self) -> PlanSelector {
        match self {
            Plan::MarkSweep => PlanSelector::MarkSweep,
            Plan::Immix => PlanSelector::Immix,
            Plan::StickyImmix => PlanSelector::StickyImmix,
            Plan::SemiSpace => PlanSelector::SemiSpace,
            Plan::GenCopy => PlanSelector::GenCopy,
        }
    }
}

impl std::str::FromStr for Plan {
    type Err = MmtkError;

    fn from_str(s: &str) -> Result<Plan, MmtkError> {
        Plan::from_name(s)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How large MMTk's heap may grow, and so when it collects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapSize {
    /// A fixed size in bytes: a collection starts when the heap is full, and an
    /// allocation that does not fit after one is out of memory.
    Fixed(usize),
    /// Sized between `min` and `max` bytes as Boehm sizes its heap: it starts at `min`, and
    /// after each full-heap collection its limit grows to 1.5 times what the collection
    /// kept (so the live data fills up to two thirds of it) when that is more, up to
    /// `max`; it never shrinks. An allocation that does not fit in `max` after a
    /// collection is out of memory.
    Dynamic {
        /// The smallest size (where it starts).
        min: usize,
        /// The largest.
        max: usize,
    },
}

impl HeapSize {
    /// The default: [`HeapSize::Dynamic`] from [`HeapSize::DEFAULT_MIN`] up to MMTk's own
    /// default limit, half the machine's physical memory (4 GiB if MMTk cannot tell).
    pub fn default_dynamic() -> HeapSize {
        let max = match *MMTKBuilder::new_no_env_vars().options.gc_trigger {
            GCTriggerSelector::FixedHeapSize(n) | GCTriggerSelector::DynamicHeapSize(_, n) => n,
            GCTriggerSelector::Delegated => 4 << 30,
        };
        HeapSize::Dynamic {
            min: HeapSize::DEFAULT_MIN.min(max),
            max,
        }
    }

    /// Where [`HeapSize::default_dynamic`] starts: 32 MiB.
    pub const DEFAULT_MIN: usize = 32 << 20;

    /// The largest size the heap may reach.
    pub fn max_bytes(self) -> usize {
        match self {
            HeapSize::Fixed(n) => n,
            HeapSize::Dynamic { max, .. } => max,
        }
    }

    fn trigger(self) -> GCTriggerSelector {
        match self {
            HeapSize::Fixed(n) => GCTriggerSelector::FixedHeapSize(n),
            // The binding's own policy (binding::ProportionalTrigger), which reads the
            // bounds `MmtkHeap::new` set.
            HeapSize::Dynamic { .. } => GCTriggerSelector::Delegated,
        }
    }

    /// The heap size a text names (what `LOCUS_GC_HEAP_SIZE` holds): a size
    /// ([`crate::runtime::parse_heap_size`]: bytes, or a number with `K`, `M` or `G`) is
    /// [`HeapSize::Fixed`]; `MIN..MAX` is [`HeapSize::Dynamic`] from `MIN` up to `MAX`
    /// (e.g. `16M..256M`); `MIN..` grows up to [`HeapSize::default_dynamic`]'s limit, and
    /// `..MAX` starts at [`HeapSize::DEFAULT_MIN`] (or `MAX` when smaller).
    ///
    /// # Errors
    /// A sentence naming the part that is wrong: a bound that is not a size, `..` alone, or
    /// a `MIN` above `MAX`.
    pub fn parse(text: &str) -> Result<HeapSize, String> {
        let text = text.trim();
        let Some((lo, hi)) = text.split_once("..") else {
            return crate::runtime::parse_heap_size(text).map(HeapSize::Fixed);
        };
        let (lo, hi) = (lo.trim(), hi.trim());
        let bound = |part: &str, which: &str| {
            crate::runtime::parse_heap_size(part)
                .map_err(|e| format!("the {which} heap size of `{text}`: {e}"))
        };
        let (min, max) = match (lo.is_empty(), hi.is_empty()) {
            (true, true) => {
                return Err(format!(
                    "`{text}` names no heap size (expected N, MIN..MAX, MIN.. or ..MAX, e.g. 16M..256M)"
                ))
            }
            (false, false) => (bound(lo, "smallest")?, bound(hi, "largest")?),
            (false, true) => {
                let min = bound(lo, "smallest")?;
                (min, HeapSize::default_dynamic().max_bytes().max(min))
            }
            (true, false) => {
                let max = bound(hi, "largest")?;
                (HeapSize::DEFAULT_MIN.min(max), max)
            }
        };
        if min > max {
            return Err(format!(
                "`{text}`: the smallest heap size ({min} bytes) is above the largest ({max} bytes)"
            ));
        }
        Ok(HeapSize::Dynamic { min, max })
    }

    /// The heap size [`crate::runtime::HEAP_SIZE_ENV`] (`LOCUS_GC_HEAP_SIZE`) names
    /// ([`HeapSize::parse`]), `None` when it is unset.
    ///
    /// # Errors
    /// A sentence naming the variable and its value when the value is not a heap size.
    pub fn from_env() -> Result<Option<HeapSize>, String> {
        let var = crate::runtime::HEAP_SIZE_ENV;
        match std::env::var_os(var) {
            None => Ok(None),
            Some(value) => {
                let text = value.to_string_lossy();
                HeapSize::parse(&text)
                    .map(Some)
                    .map_err(|e| format!("{var}={text}: {e}"))
            }
        }
    }
}

impl std::str::FromStr for HeapSize {
    type Err = String;

    fn from_str(s: &str) -> Result<HeapSize, String> {
        HeapSize::parse(s)
    }
}

impl fmt::Display for HeapSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeapSize::Fixed(n) => write!(f, "a fixed heap of {n} bytes"),
            HeapSize::Dynamic { min, max } => {
                write!(f, "a heap sized between {min} and {max} bytes")
            }
        }
    }
}

/// How [`MmtkHeap::new`] makes the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmtkOptions {
    /// The plan.
    pub plan: Plan,
    /// The heap's size: fixed, or grown and shrunk by MMTk within bounds.
    pub heap: HeapSize,
    /// GC worker threads.
    pub workers: usize,
    /// Immix and StickyImmix: defragment at every collection (moving objects; for tests).
    pub always_defrag: bool,
}

impl MmtkOptions {
    /// `plan` with a fixed heap of `heap_bytes`, one GC worker per core (at most 4), no
    /// forced defragmentation.
    pub fn new(plan: Plan, heap_bytes: usize) -> MmtkOptions {
        MmtkOptions::with_heap(plan, HeapSize::Fixed(heap_bytes))
    }

    /// [`MmtkOptions::new`] with a heap of `heap`.
    pub fn with_heap(plan: Plan, heap: HeapSize) -> MmtkOptions {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        MmtkOptions {
            plan,
            heap,
            workers: cores.min(4),
            always_defrag: false,
        }
    }
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MmtkError {
    /// No plan of this name.
    UnknownPlan(String),
    /// The process has its MMTk heap already (with this plan).
    AlreadyMade(Plan),
    /// MMTk refused an option (name and value).
    BadOption(&'static str, String),
    /// The allocation is larger than the runtime allows.
    TooLarge {
        /// Pointer fields asked for (0 for a tagged object).
        nptrs: usize,
        /// Raw bytes asked for (a tagged object's size).
        nbytes: usize,
    },
    /// A type tag with [`UNTAGGED_HEADER_FLAG`] set: the MMTk heap reads that bit of the
    /// word before an object as "untagged".
    BadTag {
        /// The tag asked for.
        tag: u64,
    },
    /// The heap is full even after a collection.
    OutOfMemory {
        /// The allocation's bytes, header included.
        bytes: usize,
    },
    /// The process may not map the address space MMTk reserves for its spaces up front
    /// (terabytes, reserved, not used): `ulimit -v` set a limit of this many bytes.
    AddressSpace {
        /// The process's address-space limit (`RLIMIT_AS`), bytes.
        limit: u64,
    },
}

impl fmt::Display for MmtkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MmtkError::UnknownPlan(name) => write!(
                f,
                "unknown MMTk plan `{name}` (expected marksweep, immix, stickyimmix, semispace or gencopy)"
            ),
            MmtkError::AlreadyMade(plan) => {
                write!(f, "this process has an MMTk heap already (plan {plan})")
            }
            MmtkError::BadOption(name, value) => {
                write!(f, "MMTk refused option {name} = {value}")
            }
            MmtkError::TooLarge { nptrs, nbytes } => write!(
                f,
                "allocation too large: {nptrs} pointer fields and {nbytes} bytes"
            ),
            MmtkError::BadTag { tag } => write!(
                f,
                "type tag {tag:#x} has bit 63 set, which marks an untagged object's header on \
                 the MMTk heap (a tag is a type's address or a small number)"
            ),
            MmtkError::OutOfMemory { bytes } => {
                write!(f, "out of memory: MMTk's heap cannot hold {bytes} more bytes")
            }
            MmtkError::AddressSpace { limit } => write!(
                f,
                "MMTk reserves terabytes of address space for its spaces when it starts, and \
                 this process may map only {limit} bytes (ulimit -v); lift the limit or use \
                 the runtime's own collector (locus)"
            ),
        }
    }
}

impl std::error::Error for MmtkError {}

/// The address space MMTk 0.33 reserves on a 64-bit host when it starts: its spaces'
/// ranges (2 TiB each, from 2 TiB up) and their side metadata; a smaller `RLIMIT_AS` makes
/// its start-up fail.
const ADDRESS_SPACE_NEEDED: u64 = 1 << 46;

/// Whether this process may reserve the address space an MMTk heap needs: an error naming
/// the limit when `ulimit -v` (`RLIMIT_AS`) is below it, where [`MmtkHeap::new`] would fail.
pub fn address_space_for_mmtk() -> Result<(), MmtkError> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to write.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0 {
        return Ok(());
    }
    match limit.rlim_cur {
        libc::RLIM_INFINITY => Ok(()),
        cur if cur >= ADDRESS_SPACE_NEEDED => Ok(()),
        cur => Err(MmtkError::AddressSpace { limit: cur }),
    }
}

/// Why [`MmtkHeap::pin`] did not pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinRefused {
    /// No live object holds the address.
    NotAnObject,
    /// The plan moves the object and cannot pin it (SemiSpace, GenCopy).
    Moves(Plan),
}

impl fmt::Display for PinRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinRefused::NotAnObject => f.write_str("no live object holds the address"),
            PinRefused::Moves(plan) => write!(
                f,
                "MMTk plan {plan} moves every object it keeps and cannot pin one (use \
                 mmtk:immix, mmtk:stickyimmix or mmtk:marksweep, which pin)"
            ),
        }
    }
}

/// The most bytes an interior pointer may lie past its object's start for
/// [`object_containing`] to find the object: MMTk searches its valid-object bits
/// backwards that far.
const MAX_INTERIOR_SEARCH: usize = 1 << 20;

/// The live object whose address is `addr` or which holds `addr` (its header excluded),
/// if any.
fn object_containing(addr: usize) -> Option<ObjectReference> {
    if addr == 0 {
        return None;
    }
    if addr.is_multiple_of(OBJECT_ALIGN) {
        if let Some(obj) = memory_manager::is_mmtk_object(address(addr)) {
            return Some(obj);
        }
    }
    if !in_heap(addr) {
        return None;
    }
    memory_manager::find_object_from_internal_pointer(address(addr), MAX_INTERIOR_SEARCH)
}

/// Whether `addr` is in memory MMTk mapped for its spaces.
fn in_heap(addr: usize) -> bool {
    memory_manager::is_mapped_address(address(addr))
}

/// Roots a thread hands over when a collection stops it (see "Roots" in the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootSet {
    /// Innermost frames (`*pgcstack`) of Julia-style frame chains, 0 for an empty chain.
    pub(crate) frames: Vec<usize>,
    /// Addresses of root slots that may be rewritten: each holds null or an object.
    pub(crate) slots: Vec<usize>,
    /// (base slot, derived slot): the base as in `slots`; the derived slot moves with it.
    pub(crate) derived: Vec<(usize, usize)>,
    /// `[start, end)` ranges scanned conservatively.
    pub(crate) regions: Vec<(usize, usize)>,
    /// Statepoint lanes: (base slot, derived slot), the derived slot the base slot itself
    /// when the lane has none. A base slot holding an object's address is as in
    /// [`RootSet::push_derived`]; one holding a pointer into an object keeps that object (pinned
    /// on a pinning plan; on a copying one both slots move by as much as the object did);
    /// one holding an address outside MMTk's memory (a constant object the program made
    /// from a plain pointer) is skipped; anything else in MMTk's memory is a fault.
    pub(crate) statepoint: Vec<(usize, usize)>,
}

/// The contract of every method that adds a root: the collector reads (and on a copying
/// plan writes) the memory a root names, from its own threads, until the collection the
/// set is handed to has ended (for [`MmtkMutator::enter_safe_region`], until
/// [`MmtkMutator::leave_safe_region`] returns). Whatever a collection finds there that
/// breaks the layout (a frame's header, a slot's value) is a recorded fault; that the
/// memory exists is not something it can check.
impl RootSet {
    /// Adds the innermost frame of a frame chain (`*pgcstack`; 0 for an empty chain).
    ///
    /// # Safety
    ///
    /// Until the collection ends (see above), `frame` is 0 or the address of a GC frame
    /// ([`GcFrame`]) whose chain of `prev` links ends in 0 and whose frames and root
    /// words stay readable and writable, touched by no one else.
    pub unsafe fn push_frame(&mut self, frame: usize) {
        self.frames.push(frame);
    }

    /// Adds a root slot the collector may rewrite ([`RootSet::push_slot`]).
    ///
    /// # Safety
    ///
    /// Until the collection ends, `slot` is the address of an aligned, writable word
    /// touched by no one else.
    pub unsafe fn push_slot(&mut self, slot: usize) {
        self.slots.push(slot);
    }

    /// Adds a (base slot, derived slot) pair ([`RootSet::push_derived`]).
    ///
    /// # Safety
    ///
    /// As for [`RootSet::push_slot`], for both slots, until the mutator that handed the
    /// set over has moved the derived slot (after the collection).
    pub unsafe fn push_derived(&mut self, base: usize, derived: usize) {
        self.derived.push((base, derived));
    }

    /// Adds `[start, end)`, scanned conservatively ([`RootSet::push_region`]).
    ///
    /// # Safety
    ///
    /// Until the collection ends, every aligned word of the range is readable and, on a
    /// copying plan, writable, touched by no one else.
    pub unsafe fn push_region(&mut self, start: usize, end: usize) {
        self.regions.push((start, end));
    }

    /// Adds a statepoint lane (base slot, derived slot; the derived slot the base slot
    /// itself when the lane has none; see [`RootSet::push_statepoint`]).
    ///
    /// # Safety
    ///
    /// As for [`RootSet::push_derived`].
    pub unsafe fn push_statepoint(&mut self, base: usize, derived: usize) {
        self.statepoint.push((base, derived));
    }

    /// Empties it, keeping its capacity.
    pub fn clear(&mut self) {
        self.frames.clear();
        self.slots.clear();
        self.derived.clear();
        self.regions.clear();
        self.statepoint.clear();
    }
}

/// Counters of the heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmtkStats {
    /// Collections finished.
    pub collections: u64,
    /// Objects allocated (tagged ones included).
    pub objects_allocated: u64,
    /// Bytes allocated, headers included.
    pub bytes_allocated: u64,
    /// Bytes MMTk counts as used now.
    pub used_bytes: usize,
    /// The heap's size in bytes.
    pub total_bytes: usize,
    /// Faults recorded.
    pub faults: u64,
    /// Objects copied by collections (SemiSpace, GenCopy, Immix's defragmentation,
    /// StickyImmix's nursery).
    pub objects_moved: u64,
    /// Stop-the-world pauses measured: from when a collection starts stopping the
    /// mutators (MMTk's `stop_all_mutators`) to when it lets them run
    /// (`resume_mutators`), waiting for every thread to park included.
    pub pauses: u64,
    /// The median pause, nanoseconds (of the first million pauses); 0 before any.
    pub pause_median_ns: u64,
    /// The longest pause, nanoseconds.
    pub pause_max_ns: u64,
    /// All pauses together, nanoseconds.
    pub pause_total_ns: u64,
}

impl fmt::Display for MmtkStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "collections: {}", self.collections)?;
        writeln!(f, "objects allocated: {}", self.objects_allocated)?;
        writeln!(f, "bytes allocated: {}", self.bytes_allocated)?;
        writeln!(f, "bytes used: {} of {}", self.used_bytes, self.total_bytes)?;
        writeln!(f, "faults: {}", self.faults)?;
        writeln!(f, "objects moved: {}", self.objects_moved)?;
        writeln!(f, "pauses: {}", self.pauses)?;
        writeln!(f, "pause median: {} ns", self.pause_median_ns)?;
        writeln!(f, "pause max: {} ns", self.pause_max_ns)?;
        writeln!(f, "pause total: {} ns", self.pause_total_ns)
    }
}

/// Who is bound and whether a collection runs.
struct SyncState {
    /// Addresses of registered [`MutatorRecord`]s.
    mutators: Vec<usize>,
    /// Mutators blocked for the collection, their roots published.
    parked: usize,
    /// Collections ended.
    epoch: u64,
    in_gc: bool,
    /// When the running collection began stopping the mutators.
    stopped_at: Option<std::time::Instant>,
    /// The stop-the-world pauses (stop_all_mutators to resume_mutators), nanoseconds.
    pauses: Pauses,
}

/// The process's MMTk heap and what the binding keeps beside it.
struct Instance {
    mmtk: &'static MMTK<Locus>,
    plan: Plan,
    heap: HeapSize,
    sync: Mutex<SyncState>,
    cond: Condvar,
    /// Set while a mutator of [`MmtkHeap::bind_sole_mutator`] is bound: no other may bind.
    sole: AtomicBool,
    /// Set from when a collection starts stopping the mutators until it resumes them:
    /// what a safepoint poll reads ([`MmtkHeap::collection_pending`]).
    pending: AtomicBool,
    /// [`SyncState::epoch`], readable without the lock.
    epoch: AtomicU64,
    /// Tagged objects (address, serial) not yet seen dead: their words are pinned before
    /// each trace on a pinning plan.
    tagged: Mutex<Vec<(usize, u64)>>,
    /// [`MmtkHeap::pin`] counts.
    pins: Mutex<HashMap<usize, u32>>,
    /// On a plan that cannot pin: the cells whose slots hand [`Instance::pins`] to the
    /// running collection (see `scan_vm_specific_roots`).
    pin_cells: Mutex<Box<[usize]>>,
    /// Objects pinned for the running collection only.
    temp_pins: Mutex<Vec<ObjectReference>>,
    faults: Mutex<Vec<String>>,
    fault_count: AtomicU64,
    /// Faults [`MmtkHeap::take_faults`] has handed out: equal to `fault_count` when
    /// there is nothing to take (checked without the lock, at every allocation).
    faults_taken: AtomicU64,
    /// The next tagged object's serial.
    next_serial: AtomicU64,
    /// Objects and bytes allocated by mutators that have been dropped (the bound ones
    /// count their own, in their records).
    retired_objects: AtomicU64,
    retired_bytes: AtomicU64,
    collections: AtomicU64,
    objects_moved: AtomicU64,
    workers_spawned: AtomicUsize,
    out_of_memory: AtomicBool,
    /// Larger allocations go to the large object space.
    max_default: usize,
    /// MMTk's valid-object bit table (its address).
    vo_base: usize,
    max_nonmoving: usize,
}

// MMTk's binding is reached through static functions only: the one unavoidable global.
static INSTANCE: OnceLock<Instance> = OnceLock::new();
/// Held while [`MmtkHeap::new`] makes the heap: MMTk panics when two threads initialize it
/// at once (both quarantine the same address range), so the second must wait and find
/// the first's.
static MAKING: Mutex<()> = Mutex::new(());

fn instance() -> &'static Instance {
    match INSTANCE.get() {
        Some(inst) => inst,
        None => fatal("MMTk called the binding before the heap was made"),
    }
}

/// `a` as an MMTk address.
fn address(a: usize) -> Address {
    // SAFETY: an `Address` is a plain number; MMTk marks making one unsafe because using it
    // as a pointer is, and every use here reads or writes only through checked objects,
    // slots the threads vouch for, or MMTk's own checked look-ups.
    unsafe { Address::from_usize(a) }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks aborts (worker threads), so poison is
    // never observed with half-done state; take the data regardless.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends the process with one `locus: mmtk: ...` line: a broken invariant of the binding,
/// where MMTk offers no way to return an error.
fn fatal(message: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "locus: mmtk: {message}");
    std::process::abort()
}

fn record_fault(inst: &Instance, fault: String) {
    let mut faults = lock(&inst.faults);
    faults.push(fault);
    inst.fault_count.fetch_add(1, Ordering::Release);
}

/// Whether the kernel has transparent huge pages (Linux built with them): MMTk's
/// `madvise(MADV_HUGEPAGE)` fails otherwise, and MMTk takes a failed madvise for a failed
/// mapping (out of memory).
fn transparent_hugepages_available() -> bool {
    cfg!(target_os = "linux") && Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
}

/// Zeroes a fresh allocation where MMTk may hand out old objects' memory: MarkSweep's
/// reused cells, and the spaces other than a bump pointer's (zeroed as the runtime's heap
/// does). Small ones (most) with word stores of its own,
/// without a call into libc.
///
/// # Safety
/// `[start, start + bytes)` must be writable, `start` 8-byte aligned, `bytes` a multiple
/// of 8.
#[inline]
unsafe fn zero(start: usize, bytes: usize) {
    if bytes > 128 {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, bytes) };
        return;
    }
    let mut at = start;
    while at < start + bytes {
        // Volatile so that LLVM keeps the stores rather than making them a memset call.
        // SAFETY: the caller's promise.
        unsafe { (at as *mut u64).write_volatile(0) };
        at += 8;
    }
}

/// Sets the valid-object (VO) bit of `obj` as MMTk's `set_vo_bit` does, without its
/// compare-and-swap loop: one bit per 8 bytes of heap, the lowest bit of a metadata byte
/// for the lowest address (MMTk's contiguous global side metadata, 64-bit). The bits of
/// one byte cover 64 bytes of heap, all in one allocation buffer (whole 256-byte Immix
/// lines, whole copy-space blocks), which only its thread writes while it runs (the
/// plans here stop the world): a plain load and store of the byte, no locked `or`.
///
/// # Safety
/// `base` must be MMTk's VO bit table and `obj` an object address in one of this thread's
/// allocation buffers.
#[inline]
unsafe fn set_vo_bit(base: usize, obj: usize) {
    let byte = base + (obj >> 6);
    // SAFETY: the caller's promise: MMTk maps the table for its heap.
    let byte = unsafe { &*(byte as *const AtomicU8) };
    let bit = 1 << ((obj >> 3) & 7);
    byte.store(byte.load(Ordering::Relaxed) | bit, Ordering::Relaxed);
}

/// The bump pointer of `record`'s allocator for the default space, when it has one.
fn bump_pointer_of(inst: &Instance, record: &MutatorRecord) -> *mut BumpPointer {
    let selector = memory_manager::get_allocator_mapping(inst.mmtk, AllocationSemantics::Default);
    // SAFETY: set at binding, and this thread alone uses it.
    let Some(m) = (unsafe { (*record.mutator.get()).as_deref_mut() }) else {
        return std::ptr::null_mut();
    };
    match selector {
        // SAFETY: the selector's allocator is of this type (MMTk's mapping says so).
        AllocatorSelector::Immix(_) => unsafe {
            &mut m
                .allocator_impl_mut::<ImmixAllocator<Locus>>(selector)
                .bump_pointer
        },
        // SAFETY: as above.
        AllocatorSelector::BumpPointer(_) => unsafe {
            &mut m
                .allocator_impl_mut::<BumpAllocator<Locus>>(selector)
                .bump_pointer
        },
        _ => std::ptr::null_mut(),
    }
}

/// Walks a frame chain from `first`, appending (frame number, root number, slot address)
/// for every root slot; stops at the first broken frame with a message.
fn walk_frames(first: usize, out: &mut Vec<(usize, usize, usize)>) -> Result<(), String> {
    let mut seen = HashSet::new();
    let mut frame = first;
    let mut index = 0;
    while frame != 0 {
        let broken = |problem: &str| format!("frame #{index} at {frame:#x}: {problem}");
        if !frame.is_multiple_of(8) {
            return Err(broken("not 8-byte aligned"));
        }
        if index >= MAX_FRAMES {
            return Err(broken("the chain has too many frames"));
        }
        if !seen.insert(frame) {
            return Err(broken("linked twice (the chain loops)"));
        }
        // SAFETY: the thread's provider vouches that its chain's frames are readable: the
        // header word and `prev` (`GcFrame`'s two words).
        let header = unsafe { layout::read_word(frame) };
        // SAFETY: as above.
        let prev = unsafe { layout::read_word(frame + 8) };
        if header & ROOT_FLAGS_MASK != 0 {
            return Err(broken("flag bits set in its header word"));
        }
        let nroots = header >> 2;
        if nroots > MAX_FRAME_ROOTS {
            return Err(broken("too many roots"));
        }
        for root in 0..nroots {
            out.push((index, root, frame + GcFrame::root_offset(root)));
        }
        frame = prev;
        index += 1;
    }
    Ok(())
}

/// The process's MMTk heap (see the module docs). A handle: copies name the same heap.
#[derive(Clone, Copy)]
pub struct MmtkHeap {
    inst: &'static Instance,
}

impl fmt::Debug for MmtkHeap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmtkHeap")
            .field("plan", &self.inst.plan)
            .finish_non_exhaustive()
    }
}

impl MmtkHeap {
    /// Makes the process's MMTk heap and starts its GC workers; fails when the process
    /// has one already ([`MmtkError::AlreadyMade`]) or MMTk refuses an option.
    pub fn new(options: MmtkOptions) -> Result<MmtkHeap, MmtkError> {
        let _making = lock(&MAKING);
        if let Some(inst) = INSTANCE.get() {
            return Err(MmtkError::AlreadyMade(inst.plan));
        }
        // MMTk panics when it cannot reserve its spaces: refuse first.
        address_space_for_mmtk()?;
        if let HeapSize::Dynamic { min, max } = options.heap {
            // Only the first heap's bounds count, and a second heap is refused below.
            let _ = binding::TRIGGER_BOUNDS.set((min, max));
        }
        let mut builder = MMTKBuilder::new_no_env_vars();
        let o = &mut builder.options;
        let set = [
            ("plan", o.plan.set(options.plan.selector())),
            ("gc_trigger", o.gc_trigger.set(options.heap.trigger())),
            ("threads", o.threads.set(options.workers.max(1))),
            ("no_finalizer", o.no_finalizer.set(true)),
            ("no_reference_types", o.no_reference_types.set(true)),
            // Huge pages for the spaces (madvise; the kernel's THP mode decides): fewer page
            // faults when MMTk zeroes a block it hands out, fewer TLB misses in tracing.
            // GCBench on Immix at 64 MiB: 13% less CPU, the same peak memory.
            (
                "transparent_hugepages",
                o.transparent_hugepages
                    .set(transparent_hugepages_available()),
            ),
            (
                "immix_always_defrag",
                o.immix_always_defrag.set(options.always_defrag),
            ),
            (
                "immix_defrag_every_block",
                o.immix_defrag_every_block.set(options.always_defrag),
            ),
        ];
        if let Some((name, _)) = set.iter().find(|(_, ok)| !ok) {
            return Err(MmtkError::BadOption(name, format!("{options:?}")));
        }
        vm_layout::configure(&mut builder);
        let mmtk: &'static MMTK<Locus> = Box::leak(memory_manager::mmtk_init(&builder));
        let constraints = mmtk.get_plan().constraints();
        let max_default = constraints.max_non_los_default_alloc_bytes;
        let inst = Instance {
            mmtk,
            plan: options.plan,
            heap: options.heap,
            sync: Mutex::new(SyncState {
                mutators: Vec::new(),
                parked: 0,
                epoch: 0,
                in_gc: false,
                stopped_at: None,
                pauses: Pauses::default(),
            }),
            cond: Condvar::new(),
            sole: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            tagged: Mutex::new(Vec::new()),
            pins: Mutex::new(HashMap::new()),
            pin_cells: Mutex::new(Box::default()),
            temp_pins: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            fault_count: AtomicU64::new(0),
            faults_taken: AtomicU64::new(0),
            next_serial: AtomicU64::new(1),
            retired_objects: AtomicU64::new(0),
            retired_bytes: AtomicU64::new(0),
            collections: AtomicU64::new(0),
            objects_moved: AtomicU64::new(0),
            workers_spawned: AtomicUsize::new(0),
            out_of_memory: AtomicBool::new(false),
            max_default,
            vo_base: mmtk::util::metadata::vo_bit::vo_bit_side_metadata_addr().as_usize(),
            // The non-moving space is an Immix space: half a 32 KiB block at most.
            max_nonmoving: max_default.min(16 << 10),
        };
        if INSTANCE.set(inst).is_err() {
            // Another thread made it meanwhile; this MMTk instance stays unused.
            return Err(MmtkError::AlreadyMade(instance().plan));
        }
        let inst = instance();
        memory_manager::initialize_collection(inst.mmtk, mmtk::util::VMThread::UNINITIALIZED);
        Ok(MmtkHeap { inst })
    }

    /// The process's heap, if [`MmtkHeap::new`] made it.
    pub fn get() -> Option<MmtkHeap> {
        INSTANCE.get().map(|inst| MmtkHeap { inst })
    }

    /// Its plan.
    pub fn plan(&self) -> Plan {
        self.inst.plan
    }

    /// Whether a collection is stopping the mutators or running: a thread that reaches a
    /// safepoint then [`MmtkMutator::park`]s (one relaxed load: cheap enough for every
    /// loop back edge).
    pub fn collection_pending(&self) -> bool {
        self.inst.pending.load(Ordering::Relaxed)
    }

    /// Its size, as [`MmtkOptions::heap`] asked.
    pub fn heap_size(&self) -> HeapSize {
        self.inst.heap
    }

    /// Binds the calling thread as a mutator; waits while a collection runs.
    pub fn bind_mutator(&self) -> MmtkMutator {
        let record = Box::new(MutatorRecord {
            mutator: std::cell::UnsafeCell::new(None),
            roots: std::cell::UnsafeCell::new(None),
            published: std::cell::UnsafeCell::new(Default::default()),
            epoch_before: AtomicU64::new(0),
            objects: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        });
        let mutator = memory_manager::bind_mutator(self.inst.mmtk, record.tls());
        // SAFETY: not registered yet: no one else sees the record.
        unsafe { *record.mutator.get() = Some(mutator) };
        let mut sync = lock(&self.inst.sync);
        while sync.in_gc {
            sync = self
                .inst
                .cond
                .wait(sync)
                .unwrap_or_else(PoisonError::into_inner);
        }
        sync.mutators
            .push(&*record as *const MutatorRecord as usize);
        drop(sync);
        let bump = bump_pointer_of(self.inst, &record);
        MmtkMutator {
            record,
            heap: *self,
            bump,
            sole: false,
            in_safe: false,
            _not_send: PhantomData,
        }
    }

    /// [`MmtkHeap::bind_mutator`] for a host that wants one mutator thread only: `None`
    /// when a mutator is bound already; none other can bind until this one is dropped.
    pub fn bind_sole_mutator(&self) -> Option<MmtkMutator> {
        if self
            .inst
            .sole
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return None;
        }
        if !lock(&self.inst.sync).mutators.is_empty() {
            self.inst.sole.store(false, Ordering::SeqCst);
            return None;
        }
        let mut m = self.bind_mutator();
        m.sole = true;
        Some(m)
    }

    /// Whether `addr` is the address of an object of this heap that is live (allocated and
    /// not freed by a collection that has ended).
    pub fn is_object(&self, addr: usize) -> bool {
        addr.is_multiple_of(OBJECT_ALIGN)
            && addr != 0
            && memory_manager::is_mmtk_object(address(addr)).is_some()
    }

    /// The bytes a read may cover from `addr` on, when it is the address of a live object
    /// of this heap: an untagged object's body (`8 * nptrs + nbytes`), `usize::MAX` for a
    /// tagged one (its size is the program's business); `None` for anything else.
    pub(crate) fn readable_bytes(&self, addr: usize) -> Option<usize> {
        if !self.is_object(addr) {
            return None;
        }
        // SAFETY: a live object of this heap has its header before it.
        Some(unsafe { layout::untagged_body(addr) }.unwrap_or(usize::MAX))
    }

    /// Pins the object holding `addr` (its address, or a place inside it) once more: a
    /// root that does not move until [`MmtkHeap::unpin`]. Never collects.
    ///
    /// # Errors
    /// [`PinRefused::NotAnObject`] when no live object holds `addr`, and
    /// [`PinRefused::Moves`] when the plan cannot pin (SemiSpace, GenCopy) and the object
    /// is in a space that moves (an object in the large object space, which never moves,
    /// can be pinned under every plan). Nothing is pinned then.
    pub fn pin(&self, addr: usize) -> Result<usize, PinRefused> {
        let obj = object_containing(addr).ok_or(PinRefused::NotAnObject)?;
        let movable = obj.is_movable();
        if movable && !self.inst.plan.pins() {
            return Err(PinRefused::Moves(self.inst.plan));
        }
        let at = obj.to_raw_address().as_usize();
        let mut pins = lock(&self.inst.pins);
        let count = pins.entry(at).or_insert(0);
        *count += 1;
        if *count == 1 && movable {
            memory_manager::pin_object(obj);
        }
        Ok(at)
    }

    /// Undoes one [`MmtkHeap::pin`] of the object holding `addr`; false when it was not
    /// pinned. Never collects.
    pub fn unpin(&self, addr: usize) -> bool {
        let Some(obj) = object_containing(addr) else {
            return false;
        };
        let at = obj.to_raw_address().as_usize();
        let mut pins = lock(&self.inst.pins);
        let Some(count) = pins.get_mut(&at) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            pins.remove(&at);
            if obj.is_movable() {
                memory_manager::unpin_object(obj);
            }
        }
        true
    }

    /// Faults recorded since the last call (broken frames, roots that are not objects,
    /// running out of memory), one line each.
    pub fn take_faults(&self) -> Vec<String> {
        let inst = self.inst;
        // The common case, nothing recorded, without the lock (the runtime asks after
        // every allocation). A fault a worker records during this thread's collection is
        // seen: the thread resumed through the heap's lock after the worker released it.
        if inst.fault_count.load(Ordering::Acquire) == inst.faults_taken.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let taken = std::mem::take(&mut *lock(&inst.faults));
        inst.faults_taken
            .fetch_add(taken.len() as u64, Ordering::Relaxed);
        taken
    }

    /// Collections finished ([`MmtkStats::collections`], without the rest of
    /// [`MmtkHeap::stats`]: no lock, no median).
    pub fn collections(&self) -> u64 {
        self.inst.collections.load(Ordering::Relaxed)
    }

    /// The counters.
    pub fn stats(&self) -> MmtkStats {
        let i = self.inst;
        let sync = lock(&i.sync);
        let (mut objects, mut bytes) = (
            i.retired_objects.load(Ordering::Relaxed),
            i.retired_bytes.load(Ordering::Relaxed),
        );
        for &addr in &sync.mutators {
            // SAFETY: registered records are live while the lock is held (a mutator
            // unregisters under it before its record goes).
            let rec = unsafe { &*(addr as *const MutatorRecord) };
            objects += rec.objects.load(Ordering::Relaxed);
            bytes += rec.bytes.load(Ordering::Relaxed);
        }
        MmtkStats {
            collections: i.collections.load(Ordering::Relaxed),
            objects_allocated: objects,
            bytes_allocated: bytes,
            used_bytes: memory_manager::used_bytes(i.mmtk),
            total_bytes: memory_manager::total_bytes(i.mmtk),
            faults: i.fault_count.load(Ordering::Relaxed),
            objects_moved: i.objects_moved.load(Ordering::Relaxed),
            pauses: sync.pauses.count(),
            pause_median_ns: sync.pauses.median_ns(),
            pause_max_ns: sync.pauses.max_ns(),
            pause_total_ns: sync.pauses.total_ns(),
        }
    }
}

/// A bound mutator: the calling thread's allocation context. Not `Send`: it belongs to
/// the thread that bound it. Dropping it unbinds the thread.
pub struct MmtkMutator {
    record: Box<MutatorRecord>,
    heap: MmtkHeap,
    /// The bump pointer of the allocator of the default space when it is one (Immix,
    /// StickyImmix, SemiSpace, GenCopy; null for MarkSweep's free lists): the allocation
    /// fast path, [`MmtkMutator::try_alloc`]. It lives in the boxed MMTk mutator, as long
    /// as this.
    bump: *mut BumpPointer,
    /// Bound by [`MmtkHeap::bind_sole_mutator`].
    sole: bool,
    /// In a safe region ([`MmtkMutator::enter_safe_region`]): counted as parked.
    in_safe: bool,
    _not_send: PhantomData<*mut ()>,
}

impl fmt::Debug for MmtkMutator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmtkMutator")
            .field("record", &(&*self.record as *const MutatorRecord))
            .finish()
    }
}

impl MmtkMutator {
    /// The heap it allocates in.
    pub fn heap(&self) -> MmtkHeap {
        self.heap
    }

    /// Runs `body` with `roots` as the thread's root provider: a collection that starts
    /// meanwhile calls it (on this thread) before the thread parks.
    fn with_roots<R>(
        &mut self,
        roots: &mut dyn FnMut(&mut RootSet),
        body: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let provider: *mut (dyn FnMut(&mut RootSet) + '_) = roots;
        // SAFETY: only the lifetime is erased; the pointer is cleared below, before
        // `roots`' borrow ends, and used only on this thread meanwhile.
        let provider: *mut (dyn FnMut(&mut RootSet) + 'static) =
            unsafe { std::mem::transmute(provider) };
        // SAFETY: only this thread uses its record's provider.
        unsafe { *self.record.roots.get() = Some(provider) };
        // A collection this call asks for is one that ends after this.
        self.record.epoch_before.store(
            self.heap.inst.epoch.load(Ordering::Acquire),
            Ordering::Relaxed,
        );
        let r = body(self);
        // SAFETY: as above.
        unsafe { *self.record.roots.get() = None };
        r
    }

    fn mutator(&mut self) -> &mut mmtk::Mutator<Locus> {
        // SAFETY: set at binding; this thread is running, so no worker uses it.
        match unsafe { (*self.record.mutator.get()).as_deref_mut() } {
            Some(m) => m,
            None => fatal("an MMTk mutator was used before it was bound"),
        }
    }

    /// Allocates `bytes` (header included), zeroed, and returns the allocation's start.
    fn alloc_raw(
        &mut self,
        bytes: usize,
        offset: usize,
        semantics: AllocationSemantics,
        roots: &mut dyn FnMut(&mut RootSet),
    ) -> Result<usize, MmtkError> {
        let start = self.with_roots(roots, |me| {
            memory_manager::alloc(me.mutator(), bytes, OBJECT_ALIGN, offset, semantics)
        });
        if start.is_zero() {
            return Err(MmtkError::OutOfMemory { bytes });
        }
        // A bump pointer's space hands out memory MMTk zeroed (see
        // `fast_path::bump_untagged`); MarkSweep's cells and the other spaces may hold old
        // objects.
        if self.bump.is_null() || semantics != AllocationSemantics::Default {
            // SAFETY: MMTk gave us `bytes` bytes at `start`.
            unsafe { zero(start.as_usize(), bytes) };
        }
        self.count(bytes);
        Ok(start.as_usize())
    }

    fn finish(&mut self, obj: usize, bytes: usize, semantics: AllocationSemantics) {
        // SAFETY: `obj` is inside a fresh allocation, so not zero.
        let r = unsafe { ObjectReference::from_raw_address_unchecked(address(obj)) };
        memory_manager::post_alloc(self.mutator(), r, bytes, semantics);
    }

    /// [`MmtkMutator::alloc`] when the object fits in the thread's allocation buffer (the
    /// common case on the bump-pointer plans, all but MarkSweep): never collects, so it
    /// needs no roots; `None` when the object must take the slow path (a new buffer, the
    /// large object space, a collection, an error), which [`MmtkMutator::alloc`] takes.
    #[inline]
    pub fn try_alloc(&mut self, nptrs: usize, nbytes: usize) -> Option<usize> {
        if self.bump.is_null() {
            return None;
        }
        // SAFETY: `bump` points into the boxed MMTk mutator this owns, which nothing else
        // touches while this thread runs (GC workers only while it is parked).
        let bp = unsafe { &mut *self.bump };
        let inst = self.heap.inst;
        // SAFETY: as above, and `vo_base` is this heap's table.
        let (obj, bytes) =
            unsafe { fast_path::bump_untagged(bp, inst.vo_base, nptrs, nbytes, inst.max_default) }?;
        self.count(bytes);
        Some(obj)
    }

    /// Counts an allocation of `bytes` (only this thread writes its counters: no
    /// read-modify-write needed).
    #[inline]
    fn count(&self, bytes: usize) {
        let rec = &self.record;
        rec.objects
            .store(rec.objects.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        rec.bytes.store(
            rec.bytes.load(Ordering::Relaxed) + bytes as u64,
            Ordering::Relaxed,
        );
    }

    /// Allocates an object of the runtime's layout with `nptrs` null pointer fields and
    /// `nbytes` zero raw bytes and returns its address; may collect first (then `roots` is
    /// asked for this thread's roots).
    pub fn alloc(
        &mut self,
        nptrs: usize,
        nbytes: usize,
        roots: &mut dyn FnMut(&mut RootSet),
    ) -> Result<usize, MmtkError> {
        if let Some(obj) = self.try_alloc(nptrs, nbytes) {
            return Ok(obj);
        }
        let bytes =
            layout::untagged_size(nptrs, nbytes).ok_or(MmtkError::TooLarge { nptrs, nbytes })?;
        let semantics = if bytes > self.heap.inst.max_default {
            AllocationSemantics::Los
        } else {
            AllocationSemantics::Default
        };
        let start = self.alloc_raw(bytes, layout::UNTAGGED_OFFSET, semantics, roots)?;
        // SAFETY: a fresh allocation of `untagged_size(nptrs, nbytes)` bytes, 8 past a
        // multiple of 16.
        let obj = unsafe { layout::write_untagged(start, nptrs, nbytes) };
        self.finish(obj, bytes, semantics);
        Ok(obj)
    }

    /// Allocates a tagged object of `size` zero bytes with type tag `tag` (in the word
    /// before it) and returns its address; may collect first. It never moves and is
    /// scanned conservatively (see "Tagged objects" in the module docs).
    pub fn alloc_tagged(
        &mut self,
        size: usize,
        tag: u64,
        roots: &mut dyn FnMut(&mut RootSet),
    ) -> Result<usize, MmtkError> {
        if tag & UNTAGGED_HEADER_FLAG != 0 {
            return Err(MmtkError::BadTag { tag });
        }
        let bytes = layout::tagged_size(size).ok_or(MmtkError::TooLarge {
            nptrs: 0,
            nbytes: size,
        })?;
        let semantics = match self.heap.inst.plan {
            // Its default space never moves.
            Plan::MarkSweep => AllocationSemantics::Default,
            Plan::Immix if bytes <= self.heap.inst.max_nonmoving => AllocationSemantics::NonMoving,
            // MMTk 0.33's non-moving Immix space fails under these plans (a trace kind it
            // does not support under MarkSweep and SemiSpace, lost objects under the
            // generational ones): the large object space, page-grained but never moving.
            _ => AllocationSemantics::Los,
        };
        let start = self.alloc_raw(bytes, 0, semantics, roots)?;
        let serial = self.heap.inst.next_serial.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a fresh allocation of `tagged_size(size)` bytes.
        let obj = unsafe { layout::write_tagged(start, bytes, serial, tag) };
        self.finish(obj, bytes, semantics);
        lock(&self.heap.inst.tagged).push((obj, serial));
        Ok(obj)
    }

    /// Asks for a collection now and waits for it to end (`roots` gives this thread's).
    pub fn collect(&mut self, roots: &mut dyn FnMut(&mut RootSet)) {
        let mmtk = self.heap.inst.mmtk;
        let tls = self.record.tls();
        self.with_roots(roots, |_| {
            memory_manager::handle_user_collection_request(mmtk, tls);
        });
    }

    /// Parks this thread for a collection another thread started, handing over `roots`,
    /// and returns when it ends: what a safepoint poll calls when a collection is
    /// requested (MMTk's `block_for_gc`, for a thread that did not trigger it).
    /// Does nothing when no collection is pending or running.
    pub fn park(&mut self, roots: &mut dyn FnMut(&mut RootSet)) {
        if !self.heap.collection_pending() {
            return;
        }
        let inst = self.heap.inst;
        self.with_roots(roots, |me| binding::park(inst, &me.record, None));
    }

    /// Enters a safe region: the thread's roots are handed over now (`roots` is called
    /// once, here), and until [`MmtkMutator::leave_safe_region`] the thread counts as
    /// parked, so collections run without waiting for it. The thread must not touch what
    /// it handed over meanwhile, nor allocate. Entering twice is entering once.
    pub fn enter_safe_region(&mut self, roots: &mut dyn FnMut(&mut RootSet)) {
        if self.in_safe {
            return;
        }
        let inst = self.heap.inst;
        self.with_roots(roots, |me| binding::publish(inst, &me.record));
        let mut sync = lock(&inst.sync);
        sync.parked += 1;
        inst.cond.notify_all();
        self.in_safe = true;
    }

    /// Leaves the safe region, first waiting for a running collection to end; moves the
    /// derived slots it handed over by as much as their bases moved meanwhile. Outside a
    /// safe region, does nothing.
    pub fn leave_safe_region(&mut self) {
        if !self.in_safe {
            return;
        }
        let inst = self.heap.inst;
        let mut sync = lock(&inst.sync);
        while sync.in_gc {
            sync = inst.cond.wait(sync).unwrap_or_else(PoisonError::into_inner);
        }
        sync.parked -= 1;
        drop(sync);
        self.in_safe = false;
        binding::finish_published(&self.record);
    }

    /// Whether it is in a safe region.
    pub fn in_safe_region(&self) -> bool {
        self.in_safe
    }

    /// The write barrier after storing a pointer into `parent` (any of its fields, or a
    /// word of a tagged object): generational plans remember `parent`. Never collects.
    ///
    /// # Safety
    ///
    /// `parent` is 0 or the address of a live object of this heap (one
    /// [`MmtkMutator::alloc`] or [`MmtkMutator::alloc_tagged`] returned, kept by the
    /// collections since): MMTk reads and writes its metadata, and the next collection
    /// traces it.
    pub unsafe fn write_barrier(&mut self, parent: usize) {
        if !self.heap.inst.plan.generational() || parent == 0 {
            return;
        }
        let Some(src) = ObjectReference::from_raw_address(address(parent)) else {
            return;
        };
        let slot = SimpleSlot::from_address(address(parent));
        memory_manager::object_reference_write_post(self.mutator(), src, slot, None);
    }

    /// The write barrier after storing a pointer at `addr`, an address inside an object
    /// (or its address) or anywhere else: generational plans remember the live object
    /// holding `addr`; an address in no object of this heap (the stack, a global, C
    /// memory) is no barrier. Never collects.
    pub fn write_barrier_interior(&mut self, addr: usize) {
        if !self.heap.inst.plan.generational() {
            return;
        }
        if let Some(obj) = object_containing(addr) {
            // SAFETY: a live object of this heap (MMTk's valid-object bits say so).
            unsafe { self.write_barrier(obj.to_raw_address().as_usize()) };
        }
    }

    /// Stores `value` (null or an object's address) into pointer field `index` of `obj`
    /// and runs the write barrier.
    ///
    /// # Safety
    /// `obj` must be a live untagged object of this heap with more than `index` fields.
    pub unsafe fn write_field(&mut self, obj: usize, index: usize, value: usize) {
        // SAFETY: the caller's promise.
        unsafe { ((obj + 8 * index) as *mut usize).write(value) };
        // SAFETY: a live object of this heap (the caller's promise).
        unsafe { self.write_barrier(obj) };
    }
}

impl Drop for MmtkMutator {
    fn drop(&mut self) {
        let addr = &*self.record as *const MutatorRecord as usize;
        let inst = self.heap.inst;
        let mut sync = lock(&inst.sync);
        // A collection that is stopping the world waits for this mutator too: counted as
        // parked meanwhile (with nothing published: its thread is leaving), or the two
        // wait for each other (a thread detaching, or exiting through `exit`, while another
        // thread's collection stops the world).
        if !self.in_safe {
            sync.parked += 1;
            inst.cond.notify_all();
        }
        while sync.in_gc {
            sync = inst.cond.wait(sync).unwrap_or_else(PoisonError::into_inner);
        }
        sync.parked -= 1;
        sync.mutators.retain(|&a| a != addr);
        // Its counts outlive it (under the lock, so that `stats` counts them once).
        inst.retired_objects.fetch_add(
            self.record.objects.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        inst.retired_bytes
            .fetch_add(self.record.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
        inst.cond.notify_all();
        drop(sync);
        memory_manager::destroy_mutator(self.mutator());
        if self.sole {
            inst.sole.store(false, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{lock, MmtkError, MmtkHeap, MmtkOptions, Plan};
    use std::sync::{mpsc, Mutex};
    use std::time::Duration;

    /// Held by each unit test that uses the process's MMTk heap: the first makes it and
    /// the others find it (the runtime refuses to make a second one when two make it at
    /// once).
    pub(crate) static ONE_HEAP_USER: Mutex<()> = Mutex::new(());

    /// A mutator dropped (its thread detaching or exiting) while another thread's
    /// collection stops the world: the collection waits for it, so it must count as
    /// parked while it waits for the collection (both waited for ever before).
    #[test]
    fn a_mutator_dropped_while_the_world_stops_does_not_hold_the_collection() {
        let _one = lock(&ONE_HEAP_USER);
        // The process has one heap: another test may have made it.
        let heap = match MmtkHeap::new(MmtkOptions::new(Plan::Immix, 8 << 20)) {
            Ok(heap) => heap,
            Err(MmtkError::AlreadyMade(_)) => match MmtkHeap::get() {
                Some(heap) => heap,
                None => panic!("a heap was made but MmtkHeap::get has none"),
            },
            Err(e) => panic!("{e}"),
        };
        let (bound_tx, bound_rx) = mpsc::channel();
        let (drop_tx, drop_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        // A running mutator (never parks), dropped when told.
        std::thread::spawn(move || {
            let leaving = heap.bind_mutator();
            let _ = bound_tx.send(());
            let _ = drop_rx.recv();
            drop(leaving);
            let _ = done_tx.send("dropped");
        });
        bound_rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("the leaving mutator did not bind: {e}"));
        let collector_done = collect_on_another_thread(heap);
        // Drop the running mutator once the collection is stopping the world.
        let waited = std::time::Instant::now();
        while !heap.collection_pending()
            && !collector_done.1.load(std::sync::atomic::Ordering::SeqCst)
        {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "no collection started"
            );
            std::thread::yield_now();
        }
        let _ = drop_tx.send(());
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("the mutator's drop waited for the collection: {e}"));
        collector_done
            .0
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("the collection waited for the dropped mutator: {e}"));
    }

    /// Starts a thread that binds a mutator and collects; returns a receiver told when the
    /// collection ended, and a flag set then.
    fn collect_on_another_thread(
        heap: MmtkHeap,
    ) -> (
        mpsc::Receiver<()>,
        std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) {
        let (tx, rx) = mpsc::channel();
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let set = flag.clone();
        std::thread::spawn(move || {
            let mut collecting = heap.bind_mutator();
            collecting.collect(&mut |_| {});
            set.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = tx.send(());
        });
        (rx, flag)
    }
}
