//! External tools the tests check against: a program fed on standard input, and the
//! Python that has numpy. Also used by crates/cli/tests/memref.rs (by path).

#![allow(dead_code, clippy::unwrap_used)]

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Runs `program` with `args` and `input` on its standard input; its standard output.
/// Fails the test if it cannot start or does not succeed.
pub fn pipe(program: &str, args: &[&str], input: &str) -> String {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}); scripts/install-deps installs it"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A Python 3 with numpy (the oracle): `python3` if it has it, else the system's.
pub fn numpy_python() -> &'static str {
    static FOUND: OnceLock<&'static str> = OnceLock::new();
    FOUND.get_or_init(|| {
        ["python3", "/usr/bin/python3"]
            .into_iter()
            .find(|p| {
                Command::new(p)
                    .args(["-c", "import numpy"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .unwrap_or_else(|| {
                panic!("no python3 with numpy (the oracle): apt-get install python3-numpy")
            })
    })
}
