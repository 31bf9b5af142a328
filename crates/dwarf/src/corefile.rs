//! ELF core files (feature `binary`): a [`Stopped`] target from the notes
//! and segments of a Linux core dump.
//!
//! - `NT_PRSTATUS` (one per thread): the thread id, the signal and the
//!   general registers (`pr_reg` at byte 112 of `elf_prstatus`: x86-64's
//!   `user_regs_struct`, AArch64's `user_pt_regs`), by DWARF number.
//! - `NT_PRFPREG` (after its thread's `NT_PRSTATUS`): xmm0-15 (x86-64
//!   `user_fpregs_struct`) or v0-v31 (AArch64 `user_fpsimd_state`).
//! - `NT_FILE`: the mapped files (start, end, file offset, path), which give
//!   the load bias of the executable and of each shared library.
//! - `NT_AUXV`: `AT_ENTRY`, the executable's entry point.
//! - `PT_LOAD`: the memory. A segment whose bytes the kernel left out
//!   (`p_filesz < p_memsz`: file-backed text and read-only data) is listed in
//!   [`Stopped::missing`] until [`Stopped::fill_from_file`] reads it from the
//!   mapped file.

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

use crate::binary::MemoryBlock;
use crate::stopped::{Arch, Mapping, Placed, Stopped, Thread};
use crate::Error;
use crate::ErrorDetail;

/// `NT_FILE` ("FILE" in the note type).
const NT_FILE: u32 = 0x4649_4c45;
/// `AT_ENTRY` in the auxiliary vector.
const AT_ENTRY: u64 = 9;
/// Where `pr_reg` starts in a 64-bit `elf_prstatus`.
const PR_REG: usize = 112;

/// x86-64 `user_regs_struct` slots (8 bytes each) and the DWARF register
/// each holds.
const X86_64_REGS: [(usize, u16); 26] = [
    (10, 0),  // rax
    (12, 1),  // rdx
    (11, 2),  // rcx
    (5, 3),   // rbx
    (13, 4),  // rsi
    (14, 5),  // rdi
    (4, 6),   // rbp
    (19, 7),  // rsp
    (9, 8),   // r8
    (8, 9),   // r9
    (7, 10),  // r10
    (6, 11),  // r11
    (3, 12),  // r12
    (2, 13),  // r13
    (1, 14),  // r14
    (0, 15),  // r15
    (16, 16), // rip
    (18, 49), // eflags
    (24, 50), // es
    (17, 51), // cs
    (20, 52), // ss
    (23, 53), // ds
    (25, 54), // fs
    (26, 55), // gs
    (21, 58), // fs_base
    (22, 59), // gs_base
];

fn bad(path: &str, what: String) -> Error {
    ErrorDetail::Target {
        what: format!("core file {path}: {what}"),
    }
    .into()
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut buf = [0u8; 8];
    buf.copy_from_slice(b);
    Some(u64::from_le_bytes(buf))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    let mut buf = [0u8; 4];
    buf.copy_from_slice(b);
    Some(u32::from_le_bytes(buf))
}

/// The general registers of an `NT_PRSTATUS` descriptor, by DWARF number,
/// and the PC.
pub fn prstatus_registers(arch: Arch, desc: &[u8]) -> Option<(BTreeMap<u16, Vec<u8>>, u64)> {
    let mut regs = BTreeMap::new();
    let slot = |i: usize| desc.get(PR_REG + 8 * i..PR_REG + 8 * i + 8);
    match arch {
        Arch::X86_64 => {
            for (i, r) in X86_64_REGS {
                regs.insert(r, slot(i)?.to_vec());
            }
            let pc = u64_at(desc, PR_REG + 8 * 16)?;
            Some((regs, pc))
        }
        Arch::Aarch64 => {
            for r in 0..=31u16 {
                regs.insert(r, slot(usize::from(r))?.to_vec());
            }
            let pc = u64_at(desc, PR_REG + 8 * 32)?;
            Some((regs, pc))
        }
    }
}

/// The vector registers of an `NT_PRFPREG` descriptor, by DWARF number.
pub fn fpreg_registers(arch: Arch, desc: &[u8]) -> BTreeMap<u16, Vec<u8>> {
    let (first_dwarf, count, at) = match arch {
        // user_fpregs_struct: 32 bytes of control words, st0-7 (128), xmm0-15.
        Arch::X86_64 => (17u16, 16u16, 160usize),
        // user_fpsimd_state: v0-v31 first.
        Arch::Aarch64 => (64, 32, 0),
    };
    let mut regs = BTreeMap::new();
    for i in 0..count {
        let from = at + 16 * usize::from(i);
        if let Some(b) = desc.get(from..from + 16) {
            regs.insert(first_dwarf + i, b.to_vec());
        }
    }
    regs
}

/// The mappings of an `NT_FILE` descriptor.
fn file_note(desc: &[u8]) -> Option<Vec<Mapping>> {
    let count = usize::try_from(u64_at(desc, 0)?).ok()?;
    let page = u64_at(desc, 8)?;
    let mut names = desc.get(16usize.checked_add(count.checked_mul(24)?)?..)?;
    let mut out = Vec::with_capacity(count.min(4096));
    for i in 0..count {
        let at = 16 + 24 * i;
        let start = u64_at(desc, at)?;
        let end = u64_at(desc, at + 8)?.max(start);
        let offset = u64_at(desc, at + 16)?.checked_mul(page)?;
        let nul = names.iter().position(|&b| b == 0)?;
        let path = String::from_utf8_lossy(names.get(..nul)?).into_owned();
        names = names.get(nul + 1..)?;
        out.push(Mapping {
            start,
            end,
            file_offset: offset,
            path,
        });
    }
    Some(out)
}

/// `AT_ENTRY` of an `NT_AUXV` descriptor.
fn auxv_entry(desc: &[u8]) -> Option<u64> {
    (0..desc.len() / 16)
        .find_map(|i| (u64_at(desc, 16 * i)? == AT_ENTRY).then(|| u64_at(desc, 16 * i + 8))?)
}

/// Reads a core file: `data` is its bytes, `path` its name for messages.
/// Refused: anything but a 64-bit little-endian ELF `ET_CORE` for x86-64 or
/// AArch64, and a core without any `NT_PRSTATUS`.
pub fn parse(data: &[u8], path: &str) -> Result<Stopped, Error> {
    let header = elf::FileHeader64::<Endianness>::parse(data)
        .map_err(|e| bad(path, format!("not a 64-bit ELF file: {e}")))?;
    let endian = header
        .endian()
        .map_err(|e| bad(path, format!("ELF header: {e}")))?;
    if endian != Endianness::Little {
        return Err(bad(path, "big-endian cores are not supported".to_owned()));
    }
    if header.e_type(endian) != elf::ET_CORE {
        return Err(bad(
            path,
            format!(
                "not a core file (ELF type {}, core files are {})",
                header.e_type(endian),
                elf::ET_CORE
            ),
        ));
    }
    let arch = match header.e_machine(endian) {
        elf::EM_X86_64 => Arch::X86_64,
        elf::EM_AARCH64 => Arch::Aarch64,
        m => {
            return Err(bad(
                path,
                format!("machine {m} is not supported (x86-64 and AArch64 are)"),
            ))
        }
    };
    let segments = header
        .program_headers(endian, data)
        .map_err(|e| bad(path, format!("program headers: {e}")))?;
    let mut stopped = Stopped {
        arch,
        threads: Vec::new(),
        mappings: Vec::new(),
        memory: Vec::new(),
        missing: Vec::new(),
        entry: None,
    };
    for segment in segments {
        match segment.p_type(endian) {
            elf::PT_NOTE => read_notes(&mut stopped, segment, endian, data, path)?,
            elf::PT_LOAD => {
                let address = segment.p_vaddr(endian);
                let memsz = segment.p_memsz(endian);
                if address.checked_add(memsz).is_none() {
                    return Err(bad(
                        path,
                        format!(
                            "segment at {address:#x}: its {memsz} bytes of memory run past the \
                             end of the address space"
                        ),
                    ));
                }
                let filesz = segment.p_filesz(endian).min(memsz);
                let offset = segment.p_offset(endian);
                let bytes = segment.data(endian, data).map_err(|_| {
                    bad(
                        path,
                        format!(
                            "segment at {address:#x}: its {filesz} bytes at file offset {offset:#x} \
                             run past the end of the file (truncated core?)"
                        ),
                    )
                })?;
                let keep = usize::try_from(filesz)
                    .unwrap_or(bytes.len())
                    .min(bytes.len());
                if keep > 0 {
                    stopped.memory.push(MemoryBlock {
                        space: 0,
                        address,
                        bytes: bytes.get(..keep).unwrap_or_default().to_vec(),
                    });
                }
                if filesz < memsz {
                    stopped.missing.push((
                        address + filesz,
                        address + memsz,
                        "not dumped in the core (file-backed)".to_owned(),
                    ));
                }
            }
            _ => {}
        }
    }
    if stopped.threads.is_empty() {
        return Err(bad(
            path,
            "no NT_PRSTATUS note: no thread registers".to_owned(),
        ));
    }
    Ok(stopped)
}

fn read_notes(
    stopped: &mut Stopped,
    segment: &elf::ProgramHeader64<Endianness>,
    endian: Endianness,
    data: &[u8],
    path: &str,
) -> Result<(), Error> {
    let at = segment.p_offset(endian);
    let notes = segment
        .notes(endian, data)
        .map_err(|e| bad(path, format!("note segment at file offset {at:#x}: {e}")))?;
    let Some(mut notes) = notes else {
        return Ok(());
    };
    while let Some(note) = notes
        .next()
        .map_err(|e| bad(path, format!("note segment at file offset {at:#x}: {e}")))?
    {
        let desc = note.desc();
        let kind = note.n_type(endian);
        if note.name() != b"CORE" {
            continue;
        }
        match kind {
            elf::NT_PRSTATUS => {
                let (registers, pc) = prstatus_registers(stopped.arch, desc).ok_or_else(|| {
                    bad(
                        path,
                        format!(
                            "NT_PRSTATUS in the note segment at file offset {at:#x}: {} bytes, \
                             too short for the registers",
                            desc.len()
                        ),
                    )
                })?;
                stopped.threads.push(Thread {
                    tid: u32_at(desc, 32).unwrap_or(0),
                    signal: desc
                        .get(12..14)
                        .map_or(0, |b| u32::from(u16::from_le_bytes([b[0], b[1]]))),
                    pc,
                    registers,
                });
            }
            elf::NT_PRFPREG => {
                if let Some(t) = stopped.threads.last_mut() {
                    t.registers.extend(fpreg_registers(stopped.arch, desc));
                }
            }
            NT_FILE => {
                stopped.mappings = file_note(desc).ok_or_else(|| {
                    bad(
                        path,
                        format!("NT_FILE in the note segment at file offset {at:#x} is malformed"),
                    )
                })?;
            }
            elf::NT_AUXV => stopped.entry = auxv_entry(desc),
            _ => {}
        }
    }
    Ok(())
}

/// Refuses `data` (the binary given) as the file `placed` in `stopped` when the
/// target's memory shows another file there: the GNU build ID note (`.note.gnu.build-id`)
/// at its place in the target differs from the file's, or, for a file without one, the
/// bytes of a read-only segment (headers, code, constants) differ where the target has
/// them: files that differ only in writable data pass. Memory the target lacks
/// (a core that left the page out) proves nothing either way: accepted. Check before
/// [`Stopped::fill_from_file`], which fills that memory from the file itself.
pub fn check_binary(stopped: &Stopped, placed: &Placed, data: &[u8]) -> Result<(), Error> {
    use object::{Object, ObjectSection};
    let Ok(file) = object::File::parse(data) else {
        return Ok(()); // placing it already failed or will
    };
    let at = |address: u64| address.wrapping_add(placed.load_bias);
    let mismatch = |what: String| ErrorDetail::Object {
        what: format!("not the file the target ran: {what} (another build?)"),
    };
    if let Some(section) = file.section_by_name(".note.gnu.build-id") {
        let ours = section.data().unwrap_or_default();
        let address = at(section.address());
        return match stopped.read(address, ours.len()) {
            Some(theirs) if theirs != ours => Err(mismatch(format!(
                "its build ID {} differs from the target's {} at {address:#x}",
                build_id_hex(ours),
                build_id_hex(theirs)
            ))
            .into()),
            _ => Ok(()),
        };
    }
    // No build ID: the file's read-only segments (headers, code, constants), page by
    // page, wherever the target has the page.
    let Ok(header) = elf::FileHeader64::<Endianness>::parse(data) else {
        return Ok(());
    };
    let Ok(endian) = header.endian() else {
        return Ok(());
    };
    let segments = header.program_headers(endian, data).unwrap_or_default();
    let read_only = segments
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD && p.p_flags(endian) & elf::PF_W == 0);
    for segment in read_only {
        let Ok(bytes) = segment.data(endian, data) else {
            continue;
        };
        let start = segment.p_vaddr(endian);
        for (i, ours) in bytes.chunks(PAGE).enumerate() {
            let address = at(start.wrapping_add((i * PAGE) as u64));
            if let Some(theirs) = stopped.read(address, ours.len()) {
                if theirs != ours {
                    return Err(mismatch(format!(
                        "it has no build ID, and its bytes at file offset {:#x} differ from \
                         the target's at {address:#x}",
                        segment.p_offset(endian) + (i * PAGE) as u64
                    ))
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// The unit [`check_binary`] compares read-only segments in (a core keeps or leaves out
/// whole pages).
const PAGE: usize = 4096;

/// The hex digits of a GNU build ID note's descriptor (after its 16-byte header and
/// `GNU\0`); the whole note's bytes if it is not one.
fn build_id_hex(note: &[u8]) -> String {
    let desc = note
        .get(16..)
        .filter(|_| note.get(12..16) == Some(b"GNU\0"));
    desc.unwrap_or(note)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// `pr_reg` slots land on their DWARF numbers; the PC is rip (x86-64) or `pc`
    /// (AArch64, slot 32, no DWARF number); a short descriptor is refused.
    #[test]
    fn prstatus_registers_by_dwarf_number() {
        let mut desc = alloc::vec![0u8; PR_REG];
        desc.extend(words(&(0..34).map(|i| 0x100 + i).collect::<Vec<u64>>()));
        let (regs, pc) = prstatus_registers(Arch::X86_64, &desc).unwrap_or_default();
        assert_eq!(regs.get(&0), Some(&0x10au64.to_le_bytes().to_vec())); // rax: slot 10
        assert_eq!(regs.get(&7), Some(&0x113u64.to_le_bytes().to_vec())); // rsp: slot 19
        assert_eq!(regs.get(&15), Some(&0x100u64.to_le_bytes().to_vec())); // r15: slot 0
        assert_eq!(pc, 0x110);
        let (regs, pc) = prstatus_registers(Arch::Aarch64, &desc).unwrap_or_default();
        assert_eq!(regs.get(&31), Some(&0x11fu64.to_le_bytes().to_vec())); // sp
        assert_eq!(pc, 0x120);
        assert!(prstatus_registers(Arch::X86_64, &desc[..PR_REG + 8]).is_none());
    }

    /// NT_FILE: count, page size, (start, end, page offset) triples, then the paths.
    #[test]
    fn file_note_mappings() {
        let mut desc = words(&[2, 0x1000, 0x1000, 0x2000, 0, 0x5000, 0x6000, 3]);
        desc.extend(b"/bin/a\0/lib/b.so\0");
        let m = file_note(&desc).unwrap_or_default();
        assert_eq!(m.len(), 2);
        assert_eq!((m[1].start, m[1].file_offset), (0x5000, 0x3000));
        assert_eq!(m[1].path, "/lib/b.so");
        // A path list cut short, and a count past the descriptor: malformed.
        assert!(file_note(&desc[..desc.len() - 3]).is_none());
        assert!(file_note(&words(&[u64::MAX, 0x1000])).is_none());
    }

    #[test]
    fn auxv_entry_point() {
        assert_eq!(
            auxv_entry(&words(&[6, 0x1000, 9, 0x401000, 0, 0])),
            Some(0x401000)
        );
        assert_eq!(auxv_entry(&words(&[6, 0x1000])), None);
    }

    /// A little-endian x86-64 ELF core: one `NT_PRSTATUS` (rip 0x401000) and one
    /// `PT_LOAD` of `filesz` bytes in the file and `memsz` in memory at `vaddr`.
    fn tiny_core(vaddr: u64, filesz: u64, memsz: u64) -> Vec<u8> {
        let mut note = words(&[]);
        note.extend(5u32.to_le_bytes()); // namesz
        note.extend(((PR_REG + 27 * 8) as u32).to_le_bytes()); // descsz
        note.extend(elf::NT_PRSTATUS.to_le_bytes());
        note.extend(b"CORE\0\0\0\0");
        let mut desc = alloc::vec![0u8; PR_REG + 27 * 8];
        desc[PR_REG + 8 * 16..PR_REG + 8 * 17].copy_from_slice(&0x401000u64.to_le_bytes());
        note.extend(desc);
        let (phoff, phnum) = (64u64, 2u64);
        let note_at = phoff + 56 * phnum;
        let load_at = note_at + note.len() as u64;
        let mut out = alloc::vec![0u8; 64];
        out[..6].copy_from_slice(b"\x7fELF\x02\x01");
        out[6] = 1; // EV_CURRENT
        out[16..18].copy_from_slice(&elf::ET_CORE.to_le_bytes());
        out[18..20].copy_from_slice(&elf::EM_X86_64.to_le_bytes());
        out[20..24].copy_from_slice(&1u32.to_le_bytes());
        out[32..40].copy_from_slice(&phoff.to_le_bytes());
        out[52..54].copy_from_slice(&64u16.to_le_bytes());
        out[54..56].copy_from_slice(&56u16.to_le_bytes());
        out[56..58].copy_from_slice(&(phnum as u16).to_le_bytes());
        let header = |kind: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64| {
            let mut h = Vec::new();
            h.extend(kind.to_le_bytes());
            h.extend(4u32.to_le_bytes()); // PF_R
            h.extend(words(&[offset, vaddr, 0, filesz, memsz, 1]));
            h
        };
        out.extend(header(elf::PT_NOTE, note_at, 0, note.len() as u64, 0));
        out.extend(header(elf::PT_LOAD, load_at, vaddr, filesz, memsz));
        out.extend(note);
        out.extend(alloc::vec![0xabu8; usize::try_from(filesz).unwrap_or(0).min(64)]);
        out
    }

    /// Segment sizes are not trusted: memory past the end of the address space is refused
    /// (it panicked on the overflow), bytes past the end of the file are refused, and a
    /// segment that claims a terabyte of memory costs only what the file holds.
    #[test]
    fn segment_sizes_are_bounded_by_the_file() {
        let good = parse(&tiny_core(0x1000, 64, 64), "good.core");
        let good = good.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(good.threads.len(), 1);
        assert_eq!(good.threads[0].pc, 0x401000);
        assert_eq!(good.memory.len(), 1);
        assert_eq!(good.memory[0].bytes, alloc::vec![0xab; 64]);

        let wraps = parse(&tiny_core(u64::MAX - 0xfff, 64, 0x10000), "wraps.core");
        let e = alloc::format!("{}", wraps.err().unwrap_or_else(|| panic!("accepted")));
        assert!(e.contains("run past the end of the address space"), "{e}");

        let past = parse(&tiny_core(0x1000, 1 << 40, 1 << 40), "past.core");
        let e = alloc::format!("{}", past.err().unwrap_or_else(|| panic!("accepted")));
        assert!(e.contains("run past the end of the file"), "{e}");

        let claims = parse(&tiny_core(0x1000, 64, 1 << 40), "claims.core");
        let claims = claims.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(claims.memory[0].bytes.len(), 64);
        assert_eq!(
            claims.missing,
            [(0x1040, 0x1000 + (1 << 40), claims.missing[0].2.clone())]
        );
        // The mapped file cannot fill a terabyte: the range stays missing, nothing is
        // allocated for it (it was: a terabyte of zeros, and the process aborted).
        let mut claims = claims;
        claims.mappings.push(Mapping {
            start: 0x1000,
            end: 0x1000 + (1 << 40),
            file_offset: 0,
            path: "/bin/x".into(),
        });
        let placed = crate::stopped::Placed {
            path: "/bin/x".into(),
            load_bias: 0,
        };
        claims.fill_from_file(&placed, &[0u8; 4096]);
        assert_eq!(claims.memory.len(), 1);
        assert_eq!(claims.missing.len(), 1);
    }

    /// A core listing the executable's mapping many times, at one address or at many, with
    /// a claimed size far past the file: what is filled from the file stays within the
    /// file's size in all (it was each listing's full size again), each address once.
    #[test]
    fn many_listings_of_a_mapping_fill_at_most_the_file() {
        extern crate std;
        let Ok(exe) = std::env::current_exe().and_then(std::fs::read) else {
            return;
        };
        let mut claims =
            parse(&tiny_core(0x1000, 64, 64), "many.core").unwrap_or_else(|e| panic!("{e}"));
        for k in 0..200u64 {
            let start = if k % 2 == 0 {
                1 << 32
            } else {
                (1 << 33) + k * (1 << 30)
            };
            claims.mappings.push(Mapping {
                start,
                end: start + (1 << 40),
                file_offset: 0,
                path: "/bin/x".into(),
            });
        }
        let placed = crate::stopped::Placed {
            path: "/bin/x".into(),
            load_bias: 0,
        };
        claims.fill_from_file(&placed, &exe);
        let filled: usize = claims.memory.iter().skip(1).map(|b| b.bytes.len()).sum();
        assert!(
            filled > 0 && filled <= exe.len(),
            "{filled} of {}",
            exe.len()
        );
        let mut starts: alloc::vec::Vec<u64> = claims.memory.iter().map(|b| b.address).collect();
        let n = starts.len();
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(starts.len(), n, "an address filled twice");
    }

    /// Not an ELF core: refused, naming the file.
    #[test]
    fn not_a_core() {
        let e = parse(b"\x7fELF but not really", "x.core").err();
        assert!(e.is_some_and(|e| alloc::format!("{e}").contains("core file x.core")));
    }
}
