//! `locus sme audit` on what clang-19 makes of SME ACLE source code (`fixtures/acle`:
//! `__arm_streaming`, `__arm_streaming_compatible`, `__arm_locally_streaming`,
//! `__arm_new("za")`, `__arm_in/out/inout("za")`, `__arm_preserves("za")`, C++ with
//! exceptions, noreturn calls, switches, loops, indirect calls, the calls LLVM makes for
//! `memcpy`, `fmod`, `long double` and `__int128`), compiled at -O0, -O1, -O2 and -O3 with
//! `clang-19 --target=aarch64-linux-gnu -march=armv9-a+sme -ffreestanding`, each object
//! audited with the IR clang produced for it at the same level. Nothing may be reported but
//! LLVM 19's documented departure (no `smstart` at the landing pad of an invoke from a
//! streaming body): -O0 spills the mode to the stack and reloads it before each test, lays
//! branches out as `tbnz`/`b` pairs, and keeps dead code after noreturn calls; the
//! optimizer duplicates call sites and mode tests.

// Helpers outside #[test] functions unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use locus_sme::audit::{audit, AuditReport, Kind};

const LEVELS: [&str; 4] = ["-O0", "-O1", "-O2", "-O3"];

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/acle");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c" || e == "cpp"))
        .collect();
    files.sort();
    files
}

/// Runs clang-19 on `src` at `level` with `extra` options: what it writes, or its errors.
fn clang(src: &Path, level: &str, march: &str, extra: &[&str]) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new("clang-19");
    cmd.args(["--target=aarch64-linux-gnu", march, "-ffreestanding", level]);
    if src.extension().is_some_and(|e| e == "cpp") {
        cmd.args(["-x", "c++", "-std=c++17"]);
    }
    let out = cmd
        .args(extra)
        .arg(src)
        .args(["-o", "-"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run clang-19 ({e}); scripts/install-deps installs it"));
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "clang-19 {level} {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The object and IR of `src` at `level`, or clang's errors.
fn try_compile(src: &Path, level: &str, march: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    Ok((
        clang(src, level, march, &["-c"])?,
        clang(src, level, march, &["-S", "-emit-llvm"])?,
    ))
}

/// The object and IR of `src` at `level`.
pub fn compile(src: &Path, level: &str, march: &str) -> (Vec<u8>, Vec<u8>) {
    try_compile(src, level, march).unwrap_or_else(|e| panic!("{e}"))
}

fn audit_source(src: &Path, level: &str) -> AuditReport {
    let (obj, ir) = compile(src, level, "-march=armv9-a+sme");
    let name = format!("{}{level}", src.display());
    audit(&name, &obj, Some((&name, &ir)), &HashMap::new()).unwrap()
}

#[test]
fn clang19_acle_code_audits_clean_at_every_level() {
    let files = fixtures();
    assert!(files.len() >= 4, "{files:?}");
    let mut false_reports = Vec::new();
    let mut lines = Vec::new();
    for level in LEVELS {
        let (mut functions, mut calls, mut pads, mut documented) = (0, 0, 0, 0);
        let mut wrong = 0;
        for src in &files {
            let report = audit_source(src, level);
            functions += report.functions.len();
            calls += report.functions.iter().map(|f| f.calls).sum::<usize>();
            pads += report
                .functions
                .iter()
                .map(|f| f.landing_pads)
                .sum::<usize>();
            for d in &report.departures {
                if d.kind == Kind::LandingPad {
                    documented += 1;
                } else {
                    wrong += 1;
                    false_reports.push(format!(
                        "{} {level}: @{}+{:#x} `{}`: {}",
                        src.display(),
                        d.function,
                        d.offset,
                        d.instruction,
                        d.message
                    ));
                }
            }
        }
        lines.push(format!(
            "{level}: {functions} functions, {calls} call sites, {pads} landing pads; \
             {wrong} false departures, {documented} landing pads without the spec's smstart \
             (LLVM 19)"
        ));
    }
    eprintln!("clang-19 ACLE corpus:\n  {}", lines.join("\n  "));
    assert!(false_reports.is_empty(), "{}", false_reports.join("\n"));
}

/// The word of a NOP.
const NOP: u32 = 0xd503_201f;

/// `obj` with the instruction at `offset` of the function at `address` in `.text` made a NOP.
fn nop_at(obj: &[u8], address: u64, offset: u64) -> Vec<u8> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(obj).unwrap();
    let (text, _) = file.section_by_name(".text").unwrap().file_range().unwrap();
    let p = usize::try_from(text + address + offset).unwrap();
    let mut out = obj.to_vec();
    out[p..p + 4].copy_from_slice(&NOP.to_le_bytes());
    out
}

/// Hand-broken clang-19 code at every level: in every function of `modes.c` and `za.c`, the
/// first PSTATE.SM change, and the first lazy-save set-up (`msr TPIDR2_EL0, xN`), made a
/// NOP one at a time. Each must be reported in that function, and nowhere else: following
/// values through stack slots and ending paths at noreturn calls must not hide a departure.
#[test]
fn hand_broken_clang19_code_is_caught_at_every_level() {
    use locus_sme::a64::{Op, Svcr, SysReg};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/acle");
    let mut lines = Vec::new();
    let mut missed = Vec::new();
    for level in LEVELS {
        let (mut sm_cases, mut lazy_cases) = (0, 0);
        for file in ["modes.c", "za.c"] {
            let src = dir.join(file);
            let (obj, ir) = compile(&src, level, "-march=armv9-a+sme");
            let clean = audit("x.o", &obj, Some(("x.ll", &ir)), &HashMap::new()).unwrap();
            let functions = locus_sme::objfile::read_functions("x.o", &obj).unwrap();
            for f in &functions {
                let sm = f
                    .instructions
                    .iter()
                    .find(|i| matches!(i.op, Op::Smstart(Svcr::Sm) | Op::Smstop(Svcr::Sm)));
                // A set-up, not a reset through a zeroed register (`mov x8, xzr` at -O0).
                let lazy =
                    f.instructions
                        .windows(2)
                        .map(|w| (&w[0], &w[1]))
                        .find_map(|(prev, i)| match i.op {
                            Op::Msr(SysReg::Tpidr2, r) if r != 31 && prev.op != Op::Mov(r, 31) => {
                                Some(i)
                            }
                            _ => None,
                        });
                for (inst, want) in [
                    (sm, [Kind::MissingChange, Kind::UnexpectedChange]),
                    (lazy, [Kind::LazySaveMissing, Kind::LazySaveMissing]),
                ] {
                    let Some(inst) = inst else { continue };
                    if want[0] == Kind::LazySaveMissing {
                        lazy_cases += 1;
                    } else {
                        sm_cases += 1;
                    }
                    let broken = nop_at(&obj, f.address, inst.offset);
                    let report =
                        audit("x.o", &broken, Some(("x.ll", &ir)), &HashMap::new()).unwrap();
                    let new: Vec<_> = report
                        .departures
                        .iter()
                        .filter(|d| !clean.departures.contains(d))
                        .collect();
                    let hit = new
                        .iter()
                        .any(|d| d.function == f.name && want.contains(&d.kind));
                    let elsewhere = new.iter().any(|d| d.function != f.name);
                    if !hit || elsewhere {
                        missed.push(format!(
                            "{file} {level} @{}+{:#x} `{}`: {new:#?}",
                            f.name, inst.offset, inst.op
                        ));
                    }
                }
            }
        }
        lines.push(format!(
            "{level}: {sm_cases} first mode changes and {lazy_cases} lazy-save set-ups removed"
        ));
    }
    eprintln!("hand-broken clang-19 code:\n  {}", lines.join("\n  "));
    assert!(
        missed.is_empty(),
        "{} missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

/// A mode change, `msr TPIDR2_EL0` (lazy-save set-up or reset) or `__arm_tpidr2_restore`
/// call: what the tests remove one at a time.
fn is_sme_instruction(inst: &locus_sme::objfile::Instruction) -> bool {
    use locus_sme::a64::{Op, SysReg};
    match (inst.op, inst.target.as_deref()) {
        (Op::Smstart(_) | Op::Smstop(_) | Op::Msr(SysReg::Tpidr2, _), _) => true,
        (Op::Bl(_), Some(t)) => t == "__arm_tpidr2_restore",
        _ => false,
    }
}

/// Jump tables (`fixtures/acle/switch.c`: 16-case switches in streaming, inout-ZA,
/// streaming-compatible and streaming inout-ZA functions, each case calling its own
/// function), at every level: each function's table is decoded, and every mode change,
/// `msr TPIDR2_EL0` (lazy-save set-up or reset to null) and `__arm_tpidr2_restore` call
/// made a NOP one at a time is reported in that function and nowhere else. Before the
/// tables were decoded, the case blocks were checked from an unknown state and 21 of 22
/// such removals in one function went unreported.
#[test]
fn every_change_in_jump_table_cases_is_caught() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/acle/switch.c");
    let mut lines = Vec::new();
    let mut missed = Vec::new();
    for level in LEVELS {
        let (obj, ir) = compile(&src, level, "-march=armv9-a+sme");
        let clean = audit("x.o", &obj, Some(("x.ll", &ir)), &HashMap::new()).unwrap();
        assert!(
            clean.departures.is_empty(),
            "{level}: {:#?}",
            clean.departures
        );
        let functions = locus_sme::objfile::read_functions("x.o", &obj).unwrap();
        let mut removed = 0;
        for f in &functions {
            assert_eq!(f.jump_tables.len(), 1, "{level}: {} has one table", f.name);
            assert_eq!(f.jump_tables[0].targets.len(), 16, "{level}: {}", f.name);
            for inst in &f.instructions {
                if !is_sme_instruction(inst) {
                    continue;
                }
                removed += 1;
                let broken = nop_at(&obj, f.address, inst.offset);
                let report = audit("x.o", &broken, Some(("x.ll", &ir)), &HashMap::new()).unwrap();
                let hit = report.departures.iter().any(|d| d.function == f.name);
                let elsewhere = report.departures.iter().any(|d| d.function != f.name);
                if !hit || elsewhere {
                    missed.push(format!(
                        "{level} @{}+{:#x} `{}`: {:#?}",
                        f.name, inst.offset, inst.op, report.departures
                    ));
                }
            }
        }
        lines.push(format!("{level}: {removed}"));
    }
    eprintln!(
        "jump-table cases, instructions removed (each caught): {}",
        lines.join(", ")
    );
    assert!(
        missed.is_empty(),
        "{} missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

/// Linked shared objects audit as their relocatable objects: `modes.c`, `za.c` and
/// `switch.c` at -O2, linked by ld.lld-19 (`-shared`, plain and with branch protection:
/// `-mbranch-protection=standard -z force-bti`), where every call to another function goes
/// through a PLT stub that the audit resolves through the GOT slot's
/// `R_AARCH64_JUMP_SLOT` relocation: the same call sites and the same departures (before, the stubs named no callee: 25 false
/// departures in one such library, and a missing lazy save went unreported).
#[test]
fn linked_shared_objects_audit_as_their_objects() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/acle");
    let summary = |r: &AuditReport| {
        let calls: Vec<(String, usize)> = r
            .functions
            .iter()
            .map(|f| (f.name.clone(), f.calls))
            .collect();
        let departures: Vec<(String, Kind, String)> = r
            .departures
            .iter()
            .map(|d| (d.function.clone(), d.kind, d.instruction.clone()))
            .collect();
        (calls, departures)
    };
    let mut linked = 0;
    for file in ["modes.c", "za.c", "switch.c"] {
        let src = dir.join(file);
        for (codegen, link) in [
            (&[][..], &[][..]),
            (
                &["-mbranch-protection=standard"][..],
                &["-Wl,-z,force-bti"][..],
            ),
        ] {
            let obj = clang(
                &src,
                "-O2",
                "-march=armv9-a+sme",
                &[codegen, &["-c"]].concat(),
            )
            .unwrap();
            let ir = clang(
                &src,
                "-O2",
                "-march=armv9-a+sme",
                &[codegen, &["-S", "-emit-llvm"]].concat(),
            )
            .unwrap();
            let want = summary(&audit("x.o", &obj, Some(("x.ll", &ir)), &HashMap::new()).unwrap());
            let shared = ["-fPIC", "-shared", "-nostdlib", "-fuse-ld=lld"];
            let data = clang(
                &src,
                "-O2",
                "-march=armv9-a+sme",
                &[codegen, link, &shared].concat(),
            )
            .unwrap();
            let got = summary(&audit("x.so", &data, Some(("x.ll", &ir)), &HashMap::new()).unwrap());
            // The same functions (and no others: -nostdlib), calls and departures.
            assert_eq!(got, want, "{file} {codegen:?}");
            linked += 1;
        }
    }
    eprintln!("shared objects audited as their objects: {linked}");
}

/// Machine-outlined code (-Oz: LLVM's machine outliner moves repeated sequences, such as
/// a lazy-save set-up with its call or `smstart za` with the restore's test, into
/// `OUTLINED_FUNCTION_n`): each fixture audits clean but for LLVM 19's documented
/// landing-pad departure (there were false departures at every outlined call), and each
/// mode change, `msr TPIDR2_EL0` or ZA restore inside an outlined body made a NOP is
/// caught in a function that calls it.
#[test]
fn machine_outlined_code_is_followed_in_place() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/acle");
    let (mut outlined, mut removed) = (0, 0);
    let mut missed = Vec::new();
    for file in ["modes.c", "za.c", "switch.c", "exceptions.cpp"] {
        let src = dir.join(file);
        let (obj, ir) = compile(&src, "-Oz", "-march=armv9-a+sme");
        let clean = audit("x.o", &obj, Some(("x.ll", &ir)), &HashMap::new()).unwrap();
        let unexpected: Vec<_> = clean
            .departures
            .iter()
            .filter(|d| d.kind != Kind::LandingPad)
            .collect();
        assert!(unexpected.is_empty(), "{file} -Oz: {unexpected:#?}");
        let functions = locus_sme::objfile::read_functions("x.o", &obj).unwrap();
        for f in functions
            .iter()
            .filter(|f| f.name.starts_with("OUTLINED_FUNCTION_"))
        {
            outlined += 1;
            for inst in &f.instructions {
                if !is_sme_instruction(inst) {
                    continue;
                }
                removed += 1;
                let broken = nop_at(&obj, f.address, inst.offset);
                let report = audit("x.o", &broken, Some(("x.ll", &ir)), &HashMap::new()).unwrap();
                if !report
                    .departures
                    .iter()
                    .any(|d| !clean.departures.contains(d))
                {
                    missed.push(format!(
                        "{file} @{}+{:#x} `{}`",
                        f.name, inst.offset, inst.op
                    ));
                }
            }
        }
    }
    eprintln!("-Oz: {outlined} outlined functions, {removed} SME instructions in them removed");
    assert!(
        removed > 0,
        "no SME instruction was outlined: the test tests nothing"
    );
    assert!(missed.is_empty(), "missed:\n{}", missed.join("\n"));
}

/// LLVM 19's ZT0 tail call (llvm-project#165371) in clang-19's code: `fixtures/acle/sme2/zt0.c`
/// at -O0..-O3 (`-march=armv9-a+sme2`). The audit reports tail-call departures exactly at
/// the functions where `sme check` of the same IR warns about the call, and nothing else.
#[test]
fn clang19_zt0_tail_calls_are_warned_and_audited() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/acle/sme2/zt0.c");
    let mut lines = Vec::new();
    for level in LEVELS {
        let (obj, ir) = compile(&src, level, "-march=armv9-a+sme2");
        let name = format!("zt0.c{level}");
        let report = audit(&name, &obj, Some((&name, &ir)), &HashMap::new()).unwrap();
        let check = locus_sme::check::check_ir(&name, &ir).unwrap();
        let mut warned: Vec<&str> = check
            .diagnostics
            .iter()
            .filter(|d| d.message.contains("165371"))
            .map(|d| d.function.as_str())
            .collect();
        let mut departed: Vec<&str> = report
            .departures
            .iter()
            .map(|d| {
                assert_eq!(d.kind, Kind::TailCall, "{level}: {d:?}");
                d.function.as_str()
            })
            .collect();
        warned.sort_unstable();
        departed.sort_unstable();
        assert_eq!(departed, warned, "{level}");
        lines.push(format!("{level}: {}", departed.len()));
    }
    eprintln!(
        "clang-19 ZT0 tail calls (warned = audited): {}",
        lines.join(", ")
    );
}

/// Clang 19.1.7's own SME ACLE tests (`clang/test/CodeGen/aarch64-sme-intrinsics/*.c`,
/// `aarch64-sme2-intrinsics/*.c`, `aarch64-sme-inline-streaming-attrs.c`,
/// `aarch64-sme-attrs.cpp`; `scripts/llvm-19-tests` extracts them), in the directory
/// `$LOCUS_SME_CLANG_TESTS` (`.../clang/test/CodeGen`): each file clang-19 compiles for
/// SME2 and its extensions is audited at -O0..-O3 with its IR, and nothing may be
/// reported. Ignored unless asked for.
#[test]
#[ignore = "needs clang 19.1.7's tests in $LOCUS_SME_CLANG_TESTS (scripts/llvm-19-tests)"]
fn clang19_acle_tests_audit_clean() {
    let dir = PathBuf::from(std::env::var("LOCUS_SME_CLANG_TESTS").unwrap());
    let mut files = Vec::new();
    for sub in ["aarch64-sme-intrinsics", "aarch64-sme2-intrinsics"] {
        files.extend(
            std::fs::read_dir(dir.join(sub))
                .unwrap()
                .map(|e| e.unwrap().path()),
        );
    }
    files.push(dir.join("aarch64-sme-inline-streaming-attrs.c"));
    files.push(dir.join("aarch64-sme-attrs.cpp"));
    files.sort();
    let march = "-march=armv9-a+sme2+sme-f64f64+sme-i16i64+b16b16+sme2p1+sme-f16f16";
    let mut reports = Vec::new();
    for level in LEVELS {
        let (mut compiled, mut functions, mut calls) = (0, 0, 0);
        for src in &files {
            // A file clang-19's driver does not compile as it is (cc1-only options) is
            // left out.
            let Ok((obj, ir)) = try_compile(src, level, march) else {
                continue;
            };
            compiled += 1;
            let name = format!("{}{level}", src.display());
            let report = audit(&name, &obj, Some((&name, &ir)), &HashMap::new()).unwrap();
            functions += report.functions.len();
            calls += report.functions.iter().map(|f| f.calls).sum::<usize>();
            reports.extend(
                report
                    .departures
                    .into_iter()
                    .map(|d| format!("{name}: {d:?}")),
            );
        }
        eprintln!(
            "clang-19's ACLE tests {level}: {compiled}/{} files, {functions} functions, \
             {calls} call sites",
            files.len()
        );
    }
    assert!(reports.is_empty(), "{}", reports.join("\n"));
}
