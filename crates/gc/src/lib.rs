//! Precise garbage collection for any frontend that emits LLVM IR, the way Julia does it:
//! the frontend marks GC pointers by address space and emits plain SSA, and a late pass
//! places the roots.
//!
//! **The contract** (spec 003, "Представление" and "Инварианты"): GC-tracked pointers live
//! in address space 10, pointers derived from them (interior pointers) in 11,
//! callee-rooted pointers in 12 and pointers loaded from a tracked object in 13; only a few
//! address-space casts are allowed, tracked pointers are never offset, never turned into
//! integers, and only tracked pointers are returned. A function takes part when its entry
//! block calls `julia.get_pgcstack()`. At every safepoint (a call that may collect), every
//! tracked pointer that is still used afterwards must be in a slot of the function's GC
//! frame ("Размещение корней сборки мусора"). `jl_roots` operand bundles ("Поддержка
//! ccall"), `julia.pointer_from_objref`, `llvm.julia.gc_preserve_begin/end` and
//! `julia.call` (the jlcall convention) keep their Julia meanings.
//!
//! This crate is the other end of that contract:
//! - [`verify`] checks the invariants and names the rule, function and instruction broken;
//! - [`lower`] places the roots: finds tracked values and the bases of derived ones,
//!   computes liveness at each safepoint, colours frame slots, decides where stores and
//!   nulls go, and writes Julia's intermediate form (`julia.new_gc_frame` and friends) and
//!   then a real frame `[nroots << 2, prev, roots...]` linked into the thread's chain;
//! - [`runtime`] is what lowered code calls: the frame chain, an allocator, and a
//!   mark-sweep collector that finds roots only by walking the frames, with a stress mode
//!   that collects at every safepoint, poisons what it frees and reports dangling
//!   references;
//! - [`run`] verifies, lowers, JIT-compiles with LLVM 19 and calls an entry function.
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
//! let options = RunOptions { entry: "main".into(), stress: true, on_fault: OnFault::Record, drop_store: None };
//! let outcome = run("example.ll", ir, options)?;
//! assert_eq!(outcome.value, 42);
//! assert!(outcome.faults.is_empty());
//! // %a was rooted in one slot across the second allocation.
//! assert_eq!(outcome.reports[0].slots, 1);
//! # Ok::<(), locus_gc::Error>(())
//! ```

pub mod addrspace;
mod error;
pub mod lower;
pub mod run;
pub mod runtime;
pub mod verify;

pub use error::{Error, Result};
