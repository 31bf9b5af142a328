//! The operations: one [`Op`] executed (`step`), and the helpers of the
//! operations that need more than a line.

use super::*;

impl<'a> Evaluation<'a> {
    pub(super) fn binary(&mut self, op: BinaryOp) -> Result<(), ErrorKind> {
        self.need(2)?;
        let b = self.pop_value()?;
        let a = self.pop_value()?;
        if let Some(r) = generic_binary(op, a, b, self.address_size) {
            self.push_value(r);
            return Ok(());
        }
        let r = a
            .binary(op, b, self.address_size)
            .map_err(Self::value_err)?;
        self.push_value(r);
        Ok(())
    }

    pub(super) fn compare(&mut self, op: CompareOp) -> Result<(), ErrorKind> {
        self.need(2)?;
        let b = self.pop_value()?;
        let a = self.pop_value()?;
        let r = a
            .compare(op, b, self.address_size)
            .map_err(Self::value_err)?;
        self.push_value(Value::generic(u64::from(r), self.address_size));
        Ok(())
    }

    pub(super) fn unary(&mut self, op: UnaryOp) -> Result<(), ErrorKind> {
        let a = self.pop_value()?;
        let r = a.unary(op, self.address_size).map_err(Self::value_err)?;
        self.push_value(r);
        Ok(())
    }

    pub(super) fn branch(&mut self, displacement: i16) -> Result<(), ErrorKind> {
        let offsets: &[usize] = match &self.callee {
            Some(code) => &code.offsets,
            None => {
                if let RootOffsets::Unchecked(o) = self.root_offsets {
                    self.root_offsets = match check_offsets(self.ops, o) {
                        Ok(()) => RootOffsets::Borrowed(o),
                        Err(_) => RootOffsets::Unknown,
                    };
                }
                if matches!(self.root_offsets, RootOffsets::Unknown) {
                    self.root_offsets = RootOffsets::Computed(match self.bytes {
                        Some(bytes) => Some(byte_offsets(bytes, self.encoding)),
                        None => op_offsets(self.ops, self.encoding),
                    });
                }
                match &self.root_offsets {
                    RootOffsets::Computed(Some(o)) => o,
                    RootOffsets::Borrowed(o) => o,
                    _ => {
                        return Err(ErrorKind::Unsupported(
                            "branch in an expression that cannot be encoded",
                        ))
                    }
                }
            }
        };
        let next = offsets.get(self.pc + 1).copied().unwrap_or(0) as i64;
        let target = next + i64::from(displacement);
        let idx = usize::try_from(target)
            .ok()
            .and_then(|t| offsets.binary_search(&t).ok())
            .ok_or(ErrorKind::BadBranchTarget(target))?;
        let byte = offsets.get(idx).copied();
        if self.callee.is_none() {
            self.byte_pc = byte.unwrap_or(usize::MAX);
        }
        self.pc = idx;
        Ok(())
    }

    /// An offset operand as a signed number of units.
    pub(super) fn amount(&self, v: Value) -> i128 {
        match v.ty {
            ValueType::Unsigned(_) => i128::from(v.bits),
            _ => i128::from(v.to_i64(self.address_size)),
        }
    }

    pub(super) fn offset(&mut self, bits: i128) -> Result<(), ErrorKind> {
        let mut l = self.pop_location()?;
        l.offset_bits(bits, self.address_size)
            .map_err(|_| ErrorKind::OffsetOutOfRange)?;
        self.check_register_offsets(&l)?;
        self.push_loc(l);
        Ok(())
    }

    pub(super) fn piece(&mut self, bit_size: u64, bit_offset: u64) -> Result<(), ErrorKind> {
        // Not traced: a traced evaluation is the shortcuts' reference.
        if bit_offset == 0 && !self.trace && self.compact_piece(bit_size) {
            return Ok(());
        }
        let mut loc = match self.stack.as_slice() {
            // DWARF 5's empty piece: undefined (LLVM's rule; the draft's for
            // a lone composite DW_OP_composite began).
            [] | [.., Slot::Incomplete(..)] | [Slot::Open(..)] => LocationDescription::undefined(),
            _ => self.pop_location()?,
        };
        if bit_offset != 0 {
            loc.offset_bits(i128::from(bit_offset), self.address_size)
                .map_err(|_| ErrorKind::OffsetOutOfRange)?;
            self.check_register_offsets(&loc)?;
        }
        self.check_part(&loc, bit_size)?;
        let (mut parts, weight, large, open) = match self.stack.last() {
            Some(Slot::Incomplete(..) | Slot::Open(..)) => match self.stack.pop() {
                Some(Slot::Incomplete(p, w, l)) => (p, w, l, false),
                Some(Slot::Open(p, w, l)) => (p, w, l, true),
                _ => (Vec::new(), 0, false, false),
            },
            // A new composite: in the vector a previous one left (`restart`).
            _ => (core::mem::take(&mut self.parts), 0, false, false),
        };
        let weight = (weight as usize).saturating_add(1 + loc.weight());
        if weight > MAX_LOCATION_WEIGHT {
            return Err(ErrorKind::TooLarge("composite with too many parts"));
        }
        parts.push(Part {
            location: loc,
            bit_size,
        });
        // At most MAX_LOCATION_WEIGHT parts of at most 1/MAX_LOCATION_WEIGHT
        // of an address space fit in one: the parts are summed only once a
        // larger one is in.
        let large = large
            || u128::from(bit_size) > address_space_bits(self.address_size) >> LARGE_PART_SHIFT;
        if large {
            let bits = parts
                .iter()
                .map(|p| u128::from(p.bit_size))
                .fold(0, u128::saturating_add);
            self.check_composite_bits(bits)?;
        }
        // At most MAX_LOCATION_WEIGHT, so it fits.
        let weight = weight as u32;
        self.stack.push(if open {
            Slot::Open(parts, weight, large)
        } else {
            Slot::Incomplete(parts, weight, large)
        });
        Ok(())
    }

    /// `piece` of the commonest case, a register or a short implicit value
    /// on top of an incomplete composite (or of no composite), whose checks
    /// pass: the part is built from the compact slot where it lies and the
    /// composite below is extended in place (popping the composite's slot
    /// and pushing it back, and the general checks, were most of a piece's
    /// cost). `false` (nothing done) where `piece` may report an error or
    /// do more: registers of known size, an oversized part or composite,
    /// an open composite below.
    #[inline(always)]
    fn compact_piece(&mut self, bit_size: u64) -> bool {
        let n = self.stack.len();
        let location = match self.stack.last() {
            Some(&Slot::Register {
                register,
                bit_offset,
            }) if self.register_sizes().is_empty() => {
                LocationDescription::single(Storage::Register(register), u128::from(bit_offset))
            }
            Some(&Slot::Implicit { len, bytes }) if bit_size <= u64::from(len) * 8 => {
                LocationDescription::single(Storage::Implicit(Bytes::from_le(bytes, len)), 0)
            }
            _ => return false,
        };
        if u128::from(bit_size) > address_space_bits(self.address_size) >> LARGE_PART_SHIFT {
            return false;
        }
        let part = Part { location, bit_size };
        match n.checked_sub(2).and_then(|i| self.stack.get(i)) {
            Some(Slot::Incomplete(_, weight, false)) => {
                // The part and its one place.
                let weight = *weight as usize + 2;
                if weight > MAX_LOCATION_WEIGHT {
                    return false;
                }
                // The compact slot owns nothing (see `pop_value`).
                core::mem::forget(self.stack.pop());
                if let Some(Slot::Incomplete(parts, w, _)) = self.stack.last_mut() {
                    parts.push(part);
                    *w = weight as u32;
                }
            }
            Some(Slot::Incomplete(..) | Slot::Open(..)) => return false,
            _ => {
                // A new composite, in the vector a previous one left.
                let mut parts = core::mem::take(&mut self.parts);
                parts.push(part);
                if let Some(top) = self.stack.last_mut() {
                    // The compact slot owns nothing: no drop code.
                    core::mem::forget(core::mem::replace(top, Slot::Incomplete(parts, 2, false)));
                }
            }
        }
        true
    }

    /// Starts a read of `size` bytes of type `ty` through `loc` (its first
    /// place: all places hold the same bits).
    pub(super) fn start_read(
        &mut self,
        loc: &LocationDescription,
        size: u8,
        ty: ValueType,
    ) -> Step {
        let Some(place) = loc.places.first() else {
            return Err(ErrorKind::UndefinedRead.into());
        };
        if matches!(place.storage, Storage::ImplicitPointer { .. }) {
            return Err(
                ErrorKind::Unsupported("dereferencing an implicit pointer location").into(),
            );
        }
        // Bits past the end of any place's storage are an evaluation error
        // now, not undefined bits (registers of unknown size: when answered).
        let len = u128::from(size) * 8;
        for p in loc.places.iter() {
            if let Some(bits) = self.storage_bits(&p.storage) {
                if p.bit_offset.saturating_add(len) > bits {
                    return Err(ErrorKind::ReadOutOfRange.into());
                }
            }
        }
        // Whole bytes of memory or of one register: ask directly.
        if place.bit_offset % 8 == 0 {
            let byte = place.bit_offset / 8;
            match place.storage {
                Storage::Memory { address_space } => {
                    if let Ok(address) = u64::try_from(byte) {
                        self.pending = Some(Pending::ReadSimple {
                            ty,
                            size,
                            register_offset: None,
                        });
                        return self.ask(memory_request(address, size, address_space)?);
                    }
                }
                Storage::Register(register) => {
                    if let Ok(start) = usize::try_from(byte) {
                        self.pending = Some(Pending::ReadSimple {
                            ty,
                            size,
                            register_offset: Some(start),
                        });
                        return self.ask(EvaluationResult::RequiresRegister { register });
                    }
                }
                _ => {}
            }
        }
        let len = u64::from(size) * 8;
        let mut bits = Bits::undefined(len)?;
        let mut fetches = Vec::new();
        plan_read(
            &place.storage,
            place.bit_offset,
            0,
            len,
            &mut bits,
            &mut fetches,
            0,
        )?;
        self.continue_read(ty, bits, fetches, 0)
    }

    /// Asks for the next register or memory access of a read, or finishes it.
    pub(super) fn continue_read(
        &mut self,
        ty: ValueType,
        bits: Bits,
        fetches: Vec<Fetch>,
        next: usize,
    ) -> Step {
        if let Some(f) = fetches.get(next).copied() {
            let (first, n) = f.span()?;
            let request = match f.place {
                Place::Memory(address_space) => memory_request(
                    first,
                    // At most 8 bytes are read, so a span is at most 9.
                    u8::try_from(n).map_err(|_| ErrorKind::BadSize(n))?,
                    address_space,
                )?,
                Place::Register(register) => EvaluationResult::RequiresRegister { register },
            };
            self.pending = Some(Pending::Read(Box::new(Read {
                ty,
                bits,
                fetches,
                next,
            })));
            return self.ask(request);
        }
        if !bits.is_fully_defined() {
            return Err(ErrorKind::UndefinedRead.into());
        }
        self.push_value(Value::from_bytes(ty, bits.bytes(), self.address_size));
        self.advance()
    }

    /// `DW_OP_deref*` of `size` bytes with result type `ty`.
    pub(super) fn deref(&mut self, size: u8, ty: ValueType) -> Step {
        if size == 0 || size > ty.size(self.address_size) {
            return Err(ErrorKind::BadSize(u64::from(size)).into());
        }
        // Whole bytes of memory or of one register, straight from a compact
        // slot: as `start_read` does, without building the location.
        match self.stack.last() {
            Some(&Slot::Value(Value {
                ty: ValueType::Generic,
                bits: address,
            })) => {
                // Owns nothing (see `pop_value`).
                core::mem::forget(self.stack.pop());
                return self.read_memory(address, 0, size, ty);
            }
            Some(&Slot::Memory {
                address_space,
                address,
            }) => {
                core::mem::forget(self.stack.pop());
                return self.read_memory(address, address_space, size, ty);
            }
            _ => {}
        }
        let loc = self.pop_location()?;
        self.start_read(&loc, size, ty)
    }

    pub(super) fn read_memory(
        &mut self,
        address: u64,
        address_space: u64,
        size: u8,
        ty: ValueType,
    ) -> Step {
        if u128::from(address) + u128::from(size) > address_space_bits(self.address_size) / 8 {
            return Err(ErrorKind::ReadOutOfRange.into());
        }
        self.pending = Some(Pending::ReadSimple {
            ty,
            size,
            register_offset: None,
        });
        self.ask(memory_request(address, size, address_space)?)
    }

    pub(super) fn xderef(&mut self, size: u8, ty: ValueType) -> Step {
        if size == 0 || size > ty.size(self.address_size) {
            return Err(ErrorKind::BadSize(u64::from(size)).into());
        }
        self.need(2)?;
        // DWARF 5 §2.5.1.3: the address is on top, the address space below.
        let addr = self.pop_integral()?;
        let space = self.pop_integral()?;
        let loc = LocationDescription::memory(space.bits, addr.bits);
        self.start_read(&loc, size, ty)
    }

    /// `DW_OP_call2`/`call4` (a unit-relative DIE offset) and `DW_OP_call_ref`
    /// (a `.debug_info` offset): the caller is asked for the callee.
    pub(super) fn call(&mut self, offset: u64, unit_relative: bool) -> Step {
        self.request(
            Pending::Callee,
            EvaluationResult::RequiresCallee {
                offset,
                unit_relative,
            },
        )
    }

    pub(super) fn request(&mut self, p: Pending, r: EvaluationResult) -> Step {
        self.pending = Some(p);
        self.ask(r)
    }

    pub(super) fn ask(&mut self, r: EvaluationResult) -> Step {
        self.asked = Some(r);
        Ok(())
    }

    pub(super) fn take_asked(&mut self) -> Result<EvaluationResult, Error> {
        match self.asked.take() {
            Some(r) => Ok(r),
            None => Err(self.error(ErrorKind::BadResume("no request was made"))),
        }
    }

    pub(super) fn plus_uconst(&mut self, n: u64) -> Result<(), ErrorKind> {
        let a = self.address_size;
        let v = self.pop_value()?;
        // The constant is taken in the popped value's type (DWARF 5
        // §2.5.1.4), converted for floats.
        let rhs = if v.ty.is_integral() {
            Value::new(v.ty, n, a)
        } else {
            Value::new(ValueType::Unsigned(8), n, a)
                .convert(v.ty, a)
                .map_err(Self::value_err)?
        };
        let r = match generic_binary(BinaryOp::Plus, v, rhs, a) {
            Some(r) => r,
            None => v.binary(BinaryOp::Plus, rhs, a).map_err(Self::value_err)?,
        };
        self.push_value(r);
        Ok(())
    }

    pub(super) fn piece_bytes(&mut self, n: u64) -> Result<(), ErrorKind> {
        // A `match`, not `ok_or` (see `pop_slot`).
        let Some(bits) = n.checked_mul(8) else {
            return Err(ErrorKind::BadSize(n));
        };
        self.piece(bits, 0)
    }

    #[inline(always)]
    pub(super) fn stack_value(&mut self) -> Result<(), ErrorKind> {
        let a = self.address_size;
        // A value on top (the usual case) becomes its implicit bytes where
        // it lies: the value's bits are masked to its size, its first `len`
        // bytes.
        if let Some(top) = self.stack.last_mut() {
            if let Slot::Value(Value { ty, bits }) = *top {
                let len = ty.size(a).min(8);
                // The value owns nothing: no drop code for the overwrite.
                core::mem::forget(core::mem::replace(top, Slot::Implicit { len, bytes: bits }));
                return Ok(());
            }
        }
        let v = self.pop_value()?;
        let len = v.ty.size(a).min(8);
        self.make_room();
        self.push_in_place(Slot::Implicit { len, bytes: v.bits });
        Ok(())
    }

    pub(super) fn entry_value(&mut self, expression: Bytes) -> Step {
        let register = entry_register(&expression);
        self.entry_expression = expression;
        self.request(
            Pending::EntryValue,
            EvaluationResult::RequiresEntryValue { register },
        )
    }

    pub(super) fn need_type(&mut self, offset: u64) -> Step {
        self.request(
            Pending::BaseType { offset },
            EvaluationResult::RequiresBaseType { offset },
        )
    }

    pub(super) fn enter_call(&mut self, bytes: &[u8]) -> Step {
        let decoded =
            decode(bytes, self.encoding).map_err(|e| ErrorKind::IllFormedCallee(Box::new(e)))?;
        if decoded.is_empty() {
            return self.advance();
        }
        if self.returns().len() >= MAX_CALL_DEPTH {
            return Err(ErrorKind::CallDepthExceeded(MAX_CALL_DEPTH).into());
        }
        let mut offsets: Vec<usize> = decoded.iter().map(|(o, _)| *o).collect();
        offsets.push(bytes.len());
        let ops = decoded.into_iter().map(|(_, op)| op).collect();
        let code = Arc::new(Code { ops, offsets });
        let caller = (self.callee.take(), self.pc);
        self.rare_mut().returns.push(caller);
        self.callee = Some(code);
        self.pc = 0;
        Ok(())
    }

    pub(super) fn extend(&mut self, bit_size: u64, count: u64) -> Result<(), ErrorKind> {
        if bit_size == 0 || count == 0 {
            return Err(ErrorKind::IllFormed(
                "the element bit size or count of DW_OP_LLVM_extend is 0",
            ));
        }
        let loc = self.pop_location()?;
        self.check_part(&loc, bit_size)?;
        self.check_composite_bits(u128::from(bit_size) * u128::from(count))?;
        let weight = (loc.weight() as u128 + 1).saturating_mul(u128::from(count));
        if weight >= MAX_LOCATION_WEIGHT as u128 {
            return Err(ErrorKind::TooLarge("DW_OP_extend makes too many parts"));
        }
        let parts = (0..count)
            .map(|_| Part {
                location: loc.clone(),
                bit_size,
            })
            .collect();
        self.push_loc(LocationDescription::composite(parts));
        Ok(())
    }

    pub(super) fn select_bit_piece(&mut self, bit_size: u64, count: u64) -> Result<(), ErrorKind> {
        if bit_size == 0 || count == 0 {
            return Err(ErrorKind::IllFormed(
                "the element bit size or count of DW_OP_LLVM_select_bit_piece is 0",
            ));
        }
        self.need(3)?;
        let mask = self.pop_integral()?;
        let one = self.pop_location()?;
        let zero = self.pop_location()?;
        // The mask must have a bit for every part.
        if count > u64::from(mask.ty.size(self.address_size)) * 8 {
            return Err(ErrorKind::BadSize(count));
        }
        self.check_composite_bits(u128::from(bit_size) * u128::from(count))?;
        let weight =
            (one.weight().max(zero.weight()) as u128 + 1).saturating_mul(u128::from(count));
        if weight >= MAX_LOCATION_WEIGHT as u128 {
            return Err(ErrorKind::TooLarge(
                "DW_OP_select_bit_piece makes too many parts",
            ));
        }
        let mut parts = Vec::with_capacity(count as usize);
        for i in 0..count {
            let selected = u32::try_from(i)
                .ok()
                .and_then(|i| mask.bits.checked_shr(i))
                .unwrap_or(0)
                & 1
                != 0;
            let mut l = if selected { one.clone() } else { zero.clone() };
            l.offset_bits(i128::from(i) * i128::from(bit_size), self.address_size)
                .map_err(|_| ErrorKind::OffsetOutOfRange)?;
            self.check_register_offsets(&l)?;
            self.check_part(&l, bit_size)?;
            parts.push(Part {
                location: l,
                bit_size,
            });
        }
        self.push_loc(LocationDescription::composite(parts));
        Ok(())
    }

    /// rbss(L) of the normative text: the fewest bits left in the storage of
    /// any of `l`'s places after its offset (memory: the address space's
    /// size). `None` if some place's storage has no size known to the
    /// evaluator (a register not given to
    /// [`Evaluation::set_register_size`], undefined storage).
    pub(super) fn remaining_bits(&self, l: &LocationDescription) -> Option<u128> {
        let mut min = None::<u128>;
        for place in l.places.iter() {
            let left = self
                .storage_bits(&place.storage)?
                .saturating_sub(place.bit_offset);
            min = Some(min.map_or(left, |m| m.min(left)));
        }
        min
    }

    /// `DW_OP_overlay` (`unit` 8) and `DW_OP_bit_overlay` (`unit` 1): the
    /// base location BL with the overlay OL over `size` units from `offset`
    /// units, as the composite the normative text's four steps build.
    pub(super) fn overlay(&mut self, unit: u64) -> Result<(), ErrorKind> {
        self.need(4)?;
        let size = self.pop_integral()?;
        let offset = self.pop_integral()?;
        let (size, offset) = (self.amount(size), self.amount(offset));
        let overlay = self.pop_location()?;
        let base = self.pop_location()?;
        if size < 0 || offset < 0 {
            return Err(ErrorKind::BadOverlay(
                "the overlay's size or offset is negative",
            ));
        }
        let too_large = ErrorKind::TooLarge("overlay larger than 2^64 bits");
        let scale = |n: i128| u64::try_from(n).ok().and_then(|n| n.checked_mul(unit));
        let (Some(bs), Some(bo)) = (scale(size), scale(offset)) else {
            return Err(too_large);
        };
        let end = u128::from(bs) + u128::from(bo);
        // rbss(BL) needs the size of a register base: the target's
        // (`Target::register_sizes`) or the caller's
        // (`Evaluation::set_register_size`); without it the overlay's end
        // and the base's tail cannot be known.
        if base.places.iter().any(|p| match p.storage {
            Storage::Register(r) => self.register_bits(r).is_none(),
            _ => false,
        }) {
            return Err(ErrorKind::BadOverlay(
                "the base location is a register whose size is not known (give it with Target::register_sizes or Evaluation::set_register_size)",
            ));
        }
        // rbss(BL); `None` when a place's storage size is not known here
        // (undefined storage): that is not checked.
        let rbss = self.remaining_bits(&base);
        if rbss.is_some_and(|r| r < end) {
            return Err(ErrorKind::BadOverlay(
                "the overlay extends past the end of the base location's storage",
            ));
        }
        if bs == 0 {
            self.push_loc(base);
            return Ok(());
        }
        if bo == 0 && rbss == Some(end) {
            self.push_loc(overlay);
            return Ok(());
        }
        // Parts are at most 2^64 - 1 bits: the tail of a larger (memory) or
        // unknown-size storage stops there.
        let Ok(end) = u64::try_from(end) else {
            return Err(too_large);
        };
        let tail = rbss.unwrap_or(u128::MAX).min(u128::from(u64::MAX)) as u64 - end;
        let weight = 2 * base.weight() + overlay.weight() + 3;
        if weight >= MAX_LOCATION_WEIGHT {
            return Err(ErrorKind::TooLarge("DW_OP_overlay makes too many parts"));
        }
        let mut parts = Vec::with_capacity(3);
        if bo != 0 {
            parts.push(Part {
                location: base.clone(),
                bit_size: bo,
            });
        }
        parts.push(Part {
            location: overlay,
            bit_size: bs,
        });
        if tail != 0 {
            let mut rest = base;
            rest.offset_bits(i128::from(end), self.address_size)
                .map_err(|_| ErrorKind::OffsetOutOfRange)?;
            parts.push(Part {
                location: rest,
                bit_size: tail,
            });
        }
        self.push_loc(LocationDescription::composite(parts));
        Ok(())
    }

    pub(super) fn step(&mut self, op: &Op) -> Step {
        let a = self.address_size;
        match op {
            Op::Lit(n) => self.push_value(Value::generic(u64::from(*n), a)),
            Op::Const1u(v) => self.push_value(Value::generic(u64::from(*v), a)),
            Op::Const2u(v) => self.push_value(Value::generic(u64::from(*v), a)),
            Op::Const4u(v) => self.push_value(Value::generic(u64::from(*v), a)),
            Op::Const8u(v) | Op::Constu(v) => self.push_value(Value::generic(*v, a)),
            Op::Const1s(v) => self.push_value(Value::generic(i64::from(*v) as u64, a)),
            Op::Const2s(v) => self.push_value(Value::generic(i64::from(*v) as u64, a)),
            Op::Const4s(v) => self.push_value(Value::generic(i64::from(*v) as u64, a)),
            Op::Const8s(v) | Op::Consts(v) => self.push_value(Value::generic(*v as u64, a)),
            Op::Addr(addr) => {
                let addr = Value::generic(*addr, a).bits;
                self.push_loc(LocationDescription::memory(0, addr));
            }
            Op::Addrx(index) | Op::Constx(index) => {
                let is_address = matches!(op, Op::Addrx(_));
                return self.request(
                    Pending::IndexedAddress { is_address },
                    EvaluationResult::RequiresIndexedAddress {
                        index: *index,
                        is_address,
                    },
                );
            }
            Op::ConstType { type_offset, value } => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                if value.len() != usize::from(ty.size(a)) {
                    return Err(ErrorKind::BadSize(value.len() as u64).into());
                }
                self.push_value(Value::from_bytes(ty, value, a));
            }
            Op::Dup => {
                let s = self.peek(0)?;
                self.stack.push(s);
            }
            Op::Drop => {
                self.need_complete(1)?;
                self.pop_slot()?;
            }
            Op::Over => {
                let s = self.peek(1)?;
                self.stack.push(s);
            }
            Op::Pick(i) => {
                let s = self.peek(usize::from(*i))?;
                self.stack.push(s);
            }
            Op::Swap => {
                self.need_complete(2)?;
                let len = self.stack.len();
                self.stack.swap(len - 1, len - 2);
            }
            Op::Rot => {
                self.need_complete(3)?;
                let len = self.stack.len();
                // [.., a, b, c] -> [.., c, a, b]
                self.stack[len - 3..].rotate_right(1);
            }
            Op::Abs => self.unary(UnaryOp::Abs)?,
            Op::Neg => self.unary(UnaryOp::Neg)?,
            Op::Not => self.unary(UnaryOp::Not)?,
            Op::And => self.binary(BinaryOp::And)?,
            Op::Div => self.binary(BinaryOp::Div)?,
            Op::Minus => self.binary(BinaryOp::Minus)?,
            Op::Mod => self.binary(BinaryOp::Mod)?,
            Op::Mul => self.binary(BinaryOp::Mul)?,
            Op::Or => self.binary(BinaryOp::Or)?,
            Op::Plus => self.binary(BinaryOp::Plus)?,
            Op::Shl => self.binary(BinaryOp::Shl)?,
            Op::Shr => self.binary(BinaryOp::Shr)?,
            Op::Shra => self.binary(BinaryOp::Shra)?,
            Op::Xor => self.binary(BinaryOp::Xor)?,
            Op::PlusUconst(n) => self.plus_uconst(*n)?,
            Op::Eq => self.compare(CompareOp::Eq)?,
            Op::Ge => self.compare(CompareOp::Ge)?,
            Op::Gt => self.compare(CompareOp::Gt)?,
            Op::Le => self.compare(CompareOp::Le)?,
            Op::Lt => self.compare(CompareOp::Lt)?,
            Op::Ne => self.compare(CompareOp::Ne)?,
            Op::Skip(d) => {
                self.branch(*d)?;
                return Ok(());
            }
            Op::Bra(d) => {
                let v = self.pop_value()?;
                if v.bits != 0 {
                    self.branch(*d)?;
                    return Ok(());
                }
            }
            Op::Reg(r) => self.push_loc(LocationDescription::register(u16::from(*r))),
            Op::Regx(r) => {
                let r = Self::reg(*r)?;
                self.push_loc(LocationDescription::register(r));
            }
            Op::Breg(r, offset) => {
                return self.request(
                    Pending::Breg {
                        offset: *offset,
                        address_space: None,
                    },
                    EvaluationResult::RequiresRegister {
                        register: u16::from(*r),
                    },
                );
            }
            Op::Bregx(r, offset) => {
                let register = Self::reg(*r)?;
                return self.request(
                    Pending::Breg {
                        offset: *offset,
                        address_space: None,
                    },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::AspaceBregx { register, offset } => {
                let register = Self::reg(*register)?;
                let space = self.pop_integral()?;
                return self.request(
                    Pending::Breg {
                        offset: *offset,
                        address_space: Some(space.bits),
                    },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::RegvalType {
                register,
                type_offset,
            } => {
                let register = Self::reg(*register)?;
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                return self.request(
                    Pending::Regval { ty },
                    EvaluationResult::RequiresRegister { register },
                );
            }
            Op::Fbreg(offset) => {
                return self.request(
                    Pending::FrameBase { offset: *offset },
                    EvaluationResult::RequiresFrameBase,
                );
            }
            Op::CallFrameCfa => {
                return self.request(
                    Pending::CallFrameCfa,
                    EvaluationResult::RequiresCallFrameCfa,
                )
            }
            Op::PushObjectAddress => {
                return self.request(
                    Pending::ObjectAddress,
                    EvaluationResult::RequiresObjectAddress,
                )
            }
            Op::PushLane => return self.request(Pending::Lane, EvaluationResult::RequiresLane),
            Op::PushIteration => {
                return self.request(Pending::Iteration, EvaluationResult::RequiresIteration)
            }
            Op::Deref => return self.deref(a, ValueType::Generic),
            Op::DerefSize(n) => return self.deref(*n, ValueType::Generic),
            Op::DerefType { size, type_offset } => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                // S must be the type's byte size (deref_size may be smaller).
                if *size != ty.size(a) {
                    return Err(ErrorKind::BadSize(u64::from(*size)).into());
                }
                return self.deref(*size, ty);
            }
            Op::Xderef => return self.xderef(a, ValueType::Generic),
            Op::XderefSize(n) => return self.xderef(*n, ValueType::Generic),
            Op::XderefType { size, type_offset } => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                if *size != ty.size(a) {
                    return Err(ErrorKind::BadSize(u64::from(*size)).into());
                }
                return self.xderef(*size, ty);
            }
            Op::Convert(type_offset) | Op::Reinterpret(type_offset) => {
                let Some(ty) = self.base_type(*type_offset) else {
                    return self.need_type(*type_offset);
                };
                let v = self.pop_value()?;
                let r = if matches!(op, Op::Convert(_)) {
                    v.convert(ty, a)
                } else {
                    v.reinterpret(ty, a)
                };
                self.push_value(r.map_err(Self::value_err)?);
            }
            Op::Call2(die) => return self.call(u64::from(*die), true),
            Op::Call4(die) => return self.call(u64::from(*die), true),
            Op::CallRef(die) => return self.call(*die, false),
            Op::EntryValue(expression) => {
                return self.entry_value(super::fast::short_bytes(expression.as_slice()))
            }
            Op::GnuParameterRef(offset) => {
                let offset = u64::from(*offset);
                return self.request(
                    Pending::EntryValue,
                    EvaluationResult::RequiresParameterRef { offset },
                );
            }
            Op::GnuVariableValue(offset) => {
                let offset = *offset;
                return self.request(
                    Pending::EntryValue,
                    EvaluationResult::RequiresVariableValue { offset },
                );
            }
            Op::FormTlsAddress => {
                let v = self.pop_integral()?;
                return self.request(
                    Pending::Tls,
                    EvaluationResult::RequiresTlsAddress { offset: v.bits },
                );
            }
            Op::CallFrameEntryReg(r) => {
                let register = Self::reg(*r)?;
                return self.request(
                    Pending::EntryRegister,
                    EvaluationResult::RequiresEntryRegister { register },
                );
            }
            Op::FormAspaceAddress => {
                self.need(2)?;
                let space = self.pop_integral()?;
                let addr = self.pop_integral()?;
                self.push_loc(LocationDescription::memory(space.bits, addr.bits));
            }
            Op::Offset => {
                self.need(2)?;
                let v = self.pop_integral()?;
                let n = self.amount(v);
                self.offset(n * 8)?;
            }
            Op::OffsetUconst(n) => self.offset(i128::from(*n) * 8)?,
            Op::BitOffset => {
                self.need(2)?;
                let v = self.pop_integral()?;
                let n = self.amount(v);
                self.offset(n)?;
            }
            Op::Piece(n) => self.piece_bytes(*n)?,
            Op::BitPiece { size, offset } => self.piece(*size, *offset)?,
            Op::PieceEnd => {
                match self.pop_slot()? {
                    Slot::Incomplete(parts, ..) | Slot::Open(parts, ..) => {
                        self.push_loc(LocationDescription::composite(parts))
                    }
                    _ => return Err(ErrorKind::IllFormed(
                        "the top of the stack is not an incomplete composite location description",
                    )
                    .into()),
                }
            }
            Op::ImplicitValue(bytes) => {
                let l = LocationDescription::single(Storage::Implicit(bytes.as_slice().into()), 0);
                self.push_loc(l);
            }
            Op::StackValue => self.stack_value()?,
            Op::ImplicitPointer { die, offset } => {
                let l = LocationDescription::single(
                    Storage::ImplicitPointer {
                        die: *die,
                        byte_offset: *offset,
                        address_space: None,
                    },
                    0,
                );
                self.push_loc(l);
            }
            Op::AspaceImplicitPointer { die, offset } => {
                let space = self.pop_integral()?;
                let l = LocationDescription::single(
                    Storage::ImplicitPointer {
                        die: *die,
                        byte_offset: *offset,
                        address_space: Some(space.bits),
                    },
                    0,
                );
                self.push_loc(l);
            }
            Op::Extend { bit_size, count } => self.extend(*bit_size, *count)?,
            Op::SelectBitPiece { bit_size, count } => self.select_bit_piece(*bit_size, *count)?,
            Op::Undefined => self.push_loc(LocationDescription::undefined()),
            Op::Overlay => self.overlay(8)?,
            Op::BitOverlay => self.overlay(1)?,
            Op::Nop | Op::LlvmNop | Op::GnuUninit => {}
            Op::Composite => self.stack.push(Slot::Open(Vec::new(), 0, false)),
        }
        self.advance()
    }
}

/// [`Value::binary`] of two generic values, computed here for the
/// operations that cannot fail on them (all but division and modulo);
/// `None` otherwise. `Value::binary` returns its result through memory,
/// written in narrow stores that the stack's wide loads then could not be
/// forwarded from (a stall per operation of long arithmetic expressions);
/// here the result stays in registers. Tests compare the two
/// (`eval_generic_arith`).
#[inline(always)]
fn generic_binary(op: BinaryOp, x: Value, y: Value, address_size: u8) -> Option<Value> {
    if (x.ty != ValueType::Generic) | (y.ty != ValueType::Generic) {
        return None;
    }
    let (a, b) = (x.bits, y.bits);
    let bits_size = u64::from(ValueType::Generic.size(address_size)) * 8;
    let r = match op {
        BinaryOp::And => a & b,
        BinaryOp::Or => a | b,
        BinaryOp::Xor => a ^ b,
        BinaryOp::Plus => a.wrapping_add(b),
        BinaryOp::Minus => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Shl if b >= bits_size => 0,
        BinaryOp::Shl => a << b,
        BinaryOp::Shr if b >= bits_size => 0,
        BinaryOp::Shr => a >> b,
        BinaryOp::Shra => (x.to_i64(address_size) >> b.min(63) as u32) as u64,
        BinaryOp::Div | BinaryOp::Mod => return None,
    };
    Some(Value::generic(r, address_size))
}

/// A memory request; address spaces past 32 bits cannot be asked for
/// ([`EvaluationResult::RequiresMemory`] is kept to two registers).
fn memory_request(
    address: u64,
    size: u8,
    address_space: u64,
) -> Result<EvaluationResult, ErrorKind> {
    match u32::try_from(address_space) {
        Ok(address_space) => Ok(EvaluationResult::RequiresMemory {
            address,
            size,
            address_space,
        }),
        Err(_) => Err(ErrorKind::MemoryUnavailable {
            address_space,
            address,
            size: u64::from(size),
        }),
    }
}
