//! The runtime on MMTk (`Config::mmtk`): allocation and collection go to the binding, and
//! what one MMTk heap per process cannot do is refused with a sentence, not a panic.

use locus_gc_runtime::mmtk::Plan;
use locus_gc_runtime::runtime::{Collector, Config, GcFrame, OnFault, Runtime};

fn mmtk(plan: Plan) -> Config {
    Config::default()
        .on_fault(OnFault::Record)
        .with_collector(Collector::Mmtk(plan))
}

#[test]
fn one_plan_one_thread_per_process() {
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

    // A second thread on the MMTk heap: refused (the multi-thread protocol is not built).
    let heap = rt.heap();
    let attached = std::thread::spawn(move || heap.try_attach().map(drop))
        .join()
        .unwrap_or_else(|_| Err("the thread panicked".into()));
    let err = attached.err().unwrap_or_default();
    assert!(err.contains("one mutator thread"), "{err}");

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
}
