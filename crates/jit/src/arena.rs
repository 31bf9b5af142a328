//! Where an object model's objects live, and the index that lets compiled code tell them
//! from anything else: [`ObjectArena`].
//!
//! The built-in shapes model ([`super::shapes::Shapes`]) keeps its objects in one; a
//! language's model may keep its own in one too, and then the compiled code checks its
//! objects as well ([`super::ObjectModel::object_arena`]). A runtime whose model has none
//! keeps a small one of its own for the header alone (the miss handler and hit counter
//! its stubs and fast paths reach).
//!
//! Two private anonymous mappings per arena, reserved whole when it is made
//! (`MAP_NORESERVE`: pages cost memory only once written):
//!
//! ```text
//! header page   ... | miss handler address (base - 16) | hit counter (base - 8)
//! index         base: one 64-bit word per 8 bytes of the arena
//!
//! arena         the objects' words, handed out from the start, never freed
//! ```
//!
//! The header and index are placed in the low 2 GiB of the address space when there is
//! room (`MAP_32BIT`, else the first free 16 MiB step below 2 GiB): the compiled code
//! then reaches them with a 32-bit displacement (`cmp [rax + base], rdi`, `call [base -
//! 16]`) instead of loading the base into a register first (`movabs r11, base`, ten bytes
//! on the path of every hit; see [`super::fast_path`]). Elsewhere it works the same with
//! the `movabs`.
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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// log2 of the built-in model's arena (and index): 256 MiB of objects, 32 Mi words.
pub const ARENA_BITS: u32 = 28;

/// The header's size: one page, before the index.
const HEADER: usize = 4096;

/// The offset of the miss handler's address from the index's base.
pub const MISS_HANDLER_OFFSET: i8 = -16;
/// The offset of the hit counter from the index's base.
pub const HITS_OFFSET: i8 = -8;

/// Objects and their index: memory handed out in 64-bit words, never freed, and one index
/// word per 8 bytes of it, at `index().base + (a & index().mask)` for address `a`, which
/// holds `a` exactly when `a` is an object handed out (the compiled code's check). The
/// two words before the index are the runtime's header: the miss handler's address
/// ([`super::fast_path::MISS_HANDLER_OFFSET`]) and the hit counter
/// ([`super::fast_path::HITS_OFFSET`]).
/// Shared between threads: allocation takes a lock, words are read and written atomically.
pub struct ObjectArena {
    /// The start of the header and index's mapping.
    map: *mut u8,
    /// That mapping's length.
    len: usize,
    /// The start of the objects' mapping (`1 << bits` bytes).
    objects: *mut u8,
    /// log2 of the index's (and the arena's) size.
    bits: u32,
    /// Bytes of the arena handed out (written under `alloc`'s lock).
    used: AtomicUsize,
    /// Taken by `alloc`.
    alloc: Mutex<()>,
}

// SAFETY: the mapping is owned by the arena and lives as long as it; every access to its
// words goes through atomics (`word`, `hits`) or happens under `used`'s lock to memory no
// other thread can reach yet (`alloc`).
unsafe impl Send for ObjectArena {}
// SAFETY: as above.
unsafe impl Sync for ObjectArena {}

impl ObjectArena {
    /// Maps an arena of `1 << bits` bytes (3 to 31 bits), its index and header, and
    /// writes the runtime's miss handler's address into the header.
    ///
    /// # Errors
    ///
    /// A size out of range, or the mapping failed.
    pub fn new(bits: u32) -> Result<Self, String> {
        Self::with_miss_handler(bits, super::x86_64::ic_miss_address() as u64)
    }

    /// [`ObjectArena::new`], its index placed wherever the kernel puts it (never in the
    /// low 2 GiB, which has room for a few): for an arena no compiled code reads.
    pub(super) fn anywhere(bits: u32) -> Result<Self, String> {
        Self::placed(bits, super::x86_64::ic_miss_address() as u64, false)
    }

    /// [`ObjectArena::new`] with `miss` in the header's miss handler word.
    pub(super) fn with_miss_handler(bits: u32, miss: u64) -> Result<Self, String> {
        Self::placed(bits, miss, true)
    }

    /// [`ObjectArena::with_miss_handler`], its index below 2 GiB if `low` and there is
    /// room.
    fn placed(bits: u32, miss: u64, low: bool) -> Result<Self, String> {
        if !(3..=31).contains(&bits) {
            return Err(format!("an object arena of 2^{bits} bytes"));
        }
        let size = 1usize << bits;
        let len = HEADER + size;
        let near = if low { map_low(len) } else { None };
        let map = near.or_else(|| map_anywhere(len)).ok_or_else(|| {
            format!(
                "cannot map the object index ({len} bytes): {}",
                std::io::Error::last_os_error()
            )
        })?;
        let Some(objects) = map_anywhere(size) else {
            let error = std::io::Error::last_os_error();
            // SAFETY: the mapping just made, used by nothing yet.
            unsafe { libc::munmap(map.cast(), len) };
            return Err(format!(
                "cannot map the object arena ({size} bytes): {error}"
            ));
        };
        let arena = ObjectArena {
            map,
            len,
            objects,
            bits,
            used: AtomicUsize::new(0),
            alloc: Mutex::new(()),
        };
        // SAFETY: both words lie in the header page of the mapping just made, aligned.
        unsafe {
            arena.header_word(MISS_HANDLER_OFFSET).write(miss);
        }
        // SAFETY: index word 0, in the mapping, aligned.
        unsafe { arena.index_word(0).write(u64::MAX) };
        Ok(arena)
    }

    /// Where compiled code finds this arena's index and header.
    #[must_use]
    pub fn index(&self) -> super::fast_path::ObjectIndex {
        super::fast_path::ObjectIndex {
            base: self.index_base(),
            mask: self.mask(),
        }
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

    /// The hit counter the fast paths and stubs increment (with a plain, not a locked,
    /// increment: hits on several threads at once may be lost).
    #[must_use]
    pub fn hits(&self) -> &AtomicU64 {
        // SAFETY: the counter is an aligned word of the header page, mapped while `self`
        // lives.
        unsafe { AtomicU64::from_ptr(self.header_word(HITS_OFFSET)) }
    }

    /// The start of the objects' memory.
    fn start(&self) -> u64 {
        self.objects as u64
    }

    /// The word at `address`, if it lies in an object handed out (aligned).
    #[must_use]
    pub fn word(&self, address: u64) -> Option<&AtomicU64> {
        let used = self.used.load(Ordering::Acquire) as u64;
        let offset = address.checked_sub(self.start())?;
        if offset % 8 != 0 || offset >= used {
            return None;
        }
        // SAFETY: an aligned word of the arena's used part, mapped read-write while `self`
        // lives; every access to it is atomic.
        Some(unsafe { AtomicU64::from_ptr(address as *mut u64) })
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
    ///
    /// # Errors
    ///
    /// The arena is full, or `words` is empty.
    pub fn alloc(&self, words: &[u64]) -> Result<u64, String> {
        let _lock = self
            .alloc
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let used = self.used.load(Ordering::Relaxed);
        let bytes = words.len().checked_mul(8).filter(|b| *b > 0);
        let end = bytes.and_then(|b| used.checked_add(b));
        let Some(end) = end.filter(|e| *e <= 1usize << self.bits) else {
            return Err(format!(
                "the object arena is full ({} of {} bytes used; an object of {} words does \
                 not fit)",
                used,
                1usize << self.bits,
                words.len()
            ));
        };
        let start: *mut u64 = self.objects.wrapping_add(used).cast();
        let address = start as u64;
        // SAFETY: `address..address + 8 * words.len()` lies in the arena (checked above),
        // mapped read-write while `self` lives, aligned, and handed out to no object yet
        // (the lock is held), so no other thread reads it.
        unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), start, words.len()) };
        // The index word last: a thread that finds the object in the index (x86-64 keeps
        // stores in order) finds its words written.
        // SAFETY: the index word of an address in the arena, in the mapping, aligned.
        unsafe { AtomicU64::from_ptr(self.index_word(address)) }.store(address, Ordering::Release);
        self.used.store(end, Ordering::Release);
        Ok(address)
    }

    /// Whether the index says `address` is an object: what the fast paths check.
    #[must_use]
    pub fn indexed(&self, address: u64) -> bool {
        // SAFETY: every index word is mapped, aligned and readable while `self` lives.
        unsafe { AtomicU64::from_ptr(self.index_word(address)) }.load(Ordering::Acquire) == address
    }
}

/// `len` bytes of fresh read-write memory (reserved, not committed) wherever the kernel
/// puts them.
fn map_anywhere(len: usize) -> Option<*mut u8> {
    map_at(std::ptr::null_mut(), len, 0)
}

/// `len` bytes of fresh read-write memory ending below 2 GiB, if there is room: where
/// `MAP_32BIT` puts them, else at the first 16 MiB step that is free.
fn map_low(len: usize) -> Option<*mut u8> {
    const LIMIT: usize = 1 << 31;
    let low = |p: *mut u8| {
        (p as usize)
            .checked_add(len)
            .is_some_and(|end| end <= LIMIT)
    };
    if let Some(p) = map_at(std::ptr::null_mut(), len, libc::MAP_32BIT) {
        if low(p) {
            return Some(p);
        }
        // SAFETY: the mapping just made, used by nothing.
        unsafe { libc::munmap(p.cast(), len) };
    }
    let step = 1usize << 24;
    (1..)
        .map(|k| k * step)
        .take_while(|hint| hint + len <= LIMIT)
        .find_map(|hint| {
            let p = map_at(hint as *mut u8, len, libc::MAP_FIXED_NOREPLACE)?;
            if p as usize == hint {
                return Some(p);
            }
            // A kernel without MAP_FIXED_NOREPLACE took the address as a hint only.
            // SAFETY: the mapping just made, used by nothing.
            unsafe { libc::munmap(p.cast(), len) };
            None
        })
}

/// `mmap` of `len` bytes of private anonymous read-write memory, not committed, at `hint`
/// with `flags` added.
fn map_at(hint: *mut u8, len: usize, flags: libc::c_int) -> Option<*mut u8> {
    // SAFETY: a fresh private anonymous mapping; `MAP_FIXED_NOREPLACE` (the one fixed
    // placement used) fails rather than replace an existing mapping, so no memory of this
    // process is affected.
    let map = unsafe {
        libc::mmap(
            hint.cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | flags,
            -1,
            0,
        )
    };
    (map != libc::MAP_FAILED).then_some(map.cast())
}

impl Drop for ObjectArena {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made; the runtime that owns `self` is going, with the
        // code that could read it.
        unsafe { libc::munmap(self.map.cast(), self.len) };
        // SAFETY: as above.
        unsafe { libc::munmap(self.objects.cast(), 1usize << self.bits) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_finds_objects_and_nothing_else() -> Result<(), String> {
        let arena = ObjectArena::with_miss_handler(12, 0x1234)?;
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
        let last = arena.word(b + 504 * 8).map(|w| w.load(Ordering::Relaxed));
        assert_eq!(last, Some(5));
        assert!(arena.word(b + 505 * 8).is_none() && arena.word(b + 4).is_none());
        // 4096 bytes, 512 words: 3 + 505 leave room for 4.
        assert!(arena.alloc(&[1; 5]).is_err());
        let c = arena.alloc(&[1; 4])?;
        assert!(arena.indexed(c));
        assert!(arena.alloc(&[1]).is_err());
        assert!(arena.alloc(&[]).is_err());
        // SAFETY: the header word is mapped while `arena` lives.
        let miss = unsafe { arena.header_word(MISS_HANDLER_OFFSET).read() };
        assert_eq!(miss, 0x1234);
        assert!(ObjectArena::with_miss_handler(40, 0).is_err());
        Ok(())
    }

    #[test]
    fn indexes_go_below_2_gib_while_there_is_room() -> Result<(), String> {
        // 12 indexes of 256 MiB cannot all fit below 2 GiB: the first go there, the rest
        // anywhere, and all work.
        let arenas: Vec<ObjectArena> = (0..12)
            .map(|_| ObjectArena::with_miss_handler(ARENA_BITS, 0x1234))
            .collect::<Result<_, _>>()?;
        let near = arenas.iter().filter(|a| a.index().near().is_some()).count();
        assert!((1..12).contains(&near), "{near} of 12 near");
        for arena in &arenas {
            let index = arena.index();
            let end = index.base + u64::from(index.mask) + 8;
            assert_eq!(index.near().is_some(), end <= 1 << 31, "{index:?}");
            let object = arena.alloc(&[1, 2, 3])?;
            assert!(arena.indexed(object) && !arena.indexed(object + 8));
            // SAFETY: the header word is mapped while `arena` lives.
            let miss = unsafe { arena.header_word(MISS_HANDLER_OFFSET).read() };
            assert_eq!(miss, 0x1234);
        }
        Ok(())
    }
}
