//! Several mutator threads on one heap, from IR that creates them with `pthread_create`
//! (`crates/gc/fixtures/threads/`), compiled ahead of time by `locus gc build` and run by
//! `locus gc run` (the JIT runs threads too): the threads share objects through a global
//! root table, one blocks in a foreign call that holds its list through `jl_roots` only,
//! all under the stress collector, which finds every missed root (the same program without
//! the bundle is caught). A thread looping without calls holds a collection up unless the
//! lowering put safepoint polls at its back edges (`--safepoint-polls`): a watchdog ends
//! the run that is held up instead of letting the test hang. With statepoint roots each
//! thread's compiled frames are walked from its own frame address, and the moving
//! collector rewrites them all.
//!
//! The runtime library is built as `gc_build.rs` builds it (`cargo build -p
//! locus-gc-runtime` into `target/gc-runtime-alone`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::runtime_library;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/threads")
        .join(format!("{name}.ll"))
}

/// The directory holding `liblocus_gc_runtime.{a,so}`, built as a user builds them.
fn runtime_dir() -> &'static Path {
    runtime_library::runtime_dir(false)
}

/// `locus gc build FILE -o PROG --runtime DIR EXTRA...`, which must succeed.
fn build(file: &Path, prog: &Path, extra: &[&str]) {
    let mut args = vec![
        "gc",
        "build",
        path_str(file),
        "-o",
        path_str(prog),
        "--runtime",
        path_str(runtime_dir()),
        FAST_LINK,
    ];
    args.extend_from_slice(extra);
    let out = run(LOCUS, &args);
    assert!(
        out.status.success(),
        "locus gc build {}: {:?}\n{}",
        file.display(),
        out.status,
        text(&out.stderr)
    );
}

/// Runs `cmd` to its end, or kills it after `limit`: `None` then (it was held up).
fn run_watched(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => {
                return Some(
                    child
                        .wait_with_output()
                        .unwrap_or_else(|e| panic!("{cmd:?}: {e}")),
                )
            }
            Ok(None) => {}
            Err(e) => panic!("{cmd:?}: {e}"),
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A built program under the stress collector, with its counters.
fn stressed(prog: &Path) -> Command {
    let mut cmd = Command::new(prog);
    cmd.env("LOCUS_GC_STRESS", "1").env("LOCUS_GC_STATS", "1");
    cmd
}

/// A counter of `--stats` / `LOCUS_GC_STATS=1` output.
fn counter(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name:?} in {stdout}"))
}

/// A program's run must end (30 s is far beyond what it needs) with status 0.
const ENDS: Duration = Duration::from_secs(30);

#[test]
fn threads_share_one_heap_ahead_of_time_and_in_the_jit() {
    let tmp = TempDir::new("gc-threads-share");
    let prog = tmp.path("share");
    build(&fixture("share"), &prog, &[]);
    for stress in [true, false] {
        let mut cmd = stressed(&prog);
        if !stress {
            cmd.env_remove("LOCUS_GC_STRESS");
        }
        let out = run_watched(cmd, ENDS).expect("share: held up");
        let stdout = text(&out.stdout);
        assert!(
            out.status.success() && stdout.starts_with("202250\n"),
            "stress {stress}: {:?}\n{stdout}{}",
            out.status,
            text(&out.stderr)
        );
        assert_eq!(counter(&stdout, "faults"), 0);
        if stress {
            // One collection per allocation: 4 x (50 + 50 + 4 x 50) + 100 + 100.
            assert_eq!(counter(&stdout, "collections"), 1400, "{stdout}");
            // The holder's list (101 nodes with the table's 4 x 50 on top) is alive
            // until the end; the root table keeps the four lists.
            assert_eq!(counter(&stdout, "objects live"), 201, "{stdout}");
        }
    }
    // The JIT runs the same threads.
    let mut cmd = Command::new(LOCUS);
    cmd.args([
        "gc",
        "run",
        "--stress",
        "--stats",
        path_str(&fixture("share")),
    ]);
    let out = run_watched(cmd, ENDS).expect("gc run share: held up");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("202250\n"),
        "{:?}\n{stdout}{}",
        out.status,
        text(&out.stderr)
    );
    assert_eq!(counter(&stdout, "collections"), 1400);
}

/// Statepoint roots with threads: each thread stopped in a `locus_gc_sp_*` entry has its
/// own compiled frames walked from its own frame address, and the moving collector
/// rewrites every thread's slots (old copies made inaccessible under stress); the
/// holder's list is pinned by its `jl_roots` bundle, the table's heads as global roots.
#[test]
fn statepoint_roots_walk_every_threads_stack_and_move() {
    let tmp = TempDir::new("gc-threads-statepoint");
    let prog = tmp.path("share-sp");
    build(&fixture("share"), &prog, &["--roots", "statepoint"]);
    let mut cmd = stressed(&prog);
    cmd.env("LOCUS_GC_MOVING", "1");
    let out = run_watched(cmd, ENDS).expect("share-sp: held up");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("202250\n"),
        "{:?}\n{stdout}{}",
        out.status,
        text(&out.stderr)
    );
    assert_eq!(counter(&stdout, "collections"), 1400);
    assert!(counter(&stdout, "objects moved") > 100_000, "{stdout}");
    let mut cmd = Command::new(LOCUS);
    cmd.args(["gc", "run", "--stress", "--moving", "--roots", "statepoint"])
        .arg(fixture("share"));
    let out = run_watched(cmd, ENDS).expect("gc run share-sp: held up");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "202250\n");
}

/// Without the `jl_roots` bundle, nothing keeps the holder's list alive while its foreign
/// call blocks: a worker's collection frees it and the stress collector catches the read.
#[test]
fn a_foreign_call_without_jl_roots_is_caught_reading_a_freed_list() {
    let tmp = TempDir::new("gc-threads-noroots");
    let src = std::fs::read_to_string(fixture("share")).expect("share.ll");
    let bundle = " [ \"jl_roots\"(ptr addrspace(10) %list) ]";
    assert!(src.contains(bundle));
    let file = tmp.path("noroots.ll");
    std::fs::write(&file, src.replace(bundle, "")).expect("write");
    let prog = tmp.path("noroots");
    build(&file, &prog, &[]);
    let out = run_watched(stressed(&prog), ENDS).expect("noroots: held up");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("locus: gc: dangling reference: an access")
            && stderr.contains("in function `blocked_sum`")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    let mut cmd = Command::new(LOCUS);
    cmd.args(["gc", "run", "--stress", path_str(&file)]);
    let out = run_watched(cmd, ENDS).expect("gc run noroots: held up");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A thread spinning without calls: without polls the collection (the main thread's
/// allocation) never ends and the watchdog ends the run; with `--safepoint-polls` the
/// spinner stops at its back edge and the run prints 42.
#[test]
fn a_loop_holds_a_collection_up_without_safepoint_polls_and_not_with_them() {
    let tmp = TempDir::new("gc-threads-spin");
    let (plain, polled) = (tmp.path("spin"), tmp.path("spin-polls"));
    build(&fixture("spin"), &plain, &[]);
    build(&fixture("spin"), &polled, &["--safepoint-polls"]);
    // The lowering put one poll in the spinner's loop, none elsewhere (main takes no part).
    let lowered = run(
        LOCUS,
        &[
            "gc",
            "lower",
            "--safepoint-polls",
            path_str(&fixture("spin")),
        ],
    );
    assert!(lowered.status.success(), "{}", text(&lowered.stderr));
    assert_eq!(
        text(&lowered.stdout)
            .matches("call void @locus_gc_poll()")
            .count(),
        1
    );

    let out = run_watched(stressed(&polled), ENDS).expect("with polls: held up");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("42\n"));
    assert!(
        run_watched(stressed(&plain), Duration::from_secs(2)).is_none(),
        "without polls the collection cannot end while the spinner spins"
    );

    let jit = |polls: bool| {
        let mut cmd = Command::new(LOCUS);
        cmd.args(["gc", "run", "--stress", "--timeout", "2"]);
        if polls {
            cmd.arg("--safepoint-polls");
        }
        cmd.arg(fixture("spin"));
        run_watched(cmd, ENDS).expect("the watchdog of gc run")
    };
    let out = jit(true);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "42\n");
    let out = jit(false);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
}

/// The same threads linked against the shared runtime library by hand (`--emit-ir`, then
/// clang-19 with `-llocus_gc_runtime` and an rpath).
#[test]
fn threads_run_against_the_shared_runtime_library() {
    let tmp = TempDir::new("gc-threads-so");
    let ir = tmp.path("share.ll");
    let prog = tmp.path("share-so");
    let unused = tmp.path("share-a");
    build(&fixture("share"), &unused, &["--emit-ir", path_str(&ir)]);
    let dir = runtime_dir();
    // RPATH, not RUNPATH: cargo's LD_LIBRARY_PATH (target/debug, which may hold another
    // build of the library) must not win over it.
    let rpath = format!("-Wl,--disable-new-dtags,-rpath,{}", path_str(dir));
    let out = run(
        "clang-19",
        &[
            path_str(&ir),
            "-o",
            path_str(&prog),
            "-L",
            path_str(dir),
            "-llocus_gc_runtime",
            &rpath,
            "-rdynamic",
            "-lpthread",
        ],
    );
    assert!(out.status.success(), "clang-19: {}", text(&out.stderr));
    let mut ldd = Command::new("ldd");
    let ldd = ldd
        .arg(&prog)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("ldd");
    let so = dir.join("liblocus_gc_runtime.so");
    let so = std::fs::canonicalize(&so).unwrap_or(so);
    assert!(
        text(&ldd.stdout)
            .lines()
            .any(|l| l.contains("liblocus_gc_runtime.so")
                && std::fs::canonicalize(
                    l.split("=> ")
                        .nth(1)
                        .unwrap_or_default()
                        .split(" (")
                        .next()
                        .unwrap_or_default()
                )
                .is_ok_and(|p| p == so)),
        "{}",
        text(&ldd.stdout)
    );
    let mut cmd = stressed(&prog);
    cmd.env_remove("LD_LIBRARY_PATH");
    let out = run_watched(cmd, ENDS).expect("share-so: held up");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("202250\n"),
        "{:?}\n{stdout}{}",
        out.status,
        text(&out.stderr)
    );
    assert_eq!(counter(&stdout, "collections"), 1400);
}

/// The threaded programs under MMTk's mark-sweep and Immix (`LOCUS_GC_COLLECTOR`), MMTk
/// collecting at every call that may collect (`LOCUS_GC_MMTK_COLLECT_EVERY=1`): share
/// gives the stress collector's 202250 built ahead of time (frames, and statepoint roots
/// under Immix) and in the JIT, every collection stopping the other threads at their
/// safepoints and counting the main thread, joining in a safe region, as parked; the
/// spinner with `--safepoint-polls` parks at its back edge (42), and without polls holds
/// the collection up (the watchdog ends the run).
#[test]
fn threads_under_mmtk() {
    let tmp = TempDir::new("gc-threads-mmtk");
    let share = tmp.path("share");
    let share_sp = tmp.path("share-sp");
    let (plain, polled) = (tmp.path("spin"), tmp.path("spin-polls"));
    build(&fixture("share"), &share, &[]);
    build(&fixture("share"), &share_sp, &["--roots", "statepoint"]);
    build(&fixture("spin"), &plain, &[]);
    build(&fixture("spin"), &polled, &["--safepoint-polls"]);
    let mmtk = |prog: &Path, plan: &str| {
        let mut cmd = Command::new(prog);
        cmd.env("LOCUS_GC_COLLECTOR", format!("mmtk:{plan}"))
            .env("LOCUS_GC_MMTK_COLLECT_EVERY", "1")
            .env("LOCUS_GC_STATS", "1")
            .env_remove("LOCUS_GC_STRESS")
            .env_remove("LOCUS_GC_HEAP_SIZE");
        cmd
    };
    let mut runs = vec![("immix", &share_sp)];
    for plan in ["marksweep", "immix"] {
        runs.push((plan, &share));
    }
    for (plan, prog) in runs {
        let out = run_watched(mmtk(prog, plan), ENDS).expect("share under MMTk: held up");
        let stdout = text(&out.stdout);
        assert!(
            out.status.success() && stdout.starts_with("202250\n"),
            "{plan} {}: {:?}\n{stdout}{}",
            prog.display(),
            out.status,
            text(&out.stderr)
        );
        assert_eq!(counter(&stdout, "faults"), 0, "{plan}: {stdout}");
        assert!(counter(&stdout, "collections") >= 100, "{plan}: {stdout}");

        if prog == &share {
            let out = run_watched(mmtk(&polled, plan), ENDS).expect("spin with polls: held up");
            assert!(out.status.success(), "{plan}: {}", text(&out.stderr));
            assert!(text(&out.stdout).starts_with("42\n"), "{plan}");
        }
    }
    assert!(
        run_watched(mmtk(&plain, "immix"), Duration::from_secs(2)).is_none(),
        "without polls an MMTk collection cannot end while the spinner spins"
    );
    let mut cmd = Command::new(LOCUS);
    cmd.args(["gc", "run", "--collector", "mmtk:immix"])
        .arg(fixture("share"))
        .env("LOCUS_GC_MMTK_COLLECT_EVERY", "1");
    let out = run_watched(cmd, ENDS).expect("gc run share under MMTk: held up");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "202250\n");
}

/// Four threads that run out of memory at about the same time (the churn benchmark under
/// MMTk Immix with a 16 MiB heap): the run ends with exactly one `locus: gc:` line and
/// status 2, not one line per thread (before, 1 to 4 lines).
#[test]
fn threads_out_of_memory_at_once_print_one_line() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/bench/churn.ll");
    for _ in 0..4 {
        let mut cmd = Command::new(LOCUS);
        cmd.args(["gc", "run", "--collector", "mmtk:immix"])
            .arg(&file)
            .env("LOCUS_GC_HEAP_SIZE", "16M");
        let out = run_watched(cmd, ENDS).expect("the run ends");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("locus: gc: ") && stderr.contains("out of memory"),
            "{stderr}"
        );
    }
}
