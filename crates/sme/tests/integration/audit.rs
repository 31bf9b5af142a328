//! `locus sme audit` proven on llc-19's objects: the whole caller x callee matrix (mode,
//! ZA, ZT0, new ZA, tail calls, invokes, the routines LLVM knows by name, the calls LLVM
//! makes for instructions) compiled with `llc-19 -filetype=obj` is audited with its IR and
//! with `--attrs` only, and nothing is reported but LLVM 19's documented departure (no
//! `smstart` at the landing pads of streaming callers). Then hand-broken objects: one
//! instruction of an llc-19 object rewritten (an `smstart` made a NOP, the TPIDR2_EL0 set-up
//! dropped, a ZT0 fill removed, an `smstop` put around a streaming-compatible callee, ...),
//! and each departure must be reported with its function and offset.

// Helpers outside #[test] functions unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{attrs, case, llc_obj};
use std::collections::HashMap;

use locus_sme::a64::{decode, Op, Svcr, SysReg};
use locus_sme::attrs::{Attrs, SM_BODY, SM_COMPATIBLE, SM_ENABLED};
use locus_sme::audit::{audit, AuditReport, Kind, OLD_SPELLING_NOTE};
use locus_sme::objfile::{read_functions, CodeFunction};

/// Runs a tool with `input` on its standard input and returns its standard output.
fn pipe(tool: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    common::pipe(tool, args, input, "")
}

const CALLERS: [(&str, &[&str]); 5] = [
    ("n", &[]),
    ("s", &[SM_ENABLED]),
    ("sc", &[SM_COMPATIBLE]),
    ("ls", &[SM_BODY]),
    ("lsc", &[SM_BODY, SM_COMPATIBLE]),
];
const CALLEES: [(&str, &[&str]); 3] = [("n", &[]), ("s", &[SM_ENABLED]), ("sc", &[SM_COMPATIBLE])];
const ZA: [&str; 5] = [
    "aarch64_new_za",
    "aarch64_in_za",
    "aarch64_out_za",
    "aarch64_inout_za",
    "aarch64_preserves_za",
];

fn tail_case(caller: &str, ca: &[&str], callee: &str, ta: &[&str]) -> String {
    let t = attrs(ta);
    format!(
        "declare float @{callee}(float) {t}\n\
         define float @{caller}(float %x) {} {{\n  \
           %r = tail call float @{callee}(float %x) {t}\n  ret float %r\n}}\n",
        attrs(ca)
    )
}

/// An invoke; `lp_asm` is inline assembly run first at the landing pad.
fn invoke_case(caller: &str, ca: &[&str], callee: &str, ta: &[&str], lp_asm: &str) -> String {
    let t = attrs(ta);
    let asm = if lp_asm.is_empty() {
        String::new()
    } else {
        format!("  call void asm sideeffect \"{lp_asm}\", \"\"()\n")
    };
    format!(
        "declare float @{callee}(float) {t}\n\
         define float @{caller}(float %x) {} personality ptr @__gxx_personality_v0 {{\n  \
           %r = invoke float @{callee}(float %x) {t} to label %ok unwind label %lp\n\
         ok:\n  ret float %r\n\
         lp:\n  %l = landingpad {{ ptr, i32 }} cleanup\n{asm}  ret float 0.0\n}}\n",
        attrs(ca)
    )
}

/// The matrix: every caller kind x callee kind, ZA and ZT0 callers, new-ZA functions,
/// tail calls, routines known by name, hidden calls, indirect calls.
fn matrix() -> (String, HashMap<String, Vec<&'static str>>) {
    let mut ir = String::from("declare i32 @__gxx_personality_v0(...)\n");
    let mut attrs_of: HashMap<String, Vec<&'static str>> = HashMap::new();
    let mut add = |ir: &mut String, text: String, fns: &[(String, &[&'static str])]| {
        ir.push_str(&text);
        for (n, a) in fns {
            attrs_of.insert(n.clone(), a.to_vec());
        }
    };
    for (cn, ca) in CALLERS {
        for (tn, ta) in CALLEES {
            for (kind, text) in [
                ("calls", case as fn(&str, &[&str], &str, &[&str]) -> String),
                ("tail", tail_case),
            ] {
                let caller = format!("{cn}_{kind}_{tn}");
                let callee = format!("{tn}_{kind}ee_of_{cn}");
                add(
                    &mut ir,
                    text(&caller, ca, &callee, ta),
                    &[(caller, ca), (callee, ta)],
                );
            }
            let caller = format!("{cn}_invokes_{tn}");
            let callee = format!("{tn}_invoked_by_{cn}");
            add(
                &mut ir,
                invoke_case(&caller, ca, &callee, ta, ""),
                &[(caller, ca), (callee, ta)],
            );
        }
    }
    let za_callees: [(&str, &'static [&'static str]); 4] = [
        ("private", &[]),
        ("inout", &["aarch64_inout_za"]),
        ("preserves", &["aarch64_preserves_za"]),
        ("private_sc", &[SM_COMPATIBLE]),
    ];
    for (i, za) in ZA.iter().enumerate() {
        for (tn, ta) in za_callees {
            let caller = format!("za{i}_calls_{tn}");
            let callee = format!("{tn}_callee_of_za{i}");
            let ca: &'static [&'static str] = std::slice::from_ref(za);
            add(
                &mut ir,
                case(&caller, ca, &callee, ta),
                &[(caller, ca), (callee, ta)],
            );
        }
    }
    for (i, zt0) in ["aarch64_inout_zt0", "aarch64_in_zt0", "aarch64_new_zt0"]
        .iter()
        .enumerate()
    {
        let zt: &'static [&'static str] = std::slice::from_ref(zt0);
        let caller = format!("zt{i}_calls_private");
        let callee = format!("private_callee_of_zt{i}");
        add(
            &mut ir,
            case(&caller, zt, &callee, &[]),
            &[(caller, zt), (callee, &[])],
        );
        let caller = format!("zt{i}_calls_shares_zt0");
        let callee = format!("shares_zt0_callee_of_zt{i}");
        add(
            &mut ir,
            case(&caller, zt, &callee, &["aarch64_inout_zt0"]),
            &[(caller, zt), (callee, &["aarch64_inout_zt0"])],
        );
    }
    let mixed: [(&str, &'static [&'static str], &'static [&'static str]); 5] = [
        ("sc_za_calls_n", &[SM_COMPATIBLE, "aarch64_inout_za"], &[]),
        ("s_za_calls_n", &[SM_ENABLED, "aarch64_inout_za"], &[]),
        ("ls_new_za_calls_n", &[SM_BODY, "aarch64_new_za"], &[]),
        (
            "lsc_new_za_calls_s",
            &[SM_BODY, SM_COMPATIBLE, "aarch64_new_za"],
            &[SM_ENABLED],
        ),
        (
            "sc_za_zt0_calls_n",
            &[SM_COMPATIBLE, "aarch64_inout_za", "aarch64_inout_zt0"],
            &[],
        ),
    ];
    for (caller, ca, ta) in mixed {
        let callee = format!("callee_of_{caller}");
        add(
            &mut ir,
            case(caller, ca, &callee, ta),
            &[(caller.to_string(), ca), (callee, ta)],
        );
    }
    add(
        &mut ir,
        "define void @new_za_leaf() \"aarch64_new_za\" {\n  ret void\n}\n\
         define void @new_zt0_leaf() \"aarch64_new_zt0\" {\n  ret void\n}\n"
            .to_string(),
        &[
            ("new_za_leaf".into(), &["aarch64_new_za"]),
            ("new_zt0_leaf".into(), &["aarch64_new_zt0"]),
        ],
    );
    // Two calls in a row, routines known by name, hidden calls, an indirect call.
    add(
        &mut ir,
        "declare void @twice_n()\n\
         define void @s_za_twice() \"aarch64_pstate_sm_enabled\" \"aarch64_inout_za\" {\n  \
           call void @twice_n()\n  call void @twice_n()\n  ret void\n}\n\
         declare i64 @__arm_sme_state()\n\
         declare void @__arm_sc_memcpy(ptr, ptr, i64)\n\
         define i64 @za_calls_routines(ptr %a, ptr %b) \"aarch64_pstate_sm_compatible\" \"aarch64_inout_za\" {\n  \
           call void @__arm_sc_memcpy(ptr %a, ptr %b, i64 64)\n  \
           %r = call i64 @__arm_sme_state()\n  ret i64 %r\n}\n\
         define double @s_frem(double %x, double %y) \"aarch64_pstate_sm_enabled\" {\n  \
           %r = frem double %x, %y\n  ret double %r\n}\n\
         define void @s_memcpy(ptr %a, ptr %b, i64 %n) \"aarch64_pstate_sm_enabled\" {\n  \
           call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %b, i64 %n, i1 false)\n  ret void\n}\n\
         define void @n_memcpy(ptr %a, ptr %b, i64 %n) \"aarch64_inout_za\" {\n  \
           call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %b, i64 %n, i1 false)\n  ret void\n}\n\
         declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)\n\
         define float @n_calls_indirect_s(ptr %p, float %x) {\n  \
           %r = call float %p(float %x) \"aarch64_pstate_sm_enabled\"\n  ret float %r\n}\n"
            .to_string(),
        &[
            ("twice_n".into(), &[]),
            ("s_za_twice".into(), &[SM_ENABLED, "aarch64_inout_za"]),
            (
                "za_calls_routines".into(),
                &[SM_COMPATIBLE, "aarch64_inout_za"],
            ),
            ("s_frem".into(), &[SM_ENABLED]),
            ("s_memcpy".into(), &[SM_ENABLED]),
            ("n_memcpy".into(), &["aarch64_inout_za"]),
        ],
    );
    (ir, attrs_of)
}

fn audit_ir(ir: &str, obj: &[u8]) -> AuditReport {
    audit(
        "matrix.o",
        obj,
        Some(("matrix.ll", ir.as_bytes())),
        &HashMap::new(),
    )
    .unwrap()
}

/// The departures, as (function, kind) pairs.
fn found(report: &AuditReport) -> Vec<(String, Kind)> {
    report
        .departures
        .iter()
        .map(|d| (d.function.clone(), d.kind))
        .collect()
}

/// LLVM 19's documented departure: no `smstart` at the landing pad of an invoke from a
/// streaming body (and from a streaming-compatible one that was streaming).
fn landing_pad_departure(function: &str) -> bool {
    function.contains("_invokes_") && !function.starts_with("n_")
}

#[test]
fn llc19_matrix_audits_clean() {
    let (ir, attrs_of) = matrix();
    let obj = llc_obj(&ir);
    let report = audit_ir(&ir, &obj);
    let (lp, other): (Vec<_>, Vec<_>) = report
        .departures
        .iter()
        .partition(|d| d.kind == Kind::LandingPad && landing_pad_departure(&d.function));
    assert!(other.is_empty(), "{other:#?}");
    assert_eq!(lp.len(), 12, "{lp:#?}");
    let calls: usize = report.functions.iter().map(|f| f.calls).sum();
    let pads: usize = report.functions.iter().map(|f| f.landing_pads).sum();
    // The same from `--attrs` alone (the hidden calls' lazy saves aside, all is known).
    let given: HashMap<String, Attrs> = attrs_of
        .iter()
        .map(|(n, a)| (n.clone(), Attrs::from_names(a.iter().copied())))
        .collect();
    let by_attrs = audit("matrix.o", &obj, None, &given).unwrap();
    let other: Vec<_> = by_attrs
        .departures
        .iter()
        .filter(|d| {
            !(d.kind == Kind::LandingPad && landing_pad_departure(&d.function))
                && d.function != "n_calls_indirect_s"
        })
        .collect();
    assert!(other.is_empty(), "{other:#?}");
    eprintln!(
        "audit: {} functions, {calls} call sites, {pads} landing pads of llc-19's matrix \
         object: no false report; {} landing pads without the spec's smstart (LLVM 19)",
        report.functions.len(),
        lp.len()
    );
}

/// Function `name` of `obj`.
fn function(obj: &[u8], name: &str) -> CodeFunction {
    read_functions("x.o", obj)
        .unwrap()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap()
}

/// Rewrites the instruction at `offset` of function `name` in `obj` to `word`.
fn patch(obj: &[u8], name: &str, offset: u64, word: u32) -> Vec<u8> {
    use object::{Object, ObjectSection};
    let f = function(obj, name);
    let file = object::File::parse(obj).unwrap();
    let (text, _) = file.section_by_name(".text").unwrap().file_range().unwrap();
    let p = usize::try_from(text + f.address + offset).unwrap();
    let mut out = obj.to_vec();
    out[p..p + 4].copy_from_slice(&word.to_le_bytes());
    out
}

const NOP: u32 = 0xd503_201f;

/// The offset of the `n`th instruction of `name` matching `pred`.
fn find(obj: &[u8], name: &str, n: usize, pred: impl Fn(Op) -> bool) -> u64 {
    let f = function(obj, name);
    f.instructions
        .iter()
        .filter(|i| pred(i.op))
        .nth(n)
        .unwrap_or_else(|| panic!("{name}: no such instruction"))
        .offset
}

/// A hand-broken case: the `n`th instruction of `name` matching `pred` made a NOP, which
/// must be reported as `kind`.
fn nop(
    obj: &[u8],
    name: &'static str,
    n: usize,
    pred: impl Fn(Op) -> bool,
    kind: Kind,
) -> (&'static str, u64, u32, Kind) {
    (name, find(obj, name, n, pred), NOP, kind)
}

/// The offset of the first call of `name` to `target`.
fn find_call(obj: &[u8], name: &str, target: &str) -> u64 {
    let f = function(obj, name);
    f.instructions
        .iter()
        .find(|i| i.target.as_deref() == Some(target))
        .unwrap_or_else(|| panic!("{name}: no call to {target}"))
        .offset
}

#[test]
fn hand_broken_objects_are_caught() {
    let (ir, _) = matrix();
    let obj = llc_obj(&ir);
    let baseline = found(&audit_ir(&ir, &obj));
    let smstart_sm = |op| op == Op::Smstart(Svcr::Sm);
    let smstop_sm = |op| op == Op::Smstop(Svcr::Sm);
    let tpidr_set = |op| matches!(op, Op::Msr(SysReg::Tpidr2, r) if r != 31);
    let mut cases: Vec<(&str, u64, u32, Kind)> = vec![
        // N -> S: the smstart before the call, the smstop after.
        nop(&obj, "n_calls_s", 0, smstart_sm, Kind::MissingChange),
        nop(&obj, "n_calls_s", 0, smstop_sm, Kind::MissingChange),
        // S -> N, and the conditional ones of SC -> N.
        nop(&obj, "s_calls_n", 0, smstart_sm, Kind::MissingChange),
        nop(&obj, "sc_calls_n", 0, smstop_sm, Kind::MissingChange),
        // Locally streaming entry and exit.
        nop(&obj, "ls_calls_sc", 0, smstart_sm, Kind::MissingChange),
        nop(&obj, "ls_calls_sc", 0, smstop_sm, Kind::MissingChange),
        // The conditional test dropped: the change runs always.
        nop(
            &obj,
            "sc_calls_s",
            0,
            |op| matches!(op, Op::Tb { .. }),
            Kind::UnexpectedChange,
        ),
        // A lazy save missing, not restored; not committed by a new-ZA function.
        nop(
            &obj,
            "za3_calls_private",
            0,
            tpidr_set,
            Kind::LazySaveMissing,
        ),
        nop(&obj, "s_za_twice", 1, tpidr_set, Kind::LazySaveMissing),
        nop(
            &obj,
            "za0_calls_private",
            0,
            tpidr_set,
            Kind::LazySaveMissing,
        ),
        (
            "new_za_leaf",
            find_call(&obj, "new_za_leaf", "__arm_tpidr2_save"),
            NOP,
            Kind::LazySaveNotCommitted,
        ),
        nop(
            &obj,
            "new_za_leaf",
            0,
            |op| op == Op::ZeroZa,
            Kind::NotZeroed,
        ),
        nop(
            &obj,
            "new_zt0_leaf",
            0,
            |op| op == Op::ZeroZt0,
            Kind::NotZeroed,
        ),
        // ZT0 not preserved: the spill, the fill.
        nop(
            &obj,
            "zt0_calls_private",
            0,
            |op| matches!(op, Op::StrZt0(_)),
            Kind::Zt0NotPreserved,
        ),
        nop(
            &obj,
            "zt0_calls_private",
            0,
            |op| matches!(op, Op::LdrZt0(_)),
            Kind::Zt0NotPreserved,
        ),
        nop(
            &obj,
            "sc_za_zt0_calls_n",
            1,
            |op| matches!(op, Op::LdrZt0(_)),
            Kind::Zt0NotPreserved,
        ),
        // A mode change around a streaming-compatible callee (the fadd before the call
        // rewritten).
        (
            "s_calls_sc",
            find(&obj, "s_calls_sc", 0, |op| matches!(op, Op::Bl(_))) - 4,
            0xd503_427f,
            Kind::UnexpectedChange,
        ),
        (
            "n_calls_sc",
            find(&obj, "n_calls_sc", 0, |op| matches!(op, Op::Bl(_))) - 4,
            0xd503_437f,
            Kind::UnexpectedChange,
        ),
        // The smstart at a landing pad (written as inline asm) removed.
        ("s_invokes_lp_ok", 0, 0, Kind::LandingPad),
        // A call where a tail call was forbidden made one.
        ("s_calls_n", 0, 0, Kind::TailCall),
    ];
    // The last two need objects of their own.
    let lp_ir = format!(
        "declare i32 @__gxx_personality_v0(...)\n{}",
        invoke_case("s_invokes_lp_ok", &[SM_ENABLED], "n_f", &[], "smstart sm")
    );
    let lp_obj = llc_obj(&lp_ir);
    assert!(found(&audit_ir(&lp_ir, &lp_obj)).is_empty());
    let mut caught = 0;
    let mut missed = Vec::new();
    for (name, offset, word, kind) in cases.drain(..) {
        let (ir, obj, offset, word) = match kind {
            Kind::LandingPad => {
                let f = function(&lp_obj, name);
                let pad = f.landing_pads[0].pad;
                let at = f
                    .instructions
                    .iter()
                    .find(|i| i.offset >= pad && smstart_sm(i.op))
                    .unwrap()
                    .offset;
                (lp_ir.clone(), lp_obj.clone(), at, NOP)
            }
            Kind::TailCall => {
                // `bl n` followed by its smstart: make the call a `b` to itself.
                let bl = find_call(&obj, name, "n_callsee_of_s");
                (ir.clone(), obj.clone(), bl, 0x1400_0000)
            }
            _ => (ir.clone(), obj.clone(), offset, word),
        };
        let broken = patch(&obj, name, offset, word);
        let report = audit_ir(&ir, &broken);
        let base = if kind == Kind::LandingPad {
            Vec::new()
        } else {
            baseline.clone()
        };
        let new: Vec<_> = report
            .departures
            .iter()
            .filter(|d| !base.contains(&(d.function.clone(), d.kind)) || d.function == name)
            .filter(|d| {
                !(d.kind == Kind::LandingPad
                    && landing_pad_departure(&d.function)
                    && kind != Kind::LandingPad)
            })
            .collect();
        let hit = new.iter().any(|d| d.function == name && d.kind == kind);
        let elsewhere = new.iter().any(|d| d.function != name);
        if hit && !elsewhere {
            caught += 1;
        } else {
            missed.push(format!("{name}+{offset:#x} {kind:?}: {new:#?}"));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    eprintln!("audit: {caught} hand-broken objects, each departure caught");
    assert_eq!(caught, 20);
}

/// Every encoding the decoder knows, checked against llvm-mc-19's.
#[test]
fn decoder_agrees_with_llvm_mc() {
    let cases: [(&str, Op); 16] = [
        ("smstart", Op::Smstart(Svcr::Both)),
        ("smstart sm", Op::Smstart(Svcr::Sm)),
        ("smstart za", Op::Smstart(Svcr::Za)),
        ("smstop", Op::Smstop(Svcr::Both)),
        ("smstop sm", Op::Smstop(Svcr::Sm)),
        ("smstop za", Op::Smstop(Svcr::Za)),
        ("msr TPIDR2_EL0, x9", Op::Msr(SysReg::Tpidr2, 9)),
        ("msr TPIDR2_EL0, xzr", Op::Msr(SysReg::Tpidr2, 31)),
        ("mrs x8, TPIDR2_EL0", Op::Mrs(8, SysReg::Tpidr2)),
        ("mrs x3, SVCR", Op::Mrs(3, SysReg::Svcr)),
        ("msr SVCR, x4", Op::Msr(SysReg::Svcr, 4)),
        ("zero {za}", Op::ZeroZa),
        ("zero {zt0}", Op::ZeroZt0),
        ("ldr zt0, [x19]", Op::LdrZt0(19)),
        ("str zt0, [sp]", Op::StrZt0(31)),
        ("blr x8", Op::Blr(8)),
    ];
    let more: [(&str, Op); 14] = [
        ("mov x9, #0", Op::Mov(9, 31)),
        ("mov w9, #0", Op::Mov(9, 31)),
        ("mov x19, x0", Op::Mov(19, 0)),
        ("mov w8, w0", Op::Mov(8, 0)),
        ("and x19, x0, #0x1", Op::And1(19, 0)),
        ("and w19, w0, #0x1", Op::And1(19, 0)),
        ("br x16", Op::Br(16)),
        ("ret", Op::Ret(30)),
        ("bl #-8", Op::Bl(-8)),
        ("b #0x40", Op::B(0x40)),
        (
            "tbz w19, #0, #8",
            Op::Tb {
                nonzero: false,
                reg: 19,
                bit: 0,
                offset: 8,
            },
        ),
        (
            "tbnz x8, #33, #-4",
            Op::Tb {
                nonzero: true,
                reg: 8,
                bit: 33,
                offset: -4,
            },
        ),
        (
            "cbnz x8, #12",
            Op::Cb {
                nonzero: true,
                reg: 8,
                offset: 12,
            },
        ),
        ("b.ne #-16", Op::BCond(1, -16)),
    ];
    let all: Vec<(&str, Op)> = cases.into_iter().chain(more).collect();
    let src: String = all.iter().map(|(a, _)| format!("{a}\n")).collect();
    let out = pipe(
        "llvm-mc-19",
        &["-triple=aarch64", "-mattr=+sme2", "--show-encoding"],
        src.as_bytes(),
    );
    let text = String::from_utf8(out).unwrap();
    let words = encodings(&text);
    assert_eq!(words.len(), all.len(), "{text}");
    for ((asm, op), word) in all.iter().zip(words) {
        assert_eq!(decode(word), *op, "{asm} = {word:#010x}");
    }
    eprintln!("decoder: {} encodings agree with llvm-mc-19", all.len());
}

/// The jump-table parts the decoder knows, checked against llvm-mc-19's encodings.
#[test]
fn table_parts_agree_with_llvm_mc() {
    use locus_sme::a64::{may_set_flags, table_part, TablePart as P};
    let cases: [(&str, Option<P>); 14] = [
        ("adrp x9, #8192", Some(P::Adrp { rd: 9, page: 8192 })),
        (
            "adr x10, #-12",
            Some(P::Adr {
                rd: 10,
                offset: -12,
            }),
        ),
        (
            "add x9, x9, #0x123",
            Some(P::AddImm {
                rd: 9,
                rn: 9,
                imm: 0x123,
            }),
        ),
        (
            "movz x9, #0x1234, lsl #16",
            Some(P::Movz {
                rd: 9,
                value: 0x1234_0000,
            }),
        ),
        (
            "movk x9, #0xbeef, lsl #48",
            Some(P::Movk {
                rd: 9,
                bits: 0xbeef << 48,
                shift: 48,
            }),
        ),
        (
            "ldrb w11, [x9, x8]",
            Some(P::LoadEntry {
                rt: 11,
                rn: 9,
                rm: 8,
                size: 1,
                scaled: false,
            }),
        ),
        (
            "ldrh w11, [x9, w8, uxtw #1]",
            Some(P::LoadEntry {
                rt: 11,
                rn: 9,
                rm: 8,
                size: 2,
                scaled: true,
            }),
        ),
        (
            "ldrsw x9, [x10, x11, lsl #2]",
            Some(P::LoadEntry {
                rt: 9,
                rn: 10,
                rm: 11,
                size: 4,
                scaled: true,
            }),
        ),
        (
            "add x10, x10, x11, lsl #2",
            Some(P::AddShifted {
                rd: 10,
                rn: 10,
                rm: 11,
                shift: 2,
            }),
        ),
        ("cmp w0, #15", Some(P::CmpImm { rn: 0, imm: 15 })),
        ("subs w8, w8, #2", Some(P::CmpImm { rn: 8, imm: 2 })),
        (
            "and w8, w0, #0x7",
            Some(P::AndLowBits {
                rd: 8,
                rn: 0,
                bits: 3,
            }),
        ),
        (
            "and x8, x0, #0xffff",
            Some(P::AndLowBits {
                rd: 8,
                rn: 0,
                bits: 16,
            }),
        ),
        // A sign-extended index is no table's.
        ("ldrsb w11, [x9, x8]", None),
    ];
    let flags: [(&str, bool); 8] = [
        ("cmp x1, x2", true),
        ("ands w0, w1, #1", true),
        ("ccmp w0, #1, #0, ne", true),
        ("fcmp d0, d1", true),
        ("orr x0, x1, x2", false),
        ("stur x8, [x29, #-16]", false),
        ("add x0, sp, #16", false),
        ("csel w0, w1, w2, eq", false),
    ];
    let src: String = cases
        .iter()
        .map(|(a, _)| *a)
        .chain(flags.iter().map(|(a, _)| *a))
        .map(|a| format!("{a}\n"))
        .collect();
    let out = pipe(
        "llvm-mc-19",
        &["-triple=aarch64", "-mattr=+sme2", "--show-encoding"],
        src.as_bytes(),
    );
    let words = encodings(&String::from_utf8(out).unwrap());
    assert_eq!(words.len(), cases.len() + flags.len());
    for ((asm, part), word) in cases.iter().zip(&words) {
        assert_eq!(table_part(*word), *part, "{asm} = {word:#010x}");
    }
    for ((asm, sets), word) in flags.iter().zip(&words[cases.len()..]) {
        assert_eq!(may_set_flags(*word), *sets, "{asm} = {word:#010x}");
    }
}

/// The instruction words of llvm-mc's `--show-encoding` output.
fn encodings(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| l.split("encoding: [").nth(1))
        .map(|e| {
            let b: Vec<u8> = e
                .trim_end_matches(']')
                .split(',')
                .map(|x| u8::from_str_radix(x.trim().trim_start_matches("0x"), 16).unwrap())
                .collect();
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        })
        .collect()
}

#[test]
fn attribute_lists() {
    let a = Attrs::parse_list("streaming, inout_za,aarch64_in_zt0").unwrap();
    assert!(a.sm_enabled && a.za().is_shared() && a.zt0().is_shared());
    assert_eq!(Attrs::parse_list("").unwrap(), Attrs::default());
    let e = Attrs::parse_list("streaming,fast").unwrap_err().to_string();
    assert!(e.contains("`fast`"), "{e}");
}

/// `NAME=LIST` as the audit takes it (what the CLI's `--attrs` splits).
fn given(spec: &str) -> (String, Attrs) {
    let (name, list) = spec.split_once('=').unwrap();
    (name.to_string(), Attrs::parse_list(list).unwrap())
}

/// LLVM's own SME codegen tests (`llvm/test/CodeGen/AArch64/sme-*.ll` and
/// `sve-streaming-mode-*.ll` of LLVM 19.1.7, not part of this repository:
/// `scripts/llvm-19-tests` extracts them): every file in `$LOCUS_SME_LLVM_TESTS` that
/// llc-19 compiles with the options of its first runnable RUN line is audited with its IR;
/// nothing may be reported but LLVM 19's documented departures (no `smstart` at landing
/// pads; unchained library calls without a lazy save; spec 004's old ZA spellings) and
/// the IR's own (ZA turned on and off by intrinsics in a function without ZA state).
/// Ignored unless asked for (`--ignored`), with the variable set.
#[test]
#[ignore = "needs LLVM 19.1.7's tests in $LOCUS_SME_LLVM_TESTS (scripts/llvm-19-tests)"]
fn llvm_sme_tests_audit_clean() {
    let files = common::llvm::files("LOCUS_SME_LLVM_TESTS");
    let (mut audited, mut functions, mut calls, mut documented) = (0, 0, 0, 0);
    let mut false_reports = Vec::new();
    let mut found_bugs = Vec::new();
    for path in files {
        let ir = std::fs::read_to_string(&path).unwrap();
        let Some(options) = common::llvm::llc_options(&ir) else {
            continue;
        };
        let out = common::llvm::llc(&path, &options, &["-filetype=obj", "-o", "-"]);
        if !out.status.success() {
            continue;
        }
        let name = path.display().to_string();
        let Ok(report) = audit(
            &name,
            &out.stdout,
            Some((&name, ir.as_bytes())),
            &HashMap::new(),
        ) else {
            continue;
        };
        audited += 1;
        functions += report.functions.len();
        calls += report.functions.iter().map(|f| f.calls).sum::<usize>();
        for d in report.departures {
            if d.kind == Kind::LandingPad
                || d.message.contains("library call LLVM makes")
                || d.message.ends_with(OLD_SPELLING_NOTE)
            {
                documented += 1;
            } else if d.kind == Kind::UnexpectedChange
                && d.instruction.ends_with(" za")
                && ir.contains("@llvm.aarch64.sme.za.disable()")
            {
                // The IR itself turns ZA on and off in a function without ZA state
                // (sme-toggle-pstateza.ll calls the intrinsics SMEABIPass emits for
                // new-ZA bodies): the departure is the IR's.
                documented += 1;
            } else if d.kind == Kind::TailCall && d.function == "disable_tailcallopt" {
                // LLVM 19 tail-calls a private-ZA callee from an `inout_zt0` function
                // after spilling ZT0 and turning ZA off: the caller's ZT0 is lost.
                found_bugs.push(format!("{name}: {}: {}", d.function, d.message));
            } else {
                false_reports.push(format!("{name}: {d:?}"));
            }
        }
    }
    assert!(false_reports.is_empty(), "{}", false_reports.join("\n"));
    eprintln!(
        "LLVM SME tests: {audited} objects, {functions} functions, {calls} call sites audited, \
         no false report ({documented} documented LLVM 19 departures); found: {found_bugs:#?}"
    );
}

/// The object llvm-mc-19 makes of `fixtures/cfg/NAME`.
fn assemble_cfg(name: &str) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/cfg");
    let src = std::fs::read(dir.join(name)).unwrap();
    pipe(
        "llvm-mc-19",
        &[
            "-triple=aarch64-linux-gnu",
            "-mattr=+sme2",
            "-filetype=obj",
            "-o",
            "-",
        ],
        &src,
    )
}

/// Hand-written code whose layout misleads (`fixtures/cfg/branches.s`, assembled with
/// llvm-mc-19): the audit follows the branches, so a change laid out after a return and
/// reached by a branch counts, a change on one branch only is missing on the other, a
/// `__arm_sme_state` test sends each entry mode down its own path, a test of a register
/// not holding the mode goes both ways, each return is judged by the path to it, and ZA
/// turned off (or not reset TPIDR2_EL0) where a lazy save may be pending is caught, and
/// so are a TPIDR2 block without num_za_save_slices and a restore from another block; a
/// write of SVCR from a register is reported unfollowed, the path ending there.
/// Exactly the departures the file's comments name are found.
#[test]
fn audit_follows_branches() {
    let obj = assemble_cfg("branches.s");
    let given: HashMap<String, Attrs> = [
        "s_calls_n_out_of_line=streaming",
        "n_calls_s_one_branch=",
        "sc_calls_n_two_paths=streaming-compatible",
        "sc_calls_n_forgets_smstart=streaming-compatible",
        "ls_two_exits=locally-streaming",
        "za_lazy_save_one_branch=inout_za",
        "sc_tests_another_register=streaming-compatible",
        "za_off_before_restore=inout_za",
        "s_turns_za_off=streaming",
        "za_block_complete=inout_za",
        "za_block_without_slices=inout_za",
        "za_restore_other_block=inout_za",
        "svcr_from_register=",
        "s_callee=streaming",
    ]
    .iter()
    .map(|a| given(a))
    .collect();
    let report = audit("branches.o", &obj, None, &given).unwrap();
    let got: Vec<(&str, Kind, u64)> = report
        .departures
        .iter()
        .map(|d| (d.function.as_str(), d.kind, d.offset))
        .collect();
    assert_eq!(
        got,
        [
            ("n_calls_s_one_branch", Kind::MissingChange, 0xc),
            ("sc_calls_n_forgets_smstart", Kind::MissingChange, 0x1c),
            ("ls_two_exits", Kind::MissingChange, 0x10),
            ("za_lazy_save_one_branch", Kind::LazySaveMissing, 0xc),
            // Entered not streaming, the unknown test reaches the smstop; entered
            // streaming, it skips it.
            ("sc_tests_another_register", Kind::UnexpectedChange, 0x14),
            ("sc_tests_another_register", Kind::MissingChange, 0x18),
            ("za_off_before_restore", Kind::ZaOff, 0xc),
            ("za_off_before_restore", Kind::UnexpectedChange, 0xc),
            ("za_off_before_restore", Kind::LazySaveNotReset, 0x24),
            ("s_turns_za_off", Kind::UnexpectedChange, 0x4),
            ("za_block_without_slices", Kind::LazySaveMissing, 0x30),
            ("za_restore_other_block", Kind::LazySaveNotRestored, 0x48),
            ("svcr_from_register", Kind::Unfollowed, 0x4),
        ],
        "{:#?}",
        report.departures
    );
    // The departure of the path that streamed says so.
    let sc = &report.departures[1];
    assert!(sc.message.contains("PSTATE.SM = 1"), "{}", sc.message);
    let calls: usize = report.functions.iter().map(|f| f.calls).sum();
    eprintln!(
        "audit by path: {} functions, {calls} call sites of hand-written branches; the 13 \
         departures found, nothing else",
        report.functions.len()
    );
}

/// Jump tables in the forms LLVM 19 emits (`fixtures/cfg/jump_tables.s`, assembled with
/// llvm-mc-19; small, tiny and large code models, a masked index, an index spilled to the
/// stack; byte, halfword and word entries) decode to their case blocks, in a relocatable
/// object and linked by ld.lld-19 (the table's address then computed from the
/// instructions); a dispatch another path enters past the bound check does not decode.
#[test]
fn jump_tables_decode() {
    let obj = assemble_cfg("jump_tables.s");
    let tmp = std::env::temp_dir().join(format!("locus-jt-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("jt.o"), &obj).unwrap();
    let status = std::process::Command::new("ld.lld-19")
        .args(["-e", "small", "-o"])
        .arg(tmp.join("jt.exe"))
        .arg(tmp.join("jt.o"))
        .status()
        .expect("ld.lld-19 (scripts/install-deps installs it)");
    assert!(status.success());
    let linked = std::fs::read(tmp.join("jt.exe")).unwrap();
    std::fs::remove_dir_all(&tmp).unwrap();
    // The case blocks, in table order: case k is 8 bytes at 4 + 8k past the `br`.
    let want: [(&str, &[u64]); 5] = [
        ("small", &[2, 0, 3, 1]),
        ("tiny", &[1, 2, 0]),
        ("large", &[3, 2, 1, 0]),
        ("spilled", &[2, 1, 0]),
        ("entered", &[]),
    ];
    for (file, data) in [("jt.o", &obj), ("jt.exe", &linked)] {
        let functions = read_functions(file, data).unwrap();
        for (name, cases) in want {
            let f = functions.iter().find(|f| f.name == name).unwrap();
            let br = f
                .instructions
                .iter()
                .find(|i| matches!(i.op, Op::Br(_)))
                .unwrap()
                .offset;
            let tables: Vec<(u64, Vec<u64>)> = f
                .jump_tables
                .iter()
                .map(|t| (t.br, t.targets.clone()))
                .collect();
            let expected: Vec<(u64, Vec<u64>)> = if cases.is_empty() {
                Vec::new()
            } else {
                vec![(br, cases.iter().map(|k| br + 4 + 8 * k).collect())]
            };
            assert_eq!(tables, expected, "{file}: {name}");
        }
    }
}

/// Code no branch reaches is followed from an unknown state, one instruction at a time:
/// a function of 250 000 `ret`s (each after the first unreachable) is seeded 200 000 times
/// before the dataflow gives up, and says so (too-complex), nothing else. Finding each
/// seed used to scan the function from its start (quadratic: minutes in a debug build
/// here); it resumes after the previous seed.
#[test]
fn unreachable_code_past_the_state_bound_is_too_complex() {
    let mut src = String::from(".text\n.globl f\n.type f, @function\nf:\n");
    for _ in 0..250_000 {
        src.push_str("  ret\n");
    }
    src.push_str(".size f, . - f\n");
    let obj = pipe(
        "llvm-mc-19",
        &["-triple=aarch64-linux-gnu", "-filetype=obj", "-o", "-"],
        src.as_bytes(),
    );
    let report = audit("rets.o", &obj, None, &HashMap::new()).unwrap();
    let got: Vec<(&str, Kind, u64)> = report
        .departures
        .iter()
        .map(|d| (d.function.as_str(), d.kind, d.offset))
        .collect();
    assert_eq!(
        got,
        [("f", Kind::TooComplex, 0)],
        "{:#?}",
        report.departures
    );
}

/// A large object: 100 000 functions (assembled with llvm-mc-19), each branching to three
/// others by a `bl`/`b` that no relocation names (local symbols), so each target is found
/// by address. The lookup used to scan every symbol per branch (quadratic: 6.1 s of CPU
/// for 20 000 functions in a debug build, about 25 times that here); it is a binary
/// search now (about 4 s here). The bound is generous for a shared machine.
#[test]
fn large_objects_audit_in_linear_time() {
    const N: usize = 100_000;
    let mut src = String::from(".text\n");
    for i in 0..N {
        src.push_str(&format!(
            ".type f{i}, @function\nf{i}:\n  stp x29, x30, [sp, #-16]!\n  bl f{}\n  bl f{}\n  \
             ldp x29, x30, [sp], #16\n  b f{}\n.size f{i}, . - f{i}\n",
            (i * 7 + 1) % N,
            (i * 13 + 5) % N,
            (i + 3) % N
        ));
    }
    let obj = pipe(
        "llvm-mc-19",
        &["-triple=aarch64-linux-gnu", "-filetype=obj", "-o", "-"],
        src.as_bytes(),
    );
    let start = std::time::Instant::now();
    let report = audit("big.o", &obj, None, &HashMap::new()).unwrap();
    let took = start.elapsed();
    assert_eq!(report.functions.len(), N);
    assert_eq!(
        report.functions.iter().map(|f| f.calls).sum::<usize>(),
        3 * N
    );
    // Every branch found its target: f0 calls f1 and f5 and tail-calls f3.
    let f0 = read_functions("big.o", &obj)
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let targets: Vec<_> = f0
        .instructions
        .iter()
        .filter_map(|i| i.target.clone())
        .collect();
    assert_eq!(targets, ["f1", "f5", "f3"]);
    assert!(
        report.departures.is_empty(),
        "{:?}",
        &report.departures[..1]
    );
    eprintln!("audit of {N} functions, {} call sites: {took:?}", 3 * N);
    assert!(took.as_secs() < 60, "{took:?}");
}

/// The fuzzer's finds (`fuzz/`, target `object`), kept in `fixtures/fuzz`: each damaged
/// object must be read, or refused with an object error naming the file, and audited
/// without a panic. `object-lsda-pointer-before-section.o`: an `.eh_frame` relocation
/// pointing before `.gcc_except_table` (the offset of the LSDA underflowed: a panic in a
/// debug build, a huge offset in a release one).
#[test]
fn fuzzer_finds_are_read_or_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fuzz");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("object-")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in &files {
        let data = std::fs::read(file).unwrap();
        let name = file.display().to_string();
        match audit(&name, &data, None, &HashMap::new()) {
            Ok(report) => eprintln!("{name}: {} functions", report.functions.len()),
            Err(e) => {
                assert!(matches!(e, locus_sme::Error::Object { .. }), "{e:?}");
                assert!(e.to_string().starts_with(&name), "{e}");
                eprintln!("{e}");
            }
        }
    }
}
