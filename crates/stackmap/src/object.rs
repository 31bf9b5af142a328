//! Finding the stack map section in object files, executables and shared libraries.
//!
//! The spec ("Stack Map Section") names it `.llvm_stackmaps` in ELF and `__llvm_stackmaps`
//! in segment `__LLVM_STACKMAPS` in Mach-O; COFF uses `.llvm_stackmaps` too. One reader,
//! the `object` crate, serves all three.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub use object::{Architecture, BinaryFormat, ObjectKind};
use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationKind,
    RelocationTarget,
};

use crate::endian::RunTimeEndian;
use crate::error::{Error, Result};
use crate::Arch;

/// The stack map section's name in ELF and COFF files.
pub const SECTION_NAME: &str = ".llvm_stackmaps";
/// The stack map section's name in Mach-O files, in segment [`MACHO_SEGMENT_NAME`].
pub const MACHO_SECTION_NAME: &str = "__llvm_stackmaps";
/// The Mach-O segment of [`MACHO_SECTION_NAME`].
pub const MACHO_SEGMENT_NAME: &str = "__LLVM_STACKMAPS";

/// The stack map section of one object file.
#[derive(Clone, Debug)]
pub struct StackMapSection<'a> {
    /// The section's bytes as stored in the file (what `llvm-readobj` prints).
    pub data: &'a [u8],
    /// The section's bytes with the file's relocations of it applied, when it has any: in a
    /// relocatable object every function address is a relocation against the function's
    /// symbol, and a shared object may hold only 0 there until the loader writes the
    /// address (RELA targets keep the addend in the relocation). `None` when `data` already
    /// holds the final values. Addresses are relative to the file's own address space, so a
    /// loaded shared object still needs its load bias.
    pub relocated: Option<Vec<u8>>,
    /// Byte order of the file.
    pub endian: RunTimeEndian,
    /// The section's address in the file's address space (0 in a relocatable object).
    pub address: u64,
    /// Offset of the section's bytes in the file.
    pub file_offset: u64,
    /// The architecture, when it is one this crate knows.
    pub arch: Option<Arch>,
}

impl StackMapSection<'_> {
    /// The bytes to index: the relocated ones when there are relocations, else the file's.
    pub fn resolved(&self) -> &[u8] {
        self.relocated.as_deref().unwrap_or(self.data)
    }
}

/// The ELF relocation types that mean "the load base plus the addend".
const RELATIVE_TYPES: [u32; 2] = [
    object::elf::R_X86_64_RELATIVE,
    object::elf::R_AARCH64_RELATIVE,
];

/// Writes `value` as a 64-bit word at `offset` of `bytes`, in the file's byte order.
fn put_u64(bytes: &mut [u8], offset: u64, value: u64, endian: RunTimeEndian) -> bool {
    let Some(slot) = usize::try_from(offset)
        .ok()
        .and_then(|o| bytes.get_mut(o..o.checked_add(8)?))
    else {
        return false;
    };
    slot.copy_from_slice(&match endian {
        RunTimeEndian::Little => value.to_le_bytes(),
        RunTimeEndian::Big => value.to_be_bytes(),
    });
    true
}

fn get_u64(bytes: &[u8], offset: u64, endian: RunTimeEndian) -> u64 {
    let at = usize::try_from(offset).unwrap_or(usize::MAX);
    crate::endian::read_u64(bytes, at, endian)
}

/// Applies the 64-bit absolute relocations of `section` (a relocatable object's) and the
/// dynamic relocations that land in it (a shared object's or PIE's) to a copy of its bytes.
/// Returns `None` if there were none. Relocations of other kinds are left alone: LLVM writes
/// only function addresses through relocations in this section.
fn relocate(
    file: &object::File<'_>,
    section: &object::Section<'_, '_>,
    data: &[u8],
    endian: RunTimeEndian,
) -> Option<Vec<u8>> {
    let mut bytes = data.to_vec();
    let mut applied = false;
    for (offset, r) in section.relocations() {
        if r.kind() != RelocationKind::Absolute || r.size() != 64 {
            continue;
        }
        let target = match r.target() {
            RelocationTarget::Symbol(i) => file.symbol_by_index(i).map(|s| s.address()).ok(),
            RelocationTarget::Section(i) => file.section_by_index(i).map(|s| s.address()).ok(),
            _ => None,
        };
        let Some(target) = target else { continue };
        let implicit = if r.has_implicit_addend() {
            get_u64(&bytes, offset, endian)
        } else {
            0
        };
        let value = target
            .wrapping_add(r.addend() as u64)
            .wrapping_add(implicit);
        applied |= put_u64(&mut bytes, offset, value, endian);
    }
    let start = section.address();
    let end = start.saturating_add(data.len() as u64);
    for (address, r) in file.dynamic_relocations().into_iter().flatten() {
        if address < start || address >= end {
            continue;
        }
        let offset = address - start;
        let relative = matches!(r.flags(), RelocationFlags::Elf { r_type } if RELATIVE_TYPES.contains(&r_type));
        let value = if relative {
            Some(
                (r.addend() as u64).wrapping_add(if r.has_implicit_addend() {
                    get_u64(&bytes, offset, endian)
                } else {
                    0
                }),
            )
        } else if r.kind() == RelocationKind::Absolute && r.size() == 64 {
            match r.target() {
                RelocationTarget::Symbol(i) => file
                    .dynamic_symbol_table()
                    .and_then(|t| t.symbol_by_index(i).ok())
                    .filter(|s| s.is_definition())
                    .map(|s| s.address().wrapping_add(r.addend() as u64)),
                _ => None,
            }
        } else {
            None
        };
        if let Some(value) = value {
            applied |= put_u64(&mut bytes, offset, value, endian);
        }
    }
    applied.then_some(bytes)
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
    /// The machine as the header gives it: ELF `e_machine`, Mach-O `cputype`, COFF
    /// `Machine`; 0 for other containers. [`crate::names`] names it as LLVM does.
    pub machine: u32,
    /// ELF `e_flags` (some machines' architecture depends on them); 0 for other containers.
    pub machine_flags: u32,
    /// The address ranges of the file's executable sections, in its own address space (a
    /// loaded module's code is these plus its load bias). Empty ranges are left out.
    pub code: Vec<core::ops::Range<u64>>,
}

/// The header's machine and, for ELF, its flags (see [`ObjectInfo::machine`]).
fn header_machine(file: &object::File<'_>) -> (u32, u32) {
    use object::read::elf::FileHeader as _;
    use object::read::macho::MachHeader as _;
    use object::File;
    match file {
        File::Elf32(f) => {
            let (h, e) = (f.elf_header(), f.endian());
            (h.e_machine(e).into(), h.e_flags(e))
        }
        File::Elf64(f) => {
            let (h, e) = (f.elf_header(), f.endian());
            (h.e_machine(e).into(), h.e_flags(e))
        }
        File::MachO32(f) => (f.macho_header().cputype(f.endian()), 0),
        File::MachO64(f) => (f.macho_header().cputype(f.endian()), 0),
        File::Coff(f) => (f.coff_header().machine.get(object::LittleEndian).into(), 0),
        File::CoffBig(f) => (f.coff_header().machine.get(object::LittleEndian).into(), 0),
        File::Pe32(f) => (
            f.nt_headers()
                .file_header
                .machine
                .get(object::LittleEndian)
                .into(),
            0,
        ),
        File::Pe64(f) => (
            f.nt_headers()
                .file_header
                .machine
                .get(object::LittleEndian)
                .into(),
            0,
        ),
        _ => (0, 0),
    }
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
            name == MACHO_SECTION_NAME && segment.is_none_or(|s| s == MACHO_SEGMENT_NAME)
        }
        _ => name == SECTION_NAME,
    }
}

/// Reads `data` as an object file and returns its facts and its stack map section, if any.
pub fn find_section(data: &[u8]) -> Result<(ObjectInfo, Option<StackMapSection<'_>>)> {
    let file = parse_file(data)?;
    let info = info_of(&file, data);
    let endian = info.endian;
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
        let relocated = relocate(&file, &section, data, endian);
        return Ok((
            info,
            Some(StackMapSection {
                data,
                relocated,
                endian,
                address: section.address(),
                file_offset,
                arch,
            }),
        ));
    }
    Ok((info, None))
}

/// The facts of the object file `data` alone: what [`find_section`] returns beside the
/// section, also when the section cannot be read (a tool printing a header before the
/// section, as llvm-readobj does, needs them then too).
pub fn object_info(data: &[u8]) -> Result<ObjectInfo> {
    Ok(info_of(&parse_file(data)?, data))
}

fn parse_file(data: &[u8]) -> Result<object::File<'_>> {
    object::File::parse(data).map_err(|e| Error::Object {
        message: e.to_string(),
    })
}

/// The byte order of an object file, as the stack map parsers take it.
pub fn endian_of<'data>(file: &impl Object<'data>) -> RunTimeEndian {
    if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    }
}

fn info_of(file: &object::File<'_>, data: &[u8]) -> ObjectInfo {
    let endian = endian_of(file);
    let load_name = match file {
        object::File::Elf64(_) => elf_soname::<object::elf::FileHeader64<object::Endianness>>(data),
        object::File::Elf32(_) => elf_soname::<object::elf::FileHeader32<object::Endianness>>(data),
        _ => None,
    };
    // COFF objects carry no pointer width of their own; it follows from the machine.
    let is_64 =
        file.is_64() || file.architecture().address_size() == Some(object::AddressSize::U64);
    let (machine, machine_flags) = header_machine(file);
    let code = file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text && s.size() > 0)
        .map(|s| s.address()..s.address().saturating_add(s.size()))
        .collect();
    ObjectInfo {
        format: file.format(),
        architecture: file.architecture(),
        is_64,
        endian,
        kind: file.kind(),
        load_name,
        machine,
        machine_flags,
        code,
    }
}

/// One object file inside a static archive.
#[derive(Clone, Debug)]
pub struct ArchiveMember<'a> {
    /// The member's name as the archive gives it (`llvm-readobj` prints `ARCHIVE(NAME)`).
    pub name: String,
    /// The member's bytes.
    pub data: &'a [u8],
}

/// The object files in `data` when it is a static archive (`!<arch>`), in archive order;
/// `None` when it is not an archive. Members that are not object files (text, the symbol
/// table, COFF short imports) are left out, as `llvm-readobj` leaves them out. A thin
/// archive's members live in other files: they are an error.
pub fn archive_members(data: &[u8]) -> Result<Option<Vec<ArchiveMember<'_>>>> {
    // By the magic alone: an archive without members is shorter than `FileKind` reads.
    if !data.starts_with(&object::archive::MAGIC) && !data.starts_with(&object::archive::THIN_MAGIC)
    {
        return Ok(None);
    }
    let archive = object::read::archive::ArchiveFile::parse(data).map_err(|e| Error::Object {
        message: String::from("cannot read the archive: ") + &e.to_string(),
    })?;
    if archive.is_thin() {
        return Err(Error::Object {
            message: String::from(
                "a thin archive: its members are other files; give those files instead",
            ),
        });
    }
    let mut members = Vec::new();
    for member in archive.members() {
        let member = member.map_err(|e| Error::Object {
            message: String::from("cannot read an archive member header: ") + &e.to_string(),
        })?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        let bytes = member.data(data).map_err(|e| Error::Object {
            message: alloc::format!("archive member {name}: {e}"),
        })?;
        let is_object = matches!(
            object::FileKind::parse(bytes),
            Ok(object::FileKind::Elf32
                | object::FileKind::Elf64
                | object::FileKind::MachO32
                | object::FileKind::MachO64
                | object::FileKind::Coff
                | object::FileKind::CoffBig
                | object::FileKind::Pe32
                | object::FileKind::Pe64)
        );
        if is_object {
            members.push(ArchiveMember { name, data: bytes });
        }
    }
    Ok(Some(members))
}

/// Marks the `.llvm_stackmaps` section of the relocatable ELF object `data` writable
/// (`SHF_WRITE`), in place, so that it can be linked into a position-independent
/// executable without a text relocation. Returns `Ok(false)` when `data` has no such section,
/// or is not ELF (Mach-O and COFF have no such restriction); `Ok(true)` once it is writable.
///
/// LLVM makes the section read-only (`SHF_ALLOC` alone), yet each function record holds the
/// function's absolute address through an `R_X86_64_64` / `R_AARCH64_ABS64` relocation. A
/// PIE's loader must then write the section: GNU ld accepts that as a text relocation
/// (`DT_TEXTREL`, the page made writable at start-up), lld refuses it ("recompile with
/// -fPIC"). In a writable section both linkers emit ordinary `R_*_RELATIVE` dynamic
/// relocations into `.rela.dyn` (or `.relr.dyn`), and the loaded section holds run-time
/// addresses. `llvm-objcopy-19 --set-section-flags .llvm_stackmaps=alloc,load,contents,data`
/// does the same to a file.
///
/// # Errors
/// [`Error::Object`] when `data` is ELF but cannot be read, or is not a relocatable object
/// (a linked file's segments are laid out already: make the section writable before linking).
pub fn make_section_writable(data: &mut [u8]) -> Result<bool> {
    or_section_flags(data, u64::from(object::elf::SHF_WRITE), "made writable")
}

/// Marks the `.llvm_stackmaps` section of the relocatable ELF object `data` retained
/// (`SHF_GNU_RETAIN`, and the object's `EI_OSABI` GNU when it was "none", which GNU ld
/// needs to read the flag), in place, so that a link with `--gc-sections` keeps it: no code
/// refers to the section (the runtime that reads it finds it by name), so without the
/// flag GNU ld and lld drop it as unused, and a program built with statepoint roots would
/// run without its roots. Returns as [`make_section_writable`] does; GNU ld 2.36 and lld
/// 13 honour the flag (older linkers ignore it).
///
/// # Errors
/// As [`make_section_writable`].
pub fn retain_section(data: &mut [u8]) -> Result<bool> {
    let found = or_section_flags(data, object::elf::SHF_GNU_RETAIN.into(), "retained")?;
    // The flag is in the OS-specific range: GNU ld reads it only in an object whose
    // e_ident says GNU (as GNU as marks one that uses it); LLVM writes "none" (lld reads
    // the flag either way). The linked executable's own e_ident is the linker's.
    if found && data[EI_OSABI_AT] == object::elf::ELFOSABI_NONE {
        data[EI_OSABI_AT] = object::elf::ELFOSABI_GNU;
    }
    Ok(found)
}

/// Where `e_ident[EI_OSABI]` is in an ELF file (both classes).
const EI_OSABI_AT: usize = 7;

/// Sets `bits` in the `sh_flags` of the `.llvm_stackmaps` section of the relocatable ELF
/// object `data` (`what` names the change in an error).
fn or_section_flags(data: &mut [u8], bits: u64, what: &str) -> Result<bool> {
    let (file_kind, flags_at, width, little) = {
        let file = parse_file(data)?;
        if file.format() != object::BinaryFormat::Elf {
            return Ok(false);
        }
        let kind = file.kind();
        let found = match &file {
            object::File::Elf64(f) => elf_flags_offset(f.elf_header(), f.endian(), data)?,
            object::File::Elf32(f) => elf_flags_offset(f.elf_header(), f.endian(), data)?,
            _ => None,
        };
        let width = if file.is_64() { 8 } else { 4 };
        (kind, found, width, file.is_little_endian())
    };
    let Some(at) = flags_at else {
        return Ok(false);
    };
    if file_kind != ObjectKind::Relocatable {
        return Err(Error::Object {
            message: alloc::format!(
                "the stack map section can be {what} only in a relocatable object, \
                 before linking; this file is {file_kind:?}"
            ),
        });
    }
    let field = usize::try_from(at)
        .ok()
        .and_then(|o| data.get_mut(o..o.checked_add(width)?))
        .ok_or_else(|| Error::Object {
            message: alloc::format!("the stack map section's header at {at:#x} is cut off"),
        })?;
    // Byte `i` of the value is the field's byte `i` little-endian, `width - 1 - i` big.
    for i in 0..width {
        let at = if little { i } else { width - 1 - i };
        field[at] |= (bits >> (8 * i)) as u8;
    }
    Ok(true)
}

/// The file offset of the `sh_flags` field of the ELF file's `.llvm_stackmaps` section
/// header, or `None` when it has none.
fn elf_flags_offset<Elf: object::read::elf::FileHeader>(
    header: &Elf,
    endian: Elf::Endian,
    data: &[u8],
) -> Result<Option<u64>> {
    let bad = |e: object::read::Error| Error::Object {
        message: String::from("cannot read the section headers: ") + &e.to_string(),
    };
    let sections = header.sections(endian, data).map_err(bad)?;
    let Some((index, _)) = sections
        .enumerate()
        .find(|(_, s)| sections.section_name(endian, s) == Ok(SECTION_NAME.as_bytes()))
    else {
        return Ok(None);
    };
    let shoff: u64 = header.e_shoff(endian).into();
    let entsize = u64::from(header.e_shentsize(endian));
    // sh_name and sh_type (4 bytes each) precede sh_flags in both classes. The table was
    // read whole from `data`, so this cannot overflow; the caller checks the range anyway.
    Ok(Some(
        shoff
            .wrapping_add(entsize.wrapping_mul(index.0 as u64))
            .wrapping_add(8),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const IR: &str = "declare void @llvm.experimental.stackmap(i64, i32, ...)\n\
        define void @f(i64 %x) {\n  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 7, i32 0, i64 %x)\n  ret void\n}\n";

    /// `ir` compiled by llc-19 for `triple` into an object file's bytes.
    fn llc(ir: &str, triple: &str, tag: &str) -> Vec<u8> {
        let dir = std::env::temp_dir().join(alloc::format!(
            "locus-stackmap-writable-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (ll, obj) = (dir.join("m.ll"), dir.join("m.o"));
        std::fs::write(&ll, ir).unwrap();
        let out = Command::new("llc-19")
            .args(["-O2", "-filetype=obj", "-relocation-model=pic"])
            .arg(alloc::format!("-mtriple={triple}"))
            .arg(&ll)
            .arg("-o")
            .arg(&obj)
            .output()
            .expect("llc-19 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bytes = std::fs::read(&obj).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        bytes
    }

    /// The flags llvm-readobj-19 prints for the stack map section of `bytes`.
    fn readobj_flags(bytes: &[u8], tag: &str) -> String {
        let path = std::env::temp_dir().join(alloc::format!(
            "locus-stackmap-readobj-{tag}-{}.o",
            std::process::id()
        ));
        std::fs::write(&path, bytes).unwrap();
        let out = Command::new("llvm-readobj-19")
            .arg("-S")
            .arg(&path)
            .output()
            .expect("llvm-readobj-19 runs");
        std::fs::remove_file(&path).unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let at = text
            .find("Name: .llvm_stackmaps")
            .expect("readobj lists the section");
        let flags = &text[at..];
        let end = flags.find(']').unwrap();
        flags[..end]
            .lines()
            .filter(|l| l.trim_start().starts_with("SHF_"))
            .map(|l| l.split_whitespace().next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_stack_map_section_is_made_writable_and_nothing_else_changes() {
        for (triple, tag) in [("x86_64-linux-gnu", "x86"), ("aarch64-linux-gnu", "a64")] {
            let before = llc(IR, triple, tag);
            assert_eq!(readobj_flags(&before, tag), "SHF_ALLOC", "{triple}");
            let mut after = before.clone();
            assert!(make_section_writable(&mut after).unwrap(), "{triple}");
            assert_eq!(
                readobj_flags(&after, tag),
                "SHF_ALLOC SHF_WRITE",
                "{triple}"
            );
            let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
            assert_eq!(changed, 1, "{triple}: one byte of sh_flags changes");
            // The stack maps read the same, and a second call keeps it so.
            let (_, a) = find_section(&before).unwrap();
            let (_, b) = find_section(&after).unwrap();
            assert_eq!(a.unwrap().resolved(), b.unwrap().resolved(), "{triple}");
            let again = after.clone();
            assert!(make_section_writable(&mut after).unwrap());
            assert_eq!(after, again);
        }
    }

    #[test]
    fn the_stack_map_section_is_marked_retained() {
        for (triple, tag) in [("x86_64-linux-gnu", "x86r"), ("aarch64-linux-gnu", "a64r")] {
            let mut bytes = llc(IR, triple, tag);
            assert!(make_section_writable(&mut bytes).unwrap(), "{triple}");
            assert_eq!(bytes[EI_OSABI_AT], object::elf::ELFOSABI_NONE, "{triple}");
            assert!(retain_section(&mut bytes).unwrap(), "{triple}");
            assert_eq!(
                readobj_flags(&bytes, tag),
                "SHF_ALLOC SHF_GNU_RETAIN SHF_WRITE",
                "{triple}"
            );
            assert_eq!(bytes[EI_OSABI_AT], object::elf::ELFOSABI_GNU, "{triple}");
        }
    }

    /// Links `object` with a `main` by clang-19 (`linker`: bfd or lld) and
    /// `--gc-sections`: whether the executable kept its stack map section.
    fn kept_by_gc_sections(object: &[u8], linker: &str) -> bool {
        let dir = std::env::temp_dir().join(alloc::format!(
            "locus-stackmap-retain-{linker}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (obj, exe) = (dir.join("m.o"), dir.join("m"));
        std::fs::write(&obj, object).unwrap();
        let out = Command::new("clang-19")
            .arg(alloc::format!("-fuse-ld={linker}"))
            .arg(&obj)
            .args(["-Wl,--gc-sections", "-o"])
            .arg(&exe)
            .output()
            .expect("clang-19 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let linked = std::fs::read(&exe).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        find_section(&linked).unwrap().1.is_some()
    }

    #[test]
    fn gc_sections_keeps_a_retained_stack_map_section_with_either_linker() {
        const MAIN: &str = "define i32 @main() {\n  call void @f(i64 1)\n  ret i32 0\n}\n";
        let ir = alloc::format!("{IR}{MAIN}");
        let mut bytes = llc(&ir, "x86_64-linux-gnu", "gcs");
        assert!(make_section_writable(&mut bytes).unwrap());
        // What LLVM writes is dropped: no code refers to the section.
        assert!(!kept_by_gc_sections(&bytes, "bfd"));
        assert!(!kept_by_gc_sections(&bytes, "lld"));
        assert!(retain_section(&mut bytes).unwrap());
        assert!(kept_by_gc_sections(&bytes, "bfd"));
        assert!(kept_by_gc_sections(&bytes, "lld"));
    }

    #[test]
    fn an_object_without_stack_maps_is_left_alone() {
        let mut bytes = llc(
            "define i64 @g() {\n  ret i64 1\n}\n",
            "x86_64-linux-gnu",
            "none",
        );
        let before = bytes.clone();
        assert!(!make_section_writable(&mut bytes).unwrap());
        assert!(!retain_section(&mut bytes).unwrap());
        assert_eq!(bytes, before);
        let mut text = b"not an object".to_vec();
        assert!(make_section_writable(&mut text).is_err());
    }
}
