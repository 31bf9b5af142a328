//! Status codes, the caller-owned error record, and the guard every entry point runs in.
//!
//! Every entry point returns a `LocusStatus`: `LOCUS_OK` (0) or one of the error codes
//! below. When the caller passes a `LocusError`, it is filled in too: the code again, the
//! section offset the error refers to (if any), the OS error number (if any) and a
//! NUL-terminated message that names what failed and where. The record belongs to the
//! caller (a local variable will do), so nothing here keeps state between calls and
//! several threads can each use their own.

use std::ffi::c_char;
use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use locus_stackmap::Error;

/// A status code: `LOCUS_OK` or one of the `LOCUS_ERR_*` codes.
pub type LocusStatus = i32;

/// Success.
pub const LOCUS_OK: LocusStatus = 0;
/// A pointer argument that must not be null was null; the message names the argument.
pub const LOCUS_ERR_NULL_ARGUMENT: LocusStatus = 1;
/// An argument has a value the call does not accept (an unknown architecture, endianness
/// or location kind, unknown flag bits, a length past `PTRDIFF_MAX`).
pub const LOCUS_ERR_INVALID_ARGUMENT: LocusStatus = 2;
/// A table, function, constant, record, location, live-out or statepoint index is past the
/// end; the message gives the index and the count.
pub const LOCUS_ERR_OUT_OF_RANGE: LocusStatus = 3;
/// Nothing matched (`locus_index_nearest_before` below the first record).
pub const LOCUS_ERR_NOT_FOUND: LocusStatus = 4;
/// A caller's buffer is too small; the call says how large it must be.
pub const LOCUS_ERR_BUFFER_TOO_SMALL: LocusStatus = 5;
/// The object file has no stack map section.
pub const LOCUS_ERR_NO_STACKMAPS: LocusStatus = 6;
/// The operation is not available on this platform (code writing outside Unix).
pub const LOCUS_ERR_UNSUPPORTED: LocusStatus = 7;
/// An internal error was caught at the boundary (a bug in the library: please report it).
/// The library stays usable.
pub const LOCUS_ERR_INTERNAL: LocusStatus = 8;
/// The section ends inside a field.
pub const LOCUS_ERR_TRUNCATED: LocusStatus = 10;
/// A table's version byte is not 3.
pub const LOCUS_ERR_UNSUPPORTED_VERSION: LocusStatus = 11;
/// A count promises more entries than the section can hold.
pub const LOCUS_ERR_COUNT_TOO_LARGE: LocusStatus = 12;
/// A reserved field or padding is not zero (strict parsing only).
pub const LOCUS_ERR_NONZERO_RESERVED: LocusStatus = 13;
/// A location's kind byte is not 1 to 5.
pub const LOCUS_ERR_BAD_LOCATION_KIND: LocusStatus = 14;
/// A ConstantIndex location names a constant the table does not have.
pub const LOCUS_ERR_CONSTANT_INDEX_OUT_OF_RANGE: LocusStatus = 15;
/// The functions' record counts do not add up to `NumRecords` (strict parsing only).
pub const LOCUS_ERR_RECORD_COUNT_MISMATCH: LocusStatus = 16;
/// The section holds no table.
pub const LOCUS_ERR_EMPTY_SECTION: LocusStatus = 17;
/// The record does not have the layout of a `gc.statepoint` record.
pub const LOCUS_ERR_NOT_A_STATEPOINT: LocusStatus = 18;
/// The frame has no value for a register a location needs.
pub const LOCUS_ERR_REGISTER_UNAVAILABLE: LocusStatus = 19;
/// The frame could not read memory a location needs.
pub const LOCUS_ERR_MEMORY_UNREADABLE: LocusStatus = 20;
/// A location's size cannot be read into a 64-bit value.
pub const LOCUS_ERR_UNSUPPORTED_SIZE: LocusStatus = 21;
/// A patch sequence does not fit the reserved bytes.
pub const LOCUS_ERR_PATCH_TOO_LARGE: LocusStatus = 22;
/// A patch address or length is not instruction-aligned (AArch64: 4 bytes).
pub const LOCUS_ERR_MISALIGNED_PATCH: LocusStatus = 23;
/// The operating system refused to change page protection; `os_error` holds `errno`.
pub const LOCUS_ERR_CODE_WRITE: LocusStatus = 24;
/// The object file could not be read.
pub const LOCUS_ERR_OBJECT: LocusStatus = 25;

/// Bytes in `LocusError.message`, its terminating NUL included.
pub const LOCUS_ERROR_MESSAGE_SIZE: usize = 256;

/// `LocusError.offset` when the error refers to no place in a section.
pub const LOCUS_NO_OFFSET: u64 = u64::MAX;

/// What went wrong, filled in by every call that is given one (on success too: then `code`
/// is `LOCUS_OK` and `message` is empty). Owned by the caller.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LocusError {
    /// The status the call returned.
    pub code: LocusStatus,
    /// The OS error number (`errno`) for `LOCUS_ERR_CODE_WRITE`, else 0.
    pub os_error: i32,
    /// Byte offset from the start of the section of the field at fault, or
    /// `LOCUS_NO_OFFSET`.
    pub offset: u64,
    /// A NUL-terminated description naming what failed and where (cut at a character
    /// boundary when longer than the buffer).
    pub message: [c_char; LOCUS_ERROR_MESSAGE_SIZE],
}

/// An error on its way to the caller.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: LocusStatus,
    pub os_error: i32,
    pub offset: Option<u64>,
    pub message: String,
}

impl Failure {
    /// A failure with `code` and `message`, at no section offset.
    pub fn new(code: LocusStatus, message: impl Into<String>) -> Self {
        Failure {
            code,
            os_error: 0,
            offset: None,
            message: message.into(),
        }
    }

    /// A null pointer passed for `argument`.
    pub fn null(argument: &str) -> Self {
        Failure::new(
            LOCUS_ERR_NULL_ARGUMENT,
            format!("`{argument}` is a null pointer"),
        )
    }

    /// `what` number `i` of `count` asked for.
    pub fn out_of_range(what: &str, i: u64, count: u64) -> Self {
        Failure::new(
            LOCUS_ERR_OUT_OF_RANGE,
            format!("{what} {i} is out of range: there are {count}"),
        )
    }

    /// A stack map error, its message prefixed with `context` (what the call was doing).
    pub fn stackmap(context: &str, e: &Error) -> Self {
        let code = match e {
            Error::Truncated { .. } => LOCUS_ERR_TRUNCATED,
            Error::UnsupportedVersion { .. } => LOCUS_ERR_UNSUPPORTED_VERSION,
            Error::CountTooLarge { .. } => LOCUS_ERR_COUNT_TOO_LARGE,
            Error::NonZeroReserved { .. } => LOCUS_ERR_NONZERO_RESERVED,
            Error::BadLocationKind { .. } => LOCUS_ERR_BAD_LOCATION_KIND,
            Error::ConstantIndexOutOfRange { .. } => LOCUS_ERR_CONSTANT_INDEX_OUT_OF_RANGE,
            Error::RecordCountMismatch { .. } => LOCUS_ERR_RECORD_COUNT_MISMATCH,
            Error::EmptySection => LOCUS_ERR_EMPTY_SECTION,
            Error::NotAStatepoint { .. } => LOCUS_ERR_NOT_A_STATEPOINT,
            Error::RegisterUnavailable { .. } => LOCUS_ERR_REGISTER_UNAVAILABLE,
            Error::MemoryUnreadable { .. } => LOCUS_ERR_MEMORY_UNREADABLE,
            Error::UnsupportedSize { .. } => LOCUS_ERR_UNSUPPORTED_SIZE,
            Error::PatchTooLarge { .. } => LOCUS_ERR_PATCH_TOO_LARGE,
            Error::MisalignedPatch { .. } => LOCUS_ERR_MISALIGNED_PATCH,
            Error::CodeWrite { .. } => LOCUS_ERR_CODE_WRITE,
            Error::Object { .. } => LOCUS_ERR_OBJECT,
            // A variant added to locus-stackmap later: still an error, with its message.
            _ => LOCUS_ERR_INTERNAL,
        };
        let offset = match e {
            Error::NotAStatepoint { offset, .. } => Some(*offset as u64),
            _ => e.offset().map(|o| o as u64),
        };
        let os_error = match e {
            Error::CodeWrite { errno } => *errno,
            _ => 0,
        };
        Failure {
            code,
            os_error,
            offset,
            message: format!("{context}: {e}"),
        }
    }
}

/// The name of a status code, e.g. `"LOCUS_ERR_TRUNCATED"` (`"LOCUS_UNKNOWN_STATUS"` for
/// a number that is not one). The string is static; never free it.
///
/// # Safety
///
/// None: any value is accepted.
#[no_mangle]
pub unsafe extern "C" fn locus_status_name(status: LocusStatus) -> *const c_char {
    let name: &'static std::ffi::CStr = match status {
        LOCUS_OK => c"LOCUS_OK",
        LOCUS_ERR_NULL_ARGUMENT => c"LOCUS_ERR_NULL_ARGUMENT",
        LOCUS_ERR_INVALID_ARGUMENT => c"LOCUS_ERR_INVALID_ARGUMENT",
        LOCUS_ERR_OUT_OF_RANGE => c"LOCUS_ERR_OUT_OF_RANGE",
        LOCUS_ERR_NOT_FOUND => c"LOCUS_ERR_NOT_FOUND",
        LOCUS_ERR_BUFFER_TOO_SMALL => c"LOCUS_ERR_BUFFER_TOO_SMALL",
        LOCUS_ERR_NO_STACKMAPS => c"LOCUS_ERR_NO_STACKMAPS",
        LOCUS_ERR_UNSUPPORTED => c"LOCUS_ERR_UNSUPPORTED",
        LOCUS_ERR_INTERNAL => c"LOCUS_ERR_INTERNAL",
        LOCUS_ERR_TRUNCATED => c"LOCUS_ERR_TRUNCATED",
        LOCUS_ERR_UNSUPPORTED_VERSION => c"LOCUS_ERR_UNSUPPORTED_VERSION",
        LOCUS_ERR_COUNT_TOO_LARGE => c"LOCUS_ERR_COUNT_TOO_LARGE",
        LOCUS_ERR_NONZERO_RESERVED => c"LOCUS_ERR_NONZERO_RESERVED",
        LOCUS_ERR_BAD_LOCATION_KIND => c"LOCUS_ERR_BAD_LOCATION_KIND",
        LOCUS_ERR_CONSTANT_INDEX_OUT_OF_RANGE => c"LOCUS_ERR_CONSTANT_INDEX_OUT_OF_RANGE",
        LOCUS_ERR_RECORD_COUNT_MISMATCH => c"LOCUS_ERR_RECORD_COUNT_MISMATCH",
        LOCUS_ERR_EMPTY_SECTION => c"LOCUS_ERR_EMPTY_SECTION",
        LOCUS_ERR_NOT_A_STATEPOINT => c"LOCUS_ERR_NOT_A_STATEPOINT",
        LOCUS_ERR_REGISTER_UNAVAILABLE => c"LOCUS_ERR_REGISTER_UNAVAILABLE",
        LOCUS_ERR_MEMORY_UNREADABLE => c"LOCUS_ERR_MEMORY_UNREADABLE",
        LOCUS_ERR_UNSUPPORTED_SIZE => c"LOCUS_ERR_UNSUPPORTED_SIZE",
        LOCUS_ERR_PATCH_TOO_LARGE => c"LOCUS_ERR_PATCH_TOO_LARGE",
        LOCUS_ERR_MISALIGNED_PATCH => c"LOCUS_ERR_MISALIGNED_PATCH",
        LOCUS_ERR_CODE_WRITE => c"LOCUS_ERR_CODE_WRITE",
        LOCUS_ERR_OBJECT => c"LOCUS_ERR_OBJECT",
        _ => c"LOCUS_UNKNOWN_STATUS",
    };
    name.as_ptr()
}

/// Writes into a fixed `c_char` buffer, dropping what does not fit (at a character
/// boundary) and keeping room for the NUL.
pub(crate) struct CBuf<'a> {
    buf: &'a mut [c_char],
    len: usize,
}

impl<'a> CBuf<'a> {
    /// An empty string in `buf` (which must hold at least the NUL to be useful).
    pub fn new(buf: &'a mut [c_char]) -> Self {
        if let Some(first) = buf.first_mut() {
            *first = 0;
        }
        CBuf { buf, len: 0 }
    }
}

impl fmt::Write for CBuf<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len().saturating_sub(1 + self.len);
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        for (dst, &b) in self.buf.iter_mut().skip(self.len).zip(&s.as_bytes()[..n]) {
            *dst = b as c_char;
        }
        self.len += n;
        if let Some(nul) = self.buf.get_mut(self.len) {
            *nul = 0;
        }
        Ok(())
    }
}

/// Runs one entry point's body: catches any panic (reported as `LOCUS_ERR_INTERNAL`),
/// fills `err` when it is not null, and returns the status.
///
/// # Safety
///
/// `err` is null or points to a `LocusError` the caller lets this call write.
pub(crate) unsafe fn guard(
    err: *mut LocusError,
    body: impl FnOnce() -> Result<(), Failure>,
) -> LocusStatus {
    let result = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Err(Failure::new(
            LOCUS_ERR_INTERNAL,
            "internal error: a panic was caught at the C boundary",
        ))
    });
    let (code, os_error, offset) = match &result {
        Ok(()) => (LOCUS_OK, 0, None),
        Err(f) => (f.code, f.os_error, f.offset),
    };
    if !err.is_null() {
        let mut record = LocusError {
            code,
            os_error,
            offset: offset.unwrap_or(LOCUS_NO_OFFSET),
            message: [0; LOCUS_ERROR_MESSAGE_SIZE],
        };
        if let Err(f) = &result {
            let _ = CBuf::new(&mut record.message).write_str(&f.message);
        }
        // SAFETY: `err` is not null and the caller lets this call write a LocusError there
        // (this function's contract); `write` does not read the old contents.
        unsafe { err.write(record) };
    }
    code
}

/// Borrows the `T` that `p` points to, or fails naming `argument`.
///
/// # Safety
///
/// `p` is null or points to a valid `T` that stays unchanged for `'a`.
pub(crate) unsafe fn arg<'a, T>(p: *const T, argument: &str) -> Result<&'a T, Failure> {
    // SAFETY: forwarded from the caller.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::null(argument))
}

/// An out-parameter that was checked not to be null.
pub(crate) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// Checks `p`, failing with `LOCUS_ERR_NULL_ARGUMENT` naming `argument`.
    pub fn new(p: *mut T, argument: &str) -> Result<Self, Failure> {
        if p.is_null() {
            Err(Failure::null(argument))
        } else {
            Ok(Out(p))
        }
    }

    /// Stores `value` without reading or dropping what was there.
    ///
    /// # Safety
    ///
    /// The pointer given to `Out::new` points to writable memory for a `T`.
    pub unsafe fn set(&self, value: T) {
        // SAFETY: not null (checked in `new`) and writable (the caller's contract).
        unsafe { self.0.write(value) }
    }
}

/// The `len` bytes at `data` (null is accepted when `len` is 0).
///
/// # Safety
///
/// When `len` is not 0, `data` points to `len` readable bytes that stay unchanged for `'a`.
pub(crate) unsafe fn bytes<'a>(
    data: *const u8,
    len: usize,
    argument: &str,
) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Failure::null(argument));
    }
    if len > isize::MAX as usize {
        return Err(Failure::new(
            LOCUS_ERR_INVALID_ARGUMENT,
            format!("`{argument}`: length {len} is larger than PTRDIFF_MAX"),
        ));
    }
    // SAFETY: not null, `len` bytes readable and unchanged for 'a (the caller's contract),
    // and `len` fits an isize.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// The `len` writable bytes at `data` (null is accepted when `len` is 0).
///
/// # Safety
///
/// When `len` is not 0, `data` points to `len` writable bytes nothing else uses for `'a`.
pub(crate) unsafe fn bytes_mut<'a>(
    data: *mut u8,
    len: usize,
    argument: &str,
) -> Result<&'a mut [u8], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    if data.is_null() {
        return Err(Failure::null(argument));
    }
    if len > isize::MAX as usize {
        return Err(Failure::new(
            LOCUS_ERR_INVALID_ARGUMENT,
            format!("`{argument}`: length {len} is larger than PTRDIFF_MAX"),
        ));
    }
    // SAFETY: not null, `len` bytes writable and not aliased for 'a (the caller's
    // contract), and `len` fits an isize.
    Ok(unsafe { std::slice::from_raw_parts_mut(data, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let mut buf = [1 as c_char; 6];
        let mut w = CBuf::new(&mut buf);
        let _ = w.write_str("abcé"); // 'é' is 2 bytes: "abcé" is 5, room is 5
        assert_eq!(buf.map(|c| c as u8), *b"abc\xc3\xa9\0");
        let mut buf = [1 as c_char; 5];
        let mut w = CBuf::new(&mut buf);
        let _ = w.write_str("abcé"); // room 4: the 'é' does not fit whole
        assert_eq!(
            buf[..4].iter().map(|&c| c as u8).collect::<Vec<_>>(),
            b"abc\0"
        );
    }

    #[test]
    fn a_panic_becomes_a_status() {
        let mut e = std::mem::MaybeUninit::<LocusError>::uninit();
        // SAFETY: `e` is writable.
        let code = unsafe { guard(e.as_mut_ptr(), || panic!("boom")) };
        assert_eq!(code, LOCUS_ERR_INTERNAL);
        // SAFETY: guard wrote it.
        let e = unsafe { e.assume_init() };
        assert_eq!(e.code, LOCUS_ERR_INTERNAL);
    }
}
