//! A fault in the `main` of a module built by `locus gc build` (issue 26): the build
//! renames the function (`RENAMED_MAIN`, the executable's `main` being Locus's), and the
//! fault line names it `main`, as the source and `locus gc run` do; the `pc = SYMBOL+OFFSET`
//! part keeps the symbol, for gdb and `nm`. Likewise a module function named as one the
//! runtime takes from the C library (`read`), which the build renames
//! (`PROGRAM_PREFIX`NAME) so that it does not take the runtime's own calls.

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::build::{
    build, find_runtime, runtime_imports, BuildOptions, PROGRAM_PREFIX, RENAMED_MAIN,
};
use locus_gc::run::Roots;

/// Builds `fixtures/build/NAME.ll` with `roots` and `entry` into a fresh directory and
/// runs it: its exit status, standard output and standard error.
fn build_and_run(
    name: &str,
    entry: &str,
    roots: Roots,
    tag: &str,
) -> (Option<i32>, String, String) {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/build/{name}.ll"));
    let ir = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "build-fault-names-{name}-{entry}-{tag}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = dir.join(name);
    let options = BuildOptions {
        roots,
        entry: entry.into(),
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
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The root kinds `locus gc build` takes on this host.
fn all_roots() -> Vec<(Roots, &'static str)> {
    let mut roots = vec![(Roots::Frames, "frames")];
    if cfg!(any(
        target_arch = "x86_64",
        all(target_arch = "aarch64", target_os = "linux")
    )) {
        roots.push((Roots::Statepoint, "statepoint"));
    }
    roots
}

/// One `locus: SIGSEGV (null pointer dereference) ... in function `main` (pc 0x... =
/// locus_entry+0x...)` line and status 3, with frame roots and statepoint roots.
#[test]
fn a_fault_in_the_renamed_main_names_main() {
    for (roots, tag) in all_roots() {
        let (status, _, stderr) = build_and_run("main_faults", "main", roots, tag);
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

/// `fixtures/build/libc_names.ll` defines @read, @write, @close (in a comdat) and a
/// variable @getpid, all names the runtime takes from the C library (checked here, so
/// that the fixture keeps testing something): the executable runs and prints 42 (before
/// the rename it stopped at start-up, the runtime's own `read` being the module's), the
/// string constant that spells `@main @read` is unchanged, and a fault in @read names
/// `read`. A module defining the C library's allocator (`free`) is refused: renamed, its
/// own `free` would get what the C library allocated.
#[test]
fn symbols_named_as_the_c_librarys_are_renamed() {
    let runtime =
        find_runtime(Some(runtime_library::runtime_dir(false))).unwrap_or_else(|e| panic!("{e}"));
    let imports = runtime_imports(&runtime).unwrap_or_else(|e| panic!("{e}"));
    for name in ["read", "write", "close", "getpid", "malloc"] {
        assert!(imports.contains(name), "the runtime does not import {name}");
    }
    assert!(!imports.contains("locus_gc_main"), "{imports:?}");
    for (roots, tag) in all_roots() {
        let (status, stdout, stderr) = build_and_run("libc_names", "main", roots, tag);
        assert_eq!(
            (status, stdout.as_str()),
            (Some(0), "42\n"),
            "{tag}: {stderr}"
        );
        let (status, _, stderr) = build_and_run("libc_names", "fault", roots, tag);
        assert_eq!(status, Some(3), "{tag}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{tag}: {stderr}");
        assert!(
            stderr.contains(" in function `read` (pc 0x")
                && stderr.contains(&format!(" = {PROGRAM_PREFIX}read+0x")),
            "{tag}: {stderr}"
        );
    }
    let allocator = "declare ptr @julia.get_pgcstack()\n\
                     define void @free(ptr %p) {\n  ret void\n}\n\
                     define i64 @main() {\n  %pg = call ptr @julia.get_pgcstack()\n  \
                     call void @free(ptr null)\n  ret i64 0\n}\n";
    let options = BuildOptions {
        runtime: Some(runtime),
        ..BuildOptions::default()
    };
    match locus_gc::build::lower_for_build("free.ll", allocator.as_bytes(), &options) {
        Err(e) => assert!(e.to_string().contains("allocator function @free"), "{e}"),
        Ok(_) => panic!("a module defining free was built"),
    }
}
