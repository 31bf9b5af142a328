//! Chapter: MLIR memrefs from Rust.
//!
//! A kernel with a strided 2-D parameter and two results (a fresh memref and an
//! f32) is lowered by `mlir-opt-19` with C wrappers requested, linked into a
//! shared library, and called through `_mlir_ciface_` on a *transposed* Rust
//! view. Every element of the returned buffer is checked against Rust's own
//! computation, the buffer is freed through its allocated pointer, and an
//! identity-layout variant of the kernel refuses the same view.

use locus_memref::{
    compile, Arg, CallOptions, Library, MemRefArg, MemRefView, MemRefViewMut, Origin, Scalar,
    Signature, Value,
};

use super::{tool, Tour};
use crate::Failure;

/// The kernel: `out[i] = k * sum_j m[i, j]` (freshly allocated) and the total.
const KERNEL: &str = r#"func.func @scaled_row_sums(%m: memref<?x?xf32, strided<[?, ?], offset: ?>>, %k: f32)
    -> (memref<?xf32>, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r = memref.dim %m, %c0 : memref<?x?xf32, strided<[?, ?], offset: ?>>
  %c = memref.dim %m, %c1 : memref<?x?xf32, strided<[?, ?], offset: ?>>
  %out = memref.alloc(%r) {alignment = 64} : memref<?xf32>
  %t = scf.for %i = %c0 to %r step %c1 iter_args(%tot = %zero) -> (f32) {
    %s = scf.for %j = %c0 to %c step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %m[%i, %j] : memref<?x?xf32, strided<[?, ?], offset: ?>>
      %n = arith.addf %acc, %x : f32
      scf.yield %n : f32
    }
    %v = arith.mulf %s, %k : f32
    memref.store %v, %out[%i] : memref<?xf32>
    %nt = arith.addf %tot, %v : f32
    scf.yield %nt : f32
  }
  return %out, %t : memref<?xf32>, f32
}

func.func @dense_row_sums(%m: memref<?x?xf32>, %out: memref<?xf32>) {
  return
}
"#;

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

pub fn run_chapter(tour: &mut Tour<'_>) -> Result<(), Failure> {
    tour.line("Input: an MLIR kernel taking memref<?x?xf32, strided<[?, ?], offset: ?>> and f32,")?;
    tour.line("  returning (memref<?xf32>, f32): k times each row sum (in a fresh buffer")?;
    tour.line("  allocated with alignment 64) and their total.")?;
    tour.line("")?;
    tour.line(format!(
        "Lowering: mlir-opt-19 {}",
        compile::PIPELINE.join(" ")
    ))?;
    let source = tour.scratch_file("memref-kernel.mlir");
    std::fs::write(&source, KERNEL).map_err(|e| fail(format!("{}: {e}", source.display())))?;
    let mut pipeline: Vec<&str> = compile::PIPELINE.to_vec();
    let shown = source.display().to_string();
    pipeline.push(&shown);
    let lowered = tool("mlir-opt-19", &pipeline, None)?;
    let ir = tool(
        "mlir-translate-19",
        &["--mlir-to-llvmir", "-"],
        Some(&lowered),
    )?;
    tour.line("The two calling conventions of @scaled_row_sums in the LLVM IR:")?;
    for l in ir
        .lines()
        .filter(|l| l.starts_with("define") && l.contains("scaled_row_sums"))
    {
        let short = l.trim_end_matches(" {");
        tour.line(format!("  {short}"))?;
    }
    tour.line(
        "  (expanded: each memref as allocated, aligned, offset, sizes, strides, results as a",
    )?;
    tour.line(
        "  struct returned by value; _mlir_ciface_: descriptor pointers, results through the",
    )?;
    tour.line(
        "  first pointer. Locus takes results only through the latter: LLVM's struct returns",
    )?;
    tour.line("  do not follow the platform C ABI.)")?;

    let lib_path = tour.scratch_file("memref-kernel.so");
    compile::compile_str(KERNEL, &lib_path).map_err(fail)?;
    tour.line(format!(
        "Built with opt-19 -O2, llc-19 -relocation-model=pic and clang-19 -shared: {}",
        lib_path.display()
    ))?;
    // SAFETY: the library was built just now from KERNEL.
    let lib = unsafe { Library::open(&lib_path) }.map_err(fail)?;
    let sig = Signature::from_mlir(KERNEL, "scaled_row_sums").map_err(fail)?;
    tour.line(format!("Signature read from the source: {sig}"))?;
    // SAFETY: the signature is taken from the source the library was built from.
    let f = unsafe { lib.function("scaled_row_sums", sig) }.map_err(fail)?;

    // A 3x4 row-major matrix m[i][j] = i + 10 j, passed as its 4x3 transpose.
    let mut data: Vec<f32> = (0..12)
        .map(|k| (k / 4) as f32 + 10.0 * (k % 4) as f32)
        .collect();
    // Rust's own answer, from a shared view, before the kernel gets the buffer.
    let t = MemRefView::contiguous(&data, [3, 4])
        .and_then(|m| m.transpose(0, 1))
        .map_err(fail)?;
    let want: Vec<f32> = (0..4i64)
        .map(|i| {
            (0..3i64)
                .map(|j| t.get(&[i, j]).copied().unwrap_or(f32::NAN))
                .sum::<f32>()
                * 0.5
        })
        .collect();
    let want_total: f32 = want.iter().sum();
    let mut t = MemRefViewMut::contiguous(&mut data, [3, 4])
        .and_then(|m| m.transpose(0, 1))
        .map_err(fail)?;
    tour.line("")?;
    tour.line(format!(
        "Call on the transposed view: sizes {:?}, strides {:?}, k = 0.5 (no copy: a mutable",
        t.sizes(),
        t.strides()
    ))?;
    tour.line("  view passes the buffer itself; a shared view would pass a copy, as a kernel may")?;
    tour.line("  write through any memref it gets)")?;
    let args = [
        Arg::from(MemRefArg::from_view_mut(&mut t)),
        Scalar::F32(0.5).into(),
    ];
    let results = f.call(args, CallOptions::default()).map_err(fail)?;
    let (out, total) = match results.as_slice() {
        [Value::MemRef(out), Value::Scalar(Scalar::F32(total))] => (out, *total),
        _ => return Err(fail("unexpected results from scaled_row_sums")),
    };
    let view = out.view::<f32, 1>().map_err(fail)?;
    let got: Vec<f32> = view.iter().copied().collect();
    tour.line(format!("  returned memref: {got:?}, total {total}"))?;
    tour.line(format!(
        "  allocated {:?}, aligned {:?} (64-byte aligned: {}), origin {:?}",
        out.allocated(),
        out.aligned(),
        (out.aligned() as usize).is_multiple_of(64),
        out.origin()
    ))?;
    for (i, want) in want.iter().enumerate() {
        if view.get(&[i as i64]) != Some(want) {
            return Err(fail(format!(
                "element {i}: kernel gave {:?}, Rust computes {want}",
                view.get(&[i as i64])
            )));
        }
    }
    tour.passed("each of the 4 returned elements equals Rust's sum over the transposed view")?;
    if total != want_total {
        return Err(fail(format!(
            "total: kernel gave {total}, Rust computes {want_total}"
        )));
    }
    tour.passed("the f32 result (second field of the result struct) equals Rust's total")?;
    if !(out.aligned() as usize).is_multiple_of(64) {
        return Err(fail("the aligned pointer is not 64-byte aligned"));
    }
    if out.origin() != Origin::Fresh {
        return Err(fail(format!(
            "the fresh buffer was taken for {:?}",
            out.origin()
        )));
    }
    tour.passed(
        "the buffer is found to be the kernel's own: no argument or other result points into it",
    )?;
    drop(results);
    tour.line(
        "  dropped: the result freed its allocated pointer (not the aligned one) with free();",
    )?;
    tour.line(
        "  results pointing into an argument or a global would not have been freed, and results",
    )?;
    tour.line("  sharing one buffer free it once, with the last of them")?;

    // The identity-layout variant must refuse the transposed view.
    let dense_sig = Signature::from_mlir(KERNEL, "dense_row_sums").map_err(fail)?;
    // SAFETY: as above.
    let dense = unsafe { lib.function("dense_row_sums", dense_sig) }.map_err(fail)?;
    let mut sink = vec![0f32; 4];
    let mut sink_view = MemRefViewMut::contiguous(&mut sink, [4]).map_err(fail)?;
    let args = [
        Arg::from(MemRefArg::from_view_mut(&mut t)),
        MemRefArg::from_view_mut(&mut sink_view).into(),
    ];
    match dense.call(args, CallOptions::default()) {
        Err(e) => {
            tour.line(format!(
                "Same view to @dense_row_sums(memref<?x?xf32>, ..): {e}"
            ))?;
            tour.passed(
                "an identity-layout callee refuses a strided view instead of misreading it",
            )?;
        }
        Ok(_) => return Err(fail("an identity-layout callee accepted a transposed view")),
    }
    Ok(())
}
