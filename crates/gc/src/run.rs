//! `locus gc run`: lower a module, JIT it with LLVM 19 and call its entry under the runtime.
//!
//! Preparing a run ([`prepare`]: parse, verify, check the GC invariants, lower, compile) runs
//! none of the module's code and is safe. Calling the entry ([`Prepared::call`], or
//! [`run`] for both steps) runs arbitrary code in this process, and is `unsafe`.
//!
//! # Faults
//!
//! While the entry runs, the process's fault handlers ([`crate::signals`]) are installed,
//! the JIT-compiled functions are registered with them by name and address range, and the
//! calling thread is in a fault scope. A SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP or stack
//! overflow in the module's code, or in anything it calls, then prints one line such as
//!
//! ```text
//! locus: SIGFPE (integer divide by zero) at address 0x7f2a6c1c501a in function `divide` (JIT-compiled code, pc 0x7f2a6c1c501a = divide+0x1a)
//! ```
//!
//! and ends the process with exit status [`crate::signals::FAULT_EXIT_STATUS`] (3), or by
//! `abort` with [`OnFault::Abort`]; no handler can let such a run continue. Under the
//! stress collector, an access to a freed object is a dangling reference instead, handled
//! as [`crate::runtime`] describes (exit status 2 with [`OnFault::Exit`]).

use std::sync::Arc;

use locus_gc_runtime::stackmaps::add_statepoints;
use locus_gc_runtime::stackmaps::cfi::EhFrame;
use locus_llvm::jit::Jit;
use locus_llvm::jit_stackmaps::StackMapJit;
use locus_llvm::passes::run_passes;
use locus_llvm::{Context, Module};

use crate::contract::RUNTIME_GET_PGCSTACK;
use crate::lower::statepoint::{rewrite_for_statepoints_with, StatepointReport};
use crate::lower::{
    lower_module_with, FunctionReport, InlineAlloc, LowerOptions, ThreadOptions, WriteBarriers,
};
use crate::runtime::{self, Collector, Config, GcFault, OnFault, Runtime, StackMaps, Stats};
use crate::signals::{self, CodeRange};
use crate::{Error, Result};

/// Where a collection finds the roots of compiled code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Roots {
    /// Julia-style GC frames linked into a chain ([`crate::lower`]): objects never move.
    #[default]
    Frames,
    /// LLVM statepoints: the stack maps of `rewrite-statepoints-for-gc`'s output, walked
    /// through the frame-pointer chain ([`crate::lower::statepoint`],
    /// [`crate::runtime::statepoints`]); a moving collector may run. x86-64 only.
    Statepoint,
}

/// How to run a module.
#[derive(Debug)]
pub struct RunOptions {
    /// Where the collector finds roots.
    pub roots: Roots,
    /// Move every live object that is not pinned at each collection (only with
    /// [`Roots::Statepoint`]): with `stress`, old copies are made inaccessible, so a pointer
    /// that was not relocated faults as a dangling reference; otherwise they are freed.
    pub moving: bool,
    /// The entry function, of type `i64 ()`.
    pub entry: String,
    /// Collect at every call that may collect, make freed objects inaccessible, never
    /// reuse them.
    pub stress: bool,
    /// What the runtime does on a fault (the CLI exits with status 2).
    pub on_fault: OnFault,
    /// An LLVM pass pipeline in opt's syntax (`default<O2>`) run on the lowered module
    /// before it is compiled, so that the collector checks the frames as the optimizer
    /// left them ([`prepare_with_passes`]).
    pub passes: Option<String>,
    /// Put a safepoint poll at every loop back edge ([`crate::lower::polls`]), so that a
    /// thread looping without calls cannot hold the other threads' collections up
    /// (`--safepoint-polls`; frames only).
    pub safepoint_polls: bool,
    /// Who places the write barriers generational plans need (`--write-barriers`).
    pub write_barriers: WriteBarriers,
    /// Whether the lowering inlines the allocation fast path (`--inline-alloc`; frame roots:
    /// the statepoint rewrite always inlines it).
    pub inline_alloc: InlineAlloc,
    /// Collect with this MMTk plan instead of the runtime's own collector
    /// ([`locus_gc_runtime::runtime::Collector::Mmtk`]; `--collector mmtk:PLAN`): frame
    /// roots and a plan that pins only, without `stress` or `moving`. One MMTk heap per
    /// process: a process runs programs under one plan.
    pub mmtk: Option<locus_gc_runtime::mmtk::Plan>,
}

impl Default for RunOptions {
    /// Entry `main`, no stress, [`OnFault::Exit`] (as [`Config::default`]).
    fn default() -> RunOptions {
        RunOptions {
            roots: Roots::Frames,
            moving: false,
            entry: "main".into(),
            stress: false,
            on_fault: OnFault::Exit,
            passes: None,
            safepoint_polls: false,
            write_barriers: WriteBarriers::default(),
            inline_alloc: InlineAlloc::default(),
            mmtk: None,
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// The entry's return value.
    pub value: i64,
    /// The runtime's counters.
    pub stats: Stats,
    /// Faults recorded (only with a handler that lets the run continue).
    pub faults: Vec<GcFault>,
    /// What the lowering did.
    pub reports: Vec<FunctionReport>,
}

/// A module lowered and JIT-compiled, ready to call: what [`prepare`] makes.
pub struct Prepared {
    /// Owns the compiled code: the entry address and `code` are valid while it lives.
    _jit: Compiled,
    /// Statepoint roots: the compiled code's stack maps.
    stack_maps: Option<Arc<StackMaps>>,
    entry: String,
    address: usize,
    code: Vec<CodeRange>,
    reports: Vec<FunctionReport>,
}

/// The JIT that owns a prepared module's code (only held: dropping it frees the code).
#[allow(dead_code)]
enum Compiled {
    /// Frames: ORC's LLJIT.
    Orc(Jit),
    /// Statepoints: MCJIT with the stack maps kept (boxed: the index is large).
    StackMaps(Box<StackMapJit>),
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("entry", &self.entry)
            .field("address", &format_args!("{:#x}", self.address))
            .field("functions", &self.code.len())
            .finish_non_exhaustive()
    }
}

/// A `julia.*` call left after lowering is one neither the lowering nor the Locus runtime
/// implements (an intrinsic of another Julia pass, such as `julia.ptls_states`): it is
/// refused here, naming it, rather than left for the JIT to fail on an unknown symbol.
fn refuse_julia_runtime_calls(module: &Module<'_>) -> Result<()> {
    for f in module.function_list() {
        for inst in f.instructions() {
            let Some(name) = inst.as_call().and_then(|c| c.callee_name()) else {
                continue;
            };
            if name.starts_with("julia.") {
                return Err(Error::Lower {
                    function: f.name(),
                    instruction: Some(inst.print().trim().to_string()),
                    message: format!(
                        "@{name} is left after lowering: neither the lowering nor the Locus \
                         runtime implements it (it belongs to another of Julia's passes or \
                         to Julia's own runtime)"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Checks `module`'s GC invariants and lowers it in place with GC frames, as
/// [`prepare_with_roots`] and [`crate::build`] do: a module with errors is refused with
/// [`Error::Invariants`], and so is a `julia.*` call left after lowering.
pub(crate) fn lower_frames(
    module: &Module<'_>,
    threads: ThreadOptions,
) -> Result<Vec<FunctionReport>> {
    module.verify()?;
    // A function that already calls the runtime's `locus_gc_get_pgcstack` was lowered
    // before (and checked then): its frame stores and lowered intrinsics (a
    // `pointer_from_objref` is a plain cast now) break the rules by design, and the
    // lowering passes it through.
    let lowered: Vec<String> = module
        .function_list()
        .into_iter()
        .filter(|f| {
            f.instructions().into_iter().any(|i| {
                i.as_call()
                    .and_then(|c| c.callee_name())
                    .is_some_and(|n| n == RUNTIME_GET_PGCSTACK)
            })
        })
        .map(|f| f.name())
        .collect();
    let violations: Vec<_> = crate::verify::verify_module(module, Default::default())
        .into_iter()
        .filter(|v| v.is_error() && !lowered.contains(&v.function))
        .collect();
    if !violations.is_empty() {
        return Err(Error::Invariants(violations));
    }
    let reports = lower_module_with(module, LowerOptions::default(), threads)?;
    refuse_julia_runtime_calls(module)?;
    Ok(reports)
}

/// Safepoint polls with statepoint roots are refused: the statepoint rewrite does not wrap
/// `locus_gc_poll` yet, so a thread stopped at a poll would not have its compiled frames
/// walked.
pub(crate) fn refuse_statepoint_polls(entry: &str, threads: ThreadOptions) -> Result<()> {
    if threads.safepoint_polls {
        return Err(Error::Entry {
            name: entry.to_owned(),
            message: "--safepoint-polls goes with --roots frames: the statepoint rewrite \
                      does not wrap locus_gc_poll yet"
                .into(),
        });
    }
    Ok(())
}

/// Parses `ir`, checks its GC invariants ([`crate::verify`]: a module with errors is refused
/// with [`Error::Invariants`]; warnings do not stop it; functions already lowered, which
/// call the runtime's `locus_gc_get_pgcstack`, are not checked), lowers it (functions that
/// are already lowered pass through, as [`lower_module`](crate::lower::lower_module)
/// decides), checks that `entry` is a defined `i64 ()` function and JIT-compiles the
/// module. Runs none of its code.
///
/// # Errors
/// LLVM's ([`Error::Llvm`]: parsing, verifying, compiling), the invariants, the lowering's,
/// and [`Error::Entry`].
pub fn prepare(name: &str, ir: impl AsRef<[u8]>, entry: &str) -> Result<Prepared> {
    prepare_with_passes(name, ir, entry, None)
}

/// [`prepare`], with the LLVM pass pipeline `passes` (opt's `-passes=` syntax, such as
/// `default<O2>`) run in process on the module after it is lowered and before it is
/// compiled, as `opt-19 -passes=...` would run on `locus gc lower`'s output.
///
/// # Errors
/// As [`prepare`], and [`Error::Llvm`] for a pipeline LLVM cannot parse.
pub fn prepare_with_passes(
    name: &str,
    ir: impl AsRef<[u8]>,
    entry: &str,
    passes: Option<&str>,
) -> Result<Prepared> {
    prepare_with_roots(name, ir, entry, passes, Roots::Frames)
}

/// Parses, checks and lowers as [`prepare`] does (for statepoint roots, rewrites with
/// [`rewrite_for_statepoints_with`] instead, then runs `passes` on the result), and compiles.
///
/// # Errors
/// As [`prepare_with_passes`]; [`Error::Lower`] for statepoint roots on a host other than
/// x86-64, or stack maps the collector cannot use (a GC pointer kept in a register).
pub fn prepare_with_roots(
    name: &str,
    ir: impl AsRef<[u8]>,
    entry: &str,
    passes: Option<&str>,
    roots: Roots,
) -> Result<Prepared> {
    prepare_with_threads(name, ir, entry, passes, roots, ThreadOptions::default())
}

/// [`prepare_with_roots`], with what the lowering adds for several threads (`threads`:
/// safepoint polls).
///
/// # Errors
/// As [`prepare_with_roots`], and [`Error::Entry`] for safepoint polls with statepoint
/// roots (not supported yet: see [`crate::lower::polls`]).
pub fn prepare_with_threads(
    name: &str,
    ir: impl AsRef<[u8]>,
    entry: &str,
    passes: Option<&str>,
    roots: Roots,
    threads: ThreadOptions,
) -> Result<Prepared> {
    if roots == Roots::Statepoint {
        refuse_statepoint_polls(entry, threads)?;
        return prepare_statepoints(name, ir.as_ref(), entry, passes, threads.write_barriers);
    }
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, name, ir)?;
    let reports = lower_frames(&module, threads)?;
    if let Some(pipeline) = passes {
        run_passes(&module, pipeline)?;
    }
    let entry_ok = module.function(entry).is_some_and(|f| {
        let ty = f.function_type();
        ty.return_type().and_then(|r| r.int_width()) == Some(64)
            && ty.param_types().is_some_and(|p| p.is_empty())
            && !f.is_declaration()
    });
    if !entry_ok {
        return Err(Error::Entry {
            name: entry.to_owned(),
            message: "no defined function of type `i64 ()` by that name".into(),
        });
    }
    let mut jit = Jit::new()?;
    for (symbol, address) in runtime::symbols()
        .into_iter()
        .chain(signals::thread_symbols())
    {
        jit.define_symbol(symbol, address)?;
    }
    jit.add_module(&module)?;
    let address = usize::try_from(jit.lookup(entry)?).map_err(|_| Error::Entry {
        name: entry.to_owned(),
        message: "its address does not fit a pointer".into(),
    })?;
    // The module is compiled now: every defined function it exports has an address and a
    // size, for naming the function a fault happens in. (Functions with local linkage
    // cannot be looked up, and go unnamed.)
    let code = module
        .functions()
        .into_iter()
        .filter(|f| module.function(f).is_some_and(|f| !f.is_declaration()))
        .filter_map(|f| {
            let start = usize::try_from(jit.lookup(&f).ok()?).ok()?;
            let len = usize::try_from(jit.symbol_size(&f)?).ok()?;
            Some(CodeRange {
                start,
                len,
                name: f,
            })
        })
        .collect();
    Ok(Prepared {
        _jit: Compiled::Orc(jit),
        stack_maps: None,
        entry: entry.to_owned(),
        address,
        code,
        reports,
    })
}

impl Prepared {
    /// What the lowering did.
    pub fn reports(&self) -> &[FunctionReport] {
        &self.reports
    }

    /// The JIT-compiled functions that have a name and a known size.
    pub fn functions(&self) -> &[CodeRange] {
        &self.code
    }

    /// Calls the entry under a new runtime ([`Runtime::enter`] with `stress` and
    /// `on_fault`), with the fault handling the [module documentation](self) describes.
    /// The runtime is dropped (its heap freed) before this returns.
    ///
    /// # Safety
    ///
    /// This runs the module's code, which Locus cannot check, in this process. The caller
    /// must make sure that running it is sound: every memory access it makes is to memory
    /// it may access (its own stack and globals, objects the runtime gave it while they
    /// are live, what its callees return), every function it calls (the runtime's entry
    /// points, or any symbol of the process) is called as its contract requires, and it
    /// does not unwind. Faults are reported and end the process, but undefined behaviour
    /// that does not fault (writing over this process's own memory, say) cannot be caught.
    /// The stress collector makes freed objects inaccessible, so under `stress` an access
    /// to one faults instead.
    pub unsafe fn call(&self, stress: bool, on_fault: OnFault) -> RunOutcome {
        // SAFETY: the caller's promise.
        unsafe { self.call_with(stress, false, on_fault) }
    }

    /// [`Prepared::call`], with the moving collector when `moving` (and the module was
    /// prepared for statepoint roots; frames never move).
    ///
    /// # Safety
    ///
    /// As for [`Prepared::call`].
    pub unsafe fn call_with(&self, stress: bool, moving: bool, on_fault: OnFault) -> RunOutcome {
        let config = Config {
            collector: if stress {
                Collector::Stress
            } else {
                Collector::Locus
            },
            on_fault,
            stack_maps: self.stack_maps.clone(),
            moving: moving && self.stack_maps.is_some(),
            ..Config::default()
        };
        // SAFETY: the caller's promise. The runtime's own collector is never refused.
        match unsafe { self.call_config(config) } {
            Ok(outcome) => outcome,
            Err(message) => panic!("the runtime refused its own collector: {message}"),
        }
    }

    /// [`Prepared::call`] with the MMTk plan `plan` as the collector.
    ///
    /// # Safety
    ///
    /// As for [`Prepared::call`].
    ///
    /// # Errors
    /// Why the runtime refused the collector (statepoint roots, a plan that cannot pin, a
    /// process whose MMTk heap has another plan).
    pub unsafe fn call_mmtk(
        &self,
        plan: locus_gc_runtime::mmtk::Plan,
        on_fault: OnFault,
    ) -> std::result::Result<RunOutcome, String> {
        let config = Config {
            on_fault,
            stack_maps: self.stack_maps.clone(),
            collector: Collector::Mmtk(plan),
            ..Config::default()
        };
        // SAFETY: the caller's promise.
        unsafe { self.call_config(config) }
    }

    /// Calls the entry under a runtime of `config`, or says why the runtime refused it.
    ///
    /// # Safety
    ///
    /// As for [`Prepared::call`].
    unsafe fn call_config(&self, config: Config) -> std::result::Result<RunOutcome, String> {
        let abort = matches!(config.on_fault, OnFault::Abort);
        signals::install();
        let _code = signals::register_code(self.code.iter().cloned());
        // SAFETY: `prepare` checked the entry is a defined `i64 ()` function (C calling
        // convention) and looked its address up in `self.jit`, which outlives the call.
        let entry: extern "C" fn() -> i64 = unsafe { std::mem::transmute(self.address) };
        let rt = Runtime::try_enter(config)?;
        let value = {
            let _scope = signals::fault_scope(abort);
            // The caller's promise (see `# Safety`) makes the call sound; the runtime its
            // code calls into is installed on this thread by the guard above.
            Runtime::call_compiled(|| entry())
        };
        let stats = rt.stats();
        let faults = rt.take_faults();
        drop(rt);
        Ok(RunOutcome {
            value,
            stats,
            faults,
            reports: self.reports.clone(),
        })
    }
}

/// [`prepare`]s `ir` and calls `options.entry` ([`Prepared::call`]).
///
/// # Safety
///
/// As for [`Prepared::call`]: the module's code must be sound to run in this process.
///
/// # Errors
/// As [`prepare`], and [`Error::Entry`] when the runtime refuses [`RunOptions::mmtk`].
pub unsafe fn run(name: &str, ir: impl AsRef<[u8]>, options: RunOptions) -> Result<RunOutcome> {
    if let (Some(plan), true) = (options.mmtk, options.stress || options.moving) {
        return Err(Error::Entry {
            name: options.entry,
            message: format!(
                "the MMTk collector (plan {plan}) does not combine with the stress or moving collector"
            ),
        });
    }
    if options.moving && options.roots == Roots::Frames {
        return Err(Error::Entry {
            name: options.entry,
            message: "the moving collector needs statepoint roots: Julia-style frames keep \
                      pointers in registers across safepoints"
                .into(),
        });
    }
    let prepared = prepare_with_threads(
        name,
        ir,
        &options.entry,
        options.passes.as_deref(),
        options.roots,
        ThreadOptions::safepoint_polls(options.safepoint_polls)
            .with_write_barriers(options.write_barriers)
            .with_inline_alloc(options.inline_alloc),
    )?;
    match options.mmtk {
        Some(plan) => {
            // SAFETY: the caller's promise.
            let done = unsafe { prepared.call_mmtk(plan, options.on_fault) };
            done.map_err(|message| Error::Entry {
                name: options.entry,
                message,
            })
        }
        None => {
            // SAFETY: the caller's promise.
            let done =
                unsafe { prepared.call_with(options.stress, options.moving, options.on_fault) };
            Ok(done)
        }
    }
}

/// Parses and checks `ir` as [`prepare`] does and rewrites it for statepoint roots,
/// returning the module RS4GC produced (what `locus gc lower --roots statepoint` writes).
/// A module that was rewritten already (a defined function has the `statepoint-example`
/// strategy: `locus gc lower --roots statepoint`'s output, perhaps edited or optimized
/// since) is only verified and returned as it is.
///
/// # Errors
/// As [`prepare`], and the rewrite's.
pub fn lower_statepoints<'c>(
    ctx: &'c Context,
    name: &str,
    ir: &[u8],
) -> Result<(Module<'c>, StatepointReport)> {
    lower_statepoints_with(ctx, name, ir, WriteBarriers::default())
}

/// [`lower_statepoints`], with the write barriers `barriers` asks for.
///
/// # Errors
/// As [`lower_statepoints`].
pub fn lower_statepoints_with<'c>(
    ctx: &'c Context,
    name: &str,
    ir: &[u8],
    barriers: WriteBarriers,
) -> Result<(Module<'c>, StatepointReport)> {
    let module = Module::parse_ir(ctx, name, ir)?;
    module.verify()?;
    let rewritten = module.function_list().into_iter().any(|f| {
        !f.is_declaration() && f.gc().as_deref() == Some(crate::lower::statepoint::GC_STRATEGY)
    });
    if rewritten {
        return Ok((module, StatepointReport::default()));
    }
    let violations: Vec<_> = crate::verify::verify_module(&module, Default::default())
        .into_iter()
        .filter(|v| v.is_error())
        .collect();
    if !violations.is_empty() {
        return Err(Error::Invariants(violations));
    }
    let (out, report) = rewrite_for_statepoints_with(ctx, &module, barriers)?;
    refuse_julia_runtime_calls(&out)?;
    Ok((out, report))
}

fn prepare_statepoints(
    name: &str,
    ir: &[u8],
    entry: &str,
    passes: Option<&str>,
    barriers: WriteBarriers,
) -> Result<Prepared> {
    // AArch64 slots are placed through the code's call frame information, as in the
    // runtime's reader of an executable's stack maps (`locus_gc_runtime::stackmaps`).
    let through_cfi = cfg!(all(target_arch = "aarch64", target_os = "linux"));
    if !cfg!(target_arch = "x86_64") && !through_cfi {
        return Err(Error::Lower {
            function: entry.to_owned(),
            instruction: None,
            message: "statepoint roots walk x86-64 and AArch64 Linux frames only".into(),
        });
    }
    let ctx = Context::new();
    let (module, _) = lower_statepoints_with(&ctx, name, ir, barriers)?;
    if let Some(pipeline) = passes {
        run_passes(&module, pipeline)?;
    }
    let entry_ok = module.function(entry).is_some_and(|f| {
        let ty = f.function_type();
        ty.return_type().and_then(|r| r.int_width()) == Some(64)
            && ty.param_types().is_some_and(|p| p.is_empty())
            && !f.is_declaration()
    });
    if !entry_ok {
        return Err(Error::Entry {
            name: entry.to_owned(),
            message: "no defined function of type `i64 ()` by that name".into(),
        });
    }
    let defined: Vec<String> = module
        .function_list()
        .into_iter()
        .filter(|f| !f.is_declaration())
        .map(|f| f.name())
        .collect();
    let symbols: Vec<(&str, usize)> = runtime::symbols()
        .into_iter()
        .chain(runtime::statepoint_symbols())
        .chain(signals::thread_symbols())
        .filter(|(n, _)| !defined.iter().any(|d| d == n))
        .collect();
    let jit = StackMapJit::from_module_with_frame_pointers(&module, &symbols)?;
    let mut maps = StackMaps::new();
    for s in jit.sections() {
        if s.kind == locus_llvm::jit_stackmaps::SectionKind::Code {
            let start = usize::try_from(s.address).unwrap_or(usize::MAX);
            maps.add_code(
                start,
                start.saturating_add(usize::try_from(s.size).unwrap_or(0)),
            );
        }
    }
    // What is wrong with the compiled code's stack maps, as a lowering error.
    let bad = |message: String| Error::Lower {
        function: entry.to_owned(),
        instruction: None,
        message,
    };
    let eh_frame = if through_cfi {
        let (section, bytes) = jit.read_only_section(".eh_frame").ok_or_else(|| {
            bad("the compiled code has no .eh_frame, which places AArch64 stack slots".into())
        })?;
        Some(EhFrame::new(bytes, section.address).map_err(|e| bad(format!(".eh_frame: {e}")))?)
    } else {
        None
    };
    // The JIT's addresses are those its .eh_frame gives: no bias.
    add_statepoints(&mut maps, jit.stack_maps(), 0, eh_frame.as_ref()).map_err(
        |(function, message)| Error::Lower {
            function: jit
                .functions()
                .iter()
                .find(|f| f.address == function)
                .map_or_else(|| entry.to_owned(), |f| f.name.clone()),
            instruction: None,
            message,
        },
    )?;
    let address = jit
        .function_address(entry)
        .and_then(|a| usize::try_from(a).ok())
        .ok_or_else(|| Error::Entry {
            name: entry.to_owned(),
            message: "not found in the compiled code".into(),
        })?;
    let code = jit
        .functions()
        .iter()
        .filter_map(|f| {
            Some(CodeRange {
                start: usize::try_from(f.address).ok()?,
                len: usize::try_from(f.end.checked_sub(f.address)?).ok()?,
                name: f.name.clone(),
            })
        })
        .collect();
    Ok(Prepared {
        _jit: Compiled::StackMaps(Box::new(jit)),
        stack_maps: Some(Arc::new(maps)),
        entry: entry.to_owned(),
        address,
        code,
        reports: Vec::new(),
    })
}
