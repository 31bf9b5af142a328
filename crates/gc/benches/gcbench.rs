//! Whole programs against the Boehm collector (issue 26 §4): each program is written once
//! as Locus input IR (`fixtures/bench/NAME.ll`) and once in C against libgc
//! (`fixtures/bench/NAME.c`), both compiled ahead of time at -O2 (`locus gc build --passes
//! default<O2>`, `clang-19 -O2 -lgc`), and each executable is run as a user runs it.
//!
//! Run with `cargo bench -p locus-gc --bench gcbench` (`LOCUS_GC_BENCH_PROGRAMS=gcbench,table`
//! runs only those programs, `LOCUS_GC_BENCH_BUILDS=immix,sticky` only the Locus builds
//! whose label contains one of the parts; Boehm's always runs). For every program it prints, per
//! build (Boehm, the anchor; Locus with frames and its own mark-sweep; Locus with statepoint
//! roots; Locus with frames on each MMTk plan that pins: `--collector mmtk:marksweep`,
//! `mmtk:immix`, `mmtk:stickyimmix`; and with statepoint roots on every MMTk plan, `stpts`
//! in the labels), the median wall time of `LOCUS_GC_BENCH_RUNS` runs
//! (default 3; the builds take turns, run by run, so that a change in the machine's load
//! falls on all of them), the largest peak resident set of those runs (`ru_maxrss`, read by
//! `fixtures/bench/measure.c`, a small process that forks each run), the collections the Locus runtime counted (`LOCUS_GC_STATS=1`) and the
//! ratios to Boehm in the same run. Memory is also compared without each build's fixed
//! cost: `fixtures/bench/startup.{ll,c}`, a program that allocates one object, is built
//! and run the same way in the same run, and `added` is a program's peak less its build's
//! start-up peak, over Boehm's (MMTk 0.33 alone takes about 8 MB more at start-up than
//! libgc: the map-state table of its side-metadata reservation, its GC threads, its code). A build the runtime refuses (one `locus: gc:` line,
//! status 1: say, several threads on MMTk before the runtime supports them) or that fails
//! is printed as such, and the other rows still run.
//!
//! Heap limit: each program has one (`LOCUS_GC_BENCH_HEAP=SIZE` overrides it for all,
//! bytes with an optional K, M or G), given to Boehm as `GC_MAXIMUM_HEAP_SIZE` and to the
//! Locus runtime as `LOCUS_GC_HEAP_SIZE`, the size of the MMTk heap.
//! `LOCUS_GC_BENCH_HEAP=MIN..MAX` gives MMTk a heap that grows from
//! MIN up to MAX (`LOCUS_GC_HEAP_SIZE=MIN..MAX`) and Boehm the maximum MAX. The runtime's own
//! mark-sweep has no limit: it grows its heap from `Config::heap_threshold` and what
//! survived.
//!
//! `LOCUS_GC_BENCH_KEEP=1` keeps the executables and prints their directory, so that
//! `perf` can run them directly (with `LOCUS_GC_HEAP_SIZE` as the benchmark gives it).
//!
//! Pause times: for the builds whose collector reports them (the MMTk plans and the
//! runtime's own collectors: each collection's stop-the-world pause, from when it starts
//! stopping the mutators until it lets them run, `pause median:` and `pause max:` in the
//! `LOCUS_GC_STATS=1` counters), the median pause (the median over the runs of each run's
//! median) and the longest pause of all runs. Boehm reports none.
//!
//! Run as a test (`cargo test -p locus-gc --benches`) it builds each program with smaller
//! sizes and checks that every build prints the expected result (or is refused by the
//! runtime with one `locus: gc:` line), without timing.
//!
//! Programs:
//! - `gcbench`: Boehm's GCBench (binary trees top-down and bottom-up, a long-lived tree
//!   and an array kept to the end);
//! - `table`: a table of many small objects (a chained hash table of 500,000 entries and
//!   their value boxes, every seventh value replaced in each of 10 rounds);
//! - `churn`: a linked structure churned by 4 threads (each keeps a binary tree of 131,071
//!   nodes in its frames and replaces 100,000 random subtrees of 31 nodes), and
//!   `churn-1thread`, the same on the main thread alone with 400,000 rounds.

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use locus_gc::build::{build, BuildOptions};
use locus_gc::run::Roots;
use locus_gc::runtime::Collector;
use locus_gc_runtime::mmtk::{HeapSize, Plan};

/// A program of the benchmark: its sources, the sizes a test run uses, and what it prints.
struct Program {
    name: &'static str,
    /// The sources: `fixtures/bench/SOURCE.ll` and `.c`.
    source: &'static str,
    /// (IR global, C macro, value) triples that set the full program's sizes where they
    /// differ from the sources'.
    full: &'static [(&'static str, &'static str, i64)],
    /// For a test run: (IR global, C macro, value) triples that shrink the program.
    small: &'static [(&'static str, &'static str, i64)],
    /// The result of the full program, and of the small one.
    expect: (i64, i64),
    /// The heap limit of the full program, in bytes (Boehm's maximum heap, MMTk's heap):
    /// about three times the most it keeps live at once.
    heap: u64,
}

const MIB: u64 = 1 << 20;

const PROGRAMS: &[Program] = &[
    Program {
        name: "gcbench",
        source: "gcbench",
        full: &[],
        small: &[
            ("stretch_depth", "STRETCH_DEPTH", 10),
            ("long_lived_depth", "LONG_LIVED_DEPTH", 8),
            ("max_depth", "MAX_DEPTH", 8),
        ],
        expect: (131_071, 511),
        heap: 64 * MIB,
    },
    Program {
        name: "table",
        source: "table",
        full: &[],
        small: &[("keys", "KEYS", 5000), ("rounds", "ROUNDS", 2)],
        expect: (303_570_821_420, 16_071_070),
        heap: 64 * MIB,
    },
    Program {
        name: "churn",
        source: "churn",
        full: &[],
        small: &[
            ("depth", "DEPTH", 8),
            ("sub", "SUB", 3),
            ("rounds", "ROUNDS", 200),
        ],
        expect: (48_702_401_820, 326_490),
        heap: 64 * MIB,
    },
    // The same churn on one thread (the main one, no pthread_create), 400,000 rounds: what
    // a runtime that takes one mutator thread per heap can run.
    Program {
        name: "churn-1thread",
        source: "churn",
        full: &[("threads", "THREADS", 1), ("rounds", "ROUNDS", 400_000)],
        small: &[
            ("threads", "THREADS", 1),
            ("depth", "DEPTH", 8),
            ("sub", "SUB", 3),
            ("rounds", "ROUNDS", 200),
        ],
        expect: (50_271_815_663, 80_730),
        heap: 64 * MIB,
    },
];

/// The heap limit of a test run (small sizes).
const SMALL_HEAP: u64 = 64 * MIB;

/// The heap of a run: Boehm's maximum (`GC_MAXIMUM_HEAP_SIZE`) is `max`; MMTk's heap is
/// fixed at `max`, or grows from `min` up to `max`.
#[derive(Clone, Copy)]
struct Heap {
    min: Option<u64>,
    max: u64,
}

impl Heap {
    /// What `LOCUS_GC_HEAP_SIZE` gets.
    fn locus(self) -> String {
        match self.min {
            Some(min) => format!("{min}..{}", self.max),
            None => self.max.to_string(),
        }
    }
}

impl std::fmt::Display for Heap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.min {
            Some(min) => write!(f, "heap {} to {} MiB", min / MIB, self.max / MIB),
            None => write!(f, "heap limit {} MiB", self.max / MIB),
        }
    }
}

/// The MMTk plans that pin, so run with Julia-style frames.
const PLANS: [Plan; 3] = [Plan::MarkSweep, Plan::Immix, Plan::StickyImmix];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bench")
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

/// An executable of one program.
struct Exe {
    label: String,
    path: PathBuf,
}

/// The executables of one program, `name`, from `fixtures/bench/SOURCE.{ll,c}` resized by
/// `sizes`: Boehm's first.
fn build_all(
    name: &str,
    source: &str,
    sizes: &[(&str, &str, i64)],
    dir: &Path,
    runtime: &Path,
) -> Vec<Exe> {
    let c = fixtures().join(format!("{source}.c"));
    let boehm = dir.join(format!("{name}-boehm"));
    let mut cc = Command::new("clang-19");
    cc.args(["-O2", "-o"]).arg(&boehm).arg(&c);
    for (_, mac, v) in sizes {
        cc.arg(format!("-D{mac}={v}"));
    }
    let out = cc
        .args(["-lgc", "-lpthread"])
        .output()
        .unwrap_or_else(|e| panic!("clang-19 is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "clang-19 {} -lgc (libgc-dev, from scripts/install-deps): {}",
        c.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut built = vec![Exe {
        label: "boehm".into(),
        path: boehm,
    }];

    let ll = fixtures().join(format!("{source}.ll"));
    let ir = std::fs::read_to_string(&ll).unwrap_or_else(|e| panic!("{}: {e}", ll.display()));
    let ir = resized_ir(&ir, sizes);
    let mut variants = vec![
        ("locus frames".to_string(), Roots::Frames, None),
        ("locus statepoints".to_string(), Roots::Statepoint, None),
    ];
    for plan in PLANS {
        variants.push((
            format!("mmtk:{plan} frames"),
            Roots::Frames,
            Some(Collector::Mmtk(plan)),
        ));
    }
    for plan in Plan::ALL {
        variants.push((
            format!("mmtk:{plan} stpts"),
            Roots::Statepoint,
            Some(Collector::Mmtk(plan)),
        ));
    }
    // `LOCUS_GC_BENCH_BUILDS=A,B`: only the Locus builds whose label contains one of them.
    let wanted = std::env::var("LOCUS_GC_BENCH_BUILDS").ok();
    variants.retain(|(label, _, _)| {
        wanted
            .as_ref()
            .is_none_or(|w| w.split(',').any(|part| label.contains(part)))
    });
    for (label, roots, collector) in variants {
        let exe = dir.join(format!("{name}-{}", label.replace([' ', ':'], "-")));
        let options = BuildOptions {
            roots,
            passes: Some("default<O2>".into()),
            runtime: Some(runtime.to_path_buf()),
            collector,
            ..BuildOptions::default()
        };
        build(&ll.display().to_string(), ir.as_bytes(), &exe, &options)
            .unwrap_or_else(|e| panic!("locus gc build {} ({label}): {e}", ll.display()));
        built.push(Exe { label, path: exe });
    }
    built
}

/// One finished run.
struct Run {
    time: Duration,
    /// Peak resident set, KiB.
    rss: u64,
    /// The first line printed: the result.
    result: String,
    /// The runtime's collection count, when it printed one.
    collections: Option<u64>,
    /// The median and longest stop-the-world pause, when the collector reports them.
    pauses: Option<(Duration, Duration)>,
}

/// `measure` (`fixtures/bench/measure.c`), built into `dir`: it runs a program and
/// writes its peak resident set and wall time, measured from a small process of its own
/// (the benchmark's own size would otherwise be the floor of every peak RSS read).
fn build_measure(dir: &Path) -> PathBuf {
    let c = fixtures().join("measure.c");
    let exe = dir.join("measure");
    let out = Command::new("clang-19")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .unwrap_or_else(|e| panic!("clang-19 is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "clang-19 {}: {}",
        c.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// One run with the heap `heap`, through `measure`: the run, or why it did not finish well
/// (its exit status and the first line of its standard error).
fn run_once(measure: &Path, exe: &Exe, heap: Heap) -> Result<Run, String> {
    let report = exe.path.with_extension("measured");
    let out = Command::new(measure)
        .arg(&report)
        .arg(&exe.path)
        .env("GC_MAXIMUM_HEAP_SIZE", heap.max.to_string())
        .env("LOCUS_GC_HEAP_SIZE", heap.locus())
        .env("LOCUS_GC_STATS", "1")
        .env_remove("LOCUS_GC_COLLECTOR")
        .env_remove("LOCUS_GC_STRESS")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", measure.display()));
    let errors = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let why = errors.lines().next().unwrap_or("no message");
        return Err(match out.status.code() {
            Some(n) if n > 128 => format!("signal {}: {why}", n - 128),
            Some(n) => format!("status {n}: {why}"),
            None => format!("{}: {why}", out.status),
        });
    }
    let measured =
        std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{}: {e}", report.display()));
    let mut fields = measured.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (Some(Some(rss)), Some(Some(ns))) = (fields.next(), fields.next()) else {
        panic!("{}: not `KIB NS`: {measured:?}", report.display())
    };
    let printed = String::from_utf8_lossy(&out.stdout);
    let counter = |name: &str| {
        printed
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|n| n.trim().trim_end_matches(" ns").parse::<u64>().ok())
    };
    let collections = counter("collections: ");
    let pauses = counter("pause median: ")
        .zip(counter("pause max: "))
        .map(|(median, max)| (Duration::from_nanos(median), Duration::from_nanos(max)));
    Ok(Run {
        time: Duration::from_nanos(ns),
        rss,
        result: printed.lines().next().unwrap_or_default().to_string(),
        collections,
        pauses,
    })
}

/// The largest peak resident set (KiB) of `runs` runs of each start-up executable with the
/// heap `heap`, in `startup`'s order; `None` for one that failed (a plan the runtime
/// refuses fails on the program too).
fn startup_rss(measure: &Path, startup: &[Exe], heap: Heap, runs: usize) -> Vec<Option<u64>> {
    startup
        .iter()
        .map(|exe| {
            let rss: Option<Vec<u64>> = (0..runs)
                .map(|_| {
                    run_once(measure, exe, heap)
                        .ok()
                        .filter(|r| r.result == "1")
                        .map(|r| r.rss)
                })
                .collect();
            rss.and_then(|r| r.into_iter().max())
        })
        .collect()
}

/// What one build did over all its runs.
enum Row {
    /// Median time, largest peak RSS (KiB), largest collection count, and the median of
    /// the runs' median pauses with the longest pause of all runs.
    Ran(Duration, u64, Option<u64>, Option<(Duration, Duration)>),
    /// Refused by the runtime or failed, with why.
    Failed(String),
}

fn main() {
    let timing = std::env::args().any(|a| a == "--bench");
    let runs: usize = std::env::var("LOCUS_GC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3);
    let heap_override = std::env::var("LOCUS_GC_BENCH_HEAP").ok().map(|v| {
        let (min, max) = match HeapSize::parse(&v) {
            Ok(HeapSize::Fixed(max)) => (None, max),
            Ok(HeapSize::Dynamic { min, max }) => (Some(min as u64), max),
            Err(e) => panic!("LOCUS_GC_BENCH_HEAP={v}: {e}"),
        };
        Heap {
            min,
            max: max as u64,
        }
    });
    let only: Option<Vec<String>> = std::env::var("LOCUS_GC_BENCH_PROGRAMS")
        .ok()
        .map(|v| v.split(',').map(str::to_owned).collect());
    let dir = std::env::temp_dir().join(format!("locus-gcbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let runtime = runtime_library::runtime_dir(true);
    let measure = build_measure(&dir);
    // The start-up program, built as every program is: what each build costs before it
    // allocates (timed runs only).
    let startup = if timing {
        build_all("startup", "startup", &[], &dir, runtime)
    } else {
        vec![]
    };
    for program in PROGRAMS {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == program.name))
        {
            continue;
        }
        let (expect, heap) = if timing {
            (
                program.expect.0,
                heap_override.unwrap_or(Heap {
                    min: None,
                    max: program.heap,
                }),
            )
        } else {
            (
                program.expect.1,
                heap_override.unwrap_or(Heap {
                    min: None,
                    max: SMALL_HEAP,
                }),
            )
        };
        let sizes = if timing { program.full } else { program.small };
        let built = build_all(program.name, program.source, sizes, &dir, runtime);
        let mut results: Vec<Result<Vec<Run>, String>> = built.iter().map(|_| Ok(vec![])).collect();
        // The builds take turns, run by run.
        for _ in 0..if timing { runs } else { 1 } {
            for (exe, result) in built.iter().zip(results.iter_mut()) {
                let Ok(done) = result else { continue };
                match run_once(&measure, exe, heap) {
                    Ok(run) => {
                        assert_eq!(
                            run.result,
                            expect.to_string(),
                            "{} ({}) printed the wrong result",
                            program.name,
                            exe.label
                        );
                        done.push(run);
                    }
                    Err(why) => {
                        // Only a Locus build on MMTk may be refused (or fail) without
                        // failing the benchmark: the rest must run.
                        let refused = why.starts_with("status 1: locus: gc:");
                        assert!(
                            exe.label.starts_with("mmtk:") && (timing || refused),
                            "{} ({}): {why}",
                            program.name,
                            exe.label
                        );
                        *result = Err(why);
                    }
                }
            }
        }
        let rows: Vec<(String, Row)> = built
            .iter()
            .zip(results)
            .map(|(exe, result)| {
                let row = match result {
                    Ok(mut done) => {
                        done.sort_by_key(|r| r.time);
                        let time = done[done.len() / 2].time;
                        let rss = done.iter().map(|r| r.rss).max().unwrap_or(0);
                        let collections = done.iter().filter_map(|r| r.collections).max();
                        let mut medians: Vec<Duration> =
                            done.iter().filter_map(|r| r.pauses.map(|p| p.0)).collect();
                        medians.sort();
                        let longest = done.iter().filter_map(|r| r.pauses.map(|p| p.1)).max();
                        let pauses = medians.get(medians.len() / 2).copied().zip(longest);
                        Row::Ran(time, rss, collections, pauses)
                    }
                    Err(why) => Row::Failed(why),
                };
                (exe.label.clone(), row)
            })
            .collect();
        if !timing {
            for (label, row) in &rows {
                match row {
                    Row::Failed(why) => println!("{} ({label}): refused: {why}", program.name),
                    // An MMTk plan that collected reports its pauses.
                    Row::Ran(_, _, Some(c), pauses) if *c > 0 && label.starts_with("mmtk:") => {
                        assert!(
                            pauses.is_some(),
                            "{} ({label}): {c} collections but no pause times printed",
                            program.name
                        );
                    }
                    Row::Ran(..) => {}
                }
            }
            println!("{}: every other build printed {expect}", program.name);
            continue;
        }
        let Row::Ran(boehm_time, boehm_rss, _, _) = rows[0].1 else {
            unreachable!("Boehm's build runs or the benchmark stops")
        };
        let base = startup_rss(&measure, &startup, heap, runs);
        let boehm_added = boehm_rss.saturating_sub(base[0].unwrap_or(0)).max(1);
        println!(
            "{} ({runs} runs each, median time, largest peak RSS, {heap}; added: peak RSS \
             less the start-up program's):",
            program.name
        );
        let startups: Vec<String> = startup
            .iter()
            .zip(&base)
            .filter_map(|(exe, b)| b.map(|b| format!("{} {b}", exe.label)))
            .collect();
        println!("  start-up peak RSS, KiB: {}", startups.join(", "));
        for ((label, row), base) in rows.iter().zip(&base) {
            match row {
                Row::Ran(time, rss, collections, pauses) => {
                    let added = base
                        .map(|b| {
                            let added = rss.saturating_sub(b) as f64 / boehm_added as f64;
                            format!("  added {added:>5.2}x")
                        })
                        .unwrap_or_default();
                    let collections = collections
                        .map(|c| format!("{c:>6} collections"))
                        .unwrap_or_default();
                    let pauses = pauses
                        .map(|(median, max)| {
                            format!(
                                "  pause median {:>7.2} ms  max {:>7.2} ms",
                                median.as_secs_f64() * 1e3,
                                max.as_secs_f64() * 1e3
                            )
                        })
                        .unwrap_or_default();
                    println!(
                        "  {label:<22} {:>8.3} s {:>9} KiB   time {:>5.2}x  memory {:>5.2}x{added} Boehm  {collections}{pauses}",
                        time.as_secs_f64(),
                        rss,
                        time.as_secs_f64() / boehm_time.as_secs_f64(),
                        *rss as f64 / boehm_rss as f64
                    );
                }
                Row::Failed(why) => println!("  {label:<22} not run: {why}"),
            }
        }
    }
    // `LOCUS_GC_BENCH_KEEP=1` keeps the executables (for `perf` on them).
    if std::env::var_os("LOCUS_GC_BENCH_KEEP").is_some() {
        println!("executables kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
