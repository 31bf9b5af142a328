//! Pins left by unwinding under statepoint roots (issue 26): a `gc_preserve` region whose
//! `gc_preserve_end` an exception skips must not leave its objects pinned (a pinned object
//! is a root, so it would never be freed). Each program runs under the stress collector,
//! which collects at every allocation; a leaked pin shows as an object still live at the
//! end. The same fixtures' FileCheck lines check the lowered modules with `FileCheck-19`:
//! where the unwind paths unpin, and a landing pad drops unwound frames' root regions to
//! the depth after its function's latest push.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::run::{run, Roots, RunOptions};
use locus_gc::runtime::OnFault;

fn fixture(name: &str) -> (PathBuf, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/statepoint")
        .join(name);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path, text)
}

/// Runs `name` under the stress collector with statepoint roots, moving and not: no fault,
/// its result `value`, and `live` objects live at the end.
fn runs_with_live(name: &str, value: i64, live: u64) {
    let (path, text) = fixture(name);
    for moving in [false, true] {
        let options = RunOptions {
            roots: Roots::Statepoint,
            moving,
            stress: true,
            on_fault: OnFault::Record,
            ..RunOptions::default()
        };
        // SAFETY: the fixtures only touch objects the runtime gives them, while they are
        // live (checked by the stress collector).
        let out = unsafe { run(&path.display().to_string(), &text, options) }
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            out.faults.is_empty(),
            "{name} moving {moving}: {:?}",
            out.faults
        );
        assert_eq!(
            (out.value, out.stats.objects_live),
            (value, live),
            "{name} moving {moving}: {}",
            out.stats
        );
    }
}

/// `fixtures/statepoint/invoke_preserve_unwound.ll`: a region left by a cleanup that
/// resumes, one left by a pad that catches and returns, and one entered three times by a
/// loop whose pad catches; main's last allocation collects with nothing reachable but the
/// object it then allocates. Every preserved object is freed by then: 1 object live, moving
/// or not (before the lowering unpinned on the unwind paths, 6: the five preserved objects
/// stayed pinned).
#[test]
fn preserved_objects_left_by_an_exception_are_freed() {
    runs_with_live("invoke_preserve_unwound.ll", 19, 1);
}

/// `fixtures/statepoint/invoke_unwound_pins.ll`: an exception unwinds through two frames
/// without a landing pad, one holding a `jl_roots` pin (a plain call that throws), the
/// other a `gc_preserve` pin and a root region; the catching frame's pad drops all three
/// and keeps its own `gc_preserve` pin (it reads that object through a raw pointer after a
/// collection). Moving or not: 42 (the depth after the catch is the depth before the
/// invoke), and 1 object live at the end (3 before the runtime kept scoped pins on the
/// region stack: the two objects pinned by the unwound frames stayed).
#[test]
fn pins_of_frames_without_landing_pads_are_dropped_by_the_catching_pad() {
    runs_with_live("invoke_unwound_pins.ll", 42, 1);
}

/// `fixtures/statepoint/longjmp_unwound_pins.ll`: the same frames as
/// `invoke_unwound_pins.ll`, left by a `longjmp` to the catching frame's `setjmp` instead
/// of an exception; the function resets its scope stack after each return of the
/// `returns_twice` call. Moving or not: 42, and 1 object live at the end (3 before: the
/// skipped frames' pins stayed until main returned).
#[test]
fn pins_of_frames_a_longjmp_skips_are_dropped_after_the_setjmp() {
    runs_with_live("longjmp_unwound_pins.ll", 42, 1);
}

/// `fixtures/statepoint/preserve_open_at_return.ll`: a `gc_preserve` region that one path
/// leaves by returning, its end never run. 4242, and 1 object live at the end, moving or
/// not (2 before functions with such a region dropped their scope stack entries at their
/// returns: the object stayed pinned).
#[test]
fn preserved_objects_left_open_by_a_return_are_freed() {
    runs_with_live("preserve_open_at_return.ll", 4242, 1);
}

/// The FileCheck binary: `FileCheck-19` on PATH, else LLVM 19's own directory (never
/// skipped: scripts/install-deps installs it).
fn filecheck() -> PathBuf {
    match Command::new("FileCheck-19").arg("--version").output() {
        Ok(_) => PathBuf::from("FileCheck-19"),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let fallback = PathBuf::from("/usr/lib/llvm-19/bin/FileCheck");
            assert!(
                fallback.is_file(),
                "neither FileCheck-19 on PATH nor {} (scripts/install-deps)",
                fallback.display()
            );
            fallback
        }
        Err(e) => panic!("FileCheck-19: {e}"),
    }
}

/// `FileCheck-19 FIXTURE` on the fixture lowered for statepoint roots.
fn check_lowered(path: &Path, text: &str) {
    let ctx = locus_llvm::Context::new();
    let (module, _) =
        locus_gc::run::lower_statepoints(&ctx, &path.display().to_string(), text.as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dir = std::env::temp_dir().join(format!("locus-unwind-pins-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let name = path.file_name().unwrap_or_default();
    let out = dir.join(name);
    fs::write(&out, module.print()).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    let run = Command::new(filecheck())
        .arg(path)
        .arg("--input-file")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("FileCheck-19: {e}"));
    assert!(
        run.status.success(),
        "{}: FileCheck failed (lowered module in {}):\n{}",
        path.display(),
        out.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    let _ = fs::remove_dir_all(&dir);
}

/// FileCheck on the lowered `invoke_preserve_unwound.ll` (the unpins on the unwind paths),
/// `invoke_regions_pushed_later.ll` (the region depth slot), `invoke_unwound_pins.ll`
/// (scoped pins, and the slot a pad resets to, written after the function's own pin),
/// `longjmp_unwound_pins.ll` (the same reset after a `setjmp`) and
/// `preserve_open_at_return.ll` (the reset before the returns of a function whose region
/// may be left open, none where it cannot).
#[test]
fn filecheck_unwind_paths() {
    for name in [
        "invoke_preserve_unwound.ll",
        "invoke_regions_pushed_later.ll",
        "invoke_unwound_pins.ll",
        "longjmp_unwound_pins.ll",
        "preserve_open_at_return.ll",
    ] {
        let (path, text) = fixture(name);
        assert!(
            text.contains("; CHECK-LABEL:"),
            "{name}: no FileCheck lines"
        );
        check_lowered(&path, &text);
    }
}
