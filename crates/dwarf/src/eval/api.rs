//! The public API of an [`Evaluation`]: construction and reuse, settings,
//! results, and the `resume_with_*` answers to its requests.

use super::*;
use crate::ErrorDetail;

impl<'a> Evaluation<'a> {
    /// A new evaluation of `expression` (encoded bytes or decoded
    /// operations, see [`Expression`]; branch displacements are in bytes of
    /// `encoding`), with an empty initial stack. An invalid [`Encoding`] is
    /// reported by the first [`Evaluation::evaluate`].
    #[inline]
    pub fn new(expression: impl Into<Expression<'a>>, encoding: Encoding) -> Evaluation<'a> {
        let e = expression.into();
        Evaluation::start(e.ops, e.bytes, e.root_offsets(), encoding)
    }

    /// A new evaluation with every field given at once: setting one after
    /// building the evaluation (`bytes`, `root_offsets`) wrote it in narrow
    /// stores that moving the evaluation out then read back with wide loads,
    /// which could not be forwarded from them (a stall per evaluation).
    #[inline(always)]
    fn start(
        ops: &'a [Op],
        bytes: Option<&'a [u8]>,
        root_offsets: RootOffsets<'a>,
        encoding: Encoding,
    ) -> Evaluation<'a> {
        Evaluation {
            ops,
            bytes,
            byte_pc: 0,
            next_byte: 0,
            encoding,
            address_size: encoding.address_size.clamp(1, 8),
            root_offsets,
            callee: None,
            pc: 0,
            stack: Vec::new(),
            steps: 0,
            max_steps: DEFAULT_MAX_STEPS,
            pending: None,
            asked: None,
            entry_expression: Bytes::from_le(0, 0),
            complete: false,
            fresh: true,
            top: None,
            parts: Vec::new(),
            trace: false,
            rare: None,
        }
    }

    /// Starts over on `expression` (as [`Evaluation::new`]) in place,
    /// keeping this evaluation's buffers, step limit, trace setting, register
    /// sizes and lane count, and forgetting its base types: the cheapest way to evaluate many
    /// expressions that live as long as the evaluation (e.g. all borrowed
    /// from one loaded binary).
    #[inline]
    pub fn restart(&mut self, expression: impl Into<Expression<'a>>, encoding: Encoding) {
        let e = expression.into();
        // After an evaluation almost everything is already empty: one test
        // of it all, and the clearing out of line, keep this small enough to
        // inline into the caller's loop.
        if self.needs_clearing() {
            self.clear_state();
        }
        // Nothing to free (`needs_clearing`): skip the drop code.
        core::mem::forget(self.top.take());
        if let Some((o, checked)) = e.offsets {
            self.root_offsets = if checked {
                RootOffsets::Borrowed(o)
            } else {
                RootOffsets::Unchecked(o)
            };
        }
        self.ops = e.ops;
        self.bytes = e.bytes;
        self.byte_pc = 0;
        self.next_byte = 0;
        // Usually the same encoding (one unit's expressions): then not
        // stored again. Its byte-wide stores were read back by the shortcut
        // in one wider load, which could not be forwarded from them (a
        // stall per expression).
        if self.encoding != encoding {
            self.encoding = encoding;
            self.address_size = encoding.address_size.clamp(1, 8);
        }
        self.pc = 0;
        self.steps = 0;
        self.complete = false;
        self.fresh = true;
    }

    /// Whether `restart` has anything to free or empty besides plain fields.
    #[inline(always)]
    pub(super) fn needs_clearing(&self) -> bool {
        !matches!(self.root_offsets, RootOffsets::Unknown)
            | self.callee.is_some()
            | !self.stack.is_empty()
            | self.pending.is_some()
            | self.asked.is_some()
            | self
                .rare
                .as_ref()
                .is_some_and(|r| !r.returns.is_empty() | !r.base_types.is_empty())
            | self.top.as_ref().is_some_and(owns_memory)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn clear_state(&mut self) {
        // Each field only if set: assigning ran its drop code every time.
        if !matches!(self.root_offsets, RootOffsets::Unknown) {
            self.root_offsets = RootOffsets::Unknown;
        }
        if self.callee.is_some() {
            self.callee = None;
        }
        if let Some(r) = &mut self.rare {
            r.returns.clear();
            r.base_types.clear();
        }
        self.stack.clear();
        if self.pending.is_some() {
            self.pending = None;
        }
        if self.asked.is_some() {
            self.asked = None;
        }
        // A composite result's vector of parts is kept for the next one.
        if let Some(Entry::Location(l)) = &mut self.top {
            if let [p] = l.places.as_mut_slice() {
                if let Storage::Composite(parts) = &mut p.storage {
                    if parts.capacity() > self.parts.capacity() {
                        if parts.iter().any(|p| owns_memory_at(&p.location)) {
                            parts.clear();
                        } else {
                            // Nothing to free: no drop code per part.
                            // SAFETY: a length of 0 exposes no element; the
                            // parts are forgotten, and own nothing (checked).
                            unsafe { parts.set_len(0) };
                        }
                        core::mem::swap(parts, &mut self.parts);
                        // What is left (one place with an empty vector)
                        // owns nothing.
                        core::mem::forget(self.top.take());
                        return;
                    }
                }
            }
        }
        self.top = None;
    }

    /// The evaluation's buffers, emptied, for [`Evaluation::new_in`]: keep
    /// them between expressions so that evaluating many allocates the stack
    /// once.
    pub fn into_buffers(self) -> Buffers {
        let Evaluation {
            stack, parts, rare, ..
        } = self;
        let mut buffers = Buffers { stack, parts, rare };
        buffers.clear();
        buffers
    }

    /// [`Evaluation::new`] using `buffers` (from
    /// [`Evaluation::into_buffers`], or [`Buffers::default`]), as gimli's
    /// `Evaluation::new_in` uses its storage.
    pub fn new_in(
        expression: impl Into<Expression<'a>>,
        encoding: Encoding,
        buffers: Buffers,
    ) -> Evaluation<'a> {
        let mut buffers = buffers;
        buffers.clear();
        let Buffers { stack, parts, rare } = buffers;
        let mut eval = Evaluation::new(expression, encoding);
        eval.stack = stack;
        eval.parts = parts;
        eval.rare = rare;
        eval
    }

    /// Sets the maximum number of operations to execute (default
    /// [`DEFAULT_MAX_STEPS`]).
    pub fn set_max_steps(&mut self, max_steps: u64) {
        self.max_steps = max_steps;
    }

    /// Stops after every executed operation with
    /// [`EvaluationResult::Stepped`], so a debugger can show the stack step
    /// by step (`locus dwarf eval --trace`).
    pub fn set_trace(&mut self, trace: bool) {
        self.trace = trace;
    }

    /// Tells the evaluation the type of the base type DIE at unit offset
    /// `offset`, so that it does not ask with
    /// [`EvaluationResult::RequiresBaseType`].
    pub fn set_base_type(&mut self, offset: u64, ty: ValueType) {
        let base_types = &mut self.rare_mut().base_types;
        match base_types.iter_mut().find(|(o, _)| *o == offset) {
            Some(slot) => slot.1 = ty,
            None => base_types.push((offset, ty)),
        }
    }

    /// Tells the evaluation that register `register` holds `bytes` bytes, so
    /// that `DW_OP_offset` & co. past its end and parts larger than what
    /// remains of it are errors when they are evaluated (the normative
    /// text's rules), not when the location is later read. Registers whose
    /// size is not given are not checked until read. Kept by
    /// [`Evaluation::restart`]: sizes belong to the
    /// target, not to one expression.
    pub fn set_register_size(&mut self, register: u16, bytes: u64) {
        let bits = bytes.saturating_mul(8);
        let sizes = &mut self.rare_mut().register_sizes;
        match sizes.iter_mut().find(|(r, _)| *r == register) {
            Some(slot) => slot.1 = bits,
            None => sizes.push((register, bits)),
        }
    }

    /// Tells the evaluation the value of `DW_AT_LLVM_lanes` (the number of
    /// lanes of the current thread): a lane given to
    /// [`Evaluation::resume_with_lane`] that is not below it makes the
    /// expression ill-formed (the normative text's rule for
    /// `DW_OP_LLVM_push_lane`). Unchecked unless given; kept as
    /// [`Evaluation::set_register_size`]'s sizes are.
    pub fn set_lane_count(&mut self, lanes: u64) {
        self.rare_mut().lanes = Some(lanes);
    }

    /// Tells the evaluation the value of `DW_AT_LLVM_iterations` (how many
    /// source loop iterations run concurrently): an iteration given to
    /// [`Evaluation::resume_with_iteration`] that is not below it makes the
    /// expression ill-formed (the rule for `DW_OP_LLVM_push_iteration`).
    /// Unchecked unless given; kept as the lane count is.
    pub fn set_iteration_count(&mut self, iterations: u64) {
        self.rare_mut().iterations = Some(iterations);
    }

    /// The result moved out (the evaluation is done with): for this crate's
    /// callers that keep the result, where cloning it cost an allocation.
    #[cfg_attr(not(feature = "binary"), allow(dead_code))]
    pub(crate) fn take_result(self) -> Option<Entry> {
        if !self.complete {
            return None;
        }
        self.top
    }

    /// The boxed rare state, allocated if needed.
    pub(super) fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Default::default)
    }

    /// Callers of the running expression (empty outside calls).
    #[inline(always)]
    pub(super) fn returns(&self) -> &[(Option<Arc<Code>>, usize)] {
        self.rare.as_ref().map_or(&[], |r| &r.returns)
    }

    /// The register sizes given ([`Evaluation::set_register_size`]).
    #[inline(always)]
    pub(super) fn register_sizes(&self) -> &[(u16, u64)] {
        self.rare.as_ref().map_or(&[], |r| &r.register_sizes)
    }

    /// The base types given or answered.
    #[inline(always)]
    pub(super) fn base_types(&self) -> &[(u64, ValueType)] {
        self.rare.as_ref().map_or(&[], |r| &r.base_types)
    }

    /// The encoding the evaluation was created with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Pushes an initial entry (e.g. an object address) before evaluating.
    pub fn push(&mut self, entry: Entry) {
        self.fresh = false;
        self.restore_top();
        self.stack.push(Slot::entry(entry));
    }

    /// Puts a completed evaluation's result back on the stack (before
    /// pushing or running again).
    pub(super) fn restore_top(&mut self) {
        if let Some(e) = self.top.take() {
            self.stack.push(Slot::entry(e));
        }
    }

    /// Index of the next operation to execute (or of the one waiting for a
    /// request's answer); inside a called expression, the index of the
    /// outermost `DW_OP_call*`.
    pub fn pc(&self) -> usize {
        self.returns().first().map_or(self.pc, |r| r.1)
    }

    /// The current stack, bottom first; incomplete composites are shown as
    /// composites.
    pub fn stack(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.stack.iter().map(|s| s.clone().into_entry()).collect();
        v.extend(self.top.iter().cloned());
        v
    }

    /// Runs until the end of the expression or a request.
    #[inline]
    pub fn evaluate(&mut self) -> Result<EvaluationResult, Error> {
        if self.pending.is_some() {
            return Err(self.error(ErrorKind::BadResume(
                "evaluate() called while a request is outstanding",
            )));
        }
        if self.fresh & !self.trace {
            if let Some(r) = self.shortcut() {
                return Ok(r);
            }
        }
        self.run()
    }

    /// The result once [`EvaluationResult::Complete`]: the top stack entry
    /// (an incomplete composite is completed), borrowed (clone it to keep
    /// it past the next [`Evaluation::restart`]). `None` before completion or
    /// if the stack is empty.
    #[inline]
    pub fn result(&self) -> Option<&Entry> {
        if !self.complete {
            return None;
        }
        self.top.as_ref()
    }

    /// The result in a location context: a generic value becomes a memory
    /// location in address space 0; an empty stack is undefined.
    pub fn location_result(&self) -> Option<LocationDescription> {
        if !self.complete {
            return None;
        }
        match self.result() {
            None => Some(LocationDescription::undefined()),
            Some(Entry::Location(l)) => Some(l.clone()),
            Some(Entry::Value(v)) if v.ty == ValueType::Generic => {
                Some(LocationDescription::memory(0, v.bits))
            }
            Some(Entry::Value(_)) => None,
        }
    }

    /// Answers [`EvaluationResult::RequiresRegister`] with the register's
    /// contents (little-endian, the register's full size).
    pub fn resume_with_register(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        if self.reading_from(|p| matches!(p, Place::Memory(_))) {
            return Err(self.error(ErrorKind::BadResume("no register was requested")));
        }
        let a = self.address_size;
        let r = match self.pending.take() {
            Some(Pending::ReadSimple {
                ty,
                size,
                register_offset: Some(start),
            }) => match start
                .checked_add(usize::from(size))
                .and_then(|end| bytes.get(start..end))
            {
                Some(b) => {
                    self.push_value(Value::from_bytes(ty, b, a));
                    self.advance()
                }
                None => Err(ErrorKind::ReadOutOfRange.into()),
            },
            Some(Pending::Breg {
                offset,
                address_space,
            }) => {
                let v = Value::from_bytes(ValueType::Generic, bytes, a);
                let addr = Value::generic(v.bits.wrapping_add(offset as u64), a);
                match address_space {
                    None => self.push_value(addr),
                    Some(s) => self.push_loc(LocationDescription::memory(s, addr.bits)),
                }
                self.advance()
            }
            Some(Pending::Regval { ty }) => {
                if bytes.len() < usize::from(ty.size(a)) {
                    Err(ErrorKind::ReadOutOfRange.into())
                } else {
                    self.push_value(Value::from_bytes(ty, bytes, a));
                    self.advance()
                }
            }
            Some(Pending::Read(read)) => {
                let Read {
                    ty,
                    mut bits,
                    fetches,
                    next,
                } = *read;
                match fetches.get(next) {
                    Some(
                        f @ Fetch {
                            place: Place::Register(_),
                            ..
                        },
                    ) => {
                        let got = f.span().and_then(|(first, n)| {
                            let first =
                                usize::try_from(first).map_err(|_| ErrorKind::ReadOutOfRange)?;
                            first
                                .checked_add(n as usize)
                                .and_then(|end| bytes.get(first..end))
                                .ok_or(ErrorKind::ReadOutOfRange)
                        });
                        match got {
                            Ok(span) => {
                                bits.fill(span, f.shift(), f.dst_bit, f.len);
                                self.continue_read(ty, bits, fetches, next + 1)
                            }
                            Err(e) => Err(e.into()),
                        }
                    }
                    _ => Err(ErrorKind::BadResume("no register was requested").into()),
                }
            }
            other => self.wrong(other, "no register was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresMemory`] with at least the
    /// requested number of bytes.
    pub fn resume_with_memory(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        if self.reading_from(|p| matches!(p, Place::Register(_))) {
            return Err(self.error(ErrorKind::BadResume("no memory was requested")));
        }
        if let Some(Pending::Read(read)) = &self.pending {
            let short = read
                .fetches
                .get(read.next)
                .and_then(|f| f.span().ok())
                .is_some_and(|(_, n)| (bytes.len() as u64) < n);
            if short {
                return Err(self.error(ErrorKind::BadResume("fewer bytes than requested")));
            }
        }
        if let Some(Pending::ReadSimple {
            size,
            register_offset: None,
            ..
        }) = &self.pending
        {
            if bytes.len() < usize::from(*size) {
                return Err(self.error(ErrorKind::BadResume("fewer bytes than requested")));
            }
        }
        let r = match self.pending.take() {
            Some(Pending::ReadSimple {
                ty,
                size,
                register_offset: None,
            }) => {
                let b = bytes.get(..usize::from(size)).unwrap_or(bytes);
                self.push_value(Value::from_bytes(ty, b, self.address_size));
                self.advance()
            }
            Some(Pending::Read(read)) => {
                let Read {
                    ty,
                    mut bits,
                    fetches,
                    next,
                } = *read;
                match fetches.get(next) {
                    Some(
                        f @ Fetch {
                            place: Place::Memory(_),
                            ..
                        },
                    ) => match f.span() {
                        Ok((_, n)) => match bytes.get(..n as usize) {
                            Some(span) => {
                                bits.fill(span, f.shift(), f.dst_bit, f.len);
                                self.continue_read(ty, bits, fetches, next + 1)
                            }
                            None => Err(ErrorKind::BadResume("fewer bytes than requested").into()),
                        },
                        Err(e) => Err(e.into()),
                    },
                    _ => Err(ErrorKind::BadResume("no memory was requested").into()),
                }
            }
            other => self.wrong(other, "no memory was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresLane`].
    pub fn resume_with_lane(&mut self, lane: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Lane) => self.push_counter(
                lane,
                self.rare.as_ref().and_then(|r| r.lanes),
                "the lane is not less than DW_AT_LLVM_lanes",
            ),
            other => self.wrong(other, "no lane was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresIteration`].
    pub fn resume_with_iteration(&mut self, iteration: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Iteration) => self.push_counter(
                iteration,
                self.rare.as_ref().and_then(|r| r.iterations),
                "the iteration is not less than DW_AT_LLVM_iterations",
            ),
            other => self.wrong(other, "no iteration was requested"),
        };
        self.after_resume(r)
    }

    /// Pushes a memory location in the default address space at `address`
    /// (cut to the address size), and goes on: how the CFA, TLS and indexed
    /// addresses answer their requests.
    pub(super) fn push_global_address(&mut self, address: u64) -> Step {
        let a = Value::generic(address, self.address_size).bits;
        self.push_loc_and_advance(LocationDescription::memory(0, a))
    }

    /// Pushes `location` and goes on: how a location answers a request.
    fn push_loc_and_advance(&mut self, location: LocationDescription) -> Step {
        self.push_loc(location);
        self.advance()
    }

    /// Pushes `value` as a generic value (cut to the address size) and goes
    /// on: how a number answers a request.
    fn push_generic(&mut self, value: u64) -> Step {
        self.push_value(Value::generic(value, self.address_size));
        self.advance()
    }

    /// [`push_generic`](Self::push_generic) of lane or iteration `n`,
    /// unless it is not less than `bound` (`DW_AT_LLVM_lanes`,
    /// `DW_AT_LLVM_iterations`): then `too_large`.
    fn push_counter(&mut self, n: u64, bound: Option<u64>, too_large: &'static str) -> Step {
        if bound.is_some_and(|b| n >= b) {
            return Err(ErrorKind::IllFormed(too_large).into());
        }
        self.push_generic(n)
    }

    /// Answers [`EvaluationResult::RequiresFrameBase`] with the frame base
    /// address.
    pub fn resume_with_frame_base(&mut self, frame_base: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::FrameBase { offset }) => {
                let v = Value::generic(frame_base.wrapping_add(offset as u64), self.address_size);
                // A lone DW_OP_fbreg (the usual case): the value is the result.
                if self.ends_after(0) {
                    return Ok(self.complete_after_answer(Entry::Value(v), 1));
                }
                self.push_value(v);
                self.advance()
            }
            other => self.wrong(other, "no frame base was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresCallFrameCfa`].
    pub fn resume_with_call_frame_cfa(&mut self, cfa: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::CallFrameCfa) => self.push_global_address(cfa),
            other => self.wrong(other, "no CFA was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresObjectAddress`] with an address
    /// in global memory.
    pub fn resume_with_object_address(&mut self, address: u64) -> Result<EvaluationResult, Error> {
        let a = Value::generic(address, self.address_size).bits;
        self.resume_with_object_location(LocationDescription::memory(0, a))
    }

    /// Answers [`EvaluationResult::RequiresObjectAddress`] with any location
    /// (the extension lets the object live in a register, another address
    /// space, a composite, ...).
    pub fn resume_with_object_location(
        &mut self,
        location: LocationDescription,
    ) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::ObjectAddress) => self.push_loc_and_advance(location),
            other => self.wrong(other, "no object address was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresBaseType`] with the DIE's
    /// `DW_AT_encoding` (`DW_ATE_*`) and `DW_AT_byte_size`. The operation
    /// that asked is then run again.
    pub fn resume_with_base_type(
        &mut self,
        encoding: u8,
        byte_size: u64,
    ) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::BaseType { offset }) => {
                match ValueType::from_encoding(encoding, byte_size) {
                    Some(ty) => {
                        self.set_base_type(offset, ty);
                        // The operation runs again; do not count it twice.
                        self.steps = self.steps.saturating_sub(1);
                        return self.run();
                    }
                    None => Err(ErrorKind::UnsupportedBaseType {
                        offset,
                        encoding,
                        byte_size,
                    }
                    .into()),
                }
            }
            other => self.wrong(other, "no base type was requested"),
        };
        self.after_resume(r)
    }

    /// The nested expression of the `DW_OP_entry_value` that asked
    /// ([`EvaluationResult::RequiresEntryValue`]): encoded, in this
    /// evaluation's [`Encoding`]; what it was last, once answered.
    pub fn entry_value_expression(&self) -> &[u8] {
        &self.entry_expression
    }

    /// Answers [`EvaluationResult::RequiresEntryValue`] with the entry value
    /// (usually [`Entry::Value`] with a generic value).
    pub fn resume_with_entry_value(&mut self, entry: Entry) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::EntryValue) => {
                // `DW_OP_entry_value(...) DW_OP_stack_value` (the usual case)
                // with a value: its implicit bytes are the result, as
                // `stack_value` makes them.
                if let Entry::Value(Value { ty, bits }) = entry {
                    if self.ends_after(1) && self.max_steps > self.steps {
                        self.steps += 1;
                        let len = ty.size(self.address_size).min(8);
                        let top = Entry::Location(LocationDescription::single(
                            Storage::Implicit(Bytes::from_le(bits, len)),
                            0,
                        ));
                        return Ok(self.complete_after_answer(top, 2));
                    }
                }
                self.stack.push(Slot::entry(entry));
                self.advance()
            }
            other => self.wrong(other, "no entry value was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresCallee`] with the encoded
    /// expression of the callee's `DW_AT_location` (same [`Encoding`]); it
    /// runs on the same stack, then the caller continues. Empty bytes (no
    /// location attribute) make the call a no-op.
    pub fn resume_with_callee(&mut self, bytes: &[u8]) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Callee) => self.enter_call(bytes),
            other => self.wrong(other, "no callee was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresIndexedAddress`] with the
    /// `.debug_addr` entry.
    pub fn resume_with_indexed_address(&mut self, value: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::IndexedAddress { is_address: true }) => self.push_global_address(value),
            Some(Pending::IndexedAddress { is_address: false }) => self.push_generic(value),
            other => self.wrong(other, "no indexed address was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresTlsAddress`] with the address
    /// (in global memory) of the thread-local storage.
    pub fn resume_with_tls_address(&mut self, address: u64) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::Tls) => self.push_global_address(address),
            other => self.wrong(other, "no TLS address was requested"),
        };
        self.after_resume(r)
    }

    /// Answers [`EvaluationResult::RequiresEntryRegister`] with the location
    /// of the register's value on entry to the current function.
    pub fn resume_with_entry_register(
        &mut self,
        location: LocationDescription,
    ) -> Result<EvaluationResult, Error> {
        let r = match self.pending.take() {
            Some(Pending::EntryRegister) => self.push_loc_and_advance(location),
            other => self.wrong(other, "no entry register was requested"),
        };
        self.after_resume(r)
    }

    /// Whether the root expression, untraced and with an empty stack, ends
    /// after the operation that asked and, if `stack_value`, one
    /// `DW_OP_stack_value`: then an answer can complete it without the loop
    /// (`complete_after_answer`).
    #[inline(always)]
    pub(super) fn ends_after(&self, stack_value: usize) -> bool {
        if self.trace | self.callee.is_some() | !self.stack.is_empty() {
            return false;
        }
        let rest_is = |n: usize| n == stack_value;
        match self.bytes {
            Some(bytes) => match bytes.get(self.next_byte..) {
                Some([]) => stack_value == 0,
                Some([0x9f]) => rest_is(1),
                _ => false,
            },
            None => match self.ops.get(self.pc + 1..) {
                Some([]) => stack_value == 0,
                Some([Op::StackValue]) => rest_is(1),
                _ => false,
            },
        }
    }

    /// Completes the evaluation with `top` after an answer, `ops` root
    /// operations on (the one that asked, and a `DW_OP_stack_value`): the
    /// state `finish` leaves after the loop ran them (`ends_after` held, and
    /// the step limit allowed the loop's steps).
    #[inline(always)]
    pub(super) fn complete_after_answer(&mut self, top: Entry, ops: usize) -> EvaluationResult {
        self.pc += ops;
        if self.bytes.is_some() {
            self.next_byte += ops - 1;
        }
        self.byte_pc = self.next_byte;
        // `top` is empty (the evaluation was not complete): nothing to drop.
        core::mem::forget(self.top.replace(top));
        self.complete = true;
        EvaluationResult::Complete
    }

    /// Whether a read is waiting for an access to a place matching `kind`.
    pub(super) fn reading_from(&self, kind: impl Fn(Place) -> bool) -> bool {
        match &self.pending {
            Some(Pending::Read(read)) => read.fetches.get(read.next).is_some_and(|f| kind(f.place)),
            _ => false,
        }
    }

    pub(super) fn wrong(&mut self, other: Option<Pending>, what: &'static str) -> Step {
        self.pending = other;
        Err(ErrorKind::BadResume(what).into())
    }

    pub(super) fn advance(&mut self) -> Step {
        self.pc += 1;
        if self.callee.is_none() {
            self.byte_pc = self.next_byte;
        }
        Ok(())
    }

    /// `advance` in the root expression (`fast_step` runs only there).
    #[inline(always)]
    pub(super) fn advance_root(&mut self) -> Step {
        self.pc += 1;
        self.byte_pc = self.next_byte;
        Ok(())
    }

    pub(super) fn after_resume(&mut self, r: Step) -> Result<EvaluationResult, Error> {
        match r {
            Err(e) => Err(self.error(*e)),
            Ok(()) if self.asked.is_some() => self.take_asked(),
            Ok(()) if self.trace => Ok(EvaluationResult::Stepped),
            Ok(()) => self.run(),
        }
    }

    /// Name of root operation `index` (from bytes: the one at `byte_pc`,
    /// which is `index` whenever an error is reported).
    pub(crate) fn root_name(&self, index: usize) -> &'static str {
        match self.bytes {
            Some(bytes) => decode_at(bytes, &mut self.byte_pc.clone(), self.encoding)
                .map_or("end of expression", |op| op.name()),
            None => self.ops.get(index).map_or("end of expression", Op::name),
        }
    }

    pub(super) fn at_end(&self) -> bool {
        match (&self.callee, self.bytes) {
            (Some(code), _) => self.pc >= code.ops.len(),
            (None, Some(bytes)) => self.byte_pc >= bytes.len(),
            (None, None) => self.pc >= self.ops.len(),
        }
    }

    pub(super) fn error(&self, error: ErrorKind) -> Error {
        let here = match &self.callee {
            Some(code) => code.ops.get(self.pc).map_or("end of expression", Op::name),
            None => self.root_name(self.pc),
        };
        match self.returns().first() {
            None => ErrorDetail::Eval {
                index: self.pc,
                op: here,
                kind: error,
            }
            .into(),
            Some(&(_, site)) => ErrorDetail::Eval {
                index: site,
                op: self.root_name(site),
                kind: ErrorKind::InCall {
                    index: self.pc,
                    op: here,
                    error: Box::new(error),
                },
            }
            .into(),
        }
    }
}
