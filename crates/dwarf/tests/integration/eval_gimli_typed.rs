//! gimli as an oracle for typed values: random DWARF 5 expressions built from
//! `DW_OP_const_type`, `regval_type`, `deref_type`, `convert`,
//! `reinterpret`, arithmetic, logic, shifts and comparisons on base types,
//! `DW_OP_entry_value`, `DW_OP_call4`, `DW_OP_addrx`/`constx`, ending in
//! `DW_OP_stack_value`, evaluated by gimli 0.31 and by Locus against the same
//! registers, memory and base type DIEs: both must fail, or both give the
//! same type and bits.
//!
//! Known divergences left out of the generator (each is a gimli choice
//! DWARF leaves open, or a gimli bug): `DW_OP_convert` from a signed integer
//! to a float (gimli converts the sign-extended bits as unsigned, so
//! `(float)(int)-2` is 1.8e19; Locus gives -2.0); shift counts at or above
//! the type's width; NaN payloads (compared as "both NaN").
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use gimli::{EndianSlice, LittleEndian};
use locus_dwarf::value::encoding as ate;
use locus_dwarf::{encode, Encoding, Entry, EvaluationResult, Location, Op, Storage, ValueType};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Base type DIEs: offset, DW_ATE, byte size. Offset 0 is generic.
const TYPES: [(u64, u8, u8); 9] = [
    (0, 0, 8),
    (0x30, ate::SIGNED, 4),
    (0x34, ate::FLOAT, 4),
    (0x38, ate::FLOAT, 8),
    (0x3c, ate::UNSIGNED, 1),
    (0x40, ate::UNSIGNED, 8),
    (0x44, ate::SIGNED, 2),
    (0x48, ate::SIGNED, 8),
    (0x4c, ate::UNSIGNED, 4),
];

fn is_float(t: usize) -> bool {
    TYPES[t].1 == ate::FLOAT
}

fn is_signed(t: usize) -> bool {
    TYPES[t].1 == ate::SIGNED
}

struct Target {
    registers: Vec<[u8; 8]>,
    memory: Vec<u8>,
    debug_addr: Vec<u64>,
}

const MEM: u64 = 0x1000;
/// DIE 0x100's location: add 3 (as the top's type allows: generic only).
const CALLEE: [u8; 2] = [0x33, 0x22];

fn float_bytes(rng: &mut Rng, size: u8) -> Vec<u8> {
    // Small halves, so no NaN and exact arithmetic most of the time.
    let x = (rng.below(200) as f64 - 100.0) * 0.5;
    if size == 4 {
        (x as f32).to_le_bytes().to_vec()
    } else {
        x.to_le_bytes().to_vec()
    }
}

/// Pushes a value of type `t`.
fn operand(rng: &mut Rng, t: usize, target: &Target, out: &mut Vec<Op>) {
    let (off, _, size) = TYPES[t];
    match rng.below(if is_float(t) { 1 } else { 4 }) {
        0 => {
            let value = if is_float(t) {
                float_bytes(rng, size)
            } else {
                rng.next().to_le_bytes()[..usize::from(size)].to_vec()
            };
            if off == 0 {
                out.push(Op::Const8u(u64::from_le_bytes(value.try_into().unwrap())));
            } else {
                out.push(Op::ConstType {
                    type_offset: off,
                    value,
                });
            }
        }
        1 => out.push(Op::RegvalType {
            register: rng.below(target.registers.len() as u64),
            type_offset: off,
        }),
        2 => {
            out.push(Op::Addr(MEM + rng.below(target.memory.len() as u64 - 8)));
            out.push(Op::DerefType {
                size,
                type_offset: off,
            });
        }
        _ => {
            // A generic value from .debug_addr or an entry value, converted.
            out.push(if rng.below(2) == 0 {
                Op::Constx(rng.below(target.debug_addr.len() as u64))
            } else {
                Op::EntryValue(vec![0x50 + rng.below(4) as u8])
            });
            if off != 0 {
                out.push(Op::Convert(off));
            }
        }
    }
}

fn expression(rng: &mut Rng, target: &Target) -> Vec<Op> {
    let mut out = Vec::new();
    let mut t = rng.below(TYPES.len() as u64) as usize;
    operand(rng, t, target, &mut out);
    for _ in 0..rng.below(4) {
        match rng.below(10) {
            0 => out.push(
                [Op::Neg, Op::Abs, Op::Not][rng.below(if is_float(t) { 2 } else { 3 }) as usize]
                    .clone(),
            ),
            1 if !is_float(t) => {
                // Shifts by a count below the width.
                let bits = u64::from(TYPES[t].2) * 8;
                out.push(Op::Constu(rng.below(bits)));
                out.push([Op::Shl, Op::Shr, Op::Shra][rng.below(3) as usize].clone());
            }
            2 => {
                operand(rng, t, target, &mut out);
                out.push(
                    [Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge][rng.below(6) as usize].clone(),
                );
                t = 0;
            }
            3 => {
                // Convert, except signed -> float (see the module docs).
                let to = rng.below(TYPES.len() as u64) as usize;
                if !(is_float(to) && (is_signed(t) || t == 0)) {
                    out.push(Op::Convert(TYPES[to].0));
                    t = to;
                }
            }
            4 => {
                let same: Vec<usize> = (0..TYPES.len())
                    .filter(|&u| TYPES[u].2 == TYPES[t].2)
                    .collect();
                let to = same[rng.below(same.len() as u64) as usize];
                out.push(Op::Reinterpret(TYPES[to].0));
                t = to;
            }
            5 if t == 0 => out.push(Op::Call4(0x100)),
            5 => out.push(Op::PlusUconst(rng.below(1000))),
            _ => {
                operand(rng, t, target, &mut out);
                let ops = if is_float(t) {
                    vec![Op::Plus, Op::Minus, Op::Mul, Op::Div]
                } else {
                    vec![
                        Op::Plus,
                        Op::Minus,
                        Op::Mul,
                        Op::Div,
                        Op::Mod,
                        Op::And,
                        Op::Or,
                        Op::Xor,
                    ]
                };
                out.push(ops[rng.below(ops.len() as u64) as usize].clone());
            }
        }
    }
    out.push(Op::StackValue);
    out
}

fn gimli_type(offset: u64) -> gimli::ValueType {
    let (_, enc, size) = TYPES.iter().find(|(o, ..)| *o == offset).copied().unwrap();
    if offset == 0 {
        return gimli::ValueType::Generic;
    }
    gimli::ValueType::from_encoding(gimli::DwAte(enc), u64::from(size)).unwrap()
}

fn gimli_value(ty: gimli::ValueType, bytes: &[u8]) -> gimli::Value {
    if ty == gimli::ValueType::Generic {
        return gimli::Value::Generic(u64::from_le_bytes(bytes[..8].try_into().unwrap()));
    }
    gimli::Value::parse(ty, EndianSlice::new(bytes, LittleEndian)).unwrap()
}

fn gimli_bits(v: gimli::Value) -> (u8, u64, bool) {
    use gimli::Value as V;
    match v {
        V::Generic(x) => (8, x, false),
        V::I8(x) => (1, x as u8 as u64, false),
        V::U8(x) => (1, u64::from(x), false),
        V::I16(x) => (2, x as u16 as u64, false),
        V::U16(x) => (2, u64::from(x), false),
        V::I32(x) => (4, x as u32 as u64, false),
        V::U32(x) => (4, u64::from(x), false),
        V::I64(x) => (8, x as u64, false),
        V::U64(x) => (8, x, false),
        V::F32(x) => (4, u64::from(x.to_bits()), x.is_nan()),
        V::F64(x) => (8, x.to_bits(), x.is_nan()),
    }
}

/// (bytes of the result, is a NaN) or None on error.
fn gimli_eval(bytes: &[u8], target: &Target) -> Option<(Vec<u8>, bool)> {
    let encoding = gimli::Encoding {
        address_size: 8,
        format: gimli::Format::Dwarf32,
        version: 5,
    };
    let mut eval = gimli::Expression(EndianSlice::new(bytes, LittleEndian)).evaluation(encoding);
    let mut r = eval.evaluate().ok()?;
    loop {
        r = match r {
            gimli::EvaluationResult::Complete => break,
            gimli::EvaluationResult::RequiresRegister {
                register,
                base_type,
            } => {
                let ty = gimli_type(base_type.0 as u64);
                let v = gimli_value(ty, &target.registers[usize::from(register.0)]);
                eval.resume_with_register(v).ok()?
            }
            gimli::EvaluationResult::RequiresMemory {
                address,
                size,
                base_type,
                ..
            } => {
                let start = (address - MEM) as usize;
                let b = &target.memory[start..start + usize::from(size)];
                let ty = gimli_type(base_type.0 as u64);
                let v = if ty == gimli::ValueType::Generic {
                    let mut full = [0u8; 8];
                    full[..b.len()].copy_from_slice(b);
                    gimli::Value::Generic(u64::from_le_bytes(full))
                } else {
                    gimli_value(ty, b)
                };
                eval.resume_with_memory(v).ok()?
            }
            gimli::EvaluationResult::RequiresBaseType(off) => {
                eval.resume_with_base_type(gimli_type(off.0 as u64)).ok()?
            }
            gimli::EvaluationResult::RequiresIndexedAddress { index, .. } => eval
                .resume_with_indexed_address(target.debug_addr[index.0])
                .ok()?,
            gimli::EvaluationResult::RequiresEntryValue(e) => {
                let reg = usize::from(e.0.slice()[0] - 0x50);
                let v = u64::from_le_bytes(target.registers[reg]) ^ 0xff;
                eval.resume_with_entry_value(gimli::Value::Generic(v))
                    .ok()?
            }
            gimli::EvaluationResult::RequiresAtLocation(_) => eval
                .resume_with_at_location(EndianSlice::new(&CALLEE, LittleEndian))
                .ok()?,
            gimli::EvaluationResult::RequiresRelocatedAddress(a) => {
                eval.resume_with_relocated_address(a).ok()?
            }
            other => panic!("unexpected gimli request {other:?}"),
        };
    }
    let pieces = eval.result();
    let [piece] = pieces.as_slice() else {
        return None;
    };
    match piece.location {
        gimli::Location::Value { value } => {
            let (size, bits, nan) = gimli_bits(value);
            Some((bits.to_le_bytes()[..usize::from(size)].to_vec(), nan))
        }
        _ => None,
    }
}

fn locus_eval(ops: &[Op], target: &Target) -> Option<(Vec<u8>, bool)> {
    let mut eval = locus_dwarf::Evaluation::new(ops, Encoding::default());
    let mut r = eval.evaluate().ok()?;
    loop {
        r = match r {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresRegister { register } => eval
                .resume_with_register(&target.registers[usize::from(register)])
                .ok()?,
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let start = (address - MEM) as usize;
                eval.resume_with_memory(&target.memory[start..start + usize::from(size)])
                    .ok()?
            }
            EvaluationResult::RequiresBaseType { offset } => {
                let (_, enc, size) = TYPES.iter().find(|(o, ..)| *o == offset).copied().unwrap();
                eval.resume_with_base_type(enc, u64::from(size)).ok()?
            }
            EvaluationResult::RequiresIndexedAddress { index, .. } => eval
                .resume_with_indexed_address(target.debug_addr[index as usize])
                .ok()?,
            EvaluationResult::RequiresEntryValue { register, .. } => {
                let v = u64::from_le_bytes(target.registers[usize::from(register.unwrap())]) ^ 0xff;
                eval.resume_with_entry_value(Entry::Value(locus_dwarf::Value::generic(v, 8)))
                    .ok()?
            }
            EvaluationResult::RequiresCallee { .. } => eval.resume_with_callee(&CALLEE).ok()?,
            other => panic!("unexpected request {other:?}"),
        };
    }
    let Some(Entry::Location(Location { places })) = eval.result().cloned() else {
        return None;
    };
    let [place] = places.as_slice() else {
        return None;
    };
    let Storage::Implicit(bytes) = &place.storage else {
        return None;
    };
    // The type of the stack value decides NaN-ness; recover it from the
    // last operation's type is not possible here, so test both widths.
    let nan = match bytes.len() {
        4 => f32::from_le_bytes(bytes[..4].try_into().unwrap()).is_nan(),
        8 => f64::from_le_bytes(bytes[..8].try_into().unwrap()).is_nan(),
        _ => false,
    };
    Some((bytes.to_vec(), nan))
}

#[test]
fn typed_expressions_agree_with_gimli() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let target = Target {
        registers: (0..6).map(|_| rng.next().to_le_bytes()).collect(),
        memory: (0..64).map(|_| rng.next() as u8).collect(),
        debug_addr: (0..4).map(|_| rng.next()).collect(),
    };
    let (mut agree_ok, mut agree_err) = (0, 0);
    let mut mismatches = Vec::new();
    for _ in 0..10_000 {
        let ops = expression(&mut rng, &target);
        let bytes = encode(&ops, Encoding::default()).unwrap();
        let g = gimli_eval(&bytes, &target);
        let l = locus_eval(&ops, &target);
        match (&g, &l) {
            (None, None) => agree_err += 1,
            (Some((gb, gnan)), Some((lb, lnan)))
                if gb == lb || (gb.len() == lb.len() && *gnan && *lnan) =>
            {
                agree_ok += 1
            }
            _ => {
                if mismatches.len() < 10 {
                    mismatches.push(format!(
                        "{}\n  gimli {g:x?}\n  locus {l:x?}",
                        locus_dwarf::to_text(&ops).replace('\n', "; ")
                    ));
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // The generator must mostly make evaluable expressions.
    eprintln!("{agree_ok} equal values, {agree_err} errors in both");
    assert!(
        agree_ok > 7000,
        "only {agree_ok} values ({agree_err} shared errors)"
    );
    let _ = ValueType::Generic;
}
