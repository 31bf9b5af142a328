//! `locus gc ...`: check, lower and run IR that uses Julia-style GC pointers.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use locus_gc::lower::{lower_module, FunctionReport, LowerOptions};
use locus_gc::run::{run, RunOptions};
use locus_gc::runtime::OnFault;
use locus_llvm::{Context, Module};

use crate::Failure;

/// The `gc` subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Place GC roots: write the module with a GC frame in every function that calls
    /// `julia.get_pgcstack`.
    Lower {
        /// Textual (.ll) or bitcode (.bc) IR.
        file: PathBuf,
        /// Where to write the lowered module (default: standard output).
        #[arg(short, long, value_name = "OUT.ll")]
        output: Option<PathBuf>,
        /// Stop at Julia's intermediate form (julia.new_gc_frame and friends).
        #[arg(long)]
        intermediate: bool,
        /// Print, per function and safepoint, the rooted values, their slots and where
        /// their stores went (to standard error when the module goes to standard output).
        #[arg(long)]
        report: bool,
    },
    /// Lower, JIT-compile with LLVM 19 and call `i64 ENTRY()`, printing its result.
    Run {
        /// Textual (.ll) or bitcode (.bc) IR.
        file: PathBuf,
        /// The function to call.
        #[arg(long, default_value = "main", value_name = "NAME")]
        entry: String,
        /// Collect at every call that may collect; poison and never reuse freed objects;
        /// a pointer into freed memory ends the run with exit status 2.
        #[arg(long)]
        stress: bool,
        /// Print the collector's counters after the result.
        #[arg(long)]
        stats: bool,
        /// Test only: leave out root store number N, which --stress must then catch.
        #[arg(long, hide = true, value_name = "N")]
        drop_store: Option<usize>,
    },
}

fn read(file: &PathBuf) -> Result<Vec<u8>, Failure> {
    std::fs::read(file).map_err(|e| Failure::Message(format!("{}: {e}", file.display())))
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

/// Runs a `gc` subcommand.
pub fn run_command(command: &Command, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Lower {
            file,
            output,
            intermediate,
            report,
        } => {
            let bytes = read(file)?;
            let ctx = Context::new();
            let shown = file.display().to_string();
            let module = Module::parse_ir(&ctx, &shown, &bytes)
                .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            let reports = lower_module(
                &module,
                LowerOptions {
                    intermediate_only: *intermediate,
                    drop_store: None,
                },
            )
            .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            let text = module.print();
            match output {
                Some(path) => {
                    std::fs::write(path, text)
                        .map_err(|e| Failure::Message(format!("{}: {e}", path.display())))?;
                    if *report {
                        write_report(out, &reports).map_err(io)?;
                    }
                }
                None => {
                    out.write_all(text.as_bytes()).map_err(io)?;
                    if *report {
                        write_report(&mut std::io::stderr().lock(), &reports).map_err(io)?;
                    }
                }
            }
            Ok(())
        }
        Command::Run {
            file,
            entry,
            stress,
            stats,
            drop_store,
        } => {
            let bytes = read(file)?;
            let shown = file.display().to_string();
            let text =
                String::from_utf8(bytes).map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            let options = RunOptions {
                entry: entry.clone(),
                stress: *stress,
                on_fault: OnFault::Exit,
                drop_store: *drop_store,
            };
            let outcome = run(&shown, &text, options)
                .map_err(|e| Failure::Message(format!("{shown}: {e}")))?;
            writeln!(out, "{}", outcome.value).map_err(io)?;
            if *stats {
                write!(out, "{}", outcome.stats).map_err(io)?;
            }
            Ok(())
        }
    }
}
