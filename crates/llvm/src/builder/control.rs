//! Control flow and integer arithmetic: new blocks, a block split before an instruction,
//! branches, `icmp`, the integer binary operators, and moving an instruction to another
//! block.

use llvm_sys::core::{
    LLVMBuildAdd, LLVMBuildAnd, LLVMBuildBr, LLVMBuildCondBr, LLVMBuildICmp, LLVMBuildLShr,
    LLVMBuildOr, LLVMBuildShl, LLVMBuildTrunc, LLVMGetInstructionParent,
    LLVMInsertBasicBlockInContext, LLVMInsertIntoBuilder, LLVMInstructionRemoveFromParent,
    LLVMIsATerminatorInst, LLVMPositionBuilderAtEnd,
};
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use llvm_sys::LLVMIntPredicate;

use super::check::{c_string, refuse};
use super::Builder;
use crate::error::Result;
use crate::ir::{BasicBlock, Instruction, IntPredicate, Opcode, Type, Value};

extern "C" {
    /// `src/cfg.cpp`: `BasicBlock::splitBasicBlock(inst)`.
    fn locus_llvm_split_block_before(inst: LLVMValueRef) -> LLVMBasicBlockRef;
}

/// An integer binary operator [`Builder::binary`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BinaryOp {
    /// `add`
    Add,
    /// `and`
    And,
    /// `lshr`
    LShr,
    /// `shl`
    Shl,
    /// `or`
    Or,
}

fn predicate(p: IntPredicate) -> LLVMIntPredicate {
    use LLVMIntPredicate as P;
    match p {
        IntPredicate::Eq => P::LLVMIntEQ,
        IntPredicate::Ne => P::LLVMIntNE,
        IntPredicate::Ugt => P::LLVMIntUGT,
        IntPredicate::Uge => P::LLVMIntUGE,
        IntPredicate::Ult => P::LLVMIntULT,
        IntPredicate::Ule => P::LLVMIntULE,
        IntPredicate::Sgt => P::LLVMIntSGT,
        IntPredicate::Sge => P::LLVMIntSGE,
        IntPredicate::Slt => P::LLVMIntSLT,
        IntPredicate::Sle => P::LLVMIntSLE,
    }
}

impl<'m> Builder<'m> {
    /// A new empty block named `name`, placed before `before` in its function.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `before` belongs to another module.
    pub fn insert_block_before(
        &self,
        before: BasicBlock<'m>,
        name: &str,
    ) -> Result<BasicBlock<'m>> {
        let raw = self.block(before)?;
        let c_name = c_string("name", name)?;
        // SAFETY: a live block of our module, in our context.
        let bb = unsafe { LLVMInsertBasicBlockInContext(self.ctx, raw, c_name.as_ptr()) };
        // SAFETY: a block LLVM just made in our module.
        Ok(unsafe { BasicBlock::from_raw(bb) })
    }

    /// Splits `inst`'s block before `inst`: a new block, right after it, gets `inst` and
    /// everything after it, the old block ends with `br` to it, and the `phi`s of the
    /// successors name the new block (LLVM's `splitBasicBlock`). Returns the new block.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `inst` is erased, of another module, or a `phi`
    /// or landing pad (a block cannot start after one of those), or if its block has no
    /// terminator yet.
    pub fn split_block_before(&self, inst: Instruction<'m>) -> Result<BasicBlock<'m>> {
        let raw = self.inst(inst)?;
        if matches!(inst.opcode(), Opcode::Phi | Opcode::LandingPad) {
            return refuse(format!("cannot split a block before {}", inst.describe()));
        }
        // LLVM's split moves everything up to the terminator: a block under construction
        // (no terminator yet) cannot be split.
        if inst.block().and_then(|b| b.terminator()).is_none() {
            return refuse(format!(
                "cannot split before {}: its block has no terminator",
                inst.describe()
            ));
        }
        // SAFETY: a live instruction in a block of our module that ends in a terminator,
        // not a phi or pad.
        let bb = unsafe { locus_llvm_split_block_before(raw) };
        // SAFETY: the block LLVM just made.
        Ok(unsafe { BasicBlock::from_raw(bb) })
    }

    /// `br label %dest` at the builder's position.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `dest` is of another module or the builder has
    /// no position.
    pub fn br(&self, dest: BasicBlock<'m>) -> Result<Instruction<'m>> {
        let d = self.block(dest)?;
        self.ready()?;
        // SAFETY: positioned builder, a block of our module.
        let inst = unsafe { LLVMBuildBr(self.raw, d) };
        // SAFETY: an instruction LLVM just inserted.
        Ok(unsafe { Instruction::from_raw(inst) })
    }

    /// `br i1 %cond, label %then, label %otherwise` at the builder's position.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `cond` is not an `i1` or a handle is of another
    /// module.
    pub fn cond_br(
        &self,
        cond: impl Into<Value<'m>>,
        then: BasicBlock<'m>,
        otherwise: BasicBlock<'m>,
    ) -> Result<Instruction<'m>> {
        let cond = cond.into();
        if cond.ty().int_width() != Some(1) {
            return refuse(format!("the condition `{cond}` is not an i1"));
        }
        let (c, t, e) = (self.val(cond)?, self.block(then)?, self.block(otherwise)?);
        self.ready()?;
        // SAFETY: positioned builder, an i1 and blocks of our module.
        let inst = unsafe { LLVMBuildCondBr(self.raw, c, t, e) };
        // SAFETY: an instruction LLVM just inserted.
        Ok(unsafe { Instruction::from_raw(inst) })
    }

    /// `icmp pred lhs, rhs` on integers or pointers of one type.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the operands differ in type or are neither
    /// integers nor pointers.
    pub fn icmp(
        &self,
        pred: IntPredicate,
        lhs: impl Into<Value<'m>>,
        rhs: impl Into<Value<'m>>,
        name: &str,
    ) -> Result<Value<'m>> {
        let (lhs, rhs) = (lhs.into(), rhs.into());
        let scalar = lhs.ty().scalar();
        if lhs.ty() != rhs.ty() || !(scalar.is_integer() || scalar.is_pointer()) {
            return refuse(format!("cannot compare `{lhs}` with `{rhs}`"));
        }
        let (l, r) = (self.val(lhs)?, self.val(rhs)?);
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands of one integer or pointer type.
        let value = unsafe { LLVMBuildICmp(self.raw, predicate(pred), l, r, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// `op lhs, rhs` on integers (or vectors of integers) of one type.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the operands differ in type or are not integers.
    pub fn binary(
        &self,
        op: BinaryOp,
        lhs: impl Into<Value<'m>>,
        rhs: impl Into<Value<'m>>,
        name: &str,
    ) -> Result<Value<'m>> {
        let (lhs, rhs) = (lhs.into(), rhs.into());
        if lhs.ty() != rhs.ty() || !lhs.ty().scalar().is_integer() {
            return refuse(format!("cannot {op:?} `{lhs}` and `{rhs}`"));
        }
        let (l, r) = (self.val(lhs)?, self.val(rhs)?);
        let c_name = c_string("name", name)?;
        self.ready()?;
        let build = match op {
            BinaryOp::Add => LLVMBuildAdd,
            BinaryOp::And => LLVMBuildAnd,
            BinaryOp::LShr => LLVMBuildLShr,
            BinaryOp::Shl => LLVMBuildShl,
            BinaryOp::Or => LLVMBuildOr,
        };
        // SAFETY: positioned builder; operands of one integer type.
        let value = unsafe { build(self.raw, l, r, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// `trunc value to ty`, integers only.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) unless `value` is an integer wider than `ty`.
    pub fn trunc(
        &self,
        value: impl Into<Value<'m>>,
        ty: Type<'m>,
        name: &str,
    ) -> Result<Value<'m>> {
        let value = value.into();
        match (value.ty().int_width(), ty.int_width()) {
            (Some(from), Some(to)) if to < from => {}
            _ => return refuse(format!("cannot truncate `{value}` to `{ty}`")),
        }
        let (v, t) = (self.val(value)?, self.ty(ty)?);
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; a wider integer to a narrower integer type.
        let value = unsafe { LLVMBuildTrunc(self.raw, v, t, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// Moves `inst` to the end of `block` (after its terminator, if it has one: give it
    /// one after). `inst` keeps its uses and operands.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if a handle is erased or of another module, or
    /// `inst` is a `phi`, a terminator, or already the last of `block`.
    pub fn move_to_end(&self, inst: Instruction<'m>, block: BasicBlock<'m>) -> Result<()> {
        let raw = self.inst(inst)?;
        let bb = self.block(block)?;
        // SAFETY: a live instruction.
        let is_terminator = !unsafe { LLVMIsATerminatorInst(raw) }.is_null();
        if inst.opcode() == Opcode::Phi || is_terminator {
            return refuse(format!("cannot move {}", inst.describe()));
        }
        // SAFETY: a live instruction, in a block (checked: not erased).
        if unsafe { LLVMGetInstructionParent(raw) }.is_null() {
            return refuse(format!("{} is in no block", inst.describe()));
        }
        // SAFETY: a live instruction in a block; reinserted right below.
        unsafe { LLVMInstructionRemoveFromParent(raw) };
        // SAFETY: a live block of our module; the builder's own position is re-applied by
        // the next `ready`.
        unsafe { LLVMPositionBuilderAtEnd(self.raw, bb) };
        // SAFETY: the detached instruction, into a block of the same module.
        unsafe { LLVMInsertIntoBuilder(self.raw, raw) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::BinaryOp;
    use crate::builder::Builder;
    use crate::ir::{IntPredicate, Opcode};
    use crate::{Context, Module};

    /// `f(x) = x + 1`, then a split before `ret` and a fast/slow diamond in front of it:
    /// the result verifies, and a block without a terminator is refused a split.
    #[test]
    fn a_split_block_takes_a_diamond_and_verifies() -> crate::error::Result<()> {
        let ctx = Context::new();
        let module = Module::parse_ir(
            &ctx,
            "split.ll",
            b"define i64 @f(i64 %x) {\n  %y = add i64 %x, 1\n  ret i64 %y\n}\n",
        )?;
        let Some(f) = module.function("f") else {
            panic!("@f is defined above");
        };
        let insts = f.instructions();
        let (add, ret) = (insts[0], insts[1]);
        let b = Builder::new(&module);
        let tail = b.split_block_before(ret)?;
        assert_eq!(f.blocks().len(), 2);
        assert_eq!(
            tail.first_instruction().map(|i| i.opcode()),
            Some(Opcode::Ret)
        );
        // The head now ends in `br %tail`: make it a conditional branch through `slow`.
        let head = f.blocks()[0];
        let Some(br) = head.terminator() else {
            panic!("the split leaves a branch");
        };
        let slow = b.insert_block_before(tail, "slow")?;
        b.position_at_end(slow)?;
        b.br(tail)?;
        b.position_before(br)?;
        let i64t = b.int_type(64)?;
        let ten = b.const_int(i64t, 10)?;
        let small = b.icmp(IntPredicate::Ult, add.as_value(), ten, "small")?;
        b.cond_br(small, tail, slow)?;
        b.erase(br)?;
        module.verify()?;
        // Mismatched operand types are refused before LLVM sees them.
        let i32t = b.int_type(32)?;
        let one = b.const_int(i32t, 1)?;
        assert!(b.binary(BinaryOp::Add, add.as_value(), one, "").is_err());
        // A block under construction cannot be split.
        let open = b.insert_block_before(tail, "open")?;
        b.position_at_end(open)?;
        let two = b.binary(BinaryOp::Shl, add.as_value(), b.const_int(i64t, 1)?, "two")?;
        let Some(two) = two.as_instruction() else {
            panic!("an instruction");
        };
        assert!(b.split_block_before(two).is_err());
        Ok(())
    }
}
