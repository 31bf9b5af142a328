//! The one error type of this crate.

use core::fmt;

/// What can go wrong while checking, lowering or running a module.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// LLVM refused something (parsing, verifying, building IR, JIT).
    Llvm(locus_llvm::Error),
    /// The lowering met IR it cannot handle.
    Lower {
        /// The function being lowered.
        function: String,
        /// The instruction, as LLVM prints it, when there is one.
        instruction: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The module breaks GC invariants of spec 003 (see [`crate::verify`]); only
    /// error-level violations are listed.
    Invariants(Vec<crate::verify::Violation>),
    /// A module to run has no entry function of the right type.
    Entry {
        /// The name asked for.
        name: String,
        /// What is wrong.
        message: String,
    },
}

impl From<locus_llvm::Error> for Error {
    fn from(e: locus_llvm::Error) -> Self {
        Error::Llvm(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Llvm(e) => write!(f, "{e}"),
            Error::Lower {
                function,
                instruction: Some(i),
                message,
            } => {
                write!(f, "function @{function}, instruction `{i}`: {message}")
            }
            Error::Lower {
                function,
                instruction: None,
                message,
            } => {
                write!(f, "function @{function}: {message}")
            }
            Error::Entry { name, message } => write!(f, "entry @{name}: {message}"),
            Error::Invariants(violations) => {
                write!(
                    f,
                    "{} GC invariant violation(s), not lowered:",
                    violations.len()
                )?;
                for v in violations {
                    write!(f, "\n  {v}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;
