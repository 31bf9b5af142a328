//! llc-19 as the oracle: every caller kind times every callee kind (and the ZA, ZT0 and
//! new-ZA cases) is written as IR, checked by the model and compiled by
//! `llc-19 -mtriple=aarch64-linux-gnu -mattr=+sme`; the mode changes in the assembly, in
//! order, with the mode test that guards each (`tbz`/`tbnz` on PSTATE.SM), the lazy-save
//! set-up and restore, and the new-ZA commit and zeroing must be what the model predicts.
//! Where LLVM 19 departs from spec 004 the test checks the spec in the model and the
//! departure in the assembly (see the crate docs).

// Helpers outside #[test] functions unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::oracle::{
    as_meant, asm_events, asm_events_with_resets, calls_sorted, model_events, Event,
};
use common::{attrs, case};
use std::process::Command;

use locus_sme::attrs::{SM_BODY, SM_COMPATIBLE, SM_ENABLED};
use locus_sme::check::check_ir;
use locus_sme::rules::Severity;

const LLC: &str = "llc-19";

/// Runs an LLVM tool with `ir` on its standard input and returns its standard output.
fn pipe(tool: &str, args: &[&str], ir: &str) -> String {
    String::from_utf8(common::pipe(tool, args, ir.as_bytes(), &format!("\n{ir}"))).unwrap()
}

/// The assembly of function `name` in llc's output `asm`, up to its `.Lfunc_end` label.
fn asm_body(asm: &str, name: &str) -> String {
    asm.lines()
        .skip_while(|l| !l.starts_with(&format!("{name}:")))
        .take_while(|l| !l.starts_with(".Lfunc_end"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn llc(ir: &str) -> String {
    pipe(
        LLC,
        &["-mtriple=aarch64-linux-gnu", "-mattr=+sme,+sme2", "-o", "-"],
        ir,
    )
}

/// Caller kinds of the issue: normal, streaming, streaming-compatible, locally streaming,
/// locally streaming and compatible.
const CALLERS: [(&str, &[&str]); 5] = [
    ("n", &[]),
    ("s", &[SM_ENABLED]),
    ("sc", &[SM_COMPATIBLE]),
    ("ls", &[SM_BODY]),
    ("lsc", &[SM_BODY, SM_COMPATIBLE]),
];
const CALLEES: [(&str, &[&str]); 3] = [("n", &[]), ("s", &[SM_ENABLED]), ("sc", &[SM_COMPATIBLE])];

/// Compiles `ir`, checks it with the model, and compares every named function; returns
/// how many matched.
fn compare(ir: &str, names: &[String]) -> usize {
    let report = check_ir("oracle.ll", ir).unwrap();
    assert!(!report.has_errors(), "{:?}\n{ir}", report.diagnostics);
    let asm = llc(ir);
    let mut failures = Vec::new();
    for name in names {
        let want = model_events(&report, name);
        let got = asm_events(&asm, name);
        if want != got {
            failures.push(format!("{name}:\n  model {want:?}\n  llc   {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}\n{asm}", failures.join("\n"));
    names.len()
}

#[test]
fn streaming_mode_matrix_matches_llc() {
    let mut ir = String::new();
    let mut names = Vec::new();
    for (cn, ca) in CALLERS {
        for (tn, ta) in CALLEES {
            let caller = format!("{cn}_calls_{tn}");
            ir.push_str(&case(&caller, ca, &format!("{tn}_callee_of_{cn}"), ta));
            names.push(caller);
        }
    }
    let matched = compare(&ir, &names);
    assert_eq!(matched, 15);
    eprintln!("streaming-mode matrix: {matched}/15 cases match llc-19");
}

const ZA_CALLERS: [&str; 5] = [
    "aarch64_new_za",
    "aarch64_in_za",
    "aarch64_out_za",
    "aarch64_inout_za",
    "aarch64_preserves_za",
];

#[test]
fn za_callers_match_llc() {
    let mut ir = String::new();
    let mut names = Vec::new();
    let callees: [(&str, &[&str]); 4] = [
        ("private", &[]),
        ("inout", &["aarch64_inout_za"]),
        ("preserves", &["aarch64_preserves_za"]),
        ("private_sc", &[SM_COMPATIBLE]),
    ];
    for (i, za) in ZA_CALLERS.iter().enumerate() {
        for (tn, ta) in callees {
            let caller = format!("za{i}_calls_{tn}");
            ir.push_str(&case(&caller, &[za], &format!("{tn}_callee_of_za{i}"), ta));
            names.push(caller);
        }
    }
    // An SME ABI routine known by name needs no lazy save.
    ir.push_str(
        "declare i64 @__arm_sme_state()\n\
         define i64 @za_calls_routine() \"aarch64_inout_za\" {\n  \
           %r = call i64 @__arm_sme_state()\n  ret i64 %r\n}\n",
    );
    names.push("za_calls_routine".into());
    // Streaming mode and ZA together: a streaming-compatible ZA function calling a
    // normal private-ZA one, and a locally streaming new-ZA function.
    ir.push_str(&case(
        "sc_za_calls_n",
        &[SM_COMPATIBLE, "aarch64_inout_za"],
        "n_callee_of_sc_za",
        &[],
    ));
    names.push("sc_za_calls_n".into());
    ir.push_str(&case(
        "s_za_calls_n",
        &[SM_ENABLED, "aarch64_inout_za"],
        "n_callee_of_s_za",
        &[],
    ));
    names.push("s_za_calls_n".into());
    // New-ZA functions with no call, and a locally streaming one with a call.
    ir.push_str("define void @new_za_leaf() \"aarch64_new_za\" {\n  ret void\n}\n");
    names.push("new_za_leaf".into());
    ir.push_str(&case(
        "ls_new_za_calls_n",
        &[SM_BODY, "aarch64_new_za"],
        "n_callee_of_ls_new_za",
        &[],
    ));
    names.push("ls_new_za_calls_n".into());
    ir.push_str(&case(
        "lsc_new_za_calls_s",
        &[SM_BODY, SM_COMPATIBLE, "aarch64_new_za"],
        "s_callee_of_lsc_new_za",
        &[SM_ENABLED],
    ));
    names.push("lsc_new_za_calls_s".into());
    // An indirect call: only the call site's attributes say what the callee is.
    ir.push_str(
        "define float @n_calls_indirect_s(ptr %p, float %x) {\n  \
           %r = call float %p(float %x) \"aarch64_pstate_sm_enabled\"\n  \
           ret float %r\n}\n",
    );
    names.push("n_calls_indirect_s".into());
    let matched = compare(&ir, &names);
    eprintln!("ZA cases: {matched} match llc-19");
    assert_eq!(matched, 27);
}

#[test]
fn zt0_callers_match_llc() {
    let mut ir = String::new();
    let mut names = Vec::new();
    for (i, zt0) in ["aarch64_inout_zt0", "aarch64_in_zt0", "aarch64_new_zt0"]
        .iter()
        .enumerate()
    {
        for (tn, ta) in [
            ("private", &[][..]),
            ("shares_zt0", &["aarch64_inout_zt0"][..]),
            ("shares_za", &["aarch64_inout_za"][..]),
        ] {
            // A callee that shares ZA needs a caller with ZA state.
            let caller_attrs: Vec<&str> = if tn == "shares_za" {
                vec![zt0, "aarch64_inout_za"]
            } else {
                vec![zt0]
            };
            let caller = format!("zt{i}_calls_{tn}");
            ir.push_str(&case(
                &caller,
                &caller_attrs,
                &format!("{tn}_callee_of_zt{i}"),
                ta,
            ));
            names.push(caller);
        }
    }
    ir.push_str("define void @new_zt0_leaf() \"aarch64_new_zt0\" {\n  ret void\n}\n");
    names.push("new_zt0_leaf".into());
    let matched = compare(&ir, &names);
    eprintln!("ZT0 cases: {matched} match llc-19");
    assert_eq!(matched, 10);
}

/// Departure 1: spec 004's "After exception" column. The model keeps the spec; LLVM 19's
/// landing pads change no mode.
#[test]
fn after_exception_follows_the_spec_not_llvm19() {
    let mut ir = String::from("declare i32 @__gxx_personality_v0(...)\n");
    let mut expected = Vec::new();
    for (cn, ca) in CALLERS {
        for (tn, ta) in CALLEES {
            let caller = format!("{cn}_invokes_{tn}");
            let callee = format!("{tn}_invoked_by_{cn}");
            let at = attrs(ta);
            ir.push_str(&format!(
                "declare float @{callee}(float) {at}\n\
                 define float @{caller}(float %x) {} personality ptr @__gxx_personality_v0 {{\n  \
                   %r = invoke float @{callee}(float %x) {at} to label %ok unwind label %lp\n\
                 ok:\n  ret float %r\n\
                 lp:\n  %l = landingpad {{ ptr, i32 }} cleanup\n  ret float 0.0\n}}\n",
                attrs(ca)
            ));
            expected.push((caller, cn, tn));
        }
    }
    let report = check_ir("invoke.ll", &ir).unwrap();
    let asm = llc(&ir);
    let mut departures = 0;
    for (caller, cn, tn) in &expected {
        let f = report.function(caller).unwrap();
        let exc: Vec<String> = f.calls[0]
            .model
            .after_exception
            .iter()
            .map(ToString::to_string)
            .collect();
        // The spec's table, rows by the caller's body mode.
        let spec: Vec<&str> = match (*cn, *tn) {
            ("n", _) => vec![],
            ("s" | "ls" | "lsc", _) => vec!["smstart sm"],
            ("sc", _) => vec!["smstart sm if PSTATE.SM was 1"],
            _ => unreachable!(),
        };
        assert_eq!(exc, spec, "{caller}");
        // LLVM 19: the landing pad (the code after the function's last `ret`-less label
        // for %lp) has no smstart; a locally streaming function still leaves streaming
        // mode in the epilogue the landing pad shares.
        let body = asm_body(&asm, caller);
        let lp = body
            .split("// %lp")
            .nth(1)
            .unwrap_or_else(|| panic!("{caller}: no %lp block\n{body}"));
        assert!(
            !lp.contains("smstart"),
            "{caller}: LLVM 19 restarts streaming mode:\n{lp}"
        );
        if !spec.is_empty() {
            departures += 1;
        }
    }
    eprintln!("after exception: LLVM 19 departs from the spec in {departures}/15 invoke cases");
    assert_eq!(departures, 12);
}

/// Departure 2: LLVM 19 ignores spec 004's ZA spellings: no lazy save for a caller with
/// `aarch64_pstate_za_shared`, no ZA set-up for `aarch64_pstate_za_new`.
#[test]
fn old_za_spellings_are_ignored_by_llvm19() {
    let ir = format!(
        "{}{}",
        case(
            "old_shared",
            &["aarch64_pstate_za_shared"],
            "private_a",
            &[]
        ),
        case("old_new", &["aarch64_pstate_za_new"], "private_b", &[])
    );
    let report = check_ir("old.ll", &ir).unwrap();
    let asm = llc(&ir);
    let shared = report.function("old_shared").unwrap();
    assert!(shared.calls[0].model.lazy_za_save);
    let new = report.function("old_new").unwrap();
    assert!(new.model.commit_lazy_save && new.calls[0].model.lazy_za_save);
    assert_eq!(report.diagnostics.len(), 2);
    for name in ["old_shared", "old_new"] {
        assert_eq!(
            asm_events(&asm, name),
            [Event::Call(
                if name == "old_shared" {
                    "private_a"
                } else {
                    "private_b"
                }
                .into()
            )],
            "{name}"
        );
    }
    // In the new spelling LLVM 19 does what the model says.
    let renamed = ir
        .replace("aarch64_pstate_za_shared", "aarch64_inout_za")
        .replace("aarch64_pstate_za_new", "aarch64_new_za");
    assert_eq!(
        compare(&renamed, &["old_shared".into(), "old_new".into()]),
        2
    );
}

/// Tail calls: a `tail call` in tail position becomes `b callee` exactly when the model
/// allows a tail call (no mode change, no lazy save, no streaming body or new ZA in the
/// caller); otherwise llc emits `bl`.
#[test]
fn tail_calls_match_llc() {
    let mut ir = String::new();
    let mut cases = Vec::new();
    let mut add = |caller: String, ca: &[&str], callee: String, ta: &[&str]| {
        let at = attrs(ta);
        ir.push_str(&format!(
            "declare float @{callee}(float) {at}\n\
             define float @{caller}(float %x) {} {{\n  \
               %r = tail call float @{callee}(float %x) {at}\n  ret float %r\n}}\n",
            attrs(ca)
        ));
        cases.push((caller, callee));
    };
    for (cn, ca) in CALLERS {
        for (tn, ta) in CALLEES {
            add(
                format!("{cn}_tail_{tn}"),
                ca,
                format!("{tn}_tailee_of_{cn}"),
                ta,
            );
        }
    }
    for (i, za) in ZA_CALLERS.iter().enumerate() {
        add(
            format!("za{i}_tail_private"),
            &[za],
            format!("private_tailee_{i}"),
            &[],
        );
        add(
            format!("za{i}_tail_inout"),
            &[za],
            format!("inout_tailee_{i}"),
            &["aarch64_inout_za"],
        );
    }
    let report = check_ir("tail.ll", &ir).unwrap();
    let asm = llc(&ir);
    let mut allowed = 0;
    for (caller, callee) in &cases {
        let model = report.function(caller).unwrap().calls[0].model.tail_call;
        let body = asm_body(&asm, caller);
        let jumps = body
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["b", callee.as_str()]);
        let calls = body
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["bl", callee.as_str()]);
        assert!(jumps != calls, "{caller}: {body}");
        assert_eq!(
            model, jumps,
            "{caller}: model tail_call {model}, llc {body}"
        );
        allowed += usize::from(model);
    }
    eprintln!(
        "tail calls: {}/{} cases match llc-19 ({allowed} tail calls)",
        cases.len(),
        cases.len()
    );
    assert_eq!(cases.len(), 25);
}

/// Callee kinds for inlining, where the body matters: locally streaming ones too.
const BODIES: [(&str, &[&str]); 5] = [
    ("n", &[]),
    ("s", &[SM_ENABLED]),
    ("sc", &[SM_COMPATIBLE]),
    ("ls", &[SM_BODY]),
    ("lsc", &[SM_BODY, SM_COMPATIBLE]),
];

/// Every caller kind calling every callee body, inlined by `opt-19 -passes=inline`;
/// returns (caller, model's `inline`, whether opt inlined).
fn inline_cases(body: &str) -> Vec<(String, bool, bool)> {
    inline_cases_of(body, &CALLERS, &BODIES)
}

/// [`inline_cases`] for any callers and callee bodies.
fn inline_cases_of(
    body: &str,
    callers: &[(&str, &[&str])],
    bodies: &[(&str, &[&str])],
) -> Vec<(String, bool, bool)> {
    inline_cases_with("", body, callers, bodies)
}

/// [`inline_cases_of`] with declarations (`decls`) the body needs.
fn inline_cases_with(
    decls: &str,
    body: &str,
    callers: &[(&str, &[&str])],
    bodies: &[(&str, &[&str])],
) -> Vec<(String, bool, bool)> {
    let mut ir = format!("target triple = \"aarch64-linux-gnu\"\n{decls}");
    let mut names = Vec::new();
    for &(cn, ca) in callers {
        for &(tn, ta) in bodies {
            let caller = format!("{cn}_inlines_{tn}");
            let callee = format!("{tn}_inlined_into_{cn}");
            // The call site repeats the interface only, as Clang does.
            let site: Vec<&str> = ta.iter().copied().filter(|a| *a != SM_BODY).collect();
            ir.push_str(&format!(
                "define internal float @{callee}(float %x) {} \"target-features\"=\"+sme\" {{\n  \
                   {body}\n  ret float %r\n}}\n\
                 define float @{caller}(float %x) {} \"target-features\"=\"+sme\" {{\n  \
                   %r = call float @{callee}(float %x) {}\n  ret float %r\n}}\n",
                attrs(ta),
                attrs(ca),
                attrs(&site)
            ));
            names.push((caller, callee));
        }
    }
    let report = check_ir("inline.ll", &ir).unwrap();
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let opt = pipe("opt-19", &["-passes=inline", "-S", "-o", "-"], &ir);
    names
        .into_iter()
        .map(|(caller, callee)| {
            let model = report.function(&caller).unwrap().calls[0].model.inline;
            let text: String = opt
                .lines()
                .skip_while(|l| !l.starts_with(&format!("define float @{caller}(")))
                .take_while(|l| *l != "}")
                .collect::<Vec<_>>()
                .join("\n");
            let inlined = !text.contains(&format!("@{callee}("));
            (caller, model, inlined)
        })
        .collect()
}

/// With a callee body LLVM cannot prove valid in both modes (inline assembly), the
/// inliner follows the spec's rule, which the model states.
#[test]
fn inlining_matches_opt() {
    let cases = inline_cases("%r = call float asm \"fadd $0, $1, $1\", \"=w,w\"(float %x)");
    let mismatches: Vec<&str> = cases
        .iter()
        .filter(|(_, m, o)| m != o)
        .map(|(c, _, _)| c.as_str())
        .collect();
    // Departure 4: LLVM 19 judges by the callee's body, not its interface: a locally
    // streaming callee (normal interface) is inlined into a streaming body though the
    // call site would toggle PSTATE.SM, which spec 004 says disables inlining.
    assert_eq!(
        mismatches,
        ["s_inlines_ls", "ls_inlines_ls", "lsc_inlines_ls"],
        "(caller, model, opt): {cases:#?}"
    );
    let inlined = cases.iter().filter(|c| c.2).count();
    eprintln!(
        "inlining: {}/{} cases match opt-19 ({inlined} inlined); 3 departures",
        cases.len() - mismatches.len(),
        cases.len()
    );
    assert_eq!(cases.len(), 25);
}

/// Inlining and ZA: never a new-ZA body, never where a lazy save would be needed; a
/// shared-ZA body inlines into a ZA caller. opt-19 agrees (inline assembly bodies).
#[test]
fn za_inlining_matches_opt() {
    let callers: [(&str, &[&str]); 3] = [
        ("inout", &["aarch64_inout_za"]),
        ("new", &["aarch64_new_za"]),
        ("sc_in", &[SM_COMPATIBLE, "aarch64_in_za"]),
    ];
    let bodies: [(&str, &[&str]); 5] = [
        ("private", &[]),
        ("new", &["aarch64_new_za"]),
        ("inout", &["aarch64_inout_za"]),
        ("preserves", &["aarch64_preserves_za"]),
        ("sc_in", &[SM_COMPATIBLE, "aarch64_in_za"]),
    ];
    let cases = inline_cases_of(
        "%r = call float asm \"fadd $0, $1, $1\", \"=w,w\"(float %x)",
        &callers,
        &bodies,
    );
    let mismatches: Vec<_> = cases.iter().filter(|(_, m, o)| m != o).collect();
    assert!(
        mismatches.is_empty(),
        "(caller, model, opt): {mismatches:#?}"
    );
    let inlined = cases.iter().filter(|c| c.2).count();
    eprintln!(
        "ZA inlining: {}/{} cases match opt-19 ({inlined} inlined)",
        cases.len(),
        cases.len()
    );
    assert_eq!(cases.len(), 15);
}

/// Inlining and ZA with plain bodies: spec 004 has no rule, so the model follows LLVM 19,
/// which inlines a private-ZA (or ZT0-spilling) callee into a caller with ZA or ZT0 state
/// when the body is plain, but never a new-ZA body. The departures left are the spec's
/// mode rule (a streaming-compatible caller, departure 3) and new-ZT0 bodies, which
/// LLVM 19 inlines (it checks only new ZA) and the model does not: the inlined body would
/// lose its ZA enable and ZT0 zeroing.
#[test]
fn za_inlining_of_plain_bodies_matches_opt() {
    let callers: [(&str, &[&str]); 4] = [
        ("inout", &["aarch64_inout_za"]),
        ("new", &["aarch64_new_za"]),
        ("sc_in", &[SM_COMPATIBLE, "aarch64_in_za"]),
        ("za_zt0", &["aarch64_inout_za", "aarch64_inout_zt0"]),
    ];
    let bodies: [(&str, &[&str]); 6] = [
        ("private", &[]),
        ("new", &["aarch64_new_za"]),
        ("inout", &["aarch64_inout_za"]),
        ("preserves", &["aarch64_preserves_za"]),
        ("sc_in", &[SM_COMPATIBLE, "aarch64_in_za"]),
        ("new_zt0", &["aarch64_new_zt0"]),
    ];
    let mut cases = inline_cases_of("%r = fadd float %x, 1.0", &callers, &bodies);
    // ZT0 without ZA: ZA is turned off around a private-ZA call, ZT0 spilled.
    let zt0: [(&str, &[&str]); 1] = [("zt0", &["aarch64_inout_zt0"])];
    let zt0_bodies: [(&str, &[&str]); 3] = [bodies[0], bodies[1], bodies[5]];
    cases.extend(inline_cases_of(
        "%r = fadd float %x, 1.0",
        &zt0,
        &zt0_bodies,
    ));
    for (caller, model, opt) in &cases {
        assert_eq!(*opt, !caller.ends_with("_inlines_new"), "{caller}: opt-19");
        if caller.ends_with("_inlines_private") && !caller.starts_with("sc_in") {
            assert!(*model, "{caller}: a plain private-ZA body inlines");
        }
    }
    let mismatches: Vec<&str> = cases
        .iter()
        .filter(|(_, m, o)| m != o)
        .map(|(c, _, _)| c.as_str())
        .collect();
    assert_eq!(
        mismatches,
        [
            "inout_inlines_new_zt0",
            "new_inlines_new_zt0",
            "sc_in_inlines_private",
            "sc_in_inlines_inout",
            "sc_in_inlines_preserves",
            "sc_in_inlines_new_zt0",
            "za_zt0_inlines_new_zt0",
            "zt0_inlines_new_zt0",
        ],
        "(caller, model, opt): {cases:#?}"
    );
    eprintln!(
        "ZA inlining, plain bodies: {}/{} cases match opt-19",
        cases.len() - mismatches.len(),
        cases.len()
    );
}

/// A body that calls an SME ABI routine is not plain: LLVM 19's inliner
/// (`hasPossibleIncompatibleOps`) refuses it wherever a lazy ZA save, a ZT0 spill or a
/// mode change would be needed, for `__arm_za_disable`, `__arm_sme_state`,
/// `__arm_tpidr2_save` and `__arm_tpidr2_restore`, but not for `__arm_get_current_vg` or
/// the `__arm_sc_*` routines. Each routine is called from a private-ZA body (normal and
/// streaming-compatible) inlined into callers with and without ZA and ZT0; the model must
/// agree with opt-19 in every case.
#[test]
fn inlining_bodies_calling_sme_routines_matches_opt() {
    let routines: [(&str, &str, &str); 6] = [
        ("za_disable", "void", "__arm_za_disable"),
        ("sme_state", "i64", "__arm_sme_state"),
        ("tpidr2_save", "void", "__arm_tpidr2_save"),
        ("tpidr2_restore", "void", "__arm_tpidr2_restore"),
        ("get_current_vg", "i64", "__arm_get_current_vg"),
        ("sc_memset", "ptr", "__arm_sc_memset"),
    ];
    let callers: [(&str, &[&str]); 5] = [
        ("n", &[]),
        ("inout", &["aarch64_inout_za"]),
        ("new", &["aarch64_new_za"]),
        ("preserves", &["aarch64_preserves_za"]),
        ("zt0", &["aarch64_inout_zt0"]),
    ];
    let bodies: [(&str, &[&str]); 2] = [("private", &[]), ("private_sc", &[SM_COMPATIBLE])];
    let (mut all, mut refused) = (Vec::new(), 0);
    for (short, ret, routine) in routines {
        let args = if routine == "__arm_sc_memset" {
            "(ptr null, i32 0, i64 0)"
        } else {
            "()"
        };
        let params = if routine == "__arm_sc_memset" {
            "(ptr, i32, i64)"
        } else {
            "()"
        };
        let decls = format!("declare {ret} @{routine}{params} \"aarch64_pstate_sm_compatible\"\n");
        let body = format!(
            "call {ret} @{routine}{args} \"aarch64_pstate_sm_compatible\"\n  \
             %r = fadd float %x, 1.0"
        );
        let cases = inline_cases_with(&decls, &body, &callers, &bodies);
        for (caller, model, opt) in cases {
            refused += usize::from(!opt);
            all.push((format!("{caller} ({short})"), model, opt));
        }
    }
    let mismatches: Vec<_> = all.iter().filter(|(_, m, o)| m != o).collect();
    assert!(
        mismatches.is_empty(),
        "(caller, model, opt): {mismatches:#?}"
    );
    // opt-19 refuses exactly the four routines it names, into callers with ZA or ZT0.
    assert!(all
        .iter()
        .filter(|(c, _, _)| c.contains("za_disable") && c.starts_with("inout_"))
        .all(|(_, _, o)| !o));
    assert!(all
        .iter()
        .filter(|(c, _, _)| c.contains("get_current_vg"))
        .all(|(_, _, o)| *o));
    eprintln!(
        "inlining bodies calling SME routines: {}/{} cases match opt-19 ({refused} refused)",
        all.len(),
        all.len()
    );
}

/// Departure 3: spec 004 forbids inlining across a mode change; LLVM 19 inlines anyway
/// when the callee's body holds only plain IR instructions (no inline assembly, no
/// intrinsic calls), which it trusts to lower to instructions valid in either mode. The
/// model keeps the spec's rule.
#[test]
fn llvm19_inlines_plain_bodies_across_modes() {
    let cases = inline_cases("%r = fadd float %x, 1.0");
    let departures: Vec<&String> = cases
        .iter()
        .filter(|(_, m, o)| m != o)
        .map(|(c, _, _)| c)
        .collect();
    for (caller, _, opt) in &cases {
        assert!(*opt, "{caller}: opt-19 did not inline");
    }
    eprintln!(
        "inlining plain bodies: LLVM 19 departs from the spec in {}/{} cases: {departures:?}",
        departures.len(),
        cases.len()
    );
    assert_eq!(
        departures.len(),
        cases.iter().filter(|(_, m, _)| !m).count()
    );
    assert!(!departures.is_empty());
}

/// What llc-19 does with each module the model finds an error in: LLVM 19's verifier
/// rejects the mutual exclusions on the interface and on the ZA/ZT0 states; one scalable
/// vector case crashes instruction selection; every other error goes through silently
/// (departure 5). The table is part of the crate docs.
#[test]
fn what_llc19_does_with_the_models_errors() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/diagnostics");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    files.sort();
    let mut seen = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let report = check_ir("fixture.ll", &text).unwrap();
        if !report.has_errors() {
            continue;
        }
        let out = Command::new(LLC)
            .args([
                "-mtriple=aarch64-linux-gnu",
                "-mattr=+sme",
                "-o",
                "/dev/null",
            ])
            .arg(file)
            .current_dir(std::env::temp_dir()) // a crash may leave a core file
            .output()
            .unwrap_or_else(|e| panic!("cannot run {LLC}: {e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        let verdict = if out.status.success() {
            "accepts"
        } else if err.contains("cannot be verified") {
            "verifier rejects"
        } else {
            "crashes"
        };
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        seen.push((stem, verdict));
    }
    let expected = [
        ("abi_routine_new_za", "accepts"),
        ("call_site_conflict", "verifier rejects"),
        ("old_and_new_za_disagree", "accepts"),
        ("scalable_across_modes", "accepts"),
        ("scalable_compatible_caller", "crashes"),
        ("scalable_locally_streaming", "accepts"),
        ("shared_za_without_state", "accepts"),
        ("sm_body_on_declaration", "accepts"),
        ("sm_enabled_and_compatible", "verifier rejects"),
        ("sve_pcs_locally_streaming", "accepts"),
        ("za_new_and_preserved", "accepts"),
        ("za_new_and_shared", "accepts"),
        ("za_states_exclusive", "verifier rejects"),
        ("zt0_states_exclusive", "verifier rejects"),
    ];
    let seen_ref: Vec<(&str, &str)> = seen.iter().map(|(s, v)| (s.as_str(), *v)).collect();
    assert_eq!(seen_ref, expected);
}

/// Attributes written only at a call site are combined with the declaration's, as LLVM 19
/// does (`SMEAttrs(const CallBase &)` ORs them): no error, and the model predicts what
/// llc-19 emits. Where the two disagree the model warns and follows LLVM's combination.
#[test]
fn call_site_only_attributes_are_combined_as_llc19() {
    let ir = "declare void @plain()\n\
              declare void @sc() \"aarch64_pstate_sm_compatible\"\n\
              declare void @pres() \"aarch64_preserves_za\"\n\
              define void @site_sm() nounwind {\n  call void @plain() \"aarch64_pstate_sm_enabled\"\n  ret void\n}\n\
              define void @site_zt0() nounwind \"aarch64_inout_zt0\" {\n  call void @plain() \"aarch64_in_zt0\"\n  ret void\n}\n\
              define void @site_za() nounwind \"aarch64_inout_za\" {\n  call void @plain() \"aarch64_preserves_za\"\n  ret void\n}\n\
              define void @site_s_decl_sc() nounwind {\n  call void @sc() \"aarch64_pstate_sm_enabled\"\n  ret void\n}\n\
              define void @site_in_decl_pres() nounwind \"aarch64_inout_za\" {\n  call void @pres() \"aarch64_in_za\"\n  ret void\n}\n";
    let names: Vec<String> = [
        "site_sm",
        "site_zt0",
        "site_za",
        "site_s_decl_sc",
        "site_in_decl_pres",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(compare(ir, &names), 5);
    let report = check_ir("site.ll", ir).unwrap();
    // Call-site-only attributes take effect: streaming callee, shared ZT0, preserved ZA.
    let call = |f: &str| report.function(f).unwrap().calls[0].model.clone();
    assert_eq!(call("site_sm").before.len(), 1);
    assert!(!call("site_zt0").preserve_zt0 && !call("site_zt0").disable_za);
    assert!(!call("site_za").lazy_za_save);
    // Disagreements: streaming-compatible wins; `in` OR `preserves` is LLVM's `new`.
    assert!(call("site_s_decl_sc").before.is_empty());
    assert!(call("site_in_decl_pres").lazy_za_save);
    let warned: Vec<&str> = report
        .diagnostics
        .iter()
        .map(|d| {
            assert_eq!(d.severity, Severity::Warning, "{d:?}");
            d.function.as_str()
        })
        .collect();
    assert_eq!(warned, ["site_s_decl_sc", "site_in_decl_pres"]);
}

/// LLVM 19 knows `__arm_sme_state`, `__arm_tpidr2_save`, `__arm_tpidr2_restore` and the
/// `__arm_sc_*` routines by name, and nothing else: `__arm_za_disable` declared without
/// its attributes is a normal function (smstop around it, lazy save), and the `__arm_sc_*`
/// routines are streaming-compatible but private-ZA (lazy save, no mode change).
#[test]
fn routines_known_by_name_match_llc19() {
    let ir = "declare void @__arm_za_disable()\n\
              declare void @__arm_sc_memcpy(ptr, ptr, i64)\n\
              declare i64 @__arm_get_current_vg()\n\
              define void @s_za_disable() nounwind \"aarch64_pstate_sm_enabled\" \"aarch64_inout_za\" {\n  call void @__arm_za_disable()\n  ret void\n}\n\
              define void @s_sc_memcpy(ptr %a, ptr %b) nounwind \"aarch64_pstate_sm_enabled\" \"aarch64_inout_za\" {\n  call void @__arm_sc_memcpy(ptr %a, ptr %b, i64 8)\n  ret void\n}\n\
              define i64 @s_vg() nounwind \"aarch64_pstate_sm_enabled\" \"aarch64_inout_za\" {\n  %v = call i64 @__arm_get_current_vg()\n  ret i64 %v\n}\n";
    let names = ["s_za_disable", "s_sc_memcpy"].map(String::from).to_vec();
    assert_eq!(compare(ir, &names), 2);
    let report = check_ir("routines.ll", ir).unwrap();
    let call = |f: &str| report.function(f).unwrap().calls[0].model.clone();
    let m = call("s_za_disable");
    assert!(m.lazy_za_save);
    assert_eq!(m.before.len(), 1);
    let m = call("s_sc_memcpy");
    assert!(m.lazy_za_save && m.before.is_empty());
    // `__arm_get_current_vg` is also called by llc itself (in the prologue), so the
    // generic comparison skips it: look at the order directly.
    let m = call("s_vg");
    assert!(m.lazy_za_save);
    assert_eq!(m.before.len(), 1);
    let asm = llc(ir);
    let body: Vec<&str> = asm
        .lines()
        .skip_while(|l| !l.starts_with("s_vg:"))
        .take_while(|l| !l.starts_with(".Lfunc_end"))
        .filter_map(|l| {
            let l = l.split("//").next().unwrap_or("").trim();
            if l.ends_with("xzr") {
                return None; // TPIDR2_EL0 reset after the restore
            }
            [
                "msr\tTPIDR2_EL0, x",
                "smstop\tsm",
                "bl\t__arm_get_current_vg",
                "smstart\tsm",
                "smstart\tza",
                "bl\t__arm_tpidr2_restore",
            ]
            .into_iter()
            .find(|p| l.starts_with(p))
        })
        .collect();
    assert_eq!(
        body,
        [
            "bl\t__arm_get_current_vg", // the prologue's own
            "msr\tTPIDR2_EL0, x",
            "smstop\tsm",
            "bl\t__arm_get_current_vg",
            "smstart\tsm",
            "smstart\tza",
            "bl\t__arm_tpidr2_restore",
        ],
        "{asm}"
    );
    let warned: Vec<(&str, Severity)> = report
        .diagnostics
        .iter()
        .map(|d| (d.function.as_str(), d.severity))
        .collect();
    assert_eq!(
        warned,
        [
            ("__arm_za_disable", Severity::Warning),
            ("__arm_get_current_vg", Severity::Warning)
        ]
    );
}

/// Caller kinds for the calls LLVM makes that are not calls in the IR: every streaming
/// mode, with and without ZA or ZT0 state.
const HIDDEN_CALLERS: [(&str, &[&str]); 12] = [
    ("n", &[]),
    ("s", &[SM_ENABLED]),
    ("sc", &[SM_COMPATIBLE]),
    ("ls", &[SM_BODY]),
    ("lsc", &[SM_BODY, SM_COMPATIBLE]),
    ("za", &["aarch64_inout_za"]),
    ("s_za", &[SM_ENABLED, "aarch64_inout_za"]),
    ("sc_za", &[SM_COMPATIBLE, "aarch64_inout_za"]),
    ("new_za", &["aarch64_new_za"]),
    ("zt0", &["aarch64_inout_zt0"]),
    ("s_zt0", &[SM_ENABLED, "aarch64_inout_zt0"]),
    ("za_zt0", &["aarch64_inout_za", "aarch64_inout_zt0"]),
];

/// One IR operation per kind of hidden call: (name, parameters, body computing `%r` of
/// type `ty`, or `None` for no result, the declarations it needs).
type HiddenOp = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
);

const HIDDEN_OPS: [HiddenOp; 27] = [
    ("memcpy", "ptr %a, ptr %b, i64 %n", "call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %b, i64 %n, i1 false)", None,
     "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)"),
    ("memmove", "ptr %a, ptr %b, i64 %n", "call void @llvm.memmove.p0.p0.i64(ptr %a, ptr %b, i64 %n, i1 false)", None,
     "declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)"),
    ("memset", "ptr %a, i8 %v, i64 %n", "call void @llvm.memset.p0.i64(ptr %a, i8 %v, i64 %n, i1 false)", None,
     "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)"),
    ("memcpy_4k", "ptr %a, ptr %b", "call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %b, i64 4096, i1 false)", None, ""),
    ("memcpy_256", "ptr %a, ptr %b", "call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %b, i64 256, i1 false)", None, ""),
    ("memmove_31", "ptr %a, ptr %b", "call void @llvm.memmove.p0.p0.i64(ptr %a, ptr %b, i64 31, i1 false)", None, ""),
    ("memset_inline", "ptr %a, i8 %v", "call void @llvm.memset.inline.p0.i64(ptr %a, i8 %v, i64 1024, i1 false)", None,
     "declare void @llvm.memset.inline.p0.i64(ptr, i8, i64, i1)"),
    ("frem_f32", "float %x, float %y", "%r = frem float %x, %y", Some("float"), ""),
    ("frem_f64", "double %x, double %y", "%r = frem double %x, %y", Some("double"), ""),
    ("frem_half", "half %x, half %y", "%r = frem half %x, %y", Some("half"), ""),
    ("frem_v4f32", "<4 x float> %x, <4 x float> %y", "%r = frem <4 x float> %x, %y", Some("<4 x float>"), ""),
    ("fadd_f128", "fp128 %x, fp128 %y", "%r = fadd fp128 %x, %y", Some("fp128"), ""),
    ("fdiv_f128", "fp128 %x, fp128 %y", "%r = fdiv fp128 %x, %y", Some("fp128"), ""),
    ("fcmp_one_f128", "fp128 %x, fp128 %y", "%r = fcmp one fp128 %x, %y", Some("i1"), ""),
    ("fpext_f128", "float %x", "%r = fpext float %x to fp128", Some("fp128"), ""),
    ("fptrunc_f128", "fp128 %x", "%r = fptrunc fp128 %x to double", Some("double"), ""),
    ("fptoui_f128_i8", "fp128 %x", "%r = fptoui fp128 %x to i8", Some("i8"), ""),
    ("sitofp_i128", "i128 %x", "%r = sitofp i128 %x to double", Some("double"), ""),
    ("sdiv_i128", "i128 %x, i128 %y", "%r = sdiv i128 %x, %y", Some("i128"), ""),
    ("urem_i96", "i96 %x, i96 %y", "%r = urem i96 %x, %y", Some("i96"), ""),
    ("cos_f32", "float %x", "%r = call float @llvm.cos.f32(float %x)", Some("float"),
     "declare float @llvm.cos.f32(float)"),
    ("pow_f64", "double %x, double %y", "%r = call double @llvm.pow.f64(double %x, double %y)", Some("double"),
     "declare double @llvm.pow.f64(double, double)"),
    ("sqrt_f128", "fp128 %x", "%r = call fp128 @llvm.sqrt.f128(fp128 %x)", Some("fp128"),
     "declare fp128 @llvm.sqrt.f128(fp128)"),
    ("powi_f32", "float %x, i32 %e", "%r = call float @llvm.powi.f32.i32(float %x, i32 %e)", Some("float"),
     "declare float @llvm.powi.f32.i32(float, i32)"),
    ("sincos_f64", "double %x", "%s = call double @llvm.sin.f64(double %x)\n  %c = call double @llvm.cos.f64(double %x)\n  %r = fadd double %s, %c",
     Some("double"), "declare double @llvm.sin.f64(double)\ndeclare double @llvm.cos.f64(double)"),
    ("fmuladd_f128", "fp128 %x, fp128 %y", "%r = call fp128 @llvm.fmuladd.f128(fp128 %x, fp128 %y, fp128 %x)", Some("fp128"),
     "declare fp128 @llvm.fmuladd.f128(fp128, fp128, fp128)"),
    ("fptosi_sat_f128", "fp128 %x", "%r = call i32 @llvm.fptosi.sat.i32.f128(fp128 %x)", Some("i32"),
     "declare i32 @llvm.fptosi.sat.i32.f128(fp128)"),
];

/// What [`compare_hidden`] found.
#[derive(Debug, Default)]
struct HiddenCounts {
    /// Hidden calls predicted (each found in llc's output, no other call there).
    calls: usize,
    /// Hidden library calls the model sets a lazy save up for and llc-19 does not (the
    /// departure `rules::unchained_lazy_save_finding` warns about).
    lazy_saves_lost: usize,
}

/// Compiles `ir` and compares, for every function named, the model's events (hidden calls
/// included) with llc-19's, calls sorted ([`calls_sorted`]) and lazy saves and ZT0 spills
/// as meant ([`as_meant`]). The one departure allowed: in a function the model warns about
/// (several library calls needing lazy saves), a library call llc-19 makes without one.
fn compare_hidden(ir: &str, names: &[String]) -> HiddenCounts {
    let report = check_ir("hidden.ll", ir).unwrap();
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let warned: Vec<&str> = report
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("sets the save up only for some"))
        .map(|d| d.function.as_str())
        .collect();
    let mut counts = HiddenCounts::default();
    // A module that names its triple is compiled for it.
    let asm = if ir.contains("target triple") {
        pipe(LLC, &["-mattr=+sme,+sme2", "-o", "-"], ir)
    } else {
        llc(ir)
    };
    let mut failures = Vec::new();
    for name in names {
        let f = report.function(name).unwrap();
        counts.calls += f.calls.iter().filter(|c| c.hidden.is_some()).count();
        // Calls are sorted only when one instruction makes them all; otherwise the order
        // is the IR's.
        let one_instruction = f
            .calls
            .iter()
            .all(|c| c.hidden.is_some() && c.instruction == f.calls[0].instruction);
        let order = |e: Vec<Event>| if one_instruction { calls_sorted(e) } else { e };
        let want = as_meant(order(model_events(&report, name)), true);
        let got = as_meant(order(asm_events_with_resets(&asm, name)), false);
        if want == got {
            continue;
        }
        // The departure: the same events but some library calls without their lazy save.
        let lost = |(w, g): (&Event, &Event)| match (w, g) {
            (Event::Call(w), Event::Call(g)) if w != g => {
                let plain = w.trim_end_matches(" (lazy save)");
                let hidden = f
                    .calls
                    .iter()
                    .any(|c| c.callee == plain && c.hidden.is_some());
                (g == plain && hidden).then_some(1)
            }
            (w, g) if w == g => Some(0),
            _ => None,
        };
        let departure = (want.1 == got.1 && want.0.len() == got.0.len())
            .then(|| want.0.iter().zip(&got.0).map(lost).sum::<Option<usize>>())
            .flatten();
        match departure {
            Some(n) if warned.contains(&name.as_str()) => counts.lazy_saves_lost += n,
            _ => failures.push(format!("{name}:\n  model {want:?}\n  llc   {got:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} functions differ:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
    counts
}

/// The calls LLVM makes for memory intrinsics, `frem`, fp128 arithmetic, conversions,
/// i128 division and libm intrinsics, from every caller kind: the model predicts each
/// call (its routine), the mode changes around it, the lazy ZA save and the ZT0 spill, and
/// llc-19 emits exactly these calls and no other.
#[test]
fn hidden_calls_match_llc() {
    let mut decls: Vec<&str> = HIDDEN_OPS
        .iter()
        .map(|op| op.4)
        .filter(|d| !d.is_empty())
        .collect();
    decls.dedup();
    let mut ir = decls.join("\n") + "\n";
    let mut names = Vec::new();
    for (cn, ca) in HIDDEN_CALLERS {
        for (on, params, body, ty, _) in HIDDEN_OPS {
            let name = format!("{cn}_{on}");
            // A volatile store keeps the result (and the call) and leaves nothing in tail
            // position.
            let keep = match ty {
                Some(t) => format!("store volatile {t} %r, ptr %p"),
                None => "store volatile i8 0, ptr %p".to_string(),
            };
            ir.push_str(&format!(
                "define void @{name}(ptr %p, {params}) nounwind {} {{\n  {body}\n  {keep}\n  ret void\n}}\n",
                attrs(ca)
            ));
            names.push(name);
        }
    }
    let counts = compare_hidden(&ir, &names);
    eprintln!(
        "hidden calls: {} functions ({} callers x {} operations), {} hidden calls predicted and \
         found, no other call; {} lazy saves llc-19 leaves out (departure)",
        names.len(),
        HIDDEN_CALLERS.len(),
        HIDDEN_OPS.len(),
        counts.calls,
        counts.lazy_saves_lost
    );
    let hidden = counts.calls;
    assert_eq!(names.len(), 12 * 27);
    // Counted once here so that a change shows: 33 per caller (4 for the `<4 x float>`
    // frem, 2 for `fcmp one` and `fmuladd`, 4 for `fptosi.sat`, none for the 256-byte
    // copy), plus `memset.inline` from the 7 callers that may stream.
    assert_eq!(hidden, 12 * 33 + 7);
    // The second call of `fmuladd.f128` (`__addtf3`) from the 5 callers with ZA state.
    assert_eq!(counts.lazy_saves_lost, 5);
}

/// Hand-written fixtures for what changes the lowering: `optsize`, FEAT_MOPS and SVE in
/// `"target-features"`, a triple without `sincos`, fast-math flags on `fcmp`.
#[test]
fn hidden_call_fixtures_match_llc() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hidden");
    let mut total = (0, 0, 0);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    files.sort();
    for file in &files {
        let ir = std::fs::read_to_string(file).unwrap();
        let report = check_ir("fixture.ll", &ir).unwrap();
        let names: Vec<String> = report.functions.iter().map(|f| f.name.clone()).collect();
        total.0 += names.len();
        let counts = compare_hidden(&ir, &names);
        total.1 += counts.calls;
        total.2 += counts.lazy_saves_lost;
    }
    eprintln!(
        "hidden-call fixtures: {} files, {} functions, {} hidden calls predicted and found; \
         {} lazy saves llc-19 leaves out (departure)",
        files.len(),
        total.0,
        total.1,
        total.2
    );
    assert!(total.1 > 0);
}

/// LLVM 19's ZT0 tail call (llvm-project#165371): a caller sharing ZT0 whose call to a
/// callee that does not share it is marked `tail` (or `musttail`) and followed by `ret` is
/// compiled to a `b`, ZT0 spilled and never filled. `sme check` warns at exactly the call
/// sites llc-19 makes a `b` while the model forbids the tail call: every ZT0 state of the
/// caller (with and without ZA, streaming-compatible, locally streaming) times callee
/// (private, streaming-compatible, sharing ZT0, streaming) times marker (`tail`,
/// `musttail`, none).
#[test]
fn zt0_tail_call_warnings_match_llc() {
    let callers: [(&str, &[&str]); 8] = [
        ("inout", &["aarch64_inout_zt0"]),
        ("in", &["aarch64_in_zt0"]),
        ("out", &["aarch64_out_zt0"]),
        ("preserves", &["aarch64_preserves_zt0"]),
        ("new", &["aarch64_new_zt0"]),
        ("za", &["aarch64_inout_zt0", "aarch64_inout_za"]),
        ("sc", &["aarch64_inout_zt0", SM_COMPATIBLE]),
        ("ls", &["aarch64_inout_zt0", SM_BODY]),
    ];
    let callees: [(&str, &[&str]); 4] = [
        ("private", &[]),
        ("private_sc", &[SM_COMPATIBLE]),
        ("shares", &["aarch64_inout_zt0"]),
        ("streaming", &[SM_ENABLED]),
    ];
    let markers = [
        ("tail", "tail call"),
        ("musttail", "musttail call"),
        ("plain", "call"),
    ];
    let mut ir = String::new();
    let mut names = Vec::new();
    for (cn, ca) in callers {
        for (tn, ta) in callees {
            for (mn, marker) in markers {
                // LLVM cannot honour musttail where it must restore state after the call.
                if mn == "musttail" && (cn == "new" || cn == "za" || cn == "sc" || cn == "ls") {
                    continue;
                }
                if mn == "musttail" && tn == "streaming" {
                    continue;
                }
                let caller = format!("{cn}_{mn}_{tn}");
                let callee = format!("{tn}_of_{cn}_{mn}");
                let t = attrs(ta);
                ir.push_str(&format!(
                    "declare float @{callee}(float) {t}\n\
                     define float @{caller}(float %x) {} {{\n  \
                       %r = {marker} float @{callee}(float %x) {t}\n  ret float %r\n}}\n",
                    attrs(ca)
                ));
                names.push((caller, callee));
            }
        }
    }
    let report = check_ir("zt0_tail.ll", &ir).unwrap();
    let asm = llc(&ir);
    let (mut warned, mut mismatches) = (0, Vec::new());
    for (caller, callee) in &names {
        let body = asm_body(&asm, caller);
        let b = body
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["b", callee.as_str()]);
        let model = report.function(caller).unwrap().calls[0].model.tail_call;
        let warning = report.diagnostics.iter().any(|d| {
            d.function == *caller && d.severity == Severity::Warning && d.message.contains("165371")
        });
        warned += usize::from(warning);
        if warning != (b && !model) {
            mismatches.push(format!(
                "{caller}: llc b={b}, model tail={model}, warning={warning}"
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(warned > 0);
    // The audit of llc-19's object reports the same call sites as tail-call departures.
    let obj = common::llc_obj(&ir);
    let audited = locus_sme::audit::audit(
        "zt0_tail.o",
        &obj,
        Some(("zt0_tail.ll", ir.as_bytes())),
        &std::collections::HashMap::new(),
    )
    .unwrap();
    let mut tail_departures: Vec<&str> = audited
        .departures
        .iter()
        .filter(|d| d.kind == locus_sme::audit::Kind::TailCall)
        .map(|d| d.function.as_str())
        .collect();
    let mut warned_at: Vec<&str> = report
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("165371"))
        .map(|d| d.function.as_str())
        .collect();
    tail_departures.sort_unstable();
    warned_at.sort_unstable();
    assert_eq!(tail_departures, warned_at);
    eprintln!(
        "ZT0 tail calls: {} call sites, {warned} warned (llc-19 makes a `b` the model forbids; \
         the audit of its object reports the same {warned}), the others agree",
        names.len()
    );
}
