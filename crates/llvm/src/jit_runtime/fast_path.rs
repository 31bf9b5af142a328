//! An inline cache's fast path written into the patch point itself (x86-64), in place of
//! the call of a stub, when it fits the site's reserved bytes.
//!
//! The patch point must use the C calling convention (the runtime's requirement for every
//! inline-cache site): the object is in `rdi`, the property name in `rsi`, the result goes
//! in `rax`, and every caller-saved register (and the flags) may be clobbered. For cases
//! `(shape_i, slot_i)`, `i < n`, the `reserved` bytes become, in this order:
//!
//! ```text
//!        cmp qword ptr [rdi], shape_i      ; 48 83 3F ib  (shape in -128..=127) or
//!                                          ; 48 81 3F id  (shape in i32), sign-extended
//!        je case_i                         ; 74 rel8
//!        ...                               ; (once per case)
//! miss:  movabs r11, locus_rt_ic_miss      ; 49 BB imm64
//!        call r11                          ; 41 FF D3
//!        nops                              ; padding, never executed
//! case_i:
//!       [movabs r11, &hits                 ; 49 BB imm64   (only when counting hits)
//!        inc qword ptr [r11]]              ; 49 FF 03
//!        mov rax, [rdi + 8 * (slot_i + 1)] ; 48 8B 47 disp8 or 48 8B 87 disp32
//!        jmp end                           ; EB rel8 (not after the last case)
//! end:                                     ; = site + reserved
//! ```
//!
//! These are the encodings LLVM's assembler picks for the same instructions (the shortest
//! immediate and displacement forms), which the tests check against `llvm-mc-19`.
//!
//! The padding (nops) goes after the miss call, where nothing runs it, so the last case
//! ends exactly at the end of the reserved bytes and a hit runs no nops; only when a `je`
//! would no longer reach its case (sites of more than about 128 bytes) does the rest of
//! the padding go after the last case (`end` is then the start of those nops).
//! A miss calls the handler from inside the region: its return address is not the end of
//! the sequence, so the handler rewrites its return address to `site + reserved` (the
//! instruction after the patch point) before returning the value in `rax`. It finds the
//! site from that return address through the runtime's table of inline-patched sites (a
//! call-form site is found at `return address - 13`, as before).
//!
//! Sizes (bytes), with shapes in `-128..=127` and slots below 15 (disp8):
//! one case 23 (36 counting hits), two cases 35 (61 counting hits); each further case
//! adds 12 (25 counting hits). A shape outside `i32`, a slot offset outside `i32`, a
//! jump that does not fit `rel8` (many cases), or too few reserved bytes: no fast path
//! (the runtime calls a stub instead, which needs 13 bytes).
//!
//! Rewriting a return address assumes no hardware shadow stack (CET) guards the program.

use locus_stackmap::patch::{encode_nops, Arch};

/// The bytes of a fast path for a site, and where in them the miss call returns to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastPath {
    /// All the site's reserved bytes.
    pub bytes: Vec<u8>,
    /// Offset, from the start of the site, of the return address of the miss call.
    pub miss_return: usize,
}

/// The length of the `movabs r11, imm64; call r11` miss call.
const MISS_CALL_LEN: usize = 13;
/// The length of `movabs r11, imm64; inc qword ptr [r11]`.
const COUNT_LEN: usize = 13;

/// `cmp qword ptr [rdi], shape` for a shape that a sign-extended immediate can hold.
fn cmp_shape(shape: u64) -> Option<Vec<u8>> {
    let value = shape as i64;
    if let Ok(imm) = i8::try_from(value) {
        return Some(vec![0x48, 0x83, 0x3f, imm as u8]);
    }
    let imm = i32::try_from(value).ok()?;
    let mut out = vec![0x48, 0x81, 0x3f];
    out.extend_from_slice(&imm.to_le_bytes());
    Some(out)
}

/// `mov rax, qword ptr [rdi + 8 * (slot + 1)]`.
fn load_slot(slot: usize) -> Option<Vec<u8>> {
    let disp = slot.checked_add(1)?.checked_mul(8)?;
    let disp = i64::try_from(disp).ok()?;
    if let Ok(d) = i8::try_from(disp) {
        return Some(vec![0x48, 0x8b, 0x47, d as u8]);
    }
    let d = i32::try_from(disp).ok()?;
    let mut out = vec![0x48, 0x8b, 0x87];
    out.extend_from_slice(&d.to_le_bytes());
    Some(out)
}

/// `movabs r11, imm64`.
fn movabs_r11(imm: u64) -> [u8; 10] {
    let mut out = [0u8; 10];
    out[0] = 0x49;
    out[1] = 0xbb;
    out[2..].copy_from_slice(&imm.to_le_bytes());
    out
}

/// A rel8 displacement from `from` (the end of the jump) to `to`.
fn rel8(from: usize, to: usize) -> Option<u8> {
    let d = i64::try_from(to).ok()? - i64::try_from(from).ok()?;
    i8::try_from(d).ok().map(|d| d as u8)
}

/// The fast path for `cases` (shape ID, slot index: the property is word `slot + 1` of
/// the object) filling exactly `reserved` bytes, calling `miss` (the miss handler, which
/// takes the site's arguments and rewrites its return address as the
/// [module documentation](self) says) for other shapes and incrementing the 64-bit
/// counter at `hits` on each hit if given. `None` if there are no cases or the sequence
/// cannot be encoded in `reserved` bytes.
#[must_use]
pub fn encode_fast_path(
    cases: &[(u64, usize)],
    hits: Option<u64>,
    miss: u64,
    reserved: usize,
) -> Option<FastPath> {
    if cases.is_empty() {
        return None;
    }
    let compares: Vec<Vec<u8>> = cases
        .iter()
        .map(|(shape, _)| cmp_shape(*shape))
        .collect::<Option<_>>()?;
    let loads: Vec<Vec<u8>> = cases
        .iter()
        .map(|(_, slot)| load_slot(*slot))
        .collect::<Option<_>>()?;
    let dispatch: usize = compares.iter().map(|c| c.len() + 2).sum();
    let count = if hits.is_some() { COUNT_LEN } else { 0 };
    let case_lens: Vec<usize> = loads
        .iter()
        .enumerate()
        .map(|(i, l)| count + l.len() + if i + 1 < cases.len() { 2 } else { 0 })
        .collect();
    let body: usize = case_lens.iter().sum();
    let pad = reserved.checked_sub(dispatch + MISS_CALL_LEN + body)?;
    // The padding goes after the miss call, where no path runs it, as far as every `je`
    // still reaches its case; the rest (sites of more than about 128 bytes) after the
    // last case, where the hits run it.
    let mut farthest = 0;
    let (mut je_end, mut before) = (0, 0);
    for (compare, len) in compares.iter().zip(&case_lens) {
        je_end += compare.len() + 2;
        farthest = farthest.max(dispatch - je_end + MISS_CALL_LEN + before);
        before += len;
    }
    let dead = pad.min(127usize.saturating_sub(farthest));
    let end = reserved - (pad - dead);
    let mut case_at = Vec::with_capacity(cases.len());
    let mut at = dispatch + MISS_CALL_LEN + dead;
    for len in &case_lens {
        case_at.push(at);
        at += len;
    }

    let mut out = Vec::with_capacity(reserved);
    for (compare, target) in compares.iter().zip(&case_at) {
        out.extend_from_slice(compare);
        let rel = rel8(out.len() + 2, *target)?;
        out.extend_from_slice(&[0x74, rel]);
    }
    out.extend_from_slice(&movabs_r11(miss));
    out.extend_from_slice(&[0x41, 0xff, 0xd3]);
    let miss_return = out.len();
    out.extend_from_slice(&encode_nops(Arch::X86_64, dead).ok()?);
    for (i, load) in loads.iter().enumerate() {
        if let Some(counter) = hits {
            out.extend_from_slice(&movabs_r11(counter));
            out.extend_from_slice(&[0x49, 0xff, 0x03]);
        }
        out.extend_from_slice(load);
        if i + 1 < cases.len() {
            let rel = rel8(out.len() + 2, end)?;
            out.extend_from_slice(&[0xeb, rel]);
        }
    }
    out.extend_from_slice(&encode_nops(Arch::X86_64, pad - dead).ok()?);
    debug_assert_eq!(out.len(), reserved);
    Some(FastPath {
        bytes: out,
        miss_return,
    })
}
