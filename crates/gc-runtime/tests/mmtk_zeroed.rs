//! Every MMTk plan hands out object bodies that read zero, also where dead objects were.
//!
//! The allocation paths do not zero what a bump pointer hands out (MMTk 0.33.0 zeroes it:
//! see `contract.rs` step 4); MarkSweep's cells and the large-object space are zeroed by the
//! runtime. This test fills every word of every object with non-zero values, lets most of
//! them die over many collections, and checks that every new object's body reads zero:
//! shapes from 32 bytes (the fast path) past 256 (Immix's overflow allocation) to 20 KB
//! (the large-object space). MMTk allows one heap per process: each plan runs in a child
//! process of this test binary.

use std::process::Command;
use std::sync::Arc;

use locus_gc_runtime::mmtk::Plan;
use locus_gc_runtime::runtime::{self, Collector, Config, GcFrame, OnFault, Runtime, StackMaps};

/// The environment variable naming the plan a child process runs.
const CHILD: &str = "LOCUS_GC_ZEROED_CHILD";

/// `(pointer fields, raw bytes)` of the objects, in turn.
const SHAPES: [(usize, usize); 7] = [
    (2, 16),
    (1, 40),
    (3, 200),
    (1, 600),
    (2, 3000),
    (1, 9000),
    (1, 20000),
];

/// In a child: allocates under `plan` in a 16 MiB heap, checking and dirtying each object;
/// prints the collections, the words checked and the non-zero ones found.
fn child(plan: Plan) {
    // Copying plans take statepoint roots (none here: every object dies); the others one
    // frame root, a list that keeps every 50th object until it is dropped.
    let copying = !plan.pins();
    let config = Config {
        heap_bytes: Some(16 << 20),
        stack_maps: copying.then(|| Arc::new(StackMaps::new())),
        on_fault: OnFault::Record,
        collector: Collector::Mmtk(plan),
        ..Config::default()
    };
    let rt = Runtime::try_enter(config).unwrap_or_else(|e| panic!("{e}"));
    let head = rt.pgcstack();
    let mut frame = [GcFrame::header_word(1), 0, 0];
    if !copying {
        // SAFETY: this thread's chain head slot; unlinked below.
        frame[1] = unsafe { *head } as usize;
        // SAFETY: as above; the frame outlives the link.
        unsafe { *head = frame.as_mut_ptr().cast() };
    }
    let (mut checked, mut nonzero) = (0usize, 0usize);
    for i in 0..40_000usize {
        let (nptrs, nbytes) = SHAPES[i % SHAPES.len()];
        let obj = runtime::locus_gc_alloc(nptrs as i64, nbytes as i64) as usize;
        assert_ne!(obj, 0, "allocation {i} failed: {:?}", rt.faults());
        let words = nptrs + nbytes / 8;
        for w in 0..words {
            // SAFETY: a word of the fresh object's body.
            let v = unsafe { std::ptr::read_volatile((obj + 8 * w) as *const usize) };
            checked += 1;
            if v != 0 {
                nonzero += 1;
                eprintln!("word {w} of object {obj:#x} ({nptrs}, {nbytes}) is {v:#x}");
            }
        }
        let keep = i % 50 == 0;
        // SAFETY: a plain local array (volatile: the collector reads it).
        let list = unsafe { std::ptr::read_volatile(&frame[2]) };
        // Pointer 0 links the list (or names the object itself), the other pointers name
        // the object, the raw words are all non-zero.
        for w in 0..words {
            let value = match w {
                0 if keep => list,
                w if w < nptrs => obj,
                w => usize::MAX ^ w,
            };
            // SAFETY: a word of the object's body.
            unsafe { std::ptr::write_volatile((obj + 8 * w) as *mut usize, value) };
        }
        if keep && !copying {
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(&mut frame[2], obj) };
        }
        if i % 5_000 == 4_999 {
            // Drop the list now and then, so that whole blocks die too.
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(&mut frame[2], 0) };
        }
    }
    if !copying {
        // SAFETY: as above.
        unsafe { *head = frame[1] as *mut GcFrame };
    }
    assert!(rt.faults().is_empty(), "{:?}", rt.faults());
    println!(
        "collections {} checked {checked} nonzero {nonzero}",
        rt.stats().collections
    );
}

#[test]
fn every_plan_hands_out_zeroed_bodies() {
    if let Ok(name) = std::env::var(CHILD) {
        let plan = Plan::ALL.into_iter().find(|p| p.name() == name);
        child(plan.unwrap_or_else(|| panic!("{CHILD}={name}: no such plan")));
        return;
    }
    for plan in Plan::ALL {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "every_plan_hands_out_zeroed_bodies",
                "--nocapture",
            ])
            .env(CHILD, plan.name())
            .output()
            .unwrap_or_else(|e| panic!("cannot run the test binary: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stdout}\n{stderr}", plan.name());
        let line = stdout
            .lines()
            .find(|l| l.starts_with("collections "))
            .unwrap_or_else(|| panic!("{}: no result: {stdout}\n{stderr}", plan.name()));
        let field = |name: &str| -> u64 {
            let mut words = line.split_whitespace();
            words
                .position(|w| w == name)
                .and_then(|_| words.next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{}: {line}", plan.name()))
        };
        assert!(field("collections") >= 5, "{}: {line}", plan.name());
        assert!(field("checked") > 1_000_000, "{}: {line}", plan.name());
        assert_eq!(field("nonzero"), 0, "{}: {line}\n{stderr}", plan.name());
    }
}
