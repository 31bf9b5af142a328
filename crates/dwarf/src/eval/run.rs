//! The evaluation loop: the root expression straight from its bytes (the
//! hot loop), the general loop (decoded operations, called expressions,
//! tracing), and the end of an evaluation.

use super::*;

impl<'a> Evaluation<'a> {
    pub(super) fn run(&mut self) -> Result<EvaluationResult, Error> {
        // Whatever runs, the evaluation is no longer fresh (see `shortcut`).
        self.fresh = false;
        match (self.callee.is_none(), self.bytes) {
            (true, Some(bytes)) if !self.trace => self.run_bytes(bytes),
            _ => self.run_general(),
        }
    }

    /// The root expression straight from its bytes, without tracing: the
    /// hot loop (what `run_general` does in that case, with fewer tests per
    /// operation).
    pub(super) fn run_bytes(&mut self, bytes: &'a [u8]) -> Result<EvaluationResult, Error> {
        // As `decode` would (the shortcuts in `fast_step` skip `decode_at`).
        self.encoding.check()?;
        self.restore_top();
        while let Some(&code) = bytes.get(self.byte_pc) {
            self.count_step()?;
            let at = (self.pc, self.byte_pc);
            let r = self.root_step(bytes, code)?;
            if let Some(request) = self.stop_after(at, r)? {
                return Ok(request);
            }
            if self.callee.is_some() {
                // A `DW_OP_call*` entered its callee.
                return self.run_general();
            }
        }
        Ok(self.finish())
    }

    /// Counts one more operation against the step limit.
    #[inline(always)]
    pub(super) fn count_step(&mut self) -> Result<(), Error> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(self.error(ErrorKind::StepLimitExceeded(self.max_steps)));
        }
        Ok(())
    }

    /// Runs the root operation at `byte_pc`, whose first byte is `code`:
    /// through `fast_step` if it takes it, else decoded.
    #[inline(always)]
    pub(super) fn root_step(&mut self, bytes: &'a [u8], code: u8) -> Result<Step, Error> {
        match self.fast_step(bytes, code) {
            Some(r) => Ok(r),
            None => self.slow_step(bytes),
        }
    }

    /// Whether the evaluation stops after the operation that started at
    /// `at` (operation index, byte offset) and ended in `r`: with its error,
    /// a stack grown too large, or (`Some`) a request to the caller.
    #[inline(always)]
    pub(super) fn stop_after(
        &mut self,
        at: (usize, usize),
        r: Step,
    ) -> Result<Option<EvaluationResult>, Error> {
        if let Err(e) = r {
            return Err(self.error(*e));
        }
        if self.asked.is_some() {
            return self.take_asked().map(Some);
        }
        if self.stack.len() > MAX_STACK {
            // Report it at the operation that overflowed.
            (self.pc, self.byte_pc) = at;
            return Err(self.error(ErrorKind::TooLarge("more than 1024 stack entries")));
        }
        Ok(None)
    }

    /// A root operation that `fast_step` does not take, decoded then run
    /// (`Err`: it does not decode).
    #[inline(never)]
    pub(super) fn slow_step(&mut self, bytes: &'a [u8]) -> Result<Step, Error> {
        let mut next = self.byte_pc;
        let op = decode_at(bytes, &mut next, self.encoding)?;
        self.next_byte = next;
        Ok(match op {
            // The decoded block moves into the request (kept if long).
            Op::EntryValue(expression) if expression.len() <= 8 => {
                self.entry_value(super::fast::short_bytes(&expression))
            }
            Op::EntryValue(expression) => self.entry_value(expression.into()),
            op => self.step(&op),
        })
    }

    pub(super) fn run_general(&mut self) -> Result<EvaluationResult, Error> {
        if self.bytes.is_some() {
            // As `decode` would (the shortcuts in `fast_step` skip `decode_at`).
            self.encoding.check()?;
        }
        self.restore_top();
        loop {
            if self.at_end() {
                match self.rare.as_mut().and_then(|r| r.returns.pop()) {
                    Some((code, site)) => {
                        self.callee = code;
                        self.pc = site + 1;
                        if self.callee.is_none() {
                            // Back in the root: after the call operation.
                            self.byte_pc = self.next_byte;
                        }
                        continue;
                    }
                    None => break,
                }
            }
            self.count_step()?;
            let at = (self.pc, self.byte_pc);
            let r = match (&self.callee, self.bytes) {
                (None, Some(bytes)) => match bytes.get(self.byte_pc) {
                    Some(&code) => self.root_step(bytes, code)?,
                    None => self.slow_step(bytes)?,
                },
                (None, None) => {
                    let ops = self.ops;
                    match ops.get(self.pc) {
                        Some(op) => self.step(op),
                        None => Ok(()),
                    }
                }
                (Some(code), _) => {
                    let code = Arc::clone(code);
                    match code.ops.get(self.pc) {
                        Some(op) => self.step(op),
                        None => Ok(()),
                    }
                }
            };
            if let Some(request) = self.stop_after(at, r)? {
                return Ok(request);
            }
            if self.trace {
                return Ok(EvaluationResult::Stepped);
            }
        }
        Ok(self.finish())
    }

    /// Ends the evaluation: the result moves off the stack as an `Entry`
    /// (an incomplete composite is completed), so it can be borrowed
    /// (`result`). Compact slots are read field by field where they lie
    /// and each kind's entry is written straight into `top` (building one
    /// `Entry` for all kinds and then moving it copied it byte by byte).
    #[inline(always)]
    pub(super) fn finish(&mut self) -> EvaluationResult {
        // `top` is empty (`restore_top`): nothing to drop when it is set.
        core::mem::forget(self.top.take());
        match self.stack.last() {
            Some(&Slot::Value(Value { ty, bits })) => {
                // A compact slot owns nothing (see `pop_value`).
                core::mem::forget(self.stack.pop());
                self.top = Some(Entry::Value(Value { ty, bits }));
            }
            Some(&Slot::Register {
                register,
                bit_offset,
            }) => {
                core::mem::forget(self.stack.pop());
                self.top = Some(Entry::Location(LocationDescription::single(
                    Storage::Register(register),
                    u128::from(bit_offset),
                )));
            }
            Some(&Slot::Implicit { len, bytes }) => {
                core::mem::forget(self.stack.pop());
                self.top = Some(Entry::Location(LocationDescription::single(
                    Storage::Implicit(Bytes::from_le(bytes, len)),
                    0,
                )));
            }
            _ => self.finish_other(),
        }
        self.complete = true;
        EvaluationResult::Complete
    }

    /// `finish` for the slots that are not moved field by field.
    #[inline(never)]
    pub(super) fn finish_other(&mut self) {
        self.top = self.stack.pop().map(Slot::into_entry);
    }
}
