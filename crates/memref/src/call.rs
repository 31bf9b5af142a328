//! Calling compiled kernels: typed symbols and dynamic (libffi) calls.
//!
//! [`Library::ciface`] gives the `_mlir_ciface_NAME` wrapper as a typed
//! function pointer for signatures known at compile time (the call then costs
//! what a C call does). [`Library::function`] pairs a symbol with a run-time
//! [`Signature`]; [`Function::call`] checks every argument against it and
//! calls the C wrapper through libffi, taking results from the struct whose
//! pointer is the wrapper's first parameter (when there is a struct result:
//! several results, or one memref). [`Function::call_expanded`] calls the
//! function itself in the expanded convention; it accepts only functions
//! without results, because a struct returned by value in LLVM does not
//! follow the platform C ABI (see [`crate::descriptor`]).

use std::ffi::c_void;
use std::marker::PhantomData;
use std::path::Path;

use libffi::middle::{Arg as FfiArg, Cif, CodePtr, Type as FfiType};

use crate::float::{Format, SmallFloat};
use crate::owned::{freeable, libc_free, reachable, Allocation, FreeFn};
use crate::signature::{ElemType, MemRefType, Mismatch, Signature, Type};
use crate::slice::Slicing;
use crate::{Element, Error, MemRefView, MemRefViewMut};

/// A shared library holding compiled kernels.
pub struct Library {
    lib: libloading::Library,
    path: String,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library").field("path", &self.path).finish()
    }
}

impl Library {
    /// Opens a shared library, binding every symbol it needs now: a symbol
    /// that no loaded library defines is a [`Error::Library`] error
    /// naming it (the loader's message), not a crash at the first call.
    ///
    /// # Safety
    ///
    /// Opening a library runs its initializers: it must be one built to be
    /// loaded into this process (as [`crate::compile`] builds them).
    pub unsafe fn open(path: &Path) -> Result<Library, Error> {
        // SAFETY: forwarded.
        unsafe { Library::open_with(path, false) }
    }

    /// Opens a library whose symbols kernels opened later may use (as
    /// `mlir-cpu-runner -shared-libs` does): RTLD_GLOBAL, every symbol
    /// bound now. Open it before the kernel's library and keep it while
    /// the kernel's is open.
    ///
    /// # Safety
    ///
    /// As for [`Library::open`]: opening it runs its initializers.
    pub unsafe fn open_global(path: &Path) -> Result<Library, Error> {
        // SAFETY: forwarded.
        unsafe { Library::open_with(path, true) }
    }

    /// # Safety
    ///
    /// As for [`Library::open`].
    unsafe fn open_with(path: &Path, global: bool) -> Result<Library, Error> {
        let shown = path.display().to_string();
        // A bare file name would be searched for in the system's paths.
        let full = if path.components().count() == 1 {
            Path::new(".").join(path)
        } else {
            path.to_path_buf()
        };
        // RTLD_NOW: every symbol the library needs is bound now, so one that no
        // loaded library defines is this error (dlerror names it) rather than
        // the dynamic loader ending the process at the first call through it.
        // RTLD_LOCAL for kernels: their symbols do not leak into later libraries.
        #[cfg(unix)]
        let opened = {
            use libloading::os::unix;
            let scope = if global {
                unix::RTLD_GLOBAL
            } else {
                unix::RTLD_LOCAL
            };
            // SAFETY: the caller vouches for the library's initializers.
            unsafe { unix::Library::open(Some(&full), unix::RTLD_NOW | scope) }
                .map(libloading::Library::from)
        };
        #[cfg(not(unix))]
        let _ = global;
        #[cfg(not(unix))]
        // SAFETY: the caller vouches for the library's initializers.
        let opened = unsafe { libloading::Library::new(&full) };
        let lib = opened.map_err(|e| {
            // dlerror starts with the path, which `what` already gives.
            let message = e.to_string();
            let prefix = format!("{}: ", full.display());
            Error::Library {
                what: shown.clone(),
                message: message
                    .strip_prefix(&prefix)
                    .unwrap_or(&message)
                    .to_string(),
            }
        })?;
        Ok(Library { lib, path: shown })
    }

    /// The path the library was opened from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The address of `symbol`.
    pub fn address(&self, symbol: &str) -> Result<*mut c_void, Error> {
        // SAFETY: the symbol is only read as an address, never as a value.
        let sym = unsafe { self.lib.get::<*mut c_void>(symbol.as_bytes()) };
        match sym {
            Ok(s) => {
                // SAFETY: `Symbol<*mut c_void>` derefs to the symbol's address.
                let p = unsafe { s.try_as_raw_ptr() }.unwrap_or(std::ptr::null_mut());
                if p.is_null() {
                    Err(Error::Library {
                        what: symbol.to_string(),
                        message: format!("symbol is null in {}", self.path),
                    })
                } else {
                    Ok(p)
                }
            }
            Err(e) => Err(Error::Library {
                what: symbol.to_string(),
                message: format!("not found in {}: {e}", self.path),
            }),
        }
    }

    /// The C wrapper `_mlir_ciface_NAME` as a function pointer of type `F`.
    ///
    /// # Safety
    ///
    /// `F` must be an `unsafe extern "C" fn` type matching the wrapper: a
    /// pointer to the result struct first (when the function has a struct
    /// result), then `*mut MemRefDescriptor<T, N>` (or
    /// `*mut UnrankedMemRefDescriptor`) per memref and the scalars as they are.
    /// The pointer must not be used after the library is dropped.
    pub unsafe fn ciface<F: Copy>(&self, name: &str) -> Result<F, Error> {
        // SAFETY: forwarded.
        unsafe { self.typed(&format!("_mlir_ciface_{name}")) }
    }

    /// The symbol `name` as a function pointer of type `F` (for the expanded
    /// convention: memrefs as `allocated, aligned, offset, sizes.., strides..`).
    ///
    /// # Safety
    ///
    /// As for [`Library::ciface`], with the function's real type.
    pub unsafe fn typed<F: Copy>(&self, symbol: &str) -> Result<F, Error> {
        if std::mem::size_of::<F>() != std::mem::size_of::<*mut c_void>() {
            return Err(Error::Library {
                what: symbol.to_string(),
                message: "the requested type is not a function pointer".into(),
            });
        }
        let p = self.address(symbol)?;
        // SAFETY: same size checked above; the caller vouches for the type.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    /// `name` with a run-time signature.
    ///
    /// # Safety
    ///
    /// `signature` must be the function's real MLIR type (for example taken
    /// with [`Signature::from_mlir`] from the source the library was built from).
    ///
    /// And the function must return memrefs as MLIR's default lowering does,
    /// since [`Function::call`] frees what it cannot tell from a buffer the
    /// kernel keeps: every memref result is a global (`memref.get_global`),
    /// points into an argument or into another result's allocation, or is a
    /// fresh `malloc` allocation (`memref.alloc`) that the caller now owns;
    /// an unranked result's descriptor is a fresh `malloc` copy (spec 002,
    /// "Lifetime"). A kernel returning buffers it keeps is called with
    /// [`CallOptions::borrow_results`]; one allocating with another allocator,
    /// with [`CallOptions::free_with`].
    pub unsafe fn function(
        &self,
        name: &str,
        signature: Signature,
    ) -> Result<Function<'_>, Error> {
        let ciface = self.address(&format!("_mlir_ciface_{name}")).ok();
        let expanded = self.address(name).ok();
        if ciface.is_none() && expanded.is_none() {
            return Err(Error::Library {
                what: format!("_mlir_ciface_{name}"),
                message: format!("neither it nor `{name}` is in {}", self.path),
            });
        }
        let ciface_cif = ciface.and_then(|_| ciface_cif(&signature));
        let expanded_cif = expanded.and_then(|_| expanded_cif(&signature));
        let mut result_offsets = Vec::with_capacity(signature.results.len());
        let mut result_size = 0usize;
        for t in &signature.results {
            let (size, align) = field_layout(t);
            result_size = result_size.next_multiple_of(align);
            result_offsets.push(result_size);
            result_size += size;
        }
        Ok(Function {
            name: name.to_string(),
            signature,
            ciface,
            expanded,
            ciface_cif,
            expanded_cif,
            result_offsets,
            result_size,
            _lib: PhantomData,
        })
    }
}

/// A scalar argument or result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// `i1`.
    I1(bool),
    /// `i8`.
    I8(i8),
    /// `i16`.
    I16(i16),
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `index`.
    Index(i64),
    /// `f16`, `bf16` or an `f8` type, as bits.
    Small(SmallFloat),
}

impl Scalar {
    /// Its MLIR type.
    pub fn elem(&self) -> ElemType {
        match self {
            Scalar::Small(v) => v.elem(),
            Scalar::F32(_) => ElemType::F32,
            Scalar::F64(_) => ElemType::F64,
            Scalar::I1(_) => ElemType::I1,
            Scalar::I8(_) => ElemType::I8,
            Scalar::I16(_) => ElemType::I16,
            Scalar::I32(_) => ElemType::I32,
            Scalar::I64(_) => ElemType::I64,
            Scalar::Index(_) => ElemType::Index,
        }
    }

    /// Parses `text` as a value of type `elem` (`true`/`false`/`0`/`1` for `i1`; for the
    /// narrow floats a decimal, rounded to nearest even, or the bits as `0x` hex). Complex
    /// scalars are not parsed.
    pub fn parse(elem: ElemType, text: &str) -> Option<Scalar> {
        let t = text.trim();
        if Format::of(elem).is_some() {
            let small = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                    let bits = u16::from_str_radix(hex, 16).ok()?;
                    (u32::from(bits) < 1 << (8 * elem.size())).then_some(())?;
                    SmallFloat::from_bits(elem, bits)?
                }
                Some(_) => return None,
                None => SmallFloat::from_f64(elem, t.parse().ok()?)?,
            };
            return Some(Scalar::Small(small));
        }
        Some(match elem {
            ElemType::F32 => Scalar::F32(t.parse().ok()?),
            ElemType::F64 => Scalar::F64(t.parse().ok()?),
            ElemType::I1 => Scalar::I1(match t {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => return None,
            }),
            ElemType::I8 => Scalar::I8(t.parse().ok()?),
            ElemType::I16 => Scalar::I16(t.parse().ok()?),
            ElemType::I32 => Scalar::I32(t.parse().ok()?),
            ElemType::I64 => Scalar::I64(t.parse().ok()?),
            ElemType::Index => Scalar::Index(t.parse().ok()?),
            _ => return None,
        })
    }

    /// Reads a value of type `elem` from the start of `bytes` (native endianness).
    fn read(elem: ElemType, bytes: &[u8]) -> Option<Scalar> {
        let get = |n: usize| bytes.get(..n);
        if Format::of(elem).is_some() {
            let bits = match get(elem.size())? {
                [b] => u16::from(*b),
                two => u16::from_ne_bytes(two.try_into().ok()?),
            };
            return SmallFloat::from_bits(elem, bits).map(Scalar::Small);
        }
        Some(match elem {
            ElemType::F32 => Scalar::F32(f32::from_ne_bytes(get(4)?.try_into().ok()?)),
            ElemType::F64 => Scalar::F64(f64::from_ne_bytes(get(8)?.try_into().ok()?)),
            // LLVM leaves the bits above an `i1` undefined.
            ElemType::I1 => Scalar::I1(get(1)?[0] & 1 == 1),
            ElemType::I8 => Scalar::I8(i8::from_ne_bytes(get(1)?.try_into().ok()?)),
            ElemType::I16 => Scalar::I16(i16::from_ne_bytes(get(2)?.try_into().ok()?)),
            ElemType::I32 => Scalar::I32(i32::from_ne_bytes(get(4)?.try_into().ok()?)),
            ElemType::I64 => Scalar::I64(i64::from_ne_bytes(get(8)?.try_into().ok()?)),
            ElemType::Index => Scalar::Index(i64::from_ne_bytes(get(8)?.try_into().ok()?)),
            _ => return None,
        })
    }
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::F32(v) => write!(f, "{v}"),
            Scalar::F64(v) => write!(f, "{v}"),
            Scalar::I1(v) => write!(f, "{}", u8::from(*v)),
            Scalar::I8(v) => write!(f, "{v}"),
            Scalar::I16(v) => write!(f, "{v}"),
            Scalar::I32(v) => write!(f, "{v}"),
            Scalar::I64(v) | Scalar::Index(v) => write!(f, "{v}"),
            Scalar::Small(v) => write!(f, "{v}"),
        }
    }
}

/// A memref argument for a dynamic call: a borrowed view, type-erased.
///
/// Results of the call may point into the argument (a kernel may return it,
/// or a subview of it): they borrow it for the same lifetime `'a`, so the
/// caller's buffer outlives them, and they never free it.
#[derive(Debug)]
pub struct MemRefArg<'a> {
    elem: ElemType,
    aligned: *mut u8,
    offset: i64,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    /// The whole buffer borrowed, as (start address, length in bytes): what
    /// a result pointing into it aliases.
    buffer: (usize, usize),
    /// Whether the kernel may write through it; a shared view is copied for
    /// each call instead.
    writable: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> MemRefArg<'a> {
    /// An argument from a shared view. A kernel may write through any memref
    /// it receives, and a shared borrow must not be written, so each call
    /// passes a **copy** of the elements the view reaches (with the view's
    /// offset, sizes and strides): what the kernel writes there is dropped
    /// with the copy, or kept alive by the results that point into it. Use
    /// [`MemRefArg::from_view_mut`] to pass the buffer itself.
    pub fn from_view<T: Element, const N: usize>(view: &MemRefView<'a, T, N>) -> Self {
        let data = view.as_slice();
        Self::from_descriptor(&view.to_descriptor(), data.as_ptr(), data.len(), false)
    }

    /// A writable argument from a mutable view (borrowed for the call and
    /// for as long as its results live): the kernel gets the buffer itself.
    pub fn from_view_mut<T: Element, const N: usize>(
        view: &'a mut MemRefViewMut<'_, T, N>,
    ) -> Self {
        let d = view.to_descriptor();
        let len = view.as_view().as_slice().len();
        Self::from_descriptor(&d, d.aligned.cast_const(), len, true)
    }

    /// The argument for a descriptor made from a checked view over the `len`
    /// elements at `start` (the caller holds the view's borrow for `'a`).
    fn from_descriptor<T: Element, const N: usize>(
        d: &crate::MemRefDescriptor<T, N>,
        start: *const T,
        len: usize,
        writable: bool,
    ) -> Self {
        MemRefArg {
            elem: T::TYPE,
            aligned: d.aligned.cast(),
            offset: d.offset,
            sizes: d.sizes.to_vec(),
            strides: d.strides.to_vec(),
            buffer: (start as usize, len * std::mem::size_of::<T>()),
            writable,
            _borrow: PhantomData,
        }
    }

    /// A writable row-major argument over raw bytes of element type `elem`
    /// (any rank): `bytes` must hold exactly the elements and be aligned for them.
    pub fn from_bytes(
        elem: ElemType,
        bytes: &'a mut [u8],
        sizes: &[i64],
    ) -> Result<Self, Error> {
        if let Some(dim) = sizes.iter().position(|&s| s < 0) {
            return Err(Error::NegativeSize {
                dim,
                size: sizes[dim],
            });
        }
        if byte_len(elem, sizes) != Some(bytes.len()) {
            return Err(Error::Buffer {
                message: format!(
                    "{} bytes do not hold sizes {sizes:?} of {elem}",
                    bytes.len()
                ),
            });
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(elem.align()) {
            return Err(Error::Buffer {
                message: format!("{:p} is not aligned for {elem}", bytes.as_ptr()),
            });
        }
        Ok(MemRefArg {
            elem,
            aligned: bytes.as_mut_ptr(),
            offset: 0,
            strides: crate::signature::row_major(sizes),
            sizes: sizes.to_vec(),
            buffer: (bytes.as_ptr() as usize, bytes.len()),
            writable: true,
            _borrow: PhantomData,
        })
    }

    /// The same buffer passed once more, as numpy passes one array given for two
    /// parameters: the kernel sees one memory through both, and a write through one is
    /// read through the other (and kept: nothing is copied back over it). For a shared
    /// view ([`MemRefArg::from_view`]) each argument is still a copy of its own. Slice either
    /// with [`MemRefArg::sliced`]. A row-major copy made for an identity-layout parameter
    /// ([`CallOptions::copy_strided`]) is written back only where the kernel changed it;
    /// an element changed both through it and otherwise is an error.
    ///
    /// # Safety
    ///
    /// The argument and every alias of it must go to one call ([`Function::call`] or
    /// [`Function::call_expanded`]), or be dropped unused: a result of a call may be a
    /// view of the buffer, shared for `'a`, which a later call given an alias would write
    /// while the view lives.
    pub unsafe fn alias(&self) -> MemRefArg<'a> {
        // Within one call this is sound: an argument never makes a reference to its
        // buffer; the kernel and the write-back reach it through the raw pointer only,
        // and the borrow `'a` all share keeps the owner from touching it meanwhile.
        MemRefArg {
            elem: self.elem,
            aligned: self.aligned,
            offset: self.offset,
            sizes: self.sizes.clone(),
            strides: self.strides.clone(),
            buffer: self.buffer,
            writable: self.writable,
            _borrow: PhantomData,
        }
    }

    /// The same buffer seen through `slicing` (numpy's basic slicing and transpose): a
    /// new offset, sizes and strides, no copy.
    ///
    /// # Errors
    ///
    /// As [`Slicing::apply`]: more slices than dimensions, an index out of range.
    pub fn sliced(self, slicing: &Slicing) -> Result<Self, Error> {
        let (offset, sizes, strides) = slicing.apply(self.offset, &self.sizes, &self.strides)?;
        // Slicing only narrows: what the new descriptor reaches is inside what the old
        // one did, which is inside the buffer.
        Ok(MemRefArg {
            offset,
            sizes,
            strides,
            ..self
        })
    }

    /// Element type.
    pub fn elem(&self) -> ElemType {
        self.elem
    }

    /// Sizes.
    pub fn sizes(&self) -> &[i64] {
        &self.sizes
    }

    /// Strides, in elements.
    pub fn strides(&self) -> &[i64] {
        &self.strides
    }

    /// The data pointer of the borrowed buffer (`aligned`; also passed as
    /// `allocated`). A shared view reaches the kernel as a copy instead.
    pub fn data_ptr(&self) -> *mut u8 {
        self.aligned
    }

    /// Whether the kernel gets the buffer itself (a mutable view or bytes)
    /// rather than a copy (a shared view).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// A copy of the elements the view reaches, laid out as they are (same
    /// strides): the copy, the offset of element `(0, .., 0)` in it, and its
    /// length in bytes.
    fn copy_reachable(&self) -> Result<(Allocation, i64, usize), Error> {
        let esz = self.elem.size() as i64;
        match reachable(self.offset, &self.sizes, &self.strides)? {
            // SAFETY: zero bytes are read.
            None => Ok((unsafe { Allocation::copy_of(self.aligned, 0) }?, 0, 0)),
            Some((lo, hi)) => {
                // Construction checked every reachable element is in the buffer,
                // so these products fit.
                let start = self.aligned.wrapping_offset((lo * esz) as isize);
                let len = ((hi - lo + 1) * esz) as usize;
                // SAFETY: `start..start + len` holds the reachable elements,
                // inside the borrowed buffer.
                let copy = unsafe { Allocation::copy_of(start, len) }?;
                Ok((copy, self.offset - lo, len))
            }
        }
    }

    /// Copies the elements in row-major order into a fresh buffer.
    fn gather(&self) -> Result<Allocation, Error> {
        let esz = self.elem.size();
        // Construction checked the sizes against a buffer, so this fits.
        let nbytes = byte_len(self.elem, &self.sizes).ok_or(Error::Overflow { dim: 0 })?;
        let out = Allocation::zeroed(nbytes)?;
        let dst = out.ptr().cast::<u8>();
        let mut k = 0usize;
        for_each_linear(&self.sizes, &self.strides, self.offset, |lin| {
            // SAFETY: construction checked every reachable element is in the
            // view's buffer.
            let from = unsafe { self.aligned.offset(lin as isize * esz as isize) };
            // SAFETY: the copy holds every element.
            let to = unsafe { dst.add(k * esz) };
            // SAFETY: both hold an element; the copy is a block of its own.
            unsafe { std::ptr::copy_nonoverlapping(from, to, esz) };
            k += 1;
        });
        Ok(out)
    }

    /// Writes row-major data at `src` back through the strides. With `pristine` (the
    /// elements as they were given to the kernel, row-major), only the elements the
    /// kernel changed in `src` are written, so what it wrote into the buffer through
    /// another argument stays; returns the first element (its linear index) that was
    /// changed both in `src` and in the buffer, to different values: a write that
    /// cannot be kept.
    ///
    /// # Safety
    ///
    /// `src` (and `pristine`) hold the argument's elements in row-major order (what
    /// [`MemRefArg::gather`] made), and the argument is writable.
    unsafe fn scatter(&self, src: *const u8, pristine: Option<*const u8>) -> Option<i64> {
        let esz = self.elem.size();
        let mut k = 0usize;
        let mut conflict = None;
        for_each_linear(&self.sizes, &self.strides, self.offset, |lin| {
            // SAFETY: `src` and `pristine` hold every element (the caller's contract).
            let from = unsafe { src.add(k * esz) };
            // SAFETY: as above; the blocks are distinct, only read here.
            let from = unsafe { std::slice::from_raw_parts(from, esz) };
            // SAFETY: as in `gather`.
            let to = unsafe { self.aligned.offset(lin as isize * esz as isize) };
            k += 1;
            if let Some(before) = pristine {
                // SAFETY: as above.
                let before = unsafe { before.add((k - 1) * esz) };
                // SAFETY: as above.
                let before = unsafe { std::slice::from_raw_parts(before, esz) };
                if from == before {
                    return;
                }
                // SAFETY: as above.
                let now = unsafe { std::slice::from_raw_parts(to.cast_const(), esz) };
                if now != before && now != from {
                    conflict = conflict.or(Some(lin));
                    return;
                }
            }
            // SAFETY: both hold an element, the argument is writable (the
            // caller's contract) and the copy is a block of its own.
            unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), to, esz) };
        });
        conflict
    }
}

/// Bytes of a dense memref of `elem` with these sizes; `None` for a negative
/// size or an overflow.
fn byte_len(elem: ElemType, sizes: &[i64]) -> Option<usize> {
    sizes
        .iter()
        .try_fold(elem.size(), |n, &s| n.checked_mul(usize::try_from(s).ok()?))
}

/// Calls `f` with the linear index of every element, row-major.
fn for_each_linear(sizes: &[i64], strides: &[i64], offset: i64, mut f: impl FnMut(i64)) {
    if sizes.iter().any(|&s| s <= 0) {
        return;
    }
    let n = sizes.len();
    let mut idx = vec![0i64; n];
    let mut lin = offset;
    loop {
        f(lin);
        let mut d = n;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            if idx[d] + 1 < sizes[d] {
                idx[d] += 1;
                lin += strides[d];
                break;
            }
            lin -= strides[d] * (sizes[d] - 1);
            idx[d] = 0;
        }
    }
}

/// An argument of a dynamic call.
#[derive(Debug)]
pub enum Arg<'a> {
    /// A scalar.
    Scalar(Scalar),
    /// A memref (passed ranked or unranked, as the signature says).
    MemRef(MemRefArg<'a>),
}

impl From<Scalar> for Arg<'_> {
    fn from(s: Scalar) -> Self {
        Arg::Scalar(s)
    }
}

impl<'a> From<MemRefArg<'a>> for Arg<'a> {
    fn from(m: MemRefArg<'a>) -> Self {
        Arg::MemRef(m)
    }
}

/// Options of a dynamic call.
///
/// ```
/// use locus_memref::CallOptions;
///
/// let options = CallOptions::default().copy_strided(true).borrow_results(false);
/// assert!(options.copies_strided() && !options.borrows_results());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CallOptions {
    copy_strided: bool,
    borrow_results: bool,
    free: FreeFn,
}

impl Default for CallOptions {
    /// Strided views given to identity-layout parameters are refused; fresh
    /// results are freed with C's `free`.
    fn default() -> Self {
        CallOptions {
            copy_strided: false,
            borrow_results: false,
            free: libc_free(),
        }
    }
}

impl CallOptions {
    /// Copy a strided view given to an identity-layout parameter into a
    /// contiguous buffer (and back after the call, if writable) instead of
    /// refusing it.
    pub fn copy_strided(mut self, copy: bool) -> Self {
        self.copy_strided = copy;
        self
    }

    /// The kernel keeps the buffers it returns (a cache, a pool of its own):
    /// no result is freed ([`Origin::Kept`]), except the heap copies of
    /// unranked results' descriptors, which are always the caller's (spec
    /// 002, "Lifetime"). At worst this leaks, so it needs no `unsafe`.
    pub fn borrow_results(mut self, borrow: bool) -> Self {
        self.borrow_results = borrow;
        self
    }

    /// Frees fresh results, and the heap descriptors of unranked results,
    /// with `free` instead of C's `free`.
    ///
    /// # Safety
    ///
    /// The kernel must allocate what it returns with the allocator `free`
    /// belongs to (for example a kernel lowered with
    /// `use-generic-functions`, whose `memref.alloc` calls
    /// `_mlir_memref_to_llvm_alloc`).
    pub unsafe fn free_with(mut self, free: FreeFn) -> Self {
        self.free = free;
        self
    }

    /// Whether strided views are copied for identity-layout parameters.
    pub fn copies_strided(&self) -> bool {
        self.copy_strided
    }

    /// Whether results are left to the kernel.
    pub fn borrows_results(&self) -> bool {
        self.borrow_results
    }
}

/// Where a returned memref's data lives, as [`Function::call`] found out by
/// comparing its allocated and aligned pointers and the addresses it reaches
/// with every argument's buffer and every other result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A fresh allocation of the kernel's: [`ReturnedMemRef::owner`] is its
    /// guard, shared by every result pointing into it, and it is freed (with
    /// the call's deallocator) when the last of them is dropped. No guard
    /// when the allocated pointer is null.
    Fresh,
    /// Points into the buffer of argument `i` (the caller's: never freed),
    /// or into the copy made of it for the call (a shared view, or a strided
    /// view copied for an identity-layout parameter), which the result's
    /// [`ReturnedMemRef::owner`] then keeps alive.
    Argument(usize),
    /// A global (`memref.get_global`, allocated pointer `0xdeadbeef`): never
    /// freed.
    Global,
    /// The call said the kernel keeps its results
    /// ([`CallOptions::borrow_results`]): never freed.
    Kept,
}

/// A memref returned by a dynamic call, any rank.
///
/// It borrows the call's arguments and library for `'a` (it may point into
/// either), and holds a share of its allocation when it owns one (see
/// [`Origin`]): reading it is always reading live memory.
#[derive(Debug)]
pub struct ReturnedMemRef<'a> {
    /// The descriptor as the wrapper wrote it.
    raw: RawResult,
    origin: Origin,
    owner: Option<Allocation>,
    _borrow: PhantomData<&'a [u8]>,
}

impl ReturnedMemRef<'_> {
    /// Element type.
    pub fn elem(&self) -> ElemType {
        self.raw.elem
    }
    /// Rank.
    pub fn rank(&self) -> usize {
        self.raw.sizes.len()
    }
    /// Sizes.
    pub fn sizes(&self) -> &[i64] {
        &self.raw.sizes
    }
    /// Strides.
    pub fn strides(&self) -> &[i64] {
        &self.raw.strides
    }
    /// Offset.
    pub fn offset(&self) -> i64 {
        self.raw.offset
    }
    /// The allocated pointer (what an owned allocation frees).
    pub fn allocated(&self) -> *mut c_void {
        self.raw.allocated
    }
    /// The aligned pointer (what accesses are based on).
    pub fn aligned(&self) -> *mut c_void {
        self.raw.aligned
    }
    /// Whether it came back unranked (its heap descriptor was freed once read).
    pub fn was_unranked(&self) -> bool {
        self.raw.unranked
    }
    /// Where its data lives.
    pub fn origin(&self) -> Origin {
        self.origin
    }
    /// The guard of the allocation it points into, when the call's results
    /// own it (shared with every other result pointing into it).
    pub fn owner(&self) -> Option<&Allocation> {
        self.owner.as_ref()
    }
    /// Whether both results hold the same allocation's guard.
    pub fn shares_allocation_with(&self, other: &ReturnedMemRef<'_>) -> bool {
        matches!((&self.owner, &other.owner), (Some(a), Some(b)) if a == b)
    }

    /// The elements in row-major order as native-endian bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        let esz = self.raw.elem.size();
        // Also refuses negative sizes, before they are counted below.
        if reachable(self.raw.offset, &self.raw.sizes, &self.raw.strides)?.is_some()
            && self.raw.aligned.is_null()
        {
            return Err(Error::NullDescriptor);
        }
        // The sizes come from compiled code: a broadcast (stride 0) memref may
        // name more elements than memory holds, so count and reserve fallibly.
        let too_large = || Error::Result {
            index: self.raw.index,
            message: format!(
                "sizes {:?} of {} are too large to copy",
                self.raw.sizes, self.raw.elem
            ),
        };
        let nbytes = byte_len(self.raw.elem, &self.raw.sizes).ok_or_else(too_large)?;
        let mut out = Vec::new();
        out.try_reserve_exact(nbytes).map_err(|_| too_large())?;
        let base = self.raw.aligned.cast::<u8>();
        for_each_linear(&self.raw.sizes, &self.raw.strides, self.raw.offset, |lin| {
            // SAFETY: the callee's signature promises a valid memref of this
            // type, alive while `self` (its guard, its borrow) is.
            let p = unsafe { base.offset(lin as isize * esz as isize) };
            // SAFETY: as above.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, esz) });
        });
        Ok(out)
    }

    /// The result's elements in place, when they are contiguous in row-major order (its
    /// strides are the row-major ones of its sizes, whatever the strides of dimensions of
    /// size 1): what [`ReturnedMemRef::to_bytes`] would copy, without the copy.
    pub fn contiguous_bytes(&self) -> Result<Option<&[u8]>, Error> {
        let Some((lo, hi)) = reachable(self.raw.offset, &self.raw.sizes, &self.raw.strides)? else {
            return Ok(Some(&[]));
        };
        if self.raw.aligned.is_null() {
            return Err(Error::NullDescriptor);
        }
        let dense = crate::signature::row_major(&self.raw.sizes);
        let row_major = self
            .raw
            .sizes
            .iter()
            .zip(self.raw.strides.iter().zip(&dense))
            .all(|(&size, (&stride, &want))| size == 1 || stride == want);
        if !row_major || lo != self.raw.offset {
            return Ok(None);
        }
        let esz = self.raw.elem.size();
        let len = (hi - lo + 1) as usize * esz;
        let start = self
            .raw
            .aligned
            .cast::<u8>()
            .wrapping_add(lo as usize * esz);
        // SAFETY: the callee's signature promises a valid memref of this type, alive
        // while `self` (its guard, its borrow) is; row-major strides make its elements
        // the `len` bytes from its first one.
        Ok(Some(unsafe { std::slice::from_raw_parts(start, len) }))
    }

    /// A checked typed view of the result.
    pub fn view<T: Element, const N: usize>(&self) -> Result<MemRefView<'_, T, N>, Error> {
        if T::TYPE != self.raw.elem || N != self.raw.sizes.len() {
            return Err(Error::Result {
                index: self.raw.index,
                message: format!(
                    "is memref of rank {} of {}, asked for rank {N} of {}",
                    self.raw.sizes.len(),
                    self.raw.elem,
                    T::TYPE
                ),
            });
        }
        let mut sizes = [0i64; N];
        let mut strides = [0i64; N];
        sizes.copy_from_slice(&self.raw.sizes);
        strides.copy_from_slice(&self.raw.strides);
        let d = crate::MemRefDescriptor::new(
            self.raw.allocated.cast::<T>(),
            self.raw.aligned.cast::<T>(),
            self.raw.offset,
            sizes,
            strides,
        );
        // SAFETY: the memory is valid while `self` lives (its guard keeps a
        // fresh allocation, its borrow an argument's buffer); results give
        // only shared access, so nothing writes it meanwhile.
        unsafe { crate::owned::view_from_descriptor(&d) }
    }
}

/// A result of a dynamic call.
#[derive(Debug)]
pub enum Value<'a> {
    /// A scalar.
    Scalar(Scalar),
    /// A memref.
    MemRef(ReturnedMemRef<'a>),
}

/// A function of a [`Library`] with its run-time signature.
pub struct Function<'lib> {
    name: String,
    signature: Signature,
    ciface: Option<*mut c_void>,
    expanded: Option<*mut c_void>,
    /// The libffi call descriptions, prepared once from the signature.
    ciface_cif: Option<Cif>,
    expanded_cif: Option<Cif>,
    /// Where each result lies in the C wrapper's result struct, and the struct's size.
    result_offsets: Vec<usize>,
    result_size: usize,
    _lib: PhantomData<&'lib Library>,
}

impl std::fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("signature", &self.signature.to_string())
            .field("ciface", &self.ciface)
            .field("expanded", &self.expanded)
            .finish()
    }
}

/// Whether the C wrapper returns its results through a first pointer argument.
fn struct_result(sig: &Signature) -> bool {
    sig.results.len() > 1 || matches!(sig.results.first(), Some(Type::MemRef(_)))
}

/// The libffi description of `_mlir_ciface_NAME` for `sig`, or `None` when
/// it has a complex scalar (see [`NO_COMPLEX_SCALARS`]).
fn ciface_cif(sig: &Signature) -> Option<Cif> {
    let mut types = Vec::new();
    if struct_result(sig) {
        types.push(FfiType::pointer());
    }
    for t in &sig.inputs {
        types.push(match t {
            Type::MemRef(_) => FfiType::pointer(),
            Type::Scalar(e) => scalar_ffi_type(*e)?,
        });
    }
    let ret = match (struct_result(sig), sig.results.first()) {
        (false, Some(Type::Scalar(e))) => scalar_ffi_type(*e)?,
        _ => FfiType::void(),
    };
    Some(Cif::new(types, ret))
}

/// The libffi description of the expanded form (functions without results only).
fn expanded_cif(sig: &Signature) -> Option<Cif> {
    if !sig.results.is_empty() {
        return None;
    }
    let mut types = Vec::new();
    for t in &sig.inputs {
        match t {
            Type::MemRef(m) => match m.rank() {
                Some(r) => {
                    types.push(FfiType::pointer());
                    types.push(FfiType::pointer());
                    types.extend((0..1 + 2 * r).map(|_| FfiType::i64()));
                }
                None => {
                    types.push(FfiType::i64());
                    types.push(FfiType::pointer());
                }
            },
            Type::Scalar(e) => types.push(scalar_ffi_type(*e)?),
        }
    }
    Some(Cif::new(types, FfiType::void()))
}

/// One value slot for libffi (which takes pointers to argument values).
enum Slot {
    F32(f32),
    F64(f64),
    U8(u8),
    I16(i16),
    I32(i32),
    I64(i64),
    Ptr(*mut c_void),
}

impl Slot {
    fn arg(&self) -> FfiArg {
        match self {
            Slot::F32(v) => FfiArg::new(v),
            Slot::F64(v) => FfiArg::new(v),
            Slot::U8(v) => FfiArg::new(v),
            Slot::I16(v) => FfiArg::new(v),
            Slot::I32(v) => FfiArg::new(v),
            Slot::I64(v) => FfiArg::new(v),
            Slot::Ptr(v) => FfiArg::new(v),
        }
    }

    fn scalar(s: Scalar) -> Slot {
        match s {
            Scalar::F32(v) => Slot::F32(v),
            Scalar::F64(v) => Slot::F64(v),
            Scalar::I1(v) => Slot::U8(u8::from(v)),
            Scalar::I8(v) => Slot::U8(v as u8),
            Scalar::I16(v) => Slot::I16(v),
            Scalar::I32(v) => Slot::I32(v),
            Scalar::I64(v) | Scalar::Index(v) => Slot::I64(v),
            // An `f16` or `bf16` travels in the low 16 bits of a floating-point register
            // (x86-64 and AArch64 both): a float with those bits; an `f8` is an `i8`.
            Scalar::Small(v) if v.elem().size() == 2 => {
                Slot::F32(f32::from_bits(u32::from(v.bits())))
            }
            Scalar::Small(v) => Slot::U8(v.bits() as u8),
        }
    }
}

fn scalar_ffi_type(e: ElemType) -> Option<FfiType> {
    Some(match e {
        ElemType::F32 => FfiType::f32(),
        ElemType::F64 => FfiType::f64(),
        ElemType::I1 | ElemType::I8 => FfiType::u8(),
        ElemType::I16 => FfiType::i16(),
        ElemType::I32 => FfiType::i32(),
        ElemType::I64 | ElemType::Index => FfiType::i64(),
        // See `Slot::scalar`: the low 16 bits of a float register.
        ElemType::F16 | ElemType::BF16 => FfiType::f32(),
        ElemType::ComplexF32 | ElemType::ComplexF64 | ElemType::Vector { .. } => return None,
        ElemType::F8E5M2
        | ElemType::F8E4M3
        | ElemType::F8E4M3FN
        | ElemType::F8E5M2FNUZ
        | ElemType::F8E4M3FNUZ
        | ElemType::F8E4M3B11FNUZ => FfiType::u8(),
    })
}

/// Why a signature with a complex or vector scalar cannot be called dynamically (libffi
/// would need the target's rules for small structs and vector registers; memrefs of them
/// pass).
const NO_COMPLEX_SCALARS: &str = "complex and vector scalars cannot be passed in dynamic \
     calls (a memref of them can)";

/// Size and alignment of a result field in the C wrapper's result struct.
fn field_layout(t: &Type) -> (usize, usize) {
    match t {
        Type::Scalar(e) => (e.size(), e.align()),
        Type::MemRef(m) => match m.rank() {
            Some(r) => (24 + 16 * r, 8),
            None => (16, 8),
        },
    }
}

/// A ranked descriptor as 64-bit words: `allocated, aligned, offset, sizes.., strides..`.
fn descriptor_words(aligned: *mut u8, offset: i64, sizes: &[i64], strides: &[i64]) -> Vec<i64> {
    let mut w = Vec::with_capacity(3 + 2 * sizes.len());
    w.push(aligned as i64);
    w.push(aligned as i64);
    w.push(offset);
    w.extend_from_slice(sizes);
    w.extend_from_slice(strides);
    w
}

/// A prepared memref argument: where its data is, and a copy if one was made.
struct Prepared<'a> {
    aligned: *mut u8,
    offset: i64,
    sizes: &'a [i64],
    strides: std::borrow::Cow<'a, [i64]>,
    /// The copy the kernel gets instead of the argument's buffer.
    copy: Option<Allocation>,
    /// Whether the copy is row-major (made for an identity-layout
    /// parameter), to be written back to a writable argument.
    gathered: bool,
    /// For a gathered copy of a buffer another argument also reaches: the elements as
    /// the kernel got them, so only what it changed in the copy is written back.
    pristine: Option<Allocation>,
    /// Where the kernel's data is: (start address, length in bytes).
    span: (usize, usize),
}

/// A memref result as the wrapper wrote it (an unranked one's heap
/// descriptor already read).
#[derive(Debug)]
struct RawResult {
    /// Position among the call's results, for errors.
    index: usize,
    elem: ElemType,
    allocated: *mut c_void,
    aligned: *mut c_void,
    offset: i64,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    unranked: bool,
}

impl RawResult {
    /// The bytes `[start, end)` its elements cover, or `None` (no element,
    /// or sizes and strides that do not compute).
    fn bytes(&self) -> Option<(i128, i128)> {
        let (lo, hi) = reachable(self.offset, &self.sizes, &self.strides).ok()??;
        let esz = self.elem.size() as i128;
        let p = self.aligned as usize as i128;
        Some((p + i128::from(lo) * esz, p + (i128::from(hi) + 1) * esz))
    }
}

/// Whether address `p` lies in `[start, end)`.
fn within(p: *mut c_void, (start, end): (i128, i128)) -> bool {
    let p = p as usize as i128;
    start <= p && p < end
}

/// Whether two byte ranges overlap.
fn overlap(a: (i128, i128), b: (i128, i128)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Finds where each memref result's data lives: in a global, in argument
/// `i`'s buffer (given by `args` as the argument's position, the bytes the
/// kernel got, and the copy made for the call if any), or in a fresh
/// allocation, one guard per allocation shared by every result in it.
/// Results are in one allocation when their allocated pointers are equal,
/// their bytes overlap, or one's pointers lie in the other's bytes.
fn resolve(
    results: &[RawResult],
    args: &[(usize, (i128, i128), Option<Allocation>)],
    options: &CallOptions,
) -> Result<Vec<(Origin, Option<Allocation>)>, Error> {
    let n = results.len();
    let global: Vec<bool> = results
        .iter()
        .map(|r| r.allocated as usize == crate::owned::GLOBAL_ALLOCATED)
        .collect();
    let bytes: Vec<Option<(i128, i128)>> = results.iter().map(RawResult::bytes).collect();
    let into = |k: usize, span: (i128, i128)| {
        let r = &results[k];
        within(r.allocated, span)
            || within(r.aligned, span)
            || bytes[k].is_some_and(|b| overlap(b, span))
    };
    // The first argument each result points into.
    let arg_of: Vec<Option<usize>> = (0..n)
        .map(|k| match global[k] {
            true => None,
            false => args.iter().position(|a| into(k, a.1)),
        })
        .collect();
    // Results in one allocation: a union-find over the results.
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    for i in 0..n {
        for j in i + 1..n {
            if global[i] || global[j] {
                continue;
            }
            let (a, b) = (&results[i], &results[j]);
            let same = (a.allocated == b.allocated && freeable(a.allocated))
                || bytes[j].is_some_and(|bj| into(i, bj))
                || bytes[i].is_some_and(|bi| into(j, bi));
            if same {
                let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                parent[ri.max(rj)] = ri.min(rj);
            }
        }
    }
    let roots: Vec<usize> = (0..n).map(|k| root(&mut parent, k)).collect();
    // A group touching an argument is the argument's, whole.
    let group_arg = |g: usize| (0..n).filter(|&k| roots[k] == g).find_map(|k| arg_of[k]);
    // The allocated pointer each group of fresh results frees.
    let mut freed: Vec<Option<usize>> = vec![None; n];
    for k in 0..n {
        let g = roots[k];
        let a = results[k].allocated;
        if global[k] || options.borrow_results || group_arg(g).is_some() || !freeable(a) {
            continue;
        }
        match freed[g] {
            None => freed[g] = Some(k),
            Some(first) if results[first].allocated != a => {
                return Err(Error::Result {
                    index: results[k].index,
                    message: format!(
                        "overlaps result {} but its allocated pointer is {a:?}, not {:?}: \
                         which one to free is unknown",
                        results[first].index, results[first].allocated
                    ),
                });
            }
            Some(_) => {}
        }
    }
    let mut guards: Vec<Option<Allocation>> = vec![None; n];
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let g = roots[k];
        let arg = arg_of[k].or_else(|| group_arg(g));
        out.push(if global[k] {
            (Origin::Global, None)
        } else if let Some(i) = arg {
            let (position, _, copy) = &args[i];
            (Origin::Argument(*position), copy.clone())
        } else if options.borrow_results {
            (Origin::Kept, None)
        } else {
            if guards[g].is_none() {
                if let Some(first) = freed[g] {
                    // SAFETY: `Library::function`'s contract (or
                    // `CallOptions::free_with`'s): a result that is no global
                    // and points into no argument is a fresh allocation of the
                    // allocator `free` belongs to, now the caller's; the
                    // results sharing it are grouped here, so one guard frees it.
                    guards[g] = unsafe { Allocation::new(results[first].allocated, options.free) };
                }
            }
            (Origin::Fresh, guards[g].clone())
        });
    }
    Ok(out)
}

impl<'lib> Function<'lib> {
    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The signature.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// Checks the arguments against the signature, copying strided views for
    /// identity-layout parameters when `copy_strided` is set.
    fn prepare<'a>(
        &self,
        args: &'a [Arg<'_>],
        copy_strided: bool,
    ) -> Result<Vec<Option<Prepared<'a>>>, Error> {
        self.signature.check_arity(args.len())?;
        let mut out = Vec::with_capacity(args.len());
        for (index, (arg, ty)) in args.iter().zip(&self.signature.inputs).enumerate() {
            match (arg, ty) {
                (Arg::Scalar(s), Type::Scalar(e)) => {
                    if s.elem() != *e {
                        return Err(Error::Argument {
                            index,
                            message: format!(
                                "scalar of type {}, the signature wants {e}",
                                s.elem()
                            ),
                        });
                    }
                    if scalar_ffi_type(*e).is_none() {
                        return Err(Error::Argument {
                            index,
                            message: NO_COMPLEX_SCALARS.into(),
                        });
                    }
                    out.push(None);
                }
                (Arg::MemRef(m), Type::MemRef(t)) => {
                    out.push(Some(prepare_memref(index, m, t, copy_strided)?))
                }
                (Arg::Scalar(s), Type::MemRef(t)) => {
                    return Err(Error::Argument {
                        index,
                        message: format!("scalar {} given, the signature wants {t}", s.elem()),
                    })
                }
                (Arg::MemRef(m), Type::Scalar(e)) => {
                    return Err(Error::Argument {
                        index,
                        message: format!(
                            "memref of {} given, the signature wants scalar {e}",
                            m.elem
                        ),
                    })
                }
            }
        }
        // A row-major copy of a buffer that another argument also reaches (one array
        // given twice, numpy-style) keeps the elements as given, so that only what the
        // kernel changes in the copy is written back over the buffer.
        for (i, p) in out.iter_mut().enumerate() {
            let (Some(p), Arg::MemRef(m)) = (p, &args[i]) else {
                continue;
            };
            let shared = args.iter().enumerate().any(|(j, other)| {
                let range = |(start, len): (usize, usize)| (start as i128, (start + len) as i128);
                matches!(other, Arg::MemRef(o) if j != i && overlap(range(o.buffer), range(m.buffer)))
            });
            if let (true, true, true, Some(copy)) = (shared, p.gathered, m.writable, &p.copy) {
                // SAFETY: the copy holds the span's bytes, made just now.
                p.pristine = Some(unsafe { Allocation::copy_of(copy.ptr().cast(), p.span.1) }?);
            }
        }
        Ok(out)
    }

    /// Calls `_mlir_ciface_NAME` with checked arguments; returns the results in order.
    ///
    /// Memref results borrow the arguments (and the library) for `'a`: a
    /// kernel may return an argument, a subview of one, or a global of the
    /// library. Each result's [`Origin`] is found by comparing its pointers
    /// and the bytes it reaches with every argument's buffer and every other
    /// result: results pointing into an argument are never freed, results
    /// pointing into one fresh allocation share one guard that frees it once,
    /// when the last of them is dropped, and globals are never freed. The
    /// heap descriptors of unranked results are freed as soon as they are
    /// read. A fresh allocation is one the kernel made with `malloc` (or the
    /// allocator of [`CallOptions::free_with`]), as [`Library::function`]'s
    /// contract states; [`CallOptions::borrow_results`] frees none.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] (and the view errors) for arguments that do not fit the
    /// signature, found before the kernel runs. After it ran, [`Error::Result`] or
    /// [`Error::NullDescriptor`] for results that cannot be read (an unranked result
    /// with a negative rank, a null descriptor): the buffers the kernel returned are then
    /// **not freed**, since what a result aliases is not known until every result is read,
    /// and freeing one that points into an argument or a global would be a bad free.
    ///
    /// The results cannot outlive what they may alias:
    ///
    /// ```compile_fail
    /// # use locus_memref::{CallOptions, Function, MemRefArg, MemRefViewMut, Value};
    /// # fn f(same: &Function<'_>) -> Result<(), locus_memref::Error> {
    /// let mut data = vec![1.0f32, 2.0];
    /// let mut view = MemRefViewMut::contiguous(&mut data, [2])?;
    /// // `same` returns its argument.
    /// let results = same.call([MemRefArg::from_view_mut(&mut view).into()], CallOptions::default())?;
    /// drop(data); // error: `data` is still borrowed by `results`
    /// let [Value::MemRef(m)] = results.as_slice() else { return Ok(()) };
    /// println!("{:?}", m.to_bytes());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// The arguments are taken, so one cannot be passed to another call (which may write
    /// its buffer) while a result that may alias it lives:
    ///
    /// ```compile_fail
    /// # use locus_memref::{CallOptions, Function, MemRefArg, MemRefViewMut, Value};
    /// # fn f(same: &Function<'_>) -> Result<(), locus_memref::Error> {
    /// let mut data = vec![1.0f32, 2.0];
    /// let mut view = MemRefViewMut::contiguous(&mut data, [2])?;
    /// let args = [MemRefArg::from_view_mut(&mut view).into()];
    /// let first = same.call(args, CallOptions::default())?;
    /// let again = same.call(args, CallOptions::default())?; // error: `args` was moved
    /// # drop((first, again));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Nor the library, whose globals they may point into:
    ///
    /// ```compile_fail
    /// # use locus_memref::{CallOptions, Library, Signature, Value};
    /// # fn f(lib: Library) -> Result<(), locus_memref::Error> {
    /// let results = {
    ///     // SAFETY: `table` returns a global of the library (`memref.get_global`).
    ///     let table = unsafe { lib.function("table", Signature::parse("() -> memref<4xf32>")?) }?;
    ///     table.call([], CallOptions::default())?
    /// };
    /// drop(lib); // error: `lib` is still borrowed by `results`
    /// let [Value::MemRef(m)] = results.as_slice() else { return Ok(()) };
    /// println!("{:?}", m.to_bytes());
    /// # Ok(())
    /// # }
    /// ```
    pub fn call<'a>(
        &self,
        args: impl IntoIterator<Item = Arg<'a>>,
        options: CallOptions,
    ) -> Result<Vec<Value<'a>>, Error>
    where
        'lib: 'a,
    {
        // The arguments are taken, not borrowed: a result may alias an argument's buffer,
        // and an argument passed again to another call (which may write its buffer) while
        // that result lives would change memory behind the result's shared view.
        let mut args: Vec<Arg<'a>> = args.into_iter().collect();
        let args = args.as_mut_slice();
        let Some(code) = self.ciface else {
            return Err(Error::Library {
                what: format!("_mlir_ciface_{}", self.name),
                message: "not in the library (compile with C wrappers requested)".into(),
            });
        };
        for (index, t) in self.signature.results.iter().enumerate() {
            if matches!(t, Type::Scalar(e) if scalar_ffi_type(*e).is_none()) {
                return Err(Error::Result {
                    index,
                    message: NO_COMPLEX_SCALARS.into(),
                });
            }
        }
        let prepared = self.prepare(args, options.copy_strided)?;
        // Descriptor storage: must not move until the call returns.
        let mut ranked: Vec<Vec<i64>> = Vec::new();
        let mut unranked: Vec<[i64; 2]> = Vec::new();
        for (p, ty) in prepared.iter().zip(&self.signature.inputs) {
            if let (Some(p), Type::MemRef(t)) = (p, ty) {
                ranked.push(descriptor_words(p.aligned, p.offset, p.sizes, &p.strides));
                if t.shape.is_none() {
                    unranked.push([p.sizes.len() as i64, 0]);
                }
            }
        }
        let (mut ri, mut ui) = (0, 0);
        let mut slots = Vec::new();
        // The result struct (a pointer first) when results are a struct.
        let results = &self.signature.results;
        let struct_result = struct_result(&self.signature);
        let offsets = &self.result_offsets;
        let mut result_buf = vec![0u64; self.result_size.div_ceil(8).max(1)];
        if struct_result {
            slots.push(Slot::Ptr(result_buf.as_mut_ptr().cast()));
        }
        for (i, (p, ty)) in prepared.iter().zip(&self.signature.inputs).enumerate() {
            match (p, ty) {
                (None, _) => {
                    if let Arg::Scalar(s) = &args[i] {
                        slots.push(Slot::scalar(*s));
                    }
                }
                (Some(_), Type::MemRef(t)) => {
                    let d = ranked[ri].as_mut_ptr().cast::<c_void>();
                    ri += 1;
                    if t.shape.is_none() {
                        unranked[ui][1] = d as i64;
                        slots.push(Slot::Ptr(unranked[ui].as_mut_ptr().cast()));
                        ui += 1;
                    } else {
                        slots.push(Slot::Ptr(d));
                    }
                }
                (Some(_), Type::Scalar(_)) => {}
            }
        }
        let Some(cif) = &self.ciface_cif else {
            return Err(Error::Argument {
                index: 0,
                message: NO_COMPLEX_SCALARS.into(),
            });
        };
        let ffi_args: Vec<FfiArg> = slots.iter().map(Slot::arg).collect();
        // SAFETY: `Library::function`'s contract makes the signature the
        // function's type; the cif follows the C wrapper's convention for it;
        // every pointer passed points to storage alive until after the call.
        // libffi writes at most a full register (8 bytes) of return value.
        let ret: [u64; 2] = unsafe { cif.call(CodePtr(code), &ffi_args) };
        // An error here is reported once the results are read (and their buffers
        // guarded, so dropping them frees what is the kernel's).
        let written = write_back(&prepared, args);
        let mut values = Vec::with_capacity(results.len());
        if !struct_result {
            if let Some(Type::Scalar(e)) = results.first() {
                let bytes: Vec<u8> = ret.iter().flat_map(|w| w.to_ne_bytes()).collect();
                let s = Scalar::read(*e, &bytes).ok_or(Error::Result {
                    index: 0,
                    message: format!("cannot read a {e}"),
                })?;
                values.push(Value::Scalar(s));
            }
            return written.map(|()| values);
        }
        let bytes: &[u8] = {
            let p = result_buf.as_ptr().cast::<u8>();
            // SAFETY: the buffer's own bytes.
            unsafe { std::slice::from_raw_parts(p, result_buf.len() * 8) }
        };
        // Heap descriptors of unranked results: the caller's (spec 002,
        // "Lifetime"), freed when this is dropped, once their words are copied.
        let mut heaps: Vec<Allocation> = Vec::new();
        let mut raws = Vec::new();
        // Each result in order: a scalar, or `None` for the next memref.
        let mut fields = Vec::with_capacity(results.len());
        for (index, (t, &off)) in results.iter().zip(offsets).enumerate() {
            let field = &bytes[off..];
            let word = |k: usize| -> i64 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&field[8 * k..8 * k + 8]);
                i64::from_ne_bytes(w)
            };
            match t {
                Type::Scalar(e) => {
                    let s = Scalar::read(*e, field).ok_or(Error::Result {
                        index,
                        message: format!("cannot read a {e}"),
                    })?;
                    fields.push(Some(Value::Scalar(s)));
                }
                Type::MemRef(m) => {
                    let words = match m.rank() {
                        Some(r) => (0..3 + 2 * r).map(word).collect::<Vec<i64>>(),
                        None => {
                            let rank = word(0);
                            let heap = word(1) as *mut c_void;
                            if !heap.is_null() && !heaps.iter().any(|h| h.ptr() == heap) {
                                // SAFETY: an unranked result's descriptor is a
                                // fresh heap copy the caller frees, from the
                                // kernel's allocator (`Library::function`'s or
                                // `CallOptions::free_with`'s contract); the
                                // check above makes one guard per pointer.
                                heaps.extend(unsafe { Allocation::new(heap, options.free) });
                            }
                            if heap.is_null() || !(0..=64).contains(&rank) {
                                return Err(Error::Result {
                                    index,
                                    message: format!(
                                        "unranked result has rank {rank} and descriptor {heap:?}"
                                    ),
                                });
                            }
                            let n = 3 + 2 * rank as usize;
                            // SAFETY: an unranked result points to a heap ranked
                            // descriptor of `rank`, alive until `heaps` is dropped.
                            unsafe { std::slice::from_raw_parts(heap.cast::<i64>(), n) }.to_vec()
                        }
                    };
                    let r = (words.len() - 3) / 2;
                    raws.push(RawResult {
                        index,
                        elem: m.elem,
                        allocated: words[0] as *mut c_void,
                        aligned: words[1] as *mut c_void,
                        offset: words[2],
                        sizes: words[3..3 + r].to_vec(),
                        strides: words[3 + r..3 + 2 * r].to_vec(),
                        unranked: m.rank().is_none(),
                    });
                    fields.push(None);
                }
            }
        }
        drop(heaps);
        let spans: Vec<(usize, (i128, i128), Option<Allocation>)> = prepared
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = p.as_ref()?;
                let start = p.span.0 as i128;
                Some((i, (start, start + p.span.1.max(1) as i128), p.copy.clone()))
            })
            .collect();
        let origins = resolve(&raws, &spans, &options)?;
        let mut memrefs = raws.into_iter().zip(origins);
        let values = fields
            .into_iter()
            .filter_map(|v| match v {
                Some(v) => Some(v),
                None => {
                    let (r, (origin, owner)) = memrefs.next()?;
                    Some(Value::MemRef(ReturnedMemRef {
                        raw: r,
                        origin,
                        owner,
                        _borrow: PhantomData,
                    }))
                }
            })
            .collect();
        // Dropped on an error: the results' guards free what is the kernel's.
        written.map(|()| values)
    }

    /// Calls the function itself in the expanded convention (each memref as
    /// `allocated, aligned, offset, sizes.., strides..`; unranked as `rank,
    /// descriptor pointer`). Only for functions without results: results
    /// come back as an LLVM struct, which does not follow the C ABI.
    pub fn call_expanded(
        &self,
        args: &mut [Arg<'_>],
        copy_strided: bool,
    ) -> Result<(), Error> {
        if !self.signature.results.is_empty() {
            return Err(Error::Result {
                index: 0,
                message: "results are only taken through _mlir_ciface_ wrappers: LLVM struct \
                          returns of the expanded form do not follow the platform C ABI"
                    .into(),
            });
        }
        let Some(code) = self.expanded else {
            return Err(Error::Library {
                what: self.name.clone(),
                message: "not in the library".into(),
            });
        };
        let prepared = self.prepare(args, copy_strided)?;
        let mut ranked: Vec<Vec<i64>> = Vec::new();
        let mut slots = Vec::new();
        for (i, (p, ty)) in prepared.iter().zip(&self.signature.inputs).enumerate() {
            match (p, ty) {
                (Some(p), Type::MemRef(t)) => {
                    if t.shape.is_none() {
                        ranked.push(descriptor_words(p.aligned, p.offset, p.sizes, &p.strides));
                    } else {
                        slots.push(Slot::Ptr(p.aligned.cast()));
                        slots.push(Slot::Ptr(p.aligned.cast()));
                        slots.push(Slot::I64(p.offset));
                        slots.extend(p.sizes.iter().map(|&s| Slot::I64(s)));
                        slots.extend(p.strides.iter().map(|&s| Slot::I64(s)));
                    }
                    if t.shape.is_none() {
                        let last = ranked.len() - 1;
                        slots.push(Slot::I64(p.sizes.len() as i64));
                        slots.push(Slot::Ptr(ranked[last].as_mut_ptr().cast()));
                    }
                }
                _ => {
                    if let Arg::Scalar(s) = &args[i] {
                        slots.push(Slot::scalar(*s));
                    }
                }
            }
        }
        let Some(cif) = &self.expanded_cif else {
            return Err(Error::Argument {
                index: 0,
                message: NO_COMPLEX_SCALARS.into(),
            });
        };
        let ffi_args: Vec<FfiArg> = slots.iter().map(Slot::arg).collect();
        // SAFETY: as in `call`; `ranked`'s inner buffers do not move (only
        // the outer Vec may grow, which moves the inner Vec headers, not their heap data).
        unsafe { cif.call::<()>(CodePtr(code), &ffi_args) };
        write_back(&prepared, args)
    }
}

/// Writes the row-major copies made for identity-layout parameters back to
/// their writable arguments. An error names an element the kernel changed both in a
/// copy and through another argument reaching the same buffer (to another value): one
/// of the two writes is lost, so the call did not do what it would on one array.
fn write_back(prepared: &[Option<Prepared<'_>>], args: &[Arg<'_>]) -> Result<(), Error> {
    let mut lost = None;
    for (index, (p, a)) in prepared.iter().zip(args).enumerate() {
        if let (Some(p), Arg::MemRef(m)) = (p, a) {
            if let (true, true, Some(copy)) = (p.gathered, m.writable, &p.copy) {
                let pristine = p
                    .pristine
                    .as_ref()
                    .map(|c| c.ptr().cast_const().cast::<u8>());
                // SAFETY: the copy (and the pristine one) hold the argument's elements
                // row-major (`gather` made them), and the argument is writable.
                let conflict = unsafe { m.scatter(copy.ptr().cast::<u8>(), pristine) };
                if let (None, Some(lin)) = (&lost, conflict) {
                    let byte = (m.aligned as usize as i128 - m.buffer.0 as i128)
                        + i128::from(lin) * m.elem.size() as i128;
                    lost = Some(Error::Argument {
                        index,
                        message: format!(
                            "the kernel wrote the element at byte {byte} of this argument's \
                             buffer both through its row-major copy (made for the \
                             identity-layout parameter) and through another argument \
                             reaching the same buffer, with different values: one write \
                             would be lost (pass the view to a strided parameter, or \
                             separate arrays)"
                        ),
                    });
                }
            }
        }
    }
    lost.map_or(Ok(()), Err)
}

fn prepare_memref<'a>(
    index: usize,
    m: &'a MemRefArg<'_>,
    t: &MemRefType,
    copy_strided: bool,
) -> Result<Prepared<'a>, Error> {
    match t.check(m.elem, m.offset, &m.sizes, &m.strides) {
        Ok(()) if m.writable => Ok(Prepared {
            aligned: m.aligned,
            offset: m.offset,
            sizes: &m.sizes,
            strides: std::borrow::Cow::Borrowed(&m.strides),
            copy: None,
            gathered: false,
            pristine: None,
            span: m.buffer,
        }),
        // A shared view: the kernel gets a copy of what it reaches, laid out alike.
        Ok(()) => {
            let (copy, offset, len) = m.copy_reachable()?;
            Ok(Prepared {
                aligned: copy.ptr().cast(),
                offset,
                sizes: &m.sizes,
                strides: std::borrow::Cow::Borrowed(&m.strides),
                span: (copy.ptr() as usize, len),
                copy: Some(copy),
                gathered: false,
                pristine: None,
            })
        }
        Err(Mismatch::Layout(_)) if copy_strided && t.accepts_row_major(&m.sizes) => {
            let copy = m.gather()?;
            let len = byte_len(m.elem, &m.sizes).unwrap_or(0);
            Ok(Prepared {
                aligned: copy.ptr().cast(),
                offset: 0,
                sizes: &m.sizes,
                strides: std::borrow::Cow::Owned(crate::signature::row_major(&m.sizes)),
                span: (copy.ptr() as usize, len),
                copy: Some(copy),
                gathered: true,
                pristine: None,
            })
        }
        Err(Mismatch::Layout(why)) => Err(Error::Argument {
            index,
            message: format!("{why} (pass a contiguous view, or ask for a copy)"),
        }),
        Err(e) => Err(Error::Argument {
            index,
            message: format!("{e} ({t})"),
        }),
    }
}

#[cfg(test)]
mod tests {
    //! `resolve` on descriptors made up here: pointers are only compared,
    //! and "freed" by a deallocator that records them.

    use std::cell::RefCell;

    use super::*;

    thread_local! {
        static FREED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    /// Records the pointer instead of freeing it.
    unsafe extern "C" fn record(p: *mut c_void) {
        FREED.with(|f| f.borrow_mut().push(p as usize));
    }

    fn freed() -> Vec<usize> {
        FREED.with(|f| std::mem::take(&mut *f.borrow_mut()))
    }

    fn options() -> CallOptions {
        // SAFETY: `record` frees nothing.
        unsafe { CallOptions::default().free_with(record) }
    }

    /// A rank-1 f32 result `{allocated, aligned, offset, [size], [1]}`.
    fn result(index: usize, allocated: usize, aligned: usize, offset: i64, size: i64) -> RawResult {
        RawResult {
            index,
            elem: ElemType::F32,
            allocated: allocated as *mut c_void,
            aligned: aligned as *mut c_void,
            offset,
            sizes: vec![size],
            strides: vec![1],
            unranked: false,
        }
    }

    /// Argument 3, 64 bytes at 0x10000.
    fn argument() -> Vec<(usize, (i128, i128), Option<Allocation>)> {
        vec![(3, (0x10000, 0x10040), None)]
    }

    fn origins(found: &[(Origin, Option<Allocation>)]) -> Vec<Origin> {
        found.iter().map(|(o, _)| *o).collect()
    }

    #[test]
    fn one_allocation_returned_twice_is_freed_once() {
        let rs = [
            result(0, 0x1000, 0x1000, 0, 4),
            result(1, 0x5000, 0x5000, 0, 4),
            result(2, 0x1000, 0x1000, 1, 3),
        ];
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert_eq!(origins(&found), [Origin::Fresh; 3]);
        let guards: Vec<&Allocation> = found.iter().filter_map(|(_, g)| g.as_ref()).collect();
        assert_eq!(guards.len(), 3);
        assert!(guards[0] == guards[2] && guards[0] != guards[1]);
        assert_eq!((guards[0].holders(), guards[1].holders()), (2, 1));
        let mut found = found;
        found.remove(0);
        assert_eq!(freed(), [0usize; 0]);
        found.remove(0);
        assert_eq!(freed(), [0x5000]);
        drop(found);
        assert_eq!(freed(), [0x1000]);
    }

    #[test]
    fn results_joined_by_bytes_or_pointers() {
        // The second (null allocated pointer) has its aligned pointer in the
        // first's bytes: one allocation, freed once.
        let rs = [result(0, 0x1000, 0x1000, 0, 16), result(1, 0, 0x1020, 0, 8)];
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert!(found
            .iter()
            .all(|(_, g)| g.as_ref().map(Allocation::ptr) == Some(0x1000 as *mut c_void)));
        drop(found);
        assert_eq!(freed(), [0x1000]);
        // Empty results are joined by their allocated pointers alone.
        let rs = [
            result(0, 0x2000, 0x2000, 0, 0),
            result(1, 0x2000, 0x2000, 0, 0),
        ];
        drop(resolve(&rs, &argument(), &options()).unwrap());
        assert_eq!(freed(), [0x2000]);
    }

    #[test]
    fn results_in_an_argument_are_never_freed() {
        let rs = [
            // The argument itself, a subview (aligned inside), bytes reaching
            // into it from below, and a result joined to the subview.
            result(0, 0x10000, 0x10000, 0, 16),
            result(1, 0x7000, 0x10000, 4, 4),
            result(2, 0x7000, 0xfff0, 0, 8),
            result(3, 0x20000, 0x20000, 0, 2),
            result(4, 0x20000, 0x10020, 0, 1),
            // A global, and a fresh buffer.
            result(5, GLOBAL, 0x8000, 0, 4),
            result(6, 0x30000, 0x30000, 0, 4),
        ];
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert_eq!(
            origins(&found),
            [
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Global,
                Origin::Fresh,
            ]
        );
        assert!(found[..6].iter().all(|(_, g)| g.is_none()));
        drop(found);
        assert_eq!(freed(), [0x30000]);
        // A copy made for the call is kept alive by the results in it.
        let copy = Allocation::zeroed(64).unwrap();
        let start = copy.ptr() as usize as i128;
        let args = [(0, (start, start + 64), Some(copy.clone()))];
        let a = copy.ptr() as usize;
        let found = resolve(&[result(0, a, a, 2, 2)], &args, &options()).unwrap();
        assert_eq!(found[0].0, Origin::Argument(0));
        assert!(found[0].1.as_ref() == Some(&copy));
        assert_eq!(copy.holders(), 3);
    }

    #[test]
    fn borrowed_results_and_null_pointers_are_not_freed() {
        let rs = [result(0, 0x1000, 0x1000, 0, 4), result(1, 0, 0, 0, 0)];
        let found = resolve(&rs, &argument(), &options().borrow_results(true)).unwrap();
        assert_eq!(origins(&found), [Origin::Kept, Origin::Kept]);
        drop(found);
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert_eq!(origins(&found), [Origin::Fresh, Origin::Fresh]);
        assert!(found[1].1.is_none());
        drop(found);
        assert_eq!(freed(), [0x1000]);
    }

    #[test]
    fn overlapping_results_with_two_allocated_pointers_are_refused() {
        // Bytes overlapping, or an allocated pointer in the other's bytes.
        for second in [
            result(1, 0x2000, 0x1010, 0, 8),
            result(1, 0x1010, 0x2000, 0, 8),
        ] {
            let rs = [result(0, 0x1000, 0x1000, 0, 8), second];
            let err = resolve(&rs, &argument(), &options()).unwrap_err();
            assert!(
                matches!(&err, Error::Result { index: 1, message } if message.contains("which one to free")),
                "{err}"
            );
        }
        let rs = [
            result(0, 0x1000, 0x1000, 0, 8),
            result(1, 0x2000, 0x1010, 0, 8),
        ];
        assert_eq!(freed(), [0usize; 0]);
        // Nothing is freed when borrowed, so nothing is ambiguous.
        assert!(resolve(&rs, &argument(), &options().borrow_results(true)).is_ok());
    }

    const GLOBAL: usize = crate::owned::GLOBAL_ALLOCATED;
}
