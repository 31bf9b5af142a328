//! The crate's one error type.

use std::fmt;

/// Everything that can go wrong between Locus and libLLVM.
///
/// Each variant carries LLVM's own diagnostic text, which names the place of the fault
/// (for IR text: `name:line:column`; for the verifier: the function and the instruction).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The IR (text or bitcode) could not be parsed. The message starts with
    /// `name:line:column: error:` and quotes the offending line.
    Parse {
        /// LLVM's diagnostic, as printed by `llc`.
        message: String,
    },
    /// The module parsed but is not valid IR (the LLVM verifier rejected it).
    Verify {
        /// Every verifier complaint, one per line, naming the instruction at fault.
        message: String,
    },
    /// No target machine could be made for the triple, CPU and features asked for.
    Target {
        /// The triple as the caller gave it.
        triple: String,
        /// Why: an unknown or unsupported target, or a string LLVM cannot take.
        message: String,
    },
    /// Code generation failed (instruction selection, inline assembly, emission).
    Codegen {
        /// LLVM's error messages, one per line.
        message: String,
    },
    /// The JIT failed: it could not be created, refused a module or a symbol definition, or
    /// could not find or materialize a symbol (an unresolved external, a duplicate
    /// definition, a code generation error while compiling on demand).
    Jit {
        /// ORC's error messages, one per line; they name the symbols at fault.
        message: String,
    },
    /// A change to the IR was refused before it reached LLVM (see `locus_llvm::builder`):
    /// operands of the wrong types, a handle from another module or an erased
    /// instruction, an instruction to erase that still has uses, and so on.
    Edit {
        /// What was refused and why, printing the instructions and values involved.
        message: String,
    },
    /// A context or module of the caller's could not be borrowed
    /// ([`Context::borrow_raw`](crate::Context::borrow_raw),
    /// [`BorrowedModule::new`](crate::BorrowedModule::new)): a null handle, or a module of
    /// another context.
    Borrow {
        /// What was refused and why.
        message: String,
    },
    /// A pass pipeline could not be parsed or built (see `locus_llvm::passes`).
    Passes {
        /// The pipeline as the caller gave it.
        pipeline: String,
        /// LLVM's message (an unknown pass name, a malformed pipeline).
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse { message } => write!(f, "cannot parse LLVM IR: {}", message.trim_end()),
            Error::Verify { message } => {
                write!(f, "invalid LLVM module: {}", message.trim_end())
            }
            Error::Target { triple, message } => {
                write!(
                    f,
                    "no target machine for `{triple}`: {}",
                    message.trim_end()
                )
            }
            Error::Codegen { message } => {
                write!(f, "code generation failed: {}", message.trim_end())
            }
            Error::Edit { message } => {
                write!(f, "cannot change the IR: {}", message.trim_end())
            }
            Error::Jit { message } => write!(f, "JIT error: {}", message.trim_end()),
            Error::Borrow { message } => write!(f, "cannot borrow: {}", message.trim_end()),
            Error::Passes { pipeline, message } => write!(
                f,
                "cannot run the pass pipeline `{pipeline}`: {}",
                message.trim_end()
            ),
        }
    }
}

impl std::error::Error for Error {}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
