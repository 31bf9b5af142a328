//! Arguments: scalars and memrefs as a call takes them, checked against the signature and
//! prepared (copied where the kernel needs another layout, written back after).

use std::marker::PhantomData;

use crate::float::{Format, SmallFloat};
use crate::owned::{reachable, Allocation};
use crate::signature::{ElemType, MemRefType, Mismatch};
use crate::slice::Slicing;
use crate::{Element, Error, MemRefView, MemRefViewMut};

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
    /// narrow floats a decimal, read as an `f64` and that rounded to nearest even, as
    /// numpy's `np.float16('..')` and MLIR's own parser do, so a decimal within an `f64`'s
    /// precision of a tie may round the other way than the decimal itself would; or the
    /// bits as `0x` hex). Complex scalars are not parsed.
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
    pub(super) fn read(elem: ElemType, bytes: &[u8]) -> Option<Scalar> {
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
    pub(super) elem: ElemType,
    aligned: *mut u8,
    offset: i64,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    /// The whole buffer borrowed, as (start address, length in bytes): what
    /// a result pointing into it aliases.
    pub(super) buffer: (usize, usize),
    /// Whether the kernel may write through it; a shared view is copied for
    /// each call instead.
    pub(super) writable: bool,
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
    pub fn from_bytes(elem: ElemType, bytes: &'a mut [u8], sizes: &[i64]) -> Result<Self, Error> {
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
    /// with [`MemRefArg::sliced`]; a row-major slice at an offset reaches an identity-layout
    /// parameter without a copy. A row-major copy made for an identity-layout parameter
    /// ([`CallOptions::copy_strided`](super::CallOptions::copy_strided)) is not the same
    /// memory: through it the kernel reads the buffer as it was before the call (numpy's
    /// `a += a.T` copies the overlapping operand alike), and it is written back only
    /// where the kernel changed it; an element changed both through it and otherwise is
    /// an error. For the kernel's loops on one memory, declare such a parameter strided.
    ///
    /// # Safety
    ///
    /// The argument and every alias of it must go to one call
    /// ([`Function::call`](super::Function::call) or
    /// [`Function::call_expanded`](super::Function::call_expanded)), or be dropped unused: a
    /// result of a call may be a
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
pub(super) fn byte_len(elem: ElemType, sizes: &[i64]) -> Option<usize> {
    sizes
        .iter()
        .try_fold(elem.size(), |n, &s| n.checked_mul(usize::try_from(s).ok()?))
}

/// Calls `f` with the linear index of every element, row-major.
pub(super) fn for_each_linear(sizes: &[i64], strides: &[i64], offset: i64, mut f: impl FnMut(i64)) {
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

/// A prepared memref argument: where its data is, and a copy if one was made.
pub(super) struct Prepared<'a> {
    pub(super) aligned: *mut u8,
    pub(super) offset: i64,
    pub(super) sizes: &'a [i64],
    pub(super) strides: std::borrow::Cow<'a, [i64]>,
    /// The copy the kernel gets instead of the argument's buffer.
    pub(super) copy: Option<Allocation>,
    /// Whether the copy is row-major (made for an identity-layout
    /// parameter), to be written back to a writable argument.
    pub(super) gathered: bool,
    /// For a gathered copy of a buffer another argument also reaches: the elements as
    /// the kernel got them, so only what it changed in the copy is written back.
    pub(super) pristine: Option<Allocation>,
    /// Where the kernel's data is: (start address, length in bytes).
    pub(super) span: (usize, usize),
}

impl<'a> Prepared<'a> {
    /// `m`'s own buffer, no copy, its first element at `aligned` + `offset` elements.
    fn in_place(m: &'a MemRefArg<'_>, aligned: *mut u8, offset: i64) -> Prepared<'a> {
        Prepared {
            aligned,
            offset,
            sizes: &m.sizes,
            strides: std::borrow::Cow::Borrowed(&m.strides),
            copy: None,
            gathered: false,
            pristine: None,
            span: m.buffer,
        }
    }
}

/// Writes the row-major copies made for identity-layout parameters back to
/// their writable arguments. An error names an element the kernel changed both in a
/// copy and through another argument reaching the same buffer (to another value): one
/// of the two writes is lost, so the call did not do what it would on one array.
pub(super) fn write_back(prepared: &[Option<Prepared<'_>>], args: &[Arg<'_>]) -> Result<(), Error> {
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

pub(super) fn prepare_memref<'a>(
    index: usize,
    m: &'a MemRefArg<'_>,
    t: &MemRefType,
    copy_strided: bool,
) -> Result<Prepared<'a>, Error> {
    match t.check(m.elem, m.offset, &m.sizes, &m.strides) {
        Ok(()) if m.writable => Ok(Prepared::in_place(m, m.aligned, m.offset)),
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
        // A row-major view at an offset, for an identity layout (which reads no offset):
        // the aligned pointer moved to its first element, so it needs no copy and stays
        // one memory with the other arguments reaching its buffer.
        Err(Mismatch::Layout(_))
            if m.writable && t.check(m.elem, 0, &m.sizes, &m.strides).is_ok() =>
        {
            let byte = i128::from(m.offset) * m.elem.size() as i128;
            let aligned = isize::try_from(byte)
                .ok()
                .map(|b| m.aligned.wrapping_offset(b))
                .ok_or(Error::Overflow { dim: 0 })?;
            Ok(Prepared::in_place(m, aligned, 0))
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
