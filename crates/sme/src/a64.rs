//! A decoder of the AArch64 instructions that matter to the SME rules, from their
//! encodings in the Arm Architecture Reference Manual (A64 base and SME/SME2): the
//! `smstart`/`smstop` forms (MSR immediate to SVCRSM, SVCRZA, SVCRSMZA), `msr`/`mrs` of
//! SVCR (S3_3_C4_C2_2) and TPIDR2_EL0 (S3_3_C13_C0_5), `bl`/`b`/`blr`/`br`/`ret`,
//! `zero {za}`, `zero {zt0}`, `ldr`/`str zt0`, and the branches that test a mode
//! (`cbz`/`cbnz`/`tbz`/`tbnz`, `b.cond`), and the register copies that carry a mode
//! bit to such a test (`mov`, `and #1`). Every other word is [`Op::Other`].

use std::fmt;

/// Which PSTATE bits an `smstart`/`smstop` changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Svcr {
    /// `sm`: PSTATE.SM.
    Sm,
    /// `za`: PSTATE.ZA.
    Za,
    /// No operand: both.
    Both,
}

/// A system register this crate cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SysReg {
    /// SVCR (S3_3_C4_C2_2): PSTATE.SM and PSTATE.ZA.
    Svcr,
    /// TPIDR2_EL0 (S3_3_C13_C0_5): the lazy-save TPIDR2 block pointer.
    Tpidr2,
}

/// A decoded instruction. Register 31 is `xzr` (or `sp` for the ZT0 base register).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `smstart [sm|za]`.
    Smstart(Svcr),
    /// `smstop [sm|za]`.
    Smstop(Svcr),
    /// `msr REG, xN`.
    Msr(SysReg, u8),
    /// `mrs xN, REG`.
    Mrs(u8, SysReg),
    /// `bl` with its byte offset from the instruction.
    Bl(i64),
    /// `b` with its byte offset.
    B(i64),
    /// `blr xN`.
    Blr(u8),
    /// `br xN`.
    Br(u8),
    /// `ret xN`.
    Ret(u8),
    /// `zero {za}` (all tiles).
    ZeroZa,
    /// `zero {zt0}`.
    ZeroZt0,
    /// `ldr zt0, [xN]`.
    LdrZt0(u8),
    /// `str zt0, [xN]`.
    StrZt0(u8),
    /// `cbz`/`cbnz` (`nonzero`) register, byte offset.
    Cb {
        /// `cbnz` rather than `cbz`.
        nonzero: bool,
        /// The tested register.
        reg: u8,
        /// Byte offset of the target.
        offset: i64,
    },
    /// `tbz`/`tbnz` (`nonzero`) register, bit, byte offset.
    Tb {
        /// `tbnz` rather than `tbz`.
        nonzero: bool,
        /// The tested register.
        reg: u8,
        /// The tested bit.
        bit: u8,
        /// Byte offset of the target.
        offset: i64,
    },
    /// `b.cond`, with the condition number and byte offset.
    BCond(u8, i64),
    /// `mov xD, xS` or `mov wD, wS` (`orr` with the zero register): dst, src.
    Mov(u8, u8),
    /// `and xD, xS, #1` or `and wD, wS, #1`: dst, src (bit 0 kept, as LLVM keeps
    /// PSTATE.SM from `__arm_sme_state`).
    And1(u8, u8),
    /// Anything else.
    Other(u32),
}

impl Op {
    /// A branch, call or return: it ends straight-line code.
    #[must_use]
    pub fn is_branch(self) -> bool {
        matches!(
            self,
            Op::B(_)
                | Op::BCond(..)
                | Op::Cb { .. }
                | Op::Tb { .. }
                | Op::Bl(_)
                | Op::Blr(_)
                | Op::Br(_)
                | Op::Ret(_)
        )
    }

    /// The byte offset a direct branch that is not a call (`b`, `b.cond`, `cbz`/`cbnz`,
    /// `tbz`/`tbnz`) goes to.
    #[must_use]
    pub fn branch_offset(self) -> Option<i64> {
        match self {
            Op::B(o) | Op::BCond(_, o) => Some(o),
            Op::Cb { offset, .. } | Op::Tb { offset, .. } => Some(offset),
            _ => None,
        }
    }
}

const fn sign_extend(value: u32, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((value as i64) << shift) >> shift
}

/// The o0:op1:CRn:CRm:op2 field (bits 20..5) of a system register SN_op1_Cn_Cm_op2 with
/// op0 = 2 + o0.
const fn sys_field(op0: u32, op1: u32, crn: u32, crm: u32, op2: u32) -> u32 {
    ((op0 - 2) << 14) | (op1 << 11) | (crn << 7) | (crm << 3) | op2
}

const SVCR: u32 = sys_field(3, 3, 4, 2, 2);
const TPIDR2_EL0: u32 = sys_field(3, 3, 13, 0, 5);

/// The system register of an MSR/MRS (register) encoding.
fn sys_reg(word: u32) -> Option<SysReg> {
    match (word >> 5) & 0x7fff {
        SVCR => Some(SysReg::Svcr),
        TPIDR2_EL0 => Some(SysReg::Tpidr2),
        _ => None,
    }
}

/// Decodes one little-endian instruction word.
#[must_use]
pub fn decode(word: u32) -> Op {
    let rt = (word & 0x1f) as u8;
    let rn = ((word >> 5) & 0x1f) as u8;
    // MSR (immediate) to SVCR: 1101 0101 0000 0 011 0100 0 CRm<2:0> 011 11111, where CRm
    // bits 3..1 are SVCRSM (001), SVCRZA (010) or SVCRSMZA (011) and CRm bit 0 the value.
    if word & 0xffff_f0ff == 0xd503_407f {
        let field = match (word >> 9) & 0b111 {
            0b001 => Some(Svcr::Sm),
            0b010 => Some(Svcr::Za),
            0b011 => Some(Svcr::Both),
            _ => None,
        };
        if let Some(field) = field {
            return if word & (1 << 8) != 0 {
                Op::Smstart(field)
            } else {
                Op::Smstop(field)
            };
        }
    }
    // MSR/MRS (register): 1101 0101 00 L 1 ...
    if word & 0xffd0_0000 == 0xd510_0000 {
        if let Some(reg) = sys_reg(word) {
            return if word & (1 << 21) != 0 {
                Op::Mrs(rt, reg)
            } else {
                Op::Msr(reg, rt)
            };
        }
    }
    match word >> 26 {
        0b100101 => return Op::Bl(sign_extend(word & 0x03ff_ffff, 26) * 4),
        0b000101 => return Op::B(sign_extend(word & 0x03ff_ffff, 26) * 4),
        _ => {}
    }
    match word & 0xffff_fc1f {
        0xd63f_0000 => return Op::Blr(rn),
        0xd61f_0000 => return Op::Br(rn),
        0xd65f_0000 => return Op::Ret(rn),
        _ => {}
    }
    match word {
        0xc008_00ff => return Op::ZeroZa,
        0xc048_0001 => return Op::ZeroZt0,
        _ => {}
    }
    match word & 0xffff_fc1f {
        0xe11f_8000 => return Op::LdrZt0(rn),
        0xe13f_8000 => return Op::StrZt0(rn),
        _ => {}
    }
    let imm19 = sign_extend((word >> 5) & 0x7_ffff, 19) * 4;
    // CBZ/CBNZ: sf 011010 op imm19 Rt.
    if word & 0x7e00_0000 == 0x3400_0000 {
        return Op::Cb {
            nonzero: word & (1 << 24) != 0,
            reg: rt,
            offset: imm19,
        };
    }
    // TBZ/TBNZ: b5 011011 op b40 imm14 Rt.
    if word & 0x7e00_0000 == 0x3600_0000 {
        return Op::Tb {
            nonzero: word & (1 << 24) != 0,
            reg: rt,
            bit: (((word >> 31) << 5) | ((word >> 19) & 0x1f)) as u8,
            offset: sign_extend((word >> 5) & 0x3fff, 14) * 4,
        };
    }
    // MOVZ with #0, hw 0: `mov xD, #0`, as `mov xD, xzr`. sf 10 100101 00 imm16=0 Rd.
    if word & 0x7fff_ffe0 == 0x5280_0000 {
        return Op::Mov(rt, 31);
    }
    // MOV (register): sf 0101010 000 Rm 000000 11111 Rd.
    if word & 0x7fe0_ffe0 == 0x2a00_03e0 {
        return Op::Mov(rt, ((word >> 16) & 0x1f) as u8);
    }
    // AND (immediate) with the bit mask 1: sf 00 100100 N=sf immr=0 imms=0 Rn Rd.
    if word & 0xffff_fc00 == 0x9240_0000 || word & 0xffff_fc00 == 0x1200_0000 {
        return Op::And1(rt, rn);
    }
    // B.cond: 0101 0100 imm19 0 cond.
    if word & 0xff00_0010 == 0x5400_0000 {
        return Op::BCond((word & 0xf) as u8, imm19);
    }
    Op::Other(word)
}

/// The parts of a jump-table dispatch as LLVM 19 emits it (besides `mov`, loads and stores
/// of spilled indexes and the branches, decoded elsewhere in this module): the table's
/// address, the entry's load, the base label, the sum, the bound check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TablePart {
    /// `adrp xD, label`: the label's 4 KiB page, as an offset from the instruction's page.
    Adrp {
        /// Destination.
        rd: u8,
        /// Byte offset of the page.
        page: i64,
    },
    /// `adr xD, label`: the label, as an offset from the instruction.
    Adr {
        /// Destination.
        rd: u8,
        /// Byte offset.
        offset: i64,
    },
    /// `add xD, xN, #imm` (64-bit, flags untouched): the low bits of an `adrp` label.
    AddImm {
        /// Destination.
        rd: u8,
        /// Source.
        rn: u8,
        /// The immediate, shifted.
        imm: u64,
    },
    /// `movz xD, #imm16, lsl #shift`.
    Movz {
        /// Destination.
        rd: u8,
        /// The value it writes.
        value: u64,
    },
    /// `movk xD, #imm16, lsl #shift`: 16 bits replaced.
    Movk {
        /// Destination.
        rd: u8,
        /// The 16 bits, in place.
        bits: u64,
        /// Their shift.
        shift: u8,
    },
    /// A table entry's load, register offset: `ldrb wT, [xN, xM]`, `ldrh wT, [xN, xM,
    /// lsl #1]` (zero-extended) or `ldrsw xT, [xN, xM, lsl #2]` (sign-extended).
    LoadEntry {
        /// Destination.
        rt: u8,
        /// The table's address.
        rn: u8,
        /// The index.
        rm: u8,
        /// Bytes an entry.
        size: u8,
        /// The index is scaled by the entry size.
        scaled: bool,
    },
    /// `add xD, xN, xM, lsl #shift` (64-bit, flags untouched).
    AddShifted {
        /// Destination.
        rd: u8,
        /// First source.
        rn: u8,
        /// Shifted source.
        rm: u8,
        /// Left shift.
        shift: u8,
    },
    /// `subs xD, xN, #imm` or `cmp xN, #imm` (`wN` too): a compare with an immediate.
    CmpImm {
        /// The register compared.
        rn: u8,
        /// The immediate, shifted.
        imm: u64,
    },
    /// `and xD, xN, #(2^bits - 1)` (`wN` too, flags untouched): an index masked in range.
    AndLowBits {
        /// Destination.
        rd: u8,
        /// Source.
        rn: u8,
        /// How many low bits are kept.
        bits: u8,
    },
}

/// The condition codes of `b.cond` that bound a table index: `b.hs`, `b.lo`, `b.hi`, `b.ls`.
pub mod cond {
    /// Unsigned higher or same (`hs`, `cs`).
    pub const HS: u8 = 2;
    /// Unsigned lower (`lo`, `cc`).
    pub const LO: u8 = 3;
    /// Unsigned higher.
    pub const HI: u8 = 8;
    /// Unsigned lower or same.
    pub const LS: u8 = 9;
}

/// Decodes a [`TablePart`].
#[must_use]
pub fn table_part(word: u32) -> Option<TablePart> {
    let rd = (word & 0x1f) as u8;
    let rn = ((word >> 5) & 0x1f) as u8;
    let rm = ((word >> 16) & 0x1f) as u8;
    // ADR/ADRP: op immlo 10000 immhi Rd.
    if word & 0x1f00_0000 == 0x1000_0000 {
        let imm = sign_extend(((word >> 3) & 0x1f_fffc) | ((word >> 29) & 3), 21);
        return Some(if word & 0x8000_0000 != 0 {
            TablePart::Adrp {
                rd,
                page: imm << 12,
            }
        } else {
            TablePart::Adr { rd, offset: imm }
        });
    }
    // ADD/SUBS (immediate): sf op S 100010 sh imm12 Rn Rd.
    let imm12 = u64::from((word >> 10) & 0xfff) << (12 * ((word >> 22) & 1));
    if word & 0xff80_0000 == 0x9100_0000 {
        return Some(TablePart::AddImm { rd, rn, imm: imm12 });
    }
    if word & 0x7f80_0000 == 0x7100_0000 {
        return Some(TablePart::CmpImm { rn, imm: imm12 });
    }
    // MOVZ/MOVK (64-bit): 1 opc 100101 hw imm16 Rd.
    let shift = ((word >> 21) & 3) as u8 * 16;
    let imm16 = u64::from((word >> 5) & 0xffff) << shift;
    match word & 0xff80_0000 {
        0xd280_0000 => return Some(TablePart::Movz { rd, value: imm16 }),
        0xf280_0000 => {
            return Some(TablePart::Movk {
                rd,
                bits: imm16,
                shift,
            })
        }
        _ => {}
    }
    // LDRB/LDRH/LDRSW (register), option LSL/UXTX (011) or UXTW (010): size 111000 opc 1
    // Rm option S 10 Rn Rt.
    let option = (word >> 13) & 7;
    if word & 0x3f20_0c00 == 0x3820_0800 && (option == 0b011 || option == 0b010) {
        let scaled = word & (1 << 12) != 0;
        let size = match word & 0xffc0_0000 {
            0x3840_0000 => 1,
            0x7840_0000 => 2,
            0xb880_0000 => 4,
            _ => return None,
        };
        return Some(TablePart::LoadEntry {
            rt: rd,
            rn,
            rm,
            size,
            scaled,
        });
    }
    // ADD (shifted register, LSL, 64-bit): 10001011 00 0 Rm imm6 Rn Rd.
    if word & 0xffe0_0000 == 0x8b00_0000 {
        let shift = ((word >> 10) & 0x3f) as u8;
        return Some(TablePart::AddShifted { rd, rn, rm, shift });
    }
    // AND (immediate) keeping the low bits: immr = 0, imms = bits - 1 (N = 1 for 64 bits,
    // N = 0 and imms < 31 for 32 bits).
    let imms = ((word >> 10) & 0x3f) as u8;
    let immr = (word >> 16) & 0x3f;
    let low_bits = match word & 0xffc0_0000 {
        0x9240_0000 if immr == 0 && imms < 63 => Some(imms + 1),
        0x1200_0000 if immr == 0 && imms < 31 => Some(imms + 1),
        _ => None,
    };
    low_bits.map(|bits| TablePart::AndLowBits { rd, rn, bits })
}

/// The arithmetic of a lazy-save set-up: addresses in the frame, the streaming vector
/// length, the save buffer's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameArith {
    /// `add xD, xN, #imm` or `sub xD, xN, #imm` (64-bit, flags untouched; 31 is `sp`;
    /// `mov xD, sp` is an `add` of 0).
    AddImm {
        /// Destination.
        rd: u8,
        /// Source.
        rn: u8,
        /// The immediate, negative for `sub`.
        imm: i64,
    },
    /// `rdsvl xD, #imm`: imm times the streaming vector length in bytes.
    Rdsvl {
        /// Destination.
        rd: u8,
        /// The multiplier.
        imm: i64,
    },
    /// `msub xD, xN, xM, xA`: xA - xN * xM.
    Msub {
        /// Destination.
        rd: u8,
        /// First factor.
        rn: u8,
        /// Second factor.
        rm: u8,
        /// What the product is taken from.
        ra: u8,
    },
}

/// Decodes a [`FrameArith`].
#[must_use]
pub fn frame_arith(word: u32) -> Option<FrameArith> {
    let rd = (word & 0x1f) as u8;
    let rn = ((word >> 5) & 0x1f) as u8;
    // ADD/SUB (immediate, 64-bit, no flags): 1 op 0 100010 sh imm12 Rn Rd.
    if word & 0xbf80_0000 == 0x9100_0000 {
        let imm = i64::from((word >> 10) & 0xfff) << (12 * ((word >> 22) & 1));
        let imm = if word & (1 << 30) != 0 { -imm } else { imm };
        return Some(FrameArith::AddImm { rd, rn, imm });
    }
    // RDSVL: 00000100 101 11111 01011 imm6 Rd.
    if word & 0xffff_f800 == 0x04bf_5800 {
        let imm = sign_extend((word >> 5) & 0x3f, 6);
        return Some(FrameArith::Rdsvl { rd, imm });
    }
    // MSUB (64-bit): 1 00 11011 000 Rm 1 Ra Rn Rd.
    if word & 0xffe0_8000 == 0x9b00_8000 {
        return Some(FrameArith::Msub {
            rd,
            rn,
            rm: ((word >> 16) & 0x1f) as u8,
            ra: ((word >> 10) & 0x1f) as u8,
        });
    }
    None
}

/// Whether an instruction may set the condition flags: every one but those known not to
/// (loads and stores, hints, the data-processing instructions without an `S` form or
/// with it clear).
#[must_use]
pub fn may_set_flags(word: u32) -> bool {
    if load_store(word).is_some() || word & 0xffff_f01f == 0xd503_201f {
        return false;
    }
    match (word >> 25) & 0xf {
        // Data processing, immediate: ADDS/SUBS and ANDS set them.
        0b1000 | 0b1001 => {
            let add_sub = word & 0x1f00_0000 == 0x1100_0000;
            let logical = word & 0x1f80_0000 == 0x1200_0000;
            (add_sub && word & (1 << 29) != 0) || (logical && (word >> 29) & 3 == 3)
        }
        // Data processing, register: ANDS/BICS (shifted), and every form with bit 29
        // (ADDS, SUBS, ADCS, SBCS, CCMP, CCMN, SETF, RMIF).
        0b0101 | 0b1101 => {
            if word & 0x1f00_0000 == 0x0a00_0000 {
                (word >> 29) & 3 == 3
            } else {
                word & (1 << 29) != 0
            }
        }
        _ => true,
    }
}

/// `bti c`, which starts a PLT stub under branch protection.
pub const BTI_C: u32 = 0xd503_245f;

/// The registers LLVM addresses stack slots from: `sp` (31), the frame pointer `x29`, and
/// the base pointer `x19` of frames with both realignment and variable-sized objects.
pub const FRAME_BASES: [u8; 3] = [31, 29, 19];

/// A memory access of a load or store: the address is `base` (register 31 is `sp`) plus
/// `offset` (`None`: not known, as for a register offset or a vector-length-scaled one),
/// `size` bytes (for a pair, both registers), as the address is before any writeback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    /// A store (or an atomic read-modify-write), rather than a load.
    pub store: bool,
    /// The base register.
    pub base: u8,
    /// The byte offset from the base, when known.
    pub offset: Option<i64>,
    /// Bytes accessed.
    pub size: u64,
    /// The general-purpose registers stored or loaded, in address order (one register of
    /// `size / n` bytes each); empty for vector registers and unknown forms.
    pub data: [Option<u8>; 2],
}

/// The general-purpose registers an instruction writes (register 31 is `sp` here: `xzr`
/// destinations are left out), and by how much `sp` moves when it is written with a known
/// immediate (`sub sp, sp, #16`, a pre- or post-indexed `sp` base).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Written {
    regs: [u8; 3],
    len: u8,
    /// When `sp` is written: the immediate added to it, if it is one.
    pub sp_add: Option<i64>,
}

impl Written {
    fn push(&mut self, r: u8) {
        if usize::from(self.len) < self.regs.len() && !self.iter().any(|x| x == r) {
            self.regs[usize::from(self.len)] = r;
            self.len += 1;
        }
    }

    /// The registers written.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.regs[..usize::from(self.len)].iter().copied()
    }
}

/// A store of unknown extent through `base`.
const fn unknown_store(base: u8) -> Access {
    Access {
        store: true,
        base,
        offset: None,
        size: 0,
        data: [None, None],
    }
}

/// The load or store addressing forms of the base A64 instruction set, SVE and SME:
/// `(access, writeback)`, where `writeback` is `Some(add)` when the base register is
/// updated (`add` the immediate added, if known).
fn load_store(word: u32) -> Option<(Access, Option<Option<i64>>)> {
    let rt = (word & 0x1f) as u8;
    let rn = ((word >> 5) & 0x1f) as u8;
    let rt2 = ((word >> 10) & 0x1f) as u8;
    let vector = word & (1 << 26) != 0;
    let size = word >> 30;
    let opc = (word >> 22) & 3;
    let gpr = |r: u8| (!vector).then_some(r);
    let imm9 = sign_extend((word >> 12) & 0x1ff, 9);
    // Bytes of a single-register access: the size field, or 16 for a `q` register.
    let bytes = if vector && opc & 2 != 0 && size == 0 {
        16
    } else {
        1u64 << size
    };
    let single = |store: bool, offset: Option<i64>, data: Option<u8>| Access {
        store,
        base: rn,
        offset,
        size: bytes,
        data: [data, None],
    };
    // Base A64 (bit 27 set, bit 25 clear).
    if word & 0x0a00_0000 == 0x0800_0000 {
        // Load/store register, unsigned immediate.
        if word & 0x3b00_0000 == 0x3900_0000 {
            let store = opc == 0;
            let prefetch = !vector && size == 3 && opc == 2;
            let offset = i64::from((word >> 10) & 0xfff) * bytes as i64;
            let data = if prefetch { None } else { gpr(rt) };
            return Some((single(store, Some(offset), data), None));
        }
        // Unscaled, post-indexed, unprivileged, pre-indexed immediate.
        if word & 0x3b20_0000 == 0x3800_0000 {
            let store = opc == 0;
            let prefetch = !vector && size == 3 && opc == 2;
            let data = if prefetch { None } else { gpr(rt) };
            return Some(match (word >> 10) & 3 {
                0b01 => (single(store, Some(0), data), Some(Some(imm9))),
                0b11 => (single(store, Some(imm9), data), Some(Some(imm9))),
                _ => (single(store, Some(imm9), data), None),
            });
        }
        // Register offset.
        if word & 0x3b20_0c00 == 0x3820_0800 {
            return Some((single(opc == 0, None, gpr(rt)), None));
        }
        // Atomic memory operations: read, modify, write; Rt gets the old value.
        if word & 0x3b20_0c00 == 0x3820_0000 {
            return Some((single(true, Some(0), gpr(rt)), None));
        }
        // LDRAA/LDRAB (pointer authentication), with writeback when bit 11 is set.
        if word & 0x3b20_0400 == 0x3820_0400 {
            let wb = (word & (1 << 11) != 0).then_some(None);
            return Some((single(false, None, gpr(rt)), wb));
        }
        // Pairs: no-allocate, post-indexed, offset, pre-indexed.
        if word & 0x3a00_0000 == 0x2800_0000 {
            let each: u64 = match (vector, size) {
                (false, 0 | 1) | (true, 0) => 4,
                (true, 2) => 16,
                _ => 8,
            };
            let imm = sign_extend((word >> 15) & 0x7f, 7) * each as i64;
            let load = word & (1 << 22) != 0;
            let access = |offset| Access {
                store: !load,
                base: rn,
                offset: Some(offset),
                size: 2 * each,
                data: [gpr(rt), gpr(rt2)],
            };
            return Some(match (word >> 23) & 3 {
                0b01 => (access(0), Some(Some(imm))),
                0b11 => (access(imm), Some(Some(imm))),
                _ => (access(imm), None),
            });
        }
        // Load register (literal): PC-relative, no base register.
        if word & 0x3b00_0000 == 0x1800_0000 {
            let data = (!vector && size != 3).then_some(rt);
            return Some((
                Access {
                    store: false,
                    base: 32,
                    offset: None,
                    size: 8,
                    data: [data, None],
                },
                None,
            ));
        }
        // LDAPR/STLR (unscaled immediate).
        if word & 0x3f20_0c00 == 0x1900_0000 {
            return Some((single(opc == 0, Some(imm9), Some(rt)), None));
        }
        // Memory copy and set (FEAT_MOPS): Rd, Rn and Rs are updated; treated as a store
        // of unknown extent through Rd (its writes are listed by `written`).
        if word & 0x3b20_0c00 == 0x1900_0400 {
            return Some((unknown_store(rt), None));
        }
        // Exclusive, ordered, compare-and-swap: through [Rn].
        if word & 0x3f00_0000 == 0x0800_0000 {
            let load = word & (1 << 22) != 0;
            let pair = word & (1 << 21) != 0 && word & (1 << 23) == 0;
            let data = if pair {
                [Some(rt), Some(rt2)]
            } else {
                [Some(rt), None]
            };
            return Some((
                Access {
                    store: !load || word & (1 << 23) != 0,
                    base: rn,
                    offset: Some(0),
                    size: 16,
                    data,
                },
                None,
            ));
        }
        // Vector structure loads and stores; post-indexed ones update Rn.
        if word & 0xbe00_0000 == 0x0c00_0000 {
            let load = word & (1 << 22) != 0;
            let wb = (word & (1 << 23) != 0).then_some(None);
            return Some((
                Access {
                    store: !load,
                    base: rn,
                    offset: None,
                    size: 0,
                    data: [None, None],
                },
                wb,
            ));
        }
        // Anything else (memory tags, ...): a store of unknown extent through Rn that may
        // update it.
        return Some((unknown_store(rn), Some(None)));
    }
    // SVE and SME memory instructions (SVE with bit 31 set, SME's 1110000x): stores and
    // loads of vector, predicate, ZA and ZT0 registers, addressed by vector length or
    // vectors. Treated as a store of unknown extent through Rn (loads write no
    // general-purpose register).
    let sve = word & 0x1e00_0000 == 0x0400_0000 && word & 0x8000_0000 != 0;
    let sme = word & 0xfe00_0000 == 0xe000_0000;
    if sve || sme {
        return Some((unknown_store(rn), None));
    }
    None
}

/// The memory an instruction reads or writes, for the loads and stores of general-purpose
/// registers the audit follows through stack slots (see [`Access`]).
#[must_use]
pub fn access(word: u32) -> Option<Access> {
    load_store(word).map(|(a, _)| a)
}

/// The general-purpose registers an instruction writes ([`Written`]); calls and the
/// instructions [`decode`] names are not its business (a call writes `x30`).
#[must_use]
pub fn written(word: u32) -> Written {
    let mut w = Written::default();
    let rd = (word & 0x1f) as u8;
    let rn = ((word >> 5) & 0x1f) as u8;
    let dest = |w: &mut Written, r: u8| {
        if r != 31 {
            w.push(r);
        }
    };
    if let Some((a, wb)) = load_store(word) {
        if !a.store || word & 0x3b20_0c00 == 0x3820_0000 || word & 0x3f00_0000 == 0x0800_0000 {
            for r in a.data.into_iter().flatten() {
                dest(&mut w, r);
            }
        }
        // Store-exclusive status and compare-and-swap results go to Rs.
        if word & 0x3f00_0000 == 0x0800_0000 {
            dest(&mut w, ((word >> 16) & 0x1f) as u8);
        }
        if word & 0x3b20_0c00 == 0x1900_0400 {
            dest(&mut w, rd);
            dest(&mut w, rn);
            dest(&mut w, ((word >> 16) & 0x1f) as u8);
        }
        if let Some(add) = wb {
            w.push(a.base);
            if a.base == 31 {
                w.sp_add = add;
            }
        }
        return w;
    }
    match (word >> 25) & 0xf {
        // Data processing, immediate.
        0b1000 | 0b1001 => {
            let add_sub = word & 0x1f00_0000 == 0x1100_0000;
            let logical = word & 0x1f80_0000 == 0x1200_0000;
            let sets_flags = word & (1 << 29) != 0;
            if add_sub && !sets_flags {
                w.push(rd);
                if rd == 31 && rn == 31 {
                    let imm = i64::from((word >> 10) & 0xfff) << (12 * ((word >> 22) & 1));
                    w.sp_add = Some(if word & (1 << 30) != 0 { -imm } else { imm });
                }
            } else if logical && (word >> 29) & 3 != 3 {
                w.push(rd);
            } else {
                dest(&mut w, rd);
            }
        }
        // Branches, exceptions, system: MRS and SYSL write Rt.
        0b1010 | 0b1011 => {
            if word & 0xfff0_0000 == 0xd530_0000 || word & 0xfff8_0000 == 0xd528_0000 {
                dest(&mut w, rd);
            }
        }
        // Data processing, register: add/sub (extended register) writes sp as 31.
        0b0101 | 0b1101 => {
            if word & 0x1fe0_0000 == 0x0b20_0000 && word & (1 << 29) == 0 {
                w.push(rd);
            } else {
                dest(&mut w, rd);
            }
        }
        // Scalar floating point and SIMD: conversions to integers, FMOV to a
        // general-purpose register, SMOV/UMOV.
        0b0111 | 0b1111 => {
            let opcode = (word >> 16) & 7;
            let to_int = word & 0x5f20_fc00 == 0x1e20_0000 && matches!(opcode, 0 | 1 | 4 | 5 | 6);
            let fixed = word & 0x5f20_0000 == 0x1e00_0000 && opcode < 2;
            let imm4 = (word >> 11) & 0xf;
            let mov = word & 0x9fe0_8400 == 0x0e00_0400 && matches!(imm4, 0b0101 | 0b0111);
            if to_int || fixed || mov {
                dest(&mut w, rd);
            }
        }
        // SVE and SME: element counts and scalar increments, ADDVL/ADDPL/RDVL and their
        // streaming forms, CNTP, INCP/DECP (scalar), LASTA/LASTB and CLASTA/CLASTB
        // (scalar), MOVT from ZT0.
        _ => {
            let vl = word & 0xff20_f000 == 0x0420_5000;
            let gpr = word & 0xff20_e000 == 0x0420_e000
                || word & 0xff3f_c000 == 0x2520_8000
                || word & 0xff38_f800 == 0x2528_8800
                || word & 0xff3e_e000 == 0x0520_a000
                || word & 0xff3e_e000 == 0x0530_a000
                || word & 0xffff_8fe0 == 0xc04c_03e0;
            if vl {
                // ADDVL/ADDPL/ADDSVL/ADDSPL may write sp; RDVL/RDSVL write Xd.
                w.push(rd);
            } else if gpr {
                dest(&mut w, rd);
            }
        }
    }
    w
}

fn xreg(r: u8) -> String {
    if r == 31 {
        "xzr".to_string()
    } else {
        format!("x{r}")
    }
}

fn base(r: u8) -> String {
    if r == 31 {
        "sp".to_string()
    } else {
        format!("x{r}")
    }
}

impl Svcr {
    fn suffix(self) -> &'static str {
        match self {
            Svcr::Sm => " sm",
            Svcr::Za => " za",
            Svcr::Both => "",
        }
    }
}

impl SysReg {
    /// The register's assembly name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SysReg::Svcr => "SVCR",
            SysReg::Tpidr2 => "TPIDR2_EL0",
        }
    }
}

/// The assembly of an instruction, in llvm-objdump's spelling (branch targets as byte
/// offsets from the instruction: `bl .+0x10`).
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rel = |o: i64| {
            if o < 0 {
                format!(".-{:#x}", -o)
            } else {
                format!(".+{o:#x}")
            }
        };
        match *self {
            Op::Smstart(s) => write!(f, "smstart{}", s.suffix()),
            Op::Smstop(s) => write!(f, "smstop{}", s.suffix()),
            Op::Msr(reg, r) => write!(f, "msr {}, {}", reg.as_str(), xreg(r)),
            Op::Mrs(r, reg) => write!(f, "mrs {}, {}", xreg(r), reg.as_str()),
            Op::Bl(o) => write!(f, "bl {}", rel(o)),
            Op::B(o) => write!(f, "b {}", rel(o)),
            Op::Blr(r) => write!(f, "blr {}", xreg(r)),
            Op::Br(r) => write!(f, "br {}", xreg(r)),
            Op::Ret(30) => write!(f, "ret"),
            Op::Ret(r) => write!(f, "ret {}", xreg(r)),
            Op::ZeroZa => write!(f, "zero {{za}}"),
            Op::ZeroZt0 => write!(f, "zero {{ zt0 }}"),
            Op::LdrZt0(r) => write!(f, "ldr zt0, [{}]", base(r)),
            Op::StrZt0(r) => write!(f, "str zt0, [{}]", base(r)),
            Op::Cb {
                nonzero,
                reg,
                offset,
            } => write!(
                f,
                "{} {}, {}",
                if nonzero { "cbnz" } else { "cbz" },
                xreg(reg),
                rel(offset)
            ),
            Op::Tb {
                nonzero,
                reg,
                bit,
                offset,
            } => write!(
                f,
                "{} {}, #{bit}, {}",
                if nonzero { "tbnz" } else { "tbz" },
                xreg(reg),
                rel(offset)
            ),
            Op::BCond(c, o) => write!(f, "b.cond{c} {}", rel(o)),
            Op::Mov(d, s) => write!(f, "mov {}, {}", xreg(d), xreg(s)),
            Op::And1(d, s) => write!(f, "and {}, {}, #0x1", xreg(d), xreg(s)),
            Op::Other(w) => write!(f, ".inst {w:#010x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings as `llvm-mc-19 -triple=aarch64 -mattr=+sme2 --show-encoding` prints them
    /// (tests/audit.rs asks llvm-mc-19 itself).
    #[test]
    fn encodings() {
        let cases: [(u32, Op); 12] = [
            (0xd503_477f, Op::Smstart(Svcr::Both)),
            (0xd503_437f, Op::Smstart(Svcr::Sm)),
            (0xd503_457f, Op::Smstart(Svcr::Za)),
            (0xd503_467f, Op::Smstop(Svcr::Both)),
            (0xd503_427f, Op::Smstop(Svcr::Sm)),
            (0xd503_447f, Op::Smstop(Svcr::Za)),
            (0xd51b_d0a8, Op::Msr(SysReg::Tpidr2, 8)),
            (0xd53b_4249, Op::Mrs(9, SysReg::Svcr)),
            (0xc008_00ff, Op::ZeroZa),
            (0xe11f_8260, Op::LdrZt0(19)),
            (0xe13f_83e0, Op::StrZt0(31)),
            (0x9400_0000, Op::Bl(0)),
        ];
        for (word, op) in cases {
            assert_eq!(decode(word), op, "{word:#x}");
        }
        assert_eq!(
            decode(0x3600_0053),
            Op::Tb {
                nonzero: false,
                reg: 19,
                bit: 0,
                offset: 8
            }
        );
        assert_eq!(decode(0x17ff_fff9), Op::B(-28));
        assert_eq!(decode(0xd65f_03c0).to_string(), "ret");
        // `zero {za0.s}` zeroes one tile only; a NOP is nothing.
        assert!(matches!(decode(0xc008_0011), Op::Other(_)));
        assert!(matches!(decode(0xd503_201f), Op::Other(_)));
    }
}
