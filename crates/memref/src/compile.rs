//! Lowering an MLIR kernel to a shared library with the LLVM 19 tools.
//!
//! `mlir-opt-19` runs [`PIPELINE`] (its first pass, `--llvm-request-c-wrappers`,
//! sets `llvm.emit_c_interface` on every function, so each gets a
//! `_mlir_ciface_NAME` wrapper and each external declaration calls one),
//! `mlir-translate-19 --mlir-to-llvmir` turns the LLVM dialect into IR,
//! `opt-19 -passes=default<O2>` optimizes it (optional, on by default: without
//! it each `_mlir_ciface_` wrapper reaches its function through a PLT call
//! instead of inlining it), `llc-19 -relocation-model=pic -filetype=obj
//! -mtriple=HOST` makes an object and `clang-19 -shared` links it. Memory is allocated by `malloc` (the
//! default lowering of `memref.alloc`, also with an `alignment`: the aligned
//! pointer is then rounded up from the allocated one).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::MemRefError;

/// The `mlir-opt-19` passes, in order.
pub const PIPELINE: &[&str] = &[
    "--llvm-request-c-wrappers",
    "--convert-linalg-to-loops",
    "--expand-strided-metadata",
    "--lower-affine",
    "--convert-scf-to-cf",
    "--finalize-memref-to-llvm",
    "--convert-func-to-llvm",
    "--convert-arith-to-llvm",
    "--convert-index-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
];

/// The LLVM target triple of the machine Locus runs on.
pub fn host_triple() -> &'static str {
    if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        "x86_64-unknown-linux-gnu"
    } else if cfg!(all(target_arch = "aarch64", target_os = "linux")) {
        "aarch64-unknown-linux-gnu"
    } else if cfg!(all(target_arch = "aarch64", target_os = "macos")) {
        "arm64-apple-macosx"
    } else if cfg!(all(target_arch = "x86_64", target_os = "macos")) {
        "x86_64-apple-macosx"
    } else {
        "unknown"
    }
}

/// Runs `program args...`, feeding `stdin`, and returns its standard output.
/// Errors name the program and carry its standard error.
pub(crate) fn run(
    program: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Result<Vec<u8>, MemRefError> {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| MemRefError::Tool {
            tool: program.to_string(),
            stderr: format!("cannot run it ({e}); scripts/install-deps installs LLVM 19 and MLIR"),
        })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A tool that exits early closes its stdin; its stderr then says why.
        let _ = pipe.write_all(input);
    }
    let out = child.wait_with_output().map_err(|e| MemRefError::Tool {
        tool: program.to_string(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(MemRefError::Tool {
            tool: program.to_string(),
            stderr: format!(
                "{} ({})",
                String::from_utf8_lossy(&out.stderr).trim_end(),
                out.status
            ),
        });
    }
    Ok(out.stdout)
}

/// Lowers MLIR source text to LLVM IR text (the first two steps).
pub fn mlir_to_llvm_ir(source: &str) -> Result<String, MemRefError> {
    let lowered = run("mlir-opt-19", PIPELINE, Some(source.as_bytes()))?;
    let ir = run(
        "mlir-translate-19",
        &["--mlir-to-llvmir", "-"],
        Some(&lowered),
    )?;
    String::from_utf8(ir).map_err(|e| MemRefError::Tool {
        tool: "mlir-translate-19".into(),
        stderr: format!("output is not UTF-8: {e}"),
    })
}

/// Compiles MLIR source text to the shared library `output` (optimized).
pub fn compile_str(source: &str, output: &Path) -> Result<(), MemRefError> {
    compile_str_with(source, output, true)
}

/// Compiles MLIR source text to the shared library `output`, running
/// `opt-19 -passes=default<O2>` on the IR when `optimize` is set.
pub fn compile_str_with(source: &str, output: &Path, optimize: bool) -> Result<(), MemRefError> {
    let mut ir = mlir_to_llvm_ir(source)?;
    if optimize {
        let out = run(
            "opt-19",
            &["-passes=default<O2>", "-S", "-"],
            Some(ir.as_bytes()),
        )?;
        ir = String::from_utf8(out).map_err(|e| MemRefError::Tool {
            tool: "opt-19".into(),
            stderr: format!("output is not UTF-8: {e}"),
        })?;
    }
    let object = object_path();
    let object_s = object.to_string_lossy().into_owned();
    let triple = format!("-mtriple={}", host_triple());
    run(
        "llc-19",
        &[
            "-O2",
            "-relocation-model=pic",
            "-filetype=obj",
            &triple,
            "-o",
            &object_s,
            "-",
        ],
        Some(ir.as_bytes()),
    )?;
    let output_s = output.to_string_lossy().into_owned();
    let linked = run("clang-19", &["-shared", "-o", &output_s, &object_s], None);
    // The object is only an intermediate.
    let _ = std::fs::remove_file(&object);
    linked.map(|_| ())
}

/// A fresh path for the intermediate object file. Not `output` with `.o`:
/// that could be a file of the user's, and parallel compiles (tests) need
/// distinct names.
fn object_path() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("locus-memref-{}-{n}.o", std::process::id()))
}

/// Compiles the MLIR file `kernel` to the shared library `output`
/// (optimized with `opt-19` when `optimize` is set).
pub fn compile_file(kernel: &Path, output: &Path, optimize: bool) -> Result<(), MemRefError> {
    let source = std::fs::read_to_string(kernel).map_err(|e| MemRefError::Io {
        path: kernel.display().to_string(),
        message: e.to_string(),
    })?;
    compile_str_with(&source, output, optimize)
}

/// `kernel` with its extension replaced by the platform's shared-library one.
pub fn default_output(kernel: &Path) -> PathBuf {
    kernel.with_extension(std::env::consts::DLL_EXTENSION)
}
