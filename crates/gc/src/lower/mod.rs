//! Late GC root placement: from IR with tracked pointers to IR with a GC frame.
//!
//! The pipeline, per function that calls `julia.get_pgcstack` in its entry block:
//! [`scan`] reduces it to a [`model::FnModel`] (finding tracked values, the bases of derived
//! ones, the safepoints); [`liveness`] finds the values to root at each safepoint; [`color`]
//! assigns frame slots; [`place`] decides where stores and nulls go; [`emit`] writes them
//! with Julia's `julia.*_gc_frame*` intrinsics and lowers the helper constructs;
//! [`final_lower`] turns the intrinsics into a real frame linked into the thread's chain.

mod bitset;
pub mod color;
pub mod emit;
pub mod final_lower;
pub mod liveness;
pub mod memory;
pub mod model;
pub mod place;
pub mod scan;

pub use bitset::BitSet;

use locus_llvm::builder::Builder;
use locus_llvm::Module;

use crate::Result;
use emit::Sabotage;

/// How far to lower, and test switches.
#[derive(Clone, Copy, Debug, Default)]
pub struct LowerOptions {
    /// Stop at the intermediate form (the `julia.*_gc_frame*` intrinsics).
    pub intermediate_only: bool,
    /// Test only: leave out the store with this number (in module order).
    pub drop_store: Option<usize>,
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

/// True if `f` already calls `julia.new_gc_frame`.
fn already_has_frame(f: locus_llvm::ir::Function<'_>) -> bool {
    f.instructions()
        .into_iter()
        .any(|i| i.as_call().and_then(|c| c.callee_name()).as_deref() == Some(emit::NEW_GC_FRAME))
}

/// Lowers every function of `module` that takes part. The module is changed in place; on
/// success it passes LLVM's verifier.
pub fn lower_module<'m>(
    module: &'m Module<'m>,
    options: LowerOptions,
) -> Result<Vec<FunctionReport>> {
    let b = Builder::new(module);
    let mut reports = Vec::new();
    let mut sabotage = Sabotage {
        drop_store: options.drop_store,
        seen: 0,
    };
    for f in module.function_list() {
        if f.is_declaration() {
            continue;
        }
        // Already in the intermediate form (a frame placed by an earlier run, or by Julia's
        // own LateLowerGCFrame): a second frame would be wrong, so only finish it. Fully
        // lowered input no longer calls `julia.get_pgcstack`, so `scan` passes it by.
        if already_has_frame(f) {
            if !options.intermediate_only {
                final_lower::final_lower(&b, f)?;
            }
            continue;
        }
        let Some(scan) = scan::scan(&b, f)? else {
            continue;
        };
        let mut live = liveness::analyze(&scan.model);
        liveness::refine_choices(&scan.model, &mut live);
        let coloring = color::color(&scan.model, &live);
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
        emit::emit_frame(&b, f, &scan, coloring.num_slots, &plans, &mut sabotage)?;
        emit::rewrite_helpers(&b, f)?;
        if !options.intermediate_only {
            final_lower::final_lower(&b, f)?;
        }
        reports.push(report);
    }
    module.verify()?;
    Ok(reports)
}
