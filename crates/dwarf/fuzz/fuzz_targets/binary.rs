//! Fuzzes `locus_dwarf::binary`, the part that reads an untrusted object file: the input is
//! an object file (seeded from the fixtures built with clang-19 and gcc, see README.md). The
//! variables in scope at a few PCs (spread over `.text` and at the middle of each function
//! symbol, with and without a load bias) are found and every one is evaluated against a
//! snapshot whose registers point into a readable stack, and so is the object each implicit
//! pointer names (looked up by its DIE offset); every location expression of the file is
//! listed and decoded. Nothing may panic, hang or allocate without bound; what is
//! read must have the size the variable's type gives it.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use locus_dwarf::access::MAX_ACCESS_BITS;
use locus_dwarf::binary::{
    evaluate_part_in, evaluate_variable, location_expressions, symbol_address, variables_at,
    Binary, Decoded, MemoryBlock, Snapshot, VariableLocation,
};
use locus_dwarf::Storage;
use object::{Object as _, ObjectSection as _, ObjectSymbol as _, SectionKind, SymbolKind};

/// Where the snapshot's stack is; every general register points into it.
const STACK: u64 = 0x7fff_f000;
const STACK_SIZE: usize = 0x2000;
/// The load bias of the second round (a PIE's under gdb).
const BIAS: u64 = 0x5555_5555_4000;
/// At most this many PCs per round, and bytes of memory per data section.
const MAX_PCS: usize = 12;
const MAX_BLOCK: u64 = 0x1000;

fuzz_target!(|data: &[u8]| {
    let pcs = pcs(data);
    for bias in [0, BIAS] {
        let snapshot = snapshot(data, bias);
        let binary = Binary::parse(data).ok().map(|b| b.with_load_bias(bias));
        for &pc in &pcs {
            let Ok(vars) = variables_at(data, pc.wrapping_add(bias), bias) else {
                continue;
            };
            for v in &vars {
                let Ok(e) = evaluate_variable(v, &snapshot) else {
                    continue;
                };
                // The object an implicit pointer names, looked up by its (untrusted) DIE
                // offset and read as `*p` reads it.
                let place = e.location.as_ref().and_then(|l| l.places.first());
                let pointer = match (place.map(|p| &p.storage), &binary) {
                    (
                        Some(Storage::ImplicitPointer {
                            die, byte_offset, ..
                        }),
                        Some(b),
                    ) => Some((b, *die, *byte_offset)),
                    _ => None,
                };
                if let Some((binary, die, byte_offset)) = pointer {
                    if let Ok(object) = binary.object_at(die, pc.wrapping_add(bias)) {
                        let size = v.pointee.and_then(|p| p.byte_size).unwrap_or(1);
                        let mut state = snapshot.state();
                        let _ = evaluate_part_in(&object, &vars, byte_offset, size, &mut state);
                    }
                }
                // An object read through a location has its type's size (capped); a constant
                // has the size of its bytes.
                match &v.location {
                    VariableLocation::Const(b) => {
                        assert_eq!(e.bits.bit_len(), b.len() as u64 * 8);
                        assert!(e.location.is_none());
                    }
                    VariableLocation::Expression(_) | VariableLocation::None => {
                        let size = v.byte_size.unwrap_or(0);
                        let want = size.saturating_mul(8).min(MAX_ACCESS_BITS);
                        assert_eq!(e.bits.bit_len(), want, "{}", v.name);
                    }
                }
            }
        }
    }
    // Entry values from the call sites, between every two of the PCs (one the frame's,
    // one its caller's return address): bounded however the call sites chain.
    for bias in [0, BIAS] {
        let Ok(binary) = Binary::parse(data) else { break };
        let Ok(sites) = binary.with_load_bias(bias).call_sites() else { break };
        let snapshot = snapshot(data, bias);
        for &pc in &pcs {
            for &ret in &pcs {
                let (at, returns) = (pc.wrapping_add(bias), ret.wrapping_add(bias));
                let _ = sites.entry_values(at, returns, snapshot.state());
            }
        }
    }
    if let Ok(exprs) = location_expressions(data) {
        for x in exprs {
            let _ = Decoded::new(&x.bytes, x.encoding);
        }
    }
    let _ = symbol_address(data, "main");
});

/// Up to [`MAX_PCS`] PCs of the file: spread over `.text`, then the middle of each function
/// symbol.
fn pcs(data: &[u8]) -> Vec<u64> {
    let Ok(file) = object::File::parse(data) else {
        return vec![0];
    };
    let mut pcs = Vec::new();
    if let Some(text) = file.section_by_name(".text") {
        let (start, size) = (text.address(), text.size());
        for k in 0..6 {
            pcs.push(start.wrapping_add(size / 6 * k + 1));
        }
    }
    for s in file.symbols() {
        if pcs.len() >= MAX_PCS {
            break;
        }
        if s.kind() == SymbolKind::Text && s.size() > 0 {
            pcs.push(s.address().wrapping_add(s.size() / 2));
        }
    }
    if pcs.is_empty() {
        pcs.push(0);
    }
    pcs
}

/// Registers 0-16 hold 8-byte addresses inside the stack, 17-32 16 bytes each; the stack and
/// the first bytes of each data section (moved by `bias`) are readable; the CFA, lane and
/// object address are known, the frame base is computed from `DW_AT_frame_base`.
fn snapshot(data: &[u8], bias: u64) -> Snapshot {
    let mut registers = BTreeMap::new();
    let mut entry_registers = BTreeMap::new();
    for r in 0u16..=16 {
        let at = STACK + 0x800 + u64::from(r) * 0x40;
        registers.insert(r, at.to_le_bytes().to_vec());
        entry_registers.insert(r, (at + 8).to_le_bytes().to_vec());
    }
    for r in 17u16..=32 {
        registers.insert(r, vec![r as u8; 16]);
        entry_registers.insert(r, vec![!(r as u8); 16]);
    }
    let mut memory = vec![MemoryBlock {
        space: 0,
        address: STACK,
        bytes: (0..STACK_SIZE).map(|i| (i * 7) as u8).collect(),
    }];
    if let Ok(file) = object::File::parse(data) {
        for s in file.sections().take(64) {
            if matches!(
                s.kind(),
                SectionKind::Data | SectionKind::UninitializedData | SectionKind::ReadOnlyData
            ) && memory.len() < 5
            {
                memory.push(MemoryBlock {
                    space: 0,
                    address: s.address().wrapping_add(bias),
                    bytes: vec![0x5a; s.size().min(MAX_BLOCK) as usize],
                });
            }
        }
    }
    Snapshot {
        address_size: 8,
        registers,
        memory,
        lane: Some(1),
        iteration: Some(0),
        frame_base: None,
        cfa: Some(STACK + 0x1000),
        object_address: Some(STACK + 0x100),
        object_location: None,
        entry_registers,
    }
}
