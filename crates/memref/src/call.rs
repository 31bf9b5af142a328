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

use crate::owned::{libc_free, reachable, FreeFn, Ownership};
use crate::signature::{ElemType, MemRefType, Mismatch, Signature, Type};
use crate::{Element, MemRefError, MemRefView, MemRefViewMut};

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
    /// Opens a shared library.
    ///
    /// # Safety
    ///
    /// Opening a library runs its initializers: it must be one built to be
    /// loaded into this process (as [`crate::compile`] builds them).
    pub unsafe fn open(path: &Path) -> Result<Library, MemRefError> {
        let shown = path.display().to_string();
        // A bare file name would be searched for in the system's paths.
        let full = if path.components().count() == 1 {
            Path::new(".").join(path)
        } else {
            path.to_path_buf()
        };
        // SAFETY: the caller vouches for the library's initializers.
        let lib = unsafe { libloading::Library::new(&full) }.map_err(|e| MemRefError::Library {
            what: shown.clone(),
            message: e.to_string(),
        })?;
        Ok(Library { lib, path: shown })
    }

    /// The path the library was opened from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The address of `symbol`.
    pub fn address(&self, symbol: &str) -> Result<*mut c_void, MemRefError> {
        // SAFETY: the symbol is only read as an address, never as a value.
        let sym = unsafe { self.lib.get::<*mut c_void>(symbol.as_bytes()) };
        match sym {
            Ok(s) => {
                // SAFETY: `Symbol<*mut c_void>` derefs to the symbol's address.
                let p = unsafe { s.try_as_raw_ptr() }.unwrap_or(std::ptr::null_mut());
                if p.is_null() {
                    Err(MemRefError::Library {
                        what: symbol.to_string(),
                        message: format!("symbol is null in {}", self.path),
                    })
                } else {
                    Ok(p)
                }
            }
            Err(e) => Err(MemRefError::Library {
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
    pub unsafe fn ciface<F: Copy>(&self, name: &str) -> Result<F, MemRefError> {
        // SAFETY: forwarded.
        unsafe { self.typed(&format!("_mlir_ciface_{name}")) }
    }

    /// The symbol `name` as a function pointer of type `F` (for the expanded
    /// convention: memrefs as `allocated, aligned, offset, sizes.., strides..`).
    ///
    /// # Safety
    ///
    /// As for [`Library::ciface`], with the function's real type.
    pub unsafe fn typed<F: Copy>(&self, symbol: &str) -> Result<F, MemRefError> {
        if std::mem::size_of::<F>() != std::mem::size_of::<*mut c_void>() {
            return Err(MemRefError::Library {
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
    pub unsafe fn function(
        &self,
        name: &str,
        signature: Signature,
    ) -> Result<Function<'_>, MemRefError> {
        let ciface = self.address(&format!("_mlir_ciface_{name}")).ok();
        let expanded = self.address(name).ok();
        if ciface.is_none() && expanded.is_none() {
            return Err(MemRefError::Library {
                what: format!("_mlir_ciface_{name}"),
                message: format!("neither it nor `{name}` is in {}", self.path),
            });
        }
        let ciface_cif = ciface.and_then(|_| ciface_cif(&signature));
        let expanded_cif = expanded.and_then(|_| expanded_cif(&signature));
        Ok(Function {
            name: name.to_string(),
            signature,
            ciface,
            expanded,
            ciface_cif,
            expanded_cif,
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
}

impl Scalar {
    /// Its MLIR type.
    pub fn elem(&self) -> ElemType {
        match self {
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

    /// Parses `text` as a value of type `elem` (`true`/`false`/`0`/`1` for `i1`).
    pub fn parse(elem: ElemType, text: &str) -> Option<Scalar> {
        let t = text.trim();
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
            ElemType::F16 => return None,
        })
    }

    /// Reads a value of type `elem` from the start of `bytes` (native endianness).
    fn read(elem: ElemType, bytes: &[u8]) -> Option<Scalar> {
        let get = |n: usize| bytes.get(..n);
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
            ElemType::F16 => return None,
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
        }
    }
}

/// A memref argument for a dynamic call: a borrowed view, type-erased.
#[derive(Debug)]
pub struct MemRefArg<'a> {
    elem: ElemType,
    aligned: *mut u8,
    offset: i64,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    writable: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> MemRefArg<'a> {
    /// A read-only argument from a shared view. The callee must not write
    /// through it (a kernel writing an input is a wrong signature for this view).
    pub fn from_view<T: Element, const N: usize>(view: &MemRefView<'a, T, N>) -> Self {
        Self::from_descriptor(&view.to_descriptor(), false)
    }

    /// A writable argument from a mutable view (borrowed for the call).
    pub fn from_view_mut<T: Element, const N: usize>(
        view: &'a mut MemRefViewMut<'_, T, N>,
    ) -> Self {
        Self::from_descriptor(&view.to_descriptor(), true)
    }

    /// The argument for a descriptor made from a checked view (the caller
    /// holds the view's borrow for `'a`).
    fn from_descriptor<T: Element, const N: usize>(
        d: &crate::MemRefDescriptor<T, N>,
        writable: bool,
    ) -> Self {
        MemRefArg {
            elem: T::TYPE,
            aligned: d.aligned.cast(),
            offset: d.offset,
            sizes: d.sizes.to_vec(),
            strides: d.strides.to_vec(),
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
    ) -> Result<Self, MemRefError> {
        if let Some(dim) = sizes.iter().position(|&s| s < 0) {
            return Err(MemRefError::NegativeSize {
                dim,
                size: sizes[dim],
            });
        }
        if byte_len(elem, sizes) != Some(bytes.len()) {
            return Err(MemRefError::Buffer {
                message: format!(
                    "{} bytes do not hold sizes {sizes:?} of {elem}",
                    bytes.len()
                ),
            });
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(elem.size()) {
            return Err(MemRefError::Buffer {
                message: format!("{:p} is not aligned for {elem}", bytes.as_ptr()),
            });
        }
        Ok(MemRefArg {
            elem,
            aligned: bytes.as_mut_ptr(),
            offset: 0,
            strides: crate::signature::row_major(sizes),
            sizes: sizes.to_vec(),
            writable: true,
            _borrow: PhantomData,
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

    /// The data pointer (`aligned`; also passed as `allocated`).
    pub fn data_ptr(&self) -> *mut u8 {
        self.aligned
    }

    /// Copies the elements in row-major order into a fresh 8-byte-aligned buffer.
    fn gather(&self) -> Result<Vec<u64>, MemRefError> {
        let esz = self.elem.size();
        // Construction checked the sizes against a buffer, so this fits.
        let nbytes = byte_len(self.elem, &self.sizes).ok_or(MemRefError::Overflow { dim: 0 })?;
        let mut out = vec![0u64; nbytes.div_ceil(8)];
        let dst = out.as_mut_ptr().cast::<u8>();
        let mut k = 0usize;
        for_each_linear(&self.sizes, &self.strides, self.offset, |lin| {
            // SAFETY: construction checked every reachable element is in the view's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.aligned.offset(lin as isize * esz as isize),
                    dst.add(k * esz),
                    esz,
                )
            };
            k += 1;
        });
        Ok(out)
    }

    /// Writes row-major `data` back through the strides.
    fn scatter(&self, data: &[u64]) {
        let esz = self.elem.size();
        let src = data.as_ptr().cast::<u8>();
        let mut k = 0usize;
        for_each_linear(&self.sizes, &self.strides, self.offset, |lin| {
            // SAFETY: as in `gather`; the argument is writable (checked by the caller).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.add(k * esz),
                    self.aligned.offset(lin as isize * esz as isize),
                    esz,
                )
            };
            k += 1;
        });
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
#[derive(Clone, Copy, Debug)]
pub struct CallOptions {
    /// Who frees returned memrefs.
    pub ownership: Ownership,
    /// Copy a strided view given to an identity-layout parameter into a
    /// contiguous buffer (and back after the call, if writable) instead of
    /// refusing it.
    pub copy_strided: bool,
    /// The deallocator for owned results.
    pub free: FreeFn,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            ownership: Ownership::Owned,
            copy_strided: false,
            free: libc_free(),
        }
    }
}

/// A memref returned by a dynamic call, any rank, with its ownership.
#[derive(Debug)]
pub struct ReturnedMemRef {
    /// Position among the call's results, for errors.
    index: usize,
    elem: ElemType,
    allocated: *mut c_void,
    aligned: *mut c_void,
    offset: i64,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    heap_descriptor: Option<*mut c_void>,
    ownership: Ownership,
    free: FreeFn,
}

impl ReturnedMemRef {
    /// Element type.
    pub fn elem(&self) -> ElemType {
        self.elem
    }
    /// Rank.
    pub fn rank(&self) -> usize {
        self.sizes.len()
    }
    /// Sizes.
    pub fn sizes(&self) -> &[i64] {
        &self.sizes
    }
    /// Strides.
    pub fn strides(&self) -> &[i64] {
        &self.strides
    }
    /// Offset.
    pub fn offset(&self) -> i64 {
        self.offset
    }
    /// The allocated pointer (what an owned result frees).
    pub fn allocated(&self) -> *mut c_void {
        self.allocated
    }
    /// The aligned pointer (what accesses are based on).
    pub fn aligned(&self) -> *mut c_void {
        self.aligned
    }
    /// Whether it came back unranked (with a heap descriptor).
    pub fn was_unranked(&self) -> bool {
        self.heap_descriptor.is_some()
    }
    /// Its ownership.
    pub fn ownership(&self) -> Ownership {
        self.ownership
    }
    /// Stops owning: nothing will be freed (for results found to alias an
    /// argument or a global).
    pub fn disown(&mut self) {
        self.ownership = Ownership::Borrowed;
    }

    /// Whether the data lies in `[start, start + len)` bytes, i.e. the result
    /// aliases that buffer.
    pub fn points_into(&self, start: *const u8, len: usize) -> bool {
        let (a, start) = (self.aligned as usize, start as usize);
        a >= start && a < start.saturating_add(len.max(1))
    }

    /// The elements in row-major order as native-endian bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, MemRefError> {
        let esz = self.elem.size();
        // Also refuses negative sizes, before they are counted below.
        if reachable(self.offset, &self.sizes, &self.strides)?.is_some() && self.aligned.is_null() {
            return Err(MemRefError::NullDescriptor);
        }
        // The sizes come from compiled code: a broadcast (stride 0) memref may
        // name more elements than memory holds, so count and reserve fallibly.
        let too_large = || MemRefError::Result {
            index: self.index,
            message: format!(
                "sizes {:?} of {} are too large to copy",
                self.sizes, self.elem
            ),
        };
        let nbytes = byte_len(self.elem, &self.sizes).ok_or_else(too_large)?;
        let mut out = Vec::new();
        out.try_reserve_exact(nbytes).map_err(|_| too_large())?;
        let base = self.aligned.cast::<u8>();
        for_each_linear(&self.sizes, &self.strides, self.offset, |lin| {
            // SAFETY: the callee's signature promises a valid memref of this type.
            let p = unsafe { base.offset(lin as isize * esz as isize) };
            // SAFETY: as above.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, esz) });
        });
        Ok(out)
    }

    /// A checked typed view of the result.
    pub fn view<T: Element, const N: usize>(&self) -> Result<MemRefView<'_, T, N>, MemRefError> {
        if T::TYPE != self.elem || N != self.sizes.len() {
            return Err(MemRefError::Result {
                index: self.index,
                message: format!(
                    "is memref of rank {} of {}, asked for rank {N} of {}",
                    self.sizes.len(),
                    self.elem,
                    T::TYPE
                ),
            });
        }
        let mut sizes = [0i64; N];
        let mut strides = [0i64; N];
        sizes.copy_from_slice(&self.sizes);
        strides.copy_from_slice(&self.strides);
        let d = crate::MemRefDescriptor::new(
            self.allocated.cast::<T>(),
            self.aligned.cast::<T>(),
            self.offset,
            sizes,
            strides,
        );
        // SAFETY: the memory is valid while `self` lives (it frees only on drop).
        unsafe { crate::owned::view_from_descriptor(&d) }
    }
}

impl Drop for ReturnedMemRef {
    fn drop(&mut self) {
        if self.ownership != Ownership::Owned {
            return;
        }
        if crate::owned::freeable(self.allocated) {
            // SAFETY: owned by the caller's statement at the call; `free` is its allocator.
            unsafe { (self.free)(self.allocated) };
        }
        if let Some(h) = self.heap_descriptor {
            // SAFETY: the unranked result's heap descriptor belongs to the caller.
            unsafe { (self.free)(h) };
        }
    }
}

/// A result of a dynamic call.
#[derive(Debug)]
pub enum Value {
    /// A scalar.
    Scalar(Scalar),
    /// A memref.
    MemRef(ReturnedMemRef),
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
/// it has an `f16` scalar (libffi has no half type).
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
        ElemType::F16 => return None,
    })
}

/// Size and alignment of a result field in the C wrapper's result struct.
fn field_layout(t: &Type) -> (usize, usize) {
    match t {
        Type::Scalar(e) => (e.size(), e.size()),
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
    copy: Option<Vec<u64>>,
}

impl Function<'_> {
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
    ) -> Result<Vec<Option<Prepared<'a>>>, MemRefError> {
        self.signature.check_arity(args.len())?;
        let mut out = Vec::with_capacity(args.len());
        for (index, (arg, ty)) in args.iter().zip(&self.signature.inputs).enumerate() {
            match (arg, ty) {
                (Arg::Scalar(s), Type::Scalar(e)) => {
                    if s.elem() != *e {
                        return Err(MemRefError::Argument {
                            index,
                            message: format!(
                                "scalar of type {}, the signature wants {e}",
                                s.elem()
                            ),
                        });
                    }
                    if *e == ElemType::F16 {
                        return Err(MemRefError::Argument {
                            index,
                            message: "f16 scalars cannot be passed in dynamic calls".into(),
                        });
                    }
                    out.push(None);
                }
                (Arg::MemRef(m), Type::MemRef(t)) => {
                    out.push(Some(prepare_memref(index, m, t, copy_strided)?))
                }
                (Arg::Scalar(s), Type::MemRef(t)) => {
                    return Err(MemRefError::Argument {
                        index,
                        message: format!("scalar {} given, the signature wants {t}", s.elem()),
                    })
                }
                (Arg::MemRef(m), Type::Scalar(e)) => {
                    return Err(MemRefError::Argument {
                        index,
                        message: format!(
                            "memref of {} given, the signature wants scalar {e}",
                            m.elem
                        ),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Calls `_mlir_ciface_NAME` with checked arguments; returns the results in order.
    pub fn call(
        &self,
        args: &mut [Arg<'_>],
        options: CallOptions,
    ) -> Result<Vec<Value>, MemRefError> {
        let Some(code) = self.ciface else {
            return Err(MemRefError::Library {
                what: format!("_mlir_ciface_{}", self.name),
                message: "not in the library (compile with C wrappers requested)".into(),
            });
        };
        for (index, t) in self.signature.results.iter().enumerate() {
            if let Type::Scalar(ElemType::F16) = t {
                return Err(MemRefError::Result {
                    index,
                    message: "f16 scalar results are not supported in dynamic calls".into(),
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
        let mut offsets = Vec::new();
        let mut size = 0usize;
        for t in results {
            let (s, a) = field_layout(t);
            size = size.next_multiple_of(a);
            offsets.push(size);
            size += s;
        }
        let mut result_buf = vec![0u64; size.div_ceil(8).max(1)];
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
            return Err(MemRefError::Argument {
                index: 0,
                message: "f16 scalars cannot be passed in dynamic calls".into(),
            });
        };
        let ffi_args: Vec<FfiArg> = slots.iter().map(Slot::arg).collect();
        // SAFETY: `Library::function`'s contract makes the signature the
        // function's type; the cif follows the C wrapper's convention for it;
        // every pointer passed points to storage alive until after the call.
        // libffi writes at most a full register (8 bytes) of return value.
        let ret: [u64; 2] = unsafe { cif.call(CodePtr(code), &ffi_args) };
        // Copies made for identity-layout callees go back to writable views.
        for (p, a) in prepared.iter().zip(args.iter()) {
            if let (Some(Prepared { copy: Some(c), .. }), Arg::MemRef(m)) = (p, a) {
                if m.writable {
                    m.scatter(c);
                }
            }
        }
        let mut values = Vec::with_capacity(results.len());
        if !struct_result {
            if let Some(Type::Scalar(e)) = results.first() {
                let bytes: Vec<u8> = ret.iter().flat_map(|w| w.to_ne_bytes()).collect();
                let s = Scalar::read(*e, &bytes).ok_or(MemRefError::Result {
                    index: 0,
                    message: format!("cannot read a {e}"),
                })?;
                values.push(Value::Scalar(s));
            }
            return Ok(values);
        }
        let bytes: &[u8] = {
            let p = result_buf.as_ptr().cast::<u8>();
            // SAFETY: the buffer's own bytes.
            unsafe { std::slice::from_raw_parts(p, result_buf.len() * 8) }
        };
        for (index, (t, &off)) in results.iter().zip(&offsets).enumerate() {
            let field = &bytes[off..];
            let word = |k: usize| -> i64 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&field[8 * k..8 * k + 8]);
                i64::from_ne_bytes(w)
            };
            match t {
                Type::Scalar(e) => {
                    let s = Scalar::read(*e, field).ok_or(MemRefError::Result {
                        index,
                        message: format!("cannot read a {e}"),
                    })?;
                    values.push(Value::Scalar(s));
                }
                Type::MemRef(m) => {
                    let (words, heap) = match m.rank() {
                        Some(r) => ((0..3 + 2 * r).map(word).collect::<Vec<i64>>(), None),
                        None => {
                            let rank = word(0);
                            let heap = word(1) as *mut c_void;
                            if heap.is_null() || !(0..=64).contains(&rank) {
                                return Err(MemRefError::Result {
                                    index,
                                    message: format!(
                                        "unranked result has rank {rank} and descriptor {heap:?}"
                                    ),
                                });
                            }
                            let n = 3 + 2 * rank as usize;
                            // SAFETY: an unranked result points to a heap ranked descriptor of `rank`.
                            let w = unsafe { std::slice::from_raw_parts(heap.cast::<i64>(), n) }
                                .to_vec();
                            (w, Some(heap))
                        }
                    };
                    let r = (words.len() - 3) / 2;
                    values.push(Value::MemRef(ReturnedMemRef {
                        index,
                        elem: m.elem,
                        allocated: words[0] as *mut c_void,
                        aligned: words[1] as *mut c_void,
                        offset: words[2],
                        sizes: words[3..3 + r].to_vec(),
                        strides: words[3 + r..3 + 2 * r].to_vec(),
                        heap_descriptor: heap,
                        ownership: options.ownership,
                        free: options.free,
                    }));
                }
            }
        }
        Ok(values)
    }

    /// Calls the function itself in the expanded convention (each memref as
    /// `allocated, aligned, offset, sizes.., strides..`; unranked as `rank,
    /// descriptor pointer`). Only for functions without results: results
    /// come back as an LLVM struct, which does not follow the C ABI.
    pub fn call_expanded(
        &self,
        args: &mut [Arg<'_>],
        copy_strided: bool,
    ) -> Result<(), MemRefError> {
        if !self.signature.results.is_empty() {
            return Err(MemRefError::Result {
                index: 0,
                message: "results are only taken through _mlir_ciface_ wrappers: LLVM struct \
                          returns of the expanded form do not follow the platform C ABI"
                    .into(),
            });
        }
        let Some(code) = self.expanded else {
            return Err(MemRefError::Library {
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
            return Err(MemRefError::Argument {
                index: 0,
                message: "f16 scalars cannot be passed in dynamic calls".into(),
            });
        };
        let ffi_args: Vec<FfiArg> = slots.iter().map(Slot::arg).collect();
        // SAFETY: as in `call`; `ranked`'s inner buffers do not move (only
        // the outer Vec may grow, which moves the inner Vec headers, not their heap data).
        unsafe { cif.call::<()>(CodePtr(code), &ffi_args) };
        for (p, a) in prepared.iter().zip(args.iter()) {
            if let (Some(Prepared { copy: Some(c), .. }), Arg::MemRef(m)) = (p, a) {
                if m.writable {
                    m.scatter(c);
                }
            }
        }
        Ok(())
    }
}

fn prepare_memref<'a>(
    index: usize,
    m: &'a MemRefArg<'_>,
    t: &MemRefType,
    copy_strided: bool,
) -> Result<Prepared<'a>, MemRefError> {
    match t.check(m.elem, m.offset, &m.sizes, &m.strides) {
        Ok(()) => Ok(Prepared {
            aligned: m.aligned,
            offset: m.offset,
            sizes: &m.sizes,
            strides: std::borrow::Cow::Borrowed(&m.strides),
            copy: None,
        }),
        Err(Mismatch::Layout(_)) if copy_strided && t.accepts_row_major(&m.sizes) => {
            let mut copy = m.gather()?;
            Ok(Prepared {
                aligned: copy.as_mut_ptr().cast(),
                offset: 0,
                sizes: &m.sizes,
                strides: std::borrow::Cow::Owned(crate::signature::row_major(&m.sizes)),
                copy: Some(copy),
            })
        }
        Err(Mismatch::Layout(why)) => Err(MemRefError::Argument {
            index,
            message: format!("{why} (pass a contiguous view, or ask for a copy)"),
        }),
        Err(e) => Err(MemRefError::Argument {
            index,
            message: format!("{e} ({t})"),
        }),
    }
}
