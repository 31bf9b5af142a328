//! Benchmark: every location expression of a large `clang-19 -g -O2` binary (each
//! `DW_AT_location` and `DW_AT_frame_base`, every location-list entry), evaluated by gimli
//! and by Locus in the same run against the same synthetic registers and memory.
//!
//! The binary is built here from a generated C file (a few hundred functions with
//! structs split into registers, bit-fields, loops, pointers to locals, values live only
//! as expressions). Only expressions both evaluators complete are timed (the DWARF 5
//! subset both support); both are checked to agree on the number of pieces first.
//! Both evaluate from the bytes each time (Locus decodes each operation as it executes
//! it, as gimli does), answering the same requests the same way. The headline Locus
//! figure restarts one `Evaluation` per expression (`Evaluation::restart`, keeping the
//! stack's allocation, as a debugger would); a line for a fresh `Evaluation` per
//! expression (as gimli is run) is printed too, and the pre-decoded path for reference.
//!
//! `cargo bench -p locus-dwarf --bench gimli_vs_locus` prints criterion's statistics for
//! both, the fresh-`Evaluation` and pre-decoded lines with their ratios to gimli (goal for
//! the pre-decoded line, the general path: >= 1.5, issue 22), a table of every way by
//! expression class (lone register, frame-base offset, entry values, pieces, stack
//! values, other; and location-list entries, whatever their class), and a final line
//! `locus/gimli throughput ratio: R (... range over 5 alternations A-B)` (goal: R >= 3.0,
//! issue 22). `LOCUS_BENCH_ONLY=gimli|locus|fresh|decoded` (with `LOCUS_BENCH_PASSES=N`,
//! `LOCUS_BENCH_CLASS=CLASS|list`) runs only one way's loop, for profilers: instruction
//! counts under `valgrind --tool=callgrind`, with N and 0 passes subtracted, do not depend
//! on the machine's load. `LOCUS_BENCH_CLASS==SHAPE` runs the expressions of one
//! shape (operation names, as `LOCUS_BENCH_ONLY=shapes` lists them with their counts),
//! `LOCUS_BENCH_CLASS=long` those of more than 8 operations (long arithmetic).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::Criterion;
use gimli::{EndianSlice, LittleEndian};
use locus_dwarf::binary::{location_expressions, Decoded, LocationExpression};
use locus_dwarf::{decode, Encoding, Entry, Evaluation, EvaluationResult, Op, Value, ValueType};

/// Synthetic register contents: an address-like value per register.
fn reg_value(r: u16) -> u64 {
    0x7fff_0000_1000 + u64::from(r) * 64
}

/// Synthetic memory: a pattern of the address.
fn mem_value(address: u64, size: u8) -> u64 {
    let v = address.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5555;
    if size >= 8 {
        v
    } else {
        v & ((1u64 << (u32::from(size) * 8)) - 1)
    }
}

const FRAME_BASE: u64 = 0x7fff_0000_8000;
const CFA: u64 = 0x7fff_0000_9000;
const ENTRY: u64 = 42;
const INDEXED: u64 = 0x40_1000;

/// A C file with `n` functions of a few shapes, plus a main that calls them.
fn generate_c(n: usize) -> String {
    let mut s = String::from(
        "struct pair { int lo; int hi; };\n\
         struct bits { unsigned a : 3; unsigned b : 7; unsigned c : 13; unsigned d : 9; };\n\
         volatile long sink_total;\n\
         __attribute__((noinline)) void sink(long x) { sink_total += x; }\n\
         __attribute__((noinline)) void sink_ptr(const long *p) { sink_total += *p; }\n",
    );
    for i in 0..n {
        let k = i * 7 + 3;
        let body = match i % 5 {
            0 => format!(
                "int f{i}(int a, int b) {{ struct pair p = {{a * {k}, b + {k}}}; long s = (long)a + b;\n\
                 sink(p.lo); sink(p.hi); sink(s); for (int j = 0; j < a; j++) {{ s += j * p.lo; sink(s); }}\n\
                 return p.lo + p.hi + (int)s; }}\n"
            ),
            1 => format!(
                "unsigned f{i}(unsigned x, unsigned y) {{ struct bits f; f.a = x; f.b = y; f.c = x + y + {k};\n\
                 f.d = x ^ y; sink(x); sink(f.a + f.b); sink(f.c + f.d); return f.a + f.b + f.c + f.d; }}\n"
            ),
            2 => format!(
                "int f{i}(int v) {{ int local = v * {k}; int *ptr = &local; double scale = {k}.5;\n\
                 struct pair q = {{{k}, v}}; sink(*ptr); sink((long)(scale * v) + q.lo + q.hi);\n\
                 return *ptr + v; }}\n"
            ),
            3 => format!(
                "long f{i}(long n) {{ long buf[{m}]; for (int j = 0; j < {m}; j++) buf[j] = n * j + {k};\n\
                 sink_ptr(buf); long t = 0; for (int j = 0; j < {m}; j++) t += buf[j] ^ j; sink(t);\n\
                 return t; }}\n",
                m = 4 + i % 9
            ),
            _ => format!(
                "long f{i}(long a, long b, long c) {{ long x = a * b + {k}; long y = x - c;\n\
                 if (x > y) {{ sink(x); y += a; }} else {{ sink(y); x -= b; }}\n\
                 long z = (x << 3) ^ (y >> 2); sink(z); sink(a + b + c); return x + y + z; }}\n"
            ),
        };
        s.push_str(&body);
    }
    s.push_str("int main(void) { long r = 0;\n");
    for i in 0..n {
        let call = match i % 5 {
            0 => format!("f{i}(3, 4)"),
            1 => format!("f{i}(5, 9)"),
            2 => format!("f{i}(7)"),
            3 => format!("f{i}(11)"),
            _ => format!("f{i}(1, 2, 3)"),
        };
        s.push_str(&format!("  r += {call};\n"));
    }
    s.push_str("  return (int)(r & 0x7f); }\n");
    s
}

fn build_binary() -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("locus-dwarf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("big.c");
    std::fs::write(&src, generate_c(600)).unwrap();
    let exe: PathBuf = dir.join("big");
    let out = Command::new("clang-19")
        .args(["-g", "-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("clang-19 is needed (scripts/install-deps installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = std::fs::read(&exe).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    data
}

fn gimli_encoding(e: Encoding) -> gimli::Encoding {
    gimli::Encoding {
        address_size: e.address_size,
        format: if e.offset_size == 8 {
            gimli::Format::Dwarf64
        } else {
            gimli::Format::Dwarf32
        },
        version: 5,
    }
}

/// gimli: evaluates `bytes`, answering every request synthetically; returns the number
/// of pieces.
fn gimli_eval(x: &LocationExpression) -> Option<usize> {
    let expr = gimli::Expression(EndianSlice::new(&x.bytes, LittleEndian));
    let mut eval = expr.evaluation(gimli_encoding(x.encoding));
    let mut r = eval.evaluate().ok()?;
    loop {
        r = match r {
            gimli::EvaluationResult::Complete => break,
            gimli::EvaluationResult::RequiresRegister { register, .. } => eval
                .resume_with_register(gimli::Value::Generic(reg_value(register.0)))
                .ok()?,
            gimli::EvaluationResult::RequiresMemory { address, size, .. } => eval
                .resume_with_memory(gimli::Value::Generic(mem_value(address, size)))
                .ok()?,
            gimli::EvaluationResult::RequiresFrameBase => {
                eval.resume_with_frame_base(FRAME_BASE).ok()?
            }
            gimli::EvaluationResult::RequiresCallFrameCfa => {
                eval.resume_with_call_frame_cfa(CFA).ok()?
            }
            gimli::EvaluationResult::RequiresEntryValue(_) => eval
                .resume_with_entry_value(gimli::Value::Generic(ENTRY))
                .ok()?,
            gimli::EvaluationResult::RequiresRelocatedAddress(a) => {
                eval.resume_with_relocated_address(a).ok()?
            }
            gimli::EvaluationResult::RequiresIndexedAddress { .. } => {
                eval.resume_with_indexed_address(INDEXED).ok()?
            }
            gimli::EvaluationResult::RequiresBaseType(_) => {
                eval.resume_with_base_type(gimli::ValueType::U32).ok()?
            }
            _ => return None,
        };
    }
    Some(eval.as_result().len())
}

/// Locus: evaluates `bytes` straight from the bytes, as gimli does, with the same
/// answers; returns the number of pieces (1 for a non-composite result). `eval` is the
/// previous expression's evaluation, restarted on this one (a debugger evaluating many
/// expressions keeps one), so its stack is not reallocated per expression.
fn locus_eval<'a>(x: &'a LocationExpression, eval: &mut Evaluation<'a>) -> Option<usize> {
    eval.restart(&x.bytes, x.encoding);
    locus_answer(eval, x.encoding)
}

/// Locus on an already decoded expression (a debugger that caches decoded expressions).
fn locus_eval_decoded(expr: &Decoded, encoding: Encoding) -> Option<usize> {
    locus_answer(&mut expr.evaluation(encoding), encoding)
}

fn locus_answer(eval: &mut Evaluation<'_>, encoding: Encoding) -> Option<usize> {
    let a = encoding.address_size;
    let mut r = eval.evaluate().ok()?;
    loop {
        r = match r {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresRegister { register } => eval
                .resume_with_register(&reg_value(register).to_le_bytes())
                .ok()?,
            EvaluationResult::RequiresMemory { address, size, .. } => eval
                .resume_with_memory(&mem_value(address, size).to_le_bytes())
                .ok()?,
            EvaluationResult::RequiresFrameBase => eval.resume_with_frame_base(FRAME_BASE).ok()?,
            EvaluationResult::RequiresCallFrameCfa => eval.resume_with_call_frame_cfa(CFA).ok()?,
            EvaluationResult::RequiresEntryValue { .. } => eval
                .resume_with_entry_value(Entry::Value(Value::new(ValueType::Generic, ENTRY, a)))
                .ok()?,
            EvaluationResult::RequiresIndexedAddress { .. } => {
                eval.resume_with_indexed_address(INDEXED).ok()?
            }
            // DW_ATE_unsigned, 4 bytes: gimli's U32.
            EvaluationResult::RequiresBaseType { .. } => {
                eval.resume_with_base_type(0x08, 4).ok()?
            }
            _ => return None,
        };
    }
    Some(match eval.result()? {
        Entry::Location(l) => match l.places.first().map(|p| &p.storage) {
            Some(locus_dwarf::Storage::Composite(parts)) => parts.len(),
            _ => 1,
        },
        Entry::Value(_) => 1,
    })
}

/// The names of `x`'s operations, operands left out.
fn shape_of(x: &LocationExpression) -> String {
    decode(&x.bytes, x.encoding)
        .map(|d| {
            d.iter()
                .map(|(_, op)| op.name())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// `LOCUS_BENCH_ONLY=shapes`: how many expressions have each shape (their
/// operations' names, operands left out), most common first, by class: what
/// a shortcut would cover.
fn print_shapes(xs: &[LocationExpression]) {
    let mut counts: std::collections::BTreeMap<(&str, String), usize> = Default::default();
    for x in xs {
        *counts.entry((class_of(x), shape_of(x))).or_default() += 1;
    }
    let mut rows: Vec<_> = counts.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    for ((class, shape), n) in rows {
        println!("{n:>6}  {class:<18} {shape}");
    }
}

fn time(mut f: impl FnMut(), rounds: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
    }
    best
}

/// The expression classes the bench reports one by one (issue 22): what a
/// location expression is, by its operations. The first that applies.
const CLASSES: [&str; 6] = [
    "lone register",
    "frame-base offset",
    "entry values",
    "pieces",
    "stack values",
    "other",
];

fn class_of(x: &LocationExpression) -> &'static str {
    let ops: Vec<Op> = decode(&x.bytes, x.encoding)
        .map(|d| d.into_iter().map(|(_, op)| op).collect())
        .unwrap_or_default();
    let has = |f: fn(&Op) -> bool| ops.iter().any(f);
    match ops.as_slice() {
        [Op::Reg(_) | Op::Regx(_)] => "lone register",
        [Op::Fbreg(_)] => "frame-base offset",
        _ if has(|o| matches!(o, Op::EntryValue(_))) => "entry values",
        _ if has(|o| matches!(o, Op::Piece(_) | Op::BitPiece { .. })) => "pieces",
        _ if has(|o| matches!(o, Op::StackValue)) => "stack values",
        _ => "other",
    }
}

/// The four ways timed: gimli, Locus restarting one `Evaluation` (the
/// headline), Locus with a fresh `Evaluation` per expression, Locus on
/// pre-decoded operations (fresh per expression).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Gimli,
    Restart,
    Fresh,
    Decoded,
}

/// One pass of `way` over `xs` (with their decoded forms `ds`).
fn pass<'a>(way: Way, xs: &[&'a LocationExpression], ds: &[&Decoded], spare: &mut Evaluation<'a>) {
    match way {
        Way::Gimli => {
            for x in xs {
                black_box(gimli_eval(black_box(x)));
            }
        }
        Way::Restart => {
            for x in xs {
                black_box(locus_eval(black_box(x), spare));
            }
        }
        Way::Fresh => {
            for x in xs {
                let mut eval = Evaluation::new(black_box(&x.bytes), x.encoding);
                black_box(locus_answer(&mut eval, x.encoding));
            }
        }
        Way::Decoded => {
            for (x, d) in xs.iter().zip(ds) {
                black_box(locus_eval_decoded(black_box(d), x.encoding));
            }
        }
    }
}

/// gimli's time over Locus's for one class, best of `rounds` passes each,
/// alternating: (gimli ns, [restart, fresh, decoded] ns) per expression.
fn class_times<'a>(
    xs: &[&'a LocationExpression],
    ds: &[&Decoded],
    spare: &mut Evaluation<'a>,
    rounds: usize,
) -> (f64, [f64; 3]) {
    let mut best = [Duration::MAX; 4];
    let ways = [Way::Gimli, Way::Restart, Way::Fresh, Way::Decoded];
    for _ in 0..3 {
        for (i, way) in ways.iter().enumerate() {
            best[i] = best[i].min(time(|| pass(*way, xs, ds, spare), rounds));
        }
    }
    let per = |d: Duration| d.as_secs_f64() * 1e9 / xs.len().max(1) as f64;
    (per(best[0]), [per(best[1]), per(best[2]), per(best[3])])
}

fn main() {
    let data = build_binary();
    let all = location_expressions(&data).expect("the binary's DWARF");
    let both: Vec<LocationExpression> = all
        .iter()
        .filter(|x| {
            let g = gimli_eval(x);
            let l = locus_eval(x, &mut Evaluation::new(&[0u8; 0], Encoding::default()));
            // Both complete and agree on the piece count (gimli reports one piece for a
            // non-composite result).
            g.is_some() && g == l
        })
        .cloned()
        .collect();
    let bytes: usize = both.iter().map(|x| x.bytes.len()).sum();
    println!(
        "{} location expressions in the binary; {} evaluated by both ({} bytes)",
        all.len(),
        both.len(),
        bytes
    );
    assert!(
        both.len() * 10 >= all.len() * 9,
        "fewer than 90% of the expressions are in the common subset"
    );
    let decoded: Vec<Decoded> = both
        .iter()
        .map(|x| Decoded::new(&x.bytes, x.encoding).unwrap())
        .collect();
    // The pre-decoded path gives the same answers as from the bytes.
    for (x, d) in both.iter().zip(&decoded) {
        let mut spare = Evaluation::new(&[0u8; 0], Encoding::default());
        assert_eq!(
            locus_eval_decoded(d, x.encoding),
            locus_eval(x, &mut spare),
            "{:02x?}",
            x.bytes
        );
    }
    let every: Vec<&LocationExpression> = both.iter().collect();
    let every_decoded: Vec<&Decoded> = decoded.iter().collect();

    // For profiling (e.g. under `valgrind --tool=callgrind`): only one way's loop
    // (`LOCUS_BENCH_ONLY=gimli|locus|fresh|decoded`), a few passes, over one class
    // if `LOCUS_BENCH_CLASS` names one (or `list` for location-list entries).
    if let Ok(which) = std::env::var("LOCUS_BENCH_ONLY") {
        if which == "shapes" {
            print_shapes(&both);
            return;
        }
        let way = match which.as_str() {
            "gimli" => Way::Gimli,
            "fresh" => Way::Fresh,
            "decoded" => Way::Decoded,
            _ => Way::Restart,
        };
        let passes: usize = std::env::var("LOCUS_BENCH_PASSES")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(20);
        let class = std::env::var("LOCUS_BENCH_CLASS").ok();
        let keep = |x: &LocationExpression| match class.as_deref() {
            None => true,
            Some("list") => x.in_list,
            // `=SHAPE`: one shape as `shapes` prints it.
            Some(c) if c.starts_with('=') => shape_of(x) == c[1..],
            // Expressions of more than 8 operations (long arithmetic).
            Some("long") => shape_of(x).split(' ').count() > 8,
            Some(c) => class_of(x) == c,
        };
        let (xs, ds): (Vec<&LocationExpression>, Vec<&Decoded>) =
            both.iter().zip(&decoded).filter(|(x, _)| keep(x)).unzip();
        println!("{} expressions", xs.len());
        let mut spare = Evaluation::new(&[0u8; 0], Encoding::default());
        // Each pass timed, the best kept (for timing without criterion).
        let mut best = Duration::MAX;
        for _ in 0..passes {
            let t = Instant::now();
            pass(way, &xs, &ds, &mut spare);
            best = best.min(t.elapsed());
        }
        let ns = best.as_secs_f64() * 1e9 / xs.len().max(1) as f64;
        println!("{which}: best pass {ns:.1} ns/expression ({passes} passes)");
        return;
    }

    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3));
    c.bench_function("gimli: all location expressions", |b| {
        b.iter(|| {
            pass(
                Way::Gimli,
                &every,
                &every_decoded,
                &mut Evaluation::new(&[0u8; 0], Encoding::default()),
            )
        })
    });
    let mut spare = Evaluation::new(&[0u8; 0], Encoding::default());
    c.bench_function("locus: all location expressions", |b| {
        b.iter(|| pass(Way::Restart, &every, &every_decoded, &mut spare))
    });

    // The ratio, measured in this run: gimli and Locus alternate, five times, each the
    // best of several passes over all expressions (the machine may be shared and noisy).
    let mut g = Duration::MAX;
    let mut l = Duration::MAX;
    let mut ratios = Vec::new();
    for _ in 0..5 {
        let gi = time(|| pass(Way::Gimli, &every, &every_decoded, &mut spare), 10);
        let lo = time(
            || pass(Way::Restart, &every, &every_decoded, &mut spare),
            10,
        );
        ratios.push(gi.as_secs_f64() / lo.as_secs_f64());
        g = g.min(gi);
        l = l.min(lo);
    }
    // Where Locus's time goes: decoding alone, and decoding plus `Evaluation::new`.
    let d = time(
        || {
            for x in &both {
                black_box(decode(black_box(&x.bytes), x.encoding).ok());
            }
        },
        30,
    );
    let n = time(
        || {
            for x in &both {
                if let Ok(expr) = Decoded::new(black_box(&x.bytes), x.encoding) {
                    black_box(expr.evaluation(x.encoding));
                }
            }
        },
        30,
    );
    let e = time(
        || pass(Way::Decoded, &every, &every_decoded, &mut spare),
        30,
    );
    let f = time(|| pass(Way::Fresh, &every, &every_decoded, &mut spare), 30);
    let per = |d: Duration| d.as_secs_f64() * 1e9 / both.len() as f64;
    let ratio = |d: Duration| g.as_secs_f64() / d.as_secs_f64();
    println!(
        "locus with a fresh Evaluation per expression: {:.1} ns/expression, ratio {:.2}",
        per(f),
        ratio(f)
    );
    println!(
        "locus breakdown: decode {:.1} ns, decode + Evaluation::new {:.1} ns, \
         evaluation of pre-decoded operations {:.1} ns per expression",
        per(d),
        per(n),
        per(e)
    );
    println!(
        "locus (pre-decoded)/gimli throughput ratio: {:.2} (goal >= 1.5)",
        ratio(e)
    );

    // By expression class: each class's expressions alone (a class's share of all
    // expressions is its count over the total).
    println!(
        "by class (ns/expression; ratio = gimli's time over Locus's):\n  \
         {:<26} {:>6} {:>7} {:>15} {:>15} {:>15}",
        "class", "count", "gimli", "locus restart", "locus fresh", "pre-decoded"
    );
    let lists: Vec<&str> = vec!["location list entries"];
    for class in CLASSES.iter().chain(&lists) {
        let (xs, ds): (Vec<&LocationExpression>, Vec<&Decoded>) = both
            .iter()
            .zip(&decoded)
            .filter(|(x, _)| {
                if *class == "location list entries" {
                    x.in_list
                } else {
                    class_of(x) == *class
                }
            })
            .unzip();
        if xs.is_empty() {
            println!("  {class:<26} {:>6}", 0);
            continue;
        }
        let rounds = (200_000 / xs.len()).clamp(5, 200);
        let (gi, lo) = class_times(&xs, &ds, &mut spare, rounds);
        let cell = |t: f64| format!("{t:.1} ({:.2}x)", gi / t);
        println!(
            "  {class:<26} {:>6} {:>7.1} {:>15} {:>15} {:>15}",
            xs.len(),
            gi,
            cell(lo[0]),
            cell(lo[1]),
            cell(lo[2])
        );
    }
    println!(
        "gimli: {:.1} ns/expression, locus: {:.1} ns/expression",
        per(g),
        per(l)
    );
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    println!(
        "locus/gimli throughput ratio: {:.2} (goal >= 3.0; range over 5 alternations {lo:.2}-{hi:.2})",
        g.as_secs_f64() / l.as_secs_f64()
    );
    c.final_summary();
}
