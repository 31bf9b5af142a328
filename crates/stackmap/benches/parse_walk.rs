//! Parse-and-walk and lookup benchmarks over a 1,000,000-record section, with LLVM's own
//! `llvm::StackMapParser` as the anchor.
//!
//! Run with `cargo bench -p locus-stackmap --bench parse_walk`. It
//! 1. generates one little-endian version-3 table (see `synth`): 1,000 functions,
//!    1,000,000 records with 0 to 8 locations of all five kinds, 300 constants, live-outs
//!    on about 15% of records;
//! 2. compiles `benches/llvm_walk.cpp` with `clang++-19` against libLLVM-19 into the
//!    target directory (at run time: building the bench needs no C++ compiler), loads it
//!    with `dlopen`, and checks that LLVM's walk and Locus's walk give the same checksum;
//! 3. times, with criterion, the group `parse_and_walk_1M` (`locus`: `Tables::new` with
//!    strict validation then every function, constant, record, location and live-out;
//!    `llvm`: `StackMapParser` construction then the same walk) and `lookup_1M` (`locus`:
//!    one `StackMapIndex::lookup` of an existing address, in shuffled order;
//!    `locus_lookup_all`: the same addresses through `StackMapIndex::lookup_all`, which
//!    fetches the blocks of the addresses ahead);
//! 4. times each side in its two parts, ten runs each outside criterion: Locus's parse
//!    (validation) then its walk, LLVM's header check and `StackMapParser` construction then
//!    its walk;
//! 5. prints a summary that names the input and the clock: the medians, the locus/llvm ratio
//!    (reported only: its goal is retired, see `index_lookup` for the goals that replace it),
//!    the two-part split and the per-lookup medians of both ways, against the lookup goal. The split also gives
//!    the floor the walk sets: both walks run the same user code (a `match` on each
//!    location's kind, which the processor mostly mispredicts on this random mix of kinds),
//!    so Locus's walk time over LLVM's parse+walk time bounds the ratio from below whatever
//!    the parse costs.
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), read the same way
//! on both sides, so that other processes on a small shared machine do not count;
//! `LOCUS_BENCH_CLOCK=wall` switches both to `CLOCK_MONOTONIC`. The lookups are independent
//! of each other (shuffled addresses, each looked up once in turn), so the per-lookup time
//! is a throughput: the processor overlaps the cache misses of consecutive lookups, as far as
//! its out-of-order window reaches (each `lookup` waits on its cache miss with its
//! instructions still in flight); `lookup_all` starts each miss some lookups early instead.
//!
//! Environment: `LOCUS_BENCH_CXX` (default `clang++-19`) and `LOCUS_BENCH_LLVM_CONFIG`
//! (default `llvm-config-19`) pick the tools. If the anchor cannot be built, the `llvm`
//! benchmark and the ratio are skipped with a message, and the rest still runs.

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use locus_stackmap::{
    Error, IndexOptions, LittleEndian, Location, ParseOptions, StackMapIndex, Table, Tables,
};

mod anchor;
mod synth;

use anchor::{Anchor, Clock};

const FUNCTIONS: usize = 1_000;
const RECORDS: usize = 1_000_000;
const CONSTANTS: usize = 300;
const SEED: u64 = 0x5EED_57AC_4A90;

const LOOKUP_GOAL_NS: f64 = 50.0;

// The checksum multipliers; the same as in llvm_walk.cpp (its header describes the fold).
const F_ADDR: u64 = 0x9E37_79B9_7F4A_7C15;
const F_STACK: u64 = 0xC2B2_AE3D_27D4_EB4F;
const F_COUNT: u64 = 0x1656_67B1_9E37_79F9;
const C_VALUE: u64 = 0x27D4_EB2F_1656_67C5;
const R_ID: u64 = 0xFF51_AFD7_ED55_8CCD;
const R_OFFSET: u64 = 0xC4CE_B9FE_1A85_EC53;
const R_NLOC: u64 = 0x2127_599B_F432_5C37;
const R_NLIVE: u64 = 0x8803_55F2_1E6D_1965;
const L_KIND: u64 = 0x94D0_49BB_1331_11EB;
const L_SIZE: u64 = 0xBF58_476D_1CE4_E5B9;
const L_REG: u64 = 0x9FB2_1C65_1E98_DF25;
const L_OFFSET: u64 = 0xD6E8_FEB8_6659_FD93;
const L_SMALL: u64 = 0xA076_1D64_78BD_642F;
const L_INDEX: u64 = 0xE703_7ED1_A0B4_28DB;
const L_VALUE: u64 = 0x8EBC_6AF0_9C88_C6E3;
const O_REG: u64 = 0x5899_65CC_7537_4CC3;
const O_SIZE: u64 = 0x1D8E_4E27_C47D_124F;

#[inline(always)]
fn mix(h: u64, v: u64) -> u64 {
    h.rotate_left(5) ^ v
}

#[inline(always)]
fn m(x: u64, k: u64) -> u64 {
    x.wrapping_mul(k)
}

/// Every function, constant, record, location and live-out of a parsed table, folded.
#[inline(always)]
fn walk_table(t: &Table<'_, LittleEndian>, mut h: u64) -> u64 {
    for f in t.functions() {
        h = mix(
            h,
            m(f.address, F_ADDR)
                .wrapping_add(m(f.stack_size, F_STACK))
                .wrapping_add(m(f.record_count, F_COUNT)),
        );
    }
    for c in t.constants() {
        h = mix(h, m(c, C_VALUE));
    }
    for r in t.records() {
        let mut v = m(r.id(), R_ID)
            .wrapping_add(m(u64::from(r.instruction_offset()), R_OFFSET))
            .wrapping_add(m(u64::from(r.num_locations()), R_NLOC))
            .wrapping_add(m(u64::from(r.num_live_outs()), R_NLIVE));
        for l in r.locations() {
            let kind = l.kind() as u8;
            v = v
                .wrapping_add(m(u64::from(kind), L_KIND))
                .wrapping_add(m(u64::from(l.size()), L_SIZE));
            v = v.wrapping_add(match l {
                Location::Register { dwarf_reg, .. } => m(u64::from(dwarf_reg), L_REG),
                Location::Direct {
                    dwarf_reg, offset, ..
                }
                | Location::Indirect {
                    dwarf_reg, offset, ..
                } => m(u64::from(dwarf_reg), L_REG)
                    .wrapping_add(m(u64::from(offset as u32), L_OFFSET)),
                Location::Constant { value, .. } => m(u64::from(value as u32), L_SMALL),
                Location::ConstantIndex { index, value, .. } => {
                    m(u64::from(index), L_INDEX).wrapping_add(m(value, L_VALUE))
                }
            });
        }
        for o in r.live_outs() {
            v = v
                .wrapping_add(m(u64::from(o.dwarf_reg), O_REG))
                .wrapping_add(m(u64::from(o.size), O_SIZE));
        }
        h = mix(h, v);
    }
    h
}

/// Locus's side: parse (strict validation) every table of `section`, then walk it.
fn locus_walk(section: &[u8]) -> Result<u64, Error> {
    let mut h = 0;
    for t in Tables::new(section, LittleEndian, ParseOptions::default()) {
        h = walk_table(&t?, h);
    }
    Ok(h)
}

type WalkFn = unsafe extern "C" fn(*const u8, usize) -> u64;
type WalkTimedFn = unsafe extern "C" fn(*const u8, usize, u64, libc::clockid_t, *mut u64) -> u64;
type WalkSplitFn =
    unsafe extern "C" fn(*const u8, usize, libc::clockid_t, *mut u64, *mut u64) -> u64;

/// The dlopen'ed C++ anchor.
struct Llvm {
    walk: WalkFn,
    walk_timed: WalkTimedFn,
    walk_split: WalkSplitFn,
}

impl Llvm {
    fn walk(&self, section: &[u8]) -> u64 {
        // SAFETY: the function reads `len` bytes from `ptr`, which `section` provides.
        unsafe { (self.walk)(section.as_ptr(), section.len()) }
    }

    /// Runs the walk `iters` times in C++ and returns the time it took on `clock` and the
    /// checksum.
    fn walk_timed(&self, section: &[u8], iters: u64, clock: Clock) -> (Duration, u64) {
        let mut checksum = 0;
        // SAFETY: as in `walk`; `checksum` is a valid place for the result.
        let ns = unsafe {
            (self.walk_timed)(
                section.as_ptr(),
                section.len(),
                iters,
                clock.id(),
                &mut checksum,
            )
        };
        (Duration::from_nanos(ns), checksum)
    }

    /// One walk timed in two parts on `clock`: header check and parser construction, then
    /// the walk; and the checksum.
    fn walk_split(&self, section: &[u8], clock: Clock) -> (Duration, Duration, u64) {
        let (mut construct, mut walk) = (0, 0);
        // SAFETY: as in `walk`; both outputs are valid places for the times.
        let h = unsafe {
            (self.walk_split)(
                section.as_ptr(),
                section.len(),
                clock.id(),
                &mut construct,
                &mut walk,
            )
        };
        (
            Duration::from_nanos(construct),
            Duration::from_nanos(walk),
            h,
        )
    }
}

fn load_anchor() -> Result<Llvm, String> {
    let anchor = Anchor::load("llvm_walk")?;
    // The symbols are the extern "C" functions of llvm_walk.cpp with these signatures, and
    // the library stays loaded for the life of the process.
    Ok(Llvm {
        // SAFETY: see above.
        walk: unsafe { anchor.function("llvm_stackmap_walk")? },
        // SAFETY: see above.
        walk_timed: unsafe { anchor.function("llvm_stackmap_walk_timed")? },
        // SAFETY: see above.
        walk_split: unsafe { anchor.function("llvm_stackmap_walk_split")? },
    })
}

/// Per-iteration times of the samples criterion took, in the order it took them. The
/// warm-up calls come first; the last `sample_size` entries are the measurement.
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

/// The median of `runs` (sorted in place), in milliseconds.
fn median_ms(runs: &mut [Duration]) -> f64 {
    runs.sort();
    let n = runs.len();
    let mid = if n % 2 == 1 {
        runs[n / 2]
    } else {
        (runs[n / 2 - 1] + runs[n / 2]) / 2
    };
    mid.as_secs_f64() * 1e3
}

/// Locus's parse and walk timed apart, `runs` times: medians in milliseconds.
fn locus_split(section: &[u8], clock: Clock, runs: usize) -> (f64, f64) {
    let (mut parse, mut walk) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = clock.now();
        let tables: Vec<Table<'_, LittleEndian>> =
            match Tables::new(black_box(section), LittleEndian, ParseOptions::default())
                .collect::<Result<_, _>>()
            {
                Ok(t) => t,
                Err(e) => panic!("{e}"),
            };
        let parsed = clock.now();
        let mut h = 0;
        for t in &tables {
            h = walk_table(t, h);
        }
        black_box(h);
        parse.push(Duration::from_nanos(parsed.wrapping_sub(start)));
        walk.push(clock.since(parsed));
    }
    (median_ms(&mut parse), median_ms(&mut walk))
}

/// LLVM's construction and walk timed apart, `runs` times: medians in milliseconds.
fn llvm_split(llvm: &Llvm, section: &[u8], clock: Clock, runs: usize) -> (f64, f64) {
    let (mut construct, mut walk) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (c, w, h) = llvm.walk_split(black_box(section), clock);
        black_box(h);
        construct.push(c);
        walk.push(w);
    }
    (median_ms(&mut construct), median_ms(&mut walk))
}

/// Times `iters` lookups on `clock`, going round `addresses` from `*next` in runs of a plain
/// slice, each answered by `lookups` (which returns a fold of what it found). Per-lookup
/// bookkeeping in the timed loop (an index that wraps, a `black_box` that makes the
/// compiler reload the index's fields) would be measured as lookup time.
fn time_lookups(
    addresses: &[u64],
    next: &mut usize,
    iters: u64,
    clock: Clock,
    mut lookups: impl FnMut(&[u64]) -> usize,
) -> Duration {
    let mut acc = 0usize;
    let mut left = iters as usize;
    let start = clock.now();
    while left > 0 {
        let run = left.min(addresses.len() - *next);
        acc = acc.wrapping_add(lookups(black_box(&addresses[*next..*next + run])));
        left -= run;
        *next = (*next + run) % addresses.len();
    }
    let elapsed = clock.since(start);
    black_box(acc);
    elapsed
}

fn record(samples: &Samples, elapsed: Duration, iters: u64) -> Duration {
    samples
        .borrow_mut()
        .push(elapsed.as_secs_f64() / iters as f64);
    elapsed
}

fn main() {
    let started = Instant::now();
    let section = synth::generate(FUNCTIONS, RECORDS, CONSTANTS, SEED);
    let bytes = black_box(section.bytes.as_slice());
    let [reg, direct, indirect, constant, index] = section.kinds;
    eprintln!(
        "input: one table, {} bytes: {} functions, {} constants, {RECORDS} records, {} locations \
         (register {reg}, direct {direct}, indirect {indirect}, constant {constant}, \
         constant index {index}), {} live-outs; generated in {:.2?}",
        bytes.len(),
        section.num_functions,
        section.num_constants,
        section.num_locations,
        section.num_live_outs,
        started.elapsed(),
    );

    let locus_sum = match locus_walk(bytes) {
        Ok(h) => h,
        Err(e) => panic!("Locus rejects the generated section: {e}"),
    };
    let llvm = match load_anchor() {
        Ok(llvm) => {
            let llvm_sum = llvm.walk(bytes);
            assert_eq!(
                locus_sum, llvm_sum,
                "Locus and llvm::StackMapParser disagree on the walk of the same section"
            );
            eprintln!("checksums agree: {locus_sum:#018x}");
            Some(llvm)
        }
        Err(e) => {
            eprintln!("LLVM anchor unavailable, skipping the llvm benchmark and the ratio: {e}");
            None
        }
    };

    // The index over the same records, and every generated address in shuffled order.
    let tables = match Tables::new(bytes, LittleEndian, ParseOptions::default())
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let index = StackMapIndex::with_options(tables, 0, IndexOptions::default().huge_pages(true));
    let mut order: Vec<usize> = (0..RECORDS).collect();
    synth::Rng::new(SEED ^ 1).shuffle(&mut order);
    let addresses: Vec<u64> = order.iter().map(|&i| section.addresses[i]).collect();
    for &i in &order {
        let a = section.addresses[i];
        let id = section.ids[i];
        assert!(
            index
                .lookup(a)
                .any(|r| r.address == a && r.record.id() == id),
            "lookup({a:#x}) misses a record with ID {id:#x}"
        );
    }

    const PARSE_SAMPLES: usize = 10;
    const LOOKUP_SAMPLES: usize = 20;
    let clock = Clock::from_env();
    eprintln!("timing with {}", clock.name());
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();

    let locus_samples: Samples = Rc::default();
    let llvm_samples: Samples = Rc::default();
    let lookup_samples: Samples = Rc::default();
    let lookup_all_samples: Samples = Rc::default();
    {
        let mut g = c.benchmark_group("parse_and_walk_1M");
        g.sample_size(PARSE_SAMPLES)
            .sampling_mode(SamplingMode::Flat);
        g.bench_function("locus", |b| {
            b.iter_custom(|iters| {
                let start = clock.now();
                for _ in 0..iters {
                    let _ = black_box(locus_walk(black_box(bytes)));
                }
                record(&locus_samples, clock.since(start), iters)
            })
        });
        if let Some(llvm) = &llvm {
            g.bench_function("llvm", |b| {
                b.iter_custom(|iters| {
                    let (elapsed, sum) = llvm.walk_timed(black_box(bytes), iters, clock);
                    black_box(sum);
                    record(&llvm_samples, elapsed, iters)
                })
            });
        }
        g.finish();
    }
    {
        let mut g = c.benchmark_group("lookup_1M");
        g.sample_size(LOOKUP_SAMPLES);
        let mut next = 0usize;
        g.bench_function("locus", |b| {
            b.iter_custom(|iters| {
                let elapsed = time_lookups(&addresses, &mut next, iters, clock, |run| {
                    let mut acc = 0usize;
                    for &a in run {
                        for r in index.lookup(a) {
                            acc = acc.wrapping_add(r.record.offset());
                        }
                    }
                    acc
                });
                record(&lookup_samples, elapsed, iters)
            })
        });
        let mut next = 0usize;
        g.bench_function("locus_lookup_all", |b| {
            b.iter_custom(|iters| {
                let elapsed = time_lookups(&addresses, &mut next, iters, clock, |run| {
                    let mut acc = 0usize;
                    for records in index.lookup_all(run) {
                        for r in records {
                            acc = acc.wrapping_add(r.record.offset());
                        }
                    }
                    acc
                });
                record(&lookup_all_samples, elapsed, iters)
            })
        });
        g.finish();
    }
    c.final_summary();

    const SPLIT_RUNS: usize = 10;
    let locus_parts = locus_split(bytes, clock, SPLIT_RUNS);
    let llvm_parts = llvm
        .as_ref()
        .map(|l| llvm_split(l, bytes, clock, SPLIT_RUNS));

    let locus = median_of_last(&locus_samples, PARSE_SAMPLES);
    let llvm = median_of_last(&llvm_samples, PARSE_SAMPLES);
    println!(
        "summary: input one little-endian v3 table of {} bytes ({} functions, {} constants, \
         {RECORDS} records, {} locations, {} live-outs; seed {SEED:#x}); clock: {} ({}); \
         medians of criterion's samples",
        bytes.len(),
        section.num_functions,
        section.num_constants,
        section.num_locations,
        section.num_live_outs,
        clock.name(),
        clock.id_name(),
    );
    match (locus, llvm) {
        (Some(l), Some(v)) => {
            let ratio = l / v;
            println!(
                "parse+walk 1M records: locus {:.2} ms, llvm {:.2} ms, ratio {ratio:.2}x (no goal: \
                 the old goal compared the same walk on both sides and is retired; issue 17 \
                 section 6 sets time to a usable index instead, see the index_lookup bench)",
                l * 1e3,
                v * 1e3,
            );
        }
        (Some(l), None) => println!(
            "parse+walk 1M records: locus {:.2} ms (no llvm anchor)",
            l * 1e3
        ),
        _ => {}
    }
    let (parse, walk) = locus_parts;
    print!(
        "  in two parts (median of {SPLIT_RUNS} runs): locus parse {parse:.2} ms + walk {walk:.2} ms"
    );
    match llvm_parts {
        Some((construct, llvm_walk)) => println!(
            "; llvm construct {construct:.2} ms + walk {llvm_walk:.2} ms (llvm's walk alone is \
             {:.2}x its parse+walk, and locus's walk {:.2}x llvm's: the walk is the same user \
             code on both sides, so no parse can bring the ratio below about {:.2}x)",
            llvm_walk / (construct + llvm_walk),
            walk / llvm_walk,
            walk / (construct + llvm_walk)
        ),
        None => println!(),
    }
    let per_lookup = |samples: &Samples, what: &str| {
        if let Some(t) = median_of_last(samples, LOOKUP_SAMPLES) {
            let ns = t * 1e9;
            println!(
                "lookup over 1M records ({what}, shuffled): median {ns:.1} ns (goal <= {LOOKUP_GOAL_NS} ns){}",
                if ns <= LOOKUP_GOAL_NS { "" } else { " MISSED" }
            );
        }
    };
    per_lookup(&lookup_samples, "one `lookup` per address");
    per_lookup(
        &lookup_all_samples,
        "`lookup_all` over runs of the same addresses",
    );
}
