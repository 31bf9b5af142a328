//! The runtime that lowered code calls: frames, heap, collector.
//!
//! This module is the runtime half of the ABI between code produced by the lowering
//! (`locus_gc::lower`) and the process that runs it. It is pure Rust: the JIT binds the
//! symbols from [`symbols`] by name, and Rust code (tests, an embedding host) can play the
//! part of compiled code by following the same protocol by hand.
//!
//! # Words and objects
//!
//! Every word of the ABI is 8 bytes (64-bit targets only). A *tracked pointer* (address
//! space 10 in the IR) is null or the address of a live object, which is the address of its
//! first field. An object made by `locus_gc_alloc(nptrs, nbytes)` is:
//!
//! ```text
//! obj - 32           header (the runtime's; compiled code must not touch it)
//! obj + 0            field 0        tracked pointer, null at allocation
//! ...
//! obj + 8*(nptrs-1)  field nptrs-1  tracked pointer
//! obj + 8*nptrs      nbytes raw bytes, zero at allocation, never traced
//! ```
//!
//! `obj` is 16-byte aligned. Fields may only hold null or an object's address; a pointer into
//! the middle of an object (a Derived pointer, address space 11) must never be stored in a
//! field or a root. See [`heap`] for the block layout.
//!
//! Julia's allocations make *tagged* objects instead: `locus_gc_alloc_bytes(ptls, size,
//! tag)` (what `julia.gc_alloc_bytes` becomes) returns `size` zero bytes laid out as the
//! program likes, with the type tag `tag` in the word at `obj - 8`, which the program may
//! rewrite (Julia's code stores the tag again) and `julia.typeof` reads. A tag never has
//! bit 63 set ([`crate::contract::UNTAGGED_HEADER_FLAG`]: on MMTk that bit of the word
//! marks an untagged object's header; the MMTk heap refuses such a tag at allocation, and
//! a program must not store one there later). The collector scans
//! every aligned word of a tagged object and follows those that are a live object's
//! address (see [`collector`]). `locus_gc_alloc_genericmemory(ptls, nbytes, tag)` (what
//! Julia's `jl_alloc_genericmemory_unchecked` becomes) is a tagged `GenericMemory`: length
//! (word 0, the caller's to store), data pointer (word 1, set to `obj + 16`), then `nbytes`
//! of inline data.
//!
//! # GC frames and the chain
//!
//! A function that takes part (its entry block calls `@julia.get_pgcstack()`, which the
//! lowering turns into `@locus_gc_get_pgcstack()`) owns one frame, an `alloca` of
//! `nroots + 2` words in its entry block, laid out as Julia's `jl_gcframe_t`:
//!
//! ```text
//! frame + 0          nroots << 2    (low two bits: flags, must be 0)
//! frame + 8          prev           (the previous value of *pgcstack)
//! frame + 16 + 8*i   root i         (null, or a live object's address)
//! ```
//!
//! In the entry block, before any call that may collect, the function stores `nroots << 2`
//! into word 0, null into every root, `*pgcstack` into `prev`, and the frame's address into
//! `*pgcstack` (*link*). It stores a value into a root slot before a call that may collect
//! while the value is live across it, and null when the value dies. Before every `ret` it
//! stores `prev` back into `*pgcstack` (*unlink*). The frame must be in the thread's stack
//! (an `alloca`). When the runtime collects, it walks every linked frame, numbering them from
//! the innermost (`#0`, the one `*pgcstack` points to) outwards; see [`frames`] for the checks
//! made on each frame.
//!
//! The chain head is word 12 of a task-shaped block of the runtime's, as `gcstack` is in
//! Julia's task: Julia's code finds "the current task" 12 words before the chain head and
//! reads its `ptls` field (word 16) for the allocation calls. Every word of that block but
//! the chain head is 0.
//!
//! # Functions
//!
//! All are `extern "C"`, exported unmangled and listed by [`symbols`]:
//!
//! | symbol | IR declaration | does |
//! |---|---|---|
//! | `locus_gc_get_pgcstack` | `declare ptr @locus_gc_get_pgcstack()` | the address of this thread's chain head slot (`*mut *mut GcFrame`); never collects |
//! | `locus_gc_alloc` | `declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64 %nptrs, i64 %nbytes)` | may collect *before* allocating, then returns a new object with `nptrs` null fields and `nbytes` zero bytes |
//! | `locus_gc_safepoint` | `declare void @locus_gc_safepoint()` | may collect |
//! | `locus_gc_foreign_read` | `declare i64 @locus_gc_foreign_read(ptr %raw, i64 %offset)` | may collect, then returns the (unaligned) `i64` at `raw + offset`, which must lie inside the body of a live object |
//! | `locus_gc_write_barrier` | `declare void @locus_gc_write_barrier(ptr addrspace(10) %parent)` | what Julia's write barriers lower to: counts (`Stats::write_barriers`); never collects |
//! | `locus_gc_write_barrier_interior` | `declare void @locus_gc_write_barrier_interior(ptr %addr)` | the barrier after a store whose object the lowering cannot name (through a Derived argument): on a generational MMTk plan, the barrier on the object holding `addr`, none for an address in no object; counts like the other; never collects |
//! | `locus_gc_alloc_bytes` | `declare noalias nonnull ptr addrspace(10) @locus_gc_alloc_bytes(ptr %ptls, i64 %size, i64 %tag)` | may collect, then returns a new tagged object of `size` zero bytes; `ptls` is unused |
//! | `locus_gc_alloc_genericmemory` | `declare noalias nonnull ptr addrspace(10) @locus_gc_alloc_genericmemory(ptr %ptls, i64 %nbytes, ptr %tag)` | may collect, then returns a new tagged `GenericMemory` with `nbytes` of inline data |
//! | `locus_gc_region_depth` | `declare i64 @locus_gc_region_depth()` | the depth of this thread's scope stack (its root regions and scoped pins); never collects |
//! | `locus_gc_push_region` | `declare void @locus_gc_push_region(ptr %start, ptr %end)` | a root region: stack memory `[start, end)` that may hold GC pointers (an `alloca` the frame does not hold), scanned conservatively at every collection, what it names pinned; never collects |
//! | `locus_gc_region_reset` | `declare void @locus_gc_region_reset(i64 %depth)` | drops the regions and scoped pins above `depth` (before a return, in a landing pad); never collects |
//!
//! Code rewritten for statepoint roots ([`statepoints`]) calls, besides these, the
//! `locus_gc_sp_*` variants of the functions that may collect (the same arguments and the
//! caller's frame address last, where the stack walk starts; [`statepoint_symbols`]), the
//! pins `locus_gc_pin`, `locus_gc_unpin`, `locus_gc_pin_forever` (`void (ptr)`) and the
//! scoped pins `locus_gc_pin_scoped` and `locus_gc_unpin_scoped` (`i64 (ptr)`); none of
//! those five collects. The root regions and the scoped pins share one stack per thread,
//! so that a landing pad's reset drops both for the frames an exception unwound
//! ([`scopes`]).
//!
//! For threads (see "Threads" below), also in [`symbols`]:
//!
//! | symbol | IR declaration | does |
//! |---|---|---|
//! | `locus_gc_poll` | `declare void @locus_gc_poll()` | parks while another thread collects; never starts a collection |
//! | `locus_gc_enter_safe_region` | `declare void @locus_gc_enter_safe_region()` | the thread counts as stopped until it leaves; never collects |
//! | `locus_gc_leave_safe_region` | `declare void @locus_gc_leave_safe_region()` | waits for a running collection, then runs again; never collects |
//! | `locus_gc_heap` | `declare ptr @locus_gc_heap()` | the thread's heap, for `locus_gc_thread_attach_heap` |
//! | `locus_gc_thread_attach_heap` | `declare i32 @locus_gc_thread_attach_heap(ptr %heap)` | attaches the calling thread to that heap (crate root) |
//! | `locus_gc_thread_detach` | `declare i32 @locus_gc_thread_detach()` | detaches it (crate root) |
//! | `locus_gc_add_root_region` | `declare void @locus_gc_add_root_region(ptr %start, ptr %end)` | a global root table: its aligned words are roots (null or live objects, never moved) at every collection |
//! | `locus_gc_remove_root_region` | `declare i32 @locus_gc_remove_root_region(ptr %start)` | drops it; 1 if there was one |
//! | `locus_gc_stats` | `declare i32 @locus_gc_stats(ptr %out)` | fills a [`GcStats`] (up to the `size` its caller set) with the runtime's counters; never collects |
//!
//! "May collect" means: in stress mode ([`Collector::Stress`]), always; otherwise when the
//! body bytes allocated since the last collection reach the larger of
//! [`Config::heap_threshold`] and the bytes that survived it.
//!
//! # Faults
//!
//! The collector checks every pointer it traces and every frame it walks, and never follows
//! one it has not checked; a broken contract is a [`GcFault`], whose `Display` is one line
//! such as
//!
//! ```text
//! dangling reference: root 1 of frame #0 (frame at 0x7ffd5c3e1a40, 2 roots) points to object 0x5581f2a3c0f0 freed in collection 3 (object #1: 0 pointer fields, 8 raw bytes; found in collection 4)
//! ```
//!
//! The in-process API ([`Runtime::collect`], [`Runtime::alloc`], ...) returns
//! `Result<_, GcFault>`. The `extern "C"` functions cannot, so they record the fault (see
//! [`Runtime::faults`]) and hand it to the [`OnFault`] handler: [`OnFault::Exit`] (the CLI)
//! prints `locus: gc: <fault>` to stderr and exits with status 2; [`OnFault::Record`] lets
//! the run continue. A collection that finds a fault frees nothing, so continuing is safe;
//! `locus_gc_alloc` then allocates without collecting and `locus_gc_foreign_read` returns
//! the poisoned word of a freed object ([`heap::POISON_WORD`], in stress mode) and 0 for
//! other bad reads. An allocation that cannot be made (negative or huge sizes, out of
//! memory) cannot continue: after the handler returns the process aborts. No panic crosses
//! the `extern "C"` boundary: one is caught and aborts with a message.
//!
//! # Stale reads the collector cannot see
//!
//! A pointer the collector never traces (kept in a global, in the raw bytes of an object,
//! in memory of the host's) escapes the checks above. In stress mode every object has pages
//! of its own, and a collection that frees an object makes them inaccessible and never
//! reuses them ([`pages`]), so *any* later read or write of a freed object faults. The
//! fault handlers ([`crate::signals`], installed by [`Runtime::enter`] in stress mode)
//! report it as [`GcFault::FreedAccess`], naming the object and the collection that freed
//! it:
//!
//! ```text
//! locus: gc: dangling reference: an access to object 0x7f3bfee00ff0 freed in collection 2 (object #1: 0 pointer fields, 8 raw bytes), caught as SIGSEGV in function `main` (JIT-compiled code, pc 0x7f3d0aa7d032 = main+0x32)
//! ```
//!
//! With [`OnFault::Exit`] the handler prints that line and exits with status 2, with
//! [`OnFault::Abort`] it aborts. With [`OnFault::Record`] and [`OnFault::Call`] it makes the
//! object's pages accessible again, lets the access proceed (a read sees poison) and
//! records the fault, which the runtime reports (to the `Call` handler too) at its next
//! entry point call or [`Runtime::faults`], [`Runtime::take_faults`] or [`Runtime::stats`];
//! only the first access to each freed object is caught this way.
//!
//! # Threads
//!
//! One heap may be shared by several mutator threads. [`Runtime::enter`] makes a heap and
//! its first mutator, the calling thread; [`Runtime::heap`] gives a [`HeapHandle`]
//! (`Send`, `Sync`) with which another thread joins it ([`HeapHandle::attach`]; from C,
//! `locus_gc_heap` on a thread already attached and `locus_gc_thread_attach_heap(heap)`
//! on the new one, see the crate docs). Each [`Runtime`] is one thread's view: the heap,
//! the collector, the configuration, the counters, the faults and the global root
//! regions are the heap's, shared; the chain head (its task-shaped block: what
//! `locus_gc_get_pgcstack` returns is per thread, as Julia's `pgcstack`), the stack bounds,
//! the statepoint walk's frame address and the registered stack regions are the thread's.
//!
//! A collection stops the world, as Julia's does with its per-thread `gc_state`: every
//! mutator is *running* or *safe*. The thread whose safepoint decides to collect sets the
//! heap's `stopping` flag, waits until every other attached thread is safe, scans every
//! thread's frames (numbered on from the collecting thread's innermost frame, `#0`, to the
//! next thread's, in attach order), its statepoint stack (from the frame address of the
//! `locus_gc_sp_*` entry it is stopped in) and its regions, and the global root regions,
//! sweeps (moves, with statepoint roots), clears the flag and wakes the others. A thread
//! is safe
//! - while it is parked at a safepoint: every entry point that may collect first checks
//!   the flag and, when it is set, parks until the collection ends (a second thread that
//!   wanted to collect at the same time parks and then collects only if one is still due);
//! - at `locus_gc_poll`, which parks in the same way but never starts a collection (even in
//!   stress mode): what `--safepoint-polls` puts at loop back edges;
//! - between `locus_gc_enter_safe_region` and `locus_gc_leave_safe_region`: the frontend
//!   (or host) calls them around a foreign call that may block or run long (`pthread_join`,
//!   a barrier, I/O), as Julia's code marks itself gc-safe around such calls. Leaving waits
//!   for a running collection to end. In a safe region the thread may not touch its chain
//!   or call another entry point (one that does is a fatal error naming the call); the
//!   objects the foreign code uses must be held by the thread's frames (values live across
//!   the call, its `jl_roots` bundle: the lowering roots them there) or pinned;
//! - while it attaches or detaches, and while a nested runtime of the same thread is
//!   installed over its own.
//!
//! A thread that loops without reaching any of these holds every collection up (the
//! collecting thread waits); `--safepoint-polls` is the cure.
//!
//! With an MMTk collector ([`Collector::Mmtk`]) the protocol is the same, MMTk's own: a
//! collection (an allocation found the heap full, or [`Runtime::collect`]) raises a flag
//! that every safepoint and `locus_gc_poll` reads; a thread that sees it hands its roots
//! over and parks until the collection ends; a thread in a safe region handed its roots
//! over when it entered and counts as stopped (see the [`crate::mmtk`] docs).
//!
//! What is not supported: a thread in a safe region with statepoint roots has only its
//! chain, pins and regions scanned, not its compiled frames (the statepoint rewrite does
//! not wrap `locus_gc_enter_safe_region`; objects it holds across the region must be
//! pinned), and `--safepoint-polls` is refused with statepoint roots until the rewrite
//! wraps `locus_gc_poll` (the runtime has `locus_gc_sp_poll` for it); the runtime's own
//! collector is one thread (no parallel marking) and has no allocation buffer per thread
//! (every allocation takes the heap's lock; MMTk's plans have both); signals are not used to stop threads (a thread stops
//! only at the points above).
//!
//! # Fast paths on MMTk
//!
//! Compiled code calls `locus_gc_get_pgcstack`, `locus_gc_alloc` and the write barrier
//! far more often than anything else, so on an MMTk plan they skip the entry's checks:
//! - `locus_gc_get_pgcstack` answers from one thread-local load: the current runtime's
//!   task block while it runs on MMTk outside a safe region (null otherwise: then the
//!   entry answers, or refuses a call from a safe region);
//! - the task block's `TASK_ALLOC_*` words ([`crate::contract`], which lists the steps)
//!   hold the address of the thread's MMTk bump pointer (cursor, limit), the valid-object
//!   bit table, the thread's allocation counters and the heap's collection-pending flag
//!   while the thread runs on a plan with a bump pointer (Immix, StickyImmix, SemiSpace,
//!   GenCopy); the bump word is null for the runtime's own collectors, MarkSweep,
//!   [`Config::mmtk_collect_every`] and in a safe region. `locus_gc_alloc` takes that path
//!   first (an object of at most `INLINE_ALLOC_MAX_BYTES` that fits the buffer: bump,
//!   header, zeroed body, valid-object bit, counted), and a lowering may inline the same
//!   steps, calling `locus_gc_alloc` when they say no;
//! - a write barrier on a collector that remembers nothing only counts, in a per-thread
//!   counter (a load and a store) that [`Runtime::stats`] sums.
//!
//! The only global state is a thread-local pointer to the current thread's [`Runtime`]
//! (and, beside it, its task block while the MMTk fast paths are on), unavoidable because
//! the `extern "C"` functions have fixed signatures.
//! [`Runtime::enter`] and [`HeapHandle::attach`] install a runtime and return a [`Guard`]
//! that owns it; dropping the guard detaches the thread, restores the runtime that was
//! current before, and frees the heap when no thread or handle is left. Guards nest (each
//! nested [`Runtime::enter`] is an independent heap). Calling an entry point on a thread
//! with no runtime aborts with a message.
//!
//! Inside the runtime, the collector is reached at two places only, the seam where another
//! collector plugs in: every allocation goes through one method (the heap's `alloc` and
//! `alloc_tagged` under the heap's lock), and every collection through one (the world
//! stopped, it is handed each thread's roots, `frames::ThreadRoots`, and the global root
//! regions, and runs `collector::collect` or `statepoints::collect`).
//!
//! # Example
//!
//! Rust code playing the part of a compiled function with one root:
//!
//! ```
//! use locus_gc_runtime::runtime::{self, Config, GcFrame, OnFault, Runtime};
//!
//! let rt = Runtime::enter(Config::stress().on_fault(OnFault::Record));
//! let mut words = [0usize; 3]; // [1 << 2, prev, root 0]
//! let frame = words.as_mut_ptr();
//! let pgcstack = runtime::locus_gc_get_pgcstack();
//! unsafe {
//!     frame.write(GcFrame::header_word(1));
//!     frame.add(1).write(*pgcstack as usize);
//!     *pgcstack = frame.cast(); // link
//! }
//! let obj = runtime::locus_gc_alloc(1, 8); // one pointer field, 8 raw bytes
//! unsafe { frame.add(2).write(obj as usize) } // root it
//! runtime::locus_gc_safepoint(); // stress mode: a collection; `obj` survives
//! assert_eq!(rt.stats().objects_live, 1);
//! unsafe { frame.add(2).write(0) } // the value dies
//! runtime::locus_gc_safepoint(); // freed, poisoned and made inaccessible
//! assert_eq!(rt.stats().objects_freed, 1);
//! unsafe { *pgcstack = frame.add(1).read() as *mut GcFrame } // unlink
//! assert!(rt.faults().is_empty());
//! ```

pub mod collector;
pub mod fault;
pub mod frames;
pub mod heap;
pub mod pages;
pub mod scopes;
pub mod statepoints;

use crate::contract::{
    MEMORY_INLINE_DATA_OFFSET, MEMORY_PTR_OFFSET, RUNTIME_ADD_ROOT_REGION, RUNTIME_ALLOC,
    RUNTIME_ALLOC_BYTES, RUNTIME_ALLOC_GENERICMEMORY, RUNTIME_CALLEE_ROOTED_READ,
    RUNTIME_ENTER_SAFE_REGION, RUNTIME_FOREIGN_READ, RUNTIME_GET_PGCSTACK, RUNTIME_HEAP,
    RUNTIME_LEAVE_SAFE_REGION, RUNTIME_POLL, RUNTIME_REMOVE_ROOT_REGION, RUNTIME_SAFEPOINT,
    RUNTIME_THREAD_ATTACH_HEAP, RUNTIME_THREAD_DETACH, RUNTIME_WRITE_BARRIER, TASK_ALLOC_BUMP_WORD,
    TASK_ALLOC_PENDING_WORD, TASK_GCSTACK_WORD, TASK_PTLS_WORD,
};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::io::Write;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub use collector::Collection;
pub use fault::{AllocProblem, FrameProblem, GcFault, ReadProblem, Referrer};
pub use frames::{GcFrame, StackBounds};
pub use heap::{Lookup, ObjectInfo};
pub use statepoints::{Slot, SlotPair, StackMaps};

use heap::{Heap, POISON_WORD};

use crate::mmtk::{HeapSize, MmtkHeap, MmtkMutator, MmtkOptions, Plan, RootSet};
use pages::Mode;

/// The default for [`Config::heap_threshold`]: 4 MiB.
pub const DEFAULT_HEAP_THRESHOLD: usize = 4 << 20;

/// The environment variable that sets the MMTk heap's size when [`Config::heap_bytes`] is
/// `None`: bytes, or a number with a suffix `K`, `M` or `G` (powers of 1024, either case),
/// e.g. `256M` (see [`parse_heap_size`]), for a fixed heap; or `MIN..MAX` (`MIN..`,
/// `..MAX`) for a heap that grows from MIN up to MAX ([`HeapSize::parse`]).
pub const HEAP_SIZE_ENV: &str = "LOCUS_GC_HEAP_SIZE";

/// The environment variable that makes MMTk's Immix and StickyImmix defragment at every
/// collection (value `1`), moving objects that nothing pins: what tests run statepoint
/// programs with so that Immix moves objects (it otherwise defragments only when its
/// blocks are fragmented).
pub const MMTK_DEFRAG_ENV: &str = "LOCUS_GC_MMTK_DEFRAG";

/// The environment variable that sets [`Config::mmtk_collect_every`] when that is 0: a
/// positive number `N`, MMTk collects at every `N`th call that may collect.
pub const MMTK_COLLECT_EVERY_ENV: &str = "LOCUS_GC_MMTK_COLLECT_EVERY";

/// Which collector a runtime runs (see [`Config::collector`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collector {
    /// The runtime's own mark-sweep, collecting at [`Config::heap_threshold`].
    Locus,
    /// The runtime's own collector in stress mode ([`Config::stress`] makes one).
    Stress,
    /// An MMTk plan ([`crate::mmtk`]) in a heap of [`Config::heap_bytes`]. One MMTk heap per
    /// process: a second runtime must ask for the same plan. With frame roots only the
    /// plans that pin (MarkSweep, Immix, StickyImmix: frame code does not reload a rooted
    /// value); with statepoint roots every plan, SemiSpace and GenCopy moving objects
    /// (then a pin, or a stack or global root region naming an object that moves, is a
    /// fault: see the [`crate::mmtk`] docs). Several mutator threads, as with the
    /// runtime's own collector (see "Threads").
    Mmtk(Plan),
}

impl Collector {
    /// The collector named `name`: `stress`, `locus` (or `marksweep`), or `mmtk:PLAN`.
    ///
    /// # Errors
    /// A sentence naming what was expected.
    pub fn from_name(name: &str) -> Result<Collector, String> {
        match name {
            "stress" => Ok(Collector::Stress),
            "locus" | "marksweep" => Ok(Collector::Locus),
            _ => match name.strip_prefix("mmtk:") {
                Some(plan) => Plan::from_name(plan)
                    .map(Collector::Mmtk)
                    .map_err(|e| e.to_string()),
                None => Err(format!(
                    "unknown collector `{name}` (expected stress, locus, mmtk:marksweep, \
                     mmtk:immix, mmtk:stickyimmix, mmtk:semispace or mmtk:gencopy)"
                )),
            },
        }
    }
}

impl fmt::Display for Collector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Collector::Locus => f.write_str("locus"),
            Collector::Stress => f.write_str("stress"),
            Collector::Mmtk(plan) => write!(f, "mmtk:{plan}"),
        }
    }
}

/// What the `extern "C"` functions do with a fault after recording it.
pub enum OnFault {
    /// Print `locus: gc: <fault>` to stderr and exit the process with status 2 (the CLI).
    Exit,
    /// Print `locus: gc: <fault>` to stderr and abort the process.
    Abort,
    /// Only record it ([`Runtime::faults`]) and let the run continue.
    Record,
    /// Call this, then let the run continue (unless it exits). A panic in it aborts.
    Call(Box<dyn Fn(&GcFault) + Send + Sync>),
}

impl fmt::Debug for OnFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OnFault::Exit => "Exit",
            OnFault::Abort => "Abort",
            OnFault::Record => "Record",
            OnFault::Call(_) => "Call(..)",
        })
    }
}

/// How a runtime collects and what it does on a fault.
#[derive(Debug)]
pub struct Config {
    /// The collector: the runtime's own (in stress mode, [`Collector::Stress`], it collects
    /// at every call that may collect, poisons freed objects, makes them inaccessible and
    /// never reuses them) or an MMTk plan.
    pub collector: Collector,
    /// Outside stress mode, collect once this many body bytes were allocated since the last
    /// collection (or as many as survived it, if more).
    pub heap_threshold: usize,
    /// What the `extern "C"` functions do with a fault.
    pub on_fault: OnFault,
    /// Statepoint roots: the stack maps of the compiled code, walked at each collection
    /// (see [`statepoints`]). `None`: roots come from the frame chain alone.
    pub stack_maps: Option<Arc<StackMaps>>,
    /// With [`Config::stack_maps`]: move every live object that is not pinned at each
    /// collection; the old copy is kept and made inaccessible in stress mode, as stress mode
    /// frees objects, and otherwise its block is given back for reuse.
    pub moving: bool,
    /// With an MMTk plan: the MMTk heap's fixed size in bytes (MMTk collects when it is
    /// full; an allocation that does not fit after a collection is out of memory).
    /// `None` (the default): the size [`HEAP_SIZE_ENV`] (`LOCUS_GC_HEAP_SIZE`) gives if the
    /// environment sets it, else [`HeapSize::default_dynamic`]: the heap grows (never
    /// shrinks) from 32 MiB up to half the physical memory. The first runtime of a process
    /// makes its one MMTk heap: later ones share it, whatever size they ask for.
    pub heap_bytes: Option<usize>,
    /// With an MMTk plan: collect at every `n`th call that may collect (an allocation,
    /// `locus_gc_safepoint`, a foreign read), as stress mode collects at every one: what
    /// tests run programs with so that MMTk collects (and, on a copying plan, moves) where
    /// it would otherwise not. 0 (the default): only when MMTk's heap is full, unless the
    /// environment's [`MMTK_COLLECT_EVERY_ENV`] (`LOCUS_GC_MMTK_COLLECT_EVERY=N`) says.
    pub mmtk_collect_every: u64,
}

impl Default for Config {
    /// The runtime's own collector, [`DEFAULT_HEAP_THRESHOLD`], [`OnFault::Exit`], frame
    /// roots.
    fn default() -> Config {
        Config {
            collector: Collector::Locus,
            heap_threshold: DEFAULT_HEAP_THRESHOLD,
            on_fault: OnFault::Exit,
            stack_maps: None,
            moving: false,
            heap_bytes: None,
            mmtk_collect_every: 0,
        }
    }
}

impl Config {
    /// Stress mode with [`OnFault::Exit`].
    pub fn stress() -> Config {
        Config {
            collector: Collector::Stress,
            ..Config::default()
        }
    }

    /// The MMTk plan it collects with, if any.
    fn mmtk(&self) -> Option<Plan> {
        match self.collector {
            Collector::Mmtk(plan) => Some(plan),
            Collector::Locus | Collector::Stress => None,
        }
    }

    /// The same configuration with another fault handler.
    pub fn on_fault(self, on_fault: OnFault) -> Config {
        Config { on_fault, ..self }
    }
}

/// Counters over a runtime's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Collections started (including ones that ended with a fault).
    pub collections: u64,
    /// Frames walked, summed over the collections that completed.
    pub frames_walked: u64,
    /// The most frames one collection walked (every thread's chain together).
    pub deepest_chain: usize,
    /// The largest root count of one frame walked.
    pub max_roots_in_frame: usize,
    /// Non-null roots traced, summed over the collections that completed.
    pub roots_traced: u64,
    /// Objects allocated.
    pub objects_allocated: u64,
    /// Objects freed.
    pub objects_freed: u64,
    /// Objects live now.
    pub objects_live: u64,
    /// Body bytes (`8 * nptrs + nbytes`) allocated.
    pub bytes_allocated: u64,
    /// Body bytes freed.
    pub bytes_freed: u64,
    /// Body bytes live now.
    pub bytes_live: u64,
    /// Faults reported by the `extern "C"` functions.
    pub faults: u64,
    /// Write barriers run (`locus_gc_write_barrier` and `locus_gc_write_barrier_interior`;
    /// they remember anything only on MMTk's generational plans, and are counted on every
    /// collector so that the barriers code runs can be seen).
    pub write_barriers: u64,
    /// Objects moved by the moving collector, summed over its collections.
    pub objects_moved: u64,
    /// The median stop-the-world pause, nanoseconds (the MMTk plans:
    /// [`crate::mmtk::MmtkStats::pause_median_ns`]; the own collectors:
    /// [`collector::Pauses`]); 0 before the first collection.
    pub pause_median_ns: u64,
    /// The longest stop-the-world pause, nanoseconds, as `pause_median_ns`.
    pub pause_max_ns: u64,
}

impl fmt::Display for Stats {
    /// One `name: value` line per counter.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "collections: {}", self.collections)?;
        writeln!(f, "frames walked: {}", self.frames_walked)?;
        writeln!(f, "deepest frame chain: {}", self.deepest_chain)?;
        writeln!(
            f,
            "largest root count in one frame: {}",
            self.max_roots_in_frame
        )?;
        writeln!(f, "roots traced: {}", self.roots_traced)?;
        writeln!(f, "objects allocated: {}", self.objects_allocated)?;
        writeln!(f, "objects freed: {}", self.objects_freed)?;
        writeln!(f, "objects live: {}", self.objects_live)?;
        writeln!(f, "bytes allocated: {}", self.bytes_allocated)?;
        writeln!(f, "bytes freed: {}", self.bytes_freed)?;
        writeln!(f, "bytes live: {}", self.bytes_live)?;
        writeln!(f, "faults: {}", self.faults)?;
        writeln!(f, "write barriers: {}", self.write_barriers)?;
        writeln!(f, "objects moved: {}", self.objects_moved)?;
        // Only a collector that reports its pauses has these lines.
        if self.pause_max_ns > 0 {
            writeln!(f, "pause median: {} ns", self.pause_median_ns)?;
            writeln!(f, "pause max: {} ns", self.pause_max_ns)?;
        }
        Ok(())
    }
}

/// A linked frame, as [`Runtime::frames`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// The frame's number, counted from the innermost frame (0).
    pub index: usize,
    /// The frame's address.
    pub addr: usize,
    /// The root slots' contents.
    pub roots: Vec<usize>,
}

struct State {
    heap: Heap,
    stats: Stats,
    /// Body bytes allocated since the last collection.
    since_gc: u64,
    /// Body bytes live after the last collection.
    live_after_gc: u64,
    /// The own collectors' stop-the-world pauses ([`Runtime::collect_when`]).
    pauses: collector::Pauses,
}

/// The words of a task-shaped block: enough for its `ptls` field and the allocation fast
/// path's words after it (`TASK_ALLOC_*`).
const TASK_WORDS: usize = {
    let ptls = TASK_PTLS_WORD as usize + 1;
    let alloc = TASK_ALLOC_PENDING_WORD + 1;
    if ptls > alloc {
        ptls
    } else {
        alloc
    }
};

/// A mutator runs Locus code (or may, at any moment): a collection waits for it.
const RUNNING: u8 = 0;
/// A mutator is stopped at a safepoint or in a safe region: its frames can be scanned.
const SAFE: u8 = 1;

/// Locks `m`, carrying on after a panic elsewhere (every panic in the runtime ends the
/// process anyway: see [`entry`]).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One mutator thread as the collector sees it: its chain head, where its stack is, and
/// whether it is stopped.
struct Mutator {
    /// Shaped like Julia's task, for code that finds its task from the chain head: the
    /// chain head is word [`TASK_GCSTACK_WORD`], `ptls` (null: nothing here needs it) word
    /// [`TASK_PTLS_WORD`], the allocation fast path's words (`TASK_ALLOC_*`, see
    /// [`crate::contract`]) set while the thread runs on MMTk, every other word 0. Atomic
    /// words: the collector reads another thread's chain head while that thread is stopped.
    task: [AtomicUsize; TASK_WORDS],
    /// The write barriers this thread ran ([`Stats::write_barriers`]): written by the
    /// thread alone (a load and a store, no read-modify-write), summed by `stats`.
    barriers: AtomicU64,
    /// The thread's stack, where the platform tells.
    stack: Option<StackBounds>,
    /// [`RUNNING`] or [`SAFE`].
    state: AtomicU8,
    /// A stack address below every frame the thread had linked when it last became
    /// [`SAFE`]: where the walk of its chain checks frames against.
    sp: AtomicUsize,
    /// The frame address a `locus_gc_sp_*` entry was called with, while it runs (0 else).
    sp_frame: AtomicUsize,
    /// A stack address in the frame of the host function that called compiled code on
    /// this thread ([`Runtime::call_compiled`]), while it runs (0 else).
    entered: AtomicUsize,
    /// Statepoint roots: stack memory registered by `locus_gc_push_region` and the scoped
    /// pins, innermost last ([`scopes`]).
    scopes: Mutex<scopes::Scopes>,
}

impl Mutator {
    fn new(stack: Option<StackBounds>) -> Mutator {
        Mutator {
            task: Default::default(),
            barriers: AtomicU64::new(0),
            stack,
            state: AtomicU8::new(SAFE),
            sp: AtomicUsize::new(0),
            sp_frame: AtomicUsize::new(0),
            entered: AtomicUsize::new(0),
            scopes: Mutex::new(scopes::Scopes::default()),
        }
    }

    /// Counts a write barrier (only the thread itself calls this).
    fn count_barrier(&self) {
        let n = self.barriers.load(Ordering::Relaxed);
        self.barriers.store(n + 1, Ordering::Relaxed);
    }

    /// The frame the chain head points to.
    fn head(&self) -> *mut GcFrame {
        self.task[TASK_GCSTACK_WORD].load(Ordering::Acquire) as *mut GcFrame
    }

    /// What a collection scans of this thread, `sp` below its frames.
    fn roots(&self, sp: usize) -> frames::ThreadRoots {
        frames::ThreadRoots {
            head: self.head(),
            sp,
            bounds: self.stack,
            fp: self.sp_frame.load(Ordering::Acquire),
            entered: self.entered.load(Ordering::Acquire),
            regions: lock(&self.scopes).regions().collect(),
        }
    }
}

/// The heap, the collector and the mutators attached to them: what every thread's
/// [`Runtime`] of one heap shares.
struct Shared {
    stress: bool,
    heap_threshold: usize,
    on_fault: OnFault,
    stack_maps: Option<Arc<StackMaps>>,
    moving: bool,
    state: Mutex<State>,
    faults: Mutex<Vec<GcFault>>,
    /// Every attached mutator, in attach order. Held by the collector from the stop to
    /// the resume, so a thread can neither attach nor detach during a collection.
    mutators: Mutex<Vec<Arc<Mutator>>>,
    /// Set by the thread that collects, from before it stops the others until it resumes
    /// them: what a safepoint (and `locus_gc_poll`) checks.
    stopping: AtomicBool,
    /// With [`Shared::changed`]: mutators becoming safe wake the collector, the end of a
    /// collection wakes the mutators.
    world: Mutex<()>,
    changed: Condvar,
    /// The global root regions (`locus_gc_add_root_region`): `[start, end)` of memory
    /// whose aligned words are roots.
    globals: Mutex<Vec<(usize, usize)>>,
    /// The process's MMTk heap, when the collector is an MMTk plan: allocation and
    /// collection go there instead of [`State::heap`].
    mmtk: Option<MmtkHeap>,
    /// [`Config::mmtk_collect_every`] (or its environment variable's).
    mmtk_every: u64,
    /// Calls that may collect so far, counted for `mmtk_every`.
    mmtk_calls: std::sync::atomic::AtomicU64,
    /// [`Stats::write_barriers`] of the threads that detached (each attached one counts its
    /// own, [`Mutator::barriers`]; added here under the mutators' lock when it detaches).
    write_barriers: std::sync::atomic::AtomicU64,
    /// The thread that ends the process for a fault ([`OnFault::Exit`], [`OnFault::Abort`]),
    /// by the address of its [`Mutator`], 0 before: another thread's fault meanwhile (every
    /// thread out of memory at once) waits for the end instead of printing a second line,
    /// and a fault the ending thread's own `exit` finds (its thread-local destructors hand
    /// its roots over once more) is only recorded.
    ending: AtomicUsize,
}

impl Shared {
    /// Wakes whoever waits on [`Shared::changed`].
    fn notify(&self) {
        let _w = lock(&self.world);
        self.changed.notify_all();
    }

    /// Whether a safepoint would collect now (stress mode: always).
    fn due(&self) -> bool {
        self.stress || {
            let st = lock(&self.state);
            st.since_gc >= st.live_after_gc.max(self.heap_threshold as u64)
        }
    }
}

/// A heap that several threads share: what a new thread attaches with
/// ([`HeapHandle::attach`]). Made by [`Runtime::heap`]; `Send` and `Sync`, cheap to clone.
#[derive(Clone)]
pub struct HeapHandle(Arc<Shared>);

impl fmt::Debug for HeapHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeapHandle")
            .field("mutators", &lock(&self.0.mutators).len())
            .finish_non_exhaustive()
    }
}

impl HeapHandle {
    /// Attaches the calling thread to this heap as a new mutator, with a chain head of its
    /// own, and installs its runtime as the thread's current one until the guard is
    /// dropped (as [`Runtime::enter`] does). Waits while a collection runs.
    ///
    /// Ends the process after one `locus: gc:` line when the heap refuses another thread
    /// (see [`HeapHandle::try_attach`]).
    pub fn attach(&self) -> Guard {
        self.try_attach()
            .unwrap_or_else(|message| fatal(format_args!("{message}")))
    }

    /// [`HeapHandle::attach`], or why not.
    ///
    /// # Errors
    /// None today (the signature leaves room for a collector that refuses a thread).
    pub fn try_attach(&self) -> Result<Guard, String> {
        if self.0.mmtk.is_some() {
            // Binding waits while an MMTk collection runs, which may be waiting for the
            // runtime this thread runs now: that one is parked first (as `install` parks
            // it anyway).
            let _ = CURRENT.try_with(|cur| {
                let before = cur.get();
                if !before.is_null() {
                    // SAFETY: `CURRENT` only holds runtimes owned by live guards here.
                    unsafe { &*before }.enter_safe();
                }
            });
        }
        let mm = self.0.mmtk.map(|heap| heap.bind_mutator());
        Ok(install(Runtime {
            shared: Arc::clone(&self.0),
            me: Arc::new(Mutator::new(StackBounds::current_thread())),
            prev: Cell::new(ptr::null()),
            mm: RefCell::new(mm),
        }))
    }

    /// The address [`locus_gc_heap`] returns for this heap, which
    /// [`crate::locus_gc_thread_attach_heap`] takes back.
    pub fn as_ptr(&self) -> *const u8 {
        Arc::as_ptr(&self.0).cast()
    }

    /// The handle of the heap at `ptr`, an address [`HeapHandle::as_ptr`] (or
    /// [`locus_gc_heap`]) returned.
    ///
    /// # Safety
    /// `ptr` must come from [`HeapHandle::as_ptr`] or [`locus_gc_heap`], and the heap must
    /// still be alive: some thread attached to it (or a handle of it) keeps it alive until
    /// this returns.
    pub unsafe fn from_ptr(ptr: *const u8) -> HeapHandle {
        let raw = ptr.cast::<Shared>();
        // SAFETY: the caller's promise: `raw` is `Arc::as_ptr` of a live `Arc<Shared>`.
        unsafe { Arc::increment_strong_count(raw) };
        // SAFETY: as above, and the count just taken is the one this handle owns.
        HeapHandle(unsafe { Arc::from_raw(raw) })
    }
}

/// One thread's view of a garbage-collected heap: the heap and collector (shared with
/// every thread attached to it, see [`HeapHandle`]) and this thread's chain head. Made and
/// installed by [`Runtime::enter`] (a new heap, this thread its first mutator) or
/// [`HeapHandle::attach`] (one more mutator of a heap).
pub struct Runtime {
    shared: Arc<Shared>,
    me: Arc<Mutator>,
    prev: Cell<*const Runtime>,
    /// This thread's MMTk mutator, when the collector is an MMTk plan.
    mm: RefCell<Option<MmtkMutator>>,
}

thread_local! {
    /// The runtime installed on this thread, or null: the runtime's only per-thread state.
    static CURRENT: Cell<*const Runtime> = const { Cell::new(ptr::null()) };
    /// The task block of [`CURRENT`] while its collector is an MMTk plan and the thread is
    /// outside a safe region, else null: what `locus_gc_get_pgcstack` and `locus_gc_alloc`
    /// read first (one thread-local load, no other check). Set by [`Runtime::leave_safe`],
    /// cleared by [`Runtime::enter_safe`] (every change of [`CURRENT`] goes through them).
    static FAST: Cell<*const AtomicUsize> = const { Cell::new(ptr::null()) };
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("stress", &self.shared.stress)
            .field("heap_threshold", &self.shared.heap_threshold)
            .field("on_fault", &self.shared.on_fault)
            .field("stack", &self.me.stack)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Registers `rt`'s mutator with its heap, installs it as the current thread's runtime
/// (the one current before is parked: it counts as stopped until this one is gone) and
/// lets it run.
fn install(rt: Runtime) -> Guard {
    let rt = NonNull::from(Box::leak(Box::new(rt)));
    // SAFETY: just leaked; freed only by the guard.
    let r = unsafe { rt.as_ref() };
    lock(&r.shared.mutators).push(Arc::clone(&r.me));
    CURRENT.with(|cur| {
        let before = cur.get();
        if !before.is_null() {
            // SAFETY: `CURRENT` only holds runtimes owned by live guards on this thread.
            unsafe { &*before }.enter_safe();
        }
        r.prev.set(before);
        cur.set(rt.as_ptr());
    });
    r.leave_safe();
    Guard {
        rt,
        _not_send: PhantomData,
    }
}

impl Runtime {
    /// Makes a runtime with a new heap and installs it as the current thread's, until the
    /// guard is dropped; this thread is the heap's first mutator ([`Runtime::heap`] lets
    /// others attach). Records the thread's stack bounds for checking frames. In stress
    /// mode, also installs the process's fault handlers ([`crate::signals::install`]),
    /// which report an access to a freed object.
    ///
    /// Ends the process after one `locus: gc:` line when the collector cannot be made (see
    /// [`Runtime::try_enter`]).
    pub fn enter(config: Config) -> Guard {
        Runtime::try_enter(config).unwrap_or_else(|message| fatal(format_args!("{message}")))
    }

    /// Calls `f`, which calls compiled code (the module's entry), noting where on this
    /// thread's stack the host's frames end. A statepoint walk stops at the first frame of
    /// foreign code; below that point such a frame is foreign code the compiled code called
    /// that called compiled code back (`qsort` with a compiled comparator), past which
    /// the frame-pointer chain does not lead: the collection reports it
    /// ([`GcFault::ForeignFrame`]) rather than miss the roots of the frames above it.
    /// Compiled code called without it is walked as before, up to the first foreign frame.
    /// Without a runtime installed on this thread, it only calls `f`.
    #[inline(never)]
    pub fn call_compiled<R>(f: impl FnOnce() -> R) -> R {
        // The thread's mutator record, kept alive by this clone whatever `f` does (it may
        // detach the thread).
        let me = CURRENT.with(|current| {
            // SAFETY: an installed runtime is live while installed on its thread.
            unsafe { current.get().as_ref() }.map(|rt| Arc::clone(&rt.me))
        });
        let Some(me) = me else {
            return f();
        };
        let marker = 0u8;
        let here = std::hint::black_box(&marker) as *const u8 as usize;
        let outer = me.entered.swap(here, Ordering::AcqRel);
        let out = f();
        me.entered.store(outer, Ordering::Release);
        out
    }

    /// [`Runtime::enter`], or why the collector cannot be made: a copying MMTk plan with
    /// frame roots (frames cannot be updated), stress or moving with MMTk, a process whose
    /// MMTk heap has another plan, or a bad `LOCUS_GC_HEAP_SIZE` or
    /// `LOCUS_GC_MMTK_COLLECT_EVERY`.
    ///
    /// # Errors
    /// A sentence saying what was refused.
    pub fn try_enter(config: Config) -> Result<Guard, String> {
        let stress = config.collector == Collector::Stress;
        let mmtk = match config.mmtk() {
            Some(plan) => Some(mmtk_heap(plan, &config)?),
            None => None,
        };
        let mmtk_every = match (mmtk, config.mmtk_collect_every) {
            (None, _) => 0,
            (Some(_), 0) => mmtk_collect_every_from_env()?,
            (Some(_), n) => n,
        };
        let mode = match config.on_fault {
            OnFault::Exit => Mode::Exit,
            OnFault::Abort => Mode::Abort,
            OnFault::Record | OnFault::Call(_) => Mode::Record,
        };
        let moving = config.moving && config.stack_maps.is_some();
        if stress || moving {
            crate::signals::install();
        }
        let shared = Arc::new(Shared {
            stress,
            heap_threshold: config.heap_threshold,
            on_fault: config.on_fault,
            stack_maps: config.stack_maps,
            moving,
            state: Mutex::new(State {
                // The moving collector gives an old copy's block back for reuse; in stress
                // mode it is kept and protected, as stress mode keeps what it frees.
                heap: Heap::new(stress, mode),
                stats: Stats::default(),
                since_gc: 0,
                live_after_gc: 0,
                pauses: collector::Pauses::default(),
            }),
            faults: Mutex::new(Vec::new()),
            mutators: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            world: Mutex::new(()),
            changed: Condvar::new(),
            globals: Mutex::new(Vec::new()),
            mmtk,
            mmtk_every,
            mmtk_calls: std::sync::atomic::AtomicU64::new(0),
            write_barriers: std::sync::atomic::AtomicU64::new(0),
            ending: AtomicUsize::new(0),
        });
        HeapHandle(shared).try_attach()
    }

    /// The handle other threads attach to this runtime's heap with.
    pub fn heap(&self) -> HeapHandle {
        HeapHandle(Arc::clone(&self.shared))
    }

    /// How many threads are attached to this runtime's heap (this one included).
    pub fn mutators(&self) -> usize {
        lock(&self.shared.mutators).len()
    }

    /// The address of the chain head slot, what `locus_gc_get_pgcstack` returns.
    pub fn pgcstack(&self) -> *mut *mut GcFrame {
        // Derived from the whole block, so code that finds the task (and its other words)
        // from the chain head reads memory this pointer may reach.
        self.me
            .task
            .as_ptr()
            .wrapping_add(TASK_GCSTACK_WORD)
            .cast::<*mut GcFrame>()
            .cast_mut()
    }

    /// Whether this runtime runs in stress mode.
    pub fn is_stress(&self) -> bool {
        self.shared.stress
    }

    /// The stack of the thread the runtime was entered on, where the platform tells.
    pub fn stack_bounds(&self) -> Option<StackBounds> {
        self.me.stack
    }

    /// Marks this thread stopped (its frames may be scanned) until [`Runtime::leave_safe`]:
    /// the safe region of `locus_gc_enter_safe_region`, and how a thread parks.
    fn enter_safe(&self) {
        self.set_fast(false);
        self.me
            .sp
            .store(frames::approx_stack_pointer(), Ordering::SeqCst);
        self.me.state.store(SAFE, Ordering::SeqCst);
        self.shared.notify();
        // MMTk: the thread's roots are handed over now, and it counts as parked.
        let _ = self.mmtk_do(|m, roots| {
            m.enter_safe_region(roots);
            Ok(())
        });
    }

    /// Marks this thread running again, first waiting for a collection that runs (or is
    /// stopping the world) to end.
    fn leave_safe(&self) {
        let sh = &*self.shared;
        if let Ok(mut mm) = self.mm.try_borrow_mut() {
            if let Some(m) = mm.as_mut() {
                m.leave_safe_region();
            }
        }
        loop {
            // Dekker-style with the collector, which sets `stopping` and then reads each
            // thread's state: one of the two sees the other's store.
            self.me.state.store(RUNNING, Ordering::SeqCst);
            if !sh.stopping.load(Ordering::SeqCst) {
                self.set_fast(true);
                return;
            }
            self.me.state.store(SAFE, Ordering::SeqCst);
            let mut w = lock(&sh.world);
            sh.changed.notify_all();
            while sh.stopping.load(Ordering::SeqCst) {
                w = sh.changed.wait(w).unwrap_or_else(PoisonError::into_inner);
            }
        }
    }

    /// Publishes (`on`: the thread runs, and is this thread's current runtime) or withdraws
    /// the fast paths of an MMTk runtime: [`FAST`], and the task block's allocation words
    /// (see `TASK_ALLOC_BUMP_WORD` in [`crate::contract`]), which stay null when every
    /// allocation must call the runtime (no MMTk, a plan without a bump pointer, a
    /// collection every so many calls).
    fn set_fast(&self, on: bool) {
        let task = self.me.task.as_ptr();
        if !on {
            self.me.task[TASK_ALLOC_BUMP_WORD].store(0, Ordering::Release);
            let _ = FAST.try_with(|f| {
                if f.get() == task {
                    f.set(ptr::null());
                }
            });
            return;
        }
        if self.shared.mmtk.is_none() {
            let _ = FAST.try_with(|f| f.set(ptr::null()));
            return;
        }
        let words = match self.mm.try_borrow() {
            Ok(mm) if self.shared.mmtk_every == 0 => {
                mm.as_ref().and_then(MmtkMutator::fast_alloc_words)
            }
            _ => None,
        };
        if let Some(words) = words {
            // The bump word last: it says the others are set.
            for &(w, value) in words.words.iter().filter(|w| w.0 != TASK_ALLOC_BUMP_WORD) {
                self.me.task[w].store(value, Ordering::Relaxed);
            }
            for &(w, value) in words.words.iter().filter(|w| w.0 == TASK_ALLOC_BUMP_WORD) {
                self.me.task[w].store(value, Ordering::Release);
            }
        }
        let _ = FAST.try_with(|f| f.set(task));
    }

    /// Whether this thread is in a safe region.
    fn is_safe(&self) -> bool {
        self.me.state.load(Ordering::Relaxed) == SAFE
    }

    /// Stops here while another thread collects (what `locus_gc_poll` does).
    pub fn poll(&self) {
        if let Some(heap) = self.shared.mmtk {
            if heap.collection_pending() {
                let _ = self.mmtk_do(|m, roots| {
                    m.park(roots);
                    Ok(())
                });
            }
            return;
        }
        if self.shared.stopping.load(Ordering::SeqCst) {
            self.enter_safe();
            self.leave_safe();
        }
    }

    /// Collects now: stops every other mutator of the heap at its next safepoint (a thread
    /// in a safe region counts as stopped), walks every thread's chain, marks from their
    /// roots and the global root regions, sweeps, and lets the others run again. On a
    /// fault nothing is freed.
    ///
    /// # Errors
    /// The first fault found in a chain or the heap; the collection then frees nothing.
    pub fn collect(&self) -> Result<Collection, GcFault> {
        if let Some(done) = self.mmtk_do(|m, roots| {
            m.collect(roots);
            Ok(Collection::default())
        }) {
            return done;
        }
        self.collect_when(false)
            .map(|done| done.unwrap_or_default())
    }

    /// Becomes the collecting thread (parking while another one collects), unless
    /// `only_if_due` and a collection is no longer due once it could, then collects.
    fn collect_when(&self, only_if_due: bool) -> Result<Option<Collection>, GcFault> {
        let sh = &*self.shared;
        loop {
            if only_if_due && !sh.due() {
                return Ok(None);
            }
            if sh
                .stopping
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                break;
            }
            self.enter_safe();
            self.leave_safe();
        }
        let started = collector::Pauses::start();
        let done = {
            let mutators = lock(&sh.mutators);
            self.wait_until_stopped(&mutators);
            self.collect_stopped(&mutators)
        };
        let pause = {
            let _w = lock(&sh.world);
            let pause = started.elapsed();
            sh.stopping.store(false, Ordering::SeqCst);
            sh.changed.notify_all();
            pause
        };
        lock(&sh.state).pauses.record(pause);
        done.map(Some)
    }

    /// Waits until every mutator but this one is [`SAFE`].
    fn wait_until_stopped(&self, mutators: &[Arc<Mutator>]) {
        let sh = &*self.shared;
        let stopped = || {
            mutators
                .iter()
                .all(|m| Arc::ptr_eq(m, &self.me) || m.state.load(Ordering::SeqCst) == SAFE)
        };
        let mut w = lock(&sh.world);
        while !stopped() {
            // The timeout only bounds a missed wake-up; each thread that stops notifies.
            w = match sh.changed.wait_timeout(w, Duration::from_millis(1)) {
                Ok((w, _)) => w,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// The collection proper, every other mutator stopped: this thread's roots first, then
    /// the others' in attach order.
    fn collect_stopped(&self, mutators: &[Arc<Mutator>]) -> Result<Collection, GcFault> {
        let sh = &*self.shared;
        let mut threads = vec![self.me.roots(frames::approx_stack_pointer())];
        threads.extend(
            mutators
                .iter()
                .filter(|m| !Arc::ptr_eq(m, &self.me))
                .map(|m| m.roots(m.sp.load(Ordering::SeqCst))),
        );
        let globals = lock(&sh.globals).clone();
        let mut st = lock(&sh.state);
        let st = &mut *st;
        st.stats.collections += 1;
        let number = st.stats.collections;
        st.since_gc = 0;
        let done = match &sh.stack_maps {
            Some(maps) => statepoints::collect(
                &mut st.heap,
                &statepoints::Roots {
                    maps,
                    threads: &threads,
                    globals: &globals,
                    moving: sh.moving,
                },
                number,
            )?,
            None => collector::collect(&mut st.heap, &threads, &globals, number)?,
        };
        st.stats.objects_moved += done.moved;
        st.stats.frames_walked += done.frames as u64;
        st.stats.deepest_chain = st.stats.deepest_chain.max(done.frames);
        st.stats.max_roots_in_frame = st.stats.max_roots_in_frame.max(done.max_roots);
        st.stats.roots_traced += done.roots as u64;
        st.live_after_gc = st.heap.bytes_allocated - st.heap.bytes_freed;
        Ok(done)
    }

    /// Collects if a call that may collect would: always in stress mode, otherwise when the
    /// allocation threshold is reached. First stops here while another thread collects.
    /// Returns what the collection did, if there was one.
    ///
    /// # Errors
    /// A fault found by the collection, as for [`Runtime::collect`].
    pub fn safepoint(&self) -> Result<Option<Collection>, GcFault> {
        if self.shared.mmtk.is_some() {
            // Another thread's collection first.
            self.poll();
            // MMTk collects when an allocation finds its heap full, and here only when
            // asked to collect every so many calls.
            let every = self.shared.mmtk_every;
            if every > 0
                && (self.shared.mmtk_calls.fetch_add(1, Ordering::Relaxed) + 1)
                    .is_multiple_of(every)
            {
                return self.collect().map(Some);
            }
            return Ok(None);
        }
        self.poll();
        self.collect_when(true)
    }

    /// Registers `[start, end)` as a global root region: each collection reads its aligned
    /// words as roots (each must be null or a live object's address, as a frame's root
    /// slot), until [`Runtime::remove_root_region`]. Objects named there never move.
    ///
    /// # Safety
    /// The memory must stay readable, and be written only with null or live objects'
    /// addresses, until the region is removed (or the heap is gone).
    pub unsafe fn add_root_region(&self, start: usize, end: usize) {
        if start < end {
            lock(&self.shared.globals).push((start, end));
        }
    }

    /// Drops the global root region(s) starting at `start`; returns whether there was one.
    pub fn remove_root_region(&self, start: usize) -> bool {
        let mut globals = lock(&self.shared.globals);
        let before = globals.len();
        globals.retain(|&(s, _)| s != start);
        globals.len() != before
    }

    /// What `locus_gc_alloc` does: [`Runtime::safepoint`], then a new object with `nptrs`
    /// null pointer fields and `nbytes` zero bytes. Returns the object's address.
    ///
    /// # Errors
    /// A fault found by the collection (nothing is allocated then), or
    /// [`GcFault::Allocation`] when the object is too large or memory runs out.
    pub fn alloc(&self, nptrs: usize, nbytes: usize) -> Result<NonNull<u8>, GcFault> {
        self.safepoint()?;
        self.alloc_in_heap(nptrs, nbytes, None)
    }

    /// What `locus_gc_alloc_bytes` does: [`Runtime::safepoint`], then a new tagged object
    /// of `size` zero bytes with `tag` in the word before it (see [`heap`]).
    ///
    /// # Errors
    /// A fault found by the collection, or [`GcFault::Allocation`] (with `nptrs` 0) when the
    /// object cannot be made.
    pub fn alloc_tagged(&self, size: usize, tag: u64) -> Result<NonNull<u8>, GcFault> {
        self.safepoint()?;
        self.alloc_in_heap(0, size, Some(tag))
    }

    fn alloc_in_heap(
        &self,
        nptrs: usize,
        nbytes: usize,
        tag: Option<u64>,
    ) -> Result<NonNull<u8>, GcFault> {
        let fault = |problem| GcFault::Allocation {
            nptrs: i64::try_from(nptrs).unwrap_or(i64::MAX),
            nbytes: i64::try_from(nbytes).unwrap_or(i64::MAX),
            problem,
        };
        // MMTk's fast path first: an object that fits in the thread's allocation buffer
        // never collects, so it needs neither the roots nor the fault report after.
        if tag.is_none() && self.shared.mmtk.is_some() {
            if let Some(obj) = self
                .mm
                .borrow_mut()
                .as_mut()
                .and_then(|m| m.try_alloc(nptrs, nbytes))
            {
                return NonNull::new(obj as *mut u8).ok_or(fault(AllocProblem::OutOfMemory));
            }
        }
        if let Some(done) = self.mmtk_do(|m, roots| {
            let made = match tag {
                Some(tag) => m.alloc_tagged(nbytes, tag, roots),
                None => m.alloc(nptrs, nbytes, roots),
            };
            made.map_err(|e| {
                fault(match e {
                    crate::mmtk::MmtkError::TooLarge { .. } => AllocProblem::TooLarge,
                    crate::mmtk::MmtkError::OutOfMemory { .. } => AllocProblem::HeapFull {
                        limit: m.heap().heap_size().max_bytes(),
                    },
                    _ => AllocProblem::OutOfMemory,
                })
            })
        }) {
            let addr = done?;
            return NonNull::new(addr as *mut u8).ok_or(fault(AllocProblem::OutOfMemory));
        }
        let mut st = lock(&self.shared.state);
        let made = match tag {
            Some(tag) => st.heap.alloc_tagged(nbytes, tag),
            None => st.heap.alloc(nptrs, nbytes),
        };
        let addr = made.map_err(fault)?;
        st.since_gc += (nptrs * 8 + nbytes) as u64;
        // Never null: the address is 32 bytes into a block.
        NonNull::new(addr as *mut u8).ok_or(fault(AllocProblem::OutOfMemory))
    }

    /// Runs `body` with this thread's MMTk mutator and a closure giving its roots (the
    /// frame chain, the pushed regions, the global root regions), then reports the faults
    /// MMTk recorded meanwhile. `None` when the collector is not MMTk.
    fn mmtk_do<R>(
        &self,
        body: impl FnOnce(&mut MmtkMutator, &mut dyn FnMut(&mut RootSet)) -> Result<R, GcFault>,
    ) -> Option<Result<R, GcFault>> {
        let heap = self.shared.mmtk?;
        let mut mm = self.mm.borrow_mut();
        let m = mm.as_mut()?;
        let me = &self.me;
        let globals = &self.shared.globals;
        let maps = self.shared.stack_maps.as_deref();
        let walk_fault: Cell<Option<GcFault>> = Cell::new(None);
        // The roots are what the program gave the runtime under the entry points' contract
        // (the chain head `julia.get_pgcstack` returns, `locus_gc_push_region` ranges on
        // its stack, `locus_gc_add_root_region` ranges, the statepoint slots of the frames
        // the stack maps describe): memory the program keeps for the runtime while a
        // collection runs, as the runtime's own collector also assumes.
        // The first broken root a walk finds (a later one would only repeat the news).
        let found = |fault: GcFault| {
            let first = walk_fault.take().unwrap_or(fault);
            walk_fault.set(Some(first));
        };
        let mut roots = |set: &mut RootSet| {
            let number = heap.collections() + 1;
            let sp = frames::approx_stack_pointer();
            // The chain is checked as the runtime's own collector checks it (aligned, on
            // this thread's stack above the stack pointer, no cycle) before MMTk reads it:
            // a stale or damaged head is the same `corrupt frame` fault under every
            // collector, not a read of whatever memory its `prev` words name.
            match frames::walk(me.head(), sp, me.stack, number) {
                // SAFETY: this thread's chain head (see above), checked.
                Ok(_) => unsafe { set.push_frame(me.head() as usize) },
                Err(fault) => found(fault),
            }
            // A region below the stack pointer belongs to a function that returned
            // without dropping it (a `longjmp` past it): skipped, as the own collector does.
            for (start, end) in lock(&me.scopes).regions() {
                if start >= sp && me.stack.is_none_or(|b| start >= b.low && end <= b.high) {
                    // SAFETY: a pushed region still on this thread's stack (see above).
                    unsafe { set.push_region(start, end) };
                }
            }
            for &(start, end) in lock(globals).iter() {
                // SAFETY: a global root region (see above).
                unsafe { set.push_region(start, end) };
            }
            let fp = me.sp_frame.load(Ordering::Acquire);
            if let (Some(maps), true) = (maps, fp != 0) {
                match statepoints::slot_lanes(
                    maps,
                    fp,
                    me.stack,
                    me.entered.load(Ordering::Acquire),
                    number,
                ) {
                    Ok((lanes, _)) => {
                        for (base, derived) in lanes {
                            // SAFETY: slots of this thread's frames that the stack maps
                            // name, below the frame that called into the runtime, which
                            // waits for the collection (see above).
                            unsafe { set.push_statepoint(base, derived) };
                        }
                    }
                    Err(fault) => found(fault),
                }
            }
        };
        let done = body(m, &mut roots);
        drop(mm);
        if let Some(fault) = walk_fault.take() {
            self.report(fault);
        }
        self.report_mmtk_faults(heap);
        Some(done)
    }

    /// Prints MMTk's recorded faults, one line each, then reports them as one
    /// [`GcFault::Mmtk`].
    fn report_mmtk_faults(&self, heap: MmtkHeap) {
        let lines = heap.take_faults();
        if lines.is_empty() {
            return;
        }
        for line in &lines {
            let _ = writeln!(std::io::stderr(), "  mmtk: {line}");
        }
        self.report(GcFault::Mmtk { count: lines.len() });
    }

    /// What `locus_gc_foreign_read` does: [`Runtime::safepoint`], then the `i64` at
    /// `raw + offset`, which must lie inside the body of a live object.
    ///
    /// # Errors
    /// A fault found by the collection, or [`GcFault::ForeignRead`] when the bytes are not
    /// inside the body of a live object.
    pub fn foreign_read(&self, raw: *const u8, offset: i64) -> Result<i64, GcFault> {
        self.safepoint()?;
        match self.read_checked(raw as usize, offset) {
            (value, None) => Ok(value),
            (_, Some(fault)) => Err(fault),
        }
    }

    /// Reads 8 bytes at `raw + offset` if they are inside a live object's body. With a
    /// fault, the value is poison for the body of a freed object (what stress mode wrote
    /// there, known without touching it), else 0.
    fn read_checked(&self, raw: usize, offset: i64) -> (i64, Option<GcFault>) {
        let fault = |problem| {
            Some(GcFault::ForeignRead {
                raw,
                offset,
                problem,
            })
        };
        let Some(at) = (raw != 0)
            .then(|| raw.checked_add_signed(offset as isize))
            .flatten()
            .filter(|at| at.checked_add(8).is_some())
        else {
            return (0, fault(ReadProblem::BadAddress));
        };
        // SAFETY: only called below for 8 bytes inside the body of a live object.
        let read = |at: usize| unsafe { (at as *const i64).read_unaligned() };
        if let Some(heap) = self.shared.mmtk {
            // MMTk's objects are not in the runtime's heap: `raw` must be an object's
            // address, and an untagged object's size (in its header) bounds the read.
            let Some(size) = heap.readable_bytes(raw) else {
                return (0, fault(ReadProblem::NotInHeap));
            };
            return match at.checked_sub(raw) {
                Some(off) if off.saturating_add(8) <= size => (read(at), None),
                _ => (0, fault(ReadProblem::NotInHeap)),
            };
        }
        match self.lookup(at) {
            Lookup::Nothing => (0, fault(ReadProblem::NotInHeap)),
            Lookup::Live(object) | Lookup::Freed(object) | Lookup::Inside { object, .. } => {
                let in_body = at >= object.addr && at - object.addr + 8 <= object.size();
                match (object.freed_in, in_body) {
                    (None, true) => (read(at), None),
                    (None, false) => (0, fault(ReadProblem::OutOfBounds(object))),
                    // Stress mode poisoned it (and may have made it inaccessible): the word
                    // is poison, known without touching the memory.
                    (Some(_), true) => (POISON_WORD as i64, fault(ReadProblem::Freed(object))),
                    (Some(_), false) => (0, fault(ReadProblem::Freed(object))),
                }
            }
        }
    }

    /// What `addr` is: a live object, a freed one (stress mode), a place inside one, or
    /// nothing this heap knows.
    pub fn lookup(&self, addr: usize) -> Lookup {
        lock(&self.shared.state).heap.lookup(addr)
    }

    /// Walks this thread's chain as a collection would (with the same checks) and reads
    /// every frame.
    ///
    /// # Errors
    /// [`GcFault::CorruptFrame`] for the first frame that fails a check.
    pub fn frames(&self) -> Result<Vec<FrameInfo>, GcFault> {
        let sp = frames::approx_stack_pointer();
        let chain = frames::walk(self.me.head(), sp, self.me.stack, 0)?;
        Ok(chain
            .iter()
            .map(|f| FrameInfo {
                index: f.index,
                addr: f.addr,
                // SAFETY: `walk` checked the frame and nothing ran since.
                roots: (0..f.nroots).map(|slot| unsafe { f.root(slot) }).collect(),
            })
            .collect())
    }

    /// The counters (of the heap, over every thread attached to it).
    pub fn stats(&self) -> Stats {
        self.report_freed_accesses();
        let faults = lock(&self.shared.faults).len() as u64;
        let st = lock(&self.shared.state);
        if let Some(mmtk) = self.shared.mmtk {
            let m = mmtk.stats();
            return Stats {
                collections: m.collections,
                objects_allocated: m.objects_allocated,
                bytes_allocated: m.bytes_allocated,
                bytes_live: m.used_bytes as u64,
                objects_moved: m.objects_moved,
                pause_median_ns: m.pause_median_ns,
                pause_max_ns: m.pause_max_ns,
                faults,
                write_barriers: self.write_barriers(),
                ..st.stats
            };
        }
        let heap = &st.heap;
        Stats {
            objects_allocated: heap.objects_allocated,
            objects_freed: heap.objects_freed,
            objects_live: heap.live_objects(),
            bytes_allocated: heap.bytes_allocated,
            bytes_freed: heap.bytes_freed,
            bytes_live: heap.bytes_allocated - heap.bytes_freed,
            faults,
            write_barriers: self.write_barriers(),
            pause_median_ns: st.pauses.median_ns(),
            pause_max_ns: st.pauses.max_ns(),
            ..st.stats
        }
    }

    /// [`Stats::write_barriers`]: the detached threads' and each attached thread's.
    fn write_barriers(&self) -> u64 {
        let mutators = lock(&self.shared.mutators);
        let attached: u64 = mutators
            .iter()
            .map(|m| m.barriers.load(Ordering::Relaxed))
            .sum();
        self.shared.write_barriers.load(Ordering::Relaxed) + attached
    }

    /// The faults the `extern "C"` functions and the signal handler reported (on any thread
    /// of the heap), oldest first.
    pub fn faults(&self) -> Vec<GcFault> {
        self.report_freed_accesses();
        lock(&self.shared.faults).clone()
    }

    /// Takes the recorded faults, leaving none (the count in [`Stats::faults`] drops too).
    pub fn take_faults(&self) -> Vec<GcFault> {
        self.report_freed_accesses();
        std::mem::take(&mut *lock(&self.shared.faults))
    }

    /// Reports, as [`GcFault::FreedAccess`], the accesses to freed objects the signal
    /// handler recorded since the last call (only for [`OnFault::Record`] and
    /// [`OnFault::Call`]; the others end the process in the handler).
    fn report_freed_accesses(&self) {
        let accesses = match self.shared.state.try_lock() {
            Ok(mut st) => st.heap.take_freed_accesses(),
            Err(_) => return,
        };
        for (addr, object) in accesses {
            self.report(GcFault::FreedAccess { addr, object });
        }
    }

    /// Records a fault and hands it to the handler.
    fn report(&self, fault: GcFault) {
        lock(&self.shared.faults).push(fault);
        let ends = matches!(self.shared.on_fault, OnFault::Exit | OnFault::Abort);
        let me = Arc::as_ptr(&self.me) as usize;
        let ending = if ends {
            let ending = &self.shared.ending;
            ending.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst)
        } else {
            Ok(0)
        };
        if ending == Err(me) {
            // This thread is ending the process already: the fault came from its own
            // `exit` (thread-local destructors handing its roots over). Recorded above.
            return;
        }
        if ending.is_err() {
            // Another thread is ending the process with its line. This one never runs
            // compiled code again: counted as stopped, so that a collection started
            // meanwhile (the ending thread's `exit` runs thread-local destructors that wait
            // for one) does not wait for it. Not when the fault came from inside an MMTk
            // call that holds this thread's mutator (handing it over needs it).
            let mutator_free = self.mm.try_borrow_mut().is_ok();
            if mutator_free {
                self.enter_safe();
            }
            loop {
                std::thread::park();
            }
        }
        match &self.shared.on_fault {
            OnFault::Exit => {
                print_fault(&fault);
                std::process::exit(crate::signals::DANGLING_EXIT_STATUS);
            }
            OnFault::Abort => {
                print_fault(&fault);
                std::process::abort();
            }
            OnFault::Record => {}
            OnFault::Call(handler) => handler(&fault),
        }
    }
}

/// The process's MMTk heap for `plan`, made now if there is none yet.
fn mmtk_heap(plan: Plan, config: &Config) -> Result<MmtkHeap, String> {
    if !plan.pins() && config.stack_maps.is_none() {
        return Err(format!(
            "MMTk plan {plan} copies every object and cannot pin: frame roots cannot be \
             updated (use marksweep, immix or stickyimmix)"
        ));
    }
    if config.moving {
        return Err(format!(
            "the MMTk collector (plan {plan}) does not combine with moving mode"
        ));
    }
    match MmtkHeap::get() {
        Some(heap) if heap.plan() == plan => Ok(heap),
        Some(heap) => Err(format!(
            "this process has an MMTk heap with plan {} already: MMTk allows one heap per \
             process, so a runtime with plan {plan} cannot be made",
            heap.plan()
        )),
        None => {
            let heap = match config.heap_bytes {
                Some(0) => return Err("the MMTk heap size must not be 0".into()),
                Some(bytes) => HeapSize::Fixed(bytes),
                None => HeapSize::from_env()?.unwrap_or_else(HeapSize::default_dynamic),
            };
            let mut options = MmtkOptions::with_heap(plan, heap);
            options.always_defrag = std::env::var_os(MMTK_DEFRAG_ENV).is_some_and(|v| v == "1");
            MmtkHeap::new(options).map_err(|e| format!("cannot make the MMTk heap: {e}"))
        }
    }
}

/// What [`MMTK_COLLECT_EVERY_ENV`] sets: 0 when it is unset.
///
/// # Errors
/// A sentence naming the variable when its value is not a positive number.
pub fn mmtk_collect_every_from_env() -> Result<u64, String> {
    match std::env::var_os(MMTK_COLLECT_EVERY_ENV) {
        None => Ok(0),
        Some(value) => {
            let text = value.to_string_lossy();
            match text.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "{MMTK_COLLECT_EVERY_ENV}={text}: expected a positive number N (collect at \
                     every Nth call that may collect)"
                )),
            }
        }
    }
}

/// A heap size: decimal bytes, optionally followed by `K`, `M` or `G` (either case; powers
/// of 1024), e.g. `4096`, `64k`, `256M`, `2G`. Not 0.
///
/// # Errors
/// A sentence saying what is wrong (empty, not a number, an unknown suffix, 0, too large).
pub fn parse_heap_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last() {
        None => return Err("an empty heap size (expected bytes, or e.g. 256M)".into()),
        Some((i, c)) if c.is_ascii_alphabetic() => match c.to_ascii_uppercase() {
            'K' => (&text[..i], 10),
            'M' => (&text[..i], 20),
            'G' => (&text[..i], 30),
            _ => {
                return Err(format!(
                    "unknown size suffix `{c}` (expected bytes, or a number with K, M or G)"
                ))
            }
        },
        Some(_) => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{text}` is not a heap size (expected bytes, or a number with K, M or G, e.g. 256M)"
        ));
    }
    let bytes = digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1usize << shift))
        .ok_or_else(|| format!("heap size `{text}` is too large"))?;
    if bytes == 0 {
        return Err("the heap size must not be 0".into());
    }
    Ok(bytes)
}

fn print_fault(fault: &GcFault) {
    let _ = writeln!(std::io::stderr(), "locus: gc: {fault}");
}

fn fatal(message: fmt::Arguments<'_>) -> ! {
    let _ = writeln!(std::io::stderr(), "locus: gc: {message}");
    std::process::abort()
}

/// Whether a runtime is installed on the current thread (the `extern "C"` functions abort
/// when none is).
pub fn is_installed() -> bool {
    CURRENT
        .try_with(|cur| !cur.get().is_null())
        .unwrap_or(false)
}

/// Owns the runtime installed by [`Runtime::enter`] or [`HeapHandle::attach`] and
/// dereferences to it. Dropping it detaches the thread from the heap (waiting while a
/// collection runs), uninstalls the runtime (the one current before runs again) and, when
/// no thread or handle is left, frees the heap. Not `Send`: it belongs to the thread that
/// entered.
pub struct Guard {
    rt: NonNull<Runtime>,
    _not_send: PhantomData<*const Runtime>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Guard").field(&**self).finish()
    }
}

impl Deref for Guard {
    type Target = Runtime;

    fn deref(&self) -> &Runtime {
        // SAFETY: the guard owns the runtime until it is dropped.
        unsafe { self.rt.as_ref() }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let me = self.rt.as_ptr().cast_const();
        // Scoped pins the thread's code left (a frame unwound past every landing pad, a
        // `longjmp`) would keep their objects for the heap's life.
        self.reset_scopes(0);
        // Safe while it waits for the list: a collection running now may scan what is
        // still linked, and must not wait for this thread.
        self.enter_safe();
        {
            let mut mutators = lock(&self.shared.mutators);
            mutators.retain(|m| !Arc::ptr_eq(m, &self.me));
            // Its barriers outlive it (under the lock, so that `stats` counts them once).
            self.shared
                .write_barriers
                .fetch_add(self.me.barriers.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let prev = self.prev.get();
        let _ = CURRENT.try_with(|cur| {
            if cur.get() == me {
                cur.set(prev);
                if !prev.is_null() {
                    // SAFETY: `CURRENT` only holds runtimes owned by live guards here.
                    unsafe { &*prev }.leave_safe();
                }
                return;
            }
            // Dropped out of order: unlink this runtime from the list of installed ones.
            let mut p = cur.get();
            while !p.is_null() {
                // SAFETY: every runtime on the list is owned by a live guard on this thread.
                let r = unsafe { &*p };
                if r.prev.get() == me {
                    r.prev.set(prev);
                    break;
                }
                p = r.prev.get();
            }
        });
        // SAFETY: made by `Box::leak` in `install`, no longer reachable from `CURRENT`.
        drop(unsafe { Box::from_raw(self.rt.as_ptr()) });
    }
}

/// Runs an entry point's body with the current runtime, catching panics. The thread must
/// not be in a safe region.
fn entry<R>(name: &'static str, body: impl FnOnce(&Runtime) -> R) -> R {
    entry_in(name, false, body)
}

/// [`entry`], also for the entries a thread may call in a safe region (`safe_ok`).
fn entry_in<R>(name: &'static str, safe_ok: bool, body: impl FnOnce(&Runtime) -> R) -> R {
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let rt = CURRENT.try_with(Cell::get).unwrap_or(ptr::null());
        if rt.is_null() {
            fatal(format_args!(
                "{name} was called on a thread with no runtime (Runtime::enter, or locus_gc_thread_attach)"
            ));
        }
        // SAFETY: `CURRENT` only holds runtimes owned by live guards on this thread.
        let rt = unsafe { &*rt };
        if !safe_ok && rt.is_safe() {
            fatal(format_args!(
                "{name} was called inside a safe region (locus_gc_enter_safe_region without locus_gc_leave_safe_region)"
            ));
        }
        // Freed objects are the runtime's own heap's (stress mode poisons them); MMTk's
        // heap has none, and its allocations should not take the own heap's lock.
        if rt.shared.mmtk.is_none() {
            rt.report_freed_accesses();
        }
        body(rt)
    }));
    match result {
        Ok(value) => value,
        Err(_) => fatal(format_args!("internal error: a panic in {name}")),
    }
}

/// Returns the address of the current thread's chain head slot. Never collects.
///
/// A host that catches an exception thrown through code lowered with frame roots puts the
/// head back itself: the frames the exception unwound never unlinked, and the head still
/// names the innermost of them, stack memory the host's next calls reuse (the next
/// collection would walk it). Read `*locus_gc_get_pgcstack()` before calling compiled code
/// and store it back in the handler (locus-gc's `tests/host_catch.rs` does this from C++).
#[no_mangle]
pub extern "C" fn locus_gc_get_pgcstack() -> *mut *mut GcFrame {
    // Compiled code asks at the start of every function that takes part: under MMTk,
    // where there are no freed objects to report, a thread with a runtime outside a safe
    // region gets its answer from one thread-local load ([`FAST`]).
    let task = FAST.try_with(Cell::get).unwrap_or(ptr::null());
    if !task.is_null() {
        // Where `Runtime::pgcstack` points: word TASK_GCSTACK_WORD of the block.
        return task.wrapping_add(TASK_GCSTACK_WORD).cast_mut().cast();
    }
    pgcstack_slow()
}

/// `locus_gc_get_pgcstack` without the one-load answer: out of line, so that the fast path
/// needs no stack frame (with the entry's checks inlined it saved registers and made room
/// on the stack before the load).
#[cold]
#[inline(never)]
fn pgcstack_slow() -> *mut *mut GcFrame {
    entry(RUNTIME_GET_PGCSTACK, Runtime::pgcstack)
}

/// May collect, then returns a new object with `nptrs` null pointer fields followed by
/// `nbytes` zero bytes. Never returns null: an allocation that cannot be made is reported
/// and then aborts.
#[no_mangle]
pub extern "C" fn locus_gc_alloc(nptrs: i64, nbytes: i64) -> *mut u8 {
    // What compiled code may do inline (the `TASK_ALLOC_*` words), first.
    let task = FAST.try_with(Cell::get).unwrap_or(ptr::null());
    if let (false, Ok(p), Ok(b)) = (
        task.is_null(),
        usize::try_from(nptrs),
        usize::try_from(nbytes),
    ) {
        // SAFETY: `FAST` holds the current runtime's task block while it runs on MMTk,
        // whose allocation words are null or its mutator's (`Runtime::set_fast`), and the
        // mutator is not in use: compiled code called in.
        if let Some(obj) = unsafe { MmtkHeap::alloc_from_task(task, p, b) } {
            return obj as *mut u8;
        }
    }
    if let Some(obj) = fast_alloc(nptrs, nbytes) {
        return obj;
    }
    entry(RUNTIME_ALLOC, |rt| allocate(rt, nptrs, nbytes, None))
}

/// [`locus_gc_alloc`]'s common case on MMTk, without the entry's bookkeeping: a thread
/// with a runtime, outside a safe region, no collection pending or asked for every so
/// many calls, and an object that fits in the thread's allocation buffer
/// ([`MmtkMutator::try_alloc`]). `None` sends the call the whole way, which does the same
/// then (a safepoint that finds nothing to do, then the same fast path) or more. Never
/// panics.
#[inline]
fn fast_alloc(nptrs: i64, nbytes: i64) -> Option<*mut u8> {
    with_current(|rt| {
        let heap = rt.shared.mmtk?;
        if heap.collection_pending() || rt.shared.mmtk_every > 0 || rt.is_safe() {
            return None;
        }
        let (nptrs, nbytes) = (usize::try_from(nptrs).ok()?, usize::try_from(nbytes).ok()?);
        let mut mm = rt.mm.try_borrow_mut().ok()?;
        let obj = mm.as_mut()?.try_alloc(nptrs, nbytes)?;
        Some(obj as *mut u8)
    })
}

/// `fast(rt)` with the calling thread's runtime, without an entry's checks and reports;
/// `None` when the thread has none (the entry then says so) or `fast` declines.
fn with_current<R>(fast: impl FnOnce(&Runtime) -> Option<R>) -> Option<R> {
    let rt = CURRENT.try_with(Cell::get).ok()?;
    if rt.is_null() {
        return None;
    }
    // SAFETY: `CURRENT` only holds runtimes owned by live guards on this thread.
    fast(unsafe { &*rt })
}

/// What `julia.gc_alloc_bytes(ptls, size, tag)` becomes: may collect, then returns a new
/// tagged object of `size` zero bytes with `tag` in the word before it. `ptls` is not used
/// (the runtime is the thread's). Never returns null, as [`locus_gc_alloc`].
#[no_mangle]
pub extern "C" fn locus_gc_alloc_bytes(ptls: *const u8, size: i64, tag: i64) -> *mut u8 {
    let _ = ptls;
    entry(RUNTIME_ALLOC_BYTES, |rt| {
        allocate(rt, 0, size, Some(tag as u64))
    })
}

/// What Julia's `jl_alloc_genericmemory_unchecked(ptls, nbytes, tag)` becomes: may collect,
/// then returns a new tagged `GenericMemory` of `16 + nbytes` zero bytes, its data inline:
/// the data pointer (word 1) is set to its byte 16, the length (word 0) is left for the
/// caller. Never returns null, as [`locus_gc_alloc`].
#[no_mangle]
pub extern "C" fn locus_gc_alloc_genericmemory(
    ptls: *const u8,
    nbytes: i64,
    tag: *const u8,
) -> *mut u8 {
    let _ = ptls;
    entry(RUNTIME_ALLOC_GENERICMEMORY, |rt| {
        let size = if nbytes < 0 {
            nbytes
        } else {
            nbytes.saturating_add(MEMORY_INLINE_DATA_OFFSET)
        };
        let obj = allocate(rt, 0, size, Some(tag as u64));
        let data = obj.wrapping_add(MEMORY_INLINE_DATA_OFFSET as usize);
        let field = obj
            .wrapping_add(MEMORY_PTR_OFFSET as usize)
            .cast::<*mut u8>();
        // SAFETY: `obj` is a new object of at least 16 bytes, 16-byte aligned: word 1 is in
        // it and aligned.
        unsafe { field.write(data) };
        obj
    })
}

/// An entry point's allocation: may collect (a fault found is reported), then allocates;
/// an object that cannot be made is reported, then the process aborts.
fn allocate(rt: &Runtime, nptrs: i64, nbytes: i64, tag: Option<u64>) -> *mut u8 {
    if let Err(fault) = rt.safepoint() {
        rt.report(fault);
    }
    let made = match (usize::try_from(nptrs), usize::try_from(nbytes)) {
        (Ok(p), Ok(b)) => rt.alloc_in_heap(p, b, tag),
        _ => Err(GcFault::Allocation {
            nptrs,
            nbytes,
            problem: AllocProblem::Negative,
        }),
    };
    match made {
        Ok(obj) => obj.as_ptr(),
        Err(fault) => {
            rt.report(fault);
            fatal(format_args!("cannot continue after a failed allocation"))
        }
    }
}

/// May collect.
#[no_mangle]
pub extern "C" fn locus_gc_safepoint() {
    entry(RUNTIME_SAFEPOINT, |rt| {
        if let Err(fault) = rt.safepoint() {
            rt.report(fault);
        }
    })
}

/// A safepoint poll (what `--safepoint-polls` puts at loop back edges): stops here while
/// another thread collects; never starts a collection itself, even in stress mode.
#[no_mangle]
pub extern "C" fn locus_gc_poll() {
    // The common case, no collection wanted, without the entry's bookkeeping: a
    // thread-local read and a relaxed load (a stop is seen at a later poll at worst).
    let rt = CURRENT.try_with(Cell::get).unwrap_or(ptr::null());
    if !rt.is_null() {
        // SAFETY: `CURRENT` only holds runtimes owned by live guards on this thread.
        let rt = unsafe { &*rt };
        if !rt.shared.stopping.load(Ordering::Relaxed)
            && !rt.is_safe()
            && !rt.shared.mmtk.is_some_and(|h| h.collection_pending())
        {
            return;
        }
    }
    entry(RUNTIME_POLL, Runtime::poll)
}

/// Enters a safe region: until [`locus_gc_leave_safe_region`], the calling thread counts as
/// stopped, and other threads collect without waiting for it (scanning its frames as they
/// are now). Call it before a foreign call that may block or run long (a `pthread_join`, a
/// read, a lock); the foreign code must not touch the chain, call the runtime's other entry
/// points, or use an object the thread's frames (its roots, `jl_roots`) or a pin do not
/// hold. Under a collector that moves objects, it may read only the bytes of a pinned
/// object (`jl_roots`, `gc_preserve`, a pin): not its pointer fields, which a collection
/// may rewrite at any time, nor an object they name, which may move (a pin holds the object
/// it names in place, not what that reaches). Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_enter_safe_region() {
    entry(RUNTIME_ENTER_SAFE_REGION, Runtime::enter_safe)
}

/// Leaves the safe region [`locus_gc_enter_safe_region`] entered, first waiting for a
/// collection that runs to end. Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_leave_safe_region() {
    entry_in(RUNTIME_LEAVE_SAFE_REGION, true, |rt| {
        if !rt.is_safe() {
            fatal(format_args!(
                "{RUNTIME_LEAVE_SAFE_REGION} was called outside a safe region"
            ));
        }
        rt.leave_safe();
    })
}

/// The calling thread's heap, for another thread to join with
/// [`crate::locus_gc_thread_attach_heap`]: valid while a thread stays attached to it.
/// Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_heap() -> *const u8 {
    entry(RUNTIME_HEAP, |rt| Arc::as_ptr(&rt.shared).cast())
}

/// Registers `[start, end)` as a global root region of the calling thread's heap: a table
/// of tracked pointers outside the stack (a global array) that every collection reads as
/// roots, each aligned word null or a live object's address, as a frame's root slot.
/// Objects it names never move. Never collects.
///
/// # Safety
/// The memory must stay readable, and hold only null or live objects' addresses, until
/// [`locus_gc_remove_root_region`].
#[no_mangle]
pub unsafe extern "C" fn locus_gc_add_root_region(start: *const u8, end: *const u8) {
    entry(RUNTIME_ADD_ROOT_REGION, |rt| {
        // SAFETY: the caller's promise.
        unsafe { rt.add_root_region(start as usize, end as usize) }
    })
}

/// Drops the global root region that starts at `start`; returns 1 if there was one, else
/// 0. Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_remove_root_region(start: *const u8) -> i32 {
    entry(RUNTIME_REMOVE_ROOT_REGION, |rt| {
        i32::from(rt.remove_root_region(start as usize))
    })
}

/// A foreign function: may collect, then returns the `i64` at `raw + offset`, which must lie
/// inside the body of a live object. On a fault it returns poison ([`heap::POISON_WORD`])
/// for the body of a freed object (stress mode), else 0; it never touches a freed object.
#[no_mangle]
pub extern "C" fn locus_gc_foreign_read(raw: *const u8, offset: i64) -> i64 {
    let raw = raw as usize;
    entry(RUNTIME_FOREIGN_READ, |rt| {
        if let Err(fault) = rt.safepoint() {
            rt.report(fault);
        }
        let (value, fault) = rt.read_checked(raw, offset);
        if let Some(fault) = fault {
            rt.report(fault);
        }
        value
    })
}

/// A callee that roots its argument itself, as spec 003 describes for CalleeRooted
/// (addrspace 12) arguments: it links a frame of its own holding `obj`, may collect, then
/// returns the `i64` at `obj + offset` (checked like [`locus_gc_foreign_read`]) and unlinks
/// the frame. Its caller need not root `obj` for this call.
#[no_mangle]
pub extern "C" fn locus_gc_callee_rooted_read(obj: *const u8, offset: i64) -> i64 {
    let raw = obj as usize;
    entry(RUNTIME_CALLEE_ROOTED_READ, |rt| {
        let head = rt.pgcstack();
        // The frame lives on this function's stack, like a compiled function's alloca:
        // [nroots << 2, prev, root].
        // SAFETY: `head` is this thread's chain head slot, valid while the runtime is.
        let prev = unsafe { *head } as usize;
        let mut frame: [usize; 3] = [1 << 2, prev, raw];
        // SAFETY: as above; the frame outlives the link, which is undone before returning.
        unsafe { *head = frame.as_mut_ptr().cast() };
        if let Err(fault) = rt.safepoint() {
            rt.report(fault);
        }
        // Reloaded from the frame: a copying collector (MMTk's SemiSpace, GenCopy) moves
        // the object and rewrites the root, as compiled code reloads a rooted value.
        // SAFETY: the frame is this function's own, still linked.
        let obj = unsafe { std::ptr::read_volatile(&frame[2]) };
        let (value, fault) = rt.read_checked(obj, offset);
        // SAFETY: as above.
        unsafe { *head = frame[1] as *mut GcFrame };
        if let Some(fault) = fault {
            rt.report(fault);
        }
        value
    })
}

/// A write barrier: `parent` now refers to objects it may not have referred to before
/// (what Julia's `julia.write_barrier` and friends lower to). On MMTk's generational plans
/// (StickyImmix, GenCopy) `parent` is remembered, so that a young object it now refers to
/// survives the next nursery collection; the other collectors have nothing to remember
/// and only count ([`Stats::write_barriers`]). Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_write_barrier(parent: *const u8) {
    barrier(RUNTIME_WRITE_BARRIER, |m| {
        let (heap, parent) = (m.heap(), parent as usize);
        // MMTk's barrier reads and writes the metadata of whatever address it is given:
        // compiled code's promise that `parent` is an object is checked first (on the
        // plans that remember anything).
        if parent != 0 && heap.plan().generational() && heap.is_object(parent) {
            // SAFETY: a live object of this heap (just checked).
            unsafe { m.write_barrier(parent) };
        }
    });
}

/// What both write barriers share: every barrier is counted ([`Stats::write_barriers`]); a
/// collector that remembers nothing only counts, without the entry's checks, and on a
/// generational MMTk plan `remember` runs with the thread's mutator.
fn barrier(name: &'static str, remember: impl FnOnce(&mut MmtkMutator)) {
    let counted = with_current(|rt| {
        let remembers = rt
            .shared
            .mmtk
            .is_some_and(|heap| heap.plan().generational());
        (!remembers).then(|| rt.me.count_barrier())
    });
    if counted.is_some() {
        return;
    }
    remembering_barrier(name, remember);
}

/// [`barrier`] on a plan that remembers (or without a runtime): out of line, so that the
/// counting path needs no stack frame (inlined, the entry's checks made every barrier save
/// registers and make room on the stack first).
#[inline(never)]
fn remembering_barrier(name: &'static str, remember: impl FnOnce(&mut MmtkMutator)) {
    entry(name, |rt| {
        rt.me.count_barrier();
        if let Some(m) = rt.mm.borrow_mut().as_mut() {
            remember(m);
        }
    })
}

/// The write barrier after a store at `addr` into an object the compiled code could not
/// name (the lowering places it after a store through a Derived argument, the caller's
/// object): on a generational MMTk plan, the barrier on the live object holding `addr`
/// (its address or a place inside it); an address in no object (the stack, a global, C
/// memory) needs none: such memory is a root region or no GC memory. On the other plans
/// and the runtime's own collectors it only counts ([`Stats::write_barriers`]), without
/// looking `addr` up. Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_write_barrier_interior(addr: *mut u8) {
    // Looked up in MMTk's object metadata: any address is safe to ask about.
    barrier(crate::contract::RUNTIME_WRITE_BARRIER_INTERIOR, |m| {
        m.write_barrier_interior(addr as usize)
    });
}

/// Runs `body` with `fp` recorded as the frame the statepoint walk starts from.
fn from_frame<R>(fp: usize, body: impl FnOnce() -> R) -> R {
    let set = |v: usize| {
        let _ = CURRENT.try_with(|cur| {
            let rt = cur.get();
            if !rt.is_null() {
                // SAFETY: `CURRENT` only holds runtimes owned by live guards on this thread.
                unsafe { &*rt }.me.sp_frame.store(v, Ordering::Release);
            }
        });
    };
    set(fp);
    let r = body();
    set(0);
    r
}

/// [`locus_gc_alloc`] called by a statepoint wrapper, `fp` its frame address.
#[no_mangle]
pub extern "C" fn locus_gc_sp_alloc(nptrs: i64, nbytes: i64, fp: usize) -> *mut u8 {
    // The fast path never collects: no frame to record for a stack walk.
    if let Some(obj) = fast_alloc(nptrs, nbytes) {
        return obj;
    }
    from_frame(fp, || locus_gc_alloc(nptrs, nbytes))
}

/// [`locus_gc_alloc_bytes`] called by a statepoint wrapper.
#[no_mangle]
pub extern "C" fn locus_gc_sp_alloc_bytes(
    ptls: *const u8,
    size: i64,
    tag: i64,
    fp: usize,
) -> *mut u8 {
    from_frame(fp, || locus_gc_alloc_bytes(ptls, size, tag))
}

/// [`locus_gc_alloc_genericmemory`] called by a statepoint wrapper.
#[no_mangle]
pub extern "C" fn locus_gc_sp_alloc_genericmemory(
    ptls: *const u8,
    nbytes: i64,
    tag: *const u8,
    fp: usize,
) -> *mut u8 {
    from_frame(fp, || locus_gc_alloc_genericmemory(ptls, nbytes, tag))
}

/// [`locus_gc_safepoint`] called by a statepoint wrapper.
#[no_mangle]
pub extern "C" fn locus_gc_sp_safepoint(fp: usize) {
    from_frame(fp, || locus_gc_safepoint())
}

/// [`locus_gc_poll`] called by a statepoint wrapper.
#[no_mangle]
pub extern "C" fn locus_gc_sp_poll(fp: usize) {
    from_frame(fp, || locus_gc_poll())
}

/// [`locus_gc_foreign_read`] called by a statepoint wrapper.
#[no_mangle]
pub extern "C" fn locus_gc_sp_foreign_read(raw: *const u8, offset: i64, fp: usize) -> i64 {
    from_frame(fp, || locus_gc_foreign_read(raw, offset))
}

/// [`locus_gc_callee_rooted_read`] called by a statepoint wrapper.
#[no_mangle]
pub extern "C" fn locus_gc_sp_callee_rooted_read(obj: *const u8, offset: i64, fp: usize) -> i64 {
    from_frame(fp, || locus_gc_callee_rooted_read(obj, offset))
}

/// Pins the live object holding `addr` (its address or a place in it) once more: it is a
/// root and does not move until [`locus_gc_unpin`], whatever unwinds (a host's pin; under
/// statepoint roots, an object live into a landing pad that uses the exception, pinned
/// across its `invoke`; `gc_preserve` and `jl_roots` take [`locus_gc_pin_scoped`]). Never
/// collects; an address in no live object is ignored.
#[no_mangle]
pub extern "C" fn locus_gc_pin(addr: *const u8) {
    entry(crate::contract::RUNTIME_PIN, |rt| {
        rt.pin_in_heap(addr as usize);
    })
}

/// A pin on the MMTk heap: an address in no live object is ignored (as the own collector
/// does); an object a copying plan cannot pin is a [`GcFault::PinRefused`]. Whether the
/// object was pinned.
fn mmtk_pin(rt: &Runtime, heap: MmtkHeap, addr: usize) -> bool {
    match heap.pin(addr) {
        Ok(_) => true,
        Err(crate::mmtk::PinRefused::Moves(plan)) => {
            rt.report(GcFault::PinRefused { addr, plan });
            false
        }
        Err(_) => false,
    }
}

impl Runtime {
    /// Pins the live object holding `addr` once more (the heap's count, MMTk's or the
    /// own collector's); whether there was one to pin.
    fn pin_in_heap(&self, addr: usize) -> bool {
        match self.shared.mmtk {
            Some(heap) => mmtk_pin(self, heap, addr),
            None => lock(&self.shared.state).heap.pin(addr),
        }
    }

    /// Undoes one [`Runtime::pin_in_heap`] of the object holding `addr`.
    fn unpin_in_heap(&self, addr: usize) {
        match self.shared.mmtk {
            Some(heap) => {
                heap.unpin(addr);
            }
            None => {
                lock(&self.shared.state).heap.unpin(addr);
            }
        }
    }
}

/// Undoes one [`locus_gc_pin`]. Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_unpin(addr: *const u8) {
    entry(crate::contract::RUNTIME_UNPIN, |rt| {
        rt.unpin_in_heap(addr as usize)
    })
}

/// Pins the live object holding `addr` as [`locus_gc_pin`] does, and records the pin on
/// the calling thread's scope stack, beside its root regions: undone by
/// [`locus_gc_unpin_scoped`], or by a [`locus_gc_region_reset`] below it, which is how a
/// landing pad drops the pins of the frames an exception unwound. What `gc_preserve_begin`
/// and a `jl_roots` bundle become under statepoint roots. Returns the depth after (nothing
/// is recorded for an address in no live object). Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_pin_scoped(addr: *const u8) -> i64 {
    entry(crate::contract::RUNTIME_PIN_SCOPED, |rt| {
        scopes::depth_as_i64(rt.pin_scoped(addr as usize))
    })
}

/// Undoes the innermost [`locus_gc_pin_scoped`] pin of `addr` still on the calling
/// thread's scope stack, nothing when there is none. Returns the depth after. Never
/// collects. Call it only for a pin of the caller's own scope still in force: after a reset
/// dropped that pin, an outer frame's pin of the same address would be the innermost and
/// would be undone instead (lowered code never does this).
#[no_mangle]
pub extern "C" fn locus_gc_unpin_scoped(addr: *const u8) -> i64 {
    entry(crate::contract::RUNTIME_UNPIN_SCOPED, |rt| {
        scopes::depth_as_i64(rt.unpin_scoped(addr as usize))
    })
}

/// The live object holding `addr` never moves again (its address escaped through
/// `julia.pointer_from_objref`); it is not made a root. Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_pin_forever(addr: *const u8) {
    entry(crate::contract::RUNTIME_PIN_FOREVER, |rt| {
        if let Some(heap) = rt.shared.mmtk {
            mmtk_pin(rt, heap, addr as usize);
            return;
        }
        lock(&rt.shared.state).heap.pin_forever(addr as usize);
    })
}

/// What [`locus_gc_stats`] fills: the runtime's counters ([`Stats`]) for a C host. The
/// caller sets `size` to the bytes it allocated (`sizeof(GcStats)` of its header); the
/// runtime fills the counters that fit, so that a host built against an older, shorter
/// struct keeps working when counters are added at the end.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    /// The struct's size in bytes, set by the caller.
    pub size: u64,
    /// Collections started.
    pub collections: u64,
    /// Objects allocated.
    pub objects_allocated: u64,
    /// Bytes allocated (the own collectors: body bytes; MMTk: whole allocations).
    pub bytes_allocated: u64,
    /// Objects live after the last collection (the own collectors; 0 on MMTk).
    pub objects_live: u64,
    /// Bytes live (the own collectors: body bytes; MMTk: the heap's used bytes).
    pub bytes_live: u64,
    /// Objects the moving collectors moved.
    pub objects_moved: u64,
    /// Write barriers run.
    pub write_barriers: u64,
    /// Faults reported.
    pub faults: u64,
    /// The median stop-the-world pause, nanoseconds (0 before the first collection).
    pub pause_median_ns: u64,
    /// The longest stop-the-world pause, nanoseconds.
    pub pause_max_ns: u64,
}

impl GcStats {
    /// The counters of `stats`, with `size` this struct's.
    fn of(stats: &Stats) -> GcStats {
        GcStats {
            size: std::mem::size_of::<GcStats>() as u64,
            collections: stats.collections,
            objects_allocated: stats.objects_allocated,
            bytes_allocated: stats.bytes_allocated,
            objects_live: stats.objects_live,
            bytes_live: stats.bytes_live,
            objects_moved: stats.objects_moved,
            write_barriers: stats.write_barriers,
            faults: stats.faults,
            pause_median_ns: stats.pause_median_ns,
            pause_max_ns: stats.pause_max_ns,
        }
    }
}

/// Fills `*out` with the calling thread's runtime's counters, up to `out->size` bytes
/// (whole counters only; `size` itself is left as the caller set it). Returns 0, or 1 when
/// `out` is null or `out->size` holds no counter (less than 16). Never collects.
///
/// # Safety
/// `out`, when not null, must point to `out->size` writable bytes, 8-byte aligned, whose
/// first 8 are the `size` field.
#[no_mangle]
pub unsafe extern "C" fn locus_gc_stats(out: *mut GcStats) -> i32 {
    if out.is_null() {
        return 1;
    }
    // SAFETY: the caller's promise: `out` points to at least the `size` field.
    let size = unsafe { out.cast::<u64>().read() };
    let words = usize::try_from(size / 8).unwrap_or(usize::MAX);
    if words < 2 {
        return 1;
    }
    let stats = entry("locus_gc_stats", |rt| GcStats::of(&rt.stats()));
    let total = std::mem::size_of::<GcStats>() / 8;
    // SAFETY: `GcStats` is `repr(C)`, all `u64`: its words in order.
    let source =
        unsafe { std::slice::from_raw_parts((&stats as *const GcStats).cast::<u64>(), total) };
    let base = out.cast::<u64>();
    // Word 0 is `size`: the caller's.
    for (k, word) in source.iter().enumerate().take(words.min(total)).skip(1) {
        // SAFETY: the caller's promise: `size` bytes, so word `k < size / 8`, are in `*out`.
        let at = unsafe { base.add(k) };
        // SAFETY: as above: writable and aligned.
        unsafe { at.write(*word) };
    }
    0
}

/// The depth of the calling thread's scope stack (its memory root regions and scoped pins,
/// see [`locus_gc_pin_scoped`]), for [`locus_gc_region_reset`]. Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_region_depth() -> i64 {
    entry(crate::contract::RUNTIME_REGION_DEPTH, |rt| {
        scopes::depth_as_i64(rt.scope_depth())
    })
}

/// Registers `[start, end)`, stack memory of the calling function that may hold GC
/// pointers (an `alloca` the rewrite for statepoints could not turn into SSA values): each
/// collection scans its aligned words conservatively, keeping and pinning every live
/// object one names, until [`locus_gc_region_reset`] drops it. Never collects.
#[no_mangle]
pub extern "C" fn locus_gc_push_region(start: *const u8, end: *const u8) {
    entry(crate::contract::RUNTIME_PUSH_REGION, |rt| {
        let (start, end) = (start as usize, end as usize);
        if start < end {
            lock(&rt.me.scopes).push_region(start, end);
        }
    })
}

/// Drops the regions registered above `depth` (what [`locus_gc_region_depth`] returned
/// when the function was entered), and undoes the scoped pins above it
/// ([`locus_gc_pin_scoped`]). Never collects. A negative depth is a
/// [`GcFault::RegionDepth`] and drops nothing.
#[no_mangle]
pub extern "C" fn locus_gc_region_reset(depth: i64) {
    entry(
        crate::contract::RUNTIME_REGION_RESET,
        |rt| match usize::try_from(depth) {
            Ok(depth) => rt.reset_scopes(depth),
            Err(_) => rt.report(GcFault::RegionDepth { depth }),
        },
    )
}

/// The statepoint path's entry points by name and address: the `locus_gc_sp_*` entries the
/// wrappers call and the pins.
pub fn statepoint_symbols() -> Vec<(&'static str, usize)> {
    vec![
        (
            "locus_gc_sp_alloc",
            locus_gc_sp_alloc as extern "C" fn(i64, i64, usize) -> *mut u8 as usize,
        ),
        (
            "locus_gc_sp_alloc_bytes",
            locus_gc_sp_alloc_bytes as extern "C" fn(*const u8, i64, i64, usize) -> *mut u8
                as usize,
        ),
        (
            "locus_gc_sp_alloc_genericmemory",
            locus_gc_sp_alloc_genericmemory
                as extern "C" fn(*const u8, i64, *const u8, usize) -> *mut u8 as usize,
        ),
        (
            "locus_gc_sp_safepoint",
            locus_gc_sp_safepoint as extern "C" fn(usize) as usize,
        ),
        (
            "locus_gc_sp_poll",
            locus_gc_sp_poll as extern "C" fn(usize) as usize,
        ),
        (
            "locus_gc_sp_foreign_read",
            locus_gc_sp_foreign_read as extern "C" fn(*const u8, i64, usize) -> i64 as usize,
        ),
        (
            "locus_gc_sp_callee_rooted_read",
            locus_gc_sp_callee_rooted_read as extern "C" fn(*const u8, i64, usize) -> i64 as usize,
        ),
        (
            crate::contract::RUNTIME_PIN,
            locus_gc_pin as extern "C" fn(*const u8) as usize,
        ),
        (
            crate::contract::RUNTIME_UNPIN,
            locus_gc_unpin as extern "C" fn(*const u8) as usize,
        ),
        (
            crate::contract::RUNTIME_PIN_FOREVER,
            locus_gc_pin_forever as extern "C" fn(*const u8) as usize,
        ),
        (
            crate::contract::RUNTIME_PIN_SCOPED,
            locus_gc_pin_scoped as extern "C" fn(*const u8) -> i64 as usize,
        ),
        (
            crate::contract::RUNTIME_UNPIN_SCOPED,
            locus_gc_unpin_scoped as extern "C" fn(*const u8) -> i64 as usize,
        ),
    ]
}

/// The `extern "C"` functions by name and address, for a JIT to define as absolute symbols.
pub fn symbols() -> Vec<(&'static str, usize)> {
    vec![
        (
            RUNTIME_GET_PGCSTACK,
            locus_gc_get_pgcstack as extern "C" fn() -> *mut *mut GcFrame as usize,
        ),
        (
            RUNTIME_ALLOC,
            locus_gc_alloc as extern "C" fn(i64, i64) -> *mut u8 as usize,
        ),
        (
            RUNTIME_SAFEPOINT,
            locus_gc_safepoint as extern "C" fn() as usize,
        ),
        (
            RUNTIME_FOREIGN_READ,
            locus_gc_foreign_read as extern "C" fn(*const u8, i64) -> i64 as usize,
        ),
        (
            RUNTIME_CALLEE_ROOTED_READ,
            locus_gc_callee_rooted_read as extern "C" fn(*const u8, i64) -> i64 as usize,
        ),
        (
            RUNTIME_WRITE_BARRIER,
            locus_gc_write_barrier as extern "C" fn(*const u8) as usize,
        ),
        (
            crate::contract::RUNTIME_WRITE_BARRIER_INTERIOR,
            locus_gc_write_barrier_interior as extern "C" fn(*mut u8) as usize,
        ),
        (
            RUNTIME_ALLOC_BYTES,
            locus_gc_alloc_bytes as extern "C" fn(*const u8, i64, i64) -> *mut u8 as usize,
        ),
        (
            RUNTIME_ALLOC_GENERICMEMORY,
            locus_gc_alloc_genericmemory as extern "C" fn(*const u8, i64, *const u8) -> *mut u8
                as usize,
        ),
        (
            crate::contract::RUNTIME_REGION_DEPTH,
            locus_gc_region_depth as extern "C" fn() -> i64 as usize,
        ),
        (
            crate::contract::RUNTIME_PUSH_REGION,
            locus_gc_push_region as extern "C" fn(*const u8, *const u8) as usize,
        ),
        (
            crate::contract::RUNTIME_REGION_RESET,
            locus_gc_region_reset as extern "C" fn(i64) as usize,
        ),
        (RUNTIME_POLL, locus_gc_poll as extern "C" fn() as usize),
        (
            RUNTIME_ENTER_SAFE_REGION,
            locus_gc_enter_safe_region as extern "C" fn() as usize,
        ),
        (
            RUNTIME_LEAVE_SAFE_REGION,
            locus_gc_leave_safe_region as extern "C" fn() as usize,
        ),
        (
            RUNTIME_HEAP,
            locus_gc_heap as extern "C" fn() -> *const u8 as usize,
        ),
        (
            RUNTIME_ADD_ROOT_REGION,
            locus_gc_add_root_region as unsafe extern "C" fn(*const u8, *const u8) as usize,
        ),
        (
            RUNTIME_REMOVE_ROOT_REGION,
            locus_gc_remove_root_region as extern "C" fn(*const u8) -> i32 as usize,
        ),
        (
            RUNTIME_THREAD_ATTACH_HEAP,
            crate::locus_gc_thread_attach_heap as unsafe extern "C" fn(*const u8) -> i32 as usize,
        ),
        (
            RUNTIME_THREAD_DETACH,
            crate::locus_gc_thread_detach as extern "C" fn() -> i32 as usize,
        ),
    ]
}
