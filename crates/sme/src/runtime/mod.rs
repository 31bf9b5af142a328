//! The SME ABI support routines (AAPCS64 SME, "SME support routines") that LLVM 19's code
//! calls by name, as AArch64 assembly for the GNU assembler syntax clang accepts:
//! `__arm_sme_state`, `__arm_tpidr2_save`, `__arm_tpidr2_restore`, `__arm_za_disable` and
//! `__arm_get_current_vg` ([`crate::attrs::RUNTIME_ROUTINES`]). Written from the ABI text for
//! systems without an aarch64 compiler-rt; `tests/qemu.rs` links them into freestanding
//! programs and runs them under `qemu-aarch64-static -cpu max`, including lazy-save round
//! trips that must bring ZA back intact.
//!
//! Each routine uses only X16, X17 and the flags as scratch, so it keeps every promise of
//! the ABI's special conventions for these routines. "Abort" is `exit_group(134)`.

/// The assembly source (`sme_abi.S`); assemble with
/// `clang --target=aarch64-linux-gnu -march=armv9-a+sme -c`.
pub const SME_ABI_ASM: &str = include_str!("sme_abi.S");
