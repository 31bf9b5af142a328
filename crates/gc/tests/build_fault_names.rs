//! A fault in the `main` of a module built by `locus gc build` (issue 26): the build
//! renames the function (`RENAMED_MAIN`, the executable's `main` being Locus's), and the
//! fault line names it `main`, as the source and `locus gc run` do; the `pc = SYMBOL+OFFSET`
//! part keeps the symbol, for gdb and `nm`.

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::build::{build, BuildOptions, RENAMED_MAIN};
use locus_gc::run::Roots;

/// Builds `fixtures/build/main_faults.ll` with `roots` into a fresh directory and runs it.
fn build_and_run(roots: Roots, tag: &str) -> (Option<i32>, String) {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/build/main_faults.ll");
    let ir = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-fault-names-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = dir.join("main_faults");
    let options = BuildOptions {
        roots,
        runtime: Some(runtime_library::runtime_dir(false).to_path_buf()),
        ..BuildOptions::default()
    };
    build(&file.display().to_string(), &ir, &prog, &options)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let out = Command::new(&prog)
        .env_remove("LOCUS_GC_COLLECTOR")
        .env_remove("LOCUS_GC_STRESS")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One `locus: SIGSEGV (null pointer dereference) ... in function `main` (pc 0x... =
/// locus_entry+0x...)` line and status 3, with frame roots and statepoint roots.
#[test]
fn a_fault_in_the_renamed_main_names_main() {
    let mut roots = vec![(Roots::Frames, "frames")];
    if cfg!(target_arch = "x86_64") {
        roots.push((Roots::Statepoint, "statepoint"));
    }
    for (roots, tag) in roots {
        let (status, stderr) = build_and_run(roots, tag);
        assert_eq!(status, Some(3), "{tag}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{tag}: {stderr}");
        assert!(
            stderr.starts_with("locus: SIGSEGV (null pointer dereference) at address 0x0"),
            "{tag}: {stderr}"
        );
        assert!(
            stderr.contains(" in function `main` (pc 0x")
                && stderr.contains(&format!(" = {RENAMED_MAIN}+0x")),
            "{tag}: {stderr}"
        );
    }
}
