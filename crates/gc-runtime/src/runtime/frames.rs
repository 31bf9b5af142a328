//! The per-thread chain of GC frames that lowered code links and unlinks.
//!
//! A GC frame is Julia's `jl_gcframe_t` followed by its roots, an array of 8-byte words in
//! the stack frame of the function that owns it:
//!
//! ```text
//! word 0   nroots << 2          (the low two bits are flags; this ABI requires 0)
//! word 1   prev                 (the chain head's value when the frame was linked)
//! word 2   root 0               (null, or the address of a live object)
//! ...
//! word 1+n root n-1
//! ```
//!
//! The chain head is one word per thread (per installed [`Runtime`](super::Runtime)); its
//! address is what `locus_gc_get_pgcstack` returns. Walking starts at the head and follows
//! `prev` until null. Frames are numbered from the innermost (`#0`, the one the head points
//! to) outwards.
//!
//! The walk never trusts a frame before checking it: the address must be 8-byte aligned, lie
//! inside the thread's stack as recorded when the runtime was entered (on Linux, Android and
//! macOS; elsewhere this check is skipped) and above the stack pointer of the collection
//! (frames belong to functions that are still running, and stacks grow down);
//! the root count must be at most [`MAX_FRAME_ROOTS`] and the roots must end inside the
//! stack; no frame may be walked twice; and the chain may have at most [`MAX_FRAMES`]
//! frames. A failed check is a [`GcFault::CorruptFrame`], not a crash.

use super::fault::{FrameProblem, GcFault};

/// The size of a frame word, a root and a pointer field, in bytes.
pub const WORD_BYTES: usize = 8;
pub use crate::contract::{HEADER_WORDS, ROOT_COUNT_SHIFT};
/// The flag bits of the header word; this ABI requires them to be zero.
pub const ROOT_FLAGS_MASK: usize = 0b11;
/// The largest root count a frame may claim.
pub const MAX_FRAME_ROOTS: usize = 1 << 20;
/// The largest number of frames in one chain.
pub const MAX_FRAMES: usize = 1 << 20;

const _: () = assert!(
    std::mem::size_of::<usize>() == WORD_BYTES,
    "the GC runtime supports 64-bit targets only"
);

/// The header of a GC frame (`jl_gcframe_t`); the roots follow it.
#[repr(C)]
#[derive(Debug)]
pub struct GcFrame {
    /// The root count shifted left by [`ROOT_COUNT_SHIFT`]; the flag bits are zero.
    pub nroots: usize,
    /// The frame that was innermost when this one was linked, or null.
    pub prev: *mut GcFrame,
}

impl GcFrame {
    /// The header word for a frame with `nroots` roots: `nroots << 2`.
    pub const fn header_word(nroots: usize) -> usize {
        nroots << ROOT_COUNT_SHIFT
    }

    /// The byte offset of root `slot` from the frame's address: `16 + 8 * slot`.
    pub const fn root_offset(slot: usize) -> usize {
        (HEADER_WORDS + slot) * WORD_BYTES
    }

    /// The size in bytes of a frame with `nroots` roots, header included.
    pub const fn size(nroots: usize) -> usize {
        Self::root_offset(nroots)
    }
}

/// The address range of a thread's stack (the fault handler's own type: one definition).
pub use locus_signals::StackBounds;

/// One frame of a walked chain: where it is and how many roots it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef {
    /// The frame's number, counted from the innermost frame (0).
    pub index: usize,
    /// The frame's address.
    pub addr: usize,
    /// The root count.
    pub nroots: usize,
}

impl FrameRef {
    /// Reads root `slot`.
    ///
    /// # Safety
    /// The frame must have been checked by [`walk`] and still be linked, and
    /// `slot < self.nroots`.
    pub(crate) unsafe fn root(&self, slot: usize) -> usize {
        let at = (self.addr + GcFrame::root_offset(slot)) as *const usize;
        // SAFETY: the caller guarantees the frame was checked (aligned, inside the stack,
        // roots inside the stack) and is still linked, and that the slot is in range.
        unsafe { at.read_volatile() }
    }
}

/// What a collection scans of one mutator thread.
#[derive(Clone, Debug)]
pub(crate) struct ThreadRoots {
    /// The frame its chain head points to.
    pub(crate) head: *mut GcFrame,
    /// A stack address below every frame it has linked.
    pub(crate) sp: usize,
    /// Its stack, where the platform tells.
    pub(crate) bounds: Option<StackBounds>,
    /// Statepoint roots: the frame address of the `locus_gc_sp_*` entry it is stopped in,
    /// or 0.
    pub(crate) fp: usize,
    /// Statepoint roots: a stack address in the host's frame that called the compiled
    /// code (`Runtime::call_compiled`), or 0.
    pub(crate) entered: usize,
    /// Its registered stack regions (`locus_gc_push_region`).
    pub(crate) regions: Vec<(usize, usize)>,
}

/// Walks the chain of every thread in `threads`, numbering the frames on from one thread
/// to the next (the first thread's innermost frame is #0).
pub(crate) fn walk_threads(
    threads: &[ThreadRoots],
    collection: u64,
) -> Result<Vec<FrameRef>, GcFault> {
    let mut all = Vec::new();
    for t in threads {
        let first = all.len();
        let chain = walk(t.head, t.sp, t.bounds, collection).map_err(|fault| match fault {
            GcFault::CorruptFrame {
                frame,
                addr,
                via,
                problem,
                collection,
            } => GcFault::CorruptFrame {
                frame: frame + first,
                addr,
                via,
                problem,
                collection,
            },
            other => other,
        })?;
        all.extend(chain.into_iter().map(|f| FrameRef {
            index: f.index + first,
            ..f
        }));
    }
    Ok(all)
}

/// Reads the aligned words of the global root regions `globals`: (region start, word
/// number, value) for each non-null word.
///
/// # Safety
/// Each region must be readable memory (the promise of `locus_gc_add_root_region`).
pub(crate) unsafe fn global_roots(globals: &[(usize, usize)]) -> Vec<(usize, usize, usize)> {
    let mut found = Vec::new();
    for &(start, end) in globals {
        let mut at = start.next_multiple_of(WORD_BYTES);
        let mut word = 0;
        while at.checked_add(WORD_BYTES).is_some_and(|e| e <= end) {
            // SAFETY: the caller's promise; `at` is aligned and inside the region.
            let value = unsafe { (at as *const usize).read_volatile() };
            if value != 0 {
                found.push((start, word, value));
            }
            at += WORD_BYTES;
            word += 1;
        }
    }
    found
}

/// The non-null aligned words of `thread`'s registered root regions (stack memory that may
/// hold GC pointers: `locus_gc_push_region`), each a candidate for a conservative root. A
/// region outside the stack, or below the stack pointer (its function returned without
/// dropping it: a `longjmp` past it), is skipped.
pub(crate) fn region_words(thread: &ThreadRoots) -> impl Iterator<Item = usize> + '_ {
    let on_stack = |&&(start, end): &&(usize, usize)| {
        let inside = thread
            .bounds
            .is_some_and(|b| start >= b.low && end <= b.high);
        inside && start >= thread.sp
    };
    thread
        .regions
        .iter()
        .filter(on_stack)
        .flat_map(|&(start, end)| {
            let first = start.next_multiple_of(WORD_BYTES);
            let words = end.saturating_sub(first) / WORD_BYTES;
            (0..words).map(move |i| first + i * WORD_BYTES)
        })
        .map(|at| {
            // SAFETY: an aligned word of stack memory of a running function: inside the
            // thread's stack, above its stack pointer.
            unsafe { (at as *const usize).read_volatile() }
        })
        .filter(|&value| value != 0)
}

/// An approximation of the stack pointer: the address of a local in a function that is not
/// inlined, so it is below every frame of every caller.
#[inline(never)]
pub(crate) fn approx_stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Walks the chain starting at `head`, checking each frame before reading it.
///
/// `sp` is a stack address below every live frame (see [`approx_stack_pointer`]);
/// `bounds` the thread's stack when known; `collection` goes into faults.
pub(crate) fn walk(
    head: *mut GcFrame,
    sp: usize,
    bounds: Option<StackBounds>,
    collection: u64,
) -> Result<Vec<FrameRef>, GcFault> {
    let mut frames: Vec<FrameRef> = Vec::new();
    // Frames are linked from the newest to the oldest, which on a stack that grows down is
    // from lower to higher addresses: while each frame is above the one before, none can
    // repeat, and the walk needs no record of what it has seen (a hash set of every frame
    // made each collection in a deep stack cost a hash per frame). Only a frame at or below
    // the previous one is looked for among those walked.
    let mut highest = 0usize;
    let mut cur = head as usize;
    let mut via = None;
    while cur != 0 {
        let index = frames.len();
        let fault = |problem| GcFault::CorruptFrame {
            frame: index,
            addr: cur,
            via,
            problem,
            collection,
        };
        if index >= MAX_FRAMES {
            return Err(fault(FrameProblem::TooManyFrames));
        }
        if !cur.is_multiple_of(WORD_BYTES) {
            return Err(fault(FrameProblem::Misaligned));
        }
        if let Some(b) = bounds {
            if !b.contains(cur, GcFrame::size(0)) {
                return Err(fault(FrameProblem::OutsideStack {
                    low: b.low,
                    high: b.high,
                }));
            }
        }
        if cur < sp {
            return Err(fault(FrameProblem::BelowStackPointer { sp }));
        }
        if cur <= highest {
            if let Some(first) = frames.iter().position(|f| f.addr == cur) {
                return Err(fault(FrameProblem::Cycle { first }));
            }
        }
        highest = highest.max(cur);
        let words = cur as *const usize;
        // SAFETY: `cur` is aligned, non-null, above the stack pointer and (where the
        // platform reports it) inside this thread's stack, so its two header words are
        // mapped stack memory owned by a function that is still running.
        let word = unsafe { words.read_volatile() };
        // SAFETY: as above; the second header word is in the same frame.
        let prev_word = unsafe { words.add(1) };
        // SAFETY: as above.
        let prev = unsafe { prev_word.read_volatile() };
        if word & ROOT_FLAGS_MASK != 0 {
            return Err(fault(FrameProblem::Flags { word }));
        }
        let nroots = word >> ROOT_COUNT_SHIFT;
        if nroots > MAX_FRAME_ROOTS {
            return Err(fault(FrameProblem::TooManyRoots { nroots }));
        }
        if let Some(b) = bounds {
            if !b.contains(cur, GcFrame::size(nroots)) {
                return Err(fault(FrameProblem::RootsOutsideStack {
                    nroots,
                    high: b.high,
                }));
            }
        }
        frames.push(FrameRef {
            index,
            addr: cur,
            nroots,
        });
        via = Some(cur);
        cur = prev;
    }
    Ok(frames)
}
