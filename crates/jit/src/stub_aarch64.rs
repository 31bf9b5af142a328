//! An inline cache's stub as AArch64 machine code, the counterpart of [`super::stub`]
//! (the runtime itself runs on x86-64 only; this encoder is checked against `llvm-mc-19`
//! and run under `qemu-aarch64-static` by the tests).
//!
//! The site calls the stub with `blr x16` (LLVM's AArch64 patch point call): the object in
//! `x0`, the name in `x1`, the result in `x0`, the site's return address in `x30`. `x16`
//! and `x17` (the intra-procedure-call scratch registers) and `x9` are clobbered:
//!
//! ```text
//!        movz/movk x16, index.base           ; 4 instructions
//!        and  x17, x0, #index.mask            ; (checking objects: the mask must be a
//!        ldr  x17, [x16, x17]                 ;  run of ones, as the runtime's is)
//!        cmp  x17, x0
//!        b.ne miss
//!        ldr  x17, [x0, #shape_offset]        ; ldur for a negative or unscaled offset,
//!                                             ; else mov x9, #offset; ldr x17, [x0, x9]
//!        cmp  x17, #shape_i                   ; (shape below 4096; else mov x9, #shape;
//!        b.ne next_i                          ;  cmp x17, x9)
//!       [ldur x9, [x16, #-8]; add x9, x9, #1; stur x9, [x16, #-8]]   ; counting hits
//!        ldr  x0, [x0, #offset_i]             ; (as for the shape word)
//!        ret
//! next_i: ...
//! miss:  ldur x16, [x16, #-16]               ; the miss handler, stored before the index
//!        br   x16                             ; tail call: x30 is still the site's
//! ```

use super::fast_path::Layout;

const X0: u32 = 0;
const X9: u32 = 9;
const X16: u32 = 16;
const X17: u32 = 17;

/// `movz`/`movk` instructions putting `value` in `rd` (zero halfwords skipped).
fn mov_imm(rd: u32, value: u64) -> Vec<u32> {
    use locus_stackmap::patch::aarch64::{movk, movz};
    let mut out = vec![movz(rd, value as u16, 0)];
    for hw in 1..4u32 {
        let half = (value >> (16 * hw)) as u16;
        if half != 0 {
            out.push(movk(rd, half, hw));
        }
    }
    out
}

/// `ldr xt, [xn, #offset]` in the form the assembler picks: scaled unsigned offset, else
/// `ldur` (-256..=255), else through `x9`.
fn load(rt: u32, rn: u32, offset: i32) -> Vec<u32> {
    if offset >= 0 && offset % 8 == 0 && offset / 8 < 4096 {
        return vec![0xf940_0000 | ((offset as u32 / 8) << 10) | (rn << 5) | rt];
    }
    if (-256..=255).contains(&offset) {
        return vec![ldur(rt, rn, offset)];
    }
    let mut out = mov_imm(X9, i64::from(offset) as u64);
    // ldr xt, [xn, x9]
    out.push(0xf860_6800 | (X9 << 16) | (rn << 5) | rt);
    out
}

/// `ldur xt, [xn, #simm9]`.
fn ldur(rt: u32, rn: u32, offset: i32) -> u32 {
    0xf840_0000 | (((offset as u32) & 0x1ff) << 12) | (rn << 5) | rt
}

/// `stur xt, [xn, #simm9]`.
fn stur(rt: u32, rn: u32, offset: i32) -> u32 {
    0xf800_0000 | (((offset as u32) & 0x1ff) << 12) | (rn << 5) | rt
}

/// `and xd, xn, #mask` for a mask that is one run of ones (not all ones); `None` else.
fn and_run(rd: u32, rn: u32, mask: u64) -> Option<u32> {
    if mask == 0 || mask == u64::MAX {
        return None;
    }
    let low = mask.trailing_zeros();
    let ones = (mask >> low).trailing_ones();
    if (mask >> low) != (1u64 << ones) - 1 {
        return None;
    }
    let immr = (64 - low) % 64;
    let imms = ones - 1;
    Some(0x9240_0000 | (immr << 16) | (imms << 10) | (rn << 5) | rd)
}

/// `b.ne` to `words` instructions ahead (from the branch itself).
fn b_ne(words: usize) -> Option<u32> {
    let imm19 = u32::try_from(words).ok().filter(|w| *w < (1 << 18))?;
    Some(0x5400_0001 | (imm19 << 5))
}

/// The AArch64 stub for `cases` (shape, byte offset of the property) under `layout`,
/// counting hits if `count_hits`, as little-endian bytes. `None` for no cases, or a mask
/// that is not one run of ones when objects are checked.
#[must_use]
pub fn encode_stub_aarch64(
    layout: &Layout,
    cases: &[(u64, i32)],
    count_hits: bool,
) -> Option<Vec<u8>> {
    if cases.is_empty() {
        return None;
    }
    let mut body: Vec<u32> = load(X17, X0, layout.shape_offset);
    for (shape, offset) in cases {
        let mut compare = Vec::new();
        if *shape < 4096 {
            // cmp x17, #shape
            compare.push(0xf100_001f | ((*shape as u32) << 10) | (X17 << 5));
        } else {
            compare.extend(mov_imm(X9, *shape));
            // cmp x17, x9
            compare.push(0xeb00_001f | (X9 << 16) | (X17 << 5));
        }
        let mut hit = Vec::new();
        if count_hits {
            hit.push(ldur(X9, X16, -8));
            // add x9, x9, #1
            hit.push(0x9100_0000 | (1 << 10) | (X9 << 5) | X9);
            hit.push(stur(X9, X16, -8));
        }
        hit.extend(load(X0, X0, *offset));
        // ret
        hit.push(0xd65f_03c0);
        body.extend(compare);
        body.push(b_ne(hit.len() + 1)?);
        body.extend(hit);
    }
    let mut out = mov_imm(X16, layout.index.base);
    if layout.check_objects {
        out.push(and_run(X17, X0, u64::from(layout.index.mask))?);
        // ldr x17, [x16, x17]
        out.push(0xf860_6800 | (X17 << 16) | (X16 << 5) | X17);
        // cmp x17, x0
        out.push(0xeb00_001f | (X0 << 16) | (X17 << 5));
        out.push(b_ne(body.len() + 1)?);
    }
    out.extend(body);
    out.push(ldur(X16, X16, -16));
    // br x16
    out.push(0xd61f_0000 | (X16 << 5));
    Some(out.iter().flat_map(|w| w.to_le_bytes()).collect())
}

/// The inline fast path for a site of `reserved` bytes (AArch64), the counterpart of
/// [`super::fast_path::encode_fast_path_in`]: the stub's checks and loads written into
/// the site, the miss handler called (`blr x16`, from inside the site, so the handler
/// would rewrite `x30` as the x86-64 handler rewrites its return address) and a branch to
/// the end of the site after it; the padding (`nop`s) after that branch, where nothing
/// runs it; each case but the last branches to the end, the last ends there:
///
/// ```text
///        movz/movk x16, index.base; [object check as the stub's, b.ne miss]
///        ldr  x17, [x0, #shape_offset]
///        cmp  x17, #shape_i; b.eq case_i    ; (once per case)
/// miss:  ldur x16, [x16, #-16]; blr x16; b end
///        nop ...
/// case_i: [ldur x9, [x16, #-8]; add x9, x9, #1; stur x9, [x16, #-8]]
///        ldr  x0, [x0, #offset_i]; [b end]
/// end:
/// ```
///
/// `None` for no cases, a mask that is not a run of ones, or a `reserved` that is not a
/// multiple of 4 or too small.
#[must_use]
pub fn encode_fast_path_aarch64(
    layout: &Layout,
    cases: &[(u64, i32)],
    count_hits: bool,
    reserved: usize,
) -> Option<super::fast_path::FastPath> {
    if cases.is_empty() || !reserved.is_multiple_of(4) {
        return None;
    }
    let total = reserved / 4;
    let mut head = mov_imm(X16, layout.index.base);
    let check = layout.check_objects;
    let mut dispatch: Vec<Vec<u32>> = Vec::new();
    for (shape, _) in cases {
        let mut compare = Vec::new();
        if *shape < 4096 {
            compare.push(0xf100_001f | ((*shape as u32) << 10) | (X17 << 5));
        } else {
            compare.extend(mov_imm(X9, *shape));
            compare.push(0xeb00_001f | (X9 << 16) | (X17 << 5));
        }
        dispatch.push(compare);
    }
    let bodies: Vec<Vec<u32>> = cases
        .iter()
        .map(|(_, offset)| {
            let mut hit = Vec::new();
            if count_hits {
                hit.push(ldur(X9, X16, -8));
                hit.push(0x9100_0000 | (1 << 10) | (X9 << 5) | X9);
                hit.push(stur(X9, X16, -8));
            }
            hit.extend(load(X0, X0, *offset));
            hit
        })
        .collect();
    let shape_load = load(X17, X0, layout.shape_offset);
    let check_len = if check { 4 } else { 0 };
    let dispatch_len: usize = dispatch.iter().map(|c| c.len() + 1).sum();
    let bodies_len: usize = bodies.iter().map(Vec::len).sum::<usize>() + cases.len() - 1;
    let used = head.len() + check_len + shape_load.len() + dispatch_len + 3 + bodies_len;
    let pad = total.checked_sub(used)?;
    let miss_at = head.len() + check_len + shape_load.len() + dispatch_len;
    if check {
        head.push(and_run(X17, X0, u64::from(layout.index.mask))?);
        head.push(0xf860_6800 | (X17 << 16) | (X16 << 5) | X17);
        head.push(0xeb00_001f | (X0 << 16) | (X17 << 5));
        head.push(b_ne(miss_at - head.len())?);
    }
    head.extend(shape_load);
    // Where each case starts.
    let mut case_at = Vec::with_capacity(cases.len());
    let mut at = miss_at + 3 + pad;
    for (i, body) in bodies.iter().enumerate() {
        case_at.push(at);
        at += body.len() + usize::from(i + 1 < cases.len());
    }
    let mut out = head;
    for (compare, target) in dispatch.iter().zip(&case_at) {
        out.extend(compare);
        let from = out.len();
        // b.eq
        out.push(0x5400_0000 | (u32::try_from(target - from).ok()? << 5));
    }
    out.push(ldur(X16, X16, -16));
    // blr x16
    out.push(0xd63f_0000 | (X16 << 5));
    let miss_return = out.len() * 4;
    let branch_end = |from: usize| 0x1400_0000 | (total - from) as u32;
    out.push(branch_end(out.len()));
    out.extend(std::iter::repeat_n(
        locus_stackmap::patch::aarch64::NOP,
        pad,
    ));
    for (i, body) in bodies.iter().enumerate() {
        out.extend(body);
        if i + 1 < cases.len() {
            out.push(branch_end(out.len()));
        }
    }
    debug_assert_eq!(out.len(), total);
    Some(super::fast_path::FastPath {
        bytes: out.iter().flat_map(|w| w.to_le_bytes()).collect(),
        miss_return,
    })
}
