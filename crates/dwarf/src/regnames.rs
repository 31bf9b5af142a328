//! DWARF register numbers of x86-64 and AArch64 by name, as llvm-dwarfdump
//! and gdb print them, for the text syntax ([`crate::parse_text`]).
//!
//! llvm-dwarfdump 19 names registers with LLVM's upper-case names (`RSP`,
//! `XMM0`, `W0`, `B0`, `Z0`, `PN0`), gdb with its lower-case ones behind a
//! `$` (`$rsp`, `$xmm0`, `$eflags`). Both sets are here, with AArch64's usual
//! aliases (`X0`, `SP`, `V0`/`Q0`/`D0`/`S0`/`H0`, `P0`); the names of the
//! two architectures do not collide, so one table serves both. Matching is
//! case-insensitive and ignores a leading `$`.

use locus_stackmap::regs::X86_64_GPR_NAMES;

/// Names with one number each.
const FIXED: &[(&str, u16)] = &[
    // x86-64 (System V psABI numbering); 0-16 are locus-stackmap's X86_64_GPR_NAMES.
    ("RFLAGS", 49),
    ("EFLAGS", 49),
    ("ES", 50),
    ("CS", 51),
    ("SS", 52),
    ("DS", 53),
    ("FS", 54),
    ("GS", 55),
    ("FS_BASE", 58),
    ("GS_BASE", 59),
    ("MXCSR", 64),
    ("FCTRL", 65),
    ("FSTAT", 66),
    // AArch64 (AADWARF64).
    ("WSP", 31),
    ("SP", 31),
    ("VG", 46),
    ("FFR", 47),
];

/// Numbered families: `prefix` + index in `first..=last` is DWARF register
/// `number + (index - first)`.
struct Family {
    prefix: &'static str,
    first: u16,
    last: u16,
    number: u16,
}

const FAMILIES: &[Family] = &[
    // x86-64.
    fam("R", 8, 15, 8),
    fam("R", 16, 31, 130),
    fam("XMM", 0, 15, 17),
    fam("XMM", 16, 31, 67),
    fam("ST", 0, 7, 33),
    fam("MM", 0, 7, 41),
    fam("K", 0, 7, 118),
    // AArch64.
    fam("W", 0, 30, 0),
    fam("X", 0, 30, 0),
    fam("PN", 0, 15, 48),
    fam("P", 0, 15, 48),
    fam("B", 0, 31, 64),
    fam("H", 0, 31, 64),
    fam("S", 0, 31, 64),
    fam("D", 0, 31, 64),
    fam("Q", 0, 31, 64),
    fam("V", 0, 31, 64),
    fam("Z", 0, 31, 96),
];

const fn fam(prefix: &'static str, first: u16, last: u16, number: u16) -> Family {
    Family {
        prefix,
        first,
        last,
        number,
    }
}

/// The DWARF register number of an x86-64 or AArch64 register name as
/// llvm-dwarfdump or gdb prints it (`RSP`, `$rsp`, `XMM16`, `W0`, `x0`,
/// `B31`, `Z7`), or `None`.
///
/// ```
/// use locus_dwarf::register_number;
/// assert_eq!(register_number("RSP"), Some(7));
/// assert_eq!(register_number("$xmm0"), Some(17));
/// assert_eq!(register_number("W30"), Some(30));
/// assert_eq!(register_number("VGPR0"), None);
/// ```
pub fn register_number(name: &str) -> Option<u16> {
    let name = name.strip_prefix('$').unwrap_or(name);
    if let Some((_, n)) = FIXED.iter().find(|(f, _)| f.eq_ignore_ascii_case(name)) {
        return Some(*n);
    }
    if let Some(n) = X86_64_GPR_NAMES
        .iter()
        .position(|f| f.eq_ignore_ascii_case(name))
    {
        return u16::try_from(n).ok();
    }
    FAMILIES.iter().find_map(|f| {
        let head = name.get(..f.prefix.len())?;
        if !head.eq_ignore_ascii_case(f.prefix) {
            return None;
        }
        let digits = name.get(f.prefix.len()..)?;
        if digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || (digits.len() > 1 && digits.starts_with('0'))
        {
            return None;
        }
        let i: u16 = digits.parse().ok()?;
        (f.first..=f.last)
            .contains(&i)
            .then(|| f.number + (i - f.first))
    })
}

#[cfg(test)]
mod tests {
    use super::register_number;

    /// The names llvm-dwarfdump 19 prints for `DW_OP_regx N` (x86-64 and
    /// AArch64 objects), and gdb 13's for x86-64.
    #[test]
    fn names_of_both_tools() {
        let cases: &[(&str, u16)] = &[
            ("RAX", 0),
            ("R15", 15),
            ("RIP", 16),
            ("XMM15", 32),
            ("ST7", 40),
            ("MM0", 41),
            ("RFLAGS", 49),
            ("GS", 55),
            ("FS_BASE", 58),
            ("XMM16", 67),
            ("XMM31", 82),
            ("K7", 125),
            ("R16", 130),
            ("R31", 145),
            ("$eflags", 49),
            ("$mxcsr", 64),
            ("$fstat", 66),
            ("W0", 0),
            ("WSP", 31),
            ("VG", 46),
            ("FFR", 47),
            ("PN15", 63),
            ("B0", 64),
            ("B31", 95),
            ("Z31", 127),
            ("x29", 29),
            ("sp", 31),
            ("v3", 67),
        ];
        for (name, n) in cases {
            assert_eq!(register_number(name), Some(*n), "{name}");
        }
        for bad in ["R7", "XMM32", "W31", "X01", "ST", "K8", "", "$", "RSP+8"] {
            assert_eq!(register_number(bad), None, "{bad}");
        }
    }
}
