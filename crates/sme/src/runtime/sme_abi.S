// The SME ABI support routines of the AAPCS64 ("SME support routines"), written for
// Locus from the ABI text. No aarch64 compiler-rt exists here; code that LLVM 19 compiles
// for SME calls these by name (spec 004 §2, §3).
//
// All five are streaming-compatible: they run with PSTATE.SM either 0 or 1 and leave it
// as it was. Each uses only X16, X17 and the flags as scratch and preserves every other
// general, FP/SIMD, SVE and predicate register (a stricter promise than any of their
// ABI conventions, so every caller's assumption holds). Where the ABI says "abort", the
// process exits with status 134 by the exit_group system call (there is no libc).
//
// The TPIDR2 block (ABI "TPIDR2_EL0"): bytes 0-7 za_save_buffer, bytes 8-9
// num_za_save_slices, bytes 10-15 reserved, which must be zero.

        .arch   armv9-a+sme
        .text

// Whether this thread can use SME: ID_AA64PFR1_EL1.SME (bits 27:24) is not zero. Linux
// (and qemu's user mode) emulate EL0 reads of the ID registers. Leaves Z clear when SME
// is there. Uses X16.
        .macro  have_sme
        mrs     x16, ID_AA64PFR1_EL1
        tst     x16, #0x0f000000
        .endm

// uint64 X0, X1 = __arm_sme_state(void): X0 bit 63 = 1 when SME is available, bit 0 =
// PSTATE.SM, bit 1 = PSTATE.ZA, other bits 0; X1 = TPIDR2_EL0. Both 0 without SME.
        .globl  __arm_sme_state
        .type   __arm_sme_state, %function
        .p2align 2
__arm_sme_state:
        have_sme
        b.eq    1f
        mrs     x0, SVCR
        and     x0, x0, #3
        orr     x0, x0, #0x8000000000000000
        mrs     x1, TPIDR2_EL0
        ret
1:      mov     x0, #0
        mov     x1, #0
        ret
        .size   __arm_sme_state, . - __arm_sme_state

// Checks the TPIDR2 block at X16 and leaves its buffer in X16 and its slice count in X17;
// aborts when a reserved byte is set or there are more slices than ZA has (SVL.B).
        .macro  read_block
        ldr     x17, [x16, #8]
        tst     x17, #0xffffffffffff0000
        b.ne    .Labort
        ldr     x16, [x16]
        and     x17, x17, #0xffff
        .endm

// void __arm_tpidr2_save(void): commit a pending lazy save. When TPIDR2_EL0 is null this
// does nothing; otherwise it stores the first num_za_save_slices horizontal slices of
// ZA (PSTATE.ZA is 1 whenever a save is pending) to za_save_buffer, SVL.B bytes each.
// TPIDR2_EL0 is left as it is: the caller clears it.
        .globl  __arm_tpidr2_save
        .type   __arm_tpidr2_save, %function
        .p2align 2
__arm_tpidr2_save:
        have_sme
        b.eq    9f
        mrs     x16, TPIDR2_EL0
        cbz     x16, 9f
        read_block
        stp     x12, x13, [sp, #-16]!
        rdsvl   x13, #1
        cmp     x17, x13
        b.hi    .Labort
        mov     w12, #0
1:      cmp     w12, w17
        b.hs    2f
        str     za[w12, 0], [x16]
        add     x16, x16, x13
        add     w12, w12, #1
        b       1b
2:      ldp     x12, x13, [sp], #16
9:      ret
        .size   __arm_tpidr2_save, . - __arm_tpidr2_save

// void __arm_tpidr2_restore(const TPIDR2 block *X0): undo a committed lazy save. Called
// with PSTATE.ZA = 1 and TPIDR2_EL0 null (else abort); loads num_za_save_slices slices
// of ZA back from za_save_buffer.
        .globl  __arm_tpidr2_restore
        .type   __arm_tpidr2_restore, %function
        .p2align 2
__arm_tpidr2_restore:
        mrs     x16, TPIDR2_EL0
        cbnz    x16, .Labort
        mov     x16, x0
        read_block
        stp     x12, x13, [sp, #-16]!
        rdsvl   x13, #1
        cmp     x17, x13
        b.hi    .Labort
        mov     w12, #0
1:      cmp     w12, w17
        b.hs    2f
        ldr     za[w12, 0], [x16]
        add     x16, x16, x13
        add     w12, w12, #1
        b       1b
2:      ldp     x12, x13, [sp], #16
        ret
        .size   __arm_tpidr2_restore, . - __arm_tpidr2_restore

// void __arm_za_disable(void): commit any pending lazy save, set TPIDR2_EL0 to null and
// turn ZA off. Nothing without SME.
        .globl  __arm_za_disable
        .type   __arm_za_disable, %function
        .p2align 2
__arm_za_disable:
        have_sme
        b.eq    9f
        stp     x29, x30, [sp, #-16]!
        mov     x29, sp
        bl      __arm_tpidr2_save
        msr     TPIDR2_EL0, xzr
        smstop  za
        ldp     x29, x30, [sp], #16
9:      ret
        .size   __arm_za_disable, . - __arm_za_disable

// uint64 __arm_get_current_vg(void): VG (the vector length in 64-bit granules) of the
// current mode: the streaming one when PSTATE.SM is 1, SVE's otherwise, 0 when the
// current mode has no SVE vectors.
        .globl  __arm_get_current_vg
        .type   __arm_get_current_vg, %function
        .p2align 2
__arm_get_current_vg:
        have_sme
        b.eq    1f
        mrs     x16, SVCR
        tbz     x16, #0, 1f
        rdsvl   x0, #1
        lsr     x0, x0, #3
        ret
1:      mrs     x16, ID_AA64PFR0_EL1
        tst     x16, #0xf00000000
        b.eq    2f
        cntd    x0
        ret
2:      mov     x0, #0
        ret
        .size   __arm_get_current_vg, . - __arm_get_current_vg

.Labort:
        mov     x0, #134
        mov     x8, #94                 // exit_group
        svc     #0
        b       .Labort
