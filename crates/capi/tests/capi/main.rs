//! locus-capi's integration tests, one test binary (issue 29 §5: fewer, larger test
//! binaries; each was its own binary and link before):
//! - [`c`]: the C API from C (readobj against llvm-readobj-19, every entry point, under
//!   ASan/UBSan and valgrind, the shared library);
//! - [`damaged`]: damaged sections through every read-only entry point, never a panic;
//! - [`header`]: `include/locus.h` is what cbindgen generates now.
//!
//! Run one group: `cargo test -p locus-capi --test capi header` (or `c::`, `damaged`).

mod c;
mod damaged;
mod header;
