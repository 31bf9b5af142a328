//! Metadata attached to instructions, read into a tree: [`Metadata`].

use std::ffi::c_uint;

use llvm_sys::core::{
    LLVMGetMDNodeNumOperands, LLVMGetMDNodeOperands, LLVMGetMDString, LLVMGetValueKind,
    LLVMIsAMDNode, LLVMIsAMDString,
};
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::LLVMValueKind;

use super::Value;
use crate::ffi::lossy;

/// Metadata attached to an instruction, as a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Metadata<'m> {
    /// `!"text"`.
    String(String),
    /// `!{...}`, its operands in order (a null operand reads as [`Metadata::Other`]).
    Node(Vec<Metadata<'m>>),
    /// A value wrapped as metadata (`i64 0`, `ptr @g`).
    Value(Value<'m>),
    /// Anything else, or a node nested too deep.
    Other,
}

/// The most metadata nodes one [`Metadata::read`] reads.
const MAX_NODES: usize = 4096;

impl<'m> Metadata<'m> {
    /// Reads `raw` into a tree, at most `depth` levels deep.
    ///
    /// # Safety
    ///
    /// `raw` is null, or metadata (as a value) of the context of the module borrowed for
    /// `'m`: an instruction's attachment, or an operand of such metadata.
    pub(super) unsafe fn read(raw: LLVMValueRef, depth: u32) -> Metadata<'m> {
        let mut path = Vec::new();
        let mut budget = MAX_NODES;
        // SAFETY: the caller's contract.
        unsafe { Self::read_on(raw, depth, &mut path, &mut budget) }
    }

    /// [`Metadata::read`], with the nodes being read above this one in `path`: a node met
    /// again on its own path (a self-referencing node) reads as [`Metadata::Other`], so a
    /// cycle is not unrolled to the depth limit; and at most `budget` nodes are read in all,
    /// so nodes shared many times over cannot make the tree explode.
    ///
    /// # Safety
    ///
    /// As for [`Metadata::read`].
    unsafe fn read_on(
        raw: LLVMValueRef,
        depth: u32,
        path: &mut Vec<LLVMValueRef>,
        budget: &mut usize,
    ) -> Metadata<'m> {
        if raw.is_null() || depth == 0 || *budget == 0 || path.contains(&raw) {
            return Metadata::Other;
        }
        *budget -= 1;
        // SAFETY: `raw` is a live value of the module's context (the contract).
        if !unsafe { LLVMIsAMDString(raw) }.is_null() {
            let mut len: c_uint = 0;
            // SAFETY: `raw` is a live `MDString`.
            let text = unsafe { LLVMGetMDString(raw, &mut len) };
            if text.is_null() {
                return Metadata::Other;
            }
            // SAFETY: the string is valid for `len` bytes while the context lives, and is
            // copied at once.
            return Metadata::String(unsafe { lossy(text, len as usize) });
        }
        // SAFETY: as above.
        if !unsafe { LLVMIsAMDNode(raw) }.is_null() {
            // SAFETY: `raw` is a live `MDNode`.
            let n = unsafe { LLVMGetMDNodeNumOperands(raw) } as usize;
            let mut ops: Vec<LLVMValueRef> = vec![std::ptr::null_mut(); n];
            // SAFETY: `raw` is a live `MDNode`; `ops` has room for its `n` operands.
            unsafe { LLVMGetMDNodeOperands(raw, ops.as_mut_ptr()) };
            path.push(raw);
            let node = Metadata::Node(
                ops.into_iter()
                    // SAFETY: each operand is null or metadata of the same context.
                    .map(|o| unsafe { Metadata::read_on(o, depth - 1, path, budget) })
                    .collect(),
            );
            path.pop();
            return node;
        }
        // SAFETY: as above.
        if unsafe { LLVMGetValueKind(raw) } == LLVMValueKind::LLVMMetadataAsValueValueKind {
            return Metadata::Other;
        }
        // SAFETY: what is left is a value wrapped as metadata (`ValueAsMetadata`): a
        // constant of the context or a value of the module.
        Metadata::Value(unsafe { Value::from_raw(raw) })
    }

    /// The operands of a node (none for anything else).
    #[must_use]
    pub fn operands(&self) -> &[Metadata<'m>] {
        match self {
            Metadata::Node(ops) => ops,
            _ => &[],
        }
    }

    /// The text of a string.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Metadata::String(s) => Some(s),
            _ => None,
        }
    }
}
