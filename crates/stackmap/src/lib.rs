//! Read, index, decode and patch LLVM stack maps, without linking LLVM.
//!
//! **The contract.** When a module calls `llvm.experimental.stackmap`,
//! `llvm.experimental.patchpoint.*` or `llvm.experimental.gc.statepoint`, LLVM's code
//! generator writes a `.llvm_stackmaps` section (version 3) that says, for each call site,
//! where every requested live value is: in a register, at an address relative to a register,
//! in memory at such an address, or a constant (spec 000, "Stack Map Format"). It also
//! reserves patchable bytes at each patch point ("`llvm.experimental.patchpoint.*`
//! Intrinsic", Semantics). A JIT or garbage collector is the other end of that contract:
//! given a stopped frame it must find the record for the frame's address and read the
//! values, and at a patch point it must rewrite the reserved bytes. This crate is that end.
//!
//! Where each rule comes from (sections of spec 000, LLVM's `StackMaps.rst`):
//! - [`parse`]: "Stack Map Format" (the layout, 8-byte alignment after the locations and
//!   after the live-outs) and "Stack Map Section" (one table per object file, back to back
//!   in a linked binary);
//! - [`Location`]: the location table (Register, Direct, Indirect, Constant, ConstIndex) and
//!   "Direct Stack Map Entries";
//! - [`index`]: "Stack Map Usage" (records are found by ID and offset; IDs are not unique);
//! - [`statepoint`]: LLVM's `gc.statepoint` lowering (calling convention, flags, deopt
//!   count, deopt values, then (base, derived) pairs);
//! - [`frame`]: the location table's "Value" column;
//! - [`patch`]: the patchpoint semantics ("the runtime must patch all reserved bytes,
//!   padding with nops") and the stackmap shadow.
//!
//! What a record's instruction offset points at depends on the intrinsic:
//! - `stackmap`: the address right after the instructions that precede it (after a call,
//!   that is the call's return address); the shadow bytes begin there;
//! - `patchpoint`: the first of the reserved bytes (the start of the call sequence);
//! - `statepoint`: the return address of the wrapped call.
//!
//! The core is `no_std` + `alloc`; parsing never allocates and never trusts a count before
//! checking that the section can hold it. Every failure is an [`Error`] that names the
//! table, the byte offset and the field.
//!
//! Unsafe code is confined to two private modules: `pod`, where the index's speed-motivated
//! unsafety lives behind a small safe API (slots read back without bounds checks, the
//! cell directory, the SIMD key compare, the prefetch hint and the opt-in huge-page advice),
//! and the patch writer ([`patch::write_code`]), whose contract is unsafe by nature; the
//! crate root denies `unsafe_code` everywhere else.
//!
//! A [`StackMapIndex`] borrows the section its tables were parsed from and copies no record:
//! it keeps, in address order, where each record is (about 24 bytes per record), reads each
//! record's header once to build that (no sort when the records are in address order, as
//! LLVM writes them), and hands out the validated records themselves. Its by-ID table is
//! built on the first [`StackMapIndex::by_id`] call.
//!
//! # Example
//!
//! A section with one function at 0x1000 and one record 0x10 bytes in, whose two locations
//! are a register (DWARF 3, `%rbx`) and a spill slot at `[%rsp + 8]`:
//!
//! ```
//! use locus_stackmap::{Frame, LittleEndian, Location, ParseOptions, StackMapIndex, Tables};
//!
//! let mut s = Vec::new();
//! s.extend([3, 0, 0, 0]); // version 3, reserved
//! s.extend(1u32.to_le_bytes()); // NumFunctions
//! s.extend(0u32.to_le_bytes()); // NumConstants
//! s.extend(1u32.to_le_bytes()); // NumRecords
//! s.extend(0x1000u64.to_le_bytes()); // function address
//! s.extend(16u64.to_le_bytes()); // stack size
//! s.extend(1u64.to_le_bytes()); // record count
//! s.extend(42u64.to_le_bytes()); // record ID
//! s.extend(0x10u32.to_le_bytes()); // instruction offset
//! s.extend([0, 0, 2, 0]); // flags, NumLocations = 2
//! s.extend([1, 0, 8, 0, 3, 0, 0, 0, 0, 0, 0, 0]); // Register %rbx, size 8
//! s.extend([3, 0, 8, 0, 7, 0, 0, 0, 8, 0, 0, 0]); // Indirect [%rsp + 8], size 8
//! s.extend([0, 0, 0, 0, 0, 0, 0, 0]); // align, padding, NumLiveOuts = 0
//!
//! let tables = Tables::new(&s, LittleEndian, ParseOptions::default())
//!     .collect::<Result<Vec<_>, _>>()?;
//! let index = StackMapIndex::new(tables, 0);
//!
//! // A stopped frame: %rbx = 7, %rsp = 0x8000, and 99 stored at 0x8008.
//! struct Stopped;
//! impl Frame for Stopped {
//!     fn register(&self, r: u16) -> Option<u64> {
//!         match r { 3 => Some(7), 7 => Some(0x8000), _ => None }
//!     }
//!     fn read_memory(&self, address: u64, buf: &mut [u8]) -> bool {
//!         if address != 0x8008 { return false; }
//!         buf.copy_from_slice(&99u64.to_le_bytes()[..buf.len()]);
//!         true
//!     }
//! }
//!
//! let found = index.lookup(0x1010).next().ok_or("no record")?;
//! assert_eq!(found.record.id(), 42);
//! let values = found
//!     .record
//!     .locations()
//!     .map(|l| Stopped.value(&l))
//!     .collect::<Result<Vec<_>, _>>()?;
//! assert_eq!(values, [7, 99]);
//! assert!(matches!(found.record.location(1), Some(Location::Indirect { offset: 8, .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![no_std]
#![warn(missing_docs)]
// Unsafe code lives in two modules only: `pod`, the audited home of what the crate does
// unsafely for speed, and `patch`'s code writer, whose contract is unsafe by nature.
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod endian;
pub mod error;
pub mod frame;
pub mod index;
#[cfg(feature = "object")]
pub mod names;
#[cfg(feature = "object")]
pub mod object;
pub mod parse;
pub mod patch;
#[allow(unsafe_code)]
mod pod;
pub mod regs;
pub mod statepoint;

pub use endian::{BigEndian, Endian, LittleEndian, RunTimeEndian};
pub use error::{Error, Field, Result};
pub use frame::Frame;
pub use index::{IndexOptions, IndexedRecord, StackMapIndex};
pub use parse::{
    parse_section, Function, LiveOut, Location, LocationKind, ParseOptions, Record, Records,
    Strictness, Table, Tables,
};
pub use patch::Arch;
pub use statepoint::{GcPointer, StatepointRecord};
