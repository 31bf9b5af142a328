//! The libraries export what the header declares and do not link libLLVM: checked with
//! llvm-nm-19 and llvm-readobj-19 as the oracles.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/runtime_library.rs"]
mod runtime_library;

/// Where this crate's libraries are, built as a user builds them (tests/support).
fn profile_dir() -> &'static Path {
    runtime_library::runtime_dir(false)
}

fn tool(name: &str, args: &[&str]) -> String {
    let out = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name} is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The function names the header declares.
fn declared() -> Vec<String> {
    let header = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include/locus_gc.h");
    let text =
        std::fs::read_to_string(&header).unwrap_or_else(|e| panic!("{}: {e}", header.display()));
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with('*'))
        .filter_map(|l| {
            let open = l.find('(')?;
            let name = l[..open].rsplit([' ', '*']).next()?;
            name.starts_with("locus_gc_").then(|| name.to_string())
        })
        .collect()
}

#[test]
fn the_shared_library_exports_every_declared_function_and_needs_no_llvm() {
    let so = profile_dir().join("liblocus_gc_runtime.so");
    let so = so.to_str().unwrap_or_else(|| panic!("non-UTF-8 path"));
    let names = declared();
    assert_eq!(names.len(), 40, "{names:?}");
    let dynamic = tool("llvm-nm-19", &["-D", "--defined-only", so]);
    let exported: Vec<&str> = dynamic
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_addr, kind, name) = (f.next()?, f.next()?, f.next()?);
            (kind == "T").then_some(name)
        })
        .collect();
    for n in &names {
        assert!(
            exported.contains(&n.as_str()),
            "{n} is not exported by {so}"
        );
    }
    let needed = tool("llvm-readobj-19", &["--needed-libs", so]);
    assert!(needed.contains("libc.so"), "{needed}");
    assert!(
        !needed.to_lowercase().contains("llvm"),
        "{so} links LLVM:\n{needed}"
    );
}

#[test]
fn the_static_library_defines_every_declared_function_and_no_llvm() {
    let a = profile_dir().join("liblocus_gc_runtime.a");
    let a = a.to_str().unwrap_or_else(|| panic!("non-UTF-8 path"));
    let symbols = tool("llvm-nm-19", &["--defined-only", "--no-sort", a]);
    for n in declared() {
        assert!(
            symbols.lines().any(|l| l.ends_with(&format!(" T {n}"))),
            "{n} is not defined in {a}"
        );
    }
    // Nothing of LLVM's C API is in it.
    assert!(!symbols.contains(" LLVMContextCreate"), "{a} holds LLVM");
    let undefined = tool("llvm-nm-19", &["--undefined-only", "--no-sort", a]);
    assert!(
        !undefined
            .lines()
            .any(|l| l.trim_start().starts_with("U LLVM")),
        "{a} needs LLVM symbols"
    );
}
