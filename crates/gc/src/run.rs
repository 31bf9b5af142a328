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

use locus_llvm::jit::Jit;
use locus_llvm::passes::run_passes;
use locus_llvm::{Context, Module};

use crate::contract::RUNTIME_GET_PGCSTACK;
use crate::lower::{lower_module, FunctionReport, LowerOptions};
use crate::runtime::{self, Config, GcFault, OnFault, Runtime, Stats};
use crate::signals::{self, CodeRange};
use crate::{Error, Result};

/// How to run a module.
#[derive(Debug)]
pub struct RunOptions {
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
}

impl Default for RunOptions {
    /// Entry `main`, no stress, [`OnFault::Exit`] (as [`Config::default`]).
    fn default() -> RunOptions {
        RunOptions {
            entry: "main".into(),
            stress: false,
            on_fault: OnFault::Exit,
            passes: None,
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
    _jit: Jit,
    entry: String,
    address: usize,
    code: Vec<CodeRange>,
    reports: Vec<FunctionReport>,
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

/// Parses `ir`, checks its GC invariants ([`crate::verify`]: a module with errors is refused
/// with [`Error::Invariants`]; warnings do not stop it; functions already lowered, which
/// call the runtime's `locus_gc_get_pgcstack`, are not checked), lowers it (functions that
/// are already lowered pass through, as [`lower_module`] decides), checks that `entry` is a
/// defined `i64 ()` function and JIT-compiles the module. Runs none of its code.
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
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, name, ir)?;
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
    let violations: Vec<_> = crate::verify::verify_module(&module, Default::default())
        .into_iter()
        .filter(|v| v.is_error() && !lowered.contains(&v.function))
        .collect();
    if !violations.is_empty() {
        return Err(Error::Invariants(violations));
    }
    let reports = lower_module(&module, LowerOptions::default())?;
    refuse_julia_runtime_calls(&module)?;
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
        _jit: jit,
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
        let abort = matches!(on_fault, OnFault::Abort);
        signals::install();
        let _code = signals::register_code(self.code.iter().cloned());
        // SAFETY: `prepare` checked the entry is a defined `i64 ()` function (C calling
        // convention) and looked its address up in `self.jit`, which outlives the call.
        let entry: extern "C" fn() -> i64 = unsafe { std::mem::transmute(self.address) };
        let rt = Runtime::enter(Config {
            stress,
            on_fault,
            ..Config::default()
        });
        let value = {
            let _scope = signals::fault_scope(abort);
            // The caller's promise (see `# Safety`) makes the call sound; the runtime its
            // code calls into is installed on this thread by the guard above.
            entry()
        };
        let stats = rt.stats();
        let faults = rt.take_faults();
        drop(rt);
        RunOutcome {
            value,
            stats,
            faults,
            reports: self.reports.clone(),
        }
    }
}

/// [`prepare`]s `ir` and calls `options.entry` ([`Prepared::call`]).
///
/// # Safety
///
/// As for [`Prepared::call`]: the module's code must be sound to run in this process.
///
/// # Errors
/// As [`prepare`].
pub unsafe fn run(name: &str, ir: impl AsRef<[u8]>, options: RunOptions) -> Result<RunOutcome> {
    let prepared = prepare_with_passes(name, ir, &options.entry, options.passes.as_deref())?;
    // SAFETY: the caller's promise.
    Ok(unsafe { prepared.call(options.stress, options.on_fault) })
}
