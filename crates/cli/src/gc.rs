//! `locus gc ...`: check, lower, run and build IR that uses Julia-style GC pointers.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use locus_gc::build::{self, BuildOptions};
use locus_gc::lower::{
    lower_module_with, FunctionReport, InlineAlloc, LowerOptions, ThreadOptions, WriteBarriers,
};
use locus_gc::run::{lower_statepoints_with, prepare_with_threads, Roots};
use locus_gc::runtime::{Collector, OnFault};
use locus_gc::verify::{verify_module, VerifyOptions};
use locus_llvm::{Context, Module};

use crate::input::Input;
use crate::Failure;

/// The `gc` subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Place GC roots: write the module with a GC frame in every function that calls
    /// `julia.get_pgcstack`. The GC invariants are checked first; violations go to standard
    /// error and nothing is written.
    Lower {
        /// Textual (.ll) or bitcode (.bc) IR.
        file: PathBuf,
        /// Where to write the lowered module: bitcode if the name ends in `.bc`, else text
        /// (default: text on standard output).
        #[arg(short, long, value_name = "OUT.ll")]
        output: Option<PathBuf>,
        /// Stop at Julia's intermediate form (julia.new_gc_frame and friends).
        #[arg(long)]
        intermediate: bool,
        /// Print, per function and safepoint, the rooted values, their slots and where
        /// their stores went (to standard error when the module goes to standard output).
        #[arg(long)]
        report: bool,
        /// Check every GC invariant as spec 003 writes it (see `locus gc verify --help`)
        /// before lowering, not only those Julia's own verifier checks.
        #[arg(long)]
        strict: bool,
        /// Run this LLVM pass pipeline on the lowered module, in process, before writing it:
        /// opt's -passes syntax, e.g. `default<O2>` (as `| opt-19 -passes=PIPELINE` would).
        #[arg(long, value_name = "PIPELINE")]
        passes: Option<String>,
        /// How roots are kept: `frames` (Julia-style GC frames, the default) or
        /// `statepoint` (the module rewritten by LLVM's rewrite-statepoints-for-gc: GC
        /// pointers in address space 1, `gc "statepoint-example"`, frame pointers kept,
        /// the runtime's collecting calls wrapped, in internal functions, to pass their
        /// frame address). It links against liblocus_gc_runtime.a as it is; `locus gc
        /// build --roots statepoint --emit-ir` also adds a main.
        #[arg(long, value_enum, default_value = "frames", value_name = "HOW")]
        roots: RootsArg,
        /// Put a safepoint poll (a call of the runtime's locus_gc_poll) at every loop back
        /// edge of the functions that take part, so that a thread looping without calls
        /// cannot hold the other threads' collections up (frames only).
        #[arg(long)]
        safepoint_polls: bool,
        /// Who places the write barriers generational collectors (mmtk:stickyimmix,
        /// mmtk:gencopy) need after a store of a tracked pointer into an object: `insert`
        /// (the default: the lowering, after every such store no frontend barrier on that
        /// object follows), `auto` (the lowering, in every function where the frontend
        /// placed no julia.write_barrier: a function without barriers inlined into one with
        /// them loses its own) or `frontend` (only the frontend's julia.write_barrier calls,
        /// as Julia's codegen places them).
        #[arg(long, value_enum, default_value = "insert", value_name = "WHO")]
        write_barriers: BarriersArg,
        /// Inline the allocation fast path of `locus_gc_alloc` calls with constant, small
        /// sizes (`auto`, the default: the code bumps the thread's MMTk allocation buffer
        /// itself when the runtime offers one and calls the runtime only when it must) or
        /// leave every allocation a call (`never`; frame roots: statepoint roots always
        /// inline).
        #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
        inline_alloc: InlineArg,
    },
    /// Check the GC invariants of spec 003 that root placement relies on.
    ///
    /// Each violation is one line on standard output:
    /// `FILE: error: RULE: function @F, instruction `I`: WHY` (or `warning:`). When there
    /// are errors, a count goes to standard error as `locus: FILE: N GC invariant
    /// violation(s)` and the exit status is 1; a clean module prints nothing and exits with
    /// 0, as does one with warnings only. Input that does not parse, or that LLVM's own
    /// verifier rejects, is reported on standard error as `locus: FILE: ...` followed by
    /// LLVM's diagnostic, with exit status 1 and nothing on standard output.
    ///
    /// The rules (RULE as printed):
    ///
    ///   addrspacecast        only 0 -> 10/11/12, 10 -> 11 and 10 -> 12 casts involve the GC
    ///                        spaces (10 Tracked, 11 Derived, 12 CalleeRooted, 13 Loaded),
    ///                        constant expressions included
    ///
    ///   tracked-gep          no getelementptr on a Tracked (10) pointer or vector of them
    ///
    ///   int-ptr-cast         no inttoptr into, or ptrtoint out of, address spaces 10-13
    ///
    ///   callee-rooted-use    CalleeRooted (12) values are only passed to calls, as arguments
    ///                        of that type (no load, store or other use through or of them)
    ///
    ///   decayed-load-store   no load or store of values holding Derived or CalleeRooted
    ///                        pointers (through a Derived pointer is fine)
    ///
    ///   return               only Tracked pointers are returned (no 11, 12 or 13, also
    ///                        inside structs and vectors)
    ///
    ///   jlcall-argument      julia.call's arguments after the function pointer are Tracked
    ///
    ///   pointer-from-objref  julia.pointer_from_objref takes Tracked, returns untracked (0)
    ///
    ///   gc-preserve-end      llvm.julia.gc_preserve_end ends a gc_preserve_begin token
    ///
    ///   pgcstack-entry       (warning) julia.get_pgcstack is called in the entry block,
    ///                        where Julia's pass looks for it (Locus moves it there)
    ///
    /// By default the check is as lenient as Julia's own verifier, and the lowering handles
    /// what it lets through: getelementptr on Tracked pointers, CalleeRooted values in phis,
    /// selects, GEPs and vector operations, casts from 0 to 13, and pointer_from_objref on
    /// Derived pointers pass. --strict reports those too.
    #[command(verbatim_doc_comment)]
    Verify {
        /// Textual (.ll) or bitcode (.bc) IR.
        file: PathBuf,
        /// Check every rule as spec 003 writes it, not only what Julia's verifier checks.
        #[arg(long)]
        strict: bool,
    },
    /// Lower, JIT-compile with LLVM 19 and call `i64 ENTRY()`, printing its result.
    ///
    /// The GC invariants are checked first, as by `locus gc verify`; functions that are
    /// already lowered (they call `locus_gc_get_pgcstack`) run as they are.
    ///
    /// Exit status:
    ///
    ///   0  the entry returned; its result is on standard output
    ///
    ///   1  the module was not run: it does not parse, LLVM's verifier or the GC
    ///      invariants reject it, it cannot be lowered or compiled, or it has no
    ///      `i64 ENTRY()` (`locus: FILE: ...` on standard error)
    ///
    ///   2  the collector found a broken GC contract while the module ran, a dangling
    ///      reference above all (`locus: gc: ...`)
    ///
    ///   3  the module's code, or code it called, died of a signal: SIGSEGV, SIGBUS,
    ///      SIGILL, SIGFPE, SIGTRAP or a stack overflow, in any thread it made
    ///      (`locus: SIGNAL (cause) at address ADDR in function `NAME` ...`), or it
    ///      called abort() or raised a signal that ends a process (`locus: SIGABRT ...`)
    ///
    ///   124  --timeout: the run did not finish in time (`locus: FILE: not finished ...`)
    #[command(verbatim_doc_comment)]
    Run {
        /// Textual (.ll) or bitcode (.bc) IR.
        file: PathBuf,
        /// The function to call.
        #[arg(long, default_value = "main", value_name = "NAME")]
        entry: String,
        /// Collect at every call that may collect; never reuse freed objects and make them
        /// inaccessible: a pointer to freed memory found by the collector, or any access
        /// to a freed object, ends the run with exit status 2.
        #[arg(long)]
        stress: bool,
        /// The collector: `stress` (as --stress), `locus` (the runtime's own mark-sweep;
        /// with --moving its moving collector) or `mmtk:PLAN`, an MMTk plan (default
        /// mmtk:immix, or `locus` with --moving): marksweep, immix or stickyimmix
        /// with either roots (objects frames name are pinned), semispace or gencopy with
        /// --roots statepoint (they cannot pin). LOCUS_GC_HEAP_SIZE=N[K|M|G] fixes the
        /// MMTk heap's size, MIN..MAX lets it grow from MIN up to MAX (default: from 32 MiB
        /// up to half the memory).
        #[arg(long, value_name = "NAME", value_parser = parse_collector)]
        collector: Option<Collector>,
        /// Print the collector's counters after the result.
        #[arg(long)]
        stats: bool,
        /// Where the collector finds roots: `frames` (Julia-style GC frames linked into a
        /// chain; objects never move) or `statepoint` (LLVM's gc.statepoint stack maps,
        /// found by walking the frame-pointer chain of the compiled code; x86-64).
        #[arg(long, value_enum, default_value = "frames", value_name = "HOW")]
        roots: RootsArg,
        /// With --roots statepoint: a copying collector that moves every live object that
        /// is not pinned at each collection and makes the old copy inaccessible, so a
        /// pointer the code failed to relocate ends the run with exit status 2, naming the
        /// object. Pinned: objects held by gc_preserve, jl_roots or pointer_from_objref,
        /// and Julia's tagged objects.
        #[arg(long)]
        moving: bool,
        /// Run this LLVM pass pipeline on the lowered module, in process, before it is
        /// compiled: opt's -passes syntax, e.g. `default<O2>`, so that the collector checks
        /// the frames as the optimizer left them.
        #[arg(long, value_name = "PIPELINE")]
        passes: Option<String>,
        #[arg(long, value_name = "SECONDS", value_parser = crate::watchdog::parse_seconds, help = crate::watchdog::HELP)]
        timeout: Option<std::time::Duration>,
        /// Put a safepoint poll (a call of the runtime's locus_gc_poll) at every loop back
        /// edge of the functions that take part, so that a thread looping without calls
        /// cannot hold the other threads' collections up (frames only).
        #[arg(long)]
        safepoint_polls: bool,
        /// Who places the write barriers generational collectors (mmtk:stickyimmix,
        /// mmtk:gencopy) need after a store of a tracked pointer into an object: `insert`
        /// (the default: the lowering, after every such store no frontend barrier on that
        /// object follows), `auto` (the lowering, in every function where the frontend
        /// placed no julia.write_barrier: a function without barriers inlined into one with
        /// them loses its own) or `frontend` (only the frontend's julia.write_barrier calls,
        /// as Julia's codegen places them).
        #[arg(long, value_enum, default_value = "insert", value_name = "WHO")]
        write_barriers: BarriersArg,
        /// Inline the allocation fast path of `locus_gc_alloc` calls with constant, small
        /// sizes (`auto`, the default: the code bumps the thread's MMTk allocation buffer
        /// itself when the runtime offers one and calls the runtime only when it must) or
        /// leave every allocation a call (`never`; frame roots: statepoint roots always
        /// inline).
        #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
        inline_alloc: InlineArg,
    },
    /// Lower, compile ahead of time with LLVM 19 and link the GC runtime into an executable
    /// that behaves as `locus gc run` on the same module.
    ///
    /// The module is checked and lowered as by `locus gc run`, compiled in process (as
    /// `llc-19 -O2 -relocation-model=pic` would), and linked by clang-19 with the static
    /// runtime library liblocus_gc_runtime.a (`cargo build -p locus-gc-runtime`; found
    /// next to the locus executable, in its parent directory, or in target/release or
    /// target/debug under the current directory, unless --runtime names it). A function
    /// named `main` in the module is renamed `locus_entry`: the executable's main is the
    /// one Locus adds, which makes the runtime, calls ENTRY and prints its result.
    ///
    /// The executable prints the entry's result on a line of its own and exits with 0;
    /// a broken GC contract found while it runs prints one `locus: gc: ...` line and
    /// exits with 2, a fatal signal one `locus: SIGNAL ...` line and exits with 3, as
    /// `locus gc run` does. LOCUS_GC_STRESS=1 in its environment turns the stress
    /// collector on (as `locus gc run --stress`); LOCUS_GC_COLLECTOR=NAME chooses the
    /// collector as `locus gc run --collector NAME` does (any mmtk:PLAN with statepoint
    /// roots; marksweep, immix or stickyimmix with frame roots; a refused one ends the
    /// executable with one `locus: gc: ...` line and exit status 1 before the program
    /// runs), and LOCUS_GC_HEAP_SIZE=N[K|M|G] fixes the MMTk heap's size (MIN..MAX: it
    /// grows from MIN up to MAX). --collector NAME makes NAME the executable's collector
    /// when its environment names none (its main passes NAME to the runtime, which uses it
    /// unless LOCUS_GC_COLLECTOR is set or LOCUS_GC_STRESS=1).
    ///
    /// Exit status of `locus gc build`: 0 when the executable was written, 1 otherwise
    /// (`locus: FILE: ...` on standard error).
    #[command(verbatim_doc_comment)]
    Build {
        /// Textual (.ll) or bitcode (.bc) IR.
        file: PathBuf,
        /// The executable to write.
        #[arg(short, long, value_name = "PROG")]
        output: PathBuf,
        /// The function the executable calls, of type `i64 ()`.
        #[arg(long, default_value = "main", value_name = "NAME")]
        entry: String,
        /// Where the collector finds roots: `frames` (Julia-style GC frames) or
        /// `statepoint` (LLVM's gc.statepoint stack maps, which the runtime reads from the
        /// executable's .llvm_stackmaps section at start-up; x86-64 and AArch64 Linux).
        #[arg(long, value_enum, default_value = "frames", value_name = "HOW")]
        roots: RootsArg,
        /// Run this LLVM pass pipeline on the lowered module before it is compiled: opt's
        /// -passes syntax, e.g. `default<O2>`.
        #[arg(long, value_name = "PIPELINE")]
        passes: Option<String>,
        /// The runtime library: liblocus_gc_runtime.a, or a directory holding it.
        #[arg(long, value_name = "PATH")]
        runtime: Option<PathBuf>,
        /// Also write the module that is compiled (lowered, with the executable's main) as
        /// text, for doing the remaining steps by hand (llc-19, clang-19).
        #[arg(long, value_name = "OUT.ll")]
        emit_ir: Option<PathBuf>,
        /// Put a safepoint poll (a call of the runtime's locus_gc_poll) at every loop back
        /// edge of the functions that take part, so that a thread looping without calls
        /// cannot hold the other threads' collections up (frames only).
        #[arg(long)]
        safepoint_polls: bool,
        /// Who places the write barriers generational collectors (mmtk:stickyimmix,
        /// mmtk:gencopy) need after a store of a tracked pointer into an object: `insert`
        /// (the default: the lowering, after every such store no frontend barrier on that
        /// object follows), `auto` (the lowering, in every function where the frontend
        /// placed no julia.write_barrier: a function without barriers inlined into one with
        /// them loses its own) or `frontend` (only the frontend's julia.write_barrier calls,
        /// as Julia's codegen places them).
        #[arg(long, value_enum, default_value = "insert", value_name = "WHO")]
        write_barriers: BarriersArg,
        /// Inline the allocation fast path of `locus_gc_alloc` calls with constant, small
        /// sizes (`auto`, the default: the code bumps the thread's MMTk allocation buffer
        /// itself when the runtime offers one and calls the runtime only when it must) or
        /// leave every allocation a call (`never`; frame roots: statepoint roots always
        /// inline).
        #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
        inline_alloc: InlineArg,
        /// The executable's collector when its environment names none: `stress`, `locus`
        /// or `mmtk:PLAN` (any plan with --roots statepoint; marksweep, immix or
        /// stickyimmix with frame roots), as `locus gc run --collector` takes; default
        /// mmtk:immix. LOCUS_GC_COLLECTOR (or LOCUS_GC_STRESS=1) in the executable's
        /// environment still chooses another. An unknown name, or a plan that cannot pin
        /// with frame roots, is refused (status 1, nothing written).
        #[arg(long, value_name = "NAME")]
        collector: Option<String>,
        /// The C compiler driver that links the executable (it is given the object, the
        /// runtime library and the system libraries the runtime needs, as `cc` takes them).
        #[arg(long, default_value = build::DEFAULT_LINKER, value_name = "CMD")]
        linker: String,
        /// One more argument for the linker driver, after Locus's own (repeatable; e.g.
        /// `--link-arg=-fuse-ld=lld`, `--link-arg=-static-pie`).
        #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
        link_arg: Vec<String>,
    },
}

/// `--collector`.
fn parse_collector(name: &str) -> Result<Collector, String> {
    Collector::from_name(name)
}

/// The collector of `gc run` and of `gc build`'s executables when none is named: MMTk's
/// Immix, the fastest plan on GCBench (about 3x MarkSweep's speed), which runs every
/// program of the GC suite with both kinds of roots (frame roots pinned, statepoint roots
/// moved) in the default growing heap (the crate docs of locus-gc give the figures).
pub const DEFAULT_COLLECTOR: Collector = Collector::Mmtk(locus_gc::mmtk::Plan::Immix);

/// [`DEFAULT_COLLECTOR`], or the runtime's own mark-sweep where MMTk cannot start (an
/// address-space limit, `ulimit -v`, below what it reserves).
fn default_collector() -> Collector {
    match locus_gc::mmtk::address_space_for_mmtk() {
        Ok(()) => DEFAULT_COLLECTOR,
        Err(_) => Collector::Locus,
    }
}

/// `--write-barriers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BarriersArg {
    /// The lowering, in functions without frontend barriers.
    Auto,
    /// The lowering, after every store that needs one.
    Insert,
    /// The frontend's only.
    Frontend,
}

impl From<BarriersArg> for WriteBarriers {
    fn from(b: BarriersArg) -> WriteBarriers {
        match b {
            BarriersArg::Auto => WriteBarriers::Auto,
            BarriersArg::Insert => WriteBarriers::Insert,
            BarriersArg::Frontend => WriteBarriers::Frontend,
        }
    }
}

/// `--inline-alloc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InlineArg {
    /// Inline the fast path of constant, small allocations.
    Auto,
    /// Leave every allocation a call.
    Never,
}

impl From<InlineArg> for InlineAlloc {
    fn from(i: InlineArg) -> InlineAlloc {
        match i {
            InlineArg::Auto => InlineAlloc::Auto,
            InlineArg::Never => InlineAlloc::Never,
        }
    }
}

/// `--roots`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RootsArg {
    /// Julia-style GC frames.
    Frames,
    /// LLVM statepoints and their stack maps.
    Statepoint,
}

impl From<RootsArg> for Roots {
    fn from(r: RootsArg) -> Roots {
        match r {
            RootsArg::Frames => Roots::Frames,
            RootsArg::Statepoint => Roots::Statepoint,
        }
    }
}

fn read(input: &Input, file: &std::path::Path) -> Result<Vec<u8>, Failure> {
    input.read(file).map_err(Failure::Message)
}

fn io(e: std::io::Error) -> Failure {
    Failure::Message(e.to_string())
}

/// Writes the lowering report.
pub fn write_report(out: &mut dyn Write, reports: &[FunctionReport]) -> std::io::Result<()> {
    for f in reports {
        writeln!(
            out,
            "function @{}: {} slot(s), at most {} value(s) rooted at one safepoint",
            f.function, f.slots, f.max_live
        )?;
        for (i, sp) in f.safepoints.iter().enumerate() {
            writeln!(out, "  safepoint {i}: {}", sp.call)?;
            if sp.live.is_empty() {
                writeln!(out, "    nothing rooted")?;
            }
            for (name, slot) in &sp.live {
                let how = if sp.stored.contains(name) {
                    "stored just before"
                } else {
                    "already in its slot"
                };
                writeln!(out, "    {name} -> slot {slot} ({how})")?;
            }
            for slot in &sp.nulled {
                writeln!(out, "    slot {slot} nulled (its value is dead)")?;
            }
        }
    }
    Ok(())
}

/// Writes `module` to `output` (bitcode for a `.bc` name, else text) or to `out`.
fn write_module(
    module: &Module<'_>,
    output: Option<&std::path::Path>,
    shown: &str,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    match output {
        Some(path) => {
            let bytes = if path.extension().is_some_and(|e| e == "bc") {
                module.write_bitcode().ok_or_else(|| {
                    Failure::Message(format!("{shown}: LLVM could not write bitcode"))
                })?
            } else {
                module.print().into_bytes()
            };
            std::fs::write(path, bytes)
                .map_err(|e| Failure::Message(format!("{}: {e}", path.display())))
        }
        None => out.write_all(module.print().as_bytes()).map_err(io),
    }
}

/// Prints each GC invariant violation of `module` as one line to `out`; fails if any is an
/// error (warnings alone pass).
fn check_invariants(
    shown: &str,
    module: &Module<'_>,
    strict: bool,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let violations = verify_module(module, VerifyOptions { strict });
    for v in &violations {
        writeln!(out, "{shown}: {}: {v}", v.severity()).map_err(io)?;
    }
    let errors = violations.iter().filter(|v| v.is_error()).count();
    if errors > 0 {
        return Err(Failure::Message(format!(
            "{shown}: {errors} GC invariant violation(s)"
        )));
    }
    Ok(())
}

/// Runs a `gc` subcommand.
pub fn run_command(command: &Command, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Lower {
            file,
            output,
            intermediate,
            report,
            strict,
            passes,
            roots,
            safepoint_polls,
            write_barriers,
            inline_alloc,
        } => {
            let bytes = read(input, file)?;
            let ctx = Context::new();
            let shown = file.display().to_string();
            if *roots == RootsArg::Statepoint {
                if *intermediate || *report || *strict || *safepoint_polls {
                    return Err(Failure::Message(
                        "--intermediate, --report, --strict and --safepoint-polls go with \
                         --roots frames"
                            .into(),
                    ));
                }
                let (module, _) =
                    lower_statepoints_with(&ctx, &shown, &bytes, (*write_barriers).into())
                        .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
                if let Some(pipeline) = passes {
                    locus_llvm::passes::run_passes(&module, pipeline)
                        .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
                }
                return write_module(&module, output.as_deref(), &shown, out);
            }
            let module = Module::parse_ir(&ctx, &shown, &bytes)
                .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            check_invariants(&shown, &module, *strict, &mut std::io::stderr().lock())?;
            let reports = lower_module_with(
                &module,
                LowerOptions {
                    intermediate_only: *intermediate,
                },
                ThreadOptions::safepoint_polls(*safepoint_polls)
                    .with_write_barriers((*write_barriers).into())
                    .with_inline_alloc((*inline_alloc).into()),
            )
            .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            if let Some(pipeline) = passes {
                locus_llvm::passes::run_passes(&module, pipeline)
                    .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            }
            match output {
                Some(path) => {
                    // A `.bc` file gets bitcode, anything else text.
                    let bytes = if path.extension().is_some_and(|e| e == "bc") {
                        module.write_bitcode().ok_or_else(|| {
                            Failure::Message(format!("{shown}: LLVM could not write bitcode"))
                        })?
                    } else {
                        module.print().into_bytes()
                    };
                    std::fs::write(path, bytes)
                        .map_err(|e| Failure::Message(format!("{}: {e}", path.display())))?;
                    if *report {
                        write_report(out, &reports).map_err(io)?;
                    }
                }
                None => {
                    out.write_all(module.print().as_bytes()).map_err(io)?;
                    if *report {
                        write_report(&mut std::io::stderr().lock(), &reports).map_err(io)?;
                    }
                }
            }
            Ok(())
        }
        Command::Verify { file, strict } => {
            let bytes = read(input, file)?;
            let ctx = Context::new();
            let shown = file.display().to_string();
            let module = Module::parse_ir(&ctx, &shown, &bytes)
                .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            module
                .verify()
                .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            check_invariants(&shown, &module, *strict, out)
        }
        Command::Run {
            file,
            entry,
            stress,
            collector,
            stats,
            roots,
            moving,
            passes,
            timeout,
            safepoint_polls,
            write_barriers,
            inline_alloc,
        } => {
            let collector = match (*collector, *stress) {
                (Some(Collector::Mmtk(plan)), true) => {
                    return Err(Failure::Message(format!(
                        "gc: --stress conflicts with --collector mmtk:{plan} (the stress collector \
                         is the runtime's own)"
                    )))
                }
                (Some(c), false) => c,
                (_, true) => Collector::Stress,
                // The runtime's own moving collector; otherwise MMTk's Immix (see
                // DEFAULT_COLLECTOR).
                (None, false) if *moving => Collector::Locus,
                (None, false) => default_collector(),
            };
            if let (Collector::Mmtk(plan), true) = (collector, *moving) {
                return Err(Failure::Message(format!(
                    "gc: --moving is the runtime's own moving collector: it conflicts with \
                     --collector mmtk:{plan}"
                )));
            }
            if *moving && *roots != RootsArg::Statepoint {
                return Err(Failure::Message(
                    "--moving needs --roots statepoint: Julia-style frames keep pointers in \
                     registers across safepoints, so nothing they name may move"
                        .into(),
                ));
            }
            let _watchdog = crate::watchdog::start(*timeout, &file.display().to_string());
            let bytes = read(input, file)?;
            let shown = file.display().to_string();
            let prepared = prepare_with_threads(
                &shown,
                &bytes,
                entry,
                passes.as_deref(),
                (*roots).into(),
                ThreadOptions::safepoint_polls(*safepoint_polls)
                    .with_write_barriers((*write_barriers).into())
                    .with_inline_alloc((*inline_alloc).into()),
            )
            .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            crate::sigpipe_for_program();
            // SAFETY: running the user's module is what this command is for; the module is
            // the user's to make sound. A fault in it ends the process with one line and
            // exit status 3 (2 for an access to a freed object under --stress).
            let outcome = match collector {
                Collector::Mmtk(plan) => {
                    // SAFETY: as above.
                    let done = unsafe { prepared.call_mmtk(plan, OnFault::Exit) };
                    done.map_err(|message| Failure::Message(format!("gc: {message} ({shown})")))?
                }
                // SAFETY: as above.
                own => unsafe {
                    prepared.call_with(own == Collector::Stress, *moving, OnFault::Exit)
                },
            };
            writeln!(out, "{}", outcome.value).map_err(io)?;
            if *stats {
                write!(out, "{}", outcome.stats).map_err(io)?;
            }
            Ok(())
        }
        Command::Build {
            file,
            output,
            entry,
            roots,
            passes,
            runtime,
            emit_ir,
            safepoint_polls,
            write_barriers,
            inline_alloc,
            collector,
            linker,
            link_arg,
        } => {
            let shown = file.display().to_string();
            let fail = |e: &dyn std::fmt::Display| Failure::Message(format!("{shown}: {e}"));
            // Parsed here, not by clap, so that a bad name is status 1 as every other
            // refusal of `gc build` (clap's usage errors are status 2).
            let collector = collector
                .as_deref()
                .map(|name| {
                    Collector::from_name(name).map_err(|e| fail(&format!("--collector: {e}")))
                })
                .transpose()?
                .unwrap_or(DEFAULT_COLLECTOR);
            build::check_collector(collector, (*roots).into()).map_err(|e| fail(&e))?;
            let bytes = read(input, file)?;
            let options = BuildOptions {
                roots: (*roots).into(),
                entry: entry.clone(),
                passes: passes.clone(),
                runtime: runtime.clone(),
                safepoint_polls: *safepoint_polls,
                write_barriers: (*write_barriers).into(),
                inline_alloc: (*inline_alloc).into(),
                collector: Some(collector),
                linker: linker.clone(),
                link_args: link_arg.clone(),
            };
            if let Some(path) = emit_ir {
                let lowered =
                    build::lower_for_build(&shown, &bytes, &options).map_err(|e| fail(&e))?;
                std::fs::write(path, lowered)
                    .map_err(|e| Failure::Message(format!("{}: {e}", path.display())))?;
            }
            build::build(&shown, &bytes, output, &options).map_err(|e| fail(&e))?;
            Ok(())
        }
    }
}
