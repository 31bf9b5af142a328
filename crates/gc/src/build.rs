//! `locus gc build`: lower a module, compile it ahead of time with LLVM 19 and link it
//! against the runtime library into an executable.
//!
//! The steps ([`build`] does all of them):
//! 1. [`lower_for_build`]: parse, check the GC invariants and lower, as `locus gc run` does
//!    ([`crate::run::prepare_with_roots`]): Julia-style frames, or for statepoint roots the
//!    module [`crate::run::lower_statepoints`] rewrites; then the optional pass pipeline.
//!    The program's `main` is added: `i32 @main()` calls the runtime's `locus_gc_main`
//!    (`locus_gc_main_statepoints` for statepoint roots) with the entry, which makes the
//!    thread's runtime, calls the entry and prints its `i64` result on a line of its own. A
//!    function of the module named `main` (the entry of `locus gc run` by default) is
//!    renamed [`RENAMED_MAIN`] first (fault lines still name it `main`), and a symbol
//!    named as one the runtime library takes from the C library (`read`, `write`) gets
//!    [`PROGRAM_PREFIX`] before its name ([`rename_runtime_imports`]).
//! 2. [`compile`]: [`locus_llvm::emit_object`] in process (`llc-19 -O2
//!    -relocation-model=pic`); statepoint-rewritten functions keep their frame pointers
//!    (`"frame-pointer"="all"`, which the rewrite adds). The object's `.llvm_stackmaps`
//!    section is then made writable and retained (see "Position-independent executables"
//!    below).
//! 3. [`link`]: `clang-19 OBJECT RUNTIME -o PROG -Wl,--dynamic-list=LIST -Wl,--gc-sections
//!    -lpthread -ldl -lm -lgcc_s -Wl,--as-needed -lstdc++ -Wl,--no-as-needed` (the C++
//!    runtime for programs that unwind C++-style), `RUNTIME` being `liblocus_gc_runtime.a`
//!    ([`find_runtime`]), then [`BuildOptions::link_args`] (`-fuse-ld=lld`, say). `LIST`
//!    exports the object's global symbols so that a fault line can name the program's
//!    functions (the handler asks `dladdr`; `-rdynamic` does it too, and keeps all of the
//!    runtime's code); `--gc-sections` drops the runtime library's unused code, which
//!    takes a program's start-up peak from 12.6 to 10.4 MB under MMTk.
//!
//! # Position-independent executables
//!
//! The executable is a PIE (`ET_DYN`) with either linker, as distributions build by default,
//! and has no text relocations. LLVM emits `.llvm_stackmaps` read-only, yet each function
//! record holds the function's absolute address, which in a PIE the loader must write: GNU
//! ld would make that a text relocation (`DT_TEXTREL`), and lld refuses it. So [`compile`]
//! marks the section writable in the object
//! ([`locus_stackmap::object::make_section_writable`], one bit of `sh_flags`; also
//! [`locus_stackmap::object::retain_section`], so that `--gc-sections` keeps it); both
//! linkers then put it in a writable segment with `R_X86_64_RELATIVE` (`R_AARCH64_RELATIVE`)
//! dynamic relocations,
//! and the runtime reads the section the loader relocated from its own memory
//! (`locus_gc_runtime::stackmaps`). The other ways out were worse: `-no-pie` (what
//! Locus did first) breaks hand linking on PIE-default toolchains and gives up ASLR;
//! renaming the section to get `__start_`/`__stop_` symbols leaves it read-only (the same
//! refusal), and reading link-time addresses from the file needs relocations the linker
//! resolved, which it does not do in a PIE. By hand: `llvm-objcopy-19 --set-section-flags
//! .llvm_stackmaps=alloc,load,contents,data prog.o` before linking.
//!
//! Statepoint roots build on x86-64 and AArch64 Linux hosts (the AArch64 runtime places
//! LLVM's stack-pointer-relative slots through the executable's `.eh_frame`; tested by
//! cross-building and running under qemu-aarch64-static: `tests/build_aarch64.rs`).
//!
//! The executable behaves as `locus gc run` on the same module: the result on standard
//! output and exit status 0; a broken GC contract prints one `locus: gc: ...` line and
//! exits with status 2, a fatal signal one `locus: SIGNAL ...` line and status 3;
//! `LOCUS_GC_STRESS=1` in its environment turns the stress collector on, and
//! `LOCUS_GC_COLLECTOR=stress|locus|mmtk:PLAN` chooses the collector (any MMTk plan with
//! statepoint roots; one that pins with frame roots: marksweep, immix, stickyimmix; see
//! the crate `locus-gc-runtime`) and `LOCUS_GC_HEAP_SIZE` the MMTk heap's limit.
//!
//! # The executable's default collector
//!
//! [`BuildOptions::collector`] (`locus gc build --collector NAME`) makes NAME the
//! collector the executable runs when its environment names none: the `main` Locus adds
//! passes NAME to `locus_gc_main_with_collector` (or `..._statepoints_with_collector`),
//! so `LOCUS_GC_COLLECTOR`, or `LOCUS_GC_STRESS=1`, still wins, and nothing is written to
//! the environment (processes the program starts do not inherit the choice). A plan that
//! cannot pin is refused with frame roots at build time ([`check_collector`]); everything
//! else the runtime checks when the executable starts.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use locus_llvm::builder::Builder;
use locus_llvm::passes::run_passes;
use locus_llvm::{Context, Module};

use crate::contract::STATEPOINT_PROGRAM_MARKER;
use crate::lower::statepoint::calls_statepoints;
use crate::lower::{ThreadOptions, WriteBarriers};
use crate::run::{lower_frames, lower_statepoints_with, refuse_statepoint_polls, Roots};
use crate::runtime::Collector;
use crate::Error;

/// The file name of the static runtime library (`cargo build -p locus-gc-runtime`).
pub const RUNTIME_LIBRARY: &str = "liblocus_gc_runtime.a";

/// What a function named `main` in the input is renamed to: the executable's `main` is
/// the one [`lower_for_build`] adds. Fault lines name it `main` again
/// ([`locus_gc_runtime::runtime::fault::source_function_name`]).
pub const RENAMED_MAIN: &str = locus_gc_runtime::runtime::fault::RENAMED_MAIN;

/// What [`rename_runtime_imports`] puts before a module symbol named as one the runtime
/// library takes from the C library. Fault lines drop it
/// ([`locus_gc_runtime::runtime::fault::source_function_name`]).
pub const PROGRAM_PREFIX: &str = locus_gc_runtime::runtime::fault::PROGRAM_PREFIX;

/// The linker driver used by default.
pub const DEFAULT_LINKER: &str = "clang-19";

/// How to build an executable.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Where the collector finds roots.
    pub roots: Roots,
    /// The entry function, of type `i64 ()`.
    pub entry: String,
    /// An LLVM pass pipeline in opt's syntax run on the lowered module before it is
    /// compiled.
    pub passes: Option<String>,
    /// The runtime library (a file, or a directory holding [`RUNTIME_LIBRARY`]); `None`:
    /// [`find_runtime`] looks for it.
    pub runtime: Option<PathBuf>,
    /// The C compiler driver that links ([`DEFAULT_LINKER`]).
    pub linker: String,
    /// Put a safepoint poll at every loop back edge (`--safepoint-polls`, frames only; see
    /// [`crate::lower::polls`]).
    pub safepoint_polls: bool,
    /// Who places the write barriers generational plans need (`--write-barriers`).
    pub write_barriers: WriteBarriers,
    /// Whether the lowering inlines the allocation fast path (`--inline-alloc`; frame
    /// roots).
    pub inline_alloc: crate::lower::InlineAlloc,
    /// The collector the executable runs unless its environment names one
    /// (`LOCUS_GC_COLLECTOR`, or `LOCUS_GC_STRESS=1`); `None`: the runtime's default.
    pub collector: Option<Collector>,
    /// More arguments for the linker driver, after Locus's own (`-fuse-ld=lld`, `-static-pie`).
    pub link_args: Vec<String>,
}

impl Default for BuildOptions {
    /// Frames, entry `main` (as `locus gc run`), no passes, the runtime found, clang-19
    /// with no more arguments, the runtime's default collector.
    fn default() -> BuildOptions {
        BuildOptions {
            roots: Roots::Frames,
            entry: "main".into(),
            passes: None,
            runtime: None,
            linker: DEFAULT_LINKER.into(),
            safepoint_polls: false,
            write_barriers: WriteBarriers::default(),
            inline_alloc: crate::lower::InlineAlloc::default(),
            collector: None,
            link_args: Vec::new(),
        }
    }
}

/// What can go wrong while building.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The module: parsing, the invariants, the lowering, the entry, LLVM's code generation.
    Module(Error),
    /// The runtime library was not found.
    NoRuntime {
        /// The places looked in, in order.
        searched: Vec<PathBuf>,
    },
    /// A file could not be written or removed.
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The collector asked for cannot run the program with these roots.
    Collector {
        /// The collector.
        collector: Collector,
        /// Why not.
        message: String,
    },
    /// A global symbol of the module is named as one the runtime library takes from the
    /// C library, and cannot be renamed (see [`rename_runtime_imports`]).
    Symbol {
        /// The symbol.
        name: String,
        /// Why it cannot be renamed.
        message: String,
    },
    /// The linker could not be run, or failed.
    Link {
        /// The command, as a shell would show it.
        command: String,
        /// Why: the linker's standard error, or why it did not run.
        message: String,
    },
}

impl From<Error> for BuildError {
    fn from(e: Error) -> BuildError {
        BuildError::Module(e)
    }
}

impl From<locus_llvm::Error> for BuildError {
    fn from(e: locus_llvm::Error) -> BuildError {
        BuildError::Module(Error::Llvm(e))
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Module(e) => write!(f, "{e}"),
            BuildError::NoRuntime { searched } => {
                write!(
                    f,
                    "the runtime library {RUNTIME_LIBRARY} was not found (build it with \
                     `cargo build -p locus-gc-runtime`, or pass --runtime PATH); looked in"
                )?;
                for (i, p) in searched.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{}", p.display())?;
                }
                Ok(())
            }
            BuildError::Io { path, message } => write!(f, "{}: {message}", path.display()),
            BuildError::Collector { collector, message } => {
                write!(f, "--collector {collector}: {message}")
            }
            BuildError::Symbol { name, message } => write!(f, "@{name}: {message}"),
            BuildError::Link { command, message } => {
                write!(f, "linking failed: `{command}`: {}", message.trim_end())
            }
        }
    }
}

impl std::error::Error for BuildError {}

/// Whether `collector` can be the default collector of an executable with `roots`: an
/// MMTk plan that cannot pin (semispace, gencopy) cannot keep objects that Julia-style
/// frames name in place. (The runtime refuses what is not wired yet when the executable
/// starts, as it does for `LOCUS_GC_COLLECTOR`.)
///
/// # Errors
/// [`BuildError::Collector`], saying why.
pub fn check_collector(collector: Collector, roots: Roots) -> Result<(), BuildError> {
    match collector {
        Collector::Mmtk(plan) if roots == Roots::Frames && !plan.pins() => {
            Err(BuildError::Collector {
                collector,
                message: format!(
                    "MMTk plan {plan} moves every object it keeps and cannot pin, and the \
                     objects Julia-style frames name must stay in place (use mmtk:marksweep, \
                     mmtk:immix or mmtk:stickyimmix)"
                ),
            })
        }
        _ => Ok(()),
    }
}

/// The text of the executable's `main`: it calls `start` (`locus_gc_main` or
/// `locus_gc_main_statepoints`, their `_with_collector` forms with a default collector)
/// with `entry`.
fn main_text(start: &str, entry: &str, collector: Option<Collector>) -> String {
    let mut text = format!(
        "\n; The executable's main (locus gc build): the runtime calls @{entry} and prints its result.\n"
    );
    let Some(collector) = collector else {
        text.push_str(&format!(
            "declare i32 @{start}(ptr)\n\n\
             define i32 @main() {{\n  %status = call i32 @{start}(ptr @{entry})\n  ret i32 %status\n}}\n"
        ));
        return text;
    };
    let name = collector.to_string();
    text.push_str(&format!(
        "; Its collector is `{name}` unless the environment names one (locus gc build --collector).\n\
         declare i32 @{start}_with_collector(ptr, ptr)\n\
         @locus.build.collector = private unnamed_addr constant [{len} x i8] c\"{name}\\00\"\n\n\
         define i32 @main() {{\n  \
           %status = call i32 @{start}_with_collector(ptr @{entry}, ptr @locus.build.collector)\n  \
           ret i32 %status\n\
         }}\n",
        len = name.len() + 1,
    ));
    text
}

fn check_entry(module: &Module<'_>, entry: &str) -> Result<(), Error> {
    let ok = module.function(entry).is_some_and(|f| {
        let ty = f.function_type();
        ty.return_type().and_then(|r| r.int_width()) == Some(64)
            && ty.param_types().is_some_and(|p| p.is_empty())
            && !f.is_declaration()
    });
    if ok {
        Ok(())
    } else {
        Err(Error::Entry {
            name: entry.to_owned(),
            message: "no defined function of type `i64 ()` by that name".into(),
        })
    }
}

/// Step 1: the lowered module, with the executable's `main` added, as IR text (what
/// [`compile`] compiles; `locus gc build --emit-ir` writes it). The runtime library
/// ([`BuildOptions::runtime`], else [`find_runtime`]'s) is read for the names it takes
/// from the C library, which the module's own symbols give up ([`rename_runtime_imports`]).
///
/// # Errors
/// As [`crate::run::prepare_with_roots`]: LLVM's, the invariants, the lowering's, and
/// [`Error::Entry`]; also [`Error::Entry`] when the module defines [`RENAMED_MAIN`] and a
/// function `main`, or statepoint roots on a host other than x86-64 or AArch64 Linux;
/// those of [`find_runtime`] and [`runtime_imports`], and [`BuildError::Symbol`].
pub fn lower_for_build(
    name: &str,
    ir: &[u8],
    options: &BuildOptions,
) -> Result<String, BuildError> {
    let runtime = find_runtime(options.runtime.as_deref())?;
    lower_against(name, ir, options, &runtime_imports(&runtime)?)
}

/// [`lower_for_build`] with the runtime library's imports read.
fn lower_against(
    name: &str,
    ir: &[u8],
    options: &BuildOptions,
    imports: &BTreeSet<String>,
) -> Result<String, BuildError> {
    let ctx = Context::new();
    let threads = ThreadOptions::safepoint_polls(options.safepoint_polls)
        .with_write_barriers(options.write_barriers)
        .with_inline_alloc(options.inline_alloc);
    let module = match options.roots {
        Roots::Frames => {
            let module = Module::parse_ir(&ctx, name, ir)?;
            lower_frames(&module, threads)?;
            module
        }
        Roots::Statepoint => {
            refuse_statepoint_polls(&options.entry, threads)?;
            // The runtime walks these (the AArch64 walk: `locus_gc_runtime::stackmaps`).
            if !cfg!(any(
                target_arch = "x86_64",
                all(target_arch = "aarch64", target_os = "linux")
            )) {
                return Err(Error::Entry {
                    name: options.entry.clone(),
                    message: "statepoint roots walk x86-64 and AArch64 Linux frames only".into(),
                }
                .into());
            }
            lower_statepoints_with(&ctx, name, ir, options.write_barriers)?.0
        }
    };
    if let Some(pipeline) = &options.passes {
        run_passes(&module, pipeline)?;
    }
    check_entry(&module, &options.entry)?;
    let mut entry = options.entry.clone();
    if module.function("main").is_some() {
        if module.function(RENAMED_MAIN).is_some() {
            return Err(Error::Entry {
                name: options.entry.clone(),
                message: format!(
                    "the module has both @main and @{RENAMED_MAIN}; the executable's main is \
                     Locus's, and @main would be renamed @{RENAMED_MAIN}"
                ),
            }
            .into());
        }
        Builder::new(&module).rename_global("main", RENAMED_MAIN)?;
        if entry == "main" {
            entry = RENAMED_MAIN.into();
        }
    }
    for (from, to) in rename_runtime_imports(&module, imports)? {
        if entry == from {
            entry = to;
        }
    }
    let mut text = module.print();
    let start = match options.roots {
        Roots::Frames => "locus_gc_main",
        Roots::Statepoint => {
            // Says "statepoint roots, no stack map" to the runtime when LLVM writes none;
            // only then, so that a program whose stack maps a link dropped
            // (`--gc-sections` without `SHF_GNU_RETAIN`) stops instead of running rootless.
            if !calls_statepoints(&module) {
                text.push_str(&format!("\n@{STATEPOINT_PROGRAM_MARKER} = constant i8 1\n"));
            }
            "locus_gc_main_statepoints"
        }
    };
    text.push_str(&main_text(start, &entry, options.collector));
    Ok(text)
}

/// The names the runtime library `archive` takes from other libraries: the symbols its
/// members leave undefined and none of them defines (the C library's `read`, `malloc`,
/// `write`, the unwinder's `_Unwind_Resume`).
///
/// # Errors
/// [`BuildError::Io`] when the file cannot be read or is not an archive of objects.
pub fn runtime_imports(archive: &Path) -> Result<BTreeSet<String>, BuildError> {
    use object::read::archive::ArchiveFile;
    use object::{Object, ObjectSymbol, ReadCache};
    let io = |message: String| BuildError::Io {
        path: archive.to_path_buf(),
        message,
    };
    let file = std::fs::File::open(archive).map_err(|e| io(e.to_string()))?;
    // Read through a cache: only the headers and symbol tables are read (a debug build
    // of the runtime is over 100 MB).
    let cache = ReadCache::new(file);
    let members = ArchiveFile::parse(&cache).map_err(|e| io(format!("not an archive: {e}")))?;
    let (mut undefined, mut defined) = (BTreeSet::new(), BTreeSet::new());
    for member in members.members() {
        let member = member.map_err(|e| io(format!("a member: {e}")))?;
        let (offset, size) = member.file_range();
        let object = object::File::parse(cache.range(offset, size)).map_err(|e| {
            let shown = String::from_utf8_lossy(member.name());
            io(format!("member {shown} is not an object: {e}"))
        })?;
        for symbol in object.symbols() {
            let Ok(name) = symbol.name() else { continue };
            if symbol.is_undefined() {
                undefined.insert(name.to_owned());
            } else if symbol.is_global() {
                defined.insert(name.to_owned());
            }
        }
    }
    undefined.retain(|name| !name.is_empty() && !defined.contains(name));
    Ok(undefined)
}

/// The C library's allocator: a module that defines one of these would split the heap if
/// renamed ([`rename_runtime_imports`] refuses it instead).
const C_ALLOCATOR: &[&str] = &[
    "malloc",
    "free",
    "calloc",
    "realloc",
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "malloc_usable_size",
];

/// Renames every global symbol `module` defines for the linker
/// ([`Module::linked_definitions`]) under a name in `imports`
/// ([`runtime_imports`]) to [`PROGRAM_PREFIX`]`name`; returns the pairs (old, new).
///
/// Why: the executable is one static link, so a module function named `read` would take
/// the runtime's own calls to the C library's `read` (the program then fails at start-up
/// or worse). Renamed, the module's own references follow; another object linked in that
/// calls `read` gets the C library's, and a fault line names the function as the source
/// does ([`locus_gc_runtime::runtime::fault::source_function_name`]).
///
/// # Errors
/// [`BuildError::Symbol`] when the new name is taken, or the symbol is the C library's
/// allocator (`malloc`, `free`...).
pub fn rename_runtime_imports(
    module: &Module<'_>,
    imports: &BTreeSet<String>,
) -> Result<Vec<(String, String)>, BuildError> {
    let builder = Builder::new(module);
    let mut renamed = Vec::new();
    for from in module.linked_definitions() {
        if !imports.contains(&from) {
            continue;
        }
        if C_ALLOCATOR.contains(&from.as_str()) {
            return Err(BuildError::Symbol {
                name: from.clone(),
                message: format!(
                    "the module defines the C library's allocator function @{from}: the \
                     runtime and the C library allocate through it too, and renamed, the \
                     module's own calls would free what the C library allocated; rename the \
                     module's allocator"
                ),
            });
        }
        let to = format!("{PROGRAM_PREFIX}{from}");
        builder
            .rename_global(&from, &to)
            .map_err(|_| BuildError::Symbol {
                name: from.clone(),
                message: format!(
                    "the runtime library takes @{from} from the C library, so the module's \
                     must be renamed @{to}, and that name is taken"
                ),
            })?;
        renamed.push((from, to));
    }
    Ok(renamed)
}

/// Step 2: [`lower_for_build`]'s text compiled into an ELF object for the host, in process,
/// its `.llvm_stackmaps` section (statepoint roots) made writable so that it links into a
/// PIE without text relocations (see "Position-independent executables" above).
///
/// # Errors
/// LLVM's: parsing, verifying, code generation (also when the object LLVM wrote cannot
/// be read back).
pub fn compile(name: &str, lowered: &str) -> Result<Vec<u8>, Error> {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, name, lowered)?;
    module.verify()?;
    let mut object = locus_llvm::emit_object(&module, "", "", "")?;
    // Only an object LLVM has just written is read here: an error means a broken emitter.
    locus_stackmap::object::make_section_writable(&mut object)
        .and_then(|_| locus_stackmap::object::retain_section(&mut object))
        .map_err(|e| {
            Error::Llvm(locus_llvm::Error::Codegen {
                message: format!("{name}: the object's .llvm_stackmaps section: {e}"),
            })
        })?;
    Ok(object)
}

/// Where [`find_runtime`] looks for [`RUNTIME_LIBRARY`] when not told: the directory of
/// the running executable (`target/debug/` for `target/debug/locus`), its parent (for a
/// test binary in `target/debug/deps/`), then `target/release/` and `target/debug/` under
/// the current directory.
pub fn runtime_search_path() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            dirs.push(dir.to_path_buf());
            if let Some(up) = dir.parent() {
                dirs.push(up.to_path_buf());
            }
        }
    }
    dirs.push(PathBuf::from("target/release"));
    dirs.push(PathBuf::from("target/debug"));
    dirs
}

/// The runtime library to link: `explicit` (the file, or [`RUNTIME_LIBRARY`] in that
/// directory), else the first [`RUNTIME_LIBRARY`] of [`runtime_search_path`].
///
/// # Errors
/// [`BuildError::NoRuntime`], naming every place looked in.
pub fn find_runtime(explicit: Option<&Path>) -> Result<PathBuf, BuildError> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) if p.is_dir() => vec![p.join(RUNTIME_LIBRARY)],
        Some(p) => vec![p.to_path_buf()],
        None => runtime_search_path()
            .into_iter()
            .map(|d| d.join(RUNTIME_LIBRARY))
            .collect(),
    };
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or(BuildError::NoRuntime {
            searched: candidates,
        })
}

/// Step 3: links `object` with `runtime` into the executable `output` with `linker`
/// (a C compiler driver such as clang-19 or cc), `extra` after Locus's own arguments. The
/// executable is position-independent when the driver makes PIEs by default (clang-19 and
/// Debian's gcc do), with frame roots and statepoint roots alike.
///
/// The link drops unused sections (`--gc-sections`: most of the runtime library's code,
/// Rust's and MMTk's, is never called; 3.3 MB of text becomes 1.3 MB) and exports the
/// object's own global symbols, not the runtime's (a dynamic list written next to `output`
/// and removed after), so that a fault line can name the program's functions (`dladdr`
/// reads the dynamic symbol table) and the statepoint program marker survives.
///
/// # Errors
/// [`BuildError::Io`] when `object` cannot be read or the list cannot be written,
/// [`BuildError::Link`] when the linker cannot be run or fails, with its standard error.
pub fn link(
    object: &Path,
    runtime: &Path,
    output: &Path,
    linker: &str,
    extra: &[String],
) -> Result<(), BuildError> {
    let io = |path: &Path, e: std::io::Error| BuildError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let bytes = std::fs::read(object).map_err(|e| io(object, e))?;
    let mut list_path = output.as_os_str().to_owned();
    list_path.push(".exports");
    let list_path = PathBuf::from(list_path);
    std::fs::write(&list_path, dynamic_list(&bytes)).map_err(|e| io(&list_path, e))?;
    let mut cmd = Command::new(linker);
    cmd.arg(object).arg(runtime).arg("-o").arg(output);
    let mut exports = std::ffi::OsString::from("-Wl,--dynamic-list=");
    exports.push(&list_path);
    cmd.arg(exports).arg("-Wl,--gc-sections");
    // The runtime's own needs (Rust's std).
    cmd.args(["-lpthread", "-ldl", "-lm", "-lgcc_s"]);
    // C++-style unwinding (`invoke` with __gxx_personality_v0, __cxa_throw) needs the C++
    // runtime; linked only where the program uses it.
    cmd.args(["-Wl,--as-needed", "-lstdc++", "-Wl,--no-as-needed"]);
    cmd.args(extra);
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd.output();
    let removed = std::fs::remove_file(&list_path);
    let out = out.map_err(|e| BuildError::Link {
        command: shown.clone(),
        message: format!("cannot run {linker}: {e}"),
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(BuildError::Link {
            command: shown,
            message: format!("{}: {}", out.status, stderr.trim_end()),
        });
    }
    removed.map_err(|e| io(&list_path, e))
}

/// A linker dynamic list (`{ "name"; ... };`) of the global symbols the relocatable
/// object `bytes` defines; empty when it cannot be read (the link then reports the
/// object). Names are quoted, so none is a pattern; one with a quote or a control
/// character, which the list cannot spell, is left out (a fault there shows its address).
fn dynamic_list(bytes: &[u8]) -> String {
    use object::{Object, ObjectSymbol};
    let mut list = String::from("{\n");
    if let Ok(file) = object::File::parse(bytes) {
        for symbol in file.symbols() {
            let Ok(name) = symbol.name() else { continue };
            if symbol.is_definition()
                && symbol.is_global()
                && !name.is_empty()
                && !name.contains(|c: char| c == '"' || c == '\\' || c.is_control())
            {
                list.push_str(&format!("  \"{name}\";\n"));
            }
        }
    }
    list.push_str("};\n");
    list
}

/// What [`build`] made.
#[derive(Clone, Debug)]
pub struct Built {
    /// The runtime library linked.
    pub runtime: PathBuf,
    /// The object file's size in bytes.
    pub object_bytes: usize,
}

/// All three steps: `ir` (named `name` in messages) lowered, compiled and linked into the
/// executable `output`. The object file is written next to `output` (`OUTPUT.o`) and
/// removed after linking.
///
/// # Errors
/// Those of [`check_collector`], [`lower_for_build`], [`compile`], [`find_runtime`] and
/// [`link`], and [`BuildError::Io`] for the object file.
pub fn build(
    name: &str,
    ir: &[u8],
    output: &Path,
    options: &BuildOptions,
) -> Result<Built, BuildError> {
    if let Some(collector) = options.collector {
        check_collector(collector, options.roots)?;
    }
    let runtime = find_runtime(options.runtime.as_deref())?;
    let lowered = lower_against(name, ir, options, &runtime_imports(&runtime)?)?;
    let object = compile(name, &lowered)?;
    let mut object_path = output.as_os_str().to_owned();
    object_path.push(".o");
    let object_path = PathBuf::from(object_path);
    std::fs::write(&object_path, &object).map_err(|e| BuildError::Io {
        path: object_path.clone(),
        message: e.to_string(),
    })?;
    let linked = link(
        &object_path,
        &runtime,
        output,
        &options.linker,
        &options.link_args,
    );
    let removed = std::fs::remove_file(&object_path);
    linked?;
    removed.map_err(|e| BuildError::Io {
        path: object_path,
        message: e.to_string(),
    })?;
    Ok(Built {
        runtime,
        object_bytes: object.len(),
    })
}
