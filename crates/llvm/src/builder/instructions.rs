//! Other instructions: `phi`, `select`, `and`, vector and aggregate element access, `ret`.

use llvm_sys::core::{
    LLVMAddIncoming, LLVMBuildExtractElement, LLVMBuildExtractValue, LLVMBuildInsertElement,
    LLVMBuildInsertValue, LLVMBuildPhi, LLVMBuildRet, LLVMBuildRetVoid, LLVMBuildSelect,
};

use super::check::{c_string, is_value_type, refuse, shape};
use super::Builder;
use crate::error::Result;
use crate::ir::{BasicBlock, Instruction, Opcode, Type, TypeKind, Value};

impl<'m> Builder<'m> {
    /// An empty `phi ty`; add its incoming values with [`Builder::add_incoming`]. Position
    /// the builder at the start of a block first ([`Builder::position_at_start`]).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `ty` is not a value type.
    pub fn phi(&self, ty: Type<'m>, name: &str) -> Result<Instruction<'m>> {
        let ty_raw = self.value_type("phi", ty)?;
        let c_name = c_string("name", name)?;
        self.ready()?;
        // SAFETY: positioned builder; the type was checked.
        let inst = unsafe { LLVMBuildPhi(self.raw, ty_raw, c_name.as_ptr()) };
        // SAFETY: an instruction LLVM just inserted in a block of our module.
        Ok(unsafe { Instruction::from_raw(inst) })
    }

    /// Adds the incoming pair `[value, %block]` to `phi`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `phi` is not a `phi`, `value` has another type, or `block` is in
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
    /// [`Error::Edit`](crate::Error::Edit) if the arms differ in type or the condition is not `i1` (or a
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
        let value = unsafe { LLVMBuildSelect(self.raw, c, t, e, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded: of our module or its context.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// `and lhs, rhs` on integers (or vectors of integers) of one type.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the operands differ in type or are not integers.
    pub fn and(
        &self,
        lhs: impl Into<Value<'m>>,
        rhs: impl Into<Value<'m>>,
        name: &str,
    ) -> Result<Value<'m>> {
        self.binary(super::BinaryOp::And, lhs, rhs, name)
    }

    /// `extractelement vector, index`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `vector` is not a vector or `index` not an integer.
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
        let value = unsafe { LLVMBuildExtractElement(self.raw, v, i, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded: of our module or its context.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// `insertelement vector, element, index`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `vector` is not a vector of `element`'s type or `index` not an
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
        let value = unsafe { LLVMBuildInsertElement(self.raw, v, e, i, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded: of our module or its context.
        Ok(unsafe { Value::from_raw(value) })
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
    /// [`Error::Edit`](crate::Error::Edit) if `aggregate` is not a struct or array with that field.
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
        let value = unsafe { LLVMBuildExtractValue(self.raw, a, index, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded: of our module or its context.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// `insertvalue aggregate, value, index`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `aggregate` has no field `index` of `value`'s type.
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
        let value = unsafe { LLVMBuildInsertValue(self.raw, a, v, index, c_name.as_ptr()) };
        // SAFETY: a value LLVM just made or folded: of our module or its context.
        Ok(unsafe { Value::from_raw(value) })
    }

    /// `ret value` (`ret void` for `None`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if the value does not match the function's return type.
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
        let raw = match value {
            // SAFETY: positioned builder; the value has the function's return type.
            Some(v) => unsafe { LLVMBuildRet(self.raw, v) },
            // SAFETY: positioned builder; the function returns `void`.
            None => unsafe { LLVMBuildRetVoid(self.raw) },
        };
        // SAFETY: an instruction LLVM just inserted in a block of our module.
        Ok(unsafe { Instruction::from_raw(raw) })
    }
}
