//! `locus-sme-check`: the SME rules' findings as errors and warnings, and the predicted mode
//! changes as remarks of the pass `locus-sme`.

use std::ffi::c_int;

use locus_llvm::Module;
use locus_sme::attrs::Attrs;
use locus_sme::check::{check_function, check_module, function_attrs, CallReport, FunctionReport};
use locus_sme::rules::{changes_text, Severity};

use crate::{Kind, Reporter, Scope, FAILED, FINDINGS, UNCHANGED};

/// Whether the default-pipeline pass checks the module: it is for AArch64, or a function
/// has an SME attribute.
pub(crate) fn applies(module: &Module<'_>) -> bool {
    let triple = module.target_triple();
    triple.starts_with("aarch64") || triple.starts_with("arm64") || {
        module
            .function_list()
            .into_iter()
            .any(|f| function_attrs(f) != Attrs::default())
    }
}

/// A function's remark, when its entry or exit changes modes.
fn function_remark(f: &FunctionReport) -> Option<String> {
    let m = &f.model;
    if m.entry.is_empty() && m.exit.is_empty() {
        return None;
    }
    Some(format!(
        "@{}: entry: {}; exit: {}",
        f.name,
        changes_text(&m.entry),
        changes_text(&m.exit)
    ))
}

/// A call's remark (the line `locus sme check` prints for it), when something happens
/// around it: a mode change, a lazy ZA save, a ZT0 spill, ZA turned off.
fn call_remark(caller: &str, c: &CallReport) -> Option<String> {
    let m = &c.model;
    if m.before.is_empty()
        && m.after.is_empty()
        && m.after_exception.is_empty()
        && !m.lazy_za_save
        && !m.preserve_zt0
        && !m.disable_za
    {
        return None;
    }
    Some(format!("@{caller}: {c}"))
}

/// `locus-sme-check` on the module, or on one function (its findings and remarks only).
pub(crate) fn check(module: &Module<'_>, scope: Scope<'_>, reporter: &Reporter) -> c_int {
    // At function level only that function is checked: a function pass must not walk the
    // whole module each time.
    let report = match scope {
        Scope::Module => check_module(module),
        Scope::Function(name) => match crate::gc::function(module, name) {
            Ok(f) => check_function(module, f),
            Err(e) => {
                reporter.error(&e);
                return FAILED;
            }
        },
    };
    let wanted = |name: &str| match scope {
        Scope::Module => true,
        Scope::Function(f) => f == name,
    };
    for f in report.functions.iter().filter(|f| wanted(&f.name)) {
        if let Some(text) = function_remark(f) {
            reporter.report(Kind::Remark, &f.name, "", &text);
        }
        for c in &f.calls {
            if let Some(text) = call_remark(&f.name, c) {
                reporter.report(Kind::Remark, &f.name, &c.instruction, &text);
            }
        }
    }
    let mut findings = false;
    for d in report.diagnostics.iter().filter(|d| wanted(&d.function)) {
        let kind = match d.severity {
            Severity::Error => Kind::Error,
            Severity::Warning => Kind::Warning,
        };
        findings = true;
        reporter.report(
            kind,
            &d.function,
            d.instruction.as_deref().unwrap_or_default(),
            &format!("@{}: {}", d.function, d.full_message()),
        );
    }
    if findings {
        FINDINGS
    } else {
        UNCHANGED
    }
}
