//! A full test target for the evaluator and the access layer: registers,
//! memory in address spaces, and answers to every request.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use locus_dwarf::access::Target;
use locus_dwarf::{parse_text, Encoding, Entry, Error, Evaluation, EvaluationResult, Location, Op};

/// Registers by number, memory by (space, address), and the answers to the
/// evaluator's other requests.
#[derive(Default, Clone)]
pub struct Ctx {
    pub registers: BTreeMap<u16, Vec<u8>>,
    /// (address space, start address, bytes).
    pub memory: Vec<(u64, u64, Vec<u8>)>,
    pub lane: u64,
    pub iteration: u64,
    pub frame_base: u64,
    pub cfa: u64,
    pub object: Option<Location>,
    /// Base type DIE offset -> (DW_ATE encoding, byte size).
    pub base_types: BTreeMap<u64, (u8, u64)>,
    /// Register -> its entry value.
    pub entry_values: BTreeMap<u16, Entry>,
    /// DIE offset -> the value of `DW_OP_GNU_parameter_ref`/`DW_OP_GNU_variable_value`.
    pub by_die: BTreeMap<u64, Entry>,
    /// (DIE offset, unit relative) -> DW_AT_location bytes.
    pub callees: BTreeMap<(u64, bool), Vec<u8>>,
    pub debug_addr: Vec<u64>,
    pub tls_base: u64,
    pub entry_registers: BTreeMap<u16, Location>,
    /// Every request seen, in order.
    pub log: Vec<EvaluationResult>,
}

impl Ctx {
    pub fn read(&self, space: u64, address: u64, size: usize) -> Option<Vec<u8>> {
        self.memory.iter().find_map(|(s, a, bytes)| {
            if *s != space || address < *a {
                return None;
            }
            let start = usize::try_from(address - a).ok()?;
            bytes.get(start..start + size).map(<[u8]>::to_vec)
        })
    }

    fn memory_mut(&mut self, space: u64, address: u64, size: usize) -> Option<&mut [u8]> {
        self.memory.iter_mut().find_map(|(s, a, bytes)| {
            if *s != space || address < *a {
                return None;
            }
            let start = usize::try_from(address - *a).ok()?;
            bytes.get_mut(start..start + size)
        })
    }
}

impl Target for Ctx {
    fn read_memory(&mut self, space: u64, address: u64, buf: &mut [u8]) -> bool {
        match self.read(space, address, buf.len()) {
            Some(b) => {
                buf.copy_from_slice(&b);
                true
            }
            None => false,
        }
    }

    fn read_register(&mut self, register: u16, offset: u64, buf: &mut [u8]) -> bool {
        let Some(r) = self.registers.get(&register) else {
            return false;
        };
        let start = offset as usize;
        match r.get(start..start + buf.len()) {
            Some(b) => {
                buf.copy_from_slice(b);
                true
            }
            None => false,
        }
    }

    fn write_memory(&mut self, space: u64, address: u64, bytes: &[u8]) -> bool {
        match self.memory_mut(space, address, bytes.len()) {
            Some(m) => {
                m.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    fn write_register(&mut self, register: u16, offset: u64, bytes: &[u8]) -> bool {
        let Some(r) = self.registers.get_mut(&register) else {
            return false;
        };
        let start = offset as usize;
        match r.get_mut(start..start + bytes.len()) {
            Some(b) => {
                b.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }
}

/// Runs `ops` to completion, answering every request from `ctx`.
pub fn evaluate<'a>(
    ops: &'a [Op],
    ctx: &mut Ctx,
    encoding: Encoding,
) -> Result<Evaluation<'a>, Error> {
    let mut eval = Evaluation::new(ops, encoding);
    let mut r = eval.evaluate()?;
    loop {
        ctx.log.push(r.clone());
        r = match r {
            EvaluationResult::Complete => return Ok(eval),
            EvaluationResult::RequiresRegister { register } => {
                let bytes = ctx.registers.get(&register).expect("unknown register");
                eval.resume_with_register(bytes)?
            }
            EvaluationResult::RequiresMemory {
                address,
                size,
                address_space,
            } => {
                let bytes = ctx
                    .read(u64::from(address_space), address, usize::from(size))
                    .expect("unreadable memory");
                eval.resume_with_memory(&bytes)?
            }
            EvaluationResult::RequiresLane => eval.resume_with_lane(ctx.lane)?,
            EvaluationResult::RequiresIteration => eval.resume_with_iteration(ctx.iteration)?,
            EvaluationResult::RequiresFrameBase => eval.resume_with_frame_base(ctx.frame_base)?,
            EvaluationResult::RequiresCallFrameCfa => eval.resume_with_call_frame_cfa(ctx.cfa)?,
            EvaluationResult::RequiresObjectAddress => {
                eval.resume_with_object_location(ctx.object.clone().expect("no object"))?
            }
            EvaluationResult::RequiresBaseType { offset } => {
                let (enc, size) = ctx.base_types[&offset];
                eval.resume_with_base_type(enc, size)?
            }
            EvaluationResult::RequiresEntryValue { register, .. } => {
                let e = ctx.entry_values[&register.expect("entry value of a register")].clone();
                eval.resume_with_entry_value(e)?
            }
            EvaluationResult::RequiresParameterRef { offset }
            | EvaluationResult::RequiresVariableValue { offset } => {
                let e = ctx.by_die[&offset].clone();
                eval.resume_with_entry_value(e)?
            }
            EvaluationResult::RequiresCallee {
                offset,
                unit_relative,
            } => {
                let bytes = ctx
                    .callees
                    .get(&(offset, unit_relative))
                    .cloned()
                    .unwrap_or_default();
                eval.resume_with_callee(&bytes)?
            }
            EvaluationResult::RequiresIndexedAddress { index, .. } => {
                eval.resume_with_indexed_address(ctx.debug_addr[index as usize])?
            }
            EvaluationResult::RequiresTlsAddress { offset } => {
                eval.resume_with_tls_address(ctx.tls_base + offset)?
            }
            EvaluationResult::RequiresEntryRegister { register } => eval
                .resume_with_entry_register(
                    ctx.entry_registers
                        .get(&register)
                        .cloned()
                        .unwrap_or_else(Location::undefined),
                )?,
            EvaluationResult::Stepped => eval.evaluate()?,
            // `EvaluationResult` is non-exhaustive: a new request fails here until answered.
            other => panic!("a request these tests do not answer: {other:?}"),
        };
    }
}

/// Parses `text` (numeric register operands only) and evaluates it.
pub fn run_text(text: &str, ctx: &mut Ctx) -> Result<Entry, Error> {
    let ops = parse_text(text, |_| None).unwrap();
    let eval = evaluate(&ops, ctx, Encoding::default())?;
    Ok(eval.result().cloned().expect("empty stack"))
}
