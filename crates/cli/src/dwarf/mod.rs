//! `locus dwarf`: evaluate, assemble and disassemble DWARF location expressions.

use std::io::Write;

use crate::Failure;

/// The `locus dwarf` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Print the text form of an encoded expression.
    Disasm {
        /// The expression's bytes in hex.
        hex: String,
    },
}

/// Runs a `locus dwarf` subcommand.
pub fn run_command(command: &Command, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Disasm { hex } => {
            let _ = (hex, out);
            Err(Failure::Message("dwarf: not yet built".into()))
        }
    }
}
