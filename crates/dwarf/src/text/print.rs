//! Operations written in the text syntax with the spec's names ([`to_text`]).

use alloc::string::String;
use core::fmt::Write as _;

use crate::op::Op;

/// Writes operations in the text syntax accepted by [`parse_text`](super::parse_text), one per
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
            Op::CallRef(v) | Op::GnuVariableValue(v) => write!(s, " {v:#x}"),
            Op::GnuParameterRef(v) => write!(s, " {v:#x}"),
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
