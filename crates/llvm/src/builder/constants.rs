//! Making constants (`iN` values, `null`, `undef`, `poison`) and declaring functions,
//! whose addresses are constants too.

use llvm_sys::core::{
    LLVMAddFunction, LLVMConstInt, LLVMConstNull, LLVMDeleteFunction, LLVMGetNamedFunction,
    LLVMGetNamedGlobal, LLVMGetNamedGlobalAlias, LLVMGetPoison, LLVMGetUndef,
};

use super::check::{c_string, is_value_type, refuse};
use super::Builder;
use crate::error::Result;
use crate::ir::{Function, Type, TypeKind, Value};

impl<'m> Builder<'m> {
    /// The integer constant `value` of integer type `ty`, sign-extended or truncated to
    /// its width.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `ty` is not an integer type.
    pub fn const_int(&self, ty: Type<'m>, value: i64) -> Result<Value<'m>> {
        if !ty.is_integer() {
            return refuse(format!("an integer constant cannot have type `{ty}`"));
        }
        let raw = self.ty(ty)?;
        // SAFETY: `raw` is an integer type of our context. The bits are reinterpreted
        // and sign-extended by LLVM as asked.
        let value = unsafe { LLVMConstInt(raw, value as u64, 1) };
        // SAFETY: a constant of our context, which outlives `'m`.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// The null or zero constant of `ty` (`ptr addrspace(10) null`, `zeroinitializer`,
    /// `none` for tokens).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) for types without one (`void`, labels, functions, metadata,
    /// `x86_amx`, target types).
    pub fn const_null(&self, ty: Type<'m>) -> Result<Value<'m>> {
        let ok = ty.kind() == TypeKind::Token
            || (is_value_type(ty) && !matches!(ty.kind(), TypeKind::X86Amx | TypeKind::TargetExt));
        if !ok {
            return refuse(format!("`{ty}` has no null constant"));
        }
        let raw = self.ty(ty)?;
        // SAFETY: `raw` is a type of our context that has a null value.
        let value = unsafe { LLVMConstNull(raw) };
        // SAFETY: a constant of our context, which outlives `'m`.
        Ok(unsafe { Value::from_raw(value) })
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
    /// [`Error::Edit`](crate::Error::Edit) for `void`, labels, functions, metadata and tokens.
    pub fn undef(&self, ty: Type<'m>) -> Result<Value<'m>> {
        let raw = self.value_type("undef", ty)?;
        // SAFETY: `raw` is a first-class type of our context.
        let value = unsafe { LLVMGetUndef(raw) };
        // SAFETY: a constant of our context, which outlives `'m`.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// `poison` of `ty`.
    ///
    /// # Errors
    ///
    /// As [`Builder::undef`].
    pub fn poison(&self, ty: Type<'m>) -> Result<Value<'m>> {
        let raw = self.value_type("poison", ty)?;
        // SAFETY: `raw` is a first-class type of our context.
        let value = unsafe { LLVMGetPoison(raw) };
        // SAFETY: a constant of our context, which outlives `'m`.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// The function `name` of type `fn_type`, declared if the module has none yet (LLVM's
    /// `getOrInsertFunction`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `fn_type` is not a function type, or the name is taken by a
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
            // SAFETY: a live function of our module.
            let f = unsafe { Function::from_raw(existing) };
            if f.function_type() != fn_type {
                return refuse(format!(
                    "@{name} already exists with type `{}`, not `{fn_type}`",
                    f.function_type()
                ));
            }
            return Ok(f);
        }
        // SAFETY: the module is live and `c_name` is NUL-terminated.
        let other = !unsafe { LLVMGetNamedGlobal(m, c_name.as_ptr()) }.is_null()
            // SAFETY: the module is live; the name is valid for its length.
            || !unsafe { LLVMGetNamedGlobalAlias(m, c_name.as_ptr(), name.len()) }.is_null();
        if other {
            return refuse(format!(
                "@{name} already names a global that is not a function"
            ));
        }
        // SAFETY: the module is live, `ty` is a function type of its context.
        let raw = unsafe { LLVMAddFunction(m, c_name.as_ptr(), ty) };
        // SAFETY: the declaration just made, in our module.
        let f = unsafe { Function::from_raw(raw) };
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
}
