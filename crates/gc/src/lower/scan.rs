//! From a function's IR to the [`FnModel`] the analyses work on.
//!
//! Spec 003, "Размещение корней сборки мусора": the pass must find (a) the GC-tracked
//! pointers and (b) every use of them, including uses through derived pointers, whose base
//! it must find and root. Here:
//!
//! - a *base* is an SSA value whose type holds tracked (address space 10) pointers and that
//!   brings new references into the function: a call result, a load, a phi or select of
//!   tracked values, a vector or aggregate built with insertelement/insertvalue. Each tracked
//!   pointer inside it (each vector element, each tracked struct field) is one model value;
//! - a *derived* value reaches its base through addrspacecast, getelementptr, bitcast,
//!   freeze, extractelement and extractvalue; a load of a Loaded (13) pointer derives from
//!   the object it was loaded from. A phi or select of derived pointers gets a parallel phi
//!   or select over their bases, inserted into the IR here, which is then a base itself;
//! - arguments (the caller roots them), constants and casts from address space 0 (spec:
//!   the frontend takes responsibility for those) need no root;
//! - a safepoint is a call that may collect: anything but intrinsics, the `julia.*`
//!   helpers and calls that only read memory. Its tracked and derived arguments, its
//!   `jl_roots` bundle operands and `julia.call`'s arguments stay rooted during the call;
//!   CalleeRooted (12) arguments do not;
//! - `llvm.julia.gc_preserve_begin`'s operands are used again at each matching
//!   `gc_preserve_end`, which keeps them live, hence rooted, at every safepoint between;
//! - `julia.pointer_from_objref` is not a use.

use std::collections::HashMap as StdHashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// An Fx-style hasher for the pointer-keyed maps (SipHash is most of their cost).
#[derive(Default)]
struct PtrHasher(u64);

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

type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<PtrHasher>>;

use locus_llvm::builder::Builder;
use locus_llvm::cfg::{Cfg, Dominators};
use locus_llvm::ir::{AttributeIndex, Call, Function, Instruction, Opcode, Value, ValueKind};

use super::model::{Block, FnModel, Phi, Safepoint, Step, ValueId};
use crate::addrspace::{holds_loaded, tracked_leaves, LeafPath, CALLEE_ROOTED, TRACKED, UNTRACKED};
use crate::{Error, Result};

/// Julia's name for the call that marks a function as taking part.
pub const GET_PGCSTACK: &str = "julia.get_pgcstack";
/// Julia's raw-pointer escape hatch.
pub const POINTER_FROM_OBJREF: &str = "julia.pointer_from_objref";
/// The jlcall convention's marker call.
pub const JULIA_CALL: &str = "julia.call";
/// Keeps values alive from here to the matching end.
pub const PRESERVE_BEGIN: &str = "llvm.julia.gc_preserve_begin";
/// Ends a preserve region.
pub const PRESERVE_END: &str = "llvm.julia.gc_preserve_end";
/// `julia.gc_loaded(obj, ptr)`: `ptr`, loaded from `obj`, lives as long as `obj`.
pub const GC_LOADED: &str = "julia.gc_loaded";
/// The bundle that roots extra values during a call.
pub const JL_ROOTS: &str = "jl_roots";

/// Calls that never collect, by name.
const NOT_SAFEPOINTS: &[&str] = &[
    GET_PGCSTACK,
    GC_LOADED,
    "julia.typeof",
    "julia.write_barrier",
    "julia.object_write_barrier",
    "julia.pop_handler_noexcept",
    "jl_egal__unboxed",
    "jl_lock_value",
    "jl_unlock_value",
    "jl_lock_field",
    "jl_unlock_field",
    "memcmp",
    POINTER_FROM_OBJREF,
    PRESERVE_BEGIN,
    PRESERVE_END,
    "julia.new_gc_frame",
    "julia.push_gc_frame",
    "julia.pop_gc_frame",
    "julia.get_gc_frame_slot",
    "locus_gc_get_pgcstack",
];

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
    /// The `julia.get_pgcstack` call in the entry block.
    pub pgcstack: Instruction<'m>,
    /// Tracked pointers the function keeps in its own `alloca`s.
    pub memory: super::memory::FrameMemory<'m>,
}

/// True if `f` takes part in GC lowering: its entry block calls `julia.get_pgcstack`.
pub fn pgcstack_call<'m>(f: Function<'m>) -> Option<Instruction<'m>> {
    let entry = f.entry_block()?;
    entry
        .instructions()
        .into_iter()
        .find(|i| i.as_call().and_then(|c| c.callee_name()).as_deref() == Some(GET_PGCSTACK))
}

/// True if `call` may collect.
pub fn is_safepoint(call: Call<'_>) -> bool {
    match call.callee_name() {
        Some(name) => {
            if NOT_SAFEPOINTS.contains(&name.as_str())
                || call.is_intrinsic()
                || name.starts_with("llvm.")
            {
                return false;
            }
            if name == JULIA_CALL {
                return true;
            }
            if let Some(f) = call.called_function() {
                if f.memory_effects().only_reads_memory() {
                    return false;
                }
            }
            !call.memory_effects().only_reads_memory()
        }
        // Indirect calls may go anywhere.
        None => !call.memory_effects().only_reads_memory(),
    }
}

/// True if `call` is `returns_twice` (at the call site or on its callee).
pub fn is_returns_twice(call: Call<'_>) -> bool {
    call.has_fn_attribute("returns_twice")
        || call
            .called_function()
            .is_some_and(|f| f.has_attribute(AttributeIndex::Function, "returns_twice"))
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

/// True for a pointer, or a vector of pointers, in address space 0.
fn is_untracked_pointer(ty: locus_llvm::ir::Type<'_>) -> bool {
    let ty = ty.scalar();
    ty.is_pointer() && ty.address_space() == Some(UNTRACKED)
}

/// True for a vector of pointers in a GC address space other than Tracked.
fn is_derived_vector(v: Value<'_>) -> bool {
    let ty = v.ty();
    ty.is_vector() && {
        let e = ty.scalar();
        e.is_pointer()
            && e.address_space()
                .is_some_and(|a| a != TRACKED && crate::addrspace::is_gc(a))
    }
}

fn is_derived_pointer(v: Value<'_>) -> bool {
    let ty = v.ty();
    ty.is_pointer()
        && ty
            .address_space()
            .is_some_and(|a| a != TRACKED && a != UNTRACKED && crate::addrspace::is_gc(a))
}

struct Scanner<'s, 'm> {
    builder: &'s Builder<'m>,
    function: Function<'m>,
    leaves: Vec<Leaf<'m>>,
    leaf_ids: HashMap<Value<'m>, Vec<ValueId>>,
    bases: HashMap<Value<'m>, Vec<ValueId>>,
    /// Derived phi or select → the base IR value made for it.
    base_of_derived: HashMap<Value<'m>, Value<'m>>,
    /// Phi of a vector of derived pointers → the base phi made for each lane.
    lanes_of_derived: HashMap<Value<'m>, Vec<Value<'m>>>,
}

impl<'s, 'm> Scanner<'s, 'm> {
    fn error(&self, inst: Option<Instruction<'m>>, what: String) -> Error {
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
        let ids: Vec<ValueId> = tracked_leaves(v.ty())
            .into_iter()
            .map(|path| {
                self.leaves.push(Leaf { value: v, path });
                self.leaves.len() - 1
            })
            .collect();
        self.leaf_ids.insert(v, ids.clone());
        ids
    }

    /// The base IR value (type `ptr addrspace(10)`) of a scalar pointer `v` in a GC address
    /// space, for building base phis and selects: null where nothing needs rooting
    /// (constants, arguments, casts from untracked memory). Instructions it needs
    /// (`extractelement`s of lanes) go where the builder is.
    fn base_value(&mut self, v: Value<'m>, depth: usize) -> Result<Value<'m>> {
        let null = || self.builder.null_ptr(TRACKED).map_err(Error::from);
        if depth > 10_000 {
            return Err(self.error(v.as_instruction(), "derivation chain too deep".into()));
        }
        if let Some(b) = self.base_of_derived.get(&v) {
            return Ok(*b);
        }
        let ty = v.ty();
        if ty.is_pointer() && ty.address_space() == Some(TRACKED) {
            return Ok(v);
        }
        let Some(inst) = v.as_instruction() else {
            return null();
        };
        match inst.opcode() {
            Opcode::AddrSpaceCast | Opcode::BitCast | Opcode::Freeze | Opcode::GetElementPtr => {
                match inst.operand(0) {
                    Some(src) if !is_untracked_pointer(src.ty()) => self.base_value(src, depth + 1),
                    _ => null(),
                }
            }
            Opcode::Load if holds_loaded(ty) => match inst.operand(0) {
                Some(p) => self.base_value(p, depth + 1),
                None => null(),
            },
            Opcode::ExtractElement => {
                let (Some(vector), Some(lane)) = (
                    inst.operand(0),
                    inst.operand(1).and_then(|i| i.const_uint()),
                ) else {
                    return Err(self.error(
                        Some(inst),
                        "a derived pointer taken from a vector at a variable index is not \
                         supported yet (its base object cannot be chosen)"
                            .into(),
                    ));
                };
                self.lane_base(vector, lane, depth + 1)
            }
            Opcode::Call => match inst.as_call() {
                Some(call) if call.callee_name().as_deref() == Some(GC_LOADED) => {
                    match call.arguments().first() {
                        Some(&obj) => self.base_value(obj, depth + 1),
                        None => null(),
                    }
                }
                _ => Err(self.unknown_base(inst)),
            },
            _ => Err(self.unknown_base(inst)),
        }
    }

    fn unknown_base(&self, inst: Instruction<'m>) -> Error {
        self.error(
            Some(inst),
            "cannot find the object this derived pointer points into (it is not made by a \
             cast, getelementptr, load of a Loaded pointer, phi, select or vector operation \
             from a tracked pointer)"
                .into(),
        )
    }

    /// The base IR value of lane `lane` of a vector `v` of pointers in a GC address space,
    /// as [`Scanner::base_value`] gives it for a scalar.
    fn lane_base(&mut self, v: Value<'m>, lane: u64, depth: usize) -> Result<Value<'m>> {
        let null = || self.builder.null_ptr(TRACKED).map_err(Error::from);
        if depth > 10_000 {
            return Err(self.error(v.as_instruction(), "derivation chain too deep".into()));
        }
        if let Some(lanes) = self.lanes_of_derived.get(&v) {
            return match usize::try_from(lane).ok().and_then(|l| lanes.get(l)) {
                Some(&b) => Ok(b),
                None => null(),
            };
        }
        let ty = v.ty();
        if !ty.is_vector() {
            return self.base_value(v, depth + 1);
        }
        let Some(inst) = v.as_instruction() else {
            return null();
        };
        let i32t = self.builder.int_type(32)?;
        let index = |b: &Builder<'m>| b.const_int(i32t, lane as i64).map_err(Error::from);
        if ty.scalar().address_space() == Some(TRACKED) {
            return Ok(self.builder.extract_element(v, index(self.builder)?, "")?);
        }
        let op = |i: u32| inst.operand(i);
        match inst.opcode() {
            Opcode::InsertElement => match (op(0), op(1), op(2).and_then(|i| i.const_uint())) {
                (_, Some(elem), Some(k)) if k == lane => self.base_value(elem, depth + 1),
                (Some(rest), _, Some(_)) => self.lane_base(rest, lane, depth + 1),
                _ => Err(self.error(
                    Some(inst),
                    "a derived pointer put into a vector at a variable index is not supported \
                     yet (its base object cannot be chosen)"
                        .into(),
                )),
            },
            Opcode::ShuffleVector => {
                let mask = inst.shuffle_mask().unwrap_or_default();
                let first_len = op(0).and_then(|a| a.ty().vector_len()).map_or(0, u64::from);
                match mask.get(lane as usize).copied().flatten().map(u64::from) {
                    None => null(),
                    Some(m) if m < first_len => match op(0) {
                        Some(a) => self.lane_base(a, m, depth + 1),
                        None => null(),
                    },
                    Some(m) => match op(1) {
                        Some(b) => self.lane_base(b, m - first_len, depth + 1),
                        None => null(),
                    },
                }
            }
            Opcode::AddrSpaceCast | Opcode::BitCast | Opcode::Freeze | Opcode::GetElementPtr => {
                match op(0) {
                    Some(src) if is_untracked_pointer(src.ty()) => null(),
                    Some(src) => self.lane_base(src, lane, depth + 1),
                    None => null(),
                }
            }
            Opcode::Load if holds_loaded(ty) => match op(0) {
                Some(p) => self.base_value(p, depth + 1),
                None => null(),
            },
            Opcode::Select => {
                let (Some(c), Some(t), Some(f)) = (op(0), op(1), op(2)) else {
                    return null();
                };
                let (bt, bf) = (
                    self.lane_base(t, lane, depth + 1)?,
                    self.lane_base(f, lane, depth + 1)?,
                );
                if bt == bf {
                    return Ok(bt);
                }
                let c = if c.ty().is_vector() {
                    self.builder.extract_element(c, index(self.builder)?, "")?
                } else {
                    c
                };
                Ok(self.builder.select(c, bt, bf, "gclift")?)
            }
            Opcode::Call => {
                let call = inst.as_call();
                let name = call.and_then(|c| c.callee_name()).unwrap_or_default();
                let first = call.and_then(|c| c.arguments().first().copied());
                match first {
                    Some(p) if name.starts_with("llvm.masked.gather.") => {
                        self.lane_base(p, lane, depth + 1)
                    }
                    Some(p) if name.starts_with("llvm.masked.load.") => {
                        self.base_value(p, depth + 1)
                    }
                    Some(p) if name.starts_with("llvm.vector.extract.") => {
                        let start = call
                            .and_then(|c| c.arguments().get(1).copied())
                            .and_then(|i| i.const_uint())
                            .unwrap_or(0);
                        self.lane_base(p, start + lane, depth + 1)
                    }
                    _ => Err(self.unknown_base(inst)),
                }
            }
            _ => Err(self.unknown_base(inst)),
        }
    }

    /// Makes the parallel base phis and selects for the phis and selects of derived
    /// pointers: the phis first and empty, so that loops can refer to them (one per lane
    /// for a vector, as Julia's `gclift`s); then the selects (in reverse post-order, so a
    /// select's operands have their bases already); then the phis' incoming bases, made
    /// at the end of each incoming block.
    fn make_base_phis_and_selects(&mut self, cfg: &Cfg<'m>) -> Result<()> {
        let mut phis = Vec::new();
        let tracked = self.builder.ptr_type(TRACKED)?;
        for &b in cfg.reverse_post_order() {
            let Some(block) = cfg.block(b) else { continue };
            for phi in block.phis() {
                let v = phi.as_value();
                if is_derived_pointer(v) {
                    self.builder.position_at_start(block)?;
                    let base = self.builder.phi(tracked, &format!("{}.base", phi.name()))?;
                    self.base_of_derived.insert(v, base.as_value());
                    phis.push((phi, vec![base]));
                } else if is_derived_vector(v) {
                    let n = v.ty().vector_len().unwrap_or(0);
                    let mut lanes = Vec::with_capacity(n as usize);
                    self.builder.position_at_start(block)?;
                    for i in 0..n {
                        lanes.push(
                            self.builder
                                .phi(tracked, &format!("{}.base{i}", phi.name()))?,
                        );
                    }
                    self.lanes_of_derived
                        .insert(v, lanes.iter().map(|l| l.as_value()).collect());
                    phis.push((phi, lanes));
                }
            }
        }
        for &b in cfg.reverse_post_order() {
            let Some(block) = cfg.block(b) else { continue };
            for inst in block.instructions() {
                if inst.opcode() == Opcode::Select && is_derived_pointer(inst.as_value()) {
                    let (Some(c), Some(t), Some(f)) =
                        (inst.operand(0), inst.operand(1), inst.operand(2))
                    else {
                        continue;
                    };
                    self.builder.position_before(inst)?;
                    let (bt, bf) = (self.base_value(t, 0)?, self.base_value(f, 0)?);
                    let base = if bt == bf {
                        bt
                    } else {
                        self.builder
                            .select(c, bt, bf, &format!("{}.base", inst.name()))?
                    };
                    self.base_of_derived.insert(inst.as_value(), base);
                }
            }
        }
        for (phi, lanes) in phis {
            let vector = lanes.len() > 1 || phi.ty().is_vector();
            for (value, from) in phi.phi_incoming() {
                match from.terminator() {
                    Some(t) => self.builder.position_before(t)?,
                    None => self.builder.position_at_end(from)?,
                }
                for (i, &lane) in lanes.iter().enumerate() {
                    let b = if vector {
                        self.lane_base(value, i as u64, 0)?
                    } else {
                        self.base_value(value, 0)?
                    };
                    self.builder.add_incoming(lane, b, from)?;
                }
            }
        }
        Ok(())
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
            None => Vec::new(),
            Some(inst) if is_base_def(inst) => self.leaves_of(v),
            Some(inst) => match inst.opcode() {
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
                    let all = self.bases(vec, depth + 1);
                    let index = inst.operand(1).and_then(|i| i.const_uint());
                    match (index, vec.as_instruction().is_some_and(is_base_def)) {
                        (Some(i), true) => all.get(i as usize).map(|&x| vec![x]).unwrap_or(all),
                        _ => all,
                    }
                }
                Opcode::ExtractValue => match inst.operand(0) {
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
/// part (no `julia.get_pgcstack` call in its entry block).
pub fn scan<'m>(builder: &Builder<'m>, f: Function<'m>) -> Result<Option<Scan<'m>>> {
    let Some(pgcstack) = pgcstack_call(f) else {
        return Ok(None);
    };
    let pgcstack = hoist_pgcstack(builder, pgcstack)?;
    let cfg = Cfg::new(f);
    let mut s = Scanner {
        builder,
        function: f,
        leaves: Vec::new(),
        leaf_ids: HashMap::default(),
        bases: HashMap::default(),
        base_of_derived: HashMap::default(),
        lanes_of_derived: HashMap::default(),
    };
    s.make_base_phis_and_selects(&cfg)?;
    // The CFG of before: blocks and edges are unchanged, and instructions (the new phis
    // included) are read from the IR, not from the snapshot.
    let mut blocks = Vec::with_capacity(cfg.len());
    let mut safepoints = Vec::new();
    let mut preserves: Vec<(Instruction<'m>, Vec<ValueId>)> = Vec::new();
    let mut choices = Vec::new();
    let dominators = Dominators::new(&cfg);
    for b in 0..cfg.len() {
        let Some(block) = cfg.block(b) else { continue };
        let mut out = Block {
            succs: cfg.successors(b).to_vec(),
            ..Block::default()
        };
        for inst in block.instructions() {
            if inst.opcode() == Opcode::Phi {
                let defs = s.leaves_of_if_base(inst);
                for &def in &defs {
                    let incoming: Vec<(usize, Vec<ValueId>)> = inst
                        .phi_incoming()
                        .into_iter()
                        .filter_map(|(value, from)| Some((cfg.index_of(from)?, s.bases(value, 0))))
                        .collect();
                    // A phi whose incoming values are all defined above it (not carried
                    // around a loop) holds the same instance of one of them for as long as
                    // it lives, so it can lean on their roots.
                    if defs.len() == 1 {
                        let chosen: Vec<ValueId> = incoming
                            .iter()
                            .flat_map(|(_, v)| v.iter().copied())
                            .collect();
                        let above = chosen.iter().all(|&v| {
                            s.leaves
                                .get(v)
                                .and_then(|l| l.value.as_instruction())
                                .and_then(|i| i.block())
                                .and_then(|bl| cfg.index_of(bl))
                                .is_some_and(|d| dominators.strictly_dominates(d, b))
                        });
                        if above {
                            choices.push((def, chosen));
                        }
                    }
                    out.phis.push(Phi { def, incoming });
                }
                continue;
            }
            if inst.opcode() == Opcode::Invoke {
                return Err(s.error(
                    Some(inst),
                    "invoke is not supported yet (unwinding comes later)".into(),
                ));
            }
            if let Some(call) = inst.as_call() {
                let name = call.callee_name().unwrap_or_default();
                if name == POINTER_FROM_OBJREF || name == GET_PGCSTACK {
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
                        if ty.is_pointer() && ty.address_space() == Some(CALLEE_ROOTED) {
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
                        out.steps.push(Step::Use(callee_rooted));
                    }
                    let operands = s.bases_of_all(&operands);
                    let defs = s.leaves_of_if_base(inst);
                    out.steps.push(Step::Safepoint(Safepoint {
                        id: safepoints.len(),
                        operands,
                        defs,
                        returns_twice: is_returns_twice(call),
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
            let uses = s.bases_of_all(&used);
            if !uses.is_empty() {
                out.steps.push(Step::Use(uses));
            }
            let defs = s.leaves_of_if_base(inst);
            if let ([def], Opcode::Select) = (defs.as_slice(), inst.opcode()) {
                let chosen: Vec<Value<'m>> = [inst.operand(1), inst.operand(2)]
                    .into_iter()
                    .flatten()
                    .collect();
                choices.push((*def, s.bases_of_all(&chosen)));
            }
            for def in defs {
                out.steps.push(Step::Def(def));
            }
        }
        blocks.push(out);
    }
    add_preserved(&mut blocks, &safepoints, &preserves, &dominators);
    let model = FnModel {
        num_values: s.leaves.len(),
        num_safepoints: safepoints.len(),
        blocks,
        choices,
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

/// Moves `julia.get_pgcstack` to the top of the entry block when a call that may collect
/// comes before it, so the frame is linked before the first safepoint. (It has no operands,
/// so it can go anywhere.) Returns the call now in use.
fn hoist_pgcstack<'m>(b: &Builder<'m>, pgcstack: Instruction<'m>) -> Result<Instruction<'m>> {
    let Some(entry) = pgcstack.block() else {
        return Ok(pgcstack);
    };
    let late = entry
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

impl<'m> Scanner<'_, 'm> {
    fn leaves_of_if_base(&mut self, inst: Instruction<'m>) -> Vec<ValueId> {
        if is_base_def(inst) {
            self.leaves_of(inst.as_value())
        } else {
            Vec::new()
        }
    }
}
