//! `fixtures/statepoint/invoke_unwound_pins.ll` and `longjmp_unwound_pins.ll` built ahead
//! of time with statepoint roots (`locus gc build`'s library path): the scoped pins link
//! against the runtime library (`locus_gc_pin_scoped`, `locus_gc_unpin_scoped`), the C++
//! unwinder (or libc's `longjmp`) goes through the compiled frames without landing pads,
//! and the catching frame's pad (or the code after its `setjmp`) drops their pins:
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
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("unwind-pins-build-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for name in ["invoke_unwound_pins", "longjmp_unwound_pins"] {
        left_frames_drop_their_pins(&dir, name);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Builds `fixtures/statepoint/NAME.ll` into `dir` and runs it under stress, moving and
/// not: 42, and 1 object live at the end.
fn left_frames_drop_their_pins(dir: &Path, name: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/statepoint/{name}.ll"));
    let ir = std::fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let prog = dir.join(name);
    let options = BuildOptions {
        roots: Roots::Statepoint,
        runtime: Some(runtime_library::runtime_dir(false).to_path_buf()),
        ..BuildOptions::default()
    };
    build(&format!("{name}.ll"), &ir, &prog, &options)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    for moving in [false, true] {
        let out = under_stress(&mut Command::new(&prog), moving)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The result's line, then the statistics.
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name} moving {moving}: {stderr}"
        );
        assert_eq!(
            stdout.lines().next(),
            Some("42"),
            "{name} moving {moving}: {stdout}{stderr}"
        );
        assert!(
            stdout.lines().any(|l| l == "objects live: 1"),
            "{name} moving {moving}: {stdout}"
        );
        if moving {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with("objects moved: ") && l != "objects moved: 0"),
                "{name}: {stdout}"
            );
        }
    }
}
