//! From the intermediate form to a real frame (Julia's `llvm-final-gc-lowering`).
//!
//! The frame is an entry-block array of pointer-sized words `[nroots << 2, prev, roots...]`,
//! the layout of Julia's `jl_gcframe_t` that the runtime walks ([`crate::runtime`]):
//! - `julia.new_gc_frame(N)` becomes the alloca;
//! - `julia.push_gc_frame(frame, N)` stores `N << 2`, nulls the N roots, stores the
//!   current chain head into `prev` and makes the frame the head;
//! - `julia.get_gc_frame_slot(frame, k)` becomes the address of word `k + 2`;
//! - `julia.pop_gc_frame(frame)` puts `prev` back as the head;
//! - `julia.get_pgcstack()` becomes a call to the runtime's `locus_gc_get_pgcstack()`, which
//!   returns the address of the current thread's chain head.

use locus_llvm::builder::Builder;
use locus_llvm::ir::{Function, Instruction, Value};

use super::emit::{GET_GC_FRAME_SLOT, NEW_GC_FRAME, POP_GC_FRAME, PUSH_GC_FRAME};
use super::scan::{pgcstack_call, GET_PGCSTACK};
use crate::addrspace::{TRACKED, UNTRACKED};
use crate::{Error, Result};

/// The runtime function that replaces `julia.get_pgcstack`.
pub const RUNTIME_GET_PGCSTACK: &str = "locus_gc_get_pgcstack";

fn callee(inst: Instruction<'_>) -> String {
    inst.as_call()
        .and_then(|c| c.callee_name())
        .unwrap_or_default()
}

/// Lowers the frame intrinsics and `julia.get_pgcstack` in `f`.
pub fn final_lower<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<()> {
    let Some(pgcstack) = pgcstack_call(f) else {
        return Ok(());
    };
    let i64t = b.int_type(64)?;
    let i32t = b.int_type(32)?;
    let ptr = b.ptr_type(UNTRACKED)?;
    // The chain head comes from the runtime.
    let get_ty = b.function_type(ptr, &[], false)?;
    let get_fn = b.declare_function(RUNTIME_GET_PGCSTACK, get_ty)?;
    let head = b.replace_callee(pgcstack, get_ty, get_fn, &[])?.as_value();

    let mut frame: Option<(Value<'m>, u64)> = None;
    for inst in f.instructions() {
        let name = callee(inst);
        let arg = |i: usize| inst.as_call().and_then(|c| c.arguments().get(i).copied());
        match name.as_str() {
            NEW_GC_FRAME => {
                let n = arg(0)
                    .and_then(|v| v.const_uint())
                    .ok_or_else(|| Error::Lower {
                        function: f.name(),
                        instruction: Some(inst.print().trim().to_string()),
                        message: "julia.new_gc_frame needs a constant root count".into(),
                    })?;
                b.position_after_allocas(f)?;
                let ty = b.array_type(ptr, n + 2)?;
                let alloca = b.alloca(ty, None, "gcframe")?;
                b.replace_all_uses_with(inst, alloca)?;
                b.erase(inst)?;
                frame = Some((alloca.as_value(), n));
            }
            PUSH_GC_FRAME => {
                let Some((fr, n)) = frame else { continue };
                b.position_before(inst)?;
                b.store(b.const_int(i64t, (n << 2) as i64)?, fr)?;
                for k in 0..n {
                    let slot = b.gep(ptr, fr, &[b.const_int(i32t, (k + 2) as i64)?], true, "")?;
                    b.store(b.null_ptr(TRACKED)?, slot)?;
                }
                let prev = b.load(ptr, head, "gcframe.prev")?;
                let prev_slot = b.gep(ptr, fr, &[b.const_int(i32t, 1)?], true, "")?;
                b.store(prev, prev_slot)?;
                b.store(fr, head)?;
                b.erase(inst)?;
            }
            GET_GC_FRAME_SLOT => {
                let (Some((fr, _)), Some(k)) = (frame, arg(1).and_then(|v| v.const_uint())) else {
                    continue;
                };
                b.position_before(inst)?;
                let slot = b.gep(ptr, fr, &[b.const_int(i32t, (k + 2) as i64)?], true, "")?;
                b.replace_all_uses_with(inst, slot)?;
                b.erase(inst)?;
            }
            POP_GC_FRAME => {
                let Some((fr, _)) = frame else { continue };
                b.position_before(inst)?;
                let prev_slot = b.gep(ptr, fr, &[b.const_int(i32t, 1)?], true, "")?;
                let prev = b.load(ptr, prev_slot, "")?;
                b.store(prev, head)?;
                b.erase(inst)?;
            }
            GET_PGCSTACK => {}
            _ => {}
        }
    }
    Ok(())
}
