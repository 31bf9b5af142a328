//! Tracked pointers kept in memory the function owns: its `alloca`s.
//!
//! Spec 003 asks that every live tracked pointer be in a GC slot at each safepoint; a
//! pointer stored to an `alloca` and loaded back later is live in memory the collector
//! cannot see. As Julia's LateLowerGCFrame does:
//! - a static `alloca` (entry block, constant size) whose every word is a tracked pointer
//!   becomes frame slots itself: it is replaced by `julia.get_gc_frame_slot`, so the frame
//!   push nulls it and every collection traces it;
//! - the buffer a call gets as its `"julia.return_roots"="N"` argument (where it returns the
//!   tracked pointers of an aggregate result) becomes N frame slots.
//!
//! These slots come first in the frame, before the slots of SSA values. Any other `alloca`
//! that may hold GC pointers, whatever its type says ([`allocas_holding_gc`]: the optimizer
//! types allocas as it likes, `[16 x i8]` or `i64`):
//! - when a GC pointer gets into it only by a store of one, at a constant offset, that
//!   store also stores each pointer into a *shadow* slot of its own, which keeps the object
//!   alive for as long as the frame lives;
//! - otherwise (it is handed to a call or a copy, say an `sret` buffer a callee fills, or
//!   it is read as a GC pointer and written with other values, or stored into at a
//!   variable offset) it is a root region ([`super::regions`]): registered with the
//!   runtime, which scans it conservatively at every collection.

use std::collections::{HashMap, HashSet};

use locus_llvm::builder::Builder;
use locus_llvm::ir::{AttributeIndex, Call, Function, Instruction, Opcode, Type, Value};

use crate::addrspace::{is_gc, tracked_leaves, LeafPath};
use crate::contract::{RETURN_ROOTS, TRACKED, UNTRACKED};
use crate::Result;

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
    /// `alloca`s that may hold GC pointers and stay in memory: root regions.
    pub regions: Vec<Instruction<'m>>,
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

/// Where a pointer may point, followed back through offsets, casts, phis and selects.
struct Origins<'m> {
    /// The `alloca`s it may point into.
    allocas: Vec<Instruction<'m>>,
    /// Whether it may point anywhere else too (an argument, a load, a global, ...).
    elsewhere: bool,
    /// Whether every `getelementptr` on the way has constant indices.
    constant_offset: bool,
    /// The function's parameters it may point into.
    params: Vec<Value<'m>>,
}

fn origins(ptr: Value<'_>) -> Origins<'_> {
    let mut o = Origins {
        allocas: Vec::new(),
        elsewhere: false,
        constant_offset: true,
        params: Vec::new(),
    };
    let mut seen = Vec::new();
    let mut work = vec![ptr];
    while let Some(v) = work.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v);
        let Some(inst) = v.as_instruction() else {
            if v.as_argument().is_some() {
                o.params.push(v);
            }
            o.elsewhere = true;
            continue;
        };
        match inst.opcode() {
            Opcode::Alloca => o.allocas.push(inst),
            // An address computed as an integer (`ptrtoint`, arithmetic, `inttoptr`: aligned
            // by hand) or masked (`llvm.ptrmask`): whatever it was made from, at an offset
            // not known here.
            Opcode::IntToPtr => {
                o.constant_offset = false;
                match inst.operand(0) {
                    Some(i) if i.as_instruction().is_some() => work.push(i),
                    _ => o.elsewhere = true,
                }
            }
            Opcode::PtrToInt => work.extend(inst.operand(0)),
            Opcode::Add | Opcode::Sub | Opcode::And | Opcode::Or | Opcode::Xor => {
                for op in inst.operands() {
                    if op.as_instruction().is_some() {
                        work.push(op);
                    } else if op.const_int().is_none() {
                        o.elsewhere = true;
                    }
                }
            }
            Opcode::Call if is_ptrmask(inst) => {
                o.constant_offset = false;
                work.extend(inst.operand(0));
            }
            Opcode::GetElementPtr => {
                let indices = inst.operands();
                o.constant_offset &= indices.iter().skip(1).all(|i| i.const_int().is_some());
                work.extend(inst.operand(0));
            }
            Opcode::BitCast | Opcode::AddrSpaceCast => work.extend(inst.operand(0)),
            Opcode::Phi => work.extend(inst.phi_incoming().into_iter().map(|(v, _)| v)),
            Opcode::Select => work.extend([inst.operand(1), inst.operand(2)].into_iter().flatten()),
            _ => o.elsewhere = true,
        }
    }
    o
}

/// The `alloca`s a pointer may point into; empty if it may point anywhere else.
fn alloca_bases(ptr: Value<'_>) -> Vec<Instruction<'_>> {
    let o = origins(ptr);
    if o.elsewhere {
        Vec::new()
    } else {
        o.allocas
    }
}

/// Every `alloca` a pointer may point into, whatever else it may point to.
fn reachable_allocas(ptr: Value<'_>) -> Vec<Instruction<'_>> {
    origins(ptr).allocas
}

/// Finds the `alloca`s and stores of `f` that need frame slots, and the `alloca`s that
/// must be root regions.
pub fn find<'m>(f: Function<'m>) -> FrameMemory<'m> {
    let mut memory = FrameMemory::default();
    let Some(entry) = f.entry_block() else {
        return memory;
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
    // Memory that may hold GC pointers and is not frame slots becomes a root region when a
    // GC pointer may get into it other than by a store of one (which a shadow slot follows):
    // it is handed to anything but the function's own loads and stores (a call, a copy,
    // whose writes are not seen here), or it is read as a GC pointer and also written with
    // other values (the optimizer copies a pointer as an `i64`).
    let holding = allocas_holding_gc(f);
    let untyped_writes = allocas_written_untyped(f);
    memory.regions = holding
        .iter()
        .copied()
        .filter(|&a| !memory.allocas.iter().any(|fa| fa.alloca == a))
        .filter(|&a| escapes(a) || (read_as_gc(a) && untyped_writes.contains(&a)))
        .collect();
    for inst in f.instructions() {
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
        let kept = |a: &Instruction<'m>| {
            memory.allocas.iter().any(|fa| fa.alloca == *a) || memory.regions.contains(a)
        };
        let o = origins(ptr);
        let reached: Vec<_> = o.allocas.into_iter().filter(|a| !kept(a)).collect();
        if reached.is_empty() {
            continue;
        }
        // One shadow slot per store keeps the last value stored. A store that writes a
        // different place each time it runs, or may write elsewhere too (a phi of an alloca
        // and an argument), makes the allocas regions instead.
        if o.elsewhere || !o.constant_offset {
            memory.regions.extend(reached);
            continue;
        }
        memory.shadows.push(ShadowedStore {
            store: inst,
            leaves,
        });
    }
    memory
}

/// The `alloca`s some store writes a value holding no GC pointer into.
fn allocas_written_untyped(f: Function<'_>) -> HashSet<Instruction<'_>> {
    let mut out = HashSet::new();
    for inst in f.instructions() {
        if inst.opcode() != Opcode::Store {
            continue;
        }
        let (Some(value), Some(ptr)) = (inst.operand(0), inst.operand(1)) else {
            continue;
        };
        if !value.ty().holds_pointer_in(is_gc) {
            out.extend(reachable_allocas(ptr));
        }
    }
    out
}

/// Whether `ptr` is a plain (address space 0) pointer that may point somewhere other than
/// this function's `alloca`s: what a store of a GC pointer through it writes may be an
/// escaped `alloca` (GC objects' fields are written through derived pointers).
fn unknown_plain_memory(ptr: Value<'_>) -> bool {
    ptr.ty().address_space() == Some(UNTRACKED) && origins(ptr).elsewhere
}

/// Whether defined function `f` stores a GC pointer into, or loads one from, memory its
/// parameter `index` points to (a callee filling its caller's buffer, or reading it back).
fn param_holds_gc(f: Function<'_>, index: u32) -> bool {
    let Some(param) = f.params().into_iter().nth(index as usize) else {
        return false;
    };
    if f.is_declaration() || !param.ty().is_pointer() {
        return false;
    }
    f.instructions().into_iter().any(|inst| {
        let ptr = match inst.opcode() {
            Opcode::Store => inst
                .operand(0)
                .filter(|v| v.ty().holds_pointer_in(is_gc))
                .and(inst.operand(1)),
            Opcode::Load if inst.ty().holds_pointer_in(is_gc) => inst.operand(0),
            _ => None,
        };
        ptr.is_some_and(|p| origins(p).params.contains(&param))
    })
}

/// Whether `inst` is a call of `llvm.ptrmask` (its result points where its first argument
/// does, masked).
fn is_ptrmask(inst: Instruction<'_>) -> bool {
    inst.as_call()
        .and_then(|c| c.callee_name())
        .is_some_and(|n| n.starts_with("llvm.ptrmask."))
}

/// The uses of the `alloca` past offsets, casts, phis and selects, masks (`llvm.ptrmask`)
/// and addresses computed as integers (`ptrtoint`, arithmetic, `inttoptr`): (the value
/// used, its user). An integer made of the address used otherwise (stored, compared,
/// passed) is such a use.
fn uses_through_offsets(alloca: Instruction<'_>) -> Vec<(Value<'_>, Value<'_>)> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    let mut work = vec![alloca.as_value()];
    while let Some(v) = work.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v);
        let is_int = !v.ty().is_pointer();
        for user in v.users() {
            let through = user.as_instruction().is_some_and(|i| match i.opcode() {
                Opcode::GetElementPtr | Opcode::BitCast | Opcode::AddrSpaceCast => !is_int,
                Opcode::Phi | Opcode::Select => true,
                Opcode::PtrToInt => !is_int,
                Opcode::Add | Opcode::Sub | Opcode::And | Opcode::Or | Opcode::Xor => is_int,
                Opcode::IntToPtr => is_int,
                Opcode::Call => !is_int && is_ptrmask(i) && i.operand(0) == Some(v),
                _ => false,
            });
            if through {
                work.push(user);
            } else {
                out.push((v, user));
            }
        }
    }
    out
}

/// Whether a load (or a call: `llvm.masked.load`) reads a value holding GC pointers from
/// the `alloca`.
fn read_as_gc(alloca: Instruction<'_>) -> bool {
    uses_through_offsets(alloca).into_iter().any(|(_, user)| {
        user.as_instruction().is_some_and(|i| {
            matches!(i.opcode(), Opcode::Load | Opcode::Call) && i.ty().holds_pointer_in(is_gc)
        })
    })
}

/// Whether the `alloca` is used other than by loads from it, stores into it, lifetime
/// markers and as a call's `sret` buffer whose GC pointers return roots keep: passed to a
/// call or a copy, or its address stored or turned into an integer.
fn escapes(alloca: Instruction<'_>) -> bool {
    uses_through_offsets(alloca).into_iter().any(|(v, user)| {
        let Some(inst) = user.as_instruction() else {
            return true;
        };
        match inst.opcode() {
            Opcode::Load => false,
            // Stored into, not stored somewhere.
            Opcode::Store => inst.operand(0) == Some(v),
            _ => inst.as_call().is_none_or(|call| {
                let lifetime = call
                    .callee_name()
                    .is_some_and(|n| n.starts_with("llvm.lifetime."));
                !lifetime && !rooted_sret(&call, v)
            }),
        }
    })
}

/// The destination and source of an `llvm.memcpy`/`llvm.memmove`, if `inst` is one.
fn bulk_copy<'m>(inst: Instruction<'m>) -> Option<(Value<'m>, Value<'m>)> {
    let call = inst.as_call()?;
    let name = call.callee_name()?;
    if name.starts_with("llvm.memcpy") || name.starts_with("llvm.memmove") {
        let args = call.arguments();
        Some((*args.first()?, *args.get(1)?))
    } else {
        None
    }
}

/// Whether `call` takes `v` only as its `sret` buffer and returns the GC pointers it writes
/// there in a `"julia.return_roots"` buffer too (Julia's convention), which roots them.
fn rooted_sret<'m>(call: &Call<'m>, v: Value<'m>) -> bool {
    let args = call.arguments();
    let at = |i: usize| u32::try_from(i).ok().map(AttributeIndex::Param);
    let return_roots = (0..args.len())
        .filter_map(at)
        .any(|i| call.string_attribute(i, RETURN_ROOTS).is_some());
    return_roots
        && args
            .iter()
            .enumerate()
            .all(|(i, &arg)| arg != v || at(i).is_some_and(|i| sret_type(call, i).is_some()))
}

/// The `sret` type of argument `at` of `call`, from the call or its callee.
fn sret_type<'m>(call: &Call<'m>, at: AttributeIndex) -> Option<Type<'m>> {
    call.type_attribute(at, "sret").or_else(|| {
        call.called_function()
            .and_then(|f| f.type_attribute(at, "sret"))
    })
}

/// The `alloca`s of `f` that may hold GC pointers (address spaces 10 to 13), whatever
/// their type says: typed with them; a GC pointer stored into, or loaded from, also by a
/// call (`llvm.masked.store` of GC pointers, any call that returns GC pointers);
/// the buffer of a call's `sret` of a type that holds them or its `"julia.return_roots"`
/// argument; handed to a defined function that stores GC pointers into, or loads them
/// from, what that parameter points to; or filled by `llvm.memcpy`/`llvm.memmove` from
/// another such `alloca`. Addresses are followed through offsets, casts, phis, selects,
/// `llvm.ptrmask` and integer arithmetic (`ptrtoint` .. `inttoptr`); when a GC pointer goes
/// through a plain pointer of unknown origin (one a call returned), every `alloca` whose
/// address escaped may hold it. A type such as `[16 x i8]` says nothing: the optimizer
/// makes such allocas, and a callee may write GC pointers into any memory it is handed.
/// Taken on trust, as Julia's types promise for its plain-data values (copied that way all
/// the time): bytes copied from a GC object into an `alloca` that nothing reads as a GC
/// pointer hold none; and a declared function (foreign code), or a defined one through a
/// further call, writes none into a buffer the caller never reads as GC pointers.
pub(super) fn allocas_holding_gc<'m>(f: Function<'m>) -> Vec<Instruction<'m>> {
    /// Adds the allocas `ptr` may point into; whether there were new ones.
    fn add<'m>(holding: &mut Vec<Instruction<'m>>, ptr: Value<'m>) -> bool {
        let mut grew = false;
        for a in reachable_allocas(ptr) {
            if !holding.contains(&a) {
                holding.push(a);
                grew = true;
            }
        }
        grew
    }
    let mut holding = Vec::new();
    let instructions = f.instructions();
    let mut copies = Vec::new();
    // Whether a GC pointer is stored into or loaded from plain memory of unknown origin
    // (a pointer a call returned, say): that may be any `alloca` whose address escaped.
    let mut unknown = false;
    // `param_holds_gc` of each (callee, parameter) asked: it reads the callee's body.
    let mut params_holding = HashMap::new();
    for &inst in &instructions {
        match inst.opcode() {
            Opcode::Alloca => {
                if inst
                    .allocated_type()
                    .is_some_and(|t| t.holds_pointer_in(is_gc))
                    && !holding.contains(&inst)
                {
                    holding.push(inst);
                }
            }
            Opcode::Store => {
                if let (Some(value), Some(ptr)) = (inst.operand(0), inst.operand(1)) {
                    if value.ty().holds_pointer_in(is_gc) {
                        add(&mut holding, ptr);
                        unknown |= unknown_plain_memory(ptr);
                    }
                }
            }
            Opcode::Load => {
                if let Some(ptr) = inst
                    .operand(0)
                    .filter(|_| inst.ty().holds_pointer_in(is_gc))
                {
                    add(&mut holding, ptr);
                    unknown |= unknown_plain_memory(ptr);
                }
            }
            _ => {
                if let Some(copy) = bulk_copy(inst) {
                    copies.push(copy);
                    continue;
                }
                let Some(call) = inst.as_call() else { continue };
                let args = call.arguments();
                // A call that returns GC pointers may read them from memory it is handed
                // (`llvm.masked.load`, a callee reading an argument array); one of LLVM's
                // masked stores of GC pointers writes them into it. (Any callee handed GC
                // pointers and a buffer could write them there, but so could it write them
                // anywhere: such a buffer counts once the caller reads a GC pointer from
                // it. A `jmp_buf` handed along with GC pointers is no root region.)
                let stores_gc = call.callee_name().is_some_and(|n| {
                    [
                        "llvm.masked.store",
                        "llvm.masked.scatter",
                        "llvm.masked.compressstore",
                    ]
                    .iter()
                    .any(|m| n.starts_with(m))
                }) && args.iter().any(|a| a.ty().holds_pointer_in(is_gc));
                let handles_gc = stores_gc || inst.ty().holds_pointer_in(is_gc);
                for (i, &arg) in args.iter().enumerate() {
                    let Ok(i) = u32::try_from(i) else { break };
                    let at = AttributeIndex::Param(i);
                    let returns_gc = call.string_attribute(at, RETURN_ROOTS).is_some()
                        || sret_type(&call, at).is_some_and(|t| t.holds_pointer_in(is_gc));
                    let callee_handles_gc = call.called_function().is_some_and(|callee| {
                        *params_holding
                            .entry((callee, i))
                            .or_insert_with(|| param_holds_gc(callee, i))
                    });
                    if returns_gc || handles_gc || callee_handles_gc {
                        add(&mut holding, arg);
                    }
                }
            }
        }
    }
    if unknown {
        for &inst in &instructions {
            if inst.opcode() == Opcode::Alloca && !holding.contains(&inst) && escapes(inst) {
                holding.push(inst);
            }
        }
    }
    // A copy out of such an alloca makes another; repeat until none does.
    loop {
        let mut grew = false;
        for &(dest, source) in &copies {
            if reachable_allocas(source)
                .iter()
                .any(|a| holding.contains(a))
            {
                grew |= add(&mut holding, dest);
            }
        }
        if !grew {
            return holding;
        }
    }
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
            for lifetime in lifetime_markers(a.alloca) {
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

/// The `llvm.lifetime.*` calls on the `alloca` or pointers derived from it: an `alloca` that becomes
/// frame slots lives as long as the frame, so they must go.
fn lifetime_markers(alloca: Instruction<'_>) -> Vec<Instruction<'_>> {
    let mut out = Vec::new();
    for (_, user) in uses_through_offsets(alloca) {
        let Some(call) = user.as_instruction().filter(|i| i.opcode() == Opcode::Call) else {
            continue;
        };
        let lifetime = call
            .as_call()
            .and_then(|c| c.callee_name())
            .is_some_and(|n| n.starts_with("llvm.lifetime."));
        if lifetime && !out.contains(&call) {
            out.push(call);
        }
    }
    out
}
