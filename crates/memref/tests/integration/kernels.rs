//! Kernels compiled at test time from fixtures/*.mlir by mlir-opt-19,
//! mlir-translate-19, llc-19 and clang-19, called through `_mlir_ciface_`
//! (typed and libffi) and the expanded convention, checked element by element.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::ffi::c_void;

use common::{function, library};
use locus_memref::owned::libc_free;
use locus_memref::signature::{ElemType, Type};
use locus_memref::{
    Arg, CallOptions, Element, Error, MemRefArg, MemRefDescriptor, MemRefView, MemRefViewMut,
    Origin, OwnedMemRef, OwnedUnranked, Ownership, Scalar, UnrankedMemRefDescriptor, Value,
};

type D<T, const N: usize> = MemRefDescriptor<T, N>;

fn vals(n: usize, f: impl Fn(usize) -> f32) -> Vec<f32> {
    (0..n).map(f).collect()
}

/// The arguments `(input, output)` of the kernels that read one memref and
/// write another.
fn in_out<'a, T: Element, U: Element, const N: usize, const M: usize>(
    input: &MemRefView<'a, T, N>,
    output: &'a mut MemRefViewMut<'_, U, M>,
) -> [Arg<'a>; 2] {
    [
        MemRefArg::from_view(input).into(),
        MemRefArg::from_view_mut(output).into(),
    ]
}

/// Asserts that `err` is about argument `index` and says `text`.
fn assert_argument_error(err: &Error, index: usize, text: &str) {
    assert!(
        matches!(err, Error::Argument { index: i, message } if *i == index && message.contains(text)),
        "{err}"
    );
}

// ---------------------------------------------------------------- 1-D elementwise

#[test]
fn add_through_typed_ciface() {
    let lib = library("elementwise.mlir");
    // SAFETY: the type is `_mlir_ciface_add`'s, as MLIR lowers the kernel's signature.
    let add: unsafe extern "C" fn(*mut D<f32, 1>, *mut D<f32, 1>, *mut D<f32, 1>) =
        unsafe { lib.ciface("add") }.unwrap();
    let a = vals(100, |i| i as f32);
    let b = vals(100, |i| 0.5 * i as f32);
    let mut c = vec![0f32; 100];
    let va = MemRefView::contiguous(&a, [100]).unwrap();
    let vb = MemRefView::contiguous(&b, [100]).unwrap();
    let mut vc = MemRefViewMut::contiguous(&mut c, [100]).unwrap();
    let (mut da, mut db, mut dc) = (va.to_descriptor(), vb.to_descriptor(), vc.to_descriptor());
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { add(&mut da, &mut db, &mut dc) };
    for i in 0..100 {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
}

#[test]
fn add_through_dynamic_ciface_and_expanded() {
    let f = function("elementwise.mlir", "add");
    let a = vals(37, |i| (i * i) as f32);
    let b = vals(37, |i| -(i as f32));
    for expanded in [false, true] {
        let mut c = vec![f32::NAN; 37];
        let va = MemRefView::contiguous(&a, [37]).unwrap();
        let vb = MemRefView::contiguous(&b, [37]).unwrap();
        let mut vc = MemRefViewMut::contiguous(&mut c, [37]).unwrap();
        let mut args = [
            Arg::from(MemRefArg::from_view(&va)),
            MemRefArg::from_view(&vb).into(),
            MemRefArg::from_view_mut(&mut vc).into(),
        ];
        if expanded {
            f.call_expanded(&mut args, false).unwrap();
        } else {
            assert!(f.call(args, CallOptions::default()).unwrap().is_empty());
        }
        for i in 0..37 {
            assert_eq!(c[i], a[i] + b[i], "element {i} (expanded: {expanded})");
        }
    }
}

#[test]
fn add_through_typed_expanded_pointer() {
    let lib = library("elementwise.mlir");
    type P = *mut f32;
    // SAFETY: the type is `add`'s in the expanded convention (three memrefs, five words each).
    #[allow(clippy::type_complexity)]
    let add: unsafe extern "C" fn(
        P,
        P,
        i64,
        i64,
        i64,
        P,
        P,
        i64,
        i64,
        i64,
        P,
        P,
        i64,
        i64,
        i64,
    ) = unsafe { lib.typed("add") }.unwrap();
    // Each memref is `allocated, aligned, offset, size, stride`.
    let mut a = vals(8, |i| i as f32 + 1.0);
    let mut b = vals(8, |i| 10.0 * i as f32);
    let mut c = vec![0f32; 8];
    let (pa, pb, pc) = (a.as_mut_ptr(), b.as_mut_ptr(), c.as_mut_ptr());
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { add(pa, pa, 0, 8, 1, pb, pb, 0, 8, 1, pc, pc, 0, 8, 1) };
    for i in 0..8 {
        assert_eq!(c[i], a[i] + b[i]);
    }
}

#[test]
fn axpi_f64_in_place_both_conventions() {
    let f = function("elementwise.mlir", "axpi");
    for expanded in [false, true] {
        let orig: Vec<f64> = (0..20).map(|i| 1.5 * i as f64).collect();
        let mut a = orig.clone();
        let mut va = MemRefViewMut::contiguous(&mut a, [20]).unwrap();
        let mut args = [
            MemRefArg::from_view_mut(&mut va).into(),
            Scalar::F64(-2.0).into(),
        ];
        if expanded {
            f.call_expanded(&mut args, false).unwrap();
        } else {
            f.call(args, CallOptions::default()).unwrap();
        }
        for i in 0..20 {
            assert_eq!(a[i], orig[i] * -2.0 + i as f64, "element {i}");
        }
    }
}

#[test]
fn mul_i32_linalg_generic_typed() {
    let lib = library("elementwise.mlir");
    // SAFETY: the type is `_mlir_ciface_mul_i32`'s, as MLIR lowers the kernel's signature.
    let mul: unsafe extern "C" fn(*mut D<i32, 1>, *mut D<i32, 1>, *mut D<i32, 1>) =
        unsafe { lib.ciface("mul_i32") }.unwrap();
    let a: Vec<i32> = (0..50).map(|i| i - 25).collect();
    let b: Vec<i32> = (0..50).map(|i| 3 * i + 1).collect();
    let mut c = vec![0i32; 50];
    let mut da = MemRefView::contiguous(&a, [50]).unwrap().to_descriptor();
    let mut db = MemRefView::contiguous(&b, [50]).unwrap().to_descriptor();
    let mut dc = MemRefViewMut::contiguous(&mut c, [50])
        .unwrap()
        .to_descriptor();
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { mul(&mut da, &mut db, &mut dc) };
    for i in 0..50 {
        assert_eq!(c[i], a[i] * b[i]);
    }
}

#[test]
fn scalar_result_typed_and_dynamic() {
    let lib = library("elementwise.mlir");
    // SAFETY: the type is `_mlir_ciface_affine`'s, as MLIR lowers the kernel's signature.
    let affine: unsafe extern "C" fn(f32, i32) -> f32 = unsafe { lib.ciface("affine") }.unwrap();
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    assert_eq!(unsafe { affine(1.25, -7) }, 1.25 * 2.0 - 7.0);
    let f = function("elementwise.mlir", "affine");
    let out = f
        .call(
            [Scalar::F32(3.5).into(), Scalar::I32(4).into()],
            CallOptions::default(),
        )
        .unwrap();
    assert!(matches!(out.as_slice(), [Value::Scalar(Scalar::F32(v))] if *v == 11.0));
}

#[test]
fn every_scalar_kind_dynamic_and_typed() {
    let f = function("elementwise.mlir", "mix");
    for (b, want_r) in [(true, -5 + 300 + 7_000_000_000 + 11), (false, -1)] {
        let args = [
            Scalar::I1(b).into(),
            Scalar::I8(-5).into(),
            Scalar::I16(300).into(),
            Scalar::I64(7_000_000_000).into(),
            Scalar::Index(11).into(),
            Scalar::F64(1.25).into(),
        ];
        let res = f.call(args, CallOptions::default()).unwrap();
        match res.as_slice() {
            [Value::Scalar(Scalar::I64(r)), Value::Scalar(Scalar::I1(nb)), Value::Scalar(Scalar::F64(d))] =>
            {
                assert_eq!((*r, *nb, *d), (want_r, !b, 2.5));
            }
            other => panic!("results {other:?}"),
        }
    }
    #[repr(C)]
    struct Mix {
        r: i64,
        nb: bool,
        d: f64,
    }
    let lib = library("elementwise.mlir");
    // SAFETY: the type is `_mlir_ciface_mix`'s, as MLIR lowers the kernel's signature.
    let mix: unsafe extern "C" fn(*mut Mix, bool, i8, i16, i64, i64, f64) =
        unsafe { lib.ciface("mix") }.unwrap();
    let mut m = Mix {
        r: 0,
        nb: true,
        d: 0.0,
    };
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { mix(&mut m, true, 1, 2, 3, 4, -0.5) };
    assert_eq!((m.r, m.nb, m.d), (10, false, -1.0));
    let g = function("elementwise.mlir", "neg16");
    let res = g
        .call([Scalar::I16(1234).into()], CallOptions::default())
        .unwrap();
    assert!(
        matches!(res.as_slice(), [Value::Scalar(Scalar::I16(-1234))]),
        "{res:?}"
    );
}

// ---------------------------------------------------------------- 2-D strided

/// Row sums computed in Rust from a view.
fn row_sums_of(v: &MemRefView<'_, f32, 2>) -> Vec<f32> {
    (0..v.sizes()[0])
        .map(|i| (0..v.sizes()[1]).map(|j| *v.get(&[i, j]).unwrap()).sum())
        .collect()
}

#[test]
fn strided_kernel_with_transposed_subviewed_and_reversed_views() {
    let lib = library("strided.mlir");
    // SAFETY: the type is `_mlir_ciface_row_sums`'s, as MLIR lowers the kernel's signature.
    let typed: unsafe extern "C" fn(*mut D<f32, 2>, *mut D<f32, 1>) =
        unsafe { lib.ciface("row_sums") }.unwrap();
    let f = function("strided.mlir", "row_sums");
    let data = vals(6 * 7, |i| (i as f32) * 0.25 + 1.0);
    let base = MemRefView::contiguous(&data, [6, 7]).unwrap();
    let views = [
        ("identity", base),
        ("transposed", base.transpose(0, 1).unwrap()),
        ("subview", base.subview([1, 2], [4, 3], [1, 2]).unwrap()),
        (
            "subview of transpose",
            base.transpose(0, 1)
                .unwrap()
                .subview([2, 1], [3, 4], [2, 1])
                .unwrap(),
        ),
        (
            "reversed rows",
            MemRefView::new(&data, 35, [6, 7], [-7, 1]).unwrap(),
        ),
        (
            "broadcast row",
            MemRefView::new(&data, 7, [5, 7], [0, 1]).unwrap(),
        ),
    ];
    let sig = common::signature("strided.mlir", "row_sums");
    let Type::MemRef(param) = &sig.inputs[0] else {
        panic!("memref parameter")
    };
    for (name, v) in views {
        // A typed caller checks its view against the parsed type itself.
        param.check_view(&v).unwrap();
        let want = row_sums_of(&v);
        let rows = v.sizes()[0] as usize;
        // Typed C wrapper.
        let mut out = vec![0f32; rows];
        let mut dm = v.to_descriptor();
        let mut dout = MemRefViewMut::contiguous(&mut out, [rows as i64])
            .unwrap()
            .to_descriptor();
        // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
        // passed describes live memory of the shape the kernel expects.
        unsafe { typed(&mut dm, &mut dout) };
        assert_eq!(out, want, "{name} (typed ciface)");
        // Dynamic, both conventions.
        for expanded in [false, true] {
            let mut out = vec![0f32; rows];
            let mut vo = MemRefViewMut::contiguous(&mut out, [rows as i64]).unwrap();
            let mut args = in_out(&v, &mut vo);
            if expanded {
                f.call_expanded(&mut args, false).unwrap();
            } else {
                f.call(args, CallOptions::default()).unwrap();
            }
            assert_eq!(out, want, "{name} (expanded: {expanded})");
        }
    }
}

#[test]
fn strided_kernel_writes_through_transposed_mutable_view() {
    let f = function("strided.mlir", "mark");
    let mut data: Vec<f64> = (0..12).map(|i| i as f64).collect();
    let orig = data.clone();
    // 4x3 row-major buffer, passed as its 3x4 transpose.
    let mut v = MemRefViewMut::contiguous(&mut data, [4, 3])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    f.call(
        [MemRefArg::from_view_mut(&mut v).into()],
        CallOptions::default(),
    )
    .unwrap();
    for i in 0..3 {
        for j in 0..4 {
            // Logical (i, j) of the transpose is buffer element j * 3 + i.
            let lin = j * 3 + i;
            assert_eq!(
                data[lin],
                orig[lin] * 10.0 + (i * 100 + j) as f64,
                "({i}, {j})"
            );
        }
    }
}

#[test]
fn identity_layout_callee_refuses_strided_views_or_copies_them() {
    let f = function("strided.mlir", "row_sums_dense");
    let data = vals(4 * 5, |i| i as f32);
    let base = MemRefView::contiguous(&data, [4, 5]).unwrap();
    let t = base.transpose(0, 1).unwrap();
    let want = row_sums_of(&t);
    let mut out = vec![0f32; 5];
    let mut vo = MemRefViewMut::contiguous(&mut out, [5]).unwrap();
    let err = f
        .call(in_out(&t, &mut vo), CallOptions::default())
        .unwrap_err();
    assert_argument_error(&err, 0, "not row-major");
    let err = f
        .call_expanded(&mut in_out(&t, &mut vo), false)
        .unwrap_err();
    assert_argument_error(&err, 0, "");
    // Offset alone is refused too: the callee assumes offset 0.
    let sub = base.subview([1, 0], [3, 5], [1, 1]).unwrap();
    let mut out2 = vec![0f32; 3];
    let mut vo2 = MemRefViewMut::contiguous(&mut out2, [3]).unwrap();
    let err = f
        .call(in_out(&sub, &mut vo2), CallOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("offset 5"), "{err}");
    // Asked to copy: correct results through both conventions.
    let copy = CallOptions::default().copy_strided(true);
    f.call(in_out(&t, &mut vo), copy).unwrap();
    assert_eq!(out, want);
    let mut out = vec![0f32; 5];
    let mut vo = MemRefViewMut::contiguous(&mut out, [5]).unwrap();
    let mut args = in_out(&t, &mut vo);
    f.call_expanded(&mut args, true).unwrap();
    drop(args);
    assert_eq!(out, want);
    f.call(in_out(&sub, &mut vo2), copy).unwrap();
    assert_eq!(out2, row_sums_of(&sub));
}

#[test]
fn kernel_with_its_own_subview() {
    let lib = library("strided.mlir");
    // SAFETY: the type is `_mlir_ciface_center`'s, as MLIR lowers the kernel's signature.
    let center: unsafe extern "C" fn(*mut D<f32, 2>, *mut D<f32, 2>) -> f32 =
        unsafe { lib.ciface("center") }.unwrap();
    let m = vals(16, |i| (i * 3) as f32);
    let sig = common::signature("strided.mlir", "center");
    let Type::MemRef(param) = &sig.inputs[0] else {
        panic!("memref parameter")
    };
    let transposed = MemRefView::contiguous(&m, [4, 4])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    assert!(
        param.check_view(&transposed).is_err(),
        "typed check refuses a transpose for memref<4x4xf32>"
    );
    let mut out = [0f32; 4];
    let mut dm = MemRefView::contiguous(&m, [4, 4]).unwrap().to_descriptor();
    let mut dout = MemRefViewMut::contiguous(&mut out, [2, 2])
        .unwrap()
        .to_descriptor();
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    let total = unsafe { center(&mut dm, &mut dout) };
    let block = [m[5], m[6], m[9], m[10]];
    assert_eq!(total, block.iter().sum::<f32>());
    for k in 0..4 {
        assert_eq!(out[k], block[k] * 2.0, "element {k}");
    }
    // Dynamic: static sizes are checked.
    let f = function("strided.mlir", "center");
    let mut out = [0f32; 4];
    let mut vo = MemRefViewMut::contiguous(&mut out, [2, 2]).unwrap();
    let wrong = MemRefView::contiguous(&m, [2, 8]).unwrap();
    let err = f
        .call(in_out(&wrong, &mut vo), CallOptions::default())
        .unwrap_err();
    assert_argument_error(&err, 0, "size 2 in dimension 0, the signature wants 4");
    let good = MemRefView::contiguous(&m, [4, 4]).unwrap();
    let res = f
        .call(in_out(&good, &mut vo), CallOptions::default())
        .unwrap();
    assert!(matches!(res.as_slice(), [Value::Scalar(Scalar::F32(v))] if *v == total));
    assert_eq!(
        out,
        [
            block[0] * 2.0,
            block[1] * 2.0,
            block[2] * 2.0,
            block[3] * 2.0
        ]
    );
}

// ---------------------------------------------------------------- results and ownership

#[test]
fn fresh_alloc_owned_result_typed() {
    let lib = library("results.mlir");
    // SAFETY: the type is `_mlir_ciface_iota`'s, as MLIR lowers the kernel's signature.
    let iota: unsafe extern "C" fn(*mut D<f32, 1>, i64, f32) =
        unsafe { lib.ciface("iota") }.unwrap();
    let mut d = D::<f32, 1>::null();
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { iota(&mut d, 9, 0.5) };
    // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
    // global), of this element type, that nobody else frees or writes.
    let owned = unsafe { OwnedMemRef::from_descriptor(d, Ownership::Owned, libc_free()) };
    assert_eq!(owned.descriptor().sizes, [9]);
    assert_eq!(owned.to_vec().unwrap(), vals(9, |i| i as f32 * 0.5));
}

#[test]
fn aligned_alloc_frees_the_allocated_pointer() {
    let lib = library("results.mlir");
    // SAFETY: the type is `_mlir_ciface_iota_aligned`'s, as MLIR lowers the kernel's signature.
    let iota: unsafe extern "C" fn(*mut D<f64, 1>, i64) =
        unsafe { lib.ciface("iota_aligned") }.unwrap();
    let mut seen_unequal = false;
    for n in [1, 7, 33, 100] {
        let mut d = D::<f64, 1>::new(std::ptr::null_mut(), std::ptr::null_mut(), 0, [0], [0]);
        // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
        // passed describes live memory of the shape the kernel expects.
        unsafe { iota(&mut d, n) };
        assert_eq!(
            d.aligned as usize % 64,
            0,
            "aligned pointer is 64-byte aligned"
        );
        assert!(
            d.aligned as usize >= d.allocated as usize
                && (d.aligned as usize) < d.allocated as usize + 64
        );
        seen_unequal |= d.aligned != d.allocated;
        // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
        // global), of this element type, that nobody else frees or writes.
        let owned = unsafe { OwnedMemRef::from_descriptor(d, Ownership::Owned, libc_free()) };
        let v = owned.view().unwrap();
        for i in 0..n {
            assert_eq!(*v.get(&[i]).unwrap(), i as f64);
        }
        // Dropping frees `allocated`; freeing `aligned` would abort in glibc.
    }
    // malloc returns 16-byte aligned blocks, so some of these must differ.
    assert!(
        seen_unequal,
        "allocated == aligned for every size; the test did not exercise the case"
    );
    // Dynamic call of the same, owned.
    let f = function("results.mlir", "iota_aligned");
    let res = f
        .call([Scalar::Index(5).into()], CallOptions::default())
        .unwrap();
    let Value::MemRef(m) = &res[0] else {
        panic!("memref result")
    };
    assert_eq!(m.aligned() as usize % 64, 0);
    assert_eq!(
        m.view::<f64, 1>()
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [0.0, 1.0, 2.0, 3.0, 4.0]
    );
}

#[test]
fn rank0_arguments_and_result() {
    let lib = library("results.mlir");
    // SAFETY: the type is `_mlir_ciface_rank0`'s, as MLIR lowers the kernel's signature.
    let rank0: unsafe extern "C" fn(*mut D<f32, 0>, *mut D<f32, 0>, *mut D<f32, 0>) =
        unsafe { lib.ciface("rank0") }.unwrap();
    let x = [4.5f32];
    let mut out = [0f32];
    let mut dx = MemRefView::contiguous(&x, []).unwrap().to_descriptor();
    let mut dout = MemRefViewMut::contiguous(&mut out, [])
        .unwrap()
        .to_descriptor();
    let mut r = D::<f32, 0>::new(std::ptr::null_mut(), std::ptr::null_mut(), 0, [], []);
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { rank0(&mut r, &mut dx, &mut dout) };
    assert_eq!(out[0], 13.5);
    // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
    // global), of this element type, that nobody else frees or writes.
    let owned = unsafe { OwnedMemRef::from_descriptor(r, Ownership::Owned, libc_free()) };
    assert_eq!(owned.view().unwrap().get(&[]), Some(&5.5));
    // Dynamic.
    let f = function("results.mlir", "rank0");
    let x = [-1.0f32];
    let mut out = [0f32];
    let vx = MemRefView::contiguous(&x, []).unwrap();
    let mut vo = MemRefViewMut::contiguous(&mut out, []).unwrap();
    let res = f
        .call(in_out(&vx, &mut vo), CallOptions::default())
        .unwrap();
    let Value::MemRef(m) = &res[0] else {
        panic!("memref result")
    };
    assert_eq!(m.rank(), 0);
    assert_eq!(m.origin(), Origin::Fresh);
    assert_eq!(m.view::<f32, 0>().unwrap().get(&[]), Some(&0.0));
    // The results borrow the arguments: `out` is read once they are gone.
    drop(res);
    assert_eq!(out[0], -3.0);
}

#[test]
fn unranked_argument_all_conventions() {
    let lib = library("results.mlir");
    // SAFETY: the type is `_mlir_ciface_fill_unranked`'s, as MLIR lowers the kernel's signature.
    let fill: unsafe extern "C" fn(*mut UnrankedMemRefDescriptor, f32) =
        unsafe { lib.ciface("fill_unranked") }.unwrap();
    let mut data = vec![0f32; 10];
    let mut view = MemRefViewMut::contiguous(&mut data, [10]).unwrap();
    let mut d = view.to_descriptor();
    let mut u = d.as_unranked();
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { fill(&mut u, 2.5) };
    assert!(data.iter().all(|&x| x == 2.5));
    let f = function("results.mlir", "fill_unranked");
    for (expanded, value) in [(false, 7.0f32), (true, -1.0)] {
        let mut data = vec![0f32; 6];
        let mut view = MemRefViewMut::contiguous(&mut data, [6]).unwrap();
        let mut args = [
            MemRefArg::from_view_mut(&mut view).into(),
            Scalar::F32(value).into(),
        ];
        if expanded {
            f.call_expanded(&mut args, false).unwrap();
        } else {
            f.call(args, CallOptions::default()).unwrap();
        }
        assert_eq!(data, vec![value; 6], "expanded: {expanded}");
    }
}

#[test]
fn unranked_result_typed_and_dynamic() {
    let lib = library("results.mlir");
    // SAFETY: the type is `_mlir_ciface_grid_unranked`'s, as MLIR lowers the kernel's signature.
    let grid: unsafe extern "C" fn(*mut UnrankedMemRefDescriptor, i64) =
        unsafe { lib.ciface("grid_unranked") }.unwrap();
    let mut u = UnrankedMemRefDescriptor::null();
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { grid(&mut u, 4) };
    assert_eq!(u.rank, 2);
    // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
    // global), of this element type, that nobody else frees or writes.
    let owned = unsafe { OwnedUnranked::from_descriptor(u, Ownership::Owned, libc_free()) };
    // SAFETY: the kernel fills an `i32` buffer.
    let ranked = unsafe { owned.into_ranked::<i32, 2>() }.unwrap();
    let v = ranked.view().unwrap();
    assert_eq!(v.sizes(), &[2, 4]);
    for i in 0..2 {
        for j in 0..4 {
            assert_eq!(*v.get(&[i, j]).unwrap(), (10 * i + j) as i32);
        }
    }
    // Wrong rank asked: refused, and the drop still frees both blocks.
    let mut u = UnrankedMemRefDescriptor {
        rank: -1,
        descriptor: std::ptr::null_mut(),
    };
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { grid(&mut u, 2) };
    // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
    // global), of this element type, that nobody else frees or writes.
    let owned = unsafe { OwnedUnranked::from_descriptor(u, Ownership::Owned, libc_free()) };
    assert_eq!(owned.rank(), 2);
    // SAFETY: the kernel fills an `i32` buffer.
    let err = unsafe { owned.into_ranked::<i32, 1>() }.unwrap_err();
    assert_eq!(
        err,
        Error::RankMismatch {
            expected: 1,
            found: 2
        }
    );
    let f = function("results.mlir", "grid_unranked");
    let res = f
        .call([Scalar::Index(3).into()], CallOptions::default())
        .unwrap();
    let Value::MemRef(m) = &res[0] else {
        panic!("memref result")
    };
    assert!(m.was_unranked());
    assert_eq!(m.sizes(), &[2, 3]);
    assert_eq!(
        m.view::<i32, 2>()
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [0, 1, 2, 10, 11, 12]
    );
}

#[test]
fn several_results_memref_and_f32() {
    #[repr(C)]
    struct PrefixResult {
        sums: D<f32, 1>,
        total: f32,
    }
    let lib = library("results.mlir");
    // SAFETY: the type is `_mlir_ciface_prefix`'s, as MLIR lowers the kernel's signature.
    let prefix: unsafe extern "C" fn(*mut PrefixResult, *mut D<f32, 1>) =
        unsafe { lib.ciface("prefix") }.unwrap();
    let a = vals(12, |i| i as f32 + 0.5);
    let mut da = MemRefView::contiguous(&a, [12]).unwrap().to_descriptor();
    let mut r = PrefixResult {
        sums: D::new(std::ptr::null_mut(), std::ptr::null_mut(), 0, [0], [0]),
        total: f32::NAN,
    };
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { prefix(&mut r, &mut da) };
    // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
    // global), of this element type, that nobody else frees or writes.
    let sums = unsafe { OwnedMemRef::from_descriptor(r.sums, Ownership::Owned, libc_free()) };
    let mut acc = 0f32;
    let want: Vec<f32> = a
        .iter()
        .map(|x| {
            acc += x;
            acc
        })
        .collect();
    assert_eq!(sums.to_vec().unwrap(), want);
    assert_eq!(r.total, acc);
    // Dynamic.
    let f = function("results.mlir", "prefix");
    let va = MemRefView::contiguous(&a, [12]).unwrap();
    let res = f
        .call([MemRefArg::from_view(&va).into()], CallOptions::default())
        .unwrap();
    match res.as_slice() {
        [Value::MemRef(m), Value::Scalar(Scalar::F32(t))] => {
            assert_eq!(*t, acc);
            assert_eq!(
                m.view::<f32, 1>()
                    .unwrap()
                    .iter()
                    .copied()
                    .collect::<Vec<_>>(),
                want
            );
        }
        other => panic!("results {other:?}"),
    }
}

/// A result aliasing its argument is found to, and never freed: with the
/// default options (which today free the caller's `Vec`) and when results
/// are borrowed.
#[test]
fn result_aliasing_an_argument_is_not_freed() {
    let f = function("results.mlir", "same");
    let mut data = vals(5, |i| i as f32);
    let start = data.as_ptr() as usize;
    for opts in [
        CallOptions::default(),
        CallOptions::default().borrow_results(true),
    ] {
        let mut v = MemRefViewMut::contiguous(&mut data, [5]).unwrap();
        let res = f
            .call([MemRefArg::from_view_mut(&mut v).into()], opts)
            .unwrap();
        let Value::MemRef(m) = &res[0] else {
            panic!("memref result")
        };
        assert_eq!(m.origin(), Origin::Argument(0));
        assert!(m.owner().is_none());
        assert_eq!(m.aligned() as usize, start);
        assert_eq!(m.view::<f32, 1>().unwrap().get(&[4]), Some(&4.0));
        drop(res);
        // Still ours and intact (an owned drop would have freed a Vec's buffer).
        assert_eq!(data, vals(5, |i| i as f32));
    }
}

#[test]
fn global_result_is_never_freed() {
    let lib = library("results.mlir");
    // SAFETY: the type is `_mlir_ciface_table`'s, as MLIR lowers the kernel's signature.
    let table: unsafe extern "C" fn(*mut D<f32, 1>) = unsafe { lib.ciface("table") }.unwrap();
    let mut d = D::<f32, 1>::null();
    // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
    // passed describes live memory of the shape the kernel expects.
    unsafe { table(&mut d) };
    assert_eq!(d.allocated as usize, locus_memref::owned::GLOBAL_ALLOCATED);
    // Owned, yet dropping it must not free the dummy pointer (free would crash).
    // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
    // global), of this element type, that nobody else frees or writes.
    let owned = unsafe { OwnedMemRef::from_descriptor(d, Ownership::Owned, libc_free()) };
    assert_eq!(owned.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.5]);
    drop(owned);
    let f = function("results.mlir", "table");
    let res = f.call([], CallOptions::default()).unwrap();
    let Value::MemRef(m) = &res[0] else {
        panic!("memref result")
    };
    assert_eq!(m.origin(), Origin::Global);
    assert!(m.owner().is_none());
    assert_eq!(
        m.view::<f32, 1>()
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [1.0, 2.0, 3.0, 4.5]
    );
}

#[test]
fn expanded_convention_refuses_results() {
    let f = function("results.mlir", "iota");
    let err = f
        .call_expanded(
            &mut [Scalar::Index(3).into(), Scalar::F32(1.0).into()],
            false,
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("do not follow the platform C ABI"),
        "{err}"
    );
}

#[test]
fn wrong_arguments_are_refused_with_their_position() {
    let f = function("elementwise.mlir", "add");
    let a = vals(4, |i| i as f32);
    let d: Vec<f64> = vec![0.0; 4];
    let va = MemRefView::contiguous(&a, [4]).unwrap();
    let vd = MemRefView::contiguous(&d, [4]).unwrap();
    let v2 = MemRefView::contiguous(&a, [2, 2]).unwrap();
    let cases: Vec<(Vec<Arg<'_>>, usize, &str)> = vec![
        (
            vec![MemRefArg::from_view(&va).into()],
            1,
            "1 argument(s) given",
        ),
        (
            vec![
                MemRefArg::from_view(&va).into(),
                MemRefArg::from_view(&vd).into(),
                MemRefArg::from_view(&va).into(),
            ],
            1,
            "element type f64, the signature wants f32",
        ),
        (
            vec![
                MemRefArg::from_view(&va).into(),
                MemRefArg::from_view(&va).into(),
                MemRefArg::from_view(&v2).into(),
            ],
            2,
            "rank 2, the signature wants rank 1",
        ),
        (
            vec![
                Scalar::F32(1.0).into(),
                MemRefArg::from_view(&va).into(),
                MemRefArg::from_view(&va).into(),
            ],
            0,
            "scalar f32 given",
        ),
    ];
    for (args, index, text) in cases {
        match f.call(args, CallOptions::default()) {
            Err(Error::Argument { index: i, message }) => {
                assert_eq!(i, index, "{message}");
                assert!(message.contains(text), "{message}");
            }
            other => panic!("expected an argument error, got {other:?}"),
        }
    }
    let g = function("elementwise.mlir", "affine");
    let err = g
        .call(
            [Scalar::F64(1.0).into(), Scalar::I32(1).into()],
            CallOptions::default(),
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("argument 0: scalar of type f64, the signature wants f32"),
        "{err}"
    );
    // A missing symbol.
    let lib = library("elementwise.mlir");
    let sig = locus_memref::Signature::parse("()").unwrap();
    // SAFETY: there is no `nope`: the lookup fails before any call.
    let err = unsafe { lib.function("nope", sig) }.unwrap_err();
    assert!(err.to_string().contains("_mlir_ciface_nope"), "{err}");
    // SAFETY: there is no `_mlir_ciface_nope`: the lookup fails before any call.
    let err = unsafe { lib.ciface::<unsafe extern "C" fn()>("nope") }.unwrap_err();
    assert!(err.to_string().contains("_mlir_ciface_nope"), "{err}");
}

/// Raw byte buffers (what `locus memref call` passes from .npy files) are
/// checked for size, sign and alignment before any call.
#[test]
fn byte_buffers_are_checked() {
    let mut words = [0u64; 4];
    // SAFETY: 32 bytes of the array, viewed as bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), 32) };
    let e = MemRefArg::from_bytes(ElemType::F32, &mut bytes[..], &[3, 2]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "buffer: 32 bytes do not hold sizes [3, 2] of f32"
    );
    let e = MemRefArg::from_bytes(ElemType::F32, &mut bytes[..], &[2, -4]).unwrap_err();
    assert_eq!(e, Error::NegativeSize { dim: 1, size: -4 });
    let e = MemRefArg::from_bytes(ElemType::I8, &mut bytes[..], &[i64::MAX, i64::MAX]);
    assert!(e.unwrap_err().to_string().contains("do not hold"));
    let e = MemRefArg::from_bytes(ElemType::F64, &mut bytes[4..28], &[3]).unwrap_err();
    assert!(e.to_string().contains("is not aligned for f64"), "{e}");
    let ok = MemRefArg::from_bytes(ElemType::F64, &mut bytes[..], &[2, 2]).unwrap();
    assert_eq!(ok.sizes(), &[2, 2]);
}

// ---------------------------------------------------------------- leaks

/// Bytes in use by the C allocator (glibc's `mallinfo2`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn malloc_in_use() -> usize {
    // SAFETY: no preconditions.
    unsafe { libc::mallinfo2() }.uordblks
}

/// Counts the C heap around many owned results; run in a process of its own
/// by `owned_results_do_not_leak` so no other test allocates meanwhile.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
#[ignore = "run alone by owned_results_do_not_leak"]
fn heap_count_child() {
    let lib = library("results.mlir");
    let f = function("results.mlir", "iota_aligned");
    let g = function("results.mlir", "grid_unranked");
    // SAFETY: the type is `_mlir_ciface_iota`'s, as MLIR lowers the kernel's signature.
    let iota: unsafe extern "C" fn(*mut D<f32, 1>, i64, f32) =
        unsafe { lib.ciface("iota") }.unwrap();
    let round = || {
        for _ in 0..200 {
            let res = f
                .call([Scalar::Index(1000).into()], CallOptions::default())
                .unwrap();
            drop(res);
            let res = g
                .call([Scalar::Index(500).into()], CallOptions::default())
                .unwrap();
            drop(res);
            let mut d = D::<f32, 1>::new(std::ptr::null_mut(), std::ptr::null_mut(), 0, [0], [0]);
            // SAFETY: the function pointer has the kernel's type; every descriptor and pointer
            // passed describes live memory of the shape the kernel expects.
            unsafe { iota(&mut d, 1000, 1.0) };
            // SAFETY: the kernel returned this descriptor: memory it allocated with `malloc` (or a
            // global), of this element type, that nobody else frees or writes.
            drop(unsafe { OwnedMemRef::from_descriptor(d, Ownership::Owned, libc_free()) });
        }
    };
    round();
    // One leaking round would grow the heap by about 200 * 16 KB.
    let before = malloc_in_use();
    round();
    let after = malloc_in_use();
    let grew = after.saturating_sub(before);
    assert!(
        grew < 200 * 1000,
        "C heap grew by {grew} bytes over 600 owned results"
    );
    // The same with borrowed results does leak: the check can fail.
    let mut kept = Vec::new();
    let before = malloc_in_use();
    for _ in 0..200 {
        let opts = CallOptions::default().borrow_results(true);
        let res = f.call([Scalar::Index(1000).into()], opts).unwrap();
        let Value::MemRef(m) = &res[0] else {
            panic!("memref")
        };
        kept.push(m.allocated());
    }
    let grew = malloc_in_use().saturating_sub(before);
    assert!(
        grew >= 200 * 8000,
        "borrowed results should stay allocated; heap grew {grew}"
    );
    for p in kept {
        // Free by hand so the test itself does not leak.
        // SAFETY: `p` came from `malloc` (the kernel's result) and is freed only here.
        unsafe { libc::free(p.cast::<c_void>()) };
    }
}

/// The C allocator's count of bytes in use does not grow over 600 owned
/// results and grows by their size over 200 borrowed ones.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn owned_results_do_not_leak() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "kernels::heap_count_child",
            "--ignored",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// Owned results of every kind, dropped: run under valgrind by
/// `no_leak_under_valgrind` (ignored when run directly).
#[test]
#[ignore = "run under valgrind by no_leak_under_valgrind"]
fn valgrind_child_owned() {
    let f = function("results.mlir", "prefix");
    let g = function("results.mlir", "grid_unranked");
    let h = function("results.mlir", "iota_aligned");
    let a = vals(10, |i| i as f32);
    let va = MemRefView::contiguous(&a, [10]).unwrap();
    for _ in 0..5 {
        drop(
            f.call([MemRefArg::from_view(&va).into()], CallOptions::default())
                .unwrap(),
        );
        drop(
            g.call([Scalar::Index(4).into()], CallOptions::default())
                .unwrap(),
        );
        drop(
            h.call([Scalar::Index(9).into()], CallOptions::default())
                .unwrap(),
        );
    }
}

/// The same results taken as borrowed and never freed: valgrind must see leaks.
#[test]
#[ignore = "run under valgrind by no_leak_under_valgrind"]
fn valgrind_child_borrowed() {
    let g = function("results.mlir", "grid_unranked");
    let opts = CallOptions::default().borrow_results(true);
    for _ in 0..5 {
        drop(g.call([Scalar::Index(4).into()], opts).unwrap());
    }
}

/// Runs the two children above under valgrind's leak checker.
#[test]
fn no_leak_under_valgrind() {
    let exe = std::env::current_exe().unwrap();
    let run = |child: &str| {
        let out = std::process::Command::new("valgrind")
            .args([
                "--leak-check=full",
                "--errors-for-leak-kinds=definite",
                "--error-exitcode=99",
                "-q",
            ])
            .arg(&exe)
            .args(["--exact", child, "--ignored", "--test-threads=1"])
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run valgrind ({e}); scripts/install-deps installs it")
            });
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, err, stdout) = run("kernels::valgrind_child_owned");
    assert_eq!(code, Some(0), "owned results leaked or misbehaved:\n{err}");
    // A clean exit means nothing if the child did not run.
    assert!(
        stdout.contains("1 passed"),
        "the child did not run:\n{stdout}"
    );
    let (code, err, _) = run("kernels::valgrind_child_borrowed");
    assert_eq!(
        code,
        Some(99),
        "valgrind did not see the borrowed results' leak:\n{err}"
    );
    assert!(err.contains("definitely lost"), "{err}");
}

/// A kernel calling a function no library defines: opening it fails and the
/// error names the symbol (issue 14, section 2). It used to open (lazy
/// binding) and the dynamic loader ended the process at the first call.
#[test]
fn unresolved_symbol_is_an_error_at_open() {
    let src = "func.func private @no_such_function(f32) -> f32\n\
               func.func @calls(%x: f32) -> f32 {\n\
               \x20 %r = func.call @no_such_function(%x) : (f32) -> f32\n\
               \x20 return %r : f32\n\
               }\n";
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("memref-{}-unresolved.so", std::process::id()));
    locus_memref::compile::compile_str(src, &out).unwrap();
    // SAFETY: a library just built from the kernel above (if it opened).
    let opened = unsafe { locus_memref::Library::open(&out) };
    let _ = std::fs::remove_file(&out);
    match opened {
        Err(Error::Library { what, message }) => {
            assert!(what.ends_with("unresolved.so"), "{what}");
            assert!(
                message.contains("undefined symbol") && message.contains("no_such_function"),
                "{message}"
            );
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("a library with an unresolved symbol opened"),
    }
}

/// The caller names the tools (`compile::Tools`): each of the five runs as named, here a
/// wrapper that logs its name and runs LLVM 19's own, and a kernel built that way is called;
/// a tool that does not exist is named in the error, by the compile and by
/// `Signature::from_mlir_with`.
#[test]
fn caller_named_tools_are_the_ones_that_run() {
    use locus_memref::compile::{self, Options, Tools};
    use std::os::unix::fs::PermissionsExt;

    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("memref-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("log");
    let wrap = |real: &str| {
        let path = dir.join(format!("my-{real}"));
        let script = format!(
            "#!/bin/sh\necho {real} >> '{}'\nexec /usr/lib/llvm-19/bin/{real} \"$@\"\n",
            log.display()
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    };
    let tools = Tools {
        mlir_opt: wrap("mlir-opt"),
        mlir_translate: wrap("mlir-translate"),
        opt: wrap("opt"),
        llc: wrap("llc"),
        clang: wrap("clang"),
    };
    let source = common::source("one_array.mlir");
    let options = Options {
        tools: tools.clone(),
        ..Options::default()
    };
    let out = dir.join("one_array.so");
    compile::compile_with(&source, &out, &options).unwrap();
    let ran = std::fs::read_to_string(&log).unwrap();
    for tool in ["mlir-opt", "mlir-translate", "opt", "llc", "clang"] {
        assert!(ran.lines().any(|l| l == tool), "{tool} did not run: {ran}");
    }
    let signature = locus_memref::Signature::from_mlir_with(&source, "scale_into", &tools).unwrap();
    // SAFETY: a library just built from the fixture.
    let lib = unsafe { locus_memref::Library::open(&out) }.unwrap();
    // SAFETY: the signature is the kernel's own, as mlir-opt parsed it.
    let f = unsafe { lib.function("scale_into", signature) }.unwrap();
    let src = [1.0f32, 2.0, 3.0];
    let mut dst = [0.0f32; 3];
    {
        let input = MemRefView::contiguous(&src, [3]).unwrap();
        let mut output = MemRefViewMut::contiguous(&mut dst, [3]).unwrap();
        let [out_arg, in_arg] = in_out(&input, &mut output);
        f.call(vec![in_arg, out_arg], CallOptions::default())
            .unwrap();
    }
    assert_eq!(dst, [3.0, 5.0, 7.0]);

    let missing = Tools {
        mlir_opt: dir.join("no-such-mlir-opt").display().to_string(),
        ..Tools::default()
    };
    let options = Options {
        tools: missing.clone(),
        ..Options::default()
    };
    match compile::compile_with(&source, &dir.join("never.so"), &options) {
        Err(Error::Tool { tool, .. }) => assert_eq!(tool, missing.mlir_opt),
        other => panic!("expected a tool error, got {other:?}"),
    }
    match locus_memref::Signature::from_mlir_with(&source, "scale_into", &missing) {
        Err(Error::Tool { tool, .. }) => assert_eq!(tool, missing.mlir_opt),
        other => panic!("expected a tool error, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
