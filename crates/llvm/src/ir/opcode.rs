//! Opcodes and predicates: [`Opcode`] and [`IntPredicate`].

use llvm_sys::{LLVMIntPredicate, LLVMOpcode};

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
    pub(super) fn from_llvm(op: LLVMOpcode) -> Opcode {
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

impl IntPredicate {
    pub(super) fn from_llvm(predicate: LLVMIntPredicate) -> IntPredicate {
        use LLVMIntPredicate as P;
        match predicate {
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
        }
    }
}
