//! Fatal signals in code Locus runs: one `locus:` line and a documented exit status.
//!
//! The handler is [`locus_signals`], re-exported here ([`install`], [`fault_scope`],
//! [`register_code`], [`program_pthread_create`]), which knows nothing of the collector
//! but for one hook, [`FaultClaimer`]. What this module adds is the GC's claim: the stress
//! collector's page protection makes an access to a freed object fault, and such a fault
//! is a dangling reference, reported as `locus: gc: dangling reference: ..., caught as
//! SIGSEGV` with exit status [`DANGLING_EXIT_STATUS`] (2), as every other dangling
//! reference the runtime finds; or, under a runtime whose
//! [`OnFault`](crate::runtime::OnFault) lets the run continue, the object's pages are made
//! accessible again (they read poison), the access is recorded as a
//! [`GcFault::FreedAccess`] for the runtime to report at its next call, and the access
//! proceeds. [`install`] here sets that claimer and installs the handlers, and
//! [`reporting_scope`] here does that before it enters a fault scope.

use std::fmt;

use crate::runtime::pages::{self, Mode};
use crate::runtime::GcFault;

pub use locus_signals::*;

/// The exit status after a dangling reference, found by the collector or caught by the
/// stress collector's page protection.
pub const DANGLING_EXIT_STATUS: i32 = 2;

/// Sets the GC's [claimer](set_claimer) (an access to a freed object of a stress heap),
/// installs the handlers (once per process) and prepares the calling thread
/// ([`locus_signals::install`]). Returns false if the handlers could not be installed.
pub fn install() -> bool {
    // Another claimer set first keeps its place: freed objects are then reported as plain
    // faults.
    // SAFETY: `claim_freed_access` is async-signal-safe (see its docs: it reads the
    // chunks' HandlerTable and atomics, formats into the handler's buffer, and calls
    // mprotect before answering Retry), and never removes from a table.
    unsafe { set_claimer(claim_freed_access) };
    // SAFETY: `source_function_name` only compares bytes.
    unsafe { set_symbol_namer(crate::runtime::fault::source_function_name) };
    locus_signals::install()
}

/// [`install`] (the GC's claimer set) and a fault scope on this thread: this module's
/// form of [`locus_signals::reporting_scope`], which would install the handlers without
/// the GC's claim.
pub fn reporting_scope() -> FaultScope {
    install();
    fault_scope(false)
}

/// The GC's claimer: a SIGSEGV or SIGBUS at an address in a freed object of a stress-mode
/// heap. Async-signal-safe: reads the chunks' table and atomics, formats into the
/// handler's buffer, and calls `mprotect` for a recorded access.
fn claim_freed_access(fault: &Fault<'_>, message: &mut dyn fmt::Write) -> Claim {
    if fault.signal != libc::SIGSEGV && fault.signal != libc::SIGBUS {
        return Claim::Pass;
    }
    let Some(hit) = pages::find_freed(fault.readers(), fault.addr) else {
        return Claim::Pass;
    };
    if hit.mode() == Mode::Record && hit.record_and_unprotect(fault.addr) {
        return Claim::Retry;
    }
    let freed = GcFault::FreedAccess {
        addr: fault.addr,
        object: hit.object,
    };
    let _ = write!(message, "gc: {freed}");
    if hit.mode() == Mode::Abort {
        Claim::Abort
    } else {
        Claim::Exit(DANGLING_EXIT_STATUS)
    }
}
