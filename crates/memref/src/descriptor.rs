//! `#[repr(C)]` memref descriptors and the expanded (scalar-list) convention.
//!
//! Spec 002, "C-compatible wrapper emission": a ranked memref of element type
//! `T` and rank `N` is the struct `{T*, T*, i64, i64[N], i64[N]}`, compatible
//! with Clang's layout of
//!
//! ```c++
//! template<typename T, size_t N>
//! struct MemRefDescriptor {
//!   T *allocated; T *aligned; intptr_t offset;
//!   intptr_t sizes[N]; intptr_t strides[N];
//! };
//! ```
//!
//! For rank 0 MLIR's descriptor is `{T*, T*, i64}`: Rust's `[i64; 0]` has size
//! 0 and alignment 8, so `MemRefDescriptor<T, 0>` has exactly that layout
//! (24 bytes on 64-bit targets; checked by the layout tests against C).
//!
//! # The two calling conventions
//!
//! * **Expanded** (spec 002, "Calling Convention for Ranked memref"): memref
//!   *arguments* are passed as the scalar list
//!   `allocated, aligned, offset, sizes[0..N], strides[0..N]`
//!   ([`MemRefDescriptor::to_expanded`], [`MemRefDescriptor::from_expanded`]);
//!   an unranked memref as `rank, descriptor pointer`.
//! * **C wrapper** `_mlir_ciface_NAME`: each memref argument is a pointer to a
//!   [`MemRefDescriptor`] (or an [`UnrankedMemRefDescriptor`]), and a struct
//!   result becomes a pointer parameter placed *first*.
//!
//! **Results must be taken through `_mlir_ciface_` wrappers.** A function in the
//! expanded form returns its memref result(s) as an LLVM struct value, and LLVM
//! struct returns do not follow the platform C ABI (spec 002 quotes D98725:
//! "Returning structs directly in LLVM does not necessarily align with the C
//! ABI of the platform"). Concretely a rank-0 descriptor on x86-64 and rank 1-2
//! descriptors on AArch64 come back in registers where a C function of the
//! same struct type returns through memory (checked on llc-19's and clang-19's
//! output by `tests/abi.rs`). The expanded form is therefore
//! only used here for *arguments*; results are read from the first pointer
//! argument of the `_mlir_ciface_` wrapper.

use std::ffi::c_void;
use std::fmt;

use crate::Error;

/// A ranked memref descriptor, `{allocated, aligned, offset, sizes[N], strides[N]}`.
///
/// `allocated` is the pointer the buffer was allocated with (the one to free);
/// `aligned` is the pointer all accesses are based on; element
/// `(i_0, .., i_{N-1})` lives at `aligned + offset + sum(i_k * strides[k])`
/// (in elements). The descriptor is plain data: it owns nothing.
#[repr(C)]
pub struct MemRefDescriptor<T, const N: usize> {
    /// Pointer returned by the allocator (freed by the owner), or a dummy for globals.
    pub allocated: *mut T,
    /// Aligned base pointer every access is computed from.
    pub aligned: *mut T,
    /// Offset of element `(0, .., 0)` from `aligned`, in elements.
    pub offset: i64,
    /// Size of each dimension.
    pub sizes: [i64; N],
    /// Stride of each dimension, in elements.
    pub strides: [i64; N],
}

impl<T, const N: usize> Clone for MemRefDescriptor<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, const N: usize> Copy for MemRefDescriptor<T, N> {}

impl<T, const N: usize> PartialEq for MemRefDescriptor<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.allocated == other.allocated
            && self.aligned == other.aligned
            && self.offset == other.offset
            && self.sizes == other.sizes
            && self.strides == other.strides
    }
}

impl<T, const N: usize> Eq for MemRefDescriptor<T, N> {}

impl<T, const N: usize> fmt::Debug for MemRefDescriptor<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemRefDescriptor")
            .field("allocated", &self.allocated)
            .field("aligned", &self.aligned)
            .field("offset", &self.offset)
            .field("sizes", &self.sizes)
            .field("strides", &self.strides)
            .finish()
    }
}

/// One scalar of the expanded convention: a pointer or a 64-bit index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpandedArg {
    /// `allocated`, `aligned`, or an unranked descriptor pointer.
    Ptr(*mut c_void),
    /// `offset`, a size, a stride, or an unranked rank.
    Index(i64),
}

/// Number of scalars a rank-`n` memref expands to: `3 + 2 * n`.
pub const fn expanded_len(n: usize) -> usize {
    3 + 2 * n
}

impl<T, const N: usize> MemRefDescriptor<T, N> {
    /// The rank `N`.
    pub const RANK: usize = N;

    /// Builds a descriptor from its fields.
    pub fn new(
        allocated: *mut T,
        aligned: *mut T,
        offset: i64,
        sizes: [i64; N],
        strides: [i64; N],
    ) -> Self {
        MemRefDescriptor {
            allocated,
            aligned,
            offset,
            sizes,
            strides,
        }
    }

    /// A descriptor with null pointers and zero fields: the slot a
    /// `_mlir_ciface_` wrapper writes a memref result into.
    pub fn null() -> Self {
        MemRefDescriptor {
            allocated: std::ptr::null_mut(),
            aligned: std::ptr::null_mut(),
            offset: 0,
            sizes: [0; N],
            strides: [0; N],
        }
    }

    /// Row-major (identity-layout) strides for `sizes`: the stride of a
    /// dimension is the product of the sizes after it. `None` on overflow.
    pub fn row_major_strides(sizes: &[i64; N]) -> Option<[i64; N]> {
        let mut strides = [0i64; N];
        let mut acc: i64 = 1;
        for d in (0..N).rev() {
            strides[d] = acc;
            acc = acc.checked_mul(sizes[d].max(1))?;
        }
        Some(strides)
    }

    /// Flattens to the expanded convention's argument list:
    /// `allocated, aligned, offset, sizes..., strides...` (`3 + 2N` scalars).
    pub fn to_expanded(&self) -> Vec<ExpandedArg> {
        let mut out = Vec::with_capacity(expanded_len(N));
        out.push(ExpandedArg::Ptr(self.allocated.cast()));
        out.push(ExpandedArg::Ptr(self.aligned.cast()));
        out.push(ExpandedArg::Index(self.offset));
        out.extend(self.sizes.iter().map(|&s| ExpandedArg::Index(s)));
        out.extend(self.strides.iter().map(|&s| ExpandedArg::Index(s)));
        out
    }

    /// Rebuilds a descriptor from an expanded argument list, checking its
    /// length (`3 + 2N`) and that pointers and indices are where they belong.
    pub fn from_expanded(args: &[ExpandedArg]) -> Result<Self, Error> {
        if args.len() != expanded_len(N) {
            return Err(Error::ExpandedArity {
                expected: expanded_len(N),
                found: args.len(),
            });
        }
        let ptr = |position: usize| match args[position] {
            ExpandedArg::Ptr(p) => Ok(p.cast::<T>()),
            ExpandedArg::Index(_) => Err(Error::ExpandedKind {
                position,
                expected: "a pointer",
            }),
        };
        let index = |position: usize| match args[position] {
            ExpandedArg::Index(i) => Ok(i),
            ExpandedArg::Ptr(_) => Err(Error::ExpandedKind {
                position,
                expected: "an index",
            }),
        };
        let allocated = ptr(0)?;
        let aligned = ptr(1)?;
        let offset = index(2)?;
        let mut sizes = [0i64; N];
        let mut strides = [0i64; N];
        for d in 0..N {
            sizes[d] = index(3 + d)?;
            strides[d] = index(3 + N + d)?;
        }
        Ok(MemRefDescriptor {
            allocated,
            aligned,
            offset,
            sizes,
            strides,
        })
    }

    /// An unranked descriptor pointing at `self` (the rank is `N`). The result
    /// borrows `self` through a raw pointer: keep `self` alive and in place
    /// while the unranked descriptor is used.
    pub fn as_unranked(&mut self) -> UnrankedMemRefDescriptor {
        UnrankedMemRefDescriptor {
            rank: N as i64,
            descriptor: (self as *mut Self).cast(),
        }
    }
}

/// An unranked memref descriptor, `{rank, pointer to a ranked descriptor}`.
///
/// Passed as two scalars in the expanded convention and by pointer to the
/// `_mlir_ciface_` wrapper. Spec 002, "Lifetime": an unranked descriptor
/// *returned* from a function points to a heap copy of the ranked descriptor
/// that the caller must free.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnrankedMemRefDescriptor {
    /// The rank of the ranked descriptor pointed to.
    pub rank: i64,
    /// Type-erased pointer to a `MemRefDescriptor<T, rank>`.
    pub descriptor: *mut c_void,
}

impl UnrankedMemRefDescriptor {
    /// Rank 0 and a null pointer: the slot for an unranked result.
    pub fn null() -> Self {
        UnrankedMemRefDescriptor {
            rank: 0,
            descriptor: std::ptr::null_mut(),
        }
    }

    /// The expanded convention's two scalars: `rank, descriptor`.
    pub fn to_expanded(&self) -> [ExpandedArg; 2] {
        [
            ExpandedArg::Index(self.rank),
            ExpandedArg::Ptr(self.descriptor),
        ]
    }

    /// Reads the ranked descriptor, checking the rank and that the pointer is
    /// non-null.
    ///
    /// # Safety
    ///
    /// A non-null `descriptor` must point to a valid, readable
    /// `MemRefDescriptor<T, N>` whose element type is `T`.
    pub unsafe fn read_ranked<T, const N: usize>(&self) -> Result<MemRefDescriptor<T, N>, Error> {
        if self.rank != N as i64 {
            return Err(Error::RankMismatch {
                expected: N,
                found: self.rank,
            });
        }
        if self.descriptor.is_null() {
            return Err(Error::NullDescriptor);
        }
        // SAFETY: the caller guarantees a valid descriptor of this type; the
        // rank was checked above. `read_unaligned` tolerates any alignment.
        Ok(unsafe {
            self.descriptor
                .cast::<MemRefDescriptor<T, N>>()
                .read_unaligned()
        })
    }
}
