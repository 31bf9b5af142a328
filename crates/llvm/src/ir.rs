//! Walking IR: functions, blocks, instructions, operands, types, attributes.
//!
//! Every item here is a small `Copy` handle around an LLVM pointer, tied by its lifetime
//! `'m` to a shared borrow of the [`Module`] it came from: [`Function`], [`BasicBlock`],
//! [`Instruction`] (and its call view [`Call`]), [`Value`] and [`Type`]. Handles compare
//! and hash by pointer, so they can key `HashMap`s and `HashSet`s; two handles are equal
//! exactly when they name the same LLVM object.
//!
//! Handles stay valid as long as the borrow of the module does, even across changes made
//! with a [`crate::builder::Builder`]: an instruction erased through the builder is only
//! detached from its block and kept alive until the module is dropped. Such an instruction
//! answers `None` to [`Instruction::block`] and [`Instruction::function`], has no
//! successors and no neighbours, and its operands have been replaced by `poison` (see
//! [`crate::builder::Builder::erase`]).
//!
//! Lists (`blocks`, `instructions`, `operands`, `users`, …) are returned as `Vec`s: a
//! snapshot that the caller may keep while changing the IR.
//!
//! ```
//! use locus_llvm::ir::{Opcode, TypeKind};
//! use locus_llvm::{Context, Module};
//!
//! let ctx = Context::new();
//! let module = Module::parse_ir(&ctx, "ex.ll", r#"
//!     declare void @safepoint()
//!     define ptr addrspace(11) @f(ptr addrspace(10) %obj) {
//!       %d = addrspacecast ptr addrspace(10) %obj to ptr addrspace(11)
//!       call void @safepoint() [ "jl_roots"(ptr addrspace(10) %obj) ]
//!       ret ptr addrspace(11) %d
//!     }
//! "#)?;
//! let f = module.function("f").expect("defined above");
//! let entry = f.entry_block().expect("a definition has an entry block");
//! let insts = entry.instructions();
//! assert_eq!(insts[0].opcode(), Opcode::AddrSpaceCast);
//! assert_eq!(insts[0].ty().address_space(), Some(11));
//! assert_eq!(insts[0].operands()[0], f.params()[0]);
//!
//! let call = insts[1].as_call().expect("a call");
//! assert_eq!(call.callee_name().as_deref(), Some("safepoint"));
//! let bundles = call.operand_bundles();
//! assert_eq!(bundles[0].tag, "jl_roots");
//! assert_eq!(bundles[0].args, f.params());
//! assert_eq!(f.params()[0].ty().kind(), TypeKind::Pointer);
//! # Ok::<(), locus_llvm::Error>(())
//! ```

use std::collections::HashSet;
use std::ffi::{c_char, c_uint, CString};
use std::fmt;
use std::marker::PhantomData;

use llvm_sys::core::{
    LLVMBasicBlockAsValue, LLVMCountIncoming, LLVMCountParams, LLVMCountStructElementTypes,
    LLVMDisposeOperandBundle, LLVMGetAlignment, LLVMGetAllocatedType, LLVMGetArrayLength2,
    LLVMGetBasicBlockParent, LLVMGetBasicBlockTerminator, LLVMGetCallSiteEnumAttribute,
    LLVMGetCallSiteStringAttribute, LLVMGetCalledFunctionType, LLVMGetCalledValue,
    LLVMGetConstOpcode, LLVMGetElementType, LLVMGetEntryBasicBlock, LLVMGetEnumAttributeAtIndex,
    LLVMGetEnumAttributeKindForName, LLVMGetEnumAttributeValue, LLVMGetFirstBasicBlock,
    LLVMGetFirstFunction, LLVMGetFirstInstruction, LLVMGetFirstUse, LLVMGetFunctionCallConv,
    LLVMGetGC, LLVMGetGEPSourceElementType, LLVMGetGlobalParent, LLVMGetICmpPredicate,
    LLVMGetIncomingBlock, LLVMGetIncomingValue, LLVMGetIndices, LLVMGetInstructionCallConv,
    LLVMGetInstructionOpcode, LLVMGetInstructionParent, LLVMGetIntTypeWidth, LLVMGetIntrinsicID,
    LLVMGetLastInstruction, LLVMGetMaskValue, LLVMGetNamedFunction, LLVMGetNextBasicBlock,
    LLVMGetNextFunction, LLVMGetNextInstruction, LLVMGetNextUse, LLVMGetNormalDest,
    LLVMGetNumArgOperands, LLVMGetNumIndices, LLVMGetNumMaskElements, LLVMGetNumOperandBundleArgs,
    LLVMGetNumOperandBundles, LLVMGetNumOperands, LLVMGetNumSuccessors, LLVMGetOperand,
    LLVMGetOperandBundleArgAtIndex, LLVMGetOperandBundleAtIndex, LLVMGetOperandBundleTag,
    LLVMGetOperandUse, LLVMGetParam, LLVMGetParamParent, LLVMGetParamTypes,
    LLVMGetPointerAddressSpace, LLVMGetPreviousInstruction, LLVMGetReturnType,
    LLVMGetStringAttributeAtIndex, LLVMGetStringAttributeValue, LLVMGetStructName,
    LLVMGetSuccessor, LLVMGetTypeAttributeValue, LLVMGetTypeKind, LLVMGetUnwindDest, LLVMGetUser,
    LLVMGetValueKind, LLVMGetValueName2, LLVMGetVectorSize, LLVMGlobalGetValueType,
    LLVMIsAArgument, LLVMIsABasicBlock, LLVMIsAConstant, LLVMIsAConstantExpr, LLVMIsAConstantInt,
    LLVMIsAFunction, LLVMIsAGlobalValue, LLVMIsAInstruction, LLVMIsATerminatorInst, LLVMIsAUser,
    LLVMIsDeclaration, LLVMIsEnumAttribute, LLVMIsFunctionVarArg, LLVMIsInBounds, LLVMIsNull,
    LLVMIsOpaqueStruct, LLVMIsPackedStruct, LLVMIsPoison, LLVMIsTypeAttribute, LLVMIsUndef,
    LLVMPrintTypeToString, LLVMPrintValueToString, LLVMStructGetTypeAtIndex, LLVMTypeIsSized,
    LLVMTypeOf, LLVMValueAsBasicBlock, LLVMValueIsBasicBlock,
};
use llvm_sys::core::{LLVMConstIntGetSExtValue, LLVMConstIntGetZExtValue, LLVMCountParamTypes};
use llvm_sys::core::{
    LLVMGetMDKindIDInContext, LLVMGetMDNodeNumOperands, LLVMGetMDNodeOperands, LLVMGetMDString,
    LLVMGetMetadata, LLVMGetTypeContext, LLVMIsAGlobalVariable, LLVMIsAMDNode, LLVMIsAMDString,
    LLVMIsGlobalConstant,
};
use llvm_sys::prelude::{
    LLVMAttributeRef, LLVMBasicBlockRef, LLVMOperandBundleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::{
    LLVMAttributeFunctionIndex, LLVMAttributeReturnIndex, LLVMIntPredicate, LLVMOpcode,
    LLVMTypeKind, LLVMValueKind,
};

use crate::module::{Message, Module};

// Invariant of every handle in this file: `raw` is a non-null pointer to a live LLVM
// object of the handle's kind, owned by the module borrowed for `'m` (or, for types and
// constants, by that module's context, which outlives the borrow). Instructions are never
// freed while the module lives (see `crate::builder`), so an instruction handle stays valid
// even once erased; it is then detached (no parent block).

/// The name LLVM stores for `raw` (empty when unnamed).
fn value_name(raw: LLVMValueRef) -> String {
    let mut len = 0;
    // SAFETY: `raw` is a live value; the returned pointer is valid for `len` bytes until
    // the value is renamed, and is copied at once.
    let ptr = unsafe { LLVMGetValueName2(raw, &mut len) };
    lossy(ptr, len)
}

/// Copies `len` bytes at `ptr` (null means empty), replacing invalid UTF-8.
pub(crate) fn lossy(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: callers pass a pointer LLVM documents as valid for `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// Copies the NUL-terminated string at `ptr`, replacing invalid UTF-8; `None` for null.
pub(crate) fn from_c_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: callers pass a NUL-terminated string LLVM keeps alive while it is copied.
    Some(
        unsafe { std::ffi::CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `raw` as LLVM prints it (`%x = load ptr, ptr %p` for an instruction), without the
/// leading indentation.
fn print_value(raw: LLVMValueRef) -> String {
    // SAFETY: `raw` is a live value; the string is ours and freed by `Message`.
    let text = Message::from_raw(unsafe { LLVMPrintValueToString(raw) });
    text.text().unwrap_or_default().trim().to_owned()
}

/// Whether `raw` (an instruction) is in a block, that is, not erased.
fn is_attached(raw: LLVMValueRef) -> bool {
    // SAFETY: `raw` is a live instruction.
    !unsafe { LLVMGetInstructionParent(raw) }.is_null()
}

/// The number of operands of `raw`, which must be a `User` (instruction or constant).
fn num_operands(raw: LLVMValueRef) -> u32 {
    // SAFETY: `raw` is a live value; `LLVMGetNumOperands` is only called on users.
    let is_user = !unsafe { LLVMIsAUser(raw) }.is_null();
    if !is_user {
        return 0;
    }
    // SAFETY: `raw` is a live `User`.
    let n = unsafe { LLVMGetNumOperands(raw) };
    u32::try_from(n).unwrap_or(0)
}

/// Converts an `LLVMBool` result.
fn flag(value: i32) -> bool {
    value != 0
}

// ---------------------------------------------------------------------------------------
// Module

impl<'ctx> Module<'ctx> {
    /// Handles to the module's functions, definitions and declarations (intrinsics
    /// included), in module order. [`Module::functions`] gives their names.
    #[must_use]
    pub fn function_list(&self) -> Vec<Function<'_>> {
        let mut out = Vec::new();
        // SAFETY: the module is live; the iteration follows LLVM's function list, which
        // nothing changes meanwhile.
        let mut raw = unsafe { LLVMGetFirstFunction(self.as_raw()) };
        while !raw.is_null() {
            out.push(Function::from_raw(raw));
            // SAFETY: `raw` is a live function of this module.
            raw = unsafe { LLVMGetNextFunction(raw) };
        }
        out
    }

    /// The function named `name` (without the `@`), if the module has one.
    #[must_use]
    pub fn function(&self, name: &str) -> Option<Function<'_>> {
        let c_name = CString::new(name).ok()?;
        // SAFETY: the module is live and `c_name` is NUL-terminated.
        let raw = unsafe { LLVMGetNamedFunction(self.as_raw(), c_name.as_ptr()) };
        (!raw.is_null()).then(|| Function::from_raw(raw))
    }
}

// ---------------------------------------------------------------------------------------
// Types

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
    pub(crate) fn from_raw(raw: LLVMTypeRef) -> Self {
        Type {
            raw,
            _module: PhantomData,
        }
    }

    fn from_nullable(raw: LLVMTypeRef) -> Option<Self> {
        (!raw.is_null()).then(|| Type::from_raw(raw))
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
        Type::from_nullable(unsafe { LLVMGetElementType(self.raw) })
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
        // SAFETY: `self.raw` is a live struct type; indices are below the count.
        let n = unsafe { LLVMCountStructElementTypes(self.raw) };
        let fields = (0..n)
            .filter_map(|i| {
                // SAFETY: `self.raw` is a live struct type with more than `i` fields.
                Type::from_nullable(unsafe { LLVMStructGetTypeAtIndex(self.raw, i) })
            })
            .collect();
        Some(fields)
    }

    /// The name of a named struct type (`%jl_value_t` → `jl_value_t`); `None` for literal
    /// structs and other types.
    #[must_use]
    pub fn struct_name(self) -> Option<String> {
        if self.kind() != TypeKind::Struct {
            return None;
        }
        // SAFETY: `self.raw` is a live struct type; the name, when there is one, is a
        // NUL-terminated string owned by the type.
        from_c_str(unsafe { LLVMGetStructName(self.raw) })
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
        Type::from_nullable(unsafe { LLVMGetReturnType(self.raw) })
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
        Some(raw.into_iter().filter_map(Type::from_nullable).collect())
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
        self.pointer_address_spaces().into_iter().any(pred)
    }

    /// The type as LLVM prints it (`ptr addrspace(10)`, `{ i64, ptr }`, `%T`).
    #[must_use]
    pub fn print(self) -> String {
        // SAFETY: `self.raw` is a live type; the string is freed by `Message`.
        let text = Message::from_raw(unsafe { LLVMPrintTypeToString(self.raw) });
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

// ---------------------------------------------------------------------------------------
// Values

/// What kind of value a [`Value`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueKind {
    /// A function parameter.
    Argument,
    /// A basic block used as a value (branch targets).
    BasicBlock,
    /// An instruction.
    Instruction,
    /// A function (a constant: its address).
    Function,
    /// A global variable.
    GlobalVariable,
    /// A global alias.
    GlobalAlias,
    /// A global ifunc.
    GlobalIFunc,
    /// An integer constant.
    ConstantInt,
    /// A floating-point constant.
    ConstantFloat,
    /// `null` of some pointer type.
    ConstantPointerNull,
    /// `zeroinitializer` of an aggregate or vector type.
    ConstantAggregateZero,
    /// A constant array, struct or vector, including packed data arrays and vectors.
    ConstantAggregate,
    /// A constant expression (`addrspacecast (ptr @g to ptr addrspace(10))`).
    ConstantExpr,
    /// `undef`.
    Undef,
    /// `poison`.
    Poison,
    /// `none` of type token.
    ConstantTokenNone,
    /// `blockaddress(@f, %bb)`.
    BlockAddress,
    /// Inline assembly used as a callee.
    InlineAsm,
    /// Metadata used as an operand (`metadata !0`).
    Metadata,
    /// Any other constant (`dso_local_equivalent`, `no_cfi`, `ptrauth`, target `none`).
    OtherConstant,
}

/// Any LLVM value: an argument, instruction, constant, global or basic block.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Value<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

/// One use of a value: operand `operand` of `user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Use<'m> {
    /// The instruction or constant that has the value as an operand.
    pub user: Value<'m>,
    /// The operand's index in `user` (as for [`Value::operands`]).
    pub operand: u32,
}

impl<'m> Value<'m> {
    pub(crate) fn from_raw(raw: LLVMValueRef) -> Self {
        Value {
            raw,
            _module: PhantomData,
        }
    }

    pub(crate) fn from_nullable(raw: LLVMValueRef) -> Option<Self> {
        (!raw.is_null()).then(|| Value::from_raw(raw))
    }

    pub(crate) fn as_raw(self) -> LLVMValueRef {
        self.raw
    }

    /// What kind of value this is.
    #[must_use]
    pub fn kind(self) -> ValueKind {
        // SAFETY: `self.raw` is a live value. `LLVMGetValueKind` reports some constants
        // the C API does not name as instructions, so instructions are asked for directly.
        if !unsafe { LLVMIsAInstruction(self.raw) }.is_null() {
            return ValueKind::Instruction;
        }
        // SAFETY: as above.
        match unsafe { LLVMGetValueKind(self.raw) } {
            LLVMValueKind::LLVMArgumentValueKind => ValueKind::Argument,
            LLVMValueKind::LLVMBasicBlockValueKind => ValueKind::BasicBlock,
            LLVMValueKind::LLVMFunctionValueKind => ValueKind::Function,
            LLVMValueKind::LLVMGlobalAliasValueKind => ValueKind::GlobalAlias,
            LLVMValueKind::LLVMGlobalIFuncValueKind => ValueKind::GlobalIFunc,
            LLVMValueKind::LLVMGlobalVariableValueKind => ValueKind::GlobalVariable,
            LLVMValueKind::LLVMBlockAddressValueKind => ValueKind::BlockAddress,
            LLVMValueKind::LLVMConstantExprValueKind => ValueKind::ConstantExpr,
            LLVMValueKind::LLVMConstantArrayValueKind
            | LLVMValueKind::LLVMConstantStructValueKind
            | LLVMValueKind::LLVMConstantVectorValueKind
            | LLVMValueKind::LLVMConstantDataArrayValueKind
            | LLVMValueKind::LLVMConstantDataVectorValueKind => ValueKind::ConstantAggregate,
            LLVMValueKind::LLVMUndefValueValueKind => ValueKind::Undef,
            LLVMValueKind::LLVMPoisonValueKind => ValueKind::Poison,
            LLVMValueKind::LLVMConstantAggregateZeroValueKind => ValueKind::ConstantAggregateZero,
            LLVMValueKind::LLVMConstantIntValueKind => ValueKind::ConstantInt,
            LLVMValueKind::LLVMConstantFPValueKind => ValueKind::ConstantFloat,
            LLVMValueKind::LLVMConstantPointerNullValueKind => ValueKind::ConstantPointerNull,
            LLVMValueKind::LLVMConstantTokenNoneValueKind => ValueKind::ConstantTokenNone,
            LLVMValueKind::LLVMMetadataAsValueValueKind => ValueKind::Metadata,
            LLVMValueKind::LLVMInlineAsmValueKind => ValueKind::InlineAsm,
            _ => ValueKind::OtherConstant,
        }
    }

    /// The value's type (`void` for instructions that produce nothing, `label` for
    /// blocks).
    #[must_use]
    pub fn ty(self) -> Type<'m> {
        // SAFETY: `self.raw` is a live value; every value has a type.
        Type::from_raw(unsafe { LLVMTypeOf(self.raw) })
    }

    /// The value's name without `%` or `@`; empty when it has none (`%0`).
    #[must_use]
    pub fn name(self) -> String {
        value_name(self.raw)
    }

    /// The value as LLVM prints it: a whole instruction (`%x = load ptr, ptr %p`), a whole
    /// function, or a constant with its type (`ptr addrspace(10) null`).
    #[must_use]
    pub fn print(self) -> String {
        print_value(self.raw)
    }

    /// The value as an instruction, if it is one.
    #[must_use]
    pub fn as_instruction(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live value.
        let is = !unsafe { LLVMIsAInstruction(self.raw) }.is_null();
        is.then(|| Instruction::from_raw(self.raw))
    }

    /// The value as a function, if it is one.
    #[must_use]
    pub fn as_function(self) -> Option<Function<'m>> {
        // SAFETY: `self.raw` is a live value.
        let is = !unsafe { LLVMIsAFunction(self.raw) }.is_null();
        is.then(|| Function::from_raw(self.raw))
    }

    /// The value as a basic block, if it is one (branch targets among operands).
    #[must_use]
    pub fn as_block(self) -> Option<BasicBlock<'m>> {
        // SAFETY: `self.raw` is a live value.
        if !flag(unsafe { LLVMValueIsBasicBlock(self.raw) }) {
            return None;
        }
        // SAFETY: `self.raw` is a basic block.
        BasicBlock::from_nullable(unsafe { LLVMValueAsBasicBlock(self.raw) })
    }

    /// For a function parameter: its function and index.
    #[must_use]
    pub fn as_argument(self) -> Option<(Function<'m>, u32)> {
        // SAFETY: `self.raw` is a live value.
        if unsafe { LLVMIsAArgument(self.raw) }.is_null() {
            return None;
        }
        // SAFETY: `self.raw` is an argument; its parent is a live function.
        let function = Function::from_raw(unsafe { LLVMGetParamParent(self.raw) });
        let index = function.params().iter().position(|p| *p == self)?;
        Some((function, u32::try_from(index).ok()?))
    }

    /// Whether the value is a constant. As in LLVM, globals and functions are constants
    /// (their addresses are).
    #[must_use]
    pub fn is_constant(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        !unsafe { LLVMIsAConstant(self.raw) }.is_null()
    }

    /// Whether the value is a global (function, variable, alias or ifunc).
    #[must_use]
    pub fn is_global(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        !unsafe { LLVMIsAGlobalValue(self.raw) }.is_null()
    }

    /// Whether the value is a global variable declared `constant`.
    #[must_use]
    pub fn is_constant_global(self) -> bool {
        // SAFETY: `self.raw` is a live value; LLVMIsGlobalConstant is only asked of a global
        // variable.
        unsafe { !LLVMIsAGlobalVariable(self.raw).is_null() && LLVMIsGlobalConstant(self.raw) != 0 }
    }

    /// Whether the value is a constant null/zero of its type (`null`, `0`,
    /// `zeroinitializer`).
    #[must_use]
    pub fn is_null(self) -> bool {
        // SAFETY: `self.raw` is a live value; non-constants answer false.
        flag(unsafe { LLVMIsNull(self.raw) })
    }

    /// Whether the value is `undef` or `poison`.
    #[must_use]
    pub fn is_undef(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        flag(unsafe { LLVMIsUndef(self.raw) })
    }

    /// Whether the value is `poison`.
    #[must_use]
    pub fn is_poison(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        flag(unsafe { LLVMIsPoison(self.raw) })
    }

    /// The value of an integer constant of at most 64 bits, sign-extended.
    #[must_use]
    pub fn const_int(self) -> Option<i64> {
        self.const_int_ok()
            // SAFETY: `self.raw` is a `ConstantInt` of at most 64 bits.
            .then(|| unsafe { LLVMConstIntGetSExtValue(self.raw) })
    }

    /// The value of an integer constant of at most 64 bits, zero-extended.
    #[must_use]
    pub fn const_uint(self) -> Option<u64> {
        self.const_int_ok()
            // SAFETY: `self.raw` is a `ConstantInt` of at most 64 bits.
            .then(|| unsafe { LLVMConstIntGetZExtValue(self.raw) })
    }

    fn const_int_ok(self) -> bool {
        // SAFETY: `self.raw` is a live value.
        let is_int = !unsafe { LLVMIsAConstantInt(self.raw) }.is_null();
        is_int && self.ty().int_width().is_some_and(|w| w <= 64)
    }

    /// The opcode of a constant expression (`addrspacecast (...)` → `AddrSpaceCast`).
    #[must_use]
    pub fn constant_opcode(self) -> Option<Opcode> {
        // SAFETY: `self.raw` is a live value.
        if unsafe { LLVMIsAConstantExpr(self.raw) }.is_null() {
            return None;
        }
        // SAFETY: `self.raw` is a constant expression.
        Some(Opcode::from_llvm(unsafe { LLVMGetConstOpcode(self.raw) }))
    }

    /// The operands of an instruction or constant (for a call: the arguments, then the
    /// operand bundles' values, then the callee); empty for other values.
    #[must_use]
    pub fn operands(self) -> Vec<Value<'m>> {
        let n = num_operands(self.raw);
        (0..n)
            // SAFETY: `self.raw` is a live user with `n` operands.
            .filter_map(|i| Value::from_nullable(unsafe { LLVMGetOperand(self.raw, i) }))
            .collect()
    }

    /// Every use of the value, in LLVM's use-list order (most recent first), skipping
    /// erased instructions.
    ///
    /// Uses are listed for instructions, arguments, basic blocks, globals and constants
    /// that contain a global. Other constants (`null`, `i64 0`, …) are shared by all the
    /// modules of a context, so their uses are not the business of one module: the list is
    /// empty.
    #[must_use]
    pub fn uses(self) -> Vec<Use<'m>> {
        if !self.uses_belong_to_module() {
            return Vec::new();
        }
        let mut out = Vec::new();
        // SAFETY: `self.raw` is live; the use list is walked without changing it.
        let mut u = unsafe { LLVMGetFirstUse(self.raw) };
        while !u.is_null() {
            // SAFETY: `u` is a live use; its user is a live `User`.
            let user = unsafe { LLVMGetUser(u) };
            // SAFETY: `user` is live when non-null.
            let listed = !user.is_null()
                && (unsafe { LLVMIsAInstruction(user) }.is_null() || is_attached(user));
            if listed {
                let n = num_operands(user);
                // SAFETY: `user` has `n` operands.
                if let Some(operand) = (0..n).find(|&i| unsafe { LLVMGetOperandUse(user, i) } == u)
                {
                    out.push(Use {
                        user: Value::from_raw(user),
                        operand,
                    });
                }
            }
            // SAFETY: `u` is a live use.
            u = unsafe { LLVMGetNextUse(u) };
        }
        out
    }

    /// The distinct users of the value (instructions and constants), in use-list order;
    /// see [`Value::uses`] for which values list them.
    #[must_use]
    pub fn users(self) -> Vec<Value<'m>> {
        let mut seen = HashSet::new();
        self.uses()
            .into_iter()
            .map(|u| u.user)
            .filter(|u| seen.insert(*u))
            .collect()
    }

    /// Whether the value has any use (see [`Value::uses`]).
    #[must_use]
    pub fn has_uses(self) -> bool {
        !self.uses().is_empty()
    }

    /// Whether every user of this value is in the same module as the value itself.
    fn uses_belong_to_module(self) -> bool {
        match self.kind() {
            ValueKind::Instruction
            | ValueKind::Argument
            | ValueKind::BasicBlock
            | ValueKind::Function
            | ValueKind::GlobalVariable
            | ValueKind::GlobalAlias
            | ValueKind::GlobalIFunc => true,
            _ if self.is_constant() => contains_global(self.raw),
            _ => false,
        }
    }
}

/// Whether the constant `raw` refers to a global value, at any depth.
fn contains_global(raw: LLVMValueRef) -> bool {
    let mut seen = HashSet::new();
    let mut work = vec![raw];
    while let Some(c) = work.pop() {
        if !seen.insert(c) {
            continue;
        }
        // SAFETY: `c` is a live constant (operands of constants are constants or blocks).
        if !unsafe { LLVMIsAGlobalValue(c) }.is_null() {
            return true;
        }
        let n = num_operands(c);
        // SAFETY: `c` has `n` operands.
        work.extend(
            (0..n)
                .map(|i| unsafe { LLVMGetOperand(c, i) })
                .filter(|v| !v.is_null()),
        );
    }
    false
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.print())
    }
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind() == ValueKind::Function {
            write!(f, "Value(@{})", self.name())
        } else if self.kind() == ValueKind::BasicBlock {
            write!(f, "Value(label %{})", self.name())
        } else {
            write!(f, "Value({})", self.print())
        }
    }
}

// ---------------------------------------------------------------------------------------
// Attributes and memory effects

/// Where an attribute sits: on the function (or call), on its return value, or on a
/// parameter (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributeIndex {
    /// Function attributes (`returns_twice`, `memory(read)`, `"gc-leaf-function"`).
    Function,
    /// Return value attributes (`noalias`, `nonnull`).
    Return,
    /// Attributes of parameter `n`, counted from 0.
    Param(u32),
}

impl AttributeIndex {
    /// LLVM's index: `~0` for the function, 0 for the return value, `n + 1` for
    /// parameter `n`.
    pub(crate) fn raw(self) -> Option<c_uint> {
        match self {
            AttributeIndex::Function => Some(LLVMAttributeFunctionIndex),
            AttributeIndex::Return => Some(LLVMAttributeReturnIndex),
            AttributeIndex::Param(n) => n.checked_add(1).filter(|&i| i != u32::MAX),
        }
    }
}

/// The enum kind LLVM gives an attribute name (`returns_twice`, `memory`), or `None` for
/// names it does not know (string attributes such as `"gc-leaf-function"`).
fn enum_kind(name: &str) -> Option<c_uint> {
    // SAFETY: the pointer is valid for `name.len()` bytes.
    let kind = unsafe { LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) };
    (kind != 0).then_some(kind)
}

/// The integer carried by an enum or int attribute (0 for plain enum attributes), `None`
/// for type and other attributes.
fn attribute_int(attr: LLVMAttributeRef) -> Option<u64> {
    if attr.is_null() {
        return None;
    }
    // SAFETY: `attr` is a live attribute. The value is only read from enum and int
    // attributes (`LLVMIsEnumAttribute` covers both), for which it is defined.
    unsafe {
        if flag(LLVMIsEnumAttribute(attr)) && !flag(LLVMIsTypeAttribute(attr)) {
            Some(LLVMGetEnumAttributeValue(attr))
        } else {
            None
        }
    }
}

/// The value of a string attribute.
fn attribute_string(attr: LLVMAttributeRef) -> Option<String> {
    if attr.is_null() {
        return None;
    }
    let mut len: c_uint = 0;
    // SAFETY: `attr` is a live string attribute (looked up by string key); the value is
    // valid for `len` bytes and copied at once.
    let ptr = unsafe { LLVMGetStringAttributeValue(attr, &mut len) };
    Some(lossy(ptr, len as usize))
}

/// How an operation may touch one kind of memory (LLVM's `ModRefInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModRef {
    /// Neither reads nor writes.
    None,
    /// May read.
    Ref,
    /// May write.
    Mod,
    /// May read and write.
    ModRef,
}

impl ModRef {
    fn from_bits(bits: u32) -> ModRef {
        match bits & 3 {
            0 => ModRef::None,
            1 => ModRef::Ref,
            2 => ModRef::Mod,
            _ => ModRef::ModRef,
        }
    }

    /// Whether reading is allowed.
    #[must_use]
    pub fn may_read(self) -> bool {
        matches!(self, ModRef::Ref | ModRef::ModRef)
    }

    /// Whether writing is allowed.
    #[must_use]
    pub fn may_write(self) -> bool {
        matches!(self, ModRef::Mod | ModRef::ModRef)
    }
}

/// The kinds of memory LLVM's `memory(...)` attribute distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryLocation {
    /// `argmem`: memory reached through pointer arguments.
    Argument,
    /// `inaccessiblemem`: memory the IR cannot reach.
    Inaccessible,
    /// Everything else.
    Other,
}

impl MemoryLocation {
    const ALL: [MemoryLocation; 3] = [
        MemoryLocation::Argument,
        MemoryLocation::Inaccessible,
        MemoryLocation::Other,
    ];

    fn shift(self) -> u32 {
        match self {
            MemoryLocation::Argument => 0,
            MemoryLocation::Inaccessible => 2,
            MemoryLocation::Other => 4,
        }
    }
}

/// LLVM's memory effects (the `memory(...)` attribute): for each [`MemoryLocation`],
/// whether it may be read and written.
///
/// In LLVM 19 `memory` is an int attribute whose value packs two bits (`ModRef`) per
/// location: argument memory in bits 0–1, inaccessible memory in bits 2–3, other memory in
/// bits 4–5. So `memory(none)` is 0, `memory(read)` is `0b01_01_01` and
/// `memory(argmem: readwrite)` is `0b11`. A function without the attribute may do
/// anything ([`MemoryEffects::UNKNOWN`]). Older spellings (`readnone`, `readonly`) are
/// turned into `memory(...)` by LLVM's parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemoryEffects(u32);

impl MemoryEffects {
    /// No memory access at all (`memory(none)`).
    pub const NONE: MemoryEffects = MemoryEffects(0);
    /// Reads any memory, writes none (`memory(read)`).
    pub const READ_ONLY: MemoryEffects = MemoryEffects(0b01_01_01);
    /// Writes any memory, reads none (`memory(write)`).
    pub const WRITE_ONLY: MemoryEffects = MemoryEffects(0b10_10_10);
    /// May read and write any memory (no attribute).
    pub const UNKNOWN: MemoryEffects = MemoryEffects(0b11_11_11);

    /// From the attribute's integer value; bits above the three locations are ignored.
    #[must_use]
    pub fn from_bits(bits: u64) -> MemoryEffects {
        // The mask keeps the value within 6 bits, so the conversion cannot fail.
        MemoryEffects(u32::try_from(bits & 0b11_11_11).unwrap_or(0b11_11_11))
    }

    /// The attribute's integer value.
    #[must_use]
    pub fn bits(self) -> u32 {
        self.0
    }

    /// How `location` may be accessed.
    #[must_use]
    pub fn get(self, location: MemoryLocation) -> ModRef {
        ModRef::from_bits(self.0 >> location.shift())
    }

    /// Whether no memory is accessed (`memory(none)`).
    #[must_use]
    pub fn does_not_access_memory(self) -> bool {
        self.0 == 0
    }

    /// Whether memory is at most read (`memory(read)` or narrower).
    #[must_use]
    pub fn only_reads_memory(self) -> bool {
        MemoryLocation::ALL
            .iter()
            .all(|&l| !self.get(l).may_write())
    }

    /// Whether memory is at most written.
    #[must_use]
    pub fn only_writes_memory(self) -> bool {
        MemoryLocation::ALL.iter().all(|&l| !self.get(l).may_read())
    }

    /// Whether only argument memory may be accessed (`memory(argmem: ...)`).
    #[must_use]
    pub fn only_accesses_argument_memory(self) -> bool {
        self.get(MemoryLocation::Inaccessible) == ModRef::None
            && self.get(MemoryLocation::Other) == ModRef::None
    }

    /// The effects allowed by both (`&` in LLVM).
    #[must_use]
    pub fn intersect(self, other: MemoryEffects) -> MemoryEffects {
        MemoryEffects(self.0 & other.0)
    }

    /// The effects allowed by either (`|` in LLVM).
    #[must_use]
    pub fn union(self, other: MemoryEffects) -> MemoryEffects {
        MemoryEffects(self.0 | other.0)
    }
}

// ---------------------------------------------------------------------------------------
// Functions

/// A function of a module, defined or only declared.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Function<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> Function<'m> {
    pub(crate) fn from_raw(raw: LLVMValueRef) -> Self {
        Function {
            raw,
            _module: PhantomData,
        }
    }

    pub(crate) fn as_raw(self) -> LLVMValueRef {
        self.raw
    }

    /// The function as a value (its address; a constant of type `ptr`).
    #[must_use]
    pub fn as_value(self) -> Value<'m> {
        Value::from_raw(self.raw)
    }

    /// The function's name, without `@`.
    #[must_use]
    pub fn name(self) -> String {
        value_name(self.raw)
    }

    /// Whether the function is only declared (has no body).
    #[must_use]
    pub fn is_declaration(self) -> bool {
        // SAFETY: `self.raw` is a live function.
        flag(unsafe { LLVMIsDeclaration(self.raw) })
    }

    /// Whether the function has a name reserved for intrinsics (`llvm.*`), as LLVM's
    /// `Function::isIntrinsic`; this includes names LLVM does not know, such as Julia's
    /// `llvm.julia.gc_preserve_begin`.
    #[must_use]
    pub fn is_intrinsic(self) -> bool {
        self.name().starts_with("llvm.")
    }

    /// LLVM's intrinsic ID of the function (see `Intrinsics.td`); 0 for functions that are
    /// not intrinsics LLVM knows.
    #[must_use]
    pub fn intrinsic_id(self) -> u32 {
        // SAFETY: `self.raw` is a live function.
        unsafe { LLVMGetIntrinsicID(self.raw) }
    }

    /// The function's type (`ptr (ptr addrspace(10), i64)`).
    #[must_use]
    pub fn function_type(self) -> Type<'m> {
        // SAFETY: `self.raw` is a live function, a global whose value type is its type.
        Type::from_raw(unsafe { LLVMGlobalGetValueType(self.raw) })
    }

    /// The return type.
    #[must_use]
    pub fn return_type(self) -> Type<'m> {
        let ty = self.function_type();
        ty.return_type().unwrap_or(ty)
    }

    /// The parameters, in order.
    #[must_use]
    pub fn params(self) -> Vec<Value<'m>> {
        // SAFETY: `self.raw` is a live function; indices are below the count.
        let n = unsafe { LLVMCountParams(self.raw) };
        (0..n)
            .filter_map(|i| {
                // SAFETY: `self.raw` is a live function with more than `i` parameters.
                Value::from_nullable(unsafe { LLVMGetParam(self.raw, i) })
            })
            .collect()
    }

    /// The calling convention (`ccc` is 0, `fastcc` 8, `coldcc` 9; see LLVM's
    /// `CallingConv.h`).
    #[must_use]
    pub fn calling_convention(self) -> u32 {
        // SAFETY: `self.raw` is a live function.
        unsafe { LLVMGetFunctionCallConv(self.raw) }
    }

    /// The garbage collector named by `gc "..."`, if any.
    #[must_use]
    pub fn gc(self) -> Option<String> {
        // SAFETY: `self.raw` is a live function; the name is owned by the function.
        from_c_str(unsafe { LLVMGetGC(self.raw) })
    }

    /// The basic blocks, in layout order (the entry block first); empty for a declaration.
    #[must_use]
    pub fn blocks(self) -> Vec<BasicBlock<'m>> {
        let mut out = Vec::new();
        // SAFETY: `self.raw` is a live function; blocks are never removed.
        let mut bb = unsafe { LLVMGetFirstBasicBlock(self.raw) };
        while !bb.is_null() {
            out.push(BasicBlock::from_raw(bb));
            // SAFETY: `bb` is a live block of this function.
            bb = unsafe { LLVMGetNextBasicBlock(bb) };
        }
        out
    }

    /// The entry block; `None` for a declaration.
    #[must_use]
    pub fn entry_block(self) -> Option<BasicBlock<'m>> {
        if self.is_declaration() {
            return None;
        }
        // SAFETY: `self.raw` is a live function with a body.
        BasicBlock::from_nullable(unsafe { LLVMGetEntryBasicBlock(self.raw) })
    }

    /// Every instruction of every block, in layout order.
    #[must_use]
    pub fn instructions(self) -> Vec<Instruction<'m>> {
        self.blocks()
            .into_iter()
            .flat_map(BasicBlock::instructions)
            .collect()
    }

    /// Whether the function has attribute `name` at `index`: an enum or int attribute
    /// when LLVM knows the name (`returns_twice`, `noreturn`, `memory`, `nonnull`), a
    /// string attribute otherwise (`"gc-leaf-function"`).
    #[must_use]
    pub fn has_attribute(self, index: AttributeIndex, name: &str) -> bool {
        match enum_kind(name) {
            Some(kind) => !self.enum_attribute(index, kind).is_null(),
            None => self.string_attribute(index, name).is_some(),
        }
    }

    /// The integer of an int attribute (`memory`, `dereferenceable`, `align`, …), or 0
    /// for a plain enum attribute; `None` when absent or of another sort.
    #[must_use]
    pub fn int_attribute(self, index: AttributeIndex, name: &str) -> Option<u64> {
        attribute_int(self.enum_attribute(index, enum_kind(name)?))
    }

    /// The type of a type attribute (`sret(%T)`, `elementtype(i32)`, `byval(...)`).
    #[must_use]
    pub fn type_attribute(self, index: AttributeIndex, name: &str) -> Option<Type<'m>> {
        attribute_type(self.enum_attribute(index, enum_kind(name)?))
    }

    /// The value of string attribute `key` (`"gc-leaf-function"` → `Some("")`).
    #[must_use]
    pub fn string_attribute(self, index: AttributeIndex, key: &str) -> Option<String> {
        let idx = index.raw()?;
        let len = c_uint::try_from(key.len()).ok()?;
        // SAFETY: `self.raw` is a live function; the key is valid for `len` bytes.
        let attr =
            unsafe { LLVMGetStringAttributeAtIndex(self.raw, idx, key.as_ptr().cast(), len) };
        attribute_string(attr)
    }

    /// The function's memory effects (its `memory(...)` attribute; unknown without one).
    #[must_use]
    pub fn memory_effects(self) -> MemoryEffects {
        self.int_attribute(AttributeIndex::Function, "memory")
            .map_or(MemoryEffects::UNKNOWN, MemoryEffects::from_bits)
    }

    fn enum_attribute(self, index: AttributeIndex, kind: c_uint) -> LLVMAttributeRef {
        match index.raw() {
            // SAFETY: `self.raw` is a live function and `kind` a known attribute kind.
            Some(idx) => unsafe { LLVMGetEnumAttributeAtIndex(self.raw, idx, kind) },
            None => std::ptr::null_mut(),
        }
    }

    /// The whole function as LLVM prints it.
    #[must_use]
    pub fn print(self) -> String {
        print_value(self.raw)
    }
}

/// The type carried by a type attribute.
fn attribute_type<'m>(attr: LLVMAttributeRef) -> Option<Type<'m>> {
    if attr.is_null() {
        return None;
    }
    // SAFETY: `attr` is a live attribute; the type is read only from a type attribute.
    unsafe {
        if flag(LLVMIsTypeAttribute(attr)) {
            Type::from_nullable(LLVMGetTypeAttributeValue(attr))
        } else {
            None
        }
    }
}

impl fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Function(@{})", self.name())
    }
}

// ---------------------------------------------------------------------------------------
// Basic blocks

/// A basic block of a function.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BasicBlock<'m> {
    raw: LLVMBasicBlockRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> BasicBlock<'m> {
    pub(crate) fn from_raw(raw: LLVMBasicBlockRef) -> Self {
        BasicBlock {
            raw,
            _module: PhantomData,
        }
    }

    pub(crate) fn from_nullable(raw: LLVMBasicBlockRef) -> Option<Self> {
        (!raw.is_null()).then(|| BasicBlock::from_raw(raw))
    }

    pub(crate) fn as_raw(self) -> LLVMBasicBlockRef {
        self.raw
    }

    /// The block as a value (of type `label`).
    #[must_use]
    pub fn as_value(self) -> Value<'m> {
        // SAFETY: `self.raw` is a live block.
        Value::from_raw(unsafe { LLVMBasicBlockAsValue(self.raw) })
    }

    /// The block's name without `%` (empty for a numbered block such as `%1`).
    #[must_use]
    pub fn name(self) -> String {
        self.as_value().name()
    }

    /// The function the block belongs to.
    #[must_use]
    pub fn function(self) -> Function<'m> {
        // SAFETY: `self.raw` is a live block; blocks are never detached from functions.
        Function::from_raw(unsafe { LLVMGetBasicBlockParent(self.raw) })
    }

    /// The block's instructions, in order.
    #[must_use]
    pub fn instructions(self) -> Vec<Instruction<'m>> {
        let mut out = Vec::new();
        let mut next = self.first_instruction();
        while let Some(inst) = next {
            out.push(inst);
            next = inst.next();
        }
        out
    }

    /// The first instruction, if the block has any.
    #[must_use]
    pub fn first_instruction(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live block.
        Instruction::from_nullable(unsafe { LLVMGetFirstInstruction(self.raw) })
    }

    /// The last instruction, if the block has any.
    #[must_use]
    pub fn last_instruction(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live block.
        Instruction::from_nullable(unsafe { LLVMGetLastInstruction(self.raw) })
    }

    /// The terminator; `None` while a block under construction has none.
    #[must_use]
    pub fn terminator(self) -> Option<Instruction<'m>> {
        // SAFETY: `self.raw` is a live block.
        Instruction::from_nullable(unsafe { LLVMGetBasicBlockTerminator(self.raw) })
    }

    /// The successors, in the terminator's order, repeats included (a `switch` with two
    /// cases to one block names it twice).
    #[must_use]
    pub fn successors(self) -> Vec<BasicBlock<'m>> {
        self.terminator()
            .map(Instruction::successors)
            .unwrap_or_default()
    }

    /// The `phi` instructions at the top of the block.
    #[must_use]
    pub fn phis(self) -> Vec<Instruction<'m>> {
        self.instructions()
            .into_iter()
            .take_while(|i| i.opcode() == Opcode::Phi)
            .collect()
    }

    /// The first instruction that is not a `phi`.
    #[must_use]
    pub fn first_non_phi(self) -> Option<Instruction<'m>> {
        let mut next = self.first_instruction();
        while let Some(inst) = next {
            if inst.opcode() != Opcode::Phi {
                return Some(inst);
            }
            next = inst.next();
        }
        None
    }

    /// The first instruction before which ordinary code may be inserted: after the `phi`s
    /// and any exception-handling pad (`landingpad`, `catchpad`, `cleanuppad`,
    /// `catchswitch`) — LLVM's `getFirstInsertionPt`.
    #[must_use]
    pub fn first_insertion_point(self) -> Option<Instruction<'m>> {
        let mut next = self.first_instruction();
        while let Some(inst) = next {
            if !matches!(
                inst.opcode(),
                Opcode::Phi
                    | Opcode::LandingPad
                    | Opcode::CatchPad
                    | Opcode::CleanupPad
                    | Opcode::CatchSwitch
            ) {
                return Some(inst);
            }
            next = inst.next();
        }
        None
    }

    /// A name for messages: `%name`, or `%<n>` with the block's position in its function
    /// for a numbered block.
    #[must_use]
    pub fn label(self) -> String {
        let name = self.name();
        if !name.is_empty() {
            return format!("%{name}");
        }
        let index = self
            .function()
            .blocks()
            .iter()
            .position(|b| *b == self)
            .unwrap_or(0);
        format!("%<block {index}>")
    }
}

impl fmt::Debug for BasicBlock<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BasicBlock({})", self.label())
    }
}

// ---------------------------------------------------------------------------------------
// Instructions

/// An instruction's opcode. The ones a GC root placement pass looks at are named; the
/// C API's numbering of anything else is kept in [`Opcode::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(missing_docs)] // The variants are LLVM's instruction names.
pub enum Opcode {
    Ret,
    Br,
    Switch,
    IndirectBr,
    Invoke,
    Unreachable,
    CallBr,
    FNeg,
    Add,
    FAdd,
    Sub,
    FSub,
    Mul,
    FMul,
    UDiv,
    SDiv,
    FDiv,
    URem,
    SRem,
    FRem,
    Shl,
    LShr,
    AShr,
    And,
    Or,
    Xor,
    Alloca,
    Load,
    Store,
    GetElementPtr,
    Trunc,
    ZExt,
    SExt,
    FPToUI,
    FPToSI,
    UIToFP,
    SIToFP,
    FPTrunc,
    FPExt,
    PtrToInt,
    IntToPtr,
    BitCast,
    AddrSpaceCast,
    ICmp,
    FCmp,
    Phi,
    Call,
    Select,
    VAArg,
    ExtractElement,
    InsertElement,
    ShuffleVector,
    ExtractValue,
    InsertValue,
    Freeze,
    Fence,
    AtomicCmpXchg,
    AtomicRMW,
    Resume,
    LandingPad,
    CleanupRet,
    CatchRet,
    CatchPad,
    CleanupPad,
    CatchSwitch,
    /// Anything else, by the C API's `LLVMOpcode` number.
    Other(u32),
}

impl Opcode {
    fn from_llvm(op: LLVMOpcode) -> Opcode {
        use LLVMOpcode as L;
        match op {
            L::LLVMRet => Opcode::Ret,
            L::LLVMBr => Opcode::Br,
            L::LLVMSwitch => Opcode::Switch,
            L::LLVMIndirectBr => Opcode::IndirectBr,
            L::LLVMInvoke => Opcode::Invoke,
            L::LLVMUnreachable => Opcode::Unreachable,
            L::LLVMCallBr => Opcode::CallBr,
            L::LLVMFNeg => Opcode::FNeg,
            L::LLVMAdd => Opcode::Add,
            L::LLVMFAdd => Opcode::FAdd,
            L::LLVMSub => Opcode::Sub,
            L::LLVMFSub => Opcode::FSub,
            L::LLVMMul => Opcode::Mul,
            L::LLVMFMul => Opcode::FMul,
            L::LLVMUDiv => Opcode::UDiv,
            L::LLVMSDiv => Opcode::SDiv,
            L::LLVMFDiv => Opcode::FDiv,
            L::LLVMURem => Opcode::URem,
            L::LLVMSRem => Opcode::SRem,
            L::LLVMFRem => Opcode::FRem,
            L::LLVMShl => Opcode::Shl,
            L::LLVMLShr => Opcode::LShr,
            L::LLVMAShr => Opcode::AShr,
            L::LLVMAnd => Opcode::And,
            L::LLVMOr => Opcode::Or,
            L::LLVMXor => Opcode::Xor,
            L::LLVMAlloca => Opcode::Alloca,
            L::LLVMLoad => Opcode::Load,
            L::LLVMStore => Opcode::Store,
            L::LLVMGetElementPtr => Opcode::GetElementPtr,
            L::LLVMTrunc => Opcode::Trunc,
            L::LLVMZExt => Opcode::ZExt,
            L::LLVMSExt => Opcode::SExt,
            L::LLVMFPToUI => Opcode::FPToUI,
            L::LLVMFPToSI => Opcode::FPToSI,
            L::LLVMUIToFP => Opcode::UIToFP,
            L::LLVMSIToFP => Opcode::SIToFP,
            L::LLVMFPTrunc => Opcode::FPTrunc,
            L::LLVMFPExt => Opcode::FPExt,
            L::LLVMPtrToInt => Opcode::PtrToInt,
            L::LLVMIntToPtr => Opcode::IntToPtr,
            L::LLVMBitCast => Opcode::BitCast,
            L::LLVMAddrSpaceCast => Opcode::AddrSpaceCast,
            L::LLVMICmp => Opcode::ICmp,
            L::LLVMFCmp => Opcode::FCmp,
            L::LLVMPHI => Opcode::Phi,
            L::LLVMCall => Opcode::Call,
            L::LLVMSelect => Opcode::Select,
            L::LLVMVAArg => Opcode::VAArg,
            L::LLVMExtractElement => Opcode::ExtractElement,
            L::LLVMInsertElement => Opcode::InsertElement,
            L::LLVMShuffleVector => Opcode::ShuffleVector,
            L::LLVMExtractValue => Opcode::ExtractValue,
            L::LLVMInsertValue => Opcode::InsertValue,
            L::LLVMFreeze => Opcode::Freeze,
            L::LLVMFence => Opcode::Fence,
            L::LLVMAtomicCmpXchg => Opcode::AtomicCmpXchg,
            L::LLVMAtomicRMW => Opcode::AtomicRMW,
            L::LLVMResume => Opcode::Resume,
            L::LLVMLandingPad => Opcode::LandingPad,
            L::LLVMCleanupRet => Opcode::CleanupRet,
            L::LLVMCatchRet => Opcode::CatchRet,
            L::LLVMCatchPad => Opcode::CatchPad,
            L::LLVMCleanupPad => Opcode::CleanupPad,
            L::LLVMCatchSwitch => Opcode::CatchSwitch,
            other => Opcode::Other(other as u32),
        }
    }

    /// Whether this is a call-like instruction with a callee (`call`, `invoke`, `callbr`).
    #[must_use]
    pub fn is_call(self) -> bool {
        matches!(self, Opcode::Call | Opcode::Invoke | Opcode::CallBr)
    }

    /// Whether this is a cast (`trunc` … `addrspacecast`).
    #[must_use]
    pub fn is_cast(self) -> bool {
        matches!(
            self,
            Opcode::Trunc
                | Opcode::ZExt
                | Opcode::SExt
                | Opcode::FPToUI
                | Opcode::FPToSI
                | Opcode::UIToFP
                | Opcode::SIToFP
                | Opcode::FPTrunc
                | Opcode::FPExt
                | Opcode::PtrToInt
                | Opcode::IntToPtr
                | Opcode::BitCast
                | Opcode::AddrSpaceCast
        )
    }

    /// Whether this is an integer or floating-point arithmetic or bitwise operation.
    #[must_use]
    pub fn is_arithmetic(self) -> bool {
        matches!(
            self,
            Opcode::FNeg
                | Opcode::Add
                | Opcode::FAdd
                | Opcode::Sub
                | Opcode::FSub
                | Opcode::Mul
                | Opcode::FMul
                | Opcode::UDiv
                | Opcode::SDiv
                | Opcode::FDiv
                | Opcode::URem
                | Opcode::SRem
                | Opcode::FRem
                | Opcode::Shl
                | Opcode::LShr
                | Opcode::AShr
                | Opcode::And
                | Opcode::Or
                | Opcode::Xor
        )
    }
}

/// An integer comparison predicate (`icmp eq`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // The variants are LLVM's predicate names.
pub enum IntPredicate {
    Eq,
    Ne,
    Ugt,
    Uge,
    Ult,
    Ule,
    Sgt,
    Sge,
    Slt,
    Sle,
}

/// An instruction. It stays a valid handle after it is erased (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Instruction<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

/// Metadata attached to an instruction, as a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Metadata<'m> {
    /// `!"text"`.
    String(String),
    /// `!{...}`, its operands in order (a null operand reads as [`Metadata::Other`]).
    Node(Vec<Metadata<'m>>),
    /// A value wrapped as metadata (`i64 0`, `ptr @g`).
    Value(Value<'m>),
    /// Anything else, or a node nested too deep.
    Other,
}

impl<'m> Metadata<'m> {
    fn read(raw: LLVMValueRef, depth: u32) -> Metadata<'m> {
        if raw.is_null() || depth == 0 {
            return Metadata::Other;
        }
        // SAFETY: `raw` is a live value of this context (an operand of live metadata).
        unsafe {
            if !LLVMIsAMDString(raw).is_null() {
                let mut len: c_uint = 0;
                let text = LLVMGetMDString(raw, &mut len);
                if text.is_null() {
                    return Metadata::Other;
                }
                let bytes = std::slice::from_raw_parts(text.cast::<u8>(), len as usize);
                return Metadata::String(String::from_utf8_lossy(bytes).into_owned());
            }
            if !LLVMIsAMDNode(raw).is_null() {
                let n = LLVMGetMDNodeNumOperands(raw) as usize;
                let mut ops: Vec<LLVMValueRef> = vec![std::ptr::null_mut(); n];
                LLVMGetMDNodeOperands(raw, ops.as_mut_ptr());
                return Metadata::Node(
                    ops.into_iter()
                        .map(|o| Metadata::read(o, depth - 1))
                        .collect(),
                );
            }
            if LLVMGetValueKind(raw) == LLVMValueKind::LLVMMetadataAsValueValueKind {
                return Metadata::Other;
            }
        }
        Metadata::Value(Value::from_raw(raw))
    }

    /// The operands of a node (none for anything else).
    #[must_use]
    pub fn operands(&self) -> &[Metadata<'m>] {
        match self {
            Metadata::Node(ops) => ops,
            _ => &[],
        }
    }

    /// The text of a string.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Metadata::String(s) => Some(s),
            _ => None,
        }
    }
}

impl<'m> Instruction<'m> {
    pub(crate) fn from_raw(raw: LLVMValueRef) -> Self {
        Instruction {
            raw,
            _module: PhantomData,
        }
    }

    pub(crate) fn from_nullable(raw: LLVMValueRef) -> Option<Self> {
        (!raw.is_null()).then(|| Instruction::from_raw(raw))
    }

    pub(crate) fn as_raw(self) -> LLVMValueRef {
        self.raw
    }

    /// The instruction as a value (its result, for instructions that have one).
    #[must_use]
    pub fn as_value(self) -> Value<'m> {
        Value::from_raw(self.raw)
    }

    /// The opcode.
    #[must_use]
    pub fn opcode(self) -> Opcode {
        // SAFETY: `self.raw` is a live instruction.
        Opcode::from_llvm(unsafe { LLVMGetInstructionOpcode(self.raw) })
    }

    /// The result type (`void` when the instruction produces no value).
    #[must_use]
    pub fn ty(self) -> Type<'m> {
        self.as_value().ty()
    }

    /// The result's name without `%` (empty when unnamed).
    #[must_use]
    pub fn name(self) -> String {
        value_name(self.raw)
    }

    /// The instruction as LLVM prints it (`%d = addrspacecast ptr addrspace(10) %o to
    /// ptr addrspace(11)`).
    #[must_use]
    pub fn print(self) -> String {
        print_value(self.raw)
    }

    /// Whether the instruction was erased (is no longer in a block).
    #[must_use]
    pub fn is_erased(self) -> bool {
        !is_attached(self.raw)
    }

    /// The block holding the instruction; `None` once erased.
    #[must_use]
    pub fn block(self) -> Option<BasicBlock<'m>> {
        // SAFETY: `self.raw` is a live instruction.
        BasicBlock::from_nullable(unsafe { LLVMGetInstructionParent(self.raw) })
    }

    /// The function holding the instruction; `None` once erased.
    #[must_use]
    pub fn function(self) -> Option<Function<'m>> {
        self.block().map(BasicBlock::function)
    }

    /// The next instruction in the block.
    #[must_use]
    pub fn next(self) -> Option<Instruction<'m>> {
        if self.is_erased() {
            return None;
        }
        // SAFETY: `self.raw` is a live instruction in a block (LLVM needs the parent).
        Instruction::from_nullable(unsafe { LLVMGetNextInstruction(self.raw) })
    }

    /// The previous instruction in the block.
    #[must_use]
    pub fn prev(self) -> Option<Instruction<'m>> {
        if self.is_erased() {
            return None;
        }
        // SAFETY: `self.raw` is a live instruction in a block (LLVM needs the parent).
        Instruction::from_nullable(unsafe { LLVMGetPreviousInstruction(self.raw) })
    }

    /// The instruction's position in its block, from 0; `None` once erased.
    #[must_use]
    pub fn index_in_block(self) -> Option<usize> {
        self.block()?;
        let mut index = 0;
        let mut prev = self.prev();
        while let Some(p) = prev {
            index += 1;
            prev = p.prev();
        }
        Some(index)
    }

    /// Whether `self` comes strictly before `other` in the same block; `None` when they
    /// are not in the same block (or either is erased).
    #[must_use]
    pub fn comes_before(self, other: Instruction<'m>) -> Option<bool> {
        let block = self.block()?;
        if other.block()? != block {
            return None;
        }
        let mut next = self.next();
        while let Some(n) = next {
            if n == other {
                return Some(true);
            }
            next = n.next();
        }
        Some(false)
    }

    /// The operands (for a call: arguments, bundle values, then the callee; for a branch
    /// the condition and the target blocks as values).
    #[must_use]
    pub fn operands(self) -> Vec<Value<'m>> {
        self.as_value().operands()
    }

    /// Operand `index`.
    #[must_use]
    pub fn operand(self, index: u32) -> Option<Value<'m>> {
        if index >= num_operands(self.raw) {
            return None;
        }
        // SAFETY: `self.raw` is a live instruction with more than `index` operands.
        Value::from_nullable(unsafe { LLVMGetOperand(self.raw, index) })
    }

    /// The number of operands.
    #[must_use]
    pub fn num_operands(self) -> u32 {
        num_operands(self.raw)
    }

    /// The uses of the instruction's result (see [`Value::uses`]).
    #[must_use]
    pub fn uses(self) -> Vec<Use<'m>> {
        self.as_value().uses()
    }

    /// The distinct users of the instruction's result.
    #[must_use]
    pub fn users(self) -> Vec<Value<'m>> {
        self.as_value().users()
    }

    /// Whether this is a terminator (`ret`, `br`, `switch`, `invoke`, `unreachable`, …).
    #[must_use]
    pub fn is_terminator(self) -> bool {
        // SAFETY: `self.raw` is a live instruction.
        !unsafe { LLVMIsATerminatorInst(self.raw) }.is_null()
    }

    /// The successor blocks of a terminator, in order and with repeats; empty for other
    /// instructions and once erased.
    #[must_use]
    pub fn successors(self) -> Vec<BasicBlock<'m>> {
        if !self.is_terminator() || self.is_erased() {
            return Vec::new();
        }
        // SAFETY: `self.raw` is a live terminator in a block; indices are below the count.
        let n = unsafe { LLVMGetNumSuccessors(self.raw) };
        (0..n)
            .filter_map(|i| {
                // SAFETY: `self.raw` is a live terminator with more than `i` successors.
                BasicBlock::from_nullable(unsafe { LLVMGetSuccessor(self.raw, i) })
            })
            .collect()
    }

    /// The incoming `(value, block)` pairs of a `phi`, in order; empty for other
    /// instructions.
    #[must_use]
    pub fn phi_incoming(self) -> Vec<(Value<'m>, BasicBlock<'m>)> {
        if self.opcode() != Opcode::Phi {
            return Vec::new();
        }
        // SAFETY: `self.raw` is a live `phi`; indices are below the count.
        let n = unsafe { LLVMCountIncoming(self.raw) };
        (0..n)
            .filter_map(|i| {
                // SAFETY: as above.
                let value = Value::from_nullable(unsafe { LLVMGetIncomingValue(self.raw, i) })?;
                // SAFETY: as above.
                let block =
                    BasicBlock::from_nullable(unsafe { LLVMGetIncomingBlock(self.raw, i) })?;
                Some((value, block))
            })
            .collect()
    }

    /// The instruction as a call site, if it is a `call`, `invoke` or `callbr`.
    #[must_use]
    pub fn as_call(self) -> Option<Call<'m>> {
        self.opcode().is_call().then_some(Call { inst: self })
    }

    /// The type an `alloca` allocates.
    #[must_use]
    pub fn allocated_type(self) -> Option<Type<'m>> {
        if self.opcode() != Opcode::Alloca {
            return None;
        }
        // SAFETY: `self.raw` is a live `alloca`.
        Type::from_nullable(unsafe { LLVMGetAllocatedType(self.raw) })
    }

    /// The mask of a `shufflevector`: for each result lane, the lane of the two operands
    /// joined end to end that it takes, or `None` where the mask is `poison`/`undef`.
    #[must_use]
    pub fn shuffle_mask(self) -> Option<Vec<Option<u32>>> {
        if self.opcode() != Opcode::ShuffleVector {
            return None;
        }
        // SAFETY: `self.raw` is a live `shufflevector`.
        let n = unsafe { LLVMGetNumMaskElements(self.raw) };
        let lanes = (0..n)
            .map(|i| {
                // SAFETY: `self.raw` is a live `shufflevector` and `i` is below its mask's
                // length.
                let m = unsafe { LLVMGetMaskValue(self.raw, i) };
                u32::try_from(m).ok()
            })
            .collect();
        Some(lanes)
    }

    /// The instruction's metadata of kind `kind` (`"tbaa"`, `"alias.scope"`,
    /// `"invariant.load"`), read into a tree (nodes nested at most 16 deep; deeper ones, and
    /// the cycles of self-referential nodes, read as [`Metadata::Other`]).
    #[must_use]
    pub fn metadata(self, kind: &str) -> Option<Metadata<'m>> {
        let len = c_uint::try_from(kind.len()).ok()?;
        // SAFETY: `self.raw` is a live instruction; its type's context is live with it; the
        // name is valid for `len` bytes.
        let md = unsafe {
            let ctx = LLVMGetTypeContext(LLVMTypeOf(self.raw));
            let id = LLVMGetMDKindIDInContext(ctx, kind.as_ptr().cast(), len);
            LLVMGetMetadata(self.raw, id)
        };
        (!md.is_null()).then(|| Metadata::read(md, 16))
    }

    /// The alignment in bytes of an `alloca`, `load` or `store` (0 if none is given).
    #[must_use]
    pub fn alignment(self) -> Option<u32> {
        if !matches!(self.opcode(), Opcode::Alloca | Opcode::Load | Opcode::Store) {
            return None;
        }
        // SAFETY: `self.raw` is a live alloca, load or store, the kinds LLVMGetAlignment
        // accepts.
        Some(unsafe { LLVMGetAlignment(self.raw) })
    }

    /// The source element type of a `getelementptr`.
    #[must_use]
    pub fn gep_source_type(self) -> Option<Type<'m>> {
        if self.opcode() != Opcode::GetElementPtr {
            return None;
        }
        // SAFETY: `self.raw` is a live `getelementptr`.
        Type::from_nullable(unsafe { LLVMGetGEPSourceElementType(self.raw) })
    }

    /// Whether a `getelementptr` is `inbounds` (false for other instructions).
    #[must_use]
    pub fn is_inbounds(self) -> bool {
        // SAFETY: `self.raw` is a live `getelementptr`.
        self.opcode() == Opcode::GetElementPtr && flag(unsafe { LLVMIsInBounds(self.raw) })
    }

    /// The constant indices of an `extractvalue` or `insertvalue`.
    #[must_use]
    pub fn aggregate_indices(self) -> Option<Vec<u32>> {
        if !matches!(self.opcode(), Opcode::ExtractValue | Opcode::InsertValue) {
            return None;
        }
        // SAFETY: `self.raw` is a live `extractvalue` or `insertvalue`; the index array
        // holds `n` entries and is copied at once.
        unsafe {
            let n = LLVMGetNumIndices(self.raw) as usize;
            let ptr = LLVMGetIndices(self.raw);
            if ptr.is_null() || n == 0 {
                return Some(Vec::new());
            }
            Some(std::slice::from_raw_parts(ptr, n).to_vec())
        }
    }

    /// The predicate of an `icmp`.
    #[must_use]
    pub fn icmp_predicate(self) -> Option<IntPredicate> {
        if self.opcode() != Opcode::ICmp {
            return None;
        }
        use LLVMIntPredicate as P;
        // SAFETY: `self.raw` is a live `icmp`, whose predicate is a valid integer one.
        Some(match unsafe { LLVMGetICmpPredicate(self.raw) } {
            P::LLVMIntEQ => IntPredicate::Eq,
            P::LLVMIntNE => IntPredicate::Ne,
            P::LLVMIntUGT => IntPredicate::Ugt,
            P::LLVMIntUGE => IntPredicate::Uge,
            P::LLVMIntULT => IntPredicate::Ult,
            P::LLVMIntULE => IntPredicate::Ule,
            P::LLVMIntSGT => IntPredicate::Sgt,
            P::LLVMIntSGE => IntPredicate::Sge,
            P::LLVMIntSLT => IntPredicate::Slt,
            P::LLVMIntSLE => IntPredicate::Sle,
        })
    }

    /// Where the instruction is, for diagnostics: ``function @f, block %bb, instruction
    /// `%x = load ptr, ptr %p` `` (``erased instruction `...` `` once erased).
    #[must_use]
    pub fn describe(self) -> String {
        match self.block() {
            Some(block) => format!(
                "function @{}, block {}, instruction `{}`",
                block.function().name(),
                block.label(),
                self.print()
            ),
            None => format!("erased instruction `{}`", self.print()),
        }
    }
}

impl<'m> From<Instruction<'m>> for Value<'m> {
    fn from(inst: Instruction<'m>) -> Value<'m> {
        inst.as_value()
    }
}

impl<'m> From<Function<'m>> for Value<'m> {
    fn from(function: Function<'m>) -> Value<'m> {
        function.as_value()
    }
}

impl<'m> From<BasicBlock<'m>> for Value<'m> {
    fn from(block: BasicBlock<'m>) -> Value<'m> {
        block.as_value()
    }
}

impl<'m> From<Call<'m>> for Value<'m> {
    fn from(call: Call<'m>) -> Value<'m> {
        call.instruction().as_value()
    }
}

impl<'m> From<Call<'m>> for Instruction<'m> {
    fn from(call: Call<'m>) -> Instruction<'m> {
        call.instruction()
    }
}

impl fmt::Display for Instruction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.print())
    }
}

impl fmt::Debug for Instruction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instruction({})", self.print())
    }
}

// ---------------------------------------------------------------------------------------
// Calls

/// An operand bundle of a call: `"jl_roots"(ptr addrspace(10) %a, ...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperandBundle<'m> {
    /// The tag (`"jl_roots"`, `"deopt"`, `"gc-live"`).
    pub tag: String,
    /// The values, in order.
    pub args: Vec<Value<'m>>,
}

/// An operand bundle LLVM copied out for us; disposed on drop.
pub(crate) struct OwnedBundle(pub(crate) LLVMOperandBundleRef);

impl OwnedBundle {
    pub(crate) fn tag(&self) -> String {
        let mut len = 0;
        // SAFETY: `self.0` is a live bundle; the tag is valid for `len` bytes while it
        // lives, and is copied at once.
        let ptr = unsafe { LLVMGetOperandBundleTag(self.0, &mut len) };
        lossy(ptr, len)
    }

    fn args<'m>(&self) -> Vec<Value<'m>> {
        // SAFETY: `self.0` is a live bundle; indices are below the count.
        let n = unsafe { LLVMGetNumOperandBundleArgs(self.0) };
        (0..n)
            .filter_map(|i| {
                // SAFETY: `self.0` is a live bundle with more than `i` values.
                Value::from_nullable(unsafe { LLVMGetOperandBundleArgAtIndex(self.0, i) })
            })
            .collect()
    }
}

impl Drop for OwnedBundle {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the bundle came from `LLVMGetOperandBundleAtIndex` (or
            // `LLVMCreateOperandBundle`) and is disposed exactly once.
            unsafe { LLVMDisposeOperandBundle(self.0) };
        }
    }
}

/// A call site: a `call`, `invoke` or `callbr` instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Call<'m> {
    inst: Instruction<'m>,
}

impl<'m> Call<'m> {
    /// The instruction.
    #[must_use]
    pub fn instruction(self) -> Instruction<'m> {
        self.inst
    }

    fn raw(self) -> LLVMValueRef {
        self.inst.raw
    }

    /// Whether this is an `invoke`.
    #[must_use]
    pub fn is_invoke(self) -> bool {
        self.inst.opcode() == Opcode::Invoke
    }

    /// The called operand (a function, or any pointer for an indirect call).
    #[must_use]
    pub fn called_value(self) -> Value<'m> {
        // SAFETY: `self.raw()` is a live call site.
        Value::from_raw(unsafe { LLVMGetCalledValue(self.raw()) })
    }

    /// The callee of a direct call.
    #[must_use]
    pub fn called_function(self) -> Option<Function<'m>> {
        self.called_value().as_function()
    }

    /// The name of the callee of a direct call.
    #[must_use]
    pub fn callee_name(self) -> Option<String> {
        self.called_function().map(Function::name)
    }

    /// Whether this is a direct call of a function named `llvm.*` (see
    /// [`Function::is_intrinsic`]).
    #[must_use]
    pub fn is_intrinsic(self) -> bool {
        self.called_function().is_some_and(Function::is_intrinsic)
    }

    /// The function type the call uses (which, with opaque pointers, need not be the
    /// callee's own).
    #[must_use]
    pub fn function_type(self) -> Type<'m> {
        // SAFETY: `self.raw()` is a live call site.
        Type::from_raw(unsafe { LLVMGetCalledFunctionType(self.raw()) })
    }

    /// The number of arguments (without the callee and the bundles' values).
    #[must_use]
    pub fn num_arguments(self) -> u32 {
        // SAFETY: `self.raw()` is a live call site.
        unsafe { LLVMGetNumArgOperands(self.raw()) }
    }

    /// The arguments, in order (without the callee and the bundles' values).
    #[must_use]
    pub fn arguments(self) -> Vec<Value<'m>> {
        // Arguments are the first operands of every call site.
        (0..self.num_arguments())
            .filter_map(|i| self.inst.operand(i))
            .collect()
    }

    /// The operand bundles, in order.
    #[must_use]
    pub fn operand_bundles(self) -> Vec<OperandBundle<'m>> {
        self.owned_bundles()
            .iter()
            .map(|b| OperandBundle {
                tag: b.tag(),
                args: b.args(),
            })
            .collect()
    }

    /// The first operand bundle with tag `tag`.
    #[must_use]
    pub fn operand_bundle(self, tag: &str) -> Option<OperandBundle<'m>> {
        self.operand_bundles().into_iter().find(|b| b.tag == tag)
    }

    /// Whether the call has an operand bundle with tag `tag`.
    #[must_use]
    pub fn has_operand_bundle(self, tag: &str) -> bool {
        self.owned_bundles().iter().any(|b| b.tag() == tag)
    }

    /// Copies of the bundles, for the builder to reuse.
    pub(crate) fn owned_bundles(self) -> Vec<OwnedBundle> {
        if self.inst.opcode() == Opcode::CallBr {
            // The C API reads bundles of calls and invokes only.
            return Vec::new();
        }
        // SAFETY: `self.raw()` is a live call or invoke; indices are below the count and
        // each bundle returned is a fresh copy that `OwnedBundle` disposes.
        let n = unsafe { LLVMGetNumOperandBundles(self.raw()) };
        (0..n)
            .map(|i| {
                // SAFETY: `self.raw()` is a live call or invoke with more than `i` bundles;
                // the copy returned is disposed by `OwnedBundle`.
                OwnedBundle(unsafe { LLVMGetOperandBundleAtIndex(self.raw(), i) })
            })
            .filter(|b| !b.0.is_null())
            .collect()
    }

    /// The calling convention of the call site.
    #[must_use]
    pub fn calling_convention(self) -> u32 {
        // SAFETY: `self.raw()` is a live call site.
        unsafe { LLVMGetInstructionCallConv(self.raw()) }
    }

    /// The normal destination of an `invoke`.
    #[must_use]
    pub fn normal_dest(self) -> Option<BasicBlock<'m>> {
        if !self.is_invoke() {
            return None;
        }
        // SAFETY: `self.raw()` is a live `invoke`.
        BasicBlock::from_nullable(unsafe { LLVMGetNormalDest(self.raw()) })
    }

    /// The unwind destination of an `invoke`.
    #[must_use]
    pub fn unwind_dest(self) -> Option<BasicBlock<'m>> {
        if !self.is_invoke() {
            return None;
        }
        // SAFETY: `self.raw()` is a live `invoke`.
        BasicBlock::from_nullable(unsafe { LLVMGetUnwindDest(self.raw()) })
    }

    /// Whether the call site itself carries attribute `name` at `index` (enum or int
    /// attribute when LLVM knows the name, string attribute otherwise). The callee's own
    /// attributes are not consulted: see [`Call::has_fn_attribute`].
    #[must_use]
    pub fn has_attribute(self, index: AttributeIndex, name: &str) -> bool {
        match enum_kind(name) {
            Some(kind) => !self.enum_attribute(index, kind).is_null(),
            None => self.string_attribute(index, name).is_some(),
        }
    }

    /// The integer of a call-site int attribute (0 for a plain enum attribute).
    #[must_use]
    pub fn int_attribute(self, index: AttributeIndex, name: &str) -> Option<u64> {
        attribute_int(self.enum_attribute(index, enum_kind(name)?))
    }

    /// The type of a call-site type attribute (`elementtype(i32)`, `sret(%T)`).
    #[must_use]
    pub fn type_attribute(self, index: AttributeIndex, name: &str) -> Option<Type<'m>> {
        attribute_type(self.enum_attribute(index, enum_kind(name)?))
    }

    /// The value of a call-site string attribute.
    #[must_use]
    pub fn string_attribute(self, index: AttributeIndex, key: &str) -> Option<String> {
        let idx = index.raw()?;
        let len = c_uint::try_from(key.len()).ok()?;
        // SAFETY: `self.raw()` is a live call site; the key is valid for `len` bytes.
        let attr =
            unsafe { LLVMGetCallSiteStringAttribute(self.raw(), idx, key.as_ptr().cast(), len) };
        attribute_string(attr)
    }

    /// Whether the call has function attribute `name`, on the call site or, for a direct
    /// call, on the callee (LLVM's `CallBase::hasFnAttr`): how to ask whether a call
    /// `returns_twice`.
    #[must_use]
    pub fn has_fn_attribute(self, name: &str) -> bool {
        self.has_attribute(AttributeIndex::Function, name)
            || self
                .called_function()
                .is_some_and(|f| f.has_attribute(AttributeIndex::Function, name))
    }

    /// The call's memory effects, as LLVM's `CallBase::getMemoryEffects` computes them:
    /// the call site's `memory(...)` attribute intersected, for a direct call, with the
    /// callee's, where the callee's are first widened by the operand bundles: any bundle
    /// other than `ptrauth` and `kcfi` lets the call read any memory, and any bundle other
    /// than those, `deopt` and `funclet` lets it write any memory (not for `llvm.assume`).
    /// So a `memory(none)` callee called with a `"jl_roots"` bundle reads memory.
    #[must_use]
    pub fn memory_effects(self) -> MemoryEffects {
        let site = self
            .int_attribute(AttributeIndex::Function, "memory")
            .map_or(MemoryEffects::UNKNOWN, MemoryEffects::from_bits);
        let Some(callee) = self.called_function() else {
            return site;
        };
        let mut callee_effects = callee.memory_effects();
        let is_assume = callee.name() == "llvm.assume";
        if !is_assume {
            let tags: Vec<String> = self.owned_bundles().iter().map(OwnedBundle::tag).collect();
            let reading = tags
                .iter()
                .any(|t| !matches!(t.as_str(), "ptrauth" | "kcfi"));
            let clobbering = tags
                .iter()
                .any(|t| !matches!(t.as_str(), "ptrauth" | "kcfi" | "deopt" | "funclet"));
            if reading {
                callee_effects = callee_effects.union(MemoryEffects::READ_ONLY);
            }
            if clobbering {
                callee_effects = callee_effects.union(MemoryEffects::WRITE_ONLY);
            }
        }
        site.intersect(callee_effects)
    }

    fn enum_attribute(self, index: AttributeIndex, kind: c_uint) -> LLVMAttributeRef {
        match index.raw() {
            // SAFETY: `self.raw()` is a live call site and `kind` a known attribute kind.
            Some(idx) => unsafe { LLVMGetCallSiteEnumAttribute(self.raw(), idx, kind) },
            None => std::ptr::null_mut(),
        }
    }
}

impl fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Call({})", self.inst.print())
    }
}

/// Whether the value `raw` belongs to the module `module` (or, for constants without
/// globals and metadata, to its context). Used by the builder before linking values.
pub(crate) fn owner_check(module: &Module<'_>, raw: LLVMValueRef) -> Result<(), String> {
    use llvm_sys::core::{LLVMGetModuleContext, LLVMGetTypeContext};
    let m = module.as_raw();
    // SAFETY: `raw` is a live value (every handle is), and each query below only reads it.
    unsafe {
        if LLVMGetTypeContext(LLVMTypeOf(raw)) != LLVMGetModuleContext(m) {
            return Err(format!("`{}` belongs to another context", print_value(raw)));
        }
        let function_module = |f: LLVMValueRef| LLVMGetGlobalParent(f);
        if !LLVMIsAInstruction(raw).is_null() {
            let bb = LLVMGetInstructionParent(raw);
            if bb.is_null() {
                return Err(format!("`{}` was erased", print_value(raw)));
            }
            if function_module(LLVMGetBasicBlockParent(bb)) != m {
                return Err(format!("`{}` belongs to another module", print_value(raw)));
            }
            return Ok(());
        }
        if !LLVMIsAArgument(raw).is_null() {
            if function_module(LLVMGetParamParent(raw)) != m {
                return Err(format!(
                    "argument `{}` belongs to another module",
                    print_value(raw)
                ));
            }
            return Ok(());
        }
        if !LLVMIsABasicBlock(raw).is_null() {
            let bb = LLVMValueAsBasicBlock(raw);
            if function_module(LLVMGetBasicBlockParent(bb)) != m {
                return Err(format!(
                    "block `%{}` belongs to another module",
                    value_name(raw)
                ));
            }
            return Ok(());
        }
        if LLVMIsAConstant(raw).is_null() {
            // Metadata and inline assembly live in the context, checked above.
            return Ok(());
        }
        // A constant: every global it refers to must be ours.
        let mut seen = HashSet::new();
        let mut work = vec![raw];
        while let Some(c) = work.pop() {
            if !seen.insert(c) {
                continue;
            }
            if !LLVMIsAGlobalValue(c).is_null() {
                if LLVMGetGlobalParent(c) != m {
                    return Err(format!("@{} belongs to another module", value_name(c)));
                }
                continue;
            }
            if !LLVMIsABasicBlock(c).is_null() {
                let bb = LLVMValueAsBasicBlock(c);
                if function_module(LLVMGetBasicBlockParent(bb)) != m {
                    return Err("a block address refers to another module".to_owned());
                }
                continue;
            }
            let n = num_operands(c);
            work.extend(
                (0..n)
                    .map(|i| LLVMGetOperand(c, i))
                    .filter(|v| !v.is_null()),
            );
        }
        Ok(())
    }
}
