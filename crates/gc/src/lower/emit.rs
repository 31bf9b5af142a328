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
//! stack array (spec 003, "Соглашение о вызовах jlcall").

use locus_llvm::builder::Builder;
use locus_llvm::ir::{Function, Instruction, Opcode, Value};

use super::place::SafepointPlan;
use super::scan::{Scan, JL_ROOTS, JULIA_CALL, POINTER_FROM_OBJREF, PRESERVE_BEGIN, PRESERVE_END};
use crate::addrspace::{LeafPath, TRACKED, UNTRACKED};
use crate::Result;

/// The four intrinsics of the intermediate form.
pub const NEW_GC_FRAME: &str = "julia.new_gc_frame";
/// Links a frame into the chain.
pub const PUSH_GC_FRAME: &str = "julia.push_gc_frame";
/// The address of a root slot.
pub const GET_GC_FRAME_SLOT: &str = "julia.get_gc_frame_slot";
/// Unlinks a frame.
pub const POP_GC_FRAME: &str = "julia.pop_gc_frame";

/// Which planned stores to leave out: a test-only switch that must make the stress
/// collector report a dangling reference.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sabotage {
    /// Drop the store with this number, counting every planned store of the module in order.
    pub drop_store: Option<usize>,
    /// Stores seen so far.
    pub seen: usize,
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
    sabotage: &mut Sabotage,
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
    // thread's chain head is known.
    let entry = scan.pgcstack.block().ok_or_else(|| crate::Error::Lower {
        function: f.name(),
        instruction: None,
        message: "julia.get_pgcstack is not in a block".into(),
    })?;
    b.position_at_first_insertion_point(entry)?;
    let frame = b.call(new_ty, new_fn, &[n], &[], "gcframe")?;
    b.position_after(scan.pgcstack)?;
    b.call(push_ty, push_fn, &[frame.as_value(), n], &[], "")?;
    scan.memory.emit(b, frame, slot_ty, slot_fn.as_value())?;
    let frame = frame.as_value();

    for (id, plan) in plans.iter().enumerate() {
        let Some(&call) = scan.safepoints.get(id) else {
            continue;
        };
        b.position_before(call)?;
        for &(v, slot) in &plan.stores {
            let this = sabotage.seen;
            sabotage.seen += 1;
            if sabotage.drop_store == Some(this) {
                continue;
            }
            let Some(leaf) = scan.leaves.get(v) else {
                continue;
            };
            let k = b.const_int(i32t, (base + slot) as i64)?;
            let address = b.call(slot_ty, slot_fn, &[frame, k], &[], "")?;
            let value = leaf_value(b, leaf.value, &leaf.path)?;
            b.store(value, address)?;
        }
        for &slot in &plan.nulls {
            let k = b.const_int(i32t, (base + slot) as i64)?;
            let address = b.call(slot_ty, slot_fn, &[frame, k], &[], "")?;
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

/// Removes what only the analysis needed and lowers `julia.call`.
pub fn rewrite_helpers<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<()> {
    let mut preserve_begins: Vec<Instruction<'m>> = Vec::new();
    for inst in f.instructions() {
        let Some(call) = inst.as_call() else { continue };
        let name = call.callee_name().unwrap_or_default();
        if call.has_operand_bundle(JL_ROOTS) {
            b.recreate_call_without_bundle(inst, JL_ROOTS)?;
            continue;
        }
        match name.as_str() {
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
            JULIA_CALL => lower_julia_call(b, f, inst)?,
            _ => {}
        }
    }
    for inst in preserve_begins {
        b.erase(inst)?;
    }
    Ok(())
}

/// `julia.call(fptr, F, a1, ..., an)` → `fptr(F, argv, n)` with `argv = [a1, ..., an]` in an
/// entry-block alloca.
fn lower_julia_call<'m>(b: &Builder<'m>, f: Function<'m>, inst: Instruction<'m>) -> Result<()> {
    let Some(call) = inst.as_call() else {
        return Ok(());
    };
    let args = call.arguments();
    let (Some(&fptr), Some(&callee_f)) = (args.first(), args.get(1)) else {
        return Ok(());
    };
    let rest = args.get(2..).unwrap_or(&[]);
    let tracked = b.ptr_type(TRACKED)?;
    let ptr = b.ptr_type(UNTRACKED)?;
    let i32t = b.int_type(32)?;
    let n = rest.len();
    b.position_after_allocas(f)?;
    let argv_ty = b.array_type(tracked, n.max(1) as u64)?;
    let argv = b.alloca(argv_ty, None, "jlcall.argv")?;
    b.position_before(inst)?;
    for (i, &a) in rest.iter().enumerate() {
        let slot = b.gep(tracked, argv, &[b.const_int(i32t, i as i64)?], true, "")?;
        b.store(a, slot)?;
    }
    let jlcall_ty = b.function_type(tracked, &[tracked, ptr, i32t], false)?;
    let count = b.const_int(i32t, n as i64)?;
    b.replace_callee(inst, jlcall_ty, fptr, &[callee_f, argv.as_value(), count])?;
    Ok(())
}
