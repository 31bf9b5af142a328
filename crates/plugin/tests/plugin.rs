//! liblocus_plugin.so inside opt-19 and clang-19, against what the CLI gives on the same
//! inputs. The CLI is thin (crates/cli/src/gc.rs and sme.rs): `locus gc lower` parses the
//! file, checks the GC invariants (`verify_module`, errors stop it) and writes
//! `lower_module`'s module; `locus sme check` prints `check_ir`'s report. Those library calls
//! are the oracle here, with LLVM's tools on the plugin's side: both outputs are parsed,
//! verified and printed again by LLVM 19 and must be the same module.

// The helpers below end the test on a broken environment (no opt-19, an unreadable
// fixture), as the tests' own expects do.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use locus_gc::lower::{lower_module, LowerOptions};
use locus_gc::run::RunOptions;
use locus_gc::runtime::OnFault;
use locus_gc::verify::{verify_module, VerifyOptions};
use locus_llvm::{Context, Module};
use locus_sme::check::check_ir;
use locus_sme::rules::Severity;

/// The plugin of the build under test: cargo builds the cdylib before the tests, into the
/// test binary's own directory (`target/debug/deps`) and its parent.
fn plugin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        let p = dir.join("liblocus_plugin.so");
        if p.exists() {
            return p;
        }
    }
    panic!("liblocus_plugin.so not found next to {}", exe.display());
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// The `.ll` files of `dir` (relative to the workspace), sorted; there must be some.
fn ll_files(dir: &str) -> Vec<PathBuf> {
    let dir = workspace().join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .ll files in {}", dir.display());
    v
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// opt-19 with the plugin and `passes` on `file`, printing the module.
fn opt(passes: &str, file: &Path, extra: &[&str]) -> Output {
    run(Command::new("opt-19")
        .arg(format!("--load-pass-plugin={}", plugin().display()))
        .arg(format!("-passes={passes}"))
        .args(extra)
        .arg("-S")
        .arg(file)
        .arg("-o")
        .arg("-"))
}

/// `module` parsed, checked by LLVM's verifier and printed again (in process, as `opt-19
/// -passes=verify -S` would), without the lines naming the file, the target or the data
/// layout (clang sets the last two on a module that has none), and with its top-level
/// entities (blank-line separated: globals, declarations, definitions, attribute groups,
/// metadata) sorted: a pass may add a declaration at another place in the function list,
/// which changes no meaning.
fn normalized(module: &str) -> String {
    let ctx = Context::new();
    let parsed = Module::parse_ir(&ctx, "m", module)
        .unwrap_or_else(|e| panic!("LLVM cannot parse the output: {e}\n{module}"));
    if let Err(e) = parsed.verify() {
        panic!("LLVM's verifier refuses the output: {e}\n{module}");
    }
    let kept = parsed
        .print()
        .lines()
        .filter(|l| {
            !(l.starts_with("; ModuleID")
                || l.starts_with("source_filename")
                || l.starts_with("target datalayout")
                || l.starts_with("target triple")
                // The late lowering's marker for the final one (see the crate docs).
                || *l == "!locus.gc.late = !{}")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut entities: Vec<&str> = kept
        .split("\n\n")
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    entities.sort_unstable();
    entities.join("\n\n")
}

/// What `locus gc lower [--intermediate] FILE` writes, or its error.
fn cli_lower(file: &Path, intermediate_only: bool) -> Result<String, String> {
    let bytes = std::fs::read(file).expect("the fixture reads");
    let ctx = Context::new();
    let shown = file.display().to_string();
    let module = Module::parse_ir(&ctx, &shown, bytes).map_err(|e| e.to_string())?;
    let errors: Vec<String> = verify_module(&module, VerifyOptions::default())
        .into_iter()
        .filter(|v| v.is_error())
        .map(|v| v.to_string())
        .collect();
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    lower_module(&module, LowerOptions { intermediate_only }).map_err(|e| e.to_string())?;
    Ok(module.print())
}

#[test]
fn the_plugin_links_the_libllvm_opt_loads() {
    let libs = |path: &Path| -> Vec<String> {
        let out = run(Command::new("ldd").arg(path));
        text(&out.stdout)
            .lines()
            .filter(|l| l.contains("libLLVM"))
            .map(|l| l.trim().split(" (").next().unwrap_or_default().to_owned())
            .collect()
    };
    let opt = run(Command::new("sh").args(["-c", "command -v opt-19"]));
    let opt_path = PathBuf::from(text(&opt.stdout).trim());
    let ours = libs(&plugin());
    assert_eq!(ours.len(), 1, "one libLLVM: {ours:?}");
    assert_eq!(
        ours,
        libs(&opt_path),
        "the plugin must load opt-19's own libLLVM"
    );
}

/// Julia's pipelines (module and function level, both names) and Locus's own give the CLI's
/// module: on the suite's programs three pipelines, on the FileCheck inputs two others
/// (each opt-19 run loads the plugin and lowers in a debug build: kept to 170 runs).
#[test]
fn gc_lowering_under_opt_is_the_clis() {
    let mut compared = 0;
    let sets: [(&str, &[(&str, bool)]); 2] = [
        (
            "crates/gc/fixtures/programs",
            &[
                ("locus-late-gc-lowering,locus-final-gc-lowering", false),
                ("function(LateLowerGCFrame,FinalLowerGC)", false),
                ("LateLowerGCFrame", true),
            ],
        ),
        (
            "crates/gc/fixtures/filecheck",
            &[
                ("function(LateLowerGCFrame),FinalLowerGC", false),
                ("function(locus-final-gc-lowering)", false),
            ],
        ),
    ];
    for (dir, pipelines) in sets {
        for file in ll_files(dir) {
            let shown = file.display();
            let full =
                normalized(&cli_lower(&file, false).unwrap_or_else(|e| panic!("{shown}: {e}")));
            let intermediate = pipelines.iter().any(|(_, i)| *i).then(|| {
                normalized(&cli_lower(&file, true).unwrap_or_else(|e| panic!("{shown}: {e}")))
            });
            for &(passes, intermediate_only) in pipelines {
                let want = if intermediate_only {
                    intermediate.as_ref().unwrap_or(&full)
                } else {
                    &full
                };
                let out = opt(passes, &file, &[]);
                assert!(
                    out.status.success(),
                    "{shown}: opt-19 -passes={passes} failed:\n{}",
                    text(&out.stderr)
                );
                let got = normalized(&text(&out.stdout));
                assert!(
                    got == *want,
                    "{shown}: -passes={passes} differs from the CLI's module:\n{got}\n---- CLI:\n{want}"
                );
                compared += 1;
            }
        }
    }
    assert!(compared >= 3 * 30 + 2 * 20, "{compared} comparisons");
}

/// Julia's intermediate form, written out by LateLowerGCFrame and lowered by FinalLowerGC
/// in a second opt-19 run (as Julia's final-lower-gc tests do), is the fully lowered module.
#[test]
fn final_lowering_finishes_the_intermediate_form() {
    let dir = std::env::temp_dir().join(format!("locus-plugin-final.{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    for file in ll_files("crates/gc/fixtures/programs") {
        let late = opt("LateLowerGCFrame", &file, &[]);
        assert!(late.status.success(), "{}", text(&late.stderr));
        let path = dir.join(file.file_name().expect("a file name"));
        std::fs::write(&path, &late.stdout).expect("writes");
        let out = opt("function(FinalLowerGC)", &path, &[]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(
            normalized(&text(&out.stdout)),
            normalized(&cli_lower(&file, false).expect("lowers")),
            "{}",
            file.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// clang-19 -fpass-plugin lowers a GC module in its default pipeline as the CLI does.
#[test]
fn clang_lowers_gc_modules_in_its_default_pipeline() {
    for file in ll_files("crates/gc/fixtures/programs") {
        let out = run(Command::new("clang-19")
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .args(["-O0", "-Wno-override-module", "-S", "-emit-llvm", "-o", "-"])
            .arg(&file));
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            text(&out.stderr)
        );
        assert_eq!(
            normalized(&text(&out.stdout)),
            normalized(&cli_lower(&file, false).expect("lowers")),
            "{}",
            file.display()
        );
    }
}

/// clang-19 -O2 -fpass-plugin places the roots at the start of its pipeline and optimizes
/// the lowered module: each of the 38 programs, so compiled, is lowered already (it calls
/// the runtime's `locus_gc_get_pgcstack`, no `julia.get_pgcstack`) and, JIT-run by
/// `locus_gc::run` (which runs lowered functions as they are) under the stress collector,
/// returns its `; expect:` value with no fault.
#[test]
fn clang_o2_lowered_programs_run_under_stress() {
    let mut ran = 0;
    for file in ll_files("crates/gc/fixtures/programs") {
        let source = std::fs::read_to_string(&file).expect("reads");
        let Some(expect) = source
            .lines()
            .find_map(|l| l.strip_prefix("; expect:"))
            .and_then(|v| v.trim().parse::<i64>().ok())
        else {
            continue;
        };
        let out = run(Command::new("clang-19")
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .args(["-O2", "-Wno-override-module", "-S", "-emit-llvm", "-o", "-"])
            .arg(&file));
        let shown = file.display();
        assert!(out.status.success(), "{shown}: {}", text(&out.stderr));
        let ir = text(&out.stdout);
        assert!(
            ir.contains("@locus_gc_get_pgcstack()"),
            "{shown}: not lowered\n{ir}"
        );
        assert!(
            !ir.contains("call ptr @julia.get_pgcstack()"),
            "{shown}\n{ir}"
        );
        let options = RunOptions {
            stress: true,
            on_fault: OnFault::Record,
            ..RunOptions::default()
        };
        // SAFETY: the suite's programs only touch the objects the runtime gives them, while
        // they are live (what the stress collector checks), and their own stack.
        let outcome = unsafe { locus_gc::run::run(&shown.to_string(), &ir, options) }
            .unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(outcome.value, expect, "{shown}");
        assert!(outcome.faults.is_empty(), "{shown}: {:?}", outcome.faults);
        ran += 1;
    }
    assert!(ran >= 30, "{ran} programs ran");
}

/// What the lowering refuses, and what breaks the invariants, ends opt-19 with status 1 (not
/// a signal) and the CLI's message; clang-19 likewise fails the compilation.
#[test]
fn bad_inputs_end_the_compilation_with_the_clis_message() {
    for file in ll_files("crates/gc/fixtures/refused") {
        let source = std::fs::read_to_string(&file).expect("reads");
        let reason = source
            .lines()
            .find_map(|l| l.strip_prefix("; refused: "))
            .expect("a `; refused:` line");
        let cli = cli_lower(&file, false).expect_err("the CLI refuses it");
        assert!(cli.contains(reason), "{cli}");
        for passes in ["locus-final-gc-lowering", "function(LateLowerGCFrame)"] {
            let out = opt(passes, &file, &[]);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{}: {stderr}", file.display());
            assert!(
                stderr.contains(&cli),
                "{}: {stderr}\n--- CLI: {cli}",
                file.display()
            );
            // opt's handler exits at the error diagnostic, before the pass's fatal error.
            assert!(!stderr.contains("Stack dump"), "{stderr}");
        }
        let out = run(Command::new("clang-19")
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .args(["-O0", "-Wno-override-module", "-c", "-o", "/dev/null"])
            .arg(&file));
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(reason), "{}", text(&out.stderr));
    }
    // Broken invariants: the verifier's first error, as `locus gc verify [--strict]` prints
    // it; strict mode finds more.
    let mut errors = [0, 0];
    for file in ll_files("crates/gc/fixtures/verify") {
        let bytes = std::fs::read(&file).expect("reads");
        let ctx = Context::new();
        let Ok(module) = Module::parse_ir(&ctx, "m", bytes) else {
            continue;
        };
        for (strict, passes) in [
            (false, "locus-gc-verify"),
            (true, "locus-gc-verify<strict>"),
        ] {
            let first = verify_module(&module, VerifyOptions { strict })
                .into_iter()
                .find(|v| v.is_error());
            let out = opt(passes, &file, &["-disable-output"]);
            let stderr = text(&out.stderr);
            match first {
                Some(v) => {
                    errors[usize::from(strict)] += 1;
                    assert_eq!(out.status.code(), Some(1), "{}: {stderr}", file.display());
                    assert!(
                        stderr.contains(&format!("error: locus-gc-verify: {v}")),
                        "{}: {stderr}",
                        file.display()
                    );
                }
                None => assert!(out.status.success(), "{}: {stderr}", file.display()),
            }
        }
    }
    assert!(
        errors[0] >= 10 && errors[1] > errors[0],
        "{errors:?} fixtures with errors"
    );
}

/// How many remarks `locus-sme-check` gives for `report`: one per function whose entry or
/// exit changes modes, one per call with something around it.
fn predicted_changes(report: &locus_sme::check::Report) -> usize {
    report
        .functions
        .iter()
        .map(|f| {
            usize::from(!f.model.entry.is_empty() || !f.model.exit.is_empty())
                + f.calls
                    .iter()
                    .filter(|c| {
                        let m = &c.model;
                        !m.before.is_empty()
                            || !m.after.is_empty()
                            || !m.after_exception.is_empty()
                            || m.lazy_za_save
                            || m.preserve_zt0
                            || m.disable_za
                    })
                    .count()
        })
        .sum()
}

/// clang-19 -fpass-plugin checks SME code in its default pipeline: on the ACLE sources,
/// compiled for AArch64 at -O2, `-Rpass=locus-sme` gives one remark (with the source
/// location) per predicted change of the module clang optimised, which `locus sme check`
/// sees in `clang-19 -O2 -S -emit-llvm`'s output (the SME check changes nothing).
#[test]
fn clang_checks_sme_in_its_default_pipeline() {
    let mut total = 0;
    for name in ["modes.c", "state.c", "za.c"] {
        let file = workspace().join("crates/sme/fixtures/acle").join(name);
        let common = [
            "--target=aarch64-linux-gnu",
            "-march=armv9-a+sme",
            "-O2",
            "-S",
            "-o",
        ];
        let ir = run(Command::new("clang-19")
            .args(common)
            .args(["-", "-emit-llvm"])
            .arg(&file));
        assert!(ir.status.success(), "{}", text(&ir.stderr));
        let report = check_ir(name, &ir.stdout).expect("clang's IR parses");
        let out = run(Command::new("clang-19")
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .args(common)
            .args(["/dev/null", "-Rpass=locus-sme"])
            .arg(&file));
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(i32::from(report.has_errors())),
            "{name}: {stderr}"
        );
        let remarks = stderr
            .lines()
            .filter(|l| l.contains("remark: ") && l.ends_with("[-Rpass=locus-sme]"))
            .count();
        assert_eq!(remarks, predicted_changes(&report), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}:")),
            "remarks carry the source location: {stderr}"
        );
        total += remarks;
    }
    assert!(total > 20, "{total} remarks");
}

/// `locus-sme-check` reports what `locus sme check` reports, in order (opt stops at the
/// first error), ends with status 1 exactly when there is an error, and gives one remark
/// per function entry/exit and call with a predicted change.
#[test]
fn sme_check_under_opt_is_the_clis() {
    let mut files = ll_files("crates/sme/fixtures/diagnostics");
    files.extend(ll_files("crates/sme/fixtures/check"));
    files.extend(ll_files("crates/sme/fixtures/hidden"));
    let mut remarks_seen = 0;
    for file in files {
        let shown = file.display();
        let report = check_ir("m", std::fs::read(&file).expect("reads")).expect("parses");
        // Some fixtures break rules LLVM's verifier also knows (conflicting attributes):
        // -disable-verify lets the pass see them, as the CLI does.
        let out = opt(
            "locus-sme-check",
            &file,
            &[
                "-pass-remarks=locus-sme",
                "-disable-output",
                "-disable-verify",
            ],
        );
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(i32::from(report.has_errors())),
            "{shown}: {stderr}"
        );
        let mut want = Vec::new();
        for d in &report.diagnostics {
            want.push(format!(
                "{}: locus-sme-check: @{}: {}",
                d.severity,
                d.function,
                d.full_message()
            ));
            if d.severity == Severity::Error {
                break;
            }
        }
        let got: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("error: ") || l.starts_with("warning: "))
            .collect();
        assert_eq!(got, want, "{shown}");
        if report.has_errors() {
            continue;
        }
        let expected_remarks = predicted_changes(&report);
        let remarks = stderr.lines().filter(|l| l.starts_with("remark: ")).count();
        assert_eq!(remarks, expected_remarks, "{shown}: {stderr}");
        remarks_seen += remarks;
    }
    assert!(remarks_seen > 10, "{remarks_seen} remarks");
}
