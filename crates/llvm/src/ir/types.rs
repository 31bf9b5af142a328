//! Types: [`Type`] and its [`TypeKind`].

use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;

use llvm_sys::core::{
    LLVMCountParamTypes, LLVMCountStructElementTypes, LLVMGetArrayLength2, LLVMGetElementType,
    LLVMGetIntTypeWidth, LLVMGetParamTypes, LLVMGetPointerAddressSpace, LLVMGetReturnType,
    LLVMGetStructName, LLVMGetTypeKind, LLVMGetVectorSize, LLVMIsFunctionVarArg,
    LLVMIsOpaqueStruct, LLVMIsPackedStruct, LLVMPrintTypeToString, LLVMStructGetTypeAtIndex,
    LLVMTypeIsSized,
};
use llvm_sys::prelude::LLVMTypeRef;
use llvm_sys::LLVMTypeKind;

use crate::ffi::{flag, from_c_str, Message};

/// What kind of type a [`Type`] is (LLVM's `TypeID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TypeKind {
    /// `void`.
    Void,
    /// `half`.
    Half,
    /// `bfloat`.
    BFloat,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `x86_fp80`.
    X86Fp80,
    /// `fp128`.
    Fp128,
    /// `ppc_fp128`.
    PpcFp128,
    /// `label` (the type of basic blocks as values).
    Label,
    /// `iN`.
    Integer,
    /// A function type.
    Function,
    /// A literal or named struct.
    Struct,
    /// `[N x T]`.
    Array,
    /// `ptr` / `ptr addrspace(N)`.
    Pointer,
    /// `<N x T>`.
    Vector,
    /// `<vscale x N x T>`.
    ScalableVector,
    /// `metadata`.
    Metadata,
    /// `x86_mmx`.
    X86Mmx,
    /// `token`.
    Token,
    /// `x86_amx`.
    X86Amx,
    /// `target("...")`.
    TargetExt,
}

/// An LLVM type. Types are unique within a context, so equality is type equality.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Type<'m> {
    raw: LLVMTypeRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> Type<'m> {
    /// A handle to `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live LLVM type of a context that outlives `'m` (see the handle invariant
    /// in [`crate::ir`]).
    pub(crate) unsafe fn from_raw(raw: LLVMTypeRef) -> Self {
        Type {
            raw,
            _module: PhantomData,
        }
    }

    /// A handle to `raw`, `None` for null.
    ///
    /// # Safety
    ///
    /// `raw` is null or as for [`Type::from_raw`].
    pub(crate) unsafe fn from_nullable(raw: LLVMTypeRef) -> Option<Self> {
        // SAFETY: non-null, so a live type of a context outliving `'m` (the contract).
        (!raw.is_null()).then(|| unsafe { Type::from_raw(raw) })
    }

    pub(crate) fn as_raw(self) -> LLVMTypeRef {
        self.raw
    }

    /// The kind of type.
    #[must_use]
    pub fn kind(self) -> TypeKind {
        // SAFETY: `self.raw` is a live type.
        match unsafe { LLVMGetTypeKind(self.raw) } {
            LLVMTypeKind::LLVMVoidTypeKind => TypeKind::Void,
            LLVMTypeKind::LLVMHalfTypeKind => TypeKind::Half,
            LLVMTypeKind::LLVMBFloatTypeKind => TypeKind::BFloat,
            LLVMTypeKind::LLVMFloatTypeKind => TypeKind::Float,
            LLVMTypeKind::LLVMDoubleTypeKind => TypeKind::Double,
            LLVMTypeKind::LLVMX86_FP80TypeKind => TypeKind::X86Fp80,
            LLVMTypeKind::LLVMFP128TypeKind => TypeKind::Fp128,
            LLVMTypeKind::LLVMPPC_FP128TypeKind => TypeKind::PpcFp128,
            LLVMTypeKind::LLVMLabelTypeKind => TypeKind::Label,
            LLVMTypeKind::LLVMIntegerTypeKind => TypeKind::Integer,
            LLVMTypeKind::LLVMFunctionTypeKind => TypeKind::Function,
            LLVMTypeKind::LLVMStructTypeKind => TypeKind::Struct,
            LLVMTypeKind::LLVMArrayTypeKind => TypeKind::Array,
            LLVMTypeKind::LLVMPointerTypeKind => TypeKind::Pointer,
            LLVMTypeKind::LLVMVectorTypeKind => TypeKind::Vector,
            LLVMTypeKind::LLVMScalableVectorTypeKind => TypeKind::ScalableVector,
            LLVMTypeKind::LLVMMetadataTypeKind => TypeKind::Metadata,
            LLVMTypeKind::LLVMX86_MMXTypeKind => TypeKind::X86Mmx,
            LLVMTypeKind::LLVMTokenTypeKind => TypeKind::Token,
            LLVMTypeKind::LLVMX86_AMXTypeKind => TypeKind::X86Amx,
            LLVMTypeKind::LLVMTargetExtTypeKind => TypeKind::TargetExt,
        }
    }

    /// Whether this is `void`.
    #[must_use]
    pub fn is_void(self) -> bool {
        self.kind() == TypeKind::Void
    }

    /// Whether this is a (scalar) pointer type.
    #[must_use]
    pub fn is_pointer(self) -> bool {
        self.kind() == TypeKind::Pointer
    }

    /// Whether this is an integer type.
    #[must_use]
    pub fn is_integer(self) -> bool {
        self.kind() == TypeKind::Integer
    }

    /// Whether this is a fixed or scalable vector type.
    #[must_use]
    pub fn is_vector(self) -> bool {
        matches!(self.kind(), TypeKind::Vector | TypeKind::ScalableVector)
    }

    /// Whether this is a struct or array type.
    #[must_use]
    pub fn is_aggregate(self) -> bool {
        matches!(self.kind(), TypeKind::Struct | TypeKind::Array)
    }

    /// Whether values of this type have a size (what `alloca`, `load` and `store` need).
    /// False for `void`, labels, functions, metadata, tokens and opaque structs.
    #[must_use]
    pub fn is_sized(self) -> bool {
        // SAFETY: `self.raw` is a live type.
        flag(unsafe { LLVMTypeIsSized(self.raw) })
    }

    /// The address space of a pointer type (`ptr addrspace(10)` → 10), `None` for other
    /// types (including vectors of pointers: see [`Type::scalar`]).
    #[must_use]
    pub fn address_space(self) -> Option<u32> {
        // SAFETY: `self.raw` is a live pointer type.
        self.is_pointer()
            .then(|| unsafe { LLVMGetPointerAddressSpace(self.raw) })
    }

    /// The bit width of an integer type.
    #[must_use]
    pub fn int_width(self) -> Option<u32> {
        // SAFETY: `self.raw` is a live integer type.
        self.is_integer()
            .then(|| unsafe { LLVMGetIntTypeWidth(self.raw) })
    }

    /// The element type of a vector or array type.
    #[must_use]
    pub fn element_type(self) -> Option<Type<'m>> {
        if !self.is_vector() && self.kind() != TypeKind::Array {
            return None;
        }
        // SAFETY: `self.raw` is a live vector or array type.
        let element = unsafe { LLVMGetElementType(self.raw) };
        // SAFETY: null or a type of the same context.
        unsafe { Type::from_nullable(element) }
    }

    /// The element type of a vector, or the type itself (LLVM's `getScalarType`).
    #[must_use]
    pub fn scalar(self) -> Type<'m> {
        if self.is_vector() {
            self.element_type().unwrap_or(self)
        } else {
            self
        }
    }

    /// The number of elements of a vector type (the minimum number for a scalable one).
    #[must_use]
    pub fn vector_len(self) -> Option<u32> {
        // SAFETY: `self.raw` is a live vector type.
        self.is_vector()
            .then(|| unsafe { LLVMGetVectorSize(self.raw) })
    }

    /// The number of elements of an array type.
    #[must_use]
    pub fn array_len(self) -> Option<u64> {
        // SAFETY: `self.raw` is a live array type.
        (self.kind() == TypeKind::Array).then(|| unsafe { LLVMGetArrayLength2(self.raw) })
    }

    /// The field types of a struct type (empty for an opaque struct), `None` for other
    /// types.
    #[must_use]
    pub fn struct_fields(self) -> Option<Vec<Type<'m>>> {
        if self.kind() != TypeKind::Struct {
            return None;
        }
        // SAFETY: `self.raw` is a live struct type.
        let n = unsafe { LLVMCountStructElementTypes(self.raw) };
        // SAFETY: `self.raw` has `n` fields, each a type of the same context.
        Some(unsafe {
            super::read_indexed(self.raw, n, LLVMStructGetTypeAtIndex, Type::from_nullable)
        })
    }

    /// The name of a named struct type (`%jl_value_t` → `jl_value_t`); `None` for literal
    /// structs and other types.
    #[must_use]
    pub fn struct_name(self) -> Option<String> {
        if self.kind() != TypeKind::Struct {
            return None;
        }
        // SAFETY: `self.raw` is a live struct type.
        let name = unsafe { LLVMGetStructName(self.raw) };
        // SAFETY: the name, when there is one, is a NUL-terminated string owned by the
        // type, copied at once.
        unsafe { from_c_str(name) }
    }

    /// Whether this is a packed struct type (`<{ ... }>`).
    #[must_use]
    pub fn is_packed_struct(self) -> bool {
        // SAFETY: `self.raw` is a live struct type.
        self.kind() == TypeKind::Struct && flag(unsafe { LLVMIsPackedStruct(self.raw) })
    }

    /// Whether this is an opaque struct type (declared with no body).
    #[must_use]
    pub fn is_opaque_struct(self) -> bool {
        // SAFETY: `self.raw` is a live struct type.
        self.kind() == TypeKind::Struct && flag(unsafe { LLVMIsOpaqueStruct(self.raw) })
    }

    /// The return type of a function type.
    #[must_use]
    pub fn return_type(self) -> Option<Type<'m>> {
        if self.kind() != TypeKind::Function {
            return None;
        }
        // SAFETY: `self.raw` is a live function type.
        let ret = unsafe { LLVMGetReturnType(self.raw) };
        // SAFETY: null or a type of the same context.
        unsafe { Type::from_nullable(ret) }
    }

    /// The parameter types of a function type.
    #[must_use]
    pub fn param_types(self) -> Option<Vec<Type<'m>>> {
        if self.kind() != TypeKind::Function {
            return None;
        }
        // SAFETY: `self.raw` is a live function type.
        let n = unsafe { LLVMCountParamTypes(self.raw) };
        let mut raw = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: `raw` has room for the `n` parameter types LLVM writes.
        unsafe { LLVMGetParamTypes(self.raw, raw.as_mut_ptr()) };
        let params = raw
            .into_iter()
            // SAFETY: each is null or a type of the same context, written by LLVM above.
            .filter_map(|p| unsafe { Type::from_nullable(p) })
            .collect();
        Some(params)
    }

    /// Whether a function type takes variable arguments (`...`); false for other types.
    #[must_use]
    pub fn is_vararg(self) -> bool {
        // SAFETY: `self.raw` is a live function type.
        self.kind() == TypeKind::Function && flag(unsafe { LLVMIsFunctionVarArg(self.raw) })
    }

    /// The address spaces of every pointer this type holds by value: the type itself, the
    /// elements of vectors and arrays, the fields of structs, at any depth; sorted and
    /// without repeats. `ptr addrspace(10)`, `<2 x ptr addrspace(10)>` and
    /// `{ i64, [2 x ptr addrspace(10)] }` all give `[10]`; function types give `[]`.
    #[must_use]
    pub fn pointer_address_spaces(self) -> Vec<u32> {
        let mut spaces = Vec::new();
        let mut seen = HashSet::new();
        let mut work = vec![self];
        while let Some(ty) = work.pop() {
            if !seen.insert(ty) {
                continue;
            }
            match ty.kind() {
                TypeKind::Pointer => spaces.extend(ty.address_space()),
                TypeKind::Vector | TypeKind::ScalableVector | TypeKind::Array => {
                    work.extend(ty.element_type());
                }
                TypeKind::Struct => work.extend(ty.struct_fields().unwrap_or_default()),
                _ => {}
            }
        }
        spaces.sort_unstable();
        spaces.dedup();
        spaces
    }

    /// Whether the type holds (see [`Type::pointer_address_spaces`]) a pointer in an
    /// address space for which `pred` is true.
    #[must_use]
    pub fn holds_pointer_in(self, pred: impl FnMut(u32) -> bool) -> bool {
        // Most values are scalars: answer those without walking (and allocating).
        match self.kind() {
            TypeKind::Pointer => self.address_space().is_some_and(pred),
            TypeKind::Vector | TypeKind::ScalableVector | TypeKind::Array | TypeKind::Struct => {
                self.pointer_address_spaces().into_iter().any(pred)
            }
            _ => false,
        }
    }

    /// The type as LLVM prints it (`ptr addrspace(10)`, `{ i64, ptr }`, `%T`).
    #[must_use]
    pub fn print(self) -> String {
        // SAFETY: `self.raw` is a live type.
        let text = unsafe { LLVMPrintTypeToString(self.raw) };
        // SAFETY: the string is ours, to be released with `LLVMDisposeMessage`.
        let text = unsafe { Message::from_raw(text) };
        text.text().unwrap_or_default()
    }
}

impl fmt::Display for Type<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.print())
    }
}

impl fmt::Debug for Type<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Type({})", self.print())
    }
}
