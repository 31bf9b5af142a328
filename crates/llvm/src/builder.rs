//! Changing IR: inserting, replacing and erasing instructions.
//!
//! A [`Builder`] borrows a [`Module`] and inserts new instructions at a position (before
//! an instruction, at the end of a block, after the entry block's `alloca`s). It also
//! makes types and constants, declares functions, replaces uses, renames values, erases
//! instructions, and rebuilds calls without an operand bundle or with another callee.
//!
//! Every operation checks its operands before LLVM sees them: the types must fit the
//! instruction (as LLVM's verifier and `IRBuilder` assertions would demand; LLVM's own
//! release build does not check, and some mistakes crash it), and every handle must belong
//! to this builder's module and not be erased. A refused change returns
//! [`Error::Edit`] and leaves the IR as it was.
//!
//! Erasing is safe with handles still around: [`Builder::erase`] refuses an instruction
//! that still has uses, then detaches it from its block, points its operands at `poison`
//! (so it no longer counts as a user of anything and can never be reached from the IR),
//! and hands it to the module, which frees it when the module itself is dropped. Handles to
//! it stay valid; [`Instruction::is_erased`] tells.
//!
//! ```
//! use locus_llvm::builder::Builder;
//! use locus_llvm::ir::Opcode;
//! use locus_llvm::{Context, Module};
//!
//! let ctx = Context::new();
//! let module = Module::parse_ir(&ctx, "ex.ll", r#"
//!     declare void @safepoint()
//!     define void @f(ptr addrspace(10) %obj) {
//!       call void @safepoint() [ "jl_roots"(ptr addrspace(10) %obj) ]
//!       ret void
//!     }
//! "#)?;
//! let f = module.function("f").expect("defined above");
//! let call = f.instructions()[0];
//!
//! let b = Builder::new(&module);
//! // A GC frame slot: an alloca at the top of the entry block, and a store before the call.
//! b.position_after_allocas(f)?;
//! let slot_ty = b.ptr_type(10)?;
//! let slot = b.alloca(slot_ty, None, "slot")?;
//! b.position_before(call)?;
//! b.store(f.params()[0], slot)?;
//! // The roots are now in memory: drop the bundle.
//! let new_call = b.recreate_call_without_bundle(call, "jl_roots")?;
//! assert!(call.is_erased());
//! assert!(new_call.as_call().expect("a call").operand_bundles().is_empty());
//! assert_eq!(new_call.prev().map(|i| i.opcode()), Some(Opcode::Store));
//! module.verify()?;
//! # Ok::<(), locus_llvm::Error>(())
//! ```

use std::cell::Cell;
use std::ffi::{c_uint, CString};

use llvm_sys::core::{
    LLVMAddCallSiteAttribute, LLVMAddFunction, LLVMAddIncoming, LLVMArrayType2,
    LLVMBuildAddrSpaceCast, LLVMBuildAlloca, LLVMBuildArrayAlloca, LLVMBuildBitCast,
    LLVMBuildCallWithOperandBundles, LLVMBuildExtractElement, LLVMBuildExtractValue, LLVMBuildGEP2,
    LLVMBuildInBoundsGEP2, LLVMBuildInsertElement, LLVMBuildInsertValue, LLVMBuildIntToPtr,
    LLVMBuildInvokeWithOperandBundles, LLVMBuildLoad2, LLVMBuildPhi, LLVMBuildPtrToInt,
    LLVMBuildRet, LLVMBuildRetVoid, LLVMBuildSelect, LLVMBuildStore, LLVMCanValueUseFastMathFlags,
    LLVMConstInt, LLVMConstNull, LLVMCreateBuilderInContext, LLVMCreateOperandBundle,
    LLVMDeleteFunction, LLVMDisposeBuilder, LLVMDisposeValueMetadataEntries, LLVMFunctionType,
    LLVMGetCallSiteAttributeCount, LLVMGetCallSiteAttributes, LLVMGetFastMathFlags,
    LLVMGetFunctionCallConv, LLVMGetInstructionCallConv, LLVMGetMDKindIDInContext, LLVMGetMetadata,
    LLVMGetModuleContext, LLVMGetNamedFunction, LLVMGetNamedGlobal, LLVMGetNamedGlobalAlias,
    LLVMGetPoison, LLVMGetTailCallKind, LLVMGetTypeContext, LLVMGetUndef,
    LLVMInstructionGetAllMetadataOtherThanDebugLoc, LLVMInstructionRemoveFromParent,
    LLVMIntTypeInContext, LLVMLabelTypeInContext, LLVMMetadataAsValue, LLVMPointerTypeInContext,
    LLVMPositionBuilderAtEnd, LLVMPositionBuilderBefore, LLVMReplaceAllUsesWith, LLVMSetAlignment,
    LLVMSetFastMathFlags, LLVMSetInstructionCallConv, LLVMSetMetadata, LLVMSetOperand,
    LLVMSetTailCallKind, LLVMSetValueName2, LLVMStructTypeInContext, LLVMTypeOf,
    LLVMValueMetadataEntriesGetKind, LLVMValueMetadataEntriesGetMetadata, LLVMVectorType,
    LLVMVoidTypeInContext,
};
use llvm_sys::core::{LLVMCreateEnumAttribute, LLVMGetEnumAttributeKindForName, LLVMSetOrdering};
use llvm_sys::prelude::{
    LLVMAttributeRef, LLVMBasicBlockRef, LLVMBuilderRef, LLVMContextRef, LLVMOperandBundleRef,
    LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::{LLVMAtomicOrdering, LLVMTailCallKind};

use crate::error::{Error, Result};
use crate::ir::{
    owner_check, AttributeIndex, BasicBlock, Call, Function, Instruction, Opcode, OperandBundle,
    OwnedBundle, Type, TypeKind, Use, Value, ValueKind,
};
use crate::module::Module;

/// The largest integer width LLVM allows (`IntegerType::MAX_INT_BITS`).
const MAX_INT_BITS: u32 = 1 << 23;
/// Address spaces are 24-bit numbers in LLVM.
const MAX_ADDRESS_SPACE: u32 = (1 << 24) - 1;

fn refuse<T>(message: impl Into<String>) -> Result<T> {
    Err(Error::Edit {
        message: message.into(),
    })
}

fn c_string(what: &str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::Edit {
        message: format!("the {what} {text:?} contains a NUL byte"),
    })
}

/// Where the next instruction goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    Unset,
    Before(LLVMValueRef),
    AtEnd(LLVMBasicBlockRef),
}

/// Inserts and changes instructions of one module. Owns an LLVM `IRBuilder`, disposed on
/// drop. See the [module documentation](self) for the checks every operation makes.
pub struct Builder<'m> {
    module: &'m Module<'m>,
    raw: LLVMBuilderRef,
    ctx: LLVMContextRef,
    position: Cell<Position>,
}

impl Drop for Builder<'_> {
    fn drop(&mut self) {
        // SAFETY: created in `Builder::new`, disposed exactly once.
        unsafe { LLVMDisposeBuilder(self.raw) };
    }
}

impl std::fmt::Debug for Builder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("module", &self.module.name())
            .finish_non_exhaustive()
    }
}

/// Whether values of `ty` can be operands and results of ordinary instructions.
fn is_value_type(ty: Type<'_>) -> bool {
    !matches!(
        ty.kind(),
        TypeKind::Void
            | TypeKind::Function
            | TypeKind::Label
            | TypeKind::Metadata
            | TypeKind::Token
    )
}

/// LLVM's `getPrimitiveSizeInBits` for non-pointer first-class types: `(bits, scalable)`,
/// `None` when it has none (pointers, aggregates, …).
fn primitive_bits(ty: Type<'_>) -> Option<(u64, bool)> {
    Some(match ty.kind() {
        TypeKind::Integer => (u64::from(ty.int_width()?), false),
        TypeKind::Half | TypeKind::BFloat => (16, false),
        TypeKind::Float => (32, false),
        TypeKind::Double | TypeKind::X86Mmx => (64, false),
        TypeKind::X86Fp80 => (80, false),
        TypeKind::Fp128 | TypeKind::PpcFp128 => (128, false),
        TypeKind::X86Amx => (8192, false),
        TypeKind::Vector | TypeKind::ScalableVector => {
            let (elem, _) = primitive_bits(ty.element_type()?)?;
            let n = u64::from(ty.vector_len()?);
            (elem.checked_mul(n)?, ty.kind() == TypeKind::ScalableVector)
        }
        _ => return None,
    })
}

/// `(element count, scalable)` of a vector type, `None` for scalars.
fn shape(ty: Type<'_>) -> Option<(u32, bool)> {
    Some((ty.vector_len()?, ty.kind() == TypeKind::ScalableVector))
}

impl<'m> Builder<'m> {
    /// A builder for `module`, not yet positioned.
    #[must_use]
    pub fn new(module: &'m Module<'m>) -> Self {
        // SAFETY: the module is live; its context outlives it.
        let ctx = unsafe { LLVMGetModuleContext(module.as_raw()) };
        // SAFETY: `ctx` is live; the builder is disposed in `Drop`.
        let raw = unsafe { LLVMCreateBuilderInContext(ctx) };
        Builder {
            module,
            raw,
            ctx,
            position: Cell::new(Position::Unset),
        }
    }

    /// The module this builder changes.
    #[must_use]
    pub fn module(&self) -> &'m Module<'m> {
        self.module
    }

    // -----------------------------------------------------------------------------------
    // Checks

    /// `value` as a raw operand, once it is known to be ours and alive.
    fn val(&self, value: impl Into<Value<'m>>) -> Result<LLVMValueRef> {
        let value = value.into();
        owner_check(self.module, value.as_raw()).map_err(|message| Error::Edit { message })?;
        Ok(value.as_raw())
    }

    /// `inst`, once it is known to be ours and not erased.
    fn inst(&self, inst: Instruction<'m>) -> Result<LLVMValueRef> {
        self.val(inst)
    }

    fn block(&self, block: BasicBlock<'m>) -> Result<LLVMBasicBlockRef> {
        self.val(block)?;
        Ok(block.as_raw())
    }

    fn function(&self, function: Function<'m>) -> Result<LLVMValueRef> {
        self.val(function)
    }

    /// `ty`, once it is known to belong to this module's context.
    fn ty(&self, ty: Type<'m>) -> Result<LLVMTypeRef> {
        // SAFETY: `ty` is a live type.
        if unsafe { LLVMGetTypeContext(ty.as_raw()) } != self.ctx {
            return refuse(format!("type `{ty}` belongs to another context"));
        }
        Ok(ty.as_raw())
    }

    fn value_type(&self, what: &str, ty: Type<'m>) -> Result<LLVMTypeRef> {
        if !is_value_type(ty) {
            return refuse(format!("{what} cannot have type `{ty}`"));
        }
        self.ty(ty)
    }

    fn sized_type(&self, what: &str, ty: Type<'m>) -> Result<LLVMTypeRef> {
        if !is_value_type(ty) || !ty.is_sized() {
            return refuse(format!("{what} needs a sized type, not `{ty}`"));
        }
        self.ty(ty)
    }

    /// Re-applies the position to LLVM's builder and returns it, or refuses when there is
    /// none or the instruction it was before has been erased.
    fn ready(&self) -> Result<()> {
        match self.position.get() {
            Position::Unset => refuse("the builder has no position"),
            Position::Before(inst) => {
                let inst = Instruction::from_raw(inst);
                if inst.is_erased() {
                    return refuse(format!(
                        "the builder is positioned before an erased instruction `{inst}`"
                    ));
                }
                // SAFETY: `inst` is a live instruction in a block of our module.
                unsafe { LLVMPositionBuilderBefore(self.raw, inst.as_raw()) };
                Ok(())
            }
            Position::AtEnd(block) => {
                // SAFETY: `block` is a live block of our module.
                unsafe { LLVMPositionBuilderAtEnd(self.raw, block) };
                Ok(())
            }
        }
    }

    /// The function the builder inserts into.
    fn current_function(&self) -> Option<Function<'m>> {
        match self.position.get() {
            Position::Unset => None,
            Position::Before(inst) => Instruction::from_raw(inst).function(),
            Position::AtEnd(block) => Some(BasicBlock::from_raw(block).function()),
        }
    }

    /// The name to give a new instruction of type `ty` (none for `void`).
    fn name_for(&self, ty: Type<'m>, name: &str) -> Result<CString> {
        if ty.is_void() {
            Ok(CString::default())
        } else {
            c_string("name", name)
        }
    }

    // -----------------------------------------------------------------------------------
    // Positions

    /// Inserts before `inst`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `inst` is erased or belongs to another module.
    pub fn position_before(&self, inst: Instruction<'m>) -> Result<()> {
        let raw = self.inst(inst)?;
        self.position.set(Position::Before(raw));
        Ok(())
    }

    /// Inserts after `inst` (before the next instruction; at the end of the block after a
    /// terminator). After a `phi`, this is still among the `phi`s: see
    /// [`Builder::position_at_first_insertion_point`].
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `inst` is erased or belongs to another module.
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
    /// [`Error::Edit`] if `block` belongs to another module.
    pub fn position_at_end(&self, block: BasicBlock<'m>) -> Result<()> {
        let raw = self.block(block)?;
        self.position.set(Position::AtEnd(raw));
        Ok(())
    }

    /// Inserts at the very start of `block`, before its `phi`s: the place for new `phi`s.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `block` belongs to another module.
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
    /// [`Error::Edit`] if `block` belongs to another module.
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
    /// [`Error::Edit`] if `function` is a declaration or belongs to another module.
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

    // -----------------------------------------------------------------------------------
    // Types

    /// `void`.
    #[must_use]
    pub fn void_type(&self) -> Type<'m> {
        // SAFETY: `self.ctx` is live.
        Type::from_raw(unsafe { LLVMVoidTypeInContext(self.ctx) })
    }

    /// `iN`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] unless `1 <= bits <= 2^23`.
    pub fn int_type(&self, bits: u32) -> Result<Type<'m>> {
        if !(1..=MAX_INT_BITS).contains(&bits) {
            return refuse(format!("no integer type has {bits} bits"));
        }
        // SAFETY: `self.ctx` is live and the width is in LLVM's range.
        Ok(Type::from_raw(unsafe {
            LLVMIntTypeInContext(self.ctx, bits)
        }))
    }

    /// `ptr addrspace(N)` (plain `ptr` for 0).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `address_space` does not fit LLVM's 24 bits.
    pub fn ptr_type(&self, address_space: u32) -> Result<Type<'m>> {
        if address_space > MAX_ADDRESS_SPACE {
            return refuse(format!("address space {address_space} is out of range"));
        }
        // SAFETY: `self.ctx` is live and the address space is in range.
        Ok(Type::from_raw(unsafe {
            LLVMPointerTypeInContext(self.ctx, address_space)
        }))
    }

    /// `[len x element]`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `element` cannot be an array element.
    pub fn array_type(&self, element: Type<'m>, len: u64) -> Result<Type<'m>> {
        let raw = self.aggregate_element("an array", element)?;
        if element.kind() == TypeKind::ScalableVector {
            return refuse("an array cannot hold scalable vectors");
        }
        // SAFETY: `raw` is a valid array element type of our context.
        Ok(Type::from_raw(unsafe { LLVMArrayType2(raw, len) }))
    }

    /// `<len x element>`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `len` is 0 or `element` is not an integer, floating-point or
    /// pointer type.
    pub fn vector_type(&self, element: Type<'m>, len: u32) -> Result<Type<'m>> {
        let ok = matches!(
            element.kind(),
            TypeKind::Integer
                | TypeKind::Pointer
                | TypeKind::Half
                | TypeKind::BFloat
                | TypeKind::Float
                | TypeKind::Double
                | TypeKind::X86Fp80
                | TypeKind::Fp128
                | TypeKind::PpcFp128
        );
        if !ok || len == 0 {
            return refuse(format!("no vector of {len} x `{element}`"));
        }
        let raw = self.ty(element)?;
        // SAFETY: `raw` is a valid vector element type of our context and `len > 0`.
        Ok(Type::from_raw(unsafe { LLVMVectorType(raw, len) }))
    }

    /// A literal struct `{ fields... }` (`<{ ... }>` when `packed`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if a field cannot be a struct element.
    pub fn struct_type(&self, fields: &[Type<'m>], packed: bool) -> Result<Type<'m>> {
        let mut raw = fields
            .iter()
            .map(|&f| self.aggregate_element("a struct", f))
            .collect::<Result<Vec<_>>>()?;
        let n = c_uint::try_from(raw.len()).or_else(|_| refuse("too many struct fields"))?;
        // SAFETY: `raw` holds `n` valid element types of our context.
        Ok(Type::from_raw(unsafe {
            LLVMStructTypeInContext(self.ctx, raw.as_mut_ptr(), n, i32::from(packed))
        }))
    }

    fn aggregate_element(&self, what: &str, ty: Type<'m>) -> Result<LLVMTypeRef> {
        if !is_value_type(ty) || ty.kind() == TypeKind::X86Amx {
            return refuse(format!("{what} cannot hold `{ty}`"));
        }
        self.ty(ty)
    }

    /// `ret (params...)`, with `...` when `vararg`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `ret` is a function, label or metadata type, or a parameter is
    /// `void` or a function type.
    pub fn function_type(
        &self,
        ret: Type<'m>,
        params: &[Type<'m>],
        vararg: bool,
    ) -> Result<Type<'m>> {
        if matches!(
            ret.kind(),
            TypeKind::Function | TypeKind::Label | TypeKind::Metadata
        ) {
            return refuse(format!("a function cannot return `{ret}`"));
        }
        let ret_raw = self.ty(ret)?;
        let mut raw = Vec::with_capacity(params.len());
        for &p in params {
            if matches!(p.kind(), TypeKind::Void | TypeKind::Function) {
                return refuse(format!("a parameter cannot have type `{p}`"));
            }
            raw.push(self.ty(p)?);
        }
        let n = c_uint::try_from(raw.len()).or_else(|_| refuse("too many parameters"))?;
        // SAFETY: all types are valid and of our context; `raw` holds `n` of them.
        Ok(Type::from_raw(unsafe {
            LLVMFunctionType(ret_raw, raw.as_mut_ptr(), n, i32::from(vararg))
        }))
    }

    // -----------------------------------------------------------------------------------
    // Constants

    /// The integer constant `value` of integer type `ty`, sign-extended or truncated to
    /// its width.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `ty` is not an integer type.
    pub fn const_int(&self, ty: Type<'m>, value: i64) -> Result<Value<'m>> {
        if !ty.is_integer() {
            return refuse(format!("an integer constant cannot have type `{ty}`"));
        }
        let raw = self.ty(ty)?;
        // SAFETY: `raw` is an integer type of our context. The bits are reinterpreted
        // and sign-extended by LLVM as asked.
        Ok(Value::from_raw(unsafe {
            LLVMConstInt(raw, value as u64, 1)
        }))
    }

    /// The null or zero constant of `ty` (`ptr addrspace(10) null`, `zeroinitializer`,
    /// `none` for tokens).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] for types without one (`void`, labels, functions, metadata,
    /// `x86_amx`, target types).
    pub fn const_null(&self, ty: Type<'m>) -> Result<Value<'m>> {
        let ok = ty.kind() == TypeKind::Token
            || (is_value_type(ty) && !matches!(ty.kind(), TypeKind::X86Amx | TypeKind::TargetExt));
        if !ok {
            return refuse(format!("`{ty}` has no null constant"));
        }
        let raw = self.ty(ty)?;
        // SAFETY: `raw` is a type of our context that has a null value.
        Ok(Value::from_raw(unsafe { LLVMConstNull(raw) }))
    }

    /// `ptr addrspace(N) null`.
    ///
    /// # Errors
    ///
    /// As [`Builder::ptr_type`].
    pub fn null_ptr(&self, address_space: u32) -> Result<Value<'m>> {
        self.const_null(self.ptr_type(address_space)?)
    }

    /// `undef` of `ty`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] for `void`, labels, functions, metadata and tokens.
    pub fn undef(&self, ty: Type<'m>) -> Result<Value<'m>> {
        let raw = self.value_type("undef", ty)?;
        // SAFETY: `raw` is a first-class type of our context.
        Ok(Value::from_raw(unsafe { LLVMGetUndef(raw) }))
    }

    /// `poison` of `ty`.
    ///
    /// # Errors
    ///
    /// As [`Builder::undef`].
    pub fn poison(&self, ty: Type<'m>) -> Result<Value<'m>> {
        let raw = self.value_type("poison", ty)?;
        // SAFETY: `raw` is a first-class type of our context.
        Ok(Value::from_raw(unsafe { LLVMGetPoison(raw) }))
    }

    // -----------------------------------------------------------------------------------
    // Functions

    /// The function `name` of type `fn_type`, declared if the module has none yet (LLVM's
    /// `getOrInsertFunction`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `fn_type` is not a function type, or the name is taken by a
    /// function of another type or by another global.
    pub fn declare_function(&self, name: &str, fn_type: Type<'m>) -> Result<Function<'m>> {
        if fn_type.kind() != TypeKind::Function {
            return refuse(format!("@{name}: `{fn_type}` is not a function type"));
        }
        let ty = self.ty(fn_type)?;
        let c_name = c_string("function name", name)?;
        let m = self.module.as_raw();
        // SAFETY: the module is live and `c_name` is NUL-terminated.
        let existing = unsafe { LLVMGetNamedFunction(m, c_name.as_ptr()) };
        if !existing.is_null() {
            let f = Function::from_raw(existing);
            if f.function_type() != fn_type {
                return refuse(format!(
                    "@{name} already exists with type `{}`, not `{fn_type}`",
                    f.function_type()
                ));
            }
            return Ok(f);
        }
        // SAFETY: the module is live; the name is valid for its length.
        let other = unsafe {
            !LLVMGetNamedGlobal(m, c_name.as_ptr()).is_null()
                || !LLVMGetNamedGlobalAlias(m, c_name.as_ptr(), name.len()).is_null()
        };
        if other {
            return refuse(format!(
                "@{name} already names a global that is not a function"
            ));
        }
        // SAFETY: the module is live, `ty` is a function type of its context.
        let raw = unsafe { LLVMAddFunction(m, c_name.as_ptr(), ty) };
        let f = Function::from_raw(raw);
        if f.name() != name {
            // LLVM renamed it to avoid a clash (with an ifunc): take it back.
            // SAFETY: `raw` is the declaration just made, with no uses.
            unsafe { LLVMDeleteFunction(raw) };
            return refuse(format!(
                "@{name} already names a global that is not a function"
            ));
        }
        Ok(f)
    }

    // -----------------------------------------------------------------------------------
    // Memory

    /// `alloca ty` (with `count` elements when given), named `name`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `ty` is unsized or `count` is not an integer.
    pub fn alloca(
        &self,
        ty: Type<'m>,
        count: Option<Value<'m>>,
        name: &str,
    ) -> Result<Instruction<'m>> {
        let ty_raw = self.sized_type("alloca", ty)?;
        let count = match count {
            Some(c) if !c.ty().is_integer() => {
                return refuse(format!("alloca count `{c}` is not an integer"));
            }
            Some(c) => Some(self.val(c)?),
            None => None,
        };
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands checked above.
        let raw = unsafe {
            match count {
                Some(c) => LLVMBuildArrayAlloca(self.raw, ty_raw, c, c_name.as_ptr()),
                None => LLVMBuildAlloca(self.raw, ty_raw, c_name.as_ptr()),
            }
        };
        Ok(Instruction::from_raw(raw))
    }

    /// `load ty, ptr %ptr`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `ty` is unsized or `ptr` is not a pointer.
    pub fn load(
        &self,
        ty: Type<'m>,
        ptr: impl Into<Value<'m>>,
        name: &str,
    ) -> Result<Instruction<'m>> {
        let ptr = ptr.into();
        let ty_raw = self.sized_type("load", ty)?;
        if !ptr.ty().is_pointer() {
            return refuse(format!("load from `{ptr}`, which is not a pointer"));
        }
        let p = self.val(ptr)?;
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands checked above.
        let raw = unsafe { LLVMBuildLoad2(self.raw, ty_raw, p, c_name.as_ptr()) };
        Ok(Instruction::from_raw(raw))
    }

    /// `store value, ptr %ptr`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `value` is unsized or `ptr` is not a pointer.
    pub fn store(
        &self,
        value: impl Into<Value<'m>>,
        ptr: impl Into<Value<'m>>,
    ) -> Result<Instruction<'m>> {
        let (value, ptr) = (value.into(), ptr.into());
        self.sized_type("store", value.ty())?;
        if !ptr.ty().is_pointer() {
            return refuse(format!("store to `{ptr}`, which is not a pointer"));
        }
        let (v, p) = (self.val(value)?, self.val(ptr)?);
        self.ready()?;
        // SAFETY: positioned builder; operands checked above.
        let raw = unsafe { LLVMBuildStore(self.raw, v, p) };
        Ok(Instruction::from_raw(raw))
    }

    /// `getelementptr [inbounds] source_ty, ptr %ptr, indices...`. Struct indices must be
    /// constant integers; vector operands must agree in length. Folds to a constant when
    /// every operand is one.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if the operands do not form a valid GEP.
    pub fn gep(
        &self,
        source_ty: Type<'m>,
        ptr: impl Into<Value<'m>>,
        indices: &[Value<'m>],
        inbounds: bool,
        name: &str,
    ) -> Result<Value<'m>> {
        let ptr = ptr.into();
        let src = self.sized_type("getelementptr", source_ty)?;
        if !ptr.ty().scalar().is_pointer() {
            return refuse(format!("getelementptr on `{ptr}`, which is not a pointer"));
        }
        let mut lanes = shape(ptr.ty());
        let mut current = source_ty;
        for (i, index) in indices.iter().enumerate() {
            if !index.ty().scalar().is_integer() {
                return refuse(format!("getelementptr index `{index}` is not an integer"));
            }
            if let Some(s) = shape(index.ty()) {
                if lanes.is_some_and(|l| l != s) {
                    return refuse("getelementptr operands are vectors of different lengths");
                }
                lanes = Some(s);
            }
            if i == 0 {
                continue;
            }
            current = match current.kind() {
                TypeKind::Struct => {
                    let fields = current.struct_fields().unwrap_or_default();
                    let field = index
                        .const_uint()
                        .and_then(|k| usize::try_from(k).ok())
                        .and_then(|k| fields.get(k).copied());
                    match field {
                        Some(f) => f,
                        None => {
                            return refuse(format!(
                                "getelementptr index `{index}` into `{current}` is not a constant field number"
                            ))
                        }
                    }
                }
                TypeKind::Array | TypeKind::Vector => match current.element_type() {
                    Some(e) => e,
                    None => return refuse(format!("cannot index into `{current}`")),
                },
                _ => return refuse(format!("getelementptr cannot index into `{current}`")),
            };
        }
        let p = self.val(ptr)?;
        let mut raw_indices = indices
            .iter()
            .map(|&i| self.val(i))
            .collect::<Result<Vec<_>>>()?;
        let n = c_uint::try_from(raw_indices.len()).or_else(|_| refuse("too many indices"))?;
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands checked above to form a valid GEP.
        let raw = unsafe {
            if inbounds {
                LLVMBuildInBoundsGEP2(
                    self.raw,
                    src,
                    p,
                    raw_indices.as_mut_ptr(),
                    n,
                    c_name.as_ptr(),
                )
            } else {
                LLVMBuildGEP2(
                    self.raw,
                    src,
                    p,
                    raw_indices.as_mut_ptr(),
                    n,
                    c_name.as_ptr(),
                )
            }
        };
        Ok(Value::from_raw(raw))
    }

    // -----------------------------------------------------------------------------------
    // Casts

    /// `addrspacecast value to dest_ty`: between pointers (or vectors of pointers of the
    /// same length) in different address spaces.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if the cast is not valid.
    pub fn addrspacecast(
        &self,
        value: impl Into<Value<'m>>,
        dest_ty: Type<'m>,
        name: &str,
    ) -> Result<Value<'m>> {
        let value = value.into();
        let src_ty = value.ty();
        let ok = src_ty.scalar().is_pointer()
            && dest_ty.scalar().is_pointer()
            && shape(src_ty) == shape(dest_ty)
            && src_ty.scalar().address_space() != dest_ty.scalar().address_space();
        if !ok {
            return refuse(format!("cannot addrspacecast `{value}` to `{dest_ty}`"));
        }
        self.cast(value, dest_ty, name, LLVMBuildAddrSpaceCast)
    }

    /// `bitcast value to dest_ty`: between pointers of one address space, or between
    /// non-aggregate types of the same size.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if the cast is not valid.
    pub fn bitcast(
        &self,
        value: impl Into<Value<'m>>,
        dest_ty: Type<'m>,
        name: &str,
    ) -> Result<Value<'m>> {
        let value = value.into();
        let src_ty = value.ty();
        let (sp, dp) = (src_ty.scalar().is_pointer(), dest_ty.scalar().is_pointer());
        let ok = if sp || dp {
            sp && dp
                && src_ty.scalar().address_space() == dest_ty.scalar().address_space()
                && shape(src_ty) == shape(dest_ty)
        } else {
            is_value_type(src_ty)
                && is_value_type(dest_ty)
                && primitive_bits(src_ty).is_some()
                && primitive_bits(src_ty) == primitive_bits(dest_ty)
        };
        if !ok {
            return refuse(format!("cannot bitcast `{value}` to `{dest_ty}`"));
        }
        self.cast(value, dest_ty, name, LLVMBuildBitCast)
    }

    /// `ptrtoint value to dest_ty` (pointer, or vector of pointers, to integers).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if the cast is not valid.
    pub fn ptrtoint(
        &self,
        value: impl Into<Value<'m>>,
        dest_ty: Type<'m>,
        name: &str,
    ) -> Result<Value<'m>> {
        let value = value.into();
        let ok = value.ty().scalar().is_pointer()
            && dest_ty.scalar().is_integer()
            && shape(value.ty()) == shape(dest_ty);
        if !ok {
            return refuse(format!("cannot ptrtoint `{value}` to `{dest_ty}`"));
        }
        self.cast(value, dest_ty, name, LLVMBuildPtrToInt)
    }

    /// `inttoptr value to dest_ty` (integer, or vector of integers, to pointers).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if the cast is not valid.
    pub fn inttoptr(
        &self,
        value: impl Into<Value<'m>>,
        dest_ty: Type<'m>,
        name: &str,
    ) -> Result<Value<'m>> {
        let value = value.into();
        let ok = value.ty().scalar().is_integer()
            && dest_ty.scalar().is_pointer()
            && shape(value.ty()) == shape(dest_ty);
        if !ok {
            return refuse(format!("cannot inttoptr `{value}` to `{dest_ty}`"));
        }
        self.cast(value, dest_ty, name, LLVMBuildIntToPtr)
    }

    fn cast(
        &self,
        value: Value<'m>,
        dest_ty: Type<'m>,
        name: &str,
        build: unsafe extern "C" fn(
            LLVMBuilderRef,
            LLVMValueRef,
            LLVMTypeRef,
            *const std::ffi::c_char,
        ) -> LLVMValueRef,
    ) -> Result<Value<'m>> {
        let v = self.val(value)?;
        let ty = self.ty(dest_ty)?;
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; the callers checked that the cast is valid.
        let raw = unsafe { build(self.raw, v, ty, c_name.as_ptr()) };
        Ok(Value::from_raw(raw))
    }

    // -----------------------------------------------------------------------------------
    // Calls

    /// Checks a call's callee and arguments against `fn_type`; returns them raw.
    fn call_operands(
        &self,
        fn_type: Type<'m>,
        callee: Value<'m>,
        args: &[Value<'m>],
    ) -> Result<(LLVMTypeRef, LLVMValueRef, Vec<LLVMValueRef>)> {
        let (Some(params), Some(_)) = (fn_type.param_types(), fn_type.return_type()) else {
            return refuse(format!("`{fn_type}` is not a function type"));
        };
        if !callee.ty().is_pointer() {
            return refuse(format!("the callee `{callee}` is not a pointer"));
        }
        let count_ok = if fn_type.is_vararg() {
            args.len() >= params.len()
        } else {
            args.len() == params.len()
        };
        if !count_ok {
            return refuse(format!(
                "`{fn_type}` takes {} arguments, not {}",
                params.len(),
                args.len()
            ));
        }
        for (i, arg) in args.iter().enumerate() {
            match params.get(i) {
                Some(&p) if p != arg.ty() => {
                    return refuse(format!("argument {i} `{arg}` is not of type `{p}`"));
                }
                None if !is_value_type(arg.ty()) => {
                    return refuse(format!("variadic argument `{arg}` has no value type"));
                }
                _ => {}
            }
        }
        let ty = self.ty(fn_type)?;
        let callee = self.val(callee)?;
        let args = args
            .iter()
            .map(|&a| self.val(a))
            .collect::<Result<Vec<_>>>()?;
        Ok((ty, callee, args))
    }

    /// Makes LLVM operand bundles from ours.
    fn make_bundles(&self, bundles: &[OperandBundle<'m>]) -> Result<Vec<OwnedBundle>> {
        let mut out = Vec::with_capacity(bundles.len());
        for b in bundles {
            let mut args = b
                .args
                .iter()
                .map(|&a| self.val(a))
                .collect::<Result<Vec<_>>>()?;
            let n = c_uint::try_from(args.len()).or_else(|_| refuse("too many bundle values"))?;
            // SAFETY: the tag is valid for its length, `args` holds `n` live values; the
            // bundle copies both and is disposed by `OwnedBundle`.
            let raw = unsafe {
                LLVMCreateOperandBundle(b.tag.as_ptr().cast(), b.tag.len(), args.as_mut_ptr(), n)
            };
            out.push(OwnedBundle(raw));
        }
        Ok(out)
    }

    /// `call fn_type callee(args...) [bundles...]`, named `name` (unless it returns
    /// `void`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `fn_type` is not a function type, `callee` is not a pointer, or
    /// the arguments do not match the parameters.
    pub fn call(
        &self,
        fn_type: Type<'m>,
        callee: impl Into<Value<'m>>,
        args: &[Value<'m>],
        bundles: &[OperandBundle<'m>],
        name: &str,
    ) -> Result<Instruction<'m>> {
        let (ty, callee, args) = self.call_operands(fn_type, callee.into(), args)?;
        let bundles = self.make_bundles(bundles)?;
        let ret = fn_type.return_type().unwrap_or(fn_type);
        let c_name = self.name_for(ret, name)?;
        self.ready()?;
        Ok(Instruction::from_raw(
            self.build_call(ty, callee, args, &bundles, None, &c_name),
        ))
    }

    /// Builds a call (or, with `dests`, an invoke) at the current position.
    fn build_call(
        &self,
        ty: LLVMTypeRef,
        callee: LLVMValueRef,
        mut args: Vec<LLVMValueRef>,
        bundles: &[OwnedBundle],
        dests: Option<(LLVMBasicBlockRef, LLVMBasicBlockRef)>,
        name: &CString,
    ) -> LLVMValueRef {
        let mut raw_bundles: Vec<LLVMOperandBundleRef> = bundles.iter().map(|b| b.0).collect();
        // Counts were checked to fit `c_uint` by the callers (they come from LLVM or were
        // converted already).
        let nargs = c_uint::try_from(args.len()).unwrap_or(c_uint::MAX);
        let nbundles = c_uint::try_from(raw_bundles.len()).unwrap_or(c_uint::MAX);
        // SAFETY: the builder is positioned; type, callee, arguments and bundles were
        // checked against each other; the arrays hold the counts given.
        unsafe {
            match dests {
                None => LLVMBuildCallWithOperandBundles(
                    self.raw,
                    ty,
                    callee,
                    args.as_mut_ptr(),
                    nargs,
                    raw_bundles.as_mut_ptr(),
                    nbundles,
                    name.as_ptr(),
                ),
                Some((normal, unwind)) => LLVMBuildInvokeWithOperandBundles(
                    self.raw,
                    ty,
                    callee,
                    args.as_mut_ptr(),
                    nargs,
                    normal,
                    unwind,
                    raw_bundles.as_mut_ptr(),
                    nbundles,
                    name.as_ptr(),
                ),
            }
        }
    }

    /// Rebuilds `call` without its operand bundles tagged `tag` (the last step of GC root
    /// placement drops `"jl_roots"`), returning the new call; `call` itself is returned
    /// unchanged when it has no such bundle. The new call has the same callee, function
    /// type, arguments, other bundles, calling convention, tail-call kind, attributes,
    /// fast-math flags, metadata and debug location, and takes the old call's name and
    /// uses; the old call is erased. A builder positioned before the old call is moved
    /// before the new one.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `call` is not a `call` or `invoke`, is erased, or belongs to
    /// another module.
    pub fn recreate_call_without_bundle(
        &self,
        call: Instruction<'m>,
        tag: &str,
    ) -> Result<Instruction<'m>> {
        let site = self.call_site(call)?;
        let bundles = site.owned_bundles();
        if !bundles.iter().any(|b| b.tag() == tag) {
            return Ok(call);
        }
        let kept: Vec<OwnedBundle> = bundles.into_iter().filter(|b| b.tag() != tag).collect();
        let args: Vec<LLVMValueRef> = site.arguments().into_iter().map(Value::as_raw).collect();
        let new = self.rebuild(site, site.function_type(), site.called_value(), args, &kept)?;
        self.copy_call_properties(site, new, true, true)?;
        self.finish_replacement(call, new)?;
        Ok(new)
    }

    /// Replaces `call` by a call of `new_callee` with type `new_fn_type` and arguments
    /// `new_args`, built just before it, and returns the new call (an `invoke` stays an
    /// `invoke` with the same destinations). Kept from the old call: operand bundles,
    /// function attributes, return attributes (when the return type is unchanged),
    /// tail-call kind (`musttail` only when the function type is unchanged), fast-math
    /// flags, metadata, debug location, name and uses. Parameter attributes are copied only
    /// when the function type is unchanged. The calling convention is the new callee's
    /// when it is a function, else the old call's.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `call` is not a `call` or `invoke`, the new callee or arguments
    /// do not fit `new_fn_type`, or the old call's result is used and the new return type
    /// differs from it.
    pub fn replace_callee(
        &self,
        call: Instruction<'m>,
        new_fn_type: Type<'m>,
        new_callee: impl Into<Value<'m>>,
        new_args: &[Value<'m>],
    ) -> Result<Instruction<'m>> {
        let new_callee = new_callee.into();
        let site = self.call_site(call)?;
        let (_, _, args) = self.call_operands(new_fn_type, new_callee, new_args)?;
        let new_ret = new_fn_type.return_type().unwrap_or(new_fn_type);
        if new_ret != call.ty() && call.as_value().has_uses() {
            return refuse(format!(
                "{} is used, and the new call would return `{new_ret}` instead of `{}`",
                call.describe(),
                call.ty()
            ));
        }
        let bundles = site.owned_bundles();
        let new = self.rebuild(site, new_fn_type, new_callee, args, &bundles)?;
        let same_type = new_fn_type == site.function_type();
        self.copy_call_properties(site, new, new_ret == call.ty(), same_type)?;
        if let Some(f) = new_callee.as_function() {
            // SAFETY: `f` is a live function, `new` a live call site.
            unsafe {
                LLVMSetInstructionCallConv(new.as_raw(), LLVMGetFunctionCallConv(f.as_raw()))
            };
        }
        self.finish_replacement(call, new)?;
        Ok(new)
    }

    fn call_site(&self, call: Instruction<'m>) -> Result<Call<'m>> {
        self.inst(call)?;
        match call.as_call() {
            Some(site) if site.instruction().opcode() != Opcode::CallBr => Ok(site),
            _ => refuse(format!("{} is not a call or invoke", call.describe())),
        }
    }

    /// Builds the replacement of `site` just before it (unnamed; the name moves later).
    fn rebuild(
        &self,
        site: Call<'m>,
        fn_type: Type<'m>,
        callee: Value<'m>,
        args: Vec<LLVMValueRef>,
        bundles: &[OwnedBundle],
    ) -> Result<Instruction<'m>> {
        let ty = self.ty(fn_type)?;
        let callee = self.val(callee)?;
        let dests = match (site.normal_dest(), site.unwind_dest()) {
            (Some(n), Some(u)) => Some((n.as_raw(), u.as_raw())),
            _ => None,
        };
        let saved = self.position.get();
        self.position
            .set(Position::Before(site.instruction().as_raw()));
        let ready = self.ready();
        self.position.set(saved);
        ready?;
        let raw = self.build_call(ty, callee, args, bundles, dests, &CString::default());
        Ok(Instruction::from_raw(raw))
    }

    /// Copies what a rebuilt call keeps from the old one.
    fn copy_call_properties(
        &self,
        old: Call<'m>,
        new: Instruction<'m>,
        keep_return_attrs: bool,
        same_type: bool,
    ) -> Result<()> {
        let (o, n) = (old.instruction().as_raw(), new.as_raw());
        // SAFETY: `o` and `n` are live call sites of our module; attributes are uniqued
        // in the context and may be shared; metadata entries are disposed after use.
        unsafe {
            LLVMSetInstructionCallConv(n, LLVMGetInstructionCallConv(o));
            if old.instruction().opcode() == Opcode::Call && new.opcode() == Opcode::Call {
                let kind = LLVMGetTailCallKind(o);
                if kind != LLVMTailCallKind::LLVMTailCallKindMustTail || same_type {
                    LLVMSetTailCallKind(n, kind);
                }
            }
            let mut indices = vec![AttributeIndex::Function];
            if keep_return_attrs {
                indices.push(AttributeIndex::Return);
            }
            if same_type {
                indices.extend((0..old.num_arguments()).map(AttributeIndex::Param));
            }
            for index in indices.into_iter().filter_map(AttributeIndex::raw) {
                let count = LLVMGetCallSiteAttributeCount(o, index);
                let mut attrs: Vec<LLVMAttributeRef> = vec![std::ptr::null_mut(); count as usize];
                if count > 0 {
                    LLVMGetCallSiteAttributes(o, index, attrs.as_mut_ptr());
                }
                for a in attrs.into_iter().filter(|a| !a.is_null()) {
                    LLVMAddCallSiteAttribute(n, index, a);
                }
            }
            if LLVMCanValueUseFastMathFlags(o) != 0 && LLVMCanValueUseFastMathFlags(n) != 0 {
                LLVMSetFastMathFlags(n, LLVMGetFastMathFlags(o));
            }
            let mut count = 0;
            let entries = LLVMInstructionGetAllMetadataOtherThanDebugLoc(o, &mut count);
            if !entries.is_null() {
                for i in 0..c_uint::try_from(count).unwrap_or(0) {
                    let kind = LLVMValueMetadataEntriesGetKind(entries, i);
                    let md = LLVMValueMetadataEntriesGetMetadata(entries, i);
                    LLVMSetMetadata(n, kind, LLVMMetadataAsValue(self.ctx, md));
                }
                LLVMDisposeValueMetadataEntries(entries);
            }
            let dbg = LLVMGetMDKindIDInContext(self.ctx, c"dbg".as_ptr(), 3);
            let loc = LLVMGetMetadata(o, dbg);
            if !loc.is_null() {
                LLVMSetMetadata(n, dbg, loc);
            }
        }
        Ok(())
    }

    /// Moves the uses and the name of `old` to `new`, erases `old`, and moves a position
    /// before `old` to `new`.
    fn finish_replacement(&self, old: Instruction<'m>, new: Instruction<'m>) -> Result<()> {
        let name = old.name();
        if old.as_value().has_uses() {
            // SAFETY: both live, of one type (checked by the callers).
            unsafe { LLVMReplaceAllUsesWith(old.as_raw(), new.as_raw()) };
        }
        self.erase(old)?;
        if !name.is_empty() && !new.ty().is_void() {
            // SAFETY: `new` is live and not void; the name is valid for its length.
            unsafe { LLVMSetValueName2(new.as_raw(), name.as_ptr().cast(), name.len()) };
        }
        if self.position.get() == Position::Before(old.as_raw()) {
            self.position.set(Position::Before(new.as_raw()));
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------
    // Other instructions

    /// An empty `phi ty`; add its incoming values with [`Builder::add_incoming`]. Position
    /// the builder at the start of a block first ([`Builder::position_at_start`]).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `ty` is not a value type.
    pub fn phi(&self, ty: Type<'m>, name: &str) -> Result<Instruction<'m>> {
        let ty_raw = self.value_type("phi", ty)?;
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; the type was checked.
        Ok(Instruction::from_raw(unsafe {
            LLVMBuildPhi(self.raw, ty_raw, c_name.as_ptr())
        }))
    }

    /// Adds the incoming pair `[value, %block]` to `phi`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `phi` is not a `phi`, `value` has another type, or `block` is in
    /// another function.
    pub fn add_incoming(
        &self,
        phi: Instruction<'m>,
        value: impl Into<Value<'m>>,
        block: BasicBlock<'m>,
    ) -> Result<()> {
        let value = value.into();
        let p = self.inst(phi)?;
        if phi.opcode() != Opcode::Phi {
            return refuse(format!("{} is not a phi", phi.describe()));
        }
        if value.ty() != phi.ty() {
            return refuse(format!(
                "`{value}` does not have the type of {}",
                phi.describe()
            ));
        }
        if phi.function() != Some(block.function()) {
            return refuse(format!(
                "block {} is not in the function of {}",
                block.label(),
                phi.describe()
            ));
        }
        let mut v = self.val(value)?;
        let mut b = self.block(block)?;
        // SAFETY: `p` is a live phi; one value and one block of matching type and function.
        unsafe { LLVMAddIncoming(p, &mut v, &mut b, 1) };
        Ok(())
    }

    /// `select i1 cond, then, else` (a vector condition selects lane by lane).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if the arms differ in type or the condition is not `i1` (or a
    /// vector of `i1` as long as the arms).
    pub fn select(
        &self,
        cond: impl Into<Value<'m>>,
        then: impl Into<Value<'m>>,
        otherwise: impl Into<Value<'m>>,
        name: &str,
    ) -> Result<Value<'m>> {
        let (cond, then, otherwise) = (cond.into(), then.into(), otherwise.into());
        let cty = cond.ty();
        let cond_ok = cty.scalar().int_width() == Some(1)
            && (shape(cty).is_none() || shape(cty) == shape(then.ty()));
        if !cond_ok || then.ty() != otherwise.ty() || !is_value_type(then.ty()) {
            return refuse(format!(
                "cannot select between `{then}` and `{otherwise}` on `{cond}`"
            ));
        }
        let (c, t, e) = (self.val(cond)?, self.val(then)?, self.val(otherwise)?);
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands checked above.
        Ok(Value::from_raw(unsafe {
            LLVMBuildSelect(self.raw, c, t, e, c_name.as_ptr())
        }))
    }

    /// `extractelement vector, index`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `vector` is not a vector or `index` not an integer.
    pub fn extract_element(
        &self,
        vector: impl Into<Value<'m>>,
        index: impl Into<Value<'m>>,
        name: &str,
    ) -> Result<Value<'m>> {
        let (vector, index) = (vector.into(), index.into());
        if !vector.ty().is_vector() || !index.ty().is_integer() {
            return refuse(format!("cannot extractelement `{index}` from `{vector}`"));
        }
        let (v, i) = (self.val(vector)?, self.val(index)?);
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands checked above.
        Ok(Value::from_raw(unsafe {
            LLVMBuildExtractElement(self.raw, v, i, c_name.as_ptr())
        }))
    }

    /// `insertelement vector, element, index`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `vector` is not a vector of `element`'s type or `index` not an
    /// integer.
    pub fn insert_element(
        &self,
        vector: impl Into<Value<'m>>,
        element: impl Into<Value<'m>>,
        index: impl Into<Value<'m>>,
        name: &str,
    ) -> Result<Value<'m>> {
        let (vector, element, index) = (vector.into(), element.into(), index.into());
        if vector.ty().element_type() != Some(element.ty())
            || !vector.ty().is_vector()
            || !index.ty().is_integer()
        {
            return refuse(format!(
                "cannot insertelement `{element}` into `{vector}` at `{index}`"
            ));
        }
        let (v, e, i) = (self.val(vector)?, self.val(element)?, self.val(index)?);
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands checked above.
        Ok(Value::from_raw(unsafe {
            LLVMBuildInsertElement(self.raw, v, e, i, c_name.as_ptr())
        }))
    }

    /// The type of field `index` of aggregate type `ty`.
    fn field_type(ty: Type<'m>, index: u32) -> Option<Type<'m>> {
        match ty.kind() {
            TypeKind::Struct => ty
                .struct_fields()?
                .get(usize::try_from(index).ok()?)
                .copied(),
            TypeKind::Array => (u64::from(index) < ty.array_len()?).then(|| ty.element_type())?,
            _ => None,
        }
    }

    /// `extractvalue aggregate, index`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `aggregate` is not a struct or array with that field.
    pub fn extract_value(
        &self,
        aggregate: impl Into<Value<'m>>,
        index: u32,
        name: &str,
    ) -> Result<Value<'m>> {
        let aggregate = aggregate.into();
        if Self::field_type(aggregate.ty(), index).is_none() {
            return refuse(format!("`{aggregate}` has no field {index}"));
        }
        let a = self.val(aggregate)?;
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; the field exists.
        Ok(Value::from_raw(unsafe {
            LLVMBuildExtractValue(self.raw, a, index, c_name.as_ptr())
        }))
    }

    /// `insertvalue aggregate, value, index`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `aggregate` has no field `index` of `value`'s type.
    pub fn insert_value(
        &self,
        aggregate: impl Into<Value<'m>>,
        value: impl Into<Value<'m>>,
        index: u32,
        name: &str,
    ) -> Result<Value<'m>> {
        let (aggregate, value) = (aggregate.into(), value.into());
        if Self::field_type(aggregate.ty(), index) != Some(value.ty()) {
            return refuse(format!(
                "cannot insert `{value}` as field {index} of `{aggregate}`"
            ));
        }
        let (a, v) = (self.val(aggregate)?, self.val(value)?);
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; the field exists and has the value's type.
        Ok(Value::from_raw(unsafe {
            LLVMBuildInsertValue(self.raw, a, v, index, c_name.as_ptr())
        }))
    }

    /// `ret value` (`ret void` for `None`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if the value does not match the function's return type.
    pub fn ret(&self, value: Option<Value<'m>>) -> Result<Instruction<'m>> {
        self.ready()?;
        let Some(function) = self.current_function() else {
            return refuse("the builder has no position");
        };
        let expected = function.return_type();
        let actual = value.map_or_else(|| self.void_type(), Value::ty);
        if expected != actual {
            return refuse(format!(
                "@{} returns `{expected}`, not `{actual}`",
                function.name()
            ));
        }
        let value = value.map(|v| self.val(v)).transpose()?;
        // SAFETY: positioned builder; the value (if any) has the function's return type.
        let raw = unsafe {
            match value {
                Some(v) => LLVMBuildRet(self.raw, v),
                None => LLVMBuildRetVoid(self.raw),
            }
        };
        Ok(Instruction::from_raw(raw))
    }

    // -----------------------------------------------------------------------------------
    // Changing existing IR

    /// Sets the alignment of an `alloca`, `load` or `store` to `bytes`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] for other instructions or if `bytes` is not a power of two.
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
    /// [`Error::Edit`] if `inst` is erased or belongs to another module, or the kind's name
    /// is too long.
    pub fn remove_metadata(&self, inst: Instruction<'m>, kind: &str) -> Result<()> {
        let raw = self.inst(inst)?;
        let Ok(len) = c_uint::try_from(kind.len()) else {
            return refuse(format!("metadata kind `{kind}` is too long"));
        };
        // SAFETY: `self.ctx` is live and the name valid for `len` bytes; `raw` is a live
        // instruction of this module; a null node removes the attachment.
        unsafe {
            let id = LLVMGetMDKindIDInContext(self.ctx, kind.as_ptr().cast(), len);
            LLVMSetMetadata(raw, id, std::ptr::null_mut());
        }
        Ok(())
    }

    /// Makes a `load` or `store` atomic with `unordered` ordering (what a GC's readers of an
    /// object header need: no tearing, no ordering).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `inst` is not a load or store.
    pub fn set_unordered_atomic(&self, inst: Instruction<'m>) -> Result<()> {
        let raw = self.inst(inst)?;
        if !matches!(inst.opcode(), Opcode::Load | Opcode::Store) {
            return refuse(format!("cannot make {} atomic", inst.describe()));
        }
        // SAFETY: `raw` is a live load or store.
        unsafe { LLVMSetOrdering(raw, LLVMAtomicOrdering::LLVMAtomicOrderingUnordered) };
        Ok(())
    }

    /// Adds the enum attribute `name` (`noalias`, `nonnull`, `align`, `dereferenceable`),
    /// with `value` for those that take one, at `index` of the call site `call`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] if `call` is not a call or `invoke`, or LLVM knows no enum attribute
    /// by that name.
    pub fn add_call_attribute(
        &self,
        call: Instruction<'m>,
        index: AttributeIndex,
        name: &str,
        value: u64,
    ) -> Result<()> {
        let raw = self.call_site(call)?;
        // SAFETY: the name is valid for its length.
        let kind = unsafe { LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) };
        if kind == 0 {
            return refuse(format!("no enum attribute named `{name}`"));
        }
        let Some(idx) = index.raw() else {
            return refuse(format!("attribute index {index:?} is out of range"));
        };
        // SAFETY: `self.ctx` is live; `raw` is a live call site of this module; the
        // attribute belongs to the same context.
        unsafe {
            let attr = LLVMCreateEnumAttribute(self.ctx, kind, value);
            LLVMAddCallSiteAttribute(raw.instruction().as_raw(), idx, attr);
        }
        Ok(())
    }

    /// Names `value` (an instruction, argument or block; LLVM adds a number on a clash).
    /// An empty name makes it unnamed.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`] for values of type `void`, constants, and values of other modules.
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
    /// [`Error::Edit`] if the types differ, `old` is another kind of value, or either
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
    /// [`Error::Edit`] if there is no such operand or `value` has another type than the
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
    /// [`Error::Edit`] if `inst` is already erased, belongs to another module, or still
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
        // SAFETY: `raw` is a live instruction in a block of our module, with no uses. It
        // is removed from its block but not freed; every operand that is not metadata is
        // replaced by a constant of its type that never goes away, so nothing in the
        // module (blocks included) lists it as a user any more. `Module` frees it.
        unsafe {
            let ty = LLVMTypeOf(raw);
            if is_value_type(Type::from_raw(ty)) {
                // There are no uses left; this redirects references from metadata.
                LLVMReplaceAllUsesWith(raw, LLVMGetPoison(ty));
            }
            LLVMInstructionRemoveFromParent(raw);
            let label = LLVMLabelTypeInContext(self.ctx);
            for i in 0..inst.num_operands() {
                let Some(op) = inst.operand(i) else { continue };
                let op_ty = op.ty();
                let filler = match op_ty.kind() {
                    TypeKind::Metadata => continue,
                    _ if op.is_undef() => continue,
                    TypeKind::Token => LLVMConstNull(op_ty.as_raw()),
                    TypeKind::Label => LLVMGetPoison(label),
                    _ => LLVMGetPoison(op_ty.as_raw()),
                };
                LLVMSetOperand(raw, i, filler);
            }
        }
        self.module.keep_erased(raw);
        Ok(())
    }
}
