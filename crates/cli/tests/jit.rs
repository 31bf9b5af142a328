//! `locus jit run`: compiles a module in process, calls `i64 NAME()`, prints the result and
//! with `--stats` the stack map records captured; bad entries and unresolved symbols are
//! errors with exit status 1.

// The runtime's trampolines are x86-64 assembly; elsewhere `jit run` refuses.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::*;

/// `@main` computes 6 * 7 through `@mul`; each has a stack map, `@mul` in a section of its
/// own, and a patch point with no target (nops) in `@main`.
const MODULE: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)
declare void @llvm.experimental.patchpoint.void(i64, i32, ptr, i32, ...)

define i64 @mul(i64 %a, i64 %b) section ".text.cold" {
  %p = mul i64 %a, %b
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 1, i32 0, i64 %p, i64 %a)
  ret i64 %p
}

define i64 @main() {
  %r = call i64 @mul(i64 6, i64 7)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 2, i32 8, i64 %r)
  call void (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.void(i64 3, i32 16, ptr null, i32 0, i64 %r)
  ret i64 %r
}

define i64 @minus() {
  ret i64 -5
}
"#;

fn write_module(dir: &TempDir, name: &str, text: &str) -> String {
    let path = dir.path(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path_str(&path).to_owned()
}

fn locus_jit(args: &[&str]) -> Output {
    run(LOCUS, &[&["jit", "run"], args].concat())
}

fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}, stderr: {}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn runs_the_entry_and_prints_its_result() {
    let dir = TempDir::new("jit-run");
    let file = write_module(&dir, "six_times_seven.ll", MODULE);
    assert_eq!(stdout_ok(&locus_jit(&[&file])), "42\n");
    assert_eq!(stdout_ok(&locus_jit(&[&file, "--entry", "minus"])), "-5\n");
}

#[test]
fn stats_count_the_stack_map_records() {
    let dir = TempDir::new("jit-stats");
    let file = write_module(&dir, "six_times_seven.ll", MODULE);
    assert_eq!(
        stdout_ok(&locus_jit(&[&file, "--stats"])),
        "42\nrecords: 3\npatches: 0\nmisses: 0\nhits: 0\ndeopts: 0\n"
    );
    let plain = write_module(&dir, "plain.ll", "define i64 @main() {\n  ret i64 7\n}\n");
    assert_eq!(
        stdout_ok(&locus_jit(&["--stats", &plain])),
        "7\nrecords: 0\npatches: 0\nmisses: 0\nhits: 0\ndeopts: 0\n"
    );
}

#[test]
fn reads_standard_input_and_calls_libc() {
    let ir = r#"
declare i64 @strlen(ptr)
@s = private constant [12 x i8] c"hello, jit!\00"
define i64 @main() {
  %n = call i64 @strlen(ptr @s)
  ret i64 %n
}
"#;
    let mut child = Command::new(LOCUS)
        .args(["jit", "run", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(ir.as_bytes()))
        .transpose()
        .unwrap_or_else(|e| panic!("cannot write to locus: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("locus did not finish: {e}"));
    assert_eq!(stdout_ok(&out), "11\n");
}

#[test]
fn bad_entries_and_symbols_are_errors() {
    let dir = TempDir::new("jit-errors");
    let file = write_module(&dir, "six_times_seven.ll", MODULE);
    let cases: [(&[&str], &str); 3] = [
        (&["--entry", "nothing"], "no function @nothing is defined"),
        (&["--entry", "mul"], "must be `i64 @mul()`"),
        (
            &["--entry", "llvm.experimental.stackmap"],
            "no function @llvm.experimental.stackmap is defined",
        ),
    ];
    for (args, message) in cases {
        let out = locus_jit(&[&[file.as_str()], args].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with("locus: ") && stderr.contains(message),
            "{args:?}: {stderr}"
        );
    }
    let unresolved = write_module(
        &dir,
        "unresolved.ll",
        "declare i64 @locus_no_such_symbol()\ndefine i64 @main() {\n  %r = call i64 @locus_no_such_symbol()\n  ret i64 %r\n}\n",
    );
    let out = locus_jit(&[&unresolved]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("locus_no_such_symbol"));
    let broken = write_module(&dir, "broken.ll", "define i64 @main( {\n");
    let out = locus_jit(&[&broken]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("broken.ll"),
        "{}",
        text(&out.stderr)
    );
}

/// `--invalidate FUNCTION` patches the function's stack map shadows to call the deopt entry
/// before the run: the call is finished by Locus's interpreter from the record's live
/// values, with the compiled code's result; `--stats` counts the patch and the deopt.
#[test]
fn invalidated_functions_deoptimize_to_the_same_result() {
    let t = TempDir::new("jit-deopt");
    let ll = t.path("deopt.ll");
    std::fs::write(
        &ll,
        "declare void @llvm.experimental.stackmap(i64, i32, ...)\n\
         declare i64 @locus_poll(i64)\n\
         define i64 @compute(i64 %a, i64 %b) {\n\
         \x20 %t = mul i64 %a, 3\n\
         \x20 %u = add i64 %a, 11\n\
         \x20 %p = call i64 @locus_poll(i64 %t)\n\
         \x20 call void (i64, i32, ...) @llvm.experimental.stackmap(i64 100, i32 8, i64 %p, i64 %u, i64 %b)\n\
         \x20 %v = add i64 %p, %b\n\
         \x20 %r = mul i64 %v, %u\n\
         \x20 ret i64 %r\n\
         }\n\
         define i64 @main() {\n\
         \x20 %r = call i64 @compute(i64 5, i64 9)\n\
         \x20 ret i64 %r\n\
         }\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["jit", "run", path_str(&ll), "--stats"];
        args.extend(extra);
        let out = Command::new(LOCUS).args(&args).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).to_string()
    };
    // (5 * 3 + 9) * (5 + 11)
    assert_eq!(
        run(&[]),
        "384\nrecords: 1\npatches: 0\nmisses: 0\nhits: 0\ndeopts: 0\n"
    );
    assert_eq!(
        run(&["--invalidate", "compute"]),
        "384\nrecords: 1\npatches: 1\nmisses: 0\nhits: 0\ndeopts: 1\n"
    );
}
