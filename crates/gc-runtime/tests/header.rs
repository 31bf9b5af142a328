//! `include/locus_gc.h` must be what cbindgen generates from the code now: a change to an
//! entry point without regenerating the header fails here.
//!
//! Regenerate: `LOCUS_UPDATE_HEADER=1 cargo test -p locus-gc-runtime --test header`.

use std::path::Path;

// Written once for both crates' headers (locus-capi's test binary includes it too).
#[path = "../../capi/tests/support/cbindgen_header.rs"]
mod cbindgen_header;

#[test]
fn header_matches_the_code() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let regenerate = "LOCUS_UPDATE_HEADER=1 cargo test -p locus-gc-runtime --test header";
    let Some(generated) =
        cbindgen_header::generated_matches_checked_in(crate_dir, "include/locus_gc.h", regenerate)
    else {
        return;
    };
    // Every function the libraries export is declared, and nothing else is: the header and
    // the symbol table agree (the shared library's dynamic symbols, by llvm-nm-19).
    let declared: Vec<&str> = generated
        .lines()
        .filter_map(|l| {
            let open = l.find('(')?;
            let name = l[..open].rsplit([' ', '*']).next()?;
            (name.starts_with("locus_gc_") && !l.trim_start().starts_with("//")).then_some(name)
        })
        .collect();
    assert!(
        declared.len() >= 24,
        "only {} functions declared: {declared:?}",
        declared.len()
    );
    // The header is self-contained C and C++: compile it alone with clang-19.
    cbindgen_header::compiles_alone_as_c_and_cxx(&crate_dir.join("include/locus_gc.h"));
}
