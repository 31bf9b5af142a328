//! Fuzzes numpy slice strings (`A.npy[::2, 1:].T`): `split_argument` and
//! `Slicing::parse` on any text, then `Slicing::apply` on a small row-major
//! array whose shape the first bytes choose. An error must be a parse error at
//! an offset inside the text on a character boundary (or an overflow); what
//! applies must reach exactly the elements numpy's `a[...]` takes, each inside
//! the array.

#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_memref::slice::{split_argument, DimSlice, Slicing};
use locus_memref::Error;

/// The indices numpy takes for `start:stop:step` of `range(size)`, as Python's
/// `slice.indices` computes them (in i128: no overflow whatever the bounds).
fn taken(start: Option<i64>, stop: Option<i64>, step: i64, size: i64) -> Vec<i64> {
    let (size, step) = (i128::from(size), i128::from(step));
    let bound = |v: Option<i64>, default: i128| match v {
        None => default,
        Some(v) => {
            let v = i128::from(v);
            let v = if v < 0 { v + size } else { v };
            if step > 0 {
                v.clamp(0, size)
            } else {
                v.clamp(-1, size - 1)
            }
        }
    };
    let (first, end) = if step > 0 {
        (bound(start, 0), bound(stop, size))
    } else {
        (bound(start, size - 1), bound(stop, -1))
    };
    let mut out = Vec::new();
    let mut i = first;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        out.push(i as i64);
        i += step;
    }
    out
}

/// The linear indices of every element numpy's slicing takes, row-major order of the
/// result; `None` where numpy raises (an index out of range, too many indices).
fn reference(s: &Slicing, sizes: &[i64]) -> Option<Vec<i64>> {
    if s.dims.len() > sizes.len() {
        return None;
    }
    let strides = locus_memref::signature::row_major(sizes);
    // Per source dimension: the indices taken, and whether the dimension stays.
    let mut per_dim = Vec::new();
    for (d, &size) in sizes.iter().enumerate() {
        match s.dims.get(d) {
            None => per_dim.push(((0..size).collect::<Vec<_>>(), true)),
            Some(DimSlice::Index(i)) => {
                let at = if *i < 0 {
                    i128::from(*i) + i128::from(size)
                } else {
                    i128::from(*i)
                };
                if at < 0 || at >= i128::from(size) {
                    return None;
                }
                per_dim.push((vec![at as i64], false));
            }
            Some(&DimSlice::Range { start, stop, step }) => {
                per_dim.push((taken(start, stop, step, size), true))
            }
        }
    }
    // Walk the kept dimensions in the result's order (reversed by `.T`).
    let mut kept: Vec<usize> = (0..sizes.len()).filter(|&d| per_dim[d].1).collect();
    if s.transpose {
        kept.reverse();
    }
    let base: i64 = (0..sizes.len())
        .filter(|&d| !per_dim[d].1)
        .map(|d| per_dim[d].0[0] * strides[d])
        .sum();
    let mut out = vec![base];
    for &d in &kept {
        let stride = strides[d];
        out = out
            .iter()
            .flat_map(|&b| per_dim[d].0.iter().map(move |&i| b + i * stride))
            .collect();
    }
    Some(out)
}

/// The linear indices a descriptor reaches, row-major.
fn reached(offset: i64, sizes: &[i64], strides: &[i64]) -> Vec<i64> {
    let mut out = vec![offset];
    for (&n, &s) in sizes.iter().zip(strides) {
        out = out
            .iter()
            .flat_map(|&b| (0..n).map(move |i| b + i * s))
            .collect();
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape_byte, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // Rank 0 to 3, sizes 0 to 5 from the first byte: small enough to enumerate.
    let rank = usize::from(shape_byte % 4);
    let sizes: Vec<i64> = (0..rank)
        .map(|d| i64::from((shape_byte / 4 >> d) % 6))
        .collect();
    let (path, slicing) = split_argument(text);
    assert!(text.starts_with(path));
    if let Some(s) = slicing {
        assert_eq!(format!("{path}{s}"), text);
    }
    let parsed = match Slicing::parse(text) {
        Ok(s) => s,
        Err(Error::Parse { at, .. }) => {
            assert!(at <= text.len() && text.is_char_boundary(at), "{at}");
            return;
        }
        Err(e) => panic!("not a parse error: {e}"),
    };
    let strides = locus_memref::signature::row_major(&sizes);
    let total: i64 = sizes.iter().product();
    match (
        parsed.apply(0, &sizes, &strides),
        reference(&parsed, &sizes),
    ) {
        (Ok((offset, new_sizes, new_strides)), Some(want)) => {
            let got = reached(offset, &new_sizes, &new_strides);
            assert_eq!(got, want, "{parsed:?} on {sizes:?}");
            assert!(got.iter().all(|&l| (0..total).contains(&l)), "{got:?}");
        }
        (Err(Error::Parse { .. }), None) => {}
        (got, want) => panic!("{parsed:?} on {sizes:?}: {got:?}, numpy {want:?}"),
    }
});
