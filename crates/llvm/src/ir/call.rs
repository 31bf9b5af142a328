//! Call sites: [`Call`] (a `call`, `invoke` or `callbr`) and its [`OperandBundle`]s.

use std::fmt;

use llvm_sys::core::{
    LLVMDisposeOperandBundle, LLVMGetCalledFunctionType, LLVMGetCalledValue,
    LLVMGetInstructionCallConv, LLVMGetNormalDest, LLVMGetNumArgOperands,
    LLVMGetNumOperandBundleArgs, LLVMGetNumOperandBundles, LLVMGetOperandBundleArgAtIndex,
    LLVMGetOperandBundleAtIndex, LLVMGetOperandBundleTag, LLVMGetUnwindDest,
};
use llvm_sys::prelude::{LLVMOperandBundleRef, LLVMValueRef};

use super::attributes::AttributeHolder;
use super::{
    AttributeIndex, BasicBlock, Function, Instruction, MemoryEffects, Opcode, Type, Value,
};
use crate::ffi::lossy;

/// An operand bundle of a call: `"jl_roots"(ptr addrspace(10) %a, ...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperandBundle<'m> {
    /// The tag (`"jl_roots"`, `"deopt"`, `"gc-live"`).
    pub tag: String,
    /// The values, in order.
    pub args: Vec<Value<'m>>,
}

/// An operand bundle LLVM copied out (or made) for us; disposed on drop.
pub(crate) struct OwnedBundle(LLVMOperandBundleRef);

impl OwnedBundle {
    /// Takes ownership of `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is null or a bundle from `LLVMGetOperandBundleAtIndex` or
    /// `LLVMCreateOperandBundle`, disposed nowhere else, whose values belong to a module
    /// that outlives the `OwnedBundle`.
    pub(crate) unsafe fn from_raw(raw: LLVMOperandBundleRef) -> Self {
        OwnedBundle(raw)
    }

    /// The raw bundle, still owned by `self`.
    pub(crate) fn as_raw(&self) -> LLVMOperandBundleRef {
        self.0
    }

    /// The tag (empty for a null bundle).
    pub(crate) fn tag(&self) -> String {
        if self.0.is_null() {
            return String::new();
        }
        let mut len = 0;
        // SAFETY: `self.0` is a live bundle.
        let ptr = unsafe { LLVMGetOperandBundleTag(self.0, &mut len) };
        // SAFETY: the tag is valid for `len` bytes while the bundle lives, and is copied at
        // once.
        unsafe { lossy(ptr, len) }
    }

    /// The bundle's values.
    ///
    /// # Safety
    ///
    /// The module the values belong to is borrowed for `'m`.
    unsafe fn args<'m>(&self) -> Vec<Value<'m>> {
        if self.0.is_null() {
            return Vec::new();
        }
        // SAFETY: `self.0` is a live bundle.
        let n = unsafe { LLVMGetNumOperandBundleArgs(self.0) };
        // SAFETY: `self.0` has `n` values, each of a module borrowed for `'m` (the contract).
        unsafe {
            super::read_indexed(
                self.0,
                n,
                LLVMGetOperandBundleArgAtIndex,
                Value::from_nullable,
            )
        }
    }
}

impl Drop for OwnedBundle {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the bundle came from `LLVMGetOperandBundleAtIndex` or
            // `LLVMCreateOperandBundle` (see `from_raw`) and is disposed exactly once.
            unsafe { LLVMDisposeOperandBundle(self.0) };
        }
    }
}

/// A call site: a `call`, `invoke` or `callbr` instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Call<'m> {
    inst: Instruction<'m>,
}

impl<'m> Call<'m> {
    /// `inst` as a call site, if it is a `call`, `invoke` or `callbr`.
    pub(super) fn of(inst: Instruction<'m>) -> Option<Call<'m>> {
        inst.opcode().is_call().then_some(Call { inst })
    }

    /// The instruction.
    #[must_use]
    pub fn instruction(self) -> Instruction<'m> {
        self.inst
    }

    fn raw(self) -> LLVMValueRef {
        self.inst.as_raw()
    }

    /// Whether this is an `invoke`.
    #[must_use]
    pub fn is_invoke(self) -> bool {
        self.inst.opcode() == Opcode::Invoke
    }

    /// Whether this is a `musttail call` (which must be followed by the `ret`).
    #[must_use]
    pub fn is_must_tail(self) -> bool {
        self.inst.opcode() == Opcode::Call
            // SAFETY: `self.raw()` is a live `call` instruction.
            && unsafe { llvm_sys::core::LLVMGetTailCallKind(self.raw()) }
                == llvm_sys::LLVMTailCallKind::LLVMTailCallKindMustTail
    }

    /// The called operand (a function, or any pointer for an indirect call).
    #[must_use]
    pub fn called_value(self) -> Value<'m> {
        // SAFETY: `self.raw()` is a live call site.
        let callee = unsafe { LLVMGetCalledValue(self.raw()) };
        // SAFETY: every call site has a callee operand, a value of the module or its
        // context.
        unsafe { Value::from_raw(callee) }
    }

    /// The callee of a direct call.
    #[must_use]
    pub fn called_function(self) -> Option<Function<'m>> {
        self.called_value().as_function()
    }

    /// The name of the callee of a direct call.
    #[must_use]
    pub fn callee_name(self) -> Option<String> {
        self.called_function().map(Function::name)
    }

    /// Whether this is a direct call of a function named `llvm.*` (see
    /// [`Function::is_intrinsic`]).
    #[must_use]
    pub fn is_intrinsic(self) -> bool {
        self.called_function().is_some_and(Function::is_intrinsic)
    }

    /// The function type the call uses (which, with opaque pointers, need not be the
    /// callee's own).
    #[must_use]
    pub fn function_type(self) -> Type<'m> {
        // SAFETY: `self.raw()` is a live call site.
        let ty = unsafe { LLVMGetCalledFunctionType(self.raw()) };
        // SAFETY: every call site has a function type, of the module's context.
        unsafe { Type::from_raw(ty) }
    }

    /// The number of arguments (without the callee and the bundles' values).
    #[must_use]
    pub fn num_arguments(self) -> u32 {
        // SAFETY: `self.raw()` is a live call site.
        unsafe { LLVMGetNumArgOperands(self.raw()) }
    }

    /// The arguments, in order (without the callee and the bundles' values).
    #[must_use]
    pub fn arguments(self) -> Vec<Value<'m>> {
        // Arguments are the first operands of every call site.
        (0..self.num_arguments())
            .filter_map(|i| self.inst.operand(i))
            .collect()
    }

    /// The operand bundles, in order.
    #[must_use]
    pub fn operand_bundles(self) -> Vec<OperandBundle<'m>> {
        self.owned_bundles()
            .iter()
            .map(|b| OperandBundle {
                tag: b.tag(),
                // SAFETY: the bundle's values are this call's operands, of the module
                // borrowed for `'m`.
                args: unsafe { b.args() },
            })
            .collect()
    }

    /// The first operand bundle with tag `tag`.
    #[must_use]
    pub fn operand_bundle(self, tag: &str) -> Option<OperandBundle<'m>> {
        self.operand_bundles().into_iter().find(|b| b.tag == tag)
    }

    /// Whether the call has an operand bundle with tag `tag`.
    #[must_use]
    pub fn has_operand_bundle(self, tag: &str) -> bool {
        self.owned_bundles().iter().any(|b| b.tag() == tag)
    }

    /// Copies of the bundles, for the builder to reuse.
    pub(crate) fn owned_bundles(self) -> Vec<OwnedBundle> {
        if self.inst.opcode() == Opcode::CallBr {
            // The C API reads bundles of calls and invokes only.
            return Vec::new();
        }
        // SAFETY: `self.raw()` is a live call or invoke; indices are below the count and
        // each bundle returned is a fresh copy that `OwnedBundle` disposes.
        let n = unsafe { LLVMGetNumOperandBundles(self.raw()) };
        (0..n)
            .map(|i| {
                // SAFETY: `self.raw()` is a live call or invoke with more than `i` bundles.
                let bundle = unsafe { LLVMGetOperandBundleAtIndex(self.raw(), i) };
                // SAFETY: a fresh copy, ours to dispose; its values are the module's.
                unsafe { OwnedBundle::from_raw(bundle) }
            })
            .filter(|b| !b.as_raw().is_null())
            .collect()
    }

    /// The calling convention of the call site.
    #[must_use]
    pub fn calling_convention(self) -> u32 {
        // SAFETY: `self.raw()` is a live call site.
        unsafe { LLVMGetInstructionCallConv(self.raw()) }
    }

    /// The normal destination of an `invoke`.
    #[must_use]
    pub fn normal_dest(self) -> Option<BasicBlock<'m>> {
        // An erased invoke's destinations are poison, not blocks.
        if !self.is_invoke() || self.instruction().is_erased() {
            return None;
        }
        // SAFETY: `self.raw()` is a live, not erased `invoke`: its destinations are blocks.
        let dest = unsafe { LLVMGetNormalDest(self.raw()) };
        // SAFETY: null or a live block of the same function.
        unsafe { BasicBlock::from_nullable(dest) }
    }

    /// The unwind destination of an `invoke`.
    #[must_use]
    pub fn unwind_dest(self) -> Option<BasicBlock<'m>> {
        // An erased invoke's destinations are poison, not blocks.
        if !self.is_invoke() || self.instruction().is_erased() {
            return None;
        }
        // SAFETY: `self.raw()` is a live, not erased `invoke`: its destinations are blocks.
        let dest = unsafe { LLVMGetUnwindDest(self.raw()) };
        // SAFETY: null or a live block of the same function.
        unsafe { BasicBlock::from_nullable(dest) }
    }

    /// Whether the call site itself carries attribute `name` at `index` (enum or int
    /// attribute when LLVM knows the name, string attribute otherwise). The callee's own
    /// attributes are not consulted: see [`Call::has_fn_attribute`].
    #[must_use]
    pub fn has_attribute(self, index: AttributeIndex, name: &str) -> bool {
        AttributeHolder::Call(self).has(index, name)
    }

    /// The integer of a call-site int attribute (0 for a plain enum attribute).
    #[must_use]
    pub fn int_attribute(self, index: AttributeIndex, name: &str) -> Option<u64> {
        AttributeHolder::Call(self).int(index, name)
    }

    /// The type of a call-site type attribute (`elementtype(i32)`, `sret(%T)`).
    #[must_use]
    pub fn type_attribute(self, index: AttributeIndex, name: &str) -> Option<Type<'m>> {
        AttributeHolder::Call(self).ty(index, name)
    }

    /// The value of a call-site string attribute.
    #[must_use]
    pub fn string_attribute(self, index: AttributeIndex, key: &str) -> Option<String> {
        AttributeHolder::Call(self).string(index, key)
    }

    /// Whether the call has function attribute `name`, on the call site or, for a direct
    /// call, on the callee (LLVM's `CallBase::hasFnAttr`): how to ask whether a call
    /// `returns_twice`.
    #[must_use]
    pub fn has_fn_attribute(self, name: &str) -> bool {
        self.has_attribute(AttributeIndex::Function, name)
            || self
                .called_function()
                .is_some_and(|f| f.has_attribute(AttributeIndex::Function, name))
    }

    /// The call's memory effects, as LLVM's `CallBase::getMemoryEffects` computes them:
    /// the call site's `memory(...)` attribute intersected, for a direct call, with the
    /// callee's, where the callee's are first widened by the operand bundles: any bundle
    /// other than `ptrauth` and `kcfi` lets the call read any memory, and any bundle other
    /// than those, `deopt` and `funclet` lets it write any memory (not for `llvm.assume`).
    /// So a `memory(none)` callee called with a `"jl_roots"` bundle reads memory.
    #[must_use]
    pub fn memory_effects(self) -> MemoryEffects {
        let site = AttributeHolder::Call(self).memory_effects();
        let Some(callee) = self.called_function() else {
            return site;
        };
        let mut callee_effects = callee.memory_effects();
        let is_assume = callee.name() == "llvm.assume";
        if !is_assume {
            let tags: Vec<String> = self.owned_bundles().iter().map(OwnedBundle::tag).collect();
            let reading = tags
                .iter()
                .any(|t| !matches!(t.as_str(), "ptrauth" | "kcfi"));
            let clobbering = tags
                .iter()
                .any(|t| !matches!(t.as_str(), "ptrauth" | "kcfi" | "deopt" | "funclet"));
            if reading {
                callee_effects = callee_effects.union(MemoryEffects::READ_ONLY);
            }
            if clobbering {
                callee_effects = callee_effects.union(MemoryEffects::WRITE_ONLY);
            }
        }
        site.intersect(callee_effects)
    }
}

impl fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Call({})", self.inst.print())
    }
}

impl<'m> From<Call<'m>> for Instruction<'m> {
    fn from(call: Call<'m>) -> Instruction<'m> {
        call.instruction()
    }
}
