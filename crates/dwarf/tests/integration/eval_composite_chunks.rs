//! Property test: composites of registers and constants, which the
//! evaluator's composite shortcut reads a few parts at a time before it
//! writes them into the result, give what the general loop gives (a traced
//! evaluation, which never takes a shortcut) for every count of parts around
//! the shortcut's chunk size, with the expression broken after any part (an
//! operation the shortcut does not take, a part larger than its value, a
//! truncated piece), from bytes, decoded operations, a restarted evaluation
//! that kept an earlier composite's vector, and a pre-decoded expression.

#![cfg(feature = "binary")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::binary::Decoded;
use locus_dwarf::{encode, Encoding, Evaluation, EvaluationResult, Op};
use proptest::prelude::*;

/// The result (or request, or error) of an evaluation, as text.
fn outcome(eval: &mut Evaluation<'_>) -> String {
    let mut r = eval.evaluate();
    for _ in 0..10_000 {
        match r {
            Ok(EvaluationResult::Stepped) => r = eval.evaluate(),
            Ok(EvaluationResult::Complete) => {
                return format!("{:?} at {}", eval.result().cloned(), eval.pc())
            }
            Ok(other) => return format!("{other:?} at {} with {:?}", eval.pc(), eval.stack()),
            Err(e) => return format!("error {e} at {}", eval.pc()),
        }
    }
    "did not end".into()
}

/// Part `i` of kind `k`: a register, a literal, `DW_OP_constu` or
/// `DW_OP_consts` (then `DW_OP_stack_value`), and its piece.
fn part(k: u8, v: u64, size: u64, ops: &mut Vec<Op>) {
    match k % 4 {
        0 => ops.push(Op::Reg((v % 32) as u8)),
        1 => ops.extend([Op::Lit((v % 32) as u8), Op::StackValue]),
        2 => ops.extend([Op::Constu(v), Op::StackValue]),
        _ => ops.extend([Op::Consts(v as i64), Op::StackValue]),
    }
    ops.push(Op::Piece(size));
}

fn check(ops: &[Op], address_size: u8) {
    let enc = Encoding {
        address_size,
        ..Encoding::default()
    };
    let Ok(bytes) = encode(ops, enc) else {
        return;
    };
    let mut reference = Evaluation::new(&bytes, enc);
    reference.set_trace(true);
    let expected = outcome(&mut reference);
    let mut eval = Evaluation::new(&bytes, enc);
    assert_eq!(outcome(&mut eval), expected, "bytes {bytes:02x?}");
    let mut eval = Evaluation::new(ops, enc);
    assert_eq!(outcome(&mut eval), expected, "ops {ops:?}");
    // Restarted after a composite of 3 parts (its vector kept) and after
    // one of 20.
    for earlier in [3usize, 20] {
        let mut first = Vec::new();
        for i in 0..earlier {
            first.extend([0x50 + (i % 32) as u8, 0x93, 0x04]);
        }
        let mut eval = Evaluation::new(&first, enc);
        let _ = outcome(&mut eval);
        eval.restart(&bytes, enc);
        assert_eq!(outcome(&mut eval), expected, "restart {bytes:02x?}");
    }
    let decoded = Decoded::new(&bytes, enc).unwrap();
    assert_eq!(
        outcome(&mut decoded.evaluation(enc)),
        expected,
        "pre-decoded {bytes:02x?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn composites_give_what_the_loop_gives(
        parts in prop::collection::vec((any::<u8>(), any::<u64>(), 1u64..9), 1..26),
        broken_at in any::<prop::sample::Index>(),
        how in 0u8..5,
        address_size in prop_oneof![Just(8u8), Just(4u8)],
    ) {
        let at = broken_at.index(parts.len() + 1);
        let mut ops = Vec::new();
        for (i, &(k, v, size)) in parts.iter().enumerate() {
            if i == at {
                match how {
                    // An operation the shortcut does not take.
                    0 => ops.extend([Op::Breg(3, 8), Op::Piece(8)]),
                    // A part larger than its constant.
                    1 => ops.extend([Op::Lit(1), Op::StackValue, Op::Piece(9)]),
                    // A piece without a location (an empty part).
                    2 => ops.push(Op::Piece(4)),
                    // A register without its piece, then on.
                    3 => ops.push(Op::Reg(5)),
                    _ => {}
                }
            }
            part(k, v, size, &mut ops);
        }
        check(&ops, address_size);
    }
}

/// Every count of parts from 1 to 40, each kind, unbroken: across the
/// shortcut's chunks of parts.
#[test]
fn every_count_across_chunks() {
    for n in 1..=40u64 {
        for kind in 0..5u8 {
            let mut ops = Vec::new();
            for i in 0..n {
                part(
                    if kind == 4 { i as u8 } else { kind },
                    i * 977,
                    1 + i % 8,
                    &mut ops,
                );
            }
            check(&ops, 8);
        }
    }
}
