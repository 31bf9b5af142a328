//! Ownership of memrefs returned by compiled code, and views of raw descriptors.
//!
//! A returned descriptor may point to a fresh allocation (the caller must free
//! it), to a global (whose `allocated` pointer is a dummy such as
//! `0xdeadbeef`), or into an argument; and several results may point into
//! one allocation (`return %m, %m`, a buffer and a subview of it, a buffer
//! returned ranked and unranked). [`Allocation`] is the one guard that frees:
//! it owns one allocated pointer, every result pointing into the allocation
//! holds a clone of it, and the pointer is freed exactly once, when the last
//! holder is dropped, so no result is read after its memory is freed.
//!
//! Dynamic calls ([`crate::Function::call`]) find out themselves which
//! results share an allocation and which point into an argument (see
//! [`crate::Origin`]). A caller of a typed `_mlir_ciface_` symbol states it,
//! in `unsafe` code, because nothing in a descriptor says where its memory
//! came from:
//!
//! * [`OwnedMemRef::from_descriptor`] with [`Ownership::Owned`] makes a new
//!   guard for the descriptor's **allocated** pointer (never `aligned`, which
//!   `memref.alloc {alignment = N}` rounds up from it), freed with the
//!   allocator the kernel used. MLIR's default lowering of `memref.alloc`
//!   calls `malloc`, so the default deallocator is the C library's `free`
//!   ([`libc_free`]; the process has one C library, and a kernel built by
//!   [`crate::compile`] links against it). [`Ownership::Borrowed`] frees
//!   nothing (a result aliasing an argument, a buffer the kernel keeps).
//! * [`OwnedMemRef::with_owner`] gives a second result pointing into the same
//!   allocation a clone of the first one's guard.
//! * [`OwnedUnranked`] always frees the heap copy of its ranked descriptor
//!   (spec 002, "Lifetime": it is the caller's, whoever owns the data).
//!
//! A memref from `memref.get_global` carries the dummy allocated pointer
//! `0xdeadbeef` ([`GLOBAL_ALLOCATED`]); no guard is ever made for it.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::rc::Rc;

use crate::{
    Element, Error, MemRefDescriptor, MemRefView, MemRefViewMut, UnrankedMemRefDescriptor,
};

/// A deallocation function with the signature of C's `free`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void);

/// Who frees a memref returned through a typed symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// The result holds an [`Allocation`] for its allocated pointer.
    Owned,
    /// Nothing is freed: globals, results aliasing an argument, buffers the
    /// kernel keeps.
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

/// The one owner of an allocation: frees its pointer exactly once, when the
/// last clone is dropped.
///
/// Every result pointing into an allocation holds a clone (an `Rc`), so
/// results that alias one another keep the memory alive for each other: the
/// same buffer returned twice, a buffer and its subview, a buffer and a copy
/// made of an argument for the call. Two guards compare equal when they are
/// clones of one another.
#[derive(Clone)]
pub struct Allocation(Rc<Block>);

/// The pointer an [`Allocation`] frees, and how.
struct Block {
    ptr: NonNull<c_void>,
    free: FreeFn,
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `Allocation::new`'s contract: the pointer came from the
        // allocator of `free` and only this guard frees it; the `Rc` drops the
        // block once, with its last clone.
        unsafe { (self.free)(self.ptr.as_ptr()) };
    }
}

impl Allocation {
    /// Takes charge of freeing `ptr` with `free`; `None` (nothing to free)
    /// for null and for the globals' dummy pointer ([`GLOBAL_ALLOCATED`]).
    ///
    /// # Safety
    ///
    /// `ptr` must be null, the globals' dummy, or a live block from the
    /// allocator `free` belongs to that nobody else frees: from now on the
    /// guard and its clones free it, once. Memory read through pointers into
    /// the block is valid only while some clone lives.
    pub unsafe fn new(ptr: *mut c_void, free: FreeFn) -> Option<Allocation> {
        if !freeable(ptr) {
            return None;
        }
        let ptr = NonNull::new(ptr)?;
        Some(Allocation(Rc::new(Block { ptr, free })))
    }

    /// A fresh zeroed block of `len` bytes from C's `posix_memalign`, freed with
    /// C's `free`, aligned to 64 bytes (for every element type, vectors of up to 64
    /// bytes included, which `malloc`'s 16 would not be): where Locus copies an argument
    /// for a call.
    pub(crate) fn zeroed(len: usize) -> Result<Allocation, Error> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: plain allocation; at least one byte so the pointer is unique.
        if unsafe { libc::posix_memalign(&mut p, 64, len.max(1)) } != 0 {
            p = std::ptr::null_mut();
        }
        if !p.is_null() {
            // SAFETY: a fresh block of at least `len` bytes, ours alone.
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, len) };
        }
        // SAFETY: null or a block of C's allocator, ours alone.
        unsafe { Allocation::new(p, libc_free()) }.ok_or(Error::Buffer {
            message: format!("cannot allocate {len} bytes for a copy"),
        })
    }

    /// A fresh block holding a copy of the `len` bytes at `src`.
    ///
    /// # Safety
    ///
    /// `src..src + len` must be readable.
    pub(crate) unsafe fn copy_of(src: *const u8, len: usize) -> Result<Allocation, Error> {
        let a = Allocation::zeroed(len)?;
        // SAFETY: the block holds `len` bytes and is fresh, so no overlap;
        // `src` is readable by the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, a.ptr().cast::<u8>(), len) };
        Ok(a)
    }

    /// The pointer freed when the last clone is dropped.
    pub fn ptr(&self) -> *mut c_void {
        self.0.ptr.as_ptr()
    }

    /// How many clones (results and other holders) share the allocation.
    pub fn holders(&self) -> usize {
        Rc::strong_count(&self.0)
    }

    /// Gives up the guard: the pointer, no longer freed by anyone here, when
    /// this is the only holder; the guard back otherwise.
    pub fn into_raw(self) -> Result<*mut c_void, Allocation> {
        match Rc::try_unwrap(self.0) {
            Ok(block) => {
                let p = block.ptr.as_ptr();
                std::mem::forget(block);
                Ok(p)
            }
            Err(rc) => Err(Allocation(rc)),
        }
    }
}

impl PartialEq for Allocation {
    fn eq(&self, other: &Allocation) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Allocation {}

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocation")
            .field("ptr", &self.ptr())
            .field("holders", &self.holders())
            .finish()
    }
}

/// Lowest and highest linear index reachable from `offset` with these sizes
/// and strides, or `None` for an empty memref. Errors on overflow.
pub fn reachable(offset: i64, sizes: &[i64], strides: &[i64]) -> Result<Option<(i64, i64)>, Error> {
    if let Some(dim) = sizes.iter().position(|&s| s < 0) {
        return Err(Error::NegativeSize {
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
            .ok_or(Error::Overflow { dim })?;
        if extent < 0 {
            lo = lo.checked_add(extent).ok_or(Error::Overflow { dim })?;
        } else {
            hi = hi.checked_add(extent).ok_or(Error::Overflow { dim })?;
        }
    }
    Ok(Some((lo, hi)))
}

/// The slice start, length and view offset covering a descriptor's reachable elements.
fn span<T, const N: usize>(d: &MemRefDescriptor<T, N>) -> Result<(*mut T, usize, i64), Error> {
    match reachable(d.offset, &d.sizes, &d.strides)? {
        None => Ok((std::ptr::NonNull::<T>::dangling().as_ptr(), 0, 0)),
        Some((lo, hi)) => {
            if d.aligned.is_null() {
                return Err(Error::NullDescriptor);
            }
            // `hi - lo` can exceed `i64` when strides of both signs are huge.
            let len = hi
                .checked_sub(lo)
                .and_then(|n| n.checked_add(1))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(Error::Overflow { dim: 0 })?;
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
) -> Result<MemRefView<'a, T, N>, Error> {
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
) -> Result<MemRefViewMut<'a, T, N>, Error> {
    let (start, len, offset) = span(d)?;
    // SAFETY: the caller guarantees exclusive access to the reachable range.
    let slice = unsafe { std::slice::from_raw_parts_mut(start, len) };
    MemRefViewMut::new(slice, offset, d.sizes, d.strides)
}

/// A ranked memref returned by compiled code: its descriptor, and the guard
/// of the allocation it points into when the caller owns that.
#[derive(Debug)]
pub struct OwnedMemRef<T, const N: usize> {
    desc: MemRefDescriptor<T, N>,
    owner: Option<Allocation>,
}

impl<T: Element, const N: usize> OwnedMemRef<T, N> {
    /// Takes a returned descriptor; [`Ownership::Owned`] makes a new
    /// [`Allocation`] for its allocated pointer.
    ///
    /// # Safety
    ///
    /// The descriptor must describe valid memory of `T` for as long as the
    /// result lives, not written by anyone else meanwhile (and, for
    /// [`OwnedMemRef::view_mut`], not read either). With
    /// [`Ownership::Owned`], `allocated` must come from the allocator `free`
    /// belongs to and nobody else may free it: in particular no other result
    /// may own the same allocation (give it [`OwnedMemRef::with_owner`] and a
    /// clone of this one's guard instead).
    pub unsafe fn from_descriptor(
        desc: MemRefDescriptor<T, N>,
        ownership: Ownership,
        free: FreeFn,
    ) -> Self {
        let owner = match ownership {
            // SAFETY: forwarded to the caller.
            Ownership::Owned => unsafe { Allocation::new(desc.allocated.cast(), free) },
            Ownership::Borrowed => None,
        };
        OwnedMemRef { desc, owner }
    }

    /// Takes a returned descriptor pointing into the allocation `owner`
    /// guards (a clone of another result's guard, when both point into one
    /// buffer), or into memory nobody here frees (`None`).
    ///
    /// # Safety
    ///
    /// As for [`OwnedMemRef::from_descriptor`]: the memory the descriptor
    /// describes must be valid while `owner` lives (with `None`: while the
    /// result lives).
    pub unsafe fn with_owner(desc: MemRefDescriptor<T, N>, owner: Option<Allocation>) -> Self {
        OwnedMemRef { desc, owner }
    }

    /// The descriptor.
    pub fn descriptor(&self) -> &MemRefDescriptor<T, N> {
        &self.desc
    }

    /// The guard of the allocation, when the result owns (a share of) it.
    pub fn owner(&self) -> Option<&Allocation> {
        self.owner.as_ref()
    }

    /// [`Ownership::Owned`] when the result holds a guard.
    pub fn ownership(&self) -> Ownership {
        match self.owner {
            Some(_) => Ownership::Owned,
            None => Ownership::Borrowed,
        }
    }

    /// A checked view of the elements.
    pub fn view(&self) -> Result<MemRefView<'_, T, N>, Error> {
        // SAFETY: `from_descriptor`'s contract: the memory is valid while `self` lives.
        unsafe { view_from_descriptor(&self.desc) }
    }

    /// A checked mutable view of the elements; refused while other holders
    /// share the allocation (their views would alias this one).
    pub fn view_mut(&mut self) -> Result<MemRefViewMut<'_, T, N>, Error> {
        if let Some(owner) = &self.owner {
            if owner.holders() > 1 {
                return Err(Error::SharedAllocation {
                    holders: owner.holders(),
                });
            }
        }
        // SAFETY: as for `view`; `&mut self` and the sole guard make the access exclusive.
        unsafe { view_mut_from_descriptor(&self.desc) }
    }

    /// The elements in row-major order.
    pub fn to_vec(&self) -> Result<Vec<T>, Error> {
        Ok(self.view()?.iter().copied().collect())
    }

    /// The descriptor and the guard, taken apart (nothing is freed: the
    /// guard still frees when dropped; [`Allocation::into_raw`] gives it up).
    pub fn into_parts(self) -> (MemRefDescriptor<T, N>, Option<Allocation>) {
        (self.desc, self.owner)
    }
}

/// An unranked memref returned by compiled code: `{rank, heap descriptor}`.
///
/// The heap copy of the ranked descriptor is always the caller's (spec 002,
/// "Lifetime") and is freed with the result; the data is freed only when
/// owned.
#[derive(Debug)]
pub struct OwnedUnranked {
    desc: UnrankedMemRefDescriptor,
    /// The heap descriptor's guard.
    heap: Option<Allocation>,
    /// The data's guard.
    owner: Option<Allocation>,
}

impl OwnedUnranked {
    /// Takes a returned unranked descriptor: the heap descriptor is freed
    /// with `free` when the result is dropped (or converted), and so is the
    /// data's allocated pointer with [`Ownership::Owned`].
    ///
    /// # Safety
    ///
    /// `desc.descriptor` must be null or the heap copy of a ranked
    /// descriptor of rank `desc.rank` that an MLIR function returned (from
    /// the allocator of `free`, and the caller's: nobody else frees it). With
    /// [`Ownership::Owned`], its `allocated` pointer comes from that
    /// allocator too and belongs to the caller (as in
    /// [`OwnedMemRef::from_descriptor`]).
    pub unsafe fn from_descriptor(
        desc: UnrankedMemRefDescriptor,
        ownership: Ownership,
        free: FreeFn,
    ) -> Self {
        let owner = if ownership == Ownership::Owned && !desc.descriptor.is_null() {
            // SAFETY: the heap descriptor starts with `allocated`, whatever the rank.
            let allocated = unsafe { desc.descriptor.cast::<*mut c_void>().read_unaligned() };
            // SAFETY: owned, from this allocator (the caller's contract).
            unsafe { Allocation::new(allocated, free) }
        } else {
            None
        };
        OwnedUnranked {
            desc,
            // SAFETY: the heap copy is the caller's (the caller's contract).
            heap: unsafe { Allocation::new(desc.descriptor, free) },
            owner,
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

    /// The guard of the data's allocation, when owned.
    pub fn owner(&self) -> Option<&Allocation> {
        self.owner.as_ref()
    }

    /// Converts to a ranked result of element type `T` and rank `N`,
    /// checking the rank; the heap descriptor is freed now and the data's
    /// guard moves to the ranked result. On an error both are freed.
    ///
    /// # Safety
    ///
    /// The elements must be of type `T`.
    pub unsafe fn into_ranked<T: Element, const N: usize>(
        self,
    ) -> Result<OwnedMemRef<T, N>, Error> {
        // SAFETY: `from_descriptor`'s contract; the rank is checked inside.
        let ranked = unsafe { self.desc.read_ranked::<T, N>()? };
        let OwnedUnranked { heap, owner, .. } = self;
        // The contents were copied out: the heap descriptor can go.
        drop(heap);
        Ok(OwnedMemRef {
            desc: ranked,
            owner,
        })
    }
}
