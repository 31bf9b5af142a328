//! Finding the stack map section in object files, executables and shared libraries.
//!
//! The spec ("Stack Map Section") names it `.llvm_stackmaps` in ELF and `__llvm_stackmaps`
//! in segment `__LLVM_STACKMAPS` in Mach-O; COFF uses `.llvm_stackmaps` too. One reader,
//! the `object` crate, serves all three.

use alloc::string::{String, ToString};

use object::{Object, ObjectSection};

use crate::endian::RunTimeEndian;
use crate::error::{Error, Result};
use crate::Arch;

/// The stack map section of one object file.
#[derive(Clone, Copy, Debug)]
pub struct StackMapSection<'a> {
    /// The section's bytes as stored in the file.
    pub data: &'a [u8],
    /// Byte order of the file.
    pub endian: RunTimeEndian,
    /// The section's address in the file's address space (0 in a relocatable object).
    pub address: u64,
    /// Offset of the section's bytes in the file.
    pub file_offset: u64,
    /// The architecture, when it is one this crate knows.
    pub arch: Option<Arch>,
}

/// Facts about an object file that tools print next to its stack maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The container format.
    pub format: object::BinaryFormat,
    /// The architecture as the `object` crate names it.
    pub architecture: object::Architecture,
    /// True for a 64-bit file.
    pub is_64: bool,
    /// Byte order.
    pub endian: RunTimeEndian,
    /// The file's kind (relocatable, executable, dynamic).
    pub kind: object::ObjectKind,
    /// An ELF shared object's `DT_SONAME`.
    pub load_name: Option<String>,
}

/// `DT_SONAME` of an ELF file, if it has a dynamic section that names one.
fn elf_soname<Elf: object::read::elf::FileHeader>(data: &[u8]) -> Option<String> {
    use object::read::elf::Dyn;
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let (dynamic, link) = sections.dynamic(endian, data).ok()??;
    let strings = sections.strings(endian, data, link).ok()?;
    dynamic
        .iter()
        .find(|d| d.tag32(endian) == Some(object::elf::DT_SONAME))
        .and_then(|d| d.string(endian, strings).ok())
        .map(|name| String::from_utf8_lossy(name).into_owned())
}

fn is_stackmap_section(name: &str, segment: Option<&str>, format: object::BinaryFormat) -> bool {
    match format {
        object::BinaryFormat::MachO => {
            name == "__llvm_stackmaps" && segment.is_none_or(|s| s == "__LLVM_STACKMAPS")
        }
        _ => name == ".llvm_stackmaps",
    }
}

/// Reads `data` as an object file and returns its facts and its stack map section, if any.
pub fn find_section(data: &[u8]) -> Result<(ObjectInfo, Option<StackMapSection<'_>>)> {
    let file = object::File::parse(data).map_err(|e| Error::Object {
        message: e.to_string(),
    })?;
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let load_name = match &file {
        object::File::Elf64(_) => elf_soname::<object::elf::FileHeader64<object::Endianness>>(data),
        object::File::Elf32(_) => elf_soname::<object::elf::FileHeader32<object::Endianness>>(data),
        _ => None,
    };
    // COFF objects carry no pointer width of their own; it follows from the machine.
    let is_64 =
        file.is_64() || file.architecture().address_size() == Some(object::AddressSize::U64);
    let info = ObjectInfo {
        format: file.format(),
        architecture: file.architecture(),
        is_64,
        endian,
        kind: file.kind(),
        load_name,
    };
    let arch = match file.architecture() {
        object::Architecture::X86_64 => Some(Arch::X86_64),
        object::Architecture::Aarch64 => Some(Arch::AArch64),
        _ => None,
    };
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        let segment = section.segment_name().ok().flatten();
        if !is_stackmap_section(name, segment, file.format()) {
            continue;
        }
        let data = section.data().map_err(|e| Error::Object {
            message: String::from("cannot read the stack map section: ") + &e.to_string(),
        })?;
        let file_offset = section.file_range().map_or(0, |(o, _)| o);
        return Ok((
            info,
            Some(StackMapSection {
                data,
                endian,
                address: section.address(),
                file_offset,
                arch,
            }),
        ));
    }
    Ok((info, None))
}
