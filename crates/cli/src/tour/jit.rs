//! Chapter: a JIT that keeps its stack maps (spec 000's "Motivation": inline caches on
//! patch points and deoptimization through a stack map's shadow).
//!
//! Input: `jit.ll`, two property reads through patch points aimed at the runtime's miss
//! handler, and a function with a stack map after a runtime call. Locus compiles it in
//! process keeping the `.llvm_stackmaps` section, runs it, and shows a patch point's bytes
//! as LLVM left them, after the miss handler patched in a fast path, and after a shape
//! change put them back; then the stack map's shadow before and after the function was
//! invalidated, and the deoptimized call finished by Locus's interpreter. The
//! cross-checks: the answers equal the objects' properties, the bytes are put back exactly,
//! and the deoptimized result equals what LLVM's code computes.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use locus_llvm::jit_runtime::Runtime;

use super::Tour;
use crate::Failure;

const SAMPLE: &str = include_str!("jit.ll");
const X: u64 = 10;
const Y: u64 = 20;

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The reserved bytes of site `id`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn site_bytes(rt: &Runtime, id: u64) -> Result<Vec<u8>, Failure> {
    let address = rt
        .site_address(id)
        .ok_or_else(|| fail(format!("no record for site {id}")))?;
    let len = rt.sites().get(&id).map_or(0, |s| s.reserved);
    rt.code_bytes(address, len)
        .ok_or_else(|| fail(format!("site {id}'s bytes are not in the JIT's code")))
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub fn run_chapter(tour: &mut Tour<'_>) -> Result<(), Failure> {
    let _ = (SAMPLE, X, Y, hex, fail);
    tour.line("This chapter runs on x86-64 Linux only (the runtime's trampolines).")
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn run_chapter(tour: &mut Tour<'_>) -> Result<(), Failure> {
    tour.line("Input: jit.ll: @sum reads properties 10 and 20 of an object through two patch")?;
    tour.line("  points (IDs 1, 2); @compute has a stack map (ID 100) after a runtime call.")?;
    let rt = Runtime::new("jit.ll", SAMPLE, true).map_err(fail)?;
    let records = rt.jit().stack_maps().len();
    tour.line(format!(
        "Compiled in process (MCJIT, own memory manager): {records} stack map records kept, indexed by address"
    ))?;

    tour.line("")?;
    tour.line("Inline cache:")?;
    let shape = rt.add_shape(&[X, Y]);
    let object = rt.new_object(shape, &[7, 35]).map_err(fail)?;
    let before = site_bytes(&rt, 1)?;
    tour.line(format!("  site 1 as LLVM left it:   {}", hex(&before)))?;
    let mut answers = Vec::new();
    for _ in 0..3 {
        // SAFETY: `@sum` is `i64 (ptr)`, given an object of the runtime.
        answers.push(unsafe { rt.call("sum", &[object]) }.map_err(fail)?);
    }
    let patched = site_bytes(&rt, 1)?;
    tour.line(format!("  after the first miss:     {}", hex(&patched)))?;
    tour.line(
        "    (the fast path written into the site: check the object is the runtime's, compare",
    )?;
    tour.line(
        "     its shape, then load the property; the miss handler's call stays for the rest)",
    )?;
    let s = rt.stats();
    tour.line(format!(
        "  3 calls, 6 reads: {} misses, {} hits, {} patches; answers {answers:?}",
        s.misses, s.hits, s.patches
    ))?;
    if answers != [42, 42, 42] || s.misses != 2 || s.hits != 4 || patched == before {
        return Err(fail(
            "the inline cache did not answer 42 from patched sites",
        ));
    }
    tour.passed("each site misses once, is patched, and answers the rest itself")?;
    // Swap the properties' places: every site specialized on the shape goes back.
    let unpatched = rt.change_shape(shape, &[Y, X]).map_err(fail)?;
    let after = site_bytes(&rt, 1)?;
    tour.line(format!(
        "  after the shape changed:  {} ({unpatched} sites patched back)",
        hex(&after)
    ))?;
    // SAFETY: as above.
    let again = unsafe { rt.call("sum", &[object]) }.map_err(fail)?;
    if after != before || again != 42 {
        return Err(fail("a shape change did not put the site's bytes back"));
    }
    tour.passed("a shape change restores LLVM's bytes exactly, and the next read misses again")?;

    tour.line("")?;
    tour.line("Deoptimization:")?;
    let (a, b) = (5u64, 9u64);
    // SAFETY: `@compute` is `i64 (i64, i64)`.
    let compiled = unsafe { rt.call("compute", &[a, b]) }.map_err(fail)?;
    let shadow = site_bytes(&rt, 100)?;
    rt.invalidate("compute").map_err(fail)?;
    let invalid = site_bytes(&rt, 100)?;
    tour.line(format!("  shadow of stack map 100:  {}", hex(&shadow)))?;
    tour.line(format!("  after invalidate:         {}", hex(&invalid)))?;
    // SAFETY: as above.
    let deopt = unsafe { rt.call("compute", &[a, b]) }.map_err(fail)?;
    tour.line(format!(
        "  compute({a}, {b}): compiled {compiled}, deoptimized at stack map 100 {deopt} ({} deopt)",
        rt.stats().deopts
    ))?;
    rt.revalidate("compute").map_err(fail)?;
    if deopt != compiled || site_bytes(&rt, 100)? != shadow {
        return Err(fail("the deoptimized result differs from the compiled one"));
    }
    tour.passed("the interpreter, from the record's live values, finishes as LLVM's code does")
}
