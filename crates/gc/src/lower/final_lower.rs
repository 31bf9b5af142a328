//! From the intermediate form to a real frame (Julia's `llvm-final-gc-lowering`).
//!
//! The frame is an entry-block array of pointer-sized words `[nroots << 2, prev, roots...]`,
//! the layout of Julia's `jl_gcframe_t` that the runtime walks ([`crate::runtime`]):
//! - `julia.new_gc_frame(N)` becomes the alloca, its N roots nulled at once (allocas moved
//!   into the frame may be written before the frame is linked);
//! - `julia.push_gc_frame(frame, N)` stores `N << 2`, stores the current chain head into
//!   `prev` and makes the frame the head;
//! - `julia.get_gc_frame_slot(frame, k)` becomes the address of word `k + 2`;
//! - `julia.pop_gc_frame(frame)` puts `prev` back as the head;
//! - around each `returns_twice` call (`setjmp`) the head is saved and put back, since a
//!   `longjmp` to it skips the pops of the frames in between;
//! - `julia.get_pgcstack()` becomes a call to the runtime's `locus_gc_get_pgcstack()`, which
//!   returns the address of the current thread's chain head (a `"gcstack"` parameter, if
//!   the function has one, is the chain head instead);
//! - Julia's write barriers left by the cleanup (the frontend's and those the lowering
//!   placed, [`super::barriers`]) become `locus_gc_write_barrier(parent)`;
//! - Julia's allocations become the runtime's: `julia.gc_alloc_bytes(ptls, size[, tag])`
//!   becomes `locus_gc_alloc_bytes(ptls, size, tag)` (tag 0 when absent), and
//!   `jl_alloc_genericmemory_unchecked` becomes `locus_gc_alloc_genericmemory`, with the
//!   same arguments.
//!
//! The frame's words are 8-byte aligned and tagged `jtbaa_gcframe`, as Julia tags them.

use locus_llvm::builder::Builder;
use locus_llvm::ir::{Function, Instruction, Type, Value};

use super::inline_alloc::{inline_allocations, InlineAlloc, ObjectFrom};
use super::scan::{pgcstack, returns_twice_calls};
use super::tbaa::{decorate, Tbaa};
use crate::addrspace::{TRACKED, UNTRACKED};
use crate::contract::{
    ALLOC_GENERICMEMORY, GC_ALLOC_BYTES, GET_GC_FRAME_SLOT, GET_PGCSTACK, GET_PGCSTACK_OR_NEW,
    HEADER_WORDS, NEW_GC_FRAME, POP_GC_FRAME, PUSH_GC_FRAME, ROOT_COUNT_SHIFT, RUNTIME_ALLOC_BYTES,
    RUNTIME_ALLOC_GENERICMEMORY, RUNTIME_GET_PGCSTACK, RUNTIME_SAFEPOINT, RUNTIME_WRITE_BARRIER,
    SAFEPOINT,
};
use crate::{Error, Result};

fn callee(inst: Instruction<'_>) -> String {
    inst.as_call()
        .and_then(|c| c.callee_name())
        .unwrap_or_default()
}

/// Lowers the frame intrinsics and every `julia.get_pgcstack` call in `f`, and inlines the
/// allocation fast path ([`super::inline_alloc`]) in the statepoint rewrite's form (what
/// [`super::statepoint`] calls).
pub fn final_lower<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<()> {
    final_lower_with(b, f, InlineAlloc::Auto, ObjectFrom::Integer)
}

/// [`final_lower`], inlining the allocation fast path or not as `inline` says, its objects
/// made as `from` says.
pub fn final_lower_with<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    inline: InlineAlloc,
    from: ObjectFrom,
) -> Result<()> {
    let i64t = b.int_type(64)?;
    let i32t = b.int_type(32)?;
    let ptr = b.ptr_type(UNTRACKED)?;
    let refuse = |inst: Instruction<'m>, message: &str| Error::Lower {
        function: f.name(),
        instruction: Some(inst.print().trim().to_string()),
        message: message.into(),
    };
    // The chain head: the `"gcstack"` parameter, else the entry block's call, which (like
    // every other such call) now asks the runtime.
    let chosen = pgcstack(f);
    let mut head = chosen.filter(|v| v.as_instruction().is_none());
    let get_ty = b.function_type(ptr, &[], false)?;
    for inst in f.instructions() {
        let name = callee(inst);
        if name == GET_PGCSTACK || name == GET_PGCSTACK_OR_NEW {
            let get_fn = b.declare_function(RUNTIME_GET_PGCSTACK, get_ty)?;
            let call = b.replace_callee(inst, get_ty, get_fn, &[])?.as_value();
            if chosen == Some(inst.as_value()) {
                head = Some(call);
            }
        }
    }

    let mut frame: Option<(Value<'m>, u64)> = None;
    for inst in f.instructions() {
        let name = callee(inst);
        let arg = |i: usize| inst.as_call().and_then(|c| c.arguments().get(i).copied());
        let needs_frame =
            || frame.ok_or_else(|| refuse(inst, "used before julia.new_gc_frame in the function"));
        match name.as_str() {
            NEW_GC_FRAME => {
                let n = arg(0).and_then(|v| v.const_uint()).ok_or_else(|| {
                    refuse(inst, "julia.new_gc_frame needs a constant root count")
                })?;
                b.position_after_allocas(f)?;
                let ty = b.array_type(ptr, n + HEADER_WORDS as u64)?;
                let alloca = b.alloca(ty, None, "")?;
                // Room for 16-byte aligned allocas moved into the frame.
                b.set_alignment(alloca, 16)?;
                // With a datalayout whose allocas live elsewhere (`A5`), the frame is
                // reached through a generic pointer.
                let generic = alloca.ty().address_space() == Some(UNTRACKED);
                let address = if generic {
                    alloca.as_value()
                } else {
                    b.addrspacecast(alloca, ptr, "")?
                };
                // The roots are nulled where the frame is made, before anything can store
                // into them (allocas moved into the frame may be written before the push).
                for k in 0..n {
                    let slot = b.gep(
                        b.ptr_type(TRACKED)?,
                        address,
                        &[b.const_int(i32t, (k + HEADER_WORDS as u64) as i64)?],
                        true,
                        "",
                    )?;
                    frame_word(b, b.store(b.null_ptr(TRACKED)?, slot)?)?;
                }
                b.replace_all_uses_with(inst, address)?;
                b.erase(inst)?;
                b.set_name(address, "gcframe")?;
                frame = Some((address, n));
            }
            PUSH_GC_FRAME => {
                let (fr, n) = needs_frame()?;
                let head = head.ok_or_else(|| {
                    refuse(
                        inst,
                        "no julia.get_pgcstack call or \"gcstack\" parameter to link the frame to",
                    )
                })?;
                b.position_before(inst)?;
                let count = b.const_int(i64t, (n << ROOT_COUNT_SHIFT) as i64)?;
                frame_word(b, b.store(count, fr)?)?;
                let prev = b.load(ptr, head, "gcframe.prev")?;
                b.set_alignment(prev, 8)?;
                let prev_slot = b.gep(ptr, fr, &[b.const_int(i32t, 1)?], true, "")?;
                frame_word(b, b.store(prev, prev_slot)?)?;
                let link = b.store(fr, head)?;
                b.set_alignment(link, 8)?;
                b.erase(inst)?;
            }
            GET_GC_FRAME_SLOT => {
                let (fr, n) = needs_frame()?;
                let k = arg(1)
                    .and_then(|v| v.const_uint())
                    .filter(|&k| k < n)
                    .ok_or_else(|| {
                        refuse(
                            inst,
                            "the slot is not a constant below the frame's root count",
                        )
                    })?;
                b.position_before(inst)?;
                // As Julia's FinalLowerGC: a GEP over tracked pointers, with the slot's name
                // (an alloca moved into the frame keeps its own).
                let name = inst.name();
                b.set_name(inst, "")?;
                let slot = b.gep(
                    b.ptr_type(TRACKED)?,
                    fr,
                    &[b.const_int(i32t, (k + HEADER_WORDS as u64) as i64)?],
                    true,
                    &name,
                )?;
                b.replace_all_uses_with(inst, slot)?;
                b.erase(inst)?;
            }
            POP_GC_FRAME => {
                let (fr, _) = needs_frame()?;
                let head =
                    head.ok_or_else(|| refuse(inst, "no chain head to unlink the frame from"))?;
                b.position_before(inst)?;
                let prev_slot = b.gep(ptr, fr, &[b.const_int(i32t, 1)?], true, "")?;
                let prev = b.load(ptr, prev_slot, "")?;
                frame_word(b, prev)?;
                frame_word(b, b.store(prev, head)?)?;
                b.erase(inst)?;
            }
            // Julia's poll becomes the runtime's.
            SAFEPOINT => {
                let ty = b.function_type(b.void_type(), &[], false)?;
                let poll = b.declare_function(RUNTIME_SAFEPOINT, ty)?;
                b.replace_callee(inst, ty, poll, &[])?;
            }
            GC_ALLOC_BYTES => {
                let (Some(ptls), Some(size)) = (arg(0), arg(1)) else {
                    continue;
                };
                // Julia before 1.12 passed no tag: the program stores it afterwards.
                let tag = match arg(2) {
                    Some(tag) => tag,
                    None => b.const_int(i64t, 0)?,
                };
                let tracked = b.ptr_type(TRACKED)?;
                let ty = b.function_type(tracked, &[ptls.ty(), i64t, i64t], false)?;
                let alloc = b.declare_function(RUNTIME_ALLOC_BYTES, ty)?;
                b.replace_callee(inst, ty, alloc, &[ptls, size, tag])?;
            }
            ALLOC_GENERICMEMORY => {
                let (Some(ptls), Some(nbytes), Some(tag)) = (arg(0), arg(1), arg(2)) else {
                    continue;
                };
                let tracked = b.ptr_type(TRACKED)?;
                let ty = b.function_type(tracked, &[ptls.ty(), i64t, tag.ty()], false)?;
                let alloc = b.declare_function(RUNTIME_ALLOC_GENERICMEMORY, ty)?;
                b.replace_callee(inst, ty, alloc, &[ptls, nbytes, tag])?;
            }
            _ if super::emit::is_write_barrier(&name) => {
                // The runtime's barrier takes the parent; the children only mattered to a
                // generational collector.
                let Some(parent) = arg(0) else { continue };
                let ty = b.function_type(b.void_type(), &[parent.ty()], false)?;
                let barrier = b.declare_function(RUNTIME_WRITE_BARRIER, ty)?;
                b.replace_callee(inst, ty, barrier, &[parent])?;
            }
            _ => {}
        }
    }
    let head = restore_head_after_returns_twice(b, f, head, get_ty)?;
    if inline == InlineAlloc::Auto {
        inline_allocations(b, f, head, from)?;
    }
    super::loads::keep_gc_loads_in_place(b, f)?;
    Ok(())
}

/// A `longjmp` back to a `returns_twice` call (`setjmp`) skips the frames in between, which
/// linked themselves into the chain and never unlink: the chain head would name their dead
/// stack memory. So the head is read before each such call and put back after it (a no-op
/// on its first return), as Julia's runtime restores the task's `gcstack` when a `longjmp`
/// reaches a handler. A function without a chain head gets one (the runtime's call) for
/// this. Returns the chain head.
fn restore_head_after_returns_twice<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    head: Option<Value<'m>>,
    get_ty: Type<'m>,
) -> Result<Option<Value<'m>>> {
    let calls = returns_twice_calls(f);
    // A function with a call has an entry block.
    let (false, Some(entry)) = (calls.is_empty(), f.entry_block()) else {
        return Ok(head);
    };
    let head = match head {
        Some(head) => head,
        None => {
            b.position_at_first_insertion_point(entry)?;
            let get_fn = b.declare_function(RUNTIME_GET_PGCSTACK, get_ty)?;
            b.call(get_ty, get_fn, &[], &[], "pgcstack")?.as_value()
        }
    };
    let ptr = b.ptr_type(UNTRACKED)?;
    for (k, call) in calls.into_iter().enumerate() {
        if call.is_terminator() {
            return Err(Error::Lower {
                function: f.name(),
                instruction: Some(call.print().trim().to_string()),
                message: "a returns_twice call made by `invoke` is not supported (call it \
                          and branch instead)"
                    .into(),
            });
        }
        b.position_before(call)?;
        // Named by the call's place, not by LLVM's counter, which erased values advance.
        let saved = b.load(ptr, head, &format!("gcstack.saved.{k}"))?;
        frame_word(b, saved)?;
        b.position_after(call)?;
        frame_word(b, b.store(saved.as_value(), head)?)?;
    }
    Ok(Some(head))
}

/// A load or store of a frame word or the chain head: 8-byte aligned and, as Julia tags
/// them, `jtbaa_gcframe`.
fn frame_word<'m>(b: &Builder<'m>, inst: Instruction<'m>) -> Result<()> {
    b.set_alignment(inst, 8)?;
    decorate(b, inst, Tbaa::GcFrame)
}
