//! `locus` as a Unix tool (issue 13, section 3): a reader that stops early or a closed
//! stderr ends it quietly; an endless or huge input fails with `locus: FILE: ...` and
//! bounded memory; `-` is standard input; options may follow positional arguments.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::*;

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

/// Runs `locus ARGS` with standard output on /dev/full (every write: ENOSPC).
fn locus_to_full_disk(args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap_or_else(|e| panic!("/dev/full: {e}"));
    Command::new(LOCUS)
        .args(args)
        .stdout(full)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

/// A full disk on standard output or on `-o` is an error naming it, status 1 (was:
/// status 0 with the output lost, for `--help` and whatever was buffered at exit).
#[test]
fn a_full_disk_is_an_error() {
    let tree = program("tree.ll");
    for args in [
        &["gc", "run", tree.as_str()][..],
        &["gc", "lower", tree.as_str()],
        &["dwarf", "eval", "DW_OP_lit1"],
        &["tour"],
        &["--help"],
        &["jit", "run", "--help"],
    ] {
        let out = locus_to_full_disk(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(
            text(&out.stderr).contains("locus: standard output: No space left on device"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = locus(&["gc", "lower", &tree, "-o", "/dev/full"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).starts_with("locus: /dev/full: No space left on device"),
        "{}",
        text(&out.stderr)
    );
}

/// A child tool that exits before reading its input (here an `mlir-opt-19` that fails at
/// once, first on PATH, given 750 KB, more than a pipe holds) is an error of that tool,
/// status 1; it was a silent death of Locus by SIGPIPE.
#[test]
fn a_child_tool_that_exits_early_is_an_error() {
    let dir = TempDir::new("early-exit");
    let bin = dir.path("bin");
    std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("{e}"));
    let tool = bin.join("mlir-opt-19");
    std::fs::write(&tool, "#!/bin/sh\necho 'exits early' >&2\nexit 1\n")
        .unwrap_or_else(|e| panic!("{e}"));
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&tool)
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut kernel = String::from("func.func @main() {\n");
    for i in 0..20000 {
        kernel.push_str(&format!("  %c{i} = arith.constant {i} : i64\n"));
    }
    kernel.push_str("  return\n}\n");
    let source = dir.path("big.mlir");
    std::fs::write(&source, kernel).unwrap_or_else(|e| panic!("{e}"));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(LOCUS)
        .args(["memref", "run", path_str(&source)])
        .env("PATH", path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).starts_with("locus: mlir-opt-19 failed: exits early"),
        "{}",
        text(&out.stderr)
    );
}

/// A FIFO named twice is read once, both arguments getting its bytes (the second open
/// waited for a second writer forever before).
#[test]
fn a_fifo_named_twice_is_read_once() {
    let dir = TempDir::new("fifo-twice");
    let fifo = dir.path("input");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap_or_else(|e| panic!("mkfifo: {e}"));
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let _ = std::fs::write(&fifo, b"not an object");
        })
    };
    let out = Command::new("timeout")
        .args(["20", LOCUS, "stackmap", path_str(&fifo), path_str(&fifo)])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    let _ = writer.join();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let shown = path_str(&fifo);
    assert_eq!(
        text(&out.stderr),
        format!("locus: {shown}: Could not read file magic\nlocus: {shown}: Could not read file magic\n")
    );
}

/// Damaged bitcode and IR nested too deep end with a `locus:` line and status 1: LLVM's
/// reader ran out of memory on a size a damaged record claims (two bits flipped in
/// `llvm-as-19`'s bitcode of a fixture: "LLVM ERROR: out of memory", SIGABRT, before), and
/// its parser overflowed the stack on 100 000 nested structs (SIGABRT by Rust's overflow
/// handler, before). Then 120 more damaged copies (bits flipped, cut short, bytes
/// repeated): each one parses or is refused in one line, none ends by a signal.
#[test]
fn damaged_bitcode_and_deep_nesting_are_refused_in_one_line() {
    let dir = TempDir::new("damaged-bitcode");
    let good = dir.path("good.bc");
    let made = Command::new("llvm-as-19")
        .arg(program("julia_memory.ll"))
        .arg("-o")
        .arg(&good)
        .status()
        .unwrap_or_else(|e| panic!("llvm-as-19: {e}"));
    assert!(made.success());
    let bitcode = std::fs::read(&good).unwrap_or_else(|e| panic!("{e}"));
    let refused = |bytes: &[u8], what: &str| {
        let path = dir.path("damaged.bc");
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
        let out = locus(&["gc", "verify", path_str(&path)]);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{what}: {:?} {}",
            out.status,
            text(&out.stderr)
        );
        if out.status.code() == Some(1) {
            let err = text(&out.stderr);
            assert!(err.starts_with("locus: "), "{what}: {err}");
        }
        out
    };
    let mut flipped = bitcode.clone();
    assert!(flipped.len() > 1816, "{} bytes", flipped.len());
    flipped[258] ^= 0x40;
    flipped[1816] ^= 0x10;
    let out = refused(&flipped, "the out-of-memory case");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "locus: LLVM ran out of memory (Allocation failed): an input claims more than can be \
         allocated (a damaged file?)\n"
    );
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for case in 0..120 {
        let mut bytes = bitcode.clone();
        match case % 3 {
            0 => {
                for _ in 0..1 + next(4) {
                    let at = next(bytes.len());
                    bytes[at] ^= 1 << next(8);
                }
            }
            1 => bytes.truncate(next(bytes.len())),
            _ => {
                let (at, from) = (next(bytes.len()), next(bytes.len()));
                let piece: Vec<u8> = bytes[from..(from + next(64)).min(bytes.len())].to_vec();
                bytes.splice(at..at, piece);
            }
        }
        refused(&bytes, &format!("case {case}"));
    }
    let deep = dir.path("deep.ll");
    let nested = format!(
        "@g = global {}i8{} zeroinitializer\n",
        "{".repeat(100_000),
        "}".repeat(100_000)
    );
    std::fs::write(&deep, nested).unwrap_or_else(|e| panic!("{e}"));
    for args in [["gc", "verify"], ["jit", "run"], ["sme", "check"]] {
        let out = locus(&[args[0], args[1], path_str(&deep)]);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(
            text(&out.stderr)
                .contains("deep.ll:1:1013: error: brackets nested more than 1000 deep"),
            "{}",
            text(&out.stderr)
        );
    }
}

/// Compiles C `source` with `clang-19 -g` and `flags` into `dir/name`.
fn compile_c(dir: &TempDir, name: &str, source: &str, flags: &[&str]) -> std::path::PathBuf {
    let c = dir.path(&format!("{name}.c"));
    std::fs::write(&c, source).unwrap_or_else(|e| panic!("{e}"));
    let exe = dir.path(name);
    let built = Command::new("clang-19")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&c)
        .args(flags)
        .status()
        .unwrap_or_else(|e| panic!("clang-19: {e}"));
    assert!(built.success());
    exe
}

/// `dwarf vars` of another build than the process runs is refused, naming both build IDs
/// (or, without build IDs, the first bytes that differ); it printed the other build's
/// variables at the process's addresses before. The right binary is still read.
#[test]
fn a_binary_that_is_not_the_target_s_is_refused() {
    let dir = TempDir::new("other-build");
    let program = |g: u32| {
        format!("#include <unistd.h>\nint g = {g};\nint twice(int x) {{ return {g} * x; }}\nint main() {{ sleep(30); return twice(g); }}\n")
    };
    for (tag, flags) in [("id", &[][..]), ("noid", &["-Wl,--build-id=none"][..])] {
        let ran = compile_c(&dir, &format!("ran-{tag}"), &program(5), flags);
        let other = compile_c(&dir, &format!("other-{tag}"), &program(6), flags);
        let mut child = Command::new(&ran).spawn().unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let pid = child.id().to_string();
        let wrong = locus(&["dwarf", "vars", path_str(&other), "--pid", &pid]);
        let right = locus(&["dwarf", "vars", path_str(&ran), "--pid", &pid]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(wrong.status.code(), Some(1), "{tag}: {wrong:?}");
        let err = text(&wrong.stderr);
        let expected = if tag == "id" {
            "not the file the target ran: its build ID "
        } else {
            "not the file the target ran: it has no build ID, and its bytes at file offset 0x"
        };
        assert!(err.contains(expected), "{tag}: {err}");
        assert!(right.status.success(), "{tag}: {right:?}");
    }
}

/// `gc run` and `memref run` of a program that never ends: `--timeout` ends it with one
/// `locus:` line and exit status 124 (it ran until killed before); the help documents it.
#[test]
fn timeouts_end_endless_runs() {
    let dir = TempDir::new("timeouts");
    let ir = dir.path("loop.ll");
    std::fs::write(
        &ir,
        "define i64 @main() {\nentry:\n  br label %l\nl:\n  br label %l\n}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kernel = dir.path("loop.mlir");
    std::fs::write(
        &kernel,
        "func.func private @getpid() -> i32\nfunc.func @main() {\n  scf.while : () -> () {\n    \
         %p = func.call @getpid() : () -> i32\n    %z = arith.constant 0 : i32\n    \
         %t = arith.cmpi ne, %p, %z : i32\n    scf.condition(%t)\n  } do {\n    scf.yield\n  }\n  \
         return\n}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (sub, file, seconds) in [("gc", &ir, "0.5"), ("memref", &kernel, "3")] {
        let started = std::time::Instant::now();
        let out = Command::new("timeout")
            .args([
                "120",
                LOCUS,
                sub,
                "run",
                path_str(file),
                "--timeout",
                seconds,
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
        assert_eq!(out.status.code(), Some(124), "{sub}: {out:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(100));
        assert_eq!(
            text(&out.stderr),
            format!(
                "locus: {}: not finished after {seconds} seconds (--timeout): ended, exit \
                 status 124\n",
                path_str(file)
            ),
            "{sub}"
        );
        let help = locus(&[sub, "run", "--help"]);
        assert!(text(&help.stdout).contains("--timeout <SECONDS>"), "{sub}");
    }
}
