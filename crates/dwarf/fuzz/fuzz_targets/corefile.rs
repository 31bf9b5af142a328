//! Fuzzes `locus_dwarf::corefile`, the reader of an untrusted ELF core file: the input is
//! a core (seeded with small cores of the fixtures, see README.md). A core that parses is
//! then used as `locus dwarf vars --core` uses it: the input itself is placed in it as the
//! binary (by the entry point or a mapping of the same name), checked against it
//! (`check_binary`), its gaps filled from it, every thread's frames walked with the CFI of
//! the mapped files (the input standing in for every one) and a snapshot taken of each
//! frame. Nothing may panic, hang or allocate more than the input and its claims allow.

#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_dwarf::{corefile, unwind};

fuzz_target!(|data: &[u8]| {
    let Ok(mut stopped) = corefile::parse(data, "fuzz.core") else {
        return;
    };
    if let Ok(placed) = stopped.place(data, "fuzz.core") {
        let _ = corefile::check_binary(&stopped, &placed, data);
        stopped.fill_from_file(&placed, data);
    }
    for thread in &stopped.threads {
        let (frames, _why) = unwind::frames(&stopped, thread, 16, &mut |_| Some(data.to_vec()));
        for frame in &frames {
            let snapshot = stopped.snapshot(frame.registers.clone(), frame.cfa);
            let _ = snapshot.read_memory(0, frame.cfa.unwrap_or(0), 8);
        }
        if let Some(n) = stopped.threads.len().checked_sub(1) {
            let _ = stopped.thread(n + 1);
        }
    }
});
