//! Chapter: a JIT that keeps its stack maps (spec 000's "Motivation": inline caches on
//! patch points and deoptimization through a stack map's shadow).
//!
//! Input: `jit.ll`, two property reads through patch points aimed at the runtime's miss
//! handler, and a function with a stack map after a runtime call. Locus compiles it in
//! process keeping the `.llvm_stackmaps` section, runs it, and shows a patch point's bytes
//! as LLVM left them, after the miss handler patched in a fast path, and after a shape
//! change put them back; a site that sees more shapes than a runtime specializes on (the
//! built-in shapes model, the runtime's `ObjectModel`, resolving the property): the fast
//! path, a stub Locus encodes itself for two shapes, then the megamorphic lookup; then the
//! stack map's shadow before and after the function was
//! invalidated, and the deoptimized call finished by Locus's interpreter. The
//! cross-checks: the answers equal the objects' properties, the bytes are put back exactly,
//! and the deoptimized result equals what LLVM's code computes.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use locus_jit::Runtime;

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

/// Polymorphic and megamorphic sites: a runtime specializing a site on at most two
/// shapes, read with objects of three.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn polymorphic(tour: &mut Tour<'_>) -> Result<(), Failure> {
    use locus_jit::{Options, Resolution};

    tour.line("")?;
    tour.line("Polymorphic and megamorphic sites (a runtime with at most 2 shapes a site):")?;
    let options = Options {
        max_shapes: 2,
        ..Options::default()
    };
    let rt = Runtime::with_options("jit.ll", SAMPLE, options).map_err(fail)?;
    let orders: [&[u64]; 3] = [&[X, Y], &[Y, X], &[7, X, Y]];
    let mut objects = Vec::new();
    for (i, order) in orders.iter().enumerate() {
        let shape = rt.add_shape(order);
        let values: Vec<i64> = order
            .iter()
            .map(|p| match *p {
                X => 1 + i as i64,
                Y => 100,
                _ => 0,
            })
            .collect();
        objects.push(rt.new_object(shape, &values).map_err(fail)?);
    }
    // The runtime's shapes are the built-in object model: where property 10 is.
    let slots: Vec<String> = (0..orders.len() as u64)
        .map(|shape| match rt.resolve(shape, X) {
            Ok(Resolution::Slot(offset)) => format!("shape {shape}: word at +{offset}"),
            Ok(Resolution::SlowPath) => format!("shape {shape}: slow path"),
            Err(e) => e.to_string(),
        })
        .collect();
    tour.line(format!(
        "  the shapes model resolves property 10: {}",
        slots.join(", ")
    ))?;
    let mut answers = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        // SAFETY: `@sum` is `i64 (ptr)`, given an object of the runtime.
        answers.push(unsafe { rt.call("sum", &[*object]) }.map_err(fail)?);
        let bytes = site_bytes(&rt, 1)?;
        let address = rt.site_address(1).unwrap_or(0);
        let form = if rt.is_megamorphic(address) {
            "megamorphic: calls the runtime's lookup"
        } else if i == 0 {
            "the fast path inline"
        } else {
            "calls a stub Locus encoded for both shapes"
        };
        tour.line(format!("  after shape {i}: {} ({form})", hex(&bytes[..13])))?;
    }
    // SAFETY: as above.
    let again = unsafe { rt.call("sum", &[objects[2]]) }.map_err(fail)?;
    let s = rt.stats();
    tour.line(format!(
        "  4 calls: answers {answers:?} then {again}; {} misses, {} lookups, {} stubs",
        s.misses, s.lookups, s.stubs
    ))?;
    let lookup = locus_stackmap::patch::encode_call(
        locus_stackmap::patch::Arch::X86_64,
        Runtime::lookup_address(),
        48,
    )
    .map_err(fail)?;
    if answers != [101, 102, 103] || again != 103 || site_bytes(&rt, 1)? != lookup || s.lookups != 2
    {
        return Err(fail(
            "the megamorphic site did not answer through the lookup",
        ));
    }
    tour.passed("a third shape makes the sites megamorphic: the lookup answers, no more patching")
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub fn run_chapter(tour: &mut Tour<'_>) -> Result<(), Failure> {
    let _ = (SAMPLE, X, Y, hex);
    let _: fn(String) -> Failure = fail;
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
    polymorphic(tour)?;

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
