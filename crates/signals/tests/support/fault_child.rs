//! One test of a test binary run again in a child process, for the cases that end the
//! process (a fault locus-signals reports). Shared through `#[path]` by the tests of
//! locus-signals, locus-memref and locus-jit.

#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs test `name` (its full path: it is matched `--exact`) of this test binary in a
/// child process with the environment variable `var` set to `mode`, and waits for it.
pub fn run(name: &str, var: &str, mode: &str) -> std::io::Result<Output> {
    Command::new(std::env::current_exe()?)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(var, mode)
        .output()
}

/// The `locus:` lines of a child's standard error.
pub fn locus_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("locus: "))
        .map(str::to_owned)
        .collect()
}
