//! The crate's one error enum: decoding, encoding, the text syntax,
//! evaluation, access and (feature `binary`) reading binaries.

use alloc::string::String;
use core::fmt;

/// Everything that can go wrong in this crate: an ill-formed expression
/// (found while decoding bytes, encoding operations or assembling text), an
/// evaluation or access error, or (feature `binary`) a binary that cannot be
/// read or a snapshot that cannot answer.
///
/// Binary errors name the byte offset of the offending operation within the
/// input (always `< input.len()`) and the operation's name (spec spelling,
/// e.g. `DW_OP_offset_uconst`). Encoding errors name the index of the
/// operation in the slice. Text errors name the byte offset of the token in
/// the source text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// An operand runs past the end of the expression.
    Truncated {
        /// Byte offset of the operation's opcode.
        offset: usize,
        /// The operation being decoded.
        op: &'static str,
    },
    /// An opcode that is not a DWARF 5 operation nor, in the chosen
    /// [`ExtensionEncoding`](crate::ExtensionEncoding), an extension one.
    UnknownOpcode {
        /// Byte offset of the opcode.
        offset: usize,
        /// The opcode byte.
        opcode: u8,
    },
    /// `DW_OP_LLVM_user` (0xe9) followed by a sub-opcode this crate does not know.
    UnknownUserOpcode {
        /// Byte offset of the 0xe9 byte.
        offset: usize,
        /// The decoded ULEB128 sub-opcode.
        sub_opcode: u64,
    },
    /// A ULEB128/SLEB128 operand that does not fit in 64 bits.
    BadLeb {
        /// Byte offset of the operation's opcode.
        offset: usize,
        /// The operation being decoded.
        op: &'static str,
    },
    /// A `DW_OP_bra`/`DW_OP_skip` whose target is outside the expression or
    /// not at the start of an operation.
    BadBranchTarget {
        /// Byte offset of the branch's opcode.
        offset: usize,
        /// `DW_OP_bra` or `DW_OP_skip`.
        op: &'static str,
        /// The target byte offset (may be negative or past the end).
        target: i64,
    },
    /// The [`Encoding`](crate::Encoding) itself is invalid (address size or
    /// offset size other than 4 or 8).
    BadEncoding {
        /// What is wrong.
        what: &'static str,
    },
    /// An operation that cannot be written in the chosen encoding: an operand
    /// too large for its field (e.g. an 8-byte address with `address_size`
    /// 4, `DW_OP_lit32`, a `DW_OP_const_type` block over 255 bytes), or an
    /// operation the extension encoding has no opcode for.
    Unencodable {
        /// Index of the operation in the slice given to [`encode`](crate::encode).
        index: usize,
        /// The operation.
        op: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// Text that is not a valid expression.
    Syntax {
        /// Byte offset of the offending token in the text.
        offset: usize,
        /// The offending token (empty at end of input).
        token: String,
        /// What was expected.
        message: &'static str,
    },
    /// A read or write through a location description failed
    /// ([`access`](crate::access)).
    Access {
        /// What went wrong.
        error: crate::eval::EvalError,
    },
    /// (`binary`) The file is not an object file `object` can parse, or has
    /// no DWARF.
    Object {
        /// What is wrong.
        what: String,
    },
    /// (`binary`) gimli could not read the DWARF.
    Dwarf {
        /// What is wrong.
        what: String,
    },
    /// The target cannot answer the evaluator's request
    /// ([`Evaluation::evaluate_with`](crate::Evaluation::evaluate_with)).
    Unanswered {
        /// Index of the operation that asked.
        index: usize,
        /// Its name.
        op: &'static str,
        /// What was missing.
        what: String,
    },
    /// An evaluation error: the operation at `index` could not be evaluated.
    /// Errors inside an expression run by `DW_OP_call*` name the call
    /// operation here and the callee's operation in
    /// [`EvalError::InCall`](crate::eval::EvalError::InCall).
    Eval {
        /// Index of the operation in the evaluated slice.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// What went wrong.
        error: crate::eval::EvalError,
    },
}

impl Error {
    /// The byte offset (binary errors) or text offset (syntax errors) the
    /// error names, if any. Encoding errors name an index instead.
    pub fn offset(&self) -> Option<usize> {
        match self {
            Error::Truncated { offset, .. }
            | Error::UnknownOpcode { offset, .. }
            | Error::UnknownUserOpcode { offset, .. }
            | Error::BadLeb { offset, .. }
            | Error::BadBranchTarget { offset, .. }
            | Error::Syntax { offset, .. } => Some(*offset),
            Error::BadEncoding { .. }
            | Error::Unencodable { .. }
            | Error::Eval { .. }
            | Error::Access { .. }
            | Error::Object { .. }
            | Error::Dwarf { .. }
            | Error::Unanswered { .. } => None,
        }
    }

    /// Whether the expression itself is ill-formed (undecodable bytes, bad
    /// text, an operand no evaluation could accept, a branch into the middle
    /// of an operation), as opposed to an evaluation error that depends on
    /// the stack, the target's registers and memory or the caller's answers.
    pub fn is_ill_formed(&self) -> bool {
        match self {
            Error::Eval { error, .. } => error.is_ill_formed(),
            Error::Access { .. }
            | Error::Object { .. }
            | Error::Dwarf { .. }
            | Error::Unanswered { .. } => false,
            _ => true,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { offset, op } => {
                write!(f, "byte {offset}: {op}: operand runs past the end")
            }
            Error::UnknownOpcode { offset, opcode } => {
                write!(f, "byte {offset}: unknown opcode {opcode:#04x}")
            }
            Error::UnknownUserOpcode { offset, sub_opcode } => write!(
                f,
                "byte {offset}: DW_OP_LLVM_user: unknown sub-opcode {sub_opcode:#x}"
            ),
            Error::BadLeb { offset, op } => {
                write!(f, "byte {offset}: {op}: LEB128 operand overflows 64 bits")
            }
            Error::BadBranchTarget { offset, op, target } => write!(
                f,
                "byte {offset}: {op}: branch target {target} is outside the expression or not an operation boundary"
            ),
            Error::BadEncoding { what } => write!(f, "invalid encoding: {what}"),
            Error::Unencodable { index, op, reason } => {
                write!(f, "op #{index} {op}: cannot encode: {reason}")
            }
            Error::Eval { index, op, error } => write!(f, "op #{index} {op}: {error}"),
            Error::Access { error } => write!(f, "access: {error}"),
            Error::Object { what } => write!(f, "cannot read the object file: {what}"),
            Error::Dwarf { what } => write!(f, "cannot read the DWARF: {what}"),
            Error::Unanswered { index, op, what } => write!(f, "op #{index} {op}: {what}"),
            Error::Syntax {
                offset,
                token,
                message,
            } => {
                if token.is_empty() {
                    write!(f, "text offset {offset}: {message}")
                } else {
                    write!(f, "text offset {offset}: `{token}`: {message}")
                }
            }
        }
    }
}

impl core::error::Error for Error {
    /// The evaluator's [`EvalError`](crate::EvalError) of an evaluation or access error.
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Eval { error, .. } | Error::Access { error } => Some(error),
            _ => None,
        }
    }
}
