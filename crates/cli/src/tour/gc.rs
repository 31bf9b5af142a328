//! Chapter: precise GC for any LLVM frontend, Julia-style.
//!
//! Input: `gc.ll`, a list program in the IR contract of spec 003 (tracked pointers in
//! address space 10, interior pointers in 11, `julia.get_pgcstack` in each entry block).
//! Locus places the roots, shows why each value is rooted, checks the output with
//! `opt-19 -passes=verify`, runs it under the stress collector, and shows that the
//! collector would catch a missing root: with one root store deleted from the lowered
//! module, a second run of this very binary (`locus gc run --stress` on the edited, already
//! lowered IR) ends with a dangling reference.

use locus_gc::lower::{lower_module, LowerOptions};
use locus_gc::run::{run, RunOptions};
use locus_gc::runtime::OnFault;
use locus_llvm::{Context, Module};

use super::root_stores::{root_stores, without_line};
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

    let options = RunOptions {
        stress: true,
        on_fault: OnFault::Record,
        ..RunOptions::default()
    };
    // SAFETY: the sample only touches the objects the runtime gives it, while they are
    // live; the stress collector checks exactly that.
    let outcome = unsafe { run("gc.ll", SAMPLE, options) }.map_err(fail)?;
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

    // The oracle can fail: delete the store that roots %list across the call to @cons from
    // the lowered module, and run the edited module (already lowered, so it runs as it is)
    // with this binary.
    let lowered_text = module.print();
    let sabotaged = delete_root_store(&lowered_text, "%list")
        .ok_or_else(|| fail("the lowered sample has no root store of %list"))?;
    let sample = tour.scratch_file("gc-lowered-without-a-root.ll");
    std::fs::write(&sample, sabotaged).map_err(|e| fail(format!("{}: {e}", sample.display())))?;
    let exe = std::env::current_exe().map_err(fail)?;
    let sample_arg = sample.display().to_string();
    let out = std::process::Command::new(exe)
        .args(["gc", "run", "--stress", &sample_arg])
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
    tour.line(
        "  with the store of %list into its slot deleted from the lowered module (locus gc run --stress):",
    )?;
    tour.line(format!("    {short}..."))?;
    tour.passed("the stress collector catches the missing root (exit status 2)")
}

/// The lowered module `text` without its first store of `value` into a GC frame's root
/// slot ([`root_stores`]), or `None` if it has none.
fn delete_root_store(text: &str, value: &str) -> Option<String> {
    let store = format!("store ptr addrspace(10) {value}, ");
    let line = root_stores(text).into_iter().find(|&i| {
        text.lines()
            .nth(i)
            .is_some_and(|l| l.trim().starts_with(&store))
    })?;
    Some(without_line(text, line))
}
