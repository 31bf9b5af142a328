//! Casts between pointers, and between pointers and integers: `addrspacecast`, `bitcast`,
//! `ptrtoint`, `inttoptr`.

use std::ffi::c_char;

use llvm_sys::core::{
    LLVMBuildAddrSpaceCast, LLVMBuildBitCast, LLVMBuildIntToPtr, LLVMBuildPtrToInt,
};
use llvm_sys::prelude::{LLVMBuilderRef, LLVMTypeRef, LLVMValueRef};

use super::check::{c_string, is_value_type, primitive_bits, refuse, shape};
use super::Builder;
use crate::error::Result;
use crate::ir::{Type, Value};

impl<'m> Builder<'m> {
    /// `addrspacecast value to dest_ty`: between pointers (or vectors of pointers of the
    /// same length) in different address spaces.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the cast is not valid.
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
        // SAFETY: a valid `addrspacecast` (checked just above), which this LLVM builder makes.
        unsafe { self.cast(value, dest_ty, name, LLVMBuildAddrSpaceCast) }
    }

    /// `bitcast value to dest_ty`: between pointers of one address space, or between
    /// non-aggregate types of the same size.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the cast is not valid.
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
        // SAFETY: a valid `bitcast` (checked just above), which this LLVM builder makes.
        unsafe { self.cast(value, dest_ty, name, LLVMBuildBitCast) }
    }

    /// `ptrtoint value to dest_ty` (pointer, or vector of pointers, to integers).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the cast is not valid.
    pub fn ptrtoint(
        &self,
        value: impl Into<Value<'m>>,
        dest_ty: Type<'m>,
        name: &str,
    ) -> Result<Value<'m>> {
        self.int_ptr_cast(value.into(), dest_ty, name, false)
    }

    /// `inttoptr value to dest_ty` (integer, or vector of integers, to pointers).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the cast is not valid.
    pub fn inttoptr(
        &self,
        value: impl Into<Value<'m>>,
        dest_ty: Type<'m>,
        name: &str,
    ) -> Result<Value<'m>> {
        self.int_ptr_cast(value.into(), dest_ty, name, true)
    }

    /// `ptrtoint`, or `inttoptr` when `to_ptr`: pointers on one side, integers on the
    /// other, the same shape (scalar, or vectors of one length).
    fn int_ptr_cast(
        &self,
        value: Value<'m>,
        dest_ty: Type<'m>,
        name: &str,
        to_ptr: bool,
    ) -> Result<Value<'m>> {
        let (from, to) = (value.ty().scalar(), dest_ty.scalar());
        let ok = from.is_pointer() != to_ptr
            && from.is_integer() == to_ptr
            && to.is_pointer() == to_ptr
            && to.is_integer() != to_ptr
            && shape(value.ty()) == shape(dest_ty);
        let op = if to_ptr { "inttoptr" } else { "ptrtoint" };
        if !ok {
            return refuse(format!("cannot {op} `{value}` to `{dest_ty}`"));
        }
        let build = if to_ptr {
            LLVMBuildIntToPtr
        } else {
            LLVMBuildPtrToInt
        };
        // SAFETY: a valid `ptrtoint` or `inttoptr` (checked just above), and the LLVM
        // builder of that cast.
        unsafe { self.cast(value, dest_ty, name, build) }
    }

    /// Builds the cast `build` makes of `value` to `dest_ty`, at the current position.
    ///
    /// # Safety
    ///
    /// `build` is the LLVM builder of one cast instruction, and that cast of `value` to
    /// `dest_ty` is valid (each public method above checks its own).
    unsafe fn cast(
        &self,
        value: Value<'m>,
        dest_ty: Type<'m>,
        name: &str,
        build: unsafe extern "C" fn(
            LLVMBuilderRef,
            LLVMValueRef,
            LLVMTypeRef,
            *const c_char,
        ) -> LLVMValueRef,
    ) -> Result<Value<'m>> {
        let v = self.val(value)?;
        let ty = self.ty(dest_ty)?;
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; operands of our module; the cast is valid (this
        // function's contract).
        let raw = unsafe { build(self.raw, v, ty, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded: of our module or its context.
        Ok(unsafe { Value::from_raw(raw) })
    }
}
