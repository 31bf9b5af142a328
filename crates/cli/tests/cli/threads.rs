//! Every thread of a run gets the alternate signal stack, not only those the program makes
//! by calling `pthread_create` by name: threads made through `dlsym(RTLD_DEFAULT,
//! "pthread_create")` and threads a shared library makes (MLIR's async runtime's thread
//! pool, a library of the test's own) overflow their stack with a `locus:` line and exit
//! status 3, not a silent SIGSEGV. And a `memref run` kernel whose
//! reader stops early ends as `cat` does (SIGPIPE, nothing on standard error).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Output, Stdio};

use crate::common::*;

/// The `locus:` line of a stack overflow.
const OVERFLOW: &str = "locus: SIGSEGV (stack overflow) at address 0x";

fn assert_overflow_reported(what: &str, out: &Output) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{what}: {out:?}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("locus:")).collect();
    assert_eq!(lines.len(), 1, "{what}: {stderr}");
    assert!(lines[0].starts_with(OVERFLOW), "{what}: {stderr}");
}

/// The binary defines `pthread_create` in its dynamic symbol table (as llvm-readobj-19
/// reads it), so that shared libraries and `dlsym` find it before the C library's.
#[test]
fn locus_exports_pthread_create() {
    let out = run("llvm-readobj-19", &["--dyn-syms", LOCUS]);
    assert!(out.status.success(), "{out:?}");
    let syms = text(&out.stdout);
    let entry = syms
        .split("Symbol {")
        .find(|s| s.contains("Name: pthread_create"))
        .unwrap_or_else(|| panic!("no pthread_create in the dynamic symbols"));
    assert!(
        !entry.contains("Section: Undefined"),
        "pthread_create is not defined by locus: {entry}"
    );
    assert!(entry.contains("Type: Function"), "{entry}");
}

/// A program that takes `pthread_create` from `dlsym(RTLD_DEFAULT, ...)` (a library's way)
/// and overflows the stack of the thread it makes.
#[cfg(target_arch = "x86_64")]
#[test]
fn jit_run_thread_made_through_dlsym_overflow_is_reported() {
    let t = TempDir::new("threads-dlsym");
    let ll = t.path("dlsym_thread.ll");
    std::fs::write(
        &ll,
        r#"@name = private constant [15 x i8] c"pthread_create\00"
declare ptr @dlsym(ptr, ptr)
declare i32 @pthread_join(i64, ptr)
define i64 @rec(i64 %n) {
  %a = alloca [64 x i64]
  store volatile i64 %n, ptr %a
  %m = add i64 %n, 1
  %r = call i64 @rec(i64 %m)
  %s = add i64 %r, 1
  ret i64 %s
}
define ptr @body(ptr %x) {
  %r = call i64 @rec(i64 0)
  ret ptr null
}
define i64 @main() {
  %t = alloca i64
  %create = call ptr @dlsym(ptr null, ptr @name)
  %c = call i32 %create(ptr %t, ptr null, ptr @body, ptr null)
  %tid = load i64, ptr %t
  %j = call i32 @pthread_join(i64 %tid, ptr null)
  ret i64 0
}
"#,
    )
    .unwrap();
    let out = run(LOCUS, &["jit", "run", path_str(&ll)]);
    assert_overflow_reported("jit run", &out);
}

/// A shared library (clang-19) whose function makes a thread that overflows its stack.
fn spawning_library(t: &TempDir) -> std::path::PathBuf {
    let c = t.path("spawn.c");
    std::fs::write(
        &c,
        "#include <pthread.h>\n\
         static long rec(long n) { volatile char pad[256]; pad[0] = (char)n; return rec(n + 1) + pad[0]; }\n\
         static void *body(void *x) { (void)x; rec(0); return 0; }\n\
         void spawn_overflow(void) { pthread_t t; if (pthread_create(&t, 0, body, 0) == 0) pthread_join(t, 0); }\n",
    )
    .unwrap();
    let so = t.path("libspawn.so");
    run_ok(
        "clang-19",
        &["-O0", "-shared", "-fPIC", "-o", path_str(&so), path_str(&c)],
    );
    so
}

/// A `memref run` kernel calling a function of a shared library that makes a thread, which
/// overflows its stack. (Without the binary's `pthread_create`, the library's thread has no
/// alternate stack and the kernel dies by SIGSEGV with nothing said.)
#[test]
fn memref_run_library_thread_overflow_is_reported() {
    let t = TempDir::new("threads-memref");
    let so = spawning_library(&t);
    let kernel = t.path("spawn.mlir");
    std::fs::write(
        &kernel,
        "func.func private @spawn_overflow()\n\
         func.func @main() {\n\
         \x20 call @spawn_overflow() : () -> ()\n\
         \x20 return\n\
         }\n",
    )
    .unwrap();
    let out = run(
        LOCUS,
        &[
            "memref",
            "run",
            path_str(&kernel),
            "--shared-lib",
            path_str(&so),
        ],
    );
    assert_overflow_reported("memref run", &out);
}

/// A `memref run` kernel whose `async.execute` region (run on a thread of MLIR 19's async
/// runtime, `libmlir_async_runtime.so`, which makes its thread pool itself) calls a
/// function that overflows the stack: one `locus:` line and exit 3, as on the main thread.
/// Lowered as MLIR's Async CPU tests lower it (async-to-async-runtime, reference counting,
/// convert-async-to-llvm before the usual pipeline).
#[test]
fn memref_run_async_runtime_thread_overflow_is_reported() {
    let t = TempDir::new("threads-async");
    let c = t.path("overflow.c");
    std::fs::write(
        &c,
        "static long rec(long n) { volatile char pad[256]; pad[0] = (char)n; return rec(n + 1) + pad[0]; }\n\
         void overflow(void) { rec(0); }\n",
    )
    .unwrap();
    let so = t.path("liboverflow.so");
    run_ok(
        "clang-19",
        &["-O0", "-shared", "-fPIC", "-o", path_str(&so), path_str(&c)],
    );
    let runtime = locus_memref::run::runner_utils_dir()
        .map(|dir| dir.join("libmlir_async_runtime.so"))
        .filter(|lib| lib.is_file())
        .unwrap_or_else(|| panic!("no libmlir_async_runtime.so beside the MLIR 19 runner utils"));
    let kernel = t.path("async.mlir");
    std::fs::write(
        &kernel,
        "func.func private @overflow()\n\
         func.func @main() {\n\
         \x20 %token = async.execute {\n\
         \x20   func.call @overflow() : () -> ()\n\
         \x20   async.yield\n\
         \x20 }\n\
         \x20 async.await %token : !async.token\n\
         \x20 return\n\
         }\n",
    )
    .unwrap();
    let out = run(
        LOCUS,
        &[
            "memref",
            "run",
            path_str(&kernel),
            "--pass",
            "async-to-async-runtime",
            "--pass",
            "func.func(async-runtime-ref-counting,async-runtime-ref-counting-opt)",
            "--pass",
            "convert-async-to-llvm",
            "--shared-lib",
            path_str(&runtime),
            "--shared-lib",
            path_str(&so),
        ],
    );
    assert_overflow_reported("memref run, async runtime thread", &out);
}

/// Runs `command` with its standard output a pipe whose reader closes it at once, after
/// reading `keep` bytes; returns how it ended and its standard error.
fn with_closed_stdout(mut command: Command, keep: usize) -> (ExitStatus, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = vec![0u8; keep];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    (out.status, text(&out.stderr))
}

/// A kernel printing 300 000 bytes to a reader that stops after 4: ended by SIGPIPE with
/// nothing on standard error, as `cat` of as many bytes is (the oracle), not looping on
/// failed writes and exiting 0 (SIGPIPE ignored, Rust's default).
#[test]
fn memref_run_kernel_writing_to_a_closed_pipe_ends_as_cat_does() {
    let t = TempDir::new("threads-sigpipe");
    let kernel = t.path("print.mlir");
    std::fs::write(
        &kernel,
        "func.func private @printU64(i64)\n\
         func.func private @printNewline()\n\
         func.func @main() {\n\
         \x20 %c0 = arith.constant 0 : index\n\
         \x20 %c1 = arith.constant 1 : index\n\
         \x20 %n = arith.constant 30000 : index\n\
         \x20 %v = arith.constant 123456789 : i64\n\
         \x20 scf.for %i = %c0 to %n step %c1 {\n\
         \x20   func.call @printU64(%v) : (i64) -> ()\n\
         \x20   func.call @printNewline() : () -> ()\n\
         \x20 }\n\
         \x20 return\n\
         }\n",
    )
    .unwrap();
    let mut locus = Command::new(LOCUS);
    locus.args(["memref", "run", path_str(&kernel)]);
    let (status, stderr) = with_closed_stdout(locus, 4);
    let big = t.path("big.txt");
    std::fs::write(&big, "123456789\n".repeat(30000)).unwrap();
    let mut cat = Command::new("cat");
    cat.arg(&big);
    let (cat_status, cat_stderr) = with_closed_stdout(cat, 4);
    assert_eq!(
        cat_status.signal(),
        Some(libc::SIGPIPE),
        "cat: {cat_stderr}"
    );
    assert_eq!(
        status.signal(),
        cat_status.signal(),
        "locus: {status:?} {stderr}"
    );
    assert_eq!(stderr, cat_stderr);
}

/// The same kernel with a reader that reads everything: all of it arrives (the SIGPIPE
/// handling changes nothing else), and a tool that fails before reading its input is still
/// that tool's error (exit 1), not a death by SIGPIPE.
#[test]
fn memref_run_output_and_tool_errors_are_unchanged() {
    let t = TempDir::new("threads-sigpipe-ok");
    let kernel = t.path("print.mlir");
    std::fs::write(
        &kernel,
        "func.func private @printU64(i64)\n\
         func.func private @printNewline()\n\
         func.func @main() {\n\
         \x20 %v = arith.constant 7 : i64\n\
         \x20 func.call @printU64(%v) : (i64) -> ()\n\
         \x20 func.call @printNewline() : () -> ()\n\
         \x20 return\n\
         }\n",
    )
    .unwrap();
    let out = run(LOCUS, &["memref", "run", path_str(&kernel)]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "7\n");
    // opt-19 and llc-19 refuse an unknown option before reading their input.
    let out = run(
        LOCUS,
        &[
            "memref",
            "run",
            path_str(&kernel),
            "--llvm-option",
            "--no-such-option-for-locus",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).starts_with("locus: "), "{out:?}");
}
