//! `include/locus.h` must be what cbindgen generates from the code now: a change to an entry
//! point or a C type without regenerating the header fails here.
//!
//! Regenerate: `LOCUS_UPDATE_HEADER=1 cargo test -p locus-capi --test header`.

use std::path::Path;

#[test]
fn header_matches_the_code() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("reading cbindgen.toml: {e}"));
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen failed: {e}"));
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).unwrap_or_else(|e| panic!("not UTF-8: {e}"));
    let path = crate_dir.join("include/locus.h");
    if std::env::var_os("LOCUS_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        let first = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(checked_in.lines().count().min(generated.lines().count()));
        panic!(
            "{} differs from what cbindgen generates now (first difference at line {}:\n  checked in: {:?}\n  generated:  {:?}).\n\
             Regenerate it: LOCUS_UPDATE_HEADER=1 cargo test -p locus-capi --test header",
            path.display(),
            first + 1,
            checked_in.lines().nth(first).unwrap_or("<end>"),
            generated.lines().nth(first).unwrap_or("<end>"),
        );
    }
    // The header is self-contained C and C++: compile it alone with clang-19 when present.
    for (lang, std_) in [("c", "-std=c11"), ("c++", "-std=c++17")] {
        let out = std::process::Command::new("clang-19")
            .args([
                "-fsyntax-only",
                "-Wall",
                "-Wextra",
                "-Werror",
                std_,
                "-x",
                lang,
            ])
            .arg(&path)
            .output();
        match out {
            Ok(o) => assert!(
                o.status.success(),
                "clang-19 -x {lang} rejects the header:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => panic!("clang-19 is required (scripts/install-deps): {e}"),
        }
    }
}
