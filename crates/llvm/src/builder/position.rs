//! Where the next instruction goes: [`Builder::position_before`] and the other
//! `position_*` methods.

use llvm_sys::core::{LLVMPositionBuilderAtEnd, LLVMPositionBuilderBefore};

use super::check::refuse;
use super::Builder;
use crate::error::Result;
use crate::ir::{BasicBlock, Function, Instruction, Opcode};

/// Where the next instruction goes. Only handles the builder has checked are kept.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Position<'m> {
    Unset,
    Before(Instruction<'m>),
    AtEnd(BasicBlock<'m>),
}

impl<'m> Builder<'m> {
    /// Re-applies the position to LLVM's builder, or refuses when there is none or the
    /// instruction it was before has been erased.
    pub(super) fn ready(&self) -> Result<()> {
        match self.position.get() {
            Position::Unset => refuse("the builder has no position"),
            Position::Before(inst) => {
                if inst.is_erased() {
                    return refuse(format!(
                        "the builder is positioned before an erased instruction `{inst}`"
                    ));
                }
                // SAFETY: `inst` is a live instruction in a block of our module (checked
                // when the position was set, and not erased since).
                unsafe { LLVMPositionBuilderBefore(self.raw, inst.as_raw()) };
                Ok(())
            }
            Position::AtEnd(block) => {
                // SAFETY: `block` is a live block of our module (checked when the position
                // was set; blocks are never removed).
                unsafe { LLVMPositionBuilderAtEnd(self.raw, block.as_raw()) };
                Ok(())
            }
        }
    }

    /// The function the builder inserts into.
    pub(super) fn current_function(&self) -> Option<Function<'m>> {
        match self.position.get() {
            Position::Unset => None,
            Position::Before(inst) => inst.function(),
            Position::AtEnd(block) => Some(block.function()),
        }
    }

    /// Inserts before `inst`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `inst` is erased or belongs to another module.
    pub fn position_before(&self, inst: Instruction<'m>) -> Result<()> {
        self.inst(inst)?;
        self.position.set(Position::Before(inst));
        Ok(())
    }

    /// Inserts after `inst` (before the next instruction; at the end of the block after a
    /// terminator). After a `phi`, this is still among the `phi`s: see
    /// [`Builder::position_at_first_insertion_point`].
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `inst` is erased or belongs to another module.
    pub fn position_after(&self, inst: Instruction<'m>) -> Result<()> {
        self.inst(inst)?;
        match inst.next() {
            Some(next) => self.position_before(next),
            None => match inst.block() {
                Some(block) => self.position_at_end(block),
                None => refuse(format!("`{inst}` was erased")),
            },
        }
    }

    /// Inserts at the end of `block` (after its terminator, if it has one).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `block` belongs to another module.
    pub fn position_at_end(&self, block: BasicBlock<'m>) -> Result<()> {
        self.block(block)?;
        self.position.set(Position::AtEnd(block));
        Ok(())
    }

    /// Inserts at the very start of `block`, before its `phi`s: the place for new `phi`s.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `block` belongs to another module.
    pub fn position_at_start(&self, block: BasicBlock<'m>) -> Result<()> {
        match block.first_instruction() {
            Some(first) => self.position_before(first),
            None => self.position_at_end(block),
        }
    }

    /// Inserts after the `phi`s and exception-handling pads of `block`
    /// ([`BasicBlock::first_insertion_point`]).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `block` belongs to another module.
    pub fn position_at_first_insertion_point(&self, block: BasicBlock<'m>) -> Result<()> {
        match block.first_insertion_point() {
            Some(first) => self.position_before(first),
            None => self.position_at_end(block),
        }
    }

    /// Inserts in the entry block of `function`, after the `alloca`s that open it: where a
    /// GC frame's own `alloca` goes.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `function` is a declaration or belongs to another module.
    pub fn position_after_allocas(&self, function: Function<'m>) -> Result<()> {
        self.function(function)?;
        let Some(entry) = function.entry_block() else {
            return refuse(format!("@{} is a declaration", function.name()));
        };
        let mut next = entry.first_instruction();
        while let Some(inst) = next {
            if inst.opcode() != Opcode::Alloca {
                return self.position_before(inst);
            }
            next = inst.next();
        }
        self.position_at_end(entry)
    }
}
