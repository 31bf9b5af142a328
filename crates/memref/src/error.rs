//! The crate's error type.

use std::fmt;

/// Every error `locus-memref` reports. Variants name the dimension and the
/// values involved so a message can point at the offending argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A size is negative.
    NegativeSize {
        /// The dimension.
        dim: usize,
        /// Its size.
        size: i64,
    },
    /// The offset alone lies outside the buffer (for a view with at least one
    /// element).
    OffsetOutOfBounds {
        /// The offset.
        offset: i64,
        /// The buffer length in elements.
        len: usize,
    },
    /// Walking dimension `dim` from the offset reaches an element outside the
    /// buffer: `reached` is the lowest (if negative) or highest linear index
    /// reachable once dimensions `0..=dim` are taken into account.
    OutOfBounds {
        /// The dimension whose extent leaves the buffer.
        dim: usize,
        /// Its size.
        size: i64,
        /// Its stride.
        stride: i64,
        /// The linear element index reached.
        reached: i64,
        /// The buffer length in elements.
        len: usize,
    },
    /// Index arithmetic of dimension `dim` overflows `i64`.
    Overflow {
        /// The dimension.
        dim: usize,
    },
    /// A transpose named a dimension that does not exist.
    BadTranspose {
        /// First dimension given.
        a: usize,
        /// Second dimension given.
        b: usize,
        /// The view's rank.
        rank: usize,
    },
    /// A subview does not fit inside its parent in dimension `dim`.
    SubviewOutOfRange {
        /// The dimension.
        dim: usize,
        /// Subview offset (in the parent's index space).
        offset: i64,
        /// Subview size.
        size: i64,
        /// Subview stride (in units of the parent's index).
        stride: i64,
        /// The parent's size in that dimension.
        parent_size: i64,
    },
    /// An expanded argument list has the wrong length for the rank.
    ExpandedArity {
        /// `3 + 2 * rank`.
        expected: usize,
        /// The length given.
        found: usize,
    },
    /// An expanded argument has the wrong kind (pointer vs index).
    ExpandedKind {
        /// Position in the list.
        position: usize,
        /// What that position must hold.
        expected: &'static str,
    },
    /// An unranked descriptor's rank is not the one asked for.
    RankMismatch {
        /// The rank asked for.
        expected: usize,
        /// The rank the descriptor carries.
        found: i64,
    },
    /// An unranked descriptor has a null descriptor pointer.
    NullDescriptor,
    /// An `ndarray` array has gaps or broadcast axes, so no slice covers
    /// exactly its elements.
    NotContiguous,
    /// Dimension `dim` reaches elements that smaller strides already reach
    /// (zero or overlapping strides), which a mutable `ndarray` view forbids.
    AliasedStrides {
        /// The dimension.
        dim: usize,
        /// Its stride.
        stride: i64,
    },
    /// An external tool (`mlir-opt-19`, `llc-19`, ...) failed or is missing.
    Tool {
        /// The program.
        tool: String,
        /// Its standard error, or why it could not start.
        stderr: String,
    },
    /// A file could not be read or written.
    Io {
        /// The path.
        path: String,
        /// The system's message.
        message: String,
    },
    /// An MLIR type or function signature could not be parsed.
    Parse {
        /// Byte offset in the text parsed.
        at: usize,
        /// What was expected or found.
        message: String,
    },
    /// An argument does not match the callee's signature.
    Argument {
        /// Position of the argument (0-based).
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// A result could not be taken (wrong type asked for, unsupported kind).
    Result {
        /// Position of the result (0-based).
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// A shared library could not be opened or lacks a symbol.
    Library {
        /// The library path or the symbol.
        what: String,
        /// The loader's message.
        message: String,
    },
    /// A raw byte buffer does not fit the memref it is to hold (length or
    /// alignment).
    Buffer {
        /// What is wrong.
        message: String,
    },
    /// A `.npy` file is malformed or has an unsupported dtype.
    Npy {
        /// What is wrong.
        message: String,
    },
    /// A mutable view was asked of a memref whose allocation other results
    /// also point into (it would alias their views).
    SharedAllocation {
        /// How many results (or other holders) share the allocation.
        holders: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NegativeSize { dim, size } => {
                write!(f, "dimension {dim}: size {size} is negative")
            }
            Error::OffsetOutOfBounds { offset, len } => {
                write!(f, "offset {offset} is outside the buffer of {len} elements")
            }
            Error::OutOfBounds {
                dim,
                size,
                stride,
                reached,
                len,
            } => write!(
                f,
                "dimension {dim} (size {size}, stride {stride}) reaches element {reached}, \
                 outside the buffer of {len} elements"
            ),
            Error::Overflow { dim } => {
                write!(f, "dimension {dim}: index arithmetic overflows i64")
            }
            Error::BadTranspose { a, b, rank } => {
                write!(
                    f,
                    "cannot transpose dimensions {a} and {b} of a rank-{rank} view"
                )
            }
            Error::SubviewOutOfRange {
                dim,
                offset,
                size,
                stride,
                parent_size,
            } => write!(
                f,
                "dimension {dim}: subview offset {offset}, size {size}, stride {stride} \
                 does not fit in parent size {parent_size}"
            ),
            Error::ExpandedArity { expected, found } => write!(
                f,
                "expanded memref has {found} scalars, expected {expected} (3 + 2 * rank)"
            ),
            Error::ExpandedKind { position, expected } => {
                write!(f, "expanded memref scalar {position} must be {expected}")
            }
            Error::RankMismatch { expected, found } => {
                write!(f, "unranked memref has rank {found}, expected {expected}")
            }
            Error::NullDescriptor => write!(f, "unranked memref has a null descriptor"),
            Error::NotContiguous => write!(
                f,
                "the array's elements are not contiguous in memory (copy it with .to_owned() \
                 or .as_standard_layout())"
            ),
            Error::AliasedStrides { dim, stride } => write!(
                f,
                "dimension {dim}: stride {stride} reaches elements of other dimensions; \
                 a mutable ndarray view cannot alias elements"
            ),
            Error::Tool { tool, stderr } => write!(f, "{tool} failed: {}", stderr.trim_end()),
            Error::Io { path, message } => write!(f, "{path}: {message}"),
            Error::Parse { at, message } => write!(f, "at byte {at}: {message}"),
            Error::Argument { index, message } => write!(f, "argument {index}: {message}"),
            Error::Result { index, message } => write!(f, "result {index}: {message}"),
            Error::Library { what, message } => write!(f, "{what}: {message}"),
            Error::Buffer { message } => write!(f, "buffer: {message}"),
            Error::Npy { message } => write!(f, ".npy: {message}"),
            Error::SharedAllocation { holders } => write!(
                f,
                "the memref shares its allocation with {} other holder(s); a mutable view \
                 would alias theirs",
                holders.saturating_sub(1)
            ),
        }
    }
}

impl std::error::Error for Error {}
