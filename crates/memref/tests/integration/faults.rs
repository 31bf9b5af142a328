//! `CallOptions::report_faults`: a kernel that faults ends the process with one `locus:` line
//! naming the signal, the address and the kernel, and exit status 3. Each faulting case runs
//! in a child process (this test binary re-run on one test with [`CHILD`] set), since the
//! fault ends it.

#![allow(clippy::unwrap_used)]

use std::os::unix::process::ExitStatusExt;
use std::process::Output;

use locus_memref::{CallOptions, Scalar, Value};

use crate::common::function;
use crate::fault_child::{self, locus_lines};

const CHILD: &str = "LOCUS_MEMREF_FAULTS_CHILD";

/// Runs test `name` of this binary in a child process with [`CHILD`] set to `mode`.
fn child(name: &str, mode: &str) -> Output {
    fault_child::run(name, CHILD, mode).unwrap()
}

/// The mode this process runs a test in as a child, if it is one.
fn child_mode() -> Option<String> {
    std::env::var(CHILD).ok()
}

/// A kernel reading through null, called with `report_faults`: one line naming SIGSEGV,
/// address 0, the kernel's function and its library, status 3. Without the option the same call is left
/// to the default action: the child dies by SIGSEGV with no `locus:` line.
#[test]
fn a_null_dereference_in_a_kernel_is_one_line_and_status_3() {
    const NAME: &str = "faults::a_null_dereference_in_a_kernel_is_one_line_and_status_3";
    if let Some(mode) = child_mode() {
        let f = function("fault.mlir", "deref");
        let options = CallOptions::default().report_faults(mode == "report");
        let _ = f.call([Scalar::I64(1).into()], options);
        std::process::exit(0);
    }
    let out = child(NAME, "report");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let lines = locus_lines(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    // The kernel's function, or its C wrapper where LLVM inlined the function into it.
    let named = ["`deref` (pc 0x", "`_mlir_ciface_deref` (pc 0x"];
    assert!(
        lines[0]
            .starts_with("locus: SIGSEGV (null pointer dereference) at address 0x0 in function ")
            && named.iter().any(|n| lines[0].contains(n))
            && lines[0].ends_with("fault.mlir.so"),
        "{}",
        lines[0]
    );
    let out = child(NAME, "quiet");
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out:?}");
    assert!(locus_lines(&out).is_empty(), "{out:?}");
}

/// The scope is the kernel's call alone: a kernel that returns gives its result, and a
/// fault after the call (here in the test's own code) is passed on, not reported.
#[test]
fn the_scope_ends_with_the_call() {
    const NAME: &str = "faults::the_scope_ends_with_the_call";
    if child_mode().is_some() {
        let f = function("fault.mlir", "add_one");
        let options = CallOptions::default().report_faults(true);
        let results = f.call([Scalar::I64(41).into()], options).unwrap();
        assert!(
            matches!(results[..], [Value::Scalar(Scalar::I64(42))]),
            "{results:?}"
        );
        println!("result 42");
        let null: *const u64 = std::hint::black_box(std::ptr::null());
        // SAFETY: none: the fault is the test.
        let v = unsafe { null.read_volatile() };
        std::process::exit(i32::from(v == 0));
    }
    let out = child(NAME, "report");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("result 42"),
        "{out:?}"
    );
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out:?}");
    assert!(locus_lines(&out).is_empty(), "{out:?}");
}
