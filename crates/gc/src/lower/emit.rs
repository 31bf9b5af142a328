//! Writing the plan into the IR: Julia's intermediate form.
//!
//! A function with roots gets `%gcframe = call ptr @julia.new_gc_frame(i32 N)` and
//! `call void @julia.push_gc_frame(ptr %gcframe, i32 N)` right after its
//! `julia.get_pgcstack` call; each planned store becomes
//! `store ptr addrspace(10) %v, ptr (call @julia.get_gc_frame_slot(ptr %gcframe, i32 k))`
//! just before its safepoint (a null for each planned null); every return is preceded by
//! `call void @julia.pop_gc_frame(ptr %gcframe)`. Then the constructs that were only there
//! for the analysis go: `jl_roots` bundles are dropped, `julia.pointer_from_objref` becomes
//! an addrspacecast to 0, `gc_preserve_begin/end` are erased, and `julia.call(fptr, F,
//! args...)` becomes the jlcall convention `fptr(F, argv, nargs)` with the arguments in a
//! stack array (spec 003, "Соглашение о вызовах jlcall"). Before that, the write barriers
//! generational collectors need are placed where the frontend placed none
//! ([`super::barriers`]).

use locus_llvm::builder::Builder;
use locus_llvm::ir::{Function, Instruction, Opcode, Value};

use super::alloc;
use super::barriers::WriteBarriers;
use super::place::SafepointPlan;
use super::scan::Scan;
use crate::addrspace::{LeafPath, TRACKED, UNTRACKED};
use crate::contract::{
    ALLOC_ZEROINIT_INDIRECT, FIELD_WRITE_BARRIER_PREFIX, GC_ALLOC_MEMORY, GC_ALLOC_OBJ, GC_LOADED,
    GET_GC_FRAME_SLOT, JL_ROOTS, JULIA_CALL, JULIA_CALL2, NEW_GC_FRAME, OBJECT_WRITE_BARRIER,
    POINTER_FROM_OBJREF, POP_GC_FRAME, PRESERVE_BEGIN, PRESERVE_END, PUSH_GC_FRAME, TYPEOF,
    WRITE_BARRIER,
};
use crate::Result;

/// The name Julia's pass gives the address of root slot `k` where it stores or nulls a
/// root (`gc_slot_addr_K`; LLVM makes repeats unique).
fn slot_name(k: usize) -> String {
    format!("gc_slot_addr_{k}")
}

pub(crate) fn leaf_value<'m>(b: &Builder<'m>, v: Value<'m>, path: &LeafPath) -> Result<Value<'m>> {
    Ok(match path {
        LeafPath::Whole => v,
        LeafPath::Element(i) => {
            let index = b.const_int(b.int_type(32)?, i64::from(*i))?;
            b.extract_element(v, index, "")?
        }
        LeafPath::Field(indices) => extract_fields(b, v, indices)?,
        LeafPath::FieldElement(indices, i) => {
            let vector = extract_fields(b, v, indices)?;
            let index = b.const_int(b.int_type(32)?, i64::from(*i))?;
            b.extract_element(vector, index, "")?
        }
    })
}

fn extract_fields<'m>(b: &Builder<'m>, v: Value<'m>, indices: &[u32]) -> Result<Value<'m>> {
    let mut x = v;
    for &i in indices {
        x = b.extract_value(x, i, "")?;
    }
    Ok(x)
}

/// Emits the frame, the stores and the pops for one scanned function. `num_slots` is the
/// number of slots the SSA values need; the slots of the function's own memory
/// ([`Scan::memory`]) come before them.
pub fn emit_frame<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    scan: &Scan<'m>,
    num_slots: usize,
    plans: &[SafepointPlan],
) -> Result<()> {
    let base = scan.memory.num_slots();
    let total = base.saturating_add(num_slots);
    // No frame without a safepoint: nothing can collect while the function runs.
    if total == 0 || scan.safepoints.is_empty() {
        return Ok(());
    }
    let i32t = b.int_type(32)?;
    let ptr = b.ptr_type(UNTRACKED)?;
    let void = b.void_type();
    let new_ty = b.function_type(ptr, &[i32t], false)?;
    let push_ty = b.function_type(void, &[ptr, i32t], false)?;
    let slot_ty = b.function_type(ptr, &[ptr, i32t], false)?;
    let pop_ty = b.function_type(void, &[ptr], false)?;
    let new_fn = b.declare_function(NEW_GC_FRAME, new_ty)?;
    let push_fn = b.declare_function(PUSH_GC_FRAME, push_ty)?;
    let slot_fn = b.declare_function(GET_GC_FRAME_SLOT, slot_ty)?;
    let pop_fn = b.declare_function(POP_GC_FRAME, pop_ty)?;
    let n = b.const_int(i32t, total as i64)?;

    // As Julia places them: the frame first in the entry block, linked right after the
    // thread's chain head is known (at once when it is a parameter).
    let entry = f.entry_block().ok_or_else(|| crate::Error::Lower {
        function: f.name(),
        instruction: None,
        message: "the function has no entry block".into(),
    })?;
    b.position_at_first_insertion_point(entry)?;
    let frame = b.call(new_ty, new_fn, &[n], &[], "gcframe")?;
    match scan.pgcstack.as_instruction() {
        Some(call) => b.position_after(call)?,
        None => b.position_after(frame)?,
    }
    b.call(push_ty, push_fn, &[frame.as_value(), n], &[], "")?;
    scan.memory.emit(b, frame, slot_ty, slot_fn.as_value())?;
    let frame = frame.as_value();

    for (id, plan) in plans.iter().enumerate() {
        let Some(&call) = scan.safepoints.get(id) else {
            continue;
        };
        b.position_before(call)?;
        for &(v, slot) in &plan.stores {
            let Some(leaf) = scan.leaves.get(v) else {
                continue;
            };
            let k = b.const_int(i32t, (base + slot) as i64)?;
            let address = b.call(slot_ty, slot_fn, &[frame, k], &[], &slot_name(base + slot))?;
            let value = leaf_value(b, leaf.value, &leaf.path)?;
            b.store(value, address)?;
        }
        for &slot in &plan.nulls {
            let k = b.const_int(i32t, (base + slot) as i64)?;
            let address = b.call(slot_ty, slot_fn, &[frame, k], &[], &slot_name(base + slot))?;
            b.store(b.null_ptr(TRACKED)?, address)?;
        }
    }
    for inst in f.instructions() {
        if inst.opcode() == Opcode::Ret {
            b.position_before(inst)?;
            b.call(pop_ty, pop_fn, &[frame], &[], "")?;
        }
    }
    Ok(())
}

/// Removes what only the analysis needed and lowers `julia.call`, after placing the write
/// barriers `barriers` asks for ([`super::barriers`]; first, so that they are lowered with
/// the frontend's, on either root strategy).
pub fn rewrite_helpers_with<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    barriers: WriteBarriers,
) -> Result<()> {
    super::barriers::insert_write_barriers(b, f, barriers)?;
    let mut preserve_begins: Vec<Instruction<'m>> = Vec::new();
    for inst in f.instructions() {
        // A load through a GC pointer is invariant only while the object is rooted, which
        // stops being known after this pass: LLVM must not move it (Julia does the same, as
        // does LLVM's statepoint rewriting).
        if inst.opcode() == Opcode::Load
            && inst.metadata("invariant.load").is_some()
            && inst
                .operand(0)
                .and_then(|p| p.ty().address_space())
                .is_some_and(crate::addrspace::is_gc)
        {
            b.remove_metadata(inst, "invariant.load")?;
        }
        let Some(call) = inst.as_call() else { continue };
        let name = call.callee_name().unwrap_or_default();
        if call.has_operand_bundle(JL_ROOTS) {
            b.recreate_call_without_bundle(inst, JL_ROOTS)?;
            continue;
        }
        if call.has_operand_bundle(ALLOC_ZEROINIT_INDIRECT) {
            alloc::expand_zeroinit_indirect(b, inst)?;
            continue;
        }
        match name.as_str() {
            _ if is_write_barrier(&name) && stores_nothing_new(call) => b.erase(inst)?,
            GC_ALLOC_OBJ => alloc::expand_alloc_obj(b, inst)?,
            GC_ALLOC_MEMORY => alloc::expand_alloc_memory(b, inst)?,
            TYPEOF => alloc::expand_typeof(b, inst)?,
            // julia.gc_loaded(obj, ptr) only told the analysis what `ptr` lives off.
            GC_LOADED => {
                let Some(&ptr) = call.arguments().get(1) else {
                    continue;
                };
                b.position_before(inst)?;
                let name = inst.name();
                let cast = b.addrspacecast(ptr, inst.ty(), "")?;
                b.replace_all_uses_with(inst, cast)?;
                b.erase(inst)?;
                b.set_name(cast, &name)?;
            }
            POINTER_FROM_OBJREF => {
                let Some(&arg) = call.arguments().first() else {
                    continue;
                };
                b.position_before(inst)?;
                let raw = b.addrspacecast(arg, b.ptr_type(UNTRACKED)?, "")?;
                b.replace_all_uses_with(inst, raw)?;
                b.erase(inst)?;
            }
            PRESERVE_END => b.erase(inst)?,
            PRESERVE_BEGIN => preserve_begins.push(inst),
            JULIA_CALL => lower_julia_call(b, f, inst, false)?,
            JULIA_CALL2 => lower_julia_call(b, f, inst, true)?,
            _ => {}
        }
    }
    for inst in preserve_begins {
        b.erase(inst)?;
    }
    Ok(())
}

/// True for Julia's write barriers.
pub(crate) fn is_write_barrier(name: &str) -> bool {
    name == WRITE_BARRIER
        || name == OBJECT_WRITE_BARRIER
        || name.starts_with(FIELD_WRITE_BARRIER_PREFIX)
}

/// True if a write barrier's children are all the parent itself or constants (null, the
/// permanent globals): no old-to-young reference can appear, so the barrier can go, as
/// Julia's pass drops it. A field barrier's arguments are `parent, (slot, child)...`.
fn stores_nothing_new(call: locus_llvm::ir::Call<'_>) -> bool {
    let args = call.arguments();
    let Some((&parent, rest)) = args.split_first() else {
        return true;
    };
    let field = call
        .callee_name()
        .is_some_and(|n| n.starts_with(FIELD_WRITE_BARRIER_PREFIX));
    let children: Vec<_> = if field {
        rest.iter().skip(1).step_by(2).copied().collect()
    } else {
        rest.to_vec()
    };
    children.iter().all(|&c| c == parent || c.is_constant())
}

/// `julia.call(fptr, F, a1, ..., an)` → `fptr(F, argv, n)`, and `julia.call2(fptr, F, X, a1,
/// ..., an)` → `fptr(X, argv, n, F)`, with `argv = [a1, ..., an]` in an entry-block alloca.
fn lower_julia_call<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    inst: Instruction<'m>,
    two: bool,
) -> Result<()> {
    let Some(call) = inst.as_call() else {
        return Ok(());
    };
    let args = call.arguments();
    let (Some(&fptr), Some(&callee_f)) = (args.first(), args.get(1)) else {
        return Ok(());
    };
    let extra = if two { args.get(2).copied() } else { None };
    if two && extra.is_none() {
        return Ok(());
    }
    let rest = args.get(if two { 3 } else { 2 }..).unwrap_or(&[]);
    let tracked = b.ptr_type(TRACKED)?;
    let ptr = b.ptr_type(UNTRACKED)?;
    let i32t = b.int_type(32)?;
    let n = rest.len();
    // No arguments: a null array, as Julia passes.
    let argv = if n == 0 {
        b.null_ptr(UNTRACKED)?
    } else {
        b.position_after_allocas(f)?;
        let argv = b.alloca(b.array_type(tracked, n as u64)?, None, "jlcall.argv")?;
        b.position_before(inst)?;
        for (i, &a) in rest.iter().enumerate() {
            let slot = b.gep(tracked, argv, &[b.const_int(i32t, i as i64)?], true, "")?;
            b.store(a, slot)?;
        }
        argv.as_value()
    };
    let count = b.const_int(i32t, n as i64)?;
    match extra {
        // julia.call2(fptr, F, X, args...) -> fptr(X, argv, n, F).
        Some(x) => {
            let jlcall2_ty = b.function_type(tracked, &[tracked, ptr, i32t, tracked], false)?;
            b.replace_callee(inst, jlcall2_ty, fptr, &[x, argv, count, callee_f])?;
        }
        None => {
            let jlcall_ty = b.function_type(tracked, &[tracked, ptr, i32t], false)?;
            b.replace_callee(inst, jlcall_ty, fptr, &[callee_f, argv, count])?;
        }
    }
    Ok(())
}
