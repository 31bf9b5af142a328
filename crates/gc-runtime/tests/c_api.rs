//! Every entry point of `include/locus_gc.h` called from C (`tests/c/api.c`, compiled by
//! clang-19 against the static library): the attach API's status codes and every entry
//! point on good input in one run, then each bad input in a process of its own, which must
//! end as the header says — a status code, or one `locus:` line and exit status 2 (a broken
//! GC contract, the stress collector on), 3 (a fatal signal) or an abort (an entry point
//! called on a thread without a runtime) — never a silent crash.

#[path = "support/runtime_library.rs"]
mod runtime_library;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The C program, built once per test process.
fn program() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let exe =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gc-c-api-{}", std::process::id()));
        let out = Command::new("clang-19")
            .args(["-std=c11", "-Wall", "-Werror", "-I"])
            .arg(crate_dir.join("include"))
            .arg(crate_dir.join("tests/c/api.c"))
            .arg(runtime_library::runtime_dir(false).join("liblocus_gc_runtime.a"))
            .args(["-lpthread", "-ldl", "-lm", "-lgcc_s", "-rdynamic", "-o"])
            .arg(&exe)
            .output()
            .unwrap_or_else(|e| panic!("clang-19 is required (scripts/install-deps): {e}"));
        assert!(
            out.status.success(),
            "clang-19 tests/c/api.c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    })
}

/// How a case must end.
enum End {
    /// Exit status and standard output.
    Exit(i32, &'static str),
    /// One `locus:` line on standard error holding the text, and the exit status.
    Reported(i32, &'static str),
}

fn run(case: &str, end: End) {
    let out = Command::new(program())
        .arg(case)
        .env("LOCUS_GC_STRESS", "1")
        .output()
        .unwrap_or_else(|e| panic!("{case}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    match end {
        End::Exit(status, printed) => {
            assert_eq!(code, Some(status), "{case}: {stderr}");
            assert_eq!(stdout.trim(), printed, "{case}: {stderr}");
        }
        End::Reported(status, text) => {
            assert_eq!(code, Some(status), "{case}: {stderr}");
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 1, "{case}: one line, got {stderr:?}");
            assert!(
                lines[0].starts_with("locus: ") && lines[0].contains(text),
                "{case}: {stderr:?} should say {text:?}"
            );
        }
    }
}

#[test]
fn every_entry_point_on_good_input_and_the_attach_api_codes() {
    run("statuses", End::Exit(0, "ok"));
    run("main", End::Exit(0, "42"));
    // A built-in default collector; LOCUS_GC_STRESS=1 (set by `run`) still wins.
    run("main-with-collector", End::Exit(0, "42"));
    run("write-barrier-null", End::Exit(0, "ok"));
    // The statepoint wrappers' entry points, on a runtime without stack maps.
    run("statepoint-calls", End::Exit(0, "7 7"));
    // A pinned object is a root, with frame roots too.
    run("pinned-is-a-root", End::Exit(0, "9"));
}

#[test]
fn bad_inputs_end_with_one_locus_line() {
    // No runtime on the thread: the entry point aborts (SIGABRT, 134 from a shell).
    let abort = 128 + 6;
    let cases = [
        (
            "no-runtime",
            End::Reported(
                abort,
                "locus_gc_alloc was called on a thread with no runtime",
            ),
        ),
        (
            "no-runtime-safepoint",
            End::Reported(
                abort,
                "locus_gc_safepoint was called on a thread with no runtime",
            ),
        ),
        (
            "main-with-unknown-collector",
            End::Reported(
                1,
                "the executable's default collector: unknown collector `nope`",
            ),
        ),
        (
            "negative-size",
            End::Reported(2, "sizes must not be negative"),
        ),
        ("huge-size", End::Reported(2, "larger than the limit")),
        (
            "negative-bytes",
            End::Reported(2, "sizes must not be negative"),
        ),
        (
            "negative-memory",
            End::Reported(2, "sizes must not be negative"),
        ),
        ("read-null", End::Reported(2, "are not a valid address")),
        (
            "read-outside",
            End::Reported(2, "are not inside an object of this heap"),
        ),
        (
            "callee-rooted-null",
            End::Reported(2, "are not a valid address"),
        ),
        (
            "root-region-garbage",
            End::Reported(2, "word 1 of the global root region"),
        ),
        ("bad-frame", End::Reported(2, "corrupt frame")),
        (
            "dangling-root",
            End::Reported(2, "dangling reference: root 0 of frame #0"),
        ),
        // A null entry is the caller's broken precondition: the fault handler reports it.
        (
            "main-null",
            End::Reported(3, "SIGSEGV (null pointer dereference)"),
        ),
        // No stack maps in the executable: a status code after one line.
        (
            "statepoints-without-stack-maps",
            End::Reported(3, "has no .llvm_stackmaps section"),
        ),
        (
            "main-statepoints-without-stack-maps",
            End::Reported(1, "has no .llvm_stackmaps section"),
        ),
        // A null heap is refused with a status code.
        ("attach-heap-null", End::Exit(4, "")),
        // Empty (reversed) regions and a depth above the stack's change nothing.
        ("root-region-reversed", End::Exit(0, "ok")),
        ("push-region-reversed", End::Exit(0, "ok")),
        ("region-reset-above-depth", End::Exit(0, "0")),
        // A negative depth (no locus_gc_region_depth returns one) is a broken contract.
        (
            "region-reset-negative",
            End::Reported(2, "locus_gc_region_reset: depth -1 is negative"),
        ),
    ];
    for (case, end) in cases {
        let end = match end {
            // Through `sh -c`, as a user sees it, an abort is 134; here it is a signal.
            End::Reported(s, t) if s == abort => {
                let out = Command::new(program())
                    .arg(case)
                    .output()
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(out.status.signal(), Some(6), "{case}: not aborted");
                let stderr = String::from_utf8_lossy(&out.stderr);
                let first = stderr.lines().next().unwrap_or_default();
                assert!(
                    first.starts_with("locus: gc: ") && first.contains(t),
                    "{case}: {stderr:?}"
                );
                continue;
            }
            other => other,
        };
        run(case, end);
    }
}
