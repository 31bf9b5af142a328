//! The evaluator against the spec's worked examples
//! (`shared/spec/001_dwarf_location_descriptions_on_stack.md`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::eval::DEFAULT_MAX_STEPS;
use locus_dwarf::ErrorDetail;
use locus_dwarf::{
    parse_text, Encoding, Entry, Error, ErrorKind, Evaluation, EvaluationResult, Location, Part,
    SingleLocation, Storage, Value, ValueType,
};

use crate::common;
use crate::eval_support;

use common::{resolve, MIXED, MULTI_LANE, SGPR0, SGPR3, VGPR0, VGPR1};
use eval_support::Ctx;

impl Ctx {
    /// The spec examples' target: SGPR0 = 0x1000, SGPR3, two 64-lane vector
    /// registers (lane i holds i * 0x100), 42 at 0x1000, lane 3, frame base
    /// 0x2000.
    fn standard() -> Ctx {
        let mut c = Ctx::default();
        c.registers.insert(SGPR0, 0x1000u64.to_le_bytes().to_vec());
        c.registers
            .insert(SGPR3, 0xdead_beefu32.to_le_bytes().to_vec());
        let vgpr: Vec<u8> = (0..64u32).flat_map(|i| (i * 0x100).to_le_bytes()).collect();
        c.registers.insert(VGPR0, vgpr.clone());
        c.registers.insert(VGPR1, vgpr);
        c.memory.push((0, 0x1000, 42u64.to_le_bytes().to_vec()));
        c.lane = 3;
        c.frame_base = 0x2000;
        c
    }
}

/// Runs `ops` against a copy of `ctx`. The spec's examples need nothing
/// but registers, memory, the lane and the frame base: any other request
/// fails the test.
fn evaluate<'a>(ops: &'a [locus_dwarf::Op], ctx: &Ctx) -> Result<Evaluation<'a>, Error> {
    let mut ctx = ctx.clone();
    let eval = eval_support::evaluate(ops, &mut ctx, Encoding::default());
    for r in &ctx.log {
        assert!(
            matches!(
                r,
                EvaluationResult::Complete
                    | EvaluationResult::RequiresRegister { .. }
                    | EvaluationResult::RequiresMemory { .. }
                    | EvaluationResult::RequiresLane
                    | EvaluationResult::RequiresFrameBase
            ),
            "unexpected request {r:?}"
        );
    }
    eval
}

fn run(text: &str, ctx: &Ctx) -> Result<Entry, Error> {
    let ops = parse_text(text, resolve).unwrap();
    let eval = evaluate(&ops, ctx)?;
    Ok(eval.result().cloned().expect("empty stack"))
}

fn location(text: &str) -> Location {
    match run(text, &Ctx::standard()).unwrap() {
        Entry::Location(l) => l,
        Entry::Value(v) => panic!("expected a location, got {v:?}"),
    }
}

fn generic(v: u64) -> Value {
    Value::generic(v, 8)
}

fn reg(r: u16, bit_offset: u128) -> Location {
    Location::single(Storage::Register(r), bit_offset)
}

fn part(location: Location, bit_size: u64) -> Part {
    Part { location, bit_size }
}

fn composite(parts: Vec<Part>, bit_offset: u128) -> Location {
    Location::single(Storage::Composite(parts), bit_offset)
}

fn eval_error(text: &str) -> (usize, &'static str, ErrorKind, String) {
    match run(text, &Ctx::standard()) {
        Err(e) if matches!(e.detail(), ErrorDetail::Eval { .. }) => {
            let ErrorDetail::Eval {
                index,
                op,
                kind: error,
            } = e.clone().into_detail()
            else {
                unreachable!()
            };
            (index, op, error, e.to_string())
        }
        other => panic!("expected an evaluation error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// DWARF 5 examples

#[test]
fn dynamic_array_size() {
    let r = run(
        "DW_OP_regval_type SGPR0 Generic\nDW_OP_deref",
        &Ctx::standard(),
    )
    .unwrap();
    assert_eq!(r, Entry::Value(generic(42)));
}

#[test]
fn variable_in_register() {
    assert_eq!(location("DW_OP_regx SGPR0"), reg(SGPR0, 0));
}

#[test]
fn variable_in_memory() {
    let ops = parse_text(
        "DW_OP_regval_type SGPR0 Generic\nDW_OP_plus_uconst 0x10",
        resolve,
    )
    .unwrap();
    let eval = evaluate(&ops, &Ctx::standard()).unwrap();
    // The stack holds a generic value ...
    assert_eq!(eval.result().cloned(), Some(Entry::Value(generic(0x1010))));
    // ... which, in a location context, is a global memory location.
    assert_eq!(eval.location_result(), Some(Location::memory(0, 0x1010)));
}

const COMPOSITE: &str = "DW_OP_regx SGPR3
 DW_OP_piece 4
 DW_OP_piece 2
 DW_OP_bregx SGPR0 0x10
 DW_OP_piece 2";

fn composite_parts() -> Vec<Part> {
    vec![
        part(reg(SGPR3, 0), 32),
        part(Location::undefined(), 16),
        part(Location::memory(0, 0x1010), 16),
    ]
}

#[test]
fn variable_spread_across_register_undefined_memory() {
    assert_eq!(location(COMPOSITE), composite(composite_parts(), 0));
}

#[test]
fn offsetting_a_composite_with_plus_fails() {
    let text = format!("{COMPOSITE}\nDW_OP_plus_uconst 5");
    let (index, op, error, msg) = eval_error(&text);
    assert_eq!((index, op), (5, "DW_OP_plus_uconst"));
    assert!(matches!(error, ErrorKind::TypeMismatch(_)), "{error:?}");
    assert!(
        msg.starts_with("op #5 DW_OP_plus_uconst: type mismatch"),
        "{msg}"
    );
}

#[test]
fn offsetting_a_composite_dwarf5_workaround() {
    let l = location("DW_OP_piece 1\nDW_OP_bregx SGPR0 0x10\nDW_OP_piece 2");
    assert_eq!(
        l,
        composite(
            vec![
                part(Location::undefined(), 8),
                part(Location::memory(0, 0x1010), 16)
            ],
            0
        )
    );
}

#[test]
fn offsetting_a_composite_with_the_extension() {
    // The composite must be completed (piece_end) before it can be offset.
    let l = location(&format!(
        "{COMPOSITE}\nDW_OP_piece_end\nDW_OP_offset_uconst 5"
    ));
    assert_eq!(l, composite(composite_parts(), 40));
}

// ---------------------------------------------------------------------------
// Extension examples

#[test]
fn spilled_to_part_of_a_vector_register() {
    assert_eq!(
        location("DW_OP_regx VGPR0\nDW_OP_offset_uconst 20"),
        reg(VGPR0, 160)
    );
}

#[test]
fn spread_across_multiple_vector_registers() {
    // Lane 3: each part starts at byte 12 of its register.
    assert_eq!(
        location(MULTI_LANE),
        composite(vec![part(reg(VGPR0, 96), 32), part(reg(VGPR1, 96), 32)], 0)
    );
    let mut ctx = Ctx::standard();
    ctx.lane = 0;
    let Entry::Location(l) = run(MULTI_LANE, &ctx).unwrap() else {
        panic!()
    };
    assert_eq!(
        l,
        composite(vec![part(reg(VGPR0, 0), 32), part(reg(VGPR1, 0), 32)], 0)
    );
}

fn mixed_parts() -> Vec<Part> {
    vec![
        part(reg(VGPR0, 96), 32),
        part(Location::memory(0, 0xbeef), 16),
        part(
            Location::single(
                Storage::Implicit(0xf00du64.to_le_bytes().to_vec().into()),
                0,
            ),
            16,
        ),
    ]
}

#[test]
fn spread_across_multiple_kinds_of_locations() {
    assert_eq!(location(MIXED), composite(mixed_parts(), 0));
}

#[test]
fn piece_end_makes_a_composite_usable_by_later_operations() {
    // A complete composite on the stack can be offset, and more entries can
    // follow it (stack_value no longer ends the expression either).
    let l = location(&format!("{MIXED}\nDW_OP_offset_uconst 4"));
    assert_eq!(l, composite(mixed_parts(), 32));
    // Two composites on the stack; swap and drop keep the first.
    let l = location(&format!(
        "{MIXED}\nDW_OP_regx SGPR3\nDW_OP_piece 4\nDW_OP_piece_end\nDW_OP_swap\nDW_OP_drop"
    ));
    assert_eq!(l, composite(vec![part(reg(SGPR3, 0), 32)], 0));
}

#[test]
fn address_spaces() {
    let expected = Location::memory(1, 0x1010);
    // The spec writes `DW_OP_offset 0x10`; DW_OP_offset takes its offset
    // from the stack, so the operand form is DW_OP_offset_uconst.
    let l = location(
        "DW_OP_regval_type SGPR0 Generic\nDW_OP_uconst 1\nDW_OP_form_aspace_address\nDW_OP_offset_uconst 0x10",
    );
    assert_eq!(l, expected);
    let l = location(
        "DW_OP_regval_type SGPR0 Generic\nDW_OP_uconst 1\nDW_OP_form_aspace_address\nDW_OP_uconst 0x10\nDW_OP_offset",
    );
    assert_eq!(l, expected);
    // A non-default address space memory location does not convert to a value.
    let (index, _, error, _) =
        eval_error("DW_OP_lit0\nDW_OP_lit1\nDW_OP_form_aspace_address\nDW_OP_plus_uconst 1");
    assert_eq!(index, 3);
    assert!(matches!(error, ErrorKind::TypeMismatch(_))); // Memory requests name 32-bit address spaces (LLVM's are 24): a read in a
                                                          // larger one is refused, naming it, not asked of a truncated space.
    let (index, _, error, _) =
        eval_error("DW_OP_lit0\nDW_OP_constu 0x100000000\nDW_OP_form_aspace_address\nDW_OP_deref");
    assert_eq!(index, 3);
    assert_eq!(
        error,
        ErrorKind::MemoryUnavailable {
            address_space: 1 << 32,
            address: 0,
            size: 8
        }
    );
}

#[test]
fn bit_offsets() {
    assert_eq!(
        location("DW_OP_regx SGPR3\nDW_OP_uconst 20\nDW_OP_bit_offset"),
        reg(SGPR3, 20)
    );
    // Bit offsets apply to memory too, and add to byte offsets.
    assert_eq!(
        location("DW_OP_addr 0x100\nDW_OP_lit3\nDW_OP_bit_offset\nDW_OP_offset_uconst 1"),
        Location::single(Storage::Memory { address_space: 0 }, 0x101 * 8 + 3)
    );
}

// ---------------------------------------------------------------------------
// Other operations

#[test]
fn implicit_conversions_between_memory_locations_and_addresses() {
    // DW_OP_addr pushes a memory location; arithmetic sees its address.
    assert_eq!(
        run("DW_OP_addr 0x1000\nDW_OP_plus_uconst 8", &Ctx::standard()).unwrap(),
        Entry::Value(generic(0x1008))
    );
    // A generic value is a memory location for deref and offset.
    assert_eq!(
        run("DW_OP_constu 0x1000\nDW_OP_deref_size 1", &Ctx::standard()).unwrap(),
        Entry::Value(generic(42))
    );
    assert_eq!(
        location("DW_OP_constu 0x1000\nDW_OP_offset_uconst 2"),
        Location::memory(0, 0x1002)
    );
}

#[test]
fn deref_through_register_and_implicit_locations() {
    // Lane 3 of VGPR0 holds 0x300.
    assert_eq!(
        run(
            "DW_OP_regx VGPR0\nDW_OP_offset_uconst 12\nDW_OP_deref_size 4",
            &Ctx::standard()
        )
        .unwrap(),
        Entry::Value(generic(0x300))
    );
    assert_eq!(
        run(
            "DW_OP_implicit_value [11 22 33 44]\nDW_OP_offset_uconst 1\nDW_OP_deref_size 2",
            &Ctx::standard()
        )
        .unwrap(),
        Entry::Value(generic(0x3322))
    );
    let (_, op, error, _) = eval_error("DW_OP_undefined\nDW_OP_deref");
    assert_eq!((op, error), ("DW_OP_deref", ErrorKind::UndefinedRead));
}

#[test]
fn registers_frame_base_and_constants() {
    let c = Ctx::standard();
    assert_eq!(
        run("DW_OP_bregx SGPR0 -8", &c).unwrap(),
        Entry::Value(generic(0xff8))
    );
    assert_eq!(
        run("DW_OP_fbreg -16", &c).unwrap(),
        Entry::Value(generic(0x1ff0))
    );
    assert_eq!(
        run("DW_OP_const1s -1", &c).unwrap(),
        Entry::Value(generic(u64::MAX))
    );
    assert_eq!(location("DW_OP_reg5"), reg(5, 0));
    assert_eq!(
        location("DW_OP_implicit_pointer 0x2a -4"),
        Location::single(
            Storage::ImplicitPointer {
                die: 0x2a,
                byte_offset: -4,
                address_space: None,
            },
            0
        )
    );
}

#[test]
fn arithmetic_logic_and_comparisons() {
    let c = Ctx::standard();
    let v = |t: &str| match run(t, &c).unwrap() {
        Entry::Value(v) => v.bits,
        e => panic!("{e:?}"),
    };
    assert_eq!(v("DW_OP_lit7 DW_OP_lit3 DW_OP_minus"), 4);
    assert_eq!(v("DW_OP_lit3 DW_OP_lit7 DW_OP_minus"), (-4i64) as u64);
    assert_eq!(v("DW_OP_lit6 DW_OP_lit7 DW_OP_mul"), 42);
    assert_eq!(v("DW_OP_consts -7 DW_OP_lit2 DW_OP_div"), (-3i64) as u64);
    assert_eq!(v("DW_OP_lit7 DW_OP_lit3 DW_OP_mod"), 1);
    assert_eq!(v("DW_OP_consts -5 DW_OP_abs"), 5);
    assert_eq!(v("DW_OP_lit5 DW_OP_neg"), (-5i64) as u64);
    assert_eq!(v("DW_OP_lit0 DW_OP_not"), u64::MAX);
    assert_eq!(v("DW_OP_lit12 DW_OP_lit10 DW_OP_and"), 8);
    assert_eq!(v("DW_OP_lit12 DW_OP_lit10 DW_OP_or"), 14);
    assert_eq!(v("DW_OP_lit12 DW_OP_lit10 DW_OP_xor"), 6);
    assert_eq!(v("DW_OP_lit1 DW_OP_lit4 DW_OP_shl"), 16);
    assert_eq!(v("DW_OP_lit16 DW_OP_lit4 DW_OP_shr"), 1);
    assert_eq!(v("DW_OP_consts -16 DW_OP_lit2 DW_OP_shra"), (-4i64) as u64);
    assert_eq!(v("DW_OP_consts -1 DW_OP_lit1 DW_OP_lt"), 1);
    assert_eq!(v("DW_OP_lit1 DW_OP_lit1 DW_OP_eq"), 1);
    assert_eq!(v("DW_OP_lit1 DW_OP_lit2 DW_OP_ge"), 0);
    assert_eq!(v("DW_OP_lit2 DW_OP_lit1 DW_OP_gt"), 1);
    assert_eq!(v("DW_OP_lit2 DW_OP_lit2 DW_OP_le"), 1);
    assert_eq!(v("DW_OP_lit2 DW_OP_lit1 DW_OP_ne"), 1);
    let (_, _, error, _) = eval_error("DW_OP_lit1 DW_OP_lit0 DW_OP_div");
    assert_eq!(error, ErrorKind::DivisionByZero);
}

#[test]
fn stack_operations_on_locations() {
    let c = Ctx::standard();
    // dup a register location, offset the copy: the original is unchanged.
    let ops = parse_text(
        "DW_OP_regx SGPR3 DW_OP_dup DW_OP_offset_uconst 1 DW_OP_lit9 DW_OP_rot",
        resolve,
    )
    .unwrap();
    let eval = evaluate(&ops, &c).unwrap();
    assert_eq!(
        eval.stack(),
        vec![
            Entry::Value(generic(9)),
            Entry::Location(reg(SGPR3, 0)),
            Entry::Location(reg(SGPR3, 8)),
        ]
    );
    assert_eq!(
        location("DW_OP_regx SGPR3 DW_OP_lit1 DW_OP_over DW_OP_swap DW_OP_drop"),
        reg(SGPR3, 0)
    );
    assert_eq!(
        location("DW_OP_regx SGPR3 DW_OP_lit1 DW_OP_lit2 DW_OP_pick 2"),
        reg(SGPR3, 0)
    );
}

#[test]
fn branches() {
    // lit1 @0, bra @1 (3 bytes), lit5 @4, lit7 @5: bra 1 jumps over lit5.
    let c = Ctx::standard();
    let ops = parse_text("DW_OP_lit1 DW_OP_bra 1 DW_OP_lit5 DW_OP_lit7", resolve).unwrap();
    let eval = evaluate(&ops, &c).unwrap();
    assert_eq!(eval.stack(), vec![Entry::Value(generic(7))]);
    let ops = parse_text("DW_OP_lit0 DW_OP_bra 1 DW_OP_lit5 DW_OP_lit7", resolve).unwrap();
    let eval = evaluate(&ops, &c).unwrap();
    assert_eq!(
        eval.stack(),
        vec![Entry::Value(generic(5)), Entry::Value(generic(7))]
    );
    // A counting loop: 5 iterations of (dup; bra) leave 0.
    // lit5 @0; [loop @1] lit1 @1, minus @2, dup @3, bra -6 @4 (to 1)
    let ops = parse_text(
        "DW_OP_lit5 DW_OP_lit1 DW_OP_minus DW_OP_dup DW_OP_bra -6",
        resolve,
    )
    .unwrap();
    let eval = evaluate(&ops, &c).unwrap();
    assert_eq!(eval.result().cloned(), Some(Entry::Value(generic(0))));
    // A branch into the middle of an operation.
    let (_, op, error, _) = eval_error("DW_OP_skip 1 DW_OP_constu 300");
    assert_eq!(op, "DW_OP_skip");
    assert_eq!(error, ErrorKind::BadBranchTarget(4));
}

#[test]
fn infinite_loop_is_an_error() {
    let (index, op, error, msg) = eval_error("DW_OP_skip -3");
    assert_eq!((index, op), (0, "DW_OP_skip"));
    assert_eq!(error, ErrorKind::StepLimitExceeded(DEFAULT_MAX_STEPS));
    assert!(msg.starts_with("op #0 DW_OP_skip: step limit"), "{msg}");

    let ops = parse_text("DW_OP_nop DW_OP_skip -4", resolve).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    eval.set_max_steps(10);
    assert!(matches!(
        eval.evaluate().map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Eval {
            kind: ErrorKind::StepLimitExceeded(10),
            ..
        })
    ));
}

#[test]
fn stack_underflow_is_an_error() {
    for (text, index, op) in [
        ("DW_OP_plus", 0, "DW_OP_plus"),
        ("DW_OP_lit1 DW_OP_plus", 1, "DW_OP_plus"),
        ("DW_OP_drop", 0, "DW_OP_drop"),
        ("DW_OP_lit1 DW_OP_swap", 1, "DW_OP_swap"),
        ("DW_OP_lit1 DW_OP_lit2 DW_OP_rot", 2, "DW_OP_rot"),
        ("DW_OP_lit1 DW_OP_pick 1", 1, "DW_OP_pick"),
        ("DW_OP_offset_uconst 1", 0, "DW_OP_offset_uconst"),
        ("DW_OP_lit1 DW_OP_offset", 1, "DW_OP_offset"),
        ("DW_OP_deref", 0, "DW_OP_deref"),
        ("DW_OP_stack_value", 0, "DW_OP_stack_value"),
        ("DW_OP_piece_end", 0, "DW_OP_piece_end"),
        (
            "DW_OP_lit1 DW_OP_form_aspace_address",
            1,
            "DW_OP_form_aspace_address",
        ),
    ] {
        let (i, o, error, msg) = eval_error(text);
        assert_eq!(
            (i, o, error),
            (index, op, ErrorKind::StackUnderflow),
            "{text}"
        );
        assert_eq!(msg, format!("op #{index} {op}: stack underflow"));
    }
}

#[test]
fn piece_end_without_composite_and_type_mismatches() {
    // Ill-formed, as the normative text says.
    let (_, _, error, _) = eval_error("DW_OP_regx SGPR3 DW_OP_piece_end");
    assert!(matches!(error, ErrorKind::IllFormed(_)), "{error:?}");
    assert!(error.is_ill_formed());
    let (index, op, error, _) = eval_error("DW_OP_regx SGPR3 DW_OP_lit1 DW_OP_plus");
    assert_eq!((index, op), (2, "DW_OP_plus"));
    assert!(matches!(error, ErrorKind::TypeMismatch(_)));
}

#[test]
fn offsets_apply_to_every_place() {
    let mut l = Location {
        places: vec![
            SingleLocation {
                storage: Storage::Register(SGPR3),
                bit_offset: 0,
            },
            SingleLocation::memory(0, 0x1000),
        ]
        .into(),
    };
    l.offset_bits(16, 8).unwrap();
    assert_eq!(l.places[0].bit_offset, 16);
    assert_eq!(l.places[1].bit_offset, 0x1002 * 8);
    assert!(l.offset_bits(-1_000_000, 8).is_err());
}

#[test]
fn values() {
    let a = Value::new(ValueType::Unsigned(1), 0xff, 8);
    let b = Value::new(ValueType::Unsigned(1), 2, 8);
    let s = a.binary(locus_dwarf::value::BinaryOp::Plus, b, 8).unwrap();
    assert_eq!(s.bits, 1);
    let c = Value::new(ValueType::Signed(1), 0xff, 8);
    assert_eq!(c.to_i64(8), -1);
    assert!(a.binary(locus_dwarf::value::BinaryOp::Plus, c, 8).is_err());
    // Generic wraps at the address size.
    assert_eq!(Value::generic(u64::MAX, 4).bits, 0xffff_ffff);
}

#[test]
fn requests_must_be_answered_by_the_right_method() {
    let ops = parse_text("DW_OP_bregx SGPR0 0", resolve).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    assert_eq!(
        eval.evaluate().unwrap(),
        EvaluationResult::RequiresRegister { register: SGPR0 }
    );
    assert!(eval.resume_with_lane(1).is_err());
    assert!(eval.evaluate().is_err());
    assert_eq!(
        eval.resume_with_register(&[1, 0, 0, 0, 0, 0, 0, 0])
            .unwrap(),
        EvaluationResult::Complete
    );
    assert_eq!(eval.result().cloned(), Some(Entry::Value(generic(1))));
}

/// Answers every request with something plausible; used to check that no
/// decodable expression makes the evaluator panic or hang.
fn evaluate_anything(ops: &[locus_dwarf::Op]) {
    let mut eval = Evaluation::new(ops, Encoding::default());
    eval.set_max_steps(1000);
    let mut r = eval.evaluate();
    for _ in 0..10_000 {
        r = match r {
            Ok(EvaluationResult::Complete) | Err(_) => return,
            Ok(EvaluationResult::RequiresRegister { .. }) => eval.resume_with_register(&[7; 16]),
            Ok(EvaluationResult::RequiresMemory { size, .. }) => {
                eval.resume_with_memory(&vec![3; usize::from(size)])
            }
            Ok(EvaluationResult::RequiresLane) => eval.resume_with_lane(2),
            Ok(EvaluationResult::RequiresIteration) => eval.resume_with_iteration(1),
            Ok(EvaluationResult::RequiresFrameBase) => eval.resume_with_frame_base(0x100),
            Ok(EvaluationResult::RequiresCallFrameCfa) => eval.resume_with_call_frame_cfa(0x200),
            Ok(EvaluationResult::RequiresObjectAddress) => eval.resume_with_object_address(0x300),
            Ok(EvaluationResult::RequiresBaseType { offset }) => {
                // Cycle through the encodings, some unsupported.
                eval.resume_with_base_type((offset % 8) as u8, offset % 10)
            }
            Ok(
                EvaluationResult::RequiresEntryValue { .. }
                | EvaluationResult::RequiresParameterRef { .. }
                | EvaluationResult::RequiresVariableValue { .. },
            ) => eval.resume_with_entry_value(Entry::Value(Value::generic(5, 8))),
            Ok(EvaluationResult::RequiresCallee { offset, .. }) => {
                // A callee that calls itself again (recursion) or adds.
                if offset % 2 == 0 {
                    eval.resume_with_callee(&[0x98, 0x02, 0x00])
                } else {
                    eval.resume_with_callee(&[0x31, 0x22])
                }
            }
            Ok(EvaluationResult::RequiresIndexedAddress { index, .. }) => {
                eval.resume_with_indexed_address(index.wrapping_mul(8))
            }
            Ok(EvaluationResult::RequiresTlsAddress { offset }) => {
                eval.resume_with_tls_address(offset.wrapping_add(0x7000))
            }
            Ok(EvaluationResult::RequiresEntryRegister { register }) => {
                eval.resume_with_entry_register(Location::register(register))
            }
            Ok(EvaluationResult::Stepped) => eval.evaluate(),
            Ok(other) => panic!("a request this test does not answer: {other:?}"),
        };
    }
    panic!("too many requests");
}

proptest::proptest! {
    #[test]
    fn no_panic_on_decodable_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24)) {
        if let Ok(ops) = locus_dwarf::decode(&bytes, Encoding::default()) {
            let ops: Vec<_> = ops.into_iter().map(|(_, op)| op).collect();
            evaluate_anything(&ops);
        }
    }

    #[test]
    fn no_panic_on_small_op_sequences(idx in proptest::collection::vec(0usize..58, 0..16)) {
        use locus_dwarf::Op;
        let table = [
            Op::Lit(0), Op::Lit(1), Op::Lit(8), Op::Consts(-1), Op::Dup, Op::Drop, Op::Over,
            Op::Pick(1), Op::Swap, Op::Rot, Op::Plus, Op::Minus, Op::Div, Op::Mod, Op::Shl,
            Op::Shra, Op::Lt, Op::Bra(-3), Op::Skip(1), Op::Reg(1), Op::Regx(2560),
            Op::Breg(1, -4), Op::Fbreg(8), Op::Deref, Op::DerefSize(2), Op::Piece(4),
            Op::BitPiece { size: 3, offset: 5 }, Op::PieceEnd, Op::StackValue,
            Op::ImplicitValue(vec![1, 2]), Op::Offset, Op::OffsetUconst(4), Op::BitOffset,
            Op::PushLane, Op::FormAspaceAddress, Op::Undefined, Op::Addr(0x10), Op::Nop,
            Op::Xderef, Op::CallFrameCfa,
            Op::ConstType { type_offset: 0x30, value: vec![0, 0, 128, 63] },
            Op::RegvalType { register: 1, type_offset: 0x35 }, Op::Convert(0x31),
            Op::Reinterpret(0x34), Op::DerefType { size: 4, type_offset: 0x34 },
            Op::EntryValue(vec![0x51]), Op::Call2(2), Op::Call4(3), Op::Addrx(1),
            Op::Constx(2), Op::FormTlsAddress, Op::CallFrameEntryReg(4),
            Op::AspaceImplicitPointer { die: 1, offset: 2 },
            Op::Extend { bit_size: 8, count: 40 }, Op::SelectBitPiece { bit_size: 4, count: 8 },
            Op::AspaceBregx { register: 1, offset: 3 }, Op::PushObjectAddress,
            Op::XderefType { size: 2, type_offset: 0x32 },
        ];
        let ops: Vec<Op> = idx.iter().map(|&i| table[i].clone()).collect();
        evaluate_anything(&ops);
    }
}

/// Straight from the bytes, an ill-formed expression is found when it is reached, with
/// the decoder's error; an invalid encoding at once, as `decode` finds it.
#[test]
fn from_bytes_reports_ill_formed_bytes_like_decode() {
    let bad = locus_dwarf::Encoding {
        address_size: 3,
        ..locus_dwarf::Encoding::default()
    };
    let mut eval = Evaluation::new(&[0x30], bad);
    let e = eval.evaluate().unwrap_err();
    assert_eq!(e, locus_dwarf::decode(&[0x30], bad).unwrap_err());
    // DW_OP_lit1, then DW_OP_const4u with two of its four bytes.
    let truncated = [0x31, 0x0c, 0x01, 0x02];
    let mut eval = Evaluation::new(&truncated, locus_dwarf::Encoding::default());
    let e = eval.evaluate().unwrap_err();
    assert_eq!(
        e,
        locus_dwarf::decode(&truncated, locus_dwarf::Encoding::default()).unwrap_err()
    );
    assert_eq!(e.offset(), Some(1));
    assert!(e.is_ill_formed());
}

/// Evaluation errors are the crate's one `Error` (a `std::error::Error`) with an
/// `ErrorKind`; an undecodable callee's decoding error is its source;
/// `Location` is the former name of `LocationDescription`.
#[test]
fn eval_errors_are_std_errors() {
    use std::error::Error as _;
    let ops = parse_text("DW_OP_plus", |_| None).unwrap();
    let mut eval = Evaluation::new(&ops, Encoding::default());
    let e = eval.evaluate().unwrap_err();
    assert_eq!(e.kind(), Some(&locus_dwarf::ErrorKind::StackUnderflow));
    assert!(e.source().is_none());
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert_eq!(boxed.to_string(), "op #0 DW_OP_plus: stack underflow");
    let l: locus_dwarf::Location = locus_dwarf::LocationDescription::register(3);
    assert_eq!(l, locus_dwarf::Location::register(3));
}

/// A lone `DW_OP_regN` (the shortcut past the loop) ends as the loop would: the
/// register location, one step counted (a step limit of 0 refuses it), an initial entry
/// kept below it, a bad encoding reported, and the same under `set_trace`.
#[test]
fn lone_register_is_the_loop_result() {
    let reg5 = Entry::Location(locus_dwarf::Location::register(5));
    let mut eval = Evaluation::new(&[0x55], Encoding::default());
    assert_eq!(eval.evaluate().unwrap(), EvaluationResult::Complete);
    assert_eq!(eval.result().cloned(), Some(reg5.clone()));
    assert_eq!(eval.pc(), 1);
    // Evaluating again after completion changes nothing.
    assert_eq!(eval.evaluate().unwrap(), EvaluationResult::Complete);
    assert_eq!(eval.result().cloned(), Some(reg5.clone()));

    let mut eval = Evaluation::new(&[0x55], Encoding::default());
    eval.set_max_steps(0);
    assert!(eval.evaluate().is_err());

    let mut eval = Evaluation::new(&[0x55], Encoding::default());
    eval.push(Entry::Value(Value::generic(7, 8)));
    assert_eq!(eval.evaluate().unwrap(), EvaluationResult::Complete);
    assert_eq!(
        eval.stack(),
        vec![Entry::Value(Value::generic(7, 8)), reg5.clone()]
    );

    let bad = Encoding {
        address_size: 3,
        ..Encoding::default()
    };
    assert!(Evaluation::new(&[0x55], bad).evaluate().is_err());

    let mut eval = Evaluation::new(&[0x55], Encoding::default());
    eval.set_trace(true);
    assert_eq!(eval.evaluate().unwrap(), EvaluationResult::Stepped);
    assert_eq!(eval.evaluate().unwrap(), EvaluationResult::Complete);
    assert_eq!(eval.result().cloned(), Some(reg5));
}

/// A constant then `DW_OP_stack_value` (the other shortcut past the loop) ends as the
/// loop would: implicit bytes of the value at the address size, two steps counted (a
/// limit of 1 refuses it at the second operation), negative and multi-byte LEB128s,
/// 4-byte addresses; a longer expression takes the loop.
#[test]
fn constant_stack_value_is_the_loop_result() {
    let cases: [(&[u8], Encoding); 6] = [
        (&[0x35, 0x9f], Encoding::default()),
        (&[0x11, 0x7f, 0x9f], Encoding::default()),
        (&[0x10, 0xe5, 0x8e, 0x26, 0x9f], Encoding::default()),
        (
            &[0x11, 0x7f, 0x9f],
            Encoding {
                address_size: 4,
                ..Encoding::default()
            },
        ),
        (&[0x10, 0x05, 0x9f, 0x93, 0x04], Encoding::default()),
        (&[0x30, 0x31, 0x9f], Encoding::default()),
    ];
    for (bytes, enc) in cases {
        let ops: Vec<_> = locus_dwarf::decode(bytes, enc)
            .unwrap()
            .into_iter()
            .map(|(_, op)| op)
            .collect();
        let mut general = Evaluation::new(&ops, enc);
        general.evaluate().unwrap();
        let mut fast = Evaluation::new(bytes, enc);
        assert_eq!(fast.evaluate().unwrap(), EvaluationResult::Complete);
        assert_eq!(
            fast.result().cloned(),
            general.result().cloned(),
            "{bytes:02x?}"
        );
        assert_eq!(fast.pc(), ops.len());
        let mut limited = Evaluation::new(bytes, enc);
        limited.set_max_steps(1);
        let e = limited.evaluate().unwrap_err();
        assert!(
            matches!(
                e.clone().into_detail(),
                ErrorDetail::Eval {
                    index: 1,
                    kind: ErrorKind::StepLimitExceeded(1),
                    ..
                }
            ),
            "{e}"
        );
    }
}
