//! `locus memref`: compile MLIR kernels and call them on .npy files.

use std::io::Write;
use std::path::{Path, PathBuf};

use locus_memref::mapped::MappedNpy;
use locus_memref::npy::{self, Dtype, NpyArray};
use locus_memref::run::{open_with_runner_utils, run_kernel, RunOptions};
use locus_memref::signature::{Dim, ElemType, Type};
use locus_memref::slice::{self, Slicing};
use locus_memref::{
    compile, Arg, CallOptions, Error as MemRefError, Library, MemRefArg, Scalar, Signature, Value,
};

use crate::Failure;

/// The `locus memref` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Lower an MLIR kernel to a shared library (mlir-opt-19 with C wrappers requested
    /// for every function the kernel defines, mlir-translate-19, llc-19, clang-19 -shared).
    Compile {
        /// The kernel (.mlir).
        kernel: PathBuf,
        /// The shared library to write (default: the kernel's name with .so).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print the mlir-opt-19 command that lowers this kernel and stop.
        #[arg(long)]
        print_pipeline: bool,
        #[command(flatten)]
        lowering: Lowering,
    },
    /// Compile a kernel and run its entry function, as mlir-cpu-runner does: what it
    /// prints (vector.print, printMemrefF32, printF32...) goes to standard output, then its
    /// result, if it returns one (i32, i64, index; f32 and f64 as %e, or INF, -INF, nan). The
    /// MLIR 19 runner utils are loaded when the kernel needs them.
    ///
    /// Exit status: 0 when the entry returned; 1 when it was not called; 3 when the kernel
    /// died of a signal or called abort(), after one `locus: SIGNAL ...` line; 124 when
    /// --timeout ended the run.
    Run {
        /// The kernel (.mlir).
        kernel: PathBuf,
        /// The function to call (a func.func, or an llvm.func as mlir-cpu-runner calls
        /// them): no arguments; no result, or one i32, i64, index, f32 or f64.
        #[arg(short, long, default_value = "main")]
        entry: String,
        /// A library whose symbols the kernel may call (repeatable, as mlir-cpu-runner's
        /// -shared-libs): opened in order, with RTLD_GLOBAL, before the kernel's library.
        #[arg(long = "shared-lib", value_name = "LIB")]
        shared_libs: Vec<PathBuf>,
        #[command(flatten)]
        lowering: Lowering,
        #[arg(long, value_name = "SECONDS", value_parser = crate::watchdog::parse_seconds, help = crate::watchdog::HELP)]
        timeout: Option<std::time::Duration>,
    },
    /// Call FUNC of a library through `_mlir_ciface_FUNC`: memref arguments are .npy
    /// files, scalars are numbers; memref results go to the --out files in order,
    /// scalar results are printed one per line.
    ///
    /// Exit status: 0 when the kernel returned; 1 when it was not called (bad arguments,
    /// library or signature); 3 when the kernel died of a signal (SIGSEGV, SIGBUS, SIGILL,
    /// SIGFPE, SIGTRAP or a stack overflow), after one `locus: SIGNAL ...` line naming the
    /// address and the function.
    Call {
        /// The shared library.
        library: PathBuf,
        /// The function's name (without `_mlir_ciface_`).
        function: String,
        /// The MLIR function type, e.g. "(memref<?xf32>, f32) -> (memref<?xf32>, f32)".
        #[arg(long, required_unless_present = "sig_from")]
        sig: Option<String>,
        /// Take the signature from `func.func @FUNC` in this .mlir file instead, as
        /// mlir-opt-19 parses it (comments and strings are never read, aliases resolved);
        /// a function of tensors as `memref compile` bufferizes it (`tensor<?xf32>` is
        /// `memref<?xf32>`).
        #[arg(long, conflicts_with = "sig")]
        sig_from: Option<PathBuf>,
        /// One per argument, in order: a .npy path for a memref, a number for a scalar. A
        /// memref may be a slice of the file, as numpy slices (`A.npy[::2, 1:]`, `A.npy[0]`,
        /// `A.npy[::-1].T`): passed without a copy to a strided parameter, as a row-major
        /// copy (written back with --inout) to an identity-layout or unranked one (a
        /// slicing applies to the memref's dimensions, not to a vector element's lanes).
        /// A .npy file in C
        /// order and native byte order is mapped, not read (so --max-input-bytes does not
        /// apply to it): the kernel works on the file's pages, and with --inout writes the
        /// file itself. A file given for several parameters is one array, as numpy passes
        /// one array twice: what the kernel writes through one is read through the others
        /// and kept (a row-major slice at an offset, `A.npy[1:]`, reaches an
        /// identity-layout parameter without a copy). Except a view that reaches an
        /// identity-layout parameter as a row-major copy (a transpose, a step, a
        /// reversal): through it the kernel reads the array as it was before the call, as
        /// numpy's `a += a.T` copies the overlapping operand, and what it writes into it
        /// is written back where changed (an element written through both is an error);
        /// for the kernel's loops on one memory, declare that parameter strided.
        #[arg(long = "arg", value_name = "VALUE", allow_hyphen_values = true)]
        args: Vec<String>,
        /// One per memref result, in order, each a file of its own: not the library, a
        /// --shared-lib, the --sig-from kernel, nor (with --inout) an argument's file. An
        /// argument's file without --inout is replaced by the result, as np.save over it.
        /// An integer result (MLIR's are signless) is written unsigned (`uint8`) when every
        /// input file of its element type is unsigned, signed otherwise.
        #[arg(long = "out", value_name = "OUT.npy")]
        outs: Vec<PathBuf>,
        /// Write memref arguments back to their files after the call.
        #[arg(long)]
        inout: bool,
        /// The element type of .npy files whose dtype names none, only a size: what
        /// numpy writes for ml_dtypes arrays ('<V2' for bfloat16, '<V1' or '<f1' for the
        /// float8 types). One of bfloat16, float8_e5m2, float8_e4m3, float8_e4m3fn,
        /// float8_e5m2fnuz, float8_e4m3fnuz, float8_e4m3b11fnuz; --inout writes such a
        /// file back with its own dtype.
        #[arg(long, value_name = "NAME", value_parser = parse_ml_dtype)]
        ml_dtype: Option<Dtype>,
        /// A library whose symbols the kernel may call (repeatable, as mlir-cpu-runner's
        /// -shared-libs): opened in order, with RTLD_GLOBAL, before the kernel's library.
        /// The MLIR 19 runner utils are loaded without it when the kernel needs them.
        #[arg(long = "shared-lib", value_name = "LIB")]
        shared_libs: Vec<PathBuf>,
        /// Free no returned buffer (for kernels returning buffers they keep). Without it,
        /// results pointing into an argument or a global are never freed, and a fresh
        /// allocation is freed once, after every result pointing into it is written;
        /// unranked results' heap descriptors are always freed.
        #[arg(long)]
        borrow_results: bool,
    },
}

/// How `compile` and `run` lower a kernel.
#[derive(clap::Args)]
pub struct Lowering {
    /// Replace the pass pipeline: mlir-opt's textual syntax, comma-separated,
    /// optionally inside builtin.module(...), e.g. "convert-scf-to-cf,convert-func-to-llvm".
    #[arg(long, value_name = "PASSES")]
    pipeline: Option<String>,
    /// A pass to run before the pipeline (repeatable, in order), e.g. canonicalize or
    /// "one-shot-bufferize{bufferize-function-boundaries}".
    #[arg(long = "pass", value_name = "NAME")]
    passes: Vec<String>,
    /// Skip the opt-19 -O2 step (keep the IR as mlir-translate-19 wrote it).
    #[arg(long)]
    no_opt: bool,
    /// An LLVM command-line option for opt-19 and llc-19 (repeatable), as
    /// mlir-cpu-runner takes them, e.g. --llvm-option=-matrix-default-layout=row-major.
    #[arg(long = "llvm-option", value_name = "OPT", allow_hyphen_values = true)]
    llvm_options: Vec<String>,
}

impl Lowering {
    fn options(&self, kernel: &Path) -> compile::Options {
        compile::Options {
            pipeline: self.pipeline.clone(),
            passes: self.passes.clone(),
            optimize: !self.no_opt,
            source_name: Some(kernel.display().to_string()),
            llvm_options: self.llvm_options.clone(),
            ..compile::Options::default()
        }
    }
}

/// A result as mlir-cpu-runner prints it: integers in decimal, floats as C's `%e`, but
/// infinities and NaNs as LLVM's `write_double` writes them (`INF`, `-INF`, `nan` of
/// either sign).
fn runner_format(value: Scalar) -> String {
    let float = |x: f64| {
        if x.is_nan() {
            return "nan".to_string();
        }
        if x.is_infinite() {
            return if x < 0.0 { "-INF" } else { "INF" }.to_string();
        }
        // Rust writes `3.500000e0`; C writes `3.500000e+00`.
        let text = format!("{x:.6e}");
        match text.split_once('e') {
            Some((mantissa, exp)) => {
                let (sign, digits) = match exp.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', exp),
                };
                format!("{mantissa}e{sign}{digits:0>2}")
            }
            None => text,
        }
    };
    match value {
        Scalar::F32(x) => float(f64::from(x)),
        Scalar::F64(x) => float(x),
        other => other.to_string(),
    }
}

/// An `ml_dtypes` type by its name (`bfloat16`, `float8_e4m3fn`...).
fn parse_ml_dtype(name: &str) -> Result<Dtype, String> {
    Dtype::from_ml_name(name).ok_or_else(|| {
        format!(
            "not an ml_dtypes type Locus reads: {}",
            Dtype::ml_dtypes()
                .map(Dtype::descr)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The file a path names (device and inode), if it exists: the same file under two names
/// is one file.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The memref sizes of an array of `shape` for elements of `elem`: the shape itself, or
/// for vector elements the shape without its last dimensions, which must be the vector's.
fn memref_sizes(shape: &[i64], elem: ElemType) -> Result<Vec<i64>, String> {
    let lanes: Vec<i64> = elem.lane_dims().iter().map(|&d| d as i64).collect();
    match shape.len().checked_sub(lanes.len()) {
        Some(rank) if shape[rank..] == lanes[..] => Ok(shape[..rank].to_vec()),
        _ => {
            let (last, plural) = match lanes.len() {
                1 => (format!("{}", lanes[0]), "a last dimension"),
                _ => (format!("{lanes:?}"), "last dimensions"),
            };
            Err(format!(
                "shape {shape:?}: elements of {elem} need {plural} of {last}"
            ))
        }
    }
}

fn fail(message: impl Into<String>) -> Failure {
    Failure::Message(message.into())
}

/// A failure to read a signature from the kernel at `path` (given as `option`, e.g.
/// `--sig-from `, or "") as `PATH:LINE:COLUMN: message` when it has a position.
fn source_error(option: &str, path: &Path, src: &str, e: MemRefError) -> Failure {
    match e {
        MemRefError::Parse { at, message } => {
            // The parser reports positions on character boundaries (the end for
            // a missing function); `get` keeps a wrong one from panicking.
            let before = src.get(..at).unwrap_or(src);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            fail(format!(
                "{option}{}:{line}:{column}: {message}",
                path.display()
            ))
        }
        // mlir-opt read the kernel from its standard input: name the user's file.
        MemRefError::Tool { tool, stderr } => fail(format!(
            "{option}{}: {tool} failed: {}",
            path.display(),
            stderr
                .trim_end()
                .replace("<stdin>:", &format!("{}:", path.display()))
        )),
        other => fail(format!("{option}{}: {other}", path.display())),
    }
}

/// Runs a `locus memref` subcommand.
pub fn run_command(
    command: &Command,
    reader: &crate::input::Input,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    match command {
        Command::Compile {
            kernel,
            output,
            print_pipeline,
            lowering,
        } => {
            let options = lowering.options(kernel);
            if !*print_pipeline && kernel.as_path() == Path::new("-") && output.is_none() {
                return Err(fail(
                    "-o is needed when the kernel comes from standard input",
                ));
            }
            let source = reader.read(kernel).map_err(fail)?;
            let source = String::from_utf8(source)
                .map_err(|e| fail(format!("{}: not UTF-8 text: {e}", kernel.display())))?;
            if *print_pipeline {
                // Shell-quoted as a user would type it.
                let args: Vec<String> = options
                    .mlir_opt_args(&source)
                    .iter()
                    .map(|a| match a.split_once('=') {
                        Some((flag, value)) if value.contains([' ', '{', '(']) => {
                            format!("{flag}='{value}'")
                        }
                        _ => a.clone(),
                    })
                    .collect();
                writeln!(
                    out,
                    "# mlir-opt-19 --mlir-print-debuginfo, then {} on each function the kernel defines",
                    compile::EMIT_C_INTERFACE
                )
                .map_err(|e| fail(e.to_string()))?;
                writeln!(out, "mlir-opt-19 {}", args.join(" ")).map_err(|e| fail(e.to_string()))?;
                return Ok(());
            }
            let output = output
                .clone()
                .unwrap_or_else(|| compile::default_output(kernel));
            // The kernel was read, but linking over it would leave the user without it.
            let same = matches!((place(&output), place(kernel)), (Some(a), Some(b)) if a == b);
            if kernel.as_path() != Path::new("-") && same {
                return Err(fail(format!(
                    "-o {}: the kernel itself (name another file)",
                    output.display()
                )));
            }
            compile::compile_with(&source, &output, &options).map_err(|e| fail(e.to_string()))?;
            writeln!(out, "{}", output.display()).map_err(|e| fail(e.to_string()))
        }
        Command::Run {
            kernel,
            entry,
            shared_libs,
            lowering,
            timeout,
        } => {
            let _watchdog = crate::watchdog::start(*timeout, &kernel.display().to_string());
            let source = reader.read_to_string(kernel).map_err(fail)?;
            let options = RunOptions {
                entry: entry.clone(),
                shared_libs: shared_libs.clone(),
                compile: lowering.options(kernel),
                // A kernel that faults ends the process with one `locus:` line naming the
                // signal, the address and the function, and exit status 3.
                report_faults: true,
            };
            // A reader that stops early ends the kernel as it ends `cat`, as in `jit run`
            // (the compiler's tools run on this thread before the kernel does, so SIGPIPE
            // cannot simply get its default action after them).
            crate::sigpipe_for_program_beside_tools();
            // SAFETY: the user runs the kernel they name; this is the command's purpose.
            let result = unsafe { run_kernel(&source, &options) };
            let result = result.map_err(|e| match e {
                MemRefError::Parse { .. } => source_error("", kernel, &source, e),
                other => fail(other.to_string()),
            })?;
            if let Some(value) = result {
                writeln!(out, "{}", runner_format(value)).map_err(|e| fail(e.to_string()))?;
            }
            Ok(())
        }
        Command::Call {
            library,
            function,
            sig,
            sig_from,
            args,
            outs,
            inout,
            ml_dtype,
            shared_libs,
            borrow_results,
        } => {
            let signature = match (sig, sig_from) {
                (Some(s), _) => Signature::parse(s).map_err(|e| fail(format!("--sig: {e}")))?,
                (None, Some(path)) => {
                    let src = reader
                        .read_to_string(path)
                        .map_err(|e| fail(format!("--sig-from {e}")))?;
                    Signature::from_mlir(&src, function)
                        .map_err(|e| source_error("--sig-from ", path, &src, e))?
                }
                (None, None) => return Err(fail("--sig or --sig-from is required")),
            };
            call(
                reader,
                shared_libs,
                library,
                function,
                signature,
                sig_from.as_deref(),
                args,
                outs,
                *inout,
                *ml_dtype,
                *borrow_results,
                out,
            )
        }
    }
}

/// An argument as read from the command line.
enum Input {
    Scalar(Scalar),
    /// A memref: a view of one of the call's arrays ([`NpyFile`], by index).
    Array {
        file: usize,
        slicing: Option<Slicing>,
    },
}

/// A `.npy` file given as one or more memref arguments: read or mapped once, so every
/// argument naming it is the same array, as when numpy passes one array twice (a write
/// through one parameter is read through the other and kept).
struct NpyFile {
    path: PathBuf,
    /// The file's identity, or `None` for standard input.
    id: Option<(u64, u64)>,
    array: Storage,
    /// The element type of the first parameter given it.
    elem: ElemType,
    /// The first argument given it, for errors.
    first: usize,
}

/// Where an array argument's data is: the file's pages, or a buffer it was read into
/// (standard input, Fortran order, the other byte order).
enum Storage {
    Mapped(MappedNpy),
    Read(NpyArray),
}

impl Storage {
    fn dtype(&self) -> Dtype {
        match self {
            Storage::Mapped(m) => m.header().dtype,
            Storage::Read(a) => a.dtype(),
        }
    }

    fn sizes(&self) -> Vec<i64> {
        match self {
            Storage::Mapped(m) => m.sizes(),
            Storage::Read(a) => a.sizes(),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Storage::Mapped(m) => m.data_mut(),
            Storage::Read(a) => a.bytes_mut(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn call(
    reader: &crate::input::Input,
    shared_libs: &[PathBuf],
    library: &Path,
    name: &str,
    signature: Signature,
    sig_from: Option<&Path>,
    args: &[String],
    outs: &[PathBuf],
    inout: bool,
    ml_dtype: Option<Dtype>,
    borrow_results: bool,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    if args.len() != signature.inputs.len() {
        return Err(fail(format!(
            "{} --arg given, the signature {signature} takes {}",
            args.len(),
            signature.inputs.len()
        )));
    }
    let memref_results = signature
        .results
        .iter()
        .filter(|t| matches!(t, Type::MemRef(_)))
        .count();
    if outs.len() != memref_results {
        return Err(fail(format!(
            "{} --out given, the signature returns {memref_results} memref(s)",
            outs.len()
        )));
    }
    let mut inputs = Vec::with_capacity(args.len());
    let mut files: Vec<NpyFile> = Vec::new();
    for (i, (text, ty)) in args.iter().zip(&signature.inputs).enumerate() {
        let what = format!("argument {i} (--arg {text})");
        match ty {
            Type::Scalar(e) => {
                let s = Scalar::parse(*e, text)
                    .ok_or_else(|| fail(format!("{what}: not a {e} value")))?;
                inputs.push(Input::Scalar(s));
            }
            Type::MemRef(m) => {
                // A file that exists is taken whole, whatever its name; else a slicing
                // may follow the name (`A.npy[::2, 1:]`, `A.npy.T`).
                let (path, slicing) = match slice::split_argument(text) {
                    (name, Some(s)) if !Path::new(text).exists() => {
                        let slicing = Slicing::parse(s).map_err(|e| match e {
                            MemRefError::Parse { at, message } => fail(format!(
                                "{what}: {message} (at `{}`)",
                                s.get(at..).unwrap_or(s)
                            )),
                            other => fail(format!("{what}: {other}")),
                        })?;
                        (PathBuf::from(name), Some(slicing))
                    }
                    _ => (PathBuf::from(text), None),
                };
                // One array per file, whatever the spelling of its path: a file given
                // again is the array already opened.
                let id = file_id(&path);
                let stdin = path == Path::new("-");
                let same = files.iter().position(|f| {
                    if stdin {
                        f.id.is_none()
                    } else {
                        id.is_some() && f.id == id
                    }
                });
                if stdin && inout {
                    return Err(fail(format!(
                        "{what}: --inout cannot write an array back to standard input"
                    )));
                }
                let file = match same {
                    Some(k) if files[k].elem != m.elem => {
                        return Err(fail(format!(
                            "{what}: the same array as argument {}, given to a parameter of \
                             another element type ({} and {}): pass a copy of the file",
                            files[k].first, files[k].elem, m.elem
                        )))
                    }
                    Some(k) => k,
                    None => {
                        // A regular file is mapped, not read (shared with --inout, so the
                        // kernel writes the file), unless its data needs reordering or
                        // realigning.
                        let mapped = if stdin {
                            None
                        } else {
                            // SAFETY: the user names the file for this call; nothing else
                            // is expected to write it meanwhile (results are written to
                            // new files, renamed over the old ones).
                            unsafe { MappedNpy::open_as(&path, inout, m.elem.align(), ml_dtype) }
                                .map_err(|e| fail(format!("{what}: {e}")))?
                        };
                        let array = match mapped {
                            Some(m) => Storage::Mapped(m),
                            None => {
                                let bytes = reader
                                    .read(&path)
                                    .map_err(|e| fail(format!("{what}: {e}")))?;
                                Storage::Read(
                                    NpyArray::parse_as(&bytes, ml_dtype)
                                        .map_err(|e| fail(format!("{what}: {e}")))?,
                                )
                            }
                        };
                        files.push(NpyFile {
                            path: path.clone(),
                            id,
                            array,
                            elem: m.elem,
                            first: i,
                        });
                        files.len() - 1
                    }
                };
                let array = &files[file].array;
                if !array.dtype().fits(m.elem) {
                    return Err(fail(format!(
                        "{what}: dtype {} does not match the signature's {m}",
                        array.dtype().descr()
                    )));
                }
                // The sizes the kernel sees: the file's (without the lanes of vector
                // elements), sliced.
                let file_sizes = memref_sizes(&array.sizes(), m.elem)
                    .map_err(|e| fail(format!("{what}: {e}")))?;
                let sizes = match &slicing {
                    Some(sl) => {
                        let strides = locus_memref::signature::row_major(&file_sizes);
                        sl.apply(0, &file_sizes, &strides)
                            .map_err(|e| fail(format!("{what}: {e}")))?
                            .1
                    }
                    None => file_sizes,
                };
                if let Some(shape) = &m.shape {
                    if shape.len() != sizes.len() {
                        return Err(fail(format!(
                            "{what}: rank {} (shape {sizes:?}) does not match the signature's {m}",
                            sizes.len(),
                        )));
                    }
                    for (d, (want, &got)) in shape.iter().zip(&sizes).enumerate() {
                        if let Dim::Static(w) = *want {
                            if w != got {
                                return Err(fail(format!(
                                    "{what}: size {got} in dimension {d} does not match the signature's {m}"
                                )));
                            }
                        }
                    }
                }
                inputs.push(Input::Array { file, slicing });
            }
        }
    }
    check_outputs(outs, inout, &files, library, shared_libs, sig_from)?;
    // Opened first and dropped last (locals drop in reverse order), so the
    // kernel's library binds to their symbols and never outlives them.
    let mut shared = Vec::with_capacity(shared_libs.len());
    for path in shared_libs {
        // SAFETY: the user names the library to load; this is the option's purpose.
        let l =
            unsafe { Library::open_global(path) }.map_err(|e| fail(format!("--shared-lib {e}")))?;
        shared.push(l);
    }
    // SAFETY: the user names the library to load and vouches for its signature;
    // this is the command's purpose. Arguments are still checked against it.
    // The MLIR runner utils are loaded too if the kernel needs them.
    let lib =
        unsafe { open_with_runner_utils(library, &mut shared) }.map_err(|e| fail(e.to_string()))?;
    // SAFETY: as above.
    let function =
        unsafe { lib.function(name, signature.clone()) }.map_err(|e| fail(e.to_string()))?;
    // Results pointing into an argument's buffer borrow it (and are never
    // freed); results sharing a fresh allocation share its guard, which frees
    // it once the last of them is written and dropped.
    // A slice given to an identity-layout parameter goes as a row-major copy (written
    // back with --inout); a strided parameter gets the file's buffer itself.
    // A kernel that faults ends the process with one `locus:` line naming the signal, the
    // address and the function, and exit status 3 (locus-signals, as for `gc run`).
    let options = CallOptions::default()
        .borrow_results(borrow_results)
        .copy_strided(true)
        .report_faults(true);
    // A signless integer result is written unsigned when its element type's inputs are.
    let input_dtypes: Vec<Dtype> = files.iter().map(|f| f.array.dtype()).collect();
    // One argument per file over its whole array; every argument naming the file is a
    // view of it (`alias`): the kernel gets one buffer, as numpy passes one array.
    let mut whole = Vec::with_capacity(files.len());
    for f in &mut files {
        let bad =
            |e: MemRefError| fail(format!("argument {} ({}): {e}", f.first, f.path.display()));
        let sizes = memref_sizes(&f.array.sizes(), f.elem)
            .map_err(|e| bad(MemRefError::Buffer { message: e }))?;
        whole.push(MemRefArg::from_bytes(f.elem, f.array.bytes_mut(), &sizes).map_err(bad)?);
    }
    let mut call_args: Vec<Arg<'_>> = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        match input {
            Input::Scalar(s) => call_args.push(Arg::Scalar(*s)),
            Input::Array { file, slicing } => {
                // SAFETY: every alias goes to the one call below; `whole` is dropped
                // unused.
                let m = unsafe { whole[*file].alias() };
                let m = match slicing {
                    Some(sl) => m
                        .sliced(sl)
                        .map_err(|e| fail(format!("argument {i} ({}): {e}", args[i])))?,
                    None => m,
                };
                call_args.push(m.into());
            }
        }
    }
    // No tool runs after this point: a reader that stops early ends the kernel as it ends
    // `cat`, as in `jit run`.
    crate::sigpipe_for_program();
    let results = function
        .call(call_args, options)
        .map_err(|e| fail(e.to_string()))?;
    let mut outs = outs.iter();
    for (k, value) in results.into_iter().enumerate() {
        match value {
            Value::Scalar(s) => writeln!(out, "{s}").map_err(|e| fail(e.to_string()))?,
            Value::MemRef(m) => {
                let Some(path) = outs.next() else {
                    return Err(fail(format!("result {k}: no --out for it")));
                };
                let bad = |e: MemRefError| fail(format!("result {k}: {e}"));
                let mut shape: Vec<usize> = m.sizes().iter().map(|&s| s.max(0) as usize).collect();
                // A vector element's dimensions are the array's last ones.
                shape.extend(m.elem().lane_dims());
                let dtype = Dtype::for_result(m.elem(), &input_dtypes);
                // Written straight from the kernel's buffer when it is row-major; else
                // gathered into a copy first.
                match m.contiguous_bytes().map_err(bad)? {
                    Some(bytes) => npy::write_npy(path, dtype, &shape, bytes).map_err(bad)?,
                    None => {
                        let bytes = m.to_bytes().map_err(bad)?;
                        npy::write_npy(path, dtype, &shape, &bytes).map_err(bad)?;
                    }
                }
            }
        }
    }
    if inout {
        // Each file once, whatever number of arguments named it. A mapped file was
        // written by the kernel itself.
        drop(whole);
        for f in &files {
            if let Storage::Read(array) = &f.array {
                array
                    .write(&f.path)
                    .map_err(|e| fail(format!("--inout: {e}")))?;
            }
        }
    }
    Ok(())
}

/// Where a file is, to tell whether two names are one file: its identity when it exists,
/// else its directory's canonical path and its name.
#[derive(PartialEq)]
enum Place {
    File(u64, u64),
    New(PathBuf, std::ffi::OsString),
}

fn place(path: &Path) -> Option<Place> {
    if let Some((dev, ino)) = file_id(path) {
        return Some(Place::File(dev, ino));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(Place::New(
        dir.canonicalize().ok()?,
        path.file_name()?.to_os_string(),
    ))
}

/// Refuses, before anything runs, outputs that would lose a write or an input: a file
/// named by two --out (the first result would be overwritten), an --out naming an array
/// that --inout writes back (one of the two writes would be lost), and an --out naming the
/// library, a --shared-lib or the --sig-from kernel. An --out naming an argument without
/// --inout replaces the input with the result, as `np.save` over the file numpy loaded.
fn check_outputs(
    outs: &[PathBuf],
    inout: bool,
    files: &[NpyFile],
    library: &Path,
    shared_libs: &[PathBuf],
    sig_from: Option<&Path>,
) -> Result<(), Failure> {
    let inputs: Vec<(String, &Path)> = std::iter::once(("the library".to_string(), library))
        .chain(
            shared_libs
                .iter()
                .map(|l| ("a --shared-lib".to_string(), l.as_path())),
        )
        .chain(sig_from.map(|k| ("the --sig-from kernel".to_string(), k)))
        .collect();
    let places: Vec<Option<Place>> = outs.iter().map(|o| place(o)).collect();
    for (k, out) in outs.iter().enumerate() {
        let Some(here) = &places[k] else { continue };
        let named = |p: &Path| place(p).as_ref() == Some(here);
        if let Some(j) = places[..k].iter().position(|p| p.as_ref() == Some(here)) {
            return Err(fail(format!(
                "--out {}: also the file of result {j}: one of the two results would be lost",
                out.display()
            )));
        }
        if let Some(f) = files
            .iter()
            .find(|f| inout && f.id.is_some() && named(&f.path))
        {
            return Err(fail(format!(
                "--out {}: the array of argument {}, which --inout writes back: the result or \
                 the kernel's writes to the argument would be lost (name another file)",
                out.display(),
                f.first
            )));
        }
        if let Some((what, _)) = inputs.iter().find(|(_, p)| named(p)) {
            return Err(fail(format!(
                "--out {}: {what}, an input of this call",
                out.display()
            )));
        }
    }
    Ok(())
}
