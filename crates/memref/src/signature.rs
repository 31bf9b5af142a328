//! MLIR function types: parsing and checking arguments against them.
//!
//! A [`Signature`] comes from a function type such as
//! `(memref<?x4xf32, strided<[?, 1], offset: ?>>, f32, index) -> (memref<?xf32>, f32)`
//! ([`Signature::parse`]) or from a `func.func` in a `.mlir` file as MLIR parses it
//! ([`Signature::from_mlir`]). Before a call each memref argument is checked
//! against its type: element type, rank, static sizes, and layout. The layout
//! check matters most: a callee whose type has the identity layout computes
//! addresses from the static row-major strides and offset 0, ignoring what the
//! descriptor says, so a strided view passed to it would silently give wrong
//! results. Such a view is refused (or copied to a contiguous buffer when the
//! caller asks, see [`crate::call::CallOptions`]).

use std::fmt;

use crate::compile::Tools;
use crate::float::Format;
use crate::Error;

/// A scalar or memref element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `f16`.
    F16,
    /// `bf16`.
    BF16,
    /// `f8E5M2` (IEEE-like: infinities and NaNs).
    F8E5M2,
    /// `f8E4M3` (IEEE-like).
    F8E4M3,
    /// `f8E4M3FN` (finite: no infinities, one NaN per sign).
    F8E4M3FN,
    /// `f8E5M2FNUZ` (finite, unsigned zero, exponent bias 16).
    F8E5M2FNUZ,
    /// `f8E4M3FNUZ` (finite, unsigned zero, exponent bias 8).
    F8E4M3FNUZ,
    /// `f8E4M3B11FNUZ` (finite, unsigned zero, exponent bias 11).
    F8E4M3B11FNUZ,
    /// `complex<f32>`: real and imaginary `f32`s.
    ComplexF32,
    /// `complex<f64>`: real and imaginary `f64`s.
    ComplexF64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `i1`, stored as one byte.
    I1,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `index` (64-bit on the targets Locus supports).
    Index,
    /// `vector<D0x..xDnxT>` as a memref element, `T` one of the [`VECTOR_LANE_TYPES`]
    /// and the innermost vector, `Dn * size(T)` bytes, a power of two up to
    /// [`MAX_VECTOR_BYTES`], so nothing is padded: MLIR lowers the element to nested
    /// arrays of the innermost vector (`!llvm.array<D0 x ... vector<Dn x T>>`), which are
    /// laid out one after the other, as MLIR's runner utils (`Vector<T, Dims...>`) pass
    /// them when the innermost size is a power of two. An `.npy` array gets the vector's
    /// dimensions as its last ones.
    Vector {
        /// The vector's dimensions, outermost first.
        shape: VectorShape,
        /// The lanes' type (one of [`VECTOR_LANE_TYPES`]).
        of: &'static ElemType,
    },
}

/// The largest innermost vector of a vector element, in bytes (see [`ElemType::vector`]):
/// its alignment, which Locus's buffers guarantee.
pub const MAX_VECTOR_BYTES: usize = 64;

/// The most dimensions a vector element has.
pub const MAX_VECTOR_RANK: usize = 4;

/// The largest vector element, in bytes.
pub const MAX_VECTOR_ELEMENT_BYTES: usize = 1 << 16;

/// The dimensions of a vector element type, outermost first (1 to [`MAX_VECTOR_RANK`],
/// none zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VectorShape {
    dims: [u16; MAX_VECTOR_RANK],
    rank: u8,
}

impl VectorShape {
    /// The shape with these dimensions, if there are 1 to [`MAX_VECTOR_RANK`] of them and
    /// none is zero.
    pub fn new(dims: &[u16]) -> Option<VectorShape> {
        if dims.is_empty() || dims.len() > MAX_VECTOR_RANK || dims.contains(&0) {
            return None;
        }
        let mut all = [0u16; MAX_VECTOR_RANK];
        all[..dims.len()].copy_from_slice(dims);
        Some(VectorShape {
            dims: all,
            rank: dims.len() as u8,
        })
    }

    /// The dimensions, outermost first.
    pub fn dims(&self) -> &[u16] {
        &self.dims[..usize::from(self.rank)]
    }

    /// The number of lanes of the innermost vector.
    pub const fn innermost(&self) -> usize {
        self.dims[self.rank as usize - 1] as usize
    }

    /// The number of lanes of the whole vector.
    pub const fn lanes(&self) -> usize {
        let mut n = 1;
        let mut d = 0;
        while d < self.rank as usize {
            n *= self.dims[d] as usize;
            d += 1;
        }
        n
    }
}

/// The lane types of [`ElemType::Vector`].
pub static VECTOR_LANE_TYPES: [ElemType; 8] = [
    ElemType::F16,
    ElemType::BF16,
    ElemType::F32,
    ElemType::F64,
    ElemType::I8,
    ElemType::I16,
    ElemType::I32,
    ElemType::I64,
];

impl ElemType {
    /// `vector<lanes x of>`, if it is one Locus passes (see [`ElemType::Vector`]).
    pub fn vector(lanes: u16, of: ElemType) -> Option<ElemType> {
        ElemType::vector_of_shape(&[lanes], of)
    }

    /// `vector<D0x..xDnxof>` with `dims` D0 to Dn, if it is one Locus passes (see
    /// [`ElemType::Vector`]).
    pub fn vector_of_shape(dims: &[u16], of: ElemType) -> Option<ElemType> {
        let of = VECTOR_LANE_TYPES.iter().find(|t| **t == of)?;
        let shape = VectorShape::new(dims)?;
        let inner = shape.innermost() * of.size();
        // The innermost vector is at most 64 bytes: the alignment Locus's buffers
        // guarantee (a vector is aligned to its size); a power of two, so unpadded.
        (inner.is_power_of_two()
            && inner <= MAX_VECTOR_BYTES
            && shape.lanes() * of.size() <= MAX_VECTOR_ELEMENT_BYTES)
            .then_some(ElemType::Vector { shape, of })
    }

    /// The scalar type of the element and how many of it make one element: the lanes of
    /// a vector, else the type itself and 1.
    pub fn scalar_and_lanes(self) -> (ElemType, usize) {
        match self {
            ElemType::Vector { shape, of } => (*of, shape.lanes()),
            other => (other, 1),
        }
    }

    /// The dimensions a vector element adds to an array of it (an `.npy` file's last
    /// ones); none for a scalar.
    pub fn lane_dims(self) -> Vec<usize> {
        match self {
            ElemType::Vector { shape, .. } => {
                shape.dims().iter().map(|&d| usize::from(d)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Every scalar element type, in the order a list of them is shown.
    pub const SCALARS: [ElemType; 18] = [
        ElemType::F16,
        ElemType::BF16,
        ElemType::F8E5M2,
        ElemType::F8E4M3,
        ElemType::F8E4M3FN,
        ElemType::F8E5M2FNUZ,
        ElemType::F8E4M3FNUZ,
        ElemType::F8E4M3B11FNUZ,
        ElemType::F32,
        ElemType::F64,
        ElemType::ComplexF32,
        ElemType::ComplexF64,
        ElemType::I1,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::Index,
    ];

    /// Size in bytes of one element in memory.
    pub const fn size(self) -> usize {
        match self {
            ElemType::I1 | ElemType::I8 => 1,
            ElemType::I16 => 2,
            ElemType::F32 | ElemType::I32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::Index | ElemType::ComplexF32 => 8,
            ElemType::ComplexF64 => 16,
            ElemType::Vector { shape, of } => shape.lanes() * of.size(),
            // The narrow floats, as their format says (`float`, where they are listed);
            // a test checks that no scalar type is left at 0.
            narrow => match Format::of(narrow) {
                Some(format) => format.bytes(),
                None => 0,
            },
        }
    }

    /// Alignment in bytes of one element in memory (a complex number is aligned as its
    /// parts).
    pub const fn align(self) -> usize {
        match self {
            ElemType::ComplexF32 => 4,
            ElemType::ComplexF64 => 8,
            // Nested arrays of the innermost vector, aligned as it is.
            ElemType::Vector { shape, of } => shape.innermost() * of.size(),
            other => other.size(),
        }
    }

    /// The MLIR spelling of a scalar type; `vector` for a vector (whose `Display` is its
    /// whole spelling).
    pub const fn name(self) -> &'static str {
        match self {
            ElemType::Vector { .. } => "vector",
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
            ElemType::F8E5M2 => "f8E5M2",
            ElemType::F8E4M3 => "f8E4M3",
            ElemType::F8E4M3FN => "f8E4M3FN",
            ElemType::F8E5M2FNUZ => "f8E5M2FNUZ",
            ElemType::F8E4M3FNUZ => "f8E4M3FNUZ",
            ElemType::F8E4M3B11FNUZ => "f8E4M3B11FNUZ",
            ElemType::ComplexF32 => "complex<f32>",
            ElemType::ComplexF64 => "complex<f64>",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::I1 => "i1",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::Index => "index",
        }
    }

    /// The element type MLIR spells `s` (`complex<f32>` included).
    pub fn from_name(s: &str) -> Option<ElemType> {
        ElemType::SCALARS.into_iter().find(|e| e.name() == s)
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let ElemType::Vector { shape, of } = self {
            f.write_str("vector<")?;
            for d in shape.dims() {
                write!(f, "{d}x")?;
            }
            return write!(f, "{of}>");
        }
        f.write_str(self.name())
    }
}

/// Rust types that can be memref elements. MLIR integers are signless, so
/// signed and unsigned Rust integers of one width map to the same type.
pub trait Element: Copy + 'static {
    /// The MLIR element type.
    const TYPE: ElemType;
}

macro_rules! element {
    ($($t:ty => $e:ident),*) => {
        $(impl Element for $t { const TYPE: ElemType = ElemType::$e; })*
    };
}
element!(f32 => F32, f64 => F64, bool => I1, i8 => I8, u8 => I8, i16 => I16, u16 => I16,
    i32 => I32, u32 => I32, i64 => I64, u64 => I64);

/// One dimension, stride or offset: a constant or `?`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    /// Known when the function was compiled.
    Static(i64),
    /// `?`: read from the descriptor.
    Dynamic,
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(v) => write!(f, "{v}"),
            Dim::Dynamic => f.write_str("?"),
        }
    }
}

/// The layout of a ranked memref type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// No layout (or the identity `affine_map`): row-major strides from the
    /// static sizes, offset 0. The callee ignores the descriptor's strides and offset.
    Identity,
    /// `strided<[s0, s1, ..], offset: o>`.
    Strided {
        /// One per dimension.
        strides: Vec<Dim>,
        /// The offset (0 when not written).
        offset: Dim,
    },
}

/// A memref type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemRefType {
    /// Element type.
    pub elem: ElemType,
    /// The shape, or `None` for an unranked `memref<*xT>`.
    pub shape: Option<Vec<Dim>>,
    /// The layout (always `Identity` for unranked).
    pub layout: Layout,
}

/// A function argument or result type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// A scalar.
    Scalar(ElemType),
    /// A memref.
    MemRef(MemRefType),
}

/// A function type: inputs and results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// Argument types.
    pub inputs: Vec<Type>,
    /// Result types.
    pub results: Vec<Type>,
}

impl fmt::Display for MemRefType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shape {
            None => write!(f, "memref<*x{}>", self.elem),
            Some(shape) => {
                f.write_str("memref<")?;
                for d in shape {
                    write!(f, "{d}x")?;
                }
                write!(f, "{}", self.elem)?;
                if let Layout::Strided { strides, offset } = &self.layout {
                    let s: Vec<String> = strides.iter().map(|d| d.to_string()).collect();
                    write!(f, ", strided<[{}], offset: {offset}>", s.join(", "))?;
                }
                f.write_str(">")
            }
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(e) => write!(f, "{e}"),
            Type::MemRef(m) => write!(f, "{m}"),
        }
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |ts: &[Type]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        write!(
            f,
            "({}) -> ({})",
            list(&self.inputs).join(", "),
            list(&self.results).join(", ")
        )
    }
}

/// A small cursor over type text.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, Error> {
        Err(Error::Parse {
            at: self.pos,
            message: message.into(),
        })
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn skip_ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), Error> {
        if self.eat(s) {
            Ok(())
        } else {
            let found: String = self.rest().chars().take(12).collect();
            self.err(format!("expected `{s}`, found `{found}`"))
        }
    }

    /// An identifier made of letters, digits and `_`.
    fn word(&mut self) -> &'a str {
        self.skip_ws();
        let r = self.rest();
        let n = r
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(r.len());
        self.pos += n;
        &r[..n]
    }

    fn int(&mut self) -> Result<i64, Error> {
        self.skip_ws();
        let r = self.rest();
        let n = r
            .char_indices()
            .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
            .map_or(r.len(), |(i, _)| i);
        match r[..n].parse() {
            Ok(v) => {
                self.pos += n;
                Ok(v)
            }
            Err(_) => self.err("expected an integer"),
        }
    }

    fn dim(&mut self) -> Result<Dim, Error> {
        if self.eat("?") {
            Ok(Dim::Dynamic)
        } else {
            self.int().map(Dim::Static)
        }
    }

    fn elem(&mut self) -> Result<ElemType, Error> {
        let start = self.pos;
        let w = self.word();
        let found = if w == "complex" && self.eat("<") {
            let part = self.word();
            self.eat(">")
                .then(|| ElemType::from_name(&format!("complex<{part}>")))
                .flatten()
        } else if w == "vector" && self.eat("<") {
            // `vector<4x4xf32>`: the dimensions and the lane type run together, joined
            // by `x`.
            let spec = self.word();
            let lanes_of = spec.rsplit_once('x').and_then(|(dims, t)| {
                let of = ElemType::from_name(t)?;
                let dims: Option<Vec<u16>> = dims.split('x').map(|n| n.parse().ok()).collect();
                ElemType::vector_of_shape(&dims?, of)
            });
            match (lanes_of, self.eat(">")) {
                (Some(v), true) => Some(v),
                _ => {
                    self.pos = start;
                    return self.err(format!(
                        "unsupported vector `vector<{spec}>` (1 to 4 dimensions of f16, bf16, \
                         f32, f64 or i8 to i64, the innermost a power of two of bytes up to \
                         64, at most 65536 bytes in all)"
                    ));
                }
            }
        } else {
            ElemType::from_name(w)
        };
        match found {
            Some(e) => Ok(e),
            None => {
                self.pos = start;
                let names: Vec<&str> = ElemType::SCALARS.iter().map(|e| e.name()).collect();
                self.err(format!(
                    "unsupported type `{w}` ({} and memref are)",
                    names.join(" ")
                ))
            }
        }
    }

    fn ty(&mut self) -> Result<Type, Error> {
        self.skip_ws();
        if !self.rest().starts_with("memref") {
            return self.elem().map(Type::Scalar);
        }
        self.pos += "memref".len();
        self.expect("<")?;
        if self.eat("*") {
            self.expect("x")?;
            let elem = self.elem()?;
            self.expect(">")?;
            return Ok(Type::MemRef(MemRefType {
                elem,
                shape: None,
                layout: Layout::Identity,
            }));
        }
        // Dimensions are `?` or integers each followed by `x`; then the element type.
        let mut shape = Vec::new();
        loop {
            self.skip_ws();
            let r = self.rest();
            if r.starts_with('?') {
                self.pos += 1;
                shape.push(Dim::Dynamic);
            } else if r.starts_with(|c: char| c.is_ascii_digit()) {
                let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
                match r[..n].parse() {
                    Ok(v) => shape.push(Dim::Static(v)),
                    Err(_) => return self.err("dimension too large"),
                }
                self.pos += n;
            } else {
                break;
            }
            if !self.rest().starts_with('x') {
                return self.err("expected `x` after a dimension");
            }
            self.pos += 1;
        }
        let elem = self.elem()?;
        let mut layout = Layout::Identity;
        if self.eat(",") {
            self.skip_ws();
            if self.eat("strided") {
                self.expect("<")?;
                self.expect("[")?;
                let mut strides = Vec::new();
                if !self.eat("]") {
                    loop {
                        strides.push(self.dim()?);
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                let mut offset = Dim::Static(0);
                if self.eat(",") {
                    self.expect("offset")?;
                    self.expect(":")?;
                    offset = self.dim()?;
                }
                self.expect(">")?;
                if strides.len() != shape.len() {
                    return self.err(format!(
                        "strided layout has {} strides for rank {}",
                        strides.len(),
                        shape.len()
                    ));
                }
                layout = Layout::Strided { strides, offset };
            } else if self.rest().starts_with("affine_map") {
                let start = self.pos;
                let end = match self.rest().find('>') {
                    Some(i) => i,
                    None => return self.err("unterminated affine_map"),
                };
                // `affine_map<(d0, d1) -> (d0, d1)>` ends at the `>` after `->`.
                let inner = &self.rest()[..end];
                let (map, len) = if inner.ends_with('-') {
                    let r = &self.rest()[end + 1..];
                    match r.find('>') {
                        Some(j) => (&self.rest()[..end + 1 + j], end + 1 + j + 1),
                        None => return self.err("unterminated affine_map"),
                    }
                } else {
                    (inner, end + 1)
                };
                if !is_identity_map(map) {
                    self.pos = start;
                    return self.err("only strided and identity layouts are supported");
                }
                self.pos += len;
            } else {
                return self.err("only strided and identity layouts are supported");
            }
        }
        if self.eat(",") {
            return self.err("memory spaces are not supported");
        }
        self.expect(">")?;
        Ok(Type::MemRef(MemRefType {
            elem,
            shape: Some(shape),
            layout,
        }))
    }

    /// `(T, ..)` or a single type.
    fn type_list(&mut self) -> Result<Vec<Type>, Error> {
        let mut out = Vec::new();
        if !self.eat("(") {
            out.push(self.ty()?);
            return Ok(out);
        }
        if self.eat(")") {
            return Ok(out);
        }
        loop {
            out.push(self.ty()?);
            if self.eat(")") {
                return Ok(out);
            }
            self.expect(",")?;
        }
    }
}

fn is_identity_map(map: &str) -> bool {
    // `affine_map<(d0, d1) -> (d0, d1)>`: both lists equal.
    let body = map.trim_start_matches("affine_map").trim_start_matches('<');
    let mut parts = body.split("->");
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => {
            let clean = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
            clean(a) == clean(b)
        }
        _ => false,
    }
}

impl Type {
    /// Parses one type, e.g. `memref<?x4xf32>` or `index`.
    pub fn parse(text: &str) -> Result<Type, Error> {
        let mut p = Parser { text, pos: 0 };
        let t = p.ty()?;
        p.skip_ws();
        if p.pos != text.len() {
            return p.err("unexpected text after the type");
        }
        Ok(t)
    }
}

impl Signature {
    /// Parses a function type `(T, ..) -> R` or `(T, ..) -> (R, ..)`; the
    /// arrow may be omitted when there are no results.
    pub fn parse(text: &str) -> Result<Signature, Error> {
        let mut p = Parser { text, pos: 0 };
        p.skip_ws();
        if !p.rest().starts_with('(') {
            return p.err("a function type starts with `(`");
        }
        let inputs = p.type_list()?;
        let results = if p.eat("->") {
            p.type_list()?
        } else {
            Vec::new()
        };
        p.skip_ws();
        if p.pos != text.len() {
            return p.err("unexpected text after the function type");
        }
        Ok(Signature { inputs, results })
    }

    /// The signature of `func.func @name` in the MLIR kernel `source`, as
    /// MLIR parses it: `mlir-opt-19` prints the parsed module in generic form
    /// (type and attribute aliases resolved, locations inline) and the
    /// function's `function_type` is taken from that
    /// ([`Signature::from_generic_mlir`]). Comments and strings that mention
    /// the function are never read; a `func.func` in a nested module counts
    /// only when the outermost level has none of that name. A function of
    /// (dense) tensors has the signature `memref compile` gives it: the one
    /// after [`crate::compile::BUFFERIZE`] (`tensor<?xf32>` is `memref<?xf32>`).
    ///
    /// Errors are [`Error::Parse`] with a byte offset in `source`:
    /// where mlir-opt's first error is when the kernel does not parse or
    /// verify, the function's position when its type is one Locus cannot
    /// pass, the end of the source when there is no such function.
    /// [`Error::Tool`] when `mlir-opt-19` cannot run or fails without a
    /// position.
    pub fn from_mlir(source: &str, name: &str) -> Result<Signature, Error> {
        Self::from_mlir_with(source, name, &Tools::default())
    }

    /// [`Signature::from_mlir`] with the `mlir-opt` of `tools`.
    pub fn from_mlir_with(source: &str, name: &str, tools: &Tools) -> Result<Signature, Error> {
        let mlir_opt = &tools.mlir_opt;
        let printed = match crate::compile::run(mlir_opt, PRINT_GENERIC, Some(source.as_bytes())) {
            Ok(out) => String::from_utf8(out).map_err(|e| Error::Tool {
                tool: mlir_opt.clone(),
                stderr: format!("output is not UTF-8: {e}"),
            })?,
            Err(Error::Tool { tool, stderr }) => {
                return Err(match first_diagnostic(&stderr) {
                    Some((line, col, message)) => Error::Parse {
                        at: offset_of(source, line, col),
                        message: format!("{tool}: {message}"),
                    },
                    None => Error::Tool { tool, stderr },
                })
            }
            Err(e) => return Err(e),
        };
        let found = find_generic(&printed, name).map_err(|message| Error::Parse {
            at: source.len(),
            message,
        })?;
        let at = found
            .loc
            .map_or(source.len(), |(line, col)| offset_of(source, line, col));
        if !found.function_type.contains("tensor<") {
            return found
                .signature(name)
                .map_err(|message| Error::Parse { at, message });
        }
        // A function of tensors: its compiled signature is the one bufferization gives it,
        // as `memref compile` runs it ([`crate::compile::BUFFERIZE`]: identity-layout
        // memrefs at function boundaries), read from mlir-opt-19's own output.
        if found.function_type.contains("sparse_tensor.encoding") {
            return Err(Error::Parse {
                at,
                message: format!(
                    "`@{name}` has type `{}`: a sparse tensor's compiled form is the \
                     sparsifier's; give the compiled signature with --sig",
                    found.function_type
                ),
            });
        }
        let passes: Vec<&str> = crate::compile::BUFFERIZE
            .iter()
            .chain(PRINT_GENERIC)
            .copied()
            .collect();
        let bufferized = crate::compile::run(mlir_opt, &passes, Some(source.as_bytes()))
            .and_then(|out| {
                String::from_utf8(out).map_err(|e| Error::Tool {
                    tool: mlir_opt.clone(),
                    stderr: format!("output is not UTF-8: {e}"),
                })
            })
            .map_err(|e| Error::Parse {
                at,
                message: format!("`@{name}` takes tensors, and bufferizing the kernel failed: {e}"),
            })?;
        find_generic(&bufferized, name)
            .and_then(|found| found.signature(name))
            .map_err(|message| Error::Parse { at, message })
    }

    /// The signature of `func.func @name` in a module as
    /// `mlir-opt-19 --mlir-print-op-generic --mlir-print-local-scope` prints
    /// it (what [`Signature::from_mlir`] runs): the `function_type` property of
    /// the least nested `"func.func"` op whose `sym_name` is `name`. Errors
    /// are [`Error::Parse`] at the op's line in `printed` (or its end).
    pub fn from_generic_mlir(printed: &str, name: &str) -> Result<Signature, Error> {
        let found = find_generic(printed, name).map_err(|message| Error::Parse {
            at: printed.len(),
            message,
        })?;
        found.signature(name).map_err(|message| Error::Parse {
            at: found.at,
            message,
        })
    }

    /// Checks the number of arguments.
    pub fn check_arity(&self, given: usize) -> Result<(), Error> {
        if given != self.inputs.len() {
            return Err(Error::Argument {
                index: given.min(self.inputs.len()),
                message: format!(
                    "{given} argument(s) given, the signature takes {}",
                    self.inputs.len()
                ),
            });
        }
        Ok(())
    }
}

/// Why a memref argument does not fit its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// Different element type.
    Elem {
        /// From the signature.
        expected: ElemType,
        /// From the argument.
        found: ElemType,
    },
    /// Different rank.
    Rank {
        /// From the signature.
        expected: usize,
        /// From the argument.
        found: usize,
    },
    /// A static size differs.
    Size {
        /// The dimension.
        dim: usize,
        /// From the signature.
        expected: i64,
        /// From the argument.
        found: i64,
    },
    /// The layout differs: a static stride or offset, or a non-row-major view
    /// given to an identity-layout callee.
    Layout(String),
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Elem { expected, found } => {
                write!(f, "element type {found}, the signature wants {expected}")
            }
            Mismatch::Rank { expected, found } => {
                write!(f, "rank {found}, the signature wants rank {expected}")
            }
            Mismatch::Size {
                dim,
                expected,
                found,
            } => write!(
                f,
                "size {found} in dimension {dim}, the signature wants {expected}"
            ),
            Mismatch::Layout(m) => f.write_str(m),
        }
    }
}

impl MemRefType {
    /// The rank, or `None` for unranked.
    pub fn rank(&self) -> Option<usize> {
        self.shape.as_ref().map(Vec::len)
    }

    /// Checks a memref with this element type, offset, sizes and strides
    /// against the type. Unranked types accept every rank, with the identity
    /// layout only: a kernel may cast one to a ranked identity layout, which
    /// MLIR takes for an assertion, so a view with an offset or other strides
    /// would have it read and write the wrong elements.
    pub fn check(
        &self,
        elem: ElemType,
        offset: i64,
        sizes: &[i64],
        strides: &[i64],
    ) -> Result<(), Mismatch> {
        if elem != self.elem {
            return Err(Mismatch::Elem {
                expected: self.elem,
                found: elem,
            });
        }
        let Some(shape) = &self.shape else {
            return identity(offset, sizes, strides);
        };
        if shape.len() != sizes.len() {
            return Err(Mismatch::Rank {
                expected: shape.len(),
                found: sizes.len(),
            });
        }
        for (dim, (d, &found)) in shape.iter().zip(sizes).enumerate() {
            if let Dim::Static(expected) = *d {
                if expected != found {
                    return Err(Mismatch::Size {
                        dim,
                        expected,
                        found,
                    });
                }
            }
        }
        match &self.layout {
            Layout::Identity => identity(offset, sizes, strides)?,
            Layout::Strided {
                strides: want,
                offset: want_offset,
            } => {
                for (dim, (d, &found)) in want.iter().zip(strides).enumerate() {
                    if let Dim::Static(expected) = *d {
                        // A size-1 dimension never uses its stride.
                        if expected != found && sizes[dim] > 1 {
                            return Err(Mismatch::Layout(format!(
                                "stride {found} in dimension {dim}, the signature wants {expected}"
                            )));
                        }
                    }
                }
                if let Dim::Static(expected) = *want_offset {
                    if expected != offset {
                        return Err(Mismatch::Layout(format!(
                            "offset {offset}, the signature wants {expected}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks a view against the type (for typed calls, which build
    /// descriptors themselves): element type, rank, static sizes, layout.
    pub fn check_view<T: Element, const N: usize>(
        &self,
        view: &crate::MemRefView<'_, T, N>,
    ) -> Result<(), Mismatch> {
        self.check(T::TYPE, view.offset(), view.sizes(), view.strides())
    }

    /// Whether a non-row-major view could be made acceptable by copying it
    /// to a fresh contiguous buffer (identity layout, or dynamic strided
    /// layout accepting row-major strides).
    pub fn accepts_row_major(&self, sizes: &[i64]) -> bool {
        let strides = row_major(sizes);
        self.check(self.elem, 0, sizes, &strides).is_ok()
    }
}

/// Whether a memref of this offset, sizes and strides has the identity layout.
fn identity(offset: i64, sizes: &[i64], strides: &[i64]) -> Result<(), Mismatch> {
    if offset != 0 {
        return Err(Mismatch::Layout(format!(
            "offset {offset}, but the identity layout assumes offset 0"
        )));
    }
    if !is_row_major(sizes, strides) {
        return Err(Mismatch::Layout(format!(
            "strides {strides:?} are not row-major for sizes {sizes:?}; \
             the callee's identity layout would ignore them"
        )));
    }
    Ok(())
}

/// Row-major strides for `sizes` (saturating; only for checks).
pub fn row_major(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; sizes.len()];
    let mut acc: i64 = 1;
    for d in (0..sizes.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(sizes[d].max(1));
    }
    strides
}

/// Whether `strides` are row-major for `sizes`, ignoring dimensions of size
/// 0 or 1 (whose stride is never used).
pub fn is_row_major(sizes: &[i64], strides: &[i64]) -> bool {
    if sizes.contains(&0) {
        return true;
    }
    let mut want: i64 = 1;
    for (&size, &stride) in sizes.iter().zip(strides).rev() {
        if size > 1 && stride != want {
            return false;
        }
        want = want.saturating_mul(size.max(1));
    }
    true
}

/// `mlir-opt-19` printing a kernel for [`Signature::from_mlir`]: no passes,
/// generic form, no aliases, locations inline, large constants elided.
const PRINT_GENERIC: &[&str] = &[
    "--mlir-print-op-generic",
    "--mlir-print-local-scope",
    "--mlir-print-debuginfo",
    "--mlir-elide-elementsattrs-if-larger=16",
    "--mlir-elide-resource-strings-if-larger=64",
    "-",
];

/// The first `<stdin>:LINE:COL: error: MESSAGE` line of mlir-opt's standard error.
fn first_diagnostic(stderr: &str) -> Option<(usize, usize, String)> {
    stderr.lines().find_map(|l| {
        let rest = l.strip_prefix("<stdin>:")?;
        let (line, rest) = rest.split_once(':')?;
        let (col, rest) = rest.split_once(':')?;
        let message = rest.trim_start().strip_prefix("error:")?.trim();
        Some((line.parse().ok()?, col.parse().ok()?, message.to_string()))
    })
}

/// The byte offset of 1-based `line` and byte column `col` in `source`, on a
/// character boundary and at most its length.
fn offset_of(source: &str, line: usize, col: usize) -> usize {
    let mut start = 0;
    for _ in 1..line.max(1) {
        match source[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return source.len(),
        }
    }
    let line_len = source[start..].find('\n').unwrap_or(source.len() - start);
    let mut at = start + col.saturating_sub(1).min(line_len);
    while !source.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A `"func.func"` op found in generic output.
struct Generic<'a> {
    /// Its `function_type` property.
    function_type: &'a str,
    /// Byte offset of its line in the output.
    at: usize,
    /// `loc("<stdin>":LINE:COL)` of the op, when it has one.
    loc: Option<(usize, usize)>,
}

impl Generic<'_> {
    fn signature(&self, name: &str) -> Result<Signature, String> {
        Signature::parse(self.function_type).map_err(|e| {
            let message = match e {
                Error::Parse { message, .. } => message,
                other => other.to_string(),
            };
            format!("`@{name}` has type `{}`: {message}", self.function_type)
        })
    }
}

/// Finds `name` among the `"func.func"` ops of generic output: the least
/// indented one (the outermost module's); two at that level is an error.
fn find_generic<'a>(printed: &'a str, name: &str) -> Result<Generic<'a>, String> {
    const OP: &str = "\"func.func\"() <{";
    let mut best: Option<(usize, Generic<'a>)> = None;
    let mut ambiguous = false;
    let mut at = 0;
    let lines: Vec<&str> = printed.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let line_at = at;
        at += line.len() + 1;
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let Some(props) = body.strip_prefix(OP) else {
            continue;
        };
        let Some(entries) = properties(props) else {
            continue;
        };
        let value = |key: &str| entries.iter().find(|(k, _)| *k == key).map(|&(_, v)| v);
        if value("sym_name").and_then(unquote).as_deref() != Some(name) {
            continue;
        }
        let Some(function_type) = value("function_type") else {
            continue;
        };
        match &best {
            Some((d, _)) if *d < indent => continue,
            Some((d, _)) if *d == indent => {
                ambiguous = true;
                continue;
            }
            _ => {}
        }
        ambiguous = false;
        // The op's location ends the line that closes its region (the first
        // line after it at the same indentation starting with `})`; block
        // labels share the indentation), or its own line.
        let closing = if body.ends_with("({") {
            lines[i + 1..]
                .iter()
                .find(|l| {
                    let b = l.trim_start();
                    l.len() - b.len() == indent && b.starts_with("})")
                })
                .copied()
        } else {
            Some(*line)
        };
        let loc = closing.and_then(stdin_loc);
        best = Some((
            indent,
            Generic {
                function_type,
                at: line_at,
                loc,
            },
        ));
    }
    match best {
        Some(_) if ambiguous => Err(format!(
            "several `func.func @{name}` in modules at the same depth"
        )),
        Some((_, g)) => Ok(g),
        None => Err(format!("no `func.func @{name}` in the kernel")),
    }
}

/// `LINE:COL` of a line ending in `loc("<stdin>":LINE:COL)`.
fn stdin_loc(line: &str) -> Option<(usize, usize)> {
    let rest = line.trim_end().strip_suffix(')')?;
    let i = rest.rfind("loc(\"<stdin>\":")?;
    let (l, c) = rest[i + "loc(\"<stdin>\":".len()..].split_once(':')?;
    Some((l.parse().ok()?, c.parse().ok()?))
}

/// The entries `key = value` of a property dictionary, from just after its
/// `<{` to its `}>`; `None` when it does not scan. Strings are skipped with
/// their escapes; `->`, `>=` and `<=` are not brackets.
fn properties(text: &str) -> Option<Vec<(&str, &str)>> {
    let b = text.as_bytes();
    let mut entries = Vec::new();
    let mut i = 0;
    loop {
        while b.get(i) == Some(&b' ') {
            i += 1;
        }
        if b.get(i) == Some(&b'}') {
            return Some(entries);
        }
        let key_start = i;
        if b.get(i) == Some(&b'"') {
            i = skip_string(b, i)?;
        } else {
            while b.get(i).is_some_and(|c| {
                c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'$' | b'-')
            }) {
                i += 1;
            }
        }
        let key = &text[key_start..i];
        if key.is_empty() {
            return None;
        }
        let mut value = "";
        if text[i..].starts_with(" = ") {
            i += 3;
            let value_start = i;
            let mut depth = 0usize;
            loop {
                let c = *b.get(i)?;
                match c {
                    b'"' => {
                        i = skip_string(b, i)?;
                        continue;
                    }
                    b'(' | b'[' | b'{' => depth += 1,
                    b'<' if b.get(i + 1) != Some(&b'=') => depth += 1,
                    b'>' if i > 0 && b[i - 1] == b'-' => {}
                    b'>' if b.get(i + 1) == Some(&b'=') => {}
                    b')' | b']' | b'>' => depth = depth.checked_sub(1)?,
                    b'}' if depth == 0 => break,
                    b'}' => depth -= 1,
                    b',' if depth == 0 => break,
                    _ => {}
                }
                i += 1;
            }
            value = text[value_start..i].trim_end();
        }
        entries.push((key, value));
        match b.get(i)? {
            b',' => i += 1,
            b'}' => return Some(entries),
            _ => return None,
        }
    }
}

/// The index just past the string literal starting at `b[i]` (a `"`).
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match *b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The text of a string literal as MLIR prints it (`\\`, `\"`, `\n`, `\t`
/// and two-digit hex escapes); `None` when it is not one.
fn unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let b = inner.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1)?;
        match c {
            b'\\' | b'"' => {
                out.push(c);
                i += 2;
            }
            b'n' => {
                out.push(b'\n');
                i += 2;
            }
            b't' => {
                out.push(b'\t');
                i += 2;
            }
            _ => {
                let hex = inner.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
        }
    }
    String::from_utf8(out).ok()
}
