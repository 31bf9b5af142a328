//! The allocator: objects with tracked pointer fields and raw bytes.
//!
//! Each object is one block from the global allocator, 16-byte aligned:
//!
//! ```text
//! block + 0    ObjectHeader (32 bytes: magic, state, serial, nptrs, nbytes)
//! block + 32   field 0 .. field nptrs-1   (8-byte tracked pointers, null at allocation)
//!              nbytes raw bytes           (zero at allocation)
//!              padding to a multiple of 8, and at least 8 bytes of body in all
//! ```
//!
//! The object's address, the tracked pointer compiled code holds, is `block + 32`: its first
//! field.
//!
//! A *tagged* object (Julia's allocation: `julia.gc_alloc_bytes(ptls, size, tag)`) is
//! `size` bytes whose layout only the program knows, with a type tag in the word before it:
//!
//! ```text
//! block + 0    magic, state, serial, TAGGED_NPTRS (24 bytes)
//! block + 24   the type tag word (compiled code may store it; never checked or traced)
//! block + 32   size bytes, zero at allocation, scanned word by word
//! ```
//!
//! The collector finds its references by scanning every aligned word of its body and
//! marking the words that are the address of a live object; other words are left alone, so
//! a tagged object's data is never a fault (see [`super::collector`]). The registry (an ordered map from object address to a record, one for live objects
//! and one for freed ones) is what the collector believes; the header is a copy that lets
//! the collector notice when compiled code wrote over it.
//!
//! In normal mode a sweep returns freed blocks to the global allocator and forgets them.
//!
//! In stress mode each block is instead pages of its own ([`super::pages`]), with the
//! object ending at the end of its last page. A sweep marks the freed object's header freed,
//! fills its body with [`POISON_BYTE`] and makes its pages inaccessible; the block is never
//! reused and never released until the runtime is dropped. So a later reference to it found
//! by a collection is recognised as a dangling reference to a known object, and any access
//! to its memory, through whatever pointer (one hidden in a global or a raw buffer, say),
//! faults and is reported as one ([`GcFault::FreedAccess`](super::GcFault::FreedAccess)).
//! When the kernel refuses the pages (see [`super::pages`] for the limits), the block comes
//! from the global allocator and a freed object is only poisoned, as it used to be.

use std::alloc::{self, Layout};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;

use super::fault::AllocProblem;
use super::pages::{Mode, Pages};

/// The size of the object header in bytes.
pub const HEADER_BYTES: usize = 32;
/// The alignment of every object address.
pub const OBJECT_ALIGN: usize = 16;
/// The largest body (`8 * nptrs + nbytes`) an object may have.
pub const MAX_OBJECT_BYTES: usize = 1 << 40;
/// The byte stress mode writes over the body of every freed object.
pub const POISON_BYTE: u8 = 0xDE;
/// A word of [`POISON_BYTE`]s, what a read from a freed object returns in stress mode.
pub const POISON_WORD: u64 = u64::from_ne_bytes([POISON_BYTE; 8]);
/// The first word of every header (`"LGC0"` in little-endian byte order).
pub const HEADER_MAGIC: u32 = u32::from_le_bytes(*b"LGC0");
/// [`ObjectHeader::state`] of a live object.
pub const STATE_LIVE: u32 = 1;
/// [`ObjectHeader::state`] of a freed object (stress mode keeps them).
pub const STATE_FREED: u32 = 2;
/// [`ObjectHeader::nptrs`] of a tagged object, whose [`ObjectHeader::nbytes`] word is its
/// type tag.
pub const TAGGED_NPTRS: u64 = u64::MAX;

/// The header before each object, at `object - 32`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectHeader {
    /// [`HEADER_MAGIC`].
    pub magic: u32,
    /// [`STATE_LIVE`] or [`STATE_FREED`].
    pub state: u32,
    /// The allocation number (1 for the runtime's first object).
    pub serial: u64,
    /// The number of tracked pointer fields ([`TAGGED_NPTRS`] for a tagged object).
    pub nptrs: u64,
    /// The number of raw bytes after the pointer fields; a tagged object's type tag.
    pub nbytes: u64,
}

const _: () = assert!(std::mem::size_of::<ObjectHeader>() == HEADER_BYTES);

/// What the registry knows about an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The object's address (its first field).
    pub addr: usize,
    /// The allocation number (1 for the runtime's first object).
    pub serial: u64,
    /// The number of tracked pointer fields.
    pub nptrs: usize,
    /// The number of raw bytes after the pointer fields (all of a tagged object's body).
    pub nbytes: usize,
    /// A tagged object: its body is scanned word by word, its fields are the program's.
    pub tagged: bool,
    /// The collection that freed it, if it is freed.
    pub freed_in: Option<u64>,
    /// Freed because the moving collector copied it elsewhere in collection `freed_in`
    /// (its old copy): a pointer to it was not updated.
    pub moved: bool,
}

impl ObjectInfo {
    /// The body size in bytes: `8 * nptrs + nbytes`.
    pub fn size(&self) -> usize {
        self.nptrs * 8 + self.nbytes
    }
}

impl fmt::Display for ObjectInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tagged {
            let s = if self.nbytes == 1 { "" } else { "s" };
            return write!(
                f,
                "object #{}: {} byte{s}, tagged",
                self.serial, self.nbytes
            );
        }
        write!(
            f,
            "object #{}: {} pointer field{}, {} raw byte{}",
            self.serial,
            self.nptrs,
            if self.nptrs == 1 { "" } else { "s" },
            self.nbytes,
            if self.nbytes == 1 { "" } else { "s" },
        )
    }
}

/// What an address is, as far as the heap knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The address of a live object.
    Live(ObjectInfo),
    /// The address of a freed object (only in stress mode, which keeps freed objects).
    Freed(ObjectInfo),
    /// An address inside an object's block but not its address: `offset` bytes from the
    /// object's address, negative inside the header. The object may be live or freed
    /// (`object.freed_in`).
    Inside {
        /// The object.
        object: ObjectInfo,
        /// `address - object.addr`.
        offset: isize,
    },
    /// Not inside any object the heap knows.
    Nothing,
}

#[derive(Clone, Copy, Debug)]
struct Record {
    serial: u64,
    nptrs: usize,
    nbytes: usize,
    tagged: bool,
    freed_in: Option<u64>,
    marked: bool,
    /// In stress mode's pages rather than from the global allocator.
    paged: bool,
    /// `gc_preserve` and `jl_roots` pins held (statepoint roots): a root that never moves.
    pins: u32,
    /// Its address escaped as a plain pointer: it never moves again.
    immovable: bool,
    /// An old copy left by the moving collector.
    moved: bool,
}

impl Record {
    fn body(&self) -> usize {
        self.nptrs * 8 + self.nbytes
    }

    /// The body rounded up to a multiple of 8, at least 8: the bytes after the header.
    fn span(&self) -> usize {
        span(self.body())
    }

    fn layout(&self) -> Layout {
        // The same size and alignment were accepted by `Layout::from_size_align` in
        // `Heap::alloc`.
        layout(self.body()).unwrap_or(Layout::new::<ObjectHeader>())
    }

    fn info(&self, addr: usize) -> ObjectInfo {
        ObjectInfo {
            addr,
            serial: self.serial,
            nptrs: self.nptrs,
            nbytes: self.nbytes,
            tagged: self.tagged,
            freed_in: self.freed_in,
            moved: self.moved,
        }
    }

    fn header(&self) -> ObjectHeader {
        ObjectHeader {
            magic: HEADER_MAGIC,
            state: if self.freed_in.is_some() {
                STATE_FREED
            } else {
                STATE_LIVE
            },
            serial: self.serial,
            nptrs: if self.tagged {
                TAGGED_NPTRS
            } else {
                self.nptrs as u64
            },
            nbytes: self.nbytes as u64,
        }
    }

    /// Whether `header`, read from the block, is still the one the registry wrote: all of
    /// it, but for a tagged object's type tag, which belongs to the program.
    fn header_intact(&self, header: &ObjectHeader) -> bool {
        let mine = self.header();
        if self.tagged {
            ObjectHeader {
                nbytes: header.nbytes,
                ..mine
            } == *header
        } else {
            mine == *header
        }
    }
}

/// What the collector scans in a marked object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// The first `n` words, tracked pointer fields: each must be null or a live object.
    Fields(usize),
    /// The first `n` words of a tagged object: those that are a live object's address.
    Words(usize),
}

fn span(body: usize) -> usize {
    body.div_ceil(8).max(1) * 8
}

fn layout(body: usize) -> Option<Layout> {
    Layout::from_size_align(HEADER_BYTES + span(body), OBJECT_ALIGN).ok()
}

/// What tracing one pointer found.
pub(crate) enum Trace {
    /// A live object, marked now for the first time, and what to scan in it.
    Marked(Scan),
    /// A live object already marked in this collection.
    AlreadyMarked,
    /// A live object whose header no longer matches the registry.
    CorruptHeader(ObjectInfo),
    /// Not the address of a live object.
    Bad(Lookup),
}

/// The heap: the registry of objects and the counters.
pub(crate) struct Heap {
    live: BTreeMap<usize, Record>,
    freed: BTreeMap<usize, Record>,
    stress: bool,
    /// Stress mode's page allocator.
    pages: Option<Pages>,
    /// Outside stress mode, the old copies [`Heap::relocate`] left in this collection (block
    /// and layout), given back to the allocator by [`Heap::release_pages`].
    old_copies: Vec<(usize, Layout)>,
    next_serial: u64,
    pub(crate) objects_allocated: u64,
    pub(crate) objects_freed: u64,
    pub(crate) bytes_allocated: u64,
    pub(crate) bytes_freed: u64,
}

impl Heap {
    /// A heap; in stress mode, `mode` says what the signal handler does on an access to a
    /// freed object.
    pub(crate) fn new(stress: bool, mode: Mode) -> Heap {
        Heap {
            live: BTreeMap::new(),
            freed: BTreeMap::new(),
            stress,
            pages: stress.then(|| Pages::new(mode)),
            old_copies: Vec::new(),
            next_serial: 1,
            objects_allocated: 0,
            objects_freed: 0,
            bytes_allocated: 0,
            bytes_freed: 0,
        }
    }

    /// Allocates an object with `nptrs` null pointer fields and `nbytes` zero bytes and
    /// returns its address.
    pub(crate) fn alloc(&mut self, nptrs: usize, nbytes: usize) -> Result<usize, AllocProblem> {
        self.alloc_record(nptrs, nbytes, None)
    }

    /// Allocates a tagged object of `size` zero bytes with type tag `tag` and returns its
    /// address.
    pub(crate) fn alloc_tagged(&mut self, size: usize, tag: u64) -> Result<usize, AllocProblem> {
        self.alloc_record(0, size, Some(tag))
    }

    fn alloc_record(
        &mut self,
        nptrs: usize,
        nbytes: usize,
        tag: Option<u64>,
    ) -> Result<usize, AllocProblem> {
        let body = nptrs
            .checked_mul(8)
            .and_then(|p| p.checked_add(nbytes))
            .filter(|&b| b <= MAX_OBJECT_BYTES)
            .ok_or(AllocProblem::TooLarge)?;
        let layout = layout(body).ok_or(AllocProblem::TooLarge)?;
        let serial = self.next_serial;
        let shape = (serial, nptrs as u64, nbytes as u64, tag.is_some());
        let paged = self
            .pages
            .as_mut()
            .and_then(|pages| pages.alloc(span(body), shape));
        let block = match paged {
            Some(block) => block as *mut u8,
            // SAFETY: the layout has a non-zero size (the header alone is 32 bytes).
            None => unsafe { alloc::alloc_zeroed(layout) },
        };
        if block.is_null() {
            return Err(AllocProblem::OutOfMemory);
        }
        let record = Record {
            serial,
            nptrs,
            nbytes,
            tagged: tag.is_some(),
            freed_in: None,
            marked: false,
            paged: paged.is_some(),
            pins: 0,
            immovable: false,
            moved: false,
        };
        self.next_serial += 1;
        // A tagged object's last header word is its type tag.
        let header = ObjectHeader {
            nbytes: tag.unwrap_or(nbytes as u64),
            ..record.header()
        };
        // SAFETY: the block is at least 32 bytes, 16-byte aligned and ours.
        unsafe { block.cast::<ObjectHeader>().write(header) };
        let addr = block as usize + HEADER_BYTES;
        self.live.insert(addr, record);
        self.objects_allocated += 1;
        self.bytes_allocated += body as u64;
        Ok(addr)
    }

    /// What `addr` is.
    pub(crate) fn lookup(&self, addr: usize) -> Lookup {
        let before = [
            self.live.range(..=addr).next_back(),
            self.freed.range(..=addr).next_back(),
        ];
        if let Some((&start, rec)) = before.into_iter().flatten().max_by_key(|(&a, _)| a) {
            if start == addr {
                let info = rec.info(start);
                return if rec.freed_in.is_some() {
                    Lookup::Freed(info)
                } else {
                    Lookup::Live(info)
                };
            }
            if addr - start < rec.span() {
                return Lookup::Inside {
                    object: rec.info(start),
                    offset: (addr - start) as isize,
                };
            }
        }
        let beyond = (Bound::Excluded(addr), Bound::Unbounded);
        let after = [
            self.live.range(beyond).next(),
            self.freed.range(beyond).next(),
        ];
        if let Some((&start, rec)) = after.into_iter().flatten().min_by_key(|(&a, _)| a) {
            if start - addr <= HEADER_BYTES {
                return Lookup::Inside {
                    object: rec.info(start),
                    offset: -((start - addr) as isize),
                };
            }
        }
        Lookup::Nothing
    }

    /// Marks the live object at `addr`, checking its header the first time.
    pub(crate) fn trace(&mut self, addr: usize) -> Trace {
        match self.live.get_mut(&addr) {
            Some(rec) if rec.marked => Trace::AlreadyMarked,
            Some(rec) => {
                rec.marked = true;
                // SAFETY: `addr` is a live object, so its header is in our block.
                let header = unsafe { ((addr - HEADER_BYTES) as *const ObjectHeader).read() };
                if !rec.header_intact(&header) {
                    Trace::CorruptHeader(rec.info(addr))
                } else if rec.tagged {
                    Trace::Marked(Scan::Words(rec.nbytes / 8))
                } else {
                    Trace::Marked(Scan::Fields(rec.nptrs))
                }
            }
            None => Trace::Bad(self.lookup(addr)),
        }
    }

    /// Whether `addr` is the address of a live object.
    pub(crate) fn is_live(&self, addr: usize) -> bool {
        self.live.contains_key(&addr)
    }

    /// The registry's view of the live object at `addr` (which must be live).
    pub(crate) fn info(&self, addr: usize) -> Option<ObjectInfo> {
        self.live.get(&addr).map(|r| r.info(addr))
    }

    /// Clears every mark (after a collection that found a fault).
    pub(crate) fn clear_marks(&mut self) {
        for rec in self.live.values_mut() {
            rec.marked = false;
        }
    }

    /// Frees every unmarked live object and clears the marks; returns the objects and body
    /// bytes freed.
    pub(crate) fn sweep(&mut self, collection: u64) -> (u64, u64) {
        let mut dead = Vec::new();
        self.live.retain(|&addr, rec| {
            if rec.marked {
                rec.marked = false;
                true
            } else {
                dead.push((addr, *rec));
                false
            }
        });
        let mut bytes = 0u64;
        for (addr, mut rec) in dead.iter().copied() {
            bytes += rec.body() as u64;
            if self.stress {
                rec.freed_in = Some(collection);
                // SAFETY: the block is ours, live until now, so still accessible.
                unsafe { ((addr - HEADER_BYTES) as *mut ObjectHeader).write(rec.header()) };
                // Paged objects become inaccessible, their pages released, at the end of the
                // sweep; the others are poisoned in place.
                let protected = rec.paged
                    && self
                        .pages
                        .as_mut()
                        .is_some_and(|pages| pages.free(addr, collection));
                if !protected {
                    // SAFETY: the block is ours and `span` bytes follow the header.
                    unsafe { std::ptr::write_bytes(addr as *mut u8, POISON_BYTE, rec.span()) };
                }
                self.freed.insert(addr, rec);
            } else {
                // SAFETY: the block was allocated with this layout and is no longer in
                // the registry.
                unsafe { alloc::dealloc((addr - HEADER_BYTES) as *mut u8, rec.layout()) };
            }
        }
        if let Some(pages) = self.pages.as_mut() {
            pages.release();
        }
        let objects = dead.len() as u64;
        self.objects_freed += objects;
        self.bytes_freed += bytes;
        (objects, bytes)
    }

    /// The live object whose body holds `addr` (its address or a place inside its body).
    pub(crate) fn resolve(&self, addr: usize) -> Option<usize> {
        let (&start, rec) = self.live.range(..=addr).next_back()?;
        (addr - start < rec.span().max(1)).then_some(start)
    }

    /// Pins the live object holding `addr` once more; false if there is none.
    pub(crate) fn pin(&mut self, addr: usize) -> bool {
        let Some(start) = self.resolve(addr) else {
            return false;
        };
        self.live.get_mut(&start).is_some_and(|r| {
            r.pins = r.pins.saturating_add(1);
            true
        })
    }

    /// Undoes one [`Heap::pin`] of the live object holding `addr`.
    pub(crate) fn unpin(&mut self, addr: usize) -> bool {
        let Some(start) = self.resolve(addr) else {
            return false;
        };
        self.live.get_mut(&start).is_some_and(|r| {
            r.pins = r.pins.saturating_sub(1);
            true
        })
    }

    /// Makes the live object holding `addr` immovable for the rest of its life.
    pub(crate) fn pin_forever(&mut self, addr: usize) -> bool {
        let Some(start) = self.resolve(addr) else {
            return false;
        };
        self.live.get_mut(&start).is_some_and(|r| {
            r.immovable = true;
            true
        })
    }

    /// The live objects with pins held.
    pub(crate) fn pinned_objects(&self) -> Vec<usize> {
        self.live
            .iter()
            .filter(|(_, r)| r.pins > 0)
            .map(|(&a, _)| a)
            .collect()
    }

    /// Whether the live object at `addr` must never move.
    pub(crate) fn is_immovable(&self, addr: usize) -> bool {
        self.live
            .get(&addr)
            .is_some_and(|r| r.immovable || r.pins > 0 || r.tagged)
    }

    /// Every live object's address.
    pub(crate) fn live_addresses(&self) -> Vec<usize> {
        self.live.keys().copied().collect()
    }

    /// Copies the live object at `addr` to a new block (same serial, header and body) and
    /// frees the old copy. In stress mode it is freed as a sweep frees objects (inaccessible,
    /// or poisoned, and kept), marked moved in `collection`, so a stale pointer to it is
    /// caught. Otherwise the heap forgets it and [`Heap::release_pages`] gives its block back
    /// to the allocator: a long run's memory stays bounded by what is live. Returns the new
    /// address; `None` (nothing changed) when the object is not live or no block can be had.
    pub(crate) fn relocate(&mut self, addr: usize, collection: u64) -> Option<usize> {
        let rec = *self.live.get(&addr)?;
        let shape = (rec.serial, rec.nptrs as u64, rec.nbytes as u64, rec.tagged);
        let paged = self
            .pages
            .as_mut()
            .and_then(|pages| pages.alloc(rec.span(), shape));
        let block = match paged {
            Some(block) => block as *mut u8,
            // SAFETY: the layout has a non-zero size (the header alone is 32 bytes).
            None => unsafe { alloc::alloc_zeroed(rec.layout()) },
        };
        if block.is_null() {
            return None;
        }
        let new = block as usize + HEADER_BYTES;
        // SAFETY: the old block is live (header and `span` bytes after it, accessible); the
        // new one has room for both and does not overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (addr - HEADER_BYTES) as *const u8,
                block,
                HEADER_BYTES + rec.span(),
            )
        };
        self.live.remove(&addr);
        self.live.insert(
            new,
            Record {
                paged: paged.is_some(),
                marked: false,
                ..rec
            },
        );
        if !self.stress {
            // Given back only after every copy of this collection is made, so no new copy
            // takes the block of an old one while the collector maps old to new addresses.
            self.old_copies.push((addr - HEADER_BYTES, rec.layout()));
            return Some(new);
        }
        let old = Record {
            freed_in: Some(collection),
            moved: true,
            marked: false,
            ..rec
        };
        // SAFETY: the old block is ours and still accessible.
        unsafe { ((addr - HEADER_BYTES) as *mut ObjectHeader).write(old.header()) };
        let protected = old.paged
            && self
                .pages
                .as_mut()
                .is_some_and(|pages| pages.free_moved(addr, collection));
        if !protected {
            // SAFETY: the block is ours and `span` bytes follow the header.
            unsafe { std::ptr::write_bytes(addr as *mut u8, POISON_BYTE, old.span()) };
        }
        self.freed.insert(addr, old);
        Some(new)
    }

    /// Makes the old copies [`Heap::relocate`] left inaccessible, in one batch (stress mode),
    /// or gives their blocks back to the allocator.
    pub(crate) fn release_pages(&mut self) {
        if let Some(pages) = self.pages.as_mut() {
            pages.release();
        }
        for (block, layout) in self.old_copies.drain(..) {
            // SAFETY: the block was allocated with this layout (`relocate` took it from the
            // registry, where no other record names it) and is released once, here.
            unsafe { alloc::dealloc(block as *mut u8, layout) };
        }
    }

    /// Objects whose blocks the heap holds: live ones and the freed ones stress mode keeps.
    #[cfg(test)]
    pub(crate) fn blocks_held(&self) -> usize {
        self.live.len() + self.freed.len() + self.old_copies.len()
    }

    /// Rewrites every pointer field of every live untagged object through `moved`.
    pub(crate) fn rewrite_fields(&mut self, moved: &std::collections::HashMap<usize, usize>) {
        for (&addr, rec) in &self.live {
            if rec.tagged {
                continue;
            }
            for field in 0..rec.nptrs {
                // SAFETY: a live object's fields are its first `nptrs` aligned words.
                let slot = unsafe { (addr as *mut usize).add(field) };
                // SAFETY: as above.
                let value = unsafe { slot.read() };
                if let Some(&new) = moved.get(&value) {
                    // SAFETY: as above.
                    unsafe { slot.write(new) };
                }
            }
        }
    }

    /// Takes the accesses to freed objects the signal handler recorded (runtimes that let a
    /// run continue): the address and the object.
    pub(crate) fn take_freed_accesses(&mut self) -> Vec<(usize, ObjectInfo)> {
        let Some(pages) = self.pages.as_mut() else {
            return Vec::new();
        };
        let addrs = pages.take_pending();
        addrs
            .into_iter()
            .filter_map(|addr| {
                let start = pages.object_at(addr)?;
                let rec = self.freed.get(&start)?;
                Some((addr, rec.info(start)))
            })
            .collect()
    }

    /// The number of live objects.
    pub(crate) fn live_objects(&self) -> u64 {
        self.live.len() as u64
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        self.release_pages();
        for (&addr, rec) in self.live.iter().chain(self.freed.iter()) {
            if rec.paged {
                continue; // released with the pages
            }
            // SAFETY: every registered block not in pages was allocated with its record's
            // layout and is released once, here.
            unsafe { alloc::dealloc((addr - HEADER_BYTES) as *mut u8, rec.layout()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Moves every object of a linked list once per collection, as the moving collector
    /// does: `(blocks held, live)` after `rounds` collections.
    fn move_list(stress: bool, rounds: u64) -> (usize, u64) {
        let mut heap = Heap::new(stress, Mode::Record);
        for _ in 0..100 {
            let addr = heap.alloc(1, 8).unwrap_or_else(|e| panic!("{e:?}"));
            assert!(heap.is_live(addr));
        }
        for collection in 1..=rounds {
            let moved: std::collections::HashMap<usize, usize> = heap
                .live_addresses()
                .into_iter()
                .filter_map(|old| Some((old, heap.relocate(old, collection)?)))
                .collect();
            assert_eq!(moved.len(), 100);
            heap.release_pages();
            heap.rewrite_fields(&moved);
        }
        (heap.blocks_held(), heap.live_objects())
    }

    /// Outside stress mode the old copies are given back: 100 objects moved 20 times hold
    /// 100 blocks, not 2,100; stress mode keeps every old copy (a stale pointer faults).
    #[test]
    fn old_copies_are_freed_outside_stress_mode() {
        assert_eq!(move_list(false, 20), (100, 100));
        assert_eq!(move_list(true, 20), (100 * 21, 100));
    }
}
