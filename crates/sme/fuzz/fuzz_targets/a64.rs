//! The A64 decoder: each 4 input bytes are an instruction word. Decoding, printing, the
//! memory access and the registers written must not panic; registers are 0-31 (32 for a
//! PC-relative literal's base); a load or store of general-purpose registers names at most
//! two, and an instruction the decoder names is not read as a memory access.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_sme::a64::{access, decode, written, Op};

fuzz_target!(|data: &[u8]| {
    for chunk in data.chunks_exact(4) {
        let word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        let op = decode(word);
        let text = op.to_string();
        assert!(!text.is_empty());
        let w = written(word);
        for r in w.iter() {
            assert!(r < 32, "{word:#010x}: x{r}");
        }
        if w.sp_add.is_some() {
            assert!(w.iter().any(|r| r == 31), "{word:#010x}");
        }
        if let Some(a) = access(word) {
            assert!(a.base <= 32, "{word:#010x}");
            for r in a.data.into_iter().flatten() {
                assert!(r < 32, "{word:#010x}");
            }
            assert!(
                matches!(op, Op::Other(_) | Op::LdrZt0(_) | Op::StrZt0(_)),
                "{word:#010x}: {op:?} is also a memory access"
            );
        }
    }
});
