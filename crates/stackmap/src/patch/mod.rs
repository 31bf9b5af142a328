//! Encoding (and, with `std` on Unix, writing) the code a runtime patches into the space
//! that `llvm.experimental.patchpoint` and `llvm.experimental.stackmap` reserve.
//!
//! # Where a record's instruction offset points
//!
//! Every stack map record carries an instruction offset from the start of its function
//! (`StkMapRecord.Instruction Offset`). What code lies there depends on the intrinsic that
//! made the record:
//!
//! * **`llvm.experimental.patchpoint`**: the offset is the *start* of the `<numBytes>`
//!   region LLVM reserved. LLVM fills that region with a call to `<target>` (unless the
//!   target is a constant null) followed by nops. The whole region, call included, belongs
//!   to the runtime: it may be overwritten with anything that fits.
//! * **`llvm.experimental.stackmap`**: the offset is "the relative instruction address
//!   immediately following the instructions that precede the stack map" (for a stack map
//!   right after a call, the call's return address). LLVM guarantees a *shadow* of
//!   `<numShadowBytes>` bytes after it, in which neither the end of the basic block nor
//!   another stack map or patch point occurs. The shadow usually holds ordinary
//!   instructions of the function (LLVM adds nops only when there are not enough), so
//!   patching it is *destructive*: the code that was there is gone, which is what a
//!   runtime wants when it invalidates compiled code. The shadow is overwritten with the
//!   same [`encode_call`] as a patch point, with `reserved` set to the `numShadowBytes`
//!   the client chose when it emitted the intrinsic (the stack map section does not record
//!   it). A zero-byte shadow cannot be patched.
//!
//! (Records of `gc.statepoint` point at the return address of their call; they are not
//! patch sites.)
//!
//! # Whole-region rule
//!
//! The spec: "the runtime may not assume anything about the code LLVM emits within the
//! reserved space. Partial patching is not allowed. The runtime must patch all reserved
//! bytes, padding with nops if necessary." Hence every encoder here returns exactly the
//! number of bytes asked for: [`encode_call`] is the call sequence followed by nops, and
//! [`encode_nops`] (to neutralize a site) is nops only.
//!
//! # Sequences
//!
//! | arch | call sequence | bytes | nops |
//! | --- | --- | --- | --- |
//! | x86-64 | `movabs $target, %r11; call *%r11` | 13 | LLVM's patch point padding, see [`x86_64`] |
//! | AArch64 | `movz x16, #t0; movk x16, #t1, lsl #16; movk x16, #t2, lsl #32; movk x16, #t3, lsl #48; blr x16` | 20 | `nop` (`0xd503201f`) |
//!
//! `%r11` and `x16` are call-clobbered scratch registers at any call site, and LLVM uses
//! them itself for the patch point call. The AArch64 sequence always sets all four 16-bit
//! halves, so it reaches any 64-bit target and its size is fixed; note that LLVM's own
//! AArch64 patch point call is 16 bytes (it loads 48 bits only), so a patch point that
//! reserved only 16 bytes cannot take this sequence ([`Error::PatchTooLarge`]).
//!
//! The encoders are `no_std`; [`write_code`] and [`patch_call`] (feature `std`, Unix only)
//! put bytes into live code pages.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};

pub mod aarch64;
pub mod x86_64;

// The crate's one module besides `pod` allowed `unsafe`: writing into live code pages is
// unsafe by its contract (see its functions' `# Safety`).
#[cfg(all(feature = "std", unix))]
#[allow(unsafe_code)]
mod write;

#[cfg(all(feature = "std", unix))]
pub use write::{patch_call, patch_nops, write_code};

/// An instruction set whose patch sequences this module can encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// x86-64 (AMD64).
    X86_64,
    /// AArch64 (ARM64), little-endian.
    AArch64,
}

impl Arch {
    /// The architecture this crate was compiled for, if it is one of the supported ones.
    pub const fn host() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::AArch64)
        } else {
            None
        }
    }

    /// The alignment, in bytes, that instruction addresses and patch lengths must have
    /// (1 on x86-64, 4 on AArch64).
    pub const fn instruction_align(self) -> usize {
        match self {
            Arch::X86_64 => 1,
            Arch::AArch64 => 4,
        }
    }
}

/// The size in bytes of the call sequence [`encode_call`] emits for `target`: the least
/// `reserved` it accepts (13 on x86-64; on AArch64 16 below 2^48, as LLVM's own patch
/// point call, else 20).
pub const fn call_sequence_len(arch: Arch, target: u64) -> usize {
    match arch {
        Arch::X86_64 => x86_64::CALL_LEN,
        Arch::AArch64 => aarch64::call_len(target),
    }
}

/// Encodes a call to the absolute address `target`, followed by nops, filling exactly
/// `reserved` bytes (the patch point's `numBytes`, or a stack map's `numShadowBytes`).
///
/// Errors: [`Error::MisalignedPatch`] on AArch64 when `reserved` is not a multiple of 4;
/// [`Error::PatchTooLarge`] when `reserved` is less than [`call_sequence_len`].
pub fn encode_call(arch: Arch, target: u64, reserved: usize) -> Result<Vec<u8>> {
    check_len(arch, reserved)?;
    let mut out = vec![0u8; reserved];
    encode_call_into(arch, target, &mut out)?;
    Ok(out)
}

/// Like [`encode_call`], but fills `out` (whose length is the reserved size) instead of
/// allocating.
pub fn encode_call_into(arch: Arch, target: u64, out: &mut [u8]) -> Result<()> {
    check_len(arch, out.len())?;
    let needed = call_sequence_len(arch, target);
    if out.len() < needed {
        return Err(Error::PatchTooLarge {
            needed,
            reserved: out.len(),
        });
    }
    let (call, rest) = out.split_at_mut(needed);
    match arch {
        Arch::X86_64 => {
            call.copy_from_slice(&x86_64::call_sequence(target));
            x86_64::fill_nops(rest, x86_64::NopTuning::default());
        }
        Arch::AArch64 => {
            let sequence = aarch64::call_sequence(target);
            call.copy_from_slice(sequence.get(..needed).unwrap_or(&sequence));
            aarch64::fill_nops(rest)?;
        }
    }
    Ok(())
}

/// Encodes `len` bytes of nops, e.g. to neutralize a patch site (turn a patch point's call
/// into a fall-through).
///
/// Errors: [`Error::MisalignedPatch`] on AArch64 when `len` is not a multiple of 4.
pub fn encode_nops(arch: Arch, len: usize) -> Result<Vec<u8>> {
    check_len(arch, len)?;
    let mut out = vec![0u8; len];
    encode_nops_into(arch, &mut out)?;
    Ok(out)
}

/// Like [`encode_nops`], but fills all of `out` instead of allocating.
pub fn encode_nops_into(arch: Arch, out: &mut [u8]) -> Result<()> {
    match arch {
        Arch::X86_64 => {
            x86_64::fill_nops(out, x86_64::NopTuning::default());
            Ok(())
        }
        Arch::AArch64 => aarch64::fill_nops(out),
    }
}

/// Refuses a length that is not a whole number of instructions.
fn check_len(arch: Arch, len: usize) -> Result<()> {
    let align = arch.instruction_align();
    if !len.is_multiple_of(align) {
        return Err(Error::MisalignedPatch {
            value: len as u64,
            align: align as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_lengths() {
        assert_eq!(call_sequence_len(Arch::X86_64, u64::MAX), 13);
        assert_eq!(call_sequence_len(Arch::AArch64, 0x7fff_ffff_ffff), 16);
        assert_eq!(call_sequence_len(Arch::AArch64, 1 << 48), 20);
    }

    #[test]
    fn encode_call_fills_exactly() {
        for arch in [Arch::X86_64, Arch::AArch64] {
            let align = arch.instruction_align();
            for reserved in (call_sequence_len(arch, 0x1122_3344_5566_7788)..=64).step_by(align) {
                let bytes = encode_call(arch, 0x1122_3344_5566_7788, reserved);
                assert_eq!(bytes.map(|b| b.len()), Ok(reserved), "{arch:?} {reserved}");
            }
        }
    }

    #[test]
    fn encode_call_refuses_small() {
        assert_eq!(
            encode_call(Arch::X86_64, 1, 12),
            Err(Error::PatchTooLarge {
                needed: 13,
                reserved: 12
            })
        );
        assert_eq!(
            encode_call(Arch::AArch64, 1 << 60, 16),
            Err(Error::PatchTooLarge {
                needed: 20,
                reserved: 16
            })
        );
        assert_eq!(
            encode_call(Arch::AArch64, 1, 12),
            Err(Error::PatchTooLarge {
                needed: 16,
                reserved: 12
            })
        );
        assert_eq!(encode_call(Arch::AArch64, 1, 16).map(|b| b.len()), Ok(16));
        assert_eq!(
            encode_call(Arch::X86_64, 1, 0),
            Err(Error::PatchTooLarge {
                needed: 13,
                reserved: 0
            })
        );
    }

    #[test]
    fn aarch64_refuses_misaligned() {
        assert_eq!(
            encode_call(Arch::AArch64, 1, 22),
            Err(Error::MisalignedPatch {
                value: 22,
                align: 4
            })
        );
        assert_eq!(
            encode_nops(Arch::AArch64, 6),
            Err(Error::MisalignedPatch { value: 6, align: 4 })
        );
        let mut buf = [0u8; 10];
        assert_eq!(
            encode_call_into(Arch::AArch64, 1, &mut buf),
            Err(Error::MisalignedPatch {
                value: 10,
                align: 4
            })
        );
    }

    #[test]
    fn nops_any_length() {
        for len in 0..64 {
            assert_eq!(encode_nops(Arch::X86_64, len).map(|b| b.len()), Ok(len));
        }
        for len in (0..64).step_by(4) {
            assert_eq!(encode_nops(Arch::AArch64, len).map(|b| b.len()), Ok(len));
        }
    }

    #[test]
    fn call_then_nops() {
        let bytes = encode_call(Arch::X86_64, 0xdead_beef, 15).unwrap_or_default();
        assert_eq!(
            bytes,
            [0x49, 0xbb, 0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0, 0x41, 0xff, 0xd3, 0x66, 0x90]
        );
        let bytes = encode_call(Arch::AArch64, 0, 24).unwrap_or_default();
        assert_eq!(&bytes[20..], &[0x1f, 0x20, 0x03, 0xd5]);
    }

    #[test]
    fn host_arch() {
        #[cfg(target_arch = "x86_64")]
        assert_eq!(Arch::host(), Some(Arch::X86_64));
        #[cfg(target_arch = "aarch64")]
        assert_eq!(Arch::host(), Some(Arch::AArch64));
    }
}
