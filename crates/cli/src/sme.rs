//! `locus sme`: check LLVM IR against the AArch64 SME streaming-mode and ZA rules.

use std::io::Write;

use crate::Failure;

/// The `locus sme` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Check a module and report each function's and call's mode changes.
    Check {
        /// The module (.ll or .bc).
        file: std::path::PathBuf,
    },
}

/// Runs a `locus sme` subcommand.
pub fn run_command(command: &Command, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Check { file } => {
            let _ = (file, out);
            Err(Failure::Message("sme: not yet built".into()))
        }
    }
}
