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
//! misread, or copies it when asked ([`CallOptions::copy_strided`]).
//!
//! # Who frees what
//!
//! A returned memref may be a fresh allocation, a global, or a view into an
//! argument, and several results may point into one allocation (`return %m,
//! %m`, a buffer and its subview). [`Function::call`] tells them apart by
//! comparing each result's allocated and aligned pointers and the bytes it
//! reaches with every argument's buffer and every other result
//! ([`Origin`]):
//!
//! * a fresh allocation is freed exactly once, through its **allocated**
//!   pointer, with the kernel's allocator (`malloc`'s `free`: `memref.alloc`
//!   lowers to `malloc`, also with an `alignment`), when the last result
//!   pointing into it is dropped: they share one guard ([`Allocation`]);
//! * a result pointing into an argument is never freed, and borrows the
//!   arguments, so it cannot outlive them (nor the library, whose globals it
//!   may point to);
//! * globals (`memref.get_global`, dummy allocated pointer `0xdeadbeef`) are
//!   never freed;
//! * the heap copy of an unranked result's descriptor is always freed
//!   ("Lifetime").
//!
//! What no pointer comparison can tell, that a result aliasing nothing is
//! the caller's to free with that allocator, is asserted in `unsafe` code:
//! by [`Library::function`]'s contract (MLIR's default lowering), by
//! [`CallOptions::free_with`] for another allocator, and by the typed path's
//! [`OwnedMemRef::from_descriptor`] and [`OwnedUnranked::from_descriptor`].
//! [`CallOptions::borrow_results`] (a kernel that keeps its buffers) frees
//! nothing and needs no assertion. A shared view never reaches a kernel as a
//! writable pointer: [`MemRefArg::from_view`] passes a copy of its elements,
//! [`MemRefArg::from_view_mut`] the buffer itself.
//!
//! A kernel that faults (a wild access, a stack overflow) kills the process without a
//! word; with [`CallOptions::report_faults`], [`Function::call`] ends it instead with one
//! `locus:` line naming the signal, the address and the kernel's function, and exit status
//! 3, through the fault handler of [`locus_signals`]. Hosts calling the typed pointers
//! ([`Library::ciface`], [`Library::typed`]) open a [`locus_signals::fault_scope`]
//! themselves.
//!
//! # Which kernels go through which convention
//!
//! * [`Function::call`] (and `locus memref call`) uses the C wrapper
//!   `_mlir_ciface_NAME` for every kernel: memref arguments of any rank
//!   (ranked or unranked) and scalars, and any results: one scalar comes
//!   back as the return value, memrefs and several results through the
//!   struct pointer passed first. The library must have been compiled with
//!   C wrappers, as [`compile`] does for every function the kernel defines
//!   (a function it only declares is called by its C name, unless the kernel
//!   marks it `llvm.emit_c_interface`).
//! * [`Function::call_expanded`] calls the function itself, memrefs passed
//!   as scalar lists, and accepts only kernels **without results** (their
//!   outputs are written into argument buffers).
//! * [`Library::ciface`] and [`Library::typed`] give typed function pointers
//!   for a signature known when the Rust code is compiled (the caller writes
//!   the type; nothing is checked at run time).
//! * Element types: `f16`, `bf16`, the `f8` types of MLIR 19 ([`float`]),
//!   `f32`, `f64`, `complex<f32>`, `complex<f64>`, `i1` to `i64`, `index`, and
//!   vectors of up to four dimensions whose innermost vector has no padding
//!   (`vector<4xf32>`, `vector<4x4xf32>`: nested arrays of the innermost vector, as
//!   MLIR lowers them), each with its `.npy` dtype ([`npy`]; a vector element's
//!   dimensions are the array's last ones). The dynamic calls pass every scalar
//!   but complex ones (`f16` and `bf16` in the low half of a float register,
//!   as x86-64 and AArch64 pass them); complex memrefs pass.
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
//! * [`signature`]: MLIR function types, parsed from text or taken from a
//!   `func.func` of a `.mlir` kernel as `mlir-opt-19` parses it, and the
//!   argument checks.
//! * [`compile`]: `mlir-opt-19` (C wrappers for the functions the kernel
//!   defines), `mlir-translate-19`, `opt-19 -O2`, `llc-19`, `clang-19 -shared`.
//! * [`run`]: a kernel's entry function run as `mlir-cpu-runner` runs it,
//!   with the MLIR runner utils loaded when the kernel needs them.
//! * [`call`]: libraries, typed `_mlir_ciface_` symbols, dynamic calls
//!   through libffi in both conventions.
//! * [`owned`]: the guard of returned allocations, typed results, views of
//!   raw descriptors.
//! * [`callback`]: compiled code calling back into Rust (`mlir_callback!`).
//! * [`npy`]: `.npy` files for `locus memref call`.
//! * [`float`]: `f16`, `bf16` and the `f8` types as bits, rounded as
//!   LLVM's `APFloat` rounds.
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
//! # Ok::<(), locus_memref::Error>(())
//! ```
//!
//! # Example: compile a kernel and call it
//!
//! ```
//! use locus_memref::{
//!     compile, CallOptions, Library, MemRefArg, MemRefViewMut, Origin, Scalar, Signature, Value,
//! };
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
//! // A directory of our own (mkdtemp), removed when `dir` drops.
//! let dir = compile::private_dir()?;
//! let so = dir.path().join("scaled_sum.so");
//! compile::compile_str(kernel, &so)?;
//! // SAFETY: a library built just now.
//! let lib = unsafe { Library::open(&so) }?;
//! let sig = Signature::from_mlir(kernel, "scaled_sum")?;
//! // SAFETY: the signature comes from the library's own source.
//! let f = unsafe { lib.function("scaled_sum", sig) }?;
//!
//! // A 2x3 matrix passed transposed (3x2): no copy, the strides travel along
//! // (a mutable view: the kernel gets the buffer itself).
//! let mut data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let mut t = MemRefViewMut::contiguous(&mut data, [2, 3])?.transpose(0, 1)?;
//! let mut args = [MemRefArg::from_view_mut(&mut t).into(), Scalar::F32(2.0).into()];
//! let results = f.call(args, CallOptions::default())?;
//! let [Value::MemRef(sums), Value::Scalar(Scalar::F32(total))] = results.as_slice() else { panic!() };
//! assert_eq!(sums.view::<f32, 1>()?.iter().copied().collect::<Vec<_>>(), [10.0, 14.0, 18.0]);
//! assert_eq!(*total, 42.0);
//! // A fresh buffer of the kernel's, owned by the result alone.
//! assert_eq!(sums.origin(), Origin::Fresh);
//! assert_eq!(sums.owner().map(|a| a.holders()), Some(1));
//! // Dropping `results` frees the buffer's allocated pointer with free(); the
//! // results borrowed `data` until then.
//! drop(results);
//! data[0] = 0.0;
//! # Ok::<(), locus_memref::Error>(())
//! ```
//!
//! # Example: results that alias
//!
//! ```
//! use locus_memref::{compile, CallOptions, Library, MemRefArg, MemRefViewMut, Origin, Signature, Value};
//!
//! // A subview of the argument, and one fresh copy of it returned twice.
//! let kernel = r#"
//! func.func @views(%a: memref<?xf32>)
//!     -> (memref<?xf32, strided<[1], offset: 1>>, memref<?xf32>, memref<?xf32>) {
//!   %c0 = arith.constant 0 : index
//!   %c1 = arith.constant 1 : index
//!   %n = memref.dim %a, %c0 : memref<?xf32>
//!   %k = arith.subi %n, %c1 : index
//!   %tail = memref.subview %a[1] [%k] [1]
//!       : memref<?xf32> to memref<?xf32, strided<[1], offset: 1>>
//!   %m = memref.alloc(%n) : memref<?xf32>
//!   scf.for %i = %c0 to %n step %c1 {
//!     %x = memref.load %a[%i] : memref<?xf32>
//!     memref.store %x, %m[%i] : memref<?xf32>
//!   }
//!   return %tail, %m, %m
//!       : memref<?xf32, strided<[1], offset: 1>>, memref<?xf32>, memref<?xf32>
//! }"#;
//! let dir = compile::private_dir()?;
//! let so = dir.path().join("views.so");
//! compile::compile_str(kernel, &so)?;
//! // SAFETY: a library built just now.
//! let lib = unsafe { Library::open(&so) }?;
//! // SAFETY: the signature comes from the library's own source, lowered by
//! // MLIR's default pipeline (fresh results come from malloc).
//! let f = unsafe { lib.function("views", Signature::from_mlir(kernel, "views")?) }?;
//!
//! let mut data = vec![1.0f32, 2.0, 3.0];
//! let mut a = MemRefViewMut::contiguous(&mut data, [3])?;
//! let results = f.call([MemRefArg::from_view_mut(&mut a).into()], CallOptions::default())?;
//! let [Value::MemRef(tail), Value::MemRef(copy), Value::MemRef(again)] = results.as_slice() else {
//!     panic!()
//! };
//! // The subview points into the argument: never freed, and `data` stays
//! // borrowed while it lives.
//! assert_eq!(tail.origin(), Origin::Argument(0));
//! assert_eq!(tail.view::<f32, 1>()?.iter().copied().collect::<Vec<_>>(), [2.0, 3.0]);
//! // The copy returned twice: one allocation, one guard held by both
//! // results, freed once, when the last of them is dropped.
//! assert_eq!((copy.origin(), again.origin()), (Origin::Fresh, Origin::Fresh));
//! assert!(copy.shares_allocation_with(again));
//! assert_eq!(copy.owner().map(|g| g.holders()), Some(2));
//! drop(results);
//! data.push(4.0); // the results' borrow of `data` ended with them
//! # Ok::<(), locus_memref::Error>(())
//! ```

pub mod call;
pub mod callback;
pub mod compile;
pub mod descriptor;
mod error;
pub mod float;
pub mod mapped;
#[cfg(feature = "ndarray")]
pub mod ndarray;
pub mod npy;
pub mod owned;
pub mod run;
pub mod signature;
pub mod slice;
pub mod view;

pub use call::{
    Arg, CallOptions, Function, Library, MemRefArg, Origin, ReturnedMemRef, Scalar, Value,
};
pub use descriptor::{expanded_len, ExpandedArg, MemRefDescriptor, UnrankedMemRefDescriptor};
pub use error::Error;
pub use owned::{Allocation, FreeFn, OwnedMemRef, OwnedUnranked, Ownership};
pub use signature::{ElemType, Element, Signature};
pub use view::{Indices, Iter, MemRefView, MemRefViewMut};
