//! The allocation fast path on MMTk (the `TASK_ALLOC_*` words of the task block, which
//! `locus_gc_alloc` takes first and compiled code may take inline), the one-load
//! `locus_gc_get_pgcstack` and the per-thread write-barrier counts: what the runtime
//! publishes, when it withdraws it, and that objects and counters come out as the slow
//! path makes them. One test: one MMTk plan per process, and the steps share its heap.

use locus_gc_runtime::contract::{
    TASK_ALLOC_BUMP_WORD, TASK_ALLOC_BYTES_WORD, TASK_ALLOC_OBJECTS_WORD, TASK_GCSTACK_WORD,
};
use locus_gc_runtime::mmtk::Plan;
use locus_gc_runtime::runtime::{self, Collector, Config, GcFrame, OnFault, Runtime};

/// The task block word `w` of the calling thread's runtime, read as compiled code reads it
/// (from the chain head `locus_gc_get_pgcstack` returns).
fn task_word(w: usize) -> usize {
    let head = runtime::locus_gc_get_pgcstack() as usize;
    // SAFETY: the chain head is word TASK_GCSTACK_WORD of the thread's task block, which
    // has every TASK_ALLOC_* word; the block lives as long as the runtime.
    unsafe { peek(head - 8 * TASK_GCSTACK_WORD + 8 * w) }
}

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

/// The bump pointer's cursor (its first word), 0 when there is no fast path.
fn cursor() -> usize {
    let bp = task_word(TASK_ALLOC_BUMP_WORD);
    if bp == 0 {
        return 0;
    }
    // SAFETY: the thread's MMTk bump pointer ({cursor, limit}), alive with its mutator.
    unsafe { peek(bp) }
}

fn alloc(nptrs: i64, nbytes: i64) -> usize {
    runtime::locus_gc_alloc(nptrs, nbytes) as usize
}

#[test]
fn immix_allocations_take_the_fast_path_and_are_counted() {
    let config = Config {
        heap_bytes: Some(16 << 20),
        on_fault: OnFault::Exit,
        collector: Collector::Mmtk(Plan::Immix),
        ..Config::default()
    };
    let rt = Runtime::try_enter(config).unwrap_or_else(|e| panic!("{e}"));
    // The one-load answer is the runtime's chain head.
    assert_eq!(runtime::locus_gc_get_pgcstack(), rt.pgcstack());
    assert_ne!(task_word(TASK_ALLOC_BUMP_WORD), 0, "no fast path on Immix");

    // A list of 20,000 nodes (one pointer field, 8 raw bytes: 32 bytes each) rooted in a
    // frame, then 800,000 garbage objects of 48 bytes (38 MB in a 16 MB heap): MMTk
    // collects, and the fast path must give objects the collections keep. (The nodes come
    // first: spread one per 41 objects over the whole run, each pinned node keeps its
    // Immix line and the fixed heap runs out, with or without the fast path.)
    let head = rt.pgcstack();
    let mut frame = [GcFrame::header_word(1), 0, 0];
    // SAFETY: this thread's chain head slot; unlinked below.
    frame[1] = unsafe { *head } as usize;
    // SAFETY: as above; the frame outlives the link.
    unsafe { *head = frame.as_mut_ptr().cast() };
    let before = rt.stats();
    let (mut objects, mut fast, mut bytes) = (0u64, 0u64, 0u64);
    for i in 0..20_000u64 {
        let at = cursor();
        let node = alloc(1, 8);
        // The header word at 8 past a multiple of 16, the node 16-byte aligned after it.
        fast += u64::from(at != 0 && node == (at | 8) + 8);
        assert!(node.is_multiple_of(16), "node {node:#x}");
        // SAFETY: a fresh node: its pointer field, then 8 raw bytes, both zero.
        let field = unsafe { peek(node) };
        // SAFETY: as above.
        let raw = unsafe { peek(node + 8) };
        assert_eq!((field, raw), (0, 0));
        // SAFETY: a plain local array.
        let prev = unsafe { std::ptr::read_volatile(&frame[2]) };
        // SAFETY: the fresh node's pointer field.
        unsafe { poke(node, prev) };
        // SAFETY: its raw word.
        unsafe { poke(node + 8, i as usize) };
        // Volatile: the collector reads the root through the chain, not through `frame`.
        // SAFETY: a plain local array.
        unsafe { std::ptr::write_volatile(&mut frame[2], node) };
        alloc(2, 16);
        objects += 2;
        bytes += 32 + 48;
    }
    for _ in 0..800_000 {
        alloc(2, 16);
    }
    objects += 800_000;
    bytes += 800_000 * 48;
    let after = rt.stats();
    assert!(after.collections > before.collections, "{after:?}");
    // Every allocation counted, with its size, whichever path made it.
    assert_eq!(after.objects_allocated - before.objects_allocated, objects);
    assert_eq!(after.bytes_allocated - before.bytes_allocated, bytes);
    // Most took the fast path (a new buffer takes the slow one).
    assert!(fast > 19_000, "{fast} of 20,000 nodes bumped the cursor");
    // The list is intact: each node holds its number and the one before.
    // SAFETY: a plain local array.
    let (mut node, mut n) = (unsafe { std::ptr::read_volatile(&frame[2]) }, 20_000u64);
    while node != 0 {
        n -= 1;
        // SAFETY: a node the frame root kept alive (Immix pins what frames reach).
        let next = unsafe { peek(node) };
        // SAFETY: as above.
        let value = unsafe { peek(node + 8) };
        assert_eq!(value as u64, n);
        node = next;
    }
    assert_eq!(n, 0);
    // SAFETY: as above.
    unsafe { *head = frame[1] as *mut GcFrame };

    // A safe region withdraws the fast path (read from the block directly: the entry points
    // refuse a thread in a safe region), leaving gives it back.
    let block = rt.pgcstack() as usize - 8 * TASK_GCSTACK_WORD;
    runtime::locus_gc_enter_safe_region();
    // SAFETY: the runtime's task block, alive as it is.
    let in_region = unsafe { peek(block + 8 * TASK_ALLOC_BUMP_WORD) };
    runtime::locus_gc_leave_safe_region();
    assert_eq!(in_region, 0);
    assert_ne!(task_word(TASK_ALLOC_BUMP_WORD), 0);
    assert_ne!(task_word(TASK_ALLOC_OBJECTS_WORD), 0);
    assert_ne!(task_word(TASK_ALLOC_BYTES_WORD), 0);

    // Write barriers: each thread counts its own; a thread that detached still counts.
    let barriers = rt.stats().write_barriers;
    for _ in 0..7 {
        runtime::locus_gc_write_barrier(std::ptr::null());
    }
    let heap = rt.heap();
    runtime::locus_gc_enter_safe_region();
    let other = std::thread::spawn(move || {
        let rt2 = heap.attach();
        for _ in 0..5 {
            runtime::locus_gc_write_barrier(std::ptr::null());
        }
        let mine = runtime::locus_gc_get_pgcstack() == rt2.pgcstack();
        drop(rt2);
        mine
    })
    .join();
    runtime::locus_gc_leave_safe_region();
    assert!(matches!(other, Ok(true)), "the second thread's chain head");
    assert_eq!(rt.stats().write_barriers - barriers, 12);
    assert!(rt.take_faults().is_empty());
    drop(rt);

    // Collecting every so many calls: no fast path (each allocation must count as a call).
    let every = Config {
        mmtk_collect_every: 1000,
        collector: Collector::Mmtk(Plan::Immix),
        on_fault: OnFault::Record,
        ..Config::default()
    };
    let rt = Runtime::try_enter(every).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(task_word(TASK_ALLOC_BUMP_WORD), 0);
    let before = rt.stats().collections;
    for _ in 0..3000 {
        alloc(0, 8);
    }
    assert!(rt.stats().collections >= before + 3, "{:?}", rt.stats());
    drop(rt);

    // The runtime's own collector: the entry's answer, no fast path.
    let own = Runtime::enter(Config::default().on_fault(OnFault::Record));
    assert_eq!(runtime::locus_gc_get_pgcstack(), own.pgcstack());
    assert_eq!(task_word(TASK_ALLOC_BUMP_WORD), 0);
    let before = own.stats().objects_allocated;
    alloc(1, 8);
    assert_eq!(own.stats().objects_allocated, before + 1);
}
