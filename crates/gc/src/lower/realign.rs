//! Frames of variable size kept from realigning their stack, for statepoint roots.
//!
//! LLVM realigns a frame for any stack object aligned beyond the stack's 16 bytes: an
//! `alloca` so aligned, or the spill of a vector of GC pointers at a statepoint (32 bytes
//! for three). A realigned frame that is also of variable size (a dynamic `alloca`) has its
//! statepoint slots addressed off a base pointer (`rbx` on x86-64, `x19` on AArch64), a
//! callee-saved register whose value at the call only a full unwind through every callee
//! would give: the walk refuses such a record. So such a function is made
//! `"no-realign-stack"`: LLVM then spills with unaligned moves and addresses the slots off
//! the frame pointer. An over-aligned `alloca` of constant size in it gets its alignment
//! by hand instead: 16-byte aligned and `align - 16` bytes larger, its address rounded up
//! (`llvm.ptrmask`, which keeps the pointer's provenance). A dynamic `alloca` needs
//! nothing: LLVM aligns it by masking the stack pointer, realigned frame or not.
//!
//! Left realigning, because the caller asked for it: a function with `alignstack` or
//! `"stackrealign"`, and one passing an argument `byval` aligned beyond 16 bytes (its
//! outgoing copy must be so aligned).

use locus_llvm::builder::Builder;
use locus_llvm::ir::{AttributeIndex, Function, Instruction, Opcode};

use super::memory::static_count;
use crate::Result;

/// The alignment the stack keeps at calls on the targets the walk knows (x86-64 and
/// AArch64): a stack object aligned beyond it makes LLVM realign the frame.
const STACK_ALIGN: u32 = 16;

/// The function attribute that keeps LLVM from realigning a frame.
const NO_REALIGN_STACK: &str = "no-realign-stack";

/// Makes `f` `"no-realign-stack"` when it is of variable size and nothing in it asks for a
/// realigned frame (see the [module documentation](self)), first aligning its over-aligned
/// `alloca`s by hand; returns whether it did.
///
/// # Errors
/// LLVM's refusals of the rewrite (none expected of verified input).
pub(super) fn keep_from_realigning<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<bool> {
    let allocas: Vec<Instruction<'m>> = f
        .instructions()
        .into_iter()
        .filter(|i| i.opcode() == Opcode::Alloca)
        .collect();
    let variable_size = allocas.iter().any(|&a| static_count(a).is_none());
    if !variable_size || asks_for_realignment(f) {
        return Ok(false);
    }
    for a in allocas {
        let align = a.alignment().unwrap_or(0);
        if let (true, Some(count)) = (align > STACK_ALIGN, static_count(a)) {
            align_by_hand(b, a, count, align)?;
        }
    }
    locus_llvm::passes::add_function_string_attribute(f, NO_REALIGN_STACK, "");
    Ok(true)
}

/// Whether `f` asks for its stack realigned: `alignstack` beyond [`STACK_ALIGN`],
/// `"stackrealign"`, or a call passing a `byval` argument so aligned.
fn asks_for_realignment(f: Function<'_>) -> bool {
    let over = |n: Option<u64>| n.is_some_and(|n| n > u64::from(STACK_ALIGN));
    if f.has_attribute(AttributeIndex::Function, "stackrealign")
        || over(f.int_attribute(AttributeIndex::Function, "alignstack"))
    {
        return true;
    }
    f.instructions()
        .into_iter()
        .filter_map(Instruction::as_call)
        .any(|call| {
            (0..call.num_arguments()).any(|i| {
                let at = AttributeIndex::Param(i);
                call.has_attribute(at, "byval") && over(call.int_attribute(at, "align"))
            })
        })
}

/// Replaces the static `alloca` `a` of `count` elements, aligned to `align` bytes, by one
/// aligned to [`STACK_ALIGN`] with `align - STACK_ALIGN` bytes more, and its address
/// rounded up to `align` (`llvm.ptrmask`).
fn align_by_hand<'m>(b: &Builder<'m>, a: Instruction<'m>, count: u64, align: u32) -> Result<()> {
    let Some(ty) = a.allocated_type() else {
        return Ok(());
    };
    let i8_ty = b.int_type(8)?;
    let i64_ty = b.int_type(64)?;
    let ptr_ty = a.as_value().ty();
    b.position_before(a)?;
    let body = b.struct_type(
        &[
            b.array_type(ty, count)?,
            b.array_type(i8_ty, u64::from(align - STACK_ALIGN))?,
        ],
        false,
    )?;
    let raw = b.alloca(body, None, "")?;
    b.set_alignment(raw, STACK_ALIGN)?;
    let bump = b.const_int(i64_ty, i64::from(align - 1))?;
    let bumped = b.gep(i8_ty, raw.as_value(), &[bump], false, "")?;
    let ptrmask_ty = b.function_type(ptr_ty, &[ptr_ty, i64_ty], false)?;
    let ptrmask = b.declare_function(
        &ptrmask_name(ptr_ty.address_space().unwrap_or(0)),
        ptrmask_ty,
    )?;
    let mask = b.const_int(i64_ty, -i64::from(align))?;
    let aligned = b.call(ptrmask_ty, ptrmask.as_value(), &[bumped, mask], &[], "")?;
    b.replace_all_uses_with(a.as_value(), aligned.as_value())?;
    let name = a.as_value().name();
    b.erase(a)?;
    b.set_name(aligned.as_value(), &name)?;
    Ok(())
}

/// `llvm.ptrmask`'s name for pointers in `address_space` masked by an `i64`.
fn ptrmask_name(address_space: u32) -> String {
    format!("llvm.ptrmask.p{address_space}.i64")
}
