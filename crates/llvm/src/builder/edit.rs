//! Changing existing IR: alignment, metadata, atomicity, names, uses, operands, erasing.

use std::ffi::c_uint;

use llvm_sys::core::{
    LLVMConstNull, LLVMGetMDKindIDInContext, LLVMGetPoison, LLVMInstructionRemoveFromParent,
    LLVMLabelTypeInContext, LLVMMDNodeInContext2, LLVMMDStringInContext2, LLVMMetadataAsValue,
    LLVMReplaceAllUsesWith, LLVMSetAlignment, LLVMSetMetadata, LLVMSetOperand, LLVMSetOrdering,
    LLVMSetValueName2, LLVMValueAsMetadata,
};
use llvm_sys::prelude::{LLVMMetadataRef, LLVMValueRef};
use llvm_sys::LLVMAtomicOrdering;

use super::check::{is_value_type, refuse};
use super::Builder;
use crate::error::Result;
use crate::ir::{Instruction, Metadata, Opcode, TypeKind, Use, Value, ValueKind};

impl<'m> Builder<'m> {
    /// Sets the alignment of an `alloca`, `load` or `store` to `bytes`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) for other instructions or if `bytes` is not a power of two.
    pub fn set_alignment(&self, inst: Instruction<'m>, bytes: u32) -> Result<()> {
        let raw = self.inst(inst)?;
        if !matches!(inst.opcode(), Opcode::Alloca | Opcode::Load | Opcode::Store) {
            return refuse(format!("cannot set the alignment of {}", inst.describe()));
        }
        if !bytes.is_power_of_two() {
            return refuse(format!("alignment {bytes} is not a power of two"));
        }
        // SAFETY: `raw` is a live alloca, load or store; the alignment is a power of two.
        unsafe { LLVMSetAlignment(raw, bytes) };
        Ok(())
    }

    /// Removes the instruction's metadata of kind `kind` (`"invariant.load"`, `"tbaa"`), if
    /// it has any.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `inst` is erased or belongs to another module, or the kind's name
    /// is too long.
    pub fn remove_metadata(&self, inst: Instruction<'m>, kind: &str) -> Result<()> {
        let raw = self.inst(inst)?;
        let id = self.metadata_kind(kind)?;
        // SAFETY: `raw` is a live instruction of this module; a null node removes the
        // attachment.
        unsafe { LLVMSetMetadata(raw, id, std::ptr::null_mut()) };
        Ok(())
    }

    /// Attaches `node` to `inst` as its metadata of kind `kind` (`"tbaa"`, ...), replacing
    /// what it had. The tree is built bottom up; equal nodes are the same node (LLVM uniques
    /// them), so a node written the way another pass wrote it is that pass's node.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `inst` is erased or belongs to another module,
    /// `node` is not a [`Metadata::Node`] or holds a [`Metadata::Other`] or a value that is not
    /// a constant of this module, or the kind's name is too long.
    pub fn set_metadata(
        &self,
        inst: Instruction<'m>,
        kind: &str,
        node: &Metadata<'m>,
    ) -> Result<()> {
        let raw = self.inst(inst)?;
        if !matches!(node, Metadata::Node(_)) {
            return refuse(format!("`{kind}` metadata must be a node"));
        }
        let id = self.metadata_kind(kind)?;
        let md = self.metadata(node)?;
        // SAFETY: `md` was made in this context just now.
        let as_value = unsafe { LLVMMetadataAsValue(self.ctx, md) };
        // SAFETY: `raw` is a live instruction of this module, `as_value` a node of its
        // context.
        unsafe { LLVMSetMetadata(raw, id, as_value) };
        Ok(())
    }

    fn metadata(&self, node: &Metadata<'m>) -> Result<LLVMMetadataRef> {
        match node {
            Metadata::String(text) => {
                // SAFETY: `self.ctx` is live and the text valid for its length.
                let md =
                    unsafe { LLVMMDStringInContext2(self.ctx, text.as_ptr().cast(), text.len()) };
                Ok(md)
            }
            Metadata::Node(ops) => {
                let mut raw = ops
                    .iter()
                    .map(|op| self.metadata(op))
                    .collect::<Result<Vec<_>>>()?;
                // SAFETY: `raw` holds `raw.len()` metadata of this context.
                Ok(unsafe { LLVMMDNodeInContext2(self.ctx, raw.as_mut_ptr(), raw.len()) })
            }
            Metadata::Value(value) => {
                if !value.is_constant() {
                    // An instruction's value in an attached node is not valid IR.
                    return refuse(format!("`{value}` in attached metadata is not a constant"));
                }
                let v = self.val(*value)?;
                // SAFETY: `v` is a live value of this module.
                Ok(unsafe { LLVMValueAsMetadata(v) })
            }
            Metadata::Other => refuse("cannot attach metadata of an unknown kind"),
        }
    }

    fn metadata_kind(&self, kind: &str) -> Result<c_uint> {
        let Ok(len) = c_uint::try_from(kind.len()) else {
            return refuse(format!("metadata kind `{kind}` is too long"));
        };
        // SAFETY: `self.ctx` is live and the name valid for `len` bytes.
        Ok(unsafe { LLVMGetMDKindIDInContext(self.ctx, kind.as_ptr().cast(), len) })
    }

    /// Makes a `load` or `store` atomic with `unordered` ordering (what a GC's readers of an
    /// object header need: no tearing, no ordering).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `inst` is not a load or store.
    pub fn set_unordered_atomic(&self, inst: Instruction<'m>) -> Result<()> {
        let raw = self.inst(inst)?;
        if !matches!(inst.opcode(), Opcode::Load | Opcode::Store) {
            return refuse(format!("cannot make {} atomic", inst.describe()));
        }
        // SAFETY: `raw` is a live load or store.
        unsafe { LLVMSetOrdering(raw, LLVMAtomicOrdering::LLVMAtomicOrderingUnordered) };
        Ok(())
    }

    /// Names `value` (an instruction, argument or block; LLVM adds a number on a clash).
    /// An empty name makes it unnamed.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) for values of type `void`, constants, and values of other modules.
    pub fn set_name(&self, value: impl Into<Value<'m>>, name: &str) -> Result<()> {
        let value = value.into();
        let raw = self.val(value)?;
        let ok = matches!(
            value.kind(),
            ValueKind::Instruction | ValueKind::Argument | ValueKind::BasicBlock
        ) && !value.ty().is_void();
        if !ok {
            return refuse(format!("cannot name `{value}`"));
        }
        // SAFETY: `raw` is a live, nameable value; the name is valid for its length.
        unsafe { LLVMSetValueName2(raw, name.as_ptr().cast(), name.len()) };
        Ok(())
    }

    /// Replaces every use of `old` (an instruction, argument or global of this module) by
    /// `new`. When `new` itself uses `old` (`%d = addrspacecast %old`), that use becomes a
    /// use of itself: use [`Builder::replace_uses_if`] to leave it out.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the types differ, `old` is another kind of value, or either
    /// belongs to another module or is erased.
    pub fn replace_all_uses_with(
        &self,
        old: impl Into<Value<'m>>,
        new: impl Into<Value<'m>>,
    ) -> Result<()> {
        let (old, new) = (old.into(), new.into());
        let (o, n) = self.replacement(old, new)?;
        if o != n {
            // SAFETY: both live, of the same type, in our module.
            unsafe { LLVMReplaceAllUsesWith(o, n) };
        }
        Ok(())
    }

    /// Replaces the uses of `old` in instructions for which `pred` is true by `new`, and
    /// returns how many were replaced. Uses in constants are left alone.
    ///
    /// # Errors
    ///
    /// As [`Builder::replace_all_uses_with`].
    pub fn replace_uses_if(
        &self,
        old: impl Into<Value<'m>>,
        new: impl Into<Value<'m>>,
        mut pred: impl FnMut(Use<'m>) -> bool,
    ) -> Result<usize> {
        let (old, new) = (old.into(), new.into());
        let (o, n) = self.replacement(old, new)?;
        if o == n {
            return Ok(0);
        }
        let mut count = 0;
        for u in old.uses() {
            if u.user.as_instruction().is_some() && pred(u) {
                // SAFETY: the user is a live instruction of our module whose operand
                // `u.operand` is `old`; `new` has the same type.
                unsafe { LLVMSetOperand(u.user.as_raw(), u.operand, n) };
                count += 1;
            }
        }
        Ok(count)
    }

    fn replacement(&self, old: Value<'m>, new: Value<'m>) -> Result<(LLVMValueRef, LLVMValueRef)> {
        let o = self.val(old)?;
        let n = self.val(new)?;
        if !matches!(old.kind(), ValueKind::Instruction | ValueKind::Argument) && !old.is_global() {
            return refuse(format!(
                "cannot replace the uses of `{old}`: not an instruction, argument or global"
            ));
        }
        if old.ty() != new.ty() {
            return refuse(format!(
                "cannot replace `{old}` by `{new}`: the types differ"
            ));
        }
        if old.is_global() && !new.is_constant() {
            // Constant expressions using a global can only refer to constants.
            return refuse(format!(
                "cannot replace the global `{old}` by `{new}`, which is not a constant"
            ));
        }
        Ok((o, n))
    }

    /// Sets operand `index` of `inst` to `value`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if there is no such operand or `value` has another type than the
    /// operand it replaces.
    pub fn set_operand(
        &self,
        inst: Instruction<'m>,
        index: u32,
        value: impl Into<Value<'m>>,
    ) -> Result<()> {
        let value = value.into();
        let raw = self.inst(inst)?;
        let Some(current) = inst.operand(index) else {
            return refuse(format!("{} has no operand {index}", inst.describe()));
        };
        if current.ty() != value.ty() {
            return refuse(format!(
                "operand {index} of {} cannot become `{value}`",
                inst.describe()
            ));
        }
        let v = self.val(value)?;
        // SAFETY: `raw` is a live instruction with operand `index` of `v`'s type.
        unsafe { LLVMSetOperand(raw, index, v) };
        Ok(())
    }

    /// Erases `inst`: detaches it from its block, points its operands at `poison` (so it
    /// uses nothing any more) and keeps it alive, unreachable from the IR, until the
    /// module is dropped. Metadata that referred to it (debug records) now refers to
    /// `poison`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `inst` is already erased, belongs to another module, or still
    /// has uses (replace them first).
    pub fn erase(&self, inst: Instruction<'m>) -> Result<()> {
        let raw = self.inst(inst)?;
        let users = inst.users();
        if !users.is_empty() {
            let list: Vec<String> = users.iter().take(3).map(|u| format!("`{u}`")).collect();
            return refuse(format!(
                "cannot erase {}: it is still used by {}{}",
                inst.describe(),
                list.join(", "),
                if users.len() > 3 { ", …" } else { "" }
            ));
        }
        let ty = inst.ty();
        if is_value_type(ty) {
            // SAFETY: `ty` is a first-class type of our context.
            let poison = unsafe { LLVMGetPoison(ty.as_raw()) };
            // There are no uses left; this redirects references from metadata.
            // SAFETY: `raw` is a live instruction of our module; `poison` has its type.
            unsafe { LLVMReplaceAllUsesWith(raw, poison) };
        }
        // SAFETY: `raw` is a live instruction in a block of our module, with no uses. It is
        // removed from its block but not freed: `Module` frees it (see below).
        unsafe { LLVMInstructionRemoveFromParent(raw) };
        // SAFETY: `self.ctx` is live.
        let label = unsafe { LLVMLabelTypeInContext(self.ctx) };
        // Every operand that is not metadata is replaced by a constant of its type that
        // never goes away, so nothing in the module (blocks included) lists the
        // instruction as a user any more.
        for i in 0..inst.num_operands() {
            let Some(op) = inst.operand(i) else { continue };
            let op_ty = op.ty();
            let filler = match op_ty.kind() {
                TypeKind::Metadata => continue,
                _ if op.is_undef() => continue,
                // SAFETY: `op_ty` is a token type of our context, whose null is `none`.
                TypeKind::Token => unsafe { LLVMConstNull(op_ty.as_raw()) },
                // SAFETY: `label` is the label type of our context.
                TypeKind::Label => unsafe { LLVMGetPoison(label) },
                // SAFETY: `op_ty` is a first-class type of our context.
                _ => unsafe { LLVMGetPoison(op_ty.as_raw()) },
            };
            // SAFETY: `raw` is a live instruction with more than `i` operands; `filler` has
            // the type of operand `i`.
            unsafe { LLVMSetOperand(raw, i, filler) };
        }
        // SAFETY: `raw` is an instruction of this module, removed from its block just
        // above, with no uses and no operands that can go away.
        unsafe { self.module.keep_erased(raw) };
        Ok(())
    }
}
