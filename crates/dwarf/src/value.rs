//! Typed values on the DWARF expression stack and the DWARF arithmetic, logic,
//! comparison and conversion operations on them (DWARF 5 §2.5.1).
//!
//! Every value has a base type: the generic type (integral, the size of an
//! address) or a signed, unsigned or floating-point type of a given byte
//! size. Binary operations need both operands to have the same type (DWARF 5
//! §2.5.1.4); logic operations, shifts and `DW_OP_mod` need integral types.

use alloc::vec::Vec;
use core::cmp::Ordering;
use core::fmt;

/// The base type of a [`Value`].
///
/// `Generic` is DWARF's architecture-specific integral type the size of an
/// address (its size is the evaluation's `address_size`); it wraps like an
/// unsigned integer, but comparisons, `DW_OP_div`, `DW_OP_abs` and
/// `DW_OP_shra` treat it as signed, as DWARF 5 specifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// The generic type: address-sized, integral.
    Generic,
    /// A signed integer of 1 to 8 bytes.
    Signed(u8),
    /// An unsigned integer of 1 to 8 bytes.
    Unsigned(u8),
    /// An IEEE 754 binary floating-point number of 4 or 8 bytes.
    Float(u8),
}

/// `DW_ATE_*` base type encodings this crate understands.
pub mod encoding {
    /// `DW_ATE_address`.
    pub const ADDRESS: u8 = 0x01;
    /// `DW_ATE_boolean`.
    pub const BOOLEAN: u8 = 0x02;
    /// `DW_ATE_float`.
    pub const FLOAT: u8 = 0x04;
    /// `DW_ATE_signed`.
    pub const SIGNED: u8 = 0x05;
    /// `DW_ATE_signed_char`.
    pub const SIGNED_CHAR: u8 = 0x06;
    /// `DW_ATE_unsigned`.
    pub const UNSIGNED: u8 = 0x07;
    /// `DW_ATE_unsigned_char`.
    pub const UNSIGNED_CHAR: u8 = 0x08;
    /// `DW_ATE_signed_fixed`.
    pub const SIGNED_FIXED: u8 = 0x0d;
    /// `DW_ATE_unsigned_fixed`.
    pub const UNSIGNED_FIXED: u8 = 0x0e;
    /// `DW_ATE_UTF`.
    pub const UTF: u8 = 0x10;
    /// `DW_ATE_UCS`.
    pub const UCS: u8 = 0x11;
    /// `DW_ATE_ASCII`.
    pub const ASCII: u8 = 0x12;
}

impl ValueType {
    /// Size in bytes, given the address size used for `Generic`.
    pub fn size(self, address_size: u8) -> u8 {
        match self {
            ValueType::Generic => address_size,
            ValueType::Signed(n) | ValueType::Unsigned(n) | ValueType::Float(n) => n,
        }
    }

    /// Whether the type is valid: integer sizes 1 to 8 (clang converts the pieces of a
    /// struct passed in registers to 3- and 7-byte integers), float sizes 4 or 8.
    pub fn is_valid(self) -> bool {
        match self {
            ValueType::Generic => true,
            ValueType::Signed(n) | ValueType::Unsigned(n) => (1..=8).contains(&n),
            ValueType::Float(n) => matches!(n, 4 | 8),
        }
    }

    /// The type of a base type DIE with `DW_AT_encoding` `encoding`
    /// (`DW_ATE_*`, see [`encoding`]) and `DW_AT_byte_size` `byte_size`;
    /// `None` if this crate cannot compute with it (e.g. 16-byte integers,
    /// `long double`, decimal or complex floats).
    pub fn from_encoding(encoding: u8, byte_size: u64) -> Option<ValueType> {
        let size = u8::try_from(byte_size).ok()?;
        let ty = match encoding {
            encoding::SIGNED | encoding::SIGNED_CHAR | encoding::SIGNED_FIXED => {
                ValueType::Signed(size)
            }
            encoding::ADDRESS
            | encoding::BOOLEAN
            | encoding::UNSIGNED
            | encoding::UNSIGNED_CHAR
            | encoding::UNSIGNED_FIXED
            | encoding::UTF
            | encoding::UCS
            | encoding::ASCII => ValueType::Unsigned(size),
            encoding::FLOAT => ValueType::Float(size),
            _ => return None,
        };
        ty.is_valid().then_some(ty)
    }

    /// Whether the type is integral (generic, signed or unsigned).
    pub fn is_integral(self) -> bool {
        !matches!(self, ValueType::Float(_))
    }

    fn is_signed(self) -> bool {
        matches!(self, ValueType::Signed(_) | ValueType::Generic)
    }
}

impl fmt::Display for ValueType {
    /// `generic`, `signed(4)`, `unsigned(1)`, `float(8)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Generic => write!(f, "generic"),
            ValueType::Signed(n) => write!(f, "signed({n})"),
            ValueType::Unsigned(n) => write!(f, "unsigned({n})"),
            ValueType::Float(n) => write!(f, "float({n})"),
        }
    }
}

/// A typed value. `bits` holds the value's representation zero-extended
/// from its type's size (always masked to that size); for floats, the IEEE
/// bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    /// The base type.
    pub ty: ValueType,
    /// The value's bits, zero-extended to 64 bits.
    pub bits: u64,
}

/// Why a value operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueError {
    /// The two operands have different base types.
    TypeMismatch,
    /// Division or modulo of integers by zero.
    DivisionByZero,
    /// The operation needs integral operands (logic, shifts, modulo).
    IntegralRequired,
    /// `DW_OP_reinterpret` between types of different sizes, or a type this
    /// crate cannot represent.
    BadConversion,
    /// An operation DWARF leaves undefined for this type: `DW_OP_neg` of an
    /// unsigned value, `DW_OP_shr` of a signed one, `DW_OP_shra` of an
    /// unsigned one, a negative shift count (rejected, as gimli does).
    UnsupportedForType,
}

fn mask(size: u8) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (u32::from(size) * 8)) - 1
    }
}

/// Binary value operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // named after the DWARF operations
pub enum BinaryOp {
    And,
    Div,
    Minus,
    Mod,
    Mul,
    Or,
    Plus,
    Shl,
    Shr,
    Shra,
    Xor,
}

/// Unary value operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // named after the DWARF operations
pub enum UnaryOp {
    Abs,
    Neg,
    Not,
}

/// Comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // named after the DWARF operations
pub enum CompareOp {
    Eq,
    Ge,
    Gt,
    Le,
    Lt,
    Ne,
}

impl Value {
    /// A value of type `ty`, truncated to the type's size.
    pub fn new(ty: ValueType, bits: u64, address_size: u8) -> Value {
        Value {
            ty,
            bits: bits & mask(ty.size(address_size)),
        }
    }

    /// A generic value, truncated to `address_size` bytes.
    pub fn generic(bits: u64, address_size: u8) -> Value {
        Value::new(ValueType::Generic, bits, address_size)
    }

    /// A 4- or 8-byte float value.
    pub fn float(ty_size: u8, x: f64) -> Value {
        if ty_size == 4 {
            Value {
                ty: ValueType::Float(4),
                bits: u64::from((x as f32).to_bits()),
            }
        } else {
            Value {
                ty: ValueType::Float(8),
                bits: x.to_bits(),
            }
        }
    }

    /// The value zero-extended to 64 bits.
    pub fn to_u64(self) -> u64 {
        self.bits
    }

    /// The value sign-extended from its size to 64 bits.
    pub fn to_i64(self, address_size: u8) -> i64 {
        let size = u32::from(self.ty.size(address_size)).clamp(1, 8);
        let shift = 64 - size * 8;
        ((self.bits << shift) as i64) >> shift
    }

    /// A float value as `f64`; `None` for integral types.
    pub fn to_f64(self) -> Option<f64> {
        match self.ty {
            ValueType::Float(4) => Some(f64::from(f32::from_bits(self.bits as u32))),
            ValueType::Float(_) => Some(f64::from_bits(self.bits)),
            _ => None,
        }
    }

    /// The value as signed if its type is signed (or generic), else unsigned,
    /// widened to `i128`.
    fn to_i128(self, address_size: u8) -> i128 {
        if self.ty.is_signed() {
            i128::from(self.to_i64(address_size))
        } else {
            i128::from(self.bits)
        }
    }

    /// The value's bytes in target (little-endian) order, its type's size long.
    pub fn to_bytes(self, address_size: u8) -> Vec<u8> {
        let size = usize::from(self.ty.size(address_size)).min(8);
        self.bits.to_le_bytes()[..size].to_vec()
    }

    /// A value of type `ty` from little-endian bytes (missing high bytes are
    /// zero, or copies of the sign bit for signed types; extra bytes are
    /// ignored).
    pub fn from_bytes(ty: ValueType, bytes: &[u8], address_size: u8) -> Value {
        let size = usize::from(ty.size(address_size)).min(8);
        let mut b = [0u8; 8];
        for (d, s) in b.iter_mut().zip(bytes.iter().take(size)) {
            *d = *s;
        }
        let n = bytes.len().min(size);
        if matches!(ty, ValueType::Signed(_)) && n > 0 && n < size && bytes[n - 1] & 0x80 != 0 {
            for d in &mut b[n..] {
                *d = 0xff;
            }
        }
        Value::new(ty, u64::from_le_bytes(b), address_size)
    }

    fn float_binary(self, op: BinaryOp, rhs: Value) -> Result<Value, ValueError> {
        let (Some(a), Some(b), ValueType::Float(size)) = (self.to_f64(), rhs.to_f64(), self.ty)
        else {
            return Err(ValueError::IntegralRequired);
        };
        // f32 arithmetic is done in f32 so results round as the target would.
        let r = if size == 4 {
            float_op(op, a as f32, b as f32).map(f64::from)
        } else {
            float_op(op, a, b)
        };
        match r {
            Some(r) => Ok(Value::float(if size == 4 { 4 } else { 8 }, r)),
            None => Err(ValueError::IntegralRequired),
        }
    }

    /// `self op rhs` (`self` is the deeper stack entry). Shifts accept any
    /// integral shift count; the other operations need equal types (a generic
    /// operand and a signed integer of the address's size count as that signed
    /// type, as in gdb). Logic, shifts and modulo need integral types.
    pub fn binary(self, op: BinaryOp, rhs: Value, address_size: u8) -> Result<Value, ValueError> {
        let (lhs, rhs) = Value::meet_generic(self, rhs, address_size);
        lhs.binary_same(op, rhs, address_size)
    }

    /// A generic operand meets a signed integer of the address's size as that type, as
    /// gdb reads them (its generic type is that signed integer): LLVM writes such pairs,
    /// `DW_OP_convert`ing one operand of `DW_OP_minus` only. The bits are the same.
    fn meet_generic(a: Value, b: Value, address_size: u8) -> (Value, Value) {
        let signed_address = ValueType::Signed(address_size);
        match (a.ty, b.ty) {
            (ValueType::Generic, t) if t == signed_address => (Value { ty: t, ..a }, b),
            (t, ValueType::Generic) if t == signed_address => (a, Value { ty: t, ..b }),
            _ => (a, b),
        }
    }

    fn binary_same(self, op: BinaryOp, rhs: Value, address_size: u8) -> Result<Value, ValueError> {
        let shift = matches!(op, BinaryOp::Shl | BinaryOp::Shr | BinaryOp::Shra);
        if shift {
            if !self.ty.is_integral() || !rhs.ty.is_integral() {
                return Err(ValueError::IntegralRequired);
            }
            let negative_count =
                matches!(rhs.ty, ValueType::Signed(_)) && rhs.to_i64(address_size) < 0;
            let wrong_sign = matches!(
                (op, self.ty),
                (BinaryOp::Shr, ValueType::Signed(_)) | (BinaryOp::Shra, ValueType::Unsigned(_))
            );
            if negative_count || wrong_sign {
                return Err(ValueError::UnsupportedForType);
            }
        } else if self.ty != rhs.ty {
            return Err(ValueError::TypeMismatch);
        }
        if !self.ty.is_integral() {
            return self.float_binary(op, rhs);
        }
        let (a, b) = (self.bits, rhs.bits);
        let bits_size = u32::from(self.ty.size(address_size)) * 8;
        let r = match op {
            BinaryOp::And => a & b,
            BinaryOp::Or => a | b,
            BinaryOp::Xor => a ^ b,
            BinaryOp::Plus => a.wrapping_add(b),
            BinaryOp::Minus => a.wrapping_sub(b),
            BinaryOp::Mul => a.wrapping_mul(b),
            BinaryOp::Div => {
                if b == 0 {
                    return Err(ValueError::DivisionByZero);
                }
                let (x, y) = (self.to_i128(address_size), rhs.to_i128(address_size));
                (x / y) as u64
            }
            BinaryOp::Mod => {
                if b == 0 {
                    return Err(ValueError::DivisionByZero);
                }
                // DWARF's generic modulo is unsigned (as gimli does).
                if matches!(self.ty, ValueType::Signed(_)) {
                    (self.to_i128(address_size) % rhs.to_i128(address_size)) as u64
                } else {
                    a % b
                }
            }
            BinaryOp::Shl => {
                if b >= u64::from(bits_size) {
                    0
                } else {
                    a << b
                }
            }
            BinaryOp::Shr => {
                if b >= u64::from(bits_size) {
                    0
                } else {
                    a >> b
                }
            }
            BinaryOp::Shra => {
                let s = self.to_i64(address_size);
                let n = b.min(63) as u32;
                (s >> n) as u64
            }
        };
        Ok(Value::new(self.ty, r, address_size))
    }

    /// A unary operation; `DW_OP_not` needs an integral type.
    pub fn unary(self, op: UnaryOp, address_size: u8) -> Result<Value, ValueError> {
        if let ValueType::Float(size) = self.ty {
            if !self.ty.is_valid() {
                return Err(ValueError::BadConversion);
            }
            let sign = 1u64 << (u32::from(size) * 8 - 1);
            let bits = match op {
                UnaryOp::Neg => self.bits ^ sign,
                UnaryOp::Abs => self.bits & !sign,
                UnaryOp::Not => return Err(ValueError::IntegralRequired),
            };
            return Ok(Value::new(self.ty, bits, address_size));
        }
        if op == UnaryOp::Neg && matches!(self.ty, ValueType::Unsigned(_)) {
            return Err(ValueError::UnsupportedForType);
        }
        let r = match op {
            UnaryOp::Not => !self.bits,
            UnaryOp::Neg => self.bits.wrapping_neg(),
            UnaryOp::Abs => {
                if self.ty.is_signed() {
                    self.to_i64(address_size).unsigned_abs()
                } else {
                    self.bits
                }
            }
        };
        Ok(Value::new(self.ty, r, address_size))
    }

    /// `self op rhs` (`self` is the deeper stack entry); signed for signed
    /// and generic types, IEEE for floats (every comparison with a NaN is
    /// false except `Ne`).
    pub fn compare(self, op: CompareOp, rhs: Value, address_size: u8) -> Result<bool, ValueError> {
        let (lhs, rhs) = Value::meet_generic(self, rhs, address_size);
        lhs.compare_same(op, rhs, address_size)
    }

    fn compare_same(self, op: CompareOp, rhs: Value, address_size: u8) -> Result<bool, ValueError> {
        if self.ty != rhs.ty {
            return Err(ValueError::TypeMismatch);
        }
        let ord = match (self.to_f64(), rhs.to_f64()) {
            (Some(a), Some(b)) => a.partial_cmp(&b),
            _ => Some(self.to_i128(address_size).cmp(&rhs.to_i128(address_size))),
        };
        Ok(match (op, ord) {
            (CompareOp::Ne, None) => true,
            (_, None) => false,
            (CompareOp::Eq, Some(o)) => o == Ordering::Equal,
            (CompareOp::Ne, Some(o)) => o != Ordering::Equal,
            (CompareOp::Ge, Some(o)) => o != Ordering::Less,
            (CompareOp::Gt, Some(o)) => o == Ordering::Greater,
            (CompareOp::Le, Some(o)) => o != Ordering::Greater,
            (CompareOp::Lt, Some(o)) => o == Ordering::Less,
        })
    }

    /// `DW_OP_convert`: the same number in type `to`. Integers truncate or
    /// extend by the source's signedness (the generic type counts as
    /// unsigned here, as gimli does); floats to integers round toward zero
    /// and saturate at the target's range (NaN gives 0).
    pub fn convert(self, to: ValueType, address_size: u8) -> Result<Value, ValueError> {
        if !to.is_valid() {
            return Err(ValueError::BadConversion);
        }
        if let Some(x) = self.to_f64() {
            let bits = match to {
                ValueType::Float(n) => return Ok(Value::float(n, x)),
                ValueType::Signed(n) => {
                    let half = 1i128 << (u32::from(n) * 8 - 1);
                    (x as i128).clamp(-half, half - 1) as u64
                }
                _ => (x as u64).min(mask(to.size(address_size))),
            };
            return Ok(Value::new(to, bits, address_size));
        }
        let wide = match self.ty {
            ValueType::Signed(_) => i128::from(self.to_i64(address_size)),
            _ => i128::from(self.bits),
        };
        Ok(match to {
            // Straight to f32: going through f64 would round twice.
            ValueType::Float(4) => Value {
                ty: to,
                bits: u64::from((wide as f32).to_bits()),
            },
            ValueType::Float(n) => Value::float(n, wide as f64),
            _ => Value::new(to, wide as u64, address_size),
        })
    }

    /// `DW_OP_reinterpret`: the same bits in type `to`, which must have the
    /// same size.
    pub fn reinterpret(self, to: ValueType, address_size: u8) -> Result<Value, ValueError> {
        if !to.is_valid() || to.size(address_size) != self.ty.size(address_size) {
            return Err(ValueError::BadConversion);
        }
        Ok(Value::new(to, self.bits, address_size))
    }
}

/// The arithmetic DWARF defines on floating-point values, in the values' own
/// precision; `None` for the integral-only operations.
fn float_op<T>(op: BinaryOp, a: T, b: T) -> Option<T>
where
    T: core::ops::Add<Output = T>
        + core::ops::Sub<Output = T>
        + core::ops::Mul<Output = T>
        + core::ops::Div<Output = T>,
{
    Some(match op {
        BinaryOp::Plus => a + b,
        BinaryOp::Minus => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        _ => return None,
    })
}
