//! Lowering an MLIR kernel to a shared library with the LLVM 19 tools (or the ones the
//! caller names, [`Tools`]: other builds of the same versions).
//!
//! `mlir-opt-19` parses the kernel and prints it back, and every function the kernel
//! defines gets `llvm.emit_c_interface` ([`request_c_wrappers`]), so each gets a
//! `_mlir_ciface_NAME` wrapper that `call` can use; a function it only declares
//! (`func.func private @expf(f32) -> f32`) is called by its own name, the C symbol, unless
//! the kernel marks it. Then `mlir-opt-19` runs [`PIPELINE`] ([`BUFFERIZE`] first for
//! kernels with tensors; [`Options`] replaces or extends it),
//! `mlir-translate-19 --mlir-to-llvmir` turns the LLVM dialect into IR,
//! `opt-19 -passes=default<O2>` optimizes it (optional, on by default: without
//! it each `_mlir_ciface_` wrapper reaches its function through a PLT call
//! instead of inlining it), `llc-19 -relocation-model=pic -filetype=obj
//! -mtriple=HOST` makes an object and `clang-19 -shared -Wl,-Bsymbolic` links it (with
//! libm, and compiler-rt's builtins when installed, for the `bf16` conversions;
//! `-Bsymbolic` so that a kernel's calls to its own functions stay in the kernel even when
//! one is named like a function the process already has, such as libc's `realloc` or
//! libm's `tanh`, as they do in `mlir-cpu-runner`'s JIT). A kernel with sparse tensors
//! runs MLIR's `sparsifier` pipeline ([`SPARSIFY`]) instead of [`PIPELINE`]; TOSA
//! operations become linalg first ([`TOSA`]). Memory is allocated by `malloc` (the
//! default lowering of `memref.alloc`, also with an `alignment`: the aligned
//! pointer is then rounded up from the allocated one).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Error;

/// The passes a kernel with tensors runs first (see [`uses_tensors`]): one-shot
/// bufferization, function boundaries included and with identity layouts
/// there (a `tensor<?xf32>` argument is a `memref<?xf32>` one), then the
/// deallocation of the temporaries, as MLIR's one-shot-bufferize CPU tests do.
///
/// Not run on memref-only kernels: the deallocation pipeline makes every
/// public function own its results, so a memref result that is a view of an
/// argument (or a global) would become a fresh copy.
pub const BUFFERIZE: &[&str] = &[
    // Arithmetic on whole tensors becomes linalg, which bufferizes.
    "--convert-elementwise-to-linalg",
    "--one-shot-bufferize=bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map",
    "--buffer-deallocation-pipeline",
];

/// The `mlir-opt-19` lowering passes, in order (as flags: `mlir-opt` nests
/// the function passes itself); [`BUFFERIZE`] goes first for kernels with
/// tensors.
///
/// The order follows MLIR's own CPU integration tests (`test-lower-to-llvm`
/// and the one-shot-bufferize RUN lines): linalg, vector transfers and
/// affine become loops, loops become branches, complex arithmetic becomes
/// real arithmetic, and vector (`vector.print` calls the MLIR runner utils'
/// `printF32`...), math (LLVM intrinsics where there is one, libm calls for
/// the rest: the library links `-lm`), memref, complex, func, arith, index,
/// cf and ub go to the LLVM dialect.
pub const PIPELINE: &[&str] = &[
    // After BUFFERIZE when it runs; on memref kernels it lowers the bufferization ops
    // they may use (`bufferization.clone`, ...) and nothing else.
    "--convert-bufferization-to-memref",
    // memref.realloc (finalize-memref-to-llvm does not lower it) becomes scf.if, alloc
    // and copy.
    "--expand-realloc",
    "--convert-linalg-to-loops",
    "--convert-vector-to-scf",
    "--lower-affine",
    // Math with no LLVM intrinsic or libm function (math.ipowi, math.fpowi) becomes
    // functions of the kernel's own, before anything marks math ops illegal.
    "--convert-math-to-funcs",
    "--convert-scf-to-cf",
    "--convert-complex-to-standard",
    "--convert-vector-to-llvm",
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    // convert-math-to-libm unrolls math on vectors into vector.extract/insert around
    // scalar calls: those become LLVM too.
    "--convert-vector-to-llvm",
    "--expand-strided-metadata",
    "--lower-affine",
    "--finalize-memref-to-llvm",
    "--convert-complex-to-llvm",
    "--convert-func-to-llvm",
    "--arith-expand",
    "--convert-arith-to-llvm",
    "--convert-index-to-llvm",
    "--convert-cf-to-llvm",
    "--convert-ub-to-llvm",
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
pub(crate) fn run(program: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, Error> {
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
        .map_err(|e| Error::Tool {
            tool: program.to_string(),
            stderr: format!("cannot run it ({e}); scripts/install-deps installs LLVM 19 and MLIR"),
        })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A tool that exits early closes its stdin; its stderr then says why.
        let _ = pipe.write_all(input);
    }
    let out = child.wait_with_output().map_err(|e| Error::Tool {
        tool: program.to_string(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::Tool {
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

/// The passes a kernel with a transform-dialect schedule runs first (see
/// [`uses_transform`]): the schedule is applied, then removed, as MLIR's tests do.
pub const TRANSFORM: &[&str] = &[
    "--transform-interpreter",
    "--test-transform-dialect-erase-schedule",
];

/// Whether a kernel carries a transform-dialect schedule: a `transform.named_sequence`
/// (or an older `transform.sequence`) op outside `//` comments.
pub fn uses_transform(source: &str) -> bool {
    source.lines().any(|l| {
        let code = l.split("//").next().unwrap_or("");
        code.contains("transform.named_sequence") || code.contains("transform.sequence")
    })
}

/// The passes a kernel with TOSA operations runs first (see [`uses_tosa`]): TOSA becomes
/// linalg, arith and tensor operations, as MLIR's TOSA CPU tests lower it.
pub const TOSA: &[&str] =
    &["func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith,tosa-to-tensor)"];

/// Whether a kernel uses the TOSA dialect (a `tosa.` operation outside `//` comments).
pub fn uses_tosa(source: &str) -> bool {
    source.lines().any(|l| {
        let code = l.split("//").next().unwrap_or("");
        code.contains("tosa.")
    })
}

/// The pipeline of a kernel with sparse tensors (see [`uses_sparse`]), instead of
/// [`BUFFERIZE`] and [`PIPELINE`]: MLIR's own `sparsifier`, which sparsifies, bufferizes
/// and lowers everything to the LLVM dialect, generating the sparse storage code itself
/// (`enable-runtime-library=false`: every one of MLIR 19's sparse CPU tests runs so, and
/// slices, `sparse_tensor.sort` and `push_back` work only so). Reading a tensor from a
/// file still calls the sparse runtime of the MLIR 19 runner utils, which [`crate::run`]
/// and `locus memref call` load when a kernel needs them.
pub const SPARSIFY: &[&str] = &["--sparsifier=enable-runtime-library=false"];

/// Whether a kernel uses the sparse tensor dialect (an encoding or an op) outside `//`
/// comments: [`PIPELINE`] cannot lower it, [`SPARSIFY`] does.
pub fn uses_sparse(source: &str) -> bool {
    source.lines().any(|l| {
        let code = l.split("//").next().unwrap_or("");
        code.contains("sparse_tensor.")
    })
}

/// Whether a kernel uses tensors (and so needs [`BUFFERIZE`]): a `tensor<`
/// type outside `//` comments that is not only the type of an attribute's value
/// (`strides = dense<1> : tensor<2xi64>` on a linalg convolution of memrefs: no value of
/// the kernel is a tensor, and the deallocation pipeline refuses the kernel's own
/// `memref.dealloc`s). (Bufferization ops on memrefs do not count either: the
/// deallocation pipeline would turn a result aliasing an argument into a copy.)
pub fn uses_tensors(source: &str) -> bool {
    source.lines().any(|l| {
        let code = l.split("//").next().unwrap_or("");
        code.match_indices("tensor<")
            .any(|(at, _)| !types_attribute_value(&code[..at]))
    })
}

/// Whether the `tensor<` that follows `before` is the type of an attribute's value:
/// `before` ends in `NAME = dense<...> :` (or `dense_resource<...>`, `sparse<...>`),
/// an attribute of an op's dictionary. `arith.constant dense<...> : tensor<...>` is a
/// tensor value (no `=` before its literal).
fn types_attribute_value(before: &str) -> bool {
    let Some(rest) = before.trim_end().strip_suffix(':') else {
        return false;
    };
    let rest = rest.trim_end();
    if !rest.ends_with('>') {
        return false;
    }
    // The `<` that opens the literal.
    let mut depth = 0i32;
    let mut open = None;
    for (i, c) in rest.char_indices().rev() {
        match c {
            '>' => depth += 1,
            '<' => {
                depth -= 1;
                if depth == 0 {
                    open = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(open) = open else {
        return false;
    };
    let head = &rest[..open];
    let Some(head) = ["dense_resource", "dense", "sparse"]
        .iter()
        .find_map(|k| head.strip_suffix(k))
    else {
        return false;
    };
    head.trim_end().ends_with('=')
}

/// Whether a kernel with tensors declares a function with tensor arguments or results
/// that it does not define (`func.func private @verifyMemRefI8(tensor<*xi8>, ...)`,
/// implemented by the runner utils) while none of the functions it defines has tensors
/// in its signature: one-shot bufferization must assume such a call writes its operands,
/// and a constant cast to an unranked tensor cannot be copied for it ("cannot avoid RaW
/// conflict"). `--func-bufferize` first makes the calls take memrefs, as MLIR's test of
/// those functions does. (Not when a defined function has tensors at its boundary:
/// one-shot bufferization then refuses the `to_tensor`s func-bufferize leaves in it.)
pub fn only_declarations_take_tensors(source: &str) -> bool {
    let mut declared = false;
    for l in source.lines() {
        let code = l.split("//").next().unwrap_or("").trim();
        if !code.starts_with("func.func") || !code.contains("tensor<") {
            continue;
        }
        // A definition's header opens its body; a declaration is private (MLIR's
        // verifier requires it) and has none.
        if code.ends_with('{') {
            return false;
        }
        declared |= code.starts_with("func.func private ");
    }
    declared
}

/// The LLVM and MLIR programs a kernel goes through: names looked up in `PATH`, or paths.
/// The default is LLVM 19's and MLIR 19's, as Debian names them (`mlir-opt-19`...); a
/// caller with other builds of the same versions names its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tools {
    /// Parses, checks and lowers the kernel (`mlir-opt`).
    pub mlir_opt: String,
    /// Translates the lowered kernel to LLVM IR (`mlir-translate`).
    pub mlir_translate: String,
    /// LLVM's optimizer (`opt`).
    pub opt: String,
    /// LLVM's code generator (`llc`).
    pub llc: String,
    /// Links the shared library (`clang`).
    pub clang: String,
}

impl Default for Tools {
    fn default() -> Self {
        Tools {
            mlir_opt: "mlir-opt-19".into(),
            mlir_translate: "mlir-translate-19".into(),
            opt: "opt-19".into(),
            llc: "llc-19".into(),
            clang: "clang-19".into(),
        }
    }
}

/// How to lower a kernel: the pass pipeline, extra passes, the `opt-19`
/// step, the tools and the name diagnostics give the kernel.
#[derive(Clone, Debug)]
pub struct Options {
    /// Replaces the default pipeline (`--pipeline`): passes in `mlir-opt`'s
    /// textual syntax, comma-separated, optionally inside `builtin.module(...)`.
    pub pipeline: Option<String>,
    /// Passes run before the pipeline, in order (`--pass`).
    pub passes: Vec<String>,
    /// Run `opt-19 -passes=default<O2>` on the IR.
    pub optimize: bool,
    /// What `<stdin>` in the tools' diagnostics becomes (the kernel's path).
    pub source_name: Option<String>,
    /// LLVM command-line options given to `opt-19` and `llc-19` (`--llvm-option`), as
    /// `mlir-cpu-runner` takes them: `-matrix-default-layout=row-major`,
    /// `-mattr=+avx2`...
    pub llvm_options: Vec<String>,
    /// The programs that run (default: LLVM 19's and MLIR 19's).
    pub tools: Tools,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pipeline: None,
            passes: Vec::new(),
            optimize: true,
            source_name: None,
            llvm_options: Vec::new(),
            tools: Tools::default(),
        }
    }
}

/// `--name=opts` or `name{opts}` as the pipeline element `name{opts}`.
fn element(pass: &str) -> String {
    let p = pass.trim().trim_start_matches("--");
    match p.split_once('=') {
        Some((name, opts)) if !name.contains(['{', '(']) => format!("{name}{{{opts}}}"),
        _ => p.to_string(),
    }
}

/// Splits a textual pipeline at its top-level commas.
fn split_pipeline(text: &str) -> Vec<String> {
    let mut t = text.trim();
    if let Some(inner) = t
        .strip_prefix("builtin.module(")
        .and_then(|r| r.strip_suffix(')'))
    {
        t = inner;
    }
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in t.char_indices() {
        match c {
            '(' | '{' => depth += 1,
            ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(t[start..i].to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(t[start..].to_string());
    out.iter()
        .map(|e| element(e))
        .filter(|e| !e.is_empty())
        .collect()
}

impl Options {
    /// The pipeline elements that run on `source`, in order.
    pub fn passes_for(&self, source: &str) -> Vec<String> {
        let mut out: Vec<String> = self.passes.iter().map(|p| element(p)).collect();
        match &self.pipeline {
            Some(text) => out.extend(split_pipeline(text)),
            None => {
                if uses_transform(source) {
                    out.extend(TRANSFORM.iter().map(|p| element(p)));
                }
                if uses_tosa(source) {
                    out.extend(TOSA.iter().map(|p| element(p)));
                }
                if uses_sparse(source) {
                    out.extend(SPARSIFY.iter().map(|p| element(p)));
                    return out;
                }
                if uses_tensors(source) {
                    if only_declarations_take_tensors(source) {
                        out.push(element("--func-bufferize"));
                    }
                    out.extend(BUFFERIZE.iter().map(|p| element(p)));
                }
                out.extend(PIPELINE.iter().map(|p| element(p)));
            }
        }
        out
    }

    /// The `mlir-opt-19` arguments that lower `source`: one flag per pass
    /// (`mlir-opt` nests function passes itself), or `--pass-pipeline` when
    /// an element is nested explicitly (`func.func(...)`).
    pub fn mlir_opt_args(&self, source: &str) -> Vec<String> {
        let passes = self.passes_for(source);
        if passes.iter().any(|p| p.contains('(')) {
            return vec![format!(
                "--pass-pipeline=builtin.module({})",
                passes.join(",")
            )];
        }
        passes
            .iter()
            .map(|p| match p.split_once('{') {
                Some((name, opts)) => {
                    format!("--{name}={}", opts.strip_suffix('}').unwrap_or(opts))
                }
                None => format!("--{p}"),
            })
            .collect()
    }

    /// `error` with `<stdin>` replaced by [`Options::source_name`].
    fn locate(&self, error: Error) -> Error {
        match (error, &self.source_name) {
            (Error::Tool { tool, stderr }, Some(name)) => Error::Tool {
                tool,
                stderr: stderr.replace("<stdin>", name),
            },
            (e, _) => e,
        }
    }
}

/// The attribute that makes `mlir-opt` write a `_mlir_ciface_` wrapper for a function.
pub const EMIT_C_INTERFACE: &str = "llvm.emit_c_interface";

/// Parses the kernel with `mlir-opt-19` (which checks it and resolves aliases) and returns
/// its printing, locations kept (`--mlir-print-debuginfo`, so later errors still point at
/// the kernel), with [`EMIT_C_INTERFACE`] on every `func.func` that has a body. Functions
/// the kernel only declares are left as they are: their calls go to the C symbol of their
/// name, or to `_mlir_ciface_NAME` if the kernel marked them itself.
pub fn request_c_wrappers(source: &str, options: &Options) -> Result<String, Error> {
    let mlir_opt = &options.tools.mlir_opt;
    let printed = run(
        mlir_opt,
        &["--mlir-print-debuginfo"],
        Some(source.as_bytes()),
    )
    .map_err(|e| options.locate(e))?;
    let printed = String::from_utf8(printed).map_err(|e| Error::Tool {
        tool: mlir_opt.clone(),
        stderr: format!("output is not UTF-8: {e}"),
    })?;
    Ok(mark_definitions(&printed))
}

/// `printed` (mlir-opt's printing, one op header per line) with [`EMIT_C_INTERFACE`] added
/// to each `func.func` header that opens a body: it ends in ` {`, where a declaration
/// ends in its signature or its location.
fn mark_definitions(printed: &str) -> String {
    let mut out = String::with_capacity(printed.len() + 256);
    for line in printed.split_inclusive('\n') {
        let text = line.trim_end_matches('\n');
        let is_definition = text.trim_start().starts_with("func.func ")
            && text.ends_with(" {")
            && !text.contains(EMIT_C_INTERFACE);
        if !is_definition {
            out.push_str(line);
            continue;
        }
        let head = &text[..text.len() - 2];
        match head.find(" attributes {") {
            Some(at) => {
                let split = at + " attributes {".len();
                out.push_str(&head[..split]);
                out.push_str(EMIT_C_INTERFACE);
                out.push_str(", ");
                out.push_str(&head[split..]);
            }
            None => {
                out.push_str(head);
                out.push_str(" attributes {");
                out.push_str(EMIT_C_INTERFACE);
                out.push('}');
            }
        }
        out.push_str(" {");
        out.push_str(&line[text.len()..]);
    }
    out
}

/// Lowers MLIR source text to LLVM IR text (the first two steps).
pub fn mlir_to_llvm_ir(source: &str) -> Result<String, Error> {
    mlir_to_llvm_ir_with(source, &Options::default())
}

/// Lowers MLIR source text to LLVM IR text with `options`' pipeline.
/// `mlir-opt-19` keeps the kernel's locations in its output, so errors of
/// `mlir-translate-19` point at the kernel too.
pub fn mlir_to_llvm_ir_with(source: &str, options: &Options) -> Result<String, Error> {
    let marked = request_c_wrappers(source, options)?;
    let mut args = options.mlir_opt_args(&marked);
    args.push("--mlir-print-debuginfo".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let tools = &options.tools;
    let lowered =
        run(&tools.mlir_opt, &args, Some(marked.as_bytes())).map_err(|e| options.locate(e))?;
    let ir = run(
        &tools.mlir_translate,
        &["--mlir-to-llvmir", "-"],
        Some(&lowered),
    )
    .map_err(|e| options.locate(e))?;
    String::from_utf8(ir).map_err(|e| Error::Tool {
        tool: tools.mlir_translate.clone(),
        stderr: format!("output is not UTF-8: {e}"),
    })
}

/// Compiles MLIR source text to the shared library `output` (optimized).
pub fn compile_str(source: &str, output: &Path) -> Result<(), Error> {
    compile_str_with(source, output, true)
}

/// Compiles MLIR source text to the shared library `output`, running
/// `opt-19 -passes=default<O2>` on the IR when `optimize` is set.
pub fn compile_str_with(source: &str, output: &Path, optimize: bool) -> Result<(), Error> {
    let options = Options {
        optimize,
        ..Options::default()
    };
    compile_with(source, output, &options)
}

/// Compiles MLIR source text to the shared library `output` as `options` say.
pub fn compile_with(source: &str, output: &Path, options: &Options) -> Result<(), Error> {
    let mut ir = mlir_to_llvm_ir_with(source, options)?;
    // The matrix intrinsics that vector.matrix_multiply and vector.flat_transpose become
    // have no code generation of their own: LLVM's optimizer lowers them when asked to
    // (`-enable-matrix`, as MLIR's tests ask mlir-cpu-runner), or that pass alone.
    let matrix = ir.contains("@llvm.matrix.");
    let passes: Option<&[&str]> = if options.optimize {
        Some(&["-enable-matrix", "-passes=default<O2>", "-S", "-"])
    } else if matrix {
        Some(&["-passes=lower-matrix-intrinsics", "-S", "-"])
    } else {
        None
    };
    // The LLVM options go first, as each tool's own flags.
    let llvm_options: Vec<&str> = options.llvm_options.iter().map(String::as_str).collect();
    if let Some(passes) = passes {
        let args: Vec<&str> = llvm_options.iter().chain(passes).copied().collect();
        let out = run(&options.tools.opt, &args, Some(ir.as_bytes()))?;
        ir = String::from_utf8(out).map_err(|e| Error::Tool {
            tool: options.tools.opt.clone(),
            stderr: format!("output is not UTF-8: {e}"),
        })?;
    }
    // The object goes to a directory of this run's own (mkdtemp: mode 0700, a name no
    // one can guess or take first), removed with everything in it when `scratch` drops.
    let scratch = private_dir()?;
    let object = scratch.path().join("kernel.o");
    let object_s = object.to_string_lossy().into_owned();
    let triple = format!("-mtriple={}", host_triple());
    let mut llc = llvm_options.clone();
    llc.extend([
        "-O2",
        "-relocation-model=pic",
        "-filetype=obj",
        &triple,
        "-o",
        &object_s,
        "-",
    ]);
    run(&options.tools.llc, &llc, Some(ir.as_bytes()))?;
    let output_s = output.to_string_lossy().into_owned();
    let mut link = vec![
        "-shared",
        "-Wl,-Bsymbolic",
        "-o",
        &output_s,
        &object_s,
        "-lm",
    ];
    let builtins = compiler_rt_builtins(&options.tools.clang);
    if let Some(archive) = &builtins {
        link.push(archive);
    }
    run(&options.tools.clang, &link, None).map(|_| ())
}

/// A fresh directory only this user can enter, made with `mkdtemp` in the temporary
/// directory, for a run's intermediate files; removed when dropped.
pub fn private_dir() -> Result<tempfile::TempDir, Error> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("locus-memref-")
        // As mkdtemp makes it: this user's alone (tempfile's default follows the umask).
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| Error::Io {
            path: std::env::temp_dir().display().to_string(),
            message: format!("cannot make a private directory: {e}"),
        })
}

/// LLVM's compiler-rt builtins archive (`libclang-rt-19-dev`), linked into every kernel
/// when it is installed: it has the conversions LLVM calls for `bf16`
/// (`__truncsfbf2`...), which libgcc before GCC 13 lacks. Only what the kernel needs is
/// taken from it.
fn compiler_rt_builtins(clang: &str) -> Option<String> {
    let out = run(
        clang,
        &["-print-libgcc-file-name", "-rtlib=compiler-rt"],
        None,
    )
    .ok()?;
    let path = String::from_utf8(out).ok()?.trim().to_string();
    Path::new(&path).is_file().then_some(path)
}

/// Compiles the MLIR file `kernel` to the shared library `output`
/// (optimized with `opt-19` when `optimize` is set).
pub fn compile_file(kernel: &Path, output: &Path, optimize: bool) -> Result<(), Error> {
    let source = std::fs::read_to_string(kernel).map_err(|e| Error::Io {
        path: kernel.display().to_string(),
        message: e.to_string(),
    })?;
    compile_str_with(&source, output, optimize)
}

/// `kernel` with its extension replaced by the platform's shared-library one.
pub fn default_output(kernel: &Path) -> PathBuf {
    kernel.with_extension(std::env::consts::DLL_EXTENSION)
}

#[cfg(test)]
mod tests {
    use super::{mark_definitions, only_declarations_take_tensors, uses_tensors};

    #[test]
    fn tensor_typed_attributes_are_not_tensor_values() {
        let conv = "linalg.conv_1d_nwc_wcf {dilations = dense<1> : tensor<1xi64>, \
strides = dense<[1]> : tensor<1xi64>} ins(%a, %b : memref<1x5x1xf32>, memref<3x1x1xf32>)";
        assert!(!uses_tensors(conv));
        assert!(!uses_tensors(
            "%r = \"x.op\"() {v = dense_resource<blob> : tensor<2xf32>} : () -> ()"
        ));
        assert!(uses_tensors(
            "%c = arith.constant dense<1.0> : tensor<4xf32>"
        ));
        assert!(uses_tensors(
            "%c = arith.constant {a = 1} dense<(1.0, 2.0)> : tensor<4xcomplex<f32>>"
        ));
        assert!(uses_tensors(&format!(
            "{conv} // x\n%t = tensor.empty() : tensor<2xf32>"
        )));
        assert!(uses_tensors("func.func @f(%a: tensor<?xf32>) {"));
        assert!(!uses_tensors(
            "// %c = arith.constant dense<1.0> : tensor<4xf32>"
        ));
    }

    #[test]
    fn declared_functions_on_tensors() {
        assert!(only_declarations_take_tensors(
            "  func.func private @verifyMemRefI8(tensor<*xi8>, tensor<*xi8>) -> i64 attributes {llvm.emit_c_interface} loc(#loc1)"
        ));
        let helper = "  func.func private @helper(%a: tensor<2xf32>) -> tensor<2xf32> {";
        assert!(!only_declarations_take_tensors(helper));
        assert!(!only_declarations_take_tensors(&format!(
            "func.func private @printMemrefF32(tensor<*xf32>)\n{helper}\n"
        )));
        assert!(!only_declarations_take_tensors(
            "func.func private @printMemrefF32(memref<*xf32>)"
        ));
    }

    #[test]
    fn definitions_get_c_wrappers_and_declarations_do_not() {
        let printed = "module {\n  func.func private @expf(f32) -> f32 loc(#loc1)\n  \
func.func @k(%arg0: f32 loc(\"k.mlir\":3:13)) -> f32 {\n    return %arg0 : f32 loc(#loc2)\n  } loc(#loc3)\n  \
func.func @a() attributes {foo = 1 : i32} {\n    return\n  }\n  \
func.func @m() attributes {llvm.emit_c_interface} {\n    return\n  }\n  \
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}\n}\n";
        let marked = mark_definitions(printed);
        let want = "module {\n  func.func private @expf(f32) -> f32 loc(#loc1)\n  \
func.func @k(%arg0: f32 loc(\"k.mlir\":3:13)) -> f32 attributes {llvm.emit_c_interface} {\n    return %arg0 : f32 loc(#loc2)\n  } loc(#loc3)\n  \
func.func @a() attributes {llvm.emit_c_interface, foo = 1 : i32} {\n    return\n  }\n  \
func.func @m() attributes {llvm.emit_c_interface} {\n    return\n  }\n  \
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}\n}\n";
        assert_eq!(marked, want);
    }
}
