//! The CLI's integration tests, one test binary (one link of the `locus` test code):
//! a module per command group. Run one group with `cargo test -p locus-cli --test cli GROUP::`.

mod common;
#[path = "../../../gc/tests/support/cross_aarch64.rs"]
mod cross_aarch64;
#[path = "support/dropped_relocation.rs"]
mod dropped_relocation;
#[path = "../../src/tour/root_stores.rs"]
mod root_stores;
#[path = "../../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;
#[path = "../../../memref/tests/integration/tools.rs"]
mod tools;

mod dwarf;
mod gc;
mod gc_aarch64;
mod gc_barriers;
mod gc_build;
mod gc_mmtk;
mod gc_threads;
mod gc_verify;
mod jit;
mod memref;
mod query;
mod readobj;
mod sme;
mod threads;
mod tour;
mod unix;
