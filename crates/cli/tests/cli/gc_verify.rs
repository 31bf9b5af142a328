//! `locus gc verify FILE`: clean programs exit 0 silently; each negative fixture of
//! crates/gc/fixtures/verify exits 1 (0 for the warning-only one) with one stdout line per
//! violation naming its rule, function and instruction; bad input is one `locus: FILE: ...`
//! error with exit status 1; bitcode works like text.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use locus_gc::verify::{Rule, Severity};

fn ll_files(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .ll files in {}", dir.display());
    v
}

/// `locus gc verify --strict FILE`: every rule as spec 003 writes it.
fn verify(file: &Path) -> Output {
    verify_with(file, &["--strict"])
}

fn verify_with(file: &Path, flags: &[&str]) -> Output {
    Command::new(LOCUS)
        .args(["gc", "verify"])
        .args(flags)
        .arg(path_str(file))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

/// Without --strict the check is as lenient as Julia's own verifier: exactly these
/// negative fixtures pass, and every other one ends as with --strict.
#[test]
fn lenient_by_default_as_julia_is() {
    const JULIA_ACCEPTS: &[&str] = &[
        "callee_rooted_gep.ll",
        "callee_rooted_icmp.ll",
        "callee_rooted_phi.ll",
        "callee_rooted_select.ll",
        "cast_untracked_to_loaded.ll",
        "gep_tracked.ll",
        "gep_tracked_constant_expr.ll",
        "gep_tracked_noop.ll",
        "gep_tracked_vector.ll",
        "pointer_from_objref_derived.ll",
    ];
    for file in ll_files("../gc/fixtures/verify") {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lenient = verify_with(&file, &[]).status.code();
        let strict = verify(&file).status.code();
        if JULIA_ACCEPTS.contains(&name.as_str()) {
            assert_eq!((lenient, strict), (Some(0), Some(1)), "{name}");
        } else {
            assert_eq!(lenient, strict, "{name}: lenient and strict differ");
        }
    }
}

/// The `; key: value` header lines of a fixture.
fn header(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("; {key}: ")))
        .map(|v| v.trim().to_string())
        .collect()
}

/// The runnable programs verify clean: exit 0 and nothing printed, except the warnings a
/// program announces in a `; warns: RULE` line (one line each).
#[test]
fn clean_programs_exit_0_and_print_nothing() {
    for p in ll_files("../gc/fixtures/programs") {
        let source = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{e}"));
        let warns = header(&source, "warns");
        let out = verify(&p);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}{}",
            p.display(),
            text(&out.stdout),
            text(&out.stderr)
        );
        let printed: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
        assert_eq!(printed.len(), warns.len(), "{}", text(&out.stdout));
        for (line, rule) in printed.iter().zip(&warns) {
            assert!(line.contains(&format!(": warning: {rule}: ")), "{line}");
        }
        assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    }
}

#[test]
fn each_negative_fixture_prints_its_rule_per_violation() {
    for p in ll_files("../gc/fixtures/verify") {
        let source = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{e}"));
        let rule_name = header(&source, "rule").pop().unwrap_or_default();
        let rule = Rule::from_name(&rule_name)
            .unwrap_or_else(|| panic!("{}: unknown rule {rule_name:?}", p.display()));
        let function = header(&source, "function").pop().unwrap_or_default();
        let instructions = header(&source, "instruction");
        let out = verify(&p);
        let stdout = text(&out.stdout);
        let stderr = text(&out.stderr);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines.len(),
            instructions.len(),
            "{}:\n{stdout}{stderr}",
            p.display()
        );
        let severity = rule.severity();
        for (line, instruction) in lines.iter().zip(&instructions) {
            let prefix = format!(
                "{}: {severity}: {rule}: function @{function}, instruction `",
                p.display()
            );
            assert!(line.starts_with(&prefix), "{}: {line}", p.display());
            assert!(
                line.contains(instruction.as_str()),
                "{}: {line}",
                p.display()
            );
        }
        match severity {
            Severity::Error => {
                assert_eq!(out.status.code(), Some(1), "{}", p.display());
                assert_eq!(
                    stderr,
                    format!(
                        "locus: {}: {} GC invariant violation(s)\n",
                        p.display(),
                        lines.len()
                    )
                );
            }
            Severity::Warning => {
                assert_eq!(out.status.code(), Some(0), "{}: {stderr}", p.display());
                assert!(stderr.is_empty(), "{stderr}");
            }
        }
    }
}

#[test]
fn bad_input_is_one_error_with_status_1() {
    let tmp = TempDir::new("gc-verify-bad");
    let cases = [
        (
            "syntax.ll",
            "define i64 @main() {\n  ret i64 %nope\n}\n",
            "cannot parse LLVM IR",
        ),
        (
            "invalid.ll",
            "define i64 @f() {\n  %a = add i64 %b, 1\n  %b = add i64 2, 3\n  ret i64 %a\n}\n",
            "invalid LLVM module",
        ),
        (
            "garbage.ll",
            "\u{7f}ELF not IR at all",
            "cannot parse LLVM IR",
        ),
    ];
    for (name, source, what) in cases {
        let file = tmp.path(name);
        std::fs::write(&file, source).unwrap_or_else(|e| panic!("{e}"));
        let out = verify(&file);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}: {}", text(&out.stdout));
        assert!(
            err.starts_with(&format!("locus: {}: {what}", file.display())),
            "{name}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let missing = tmp.path("missing.ll");
    let out = verify(&missing);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with(&format!("locus: {}: ", missing.display())),
        "{}",
        text(&out.stderr)
    );
}

/// Bitcode gives the same violations as the text it was assembled from.
#[test]
fn bitcode_input_is_verified_too() {
    let tmp = TempDir::new("gc-verify-bc");
    let ll = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/verify/cast_derived_to_tracked.ll");
    let bc = tmp.path("cast.bc");
    let assembled = Command::new("llvm-as-19")
        .arg(&ll)
        .arg("-o")
        .arg(&bc)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run llvm-as-19 (Debian package llvm-19; scripts/install-deps): {e}")
        });
    assert!(assembled.status.success(), "{}", text(&assembled.stderr));
    let from_text = verify(&ll);
    let from_bitcode = verify(&bc);
    assert_eq!(from_bitcode.status.code(), Some(1));
    let strip = |out: &Output, file: &Path| {
        text(&out.stdout).replace(&format!("{}: ", file.display()), "FILE: ")
    };
    assert_eq!(strip(&from_bitcode, &bc), strip(&from_text, &ll));
    assert!(strip(&from_bitcode, &bc).starts_with("FILE: error: addrspacecast: function @bad"));
}

/// The help text documents the output and every rule.
#[test]
fn help_lists_every_rule() {
    let out = Command::new(LOCUS)
        .args(["gc", "verify", "--help"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    assert!(out.status.success());
    let help = text(&out.stdout);
    for rule in Rule::ALL {
        assert!(help.contains(rule.name()), "help lacks {rule}:\n{help}");
    }
    assert!(help.contains("standard output"), "{help}");
}
