//! Julia-style frames against statepoint roots on the same programs (issue 25, section 3).
//!
//! Run with `cargo bench -p locus-gc --bench roots`. In one run, for each program below
//! (the same Julia-style IR for both), it prints
//! 1. run time without collections: the entry called many times with the default heap
//!    threshold, which these programs never reach (frame stores against spills and
//!    reloads), median of `LOCUS_GC_BENCH_RUNS` (default 15) timings;
//! 2. time per collection per frame walked: the stress collector's run minus the run
//!    without collections, divided by the frames its collections walked (frames: GC frames
//!    in the chain; statepoints: compiled frames on the frame-pointer chain), for
//!    statepoints also with the moving collector;
//! 3. code size: the `.text` bytes `llc-19 -O2 -filetype=obj` makes of each lowered module
//!    (as `llvm-size-19` counts them; without the tools, the JIT's function sizes);
//!
//! and the ratios statepoint / frames. Run as a test (`cargo test --benches`) it only
//! checks that both strategies give each program's result.

use std::process::Command;
use std::time::{Duration, Instant};

use locus_gc::lower::{lower_module, LowerOptions};
use locus_gc::run::{lower_statepoints, prepare_with_roots, Prepared, Roots, RunOutcome};
use locus_gc::runtime::OnFault;
use locus_llvm::{Context, Module};

/// A binary tree of depth 13 built and counted 8 times: calls, allocations and tracked
/// values live across them (about 65,000 objects: no collection under the default
/// threshold).
const TREE: &str = r#"
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)

define ptr addrspace(10) @build(i64 %depth) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %leaf = icmp eq i64 %depth, 0
  br i1 %leaf, label %ret.null, label %node
ret.null:
  ret ptr addrspace(10) null
node:
  %d1 = sub i64 %depth, 1
  %left = call ptr addrspace(10) @build(i64 %d1)
  %right = call ptr addrspace(10) @build(i64 %d1)
  %n = call ptr addrspace(10) @locus_gc_alloc(i64 2, i64 8)
  %n.d = addrspacecast ptr addrspace(10) %n to ptr addrspace(11)
  store ptr addrspace(10) %left, ptr addrspace(11) %n.d
  %r.p = getelementptr i8, ptr addrspace(11) %n.d, i64 8
  store ptr addrspace(10) %right, ptr addrspace(11) %r.p
  ret ptr addrspace(10) %n
}

define i64 @count(ptr addrspace(10) %t) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %empty = icmp eq ptr addrspace(10) %t, null
  br i1 %empty, label %zero, label %inner
zero:
  ret i64 0
inner:
  %t.d = addrspacecast ptr addrspace(10) %t to ptr addrspace(11)
  %l = load ptr addrspace(10), ptr addrspace(11) %t.d
  %r.p = getelementptr i8, ptr addrspace(11) %t.d, i64 8
  %r = load ptr addrspace(10), ptr addrspace(11) %r.p
  %cl = call i64 @count(ptr addrspace(10) %l)
  %cr = call i64 @count(ptr addrspace(10) %r)
  %s = add i64 %cl, %cr
  %s1 = add i64 %s, 1
  ret i64 %s1
}

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %acc = phi i64 [ 0, %entry ], [ %acc.next, %loop ]
  %t = call ptr addrspace(10) @build(i64 13)
  %c = call i64 @count(ptr addrspace(10) %t)
  %acc.next = add i64 %acc, %c
  %i.next = add i64 %i, 1
  %more = icmp ult i64 %i.next, 8
  br i1 %more, label %loop, label %done
done:
  ret i64 %acc.next
}
"#;

/// A recursion 1,500 deep, each frame holding an object across its call; the stress
/// collector collects at each allocation, so its collections walk chains of every length.
const DEEP: &str = r#"
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)

define i64 @rec(i64 %n) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %o = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %o.d = addrspacecast ptr addrspace(10) %o to ptr addrspace(11)
  store i64 %n, ptr addrspace(11) %o.d
  %z = icmp eq i64 %n, 0
  br i1 %z, label %bottom, label %down
bottom:
  ret i64 0
down:
  %n1 = sub i64 %n, 1
  %r = call i64 @rec(i64 %n1)
  %v = load i64, ptr addrspace(11) %o.d
  %s = add i64 %r, %v
  ret i64 %s
}

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %r = call i64 @rec(i64 1500)
  ret i64 %r
}
"#;

fn runs() -> usize {
    std::env::var("LOCUS_GC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(15)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Calls the entry `n` times; the median time and the last outcome.
fn timed(p: &Prepared, stress: bool, moving: bool, n: usize) -> (Duration, RunOutcome) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..n {
        let start = Instant::now();
        // SAFETY: the bench programs only touch the objects the runtime gives them.
        let out = unsafe { p.call_with(stress, moving, OnFault::Record) };
        times.push(start.elapsed());
        assert!(out.faults.is_empty(), "{:?}", out.faults);
        last = Some(out);
    }
    (median(times), last.unwrap_or_else(|| panic!("no run")))
}

/// The `.text` bytes llc-19 makes of `text`, if the tools are there.
fn text_bytes(text: &str, name: &str) -> Option<u64> {
    let dir = std::env::temp_dir().join(format!("locus-gc-roots-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let ll = dir.join(format!("{name}.ll"));
    let obj = dir.join(format!("{name}.o"));
    std::fs::write(&ll, text).ok()?;
    let ok = Command::new("llc-19")
        .args(["-O2", "-filetype=obj", "-o"])
        .arg(&obj)
        .arg(&ll)
        .status()
        .ok()?
        .success();
    if !ok {
        return None;
    }
    let out = Command::new("llvm-size-19")
        .arg("-A")
        .arg(&obj)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let bytes = text
        .lines()
        .filter(|l| l.starts_with(".text"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    let _ = std::fs::remove_dir_all(&dir);
    Some(bytes)
}

fn code_size(ir: &str, name: &str) -> (u64, u64) {
    let ctx = Context::new();
    let frames = Module::parse_ir(&ctx, name, ir).unwrap_or_else(|e| panic!("{e}"));
    lower_module(&frames, LowerOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let (sp, _) = lower_statepoints(&ctx, name, ir.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    match (
        text_bytes(&frames.print(), &format!("{name}-frames")),
        text_bytes(&sp.print(), &format!("{name}-statepoint")),
    ) {
        (Some(f), Some(s)) => (f, s),
        _ => {
            let jit_bytes = |roots| {
                prepare_with_roots(name, ir, "main", None, roots)
                    .map(|p| p.functions().iter().map(|f| f.len as u64).sum())
                    .unwrap_or(0)
            };
            (jit_bytes(Roots::Frames), jit_bytes(Roots::Statepoint))
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

fn main() {
    let test_mode = !std::env::args().any(|a| a == "--bench");
    let n = if test_mode { 1 } else { runs() };
    // The tree's 65,000 objects under the stress collector would be 65,000 collections of
    // a growing heap: it is timed without collections only.
    for (name, ir, expect, stress) in [
        ("tree", TREE, 8 * 8191, false),
        ("deep", DEEP, 1500 * 1501 / 2, true),
    ] {
        let frames = prepare_with_roots(name, ir, "main", None, Roots::Frames)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let sp = prepare_with_roots(name, ir, "main", None, Roots::Statepoint)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (f_plain, out) = timed(&frames, false, false, n);
        assert_eq!(out.value, expect, "{name}: frames");
        let (s_plain, out) = timed(&sp, false, false, n);
        assert_eq!(out.value, expect, "{name}: statepoint");
        let (f_code, s_code) = code_size(ir, name);
        if !test_mode {
            println!("{name}:");
            println!(
                "  run time without collections: frames {:.3} ms, statepoint {:.3} ms, ratio statepoint/frames {:.2}",
                f_plain.as_secs_f64() * 1e3,
                s_plain.as_secs_f64() * 1e3,
                ratio(s_plain.as_secs_f64(), f_plain.as_secs_f64())
            );
            println!(
                "  code size (.text): frames {f_code} B, statepoint {s_code} B, ratio {:.2}",
                ratio(s_code as f64, f_code as f64)
            );
        }
        if !stress {
            continue;
        }
        let (f_stress, f_out) = timed(&frames, true, false, n);
        let (s_stress, s_out) = timed(&sp, true, false, n);
        let (m_stress, m_out) = timed(&sp, true, true, n);
        for out in [&f_out, &s_out, &m_out] {
            assert_eq!(out.value, expect, "{name}: under stress");
        }
        if test_mode {
            continue;
        }
        let per_frame = |stress: Duration, plain: Duration, out: &RunOutcome| {
            let walked = out.stats.frames_walked.max(1) as f64;
            stress.saturating_sub(plain).as_secs_f64() * 1e9 / walked
        };
        let f_pf = per_frame(f_stress, f_plain, &f_out);
        let s_pf = per_frame(s_stress, s_plain, &s_out);
        let m_pf = per_frame(m_stress, s_plain, &m_out);
        println!(
            "  stress: {} collections; frames walked: frames {}, statepoint {}",
            f_out.stats.collections, f_out.stats.frames_walked, s_out.stats.frames_walked
        );
        println!(
            "  time per collection per frame walked: frames {f_pf:.1} ns, statepoint {s_pf:.1} ns, \
             statepoint moving {m_pf:.1} ns; ratio statepoint/frames {:.2}, moving/frames {:.2}",
            ratio(s_pf, f_pf),
            ratio(m_pf, f_pf)
        );
    }
}
