//! Late GC root placement on one big generated function: Locus's `lower_module` against
//! LLVM's own `rewrite-statepoints-for-gc` (RS4GC), issue 3 section 6.
//!
//! Run with `cargo bench -p locus-gc --bench lower_vs_rs4gc` (about three minutes on two
//! busy cores). It
//! 1. runs a small instance of the generator (see `gen`), made runnable, with and without
//!    Locus's stress collector: same result, no dangling reference;
//! 2. generates one function of N = `LOCUS_GC_BENCH_INSTRUCTIONS` instructions (default
//!    100,000) with one safepoint per 10 instructions, and the same shape at 2N, each in
//!    Locus's flavour (address spaces 10/11, `julia.get_pgcstack`) and in RS4GC's (address
//!    space 1, `gc "statepoint-example"`), written into `target/tmp/locus-gc-bench/`;
//! 3. checks that both flavours and Locus's lowered output pass `opt-19 -passes=verify`,
//!    that Locus reports one entry per generated safepoint and, at N, that RS4GC's output
//!    has one `gc.statepoint` per safepoint and some `gc.relocate`s;
//! 4. prints Locus's time per phase (scan, liveness, select refinement, colouring,
//!    placement, emission, helper rewriting, final lowering, LLVM's verifier) at both sizes,
//!    median of three runs, by calling the phases `lower_module` calls, in its order (a
//!    check on the slot count catches the copy falling behind);
//! 5. times, with criterion, `lower_module` on the Locus flavour (in process; every
//!    iteration parses the text again outside the timed region, since lowering changes the
//!    module) at both sizes, then RS4GC on its flavour, 5 runs at N and 3 at 2N (opt times
//!    itself; criterion's minimum of 10 samples at about 15 s a run at 2N would take
//!    minutes), taking the median;
//! 6. prints the medians, the ratio locus/rs4gc, the 2x-size scaling of both, and the frame
//!    slots Locus used against the lower bound (the most values live together at one
//!    safepoint).
//!
//! RS4GC's time is the `RewriteStatepointsForGC` line of `opt-19 -time-passes
//! -disable-verify -disable-output` (User+System column), not the opt process: that leaves
//! out process start-up, parsing the text (as long as a third of the pass itself), the
//! verifier and writing output. The line includes the analyses RS4GC asks for (dominator
//! trees, target info: a few milliseconds), since the new pass manager's timers pause a pass
//! only for nested passes, not for analyses. Subtracting an `opt-19 -passes=verify` run
//! instead would take the difference of two noisy process times, each dominated by
//! parsing. Locus's side is timed on the benchmark thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), so both sides count CPU time and other processes on a
//! shared machine count on neither; `LOCUS_BENCH_CLOCK=wall` switches Locus to wall time.
//! `lower_module` ends with LLVM's verifier over the module, which RS4GC's line does not
//! include: the bench also times that verifier alone on the lowered module and prints the
//! ratio without it.
//!
//! Environment: `LOCUS_GC_BENCH_INSTRUCTIONS` (N; 2N is also run),
//! `LOCUS_GC_BENCH_SAMPLES` (criterion samples per benchmark, at least 10, the default),
//! `LOCUS_GC_BENCH_RS4GC_RUNS` (RS4GC runs at each size), `LOCUS_BENCH_OPT` (default
//! `opt-19`), `LOCUS_GC_BENCH_MODE=phases` (generate N, lower it three times phase by
//! phase, print the medians and stop: the harness for a profiler, e.g. `valgrind
//! --tool=callgrind --toggle-collect='*phases*'` on the binary cargo built). Without opt, the RS4GC side,
//! the opt checks and the ratio are skipped with a message; Locus is still timed. Run as a
//! test (`cargo test --benches`, no `--bench` argument), N defaults to 5,000.

use std::cell::RefCell;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use locus_gc::lower::{lower_module, lower_module_observed, FunctionReport, LowerOptions, Phase};
use locus_gc::run::{run, RunOptions};
use locus_gc::runtime::OnFault;
use locus_llvm::{Context, Module};

mod gen;

use gen::{generate, Generated, Params};

const DEFAULT_INSTRUCTIONS: usize = 100_000;
/// The size when run as a test (`cargo test --benches`).
const TEST_INSTRUCTIONS: usize = 5_000;
/// The runnable instance checked under the stress collector.
const RUN_INSTRUCTIONS: usize = 3_000;
/// Goals from the issue.
const RATIO_GOAL: f64 = 0.5;
const SCALING_GOAL: f64 = 2.2;

/// The clock Locus's side is read on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Clock {
    ThreadCpu,
    Wall,
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

#[cfg(target_os = "linux")]
extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

#[cfg(target_os = "linux")]
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

impl Clock {
    fn from_env() -> Self {
        match std::env::var("LOCUS_BENCH_CLOCK").as_deref() {
            Ok("wall") => Clock::Wall,
            _ if cfg!(target_os = "linux") => Clock::ThreadCpu,
            _ => Clock::Wall,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Clock::ThreadCpu => "thread CPU time",
            Clock::Wall => "wall time",
        }
    }

    /// A point on this clock.
    fn now(self) -> Stamp {
        match self {
            #[cfg(target_os = "linux")]
            Clock::ThreadCpu => {
                let mut ts = Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `ts` is a valid, writable timespec of the C layout on 64-bit Linux.
                let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
                if rc != 0 {
                    panic!("clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
                }
                Stamp::Cpu(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
            }
            _ => Stamp::Wall(Instant::now()),
        }
    }
}

#[derive(Clone, Copy)]
enum Stamp {
    Cpu(Duration),
    Wall(Instant),
}

impl Stamp {
    fn elapsed(self, clock: Clock) -> Duration {
        match (self, clock.now()) {
            (Stamp::Cpu(a), Stamp::Cpu(b)) => b.saturating_sub(a),
            (Stamp::Wall(a), _) => a.elapsed(),
            (Stamp::Cpu(_), Stamp::Wall(_)) => Duration::ZERO,
        }
    }
}

/// Per-iteration seconds of every sample criterion took, warm-up first.
type Samples = Rc<RefCell<Vec<f64>>>;

fn median_of_last(samples: &Samples, n: usize) -> Option<f64> {
    let all = samples.borrow();
    if all.len() < n || n == 0 {
        return None;
    }
    let mut last: Vec<f64> = all[all.len() - n..].to_vec();
    last.sort_by(f64::total_cmp);
    Some(if n % 2 == 1 {
        last[n / 2]
    } else {
        (last[n / 2 - 1] + last[n / 2]) / 2.0
    })
}

fn opt_tool() -> String {
    std::env::var("LOCUS_BENCH_OPT").unwrap_or_else(|_| "opt-19".into())
}

/// Runs opt with `args`; Ok(stderr) on success.
fn opt(args: &[&str]) -> Result<String, String> {
    let tool = opt_tool();
    let out = Command::new(&tool)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {tool}: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!(
            "{tool} {} failed ({}):\n{stderr}",
            args.join(" "),
            out.status
        ));
    }
    Ok(stderr)
}

fn path_str(p: &Path) -> &str {
    match p.to_str() {
        Some(s) => s,
        None => panic!("non-UTF-8 path {}", p.display()),
    }
}

/// Seconds of the pass named `name` in a `-time-passes` report: its User+System column in
/// the pass execution report. LLVM prints only the columns whose total is not zero, so the
/// column is found from the header (`---User Time---   --System Time--   --User+System--
/// ---Wall Time---  --- Name ---`); without a User+System column, the wall time is used.
fn pass_seconds(report: &str, name: &str) -> Option<f64> {
    let pass_part = report.split("Analysis execution timing report").next()?;
    let header = pass_part.lines().find(|l| l.contains("Wall Time"))?;
    let mut columns: Vec<(usize, &str)> = ["User Time", "System Time", "User+System", "Wall Time"]
        .iter()
        .filter_map(|c| header.find(c).map(|at| (at, *c)))
        .collect();
    columns.sort_unstable();
    let wanted = columns
        .iter()
        .position(|(_, c)| *c == "User+System")
        .or_else(|| columns.iter().position(|(_, c)| *c == "Wall Time"))?;
    pass_part.lines().find_map(|line| {
        let line = line.trim();
        if !line.ends_with(name) {
            return None;
        }
        // Each column is "seconds (percent%)"; the percentages are "(" "12.3%)" or "(100.0%)".
        let numbers: Vec<f64> = line
            .split_whitespace()
            .filter(|w| !w.starts_with('(') && !w.ends_with("%)"))
            .filter_map(|w| w.parse().ok())
            .collect();
        numbers.get(wanted).copied()
    })
}

/// A self-check of [`pass_seconds`] on the two header shapes (run at start-up: a bench
/// target has no test harness).
fn check_pass_seconds() {
    let four = "\
   ---User Time---   --System Time--   --User+System--   ---Wall Time---  --- Name ---
   2.0374 ( 89.2%)   0.1177 ( 99.8%)   2.1551 ( 89.7%)   3.0890 ( 92.0%)  RewriteStatepointsForGC
   0.2475 ( 10.8%)   0.0002 (  0.2%)   0.2477 ( 10.3%)   0.2687 (  8.0%)  VerifierPass
";
    assert_eq!(pass_seconds(four, "RewriteStatepointsForGC"), Some(2.1551));
    let no_system = "\
   ---User Time---   --User+System--   ---Wall Time---  --- Name ---
   1.5000 (100.0%)   1.5000 (100.0%)   1.7000 (100.0%)  RewriteStatepointsForGC
";
    assert_eq!(
        pass_seconds(no_system, "RewriteStatepointsForGC"),
        Some(1.5)
    );
}

/// RS4GC's own time on `file`, from `-time-passes`.
fn rs4gc_seconds(file: &Path) -> Result<f64, String> {
    let report = opt(&[
        "-passes=rewrite-statepoints-for-gc",
        "-time-passes",
        "-disable-verify",
        "-disable-output",
        path_str(file),
    ])?;
    pass_seconds(&report, "RewriteStatepointsForGC")
        .ok_or_else(|| format!("no RewriteStatepointsForGC line in:\n{report}"))
}

/// One size of the benchmark.
struct Case {
    label: String,
    gen: Generated,
    rs4gc_file: PathBuf,
    report: FunctionReport,
}

fn parse<'c>(ctx: &'c Context, text: &str) -> Module<'c> {
    match Module::parse_ir(ctx, "big.ll", text) {
        Ok(m) => m,
        Err(e) => panic!("the generated module does not parse: {e}"),
    }
}

fn lower_once(text: &str) -> (FunctionReport, String) {
    let ctx = Context::new();
    let module = parse(&ctx, text);
    let reports = match lower_module(&module, LowerOptions::default()) {
        Ok(r) => r,
        Err(e) => panic!("Locus cannot lower the generated function: {e}"),
    };
    let Some(report) = reports.into_iter().find(|r| r.function == "big") else {
        panic!("no report for @big");
    };
    (report, module.print())
}

/// Locus's time per phase, one run.
struct Phases {
    times: Vec<(&'static str, Duration)>,
    /// Slots the phase-by-phase run used for `@big`, to check it is still the pipeline
    /// `lower_module` runs.
    slots: usize,
}

/// `lower_module`'s phases timed on `clock` through `lower_module_observed` (the same
/// lowering; each phase lasts until the next one starts): where the time goes at one size.
fn phases(text: &str, clock: Clock) -> Phases {
    let ctx = Context::new();
    let module = parse(&ctx, text);
    let mut times: Vec<(&'static str, Duration)> = Vec::new();
    let mut current: Option<(Phase, Stamp)> = None;
    let mut add = |phase: Phase, start: Stamp| {
        let name = phase_name(phase);
        let d = start.elapsed(clock);
        match times.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += d,
            None => times.push((name, d)),
        }
    };
    let reports = {
        let mut at = |phase: Phase| {
            if let Some((p, start)) = current.take() {
                add(p, start);
            }
            current = Some((phase, clock.now()));
        };
        match lower_module_observed(&module, LowerOptions::default(), &mut at) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    };
    if let Some((p, start)) = current {
        add(p, start);
    }
    let slots = reports
        .iter()
        .find(|r| r.function == "big")
        .map_or(0, |r| r.slots);
    Phases { times, slots }
}

/// How the table names a phase.
fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Effects => "effects",
        Phase::Scan => "scan",
        Phase::Liveness => "liveness",
        Phase::Refine => "refine",
        Phase::Color => "color",
        Phase::Place => "place",
        Phase::Emit => "emit",
        Phase::Finish => "finish",
        Phase::Verify => "verify",
        _ => "other",
    }
}

/// Runs [`phases`] `runs` times and prints each phase's median.
fn print_phases(label: &str, text: &str, clock: Clock, runs: usize, expect_slots: Option<usize>) {
    let all: Vec<Phases> = (0..runs.max(1)).map(|_| phases(text, clock)).collect();
    if let Some(slots) = expect_slots {
        for p in &all {
            assert_eq!(
                p.slots, slots,
                "the phase-by-phase run no longer matches lower_module: update `phases`"
            );
        }
    }
    let median = |mut v: Vec<Duration>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or_default()
    };
    let names: Vec<&'static str> = all[0].times.iter().map(|(n, _)| *n).collect();
    let parts: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let d = median(
                all.iter()
                    .filter_map(|p| p.times.get(i).map(|t| t.1))
                    .collect(),
            );
            format!("{n} {:.1}", d.as_secs_f64() * 1e3)
        })
        .collect();
    let totals: Vec<String> = all
        .iter()
        .map(|p| {
            let t: Duration = p.times.iter().map(|(_, d)| *d).sum();
            format!("{:.0}", t.as_secs_f64() * 1e3)
        })
        .collect();
    eprintln!(
        "  Locus phases at {label}, median of {} runs (ms): {}; totals [{}]",
        all.len(),
        parts.join(", "),
        totals.join(", ")
    );
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// Generates one size, writes both flavours, checks them and lowers once. With
/// `check_output`, RS4GC's output is also written and counted (it is ten times the input;
/// the timed runs use `-disable-output`).
fn make_case(instructions: usize, dir: &Path, have_opt: bool, check_output: bool) -> Case {
    let started = Instant::now();
    let gen = generate(Params::new(instructions), false);
    let label = format!("{}k", gen.instructions_locus / 1000);
    let locus_file = dir.join(format!("big_{label}_locus.ll"));
    let rs4gc_file = dir.join(format!("big_{label}_rs4gc.ll"));
    for (file, text) in [(&locus_file, &gen.locus), (&rs4gc_file, &gen.statepoint)] {
        if let Err(e) = std::fs::write(file, text) {
            panic!("cannot write {}: {e}", file.display());
        }
    }
    let [straight, call, diamond, looped, select] = gen.regions;
    eprintln!(
        "{label}: {} instructions (RS4GC flavour {}), {} safepoints, {} blocks; regions: \
         {straight} straight, {call} call, {diamond} diamond, {looped} loop, {select} select; \
         {} tracked phis, {} derived phis, {} tracked selects, {} derived selects, {} tracked \
         loads, {} tracked stores; generated in {:.2?}\n  {}\n  {}",
        gen.instructions_locus,
        gen.instructions_statepoint,
        gen.safepoints,
        gen.blocks,
        gen.tracked_phis,
        gen.derived_phis,
        gen.tracked_selects,
        gen.derived_selects,
        gen.tracked_loads,
        gen.tracked_stores,
        started.elapsed(),
        locus_file.display(),
        rs4gc_file.display(),
    );

    let (report, lowered) = lower_once(&gen.locus);
    assert_eq!(
        report.safepoints.len(),
        gen.safepoints,
        "Locus found a different number of safepoints than the generator made"
    );
    if have_opt {
        for file in [&locus_file, &rs4gc_file] {
            if let Err(e) = opt(&["-passes=verify", "-disable-output", path_str(file)]) {
                panic!("{e}");
            }
        }
        let lowered_file = dir.join(format!("big_{label}_locus_lowered.ll"));
        if let Err(e) = std::fs::write(&lowered_file, &lowered) {
            panic!("cannot write {}: {e}", lowered_file.display());
        }
        if let Err(e) = opt(&["-passes=verify", "-disable-output", path_str(&lowered_file)]) {
            panic!("Locus's output does not verify: {e}");
        }
        eprintln!("  opt -passes=verify: both flavours and Locus's output pass");
    }
    if have_opt && check_output {
        let rewritten = dir.join(format!("big_{label}_rs4gc_out.ll"));
        if let Err(e) = opt(&[
            "-passes=rewrite-statepoints-for-gc",
            "-S",
            "-o",
            path_str(&rewritten),
            path_str(&rs4gc_file),
        ]) {
            panic!("RS4GC rejects the generated function: {e}");
        }
        let text = match std::fs::read_to_string(&rewritten) {
            Ok(t) => t,
            Err(e) => panic!("cannot read {}: {e}", rewritten.display()),
        };
        let statepoints = count(
            &text,
            "= call token (i64, i32, ptr, i32, i32, ...) @llvm.experimental.gc.statepoint",
        );
        let relocates = count(&text, "@llvm.experimental.gc.relocate.p1(token");
        let base_phis = count(&text, ".base = phi");
        let base_selects = count(&text, ".base = select");
        assert_eq!(
            statepoints, gen.safepoints,
            "RS4GC made a different number of statepoints than the generator's safepoints"
        );
        assert!(relocates > 0, "RS4GC made no gc.relocate");
        eprintln!(
            "  RS4GC output: {statepoints} gc.statepoint, {relocates} gc.relocate ({:.1} per statepoint), \
             {base_phis} base phis, {base_selects} base selects ({})",
            relocates as f64 / statepoints.max(1) as f64,
            rewritten.display()
        );
    }
    eprintln!(
        "  Locus: {} slots for a lower bound of {} (values live together at one safepoint); \
         {} root stores, {} nulls placed",
        report.slots,
        report.max_live,
        report
            .safepoints
            .iter()
            .map(|s| s.stored.len())
            .sum::<usize>(),
        report
            .safepoints
            .iter()
            .map(|s| s.nulled.len())
            .sum::<usize>(),
    );
    Case {
        label,
        gen,
        rs4gc_file,
        report,
    }
}

/// The generator's program made runnable, at a small size: its result must be the same
/// with and without the stress collector, with no dangling reference.
fn check_runnable() {
    let gen = generate(Params::new(RUN_INSTRUCTIONS), true);
    let go = |stress: bool| {
        let options = RunOptions {
            stress,
            on_fault: OnFault::Record,
            ..RunOptions::default()
        };
        // SAFETY: the generated program only touches the objects the runtime gives it,
        // while they are live (the stress run checks that).
        match unsafe { run("big_run.ll", &gen.locus, options) } {
            Ok(o) => o,
            Err(e) => panic!("the runnable instance fails: {e}"),
        }
    };
    let plain = go(false);
    let stressed = go(true);
    assert!(
        stressed.faults.is_empty(),
        "the stress collector found faults in the generated program: {:#?}",
        stressed.faults
    );
    assert_eq!(
        plain.value, stressed.value,
        "the generated program gives different results with and without stress"
    );
    eprintln!(
        "runnable instance ({} instructions, {} safepoints): result {} with and without \
         --stress, {} collections, no dangling reference",
        gen.instructions_locus, gen.safepoints, stressed.value, stressed.stats.collections
    );
}

fn main() {
    // `cargo bench` passes --bench; without it (`cargo test --benches`) criterion only runs
    // each benchmark once, and a small size is enough.
    let bench = std::env::args().any(|a| a == "--bench");
    let n = std::env::var("LOCUS_GC_BENCH_INSTRUCTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench {
            DEFAULT_INSTRUCTIONS
        } else {
            TEST_INSTRUCTIONS
        });
    // RS4GC runs at N and 2N.
    let rs4gc_runs: Vec<usize> = match std::env::var("LOCUS_GC_BENCH_RS4GC_RUNS") {
        Ok(v) => match v.parse::<usize>() {
            Ok(k) => vec![k.max(1); 2],
            Err(_) => panic!("LOCUS_GC_BENCH_RS4GC_RUNS={v}: not a number"),
        },
        Err(_) if bench => vec![5, 3],
        Err(_) => vec![1, 1],
    };
    let samples: usize = std::env::var("LOCUS_GC_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .max(10);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("locus-gc-bench");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("cannot create {}: {e}", dir.display());
    }
    let have_opt = match opt(&["--version"]) {
        Ok(_) => true,
        Err(e) => {
            eprintln!(
                "{e}\nopt unavailable: skipping the RS4GC side, the opt checks and the ratio"
            );
            false
        }
    };

    check_pass_seconds();
    let clock = Clock::from_env();
    if std::env::var("LOCUS_GC_BENCH_MODE").as_deref() == Ok("phases") {
        // For profilers: lower once at N, phase by phase, and stop.
        let gen = generate(Params::new(n), false);
        print_phases(
            &format!("{}k", gen.instructions_locus / 1000),
            &gen.locus,
            clock,
            3,
            None,
        );
        return;
    }

    check_runnable();
    let cases = [
        make_case(n, &dir, have_opt, true),
        make_case(2 * n, &dir, have_opt, false),
    ];
    for case in &cases {
        print_phases(
            &case.label,
            &case.gen.locus,
            clock,
            3,
            Some(case.report.slots),
        );
    }

    eprintln!(
        "timing Locus with {}; RS4GC with the RewriteStatepointsForGC line of -time-passes \
         (user+system)",
        clock.name()
    );
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let mut locus: Vec<Samples> = Vec::new();
    let mut verify: Vec<Samples> = Vec::new();
    {
        let mut g = c.benchmark_group("gc_root_placement");
        g.sample_size(samples).sampling_mode(SamplingMode::Flat);
        for case in &cases {
            let s: Samples = Rc::default();
            let v: Samples = Rc::default();
            let text = case.gen.locus.as_str();
            let started = Instant::now();
            g.bench_function(format!("locus/{}", case.label), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut verify_total = Duration::ZERO;
                    for _ in 0..iters {
                        let ctx = Context::new();
                        let module = parse(&ctx, text);
                        let start = clock.now();
                        let r = lower_module(black_box(&module), LowerOptions::default());
                        let t = start.elapsed(clock);
                        if let Err(e) = black_box(r) {
                            panic!("{e}");
                        }
                        total += t;
                        let start = clock.now();
                        let r = module.verify();
                        verify_total += start.elapsed(clock);
                        if let Err(e) = r {
                            panic!("{e}");
                        }
                    }
                    s.borrow_mut().push(total.as_secs_f64() / iters as f64);
                    v.borrow_mut()
                        .push(verify_total.as_secs_f64() / iters as f64);
                    total
                })
            });
            eprintln!(
                "  (locus/{} took {:.0?} in all)",
                case.label,
                started.elapsed()
            );
            locus.push(s);
            verify.push(v);
        }
        g.finish();
    }
    let locus_med: Vec<Option<f64>> = locus.iter().map(|s| median_of_last(s, samples)).collect();
    let verify_med: Vec<Option<f64>> = verify.iter().map(|s| median_of_last(s, samples)).collect();

    // RS4GC: opt times itself, so criterion's iteration scheme adds nothing but its minimum
    // of 10 samples plus warm-up, which at 2N (about 15 s a run) would take minutes; a few
    // runs and their median instead.
    let mut rs4gc_med: Vec<Option<f64>> = vec![None; cases.len()];
    if have_opt {
        for (i, case) in cases.iter().enumerate() {
            let runs = rs4gc_runs.get(i).copied().unwrap_or(3);
            let started = Instant::now();
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                match rs4gc_seconds(&case.rs4gc_file) {
                    Ok(t) => times.push(t),
                    Err(e) => panic!("{e}"),
                }
            }
            let ms: Vec<String> = times.iter().map(|t| format!("{:.0}", t * 1e3)).collect();
            times.sort_by(f64::total_cmp);
            let median = times.get(times.len() / 2).copied();
            eprintln!(
                "rs4gc/{}: {} runs (ms) [{}], median {:.0} ms (took {:.0?} in all)",
                case.label,
                runs,
                ms.join(", "),
                median.unwrap_or(0.0) * 1e3,
                started.elapsed()
            );
            rs4gc_med[i] = median;
        }
    }

    eprintln!(
        "\n== GC root placement: Locus median of {samples} samples, RS4GC median of its runs =="
    );
    for (i, case) in cases.iter().enumerate() {
        let (l, v, r) = (locus_med[i], verify_med[i], rs4gc_med[i]);
        let ms = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{:.1} ms", x * 1e3));
        eprintln!(
            "{:>5} ({} insts, {} safepoints, {} blocks): locus {} (of which LLVM's verifier \
             ~{}), rs4gc {}",
            case.label,
            case.gen.instructions_locus,
            case.gen.safepoints,
            case.gen.blocks,
            ms(l),
            ms(v),
            ms(r),
        );
        if let (Some(l), Some(r)) = (l, r) {
            let without = v.map(|v| (l - v) / r);
            eprintln!(
                "       ratio locus/rs4gc = {:.2} (goal <= {RATIO_GOAL:.1}: {}); without Locus's \
                 final verifier {}",
                l / r,
                if l / r <= RATIO_GOAL {
                    "met"
                } else {
                    "NOT met"
                },
                without.map_or("n/a".into(), |w| format!("{w:.2}")),
            );
        }
        eprintln!(
            "       slots {} vs lower bound {} (max values live together){}",
            case.report.slots,
            case.report.max_live,
            if case.report.slots == case.report.max_live {
                ": optimal"
            } else {
                ""
            }
        );
    }
    let size = cases[1].gen.instructions_locus as f64 / cases[0].gen.instructions_locus as f64;
    let scale = |v: &[Option<f64>]| match (v[0], v[1]) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    if let Some(s) = scale(&locus_med) {
        eprintln!(
            "scaling {size:.2}x input: locus {s:.2}x (goal <= {SCALING_GOAL}: {})",
            if s <= SCALING_GOAL { "met" } else { "NOT met" }
        );
    }
    if let Some(s) = scale(&rs4gc_med) {
        eprintln!("scaling {size:.2}x input: rs4gc {s:.2}x");
    }
    c.final_summary();
}
