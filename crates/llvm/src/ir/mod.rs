//! Walking IR: functions, blocks, instructions, operands, types, attributes.
//!
//! Every item here is a small `Copy` handle around an LLVM pointer, tied by its lifetime
//! `'m` to a shared borrow of the [`Module`](crate::Module) it came from: [`Function`],
//! [`BasicBlock`], [`Instruction`] (and its call view [`Call`]), [`Value`] and [`Type`].
//! Handles compare and hash by pointer, so they can key `HashMap`s and `HashSet`s; two
//! handles are equal exactly when they name the same LLVM object.
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
//!
//! One module per kind of handle: `types`, `values` (constants included), `attributes`
//! (shared by functions and call sites), `function`, `block`, `opcode`, `instruction`,
//! `call` (and operand bundles) and `metadata`.
//!
//! # The handle invariant
//!
//! The `raw` pointer of every handle is a non-null pointer to a live LLVM object of the
//! handle's kind, owned by the module borrowed for `'m` (or, for types and constants, by
//! that module's context, which outlives the borrow). Instructions are never freed while
//! the module lives (see `crate::builder`), so an instruction handle stays valid even once
//! erased; it is then detached (no parent block). The `unsafe fn from_raw` of each handle
//! is where a caller promises this; every safe method then relies on it.

mod attributes;
mod block;
mod call;
mod function;
mod instruction;
mod metadata;
mod opcode;
mod types;
mod values;

pub use attributes::{AttributeIndex, MemoryEffects, MemoryLocation, ModRef};
pub use block::BasicBlock;
pub use call::{Call, OperandBundle};
pub use function::Function;
pub use instruction::Instruction;
pub use metadata::Metadata;
pub use opcode::{IntPredicate, Opcode};
pub use types::{Type, TypeKind};
pub use values::{Use, Value, ValueKind};

pub(crate) use call::OwnedBundle;
pub(crate) use values::num_operands;

/// The handles `wrap(get(owner, i))` for `i` in `0..n`, in order, nulls skipped: how each
/// list of an LLVM object (parameters, successors, fields, operands) is read.
///
/// # Safety
///
/// `owner` is a live LLVM object with at least `n` items that `get` reads, and what `get`
/// returns is null or an object that `wrap`'s contract accepts.
unsafe fn read_indexed<O: Copy, R, T>(
    owner: O,
    n: u32,
    get: unsafe extern "C" fn(O, u32) -> R,
    wrap: unsafe fn(R) -> Option<T>,
) -> Vec<T> {
    (0..n)
        .filter_map(|i| {
            // SAFETY: `owner` has more than `i` items (this function's contract).
            let raw = unsafe { get(owner, i) };
            // SAFETY: `wrap` accepts what `get` returns (this function's contract).
            unsafe { wrap(raw) }
        })
        .collect()
}
