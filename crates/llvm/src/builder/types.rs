//! Making types: `iN`, pointers, arrays, vectors, structs and function types.

use std::ffi::c_uint;

use llvm_sys::core::{
    LLVMArrayType2, LLVMFunctionType, LLVMIntTypeInContext, LLVMPointerTypeInContext,
    LLVMStructTypeInContext, LLVMVectorType, LLVMVoidTypeInContext,
};
use llvm_sys::prelude::LLVMTypeRef;

use super::check::{is_value_type, refuse, MAX_ADDRESS_SPACE, MAX_INT_BITS};
use super::Builder;
use crate::error::Result;
use crate::ir::{Type, TypeKind};

impl<'m> Builder<'m> {
    /// `void`.
    #[must_use]
    pub fn void_type(&self) -> Type<'m> {
        // SAFETY: `self.ctx` is live.
        let ty = unsafe { LLVMVoidTypeInContext(self.ctx) };
        // SAFETY: a type of our context, which outlives `'m`.
        unsafe { Type::from_raw(ty) }
    }

    /// `iN`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) unless `1 <= bits <= 2^23`.
    pub fn int_type(&self, bits: u32) -> Result<Type<'m>> {
        if !(1..=MAX_INT_BITS).contains(&bits) {
            return refuse(format!("no integer type has {bits} bits"));
        }
        // SAFETY: `self.ctx` is live and the width is in LLVM's range.
        let ty = unsafe { LLVMIntTypeInContext(self.ctx, bits) };
        // SAFETY: a type of our context, which outlives `'m`.
        Ok(unsafe { Type::from_raw(ty) })
    }

    /// `ptr addrspace(N)` (plain `ptr` for 0).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `address_space` does not fit LLVM's 24 bits.
    pub fn ptr_type(&self, address_space: u32) -> Result<Type<'m>> {
        if address_space > MAX_ADDRESS_SPACE {
            return refuse(format!("address space {address_space} is out of range"));
        }
        // SAFETY: `self.ctx` is live and the address space is in range.
        let ty = unsafe { LLVMPointerTypeInContext(self.ctx, address_space) };
        // SAFETY: a type of our context, which outlives `'m`.
        Ok(unsafe { Type::from_raw(ty) })
    }

    /// `[len x element]`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `element` cannot be an array element.
    pub fn array_type(&self, element: Type<'m>, len: u64) -> Result<Type<'m>> {
        let raw = self.aggregate_element("an array", element)?;
        if element.kind() == TypeKind::ScalableVector {
            return refuse("an array cannot hold scalable vectors");
        }
        // SAFETY: `raw` is a valid array element type of our context.
        let ty = unsafe { LLVMArrayType2(raw, len) };
        // SAFETY: a type of our context, which outlives `'m`.
        Ok(unsafe { Type::from_raw(ty) })
    }

    /// `<len x element>`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `len` is 0 or `element` is not an integer, floating-point or
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
        let ty = unsafe { LLVMVectorType(raw, len) };
        // SAFETY: a type of our context, which outlives `'m`.
        Ok(unsafe { Type::from_raw(ty) })
    }

    /// A literal struct `{ fields... }` (`<{ ... }>` when `packed`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if a field cannot be a struct element.
    pub fn struct_type(&self, fields: &[Type<'m>], packed: bool) -> Result<Type<'m>> {
        let mut raw = fields
            .iter()
            .map(|&f| self.aggregate_element("a struct", f))
            .collect::<Result<Vec<_>>>()?;
        let n = c_uint::try_from(raw.len()).or_else(|_| refuse("too many struct fields"))?;
        // SAFETY: `raw` holds `n` valid element types of our context.
        let ty =
            unsafe { LLVMStructTypeInContext(self.ctx, raw.as_mut_ptr(), n, i32::from(packed)) };
        // SAFETY: a type of our context, which outlives `'m`.
        Ok(unsafe { Type::from_raw(ty) })
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
    /// [`Error::Edit`](crate::Error::Edit) if `ret` is a function, label or metadata type, or a parameter is
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
        let ty = unsafe { LLVMFunctionType(ret_raw, raw.as_mut_ptr(), n, i32::from(vararg)) };
        // SAFETY: a type of our context, which outlives `'m`.
        Ok(unsafe { Type::from_raw(ty) })
    }
}
