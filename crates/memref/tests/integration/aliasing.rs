//! Results that alias: the same buffer returned twice, a buffer and its
//! subview, a buffer ranked and unranked, an argument or its subview, a copy
//! made for the call. Each allocation is freed exactly once, after every
//! result pointing into it is gone; nothing the caller passed is freed; the
//! heap descriptor of every unranked result is freed. Kernels from
//! fixtures/aliasing.mlir; `aliasing_under_valgrind` runs every case under
//! valgrind's memory checker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{function, library};
use locus_memref::owned::libc_free;
use locus_memref::{
    CallOptions, Element, Error, MemRefArg, MemRefDescriptor, MemRefView, MemRefViewMut, Origin,
    OwnedMemRef, OwnedUnranked, Ownership, ReturnedMemRef, Scalar, UnrankedMemRefDescriptor, Value,
};

type D<T, const N: usize> = MemRefDescriptor<T, N>;

/// The memref results, in order.
fn memrefs(values: Vec<Value>) -> Vec<ReturnedMemRef> {
    values
        .into_iter()
        .filter_map(|v| match v {
            Value::MemRef(m) => Some(m),
            Value::Scalar(_) => None,
        })
        .collect()
}

/// A rank-1 result's elements.
fn elems<T: Element>(m: &ReturnedMemRef) -> Vec<T> {
    m.view::<T, 1>().unwrap().iter().copied().collect()
}

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// `return %m, %m`: the second result is read after the first is dropped.
#[test]
fn same_buffer_returned_twice() {
    let f = function("aliasing.mlir", "twice");
    for n in [6, 1, 0] {
        let res = f
            .call([Scalar::Index(n).into()], CallOptions::default())
            .unwrap();
        let mut ms = memrefs(res).into_iter();
        let (first, second) = (ms.next().unwrap(), ms.next().unwrap());
        assert_eq!(first.aligned(), second.aligned());
        assert_eq!(
            (first.origin(), second.origin()),
            (Origin::Fresh, Origin::Fresh)
        );
        assert!(first.shares_allocation_with(&second));
        assert_eq!(first.owner().unwrap().holders(), 2);
        assert_eq!(elems::<f32>(&first), iota(n as usize));
        drop(first);
        // Malloc reuses a freed block at once: allocate over it.
        let reuse: Vec<Vec<u8>> = (0..8).map(|_| vec![0xAB; 4 * n as usize]).collect();
        assert_eq!(elems::<f32>(&second), iota(n as usize), "n = {n}");
        drop(reuse);
    }
}

/// A fresh buffer and the subview of its elements 1.. (same allocated
/// pointer, another aligned offset), a scalar between them.
#[test]
fn fresh_buffer_and_its_subview() {
    let f = function("aliasing.mlir", "with_tail");
    let res = f
        .call([Scalar::Index(6).into()], CallOptions::default())
        .unwrap();
    assert!(matches!(res[1], Value::Scalar(Scalar::I64(5))));
    let mut ms = memrefs(res).into_iter();
    let (whole, tail) = (ms.next().unwrap(), ms.next().unwrap());
    assert_eq!(whole.allocated(), tail.allocated());
    assert_eq!(tail.offset(), whole.offset() + 1);
    assert!(whole.shares_allocation_with(&tail));
    assert_eq!(whole.owner().unwrap().ptr(), whole.allocated());
    // The subview is dropped first here, the buffer read after.
    assert_eq!(elems::<f64>(&tail), [1.0, 2.0, 3.0, 4.0, 5.0]);
    drop(tail);
    let reuse: Vec<Vec<u8>> = (0..8).map(|_| vec![0xAB; 48]).collect();
    assert_eq!(elems::<f64>(&whole), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    drop(reuse);
}

/// One grid returned unranked and ranked, with an unrelated buffer between.
#[test]
fn buffer_returned_ranked_and_unranked() {
    let f = function("aliasing.mlir", "grid_both");
    let res = f
        .call([Scalar::Index(3).into()], CallOptions::default())
        .unwrap();
    let mut ms = memrefs(res).into_iter();
    let (u, other, m) = (ms.next().unwrap(), ms.next().unwrap(), ms.next().unwrap());
    assert!(u.was_unranked());
    assert_eq!(u.allocated(), m.allocated());
    assert_ne!(u.allocated(), other.allocated());
    assert!(u.shares_allocation_with(&m));
    assert!(!u.shares_allocation_with(&other));
    assert_eq!(other.owner().unwrap().holders(), 1);
    let grid = [0, 1, 2, 10, 11, 12];
    assert_eq!(
        u.view::<i32, 2>()
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        grid
    );
    drop(u);
    drop(other);
    let reuse: Vec<Vec<u8>> = (0..8).map(|_| vec![0xAB; 24]).collect();
    assert_eq!(
        m.view::<i32, 2>()
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        grid
    );
    drop(reuse);
}

/// `return %u, %u` with `%u` unranked: two heap descriptors, one buffer.
#[test]
fn unranked_buffer_returned_twice() {
    let f = function("aliasing.mlir", "unranked_twice");
    let res = f
        .call([Scalar::Index(4).into()], CallOptions::default())
        .unwrap();
    let mut ms = memrefs(res).into_iter();
    let (a, b) = (ms.next().unwrap(), ms.next().unwrap());
    assert!(a.was_unranked() && b.was_unranked());
    assert!(a.shares_allocation_with(&b));
    drop(a);
    let reuse: Vec<Vec<u8>> = (0..8).map(|_| vec![0xAB; 16]).collect();
    assert_eq!(elems::<f32>(&b), iota(4));
    drop(reuse);
}

/// The argument and its subview come back; with the default options nothing
/// is freed, and the caller's `Vec` (or array on the stack) is intact.
#[test]
fn argument_returned_is_never_freed() {
    let f = function("aliasing.mlir", "arg_and_tail");
    let mut data = vec![1.5f32, 2.5, 3.5, 4.5];
    let mut v = MemRefViewMut::contiguous(&mut data, [4]).unwrap();
    let res = f
        .call(
            [MemRefArg::from_view_mut(&mut v).into()],
            CallOptions::default(),
        )
        .unwrap();
    let ms = memrefs(res);
    for m in &ms {
        assert_eq!(m.origin(), Origin::Argument(0));
        assert!(m.owner().is_none());
    }
    assert_eq!(elems::<f32>(&ms[0]), [1.5, 2.5, 3.5, 4.5]);
    assert_eq!(elems::<f32>(&ms[1]), [2.5, 3.5, 4.5]);
    drop(ms);
    assert_eq!(data, [1.5, 2.5, 3.5, 4.5]);
    let mut on_stack = [7.0f32; 3];
    let mut v = MemRefViewMut::contiguous(&mut on_stack, [3]).unwrap();
    let res = f
        .call(
            [MemRefArg::from_view_mut(&mut v).into()],
            CallOptions::default(),
        )
        .unwrap();
    drop(res);
    assert_eq!(on_stack, [7.0; 3]);
    drop(data);
}

/// The rank-2 argument returned unranked: the data is the caller's, the
/// 56-byte heap descriptor is freed (checked by valgrind in
/// `aliasing_under_valgrind`), with the default options and when results
/// are borrowed.
#[test]
fn argument_returned_unranked() {
    let f = function("aliasing.mlir", "arg_unranked");
    for options in [
        CallOptions::default(),
        CallOptions::default().borrow_results(true),
    ] {
        let mut data: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let mut v = MemRefViewMut::contiguous(&mut data, [2, 3]).unwrap();
        let res = f
            .call([MemRefArg::from_view_mut(&mut v).into()], options)
            .unwrap();
        let ms = memrefs(res);
        assert_eq!(ms[0].origin(), Origin::Argument(0));
        assert!(ms[0].owner().is_none());
        assert!(ms[0].was_unranked());
        assert_eq!(ms[0].sizes(), [2, 3]);
        assert_eq!(
            ms[0]
                .view::<f32, 2>()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        drop(ms);
        assert_eq!(data, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    }
}

/// A shared view reaches a kernel that writes its argument: the caller's
/// data does not change (the kernel wrote into a copy).
#[test]
fn shared_view_is_never_written() {
    let f = function("aliasing.mlir", "fill");
    let data = [1.0f32, 2.0, 3.0];
    let v = MemRefView::contiguous(&data, [3]).unwrap();
    f.call(
        [MemRefArg::from_view(&v).into(), Scalar::F32(9.0).into()],
        CallOptions::default(),
    )
    .unwrap();
    assert_eq!(data, [1.0, 2.0, 3.0]);
    // The same through a strided parameter, returned: the result shows the
    // kernel's writes (into the copy, which it keeps alive), the data does not.
    let g = function("aliasing.mlir", "fill_and_return");
    let data: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let every_other = MemRefView::new(&data, 1, [4], [2]).unwrap();
    let res = g
        .call(
            [
                MemRefArg::from_view(&every_other).into(),
                Scalar::F32(-1.0).into(),
            ],
            CallOptions::default(),
        )
        .unwrap();
    let ms = memrefs(res);
    assert_eq!(ms[0].origin(), Origin::Argument(0));
    assert_eq!(ms[0].owner().unwrap().holders(), 1);
    assert_eq!(ms[0].strides(), [2]);
    let reuse: Vec<Vec<u8>> = (0..8).map(|_| vec![0xAB; 32]).collect();
    assert_eq!(elems::<f32>(&ms[0]), [-1.0; 4]);
    drop(reuse);
    drop(ms);
    assert_eq!(data, (0..8).map(|i| i as f32).collect::<Vec<_>>());
    // Reversed (negative stride): the copy covers the elements reached, below
    // the offset.
    let reversed = MemRefView::new(&data, 7, [4], [-2]).unwrap();
    let res = g
        .call(
            [
                MemRefArg::from_view(&reversed).into(),
                Scalar::F32(5.0).into(),
            ],
            CallOptions::default(),
        )
        .unwrap();
    let ms = memrefs(res);
    assert_eq!((ms[0].strides(), ms[0].offset()), ([-2].as_slice(), 6));
    assert_eq!(elems::<f32>(&ms[0]), [5.0; 4]);
    drop(ms);
    assert_eq!(data, (0..8).map(|i| i as f32).collect::<Vec<_>>());
    // A mutable view is passed as it is, and written.
    let mut data = vec![0f32; 3];
    let mut v = MemRefViewMut::contiguous(&mut data, [3]).unwrap();
    f.call(
        [
            MemRefArg::from_view_mut(&mut v).into(),
            Scalar::F32(9.0).into(),
        ],
        CallOptions::default(),
    )
    .unwrap();
    assert_eq!(data, [9.0; 3]);
}

/// A strided view copied for an identity-layout parameter, returned (with a
/// subview of it) by the kernel: the results read the copy, which lives as
/// long as they do; the copy goes back to the mutable view after the call.
#[test]
fn result_aliasing_a_copy_made_for_the_call() {
    let f = function("aliasing.mlir", "arg_and_tail");
    let mut data: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let mut v = MemRefViewMut::new(&mut data, 1, [4], [2]).unwrap();
    let options = CallOptions::default().copy_strided(true);
    let res = f
        .call([MemRefArg::from_view_mut(&mut v).into()], options)
        .unwrap();
    let ms = memrefs(res);
    // Both point into the row-major copy, which they keep alive together.
    assert_eq!(ms[0].origin(), Origin::Argument(0));
    assert!(ms[0].shares_allocation_with(&ms[1]));
    assert_eq!(ms[0].strides(), [1]);
    let reuse: Vec<Vec<u8>> = (0..8).map(|_| vec![0xAB; 16]).collect();
    assert_eq!(elems::<f32>(&ms[0]), [1.0, 3.0, 5.0, 7.0]);
    assert_eq!(elems::<f32>(&ms[1]), [3.0, 5.0, 7.0]);
    drop(reuse);
    drop(ms);
    assert_eq!(data, (0..8).map(|i| i as f32).collect::<Vec<_>>());
}

/// The typed path: `return %m, %m` through `_mlir_ciface_twice`, the second
/// result given a clone of the first one's guard. A mutable view is refused
/// while both hold it; the buffer is freed once.
#[test]
fn typed_results_share_one_guard() {
    #[repr(C)]
    struct Two {
        a: D<f32, 1>,
        b: D<f32, 1>,
    }
    let lib = library("aliasing.mlir");
    // SAFETY: the wrapper's type: the result struct first, then the index.
    let twice: unsafe extern "C" fn(*mut Two, i64) = unsafe { lib.ciface("twice") }.unwrap();
    let mut r = Two {
        a: D::null(),
        b: D::null(),
    };
    // SAFETY: a valid result slot.
    unsafe { twice(&mut r, 5) };
    assert_eq!(r.a, r.b);
    // SAFETY: a fresh malloc buffer, owned by the first result alone...
    let mut first = unsafe { OwnedMemRef::from_descriptor(r.a, Ownership::Owned, libc_free()) };
    // SAFETY: ...and shared with the second through a clone of its guard.
    let second = unsafe { OwnedMemRef::with_owner(r.b, first.owner().cloned()) };
    assert_eq!(second.ownership(), Ownership::Owned);
    assert_eq!(
        first.view_mut().unwrap_err(),
        Error::SharedAllocation { holders: 2 }
    );
    assert_eq!(second.to_vec().unwrap(), iota(5));
    drop(second);
    first.view_mut().unwrap().for_each_mut(|_, x| *x += 1.0);
    assert_eq!(first.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0]);
    // Taken apart, the guard gives its pointer up to be freed by hand.
    let (d, owner) = first.into_parts();
    let p = owner.unwrap().into_raw().unwrap();
    assert_eq!(p, d.allocated.cast());
    // SAFETY: malloc's, given up by its only guard.
    unsafe { libc::free(p) };
}

/// The typed path: the rank-2 argument returned unranked, taken as
/// borrowed: the data is left alone, the 56-byte heap descriptor is freed
/// (valgrind checks it in `aliasing_under_valgrind`).
#[test]
fn typed_unranked_result_aliasing_an_argument() {
    let lib = library("aliasing.mlir");
    // SAFETY: the wrapper's type: the result slot first, then the argument.
    let f: unsafe extern "C" fn(*mut UnrankedMemRefDescriptor, *mut D<f32, 2>) =
        unsafe { lib.ciface("arg_unranked") }.unwrap();
    let want: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let mut data = want.clone();
    let mut v = MemRefViewMut::contiguous(&mut data, [2, 3]).unwrap();
    let mut d = v.to_descriptor();
    let mut u = UnrankedMemRefDescriptor::null();
    // SAFETY: valid descriptors; `data` outlives every use of the result.
    unsafe { f(&mut u, &mut d) };
    assert_eq!(u.rank, 2);
    // SAFETY: a returned unranked memref; its data is the argument's.
    let owned = unsafe { OwnedUnranked::from_descriptor(u, Ownership::Borrowed, libc_free()) };
    assert!(owned.owner().is_none());
    // SAFETY: f32 elements.
    let ranked = unsafe { owned.into_ranked::<f32, 2>() }.unwrap();
    assert_eq!(ranked.descriptor().aligned, d.aligned);
    assert_eq!(ranked.to_vec().unwrap(), want);
    drop(ranked);
    assert_eq!(data, want);
}

/// Every case above, run under valgrind by `aliasing_under_valgrind`.
#[test]
#[ignore = "run under valgrind by aliasing_under_valgrind"]
fn valgrind_child_aliasing() {
    same_buffer_returned_twice();
    fresh_buffer_and_its_subview();
    buffer_returned_ranked_and_unranked();
    unranked_buffer_returned_twice();
    argument_returned_is_never_freed();
    argument_returned_unranked();
    shared_view_is_never_written();
    result_aliasing_a_copy_made_for_the_call();
    typed_results_share_one_guard();
    typed_unranked_result_aliasing_an_argument();
}

/// No invalid read or free and nothing definitely lost in any aliasing case.
#[test]
fn aliasing_under_valgrind() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("valgrind")
        .args([
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
            "--error-exitcode=99",
            "-q",
        ])
        .arg(&exe)
        .args([
            "--exact",
            "aliasing::valgrind_child_aliasing",
            "--ignored",
            "--test-threads=1",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run valgrind ({e}); scripts/install-deps installs it"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{err}"
    );
}

/// One buffer given for two parameters (`MemRefArg::alias`, numpy's `f(a, a)`): the
/// kernel's write through the first parameter is kept; through a row-major copy made
/// for an identity-layout parameter, `a += a.T` adds the elements as they were (numpy
/// copies the overlapping operand too), and an element written both through the copy
/// and the buffer itself, to different values, is an error. Kernels from
/// fixtures/one_array.mlir.
#[test]
fn one_buffer_for_two_parameters() {
    use locus_memref::slice::Slicing;
    // dst[i] = 2 * src[i] + 1 on one buffer.
    let mut data = vec![1.0f32, -2.0, 3.5];
    let mut view = MemRefViewMut::contiguous(&mut data, [3]).unwrap();
    let dst = MemRefArg::from_view_mut(&mut view);
    // SAFETY: both go to the one call below.
    let src = unsafe { dst.alias() };
    function("one_array.mlir", "scale_into")
        .call([dst.into(), src.into()], CallOptions::default())
        .unwrap();
    assert_eq!(data, [3.0, -3.0, 8.0]);
    // a += a.T with the transposed view copied for the identity-layout parameter.
    let a0: Vec<f32> = (0..9).map(|i| i as f32).collect();
    let mut a = a0.clone();
    let mut view = MemRefViewMut::contiguous(&mut a, [3, 3]).unwrap();
    let dst = MemRefArg::from_view_mut(&mut view);
    // SAFETY: as above.
    let transposed = unsafe { dst.alias() }
        .sliced(&Slicing::parse(".T").unwrap())
        .unwrap();
    let options = CallOptions::default().copy_strided(true);
    function("one_array.mlir", "add_into")
        .call([dst.into(), transposed.into()], options)
        .unwrap();
    let want: Vec<f32> = (0..9).map(|k| a0[k] + a0[(k % 3) * 3 + k / 3]).collect();
    assert_eq!(a, want);
    // 5 through the copy of A.T at [0, 1] and 7 through A at [1, 0]: the same element.
    let mut b = vec![0.0f32; 4];
    let mut view = MemRefViewMut::contiguous(&mut b, [2, 2]).unwrap();
    let whole = MemRefArg::from_view_mut(&mut view);
    // SAFETY: as above.
    let transposed = unsafe { whole.alias() }
        .sliced(&Slicing::parse(".T").unwrap())
        .unwrap();
    let err = function("one_array.mlir", "write_both")
        .call([transposed.into(), whole.into()], options)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Argument { index: 0, message } if message.contains("byte 8")),
        "{err}"
    );
    // The write through A stays.
    assert_eq!(b, [0.0, 0.0, 7.0, 0.0]);
}
