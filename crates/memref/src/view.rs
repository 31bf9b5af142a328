//! Safe strided views over slices and `Vec`s.
//!
//! A view is a slice plus an `offset`, `sizes` and `strides` (in elements).
//! Element `(i_0, .., i_{N-1})` is `slice[offset + sum(i_k * strides[k])]`,
//! the linearization of spec 002 ("Index Linearization"). Strides may be
//! negative or zero. Constructors check once that every reachable element
//! lies inside the slice, so checked indexing only compares indices with
//! sizes and [`MemRefView::get_unchecked`] needs no bounds check at all.

use std::marker::PhantomData;

use crate::{Error, MemRefDescriptor};

/// Offset, sizes and strides of a view, validated against a buffer length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout<const N: usize> {
    offset: i64,
    sizes: [i64; N],
    strides: [i64; N],
}

impl<const N: usize> Layout<N> {
    /// A descriptor for data starting at `p` (allocated == aligned == `p`) with this
    /// layout's offset, sizes and strides.
    fn descriptor<T>(&self, p: *mut T) -> MemRefDescriptor<T, N> {
        MemRefDescriptor::new(p, p, self.offset, self.sizes, self.strides)
    }

    /// Checks that sizes are non-negative, the element count fits in `i64`,
    /// and (if the view is non-empty) the lowest and highest reachable linear
    /// index lie in `0..len`. Returns the element count.
    fn validate(&self, len: usize) -> Result<usize, Error> {
        if let Some(d) = self.sizes.iter().position(|&s| s < 0) {
            return Err(Error::NegativeSize {
                dim: d,
                size: self.sizes[d],
            });
        }
        if self.sizes.contains(&0) {
            return Ok(0);
        }
        let mut count: i64 = 1;
        for (d, &size) in self.sizes.iter().enumerate() {
            count = count.checked_mul(size).ok_or(Error::Overflow { dim: d })?;
        }
        let ilen = i64::try_from(len).unwrap_or(i64::MAX);
        if self.offset < 0 || self.offset >= ilen {
            return Err(Error::OffsetOutOfBounds {
                offset: self.offset,
                len,
            });
        }
        let (mut lo, mut hi) = (self.offset, self.offset);
        for d in 0..N {
            let (size, stride) = (self.sizes[d], self.strides[d]);
            let extent = stride
                .checked_mul(size - 1)
                .ok_or(Error::Overflow { dim: d })?;
            let reached = if extent < 0 {
                lo = lo.checked_add(extent).ok_or(Error::Overflow { dim: d })?;
                lo
            } else {
                hi = hi.checked_add(extent).ok_or(Error::Overflow { dim: d })?;
                hi
            };
            if lo < 0 || hi >= ilen {
                return Err(Error::OutOfBounds {
                    dim: d,
                    size,
                    stride,
                    reached,
                    len,
                });
            }
        }
        usize::try_from(count).map_err(|_| Error::Overflow {
            dim: N.saturating_sub(1),
        })
    }

    /// Linear index of `index`, or `None` if some `index[d]` is outside `0..sizes[d]`.
    #[inline]
    fn linearize(&self, index: &[i64; N]) -> Option<usize> {
        let mut lin = self.offset;
        for ((&i, &size), &stride) in index.iter().zip(&self.sizes).zip(&self.strides) {
            if i < 0 || i >= size {
                return None;
            }
            // Cannot overflow: validation bounded every reachable linear index.
            lin += i * stride;
        }
        Some(lin as usize)
    }

    /// Linear index without checking `index` against the sizes.
    #[inline]
    fn linearize_unchecked(&self, index: &[i64; N]) -> usize {
        let mut lin = self.offset;
        for (&i, &stride) in index.iter().zip(&self.strides) {
            lin = lin.wrapping_add(i.wrapping_mul(stride));
        }
        lin as usize
    }

    fn transpose(mut self, a: usize, b: usize) -> Result<Self, Error> {
        if a >= N || b >= N {
            return Err(Error::BadTranspose { a, b, rank: N });
        }
        self.sizes.swap(a, b);
        self.strides.swap(a, b);
        Ok(self)
    }

    fn subview(
        &self,
        offsets: [i64; N],
        sizes: [i64; N],
        strides: [i64; N],
    ) -> Result<Self, Error> {
        let mut out = Layout {
            offset: self.offset,
            sizes,
            strides: [0; N],
        };
        let empty = sizes.contains(&0);
        for d in 0..N {
            let err = Error::SubviewOutOfRange {
                dim: d,
                offset: offsets[d],
                size: sizes[d],
                stride: strides[d],
                parent_size: self.sizes[d],
            };
            if sizes[d] < 0 {
                return Err(Error::NegativeSize {
                    dim: d,
                    size: sizes[d],
                });
            }
            if !empty {
                let last = strides[d]
                    .checked_mul(sizes[d] - 1)
                    .and_then(|e| e.checked_add(offsets[d]))
                    .ok_or(Error::Overflow { dim: d })?;
                let in_parent = |i: i64| i >= 0 && i < self.sizes[d];
                if !in_parent(offsets[d]) || !in_parent(last) {
                    return Err(err);
                }
            } else if offsets[d] < 0 || offsets[d] > self.sizes[d] {
                return Err(err);
            }
            out.strides[d] = self.strides[d]
                .checked_mul(strides[d])
                .ok_or(Error::Overflow { dim: d })?;
            out.offset = offsets[d]
                .checked_mul(self.strides[d])
                .and_then(|o| o.checked_add(out.offset))
                .ok_or(Error::Overflow { dim: d })?;
        }
        Ok(out)
    }
}

/// Row-major strides for `sizes`, or an overflow error.
fn row_major<const N: usize>(sizes: &[i64; N]) -> Result<[i64; N], Error> {
    MemRefDescriptor::<(), N>::row_major_strides(sizes).ok_or(Error::Overflow { dim: 0 })
}

/// A read-only strided view of rank `N` over a slice.
#[derive(Debug)]
pub struct MemRefView<'a, T, const N: usize> {
    data: &'a [T],
    layout: Layout<N>,
    count: usize,
}

impl<T, const N: usize> Clone for MemRefView<'_, T, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, const N: usize> Copy for MemRefView<'_, T, N> {}

/// A mutable strided view of rank `N` over a slice.
///
/// Zero strides make several indices alias one element; mutation therefore
/// goes through `get_mut` (one `&mut` at a time) or [`MemRefViewMut::for_each_mut`],
/// never through an iterator of `&mut`.
#[derive(Debug)]
pub struct MemRefViewMut<'a, T, const N: usize> {
    data: &'a mut [T],
    layout: Layout<N>,
    count: usize,
}

macro_rules! common_methods {
    () => {
        /// The rank `N`.
        pub const fn rank(&self) -> usize {
            N
        }

        /// Offset of element `(0, .., 0)` in the slice.
        pub fn offset(&self) -> i64 {
            self.layout.offset
        }

        /// Sizes of the dimensions.
        pub fn sizes(&self) -> &[i64; N] {
            &self.layout.sizes
        }

        /// Strides of the dimensions, in elements.
        pub fn strides(&self) -> &[i64; N] {
            &self.layout.strides
        }

        /// Number of logical elements (product of the sizes; 1 for rank 0).
        pub fn len(&self) -> usize {
            self.count
        }

        /// Whether some size is zero.
        pub fn is_empty(&self) -> bool {
            self.count == 0
        }

        /// The linear index `offset + sum(index_i * stride_i)` into the slice,
        /// or `None` if an index is outside its dimension.
        pub fn linear_index(&self, index: &[i64; N]) -> Option<usize> {
            self.layout.linearize(index)
        }

        /// Checked access.
        pub fn get(&self, index: &[i64; N]) -> Option<&T> {
            let lin = self.layout.linearize(index)?;
            // Validation guarantees `lin < data.len()`; `get` keeps this safe anyway.
            self.data.get(lin)
        }

        /// Access without checking `index` against the sizes.
        ///
        /// # Safety
        ///
        /// `0 <= index[d] < sizes()[d]` must hold for every dimension `d`.
        #[inline]
        pub unsafe fn get_unchecked(&self, index: &[i64; N]) -> &T {
            let lin = self.layout.linearize_unchecked(index);
            // SAFETY: the constructor checked that every index inside the box
            // linearizes into `0..data.len()`, and the caller keeps `index` in the box.
            unsafe { self.data.get_unchecked(lin) }
        }

        /// Iterates the elements in row-major logical order (last index fastest).
        pub fn iter(&self) -> Iter<'_, T, N> {
            Iter::new(&self.data[..], self.layout, self.count)
        }

        /// Iterates the logical indices in row-major order.
        pub fn indices(&self) -> Indices<N> {
            Indices::new(self.layout.sizes, self.count)
        }

        /// Swaps dimensions `a` and `b` (sizes and strides); no data moves.
        pub fn transpose(self, a: usize, b: usize) -> Result<Self, Error> {
            let layout = self.layout.transpose(a, b)?;
            Ok(Self { layout, ..self })
        }

        /// The subview `offsets[d] + k * strides[d]` for `k in 0..sizes[d]` in each
        /// dimension (the semantics of `memref.subview`); strides are in units of
        /// this view's index. Only offset, sizes and strides change.
        pub fn subview(
            self,
            offsets: [i64; N],
            sizes: [i64; N],
            strides: [i64; N],
        ) -> Result<Self, Error> {
            let layout = self.layout.subview(offsets, sizes, strides)?;
            let count = layout.validate(self.data.len())?;
            Ok(Self {
                data: self.data,
                layout,
                count,
            })
        }
    };
}

impl<'a, T, const N: usize> MemRefView<'a, T, N> {
    /// A view of `data` with the given offset, sizes and strides. Fails with
    /// an error naming the dimension if a size is negative, arithmetic
    /// overflows, or some reachable element is outside `data`.
    pub fn new(
        data: &'a [T],
        offset: i64,
        sizes: [i64; N],
        strides: [i64; N],
    ) -> Result<Self, Error> {
        let layout = Layout {
            offset,
            sizes,
            strides,
        };
        let count = layout.validate(data.len())?;
        Ok(MemRefView {
            data,
            layout,
            count,
        })
    }

    /// A row-major (identity layout) view of `data` starting at element 0.
    pub fn contiguous(data: &'a [T], sizes: [i64; N]) -> Result<Self, Error> {
        let strides = row_major(&sizes)?;
        Self::new(data, 0, sizes, strides)
    }

    /// A view over a `Vec`'s elements (same as [`MemRefView::new`] on its slice).
    pub fn from_vec(
        data: &'a Vec<T>,
        offset: i64,
        sizes: [i64; N],
        strides: [i64; N],
    ) -> Result<Self, Error> {
        Self::new(data.as_slice(), offset, sizes, strides)
    }

    common_methods!();

    /// The whole underlying slice.
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// Checked access with the view's lifetime.
    pub fn get_ref(&self, index: &[i64; N]) -> Option<&'a T> {
        let lin = self.layout.linearize(index)?;
        self.data.get(lin)
    }

    /// The elements as one slice in row-major order when the view is
    /// row-major contiguous (the fast path for hot loops: no index arithmetic
    /// at all), or `None`.
    pub fn as_contiguous(&self) -> Option<&'a [T]> {
        if !self.is_row_major() {
            return None;
        }
        if self.count == 0 {
            return Some(&[]);
        }
        let start = usize::try_from(self.layout.offset).ok()?;
        // Validation put every element, so `start..start + count`, in the slice.
        self.data.get(start..start.checked_add(self.count)?)
    }

    /// Whether the layout is row-major contiguous (identity layout, offset
    /// ignored): what a callee with an identity-layout type assumes.
    pub fn is_row_major(&self) -> bool {
        row_major(&self.layout.sizes).is_ok_and(|s| {
            (0..N).all(|d| self.layout.sizes[d] <= 1 || s[d] == self.layout.strides[d])
        })
    }

    /// A descriptor for passing this view to compiled code:
    /// `allocated == aligned ==` the slice start, plus the view's offset,
    /// sizes and strides. The pointer is `*mut` because the C type is, but the
    /// callee must not write through a descriptor made from a shared view.
    pub fn to_descriptor(&self) -> MemRefDescriptor<T, N> {
        let p = self.data.as_ptr().cast_mut();
        self.layout.descriptor(p)
    }
}

impl<'a, T, const N: usize> MemRefViewMut<'a, T, N> {
    /// A mutable view; same checks as [`MemRefView::new`].
    pub fn new(
        data: &'a mut [T],
        offset: i64,
        sizes: [i64; N],
        strides: [i64; N],
    ) -> Result<Self, Error> {
        let layout = Layout {
            offset,
            sizes,
            strides,
        };
        let count = layout.validate(data.len())?;
        Ok(MemRefViewMut {
            data,
            layout,
            count,
        })
    }

    /// A row-major (identity layout) mutable view starting at element 0.
    pub fn contiguous(data: &'a mut [T], sizes: [i64; N]) -> Result<Self, Error> {
        let strides = row_major(&sizes)?;
        Self::new(data, 0, sizes, strides)
    }

    /// A mutable view over a `Vec`'s elements.
    pub fn from_vec(
        data: &'a mut Vec<T>,
        offset: i64,
        sizes: [i64; N],
        strides: [i64; N],
    ) -> Result<Self, Error> {
        Self::new(data.as_mut_slice(), offset, sizes, strides)
    }

    common_methods!();

    /// A shared view of the same elements.
    pub fn as_view(&self) -> MemRefView<'_, T, N> {
        MemRefView {
            data: &self.data[..],
            layout: self.layout,
            count: self.count,
        }
    }

    /// The elements as one mutable slice in row-major order when the view is
    /// row-major contiguous, or `None`.
    pub fn as_contiguous_mut(&mut self) -> Option<&mut [T]> {
        let contiguous = self.as_view().is_row_major();
        if !contiguous {
            return None;
        }
        if self.count == 0 {
            return Some(&mut []);
        }
        let start = usize::try_from(self.layout.offset).ok()?;
        let end = start.checked_add(self.count)?;
        self.data.get_mut(start..end)
    }

    /// Checked mutable access.
    pub fn get_mut(&mut self, index: &[i64; N]) -> Option<&mut T> {
        let lin = self.layout.linearize(index)?;
        self.data.get_mut(lin)
    }

    /// Mutable access without checking `index` against the sizes.
    ///
    /// # Safety
    ///
    /// `0 <= index[d] < sizes()[d]` must hold for every dimension `d`.
    #[inline]
    pub unsafe fn get_unchecked_mut(&mut self, index: &[i64; N]) -> &mut T {
        let lin = self.layout.linearize_unchecked(index);
        // SAFETY: as for `get_unchecked`.
        unsafe { self.data.get_unchecked_mut(lin) }
    }

    /// Calls `f(index, element)` for every logical index in row-major order.
    /// With zero strides an element is visited once per index that reaches it.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&[i64; N], &mut T)) {
        for index in Indices::new(self.layout.sizes, self.count) {
            let lin = self.layout.linearize_unchecked(&index);
            f(&index, &mut self.data[lin]);
        }
    }

    /// A descriptor for passing this view to compiled code, which may write
    /// through it while this view is borrowed: `allocated == aligned ==` the
    /// slice start, plus the view's offset, sizes and strides.
    pub fn to_descriptor(&mut self) -> MemRefDescriptor<T, N> {
        let p = self.data.as_mut_ptr();
        self.layout.descriptor(p)
    }
}

/// Row-major iterator over logical indices `[i64; N]` of a box.
#[derive(Clone, Debug)]
pub struct Indices<const N: usize> {
    sizes: [i64; N],
    next: [i64; N],
    remaining: usize,
}

impl<const N: usize> Indices<N> {
    fn new(sizes: [i64; N], count: usize) -> Self {
        Indices {
            sizes,
            next: [0; N],
            remaining: count,
        }
    }
}

impl<const N: usize> Iterator for Indices<N> {
    type Item = [i64; N];

    fn next(&mut self) -> Option<[i64; N]> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.next;
        for d in (0..N).rev() {
            if self.next[d] + 1 < self.sizes[d] {
                self.next[d] += 1;
                break;
            }
            self.next[d] = 0;
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<const N: usize> ExactSizeIterator for Indices<N> {}

/// Row-major iterator over the elements of a view.
#[derive(Debug)]
pub struct Iter<'a, T, const N: usize> {
    data: &'a [T],
    layout: Layout<N>,
    index: [i64; N],
    pos: i64,
    remaining: usize,
    _marker: PhantomData<&'a T>,
}

impl<'a, T, const N: usize> Iter<'a, T, N> {
    fn new(data: &'a [T], layout: Layout<N>, count: usize) -> Self {
        Iter {
            data,
            layout,
            index: [0; N],
            pos: layout.offset,
            remaining: count,
            _marker: PhantomData,
        }
    }
}

impl<T, const N: usize> Iter<'_, T, N> {
    /// Moves `index` and `pos` to the next element in row-major order.
    #[inline]
    fn advance(&mut self) {
        let l = &self.layout;
        for d in (0..N).rev() {
            if self.index[d] + 1 < l.sizes[d] {
                self.index[d] += 1;
                self.pos += l.strides[d];
                return;
            }
            self.pos -= l.strides[d] * (l.sizes[d] - 1);
            self.index[d] = 0;
        }
    }
}

impl<'a, T, const N: usize> Iterator for Iter<'a, T, N> {
    type Item = &'a T;

    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        // `pos` is always the linearization of `index`, which is in the box.
        let item = self.data.get(self.pos as usize);
        self.advance();
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }

    /// Row by row: a unit-stride row is folded as a plain slice (so `sum`
    /// over a contiguous view runs at slice speed), other rows by stepping.
    fn fold<B, F: FnMut(B, &'a T) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        if N == 0 {
            if self.remaining > 0 {
                if let Some(x) = self.data.get(self.pos as usize) {
                    acc = f(acc, x);
                }
            }
            return acc;
        }
        let last = N - 1;
        let (size, stride) = (self.layout.sizes[last], self.layout.strides[last]);
        while self.remaining > 0 {
            let in_row = (size - self.index[last]) as usize;
            let n = in_row.min(self.remaining);
            let start = self.pos as usize;
            if stride == 1 {
                // Validation put the whole row inside the slice.
                let Some(row) = self.data.get(start..start + n) else {
                    return acc;
                };
                acc = row.iter().fold(acc, &mut f);
            } else {
                let mut p = self.pos;
                for _ in 0..n {
                    let Some(x) = self.data.get(p as usize) else {
                        return acc;
                    };
                    acc = f(acc, x);
                    p += stride;
                }
            }
            self.remaining -= n;
            if self.remaining == 0 {
                break;
            }
            // Step to the row's last element, then carry into the outer dimensions.
            self.pos += stride * (n as i64 - 1);
            self.index[last] += n as i64 - 1;
            self.advance();
        }
        acc
    }
}

impl<T, const N: usize> ExactSizeIterator for Iter<'_, T, N> {}

impl<'a, 'b, T, const N: usize> IntoIterator for &'b MemRefView<'a, T, N> {
    type Item = &'b T;
    type IntoIter = Iter<'b, T, N>;

    fn into_iter(self) -> Iter<'b, T, N> {
        self.iter()
    }
}
