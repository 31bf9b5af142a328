//! The text `llvm-readobj --stackmap` prints, byte for byte.
//!
//! Preamble (llvm-readobj's object dumper): a blank line, then `File:`, `Format:`, `Arch:`,
//! `AddressSize:` and, for ELF, `LoadName:`. Then LLVM's stack map printer, one table.

use std::fmt::Write;

use locus_stackmap::object::ObjectInfo;
use locus_stackmap::{Endian, Location, RunTimeEndian, Table};
use object::{Architecture, BinaryFormat};

/// The preamble llvm-readobj prints before any dump of `path`.
pub fn preamble(path: &str, info: &ObjectInfo) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "\nFile: {path}\nFormat: {}\nArch: {}\nAddressSize: {}bit\n",
        format_name(info),
        arch_name(info),
        if info.is_64 { 64 } else { 32 }
    );
    if info.format == BinaryFormat::Elf {
        let _ = writeln!(
            s,
            "LoadName: {}",
            info.load_name.as_deref().unwrap_or("<Not found>")
        );
    }
    s
}

fn format_name(info: &ObjectInfo) -> String {
    let big = info.endian == RunTimeEndian::Big;
    match info.format {
        BinaryFormat::Elf => {
            let bits = if info.is_64 { 64 } else { 32 };
            let arch = match info.architecture {
                Architecture::X86_64 => "x86-64",
                Architecture::Aarch64 if big => "bigaarch64",
                Architecture::Aarch64 => "littleaarch64",
                Architecture::I386 => "i386",
                Architecture::PowerPc64 if big => "powerpc64",
                Architecture::PowerPc64 => "powerpcle",
                Architecture::S390x => "s390",
                _ => "unknown",
            };
            format!("elf{bits}-{arch}")
        }
        // LLVM names arm64 Mach-O files without the word size.
        BinaryFormat::MachO => match info.architecture {
            Architecture::X86_64 => "Mach-O 64-bit x86-64".into(),
            Architecture::Aarch64 => "Mach-O arm64".into(),
            _ => format!("Mach-O {}-bit unknown", if info.is_64 { 64 } else { 32 }),
        },
        BinaryFormat::Coff => match info.architecture {
            Architecture::X86_64 => "COFF-x86-64".into(),
            Architecture::Aarch64 => "COFF-ARM64".into(),
            _ => "COFF-<unknown arch>".into(),
        },
        other => format!("{other:?}"),
    }
}

fn arch_name(info: &ObjectInfo) -> &'static str {
    match info.architecture {
        Architecture::X86_64 => "x86_64",
        Architecture::Aarch64 if info.endian == RunTimeEndian::Big => "aarch64_be",
        Architecture::Aarch64 => "aarch64",
        Architecture::I386 => "i386",
        Architecture::PowerPc64 if info.endian == RunTimeEndian::Big => "powerpc64",
        Architecture::PowerPc64 => "powerpc64le",
        Architecture::S390x => "s390x",
        _ => "unknown",
    }
}

/// One table as LLVM's stack map printer writes it.
pub fn table<E: Endian>(t: &Table<'_, E>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "LLVM StackMap Version: {}\nNum Functions: {}",
        t.version(),
        t.num_functions()
    );
    for f in t.functions() {
        let _ = write!(
            s,
            "\n  Function address: {}, stack size: {}, callsite record count: {}",
            f.address, f.stack_size, f.record_count
        );
    }
    let _ = write!(s, "\nNum Constants: {}", t.num_constants());
    for (i, c) in t.constants().enumerate() {
        let _ = write!(s, "\n  #{}: {c}", i + 1);
    }
    let _ = write!(s, "\nNum Records: {}", t.num_records());
    for r in t.records() {
        let _ = write!(
            s,
            "\n  Record ID: {}, instruction offset: {}\n    {} locations:",
            r.id(),
            r.instruction_offset(),
            r.num_locations()
        );
        for (i, l) in r.locations().enumerate() {
            let _ = write!(s, "\n      #{}: ", i + 1);
            let _ = match l {
                Location::Register { dwarf_reg, .. } => write!(s, "Register R#{dwarf_reg}"),
                Location::Direct {
                    dwarf_reg, offset, ..
                } => {
                    write!(s, "Direct R#{dwarf_reg} + {offset}")
                }
                Location::Indirect {
                    dwarf_reg, offset, ..
                } => {
                    write!(s, "Indirect [R#{dwarf_reg} + {offset}]")
                }
                // LLVM's printer reads the small constant as an unsigned 32-bit number.
                Location::Constant { value, .. } => write!(s, "Constant {}", value as u32),
                Location::ConstantIndex { index, value, .. } => {
                    write!(s, "ConstantIndex #{index} ({value})")
                }
            };
            let _ = write!(s, ", size: {}", l.size());
        }
        let _ = write!(s, "\n    {} live-outs: [ ", r.num_live_outs());
        for lo in r.live_outs() {
            let _ = write!(s, "R#{} ({}-bytes) ", lo.dwarf_reg, lo.size);
        }
        s.push(']');
    }
    s.push('\n');
    s
}
