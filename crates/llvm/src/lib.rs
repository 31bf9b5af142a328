//! `locus-llvm` is the one place where Locus talks to libLLVM 19; every other Locus crate is
//! pure Rust and reaches LLVM, if it needs it at all, through this one. It wraps the LLVM C
//! API (through `llvm-sys`, linking the distribution's `libLLVM-19.so`) behind a small safe
//! interface: a [`Context`] owns what LLVM allocates, a [`Module`] is parsed from IR text or
//! bitcode ([`Module::parse_ir`]; bitcode's structure is checked first, [`bitcode::check`],
//! since LLVM's reader trusts parts of it), checked by LLVM's verifier ([`Module::verify`]), printed
//! back ([`Module::print`]), and compiled in process to an object file or to assembly for
//! x86-64 or AArch64 ([`emit_object`], [`emit_assembly`]) with the settings of
//! `llc-19 -relocation-model=pic`. That is how the other crates get objects whose
//! `.llvm_stackmaps` section (spec 000), DWARF (spec 001) or SME code (spec 004) they then
//! read with no LLVM at all. Every LLVM object is disposed when its Rust owner is dropped,
//! every message LLVM allocates is freed, and LLVM's diagnostics come back as [`Error`]
//! values instead of being printed or ending the process. A module the caller made in its
//! own LLVM context (llvm-sys, inkwell, a pass plugin's `llvm::Module`) is borrowed in place
//! with [`Context::borrow_raw`] and [`BorrowedModule::new`] (both `unsafe`: the caller
//! vouches for the raw handles): every function taking a `&Module` then runs on it with no
//! printing and re-parsing, and Locus disposes neither. The only process-wide state is
//! LLVM's own target registry, filled once on first code generation. Contexts are neither
//! `Send` nor `Sync`: use one per thread.
//!
//! Besides `llvm-sys`, the crate compiles two small C++ files (by `build.rs` against the
//! same LLVM's headers): `src/subtarget.cpp`, since the C API cannot tell whether a CPU or
//! feature name is known to a target, and an unknown x86-64 CPU makes LLVM abort; and
//! `src/fatal.cpp`, LLVM's fatal-error and out-of-memory handlers ([`report_fatal_errors`]).
//!
//! ```
//! use locus_llvm::{emit_object, Context, Module};
//!
//! let ir = r#"
//! declare void @llvm.experimental.stackmap(i64, i32, ...)
//!
//! define i64 @add(i64 %a, i64 %b) {
//!   %sum = add i64 %a, %b
//!   call void (i64, i32, ...) @llvm.experimental.stackmap(i64 7, i32 0, i64 %sum)
//!   ret i64 %sum
//! }
//! "#;
//!
//! let ctx = Context::new();
//! let module = Module::parse_ir(&ctx, "add.ll", ir)?;
//! module.verify()?;
//! assert_eq!(module.functions(), ["llvm.experimental.stackmap", "add"]);
//!
//! let object = emit_object(&module, "x86_64-linux-gnu", "", "")?;
//! assert_eq!(&object[..4], b"\x7fELF");
//! # Ok::<(), locus_llvm::Error>(())
//! ```

pub mod bitcode;
pub mod builder;
pub mod cfg;
mod codegen;
mod error;
mod fatal;
mod ffi;
pub mod ir;
pub mod jit;
pub mod jit_stackmaps;
mod module;
pub mod passes;

pub use codegen::{emit_assembly, emit_object};
pub use error::{Error, Result};
pub use fatal::report_fatal_errors;
/// The raw handles a caller's own module and context come as ([`Context::borrow_raw`],
/// [`BorrowedModule::new`]): llvm-sys's, which inkwell's `as_mut_ptr` and `raw` return.
pub use llvm_sys::prelude::{LLVMContextRef, LLVMModuleRef};
pub use module::{BorrowedModule, Context, Module, MAX_NESTING};
