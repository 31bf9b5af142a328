//! Kernels using math, vector (masked), complex and tensor ops
//! (fixtures/dialects.mlir), lowered by the default pipeline and checked
//! element by element against the same arithmetic in Rust.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{function, library};
use locus_memref::{CallOptions, MemRefArg, MemRefViewMut, Scalar, Signature, Value};

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

/// erf by its Taylor series (|x| <= 2 here), to check libm's.
fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..60 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn math_intrinsics_and_libm_calls() {
    let f = function("dialects.mlir", "math_mix");
    let mut a: Vec<f32> = (0..9).map(|i| i as f32 * 0.45 - 2.0).collect();
    let mut b = vec![0.0f32; 9];
    let mut va = MemRefViewMut::contiguous(&mut a, [9]).unwrap();
    let mut vb = MemRefViewMut::contiguous(&mut b, [9]).unwrap();
    f.call(
        [
            MemRefArg::from_view_mut(&mut va).into(),
            MemRefArg::from_view_mut(&mut vb).into(),
        ],
        CallOptions::default(),
    )
    .unwrap();
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let x = x as f64;
        let want = x.tanh() + x.exp() + x.abs().sqrt() + x.atan() + erf(x);
        close(y as f64, want, 1e-5, &format!("element {i} (x = {x})"));
    }
}

#[test]
fn vector_masked_transfers_stop_at_the_end() {
    let f = function("dialects.mlir", "vector_masked");
    for n in [0usize, 1, 4, 7, 10] {
        let mut a: Vec<f32> = (0..n).map(|i| i as f32 - 3.0).collect();
        // One sentinel past the end of b: a masked write must not reach it.
        let mut b = vec![-7.0f32; n + 1];
        let mut va = MemRefViewMut::contiguous(&mut a, [n as i64]).unwrap();
        let mut vb = MemRefViewMut::contiguous(&mut b[..n], [n as i64]).unwrap();
        f.call(
            [
                MemRefArg::from_view_mut(&mut va).into(),
                MemRefArg::from_view_mut(&mut vb).into(),
            ],
            CallOptions::default(),
        )
        .unwrap();
        for i in 0..n {
            assert_eq!(b[i], 2.0 * a[i] + 1.0, "n = {n}, element {i}");
        }
        assert_eq!(b[n], -7.0, "n = {n}: written past the end");
    }
}

#[test]
fn vector_masked_load_and_reduction() {
    let f = function("dialects.mlir", "vector_sum");
    for n in [0usize, 3, 8, 13] {
        let mut a: Vec<f64> = (0..n).map(|i| (i * i) as f64 + 0.5).collect();
        let want: f64 = a.iter().sum();
        let mut va = MemRefViewMut::contiguous(&mut a, [n as i64]).unwrap();
        let out = f
            .call(
                [MemRefArg::from_view_mut(&mut va).into()],
                CallOptions::default(),
            )
            .unwrap();
        match out.as_slice() {
            [Value::Scalar(Scalar::F64(s))] => assert_eq!(*s, want, "n = {n}"),
            other => panic!("n = {n}: {other:?}"),
        }
    }
}

#[test]
fn complex_exp_mul_abs() {
    let f = function("dialects.mlir", "complex_abs_exp");
    let n = 7;
    let mut re: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 1.5).collect();
    let mut im: Vec<f64> = (0..n).map(|i| 2.0 - i as f64 * 0.7).collect();
    let mut out = vec![0.0f64; n];
    let mut vr = MemRefViewMut::contiguous(&mut re, [n as i64]).unwrap();
    let mut vi = MemRefViewMut::contiguous(&mut im, [n as i64]).unwrap();
    let mut vo = MemRefViewMut::contiguous(&mut out, [n as i64]).unwrap();
    f.call(
        [
            MemRefArg::from_view_mut(&mut vr).into(),
            MemRefArg::from_view_mut(&mut vi).into(),
            MemRefArg::from_view_mut(&mut vo).into(),
        ],
        CallOptions::default(),
    )
    .unwrap();
    for i in 0..n {
        // |exp(z) z| = e^re |z|.
        let want = re[i].exp() * re[i].hypot(im[i]);
        close(out[i], want, 1e-12, &format!("element {i}"));
    }
}

#[test]
fn tensor_kernel_is_bufferized_with_identity_layout_at_the_boundary() {
    let lib = library("dialects.mlir");
    let sig = Signature::parse("(memref<?xf32>, memref<?xf32>) -> memref<?xf32>").unwrap();
    // SAFETY: one-shot bufferization with identity-layout-map boundaries gives
    // tensor<?xf32> -> memref<?xf32>, and the result is a fresh allocation.
    let f = unsafe { lib.function("tensor_add_sq", sig) }.unwrap();
    let n = 6;
    let mut a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut b: Vec<f32> = (0..n).map(|i| 1.5 - i as f32).collect();
    let (a0, b0) = (a.clone(), b.clone());
    let mut va = MemRefViewMut::contiguous(&mut a, [n as i64]).unwrap();
    let mut vb = MemRefViewMut::contiguous(&mut b, [n as i64]).unwrap();
    let out = f
        .call(
            [
                MemRefArg::from_view_mut(&mut va).into(),
                MemRefArg::from_view_mut(&mut vb).into(),
            ],
            CallOptions::default(),
        )
        .unwrap();
    let [Value::MemRef(m)] = out.as_slice() else {
        panic!("{out:?}")
    };
    let got: Vec<f32> = m.view::<f32, 1>().unwrap().iter().copied().collect();
    assert_eq!(got.len(), n);
    for i in 0..n {
        assert_eq!(got[i], a0[i] + b0[i] * b0[i], "element {i}");
    }
    drop(out);
    // The inputs are not written.
    assert_eq!((a, b), (a0, b0));
}
