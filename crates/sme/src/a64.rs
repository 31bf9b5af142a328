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
