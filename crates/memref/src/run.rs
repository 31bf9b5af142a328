//! Running a kernel's entry function as `mlir-cpu-runner` does: compile the kernel, load the
//! libraries it needs, call a function that takes no arguments, and hand back its scalar
//! result, if it has one, for the caller to print.
//!
//! The MLIR 19 runner utils (`libmlir_c_runner_utils`, `libmlir_runner_utils`: `printF32`,
//! `printMemrefF32`, `rtclock`, what `vector.print` calls...) are loaded when the kernel's
//! library needs a symbol no other loaded library defines, so a kernel that prints runs
//! without naming them; `--shared-lib` libraries are loaded first, as `-shared-libs` are.
//!
//! ```no_run
//! use locus_memref::run::{run_kernel, RunOptions};
//!
//! let kernel = "func.func @main() -> i32 {\n  %c = arith.constant 42 : i32\n  return %c : i32\n}\n";
//! // SAFETY: the kernel above touches no memory of ours.
//! let result = unsafe { run_kernel(kernel, &RunOptions::default()) }.unwrap();
//! assert_eq!(result.map(|s| s.to_string()), Some("42".to_string()));
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::call::{CallOptions, Library, Scalar, Value};
use crate::compile::{self, Options, Tools};
use crate::signature::{ElemType, Signature, Type};
use crate::Error;

/// The MLIR runner utils, in the order they must be loaded (the second needs the first).
pub const RUNNER_UTILS: &[&str] = &["libmlir_c_runner_utils.so", "libmlir_runner_utils.so"];

/// What to run and with what.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The function to call (`main` by default): no arguments; no result, or one `i32`,
    /// `i64`, `index`, `f32` or `f64`.
    pub entry: String,
    /// Libraries to load first, with their symbols visible to the kernel's.
    pub shared_libs: Vec<PathBuf>,
    /// How to compile the kernel.
    pub compile: Options,
    /// Whether a fault in the kernel ends the process with one `locus:` line and exit
    /// status 3, as [`CallOptions::report_faults`] (off by default: a host's own handlers
    /// stay in charge).
    pub report_faults: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            entry: "main".into(),
            shared_libs: Vec::new(),
            compile: Options::default(),
            report_faults: false,
        }
    }
}

/// Compiles `source`, loads it and calls its entry function; returns the entry's result.
/// What the kernel prints through C's `stdout` is flushed before this returns.
///
/// # Errors
///
/// [`Error::Parse`] when the kernel has no such function or its signature is not
/// one this can call, the compiler's errors, [`Error::Library`] for a library that
/// cannot be loaded or a symbol no library defines.
///
/// # Safety
///
/// The kernel's code runs in this process, with the libraries named: it must not touch
/// memory it does not own, as any native code the caller chooses to run.
pub unsafe fn run_kernel(source: &str, options: &RunOptions) -> Result<Option<Scalar>, Error> {
    let entry = &options.entry;
    let signature = match Signature::from_mlir_with(source, entry, &options.compile.tools) {
        Ok(signature) => signature,
        // An entry written in the LLVM dialect, as mlir-cpu-runner also runs them.
        Err(e) => {
            return match llvm_func_entry(source, entry, &options.compile.tools) {
                // SAFETY: forwarded (this function's contract).
                Some(result) => unsafe { run_llvm_func(source, options, result) },
                None => Err(e),
            };
        }
    };
    let callable = signature.inputs.is_empty()
        && match signature.results[..] {
            [] => true,
            // `index` is an i64 once lowered, as mlir-cpu-runner's -entry-point-result=i64
            // calls it.
            [Type::Scalar(e)] => matches!(
                e,
                ElemType::I32 | ElemType::I64 | ElemType::Index | ElemType::F32 | ElemType::F64
            ),
            _ => false,
        };
    if !callable {
        // Point at the function's name where the text has it (for the message only).
        let at = source
            .find(&format!("@{entry}("))
            .and_then(|i| source[..i].rfind("func.func"))
            .unwrap_or(source.len());
        return Err(Error::Parse {
            at,
            message: format!(
                "@{entry} is {signature}: an entry takes no arguments and returns nothing or \
                 one i32, i64, index, f32 or f64 (`locus memref call` calls any function)"
            ),
        });
    }
    // SAFETY: forwarded (this function's contract).
    let loaded = unsafe { compile_and_load(source, options) }?;
    // SAFETY: the signature is the kernel's own, as mlir-opt-19 parsed it.
    let function = unsafe { loaded.kernel.function(entry, signature) }?;
    let results = function.call(
        Vec::new(),
        CallOptions::default().report_faults(options.report_faults),
    );
    // The kernel printed through C's buffered stdout; the caller's output comes after.
    // SAFETY: fflush(NULL) flushes every C output stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    match results?.into_iter().next() {
        Some(Value::Scalar(s)) => Ok(Some(s)),
        _ => Ok(None),
    }
}

/// The result of `llvm.func @name()` in the kernel, if it has one that takes no arguments
/// and returns nothing (`Some(None)`) or an `i32`, `i64`, `f32` or `f64`, as `mlir-opt-19`
/// prints its type.
fn llvm_func_entry(source: &str, name: &str, tools: &Tools) -> Option<Option<ElemType>> {
    let printed = compile::run(
        &tools.mlir_opt,
        &["--mlir-print-op-generic", "-"],
        Some(source.as_bytes()),
    )
    .ok()?;
    let printed = String::from_utf8(printed).ok()?;
    let symbol = format!("sym_name = \"{name}\"");
    let line = printed
        .lines()
        .find(|l| l.trim_start().starts_with("\"llvm.func\"() <{") && l.contains(&symbol))?;
    let ty = line.split("function_type = !llvm.func<").nth(1)?;
    let (result, params) = ty.split_once(' ')?;
    if !params.starts_with("()>") {
        return None;
    }
    match result {
        "void" => Some(None),
        "i32" => Some(Some(ElemType::I32)),
        "i64" => Some(Some(ElemType::I64)),
        "f32" => Some(Some(ElemType::F32)),
        "f64" => Some(Some(ElemType::F64)),
        _ => None,
    }
}

/// [`run_kernel`] for an entry written as an `llvm.func` returning `result`: called by its
/// own name.
///
/// # Safety
///
/// As for [`run_kernel`].
unsafe fn run_llvm_func(
    source: &str,
    options: &RunOptions,
    result: Option<ElemType>,
) -> Result<Option<Scalar>, Error> {
    // SAFETY: forwarded (this function's contract).
    let loaded = unsafe { compile_and_load(source, options) }?;
    let lib = &loaded.kernel;
    let entry = options.entry.as_str();
    // `llvm_func_entry` read the function's type from the kernel as mlir-opt-19 parsed it:
    // no arguments, this result; each pointer below has that type.
    let scope = options.report_faults.then(locus_signals::reporting_scope);
    let value = match result {
        None => {
            // SAFETY: see above.
            let f = unsafe { lib.typed::<unsafe extern "C" fn()>(entry) }?;
            // SAFETY: see above; the kernel's code is the caller's (the contract).
            unsafe { f() };
            None
        }
        Some(ElemType::I32) => {
            // SAFETY: see above.
            let f = unsafe { lib.typed::<unsafe extern "C" fn() -> i32>(entry) }?;
            // SAFETY: as above.
            Some(Scalar::I32(unsafe { f() }))
        }
        Some(ElemType::I64) => {
            // SAFETY: see above.
            let f = unsafe { lib.typed::<unsafe extern "C" fn() -> i64>(entry) }?;
            // SAFETY: as above.
            Some(Scalar::I64(unsafe { f() }))
        }
        Some(ElemType::F32) => {
            // SAFETY: see above.
            let f = unsafe { lib.typed::<unsafe extern "C" fn() -> f32>(entry) }?;
            // SAFETY: as above.
            Some(Scalar::F32(unsafe { f() }))
        }
        Some(_) => {
            // SAFETY: see above (`llvm_func_entry` gives only these four and f64).
            let f = unsafe { lib.typed::<unsafe extern "C" fn() -> f64>(entry) }?;
            // SAFETY: as above.
            Some(Scalar::F64(unsafe { f() }))
        }
    };
    drop(scope);
    // SAFETY: fflush(NULL) flushes every C output stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    Ok(value)
}

/// A kernel's library and the libraries it binds to.
struct Loaded {
    /// Declared first, so dropped first: it never outlives what it binds to.
    kernel: Library,
    _deps: Vec<Library>,
}

/// Compiles `source` to a temporary library and loads it after `options.shared_libs`
/// (and the runner utils, if it needs them); the file is removed once loaded.
///
/// # Safety
///
/// As for [`run_kernel`]: loading runs the libraries' initializers.
unsafe fn compile_and_load(source: &str, options: &RunOptions) -> Result<Loaded, Error> {
    // Built in a directory of this run's own (mkdtemp), so the library opened is the one
    // just linked: no one else can create or replace a file there. Removed (with the
    // library, which stays mapped) when `scratch` drops, loaded or not.
    let scratch = compile::private_dir()?;
    let library = scratch
        .path()
        .join(Path::new("kernel").with_extension(std::env::consts::DLL_EXTENSION));
    compile::compile_with(source, &library, &options.compile)?;
    let mut deps = Vec::with_capacity(options.shared_libs.len() + RUNNER_UTILS.len());
    for path in &options.shared_libs {
        // SAFETY: the caller chose the libraries (the contract).
        deps.push(unsafe { Library::open_global(path) }?);
    }
    // SAFETY: built from the caller's kernel just now.
    let opened = unsafe { open_with_runner_utils(&library, &mut deps) };
    drop(scratch);
    Ok(Loaded {
        kernel: opened?,
        _deps: deps,
    })
}

/// Opens a kernel's library; if it needs a symbol no loaded library defines, loads the
/// MLIR 19 runner utils (with their symbols visible, pushed on `loaded`, which must outlive
/// the kernel's library) and tries once more. The error, if any, names the symbol.
///
/// # Safety
///
/// As for [`Library::open`]: opening a library runs its initializers.
pub unsafe fn open_with_runner_utils(
    path: &Path,
    loaded: &mut Vec<Library>,
) -> Result<Library, Error> {
    // SAFETY: the caller's contract.
    let opened = unsafe { Library::open(path) };
    let undefined = matches!(&opened, Err(Error::Library { message, .. }) if message.contains("undefined symbol"));
    let Some(dir) = runner_utils_dir().filter(|_| undefined) else {
        return opened;
    };
    for name in RUNNER_UTILS {
        // SAFETY: LLVM 19's own runner libraries, built to be loaded so.
        loaded.push(unsafe { Library::open_global(&dir.join(name)) }?);
    }
    // SAFETY: the caller's contract.
    unsafe { Library::open(path) }
}

/// LLVM 19's library directory, where the runner utils are: `llvm-config-19 --libdir`,
/// else Debian's and Ubuntu's `/usr/lib/llvm-19/lib`.
pub fn runner_utils_dir() -> Option<PathBuf> {
    let from_tool = Command::new("llvm-config-19")
        .arg("--libdir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| PathBuf::from(s.trim()));
    [from_tool, Some(PathBuf::from("/usr/lib/llvm-19/lib"))]
        .into_iter()
        .flatten()
        .find(|dir| RUNNER_UTILS.iter().all(|name| dir.join(name).is_file()))
}
