//! Basic blocks: [`BasicBlock`].

use std::fmt;
use std::marker::PhantomData;

use llvm_sys::core::{
    LLVMBasicBlockAsValue, LLVMGetBasicBlockParent, LLVMGetBasicBlockTerminator,
    LLVMGetFirstInstruction, LLVMGetLastInstruction,
};
use llvm_sys::prelude::LLVMBasicBlockRef;

use super::{Function, Instruction, Opcode, Value};

/// A basic block of a function.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BasicBlock<'m> {
    raw: LLVMBasicBlockRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> BasicBlock<'m> {
    /// A handle to `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live block of a function of the module borrowed for `'m` (see the handle
    /// invariant in [`crate::ir`]).
    pub(crate) unsafe fn from_raw(raw: LLVMBasicBlockRef) -> Self {
        BasicBlock {
            raw,
            _module: PhantomData,
        }
    }

    /// A handle to `raw`, `None` for null.
    ///
    /// # Safety
    ///
    /// `raw` is null or as for [`BasicBlock::from_raw`].
    pub(crate) unsafe fn from_nullable(raw: LLVMBasicBlockRef) -> Option<Self> {
        // SAFETY: non-null, so a live block of the module (the contract).
        (!raw.is_null()).then(|| unsafe { BasicBlock::from_raw(raw) })
    }

    pub(crate) fn as_raw(self) -> LLVMBasicBlockRef {
        self.raw
    }

    /// The block as a value (of type `label`).
    #[must_use]
    pub fn as_value(self) -> Value<'m> {
        // SAFETY: `self.raw` is a live block.
        let value = unsafe { LLVMBasicBlockAsValue(self.raw) };
        // SAFETY: the same block, as a value of the module.
        unsafe { Value::from_raw(value) }
    }

    /// The block's name without `%` (empty for a numbered block such as `%1`).
    #[must_use]
    pub fn name(self) -> String {
        self.as_value().name()
    }

    /// The function the block belongs to.
    #[must_use]
    pub fn function(self) -> Function<'m> {
        // SAFETY: `self.raw` is a live block.
        let parent = unsafe { LLVMGetBasicBlockParent(self.raw) };
        // SAFETY: blocks are never detached from functions: a live function of the module.
        unsafe { Function::from_raw(parent) }
    }

    /// The block's instructions, in order.
    #[must_use]
    pub fn instructions(self) -> Vec<Instruction<'m>> {
        let mut out = Vec::new();
        let mut next = self.first_instruction();
        while let Some(inst) = next {
            out.push(inst);
            next = inst.next();
        }
        out
    }

    /// The first instruction, if the block has any.
    #[must_use]
    pub fn first_instruction(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live block.
        let inst = unsafe { LLVMGetFirstInstruction(self.raw) };
        // SAFETY: null or a live instruction of this block.
        unsafe { Instruction::from_nullable(inst) }
    }

    /// The last instruction, if the block has any.
    #[must_use]
    pub fn last_instruction(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live block.
        let inst = unsafe { LLVMGetLastInstruction(self.raw) };
        // SAFETY: null or a live instruction of this block.
        unsafe { Instruction::from_nullable(inst) }
    }

    /// The terminator; `None` while a block under construction has none.
    #[must_use]
    pub fn terminator(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live block.
        let inst = unsafe { LLVMGetBasicBlockTerminator(self.raw) };
        // SAFETY: null or a live instruction of this block.
        unsafe { Instruction::from_nullable(inst) }
    }

    /// The successors, in the terminator's order, repeats included (a `switch` with two
    /// cases to one block names it twice).
    #[must_use]
    pub fn successors(self) -> Vec<BasicBlock<'m>> {
        self.terminator()
            .map(Instruction::successors)
            .unwrap_or_default()
    }

    /// The `phi` instructions at the top of the block.
    #[must_use]
    pub fn phis(self) -> Vec<Instruction<'m>> {
        self.instructions()
            .into_iter()
            .take_while(|i| i.opcode() == Opcode::Phi)
            .collect()
    }

    /// The first instruction that is not a `phi`.
    #[must_use]
    pub fn first_non_phi(self) -> Option<Instruction<'m>> {
        let mut next = self.first_instruction();
        while let Some(inst) = next {
            if inst.opcode() != Opcode::Phi {
                return Some(inst);
            }
            next = inst.next();
        }
        None
    }

    /// The first instruction before which ordinary code may be inserted: after the `phi`s
    /// and any exception-handling pad (`landingpad`, `catchpad`, `cleanuppad`,
    /// `catchswitch`) — LLVM's `getFirstInsertionPt`.
    #[must_use]
    pub fn first_insertion_point(self) -> Option<Instruction<'m>> {
        let mut next = self.first_instruction();
        while let Some(inst) = next {
            if !matches!(
                inst.opcode(),
                Opcode::Phi
                    | Opcode::LandingPad
                    | Opcode::CatchPad
                    | Opcode::CleanupPad
                    | Opcode::CatchSwitch
            ) {
                return Some(inst);
            }
            next = inst.next();
        }
        None
    }

    /// A name for messages: `%name`, or `%<n>` with the block's position in its function
    /// for a numbered block.
    #[must_use]
    pub fn label(self) -> String {
        let name = self.name();
        if !name.is_empty() {
            return format!("%{name}");
        }
        let index = self
            .function()
            .blocks()
            .iter()
            .position(|b| *b == self)
            .unwrap_or(0);
        format!("%<block {index}>")
    }
}

impl fmt::Debug for BasicBlock<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BasicBlock({})", self.label())
    }
}
