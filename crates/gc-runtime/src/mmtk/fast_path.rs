//! What compiled code needs to allocate on MMTk without calling the runtime: the thread's
//! bump pointer, the valid-object bits, the thread's allocation counters and the heap's
//! collection-pending flag, as the addresses the runtime keeps in its task-shaped block
//! (the `TASK_ALLOC_*` words of [`crate::contract`], which also say the steps), and the
//! allocation those words allow ([`MmtkHeap::alloc_from_task`]), the runtime's own first
//! try in `locus_gc_alloc`.
//!
//! This is Julia's MMTk binding's approach: the thread's `BumpPointer` (cursor, limit) is
//! where compiled code can reach it, an allocation that fits bumps the cursor, writes the
//! header and sets the object's valid-object bit, and anything else calls the runtime.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use mmtk::util::alloc::BumpPointer;

use super::{layout, set_vo_bit, MmtkHeap, MmtkMutator};
use crate::contract::{
    INLINE_ALLOC_MAX_BYTES, TASK_ALLOC_BUMP_WORD, TASK_ALLOC_BYTES_WORD, TASK_ALLOC_OBJECTS_WORD,
    TASK_ALLOC_PENDING_WORD, TASK_ALLOC_VO_WORD,
};

/// The values of the task block's allocation words for one mutator (see
/// [`MmtkMutator::fast_alloc_words`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FastAllocWords {
    /// `(word index, value)` for each `TASK_ALLOC_*` word.
    pub(crate) words: [(usize, usize); 5],
}

impl MmtkMutator {
    /// What the task block's `TASK_ALLOC_*` words hold while this mutator's thread runs,
    /// or `None` when its allocations must not take the fast path: a plan without a bump
    /// pointer (MarkSweep), or a default space whose largest object is below
    /// [`INLINE_ALLOC_MAX_BYTES`]. The addresses stay valid as long as the mutator.
    pub(crate) fn fast_alloc_words(&self) -> Option<FastAllocWords> {
        let inst = self.heap.inst;
        if self.bump.is_null() || inst.max_default < INLINE_ALLOC_MAX_BYTES {
            return None;
        }
        let objects: *const AtomicU64 = &self.record.objects;
        let bytes: *const AtomicU64 = &self.record.bytes;
        let pending: *const AtomicBool = &inst.pending;
        Some(FastAllocWords {
            words: [
                (TASK_ALLOC_BUMP_WORD, self.bump as usize),
                (TASK_ALLOC_VO_WORD, inst.vo_base),
                (TASK_ALLOC_OBJECTS_WORD, objects as usize),
                (TASK_ALLOC_BYTES_WORD, bytes as usize),
                (TASK_ALLOC_PENDING_WORD, pending as usize),
            ],
        })
    }
}

impl MmtkHeap {
    /// The allocation fast path as compiled code takes it (the steps are in
    /// [`crate::contract`], at `TASK_ALLOC_BUMP_WORD`): a new object of `nptrs` null pointer
    /// fields and `nbytes` zero bytes in the thread's allocation buffer, or `None` when the
    /// call must take the runtime's slow path (no fast path now, a collection pending, an
    /// object too large or not fitting the buffer). Never collects; counts the object.
    ///
    /// # Safety
    /// `task` must be the task block of the calling thread's runtime, its `TASK_ALLOC_*`
    /// words either a null bump word or the values [`MmtkMutator::fast_alloc_words`] gave
    /// for the calling thread's mutator, which must be alive and not in use by this thread
    /// elsewhere meanwhile (MMTk's workers touch it only while the thread is parked).
    #[inline]
    pub(crate) unsafe fn alloc_from_task(
        task: *const AtomicUsize,
        nptrs: usize,
        nbytes: usize,
    ) -> Option<usize> {
        let word = |w: usize| {
            // SAFETY: the caller's promise: the block has every TASK_ALLOC_* word.
            let at = unsafe { task.add(w) };
            // SAFETY: as above: a live word of the block.
            unsafe { &*at }.load(Ordering::Relaxed)
        };
        let bump = word(TASK_ALLOC_BUMP_WORD) as *mut BumpPointer;
        if bump.is_null() {
            return None;
        }
        // SAFETY: the caller's promise: the heap's pending flag, alive as the heap.
        let pending = unsafe { &*(word(TASK_ALLOC_PENDING_WORD) as *const AtomicBool) };
        if pending.load(Ordering::Relaxed) {
            return None;
        }
        // SAFETY: the caller's promise: this thread's bump pointer, used by nothing else now.
        let bp = unsafe { &mut *bump };
        // SAFETY: as above, and the heap's VO table.
        let (obj, bytes) = unsafe {
            bump_untagged(
                bp,
                word(TASK_ALLOC_VO_WORD),
                nptrs,
                nbytes,
                INLINE_ALLOC_MAX_BYTES,
            )
        }?;
        // Only this thread writes its counters: no read-modify-write.
        // SAFETY: the caller's promise: the mutator's counters, alive as it is.
        let objects = unsafe { &*(word(TASK_ALLOC_OBJECTS_WORD) as *const AtomicU64) };
        objects.store(objects.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        // SAFETY: as above.
        let counted = unsafe { &*(word(TASK_ALLOC_BYTES_WORD) as *const AtomicU64) };
        counted.store(
            counted.load(Ordering::Relaxed) + bytes as u64,
            Ordering::Relaxed,
        );
        Some(obj)
    }
}

/// Bumps the allocation buffer `bp` for an untagged object of `nptrs` null pointer fields
/// and `nbytes` zero bytes taking at most `max` bytes: writes its header and sets its
/// valid-object bit (what `post_alloc` does in ImmixSpace and CopySpace). The body is zero
/// already: a bump pointer's buffer is memory MMTk 0.33.0 zeroed when it handed it out
/// (its plan constructors make every space `zeroed`: a clean block is zeroed when the
/// space acquires it, and `ImmixAllocator::acquire_recyclable_lines` zeroes reused lines;
/// tests/mmtk_zeroed.rs checks every plan), and the part past the cursor has not been
/// handed out since.
/// Returns the object and the bytes it took; `None` when it does not fit (or is larger
/// than `max`): the caller takes the slow path. Counting is the caller's.
///
/// # Safety
/// `bp` must be the calling thread's bump pointer, used by nothing else meanwhile, and
/// `vo_base` the base of the same heap's valid-object bit table.
#[inline]
pub(super) unsafe fn bump_untagged(
    bp: &mut BumpPointer,
    vo_base: usize,
    nptrs: usize,
    nbytes: usize,
    max: usize,
) -> Option<(usize, usize)> {
    let bytes = layout::untagged_size(nptrs, nbytes).filter(|&b| b <= max)?;
    let cursor = bp.cursor.as_usize();
    // The cursor is a multiple of 8: the object starts at 8 past a multiple of 16 (its
    // header word, then a 16-byte aligned body), the 8 bytes skipped, if any, zero. A
    // cursor of 0 (no buffer yet) has a limit of 0 too.
    let start = cursor | layout::UNTAGGED_OFFSET;
    let end = start.checked_add(bytes)?;
    if cursor == 0 || end > bp.limit.as_usize() {
        return None;
    }
    bp.cursor = super::address(end);
    // SAFETY: the buffer's `bytes` bytes at `start` are this object's now.
    let obj = unsafe { layout::write_untagged(start, nptrs, nbytes) };
    // SAFETY: the caller's promise: the heap's VO table; a fresh object in the buffer.
    unsafe { set_vo_bit(vo_base, obj) };
    Some((obj, bytes))
}

#[cfg(test)]
mod tests {
    use crate::mmtk::Plan;
    use crate::runtime::{self, Collector, Config, GcFrame, OnFault, Runtime};

    /// The word at `addr`.
    ///
    /// # Safety
    /// `addr` must be readable and 8-byte aligned.
    unsafe fn peek(addr: usize) -> usize {
        // SAFETY: the caller's promise.
        unsafe { (addr as *const usize).read() }
    }

    /// Writes the word at `addr`.
    ///
    /// # Safety
    /// `addr` must be writable and 8-byte aligned.
    unsafe fn poke(addr: usize, value: usize) {
        // SAFETY: the caller's promise.
        unsafe { (addr as *mut usize).write(value) }
    }

    /// Neither the fast path nor compiled code zeroes a body: what a bump pointer hands out
    /// must be zero already, also where it reuses dead objects' memory (recyclable Immix
    /// lines between survivors, and blocks released and acquired again). Every word of the
    /// dead objects is non-zero here, and every new object's body must read zero.
    #[test]
    fn reused_memory_reads_zero_on_immix() {
        let _one = crate::mmtk::lock(&crate::mmtk::tests::ONE_HEAP_USER);
        let config = Config {
            heap_bytes: Some(8 << 20),
            on_fault: OnFault::Exit,
            collector: Collector::Mmtk(Plan::Immix),
            ..Config::default()
        };
        let rt = Runtime::try_enter(config).unwrap_or_else(|e| panic!("{e}"));
        let head = rt.pgcstack();
        let mut frame = [GcFrame::header_word(1), 0, 0];
        // SAFETY: this thread's chain head slot; unlinked below.
        frame[1] = unsafe { *head } as usize;
        // SAFETY: as above; the frame outlives the link.
        unsafe { *head = frame.as_mut_ptr().cast() };
        let (mut low, mut high) = (usize::MAX, 0);
        // 4 MB of 48-byte objects whose every word is non-zero (pointer fields name the
        // object itself); one in 40 stays alive on a list the frame roots, so that the
        // collection leaves holes in most lines' blocks.
        for i in 0..90_000usize {
            let obj = runtime::locus_gc_alloc(2, 16) as usize;
            (low, high) = (low.min(obj), high.max(obj));
            let keep = i % 40 == 0;
            // SAFETY: a plain local array.
            let list = unsafe { std::ptr::read_volatile(&frame[2]) };
            // SAFETY: the object's two pointer fields and two raw words.
            unsafe {
                poke(obj, if keep { list } else { obj });
            }
            // SAFETY: as above.
            unsafe { poke(obj + 8, obj) };
            // SAFETY: as above.
            unsafe { poke(obj + 16, usize::MAX) };
            // SAFETY: as above.
            unsafe { poke(obj + 24, i | 1) };
            if keep {
                // SAFETY: a plain local array (volatile: the collector reads it).
                unsafe { std::ptr::write_volatile(&mut frame[2], obj) };
            }
        }
        let collections = rt.stats().collections;
        rt.collect().unwrap_or_else(|e| panic!("{e:?}"));
        assert!(rt.stats().collections > collections);
        // Allocate over the same heap again: every body zero, and some objects where dead
        // ones were.
        let mut reused = 0;
        for _ in 0..150_000 {
            let obj = runtime::locus_gc_alloc(2, 16) as usize;
            reused += usize::from((low..=high).contains(&obj));
            for w in 0..4 {
                // SAFETY: a fresh object's body words.
                let word = unsafe { peek(obj + 8 * w) };
                assert_eq!(word, 0, "word {w} of a new object at {obj:#x}");
            }
        }
        assert!(
            reused > 10_000,
            "{reused} objects reused dead objects' memory"
        );
        // SAFETY: as above.
        unsafe { *head = frame[1] as *mut GcFrame };
        assert!(rt.take_faults().is_empty());
    }
}
