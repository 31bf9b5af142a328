//! `locus gc run`: lower a module, JIT it with LLVM 19 and call its entry under the runtime.

use locus_llvm::jit::Jit;
use locus_llvm::{Context, Module};

use crate::lower::{lower_module, FunctionReport, LowerOptions};
use crate::runtime::{self, Config, GcFault, OnFault, Runtime, Stats};
use crate::{Error, Result};

/// How to run a module.
#[derive(Debug)]
pub struct RunOptions {
    /// The entry function, of type `i64 ()`.
    pub entry: String,
    /// Collect at every call that may collect, poison what is freed, never reuse it.
    pub stress: bool,
    /// What the runtime does on a fault (the CLI exits with status 2).
    pub on_fault: OnFault,
    /// Test only: leave out one planned root store.
    pub drop_store: Option<usize>,
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

/// Parses `ir`, checks its GC invariants ([`crate::verify`]: a module with errors is refused
/// with [`Error::Invariants`]; warnings do not stop it), lowers it, JIT-compiles it and
/// calls `entry`.
pub fn run(name: &str, ir: impl AsRef<[u8]>, options: RunOptions) -> Result<RunOutcome> {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, name, ir)?;
    module.verify()?;
    let violations: Vec<_> = crate::verify::verify_module(&module)
        .into_iter()
        .filter(crate::verify::Violation::is_error)
        .collect();
    if !violations.is_empty() {
        return Err(Error::Invariants(violations));
    }
    let reports = lower_module(
        &module,
        LowerOptions {
            intermediate_only: false,
            drop_store: options.drop_store,
        },
    )?;
    let entry_ok = module.function(&options.entry).is_some_and(|f| {
        let ty = f.function_type();
        ty.return_type().and_then(|r| r.int_width()) == Some(64)
            && ty.param_types().is_some_and(|p| p.is_empty())
            && !f.is_declaration()
    });
    if !entry_ok {
        return Err(Error::Entry {
            name: options.entry.clone(),
            message: "no defined function of type `i64 ()` by that name".into(),
        });
    }
    let mut jit = Jit::new()?;
    for (symbol, address) in runtime::symbols() {
        jit.define_symbol(symbol, address)?;
    }
    jit.add_module(&module)?;
    // SAFETY: the entry was checked above to be a defined `i64 ()` function; the JIT
    // outlives the call; the code only calls the runtime's functions, which need the
    // runtime installed on this thread, which the guard below does.
    let entry: extern "C" fn() -> i64 = unsafe { jit.lookup_fn(&options.entry)? };
    let rt = Runtime::enter(Config {
        stress: options.stress,
        on_fault: options.on_fault,
        ..Config::default()
    });
    let value = entry();
    let stats = rt.stats();
    let faults = rt.take_faults();
    drop(rt);
    drop(jit);
    Ok(RunOutcome {
        value,
        stats,
        faults,
        reports,
    })
}
