//! `locus tour`: a walk through every contract Locus implements, on embedded samples.

use std::io::Write;

use crate::Failure;

/// Arguments of `locus tour`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the tour.
pub fn run(_args: &Args, out: &mut dyn Write) -> Result<(), Failure> {
    writeln!(out, "Locus tour").map_err(|e| Failure::Message(e.to_string()))?;
    Ok(())
}
