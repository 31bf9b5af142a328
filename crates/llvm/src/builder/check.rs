//! The checks every builder operation makes before LLVM sees its operands: that a handle
//! belongs to the builder's module and is not erased (`owner_check`), and what LLVM's
//! verifier and `IRBuilder` assertions demand of types.

use std::collections::HashSet;
use std::ffi::CString;

use llvm_sys::core::{
    LLVMGetBasicBlockParent, LLVMGetGlobalParent, LLVMGetInstructionParent, LLVMGetModuleContext,
    LLVMGetOperand, LLVMGetParamParent, LLVMGetTypeContext, LLVMIsAArgument, LLVMIsABasicBlock,
    LLVMIsAGlobalValue, LLVMIsAInstruction, LLVMTypeOf, LLVMValueAsBasicBlock,
};
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMModuleRef, LLVMValueRef};

use crate::error::{Error, Result};
use crate::ffi::value_name;
use crate::ir::{Type, TypeKind, Value};
use crate::module::Module;

/// The largest integer width LLVM allows (`IntegerType::MAX_INT_BITS`).
pub(super) const MAX_INT_BITS: u32 = 1 << 23;
/// Address spaces are 24-bit numbers in LLVM.
pub(super) const MAX_ADDRESS_SPACE: u32 = (1 << 24) - 1;

/// A refused change.
pub(super) fn refuse<T>(message: impl Into<String>) -> Result<T> {
    Err(Error::Edit {
        message: message.into(),
    })
}

/// `text` as a C string, refused if it holds a NUL byte.
pub(super) fn c_string(what: &str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::Edit {
        message: format!("the {what} {text:?} contains a NUL byte"),
    })
}

/// Whether values of `ty` can be operands and results of ordinary instructions.
pub(super) fn is_value_type(ty: Type<'_>) -> bool {
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
pub(super) fn primitive_bits(ty: Type<'_>) -> Option<(u64, bool)> {
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
pub(super) fn shape(ty: Type<'_>) -> Option<(u32, bool)> {
    Some((ty.vector_len()?, ty.kind() == TypeKind::ScalableVector))
}

/// Whether `value` belongs to `module` (or, for constants without globals and metadata,
/// to its context), and is not an erased instruction: `Err` says why not. The builder asks
/// this of every handle before linking it into the IR.
pub(super) fn owner_check(
    module: &Module<'_>,
    value: Value<'_>,
) -> std::result::Result<(), String> {
    let m = module.as_raw();
    let raw = value.as_raw();
    // SAFETY: `raw` is a live value (a handle's invariant).
    let ty = unsafe { LLVMTypeOf(raw) };
    // SAFETY: `ty` is a live type.
    let value_context = unsafe { LLVMGetTypeContext(ty) };
    // SAFETY: the module is live.
    if value_context != unsafe { LLVMGetModuleContext(m) } {
        return Err(format!("`{value}` belongs to another context"));
    }
    // SAFETY: `raw` is a live value.
    if !unsafe { LLVMIsAInstruction(raw) }.is_null() {
        // SAFETY: `raw` is a live instruction.
        let bb = unsafe { LLVMGetInstructionParent(raw) };
        if bb.is_null() {
            return Err(format!("`{value}` was erased"));
        }
        // SAFETY: `bb` is the live block holding the instruction.
        if unsafe { block_module(bb) } != m {
            return Err(format!("`{value}` belongs to another module"));
        }
        return Ok(());
    }
    // SAFETY: `raw` is a live value.
    if !unsafe { LLVMIsAArgument(raw) }.is_null() {
        // SAFETY: `raw` is a live argument.
        let function = unsafe { LLVMGetParamParent(raw) };
        // SAFETY: the parent of an argument is a live function.
        if unsafe { LLVMGetGlobalParent(function) } != m {
            return Err(format!("argument `{value}` belongs to another module"));
        }
        return Ok(());
    }
    // SAFETY: `raw` is a live value.
    if !unsafe { LLVMIsABasicBlock(raw) }.is_null() {
        // SAFETY: `raw` is a live block, as a value.
        let bb = unsafe { LLVMValueAsBasicBlock(raw) };
        // SAFETY: `bb` is a live block.
        if unsafe { block_module(bb) } != m {
            return Err(format!(
                "block `%{}` belongs to another module",
                value.name()
            ));
        }
        return Ok(());
    }
    if !value.is_constant() {
        // Metadata and inline assembly live in the context, checked above.
        return Ok(());
    }
    // SAFETY: `raw` is a live constant.
    unsafe { constant_owner_check(m, raw) }
}

/// The module of the function holding `bb`.
///
/// # Safety
///
/// `bb` is a live block (blocks are never detached from their functions).
unsafe fn block_module(bb: LLVMBasicBlockRef) -> LLVMModuleRef {
    // SAFETY: `bb` is a live block (the contract).
    let function = unsafe { LLVMGetBasicBlockParent(bb) };
    // SAFETY: the parent of a block is a live function.
    unsafe { LLVMGetGlobalParent(function) }
}

/// Whether every global the constant `raw` refers to, at any depth, is one of module `m`'s.
///
/// # Safety
///
/// `m` is a live module and `raw` a live constant of its context.
unsafe fn constant_owner_check(
    m: LLVMModuleRef,
    raw: LLVMValueRef,
) -> std::result::Result<(), String> {
    let mut seen = HashSet::new();
    let mut work = vec![raw];
    while let Some(c) = work.pop() {
        if !seen.insert(c) {
            continue;
        }
        // SAFETY: `c` is a live value: `raw`, or an operand of a constant (a constant or,
        // in a `blockaddress`, a block).
        if !unsafe { LLVMIsAGlobalValue(c) }.is_null() {
            // SAFETY: `c` is a live global.
            if unsafe { LLVMGetGlobalParent(c) } != m {
                // SAFETY: `c` is a live global.
                return Err(format!("@{} belongs to another module", unsafe {
                    value_name(c)
                }));
            }
            continue;
        }
        // SAFETY: as above.
        if !unsafe { LLVMIsABasicBlock(c) }.is_null() {
            // SAFETY: `c` is a live block, as a value.
            let bb = unsafe { LLVMValueAsBasicBlock(c) };
            // SAFETY: `bb` is a live block.
            if unsafe { block_module(bb) } != m {
                return Err("a block address refers to another module".to_owned());
            }
            continue;
        }
        // SAFETY: as above.
        let n = unsafe { crate::ir::num_operands(c) };
        work.extend(
            (0..n)
                // SAFETY: `c` is a live value with `n` operands.
                .map(|i| unsafe { LLVMGetOperand(c, i) })
                .filter(|v| !v.is_null()),
        );
    }
    Ok(())
}
