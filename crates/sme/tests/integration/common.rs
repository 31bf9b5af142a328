//! What the SME tests share: the IR of one caller/callee case of the matrix, the event
//! sequences the llc oracle compares ([`oracle`]) and LLVM's own test files ([`llvm`]).

// Each test crate uses its own part of this module.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs a tool with `input` on its standard input and returns its standard output; a
/// failure panics with the tool's standard error followed by `note`.
pub fn pipe(tool: &str, args: &[&str], input: &[u8], note: &str) -> Vec<u8> {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {tool} ({e}); scripts/install-deps installs llvm-19")
        });
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{tool} failed: {}{note}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// llc-19's AArch64 object (SME and SME2) of `ir`.
pub fn llc_obj(ir: &str) -> Vec<u8> {
    pipe(
        "llc-19",
        &[
            "-mtriple=aarch64-linux-gnu",
            "-mattr=+sme,+sme2",
            "-filetype=obj",
            "-o",
            "-",
        ],
        ir.as_bytes(),
        "",
    )
}

/// The attributes `names`, quoted and space-separated, as IR writes them.
pub fn attrs(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A caller passing and returning floats through a call to `callee`; the callee is
/// declared with `callee_attrs`, which the call site repeats (as Clang does).
pub fn case(caller: &str, caller_attrs: &[&str], callee: &str, callee_attrs: &[&str]) -> String {
    let ca = attrs(callee_attrs);
    format!(
        "declare float @{callee}(float, float) {ca}\n\
         define float @{caller}(float %x) {} {{\n  \
           %a = fadd float %x, 1.0\n  \
           %r = call float @{callee}(float %a, float %x) {ca}\n  \
           %b = fadd float %r, %x\n  \
           ret float %b\n}}\n",
        attrs(caller_attrs)
    )
}

pub mod llvm;
pub mod oracle;
