//! Where a runtime's objects live, and the index that lets compiled code tell them from
//! anything else.
//!
//! One private anonymous mapping per runtime, reserved whole when the runtime is made
//! (`MAP_NORESERVE`: pages cost memory only once written):
//!
//! ```text
//! header page   ... | miss handler address (base - 16) | hit counter (base - 8)
//! index         base: one 64-bit word per 8 bytes of the arena
//! arena         the objects' words, handed out from the start, never freed
//! ```
//!
//! The index word of an address `a` is at `base + (a & mask)`, `mask` being the index's
//! size less 8: as the arena is as large as the index, every aligned address in the arena
//! has an index word of its own. The word of an object's address holds that address;
//! every other word holds 0, except word 0, which holds `u64::MAX` while no object owns it
//! (0 there would match a null pointer, whose index word it is; `u64::MAX` has a nonzero
//! index). So `index(a) == a` exactly when `a` is an object this runtime handed out: a copy
//! of an object elsewhere, an address inside an object, an object of another runtime,
//! null or an unaligned address find another value. This is the check the inline fast
//! paths and stubs make before they read an object ([`super::fast_path`]), and it can
//! read no unmapped memory whatever the address.

use std::sync::atomic::AtomicU64;

/// log2 of the arena's size (and the index's): 256 MiB of objects, 32 Mi words.
pub(super) const ARENA_BITS: u32 = 28;

/// The header's size: one page, before the index.
const HEADER: usize = 4096;

/// The offset of the miss handler's address from the index's base.
pub const MISS_HANDLER_OFFSET: i8 = -16;
/// The offset of the hit counter from the index's base.
pub const HITS_OFFSET: i8 = -8;

/// A runtime's objects and their index (see the [module documentation](self)).
pub(super) struct Arena {
    /// The start of the mapping.
    map: *mut u8,
    /// The mapping's length.
    len: usize,
    /// log2 of the index's (and the arena's) size.
    bits: u32,
    /// Bytes of the arena handed out.
    used: usize,
}

impl Arena {
    /// Maps an arena of `1 << bits` bytes (3 to 31 bits), its index and header, and
    /// writes `miss` (the miss handler's address) into the header.
    pub(super) fn new(bits: u32, miss: u64) -> Result<Self, String> {
        if !(3..=31).contains(&bits) {
            return Err(format!("an object arena of 2^{bits} bytes"));
        }
        let size = 1usize << bits;
        let len = HEADER + 2 * size;
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks; no
        // memory of this process is affected.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(format!(
                "cannot map the object arena ({len} bytes): {}",
                std::io::Error::last_os_error()
            ));
        }
        let arena = Arena {
            map: map.cast(),
            len,
            bits,
            used: 0,
        };
        // SAFETY: both words lie in the header page of the mapping just made, aligned.
        unsafe {
            arena.header_word(MISS_HANDLER_OFFSET).write(miss);
        }
        // SAFETY: index word 0, in the mapping, aligned.
        unsafe { arena.index_word(0).write(u64::MAX) };
        Ok(arena)
    }

    /// The address of index word 0.
    pub(super) fn index_base(&self) -> u64 {
        self.map as u64 + HEADER as u64
    }

    /// The mask that takes an address to its index word's offset.
    pub(super) fn mask(&self) -> u32 {
        // `bits` <= 31: the mask fits.
        ((1u64 << self.bits) - 8) as u32
    }

    /// The hit counter the fast paths and stubs increment.
    pub(super) fn hits(&self) -> &AtomicU64 {
        // SAFETY: the counter is an aligned word of the header page, mapped while `self`
        // lives; compiled code increments it only on this thread, while no Rust code runs.
        unsafe { AtomicU64::from_ptr(self.header_word(HITS_OFFSET)) }
    }

    /// The header word at `offset` (negative) from the index's base.
    fn header_word(&self, offset: i8) -> *mut u64 {
        self.map
            .wrapping_add(HEADER)
            .wrapping_offset(isize::from(offset))
            .cast()
    }

    /// The index word of `address`.
    fn index_word(&self, address: u64) -> *mut u64 {
        let offset = (address & u64::from(self.mask())) as usize;
        self.map.wrapping_add(HEADER + offset).cast()
    }

    /// Copies `words` into the arena as a new object and indexes it; returns its address.
    pub(super) fn alloc(&mut self, words: &[u64]) -> Result<u64, String> {
        let bytes = words.len().checked_mul(8).filter(|b| *b > 0);
        let end = bytes.and_then(|b| self.used.checked_add(b));
        let Some(end) = end.filter(|e| *e <= 1usize << self.bits) else {
            return Err(format!(
                "the object arena is full ({} of {} bytes used; an object of {} words does \
                 not fit)",
                self.used,
                1usize << self.bits,
                words.len()
            ));
        };
        let start: *mut u64 = self
            .map
            .wrapping_add(HEADER + (1usize << self.bits) + self.used)
            .cast();
        let address = start as u64;
        // SAFETY: `address..address + 8 * words.len()` lies in the arena (checked above),
        // mapped read-write while `self` lives, aligned, and handed out to no object yet.
        unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), start, words.len()) };
        // SAFETY: the index word of an address in the arena, in the mapping.
        unsafe { self.index_word(address).write(address) };
        self.used = end;
        Ok(address)
    }

    /// The `len` words of the object at `address`.
    ///
    /// # Safety
    ///
    /// `alloc` returned `address` for an object of `len` words.
    pub(super) unsafe fn words(&self, address: u64, len: usize) -> &[u64] {
        // SAFETY: the caller's contract: an object of the arena, mapped while `self` lives;
        // compiled code, which may also write it, does not run while Rust holds this.
        unsafe { std::slice::from_raw_parts(address as *const u64, len) }
    }

    /// The `len` words of the object at `address`, to change.
    ///
    /// # Safety
    ///
    /// As for [`Arena::words`].
    pub(super) unsafe fn words_mut(&mut self, address: u64, len: usize) -> &mut [u64] {
        // SAFETY: as in `words`; `&mut self` excludes other references into the arena.
        unsafe { std::slice::from_raw_parts_mut(address as *mut u64, len) }
    }

    /// Whether the index says `address` is an object: what the fast paths check.
    pub(super) fn indexed(&self, address: u64) -> bool {
        // SAFETY: every index word is mapped and readable while `self` lives.
        unsafe { self.index_word(address).read() == address }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made; the runtime that owns `self` is going, with the
        // code that could read it.
        unsafe { libc::munmap(self.map.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_finds_objects_and_nothing_else() -> Result<(), String> {
        let mut arena = Arena::new(12, 0x1234)?;
        let base = arena.index_base();
        // Null: index word 0 is not 0 while no object owns it.
        assert!(!arena.indexed(0));
        let a = arena.alloc(&[0, 1, 2])?;
        let b = arena.alloc(&[5; 505])?;
        assert!(arena.indexed(a) && arena.indexed(b));
        for other in [
            0,
            8,
            a + 8,
            a + 1,
            b + 16,
            b - 8,
            a + (1 << 12),
            u64::MAX,
            base,
        ] {
            assert!(!arena.indexed(other), "{other:#x}");
        }
        // SAFETY: `b` is an object of 505 words.
        assert_eq!(unsafe { arena.words(b, 505) }[504], 5);
        // 4096 bytes, 512 words: 3 + 505 leave room for 4.
        assert!(arena.alloc(&[1; 5]).is_err());
        let c = arena.alloc(&[1; 4])?;
        assert!(arena.indexed(c));
        assert!(arena.alloc(&[1]).is_err());
        assert!(arena.alloc(&[]).is_err());
        // SAFETY: the header word is mapped while `arena` lives.
        let miss = unsafe { arena.header_word(MISS_HANDLER_OFFSET).read() };
        assert_eq!(miss, 0x1234);
        assert!(Arena::new(40, 0).is_err());
        Ok(())
    }
}
