//! `fixtures/statepoint/invoke_unwound_pins.ll` built ahead of time with statepoint roots
//! (`locus gc build`'s library path): the scoped pins link against the runtime library
//! (`locus_gc_pin_scoped`, `locus_gc_unpin_scoped`), the C++ unwinder runs through the
//! compiled frames without landing pads, and the catching frame's pad drops their pins:
//! under the stress collector, moving (`LOCUS_GC_MOVING=1`) or not, the executable prints 42 and its statistics count 1
//! object live at the end, as `gc run` does (tests/unwind_pins.rs).

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;
#[path = "support/stress.rs"]
mod stress;

use std::path::Path;
use std::process::Command;

use stress::under_stress;

use locus_gc::build::{build, BuildOptions};
use locus_gc::run::Roots;

#[test]
fn an_executable_drops_the_pins_of_unwound_frames() {
    if !cfg!(target_arch = "x86_64") {
        return; // the host's statepoint walk is what the build refuses elsewhere
    }
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/statepoint/invoke_unwound_pins.ll");
    let ir = std::fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("unwind-pins-build-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = dir.join("unwound_pins");
    let options = BuildOptions {
        roots: Roots::Statepoint,
        runtime: Some(runtime_library::runtime_dir(false).to_path_buf()),
        ..BuildOptions::default()
    };
    build("invoke_unwound_pins.ll", &ir, &prog, &options)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    for moving in [false, true] {
        let out = under_stress(&mut Command::new(&prog), moving)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The result's line, then the statistics.
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "moving {moving}: {stderr}");
        assert_eq!(
            stdout.lines().next(),
            Some("42"),
            "moving {moving}: {stdout}{stderr}"
        );
        assert!(
            stdout.lines().any(|l| l == "objects live: 1"),
            "moving {moving}: {stdout}"
        );
        if moving {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with("objects moved: ") && l != "objects moved: 0"),
                "{stdout}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
