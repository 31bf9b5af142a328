//! Safepoints keep no memory promises: what lets the frame's stores survive the optimizer.
//!
//! A call that may collect reads every root the function stored in its frame before it
//! (the collector walks the frames from the thread's chain head). A frontend may still
//! give such a call optimistic memory effects: Julia gives calls to `:consistent` and
//! `:effect_free` functions `memory(argmem: read)` and the `"julia.safepoint"` attribute
//! (so that LLVM's passes before this one can move them), and a declaration may say
//! `readnone` of the chain-head argument. Left on the lowered call, those promises tell
//! LLVM the call cannot read the frame, and dead-store elimination (`opt -O1` and up)
//! removes the stores the collector reads: the objects they held are freed while in use.
//!
//! As Julia's LateLowerGCFrame does (JuliaLang/julia#62613, #62698), every call that is a
//! safepoint ([`super::scan::is_safepoint`]) loses them, at the call site and on its
//! callee: its `memory(...)` attribute and `readnone`/`readonly`/`writeonly` on its
//! arguments. This runs over the whole module before any function is lowered, so every
//! function sees the same callees.
//!
//! A promise can also spread before the lowering: LLVM's function-attrs (`opt -O1` and up)
//! infers `memory(none)` for a function whose only call is to a `"julia.safepoint"`
//! function that claims `memory(none)`, and the calls of that wrapper then looked as if
//! they could not collect. So first every defined function that calls a safepoint while
//! its own memory effects say it cannot collect loses those effects too, up the call
//! graph.

use locus_llvm::ir::Function;
use locus_llvm::passes::{forget_function_memory_effects, forget_memory_effects};
use locus_llvm::Module;

use super::scan::{cannot_collect, is_safepoint};

/// Removes the memory promises of every safepoint in `module`'s defined functions.
/// Returns how many calls (or their callees) lost one.
pub fn forget_safepoint_effects(module: &Module<'_>) -> usize {
    forget_effects_of_collecting_functions(module);
    module
        .function_list()
        .into_iter()
        .map(forget_function_safepoint_effects)
        .sum()
}

/// [`forget_safepoint_effects`] for the safepoints of one function (what lowering that
/// function alone needs: a function-level pass must not walk the whole module each time).
pub fn forget_function_safepoint_effects(f: Function<'_>) -> usize {
    let mut changed = 0;
    for inst in f.instructions() {
        let Some(call) = inst.as_call() else { continue };
        if is_safepoint(call) && forget_memory_effects(call) {
            changed += 1;
        }
    }
    changed
}

/// Removes the memory effects of each defined function of `module` that calls a safepoint
/// while they say it cannot collect, until none is left (each round changes at least one
/// function, which then says nothing, so at most one round per function).
fn forget_effects_of_collecting_functions(module: &Module<'_>) {
    loop {
        let mut changed = false;
        for f in module.function_list() {
            let collects = !f.is_declaration()
                && cannot_collect(f.memory_effects())
                && f.instructions()
                    .into_iter()
                    .any(|i| i.as_call().is_some_and(is_safepoint));
            if collects && forget_function_memory_effects(f) {
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}
