//! Chapter: precise GC for any LLVM frontend, Julia-style.
//!
//! Input: `gc.ll`, a list program in the IR contract of spec 003 (tracked pointers in
//! address space 10, interior pointers in 11, `julia.get_pgcstack` in each entry block).
//! Locus places the roots, shows why each value is rooted, checks the output with
//! `opt-19 -passes=verify`, runs it under the stress collector, and shows that the
//! collector would catch a missing root: with one planned store left out, a second run of
//! this very binary ends with a dangling reference.

use locus_gc::lower::{lower_module, LowerOptions};
use locus_gc::run::{run, RunOptions};
use locus_gc::runtime::OnFault;
use locus_llvm::{Context, Module};

use super::{tool, Tour};
use crate::Failure;

const SAMPLE: &str = include_str!("gc.ll");
const EXPECTED: i64 = 97;

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

pub fn run_chapter(tour: &mut Tour<'_>) -> Result<(), Failure> {
    tour.line(
        "Input: a list of 10..1 built across allocations, then summed while allocating garbage;",
    )?;
    tour.line("  past 20 each step reads the head's value through a select of interior pointers")?;
    tour.line("  (address space 11) into two different objects. Expected result: 97.")?;

    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "gc.ll", SAMPLE).map_err(fail)?;
    let reports = lower_module(&module, LowerOptions::default()).map_err(fail)?;
    tour.line("")?;
    tour.line("Root placement (locus gc lower --report):")?;
    for f in &reports {
        tour.line(format!(
            "  @{}: {} frame slot(s); lower bound {} (most values rooted at one safepoint)",
            f.function, f.slots, f.max_live
        ))?;
        for sp in &f.safepoints {
            // `@callee(` is enough to say which call.
            let call = sp
                .call
                .split('@')
                .nth(1)
                .and_then(|c| c.split('(').next())
                .unwrap_or(&sp.call);
            let roots: Vec<String> = sp
                .live
                .iter()
                .map(|(name, slot)| {
                    let how = if sp.stored.contains(name) {
                        "stored here"
                    } else {
                        "already there"
                    };
                    format!("{name} in slot {slot} ({how})")
                })
                .collect();
            let roots = if roots.is_empty() {
                "nothing to root".to_string()
            } else {
                roots.join(", ")
            };
            tour.line(format!("    at the call to @{call}: {roots}"))?;
        }
    }
    tour.line(
        "  (the select's own base is not rooted: both objects it chooses from are rooted anyway)",
    )?;

    let lowered = tour.scratch_file("gc-lowered.ll");
    std::fs::write(&lowered, module.print())
        .map_err(|e| fail(format!("{}: {e}", lowered.display())))?;
    let shown = lowered.display().to_string();
    tool(
        "opt-19",
        &["-passes=verify", "-disable-output", &shown],
        None,
    )?;
    tour.passed(
        "opt-19 -passes=verify accepts the lowered module (frame linked, stored, unlinked)",
    )?;

    let outcome = run(
        "gc.ll",
        SAMPLE,
        RunOptions {
            entry: "main".into(),
            stress: true,
            on_fault: OnFault::Record,
            drop_store: None,
        },
    )
    .map_err(fail)?;
    if outcome.value != EXPECTED || !outcome.faults.is_empty() {
        return Err(fail(format!(
            "the stress run gave {} with faults {:?}",
            outcome.value, outcome.faults
        )));
    }
    let s = outcome.stats;
    tour.passed(format!(
        "JIT-compiled by LLVM 19 and run under the stress collector: {} ({} collections, {} frames walked, {} objects freed)",
        outcome.value, s.collections, s.frames_walked, s.objects_freed
    ))?;

    // The oracle can fail: leave out the store that roots %list during the call to @cons
    // (store number 0) and run this binary again.
    let sample = tour.scratch_file("gc.ll");
    std::fs::write(&sample, SAMPLE).map_err(|e| fail(format!("{}: {e}", sample.display())))?;
    let exe = std::env::current_exe().map_err(fail)?;
    let sample_arg = sample.display().to_string();
    let out = std::process::Command::new(exe)
        .args(["gc", "run", "--stress", "--drop-store", "0", &sample_arg])
        .output()
        .map_err(fail)?;
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("");
    if out.status.code() != Some(2) || !first.starts_with("locus: gc: dangling reference") {
        return Err(fail(format!(
            "dropping a root was not caught: status {:?}, {first}",
            out.status.code()
        )));
    }
    let short: String = first.chars().take(110).collect();
    tour.line("  with the store of %list before the call to @cons left out (a test-only switch):")?;
    tour.line(format!("    {short}..."))?;
    tour.passed("the stress collector catches the missing root (exit status 2)")
}
