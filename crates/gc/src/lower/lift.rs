//! Lifting: the base of every derived pointer as an IR value, made where the IR has none.
//!
//! A phi or select of derived pointers (or of vectors or aggregates holding them) has no
//! single base the analysis can name, so one is built next to it: a `%gclift` phi or select
//! over the operands' bases, one per lane of a vector and one per decayed field of an
//! aggregate, as Julia's LateLowerGCFrame lifts them. A lane taken at a variable index gets
//! the same treatment through a select over the lanes. What has no base that can be found
//! is refused with an error naming the instruction.

use locus_llvm::builder::Builder;
use locus_llvm::cfg::Cfg;
use locus_llvm::ir::{Instruction, Opcode, Value};

use super::scan::{
    decayed_fields, is_derived_aggregate, is_derived_pointer, is_derived_vector,
    is_untracked_pointer, Scanner, LIFTED,
};
use crate::addrspace::holds_loaded;
use crate::contract::{GC_LOADED, TRACKED};
use crate::{Error, Result};

impl<'m> Scanner<'_, 'm> {
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
            Opcode::ExtractValue => match (inst.operand(0), inst.aggregate_indices()) {
                (Some(agg), Some(path)) => self.field_base(agg, &path, depth + 1),
                _ => null(),
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

    /// `extractelement %v, %i` of a vector of derived pointers, at a variable index: the
    /// same lane of the tracked vector they derive from, `%gclift = extractelement %base,
    /// %i`, or, where the lanes have different bases, a vector of them built lane by lane.
    pub(super) fn lift_dynamic_lane(&mut self, inst: Instruction<'m>) -> Result<Value<'m>> {
        let (Some(vector), Some(index)) = (inst.operand(0), inst.operand(1)) else {
            return Err(self.unknown_base(inst));
        };
        self.builder.position_before(inst)?;
        let mut base = vector;
        for _ in 0..64 {
            if base.ty().scalar().address_space() == Some(TRACKED) {
                return Ok(self.builder.extract_element(base, index, LIFTED)?);
            }
            match base.as_instruction() {
                Some(i)
                    if matches!(
                        i.opcode(),
                        Opcode::AddrSpaceCast | Opcode::BitCast | Opcode::Freeze
                    ) =>
                {
                    match i.operand(0) {
                        Some(src) if src.ty().is_vector() => base = src,
                        _ => break,
                    }
                }
                _ => break,
            }
        }
        let n = vector.ty().vector_len().unwrap_or(0);
        let tracked = self.builder.ptr_type(TRACKED)?;
        let mut lanes = self.builder.undef(self.builder.vector_type(tracked, n)?)?;
        let i32t = self.builder.int_type(32)?;
        for lane in 0..n {
            let b = self.lane_base(vector, u64::from(lane), 0)?;
            lanes = self.builder.insert_element(
                lanes,
                b,
                self.builder.const_int(i32t, i64::from(lane))?,
                "",
            )?;
        }
        Ok(self.builder.extract_element(lanes, index, LIFTED)?)
    }

    /// The base IR value of the decayed pointer at `extractvalue` path `path` of an
    /// aggregate `v`, as [`Scanner::base_value`] gives it for a scalar.
    fn field_base(&mut self, v: Value<'m>, path: &[u32], depth: usize) -> Result<Value<'m>> {
        let null = || self.builder.null_ptr(TRACKED).map_err(Error::from);
        if depth > 10_000 {
            return Err(self.error(v.as_instruction(), "derivation chain too deep".into()));
        }
        if path.is_empty() {
            return self.base_value(v, depth + 1);
        }
        if let Some(fields) = self.fields_of_derived.get(&v) {
            return match fields.iter().find(|(p, _)| p == path) {
                Some(&(_, b)) => Ok(b),
                None => null(),
            };
        }
        let Some(inst) = v.as_instruction() else {
            return null();
        };
        match inst.opcode() {
            Opcode::InsertValue => {
                let at = inst.aggregate_indices().unwrap_or_default();
                let (Some(agg), Some(elem)) = (inst.operand(0), inst.operand(1)) else {
                    return null();
                };
                if path.starts_with(&at) {
                    self.field_base(elem, &path[at.len()..], depth + 1)
                } else {
                    self.field_base(agg, path, depth + 1)
                }
            }
            Opcode::ExtractValue => {
                let (Some(agg), Some(at)) = (inst.operand(0), inst.aggregate_indices()) else {
                    return null();
                };
                let full: Vec<u32> = at.iter().chain(path).copied().collect();
                self.field_base(agg, &full, depth + 1)
            }
            Opcode::Select => {
                let (Some(c), Some(t), Some(f)) =
                    (inst.operand(0), inst.operand(1), inst.operand(2))
                else {
                    return null();
                };
                let (bt, bf) = (
                    self.field_base(t, path, depth + 1)?,
                    self.field_base(f, path, depth + 1)?,
                );
                if bt == bf {
                    Ok(bt)
                } else {
                    Ok(self.builder.select(c, bt, bf, LIFTED)?)
                }
            }
            Opcode::Freeze => match inst.operand(0) {
                Some(src) => self.field_base(src, path, depth + 1),
                None => null(),
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
                Ok(self.builder.select(c, bt, bf, LIFTED)?)
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
    /// for a vector, as Julia's `gclift`s); then the selects, one per lane for a vector (in
    /// reverse post-order, so a select's operands have their bases already); then the
    /// phis' incoming bases, made at the end of each incoming block.
    pub(super) fn make_base_phis_and_selects(&mut self, cfg: &Cfg<'m>) -> Result<()> {
        let mut phis = Vec::new();
        let tracked = self.builder.ptr_type(TRACKED)?;
        for &b in cfg.reverse_post_order() {
            let Some(block) = cfg.block(b) else { continue };
            for phi in block.phis() {
                let v = phi.as_value();
                if is_derived_pointer(v) {
                    self.builder.position_at_start(block)?;
                    let base = self.builder.phi(tracked, LIFTED)?;
                    self.base_of_derived.insert(v, base.as_value());
                    phis.push((phi, vec![base]));
                } else if is_derived_aggregate(v) {
                    let paths = decayed_fields(v.ty());
                    self.builder.position_at_start(block)?;
                    let mut fields = Vec::with_capacity(paths.len());
                    let mut lifted = Vec::with_capacity(paths.len());
                    for path in paths {
                        let base = self.builder.phi(tracked, LIFTED)?;
                        lifted.push(base);
                        fields.push((path, base.as_value()));
                    }
                    self.fields_of_derived.insert(v, fields);
                    phis.push((phi, lifted));
                } else if is_derived_vector(v) {
                    let n = v.ty().vector_len().unwrap_or(0);
                    let mut lanes = Vec::with_capacity(n as usize);
                    self.builder.position_at_start(block)?;
                    for _ in 0..n {
                        lanes.push(self.builder.phi(tracked, LIFTED)?);
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
                if inst.opcode() == Opcode::ExtractElement
                    && is_derived_pointer(inst.as_value())
                    && inst.operand(1).is_some_and(|i| i.const_uint().is_none())
                {
                    let lifted = self.lift_dynamic_lane(inst)?;
                    self.base_of_derived.insert(inst.as_value(), lifted);
                    continue;
                }
                if inst.opcode() == Opcode::Select && is_derived_vector(inst.as_value()) {
                    self.builder.position_before(inst)?;
                    let n = inst.ty().vector_len().unwrap_or(0);
                    let mut lanes = Vec::with_capacity(n as usize);
                    for lane in 0..n {
                        lanes.push(self.lane_base(inst.as_value(), u64::from(lane), 0)?);
                    }
                    self.lanes_of_derived.insert(inst.as_value(), lanes);
                    continue;
                }
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
                        self.builder.select(c, bt, bf, LIFTED)?
                    };
                    self.base_of_derived.insert(inst.as_value(), base);
                }
            }
        }
        for (phi, lanes) in phis {
            let vector = phi.ty().is_vector();
            let fields: Option<Vec<Vec<u32>>> = self
                .fields_of_derived
                .get(&phi.as_value())
                .map(|f| f.iter().map(|(path, _)| path.clone()).collect());
            for (value, from) in phi.phi_incoming() {
                match from.terminator() {
                    Some(t) => self.builder.position_before(t)?,
                    None => self.builder.position_at_end(from)?,
                }
                for (i, &lane) in lanes.iter().enumerate() {
                    let b = match &fields {
                        Some(paths) => self.field_base(value, &paths[i], 0)?,
                        None if vector => self.lane_base(value, i as u64, 0)?,
                        None => self.base_value(value, 0)?,
                    };
                    self.builder.add_incoming(lane, b, from)?;
                }
            }
        }
        Ok(())
    }
}
