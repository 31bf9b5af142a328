//! Typed values, the requests for base types, entry values, callees,
//! `.debug_addr` and TLS, and the extension operations beyond the spec's
//! worked examples (DWARF 5 §2.5; the AMD extension's `DW_OP_LLVM_*`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::eval_support;
use locus_dwarf::ErrorDetail;

use eval_support::{evaluate, run_text, Ctx};
use locus_dwarf::value::encoding as ate;
use locus_dwarf::{
    decode, encode, parse_text, to_text, Encoding, Entry, Error, ErrorKind, Evaluation,
    EvaluationResult, Expression, Location, Op, Part, SingleLocation, Storage, Value, ValueType,
};

const INT: u64 = 0x30; // int, 4 bytes
const FLOAT: u64 = 0x34; // float
const DOUBLE: u64 = 0x38; // double
const UCHAR: u64 = 0x3c; // unsigned char
const ULONG: u64 = 0x40; // unsigned long
const SHORT: u64 = 0x44; // short
const I128: u64 = 0x48; // __int128: not supported
const LONG: u64 = 0x4c; // long, 8 bytes
const U24: u64 = 0x50; // clang's DW_ATE_unsigned_24: 3 bytes
const I56: u64 = 0x54; // a 7-byte signed integer

fn ctx() -> Ctx {
    let mut c = Ctx::default();
    c.base_types.insert(INT, (ate::SIGNED, 4));
    c.base_types.insert(FLOAT, (ate::FLOAT, 4));
    c.base_types.insert(DOUBLE, (ate::FLOAT, 8));
    c.base_types.insert(UCHAR, (ate::UNSIGNED_CHAR, 1));
    c.base_types.insert(ULONG, (ate::UNSIGNED, 8));
    c.base_types.insert(SHORT, (ate::SIGNED, 2));
    c.base_types.insert(I128, (ate::SIGNED, 16));
    c.base_types.insert(LONG, (ate::SIGNED, 8));
    c.base_types.insert(U24, (ate::UNSIGNED, 3));
    c.base_types.insert(I56, (ate::SIGNED, 7));
    // r0: 0x1000; r1: -2 as int; r2: 1.5f; r3: a 16-byte vector register.
    c.registers.insert(0, 0x1000u64.to_le_bytes().to_vec());
    c.registers.insert(1, (-2i64).to_le_bytes().to_vec());
    c.registers
        .insert(2, u64::from(1.5f32.to_bits()).to_le_bytes().to_vec());
    c.registers.insert(3, (0u8..16).collect());
    c.memory.push((0, 0x1000, (0u8..64).collect()));
    c.memory.push((1, 0x20, vec![0xaa, 0xbb, 0xcc, 0xdd]));
    c
}

fn value(text: &str) -> Value {
    match run_text(text, &mut ctx()).unwrap() {
        Entry::Value(v) => v,
        e => panic!("{text}: expected a value, got {e:?}"),
    }
}

fn location(text: &str) -> Location {
    match run_text(text, &mut ctx()).unwrap() {
        Entry::Location(l) => l,
        e => panic!("{text}: expected a location, got {e:?}"),
    }
}

fn eval_error(text: &str) -> (usize, &'static str, ErrorKind) {
    match run_text(text, &mut ctx()).map_err(locus_dwarf::Error::into_detail) {
        Err(ErrorDetail::Eval { index, op, kind }) => (index, op, kind),
        other => panic!("{text}: expected an evaluation error, got {other:?}"),
    }
}

fn t(ty: ValueType, bits: u64) -> Value {
    Value::new(ty, bits, 8)
}

// ---------------------------------------------------------------------------
// Typed values

#[test]
fn const_type_regval_type_and_deref_type() {
    let f = value("DW_OP_const_type 0x34 [0000c03f]");
    assert_eq!(f.ty, ValueType::Float(4));
    assert_eq!(f.to_f64(), Some(1.5));
    assert_eq!(
        value("DW_OP_const_type 0x30 [feffffff]"),
        t(ValueType::Signed(4), 0xffff_fffe)
    );
    // regval_type reads the low bytes of the register as the type.
    assert_eq!(
        value("DW_OP_regval_type 1 0x30"),
        t(ValueType::Signed(4), 0xffff_fffe)
    );
    assert_eq!(value("DW_OP_regval_type 2 0x34").to_f64(), Some(1.5));
    // deref_type: 2 bytes at 0x1004 as short, and a 1-byte read extended
    // by the type's signedness.
    assert_eq!(
        value("DW_OP_addr 0x1004 DW_OP_deref_type 2 0x44"),
        t(ValueType::Signed(2), 0x0504)
    );
    assert_eq!(
        value("DW_OP_addr 0x1004 DW_OP_deref_type 1 0x3c"),
        t(ValueType::Unsigned(1), 4)
    );
    // xderef_type in address space 1 (the address on top, the space below),
    // and xderef_size.
    assert_eq!(
        value("DW_OP_lit1 DW_OP_constu 0x21 DW_OP_xderef_type 2 0x44"),
        t(ValueType::Signed(2), 0xccbb)
    );
    assert_eq!(
        value("DW_OP_lit1 DW_OP_constu 0x22 DW_OP_xderef_size 1"),
        Value::generic(0xcc, 8)
    );
    // A const_type block of the wrong size is ill-formed.
    let (i, op, e) = eval_error("DW_OP_const_type 0x30 [0102]");
    assert_eq!(
        (i, op, e.clone()),
        (0, "DW_OP_const_type", ErrorKind::BadSize(2))
    );
    assert!(e.is_ill_formed());
    // deref_type larger than its type.
    let (_, _, e) = eval_error("DW_OP_addr 0x1000 DW_OP_deref_type 4 0x44");
    assert_eq!(e, ErrorKind::BadSize(4));
}

#[test]
fn base_types_are_requested_once_and_can_be_preset() {
    let ops = parse_text(
        "DW_OP_const_type 0x30 [01000000] DW_OP_const_type 0x30 [02000000] DW_OP_plus",
        |_| None,
    )
    .unwrap();
    let mut c = ctx();
    let eval = evaluate(&ops, &mut c, Encoding::default()).unwrap();
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Value(t(ValueType::Signed(4), 3)))
    );
    let asked: Vec<_> = c
        .log
        .iter()
        .filter(|r| matches!(r, EvaluationResult::RequiresBaseType { .. }))
        .collect();
    assert_eq!(asked, [&EvaluationResult::RequiresBaseType { offset: INT }]);

    let mut eval = Evaluation::new(&ops, Encoding::default());
    eval.set_base_type(INT, ValueType::Signed(4));
    assert_eq!(eval.evaluate().unwrap(), EvaluationResult::Complete);

    // A type this evaluator cannot compute with is an error naming the DIE.
    let (_, op, e) = eval_error("DW_OP_const_type 0x48 [00000000000000000000000000000000]");
    assert_eq!(op, "DW_OP_const_type");
    assert_eq!(
        e,
        ErrorKind::UnsupportedBaseType {
            offset: I128,
            encoding: ate::SIGNED,
            byte_size: 16
        }
    );
}

/// Integers of any size up to 8 bytes: clang converts the pieces of a struct passed in
/// registers to 3- and 7-byte types (`DW_ATE_unsigned_24`, `_56`); they were "not
/// supported" and the whole struct an error.
#[test]
fn odd_sized_integers_convert_and_extend() {
    assert_eq!(
        value("DW_OP_const4u 0x11223344 DW_OP_convert 0x50"),
        t(ValueType::Unsigned(3), 0x223344)
    );
    // Sign-extended from its 56 bits when converted to a wider signed type.
    assert_eq!(
        value("DW_OP_const8u 0x00ffffffffffffff DW_OP_convert 0x54 DW_OP_convert 0x4c"),
        t(ValueType::Signed(8), u64::MAX)
    );
    // Zero-extended from 24 bits.
    assert_eq!(
        value("DW_OP_const4u 0xffffffff DW_OP_convert 0x50 DW_OP_convert 0x40"),
        t(ValueType::Unsigned(8), 0xffffff)
    );
}

#[test]
fn typed_arithmetic_needs_equal_types() {
    // Wraps at the type's size.
    assert_eq!(
        value("DW_OP_const_type 0x3c [ff] DW_OP_const_type 0x3c [02] DW_OP_plus"),
        t(ValueType::Unsigned(1), 1)
    );
    // Signed division and comparison by the type.
    assert_eq!(
        value("DW_OP_const_type 0x30 [f9ffffff] DW_OP_const_type 0x30 [02000000] DW_OP_div"),
        t(ValueType::Signed(4), (-3i32) as u32 as u64)
    );
    assert_eq!(
        value("DW_OP_const_type 0x30 [ffffffff] DW_OP_const_type 0x30 [01000000] DW_OP_lt"),
        Value::generic(1, 8)
    );
    // Unsigned comparison: 0xff > 1.
    assert_eq!(
        value("DW_OP_const_type 0x3c [ff] DW_OP_const_type 0x3c [01] DW_OP_gt"),
        Value::generic(1, 8)
    );
    // Mixed types.
    let (i, op, e) = eval_error("DW_OP_const_type 0x30 [01000000] DW_OP_lit1 DW_OP_plus");
    assert_eq!((i, op), (2, "DW_OP_plus"));
    assert!(matches!(e, ErrorKind::TypeMismatch(_)), "{e:?}");
    assert!(!e.is_ill_formed());
    // But a generic value meets a signed integer of the address's size as that type, as
    // gdb's signed generic type does: LLVM converts one operand only (clang -O2 writes
    // `DW_OP_breg14 .. DW_OP_convert signed_32, DW_OP_convert signed_64, DW_OP_minus`).
    let long = |n: i64| Value {
        ty: ValueType::Signed(8),
        bits: n as u64,
    };
    assert_eq!(
        value("DW_OP_lit20 DW_OP_lit2 DW_OP_convert 0x30 DW_OP_convert 0x4c DW_OP_minus"),
        long(18)
    );
    assert_eq!(
        value("DW_OP_const_type 0x4c [fbffffffffffffff] DW_OP_lit7 DW_OP_mul"),
        long(-35)
    );
    assert_eq!(
        value("DW_OP_const1s -1 DW_OP_const_type 0x4c [0100000000000000] DW_OP_lt"),
        Value::generic(1, 8)
    );
    // Not an unsigned one, nor a signed one of another size.
    for other in [
        "DW_OP_const_type 0x40 [0100000000000000]",
        "DW_OP_const_type 0x30 [01000000]",
    ] {
        let (_, _, e) = eval_error(&format!("DW_OP_lit1 {other} DW_OP_plus"));
        assert!(matches!(e, ErrorKind::TypeMismatch(_)), "{other}: {e:?}");
    }
    // A typed value is not an address.
    let (_, op, e) = eval_error("DW_OP_const_type 0x40 [0010000000000000] DW_OP_deref");
    assert_eq!(op, "DW_OP_deref");
    assert!(matches!(e, ErrorKind::TypeMismatch(_)));
}

#[test]
fn float_arithmetic_and_comparisons() {
    let one_and_half = "DW_OP_const_type 0x34 [0000c03f]";
    let two = "DW_OP_const_type 0x34 [00000040]";
    let v = value(&format!("{one_and_half} {two} DW_OP_mul"));
    assert_eq!(v.to_f64(), Some(3.0));
    let v = value(&format!("{one_and_half} {two} DW_OP_minus"));
    assert_eq!(v.to_f64(), Some(-0.5));
    let v = value(&format!(
        "{one_and_half} {two} DW_OP_div DW_OP_neg DW_OP_abs"
    ));
    assert_eq!(v.to_f64(), Some(0.75));
    assert_eq!(
        value(&format!("{one_and_half} {two} DW_OP_lt")),
        Value::generic(1, 8)
    );
    // Logic needs integers.
    let (_, op, e) = eval_error(&format!("{one_and_half} {two} DW_OP_and"));
    assert_eq!(op, "DW_OP_and");
    assert!(matches!(e, ErrorKind::TypeMismatch(_)));
    let (_, _, e) = eval_error(&format!("{one_and_half} DW_OP_not"));
    assert!(matches!(e, ErrorKind::TypeMismatch(_)));
    // Float division by zero is IEEE, not an error.
    let zero = "DW_OP_const_type 0x34 [00000000]";
    let v = value(&format!("{one_and_half} {zero} DW_OP_div"));
    assert_eq!(v.to_f64(), Some(f64::INFINITY));
}

#[test]
fn convert_and_reinterpret() {
    // int -2 -> double -2.0 -> float -> int again.
    let v = value("DW_OP_regval_type 1 0x30 DW_OP_convert 0x38");
    assert_eq!(v.to_f64(), Some(-2.0));
    assert_eq!(
        value("DW_OP_regval_type 1 0x30 DW_OP_convert 0x38 DW_OP_convert 0x34 DW_OP_convert 0x30"),
        t(ValueType::Signed(4), (-2i32) as u32 as u64)
    );
    // float 1.5 -> int truncates toward zero.
    assert_eq!(
        value("DW_OP_regval_type 2 0x34 DW_OP_convert 0x30"),
        t(ValueType::Signed(4), 1)
    );
    // int -> unsigned char truncates; unsigned char -> generic zero-extends.
    assert_eq!(
        value("DW_OP_regval_type 1 0x30 DW_OP_convert 0x3c"),
        t(ValueType::Unsigned(1), 0xfe)
    );
    assert_eq!(
        value("DW_OP_regval_type 1 0x30 DW_OP_convert 0x3c DW_OP_convert Generic"),
        Value::generic(0xfe, 8)
    );
    // signed int -> generic sign-extends.
    assert_eq!(
        value("DW_OP_regval_type 1 0x30 DW_OP_convert Generic"),
        Value::generic(-2i64 as u64, 8)
    );
    // reinterpret keeps the bits.
    assert_eq!(
        value("DW_OP_regval_type 2 0x34 DW_OP_reinterpret 0x30"),
        t(ValueType::Signed(4), u64::from(1.5f32.to_bits()))
    );
    assert_eq!(
        value("DW_OP_lit1 DW_OP_reinterpret 0x40"),
        t(ValueType::Unsigned(8), 1)
    );
    let (_, op, e) = eval_error("DW_OP_regval_type 2 0x34 DW_OP_reinterpret 0x38");
    assert_eq!(op, "DW_OP_reinterpret");
    assert!(matches!(e, ErrorKind::TypeMismatch(_)));
}

#[test]
fn value_type_from_encoding() {
    assert_eq!(
        ValueType::from_encoding(ate::SIGNED, 4),
        Some(ValueType::Signed(4))
    );
    assert_eq!(
        ValueType::from_encoding(ate::BOOLEAN, 1),
        Some(ValueType::Unsigned(1))
    );
    assert_eq!(
        ValueType::from_encoding(ate::FLOAT, 8),
        Some(ValueType::Float(8))
    );
    assert_eq!(ValueType::from_encoding(ate::FLOAT, 16), None);
    assert_eq!(
        ValueType::from_encoding(ate::SIGNED, 3),
        Some(ValueType::Signed(3))
    );
    assert_eq!(ValueType::from_encoding(ate::SIGNED, 9), None);
    assert_eq!(ValueType::from_encoding(0x03, 8), None); // complex float
    assert_eq!(ValueType::Float(4).to_string(), "float(4)");
    assert_eq!(ValueType::Generic.to_string(), "generic");
}

// ---------------------------------------------------------------------------
// Requests

#[test]
fn entry_value_asks_the_caller() {
    let mut c = ctx();
    c.entry_values
        .insert(5, Entry::Value(Value::generic(77, 8)));
    let ops = parse_text(
        "DW_OP_entry_value [55] DW_OP_lit1 DW_OP_plus DW_OP_stack_value",
        |_| None,
    )
    .unwrap();
    let eval = evaluate(&ops, &mut c, Encoding::default()).unwrap();
    assert_eq!(
        c.log[0],
        EvaluationResult::RequiresEntryValue { register: Some(5) }
    );
    assert_eq!(eval.entry_value_expression(), [0x55]);
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Location(Location::single(
            Storage::Implicit(78u64.to_le_bytes().to_vec().into()),
            0
        )))
    );
    // DW_OP_regx 2560 (VGPR0).
    let ops = [Op::EntryValue(vec![0x90, 0x80, 0x14])];
    let mut eval = Evaluation::new(&ops, Encoding::default());
    assert_eq!(
        eval.evaluate().unwrap(),
        EvaluationResult::RequiresEntryValue {
            register: Some(2560)
        }
    );
    assert_eq!(eval.entry_value_expression(), [0x90, 0x80, 0x14]);
    // Not a plain register: the caller gets the bytes only.
    let ops = parse_text("DW_OP_entry_value [7508]", |_| None).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    assert_eq!(
        eval.evaluate().unwrap(),
        EvaluationResult::RequiresEntryValue { register: None }
    );
    assert_eq!(eval.entry_value_expression(), [0x75, 0x08]);
}

/// gcc's `DW_OP_GNU_parameter_ref` (0xfa, a 4-byte unit offset) and
/// `DW_OP_GNU_variable_value` (0xfd, an offset_size `.debug_info` offset):
/// decoded, printed, encoded back, and evaluated by asking for the DIE's value.
#[test]
fn gnu_parameter_ref_and_variable_value() {
    let bytes = [0xfa, 0xf6, 0x02, 0, 0, 0x9f, 0xfd, 0x10, 0x20, 0, 0];
    let ops: Vec<Op> = decode(&bytes, Encoding::default())
        .unwrap()
        .into_iter()
        .map(|(_, op)| op)
        .collect();
    assert_eq!(
        ops,
        [
            Op::GnuParameterRef(0x2f6),
            Op::StackValue,
            Op::GnuVariableValue(0x2010)
        ]
    );
    assert_eq!(encode(&ops, Encoding::default()).unwrap(), bytes);
    let text = to_text(&ops);
    assert_eq!(
        text,
        "DW_OP_GNU_parameter_ref 0x2f6\nDW_OP_stack_value\nDW_OP_GNU_variable_value 0x2010"
    );
    assert_eq!(parse_text(&text, |_| None).unwrap(), ops);
    // Truncated operands are refused, naming the operation.
    let e = decode(&[0xfa, 1, 2], Encoding::default()).unwrap_err();
    assert!(e.to_string().contains("DW_OP_GNU_parameter_ref"), "{e}");

    let mut c = ctx();
    c.by_die.insert(0x2f6, Entry::Value(Value::generic(7, 8)));
    c.by_die.insert(0x2010, Entry::Value(Value::generic(5, 8)));
    let ops = [
        Op::GnuParameterRef(0x2f6),
        Op::GnuVariableValue(0x2010),
        Op::Plus,
        Op::StackValue,
    ];
    let eval = evaluate(&ops, &mut c, Encoding::default()).unwrap();
    assert_eq!(
        c.log[0],
        EvaluationResult::RequiresParameterRef { offset: 0x2f6 }
    );
    assert_eq!(
        c.log[1],
        EvaluationResult::RequiresVariableValue { offset: 0x2010 }
    );
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Location(Location::single(
            Storage::Implicit(12u64.to_le_bytes().to_vec().into()),
            0
        )))
    );
}

#[test]
fn calls_run_on_the_same_stack() {
    let mut c = ctx();
    // DIE 0x50: adds 8 to the top of the stack. DIE 0x60: calls 0x50 twice.
    c.callees.insert((0x50, true), vec![0x38, 0x22]); // lit8 plus
    c.callees
        .insert((0x60, true), vec![0x98, 0x50, 0x00, 0x98, 0x50, 0x00]);
    c.callees.insert((0x1234, false), vec![0x90, 0x03]); // regx 3
    assert_eq!(
        run_text("DW_OP_lit1 DW_OP_call4 0x60 DW_OP_lit2 DW_OP_mul", &mut c).unwrap(),
        Entry::Value(Value::generic(34, 8))
    );
    // A callee can leave a location description (factoring, spec "Objects
    // Not In Byte Aligned Global Memory").
    assert_eq!(
        run_text("DW_OP_call_ref 0x1234 DW_OP_offset_uconst 4", &mut c).unwrap(),
        Entry::Location(Location::single(Storage::Register(3), 32))
    );
    // A DIE without a location: no-op.
    assert_eq!(
        run_text("DW_OP_lit3 DW_OP_call2 0x99", &mut c).unwrap(),
        Entry::Value(Value::generic(3, 8))
    );
    // Branches inside the callee use the callee's offsets:
    // lit0 @0, bra +1 @1, lit5 @4, lit6 @5 -> lit0 falls through to lit5.
    c.callees
        .insert((0x70, true), vec![0x31, 0x28, 0x01, 0x00, 0x35, 0x36]);
    let ops = parse_text("DW_OP_call2 0x70", |_| None).unwrap();
    let eval = evaluate(&ops, &mut c, Encoding::default()).unwrap();
    assert_eq!(
        eval.stack(),
        vec![Entry::Value(Value::generic(6, 8))],
        "lit1 branches over lit5"
    );
}

#[test]
fn errors_in_callees_name_both_operations() {
    let mut c = ctx();
    c.callees.insert((0x50, true), vec![0x96, 0x22]); // nop plus
    match run_text("DW_OP_nop DW_OP_call2 0x50", &mut c) {
        Err(e) if matches!(e.detail(), ErrorDetail::Eval { .. }) => {
            let ErrorDetail::Eval {
                index,
                op,
                kind: error,
            } = e.detail()
            else {
                unreachable!()
            };
            assert_eq!((*index, *op), (1, "DW_OP_call2"));
            assert_eq!(
                *error,
                ErrorKind::InCall {
                    index: 1,
                    op: "DW_OP_plus",
                    error: Box::new(ErrorKind::StackUnderflow)
                }
            );
            assert_eq!(
                e.to_string(),
                "op #1 DW_OP_call2: in the called expression, op #1 DW_OP_plus: stack underflow"
            );
        }
        other => panic!("{other:?}"),
    }
    // Recursion ends at the call depth limit (or the step limit).
    c.callees.insert((0x80, true), vec![0x98, 0x80, 0x00]);
    let Err(ErrorDetail::Eval { kind: error, .. }) =
        run_text("DW_OP_call2 0x80", &mut c).map_err(locus_dwarf::Error::into_detail)
    else {
        panic!()
    };
    let ErrorKind::InCall { error, .. } = error else {
        panic!("{error:?}")
    };
    assert_eq!(*error, ErrorKind::CallDepthExceeded(64));
    // Undecodable callee bytes are ill-formed.
    c.callees.insert((0x90, true), vec![0x0c, 0x01]);
    let Err(e) = run_text("DW_OP_call2 0x90", &mut c) else {
        panic!()
    };
    assert!(matches!(e.detail(), ErrorDetail::Eval { .. }), "{e}");
    assert!(e.is_ill_formed(), "{e}");
    assert!(e.to_string().contains("ill-formed callee"), "{e}");
    // Display is one layer; the decoding error is the source, once in the chain.
    let decoding = std::error::Error::source(&e).expect("the decoding error");
    let decoding = decoding.to_string();
    assert!(decoding.contains("DW_OP_const4u"), "{decoding}");
    assert!(!e.to_string().contains(&decoding), "{e}");
    assert_eq!(e.report().to_string().matches(&decoding).count(), 1);
}

#[test]
fn debug_addr_tls_cfa_and_object_address() {
    let mut c = ctx();
    c.debug_addr = vec![0x4000, 0x5000];
    c.tls_base = 0x7f00_0000;
    c.cfa = 0x8000;
    c.object = Some(Location::single(Storage::Register(3), 16));
    assert_eq!(
        run_text("DW_OP_addrx 1", &mut c).unwrap(),
        Entry::Location(Location::memory(0, 0x5000))
    );
    assert_eq!(
        run_text("DW_OP_constx 0", &mut c).unwrap(),
        Entry::Value(Value::generic(0x4000, 8))
    );
    assert_eq!(
        run_text("DW_OP_lit16 DW_OP_form_tls_address", &mut c).unwrap(),
        Entry::Location(Location::memory(0, 0x7f00_0010))
    );
    assert_eq!(
        run_text("DW_OP_call_frame_cfa DW_OP_plus_uconst 8", &mut c).unwrap(),
        Entry::Value(Value::generic(0x8008, 8))
    );
    // The object is in a register; data_member_location-style offsetting.
    assert_eq!(
        run_text("DW_OP_push_object_address DW_OP_offset_uconst 2", &mut c).unwrap(),
        Entry::Location(Location::single(Storage::Register(3), 32))
    );
    let ops = parse_text("DW_OP_push_object_address", |_| None).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    eval.evaluate().unwrap();
    eval.resume_with_object_address(0x1234).unwrap();
    assert_eq!(eval.location_result(), Some(Location::memory(0, 0x1234)));
}

// ---------------------------------------------------------------------------
// Extension operations

fn reg(r: u16, bit_offset: u128) -> Location {
    Location::single(Storage::Register(r), bit_offset)
}

fn part(location: Location, bit_size: u64) -> Part {
    Part { location, bit_size }
}

#[test]
fn extend_repeats_a_location() {
    let l = location("DW_OP_regx 3 DW_OP_extend 32 4");
    assert_eq!(l, Location::composite(vec![part(reg(3, 0), 32); 4]));
    // Too many parts is an error, not an allocation.
    let (_, op, e) = eval_error("DW_OP_regx 3 DW_OP_extend 1 1000000");
    assert_eq!(op, "DW_OP_extend");
    assert!(matches!(e, ErrorKind::TooLarge(_)));
}

#[test]
fn select_bit_piece_picks_per_lane() {
    // L0 = register 3 (current values), L1 = memory 0x1000; mask 0b0110.
    let l = location("DW_OP_regx 3 DW_OP_addr 0x1000 DW_OP_lit6 DW_OP_select_bit_piece 8 4");
    assert_eq!(
        l,
        Location::composite(vec![
            part(reg(3, 0), 8),
            part(Location::memory(0, 0x1001), 8),
            part(Location::memory(0, 0x1002), 8),
            part(reg(3, 24), 8),
        ])
    );
    // Reading through it takes each byte from the selected place.
    let v = value(
        "DW_OP_regx 3 DW_OP_offset_uconst 8 DW_OP_addr 0x1010 DW_OP_lit6 DW_OP_select_bit_piece 8 4 DW_OP_deref_size 4",
    );
    // reg3 bytes 8..12 = 08 09 0a 0b; memory 0x1010.. = 10 11 12 13.
    assert_eq!(v, Value::generic(0x0b12_1108, 8));
    // The mask must cover every part.
    let (_, _, e) = eval_error(
        "DW_OP_regx 3 DW_OP_regx 3 DW_OP_const_type 0x3c [01] DW_OP_select_bit_piece 1 9",
    );
    assert_eq!(e, ErrorKind::BadSize(9));
}

#[test]
fn call_frame_entry_reg_and_aspace_implicit_pointer() {
    let mut c = ctx();
    c.entry_registers.insert(4, Location::memory(0, 0x1008));
    // The AMDGPU CFI pattern: a register's saved lanes selected by the
    // entry EXEC mask (here register 4's entry value, read from memory).
    let text = "DW_OP_regx 3 DW_OP_lit1 DW_OP_lit0 DW_OP_form_aspace_address DW_OP_call_frame_entry_reg 4 DW_OP_deref_size 1 DW_OP_select_bit_piece 8 4";
    let Entry::Location(l) = run_text(text, &mut c).unwrap() else {
        panic!()
    };
    // Byte 0x1008 of memory is 8 = 0b1000: only part 3 from L1.
    assert_eq!(
        l,
        Location::composite(vec![
            part(reg(3, 0), 8),
            part(reg(3, 8), 8),
            part(reg(3, 16), 8),
            part(Location::memory(0, 4), 8),
        ])
    );
    // Unknown entry register: the caller answers undefined.
    assert_eq!(
        run_text("DW_OP_call_frame_entry_reg 9", &mut c).unwrap(),
        Entry::Location(Location::undefined())
    );
    let ops = [
        Op::Lit(3),
        Op::AspaceImplicitPointer {
            die: 0x99,
            offset: -2,
        },
    ];
    let eval = evaluate(&ops, &mut c, Encoding::default()).unwrap();
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Location(Location::single(
            Storage::ImplicitPointer {
                die: 0x99,
                byte_offset: -2,
                address_space: Some(3)
            },
            0
        )))
    );
}

#[test]
fn offsets_and_aspace_operations() {
    // An unsigned typed offset is not sign-extended.
    assert_eq!(
        location("DW_OP_regx 3 DW_OP_const_type 0x3c [ff] DW_OP_offset"),
        reg(3, 0xff * 8)
    );
    // A negative generic offset moves back.
    assert_eq!(
        location("DW_OP_regx 3 DW_OP_offset_uconst 4 DW_OP_consts -2 DW_OP_offset"),
        reg(3, 16)
    );
}

#[test]
fn offset_before_the_start_is_an_error() {
    let (i, op, e) = eval_error("DW_OP_regx 3 DW_OP_consts -1 DW_OP_offset");
    assert_eq!((i, op, e), (2, "DW_OP_offset", ErrorKind::OffsetOutOfRange));
    let (_, op, e) = eval_error("DW_OP_regx 3 DW_OP_consts -1 DW_OP_bit_offset");
    assert_eq!((op, e), ("DW_OP_bit_offset", ErrorKind::OffsetOutOfRange));
    // aspace_bregx pops the address space.
    assert_eq!(
        location("DW_OP_lit1 DW_OP_aspace_bregx 0 0x20"),
        Location::memory(1, 0x1020)
    );
    // A float cannot be an address space.
    let (_, op, e) =
        eval_error("DW_OP_lit0 DW_OP_const_type 0x34 [00000000] DW_OP_form_aspace_address");
    assert_eq!(op, "DW_OP_form_aspace_address");
    assert!(matches!(e, ErrorKind::TypeMismatch(_)));
}

// ---------------------------------------------------------------------------
// Deref through any location

#[test]
fn deref_through_composites_and_bit_offsets() {
    // Two bytes of register 3 at byte 4, then two bytes of memory 0x1000.
    let v = value(
        "DW_OP_regx 3 DW_OP_offset_uconst 4 DW_OP_piece 2 DW_OP_addr 0x1000 DW_OP_piece 2 DW_OP_piece_end DW_OP_deref_size 4",
    );
    assert_eq!(v, Value::generic(0x0100_0504, 8));
    // Offset into the composite: starts in the second part.
    let v = value(
        "DW_OP_regx 3 DW_OP_piece 2 DW_OP_addr 0x1008 DW_OP_piece 2 DW_OP_piece_end DW_OP_offset_uconst 1 DW_OP_deref_size 2",
    );
    assert_eq!(v, Value::generic(0x0801, 8));
    // Bit offset 4 into register 3 (bytes 00 01 02 ..): 0x0201 >> 4 ... bits 4..12.
    let v =
        value("DW_OP_regx 3 DW_OP_offset_uconst 1 DW_OP_lit4 DW_OP_bit_offset DW_OP_deref_size 1");
    assert_eq!(v, Value::generic(0x20, 8));
    // Unaligned memory read: 9-byte span for 8 bytes.
    let mut c = ctx();
    let ops = parse_text(
        "DW_OP_addr 0x1000 DW_OP_lit4 DW_OP_bit_offset DW_OP_deref",
        |_| None,
    )
    .unwrap();
    let eval = evaluate(&ops, &mut c, Encoding::default()).unwrap();
    assert!(c.log.contains(&EvaluationResult::RequiresMemory {
        address: 0x1000,
        size: 9,
        address_space: 0
    }));
    let expect = u128::from_le_bytes(core::array::from_fn(|i| if i < 9 { i as u8 } else { 0 }));
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Value(Value::generic((expect >> 4) as u64, 8)))
    );
    // An undefined byte inside the composite is an undefined read.
    let (_, op, e) =
        eval_error("DW_OP_regx 3 DW_OP_piece 1 DW_OP_piece 1 DW_OP_piece_end DW_OP_deref_size 2");
    assert_eq!((op, e), ("DW_OP_deref_size", ErrorKind::UndefinedRead));
    // A multi-place location reads its first place.
    let mut eval_ops = parse_text("DW_OP_deref_size 2", |_| None).unwrap();
    let mut eval = Evaluation::new(&eval_ops, Encoding::default());
    eval.push(Entry::Location(Location {
        places: vec![
            SingleLocation {
                storage: Storage::Implicit(vec![7, 8].into()),
                bit_offset: 0,
            },
            SingleLocation::memory(0, 0x1000),
        ]
        .into(),
    }));
    assert_eq!(eval.evaluate().unwrap(), EvaluationResult::Complete);
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Value(Value::generic(0x0807, 8)))
    );
    eval_ops.clear();
}

#[test]
fn legacy_encoding_and_branch_offsets_agree() {
    // The same loop in both encodings (branch displacements in bytes).
    let ops = parse_text(
        "DW_OP_lit3 DW_OP_lit1 DW_OP_minus DW_OP_dup DW_OP_bra -6 DW_OP_regx 3 DW_OP_offset_uconst 1",
        |_| None,
    )
    .unwrap();
    for ext in [
        locus_dwarf::ExtensionEncoding::User,
        locus_dwarf::ExtensionEncoding::Legacy,
    ] {
        let enc = Encoding {
            extension: ext,
            ..Encoding::default()
        };
        encode(&ops, enc).unwrap();
        let eval = evaluate(&ops, &mut ctx(), enc).unwrap();
        assert_eq!(eval.result().cloned(), Some(Entry::Location(reg(3, 8))));
    }
}

/// Fuzz regression (crates/dwarf/fuzz, target `eval`): a branch over a
/// padded LEB128 operand. Re-encoding shortens the padding, so branch
/// targets must come from the original byte offsets.
#[test]
fn branches_over_padded_leb128_use_the_original_offsets() {
    // reg16; bit_piece 61 (padded: bd 00) 2588; const1u 0x12; bra -11 (to 0).
    let bytes = [
        0x60, 0x9d, 0xbd, 0x00, 0x9c, 0x14, 0x08, 0x12, 0x28, 0xf5, 0xff,
    ];
    let decoded = locus_dwarf::decode(&bytes, Encoding::default()).unwrap();
    let mut offsets: Vec<usize> = decoded.iter().map(|(o, _)| *o).collect();
    offsets.push(bytes.len());
    let ops: Vec<Op> = decoded.into_iter().map(|(_, op)| op).collect();
    // Re-encoded, the branch no longer lands on an operation.
    let again = encode(&ops, Encoding::default()).unwrap();
    assert!(locus_dwarf::decode(&again, Encoding::default()).is_err());
    // With the original offsets, the loop runs (and hits the step limit:
    // 0x12 is never 0) instead of failing on a bad target.
    let expression = Expression::with_offsets(&ops, &offsets).unwrap();
    let mut eval = Evaluation::new(expression, Encoding::default());
    eval.set_max_steps(40);
    match eval.evaluate().map_err(locus_dwarf::Error::into_detail) {
        Err(ErrorDetail::Eval {
            kind: ErrorKind::StepLimitExceeded(40),
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let mut eval = Evaluation::new(&ops, Encoding::default());
    eval.set_max_steps(40);
    match eval.evaluate().map_err(locus_dwarf::Error::into_detail) {
        Err(ErrorDetail::Eval {
            kind: ErrorKind::BadBranchTarget(-1),
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // Offsets must match the operations.
    assert!(Expression::with_offsets(&ops, &offsets[1..]).is_err());
}

#[test]
fn evaluations_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Evaluation<'static>>();
    check::<Location>();
    check::<Error>();
}

#[test]
fn trace_stops_after_every_operation() {
    let mut c = ctx();
    c.base_types.clear();
    c.base_types.insert(INT, (ate::SIGNED, 4));
    let ops = parse_text(
        "DW_OP_lit1 DW_OP_breg0 4 DW_OP_plus DW_OP_const_type 0x30 [05000000] DW_OP_drop",
        |_| None,
    )
    .unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    eval.set_trace(true);
    let mut seen = Vec::new();
    let mut r = eval.evaluate().unwrap();
    loop {
        r = match r {
            EvaluationResult::Stepped => {
                seen.push((eval.pc(), eval.stack().len()));
                eval.evaluate().unwrap()
            }
            EvaluationResult::RequiresRegister { .. } => {
                eval.resume_with_register(&c.registers[&0]).unwrap()
            }
            EvaluationResult::RequiresBaseType { .. } => {
                eval.resume_with_base_type(ate::SIGNED, 4).unwrap()
            }
            EvaluationResult::Complete => break,
            other => panic!("{other:?}"),
        }
    }
    // One stop per operation, with the stack depth after it.
    assert_eq!(seen, [(1, 1), (2, 2), (3, 1), (4, 2), (5, 1)]);
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Value(Value::generic(0x1005, 8)))
    );
}

#[test]
fn typed_operations_gimli_rejects_are_errors() {
    for text in [
        "DW_OP_const_type 0x3c [01] DW_OP_neg",
        "DW_OP_const_type 0x30 [01000000] DW_OP_lit1 DW_OP_shr",
        "DW_OP_const_type 0x3c [01] DW_OP_lit1 DW_OP_shra",
        "DW_OP_lit1 DW_OP_const_type 0x30 [ffffffff] DW_OP_shl",
    ] {
        let (_, _, e) = eval_error(text);
        assert!(matches!(e, ErrorKind::TypeMismatch(_)), "{text}: {e:?}");
    }
    // plus_uconst takes the constant in the value's type, floats included.
    let v = value("DW_OP_const_type 0x34 [0000c03f] DW_OP_plus_uconst 2");
    assert_eq!(v.to_f64(), Some(3.5));
}

#[test]
fn limits_and_error_kinds() {
    // lit1 @0, dup @1, skip -4 @2 (back to dup): the stack grows until the
    // limit, reported at the dup.
    let (i, op, e) = eval_error("DW_OP_lit1 DW_OP_dup DW_OP_skip -4");
    assert_eq!((i, op), (1, "DW_OP_dup"));
    assert!(matches!(e, ErrorKind::TooLarge(_)), "{e:?}");
    // Ill-formed: undecodable bytes, bad operands; not: stack underflow.
    assert!(locus_dwarf::decode(&[0x0c, 1], Encoding::default())
        .unwrap_err()
        .is_ill_formed());
    let (_, _, e) = eval_error("DW_OP_deref_size 0");
    assert!(e.is_ill_formed());
    let (_, _, e) = eval_error("DW_OP_regx 0x10000");
    assert_eq!(e, ErrorKind::BadRegister(0x10000));
    assert!(e.is_ill_formed());
    let (_, _, e) = eval_error("DW_OP_plus");
    assert!(!e.is_ill_formed());
}

#[test]
fn a_wrong_answer_to_a_read_keeps_the_request() {
    let ops = parse_text("DW_OP_addr 0x1000 DW_OP_deref_size 2", |_| None).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    let r = eval.evaluate().unwrap();
    assert_eq!(
        r,
        EvaluationResult::RequiresMemory {
            address: 0x1000,
            size: 2,
            address_space: 0
        }
    );
    assert!(eval.resume_with_register(&[1, 2]).is_err());
    assert!(eval.resume_with_memory(&[1]).is_err(), "too few bytes");
    assert_eq!(
        eval.resume_with_memory(&[1, 2]).unwrap(),
        EvaluationResult::Complete
    );
    let ops = parse_text("DW_OP_regx 3 DW_OP_deref_size 2", |_| None).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    assert_eq!(
        eval.evaluate().unwrap(),
        EvaluationResult::RequiresRegister { register: 3 }
    );
    assert!(eval.resume_with_memory(&[1, 2]).is_err());
    assert_eq!(
        eval.resume_with_register(&[1, 2]).unwrap(),
        EvaluationResult::Complete
    );
    assert_eq!(
        eval.result().cloned(),
        Some(Entry::Value(Value::generic(0x201, 8)))
    );
}

#[test]
fn decode_into_reuses_buffers_and_with_offsets_borrows_them() {
    let (mut ops, mut offsets) = (Vec::new(), Vec::new());
    let mut c = ctx();
    for (bytes, want) in [
        (vec![0x31, 0x32, 0x22], Entry::Value(Value::generic(3, 8))),
        // lit0 @0, bra +1 @1, lit5 @4, lit6 @5.
        (
            vec![0x30, 0x28, 0x01, 0x00, 0x35, 0x36],
            Entry::Value(Value::generic(6, 8)),
        ),
        (vec![0x53], Entry::Location(Location::register(3))),
    ] {
        locus_dwarf::decode_into(&bytes, Encoding::default(), &mut ops, &mut offsets).unwrap();
        assert_eq!(offsets.last(), Some(&bytes.len()));
        assert_eq!(
            locus_dwarf::decode(&bytes, Encoding::default())
                .unwrap()
                .into_iter()
                .map(|(_, op)| op)
                .collect::<Vec<_>>(),
            ops
        );
        let expression = Expression::with_offsets(&ops, &offsets).unwrap();
        let mut eval = Evaluation::new(expression, Encoding::default());
        let mut r = eval.evaluate().unwrap();
        while r != EvaluationResult::Complete {
            r = match r {
                EvaluationResult::RequiresRegister { register } => {
                    eval.resume_with_register(&c.registers[&register]).unwrap()
                }
                other => panic!("{other:?}"),
            };
        }
        assert_eq!(eval.result(), Some(&want));
    }
    assert!(Expression::with_offsets(&ops, &[0]).is_err());
    c.log.clear();
}

/// One evaluation restarted in turn on decoded operations with their original byte
/// offsets (a branch over a padded LEB128: the offsets matter), encoded bytes, decoded
/// operations without offsets, an expression that needs a base type (the boxed rare
/// state) and bytes again gives each time what a new evaluation gives, and so does one
/// built with `new_in` from its buffers: nothing leaks from one expression to the next.
#[test]
fn a_restarted_evaluation_answers_as_a_new_one() {
    // skip +4 @0; constu 1 (padded: 81 80 00) @3; lit6 @7.
    let padded = [0x2f, 0x04, 0x00, 0x10, 0x81, 0x80, 0x00, 0x36];
    let decoded = locus_dwarf::decode(&padded, Encoding::default()).unwrap();
    let mut offsets: Vec<usize> = decoded.iter().map(|(o, _)| *o).collect();
    offsets.push(padded.len());
    let ops: Vec<Op> = decoded.into_iter().map(|(_, op)| op).collect();
    let typed = parse_text(
        "DW_OP_const_type 0x30 [01000000] DW_OP_const_type 0x30 [01000000] DW_OP_plus",
        |_| None,
    )
    .unwrap();
    let regs = [0x53u8];
    let sum = [0x31u8, 0x32, 0x22];
    let run = |eval: &mut Evaluation<'_>| -> Result<Option<Entry>, Error> {
        let c = ctx();
        let mut r = eval.evaluate()?;
        while r != EvaluationResult::Complete {
            r = match r {
                EvaluationResult::RequiresRegister { register } => {
                    eval.resume_with_register(&c.registers[&register])?
                }
                EvaluationResult::RequiresBaseType { offset } => {
                    let (encoding, size) = c.base_types[&offset];
                    eval.resume_with_base_type(encoding, size)?
                }
                other => panic!("{other:?}"),
            };
        }
        Ok(eval.result().cloned())
    };
    let with_offsets = || Expression::with_offsets(&ops, &offsets).unwrap();
    let expressions: Vec<Expression<'_>> = vec![
        with_offsets(),
        Expression::from(&padded),
        Expression::from(&ops),
        Expression::from(&typed),
        Expression::from(&regs),
        with_offsets(),
        Expression::from(&sum),
    ];
    let mut restarted = Evaluation::new(&[0x30u8, 0x31], Encoding::default());
    let _ = restarted.evaluate();
    for (i, e) in expressions.iter().enumerate() {
        let fresh = run(&mut Evaluation::new(*e, Encoding::default()));
        restarted.restart(*e, Encoding::default());
        assert_eq!(run(&mut restarted), fresh, "expression #{i}");
        let buffers = restarted.clone().into_buffers();
        let mut rebuilt = Evaluation::new_in(*e, Encoding::default(), buffers);
        assert_eq!(run(&mut rebuilt), fresh, "expression #{i}, new_in");
    }
    // With their offsets the decoded operations branch right; re-encoded (shorter)
    // the branch target is past the end.
    let six = Some(Entry::Value(Value::generic(6, 8)));
    assert_eq!(
        run(&mut Evaluation::new(with_offsets(), Encoding::default())),
        Ok(six.clone())
    );
    assert_eq!(
        run(&mut Evaluation::new(&padded, Encoding::default())),
        Ok(six)
    );
    assert!(run(&mut Evaluation::new(&ops, Encoding::default())).is_err());
    assert_eq!(
        run(&mut Evaluation::new(&typed, Encoding::default())),
        Ok(Some(Entry::Value(Value::new(ValueType::Signed(4), 2, 8))))
    );
}
