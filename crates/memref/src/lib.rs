//! Rust side of MLIR memrefs (spec 002, "Built-in Function and MemRef Calling
//! Convention"). A memref is passed to compiled code as a *descriptor*
//! `{allocated, aligned, offset, sizes[N], strides[N]}` with 64-bit indices
//! ([`MemRefDescriptor`]; [`UnrankedMemRefDescriptor`] is `{rank, pointer to a
//! ranked descriptor}`), and element `(i_0, .., i_{N-1})` is
//! `aligned[offset + sum(i_k * strides[k])]`. Compiled functions use two
//! calling conventions: the *expanded* one, where each memref argument becomes
//! the scalars `allocated, aligned, offset, sizes..., strides...`
//! ([`MemRefDescriptor::to_expanded`]), and the `_mlir_ciface_NAME` C wrapper,
//! which takes a pointer to each descriptor and returns struct results through
//! a first pointer parameter. Struct results of the expanded form do not follow
//! the platform C ABI, so results are only ever taken through the C wrapper
//! (see [`descriptor`]). [`MemRefView`] and [`MemRefViewMut`] are safe strided
//! views over slices and `Vec`s (any strides, including negative and zero ones)
//! whose bounds are checked once at construction and which produce
//! descriptors for compiled code.
//!
//! ```
//! use locus_memref::{MemRefDescriptor, MemRefView};
//!
//! // A 2x3 row-major matrix, viewed transposed (3x2) without copying.
//! let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let m = MemRefView::contiguous(&data, [2, 3])?;
//! let t = m.transpose(0, 1)?;
//! assert_eq!(t.sizes(), &[3, 2]);
//! assert_eq!(t.get(&[2, 1]), Some(&6.0));
//! assert_eq!(t.get(&[3, 0]), None); // out of bounds: checked
//! assert_eq!(t.iter().copied().collect::<Vec<_>>(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
//!
//! // The descriptor compiled code receives (by pointer through `_mlir_ciface_`).
//! let d: MemRefDescriptor<f32, 2> = t.to_descriptor();
//! assert_eq!((d.offset, d.sizes, d.strides), (0, [3, 2], [1, 3]));
//! assert_eq!(d.allocated, d.aligned);
//!
//! // The expanded convention: 3 + 2 * rank scalars, and back.
//! let flat = d.to_expanded();
//! assert_eq!(flat.len(), 7);
//! assert_eq!(MemRefDescriptor::<f32, 2>::from_expanded(&flat)?, d);
//! # Ok::<(), locus_memref::MemRefError>(())
//! ```

pub mod descriptor;
mod error;
pub mod view;

pub use descriptor::{expanded_len, ExpandedArg, MemRefDescriptor, UnrankedMemRefDescriptor};
pub use error::MemRefError;
pub use view::{Indices, Iter, MemRefView, MemRefViewMut};
