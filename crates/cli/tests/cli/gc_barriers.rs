//! Write barriers on MMTk's generational plans for stores the lowering cannot name an
//! object for: `locus_gc_write_barrier_interior(addr)` (issue 26), run by
//! `locus gc run --collector mmtk:stickyimmix|gencopy` with MMTk collecting at every call
//! that may collect. Each run is a process of its own (one MMTk heap per process).

use std::path::Path;
use std::process::{Command, Output};

use crate::common::*;

/// An old array (allocated, then two collections) whose fields a callee fills through a
/// Derived (addrspace 11) argument, each with a young box, a collection after each store.
/// The callee cannot name the caller's object: only the interior barrier remembers it.
/// 1 + 2 + ... + 10 = 55.
const INTO_CALLERS_OBJECT: &str = r#"; expect: 55
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)

define ptr addrspace(10) @box(i64 %v) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %b = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %b.d = addrspacecast ptr addrspace(10) %b to ptr addrspace(11)
  store i64 %v, ptr addrspace(11) %b.d
  ret ptr addrspace(10) %b
}

; Stores a new box of %v where %slot points: into the caller's object.
define void @put(ptr addrspace(11) %slot, i64 %v) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %b = call ptr addrspace(10) @box(i64 %v)
  store ptr addrspace(10) %b, ptr addrspace(11) %slot
  ret void
}

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %arr = call ptr addrspace(10) @locus_gc_alloc(i64 10, i64 0)
  ; Collections that %arr survives: it is old.
  %j0 = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 64)
  %j1 = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 64)
  %arr.d = addrspacecast ptr addrspace(10) %arr to ptr addrspace(11)
  br label %fill

fill:
  %i = phi i64 [ 0, %entry ], [ %i.next, %fill ]
  %f = getelementptr inbounds ptr addrspace(10), ptr addrspace(11) %arr.d, i64 %i
  %v = add i64 %i, 1
  call void @put(ptr addrspace(11) %f, i64 %v)
  %junk = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 64)
  %i.next = add i64 %i, 1
  %full = icmp eq i64 %i.next, 10
  br i1 %full, label %sum, label %fill

sum:
  %k = phi i64 [ 0, %fill ], [ %k.next, %sum ]
  %acc = phi i64 [ 0, %fill ], [ %acc.next, %sum ]
  %e.p = getelementptr inbounds ptr addrspace(10), ptr addrspace(11) %arr.d, i64 %k
  %e = load ptr addrspace(10), ptr addrspace(11) %e.p
  %e.d = addrspacecast ptr addrspace(10) %e to ptr addrspace(11)
  %x = load i64, ptr addrspace(11) %e.d
  %acc.next = add i64 %acc, %x
  %k.next = add i64 %k, 1
  %done = icmp eq i64 %k.next, 10
  br i1 %done, label %exit, label %sum

exit:
  ret i64 %acc.next
}
"#;

/// `locus gc run --stats ARGS FILE`, MMTk collecting at every call that may collect.
fn gc_run(args: &[&str], file: &Path) -> Output {
    Command::new(LOCUS)
        .args(["gc", "run", "--timeout", "60", "--stats"])
        .args(args)
        .arg(file)
        .env("LOCUS_GC_MMTK_COLLECT_EVERY", "1")
        .env_remove("LOCUS_GC_MMTK_DEFRAG")
        .env_remove("LOCUS_GC_HEAP_SIZE")
        .output()
        .unwrap_or_else(|e| panic!("run {LOCUS}: {e}"))
}

/// The result line (the first of standard output) and the `write barriers:` count.
fn result_and_barriers(out: &Output) -> (String, Option<u64>) {
    let stdout = text(&out.stdout);
    let result = stdout.lines().next().unwrap_or_default().to_string();
    let barriers = stdout
        .lines()
        .find_map(|l| l.strip_prefix("write barriers: "))
        .and_then(|n| n.trim().parse().ok());
    (result, barriers)
}

/// [`INTO_CALLERS_OBJECT`] gives the stress collector's result under StickyImmix (frame
/// roots) and GenCopy (statepoint roots) with the lowering's barriers: 10 interior
/// barriers run. With the frontend's barriers only (none), the young boxes are lost and
/// the result is wrong (or the run ends with a fault), so the test can fail.
#[test]
fn a_store_through_a_derived_argument_is_remembered() {
    let dir = TempDir::new("gc_barriers_interior");
    let file = dir.path("into_callers_object.ll");
    std::fs::write(&file, INTO_CALLERS_OBJECT)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));

    let stress = gc_run(&["--collector", "stress"], &file);
    assert!(stress.status.success(), "stress: {}", text(&stress.stderr));
    let (expected, _) = result_and_barriers(&stress);
    assert_eq!(expected, "55", "the stress collector's result");

    for roots in [
        &["--collector", "mmtk:stickyimmix"][..],
        &["--roots", "statepoint", "--collector", "mmtk:gencopy"],
    ] {
        let out = gc_run(roots, &file);
        let (result, barriers) = result_and_barriers(&out);
        assert!(
            out.status.success() && result == expected,
            "{roots:?}: {result:?}, want {expected}: {}",
            text(&out.stderr)
        );
        assert_eq!(barriers, Some(10), "{roots:?}: write barriers run");

        let frontend: Vec<&str> = roots
            .iter()
            .copied()
            .chain(["--write-barriers", "frontend"])
            .collect();
        let out = gc_run(&frontend, &file);
        let (result, barriers) = result_and_barriers(&out);
        assert!(
            !(out.status.success() && result == expected),
            "{frontend:?}: the right result without barriers: the test cannot fail"
        );
        eprintln!(
            "{frontend:?}: status {:?}, result {result:?}, barriers {barriers:?}, {}",
            out.status.code(),
            text(&out.stderr).trim()
        );
    }
}

/// A Derived argument that points into a global root table (registered with
/// `locus_gc_add_root_region`), not into an object: the callee's store gets the interior
/// barrier, which finds no object there and does nothing (the table is scanned as roots
/// at every collection). 7 under the stress collector and StickyImmix with both roots.
const INTO_A_ROOT_TABLE: &str = r#"; expect: 7
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)
declare void @locus_gc_add_root_region(ptr, ptr)

@table = global [2 x ptr addrspace(10)] zeroinitializer

define void @put(ptr addrspace(11) %slot, i64 %v) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %b = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %b.d = addrspacecast ptr addrspace(10) %b to ptr addrspace(11)
  store i64 %v, ptr addrspace(11) %b.d
  store ptr addrspace(10) %b, ptr addrspace(11) %slot
  ret void
}

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %end = getelementptr inbounds [2 x ptr addrspace(10)], ptr @table, i64 1
  call void @locus_gc_add_root_region(ptr @table, ptr %end)
  %g = addrspacecast ptr @table to ptr addrspace(11)
  call void @put(ptr addrspace(11) %g, i64 7)
  %j = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 64)
  %e = load ptr addrspace(10), ptr @table
  %e.d = addrspacecast ptr addrspace(10) %e to ptr addrspace(11)
  %x = load i64, ptr addrspace(11) %e.d
  ret i64 %x
}
"#;

#[test]
fn an_interior_barrier_outside_the_heap_is_no_barrier() {
    let dir = TempDir::new("gc_barriers_outside");
    let file = dir.path("into_a_root_table.ll");
    std::fs::write(&file, INTO_A_ROOT_TABLE).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    for args in [
        &["--collector", "stress"][..],
        &["--collector", "mmtk:stickyimmix"],
        &["--roots", "statepoint", "--collector", "mmtk:stickyimmix"],
    ] {
        let out = gc_run(args, &file);
        let (result, barriers) = result_and_barriers(&out);
        assert!(
            out.status.success() && result == "7",
            "{args:?}: {result:?}, want 7: {}",
            text(&out.stderr)
        );
        assert_eq!(barriers, Some(1), "{args:?}: write barriers run");
    }
}
