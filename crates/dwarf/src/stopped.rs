//! A stopped target (feature `binary`): the threads' registers, the mapped
//! files and the readable memory of a core file ([`crate::corefile`]) or of a
//! process a debugger attached to, and what `locus dwarf vars` derives from
//! them: the load bias of a file, and a [`Snapshot`] per thread and frame
//! (frames beyond the innermost through [`crate::unwind`]).

extern crate std;

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use locus_stackmap::regs::X86_64_GPR_NAMES;
use object::{Object as _, ObjectSegment as _};

use crate::binary::{MemoryBlock, Snapshot, State};
use crate::Error;
use crate::ErrorDetail;

/// The instruction sets whose register notes and unwinding rules are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arch {
    /// x86-64 (`EM_X86_64`): DWARF registers 0-16 (rip is 16), xmm0-15 17-32.
    X86_64,
    /// AArch64 (`EM_AARCH64`): x0-x30 0-30, sp 31, v0-v31 64-95; the PC has no
    /// DWARF number.
    Aarch64,
}

impl Arch {
    /// The DWARF number of the stack pointer.
    pub fn sp(self) -> u16 {
        match self {
            Arch::X86_64 => 7,
            Arch::Aarch64 => 31,
        }
    }

    /// The DWARF number of the return-address column of the CFI.
    pub fn return_address(self) -> u16 {
        match self {
            Arch::X86_64 => 16,
            Arch::Aarch64 => 30,
        }
    }

    /// Whether a callee preserves DWARF register `r` (the psABI's
    /// callee-saved registers; the vector registers' callee-saved halves on
    /// AArch64 are left out).
    pub fn callee_saved(self, r: u16) -> bool {
        match self {
            Arch::X86_64 => matches!(r, 3 | 6 | 7 | 12..=15),
            Arch::Aarch64 => matches!(r, 19..=29 | 31),
        }
    }

    /// Whether DWARF register `r` is call-clobbered yet left alone by a call whose callee
    /// does not write it: not a callee-saved register, the stack pointer or the return
    /// address, nor one results come back in (x86-64 rax, rdx, xmm0, xmm1; AArch64 x0-x8,
    /// v0-v7), nor one a linker's veneer or PLT stub may write between caller and callee
    /// (AArch64 x16, x17; x18, the platform register), nor AArch64's v8-v15, whose upper
    /// halves only are call-clobbered. A caller frame's variable there has its value
    /// only when the compiler knew the callee leaves the register alone (gcc's IPA-RA)
    /// and said so by keeping the location over the call's return address
    /// ([`crate::binary::Binary::kept_across_call`]).
    pub fn kept_unless_written(self, r: u16) -> bool {
        match self {
            Arch::X86_64 => matches!(r, 2 | 4 | 5 | 8..=11 | 19..=32),
            Arch::Aarch64 => matches!(r, 9..=15 | 80..=95),
        }
    }

    /// Register names (gdb's spelling, lowercase) by DWARF number: the names a
    /// snapshot file gives its registers.
    pub fn register_name(self, r: u16) -> String {
        match (self, r) {
            (Arch::X86_64, 0..=16) => X86_64_GPR_NAMES[usize::from(r)].to_owned(),
            (Arch::X86_64, 17..=32) => format!("xmm{}", r - 17),
            (Arch::X86_64, 49) => "eflags".to_owned(),
            (Arch::X86_64, 58) => "fs_base".to_owned(),
            (Arch::X86_64, 59) => "gs_base".to_owned(),
            (Arch::Aarch64, 0..=30) => format!("x{r}"),
            (Arch::Aarch64, 31) => "sp".to_owned(),
            (Arch::Aarch64, 64..=95) => format!("v{}", r - 64),
            _ => format!("r{r}"),
        }
    }
}

/// One thread of a stopped target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    /// Its kernel thread id (`pr_pid` of its `NT_PRSTATUS`).
    pub tid: u32,
    /// The signal that stopped it (`pr_cursig`), 0 if none.
    pub signal: u32,
    /// Its program counter.
    pub pc: u64,
    /// Its registers by DWARF number, little-endian.
    pub registers: BTreeMap<u16, Vec<u8>>,
}

/// A file mapped into the target's memory (`NT_FILE`, `/proc/PID/maps`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of the byte at `start`.
    pub file_offset: u64,
    /// The file's path as the target saw it.
    pub path: String,
}

/// Everything known about a stopped target: threads, mapped files, memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// The instruction set.
    pub arch: Arch,
    /// The threads, in the order the core (or `/proc/PID/task`) lists them.
    pub threads: Vec<Thread>,
    /// The mapped files.
    pub mappings: Vec<Mapping>,
    /// The readable memory.
    pub memory: Vec<MemoryBlock>,
    /// Ranges the target has but whose bytes are not here (file-backed
    /// segments a core left out), as `(start, end, why)`.
    pub missing: Vec<(u64, u64, String)>,
    /// The entry point of the executable (`AT_ENTRY` of the auxiliary vector).
    pub entry: Option<u64>,
}

/// Where a file was loaded in a stopped target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The path the target mapped it from.
    pub path: String,
    /// How far it was moved: the address of its first byte minus the
    /// virtual address its first `PT_LOAD` asks for.
    pub load_bias: u64,
}

fn object_error(what: String) -> Error {
    ErrorDetail::Object { what }.into()
}

/// The lowest `PT_LOAD` virtual address of an ELF file, page-aligned down.
fn first_load_address(data: &[u8]) -> Result<u64, Error> {
    let file = object::File::parse(data).map_err(|e| object_error(e.to_string()))?;
    file.segments()
        .map(|s| s.address() & !0xfff)
        .min()
        .ok_or_else(|| object_error("the file has no loadable segment".to_owned()))
}

/// The file name of a path (after the last `/`).
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl Stopped {
    /// Where `data` (the file at `path` on this machine) was loaded: the
    /// mapping of the same path (or, failing that, the same file name) at
    /// file offset 0; for an executable not found that way, its entry point
    /// against `AT_ENTRY`.
    pub fn place(&self, data: &[u8], path: &str) -> Result<Placed, Error> {
        let first = first_load_address(data)?;
        let canonical = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.to_str().map(str::to_owned));
        let at_zero = |m: &&Mapping| m.file_offset == 0;
        let found = self
            .mappings
            .iter()
            .filter(at_zero)
            .find(|m| Some(m.path.as_str()) == canonical.as_deref() || m.path == path)
            .or_else(|| {
                self.mappings
                    .iter()
                    .filter(at_zero)
                    .find(|m| file_name(&m.path) == file_name(path))
            });
        if let Some(m) = found {
            return Ok(Placed {
                path: m.path.clone(),
                load_bias: m.start.wrapping_sub(first),
            });
        }
        let file = object::File::parse(data).map_err(|e| object_error(e.to_string()))?;
        match self.entry {
            Some(entry) if file.entry() != 0 => Ok(Placed {
                path: path.to_owned(),
                load_bias: entry.wrapping_sub(file.entry()),
            }),
            _ => Err(object_error(format!(
                "{path} is not among the target's mapped files and no entry point places it"
            ))),
        }
    }

    /// The mapped file holding `address`, and that file's load bias (from
    /// its mapping at file offset 0 and the file on this machine).
    pub fn module_at(&self, address: u64) -> Option<&Mapping> {
        self.mappings
            .iter()
            .find(|m| m.start <= address && address < m.end)
    }

    /// The thread with 1-based number `n` (gdb's numbering for a core: the
    /// order of the notes).
    pub fn thread(&self, n: usize) -> Result<&Thread, Error> {
        n.checked_sub(1)
            .and_then(|i| self.threads.get(i))
            .ok_or_else(|| {
                ErrorDetail::Target {
                    what: format!(
                        "no thread {n}: the target has {} (numbered from 1)",
                        self.threads.len()
                    ),
                }
                .into()
            })
    }

    /// A snapshot of a frame: its registers (the thread's for frame 0, the
    /// unwound ones otherwise), its CFA if known, and all the memory.
    pub fn snapshot(&self, registers: BTreeMap<u16, Vec<u8>>, cfa: Option<u64>) -> Snapshot {
        Snapshot {
            registers,
            memory: self.memory.clone(),
            cfa,
            ..Snapshot::default()
        }
    }

    /// A frame of this target as a [`Target`](crate::Target), borrowing the
    /// memory (nothing is copied): `registers` (the thread's for frame 0, the
    /// unwound ones otherwise), its CFA if known, and the registers at its
    /// function's entry ([`CallSites::entry_values`](crate::callsite::CallSites::entry_values)).
    pub fn state<'s>(
        &'s self,
        registers: &'s BTreeMap<u16, Vec<u8>>,
        cfa: Option<u64>,
        entry_registers: &'s BTreeMap<u16, Vec<u8>>,
    ) -> State<'s> {
        let mut state = State::new(registers, &self.memory);
        state.cfa = cfa;
        state.entry_registers = entry_registers;
        state
    }

    /// `size` bytes at `address`, if one block holds them.
    pub fn read(&self, address: u64, size: usize) -> Option<&[u8]> {
        self.memory.iter().find_map(|b| {
            let start = usize::try_from(address.checked_sub(b.address)?).ok()?;
            b.bytes.get(start..start.checked_add(size)?)
        })
    }

    /// Fills the memory the target had from a file but the core left out
    /// (text and read-only data are not dumped by default) from `data`, the
    /// file at `path` as [`Stopped::place`] found it; the rest stays in
    /// [`Stopped::missing`]. Left out means a `PT_LOAD` with fewer bytes in
    /// the core than in memory (the kernel's cores), or no `PT_LOAD` at all
    /// for a mapping of the file (gdb's `gcore` leaves out read-only file
    /// mappings whole): such a mapping is filled where the file's segments
    /// under it are all read-only, so the file's bytes are the memory's.
    ///
    /// A target that lists no mapping of the file (a core without `NT_FILE`,
    /// as qemu-user writes them; the file placed by its entry point) gets
    /// one per `PT_LOAD` segment of `data` first.
    pub fn fill_from_file(&mut self, placed: &Placed, data: &[u8]) {
        if !self.mappings.iter().any(|m| m.path == placed.path) {
            if let Ok(file) = object::File::parse(data) {
                for segment in file.segments() {
                    let (offset, size) = segment.file_range();
                    let start = segment.address().wrapping_add(placed.load_bias);
                    self.mappings.push(Mapping {
                        start,
                        end: start.saturating_add(segment.size().max(size)),
                        file_offset: offset,
                        path: placed.path.clone(),
                    });
                }
            }
        }
        let mut still = Vec::new();
        for (start, end, why) in core::mem::take(&mut self.missing) {
            let m = self
                .mappings
                .iter()
                .find(|m| m.path == placed.path && m.start <= start && end <= m.end);
            let bytes = m.and_then(|m| {
                let from = usize::try_from(m.file_offset + (start - m.start)).ok()?;
                let len = usize::try_from(end - start).ok()?;
                // Past its file's end a mapping reads zeros only to the end of that page:
                // a longer range (a core may claim any size) stays missing.
                if len.saturating_sub(data.len().saturating_sub(from)) > 4096 {
                    return None;
                }
                let mut out = data
                    .get(from..)?
                    .get(..len.min(data.len() - from))?
                    .to_vec();
                out.resize(len, 0);
                Some(out)
            });
            match bytes {
                Some(bytes) => self.memory.push(MemoryBlock {
                    space: 0,
                    address: start,
                    bytes,
                }),
                None => still.push((start, end, why)),
            }
        }
        self.missing = still;
        self.fill_unlisted_mappings(placed, data);
    }

    /// The part of [`Stopped::fill_from_file`] for mappings of the file that
    /// no memory block and no missing range covers. A hostile core may list a
    /// mapping many times, or thousands of blocks: mappings are taken in address
    /// order, each address once, the covered ranges searched by bisection, and
    /// at most the file's size is filled in all.
    fn fill_unlisted_mappings(&mut self, placed: &Placed, data: &[u8]) {
        let Ok(file) = object::File::parse(data) else {
            return;
        };
        // Where its writable segments are, whole pages: memory there may
        // differ from the file (a write, or a relocation the loader applied).
        // A read-only page is the file's bytes, even those of a writable
        // segment sharing its file page (mapped again, copy-on-write, at the
        // segment's own address).
        let writable: Vec<(u64, u64)> = file
            .segments()
            .filter(|s| match s.flags() {
                object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_W != 0,
                _ => true,
            })
            .map(|s| {
                let start = s.address().wrapping_add(placed.load_bias);
                (start & !4095, start.saturating_add(s.size()))
            })
            .collect();
        let mut covered: Vec<(u64, u64)> = self
            .memory
            .iter()
            .filter(|b| b.space == 0)
            .map(|b| (b.address, b.address.saturating_add(b.bytes.len() as u64)))
            .chain(self.missing.iter().map(|&(s, e, _)| (s, e)))
            .collect();
        covered.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(covered.len());
        for (s, e) in covered {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let mut mappings: Vec<(u64, u64, u64)> = self
            .mappings
            .iter()
            .filter(|m| m.path == placed.path)
            .filter_map(|m| {
                let from = usize::try_from(m.file_offset).ok()?;
                let in_file = u64::try_from(data.len().checked_sub(from)?).ok()?;
                // Past the file's end a mapping reads zeros to the end of its page only.
                let readable = in_file.saturating_add(4095) & !4095;
                Some((
                    m.start,
                    m.end.min(m.start.saturating_add(readable)),
                    m.file_offset,
                ))
            })
            .collect();
        mappings.sort_unstable();
        let mut budget = data.len();
        let mut done_to = 0u64;
        for (start, end, offset) in mappings {
            let mut at = start.max(done_to);
            while at < end && budget > 0 {
                let i = merged.partition_point(|&(_, e)| e <= at);
                let next = match merged.get(i) {
                    Some(&(s, e)) if s <= at => {
                        at = e;
                        continue;
                    }
                    Some(&(s, _)) => s.min(end),
                    None => end,
                };
                let read_only = !writable.iter().any(|&(s, e)| s < next && at < e);
                let len = usize::try_from(next - at).unwrap_or(usize::MAX).min(budget);
                if read_only {
                    let from = usize::try_from(offset + (at - start)).unwrap_or(usize::MAX);
                    let mut bytes = data
                        .get(from.min(data.len())..from.saturating_add(len).min(data.len()))
                        .unwrap_or_default()
                        .to_vec();
                    bytes.resize(len, 0);
                    budget -= len;
                    self.memory.push(MemoryBlock {
                        space: 0,
                        address: at,
                        bytes,
                    });
                }
                at = next;
            }
            done_to = done_to.max(end);
        }
    }
}

/// Reads register `r` of `registers` as a little-endian number.
pub fn register_u64(registers: &BTreeMap<u16, Vec<u8>>, r: u16) -> Option<u64> {
    let bytes = registers.get(&r)?;
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf.get_mut(..n)?.copy_from_slice(bytes.get(..n)?);
    Some(u64::from_le_bytes(buf))
}

/// Where the static TLS block of the executable `data` starts for a thread whose
/// registers are `registers` (`DW_OP_form_tls_address` adds a variable's offset to it), as
/// glibc lays it out on x86-64 (TLS variant II: the thread pointer `fs_base` at the
/// thread control block, the executable's block, module 1, right below it:
/// `_dl_determine_tlsoffset`'s `roundup(memsz - firstbyte, align) + firstbyte`, firstbyte
/// from `p_vaddr`'s misalignment). `None` for AArch64, a shared library (its block is
/// wherever the loader put it: the DTV), a file without `PT_TLS`, or no `fs_base`.
pub fn static_tls_block(
    data: &[u8],
    arch: Arch,
    registers: &BTreeMap<u16, Vec<u8>>,
) -> Option<u64> {
    use object::read::elf::{FileHeader as _, ProgramHeader as _};
    if arch != Arch::X86_64 {
        return None;
    }
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(data).ok()?;
    let endian = elf.endian();
    let header = elf.elf_header();
    let segments = header.program_headers(endian, data).ok()?;
    // An executable: not relocatable code a loader places (a PIE has an interpreter).
    let executable = header.e_type(endian) == object::elf::ET_EXEC
        || segments
            .iter()
            .any(|p| p.p_type(endian) == object::elf::PT_INTERP);
    if !executable {
        return None;
    }
    let tls = segments
        .iter()
        .find(|p| p.p_type(endian) == object::elf::PT_TLS)?;
    let align = tls.p_align(endian).max(1);
    if !align.is_power_of_two() {
        return None;
    }
    let firstbyte = tls.p_vaddr(endian).wrapping_neg() & (align - 1);
    let size = tls.p_memsz(endian).checked_sub(firstbyte)?;
    let offset = size.checked_add(align - 1)? / align * align + firstbyte;
    let tp = register_u64(registers, 58).filter(|&tp| tp != 0)?;
    tp.checked_sub(offset)
}
