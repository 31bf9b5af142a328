//! DWARF expressions with location descriptions on the stack (Locus spec 001,
//! `shared/spec/001_dwarf_location_descriptions_on_stack.md`).
//!
//! The contract: a DWARF expression is a sequence of operations; under the
//! extension, each stack entry is either a value or a location description,
//! and the extension operations (`DW_OP_offset`, `DW_OP_push_lane`,
//! `DW_OP_form_aspace_address`, `DW_OP_piece_end`, ...) act on location
//! descriptions of any kind. This crate is pure: no LLVM, no I/O, no
//! dependencies, `no_std` + `alloc`. Its first layer, here, is the operation
//! model ([`Op`]), the binary encodings ([`decode`], [`encode`]; the extension
//! either as current LLVM's `DW_OP_LLVM_user` 0xe9 + sub-opcode, the default,
//! or as the older direct opcodes 0xe1–0xec, see [`ExtensionEncoding`]) and a
//! text syntax ([`parse_text`], [`to_text`]) using the spec's names. Bytes →
//! ops → bytes (for minimal LEB128s and standard opcodes; the GNU aliases of
//! DWARF 5 operations decode as the standard operation) and text → ops → text
//! round-trip. No input panics: every ill-formed input is an [`Error`]
//! naming its byte offset and operation.
//!
//! ```
//! use locus_dwarf::{decode, encode, parse_text, to_text, Encoding, ExtensionEncoding, Op};
//!
//! // The spec's "spilled to part of a vector register" example.
//! let vgpr = |name: &str| (name == "VGPR0").then_some(2560u16);
//! let ops = parse_text("DW_OP_regx VGPR0; DW_OP_offset_uconst 20", vgpr)?;
//! assert_eq!(ops, [Op::Regx(2560), Op::OffsetUconst(20)]);
//!
//! // Default encoding: DW_OP_LLVM_user (0xe9) + sub-opcode 0x05.
//! let bytes = encode(&ops, Encoding::default())?;
//! assert_eq!(bytes, [0x90, 0x80, 0x14, 0xe9, 0x05, 0x14]);
//!
//! // Older direct opcodes: DW_OP_LLVM_offset_uconst = 0xe4.
//! let legacy = Encoding { extension: ExtensionEncoding::Legacy, ..Encoding::default() };
//! assert_eq!(encode(&ops, legacy)?, [0x90, 0x80, 0x14, 0xe4, 0x14]);
//!
//! let decoded = decode(&bytes, Encoding::default())?;
//! assert_eq!(decoded, [(0, Op::Regx(2560)), (3, Op::OffsetUconst(20))]);
//! assert_eq!(to_text(&ops), "DW_OP_regx 2560\nDW_OP_offset_uconst 20");
//! # Ok::<(), locus_dwarf::Error>(())
//! ```
#![no_std]

extern crate alloc;

mod error;
pub mod eval;
pub mod location;
mod op;
pub mod value;

pub use error::Error;
pub use eval::{Entry, EvalError, Evaluation, EvaluationResult};
pub use location::{Location, Part, SingleLocation, Storage};
pub use op::{decode, encode, parse_text, to_text, Encoding, ExtensionEncoding, Op};
pub use value::{Value, ValueType};
