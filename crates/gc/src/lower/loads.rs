//! Loads from GC memory stay between the safepoints the lowering saw them between.
//!
//! Roots are placed for the IR's order of loads and safepoints: an object's frame slot is
//! cleared after its last use (with statepoint roots, the uses after a safepoint take its
//! relocation). LLVM's code generator moves a load it is told reads constant memory (an
//! access tag marked immutable, Julia's `jtbaa_const`; `!invariant.load`) across calls,
//! so such a load from an object can run after a safepoint where nothing roots the object
//! any more: x86-64's instruction selection folded one into an `add` after the next
//! allocation, and the stress collector caught it reading a freed object. So each load
//! through a pointer in a GC address space loses the immutable flag of its access tag and
//! its `!invariant.load`; the optimizer that runs before the lowering has used them.

use locus_llvm::builder::Builder;
use locus_llvm::ir::{Function, Metadata, Opcode};

use crate::addrspace::is_gc;
use crate::Result;

/// Drops the immutable flag and `!invariant.load` of `f`'s loads from GC memory; returns
/// how many loads changed.
pub fn keep_gc_loads_in_place<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<usize> {
    let mut changed = 0;
    for inst in f.instructions() {
        if inst.opcode() != Opcode::Load {
            continue;
        }
        let from_gc = inst
            .operand(0)
            .and_then(|p| p.ty().scalar().address_space())
            .is_some_and(is_gc);
        if !from_gc {
            continue;
        }
        let mut this = false;
        if inst.metadata("invariant.load").is_some() {
            b.remove_metadata(inst, "invariant.load")?;
            this = true;
        }
        if let Some(mutable) = inst
            .metadata("tbaa")
            .as_ref()
            .and_then(without_immutable_flag)
        {
            // A tag that cannot be written back (it holds what the reader could not read)
            // goes: less alias information, never a wrong one.
            if b.set_metadata(inst, "tbaa", &mutable).is_err() {
                b.remove_metadata(inst, "tbaa")?;
            }
            this = true;
        }
        changed += usize::from(this);
    }
    Ok(changed)
}

/// The TBAA access tag `tag` without its immutable flag, if the flag is set: the operand
/// after the offset in the struct-path form (`!{base, access, offset, immutable}`), after
/// the size in the newer form (`!{base, access, offset, size, immutable}`, whose type
/// nodes start with their parent node rather than a name).
fn without_immutable_flag<'m>(tag: &Metadata<'m>) -> Option<Metadata<'m>> {
    let ops = tag.operands();
    let new_format = matches!(
        ops.first().and_then(|base| base.operands().first()),
        Some(Metadata::Node(_))
    );
    let at = if new_format { 4 } else { 3 };
    match ops.get(at)? {
        Metadata::Value(v) if v.const_uint()? != 0 => Some(Metadata::Node(ops[..at].to_vec())),
        _ => None,
    }
}
