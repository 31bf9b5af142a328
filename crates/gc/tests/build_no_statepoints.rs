//! Statepoint executables at start-up. A program built with statepoint roots that has no
//! statepoint at all (it never calls anything that may collect): LLVM writes no
//! `.llvm_stackmaps` section for it, and the executable still runs (`locus gc build` marks
//! it, `contract::STATEPOINT_PROGRAM_MARKER`) instead of stopping with "no .llvm_stackmaps
//! section". A program that has statepoints is not marked, so that one whose stack maps a
//! link dropped stops at start-up rather than run without roots. And what the runtime
//! reads of its executable to find the stack maps.

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::Path;
use std::process::Command;

use locus_gc::build::{build, compile, find_runtime, link, lower_for_build, BuildOptions};
use locus_gc::run::Roots;
use locus_gc_runtime::contract::STATEPOINT_PROGRAM_MARKER;

#[test]
fn a_program_without_statepoints_runs_with_statepoint_roots() {
    if !cfg!(target_arch = "x86_64") {
        return; // the host's statepoint walk is what the build refuses elsewhere
    }
    let ir = b"define i64 @main() {\n  %a = add i64 40, 2\n  ret i64 %a\n}\n";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-no-statepoints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = dir.join("answer");
    let options = BuildOptions {
        roots: Roots::Statepoint,
        runtime: Some(runtime_library::runtime_dir(false).to_path_buf()),
        ..BuildOptions::default()
    };
    build("answer.ll", ir, &prog, &options).unwrap_or_else(|e| panic!("answer.ll: {e}"));
    for collector in [None, Some("locus"), Some("mmtk:semispace")] {
        let mut cmd = Command::new(&prog);
        cmd.env_remove("LOCUS_GC_COLLECTOR")
            .env_remove("LOCUS_GC_STRESS");
        if let Some(c) = collector {
            cmd.env("LOCUS_GC_COLLECTOR", c);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{collector:?}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "42\n",
            "{collector:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Only a program without statepoints is marked; one with statepoints whose stack map
/// section is gone (as `--gc-sections` drops an unretained one; here removed by
/// llvm-objcopy-19) stops before it runs, with one `locus: gc:` line and status 1.
#[test]
fn a_statepoint_program_without_its_stack_maps_stops() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let options = BuildOptions {
        roots: Roots::Statepoint,
        runtime: Some(runtime_library::runtime_dir(false).to_path_buf()),
        ..BuildOptions::default()
    };
    let none = b"define i64 @main() {\n  ret i64 42\n}\n";
    let lowered = lower_for_build("none.ll", none, &options).unwrap_or_else(|e| panic!("{e}"));
    assert!(lowered.contains(STATEPOINT_PROGRAM_MARKER), "{lowered}");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/programs/list_sum.ll");
    let ir = std::fs::read(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    let lowered = lower_for_build("list_sum.ll", &ir, &options).unwrap_or_else(|e| panic!("{e}"));
    assert!(!lowered.contains(STATEPOINT_PROGRAM_MARKER), "{lowered}");

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-dropped-stack-maps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let object = dir.join("list_sum.o");
    let bytes = compile("list_sum.ll", &lowered).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&object, bytes).unwrap_or_else(|e| panic!("{}: {e}", object.display()));
    let out = Command::new("llvm-objcopy-19")
        .args(["--remove-section", ".llvm_stackmaps"])
        .arg(&object)
        .output()
        .unwrap_or_else(|e| panic!("llvm-objcopy-19 is required (scripts/install-deps): {e}"));
    assert!(out.status.success(), "{out:?}");
    let prog = dir.join("list_sum");
    let runtime = find_runtime(options.runtime.as_deref()).unwrap_or_else(|e| panic!("{e}"));
    link(&object, &runtime, &prog, "clang-19", &[]).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(&prog)
        .env_remove("LOCUS_GC_COLLECTOR")
        .env_remove("LOCUS_GC_STRESS")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("locus: gc: ") && stderr.contains("no .llvm_stackmaps section"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The runtime reads what it needs of `/proc/self/exe` at start-up (its headers and symbol
/// table), not the whole file: a statepoint executable, most of whose bytes are debug
/// information, starts in about the peak resident set of the same program built with
/// frames. Measured by `fixtures/bench/measure.c` (a small process that forks the
/// program, so that the test's own size is not the floor of the reading). Reading the
/// whole 11.7 MB file made the statepoint build's peak 16.2 MB against 4.6 MB.
#[test]
fn a_statepoint_executable_does_not_read_its_whole_file_at_start_up() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bench");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-start-up-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let measure = dir.join("measure");
    let out = Command::new("clang-19")
        .args(["-O2", "-o"])
        .arg(&measure)
        .arg(fixtures.join("measure.c"))
        .output()
        .unwrap_or_else(|e| panic!("clang-19 is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let source = fixtures.join("startup.ll");
    let ir = std::fs::read(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    // Peak resident set (KiB) and file size of `startup.ll` built with `roots`.
    let peak = |roots: Roots, name: &str| {
        let prog = dir.join(name);
        let options = BuildOptions {
            roots,
            runtime: Some(runtime_library::runtime_dir(false).to_path_buf()),
            ..BuildOptions::default()
        };
        build("startup.ll", &ir, &prog, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = dir.join(format!("{name}.measured"));
        let out = Command::new(&measure)
            .arg(&report)
            .arg(&prog)
            .env("LOCUS_GC_COLLECTOR", "locus")
            .env_remove("LOCUS_GC_STRESS")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", measure.display()));
        assert!(
            out.status.success() && out.stdout == b"1\n",
            "{name}: {out:?}"
        );
        let text = std::fs::read_to_string(&report)
            .unwrap_or_else(|e| panic!("{}: {e}", report.display()));
        let kib: u64 = text
            .split_whitespace()
            .next()
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("{}: {text:?}", report.display()));
        let size = std::fs::metadata(&prog)
            .unwrap_or_else(|e| panic!("{}: {e}", prog.display()))
            .len();
        (kib, size / 1024)
    };
    let (frames, _) = peak(Roots::Frames, "startup-frames");
    let (statepoints, file) = peak(Roots::Statepoint, "startup-statepoints");
    assert!(
        statepoints < frames + file / 2,
        "the statepoint build's start-up peaked at {statepoints} KiB, the frame build's at \
         {frames} KiB: the {file} KiB executable was read whole?"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
