//! A C host embeds the runtime through `include/locus_gc.h` and the static library: it
//! links a frame of its own, allocates, collects, and reads its object back; with the
//! object unrooted, the stress collector catches the read as a dangling reference. clang-19
//! compiles and links; the program's output and exit status are the oracle.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/runtime_library.rs"]
mod runtime_library;

/// The static library, built as a user builds it (tests/support).
fn static_library() -> PathBuf {
    runtime_library::runtime_dir(false).join("liblocus_gc_runtime.a")
}

/// `tests/fixtures/NAME.c` compiled by clang-19 against the header and the static library,
/// into a directory of this process's own.
fn build_host(name: &str) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("locus-gc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = dir.join(name);
    let out = Command::new("clang-19")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join(format!("tests/fixtures/{name}.c")))
        .arg(static_library())
        .args(["-lpthread", "-ldl", "-lm", "-lgcc_s", "-o"])
        .arg(&prog)
        .output()
        .unwrap_or_else(|e| panic!("clang-19 is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "clang-19: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    prog
}

/// `prog` prints `expected` and exits 0, with and without the stress collector.
fn prints_under_both_collectors(prog: &Path, expected: &str) {
    for stress in ["0", "1"] {
        let out = Command::new(prog)
            .env("LOCUS_GC_STRESS", stress)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", prog.display()));
        assert_eq!(
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
            (Some(0), expected),
            "stress {stress}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_c_host_allocates_collects_and_is_told_of_a_dangling_read() {
    let prog = build_host("host");
    prints_under_both_collectors(&prog, "42");
    let out = Command::new(&prog)
        .arg("drop")
        .env("LOCUS_GC_STRESS", "1")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", prog.display()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.starts_with("locus: gc: dangling reference: an access 8 bytes into object 0x")
            && err.lines().count() == 1,
        "{err}"
    );
    if let Some(dir) = prog.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The threaded host (`tests/fixtures/host_threads.c`): four threads attached to one heap
/// through the header, sharing lists through a registered global root table; without
/// the registration the stress collector catches the freed list.
#[test]
fn a_c_host_runs_four_threads_on_one_heap() {
    let prog = build_host("host_threads");
    prints_under_both_collectors(&prog, "619800");
    let out = Command::new(&prog)
        .arg("unregistered")
        .env("LOCUS_GC_STRESS", "1")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", prog.display()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("locus: gc: dangling reference: ") && err.lines().count() == 1,
        "{err}"
    );
    if let Some(dir) = prog.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
