//! The crate's one error type: decoding, encoding, the text syntax,
//! evaluation, access and (feature `binary`) reading binaries.

use alloc::boxed::Box;
use alloc::string::String;
use core::fmt;

use crate::target::Unavailable;

/// Everything that can go wrong in this crate: an ill-formed expression
/// (found while decoding bytes, encoding operations or assembling text), an
/// evaluation or access error, or (feature `binary`) a binary that cannot be
/// read or a snapshot that cannot answer. What went wrong is its
/// [`ErrorDetail`] ([`Error::detail`]); [`Error::offset`], [`Error::kind`]
/// and [`Error::is_ill_formed`] answer the usual questions.
///
/// One pointer (the detail is boxed): `Result<EvaluationResult, Error>` is
/// returned in two registers, and errors are rare.
///
/// `Display` prints this error's own layer; the error it wraps (a nested
/// evaluation's, an undecodable callee's) is its
/// [`source`](core::error::Error::source), and [`Error::report`] prints the
/// whole chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(Box<ErrorDetail>);

/// What went wrong ([`Error::detail`]).
///
/// Binary errors name the byte offset of the offending operation within the
/// input (always `< input.len()`) and the operation's name (spec spelling,
/// e.g. `DW_OP_offset_uconst`). Encoding errors name the index of the
/// operation in the slice. Text errors name the byte offset of the token in
/// the source text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorDetail {
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
        kind: ErrorKind,
    },
    /// (`binary`) The file is not an object file `object` can parse, or has
    /// no DWARF.
    Object {
        /// What is wrong.
        what: String,
    },
    /// (`binary`) The stopped target cannot give what was asked: a core file that does
    /// not read, a thread it does not have.
    Target {
        /// What is wrong, naming the core file or the thread.
        what: String,
    },
    /// (`binary`) gimli could not read the DWARF.
    Dwarf {
        /// What is wrong.
        what: String,
    },
    /// (`json`) A CTX.json / SNAP.json snapshot, or a location description in the JSON
    /// `locus dwarf eval` prints, that cannot be read
    /// ([`binary::json`](crate::binary::json)).
    Json {
        /// Where: the key path of the offending value, e.g. `registers.rsp.value` or
        /// `object_location[0].parts[1].bit_size`; empty for the document itself or for
        /// text given on its own ([`parse_hex`](crate::binary::json::parse_hex)).
        at: String,
        /// What is wrong there.
        kind: JsonErrorKind,
    },
    /// The target cannot answer the evaluator's request
    /// ([`Evaluation::evaluate_with`](crate::Evaluation::evaluate_with)).
    Unanswered {
        /// Index of the operation that asked.
        index: usize,
        /// Its name.
        op: &'static str,
        /// What it asked for.
        request: Request,
        /// Why the target has no answer.
        reason: Unavailable,
    },
    /// An evaluation error: the operation at `index` could not be evaluated.
    /// Errors inside an expression run by `DW_OP_call*` name the call
    /// operation here and the callee's operation in
    /// [`ErrorKind::InCall`].
    Eval {
        /// Index of the operation in the evaluated slice.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// What went wrong.
        kind: ErrorKind,
    },
}

impl From<ErrorDetail> for Error {
    fn from(detail: ErrorDetail) -> Error {
        Error(Box::new(detail))
    }
}

impl Error {
    /// What went wrong.
    pub fn detail(&self) -> &ErrorDetail {
        &self.0
    }

    /// What went wrong, to amend (the operation's name once known).
    pub(crate) fn detail_mut(&mut self) -> &mut ErrorDetail {
        &mut self.0
    }

    /// What went wrong, moved out.
    pub fn into_detail(self) -> ErrorDetail {
        *self.0
    }

    /// The byte offset (binary errors) or text offset (syntax errors) the
    /// error names, if any. Encoding errors name an index instead.
    pub fn offset(&self) -> Option<usize> {
        match self.detail() {
            ErrorDetail::Truncated { offset, .. }
            | ErrorDetail::UnknownOpcode { offset, .. }
            | ErrorDetail::UnknownUserOpcode { offset, .. }
            | ErrorDetail::BadLeb { offset, .. }
            | ErrorDetail::BadBranchTarget { offset, .. }
            | ErrorDetail::Syntax { offset, .. } => Some(*offset),
            ErrorDetail::BadEncoding { .. }
            | ErrorDetail::Unencodable { .. }
            | ErrorDetail::Eval { .. }
            | ErrorDetail::Access { .. }
            | ErrorDetail::Object { .. }
            | ErrorDetail::Target { .. }
            | ErrorDetail::Dwarf { .. }
            | ErrorDetail::Json { .. }
            | ErrorDetail::Unanswered { .. } => None,
        }
    }

    /// The kind of an evaluation or access error ([`ErrorDetail::Eval`],
    /// [`ErrorDetail::Access`]).
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self.detail() {
            ErrorDetail::Eval { kind, .. } | ErrorDetail::Access { kind } => Some(kind),
            _ => None,
        }
    }

    /// Whether the expression itself is ill-formed (undecodable bytes, bad
    /// text, an operand no evaluation could accept, a branch into the middle
    /// of an operation), as opposed to an evaluation error that depends on
    /// the stack, the target's registers and memory or the caller's answers.
    pub fn is_ill_formed(&self) -> bool {
        match self.detail() {
            ErrorDetail::Eval { kind, .. } => kind.is_ill_formed(),
            ErrorDetail::Access { .. }
            | ErrorDetail::Object { .. }
            | ErrorDetail::Target { .. }
            | ErrorDetail::Dwarf { .. }
            | ErrorDetail::Json { .. }
            | ErrorDetail::Unanswered { .. } => false,
            _ => true,
        }
    }
}

impl Error {
    /// The error and each of its [`source`](core::error::Error::source)s,
    /// joined by `: ` (what a user should be shown: `Display` prints one
    /// layer, so that chain printers print each cause once).
    pub fn report(&self) -> impl fmt::Display + '_ {
        Report(self)
    }
}

/// [`Error::report`]'s printer.
struct Report<'a>(&'a Error);

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = core::error::Error::source(self.0);
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.detail(), f)
    }
}

impl fmt::Display for ErrorDetail {
    /// This error's own layer (see [`Error`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorDetail::Truncated { offset, op } => {
                write!(f, "byte {offset}: {op}: operand runs past the end")
            }
            ErrorDetail::UnknownOpcode { offset, opcode } => {
                write!(f, "byte {offset}: unknown opcode {opcode:#04x}")
            }
            ErrorDetail::UnknownUserOpcode { offset, sub_opcode } => write!(
                f,
                "byte {offset}: DW_OP_LLVM_user: unknown sub-opcode {sub_opcode:#x}"
            ),
            ErrorDetail::BadLeb { offset, op } => {
                write!(f, "byte {offset}: {op}: LEB128 operand overflows 64 bits")
            }
            ErrorDetail::BadBranchTarget { offset, op, target } => write!(
                f,
                "byte {offset}: {op}: branch target {target} is outside the expression or not an operation boundary"
            ),
            ErrorDetail::BadEncoding { what } => write!(f, "invalid encoding: {what}"),
            ErrorDetail::Unencodable { index, op, reason } => {
                write!(f, "op #{index} {op}: cannot encode: {reason}")
            }
            ErrorDetail::Eval { index, op, kind } => write!(f, "op #{index} {op}: {kind}"),
            ErrorDetail::Access { kind } => write!(f, "access: {kind}"),
            ErrorDetail::Object { what } => write!(f, "cannot read the object file: {what}"),
            ErrorDetail::Target { what } => write!(f, "{what}"),
            ErrorDetail::Dwarf { what } => write!(f, "cannot read the DWARF: {what}"),
            ErrorDetail::Json { at, kind } if at.is_empty() => write!(f, "{kind}"),
            ErrorDetail::Json { at, kind } => write!(f, "{at}: {kind}"),
            ErrorDetail::Unanswered {
                index,
                op,
                request,
                reason,
            } => {
                write!(f, "op #{index} {op}: ")?;
                reason.describe(request, f)
            }
            ErrorDetail::Syntax {
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

/// What is wrong with a JSON snapshot or location description ([`ErrorDetail::Json`], which
/// names where).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The text is not JSON: serde_json's message, with its line and column.
    NotJson(String),
    /// A value of the wrong JSON type; names what was expected (`an object`,
    /// `a number`, `an array`, `a hex string`, `a list of places`).
    Expected(&'static str),
    /// A key the object must have is missing.
    Missing(&'static str),
    /// A string that is neither a decimal nor a `0x` hex number.
    NotANumber(String),
    /// A number the field cannot hold; names what it holds (`a u64`, `a u16`, `an i64`,
    /// `4 or 8`).
    OutOfRange(&'static str),
    /// Hex bytes with an odd number of digits (the text).
    OddHexDigits(String),
    /// Hex bytes with a character that is not a hex digit (the text).
    NotHex(String),
    /// A memory place whose "address" is not its "bit_offset" divided by 8.
    AddressMismatch {
        /// The "address".
        address: u64,
        /// The "bit_offset".
        bit_offset: u128,
    },
    /// A "storage" that is none of memory, register, implicit, implicit_pointer,
    /// undefined, composite.
    UnknownStorage(String),
    /// A location description with no places (it has at least one).
    NoPlaces,
}

impl fmt::Display for JsonErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonErrorKind::NotJson(message) => write!(f, "not JSON: {message}"),
            JsonErrorKind::Expected(what) => write!(f, "expected {what}"),
            JsonErrorKind::Missing(key) => write!(f, "no \"{key}\""),
            JsonErrorKind::NotANumber(s) => write!(f, "`{s}` is not a number"),
            JsonErrorKind::OutOfRange(what) => write!(f, "out of range: must be {what}"),
            JsonErrorKind::OddHexDigits(s) => write!(f, "`{s}`: odd number of hex digits"),
            JsonErrorKind::NotHex(s) => write!(f, "`{s}`: not hex"),
            JsonErrorKind::AddressMismatch {
                address,
                bit_offset,
            } => write!(
                f,
                "\"address\" {address:#x} and \"bit_offset\" {bit_offset} disagree (bit_offset is the address times 8)"
            ),
            JsonErrorKind::UnknownStorage(s) => write!(
                f,
                "unknown storage `{s}` (memory, register, implicit, implicit_pointer, undefined, composite)"
            ),
            JsonErrorKind::NoPlaces => write!(f, "a location description has at least one place"),
        }
    }
}

impl core::error::Error for Error {
    /// The callee's decoding error of [`ErrorKind::IllFormedCallee`], the
    /// nested evaluation's error of [`Unavailable::Failed`] and
    /// [`Unavailable::VariableFailed`].
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        let mut kind = match self.detail() {
            ErrorDetail::Eval { kind, .. } | ErrorDetail::Access { kind } => kind,
            ErrorDetail::Unanswered {
                reason: Unavailable::Failed(e) | Unavailable::VariableFailed { error: e, .. },
                ..
            } => return Some(&**e),
            _ => return None,
        };
        while let ErrorKind::InCall { error, .. } = kind {
            kind = error;
        }
        match kind {
            ErrorKind::IllFormedCallee(e) => Some(&**e),
            _ => None,
        }
    }
}

/// What an evaluation asked of its target when the target could not answer
/// ([`ErrorDetail::Unanswered`]): the request, with what names the thing asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// A register's whole contents.
    Register(u16),
    /// Bytes of memory.
    Memory {
        /// Address space (0: global memory).
        address_space: u64,
        /// First byte.
        address: u64,
        /// Number of bytes.
        size: u8,
    },
    /// The current lane.
    Lane,
    /// The current concurrent loop iteration.
    Iteration,
    /// The frame base.
    FrameBase,
    /// The canonical frame address.
    CallFrameCfa,
    /// The object's address or location.
    ObjectAddress,
    /// The base type DIE at this unit offset.
    BaseType(u64),
    /// An entry value (`DW_OP_entry_value`).
    EntryValue,
    /// The entry value of the formal parameter at this unit offset
    /// (`DW_OP_GNU_parameter_ref`).
    ParameterRef(u64),
    /// The value of the variable DIE at this `.debug_info` offset
    /// (`DW_OP_GNU_variable_value`).
    VariableValue(u64),
    /// Where this register's value on entry is (`DW_OP_call_frame_entry_reg`).
    EntryRegister(u16),
    /// The location expression of the DIE at this offset (`DW_OP_call*`).
    Callee(u64),
    /// This `.debug_addr` entry.
    IndexedAddress(u64),
    /// The thread-local storage at this offset.
    TlsAddress(u64),
}

impl fmt::Display for Request {
    /// The thing asked for, as a noun phrase.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Register(r) => write!(f, "register {r}"),
            Request::Memory {
                address_space,
                address,
                size,
            } => write!(
                f,
                "memory {address:#x} (space {address_space}, {size} bytes)"
            ),
            Request::Lane => write!(f, "lane"),
            Request::Iteration => write!(f, "iteration"),
            Request::FrameBase => write!(f, "frame base"),
            Request::CallFrameCfa => write!(f, "CFA"),
            Request::ObjectAddress => write!(f, "object address"),
            Request::BaseType(o) => write!(f, "base type DIE at unit offset {o:#x}"),
            Request::EntryValue => write!(f, "entry value"),
            Request::ParameterRef(o) => {
                write!(f, "entry value of the parameter at unit offset {o:#x}")
            }
            Request::VariableValue(o) => write!(f, "value of the variable DIE at {o:#x}"),
            Request::EntryRegister(r) => write!(f, "CFI for register {r}"),
            Request::Callee(o) => write!(f, "DIE at {o:#x} to call"),
            Request::IndexedAddress(i) => write!(f, ".debug_addr entry {i}"),
            Request::TlsAddress(o) => write!(f, "thread-local storage (offset {o:#x})"),
        }
    }
}

/// What went wrong while evaluating one operation or accessing a location:
/// the kind of an [`ErrorDetail::Eval`] (which names the operation) or an
/// [`ErrorDetail::Access`].
///
/// `Display` prints this kind's own layer: an undecodable callee's error
/// ([`ErrorKind::IllFormedCallee`]) is the [`Error`]'s
/// [`source`](core::error::Error::source).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
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
    /// [`Evaluation::set_lane_count`](crate::Evaluation::set_lane_count).
    IllFormed(&'static str),
    /// A write to storage that cannot be written (implicit, undefined).
    NotWritable(&'static str),
    /// A limit on the size of the stack, of a location description or of an
    /// access was reached.
    TooLarge(&'static str),
    /// `DW_OP_call*` nested deeper than [`MAX_CALL_DEPTH`](crate::eval::MAX_CALL_DEPTH) (recursion).
    CallDepthExceeded(usize),
    /// The callee's expression bytes do not decode: the decoding error
    /// (its byte offset and operation within the callee).
    IllFormedCallee(Box<Error>),
    /// An error inside an expression run by `DW_OP_call*`: the callee's
    /// operation index and name, and the error.
    InCall {
        /// Index of the operation within the callee's expression.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// What went wrong.
        error: Box<ErrorKind>,
    },
}

impl ErrorKind {
    /// Whether the error shows the expression is ill-formed (an operand no
    /// evaluation could accept) rather than a failure of this evaluation.
    pub fn is_ill_formed(&self) -> bool {
        match self {
            ErrorKind::BadBranchTarget(_)
            | ErrorKind::BadRegister(_)
            | ErrorKind::BadSize(_)
            | ErrorKind::BadOverlay(_)
            | ErrorKind::IllFormed(_)
            | ErrorKind::IllFormedCallee(_) => true,
            ErrorKind::InCall { error, .. } => error.is_ill_formed(),
            _ => false,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::StackUnderflow => write!(f, "stack underflow"),
            ErrorKind::TypeMismatch(what) => write!(f, "type mismatch: {what}"),
            ErrorKind::DivisionByZero => write!(f, "division by zero"),
            ErrorKind::StepLimitExceeded(n) => {
                write!(f, "step limit of {n} operations exceeded (infinite loop?)")
            }
            ErrorKind::BadRegister(r) => write!(f, "register number {r} is too large"),
            ErrorKind::OffsetOutOfRange => {
                write!(f, "offset moves the location outside its storage")
            }
            ErrorKind::BadBranchTarget(t) => {
                write!(f, "branch target byte {t} is not an operation boundary")
            }
            ErrorKind::UndefinedRead => write!(f, "read of an undefined location"),
            ErrorKind::ReadOutOfRange => write!(f, "read past the end of the storage"),
            ErrorKind::BadSize(n) => write!(f, "bad size {n}"),
            ErrorKind::BadOverlay(what) => write!(f, "ill-formed overlay: {what}"),
            ErrorKind::IllFormed(what) => write!(f, "ill-formed: {what}"),
            ErrorKind::BadResume(what) => write!(f, "bad resume: {what}"),
            ErrorKind::Unsupported(what) => write!(f, "unsupported: {what}"),
            ErrorKind::UnsupportedBaseType {
                offset,
                encoding,
                byte_size,
            } => write!(
                f,
                "base type DIE {offset:#x} (encoding {encoding:#x}, {byte_size} bytes) is not supported"
            ),
            ErrorKind::MemoryUnavailable {
                address_space,
                address,
                size,
            } => write!(
                f,
                "cannot access {size} bytes of memory at {address:#x} (address space {address_space})"
            ),
            ErrorKind::RegisterUnavailable { register } => {
                write!(f, "cannot access register {register}")
            }
            ErrorKind::NotWritable(what) => write!(f, "cannot write to {what}"),
            ErrorKind::TooLarge(what) => write!(f, "too large: {what}"),
            ErrorKind::CallDepthExceeded(n) => {
                write!(f, "DW_OP_call nesting deeper than {n} (recursion?)")
            }
            // The decoding error is the `Error`'s source.
            ErrorKind::IllFormedCallee(_) => write!(f, "ill-formed callee expression"),
            ErrorKind::InCall { index, op, error } => {
                write!(f, "in the called expression, op #{index} {op}: {error}")
            }
        }
    }
}
