//! A C++ host that catches an exception thrown through compiled frames drops their scoped
//! pins itself, as the runtime's scope-stack docs ask (`locus_gc_runtime::runtime::scopes`):
//! it reads `locus_gc_region_depth()` before calling compiled code and calls
//! `locus_gc_region_reset(depth)` in its handler.
//!
//! `fixtures/host_catch/pinned_throw.ll` is lowered with statepoint roots and compiled in
//! process; `fixtures/host_catch/host.cpp` is compiled by clang++-19 against the header and
//! linked with that object and the runtime library. The host calls `@run`, which pins a
//! fresh object for a `gc_preserve` region and calls the host's `host_throw`; the C++
//! exception unwinds through `@run` (no landing pad) into the host's `catch`. Then `@after`
//! allocates once (under the stress collector, after a collection) and the runtime prints
//! its counters. With the reset, the pinned object dies: 1 object live (`@after`'s), depth
//! back to 0. The negative control, `host keep`, skips the reset: the pin stays on the
//! scope stack (depth 1) and keeps its object alive (2 objects live). Both with the
//! moving collector (`LOCUS_GC_MOVING=1`) and without, and the depths under MMTk's Immix.
//!
//! With frame roots there is no scope stack but a frame chain: the host puts the chain
//! head back in its handler (`fixtures/host_catch/frame_throw.ll`, `host_frames.cpp`).

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;
#[path = "support/stress.rs"]
mod stress;

use std::path::{Path, PathBuf};
use std::process::Command;

use stress::under_stress;

use locus_gc::build::{compile, RUNTIME_LIBRARY};
use locus_gc::lower::{lower_module, LowerOptions};
use locus_gc::run::{lower_statepoints, Roots};
use locus_gc_runtime::contract::STATEPOINT_PROGRAM_MARKER;

/// The host executable of `fixtures/host_catch/HOST.cpp` and `SOURCE.ll`, lowered with
/// `roots`, built into `dir`.
fn build_host(dir: &Path, source: &str, host: &str, roots: Roots) -> PathBuf {
    let gc = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = gc.join("fixtures/host_catch");
    let name = format!("{source}.ll");
    let src = fixtures.join(&name);
    let ir = std::fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let ctx = locus_llvm::Context::new();
    let lowered = match roots {
        Roots::Statepoint => {
            let (module, _) = lower_statepoints(&ctx, &name, &ir)
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            // As `locus gc build` marks a program with statepoint roots.
            format!(
                "{}\n@{STATEPOINT_PROGRAM_MARKER} = constant i8 1\n",
                module.print()
            )
        }
        _ => {
            let module = locus_llvm::Module::parse_ir(&ctx, &name, &ir)
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            lower_module(&module, LowerOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            module.print()
        }
    };
    let object = compile(&name, &lowered).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let object_path = dir.join(format!("{source}.o"));
    std::fs::write(&object_path, object)
        .unwrap_or_else(|e| panic!("{}: {e}", object_path.display()));
    let prog = dir.join(host);
    let out = Command::new("clang++-19")
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg("-I")
        .arg(gc.join("../gc-runtime/include"))
        .arg(fixtures.join(format!("{host}.cpp")))
        .arg(&object_path)
        .arg(runtime_library::runtime_dir(false).join(RUNTIME_LIBRARY))
        .args(["-rdynamic", "-lpthread", "-ldl", "-lm", "-lgcc_s", "-o"])
        .arg(&prog)
        .output()
        .unwrap_or_else(|e| panic!("clang++-19 is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "clang++-19: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    prog
}

/// The host's output in `mode` (`reset` or `keep`) under the stress collector, moving or
/// not; it must exit 0.
fn run_host(prog: &Path, mode: &str, moving: bool) -> String {
    let out = under_stress(Command::new(prog).arg(mode), moving)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{mode}, moving {moving}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_cpp_host_that_catches_resets_the_scope_stack_and_drops_the_pin() {
    if !cfg!(target_arch = "x86_64") {
        return; // the statepoint walk of a host-built executable is tested on x86-64
    }
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("host-catch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = build_host(&dir, "pinned_throw", "host", Roots::Statepoint);
    for moving in [false, true] {
        // (mode, the host's line, @after's depth, objects live at the end)
        for (mode, caught, depth, live) in [
            (
                "reset",
                "caught 7: depth 0 before the call, 1 in the handler, 0 after it",
                "0",
                "objects live: 1",
            ),
            (
                "keep",
                "caught 7: depth 0 before the call, 1 in the handler, 1 after it",
                "1",
                "objects live: 2",
            ),
        ] {
            let stdout = run_host(&prog, mode, moving);
            let mut lines = stdout.lines();
            assert_eq!(
                (lines.next(), lines.next()),
                (Some(caught), Some(depth)),
                "{mode}, moving {moving}: {stdout}"
            );
            assert!(
                stdout.lines().any(|l| l == live),
                "{mode}, moving {moving}: {stdout}"
            );
            // The same scope stack under MMTk's Immix (which pins through MMTk's pinning
            // bits; it counts no live objects, so the depths are the check), once.
            if moving {
                continue;
            }
            let out = Command::new(&prog)
                .arg(mode)
                .env_remove("LOCUS_GC_STRESS")
                .env("LOCUS_GC_COLLECTOR", "mmtk:immix")
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
            let stdout = String::from_utf8_lossy(&out.stdout);
            let mut lines = stdout.lines();
            assert_eq!(
                (out.status.code(), lines.next(), lines.next()),
                (Some(0), Some(caught), Some(depth)),
                "{mode}, mmtk:immix: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same with frame roots (`fixtures/host_catch/frame_throw.ll`, `host_frames.cpp`):
/// the exception leaves `@run`'s frame linked, and the host puts the chain head it read
/// before the call back in its handler (`locus_gc_get_pgcstack`'s docs). Then `@after`
/// collects at each allocation and returns 5, moving or not, and under MMTk's Immix
/// (`LOCUS_GC_MMTK_COLLECT_EVERY=1`, the runtime checking the chain as its own does). The
/// negative control, `host keep`, leaves the stale head: the walk finds the dead frame,
/// whose memory the host has filled with 0x41 (a pad of its own that stays live while
/// `@after` runs, so what the runtime's frames hold cannot change it), and the runtime
/// ends the program with one `locus:` line, naming the frame's flag bits, and status 2.
#[test]
fn a_cpp_host_that_catches_through_frame_roots_restores_the_chain_head() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("host-catch-frames-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = build_host(&dir, "frame_throw", "host_frames", Roots::Frames);
    let runs: [(&str, Option<bool>); 3] = [
        ("stress", Some(false)),
        ("stress, moving", Some(true)),
        ("mmtk:immix", None),
    ];
    for (label, stress) in runs {
        let command = |mode: &str| {
            let mut cmd = Command::new(&prog);
            cmd.arg(mode);
            match stress {
                Some(moving) => {
                    under_stress(&mut cmd, moving);
                }
                None => {
                    // A collection at every allocation: each of @after's walks the chain.
                    cmd.env_remove("LOCUS_GC_STRESS")
                        .env("LOCUS_GC_COLLECTOR", label)
                        .env("LOCUS_GC_MMTK_COLLECT_EVERY", "1");
                }
            }
            cmd.output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()))
        };
        let out = command("restore");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            (out.status.code(), stdout.lines().next()),
            (Some(0), Some("5")),
            "{label}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = command("keep");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{label}, keep: {stderr}");
        let faults: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("locus: "))
            .collect();
        assert!(
            matches!(faults[..], [line] if line.contains("corrupt frame")
                && line.contains("has flag bits 0b01 in its header word 0x4141414141414141")),
            "{label}, keep: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
