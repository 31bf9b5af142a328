//! The statepoint stack maps of the running executable, read from its own loaded image.
//!
//! A program built with statepoint roots carries LLVM's `.llvm_stackmaps` section (one
//! table per object file linked, back to back). At start-up the runtime reads
//! `/proc/self/exe` (its headers and symbol table, on demand) for where the section is
//! and for its symbol table, then reads the section's bytes from memory, at that address
//! plus the main program's load bias (`dl_iterate_phdr`), inside one of its loaded
//! segments. Those bytes are the ones the loader relocated: in a position-independent
//! executable the function addresses the records name are run-time addresses already,
//! whatever relocations the linker chose (`R_X86_64_RELATIVE` in `.rela.dyn` or packed in
//! `.relr.dyn` for the writable section `locus gc build` links, a text relocation for
//! LLVM's read-only one under GNU ld), and in a `-no-pie` executable they are the file's.
//! The runtime thus applies no relocation itself. Each statepoint record becomes the
//! (base, derived) slot pairs the collector reads ([`crate::runtime::statepoints`]); on
//! AArch64, whose stack pointer is no fixed distance from the frame record, each slot
//! LLVM writes off the stack pointer (`[R#31 + off]`) is turned into one off `x29` with
//! the function's frame size (the stack map's) and its CFA rule at the call (`CFA = x29 +
//! N`, from `.eh_frame`: the `cfi` module), so the walk reads `x29`'s frame record chain
//! alone, as on x86-64; a frame of no fixed size (realigned) keeps its slots off the
//! stack pointer, which the walk finds at the CFA of the function it called. The
//! code ranges that continue the stack walk are the functions the tables name, sized by
//! the executable's symbol table (so the executable must not be stripped of it).

pub mod cfi;

use std::collections::HashMap;

use crate::contract::STATEPOINT_PROGRAM_MARKER;
use crate::runtime::{Slot, SlotPair, StackMaps};
use locus_stackmap::object::{endian_of, SECTION_NAME};
use locus_stackmap::{Location, ParseOptions, StackMapIndex, StatepointRecord, Tables};
use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSymbol};

/// The main program as loaded: its load bias (what its addresses in the file are moved
/// by) and its readable loaded segments, at run-time addresses.
struct MainProgram {
    bias: u64,
    readable: Vec<std::ops::Range<u64>>,
}

impl MainProgram {
    fn find() -> MainProgram {
        unsafe extern "C" fn first(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: the loader passes a valid entry for the duration of the call.
            let info = unsafe { &*info };
            // SAFETY: `data` is the `MainProgram` of `find`, alive and not otherwise borrowed.
            let main = unsafe { &mut *data.cast::<MainProgram>() };
            main.bias = info.dlpi_addr;
            let count = usize::from(info.dlpi_phnum);
            if !info.dlpi_phdr.is_null() {
                // SAFETY: the loader's program headers, `dlpi_phnum` of them.
                let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, count) };
                for h in headers {
                    if h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_R != 0 {
                        let start = info.dlpi_addr.wrapping_add(h.p_vaddr);
                        main.readable.push(start..start.saturating_add(h.p_memsz));
                    }
                }
            }
            1 // the first entry is the main program: stop
        }
        let mut main = MainProgram {
            bias: 0,
            readable: Vec::new(),
        };
        // SAFETY: the callback only writes `main`, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut main).cast()) };
        main
    }

    /// The `len` bytes at run-time address `start`, when one readable loaded segment of
    /// the main program holds them all.
    fn loaded(&self, start: u64, len: usize) -> Option<&'static [u8]> {
        let end = start.checked_add(u64::try_from(len).ok()?)?;
        if !self
            .readable
            .iter()
            .any(|r| r.start <= start && end <= r.end)
        {
            return None;
        }
        let at = usize::try_from(start).ok()?;
        // SAFETY: the range lies in a readable segment of the main program, which stays
        // mapped for the life of the process; the loader wrote it before `main` ran, and
        // nothing writes the stack map section after that.
        Some(unsafe { std::slice::from_raw_parts(at as *const u8, len) })
    }
}

/// The DWARF number of AArch64's frame pointer, `x29`.
const X29: u64 = 29;

/// Adds every statepoint record of `index` to `maps` ([`statepoint_pairs`]). `bias` is what
/// the records' addresses are moved by from those of `eh`, the code's call frame
/// information, given on AArch64: with it each slot off the stack pointer of a frame of
/// fixed size becomes one off the frame pointer, and when a frame of no fixed size keeps
/// such a slot, each call's CFA rule is added too ([`StackMaps::add_cfa`]): the walk then
/// finds that frame's stack pointer at the CFA of the function it called.
///
/// # Errors
/// What [`statepoint_pairs`] cannot place, with the address of the record's function (as
/// the index gives it, the bias added).
pub fn add_statepoints<E: locus_stackmap::Endian>(
    maps: &mut StackMaps,
    index: &StackMapIndex<'_, E>,
    bias: u64,
    eh: Option<&cfi::EhFrame<'_>>,
) -> Result<(), (u64, String)> {
    let mut unplaced = false;
    for r in index.iter() {
        let Ok(sp) = StatepointRecord::new(r.record) else {
            continue; // a stackmap or patchpoint record: no GC pointers
        };
        let in_file = r.address.wrapping_sub(bias);
        let frame = eh.map(|eh| (eh, in_file, r.function.static_stack_size()));
        let pairs = statepoint_pairs(&sp, r.address, frame).map_err(|e| (r.function.address, e))?;
        unplaced |= pairs.iter().any(SlotPair::off_sp);
        maps.add_record(usize::try_from(r.address).unwrap_or(usize::MAX), pairs);
    }
    let Some(eh) = eh.filter(|_| unplaced) else {
        return Ok(());
    };
    for r in index.iter() {
        // The call itself: a call that ends its function returns to the next one's start.
        let pc = r.address.wrapping_sub(bias).wrapping_sub(1);
        if let Ok(Some(cfi::Cfa::RegisterOffset {
            register: X29,
            offset,
        })) = eh.cfa(pc)
        {
            if let (Ok(at), Ok(offset)) = (usize::try_from(r.address), i32::try_from(offset)) {
                maps.add_cfa(at, offset);
            }
        }
    }
    Ok(())
}

/// The (base, derived) slot pairs the collector reads for the statepoint `record` whose
/// call returns to `return_address` (for messages). `frame`: on AArch64, the code's call
/// frame information, the return address as it places it (the file's address for an
/// executable's) and the function's frame size (the stack map's; `None` when the frame
/// has no fixed size). When the record keeps a pointer off the stack pointer of a frame of
/// fixed size, [`sp_from_fp`] makes each such slot one off the frame pointer. Slots LLVM
/// already wrote off `x29` need nothing, and those off the stack pointer of a frame of no
/// fixed size are left for the walk ([`add_statepoints`]).
///
/// # Errors
/// A GC pointer the record keeps somewhere other than a stack slot, or one off the stack
/// pointer that [`sp_from_fp`] cannot place, or that no longer fits an `i32` off `x29`.
pub fn statepoint_pairs<E: locus_stackmap::Endian>(
    record: &StatepointRecord<'_, E>,
    return_address: u64,
    frame: Option<(&cfi::EhFrame<'_>, u64, Option<u64>)>,
) -> Result<Vec<SlotPair>, String> {
    let mut pairs = Vec::new();
    for p in record.gc_pointers() {
        let (base, lanes) = slot_of(p.base, return_address)?;
        let (derived, _) = slot_of(p.derived, return_address)?;
        pairs.push(SlotPair {
            base,
            derived,
            lanes,
        });
    }
    let Some((eh, at, Some(stack_size))) = frame else {
        return Ok(pairs);
    };
    if !pairs.iter().any(SlotPair::off_sp) {
        return Ok(pairs);
    }
    let delta = sp_from_fp(eh, at, stack_size)?;
    let rebase = |slot: Slot| match slot {
        Slot::Sp(off) => i32::try_from(i64::from(off) + delta)
            .map(Slot::Fp)
            .map_err(|_| format!("the statepoint at {return_address:#x} has a slot too far away")),
        other => Ok(other),
    };
    for p in &mut pairs {
        p.base = rebase(p.base)?;
        p.derived = rebase(p.derived)?;
    }
    Ok(pairs)
}

fn slot_of(location: Location, return_address: u64) -> Result<(Slot, u16), String> {
    Slot::of_location(location).map_err(|what| {
        format!(
            "the statepoint at {return_address:#x} keeps a GC pointer {what}; the collector \
             reads stack slots only"
        )
    })
}

/// Where a function's stack pointer is, from its frame pointer, at the call that returns to
/// `return_address` (the file's address): `x29 + N - size` when its call frame information
/// says `CFA = x29 + N` there and its frame is a fixed `stack_size` bytes (the stack map's
/// function record: the CFA less the stack pointer in the body).
///
/// # Errors
/// No call frame information covers the call, or it does not define the CFA off `x29`.
pub fn sp_from_fp(
    eh: &cfi::EhFrame<'_>,
    return_address: u64,
    stack_size: u64,
) -> Result<i64, String> {
    // The call itself: a call that ends its function returns to the next one's start.
    let pc = return_address.wrapping_sub(1);
    let size = i64::try_from(stack_size).map_err(|_| {
        format!("the function of the statepoint at {return_address:#x} has a frame of {stack_size} bytes")
    })?;
    match eh.cfa(pc)? {
        Some(cfi::Cfa::RegisterOffset {
            register: X29,
            offset,
        }) => Ok(offset - size),
        None => Err(format!(
            "no call frame information covers the statepoint at {return_address:#x} (LLVM \
             writes none for a `nounwind` function without `uwtable`)"
        )),
        other => Err(format!(
            "the call frame information at the statepoint at {return_address:#x} does not \
             define the frame as x29 + N ({other:?}): a function without its frame pointer?"
        )),
    }
}

/// The stack maps of the executable at `/proc/self/exe`, for [`crate::runtime::Config`].
///
/// # Errors
/// A message naming what could not be read: the file, its stack map section (absent: the
/// program was not compiled with statepoint roots), a table, a function's size.
pub fn from_executable() -> Result<StackMaps, String> {
    // AArch64 slots are placed through the call frame information (see `cfi`).
    let through_cfi = cfg!(all(target_arch = "aarch64", target_os = "linux"));
    if !cfg!(target_arch = "x86_64") && !through_cfi {
        return Err("statepoint roots walk x86-64 and AArch64 Linux frames only".into());
    }
    let path = "/proc/self/exe";
    // Read on demand: the symbol table and the section headers only, not the whole file
    // (debug information included, about 12 MB for a small program, which a read of the
    // whole file made part of every statepoint program's peak resident set).
    let exe = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let cache = ReadCache::new(exe);
    let file = object::File::parse(&cache).map_err(|e| format!("{path}: {e}"))?;
    let Some(section) = file.section_by_name(SECTION_NAME) else {
        // A program without a single statepoint has no stack map and no frame to walk;
        // `locus gc build` marks such a program as built with statepoint roots.
        if file
            .symbols()
            .any(|s| s.name() == Ok(STATEPOINT_PROGRAM_MARKER))
        {
            return Ok(StackMaps::new());
        }
        return Err(format!(
            "{path} has no {SECTION_NAME} section (built without statepoint roots, or \
             linked with --gc-sections and the section not retained?)"
        ));
    };
    let (address, len) = (section.address(), section.size());
    let main = MainProgram::find();
    let bias = main.bias;
    let loaded = usize::try_from(len)
        .ok()
        .and_then(|len| main.loaded(address.wrapping_add(bias), len))
        .ok_or_else(|| {
            format!(
                "{path}: its {SECTION_NAME} section ({len} bytes at {address:#x}, load bias \
                 {bias:#x}) is not in a loaded segment"
            )
        })?;
    let tables = Tables::new(loaded, endian_of(&file), ParseOptions::default())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path}: .llvm_stackmaps: {e}"))?;
    // The loaded bytes hold run-time addresses already.
    let index = StackMapIndex::new(tables, 0);
    let sizes: HashMap<u64, u64> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| (s.address(), s.size()))
        .collect();
    let eh_frame = match file.section_by_name(".eh_frame") {
        Some(section) if through_cfi => {
            let data = section
                .data()
                .map_err(|e| format!("{path}: .eh_frame: {e}"))?;
            Some(cfi::EhFrame::new(data, section.address()).map_err(|e| format!("{path}: {e}"))?)
        }
        None if through_cfi => {
            return Err(format!(
                "{path} has no .eh_frame section, which places AArch64 stack slots"
            ))
        }
        _ => None,
    };
    let mut maps = StackMaps::new();
    for table in index.tables() {
        for f in table.functions() {
            let in_file = f.address.wrapping_sub(bias);
            let size = sizes.get(&in_file).ok_or_else(|| {
                format!(
                    "{path}: no symbol gives the size of the function at {in_file:#x} (a \
                     stripped executable?)"
                )
            })?;
            let start = f.address;
            let (Ok(s), Ok(e)) = (
                usize::try_from(start),
                usize::try_from(start.saturating_add(*size)),
            ) else {
                continue;
            };
            maps.add_code(s, e);
        }
    }
    add_statepoints(&mut maps, &index, bias, eh_frame.as_ref()).map_err(|(function, e)| {
        let in_file = function.wrapping_sub(bias);
        let name = file
            .symbols()
            .find(|s| s.address() == in_file && s.kind() == object::SymbolKind::Text)
            .and_then(|s| s.name().ok().map(str::to_owned))
            .unwrap_or_else(|| format!("{in_file:#x}"));
        format!("{path}: function {name}: {e}")
    })?;
    Ok(maps)
}
