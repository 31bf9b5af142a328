//! A host calling an MLIR kernel on its own arrays.
//!
//! Compiles a two-function kernel with the MLIR 19 tools (`compile::compile_str`: mlir-opt-19,
//! mlir-translate-19, opt-19, llc-19, clang-19, with C wrappers for every function), opens
//! the library and calls both functions through their `_mlir_ciface_` wrappers:
//! - `saxpy` updates a Rust `Vec` in place (the kernel gets the buffer itself);
//! - `row_sums` returns a fresh buffer, which the result owns and frees once.
//!
//! Every argument is checked against the kernel's own MLIR types first: a strided view
//! passed where the kernel expects a contiguous matrix is refused (shown below), or copied
//! when the caller asks for it.
//!
//! Run: `cargo run -p locus-memref --example call_kernel`. Exits 1 on any error or wrong
//! value.

use std::process::ExitCode;

use locus_memref::{
    compile, CallOptions, Error, Library, MemRefArg, MemRefView, MemRefViewMut, Origin, Scalar,
    Signature, Value,
};

const KERNEL: &str = r#"
// y = a * x + y, in place: no results.
func.func @saxpy(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %xi = memref.load %x[%i] : memref<?xf32>
    %yi = memref.load %y[%i] : memref<?xf32>
    %ax = arith.mulf %a, %xi : f32
    %s = arith.addf %ax, %yi : f32
    memref.store %s, %y[%i] : memref<?xf32>
  }
  return
}

// The sum of each row of a contiguous matrix, in a fresh buffer.
func.func @row_sums(%m: memref<?x?xf32>) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %rows = memref.dim %m, %c0 : memref<?x?xf32>
  %cols = memref.dim %m, %c1 : memref<?x?xf32>
  %out = memref.alloc(%rows) : memref<?xf32>
  scf.for %i = %c0 to %rows step %c1 {
    %s = scf.for %j = %c0 to %cols step %c1 iter_args(%acc = %z) -> (f32) {
      %v = memref.load %m[%i, %j] : memref<?x?xf32>
      %n = arith.addf %acc, %v : f32
      scf.yield %n : f32
    }
    memref.store %s, %out[%i] : memref<?xf32>
  }
  return %out : memref<?xf32>
}
"#;

fn run() -> Result<(), String> {
    let err = |e: Error| e.to_string();
    // A private temporary directory (mkdtemp), removed when `dir` drops.
    let dir = compile::private_dir().map_err(err)?;
    let so = dir.path().join("kernel.so");
    compile::compile_str(KERNEL, &so).map_err(err)?;
    // SAFETY: a library compiled just now from KERNEL, meant to be loaded here.
    let lib = unsafe { Library::open(&so) }.map_err(err)?;

    // Signatures from the kernel's source, as mlir-opt-19 parses it.
    let saxpy_sig = Signature::from_mlir(KERNEL, "saxpy").map_err(err)?;
    let sums_sig = Signature::from_mlir(KERNEL, "row_sums").map_err(err)?;
    println!("saxpy: {saxpy_sig}\nrow_sums: {sums_sig}");
    // SAFETY: the signatures are the functions' own; fresh results come from malloc
    // (MLIR's default lowering of memref.alloc), so the results may free them.
    let saxpy = unsafe { lib.function("saxpy", saxpy_sig) }.map_err(err)?;
    // SAFETY: as above.
    let row_sums = unsafe { lib.function("row_sums", sums_sig) }.map_err(err)?;

    // saxpy on Rust vectors: x read through a shared view (the kernel gets a copy), y
    // written in place through a mutable one.
    let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let mut y = vec![1.0f32; 8];
    {
        let xv = MemRefView::contiguous(&x, [8]).map_err(err)?;
        let mut yv = MemRefViewMut::contiguous(&mut y, [8]).map_err(err)?;
        let args = [
            Scalar::F32(2.0).into(),
            MemRefArg::from_view(&xv).into(),
            MemRefArg::from_view_mut(&mut yv).into(),
        ];
        let results = saxpy.call(args, CallOptions::default()).map_err(err)?;
        if !results.is_empty() {
            return Err(format!("saxpy returned {} values", results.len()));
        }
    }
    println!("saxpy(2, x, y): y = {y:?}");
    let expected: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    if y != expected {
        return Err(format!("saxpy: expected {expected:?}"));
    }

    // row_sums of a 2x3 matrix: the result is a buffer the kernel allocated.
    let m = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mv = MemRefView::contiguous(&m, [2, 3]).map_err(err)?;
    let results = row_sums
        .call([MemRefArg::from_view(&mv).into()], CallOptions::default())
        .map_err(err)?;
    let [Value::MemRef(sums)] = results.as_slice() else {
        return Err(format!("row_sums: one memref expected, got {results:?}"));
    };
    let got: Vec<f32> = sums
        .view::<f32, 1>()
        .map_err(err)?
        .iter()
        .copied()
        .collect();
    println!(
        "row_sums([[1,2,3],[4,5,6]]) = {got:?} ({:?})",
        sums.origin()
    );
    if got != [6.0, 15.0] || sums.origin() != Origin::Fresh {
        return Err("row_sums: expected [6, 15] in a fresh buffer".into());
    }
    // Dropping the results frees the kernel's buffer (once, with free()).
    drop(results);

    // The transpose is a strided view; the kernel's type has the identity layout, so it
    // would read the wrong elements: refused, naming the argument and why.
    let t = mv.transpose(0, 1).map_err(err)?;
    match row_sums.call([MemRefArg::from_view(&t).into()], CallOptions::default()) {
        Err(e) => println!("row_sums(transposed view) refused: {e}"),
        Ok(_) => return Err("a strided view was passed to an identity-layout kernel".into()),
    }
    // Asked to, the call copies it into a contiguous buffer first.
    let options = CallOptions::default().copy_strided(true);
    let results = row_sums
        .call([MemRefArg::from_view(&t).into()], options)
        .map_err(err)?;
    let [Value::MemRef(sums)] = results.as_slice() else {
        return Err(format!("row_sums: one memref expected, got {results:?}"));
    };
    let got: Vec<f32> = sums
        .view::<f32, 1>()
        .map_err(err)?
        .iter()
        .copied()
        .collect();
    println!("row_sums(transposed, copied) = {got:?}");
    if got != [5.0, 7.0, 9.0] {
        return Err("row_sums of the transpose: expected [5, 7, 9]".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("call_kernel: {e}");
            ExitCode::FAILURE
        }
    }
}
