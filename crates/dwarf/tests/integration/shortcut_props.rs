//! Property test: the evaluator's shortcuts (whole expressions of the shapes
//! optimized code emits most, evaluated or asked for without the loop: a lone
//! `DW_OP_regN`, a constant then `DW_OP_stack_value`, a lone `DW_OP_fbreg`,
//! `DW_OP_entry_value(DW_OP_regN) DW_OP_stack_value`) give exactly what the
//! general loop gives. The reference is a traced evaluation (which never takes
//! a shortcut); it is compared with the untraced ways in (decoded operations,
//! bytes, a restarted evaluation, a pre-decoded expression) on generated
//! expressions of those shapes, near misses and longer ones, with every
//! request answered the same way (entry values as values and as locations),
//! step limits around the shortcuts' operation counts and an entry pushed
//! first or not: the same requests, stacks, operation indices, results and
//! errors.

#![cfg(feature = "binary")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::binary::Decoded;
use locus_dwarf::{
    encode, Encoding, Entry, Evaluation, EvaluationResult, LocationDescription, Op, Value,
    ValueType,
};
use proptest::prelude::*;

/// How the entry value requests are answered.
#[derive(Clone, Copy, Debug)]
enum EntryAnswer {
    Generic,
    Typed,
    Memory,
    Register,
}

/// Everything observable of one evaluation: each request with the stack and
/// operation index at it, then the result (or the error's text).
fn transcript(eval: &mut Evaluation<'_>, answer: EntryAnswer) -> Vec<String> {
    let mut seen = Vec::new();
    let mut r = eval.evaluate();
    // Steps are bounded by the step limit; requests by this.
    let mut requests = 0;
    while requests < 1000 {
        let request = match r {
            Err(e) => {
                seen.push(format!("error {e} at {}", eval.pc()));
                return seen;
            }
            Ok(EvaluationResult::Stepped) => {
                r = eval.evaluate();
                continue;
            }
            Ok(request) => request,
        };
        requests += 1;
        seen.push(format!(
            "{request:?} at {} with {:?}",
            eval.pc(),
            eval.stack()
        ));
        r = match request {
            EvaluationResult::Complete => {
                seen.push(format!(
                    "{:?} {:?}",
                    eval.result().cloned(),
                    eval.location_result()
                ));
                return seen;
            }
            EvaluationResult::RequiresRegister { register } => {
                eval.resume_with_register(&(0x7fff_0000_1000 + u64::from(register)).to_le_bytes())
            }
            EvaluationResult::RequiresMemory { address, .. } => {
                eval.resume_with_memory(&address.wrapping_mul(3).to_le_bytes())
            }
            EvaluationResult::RequiresFrameBase => eval.resume_with_frame_base(0x7fff_0000_8000),
            EvaluationResult::RequiresCallFrameCfa => {
                eval.resume_with_call_frame_cfa(0x7fff_0000_9000)
            }
            EvaluationResult::RequiresEntryValue { register, .. } => {
                let n = u64::from(register.unwrap_or(99)) + 40;
                eval.resume_with_entry_value(match answer {
                    EntryAnswer::Generic => Entry::Value(Value::generic(n, 8)),
                    EntryAnswer::Typed => Entry::Value(Value::new(ValueType::Signed(2), n, 8)),
                    EntryAnswer::Memory => Entry::Location(LocationDescription::memory(0, n)),
                    EntryAnswer::Register => Entry::Location(LocationDescription::register(3)),
                })
            }
            EvaluationResult::RequiresIndexedAddress { .. } => {
                eval.resume_with_indexed_address(0x40_1000)
            }
            other => {
                seen.push(format!("unanswered {other:?}"));
                return seen;
            }
        };
    }
    seen.push("too many requests".into());
    seen
}

/// One operation of a shortcut's shape, or near one.
fn op(kind: u8, a: u64, b: i64) -> Op {
    let r = (a % 40) as u8;
    match kind % 15 {
        0 => Op::Reg(r),
        1 => Op::Lit(r % 32),
        2 => Op::Constu(a),
        3 => Op::Consts(b),
        4 => Op::StackValue,
        5 => Op::Fbreg(b),
        // DW_OP_entry_value(DW_OP_regN), the shortcut's block.
        6 => Op::EntryValue(vec![0x50 + r % 32]),
        // Other blocks: regx, breg, empty.
        7 => Op::EntryValue(vec![0x90, r]),
        8 => Op::EntryValue(vec![0x70 + r % 32, (b as u8) & 0x7f]),
        9 => Op::EntryValue(Vec::new()),
        10 => Op::Piece(1 + a % 8),
        11 => Op::Plus,
        12 => Op::Deref,
        13 => Op::ImplicitValue((0..(a % 20) as u8).collect()),
        _ => Op::Const1u(a as u8),
    }
}

/// An expression: mostly a shortcut's exact shape (its operands random),
/// else one to six operations of the same kinds (pieces of registers and implicit values among them).
fn expression() -> impl Strategy<Value = Vec<Op>> {
    let one = (any::<u8>(), any::<u64>(), any::<i64>()).prop_map(|(k, a, b)| op(k, a, b));
    let shape = (0u8..7, any::<u64>(), any::<i64>()).prop_map(|(s, a, b)| match s {
        0 => vec![op(0, a, b)],
        1 => vec![op(1 + (a % 3) as u8, a, b), Op::StackValue],
        2 => vec![op(5, a, b)],
        3 => vec![op(6, a, b), Op::StackValue],
        4 => vec![op(6 + (a % 4) as u8, a, b), Op::StackValue],
        5 => vec![op(5, a, b), Op::StackValue],
        _ => vec![op(13, a, b)],
    });
    prop_oneof![3 => shape, 2 => prop::collection::vec(one, 1..7)]
}

/// Every way in for `ops` gives the traced evaluation's transcript.
fn check(ops: &[Op], address_size: u8, max_steps: u64, pushed: bool, answer: EntryAnswer) {
    let enc = Encoding {
        address_size,
        ..Encoding::default()
    };
    let Ok(bytes) = encode(ops, enc) else {
        return;
    };
    let entry = Entry::Value(Value::generic(0x1234, address_size));
    let prepare = |eval: &mut Evaluation<'_>, trace: bool| {
        eval.set_trace(trace);
        eval.set_max_steps(max_steps);
        if pushed {
            eval.push(entry.clone());
        }
    };
    let mut reference = Evaluation::new(&bytes, enc);
    prepare(&mut reference, true);
    let expected = transcript(&mut reference, answer);
    let mut traced_ops = Evaluation::new(ops, enc);
    prepare(&mut traced_ops, true);
    assert_eq!(transcript(&mut traced_ops, answer), expected, "traced ops");

    let mut eval = Evaluation::new(ops, enc);
    prepare(&mut eval, false);
    assert_eq!(transcript(&mut eval, answer), expected, "ops");
    let mut eval = Evaluation::new(&bytes, enc);
    prepare(&mut eval, false);
    assert_eq!(transcript(&mut eval, answer), expected, "bytes");
    // Restarted after an evaluation that left a composite, a request
    // outstanding, or that a shortcut completed.
    let earlier: [&[u8]; 3] = [
        &[0x53, 0x93, 0x04, 0x54, 0x93, 0x04],
        &[0x91, 0x08],
        &[0x55],
    ];
    for first in earlier {
        let mut eval = Evaluation::new(first, enc);
        eval.set_max_steps(max_steps);
        let _ = eval.evaluate();
        eval.restart(&bytes, enc);
        if pushed {
            eval.push(entry.clone());
        }
        assert_eq!(transcript(&mut eval, answer), expected, "restart");
    }
    let decoded = Decoded::new(&bytes, enc).unwrap();
    let mut eval = decoded.evaluation(enc);
    prepare(&mut eval, false);
    assert_eq!(transcript(&mut eval, answer), expected, "pre-decoded");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn shortcuts_give_what_the_loop_gives(
        ops in expression(),
        address_size in prop_oneof![Just(8u8), Just(4u8), Just(2u8)],
        max_steps in prop_oneof![Just(0u64), Just(1), Just(2), Just(3), Just(100)],
        pushed in any::<bool>(),
        answer in prop_oneof![
            Just(EntryAnswer::Generic),
            Just(EntryAnswer::Typed),
            Just(EntryAnswer::Memory),
            Just(EntryAnswer::Register)
        ],
    ) {
        check(&ops, address_size, max_steps, pushed, answer);
    }
}

/// The shortcuts' shapes from bytes that decoded operations cannot spell:
/// operands in longer LEB128 forms than needed, and truncated ones.
#[test]
fn unusual_bytes_give_what_the_loop_gives() {
    let cases: [&[u8]; 18] = [
        &[],
        &[0x55, 0x93],
        &[0x93, 0x04],
        &[0x55, 0x93, 0x80, 0x01],
        &[
            0x55, 0x93, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ],
        &[0x11, 0x7f, 0x9f, 0x93, 0x08, 0x55, 0x93, 0x04, 0x55],
        &[0x10, 0x80, 0x01, 0x9f, 0x93, 0x08, 0x93, 0x04],
        &[0x31, 0x93, 0x04],
        &[0x91, 0x80, 0x80, 0x00],
        &[
            0x91, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ],
        &[0x91],
        &[0x91, 0x80],
        &[0x10, 0x80, 0x01, 0x9f],
        &[
            0x11, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x9f,
        ],
        &[0xa3, 0x81, 0x00, 0x55, 0x9f],
        &[0xa3, 0x01, 0x55],
        &[0xa3, 0x01, 0x55, 0x9f, 0x9f],
        &[0xa3, 0x02, 0x55, 0x9f],
    ];
    for bytes in cases {
        for address_size in [8, 4, 3] {
            for offset_size in [8, 4, 0] {
                let enc = Encoding {
                    address_size,
                    offset_size,
                    ..Encoding::default()
                };
                for max_steps in [0, 1, 2, 100] {
                    for answer in [EntryAnswer::Generic, EntryAnswer::Register] {
                        let mut reference = Evaluation::new(bytes, enc);
                        reference.set_trace(true);
                        reference.set_max_steps(max_steps);
                        let expected = transcript(&mut reference, answer);
                        let mut eval = Evaluation::new(bytes, enc);
                        eval.set_max_steps(max_steps);
                        assert_eq!(transcript(&mut eval, answer), expected, "{bytes:02x?}");
                    }
                }
            }
        }
    }
}

/// Composites of registers and implicit values (the compact piece path) up
/// to and past the limit on a location's weight, and with parts larger than
/// their implicit value: the same results and errors as the general path.
#[test]
fn pieces_give_what_the_loop_gives() {
    let enc = Encoding::default();
    for n in [1, 2, 3, 510, 511, 512, 513] {
        for kind in 0..4 {
            let mut ops = Vec::new();
            for i in 0..n {
                match (kind, i % 2) {
                    (0, _) | (2, 0) => ops.push(Op::Reg((i % 32) as u8)),
                    (1, _) | (2, _) => ops.extend([Op::Lit(1), Op::StackValue]),
                    // A part larger than its implicit value.
                    _ => ops.extend([Op::Const1u(1), Op::StackValue]),
                }
                ops.push(Op::Piece(if kind == 3 && i == n - 1 { 9 } else { 1 }));
            }
            let bytes = encode(&ops, enc).unwrap();
            let mut reference = Evaluation::new(&bytes, enc);
            reference.set_trace(true);
            let expected = transcript(&mut reference, EntryAnswer::Generic);
            let mut eval = Evaluation::new(&bytes, enc);
            assert_eq!(
                transcript(&mut eval, EntryAnswer::Generic),
                expected,
                "{n} {kind}"
            );
            let mut eval = Evaluation::new(&ops, enc);
            assert_eq!(
                transcript(&mut eval, EntryAnswer::Generic),
                expected,
                "{n} {kind}"
            );
        }
    }
}
