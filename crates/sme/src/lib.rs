//! AArch64 SME: the streaming-mode and ZA rules of spec 004 ("Support for AArch64 Scalable
//! Matrix Extension in LLVM") as a model you can query, and a checker for LLVM IR.
//!
//! **The contract.** A function's SME attributes say how it expects PSTATE.SM (normal,
//! streaming, streaming-compatible interface; a locally streaming body) and PSTATE.ZA/ZT0
//! (private, new, or shared in, out, inout, preserves) at its boundary. Wherever a caller
//! and a callee disagree, the compiler must switch PSTATE.SM around the call (`smstart sm`,
//! `smstop sm`, tested at run time when the caller is streaming-compatible), and a caller
//! with live ZA must set up a lazy save before calling a function that may clobber it.
//! Changing PSTATE.SM zeroes the vector registers and may change the SVE vector length, so
//! getting a rule wrong corrupts data silently. This crate states the rules once:
//! - [`attrs`] reads the attributes of functions and call sites in both spellings (spec
//!   004 §1's `aarch64_pstate_*` and LLVM 18+'s `aarch64_{new,in,out,inout,preserves}_{za,zt0}`)
//!   and knows by name exactly the functions LLVM 19 knows (`__arm_sme_state`,
//!   `__arm_tpidr2_save`, `__arm_tpidr2_restore`, `__arm_sc_mem{cpy,set,move,chr}`);
//!   `__arm_za_disable` and `__arm_get_current_vg` are normal functions unless declared
//!   `aarch64_pstate_sm_compatible` (a warning says so);
//! - [`rules`] gives each function its interface, ZA/ZT0 state, entry and exit changes
//!   and whether it may be vectorized, and each call the changes before, after and after
//!   an exception (spec 004 §2's table), whether it needs a lazy ZA save, and whether it
//!   may be inlined or tail-called; and lists what is wrong with a set of attributes;
//! - [`hidden`] finds the calls LLVM makes that are not calls in the IR (spec 004 §2
//!   "Unchained Function calls"): `llvm.memcpy`/`memmove`/`memset` not expanded inline
//!   (`__arm_sc_*` from a function that may stream, the C library's otherwise, none with
//!   FEAT_MOPS), and `frem`, `fp128` arithmetic, comparisons and conversions, `i128`
//!   division and conversions, and libm intrinsics (`llvm.cos`, `llvm.pow`, `sincos` for a
//!   `sin` and `cos` of one value, ...), with [`libcalls`] naming the routine as llc-19
//!   does on AArch64 Linux; each gets the model of a call to a normal (or, for `__arm_sc_*`,
//!   streaming-compatible) private-ZA callee;
//! - [`check`] does this for every function and call of an LLVM module (through
//!   `locus-llvm`), with each finding's function and instruction: `locus sme check`;
//! - [`audit`] checks compiled code instead: [`objfile`] reads an AArch64 ELF object
//!   (functions, call targets from relocations, landing pads from `.gcc_except_table`),
//!   [`a64`] decodes the instructions that matter, and each call site, entry, exit and
//!   landing pad is compared with the rules for the attributes from the IR, `--attrs` or
//!   what LLVM knows by name, following the code's branches (a dataflow over each
//!   function's control flow, mode tests decided): `locus sme audit`. `tests/audit.rs`:
//!   llc-19's object of the matrix (84 functions, 83 call sites) has no departure but LLVM
//!   19's missing landing-pad `smstart` (12), 20 hand-broken objects are each caught at
//!   their function, and in `fixtures/cfg/branches.s` (code laid out after a return, a
//!   change on one branch only, `__arm_sme_state` paths, two exits, a mode test of the
//!   wrong register, ZA turned off with a lazy save pending, a TPIDR2 block without
//!   num_za_save_slices, a restore from another block) exactly the 12 departures of the
//!   paths that depart are found. `tests/acle.rs`: the SME ACLE sources
//!   of `fixtures/acle` (every streaming interface, new/shared/preserved ZA, C++ with
//!   exceptions, noreturn calls, switches, loops, indirect calls, hidden library calls)
//!   compiled by clang-19 at -O0 to -O3 (101-102 functions and 179-201 call sites a level)
//!   audit with no false departure (there were 166 at -O0 and 11 at -O3: the mode spilled
//!   to the stack, stores read as writes, dead code after noreturn calls, duplicated
//!   indirect calls); 296 hand-broken variants (a function's first mode change or lazy-save
//!   set-up removed, 74 a level) are each caught in their function. Jump tables
//!   (`fixtures/acle/switch.c`, 16-case switches in streaming, ZA and streaming-compatible
//!   functions): each table is decoded, and every mode change, `msr TPIDR2_EL0` and ZA
//!   restore in the cases made a NOP one at a time (174, 74, 74 and 107 at -O0..-O3) is
//!   caught in its function; `fixtures/cfg/jump_tables.s` decodes the small, tiny and large
//!   code models, masked and spilled indexes, in an object and linked by ld.lld-19.
//!   Shared objects linked by ld.lld-19 (calls through PLT stubs) audit exactly as their
//!   objects (`modes.c`, `za.c`, `switch.c`, with and without branch protection). At -Oz
//!   the machine outliner's `OUTLINED_FUNCTION_n` bodies are followed in place: clean
//!   audits, and each SME instruction in them removed is caught in a caller. Clang 19.1.7's own
//!   SME/SME2 ACLE tests (`clang19_acle_tests_audit_clean`, ignored, with
//!   `LOCUS_SME_CLANG_TESTS`): 66 files, 1242 functions a level, nothing reported at any
//!   level; `fixtures/acle/sme2/zt0.c` shows LLVM 19's ZT0 tail call below.
//!
//! **Spec sections.** Attributes and their meaning: §1. Restrictions on attributes (the
//! diagnostics on `sm_enabled`+`sm_compatible`, `za_new`+`za_preserved`, `za_new`+`za_shared`,
//! scalable vectors across a possible change of vector length): §2 "Restrictions on
//! attributes". The transition table, conditional changes for streaming-compatible
//! callers: §2 "Compiler inserted streaming-mode changes" and "Instruction Selection
//! Nodes". Locally streaming entry and exit: §2 "Functions with
//! `__attribute__((arm_locally_streaming))`". Vectorization: §2 "Preventing the use of
//! illegal instructions". Inlining and tail calls: §2 "Other things to consider". ZA, new
//! ZA and the lazy save: §3 (whose subsections are empty in the spec; the details follow
//! the AAPCS64 SME ABI as LLVM 19 implements it). ZT0 is not in spec 004 at all. The SVE
//! calling convention with `sm_body`: §2 on locally streaming functions.
//!
//! **How it is proven.** `tests/llc_oracle.rs` writes IR for every caller kind (normal,
//! streaming, streaming-compatible, locally streaming, locally streaming and compatible)
//! times every callee kind (normal, streaming, streaming-compatible) with float arguments
//! and results, and for ZA and ZT0 callers, new-ZA/ZT0 functions and indirect calls;
//! compiles it with `llc-19 -mtriple=aarch64-linux-gnu -mattr=+sme`; and requires the
//! `smstart`/`smstop` sequence, the `tbz`/`tbnz` mode tests that guard them, the lazy-save
//! set-up (`msr TPIDR2_EL0`), `__arm_tpidr2_restore`, the new-ZA commit and zeroing and
//! the ZT0 spills to be exactly the model's (54 functions), tail calls to be `b` exactly
//! when the model allows them (25 cases), and `opt-19 -passes=inline` to inline exactly
//! when the model allows it (22 of 25 mode cases, see below; for ZA and ZT0, 15 of 15
//! cases with inline-assembly bodies and 19 of 27 with plain bodies, the 8 others being
//! the spec's mode rule and new-ZT0 bodies, below).
//! For the calls LLVM makes behind the IR, `hidden_calls_match_llc` compiles 27 operations
//! (memory intrinsics of every size class, `frem` on four types and a vector, `fp128`
//! arithmetic, compares and conversions, `i128` division, libm intrinsics, `sincos`,
//! `fmuladd.f128`, `fptosi.sat.f128`) from 12 callers (every mode, with ZA, ZT0, new ZA):
//! 324 functions, 403 hidden calls, each found in llc-19's output with the predicted mode
//! changes, lazy save and ZT0 spill, and no call llc-19 makes left unpredicted; the
//! fixtures in `fixtures/hidden` add `optsize`, FEAT_MOPS, SVE, FEAT_FP16, fast-math flags
//! and a triple without `sincos`.
//! `tests/qemu.rs` builds the matrix as C with `clang-19 -march=armv9-a+sme` (no libc),
//! links it with this crate's own SME ABI routines ([`runtime`]), runs it under
//! `qemu-aarch64-static -cpu max` and requires every PSTATE.SM read from SVCR (callee
//! entry, caller body, caller after the call, its caller after the return; 21 runs,
//! streaming-compatible callers entered both ways) to be what the model predicts, and for
//! every ZA state calling private and shared callees (20 runs) that ZA is on in the
//! callee and TPIDR2_EL0 points at a lazy save exactly when the model sets one up.
//! Lazy-save round trips (through a new-ZA callee, through `__arm_za_disable`, from a
//! streaming caller) must bring ZA back intact, and a locally streaming function with the
//! SVE calling convention (an error here) overruns its frame as soon as the two vector
//! lengths differ.
//!
//! **On LLVM 19.1.7's own tests** (not in this repository, and not run by CI: a 165 MB
//! download). `scripts/llvm-19-tests [DIR]` fetches the orig tarball of Debian's
//! `llvm-toolchain-19` 1:19.1.7-3~deb12u1 source package (the LLVM 19 installed here)
//! through a private apt configuration and extracts `llvm/test/CodeGen/AArch64/sme-*.ll`,
//! `sve-streaming-mode-*.ll` and `llvm/test/Verifier/sme-attributes.ll` into
//! `DIR/src` (default `/tmp/llvm-19.1.7`); then
//! ```text
//! LOCUS_SME_LLVM_TESTS=/tmp/llvm-19.1.7/src/llvm/test/CodeGen/AArch64 \
//! LOCUS_SME_LLVM_VERIFIER=/tmp/llvm-19.1.7/src/llvm/test/Verifier \
//!   cargo test -p locus-sme --test integration -- --ignored llvm_tests audit
//! ```
//! compiles each file with the options of its first RUN line that runs llc on the file as
//! it is (93 of 98 files; the others stop after instruction selection, run `opt`, or
//! target Darwin). Measured: 1760 functions compared with llc-19's assembly, 1758 in
//! order and 2 with their blocks laid out in another order (exit changes once per
//! return); 156 call sites, all as the model predicts. Locus's only errors are the 4
//! documented undefined behaviours (a scalable vector passed across a possible change of
//! vector length, which the tests compile on purpose). The 21 declarations of the verifier
//! test are each an error for the model and rejected by `llvm-as-19`. With
//! `LOCUS_SME_LLVM_INLINE=.../llvm/test/Transforms/Inline/AArch64` (extract
//! `llvm/test/Transforms/Inline/AArch64/sme-*.ll` too), `llvm_inline_tests_match_opt` runs
//! the 3 inliner tests through opt-19: 39 calls as opt-19 does, 7 inlined by LLVM 19 across
//! a mode change (the spec's rule, kept by the model), 1 left by a lowered threshold. `sme audit` of
//! llc-19's objects: 93 objects, 1762 functions, 155 call sites, nothing reported.
//!
//! **Where LLVM 19 departs from spec 004** (each departure is a test that fails if LLVM
//! changes):
//! - *After exception*: the spec's table asks for `smstart sm` at the landing pad of an
//!   `invoke` from a streaming or locally streaming caller (and from a streaming-compatible
//!   one that was streaming). LLVM 19 emits nothing there (12 of the 15 invoke cases): the
//!   landing pad runs with whatever mode the unwinder left. The model keeps the spec.
//! - *Old ZA spellings*: `aarch64_pstate_za_new`, `_za_shared`, `_za_preserved` and
//!   `aarch64_expanded_pstate_za` are ignored: a caller with `aarch64_pstate_za_shared`
//!   gets no lazy save, one with `aarch64_pstate_za_new` no ZA at all. The model reads
//!   them with their meaning in the new spelling and warns.
//! - *Inlining*: the spec disables inlining whenever the call site toggles PSTATE.SM or
//!   the bodies run in different modes. LLVM 19 inlines across modes whenever the
//!   callee's body has no inline assembly or intrinsic calls (13 of 25 cases with plain
//!   bodies), and even with inline assembly it inlines a locally streaming callee into a
//!   streaming body, judging the body rather than the interface (3 cases). The model
//!   keeps the spec's rule. Around ZA the spec has no rule, so the model follows LLVM 19:
//!   a plain body (no inline assembly, intrinsic or SME ABI routine calls: those LLVM 19
//!   names in `isSMEABIRoutineCall`, `__arm_za_disable` included, `__arm_get_current_vg`
//!   not; [`attrs::INLINE_BARRIER_ROUTINES`]) that needs a lazy ZA save or a ZT0 spill is
//!   inlined, a new-ZA body never (`inlining_bodies_calling_sme_routines_matches_opt`: 60
//!   cases, 6 routines x 5 callers x 2 bodies, all as opt-19 does; 8 differed when only
//!   the 3 routines LLVM knows by name counted). LLVM 19 also inlines a
//!   new-ZT0 body (it checks only new ZA), dropping its ZA enable and ZT0 zeroing; the
//!   model does not.
//! - *Errors that go through*: LLVM 19's verifier rejects `sm_enabled` with
//!   `sm_compatible` and several ZA or ZT0 states, but compiles without a word: `sm_body`
//!   on a declaration, scalable vectors across a possible vector-length change (one such
//!   case, an `<vscale x 16 x i1>` from a streaming-compatible to a streaming function,
//!   crashes instruction selection instead), `za_new` with `za_shared` or `za_preserved`
//!   (ignored), a call from a function without ZA to one sharing ZA, a new-ZA SME ABI routine, and
//!   `aarch64_sve_vector_pcs` with `sm_body` (it spills the SVE callee-saves with the
//!   non-streaming vector length into slots sized with the streaming one).
//! - *ZT0 tail calls* (llvm-project#165371): LLVM 19's tail-call check asks about mode
//!   changes, lazy ZA saves and locally streaming bodies, not ZT0. A call marked `tail` or
//!   `musttail` and followed by `ret`, from a function sharing ZT0 (in, out, inout,
//!   preserves) to one that does not, becomes a `b`: ZT0 is spilled to a slot the tail
//!   call frees and never filled. The model forbids the tail call; `sme check` warns at
//!   each such call site ([`rules::zt0_tail_call_finding`]) and `sme audit` reports the
//!   object's `b`. `zt0_tail_call_warnings_match_llc`: 76 call sites (8 callers x 4
//!   callees x 3 markers), the 17 warnings exactly where llc-19 makes a `b` the model
//!   forbids, and the audit reports the same 17.
//! - *Extra work*: a function that may change PSTATE.SM calls `__arm_get_current_vg` in
//!   its prologue (for unwind information); a streaming-compatible caller asks
//!   `__arm_sme_state` for the mode; a new-ZT0 function spills and fills ZT0 around its
//!   own `__arm_tpidr2_save` commit, though ZT0 is not live yet.
//!
//! - *Lazy saves around hidden calls*: the library calls LLVM makes for instructions are
//!   unchained, and LLVM 19 sets the lazy ZA save up for only some of them: with several
//!   in a function with ZA state, later ones may run with ZA live and TPIDR2_EL0 reset
//!   (the second call of `fmuladd.f128` from 5 ZA callers; 2 calls in the fixtures). The
//!   model keeps the rule and warns ([`rules::unchained_lazy_save_finding`]). LLVM 19 also
//!   calls `__arm_sc_memset`/`memcpy` for the `.inline` memory intrinsics from a function
//!   that may stream (the target's lowering is asked before the forced expansion); the
//!   model predicts that.
//!
//! - *Call-site attributes*: LLVM 19 combines a call site's SME attributes with its
//!   callee's declaration by OR-ing their bit masks (`SMEAttrs(const CallBase &)`), so an
//!   attribute written only at the call site takes effect. The model does the same
//!   ([`attrs::Attrs::combine_llvm19`]) and warns only where the two disagree: a
//!   streaming-compatible side wins over a streaming one, and ZA/ZT0 states combine in
//!   LLVM's 3-bit encoding (`in` with `preserves` becomes `new`, a private interface).
//!
//! **What is left out.** Hidden calls: features given to llc on its command line are not
//! in the IR (only `"target-features"` is read); `+strict-align`, constrained FP
//! intrinsics, element-wise atomic memory intrinsics, outlined atomics, `sin`/`cos` pairs
//! on vectors and DAG combines that change which routine is called (a negated `fp128`
//! compare calls the inverse predicate's) are not modelled; the order of several calls
//! from one instruction is not fixed (LLVM schedules them freely). Pointers to scalable vectors cannot be seen in opaque-pointer IR,
//! so only scalable vectors passed by value are diagnosed. ZA on exception edges (the spec's
//! "Exception handling and ZA" is empty) is not modelled. `inline` says whether the SME
//! rules allow inlining (a callee without a body in the module counts as not plain), not
//! whether the callee has a body. The after-exception column
//! is reported for `invoke`s only (after a plain call an exception leaves the caller
//! too). The runtime routines assume Linux-style EL0 access to the ID registers.
//!
//! ```
//! use locus_sme::check::{check_ir, insns};
//! use locus_sme::rules::Severity;
//!
//! let ir = r#"
//! declare float @bar(float) "aarch64_pstate_sm_enabled"
//! declare float @normal(float)
//!
//! define float @foo(float %f) nounwind {
//!   %res = call float @bar(float %f) "aarch64_pstate_sm_enabled"
//!   ret float %res
//! }
//!
//! define float @either(float %f) "aarch64_pstate_sm_compatible" "aarch64_inout_za" {
//!   %res = call float @normal(float %f)
//!   ret float %res
//! }
//!
//! define void @old() "aarch64_pstate_za_shared" {
//!   ret void
//! }
//! "#;
//! let report = check_ir("example.ll", ir)?;
//!
//! // The spec's own example: N calls S.
//! let foo = report.function("foo").unwrap();
//! assert_eq!(insns(&foo.calls[0].model.before), ["smstart sm"]);
//! assert_eq!(insns(&foo.calls[0].model.after), ["smstop sm"]);
//! assert!(!foo.calls[0].model.tail_call && !foo.calls[0].model.inline);
//!
//! // SC calls N: stop streaming only if streaming; a lazy save keeps ZA.
//! let either = report.function("either").unwrap();
//! let call = &either.calls[0].model;
//! assert!(call.conditional && call.lazy_za_save);
//! assert_eq!(insns(&call.after), ["smstart sm", "smstart za"]);
//! assert!(!either.model.vectorize);
//!
//! // The old spelling is read, and flagged because LLVM 19 ignores it.
//! assert_eq!(report.function("old").unwrap().model.za.as_str(), "inout");
//! let d = &report.diagnostics[0];
//! assert_eq!((d.severity, d.function.as_str()), (Severity::Warning, "old"));
//! assert!(d.message.contains("aarch64_inout_za"));
//! assert!(!report.has_errors());
//! # Ok::<(), locus_sme::Error>(())
//! ```

pub mod a64;
pub mod attrs;
pub mod audit;
pub mod check;
mod error;
pub mod hidden;
pub mod jumptable;
pub mod libcalls;
pub mod objfile;
pub mod rules;
pub mod runtime;

pub use error::Error;
