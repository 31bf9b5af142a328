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
//!
//! The builder's methods are grouped by what they make: positions (`position`), types
//! (`types`), constants and function declarations (`constants`), memory access
//! (`memory`), casts (`casts`), other instructions (`instructions`), calls (`calls`), and
//! changes to existing IR (`edit`); `check` holds the checks they share.

use std::cell::Cell;
use std::ffi::CString;

use llvm_sys::core::{
    LLVMCreateBuilderInContext, LLVMDisposeBuilder, LLVMGetModuleContext, LLVMGetTypeContext,
};
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMContextRef, LLVMTypeRef, LLVMValueRef,
};

use crate::error::{Error, Result};
use crate::ir::{BasicBlock, Function, Instruction, Type, Value};
use crate::module::Module;

use check::{c_string, is_value_type, owner_check, refuse};
use position::Position;

mod calls;
mod casts;
mod check;
mod constants;
mod control;
mod edit;
mod instructions;
pub use control::BinaryOp;
mod memory;
mod position;
mod symbols;
mod types;

/// Inserts and changes instructions of one module. Owns an LLVM `IRBuilder`, disposed on
/// drop. See the [module documentation](self) for the checks every operation makes.
pub struct Builder<'m> {
    module: &'m Module<'m>,
    raw: LLVMBuilderRef,
    ctx: LLVMContextRef,
    position: Cell<Position<'m>>,
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
    // Checks of handles

    /// `value` as a raw operand, once it is known to be ours and alive.
    fn val(&self, value: impl Into<Value<'m>>) -> Result<LLVMValueRef> {
        let value = value.into();
        owner_check(self.module, value).map_err(|message| Error::Edit { message })?;
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

    /// The name to give a new instruction of type `ty` (none for `void`).
    fn name_for(&self, ty: Type<'m>, name: &str) -> Result<CString> {
        if ty.is_void() {
            Ok(CString::default())
        } else {
            c_string("name", name)
        }
    }
}
