//! locus-sme's integration tests, one test binary (each file a module): the model and the
//! checkers against llc-19's code, clang-19's ACLE builds, LLVM 19's own SME tests (when
//! `LOCUS_SME_LLVM_TESTS` names them) and runs under qemu-aarch64.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod acle;
mod audit;
mod llc_oracle;
mod llvm_tests;
mod qemu;
