//! Renaming the module's global symbols (functions, variables, aliases, ifuncs): every
//! use in the module follows, as LLVM's `GlobalValue::setName` does.

use llvm_sys::core::{
    LLVMGetNamedFunction, LLVMGetNamedGlobal, LLVMGetNamedGlobalAlias, LLVMGetNamedGlobalIFunc,
    LLVMSetValueName2,
};
use llvm_sys::prelude::LLVMValueRef;

use super::check::{c_string, refuse};
use super::Builder;
use crate::error::Result;

impl Builder<'_> {
    /// Renames the global symbol `@from` (a function, variable, alias or ifunc) `@to`.
    /// The module's references follow it; a string constant that spells the name and the
    /// comdat it may belong to are left as they are (an ELF group keeps its signature as a
    /// local symbol).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the module has no global `@from`, or `@to` is
    /// taken (LLVM would add a number).
    pub fn rename_global(&self, from: &str, to: &str) -> Result<()> {
        let Some(value) = self.named_global(from)? else {
            return refuse(format!("the module has no global @{from} to rename"));
        };
        if to.is_empty() || self.named_global(to)?.is_some() {
            return refuse(format!("cannot rename @{from} to @{to}: the name is taken"));
        }
        // SAFETY: `value` is a live global of this module; the name is valid for its
        // length and LLVM copies it.
        unsafe { LLVMSetValueName2(value, to.as_ptr().cast(), to.len()) };
        Ok(())
    }

    /// The global of any kind named `name`, if there is one.
    fn named_global(&self, name: &str) -> Result<Option<LLVMValueRef>> {
        let c_name = c_string("global name", name)?;
        let m = self.module().as_raw();
        let c = c_name.as_ptr();
        // SAFETY: the module is live; `c_name` is NUL-terminated and
        // valid for `name.len()` bytes.
        let function = unsafe { LLVMGetNamedFunction(m, c) };
        // SAFETY: as above.
        let variable = unsafe { LLVMGetNamedGlobal(m, c) };
        // SAFETY: as above.
        let alias = unsafe { LLVMGetNamedGlobalAlias(m, c, name.len()) };
        // SAFETY: as above.
        let ifunc = unsafe { LLVMGetNamedGlobalIFunc(m, c, name.len()) };
        let found = [function, variable, alias, ifunc];
        Ok(found.into_iter().find(|v| !v.is_null()))
    }
}
