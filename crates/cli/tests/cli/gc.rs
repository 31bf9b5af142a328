//! `locus gc`: the dropped-root oracle, faults in the code run (exit statuses 2 and 3),
//! lowered modules checked by `opt-19 -passes=verify`, the report, and errors.

// Shared with the tour, which deletes a root store the same way.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use crate::dropped_relocation::lower_and_drop_first_relocation;
use crate::root_stores::{root_stores, without_line};

fn programs() -> Vec<PathBuf> {
    fixtures_in("programs")
}

/// Programs that must end with a fault: `; status: N`, optionally `; stress`, and one
/// `; stderr: TEXT` line per piece of text the one line on standard error must contain.
fn faulting() -> Vec<PathBuf> {
    fixtures_in("faulting")
}

fn fixtures_in(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures")
        .join(sub);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    v.sort();
    v
}

fn locus_gc(args: &[&str]) -> Output {
    Command::new(LOCUS)
        .arg("gc")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

/// The `; expect: N` line of a program.
fn expected_value(p: &Path) -> String {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("; expect: ").map(|v| v.trim().to_string()))
        })
        .unwrap_or_else(|| panic!("{}: no expect line", p.display()))
}

#[test]
fn every_program_runs_under_stress_from_the_command_line() {
    for p in programs() {
        let out = locus_gc(&["run", "--stress", "--stats", path_str(&p)]);
        assert!(
            out.status.success(),
            "{}: {}",
            p.display(),
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        let expected = expected_value(&p);
        assert_eq!(
            stdout.lines().next(),
            Some(expected.as_str()),
            "{}",
            p.display()
        );
        assert!(stdout.contains("collections: "), "{stdout}");
    }
}

/// The oracle can fail: with any one root store deleted from the lowered module (which then
/// runs as it is, already lowered), the stress run must either still give the right result
/// (the store was not needed for this run) or end with a dangling reference (exit status
/// 2): never a wrong result, a crash or another fault. At least one deleted store of every
/// program must be caught; the counts are printed.
#[test]
fn a_deleted_root_store_is_caught_as_a_dangling_reference() {
    let tmp = TempDir::new("gc-sabotage");
    let mut summary = Vec::new();
    for p in programs() {
        let out = locus_gc(&["lower", path_str(&p)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let lowered = text(&out.stdout);
        let stores = root_stores(&lowered);
        let expected = expected_value(&p);
        let mut caught = 0;
        for (k, &line) in stores.iter().enumerate() {
            let edited = tmp.path(&format!("{}-{k}.ll", stem(&p)));
            std::fs::write(&edited, without_line(&lowered, line)).unwrap_or_else(|e| panic!("{e}"));
            let out = locus_gc(&["run", "--stress", path_str(&edited)]);
            let err = text(&out.stderr);
            let removed = lowered.lines().nth(line).unwrap_or_default().trim();
            match out.status.code() {
                Some(2) => {
                    assert!(
                        err.starts_with("locus: gc: dangling reference")
                            && err.lines().count() == 1,
                        "{} without `{removed}`: {err}",
                        p.display()
                    );
                    caught += 1;
                }
                Some(0) => assert_eq!(
                    text(&out.stdout).trim(),
                    expected,
                    "{} without `{removed}`: a wrong result",
                    p.display()
                ),
                other => panic!(
                    "{} without `{removed}`: status {other:?}, {err}",
                    p.display()
                ),
            }
        }
        summary.push(format!("{}: {caught}/{}", stem(&p), stores.len()));
        assert!(
            !stores.is_empty() && caught > 0,
            "{}: none of {} deleted stores was caught",
            p.display(),
            stores.len()
        );
    }
    println!(
        "deleted root stores caught as dangling references: {}",
        summary.join(", ")
    );
}

/// Faults in the code run: each program in `fixtures/faulting` ends with its documented
/// exit status (2 for an access to a freed object under --stress, 3 for a signal) and one
/// `locus:` line on standard error naming the signal, the address and the function.
/// Before fault handling, these were killed by the signal (no status, no message) or, for
/// a pointer hidden from the collector, returned poison with status 0.
#[test]
fn faults_in_the_code_run_end_with_one_line_and_their_status() {
    let mut seen = Vec::new();
    for p in faulting() {
        let source = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{e}"));
        let status: i32 = source
            .lines()
            .find_map(|l| l.strip_prefix("; status: "))
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: no status line", p.display()));
        let wanted: Vec<&str> = source
            .lines()
            .filter_map(|l| l.strip_prefix("; stderr: "))
            .collect();
        let mut args = vec!["run"];
        if source.lines().any(|l| l.trim() == "; stress") {
            args.push("--stress");
        }
        args.push(path_str(&p));
        let out = locus_gc(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{}: {err}", p.display());
        assert_eq!(text(&out.stdout), "", "{}", p.display());
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{}: {err}", p.display());
        assert!(lines[0].starts_with("locus: "), "{}: {err}", p.display());
        for w in &wanted {
            assert!(lines[0].contains(w), "{}: want `{w}` in {err}", p.display());
        }
        seen.push(stem(&p));
    }
    for kind in [
        "divide_by_zero",
        "hidden_in_global",
        "hidden_in_raw_bytes",
        "null_deref",
        "stack_overflow",
        "trap",
    ] {
        assert!(seen.iter().any(|s| s == kind), "no {kind}.ll");
    }
}

/// The exit statuses are in `locus gc run --help`.
#[test]
fn run_help_documents_the_exit_statuses() {
    let out = locus_gc(&["run", "--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for want in [
        "Exit status:",
        "  2  ",
        "  3  ",
        "SIGSEGV",
        "stack overflow",
    ] {
        assert!(help.contains(want), "want `{want}` in {help}");
    }
}

/// Both forms of every lowered program pass LLVM's own verifier.
#[test]
fn lowered_modules_pass_opt_verify() {
    let tmp = TempDir::new("gc-verify");
    for p in programs() {
        for intermediate in [false, true] {
            let out_path = tmp.path(&format!("{}-{intermediate}.ll", stem(&p)));
            let mut args = vec!["lower", path_str(&p), "-o", path_str(&out_path)];
            if intermediate {
                args.push("--intermediate");
            }
            let out = locus_gc(&args);
            assert!(
                out.status.success(),
                "{}: {}",
                p.display(),
                text(&out.stderr)
            );
            run_ok(
                "opt-19",
                &["-passes=verify", "-disable-output", path_str(&out_path)],
            );
            let lowered = std::fs::read_to_string(&out_path).unwrap_or_else(|e| panic!("{e}"));
            if intermediate {
                assert!(lowered.contains("@julia.push_gc_frame("), "{}", p.display());
            } else {
                assert!(
                    !lowered.contains("call void @julia.push_gc_frame("),
                    "{}",
                    p.display()
                );
                assert!(
                    lowered.contains("@locus_gc_get_pgcstack()"),
                    "{}",
                    p.display()
                );
                assert!(!lowered.contains("\"jl_roots\"("), "{}", p.display());
                assert!(
                    !lowered.contains("call ptr addrspace(10) (ptr, ...) @julia.call("),
                    "{}",
                    p.display()
                );
            }
        }
    }
}

#[test]
fn bad_input_is_one_line_and_status_1() {
    let tmp = TempDir::new("gc-bad");
    let bad = tmp.path("bad.ll");
    std::fs::write(&bad, "define i64 @main() {\n  ret i64 %nope\n}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    for sub in ["lower", "run"] {
        let out = locus_gc(&[sub, path_str(&bad)]);
        assert_eq!(out.status.code(), Some(1), "{sub}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!("locus: {}: ", bad.display())),
            "{err}"
        );
        assert!(!err.contains("panicked"));
    }
    let no_main = tmp.path("no_main.ll");
    std::fs::write(&no_main, "define i32 @main() {\n  ret i32 0\n}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let out = locus_gc(&["run", path_str(&no_main)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("i64 ()"),
        "{}",
        text(&out.stderr)
    );
}

/// The report says why each value is rooted: a value passed as CalleeRooted is not rooted
/// during that call (the callee roots it, as in Julia) even when it is used later, a value
/// live across an allocation is, and a dead value's slot is nulled.
#[test]
fn report_explains_the_roots() {
    let p = programs()
        .into_iter()
        .find(|p| p.ends_with("callee_rooted.ll"))
        .unwrap_or_else(|| panic!("no callee_rooted.ll"));
    let out = locus_gc(&["lower", "--report", path_str(&p)]);
    assert!(out.status.success());
    let report = text(&out.stderr);
    let expected = "\
function @main: 1 slot(s), at most 1 value(s) rooted at one safepoint
  safepoint 0: %o = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
    nothing rooted
  safepoint 1: %a = call i64 @locus_gc_callee_rooted_read(ptr addrspace(12) %o.c, i64 0)
    nothing rooted
  safepoint 2: %junk = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
    %o -> slot 0 (stored just before)
  safepoint 3: %b = call i64 @locus_gc_callee_rooted_read(ptr addrspace(12) %o.c2, i64 0)
    nothing rooted
    slot 0 nulled (its value is dead)
  safepoint 4: %p = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
    nothing rooted
  safepoint 5: %c = call i64 @locus_gc_callee_rooted_read(ptr addrspace(12) %p.c, i64 0)
    nothing rooted
";
    assert_eq!(report, expected);
    // With -o the module goes to the file and the report to standard output.
    let tmp = TempDir::new("gc-report");
    let out_path = tmp.path("lowered.ll");
    let out = locus_gc(&["lower", "--report", path_str(&p), "-o", path_str(&out_path)]);
    assert_eq!(text(&out.stdout), expected);
}

/// Bitcode in, bitcode out: `llvm-as-19` makes the input, `llvm-dis-19` reads the output,
/// and the result runs the same.
#[test]
fn bitcode_in_and_out() {
    let tmp = TempDir::new("gc-bitcode");
    let p = programs()
        .into_iter()
        .find(|p| p.ends_with("list_sum.ll"))
        .unwrap_or_else(|| panic!("no list_sum.ll"));
    let input = tmp.path("list_sum.bc");
    run_ok("llvm-as-19", &[path_str(&p), "-o", path_str(&input)]);
    let lowered = tmp.path("lowered.bc");
    let out = locus_gc(&["lower", path_str(&input), "-o", path_str(&lowered)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(&lowered).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bytes.get(..4), Some(&b"BC\xc0\xde"[..]), "not bitcode");
    let dis = text(&run_ok("llvm-dis-19", &[path_str(&lowered), "-o", "-"]));
    assert!(dis.contains("@locus_gc_get_pgcstack()"), "{dis}");
    let out = locus_gc(&["run", "--stress", path_str(&input)]);
    assert_eq!(text(&out.stdout).trim(), "5050", "{}", text(&out.stderr));
}

/// `--passes PIPELINE` (opt's syntax) runs LLVM's optimizer on the lowered module in
/// process: `gc run` then checks the frames the optimizer left, and `gc lower` writes what
/// `| opt-19 -passes=PIPELINE` would. A module whose safepoint still promises not to read
/// memory (lowered before the lowering took such promises away) loses its frame store to
/// -O2 and is caught as a dangling reference; a bad pipeline is one line and status 1.
#[test]
fn passes_run_the_optimizer_on_the_lowered_module() {
    let argmem = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/programs/safepoint_argmem_read.ll");
    for level in ["default<O1>", "default<O2>", "default<O3>"] {
        let out = locus_gc(&["run", "--stress", "--passes", level, path_str(&argmem)]);
        assert_eq!(
            (out.status.code(), text(&out.stdout).trim()),
            (Some(0), "42"),
            "{level}: {}",
            text(&out.stderr)
        );
    }
    let out = locus_gc(&["lower", "--passes", "default<O2>", path_str(&argmem)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let optimized = text(&out.stdout);
    assert!(
        optimized.contains("store ptr addrspace(10) %o, ptr") && !optimized.contains("alloca i64"),
        "{optimized}"
    );

    // The lowered module as it was handed on before: the promise still on the callee,
    // without the "julia.safepoint" attribute that makes the lowering take it away (and
    // without the inlined allocation fast path, whose loads through the chain head would
    // keep the frame store alive anyway); its own call promises the same, or the lowering
    // would see a function that calls a safepoint and take the promise away again.
    let out = locus_gc(&["lower", "--inline-alloc", "never", path_str(&argmem)]);
    let unfixed = text(&out.stdout)
        .replace(
            r#"attributes #0 = { noinline "julia.safepoint" }"#,
            "attributes #0 = { noinline memory(argmem: read) }",
        )
        .replace(
            "call void @locus_gc_safepoint()\n",
            "call void @locus_gc_safepoint() #0\n",
        );
    assert!(unfixed.contains("memory(argmem: read)"), "{unfixed}");
    let tmp = TempDir::new("gc-passes");
    let file = tmp.path("unfixed.ll");
    std::fs::write(&file, unfixed).unwrap_or_else(|e| panic!("{e}"));
    let out = locus_gc(&["run", "--stress", path_str(&file)]);
    assert_eq!(text(&out.stdout).trim(), "42", "{}", text(&out.stderr));
    let out = locus_gc(&[
        "run",
        "--stress",
        "--passes",
        "default<O2>",
        path_str(&file),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("locus: gc: dangling reference"),
        "{}",
        text(&out.stderr)
    );

    for sub in ["lower", "run"] {
        let out = locus_gc(&[sub, "--passes", "no-such-pass", path_str(&argmem)]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{sub}: {err}");
        assert!(
            err.starts_with("locus: ")
                && err.contains("cannot run the pass pipeline `no-such-pass`")
                && err.lines().count() == 1,
            "{sub}: {err}"
        );
    }
}

/// Statepoint roots and the moving collector, from the command line: `gc lower --roots
/// statepoint` writes a module opt-19 verifies and `gc run` runs as it is; and a relocation dropped
/// from it (each use of the relocated value given the value from before the call) either
/// changes nothing (the object was pinned, or no collection moved it before the use) or
/// ends the run with status 2 and one line naming the object moved away.
#[test]
fn statepoint_roots_and_a_dropped_relocation() {
    let tmp = TempDir::new("gc-statepoint");
    let mut caught = 0;
    let mut tried = 0;
    for p in programs() {
        let (rewritten, dropped) = lower_and_drop_first_relocation(LOCUS, &p, &tmp.0);
        let verdict = Command::new("opt-19")
            .args(["-passes=verify", "-disable-output", path_str(&rewritten)])
            .output()
            .unwrap_or_else(|e| panic!("opt-19: {e}"));
        assert!(
            verdict.status.success(),
            "{}: {}",
            p.display(),
            text(&verdict.stderr)
        );
        // The first relocation of each program: enough to see the oracle fail (every
        // program's result under statepoint roots is checked by locus-gc's tests).
        if let Some((lhs, edited)) = dropped {
            let out = locus_gc(&[
                "run",
                "--roots",
                "statepoint",
                "--moving",
                "--stress",
                path_str(&edited),
            ]);
            let err = text(&out.stderr);
            tried += 1;
            match out.status.code() {
                Some(2) => {
                    assert!(
                        err.starts_with("locus: gc: dangling reference")
                            && err.contains("object #")
                            && err.lines().count() == 1,
                        "{} without {lhs}: {err}",
                        p.display()
                    );
                    caught += 1;
                }
                Some(0) => {}
                other => panic!("{} without {lhs}: status {other:?}, {err}", p.display()),
            }
        }
    }
    println!("dropped relocations caught as dangling references: {caught} of {tried}");
    assert!(
        caught * 2 > tried,
        "only {caught} of {tried} dropped relocations caught"
    );
}

#[test]
fn moving_needs_statepoint_roots() {
    let p = programs().into_iter().next().unwrap_or_default();
    let out = locus_gc(&["run", "--moving", path_str(&p)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--moving needs --roots statepoint"),
        "{}",
        text(&out.stderr)
    );
    let help = locus_gc(&["run", "--help"]);
    let help = text(&help.stdout);
    assert!(
        help.contains("--roots <HOW>") && help.contains("--moving"),
        "{help}"
    );
}

/// `--write-barriers`: `gc lower` places the lowering's barriers by default and with
/// `insert`, only the frontend's with `frontend`, on both root strategies; a bad value is
/// clap's usage error.
#[test]
fn write_barriers_option_chooses_who_places_them() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/filecheck/write_barriers_insert.ll");
    let file = file.to_str().expect("utf-8 path");
    let barriers = |roots: &str, who: Option<&str>| {
        let mut args = vec!["lower", "--roots", roots, file];
        if let Some(who) = who {
            args.extend(["--write-barriers", who]);
        }
        let out = locus_gc(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("call void @locus_gc_write_barrier("))
            .count()
    };
    for roots in ["frames", "statepoint"] {
        let (default, insert, frontend) = (
            barriers(roots, None),
            barriers(roots, Some("insert")),
            barriers(roots, Some("frontend")),
        );
        // The fixture's frontend places one barrier; `insert` (the default) adds the
        // lowering's; `auto` adds none in a function with a frontend barrier.
        assert!(
            insert > frontend && frontend >= 1,
            "{roots}: {insert} {frontend}"
        );
        assert_eq!(default, insert, "{roots}");
        assert!(barriers(roots, Some("auto")) >= frontend, "{roots}");
    }
    let out = locus_gc(&["lower", "--write-barriers", "sometimes", file]);
    assert_eq!(out.status.code(), Some(2));
}

/// Under an address-space limit MMTk cannot start with (`ulimit -v 4 GiB`; it reserves
/// terabytes up front, and panicked inside MMTk before): the default collector gives way
/// to the runtime's own and the program runs; a plan named on the command line is refused
/// with one `locus: gc:` line and status 1.
#[test]
fn mmtk_under_ulimit_v() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/programs/tree.ll");
    let under_limit = |extra: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v 4194304 && exec \"$0\" gc run {extra} \"$1\""
            ))
            .arg(LOCUS)
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("sh: {e}"))
    };
    let out = under_limit("");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        expected_value(&file)
    );
    let out = under_limit("--collector mmtk:immix");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ulimit -v"), "{stderr}");
}
