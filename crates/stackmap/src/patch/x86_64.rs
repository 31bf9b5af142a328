//! x86-64 patch sequences: the 13-byte absolute call LLVM emits for a patch point, and
//! the nops LLVM pads patch points and stack map shadows with.
//!
//! # Call
//!
//! ```text
//! 49 BB imm64      movabs $target, %r11
//! 41 FF D3         call   *%r11
//! ```
//!
//! This is byte for byte what `llc` emits for a patch point with a constant non-null
//! target (LLVM picks `%r11` as the scratch register).
//!
//! # Nops
//!
//! LLVM's X86 asm printer pads patch points and stack map shadows with `emitX86Nops`,
//! which repeatedly emits the longest nop not longer than both the bytes left and a
//! per-CPU maximum. The nops of each length (these come from the instruction encoder and
//! differ from the assembler's alignment nops: the memory forms carry displacement 8 or
//! 0x200):
//!
//! | len | bytes | instruction |
//! | --- | --- | --- |
//! | 1 | `90` | `nop` |
//! | 2 | `66 90` | `xchg %ax, %ax` |
//! | 3 | `0f 1f 00` | `nopl (%rax)` |
//! | 4 | `0f 1f 40 08` | `nopl 0x8(%rax)` |
//! | 5 | `0f 1f 44 00 08` | `nopl 0x8(%rax,%rax)` |
//! | 6 | `66 0f 1f 44 00 08` | `nopw 0x8(%rax,%rax)` |
//! | 7 | `0f 1f 80 00 02 00 00` | `nopl 0x200(%rax)` |
//! | 8 | `0f 1f 84 00 00 02 00 00` | `nopl 0x200(%rax,%rax)` |
//! | 9 | `66 0f 1f 84 00 00 02 00 00` | `nopw 0x200(%rax,%rax)` |
//! | 10 | `2e 66 0f 1f 84 00 00 02 00 00` | `nopw %cs:0x200(%rax,%rax)` |
//! | 11–15 | `66` × (len − 10), then the 10-byte nop | the same, with redundant prefixes |
//!
//! The maximum is a tuning choice of the CPU LLVM compiled for ([`NopTuning`]): 10 when
//! no CPU is named (`llc` without `-mcpu`, LLVM's "i586" tuning), 15 for `-mcpu=x86-64`,
//! `generic` and most current CPUs (this is what clang and rustc code gets, as they tune
//! for "generic"), 11 for AMD Bulldozer (`bdver*`), 7 for Silvermont. Every choice is a
//! valid filler; [`fill_nops`] with [`NopTuning::default`] (10) is what
//! [`super::encode_call`] and [`super::encode_nops`] use.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};

/// Bytes of the call sequence.
pub const CALL_LEN: usize = 13;

/// The longest single x86 instruction, and so the longest nop.
pub const MAX_NOP_LEN: usize = 15;

/// The nops of 1 to 10 bytes, as LLVM's instruction encoder writes them for
/// `emitX86Nops`. Index = length.
const NOPS: [&[u8]; 11] = [
    &[],
    &[0x90],
    &[0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x08],
    &[0x0f, 0x1f, 0x44, 0x00, 0x08],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x08],
    &[0x0f, 0x1f, 0x80, 0x00, 0x02, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00, 0x00],
    &[0x2e, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00, 0x00],
];

/// The longest nop LLVM emits in one piece, which depends on the CPU it tuned for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NopTuning {
    /// At most 7 bytes (LLVM's `TuningFast7ByteNOP`, e.g. `-mcpu=silvermont`).
    Max7,
    /// At most 10 bytes: LLVM's choice when no fast-nop tuning applies, e.g. `llc`
    /// without `-mcpu`. The default.
    #[default]
    Max10,
    /// At most 11 bytes (`TuningFast11ByteNOP`, e.g. `-mcpu=bdver1`).
    Max11,
    /// At most 15 bytes (`TuningFast15ByteNOP`: `-mcpu=x86-64`, `generic`, and the code
    /// clang and rustc emit by default).
    Max15,
}

impl NopTuning {
    /// The longest nop, in bytes, this tuning emits.
    pub const fn max_len(self) -> usize {
        match self {
            NopTuning::Max7 => 7,
            NopTuning::Max10 => 10,
            NopTuning::Max11 => 11,
            NopTuning::Max15 => 15,
        }
    }
}

/// The call sequence `movabs $target, %r11; call *%r11`.
pub fn call_sequence(target: u64) -> [u8; CALL_LEN] {
    let mut out = [0u8; CALL_LEN];
    out[0] = 0x49; // REX.W + REX.B
    out[1] = 0xbb; // MOV r64, imm64 with register r11 (B8 + 3)
    out[2..10].copy_from_slice(&target.to_le_bytes());
    out[10..].copy_from_slice(&[0x41, 0xff, 0xd3]); // REX.B, FF /2, ModRM r11
    out
}

/// Writes one nop of exactly `out.len()` bytes (1 to [`MAX_NOP_LEN`]) into `out`;
/// does nothing for other lengths.
fn write_one_nop(out: &mut [u8]) {
    let len = out.len();
    if len == 0 || len > MAX_NOP_LEN {
        return;
    }
    let base = len.min(10);
    let (prefixes, insn) = out.split_at_mut(len - base);
    prefixes.fill(0x66);
    insn.copy_from_slice(NOPS[base]);
}

/// Fills all of `out` with nops, longest first, as LLVM's `emitX86Nops` does for the
/// given tuning.
pub fn fill_nops(out: &mut [u8], tuning: NopTuning) {
    let max = tuning.max_len();
    let mut rest = out;
    while !rest.is_empty() {
        let n = rest.len().min(max);
        let (head, tail) = core::mem::take(&mut rest).split_at_mut(n);
        write_one_nop(head);
        rest = tail;
    }
}

/// `len` bytes of nops with the given tuning (see [`super::encode_nops`] for the default).
pub fn encode_nops_tuned(len: usize, tuning: NopTuning) -> Vec<u8> {
    let mut out = vec![0u8; len];
    fill_nops(&mut out, tuning);
    out
}

/// The call sequence followed by nops of the given tuning, `reserved` bytes in all
/// (see [`super::encode_call`] for the default tuning).
///
/// Errors: [`Error::PatchTooLarge`] when `reserved` is less than [`CALL_LEN`].
pub fn encode_call_tuned(target: u64, reserved: usize, tuning: NopTuning) -> Result<Vec<u8>> {
    if reserved < CALL_LEN {
        return Err(Error::PatchTooLarge {
            needed: CALL_LEN,
            reserved,
        });
    }
    let mut out = vec![0u8; reserved];
    let (call, rest) = out.split_at_mut(CALL_LEN);
    call.copy_from_slice(&call_sequence(target));
    fill_nops(rest, tuning);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TUNINGS: [NopTuning; 4] = [
        NopTuning::Max7,
        NopTuning::Max10,
        NopTuning::Max11,
        NopTuning::Max15,
    ];

    #[test]
    fn call_bytes() {
        assert_eq!(
            call_sequence(0x1122_3344_5566_7788),
            [0x49, 0xbb, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x41, 0xff, 0xd3]
        );
    }

    #[test]
    fn single_nops() {
        for (len, nop) in NOPS.iter().enumerate().skip(1) {
            assert_eq!(nop.len(), len);
            assert_eq!(encode_nops_tuned(len, NopTuning::Max10), *nop);
        }
        assert_eq!(
            encode_nops_tuned(15, NopTuning::Max15),
            [
                0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00,
                0x00
            ]
        );
        assert_eq!(
            encode_nops_tuned(11, NopTuning::Max11),
            [0x66, 0x2e, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00, 0x00]
        );
    }

    #[test]
    fn split_longest_first() {
        let mut expect = NOPS[10].to_vec();
        expect.extend_from_slice(NOPS[10]);
        expect.extend_from_slice(NOPS[3]);
        assert_eq!(encode_nops_tuned(23, NopTuning::Max10), expect);

        let mut expect = NOPS[7].to_vec();
        expect.extend_from_slice(NOPS[7]);
        expect.extend_from_slice(NOPS[2]);
        assert_eq!(encode_nops_tuned(16, NopTuning::Max7), expect);
    }

    #[test]
    fn fills_every_length() {
        for tuning in TUNINGS {
            for len in 0..100 {
                let bytes = encode_nops_tuned(len, tuning);
                assert_eq!(bytes.len(), len);
                // Pieces of the maximum length, then the rest in one nop.
                let max = tuning.max_len();
                let mut expect = Vec::new();
                for _ in 0..len / max {
                    expect.extend_from_slice(&encode_nops_tuned(max, tuning));
                }
                if len % max != 0 {
                    expect.extend_from_slice(&encode_nops_tuned(len % max, tuning));
                }
                assert_eq!(bytes, expect, "{tuning:?} {len}");
            }
        }
    }

    #[test]
    fn tuned_call() {
        for tuning in TUNINGS {
            assert_eq!(
                encode_call_tuned(5, 12, tuning),
                Err(Error::PatchTooLarge {
                    needed: 13,
                    reserved: 12
                })
            );
            let bytes = encode_call_tuned(5, 40, tuning).unwrap_or_default();
            assert_eq!(bytes.len(), 40);
            assert_eq!(bytes[..13], call_sequence(5));
            assert_eq!(bytes[13..], encode_nops_tuned(27, tuning));
        }
    }

    #[test]
    fn default_tuning_is_llc_default() {
        assert_eq!(NopTuning::default(), NopTuning::Max10);
    }
}
