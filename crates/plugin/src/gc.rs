//! The GC passes: `locus-gc-verify`, `locus-late-gc-lowering` (`LateLowerGCFrame`) and
//! `locus-final-gc-lowering` (`FinalLowerGC`), on the module or one function.

use std::ffi::c_int;

use locus_gc::contract::{GCSTACK_ATTR, GET_PGCSTACK, GET_PGCSTACK_OR_NEW};
use locus_gc::lower::{
    already_has_frame, finish_function, lower_function, lower_module, LowerOptions,
};
use locus_gc::verify::{verify_function, verify_module, VerifyOptions, Violation};
use locus_llvm::ir::{AttributeIndex, Function};
use locus_llvm::Module;

use crate::{Kind, Reporter, Scope, CHANGED, FAILED, FINDINGS, UNCHANGED};

/// Whether the module takes part in Julia's GC contract: what the default-pipeline pass
/// lowers.
pub(crate) fn uses_gc(module: &Module<'_>) -> bool {
    if module.function(GET_PGCSTACK).is_some() || module.function(GET_PGCSTACK_OR_NEW).is_some() {
        return true;
    }
    module.function_list().into_iter().any(|f| {
        (0..f.params().len())
            .filter_map(|i| u32::try_from(i).ok())
            .any(|i| f.has_attribute(AttributeIndex::Param(i), GCSTACK_ATTR))
    })
}

/// Reports each violation (errors and warnings), as `locus gc verify` prints them.
/// Returns how many are errors.
fn report_violations(violations: &[Violation], reporter: &Reporter) -> usize {
    let mut errors = 0;
    for v in violations {
        let kind = if v.is_error() {
            errors += 1;
            Kind::Error
        } else {
            Kind::Warning
        };
        reporter.report(kind, &v.function, &v.instruction, &v.to_string());
    }
    errors
}

/// The violations of the module or of the one function.
fn violations(
    module: &Module<'_>,
    scope: Scope<'_>,
    options: VerifyOptions,
) -> Result<Vec<Violation>, String> {
    match scope {
        Scope::Module => Ok(verify_module(module, options)),
        Scope::Function(name) => Ok(verify_function(function(module, name)?, options)),
    }
}

/// The violations that stop a lowering: those of functions without a frame yet. A function
/// already framed (Julia's intermediate form, by an earlier `LateLowerGCFrame`, or fully
/// lowered) breaks the rules by design (`julia.pointer_from_objref` is a plain cast now,
/// the frame's stores), and the lowering only finishes it: as `locus_gc::run` skips
/// functions already lowered.
fn violations_to_lower(
    module: &Module<'_>,
    scope: Scope<'_>,
    options: VerifyOptions,
) -> Result<Vec<Violation>, String> {
    let found = violations(module, scope, options)?;
    Ok(found
        .into_iter()
        .filter(|v| !module.function(&v.function).is_some_and(already_has_frame))
        .collect())
}

/// The function named `name`, which the pass manager is running a function pass on.
pub(crate) fn function<'m>(module: &'m Module<'_>, name: &str) -> Result<Function<'m>, String> {
    if name.is_empty() {
        return Err(
            "an unnamed function cannot be named back to Locus: run the pass at \
                    module level (outside function(...))"
                .into(),
        );
    }
    module
        .function(name)
        .ok_or_else(|| format!("function @{name} is not in the module"))
}

/// `locus-gc-verify`.
pub(crate) fn verify(
    module: &Module<'_>,
    scope: Scope<'_>,
    options: VerifyOptions,
    reporter: &Reporter,
) -> c_int {
    match violations(module, scope, options) {
        Ok(found) if found.is_empty() => UNCHANGED,
        Ok(found) => {
            report_violations(&found, reporter);
            FINDINGS
        }
        Err(e) => {
            reporter.error(&e);
            FAILED
        }
    }
}

/// The late (`intermediate_only`) or final lowering, after the invariants are checked as
/// `locus gc lower` checks them (errors stop it, warnings are reported), in the functions
/// that have no frame yet.
pub(crate) fn lower(
    module: &Module<'_>,
    scope: Scope<'_>,
    intermediate_only: bool,
    options: VerifyOptions,
    reporter: &Reporter,
) -> c_int {
    let found = match violations_to_lower(module, scope, options) {
        Ok(found) => found,
        Err(e) => {
            reporter.error(&e);
            return FAILED;
        }
    };
    if report_violations(&found, reporter) > 0 {
        return FAILED;
    }
    let lowered = match scope {
        Scope::Module => lower_module(module, LowerOptions { intermediate_only }).map(|_| ()),
        Scope::Function(name) => match function(module, name) {
            Ok(f) => lower_function(module, f, LowerOptions { intermediate_only }).map(|_| ()),
            Err(e) => {
                reporter.error(&e);
                return FAILED;
            }
        },
    };
    outcome(lowered, reporter)
}

/// The final lowering of a module the late lowering went through: each function (or the
/// one) only finished, as [`lower_module`] finishes a function that already has a frame.
pub(crate) fn finish(module: &Module<'_>, scope: Scope<'_>, reporter: &Reporter) -> c_int {
    let functions = match scope {
        Scope::Module => module.function_list(),
        Scope::Function(name) => match function(module, name) {
            Ok(f) => vec![f],
            Err(e) => {
                reporter.error(&e);
                return FAILED;
            }
        },
    };
    let one = matches!(scope, Scope::Function(_));
    let finished = functions
        .iter()
        .filter(|f| !f.is_declaration())
        .try_for_each(|&f| finish_function(module, f))
        .and_then(|()| {
            // At function level the function alone (the work of a function pass stays
            // proportional to its function); the module's verifier names what is wrong.
            if one && functions.iter().all(|f| f.verifies()) {
                return Ok(());
            }
            Ok(module.verify()?)
        });
    outcome(finished, reporter)
}

/// The pass's status for a lowering's result, reporting its error.
fn outcome(lowered: locus_gc::Result<()>, reporter: &Reporter) -> c_int {
    match lowered {
        // Said changed even if nothing was to lower: only the pass manager's cached
        // analyses are lost, and finding out would mean comparing the whole module.
        Ok(()) => CHANGED,
        Err(locus_gc::Error::Lower {
            function,
            instruction,
            message,
        }) => {
            let text = locus_gc::Error::Lower {
                function: function.clone(),
                instruction: instruction.clone(),
                message,
            }
            .to_string();
            reporter.report(
                Kind::Error,
                &function,
                instruction.as_deref().unwrap_or_default(),
                &text,
            );
            FAILED
        }
        Err(e) => {
            reporter.error(&e.to_string());
            FAILED
        }
    }
}
