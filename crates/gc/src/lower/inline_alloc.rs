//! The allocation fast path inlined (as Julia's MMTk build lowers `julia.gc_alloc_bytes`,
//! `llvm-late-gc-lowering-mmtk.cpp`): each `call @locus_gc_alloc(i64 P, i64 B)` with
//! constant `P` and `B` whose allocation is at most `INLINE_ALLOC_MAX_BYTES`, in a function
//! with a chain head, becomes the runtime's fast path, read from the `TASK_ALLOC_*` words
//! of the thread's task block (see [`crate::contract`]), with the call kept as the slow
//! path:
//!
//! ```text
//!   %bp = load ptr, (pgcstack + 8 * (TASK_ALLOC_BUMP_WORD - TASK_GCSTACK_WORD))
//!   br (%bp == null), %slow, %check
//! check:
//!   %cur = load i64 %bp; %lim = load i64 (%bp + 8)
//!   %start = or %cur, 8; %end = add %start, SIZE   ; the object 16-byte aligned
//!   br (%end >u %lim), %slow, %fast           ; no buffer: cursor and limit are 0
//! fast:
//!   store %end, %bp; the header word of P and B at %start (the body is zero already);
//!   the valid-object bit of %start + 8; the thread's two counters
//!   %obj = inttoptr (%start + 8) to ptr addrspace(10)   ; frames: to ptr, then addrspacecast
//!   br %join
//! slow:
//!   %n.slow = call @locus_gc_alloc(i64 P, i64 B), !locus.gc.slow_alloc !{}
//!   br %join
//! join:
//!   %n = phi ptr addrspace(10) [%obj, %fast], [%n.slow, %slow]
//! ```
//!
//! The slow call stays the safepoint: with frame roots this runs after root placement (the
//! roots are stored before the code above, which does not collect); with statepoint roots
//! before RS4GC, which makes the slow call the statepoint and takes the `inttoptr` as a base
//! of its own (the object is new: nothing derived from it is live across the slow call).
//! The slow call is marked, so that finishing an already lowered function again inlines
//! nothing twice.

use locus_llvm::builder::{BinaryOp, Builder};
use locus_llvm::ir::{BasicBlock, Function, Instruction, IntPredicate, Metadata, Opcode, Value};

use crate::addrspace::{TRACKED, UNTRACKED};
use crate::contract::{
    untagged_allocation_bytes, untagged_header_word, INLINE_ALLOC_MAX_BYTES, RUNTIME_ALLOC,
    TASK_ALLOC_BUMP_WORD, TASK_ALLOC_BYTES_WORD, TASK_ALLOC_OBJECTS_WORD, TASK_ALLOC_VO_WORD,
    TASK_GCSTACK_WORD, UNTAGGED_HEADER_BYTES,
};
use crate::Result;

/// The metadata kind that marks a slow-path call the lowering made.
pub const SLOW_ALLOC_MD: &str = "locus.gc.slow_alloc";

/// Whether the lowering inlines the allocation fast path (`--inline-alloc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InlineAlloc {
    /// Inline every `locus_gc_alloc` call with constant, small sizes (the default). The
    /// code takes the fast path only when the runtime publishes one (an MMTk plan with a
    /// bump pointer), else calls the runtime as before.
    #[default]
    Auto,
    /// Leave every allocation a call.
    Never,
}

/// How the fast path's object becomes a tracked pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectFrom {
    /// `inttoptr` to an untracked pointer, then `addrspacecast` to Tracked (10): what the GC
    /// invariants allow, for frame roots (a lowered module may be checked and lowered
    /// again).
    Untracked,
    /// `inttoptr` straight to Tracked (10), for the statepoint rewrite: RS4GC takes an
    /// `inttoptr` for a base of its own, and would look through an `addrspacecast` to the
    /// untracked pointer.
    Integer,
}

/// A call this lowering may inline: its object's header word and the allocation's size.
fn candidate(inst: Instruction<'_>) -> Option<(u64, u64)> {
    if inst.opcode() != Opcode::Call || inst.metadata(SLOW_ALLOC_MD).is_some() {
        return None;
    }
    let call = inst.as_call()?;
    if call.callee_name()? != RUNTIME_ALLOC || inst.ty().address_space() != Some(TRACKED) {
        return None;
    }
    let args = call.arguments();
    let (nptrs, nbytes) = (args.first()?.const_uint()?, args.get(1)?.const_uint()?);
    let size = untagged_allocation_bytes(nptrs, nbytes)?;
    let header = untagged_header_word(nptrs, nbytes)?;
    (args.len() == 2 && size <= INLINE_ALLOC_MAX_BYTES as u64).then_some((header, size))
}

/// Inlines the fast path of every candidate allocation of `f`, given its chain head (a
/// parameter, or an instruction of the entry block: it must dominate every allocation).
/// Returns how many.
pub fn inline_allocations<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    head: Option<Value<'m>>,
    from: ObjectFrom,
) -> Result<usize> {
    let Some(head) = head else { return Ok(0) };
    let entry = f.entry_block();
    // The chain head must dominate the call: a parameter does; an instruction of the entry
    // block does for calls in other blocks, and for calls after it in the entry block (with
    // statepoint roots `julia.get_pgcstack` may come after allocations there).
    let head_inst = head.as_instruction();
    if head_inst.is_some_and(|i| i.block() != entry) {
        return Ok(0);
    }
    let mut before_head = Vec::new();
    if let (Some(h), Some(entry)) = (head_inst, entry) {
        for i in entry.instructions() {
            if i == h {
                break;
            }
            before_head.push(i);
        }
    }
    let calls: Vec<_> = f
        .instructions()
        .into_iter()
        .filter(|i| !before_head.contains(i))
        .filter_map(|i| candidate(i).map(|c| (i, c)))
        .collect();
    // Names of their own (`alloc.*`, `alloc1.*`, ...), numbered on from the calls an
    // earlier run inlined: LLVM would otherwise make colliding names unique with a counter
    // whose value depends on the function's history, and two lowerings of one function (in
    // process, or through the intermediate form) would print differently.
    let earlier = f
        .instructions()
        .into_iter()
        .filter(|i| i.metadata(SLOW_ALLOC_MD).is_some())
        .count();
    for (k, &(call, sizes)) in calls.iter().enumerate() {
        let prefix = match earlier + k {
            0 => "alloc".to_owned(),
            n => format!("alloc{n}"),
        };
        inline_one(b, head, call, sizes, from, &prefix)?;
    }
    Ok(calls.len())
}

/// `ptr + bytes`, a byte offset from a raw pointer.
fn offset<'m>(b: &Builder<'m>, ptr: Value<'m>, bytes: i64) -> Result<Value<'m>> {
    let i8t = b.int_type(8)?;
    Ok(b.gep(i8t, ptr, &[b.const_int(b.int_type(64)?, bytes)?], true, "")?)
}

/// The task word `word`, read from the chain head.
fn task_word<'m>(b: &Builder<'m>, head: Value<'m>, word: usize, name: &str) -> Result<Value<'m>> {
    let delta = (word as i64 - TASK_GCSTACK_WORD as i64) * 8;
    let at = offset(b, head, delta)?;
    let v = b.load(b.ptr_type(UNTRACKED)?, at, name)?;
    b.set_alignment(v, 8)?;
    Ok(v.as_value())
}

/// Adds `by` to the `i64` at `ptr` (a plain load and store: only the thread writes it).
fn bump_counter<'m>(b: &Builder<'m>, ptr: Value<'m>, by: u64) -> Result<()> {
    let i64t = b.int_type(64)?;
    let old = b.load(i64t, ptr, "")?;
    b.set_alignment(old, 8)?;
    let new = b.binary(BinaryOp::Add, old, b.const_int(i64t, by as i64)?, "")?;
    let st = b.store(new, ptr)?;
    b.set_alignment(st, 8)?;
    Ok(())
}

fn inline_one<'m>(
    b: &Builder<'m>,
    head: Value<'m>,
    call: Instruction<'m>,
    (header, size): (u64, u64),
    from: ObjectFrom,
    prefix: &str,
) -> Result<()> {
    let i64t = b.int_type(64)?;
    let i8t = b.int_type(8)?;
    let raw = b.ptr_type(UNTRACKED)?;
    let c = |v: u64| b.const_int(i64t, v as i64);
    let name = call.name();
    let Some(here): Option<BasicBlock<'m>> = call.block() else {
        return Ok(());
    };
    let join = b.split_block_before(call)?;
    b.set_name(join.as_value(), &format!("{prefix}.join"))?;
    if let Some(br) = here.terminator() {
        b.erase(br)?;
    }
    let check = b.insert_block_before(join, &format!("{prefix}.check"))?;
    let fast = b.insert_block_before(join, &format!("{prefix}.fast"))?;
    let slow = b.insert_block_before(join, &format!("{prefix}.slow"))?;

    b.position_at_end(here)?;
    let bp = task_word(b, head, TASK_ALLOC_BUMP_WORD, &format!("{prefix}.bp"))?;
    let none = b.icmp(IntPredicate::Eq, bp, b.null_ptr(UNTRACKED)?, "")?;
    b.cond_br(none, slow, check)?;

    b.position_at_end(check)?;
    let cur = b.load(i64t, bp, &format!("{prefix}.cursor"))?;
    b.set_alignment(cur, 8)?;
    let lim = b.load(i64t, offset(b, bp, 8)?, &format!("{prefix}.limit"))?;
    b.set_alignment(lim, 8)?;
    // The object's header word starts 8 past a multiple of 16 (step 3).
    let at = b.binary(
        BinaryOp::Or,
        cur,
        c(UNTAGGED_HEADER_BYTES)?,
        &format!("{prefix}.start"),
    )?;
    let end = b.binary(BinaryOp::Add, at, c(size)?, "")?;
    let over = b.icmp(IntPredicate::Ugt, end, lim, "")?;
    b.cond_br(over, slow, fast)?;

    b.position_at_end(fast)?;
    let st = b.store(end, bp)?;
    b.set_alignment(st, 8)?;
    let start = b.inttoptr(at, raw, "")?;
    // The header only: the body is zero already (MMTk zeroes a bump pointer's buffer when
    // it hands it out; step 4 of the fast path in the runtime's contract).
    let st = b.store(c(header)?, start)?;
    b.set_alignment(st, 8)?;
    let obj = b.binary(BinaryOp::Add, at, c(UNTAGGED_HEADER_BYTES)?, "")?;
    // The valid-object bit: bit (obj >> 3) & 7 of the byte at vo + (obj >> 6).
    let vo = task_word(b, head, TASK_ALLOC_VO_WORD, "")?;
    let index = b.binary(BinaryOp::LShr, obj, c(6)?, "")?;
    let byte_at = b.gep(i8t, vo, &[index], true, "")?;
    let old = b.load(i8t, byte_at, "")?;
    let shifted = b.binary(BinaryOp::LShr, obj, c(3)?, "")?;
    let bit_no = b.and(shifted, c(7)?, "")?;
    let bit_no = b.trunc(bit_no, i8t, "")?;
    let bit = b.binary(BinaryOp::Shl, b.const_int(i8t, 1)?, bit_no, "")?;
    let new = b.binary(BinaryOp::Or, old, bit, "")?;
    b.store(new, byte_at)?;
    bump_counter(b, task_word(b, head, TASK_ALLOC_OBJECTS_WORD, "")?, 1)?;
    bump_counter(b, task_word(b, head, TASK_ALLOC_BYTES_WORD, "")?, size)?;
    let made = match from {
        ObjectFrom::Integer => b.inttoptr(obj, call.ty(), "")?,
        ObjectFrom::Untracked => {
            let untracked = b.inttoptr(obj, raw, "")?;
            b.addrspacecast(untracked, call.ty(), "")?
        }
    };
    b.br(join)?;

    b.move_to_end(call, slow)?;
    b.position_at_end(slow)?;
    b.br(join)?;
    b.set_metadata(call, SLOW_ALLOC_MD, &Metadata::Node(Vec::new()))?;

    b.position_at_start(join)?;
    let phi = b.phi(call.ty(), "")?;
    b.replace_all_uses_with(call, phi)?;
    b.add_incoming(phi, made, fast)?;
    b.add_incoming(phi, call, slow)?;
    if !name.is_empty() {
        b.set_name(call, &format!("{name}.slow"))?;
        b.set_name(phi, &name)?;
    }
    Ok(())
}
