//! Mark-sweep collection from the roots in the frame chain, with a stress mode.
//!
//! The roots are exactly the non-null root slots of the frames linked into the chain when
//! the collection starts; nothing else is scanned (no registers, no conservative stack
//! scan). Marking follows the `nptrs` pointer fields of each object with an explicit mark
//! stack, so the depth of a data structure never touches the machine stack. A tagged object
//! (Julia's allocation, whose layout only the program knows) is scanned word by word: a
//! word that is a live object's address is followed like a field, any other word (data, a
//! pointer into an object, a freed object's address) is data and left alone. That is
//! conservative only inside tagged objects: it may keep an object alive that a precise
//! scan would free, never the reverse; and a stale pointer kept there is still caught, in
//! stress mode, when the program uses it (its object's pages are inaccessible).
//!
//! Every pointer traced, root or field, is looked up in the heap's registry before it is
//! dereferenced: null is skipped, a live object's address is marked, an address outside
//! every object the heap knows, every mutator's stack and the first 64 KiB (where nothing
//! is mapped) is a *static object* (spec 003
//! lets code cast a plain pointer to a constant object into the tracked space: Julia's
//! `nothing`, a module's global) and is skipped (never traced, freed or moved), and
//! anything else is a fault: a freed object or a place inside one
//! ([`GcFault::DanglingReference`]), a place inside a live object
//! ([`GcFault::InteriorPointer`]), or an address where no object can be
//! ([`GcFault::NotAnObject`]). A
//! live object whose header was overwritten is a [`GcFault::CorruptHeader`]. Outside stress
//! mode freed objects are forgotten, so a stale pointer to one whose block went back to the
//! allocator passes for a static object: stress mode is what catches those. The first fault ends the collection before the sweep: the
//! marks are cleared and nothing is freed, so a run that continues after a fault has lost
//! nothing that was reachable.
//!
//! [`Pauses`] keeps the stop-the-world pauses of this collector and of the statepoint
//! collector (both run by `Runtime::collect_when`, which stops the mutators): each from
//! when the collecting thread starts stopping the other mutators to when it lets them run
//! again, waiting for every thread to stop included, as the MMTk binding measures its
//! pauses (`stop_all_mutators` to `resume_mutators`).

use std::time::{Duration, Instant};

use super::fault::{GcFault, Referrer};
use super::frames::{self, FrameRef, ThreadRoots};
use super::heap::{Heap, Lookup, Scan, Trace};
use locus_signals::StackBounds;

/// What one collection did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collection {
    /// The collection's number (1 for the runtime's first collection).
    pub number: u64,
    /// Frames walked.
    pub frames: usize,
    /// The largest root count of one frame.
    pub max_roots: usize,
    /// Non-null root slots.
    pub roots: usize,
    /// Objects found reachable.
    pub marked: usize,
    /// Objects freed.
    pub freed_objects: u64,
    /// Body bytes (`8 * nptrs + nbytes`) freed.
    pub freed_bytes: u64,
    /// Objects moved (the moving collector).
    pub moved: u64,
}

/// The stop-the-world pauses of a heap (the runtime's own or MMTk's): every one is
/// counted, the first [`Pauses::KEPT`] are kept for the median.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pauses {
    kept: Vec<u64>,
    count: u64,
    max: u64,
    total: u64,
}

impl Pauses {
    /// Pauses kept for the median: 8 MiB of them.
    pub const KEPT: usize = 1 << 20;

    /// Starts timing a pause: call it when the collecting thread starts stopping the other
    /// mutators, and [`Pauses::end`] once it lets them run.
    pub fn start() -> Instant {
        Instant::now()
    }

    /// Records the pause that began at `started` (from [`Pauses::start`]) and ends now.
    pub fn end(&mut self, started: Instant) {
        self.record(started.elapsed());
    }

    /// Records one pause.
    pub fn record(&mut self, pause: Duration) {
        let nanos = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
        if self.kept.len() < Self::KEPT {
            self.kept.push(nanos);
        }
        self.count += 1;
        self.max = self.max.max(nanos);
        self.total = self.total.saturating_add(nanos);
    }

    /// Pauses recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The median of the kept pauses (the upper one of an even count), nanoseconds; 0 when
    /// none was recorded.
    pub fn median_ns(&self) -> u64 {
        if self.kept.is_empty() {
            return 0;
        }
        let mut sorted = self.kept.clone();
        let mid = sorted.len() / 2;
        *sorted.select_nth_unstable(mid).1
    }

    /// The longest pause, nanoseconds; 0 when none was recorded.
    pub fn max_ns(&self) -> u64 {
        self.max
    }

    /// Every pause together, nanoseconds (saturating).
    pub fn total_ns(&self) -> u64 {
        self.total
    }
}

/// Collects: walks every thread's chain, marks from their roots, their root regions and
/// the global root regions, sweeps.
pub(crate) fn collect(
    heap: &mut Heap,
    threads: &[ThreadRoots],
    globals: &[(usize, usize)],
    number: u64,
) -> Result<Collection, GcFault> {
    let chain = frames::walk_threads(threads, number)?;
    let mut done = Collection {
        number,
        frames: chain.len(),
        ..Collection::default()
    };
    let regions: Vec<usize> = threads.iter().flat_map(frames::region_words).collect();
    let stacks: Vec<StackBounds> = threads.iter().filter_map(|t| t.bounds).collect();
    if let Err(fault) = mark(heap, &stacks, &chain, &regions, globals, &mut done) {
        heap.clear_marks();
        return Err(fault);
    }
    let (objects, bytes) = heap.sweep(number);
    done.freed_objects = objects;
    done.freed_bytes = bytes;
    Ok(done)
}

/// An object on the mark stack: its address, what to scan in it, and the root it was
/// reached from (frame number, slot).
struct Grey {
    addr: usize,
    scan: Scan,
    root: (usize, usize),
}

fn mark(
    heap: &mut Heap,
    stacks: &[StackBounds],
    chain: &[FrameRef],
    regions: &[usize],
    globals: &[(usize, usize)],
    done: &mut Collection,
) -> Result<(), GcFault> {
    let mut stack: Vec<Grey> = Vec::new();
    // The threads' root regions are scanned conservatively: a word that is no live
    // object's address is plain data.
    for &word in regions {
        if heap.is_live(word) {
            done.roots += 1;
            let from = |_: &Heap| Referrer::Pinned { object: word };
            trace(heap, word, (usize::MAX, 0), from, &mut stack, done, stacks)?;
        }
    }
    // SAFETY: the promise of `locus_gc_add_root_region`.
    for (region, word, target) in unsafe { frames::global_roots(globals) } {
        done.roots += 1;
        let from = |_: &Heap| Referrer::Global { region, word };
        trace(
            heap,
            target,
            (usize::MAX, word),
            from,
            &mut stack,
            done,
            stacks,
        )?;
    }
    for frame in chain {
        done.max_roots = done.max_roots.max(frame.nroots);
        for slot in 0..frame.nroots {
            // SAFETY: `walk` checked the frame and it is still linked (nothing runs between
            // the walk and here); `slot < nroots`.
            let target = unsafe { frame.root(slot) };
            if target == 0 {
                continue;
            }
            done.roots += 1;
            let from = |_: &Heap| Referrer::Root {
                frame: frame.index,
                frame_addr: frame.addr,
                nroots: frame.nroots,
                slot,
            };
            let root = (frame.index, slot);
            trace(heap, target, root, from, &mut stack, done, stacks)?;
        }
    }
    // What a host pinned (`locus_gc_pin`) is a root here too, as with statepoint roots.
    for addr in heap.pinned_objects() {
        done.roots += 1;
        let from = |_: &Heap| Referrer::Pinned { object: addr };
        trace(heap, addr, (usize::MAX, 0), from, &mut stack, done, stacks)?;
    }
    while let Some(grey) = stack.pop() {
        let (words, precise) = match grey.scan {
            Scan::Fields(n) => (n, true),
            Scan::Words(n) => (n, false),
        };
        for field in 0..words {
            // SAFETY: `grey.addr` is a live object whose body holds at least `words` 8-byte
            // words, so word `field` is inside it.
            let slot = unsafe { (grey.addr as *const usize).add(field) };
            // SAFETY: as above; the body is 16-byte aligned, so its words are aligned.
            let target = unsafe { slot.read() };
            if target == 0 || (!precise && !heap.is_live(target)) {
                continue;
            }
            let from = |heap: &Heap| Referrer::Field {
                object: grey.addr,
                serial: heap.info(grey.addr).map_or(0, |o| o.serial),
                field,
                root: grey.root,
            };
            trace(heap, target, grey.root, from, &mut stack, done, stacks)?;
        }
    }
    Ok(())
}

/// Traces one non-null pointer found at `from` (built only for a fault): marks it and pushes it on the mark stack if
/// it is a live object seen for the first time, or returns the fault.
fn trace(
    heap: &mut Heap,
    target: usize,
    root: (usize, usize),
    from: impl FnOnce(&Heap) -> Referrer,
    stack: &mut Vec<Grey>,
    done: &mut Collection,
    stacks: &[StackBounds],
) -> Result<(), GcFault> {
    let collection = done.number;
    match heap.trace(target) {
        Trace::Marked(scan) => {
            done.marked += 1;
            if !matches!(scan, Scan::Fields(0) | Scan::Words(0)) {
                stack.push(Grey {
                    addr: target,
                    scan,
                    root,
                });
            }
            Ok(())
        }
        Trace::AlreadyMarked => Ok(()),
        Trace::CorruptHeader(object) => Err(GcFault::CorruptHeader {
            from: from(heap),
            object,
            collection,
        }),
        // A static object: not the heap's to trace, free or move.
        Trace::Bad(Lookup::Nothing) if could_be_static(target, stacks) => Ok(()),
        Trace::Bad(lookup) => Err(bad(from(heap), target, lookup, collection)),
    }
}

/// The lowest address memory can be mapped at (Linux's default `vm.mmap_min_addr`): below
/// it no object, of the heap or static, can be.
pub(crate) const LOWEST_MAPPED: usize = 0x10000;

/// Whether `addr`, no object of the heap, may be a static object: not below
/// [`LOWEST_MAPPED`] and not on one of the mutators' stacks.
pub(crate) fn could_be_static(addr: usize, stacks: &[StackBounds]) -> bool {
    addr >= LOWEST_MAPPED && !stacks.iter().any(|s| (s.low..s.high).contains(&addr))
}

/// The fault for a traced pointer that is not a live object's address.
pub(crate) fn bad(from: Referrer, target: usize, lookup: Lookup, collection: u64) -> GcFault {
    match lookup {
        Lookup::Freed(object) => GcFault::DanglingReference {
            from,
            target,
            object,
            collection,
        },
        Lookup::Inside { object, .. } if object.freed_in.is_some() => GcFault::DanglingReference {
            from,
            target,
            object,
            collection,
        },
        Lookup::Inside { object, .. } | Lookup::Live(object) => GcFault::InteriorPointer {
            from,
            target,
            object,
            collection,
        },
        Lookup::Nothing => GcFault::NotAnObject {
            from,
            target,
            collection,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The median is the middle pause (the upper of two), the maximum the longest; an
    /// empty record has neither; `end` records the time since `start`.
    #[test]
    fn pauses_median_and_max() {
        let mut p = Pauses::default();
        assert_eq!((p.count(), p.median_ns(), p.max_ns()), (0, 0, 0));
        for ns in [50, 10, 40, 20] {
            p.record(Duration::from_nanos(ns));
        }
        assert_eq!(p.count(), 4);
        assert_eq!(p.median_ns(), 40);
        assert_eq!(p.max_ns(), 50);
        assert_eq!(p.total_ns(), 120);
        p.record(Duration::from_nanos(30));
        assert_eq!(p.median_ns(), 30);
        let started = Pauses::start();
        std::thread::sleep(Duration::from_millis(2));
        p.end(started);
        assert_eq!(p.count(), 6);
        assert!(p.max_ns() >= 2_000_000, "{p:?}");
        assert_eq!(p.median_ns(), 40);
    }

    /// Past [`Pauses::KEPT`] pauses are still counted and the maximum still grows; the
    /// median is of the kept ones.
    #[test]
    fn pauses_past_the_kept_ones_are_counted() {
        let mut p = Pauses::default();
        for _ in 0..Pauses::KEPT {
            p.record(Duration::from_nanos(7));
        }
        p.record(Duration::from_secs(1));
        assert_eq!(p.count(), Pauses::KEPT as u64 + 1);
        assert_eq!(p.max_ns(), 1_000_000_000);
        assert_eq!(p.median_ns(), 7);
    }
}
