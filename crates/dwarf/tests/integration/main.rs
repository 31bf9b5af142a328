//! locus-dwarf's integration tests, one test binary (each file a module): the evaluator
//! against the spec's examples, gimli and llvm-dwarfdump, real binaries' variables against
//! gdb (feature `binary`), property tests, and untrusted input.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod eval_support;

mod access;
mod binary_untrusted;
#[cfg(feature = "binary")]
mod compressed_sections;
mod dwarf6_composite;
#[cfg(feature = "binary")]
mod entry_values;
mod eval;
mod eval_composite_chunks;
mod eval_generic_arith;
mod eval_gimli_typed;
mod eval_ops;
mod eval_props;
#[cfg(feature = "binary")]
mod gdb_oracle;
mod gimli_oracle;
mod normative;
mod object_location;
mod op;
mod overlay;
mod shortcut_props;
mod shortcuts;
mod spelling;
