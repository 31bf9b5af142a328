//! The environment ahead-of-time tests run their executables in.

use std::process::Command;

/// `cmd` under the runtime's stress collector, moving when `moving`, printing its
/// statistics; the caller's own collector choice removed.
pub fn under_stress(cmd: &mut Command, moving: bool) -> &mut Command {
    cmd.env_remove("LOCUS_GC_COLLECTOR")
        .env_remove("LOCUS_GC_MOVING")
        .env("LOCUS_GC_STRESS", "1")
        .env(locus_gc_runtime::STATS_ENV, "1");
    if moving {
        cmd.env("LOCUS_GC_MOVING", "1");
    }
    cmd
}
