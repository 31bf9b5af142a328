//! An inline cache's fast path written into the patch point itself (x86-64), in place of
//! the call of a stub, when it fits the site's reserved bytes.
//!
//! The patch point must use the C calling convention (the runtime's requirement for every
//! inline-cache site): the object is in `rdi`, the property name in `rsi`, the result goes
//! in `rax`, and every caller-saved register (and the flags) may be clobbered. For cases
//! `(shape_i, slot_i)`, `i < n`, and the runtime's [`ObjectIndex`], the `reserved` bytes
//! become, in this order:
//!
//! ```text
//!        movabs r11, index.base            ; 49 BB imm64
//!        mov eax, edi                      ; 89 F8
//!        and eax, index.mask               ; 25 id (83 E0 ib for a mask below 128)
//!        cmp qword ptr [r11 + rax], rdi    ; 49 39 3C 03
//!        jne miss                          ; 75 rel8
//!        cmp qword ptr [rdi], shape_i      ; 48 83 3F ib  (shape in -128..=127) or
//!                                          ; 48 81 3F id  (shape in i32), sign-extended
//!        je case_i                         ; 74 rel8
//!        ...                               ; (once per case)
//! miss:  call qword ptr [r11 - 16]         ; 41 FF 53 F0   (the miss handler)
//!        nops                              ; padding, never executed
//! case_i:
//!       [inc qword ptr [r11 - 8]           ; 49 FF 43 F8   (only when counting hits)]
//!        mov rax, [rdi + 8 * (slot_i + 1)] ; 48 8B 47 disp8 or 48 8B 87 disp32
//!        jmp end                           ; EB rel8 (not after the last case)
//! end:                                     ; = site + reserved
//! ```
//!
//! The first four instructions are the check that `rdi` is an object the runtime handed
//! out, the same answer the miss handler's table of objects gives (see the runtime's
//! object index, in `arena.rs`: the index word of an object's address holds that address,
//! and no other address finds itself there). It reads only the index, which is mapped
//! whole, so no address faults there: a null pointer, a copy of an object, an address
//! inside an object or an object of another runtime goes to the miss handler, which
//! refuses it as it does with caching off. Only then is the object's shape word read.
//! The miss handler's address and the hit counter are the two words before the index,
//! reached from `r11`, which still holds the index's base on both paths.
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
//! # The short form: an index in the low 2 GiB
//!
//! The runtime places its indexes below 2 GiB when there is room (`arena.rs`), and then
//! ([`ObjectIndex::near`]) the fast path reaches the index and its header by 32-bit
//! absolute displacements and loads nothing into `r11`:
//!
//! ```text
//!        mov eax, edi                      ; 89 F8
//!        and eax, index.mask               ; 25 id (83 E0 ib)
//!        cmp qword ptr [rax + base], rdi   ; 48 39 B8 d32
//!        jne miss                          ; 75 rel8
//!        ...                               ; the shape compares, as above
//! miss:  call qword ptr [base - 16]        ; FF 14 25 d32
//!        ...
//! case_i:
//!       [inc qword ptr [base - 8]          ; 48 FF 04 25 d32 (only when counting hits)]
//!        mov rax, [rdi + 8 * (slot_i + 1)]
//! ```
//!
//! The check is the same compare of the same index word; what goes is the ten-byte
//! `movabs` on the path of every hit, which cost a monomorphic hit 11-13% over a plain
//! load (the `jit_ic` bench, hit in the inline fast path / `@read_direct`: 1.11-1.13x with
//! it, 1.00x without, 4 runs each on the same machine, counting hits or not).
//! Where the short form does not fit the reserved bytes and the `movabs` form does (it is
//! smaller when hits are counted in two or more cases), the `movabs` form is written.
//!
//! Sizes (bytes), with shapes in `-128..=127`, slots below 15 (disp8) and an index of
//! 128 bytes or more, `movabs` form: one case 37 (41 counting hits), two cases 49 (57
//! counting hits); each further case adds 12 (16 counting hits); the object check is 23
//! of them. Short form: one case 33 (41 counting hits), two cases 45; the object check is
//! 16 of them. A shape
//! outside `i32`, a slot offset outside `i32`, a jump that does not fit `rel8` (many
//! cases), or too few reserved bytes: no fast path (the runtime calls a stub instead,
//! which needs 13 bytes and makes the same check).
//!
//! That is the runtime's own objects' [`Layout`]. For a language's object model
//! ([`encode_fast_path_in`]) the shape word is at the model's offset (`cmp qword ptr
//! [rdi + offset], shape`), the property at any byte offset, and without the object check
//! the head is the `movabs` alone, or nothing in the short form (the compiled code then
//! trusts the pointer: the language's objects are not in an index).
//!
//! Rewriting a return address assumes no hardware shadow stack (CET) guards the program.

use locus_stackmap::patch::{encode_nops, Arch};

pub use super::arena::{HITS_OFFSET, MISS_HANDLER_OFFSET};

/// Where a runtime's fast paths and stubs find its object index, its miss handler and its
/// hit counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectIndex {
    /// The address of the index's word 0. The word at `base - 16`
    /// ([`MISS_HANDLER_OFFSET`]) holds the miss handler's address, the word at `base - 8`
    /// ([`HITS_OFFSET`]) is the hit counter.
    pub base: u64,
    /// The index's size in bytes less 8: the index word of address `a` is at
    /// `base + (a & mask)`.
    pub mask: u32,
}

/// The bytes of a fast path for a site, and where in them the miss call returns to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastPath {
    /// All the site's reserved bytes.
    pub bytes: Vec<u8>,
    /// Offset, from the start of the site, of the return address of the miss call.
    pub miss_return: usize,
}

impl ObjectIndex {
    /// The base as a 32-bit displacement, when the index and its header lie in the low
    /// 2 GiB (the runtime's arenas do when there is room): the compiled code then reaches
    /// them without loading the base into `r11` first.
    #[must_use]
    pub fn near(&self) -> Option<i32> {
        i32::try_from(self.base).ok().filter(|b| *b >= 4096)
    }
}

/// How compiled code reaches the index and its header: through `r11`, loaded with the
/// base by a `movabs` (anywhere), or by 32-bit displacements (a base in the low 2 GiB).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// `movabs r11, base` first.
    Far(u64),
    /// The base as a sign-extended 32-bit displacement.
    Near(i32),
}

impl Reach {
    /// The short form if the index allows it, else the `movabs` form.
    pub(super) fn of(index: ObjectIndex) -> Reach {
        index.near().map_or(Reach::Far(index.base), Reach::Near)
    }

    /// The absolute `[disp32]` operand (ModRM `reg` field `reg`) of the header word at
    /// `offset` from the base.
    fn absolute(disp: i32, reg: u8, offset: i8) -> Vec<u8> {
        let mut out = vec![(reg << 3) | 0b100, 0x25];
        out.extend_from_slice(&disp.wrapping_add(i32::from(offset)).to_le_bytes());
        out
    }

    /// `call qword ptr [r11 - 16]` or `call qword ptr [base - 16]`: the miss handler.
    pub(super) fn miss_call(self) -> Vec<u8> {
        match self {
            Reach::Far(_) => vec![0x41, 0xff, 0x53, MISS_HANDLER_OFFSET as u8],
            Reach::Near(d) => {
                let mut out = vec![0xff];
                out.extend(Reach::absolute(d, 2, MISS_HANDLER_OFFSET));
                out
            }
        }
    }

    /// `jmp qword ptr [r11 - 16]` or `jmp qword ptr [base - 16]`: the miss handler,
    /// tail-called.
    pub(super) fn miss_jump(self) -> Vec<u8> {
        match self {
            Reach::Far(_) => vec![0x41, 0xff, 0x63, MISS_HANDLER_OFFSET as u8],
            Reach::Near(d) => {
                let mut out = vec![0xff];
                out.extend(Reach::absolute(d, 4, MISS_HANDLER_OFFSET));
                out
            }
        }
    }

    /// `inc qword ptr [r11 - 8]` or `inc qword ptr [base - 8]`: the hit counter.
    pub(super) fn count(self) -> Vec<u8> {
        match self {
            Reach::Far(_) => vec![0x49, 0xff, 0x43, HITS_OFFSET as u8],
            Reach::Near(d) => {
                let mut out = vec![0x48, 0xff];
                out.extend(Reach::absolute(d, 0, HITS_OFFSET));
                out
            }
        }
    }
}

/// How compiled fast paths and stubs find an object's shape: the runtime's header (and
/// index) they reach through `r11`, whether they check the object against the index
/// first, and where the shape word is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The runtime's object index, whose header holds the miss handler and hit counter.
    pub index: ObjectIndex,
    /// Check that the object is in the index before reading it (the runtime's own
    /// objects). Off for a language's own object model ([`super::ObjectModel`]), whose
    /// objects are not in the index: the compiled code then trusts the pointer.
    pub check_objects: bool,
    /// The byte offset of the shape word from an object's address.
    pub shape_offset: i32,
}

impl Layout {
    /// The runtime's own objects: checked against `index`, the shape in word 0.
    #[must_use]
    pub fn shapes(index: ObjectIndex) -> Self {
        Layout {
            index,
            check_objects: true,
            shape_offset: 0,
        }
    }
}

/// The built-in model's cases, (shape, slot index), as (shape, byte offset) cases: the
/// property is word `slot + 1`.
pub(super) fn slot_cases(cases: &[(u64, usize)]) -> Option<Vec<(u64, i32)>> {
    cases
        .iter()
        .map(|(shape, slot)| {
            let offset = slot.checked_add(1)?.checked_mul(8)?;
            Some((*shape, i32::try_from(offset).ok()?))
        })
        .collect()
}

/// The head of a fast path or stub, up to the object check's `jne` (exclusive). Far:
/// `movabs r11, base`, then, checking objects, `mov eax, edi; and eax, mask;
/// cmp [r11 + rax], rdi`. Near: checking objects, `mov eax, edi; and eax, mask;
/// cmp [rax + base], rdi`; else nothing.
pub(super) fn object_check(layout: &Layout, reach: Reach) -> Vec<u8> {
    let index = layout.index;
    let mut out = Vec::with_capacity(21);
    if let Reach::Far(base) = reach {
        out.extend_from_slice(&movabs_r11(base));
    }
    if !layout.check_objects {
        return out;
    }
    out.extend_from_slice(&[0x89, 0xf8]);
    match i8::try_from(index.mask) {
        Ok(imm) => out.extend_from_slice(&[0x83, 0xe0, imm as u8]),
        Err(_) => {
            out.push(0x25);
            out.extend_from_slice(&index.mask.to_le_bytes());
        }
    }
    match reach {
        Reach::Far(_) => out.extend_from_slice(&[0x49, 0x39, 0x3c, 0x03]),
        Reach::Near(d) => {
            out.extend_from_slice(&[0x48, 0x39, 0xb8]);
            out.extend_from_slice(&d.to_le_bytes());
        }
    }
    out
}

/// A ModRM byte with base `rdi` and register field `reg` for displacement `disp`, and the
/// displacement's bytes (none for 0, else disp8 or disp32).
fn rdi_operand(reg: u8, disp: i32) -> Vec<u8> {
    let modrm = (reg << 3) | 0b111;
    if disp == 0 {
        vec![modrm]
    } else if let Ok(d) = i8::try_from(disp) {
        vec![0x40 | modrm, d as u8]
    } else {
        let mut out = vec![0x80 | modrm];
        out.extend_from_slice(&disp.to_le_bytes());
        out
    }
}

/// `cmp qword ptr [rdi + disp], shape` for a shape that a sign-extended immediate can
/// hold.
pub(super) fn cmp_shape(shape: u64, disp: i32) -> Option<Vec<u8>> {
    let value = shape as i64;
    if let Ok(imm) = i8::try_from(value) {
        let mut out = vec![0x48, 0x83];
        out.extend_from_slice(&rdi_operand(7, disp));
        out.push(imm as u8);
        return Some(out);
    }
    let imm = i32::try_from(value).ok()?;
    let mut out = vec![0x48, 0x81];
    out.extend_from_slice(&rdi_operand(7, disp));
    out.extend_from_slice(&imm.to_le_bytes());
    Some(out)
}

/// `cmp qword ptr [rdi + disp], rax`.
pub(super) fn cmp_rax(disp: i32) -> Vec<u8> {
    let mut out = vec![0x48, 0x39];
    out.extend_from_slice(&rdi_operand(0, disp));
    out
}

/// `mov rax, qword ptr [rdi + offset]`.
pub(super) fn load_slot(offset: i32) -> Vec<u8> {
    let mut out = vec![0x48, 0x8b];
    out.extend_from_slice(&rdi_operand(0, offset));
    out
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
/// the object) filling exactly `reserved` bytes: it checks the object against `index`,
/// calls the miss handler whose address is stored before the index (which takes the
/// site's arguments and rewrites its return address as the [module documentation](self)
/// says) for other objects and shapes, and increments the hit counter stored there on
/// each hit if `count_hits`. `None` if there are no cases or the sequence cannot be
/// encoded in `reserved` bytes.
#[must_use]
pub fn encode_fast_path(
    cases: &[(u64, usize)],
    index: ObjectIndex,
    count_hits: bool,
    reserved: usize,
) -> Option<FastPath> {
    encode_fast_path_in(
        &Layout::shapes(index),
        &slot_cases(cases)?,
        count_hits,
        reserved,
    )
}

/// [`encode_fast_path`] for any [`Layout`]: `cases` are (shape, byte offset of the
/// property from the object's address); without `check_objects` the head is
/// `movabs r11, base` alone.
#[must_use]
pub fn encode_fast_path_in(
    layout: &Layout,
    cases: &[(u64, i32)],
    count_hits: bool,
    reserved: usize,
) -> Option<FastPath> {
    if cases.is_empty() {
        return None;
    }
    // The short form where the index allows it and it fits; else the `movabs` form (which
    // is shorter when hits are counted in several cases).
    let near = Reach::of(layout.index);
    fast_path_with(layout, cases, count_hits, reserved, near).or_else(|| {
        (near != Reach::Far(layout.index.base)).then_some(())?;
        fast_path_with(
            layout,
            cases,
            count_hits,
            reserved,
            Reach::Far(layout.index.base),
        )
    })
}

/// [`encode_fast_path_in`] reaching the header as `reach` says.
fn fast_path_with(
    layout: &Layout,
    cases: &[(u64, i32)],
    count_hits: bool,
    reserved: usize,
    reach: Reach,
) -> Option<FastPath> {
    let miss_call = reach.miss_call();
    let count_bytes = reach.count();
    let check = object_check(layout, reach);
    let compares: Vec<Vec<u8>> = cases
        .iter()
        .map(|(shape, _)| cmp_shape(*shape, layout.shape_offset))
        .collect::<Option<_>>()?;
    let loads: Vec<Vec<u8>> = cases.iter().map(|(_, offset)| load_slot(*offset)).collect();
    let dispatch: usize = compares.iter().map(|c| c.len() + 2).sum();
    let count = if count_hits { count_bytes.len() } else { 0 };
    let case_lens: Vec<usize> = loads
        .iter()
        .enumerate()
        .map(|(i, l)| count + l.len() + if i + 1 < cases.len() { 2 } else { 0 })
        .collect();
    let body: usize = case_lens.iter().sum();
    let head = check.len() + if layout.check_objects { 2 } else { 0 };
    let pad = reserved.checked_sub(head + dispatch + miss_call.len() + body)?;
    // The padding goes after the miss call, where no path runs it, as far as every `je`
    // still reaches its case; the rest (sites of more than about 128 bytes) after the
    // last case, where the hits run it.
    let mut farthest = 0;
    let (mut je_end, mut before) = (0, 0);
    for (compare, len) in compares.iter().zip(&case_lens) {
        je_end += compare.len() + 2;
        farthest = farthest.max(dispatch - je_end + miss_call.len() + before);
        before += len;
    }
    let dead = pad.min(127usize.saturating_sub(farthest));
    let end = reserved - (pad - dead);
    let miss_at = head + dispatch;
    let mut case_at = Vec::with_capacity(cases.len());
    let mut at = miss_at + miss_call.len() + dead;
    for len in &case_lens {
        case_at.push(at);
        at += len;
    }

    let mut out = Vec::with_capacity(reserved);
    out.extend_from_slice(&check);
    if layout.check_objects {
        let rel = rel8(head, miss_at)?;
        out.extend_from_slice(&[0x75, rel]);
    }
    for (compare, target) in compares.iter().zip(&case_at) {
        out.extend_from_slice(compare);
        let rel = rel8(out.len() + 2, *target)?;
        out.extend_from_slice(&[0x74, rel]);
    }
    out.extend_from_slice(&miss_call);
    let miss_return = out.len();
    out.extend_from_slice(&encode_nops(Arch::X86_64, dead).ok()?);
    for (i, load) in loads.iter().enumerate() {
        if count_hits {
            out.extend_from_slice(&count_bytes);
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
