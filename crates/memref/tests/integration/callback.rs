//! A compiled kernel calling back into Rust (spec 002's external-function
//! case): fixtures/callback.mlir declares `@rust_scale(memref<?xf32>, f32)`,
//! which calls `_mlir_ciface_rust_scale`, defined here with `mlir_callback!`.
//! The test executable exports its symbols (build.rs links it with
//! `--export-dynamic`) so the loader resolves the kernel's reference to it.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};

use locus_memref::{CallOptions, MemRefArg, MemRefDescriptor, MemRefViewMut};

static CALLS: AtomicUsize = AtomicUsize::new(0);
static SEEN_LEN: AtomicUsize = AtomicUsize::new(0);

locus_memref::mlir_callback! {
    fn _mlir_ciface_rust_scale(v: view_mut<f32, 1>; factor: f32) {
        CALLS.fetch_add(1, Ordering::SeqCst);
        SEEN_LEN.store(v.len(), Ordering::SeqCst);
        v.for_each_mut(|_, x| *x *= factor);
    }
}

#[test]
fn compiled_kernel_calls_back_into_rust() {
    let lib = common::library("callback.mlir");
    // SAFETY: `scale_then_inc(memref<?xf32>)`'s C wrapper takes one rank-1 descriptor.
    let run: unsafe extern "C" fn(*mut MemRefDescriptor<f32, 1>) =
        unsafe { lib.ciface("scale_then_inc") }.unwrap();
    let mut data: Vec<f32> = (0..9).map(|i| i as f32).collect();
    let mut view = MemRefViewMut::contiguous(&mut data, [9]).unwrap();
    let mut d = view.to_descriptor();
    let before = CALLS.load(Ordering::SeqCst);
    // SAFETY: `d` describes `data`, alive for the call.
    unsafe { run(&mut d) };
    assert_eq!(CALLS.load(Ordering::SeqCst), before + 1);
    assert_eq!(SEEN_LEN.load(Ordering::SeqCst), 9);
    for (i, x) in data.iter().enumerate() {
        assert_eq!(*x, i as f32 * 3.0 + 1.0, "element {i}");
    }
    // Dynamic call of the same kernel on a reversed, strided view: its
    // identity layout refuses it, and with a copy asked for, the writes of
    // both the callback and the kernel come back through the strides.
    let f = common::function("callback.mlir", "scale_then_inc");
    let mut data: Vec<f32> = (0..10).map(|i| i as f32).collect();
    let mut view = MemRefViewMut::new(&mut data, 9, [5], [-2]).unwrap();
    let args = [MemRefArg::from_view_mut(&mut view).into()];
    assert!(f.call(args, CallOptions::default()).is_err());
    let copy = CallOptions::default().copy_strided(true);
    f.call([MemRefArg::from_view_mut(&mut view).into()], copy)
        .unwrap();
    for (i, x) in data.iter().enumerate() {
        let touched = i % 2 == 1;
        let want = if touched {
            i as f32 * 3.0 + 1.0
        } else {
            i as f32
        };
        assert_eq!(*x, want, "element {i}");
    }
    assert_eq!(SEEN_LEN.load(Ordering::SeqCst), 5);
}
