//! Rust side of MLIR memrefs: spec 002, "Built-in Function and MemRef Calling
//! Convention" (sections "Calling Convention for Ranked memref", "... for
//! Unranked memref", "C-compatible wrapper emission", "Default Memref Model").
//!
//! # The contract
//!
//! A memref reaches compiled code as a *descriptor*
//! `{allocated, aligned, offset, sizes[N], strides[N]}` with 64-bit indices
//! ([`MemRefDescriptor`], every rank including 0; [`UnrankedMemRefDescriptor`]
//! is `{rank, pointer to a ranked descriptor}`), and element
//! `(i_0, .., i_{N-1})` is `aligned[offset + sum(i_k * strides[k])]`
//! ("Index Linearization"). A lowered function exists in two forms: the
//! *expanded* one, where each memref argument becomes the scalars
//! `allocated, aligned, offset, sizes..., strides...`
//! ([`MemRefDescriptor::to_expanded`]), and, when `llvm.emit_c_interface` is
//! set, the C wrapper `_mlir_ciface_NAME`, which takes a pointer to each
//! descriptor and returns a struct result (several results, or a memref)
//! through a pointer passed *first*. The expanded form returns structs by
//! value in a way that does not follow the platform C ABI (a rank-0
//! descriptor on x86-64 and ranks 1-2 on AArch64 come back in registers where
//! C returns through memory), so Locus takes results only through the C
//! wrapper ([`descriptor`]). A callee whose type has the identity layout
//! ignores the descriptor's offset and strides; [`signature`] checks every
//! argument against the callee's MLIR type (element type, rank, static sizes,
//! layout) and refuses a strided view an identity-layout callee would
//! misread, or copies it when asked ([`CallOptions::copy_strided`]). A
//! returned memref is freed per call as the caller states ([`Ownership`]):
//! owned results free the **allocated** pointer with the kernel's allocator
//! (`malloc`'s `free`: `memref.alloc` lowers to `malloc`, also with an
//! `alignment`), unranked results also free their heap descriptor
//! ("Lifetime"); borrowed results free nothing (aliases of arguments, buffers
//! the kernel keeps). Globals (`memref.get_global`) carry the dummy allocated
//! pointer `0xdeadbeef` and are never freed.
//!
//! # Which kernels go through which convention
//!
//! * [`Function::call`] (and `locus memref call`) uses the C wrapper
//!   `_mlir_ciface_NAME` for every kernel: memref arguments of any rank
//!   (ranked or unranked) and scalars, and any results: one scalar comes
//!   back as the return value, memrefs and several results through the
//!   struct pointer passed first. The library must have been compiled with
//!   C wrappers, as [`compile`] does.
//! * [`Function::call_expanded`] calls the function itself, memrefs passed
//!   as scalar lists, and accepts only kernels **without results** (their
//!   outputs are written into argument buffers).
//! * [`Library::ciface`] and [`Library::typed`] give typed function pointers
//!   for a signature known when the Rust code is compiled (the caller writes
//!   the type; nothing is checked at run time).
//! * The dynamic calls do not pass `f16` scalars (libffi has no half type);
//!   `f16` memrefs pass.
//! * [`callback`]: compiled code calls a Rust function through the
//!   `_mlir_ciface_` form of an external `func.func`.
//!
//! # Modules
//!
//! * [`view`]: safe strided views over slices and `Vec`s (any strides,
//!   negative and zero included), checked once at construction; checked and
//!   unchecked indexing (`get_unchecked`, `as_contiguous` for hot loops),
//!   row-major iteration, transpose and subview. With the `ndarray` feature,
//!   the `ndarray` module converts views from and to arrays.
//! * [`descriptor`]: the `#[repr(C)]` descriptors and the expanded convention.
//! * [`signature`]: MLIR function types, parsed from text or from a
//!   `func.func` in a `.mlir` file, and the argument checks.
//! * [`compile`]: `mlir-opt-19` (with `--llvm-request-c-wrappers`),
//!   `mlir-translate-19`, `opt-19 -O2`, `llc-19`, `clang-19 -shared`.
//! * [`call`]: libraries, typed `_mlir_ciface_` symbols, dynamic calls
//!   through libffi in both conventions.
//! * [`owned`]: ownership of returned memrefs, views of raw descriptors.
//! * [`callback`]: compiled code calling back into Rust (`mlir_callback!`).
//! * [`npy`]: `.npy` files for `locus memref call`.
//!
//! # Example: views and descriptors
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
//!
//! # Example: compile a kernel and call it
//!
//! ```
//! use locus_memref::{compile, CallOptions, Library, MemRefArg, MemRefView, Scalar, Signature, Value};
//!
//! let kernel = r#"
//! func.func @scaled_sum(%m: memref<?x?xf32, strided<[?, ?], offset: ?>>, %k: f32)
//!     -> (memref<?xf32>, f32) {
//!   %c0 = arith.constant 0 : index
//!   %c1 = arith.constant 1 : index
//!   %z = arith.constant 0.0 : f32
//!   %r = memref.dim %m, %c0 : memref<?x?xf32, strided<[?, ?], offset: ?>>
//!   %c = memref.dim %m, %c1 : memref<?x?xf32, strided<[?, ?], offset: ?>>
//!   %out = memref.alloc(%r) {alignment = 64} : memref<?xf32>
//!   %t = scf.for %i = %c0 to %r step %c1 iter_args(%tot = %z) -> (f32) {
//!     %s = scf.for %j = %c0 to %c step %c1 iter_args(%a = %z) -> (f32) {
//!       %x = memref.load %m[%i, %j] : memref<?x?xf32, strided<[?, ?], offset: ?>>
//!       %n = arith.addf %a, %x : f32
//!       scf.yield %n : f32
//!     }
//!     %v = arith.mulf %s, %k : f32
//!     memref.store %v, %out[%i] : memref<?xf32>
//!     %nt = arith.addf %tot, %v : f32
//!     scf.yield %nt : f32
//!   }
//!   return %out, %t : memref<?xf32>, f32
//! }"#;
//! let so = std::env::temp_dir().join(format!("locus-memref-doc-{}.so", std::process::id()));
//! compile::compile_str(kernel, &so)?;
//! // SAFETY: a library built just now.
//! let lib = unsafe { Library::open(&so) }?;
//! let sig = Signature::from_mlir(kernel, "scaled_sum")?;
//! // SAFETY: the signature comes from the library's own source.
//! let f = unsafe { lib.function("scaled_sum", sig) }?;
//!
//! // A 2x3 matrix passed transposed (3x2): no copy, the strides travel along.
//! let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let t = MemRefView::contiguous(&data, [2, 3])?.transpose(0, 1)?;
//! let results = f.call(&mut [MemRefArg::from_view(&t).into(), Scalar::F32(2.0).into()], CallOptions::default())?;
//! let [Value::MemRef(sums), Value::Scalar(Scalar::F32(total))] = results.as_slice() else { panic!() };
//! assert_eq!(sums.view::<f32, 1>()?.iter().copied().collect::<Vec<_>>(), [10.0, 14.0, 18.0]);
//! assert_eq!(*total, 42.0);
//! // Dropping `results` frees the buffer's allocated pointer with free().
//! # drop(results);
//! # let _ = std::fs::remove_file(&so);
//! # Ok::<(), locus_memref::MemRefError>(())
//! ```

pub mod call;
pub mod callback;
pub mod compile;
pub mod descriptor;
mod error;
#[cfg(feature = "ndarray")]
pub mod ndarray;
pub mod npy;
pub mod owned;
pub mod signature;
pub mod view;

pub use call::{Arg, CallOptions, Function, Library, MemRefArg, ReturnedMemRef, Scalar, Value};
pub use descriptor::{expanded_len, ExpandedArg, MemRefDescriptor, UnrankedMemRefDescriptor};
pub use error::MemRefError;
pub use owned::{FreeFn, OwnedMemRef, OwnedUnranked, Ownership};
pub use signature::{ElemType, Element, Signature};
pub use view::{Indices, Iter, MemRefView, MemRefViewMut};
