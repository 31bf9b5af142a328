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
//!   into SSA values (registered as conservative root regions). `gc run`: x86-64;
//!   `gc build`: x86-64 and AArch64 Linux.
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
//! that forks each run), and each MMTk plan's median and longest stop-the-world pause
//! (`MmtkStats`; the runtime's own collectors' in `Stats` too).
//!
//! GCBench (Boehm's: trees of depth 4-16, stretch 18), measured 2026-11-28 after the MMTk
//! objects' header went from 32 to 16 bytes and allocation got MMTk's bump-pointer fast
//! path, on the 2-core machine at load 1.1-1.3 (Boehm 0.399 s and 36.7 MB at 64 MiB, 0.461 s
//! at 128 MiB):
//!
//! | collector, roots | 64 MiB time / memory | pause median / max | 128 MiB time / memory | pause median / max |
//! |---|---|---|---|---|
//! | mmtk:marksweep, frames | 4.03 / 2.11 | 15.4 / 28.7 ms | 3.46 / 3.91 | 13.9 / 22.4 ms |
//! | mmtk:immix, frames | 1.48 / 2.03 | 13.1 / 19.5 ms | 1.20 / 3.73 | 20.2 / 27.8 ms |
//! | mmtk:stickyimmix, frames | 1.93 / 2.17 | 6.0 / 29.5 ms | 1.68 / 3.67 | 10.3 / 27.8 ms |
//! | mmtk:marksweep, statepoints | 4.08 / 2.12 | 13.6 / 32.9 ms | 3.37 / 3.91 | 14.6 / 20.3 ms |
//! | mmtk:immix, statepoints | 1.71 / 2.03 | 15.6 / 24.1 ms | 1.41 / 3.73 | 17.1 / 26.0 ms |
//! | mmtk:stickyimmix, statepoints | 1.92 / 2.28 | 5.7 / 27.9 ms | 1.69 / 3.79 | 9.7 / 46.2 ms |
//! | mmtk:semispace, statepoints | 2.27 / 2.10 | 12.0 / 25.7 ms | 1.53 / 3.80 | 15.4 / 25.3 ms |
//! | mmtk:gencopy, statepoints | 1.89 / 2.29 | 3.6 / 25.1 ms | 1.50 / 2.36 | 4.1 / 29.5 ms |
//! | locus (own mark-sweep), frames / statepoints | 23.4 / 22.5 (4.3 memory) | — | 21.3 / 20.5 | — |
//!
//! (Before the header and fast-path work the best plan was 4.1x at 64 MiB and 2.6x at
//! 128 MiB.) At 32 MiB (load 4-7) Immix took 3.1-3.9x and SemiSpace and GenCopy ran out
//! of memory. The other two programs, measured before that work (load 2-3; table: a
//! chained hash table of 500,000 entries, every seventh value replaced in 10 rounds;
//! churn: 4 threads each keeping a tree of 131,071 nodes and replacing 100,000 random
//! subtrees): table at 128 MiB marksweep 4.87x, immix 4.93x, stickyimmix 4.55x (2.6x
//! memory), own mark-sweep 10.4-10.8x; churn at 64 MiB marksweep 7.84x (frames) / 9.85x
//! (statepoints) in 2.0x memory, own mark-sweep 25-26x in 7.6x memory. Churn at 64 MiB
//! still runs Immix and StickyImmix with frame roots out of memory after that work (the
//! frames pin what they reach, so Immix cannot defragment a heap that the random subtree
//! replacement fragments line by line); it runs in 96 MiB, and with statepoint roots.
//!
//! The goal (the best MMTk plan at most as slow as Boehm on GCBench, in no more memory) is
//! not met: Immix is 1.2-1.5x Boehm's time in 2.0x its memory at 64 MiB. What remains,
//! from `perf` on Immix at 64 MiB: MMTk zeroing fresh blocks that allocation then zeroes
//! again (10%), the call per allocation (an allocation fast path inlined into compiled
//! code would remove it), and memory: a GCBench node takes 48 bytes (16-byte header) where
//! Boehm's takes 32, MMTk's own footprint is about 10.5 MB against Boehm's 1.7 MB, and a
//! fixed MMTk heap is touched up to its limit where Boehm's limit is only a maximum.
//!
//! **The default collector** of `locus gc run` and of `locus gc build`'s executables is
//! MMTk's MarkSweep (`mmtk:marksweep`): the plan that ran every program of the GC suite with
//! both kinds of roots and every benchmark within Boehm's heap limit, 5-6x faster than the
//! runtime's own mark-sweep. Immix is faster where it has headroom (GCBench above) and is
//! one flag away (`locus gc build --collector mmtk:immix`, `LOCUS_GC_COLLECTOR=mmtk:immix`).
//! `--stress` and `--moving` keep the runtime's own collectors (the stress collector is the
//! oracle that catches missed roots). The library's [`runtime::Config::default`] and the C
//! API's `locus_gc_init` keep `locus`: MMTk allows one heap per process, while a host may
//! make a heap per thread; a host asks for MMTk by name.
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
//! roots in `gc run`'s JIT on hosts other than x86-64 (`gc build` executables walk AArch64
//! Linux frames too: the JIT would have to hand its `.eh_frame` to the runtime).
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
pub use locus_gc_runtime::{contract, mmtk, runtime, signals};
