//! Precise garbage collection for any frontend that emits LLVM IR, the way Julia does it:
//! the frontend marks GC pointers by address space and emits plain SSA, and a late pass
//! places the roots.
//!
//! **The contract** (spec 003, "Представление" and "Инварианты"): GC-tracked pointers live
//! in address space 10, pointers derived from them (interior pointers) in 11,
//! callee-rooted pointers in 12 and pointers loaded from a tracked object in 13; only a few
//! address-space casts are allowed, tracked pointers are never offset, never turned into
//! integers, and only tracked pointers are returned. A function takes part when it calls
//! `julia.get_pgcstack()` (or has a `"gcstack"` parameter). At every safepoint (a call that
//! may collect), every
//! tracked pointer that is still used afterwards must be in a slot of the function's GC
//! frame ("Размещение корней сборки мусора"). `jl_roots` operand bundles ("Поддержка
//! ccall"), `julia.pointer_from_objref`, `llvm.julia.gc_preserve_begin/end` and
//! `julia.call` (the jlcall convention) keep their Julia meanings.
//!
//! This crate is the other end of that contract, written to match Julia's own
//! LateLowerGCFrame on the IR Julia emits (how closely: `scripts/julia-gc-conformance`):
//! - [`contract`] holds the contract's names and numbers, for everything below;
//! - [`verify`] checks the invariants and names the rule, function and instruction broken;
//!   lenient by default as Julia's verifier is, strict on request;
//! - [`lower`] places the roots: finds tracked values and the bases of derived ones
//!   (vectors and aggregates too, lifting phis and selects lane by lane), computes liveness
//!   at each safepoint, drops what is kept alive by something rooted (Julia's refinements),
//!   colours frame slots, decides where stores and nulls go, and writes Julia's
//!   intermediate form (`julia.new_gc_frame` and friends) and then a real frame
//!   `[nroots << 2, prev, roots...]` linked into the thread's chain. IR whose roots it
//!   cannot keep is refused with an error naming the instruction, never lowered with an
//!   object unrooted. Safepoints lose their memory promises (`memory(argmem: read)`,
//!   `readnone` arguments), as in Julia's pass, so the frame's stores survive LLVM's
//!   optimizer run on the lowered module (`opt -O2`, or [`run::RunOptions::passes`]);
//! - [`runtime`] is what lowered code calls: the frame chain, an allocator (for Julia's
//!   tagged objects too: `julia.gc_alloc_obj`, `julia.gc_alloc_memory`), and a
//!   mark-sweep collector that finds roots only by walking the frames, with a stress mode
//!   that collects at every safepoint, makes what it frees inaccessible and reports
//!   dangling references, including any later access to a freed object;
//! - [`signals`] turns a fault in code Locus runs (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
//!   stack overflow) into one `locus:` line naming the signal, the address and the function;
//! - [`run`] verifies, lowers, optionally runs an LLVM pass pipeline on the lowered module
//!   (opt's syntax, `default<O2>`), JIT-compiles with LLVM 19 and calls an entry function;
//! - [`build`] lowers the same way, compiles ahead of time with LLVM 19 and links the
//!   runtime library (the crate `locus-gc-runtime`: `liblocus_gc_runtime.a`, with a C
//!   header) into an executable that behaves as [`run`] does (`locus gc build`).
//!
//! # Two ways to keep roots
//!
//! The same input IR runs with either ([`run::Roots`], `locus gc run --roots`):
//! - **frames** (the default, above): Julia's scheme. Each function stores what is live
//!   across a safepoint into its frame and the collector walks the frame chain. The code
//!   keeps using the values in its registers after the call, so no object may ever move.
//! - **statepoints** ([`lower::statepoint`], [`runtime::statepoints`]): the input is
//!   rewritten for LLVM's `rewrite-statepoints-for-gc` (GC pointers in address space 1,
//!   `gc "statepoint-example"`, frame pointers kept) and compiled by a JIT that keeps the
//!   stack maps. Each safepoint's record lists every live GC pointer as a (base, derived)
//!   pair of stack slots, which the code reloads after the call; the collector walks the
//!   frame-pointer chain, looks each return address up and may rewrite the slots. So a
//!   moving collector can run (`--moving`): it copies every unpinned live object at each
//!   collection and moves derived slots by their base's delta; with `--stress` it makes the
//!   old copy inaccessible, so a pointer that was not relocated faults as a dangling
//!   reference, and otherwise gives its block back for reuse.
//!   Pinned: what `gc_preserve`, `jl_roots` or `pointer_from_objref` hold, Julia's tagged
//!   objects (scanned conservatively), and what sits in `alloca`s the rewrite could not turn
//!   into SSA values (registered as conservative root regions). x86-64 only.
//!
//! The trade-off, measured by `cargo bench -p locus-gc --bench roots` (release build, one
//! run on a shared 2-core machine; same input IR for both):
//!
//! | | frames | statepoints | ratio |
//! |---|---|---|---|
//! | run time without collections, tree of 8,191 nodes built and counted 8 times | 10.55 ms | 10.03 ms | 0.95 |
//! | run time without collections, recursion 1,500 deep | 0.230 ms | 0.226 ms | 0.99 |
//! | collection time per frame walked (stress, 1,501 collections, 1.13 M frames) | 26.2 ns | 45.2 ns | 1.73 |
//! | the same, moving every live object at each collection | | 4,604 ns | 176 |
//! | code size, `.text` by `llc-19 -O2`, tree / recursion | 417 / 146 B | 270 / 126 B | 0.65 / 0.86 |
//!
//! Frames pay with a store per live value before each safepoint and the frame's link and
//! unlink, statepoints with spills and reloads around each call (and the wrapper call into
//! the runtime): on these programs the code runs as fast and is smaller. A collection costs
//! more per frame with statepoints: each frame is a return address looked up (binary search
//! over the stack maps' records, sorted by address) and one slot per live value (frames: one chain step and the slots in a row). The
//! moving collector's cost is per live object, not per frame: every object is copied to
//! pages of its own and its old copy protected, at every collection, which is what makes a
//! missed relocation fault at once.
//!
//! # Against the Boehm collector, and the default collector
//!
//! `cargo bench -p locus-gc --bench gcbench` builds each program of `fixtures/bench` twice,
//! from Locus input IR (`locus gc build --passes default<O2>`) and from C against libgc
//! (`clang-19 -O2 -lgc`), and runs the executables with the same heap limit
//! (`GC_MAXIMUM_HEAP_SIZE` for Boehm, `LOCUS_GC_HEAP_SIZE` for the MMTk heap; the
//! runtime's own mark-sweep has no limit). Ratios to Boehm in the same run (the builds take
//! turns run by run): median wall time of 3 runs, largest peak RSS (read by a small process
//! that forks each run). Measured 2026-11-28 on the shared 2-core development machine (load
//! 2-3 from other work, so single times moved by up to 2x between runs; the ratios within a
//! run are what to read). Boehm's own figures: GCBench 0.54-0.60 s and 37.6 MB, table
//! 0.16 s and 38.2 MB, churn-1thread 0.37-0.46 s and 11.2 MB, churn 0.52 s and 40.1 MB.
//!
//! | program | collector | heap limit | time / Boehm | peak RSS / Boehm |
//! |---|---|---|---|---|
//! | GCBench | locus (own mark-sweep), frames | none | 27.1 (16.3 at 128M) | 4.31 |
//! | GCBench | locus, statepoints | none | 22.9 (16.4) | 4.28 |
//! | GCBench | mmtk:marksweep | 64 MiB / 128 MiB | 5.49 / 3.07 | 2.12 / 3.91 |
//! | GCBench | mmtk:immix | 64 MiB / 128 MiB | 4.12 / 2.62 | 2.04 / 3.73 |
//! | GCBench | mmtk:stickyimmix | 64 MiB / 128 MiB | 5.12 / 2.62 | 2.45 / 3.90 |
//! | table | locus, frames | none | 10.8 (9.7) | 7.79 |
//! | table | locus, statepoints | none | 10.4 (9.8) | 7.78 |
//! | table | mmtk:marksweep | 64 MiB / 128 MiB | 5.64 / 4.87 | 2.13 / 2.64 |
//! | table | mmtk:immix | 64 MiB / 128 MiB | 18.8 (33 collections) / 4.93 | 2.02 / 2.65 |
//! | table | mmtk:stickyimmix | 64 MiB / 128 MiB | out of memory / 4.55 | — / 2.64 |
//! | churn-1thread | locus, frames | none | 25.3 (20.5) | 6.73 |
//! | churn-1thread | locus, statepoints | none | 24.9 (20.8) | 7.11 |
//! | churn-1thread | mmtk:marksweep | 64 MiB / 24 MiB | 5.21 / 6.19 | 7.11 / 3.27 |
//! | churn-1thread | mmtk:immix | 64 MiB / 24 MiB | 3.99 / out of memory | 6.84 / — |
//! | churn-1thread | mmtk:stickyimmix | 64 MiB / 24 MiB | 4.83 / out of memory | 7.89 / — |
//! | churn (4 threads) | locus, frames | none | 25.3 | 7.58 |
//! | churn (4 threads) | locus, statepoints | none | 26.3 | 7.65 |
//! | churn (4 threads) | mmtk:marksweep, frames / statepoints | 64 MiB | 7.84 / 9.85 | 1.99 / 1.99 |
//! | churn (4 threads) | mmtk:immix, frames / statepoints | 64 MiB | out of memory / 14.2 | — / 2.00 |
//! | churn (4 threads) | mmtk:stickyimmix, frames / statepoints | 64 MiB | out of memory / 13.3 | — / 2.93 |
//! | churn (4 threads) | mmtk:semispace, mmtk:gencopy (statepoints) | 64 MiB | out of memory | |
//!
//! (GCBench: Boehm's, trees of depth 4-16, stretch 18. table: a chained hash table of
//! 500,000 entries and their boxes, every seventh value replaced in 10 rounds. churn: 4
//! threads each keep a tree of 131,071 nodes in their frames and replace 100,000 random
//! subtrees of 31 nodes; churn-1thread: the same on one thread, 400,000 rounds.) The
//! 4-thread churn rows on MMTk are from a later run (2 runs each, after the runtime took
//! several mutator threads and statepoint roots on MMTk). GCBench at 64 MiB in a run after
//! that (3 runs each; Boehm 0.467 s): frames on marksweep 4.65x time / 2.10x memory, immix
//! 4.34x / 2.02x, stickyimmix 4.04x / 2.20x; statepoint roots on marksweep 4.91x / 2.10x,
//! immix 3.98x / 2.02x, stickyimmix 4.25x / 2.30x (frames against statepoints: within
//! 10%, either way); semispace and gencopy ran out of memory at 64 MiB; own mark-sweep
//! 20.3x (frames) and 21.2x (statepoints). No plan reports pause times yet (neither the
//! runtime's `Stats` nor `MmtkStats` counts them).
//!
//! Nothing reaches the issue's goal (the best MMTk plan at most as slow as Boehm on
//! GCBench in no more memory): the best, Immix, is 2.6x Boehm's time at 128 MiB (3.7x its
//! memory) and 4.1x at 64 MiB (2.0x its memory). Much of the gap is outside the
//! collector: table under MMTk Immix at 128 MiB never collects and still takes 4.5-4.9x
//! Boehm's time, and `perf record` puts 68% of that run in the program's own chain walk
//! (one pointer-chasing `mov`/`cmp`/`jne` loop, the same loop as the C program's), 4% in
//! MMTk's allocation and 6% in the kernel zeroing fresh pages. The likely cause is the
//! layout: each object carries the runtime's 32-byte header, and entries and their boxes
//! alternate in one space, about 100 bytes per entry, where Boehm packs the 24-byte entries
//! into 32-byte slots and keeps the pointer-free boxes apart; the walk's working set is
//! about three times Boehm's, so more of its steps miss the caches and the TLB. A plan's
//! heap is fixed and touched as it fills, so its peak RSS follows the limit.
//!
//! **The default collector stays `locus`** (the runtime's own mark-sweep) for `gc run` and
//! `gc build` for now, although every MMTk plan beats it wherever MMTk runs (GCBench
//! 2.6-5.5x Boehm against 16-27x; table 4.6-5.6x against 10-11x, except Immix at the tight
//! 64 MiB; churn-1thread 4.0-6.2x against 20-25x; churn 7.8-14x against 22-26x, in a
//! quarter of the memory). The measurements were taken while the MMTk binding was still
//! gaining several threads and statepoint roots, a plan's heap limit ends a program that
//! outgrows it where `locus` grows (Immix, StickyImmix, SemiSpace and GenCopy ran out of
//! memory at 64 MiB above; MarkSweep ran everything), and the GC suite's tests compare the
//! own collector's counters and use it as their oracle's baseline; making MMTk the default
//! is a change across those tests. The plan to make the default then is MarkSweep, the one
//! that ran every program at the same limit as Boehm (churn in 2.0x Boehm's memory), with
//! Immix the faster where it has headroom (GCBench and churn-1thread; table at 64 MiB took
//! it 33 collections). Choose a plan per
//! executable with `locus gc build --collector mmtk:immix` (or per run,
//! `LOCUS_GC_COLLECTOR=mmtk:immix`, `locus gc run --collector mmtk:immix`).
//!
//! # Features
//!
//! `llvm` (default): [`verify`], [`lower`], [`run`], [`build`], [`addrspace`] and [`Error`], which
//! link libLLVM 19 through `locus-llvm`. Without it (`default-features = false`) the crate
//! is [`runtime`] and [`signals`] alone, so a host that embeds the collector does not link
//! LLVM: the crate `locus-gc-runtime` builds it as a C library this way.
//!
//! # Exit statuses
//!
//! The `extern "C"` entry points and the fault handlers end the process only when told to
//! ([`runtime::OnFault::Exit`], what `locus gc run` uses), with
//! - 2 ([`signals::DANGLING_EXIT_STATUS`]) for a dangling reference or any other broken
//!   contract the runtime finds ([`runtime::GcFault`]), the line starting `locus: gc: `;
//! - 3 ([`signals::FAULT_EXIT_STATUS`]) for a fatal signal in the code being run.
//!
//! Not yet: moving with Julia-style frames (roots are not reloaded after safepoints, as in
//! Julia: use statepoint roots), `invoke` with frame roots (refused; with statepoint
//! roots `invoke` and C++-style unwinding work, see [`lower::statepoint`]); statepoint
//! roots on hosts other than x86-64.
//!
//! # Example
//!
//! ```
//! use locus_gc::run::{run, RunOptions};
//! use locus_gc::runtime::OnFault;
//!
//! // Two objects, the first kept alive across the second allocation.
//! let ir = r#"
//! declare ptr @julia.get_pgcstack()
//! declare ptr addrspace(10) @locus_gc_alloc(i64, i64)
//!
//! define i64 @main() {
//!   %pgcstack = call ptr @julia.get_pgcstack()
//!   %a = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
//!   %a.d = addrspacecast ptr addrspace(10) %a to ptr addrspace(11)
//!   store i64 42, ptr addrspace(11) %a.d
//!   %b = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
//!   %v = load i64, ptr addrspace(11) %a.d
//!   ret i64 %v
//! }
//! "#;
//! let options = RunOptions { stress: true, on_fault: OnFault::Record, ..RunOptions::default() };
//! // SAFETY: the module only touches the objects the runtime gives it, while they are live.
//! let outcome = unsafe { run("example.ll", ir, options)? };
//! assert_eq!(outcome.value, 42);
//! assert!(outcome.faults.is_empty());
//! // %a was rooted in one slot across the second allocation.
//! assert_eq!(outcome.reports[0].slots, 1);
//! # Ok::<(), locus_gc::Error>(())
//! ```

pub mod addrspace;
pub mod build;
mod error;
pub mod lower;
pub mod run;
pub mod verify;

pub use error::{Error, Result};
// The runtime lowered code calls, its fault handling and the contract's names live in
// locus-gc-runtime (no libLLVM); they keep their paths here.
pub use locus_gc_runtime::{contract, runtime, signals};
