//! MLIR function types: parsing and checking arguments against them.
//!
//! A [`Signature`] comes from a function type such as
//! `(memref<?x4xf32, strided<[?, 1], offset: ?>>, f32, index) -> (memref<?xf32>, f32)`
//! ([`Signature::parse`]) or from a `func.func` in a `.mlir` file
//! ([`Signature::from_mlir`]). Before a call each memref argument is checked
//! against its type: element type, rank, static sizes, and layout. The layout
//! check matters most: a callee whose type has the identity layout computes
//! addresses from the static row-major strides and offset 0, ignoring what the
//! descriptor says, so a strided view passed to it would silently give wrong
//! results. Such a view is refused (or copied to a contiguous buffer when the
//! caller asks, see [`crate::call::CallOptions`]).

use std::fmt;

use crate::MemRefError;

/// A scalar or memref element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `f16` (stored as 2 bytes; not passable as a scalar in dynamic calls).
    F16,
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
}

impl ElemType {
    /// Size in bytes of one element in memory.
    pub const fn size(self) -> usize {
        match self {
            ElemType::I1 | ElemType::I8 => 1,
            ElemType::F16 | ElemType::I16 => 2,
            ElemType::F32 | ElemType::I32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::Index => 8,
        }
    }

    /// The MLIR spelling.
    pub const fn name(self) -> &'static str {
        match self {
            ElemType::F16 => "f16",
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

    fn from_name(s: &str) -> Option<ElemType> {
        Some(match s {
            "f16" => ElemType::F16,
            "f32" => ElemType::F32,
            "f64" => ElemType::F64,
            "i1" => ElemType::I1,
            "i8" => ElemType::I8,
            "i16" => ElemType::I16,
            "i32" => ElemType::I32,
            "i64" => ElemType::I64,
            "index" => ElemType::Index,
            _ => return None,
        })
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
    fn err<T>(&self, message: impl Into<String>) -> Result<T, MemRefError> {
        Err(MemRefError::Parse {
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

    fn expect(&mut self, s: &str) -> Result<(), MemRefError> {
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

    fn int(&mut self) -> Result<i64, MemRefError> {
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

    fn dim(&mut self) -> Result<Dim, MemRefError> {
        if self.eat("?") {
            Ok(Dim::Dynamic)
        } else {
            self.int().map(Dim::Static)
        }
    }

    fn elem(&mut self) -> Result<ElemType, MemRefError> {
        let start = self.pos;
        let w = self.word();
        match ElemType::from_name(w) {
            Some(e) => Ok(e),
            None => {
                self.pos = start;
                self.err(format!(
                    "unsupported type `{w}` (f16 f32 f64 i1 i8 i16 i32 i64 index and memref are)"
                ))
            }
        }
    }

    fn ty(&mut self) -> Result<Type, MemRefError> {
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

    /// `(T, ..)` or a single type; when `args` is set, entries may be
    /// `%name: T {attrs}`.
    fn type_list(&mut self, args: bool) -> Result<Vec<Type>, MemRefError> {
        let mut out = Vec::new();
        if !self.eat("(") {
            out.push(self.ty()?);
            return Ok(out);
        }
        if self.eat(")") {
            return Ok(out);
        }
        loop {
            if args && self.eat("%") {
                self.word();
                self.expect(":")?;
            }
            out.push(self.ty()?);
            self.skip_attr_dict()?;
            if self.eat(")") {
                return Ok(out);
            }
            self.expect(",")?;
        }
    }

    /// Skips `{...}` (argument or result attributes), with nesting.
    fn skip_attr_dict(&mut self) -> Result<(), MemRefError> {
        self.skip_ws();
        if !self.rest().starts_with('{') {
            return Ok(());
        }
        let mut depth = 0usize;
        for (i, c) in self.rest().char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos += i + 1;
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        self.err("unterminated attribute dictionary")
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
    pub fn parse(text: &str) -> Result<Type, MemRefError> {
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
    pub fn parse(text: &str) -> Result<Signature, MemRefError> {
        let mut p = Parser { text, pos: 0 };
        p.skip_ws();
        if !p.rest().starts_with('(') {
            return p.err("a function type starts with `(`");
        }
        let inputs = p.type_list(false)?;
        let results = if p.eat("->") {
            p.type_list(false)?
        } else {
            Vec::new()
        };
        p.skip_ws();
        if p.pos != text.len() {
            return p.err("unexpected text after the function type");
        }
        Ok(Signature { inputs, results })
    }

    /// The signature of `func.func @name` in MLIR source text.
    pub fn from_mlir(source: &str, name: &str) -> Result<Signature, MemRefError> {
        let mut search = 0;
        while let Some(i) = source[search..].find("func.func") {
            let start = search + i + "func.func".len();
            search = start;
            let mut p = Parser {
                text: source,
                pos: start,
            };
            // Optional visibility.
            let save = p.pos;
            let w = p.word();
            if !matches!(w, "public" | "private" | "nested") {
                p.pos = save;
            }
            if !p.eat("@") {
                continue;
            }
            let found = p.word();
            if found != name {
                continue;
            }
            let inputs = p.type_list(true)?;
            let results = if p.eat("->") {
                p.type_list(false)?
            } else {
                Vec::new()
            };
            return Ok(Signature { inputs, results });
        }
        Err(MemRefError::Parse {
            at: source.len(),
            message: format!("no `func.func @{name}` in the source"),
        })
    }

    /// Checks the number of arguments.
    pub fn check_arity(&self, given: usize) -> Result<(), MemRefError> {
        if given != self.inputs.len() {
            return Err(MemRefError::Argument {
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
    /// against the type. Unranked types accept every rank.
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
            return Ok(());
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
            Layout::Identity => {
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
            }
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
