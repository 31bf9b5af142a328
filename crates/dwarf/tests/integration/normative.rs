//! The normative text's error rules, operation by operation: every sentence
//! of LLVM's AMDGPUDwarfExtensionsForHeterogeneousDebugging.rst ("A.2.5.4
//! DWARF Operation Expressions" and its subsections) that calls an
//! expression ill-formed or its evaluation an error, as the expression and
//! the error the evaluator reports for it, at the operation that breaks the
//! rule. Next to each, a well-formed neighbour that still evaluates (a piece
//! exactly as large as what remains, an offset to the last bit, ...).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::ErrorDetail;
use std::collections::BTreeMap;

use locus_dwarf::{
    decode, parse_text, Encoding, Entry, Error, ErrorKind, Evaluation, EvaluationResult,
    ExtensionEncoding, Location, Part, Storage,
};

/// A vector register: 64 lanes of 4 bytes.
const VGPR0: u16 = 2560;
const VGPR_BYTES: usize = 256;
/// Memory at 0x1000: bytes 0, 1, 2, ...
const MEMORY: u64 = 0x1000;

/// The target: registers 0-7 of 8 bytes, VGPR0, 16 bytes of memory, lane 5,
/// signed and unsigned 4-byte base types at 0x30 and 0x44.
fn answer(eval: &mut Evaluation<'_>, r: EvaluationResult) -> Result<EvaluationResult, Error> {
    let registers: BTreeMap<u16, Vec<u8>> = (0..8)
        .map(|r| (r, vec![r as u8; 8]))
        .chain([(VGPR0, vec![0xaa; VGPR_BYTES])])
        .collect();
    match r {
        EvaluationResult::RequiresRegister { register } => {
            eval.resume_with_register(&registers[&register])
        }
        EvaluationResult::RequiresMemory { address, size, .. } => {
            let start = usize::try_from(address - MEMORY).unwrap();
            let bytes: Vec<u8> = (0..16u8).collect();
            eval.resume_with_memory(&bytes[start..start + usize::from(size)])
        }
        EvaluationResult::RequiresLane => eval.resume_with_lane(5),
        EvaluationResult::RequiresIteration => eval.resume_with_iteration(2),
        EvaluationResult::RequiresBaseType { offset: 0x30 } => eval.resume_with_base_type(0x05, 4),
        EvaluationResult::RequiresBaseType { offset: 0x44 } => eval.resume_with_base_type(0x08, 4),
        other => panic!("unexpected request {other:?}"),
    }
}

/// Evaluates `text` with the register sizes known (as `binary::run` gives
/// them from a snapshot) after `setup`.
fn run_with(text: &str, setup: impl FnOnce(&mut Evaluation<'_>)) -> Result<Entry, Error> {
    let ops = parse_text(text, |_| None).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    for r in 0..8 {
        eval.set_register_size(r, 8);
    }
    eval.set_register_size(VGPR0, VGPR_BYTES as u64);
    setup(&mut eval);
    let mut r = eval.evaluate()?;
    while r != EvaluationResult::Complete {
        r = answer(&mut eval, r)?;
    }
    Ok(eval.result().cloned().expect("empty stack"))
}

fn run(text: &str) -> Result<Entry, Error> {
    run_with(text, |_| {})
}

/// Evaluates, expecting success.
fn ok(text: &str) -> Entry {
    run(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn location(text: &str) -> Location {
    match ok(text) {
        Entry::Location(l) => l,
        other => panic!("{text}: not a location: {other:?}"),
    }
}

/// Evaluates, expecting an evaluation error at operation `index` named `op`;
/// returns it, after checking the message names both.
fn fails(text: &str, index: usize, op: &str) -> ErrorKind {
    match run(text) {
        Err(e) if matches!(e.detail(), ErrorDetail::Eval { .. }) => {
            let msg = e.to_string();
            let ErrorDetail::Eval {
                index: i,
                op: o,
                kind: error,
            } = e.clone().into_detail()
            else {
                unreachable!()
            };
            assert_eq!((i, o), (index, op), "{text}: {msg}");
            assert!(msg.starts_with(&format!("op #{index} {op}: ")), "{msg}");
            error
        }
        other => panic!("{text}: expected an error at op #{index} {op}, got {other:?}"),
    }
}

/// Expects the normative text's "ill-formed" at operation `index`.
fn ill_formed(text: &str, index: usize, op: &str) {
    let e = fails(text, index, op);
    assert!(matches!(e, ErrorKind::IllFormed(_)), "{text}: {e:?}");
    assert!(e.is_ill_formed(), "{text}");
}

fn part(location: Location, bit_size: u64) -> Part {
    Part { location, bit_size }
}

fn reg(register: u16, bit_offset: u128) -> Location {
    Location::single(Storage::Register(register), bit_offset)
}

#[test]
fn stack_operations() {
    // "If any stack entry accessed by a stack operation is an incomplete
    // composite location description ... ill-formed."
    for (text, index, op) in [
        ("DW_OP_reg0 DW_OP_piece 4 DW_OP_dup", 2, "DW_OP_dup"),
        ("DW_OP_reg0 DW_OP_piece 4 DW_OP_drop", 2, "DW_OP_drop"),
        (
            "DW_OP_reg0 DW_OP_piece 4 DW_OP_lit1 DW_OP_pick 1",
            3,
            "DW_OP_pick",
        ),
        (
            "DW_OP_reg0 DW_OP_piece 4 DW_OP_lit1 DW_OP_over",
            3,
            "DW_OP_over",
        ),
        (
            "DW_OP_reg0 DW_OP_piece 4 DW_OP_lit1 DW_OP_swap",
            3,
            "DW_OP_swap",
        ),
        (
            "DW_OP_reg0 DW_OP_piece 4 DW_OP_lit1 DW_OP_lit2 DW_OP_rot",
            4,
            "DW_OP_rot",
        ),
    ] {
        ill_formed(text, index, op);
    }
    // Neighbours: a completed composite is an ordinary entry, and entries
    // above an incomplete one may be moved about.
    let composite = Location::composite(vec![part(reg(0, 0), 32)]);
    assert_eq!(
        location("DW_OP_reg0 DW_OP_piece 4 DW_OP_piece_end DW_OP_dup DW_OP_drop"),
        composite
    );
    assert_eq!(
        location(
            "DW_OP_reg0 DW_OP_piece 4 DW_OP_lit1 DW_OP_lit2 DW_OP_lit3 DW_OP_rot DW_OP_swap \
             DW_OP_over DW_OP_pick 0 DW_OP_drop DW_OP_drop DW_OP_drop DW_OP_drop DW_OP_drop"
        ),
        composite
    );
}

#[test]
fn control_flow() {
    // "ill-formed if the updated operation position is not in the range of
    // the first to last operation inclusive, or not at the start of an
    // operation" (one past the last completes the evaluation).
    assert!(matches!(
        fails("DW_OP_skip 1 DW_OP_const2u 7", 0, "DW_OP_skip"),
        ErrorKind::BadBranchTarget(4)
    ));
    assert!(matches!(
        fails("DW_OP_lit1 DW_OP_bra -5", 1, "DW_OP_bra"),
        ErrorKind::BadBranchTarget(-1)
    ));
    let e = fails("DW_OP_lit1 DW_OP_bra 5 DW_OP_lit2", 1, "DW_OP_bra");
    assert!(e.is_ill_formed(), "{e:?}");
    // One past the last operation ends the evaluation.
    assert_eq!(
        ok("DW_OP_lit7 DW_OP_lit1 DW_OP_bra 1 DW_OP_lit2"),
        ok("DW_OP_lit7")
    );
}

#[test]
fn values() {
    // DW_OP_const_type: "ill-formed ... if TS divided by 8 ... is not equal to S."
    assert_eq!(
        fails("DW_OP_const_type 0x30 [0102]", 0, "DW_OP_const_type"),
        ErrorKind::BadSize(2)
    );
    assert!(matches!(
        ok("DW_OP_const_type 0x30 [01020304]"),
        Entry::Value(_)
    ));
    // DW_OP_deref_type: the same rule, both ways (deref_size may be smaller).
    for text in [
        "DW_OP_addr 0x1000 DW_OP_deref_type 2 0x44",
        "DW_OP_addr 0x1000 DW_OP_deref_type 8 0x44",
    ] {
        let e = fails(text, 1, "DW_OP_deref_type");
        assert!(
            matches!(e, ErrorKind::BadSize(_)) && e.is_ill_formed(),
            "{e:?}"
        );
    }
    assert!(matches!(
        fails(
            "DW_OP_addr 0x1000 DW_OP_lit0 DW_OP_xderef_type 2 0x44",
            2,
            "DW_OP_xderef_type"
        ),
        ErrorKind::BadSize(2)
    ));
    assert!(matches!(
        ok("DW_OP_addr 0x1000 DW_OP_deref_type 4 0x44"),
        Entry::Value(v) if v.bits == 0x0302_0100
    ));
    assert!(matches!(
        ok("DW_OP_addr 0x1000 DW_OP_deref_size 2"),
        Entry::Value(v) if v.bits == 0x0100
    ));
    // DW_OP_deref*: "an evaluation error if any bit of the value is retrieved
    // from the undefined location storage or the offset of any bit exceeds
    // the size of the location storage".
    assert_eq!(
        fails("DW_OP_undefined DW_OP_deref_size 1", 1, "DW_OP_deref_size"),
        ErrorKind::UndefinedRead
    );
    for (text, index, op) in [
        // 4 implicit bytes, 8 read.
        (
            "DW_OP_implicit_value [01020304] DW_OP_deref",
            1,
            "DW_OP_deref",
        ),
        // 3 bytes left after an offset of 1.
        (
            "DW_OP_implicit_value [01020304] DW_OP_offset_uconst 1 DW_OP_deref_size 4",
            2,
            "DW_OP_deref_size",
        ),
        // A 2-byte composite, 4 read.
        (
            "DW_OP_reg0 DW_OP_piece 2 DW_OP_piece_end DW_OP_deref_size 4",
            3,
            "DW_OP_deref_size",
        ),
        // Register 1 has 8 bytes; 4 from byte 6.
        (
            "DW_OP_reg1 DW_OP_offset_uconst 6 DW_OP_deref_size 4",
            2,
            "DW_OP_deref_size",
        ),
        // Past the end of the 64-bit address space.
        (
            "DW_OP_const8u 0xfffffffffffffffe DW_OP_deref_size 4",
            1,
            "DW_OP_deref_size",
        ),
    ] {
        assert_eq!(fails(text, index, op), ErrorKind::ReadOutOfRange, "{text}");
    }
    // Exactly what remains reads.
    for (text, bits) in [
        (
            "DW_OP_implicit_value [01020304] DW_OP_offset_uconst 1 DW_OP_deref_size 3",
            0x04_0302,
        ),
        (
            "DW_OP_reg1 DW_OP_offset_uconst 6 DW_OP_deref_size 2",
            0x0101,
        ),
        (
            "DW_OP_lit3 DW_OP_stack_value DW_OP_piece 2 DW_OP_piece_end DW_OP_deref_size 2",
            3,
        ),
    ] {
        assert!(
            matches!(ok(text), Entry::Value(v) if v.bits == bits),
            "{text}"
        );
    }
    // DW_OP_implicit_pointer: reading its storage is an error.
    assert!(matches!(
        fails(
            "DW_OP_implicit_pointer 0x100 0 DW_OP_deref",
            1,
            "DW_OP_deref"
        ),
        ErrorKind::Unsupported(_)
    ));
    // DW_OP_LLVM_push_lane: "The value must be greater than or equal to 0 and
    // less than the value of the DW_AT_LLVM_lanes attribute, otherwise the
    // DWARF expression is ill-formed" (the lane answered is 5).
    let lanes = |n| run_with("DW_OP_push_lane", move |e| e.set_lane_count(n));
    match lanes(5) {
        Err(e)
            if matches!(
                e.detail(),
                ErrorDetail::Eval {
                    index: 0,
                    op: "DW_OP_push_lane",
                    kind: ErrorKind::IllFormed(_),
                }
            ) =>
        {
            assert!(e.is_ill_formed())
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(lanes(6), Ok(Entry::Value(v)) if v.bits == 5));
    // DW_OP_LLVM_push_iteration: the same rule against DW_AT_LLVM_iterations
    // (the iteration answered is 2). Both spellings; no encoding (its
    // sub-opcode is TBA).
    for text in ["DW_OP_LLVM_push_iteration", "DW_OP_push_iteration"] {
        let iterations = |n| run_with(text, move |e| e.set_iteration_count(n));
        match iterations(2) {
            Err(e)
                if matches!(
                    e.detail(),
                    ErrorDetail::Eval {
                        index: 0,
                        op: "DW_OP_push_iteration",
                        kind: ErrorKind::IllFormed(_),
                    }
                ) =>
            {
                assert!(e.is_ill_formed())
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(iterations(3), Ok(Entry::Value(v)) if v.bits == 2));
        assert!(matches!(run_with(text, |_| {}), Ok(Entry::Value(v)) if v.bits == 2));
    }
    let ops = parse_text("DW_OP_LLVM_push_iteration", |_| None).unwrap();
    assert!(matches!(
        locus_dwarf::encode(&ops, Encoding::default()).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Unencodable { index: 0, .. })
    ));
}

#[test]
fn offsets() {
    // DW_OP_LLVM_offset, _offset_uconst, _bit_offset: "It is an evaluation
    // error if the updated bit offset of any SL is less than 0 or greater
    // than or equal to the size of the location storage specified by SL."
    for (text, index, op) in [
        // Implicit storage of 4 bytes.
        ("DW_OP_implicit_value [01020304] DW_OP_lit4 DW_OP_offset", 2, "DW_OP_offset"),
        ("DW_OP_lit1 DW_OP_stack_value DW_OP_offset_uconst 8", 2, "DW_OP_offset_uconst"),
        (
            "DW_OP_implicit_value [01020304] DW_OP_lit31 DW_OP_lit1 DW_OP_plus DW_OP_bit_offset",
            4,
            "DW_OP_bit_offset",
        ),
        // Registers (8 bytes; VGPR0 256).
        ("DW_OP_reg3 DW_OP_offset_uconst 8", 1, "DW_OP_offset_uconst"),
        ("DW_OP_reg3 DW_OP_constu 64 DW_OP_bit_offset", 2, "DW_OP_bit_offset"),
        ("DW_OP_regx 2560 DW_OP_push_lane DW_OP_lit31 DW_OP_lit31 DW_OP_mul DW_OP_mul DW_OP_offset", 6, "DW_OP_offset"),
        // A composite of 2 + 2 bytes.
        (
            "DW_OP_reg0 DW_OP_piece 2 DW_OP_reg1 DW_OP_piece 2 DW_OP_piece_end DW_OP_offset_uconst 4",
            5,
            "DW_OP_offset_uconst",
        ),
        // An implicit pointer is an address (8 bytes) of storage.
        ("DW_OP_implicit_pointer 0x100 0 DW_OP_offset_uconst 8", 1, "DW_OP_offset_uconst"),
        // Below 0, and past the end of the address space.
        ("DW_OP_reg3 DW_OP_consts -1 DW_OP_bit_offset", 2, "DW_OP_bit_offset"),
        ("DW_OP_addr 0x10 DW_OP_consts -17 DW_OP_offset", 2, "DW_OP_offset"),
        (
            "DW_OP_const8u 0xffffffffffffffff DW_OP_offset_uconst 1",
            1,
            "DW_OP_offset_uconst",
        ),
        // DW_OP_bit_piece's displacement is a DW_OP_LLVM_bit_offset.
        ("DW_OP_reg3 DW_OP_bit_piece 1 64", 1, "DW_OP_bit_piece"),
    ] {
        let e = fails(text, index, op);
        assert_eq!(e, ErrorKind::OffsetOutOfRange, "{text}");
        assert!(!e.is_ill_formed(), "an evaluation error, not ill-formed");
    }
    // Section 2.4: "the offset operation define that integer overflow is
    // ill-formed": no offset wraps (offsets are computed in 128 bits and
    // checked against the storage).
    assert_eq!(
        fails(
            "DW_OP_const8u 0xffffffffffff0000 DW_OP_const8u 0x7fffffffffffffff DW_OP_offset",
            2,
            "DW_OP_offset"
        ),
        ErrorKind::OffsetOutOfRange
    );
    // Neighbours: the last bit of each storage.
    let implicit = |b: &[u8], at| Location::single(Storage::Implicit(b.into()), at);
    assert_eq!(
        location("DW_OP_implicit_value [01020304] DW_OP_lit3 DW_OP_offset"),
        implicit(&[1, 2, 3, 4], 24)
    );
    assert_eq!(
        location("DW_OP_implicit_value [01020304] DW_OP_lit31 DW_OP_bit_offset"),
        implicit(&[1, 2, 3, 4], 31)
    );
    assert_eq!(location("DW_OP_reg3 DW_OP_offset_uconst 7"), reg(3, 56));
    assert_eq!(
        location("DW_OP_regx 2560 DW_OP_constu 255 DW_OP_offset"),
        reg(VGPR0, 255 * 8)
    );
    let parts = vec![part(reg(0, 0), 16), part(reg(1, 0), 16)];
    assert_eq!(
        location(
            "DW_OP_reg0 DW_OP_piece 2 DW_OP_reg1 DW_OP_piece 2 DW_OP_piece_end DW_OP_offset_uconst 3"
        ),
        Location::single(Storage::Composite(parts), 24)
    );
    assert_eq!(
        location("DW_OP_addr 0x10 DW_OP_consts -16 DW_OP_offset"),
        Location::memory(0, 0)
    );
    // "The DW_OP_LLVM_*offset operations leave an undefined location
    // description unchanged."
    assert_eq!(
        location("DW_OP_undefined DW_OP_constu 1000 DW_OP_offset"),
        Location::undefined()
    );
    // A register whose size the caller did not give is not checked here.
    let unknown = run_with("DW_OP_regx 99 DW_OP_offset_uconst 4096", |_| {}).unwrap();
    assert_eq!(unknown, Entry::Location(reg(99, 4096 * 8)));
}

#[test]
fn pieces() {
    // Composite parts: "All the bits must be within the size of LS or the
    // DWARF expression is ill-formed."
    for (text, index, op) in [
        ("DW_OP_reg0 DW_OP_piece 9", 1, "DW_OP_piece"),
        ("DW_OP_reg0 DW_OP_bit_piece 60 5", 1, "DW_OP_bit_piece"),
        (
            "DW_OP_reg0 DW_OP_offset_uconst 4 DW_OP_piece 5",
            2,
            "DW_OP_piece",
        ),
        (
            "DW_OP_implicit_value [0102] DW_OP_piece 3",
            1,
            "DW_OP_piece",
        ),
        (
            "DW_OP_lit1 DW_OP_stack_value DW_OP_piece 9",
            2,
            "DW_OP_piece",
        ),
        (
            "DW_OP_reg0 DW_OP_piece 2 DW_OP_piece_end DW_OP_piece 3",
            3,
            "DW_OP_piece",
        ),
        (
            "DW_OP_implicit_pointer 0x100 0 DW_OP_piece 9",
            1,
            "DW_OP_piece",
        ),
        (
            "DW_OP_const8u 0xfffffffffffffffc DW_OP_piece 5",
            1,
            "DW_OP_piece",
        ),
        ("DW_OP_regx 2560 DW_OP_piece 257", 1, "DW_OP_piece"),
    ] {
        ill_formed(text, index, op);
    }
    // Exactly what remains: each storage to its end.
    assert_eq!(
        location("DW_OP_reg0 DW_OP_offset_uconst 4 DW_OP_piece 4"),
        Location::composite(vec![part(reg(0, 32), 32)])
    );
    assert_eq!(
        location("DW_OP_reg0 DW_OP_bit_piece 59 5"),
        Location::composite(vec![part(reg(0, 5), 59)])
    );
    let two = Location::single(Storage::Implicit([1u8, 2].as_slice().into()), 0);
    assert_eq!(
        location("DW_OP_implicit_value [0102] DW_OP_piece 2"),
        Location::composite(vec![part(two, 16)])
    );
    assert!(run("DW_OP_lit1 DW_OP_stack_value DW_OP_piece 8").is_ok());
    assert!(run("DW_OP_const8u 0xfffffffffffffffc DW_OP_piece 4").is_ok());
    assert!(run("DW_OP_regx 2560 DW_OP_piece 256").is_ok());
    // The undefined location has no size: any piece of it is well-formed.
    assert!(run("DW_OP_piece 1000000 DW_OP_undefined DW_OP_piece 4096").is_ok());
    // "ill-formed if the size of the contiguous location storage is larger
    // than the size of the memory location storage corresponding to the
    // largest target architecture specific address space" (2^64 bytes).
    let big = "DW_OP_bit_piece 0xffffffffffffffff 0";
    let nine = format!("{big} {big} {big} {big} {big} {big} {big} {big} {big}");
    ill_formed(&nine, 8, "DW_OP_bit_piece");
    let eight = format!("{big} {big} {big} {big} {big} {big} {big} {big}");
    assert!(run(&eight).is_ok());
    // A 4-byte address space (address size 4) holds 2^32 bytes.
    let ops = parse_text("DW_OP_piece 0x100000000 DW_OP_piece 1", |_| None).unwrap();
    let small = Encoding {
        address_size: 4,
        ..Encoding::default()
    };
    match Evaluation::new(&ops, small)
        .evaluate()
        .map_err(locus_dwarf::Error::into_detail)
    {
        Err(ErrorDetail::Eval {
            index: 1,
            kind: ErrorKind::IllFormed(_),
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // "If a stack entry is required to be a location description L, but L
    // has an incomplete composite location description, then the DWARF
    // expression is ill-formed."
    ill_formed(
        "DW_OP_reg0 DW_OP_piece 4 DW_OP_offset_uconst 1",
        2,
        "DW_OP_offset_uconst",
    );
    ill_formed("DW_OP_reg0 DW_OP_piece 4 DW_OP_deref", 2, "DW_OP_deref");
    ill_formed(
        "DW_OP_reg0 DW_OP_piece 4 DW_OP_extend 8 2",
        2,
        "DW_OP_extend",
    );
    // DW_OP_piece: "Otherwise, the DWARF expression is ill-formed" (a value
    // that is not a location nor converts to one).
    assert!(matches!(
        fails(
            "DW_OP_const_type 0x30 [01000000] DW_OP_piece 4",
            1,
            "DW_OP_piece"
        ),
        ErrorKind::TypeMismatch(_)
    ));
    // DW_OP_LLVM_piece_end: "If the top stack entry is not a location
    // description L comprised of one incomplete composite location
    // description SL, then the DWARF expression is ill-formed."
    ill_formed("DW_OP_reg0 DW_OP_piece_end", 1, "DW_OP_piece_end");
    ill_formed(
        "DW_OP_reg0 DW_OP_piece 4 DW_OP_piece_end DW_OP_piece_end",
        3,
        "DW_OP_piece_end",
    );
    assert_eq!(
        location("DW_OP_reg0 DW_OP_piece 4 DW_OP_piece_end"),
        Location::composite(vec![part(reg(0, 0), 32)])
    );
}

#[test]
fn extend_and_select() {
    // DW_OP_LLVM_extend: "ill-formed if the element bit size or count are 0."
    ill_formed("DW_OP_reg0 DW_OP_extend 0 4", 1, "DW_OP_extend");
    ill_formed("DW_OP_reg0 DW_OP_extend 8 0", 1, "DW_OP_extend");
    // Its parts are parts: within the storage.
    ill_formed("DW_OP_reg0 DW_OP_extend 65 2", 1, "DW_OP_extend");
    ill_formed(
        "DW_OP_implicit_value [01] DW_OP_extend 9 2",
        1,
        "DW_OP_extend",
    );
    assert_eq!(
        location("DW_OP_reg0 DW_OP_extend 64 2"),
        Location::composite(vec![part(reg(0, 0), 64), part(reg(0, 0), 64)])
    );
    // DW_OP_LLVM_select_bit_piece: "ill-formed if S or C are 0, or if the bit
    // size of M is less than C."
    let select = |s: u64, c: u64, mask: &str| {
        format!("DW_OP_reg0 DW_OP_reg1 {mask} DW_OP_select_bit_piece {s} {c}")
    };
    ill_formed(&select(0, 2, "DW_OP_lit1"), 3, "DW_OP_select_bit_piece");
    ill_formed(&select(8, 0, "DW_OP_lit1"), 3, "DW_OP_select_bit_piece");
    assert_eq!(
        fails(
            &select(1, 33, "DW_OP_const_type 0x44 [01000000]"),
            3,
            "DW_OP_select_bit_piece"
        ),
        ErrorKind::BadSize(33)
    );
    // Part N is at N * S of L0 or L1: past the end of an 8-byte register
    // (an evaluation error, as DW_OP_LLVM_bit_offset), and a part running
    // past it (ill-formed).
    assert_eq!(
        fails(&select(32, 3, "DW_OP_lit5"), 3, "DW_OP_select_bit_piece"),
        ErrorKind::OffsetOutOfRange
    );
    ill_formed(&select(24, 3, "DW_OP_lit5"), 3, "DW_OP_select_bit_piece");
    // Neighbours: the mask's 32 bits, and parts to the registers' ends.
    assert!(run(&select(1, 32, "DW_OP_const_type 0x44 [01000000]")).is_ok());
    assert_eq!(
        location(&select(32, 2, "DW_OP_lit1")),
        Location::composite(vec![part(reg(1, 0), 32), part(reg(0, 32), 32)])
    );
    // An undefined L0 keeps no offset.
    assert_eq!(
        location("DW_OP_undefined DW_OP_reg1 DW_OP_lit2 DW_OP_select_bit_piece 32 2"),
        Location::composite(vec![part(Location::undefined(), 32), part(reg(1, 32), 32)])
    );
}

#[test]
fn overlays() {
    // DW_OP_LLVM_bit_overlay / DW_OP_LLVM_overlay: "ill-formed if BS or BO
    // are negative values" and "ill-formed if rbss(BL) is less than BO plus
    // BS" (now also for registers of known size).
    for (text, op) in [
        (
            "DW_OP_reg0 DW_OP_reg1 DW_OP_consts -1 DW_OP_lit1 DW_OP_bit_overlay",
            "DW_OP_bit_overlay",
        ),
        (
            "DW_OP_reg0 DW_OP_reg1 DW_OP_lit0 DW_OP_consts -1 DW_OP_overlay",
            "DW_OP_overlay",
        ),
        (
            "DW_OP_reg0 DW_OP_reg1 DW_OP_lit4 DW_OP_lit5 DW_OP_overlay",
            "DW_OP_overlay",
        ),
        (
            "DW_OP_reg0 DW_OP_reg1 DW_OP_constu 60 DW_OP_lit5 DW_OP_bit_overlay",
            "DW_OP_bit_overlay",
        ),
    ] {
        let e = fails(text, 4, op);
        assert!(matches!(e, ErrorKind::BadOverlay(_)), "{text}: {e:?}");
        assert!(e.is_ill_formed());
    }
    // Exactly to the end of the base register.
    assert_eq!(
        location("DW_OP_reg0 DW_OP_reg1 DW_OP_lit4 DW_OP_lit4 DW_OP_overlay"),
        Location::composite(vec![part(reg(0, 0), 32), part(reg(1, 0), 32)])
    );
    assert_eq!(
        location("DW_OP_reg0 DW_OP_reg1 DW_OP_lit0 DW_OP_lit8 DW_OP_overlay"),
        reg(1, 0)
    );
}

#[test]
fn kinds_and_results() {
    // "If the kind of a stack entry does not match the kind required by the
    // operation and is not implicitly convertible ... ill-formed": a register
    // location is no value, a typed value no location.
    assert!(matches!(
        fails("DW_OP_reg0 DW_OP_lit1 DW_OP_plus", 2, "DW_OP_plus"),
        ErrorKind::TypeMismatch(_)
    ));
    assert!(matches!(
        fails(
            "DW_OP_const_type 0x30 [01000000] DW_OP_offset_uconst 1",
            1,
            "DW_OP_offset_uconst"
        ),
        ErrorKind::TypeMismatch(_)
    ));
    // A memory location in address space 0 converts to its address.
    assert!(
        matches!(ok("DW_OP_addr 0x10 DW_OP_lit1 DW_OP_plus"), Entry::Value(v) if v.bits == 0x11)
    );
    // A location result that is a typed value: no location.
    let ops = parse_text("DW_OP_const_type 0x30 [01000000]", |_| None).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    assert_eq!(
        eval.evaluate().unwrap(),
        EvaluationResult::RequiresBaseType { offset: 0x30 }
    );
    eval.resume_with_base_type(0x05, 4).unwrap();
    assert_eq!(eval.location_result(), None);
    // DW_OP_LLVM_user: "The vendor extension opcode 0 is reserved."
    let user = Encoding {
        extension: ExtensionEncoding::User,
        ..Encoding::default()
    };
    assert!(matches!(
        decode(&[0xe9, 0x00], user).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::UnknownUserOpcode {
            offset: 0,
            sub_opcode: 0
        })
    ));
}
