//! The LSDA reader (`.gcc_except_table` call-site tables): the first 4 input bytes are the
//! offset of the LSDA in the rest (modulo its length + 1). A table read must lie within the
//! input: each call-site range is non-empty or empty but never reversed, and reading the
//! same bytes at the same offset gives the same table.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_sme::objfile::parse_lsda;

fuzz_target!(|data: &[u8]| {
    let Some((head, table)) = data.split_first_chunk::<4>() else {
        return;
    };
    let pos = u32::from_le_bytes(*head) as usize % (table.len() + 1);
    let first = parse_lsda(table, pos);
    if let Some(pads) = &first {
        for p in pads {
            assert!(p.start <= p.end, "{p:?}");
        }
        // Every entry takes at least 4 bytes: no table holds more entries than that allows.
        assert!(pads.len() <= table.len() / 4 + 1);
    }
    assert_eq!(first, parse_lsda(table, pos));
});
