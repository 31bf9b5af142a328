//! Views from and to `ndarray` (feature `ndarray`), checked element by element
//! against ndarray's own indexing.

#![cfg(feature = "ndarray")]
#![allow(clippy::unwrap_used)]

use locus_memref::ndarray::{view_mut_of, view_of};
use locus_memref::{Error, MemRefView, MemRefViewMut};
use ndarray::{s, Array2, Array3, Axis, ShapeBuilder};

#[test]
fn from_ndarray_in_every_memory_order() {
    let c = Array2::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f32);
    let f = Array2::from_shape_fn((3, 4).f(), |(i, j)| (10 * i + j) as f32);
    let t = c.clone().reversed_axes();
    let mut inv = c.clone();
    inv.invert_axis(Axis(1));
    for (name, a) in [("C", &c), ("Fortran", &f), ("inverted", &inv)] {
        let v = view_of(a).unwrap();
        for ((i, j), x) in a.indexed_iter() {
            assert_eq!(v.get(&[i as i64, j as i64]), Some(x), "{name} ({i}, {j})");
        }
        assert_eq!(
            v.iter().collect::<Vec<_>>(),
            a.iter().collect::<Vec<_>>(),
            "{name}"
        );
    }
    let v = view_of(&t).unwrap();
    assert_eq!(v.sizes(), &[4, 3]);
    assert_eq!(v.get(&[3, 2]), Some(&23.0));
    // Gaps are refused.
    let stepped = c.slice(s![.., ..;2]);
    assert_eq!(view_of(&stepped).unwrap_err(), Error::NotContiguous);
}

#[test]
fn to_ndarray_keeps_strides() {
    let data: Vec<f64> = (0..24).map(f64::from).collect();
    let v = MemRefView::new(&data, 23, [2, 3, 4], [-12, -4, -1]).unwrap();
    let a = v.to_ndarray();
    assert_eq!(a.shape(), &[2, 3, 4]);
    for ((i, j, k), x) in a.indexed_iter() {
        assert_eq!(Some(x), v.get(&[i as i64, j as i64, k as i64]));
    }
    let bcast = MemRefView::new(&data, 4, [3, 4], [0, 1]).unwrap();
    assert_eq!(bcast.to_ndarray().row(2).to_vec(), vec![4.0, 5.0, 6.0, 7.0]);
}

#[test]
fn mutable_round_trip() {
    let mut a = Array3::<i32>::zeros((2, 3, 4).f());
    {
        let mut v = view_mut_of(&mut a).unwrap();
        v.for_each_mut(|idx, x| *x = (100 * idx[0] + 10 * idx[1] + idx[2]) as i32);
    }
    for ((i, j, k), x) in a.indexed_iter() {
        assert_eq!(*x, (100 * i + 10 * j + k) as i32);
    }
    let mut data = vec![0u8; 12];
    let mut v = MemRefViewMut::contiguous(&mut data, [3, 4])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    v.to_ndarray_mut().unwrap().fill(7);
    assert!(data.iter().all(|&x| x == 7));
    let mut data = vec![0u8; 12];
    let mut b = MemRefViewMut::new(&mut data, 0, [3, 4], [0, 1]).unwrap();
    assert_eq!(
        b.to_ndarray_mut().unwrap_err(),
        Error::AliasedStrides { dim: 0, stride: 0 },
        "zero stride"
    );
    let mut data = vec![0u8; 12];
    let mut o = MemRefViewMut::new(&mut data, 0, [3, 3], [1, 1]).unwrap();
    assert_eq!(
        o.to_ndarray_mut().unwrap_err(),
        Error::AliasedStrides { dim: 1, stride: 1 },
        "overlapping strides"
    );
}
