//! The names `llvm-readobj` prints for a file's container and machine.
//!
//! `Format:` is LLVM's `ObjectFile::getFileFormatName()` and `Arch:` is
//! `Triple::getArchTypeName(ObjectFile::getArch())`. The strings below are LLVM 19's, from
//! `llvm/include/llvm/Object/ELFObjectFile.h`, `llvm/lib/Object/MachOObjectFile.cpp`,
//! `llvm/lib/Object/COFFObjectFile.cpp`, `llvm/include/llvm/Object/WindowsMachineFlag.h` and
//! `llvm/lib/TargetParser/Triple.cpp`; every machine LLVM 19 names is here, for both ELF
//! classes and both byte orders.

use object::{elf, macho, pe, BinaryFormat};

use crate::endian::RunTimeEndian;
use crate::object::ObjectInfo;

/// `Triple::getArchTypeName(Triple::UnknownArch)`.
pub const UNKNOWN_ARCH: &str = "unknown";

/// `ELFObjectFile::getFileFormatName()` for a machine it does not name, by class.
const ELF_UNKNOWN: [&str; 2] = ["elf32-unknown", "elf64-unknown"];

/// `EM_LANAI`, which the `object` crate does not define.
const EM_LANAI: u16 = 244;
/// `EM_VE`, which the `object` crate does not define.
const EM_VE: u16 = 251;

/// What LLVM calls one ELF machine. Both arrays are indexed by [`elf_variant`]: 32-bit
/// little-endian, 32-bit big-endian, 64-bit little-endian, 64-bit big-endian. An empty
/// format name is one LLVM does not give (it prints [`ELF_UNKNOWN`]).
struct ElfMachine {
    machine: u16,
    format: [&'static str; 4],
    arch: [&'static str; 4],
}

/// The same name for all four variants.
const fn all(name: &'static str) -> [&'static str; 4] {
    [name; 4]
}

/// One name for 32-bit files of either byte order, another for 64-bit ones.
const fn by_class(name32: &'static str, name64: &'static str) -> [&'static str; 4] {
    [name32, name32, name64, name64]
}

/// One name for little-endian files of either class, another for big-endian ones.
const fn by_endian(little: &'static str, big: &'static str) -> [&'static str; 4] {
    [little, big, little, big]
}

/// LLVM 19's ELF machines (`getFileFormatName`, `getArch`). `EM_AMDGPU`'s architecture
/// depends on the header flags too: see [`amdgpu_arch`].
const ELF_MACHINES: &[ElfMachine] = &[
    ElfMachine {
        machine: elf::EM_68K,
        format: by_class("elf32-m68k", ""),
        arch: all("m68k"),
    },
    ElfMachine {
        machine: elf::EM_386,
        format: by_class("elf32-i386", "elf64-i386"),
        arch: all("i386"),
    },
    ElfMachine {
        machine: elf::EM_IAMCU,
        format: by_class("elf32-iamcu", ""),
        arch: all("i386"),
    },
    ElfMachine {
        machine: elf::EM_X86_64,
        format: by_class("elf32-x86-64", "elf64-x86-64"),
        arch: all("x86_64"),
    },
    ElfMachine {
        machine: elf::EM_ARM,
        format: ["elf32-littlearm", "elf32-bigarm", "", ""],
        arch: all("arm"),
    },
    ElfMachine {
        machine: elf::EM_AVR,
        format: by_class("elf32-avr", ""),
        arch: all("avr"),
    },
    ElfMachine {
        machine: elf::EM_HEXAGON,
        format: by_class("elf32-hexagon", ""),
        arch: all("hexagon"),
    },
    ElfMachine {
        machine: EM_LANAI,
        format: by_class("elf32-lanai", ""),
        arch: all("lanai"),
    },
    ElfMachine {
        machine: elf::EM_MIPS,
        format: by_class("elf32-mips", "elf64-mips"),
        arch: ["mipsel", "mips", "mips64el", "mips64"],
    },
    ElfMachine {
        machine: elf::EM_MSP430,
        format: by_class("elf32-msp430", ""),
        arch: all("msp430"),
    },
    ElfMachine {
        machine: elf::EM_PPC,
        format: ["elf32-powerpcle", "elf32-powerpc", "", ""],
        arch: by_endian("powerpcle", "powerpc"),
    },
    ElfMachine {
        machine: elf::EM_PPC64,
        format: ["", "", "elf64-powerpcle", "elf64-powerpc"],
        arch: by_endian("powerpc64le", "powerpc64"),
    },
    ElfMachine {
        machine: elf::EM_RISCV,
        format: by_class("elf32-littleriscv", "elf64-littleriscv"),
        arch: by_class("riscv32", "riscv64"),
    },
    ElfMachine {
        machine: elf::EM_CSKY,
        format: by_class("elf32-csky", ""),
        arch: all("csky"),
    },
    ElfMachine {
        machine: elf::EM_SPARC,
        format: by_class("elf32-sparc", ""),
        arch: by_endian("sparcel", "sparc"),
    },
    ElfMachine {
        machine: elf::EM_SPARC32PLUS,
        format: by_class("elf32-sparc", ""),
        arch: by_endian("sparcel", "sparc"),
    },
    ElfMachine {
        machine: elf::EM_SPARCV9,
        format: by_class("", "elf64-sparc"),
        arch: all("sparcv9"),
    },
    ElfMachine {
        machine: elf::EM_AMDGPU,
        format: by_class("elf32-amdgpu", "elf64-amdgpu"),
        arch: all(UNKNOWN_ARCH),
    },
    ElfMachine {
        machine: elf::EM_CUDA,
        format: all(""),
        arch: by_class("nvptx", "nvptx64"),
    },
    ElfMachine {
        machine: elf::EM_LOONGARCH,
        format: by_class("elf32-loongarch", "elf64-loongarch"),
        arch: by_class("loongarch32", "loongarch64"),
    },
    ElfMachine {
        machine: elf::EM_XTENSA,
        format: by_class("elf32-xtensa", ""),
        arch: all("xtensa"),
    },
    ElfMachine {
        machine: elf::EM_AARCH64,
        format: ["", "", "elf64-littleaarch64", "elf64-bigaarch64"],
        arch: by_endian("aarch64", "aarch64_be"),
    },
    ElfMachine {
        machine: elf::EM_S390,
        format: by_class("", "elf64-s390"),
        arch: all("s390x"),
    },
    ElfMachine {
        machine: elf::EM_BPF,
        format: by_class("", "elf64-bpf"),
        arch: by_endian("bpfel", "bpfeb"),
    },
    ElfMachine {
        machine: EM_VE,
        format: by_class("", "elf64-ve"),
        arch: all("ve"),
    },
];

/// `EF_AMDGPU_MACH`: the processor field of an AMDGPU ELF file's flags.
const EF_AMDGPU_MACH: u32 = 0x0ff;
/// LLVM 19's `EF_AMDGPU_MACH_R600_FIRST..=EF_AMDGPU_MACH_R600_LAST`.
const AMDGPU_R600: core::ops::RangeInclusive<u32> = 0x001..=0x010;
/// LLVM 19's `EF_AMDGPU_MACH_AMDGCN_FIRST..=EF_AMDGPU_MACH_AMDGCN_LAST` (GFX600 to
/// GFX12_GENERIC).
const AMDGPU_AMDGCN: core::ops::RangeInclusive<u32> = 0x020..=0x059;

/// `getArch()` of an `EM_AMDGPU` file: `r600` or `amdgcn` by the processor in its flags.
fn amdgpu_arch(info: &ObjectInfo) -> &'static str {
    let mach = info.machine_flags & EF_AMDGPU_MACH;
    if info.endian == RunTimeEndian::Big {
        UNKNOWN_ARCH
    } else if AMDGPU_R600.contains(&mach) {
        "r600"
    } else if AMDGPU_AMDGCN.contains(&mach) {
        "amdgcn"
    } else {
        UNKNOWN_ARCH
    }
}

/// The index into [`ElfMachine`]'s arrays for `info`'s class and byte order.
fn elf_variant(info: &ObjectInfo) -> usize {
    usize::from(info.is_64) * 2 + usize::from(info.endian == RunTimeEndian::Big)
}

fn elf_machine(info: &ObjectInfo) -> Option<&'static ElfMachine> {
    ELF_MACHINES
        .iter()
        .find(|m| u32::from(m.machine) == info.machine)
}

/// What LLVM calls one Mach-O CPU type: its `Format:` name for 32-bit and 64-bit files, and
/// its architecture.
struct MachOCpu {
    cputype: u32,
    format: [&'static str; 2],
    arch: &'static str,
}

/// `MachOObjectFile::getFileFormatName()` for a CPU type it does not name, by word size.
const MACHO_UNKNOWN: [&str; 2] = ["Mach-O 32-bit unknown", "Mach-O 64-bit unknown"];

/// LLVM 19's Mach-O CPU types (`getFileFormatName`, `getArch`). An empty format name falls
/// back to [`MACHO_UNKNOWN`].
const MACHO_CPUS: &[MachOCpu] = &[
    MachOCpu {
        cputype: macho::CPU_TYPE_X86,
        format: ["Mach-O 32-bit i386", ""],
        arch: "i386",
    },
    MachOCpu {
        cputype: macho::CPU_TYPE_ARM,
        format: ["Mach-O arm", ""],
        arch: "arm",
    },
    MachOCpu {
        cputype: macho::CPU_TYPE_POWERPC,
        format: ["Mach-O 32-bit ppc", ""],
        arch: "powerpc",
    },
    MachOCpu {
        cputype: macho::CPU_TYPE_ARM64_32,
        format: ["Mach-O arm64 (ILP32)", "Mach-O arm64 (ILP32)"],
        arch: "aarch64_32",
    },
    MachOCpu {
        cputype: macho::CPU_TYPE_X86_64,
        format: ["", "Mach-O 64-bit x86-64"],
        arch: "x86_64",
    },
    MachOCpu {
        cputype: macho::CPU_TYPE_ARM64,
        format: ["", "Mach-O arm64"],
        arch: "aarch64",
    },
    MachOCpu {
        cputype: macho::CPU_TYPE_POWERPC64,
        format: ["", "Mach-O 64-bit ppc64"],
        arch: "powerpc64",
    },
];

/// What LLVM calls one COFF machine.
struct CoffMachine {
    machine: u16,
    format: &'static str,
    arch: &'static str,
}

/// `COFFObjectFile::getFileFormatName()` for a machine it does not name.
const COFF_UNKNOWN: &str = "COFF-<unknown arch>";

/// LLVM 19's COFF machines (`getFileFormatName`, `getMachineArchType`).
const COFF_MACHINES: &[CoffMachine] = &[
    CoffMachine {
        machine: pe::IMAGE_FILE_MACHINE_I386,
        format: "COFF-i386",
        arch: "i386",
    },
    CoffMachine {
        machine: pe::IMAGE_FILE_MACHINE_AMD64,
        format: "COFF-x86-64",
        arch: "x86_64",
    },
    CoffMachine {
        machine: pe::IMAGE_FILE_MACHINE_ARMNT,
        format: "COFF-ARM",
        arch: "thumb",
    },
    CoffMachine {
        machine: pe::IMAGE_FILE_MACHINE_ARM64,
        format: "COFF-ARM64",
        arch: "aarch64",
    },
    CoffMachine {
        machine: pe::IMAGE_FILE_MACHINE_ARM64EC,
        format: "COFF-ARM64EC",
        arch: "aarch64",
    },
    CoffMachine {
        machine: pe::IMAGE_FILE_MACHINE_ARM64X,
        format: "COFF-ARM64X",
        arch: "aarch64",
    },
];

/// What `llvm-readobj` prints after `Format:` for `info`'s file. ELF, Mach-O and COFF files
/// get LLVM 19's names; other containers get [`UNKNOWN_ARCH`].
pub fn format_name(info: &ObjectInfo) -> &'static str {
    let wide = usize::from(info.is_64);
    match info.format {
        BinaryFormat::Elf => elf_machine(info)
            .map(|m| m.format[elf_variant(info)])
            .filter(|name| !name.is_empty())
            .unwrap_or(ELF_UNKNOWN[wide]),
        BinaryFormat::MachO => MACHO_CPUS
            .iter()
            .find(|c| c.cputype == info.machine)
            .map(|c| c.format[wide])
            .filter(|name| !name.is_empty())
            .unwrap_or(MACHO_UNKNOWN[wide]),
        BinaryFormat::Coff | BinaryFormat::Pe => COFF_MACHINES
            .iter()
            .find(|m| u32::from(m.machine) == info.machine)
            .map_or(COFF_UNKNOWN, |m| m.format),
        _ => UNKNOWN_ARCH,
    }
}

/// What `llvm-readobj` prints after `Arch:` for `info`'s file.
pub fn arch_name(info: &ObjectInfo) -> &'static str {
    match info.format {
        BinaryFormat::Elf if info.machine == u32::from(elf::EM_AMDGPU) => amdgpu_arch(info),
        BinaryFormat::Elf => elf_machine(info).map_or(UNKNOWN_ARCH, |m| m.arch[elf_variant(info)]),
        BinaryFormat::MachO => MACHO_CPUS
            .iter()
            .find(|c| c.cputype == info.machine)
            .map_or(UNKNOWN_ARCH, |c| c.arch),
        BinaryFormat::Coff | BinaryFormat::Pe => COFF_MACHINES
            .iter()
            .find(|m| u32::from(m.machine) == info.machine)
            .map_or(UNKNOWN_ARCH, |m| m.arch),
        _ => UNKNOWN_ARCH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use object::{Architecture, ObjectKind};

    fn info(format: BinaryFormat, machine: u32, is_64: bool, big: bool) -> ObjectInfo {
        ObjectInfo {
            format,
            architecture: Architecture::Unknown,
            is_64,
            endian: if big {
                RunTimeEndian::Big
            } else {
                RunTimeEndian::Little
            },
            kind: ObjectKind::Relocatable,
            load_name: None,
            machine,
            machine_flags: 0,
            code: Vec::new(),
        }
    }

    #[test]
    fn the_names_the_issue_reported() {
        let ppc64be = info(BinaryFormat::Elf, elf::EM_PPC64.into(), true, true);
        assert_eq!(format_name(&ppc64be), "elf64-powerpc");
        assert_eq!(arch_name(&ppc64be), "powerpc64");
        let rv64 = info(BinaryFormat::Elf, elf::EM_RISCV.into(), true, false);
        assert_eq!(format_name(&rv64), "elf64-littleriscv");
        assert_eq!(arch_name(&rv64), "riscv64");
    }

    #[test]
    fn unnamed_machines_and_classes() {
        // LLVM names EM_AARCH64 only in 64-bit files, and no format for EM_CUDA.
        let a32 = info(BinaryFormat::Elf, elf::EM_AARCH64.into(), false, false);
        assert_eq!(format_name(&a32), "elf32-unknown");
        assert_eq!(arch_name(&a32), "aarch64");
        let cuda = info(BinaryFormat::Elf, elf::EM_CUDA.into(), true, false);
        assert_eq!(format_name(&cuda), "elf64-unknown");
        assert_eq!(arch_name(&cuda), "nvptx64");
        let none = info(BinaryFormat::Elf, 0xfffe, true, false);
        assert_eq!(
            (format_name(&none), arch_name(&none)),
            ("elf64-unknown", "unknown")
        );
        let macho = info(BinaryFormat::MachO, 0x42, true, false);
        assert_eq!(format_name(&macho), "Mach-O 64-bit unknown");
        let coff = info(BinaryFormat::Coff, 0x42, false, false);
        assert_eq!(
            (format_name(&coff), arch_name(&coff)),
            (COFF_UNKNOWN, "unknown")
        );
    }

    #[test]
    fn amdgpu_by_processor() {
        let mut amd = info(BinaryFormat::Elf, elf::EM_AMDGPU.into(), true, false);
        amd.machine_flags = 0x04c; // gfx942
        assert_eq!(arch_name(&amd), "amdgcn");
        amd.machine_flags = 0x001;
        assert_eq!(arch_name(&amd), "r600");
        amd.machine_flags = 0;
        assert_eq!(arch_name(&amd), "unknown");
    }

    #[test]
    fn every_machine_once() {
        for (i, m) in ELF_MACHINES.iter().enumerate() {
            assert!(
                ELF_MACHINES[i + 1..].iter().all(|n| n.machine != m.machine),
                "EM {} twice",
                m.machine
            );
        }
    }
}
