//! A measurement, not a test: allocation throughput and collection counts of each MMTk
//! plan on a binary-trees loop (GCBench's shape: a long-lived tree, then many short-lived
//! trees of growing depth, built bottom-up through GC frames as compiled code would).
//!
//! Run (release, one child process per plan):
//! `cargo test -p locus-gc-runtime --release --test mmtk_bench -- --ignored --nocapture`

use std::cell::Cell;
use std::process::Command;
use std::time::Instant;

use locus_gc_runtime::mmtk::{MmtkHeap, MmtkMutator, MmtkOptions, Plan, RootSet};
use locus_gc_runtime::runtime::GcFrame;

const PLAN_ENV: &str = "LOCUS_MMTK_BENCH_PLAN";
const HEAP_BYTES: usize = 64 << 20;
const LONG_LIVED_DEPTH: u32 = 16;
const MAX_DEPTH: u32 = 16;
const MIN_DEPTH: u32 = 4;

#[test]
#[ignore = "a measurement: run with --ignored --nocapture, in release"]
fn binary_trees_per_plan() {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("the bench binary: {e}"));
    for plan in Plan::ALL {
        let out = Command::new(&exe)
            .args(["child", "--exact", "--ignored", "--nocapture"])
            .env(PLAN_ENV, plan.name())
            .output()
            .unwrap_or_else(|e| panic!("the bench binary runs: {e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().find(|l| l.starts_with("mmtk-bench"));
        match line {
            Some(line) if out.status.success() => println!("{line}"),
            _ => panic!(
                "{plan} failed ({}):\n{text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

#[test]
#[ignore = "run by binary_trees_per_plan in a child process"]
fn child() {
    // Run directly (`--ignored` runs every ignored test): nothing to do.
    let Ok(name) = std::env::var(PLAN_ENV) else {
        return;
    };
    let plan = Plan::from_name(&name).unwrap_or_else(|e| panic!("a plan: {e}"));
    let mut options = MmtkOptions::new(plan, HEAP_BYTES);
    options.workers = 2;
    let heap = MmtkHeap::new(options).unwrap_or_else(|e| panic!("the heap: {e}"));
    let mut m = heap.bind_mutator();
    let chain = Chain { head: Cell::new(0) };
    let mut outer = [GcFrame::header_word(1), 0, 0];
    link(&chain, &mut outer);
    let start = Instant::now();
    let long_lived = build(&mut m, &chain, LONG_LIVED_DEPTH);
    set(&mut outer, 2, long_lived);
    let mut checks = 0usize;
    let mut depth = MIN_DEPTH;
    while depth <= MAX_DEPTH {
        // As many nodes per depth as the long-lived tree has.
        let iterations = 1usize << (MAX_DEPTH - depth + MIN_DEPTH);
        for _ in 0..iterations {
            let t = build(&mut m, &chain, depth);
            checks += count(t);
        }
        depth += 2;
    }
    let elapsed = start.elapsed();
    assert_eq!(count(get(&outer, 2)), (1 << (LONG_LIVED_DEPTH + 1)) - 1);
    assert!(heap.take_faults().is_empty());
    let s = heap.stats();
    let secs = elapsed.as_secs_f64();
    println!(
        "mmtk-bench {plan:<11} {:>7.3} s  {:>6.2} M objects/s  {:>7.1} MB/s  {:>4} collections  ({} objects, {} MB, {checks} nodes checked, heap {} MB)",
        secs,
        s.objects_allocated as f64 / secs / 1e6,
        s.bytes_allocated as f64 / secs / 1e6,
        s.collections,
        s.objects_allocated,
        s.bytes_allocated >> 20,
        HEAP_BYTES >> 20,
    );
    chain.head.set(get(&outer, 1));
}

struct Chain {
    head: Cell<usize>,
}

fn get(frame: &[usize], i: usize) -> usize {
    // SAFETY: in bounds; volatile because the collector rewrites frames behind our back.
    unsafe { std::ptr::read_volatile(&frame[i]) }
}

fn set(frame: &mut [usize], i: usize, v: usize) {
    // SAFETY: as in `get`.
    unsafe { std::ptr::write_volatile(&mut frame[i], v) }
}

fn link(chain: &Chain, frame: &mut [usize]) {
    set(frame, 1, chain.head.get());
    chain.head.set(frame.as_ptr() as usize);
}

/// A tree of `depth` levels, nodes of two fields and 8 raw bytes, built bottom-up with
/// one frame (two roots) per level.
fn build(m: &mut MmtkMutator, chain: &Chain, depth: u32) -> usize {
    let mut frame = [GcFrame::header_word(2), 0, 0, 0];
    link(chain, &mut frame);
    if depth > 0 {
        let l = build(m, chain, depth - 1);
        set(&mut frame, 2, l);
        let r = build(m, chain, depth - 1);
        set(&mut frame, 3, r);
    }
    // SAFETY: the head of the bench's frame chain, alive while linked.
    let mut roots = |s: &mut RootSet| unsafe { s.push_frame(chain.head.get()) };
    let node = m
        .alloc(2, 8, &mut roots)
        .unwrap_or_else(|e| panic!("a node: {e}"));
    // SAFETY: a fresh node with two fields.
    unsafe { m.write_field(node, 0, get(&frame, 2)) };
    // SAFETY: as above.
    unsafe { m.write_field(node, 1, get(&frame, 3)) };
    chain.head.set(get(&frame, 1));
    node
}

fn count(node: usize) -> usize {
    if node == 0 {
        return 0;
    }
    // SAFETY: a live node's two fields.
    let l = unsafe { (node as *const usize).read() };
    // SAFETY: as above.
    let r = unsafe { ((node + 8) as *const usize).read() };
    1 + count(l) + count(r)
}
