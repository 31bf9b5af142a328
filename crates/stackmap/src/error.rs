//! The one error type of this crate.
//!
//! Every variant says where the fault is: for section parsing, the table number (0 for the
//! first table of a section) and the byte offset from the start of the section, plus the
//! field that was being read.

use core::fmt;

/// The field of the `.llvm_stackmaps` layout that an error refers to, named as in the
/// spec's "Stack Map Format" section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// `Header.Stack Map Version`.
    Version,
    /// `Header.Reserved` (the u8 and the u16).
    HeaderReserved,
    /// `NumFunctions`.
    NumFunctions,
    /// `NumConstants`.
    NumConstants,
    /// `NumRecords`.
    NumRecords,
    /// One `StkSizeRecord`.
    Function,
    /// One entry of `Constants`.
    Constant,
    /// The fixed part of a `StkMapRecord` (ID, instruction offset, flags, `NumLocations`).
    RecordHeader,
    /// `NumLocations` of a record.
    NumLocations,
    /// One `Location`.
    Location,
    /// `Location.Reserved` (the u8 after the kind, or the u16 after the register).
    LocationReserved,
    /// The padding after the locations or after the live-outs.
    Padding,
    /// `NumLiveOuts`.
    NumLiveOuts,
    /// One `LiveOuts` entry.
    LiveOut,
    /// `LiveOuts.Reserved`.
    LiveOutReserved,
}

impl Field {
    /// The field's name as the spec writes it.
    pub fn name(self) -> &'static str {
        match self {
            Field::Version => "Stack Map Version",
            Field::HeaderReserved => "header Reserved",
            Field::NumFunctions => "NumFunctions",
            Field::NumConstants => "NumConstants",
            Field::NumRecords => "NumRecords",
            Field::Function => "StkSizeRecord",
            Field::Constant => "LargeConstant",
            Field::RecordHeader => "StkMapRecord header",
            Field::NumLocations => "NumLocations",
            Field::Location => "Location",
            Field::LocationReserved => "Location Reserved",
            Field::Padding => "Padding",
            Field::NumLiveOuts => "NumLiveOuts",
            Field::LiveOut => "LiveOut",
            Field::LiveOutReserved => "LiveOut Reserved",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that can go wrong in this crate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The section ends inside `field`.
    Truncated {
        /// Table number within the section.
        table: usize,
        /// Byte offset of the field from the start of the section.
        offset: usize,
        /// What was being read.
        field: Field,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the section at `offset`.
        available: u64,
    },
    /// The version byte is not 3.
    UnsupportedVersion {
        /// Table number within the section.
        table: usize,
        /// Byte offset of the version byte.
        offset: usize,
        /// The version found.
        version: u8,
    },
    /// A count promises more entries than the rest of the section can hold.
    CountTooLarge {
        /// Table number within the section.
        table: usize,
        /// Byte offset of the count.
        offset: usize,
        /// Which count.
        field: Field,
        /// The count read.
        count: u64,
        /// The least number of bytes that many entries need.
        needed: u64,
        /// Bytes left in the section after the count's own table part.
        available: u64,
    },
    /// A reserved field or padding is not zero (only reported in strict mode).
    NonZeroReserved {
        /// Table number within the section.
        table: usize,
        /// Byte offset of the field.
        offset: usize,
        /// Which field.
        field: Field,
        /// The value found.
        value: u64,
    },
    /// A location's kind byte is not one of Register (1), Direct (2), Indirect (3),
    /// Constant (4) or ConstantIndex (5).
    BadLocationKind {
        /// Table number within the section.
        table: usize,
        /// Byte offset of the location.
        offset: usize,
        /// The kind byte found.
        kind: u8,
    },
    /// A ConstantIndex location names a constant the table does not have.
    ConstantIndexOutOfRange {
        /// Table number within the section.
        table: usize,
        /// Byte offset of the location.
        offset: usize,
        /// The index found.
        index: u32,
        /// `NumConstants` of the table.
        num_constants: u32,
    },
    /// The function table's record counts do not add up to `NumRecords` (strict mode).
    RecordCountMismatch {
        /// Table number within the section.
        table: usize,
        /// Byte offset of the function table.
        offset: usize,
        /// Sum of the functions' record counts.
        sum: u64,
        /// `NumRecords`.
        num_records: u32,
    },
    /// The section holds no table at all.
    EmptySection,
    /// A record does not have the layout of a `gc.statepoint` record.
    NotAStatepoint {
        /// Byte offset of the record from the start of the section.
        offset: usize,
        /// Index of the first location that does not fit the layout.
        location: usize,
    },
    /// A frame could not supply a register a location needs.
    RegisterUnavailable {
        /// DWARF register number.
        dwarf_reg: u16,
    },
    /// A frame could not read memory a location needs.
    MemoryUnreadable {
        /// The address that was read.
        address: u64,
        /// How many bytes were asked for.
        size: usize,
    },
    /// A location's size is not one a value can be read at (more than 8 bytes for a register
    /// or memory read into a `u64`).
    UnsupportedSize {
        /// The location's size in bytes.
        size: u16,
    },
    /// A patch sequence does not fit the space the code reserved.
    PatchTooLarge {
        /// Bytes the sequence needs.
        needed: usize,
        /// Bytes reserved at the patch site.
        reserved: usize,
    },
    /// A patch site or length is not aligned as the architecture requires (AArch64: 4 bytes).
    MisalignedPatch {
        /// The address or length at fault.
        value: u64,
        /// The alignment required.
        align: u64,
    },
    /// The operating system refused to change page protection or write code.
    CodeWrite {
        /// The `errno` reported.
        errno: i32,
    },
    /// An object file could not be read, or it has no stack map section.
    Object {
        /// What is wrong.
        message: alloc::string::String,
    },
}

impl Error {
    /// The byte offset within the section where a parse error was found, if it is one.
    pub fn offset(&self) -> Option<usize> {
        match *self {
            Error::Truncated { offset, .. }
            | Error::UnsupportedVersion { offset, .. }
            | Error::CountTooLarge { offset, .. }
            | Error::NonZeroReserved { offset, .. }
            | Error::BadLocationKind { offset, .. }
            | Error::ConstantIndexOutOfRange { offset, .. }
            | Error::RecordCountMismatch { offset, .. } => Some(offset),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { table, offset, field, needed, available } => write!(
                f,
                "table {table}: truncated {field} at offset {offset:#x}: needs {needed} bytes, {available} left"
            ),
            Error::UnsupportedVersion { table, offset, version } => write!(
                f,
                "table {table}: unsupported stack map version {version} at offset {offset:#x} (expected 3)"
            ),
            Error::CountTooLarge { table, offset, field, count, needed, available } => write!(
                f,
                "table {table}: {field} = {count} at offset {offset:#x} needs at least {needed} bytes, {available} left"
            ),
            Error::NonZeroReserved { table, offset, field, value } => write!(
                f,
                "table {table}: {field} at offset {offset:#x} is {value:#x}, expected 0"
            ),
            Error::BadLocationKind { table, offset, kind } => write!(
                f,
                "table {table}: location at offset {offset:#x} has unknown kind {kind} (expected 1-5)"
            ),
            Error::ConstantIndexOutOfRange { table, offset, index, num_constants } => write!(
                f,
                "table {table}: ConstantIndex location at offset {offset:#x} names constant {index}, but NumConstants is {num_constants}"
            ),
            Error::RecordCountMismatch { table, offset, sum, num_records } => write!(
                f,
                "table {table}: function record counts at offset {offset:#x} add up to {sum}, but NumRecords is {num_records}"
            ),
            Error::EmptySection => f.write_str("the stack map section is empty"),
            Error::NotAStatepoint { offset, location } => write!(
                f,
                "record at offset {offset:#x} is not a statepoint record (location {location})"
            ),
            Error::RegisterUnavailable { dwarf_reg } => {
                write!(f, "the frame has no value for DWARF register {dwarf_reg}")
            }
            Error::MemoryUnreadable { address, size } => {
                write!(f, "cannot read {size} bytes at {address:#x}")
            }
            Error::UnsupportedSize { size } => {
                write!(f, "cannot read a {size}-byte location into a 64-bit value")
            }
            Error::PatchTooLarge { needed, reserved } => write!(
                f,
                "the patch needs {needed} bytes but only {reserved} are reserved"
            ),
            Error::MisalignedPatch { value, align } => {
                write!(f, "{value:#x} is not a multiple of {align}")
            }
            Error::CodeWrite { errno } => write!(f, "cannot write code: errno {errno}"),
            Error::Object { message } => f.write_str(message),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;
