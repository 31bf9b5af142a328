//! From a function's IR to the [`FnModel`] the analyses work on.
//!
//! Spec 003, "Размещение корней сборки мусора": the pass must find (a) the GC-tracked
//! pointers and (b) every use of them, including uses through derived pointers, whose base
//! it must find and root. Here:
//!
//! - a *base* is an SSA value whose type holds tracked (address space 10) pointers and that
//!   brings new references into the function: a call result, a load, a phi or select of
//!   tracked values, a vector or aggregate built with insertelement/insertvalue/shuffle, a
//!   lane taken at a variable index. Each tracked pointer inside it (each vector element,
//!   each tracked struct field, each element of a vector field) is one model value;
//! - a *derived* value reaches its base through addrspacecast, getelementptr, bitcast,
//!   freeze, extractelement and extractvalue; a load of Loaded (13) pointers (scalar or
//!   vector, plain or masked or gathered) and `julia.gc_loaded` derive from the object
//!   loaded from; vectors and aggregates of derived pointers derive from every operand. A
//!   phi or select of derived pointers gets a parallel `%gclift` phi or select over their
//!   bases (one per lane for vectors), inserted into the IR here, which is then a base
//!   itself; a derived pointer whose base cannot be found is refused, never left unrooted;
//! - instructions that only derive are not uses themselves: the uses of what they make
//!   are, and reach only the lanes and fields those need;
//! - arguments (the caller roots them), constants and casts from address space 0 (spec:
//!   the frontend takes responsibility for those) need no root; but a CalleeRooted (12)
//!   argument, which its caller passes without a root, is rooted here while it is live
//!   across a safepoint;
//! - a safepoint is a call that may collect: anything but intrinsics, the `julia.*`
//!   helpers, Julia's runtime calls known not to collect, and calls that only read memory
//!   or only touch what their arguments point to. Its tracked and derived arguments, its
//!   `jl_roots` bundle operands and `julia.call`'s arguments stay rooted during the call;
//!   CalleeRooted (12) arguments that are casts of tracked values are rooted by the callee;
//! - `llvm.julia.gc_preserve_begin`'s operands (aggregates and vectors included) stay
//!   rooted at every safepoint the begin dominates and no matching end dominates;
//! - values are *refined* to others that keep them alive (see [`FnModel::refinements`]):
//!   selects and phis to their operands (a loop-carried incoming value only through its own
//!   refinements), immutable loads to their source object, constant loads and type tags to
//!   nothing;
//! - `julia.pointer_from_objref` is not a use.

use std::collections::HashMap as StdHashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// An Fx-style hasher for the pointer-keyed maps (SipHash is most of their cost).
#[derive(Default)]
pub(super) struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

pub(super) type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<PtrHasher>>;

use locus_llvm::builder::Builder;
use locus_llvm::cfg::{Cfg, Dominators};
use locus_llvm::ir::{AttributeIndex, Call, Function, Instruction, Opcode, Use, Value, ValueKind};

use super::immutable;
use super::model::{Block, FnModel, Phi, Safepoint, Step, ValueId};
use crate::addrspace::{holds_loaded, is_gc, tracked_leaves, LeafPath};
use crate::contract::{
    CALLEE_ROOTED, DERIVED, FIELD_WRITE_BARRIER_PREFIX, GCSTACK_ATTR, GC_LOADED, GET_PGCSTACK,
    GET_PGCSTACK_OR_NEW, JULIA_CALL, JULIA_CALL2, NOT_SAFEPOINTS, POINTER_FROM_OBJREF,
    PRESERVE_BEGIN, PRESERVE_END, SAFEPOINT_ATTR, TRACKED, TYPEOF, UNTRACKED,
};
use crate::{Error, Result};

/// One model value: a tracked pointer inside a base SSA value.
#[derive(Clone, Debug)]
pub struct Leaf<'m> {
    /// The base SSA value.
    pub value: Value<'m>,
    /// Where the pointer is inside it.
    pub path: LeafPath,
}

/// A function reduced to its model, with the way back to the IR.
#[derive(Debug)]
pub struct Scan<'m> {
    /// The model.
    pub model: FnModel,
    /// Model value → the IR it stands for.
    pub leaves: Vec<Leaf<'m>>,
    /// Safepoint → its call.
    pub safepoints: Vec<Instruction<'m>>,
    /// The chain head: the `julia.get_pgcstack` call in the entry block, or the
    /// `"gcstack"` parameter.
    pub pgcstack: Value<'m>,
    /// Tracked pointers the function keeps in its own `alloca`s.
    pub memory: super::memory::FrameMemory<'m>,
}

/// Where `f` gets its thread's GC chain head, if it takes part in GC lowering: a parameter
/// with the `"gcstack"` attribute (Julia passes it as `swiftself`), else a
/// `julia.get_pgcstack()` (or `julia.get_pgcstack_or_new()`) call, in the entry block
/// first, else anywhere in the function.
pub fn pgcstack<'m>(f: Function<'m>) -> Option<Value<'m>> {
    let from_param = f.params().into_iter().enumerate().find(|&(i, _)| {
        u32::try_from(i).is_ok_and(|i| f.has_attribute(AttributeIndex::Param(i), GCSTACK_ATTR))
    });
    if let Some((_, p)) = from_param {
        return Some(p);
    }
    let is_pgcstack = |i: &Instruction<'m>| {
        i.as_call()
            .and_then(|c| c.callee_name())
            .is_some_and(|n| n == GET_PGCSTACK || n == GET_PGCSTACK_OR_NEW)
    };
    let entry = f.entry_block()?;
    // A call outside the entry block (Julia's pass would not look there) still makes the
    // function take part: [`scan`] moves it into the entry block.
    entry
        .instructions()
        .into_iter()
        .find(is_pgcstack)
        .or_else(|| f.instructions().into_iter().find(is_pgcstack))
        .map(|i| i.as_value())
}

/// True if `v` is an argument in the CalleeRooted address space (a pointer, not a vector
/// or aggregate of them): the caller passes it without a root.
fn is_callee_rooted_argument(v: Value<'_>) -> bool {
    v.as_argument().is_some()
        && v.ty().is_pointer()
        && v.ty().address_space() == Some(CALLEE_ROOTED)
}

/// True if `call` may collect.
pub fn is_safepoint(call: Call<'_>) -> bool {
    if call.has_fn_attribute(SAFEPOINT_ATTR) {
        return true;
    }
    match call.callee_name() {
        Some(name) => {
            if NOT_SAFEPOINTS.contains(&name.as_str())
                || name.starts_with(FIELD_WRITE_BARRIER_PREFIX)
                || call.is_intrinsic()
                || name.starts_with("llvm.")
            {
                return false;
            }
            if name == JULIA_CALL || name == JULIA_CALL2 {
                return true;
            }
            if let Some(f) = call.called_function() {
                if cannot_collect(f.memory_effects()) {
                    return false;
                }
            }
            !cannot_collect(call.memory_effects())
        }
        // Indirect calls may go anywhere.
        None => !cannot_collect(call.memory_effects()),
    }
}

/// True for calls that cannot collect by their memory effects, as Julia decides: those
/// that only read memory, and those that touch only what their arguments point to (a
/// collection changes the collector's own, inaccessible, state).
pub(super) fn cannot_collect(effects: locus_llvm::ir::MemoryEffects) -> bool {
    effects.only_reads_memory() || effects.only_accesses_argument_memory()
}

/// The GC pointers of `f` live across `call`, in strict SSA: each dominates the call (an
/// argument, or an instruction of a dominating block or before the call in its block) and
/// has a use reachable from the point after the call, a `phi`'s use counting at the end of
/// its incoming block. Reachability overestimates liveness only for values whose every path
/// to a use passes their definition again (a loop).
pub(super) fn gc_pointers_live_across<'m>(
    f: Function<'m>,
    cfg: &Cfg<'m>,
    dom: &Dominators<'_, 'm>,
    call: Instruction<'m>,
) -> Vec<Value<'m>> {
    let Some(home) = call.block().and_then(|bb| cfg.index_of(bb)) else {
        return Vec::new();
    };
    // Blocks reachable from the end of the call's block (itself again only by a cycle).
    let mut after = vec![false; cfg.len()];
    let mut work: Vec<usize> = cfg.successors(home).to_vec();
    while let Some(x) = work.pop() {
        if !std::mem::replace(&mut after[x], true) {
            work.extend_from_slice(cfg.successors(x));
        }
    }
    let used_after = |u: &Use<'m>| -> bool {
        let Some(user) = u.user.as_instruction() else {
            return false;
        };
        let at = if user.opcode() == Opcode::Phi {
            let incoming = user.phi_incoming();
            let Some(block) = usize::try_from(u.operand)
                .ok()
                .and_then(|k| incoming.get(k))
                .and_then(|(_, bb)| cfg.index_of(*bb))
            else {
                return true; // unknown: keep it
            };
            // At the end of the incoming block: after the call when that is its block.
            return block == home || after[block];
        } else {
            user.block().and_then(|bb| cfg.index_of(bb))
        };
        match at {
            Some(x) if x == home => after[x] || cfg.comes_before(call, user) == Some(true),
            Some(x) => after[x],
            None => true,
        }
    };
    let is_gc_pointer =
        |v: &Value<'m>| v.ty().is_pointer() && v.ty().address_space().is_some_and(is_gc);
    f.params()
        .into_iter()
        .chain(
            f.instructions()
                .into_iter()
                .filter(|&i| i != call && dom.dominates_instruction(i.as_value(), call))
                .map(|i| i.as_value()),
        )
        .filter(is_gc_pointer)
        .filter(|v| v.uses().iter().any(used_after))
        .collect()
}

/// True if `call` is `returns_twice` (at the call site or on its callee).
pub fn is_returns_twice(call: Call<'_>) -> bool {
    call.has_fn_attribute("returns_twice")
        || call
            .called_function()
            .is_some_and(|f| f.has_attribute(AttributeIndex::Function, "returns_twice"))
}

/// The `returns_twice` calls of `f` (`setjmp` and its kin), in order.
pub fn returns_twice_calls<'m>(f: Function<'m>) -> Vec<Instruction<'m>> {
    f.instructions()
        .into_iter()
        .filter(|i| i.as_call().is_some_and(is_returns_twice))
        .collect()
}

/// True if `call` returns pointers that live off what its first argument points into:
/// `julia.gc_loaded(obj, ptr)`, and masked loads and gathers (and vector extracts) of Loaded
/// (13) pointers, which read from the object their pointer operand is derived from.
fn loads_through_first_argument(call: Call<'_>) -> bool {
    let Some(name) = call.callee_name() else {
        return false;
    };
    if name == GC_LOADED {
        return true;
    }
    [
        "llvm.masked.load.",
        "llvm.masked.gather.",
        "llvm.vector.extract.",
    ]
    .iter()
    .any(|p| name.starts_with(p))
        && holds_loaded(call.instruction().ty())
}

/// True if `inst` brings new tracked references into the function.
fn is_base_def(inst: Instruction<'_>) -> bool {
    if tracked_leaves(inst.ty()).is_empty() {
        return false;
    }
    // A lane taken at a variable index holds one of several objects: a value of its own,
    // as Julia numbers it.
    if inst.opcode() == Opcode::ExtractElement {
        return inst.operand(1).is_some_and(|i| i.const_uint().is_none());
    }
    matches!(
        inst.opcode(),
        Opcode::Call
            | Opcode::Invoke
            | Opcode::Load
            | Opcode::Phi
            | Opcode::Select
            | Opcode::InsertElement
            | Opcode::InsertValue
            | Opcode::ShuffleVector
            | Opcode::AtomicRMW
            | Opcode::AtomicCmpXchg
            | Opcode::VAArg
    )
}

/// True if `inst`, whose value holds decayed pointers, is made in a way [`Scanner::bases`]
/// can follow back to the objects they point into.
fn derives_known_bases(inst: Instruction<'_>) -> bool {
    match inst.opcode() {
        Opcode::AddrSpaceCast
        | Opcode::BitCast
        | Opcode::Freeze
        | Opcode::GetElementPtr
        | Opcode::ExtractElement
        | Opcode::ExtractValue
        | Opcode::InsertElement
        | Opcode::InsertValue
        | Opcode::ShuffleVector
        | Opcode::Select
        | Opcode::Phi => true,
        Opcode::Load => !inst
            .ty()
            .holds_pointer_in(|a| a == DERIVED || a == CALLEE_ROOTED),
        Opcode::Call => inst.as_call().is_some_and(loads_through_first_argument),
        _ => false,
    }
}

/// True if a value of type `ty` holds a Derived, CalleeRooted or Loaded pointer.
fn holds_decayed(ty: locus_llvm::ir::Type<'_>) -> bool {
    ty.holds_pointer_in(|a| a != TRACKED && crate::addrspace::is_gc(a))
}

/// True if the tracked pointer at `leaf` lies under the `extractvalue` indices `path`.
fn leaf_under(leaf: &LeafPath, path: &[u32]) -> bool {
    match leaf {
        LeafPath::Field(p) | LeafPath::FieldElement(p, _) => p.starts_with(path),
        LeafPath::Whole | LeafPath::Element(_) => path.is_empty(),
    }
}

/// True if `inst` only derives a value from its operands, so that using it is using them:
/// casts, GEPs, and picking or building lanes and fields.
fn is_derivation(inst: Instruction<'_>) -> bool {
    matches!(
        inst.opcode(),
        Opcode::GetElementPtr
            | Opcode::BitCast
            | Opcode::AddrSpaceCast
            | Opcode::Freeze
            | Opcode::ExtractElement
            | Opcode::ExtractValue
            | Opcode::InsertElement
            | Opcode::InsertValue
            | Opcode::ShuffleVector
    )
}

/// The name of the phis and selects made over the bases of derived ones (Julia's).
pub(super) const LIFTED: &str = "gclift";

/// True if `v` is a Tracked (10) value, through pointer casts.
fn is_cast_of_tracked(v: Value<'_>) -> bool {
    let mut v = v;
    for _ in 0..64 {
        let ty = v.ty();
        if ty.is_pointer() && ty.address_space() == Some(TRACKED) {
            return true;
        }
        match v.as_instruction() {
            Some(i) if matches!(i.opcode(), Opcode::AddrSpaceCast | Opcode::BitCast) => {
                match i.operand(0) {
                    Some(src) => v = src,
                    None => return false,
                }
            }
            _ => return false,
        }
    }
    false
}

/// True for a pointer, or a vector of pointers, in address space 0.
pub(super) fn is_untracked_pointer(ty: locus_llvm::ir::Type<'_>) -> bool {
    let ty = ty.scalar();
    ty.is_pointer() && ty.address_space() == Some(UNTRACKED)
}

/// Collects the `extractvalue` paths of the decayed (non-Tracked GC) scalar pointers in a
/// struct or array type; false if it holds decayed pointers inside vectors (those are not
/// lifted field by field).
fn decayed_field_paths(
    ty: locus_llvm::ir::Type<'_>,
    prefix: &mut Vec<u32>,
    out: &mut Vec<Vec<u32>>,
) -> bool {
    if ty.is_pointer() {
        let decayed = ty
            .address_space()
            .is_some_and(|a| a != TRACKED && crate::addrspace::is_gc(a));
        if decayed {
            out.push(prefix.clone());
        }
        return true;
    }
    if ty.is_vector() {
        return !holds_decayed(ty);
    }
    let fields: Vec<locus_llvm::ir::Type<'_>> =
        match (ty.struct_fields(), ty.element_type(), ty.array_len()) {
            (Some(f), _, _) => f,
            (None, Some(e), Some(n)) => (0..n.min(1 << 16)).map(|_| e).collect(),
            _ => return true,
        };
    for (i, f) in fields.into_iter().enumerate() {
        prefix.push(i as u32);
        let ok = decayed_field_paths(f, prefix, out);
        prefix.pop();
        if !ok {
            return false;
        }
    }
    true
}

/// The paths of [`decayed_field_paths`], none where it gives up.
pub(super) fn decayed_fields(ty: locus_llvm::ir::Type<'_>) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    if decayed_field_paths(ty, &mut Vec::new(), &mut out) {
        out
    } else {
        Vec::new()
    }
}

/// True for a struct or array holding decayed scalar pointers (none inside vectors).
pub(super) fn is_derived_aggregate(v: Value<'_>) -> bool {
    v.ty().is_aggregate() && !decayed_fields(v.ty()).is_empty()
}

/// True for a vector of pointers in a GC address space other than Tracked.
pub(super) fn is_derived_vector(v: Value<'_>) -> bool {
    let ty = v.ty();
    ty.is_vector() && {
        let e = ty.scalar();
        e.is_pointer()
            && e.address_space()
                .is_some_and(|a| a != TRACKED && crate::addrspace::is_gc(a))
    }
}

pub(super) fn is_derived_pointer(v: Value<'_>) -> bool {
    let ty = v.ty();
    ty.is_pointer()
        && ty
            .address_space()
            .is_some_and(|a| a != TRACKED && a != UNTRACKED && crate::addrspace::is_gc(a))
}

pub(super) struct Scanner<'s, 'm> {
    pub(super) builder: &'s Builder<'m>,
    pub(super) function: Function<'m>,
    pub(super) leaves: Vec<Leaf<'m>>,
    pub(super) leaf_ids: HashMap<Value<'m>, Vec<ValueId>>,
    pub(super) bases: HashMap<Value<'m>, Vec<ValueId>>,
    /// Derived phi or select → the base IR value made for it.
    pub(super) base_of_derived: HashMap<Value<'m>, Value<'m>>,
    /// Phi of a vector of derived pointers → the base phi made for each lane.
    pub(super) lanes_of_derived: HashMap<Value<'m>, Vec<Value<'m>>>,
    /// Phi of a struct or array holding decayed pointers → the base phi made for each such
    /// pointer, by its `extractvalue` path.
    pub(super) fields_of_derived: HashMap<Value<'m>, Vec<(Vec<u32>, Value<'m>)>>,
}

impl<'s, 'm> Scanner<'s, 'm> {
    /// A scanner of `function` with nothing found yet.
    pub(super) fn new(builder: &'s Builder<'m>, function: Function<'m>) -> Scanner<'s, 'm> {
        Scanner {
            builder,
            function,
            leaves: Vec::new(),
            leaf_ids: HashMap::default(),
            bases: HashMap::default(),
            base_of_derived: HashMap::default(),
            lanes_of_derived: HashMap::default(),
            fields_of_derived: HashMap::default(),
        }
    }

    pub(super) fn error(&self, inst: Option<Instruction<'m>>, what: String) -> Error {
        Error::Lower {
            function: self.function.name(),
            instruction: inst.map(|i| i.print().trim().to_string()),
            message: what,
        }
    }

    fn leaves_of(&mut self, v: Value<'m>) -> Vec<ValueId> {
        if let Some(ids) = self.leaf_ids.get(&v) {
            return ids.clone();
        }
        // A CalleeRooted argument is rooted whole, as a tracked pointer.
        let paths = if is_callee_rooted_argument(v) {
            vec![LeafPath::Whole]
        } else {
            tracked_leaves(v.ty())
        };
        let ids: Vec<ValueId> = paths
            .into_iter()
            .map(|path| {
                self.leaves.push(Leaf { value: v, path });
                self.leaves.len() - 1
            })
            .collect();
        self.leaf_ids.insert(v, ids.clone());
        ids
    }

    /// The model values a use of `v` keeps alive.
    fn bases(&mut self, v: Value<'m>, depth: usize) -> Vec<ValueId> {
        if let Some(b) = self.bases.get(&v) {
            return b.clone();
        }
        if depth > 10_000 {
            return Vec::new();
        }
        let result = match v.as_instruction() {
            // A CalleeRooted argument: its caller did not root it, so this function does
            // while it is live across a safepoint (spec: rooted if live across another
            // safepoint between its definition and the call it is passed to).
            None if is_callee_rooted_argument(v) => self.leaves_of(v),
            None => Vec::new(),
            Some(inst) if is_base_def(inst) => {
                let mut out = self.leaves_of(v);
                // A vector or aggregate that also holds Derived (or other decayed) pointers
                // keeps their objects alive too: it was built from them.
                if holds_decayed(v.ty()) {
                    for op in inst.operands() {
                        for b in self.bases(op, depth + 1) {
                            if !out.contains(&b) {
                                out.push(b);
                            }
                        }
                    }
                }
                out
            }
            Some(inst) => match inst.opcode() {
                _ if self.fields_of_derived.contains_key(&v) => {
                    let fields: Vec<Value<'m>> =
                        self.fields_of_derived[&v].iter().map(|(_, b)| *b).collect();
                    let mut out = Vec::new();
                    for field in fields {
                        for b in self.bases(field, depth + 1) {
                            if !out.contains(&b) {
                                out.push(b);
                            }
                        }
                    }
                    out
                }
                _ if self.lanes_of_derived.contains_key(&v) => {
                    let lanes = self.lanes_of_derived[&v].clone();
                    let mut out = Vec::new();
                    for lane in lanes {
                        for b in self.bases(lane, depth + 1) {
                            if !out.contains(&b) {
                                out.push(b);
                            }
                        }
                    }
                    out
                }
                _ if self.base_of_derived.contains_key(&v) => {
                    let b = self.base_of_derived[&v];
                    if b == v {
                        Vec::new()
                    } else {
                        self.bases(b, depth + 1)
                    }
                }
                Opcode::AddrSpaceCast
                | Opcode::BitCast
                | Opcode::Freeze
                | Opcode::GetElementPtr => match inst.operand(0) {
                    Some(src)
                        if src.ty().is_pointer() && src.ty().address_space() == Some(UNTRACKED) =>
                    {
                        Vec::new()
                    }
                    Some(src) => self.bases(src, depth + 1),
                    None => Vec::new(),
                },
                Opcode::ExtractElement => {
                    let Some(vec) = inst.operand(0) else {
                        return Vec::new();
                    };
                    let lane = inst
                        .operand(1)
                        .and_then(|i| i.const_uint())
                        .and_then(|i| self.lanes_of_derived.get(&vec)?.get(i as usize).copied());
                    if let Some(lane) = lane {
                        return self.bases(lane, depth + 1);
                    }
                    let all = self.bases(vec, depth + 1);
                    let index = inst.operand(1).and_then(|i| i.const_uint());
                    match (index, vec.as_instruction().is_some_and(is_base_def)) {
                        (Some(i), true) => all.get(i as usize).map(|&x| vec![x]).unwrap_or(all),
                        _ => all,
                    }
                }
                Opcode::ExtractValue => match inst.operand(0) {
                    // From an aggregate with leaves of its own: the leaves under the path
                    // taken (as Julia numbers them), plus everything the aggregate keeps if
                    // what is taken holds decayed pointers.
                    Some(agg) if agg.as_instruction().is_some_and(is_base_def) => {
                        let path = inst.aggregate_indices().unwrap_or_default();
                        let all = self.leaves_of(agg);
                        let mut out: Vec<ValueId> = tracked_leaves(agg.ty())
                            .iter()
                            .zip(&all)
                            .filter(|(leaf, _)| leaf_under(leaf, &path))
                            .map(|(_, &id)| id)
                            .collect();
                        if holds_decayed(v.ty()) {
                            for b in self.bases(agg, depth + 1) {
                                if !out.contains(&b) {
                                    out.push(b);
                                }
                            }
                        }
                        out
                    }
                    Some(agg) => self.bases(agg, depth + 1),
                    None => Vec::new(),
                },
                // Loaded (13) pointers, one or a vector of them, live off the object they
                // were loaded from.
                Opcode::Load if holds_loaded(v.ty()) => match inst.operand(0) {
                    Some(p) => self.bases(p, depth + 1),
                    None => Vec::new(),
                },
                Opcode::Call => match inst.as_call() {
                    Some(call) if loads_through_first_argument(call) => {
                        match call.arguments().first() {
                            Some(&p) => self.bases(p, depth + 1),
                            None => Vec::new(),
                        }
                    }
                    _ => Vec::new(),
                },
                // Vectors and aggregates of Derived or Loaded pointers, and selects of
                // them: every lane or field may hold any operand's pointers, so a use keeps
                // the bases of all of them.
                Opcode::InsertElement
                | Opcode::ShuffleVector
                | Opcode::InsertValue
                | Opcode::Select => {
                    let mut out = Vec::new();
                    for op in inst.operands() {
                        for b in self.bases(op, depth + 1) {
                            if !out.contains(&b) {
                                out.push(b);
                            }
                        }
                    }
                    out
                }
                _ => Vec::new(),
            },
        };
        self.bases.insert(v, result.clone());
        result
    }

    fn bases_of_all(&mut self, values: &[Value<'m>]) -> Vec<ValueId> {
        let mut out = Vec::new();
        for &v in values {
            for b in self.bases(v, 0) {
                if !out.contains(&b) {
                    out.push(b);
                }
            }
        }
        out
    }
}

/// Scans `f`, inserting the base phis and selects it needs. `None` if `f` does not take
/// part (no `julia.get_pgcstack` call and no `"gcstack"` parameter).
pub fn scan<'m>(builder: &Builder<'m>, f: Function<'m>) -> Result<Option<Scan<'m>>> {
    let Some(pgcstack) = pgcstack(f) else {
        return Ok(None);
    };
    let pgcstack = match pgcstack.as_instruction() {
        Some(call) => hoist_pgcstack(builder, call)?.as_value(),
        None => pgcstack,
    };
    let cfg = Cfg::new(f);
    let mut s = Scanner::new(builder, f);
    s.make_base_phis_and_selects(&cfg)?;
    // The CFG of before: blocks and edges are unchanged, and instructions (the new phis
    // included) are read from the IR, not from the snapshot.
    let mut blocks = Vec::with_capacity(cfg.len());
    let mut safepoints = Vec::new();
    let mut preserves: Vec<(Instruction<'m>, Vec<ValueId>)> = Vec::new();
    let mut refinements = Vec::new();
    let mut phi_refinements = Vec::new();
    let dominators = Dominators::new(&cfg);
    for b in 0..cfg.len() {
        let Some(block) = cfg.block(b) else { continue };
        let mut out = Block {
            succs: cfg.successors(b).to_vec(),
            ..Block::default()
        };
        if b == 0 {
            // The CalleeRooted arguments are defined on entry.
            for p in f
                .params()
                .into_iter()
                .filter(|&p| is_callee_rooted_argument(p))
            {
                for def in s.leaves_of(p) {
                    out.steps.push(Step::Def(def));
                }
            }
        }
        for inst in block.instructions() {
            if inst.opcode() == Opcode::Phi {
                let v = inst.as_value();
                if holds_decayed(inst.ty())
                    && !is_derived_pointer(v)
                    && !is_derived_vector(v)
                    && !is_derived_aggregate(v)
                {
                    return Err(s.error(
                        Some(inst),
                        "a phi of structs or arrays holding vectors of decayed (Derived, CalleeRooted or \
                         Loaded) pointers is not supported yet: its bases cannot be lifted"
                            .into(),
                    ));
                }
                let defs = s.leaves_of_if_base(inst);
                for &def in &defs {
                    let incoming: Vec<(usize, Vec<ValueId>)> = inst
                        .phi_incoming()
                        .into_iter()
                        .filter_map(|(value, from)| Some((cfg.index_of(from)?, s.bases(value, 0))))
                        .collect();
                    // A phi holds one of its incoming values: refined to them, checked
                    // against dominance once every refinement is known (`fix_phis`).
                    if defs.len() == 1 {
                        let chosen: Vec<ValueId> = incoming
                            .iter()
                            .flat_map(|(_, v)| v.iter().copied())
                            .collect();
                        phi_refinements.push((def, inst, chosen));
                    }
                    out.phis.push(Phi { def, incoming });
                }
                continue;
            }
            null_undef_passthrough(builder, inst)?;
            if holds_decayed(inst.ty()) && !derives_known_bases(inst) {
                return Err(s.error(
                    Some(inst),
                    "cannot find the objects this value's decayed (Derived, CalleeRooted or \
                     Loaded) pointers point into: it is not made by a cast, getelementptr, \
                     load of Loaded pointers, phi, select, or vector or aggregate operation"
                        .into(),
                ));
            }
            if inst.opcode() == Opcode::Invoke {
                return Err(s.error(
                    Some(inst),
                    "invoke is not supported yet (unwinding comes later)".into(),
                ));
            }
            if let Some(call) = inst.as_call() {
                let name = call.callee_name().unwrap_or_default();
                if name == POINTER_FROM_OBJREF
                    || name == GET_PGCSTACK
                    || name == GET_PGCSTACK_OR_NEW
                {
                    continue;
                }
                if name == PRESERVE_BEGIN {
                    let kept = s.bases_of_all(&call.arguments());
                    out.steps.push(Step::Use(kept.clone()));
                    preserves.push((inst, kept));
                    continue;
                }
                if name == PRESERVE_END {
                    continue;
                }
                if is_safepoint(call) {
                    let mut operands = Vec::new();
                    let mut callee_rooted = Vec::new();
                    let mut args = call.arguments();
                    if call.callee_name().is_none() {
                        args.push(call.called_value());
                    }
                    for a in args {
                        let ty = a.ty();
                        // Rooted by the callee only when it is a tracked value, cast: a
                        // select or phi of them is rooted here through its lifted base, as
                        // Julia does.
                        if ty.is_pointer()
                            && ty.address_space() == Some(CALLEE_ROOTED)
                            && is_cast_of_tracked(a)
                        {
                            callee_rooted.push(a);
                        } else {
                            operands.push(a);
                        }
                    }
                    for bundle in call.operand_bundles() {
                        operands.extend(bundle.args);
                    }
                    let callee_rooted = s.bases_of_all(&callee_rooted);
                    if !callee_rooted.is_empty() {
                        out.steps.push(Step::Use(callee_rooted.clone()));
                    }
                    let operands = s.bases_of_all(&operands);
                    let defs = s.leaves_of_if_base(inst);
                    out.steps.push(Step::Safepoint(Safepoint {
                        id: safepoints.len(),
                        operands,
                        defs,
                        returns_twice: is_returns_twice(call),
                        callee_rooted,
                    }));
                    safepoints.push(inst);
                    continue;
                }
            }
            let mut used: Vec<Value<'m>> = match inst.as_call() {
                Some(call) => {
                    let mut v = call.arguments();
                    for bundle in call.operand_bundles() {
                        v.extend(bundle.args);
                    }
                    v
                }
                None => inst.operands(),
            };
            used.retain(|v| v.kind() != ValueKind::BasicBlock);
            // An instruction that only derives a pointer (or picks a lane or field) uses
            // nothing by itself: the uses of its result reach the bases, and only the lanes
            // they need (Julia notes no uses there either). One that builds a tracked vector
            // or aggregate (a value of its own) does use what it copies in.
            if is_derivation(inst) && !is_base_def(inst) {
                used.clear();
            }
            let uses = s.bases_of_all(&used);
            if !uses.is_empty() {
                out.steps.push(Step::Use(uses));
            }
            let defs = s.leaves_of_if_base(inst);
            if let Some(to) = s.refined_to(inst) {
                for &def in &defs {
                    refinements.push((def, to.clone()));
                }
            }
            for def in defs {
                out.steps.push(Step::Def(def));
            }
        }
        blocks.push(out);
    }
    add_preserved(&mut blocks, &safepoints, &preserves, &dominators);
    fix_phis(&mut refinements, phi_refinements, &s.leaves, &dominators);
    let model = FnModel {
        num_values: s.leaves.len(),
        num_safepoints: safepoints.len(),
        blocks,
        refinements,
    };
    Ok(Some(Scan {
        model,
        leaves: s.leaves,
        safepoints,
        pgcstack,
        memory: super::memory::find(f),
    }))
}

/// Spec 003: what a `gc_preserve_begin` keeps is rooted "at every safepoint the begin
/// dominates and its end does not"; a path without an end keeps it to the function's end.
fn add_preserved<'m>(
    blocks: &mut [Block],
    safepoints: &[Instruction<'m>],
    preserves: &[(Instruction<'m>, Vec<ValueId>)],
    dominators: &Dominators<'_, 'm>,
) {
    if preserves.is_empty() {
        return;
    }
    let ends: Vec<Vec<Instruction<'m>>> = preserves
        .iter()
        .map(|(begin, _)| {
            begin
                .users()
                .into_iter()
                .filter_map(|u| u.as_instruction())
                .collect()
        })
        .collect();
    for block in blocks {
        for step in &mut block.steps {
            let Step::Safepoint(sp) = step else { continue };
            let Some(&call) = safepoints.get(sp.id) else {
                continue;
            };
            for ((begin, kept), ends) in preserves.iter().zip(&ends) {
                let inside = dominators.dominates_instruction(begin.as_value(), call)
                    && !ends
                        .iter()
                        .any(|&end| dominators.dominates_instruction(end.as_value(), call));
                if inside {
                    for &v in kept {
                        if !sp.operands.contains(&v) {
                            sp.operands.push(v);
                        }
                    }
                }
            }
        }
    }
}

/// LLVM may give a masked load or gather of GC pointers an `undef` pass-through, so that
/// masked-off lanes hold garbage a root could take: as Julia does, they become null.
fn null_undef_passthrough<'m>(b: &Builder<'m>, inst: Instruction<'m>) -> Result<()> {
    let Some(call) = inst.as_call() else {
        return Ok(());
    };
    let name = call.callee_name().unwrap_or_default();
    if !(name.starts_with("llvm.masked.load.") || name.starts_with("llvm.masked.gather.")) {
        return Ok(());
    }
    let element = inst.ty().scalar();
    let gc = element.is_pointer() && element.address_space().is_some_and(crate::addrspace::is_gc);
    match call.arguments().get(3) {
        Some(&pass) if gc && pass.is_undef() => {
            b.set_operand(inst, 3, b.const_null(pass.ty())?)?;
        }
        _ => {}
    }
    Ok(())
}

/// Moves `julia.get_pgcstack` to the top of the entry block when it is in another block or
/// a call that may collect comes before it, so the frame is linked before the first
/// safepoint. (It has no operands, so it can go anywhere.) Returns the call now in use.
fn hoist_pgcstack<'m>(b: &Builder<'m>, pgcstack: Instruction<'m>) -> Result<Instruction<'m>> {
    let Some(entry) = pgcstack.function().and_then(|f| f.entry_block()) else {
        return Ok(pgcstack);
    };
    let late = pgcstack.block() != Some(entry)
        || entry
            .instructions()
            .into_iter()
            .take_while(|&i| i != pgcstack)
            .any(|i| i.as_call().is_some_and(is_safepoint));
    let Some(call) = pgcstack.as_call().filter(|_| late) else {
        return Ok(pgcstack);
    };
    let name = pgcstack.name();
    b.position_at_first_insertion_point(entry)?;
    let hoisted = b.call(call.function_type(), call.called_value(), &[], &[], "")?;
    b.replace_all_uses_with(pgcstack, hoisted)?;
    b.erase(pgcstack)?;
    b.set_name(hoisted, &name)?;
    Ok(hoisted)
}

/// Julia's phi refinements made valid: an incoming value that does not dominate the phi
/// (it comes round a loop, so it may be a newer instance than the one the phi holds) is
/// replaced by what it is refined to, recursively; a phi with an incoming value that cannot
/// be replaced so keeps its root. Incoming values rooted outside the frame drop out.
fn fix_phis<'m>(
    refinements: &mut Vec<(ValueId, Vec<ValueId>)>,
    phis: Vec<(ValueId, Instruction<'m>, Vec<ValueId>)>,
    leaves: &[Leaf<'m>],
    dominators: &Dominators<'_, 'm>,
) {
    let known: HashMap<ValueId, Vec<ValueId>> = refinements.iter().cloned().collect();
    for (def, phi, incoming) in phis {
        let mut out = Vec::new();
        let mut work = incoming;
        let mut seen = vec![def];
        let mut valid = true;
        while let Some(v) = work.pop() {
            if seen.contains(&v) {
                continue;
            }
            seen.push(v);
            let dominates = leaves
                .get(v)
                .is_some_and(|l| dominators.dominates_instruction(l.value, phi));
            if dominates {
                out.push(v);
            } else if let Some(to) = known.get(&v) {
                work.extend(to.iter().copied());
            } else {
                valid = false;
                break;
            }
            if seen.len() > 256 {
                valid = false;
                break;
            }
        }
        if valid {
            refinements.push((def, out));
        }
    }
}

impl<'m> Scanner<'_, 'm> {
    /// What a value defined by `inst` is refined to (see [`FnModel::refinements`]), if
    /// anything: a select to its operands, an immutable load to the object it reads, a load
    /// from a constant global or a type tag to nothing (rooted outside the frame).
    fn refined_to(&mut self, inst: Instruction<'m>) -> Option<Vec<ValueId>> {
        match inst.opcode() {
            Opcode::Select if inst.ty().is_pointer() => {
                let chosen: Vec<Value<'m>> = [inst.operand(1), inst.operand(2)]
                    .into_iter()
                    .flatten()
                    .collect();
                Some(self.bases_of_all(&chosen))
            }
            Opcode::Load => {
                let ptr = inst.operand(0)?;
                let from_object = ptr.ty().is_pointer()
                    && ptr
                        .ty()
                        .address_space()
                        .is_some_and(crate::addrspace::is_gc);
                if from_object && immutable::is_immutable_load(inst) {
                    Some(self.bases(ptr, 0))
                } else if immutable::is_load_from_constant(inst) {
                    Some(Vec::new())
                } else {
                    None
                }
            }
            Opcode::Call => {
                let name = inst.as_call()?.callee_name()?;
                (name == TYPEOF).then(Vec::new)
            }
            _ => None,
        }
    }

    fn leaves_of_if_base(&mut self, inst: Instruction<'m>) -> Vec<ValueId> {
        if is_base_def(inst) {
            self.leaves_of(inst.as_value())
        } else {
            Vec::new()
        }
    }
}
