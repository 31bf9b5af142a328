//! View tests: linearization, strides, rank 0, transpose, subview, errors, iteration.

use locus_memref::{Error, MemRefDescriptor, MemRefView, MemRefViewMut};
use proptest::prelude::*;

/// Naive reference: all indices of the box in row-major order.
fn all_indices(sizes: &[i64]) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for &s in sizes {
        let mut next = Vec::new();
        for prefix in &out {
            for i in 0..s {
                let mut p = prefix.clone();
                p.push(i);
                next.push(p);
            }
        }
        out = next;
    }
    out
}

fn naive_linear(offset: i64, strides: &[i64], index: &[i64]) -> i64 {
    offset + index.iter().zip(strides).map(|(i, s)| i * s).sum::<i64>()
}

#[test]
fn rank0() {
    let data = [10, 20, 30];
    let v = MemRefView::<i32, 0>::new(&data, 2, [], []).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(v.get(&[]), Some(&30));
    assert_eq!(v.iter().copied().collect::<Vec<_>>(), [30]);
    let d = v.to_descriptor();
    assert_eq!(d.offset, 2);
    assert_eq!(d.aligned.cast_const(), data.as_ptr());
    assert_eq!(d.to_expanded().len(), 3);
    assert_eq!(
        MemRefView::<i32, 0>::new(&data, 3, [], []).unwrap_err(),
        Error::OffsetOutOfBounds { offset: 3, len: 3 }
    );
    assert!(MemRefView::<i32, 0>::new(&[], 0, [], []).is_err());
}

#[test]
fn negative_strides_reverse() {
    let data: Vec<i32> = (0..12).collect();
    // 3x4 matrix with rows reversed and columns reversed.
    let v = MemRefView::from_vec(&data, 11, [3, 4], [-4, -1]).unwrap();
    assert_eq!(v.get(&[0, 0]), Some(&11));
    assert_eq!(v.get(&[2, 3]), Some(&0));
    assert_eq!(v.get(&[1, 2]), Some(&5));
    let all: Vec<i32> = v.iter().copied().collect();
    assert_eq!(all, (0..12).rev().collect::<Vec<_>>());
}

#[test]
fn zero_strides_broadcast() {
    let data = [1.5f64, 2.5];
    // Row vector [1.5, 2.5] broadcast to 3 rows.
    let v = MemRefView::new(&data, 0, [3, 2], [0, 1]).unwrap();
    assert_eq!(
        v.iter().copied().collect::<Vec<_>>(),
        [1.5, 2.5, 1.5, 2.5, 1.5, 2.5]
    );
    // A scalar broadcast to a huge box on a one-element buffer is valid.
    let one = [7u8];
    let b = MemRefView::new(&one, 0, [1 << 20, 1 << 20], [0, 0]).unwrap();
    assert_eq!(b.get(&[(1 << 20) - 1, 5]), Some(&7));
    assert_eq!(b.len(), 1 << 40);
}

#[test]
fn out_of_bounds_rejected_naming_dimension() {
    let data = [0u8; 10];
    let e = MemRefView::new(&data, 0, [2, 5], [5, 2]).unwrap_err();
    assert_eq!(
        e,
        Error::OutOfBounds {
            dim: 1,
            size: 5,
            stride: 2,
            reached: 13,
            len: 10
        }
    );
    assert!(e.to_string().contains("dimension 1"), "{e}");
    let e = MemRefView::new(&data, 1, [2, 2], [1, -2]).unwrap_err();
    assert_eq!(
        e,
        Error::OutOfBounds {
            dim: 1,
            size: 2,
            stride: -2,
            reached: -1,
            len: 10
        }
    );
    assert_eq!(
        MemRefView::new(&data, 0, [2, -1], [1, 1]).unwrap_err(),
        Error::NegativeSize { dim: 1, size: -1 }
    );
    assert_eq!(
        MemRefView::new(&data, 0, [2, 2], [i64::MAX, 1]).unwrap_err(),
        Error::OutOfBounds {
            dim: 0,
            size: 2,
            stride: i64::MAX,
            reached: i64::MAX,
            len: 10
        }
    );
    assert_eq!(
        MemRefView::new(&data, 0, [3, 2], [i64::MAX, 1]).unwrap_err(),
        Error::Overflow { dim: 0 }
    );
    assert!(MemRefView::<u8, 1>::contiguous(&data, [11]).is_err());
    assert!(MemRefView::<u8, 1>::contiguous(&data, [10]).is_ok());
    // Empty views reach nothing and are accepted whatever the offset.
    let e = MemRefView::new(&data, 100, [0, 4], [1, 1]).unwrap();
    assert!(e.is_empty());
    let huge = MemRefView::new(&data, 0, [i64::MAX, i64::MAX, 0], [0, 0, 1]).unwrap();
    assert!(huge.is_empty());
    assert_eq!(
        MemRefView::new(&data, 0, [i64::MAX, i64::MAX, 1], [0, 0, 1]).unwrap_err(),
        Error::Overflow { dim: 1 }
    );
    assert_eq!(e.iter().count(), 0);
    assert_eq!(e.get(&[0, 0]), None);
}

#[test]
fn checked_get_rejects_bad_indices() {
    let data: Vec<i32> = (0..6).collect();
    let v = MemRefView::contiguous(&data, [2, 3]).unwrap();
    assert_eq!(v.get(&[1, 2]), Some(&5));
    assert_eq!(v.get(&[2, 0]), None);
    assert_eq!(v.get(&[0, 3]), None);
    assert_eq!(v.get(&[-1, 0]), None);
    // SAFETY: index inside the box.
    assert_eq!(unsafe { *v.get_unchecked(&[1, 1]) }, 4);
}

#[test]
fn transpose_by_hand() {
    let data: Vec<i32> = (0..24).collect();
    let v = MemRefView::contiguous(&data, [2, 3, 4]).unwrap(); // strides 12, 4, 1
    let t = v.transpose(0, 2).unwrap(); // sizes 4,3,2 strides 1,4,12
    assert_eq!(t.sizes(), &[4, 3, 2]);
    assert_eq!(t.strides(), &[1, 4, 12]);
    assert_eq!(t.get(&[3, 1, 1]), Some(&(3 + 4 + 12)));
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                assert_eq!(t.get(&[k, j, i]), v.get(&[i, j, k]));
            }
        }
    }
    assert_eq!(
        v.transpose(0, 3).unwrap_err(),
        Error::BadTranspose {
            a: 0,
            b: 3,
            rank: 3
        }
    );
}

#[test]
fn subview_by_hand() {
    // 4x5 matrix, element (i, j) = 10 i + j.
    let data: Vec<i32> = (0..4)
        .flat_map(|i| (0..5).map(move |j| 10 * i + j))
        .collect();
    let v = MemRefView::contiguous(&data, [4, 5]).unwrap();
    // Rows 1..=3, columns 0, 2, 4.
    let s = v.subview([1, 0], [3, 3], [1, 2]).unwrap();
    assert_eq!(s.offset(), 5);
    assert_eq!(s.strides(), &[5, 2]);
    let got: Vec<i32> = s.iter().copied().collect();
    assert_eq!(got, [10, 12, 14, 20, 22, 24, 30, 32, 34]);
    // Subview of a transposed view: rows 3, 2 (negative stride) of the transpose.
    let t = v.transpose(0, 1).unwrap(); // 5x4, (j, i)
    let s2 = t.subview([3, 2], [2, 2], [-1, 1]).unwrap();
    assert_eq!(s2.get(&[0, 0]), Some(&23));
    assert_eq!(s2.get(&[0, 1]), Some(&33));
    assert_eq!(s2.get(&[1, 0]), Some(&22));
    assert_eq!(s2.get(&[1, 1]), Some(&32));
    // Out of the parent's range.
    assert_eq!(
        v.subview([1, 0], [3, 3], [1, 3]).unwrap_err(),
        Error::SubviewOutOfRange {
            dim: 1,
            offset: 0,
            size: 3,
            stride: 3,
            parent_size: 5
        }
    );
    assert!(v.subview([4, 0], [1, 1], [1, 1]).is_err());
    // The descriptor carries the subview's layout over the whole slice.
    let d = s.to_descriptor();
    assert_eq!((d.offset, d.sizes, d.strides), (5, [3, 3], [5, 2]));
    assert_eq!(d.allocated.cast_const(), data.as_ptr());
}

#[test]
fn iteration_order_row_major() {
    let data: Vec<i32> = (0..6).collect();
    let v = MemRefView::new(&data, 0, [3, 2], [1, 3]).unwrap(); // column-major 3x2
    assert_eq!(
        v.indices().collect::<Vec<_>>(),
        [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]]
    );
    assert_eq!(v.iter().copied().collect::<Vec<_>>(), [0, 3, 1, 4, 2, 5]);
    assert_eq!(v.iter().len(), 6);
    assert!(!v.is_row_major());
    assert!(MemRefView::contiguous(&data, [3, 2])
        .unwrap()
        .is_row_major());
}

#[test]
fn mutable_view() {
    let mut data = vec![0i32; 6];
    {
        let mut m = MemRefViewMut::from_vec(&mut data, 0, [2, 3], [3, 1]).unwrap();
        m.for_each_mut(|ix, x| *x = (10 * ix[0] + ix[1]) as i32);
        *m.get_mut(&[1, 1]).unwrap() = -1;
        assert!(m.get_mut(&[2, 0]).is_none());
        let mut t = m.transpose(0, 1).unwrap();
        // SAFETY: index inside the box.
        unsafe { *t.get_unchecked_mut(&[2, 0]) = 99 };
        assert_eq!(t.as_view().get(&[2, 0]), Some(&99));
        let d = t.to_descriptor();
        assert_eq!(d.strides, [1, 3]);
    }
    assert_eq!(data, [0, 1, 99, 10, -1, 12]);
}

#[test]
fn expanded_roundtrip_and_errors() {
    let mut data = [0f32; 8];
    let p = data.as_mut_ptr();
    let d = MemRefDescriptor::<f32, 3>::new(p, p.wrapping_add(1), 1, [2, 2, 1], [4, 2, 1]);
    let flat = d.to_expanded();
    assert_eq!(flat.len(), 9);
    assert_eq!(MemRefDescriptor::<f32, 3>::from_expanded(&flat).unwrap(), d);
    assert_eq!(
        MemRefDescriptor::<f32, 2>::from_expanded(&flat).unwrap_err(),
        Error::ExpandedArity {
            expected: 7,
            found: 9
        }
    );
    let mut bad = flat.clone();
    bad.swap(1, 2);
    assert!(matches!(
        MemRefDescriptor::<f32, 3>::from_expanded(&bad),
        Err(Error::ExpandedKind { position: 1, .. })
    ));
}

#[test]
fn unranked_roundtrip() {
    let data = [1u16, 2, 3];
    let v = MemRefView::contiguous(&data, [3]).unwrap();
    let mut d = v.to_descriptor();
    let u = d.as_unranked();
    assert_eq!(u.rank, 1);
    // SAFETY: `u` points at `d`, alive and of element type u16.
    let back = unsafe { u.read_ranked::<u16, 1>() }.unwrap();
    assert_eq!(back, d);
    // SAFETY: the rank check fails before any read.
    let wrong = unsafe { u.read_ranked::<u16, 2>() };
    assert_eq!(
        wrong.unwrap_err(),
        Error::RankMismatch {
            expected: 2,
            found: 1
        }
    );
}

/// Strides of both signs whose extents fit `i64` one by one but not
/// together: the reachable span overflows and must be an error, not a panic.
#[test]
fn descriptor_span_overflow_is_an_error() {
    let mut x = 0u8;
    let d = MemRefDescriptor::<u8, 2>::new(&mut x, &mut x, 0, [2, 2], [i64::MAX, i64::MIN + 1]);
    // SAFETY: the span check fails before any memory is touched.
    let e = unsafe { locus_memref::owned::view_from_descriptor(&d) }.unwrap_err();
    assert_eq!(e, Error::Overflow { dim: 0 });
}

proptest! {
    #[test]
    fn linearization_matches_naive(
        sizes in proptest::collection::vec(0i64..5, 3),
        strides in proptest::collection::vec(-7i64..8, 3),
        offset in 0i64..200,
        len in 0usize..200,
    ) {
        let data: Vec<usize> = (0..len).collect();
        let sizes3 = [sizes[0], sizes[1], sizes[2]];
        let strides3 = [strides[0], strides[1], strides[2]];
        let idx = all_indices(&sizes);
        let lin: Vec<i64> = idx.iter().map(|i| naive_linear(offset, &strides, i)).collect();
        let all_in = lin.iter().all(|&l| l >= 0 && (l as usize) < len);
        match MemRefView::new(&data, offset, sizes3, strides3) {
            Ok(v) => {
                prop_assert!(all_in, "accepted a view reaching outside the slice");
                prop_assert_eq!(v.len(), idx.len());
                let via_iter: Vec<usize> = v.iter().copied().collect();
                let expected: Vec<usize> = lin.iter().map(|&l| l as usize).collect();
                prop_assert_eq!(&via_iter, &expected);
                // `fold` (row-at-a-time, slices for unit strides) agrees with
                // `next`, also after a partial walk.
                let via_fold = v.iter().fold(Vec::new(), |mut acc, &x| {
                    acc.push(x);
                    acc
                });
                prop_assert_eq!(&via_fold, &expected);
                for skip in [1usize, 2, 5] {
                    let mut it = v.iter();
                    for _ in 0..skip {
                        it.next();
                    }
                    let rest = it.fold(Vec::new(), |mut acc, &x| {
                        acc.push(x);
                        acc
                    });
                    prop_assert_eq!(&rest[..], &expected[skip.min(expected.len())..]);
                }
                prop_assert_eq!(v.as_contiguous().is_some(), v.is_row_major());
                if let Some(c) = v.as_contiguous() {
                    prop_assert_eq!(c, &expected[..]);
                }
                for (i, &l) in idx.iter().zip(&lin) {
                    let a = [i[0], i[1], i[2]];
                    let l = l as usize;
                    prop_assert_eq!(v.get(&a), Some(&l));
                    prop_assert_eq!(v.linear_index(&a), Some(l));
                    // SAFETY: `a` is inside the box.
                    prop_assert_eq!(unsafe { *v.get_unchecked(&a) }, l);
                }
                prop_assert_eq!(v.indices().map(|a| a.to_vec()).collect::<Vec<_>>(), idx);
            }
            Err(e) => {
                prop_assert!(!all_in, "rejected a valid view: {}", e);
            }
        }
    }

    #[test]
    fn transpose_and_subview_match_reference(
        sizes in proptest::collection::vec(1i64..5, 2),
        a in 0usize..2, b in 0usize..2,
        off in proptest::collection::vec(0i64..4, 2),
        sub in proptest::collection::vec(1i64..4, 2),
        st in proptest::collection::vec(-2i64..3, 2),
    ) {
        let n = (sizes[0] * sizes[1]) as usize;
        let data: Vec<usize> = (0..n).collect();
        let v = MemRefView::contiguous(&data, [sizes[0], sizes[1]]).unwrap();
        let t = v.transpose(a, b).unwrap();
        for i in 0..sizes[0] {
            for j in 0..sizes[1] {
                let mut ix = [i, j];
                ix.swap(a, b);
                prop_assert_eq!(t.get(&ix), v.get(&[i, j]));
            }
        }
        let fits = (0..2).all(|d| {
            let last = off[d] + st[d] * (sub[d] - 1);
            off[d] < sizes[d] && last >= 0 && last < sizes[d]
        });
        match v.subview([off[0], off[1]], [sub[0], sub[1]], [st[0], st[1]]) {
            Ok(s) => {
                prop_assert!(fits);
                for i in 0..sub[0] {
                    for j in 0..sub[1] {
                        let parent = [off[0] + i * st[0], off[1] + j * st[1]];
                        prop_assert_eq!(s.get(&[i, j]), v.get(&parent));
                    }
                }
            }
            Err(_) => prop_assert!(!fits),
        }
    }
}
