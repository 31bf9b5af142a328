//! A checked-in C header must be what cbindgen generates from the crate now, and must
//! compile alone as C and C++: shared by locus-capi's and locus-gc-runtime's header tests
//! (included with `#[path]`; the two were near-copies).

use std::path::Path;

/// What cbindgen generates for the crate at `crate_dir` with its `cbindgen.toml`, checked
/// against the header `header` (relative to the crate) and returned. With
/// `LOCUS_UPDATE_HEADER` set, the header is rewritten instead and `None` returned.
/// `regenerate` is the command that regenerates it, for the failure message.
pub fn generated_matches_checked_in(
    crate_dir: &Path,
    header: &str,
    regenerate: &str,
) -> Option<String> {
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
    let path = crate_dir.join(header);
    if std::env::var_os("LOCUS_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return None;
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
             Regenerate it: {regenerate}",
            path.display(),
            first + 1,
            checked_in.lines().nth(first).unwrap_or("<end>"),
            generated.lines().nth(first).unwrap_or("<end>"),
        );
    }
    Some(generated)
}

/// The header at `path` is self-contained C and C++: clang-19 compiles it alone as C11 and
/// as C++17 with `-Wall -Wextra -Werror`.
pub fn compiles_alone_as_c_and_cxx(path: &Path) {
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
            .arg(path)
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
