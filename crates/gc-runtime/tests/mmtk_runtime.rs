//! The runtime on MMTk (`Config::mmtk`): allocation and collection go to the binding, and
//! what one MMTk heap per process cannot do is refused with a sentence, not a panic.

use locus_gc_runtime::mmtk::Plan;
use locus_gc_runtime::runtime::{
    self, Collector, Config, FrameProblem, GcFault, GcFrame, OnFault, Runtime,
};

fn mmtk(plan: Plan) -> Config {
    Config {
        collector: Collector::Mmtk(plan),
        on_fault: OnFault::Record,
        ..Config::default()
    }
}

#[test]
fn one_plan_per_process_and_a_second_thread() {
    // A copying plan cannot take frame roots: refused before any MMTk heap is made.
    let err = Runtime::try_enter(mmtk(Plan::SemiSpace))
        .err()
        .unwrap_or_default();
    assert!(err.contains("cannot pin"), "{err}");

    let rt = Runtime::try_enter(mmtk(Plan::Immix)).unwrap_or_else(|e| panic!("{e}"));
    // One frame root, as compiled code keeps it: [1 << 2, prev, root].
    let head = rt.pgcstack();
    let mut frame = [GcFrame::header_word(1), 0, 0];
    // SAFETY: the chain head slot of this thread's runtime; unlinked below.
    frame[1] = unsafe { *head } as usize;
    // SAFETY: as above; the frame outlives the link.
    unsafe { *head = frame.as_mut_ptr().cast() };
    let kept = rt.alloc(0, 8).unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: a fresh object of 8 raw bytes.
    unsafe { kept.as_ptr().cast::<u64>().write(42) };
    frame[2] = kept.as_ptr() as usize;
    rt.collect().unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..40_000 {
        rt.alloc(0, 1024).unwrap_or_else(|e| panic!("{e}"));
    }
    // SAFETY: the frame root kept it alive (and pinned: Immix did not move it).
    assert_eq!(unsafe { kept.as_ptr().cast::<u64>().read() }, 42);
    let stats = rt.stats();
    assert!(stats.collections >= 2, "{stats:?}");
    assert!(stats.objects_allocated >= 40_001, "{stats:?}");
    assert!(rt.take_faults().is_empty());

    // A second thread on the MMTk heap: it attaches, allocates and collects while this
    // one waits in a safe region (counted as parked, its frame's root handed over).
    let heap = rt.heap();
    let kept_addr = kept.as_ptr() as usize;
    runtime::locus_gc_enter_safe_region();
    let other = std::thread::spawn(move || -> Result<(u64, u64, usize), String> {
        let rt2 = heap.try_attach()?;
        let mine = rt2.alloc(0, 8).map_err(|e| e.to_string())?;
        let head = rt2.pgcstack();
        let mut frame = [GcFrame::header_word(1), 0, mine.as_ptr() as usize];
        // SAFETY: this thread's chain head slot; unlinked below.
        frame[1] = unsafe { *head } as usize;
        // SAFETY: as above.
        unsafe { *head = frame.as_mut_ptr().cast() };
        // SAFETY: a fresh object of 8 raw bytes.
        unsafe { mine.as_ptr().cast::<u64>().write(7) };
        let before = rt2.stats().collections;
        rt2.collect().map_err(|e| e.to_string())?;
        for _ in 0..20_000 {
            rt2.alloc(0, 1024).map_err(|e| e.to_string())?;
        }
        let collections = rt2.stats().collections - before;
        // SAFETY: kept by the frame root.
        let seven = unsafe { (frame[2] as *const u64).read() };
        // SAFETY: as above.
        unsafe { *head = frame[1] as *mut GcFrame };
        Ok((collections, seven, rt2.mutators()))
    })
    .join()
    .unwrap_or_else(|_| Err("the thread panicked".into()));
    runtime::locus_gc_leave_safe_region();
    let (collections, seven, mutators) = other.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        collections >= 1,
        "the second thread's collections: {collections}"
    );
    assert_eq!((seven, mutators), (7, 2));
    // SAFETY: the safe region handed this thread's frame root over: still alive, in place.
    assert_eq!(unsafe { (kept_addr as *const u64).read() }, 42);
    assert!(rt.take_faults().is_empty());

    // Another plan in the same process: refused; the same plan again, once this is gone: fine.
    // SAFETY: as above.
    unsafe { *head = frame[1] as *mut GcFrame };
    drop(rt);
    let err = Runtime::try_enter(mmtk(Plan::MarkSweep))
        .err()
        .unwrap_or_default();
    assert!(err.contains("one heap per"), "{err}");
    let again = Runtime::try_enter(mmtk(Plan::Immix)).unwrap_or_else(|e| panic!("{e}"));
    assert!(again.alloc(1, 8).is_ok());

    // A chain the runtime's own collector refuses is refused before MMTk reads it, with
    // the same fault: a frame a returned function left linked (below the stack pointer of
    // the collection), and a frame off the stack.
    let head = again.pgcstack();
    // SAFETY: this thread's chain head slot.
    let saved = unsafe { *head };
    leave_a_frame_linked(head, 64);
    let mut off_stack = vec![GcFrame::header_word(0), saved as usize];
    for (what, expected) in [("a returned function's", "below"), ("a heap", "outside")] {
        if expected == "outside" {
            // SAFETY: as above; put back below.
            unsafe { *head = off_stack.as_mut_ptr().cast() };
        }
        again.collect().unwrap_or_else(|e| panic!("{e}"));
        let faults = again.take_faults();
        let problem = match faults.as_slice() {
            [GcFault::CorruptFrame {
                frame: 0, problem, ..
            }] => *problem,
            other => panic!("{what} frame: {other:?}"),
        };
        let matched = match problem {
            FrameProblem::BelowStackPointer { .. } => "below",
            FrameProblem::OutsideStack { .. } => "outside",
            _ => "other",
        };
        assert_eq!(matched, expected, "{what} frame: {problem}");
        // SAFETY: as above.
        unsafe { *head = saved };
    }
    assert!(again.collect().is_ok());
    assert!(again.take_faults().is_empty());
}

/// Links a frame 64 KiB down the stack and returns without unlinking it.
#[inline(never)]
fn leave_a_frame_linked(head: *mut *mut GcFrame, depth: usize) {
    let pad = [0u8; 1024];
    std::hint::black_box(&pad);
    if depth > 0 {
        leave_a_frame_linked(head, depth - 1);
        std::hint::black_box(&pad); // no tail call: each level keeps its 1 KiB
        return;
    }
    // SAFETY: the thread's chain head slot; the frame is left linked on purpose (the
    // caller puts the head back).
    let mut frame = [GcFrame::header_word(0), unsafe { *head } as usize];
    // SAFETY: as above.
    unsafe { *head = std::hint::black_box(frame.as_mut_ptr()).cast() };
}
