//! Deoptimization through a stack map's shadow, and the interpreter that finishes the
//! function.
//!
//! [`translate`] turns the function that holds a stack map into a small owned form
//! ([`Continuation`]) whose values are numbered slots; the stack map's live values (its
//! operands after ID and shadow size) name the slots bound from the record when the
//! function deoptimizes. The interpreter runs from the instruction after the stack map:
//! integer arithmetic and comparisons, `select`, casts, `load` and `store` of integers and
//! pointers (an alloca of the compiled frame is its Direct location, whose frame is still
//! intact while the interpreter runs), `getelementptr` over an integer element type, `phi`,
//! `br`, `ret`, calls of `@locus_poll` and further stack maps. A value used after the stack
//! map that is not among its live values, or an instruction outside this set, makes the
//! deoptimization fail with an error naming it.

use std::collections::HashMap;

use locus_stackmap::patch::{encode_nops, write_code, Arch};
use locus_stackmap::Frame;

use locus_llvm::ir::{BasicBlock, Function, Instruction, IntPredicate, Opcode, Value, ValueKind};

use super::sites::SiteKind;
use super::x86_64::SavedRegisters;
use super::Runtime;

/// Bytes of the `call rel32` a shadow is patched with.
const CALL_REL32_LEN: usize = 5;

/// An operand: a constant or a numbered value.
#[derive(Clone, Debug)]
enum Operand {
    Constant(u64),
    Slot(usize),
    /// A value the interpreter cannot have (a global, a function): named for the error.
    Unavailable(String),
}

#[derive(Clone, Copy, Debug)]
enum BinOp {
    Add,
    Sub,
    Mul,
    UDiv,
    SDiv,
    URem,
    SRem,
    Shl,
    LShr,
    AShr,
    And,
    Or,
    Xor,
}

#[derive(Clone, Debug)]
enum Op {
    Binary(BinOp, Operand, Operand),
    Compare(IntPredicate, Operand, Operand, u32),
    Select(Operand, Operand, Operand),
    ZExt(Operand),
    SExt(Operand, u32),
    Copy(Operand),
    Load(Operand, usize),
    Store(Operand, Operand, usize),
    ElementAddress(Operand, Operand, u64),
    Phi(Vec<(usize, Operand)>),
    Poll(Operand),
    Nothing,
    Branch(usize),
    CondBranch(Operand, usize, usize),
    Return(Operand),
    Unsupported(String),
}

#[derive(Clone, Debug)]
struct Step {
    /// The slot the instruction defines.
    slot: usize,
    /// Its width in bits (results are kept zero-extended to it).
    bits: u32,
    op: Op,
}

/// A function in the interpreter's form, with where to start after one stack map and
/// which slots its live values bind.
#[derive(Clone, Debug)]
pub struct Continuation {
    function: String,
    blocks: Vec<Vec<Step>>,
    start_block: usize,
    start_step: usize,
    live: Vec<usize>,
    /// The value of each live value that is a constant in the IR, checked against the
    /// record's Constant or ConstantIndex location.
    live_constants: Vec<Option<u64>>,
    slots: usize,
    names: Vec<String>,
}

impl Continuation {
    /// The function it finishes.
    #[must_use]
    pub fn function(&self) -> &str {
        &self.function
    }

    /// How many live values the stack map has.
    #[must_use]
    pub fn live_values(&self) -> usize {
        self.live.len()
    }
}

struct Translator<'m> {
    slots: HashMap<Value<'m>, usize>,
    names: Vec<String>,
    blocks: HashMap<BasicBlock<'m>, usize>,
}

impl<'m> Translator<'m> {
    fn slot(&mut self, value: Value<'m>) -> usize {
        let next = self.slots.len();
        *self.slots.entry(value).or_insert_with(|| {
            self.names.push(value.print());
            next
        })
    }

    fn operand(&mut self, value: Value<'m>) -> Operand {
        match value.kind() {
            ValueKind::Argument | ValueKind::Instruction => Operand::Slot(self.slot(value)),
            ValueKind::ConstantInt => {
                let bits = value.ty().int_width().unwrap_or(64);
                Operand::Constant(mask(value.const_int().unwrap_or(0) as u64, bits))
            }
            ValueKind::ConstantPointerNull => Operand::Constant(0),
            _ if value.is_undef() || value.is_poison() => Operand::Constant(0),
            _ => Operand::Unavailable(value.print()),
        }
    }

    fn block(&self, block: Option<&BasicBlock<'m>>) -> usize {
        block
            .and_then(|b| self.blocks.get(b))
            .copied()
            .unwrap_or(usize::MAX)
    }

    fn step(&mut self, instruction: Instruction<'m>) -> Step {
        let slot = self.slot(instruction.as_value());
        let bits = instruction.ty().int_width().unwrap_or(64);
        let operands = instruction.operands();
        let translated: Vec<Operand> = operands.iter().map(|v| self.operand(*v)).collect();
        let operand = |i: usize| match translated.get(i) {
            Some(o) => o.clone(),
            None => Operand::Unavailable(format!("operand {i}")),
        };
        let binary = |op| Op::Binary(op, operand(0), operand(1));
        let op = match instruction.opcode() {
            Opcode::Add => binary(BinOp::Add),
            Opcode::Sub => binary(BinOp::Sub),
            Opcode::Mul => binary(BinOp::Mul),
            Opcode::UDiv => binary(BinOp::UDiv),
            Opcode::SDiv => binary(BinOp::SDiv),
            Opcode::URem => binary(BinOp::URem),
            Opcode::SRem => binary(BinOp::SRem),
            Opcode::Shl => binary(BinOp::Shl),
            Opcode::LShr => binary(BinOp::LShr),
            Opcode::AShr => binary(BinOp::AShr),
            Opcode::And => binary(BinOp::And),
            Opcode::Or => binary(BinOp::Or),
            Opcode::Xor => binary(BinOp::Xor),
            Opcode::ICmp => {
                let width = operands
                    .first()
                    .and_then(|v| v.ty().int_width())
                    .unwrap_or(64);
                match instruction.icmp_predicate() {
                    Some(p) => Op::Compare(p, operand(0), operand(1), width),
                    None => Op::Unsupported(instruction.print()),
                }
            }
            Opcode::Select => Op::Select(operand(0), operand(1), operand(2)),
            Opcode::ZExt => Op::ZExt(operand(0)),
            Opcode::SExt => {
                let from = operands
                    .first()
                    .and_then(|v| v.ty().int_width())
                    .unwrap_or(64);
                Op::SExt(operand(0), from)
            }
            Opcode::Trunc
            | Opcode::PtrToInt
            | Opcode::IntToPtr
            | Opcode::BitCast
            | Opcode::Freeze => Op::Copy(operand(0)),
            Opcode::Load => match byte_width(bits) {
                Some(bytes) => Op::Load(operand(0), bytes),
                None => Op::Unsupported(instruction.print()),
            },
            Opcode::Store => {
                let width = operands
                    .first()
                    .and_then(|v| v.ty().int_width().or(Some(64)))
                    .unwrap_or(64);
                match byte_width(width) {
                    Some(bytes) => Op::Store(operand(0), operand(1), bytes),
                    None => Op::Unsupported(instruction.print()),
                }
            }
            Opcode::GetElementPtr => {
                let element = instruction
                    .gep_source_type()
                    .and_then(|t| t.int_width())
                    .filter(|w| w % 8 == 0);
                match (element, operands.len()) {
                    (Some(width), 2) => {
                        Op::ElementAddress(operand(0), operand(1), u64::from(width / 8))
                    }
                    _ => Op::Unsupported(instruction.print()),
                }
            }
            Opcode::Phi => {
                let incoming = instruction.phi_incoming();
                let mut out = Vec::with_capacity(incoming.len());
                for (value, block) in incoming {
                    let from = self.block(Some(&block));
                    out.push((from, self.operand(value)));
                }
                Op::Phi(out)
            }
            Opcode::Call => self.call(instruction),
            Opcode::Br => {
                let successors = instruction.successors();
                if successors.len() == 1 {
                    Op::Branch(self.block(successors.first()))
                } else {
                    let then = self.block(successors.first());
                    let otherwise = self.block(successors.get(1));
                    Op::CondBranch(operand(0), then, otherwise)
                }
            }
            Opcode::Ret if operands.is_empty() => Op::Return(Operand::Constant(0)),
            Opcode::Ret => Op::Return(operand(0)),
            _ => Op::Unsupported(instruction.print()),
        };
        Step { slot, bits, op }
    }

    fn call(&mut self, instruction: Instruction<'m>) -> Op {
        let Some(call) = instruction.as_call() else {
            return Op::Unsupported(instruction.print());
        };
        match call.callee_name().as_deref() {
            Some("locus_poll") => match call.arguments().first() {
                Some(v) => Op::Poll(self.operand(*v)),
                None => Op::Unsupported(instruction.print()),
            },
            Some("llvm.experimental.stackmap") => Op::Nothing,
            _ => Op::Unsupported(instruction.print()),
        }
    }
}

/// Translates `function` for finishing it after `stackmap`, one of its
/// `llvm.experimental.stackmap` calls. Errors say what cannot be translated.
pub(super) fn translate(
    function: Function<'_>,
    stackmap: Instruction<'_>,
) -> Result<Continuation, String> {
    let blocks = function.blocks();
    let mut translator = Translator {
        slots: HashMap::new(),
        names: Vec::new(),
        blocks: blocks.iter().enumerate().map(|(i, b)| (*b, i)).collect(),
    };
    let call = stackmap
        .as_call()
        .ok_or_else(|| "the stack map is not a call".to_owned())?;
    let mut live = Vec::new();
    let mut live_constants = Vec::new();
    for value in call.arguments().into_iter().skip(2) {
        live.push(translator.slot(value));
        live_constants.push(match translator.operand(value) {
            Operand::Constant(c) => Some(c),
            _ => None,
        });
    }
    let mut start = None;
    let mut translated = Vec::with_capacity(blocks.len());
    for (b, block) in blocks.iter().enumerate() {
        let mut steps = Vec::new();
        for (i, instruction) in block.instructions().into_iter().enumerate() {
            if instruction == stackmap {
                start = Some((b, i + 1));
            }
            steps.push(translator.step(instruction));
        }
        translated.push(steps);
    }
    let (start_block, start_step) =
        start.ok_or_else(|| "the stack map is not in its function".to_owned())?;
    Ok(Continuation {
        function: function.name(),
        blocks: translated,
        start_block,
        start_step,
        live,
        live_constants,
        slots: translator.slots.len(),
        names: translator.names,
    })
}

fn byte_width(bits: u32) -> Option<usize> {
    match bits {
        8 | 16 | 32 | 64 => Some(bits as usize / 8),
        _ => None,
    }
}

fn mask(value: u64, bits: u32) -> u64 {
    if bits >= 64 {
        value
    } else {
        value & ((1u64 << bits) - 1)
    }
}

fn sign_extend(value: u64, bits: u32) -> i64 {
    if bits >= 64 || bits == 0 {
        value as i64
    } else {
        let shift = 64 - bits;
        ((value << shift) as i64) >> shift
    }
}

/// The interpreter's state: one value per slot, `None` until bound.
struct Machine<'c> {
    continuation: &'c Continuation,
    values: Vec<Option<u64>>,
}

impl Machine<'_> {
    fn get(&self, operand: &Operand) -> Result<u64, String> {
        match operand {
            Operand::Constant(c) => Ok(*c),
            Operand::Slot(s) => self.values.get(*s).copied().flatten().ok_or_else(|| {
                let name = self.continuation.names.get(*s).map_or("?", String::as_str);
                format!(
                    "`{}` is used after the stack map but is not live in it",
                    name.trim()
                )
            }),
            Operand::Unavailable(what) => Err(format!("the interpreter has no value for {what}")),
        }
    }

    fn run(&mut self) -> Result<i64, String> {
        let blocks = &self.continuation.blocks;
        let (mut block, mut step) = (self.continuation.start_block, self.continuation.start_step);
        let mut previous = usize::MAX;
        // Generous, so a program that loops forever ends with an error instead.
        for _ in 0..100_000_000u64 {
            let steps = blocks
                .get(block)
                .ok_or_else(|| format!("no block {block}"))?;
            let current = steps
                .get(step)
                .ok_or_else(|| format!("block {block} ends without a terminator"))?;
            let next = match &current.op {
                Op::Phi(incoming) => {
                    // Phis at the top of a block read the values of the edge taken, all
                    // before any of them is written.
                    let mut writes = Vec::new();
                    for s in steps.iter().skip(step) {
                        let Op::Phi(incoming) = &s.op else { break };
                        let (_, value) = incoming
                            .iter()
                            .find(|(from, _)| *from == previous)
                            .ok_or_else(|| "a phi has no value for the edge taken".to_owned())?;
                        writes.push((s.slot, self.get(value)?));
                    }
                    let _ = incoming;
                    let n = writes.len();
                    for (slot, value) in writes {
                        self.set(slot, value);
                    }
                    step += n;
                    continue;
                }
                Op::Branch(target) => Some(*target),
                Op::CondBranch(c, then, otherwise) => Some(if self.get(c)? & 1 == 1 {
                    *then
                } else {
                    *otherwise
                }),
                Op::Return(value) => {
                    let bits = current.bits;
                    let _ = bits;
                    return Ok(self.get(value)? as i64);
                }
                op => {
                    let value = self.evaluate(op, current.bits)?;
                    if let Some(value) = value {
                        self.set(current.slot, mask(value, current.bits));
                    }
                    None
                }
            };
            match next {
                Some(target) => {
                    previous = block;
                    block = target;
                    step = 0;
                }
                None => step += 1,
            }
        }
        Err("the interpreter gave up after 10^8 steps".to_owned())
    }

    fn set(&mut self, slot: usize, value: u64) {
        if let Some(v) = self.values.get_mut(slot) {
            *v = Some(value);
        }
    }

    fn evaluate(&self, op: &Op, bits: u32) -> Result<Option<u64>, String> {
        Ok(Some(match op {
            Op::Binary(op, a, b) => binary(*op, self.get(a)?, self.get(b)?, bits)?,
            Op::Compare(p, a, b, width) => {
                let (a, b) = (mask(self.get(a)?, *width), mask(self.get(b)?, *width));
                let (sa, sb) = (sign_extend(a, *width), sign_extend(b, *width));
                u64::from(match p {
                    IntPredicate::Eq => a == b,
                    IntPredicate::Ne => a != b,
                    IntPredicate::Ugt => a > b,
                    IntPredicate::Uge => a >= b,
                    IntPredicate::Ult => a < b,
                    IntPredicate::Ule => a <= b,
                    IntPredicate::Sgt => sa > sb,
                    IntPredicate::Sge => sa >= sb,
                    IntPredicate::Slt => sa < sb,
                    IntPredicate::Sle => sa <= sb,
                })
            }
            Op::Select(c, a, b) => {
                if self.get(c)? & 1 == 1 {
                    self.get(a)?
                } else {
                    self.get(b)?
                }
            }
            Op::ZExt(a) | Op::Copy(a) => self.get(a)?,
            Op::SExt(a, from) => sign_extend(self.get(a)?, *from) as u64,
            Op::Load(pointer, bytes) => {
                let address = self.get(pointer)?;
                let mut word = [0u8; 8];
                let dst = word.get_mut(..*bytes).ok_or("bad load width")?;
                // SAFETY: the address is one the compiled function would load from at this
                // point of the same computation: its own frame (still intact: the
                // interpreter runs before the frame is dropped) or memory it was given.
                unsafe { read(address, dst) };
                u64::from_le_bytes(word)
            }
            Op::Store(value, pointer, bytes) => {
                let address = self.get(pointer)?;
                let word = self.get(value)?.to_le_bytes();
                let src = word.get(..*bytes).ok_or("bad store width")?;
                // SAFETY: as for a load: memory the compiled function would store to here.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), address as *mut u8, src.len())
                };
                return Ok(None);
            }
            Op::ElementAddress(base, index, size) => self
                .get(base)?
                .wrapping_add(self.get(index)?.wrapping_mul(*size)),
            Op::Poll(value) => self.get(value)?,
            Op::Nothing => return Ok(None),
            Op::Unsupported(what) => {
                return Err(format!("the interpreter cannot run `{}`", what.trim()))
            }
            Op::Phi(_) | Op::Branch(_) | Op::CondBranch(..) | Op::Return(_) => {
                return Err("a terminator or phi out of place".to_owned())
            }
        }))
    }
}

/// Reads `buf.len()` bytes at `address`.
///
/// # Safety
///
/// The bytes are readable.
unsafe fn read(address: u64, buf: &mut [u8]) {
    // SAFETY: the caller's contract; `buf` is a separate Rust buffer.
    unsafe { std::ptr::copy_nonoverlapping(address as *const u8, buf.as_mut_ptr(), buf.len()) };
}

fn binary(op: BinOp, a: u64, b: u64, bits: u32) -> Result<u64, String> {
    let (a, b) = (mask(a, bits), mask(b, bits));
    let (sa, sb) = (sign_extend(a, bits), sign_extend(b, bits));
    let shift = u32::try_from(b).unwrap_or(u32::MAX);
    Ok(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::UDiv => a.checked_div(b).ok_or("division by zero")?,
        BinOp::URem => a.checked_rem(b).ok_or("division by zero")?,
        BinOp::SDiv => sa.checked_div(sb).ok_or("division by zero or overflow")? as u64,
        BinOp::SRem => sa.checked_rem(sb).ok_or("division by zero or overflow")? as u64,
        BinOp::Shl => a.checked_shl(shift).unwrap_or(0),
        BinOp::LShr => a.checked_shr(shift).unwrap_or(0),
        BinOp::AShr => sa.checked_shr(shift.min(63)).unwrap_or(0) as u64,
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
    })
}

impl Runtime {
    /// Invalidates `function`: overwrites the shadow of each of its stack maps with a call
    /// to the deopt entry (a `call rel32` to `@locus.deopt.stub`, nop-padded), so that the
    /// code deoptimizes when it reaches one. Returns how many shadows it patched (those
    /// already patched are left alone).
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] for a shadow shorter than 5 bytes, a stub out of `rel32`
    /// reach, or a failed write.
    pub fn invalidate(&self, function: &str) -> locus_llvm::Result<usize> {
        let _patching = self.patching();
        let mut patched = 0;
        for site in self.sites.values() {
            if site.kind != SiteKind::StackMap || site.function != function {
                continue;
            }
            for record in self.jit.stack_maps().by_id(site.id) {
                let address = record.address;
                if self.state().shadows.contains_key(&address) {
                    continue;
                }
                if site.reserved < CALL_REL32_LEN {
                    return Err(super::jit_error(&format!(
                        "stack map {} in @{function} has a {}-byte shadow; deoptimization \
                         patches a 5-byte call",
                        site.id, site.reserved
                    )));
                }
                let bytes = self.call_rel32(address, site.reserved)?;
                let original = self
                    .code_bytes(address, site.reserved)
                    .ok_or_else(|| super::jit_error("a shadow lies outside the code"))?;
                self.write(address, &bytes)?;
                let mut state = self.state();
                state.shadows.insert(address, original);
                state.stats.patches += 1;
                patched += 1;
            }
        }
        Ok(patched)
    }

    /// Undoes [`Runtime::invalidate`]: puts back the code of every patched shadow of
    /// `function`. Returns how many it restored.
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] for a failed write.
    pub fn revalidate(&self, function: &str) -> locus_llvm::Result<usize> {
        let _patching = self.patching();
        let mut restored = 0;
        let addresses: Vec<u64> = self
            .jit
            .stack_maps()
            .iter()
            .filter(|r| {
                self.jit
                    .function_at(r.address)
                    .is_some_and(|f| f.name == function)
            })
            .map(|r| r.address)
            .collect();
        for address in addresses {
            let original = self.state().shadows.remove(&address);
            if let Some(original) = original {
                self.write(address, &original)?;
                self.state().stats.patches += 1;
                restored += 1;
            }
        }
        Ok(restored)
    }

    /// Makes the `nth` call of `@locus_poll` from now on (1 for the next) invalidate
    /// `function` before it returns, as a runtime does when a call changes what the
    /// compiled code assumed.
    pub fn invalidate_at_poll(&self, function: &str, nth: u64) {
        let mut state = self.state();
        state.poll_plan = Some((function.to_owned(), nth));
        state.polls = 0;
    }

    /// `@locus_poll`, from compiled code; an error ends the call of the program.
    pub(super) fn poll(&self) -> Result<(), String> {
        let due = {
            let mut state = self.state();
            state.polls += 1;
            match &state.poll_plan {
                Some((function, nth)) if *nth == state.polls => Some(function.clone()),
                _ => None,
            }
        };
        if let Some(function) = due {
            self.state().poll_plan = None;
            self.invalidate(&function).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The deopt entry's work: find the record the patched call came from, read its live
    /// values from the saved registers and the frame, and finish the function.
    /// `resume_sp` is the stack pointer [`Runtime::call`]'s entry had at its call: only a
    /// frame that entry called is finished (the interpreter's result is returned from
    /// there). A frame of a function called by compiled code is refused: returning into
    /// its compiled caller would need the caller's callee-saved registers, which the
    /// deoptimized function saved where only its unwind tables say.
    pub(super) fn deoptimize(&self, saved: &SavedRegisters, resume_sp: u64) -> i64 {
        match self.finish(saved, resume_sp) {
            Ok(result) => {
                self.state().stats.deopts += 1;
                result
            }
            Err(message) => {
                super::x86_64::fail(format!("deoptimization failed: {message}"));
                0
            }
        }
    }

    fn finish(&self, saved: &SavedRegisters, resume_sp: u64) -> Result<i64, String> {
        let return_address = saved.0[16];
        let address = return_address.wrapping_sub(CALL_REL32_LEN as u64);
        let record = self
            .jit
            .stack_maps()
            .lookup(address)
            .find(|r| self.continuations.contains_key(&r.record.id()))
            .ok_or_else(|| format!("no stack map record at {address:#x}"))?;
        // The caller's stack pointer is the one at the record plus the fixed frame and
        // the return address (stack map section, function records).
        let stack_size = record.function.stack_size;
        let caller_sp =
            (stack_size != u64::MAX).then(|| saved.0[7].wrapping_add(stack_size).wrapping_add(8));
        if caller_sp != Some(resume_sp) {
            let function = self
                .jit
                .function_at(address)
                .map_or_else(|| format!("{address:#x}"), |f| format!("@{}", f.name));
            return Err(format!(
                "{function} (stack map {}) was not called by Runtime::call but by compiled \
                 code (or has a frame of dynamic size); only the entry's own frame is \
                 deoptimized",
                record.record.id()
            ));
        }
        let continuation = match self.continuations.get(&record.record.id()) {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Err(e.clone()),
            None => {
                return Err(format!(
                    "no continuation for stack map {}",
                    record.record.id()
                ))
            }
        };
        let mut values = vec![None; continuation.slots];
        let locations: Vec<_> = record.record.locations().collect();
        if locations.len() != continuation.live.len() {
            return Err(format!(
                "stack map {} has {} locations for {} live values",
                record.record.id(),
                locations.len(),
                continuation.live.len()
            ));
        }
        let expected = continuation.live_constants.iter();
        for ((location, slot), constant) in locations.iter().zip(&continuation.live).zip(expected) {
            // SAFETY: the locations are the record's of the frame stopped in the deopt
            // entry: its registers and spill slots, live until the frame is dropped after
            // this call.
            let frame = unsafe { saved.frame() };
            let value = frame.value(location).map_err(|e| e.to_string())?;
            let width = location.size().min(8) as u32 * 8;
            if constant.is_some_and(|c| mask(c, width) != mask(value, width)) {
                return Err(format!(
                    "stack map {}: the constant {constant:?} reads as {value:#x}",
                    record.record.id()
                ));
            }
            self.state().location_kinds.insert(location.kind() as u8);
            if let Some(v) = values.get_mut(*slot) {
                *v = Some(value);
            }
        }
        let mut machine = Machine {
            continuation,
            values,
        };
        machine.run()
    }

    /// `call rel32` from `address` to the deopt stub, nop-padded to `len` bytes.
    fn call_rel32(&self, address: u64, len: usize) -> locus_llvm::Result<Vec<u8>> {
        let next = address.wrapping_add(CALL_REL32_LEN as u64);
        let displacement = i32::try_from(self.deopt_stub.wrapping_sub(next) as i64)
            .map_err(|_| super::jit_error("the deopt stub is out of rel32 reach"))?;
        let mut bytes = vec![0xe8];
        bytes.extend_from_slice(&displacement.to_le_bytes());
        let nops = encode_nops(Arch::X86_64, len - CALL_REL32_LEN)
            .map_err(|e| super::jit_error(&e.to_string()))?;
        bytes.extend_from_slice(&nops);
        Ok(bytes)
    }

    /// Writes a whole shadow of the program (the patch lock held).
    pub(super) fn write(&self, address: u64, bytes: &[u8]) -> locus_llvm::Result<()> {
        self.check_thread().map_err(|e| super::jit_error(&e))?;
        let Some(old) = self.code_bytes(address, bytes.len()) else {
            return Err(super::jit_error(&format!(
                "{address:#x} is not in the program's code"
            )));
        };
        if self.options().concurrent_patching {
            // SAFETY: the region is a whole shadow of this runtime's program (checked to
            // lie in its code), holding `old`; the patch lock is held. A thread past the
            // shadow's first instruction at this moment runs the new bytes where it is:
            // the hazard `Options::concurrent_patching` documents for shadows.
            return unsafe { super::cross_modify::write_region(address as *mut u8, &old, bytes) }
                .map_err(|e| super::jit_error(&e));
        }
        // SAFETY: the region is a whole shadow of this runtime's program (checked to lie in
        // its code); compiled code runs only on this thread (`check_thread`), which is in
        // the runtime now, so nothing executes those pages meanwhile; the bytes are a
        // complete sequence.
        unsafe { write_code(address as *mut u8, bytes) }
            .map_err(|e| super::jit_error(&e.to_string()))
    }
}
