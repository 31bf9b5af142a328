//! The checker: reads a module through `locus-llvm`, gives each defined function and each
//! call its model ([`crate::rules`]) and collects every finding with its place.

use locus_llvm::ir::{AttributeIndex, Call, Function, Opcode, Type, TypeKind, ValueKind};
use locus_llvm::{Context, Module};

use crate::attrs::{Attrs, Interface};
use crate::hidden::{self, HiddenCall};
use crate::rules::{self, Change, Finding, Severity};
use crate::Error;

/// A finding with its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The function it is about (for a call: the caller).
    pub function: String,
    /// The call instruction, printed, when the finding is about a call.
    pub instruction: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl Diagnostic {
    /// The message with its instruction, as one line.
    #[must_use]
    pub fn full_message(&self) -> String {
        match &self.instruction {
            Some(i) => format!("at `{i}`: {}", self.message),
            None => self.message.clone(),
        }
    }
}

/// One call (or invoke) in a defined function, or a call LLVM makes for an instruction
/// that is not a call in the IR ([`crate::hidden`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallReport {
    /// The callee's name, or `(indirect %p)` for an indirect call; for a hidden call, the
    /// routine LLVM calls.
    pub callee: String,
    /// The call, printed; for a hidden call, the instruction that causes it.
    pub instruction: String,
    /// For a call LLVM makes that is not a call in the IR: why, and which routine. Its
    /// model is that of a call to a callee with only the attributes LLVM 19 knows the
    /// routine by (streaming-compatible `__arm_sc_*`, else a normal private-ZA function);
    /// it is never inlined.
    pub hidden: Option<HiddenCall>,
    /// Whether it is an `invoke`.
    pub invoke: bool,
    /// Whether the call never returns (`noreturn` on the call site or the callee): the
    /// code after it is not on any path through the call.
    pub noreturn: bool,
    /// The callee's effective attributes: call site, declaration and what LLVM 19 knows by
    /// name, combined as LLVM 19 does ([`Attrs::combine_llvm19`]).
    pub callee_attrs: Attrs,
    /// What happens around it.
    pub model: rules::CallModel,
}

/// The line `locus sme check` prints for a call (and the `locus-sme-check` pass's remark
/// after its function): `call CALLEE: before ...; after ...` with the changes around it
/// (`-` for none), the lazy ZA save, whether it may be inlined or tail-called, and the ZT0
/// spill and ZA-off notes when they apply.
impl std::fmt::Display for CallReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = &self.model;
        let list = rules::changes_text;
        let yes = |b: bool| if b { "yes" } else { "no" };
        match &self.hidden {
            Some(h) => write!(
                f,
                "call {} ({} for `{}`)",
                h.symbol,
                h.kind.as_str(),
                self.instruction
            )?,
            None if self.callee.starts_with('(') => write!(f, "call {}", self.callee)?,
            None => write!(f, "call @{}", self.callee)?,
        }
        write!(f, ": before {}; after {}", list(&m.before), list(&m.after))?;
        if self.invoke {
            write!(f, "; after exception {}", list(&m.after_exception))?;
        }
        write!(
            f,
            "; lazy ZA save {}; inline {}; tail call {}",
            yes(m.lazy_za_save),
            yes(m.inline),
            yes(m.tail_call)
        )?;
        if m.preserve_zt0 {
            write!(f, "; ZT0 spill/fill yes")?;
        }
        if m.disable_za {
            write!(f, "; ZA off around the call yes")?;
        }
        Ok(())
    }
}

/// One defined function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionReport {
    /// Its name.
    pub name: String,
    /// Its attributes.
    pub attrs: Attrs,
    /// Its model.
    pub model: rules::FunctionModel,
    /// Its calls, in instruction order (inline assembly and intrinsics left out, except the
    /// calls LLVM makes for intrinsics and other instructions, see [`CallReport::hidden`]).
    pub calls: Vec<CallReport>,
}

/// The result of checking a module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every defined function, in module order.
    pub functions: Vec<FunctionReport>,
    /// Every finding, in module order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// Whether any finding is an error.
    #[must_use]
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }

    /// The function named `name`.
    #[must_use]
    pub fn function(&self, name: &str) -> Option<&FunctionReport> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// Parses LLVM IR (text or bitcode; `name` is used in parse errors) and checks it.
///
/// # Errors
/// [`Error::Llvm`] when the module cannot be parsed.
pub fn check_ir(name: &str, ir: impl AsRef<[u8]>) -> Result<Report, Error> {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, name, ir).map_err(|source| Error::Llvm {
        file: name.to_string(),
        source,
    })?;
    Ok(check_module(&module))
}

/// The reports of the calls LLVM makes for `inst` that are not calls in the IR.
fn hidden_reports(caller: &Attrs, inst: String, calls: Vec<HiddenCall>) -> Vec<CallReport> {
    calls
        .into_iter()
        .map(|call| {
            let callee_attrs = Attrs::known_routine(&call.symbol).unwrap_or_default();
            let mut model = rules::call_model_with_body(caller, &callee_attrs, false, false);
            model.inline = false;
            CallReport {
                callee: call.symbol.clone(),
                instruction: inst.clone(),
                hidden: Some(call),
                invoke: false,
                noreturn: false,
                callee_attrs,
                model,
            }
        })
        .collect()
}

/// The SME attributes of a function.
#[must_use]
pub fn function_attrs(f: Function<'_>) -> Attrs {
    let mut a = Attrs::from_names(
        crate::attrs::ALL_NAMES
            .iter()
            .copied()
            .filter(|n| f.has_attribute(AttributeIndex::Function, n)),
    );
    a.abi_routine = Attrs::known_routine(&f.name()).is_some_and(|k| k.abi_routine);
    a
}

/// The SME attributes on a call site itself.
#[must_use]
pub fn call_site_attrs(c: Call<'_>) -> Attrs {
    Attrs::from_names(
        crate::attrs::ALL_NAMES
            .iter()
            .copied()
            .filter(|n| c.has_attribute(AttributeIndex::Function, n)),
    )
}

/// Checks a parsed module.
#[must_use]
pub fn check_module(module: &Module<'_>) -> Report {
    let mut report = Report::default();
    let triple = module.target_triple();
    for f in module.function_list() {
        check_into(&mut report, f, &triple);
    }
    report
}

/// Checks one function of `module` (its own findings and calls: what a function pass
/// reports, without walking the rest of the module).
#[must_use]
pub fn check_function(module: &Module<'_>, f: Function<'_>) -> Report {
    let mut report = Report::default();
    check_into(&mut report, f, &module.target_triple());
    report
}

/// Adds `f`'s findings and model to `report`; `triple` is its module's target.
fn check_into(report: &mut Report, f: Function<'_>, triple: &str) {
    if f.is_intrinsic() {
        return;
    }
    let name = f.name();
    let attrs = function_attrs(f);
    let declaration = f.is_declaration();
    let mut push = |finding: Finding, instruction: Option<String>| {
        report.diagnostics.push(Diagnostic {
            severity: finding.severity,
            function: name.clone(),
            instruction,
            message: finding.message,
        });
    };
    for finding in rules::attr_findings(&attrs, declaration, "the function") {
        push(finding, None);
    }
    if attrs.sm_body
        && attrs.interface() != Interface::Streaming
        && passes_scalable(f.function_type())
    {
        push(rules::scalable_body_finding(attrs.interface()), None);
    }
    if let Some(finding) = rules::sve_pcs_finding(&attrs, f.calling_convention()) {
        push(finding, None);
    }
    if let Some(finding) = rules::routine_attrs_finding(&name, &attrs) {
        push(finding, None);
    }
    if declaration {
        return;
    }
    let mut calls = Vec::new();
    let may_stream = attrs.sm_enabled || attrs.sm_compatible || attrs.sm_body;
    let lowering = hidden::lowering(f, may_stream, triple);
    let mut hidden_calls = hidden::function_hidden_calls(f, &lowering)
        .into_iter()
        .peekable();
    for inst in f.instructions() {
        if let Some((_, made)) = hidden_calls.next_if(|(i, _)| *i == inst) {
            calls.extend(hidden_reports(
                &attrs,
                inst.print().trim().to_string(),
                made,
            ));
        }
        let Some(call) = inst.as_call() else { continue };
        if call.is_intrinsic() || call.called_value().kind() == ValueKind::InlineAsm {
            continue;
        }
        let printed = inst.print().trim().to_string();
        let site = call_site_attrs(call);
        let direct = call.called_function();
        let callee = match direct {
            Some(g) => g.name(),
            None => {
                let v = call.called_value().name();
                if v.is_empty() {
                    "(indirect)".to_string()
                } else {
                    format!("(indirect %{v})")
                }
            }
        };
        let decl = direct.map(function_attrs).unwrap_or_default();
        let known = Attrs::known_routine(&callee).unwrap_or_default();
        let declared = decl.combine_llvm19(&known);
        for finding in rules::attr_findings(&site, false, "the call site") {
            push(finding, Some(printed.clone()));
        }
        if direct.is_some() {
            for finding in rules::call_site_findings(&site, &declared, &callee) {
                push(finding, Some(printed.clone()));
            }
        }
        // The callee's `sm_body` is its own business, not part of what the caller sees
        // (except for inlining, which the model handles).
        let effective = site.combine_llvm19(&declared);
        let from = rules::body_mode(&attrs);
        if rules::may_differ_in_vl(from, effective.interface())
            && passes_scalable(call.function_type())
        {
            push(
                rules::scalable_call_finding(&callee, from, effective.interface()),
                Some(printed.clone()),
            );
        }
        for finding in rules::shared_state_findings(&attrs, &effective, &callee) {
            push(finding, Some(printed.clone()));
        }
        let plain = direct.is_some_and(plain_body);
        let model = rules::call_model_with_body(&attrs, &effective, call.is_invoke(), plain);
        if marked_tail(&printed) && inst.next().is_some_and(|n| n.opcode() == Opcode::Ret) {
            if let Some(finding) = rules::zt0_tail_call_finding(&attrs, &model, &callee) {
                push(finding, Some(printed.clone()));
            }
        }
        calls.push(CallReport {
            callee,
            instruction: printed,
            hidden: None,
            invoke: call.is_invoke(),
            noreturn: call.has_fn_attribute("noreturn"),
            callee_attrs: effective,
            model,
        });
    }
    let unchained = calls
        .iter()
        .filter(|c| {
            c.model.lazy_za_save
                && c.hidden
                    .as_ref()
                    .is_some_and(|h| h.kind == hidden::HiddenKind::Libcall)
        })
        .count();
    if unchained > 1 {
        push(rules::unchained_lazy_save_finding(unchained), None);
    }
    report.functions.push(FunctionReport {
        name: name.clone(),
        attrs,
        model: rules::function_model(&attrs),
        calls,
    });
}

/// Whether a printed call is marked `tail` or `musttail` (the word before `call`).
fn marked_tail(printed: &str) -> bool {
    let words: Vec<&str> = printed.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == "call")
        .and_then(|i| i.checked_sub(1))
        .is_some_and(|i| matches!(words[i], "tail" | "musttail"))
}

/// Whether a function is defined with a body LLVM 19 trusts in any ZA context
/// (`hasPossibleIncompatibleOps`): no call of inline assembly, of an intrinsic other than
/// debug and pseudo-probe ones, or of an SME ABI routine
/// ([`crate::attrs::INLINE_BARRIER_ROUTINES`], `__arm_za_disable` included). Like LLVM 19,
/// only `call`s count, not `invoke`s.
fn plain_body(f: Function<'_>) -> bool {
    !f.is_declaration()
        && f.instructions().into_iter().all(|inst| {
            let Some(call) = inst.as_call().filter(|c| !c.is_invoke()) else {
                return true;
            };
            if call.called_value().kind() == ValueKind::InlineAsm {
                return false;
            }
            let name = call.called_function().map(|g| g.name()).unwrap_or_default();
            if call.is_intrinsic() {
                return name.starts_with("llvm.dbg.") || name == "llvm.pseudoprobe";
            }
            !crate::attrs::INLINE_BARRIER_ROUTINES.contains(&name.as_str())
        })
}

/// Whether a function type passes or returns a scalable vector (also inside structs and
/// arrays, and `target("aarch64.svcount")`).
fn passes_scalable(fn_type: Type<'_>) -> bool {
    let ret = fn_type.return_type();
    let params = fn_type.param_types().unwrap_or_default();
    ret.into_iter().chain(params).any(is_scalable)
}

fn is_scalable(t: Type<'_>) -> bool {
    match t.kind() {
        TypeKind::ScalableVector => true,
        TypeKind::TargetExt => t.print().contains("aarch64.svcount"),
        TypeKind::Struct => t
            .struct_fields()
            .unwrap_or_default()
            .into_iter()
            .any(is_scalable),
        TypeKind::Array => t.element_type().is_some_and(is_scalable),
        _ => false,
    }
}

/// The instructions of a list of changes, as the JSON report spells them.
#[must_use]
pub fn insns(changes: &[Change]) -> Vec<&'static str> {
    changes.iter().map(|c| c.insn.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::State;

    #[test]
    fn reads_attributes_from_ir() {
        let ir = r#"
declare float @s(float) "aarch64_pstate_sm_enabled"
define float @f(float %x) "aarch64_pstate_sm_compatible" "aarch64_inout_za" {
  %r = call float @s(float %x) "aarch64_pstate_sm_enabled"
  %v = call i64 @__arm_sme_state()
  ret float %r
}
declare i64 @__arm_sme_state()
"#;
        let r = check_ir("t.ll", ir).unwrap();
        assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
        let f = r.function("f").unwrap();
        assert_eq!(f.model.interface, Interface::StreamingCompatible);
        assert_eq!(f.model.za, State::InOut);
        assert_eq!(f.calls.len(), 2);
        assert!(f.calls[0].model.conditional);
        assert!(f.calls[0].model.lazy_za_save);
        assert!(!f.calls[1].model.lazy_za_save);
        assert!(f.calls[1].model.before.is_empty());
    }

    #[test]
    fn bad_ir_is_an_error() {
        let e = check_ir("bad.ll", "define").unwrap_err();
        assert!(e.to_string().contains("bad.ll"));
    }
}
