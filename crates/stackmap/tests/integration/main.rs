//! locus-stackmap's integration tests, one test binary (each file a module): stack maps
//! that `llc-19` writes for fixtures and generated IR, decoded, patched and run.

mod common;

mod live_frame;
mod patch_encoding;
mod patch_live;
mod patchpoint_live;
mod properties;
