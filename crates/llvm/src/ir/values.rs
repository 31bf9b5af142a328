//! Values: [`Value`], its [`ValueKind`], its [`Use`]s, and what a value knows when it is
//! a constant (integers, `null`, `undef`, constant expressions).

use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;

use llvm_sys::core::{
    LLVMConstIntGetSExtValue, LLVMConstIntGetZExtValue, LLVMGetConstOpcode, LLVMGetFirstUse,
    LLVMGetInstructionParent, LLVMGetNextUse, LLVMGetNumOperands, LLVMGetOperand,
    LLVMGetOperandUse, LLVMGetParamParent, LLVMGetUser, LLVMGetValueKind, LLVMIsAArgument,
    LLVMIsAConstant, LLVMIsAConstantExpr, LLVMIsAConstantInt, LLVMIsAFunction, LLVMIsAGlobalValue,
    LLVMIsAGlobalVariable, LLVMIsAInstruction, LLVMIsAUser, LLVMIsGlobalConstant, LLVMIsNull,
    LLVMIsPoison, LLVMIsUndef, LLVMTypeOf, LLVMValueAsBasicBlock, LLVMValueIsBasicBlock,
};
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::LLVMValueKind;

use super::{BasicBlock, Call, Function, Instruction, Opcode, Type};
use crate::ffi::{flag, print_value, value_name};

/// Whether `raw` (an instruction) is in a block, that is, not erased.
///
/// # Safety
///
/// `raw` is a live instruction.
pub(super) unsafe fn is_attached(raw: LLVMValueRef) -> bool {
    // SAFETY: `raw` is a live instruction (this function's contract).
    !unsafe { LLVMGetInstructionParent(raw) }.is_null()
}

/// The number of operands of `raw`: 0 unless it is a `User` (instruction or constant).
///
/// # Safety
///
/// `raw` is a live value.
pub(crate) unsafe fn num_operands(raw: LLVMValueRef) -> u32 {
    // SAFETY: `raw` is a live value (this function's contract).
    let is_user = !unsafe { LLVMIsAUser(raw) }.is_null();
    if !is_user {
        return 0;
    }
    // SAFETY: `raw` is a live `User`, the only kind `LLVMGetNumOperands` accepts.
    let n = unsafe { LLVMGetNumOperands(raw) };
    u32::try_from(n).unwrap_or(0)
}

/// What kind of value a [`Value`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueKind {
    /// A function parameter.
    Argument,
    /// A basic block used as a value (branch targets).
    BasicBlock,
    /// An instruction.
    Instruction,
    /// A function (a constant: its address).
    Function,
    /// A global variable.
    GlobalVariable,
    /// A global alias.
    GlobalAlias,
    /// A global ifunc.
    GlobalIFunc,
    /// An integer constant.
    ConstantInt,
    /// A floating-point constant.
    ConstantFloat,
    /// `null` of some pointer type.
    ConstantPointerNull,
    /// `zeroinitializer` of an aggregate or vector type.
    ConstantAggregateZero,
    /// A constant array, struct or vector, including packed data arrays and vectors.
    ConstantAggregate,
    /// A constant expression (`addrspacecast (ptr @g to ptr addrspace(10))`).
    ConstantExpr,
    /// `undef`.
    Undef,
    /// `poison`.
    Poison,
    /// `none` of type token.
    ConstantTokenNone,
    /// `blockaddress(@f, %bb)`.
    BlockAddress,
    /// Inline assembly used as a callee.
    InlineAsm,
    /// Metadata used as an operand (`metadata !0`).
    Metadata,
    /// Any other constant (`dso_local_equivalent`, `no_cfi`, `ptrauth`, target `none`).
    OtherConstant,
}

/// Any LLVM value: an argument, instruction, constant, global or basic block.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Value<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

/// One use of a value: operand `operand` of `user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Use<'m> {
    /// The instruction or constant that has the value as an operand.
    pub user: Value<'m>,
    /// The operand's index in `user` (as for [`Value::operands`]).
    pub operand: u32,
}

impl<'m> Value<'m> {
    /// A handle to `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live LLVM value of the module borrowed for `'m`, or a constant, type or
    /// metadata of its context (see the handle invariant in [`crate::ir`]).
    pub(crate) unsafe fn from_raw(raw: LLVMValueRef) -> Self {
        Value {
            raw,
            _module: PhantomData,
        }
    }

    /// A handle to `raw`, `None` for null.
    ///
    /// # Safety
    ///
    /// `raw` is null or as for [`Value::from_raw`].
    pub(crate) unsafe fn from_nullable(raw: LLVMValueRef) -> Option<Self> {
        // SAFETY: non-null, so a live value of the module or its context (the contract).
        (!raw.is_null()).then(|| unsafe { Value::from_raw(raw) })
    }

    pub(crate) fn as_raw(self) -> LLVMValueRef {
        self.raw
    }

    /// What kind of value this is.
    #[must_use]
    pub fn kind(self) -> ValueKind {
        // SAFETY: `self.raw` is a live value. `LLVMGetValueKind` reports some constants
        // the C API does not name as instructions, so instructions are asked for directly.
        if !unsafe { LLVMIsAInstruction(self.raw) }.is_null() {
            return ValueKind::Instruction;
        }
        // SAFETY: as above.
        match unsafe { LLVMGetValueKind(self.raw) } {
            LLVMValueKind::LLVMArgumentValueKind => ValueKind::Argument,
            LLVMValueKind::LLVMBasicBlockValueKind => ValueKind::BasicBlock,
            LLVMValueKind::LLVMFunctionValueKind => ValueKind::Function,
            LLVMValueKind::LLVMGlobalAliasValueKind => ValueKind::GlobalAlias,
            LLVMValueKind::LLVMGlobalIFuncValueKind => ValueKind::GlobalIFunc,
            LLVMValueKind::LLVMGlobalVariableValueKind => ValueKind::GlobalVariable,
            LLVMValueKind::LLVMBlockAddressValueKind => ValueKind::BlockAddress,
            LLVMValueKind::LLVMConstantExprValueKind => ValueKind::ConstantExpr,
            LLVMValueKind::LLVMConstantArrayValueKind
            | LLVMValueKind::LLVMConstantStructValueKind
            | LLVMValueKind::LLVMConstantVectorValueKind
            | LLVMValueKind::LLVMConstantDataArrayValueKind
            | LLVMValueKind::LLVMConstantDataVectorValueKind => ValueKind::ConstantAggregate,
            LLVMValueKind::LLVMUndefValueValueKind => ValueKind::Undef,
            LLVMValueKind::LLVMPoisonValueKind => ValueKind::Poison,
            LLVMValueKind::LLVMConstantAggregateZeroValueKind => ValueKind::ConstantAggregateZero,
            LLVMValueKind::LLVMConstantIntValueKind => ValueKind::ConstantInt,
            LLVMValueKind::LLVMConstantFPValueKind => ValueKind::ConstantFloat,
            LLVMValueKind::LLVMConstantPointerNullValueKind => ValueKind::ConstantPointerNull,
            LLVMValueKind::LLVMConstantTokenNoneValueKind => ValueKind::ConstantTokenNone,
            LLVMValueKind::LLVMMetadataAsValueValueKind => ValueKind::Metadata,
            LLVMValueKind::LLVMInlineAsmValueKind => ValueKind::InlineAsm,
            _ => ValueKind::OtherConstant,
        }
    }

    /// The value's type (`void` for instructions that produce nothing, `label` for
    /// blocks).
    #[must_use]
    pub fn ty(self) -> Type<'m> {
        // SAFETY: `self.raw` is a live value.
        let ty = unsafe { LLVMTypeOf(self.raw) };
        // SAFETY: every value has a type, of the value's context.
        unsafe { Type::from_raw(ty) }
    }

    /// The value's name without `%` or `@`; empty when it has none (`%0`).
    #[must_use]
    pub fn name(self) -> String {
        // SAFETY: `self.raw` is a live value.
        unsafe { value_name(self.raw) }
    }

    /// The value as LLVM prints it: a whole instruction (`%x = load ptr, ptr %p`), a whole
    /// function, or a constant with its type (`ptr addrspace(10) null`).
    #[must_use]
    pub fn print(self) -> String {
        // SAFETY: `self.raw` is a live value.
        unsafe { print_value(self.raw) }
    }

    /// The value as an instruction, if it is one.
    #[must_use]
    pub fn as_instruction(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live value.
        let is = !unsafe { LLVMIsAInstruction(self.raw) }.is_null();
        // SAFETY: `self.raw` is a live instruction of the module.
        is.then(|| unsafe { Instruction::from_raw(self.raw) })
    }

    /// The value as a function, if it is one.
    #[must_use]
    pub fn as_function(self) -> Option<Function<'m>> {
        // SAFETY: `self.raw` is a live value.
        let is = !unsafe { LLVMIsAFunction(self.raw) }.is_null();
        // SAFETY: `self.raw` is a live function of the module.
        is.then(|| unsafe { Function::from_raw(self.raw) })
    }

    /// The value as a basic block, if it is one (branch targets among operands).
    #[must_use]
    pub fn as_block(self) -> Option<BasicBlock<'m>> {
        // SAFETY: `self.raw` is a live value.
        if !flag(unsafe { LLVMValueIsBasicBlock(self.raw) }) {
            return None;
        }
        // SAFETY: `self.raw` is a basic block.
        let block = unsafe { LLVMValueAsBasicBlock(self.raw) };
        // SAFETY: null or the same live block of the module.
        unsafe { BasicBlock::from_nullable(block) }
    }

    /// For a function parameter: its function and index.
    #[must_use]
    pub fn as_argument(self) -> Option<(Function<'m>, u32)> {
        // SAFETY: `self.raw` is a live value.
        if unsafe { LLVMIsAArgument(self.raw) }.is_null() {
            return None;
        }
        // SAFETY: `self.raw` is an argument.
        let parent = unsafe { LLVMGetParamParent(self.raw) };
        // SAFETY: the parent of an argument is a live function of the same module.
        let function = unsafe { Function::from_raw(parent) };
        let index = function.params().iter().position(|p| *p == self)?;
        Some((function, u32::try_from(index).ok()?))
    }

    /// Whether the value is a constant. As in LLVM, globals and functions are constants
    /// (their addresses are).
    #[must_use]
    pub fn is_constant(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        !unsafe { LLVMIsAConstant(self.raw) }.is_null()
    }

    /// Whether the value is a global (function, variable, alias or ifunc).
    #[must_use]
    pub fn is_global(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        !unsafe { LLVMIsAGlobalValue(self.raw) }.is_null()
    }

    /// Whether the value is a global variable declared `constant`.
    #[must_use]
    pub fn is_constant_global(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        let is_variable = !unsafe { LLVMIsAGlobalVariable(self.raw) }.is_null();
        // SAFETY: `LLVMIsGlobalConstant` is only asked of a global variable.
        is_variable && flag(unsafe { LLVMIsGlobalConstant(self.raw) })
    }

    /// Whether the value is a constant null/zero of its type (`null`, `0`,
    /// `zeroinitializer`).
    #[must_use]
    pub fn is_null(self) -> bool {
        // SAFETY: `self.raw` is a live value; non-constants answer false.
        flag(unsafe { LLVMIsNull(self.raw) })
    }

    /// Whether the value is `undef` or `poison`.
    #[must_use]
    pub fn is_undef(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        flag(unsafe { LLVMIsUndef(self.raw) })
    }

    /// Whether the value is `poison`.
    #[must_use]
    pub fn is_poison(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        flag(unsafe { LLVMIsPoison(self.raw) })
    }

    /// The value of an integer constant of at most 64 bits, sign-extended.
    #[must_use]
    pub fn const_int(self) -> Option<i64> {
        self.const_int_ok()
            // SAFETY: `self.raw` is a `ConstantInt` of at most 64 bits.
            .then(|| unsafe { LLVMConstIntGetSExtValue(self.raw) })
    }

    /// The value of an integer constant of at most 64 bits, zero-extended.
    #[must_use]
    pub fn const_uint(self) -> Option<u64> {
        self.const_int_ok()
            // SAFETY: `self.raw` is a `ConstantInt` of at most 64 bits.
            .then(|| unsafe { LLVMConstIntGetZExtValue(self.raw) })
    }

    fn const_int_ok(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        let is_int = !unsafe { LLVMIsAConstantInt(self.raw) }.is_null();
        is_int && self.ty().int_width().is_some_and(|w| w <= 64)
    }

    /// The opcode of a constant expression (`addrspacecast (...)` → `AddrSpaceCast`).
    #[must_use]
    pub fn constant_opcode(self) -> Option<Opcode> {
        // SAFETY: `self.raw` is a live value.
        if unsafe { LLVMIsAConstantExpr(self.raw) }.is_null() {
            return None;
        }
        // SAFETY: `self.raw` is a constant expression.
        Some(Opcode::from_llvm(unsafe { LLVMGetConstOpcode(self.raw) }))
    }

    /// The operands of an instruction or constant (for a call: the arguments, then the
    /// operand bundles' values, then the callee); empty for other values.
    #[must_use]
    pub fn operands(self) -> Vec<Value<'m>> {
        // SAFETY: `self.raw` is a live value.
        let n = unsafe { num_operands(self.raw) };
        // SAFETY: `self.raw` has `n` operands, each a value of the module or its context.
        unsafe { super::read_indexed(self.raw, n, LLVMGetOperand, Value::from_nullable) }
    }

    /// Every use of the value, in LLVM's use-list order (most recent first), skipping
    /// erased instructions.
    ///
    /// Uses are listed for instructions, arguments, basic blocks, globals and constants
    /// that contain a global. Other constants (`null`, `i64 0`, …) are shared by all the
    /// modules of a context, so their uses are not the business of one module: the list is
    /// empty.
    #[must_use]
    pub fn uses(self) -> Vec<Use<'m>> {
        if !self.uses_belong_to_module() {
            return Vec::new();
        }
        let mut out = Vec::new();
        // SAFETY: `self.raw` is live; the use list is walked without changing it.
        let mut u = unsafe { LLVMGetFirstUse(self.raw) };
        while !u.is_null() {
            // SAFETY: `u` is a live use; its user is a live `User`.
            let user = unsafe { LLVMGetUser(u) };
            // SAFETY: `user` is live when non-null.
            let is_instruction = !user.is_null() && !unsafe { LLVMIsAInstruction(user) }.is_null();
            // SAFETY: `user` is a live instruction.
            let listed = !user.is_null() && (!is_instruction || unsafe { is_attached(user) });
            if listed {
                // SAFETY: `user` is a live value.
                let n = unsafe { num_operands(user) };
                // SAFETY: `user` has `n` operands.
                if let Some(operand) = (0..n).find(|&i| unsafe { LLVMGetOperandUse(user, i) } == u)
                {
                    out.push(Use {
                        // SAFETY: a user of a value whose uses belong to this module
                        // (`uses_belong_to_module`), not erased: one of the module's.
                        user: unsafe { Value::from_raw(user) },
                        operand,
                    });
                }
            }
            // SAFETY: `u` is a live use.
            u = unsafe { LLVMGetNextUse(u) };
        }
        out
    }

    /// The distinct users of the value (instructions and constants), in use-list order;
    /// see [`Value::uses`] for which values list them.
    #[must_use]
    pub fn users(self) -> Vec<Value<'m>> {
        let mut seen = HashSet::new();
        self.uses()
            .into_iter()
            .map(|u| u.user)
            .filter(|u| seen.insert(*u))
            .collect()
    }

    /// Whether the value has any use (see [`Value::uses`]).
    #[must_use]
    pub fn has_uses(self) -> bool {
        !self.uses().is_empty()
    }

    /// Whether every user of this value is in the same module as the value itself.
    fn uses_belong_to_module(self) -> bool {
        match self.kind() {
            ValueKind::Instruction
            | ValueKind::Argument
            | ValueKind::BasicBlock
            | ValueKind::Function
            | ValueKind::GlobalVariable
            | ValueKind::GlobalAlias
            | ValueKind::GlobalIFunc => true,
            // SAFETY: `self.raw` is a live constant.
            _ if self.is_constant() => unsafe { contains_global(self.raw) },
            _ => false,
        }
    }
}

/// Whether the constant `raw` refers to a global value, at any depth.
///
/// # Safety
///
/// `raw` is a live constant.
unsafe fn contains_global(raw: LLVMValueRef) -> bool {
    let mut seen = HashSet::new();
    let mut work = vec![raw];
    while let Some(c) = work.pop() {
        if !seen.insert(c) {
            continue;
        }
        // SAFETY: `c` is a live value: `raw`, or an operand of a constant (a constant or,
        // in a `blockaddress`, a block).
        if !unsafe { LLVMIsAGlobalValue(c) }.is_null() {
            return true;
        }
        // SAFETY: as above.
        let n = unsafe { num_operands(c) };
        work.extend(
            (0..n)
                // SAFETY: `c` is a live value with `n` operands.
                .map(|i| unsafe { LLVMGetOperand(c, i) })
                .filter(|v| !v.is_null()),
        );
    }
    false
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.print())
    }
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind() == ValueKind::Function {
            write!(f, "Value(@{})", self.name())
        } else if self.kind() == ValueKind::BasicBlock {
            write!(f, "Value(label %{})", self.name())
        } else {
            write!(f, "Value({})", self.print())
        }
    }
}

impl<'m> From<Instruction<'m>> for Value<'m> {
    fn from(inst: Instruction<'m>) -> Value<'m> {
        inst.as_value()
    }
}

impl<'m> From<Function<'m>> for Value<'m> {
    fn from(function: Function<'m>) -> Value<'m> {
        function.as_value()
    }
}

impl<'m> From<BasicBlock<'m>> for Value<'m> {
    fn from(block: BasicBlock<'m>) -> Value<'m> {
        block.as_value()
    }
}

impl<'m> From<Call<'m>> for Value<'m> {
    fn from(call: Call<'m>) -> Value<'m> {
        call.instruction().as_value()
    }
}
