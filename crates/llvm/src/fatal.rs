//! LLVM's fatal errors as one `locus:` line and exit status 1.
//!
//! LLVM ends the process itself on a fatal error (`report_fatal_error`: "LLVM ERROR: ..."
//! and exit status 1) and when an allocation fails (`report_bad_alloc_error`: "LLVM ERROR:
//! out of memory" and `abort`). Damaged bitcode reaches the second: the reader allocates
//! whatever size a record claims. [`report_fatal_errors`] replaces both handlers (in
//! `src/fatal.cpp`), for a program whose every error line starts `locus:`.

extern "C" {
    /// In `src/fatal.cpp`: installs LLVM's fatal-error and bad-alloc handlers.
    fn locus_llvm_install_fatal_handlers();
}

/// From now on, LLVM's fatal errors in this process end it with `locus: LLVM: REASON` and
/// an out-of-memory in LLVM with `locus: LLVM ran out of memory (...)`, both with exit
/// status 1 (`_exit`: nothing else runs). Process-wide, as LLVM's handlers are; call it
/// once, from `main`.
pub fn report_fatal_errors() {
    // SAFETY: installs two handlers; LLVM's handler registration is guarded by its own
    // mutexes.
    unsafe { locus_llvm_install_fatal_handlers() };
}
