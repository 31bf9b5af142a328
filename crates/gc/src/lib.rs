//! Precise garbage collection for any LLVM frontend, the way Julia does it: the frontend
//! marks GC pointers by address space and a late pass places the roots (spec 003,
//! "Размещение корней сборки мусора").
//!
//! Work in progress (issue 3): the verifier, the lowering and the runtime are being built.

pub mod addrspace;
mod error;
pub mod lower;
pub mod run;
pub mod runtime;
pub mod verify;

pub use error::{Error, Result};
