//! `liblocus_plugin.so`: Locus's GC and SME passes inside LLVM 19's own tools, as a pass
//! plugin for `opt-19 --load-pass-plugin=PATH` and `clang-19 -fpass-plugin=PATH`.
//!
//! **The contract** (spec 003 describes Julia's late GC passes as passes in the compiler's own
//! pipeline; spec 004 the SME rules a compiler must keep). LLVM looks up
//! `llvmGetPassPluginInfo` in the plugin and calls its registration function with the
//! `PassBuilder` (`llvm/Passes/PassPlugin.h`, plugin API version 1). The passes, by name in a
//! `-passes=` pipeline, at module level or inside `function(...)`:
//!
//! | name | what it does | the CLI's equivalent |
//! |---|---|---|
//! | `locus-gc-verify` | the GC invariants ([`locus_gc::verify`]): errors and warnings | `locus gc verify` |
//! | `locus-late-gc-lowering`, `LateLowerGCFrame` | invariants, then roots placed in Julia's intermediate form | `locus gc lower --intermediate` |
//! | `locus-final-gc-lowering`, `FinalLowerGC` | invariants, then roots placed and the frame made real | `locus gc lower` |
//! | `locus-gc-verify<strict>` (and the lowerings' `<strict>`) | every invariant as spec 003 writes it | `locus gc verify --strict` |
//! | `locus-sme-check` | the SME rules ([`locus_sme::check`]): errors and warnings; predicted mode changes as remarks | `locus sme check` |
//!
//! Julia registers `LateLowerGCFrame` and `FinalLowerGC` as function passes
//! (`src/llvm-julia-passes.inc`: `FUNCTION_PASS` since 2023; in January 2023 FinalLowerGC
//! was still a `MODULE_PASS`), so its RUN lines say `-passes='function(LateLowerGCFrame)'` or just
//! `-passes=LateLowerGCFrame`: both levels are registered for every name. At function level
//! each function is lowered on its own (as [`locus_gc::lower::lower_module`] does it, see
//! `gc.rs`); the result is the same module.
//!
//! In a default pipeline (`clang-19 -fpass-plugin=PATH`, `opt-19 -passes='default<O2>'`)
//! two module passes run: at its start (`PipelineStart`) a module that uses Julia's GC
//! contract (it declares `julia.get_pgcstack` or `julia.get_pgcstack_or_new`, or a function
//! has a `"gcstack"` parameter) is checked and lowered as `locus gc lower` does, before
//! the optimizer (which may otherwise turn a tracked pointer into an integer, unless the
//! data layout makes address spaces 10-13 non-integral as Julia's does: measured on
//! `gc_loaded.ll`, whose lowering at the end of -O2 is refused for a `ptrtoint`); the
//! lowered module survives the optimizer (safepoints lose their memory promises). At its
//! end (`OptimizerLast`) a module for AArch64 (or with SME attributes) is checked as `locus
//! sme check` does, as it will be compiled.
//!
//! **Diagnostics.** Each finding goes to the LLVM context's diagnostic handler, naming the
//! pass, the function and the instruction (and the source location when the instruction
//! has debug information): opt prints `error: locus-gc-verify: RULE: function @F,
//! instruction `I`: WHY` and exits with status 1 at the first error; clang reports them
//! all and fails the compilation. The SME check's predicted mode changes are optimization
//! remarks of the pass `locus-sme` (`opt-19 -pass-remarks=locus-sme`, `clang-19
//! -Rpass=locus-sme`), at each call (`call @g: before smstart sm; after smstop sm; ...`) and
//! function (`entry: ...; exit: ...`). A lowering that cannot finish (IR the lowering
//! refuses, GC invariants broken in a function not framed yet) reports its errors the same
//! way, and so does an internal error of Locus, whose panic is caught here and never
//! unwinds into LLVM. opt-19 exits with status 1 at that error; clang-19 goes on to the end
//! of the compilation and fails it (status 1), so the shim gives the functions the failed
//! pass may have half-changed an `unreachable` body, which the rest of the pipeline and
//! code generation handle: the host never crashes. A function that already has a frame
//! (Julia's intermediate form, or lowered) is not held to the invariants it breaks by
//! design, as `locus gc run` does not hold lowered functions to them.
//!
//! **Late, then final.** The late lowering marks the module with `!locus.gc.late = !{}`
//! (named metadata without operands, so no metadata is renumbered); on a module so marked
//! the final lowering only finishes each function (the frame made real, the helpers
//! rewritten), as Julia's FinalLowerGC does, and neither checks the invariants again (the
//! late lowering's rewrites break some by design: a `julia.pointer_from_objref` becomes a
//! cast, `julia.gc_alloc_obj` a `julia.gc_alloc_bytes` with the type tag as an integer) nor
//! places roots again (a `julia.call`'s argument buffer would become frame slots). So
//! `LateLowerGCFrame` then `FinalLowerGC`, in one run or two, gives the module `locus gc
//! lower` gives. Without the marker the final lowering does all of it: functions with a
//! frame are finished, the others checked and lowered. A module-level final lowering
//! removes the marker; after `function(FinalLowerGC)` it stays.
//!
//! **How it works.** `src/shim.cpp` (built by `build.rs` with LLVM's own flags) holds the
//! pass classes; each run hands the `llvm::Module` to [`locus_plugin_run`] as an
//! `LLVMModuleRef` (`llvm::wrap(&M)`), which borrows it in place
//! ([`locus_llvm::BorrowedModule`]: no printing, no re-parsing, not disposed) and runs
//! Locus's Rust code on it. The plugin links the `libLLVM.so.19.1` that opt-19 and clang-19
//! load (`llvm-sys` with `prefer-dynamic`), so one LLVM is in the process.
//!
//! **How it is tested** (`tests/plugin.rs`, 8 tests, about 20 s of processes): `ldd` finds the same
//! `libLLVM.so.19.1` in the plugin and in opt-19; opt-19 with Julia's and Locus's pipelines
//! (module and function level) gives the module `locus gc lower [--intermediate]` gives
//! on the 38 GC programs (3 pipelines) and 28 FileCheck inputs (2), both parsed, verified
//! and printed again by LLVM; LateLowerGCFrame and FinalLowerGC in two opt-19 runs
//! likewise; `clang-19 -O0 -fpass-plugin` lowers the 38 programs as the CLI does, and at
//! -O2 their lowered and optimised modules, JIT-run under the stress collector, return
//! their expected values with no fault; the 6 inputs the lowering refuses end opt-19 and clang-19 with
//! status 1 and the CLI's message, never a crash; each GC verify fixture's first error is
//! `locus gc verify`'s; on the 22 SME fixtures the diagnostics are `locus sme check`'s, in
//! order, with status 1 exactly when one is an error, and one remark per predicted change;
//! clang-19 at -O2 on the ACLE sources gives, with source locations, one remark per change
//! the model predicts on clang's own optimised module.
//!
//! Julia's own `test/llvmpasses` RUN lines: `scripts/julia-plugin-conformance DIR` runs
//! them as lit would with only the plugin path changed. On the 15 files
//! `scripts/julia-gc-conformance` lists: 6 of 24 RUN lines pass as written (13 use options
//! opt-19 no longer has: typed pointers, the legacy pass manager; 1 adds Julia's
//! LowerPTLSPass; 4 fail checks, mostly on the final frame's spelling), and 44 of 143
//! CHECK-LABEL blocks (44 of the 92 in RUN lines opt-19 can run).
//!
//! # Example
//!
//! ```text
//! cargo build -p locus-plugin
//! opt-19 --load-pass-plugin=target/debug/liblocus_plugin.so \
//!     -passes='function(LateLowerGCFrame,FinalLowerGC)' -S crates/gc/fixtures/programs/list_sum.ll
//! opt-19 --load-pass-plugin=target/debug/liblocus_plugin.so -passes=locus-sme-check \
//!     -pass-remarks=locus-sme -disable-output crates/sme/fixtures/check/clean.ll
//! clang-19 -fpass-plugin=target/debug/liblocus_plugin.so -O2 -c program.ll
//! ```

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use llvm_sys::core::LLVMGetModuleContext;
use locus_gc::verify::VerifyOptions;
use locus_llvm::{BorrowedModule, Context, LLVMModuleRef};

mod gc;
mod sme;

/// The passes, as `src/shim.cpp` numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    GcVerify,
    LateLowering,
    FinalLowering,
    SmeCheck,
    /// At the start of a default pipeline: a GC module lowered.
    AutoGc,
    /// At the end of a default pipeline: an AArch64 or SME module checked.
    AutoSme,
    /// The final lowering of a module Locus's late lowering went through (the shim's
    /// `!locus.gc.late` marker): every function is only finished, as Julia's FinalLowerGC
    /// does, neither checked nor scanned again.
    FinalAfterLate,
}

/// Added to a GC pass's number by its `<strict>` parameter (the shim's `kStrict`).
const STRICT: c_int = 0x100;

impl Pass {
    fn from_raw(raw: c_int) -> Option<Pass> {
        Some(match raw & !STRICT {
            0 => Pass::GcVerify,
            1 => Pass::LateLowering,
            2 => Pass::FinalLowering,
            3 => Pass::SmeCheck,
            4 => Pass::AutoGc,
            5 => Pass::FinalAfterLate,
            6 => Pass::AutoSme,
            _ => return None,
        })
    }
}

/// The module was left as it was.
const UNCHANGED: c_int = 0;
/// The module changed.
const CHANGED: c_int = 1;
/// Findings were reported (some errors perhaps); the module is as it was.
const FINDINGS: c_int = 2;
/// The pass could not finish: its errors were reported, and the compilation must end (the
/// shim makes the functions it ran on safe for the rest of the pipeline).
const FAILED: c_int = 3;

/// What a finding is, as `src/shim.cpp` numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
enum Kind {
    Error = 0,
    Warning = 1,
    Remark = 2,
}

/// `locus_emit_fn` of `src/shim.cpp`.
type EmitFn = unsafe extern "C" fn(
    sink: *mut c_void,
    kind: c_int,
    function: *const c_char,
    function_len: usize,
    instruction: *const c_char,
    instruction_len: usize,
    message: *const c_char,
    message_len: usize,
);

/// Where findings go: the shim's callback and its state for one pass run.
struct Reporter {
    emit: EmitFn,
    sink: *mut c_void,
}

impl Reporter {
    /// Reports one finding. `function` is a name without `@`; `instruction` the text LLVM
    /// prints for it (the shim finds it again for its location); both may be empty.
    fn report(&self, kind: Kind, function: &str, instruction: &str, message: &str) {
        // SAFETY: `emit` and `sink` are what the shim passed to `locus_plugin_run`, valid for
        // the run; every pointer and length pair describes a live Rust string, which the
        // shim reads during the call only.
        unsafe {
            (self.emit)(
                self.sink,
                kind as c_int,
                function.as_ptr().cast(),
                function.len(),
                instruction.as_ptr().cast(),
                instruction.len(),
                message.as_ptr().cast(),
                message.len(),
            );
        }
    }

    /// Reports an error that names no function.
    fn error(&self, message: &str) {
        self.report(Kind::Error, "", "", message);
    }
}

/// What a pass runs on: the whole module, or one function of it.
#[derive(Clone, Copy, Debug)]
enum Scope<'s> {
    Module,
    Function(&'s str),
}

/// Runs pass number `pass` on `module` (the whole module when `per_function` is 0, else the
/// function named by `function`/`function_len`), reporting findings through `emit`.
/// Returns 0 (unchanged), 1 (changed), 2 (findings reported, module unchanged) or 3 (failed:
/// the compilation must end). Called by `src/shim.cpp` only; a panic in Locus is caught and
/// reported as an internal error (3).
///
/// # Safety
///
/// - `module` is the live `llvm::Module` the pass manager runs the pass on (`wrap(&M)`),
///   of the libLLVM this library links, used by nothing else during the call;
/// - `function` points to `function_len` readable bytes (or is null with length 0);
/// - `emit` and `sink` are callable as `locus_emit_fn` with `sink` for the whole call.
#[no_mangle]
pub unsafe extern "C" fn locus_plugin_run(
    pass: c_int,
    module: LLVMModuleRef,
    per_function: c_int,
    function: *const c_char,
    function_len: usize,
    emit: Option<EmitFn>,
    sink: *mut c_void,
) -> c_int {
    let Some(emit) = emit else {
        return FAILED;
    };
    let reporter = Reporter { emit, sink };
    let name = if function.is_null() || function_len == 0 {
        String::new()
    } else {
        // SAFETY: the caller's promise: `function_len` readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(function.cast::<u8>(), function_len) };
        String::from_utf8_lossy(bytes).into_owned()
    };
    let strict = pass & STRICT != 0;
    let Some(pass) = Pass::from_raw(pass) else {
        reporter.error(&format!("internal error: unknown pass number {pass}"));
        return FAILED;
    };
    let options = VerifyOptions { strict };
    let result = catch_unwind(AssertUnwindSafe(|| {
        let scope = if per_function == 0 {
            Scope::Module
        } else {
            Scope::Function(&name)
        };
        // SAFETY: the caller's promise on `module`.
        unsafe { run(pass, options, module, scope, &reporter) }
    }));
    match result {
        Ok(status) => status,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            reporter.error(&format!(
                "internal error in Locus: {what} (the module may be half-changed; please \
                 report it with the input)"
            ));
            FAILED
        }
    }
}

/// Borrows `raw` and runs `pass` on it.
///
/// # Safety
///
/// As for [`locus_plugin_run`]'s `module`.
unsafe fn run(
    pass: Pass,
    options: VerifyOptions,
    raw: LLVMModuleRef,
    scope: Scope<'_>,
    reporter: &Reporter,
) -> c_int {
    if raw.is_null() {
        reporter.error("internal error: the pass manager gave a null module");
        return FAILED;
    }
    // SAFETY: `raw` is live (the caller's promise), so is its context.
    let raw_ctx = unsafe { LLVMGetModuleContext(raw) };
    // SAFETY: the context is the host's, live during the pass and used by nothing else
    // meanwhile (pass managers run one pass at a time on a context); the borrow ends with
    // this function.
    let ctx = match unsafe { Context::borrow_raw(raw_ctx) } {
        Ok(ctx) => ctx,
        Err(e) => {
            reporter.error(&e.to_string());
            return FAILED;
        }
    };
    // SAFETY: `raw` is the module under the pass, in `ctx`, not used elsewhere while the
    // pass runs, and disposed by its owner (never by Locus) after the borrow ends here.
    let module = match unsafe { BorrowedModule::new(&ctx, raw) } {
        Ok(module) => module,
        Err(e) => {
            reporter.error(&e.to_string());
            return FAILED;
        }
    };
    match pass {
        Pass::GcVerify => gc::verify(&module, scope, options, reporter),
        Pass::LateLowering => gc::lower(&module, scope, true, options, reporter),
        Pass::FinalLowering => gc::lower(&module, scope, false, options, reporter),
        Pass::FinalAfterLate => gc::finish(&module, scope, reporter),
        Pass::SmeCheck => sme::check(&module, scope, reporter),
        Pass::AutoGc if gc::uses_gc(&module) => {
            gc::lower(&module, Scope::Module, false, options, reporter)
        }
        Pass::AutoSme if sme::applies(&module) => sme::check(&module, Scope::Module, reporter),
        Pass::AutoGc | Pass::AutoSme => UNCHANGED,
    }
}

/// LLVM's `PassPluginLibraryInfo` (`llvm/Passes/PassPlugin.h`).
#[repr(C)]
pub struct PassPluginLibraryInfo {
    /// `LLVM_PLUGIN_API_VERSION`.
    api_version: u32,
    /// The plugin's name.
    plugin_name: *const c_char,
    /// Its version.
    plugin_version: *const c_char,
    /// `void (*)(llvm::PassBuilder &)`: registers the passes.
    register_pass_builder_callbacks: Option<unsafe extern "C" fn(*mut c_void)>,
}

extern "C" {
    /// Fills in the shim's description (`src/shim.cpp`).
    fn locus_plugin_info(out: *mut PassPluginLibraryInfo);
}

/// The entry point LLVM looks up when it loads the plugin. Defined here, not in the C++
/// shim, because a Rust `cdylib` exports only the symbols Rust defines.
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn llvmGetPassPluginInfo() -> PassPluginLibraryInfo {
    let mut info = PassPluginLibraryInfo {
        api_version: 0,
        plugin_name: std::ptr::null(),
        plugin_version: std::ptr::null(),
        register_pass_builder_callbacks: None,
    };
    // SAFETY: `info` is a valid, writable `PassPluginLibraryInfo` (same layout as LLVM's);
    // the shim writes static strings and a function pointer into it.
    unsafe { locus_plugin_info(&mut info) };
    info
}
