//! The cases LLVM's own tests of `rewrite-statepoints-for-gc` check
//! (`llvm/test/Transforms/RewriteStatepointsForGC`: which values a statepoint must list and
//! relocate, and with which base), written as Julia-style programs of `fixtures/rs4gc` and
//! run through Locus's statepoint path under the moving stress collector, which moves
//! every live object at every collection and makes the old copies inaccessible:
//!
//! | fixture | RS4GC test | the fact |
//! | --- | --- | --- |
//! | `switch_duplicate_edges` | base-pointers.ll | a phi listing one predecessor three times |
//! | `loop_select_derived` | base-pointers.ll | loop phis of selects of interior pointers |
//! | `self_loop_phi` | base-pointers.ll | a base phi on a self loop |
//! | `null_base_phi` | constants.ll | a base phi of an object and null (gep of null) |
//! | `vector_variable_lane` | base-vector.ll | insertelement, shufflevector, vector phi, variable lane |
//! | `derived_chains` | rematerialize-derived-pointers.ll | constant, variable and 4-deep GEP chains |
//! | `liveness_paths` | liveness-basics.ll | live on both arms, derived across two calls |
//! | `freeze_base` | freeze.ll | `freeze` of an object pointer |
//! | `deopt_bundle` | base-pointers.ll | an object in a call's deopt state and used after |
//! | `phi_select_cycle` | meetBDVState-hangs.ll | base inference over a cycle of phis and selects |
//! | `vector_null_lane` | constants.ll | a select of a vector of objects and the null vector |
//! | `atomic_xchg_base` | base-atomicrmw.ll | the old value of an atomic exchange is a base |
//! | `invoke_landing_pad` | invokes.ll | an invoke that throws: relocated in its `landingpad token` |
//!
//! Each must give its `; expect:` value with no fault and with objects moved: as lowered,
//! with LLVM's O2 pipeline run on the rewritten module (`RunOptions::passes`), and with
//! `opt-19 -passes=default<O2>` run on the program before Locus sees it (the roots that
//! survive the optimizer: inlined, folded, hoisted). And each must fail when one of its
//! relocations is dropped (the oracle can fail).

use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};

use locus_gc::run::{run, Roots, RunOptions};
use locus_gc::runtime::OnFault;

use crate::common::ll_files;
use crate::{drop_relocate_line, expected, run_statepoint};

/// `text` after `opt-19 -S -passes=default<O2>`.
pub fn optimized(text: &str, name: &str) -> String {
    let mut child = Command::new("opt-19")
        .args(["-S", "-passes=default<O2>", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("opt-19 (scripts/install-deps): {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("opt-19's input: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("opt-19: {e}"));
    assert!(
        out.status.success(),
        "opt-19 -passes=default<O2> {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap_or_else(|e| panic!("opt-19's output: {e}"))
}

#[test]
fn rs4gc_cases_give_their_results_moved_at_every_collection() {
    let mut failed = Vec::new();
    let mut passed = 0;
    for path in ll_files("fixtures/rs4gc") {
        let source = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let want = expected(&source, &path);
        let name = path.display().to_string();
        let before = optimized(&source, &name);
        // The programs read through a function O2 does not inline, so that optimized before
        // Locus sees them they still keep their objects live across the allocations.
        for (text, passes, how) in [
            (&source, None, "as written"),
            (&source, Some("default<O2>"), "O2 after the rewrite"),
            (&before, None, "opt-19 O2 before Locus"),
        ] {
            let options = RunOptions {
                roots: Roots::Statepoint,
                moving: true,
                stress: true,
                on_fault: OnFault::Record,
                passes: passes.map(Into::into),
                ..RunOptions::default()
            };
            // SAFETY: the fixtures only touch the objects the runtime gives them, while they
            // are live (checked by the stress collector and the old copies' protection).
            match unsafe { run(&name, text, options) } {
                Ok(out)
                    if out.faults.is_empty()
                        && out.value == want
                        && out.stats.objects_moved > 0 =>
                {
                    passed += 1
                }
                Ok(out) => failed.push(format!(
                    "{name} ({how}): value {} (want {want}), moved {}, faults {:?}",
                    out.value, out.stats.objects_moved, out.faults
                )),
                Err(e) => failed.push(format!("{name} ({how}): {e}")),
            }
        }
    }
    println!("{passed} runs gave their results with objects moved");
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The environment variable that makes [`one_dropped_relocation`] run: the fixture's path
/// and the number of the `gc.relocate` line to drop, `PATH:N`.
const DROP: &str = "LOCUS_RS4GC_DROP";

/// Runs fixture `PATH` with its `N`th relocation dropped, in a process of its own (this
/// test binary run again by [`every_rs4gc_case_fails_with_a_relocation_dropped`]): a wrong
/// program may die of a signal, which ends the process. Prints `value V faults F`. Does
/// nothing without [`DROP`] set.
#[test]
fn one_dropped_relocation() {
    let Ok(spec) = std::env::var(DROP) else {
        return;
    };
    let (path, n) = spec
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("{DROP}={spec}: not PATH:N"));
    let n: usize = n.parse().unwrap_or_else(|e| panic!("{DROP}={spec}: {e}"));
    let path = std::path::Path::new(path);
    let good = rewritten(path);
    let line = relocations(&good)
        .get(n)
        .copied()
        .unwrap_or_else(|| panic!("{}: no relocation {n}", path.display()));
    let bad = drop_relocate_line(&good, line);
    let out = run_statepoint(path, &bad, true, true)
        .unwrap_or_else(|e| panic!("{}: {e}\n{bad}", path.display()));
    println!("value {} faults {}", out.value, out.faults.len());
}

/// The fixture at `path` rewritten for statepoints, as text.
fn rewritten(path: &std::path::Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
    let ctx = locus_llvm::Context::new();
    let (module, _) =
        locus_gc::run::lower_statepoints(&ctx, &path.display().to_string(), text.as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    module.print()
}

/// The `gc.relocate` lines of a rewritten module.
fn relocations(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.contains("= call coldcc") && l.contains("gc.relocate"))
        .collect()
}

/// For every relocation of every case, the rewritten module with that one `gc.relocate`
/// dropped (its uses take the value from before the call) is run, each in a process of its
/// own ([`one_dropped_relocation`]): every case must fail with at least one of them (a
/// dangling reference to a moved object, a signal, or a wrong value). Not every drop can
/// be seen: a relocated base that nothing uses after the call, and a value whose next
/// statepoint the code generator spills to the same stack slot it reloaded it from (the
/// collector updated that slot, so the old value is never read).
#[test]
fn every_rs4gc_case_fails_with_a_relocation_dropped() {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let mut report = Vec::new();
    let mut uncaught_cases = Vec::new();
    for path in ll_files("fixtures/rs4gc") {
        let want = expected(&fs::read_to_string(&path).unwrap_or_default(), &path);
        let count = relocations(&rewritten(&path)).len();
        assert!(count > 0, "{}: no gc.relocate", path.display());
        let mut caught = 0;
        for n in 0..count {
            let out = Command::new(&exe)
                .args(["--exact", "rs4gc::one_dropped_relocation", "--nocapture"])
                .env(DROP, format!("{}:{n}", path.display()))
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
            let stdout = String::from_utf8_lossy(&out.stdout);
            let seen = stdout
                .lines()
                .find_map(|l| l.strip_prefix("value "))
                .and_then(|l| l.split_once(" faults "))
                .map(|(v, f)| (v.parse::<i64>().ok(), f.trim().parse::<usize>().ok()));
            let correct = out.status.success() && seen == Some((Some(want), Some(0)));
            if !correct {
                caught += 1;
            }
            println!(
                "{} relocation {n}: {} ({})",
                path.display(),
                if correct { "not seen" } else { "caught" },
                stdout
                    .lines()
                    .find(|l| l.starts_with("value "))
                    .unwrap_or("died")
            );
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        report.push(format!("{name} {caught}/{count}"));
        if caught == 0 {
            uncaught_cases.push(name.into_owned());
        }
    }
    println!("dropped relocations caught: {}", report.join(", "));
    assert!(
        uncaught_cases.is_empty(),
        "no dropped relocation caught in {uncaught_cases:?}"
    );
}
