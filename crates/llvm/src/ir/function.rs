//! Functions: [`Function`], and how a [`Module`] lists them.

use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;

use llvm_sys::core::{
    LLVMCountParams, LLVMGetEntryBasicBlock, LLVMGetFirstBasicBlock, LLVMGetFirstFunction,
    LLVMGetFunctionCallConv, LLVMGetGC, LLVMGetIntrinsicID, LLVMGetNamedFunction,
    LLVMGetNextBasicBlock, LLVMGetNextFunction, LLVMGetParam, LLVMGlobalGetValueType,
    LLVMIsDeclaration,
};
use llvm_sys::prelude::LLVMValueRef;

use super::attributes::AttributeHolder;
use super::{AttributeIndex, BasicBlock, Instruction, MemoryEffects, Type, Value};
use crate::ffi::{flag, from_c_str, value_name};
use crate::module::Module;

impl<'ctx> Module<'ctx> {
    /// Handles to the module's functions, definitions and declarations (intrinsics
    /// included), in module order. [`Module::functions`] gives their names.
    #[must_use]
    pub fn function_list(&self) -> Vec<Function<'_>> {
        let mut out = Vec::new();
        // SAFETY: the module is live; the iteration follows LLVM's function list, which
        // nothing changes meanwhile.
        let mut raw = unsafe { LLVMGetFirstFunction(self.as_raw()) };
        while !raw.is_null() {
            // SAFETY: a live function of this module, which `self` is borrowed for.
            out.push(unsafe { Function::from_raw(raw) });
            // SAFETY: `raw` is a live function of this module.
            raw = unsafe { LLVMGetNextFunction(raw) };
        }
        out
    }

    /// The function named `name` (without the `@`), if the module has one.
    #[must_use]
    pub fn function(&self, name: &str) -> Option<Function<'_>> {
        let c_name = CString::new(name).ok()?;
        // SAFETY: the module is live and `c_name` is NUL-terminated.
        let raw = unsafe { LLVMGetNamedFunction(self.as_raw(), c_name.as_ptr()) };
        // SAFETY: non-null, so a live function of this module, which `self` is borrowed for.
        (!raw.is_null()).then(|| unsafe { Function::from_raw(raw) })
    }
}

/// A function of a module, defined or only declared.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Function<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> Function<'m> {
    /// A handle to `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live function of the module borrowed for `'m` (see the handle invariant
    /// in [`crate::ir`]).
    pub(crate) unsafe fn from_raw(raw: LLVMValueRef) -> Self {
        Function {
            raw,
            _module: PhantomData,
        }
    }

    pub(crate) fn as_raw(self) -> LLVMValueRef {
        self.raw
    }

    /// The function as a value (its address; a constant of type `ptr`).
    #[must_use]
    pub fn as_value(self) -> Value<'m> {
        // SAFETY: a function is a value of the same module.
        unsafe { Value::from_raw(self.raw) }
    }

    /// The function's name, without `@`.
    #[must_use]
    pub fn name(self) -> String {
        // SAFETY: `self.raw` is a live function.
        unsafe { value_name(self.raw) }
    }

    /// Whether the function is only declared (has no body).
    #[must_use]
    pub fn is_declaration(self) -> bool {
        // SAFETY: `self.raw` is a live function.
        flag(unsafe { LLVMIsDeclaration(self.raw) })
    }

    /// Whether LLVM's verifier accepts this function alone (`LLVMVerifyFunction`): what a
    /// function pass checks without walking the whole module. It says no more than yes or
    /// no; [`Module::verify`] names what is wrong.
    #[must_use]
    pub fn verifies(self) -> bool {
        // SAFETY: `self.raw` is a live function; ReturnStatusAction prints nothing and
        // does not abort.
        let broken = unsafe {
            llvm_sys::analysis::LLVMVerifyFunction(
                self.raw,
                llvm_sys::analysis::LLVMVerifierFailureAction::LLVMReturnStatusAction,
            )
        };
        !flag(broken)
    }

    /// Whether the function has a name reserved for intrinsics (`llvm.*`), as LLVM's
    /// `Function::isIntrinsic`; this includes names LLVM does not know, such as Julia's
    /// `llvm.julia.gc_preserve_begin`.
    #[must_use]
    pub fn is_intrinsic(self) -> bool {
        self.name().starts_with("llvm.")
    }

    /// LLVM's intrinsic ID of the function (see `Intrinsics.td`); 0 for functions that are
    /// not intrinsics LLVM knows.
    #[must_use]
    pub fn intrinsic_id(self) -> u32 {
        // SAFETY: `self.raw` is a live function.
        unsafe { LLVMGetIntrinsicID(self.raw) }
    }

    /// The function's type (`ptr (ptr addrspace(10), i64)`).
    #[must_use]
    pub fn function_type(self) -> Type<'m> {
        // SAFETY: `self.raw` is a live function, a global whose value type is its type.
        let ty = unsafe { LLVMGlobalGetValueType(self.raw) };
        // SAFETY: a type of the function's context.
        unsafe { Type::from_raw(ty) }
    }

    /// The return type.
    #[must_use]
    pub fn return_type(self) -> Type<'m> {
        let ty = self.function_type();
        ty.return_type().unwrap_or(ty)
    }

    /// The parameters, in order.
    #[must_use]
    pub fn params(self) -> Vec<Value<'m>> {
        // SAFETY: `self.raw` is a live function.
        let n = unsafe { LLVMCountParams(self.raw) };
        // SAFETY: `self.raw` has `n` parameters, each an argument of this function.
        unsafe { super::read_indexed(self.raw, n, LLVMGetParam, Value::from_nullable) }
    }

    /// The calling convention (`ccc` is 0, `fastcc` 8, `coldcc` 9; see LLVM's
    /// `CallingConv.h`).
    #[must_use]
    pub fn calling_convention(self) -> u32 {
        // SAFETY: `self.raw` is a live function.
        unsafe { LLVMGetFunctionCallConv(self.raw) }
    }

    /// The garbage collector named by `gc "..."`, if any.
    #[must_use]
    pub fn gc(self) -> Option<String> {
        // SAFETY: `self.raw` is a live function.
        let gc = unsafe { LLVMGetGC(self.raw) };
        // SAFETY: null or a NUL-terminated name owned by the function, copied at once.
        unsafe { from_c_str(gc) }
    }

    /// The basic blocks, in layout order (the entry block first); empty for a declaration.
    #[must_use]
    pub fn blocks(self) -> Vec<BasicBlock<'m>> {
        let mut out = Vec::new();
        // SAFETY: `self.raw` is a live function; blocks are never removed.
        let mut bb = unsafe { LLVMGetFirstBasicBlock(self.raw) };
        while !bb.is_null() {
            // SAFETY: a live block of this function.
            out.push(unsafe { BasicBlock::from_raw(bb) });
            // SAFETY: `bb` is a live block of this function.
            bb = unsafe { LLVMGetNextBasicBlock(bb) };
        }
        out
    }

    /// The entry block; `None` for a declaration.
    #[must_use]
    pub fn entry_block(self) -> Option<BasicBlock<'m>> {
        if self.is_declaration() {
            return None;
        }
        // SAFETY: `self.raw` is a live function with a body.
        let entry = unsafe { LLVMGetEntryBasicBlock(self.raw) };
        // SAFETY: null or a live block of this function.
        unsafe { BasicBlock::from_nullable(entry) }
    }

    /// Every instruction of every block, in layout order.
    #[must_use]
    pub fn instructions(self) -> Vec<Instruction<'m>> {
        self.blocks()
            .into_iter()
            .flat_map(BasicBlock::instructions)
            .collect()
    }

    /// Whether the function has attribute `name` at `index`: an enum or int attribute
    /// when LLVM knows the name (`returns_twice`, `noreturn`, `memory`, `nonnull`), a
    /// string attribute otherwise (`"gc-leaf-function"`).
    #[must_use]
    pub fn has_attribute(self, index: AttributeIndex, name: &str) -> bool {
        AttributeHolder::Function(self).has(index, name)
    }

    /// The integer of an int attribute (`memory`, `dereferenceable`, `align`, …), or 0
    /// for a plain enum attribute; `None` when absent or of another sort.
    #[must_use]
    pub fn int_attribute(self, index: AttributeIndex, name: &str) -> Option<u64> {
        AttributeHolder::Function(self).int(index, name)
    }

    /// The type of a type attribute (`sret(%T)`, `elementtype(i32)`, `byval(...)`).
    #[must_use]
    pub fn type_attribute(self, index: AttributeIndex, name: &str) -> Option<Type<'m>> {
        AttributeHolder::Function(self).ty(index, name)
    }

    /// The value of string attribute `key` (`"gc-leaf-function"` → `Some("")`).
    #[must_use]
    pub fn string_attribute(self, index: AttributeIndex, key: &str) -> Option<String> {
        AttributeHolder::Function(self).string(index, key)
    }

    /// The function's memory effects (its `memory(...)` attribute; unknown without one).
    #[must_use]
    pub fn memory_effects(self) -> MemoryEffects {
        AttributeHolder::Function(self).memory_effects()
    }

    /// The whole function as LLVM prints it.
    #[must_use]
    pub fn print(self) -> String {
        self.as_value().print()
    }
}

impl fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Function(@{})", self.name())
    }
}
