//! Real binaries (feature `binary`): find the variables in scope at a PC in an
//! ELF file's DWARF (read with gimli: `.debug_info`, `.debug_loclists`,
//! `.debug_loc`, `.debug_addr`), and evaluate their location expressions with
//! Locus against a [`Snapshot`] of the target (registers, memory, entry
//! values, CFA).
//!
//! The evaluator core stays pure and answers its requests through the
//! [`Target`](crate::access::Target) trait
//! ([`Evaluation::evaluate_with`](crate::Evaluation::evaluate_with)); this module supplies the
//! targets: [`Snapshot`] (owned, writable), [`State`] (borrowed: one frame of
//! a snapshot, a core file or a process, with entry values evaluated against
//! the registers at function entry) and [`WithFrame`] (adds the function's
//! `DW_AT_frame_base` and its unit's base types to any target), and reads the
//! object's bits through the resulting location description
//! ([`evaluate_variable_with`], [`read`], with [`crate::access`]).
//! [`Binary::parse`] reads an object's DWARF once for any number of PCs.
//! `DW_OP_addrx`/`DW_OP_constx` are resolved against `.debug_addr` when the
//! variable is found, and addresses are moved by the load bias of a
//! position-independent file. Location-list entries with an empty range
//! (gcc's location views) never match a PC.
//!
//! By job: `file` (object files, their sections, split DWARF, [`Binary`]), `scopes` (the
//! walk that finds the variables in scope and their location lists), `targets` (what
//! expressions are evaluated against) and `variable` (variables and their evaluation).
//!
//! ```no_run
//! use locus_dwarf::binary::{evaluate_variable, Binary, Snapshot};
//!
//! let data = std::fs::read("a.out")?;
//! let binary = Binary::parse(&data)?;
//! let mut snapshot = Snapshot::default();
//! snapshot.registers.insert(7, 0x7fff_ffff_e000u64.to_le_bytes().to_vec()); // rsp
//! for v in binary.variables_at(0x401130)? {
//!     let value = evaluate_variable(&v, &snapshot)?;
//!     println!("{} = {}", v.name, value.bits.to_hex());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

extern crate std;

use alloc::string::ToString;

pub use crate::sections::DEFAULT_MAX_SECTION_BYTES;
use crate::Error;
use crate::ErrorDetail;

impl From<gimli::Error> for Error {
    fn from(e: gimli::Error) -> Self {
        ErrorDetail::Dwarf {
            what: e.to_string(),
        }
        .into()
    }
}

mod file;
#[cfg(feature = "json")]
pub mod json;
mod scopes;
mod targets;
mod variable;

pub(crate) use file::{encoding_of, R};
pub use file::{location_expressions, symbol_address, variables_at, Binary};
pub(crate) use scopes::{base_types, move_addresses};
pub use targets::{Frame, MemoryBlock, Snapshot, State, WithFrame, MAX_NESTED_EVALUATIONS};
pub use variable::{
    evaluate_part_in, evaluate_variable, evaluate_variable_in, evaluate_variable_with, read, run,
    run_traced, BaseType, Decoded, Evaluated, LocationExpression, Pointee, Variable, VariableKind,
    VariableLocation,
};
