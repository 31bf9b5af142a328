//! Write barriers for generational collectors, placed by the lowering.
//!
//! A generational collector (MMTk's StickyImmix and GenCopy) collects the young objects
//! alone most of the time, and finds the young objects old ones refer to only through the
//! old objects a write barrier remembered: after a store of a (possibly young) tracked
//! pointer into an (possibly old) object, `locus_gc_write_barrier(object)` must run. Julia's
//! frontend places `julia.write_barrier(parent, children...)` itself; a frontend that places
//! none gets silently lost writes on those plans. With [`WriteBarriers::Insert`] (the
//! default; and [`WriteBarriers::Auto`] in a function without a frontend barrier) this
//! module places them: after every
//!
//! - `store`, atomic or not, of a value holding tracked (addrspace 10) pointers (a pointer,
//!   a vector or an aggregate of them),
//! - `atomicrmw xchg` and `cmpxchg` of tracked pointers,
//! - `llvm.masked.store` and `llvm.masked.scatter` of vectors of tracked pointers (a
//!   scatter's lanes each remember their own object),
//! - `llvm.memcpy`, `llvm.memcpy.inline` and `llvm.memmove` into an object (the bytes
//!   copied may hold pointers: the IR's opaque pointers cannot tell, so every copy into an
//!   object of 8 bytes or more, or of a length not known, gets one; `memset` writes no
//!   pointer),
//!
//! whose address is derived from a tracked object, a `julia.write_barrier(base, stored)`
//! call goes right after it, which the cleanup and the final lowering turn into
//! `locus_gc_write_barrier(base)` like the frontend's own (so both root strategies get them:
//! the frame path and the statepoint rewrite both run [`super::emit::rewrite_helpers_with`],
//! which starts here).
//!
//! The base is found back along the address's derivation (casts, getelementptrs, `freeze`,
//! lanes, `julia.gc_loaded`, `julia.pointer_from_objref`); a store through a Loaded (13)
//! pointer remembers the object it was loaded from (the owner of the data, as Julia's
//! arrays are). A phi of derived pointers has no base in the IR: the scanner's lifting
//! ([`super::lift`]) makes the `%gclift` phis, once per function and only when such a store
//! exists. On the frame path this runs after root placement, whose own lifts are not kept:
//! such a function gets a second set of `%gclift` phis (and selects), used only by the
//! barriers, the unused ones left for LLVM's dead code elimination. A function whose phis
//! cannot be lifted is refused with the lifting's error (use [`WriteBarriers::Frontend`]
//! to lower it without barriers). A select may pick either operand: both bases are remembered (an extra barrier
//! only remembers an object). No barrier where none is needed:
//! - the stored value is a constant (null, a permanent global);
//! - the address is not in the heap: an `alloca`, a global (a root table registered with
//!   `locus_gc_add_root_region` is scanned as roots at every collection, nursery ones
//!   included, as MMTk scans roots and as Julia treats its roots), memory reached through
//!   an untracked (addrspace 0) pointer that does not come from a tracked one (spec 003:
//!   the frontend answers for those);
//! - the object was allocated in the same block with no call that may collect since: it
//!   is young, and a barrier on it does nothing (Julia's frontend leaves these out too);
//! - with [`WriteBarriers::Insert`], a frontend barrier on the same object follows the
//!   store in its block, before any call that may collect.
//!
//! What cannot be named is left to the runtime: when the address derives from a GC
//! pointer (Derived, Loaded or CalleeRooted) with no object this function can name (a
//! function's argument: its object is the caller's; a derived pointer loaded from memory
//! or returned by a call; a Loaded pointer loaded from the stack or a global), the store
//! is followed by `locus_gc_write_barrier_interior(addr)`, `addr` the store's address cast
//! to a plain pointer (one call per lane of a scatter), which finds the object holding
//! `addr` and runs the barrier on it (an address in no object is no barrier). It never
//! collects, and is called directly: neither the cleanup nor the final lowering changes
//! it. A store that reaches both a named object and an unnamed one (a select) gets both
//! barriers. An address made from an integer, or an untracked pointer that comes from no
//! GC pointer, still gets none (spec 003: the frontend answers for those).

use locus_llvm::builder::Builder;
use locus_llvm::cfg::Cfg;
use locus_llvm::ir::{Function, Instruction, Opcode, Value};

use super::scan::{is_derived_pointer, is_derived_vector, is_safepoint, Scanner};
use crate::addrspace::{holds_loaded, is_gc, tracked_leaves, LOADED, TRACKED, UNTRACKED};
use crate::contract::{
    ALLOC_GENERICMEMORY, GC_ALLOC_BYTES, GC_ALLOC_MEMORY, GC_ALLOC_OBJ, GC_LOADED,
    POINTER_FROM_OBJREF, RUNTIME_ALLOC, RUNTIME_ALLOC_BYTES, RUNTIME_ALLOC_GENERICMEMORY,
    RUNTIME_WRITE_BARRIER, RUNTIME_WRITE_BARRIER_INTERIOR, WRITE_BARRIER,
};
use crate::{Error, Result};

/// Who places the write barriers generational collectors need (MMTk's StickyImmix and
/// GenCopy): `locus_gc_write_barrier(object)` after each store of tracked pointers into an
/// object.
///
/// The lowering places one after every store (plain or atomic, `atomicrmw xchg`,
/// `cmpxchg`, of a pointer, a vector or an aggregate holding tracked pointers;
/// `llvm.masked.store`, `llvm.masked.scatter`, and `llvm.memcpy`/`llvm.memmove` of 8 bytes
/// or more) whose address derives from a tracked object, on that object (for a store
/// through a Loaded pointer, the object it was loaded from); none for constants, allocas,
/// globals (root tables are scanned at every collection), memory reached through
/// untracked pointers, or an object allocated since the last call that may collect (it is
/// young). A store through a GC pointer whose object the function cannot name (a Derived
/// (11) argument: the object is the caller's; a derived pointer loaded from memory) gets
/// `locus_gc_write_barrier_interior(address)`, which finds the object at run time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WriteBarriers {
    /// Only the frontend's `julia.write_barrier` calls (Julia's own codegen places them).
    Frontend,
    /// The lowering places one after every store of tracked pointers into an object that
    /// no frontend barrier on that object follows (before a call that may collect). The
    /// default: never a store without its barrier, at the cost of a few the frontend
    /// knew it could leave out.
    #[default]
    Insert,
    /// [`WriteBarriers::Insert`] in a function that calls no write barrier, else
    /// [`WriteBarriers::Frontend`] (a frontend that places barriers knows which stores need
    /// none). Decided per function, so that a function pass decides as the module pass
    /// does; so a function without barriers that LLVM's inliner merged into one with
    /// them loses its stores' barriers (a generational collector then lost young objects:
    /// 0 for 5050).
    Auto,
}

/// The runtime's allocations and Julia's: their result is young until the next call that
/// may collect.
const ALLOCATIONS: [&str; 7] = [
    RUNTIME_ALLOC,
    RUNTIME_ALLOC_BYTES,
    RUNTIME_ALLOC_GENERICMEMORY,
    GC_ALLOC_OBJ,
    GC_ALLOC_BYTES,
    GC_ALLOC_MEMORY,
    ALLOC_GENERICMEMORY,
];

/// How far back a derivation is followed, and how far a block is searched.
const DEPTH: usize = 256;

/// An object a barrier names: a tracked value, or a lane of a vector of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parent<'m> {
    Value(Value<'m>),
    Lane(Value<'m>, u32),
}

/// What a store's address was found to point into.
#[derive(Default)]
struct Found<'m> {
    parents: Vec<Parent<'m>>,
    /// A phi of derived pointers was met before the function was lifted.
    needs_lift: bool,
    /// The derivation reached a GC pointer whose object cannot be named (a Derived
    /// argument, a derived pointer loaded from memory): the runtime finds the object
    /// holding the address (`locus_gc_write_barrier_interior`).
    interior: bool,
}

impl<'m> Found<'m> {
    fn push(&mut self, p: Parent<'m>) {
        if !self.parents.contains(&p) {
            self.parents.push(p);
        }
    }

    /// `v`, where the derivation stops, points into an object this function cannot name
    /// if it is a GC pointer (a constant is in no object the heap holds).
    fn unnamed(&mut self, v: Value<'m>) {
        let ty = v.ty().scalar();
        if !v.is_constant() && ty.is_pointer() && ty.address_space().is_some_and(is_gc) {
            self.interior = true;
        }
    }

    fn merge(&mut self, other: Found<'m>) {
        for p in other.parents {
            self.push(p);
        }
        self.needs_lift |= other.needs_lift;
        self.interior |= other.interior;
    }
}

/// One write into memory: what is written and where.
struct Write<'m> {
    inst: Instruction<'m>,
    /// The value stored (for a copy, the source pointer).
    stored: Value<'m>,
    address: Value<'m>,
}

/// True for Julia's write barriers and the runtime's.
fn is_barrier_call(inst: Instruction<'_>) -> bool {
    inst.as_call()
        .and_then(|c| c.callee_name())
        .is_some_and(|n| {
            super::emit::is_write_barrier(&n)
                || n == RUNTIME_WRITE_BARRIER
                || n == RUNTIME_WRITE_BARRIER_INTERIOR
        })
}

fn holds_tracked(v: Value<'_>) -> bool {
    !tracked_leaves(v.ty()).is_empty() && !v.is_constant()
}

/// The write `inst` makes of tracked pointers (or of bytes that may hold them), if any.
fn write_of<'m>(inst: Instruction<'m>) -> Option<Write<'m>> {
    let write = |stored, address| Write {
        inst,
        stored,
        address,
    };
    // A store of tracked pointers: `stored` at `address`.
    let tracked = |stored, address| holds_tracked(stored).then(|| write(stored, address));
    match inst.opcode() {
        Opcode::Store => tracked(inst.operand(0)?, inst.operand(1)?),
        // Only `xchg` takes pointers.
        Opcode::AtomicRMW => tracked(inst.operand(1)?, inst.operand(0)?),
        Opcode::AtomicCmpXchg => tracked(inst.operand(2)?, inst.operand(0)?),
        Opcode::Call => {
            let call = inst.as_call()?;
            let name = call.callee_name()?;
            let args = call.arguments();
            if name.starts_with("llvm.masked.store.") || name.starts_with("llvm.masked.scatter.") {
                return tracked(*args.first()?, *args.get(1)?);
            }
            let copies = ["llvm.memcpy.", "llvm.memcpy.inline.", "llvm.memmove."]
                .iter()
                .any(|p| name.starts_with(p));
            if copies {
                let (dst, src, len) = (*args.first()?, *args.get(1)?, *args.get(2)?);
                // Fewer bytes than a pointer cannot carry one.
                if len.const_uint().is_some_and(|n| n < 8) {
                    return None;
                }
                return Some(write(src, dst));
            }
            None
        }
        _ => None,
    }
}

struct Placer<'s, 'm> {
    b: &'s Builder<'m>,
    f: Function<'m>,
    /// The scanner's lifting, once a store through a phi of derived pointers needed it.
    lifted: Option<Scanner<'s, 'm>>,
}

impl<'s, 'm> Placer<'s, 'm> {
    fn lifted_base(&self, v: Value<'m>) -> Option<Value<'m>> {
        self.lifted.as_ref()?.base_of_derived.get(&v).copied()
    }

    fn lifted_lane(&self, v: Value<'m>, lane: u32) -> Option<Value<'m>> {
        let s = self.lifted.as_ref()?;
        s.lanes_of_derived.get(&v)?.get(lane as usize).copied()
    }

    fn lifted_field(&self, agg: Value<'m>, path: &[u32]) -> Option<Value<'m>> {
        let s = self.lifted.as_ref()?;
        s.fields_of_derived
            .get(&agg)?
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| *b)
    }

    /// The objects a scalar pointer `v` points into.
    fn scalar(&self, v: Value<'m>, depth: usize, out: &mut Found<'m>) {
        if depth > DEPTH {
            return;
        }
        if let Some(base) = self.lifted_base(v) {
            if !base.is_constant() {
                out.push(Parent::Value(base));
            }
            return;
        }
        let ty = v.ty();
        if ty.is_pointer() && ty.address_space() == Some(TRACKED) {
            if !v.is_constant() {
                out.push(Parent::Value(v));
            }
            return;
        }
        let Some(inst) = v.as_instruction() else {
            // Globals and constants are in no object; a GC pointer argument is in the
            // caller's.
            out.unnamed(v);
            return;
        };
        match inst.opcode() {
            Opcode::AddrSpaceCast | Opcode::BitCast | Opcode::Freeze | Opcode::GetElementPtr => {
                if let Some(src) = inst.operand(0) {
                    self.scalar(src, depth + 1, out);
                }
            }
            Opcode::Load if ty.address_space() == Some(LOADED) => {
                if let Some(p) = inst.operand(0) {
                    self.owner(p, depth + 1, out);
                }
            }
            Opcode::ExtractElement => {
                let Some(vector) = inst.operand(0) else {
                    return;
                };
                match inst.operand(1).and_then(|i| i.const_uint()) {
                    Some(i) => self.lane(vector, i as u32, depth + 1, out),
                    // Any lane: each of them.
                    None => {
                        for i in 0..vector.ty().vector_len().unwrap_or(0) {
                            self.lane(vector, i, depth + 1, out);
                        }
                    }
                }
            }
            Opcode::ExtractValue => {
                let (Some(agg), Some(path)) = (inst.operand(0), inst.aggregate_indices()) else {
                    return;
                };
                if let Some(base) = self.lifted_field(agg, &path) {
                    if !base.is_constant() {
                        out.push(Parent::Value(base));
                    }
                    return;
                }
                match agg.as_instruction() {
                    Some(a) if a.opcode() == Opcode::Phi && holds_gc_decayed(agg) => {
                        self.phi(v, out);
                    }
                    Some(a) if a.opcode() == Opcode::Load && holds_loaded(agg.ty()) => {
                        if let Some(p) = a.operand(0) {
                            self.owner(p, depth + 1, out);
                        }
                    }
                    Some(a) if a.opcode() == Opcode::InsertValue => {
                        self.field_of_insert(a, &path, depth + 1, out);
                    }
                    _ => out.unnamed(v),
                }
            }
            // Either operand: both.
            Opcode::Select => {
                for op in [inst.operand(1), inst.operand(2)].into_iter().flatten() {
                    self.scalar(op, depth + 1, out);
                }
            }
            Opcode::Phi if is_derived_pointer(v) => self.phi(v, out),
            Opcode::Call => {
                let Some(call) = inst.as_call() else { return };
                let name = call.callee_name().unwrap_or_default();
                match call.arguments().first() {
                    Some(&obj) if name == GC_LOADED || name == POINTER_FROM_OBJREF => {
                        self.scalar(obj, depth + 1, out);
                    }
                    _ => out.unnamed(v),
                }
            }
            // A derived pointer loaded from memory, made from an integer, ...
            _ => out.unnamed(v),
        }
    }

    /// A phi of derived pointers `v`: lifted, or to be lifted. One the lifting gave no
    /// base (it gives every one it does not refuse) is left to the runtime.
    fn phi(&self, v: Value<'m>, out: &mut Found<'m>) {
        if self.lifted.is_some() {
            out.unnamed(v);
        } else {
            out.needs_lift = true;
        }
    }

    /// The objects owning the data a Loaded (13) pointer loaded through `p` points into:
    /// those `p` points into. A Loaded pointer loaded from the stack or a global has no
    /// owner this function can name: the runtime finds the object holding the address.
    fn owner(&self, p: Value<'m>, depth: usize, out: &mut Found<'m>) {
        let mut from = Found::default();
        self.scalar(p, depth, &mut from);
        if from.parents.is_empty() && !from.needs_lift {
            from.interior = true;
        }
        out.merge(from);
    }

    /// The field at `path` of an `insertvalue` chain.
    fn field_of_insert(
        &self,
        inst: Instruction<'m>,
        path: &[u32],
        depth: usize,
        out: &mut Found<'m>,
    ) {
        if depth > DEPTH {
            return;
        }
        let Some(at) = inst.aggregate_indices() else {
            return;
        };
        let (Some(agg), Some(val)) = (inst.operand(0), inst.operand(1)) else {
            return;
        };
        if path == at.as_slice() {
            self.scalar(val, depth + 1, out);
        } else if let Some(a) = agg
            .as_instruction()
            .filter(|a| a.opcode() == Opcode::InsertValue)
        {
            self.field_of_insert(a, path, depth + 1, out);
        }
    }

    /// The objects lane `lane` of a vector of pointers `v` points into.
    fn lane(&self, v: Value<'m>, lane: u32, depth: usize, out: &mut Found<'m>) {
        if depth > DEPTH {
            return;
        }
        if let Some(base) = self.lifted_lane(v, lane) {
            if !base.is_constant() {
                out.push(Parent::Value(base));
            }
            return;
        }
        let ty = v.ty();
        if !ty.is_vector() {
            // A vector GEP over one pointer: every lane is in its object.
            return self.scalar(v, depth + 1, out);
        }
        if ty.scalar().address_space() == Some(TRACKED) {
            if !v.is_constant() {
                out.push(Parent::Lane(v, lane));
            }
            return;
        }
        let Some(inst) = v.as_instruction() else {
            out.unnamed(v);
            return;
        };
        match inst.opcode() {
            Opcode::AddrSpaceCast | Opcode::BitCast | Opcode::Freeze | Opcode::GetElementPtr => {
                if let Some(src) = inst.operand(0) {
                    self.lane(src, lane, depth + 1, out);
                }
            }
            Opcode::Load if holds_loaded(ty) => {
                if let Some(p) = inst.operand(0) {
                    self.owner(p, depth + 1, out);
                }
            }
            Opcode::InsertElement => {
                let (Some(vec), Some(elt)) = (inst.operand(0), inst.operand(1)) else {
                    return;
                };
                match inst.operand(2).and_then(|i| i.const_uint()) {
                    Some(i) if i == u64::from(lane) => self.scalar(elt, depth + 1, out),
                    Some(_) => self.lane(vec, lane, depth + 1, out),
                    None => {
                        self.scalar(elt, depth + 1, out);
                        self.lane(vec, lane, depth + 1, out);
                    }
                }
            }
            Opcode::ShuffleVector => {
                let (Some(a), Some(bv)) = (inst.operand(0), inst.operand(1)) else {
                    return;
                };
                let n = a.ty().vector_len().unwrap_or(0);
                let mask = inst.shuffle_mask().unwrap_or_default();
                if let Some(Some(m)) = mask.get(lane as usize) {
                    if *m < n {
                        self.lane(a, *m, depth + 1, out);
                    } else {
                        self.lane(bv, m - n, depth + 1, out);
                    }
                }
            }
            Opcode::Select => {
                for op in [inst.operand(1), inst.operand(2)].into_iter().flatten() {
                    self.lane(op, lane, depth + 1, out);
                }
            }
            Opcode::Phi if is_derived_vector(v) => self.phi(v, out),
            Opcode::Call => {
                let Some(call) = inst.as_call() else { return };
                let name = call.callee_name().unwrap_or_default();
                match call.arguments().first() {
                    Some(&p) if holds_loaded(ty) && name.starts_with("llvm.masked.load.") => {
                        self.owner(p, depth + 1, out);
                    }
                    Some(&p) if holds_loaded(ty) && name.starts_with("llvm.masked.gather.") => {
                        let mut from = Found::default();
                        self.lane(p, lane, depth + 1, &mut from);
                        if from.parents.is_empty() && !from.needs_lift {
                            from.interior = true;
                        }
                        out.merge(from);
                    }
                    _ => out.unnamed(v),
                }
            }
            _ => out.unnamed(v),
        }
    }

    /// The objects `address` (a pointer or a vector of them) points into.
    fn parents(&self, address: Value<'m>) -> Found<'m> {
        let mut out = Found::default();
        match address.ty().vector_len() {
            Some(n) if address.ty().is_vector() => {
                for i in 0..n {
                    self.lane(address, i, 0, &mut out);
                }
            }
            _ => self.scalar(address, 0, &mut out),
        }
        out
    }

    /// Lifts the function's phis and selects of derived pointers, as the scanner does.
    fn lift(&mut self) -> Result<()> {
        if self.lifted.is_some() {
            return Ok(());
        }
        let mut s = Scanner::new(self.b, self.f);
        s.make_base_phis_and_selects(&Cfg::new(self.f))?;
        self.lifted = Some(s);
        Ok(())
    }
}

/// True for a struct or array value holding Derived or Loaded pointers.
fn holds_gc_decayed(v: Value<'_>) -> bool {
    v.ty()
        .holds_pointer_in(|a| a != TRACKED && crate::addrspace::is_gc(a))
}

/// True if `parent` was allocated in `store`'s block before it with no call that may
/// collect in between: it is young (a barrier on it would do nothing).
fn is_fresh(parent: Value<'_>, store: Instruction<'_>) -> bool {
    let Some(alloc) = parent.as_instruction() else {
        return false;
    };
    let allocates = alloc
        .as_call()
        .and_then(|c| c.callee_name())
        .is_some_and(|n| ALLOCATIONS.contains(&n.as_str()));
    if !allocates || alloc.block() != store.block() {
        return false;
    }
    let mut at = alloc.next();
    for _ in 0..4 * DEPTH {
        match at {
            Some(i) if i == store => return true,
            Some(i) => {
                if i.as_call().is_some_and(is_safepoint) {
                    return false;
                }
                at = i.next();
            }
            None => return false,
        }
    }
    false
}

/// The value under pointer casts.
fn strip_casts(v: Value<'_>) -> Value<'_> {
    let mut v = v;
    for _ in 0..DEPTH {
        match v.as_instruction() {
            Some(i) if matches!(i.opcode(), Opcode::AddrSpaceCast | Opcode::BitCast) => {
                match i.operand(0) {
                    Some(src) => v = src,
                    None => break,
                }
            }
            _ => break,
        }
    }
    v
}

/// True if a frontend barrier on `parent` follows `store` in its block before any call
/// that may collect.
fn covered(parent: Parent<'_>, store: Instruction<'_>) -> bool {
    let Parent::Value(parent) = parent else {
        return false;
    };
    let parent = strip_casts(parent);
    let mut at = store.next();
    for _ in 0..4 * DEPTH {
        let Some(i) = at else { return false };
        if is_barrier_call(i) {
            let named = i
                .as_call()
                .and_then(|c| c.arguments().first().copied())
                .map(strip_casts);
            if named == Some(parent) {
                return true;
            }
        } else if i.as_call().is_some_and(is_safepoint) {
            return false;
        }
        at = i.next();
    }
    false
}

/// Places the write barriers `mode` asks for in `f` ([module docs](self)); returns how
/// many it placed.
pub(super) fn insert_write_barriers<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    mode: WriteBarriers,
) -> Result<usize> {
    if mode == WriteBarriers::Frontend {
        return Ok(0);
    }
    let insts = f.instructions();
    if mode == WriteBarriers::Auto && insts.iter().any(|&i| is_barrier_call(i)) {
        return Ok(0);
    }
    let writes: Vec<Write<'m>> = insts.into_iter().filter_map(write_of).collect();
    if writes.is_empty() {
        return Ok(0);
    }
    let mut placer = Placer { b, f, lifted: None };
    let mut found: Vec<Found<'m>> = writes.iter().map(|w| placer.parents(w.address)).collect();
    if found.iter().any(|x| x.needs_lift) {
        placer.lift()?;
        found = writes.iter().map(|w| placer.parents(w.address)).collect();
    }
    let tracked = b.ptr_type(TRACKED)?;
    let barrier_ty = b.function_type(b.void_type(), &[tracked], true)?;
    let mut barrier = None;
    let raw = b.ptr_type(UNTRACKED)?;
    let interior_ty = b.function_type(b.void_type(), &[raw], false)?;
    let mut interior = None;
    let i32t = b.int_type(32)?;
    let mut placed = 0;
    for (w, found) in writes.iter().zip(found) {
        let mut after = w.inst;
        for parent in found.parents {
            let fresh = matches!(parent, Parent::Value(p) if is_fresh(p, w.inst));
            if fresh || covered(parent, w.inst) {
                continue;
            }
            b.position_after(after)?;
            let object = match parent {
                Parent::Value(v) => v,
                // The builder stays after the lane it takes, where the call goes.
                Parent::Lane(v, i) => b.extract_element(v, b.const_int(i32t, i64::from(i))?, "")?,
            };
            let callee = match barrier {
                Some(c) => c,
                None => {
                    let c = b.declare_function(WRITE_BARRIER, barrier_ty).map_err(|e| {
                        Error::Lower {
                            function: f.name(),
                            instruction: Some(w.inst.print().trim().to_string()),
                            message: format!("cannot declare the write barrier it needs: {e}"),
                        }
                    })?;
                    barrier = Some(c);
                    c
                }
            };
            after = b.call(barrier_ty, callee, &[object, w.stored], &[], "")?;
            placed += 1;
        }
        if !found.interior {
            continue;
        }
        let callee = match interior {
            Some(c) => c,
            None => {
                let c = b
                    .declare_function(RUNTIME_WRITE_BARRIER_INTERIOR, interior_ty)
                    .map_err(|e| Error::Lower {
                        function: f.name(),
                        instruction: Some(w.inst.print().trim().to_string()),
                        message: format!("cannot declare the interior write barrier: {e}"),
                    })?;
                interior = Some(c);
                c
            }
        };
        b.position_after(after)?;
        // The runtime takes a plain address (C's `uint8_t *`), one per lane of a scatter.
        let addresses = match w.address.ty().vector_len() {
            Some(n) if w.address.ty().is_vector() => (0..n)
                .map(|i| b.extract_element(w.address, b.const_int(i32t, i64::from(i))?, ""))
                .collect::<locus_llvm::Result<Vec<_>>>()?,
            _ => vec![w.address],
        };
        for address in addresses {
            let address = if address.ty().address_space() == Some(UNTRACKED) {
                address
            } else {
                b.addrspacecast(address, raw, "")?
            };
            b.call(interior_ty, callee, &[address], &[], "")?;
            placed += 1;
        }
    }
    Ok(placed)
}
