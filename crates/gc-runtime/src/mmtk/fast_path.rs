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

use super::{layout, set_vo_bit, zero, MmtkHeap, MmtkMutator};
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
/// and `nbytes` zero bytes taking at most `max` bytes: writes its header, zeroes its body
/// and sets its valid-object bit (what `post_alloc` does in ImmixSpace and CopySpace).
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
    let start = bp.cursor.as_usize();
    // Cursor and sizes are multiples of 16 (the binding's minimum alignment): no gap to
    // fill. A cursor of 0 (no buffer yet) has a limit of 0 too.
    let end = start.checked_add(bytes)?;
    if start == 0 || end > bp.limit.as_usize() {
        return None;
    }
    bp.cursor = super::address(end);
    // SAFETY: the buffer's `bytes` bytes at `start` are this object's now.
    let obj = unsafe { layout::write_untagged(start, nptrs, nbytes) };
    // The body only (the header words are written).
    // SAFETY: as above.
    unsafe { zero(obj, end - obj) };
    // SAFETY: the caller's promise: the heap's VO table; a fresh object in the buffer.
    unsafe { set_vo_bit(vo_base, obj) };
    Some((obj, bytes))
}
