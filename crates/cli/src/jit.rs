//! `locus jit`: compile LLVM IR in process with the JIT that keeps its stack maps, and run it.

use std::io::Write;
use std::path::PathBuf;

use locus_llvm::jit_stackmaps::StackMapJit;
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
    /// statepoint records) are captured with the code and indexed by address.
    Run {
        /// The module (.ll or .bc).
        file: PathBuf,
        /// The function to call.
        #[arg(long, value_name = "NAME", default_value = "main")]
        entry: String,
        /// After the result, print `records: N`: the stack map records captured.
        #[arg(long)]
        stats: bool,
    },
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

/// Runs a `locus jit` subcommand.
pub fn run_command(command: &Command, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Run { file, entry, stats } => {
            let name = file.display().to_string();
            let ir = input.read(file).map_err(fail)?;
            check_entry(&name, &ir, entry)?;
            let jit = StackMapJit::new(&name, &ir, &[]).map_err(fail)?;
            // SAFETY: `check_entry` found `entry` defined as `i64 ()` with the C calling
            // convention; `jit` outlives the call. What the code does is the module's
            // business, as with any program run.
            let run: extern "C" fn() -> i64 = unsafe { jit.lookup_fn(entry) }.map_err(fail)?;
            let result = run();
            writeln!(out, "{result}").map_err(fail)?;
            if *stats {
                writeln!(out, "records: {}", jit.stack_maps().len()).map_err(fail)?;
            }
            Ok(())
        }
    }
}

/// Fails unless the module defines `entry` as `i64 ()` with the C calling convention.
fn check_entry(name: &str, ir: &[u8], entry: &str) -> Result<(), Failure> {
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
    Ok(())
}
