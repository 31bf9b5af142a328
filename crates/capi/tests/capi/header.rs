//! `include/locus.h` must be what cbindgen generates from the code now: a change to an entry
//! point or a C type without regenerating the header fails here.
//!
//! Regenerate: `LOCUS_UPDATE_HEADER=1 cargo test -p locus-capi --test capi header`.

use std::path::Path;

#[path = "../support/cbindgen_header.rs"]
mod cbindgen_header;

#[test]
fn header_matches_the_code() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let regenerate = "LOCUS_UPDATE_HEADER=1 cargo test -p locus-capi --test capi header";
    if cbindgen_header::generated_matches_checked_in(crate_dir, "include/locus.h", regenerate)
        .is_none()
    {
        return;
    }
    // The header is self-contained C and C++: compile it alone with clang-19.
    cbindgen_header::compiles_alone_as_c_and_cxx(&crate_dir.join("include/locus.h"));
}
