//! Encoding: operations to bytes ([`encode`]) and their byte offsets
//! (`op_offsets`).

use super::*;
use crate::ErrorDetail;

pub(super) fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
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

pub(super) fn put_sleb(out: &mut Vec<u8>, mut v: i64) {
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

pub(super) fn put_fixed(out: &mut Vec<u8>, v: u64, n: usize) {
    out.extend_from_slice(&v.to_le_bytes()[..n]);
}

/// Encodes operations into a binary DWARF expression.
///
/// Fails with [`ErrorDetail::Unencodable`] (naming the operation's index) when an
/// operand does not fit its field in `encoding`, or when the operation has no
/// opcode in `encoding.extension` (`DW_OP_aspace_implicit_pointer` under
/// [`ExtensionEncoding::User`]). Branch displacements are written as given.
pub fn encode(ops: &[Op], encoding: Encoding) -> Result<Vec<u8>, Error> {
    encoding.check()?;
    let mut out = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        encode_one(&mut out, op, encoding).map_err(|reason| ErrorDetail::Unencodable {
            index,
            op: op.name(),
            reason,
        })?;
    }
    Ok(out)
}

pub(super) fn fits(v: u64, size: u8) -> bool {
    size >= 8 || v >> (u32::from(size) * 8) == 0
}

pub(super) fn encode_one(out: &mut Vec<u8>, op: &Op, enc: Encoding) -> Result<(), &'static str> {
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
        Op::GnuUninit => simple(0xf0),
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
        Op::CallRef(v) | Op::GnuVariableValue(v) => {
            if !fits(*v, enc.offset_size) {
                return Err("DIE offset does not fit offset_size");
            }
            out.push(if matches!(op, Op::CallRef(_)) {
                0x9a
            } else {
                0xfd
            });
            put_fixed(out, *v, off);
        }
        Op::GnuParameterRef(v) => {
            out.push(0xfa);
            out.extend_from_slice(&v.to_le_bytes());
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
        Op::PushIteration => {
            return Err("DW_OP_LLVM_push_iteration has no encoding (its sub-opcode is TBA; LLVM 19 has none)");
        }
        Op::Composite => {
            return Err("DW_OP_composite has no encoding (the DWARF 6 draft's opcode is TBA; LLVM 19 has none)");
        }
        // Operand-less operations were handled above.
        _ => return Err("internal: operation without encoding"),
    }
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
