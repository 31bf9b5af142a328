//! DWARF expressions with location descriptions on the stack (Locus spec 001,
//! `shared/spec/001_dwarf_location_descriptions_on_stack.md`).
//!
//! # Contract
//!
//! A DWARF expression is a sequence of operations run on a stack machine.
//! Under the extension, each stack entry is either a typed value or a
//! location description (one or more places, each a storage and a bit offset;
//! storages are memory of an address space, a register, implicit bytes, an
//! implicit pointer, undefined, or a composite of parts), and the extension
//! operations act on location descriptions of any kind. The core is pure: no
//! LLVM, no I/O, `no_std` + `alloc`; everything the target knows (registers,
//! memory, the lane, the frame base, base type DIEs, entry values, called
//! expressions, `.debug_addr`, TLS) is asked of the caller. No input panics
//! or runs forever: ill-formed input is an [`Error`] naming its byte offset or
//! operation, every evaluation error names the operation's index and name
//! with an [`ErrorKind`] ([`Error::is_ill_formed`] tells the two apart), a
//! request the [`Target`] cannot answer names the [`Request`] and an
//! [`Unavailable`] reason, and loops, stack depth, location size and call
//! nesting are bounded. [`Error`] is the crate's one error type: decoding,
//! text, evaluation, access and reading binaries.
//!
//! # Layers, and the spec sections they implement
//!
//! * [`Op`], [`decode`]/[`encode`], [`parse_text`]/[`to_text`]: the
//!   operations, their binary encodings (the extension either as current
//!   LLVM's `DW_OP_LLVM_user` 0xe9 + sub-opcode, the default, or as the older
//!   direct opcodes 0xe1–0xec, see [`ExtensionEncoding`]) and a text syntax
//!   with the spec's names. Bytes → ops → bytes (for minimal LEB128s and
//!   standard opcodes) and text → ops → text round-trip; [`parse_text`]
//!   also reads what llvm-dwarfdump and gdb print (`DW_OP_breg7 RSP+8,
//!   DW_OP_entry_value(DW_OP_reg5 RDI)`, `2: DW_OP_breg7 8 [$rsp]`), with
//!   their x86-64 and AArch64 register names ([`register_number`]). One
//!   constructor, [`Evaluation::new`], takes an [`Expression`]: encoded
//!   bytes (no decoding pass: each operation is decoded as it runs) or
//!   decoded operations ([`Expression::with_offsets`] with the offsets
//!   [`decode_into`] gives into reused buffers); callers that evaluate many
//!   expressions [`Evaluation::restart`] one evaluation (or carry its
//!   [`Buffers`] to [`Evaluation::new_in`], as gimli's `new_in`), and read
//!   the one [`Evaluation::result`], borrowed.
//! * [`value`]: typed values (generic, signed, unsigned, float) and DWARF 5's
//!   arithmetic, comparisons, `DW_OP_convert` and `DW_OP_reinterpret`;
//!   [`Value::number`] prints one as gdb prints a number of its type.
//! * [`location`]: "Location Description" — storages, single locations,
//!   multi-place descriptions, offsets applied to every place. One place
//!   ([`Places`]) and short implicit bytes ([`Bytes`]) are stored inline.
//! * [`eval`]: "Stack Location Description Operations" and every example of
//!   "DWARF 5" and "Extension Solution" — the pause-and-resume
//!   [`Evaluation`] of all DWARF 5 operations and all extension operations
//!   (`offset`, `offset_uconst`, `bit_offset`, `push_lane`,
//!   `form_aspace_address`, `aspace_bregx`, `piece_end`, `undefined`,
//!   `extend`, `select_bit_piece`, `call_frame_entry_reg`,
//!   `aspace_implicit_pointer`, `overlay`, `bit_overlay`, `push_iteration`,
//!   `LLVM_nop`), with implicit conversions between generic
//!   values and default-address-space memory locations, `DW_OP_piece` over
//!   any location kind, and `DW_OP_stack_value` no longer ending the
//!   expression. Why pause-and-resume: see the module docs. The DWARF 6
//!   draft's names for the same operations are read too; its
//!   `DW_OP_composite` ([`Op::Composite`]) is an operation of its own with
//!   the draft's meaning (an empty composite that the pieces after it
//!   extend, a location at every step), not an alias of LLVM's
//!   `DW_OP_LLVM_piece_end` (which closes an incomplete composite after its
//!   pieces); text only, as the draft has no opcode for it yet.
//! * [`access`]: "Bit Offsets", "Objects In Multiple Places" — reading and
//!   writing an object through any location description at bit granularity,
//!   with undefined bits reported, through a caller-supplied [`Target`].
//! * [`target`]: the [`Target`] trait (registers, memory and every other
//!   request: lane, frame base, CFA, base types, entry values, TLS, ...) and
//!   [`Evaluation::evaluate_with`], the loop that answers an evaluation's
//!   requests from one, so that no caller writes it again; the
//!   pause-and-resume API stays for callers that answer otherwise.
//!
//! Speed (`cargo bench -p locus-dwarf --bench gimli_vs_locus`: 13,979
//! expressions of a clang-19 -O2 binary, gimli 0.31 on the same inputs; 2
//! shared cores under load 6-7, three runs): restarting one evaluation per
//! expression 3.04-3.14x gimli's throughput, a fresh evaluation 2.01-2.08x,
//! pre-decoded operations 2.04-2.06x (1.27 in a run where the machine was
//! busiest). By class (restart / fresh / pre-decoded, the two steadier
//! runs): lone register 2.67-2.78 / 1.81 / 1.63, frame-base offset 3.88 /
//! 2.46 / 2.38, entry values 3.75-3.79 / 2.46-2.49 / 2.26, pieces 1.71 /
//! 1.16-1.18 / 1.25, stack values 3.61 / 2.46 / 2.33, other (lone
//! `DW_OP_implicit_value`) 1.76 / 1.36 / 1.24, location-list entries
//! 3.18-3.22 / 2.13 / 2.10-2.12. Requests and their results are returned in
//! two registers ([`EvaluationResult`] is 16 bytes, [`Error`] one pointer):
//! the answer loop copies nothing through memory.
//!
//! # Real targets (feature `binary`)
//!
//! * `binary`: the variables in scope at a PC of an ELF file's DWARF (gimli
//!   reads it), evaluated against a `binary::Snapshot` of registers and memory.
//!   Split DWARF (`-gsplit-dwarf`) is read from a DWARF package (`.dwp`,
//!   `binary::Binary::with_package`) or the `.dwo` each skeleton unit names,
//!   compressed debug sections (`-gz`, zlib or zstd, and `.zdebug_*`) are
//!   decompressed within a bound on their total (`Binary::parse_bounded`; the
//!   header's size is checked before anything is allocated), and a relocatable
//!   object's DWARF is read with its relocations applied (sections at address 0,
//!   as llvm-dwarfdump reads it; several code sections are refused).
//!   Files it cannot read are refused with one message, never an empty list:
//!   no `.debug_info` (stripped, or built without `-g`), a missing `.dwo`,
//!   big-endian objects. What an implicit pointer points to is read as gdb's `*p`
//!   reads it (`Binary::object_at` finds the DIE it names anywhere in the file, such
//!   as gcc's `DW_TAG_dwarf_procedure` for a string literal; `evaluate_part_in` reads
//!   the pointee type's bytes at its offset).
//! * `stopped`: a stopped target (threads' registers by DWARF number, mapped
//!   files, memory) and where a file was loaded in it (its load bias);
//!   `corefile` builds one from an ELF core (`NT_PRSTATUS`, `NT_PRFPREG`,
//!   `NT_FILE`, `NT_AUXV`, `PT_LOAD`; x86-64 and AArch64), `ptrace` (feature
//!   `ptrace`, Linux) from a live process, stopped and let go again.
//! * `binary::json` (feature `json`, on by default): the CTX.json / SNAP.json snapshot
//!   format `locus dwarf` reads and writes, and the JSON of location descriptions;
//!   its errors ([`ErrorDetail::Json`]) name the key path at fault.
//! * `unwind`: frames beyond the innermost from each mapped file's
//!   `.eh_frame`/`.debug_frame` (callers know sp, pc and the callee-saved
//!   registers, and a call-clobbered one only for a variable whose location the
//!   compiler kept over the call: `Binary::kept_across_call`); `callsite`: what a
//!   frame's function got on entry
//!   (`DW_OP_entry_value`, `DW_OP_GNU_parameter_ref`) from the caller's
//!   `DW_TAG_call_site_parameter`s, evaluated in the caller's frame, only when
//!   that call provably enters the function (its target, or one chain of tail
//!   calls, as gdb decides), else refused with the reason.
//!
//! A snapshot as JSON (what `locus dwarf snapshot` writes and
//! `locus dwarf vars --snapshot` / `eval --context` read): numbers are JSON
//! numbers or `"0x…"` strings, bytes are hex in target (little-endian) order.
//!
//! ```json
//! {"address_size": 8,
//!  "registers": {"rsp": {"number": 7, "value": "f0d1ffffff7f0000"}},
//!  "memory": [{"space": 0, "address": "0x7fffffffd1f0", "bytes": "2a000000"}],
//!  "cfa": "0x7fffffffd200", "frame_base": N, "lane": N, "iteration": N, "object_address": N,
//!  "object_location": [{"storage": "register", "register": 0},
//!                      {"storage": "memory", "space": 0, "address": "0x1000"}],
//!  "entry_registers": {"rdi": {"number": 5, "value": "0300000000000000"}},
//!  "pc": "0x55555555520f", "load_bias": "0x555555554000",
//!  "thread": 1, "tid": 4242, "frame": 3, "module": "/path/to/binary"}
//! ```
//!
//! `object_location` (`binary::Snapshot::object_location`) is what
//! `DW_OP_push_object_address` pushes when the object is more than an
//! address in global memory ([`Target::object_location`]): its places in the
//! shape `locus dwarf eval` prints a location's (storage `memory` with
//! `space` and `address`, `register` with a number or a name of
//! `registers`, `implicit` with `bytes`, `undefined`, `implicit_pointer`,
//! `composite` with `parts` of `bit_size` and `location`; each with an
//! optional `bit_offset`). Several places are one object in several places
//! at once: writes through it update every one.
//!
//! Only `registers` and `memory` are needed; `pc` and `load_bias` stand in
//! for `vars --pc`/`--load-bias`; `thread`, `tid`, `frame` and `module` say
//! where the snapshot was taken.
//!
//! # Example
//!
//! The spec's "Source Language Variable Spread Across Multiple Kinds of
//! Locations", evaluated, then read through:
//!
//! ```
//! use locus_dwarf::access::{read, Target};
//! use locus_dwarf::{decode, encode, parse_text, Encoding, Evaluation, EvaluationResult, Unavailable};
//!
//! // VGPR0 is DWARF register 2560 on AMDGPU; lanes are 4 bytes.
//! let regs = |name: &str| (name == "VGPR0").then_some(2560u16);
//! let text = "DW_OP_regx VGPR0; DW_OP_push_lane; DW_OP_uconst 4; DW_OP_mul; DW_OP_offset;
//!             DW_OP_piece 4; DW_OP_addr 0xbeef; DW_OP_piece 2;
//!             DW_OP_uconst 0xf00d; DW_OP_stack_value; DW_OP_piece 2; DW_OP_piece_end";
//! let ops = parse_text(text, regs)?;
//! // The binary form round-trips (DW_OP_LLVM_user encoding by default).
//! let bytes = encode(&ops, Encoding::default())?;
//! let decoded: Vec<_> = decode(&bytes, Encoding::default())?.into_iter().map(|(_, op)| op).collect();
//! assert_eq!(decoded, ops);
//!
//! // A snapshot of the target: VGPR0 lane i holds 0x100 * i; memory at 0xbeef.
//! struct Snapshot { vgpr0: Vec<u8>, memory: (u64, Vec<u8>) }
//! impl Target for Snapshot {
//!     fn read_memory(&mut self, space: u64, address: u64, buf: &mut [u8]) -> bool {
//!         let (base, bytes) = &self.memory;
//!         let Some(at) = address.checked_sub(*base) else { return false };
//!         match bytes.get(at as usize..at as usize + buf.len()) {
//!             Some(b) if space == 0 => { buf.copy_from_slice(b); true }
//!             _ => false,
//!         }
//!     }
//!     fn read_register(&mut self, register: u16, at: u64, buf: &mut [u8]) -> bool {
//!         match self.vgpr0.get(at as usize..at as usize + buf.len()) {
//!             Some(b) if register == 2560 => { buf.copy_from_slice(b); true }
//!             _ => false,
//!         }
//!     }
//!     // The current lane, for `Evaluation::evaluate_with`.
//!     fn lane(&mut self) -> Result<u64, Unavailable> { Ok(3) }
//! }
//! let mut target = Snapshot {
//!     vgpr0: (0..64u32).flat_map(|i| (i * 0x100).to_le_bytes()).collect(),
//!     memory: (0xbeef, vec![0xaa, 0xbb]),
//! };
//!
//! // Evaluate, answering the evaluator's requests (here only the lane).
//! let mut eval = Evaluation::new(&ops, Encoding::default());
//! let mut request = eval.evaluate()?;
//! while request != EvaluationResult::Complete {
//!     request = match request {
//!         EvaluationResult::RequiresLane => eval.resume_with_lane(3)?,
//!         other => panic!("not in this example: {other:?}"),
//!     };
//! }
//! let location = eval.location_result().expect("a location");
//!
//! // The same loop, written once in the crate: the target answers.
//! let mut again = Evaluation::new(&ops, Encoding::default());
//! again.evaluate_with(&mut target)?;
//! assert_eq!(again.location_result().as_ref(), Some(&location));
//!
//! // Read 9 bytes through it: lane 3 of VGPR0, memory, the implicit 0xf00d,
//! // then one byte past the composite's end, which is undefined.
//! let bits = read(&location, 9 * 8, &mut target)?;
//! assert_eq!(bits.to_hex(), "00030000aabb0df0??");
//! # Ok::<(), locus_dwarf::Error>(())
//! ```
#![no_std]

extern crate alloc;

pub mod access;
#[cfg(feature = "binary")]
pub mod binary;
#[cfg(feature = "binary")]
pub mod callsite;
#[cfg(feature = "binary")]
pub mod corefile;
mod error;
pub mod eval;
pub mod location;
mod number;
mod op;
#[cfg(all(feature = "ptrace", target_os = "linux"))]
pub mod ptrace;
mod regnames;
#[cfg(feature = "binary")]
mod sections;
#[cfg(feature = "binary")]
pub mod stopped;
pub mod target;
mod text;
#[cfg(feature = "binary")]
pub mod unwind;
pub mod value;

pub use access::Bits;
pub use error::{Error, ErrorDetail, ErrorKind, JsonErrorKind, Request};
pub use eval::{Buffers, Entry, Evaluation, EvaluationResult, Expression};
pub use location::{Bytes, Location, LocationDescription, Part, Places, SingleLocation, Storage};
pub use number::Number;
pub use op::{decode, decode_into, encode, Encoding, ExtensionEncoding, Op};
pub use regnames::register_number;
pub use target::{Target, Unavailable};
pub use text::{parse_text, parse_text_with, to_text, Syntax};
pub use value::{Value, ValueType};
