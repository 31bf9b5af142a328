//! Late GC root placement: from IR with tracked pointers to IR with a GC frame.
//!
//! First, `effects` takes every memory promise from the module's safepoints (so that
//! no optimizer run afterwards can drop the frame's stores). Then the pipeline, per
//! function that takes part (its entry block calls
//! `julia.get_pgcstack`, or it has a `"gcstack"` parameter; a function that keeps a GC
//! pointer live across a safepoint without either gets the call): `scan` reduces it to a
//! a model (`model::FnModel`) (finding tracked values, the bases of derived ones and the
//! safepoints), with `lift` making `%gclift` phis and selects over the bases of phis and
//! selects of derived pointers (lane by lane for vectors, field by field for aggregates),
//! `memory` finding the `alloca`s that become frame slots and
//! `immutable` the loads that need no root of their own; `liveness` finds the values to
//! root at each safepoint and drops those refined to others rooted there; `color`
//! assigns frame slots; `place` decides where stores and nulls go; `emit` writes them
//! with Julia's `julia.*_gc_frame*` intrinsics and cleans up the helper constructs (after
//! `barriers` placed the write barriers generational collectors need where the frontend
//! placed none, [`WriteBarriers`]; the
//! jlcall convention, `julia.gc_alloc_obj`, `julia.gc_alloc_memory` and `julia.typeof`
//! expanded by `alloc`, Julia's TBAA tags from `tbaa`, write barriers that store nothing
//! new); `final_lower` turns the intrinsics into a real frame linked into
//! the thread's chain, and `inline_alloc` inlines the allocation fast path of
//! `locus_gc_alloc` calls with constant, small sizes (the thread's MMTk bump pointer, read
//! from its task block; the call stays the slow path: [`InlineAlloc`]). A function already framed (by Julia's own pass, or an earlier run)
//! gets no second frame: it is only finished.
//!
//! The phases are this module's own: [`lower_module`], [`lower_function`] and
//! [`finish_function`] run them, and [`lower_module_observed`] names each as it starts, for
//! a benchmark that times them.
//!
//! How this compares with Julia's own LateLowerGCFrame on Julia's tests is measured by
//! `scripts/julia-gc-conformance`; `tests/filecheck.rs` checks Locus's own fixtures.

mod alloc;
mod barriers;
mod bitset;
mod color;
mod effects;
mod emit;
mod final_lower;
mod immutable;
pub mod inline_alloc;
mod lift;
mod liveness;
mod loads;
mod memory;
mod model;
mod place;
pub mod polls;
mod realign;
mod regions;
mod scan;
pub mod statepoint;
mod tbaa;

use locus_llvm::builder::Builder;
use locus_llvm::cfg::{Cfg, Dominators};
use locus_llvm::ir::Function;
use locus_llvm::Module;

use crate::contract::{GET_PGCSTACK, NEW_GC_FRAME, RUNTIME_GET_PGCSTACK, UNTRACKED};
use crate::{Error, Result};

pub use barriers::WriteBarriers;
pub use inline_alloc::InlineAlloc;

/// How far to lower.
#[derive(Clone, Copy, Debug, Default)]
pub struct LowerOptions {
    /// Stop at the intermediate form (the `julia.*_gc_frame*` intrinsics).
    pub intermediate_only: bool,
}

/// What the lowering did to one safepoint, for people who want to know why a value is
/// rooted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafepointReport {
    /// The call, as LLVM prints it.
    pub call: String,
    /// Each rooted value (its name, with the element or field for a vector or aggregate)
    /// and its slot.
    pub live: Vec<(String, usize)>,
    /// The values stored just before this call (the others were already in their slots).
    pub stored: Vec<String>,
    /// Slots nulled just before this call.
    pub nulled: Vec<usize>,
}

/// What the lowering did to one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionReport {
    /// The function's name.
    pub function: String,
    /// Frame slots used.
    pub slots: usize,
    /// The lower bound: the most values rooted at one safepoint.
    pub max_live: usize,
    /// Per safepoint, in block order.
    pub safepoints: Vec<SafepointReport>,
}

fn dotted(path: &[u32]) -> String {
    let p: Vec<String> = path.iter().map(u32::to_string).collect();
    p.join(".")
}

fn leaf_name(leaf: &scan::Leaf<'_>) -> String {
    let base = match leaf.value.name() {
        n if n.is_empty() => leaf.value.print().trim().to_string(),
        n => format!("%{n}"),
    };
    match &leaf.path {
        crate::addrspace::LeafPath::Whole => base,
        crate::addrspace::LeafPath::Element(i) => format!("{base}[{i}]"),
        crate::addrspace::LeafPath::Field(p) => format!("{base}.{}", dotted(p)),
        crate::addrspace::LeafPath::FieldElement(p, i) => format!("{base}.{}[{i}]", dotted(p)),
    }
}

/// True if `f` already has a frame: it calls `julia.new_gc_frame` (the intermediate form)
/// or the runtime's `locus_gc_get_pgcstack` (fully lowered). The lowering only finishes
/// such a function, and the verifier's findings in it are about the lowering's own output.
pub fn already_has_frame(f: Function<'_>) -> bool {
    f.instructions().into_iter().any(|i| {
        i.as_call()
            .and_then(|c| c.callee_name())
            .is_some_and(|n| n == NEW_GC_FRAME || n == RUNTIME_GET_PGCSTACK)
    })
}

/// Whether `f` keeps a GC pointer live across a call that may collect: a function without
/// `julia.get_pgcstack` that does takes no part in Julia's root placement (no frame), and
/// nothing would root the pointer.
fn keeps_gc_pointers_across_safepoints(f: Function<'_>) -> bool {
    let calls: Vec<_> = f
        .instructions()
        .into_iter()
        .filter(|i| i.as_call().is_some_and(scan::is_safepoint))
        .collect();
    if calls.is_empty() {
        return false;
    }
    let cfg = Cfg::new(f);
    let dom = Dominators::new(&cfg);
    calls
        .into_iter()
        .any(|call| !scan::gc_pointers_live_across(f, &cfg, &dom, call).is_empty())
}

/// Calls `julia.get_pgcstack` at the start of `f`'s entry block, so that `f` takes part in
/// root placement.
fn add_pgcstack<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<()> {
    let Some(entry) = f.entry_block() else {
        return Ok(());
    };
    let ptr = b.ptr_type(UNTRACKED)?;
    let get_ty = b.function_type(ptr, &[], false)?;
    let get_fn = b.declare_function(GET_PGCSTACK, get_ty)?;
    b.position_at_first_insertion_point(entry)?;
    b.call(get_ty, get_fn.as_value(), &[], &[], "pgcstack")?;
    Ok(())
}

/// What the lowering adds for the runtime's collectors besides [`LowerOptions`] (kept
/// apart so that code naming `LowerOptions`' fields stays as it is): safepoint polls for
/// several mutator threads, write barriers for generational plans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadOptions {
    /// Put a `locus_gc_poll` call at every loop back edge of the functions that take part
    /// ([`polls`], `--safepoint-polls`), so a thread in a loop without calls cannot hold a
    /// collection up.
    pub safepoint_polls: bool,
    /// Who places the write barriers generational collectors need (default
    /// [`WriteBarriers::Insert`]: the lowering, after every store no frontend barrier
    /// follows).
    pub write_barriers: WriteBarriers,
    /// Whether the allocation fast path is inlined (default [`InlineAlloc::Auto`]).
    pub inline_alloc: InlineAlloc,
}

impl ThreadOptions {
    /// With or without safepoint polls (and the default write barriers).
    pub fn safepoint_polls(safepoint_polls: bool) -> ThreadOptions {
        ThreadOptions {
            safepoint_polls,
            ..ThreadOptions::default()
        }
    }

    /// The same, with the write barriers `barriers` asks for.
    pub fn with_write_barriers(self, barriers: WriteBarriers) -> ThreadOptions {
        ThreadOptions {
            write_barriers: barriers,
            ..self
        }
    }

    /// The same, inlining the allocation fast path as `inline` says.
    pub fn with_inline_alloc(self, inline: InlineAlloc) -> ThreadOptions {
        ThreadOptions {
            inline_alloc: inline,
            ..self
        }
    }
}

/// Lowers every function of `module` that takes part. The module is changed in place; on
/// success it passes LLVM's verifier.
pub fn lower_module<'m>(
    module: &'m Module<'m>,
    options: LowerOptions,
) -> Result<Vec<FunctionReport>> {
    lower_module_with(module, options, ThreadOptions::default())
}

/// [`lower_module`], with the polls of `threads` inserted first (where the lowering sees
/// them as calls that may collect).
pub fn lower_module_with<'m>(
    module: &'m Module<'m>,
    options: LowerOptions,
    threads: ThreadOptions,
) -> Result<Vec<FunctionReport>> {
    if threads.safepoint_polls {
        polls::insert_module_polls(module)?;
    }
    lower_observed(
        module,
        options,
        threads.write_barriers,
        threads.inline_alloc,
        &mut |_| {},
    )
}

/// One phase of the lowering, as [`lower_module_observed`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// The safepoints lose their memory promises (once per module).
    Effects,
    /// One function reduced to a model: tracked values, bases, safepoints, slots' allocas.
    Scan,
    /// What is live at each safepoint.
    Liveness,
    /// Julia's refinements: values kept alive by something rooted dropped.
    Refine,
    /// Frame slots assigned.
    Color,
    /// Where the stores and nulls go.
    Place,
    /// The frame written in Julia's intermediate form.
    Emit,
    /// Julia's helper constructs rewritten, and the frame made real unless only the
    /// intermediate form is wanted.
    Finish,
    /// LLVM's verifier on the module (once, at the end).
    Verify,
}

/// [`lower_module`], calling `at(phase)` as each phase starts (on each function that takes
/// part; [`Phase::Effects`] and [`Phase::Verify`] once): a phase lasts until the next call,
/// the last until this function returns. For benchmarks that time the phases with their
/// own clock; the lowering itself is the same.
pub fn lower_module_observed<'m>(
    module: &'m Module<'m>,
    options: LowerOptions,
    at: &mut dyn FnMut(Phase),
) -> Result<Vec<FunctionReport>> {
    lower_observed(
        module,
        options,
        WriteBarriers::default(),
        InlineAlloc::default(),
        at,
    )
}

/// [`lower_module_observed`], with the write barriers `barriers` asks for.
fn lower_observed<'m>(
    module: &'m Module<'m>,
    options: LowerOptions,
    barriers: WriteBarriers,
    inline: InlineAlloc,
    at: &mut dyn FnMut(Phase),
) -> Result<Vec<FunctionReport>> {
    let b = Builder::new(module);
    let mut reports = Vec::new();
    // Before anything is lowered: a safepoint that promises not to read the frame would
    // let the optimizer drop the frame's stores.
    at(Phase::Effects);
    effects::forget_safepoint_effects(module);
    for f in module.function_list() {
        if f.is_declaration() {
            continue;
        }
        reports.extend(lower_one(&b, f, options, barriers, inline, at)?);
    }
    at(Phase::Verify);
    module.verify()?;
    Ok(reports)
}

/// Lowers one defined function `f` of `module` in place (what an LLVM function pass does:
/// `LateLowerGCFrame` and `FinalLowerGC` at function level), and checks it with LLVM's
/// verifier. Its report, or `None` when `f` does not take part or already has its
/// frame (then only Julia's helpers are rewritten and, for the final form, finished).
/// The function's safepoints lose their memory promises first, as in [`lower_module`]
/// (only this function's: the work stays proportional to the function, as a function pass's
/// must).
pub fn lower_function<'m>(
    module: &'m Module<'m>,
    f: Function<'m>,
    options: LowerOptions,
) -> Result<Option<FunctionReport>> {
    let b = Builder::new(module);
    effects::forget_function_safepoint_effects(f);
    let report = lower_one(
        &b,
        f,
        options,
        WriteBarriers::default(),
        InlineAlloc::default(),
        &mut |_| {},
    )?;
    // The function alone (a function pass's work stays proportional to its function); the
    // module's verifier only to name what is wrong.
    if !f.verifies() {
        module.verify()?;
        return Err(crate::Error::Lower {
            function: f.name(),
            instruction: None,
            message: "LLVM's verifier refuses the lowered function".into(),
        });
    }
    Ok(report)
}

/// Finishes one function of a module the intermediate lowering went through, as
/// `FinalLowerGC` does after `LateLowerGCFrame`: Julia's helpers rewritten and the frame
/// intrinsics made a real frame, nothing placed again (a function that needed no frame stays
/// without one; the barriers are those the intermediate lowering placed). The module is
/// not verified here.
pub fn finish_function<'m>(module: &'m Module<'m>, f: Function<'m>) -> Result<()> {
    finish(
        &Builder::new(module),
        f,
        LowerOptions::default(),
        WriteBarriers::Frontend,
        InlineAlloc::default(),
    )
}

/// The write barriers placed, Julia's helpers rewritten and, unless only the intermediate
/// form is wanted, the frame made real.
fn finish<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    options: LowerOptions,
    barriers: WriteBarriers,
    inline: InlineAlloc,
) -> Result<()> {
    emit::rewrite_helpers_with(b, f, barriers)?;
    if !options.intermediate_only {
        final_lower::final_lower_with(b, f, inline, inline_alloc::ObjectFrom::Untracked)?;
    }
    Ok(())
}

/// Refuses `f` when one of its instructions makes, takes or allocates a value of a type
/// holding more GC pointers than [`crate::addrspace::MAX_GC_POINTERS_PER_TYPE`]: the
/// lowering would list them one by one (a frame slot, a relocated field each; it capped
/// them silently before, leaving the rest untraced), and LLVM's code generator crashes on
/// such aggregates.
///
/// # Errors
/// [`Error::Lower`] naming the function, the instruction and the type.
pub fn refuse_huge_gc_aggregates(f: Function<'_>) -> Result<()> {
    use crate::addrspace::{gc_pointer_count, MAX_GC_POINTERS_PER_TYPE};
    for inst in f.instructions() {
        let types = std::iter::once(inst.ty())
            .chain(inst.allocated_type())
            .chain(inst.operands().into_iter().map(|v| v.ty()))
            .filter(|t| t.is_aggregate() || t.is_vector());
        for ty in types {
            let n = gc_pointer_count(ty);
            if n > MAX_GC_POINTERS_PER_TYPE {
                return Err(Error::Lower {
                    function: f.name(),
                    instruction: Some(inst.print().trim().to_string()),
                    message: format!(
                        "`{ty}` holds {n} GC pointers, more than the {MAX_GC_POINTERS_PER_TYPE} \
                         one value or alloca may hold"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The work of [`lower_module`] on one function.
fn lower_one<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    options: LowerOptions,
    barriers: WriteBarriers,
    inline: InlineAlloc,
    at: &mut dyn FnMut(Phase),
) -> Result<Option<FunctionReport>> {
    at(Phase::Scan);
    refuse_huge_gc_aggregates(f)?;
    // Already framed (by an earlier run, or by Julia's own LateLowerGCFrame): a second
    // frame would be wrong, so only finish it.
    let framed = already_has_frame(f);
    let scanned = if framed {
        None
    } else {
        match scan::scan(b, f)? {
            None if keeps_gc_pointers_across_safepoints(f) => {
                add_pgcstack(b, f)?;
                scan::scan(b, f)?
            }
            scanned => scanned,
        }
    };
    let Some(scan) = scanned else {
        // Julia cleans up every function, framed or not. A framed one has its barriers
        // (the run that framed it placed them): placing more would double them.
        at(Phase::Finish);
        let barriers = if framed {
            WriteBarriers::Frontend
        } else {
            barriers
        };
        finish(b, f, options, barriers, inline)?;
        return Ok(None);
    };
    refuse_must_tail(f)?;
    at(Phase::Liveness);
    let mut live =
        liveness::analyze_bounded(&scan.model, liveness::MAX_LIVE_PAIRS).map_err(|pairs| {
            Error::Lower {
                function: f.name(),
                instruction: None,
                message: format!(
                    "at least {pairs} GC values live across safepoints, counted once at each \
                 safepoint, more than the {} the lowering takes",
                    liveness::MAX_LIVE_PAIRS
                ),
            }
        })?;
    at(Phase::Refine);
    liveness::refine(&scan.model, &mut live);
    at(Phase::Color);
    let coloring = color::color(&scan.model, &live);
    at(Phase::Place);
    let plans = place::place(&scan.model, &live, &coloring);
    let report = FunctionReport {
        function: f.name(),
        slots: coloring.num_slots + scan.memory.num_slots(),
        max_live: coloring.max_live + scan.memory.num_slots(),
        safepoints: plans
            .iter()
            .enumerate()
            .map(|(id, p)| SafepointReport {
                call: scan
                    .safepoints
                    .get(id)
                    .map(|c| c.print().trim().to_string())
                    .unwrap_or_default(),
                live: p
                    .live
                    .iter()
                    .filter_map(|&v| {
                        Some((
                            leaf_name(scan.leaves.get(v)?),
                            coloring.slot_of.get(v).copied().flatten()?,
                        ))
                    })
                    .collect(),
                stored: p
                    .stores
                    .iter()
                    .filter_map(|&(v, _)| scan.leaves.get(v).map(leaf_name))
                    .collect(),
                nulled: p.nulls.clone(),
            })
            .collect(),
    };
    at(Phase::Emit);
    emit::emit_frame(b, f, &scan, coloring.num_slots, &plans)?;
    regions::register(b, f, &scan.memory.regions, false)?;
    regions::drop_tail_markers(b, f)?;
    at(Phase::Finish);
    finish(b, f, options, barriers, inline)?;
    Ok(Some(report))
}

/// A `musttail` call in a function that takes part cannot be kept: its GC frame would have
/// to be popped before the call (a `musttail` call must be followed by the `ret`), and then
/// nothing would root what the call is passed.
pub(crate) fn refuse_must_tail(f: Function<'_>) -> Result<()> {
    for inst in f.instructions() {
        if inst.as_call().is_some_and(|c| c.is_must_tail()) {
            return Err(Error::Lower {
                function: f.name(),
                instruction: Some(inst.print().trim().to_owned()),
                message: "a musttail call in a function that takes part in GC: its frame (or \
                          statepoint) cannot outlive the call; call it without musttail"
                    .into(),
            });
        }
    }
    Ok(())
}
