//! locus-llvm's integration tests, one test binary (each file a module); the JIT memory
//! release test is a binary of its own (`jit_stackmaps_release.rs`), so that no other
//! test's JITs are counted.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bitcode;
mod borrowed;
mod cfg;
mod codegen;
mod ir;
mod jit;
mod jit_aarch64;
mod jit_stackmaps;
mod nesting;
