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
//!   (opt's syntax, `default<O2>`), JIT-compiles with LLVM 19 and calls an entry function.
//!
//! # Features
//!
//! `llvm` (default): [`verify`], [`lower`], [`run`], [`addrspace`] and [`Error`], which
//! link libLLVM 19 through `locus-llvm`. Without it (`default-features = false`) the crate
//! is [`runtime`] and [`signals`] alone, so a host that embeds the collector does not link
//! LLVM.
//!
//! # Exit statuses
//!
//! The `extern "C"` entry points and the fault handlers end the process only when told to
//! ([`runtime::OnFault::Exit`], what `locus gc run` uses), with
//! - 2 ([`signals::DANGLING_EXIT_STATUS`]) for a dangling reference or any other broken
//!   contract the runtime finds ([`runtime::GcFault`]), the line starting `locus: gc: `;
//! - 3 ([`signals::FAULT_EXIT_STATUS`]) for a fatal signal in the code being run.
//!
//! Not yet: moving collectors (roots are not reloaded after safepoints, as in Julia),
//! `invoke` and unwinding.
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

#[cfg(feature = "llvm")]
pub mod addrspace;
pub mod contract;
#[cfg(feature = "llvm")]
mod error;
#[cfg(feature = "llvm")]
pub mod lower;
#[cfg(feature = "llvm")]
pub mod run;
pub mod runtime;
pub mod signals;
#[cfg(feature = "llvm")]
pub mod verify;

#[cfg(feature = "llvm")]
pub use error::{Error, Result};
