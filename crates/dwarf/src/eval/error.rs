//! What went wrong while evaluating one operation: [`EvalError`].

use super::*;

/// What went wrong while evaluating one operation (or accessing a location).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EvalError {
    /// The operation needs more stack entries than there are.
    StackUnderflow,
    /// An operand of the wrong kind or type.
    TypeMismatch(&'static str),
    /// Division or modulo by zero.
    DivisionByZero,
    /// The evaluation executed more operations than allowed (a loop).
    StepLimitExceeded(u64),
    /// A register number that does not fit in 16 bits.
    BadRegister(u64),
    /// An offset moved a location outside its storage.
    OffsetOutOfRange,
    /// A branch to a byte offset that is not an operation boundary.
    BadBranchTarget(i64),
    /// A read of undefined storage.
    UndefinedRead,
    /// A read past the end of a register or implicit storage.
    ReadOutOfRange,
    /// A size operand larger than the address size or than its type, a
    /// `DW_OP_const_type` block of the wrong size, or a piece too large.
    BadSize(u64),
    /// The caller answered a request wrongly (wrong method, too few bytes).
    BadResume(&'static str),
    /// Not supported by this evaluator (yet).
    Unsupported(&'static str),
    /// The base type DIE the caller described cannot be computed with
    /// (unknown encoding, a size other than 1, 2, 4, 8, or 4/8 for floats).
    UnsupportedBaseType {
        /// Unit offset of the DIE.
        offset: u64,
        /// Its `DW_AT_encoding`.
        encoding: u8,
        /// Its `DW_AT_byte_size`.
        byte_size: u64,
    },
    /// The target could not read or write this memory.
    MemoryUnavailable {
        /// Address space.
        address_space: u64,
        /// First byte.
        address: u64,
        /// Number of bytes.
        size: u64,
    },
    /// The target could not read or write this register (unknown, or the
    /// access goes past its end).
    RegisterUnavailable {
        /// DWARF register number.
        register: u16,
    },
    /// `DW_OP_overlay`/`DW_OP_bit_overlay` with a negative size or offset,
    /// or an overlay past the end of the base location's storage.
    BadOverlay(&'static str),
    /// An expression the normative text calls ill-formed, in its words: a
    /// part past the end of its storage, a composite larger than an address
    /// space, `DW_OP_extend`/`DW_OP_select_bit_piece` with a zero size or
    /// count, an incomplete composite where a stack operation, a value or a
    /// location description is needed, a lane outside the lanes set with
    /// [`Evaluation::set_lane_count`].
    IllFormed(&'static str),
    /// A write to storage that cannot be written (implicit, undefined).
    NotWritable(&'static str),
    /// A limit on the size of the stack, of a location description or of an
    /// access was reached.
    TooLarge(&'static str),
    /// `DW_OP_call*` nested deeper than [`MAX_CALL_DEPTH`] (recursion).
    CallDepthExceeded(usize),
    /// The callee's expression bytes do not decode.
    IllFormedCallee(String),
    /// An error inside an expression run by `DW_OP_call*`: the callee's
    /// operation index and name, and the error.
    InCall {
        /// Index of the operation within the callee's expression.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// What went wrong.
        error: Box<EvalError>,
    },
}

impl core::error::Error for EvalError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            EvalError::InCall { error, .. } => Some(&**error),
            _ => None,
        }
    }
}

impl EvalError {
    /// Whether the error shows the expression is ill-formed (an operand no
    /// evaluation could accept) rather than a failure of this evaluation.
    pub fn is_ill_formed(&self) -> bool {
        match self {
            EvalError::BadBranchTarget(_)
            | EvalError::BadRegister(_)
            | EvalError::BadSize(_)
            | EvalError::BadOverlay(_)
            | EvalError::IllFormed(_)
            | EvalError::IllFormedCallee(_) => true,
            EvalError::InCall { error, .. } => error.is_ill_formed(),
            _ => false,
        }
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::StackUnderflow => write!(f, "stack underflow"),
            EvalError::TypeMismatch(what) => write!(f, "type mismatch: {what}"),
            EvalError::DivisionByZero => write!(f, "division by zero"),
            EvalError::StepLimitExceeded(n) => {
                write!(f, "step limit of {n} operations exceeded (infinite loop?)")
            }
            EvalError::BadRegister(r) => write!(f, "register number {r} is too large"),
            EvalError::OffsetOutOfRange => {
                write!(f, "offset moves the location outside its storage")
            }
            EvalError::BadBranchTarget(t) => {
                write!(f, "branch target byte {t} is not an operation boundary")
            }
            EvalError::UndefinedRead => write!(f, "read of an undefined location"),
            EvalError::ReadOutOfRange => write!(f, "read past the end of the storage"),
            EvalError::BadSize(n) => write!(f, "bad size {n}"),
            EvalError::BadOverlay(what) => write!(f, "ill-formed overlay: {what}"),
            EvalError::IllFormed(what) => write!(f, "ill-formed: {what}"),
            EvalError::BadResume(what) => write!(f, "bad resume: {what}"),
            EvalError::Unsupported(what) => write!(f, "unsupported: {what}"),
            EvalError::UnsupportedBaseType {
                offset,
                encoding,
                byte_size,
            } => write!(
                f,
                "base type DIE {offset:#x} (encoding {encoding:#x}, {byte_size} bytes) is not supported"
            ),
            EvalError::MemoryUnavailable {
                address_space,
                address,
                size,
            } => write!(
                f,
                "cannot access {size} bytes of memory at {address:#x} (address space {address_space})"
            ),
            EvalError::RegisterUnavailable { register } => {
                write!(f, "cannot access register {register}")
            }
            EvalError::NotWritable(what) => write!(f, "cannot write to {what}"),
            EvalError::TooLarge(what) => write!(f, "too large: {what}"),
            EvalError::CallDepthExceeded(n) => {
                write!(f, "DW_OP_call nesting deeper than {n} (recursion?)")
            }
            EvalError::IllFormedCallee(e) => write!(f, "ill-formed callee expression: {e}"),
            EvalError::InCall { index, op, error } => {
                write!(f, "in the called expression, op #{index} {op}: {error}")
            }
        }
    }
}
