//! The crate's one error type.

use std::fmt;

/// What can go wrong in this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The module could not be read by LLVM.
    Llvm {
        /// The file (or name) given.
        file: String,
        /// LLVM's diagnostic, naming line and column.
        source: locus_llvm::Error,
    },
    /// The object file could not be read as an AArch64 ELF object.
    Object {
        /// The file given.
        file: String,
        /// What is wrong, and where.
        message: String,
    },
    /// A list of SME attributes could not be read ([`Attrs::parse_list`](crate::attrs::Attrs::parse_list)).
    Attrs {
        /// The list.
        list: String,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Llvm { file, source } => write!(f, "{file}: {source}"),
            Error::Object { file, message } => write!(f, "{file}: {message}"),
            Error::Attrs { list, message } => write!(f, "`{list}`: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Llvm { source, .. } => Some(source),
            Error::Object { .. } | Error::Attrs { .. } => None,
        }
    }
}
