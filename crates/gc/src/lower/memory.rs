//! Tracked pointers kept in memory the function owns: its `alloca`s.
//!
//! Spec 003 asks that every live tracked pointer be in a GC slot at each safepoint; a
//! pointer stored to an `alloca` and loaded back later is live in memory the collector
//! cannot see. As Julia's LateLowerGCFrame does:
//! - a static `alloca` (entry block, constant size) whose every word is a tracked pointer
//!   becomes frame slots itself: it is replaced by `julia.get_gc_frame_slot`, so the frame
//!   push nulls it and every collection traces it;
//! - a store of tracked pointers into any other static `alloca` (one that mixes them with
//!   other data) also stores each pointer into a *shadow* slot of its own, which keeps the
//!   object alive for as long as the frame lives.
//!
//! - the buffer a call gets as its `"julia.return_roots"="N"` argument (where it returns the
//!   tracked pointers of an aggregate result) becomes N frame slots.
//! - an `sret` buffer a call fills with an aggregate holding tracked pointers, without such
//!   an argument, must be frame slots itself (all tracked pointers, as above); any other is
//!   refused, naming the callee, since the pointers would be unrooted while the callee runs.
//!
//! These slots come first in the frame, before the slots of SSA values.

use locus_llvm::builder::Builder;
use locus_llvm::ir::{AttributeIndex, Function, Instruction, Opcode, Type, Value};

use crate::addrspace::{tracked_leaves, LeafPath};
use crate::contract::{RETURN_ROOTS, TRACKED, UNTRACKED};
use crate::{Error, Result};

/// An `alloca` that becomes frame slots.
#[derive(Clone, Debug)]
pub struct FrameAlloca<'m> {
    /// The `alloca`.
    pub alloca: Instruction<'m>,
    /// How many pointer words it holds.
    pub slots: usize,
    /// Whether it is 16-byte aligned (its first slot must then be at an even word).
    pub align16: bool,
}

/// A store of tracked pointers into an `alloca` that is not all tracked pointers.
#[derive(Clone, Debug)]
pub struct ShadowedStore<'m> {
    /// The `store`.
    pub store: Instruction<'m>,
    /// Where each tracked pointer is inside the stored value.
    pub leaves: Vec<LeafPath>,
}

/// What a function keeps in its own memory.
#[derive(Clone, Debug, Default)]
pub struct FrameMemory<'m> {
    /// `alloca`s that become frame slots.
    pub allocas: Vec<FrameAlloca<'m>>,
    /// Stores that also go to a shadow slot.
    pub shadows: Vec<ShadowedStore<'m>>,
}

/// True if every word of a `ty` is a tracked pointer.
fn all_tracked(ty: Type<'_>) -> bool {
    if ty.is_pointer() {
        return ty.address_space() == Some(TRACKED);
    }
    if ty.is_vector() || ty.array_len().is_some() {
        return ty.element_type().is_some_and(all_tracked);
    }
    ty.struct_fields()
        .is_some_and(|f| !f.is_empty() && f.into_iter().all(all_tracked))
}

/// The element count of a static `alloca`: in the entry block, with a constant size.
pub(super) fn static_count(inst: Instruction<'_>) -> Option<u64> {
    if inst.opcode() != Opcode::Alloca {
        return None;
    }
    let entry = inst.function()?.entry_block()?;
    if inst.block()? != entry {
        return None;
    }
    inst.operand(0)?.const_uint()
}

/// The `alloca`s a pointer may point into, through in-bounds offsets, casts, phis and
/// selects; empty if it may point anywhere else.
fn alloca_bases(ptr: Value<'_>) -> Vec<Instruction<'_>> {
    walk_to_allocas(ptr).0
}

/// [`alloca_bases`] of `ptr`, and whether `ptr` is at a fixed offset from them (every
/// getelementptr on the way has constant indices).
fn walk_to_allocas(ptr: Value<'_>) -> (Vec<Instruction<'_>>, bool) {
    let mut found = Vec::new();
    let mut constant_offset = true;
    let mut seen = Vec::new();
    let mut work = vec![ptr];
    while let Some(v) = work.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v);
        let Some(inst) = v.as_instruction() else {
            return (Vec::new(), constant_offset);
        };
        match inst.opcode() {
            Opcode::Alloca => found.push(inst),
            Opcode::GetElementPtr => {
                let indices = inst.operands();
                constant_offset &= indices.iter().skip(1).all(|i| i.const_int().is_some());
                work.extend(inst.operand(0));
            }
            Opcode::BitCast | Opcode::AddrSpaceCast => work.extend(inst.operand(0)),
            Opcode::Phi => work.extend(inst.phi_incoming().into_iter().map(|(v, _)| v)),
            Opcode::Select => work.extend([inst.operand(1), inst.operand(2)].into_iter().flatten()),
            _ => return (Vec::new(), constant_offset),
        }
    }
    (found, constant_offset)
}

/// Finds the `alloca`s and stores of `f` that need frame slots.
///
/// # Errors
///
/// [`Error::Lower`] for tracked pointers put into the function's memory in a way whose
/// roots could not be kept: copied in bulk into an alloca that is not frame slots, or
/// stored at a variable offset into one.
pub fn find<'m>(f: Function<'m>) -> Result<FrameMemory<'m>> {
    let mut memory = FrameMemory::default();
    let Some(entry) = f.entry_block() else {
        return Ok(memory);
    };
    for inst in entry.instructions() {
        let (Some(count), Some(ty)) = (static_count(inst), inst.allocated_type()) else {
            continue;
        };
        let align = inst.alignment().unwrap_or(0);
        if all_tracked(ty) && align <= 16 && inst.ty().address_space() == Some(UNTRACKED) {
            let per_element = tracked_leaves(ty).len();
            memory.allocas.push(FrameAlloca {
                alloca: inst,
                slots: usize::try_from(count)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(per_element),
                align16: align > 8,
            });
        }
    }
    // Julia's return-roots convention: a call writes the tracked pointers of an aggregate
    // it returns into the buffer passed as its `"julia.return_roots"="N"` argument, which
    // must then be N frame slots.
    for inst in f.instructions() {
        let Some(call) = inst.as_call() else { continue };
        for (i, arg) in call.arguments().into_iter().enumerate() {
            let roots = u32::try_from(i)
                .ok()
                .and_then(|i| call.string_attribute(AttributeIndex::Param(i), RETURN_ROOTS))
                .and_then(|n| n.parse::<usize>().ok());
            let Some(roots) = roots else { continue };
            for a in alloca_bases(arg) {
                if static_count(a).is_none() {
                    continue;
                }
                let one_pointer = a
                    .allocated_type()
                    .is_some_and(|t| t.is_pointer() && t.address_space() == Some(TRACKED));
                match memory.allocas.iter_mut().find(|fa| fa.alloca == a) {
                    Some(fa) if !one_pointer => fa.slots = fa.slots.max(roots),
                    Some(_) => {}
                    None if a.ty().address_space() == Some(UNTRACKED) => {
                        memory.allocas.push(FrameAlloca {
                            alloca: a,
                            slots: roots,
                            align16: a.alignment().unwrap_or(0) > 8,
                        });
                    }
                    None => {}
                }
            }
        }
    }
    let refuse = |inst: Instruction<'m>, message: &str| Error::Lower {
        function: f.name(),
        instruction: Some(inst.print().trim().to_string()),
        message: message.into(),
    };
    let in_frame = |memory: &FrameMemory<'m>, a: Instruction<'m>| {
        memory.allocas.iter().any(|fa| fa.alloca == a)
    };
    for inst in f.instructions() {
        if let Some(message) = unrooted_sret(inst, |a| in_frame(&memory, a)) {
            return Err(refuse(inst, &message));
        }
    }
    for inst in f.instructions() {
        // Tracked pointers copied into the function's memory in bulk: kept only where the
        // memory is frame slots.
        if let Some(dest) = bulk_copy_destination(inst) {
            let unrooted = alloca_bases(dest)
                .into_iter()
                .any(|a| holds_tracked(a) && !in_frame(&memory, a));
            if unrooted {
                return Err(refuse(
                    inst,
                    "a copy into an alloca that holds tracked pointers along with other data is \
                     not supported: the pointers it copies could not be kept rooted",
                ));
            }
            continue;
        }
        if inst.opcode() != Opcode::Store {
            continue;
        }
        let (Some(value), Some(ptr)) = (inst.operand(0), inst.operand(1)) else {
            continue;
        };
        let leaves = tracked_leaves(value.ty());
        if leaves.is_empty() {
            continue;
        }
        let (bases, constant_offset) = walk_to_allocas(ptr);
        if bases.iter().all(|&a| in_frame(&memory, a)) {
            continue;
        }
        // One shadow slot per store keeps the last value stored; a store that writes
        // different places of the alloca each time it runs would need one per place.
        if !constant_offset {
            return Err(refuse(
                inst,
                "a store of tracked pointers into an alloca at a variable offset is not \
                 supported: each place it writes would need a root of its own",
            ));
        }
        memory.shadows.push(ShadowedStore {
            store: inst,
            leaves,
        });
    }
    Ok(memory)
}

/// Why `inst` cannot be lowered, if it is a call that returns an aggregate holding tracked
/// pointers through an `sret` argument, without Julia's `"julia.return_roots"` buffer,
/// into an `alloca` that is not frame slots (`in_frame` tells which are).
///
/// Before return roots existed Julia's pass rooted such a buffer only when it held nothing
/// but tracked pointers: it then became frame slots, which the callee fills directly, so
/// every pointer is rooted from the moment it is written. A buffer that mixes them with
/// other data cannot be frame slots (the collector would read the other data as pointers),
/// and rooting its pointers after the call returns leaves them unrooted while the callee
/// may still collect: refused, naming the callee, rather than lowered with them unrooted.
/// A buffer that is not the function's own memory (its own `sret` parameter, say) is the
/// caller's to root.
fn unrooted_sret<'m>(
    inst: Instruction<'m>,
    in_frame: impl Fn(Instruction<'m>) -> bool,
) -> Option<String> {
    let call = inst.as_call()?;
    let args = call.arguments();
    let index = |i: usize| u32::try_from(i).ok().map(AttributeIndex::Param);
    let return_roots = (0..args.len())
        .filter_map(index)
        .any(|i| call.string_attribute(i, RETURN_ROOTS).is_some());
    if return_roots {
        return None;
    }
    for (i, &arg) in args.iter().enumerate() {
        let Some(at) = index(i) else { continue };
        let ty = call.type_attribute(at, "sret").or_else(|| {
            call.called_function()
                .and_then(|f| f.type_attribute(at, "sret"))
        });
        let Some(ty) = ty.filter(|t| t.holds_pointer_in(|a| a == TRACKED)) else {
            continue;
        };
        if alloca_bases(arg).into_iter().all(&in_frame) {
            continue;
        }
        let callee = call
            .callee_name()
            .map_or_else(|| "an indirect callee".to_string(), |n| format!("@{n}"));
        return Some(format!(
            "{callee} returns `{}` through `sret` into an alloca that mixes tracked pointers \
             with other data, and without a \"{RETURN_ROOTS}\" buffer: its tracked pointers \
             could not be kept rooted (give the call a \"{RETURN_ROOTS}\" argument, as \
             Julia does, or return only tracked pointers through sret)",
            ty.print()
        ));
    }
    None
}

/// The destination of an `llvm.memcpy`/`llvm.memmove`, if `inst` is one.
fn bulk_copy_destination<'m>(inst: Instruction<'m>) -> Option<Value<'m>> {
    let call = inst.as_call()?;
    let name = call.callee_name()?;
    if name.starts_with("llvm.memcpy") || name.starts_with("llvm.memmove") {
        call.arguments().first().copied()
    } else {
        None
    }
}

/// True if the `alloca`'s type holds tracked pointers.
fn holds_tracked(alloca: Instruction<'_>) -> bool {
    alloca
        .allocated_type()
        .is_some_and(|t| t.holds_pointer_in(|a| a == TRACKED))
}

impl<'m> FrameMemory<'m> {
    /// The frame slots these take, alignment padding included.
    pub fn num_slots(&self) -> usize {
        let mut next = 0usize;
        for a in &self.allocas {
            next = Self::aligned(next, a.align16).saturating_add(a.slots);
        }
        self.shadows
            .iter()
            .fold(next, |n, s| n.saturating_add(s.leaves.len()))
    }

    /// Root index `next`, moved so that its word (`next + 2`) is 16-byte aligned if asked.
    fn aligned(next: usize, align16: bool) -> usize {
        if align16 {
            next + next % 2
        } else {
            next
        }
    }

    /// Replaces the `alloca`s by their slots and adds the shadow stores, in a function whose
    /// frame is `frame` (a `julia.new_gc_frame` call). `slot_fn` is
    /// `julia.get_gc_frame_slot` of type `slot_ty`.
    pub fn emit(
        &self,
        b: &Builder<'m>,
        frame: Instruction<'m>,
        slot_ty: Type<'m>,
        slot_fn: Value<'m>,
    ) -> Result<()> {
        let i32t = b.int_type(32)?;
        let mut next = 0usize;
        for a in &self.allocas {
            next = Self::aligned(next, a.align16);
            b.position_after(frame)?;
            let k = b.const_int(i32t, next as i64)?;
            let name = a.alloca.name();
            let slot = b.call(slot_ty, slot_fn, &[frame.as_value(), k], &[], "")?;
            for lifetime in lifetime_markers(a.alloca.as_value()) {
                b.erase(lifetime)?;
            }
            b.replace_all_uses_with(a.alloca, slot)?;
            b.erase(a.alloca)?;
            b.set_name(slot, &name)?;
            next = next.saturating_add(a.slots);
        }
        for s in &self.shadows {
            let Some(value) = s.store.operand(0) else {
                continue;
            };
            for path in &s.leaves {
                b.position_after(frame)?;
                let k = b.const_int(i32t, next as i64)?;
                let slot = b.call(slot_ty, slot_fn, &[frame.as_value(), k], &[], "")?;
                b.position_before(s.store)?;
                let leaf = super::emit::leaf_value(b, value, path)?;
                b.store(leaf, slot)?;
                next += 1;
            }
        }
        Ok(())
    }
}

/// The `llvm.lifetime.*` calls on `v` or pointers derived from it: an `alloca` that becomes
/// frame slots lives as long as the frame, so they must go.
fn lifetime_markers(v: Value<'_>) -> Vec<Instruction<'_>> {
    let mut out = Vec::new();
    let mut work = vec![v];
    while let Some(v) = work.pop() {
        for user in v.users() {
            let Some(inst) = user.as_instruction() else {
                continue;
            };
            match inst.opcode() {
                Opcode::GetElementPtr | Opcode::BitCast | Opcode::AddrSpaceCast => {
                    work.push(user);
                }
                Opcode::Call => {
                    let lifetime = inst
                        .as_call()
                        .and_then(|c| c.callee_name())
                        .is_some_and(|n| n.starts_with("llvm.lifetime."));
                    if lifetime && !out.contains(&inst) {
                        out.push(inst);
                    }
                }
                _ => {}
            }
        }
    }
    out
}
