//! `locus jit`: compile LLVM IR in process with the JIT that keeps its stack maps, and run it.

use std::io::Write;
use std::path::PathBuf;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use locus_llvm::jit_runtime::Runtime;
use locus_llvm::{Context, Module};

use crate::input::Input;
use crate::Failure;

/// The `locus jit` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Compile a module for this machine and call its entry function.
    ///
    /// The entry must be defined as `i64 NAME()` with the C calling convention; its result
    /// is printed on its own line. External functions resolve to this process's symbols
    /// (libc). The module's stack maps (llvm.experimental.stackmap, patchpoint and
    /// statepoint records) are captured with the code and indexed by address. The module
    /// runs with the runtime linked in: `@locus_ic_miss` (the inline caches' miss handler)
    /// and `@locus_poll`, and its stack maps' shadows can be patched to deoptimize
    /// (--invalidate).
    Run {
        /// The module (.ll or .bc).
        file: PathBuf,
        /// The function to call.
        #[arg(long, value_name = "NAME", default_value = "main")]
        entry: String,
        /// After the result, print `records: N` (the stack map records captured) and the
        /// runtime's counts: patches, misses, hits, deopts.
        #[arg(long)]
        stats: bool,
        /// Invalidate this function before the call (repeatable): its stack maps'
        /// shadows call the deopt entry, and a call that reaches one is finished by
        /// Locus's interpreter from the record's live values.
        #[arg(long, value_name = "FUNCTION")]
        invalidate: Vec<String>,
    },
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

/// Runs a `locus jit` subcommand.
pub fn run_command(command: &Command, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Run {
            file,
            entry,
            stats,
            invalidate,
        } => {
            let name = file.display().to_string();
            let ir = input.read(file).map_err(fail)?;
            let text = check_entry(&name, &ir, entry)?;
            run_with_runtime(&name, &text, entry, *stats, invalidate, out)
        }
    }
}

/// Compiles `text` with the JIT runtime linked in, invalidates `invalidate`, calls `entry`
/// and prints its result (and the runtime's counts with `stats`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn run_with_runtime(
    name: &str,
    text: &str,
    entry: &str,
    stats: bool,
    invalidate: &[String],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let rt = Runtime::new(name, text, true).map_err(fail)?;
    for function in invalidate {
        rt.invalidate(function).map_err(fail)?;
    }
    // SAFETY: `check_entry` found `entry` defined as `i64 ()` with the C calling
    // convention. What the code does is the module's business, as with any program run.
    let result = unsafe { rt.call(entry, &[]) }.map_err(fail)?;
    writeln!(out, "{result}").map_err(fail)?;
    if stats {
        let s = rt.stats();
        writeln!(out, "records: {}", rt.jit().stack_maps().len()).map_err(fail)?;
        writeln!(out, "patches: {}", s.patches).map_err(fail)?;
        writeln!(out, "misses: {}", s.misses).map_err(fail)?;
        writeln!(out, "hits: {}", s.hits).map_err(fail)?;
        writeln!(out, "deopts: {}", s.deopts).map_err(fail)?;
    }
    Ok(())
}

/// The runtime's trampolines are x86-64 assembly: elsewhere `jit run` refuses.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn run_with_runtime(
    _name: &str,
    _text: &str,
    _entry: &str,
    _stats: bool,
    _invalidate: &[String],
    _out: &mut dyn Write,
) -> Result<(), Failure> {
    Err(fail(
        "locus jit run needs x86-64 Linux (the runtime's trampolines)",
    ))
}

/// Fails unless the module (IR text or bitcode) defines `entry` as `i64 ()` with the C
/// calling convention; returns the module as IR text, which the runtime reads.
fn check_entry(name: &str, ir: &[u8], entry: &str) -> Result<String, Failure> {
    let context = Context::new();
    let module = Module::parse_ir(&context, name, ir).map_err(fail)?;
    let Some(function) = module.function(entry).filter(|f| !f.is_declaration()) else {
        return Err(fail(format!("{name}: no function @{entry} is defined")));
    };
    let returns_i64 = function.return_type().int_width() == Some(64);
    // 0 is LLVM's `ccc`, the C calling convention.
    if !returns_i64 || !function.params().is_empty() || function.calling_convention() != 0 {
        return Err(fail(format!(
            "{name}: @{entry} must be `i64 @{entry}()` with the C calling convention, not `{}`",
            function
                .print()
                .lines()
                .next()
                .unwrap_or_default()
                .trim_end_matches(" {")
        )));
    }
    Ok(module.print())
}
