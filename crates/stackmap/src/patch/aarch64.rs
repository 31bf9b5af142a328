//! AArch64 patch sequences: an absolute call through `x16`, and `nop`.
//!
//! Instructions are 32-bit words stored little-endian. A target below 2^48 (every user-space
//! address on Linux and macOS) gets LLVM's own patch point call, 16 bytes, so a patch point
//! that reserved only what LLVM needs can be re-targeted, and the bytes equal what llc-19
//! emits for the same target:
//!
//! ```text
//! movz x16, #target[47:32], lsl #32
//! movk x16, #target[31:16], lsl #16
//! movk x16, #target[15:0]
//! blr  x16
//! ```
//!
//! A target with any of bits 63:48 set gets a 20-byte form that writes all four halves
//! (`movz` of bits 15:0, then `movk` of 31:16, 47:32 and 63:48, then `blr`). Padding is
//! `nop`, `0xd503201f`, one per 4 bytes, as LLVM pads. `x16` (IP0) is the
//! intra-procedure-call scratch register, free to clobber at any call.

use crate::error::{Error, Result};

/// Bytes of the longest call sequence (a target with bits 63:48 set: five instructions).
pub const CALL_LEN: usize = 20;

/// Bytes of the call sequence for a target below 2^48 (four instructions, LLVM's form).
pub const SHORT_CALL_LEN: usize = 16;

/// Bytes of the call sequence to `target`.
pub const fn call_len(target: u64) -> usize {
    if target >> 48 == 0 {
        SHORT_CALL_LEN
    } else {
        CALL_LEN
    }
}

/// The `nop` instruction word (`hint #0`).
pub const NOP: u32 = 0xd503_201f;

/// The register the call sequence loads the target into and branches through (`x16`).
pub const SCRATCH_REG: u32 = 16;

/// `movz x<rd>, #imm16, lsl #(16 * hw)` (64-bit form); `rd` and `hw` are masked to their
/// fields (5 and 2 bits).
pub const fn movz(rd: u32, imm16: u16, hw: u32) -> u32 {
    0xd280_0000 | ((hw & 3) << 21) | ((imm16 as u32) << 5) | (rd & 31)
}

/// `movk x<rd>, #imm16, lsl #(16 * hw)` (64-bit form); `rd` and `hw` are masked to their
/// fields.
pub const fn movk(rd: u32, imm16: u16, hw: u32) -> u32 {
    0xf280_0000 | ((hw & 3) << 21) | ((imm16 as u32) << 5) | (rd & 31)
}

/// `blr x<rn>`; `rn` is masked to 5 bits.
pub const fn blr(rn: u32) -> u32 {
    0xd63f_0000 | ((rn & 31) << 5)
}

/// The instruction words of the call to `target`: the first `call_len(target) / 4` are
/// the sequence (the rest, if any, is `nop`).
pub const fn call_words(target: u64) -> [u32; 5] {
    let r = SCRATCH_REG;
    if target >> 48 == 0 {
        [
            movz(r, (target >> 32) as u16, 2),
            movk(r, (target >> 16) as u16, 1),
            movk(r, target as u16, 0),
            blr(r),
            NOP,
        ]
    } else {
        [
            movz(r, target as u16, 0),
            movk(r, (target >> 16) as u16, 1),
            movk(r, (target >> 32) as u16, 2),
            movk(r, (target >> 48) as u16, 3),
            blr(r),
        ]
    }
}

/// The call sequence to `target` as little-endian bytes; only the first
/// [`call_len`]`(target)` bytes are the sequence.
pub fn call_sequence(target: u64) -> [u8; CALL_LEN] {
    let mut out = [0u8; CALL_LEN];
    for (chunk, word) in out.chunks_exact_mut(4).zip(call_words(target)) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    out
}

/// Fills all of `out` with `nop`s.
///
/// Errors: [`Error::MisalignedPatch`] when `out.len()` is not a multiple of 4 (nothing is
/// written then).
pub fn fill_nops(out: &mut [u8]) -> Result<()> {
    if !out.len().is_multiple_of(4) {
        return Err(Error::MisalignedPatch {
            value: out.len() as u64,
            align: 4,
        });
    }
    for chunk in out.chunks_exact_mut(4) {
        chunk.copy_from_slice(&NOP.to_le_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Encodings checked against `llvm-mc-19 -triple=aarch64 -show-encoding`.
    #[test]
    fn known_encodings() {
        assert_eq!(movz(16, 0x1234, 0), 0xd282_4690); // movz x16, #0x1234
        assert_eq!(movz(16, 0xffff, 2), 0xd2df_fff0); // movz x16, #0xffff, lsl #32
        assert_eq!(movk(16, 0xffff, 1), 0xf2bf_fff0); // movk x16, #0xffff, lsl #16
        assert_eq!(movk(16, 0xffff, 3), 0xf2ff_fff0); // movk x16, #0xffff, lsl #48
        assert_eq!(movk(16, 0x1, 0), 0xf280_0030); // movk x16, #0x1
        assert_eq!(blr(16), 0xd63f_0200); // blr x16
        assert_eq!(NOP.to_le_bytes(), [0x1f, 0x20, 0x03, 0xd5]);
    }

    #[test]
    fn call_bytes() {
        let bytes = call_sequence(0x1122_3344_5566_7788);
        let words: [u32; 5] = call_words(0x1122_3344_5566_7788);
        for (chunk, word) in bytes.chunks_exact(4).zip(words) {
            assert_eq!(chunk, word.to_le_bytes());
        }
        assert_eq!(words[0], movz(16, 0x7788, 0));
        assert_eq!(words[1], movk(16, 0x5566, 1));
        assert_eq!(words[2], movk(16, 0x3344, 2));
        assert_eq!(words[3], movk(16, 0x1122, 3));
        assert_eq!(words[4], blr(16));
        // Below 2^48: LLVM's four-instruction form.
        let short = call_words(0x7f12_3456_9abc);
        assert_eq!(call_len(0x7f12_3456_9abc), 16);
        assert_eq!(
            short[..4],
            [
                movz(16, 0x7f12, 2),
                movk(16, 0x3456, 1),
                movk(16, 0x9abc, 0),
                blr(16)
            ]
        );
    }

    /// Runs the four moves the way the CPU would and checks the register ends up holding
    /// the target.
    #[test]
    fn call_loads_target() {
        for target in [0u64, 1, 0xffff, 0x1_0000, 0xdead_beef_cafe_f00d, u64::MAX] {
            let mut x16 = 0u64;
            let moves = call_len(target) / 4 - 1;
            for word in &call_words(target)[..moves] {
                let imm = u64::from((word >> 5) & 0xffff);
                let shift = ((word >> 21) & 3) * 16;
                assert_eq!(word & 31, 16);
                if word & 0xff80_0000 == 0xd280_0000 {
                    x16 = imm << shift;
                } else {
                    assert_eq!(word & 0xff80_0000, 0xf280_0000);
                    x16 = (x16 & !(0xffff << shift)) | (imm << shift);
                }
            }
            assert_eq!(x16, target);
        }
    }

    #[test]
    fn nops() {
        let mut buf = [0u8; 12];
        assert_eq!(fill_nops(&mut buf), Ok(()));
        assert_eq!(buf, [0x1f, 0x20, 0x03, 0xd5].repeat(3)[..]);
        let mut odd = [0u8; 6];
        assert_eq!(
            fill_nops(&mut odd),
            Err(Error::MisalignedPatch { value: 6, align: 4 })
        );
        assert_eq!(odd, [0u8; 6]);
    }
}
