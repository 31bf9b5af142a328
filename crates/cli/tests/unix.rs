//! `locus` as a Unix tool (issue 13, section 3): a reader that stops early or a closed
//! stderr ends it quietly; an endless or huge input fails with `locus: FILE: ...` and
//! bounded memory; `-` is standard input; options may follow positional arguments.

mod common;

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::*;

fn program(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/programs")
        .join(name)
        .display()
        .to_string()
}

fn locus(args: &[&str]) -> Output {
    Command::new(LOCUS)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `locus tour | head -c 100`: the tour ends when its reader does, with no error line and
/// no panic (by SIGPIPE, as `cat` would; 0 if it had already finished).
#[test]
fn a_reader_that_stops_early_ends_it_quietly() {
    let mut child = Command::new(LOCUS)
        .arg("tour")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    let mut first = [0u8; 100];
    if let Some(out) = child.stdout.as_mut() {
        out.read_exact(&mut first)
            .unwrap_or_else(|e| panic!("no output: {e}"));
    }
    drop(child.stdout.take());
    let mut err = String::new();
    if let Some(e) = child.stderr.as_mut() {
        e.read_to_string(&mut err).unwrap_or_default();
    }
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        status.success() || status.signal() == Some(libc_sigpipe()),
        "status {status:?}, stderr: {err}"
    );
    assert!(
        !err.contains("Broken pipe") && !err.contains("panicked"),
        "stderr: {err}"
    );
}

/// SIGPIPE's number on Linux (and every Unix Locus runs on).
fn libc_sigpipe() -> i32 {
    13
}

/// An error written to a stderr whose reader is gone: no panic (exit 101 before).
#[test]
fn a_closed_stderr_is_no_panic() {
    let mut child = Command::new(LOCUS)
        .args(["gc", "verify", "/nonexistent/file.ll"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    drop(child.stderr.take());
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        status.code() == Some(1) || status.signal() == Some(libc_sigpipe()),
        "status {status:?}"
    );
}

/// Every subcommand that reads a file stops at the input limit: /dev/zero (endless) fails
/// with one `locus: ...: larger than the input limit` line and status 1.
#[test]
fn endless_inputs_fail_at_the_limit() {
    let zero = "/dev/zero";
    let small = ["--max-input-bytes", "65536"];
    let cases: Vec<Vec<&str>> = vec![
        vec!["stackmap", zero],
        vec!["gc", "verify", zero],
        vec!["gc", "lower", zero],
        vec!["gc", "run", zero],
        vec!["sme", "check", zero],
        vec!["dwarf", "vars", zero, "--pc", "0"],
        vec!["dwarf", "eval", "DW_OP_lit1", "--context", zero],
        vec!["memref", "compile", zero, "-o", "/nonexistent/never.so"],
    ];
    for case in &cases {
        let args: Vec<&str> = case.iter().chain(small.iter()).copied().collect();
        let out = locus(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with("locus: ")
                && err.contains("larger than the input limit of 65536 bytes")
                && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    // The default limit holds too, for a huge sparse file, refused without reading it.
    let tmp = TempDir::new("unix-huge");
    let huge = tmp.path("huge.ll");
    let file = std::fs::File::create(&huge).unwrap_or_else(|e| panic!("{e}"));
    file.set_len(1 << 30).unwrap_or_else(|e| panic!("{e}"));
    let out = locus(&["gc", "verify", path_str(&huge)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("larger than the input limit of 268435456 bytes"),
        "{}",
        text(&out.stderr)
    );
}

/// `-` reads standard input wherever a file is read.
#[test]
fn dash_is_standard_input() {
    let ir = std::fs::read(program("tree.ll")).unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(LOCUS)
        .args(["gc", "run", "--stress", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&ir).unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "511");
}

/// Options after positional arguments are options, not more of the expression.
#[test]
fn options_may_follow_positional_arguments() {
    let out = locus(&[
        "dwarf",
        "eval",
        "DW_OP_lit8 DW_OP_stack_value",
        "--read",
        "8",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("\"read\":\"0800000000000000\""),
        "{}",
        text(&out.stdout)
    );
    // Negative numbers in the expression are still operands.
    let out = locus(&[
        "dwarf",
        "eval",
        "DW_OP_consts",
        "-5",
        "DW_OP_stack_value",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("fbffffffffffffff"),
        "{}",
        text(&out.stdout)
    );
    // A global option after the subcommand's arguments.
    let out = locus(&[
        "gc",
        "verify",
        &program("tree.ll"),
        "--max-input-bytes",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(1));
}
