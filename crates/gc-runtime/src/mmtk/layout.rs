//! The runtime's object layout as MMTk sees it: where an object's allocation starts, how
//! big it is, and its header. The layout facts of MMTk's objects are written here once.
//!
//! ```text
//! untagged:  start + 0    the header word                  start = obj - 8
//!                         (UNTAGGED_HEADER_FLAG | nptrs << 32 | nbytes)
//!            start + 8    nptrs fields, nbytes raw bytes, padded to 8 (at least 8 bytes)
//!                         and the whole allocation to 16; start is 8 past a multiple of 16
//! tagged:    start + 0    the allocation's size in bytes  start = obj - 32
//!            start + 8    its serial (which object of the heap it is)
//!            start + 16   TAGGED_NPTRS
//!            start + 24   the type tag (UNTAGGED_HEADER_FLAG clear)
//!            start + 32   size bytes, padded to 8, the whole allocation to 16
//! ```
//!
//! Every object is 16-byte aligned. The word before it tells the two kinds apart: the
//! untagged header's [`UNTAGGED_HEADER_FLAG`], which no type tag has. An untagged object
//! takes one header word, so that it is as big as a Boehm-collected object of the same
//! fields (a tree node of 2 pointers and 8 bytes: 32 bytes, 48 with the two-word header
//! this replaced); MMTk allocates it at 8 past a multiple of 16 (the binding's allocation
//! offset), and objects of whole 16-byte units then follow each other without a gap. A
//! tagged object keeps the word where the runtime's own 32-byte
//! [`ObjectHeader`](crate::runtime::heap::ObjectHeader) keeps its tag (`obj - 8`), which
//! is all compiled code reads of an object's header, and a serial in its prefix, so that
//! the binding can tell a tagged object it tracks from a new one allocated at the same
//! address; neither compiled code nor the frame walk ever reads the prefix.
//!
//! A copying plan writes the forwarding pointer of a copied object over the first word of
//! its old body (every untagged object has at least one; tagged objects never move), so
//! the old copy's header stays readable.

use crate::contract::{
    untagged_allocation_bytes, untagged_header_word, UNTAGGED_HEADER_BYTES, UNTAGGED_HEADER_FLAG,
};
use crate::runtime::heap::{MAX_OBJECT_BYTES, OBJECT_ALIGN, TAGGED_NPTRS};

/// The bytes of an untagged object's header: its one word.
pub(crate) const HEADER_BYTES: usize = UNTAGGED_HEADER_BYTES as usize;

/// The bytes of a tagged object's header: the `TAGGED_NPTRS` word and the tag.
const TAGGED_HEADER_BYTES: usize = 16;

/// The bytes before a tagged object's header: its size word and its serial, so that the
/// object stays 16-byte aligned.
pub(crate) const TAGGED_PREFIX: usize = 16;

/// Where an untagged object's allocation starts, from a multiple of 16: MMTk's allocation
/// offset for it (the object itself is then 16-byte aligned).
pub(crate) const UNTAGGED_OFFSET: usize = HEADER_BYTES;

/// The byte offset of the header word (untagged) or the tag (tagged) from the object.
const WORD_BEFORE: usize = 8;

/// The byte offset of a tagged object's `TAGGED_NPTRS` word from the object's address.
const TAGGED_NPTRS_OFFSET: usize = 16;

/// The byte offset of a tagged object's serial from the object's address.
const SERIAL_OFFSET: usize = TAGGED_HEADER_BYTES + TAGGED_PREFIX - 8;

/// Where a copying plan keeps the forwarding pointer, in bits from the header's start
/// (MMTk's `ref_to_header`, the header word): the object's first body word.
pub(crate) const FORWARDING_POINTER_BITS: isize = (HEADER_BYTES * 8) as isize;

/// A body of `body` bytes rounded up to whole words, at least one (as the runtime's heap).
pub(crate) fn span(body: usize) -> usize {
    body.div_ceil(8).max(1) * 8
}

/// The bytes an untagged object of `nptrs` fields and `nbytes` raw bytes takes, header
/// included; `None` when it is larger than the runtime allows or its counts do not fit
/// the header word.
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
    (size <= MAX_OBJECT_BYTES).then(|| allocation(TAGGED_PREFIX + TAGGED_HEADER_BYTES + span(size)))
}

/// Writes an untagged object's header at the start of its allocation and returns the
/// object's address.
///
/// # Safety
/// `start` must be a fresh allocation of [`untagged_size`]`(nptrs, nbytes)` bytes, 8 past a
/// multiple of 16.
pub(crate) unsafe fn write_untagged(start: usize, nptrs: usize, nbytes: usize) -> usize {
    let obj = start + HEADER_BYTES;
    debug_assert!(obj.is_multiple_of(OBJECT_ALIGN));
    // `untagged_size` checked that the counts fit.
    let word = untagged_header_word(nptrs as u64, nbytes as u64).unwrap_or(UNTAGGED_HEADER_FLAG);
    // SAFETY: the caller's promise: the header word is in the allocation.
    unsafe { poke(start, word as usize) };
    obj
}

/// Writes a tagged object's prefix and header at the start of its allocation of `bytes`
/// bytes and returns the object's address.
///
/// # Safety
/// `start` must be a fresh allocation of `bytes` bytes, [`tagged_size`] of the body.
pub(crate) unsafe fn write_tagged(start: usize, bytes: usize, serial: u64, tag: u64) -> usize {
    debug_assert!(tag & UNTAGGED_HEADER_FLAG == 0);
    let obj = start + TAGGED_PREFIX + TAGGED_HEADER_BYTES;
    // SAFETY: the caller's promise: prefix and header are in the allocation.
    unsafe { poke(start, bytes) };
    // SAFETY: as above.
    unsafe { poke(obj - SERIAL_OFFSET, serial as usize) };
    // SAFETY: as above.
    unsafe { poke(obj - TAGGED_NPTRS_OFFSET, TAGGED_NPTRS as usize) };
    // SAFETY: as above.
    unsafe { poke(obj - WORD_BEFORE, tag as usize) };
    obj
}

/// Whether the object at `obj` is tagged.
///
/// # Safety
/// `obj` must be the address of an object this module allocated (a from-space copy with a
/// forwarding pointer in its first body word counts: the header is intact).
pub(crate) unsafe fn is_tagged(obj: usize) -> bool {
    // SAFETY: the caller's promise: the word before the object is in its allocation.
    unsafe { peek(obj - WORD_BEFORE) as u64 & UNTAGGED_HEADER_FLAG == 0 }
}

/// The first byte of the object's allocation.
///
/// # Safety
/// As for [`is_tagged`].
pub(crate) unsafe fn start_of(obj: usize) -> usize {
    // SAFETY: the caller's promise.
    if unsafe { is_tagged(obj) } {
        obj - TAGGED_HEADER_BYTES - TAGGED_PREFIX
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
        unsafe { peek(obj - TAGGED_HEADER_BYTES - TAGGED_PREFIX) }
    } else {
        // SAFETY: the caller's promise: the header is in the allocation.
        let (nptrs, nbytes) = unsafe { counts(obj) };
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
    let (nptrs, nbytes) = unsafe { counts(obj) };
    Some(nptrs * 8 + nbytes)
}

/// The serial of a tagged object.
///
/// # Safety
/// As for [`is_tagged`], and the object must be tagged.
pub(crate) unsafe fn tagged_serial(obj: usize) -> u64 {
    // SAFETY: the caller's promise: a tagged object's prefix holds it.
    unsafe { peek(obj - SERIAL_OFFSET) as u64 }
}

/// The word before the object at `obj`: an untagged object's header word, a tagged
/// object's tag.
///
/// # Safety
/// As for [`is_tagged`].
pub(crate) unsafe fn word_before(obj: usize) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { peek(obj - WORD_BEFORE) as u64 }
}

/// An untagged object's `nptrs` and `nbytes`, from its header word.
///
/// # Safety
/// As for [`is_tagged`], and the object must not be tagged.
unsafe fn counts(obj: usize) -> (usize, usize) {
    // SAFETY: the caller's promise.
    let word = unsafe { word_before(obj) };
    (
        ((word & !UNTAGGED_HEADER_FLAG) >> 32) as usize,
        (word & u64::from(u32::MAX)) as usize,
    )
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
    unsafe { counts(obj) }.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What this module reads of the object at `obj` (one written by a test here): tagged,
    /// its start, its size, its untagged body.
    fn described(obj: usize) -> (bool, usize, usize, Option<usize>) {
        // SAFETY: the tests' objects are in live buffers, written by this module.
        let tagged = unsafe { is_tagged(obj) };
        // SAFETY: as above.
        let start = unsafe { start_of(obj) };
        // SAFETY: as above.
        let size = unsafe { size_of(obj) };
        // SAFETY: as above.
        let body = unsafe { untagged_body(obj) };
        (tagged, start, size, body)
    }

    /// An 8-byte aligned buffer of `words` zero words, 16-byte aligned at word 0.
    fn buffer(words: usize) -> Vec<u128> {
        vec![0; words.div_ceil(2) + 1]
    }

    #[test]
    fn an_untagged_header_round_trips_and_is_not_a_tag() {
        for (nptrs, nbytes) in [(0, 0), (2, 8), (2, 16), (65_536, 0), (0, 1 << 20), (3, 5)] {
            let bytes = untagged_size(nptrs, nbytes).expect("fits");
            let mut buf = buffer(bytes / 8 + 2);
            let start = buf.as_mut_ptr() as usize + 8;
            // SAFETY: `bytes` bytes at `start` are in the buffer, 8 past a multiple of 16.
            let obj = unsafe { write_untagged(start, nptrs, nbytes) };
            assert_eq!(obj % OBJECT_ALIGN, 0);
            let facts = described(obj);
            assert_eq!(facts, (false, start, bytes, Some(nptrs * 8 + nbytes)));
            // SAFETY: an untagged object this module wrote.
            assert_eq!(unsafe { nptrs_of(obj) }, nptrs);
        }
    }

    #[test]
    fn untagged_objects_take_one_header_word() {
        // A tree node of 2 pointers and 8 raw bytes: Boehm's 32 bytes.
        assert_eq!(untagged_size(2, 8), Some(32));
        assert_eq!(untagged_size(0, 8), Some(16));
        assert_eq!(untagged_size(0, 0), Some(16));
        assert_eq!(untagged_size(2, 16), Some(48));
    }

    #[test]
    fn counts_the_header_word_cannot_hold_are_too_large() {
        assert_eq!(untagged_size(1 << 31, 0), None);
        assert_eq!(untagged_size(0, 1 << 32), None);
        assert!(untagged_size((1 << 31) - 1, 0).is_some());
    }

    #[test]
    fn a_tagged_object_keeps_its_tag_before_it() {
        let size = 24;
        let bytes = tagged_size(size).expect("fits");
        let mut buf = buffer(bytes / 8 + 2);
        let start = buf.as_mut_ptr() as usize;
        // SAFETY: `bytes` bytes at `start` are in the buffer.
        let obj = unsafe { write_tagged(start, bytes, 9, 0x1234_5670) };
        assert_eq!(obj % OBJECT_ALIGN, 0);
        assert_eq!(described(obj), (true, start, bytes, None));
        // SAFETY: a tagged object this module wrote.
        assert_eq!(unsafe { word_before(obj) }, 0x1234_5670);
        // SAFETY: as above.
        assert_eq!(unsafe { tagged_serial(obj) }, 9);
    }
}
