//! Property test: the evaluator's arithmetic on two generic values (which
//! it computes itself for every binary operation but division and modulo,
//! and for `DW_OP_plus_uconst`) gives what [`Value::binary`], the general
//! arithmetic, gives: the same value or the same refusal, for random and
//! edge operands (shift counts around the address size, sign bits), every
//! binary operation, address sizes 8 and 4, from bytes, decoded
//! operations and a pre-decoded expression.

#![cfg(feature = "binary")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::binary::Decoded;
use locus_dwarf::value::BinaryOp;
use locus_dwarf::{encode, Encoding, Entry, Evaluation, EvaluationResult, Op, Value, ValueType};
use proptest::prelude::*;

const OPS: [(Op, BinaryOp); 11] = [
    (Op::And, BinaryOp::And),
    (Op::Div, BinaryOp::Div),
    (Op::Minus, BinaryOp::Minus),
    (Op::Mod, BinaryOp::Mod),
    (Op::Mul, BinaryOp::Mul),
    (Op::Or, BinaryOp::Or),
    (Op::Plus, BinaryOp::Plus),
    (Op::Shl, BinaryOp::Shl),
    (Op::Shr, BinaryOp::Shr),
    (Op::Shra, BinaryOp::Shra),
    (Op::Xor, BinaryOp::Xor),
];

/// The value an evaluation ends with, or `None` if it fails.
fn value_of(eval: &mut Evaluation<'_>) -> Option<Value> {
    match eval.evaluate() {
        Ok(EvaluationResult::Complete) => match eval.result().cloned() {
            Some(Entry::Value(v)) => Some(v),
            other => panic!("not a value: {other:?}"),
        },
        Ok(other) => panic!("unexpected request {other:?}"),
        Err(_) => None,
    }
}

/// `ops` from bytes, decoded and pre-decoded: all give `expected`.
fn check(ops: &[Op], address_size: u8, expected: Option<Value>) {
    let enc = Encoding {
        address_size,
        ..Encoding::default()
    };
    let bytes = encode(ops, enc).unwrap();
    assert_eq!(
        value_of(&mut Evaluation::new(&bytes, enc)),
        expected,
        "bytes {ops:?}"
    );
    assert_eq!(
        value_of(&mut Evaluation::new(ops, enc)),
        expected,
        "ops {ops:?}"
    );
    let decoded = Decoded::new(&bytes, enc).unwrap();
    assert_eq!(
        value_of(&mut decoded.evaluation(enc)),
        expected,
        "pre-decoded {ops:?}"
    );
}

/// Operands: random, or near the edges (small shift counts around the
/// address size's bits, sign bits, all ones).
fn operand() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..70,
        Just(u64::MAX),
        Just(1 << 63),
        Just(1 << 31),
        Just(0xffff_ffff),
        Just(1 << 15),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generic_arithmetic_is_value_binary(
        a in operand(),
        b in operand(),
        which in 0usize..11,
        address_size in prop_oneof![Just(8u8), Just(4u8)],
    ) {
        let (op, binary) = OPS[which].clone();
        let (x, y) = (Value::generic(a, address_size), Value::generic(b, address_size));
        let expected = x.binary(binary, y, address_size).ok();
        check(&[Op::Constu(a), Op::Constu(b), op], address_size, expected);
        // DW_OP_plus_uconst: the constant in the popped value's type.
        let expected = x
            .binary(BinaryOp::Plus, Value::new(ValueType::Generic, b, address_size), address_size)
            .ok();
        check(&[Op::Constu(a), Op::PlusUconst(b)], address_size, expected);
    }
}
