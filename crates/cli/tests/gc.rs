//! `locus gc`: the dropped-root oracle, lowered modules checked by `opt-19 -passes=verify`,
//! the report, and errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn programs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/programs");
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

/// The number of stores the lowering plans, from `--report`.
fn planned_stores(program: &Path) -> usize {
    let out = locus_gc(&["lower", "--report", path_str(program)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stderr)
        .lines()
        .filter(|l| l.contains("(stored just before)"))
        .count()
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
        let expected = std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("; expect: ").map(|v| v.trim().to_string()))
            })
            .unwrap_or_else(|| panic!("{}: no expect line", p.display()));
        assert_eq!(
            stdout.lines().next(),
            Some(expected.as_str()),
            "{}",
            p.display()
        );
        assert!(stdout.contains("collections: "), "{stdout}");
    }
}

/// The oracle can fail: with any one planned root store left out, the stress collector
/// must end the run with a dangling reference (exit status 2) for at least one store of
/// every program; the counts are printed.
#[test]
fn a_dropped_root_is_caught_as_a_dangling_reference() {
    let mut summary = Vec::new();
    for p in programs() {
        let stores = planned_stores(&p);
        let mut caught = 0;
        for k in 0..stores {
            let n = k.to_string();
            let out = locus_gc(&["run", "--stress", "--drop-store", &n, path_str(&p)]);
            let err = text(&out.stderr);
            if out.status.code() == Some(2) && err.starts_with("locus: gc: dangling reference") {
                caught += 1;
            }
        }
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        summary.push(format!("{name}: {caught}/{stores}"));
        assert!(
            stores > 0 && caught > 0,
            "{}: none of {stores} dropped stores was caught",
            p.display()
        );
    }
    println!(
        "dropped roots caught as dangling references: {}",
        summary.join(", ")
    );
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

/// The report says why each value is rooted: a value passed only as CalleeRooted is never in
/// the frame, a value live across an allocation is, and a dead value's slot is nulled.
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
    %o -> slot 0 (stored just before)
  safepoint 2: %junk = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
    %o -> slot 0 (already in its slot)
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
