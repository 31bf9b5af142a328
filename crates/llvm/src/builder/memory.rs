//! Memory access: `alloca`, `load`, `store` and `getelementptr`.

use std::ffi::c_uint;

use llvm_sys::core::{
    LLVMBuildAlloca, LLVMBuildArrayAlloca, LLVMBuildGEP2, LLVMBuildInBoundsGEP2, LLVMBuildLoad2,
    LLVMBuildStore,
};

use super::check::{c_string, refuse, shape};
use super::Builder;
use crate::error::Result;
use crate::ir::{Instruction, Type, TypeKind, Value};

impl<'m> Builder<'m> {
    /// `alloca ty` (with `count` elements when given), named `name`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `ty` is unsized or `count` is not an integer.
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
        let raw = match count {
            // SAFETY: positioned builder; operands checked above.
            Some(c) => unsafe { LLVMBuildArrayAlloca(self.raw, ty_raw, c, c_name.as_ptr()) },
            // SAFETY: positioned builder; the type checked above.
            None => unsafe { LLVMBuildAlloca(self.raw, ty_raw, c_name.as_ptr()) },
        };
        // SAFETY: an instruction LLVM just inserted in a block of our module.
        Ok(unsafe { Instruction::from_raw(raw) })
    }

    /// `load ty, ptr %ptr`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `ty` is unsized or `ptr` is not a pointer.
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
        // SAFETY: an instruction LLVM just inserted in a block of our module.
        Ok(unsafe { Instruction::from_raw(raw) })
    }

    /// `store value, ptr %ptr`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `value` is unsized or `ptr` is not a pointer.
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
        // SAFETY: an instruction LLVM just inserted in a block of our module.
        Ok(unsafe { Instruction::from_raw(raw) })
    }

    /// `getelementptr [inbounds] source_ty, ptr %ptr, indices...`. Struct indices must be
    /// constant integers; vector operands must agree in length. Folds to a constant when
    /// every operand is one.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the operands do not form a valid GEP.
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
        let build = if inbounds {
            LLVMBuildInBoundsGEP2
        } else {
            LLVMBuildGEP2
        };
        // SAFETY: positioned builder; operands checked above to form a valid GEP;
        // `raw_indices` holds `n` of them.
        let raw = unsafe {
            build(
                self.raw,
                src,
                p,
                raw_indices.as_mut_ptr(),
                n,
                c_name.as_ptr(),
            )
        };
        // SAFETY: a value LLVM just made or folded: of our module or its context.
        Ok(unsafe { Value::from_raw(raw) })
    }
}
