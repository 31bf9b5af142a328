//! gimli as an oracle: random well-formed DWARF 5 expressions that gimli can evaluate
//! (literals, arithmetic, stack operations, `breg*`/`reg*`/`regx`, `fbreg`,
//! `call_frame_cfa`, `entry_value`, `deref*` on fake memory, branches, `piece`, `bit_piece`,
//! `stack_value`, `implicit_value`), evaluated by gimli and
//! by Locus against the same registers and memory: both must give the same pieces and
//! values. The generator is seeded, so a failure names its case and reproduces.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use gimli::{EndianSlice, LittleEndian};
use locus_dwarf::{
    decode, encode, Encoding, Entry, Evaluation, EvaluationResult, Location, Op, SingleLocation,
    Storage, Value,
};

/// Number of random expressions.
const CASES: usize = 20_000;

/// Fake target: 32 registers of 8 bytes, 256 bytes of memory at `MEM_BASE`.
const MEM_BASE: u64 = 0x10000;
const MEM_LEN: u64 = 256;
const FRAME_BASE: u64 = 0x7fff_0000;
const CFA: u64 = 0x7fff_0100;

struct Target {
    regs: Vec<u64>,
    /// Registers at function entry (`DW_OP_entry_value`).
    entry_regs: Vec<u64>,
    mem: Vec<u8>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

impl Target {
    fn new(rng: &mut Rng) -> Target {
        Target {
            regs: (0..32).map(|_| rng.next()).collect(),
            entry_regs: (0..32).map(|_| rng.next()).collect(),
            mem: (0..MEM_LEN).map(|_| rng.next() as u8).collect(),
        }
    }

    fn mem(&self, address: u64, size: usize) -> Option<&[u8]> {
        let start = usize::try_from(address.checked_sub(MEM_BASE)?).ok()?;
        self.mem.get(start..start.checked_add(size)?)
    }
}

/// Pushes exactly one generic value, using at most `depth` levels of nesting.
fn value(rng: &mut Rng, out: &mut Vec<Op>, depth: u32) {
    let leaf = depth == 0 || rng.chance(35);
    if leaf {
        match rng.below(15) {
            12 => out.push(Op::Fbreg((rng.next() as i64) >> rng.below(64))),
            13 => out.push(Op::CallFrameCfa),
            14 => {
                let r = rng.below(32) as u8;
                let block = encode(&[Op::Reg(r)], Encoding::default()).unwrap();
                out.push(Op::EntryValue(block));
            }
            0 => out.push(Op::Lit(rng.below(32) as u8)),
            1 => out.push(Op::Const1u(rng.next() as u8)),
            2 => out.push(Op::Const1s(rng.next() as i8)),
            3 => out.push(Op::Const2u(rng.next() as u16)),
            4 => out.push(Op::Const2s(rng.next() as i16)),
            5 => out.push(Op::Const4u(rng.next() as u32)),
            6 => out.push(Op::Const4s(rng.next() as i32)),
            7 => out.push(Op::Const8u(rng.next())),
            8 => out.push(Op::Const8s(rng.next() as i64)),
            9 => out.push(Op::Constu(rng.next() >> rng.below(64))),
            10 => out.push(Op::Consts((rng.next() as i64) >> rng.below(64))),
            _ => {
                let r = rng.below(32) as u8;
                let off = (rng.next() as i64) >> rng.below(64);
                if rng.chance(50) {
                    out.push(Op::Breg(r, off));
                } else {
                    out.push(Op::Bregx(u64::from(r), off));
                }
            }
        }
        return;
    }
    match rng.below(10) {
        // Binary arithmetic.
        0..=2 => {
            value(rng, out, depth - 1);
            let op = rng.below(12);
            if (6..9).contains(&op) {
                // Shifts: a count below 64.
                out.push(Op::Lit(rng.below(32) as u8));
                if rng.chance(50) {
                    out.push(Op::PlusUconst(rng.below(32)));
                }
            } else if (9..11).contains(&op) {
                // Division: a small non-zero, positive divisor.
                out.push(Op::Constu(1 + rng.below(1000)));
            } else {
                value(rng, out, depth - 1);
            }
            out.push(match op {
                0 => Op::Plus,
                1 => Op::Minus,
                2 => Op::Mul,
                3 => Op::And,
                4 => Op::Or,
                5 => Op::Xor,
                6 => Op::Shl,
                7 => Op::Shr,
                8 => Op::Shra,
                9 => Op::Div,
                10 => Op::Mod,
                _ => Op::Plus,
            });
        }
        // Unary, plus_uconst, comparisons.
        3 => {
            value(rng, out, depth - 1);
            out.push(match rng.below(4) {
                0 => Op::Neg,
                1 => Op::Not,
                2 => Op::Abs,
                _ => Op::PlusUconst(rng.next() >> rng.below(64)),
            });
        }
        4 => {
            value(rng, out, depth - 1);
            value(rng, out, depth - 1);
            out.push(match rng.below(6) {
                0 => Op::Eq,
                1 => Op::Ne,
                2 => Op::Lt,
                3 => Op::Le,
                4 => Op::Gt,
                _ => Op::Ge,
            });
        }
        // Stack operations with net effect one value.
        5 => {
            value(rng, out, depth - 1);
            value(rng, out, depth - 1);
            match rng.below(5) {
                0 => out.push(Op::Drop),
                1 => out.extend([Op::Swap, Op::Drop]),
                2 => out.extend([Op::Over, Op::Minus, Op::Plus]),
                3 => out.extend([Op::Dup, Op::Xor, Op::Or]),
                _ => {
                    value(rng, out, depth - 1);
                    out.extend([Op::Rot, Op::Pick(rng.below(3) as u8), Op::Plus]);
                    out.extend([Op::Plus, Op::Swap, Op::Drop]);
                }
            }
        }
        // Dereferences of the fake memory.
        6 => {
            let size = [1u8, 2, 4, 8][rng.below(4) as usize];
            let addr = MEM_BASE + rng.below(MEM_LEN - 8);
            out.push(Op::Constu(addr));
            if size == 8 && rng.chance(50) {
                out.push(Op::Deref);
            } else {
                out.push(Op::DerefSize(size));
            }
        }
        // A branch over a balanced block, taken or not.
        7 => {
            value(rng, out, depth - 1);
            let mut block = Vec::new();
            match rng.below(3) {
                0 => block.extend([Op::Lit(rng.below(32) as u8), Op::Plus]),
                1 => block.extend([Op::Not]),
                _ => block.extend([Op::Lit(3), Op::Mul, Op::Nop]),
            }
            let len = encode(&block, Encoding::default()).unwrap().len() as i16;
            out.push(Op::Lit(rng.below(2) as u8));
            out.push(Op::Bra(len));
            out.extend(block);
        }
        // An unconditional skip over junk.
        8 => {
            value(rng, out, depth - 1);
            let junk = [Op::Drop, Op::Drop, Op::Lit(9)];
            let len = encode(&junk, Encoding::default()).unwrap().len() as i16;
            out.push(Op::Skip(len));
            out.extend(junk);
        }
        _ => {
            value(rng, out, depth - 1);
            out.push(Op::Nop);
        }
    }
}

/// A simple location: ends with the location (a register, an implicit value, a stack
/// value or an address) on top of the stack.
fn simple_location(rng: &mut Rng, out: &mut Vec<Op>) {
    match rng.below(6) {
        0 => out.push(Op::Reg(rng.below(32) as u8)),
        1 => out.push(Op::Regx(rng.below(40))),
        2 => {
            let n = rng.below(12) as usize;
            out.push(Op::ImplicitValue(
                (0..n).map(|_| rng.next() as u8).collect(),
            ));
        }
        3 => {
            value(rng, out, 3);
            out.push(Op::StackValue);
        }
        _ => value(rng, out, 3),
    }
}

fn expression(rng: &mut Rng) -> Vec<Op> {
    let mut out = Vec::new();
    if rng.chance(40) {
        simple_location(rng, &mut out);
        return out;
    }
    let parts = 1 + rng.below(4);
    for _ in 0..parts {
        if rng.chance(85) {
            simple_location(rng, &mut out);
        }
        if rng.chance(60) {
            out.push(Op::Piece(1 + rng.below(8)));
        } else {
            out.push(Op::BitPiece {
                size: 1 + rng.below(40),
                offset: rng.below(40),
            });
        }
    }
    out
}

/// What both evaluators are compared on: a list of pieces (one with no size for a
/// non-composite result).
#[derive(Debug, PartialEq, Eq, Clone)]
enum Place {
    Undefined,
    Register { register: u16, bit_offset: u64 },
    Memory { bit_address: u128 },
    Implicit { bytes: Vec<u8>, bit_offset: u64 },
}

#[derive(Debug, PartialEq, Eq, Clone)]
struct Piece {
    bit_size: Option<u64>,
    place: Place,
}

fn gimli_eval(bytes: &[u8], t: &Target) -> Option<Vec<Piece>> {
    let enc = gimli::Encoding {
        address_size: 8,
        format: gimli::Format::Dwarf32,
        version: 5,
    };
    let mut eval = gimli::Expression(EndianSlice::new(bytes, LittleEndian)).evaluation(enc);
    let mut r = eval.evaluate().ok()?;
    loop {
        r = match r {
            gimli::EvaluationResult::Complete => break,
            gimli::EvaluationResult::RequiresRegister { register, .. } => {
                let v = *t.regs.get(usize::from(register.0))?;
                eval.resume_with_register(gimli::Value::Generic(v)).ok()?
            }
            gimli::EvaluationResult::RequiresMemory { address, size, .. } => {
                let m = t.mem(address, usize::from(size))?;
                let mut b = [0u8; 8];
                b[..m.len()].copy_from_slice(m);
                eval.resume_with_memory(gimli::Value::Generic(u64::from_le_bytes(b)))
                    .ok()?
            }
            gimli::EvaluationResult::RequiresFrameBase => {
                eval.resume_with_frame_base(FRAME_BASE).ok()?
            }
            gimli::EvaluationResult::RequiresCallFrameCfa => {
                eval.resume_with_call_frame_cfa(CFA).ok()?
            }
            gimli::EvaluationResult::RequiresEntryValue(e) => {
                // The expression is DW_OP_regN: register N's value at entry.
                let r = usize::from(e.0.slice().first()? - 0x50);
                let v = *t.entry_regs.get(r)?;
                eval.resume_with_entry_value(gimli::Value::Generic(v))
                    .ok()?
            }
            _ => return None,
        };
    }
    let pieces = eval.result();
    Some(
        pieces
            .into_iter()
            .map(|p| {
                let off = p.bit_offset.unwrap_or(0);
                let place = match p.location {
                    gimli::Location::Empty => Place::Undefined,
                    gimli::Location::Register { register } => Place::Register {
                        register: register.0,
                        bit_offset: off,
                    },
                    gimli::Location::Address { address } => Place::Memory {
                        bit_address: u128::from(address) * 8 + u128::from(off),
                    },
                    gimli::Location::Value { value } => Place::Implicit {
                        bytes: value.to_u64(u64::MAX).unwrap().to_le_bytes().to_vec(),
                        bit_offset: off,
                    },
                    gimli::Location::Bytes { value } => Place::Implicit {
                        bytes: value.slice().to_vec(),
                        bit_offset: off,
                    },
                    gimli::Location::ImplicitPointer { .. } => unreachable!(),
                };
                Piece {
                    bit_size: p.size_in_bits,
                    place,
                }
            })
            .collect(),
    )
}

fn locus_place(l: &SingleLocation) -> Place {
    let off = || u64::try_from(l.bit_offset).unwrap();
    match &l.storage {
        Storage::Undefined => Place::Undefined,
        Storage::Register(r) => Place::Register {
            register: *r,
            bit_offset: off(),
        },
        Storage::Memory { address_space: 0 } => Place::Memory {
            bit_address: l.bit_offset,
        },
        Storage::Implicit(bytes) => Place::Implicit {
            bytes: bytes.to_vec(),
            bit_offset: off(),
        },
        other => panic!("unexpected storage {other:?}"),
    }
}

fn locus_eval(bytes: &[u8], t: &Target) -> Result<Vec<Piece>, String> {
    let ops: Vec<Op> = decode(bytes, Encoding::default())
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(_, op)| op)
        .collect();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    let mut r = eval.evaluate().map_err(|e| e.to_string())?;
    loop {
        r = match r {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresRegister { register } => {
                let v = t.regs[usize::from(register)];
                eval.resume_with_register(&v.to_le_bytes())
            }
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let m = t.mem(address, usize::from(size)).ok_or("memory")?;
                eval.resume_with_memory(m)
            }
            EvaluationResult::RequiresFrameBase => eval.resume_with_frame_base(FRAME_BASE),
            EvaluationResult::RequiresCallFrameCfa => eval.resume_with_call_frame_cfa(CFA),
            EvaluationResult::RequiresEntryValue { register, .. } => {
                let r = register.ok_or("entry value of an expression")?;
                let v = t.entry_regs[usize::from(r)];
                eval.resume_with_entry_value(Entry::Value(Value::generic(v, 8)))
            }
            other => return Err(format!("unexpected request {other:?}")),
        }
        .map_err(|e| e.to_string())?;
    }
    let loc: Location = match eval.result().cloned() {
        Some(Entry::Location(l)) => l,
        Some(Entry::Value(v)) => Location::memory(0, v.to_u64()),
        None => Location::undefined(),
    };
    assert_eq!(loc.places.len(), 1, "one place");
    let top = &loc.places[0];
    Ok(match &top.storage {
        Storage::Composite(parts) => {
            assert_eq!(top.bit_offset, 0);
            parts
                .iter()
                .map(|p| {
                    assert_eq!(p.location.places.len(), 1);
                    Piece {
                        bit_size: Some(p.bit_size),
                        place: locus_place(&p.location.places[0]),
                    }
                })
                .collect()
        }
        _ => vec![Piece {
            bit_size: None,
            place: locus_place(top),
        }],
    })
}

/// Whether a piece runs past the end of its memory (the 64-bit address space)
/// or implicit storage.
fn past_end(p: &Piece) -> bool {
    let size = u128::from(p.bit_size.unwrap_or(0));
    match &p.place {
        Place::Memory { bit_address } => bit_address + size > 1 << 67,
        Place::Implicit { bytes, bit_offset } => {
            u128::from(*bit_offset) + size > bytes.len() as u128 * 8
        }
        Place::Undefined | Place::Register { .. } => false,
    }
}

#[test]
fn random_dwarf5_expressions_agree_with_gimli() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut compared = 0usize;
    let mut gimli_refused = 0usize;
    let mut out_of_range = 0usize;
    for case in 0..CASES {
        let target = Target::new(&mut rng);
        let ops = expression(&mut rng);
        let bytes = encode(&ops, Encoding::default()).unwrap();
        let Some(expected) = gimli_eval(&bytes, &target) else {
            gimli_refused += 1;
            continue;
        };
        let actual = match locus_eval(&bytes, &target) {
            Ok(a) => a,
            // A bit offset past the end of its storage (the 64-bit address space,
            // implicit bytes) is an evaluation error and a piece larger than what
            // remains of its storage ill-formed by the normative text; gimli checks
            // neither.
            Err(e)
                if (e.contains("outside its storage")
                    || e.contains("larger than what remains"))
                    && expected.iter().any(past_end) =>
            {
                out_of_range += 1;
                continue;
            }
            Err(e) => panic!(
                "case {case}: gimli evaluates, Locus fails: {e}\n{}",
                locus_dwarf::to_text(&ops)
            ),
        };
        assert_eq!(
            actual,
            expected,
            "case {case}: Locus (left) and gimli (right) differ on\n{}",
            locus_dwarf::to_text(&ops)
        );
        compared += 1;
    }
    eprintln!(
        "gimli oracle: {compared} expressions agree ({gimli_refused} refused by gimli, \
         {out_of_range} pieces past the end of memory or implicit storage that only Locus rejects)"
    );
    assert!(
        compared >= CASES * 9 / 10,
        "only {compared} of {CASES} compared"
    );
}
