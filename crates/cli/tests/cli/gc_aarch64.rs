//! `locus gc run --roots statepoint` on AArch64: the JIT's statepoint stack maps and the
//! walk of its frames, run for real. `locus` is cross-built for `aarch64-unknown-linux-gnu`
//! against Debian's AArch64 LLVM 19 and libffi (multiarch packages, from
//! scripts/install-deps) and run under qemu-aarch64; each program must give what the
//! host's `locus` gives: its result, and the counts of collections, frames walked, roots
//! traced and objects moved, under the stress collector, moving and not, and under MMTk's
//! SemiSpace (qemu 8.0 or later, as scripts/install-deps installs: see
//! crates/gc/tests/build_aarch64.rs). Ignored in `make test` (the cross build would take
//! CI past its time): `scripts/ci-checks aarch64-jit` runs them.
//!
//! What the AArch64 JIT needs beyond x86-64's: its stack slots are addressed off the stack
//! pointer, which the walk places through the compiled code's `.eh_frame` (as the runtime
//! does for an executable: a frame of fixed size from its own CFA rule, one realigned at
//! the CFA of the function it called), and RuntimeDyld pads the JIT's stack map section
//! past its table.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{text, LOCUS};

use crate::cross_aarch64::{self, TARGET};
/// Where Debian's multiarch AArch64 libraries are (libLLVM-19.so, libffi.so).
const MULTIARCH_LIBS: &str = "/usr/lib/aarch64-linux-gnu";

/// `locus` built for AArch64 as crates/gc/tests/build_aarch64.rs builds the runtime
/// (`cross_aarch64::cargo`, so the two share MMTk's and the runtime's builds). Only the
/// final link is told where the AArch64 libraries are (`cargo rustc ... -- -L`), so the
/// dependencies build as that test builds them.
fn aarch64_locus() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = cross_aarch64::cargo(&workspace, "rustc")
        .args([
            "-p",
            "locus-cli",
            "--bin",
            "locus",
            "--",
            "-L",
            MULTIARCH_LIBS,
            "-C",
        ])
        .arg(format!("link-arg=-Wl,-rpath-link,{MULTIARCH_LIBS}"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
    assert!(
        out.status.success(),
        "cross-building locus for {TARGET} (needs libllvm19:arm64 and libffi-dev:arm64: run \
         scripts/install-deps): {}",
        text(&out.stderr)
    );
    cross_aarch64::target_dir(&workspace)
        .join(TARGET)
        .join("debug/locus")
}

/// What a run printed that both machines must agree on: its standard output without the
/// pause times (which vary), standard error, and exit status.
fn outcome(out: &std::process::Output) -> String {
    let kept: String = text(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("pause "))
        .map(|l| format!("{l}\n"))
        .collect();
    format!(
        "{kept}stderr: {}status: {:?}",
        text(&out.stderr),
        out.status.code()
    )
}

#[test]
#[ignore = "cross-builds locus for AArch64, about 5 minutes on 2 cores: scripts/ci-checks aarch64-jit"]
fn statepoint_programs_run_on_aarch64_as_on_x86_64() {
    if !cfg!(target_arch = "x86_64") {
        return; // the host half of the comparison
    }
    let locus = aarch64_locus();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures");
    // SemiSpace cannot pin: the programs with gc_preserve or jl_roots pins run without it.
    let stress: &[&[&str]] = &[&["--stress"], &["--stress", "--moving"]];
    let all: &[&[&str]] = &[
        &["--stress"],
        &["--stress", "--moving"],
        &["--collector", "mmtk:semispace"],
    ];
    let programs = [
        ("programs/list_sum.ll", all),
        ("programs/deep_recursion_derived.ll", all),
        ("programs/gc_preserve.ll", stress),
        ("programs/vector_derived_shuffle.ll", all),
        ("programs/vector_realigned_callee.ll", all),
        ("programs/vector_dynamic_alloca.ll", all),
        ("programs/aligned_alloca_dynamic.ll", all),
        ("statepoint/invoke_unwound_pins.ll", stress),
        ("statepoint/invoke_catch_exception.ll", stress),
    ];
    for (program, runs) in programs {
        let path = fixtures.join(program);
        let path = path.to_string_lossy();
        for how in runs {
            let mut args = vec!["gc", "run", "--roots", "statepoint", "--stats"];
            args.extend_from_slice(how);
            args.push(&path);
            let host = Command::new(LOCUS)
                .args(&args)
                .env("LOCUS_GC_MMTK_COLLECT_EVERY", "50")
                .output()
                .unwrap_or_else(|e| panic!("{LOCUS}: {e}"));
            let emulated = Command::new("qemu-aarch64-static")
                .arg(&locus)
                .args(&args)
                .env("LOCUS_GC_MMTK_COLLECT_EVERY", "50")
                .output()
                .unwrap_or_else(|e| panic!("qemu-aarch64-static (scripts/install-deps): {e}"));
            let (want, got) = (outcome(&host), outcome(&emulated));
            assert_eq!(host.status.code(), Some(0), "{program} {how:?}: {want}");
            assert_eq!(got, want, "{program} {how:?} on AArch64");
        }
    }
}

/// A frame whose slots LLVM addresses off a base pointer (`x19`: of variable size and asking
/// for its stack realigned) is refused with one `locus:` line naming the function and status 1 before the
/// program runs, never run without those roots.
#[test]
#[ignore = "cross-builds locus for AArch64, about 5 minutes on 2 cores: scripts/ci-checks aarch64-jit"]
fn a_frame_off_a_base_pointer_is_refused() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let locus = aarch64_locus();
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/statepoint/unplaceable_base_pointer_frame.ll");
    let out = Command::new("qemu-aarch64-static")
        .arg(&locus)
        .args(["gc", "run", "--stress", "--roots", "statepoint"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("qemu-aarch64-static (scripts/install-deps): {e}"));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("locus: ")
            && stderr.contains("function @realigned: ")
            && stderr.contains("off DWARF register 19 (a base pointer"),
        "{stderr}"
    );
}
