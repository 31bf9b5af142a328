//! The runtime's object layout as MMTk sees it: where an object's allocation starts, how
//! big it is, and its header. The layout facts of MMTk's objects are written here once.
//!
//! ```text
//! untagged:  start + 0    nptrs                          start = obj - 16
//!            start + 8    nbytes
//!            start + 16   nptrs fields, nbytes raw bytes, padded to 8 (at least 8 bytes)
//!                         and the whole allocation to 16
//! tagged:    start + 0    the allocation's size in bytes  start = obj - 32
//!            start + 8    its serial (which object of the heap it is)
//!            start + 16   TAGGED_NPTRS
//!            start + 24   the type tag
//!            start + 32   size bytes, padded to 8, the whole allocation to 16
//! ```
//!
//! The two header words sit where the runtime's own 32-byte
//! [`ObjectHeader`](crate::runtime::heap::ObjectHeader) keeps them (`obj - 16`: `nptrs`,
//! `obj - 8`: `nbytes` or the tag), so compiled code, which reads only a tagged object's
//! tag at `obj - 8`, cannot tell which heap made an object. The own heap's other words
//! (magic, state, serial) serve its freed-object detection, which MMTk's heap does not
//! do (MMTk's valid-object bits say what is an object): 16 bytes less per object, and a
//! GCBench node (2 pointers, 16 raw bytes) takes 48 bytes instead of 64. A tagged object
//! keeps a serial, in its 16-byte prefix, so that the binding can tell a tagged object it
//! tracks from a new one allocated at the same address; neither compiled code nor the
//! frame walk ever reads the prefix.
//!
//! A copying plan writes the forwarding pointer of a copied object over the first word of
//! its old body (every untagged object has at least one; tagged objects never move), so
//! the old copy's header stays readable.

use crate::contract::untagged_allocation_bytes;
use crate::runtime::heap::{MAX_OBJECT_BYTES, OBJECT_ALIGN, TAGGED_NPTRS};

/// The bytes of an object's header: the `nptrs` word and the `nbytes` (or tag) word.
pub(crate) const HEADER_BYTES: usize = 16;

/// The bytes before a tagged object's header: its size word and its serial, so that the
/// object stays 16-byte aligned.
pub(crate) const TAGGED_PREFIX: usize = 16;

/// The byte offset of the header's `nptrs` word from the object's address.
const NPTRS_OFFSET: usize = 16;

/// The byte offset of the header's `nbytes` (or tag) word from the object's address.
const NBYTES_OFFSET: usize = 8;

/// The byte offset of a tagged object's serial from the object's address.
const SERIAL_OFFSET: usize = HEADER_BYTES + TAGGED_PREFIX - 8;

/// Where a copying plan keeps the forwarding pointer, in bits from the header's start
/// (MMTk's `ref_to_header`): the object's first body word.
pub(crate) const FORWARDING_POINTER_BITS: isize = (HEADER_BYTES * 8) as isize;

/// A body of `body` bytes rounded up to whole words, at least one (as the runtime's heap).
pub(crate) fn span(body: usize) -> usize {
    body.div_ceil(8).max(1) * 8
}

/// The bytes an untagged object of `nptrs` fields and `nbytes` raw bytes takes, header
/// included; `None` when it is larger than the runtime allows.
pub(crate) fn untagged_size(nptrs: usize, nbytes: usize) -> Option<usize> {
    let body = nptrs.checked_mul(8)?.checked_add(nbytes)?;
    if body > MAX_OBJECT_BYTES {
        return None;
    }
    // The contract's size (what compiled code that inlines the fast path computes).
    let bytes = untagged_allocation_bytes(nptrs as u64, nbytes as u64)?;
    usize::try_from(bytes).ok()
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

/// Writes an untagged object's header at the start of its allocation and returns the
/// object's address.
///
/// # Safety
/// `start` must be a fresh allocation of [`untagged_size`]`(nptrs, nbytes)` bytes.
pub(crate) unsafe fn write_untagged(start: usize, nptrs: usize, nbytes: usize) -> usize {
    let obj = start + HEADER_BYTES;
    // SAFETY: the caller's promise: both header words are in the allocation.
    unsafe { poke(obj - NPTRS_OFFSET, nptrs) };
    // SAFETY: as above.
    unsafe { poke(obj - NBYTES_OFFSET, nbytes) };
    obj
}

/// Writes a tagged object's prefix and header at the start of its allocation of `bytes`
/// bytes and returns the object's address.
///
/// # Safety
/// `start` must be a fresh allocation of `bytes` bytes, [`tagged_size`] of the body.
pub(crate) unsafe fn write_tagged(start: usize, bytes: usize, serial: u64, tag: u64) -> usize {
    let obj = start + TAGGED_PREFIX + HEADER_BYTES;
    // SAFETY: the caller's promise: prefix and header are in the allocation.
    unsafe { poke(start, bytes) };
    // SAFETY: as above.
    unsafe { poke(obj - SERIAL_OFFSET, serial as usize) };
    // SAFETY: as above.
    unsafe { poke(obj - NPTRS_OFFSET, TAGGED_NPTRS as usize) };
    // SAFETY: as above.
    unsafe { poke(obj - NBYTES_OFFSET, tag as usize) };
    obj
}

/// Whether the object at `obj` is tagged.
///
/// # Safety
/// `obj` must be the address of an object this module allocated (a from-space copy with a
/// forwarding pointer in its first body word counts: the header is intact).
pub(crate) unsafe fn is_tagged(obj: usize) -> bool {
    // SAFETY: the caller's promise: the header is in the object's allocation.
    unsafe { peek(obj - NPTRS_OFFSET) as u64 == TAGGED_NPTRS }
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
        unsafe { peek(obj - HEADER_BYTES - TAGGED_PREFIX) }
    } else {
        // SAFETY: the caller's promise: the header is in the allocation.
        let nptrs = unsafe { nptrs_of(obj) };
        // SAFETY: as above.
        let nbytes = unsafe { peek(obj - NBYTES_OFFSET) };
        allocation(HEADER_BYTES + span(nptrs * 8 + nbytes))
    }
}

/// The body bytes of an untagged object (`8 * nptrs + nbytes`), `None` for a tagged one.
///
/// # Safety
/// As for [`is_tagged`].
pub(crate) unsafe fn untagged_body(obj: usize) -> Option<usize> {
    // SAFETY: the caller's promise.
    if unsafe { is_tagged(obj) } {
        return None;
    }
    // SAFETY: as above.
    let nptrs = unsafe { nptrs_of(obj) };
    // SAFETY: as above.
    let nbytes = unsafe { peek(obj - NBYTES_OFFSET) };
    Some(nptrs.saturating_mul(8).saturating_add(nbytes))
}

/// The serial of a tagged object.
///
/// # Safety
/// As for [`is_tagged`], and the object must be tagged.
pub(crate) unsafe fn tagged_serial(obj: usize) -> u64 {
    // SAFETY: the caller's promise: a tagged object's prefix holds it.
    unsafe { peek(obj - SERIAL_OFFSET) as u64 }
}

/// The two header words of the object at `obj`: `nptrs` (or `TAGGED_NPTRS`) and `nbytes`
/// (or the tag).
///
/// # Safety
/// As for [`is_tagged`].
pub(crate) unsafe fn header_of(obj: usize) -> (u64, u64) {
    // SAFETY: the caller's promise.
    let nptrs = unsafe { peek(obj - NPTRS_OFFSET) };
    // SAFETY: as above.
    let nbytes = unsafe { peek(obj - NBYTES_OFFSET) };
    (nptrs as u64, nbytes as u64)
}

/// Reads a header word (plain: the object's memory is the program's, not shared with a
/// signal handler or the stack).
///
/// # Safety
/// `addr` must be readable and 8-byte aligned.
unsafe fn peek(addr: usize) -> usize {
    // SAFETY: the caller's promise.
    unsafe { (addr as *const usize).read() }
}

/// Writes a header word.
///
/// # Safety
/// `addr` must be writable and 8-byte aligned.
unsafe fn poke(addr: usize, value: usize) {
    // SAFETY: the caller's promise.
    unsafe { (addr as *mut usize).write(value) }
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
