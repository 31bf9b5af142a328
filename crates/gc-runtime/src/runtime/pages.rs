//! Stress mode's object memory: every object in pages of its own, made inaccessible when
//! it is freed, so that any later access to it faults and is reported.
//!
//! # Layout
//!
//! A *chunk* is a stretch of address space reserved with `mmap(PROT_NONE)` (4 GiB, or more
//! for a larger object; reserving costs no memory). Objects are carved from it in
//! allocation order, each in whole pages of its own (a *region*):
//!
//! ```text
//! region start                                                    region end (page boundary)
//! | unused | header (32 bytes) | fields | raw bytes | padding (< 16) |
//!                              ^ object address (16-byte aligned)
//! ```
//!
//! The object ends at the end of its region (up to 15 bytes of padding keep its address
//! 16-byte aligned), so a read past its end runs into the next region or into reserved,
//! inaccessible memory. A region is made readable and writable when the object is
//! allocated (fresh pages are zero) and, when a collection frees the object, the whole region
//! is made `PROT_NONE` and its pages are given back to the kernel (`madvise(MADV_DONTNEED)`):
//! a freed object keeps its address space and its record, but no resident memory (before,
//! each kept the 4 KiB page it had been written to). Regions are never reused and never
//! unmapped while the runtime lives: any access to a freed object, through whatever
//! pointer, faults. A collection releases what it freed in one batch, adjacent regions
//! together, so a sweep of many objects costs a few system calls, not two per object. The
//! address space is released when the runtime is dropped.
//!
//! A freed object is poisoned (its body filled with
//! [`POISON_BYTE`]) only where it can be read: when the kernel
//! refuses to protect its pages, and when a runtime that lets the run continue
//! (`Mode::Record`) makes them accessible again after a recorded access.
//!
//! # What the signal handler reads
//!
//! Each chunk keeps a table of its regions in memory of its own (also `mmap`ed, sized for
//! one region per page of the chunk, or one for a chunk made for one large object, so it
//! never moves): start, end, object address and
//! shape, and the collection that freed it (0 while live, an atomic). Regions are appended
//! in address order, and the count is published with a release store after the record is
//! written, so the table is always sorted and every record below the count is complete. The
//! chunk is registered in a fixed-size, lock-free table of [`crate::signals`]; the SIGSEGV
//! handler finds the chunk holding the fault address there and the region by binary search,
//! reading only atomics and records that are no longer written. No allocation, no lock.
//!
//! A chunk is unregistered (and the handler waited for) before its memory is unmapped.
//!
//! # Limits
//!
//! Every live object is at least one page of memory, and every boundary between a live and
//! a freed region is a boundary between two kernel mappings (Linux allows 65,530 per
//! process by default). When the kernel refuses to map or protect a region, the object
//! comes from the global allocator instead (as outside stress mode) and is only poisoned
//! when freed, as before: a read of it then returns poison instead of faulting.

use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::heap::{ObjectInfo, HEADER_BYTES, OBJECT_ALIGN, POISON_BYTE};
use crate::signals::{HandlerTable, Readers};

/// Set in a region's `freed_in` for an old copy left by the moving collector.
const MOVED_BIT: u64 = 1 << 63;

/// The address space one chunk reserves unless an object needs more.
const CHUNK_BYTES: usize = 4 << 30;

/// Faults the handler records for a runtime that lets the run continue, between two
/// calls into the runtime; more are not recorded (the accesses still succeed).
const PENDING: usize = 64;

/// What the signal handler does on an access to a freed object of a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Print the fault and exit with status 2.
    Exit = 0,
    /// Print the fault and abort.
    Abort = 1,
    /// Make the object's pages accessible again, record the fault for the runtime to
    /// report at its next call, and let the access proceed (it sees poison).
    Record = 2,
}

/// The process's page size.
fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size)
            .ok()
            .filter(|s| s.is_power_of_two())
            .unwrap_or(4096)
    })
}

/// One object's pages, as the signal handler reads them.
#[repr(C)]
struct Region {
    start: usize,
    end: usize,
    addr: usize,
    serial: u64,
    nptrs: u64,
    nbytes: u64,
    tagged: bool,
    /// The collection that freed the object, 0 while it is live.
    freed_in: AtomicU64,
}

/// The part of a chunk the signal handler reads: written before the chunk is registered,
/// or through atomics.
pub(crate) struct Shared {
    base: usize,
    len: usize,
    regions: *mut Region,
    /// Regions whose records are complete.
    count: AtomicUsize,
    mode: Mode,
    /// Addresses of recorded accesses ([`Mode::Record`]); `pending_count` slots are
    /// claimed, and a slot holds 0 until its address is stored.
    pending: [AtomicUsize; PENDING],
    pending_count: AtomicUsize,
}

// SAFETY: the raw pointer is to memory owned by the chunk, only read through shared
// references (records below `count` are never written again except `freed_in`, an atomic).
unsafe impl Sync for Shared {}
// SAFETY: as above; the chunk's memory is not tied to a thread.
unsafe impl Send for Shared {}

/// A freed object found at a fault address.
pub(crate) struct Hit<'r> {
    /// The object, `freed_in` set.
    pub(crate) object: ObjectInfo,
    chunk: &'r Shared,
    region: &'r Region,
}

impl Hit<'_> {
    /// What the chunk's runtime wants done.
    pub(crate) fn mode(&self) -> Mode {
        self.chunk.mode
    }

    /// For [`Mode::Record`]: records the access at `addr` and makes the object's pages
    /// accessible again, filled with poison (the kernel had taken them back), so that the
    /// faulting instruction can be restarted and reads poison. Returns false if the pages
    /// could not be made accessible (the access would fault again).
    /// Async-signal-safe: atomics, `mprotect` and plain stores.
    pub(crate) fn record_and_unprotect(&self, addr: usize) -> bool {
        let slot = self.chunk.pending_count.fetch_add(1, Ordering::AcqRel);
        if let Some(cell) = self.chunk.pending.get(slot) {
            cell.store(addr, Ordering::Release);
        }
        let len = self.region.end - self.region.start;
        // SAFETY: the region is pages of this chunk's reservation, never unmapped while the
        // chunk is registered (and it is: the caller holds `Readers`).
        if !unsafe { protect(self.region.start, len, libc::PROT_READ | libc::PROT_WRITE) } {
            return false;
        }
        // SAFETY: the object's body and padding, in the region just made writable.
        unsafe { poison(self.region.addr, self.region.end) };
        true
    }
}

/// Finds the freed object whose region holds `addr`, in any registered chunk.
pub(crate) fn find_freed<'r>(readers: &'r Readers, addr: usize) -> Option<Hit<'r>> {
    CHUNKS.find(readers, |chunk| {
        if addr < chunk.base || addr - chunk.base >= chunk.len {
            return None;
        }
        let count = chunk.count.load(Ordering::Acquire);
        // SAFETY: the table holds `count` complete records (published by the release store
        // in `Pages::alloc`) in memory that lives as long as the registered chunk.
        let regions = unsafe { std::slice::from_raw_parts(chunk.regions, count) };
        let i = regions
            .partition_point(|r| r.start <= addr)
            .checked_sub(1)?;
        let region = &regions[i];
        if addr >= region.end {
            return None;
        }
        let freed_in = region.freed_in.load(Ordering::Acquire);
        (freed_in != 0).then_some(Hit {
            object: ObjectInfo {
                addr: region.addr,
                serial: region.serial,
                nptrs: region.nptrs as usize,
                nbytes: region.nbytes as usize,
                tagged: region.tagged,
                freed_in: Some(freed_in & !MOVED_BIT),
                moved: freed_in & MOVED_BIT != 0,
            },
            chunk,
            region,
        })
    })
}

/// The chunks of every stress-mode runtime in the process.
static CHUNKS: HandlerTable<Shared> = HandlerTable::new();

/// One reservation.
struct Chunk {
    shared: Box<Shared>,
    /// Bytes handed out from `base`.
    used: usize,
    /// Bytes of the region table's mapping.
    table_len: usize,
    /// Regions the table has room for.
    capacity: usize,
    /// The chunk's slot in [`CHUNKS`].
    slot: usize,
}

impl Chunk {
    /// Reserves at least `need` bytes of address space, and a region table for it.
    fn reserve(need: usize, mode: Mode) -> Option<Chunk> {
        let page = page_size();
        let len = need.max(CHUNK_BYTES).checked_next_multiple_of(page)?;
        // A chunk larger than the default was made for one object.
        let capacity = if len > CHUNK_BYTES { 1 } else { len / page };
        let table_len = capacity
            .checked_mul(std::mem::size_of::<Region>())?
            .checked_next_multiple_of(page)?;
        let base = map(len, libc::PROT_NONE)?;
        let Some(regions) = map(table_len, libc::PROT_READ | libc::PROT_WRITE) else {
            // SAFETY: mapped just above, unused.
            unsafe { unmap(base, len) };
            return None;
        };
        let shared = Box::new(Shared {
            base,
            len,
            regions: regions as *mut Region,
            count: AtomicUsize::new(0),
            mode,
            pending: [const { AtomicUsize::new(0) }; PENDING],
            pending_count: AtomicUsize::new(0),
        });
        // SAFETY: `shared` is boxed and kept by the chunk, whose `Drop` removes the slot
        // before freeing it; what handlers read of it is atomics or fixed at creation.
        let slot = unsafe { CHUNKS.push(&*shared) };
        Some(Chunk {
            shared,
            used: 0,
            table_len,
            capacity,
            slot,
        })
    }

    /// The region table: the records written so far.
    fn regions(&self) -> &[Region] {
        let count = self.shared.count.load(Ordering::Acquire);
        // SAFETY: `count` complete records, in memory this chunk owns.
        unsafe { std::slice::from_raw_parts(self.shared.regions, count) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // Waits for any handler still reading the chunk.
        CHUNKS.remove(self.slot);
        // SAFETY: both mappings were made by `reserve`, are no longer reachable from the
        // handler's table, and are released once.
        unsafe {
            unmap(self.shared.base, self.shared.len);
        }
        // SAFETY: as above.
        unsafe { unmap(self.shared.regions as usize, self.table_len) };
    }
}

/// Stress mode's page allocator: the chunks of one heap.
pub(crate) struct Pages {
    chunks: Vec<Chunk>,
    mode: Mode,
    /// Regions freed since the last [`Pages::release`]: `(start, end, object address)`.
    freed: Vec<(usize, usize, usize)>,
}

impl Pages {
    pub(crate) fn new(mode: Mode) -> Pages {
        Pages {
            chunks: Vec::new(),
            mode,
            freed: Vec::new(),
        }
    }

    /// A zeroed block for an object whose body takes `span` bytes (a multiple of 8), header
    /// included, with the object (`block + 32`) 16-byte aligned and ending at most 15 bytes
    /// before a page boundary. `None` when the kernel refuses the memory (the caller then
    /// uses the global allocator).
    pub(crate) fn alloc(&mut self, span: usize, shape: (u64, u64, u64, bool)) -> Option<usize> {
        let page = page_size();
        let body = span.checked_next_multiple_of(OBJECT_ALIGN)?;
        let need = (HEADER_BYTES + body).checked_next_multiple_of(page)?;
        let fits = |c: &Chunk| {
            c.shared.len - c.used >= need && c.shared.count.load(Ordering::Relaxed) < c.capacity
        };
        if !self.chunks.last().is_some_and(fits) {
            self.chunks.push(Chunk::reserve(need, self.mode)?);
        }
        let chunk = self.chunks.last_mut()?;
        let start = chunk.shared.base + chunk.used;
        // SAFETY: pages of this chunk's reservation, not yet handed out.
        if !unsafe { protect(start, need, libc::PROT_READ | libc::PROT_WRITE) } {
            return None;
        }
        chunk.used += need;
        let end = start + need;
        let addr = end - body;
        let index = chunk.shared.count.load(Ordering::Relaxed);
        let (serial, nptrs, nbytes, tagged) = shape;
        // SAFETY: `index < capacity` (checked by `fits` for the chunk in use, and 0 for a new
        // one), the table's size.
        let slot = unsafe { chunk.shared.regions.add(index) };
        let region = Region {
            start,
            end,
            addr,
            serial,
            nptrs,
            nbytes,
            tagged,
            freed_in: AtomicU64::new(0),
        };
        // SAFETY: a slot of the table, not yet published, so nothing else reads it.
        unsafe { slot.write(region) };
        chunk.shared.count.store(index + 1, Ordering::Release);
        Some(addr - HEADER_BYTES)
    }

    /// Frees the object at `addr` (allocated by [`Pages::alloc`]): records `collection` for
    /// the handler, and queues its region for [`Pages::release`], which must run before
    /// the program does again. Returns false if `addr` is not one of ours.
    pub(crate) fn free(&mut self, addr: usize, collection: u64) -> bool {
        self.free_as(addr, collection.max(1) & !MOVED_BIT)
    }

    /// [`Pages::free`] for the old copy of an object the moving collector copied.
    pub(crate) fn free_moved(&mut self, addr: usize, collection: u64) -> bool {
        self.free_as(addr, collection.max(1) | MOVED_BIT)
    }

    fn free_as(&mut self, addr: usize, freed_in: u64) -> bool {
        let Some(region) = self.region(addr) else {
            return false;
        };
        region.freed_in.store(freed_in, Ordering::Release);
        let entry = (region.start, region.end, region.addr);
        self.freed.push(entry);
        true
    }

    /// Makes the regions freed since the last call inaccessible and gives their pages back
    /// to the kernel, adjacent regions in one call. Where the kernel refuses to protect
    /// them (too many mappings), the objects stay readable and are poisoned instead.
    pub(crate) fn release(&mut self) {
        let mut freed = std::mem::take(&mut self.freed);
        freed.sort_unstable();
        let mut i = 0;
        while i < freed.len() {
            let (start, mut end, _) = freed[i];
            let mut j = i + 1;
            while let Some(&(_, next_end, _)) = freed.get(j).filter(|r| r.0 == end) {
                end = next_end;
                j += 1;
            }
            // Inaccessible first, then given back: a thread in a safe region may be running
            // foreign code that reads a freed object (a contract it breaks), and given back
            // first, the pages would read as zeros until protected (a wrong answer, not a
            // fault: a list read there ended early).
            // SAFETY: whole freed regions of our chunks; nothing in the runtime reads a freed
            // object's memory again.
            let protected = unsafe { protect(start, end - start, libc::PROT_NONE) };
            if protected {
                // SAFETY: as above. (A refusal leaves the pages resident, nothing else.)
                unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
                };
            } else {
                for &(_, region_end, addr) in &freed[i..j] {
                    // SAFETY: an object's body and padding, in its region, still writable.
                    unsafe { poison(addr, region_end) };
                }
            }
            i = j;
        }
        // Keep the allocation for the next collection.
        freed.clear();
        self.freed = freed;
    }

    /// The region of the object at `addr`.
    fn region(&self, addr: usize) -> Option<&Region> {
        let chunk = self
            .chunks
            .iter()
            .find(|c| addr >= c.shared.base && addr - c.shared.base < c.used)?;
        let regions = chunk.regions();
        let i = regions.partition_point(|r| r.addr < addr);
        regions.get(i).filter(|r| r.addr == addr)
    }

    /// The address of the object whose region holds `addr`.
    pub(crate) fn object_at(&self, addr: usize) -> Option<usize> {
        let chunk = self
            .chunks
            .iter()
            .find(|c| addr >= c.shared.base && addr - c.shared.base < c.used)?;
        let regions = chunk.regions();
        let i = regions
            .partition_point(|r| r.start <= addr)
            .checked_sub(1)?;
        regions.get(i).filter(|r| addr < r.end).map(|r| r.addr)
    }

    /// Takes the addresses of the accesses the handler recorded since the last call.
    pub(crate) fn take_pending(&mut self) -> Vec<usize> {
        let mut out = Vec::new();
        for chunk in &self.chunks {
            let shared = &chunk.shared;
            let claimed = shared.pending_count.load(Ordering::Acquire);
            if claimed == 0 {
                continue;
            }
            for cell in shared.pending.iter().take(claimed) {
                // A handler runs on the faulting thread, which is this one for our own
                // objects; a slot still 0 was claimed by another thread's handler that has
                // not stored yet, and is skipped.
                let addr = cell.swap(0, Ordering::AcqRel);
                if addr != 0 {
                    out.push(addr);
                }
            }
            shared.pending_count.store(0, Ordering::Release);
        }
        out
    }
}

/// Fills `[from, to)` with [`POISON_BYTE`]. Async-signal-safe (plain stores).
///
/// # Safety
/// The range must be writable memory of a freed object that nothing else uses.
unsafe fn poison(from: usize, to: usize) {
    // SAFETY: the caller's promise.
    unsafe { ptr::write_bytes(from as *mut u8, POISON_BYTE, to.saturating_sub(from)) };
}

/// Maps `len` fresh bytes of anonymous memory with `prot`, reserving no swap.
fn map(len: usize, prot: libc::c_int) -> Option<usize> {
    // SAFETY: a fresh anonymous private mapping at an address of the kernel's choosing;
    // no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

/// Unmaps `len` bytes at `addr`.
///
/// # Safety
/// The range must be a mapping made by [`map`] that nothing uses any more.
unsafe fn unmap(addr: usize, len: usize) {
    // SAFETY: the caller's promise. A failure (impossible for a whole mapping of ours)
    // leaks it.
    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
}

/// Sets the protection of `len` bytes at `addr` (page-aligned); false if the kernel refuses.
/// Async-signal-safe.
///
/// # Safety
/// The range must lie in a mapping made by [`map`] whose contents nothing relies on being
/// accessible (or inaccessible) otherwise.
unsafe fn protect(addr: usize, len: usize, prot: libc::c_int) -> bool {
    // SAFETY: the caller's promise.
    unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) == 0 }
}
