//! LLVM 19.1.7's own SME tests, which are not in this repository: `scripts/llvm-19-tests`
//! extracts them from Debian's source package of the LLVM 19 installed here. With
//! `LOCUS_SME_LLVM_TESTS` naming their `llvm/test/CodeGen/AArch64` directory, every
//! `sme-*.ll` and `sve-streaming-mode-*.ll` file is checked by the model and compiled by
//! llc-19 with the options of its first RUN line that llc can run on the file as it is;
//! each function's mode changes, lazy saves and ZT0 spills around each call must be what
//! the model predicts. With `LOCUS_SME_LLVM_VERIFIER` naming `llvm/test/Verifier`, each
//! declaration of `sme-attributes.ll` must be an error for the model exactly when LLVM
//! 19's verifier rejects it. Both are `#[ignore]`d (CI does not download LLVM's sources):
//! run them with `-- --ignored` and the variables set.

// Helpers outside #[test] functions unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::llvm::{files, first_error_line, llc, llc_options};
use common::oracle::{as_meant, asm_events_with_resets, calls_sorted, model_events, Event};
use locus_sme::attrs::ABI_ROUTINES;
use locus_sme::check::check_ir;
use locus_sme::rules::Insn;
use locus_sme::rules::Severity;

/// Locus's errors that LLVM's tests contain on purpose: spec 004 §2 makes passing
/// scalable vectors across a possible change of vector length undefined behaviour, and
/// LLVM's tests compile such calls to show what llc does anyway.
fn documented_undefined_behaviour(message: &str) -> bool {
    message.contains("scalable vector")
}

/// The text of function `name`'s definition in `ir`.
fn body<'a>(ir: &'a str, name: &str) -> &'a str {
    let head = format!("@{name}(");
    let Some(start) = ir
        .match_indices("define ")
        .map(|(i, _)| i)
        .find(|&i| ir[i..].lines().next().is_some_and(|l| l.contains(&head)))
    else {
        return "";
    };
    let end = ir[start..].find("\n}").map_or(ir.len(), |e| start + e);
    &ir[start..end]
}

/// The intrinsics with which a body turns ZA on or off or zeroes it itself: the model
/// speaks of the changes the rules make, not of these.
const BODY_ZA_INTRINSICS: [&str; 3] = [
    "@llvm.aarch64.sme.za.enable",
    "@llvm.aarch64.sme.za.disable",
    "@llvm.aarch64.sme.zero(i32 255)",
];

fn without_za_toggles(events: Vec<Event>) -> Vec<Event> {
    events
        .into_iter()
        .filter(|e| {
            !matches!(
                e,
                Event::ZeroZa | Event::Mode(Insn::SmstartZa | Insn::SmstopZa, _)
            )
        })
        .collect()
}

/// How many `ret`s function `name` has in llc's assembly.
fn returns(asm: &str, name: &str) -> usize {
    asm.lines()
        .skip_while(|l| !l.starts_with(&format!("{name}:")))
        .take_while(|l| !l.starts_with(".Lfunc_end"))
        .filter(|l| l.split_whitespace().next() == Some("ret"))
        .count()
}

/// Whether `got` holds the events of `want` in another order, with the exit changes
/// once more for each return beyond the first.
fn same_but_laid_out(
    want: &[Event],
    got: &[Event],
    exit: &[locus_sme::rules::Change],
    returns: usize,
) -> bool {
    let key = |e: &Event| format!("{e:?}");
    let mut want: Vec<String> = want.iter().map(key).collect();
    for _ in 1..returns {
        want.extend(exit.iter().map(|c| key(&common::oracle::mode(c))));
    }
    let mut got: Vec<String> = got.iter().map(key).collect();
    want.sort();
    got.sort();
    want == got
}

#[test]
#[ignore = "needs LLVM 19.1.7's tests in $LOCUS_SME_LLVM_TESTS (scripts/llvm-19-tests)"]
fn llvm_codegen_tests_match_llc() {
    let files = files("LOCUS_SME_LLVM_TESTS");
    let (mut compiled, mut functions, mut agree, mut calls, mut calls_agree) = (0, 0, 0, 0, 0);
    let mut undefined = Vec::new();
    let mut errors = Vec::new();
    let mut not_run = Vec::new();
    let mut differ = Vec::new();
    let (mut no_return, mut own_za, mut laid_out) = (0, 0, 0);
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let report = match check_ir(&name, &text) {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("{name}: not read: {e}"));
                continue;
            }
        };
        for d in &report.diagnostics {
            if d.severity != Severity::Error {
                continue;
            }
            let line = format!("{name}: {}: {}", d.function, d.full_message());
            if documented_undefined_behaviour(&d.message) {
                undefined.push(line);
            } else {
                errors.push(line);
            }
        }
        let Some(options) = llc_options(&text) else {
            not_run.push(format!("{name}: no RUN line llc runs on the file as it is"));
            continue;
        };
        let out = llc(path, &options, &["-o", "-"]);
        if !out.status.success() {
            not_run.push(format!(
                "{name}: llc-19 {}: {}",
                options.join(" "),
                first_error_line(&out)
            ));
            continue;
        }
        compiled += 1;
        let asm = String::from_utf8(out.stdout).unwrap();
        for f in &report.functions {
            if !asm.contains(&format!("\n{}:", f.name)) {
                continue;
            }
            let sites = f
                .calls
                .iter()
                .filter(|c| !ABI_ROUTINES.contains(&c.callee.as_str()))
                .count();
            functions += 1;
            calls += sites;
            let one_instruction = !f.calls.is_empty()
                && f.calls
                    .iter()
                    .all(|c| c.hidden.is_some() && c.instruction == f.calls[0].instruction);
            let order = |e| if one_instruction { calls_sorted(e) } else { e };
            let code = body(&text, &f.name);
            let mut want = model_events(&report, &f.name);
            let mut got = asm_events_with_resets(&asm, &f.name);
            // A body that never returns (it ends in `unreachable`) has no exit changes.
            if !code.contains(" ret ") && !code.contains("\n  ret") {
                want.truncate(want.len() - f.model.exit.len());
                no_return += 1;
            }
            if BODY_ZA_INTRINSICS.iter().any(|i| code.contains(i)) {
                want = without_za_toggles(want);
                got = without_za_toggles(got);
                own_za += 1;
            }
            let want = as_meant(order(want), true);
            let got = as_meant(order(got), false);
            if want == got {
                agree += 1;
                calls_agree += sites;
            } else if same_but_laid_out(&want.0, &got.0, &f.model.exit, returns(&asm, &f.name))
                && want.1 == got.1
            {
                // Several blocks: llc lays them out in another order than the IR's, and
                // makes the exit changes before each return. The audit of the object
                // (tests/audit.rs) follows the branches.
                laid_out += 1;
                calls_agree += sites;
            } else {
                differ.push(format!(
                    "{name}: {}:\n  model {want:?}\n  llc   {got:?}",
                    f.name
                ));
            }
        }
    }
    eprintln!(
        "LLVM SME codegen tests: {} files, {compiled} compiled by llc-19; {functions} \
         functions, {agree} agree in order and {laid_out} in another block order; {calls} call sites, {calls_agree} agree; {} documented \
         undefined behaviours; {no_return} functions without a return, {own_za} turning ZA \
         on or off themselves (compared without ZA changes)",
        files.len(),
        undefined.len()
    );
    eprintln!("not run:\n  {}", not_run.join("\n  "));
    eprintln!("undefined behaviour:\n  {}", undefined.join("\n  "));
    assert!(errors.is_empty(), "Locus errors:\n{}", errors.join("\n"));
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// Each declaration of LLVM's `test/Verifier/sme-attributes.ll` on its own: the model
/// finds an error exactly when LLVM 19's verifier (`llvm-as-19`) rejects it.
#[test]
#[ignore = "needs LLVM 19.1.7's Verifier tests in $LOCUS_SME_LLVM_VERIFIER (scripts/llvm-19-tests)"]
fn llvm_verifier_tests_agree() {
    let files = files("LOCUS_SME_LLVM_VERIFIER");
    let (mut cases, mut rejected) = (0, 0);
    let mut disagree = Vec::new();
    for path in files.iter().filter(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("sme-"))
    }) {
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines().filter(|l| l.starts_with("declare ")) {
            let module = format!("{}\n", line.trim_end_matches(';'));
            let locus = check_ir("case.ll", &module).unwrap().has_errors();
            let mut child = std::process::Command::new("llvm-as-19")
                .args(["-o", "/dev/null", "-"])
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run llvm-as-19 ({e})"));
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), module.as_bytes()).unwrap();
            let llvm = !child.wait_with_output().unwrap().status.success();
            cases += 1;
            rejected += usize::from(llvm);
            if locus != llvm {
                disagree.push(format!("{line}: Locus error {locus}, LLVM rejects {llvm}"));
            }
        }
    }
    eprintln!(
        "LLVM SME verifier test: {cases} declarations, {rejected} rejected by llvm-as-19, \
         {} agree with the model",
        cases - disagree.len()
    );
    assert!(cases > 0);
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
}

/// LLVM 19.1.7's inliner tests for SME (`llvm/test/Transforms/Inline/AArch64/sme-*.ll`, in
/// `$LOCUS_SME_LLVM_INLINE`): each file is run through opt-19 with its RUN line's options,
/// and each call to a function the file defines is compared with the model's `inline`.
/// They agree except where LLVM 19 inlines across a mode change that spec 004 forbids
/// (the model keeps the spec's rule; crate docs, departure "Inlining"): a callee whose
/// body calls `__arm_za_disable`, `__arm_tpidr2_save` or `__arm_tpidr2_restore` stays a
/// call in a ZA caller, in opt-19 and in the model.
#[test]
#[ignore = "needs LLVM 19.1.7's tests in $LOCUS_SME_LLVM_INLINE (scripts/llvm-19-tests)"]
fn llvm_inline_tests_match_opt() {
    let dir = std::env::var("LOCUS_SME_LLVM_INLINE").unwrap_or_else(|_| {
        panic!("set LOCUS_SME_LLVM_INLINE to .../llvm/test/Transforms/Inline/AArch64")
    });
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("sme-"))
        })
        .collect();
    paths.sort();
    let (mut agree, mut mode_rule, mut cost, mut other) = (0, 0, 0, Vec::new());
    for path in &paths {
        let ir = std::fs::read_to_string(path).unwrap();
        let run = ir
            .lines()
            .find_map(|l| l.strip_prefix("; RUN: opt"))
            .unwrap();
        let args: Vec<&str> = run
            .split('|')
            .next()
            .unwrap()
            .split_whitespace()
            .filter(|a| *a != "<" && *a != "%s")
            .collect();
        // A RUN line that lowers the threshold tests the cost model: a call the SME rules
        // allow may stay a call.
        let threshold = args.iter().any(|a| a.contains("threshold"));
        let out = common::pipe("opt-19", &args, ir.as_bytes(), "");
        let out = String::from_utf8(out).unwrap();
        let report = check_ir(&path.display().to_string(), &ir).unwrap();
        for f in &report.functions {
            for c in &f.calls {
                if c.hidden.is_some() || report.function(&c.callee).is_none() {
                    continue;
                }
                let inlined = !body(&out, &f.name).contains(&format!("@{}(", c.callee));
                if inlined == c.model.inline {
                    agree += 1;
                } else if threshold && !inlined {
                    cost += 1;
                } else if inlined
                    && (c
                        .model
                        .before
                        .iter()
                        .chain(&c.model.after)
                        .any(|x| x.insn.is_sm())
                        || f.attrs.sm_body != report.function(&c.callee).unwrap().attrs.sm_body)
                {
                    mode_rule += 1;
                } else {
                    other.push(format!(
                        "{}: @{} -> @{}: opt-19 inlined={inlined}, model={}",
                        path.display(),
                        f.name,
                        c.callee,
                        c.model.inline
                    ));
                }
            }
        }
    }
    eprintln!(
        "LLVM inliner tests: {} files; {agree} calls as opt-19 does, {mode_rule} inlined by \
         LLVM 19 across a mode change the spec forbids, {cost} left by the cost model (a \
         lowered threshold), {} others",
        paths.len(),
        other.len()
    );
    assert!(other.is_empty(), "{}", other.join("\n"));
}
