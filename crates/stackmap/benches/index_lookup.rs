//! Time to a usable address index, the lookups, and the index's memory, over a
//! 1,000,000-record section: Locus against what a runtime using LLVM's own
//! `llvm::StackMapParser` would build, and against a plain Rust `HashMap` (issue 17, §6).
//!
//! Run with `cargo bench -p locus-stackmap --bench index_lookup`. In one run it
//! 1. generates the table `parse_walk` uses (see `synth`: 1,000 functions, 1,000,000
//!    records, 0 to 8 locations each, live-outs on about 15% of records);
//! 2. compiles `benches/llvm_index.cpp` with `clang++-19` against libLLVM-19 into the
//!    target directory (at run time) and loads it with `dlopen`;
//! 3. times, `RUNS` rounds, one of each in turn: **locus** (`Tables::new` with strict
//!    validation, then `StackMapIndex::new`), **llvm** (header check, `StackMapParser`
//!    construction, then an `llvm::DenseMap<uint64_t, SmallVector<RecordAccessor, 1>>` from
//!    function address + instruction offset to the records there, reserved up front) and
//!    **hashmap** (Locus's strict parse, then a `std::collections::HashMap<u64,
//!    Vec<Record>>` with the default hasher, reserved up front);
//! 4. times, `RUNS` rounds, one pass each over every address in shuffled order: Locus's
//!    `lookup` per address, Locus's `lookup_all` over the whole sequence, `DenseMap::find`
//!    (the loop in C++), and `HashMap::get`. Each folds the section offsets of the records
//!    found (no side reads the records' bytes), and the four folds must agree;
//! 5. measures each index's heap bytes per record: `StackMapIndex::heap_bytes`, the
//!    DenseMap's `getMemorySize()` (plus, shown apart, the buffers of addresses with several
//!    records and the parser's own record offsets), and the HashMap's from its capacity
//!    (buckets of key and `Vec` plus one control byte each, and each `Vec`'s buffer);
//! 6. times the first `StackMapIndex::by_id` call, which builds the index's by-ID table (not
//!    part of the time to a usable address index, nor of its memory above; neither anchor
//!    has one), and the index's heap bytes after it;
//! 7. prints the medians and ranges and the ratios against the goals.
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) on both sides;
//! `LOCUS_BENCH_CLOCK=wall` switches both to `CLOCK_MONOTONIC`. `LOCUS_BENCH_RUNS` sets the
//! rounds (default 11). `LOCUS_BENCH_CXX` (default `clang++-19`) and
//! `LOCUS_BENCH_LLVM_CONFIG` (default `llvm-config-19`) pick the tools.

use std::collections::HashMap;
use std::ffi::c_void;
use std::hint::black_box;
use std::time::{Duration, Instant};

use locus_stackmap::{
    IndexOptions, LittleEndian, ParseOptions, Record, StackMapIndex, Table, Tables,
};

mod anchor;
mod synth;

use anchor::{Anchor, Clock};

const FUNCTIONS: usize = 1_000;
const RECORDS: usize = 1_000_000;
const CONSTANTS: usize = 300;
const SEED: u64 = 0x5EED_57AC_4A90;

/// Goals of issue 17, §6, as ratios to LLVM + DenseMap.
const BUILD_GOAL: f64 = 0.5;
const LOOKUP_GOAL: f64 = 1.0;
const LOOKUP_ALL_GOAL: f64 = 0.5;
const MEMORY_GOAL: f64 = 0.75;

type BuildFn = unsafe extern "C" fn(*const u8, usize, libc::clockid_t, *mut u64) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type MemoryFn = unsafe extern "C" fn(*mut c_void, *mut u64, *mut u64, *mut u64, *mut u64);
type LookupsFn =
    unsafe extern "C" fn(*mut c_void, *const u64, usize, libc::clockid_t, *mut u64) -> u64;

/// The dlopen'ed C++ anchor.
struct Llvm {
    build: BuildFn,
    free: FreeFn,
    memory: MemoryFn,
    lookups: LookupsFn,
}

/// An index the anchor built, freed on drop.
struct LlvmIndex<'l> {
    llvm: &'l Llvm,
    handle: *mut c_void,
}

impl Llvm {
    /// Builds the index of `section` and returns it with the time it took on `clock`.
    fn build<'l>(&'l self, section: &[u8], clock: Clock) -> (LlvmIndex<'l>, Duration) {
        let mut ns = 0;
        // SAFETY: the function reads `len` bytes from `ptr`, which `section` provides, and
        // the index it returns only points into `section`, which outlives it here.
        let handle = unsafe { (self.build)(section.as_ptr(), section.len(), clock.id(), &mut ns) };
        assert!(!handle.is_null(), "LLVM rejects the generated section");
        (LlvmIndex { llvm: self, handle }, Duration::from_nanos(ns))
    }
}

impl LlvmIndex<'_> {
    /// (DenseMap bytes, spilled vector bytes, parser bytes, distinct addresses).
    fn memory(&self) -> (u64, u64, u64, u64) {
        let (mut m, mut s, mut p, mut a) = (0, 0, 0, 0);
        // SAFETY: a live index; the outputs are valid places.
        unsafe { (self.llvm.memory)(self.handle, &mut m, &mut s, &mut p, &mut a) };
        (m, s, p, a)
    }

    /// One `find` per address, timed in C++: (time, fold).
    fn lookups(&self, addresses: &[u64], clock: Clock) -> (Duration, u64) {
        let mut sum = 0;
        // SAFETY: a live index; `addresses` provides `len` addresses.
        let ns = unsafe {
            (self.llvm.lookups)(
                self.handle,
                addresses.as_ptr(),
                addresses.len(),
                clock.id(),
                &mut sum,
            )
        };
        (Duration::from_nanos(ns), sum)
    }
}

impl Drop for LlvmIndex<'_> {
    fn drop(&mut self) {
        // SAFETY: built by `llvm_index_build`, freed once.
        unsafe { (self.llvm.free)(self.handle) }
    }
}

fn load_anchor() -> Result<Llvm, String> {
    let anchor = Anchor::load("llvm_index")?;
    // The symbols are the extern "C" functions of llvm_index.cpp with these signatures, and
    // the library stays loaded for the life of the process.
    Ok(Llvm {
        // SAFETY: see above.
        build: unsafe { anchor.function("llvm_index_build")? },
        // SAFETY: see above.
        free: unsafe { anchor.function("llvm_index_free")? },
        // SAFETY: see above.
        memory: unsafe { anchor.function("llvm_index_memory")? },
        // SAFETY: see above.
        lookups: unsafe { anchor.function("llvm_index_lookups")? },
    })
}

fn tables(section: &[u8]) -> Vec<Table<'_, LittleEndian>> {
    match Tables::new(section, LittleEndian, ParseOptions::default()).collect() {
        Ok(t) => t,
        Err(e) => panic!("Locus rejects the generated section: {e}"),
    }
}

fn locus_index(section: &[u8]) -> StackMapIndex<'_, LittleEndian> {
    StackMapIndex::with_options(tables(section), 0, IndexOptions::default().huge_pages(true))
}

type RustMap<'a> = HashMap<u64, Vec<Record<'a, LittleEndian>>>;

fn hash_map(section: &[u8]) -> RustMap<'_> {
    let tables = tables(section);
    let n: usize = tables.iter().map(|t| t.num_records() as usize).sum();
    let mut map: RustMap<'_> = HashMap::with_capacity(n);
    for t in &tables {
        for (f, r) in t.records_with_functions() {
            let address = f.address.wrapping_add(u64::from(r.instruction_offset()));
            map.entry(address).or_default().push(r);
        }
    }
    map
}

/// The HashMap's heap bytes: its buckets (key and `Vec`) with one control byte each, and
/// each `Vec`'s buffer, and the group of control bytes hashbrown adds at the end.
fn hash_map_bytes(map: &RustMap<'_>) -> usize {
    let buckets = (map.capacity() * 8).div_ceil(7).next_power_of_two();
    let slot = std::mem::size_of::<(u64, Vec<Record<'_, LittleEndian>>)>() + 1;
    buckets * slot
        + 16
        + map
            .values()
            .map(|v| v.capacity() * std::mem::size_of::<Record<'_, LittleEndian>>())
            .sum::<usize>()
}

/// Median, minimum and maximum of `xs`.
fn stats(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

fn show(xs: &[f64], unit: &str) -> String {
    let (m, lo, hi) = stats(xs);
    format!("{m:.2} {unit} [{lo:.2}, {hi:.2}]")
}

fn verdict(ratio: f64, goal: f64) -> &'static str {
    if ratio <= goal {
        "met"
    } else {
        "MISSED"
    }
}

/// Per-round ratios `a[i] / b[i]`, shown as median [range] against `goal`.
fn ratio_line(what: &str, a: &[f64], b: &[f64], goal: Option<f64>) {
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    let (m, lo, hi) = stats(&r);
    match goal {
        Some(g) => println!(
            "  {what}: {m:.3}x [{lo:.3}, {hi:.3}] (goal <= {g}x: {})",
            verdict(m, g)
        ),
        None => println!("  {what}: {m:.3}x [{lo:.3}, {hi:.3}] (no goal)"),
    }
}

fn main() {
    let started = Instant::now();
    let section = synth::generate(FUNCTIONS, RECORDS, CONSTANTS, SEED);
    let bytes = black_box(section.bytes.as_slice());
    eprintln!(
        "input: one table, {} bytes, {} functions, {} constants, {RECORDS} records, {} \
         locations (by kind {:?}), {} live-outs; generated in {:.2?}",
        bytes.len(),
        section.num_functions,
        section.num_constants,
        section.num_locations,
        section.kinds,
        section.num_live_outs,
        started.elapsed()
    );
    let llvm = match load_anchor() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("LLVM anchor unavailable; this bench needs it: {e}");
            return;
        }
    };
    let clock = Clock::from_env();
    let runs: usize = std::env::var("LOCUS_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(11);

    // Every generated address in shuffled order, and the folds the lookups must give.
    let mut order: Vec<usize> = (0..RECORDS).collect();
    synth::Rng::new(SEED ^ 1).shuffle(&mut order);
    let addresses: Vec<u64> = order.iter().map(|&i| section.addresses[i]).collect();

    // Build times, in milliseconds, one of each per round.
    let (mut b_locus, mut b_llvm, mut b_hash) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = clock.now();
        let index = locus_index(black_box(bytes));
        let t = clock.since(start);
        black_box(&index);
        drop(index);
        b_locus.push(t.as_secs_f64() * 1e3);

        let (ix, t) = llvm.build(black_box(bytes), clock);
        drop(ix);
        b_llvm.push(t.as_secs_f64() * 1e3);

        let start = clock.now();
        let map = hash_map(black_box(bytes));
        let t = clock.since(start);
        black_box(&map);
        drop(map);
        b_hash.push(t.as_secs_f64() * 1e3);
    }

    let index = locus_index(bytes);
    let (dense, _) = llvm.build(bytes, clock);
    let map = hash_map(bytes);

    // The folds agree.
    let locus_fold = |run: &[u64]| -> u64 {
        let mut acc = 0u64;
        for &a in run {
            for r in index.lookup(a) {
                acc = acc.wrapping_add(r.record.offset() as u64);
            }
        }
        acc
    };
    let locus_all_fold = |run: &[u64]| -> u64 {
        let mut acc = 0u64;
        for records in index.lookup_all(run) {
            for r in records {
                acc = acc.wrapping_add(r.record.offset() as u64);
            }
        }
        acc
    };
    let hash_fold = |run: &[u64]| -> u64 {
        let mut acc = 0u64;
        for a in run {
            if let Some(records) = map.get(a) {
                for r in records {
                    acc = acc.wrapping_add(r.offset() as u64);
                }
            }
        }
        acc
    };
    for (&a, &id) in section.addresses.iter().zip(&section.ids) {
        assert!(
            index.lookup(a).any(|r| r.record.id() == id),
            "lookup({a:#x}) misses a record with ID {id:#x}"
        );
    }
    let want = locus_fold(&addresses);
    assert_eq!(locus_all_fold(&addresses), want, "lookup_all disagrees");
    assert_eq!(hash_fold(&addresses), want, "the HashMap disagrees");
    assert_eq!(
        dense.lookups(&addresses, clock).1,
        want,
        "the DenseMap disagrees"
    );
    eprintln!("lookup folds agree: {want:#x}");

    // Lookup times, nanoseconds per lookup, one pass of each per round.
    let per = |d: Duration| d.as_secs_f64() * 1e9 / addresses.len() as f64;
    let (mut l_locus, mut l_all, mut l_dense, mut l_hash) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = clock.now();
        black_box(locus_fold(black_box(&addresses)));
        l_locus.push(per(clock.since(start)));

        let start = clock.now();
        black_box(locus_all_fold(black_box(&addresses)));
        l_all.push(per(clock.since(start)));

        let (t, sum) = dense.lookups(black_box(&addresses), clock);
        black_box(sum);
        l_dense.push(per(t));

        let start = clock.now();
        black_box(hash_fold(black_box(&addresses)));
        l_hash.push(per(clock.since(start)));
    }

    // Memory.
    let locus_bytes = index.heap_bytes();
    let (dense_bytes, spilled, parser_bytes, distinct) = dense.memory();
    let hash_bytes = hash_map_bytes(&map);
    let per_record = |b: u64| b as f64 / RECORDS as f64;

    println!(
        "summary: index_lookup over one little-endian v3 table of {} bytes ({} functions, \
         {RECORDS} records at {distinct} distinct addresses; seed {SEED:#x}); clock: {} ({}); \
         {runs} rounds, median [min, max]",
        bytes.len(),
        section.num_functions,
        clock.name(),
        clock.id_name()
    );
    println!("time to a usable index (ms):");
    println!(
        "  locus (strict parse + StackMapIndex::new):          {}",
        show(&b_locus, "ms")
    );
    println!(
        "  llvm (StackMapParser + DenseMap<u64, SmallVector>): {}",
        show(&b_llvm, "ms")
    );
    println!(
        "  hashmap (strict parse + HashMap<u64, Vec<Record>>): {}",
        show(&b_hash, "ms")
    );
    ratio_line("locus / llvm+DenseMap", &b_locus, &b_llvm, Some(BUILD_GOAL));
    ratio_line("locus / HashMap", &b_locus, &b_hash, None);
    println!("lookup, shuffled addresses, one pass of {RECORDS} (ns per lookup):");
    println!("  locus lookup:      {}", show(&l_locus, "ns"));
    println!("  locus lookup_all:  {}", show(&l_all, "ns"));
    println!("  DenseMap::find:    {}", show(&l_dense, "ns"));
    println!("  HashMap::get:      {}", show(&l_hash, "ns"));
    ratio_line(
        "lookup / DenseMap::find",
        &l_locus,
        &l_dense,
        Some(LOOKUP_GOAL),
    );
    ratio_line(
        "lookup_all / DenseMap::find",
        &l_all,
        &l_dense,
        Some(LOOKUP_ALL_GOAL),
    );
    ratio_line("lookup / HashMap::get", &l_locus, &l_hash, None);
    ratio_line("lookup_all / HashMap::get", &l_all, &l_hash, None);
    println!("index memory (heap bytes per record):");
    println!(
        "  locus StackMapIndex::heap_bytes: {:.1} B ({locus_bytes} B)",
        per_record(locus_bytes as u64)
    );
    println!(
        "  DenseMap getMemorySize:          {:.1} B ({dense_bytes} B); plus spilled vectors \
         {:.1} B and the parser's record offsets {:.1} B",
        per_record(dense_bytes),
        per_record(spilled),
        per_record(parser_bytes)
    );
    println!(
        "  HashMap (capacity estimate):     {:.1} B ({hash_bytes} B; a Record is {} B and a \
         Vec's first buffer holds 4)",
        per_record(hash_bytes as u64),
        std::mem::size_of::<Record<'_, LittleEndian>>()
    );
    // The by-ID table, built by the first by_id call: its time (one round, thread CPU
    // time) and what it adds to the index's memory.
    let start = clock.now();
    let found = index.by_id(section.ids[0]).count();
    let by_id_time = clock.since(start);
    assert!(found > 0, "by_id misses ID {:#x}", section.ids[0]);
    let with_ids = index.heap_bytes();
    println!(
        "  (locus by-ID table, built by the first by_id call: {:.2} ms, +{:.1} B per record; \
         the index is then {:.1} B per record)",
        by_id_time.as_secs_f64() * 1e3,
        per_record((with_ids - locus_bytes) as u64),
        per_record(with_ids as u64)
    );
    let m = locus_bytes as f64 / dense_bytes as f64;
    println!(
        "  locus / DenseMap: {m:.3}x (goal <= {MEMORY_GOAL}x: {}); locus / (DenseMap + \
         spilled + parser): {:.3}x; locus / HashMap: {:.3}x",
        verdict(m, MEMORY_GOAL),
        locus_bytes as f64 / (dense_bytes + spilled + parser_bytes) as f64,
        locus_bytes as f64 / hash_bytes as f64
    );
}
