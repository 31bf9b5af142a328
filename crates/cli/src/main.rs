//! `locus`: the runtime side of LLVM's code-generation contracts, from the command line.
//!
//! This binary only parses arguments, reads files and formats output; everything else
//! lives in the `locus-*` crates.

mod dwarf;
mod gc;
mod input;
mod jit;
mod memref;
mod readobj;
mod sme;
mod stackmap;
mod tour;
mod watchdog;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The runtime side of LLVM's code-generation contracts.
#[derive(Parser)]
#[command(name = "locus", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Read at most this many bytes of any one input file (`-` is standard input); a
    /// bigger or endless input is an error.
    #[arg(
        long,
        global = true,
        value_name = "BYTES",
        default_value_t = input::DEFAULT_LIMIT
    )]
    max_input_bytes: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Print, query and check the stack maps (.llvm_stackmaps) of object files.
    ///
    /// Default output is the text `llvm-readobj --stackmap` prints, for every table in the
    /// section (llvm-readobj prints only the first).
    Stackmap(stackmap::Args),
    /// Precise GC for any LLVM frontend, Julia-style: place GC roots late, run under a
    /// stress collector.
    #[command(subcommand)]
    Gc(gc::Command),
    /// DWARF location expressions with location descriptions on the stack: evaluate,
    /// disassemble, and find the variables of a binary at a PC.
    #[command(subcommand)]
    Dwarf(dwarf::Command),
    /// MLIR memrefs: compile kernels to shared libraries and call them on .npy files.
    #[command(subcommand)]
    Memref(memref::Command),
    /// AArch64 SME: where calls switch streaming mode or save ZA, and what breaks the rules.
    #[command(subcommand)]
    Sme(sme::Command),
    /// JIT: compile LLVM IR in process, keeping its stack maps, and run it.
    #[command(subcommand)]
    Jit(jit::Command),
    /// A walk through every contract Locus implements, on embedded samples.
    Tour(tour::Args),
}

/// Why a subcommand failed; either way the exit status is 1.
pub enum Failure {
    /// Printed as `locus: <message>`.
    Message(String),
    /// The subcommand already printed its errors.
    Reported,
}

/// A reader that stops early (`locus tour | head -1`) ends the process quietly, as it ends
/// `cat`: by SIGPIPE's default action, not by a "Broken pipe" error or a panic (Rust
/// ignores SIGPIPE unless told otherwise).
fn die_quietly_on_closed_pipes() {
    // SAFETY: restoring a signal's default disposition at the start of `main`, before any
    // thread is started, races with nothing.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    die_quietly_on_closed_pipes();
    let cli = Cli::parse();
    let input = input::Input {
        limit: cli.max_input_bytes,
    };
    let mut out = std::io::stdout().lock();
    let result = match cli.command {
        Command::Stackmap(args) => stackmap::run(&args, &input, &mut out),
        Command::Gc(command) => gc::run_command(&command, &input, &mut out),
        Command::Dwarf(command) => dwarf::run_command(&command, &input, &mut out),
        Command::Memref(command) => memref::run_command(&command, &input, &mut out),
        Command::Sme(command) => sme::run_command(&command, &input, &mut out),
        Command::Jit(command) => jit::run_command(&command, &input, &mut out),
        Command::Tour(args) => tour::run(&args, &mut out),
    };
    let _ = out.flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Message(message)) => {
            eprintln!("locus: {message}");
            ExitCode::FAILURE
        }
        Err(Failure::Reported) => ExitCode::FAILURE,
    }
}
