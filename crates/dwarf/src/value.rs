//! Typed values on the DWARF expression stack and the DWARF arithmetic, logic
//! and comparison operations on them.

use alloc::vec::Vec;

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
    /// A signed integer of 1, 2, 4 or 8 bytes.
    Signed(u8),
    /// An unsigned integer of 1, 2, 4 or 8 bytes.
    Unsigned(u8),
}

impl ValueType {
    /// Size in bytes, given the address size used for `Generic`.
    pub fn size(self, address_size: u8) -> u8 {
        match self {
            ValueType::Generic => address_size,
            ValueType::Signed(n) | ValueType::Unsigned(n) => n,
        }
    }

    /// Whether the type is valid: integer sizes 1, 2, 4 or 8.
    pub fn is_valid(self) -> bool {
        match self {
            ValueType::Generic => true,
            ValueType::Signed(n) | ValueType::Unsigned(n) => matches!(n, 1 | 2 | 4 | 8),
        }
    }

    fn is_signed(self) -> bool {
        matches!(self, ValueType::Signed(_) | ValueType::Generic)
    }
}

/// A typed value. `bits` holds the value zero-extended from its type's size
/// (always masked to that size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    /// The base type.
    pub ty: ValueType,
    /// The value's bits, zero-extended to 64 bits.
    pub bits: u64,
}

/// Why a value operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueError {
    /// The two operands have different base types.
    TypeMismatch,
    /// Division or modulo by zero.
    DivisionByZero,
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
    /// zero; extra bytes are ignored).
    pub fn from_bytes(ty: ValueType, bytes: &[u8], address_size: u8) -> Value {
        let mut b = [0u8; 8];
        for (d, s) in b.iter_mut().zip(bytes) {
            *d = *s;
        }
        Value::new(ty, u64::from_le_bytes(b), address_size)
    }

    /// `self op rhs` (`self` is the deeper stack entry). Shifts accept any
    /// integral shift count; the other operations need equal types.
    pub fn binary(self, op: BinaryOp, rhs: Value, address_size: u8) -> Result<Value, ValueError> {
        let shift = matches!(op, BinaryOp::Shl | BinaryOp::Shr | BinaryOp::Shra);
        if !shift && self.ty != rhs.ty {
            return Err(ValueError::TypeMismatch);
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

    /// A unary operation.
    pub fn unary(self, op: UnaryOp, address_size: u8) -> Value {
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
        Value::new(self.ty, r, address_size)
    }

    /// `self op rhs` (`self` is the deeper stack entry); signed for signed
    /// and generic types.
    pub fn compare(self, op: CompareOp, rhs: Value, address_size: u8) -> Result<bool, ValueError> {
        if self.ty != rhs.ty {
            return Err(ValueError::TypeMismatch);
        }
        let (a, b) = (self.to_i128(address_size), rhs.to_i128(address_size));
        Ok(match op {
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
            CompareOp::Ge => a >= b,
            CompareOp::Gt => a > b,
            CompareOp::Le => a <= b,
            CompareOp::Lt => a < b,
        })
    }
}
