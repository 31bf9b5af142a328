//! `locus tour` (what `make run` shows) runs every chapter and every cross-check passes.

use std::process::Command;

use crate::common::*;

#[test]
fn the_tour_passes_every_cross_check() {
    let out = Command::new(LOCUS)
        .arg("tour")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for title in [
        "Stack maps and patch points",
        "Precise GC for any LLVM frontend",
        "DWARF location descriptions on the stack",
        "MLIR memrefs from Rust",
        "AArch64 SME streaming mode and ZA",
        "A JIT that keeps its stack maps",
    ] {
        assert!(stdout.contains(title), "{stdout}");
    }
    assert!(
        stdout
            .lines()
            .last()
            .is_some_and(|l| l.contains("cross-checks passed")),
        "{stdout}"
    );
    assert!(!stdout.contains(".. FAILED"), "{stdout}");
}

#[test]
fn an_unknown_chapter_is_an_error() {
    let out = Command::new(LOCUS)
        .args(["tour", "--chapter", "nope"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("chapters: stackmap, gc"),
        "{}",
        text(&out.stderr)
    );
}

/// The tour's scratch files go to a fresh private directory (mkdtemp's), not to
/// `$TMPDIR/locus-tour-PID`: a symlink planted under that name (the shell `exec`s the tour,
/// so the PID is known) no longer sends the tour's objects into another directory, and
/// nothing is left behind.
#[test]
fn scratch_files_go_to_a_private_directory() {
    let dir = TempDir::new("tour-scratch");
    let tmp = dir.path("tmp");
    let victim = dir.path("victim");
    for d in [&tmp, &victim] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
    }
    let out = Command::new("sh")
        .args([
            "-c",
            "ln -s \"$VICTIM\" \"$TMPDIR/locus-tour-$$\" && exec \"$LOCUS\" tour --chapter stackmap",
        ])
        .env("TMPDIR", &tmp)
        .env("VICTIM", &victim)
        .env("LOCUS", LOCUS)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let planted: Vec<_> = std::fs::read_dir(&victim)
        .unwrap_or_else(|e| panic!("{e}"))
        .collect();
    assert!(planted.is_empty(), "{planted:?}");
    // Only the planted link is left in TMPDIR.
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}
