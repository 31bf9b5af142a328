//! `locus tour` (what `make run` shows) runs every chapter and every cross-check passes.

mod common;

use std::process::Command;

use common::*;

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
