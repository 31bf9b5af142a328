//! Ownership of memrefs returned by compiled code, and views of raw descriptors.
//!
//! A returned descriptor may point to a fresh allocation (the caller must free
//! it), to a global (whose `allocated` pointer is a dummy such as
//! `0xdeadbeef`), or into an argument (a result may alias one). Nothing in the
//! descriptor says which, so the caller states it per call with
//! [`Ownership`]:
//!
//! * [`Ownership::Owned`]: dropping the result frees the **allocated**
//!   pointer (never `aligned`, which `memref.alloc {alignment = N}` rounds up
//!   from it) with the allocator the kernel used. MLIR's default lowering of
//!   `memref.alloc` calls `malloc`, so the default deallocator is the C
//!   library's `free` (the process has one C library; a kernel built by
//!   [`crate::compile`] links against it). An unranked result additionally
//!   owns the heap copy of its ranked descriptor (spec 002, "Lifetime"), which
//!   is freed too.
//! * [`Ownership::Borrowed`]: nothing is freed.
//!
//! A memref from `memref.get_global` carries the dummy allocated pointer
//! `0xdeadbeef` ([`GLOBAL_ALLOCATED`]); it is never freed, even when owned.

use std::ffi::c_void;

use crate::{
    Element, MemRefDescriptor, MemRefError, MemRefView, MemRefViewMut, UnrankedMemRefDescriptor,
};

/// A deallocation function with the signature of C's `free`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void);

/// Who frees a returned memref.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// The caller frees the allocated pointer (and an unranked result's
    /// heap descriptor) when the result is dropped.
    Owned,
    /// Nothing is freed: globals, results aliasing an argument, or buffers
    /// the kernel keeps.
    Borrowed,
}

/// The dummy `allocated` pointer of a memref taken from `memref.get_global`
/// (MLIR's lowering writes `0xdeadbeef`): never freed, whatever the ownership.
pub const GLOBAL_ALLOCATED: usize = 0xdead_beef;

/// Whether `allocated` can be freed: not null and not the globals' dummy.
pub fn freeable(allocated: *const std::ffi::c_void) -> bool {
    !allocated.is_null() && allocated as usize != GLOBAL_ALLOCATED
}

/// C's `free`, the default deallocator (what `memref.alloc` pairs with).
pub fn libc_free() -> FreeFn {
    libc::free
}

/// Lowest and highest linear index reachable from `offset` with these sizes
/// and strides, or `None` for an empty memref. Errors on overflow.
pub fn reachable(
    offset: i64,
    sizes: &[i64],
    strides: &[i64],
) -> Result<Option<(i64, i64)>, MemRefError> {
    if let Some(dim) = sizes.iter().position(|&s| s < 0) {
        return Err(MemRefError::NegativeSize {
            dim,
            size: sizes[dim],
        });
    }
    if sizes.contains(&0) {
        return Ok(None);
    }
    let (mut lo, mut hi) = (offset, offset);
    for (dim, (&size, &stride)) in sizes.iter().zip(strides).enumerate() {
        let extent = stride
            .checked_mul(size - 1)
            .ok_or(MemRefError::Overflow { dim })?;
        if extent < 0 {
            lo = lo
                .checked_add(extent)
                .ok_or(MemRefError::Overflow { dim })?;
        } else {
            hi = hi
                .checked_add(extent)
                .ok_or(MemRefError::Overflow { dim })?;
        }
    }
    Ok(Some((lo, hi)))
}

/// The slice start, length and view offset covering a descriptor's reachable elements.
fn span<T, const N: usize>(
    d: &MemRefDescriptor<T, N>,
) -> Result<(*mut T, usize, i64), MemRefError> {
    match reachable(d.offset, &d.sizes, &d.strides)? {
        None => Ok((std::ptr::NonNull::<T>::dangling().as_ptr(), 0, 0)),
        Some((lo, hi)) => {
            if d.aligned.is_null() {
                return Err(MemRefError::NullDescriptor);
            }
            // `hi - lo` can exceed `i64` when strides of both signs are huge.
            let len = hi
                .checked_sub(lo)
                .and_then(|n| n.checked_add(1))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(MemRefError::Overflow { dim: 0 })?;
            // The element at linear index `lo` becomes the slice start.
            let start = d.aligned.wrapping_offset(lo as isize);
            Ok((start, len, d.offset - lo))
        }
    }
}

/// A shared view of the elements a descriptor describes.
///
/// # Safety
///
/// Every element reachable from `aligned + offset` through the sizes and
/// strides must be initialized, readable memory of type `T`, not written by
/// anyone else while the view lives (`'a`).
pub unsafe fn view_from_descriptor<'a, T, const N: usize>(
    d: &MemRefDescriptor<T, N>,
) -> Result<MemRefView<'a, T, N>, MemRefError> {
    let (start, len, offset) = span(d)?;
    // SAFETY: the caller guarantees the reachable range `start..start+len` is valid.
    let slice = unsafe { std::slice::from_raw_parts(start.cast_const(), len) };
    MemRefView::new(slice, offset, d.sizes, d.strides)
}

/// A mutable view of the elements a descriptor describes.
///
/// # Safety
///
/// As for [`view_from_descriptor`], and the memory must be writable and not
/// accessed through any other path while the view lives.
pub unsafe fn view_mut_from_descriptor<'a, T, const N: usize>(
    d: &MemRefDescriptor<T, N>,
) -> Result<MemRefViewMut<'a, T, N>, MemRefError> {
    let (start, len, offset) = span(d)?;
    // SAFETY: the caller guarantees exclusive access to the reachable range.
    let slice = unsafe { std::slice::from_raw_parts_mut(start, len) };
    MemRefViewMut::new(slice, offset, d.sizes, d.strides)
}

/// A ranked memref returned by compiled code, with its ownership.
#[derive(Debug)]
pub struct OwnedMemRef<T, const N: usize> {
    desc: MemRefDescriptor<T, N>,
    ownership: Ownership,
    free: FreeFn,
}

impl<T: Element, const N: usize> OwnedMemRef<T, N> {
    /// Takes a returned descriptor.
    ///
    /// # Safety
    ///
    /// The descriptor must describe valid memory of `T` for as long as the
    /// result lives; with [`Ownership::Owned`], `allocated` must come from the
    /// allocator `free` belongs to and nobody else may free it.
    pub unsafe fn from_descriptor(
        desc: MemRefDescriptor<T, N>,
        ownership: Ownership,
        free: FreeFn,
    ) -> Self {
        OwnedMemRef {
            desc,
            ownership,
            free,
        }
    }

    /// The descriptor.
    pub fn descriptor(&self) -> &MemRefDescriptor<T, N> {
        &self.desc
    }

    /// The ownership given when the result was taken.
    pub fn ownership(&self) -> Ownership {
        self.ownership
    }

    /// A checked view of the elements.
    pub fn view(&self) -> Result<MemRefView<'_, T, N>, MemRefError> {
        // SAFETY: `from_descriptor`'s contract: the memory is valid while `self` lives.
        unsafe { view_from_descriptor(&self.desc) }
    }

    /// A checked mutable view of the elements.
    pub fn view_mut(&mut self) -> Result<MemRefViewMut<'_, T, N>, MemRefError> {
        // SAFETY: as for `view`; `&mut self` makes the access exclusive.
        unsafe { view_mut_from_descriptor(&self.desc) }
    }

    /// The elements in row-major order.
    pub fn to_vec(&self) -> Result<Vec<T>, MemRefError> {
        Ok(self.view()?.iter().copied().collect())
    }

    /// Gives up ownership without freeing: the caller now frees `allocated`.
    pub fn into_descriptor(self) -> MemRefDescriptor<T, N> {
        let d = self.desc;
        std::mem::forget(self);
        d
    }
}

impl<T, const N: usize> Drop for OwnedMemRef<T, N> {
    fn drop(&mut self) {
        if self.ownership == Ownership::Owned && freeable(self.desc.allocated.cast_const().cast()) {
            // SAFETY: `from_descriptor`'s contract: we own `allocated`, from this allocator.
            unsafe { (self.free)(self.desc.allocated.cast()) };
        }
    }
}

/// An unranked memref returned by compiled code: `{rank, heap descriptor}`.
#[derive(Debug)]
pub struct OwnedUnranked {
    desc: UnrankedMemRefDescriptor,
    ownership: Ownership,
    free: FreeFn,
}

impl OwnedUnranked {
    /// Takes a returned unranked descriptor.
    ///
    /// # Safety
    ///
    /// `desc.descriptor` must point to a ranked descriptor of rank
    /// `desc.rank`; with [`Ownership::Owned`] both it and its `allocated`
    /// pointer come from the allocator of `free` and belong to the caller.
    pub unsafe fn from_descriptor(
        desc: UnrankedMemRefDescriptor,
        ownership: Ownership,
        free: FreeFn,
    ) -> Self {
        OwnedUnranked {
            desc,
            ownership,
            free,
        }
    }

    /// The rank.
    pub fn rank(&self) -> i64 {
        self.desc.rank
    }

    /// The unranked descriptor.
    pub fn descriptor(&self) -> &UnrankedMemRefDescriptor {
        &self.desc
    }

    /// Converts to a ranked result of element type `T` and rank `N`,
    /// checking the rank; the heap descriptor is freed now (if owned) and
    /// the data's ownership moves to the ranked result.
    ///
    /// # Safety
    ///
    /// The elements must be of type `T`.
    pub unsafe fn into_ranked<T: Element, const N: usize>(
        self,
    ) -> Result<OwnedMemRef<T, N>, MemRefError> {
        // SAFETY: `from_descriptor`'s contract; the rank is checked inside.
        let ranked = unsafe { self.desc.read_ranked::<T, N>()? };
        let (ownership, free) = (self.ownership, self.free);
        if ownership == Ownership::Owned {
            // SAFETY: we own the heap descriptor; its contents were copied out.
            unsafe { free(self.desc.descriptor) };
        }
        std::mem::forget(self);
        // SAFETY: ownership of the data moves unchanged.
        Ok(unsafe { OwnedMemRef::from_descriptor(ranked, ownership, free) })
    }
}

impl Drop for OwnedUnranked {
    fn drop(&mut self) {
        if self.ownership != Ownership::Owned || self.desc.descriptor.is_null() {
            return;
        }
        // SAFETY: the heap descriptor starts with `allocated`, whatever the rank.
        let allocated = unsafe { self.desc.descriptor.cast::<*mut c_void>().read_unaligned() };
        if freeable(allocated) {
            // SAFETY: owned, from this allocator.
            unsafe { (self.free)(allocated) };
        }
        // SAFETY: the heap descriptor is ours too (spec 002, "Lifetime").
        unsafe { (self.free)(self.desc.descriptor) };
    }
}
