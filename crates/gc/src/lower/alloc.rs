//! Julia's allocation intrinsics, expanded as Julia's LateLowerGCFrame does (issue 12,
//! section 3): `julia.gc_alloc_obj(task, size, tag)` becomes
//! `julia.gc_alloc_bytes(task->ptls, size, tag)` followed by the store of the type tag into
//! the word before the object, and the pointer fields (`julia.gc_alloc_ptr_offsets`) or
//! byte ranges (`julia.gc_alloc_zeroinit`) its bundles name are cleared at once, before
//! anything can collect. A `julia.gc_alloc_zeroinit_indirect` bundle on any allocating call
//! zeroes the buffer whose pointer the new object holds. `julia.gc_alloc_memory` becomes a
//! `GenericMemory` with its data inline or from the runtime (see [`expand_alloc_memory`]).

use locus_llvm::builder::Builder;
use locus_llvm::ir::{AttributeIndex, Instruction, Value};

use super::tbaa::{decorate, Tbaa};
use crate::contract::{
    ALLOC_GENERICMEMORY, ALLOC_PTR_OFFSETS, ALLOC_ZEROINIT, ALLOC_ZEROINIT_INDIRECT, DERIVED,
    GC_ALLOC_BYTES, MEMORY_INLINE_DATA_OFFSET, MEMORY_INLINE_MAX_BYTES, MEMORY_LENGTH_OFFSET,
    MEMORY_PTR_OFFSET, TAG_FLAG_BITS, TASK_PTLS_WORD, TRACKED, UNTRACKED,
};
use crate::Result;

/// Expands one `julia.gc_alloc_obj` call.
pub fn expand_alloc_obj<'m>(b: &Builder<'m>, inst: Instruction<'m>) -> Result<()> {
    let Some(call) = inst.as_call() else {
        return Ok(());
    };
    let args = call.arguments();
    let (Some(&task), Some(&size), Some(&tag)) = (args.first(), args.get(1), args.get(2)) else {
        return Ok(());
    };
    b.position_before(inst)?;
    let ptls = ptls_load(b, task)?;
    let dereferenceable = call.int_attribute(AttributeIndex::Return, "dereferenceable");
    let object = alloc_bytes(b, ptls, size, tag, dereferenceable)?;
    for bundle in call.operand_bundles() {
        if bundle.tag == ALLOC_PTR_OFFSETS {
            let derived = b.addrspacecast(object, b.ptr_type(DERIVED)?, "")?;
            for offset in bundle.args.iter().filter(|o| o.const_uint().is_some()) {
                let field = byte_gep(b, derived, *offset)?;
                let store = b.store(b.null_ptr(TRACKED)?, field)?;
                b.set_alignment(store, 8)?;
            }
        } else if bundle.tag == ALLOC_ZEROINIT {
            if let [offset, size] = bundle.args[..] {
                if size.const_uint() != Some(0) {
                    let derived = b.addrspacecast(object, b.ptr_type(DERIVED)?, "")?;
                    memset(b, byte_gep(b, derived, offset)?, size)?;
                }
            }
        }
    }
    let name = inst.name();
    b.replace_all_uses_with(inst, object)?;
    b.erase(inst)?;
    b.set_name(object, &name)?;
    Ok(())
}

/// Handles a `julia.gc_alloc_zeroinit_indirect` bundle on `inst`, if it has one, and drops
/// the bundle.
pub fn expand_zeroinit_indirect<'m>(b: &Builder<'m>, inst: Instruction<'m>) -> Result<()> {
    let Some(bundle) = inst
        .as_call()
        .and_then(|c| c.operand_bundle(ALLOC_ZEROINIT_INDIRECT))
    else {
        return Ok(());
    };
    if let [offset, size] = bundle.args[..] {
        if size.const_uint() != Some(0) {
            b.position_after(inst)?;
            let derived = b.addrspacecast(inst, b.ptr_type(DERIVED)?, "")?;
            let field = byte_gep(b, derived, offset)?;
            let ptr = b.ptr_type(UNTRACKED)?;
            let data = b.load(ptr, field, "")?;
            b.set_alignment(data, 8)?;
            memset(b, data.as_value(), size)?;
        }
    }
    b.recreate_call_without_bundle(inst, ALLOC_ZEROINIT_INDIRECT)?;
    Ok(())
}

/// Expands one `julia.gc_alloc_memory(task, nbytes, tag, length, zeroinit)` call as Julia
/// does: data that fits a small object is inline (one `julia.gc_alloc_bytes` of the header
/// and the data, tagged here, its data pointer set to its own inline data), else the
/// runtime's `jl_alloc_genericmemory_unchecked` makes the object and sets the pointer, which
/// is read back. Then the data is zeroed if asked (and not empty), and the length stored,
/// all before anything can collect.
pub fn expand_alloc_memory<'m>(b: &Builder<'m>, inst: Instruction<'m>) -> Result<()> {
    let Some(call) = inst.as_call() else {
        return Ok(());
    };
    let [task, nbytes, tag, length, zeroinit] = call.arguments()[..] else {
        return Ok(());
    };
    let i64t = b.int_type(64)?;
    let ptr = b.ptr_type(UNTRACKED)?;
    let derived_ty = b.ptr_type(DERIVED)?;
    b.position_before(inst)?;
    let ptls = ptls_load(b, task)?;
    let constant = nbytes.const_uint();
    let (object, derived, data) = match constant.filter(|&n| n <= MEMORY_INLINE_MAX_BYTES) {
        Some(n) => {
            let total = n + MEMORY_INLINE_DATA_OFFSET as u64;
            let size = b.const_int(i64t, total as i64)?;
            let object = alloc_bytes(b, ptls, size, tag, Some(total))?;
            let derived = b.addrspacecast(object, derived_ty, "")?;
            let raw = b.addrspacecast(derived, ptr, "")?;
            let data = byte_gep(b, raw, b.const_int(i64t, MEMORY_INLINE_DATA_OFFSET)?)?;
            let field = byte_gep(b, derived, b.const_int(i64t, MEMORY_PTR_OFFSET)?)?;
            let store = b.store(data, field)?;
            b.set_alignment(store, 8)?;
            (object, derived, data)
        }
        None => {
            let tracked = b.ptr_type(TRACKED)?;
            let ty = b.function_type(tracked, &[ptr, i64t, ptr], false)?;
            let f = b.declare_function(ALLOC_GENERICMEMORY, ty)?;
            let raw_tag = b.addrspacecast(tag, ptr, "")?;
            let object = b.call(ty, f, &[ptls, nbytes, raw_tag], &[], "")?;
            for (attr, n) in [("noalias", 0), ("nonnull", 0), ("align", 16)] {
                b.add_call_attribute(object, AttributeIndex::Return, attr, n)?;
            }
            let header = (MEMORY_INLINE_DATA_OFFSET) as u64;
            b.add_call_attribute(object, AttributeIndex::Return, "dereferenceable", header)?;
            let object = object.as_value();
            let derived = b.addrspacecast(object, derived_ty, "")?;
            let field = byte_gep(b, derived, b.const_int(i64t, MEMORY_PTR_OFFSET)?)?;
            let data = b.load(ptr, field, "")?;
            b.set_alignment(data, 8)?;
            (object, derived, data.as_value())
        }
    };
    let Some(zero) = zeroinit.const_uint() else {
        return Err(crate::Error::Lower {
            function: inst.function().map(|f| f.name()).unwrap_or_default(),
            instruction: Some(inst.print().trim().to_string()),
            message: "julia.gc_alloc_memory needs a constant zeroinit flag (Julia's pass \
                      requires one too)"
                .into(),
        });
    };
    if zero == 1 && constant != Some(0) {
        memset(b, data, nbytes)?;
    }
    let field = byte_gep(b, derived, b.const_int(i64t, MEMORY_LENGTH_OFFSET)?)?;
    let store = b.store(length, field)?;
    b.set_alignment(store, 8)?;
    let name = inst.name();
    b.replace_all_uses_with(inst, object)?;
    b.erase(inst)?;
    b.set_name(object, &name)?;
    Ok(())
}

/// Expands `julia.typeof(obj)` as Julia does: the tag word before the object (an atomic
/// load, `jtbaa_tag`) without its low four bits, which are the collector's.
pub fn expand_typeof<'m>(b: &Builder<'m>, inst: Instruction<'m>) -> Result<()> {
    let Some(obj) = inst.as_call().and_then(|c| c.arguments().first().copied()) else {
        return Ok(());
    };
    let i64t = b.int_type(64)?;
    b.position_before(inst)?;
    let derived = b.addrspacecast(obj, b.ptr_type(DERIVED)?, "")?;
    let slot = b.gep(i64t, derived, &[b.const_int(i64t, -1)?], true, "")?;
    let word = b.load(i64t, slot, "")?;
    b.set_alignment(word, 8)?;
    b.set_unordered_atomic(word)?;
    decorate(b, word, Tbaa::Tag)?;
    let tag = b.and(word, b.const_int(i64t, !TAG_FLAG_BITS)?, "")?;
    let raw = b.inttoptr(tag, b.ptr_type(UNTRACKED)?, "")?;
    let name = inst.name();
    let ty = b.addrspacecast(raw, inst.ty(), "")?;
    b.replace_all_uses_with(inst, ty)?;
    b.erase(inst)?;
    b.set_name(ty, &name)?;
    Ok(())
}

/// Loads the `ptls` field of `task`, as Julia's expansions do.
fn ptls_load<'m>(b: &Builder<'m>, task: Value<'m>) -> Result<Value<'m>> {
    let ptr = b.ptr_type(UNTRACKED)?;
    let index = b.const_int(b.int_type(64)?, TASK_PTLS_WORD)?;
    let field = b.gep(ptr, task, &[index], true, "ptls_field")?;
    let ptls = b.load(ptr, field, "ptls_load")?;
    b.set_alignment(ptls, 8)?;
    decorate(b, ptls, Tbaa::GcFrame)?;
    Ok(ptls.as_value())
}

/// `julia.gc_alloc_bytes(ptls, size, tag)`, then the tag stored in the word before the new
/// object (atomically, for a concurrent collector's readers).
fn alloc_bytes<'m>(
    b: &Builder<'m>,
    ptls: Value<'m>,
    size: Value<'m>,
    tag: Value<'m>,
    dereferenceable: Option<u64>,
) -> Result<Value<'m>> {
    let i64t = b.int_type(64)?;
    let ptr = b.ptr_type(UNTRACKED)?;
    let tracked = b.ptr_type(TRACKED)?;
    let tag_word = b.ptrtoint(tag, i64t, "")?;
    let bytes_ty = b.function_type(tracked, &[ptr, i64t, i64t], false)?;
    let bytes_fn = b.declare_function(GC_ALLOC_BYTES, bytes_ty)?;
    let object = b.call(bytes_ty, bytes_fn, &[ptls, size, tag_word], &[], "")?;
    b.add_call_attribute(object, AttributeIndex::Return, "noalias", 0)?;
    b.add_call_attribute(object, AttributeIndex::Return, "nonnull", 0)?;
    if let Some(n) = dereferenceable {
        b.add_call_attribute(object, AttributeIndex::Return, "dereferenceable", n)?;
    }
    let tag_slot = b.gep(tracked, object, &[b.const_int(i64t, -1)?], true, "")?;
    let store = b.store(tag, tag_slot)?;
    b.set_alignment(store, 8)?;
    b.set_unordered_atomic(store)?;
    decorate(b, store, Tbaa::Tag)?;
    Ok(object.as_value())
}

fn byte_gep<'m>(b: &Builder<'m>, base: Value<'m>, offset: Value<'m>) -> Result<Value<'m>> {
    Ok(b.gep(b.int_type(8)?, base, &[offset], true, "")?)
}

/// `llvm.memset` of `size` zero bytes at `dest`, 8-byte aligned.
fn memset<'m>(b: &Builder<'m>, dest: Value<'m>, size: Value<'m>) -> Result<()> {
    let space = dest.ty().address_space().unwrap_or(UNTRACKED);
    let i64t = b.int_type(64)?;
    let size = if size.ty() == i64t {
        size
    } else {
        b.const_int(i64t, size.const_int().unwrap_or(0))?
    };
    let ty = b.function_type(
        b.void_type(),
        &[dest.ty(), b.int_type(8)?, i64t, b.int_type(1)?],
        false,
    )?;
    let f = b.declare_function(&format!("llvm.memset.p{space}.i64"), ty)?;
    let call = b.call(
        ty,
        f,
        &[
            dest,
            b.const_int(b.int_type(8)?, 0)?,
            size,
            b.const_int(b.int_type(1)?, 0)?,
        ],
        &[],
        "",
    )?;
    b.add_call_attribute(call, AttributeIndex::Param(0), "align", 8)?;
    Ok(())
}
