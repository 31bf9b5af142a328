//! DWARF register numbers and names for the architectures whose code Locus reads.
//!
//! Stack map locations and live-outs name registers by their DWARF number. The numbering
//! comes from each architecture's psABI: the System V AMD64 ABI (x86-64) and the ARM
//! "DWARF for the Arm 64-bit Architecture" document (AArch64).

use crate::Arch;

/// DWARF numbers of the registers a runtime most often needs.
pub mod x86_64 {
    /// `%rax`.
    pub const RAX: u16 = 0;
    /// `%rdx`.
    pub const RDX: u16 = 1;
    /// `%rcx`.
    pub const RCX: u16 = 2;
    /// `%rbx`.
    pub const RBX: u16 = 3;
    /// `%rsi`.
    pub const RSI: u16 = 4;
    /// `%rdi`.
    pub const RDI: u16 = 5;
    /// `%rbp`, the frame pointer.
    pub const RBP: u16 = 6;
    /// `%rsp`, the stack pointer.
    pub const RSP: u16 = 7;
    /// `%r12`.
    pub const R12: u16 = 12;
    /// `%r13`.
    pub const R13: u16 = 13;
    /// `%r14`.
    pub const R14: u16 = 14;
    /// `%r15`.
    pub const R15: u16 = 15;
    /// The return address column.
    pub const RA: u16 = 16;
}

/// DWARF numbers of the registers a runtime most often needs.
pub mod aarch64 {
    /// `x29`, the frame pointer.
    pub const FP: u16 = 29;
    /// `x30`, the link register.
    pub const LR: u16 = 30;
    /// `sp`.
    pub const SP: u16 = 31;
}

/// The names of x86-64's DWARF registers 0-16 (the System V psABI's numbering: the sixteen
/// general-purpose registers in DWARF order, then the return address column, `rip`), as gdb
/// and LLVM's assembler spell them. Written once for Locus: locus-dwarf reads them too.
pub const X86_64_GPR_NAMES: [&str; 17] = [
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip",
];

/// The conventional name of DWARF register `dwarf_reg` on `arch`, if it has one.
pub fn register_name(arch: Arch, dwarf_reg: u16) -> Option<alloc::borrow::Cow<'static, str>> {
    use alloc::borrow::Cow;
    use alloc::format;
    let r = dwarf_reg;
    Some(match arch {
        Arch::X86_64 => match r {
            0..=16 => Cow::Borrowed(*X86_64_GPR_NAMES.get(usize::from(r))?),
            17..=32 => Cow::Owned(format!("xmm{}", r - 17)),
            33..=40 => Cow::Owned(format!("st{}", r - 33)),
            41..=48 => Cow::Owned(format!("mm{}", r - 41)),
            49 => Cow::Borrowed("rflags"),
            50 => Cow::Borrowed("es"),
            51 => Cow::Borrowed("cs"),
            52 => Cow::Borrowed("ss"),
            53 => Cow::Borrowed("ds"),
            54 => Cow::Borrowed("fs"),
            55 => Cow::Borrowed("gs"),
            58 => Cow::Borrowed("fs.base"),
            59 => Cow::Borrowed("gs.base"),
            67..=82 => Cow::Owned(format!("xmm{}", r - 67 + 16)),
            118..=125 => Cow::Owned(format!("k{}", r - 118)),
            _ => return None,
        },
        Arch::AArch64 => match r {
            0..=28 => Cow::Owned(format!("x{r}")),
            29 => Cow::Borrowed("x29"),
            30 => Cow::Borrowed("x30"),
            31 => Cow::Borrowed("sp"),
            32 => Cow::Borrowed("pc"),
            33 => Cow::Borrowed("elr_mode"),
            34 => Cow::Borrowed("ra_sign_state"),
            46 => Cow::Borrowed("vg"),
            47 => Cow::Borrowed("ffr"),
            48..=63 => Cow::Owned(format!("p{}", r - 48)),
            64..=95 => Cow::Owned(format!("v{}", r - 64)),
            96..=127 => Cow::Owned(format!("z{}", r - 96)),
            _ => return None,
        },
    })
}

/// The DWARF number of a register named `name` on `arch` (the inverse of [`register_name`]
/// for general-purpose registers, the stack and frame pointers).
pub fn register_number(arch: Arch, name: &str) -> Option<u16> {
    match arch {
        Arch::X86_64 => X86_64_GPR_NAMES
            .iter()
            .position(|&n| n == name)
            .map(|i| i as u16),
        Arch::AArch64 => match name {
            "sp" => Some(31),
            "fp" => Some(29),
            "lr" => Some(30),
            _ => name
                .strip_prefix('x')?
                .parse::<u16>()
                .ok()
                .filter(|&n| n <= 30),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for arch in [Arch::X86_64, Arch::AArch64] {
            for r in 0..=30u16 {
                if let Some(name) = register_name(arch, r) {
                    if let Some(n) = register_number(arch, &name) {
                        assert_eq!(n, r, "{arch:?} {name}");
                    }
                }
            }
        }
        assert_eq!(register_name(Arch::X86_64, 7).as_deref(), Some("rsp"));
        assert_eq!(register_name(Arch::X86_64, 17).as_deref(), Some("xmm0"));
        assert_eq!(register_name(Arch::AArch64, 31).as_deref(), Some("sp"));
        assert_eq!(register_name(Arch::AArch64, 64).as_deref(), Some("v0"));
        assert_eq!(register_number(Arch::AArch64, "x19"), Some(19));
    }
}
