//! Benchmark (not a timed test), printing ratios:
//!
//! 1. Cost per call of `_mlir_ciface_bump` (fixtures/bench.mlir, compiled at
//!    start) through Locus (a typed symbol from [`Library::ciface`], the
//!    descriptor made from a checked view on every call) against a C function
//!    with the same body built by clang-19 -O2 and called through a plain
//!    function pointer. Goal: within 2 ns. Also the kernel built without the
//!    `opt-19` step (its wrapper then calls the function through the PLT)
//!    and the libffi dynamic call.
//! 2. Summing 10M f32 through a contiguous Locus view (its iterator, and
//!    `as_contiguous`) against a plain slice. Goal: within 10%.
//!
//! Run with `cargo bench -p locus-memref --bench call`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use locus_memref::{
    compile, CallOptions, Library, MemRefArg, MemRefDescriptor, MemRefViewMut, Signature,
};

type D1 = MemRefDescriptor<f32, 1>;

/// Best (lowest) nanoseconds per iteration over `rounds` rounds of `iters`.
fn best_ns(rounds: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let scratch = compile::private_dir().unwrap();
    let tmp = scratch.path();
    let kernel_so = tmp.join("bench.so");
    let src = std::fs::read_to_string(dir.join("fixtures/bench.mlir")).unwrap();
    compile::compile_str(&src, &kernel_so).unwrap();
    let noopt_so = tmp.join("bench-noopt.so");
    compile::compile_str_with(&src, &noopt_so, false).unwrap();
    let c_so = tmp.join("bump_c.so");
    let status = std::process::Command::new("clang-19")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&c_so)
        .arg(dir.join("benches/bump.c"))
        .status()
        .expect("clang-19");
    assert!(status.success(), "clang-19 failed");
    // SAFETY: libraries just built from benches/bump.mlir and benches/bump.c.
    let kernel = unsafe { Library::open(&kernel_so) }.unwrap();
    // SAFETY: as above.
    let clib = unsafe { Library::open(&c_so) }.unwrap();
    // SAFETY: as above.
    let noopt = unsafe { Library::open(&noopt_so) }.unwrap();
    // SAFETY: `bump(memref<?xf32>)`'s C wrapper takes one rank-1 descriptor.
    let bump: unsafe extern "C" fn(*mut D1) = unsafe { kernel.ciface("bump") }.unwrap();
    // SAFETY: as above.
    let bump_noopt: unsafe extern "C" fn(*mut D1) = unsafe { noopt.ciface("bump") }.unwrap();
    // SAFETY: bump.c's bump_c takes the same descriptor.
    let bump_c: unsafe extern "C" fn(*mut D1) = unsafe { clib.typed("bump_c") }.unwrap();
    let sig = Signature::parse("(memref<?xf32>)").unwrap();
    // SAFETY: the signature is bump's MLIR type.
    let dynamic = unsafe { kernel.function("bump", sig) }.unwrap();

    let mut data = vec![0f32; 16];
    let iters = 1_000_000;
    // Rounds alternate between the contenders so that load from other
    // processes hits them alike; each keeps its best round.
    let rounds = 15;
    let mut view = MemRefViewMut::contiguous(&mut data, [16]).unwrap();
    let mut d = view.to_descriptor();
    let (mut locus_ns, mut pure_ns, mut noopt_ns, mut c_ns) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for _ in 0..rounds {
        locus_ns = locus_ns.min(best_ns(1, iters, || {
            let mut d = view.to_descriptor();
            // SAFETY: `d` describes `data`, alive for the call.
            unsafe { bump(black_box(&mut d)) };
        }));
        // SAFETY: `d` describes `data`, alive for the call.
        pure_ns = pure_ns.min(best_ns(1, iters, || unsafe { bump(black_box(&mut d)) }));
        // SAFETY: as above.
        noopt_ns = noopt_ns.min(best_ns(1, iters, || unsafe {
            bump_noopt(black_box(&mut d))
        }));
        // SAFETY: as above.
        c_ns = c_ns.min(best_ns(1, iters, || unsafe { bump_c(black_box(&mut d)) }));
    }
    let ffi_ns = best_ns(3, 100_000, || {
        let args = [MemRefArg::from_view_mut(&mut view).into()];
        dynamic.call(args, CallOptions::default()).unwrap();
    });
    println!("call: bump_c (clang-19 -O2) via fn pointer                 {c_ns:.2} ns/call");
    println!("call: _mlir_ciface_bump, Locus typed symbol, view -> descriptor each call {locus_ns:.2} ns/call");
    println!(
        "call: _mlir_ciface_bump, Locus typed symbol, descriptor reused  {pure_ns:.2} ns/call"
    );
    println!(
        "call: same, kernel built without opt-19 (PLT call inside)      {noopt_ns:.2} ns/call"
    );
    println!("call: _mlir_ciface_bump via libffi dynamic call (checks args)  {ffi_ns:.2} ns/call");
    println!(
        "call: Locus - C = {:.2} ns (goal <= 2 ns), ratio {:.2}",
        locus_ns - c_ns,
        locus_ns / c_ns
    );
    assert!(data[0] > 0.0);

    let n = 10_000_000usize;
    let big: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.25).collect();
    let v = locus_memref::MemRefView::contiguous(&big, [n as i64]).unwrap();
    let (mut slice_ns, mut view_ns, mut contig_ns) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for _ in 0..9 {
        slice_ns = slice_ns.min(best_ns(1, 1, || {
            black_box(black_box(&big[..]).iter().sum::<f32>());
        }));
        view_ns = view_ns.min(best_ns(1, 1, || {
            black_box(black_box(&v).iter().sum::<f32>());
        }));
        contig_ns = contig_ns.min(best_ns(1, 1, || {
            let s = black_box(&v).as_contiguous().unwrap();
            black_box(s.iter().sum::<f32>());
        }));
    }
    println!("sum 10M f32: slice {:.2} ms", slice_ns / 1e6);
    println!(
        "sum 10M f32: view iter {:.2} ms, ratio {:.3} (goal <= 1.10)",
        view_ns / 1e6,
        view_ns / slice_ns
    );
    println!(
        "sum 10M f32: view as_contiguous {:.2} ms, ratio {:.3}",
        contig_ns / 1e6,
        contig_ns / slice_ns
    );
}
