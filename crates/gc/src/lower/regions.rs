//! Root regions: stack memory that may hold GC pointers and is not the frame's own slots.
//!
//! A function registers each such `alloca` with the runtime (`locus_gc_push_region`), whose
//! collections scan it conservatively and pin what it names, whatever the roots of the
//! function's values are (frames or statepoints). It reads the region depth on entry
//! (`locus_gc_region_depth`) and drops its regions before each return and `resume`, and in
//! each landing pad and right after each `returns_twice` call (where a `longjmp` comes back)
//! it drops the regions and scoped pins of the frames unwound or skipped
//! (`locus_gc_region_reset`).

use locus_llvm::builder::Builder;
use locus_llvm::ir::{Function, Instruction, Opcode};

use super::scan::returns_twice_calls;
use super::statepoint::is_scoped_pin;
use crate::contract::{RUNTIME_PUSH_REGION, RUNTIME_REGION_DEPTH, RUNTIME_REGION_RESET, UNTRACKED};
use crate::Result;

/// Registers `allocas` (of `f`) as root regions, each right after its `alloca`, and resets
/// the scope stack where `f` is left or resumed: before each return and `resume`, in each
/// landing pad and after each `returns_twice` call, down to the depth after its own latest
/// entry (kept in a stack slot, `gc.regions.own`, when a region is pushed outside the
/// entry block or the function has scoped pins, whose calls return the depth after them).
/// A function with landing pads or `returns_twice` calls resets even without regions of
/// its own: the frames it catches from may have pushed some. With `reset_at_return`, so
/// does any function, before each return. Returns how many regions.
pub(super) fn register<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    allocas: &[Instruction<'m>],
    reset_at_return: bool,
) -> Result<usize> {
    let Some(entry) = f.entry_block() else {
        return Ok(0);
    };
    let pads: Vec<_> = f
        .blocks()
        .into_iter()
        .filter(|bb| {
            bb.first_non_phi()
                .is_some_and(|i| i.opcode() == Opcode::LandingPad)
        })
        .collect();
    // A `longjmp` back to a `returns_twice` call (`setjmp`) skips frames as an exception
    // does: after each such call the function drops what they left, as a pad does.
    let resumes = returns_twice_calls(f);
    let catches = !pads.is_empty() || !resumes.is_empty();
    if allocas.is_empty() && !catches && !reset_at_return {
        return Ok(0);
    }
    // The function's scoped pins and unpins (`pin_contract`): entries of the scope stack
    // its landing pads must keep.
    let scoped: Vec<Instruction<'m>> = f
        .instructions()
        .into_iter()
        .filter(|i| {
            i.as_call()
                .and_then(|c| c.callee_name())
                .is_some_and(|n| is_scoped_pin(&n))
        })
        .collect();
    let i64t = b.int_type(64)?;
    let raw = b.ptr_type(UNTRACKED)?;
    b.position_at_first_insertion_point(entry)?;
    let depth_ty = b.function_type(i64t, &[], false)?;
    let depth_fn = b.declare_function(RUNTIME_REGION_DEPTH, depth_ty)?;
    let depth_call = b.call(depth_ty, depth_fn, &[], &[], "gc.regions")?;
    let depth = depth_call.as_value();
    // With landing pads and a region pushed outside the entry block, or scoped pins, the
    // depth a pad drops to (the function's own entries, the ones made so far) is only
    // known at run time: a slot holds it, written on entry and after each push, pin and
    // unpin.
    let own_slot =
        if catches && (!scoped.is_empty() || allocas.iter().any(|a| a.block() != Some(entry))) {
            b.position_before(depth_call)?;
            let slot = b.alloca(i64t, None, "gc.regions.own")?.as_value();
            b.position_after(depth_call)?;
            b.store(depth, slot)?;
            Some(slot)
        } else {
            None
        };
    let push_ty = b.function_type(b.void_type(), &[raw, raw], false)?;
    let push_fn = b.declare_function(RUNTIME_PUSH_REGION, push_ty)?;
    let mut last_push = None;
    for a in allocas {
        let (Some(ty), Some(count)) = (a.allocated_type(), a.operand(0)) else {
            continue;
        };
        b.position_after(*a)?;
        let end = b.gep(ty, a.as_value(), &[count], false, "")?;
        let start = a.as_value();
        let (start, end) = if start.ty().address_space() == Some(UNTRACKED) {
            (start, end)
        } else {
            (
                b.addrspacecast(start, raw, "")?,
                b.addrspacecast(end, raw, "")?,
            )
        };
        last_push = Some(b.call(push_ty, push_fn, &[start, end], &[], "")?);
        if let Some(slot) = own_slot {
            // An empty region is not pushed: the depth is read, not counted.
            let now = b.call(depth_ty, depth_fn, &[], &[], "")?;
            b.store(now.as_value(), slot)?;
        }
    }
    if let Some(slot) = own_slot {
        for &call in &scoped {
            b.position_after(call)?;
            b.store(call.as_value(), slot)?;
        }
    }
    let reset_ty = b.function_type(b.void_type(), &[i64t], false)?;
    let reset_fn = b.declare_function(RUNTIME_REGION_RESET, reset_ty)?;
    // An exception that reaches a landing pad has unwound the frames in between without
    // their `ret`s: their regions (stack memory now free) and scoped pins go, first thing
    // in the pad, down to this function's own: those made so far, read from the slot, or,
    // when they are all regions pushed in the entry block, the depth after the last of
    // them.
    // The same right after each `returns_twice` call (a no-op on its first return).
    let own = match (own_slot, last_push) {
        _ if !catches => None,
        (Some(_), _) => None,
        (None, Some(push)) => {
            b.position_after(push)?;
            Some(
                b.call(depth_ty, depth_fn, &[], &[], "gc.regions.own")?
                    .as_value(),
            )
        }
        (None, None) => Some(depth),
    };
    let reset_to_own = || -> Result<()> {
        let own = match (own_slot, own) {
            (Some(slot), _) => b.load(i64t, slot, "gc.regions.own")?.as_value(),
            (None, Some(own)) => own,
            (None, None) => return Ok(()),
        };
        b.call(reset_ty, reset_fn, &[own], &[], "")?;
        Ok(())
    };
    for pad in &pads {
        b.position_at_first_insertion_point(*pad)?;
        reset_to_own()?;
    }
    for &call in &resumes {
        b.position_after(call)?;
        reset_to_own()?;
    }
    for inst in f.instructions() {
        // Unwinding out of the function (`resume`) leaves it as a return does.
        if matches!(inst.opcode(), Opcode::Ret | Opcode::Resume) {
            b.position_before(inst)?;
            b.call(reset_ty, reset_fn, &[depth], &[], "")?;
        }
    }
    Ok(allocas.len())
}

/// Drops the `tail` markers of `f`'s calls, once `f` has a GC frame or root regions: the
/// collector reads them during a callee's safepoint, which `tail` says the callee does not
/// do (passes run after the lowering would drop or sink the stores into them).
pub(super) fn drop_tail_markers<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<()> {
    for call in f
        .instructions()
        .into_iter()
        .filter(|i| i.opcode() == Opcode::Call)
    {
        b.drop_tail_marker(call)?;
    }
    Ok(())
}
