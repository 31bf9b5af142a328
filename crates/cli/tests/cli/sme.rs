//! `locus sme check`: the JSON and text reports, the exit status, and one negative test per
//! diagnostic (the modules in crates/sme/fixtures/diagnostics, each with `; expect:` lines).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use serde_json::Value;

fn fixtures(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sme/fixtures")
        .join(dir)
}

fn locus_sme(args: &[&str]) -> Output {
    Command::new(LOCUS)
        .arg("sme")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

fn check_json(file: &Path) -> (Output, Value) {
    let out = locus_sme(&["check", "--json", path_str(file)]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {}", file.display(), text(&out.stdout)));
    (out, v)
}

#[test]
fn every_diagnostic_has_a_negative_test() {
    let dir = fixtures("diagnostics");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    files.sort();
    assert!(files.len() >= 16, "{} fixtures", files.len());
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let expected: Vec<(&str, &str, &str)> = source
            .lines()
            .filter_map(|l| l.strip_prefix("; expect: "))
            .map(|l| {
                let (sev, rest) = l.split_once(' ').unwrap();
                let (func, msg) = rest.split_once(": ").unwrap();
                (sev, func.trim_start_matches('@'), msg)
            })
            .collect();
        assert!(!expected.is_empty(), "{}: no expect line", file.display());
        let (out, v) = check_json(file);
        let diags = v["diagnostics"].as_array().unwrap();
        assert_eq!(
            diags.len(),
            expected.len(),
            "{}: {diags:#?}",
            file.display()
        );
        for (sev, func, msg) in &expected {
            assert!(
                diags.iter().any(|d| d["severity"] == *sev
                    && d["function"] == *func
                    && d["message"].as_str().unwrap().contains(msg)),
                "{}: no {sev} in @{func} containing {msg:?}: {diags:#?}",
                file.display()
            );
        }
        let errors = expected.iter().any(|(s, _, _)| *s == "error");
        assert_eq!(
            out.status.success(),
            !errors,
            "{}: exit status {:?}",
            file.display(),
            out.status
        );
        // The text report says the same.
        let out = locus_sme(&["check", path_str(file)]);
        let t = text(&out.stdout);
        for (sev, func, msg) in &expected {
            assert!(
                t.lines()
                    .any(|l| l.starts_with(&format!("{sev}: @{func}: ")) && l.contains(msg)),
                "{}: text report lacks {sev} {msg:?}:\n{t}",
                file.display()
            );
        }
    }
}

#[test]
fn json_report_has_the_issue_shape() {
    let (out, v) = check_json(&fixtures("check").join("clean.ll"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(v["diagnostics"], serde_json::json!([]));
    let functions = v["functions"].as_array().unwrap();
    let names: Vec<&str> = functions
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "normal_calls_streaming",
            "compatible_calls_normal",
            "locally_streaming",
            "streaming_invokes_normal",
            "new_za"
        ]
    );
    let keys = |o: &Value| {
        let mut k: Vec<String> = o.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    for f in functions {
        assert_eq!(
            keys(f),
            [
                "calls",
                "entry",
                "exit",
                "interface",
                "locally_streaming",
                "name",
                "vectorize",
                "za",
                "zt0"
            ]
        );
        for c in f["calls"].as_array().unwrap() {
            assert_eq!(
                keys(c),
                [
                    "after",
                    "after_exception",
                    "before",
                    "callee",
                    "conditional",
                    "hidden",
                    "inline",
                    "instruction",
                    "lazy_za_save",
                    "tail_call",
                    "za_off_around_call",
                    "zt0_spill_fill"
                ]
            );
        }
    }
    let f = |i: usize| &functions[i];
    let call = |i: usize| &f(i)["calls"][0];
    assert_eq!(call(0)["callee"], "s");
    assert_eq!(call(0)["before"], serde_json::json!(["smstart sm"]));
    assert_eq!(call(0)["after"], serde_json::json!(["smstop sm"]));
    assert_eq!(call(0)["tail_call"], false);
    assert_eq!(f(1)["interface"], "streaming-compatible");
    assert_eq!(f(1)["vectorize"], false);
    assert_eq!(call(1)["before"], serde_json::json!(["smstop sm"]));
    assert_eq!(call(1)["conditional"], true);
    assert_eq!(f(2)["locally_streaming"], true);
    assert_eq!(f(2)["entry"], serde_json::json!(["smstart sm"]));
    assert_eq!(f(2)["exit"], serde_json::json!(["smstop sm"]));
    assert_eq!(call(2)["before"], serde_json::json!([]));
    assert_eq!(call(2)["inline"], true);
    assert_eq!(
        call(3)["after_exception"],
        serde_json::json!(["smstart sm"])
    );
    assert_eq!(f(4)["za"], "new");
    assert_eq!(f(4)["zt0"], "none");
    assert_eq!(f(4)["entry"], serde_json::json!(["smstart za"]));
    assert_eq!(f(4)["exit"], serde_json::json!(["smstop za"]));
    assert_eq!(call(4)["lazy_za_save"], true);
    assert_eq!(call(4)["after"], serde_json::json!(["smstart za"]));
}

#[test]
fn text_report_and_errors() {
    let out = locus_sme(&["check", path_str(&fixtures("check").join("clean.ll"))]);
    assert!(out.status.success());
    let t = text(&out.stdout);
    assert!(
        t.contains("@compatible_calls_normal: streaming-compatible interface, ZA none, ZT0 none, vectorize no"),
        "{t}"
    );
    assert!(
        t.contains(
            "call @n: before smstop sm if PSTATE.SM was 1; after smstart sm if PSTATE.SM was 1"
        ),
        "{t}"
    );
    assert!(t.contains("after exception smstart sm;"), "{t}");
    assert!(t.ends_with("0 error(s), 0 warning(s)\n"), "{t}");

    let dir = TempDir::new("sme");
    let bad = dir.0.join("bad.ll");
    std::fs::write(&bad, "define void @f( {\n").unwrap();
    let out = locus_sme(&["check", path_str(&bad)]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("bad.ll"),
        "{}",
        text(&out.stderr)
    );
    let out = locus_sme(&["check", "/nonexistent/x.ll"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("/nonexistent/x.ll"));
}

#[test]
fn hidden_calls_are_listed() {
    let file = fixtures("hidden").join("features.ll");
    let (out, v) = check_json(&file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let function = |name: &str| {
        v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap()
            .clone()
    };
    let f = function("sc_za_mixed");
    let calls = f["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[0]["hidden"],
        serde_json::json!({
            "kind": "libcall",
            "symbol": "__multf3",
            "instruction": "%r = fmul fp128 %x, %x"
        })
    );
    assert_eq!(calls[0]["before"], serde_json::json!(["smstop sm"]));
    assert_eq!(calls[0]["conditional"], true);
    assert_eq!(calls[0]["lazy_za_save"], true);
    assert_eq!(calls[1]["hidden"], Value::Null);
    assert_eq!(calls[2]["callee"], "__fixtfdi");
    let f = function("s_optsize_memcpy_65");
    assert_eq!(f["calls"][0]["hidden"]["kind"], "mem_routine");
    assert_eq!(f["calls"][0]["callee"], "__arm_sc_memcpy");
    assert_eq!(f["calls"][0]["before"], serde_json::json!([]));
    assert!(function("s_optsize_memcpy_64")["calls"]
        .as_array()
        .unwrap()
        .is_empty());
    // The LLVM 19 departure on lazy saves is a warning.
    let warned: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["function"].as_str().unwrap())
        .collect();
    assert_eq!(warned, ["sc_za_mixed"]);

    let out = locus_sme(&["check", path_str(&file)]);
    let t = text(&out.stdout);
    assert!(
        t.contains("call __multf3 (libcall for `%r = fmul fp128 %x, %x`): before smstop sm if PSTATE.SM was 1"),
        "{t}"
    );
}

#[test]
fn zt0_spill_is_in_the_json() {
    let dir = TempDir::new("sme-zt0");
    let file = dir.0.join("zt0.ll");
    std::fs::write(
        &file,
        "declare void @n()\n\
         define void @f() \"aarch64_inout_zt0\" {\n  call void @n()\n  ret void\n}\n",
    )
    .unwrap();
    let (out, v) = check_json(&file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let call = &v["functions"][0]["calls"][0];
    assert_eq!(call["zt0_spill_fill"], true);
    assert_eq!(call["za_off_around_call"], true);
    assert_eq!(call["before"], serde_json::json!(["smstop za"]));
}

/// `locus sme audit`: llc-19's object of a normal function calling a streaming one is
/// clean with its IR or with `--attrs`; without them the callee counts as normal, the
/// `smstart`/`smstop` around the call are departures, and the exit status is 1.
#[test]
fn audit_reads_attributes_from_ir_or_command_line() {
    let dir = TempDir::new("sme-audit");
    let ll = dir.0.join("f.ll");
    let obj = dir.0.join("f.o");
    std::fs::write(
        &ll,
        "declare void @s() \"aarch64_pstate_sm_enabled\"\n\
         define void @f() nounwind {\n  call void @s()\n  ret void\n}\n",
    )
    .unwrap();
    let llc = Command::new("llc-19")
        .args([
            "-mtriple=aarch64-linux-gnu",
            "-mattr=+sme",
            "-filetype=obj",
            "-o",
        ])
        .args([path_str(&obj), path_str(&ll)])
        .output()
        .unwrap_or_else(|e| panic!("cannot run llc-19: {e}"));
    assert!(llc.status.success(), "{}", text(&llc.stderr));
    let out = locus_sme(&["audit", "--json", path_str(&obj), "--ir", path_str(&ll)]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["departures"], serde_json::json!([]));
    assert_eq!(v["functions"][0]["name"], "f");
    assert_eq!(v["functions"][0]["source"], "ir");
    assert_eq!(v["functions"][0]["calls"], 1);
    let out = locus_sme(&["audit", path_str(&obj), "--attrs", "s=streaming"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = locus_sme(&["audit", path_str(&obj)]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out.stdout);
    assert!(t.contains("departure: @f+0x"), "{t}");
    assert!(
        t.contains("`smstart sm` where the rules require no such change"),
        "{t}"
    );
    let out = locus_sme(&["audit", path_str(&obj), "--attrs", "s=fast"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("`fast`"),
        "{}",
        text(&out.stderr)
    );
}

/// `locus sme audit` on what clang-19 makes of an SME ACLE source at -O0 (the mode spilled
/// to the stack and reloaded before each test, `tbnz`/`b` branch pairs, dead code after
/// noreturn calls) and -O2, with the IR clang made: no departure, exit status 0. A damaged
/// object the fuzzer found is read or refused with a `locus:` line, never a panic.
#[test]
fn audit_of_clang19_acle_code_at_o0_and_o2() {
    let dir = TempDir::new("sme-acle");
    let src = fixtures("acle").join("modes.c");
    for level in ["-O0", "-O2"] {
        let obj = dir.0.join(format!("modes{level}.o"));
        let ll = dir.0.join(format!("modes{level}.ll"));
        for (out, mode) in [(&obj, "-c"), (&ll, "-S")] {
            let mut cmd = Command::new("clang-19");
            cmd.args([
                "--target=aarch64-linux-gnu",
                "-march=armv9-a+sme",
                "-ffreestanding",
                level,
                mode,
            ]);
            if mode == "-S" {
                cmd.arg("-emit-llvm");
            }
            let run = cmd
                .arg(path_str(&src))
                .arg("-o")
                .arg(path_str(out))
                .output()
                .unwrap_or_else(|e| panic!("cannot run clang-19: {e}"));
            assert!(run.status.success(), "{}", text(&run.stderr));
        }
        let out = locus_sme(&["audit", path_str(&obj), "--ir", path_str(&ll)]);
        let t = text(&out.stdout);
        assert!(out.status.success(), "{level}: {t}");
        assert!(t.ends_with(" 0 departure(s)\n"), "{level}: {t}");
    }
    let damaged = fixtures("fuzz").join("object-lsda-pointer-before-section.o");
    let out = locus_sme(&["audit", path_str(&damaged)]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{:?}", out.status);
    if out.status.code() == Some(1) && out.stdout.is_empty() {
        assert!(
            text(&out.stderr).starts_with("locus: "),
            "{}",
            text(&out.stderr)
        );
    }
}
