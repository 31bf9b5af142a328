//! Reading and writing NumPy `.npy` files (format versions 1, 2 and 3).
//!
//! Supported dtypes: `f2 f4 f8 c8 c16 i1 i2 i4 i8 u1 u2 u4 u8 b1`, little- or
//! big-endian (big-endian files are swapped to native order on reading; files
//! are written little-endian), and the narrow floats by the names numpy's
//! `ml_dtypes` gives them: `bfloat16`, `float8_e5m2`, `float8_e4m3`,
//! `float8_e4m3fn`, `float8_e5m2fnuz`, `float8_e4m3fnuz`, `float8_e4m3b11fnuz`. numpy
//! itself saves `ml_dtypes` arrays with dtypes that name only a size (`'<V2'`, `'<V1'`,
//! `'<f1'`): [`NpyArray::parse_as`] reads them as the type the caller names, and writes
//! them back as they were.
//! C or Fortran order. Data is kept in a 64-byte-aligned buffer in **C
//! order**: a Fortran-order file is reordered on reading, so it can be passed
//! to an identity-layout kernel.

use std::io::Write;

use crate::signature::ElemType;
use crate::Error;

const MAGIC: &[u8] = b"\x93NUMPY";

/// A `.npy` element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `<f2`
    F16,
    /// `<f4`
    F32,
    /// `<f8`
    F64,
    /// `|i1`
    I8,
    /// `<i2`
    I16,
    /// `<i4`
    I32,
    /// `<i8`
    I64,
    /// `|u1`
    U8,
    /// `<u2`
    U16,
    /// `<u4`
    U32,
    /// `<u8`
    U64,
    /// `|b1`
    Bool,
    /// `bfloat16` (`ml_dtypes`)
    BF16,
    /// `float8_e5m2` (`ml_dtypes`)
    F8E5M2,
    /// `float8_e4m3` (`ml_dtypes`)
    F8E4M3,
    /// `float8_e4m3fn` (`ml_dtypes`)
    F8E4M3FN,
    /// `float8_e5m2fnuz` (`ml_dtypes`)
    F8E5M2FNUZ,
    /// `float8_e4m3fnuz` (`ml_dtypes`)
    F8E4M3FNUZ,
    /// `float8_e4m3b11fnuz` (`ml_dtypes`)
    F8E4M3B11FNUZ,
    /// `<c8`: complex64
    C64,
    /// `<c16`: complex128
    C128,
}

/// Every dtype, for looking one up by its descr.
const ALL: [Dtype; 21] = [
    Dtype::F16,
    Dtype::F32,
    Dtype::F64,
    Dtype::I8,
    Dtype::I16,
    Dtype::I32,
    Dtype::I64,
    Dtype::U8,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
    Dtype::Bool,
    Dtype::BF16,
    Dtype::F8E5M2,
    Dtype::F8E4M3,
    Dtype::F8E4M3FN,
    Dtype::F8E5M2FNUZ,
    Dtype::F8E4M3FNUZ,
    Dtype::F8E4M3B11FNUZ,
    Dtype::C64,
    Dtype::C128,
];

impl Dtype {
    /// The descr string written to files.
    pub fn descr(self) -> &'static str {
        match self {
            Dtype::F16 => "<f2",
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
            Dtype::I8 => "|i1",
            Dtype::I16 => "<i2",
            Dtype::I32 => "<i4",
            Dtype::I64 => "<i8",
            Dtype::U8 => "|u1",
            Dtype::U16 => "<u2",
            Dtype::U32 => "<u4",
            Dtype::U64 => "<u8",
            Dtype::Bool => "|b1",
            Dtype::BF16 => "bfloat16",
            Dtype::F8E5M2 => "float8_e5m2",
            Dtype::F8E4M3 => "float8_e4m3",
            Dtype::F8E4M3FN => "float8_e4m3fn",
            Dtype::F8E5M2FNUZ => "float8_e5m2fnuz",
            Dtype::F8E4M3FNUZ => "float8_e4m3fnuz",
            Dtype::F8E4M3B11FNUZ => "float8_e4m3b11fnuz",
            Dtype::C64 => "<c8",
            Dtype::C128 => "<c16",
        }
    }

    /// The bytes swapped to change the byte order: an element, or each part of a
    /// complex number; 1 when there is nothing to swap.
    fn swap_unit(self) -> usize {
        match self {
            Dtype::C64 => 4,
            Dtype::C128 => 8,
            other => other.size(),
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        self.elem().size()
    }

    /// The dtype a descr names, and whether its data is big-endian.
    fn from_descr(d: &str) -> Option<(Dtype, bool)> {
        if let Some(named) = Dtype::from_ml_name(d) {
            return Some((named, false));
        }
        // Every other supported descr is ASCII; this also keeps `split_at` on a char boundary.
        if !d.is_ascii() {
            return None;
        }
        let (order, code) = d.split_at(d.find(|c: char| c.is_ascii_alphabetic())?);
        let dtype = *ALL
            .iter()
            .find(|t| t.descr().starts_with(['<', '|']) && t.descr().get(1..) == Some(code))?;
        let big = match order {
            "<" | "" => false,
            ">" => true,
            "=" => cfg!(target_endian = "big"),
            "|" if dtype.swap_unit() == 1 => false,
            _ => return None,
        };
        Some((dtype, big && dtype.swap_unit() > 1))
    }

    /// The MLIR element type with this size and kind (integers are signless).
    pub fn elem(self) -> ElemType {
        match self {
            Dtype::F16 => ElemType::F16,
            Dtype::F32 => ElemType::F32,
            Dtype::F64 => ElemType::F64,
            Dtype::I8 | Dtype::U8 => ElemType::I8,
            Dtype::I16 | Dtype::U16 => ElemType::I16,
            Dtype::I32 | Dtype::U32 => ElemType::I32,
            Dtype::I64 | Dtype::U64 => ElemType::I64,
            Dtype::Bool => ElemType::I1,
            Dtype::BF16 => ElemType::BF16,
            Dtype::F8E5M2 => ElemType::F8E5M2,
            Dtype::F8E4M3 => ElemType::F8E4M3,
            Dtype::F8E4M3FN => ElemType::F8E4M3FN,
            Dtype::F8E5M2FNUZ => ElemType::F8E5M2FNUZ,
            Dtype::F8E4M3FNUZ => ElemType::F8E4M3FNUZ,
            Dtype::F8E4M3B11FNUZ => ElemType::F8E4M3B11FNUZ,
            Dtype::C64 => ElemType::ComplexF32,
            Dtype::C128 => ElemType::ComplexF64,
        }
    }

    /// Whether a memref of `elem` can be read from or written as this dtype
    /// (`index` is stored as 64-bit integers).
    pub fn fits(self, elem: ElemType) -> bool {
        // A vector element is its lanes, one more dimension of the array.
        let (elem, _) = elem.scalar_and_lanes();
        self.elem() == elem || (elem == ElemType::Index && matches!(self, Dtype::I64 | Dtype::U64))
    }

    /// The types of `ml_dtypes`, each named by its descr (not a numpy type code).
    pub fn ml_dtypes() -> impl Iterator<Item = Dtype> {
        ALL.into_iter()
            .filter(|d| !d.descr().starts_with(['<', '|']))
    }

    /// The `ml_dtypes` type of this name (`bfloat16`, `float8_e4m3fn`, ...).
    pub fn from_ml_name(name: &str) -> Option<Dtype> {
        Dtype::ml_dtypes().find(|d| d.descr() == name)
    }

    /// The dtype used to write a memref of `elem`: the first of `ALL` that holds it
    /// (signed integers before unsigned), `index` as 64-bit integers.
    pub fn for_elem(elem: ElemType) -> Dtype {
        match elem.scalar_and_lanes().0 {
            ElemType::Index => Dtype::I64,
            scalar => ALL
                .into_iter()
                .find(|d| d.elem() == scalar)
                // `scalar_and_lanes` gave a scalar.
                .unwrap_or(Dtype::U8),
        }
    }
}

impl Dtype {
    /// The dtype a result of element type `elem` is written as, given the dtypes of the
    /// call's input files. MLIR's integers are signless, so a kernel's `i8` result holds
    /// the bits of a `uint8` input as well as an `int8` one: an integer result is unsigned
    /// when every input of its element type is (an image of `uint8` gives `uint8`, 200
    /// stays 200), signed otherwise, as [`Dtype::for_elem`] says.
    pub fn for_result(elem: ElemType, inputs: &[Dtype]) -> Dtype {
        let signed = Dtype::for_elem(elem);
        let unsigned = match signed {
            Dtype::I8 => Dtype::U8,
            Dtype::I16 => Dtype::U16,
            Dtype::I32 => Dtype::U32,
            Dtype::I64 if elem.scalar_and_lanes().0 != ElemType::Index => Dtype::U64,
            _ => return signed,
        };
        let mut same = inputs
            .iter()
            .filter(|d| d.elem() == signed.elem())
            .peekable();
        if same.peek().is_some() && same.all(|&d| d == unsigned) {
            unsigned
        } else {
            signed
        }
    }
}

/// The bytes of an array's storage come in blocks of this many, aligned to it: enough for
/// any element, a vector of 64 bytes included.
const BLOCK: usize = 64;

/// One block of an array's storage.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
struct Block([u8; BLOCK]);

/// An array read from or written to `.npy`, its data in C order.
///
/// The dtype and shape are read-only: they must keep matching the data's
/// length, which writing in Fortran order relies on.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    dtype: Dtype,
    shape: Vec<usize>,
    /// Whether the file was (or is to be written) in Fortran order.
    pub fortran_order: bool,
    words: Vec<Block>,
    len: usize,
    /// The descr of a file that did not name its type, kept to write it back as it was.
    raw_descr: Option<String>,
}

fn err<T>(message: impl Into<String>) -> Result<T, Error> {
    Err(Error::Npy {
        message: message.into(),
    })
}

fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s))
}

/// Permutes row-major `src` of `shape` into column-major (or back, with `to_fortran` false).
fn reorder(src: &[u8], shape: &[usize], esz: usize, to_fortran: bool) -> Vec<u8> {
    let n = shape.len();
    let count = element_count(shape).unwrap_or(0);
    let mut out = vec![0u8; src.len()];
    if count == 0 {
        return out;
    }
    // Strides of the two orders in elements.
    let mut c = vec![1usize; n];
    let mut f = vec![1usize; n];
    for d in (0..n.saturating_sub(1)).rev() {
        c[d] = c[d + 1] * shape[d + 1];
    }
    for d in 1..n {
        f[d] = f[d - 1] * shape[d - 1];
    }
    let mut idx = vec![0usize; n];
    for _ in 0..count {
        let ci: usize = idx.iter().zip(&c).map(|(i, s)| i * s).sum();
        let fi: usize = idx.iter().zip(&f).map(|(i, s)| i * s).sum();
        let (from, to) = if to_fortran { (ci, fi) } else { (fi, ci) };
        out[to * esz..(to + 1) * esz].copy_from_slice(&src[from * esz..(from + 1) * esz]);
        for d in (0..n).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

impl NpyArray {
    /// An array from C-order native-endian bytes.
    pub fn from_bytes(dtype: Dtype, shape: Vec<usize>, bytes: &[u8]) -> Result<NpyArray, Error> {
        // Sizes become memref indices: with a zero elsewhere in the shape the
        // byte count below does not bound them.
        if let Some(&big) = shape.iter().find(|&&s| i64::try_from(s).is_err()) {
            return err(format!(
                "shape {shape:?}: size {big} does not fit a memref index (i64)"
            ));
        }
        let want = element_count(&shape).and_then(|c| c.checked_mul(dtype.size()));
        if want != Some(bytes.len()) {
            return err(format!(
                "{} bytes do not make an array of shape {shape:?} of {}",
                bytes.len(),
                dtype.descr()
            ));
        }
        check_bools(dtype, bytes, 0)?;
        // Kept in 64-byte aligned blocks so the data is aligned for any element type,
        // vectors included.
        let words = bytes
            .chunks(BLOCK)
            .map(|c| {
                let mut w = Block([0u8; BLOCK]);
                w.0[..c.len()].copy_from_slice(c);
                w
            })
            .collect();
        Ok(NpyArray {
            dtype,
            shape,
            fortran_order: false,
            words,
            len: bytes.len(),
            raw_descr: None,
        })
    }

    /// Element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Shape (empty for a 0-d array).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The data bytes in C order.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len <= BLOCK * words.len()`, initialized.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    /// The data bytes in C order, mutable, 64-byte aligned.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `bytes`.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    /// The shape as memref sizes.
    pub fn sizes(&self) -> Vec<i64> {
        // Construction refused sizes above `i64::MAX`.
        self.shape
            .iter()
            .map(|&s| i64::try_from(s).unwrap_or(i64::MAX))
            .collect()
    }

    /// Parses a `.npy` file's contents. Errors name the byte offset of what
    /// is wrong: the magic at 0, the version at 6, the header length at 8,
    /// the header from 10 (12 for versions 2 and 3), the data after it.
    pub fn parse(file: &[u8]) -> Result<NpyArray, Error> {
        NpyArray::parse_as(file, None)
    }

    /// [`NpyArray::parse`], reading an array whose dtype does not name its type (numpy's
    /// `'<V2'` for an `ml_dtypes` bfloat16, see [`NpyHeader::parse_as`]) as `untyped`;
    /// written back with the file's descr.
    pub fn parse_as(file: &[u8], untyped: Option<Dtype>) -> Result<NpyArray, Error> {
        let NpyHeader {
            dtype,
            shape,
            fortran_order,
            big_endian,
            data_offset: data_start,
            raw_descr,
        } = NpyHeader::parse_as(file, untyped)?;
        let data = file.get(data_start..).unwrap_or_default();
        let Some(nbytes) = element_count(&shape).and_then(|c| c.checked_mul(dtype.size())) else {
            return err(format!("shape {shape:?} is too large"));
        };
        // Checked before anything is allocated: the file bounds the array.
        if data.len() < nbytes {
            return err(format!(
                "data at byte {data_start} has {} bytes, shape {shape:?} needs {nbytes}",
                data.len()
            ));
        }
        let swapped;
        let mut data = &data[..nbytes];
        if big_endian != cfg!(target_endian = "big") {
            swapped = swap_bytes(data, dtype.swap_unit());
            data = &swapped;
        }
        let mut a = if fortran_order {
            NpyArray::from_bytes(
                dtype,
                shape.clone(),
                &reorder(data, &shape, dtype.size(), false),
            )?
        } else {
            NpyArray::from_bytes(dtype, shape, data)?
        };
        a.fortran_order = fortran_order;
        a.raw_descr = raw_descr;
        Ok(a)
    }

    /// Reads a `.npy` file.
    pub fn read(path: &std::path::Path) -> Result<NpyArray, Error> {
        let file = std::fs::read(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        NpyArray::parse(&file)
    }

    /// Serializes (version 1.0, or 2.0 if the header needs it), in the array's
    /// order (`fortran_order`).
    pub fn to_npy(&self) -> Vec<u8> {
        let descr = self.raw_descr.as_deref().unwrap_or(self.dtype.descr());
        let mut out = encode_header(descr, &self.shape, self.fortran_order);
        out.reserve(self.len);
        if self.fortran_order {
            out.extend_from_slice(&reorder(self.bytes(), &self.shape, self.dtype.size(), true));
        } else {
            out.extend_from_slice(self.bytes());
        }
        out
    }

    /// Writes a `.npy` file.
    pub fn write(&self, path: &std::path::Path) -> Result<(), Error> {
        let bytes = self.to_npy();
        replace_file(path, |w| w.write_all(&bytes))
    }
}

/// A `.npy` file's header: what its data is and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// The element type.
    pub dtype: Dtype,
    /// The shape (empty for a 0-d array).
    pub shape: Vec<usize>,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// Whether the data is big-endian.
    pub big_endian: bool,
    /// The byte offset of the data in the file.
    pub data_offset: usize,
    /// The descr as the file has it when it does not name the type, which
    /// [`NpyHeader::parse_as`] was told (`'<V2'` read as bfloat16); else `None`.
    pub raw_descr: Option<String>,
}

/// The dtypes numpy writes for `ml_dtypes` arrays, which name a size and no type:
/// `'<V2'` for bfloat16, `'<V1'` (`'|V1'` on reading back) for most float8 types,
/// `'<f1'` for float8_e5m2. Returns the size in bytes.
fn untyped_size(descr: &str) -> Option<usize> {
    let code = descr.trim_start_matches(['<', '>', '|', '=']);
    match code.strip_prefix('V') {
        Some(n) => n.parse().ok().filter(|&n| n > 0),
        None => (code == "f1").then_some(1),
    }
}

impl NpyHeader {
    /// Parses the header at the start of `file` (only the header's bytes are needed).
    /// Errors as [`NpyArray::parse`]'s.
    pub fn parse(file: &[u8]) -> Result<NpyHeader, Error> {
        NpyHeader::parse_as(file, None)
    }

    /// [`NpyHeader::parse`], taking a dtype that names only a size (`'<V2'`, `'|V1'`,
    /// `'<f1'`: what numpy writes for `ml_dtypes`' bfloat16 and float8 arrays) as
    /// `untyped`, if its size is that. Without it such a file is refused, the error
    /// saying how to name the type.
    pub fn parse_as(file: &[u8], untyped: Option<Dtype>) -> Result<NpyHeader, Error> {
        if file.len() < 10 || &file[..6] != MAGIC {
            return err("not a .npy file (bad magic at byte 0)");
        }
        let major = file[6];
        let (header_len, start) = match major {
            1 => (u16::from_le_bytes([file[8], file[9]]) as usize, 10usize),
            2 | 3 => {
                if file.len() < 12 {
                    return err(format!(
                        "truncated header length at byte 8 ({} bytes in the file)",
                        file.len()
                    ));
                }
                (
                    u32::from_le_bytes([file[8], file[9], file[10], file[11]]) as usize,
                    12,
                )
            }
            v => return err(format!("unsupported format version {v} at byte 6")),
        };
        let Some(header) = file.get(start..start.saturating_add(header_len)) else {
            return err(format!(
                "truncated header: {header_len} bytes from byte {start}, the file has {}",
                file.len()
            ));
        };
        let Ok(header) = std::str::from_utf8(header) else {
            return err(format!("header at byte {start} is not text"));
        };
        let field = |key: &str| {
            dict_value(header, key).ok_or_else(|| Error::Npy {
                message: format!("header at byte {start} has no '{key}'"),
            })
        };
        let descr = field("descr")?
            .trim()
            .trim_matches(|c| c == '\'' || c == '"');
        let mut raw_descr = None;
        let known = match (Dtype::from_descr(descr), untyped_size(descr), untyped) {
            (Some(found), _, _) => Some(found),
            (None, Some(size), Some(t)) if size == t.size() => {
                raw_descr = Some(descr.to_string());
                Some((t, false))
            }
            (None, Some(size), Some(t)) => {
                return err(format!(
                    "dtype '{descr}' has {size}-byte elements, not those of {} ({} bytes)",
                    t.descr(),
                    t.size()
                ))
            }
            (None, Some(size), None) => {
                let (example, names) = if size == 2 {
                    ("bfloat16", "bfloat16")
                } else {
                    (
                        "float8_e4m3fn",
                        "float8_e5m2, float8_e4m3, float8_e4m3fn, \
                      float8_e5m2fnuz, float8_e4m3fnuz, float8_e4m3b11fnuz",
                    )
                };
                return err(format!(
                    "dtype '{descr}' names no element type, only {size}-byte records: numpy \
                     saves ml_dtypes' bfloat16 as '<V2' and its float8 types as '<V1' or \
                     '<f1'. Say which type it is ({names}): `locus memref call \
                     --ml-dtype {example}`, or a header whose descr is the type's name \
                     ('{example}', which np.load reads once ml_dtypes is imported)"
                ));
            }
            (None, None, _) => None,
        };
        let Some((dtype, big_endian)) = known else {
            return err(format!(
                "unsupported dtype '{descr}' (f2 f4 f8 c8 c16 i1-i8 u1-u8 b1 of either byte \
                 order, and bfloat16 and the float8 types of ml_dtypes are)"
            ));
        };
        let fortran_order = match field("fortran_order")?.trim() {
            "True" => true,
            "False" => false,
            other => {
                return err(format!(
                    "header at byte {start}: fortran_order is '{other}'"
                ))
            }
        };
        let shape_text = field("shape")?;
        let inner = shape_text
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')');
        let mut shape = Vec::new();
        for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.trim_end_matches('L').parse() {
                Ok(v) => shape.push(v),
                Err(_) => return err(format!("bad shape entry '{part}'")),
            }
        }
        Ok(NpyHeader {
            dtype,
            shape,
            fortran_order,
            big_endian,
            data_offset: start + header_len,
            raw_descr,
        })
    }

    /// The data's length in bytes, if it fits a `usize`.
    pub fn data_len(&self) -> Option<usize> {
        element_count(&self.shape).and_then(|c| c.checked_mul(self.dtype.size()))
    }

    /// The header of a little-endian file of `dtype` and `shape` (version 1.0, or 2.0 if
    /// it needs it), padded so the data starts at a multiple of 64 as numpy pads it.
    pub fn encode(dtype: Dtype, shape: &[usize], fortran_order: bool) -> Vec<u8> {
        encode_header(dtype.descr(), shape, fortran_order)
    }
}

/// [`NpyHeader::encode`] with the descr as text.
fn encode_header(descr: &str, shape: &[usize], fortran_order: bool) -> Vec<u8> {
    let shape = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let order = if fortran_order { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    let v1 = header.len() + 11 < 65536;
    let prefix = if v1 { 10 } else { 12 };
    // Pad with spaces so the data starts at a multiple of 64, ending in '\n'.
    let total = (prefix + header.len() + 1).next_multiple_of(64);
    while prefix + header.len() + 1 < total {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out
}

/// Refuses a bool array (`|b1`) with a byte other than 0 or 1, naming its offset in the
/// data and, when `base` (the data's offset in the file) is known, in the file: numpy writes its bools so, and a kernel's
/// `i1` loads read only what such a byte means to LLVM, not numpy's "nonzero is true"
/// (a byte of 2 from a view of other bytes as bool would read as false).
pub(crate) fn check_bools(dtype: Dtype, data: &[u8], base: usize) -> Result<(), Error> {
    if dtype != Dtype::Bool {
        return Ok(());
    }
    let Some(k) = data.iter().position(|&b| b > 1) else {
        return Ok(());
    };
    let in_file = if base == 0 {
        String::new()
    } else {
        format!(" (byte {} of the file)", base + k)
    };
    err(format!(
        "byte {k} of the data{in_file} is {}: a bool holds 0 or 1 (numpy's own bools do; a \
         view of other bytes as bool is not one)",
        data[k]
    ))
}

/// Writes a C-order, little-endian `.npy` file of `dtype` and `shape` whose data is
/// `data` (native order on a little-endian machine), straight from `data`: no copy.
///
/// # Errors
///
/// [`Error::Npy`] if `data` is not the shape's size, [`Error::Io`] if the file
/// cannot be written.
pub fn write_npy(
    path: &std::path::Path,
    dtype: Dtype,
    shape: &[usize],
    data: &[u8],
) -> Result<(), Error> {
    let want = element_count(shape).and_then(|c| c.checked_mul(dtype.size()));
    if want != Some(data.len()) {
        return err(format!(
            "{} bytes do not make an array of shape {shape:?} of {}",
            data.len(),
            dtype.descr()
        ));
    }
    replace_file(path, |w| {
        w.write_all(&NpyHeader::encode(dtype, shape, false))?;
        w.write_all(data)
    })
}

/// Writes a file through `write`, replacing `path` only once it is complete: the bytes go
/// to a new file beside it, renamed over it at the end. The old file (which may be mapped
/// as an argument, or be the very data being written) is never truncated under its
/// readers, and a failed write leaves it as it was. The new file is made with `O_EXCL`
/// under a random name (so no one can have put a file or a link there first), with the
/// old file's permissions, or numpy's (0666 less the umask) for a new one. What is not a
/// regular file (a device, a FIFO) is written into instead.
fn replace_file(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let io = |e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    // A symbolic link is written through, as numpy's open() does: the file it names is
    // replaced, the link stays.
    let resolved = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(io)?,
        _ => path.to_path_buf(),
    };
    let path = resolved.as_path();
    if let Ok(m) = std::fs::metadata(path) {
        if !m.file_type().is_file() {
            // A device, a FIFO or a socket is written into, as numpy's open() writes it
            // (`/dev/null`, `/dev/stdout`; `/dev/full` says it is full): a file renamed
            // over it would take its place. A directory is refused by the open.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io)?;
            let mut w = std::io::BufWriter::new(file);
            return write(&mut w).and_then(|()| w.flush()).map_err(io);
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let old_mode = std::fs::metadata(path).ok().map(|m| m.permissions());
    let temp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.unwrap_or_default()))
        .suffix(".locus.tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(io)?;
    if let Some(mode) = old_mode {
        temp.as_file().set_permissions(mode).map_err(io)?;
    }
    let mut w = std::io::BufWriter::new(temp);
    write(&mut w).and_then(|()| w.flush()).map_err(io)?;
    // Dropped unrenamed on any error: the temporary file is removed.
    let temp = w.into_inner().map_err(|e| io(e.into_error()))?;
    temp.persist(path).map(|_| ()).map_err(|e| io(e.error))
}

/// `data` with the byte order of every `unit`-byte word reversed.
fn swap_bytes(data: &[u8], unit: usize) -> Vec<u8> {
    let mut out = data.to_vec();
    for word in out.chunks_exact_mut(unit) {
        word.reverse();
    }
    out
}

/// The raw text of `key`'s value in a Python dict literal (up to the next
/// top-level comma or the closing brace).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[at + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?;
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(&rest[..i]),
            _ => {}
        }
    }
    None
}
