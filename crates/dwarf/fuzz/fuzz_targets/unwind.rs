//! Fuzzes CFI unwinding (`locus_dwarf::unwind`, gimli's unwinder over an untrusted file's
//! `.eh_frame` or `.debug_frame`): the input is an object file (seeded like `binary`). A
//! stopped target is made around it: the file mapped at address 0, one thread whose PC is
//! at each of up to 12 places in the file's code (section starts and function symbols,
//! from the input's first byte on), its stack pointer and frame pointer in a stack whose
//! words come from the input itself, so return addresses and saved registers land inside
//! and outside the code. Every walk must end (at most 64 frames) without a panic.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use locus_dwarf::binary::MemoryBlock;
use locus_dwarf::stopped::{Arch, Mapping, Stopped, Thread};
use locus_dwarf::unwind;
use object::{Architecture, Object as _, ObjectSection as _, ObjectSymbol as _, SectionKind};

const STACK: u64 = 0x7fff_0000;
const STACK_WORDS: usize = 512;
const MAX_PCS: usize = 12;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = object::File::parse(data) else {
        return;
    };
    let (arch, sp, fp) = match file.architecture() {
        Architecture::X86_64 => (Arch::X86_64, 7u16, 6u16),
        Architecture::Aarch64 => (Arch::Aarch64, 31, 29),
        _ => return,
    };
    let mut pcs: Vec<u64> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .map(|s| s.address())
        .chain(
            file.symbols()
                .filter(|s| s.is_definition())
                .map(|s| s.address()),
        )
        .collect();
    pcs.sort_unstable();
    pcs.dedup();
    let skip = usize::from(data.first().copied().unwrap_or(0)) % pcs.len().max(1);
    // The stack: the input's own words, again and again, with the code's addresses mixed
    // in so that some return addresses land in it.
    let mut stack = Vec::with_capacity(STACK_WORDS * 8);
    for i in 0..STACK_WORDS {
        let word = if i % 3 == 0 {
            pcs.get(i % pcs.len().max(1))
                .copied()
                .unwrap_or(0)
                .wrapping_add(5)
        } else {
            let at = (i * 8) % data.len().max(1);
            let mut w = [0u8; 8];
            for (k, b) in w.iter_mut().enumerate() {
                *b = data.get(at + k).copied().unwrap_or(0);
            }
            u64::from_le_bytes(w)
        };
        stack.extend_from_slice(&word.to_le_bytes());
    }
    let end = file
        .sections()
        .map(|s| s.address().saturating_add(s.size()))
        .max()
        .unwrap_or(0)
        .max(data.len() as u64);
    for &pc in pcs.iter().skip(skip).take(MAX_PCS) {
        let mut registers = BTreeMap::new();
        registers.insert(sp, (STACK + 64).to_le_bytes().to_vec());
        registers.insert(fp, (STACK + 256).to_le_bytes().to_vec());
        let stopped = Stopped {
            arch,
            threads: vec![Thread {
                tid: 1,
                signal: 0,
                pc,
                registers,
            }],
            mappings: vec![Mapping {
                start: 0,
                end,
                file_offset: 0,
                path: "fuzz.o".into(),
            }],
            memory: vec![MemoryBlock {
                space: 0,
                address: STACK,
                bytes: stack.clone(),
            }],
            missing: Vec::new(),
            entry: None,
        };
        let (frames, _why) = unwind::frames(&stopped, &stopped.threads[0], 64, &mut |path| {
            (path == "fuzz.o").then(|| data.to_vec())
        });
        assert!(!frames.is_empty() && frames.len() <= 64);
    }
});
