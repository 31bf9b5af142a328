//! locus-memref's integration tests, one test binary (each file a module): kernels compiled
//! at test time from `fixtures/` by the MLIR 19 and LLVM 19 tools, the C library of
//! `tests/c`, and the oracles each module names.

mod common;
#[path = "../../../signals/tests/support/fault_child.rs"]
mod fault_child;
mod tools;

mod abi;
mod aliasing;
mod callback;
mod dialects;
mod faults;
mod float;
mod kernels;
mod layout;
mod ndarray;
mod npy;
mod signature;
mod slice;
mod view;
