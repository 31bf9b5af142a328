//! The runtime's object layout as MMTk sees it: where an object's allocation starts, how
//! big it is, and its header, the same [`ObjectHeader`] the runtime's own heap writes.
//!
//! ```text
//! untagged:  start + 0    ObjectHeader (32 bytes)        start = obj - 32
//!            start + 32   nptrs fields, nbytes raw bytes, padded to 8 (at least 8 bytes)
//!                         and the whole allocation to 16
//! tagged:    start + 0    the allocation's size in bytes  start = obj - 48
//!            start + 8    0
//!            start + 16   ObjectHeader, nptrs = TAGGED_NPTRS, last word the type tag
//!            start + 48   size bytes, padded to 8, the whole allocation to 16
//! ```
//!
//! A tagged object's header keeps the runtime's words (its last word is the program's type
//! tag), so its size cannot live there: it lives in the 16-byte prefix before the header,
//! which neither compiled code nor the frame walk ever reads.

use crate::runtime::heap::{
    ObjectHeader, HEADER_BYTES, HEADER_MAGIC, MAX_OBJECT_BYTES, OBJECT_ALIGN, STATE_LIVE,
    TAGGED_NPTRS,
};

/// The bytes before a tagged object's header: its size word and a pad word, so that the
/// object stays 16-byte aligned.
pub(crate) const TAGGED_PREFIX: usize = 16;

/// The byte offset of the header's `nptrs` word from the object's address.
const NPTRS_OFFSET: usize = 16;

/// A body of `body` bytes rounded up to whole words, at least one (as the runtime's heap).
pub(crate) fn span(body: usize) -> usize {
    body.div_ceil(8).max(1) * 8
}

/// The bytes an untagged object of `nptrs` fields and `nbytes` raw bytes takes, header
/// included; `None` when it is larger than the runtime allows.
pub(crate) fn untagged_size(nptrs: usize, nbytes: usize) -> Option<usize> {
    nptrs
        .checked_mul(8)
        .and_then(|p| p.checked_add(nbytes))
        .filter(|&b| b <= MAX_OBJECT_BYTES)
        .map(|b| allocation(HEADER_BYTES + span(b)))
}

/// `bytes` rounded up to whole 16-byte units: MMTk allocates and copies in multiples of
/// the binding's minimum alignment.
fn allocation(bytes: usize) -> usize {
    bytes.next_multiple_of(OBJECT_ALIGN)
}

/// The bytes a tagged object of `size` body bytes takes, prefix and header included.
pub(crate) fn tagged_size(size: usize) -> Option<usize> {
    (size <= MAX_OBJECT_BYTES).then(|| allocation(TAGGED_PREFIX + HEADER_BYTES + span(size)))
}

/// The header of an untagged object, as the runtime's heap writes it.
pub(crate) fn untagged_header(serial: u64, nptrs: usize, nbytes: usize) -> ObjectHeader {
    ObjectHeader {
        magic: HEADER_MAGIC,
        state: STATE_LIVE,
        serial,
        nptrs: nptrs as u64,
        nbytes: nbytes as u64,
    }
}

/// The header of a tagged object, as the runtime's heap writes it.
pub(crate) fn tagged_header(serial: u64, tag: u64) -> ObjectHeader {
    ObjectHeader {
        magic: HEADER_MAGIC,
        state: STATE_LIVE,
        serial,
        nptrs: TAGGED_NPTRS,
        nbytes: tag,
    }
}

/// Whether the object at `obj` is tagged.
///
/// # Safety
/// `obj` must be the address of an object this module allocated (a from-space copy with a
/// forwarding pointer in its first header word counts: the `nptrs` word is intact).
pub(crate) unsafe fn is_tagged(obj: usize) -> bool {
    // SAFETY: the caller's promise: the header is in the object's allocation.
    unsafe { ((obj - NPTRS_OFFSET) as *const u64).read() == TAGGED_NPTRS }
}

/// The first byte of the object's allocation.
///
/// # Safety
/// As for [`is_tagged`].
pub(crate) unsafe fn start_of(obj: usize) -> usize {
    // SAFETY: the caller's promise.
    if unsafe { is_tagged(obj) } {
        obj - HEADER_BYTES - TAGGED_PREFIX
    } else {
        obj - HEADER_BYTES
    }
}

/// The bytes of the object's allocation, prefix and header included.
///
/// # Safety
/// As for [`is_tagged`].
pub(crate) unsafe fn size_of(obj: usize) -> usize {
    // SAFETY: the caller's promise.
    if unsafe { is_tagged(obj) } {
        // SAFETY: a tagged object's prefix holds its size.
        unsafe { ((obj - HEADER_BYTES - TAGGED_PREFIX) as *const usize).read() }
    } else {
        // SAFETY: the caller's promise: the header is in the allocation.
        let nptrs = unsafe { ((obj - NPTRS_OFFSET) as *const u64).read() } as usize;
        // SAFETY: as above.
        let nbytes = unsafe { ((obj - 8) as *const u64).read() } as usize;
        allocation(HEADER_BYTES + span(nptrs * 8 + nbytes))
    }
}

/// The words of a tagged object's body.
///
/// # Safety
/// As for [`is_tagged`], and the object must be tagged.
pub(crate) unsafe fn body_words(obj: usize) -> usize {
    // SAFETY: the caller's promise.
    let size = unsafe { size_of(obj) };
    // SAFETY: as above.
    let start = unsafe { start_of(obj) };
    (size - (obj - start)) / 8
}

/// Reads the word at `addr`.
///
/// # Safety
/// `addr` must be readable and 8-byte aligned.
pub(crate) unsafe fn read_word(addr: usize) -> usize {
    // SAFETY: the caller's promise.
    unsafe { (addr as *const usize).read_volatile() }
}

/// Writes the word at `addr`.
///
/// # Safety
/// `addr` must be writable and 8-byte aligned.
pub(crate) unsafe fn write_word(addr: usize, value: usize) {
    // SAFETY: the caller's promise.
    unsafe { (addr as *mut usize).write_volatile(value) }
}

/// The number of pointer fields of an untagged object.
///
/// # Safety
/// As for [`is_tagged`], and the object must not be tagged.
pub(crate) unsafe fn nptrs_of(obj: usize) -> usize {
    // SAFETY: the caller's promise.
    unsafe { ((obj - NPTRS_OFFSET) as *const u64).read() as usize }
}

/// The header of the object at `obj`.
///
/// # Safety
/// As for [`is_tagged`], and the object must not have been copied away (its first header
/// word holds the forwarding pointer then).
pub(crate) unsafe fn header_of(obj: usize) -> ObjectHeader {
    // SAFETY: the caller's promise.
    unsafe { ((obj - HEADER_BYTES) as *const ObjectHeader).read() }
}
