//! libffi: the call interfaces of the C wrapper and of the expanded convention, and the
//! slots arguments and results occupy.

use std::ffi::c_void;

use libffi::middle::{Arg as FfiArg, Cif, Type as FfiType};

use super::args::Scalar;
use crate::float::Format;
use crate::signature::{ElemType, Signature, Type};

/// Whether the C wrapper returns its results through a first pointer argument.
pub(super) fn struct_result(sig: &Signature) -> bool {
    sig.results.len() > 1 || matches!(sig.results.first(), Some(Type::MemRef(_)))
}

/// The libffi description of `_mlir_ciface_NAME` for `sig`, or `None` when
/// it has a complex scalar (see [`NO_COMPLEX_SCALARS`]).
pub(super) fn ciface_cif(sig: &Signature) -> Option<Cif> {
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
pub(super) fn expanded_cif(sig: &Signature) -> Option<Cif> {
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
pub(super) enum Slot {
    F32(f32),
    F64(f64),
    U8(u8),
    I16(i16),
    I32(i32),
    I64(i64),
    Ptr(*mut c_void),
}

impl Slot {
    pub(super) fn arg(&self) -> FfiArg {
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

    pub(super) fn scalar(s: Scalar) -> Slot {
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

pub(super) fn scalar_ffi_type(e: ElemType) -> Option<FfiType> {
    Some(match e {
        ElemType::F32 => FfiType::f32(),
        ElemType::F64 => FfiType::f64(),
        ElemType::I1 | ElemType::I8 => FfiType::u8(),
        ElemType::I16 => FfiType::i16(),
        ElemType::I32 => FfiType::i32(),
        ElemType::I64 | ElemType::Index => FfiType::i64(),
        ElemType::ComplexF32 | ElemType::ComplexF64 | ElemType::Vector { .. } => return None,
        // The narrow floats (listed in `float`). See `Slot::scalar`: `f16` and `bf16` in
        // the low 16 bits of a float register, an `f8` as an `i8`.
        narrow => match Format::of(narrow)?.bytes() {
            2 => FfiType::f32(),
            _ => FfiType::u8(),
        },
    })
}

/// Why a signature with a complex or vector scalar cannot be called dynamically (libffi
/// would need the target's rules for small structs and vector registers; memrefs of them
/// pass).
pub(super) const NO_COMPLEX_SCALARS: &str =
    "complex and vector scalars cannot be passed in dynamic \
     calls (a memref of them can)";

/// Size and alignment of a result field in the C wrapper's result struct.
pub(super) fn field_layout(t: &Type) -> (usize, usize) {
    match t {
        Type::Scalar(e) => (e.size(), e.align()),
        Type::MemRef(m) => match m.rank() {
            Some(r) => (24 + 16 * r, 8),
            None => (16, 8),
        },
    }
}

/// A ranked descriptor as 64-bit words: `allocated, aligned, offset, sizes.., strides..`.
pub(super) fn descriptor_words(
    aligned: *mut u8,
    offset: i64,
    sizes: &[i64],
    strides: &[i64],
) -> Vec<i64> {
    let mut w = Vec::with_capacity(3 + 2 * sizes.len());
    w.push(aligned as i64);
    w.push(aligned as i64);
    w.push(offset);
    w.extend_from_slice(sizes);
    w.extend_from_slice(strides);
    w
}
