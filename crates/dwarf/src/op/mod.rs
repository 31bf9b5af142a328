//! DWARF expression operations: the [`Op`] type, binary [`decode`]/[`encode`]
//! and the text form [`crate::to_text`] (read back by [`crate::parse_text`]).

use alloc::vec::Vec;

use crate::error::Error;
use crate::ErrorDetail;

mod decode;
mod encode;

pub(crate) use decode::{byte_offsets, decode_at, gnu_name};
pub use decode::{decode, decode_into};
pub use encode::encode;
pub(crate) use encode::op_offsets;

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
            return Err(ErrorDetail::BadEncoding {
                what: "address_size must be 4 or 8",
            }
            .into());
        }
        if !matches!(self.offset_size, 4 | 8) {
            return Err(ErrorDetail::BadEncoding {
                what: "offset_size must be 4 or 8",
            }
            .into());
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
#[non_exhaustive]
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
    /// `DW_OP_GNU_parameter_ref` (0xfa, gcc's IPA clones): the value on entry
    /// of the formal parameter at this unit-relative DIE offset (4 bytes), as
    /// the caller's call site binds it (`DW_AT_call_parameter`).
    GnuParameterRef(u32),
    /// `DW_OP_GNU_uninit` (0xf0, gcc): the value the location holds is not initialized
    /// yet; it changes nothing in the evaluation (gdb prints the value marked
    /// `[uninitialized]`).
    GnuUninit,
    /// `DW_OP_GNU_variable_value` (0xfd): pushes the value of the variable at
    /// this `.debug_info` offset (`offset_size` bytes) in the current frame.
    GnuVariableValue(u64),
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
    /// `DW_OP_LLVM_push_iteration`: pushes the current concurrent loop
    /// iteration. Not encodable: the normative text's sub-opcode is "TBA"
    /// and LLVM 19 has none; text and [`Op`] only.
    PushIteration,
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
    /// The DWARF 6 draft's `DW_OP_composite` ("Locations on the Stack",
    /// section 3.12): pushes a new, empty composite location that the piece
    /// operations after it extend in storage order, and that is a location
    /// at every step (no `DW_OP_LLVM_piece_end` closes it). Not LLVM's
    /// `DW_OP_LLVM_piece_end`, which closes an incomplete composite after its
    /// pieces. Not encodable: the draft's opcode table says "TBA" and LLVM 19
    /// has none; text and [`Op`] only.
    Composite,
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
            Op::GnuParameterRef(_) => "DW_OP_GNU_parameter_ref",
            Op::GnuUninit => "DW_OP_GNU_uninit",
            Op::GnuVariableValue(_) => "DW_OP_GNU_variable_value",
            Op::ConstType { .. } => "DW_OP_const_type",
            Op::RegvalType { .. } => "DW_OP_regval_type",
            Op::DerefType { .. } => "DW_OP_deref_type",
            Op::XderefType { .. } => "DW_OP_xderef_type",
            Op::Convert(_) => "DW_OP_convert",
            Op::Reinterpret(_) => "DW_OP_reinterpret",
            Op::FormAspaceAddress => "DW_OP_form_aspace_address",
            Op::PushLane => "DW_OP_push_lane",
            Op::PushIteration => "DW_OP_push_iteration",
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
            Op::Composite => "DW_OP_composite",
        }
    }

    /// Whether this is one of the heterogeneous-debugging extension operations.
    pub fn is_extension(&self) -> bool {
        matches!(
            self,
            Op::FormAspaceAddress
                | Op::PushLane
                | Op::PushIteration
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
        0xf0 => "DW_OP_GNU_uninit",
        0xfa => "DW_OP_GNU_parameter_ref",
        0xfd => "DW_OP_GNU_variable_value",
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
