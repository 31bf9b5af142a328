//! Several mutator threads on one heap: each has its own chain head, a collection by any
//! of them stops the others at their next safepoint (a thread in a safe region counts as
//! stopped), scans every thread's frames and the global root regions, and resumes them.
//! Rust code plays the part of compiled code here, as in `tests/runtime.rs`; the same
//! programs as IR, compiled ahead of time, are in locus-cli's `tests/gc_threads.rs`.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use locus_gc_runtime::runtime::{
    self, locus_gc_alloc, locus_gc_enter_safe_region, locus_gc_get_pgcstack,
    locus_gc_leave_safe_region, locus_gc_poll, locus_gc_safepoint, Config, GcFault, GcFrame, Guard,
    OnFault, Runtime,
};

/// A GC frame linked into the calling thread's chain, as compiled code links one.
struct Frame<'a> {
    words: *mut usize,
    nroots: usize,
    pgcstack: *mut *mut GcFrame,
    _buf: PhantomData<&'a mut [usize]>,
}

impl<'a> Frame<'a> {
    fn link(buf: &'a mut [usize]) -> Frame<'a> {
        let nroots = buf.len() - 2;
        let pgcstack = locus_gc_get_pgcstack();
        // SAFETY: the calling thread's head slot, valid while its runtime is installed.
        let prev = unsafe { *pgcstack };
        buf[0] = GcFrame::header_word(nroots);
        buf[1] = prev as usize;
        buf[2..].fill(0);
        let words = buf.as_mut_ptr();
        // SAFETY: as above; the frame stays linked until it is dropped.
        unsafe { pgcstack.write(words.cast()) };
        Frame {
            words,
            nroots,
            pgcstack,
            _buf: PhantomData,
        }
    }

    fn set(&self, slot: usize, obj: *mut u8) {
        assert!(slot < self.nroots);
        let at = self.words.wrapping_add(2 + slot);
        // SAFETY: a root slot of the frame's buffer.
        unsafe { at.write_volatile(obj as usize) }
    }

    fn get(&self, slot: usize) -> *mut u8 {
        assert!(slot < self.nroots);
        let at = self.words.wrapping_add(2 + slot);
        // SAFETY: as in `set`.
        unsafe { at.read_volatile() as *mut u8 }
    }
}

impl Drop for Frame<'_> {
    fn drop(&mut self) {
        // SAFETY: the frame's link word.
        let prev = unsafe { self.words.wrapping_add(1).read() } as *mut GcFrame;
        // SAFETY: the thread's head slot.
        unsafe { self.pgcstack.write(prev) };
    }
}

/// Field 0 of a node: the next node.
fn next(obj: *mut u8) -> *mut u8 {
    // SAFETY: `obj` is a live node (one pointer field).
    unsafe { obj.cast::<*mut u8>().read_volatile() }
}

/// The value of a node (its raw word).
fn value(obj: *mut u8) -> i64 {
    let at = obj.wrapping_add(8).cast::<i64>();
    // SAFETY: `obj` is a live node: one pointer field, then 8 raw bytes.
    unsafe { at.read_volatile() }
}

/// Pushes a node with `v` on the list in `frame`'s root 0.
fn push(frame: &Frame, v: i64) {
    let node = locus_gc_alloc(1, 8);
    // SAFETY: a new node: its pointer field.
    unsafe { node.cast::<*mut u8>().write(frame.get(0)) };
    // SAFETY: and its raw word.
    unsafe { node.wrapping_add(8).cast::<i64>().write(v) };
    frame.set(0, node);
}

fn list(mut node: *mut u8) -> Vec<i64> {
    let mut out = Vec::new();
    while !node.is_null() {
        out.push(value(node));
        node = next(node);
    }
    out
}

fn stress() -> Guard {
    Runtime::enter(Config::stress().on_fault(OnFault::Record))
}

const THREADS: usize = 4;
const NODES: i64 = 120;

/// Four threads attached to one stress-mode heap build lists rooted in their own frames,
/// allocate garbage, and publish their lists in a global root table that the others read:
/// every collection (one per allocation, by whichever thread allocates) stops the others
/// and scans every frame and the table. Nothing reachable is lost, nothing dangles.
#[test]
fn four_threads_share_one_heap_through_a_global_root_table() {
    let main = stress();
    // The global root table: one slot per thread, outside every stack.
    let table: &'static mut [usize; THREADS] = Box::leak(Box::new([0usize; THREADS]));
    let table_at = table.as_mut_ptr() as usize;
    // SAFETY: leaked, so readable for the rest of the process; written only with null or
    // live nodes.
    unsafe { main.add_root_region(table_at, table_at + 8 * THREADS) };
    let heap = main.heap();
    let published = Arc::new(Barrier::new(THREADS));
    locus_gc_enter_safe_region(); // the main thread only waits from here on
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let heap = heap.clone();
            let published = Arc::clone(&published);
            std::thread::spawn(move || {
                let rt = heap.attach();
                let mut buf = [0usize; 3];
                let frame = Frame::link(&mut buf);
                for i in 0..NODES {
                    push(&frame, i * 10 + t as i64);
                    locus_gc_alloc(0, 8); // garbage
                }
                let slot = (table_at + 8 * t) as *mut usize;
                // SAFETY: this thread's slot of the table.
                unsafe { slot.write_volatile(frame.get(0) as usize) };
                frame.set(0, std::ptr::null_mut()); // the table alone holds it now
                locus_gc_enter_safe_region();
                published.wait();
                locus_gc_leave_safe_region();
                let mut seen = Vec::new();
                for other in 0..THREADS {
                    locus_gc_safepoint(); // a collection between reads
                                          // SAFETY: the table's slots, all written before the barrier.
                    let head = unsafe { ((table_at + 8 * other) as *const usize).read_volatile() };
                    let values = list(head as *mut u8);
                    assert_eq!(values.len(), NODES as usize, "thread {other}'s list");
                    assert!(values.iter().all(|v| v % 10 == other as i64));
                    seen.push(values.iter().sum::<i64>());
                }
                drop(frame);
                let faults: Vec<GcFault> = rt.take_faults();
                (seen, faults)
            })
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    locus_gc_leave_safe_region();
    for (seen, faults) in &results {
        assert!(faults.is_empty(), "{faults:?}");
        assert_eq!(seen.len(), THREADS);
    }
    let stats = main.stats();
    // One collection at least per allocation and per safepoint of every worker.
    let calls = (THREADS as u64) * (2 * NODES as u64 + THREADS as u64);
    assert!(stats.collections >= calls, "{stats}");
    assert_eq!(stats.objects_allocated, THREADS as u64 * 2 * NODES as u64);
    // The lists survive (the table holds them), the garbage does not.
    assert_eq!(stats.objects_live, THREADS as u64 * NODES as u64, "{stats}");
    // Without the table the lists go too.
    assert!(main.remove_root_region(table_at));
    main.collect().unwrap();
    assert_eq!(main.stats().objects_live, 0);
    assert!(main.faults().is_empty());
    assert_eq!(main.mutators(), 1);
}

/// A thread blocked in a "foreign call" (in a safe region) holds its objects in its frame
/// (what `jl_roots` and the lowering's roots do) while the other threads collect many
/// times: they do not wait for it, and its objects survive.
#[test]
fn a_thread_in_a_safe_region_counts_as_stopped_and_keeps_its_roots() {
    let main = stress();
    let heap = main.heap();
    locus_gc_enter_safe_region();
    let (blocked_tx, blocked_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = {
        let heap = heap.clone();
        std::thread::spawn(move || {
            let rt = heap.attach();
            let mut buf = [0usize; 3];
            let frame = Frame::link(&mut buf);
            for i in 0..50 {
                push(&frame, i);
            }
            locus_gc_enter_safe_region();
            // The "foreign call": blocks until the others are done collecting.
            blocked_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            locus_gc_leave_safe_region();
            let values = list(frame.get(0));
            drop(frame);
            (values, rt.take_faults())
        })
    };
    blocked_rx.recv().unwrap();
    let before = main.stats().collections;
    // Two more threads collect 100 times each while the holder is blocked.
    let collectors: Vec<_> = (0..2)
        .map(|_| {
            let heap = heap.clone();
            std::thread::spawn(move || {
                let _rt = heap.attach();
                for _ in 0..100 {
                    locus_gc_alloc(0, 8);
                }
            })
        })
        .collect();
    for c in collectors {
        c.join().unwrap();
    }
    assert!(main.stats().collections >= before + 200);
    release_tx.send(()).unwrap();
    let (values, faults) = holder.join().unwrap();
    locus_gc_leave_safe_region();
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(values, (0..50).rev().collect::<Vec<i64>>());
    assert!(main.faults().is_empty());
}

/// What happens to a collection while another thread spins in a loop without calls.
/// Returns whether the collection ended before the watchdog released the spinner, and
/// how many times the spinner polled.
fn spin_while_collecting(polls: bool) -> (bool, usize) {
    let main = stress();
    let heap = main.heap();
    let stop = Arc::new(AtomicBool::new(false));
    let spinning = Arc::new(Barrier::new(2));
    let polled = Arc::new(AtomicUsize::new(0));
    let spinner = {
        let (heap, stop, spinning, polled) = (
            heap.clone(),
            Arc::clone(&stop),
            Arc::clone(&spinning),
            Arc::clone(&polled),
        );
        std::thread::spawn(move || {
            let _rt = heap.attach();
            spinning.wait();
            while !stop.load(Ordering::Acquire) {
                if polls {
                    locus_gc_poll();
                    polled.fetch_add(1, Ordering::Relaxed);
                }
                std::hint::spin_loop();
            }
        })
    };
    spinning.wait();
    let (done_tx, done_rx) = mpsc::channel::<bool>();
    let collector = {
        let (heap, stop) = (heap.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let _rt = heap.attach();
            locus_gc_safepoint(); // stress mode: a collection, which must stop the spinner
                                  // Whether the watchdog had to release the spinner first.
            let _ = done_tx.send(stop.load(Ordering::Acquire));
            stop.store(true, Ordering::Release);
        })
    };
    // The main thread waits outside Locus code.
    locus_gc_enter_safe_region();
    // The watchdog: a collection held up is released (not left to hang the test).
    let ended_first = match done_rx.recv_timeout(Duration::from_millis(500)) {
        Ok(released) => !released,
        Err(_) => {
            stop.store(true, Ordering::Release);
            let released = done_rx.recv_timeout(Duration::from_secs(30));
            assert!(released.is_ok(), "the collection never ended");
            false
        }
    };
    assert!(spinner.join().is_ok(), "the spinner panicked");
    assert!(collector.join().is_ok(), "the collector panicked");
    locus_gc_leave_safe_region();
    assert!(main.faults().is_empty());
    (ended_first, polled.load(Ordering::Relaxed))
}

/// Without polls a thread looping without calls holds a collection up until it leaves
/// its loop (the watchdog releases it); with a poll at its back edge the collection
/// stops it at the poll and ends while it still loops.
#[test]
fn a_loop_without_polls_holds_a_collection_up_and_one_with_polls_does_not() {
    let (ended, polled) = spin_while_collecting(false);
    assert!(!ended, "a collection cannot end while a mutator runs on");
    assert_eq!(polled, 0);
    let (ended, polled) = spin_while_collecting(true);
    assert!(ended, "the poll stops the spinner for the collection");
    assert!(polled > 0);
}

/// Each thread's chain head is its own: `locus_gc_get_pgcstack` differs per thread of one
/// heap, and a thread's frames are its own (`Runtime::frames`).
#[test]
fn each_thread_has_its_own_chain_head() {
    let main = stress();
    let heap = main.heap();
    let mine = locus_gc_get_pgcstack() as usize;
    let theirs = std::thread::spawn(move || {
        let rt = heap.attach();
        let mut buf = [0usize; 4];
        let _frame = Frame::link(&mut buf);
        (
            locus_gc_get_pgcstack() as usize,
            rt.frames().unwrap().len(),
            rt.mutators(),
        )
    })
    .join()
    .unwrap();
    assert_ne!(mine, theirs.0);
    assert_eq!(theirs.1, 1);
    assert_eq!(theirs.2, 2);
    assert!(main.frames().unwrap().is_empty());
    assert_eq!(main.mutators(), 1);
    assert!(!runtime::symbols().is_empty());
}
