//! Whole programs against the Boehm collector (issue 26 §4): each program is written once
//! as Locus input IR (`fixtures/bench/NAME.ll`) and once in C against libgc
//! (`fixtures/bench/NAME.c`), both compiled ahead of time at -O2 (`locus gc build --passes
//! default<O2>`, `clang-19 -O2 -lgc`), and each executable is run as a user runs it.
//!
//! Run with `cargo bench -p locus-gc --bench gcbench`. For every program it prints, per
//! build (Boehm, the anchor; Locus with frames; Locus with statepoint roots), the median
//! wall time of `LOCUS_GC_BENCH_RUNS` runs (default 3), the largest peak resident set of
//! those runs (`wait4`'s `ru_maxrss`), and the ratios to Boehm in the same run. No heap
//! limit is set for either collector: each grows its heap as it needs (Boehm from its own
//! heuristics, Locus from `Config::heap_threshold`'s default and what survived).
//!
//! Run as a test (`cargo test -p locus-gc --benches`) it builds each program with smaller
//! sizes and checks that every build prints the expected result, without timing.
//!
//! Programs:
//! - `gcbench`: Boehm's GCBench (binary trees top-down and bottom-up, a long-lived tree
//!   and an array kept to the end);
//! - `table`: a table of many small objects (a chained hash table of 500,000 entries and
//!   their value boxes, every seventh value replaced in each of 10 rounds).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use locus_gc::build::{build, BuildOptions};
use locus_gc::run::Roots;

/// A program of the benchmark: its sources, the sizes a test run uses, and what it prints.
struct Program {
    name: &'static str,
    /// For a test run: (IR global, C macro, value) triples that shrink the program.
    small: &'static [(&'static str, &'static str, i64)],
    /// The result of the full program, and of the small one.
    expect: (i64, i64),
}

const PROGRAMS: &[Program] = &[
    Program {
        name: "gcbench",
        small: &[
            ("stretch_depth", "STRETCH_DEPTH", 10),
            ("long_lived_depth", "LONG_LIVED_DEPTH", 8),
            ("max_depth", "MAX_DEPTH", 8),
        ],
        expect: (131_071, 511),
    },
    Program {
        name: "table",
        small: &[("keys", "KEYS", 5000), ("rounds", "ROUNDS", 2)],
        expect: (303_570_821_420, 16_071_070),
    },
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bench")
}

/// `liblocus_gc_runtime.a`, built optimized as a user builds it, in a target directory of
/// its own (no outer cargo holds it locked).
fn runtime_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = workspace.join("target/gc-runtime-alone");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .args(["build", "--quiet", "--release", "-p", "locus-gc-runtime"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&workspace)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo}: {e}"));
    assert!(
        out.status.success(),
        "cargo build --release -p locus-gc-runtime: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("release")
}

/// The IR with each of `sizes`' globals set to its value.
fn resized_ir(ir: &str, sizes: &[(&str, &str, i64)]) -> String {
    let mut out = String::with_capacity(ir.len());
    for line in ir.lines() {
        let global = sizes
            .iter()
            .find(|(g, _, _)| line.starts_with(&format!("@{g} = internal constant i64 ")));
        match global {
            Some((g, _, v)) => out.push_str(&format!("@{g} = internal constant i64 {v}")),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The executables of one program: (label, path).
fn build_all(program: &Program, dir: &Path, runtime: &Path, small: bool) -> Vec<(String, PathBuf)> {
    let sizes: &[(&str, &str, i64)] = if small { program.small } else { &[] };
    let c = fixtures().join(format!("{}.c", program.name));
    let boehm = dir.join(format!("{}-boehm", program.name));
    let mut cc = Command::new("clang-19");
    cc.args(["-O2", "-o"]).arg(&boehm).arg(&c);
    for (_, mac, v) in sizes {
        cc.arg(format!("-D{mac}={v}"));
    }
    let out = cc
        .arg("-lgc")
        .output()
        .unwrap_or_else(|e| panic!("clang-19 is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "clang-19 {} -lgc (libgc-dev, from scripts/install-deps): {}",
        c.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut built = vec![("boehm".to_string(), boehm)];

    let ll = fixtures().join(format!("{}.ll", program.name));
    let ir = std::fs::read_to_string(&ll).unwrap_or_else(|e| panic!("{}: {e}", ll.display()));
    let ir = resized_ir(&ir, sizes);
    for (label, roots) in [
        ("locus frames", Roots::Frames),
        ("locus statepoints", Roots::Statepoint),
    ] {
        let exe = dir.join(format!("{}-{}", program.name, label.replace(' ', "-")));
        let options = BuildOptions {
            roots,
            passes: Some("default<O2>".into()),
            runtime: Some(runtime.to_path_buf()),
            ..BuildOptions::default()
        };
        build(&ll.display().to_string(), ir.as_bytes(), &exe, &options)
            .unwrap_or_else(|e| panic!("locus gc build {} ({label}): {e}", ll.display()));
        built.push((label.to_string(), exe));
    }
    built
}

/// One run: wall time, peak resident set in KiB, and what it printed.
fn run_once(exe: &Path) -> (Duration, u64, String) {
    let start = Instant::now();
    // Reaped below by wait4, which also gives its resource usage (Child::wait would not).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(exe)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let pid = child.id() as libc::pid_t;
    let Some(mut stdout) = child.stdout else {
        panic!("{}: no standard output pipe", exe.display())
    };
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut printed)
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; both pointers are to locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(waited, pid, "wait4 {}", exe.display());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} ended with status {status:#x}",
        exe.display()
    );
    (elapsed, usage.ru_maxrss as u64, printed)
}

fn main() {
    let timing = std::env::args().any(|a| a == "--bench");
    let runs: usize = std::env::var("LOCUS_GC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3);
    let dir = std::env::temp_dir().join(format!("locus-gcbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let runtime = runtime_dir();
    for program in PROGRAMS {
        let expect = if timing {
            program.expect.0
        } else {
            program.expect.1
        };
        let built = build_all(program, &dir, &runtime, !timing);
        let mut rows = Vec::new();
        for (label, exe) in &built {
            let mut times = Vec::new();
            let mut peak = 0;
            for _ in 0..if timing { runs } else { 1 } {
                let (t, rss, printed) = run_once(exe);
                assert_eq!(
                    printed.trim(),
                    expect.to_string(),
                    "{} ({label}) printed {printed:?}",
                    program.name
                );
                times.push(t);
                peak = peak.max(rss);
            }
            times.sort();
            rows.push((label.clone(), times[times.len() / 2], peak));
        }
        if !timing {
            println!("{}: every build printed {expect}", program.name);
            continue;
        }
        let (_, boehm_time, boehm_rss) = rows[0].clone();
        println!(
            "{} ({runs} runs each, median time, largest peak RSS):",
            program.name
        );
        for (label, time, rss) in &rows {
            println!(
                "  {label:<18} {:>9.3} s  {:>9} KiB   time {:>6.2}x  memory {:>5.2}x Boehm",
                time.as_secs_f64(),
                rss,
                time.as_secs_f64() / boehm_time.as_secs_f64(),
                *rss as f64 / boehm_rss as f64
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
