//! How the AArch64 tests cross-build with cargo (crates/gc/tests/build_aarch64.rs builds
//! the runtime library, crates/cli/tests/cli/gc_aarch64.rs `locus`): one target directory
//! and one set of options, so that the second build reuses the first's MMTk and runtime.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Rust target.
pub const TARGET: &str = "aarch64-unknown-linux-gnu";

/// `cargo build`/`cargo rustc` for [`TARGET`] in `workspace`: the target directory
/// `target/gc-runtime-alone` (no outer cargo holds it locked), the cross linker, and the
/// runtime optimized as the workspace's profile optimizes MMTk (`opt-level = 2`, debug
/// assertions kept): unoptimized under qemu's emulation, MMTk's start-up walk of its chunk
/// table for the reserved side metadata takes about 4 s per process and a MarkSweep run of
/// `inline/trees.ll` 17 s (0.4 s and 1.2 s optimized).
pub fn cargo(workspace: &Path, subcommand: &str) -> Command {
    let mut cmd = Command::new(option_env!("CARGO").unwrap_or("cargo"));
    cmd.args([subcommand, "--quiet", "--target", TARGET])
        .args([
            "--config",
            "profile.dev.package.locus-gc-runtime.opt-level=2",
            // Line tables only, as the host's runtime library for the tests
            // (runtime_library.rs): less to compile and to link.
            "--config",
            "profile.dev.debug=\"line-tables-only\"",
        ])
        .env("CARGO_TARGET_DIR", target_dir(workspace))
        .env(
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
            "aarch64-linux-gnu-gcc",
        )
        .current_dir(workspace);
    cmd
}

/// The environment variable naming a directory that holds `liblocus_gc_runtime.a` built
/// for [`TARGET`] with [`cargo`]'s options before the tests ran: `make test` builds it in
/// the workspace's target directory (`target/aarch64-unknown-linux-gnu/debug`), where the
/// host's build scripts are built already (MMTk's needs libgit2's C: about 45 s more in a
/// directory of its own).
// The CLI's gc_aarch64 includes this module too; it builds `locus`, not the runtime.
#[allow(dead_code)]
pub const RUNTIME_DIR_VARIABLE: &str = "LOCUS_TEST_GC_RUNTIME_AARCH64_DIR";

/// Where [`cargo`] builds: the debug outputs are in `TARGET/debug` under it.
pub fn target_dir(workspace: &Path) -> PathBuf {
    workspace.join("target/gc-runtime-alone")
}
