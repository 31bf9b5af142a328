//! DWARF expression operations: the [`Op`] type, binary [`decode`]/[`encode`]
//! and the text form [`to_text`] (read back by [`crate::parse_text`]).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use crate::error::Error;

/// How the heterogeneous-debugging extension operations are encoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ExtensionEncoding {
    /// Current LLVM: `DW_OP_LLVM_user` (0xe9) followed by a ULEB128
    /// sub-opcode (LLVM 19's table: nop 0x01, form_aspace_address 0x02 ...
    /// select_bit_piece 0x0c). `DW_OP_aspace_implicit_pointer`,
    /// `DW_OP_overlay` and `DW_OP_bit_overlay` have no sub-opcode here.
    #[default]
    User,
    /// The older direct opcodes 0xe1 (form_aspace_address) ... 0xec
    /// (select_bit_piece), as in AMD's ROCm LLVM and libdwarf's `dwarf.h`.
    Legacy,
}

/// Target parameters that the binary form of an expression depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Encoding {
    /// Size of `DW_OP_addr`'s operand: 4 or 8.
    pub address_size: u8,
    /// Size of `DW_OP_call_ref`'s and the implicit pointers' DIE offset:
    /// 4 (32-bit DWARF) or 8 (64-bit DWARF).
    pub offset_size: u8,
    /// How the extension operations are encoded.
    pub extension: ExtensionEncoding,
}

impl Default for Encoding {
    /// 64-bit target, 32-bit DWARF, [`ExtensionEncoding::User`].
    fn default() -> Self {
        Encoding {
            address_size: 8,
            offset_size: 4,
            extension: ExtensionEncoding::User,
        }
    }
}

impl Encoding {
    pub(crate) fn check(&self) -> Result<(), Error> {
        if !matches!(self.address_size, 4 | 8) {
            return Err(Error::BadEncoding {
                what: "address_size must be 4 or 8",
            });
        }
        if !matches!(self.offset_size, 4 | 8) {
            return Err(Error::BadEncoding {
                what: "offset_size must be 4 or 8",
            });
        }
        Ok(())
    }
}

/// One DWARF expression operation with its operands.
///
/// Operands keep the width and signedness of their encoding: fixed-size
/// operands use the matching integer type, ULEB128 operands `u64`, SLEB128
/// operands `i64`, blocks `Vec<u8>`. Branch operands (`Bra`, `Skip`) are the
/// signed byte displacement stored in DWARF, relative to the end of the branch
/// operation. Type operands (`type_offset`) are the unit-relative DIE offset of
/// a base type; 0 means the generic type. Little-endian byte order is assumed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // variants are named after the DWARF operations
pub enum Op {
    Addr(u64),
    Deref,
    Const1u(u8),
    Const1s(i8),
    Const2u(u16),
    Const2s(i16),
    Const4u(u32),
    Const4s(i32),
    Const8u(u64),
    Const8s(i64),
    Constu(u64),
    Consts(i64),
    Dup,
    Drop,
    Over,
    Pick(u8),
    Swap,
    Rot,
    Xderef,
    Abs,
    And,
    Div,
    Minus,
    Mod,
    Mul,
    Neg,
    Not,
    Or,
    Plus,
    PlusUconst(u64),
    Shl,
    Shr,
    Shra,
    Xor,
    Bra(i16),
    Eq,
    Ge,
    Gt,
    Le,
    Lt,
    Ne,
    Skip(i16),
    /// `DW_OP_lit0`..`DW_OP_lit31`; the literal must be `< 32`.
    Lit(u8),
    /// `DW_OP_reg0`..`DW_OP_reg31`; the register must be `< 32`.
    Reg(u8),
    /// `DW_OP_breg0`..`DW_OP_breg31` with its SLEB128 displacement.
    Breg(u8, i64),
    Regx(u64),
    Fbreg(i64),
    Bregx(u64, i64),
    Piece(u64),
    DerefSize(u8),
    XderefSize(u8),
    Nop,
    PushObjectAddress,
    Call2(u16),
    Call4(u32),
    CallRef(u64),
    FormTlsAddress,
    CallFrameCfa,
    BitPiece {
        size: u64,
        offset: u64,
    },
    ImplicitValue(Vec<u8>),
    StackValue,
    ImplicitPointer {
        die: u64,
        offset: i64,
    },
    Addrx(u64),
    Constx(u64),
    /// The operand is the encoded sub-expression.
    EntryValue(Vec<u8>),
    /// The value block is at most 255 bytes.
    ConstType {
        type_offset: u64,
        value: Vec<u8>,
    },
    RegvalType {
        register: u64,
        type_offset: u64,
    },
    DerefType {
        size: u8,
        type_offset: u64,
    },
    XderefType {
        size: u8,
        type_offset: u64,
    },
    Convert(u64),
    Reinterpret(u64),
    // The heterogeneous-debugging extension.
    FormAspaceAddress,
    PushLane,
    Offset,
    OffsetUconst(u64),
    BitOffset,
    CallFrameEntryReg(u64),
    Undefined,
    AspaceBregx {
        register: u64,
        offset: i64,
    },
    /// Only encodable with [`ExtensionEncoding::Legacy`].
    AspaceImplicitPointer {
        die: u64,
        offset: i64,
    },
    PieceEnd,
    Extend {
        bit_size: u64,
        count: u64,
    },
    SelectBitPiece {
        bit_size: u64,
        count: u64,
    },
    /// `DW_OP_LLVM_overlay`: pops a byte size, a byte offset, an overlay
    /// location and a base location. Not encodable: LLVM 19's
    /// `DW_OP_LLVM_user` table has no sub-opcode for it (the normative text
    /// says "TBA"), nor is there a direct opcode; text and [`Op`] only.
    Overlay,
    /// `DW_OP_LLVM_bit_overlay`: as [`Op::Overlay`] with a bit size and bit
    /// offset. Not encodable either.
    BitOverlay,
    /// `DW_OP_LLVM_nop` (`DW_OP_LLVM_user` sub-opcode 0x01): does nothing.
    /// Encoded as `DW_OP_nop` (0x96) with [`ExtensionEncoding::Legacy`].
    LlvmNop,
}

macro_rules! numbered {
    ($p:literal) => {
        [
            concat!($p, 0),
            concat!($p, 1),
            concat!($p, 2),
            concat!($p, 3),
            concat!($p, 4),
            concat!($p, 5),
            concat!($p, 6),
            concat!($p, 7),
            concat!($p, 8),
            concat!($p, 9),
            concat!($p, 10),
            concat!($p, 11),
            concat!($p, 12),
            concat!($p, 13),
            concat!($p, 14),
            concat!($p, 15),
            concat!($p, 16),
            concat!($p, 17),
            concat!($p, 18),
            concat!($p, 19),
            concat!($p, 20),
            concat!($p, 21),
            concat!($p, 22),
            concat!($p, 23),
            concat!($p, 24),
            concat!($p, 25),
            concat!($p, 26),
            concat!($p, 27),
            concat!($p, 28),
            concat!($p, 29),
            concat!($p, 30),
            concat!($p, 31),
        ]
    };
}

static LIT_NAMES: [&str; 32] = numbered!("DW_OP_lit");
static REG_NAMES: [&str; 32] = numbered!("DW_OP_reg");
static BREG_NAMES: [&str; 32] = numbered!("DW_OP_breg");

fn numbered_name(
    table: &'static [&'static str; 32],
    n: u8,
    fallback: &'static str,
) -> &'static str {
    table.get(usize::from(n)).copied().unwrap_or(fallback)
}

/// Sub-opcodes of `DW_OP_LLVM_user` (0xe9), current LLVM `Dwarf.def`.
mod user {
    pub const OPCODE: u8 = 0xe9;
    pub const NOP: u64 = 0x01;
    pub const FORM_ASPACE_ADDRESS: u64 = 0x02;
    pub const PUSH_LANE: u64 = 0x03;
    pub const OFFSET: u64 = 0x04;
    pub const OFFSET_UCONST: u64 = 0x05;
    pub const BIT_OFFSET: u64 = 0x06;
    pub const CALL_FRAME_ENTRY_REG: u64 = 0x07;
    pub const UNDEFINED: u64 = 0x08;
    pub const ASPACE_BREGX: u64 = 0x09;
    pub const PIECE_END: u64 = 0x0a;
    pub const EXTEND: u64 = 0x0b;
    pub const SELECT_BIT_PIECE: u64 = 0x0c;
}

/// Direct opcodes of the older (ROCm) encoding.
mod legacy {
    pub const FORM_ASPACE_ADDRESS: u8 = 0xe1;
    pub const PUSH_LANE: u8 = 0xe2;
    pub const OFFSET: u8 = 0xe3;
    pub const OFFSET_UCONST: u8 = 0xe4;
    pub const BIT_OFFSET: u8 = 0xe5;
    pub const CALL_FRAME_ENTRY_REG: u8 = 0xe6;
    pub const UNDEFINED: u8 = 0xe7;
    pub const ASPACE_BREGX: u8 = 0xe8;
    pub const ASPACE_IMPLICIT_POINTER: u8 = 0xe9;
    pub const PIECE_END: u8 = 0xea;
    pub const EXTEND: u8 = 0xeb;
    pub const SELECT_BIT_PIECE: u8 = 0xec;
}

impl Op {
    /// The operation's name as the spec writes it (`DW_OP_lit5`,
    /// `DW_OP_offset_uconst`; extension operations without `LLVM_`, except
    /// `DW_OP_LLVM_nop`, which differs from `DW_OP_nop` only in encoding).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Addr(_) => "DW_OP_addr",
            Op::Deref => "DW_OP_deref",
            Op::Const1u(_) => "DW_OP_const1u",
            Op::Const1s(_) => "DW_OP_const1s",
            Op::Const2u(_) => "DW_OP_const2u",
            Op::Const2s(_) => "DW_OP_const2s",
            Op::Const4u(_) => "DW_OP_const4u",
            Op::Const4s(_) => "DW_OP_const4s",
            Op::Const8u(_) => "DW_OP_const8u",
            Op::Const8s(_) => "DW_OP_const8s",
            Op::Constu(_) => "DW_OP_constu",
            Op::Consts(_) => "DW_OP_consts",
            Op::Dup => "DW_OP_dup",
            Op::Drop => "DW_OP_drop",
            Op::Over => "DW_OP_over",
            Op::Pick(_) => "DW_OP_pick",
            Op::Swap => "DW_OP_swap",
            Op::Rot => "DW_OP_rot",
            Op::Xderef => "DW_OP_xderef",
            Op::Abs => "DW_OP_abs",
            Op::And => "DW_OP_and",
            Op::Div => "DW_OP_div",
            Op::Minus => "DW_OP_minus",
            Op::Mod => "DW_OP_mod",
            Op::Mul => "DW_OP_mul",
            Op::Neg => "DW_OP_neg",
            Op::Not => "DW_OP_not",
            Op::Or => "DW_OP_or",
            Op::Plus => "DW_OP_plus",
            Op::PlusUconst(_) => "DW_OP_plus_uconst",
            Op::Shl => "DW_OP_shl",
            Op::Shr => "DW_OP_shr",
            Op::Shra => "DW_OP_shra",
            Op::Xor => "DW_OP_xor",
            Op::Bra(_) => "DW_OP_bra",
            Op::Eq => "DW_OP_eq",
            Op::Ge => "DW_OP_ge",
            Op::Gt => "DW_OP_gt",
            Op::Le => "DW_OP_le",
            Op::Lt => "DW_OP_lt",
            Op::Ne => "DW_OP_ne",
            Op::Skip(_) => "DW_OP_skip",
            Op::Lit(n) => numbered_name(&LIT_NAMES, *n, "DW_OP_lit"),
            Op::Reg(n) => numbered_name(&REG_NAMES, *n, "DW_OP_reg"),
            Op::Breg(n, _) => numbered_name(&BREG_NAMES, *n, "DW_OP_breg"),
            Op::Regx(_) => "DW_OP_regx",
            Op::Fbreg(_) => "DW_OP_fbreg",
            Op::Bregx(..) => "DW_OP_bregx",
            Op::Piece(_) => "DW_OP_piece",
            Op::DerefSize(_) => "DW_OP_deref_size",
            Op::XderefSize(_) => "DW_OP_xderef_size",
            Op::Nop => "DW_OP_nop",
            Op::PushObjectAddress => "DW_OP_push_object_address",
            Op::Call2(_) => "DW_OP_call2",
            Op::Call4(_) => "DW_OP_call4",
            Op::CallRef(_) => "DW_OP_call_ref",
            Op::FormTlsAddress => "DW_OP_form_tls_address",
            Op::CallFrameCfa => "DW_OP_call_frame_cfa",
            Op::BitPiece { .. } => "DW_OP_bit_piece",
            Op::ImplicitValue(_) => "DW_OP_implicit_value",
            Op::StackValue => "DW_OP_stack_value",
            Op::ImplicitPointer { .. } => "DW_OP_implicit_pointer",
            Op::Addrx(_) => "DW_OP_addrx",
            Op::Constx(_) => "DW_OP_constx",
            Op::EntryValue(_) => "DW_OP_entry_value",
            Op::ConstType { .. } => "DW_OP_const_type",
            Op::RegvalType { .. } => "DW_OP_regval_type",
            Op::DerefType { .. } => "DW_OP_deref_type",
            Op::XderefType { .. } => "DW_OP_xderef_type",
            Op::Convert(_) => "DW_OP_convert",
            Op::Reinterpret(_) => "DW_OP_reinterpret",
            Op::FormAspaceAddress => "DW_OP_form_aspace_address",
            Op::PushLane => "DW_OP_push_lane",
            Op::Offset => "DW_OP_offset",
            Op::OffsetUconst(_) => "DW_OP_offset_uconst",
            Op::BitOffset => "DW_OP_bit_offset",
            Op::CallFrameEntryReg(_) => "DW_OP_call_frame_entry_reg",
            Op::Undefined => "DW_OP_undefined",
            Op::AspaceBregx { .. } => "DW_OP_aspace_bregx",
            Op::AspaceImplicitPointer { .. } => "DW_OP_aspace_implicit_pointer",
            Op::PieceEnd => "DW_OP_piece_end",
            Op::Extend { .. } => "DW_OP_extend",
            Op::SelectBitPiece { .. } => "DW_OP_select_bit_piece",
            Op::Overlay => "DW_OP_overlay",
            Op::BitOverlay => "DW_OP_bit_overlay",
            Op::LlvmNop => "DW_OP_LLVM_nop",
        }
    }

    /// Whether this is one of the heterogeneous-debugging extension operations.
    pub fn is_extension(&self) -> bool {
        matches!(
            self,
            Op::FormAspaceAddress
                | Op::PushLane
                | Op::Offset
                | Op::OffsetUconst(_)
                | Op::BitOffset
                | Op::CallFrameEntryReg(_)
                | Op::Undefined
                | Op::AspaceBregx { .. }
                | Op::AspaceImplicitPointer { .. }
                | Op::PieceEnd
                | Op::Extend { .. }
                | Op::SelectBitPiece { .. }
                | Op::Overlay
                | Op::BitOverlay
                | Op::LlvmNop
        )
    }
}

/// Name of a standard opcode without operands needing context, for errors.
fn opcode_name(code: u8, ext: ExtensionEncoding) -> &'static str {
    match code {
        0x03 => "DW_OP_addr",
        0x08 => "DW_OP_const1u",
        0x09 => "DW_OP_const1s",
        0x0a => "DW_OP_const2u",
        0x0b => "DW_OP_const2s",
        0x0c => "DW_OP_const4u",
        0x0d => "DW_OP_const4s",
        0x0e => "DW_OP_const8u",
        0x0f => "DW_OP_const8s",
        0x10 => "DW_OP_constu",
        0x11 => "DW_OP_consts",
        0x15 => "DW_OP_pick",
        0x23 => "DW_OP_plus_uconst",
        0x28 => "DW_OP_bra",
        0x2f => "DW_OP_skip",
        0x70..=0x8f => numbered_name(&BREG_NAMES, code - 0x70, "DW_OP_breg"),
        0x90 => "DW_OP_regx",
        0x91 => "DW_OP_fbreg",
        0x92 => "DW_OP_bregx",
        0x93 => "DW_OP_piece",
        0x94 => "DW_OP_deref_size",
        0x95 => "DW_OP_xderef_size",
        0x98 => "DW_OP_call2",
        0x99 => "DW_OP_call4",
        0x9a => "DW_OP_call_ref",
        0x9d => "DW_OP_bit_piece",
        0x9e => "DW_OP_implicit_value",
        0xa0 => "DW_OP_implicit_pointer",
        0xa1 => "DW_OP_addrx",
        0xa2 => "DW_OP_constx",
        0xa3 => "DW_OP_entry_value",
        0xa4 => "DW_OP_const_type",
        0xa5 => "DW_OP_regval_type",
        0xa6 => "DW_OP_deref_type",
        0xa7 => "DW_OP_xderef_type",
        0xa8 => "DW_OP_convert",
        0xa9 => "DW_OP_reinterpret",
        user::OPCODE if ext == ExtensionEncoding::User => "DW_OP_LLVM_user",
        legacy::OFFSET_UCONST => "DW_OP_offset_uconst",
        legacy::CALL_FRAME_ENTRY_REG => "DW_OP_call_frame_entry_reg",
        legacy::ASPACE_BREGX => "DW_OP_aspace_bregx",
        legacy::ASPACE_IMPLICIT_POINTER => "DW_OP_aspace_implicit_pointer",
        legacy::EXTEND => "DW_OP_extend",
        legacy::SELECT_BIT_PIECE => "DW_OP_select_bit_piece",
        _ => "DW_OP_unknown",
    }
}

fn user_sub_name(sub: u64) -> &'static str {
    match sub {
        user::NOP => "DW_OP_LLVM_nop",
        user::OFFSET_UCONST => "DW_OP_offset_uconst",
        user::CALL_FRAME_ENTRY_REG => "DW_OP_call_frame_entry_reg",
        user::ASPACE_BREGX => "DW_OP_aspace_bregx",
        user::EXTEND => "DW_OP_extend",
        user::SELECT_BIT_PIECE => "DW_OP_select_bit_piece",
        _ => "DW_OP_LLVM_user",
    }
}

// ---------------------------------------------------------------------------
// Decoding

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    start: usize,
    op: &'static str,
}

impl Reader<'_> {
    fn truncated(&self) -> Error {
        Error::Truncated {
            offset: self.start,
            op: self.op,
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], Error> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let s = self
            .bytes
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, Error> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.truncated())?;
        self.pos += 1;
        Ok(b)
    }

    fn fixed(&mut self, n: usize) -> Result<u64, Error> {
        let s = self.take(n)?;
        Ok(s.iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn uleb(&mut self) -> Result<u64, Error> {
        let mut result = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            let low = u64::from(b & 0x7f);
            if shift >= 64 || (shift == 63 && low > 1) {
                if low != 0 {
                    return Err(Error::BadLeb {
                        offset: self.start,
                        op: self.op,
                    });
                }
            } else {
                result |= low << shift;
            }
            if b & 0x80 == 0 {
                return Ok(result);
            }
            shift = shift.saturating_add(7);
        }
    }

    fn sleb(&mut self) -> Result<i64, Error> {
        let mut result = 0i64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            let low = i64::from(b & 0x7f);
            if shift < 64 {
                result |= low << shift;
                if shift == 63 && !(low == 0 || low == 0x7f) {
                    return Err(self.bad_leb());
                }
            } else if low != if result < 0 { 0x7f } else { 0 } {
                return Err(self.bad_leb());
            }
            shift = shift.saturating_add(7);
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    result |= -1i64 << shift;
                }
                return Ok(result);
            }
        }
    }

    fn bad_leb(&self) -> Error {
        Error::BadLeb {
            offset: self.start,
            op: self.op,
        }
    }

    fn block(&mut self, len: u64) -> Result<Vec<u8>, Error> {
        let len = usize::try_from(len).map_err(|_| self.truncated())?;
        Ok(self.take(len)?.to_vec())
    }
}

/// Decodes a binary DWARF expression into operations, each with the byte
/// offset of its opcode.
///
/// Extension operations are read in `encoding.extension`'s form. Branch
/// targets are checked: they must be the start of an operation or the end of
/// the expression. Never panics; every error names an offset `< bytes.len()`.
///
/// The GNU opcodes that DWARF 5 standardized (`DW_OP_GNU_entry_value` 0xf3,
/// `DW_OP_GNU_implicit_pointer` 0xf2, `DW_OP_GNU_const_type` 0xf4,
/// `DW_OP_GNU_regval_type` 0xf5, `DW_OP_GNU_deref_type` 0xf6,
/// `DW_OP_GNU_convert` 0xf7, `DW_OP_GNU_reinterpret` 0xf9,
/// `DW_OP_GNU_addr_index` 0xfb, `DW_OP_GNU_const_index` 0xfc,
/// `DW_OP_GNU_push_tls_address` 0xe0) decode as the DWARF 5 operation, so
/// [`encode`] writes them back with the standard opcode. Other GNU and vendor
/// opcodes are [`Error::UnknownOpcode`]. Apart from those aliases and
/// non-minimal LEB128 padding, `encode(decode(b))` gives back `b`.
pub fn decode(bytes: &[u8], encoding: Encoding) -> Result<Vec<(usize, Op)>, Error> {
    let mut out = Vec::new();
    decode_each(bytes, encoding, |at, op| out.push((at, op)))?;
    check_branches(bytes.len(), out.iter().map(|(at, op)| (*at, op)), |t| {
        out.binary_search_by_key(&t, |(o, _)| *o).is_ok()
    })?;
    Ok(out)
}

/// Decodes every operation of `bytes`, giving each with its byte offset to
/// `push` (branch targets are not checked here).
fn decode_each(
    bytes: &[u8],
    encoding: Encoding,
    mut push: impl FnMut(usize, Op),
) -> Result<(), Error> {
    encoding.check()?;
    let mut r = Reader {
        bytes,
        pos: 0,
        start: 0,
        op: "",
    };
    while r.pos < bytes.len() {
        r.start = r.pos;
        let raw = r.u8()?;
        let code = gnu_alias(raw).unwrap_or(raw);
        r.op = opcode_name(code, encoding.extension);
        let op = decode_one(&mut r, code, encoding)?;
        push(r.start, op);
    }
    Ok(())
}

/// Decodes the one operation at byte `pos` of `bytes`: the operation and the
/// offset of the next one. For the evaluator, which decodes each operation
/// as it executes it (as gimli does) instead of materialising all of them;
/// the operation's name is only looked up when there is an error to report.
/// `pos` is moved past the operation.
pub(crate) fn decode_at(bytes: &[u8], pos: &mut usize, encoding: Encoding) -> Result<Op, Error> {
    encoding.check()?;
    let mut r = Reader {
        bytes,
        pos: *pos,
        start: *pos,
        op: "",
    };
    let raw = r.u8()?;
    let code = gnu_alias(raw).unwrap_or(raw);
    let op = decode_one(&mut r, code, encoding).map_err(|mut e| {
        if let Error::Truncated { op, .. } | Error::BadLeb { op, .. } = &mut e {
            if op.is_empty() {
                *op = opcode_name(code, encoding.extension);
            }
        }
        e
    })?;
    *pos = r.pos;
    Ok(op)
}

/// Byte offsets of the operations of `bytes`, then its length; if some
/// operation does not decode, the offsets of those before it only.
pub(crate) fn byte_offsets(bytes: &[u8], encoding: Encoding) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        out.push(pos);
        if decode_at(bytes, &mut pos, encoding).is_err() {
            return out;
        }
    }
    out.push(bytes.len());
    out
}

/// Checks that every branch lands on an operation (`is_op`) or at the end.
fn check_branches<'o>(
    len: usize,
    ops: impl Iterator<Item = (usize, &'o Op)>,
    is_op: impl Fn(usize) -> bool,
) -> Result<(), Error> {
    for (offset, op) in ops {
        let (disp, name) = match op {
            Op::Bra(d) => (*d, "DW_OP_bra"),
            Op::Skip(d) => (*d, "DW_OP_skip"),
            _ => continue,
        };
        // A branch is always 3 bytes long.
        let target = offset as i64 + 3 + i64::from(disp);
        let ok = target == len as i64 || usize::try_from(target).is_ok_and(&is_op);
        if !ok {
            return Err(Error::BadBranchTarget {
                offset,
                op: name,
                target,
            });
        }
    }
    Ok(())
}

/// [`decode`] into caller-owned buffers, so that decoding many expressions
/// allocates nothing once the buffers are large enough: `ops` gets the
/// operations, `offsets` the byte offset of each, then `bytes.len()` (the
/// form [`Evaluation::with_offsets`](crate::Evaluation::with_offsets)
/// takes). Both are cleared first; on error their contents are unspecified.
pub fn decode_into(
    bytes: &[u8],
    encoding: Encoding,
    ops: &mut Vec<Op>,
    offsets: &mut Vec<usize>,
) -> Result<(), Error> {
    ops.clear();
    offsets.clear();
    decode_each(bytes, encoding, |at, op| {
        offsets.push(at);
        ops.push(op);
    })?;
    check_branches(bytes.len(), offsets.iter().copied().zip(ops.iter()), |t| {
        offsets.binary_search(&t).is_ok()
    })?;
    offsets.push(bytes.len());
    Ok(())
}

/// GNU pre-DWARF-5 opcodes with the same operands as a DWARF 5 operation
/// (gcc's `-gdwarf-4` output); decoded as that operation.
fn gnu_alias(code: u8) -> Option<u8> {
    Some(match code {
        0xe0 => 0x9b, // DW_OP_GNU_push_tls_address
        0xf2 => 0xa0, // DW_OP_GNU_implicit_pointer
        0xf3 => 0xa3, // DW_OP_GNU_entry_value
        0xf4 => 0xa4, // DW_OP_GNU_const_type
        0xf5 => 0xa5, // DW_OP_GNU_regval_type
        0xf6 => 0xa6, // DW_OP_GNU_deref_type
        0xf7 => 0xa8, // DW_OP_GNU_convert
        0xf9 => 0xa9, // DW_OP_GNU_reinterpret
        0xfb => 0xa1, // DW_OP_GNU_addr_index
        0xfc => 0xa2, // DW_OP_GNU_const_index
        _ => return None,
    })
}

/// GNU operation names accepted by [`crate::parse_text`] for DWARF 5 operations.
pub(crate) fn gnu_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "GNU_push_tls_address" => "form_tls_address",
        "GNU_implicit_pointer" => "implicit_pointer",
        "GNU_entry_value" => "entry_value",
        "GNU_const_type" => "const_type",
        "GNU_regval_type" => "regval_type",
        "GNU_deref_type" => "deref_type",
        "GNU_convert" => "convert",
        "GNU_reinterpret" => "reinterpret",
        "GNU_addr_index" => "addrx",
        "GNU_const_index" => "constx",
        _ => return None,
    })
}

#[inline]
fn decode_one(r: &mut Reader<'_>, code: u8, enc: Encoding) -> Result<Op, Error> {
    let addr = usize::from(enc.address_size);
    let off = usize::from(enc.offset_size);
    Ok(match code {
        0x03 => Op::Addr(r.fixed(addr)?),
        0x06 => Op::Deref,
        0x08 => Op::Const1u(r.u8()?),
        0x09 => Op::Const1s(r.u8()? as i8),
        0x0a => Op::Const2u(r.fixed(2)? as u16),
        0x0b => Op::Const2s(r.fixed(2)? as u16 as i16),
        0x0c => Op::Const4u(r.fixed(4)? as u32),
        0x0d => Op::Const4s(r.fixed(4)? as u32 as i32),
        0x0e => Op::Const8u(r.fixed(8)?),
        0x0f => Op::Const8s(r.fixed(8)? as i64),
        0x10 => Op::Constu(r.uleb()?),
        0x11 => Op::Consts(r.sleb()?),
        0x12 => Op::Dup,
        0x13 => Op::Drop,
        0x14 => Op::Over,
        0x15 => Op::Pick(r.u8()?),
        0x16 => Op::Swap,
        0x17 => Op::Rot,
        0x18 => Op::Xderef,
        0x19 => Op::Abs,
        0x1a => Op::And,
        0x1b => Op::Div,
        0x1c => Op::Minus,
        0x1d => Op::Mod,
        0x1e => Op::Mul,
        0x1f => Op::Neg,
        0x20 => Op::Not,
        0x21 => Op::Or,
        0x22 => Op::Plus,
        0x23 => Op::PlusUconst(r.uleb()?),
        0x24 => Op::Shl,
        0x25 => Op::Shr,
        0x26 => Op::Shra,
        0x27 => Op::Xor,
        0x28 => Op::Bra(r.fixed(2)? as u16 as i16),
        0x29 => Op::Eq,
        0x2a => Op::Ge,
        0x2b => Op::Gt,
        0x2c => Op::Le,
        0x2d => Op::Lt,
        0x2e => Op::Ne,
        0x2f => Op::Skip(r.fixed(2)? as u16 as i16),
        0x30..=0x4f => Op::Lit(code - 0x30),
        0x50..=0x6f => Op::Reg(code - 0x50),
        0x70..=0x8f => Op::Breg(code - 0x70, r.sleb()?),
        0x90 => Op::Regx(r.uleb()?),
        0x91 => Op::Fbreg(r.sleb()?),
        0x92 => {
            let reg = r.uleb()?;
            Op::Bregx(reg, r.sleb()?)
        }
        0x93 => Op::Piece(r.uleb()?),
        0x94 => Op::DerefSize(r.u8()?),
        0x95 => Op::XderefSize(r.u8()?),
        0x96 => Op::Nop,
        0x97 => Op::PushObjectAddress,
        0x98 => Op::Call2(r.fixed(2)? as u16),
        0x99 => Op::Call4(r.fixed(4)? as u32),
        0x9a => Op::CallRef(r.fixed(off)?),
        0x9b => Op::FormTlsAddress,
        0x9c => Op::CallFrameCfa,
        0x9d => {
            let size = r.uleb()?;
            Op::BitPiece {
                size,
                offset: r.uleb()?,
            }
        }
        0x9e => {
            let len = r.uleb()?;
            Op::ImplicitValue(r.block(len)?)
        }
        0x9f => Op::StackValue,
        0xa0 => {
            let die = r.fixed(off)?;
            Op::ImplicitPointer {
                die,
                offset: r.sleb()?,
            }
        }
        0xa1 => Op::Addrx(r.uleb()?),
        0xa2 => Op::Constx(r.uleb()?),
        0xa3 => {
            let len = r.uleb()?;
            Op::EntryValue(r.block(len)?)
        }
        0xa4 => {
            let type_offset = r.uleb()?;
            let len = r.u8()?;
            Op::ConstType {
                type_offset,
                value: r.block(u64::from(len))?,
            }
        }
        0xa5 => {
            let register = r.uleb()?;
            Op::RegvalType {
                register,
                type_offset: r.uleb()?,
            }
        }
        0xa6 => {
            let size = r.u8()?;
            Op::DerefType {
                size,
                type_offset: r.uleb()?,
            }
        }
        0xa7 => {
            let size = r.u8()?;
            Op::XderefType {
                size,
                type_offset: r.uleb()?,
            }
        }
        0xa8 => Op::Convert(r.uleb()?),
        0xa9 => Op::Reinterpret(r.uleb()?),
        user::OPCODE if enc.extension == ExtensionEncoding::User => {
            let sub = r.uleb()?;
            r.op = user_sub_name(sub);
            match sub {
                user::NOP => Op::LlvmNop,
                user::FORM_ASPACE_ADDRESS => Op::FormAspaceAddress,
                user::PUSH_LANE => Op::PushLane,
                user::OFFSET => Op::Offset,
                user::OFFSET_UCONST => Op::OffsetUconst(r.uleb()?),
                user::BIT_OFFSET => Op::BitOffset,
                user::CALL_FRAME_ENTRY_REG => Op::CallFrameEntryReg(r.uleb()?),
                user::UNDEFINED => Op::Undefined,
                user::ASPACE_BREGX => {
                    let register = r.uleb()?;
                    Op::AspaceBregx {
                        register,
                        offset: r.sleb()?,
                    }
                }
                user::PIECE_END => Op::PieceEnd,
                user::EXTEND => {
                    let bit_size = r.uleb()?;
                    Op::Extend {
                        bit_size,
                        count: r.uleb()?,
                    }
                }
                user::SELECT_BIT_PIECE => {
                    let bit_size = r.uleb()?;
                    Op::SelectBitPiece {
                        bit_size,
                        count: r.uleb()?,
                    }
                }
                _ => {
                    return Err(Error::UnknownUserOpcode {
                        offset: r.start,
                        sub_opcode: sub,
                    })
                }
            }
        }
        _ if enc.extension == ExtensionEncoding::Legacy => match code {
            legacy::FORM_ASPACE_ADDRESS => Op::FormAspaceAddress,
            legacy::PUSH_LANE => Op::PushLane,
            legacy::OFFSET => Op::Offset,
            legacy::OFFSET_UCONST => Op::OffsetUconst(r.uleb()?),
            legacy::BIT_OFFSET => Op::BitOffset,
            legacy::CALL_FRAME_ENTRY_REG => Op::CallFrameEntryReg(r.uleb()?),
            legacy::UNDEFINED => Op::Undefined,
            legacy::ASPACE_BREGX => {
                let register = r.uleb()?;
                Op::AspaceBregx {
                    register,
                    offset: r.sleb()?,
                }
            }
            legacy::ASPACE_IMPLICIT_POINTER => {
                let die = r.fixed(off)?;
                Op::AspaceImplicitPointer {
                    die,
                    offset: r.sleb()?,
                }
            }
            legacy::PIECE_END => Op::PieceEnd,
            legacy::EXTEND => {
                let bit_size = r.uleb()?;
                Op::Extend {
                    bit_size,
                    count: r.uleb()?,
                }
            }
            legacy::SELECT_BIT_PIECE => {
                let bit_size = r.uleb()?;
                Op::SelectBitPiece {
                    bit_size,
                    count: r.uleb()?,
                }
            }
            _ => {
                return Err(Error::UnknownOpcode {
                    offset: r.start,
                    opcode: code,
                })
            }
        },
        _ => {
            return Err(Error::UnknownOpcode {
                offset: r.start,
                opcode: code,
            })
        }
    })
}

// ---------------------------------------------------------------------------
// Encoding

fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn put_sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
        if done {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn put_fixed(out: &mut Vec<u8>, v: u64, n: usize) {
    out.extend_from_slice(&v.to_le_bytes()[..n]);
}

/// Encodes operations into a binary DWARF expression.
///
/// Fails with [`Error::Unencodable`] (naming the operation's index) when an
/// operand does not fit its field in `encoding`, or when the operation has no
/// opcode in `encoding.extension` (`DW_OP_aspace_implicit_pointer` under
/// [`ExtensionEncoding::User`]). Branch displacements are written as given.
pub fn encode(ops: &[Op], encoding: Encoding) -> Result<Vec<u8>, Error> {
    encoding.check()?;
    let mut out = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        encode_one(&mut out, op, encoding).map_err(|reason| Error::Unencodable {
            index,
            op: op.name(),
            reason,
        })?;
    }
    Ok(out)
}

fn fits(v: u64, size: u8) -> bool {
    size >= 8 || v >> (u32::from(size) * 8) == 0
}

fn encode_one(out: &mut Vec<u8>, op: &Op, enc: Encoding) -> Result<(), &'static str> {
    let addr = usize::from(enc.address_size);
    let off = usize::from(enc.offset_size);
    let simple = |code: u8| -> Option<u8> { Some(code) };
    let code = match op {
        Op::Deref => simple(0x06),
        Op::Dup => simple(0x12),
        Op::Drop => simple(0x13),
        Op::Over => simple(0x14),
        Op::Swap => simple(0x16),
        Op::Rot => simple(0x17),
        Op::Xderef => simple(0x18),
        Op::Abs => simple(0x19),
        Op::And => simple(0x1a),
        Op::Div => simple(0x1b),
        Op::Minus => simple(0x1c),
        Op::Mod => simple(0x1d),
        Op::Mul => simple(0x1e),
        Op::Neg => simple(0x1f),
        Op::Not => simple(0x20),
        Op::Or => simple(0x21),
        Op::Plus => simple(0x22),
        Op::Shl => simple(0x24),
        Op::Shr => simple(0x25),
        Op::Shra => simple(0x26),
        Op::Xor => simple(0x27),
        Op::Eq => simple(0x29),
        Op::Ge => simple(0x2a),
        Op::Gt => simple(0x2b),
        Op::Le => simple(0x2c),
        Op::Lt => simple(0x2d),
        Op::Ne => simple(0x2e),
        Op::Nop => simple(0x96),
        Op::PushObjectAddress => simple(0x97),
        Op::FormTlsAddress => simple(0x9b),
        Op::CallFrameCfa => simple(0x9c),
        Op::StackValue => simple(0x9f),
        _ => None,
    };
    if let Some(code) = code {
        out.push(code);
        return Ok(());
    }
    let legacy = enc.extension == ExtensionEncoding::Legacy;
    // Extension operations: opcode (and sub-opcode), operands follow below.
    let ext = |out: &mut Vec<u8>, legacy_code: u8, sub: u64| {
        if legacy {
            out.push(legacy_code);
        } else {
            out.push(user::OPCODE);
            put_uleb(out, sub);
        }
    };
    match op {
        Op::Addr(a) => {
            if !fits(*a, enc.address_size) {
                return Err("address does not fit address_size");
            }
            out.push(0x03);
            put_fixed(out, *a, addr);
        }
        Op::Const1u(v) => out.extend_from_slice(&[0x08, *v]),
        Op::Const1s(v) => out.extend_from_slice(&[0x09, *v as u8]),
        Op::Const2u(v) => {
            out.push(0x0a);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::Const2s(v) => {
            out.push(0x0b);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::Const4u(v) => {
            out.push(0x0c);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::Const4s(v) => {
            out.push(0x0d);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::Const8u(v) => {
            out.push(0x0e);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::Const8s(v) => {
            out.push(0x0f);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::Constu(v) => {
            out.push(0x10);
            put_uleb(out, *v);
        }
        Op::Consts(v) => {
            out.push(0x11);
            put_sleb(out, *v);
        }
        Op::Pick(v) => out.extend_from_slice(&[0x15, *v]),
        Op::PlusUconst(v) => {
            out.push(0x23);
            put_uleb(out, *v);
        }
        Op::Bra(d) => {
            out.push(0x28);
            out.extend_from_slice(&d.to_le_bytes());
        }
        Op::Skip(d) => {
            out.push(0x2f);
            out.extend_from_slice(&d.to_le_bytes());
        }
        Op::Lit(n) => {
            if *n >= 32 {
                return Err("literal must be below 32");
            }
            out.push(0x30 + n);
        }
        Op::Reg(n) => {
            if *n >= 32 {
                return Err("DW_OP_reg register must be below 32");
            }
            out.push(0x50 + n);
        }
        Op::Breg(n, d) => {
            if *n >= 32 {
                return Err("DW_OP_breg register must be below 32");
            }
            out.push(0x70 + n);
            put_sleb(out, *d);
        }
        Op::Regx(r) => {
            out.push(0x90);
            put_uleb(out, *r);
        }
        Op::Fbreg(d) => {
            out.push(0x91);
            put_sleb(out, *d);
        }
        Op::Bregx(r, d) => {
            out.push(0x92);
            put_uleb(out, *r);
            put_sleb(out, *d);
        }
        Op::Piece(n) => {
            out.push(0x93);
            put_uleb(out, *n);
        }
        Op::DerefSize(n) => out.extend_from_slice(&[0x94, *n]),
        Op::XderefSize(n) => out.extend_from_slice(&[0x95, *n]),
        Op::Call2(v) => {
            out.push(0x98);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::Call4(v) => {
            out.push(0x99);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Op::CallRef(v) => {
            if !fits(*v, enc.offset_size) {
                return Err("DIE offset does not fit offset_size");
            }
            out.push(0x9a);
            put_fixed(out, *v, off);
        }
        Op::BitPiece { size, offset } => {
            out.push(0x9d);
            put_uleb(out, *size);
            put_uleb(out, *offset);
        }
        Op::ImplicitValue(b) => {
            out.push(0x9e);
            put_uleb(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Op::ImplicitPointer { die, offset } => {
            if !fits(*die, enc.offset_size) {
                return Err("DIE offset does not fit offset_size");
            }
            out.push(0xa0);
            put_fixed(out, *die, off);
            put_sleb(out, *offset);
        }
        Op::Addrx(v) => {
            out.push(0xa1);
            put_uleb(out, *v);
        }
        Op::Constx(v) => {
            out.push(0xa2);
            put_uleb(out, *v);
        }
        Op::EntryValue(b) => {
            out.push(0xa3);
            put_uleb(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Op::ConstType { type_offset, value } => {
            let len = u8::try_from(value.len()).map_err(|_| "constant over 255 bytes")?;
            out.push(0xa4);
            put_uleb(out, *type_offset);
            out.push(len);
            out.extend_from_slice(value);
        }
        Op::RegvalType {
            register,
            type_offset,
        } => {
            out.push(0xa5);
            put_uleb(out, *register);
            put_uleb(out, *type_offset);
        }
        Op::DerefType { size, type_offset } => {
            out.extend_from_slice(&[0xa6, *size]);
            put_uleb(out, *type_offset);
        }
        Op::XderefType { size, type_offset } => {
            out.extend_from_slice(&[0xa7, *size]);
            put_uleb(out, *type_offset);
        }
        Op::Convert(t) => {
            out.push(0xa8);
            put_uleb(out, *t);
        }
        Op::Reinterpret(t) => {
            out.push(0xa9);
            put_uleb(out, *t);
        }
        Op::FormAspaceAddress => ext(out, legacy::FORM_ASPACE_ADDRESS, user::FORM_ASPACE_ADDRESS),
        Op::PushLane => ext(out, legacy::PUSH_LANE, user::PUSH_LANE),
        Op::Offset => ext(out, legacy::OFFSET, user::OFFSET),
        Op::OffsetUconst(v) => {
            ext(out, legacy::OFFSET_UCONST, user::OFFSET_UCONST);
            put_uleb(out, *v);
        }
        Op::BitOffset => ext(out, legacy::BIT_OFFSET, user::BIT_OFFSET),
        Op::CallFrameEntryReg(r) => {
            ext(
                out,
                legacy::CALL_FRAME_ENTRY_REG,
                user::CALL_FRAME_ENTRY_REG,
            );
            put_uleb(out, *r);
        }
        Op::Undefined => ext(out, legacy::UNDEFINED, user::UNDEFINED),
        Op::AspaceBregx { register, offset } => {
            ext(out, legacy::ASPACE_BREGX, user::ASPACE_BREGX);
            put_uleb(out, *register);
            put_sleb(out, *offset);
        }
        Op::AspaceImplicitPointer { die, offset } => {
            if !legacy {
                return Err("DW_OP_LLVM_user has no sub-opcode for aspace_implicit_pointer; use ExtensionEncoding::Legacy");
            }
            if !fits(*die, enc.offset_size) {
                return Err("DIE offset does not fit offset_size");
            }
            out.push(legacy::ASPACE_IMPLICIT_POINTER);
            put_fixed(out, *die, off);
            put_sleb(out, *offset);
        }
        Op::PieceEnd => ext(out, legacy::PIECE_END, user::PIECE_END),
        Op::Extend { bit_size, count } => {
            ext(out, legacy::EXTEND, user::EXTEND);
            put_uleb(out, *bit_size);
            put_uleb(out, *count);
        }
        Op::SelectBitPiece { bit_size, count } => {
            ext(out, legacy::SELECT_BIT_PIECE, user::SELECT_BIT_PIECE);
            put_uleb(out, *bit_size);
            put_uleb(out, *count);
        }
        // No direct opcode for it: DW_OP_nop means the same.
        Op::LlvmNop => ext(out, 0x96, user::NOP),
        Op::Overlay | Op::BitOverlay => {
            return Err("DW_OP_overlay and DW_OP_bit_overlay have no encoding (no sub-opcode in LLVM 19's DW_OP_LLVM_user table)");
        }
        // Operand-less operations were handled above.
        _ => return Err("internal: operation without encoding"),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Text

/// Writes operations in the text syntax accepted by [`crate::parse_text`], one per
/// line, with the spec's names.
///
/// Unsigned operands are decimal except addresses and DIE offsets (0x-hex),
/// signed operands are decimal with a `-` sign, registers are numbers,
/// blocks are `[hex bytes]`.
pub fn to_text(ops: &[Op]) -> String {
    let mut s = String::new();
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(op.name());
        // `write!` into a String cannot fail.
        let _ = match op {
            Op::Addr(a) => write!(s, " {a:#x}"),
            Op::Const1u(v) => write!(s, " {v}"),
            Op::Const1s(v) => write!(s, " {v}"),
            Op::Const2u(v) => write!(s, " {v}"),
            Op::Const2s(v) => write!(s, " {v}"),
            Op::Const4u(v) => write!(s, " {v}"),
            Op::Const4s(v) => write!(s, " {v}"),
            Op::Const8u(v)
            | Op::Constu(v)
            | Op::PlusUconst(v)
            | Op::Regx(v)
            | Op::Piece(v)
            | Op::Addrx(v)
            | Op::Constx(v)
            | Op::Convert(v)
            | Op::Reinterpret(v)
            | Op::OffsetUconst(v)
            | Op::CallFrameEntryReg(v) => write!(s, " {v}"),
            Op::Const8s(v) | Op::Consts(v) | Op::Fbreg(v) | Op::Breg(_, v) => write!(s, " {v}"),
            Op::Pick(v) | Op::DerefSize(v) | Op::XderefSize(v) => write!(s, " {v}"),
            Op::Bra(d) | Op::Skip(d) => write!(s, " {d}"),
            Op::Bregx(r, d) => write!(s, " {r} {d}"),
            Op::Call2(v) => write!(s, " {v:#x}"),
            Op::Call4(v) => write!(s, " {v:#x}"),
            Op::CallRef(v) => write!(s, " {v:#x}"),
            Op::BitPiece { size, offset } => write!(s, " {size} {offset}"),
            Op::ImplicitValue(b) | Op::EntryValue(b) => write_block(&mut s, b),
            Op::ImplicitPointer { die, offset } | Op::AspaceImplicitPointer { die, offset } => {
                write!(s, " {die:#x} {offset}")
            }
            Op::ConstType { type_offset, value } => {
                let _ = write!(s, " {type_offset:#x}");
                write_block(&mut s, value)
            }
            Op::RegvalType {
                register,
                type_offset,
            } => write!(s, " {register} {type_offset:#x}"),
            Op::DerefType { size, type_offset } | Op::XderefType { size, type_offset } => {
                write!(s, " {size} {type_offset:#x}")
            }
            Op::AspaceBregx { register, offset } => write!(s, " {register} {offset}"),
            Op::Extend { bit_size, count } | Op::SelectBitPiece { bit_size, count } => {
                write!(s, " {bit_size} {count}")
            }
            _ => Ok(()),
        };
    }
    s
}

fn write_block(s: &mut String, b: &[u8]) -> core::fmt::Result {
    s.push_str(" [");
    for (i, byte) in b.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        write!(s, "{byte:02x}")?;
    }
    s.push(']');
    Ok(())
}

/// Byte offset of each operation in `encoding`, then the total length;
/// `None` if some operation cannot be encoded. One scratch buffer, so the
/// evaluator can compute branch targets without an allocation per operation.
pub(crate) fn op_offsets(ops: &[Op], encoding: Encoding) -> Option<Vec<usize>> {
    encoding.check().ok()?;
    let mut scratch = Vec::new();
    let mut offsets = Vec::with_capacity(ops.len() + 1);
    let mut pos = 0usize;
    for op in ops {
        offsets.push(pos);
        scratch.clear();
        encode_one(&mut scratch, op, encoding).ok()?;
        pos += scratch.len();
    }
    offsets.push(pos);
    Some(offsets)
}
