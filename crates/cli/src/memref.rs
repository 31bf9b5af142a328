//! `locus memref`: compile MLIR kernels and call them on .npy files.

use std::io::Write;

use crate::Failure;

/// The `locus memref` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Lower an MLIR kernel to a shared library.
    Compile {
        /// The kernel (.mlir).
        kernel: std::path::PathBuf,
    },
}

/// Runs a `locus memref` subcommand.
pub fn run_command(command: &Command, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Compile { kernel } => {
            let _ = (kernel, out);
            Err(Failure::Message("memref: not yet built".into()))
        }
    }
}
