//! The statepoint stack maps of the running executable, read back from its own file.
//!
//! A program built with statepoint roots carries LLVM's `.llvm_stackmaps` section (one
//! table per object file linked, back to back). At start-up the runtime reads
//! `/proc/self/exe`, finds the section with [`locus_stackmap::object::find_section`]
//! (which applies the file's relocations of it, for a position-independent executable),
//! adds the load bias of the main program (from `dl_iterate_phdr`), and turns each
//! statepoint record into the (base, derived) slot pairs the collector reads
//! ([`crate::runtime::statepoints`]). The code ranges that continue the stack walk
//! are the functions the tables name, sized by the executable's symbol table (so the
//! executable must not be stripped of it).

use std::collections::HashMap;

use crate::runtime::{Slot, SlotPair, StackMaps};
use locus_stackmap::object::find_section;
use locus_stackmap::{Location, ParseOptions, StackMapIndex, StatepointRecord, Tables};
use object::{Object, ObjectSymbol};

/// The load bias of the main program: what its addresses in the file are moved by.
fn main_program_bias() -> u64 {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid entry for the duration of the call.
        let addr = unsafe { (*info).dlpi_addr };
        // SAFETY: `data` is the `u64` of `main_program_bias`, alive during the call.
        unsafe { *data.cast::<u64>() = addr };
        1 // the first entry is the main program: stop
    }
    let mut bias: u64 = 0;
    // SAFETY: the callback only writes `bias`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut bias).cast()) };
    bias
}

fn slot_of(location: Location, return_address: u64) -> Result<(Slot, u16), String> {
    Slot::of_location(location).map_err(|what| {
        format!(
            "the statepoint at {return_address:#x} keeps a GC pointer {what}; the collector \
             reads stack slots only"
        )
    })
}

/// The stack maps of the executable at `/proc/self/exe`, for [`crate::runtime::Config`].
///
/// # Errors
/// A message naming what could not be read: the file, its stack map section (absent: the
/// program was not compiled with statepoint roots), a table, a function's size.
pub fn from_executable() -> Result<StackMaps, String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("statepoint roots walk x86-64 frames only".into());
    }
    let path = "/proc/self/exe";
    let data = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let (_, section) = find_section(&data).map_err(|e| format!("{path}: {e}"))?;
    let section = section.ok_or_else(|| {
        format!("{path} has no .llvm_stackmaps section (built without statepoint roots?)")
    })?;
    let tables = Tables::new(section.resolved(), section.endian, ParseOptions::default())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path}: .llvm_stackmaps: {e}"))?;
    let bias = main_program_bias();
    let index = StackMapIndex::new(tables, bias);
    let file = object::File::parse(&*data).map_err(|e| format!("{path}: {e}"))?;
    let sizes: HashMap<u64, u64> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| (s.address(), s.size()))
        .collect();
    let mut maps = StackMaps::new();
    for table in index.tables() {
        for f in table.functions() {
            let size = sizes.get(&f.address).ok_or_else(|| {
                format!(
                    "{path}: no symbol gives the size of the function at {:#x} (a stripped \
                     executable?)",
                    f.address
                )
            })?;
            let start = f.address.wrapping_add(bias);
            let (Ok(s), Ok(e)) = (
                usize::try_from(start),
                usize::try_from(start.saturating_add(*size)),
            ) else {
                continue;
            };
            maps.add_code(s, e);
        }
    }
    for r in index.iter() {
        let Ok(sp) = StatepointRecord::new(r.record) else {
            continue; // a stackmap or patchpoint record: no GC pointers
        };
        let mut pairs = Vec::new();
        for p in sp.gc_pointers() {
            let (base, lanes) = slot_of(p.base, r.address)?;
            let (derived, _) = slot_of(p.derived, r.address)?;
            pairs.push(SlotPair {
                base,
                derived,
                lanes,
            });
        }
        maps.add_record(usize::try_from(r.address).unwrap_or(usize::MAX), pairs);
    }
    Ok(maps)
}
