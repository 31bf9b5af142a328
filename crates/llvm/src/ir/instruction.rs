//! Instructions: [`Instruction`], its place in a block, its operands, and what each kind
//! of instruction carries (`phi` incoming pairs, `alloca` types, masks, indices,
//! predicates, metadata).

use std::ffi::c_uint;
use std::fmt;
use std::marker::PhantomData;

use llvm_sys::core::{
    LLVMCountIncoming, LLVMGetAlignment, LLVMGetAllocatedType, LLVMGetGEPSourceElementType,
    LLVMGetICmpPredicate, LLVMGetIncomingBlock, LLVMGetIncomingValue, LLVMGetIndices,
    LLVMGetInstructionOpcode, LLVMGetInstructionParent, LLVMGetMDKindIDInContext, LLVMGetMaskValue,
    LLVMGetMetadata, LLVMGetNextInstruction, LLVMGetNumIndices, LLVMGetNumMaskElements,
    LLVMGetNumSuccessors, LLVMGetOperand, LLVMGetPreviousInstruction, LLVMGetSuccessor,
    LLVMGetTypeContext, LLVMIsATerminatorInst, LLVMIsInBounds, LLVMTypeOf,
};
use llvm_sys::prelude::LLVMValueRef;

use super::values::{is_attached, num_operands};
use super::{BasicBlock, Call, Function, IntPredicate, Metadata, Opcode, Type, Use, Value};
use crate::ffi::flag;

/// An instruction. It stays a valid handle after it is erased (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Instruction<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> Instruction<'m> {
    /// A handle to `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live instruction of the module borrowed for `'m`, in a block or erased
    /// through the builder (see the handle invariant in [`crate::ir`]).
    pub(crate) unsafe fn from_raw(raw: LLVMValueRef) -> Self {
        Instruction {
            raw,
            _module: PhantomData,
        }
    }

    /// A handle to `raw`, `None` for null.
    ///
    /// # Safety
    ///
    /// `raw` is null or as for [`Instruction::from_raw`].
    pub(crate) unsafe fn from_nullable(raw: LLVMValueRef) -> Option<Self> {
        // SAFETY: non-null, so a live instruction of the module (the contract).
        (!raw.is_null()).then(|| unsafe { Instruction::from_raw(raw) })
    }

    pub(crate) fn as_raw(self) -> LLVMValueRef {
        self.raw
    }

    /// The instruction as a value (its result, for instructions that have one).
    #[must_use]
    pub fn as_value(self) -> Value<'m> {
        // SAFETY: an instruction is a value of the same module.
        unsafe { Value::from_raw(self.raw) }
    }

    /// The opcode.
    #[must_use]
    pub fn opcode(self) -> Opcode {
        // SAFETY: `self.raw` is a live instruction.
        Opcode::from_llvm(unsafe { LLVMGetInstructionOpcode(self.raw) })
    }

    /// The result type (`void` when the instruction produces no value).
    #[must_use]
    pub fn ty(self) -> Type<'m> {
        self.as_value().ty()
    }

    /// The result's name without `%` (empty when unnamed).
    #[must_use]
    pub fn name(self) -> String {
        self.as_value().name()
    }

    /// The instruction as LLVM prints it (`%d = addrspacecast ptr addrspace(10) %o to
    /// ptr addrspace(11)`).
    #[must_use]
    pub fn print(self) -> String {
        self.as_value().print()
    }

    /// Whether the instruction was erased (is no longer in a block).
    #[must_use]
    pub fn is_erased(self) -> bool {
        // SAFETY: `self.raw` is a live instruction.
        !unsafe { is_attached(self.raw) }
    }

    /// The block holding the instruction; `None` once erased.
    #[must_use]
    pub fn block(self) -> Option<BasicBlock<'m>> {
        // SAFETY: `self.raw` is a live instruction.
        let parent = unsafe { LLVMGetInstructionParent(self.raw) };
        // SAFETY: null once erased, else a live block of the module.
        unsafe { BasicBlock::from_nullable(parent) }
    }

    /// The function holding the instruction; `None` once erased.
    #[must_use]
    pub fn function(self) -> Option<Function<'m>> {
        self.block().map(BasicBlock::function)
    }

    /// The next instruction in the block.
    #[must_use]
    pub fn next(self) -> Option<Instruction<'m>> {
        if self.is_erased() {
            return None;
        }
        // SAFETY: `self.raw` is a live instruction in a block (LLVM needs the parent).
        let next = unsafe { LLVMGetNextInstruction(self.raw) };
        // SAFETY: null or a live instruction of the same block.
        unsafe { Instruction::from_nullable(next) }
    }

    /// The previous instruction in the block.
    #[must_use]
    pub fn prev(self) -> Option<Instruction<'m>> {
        if self.is_erased() {
            return None;
        }
        // SAFETY: `self.raw` is a live instruction in a block (LLVM needs the parent).
        let prev = unsafe { LLVMGetPreviousInstruction(self.raw) };
        // SAFETY: null or a live instruction of the same block.
        unsafe { Instruction::from_nullable(prev) }
    }

    /// The instruction's position in its block, from 0; `None` once erased.
    #[must_use]
    pub fn index_in_block(self) -> Option<usize> {
        self.block()?;
        let mut index = 0;
        let mut prev = self.prev();
        while let Some(p) = prev {
            index += 1;
            prev = p.prev();
        }
        Some(index)
    }

    /// Whether `self` comes strictly before `other` in the same block; `None` when they
    /// are not in the same block (or either is erased).
    #[must_use]
    pub fn comes_before(self, other: Instruction<'m>) -> Option<bool> {
        let block = self.block()?;
        if other.block()? != block {
            return None;
        }
        let mut next = self.next();
        while let Some(n) = next {
            if n == other {
                return Some(true);
            }
            next = n.next();
        }
        Some(false)
    }

    /// The operands (for a call: arguments, bundle values, then the callee; for a branch
    /// the condition and the target blocks as values).
    #[must_use]
    pub fn operands(self) -> Vec<Value<'m>> {
        self.as_value().operands()
    }

    /// Operand `index`.
    #[must_use]
    pub fn operand(self, index: u32) -> Option<Value<'m>> {
        if index >= self.num_operands() {
            return None;
        }
        // SAFETY: `self.raw` is a live instruction with more than `index` operands.
        let operand = unsafe { LLVMGetOperand(self.raw, index) };
        // SAFETY: null or an operand: a value of the module or its context.
        unsafe { Value::from_nullable(operand) }
    }

    /// The number of operands.
    #[must_use]
    pub fn num_operands(self) -> u32 {
        // SAFETY: `self.raw` is a live instruction.
        unsafe { num_operands(self.raw) }
    }

    /// The uses of the instruction's result (see [`Value::uses`]).
    #[must_use]
    pub fn uses(self) -> Vec<Use<'m>> {
        self.as_value().uses()
    }

    /// The distinct users of the instruction's result.
    #[must_use]
    pub fn users(self) -> Vec<Value<'m>> {
        self.as_value().users()
    }

    /// Whether this is a terminator (`ret`, `br`, `switch`, `invoke`, `unreachable`, …).
    #[must_use]
    pub fn is_terminator(self) -> bool {
        // SAFETY: `self.raw` is a live instruction.
        !unsafe { LLVMIsATerminatorInst(self.raw) }.is_null()
    }

    /// The successor blocks of a terminator, in order and with repeats; empty for other
    /// instructions and once erased.
    #[must_use]
    pub fn successors(self) -> Vec<BasicBlock<'m>> {
        if !self.is_terminator() || self.is_erased() {
            return Vec::new();
        }
        // SAFETY: `self.raw` is a live terminator in a block.
        let n = unsafe { LLVMGetNumSuccessors(self.raw) };
        // SAFETY: `self.raw` has `n` successors, each a live block of the same function.
        unsafe { super::read_indexed(self.raw, n, LLVMGetSuccessor, BasicBlock::from_nullable) }
    }

    /// The incoming `(value, block)` pairs of a `phi`, in order; empty for other
    /// instructions.
    #[must_use]
    pub fn phi_incoming(self) -> Vec<(Value<'m>, BasicBlock<'m>)> {
        if self.opcode() != Opcode::Phi {
            return Vec::new();
        }
        // SAFETY: `self.raw` is a live `phi`; indices are below the count.
        let n = unsafe { LLVMCountIncoming(self.raw) };
        (0..n)
            .filter_map(|i| {
                // SAFETY: `self.raw` is a live `phi` with more than `i` incoming pairs.
                let value = unsafe { LLVMGetIncomingValue(self.raw, i) };
                // SAFETY: null or an operand: a value of the module or its context.
                let value = unsafe { Value::from_nullable(value) }?;
                // SAFETY: as for the value.
                let block = unsafe { LLVMGetIncomingBlock(self.raw, i) };
                // SAFETY: null or a live block of the same function.
                let block = unsafe { BasicBlock::from_nullable(block) }?;
                Some((value, block))
            })
            .collect()
    }

    /// The instruction as a call site, if it is a `call`, `invoke` or `callbr`.
    #[must_use]
    pub fn as_call(self) -> Option<Call<'m>> {
        Call::of(self)
    }

    /// The type an `alloca` allocates.
    #[must_use]
    pub fn allocated_type(self) -> Option<Type<'m>> {
        if self.opcode() != Opcode::Alloca {
            return None;
        }
        // SAFETY: `self.raw` is a live `alloca`.
        let ty = unsafe { LLVMGetAllocatedType(self.raw) };
        // SAFETY: null or a type of the module's context.
        unsafe { Type::from_nullable(ty) }
    }

    /// The mask of a `shufflevector`: for each result lane, the lane of the two operands
    /// joined end to end that it takes, or `None` where the mask is `poison`/`undef`.
    #[must_use]
    pub fn shuffle_mask(self) -> Option<Vec<Option<u32>>> {
        if self.opcode() != Opcode::ShuffleVector {
            return None;
        }
        // SAFETY: `self.raw` is a live `shufflevector`.
        let n = unsafe { LLVMGetNumMaskElements(self.raw) };
        let lanes = (0..n)
            .map(|i| {
                // SAFETY: `self.raw` is a live `shufflevector` and `i` is below its mask's
                // length.
                let m = unsafe { LLVMGetMaskValue(self.raw, i) };
                u32::try_from(m).ok()
            })
            .collect();
        Some(lanes)
    }

    /// The instruction's metadata of kind `kind` (`"tbaa"`, `"alias.scope"`,
    /// `"invariant.load"`), read into a tree (nodes nested at most 16 deep, at most 4096 in
    /// all; deeper or further ones, and a node met again inside itself, read as
    /// [`Metadata::Other`]). Asking registers `kind`'s name in the context.
    #[must_use]
    pub fn metadata(self, kind: &str) -> Option<Metadata<'m>> {
        let len = c_uint::try_from(kind.len()).ok()?;
        // SAFETY: `self.raw` is a live instruction.
        let ty = unsafe { LLVMTypeOf(self.raw) };
        // SAFETY: `ty` is a live type; its context is live with the instruction.
        let ctx = unsafe { LLVMGetTypeContext(ty) };
        // SAFETY: `ctx` is live; the name is valid for `len` bytes.
        let id = unsafe { LLVMGetMDKindIDInContext(ctx, kind.as_ptr().cast(), len) };
        // SAFETY: `self.raw` is a live instruction.
        let md = unsafe { LLVMGetMetadata(self.raw, id) };
        // SAFETY: `md` is the instruction's attachment, metadata of the module's context.
        (!md.is_null()).then(|| unsafe { Metadata::read(md, 16) })
    }

    /// The alignment in bytes of an `alloca`, `load` or `store` (0 if none is given).
    #[must_use]
    pub fn alignment(self) -> Option<u32> {
        if !matches!(self.opcode(), Opcode::Alloca | Opcode::Load | Opcode::Store) {
            return None;
        }
        // SAFETY: `self.raw` is a live alloca, load or store, the kinds LLVMGetAlignment
        // accepts.
        Some(unsafe { LLVMGetAlignment(self.raw) })
    }

    /// The source element type of a `getelementptr`.
    #[must_use]
    pub fn gep_source_type(self) -> Option<Type<'m>> {
        if self.opcode() != Opcode::GetElementPtr {
            return None;
        }
        // SAFETY: `self.raw` is a live `getelementptr`.
        let ty = unsafe { LLVMGetGEPSourceElementType(self.raw) };
        // SAFETY: null or a type of the module's context.
        unsafe { Type::from_nullable(ty) }
    }

    /// Whether a `getelementptr` is `inbounds` (false for other instructions).
    #[must_use]
    pub fn is_inbounds(self) -> bool {
        // SAFETY: `self.raw` is a live `getelementptr`.
        self.opcode() == Opcode::GetElementPtr && flag(unsafe { LLVMIsInBounds(self.raw) })
    }

    /// The constant indices of an `extractvalue` or `insertvalue`.
    #[must_use]
    pub fn aggregate_indices(self) -> Option<Vec<u32>> {
        if !matches!(self.opcode(), Opcode::ExtractValue | Opcode::InsertValue) {
            return None;
        }
        // SAFETY: `self.raw` is a live `extractvalue` or `insertvalue`.
        let n = unsafe { LLVMGetNumIndices(self.raw) } as usize;
        // SAFETY: as above.
        let ptr = unsafe { LLVMGetIndices(self.raw) };
        if ptr.is_null() || n == 0 {
            return Some(Vec::new());
        }
        // SAFETY: the index array holds `n` entries while the instruction lives, and is
        // copied at once.
        Some(unsafe { std::slice::from_raw_parts(ptr, n) }.to_vec())
    }

    /// The predicate of an `icmp`.
    #[must_use]
    pub fn icmp_predicate(self) -> Option<IntPredicate> {
        if self.opcode() != Opcode::ICmp {
            return None;
        }
        // SAFETY: `self.raw` is a live `icmp`, whose predicate is a valid integer one.
        let predicate = unsafe { LLVMGetICmpPredicate(self.raw) };
        Some(IntPredicate::from_llvm(predicate))
    }

    /// Where the instruction is, for diagnostics: ``function @f, block %bb, instruction
    /// `%x = load ptr, ptr %p` `` (``erased instruction `...` `` once erased).
    #[must_use]
    pub fn describe(self) -> String {
        match self.block() {
            Some(block) => format!(
                "function @{}, block {}, instruction `{}`",
                block.function().name(),
                block.label(),
                self.print()
            ),
            None => format!("erased instruction `{}`", self.print()),
        }
    }
}

impl fmt::Display for Instruction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.print())
    }
}

impl fmt::Debug for Instruction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instruction({})", self.print())
    }
}
