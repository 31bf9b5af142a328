//! Views from and to `ndarray` arrays (feature `ndarray`).
//!
//! [`view_of`] borrows an array whose elements are contiguous in memory in
//! any order (C, Fortran, transposed, axes inverted) as a [`MemRefView`] with
//! the array's strides; arrays with gaps or broadcast axes are refused,
//! because a view's slice must cover only memory the array owns.
//! [`MemRefView::to_ndarray`] goes the other way, keeping strides (negative
//! and zero ones included).

use ndarray::{ArrayBase, ArrayView, ArrayViewMut, Data, DataMut, Dim, Dimension, ShapeBuilder};

use crate::{Error, MemRefView, MemRefViewMut};

fn layout<const N: usize>(
    shape: &[usize],
    strides: &[isize],
    first: usize,
    base: usize,
    elem_size: usize,
) -> Result<(i64, [i64; N], [i64; N]), Error> {
    let mut sizes = [0i64; N];
    let mut st = [0i64; N];
    for d in 0..N {
        sizes[d] = i64::try_from(shape[d]).map_err(|_| Error::Overflow { dim: d })?;
        st[d] = strides[d] as i64;
    }
    // `first` is never below the lowest-addressed element; zero-sized
    // elements have offset 0.
    let offset = first
        .checked_sub(base)
        .and_then(|b| b.checked_div(elem_size))
        .and_then(|o| i64::try_from(o).ok())
        .unwrap_or(0);
    Ok((offset, sizes, st))
}

/// A checked view of an array of rank `N` whose elements are contiguous in memory.
pub fn view_of<'a, T, S, const N: usize>(
    a: &'a ArrayBase<S, Dim<[usize; N]>>,
) -> Result<MemRefView<'a, T, N>, Error>
where
    S: Data<Elem = T>,
    Dim<[usize; N]>: Dimension,
{
    let slice = a.as_slice_memory_order().ok_or(Error::NotContiguous)?;
    let (offset, sizes, strides) = layout::<N>(
        a.shape(),
        a.strides(),
        a.as_ptr() as usize,
        slice.as_ptr() as usize,
        std::mem::size_of::<T>(),
    )?;
    MemRefView::new(slice, offset, sizes, strides)
}

/// A checked mutable view of an array whose elements are contiguous in memory.
pub fn view_mut_of<'a, T, S, const N: usize>(
    a: &'a mut ArrayBase<S, Dim<[usize; N]>>,
) -> Result<MemRefViewMut<'a, T, N>, Error>
where
    S: DataMut<Elem = T>,
    Dim<[usize; N]>: Dimension,
{
    let shape = a.shape().to_vec();
    let strides = a.strides().to_vec();
    let first = a.as_ptr() as usize;
    let slice = a.as_slice_memory_order_mut().ok_or(Error::NotContiguous)?;
    let (offset, sizes, strides) = layout::<N>(
        &shape,
        &strides,
        first,
        slice.as_ptr() as usize,
        std::mem::size_of::<T>(),
    )?;
    MemRefViewMut::new(slice, offset, sizes, strides)
}

/// An ndarray shape and absolute strides.
type ShapeStrides<const N: usize> = (Dim<[usize; N]>, Dim<[usize; N]>);

/// Shape, absolute strides, the offset (in elements, from the view's first
/// element) of the lowest-addressed element, and the axes to invert: ndarray
/// builds views from non-negative strides only, then inverts axes.
fn shape_and_strides<const N: usize>(
    sizes: &[i64; N],
    strides: &[i64; N],
) -> (ShapeStrides<N>, isize, Vec<usize>)
where
    Dim<[usize; N]>: Dimension,
{
    let mut sh = Dim::<[usize; N]>::zeros(N);
    let mut st = Dim::<[usize; N]>::zeros(N);
    let mut low = 0isize;
    let mut invert = Vec::new();
    let empty = sizes.contains(&0);
    for d in 0..N {
        sh[d] = sizes[d] as usize;
        st[d] = strides[d].unsigned_abs() as usize;
        if strides[d] < 0 && !empty {
            low += (strides[d] * (sizes[d] - 1)) as isize;
            invert.push(d);
        }
    }
    ((sh, st), low, invert)
}

impl<'a, T, const N: usize> MemRefView<'a, T, N>
where
    Dim<[usize; N]>: Dimension,
{
    /// The same elements as an `ndarray` view (strides kept).
    pub fn to_ndarray(&self) -> ArrayView<'a, T, Dim<[usize; N]>> {
        let ((shape, strides), low, invert) = shape_and_strides(self.sizes(), self.strides());
        let ptr = if self.is_empty() {
            self.as_slice().as_ptr()
        } else {
            // SAFETY: construction checked that the lowest reachable element,
            // `offset + low`, is inside the slice.
            unsafe {
                self.as_slice()
                    .as_ptr()
                    .offset(self.offset() as isize + low)
            }
        };
        // SAFETY: every element reachable from the lowest one with these
        // sizes and absolute strides is inside the borrowed slice.
        let mut a = unsafe { ArrayView::from_shape_ptr(shape.strides(strides), ptr) };
        for d in invert {
            a.invert_axis(ndarray::Axis(d));
        }
        a
    }
}

impl<'a, T, const N: usize> MemRefViewMut<'a, T, N>
where
    Dim<[usize; N]>: Dimension,
{
    /// The same elements as a mutable `ndarray` view. Refused when two
    /// indices could reach one element (zero or overlapping strides), which a
    /// mutable ndarray view must not allow.
    pub fn to_ndarray_mut(&mut self) -> Result<ArrayViewMut<'_, T, Dim<[usize; N]>>, Error> {
        if !self.is_empty() {
            // Sufficient for distinct elements: sorted by |stride|, each stride
            // steps over everything the smaller ones reach.
            // Validation bounds `|stride| * (size - 1)` by the slice length
            // for every dimension of size > 1, so nothing below overflows.
            let mut dims: Vec<(i64, i64, usize)> = (0..N)
                .filter(|&d| self.sizes()[d] > 1)
                .map(|d| (self.strides()[d].abs(), self.sizes()[d], d))
                .collect();
            dims.sort_unstable();
            let mut reach = 0i64;
            for &(stride, size, dim) in &dims {
                if stride <= reach {
                    return Err(Error::AliasedStrides {
                        dim,
                        stride: self.strides()[dim],
                    });
                }
                reach += stride * (size - 1);
            }
        }
        let ((shape, strides), low, invert) = shape_and_strides(self.sizes(), self.strides());
        let empty = self.is_empty();
        let offset = self.offset() as isize;
        let d = self.to_descriptor();
        let ptr = if empty {
            d.aligned
        } else {
            // SAFETY: as in `to_ndarray`.
            unsafe { d.aligned.offset(offset + low) }
        };
        // SAFETY: as for `to_ndarray`; the mutable borrow of `self` makes it
        // exclusive, and the check above makes distinct indices distinct elements.
        let mut a = unsafe { ArrayViewMut::from_shape_ptr(shape.strides(strides), ptr) };
        for d in invert {
            a.invert_axis(ndarray::Axis(d));
        }
        Ok(a)
    }
}
