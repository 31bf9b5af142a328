//! Decoding: bytes to operations ([`decode`], [`decode_into`]), one at a
//! time for the evaluator (`decode_at`), with GNU aliases and both
//! extension encodings.

use super::*;
use crate::ErrorDetail;

pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    start: usize,
    op: &'static str,
}

impl Reader<'_> {
    fn truncated(&self) -> Error {
        ErrorDetail::Truncated {
            offset: self.start,
            op: self.op,
        }
        .into()
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
                    return Err(ErrorDetail::BadLeb {
                        offset: self.start,
                        op: self.op,
                    }
                    .into());
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
        ErrorDetail::BadLeb {
            offset: self.start,
            op: self.op,
        }
        .into()
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
/// opcodes are [`ErrorDetail::UnknownOpcode`]. Apart from those aliases and
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
pub(super) fn decode_each(
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
        if let ErrorDetail::Truncated { op, .. } | ErrorDetail::BadLeb { op, .. } = e.detail_mut() {
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
pub(super) fn check_branches<'o>(
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
            return Err(ErrorDetail::BadBranchTarget {
                offset,
                op: name,
                target,
            }
            .into());
        }
    }
    Ok(())
}

/// [`decode`] into caller-owned buffers, so that decoding many expressions
/// allocates nothing once the buffers are large enough: `ops` gets the
/// operations, `offsets` the byte offset of each, then `bytes.len()` (the
/// form [`Expression::with_offsets`](crate::Expression::with_offsets)
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
pub(super) fn gnu_alias(code: u8) -> Option<u8> {
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
pub(super) fn decode_one(r: &mut Reader<'_>, code: u8, enc: Encoding) -> Result<Op, Error> {
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
        0xf0 => Op::GnuUninit,
        0xfa => Op::GnuParameterRef(r.fixed(4)? as u32),
        0xfd => Op::GnuVariableValue(r.fixed(off)?),
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
                    return Err(ErrorDetail::UnknownUserOpcode {
                        offset: r.start,
                        sub_opcode: sub,
                    }
                    .into())
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
                return Err(ErrorDetail::UnknownOpcode {
                    offset: r.start,
                    opcode: code,
                }
                .into())
            }
        },
        _ => {
            return Err(ErrorDetail::UnknownOpcode {
                offset: r.start,
                opcode: code,
            }
            .into())
        }
    })
}
