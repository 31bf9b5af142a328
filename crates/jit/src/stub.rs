//! An inline cache's stub, encoded directly as x86-64 machine code (no LLVM module): what a
//! site too small for the inline fast path, or with more cases than fit there, calls.
//!
//! The site calls the stub (`movabs r11, stub; call r11`), with the C calling convention
//! of the patch point: the object in `rdi`, the property name in `rsi`, the result in
//! `rax`. For cases `(shape_i, slot_i)` and the runtime's [`ObjectIndex`]:
//!
//! ```text
//!        movabs r11, index.base            ; 49 BB imm64
//!        mov eax, edi                      ; 89 F8
//!        and eax, index.mask               ; 25 id (83 E0 ib for a mask below 128)
//!        cmp qword ptr [r11 + rax], rdi    ; 49 39 3C 03
//!        jne miss                          ; 75 rel8 (0F 85 rel32 when far)
//!        cmp qword ptr [rdi], shape_i      ; 48 83 3F ib / 48 81 3F id, or for a shape
//!                                          ; outside i32: movabs rax, shape_i (48 B8
//!                                          ; imm64); cmp qword ptr [rdi], rax (48 39 07)
//!        jne next_i                        ; 75 rel8
//!       [inc qword ptr [r11 - 8]]          ; 49 FF 43 F8 (only when counting hits)
//!        mov rax, [rdi + 8 * (slot_i + 1)] ; 48 8B 47 disp8 / 48 8B 87 disp32
//!        ret                               ; C3
//! next_i: ...                              ; (once per case)
//! miss:  jmp qword ptr [r11 - 16]          ; 41 FF 63 F0: the miss handler, tail-called
//! ```
//!
//! With the index in the low 2 GiB the stub takes the fast path's short form
//! ([`super::fast_path`]: no `movabs`; `cmp qword ptr [rax + base], rdi`, `inc qword ptr
//! [base - 8]`, and `jmp qword ptr [base - 16]` (FF 24 25 d32) for the miss).
//!
//! The object check is the inline fast path's ([`super::fast_path`]): only an object the
//! runtime handed out has its shape read, anything else goes to the miss handler, which
//! refuses it as with caching off. The miss is a tail jump, so the handler sees the site's
//! own return address (and finds the site from it, `return address - 13`) and the stub is
//! not on the stack while the runtime runs. These are the encodings LLVM's assembler
//! picks (shortest immediates and displacements, relaxed jumps), checked against
//! `llvm-mc-19` by the tests. Cases are tried in order, so the runtime lists them by
//! shape.

use super::fast_path::{
    cmp_rax, cmp_shape, load_slot, object_check, slot_cases, Layout, ObjectIndex, Reach,
};

/// The stub for `cases` (shape ID, slot index: the property is word `slot + 1` of the
/// object), checking objects against `index` and counting hits in the counter stored
/// before it if `count_hits`. `None` for no cases or a slot whose offset does not fit 32
/// bits.
#[must_use]
pub fn encode_stub(
    cases: &[(u64, usize)],
    index: ObjectIndex,
    count_hits: bool,
) -> Option<Vec<u8>> {
    encode_stub_in(&Layout::shapes(index), &slot_cases(cases)?, count_hits)
}

/// [`encode_stub`] for any [`Layout`]: `cases` are (shape, byte offset of the property
/// from the object's address); without `check_objects` the head is `movabs r11, base`
/// alone, and the shape word is read at `layout.shape_offset`.
#[must_use]
pub fn encode_stub_in(layout: &Layout, cases: &[(u64, i32)], count_hits: bool) -> Option<Vec<u8>> {
    if cases.is_empty() {
        return None;
    }
    let reach = Reach::of(layout.index);
    let mut body = Vec::new();
    for (shape, offset) in cases {
        let compare = match cmp_shape(*shape, layout.shape_offset) {
            Some(c) => c,
            None => {
                let mut c = vec![0x48, 0xb8];
                c.extend_from_slice(&shape.to_le_bytes());
                c.extend_from_slice(&cmp_rax(layout.shape_offset));
                c
            }
        };
        let mut hit = Vec::new();
        if count_hits {
            hit.extend_from_slice(&reach.count());
        }
        hit.extend_from_slice(&load_slot(*offset));
        hit.push(0xc3);
        body.extend_from_slice(&compare);
        // At most 8 + 7 + 1 bytes to skip: always a rel8.
        body.extend_from_slice(&[0x75, hit.len() as u8]);
        body.extend_from_slice(&hit);
    }
    let mut out = object_check(layout, reach);
    if layout.check_objects {
        match i8::try_from(body.len()) {
            Ok(rel) => out.extend_from_slice(&[0x75, rel as u8]),
            Err(_) => {
                out.extend_from_slice(&[0x0f, 0x85]);
                out.extend_from_slice(&u32::try_from(body.len()).ok()?.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&body);
    out.extend_from_slice(&reach.miss_jump());
    Some(out)
}
