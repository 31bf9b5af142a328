//! A frontend's code run under the stress collector: roots placed by Locus, a collection at
//! every safepoint, freed objects made inaccessible.
//!
//! A frontend emits plain SSA with GC pointers in address space 10 (Julia's convention) and
//! never thinks about roots: `locus_gc::run::run` verifies the GC invariants, places the
//! roots (a GC frame per function), JIT-compiles the module with LLVM 19 and calls `main`.
//! 1. A linked list built across allocations and summed: under stress every allocation
//!    collects, so a value the lowering failed to root would be freed and reported.
//! 2. The classic frontend bug, a raw pointer (`julia.pointer_from_objref`) used across an
//!    allocation without `gc_preserve`: the object is freed at the allocation and the next
//!    load touches a freed object. That kills the process (exit status 2 and one
//!    `locus: gc:` line), so the example runs it in a child process (itself, with
//!    `--forgot-preserve`) and checks how the child ended.
//!
//! Run: `cargo run -p locus-gc --example stress_roots`. Exits 1 if either run does not end
//! as it should.

use std::process::{Command, ExitCode};

use locus_gc::run::{run, RunOptions};
use locus_gc::runtime::OnFault;
use locus_gc::signals::DANGLING_EXIT_STATUS;

/// Twenty nodes `[next][value]`, each allocated while the list so far must stay alive, then
/// summed with an allocation between every two loads: 1 + ... + 20 = 210.
const LIST: &str = r#"
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  br label %build

build:
  %i = phi i64 [ 1, %entry ], [ %i.next, %build ]
  %head = phi ptr addrspace(10) [ null, %entry ], [ %node, %build ]
  ; @locus_gc_alloc(pointer fields, bytes): a safepoint, %head is live across it.
  %node = call ptr addrspace(10) @locus_gc_alloc(i64 1, i64 8)
  %node.d = addrspacecast ptr addrspace(10) %node to ptr addrspace(11)
  store ptr addrspace(10) %head, ptr addrspace(11) %node.d
  %val.p = getelementptr i8, ptr addrspace(11) %node.d, i64 8
  store i64 %i, ptr addrspace(11) %val.p
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i, 20
  br i1 %done, label %sum, label %build

sum:
  %cur = phi ptr addrspace(10) [ %node, %build ], [ %next, %sum.body ]
  %acc = phi i64 [ 0, %build ], [ %acc.next, %sum.body ]
  %end = icmp eq ptr addrspace(10) %cur, null
  br i1 %end, label %exit, label %sum.body

sum.body:
  %cur.d = addrspacecast ptr addrspace(10) %cur to ptr addrspace(11)
  %v.p = getelementptr i8, ptr addrspace(11) %cur.d, i64 8
  %v = load i64, ptr addrspace(11) %v.p
  %acc.next = add i64 %acc, %v
  %next = load ptr addrspace(10), ptr addrspace(11) %cur.d
  %junk = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 16)
  br label %sum

exit:
  ret i64 %acc
}
"#;

/// The bug: `%raw` points into `%o`, but nothing keeps `%o` alive across the allocation
/// (the fix is `llvm.julia.gc_preserve_begin(%o)` before it and `_end` after the load).
const FORGOT_PRESERVE: &str = r#"
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)
declare ptr @julia.pointer_from_objref(ptr addrspace(10))

define i64 @main() {
  %pgcstack = call ptr @julia.get_pgcstack()
  %o = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %raw = call ptr @julia.pointer_from_objref(ptr addrspace(10) %o)
  store i64 42, ptr %raw
  %junk = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %v = load i64, ptr %raw
  ret i64 %v
}
"#;

/// The child: runs the buggy module with the default fault handling (print one line, exit
/// with status 2). Returns only if the bug went unnoticed.
fn child() -> ExitCode {
    let options = RunOptions {
        stress: true,
        ..RunOptions::default()
    };
    // SAFETY: a use of a freed object ends the process through the runtime's fault handler
    // (stress mode makes freed objects inaccessible), which is what this child is for.
    match unsafe { run("forgot_preserve.ll", FORGOT_PRESERVE, options) } {
        Ok(outcome) => println!("the bug went unnoticed: main returned {}", outcome.value),
        Err(e) => eprintln!("stress_roots: {e}"),
    }
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--forgot-preserve") {
        return child();
    }

    // 1. The list, under stress; faults are recorded instead of ending the process.
    let options = RunOptions {
        stress: true,
        on_fault: OnFault::Record,
        ..RunOptions::default()
    };
    // SAFETY: the module touches only objects the runtime gave it, through rooted values.
    let outcome = match unsafe { run("list.ll", LIST, options) } {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("stress_roots: {e}");
            return ExitCode::FAILURE;
        }
    };
    for r in &outcome.reports {
        println!(
            "@{}: {} safepoints, {} frame slot(s), at most {} value(s) live at one",
            r.function,
            r.safepoints.len(),
            r.slots,
            r.max_live
        );
    }
    let s = &outcome.stats;
    println!(
        "main() = {}; {} collections, {} objects allocated, {} freed, {} fault(s)",
        outcome.value,
        s.collections,
        s.objects_allocated,
        s.objects_freed,
        outcome.faults.len()
    );
    if outcome.value != 210 || !outcome.faults.is_empty() || s.collections == 0 {
        eprintln!("stress_roots: expected 210, no fault and collections");
        return ExitCode::FAILURE;
    }

    // 2. The bug, in a child process.
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("stress_roots: cannot find this program to run it again: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = match Command::new(exe).arg("--forgot-preserve").output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("stress_roots: cannot run the child: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("locus: gc:"))
        .unwrap_or("");
    println!(
        "without gc_preserve: the child ended with {} and said: {line}",
        out.status
    );
    if out.status.code() == Some(DANGLING_EXIT_STATUS) && !line.is_empty() {
        println!("ok");
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "stress_roots: expected exit status {DANGLING_EXIT_STATUS} and a `locus: gc:` \
             line; stderr: {stderr}"
        );
        ExitCode::FAILURE
    }
}
