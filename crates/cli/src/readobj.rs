//! The text `llvm-readobj --stackmap` prints, byte for byte.
//!
//! Preamble (llvm-readobj's object dumper): a blank line, then `File:`, `Format:`, `Arch:`,
//! `AddressSize:` and, for ELF, `LoadName:`. Then LLVM's stack map printer, one table.

use std::fmt::Write;

use locus_stackmap::names;
use locus_stackmap::object::ObjectInfo;
use locus_stackmap::{Endian, Location, Table};
use object::BinaryFormat;

/// The preamble llvm-readobj prints before any dump of `path`.
pub fn preamble(path: &str, info: &ObjectInfo) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "\nFile: {path}\nFormat: {}\nArch: {}\nAddressSize: {}bit\n",
        names::format_name(info),
        names::arch_name(info),
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
