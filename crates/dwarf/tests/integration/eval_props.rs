//! Property tests: random operation sequences, with random operands from
//! every operation kind, never panic or hang in the evaluator or the access
//! layer, and every error names an operation of the expression.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::access::{read, write, Target};
use locus_dwarf::ErrorDetail;
use locus_dwarf::{
    decode, encode, Encoding, Entry, Error, Evaluation, EvaluationResult, Expression,
    ExtensionEncoding, Location, Op, Value,
};
use proptest::prelude::*;

/// Registers are 16 bytes, memory is everything below 0x10000.
struct Fake;

impl Target for Fake {
    fn read_memory(&mut self, _: u64, address: u64, buf: &mut [u8]) -> bool {
        let ok = address.saturating_add(buf.len() as u64) <= 0x10000;
        buf.fill(address as u8);
        ok
    }
    fn read_register(&mut self, register: u16, offset: u64, buf: &mut [u8]) -> bool {
        buf.fill(register as u8);
        offset.saturating_add(buf.len() as u64) <= 16
    }
    fn write_memory(&mut self, _: u64, address: u64, bytes: &[u8]) -> bool {
        address.saturating_add(bytes.len() as u64) <= 0x10000
    }
    fn write_register(&mut self, _: u16, offset: u64, bytes: &[u8]) -> bool {
        offset.saturating_add(bytes.len() as u64) <= 16
    }
}

fn op(kind: u8, a: u64, b: i64, block: Vec<u8>) -> Op {
    let small = (a % 40) as u8;
    match kind % 60 {
        0 => Op::Addr(a & 0xffff),
        1 => Op::Deref,
        2 => Op::Const1u(a as u8),
        3 => Op::Const2s(b as i16),
        4 => Op::Constu(a),
        5 => Op::Consts(b),
        6 => Op::Dup,
        7 => Op::Drop,
        8 => Op::Over,
        9 => Op::Pick(small),
        10 => Op::Swap,
        11 => Op::Rot,
        12 => Op::Xderef,
        13 => Op::Abs,
        14 => Op::And,
        15 => Op::Div,
        16 => Op::Minus,
        17 => Op::Mod,
        18 => Op::Mul,
        19 => Op::Neg,
        20 => Op::Not,
        21 => Op::Plus,
        22 => Op::PlusUconst(a),
        23 => Op::Shl,
        24 => Op::Shra,
        25 => Op::Lt,
        26 => Op::Bra(b as i16 % 8),
        27 => Op::Skip(b as i16 % 8),
        28 => Op::Lit(small % 32),
        29 => Op::Reg(small % 32),
        30 => Op::Breg(small % 32, b),
        31 => Op::Regx(a % 70_000),
        32 => Op::Fbreg(b),
        33 => Op::Piece(a % 20),
        34 => Op::DerefSize(small % 10),
        35 => Op::BitPiece {
            size: a % 70,
            offset: (b as u64) % 70,
        },
        36 => Op::ImplicitValue(block),
        37 => Op::StackValue,
        38 => Op::ImplicitPointer { die: a, offset: b },
        39 => Op::EntryValue(block),
        40 => Op::ConstType {
            type_offset: a % 4,
            value: block,
        },
        41 => Op::RegvalType {
            register: a % 20,
            type_offset: (b as u64) % 4,
        },
        42 => Op::DerefType {
            size: small % 10,
            type_offset: (b as u64) % 4,
        },
        43 => Op::Convert(a % 4),
        44 => Op::Reinterpret(a % 4),
        45 => Op::Call2(a as u16 % 4),
        46 => Op::Addrx(a % 4),
        47 => Op::FormTlsAddress,
        48 => Op::FormAspaceAddress,
        49 => Op::PushLane,
        50 => Op::Offset,
        51 => Op::OffsetUconst(a % 100),
        52 => Op::BitOffset,
        53 => Op::CallFrameEntryReg(a % 20),
        54 => Op::Undefined,
        55 => Op::AspaceBregx {
            register: a % 20,
            offset: b,
        },
        56 => Op::AspaceImplicitPointer { die: a, offset: b },
        57 => Op::PieceEnd,
        58 => Op::Extend {
            bit_size: a % 70,
            count: (b as u64) % 70,
        },
        _ => Op::SelectBitPiece {
            bit_size: a % 70,
            count: (b as u64) % 70,
        },
    }
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        (
            any::<u8>(),
            any::<u64>(),
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..10),
        )
            .prop_map(|(k, a, b, block)| op(k, a, b, block)),
        0..24,
    )
}

/// Callees: 0 is empty, 1 adds, 2 calls itself, 3 is ill-formed.
const CALLEES: [&[u8]; 4] = [&[], &[0x31, 0x22], &[0x98, 0x02, 0x00], &[0x0c]];

fn check(ops: &[Op], encoding: Encoding) {
    let mut eval = Evaluation::new(ops, encoding);
    eval.set_max_steps(500);
    let mut r = eval.evaluate();
    for _ in 0..1000 {
        r = match r.map_err(locus_dwarf::Error::into_detail) {
            Ok(EvaluationResult::Complete) => break,
            Err(ErrorDetail::Eval {
                index,
                op,
                kind: error,
            }) => {
                assert!(index < ops.len(), "index {index} of {}", ops.len());
                assert_eq!(op, ops[index].name());
                let _ = error.to_string();
                return;
            }
            Err(e) => panic!("{e:?}"),
            Ok(request) => answer(&mut eval, request),
        };
    }
    let _ = eval.stack();
    if let Some(loc) = eval.location_result() {
        if let Ok(bits) = read(&loc, 80, &mut Fake) {
            assert_eq!(bits.bit_len(), 80);
            let _ = write(&loc, bits.bytes(), 80, &mut Fake);
        }
    }
}

/// Answers one request the way every test here does.
fn answer(eval: &mut Evaluation<'_>, request: EvaluationResult) -> Result<EvaluationResult, Error> {
    match request {
        EvaluationResult::Complete => Ok(EvaluationResult::Complete),
        EvaluationResult::RequiresRegister { register } => {
            eval.resume_with_register(&[register as u8; 16])
        }
        EvaluationResult::RequiresMemory { size, .. } => {
            eval.resume_with_memory(&vec![7; usize::from(size)])
        }
        EvaluationResult::RequiresLane => eval.resume_with_lane(3),
        EvaluationResult::RequiresIteration => eval.resume_with_iteration(1),
        EvaluationResult::RequiresFrameBase => eval.resume_with_frame_base(0x100),
        EvaluationResult::RequiresCallFrameCfa => eval.resume_with_call_frame_cfa(0x200),
        EvaluationResult::RequiresObjectAddress => eval.resume_with_object_address(0x300),
        EvaluationResult::RequiresBaseType { offset } => {
            let (enc, size) = [(5, 4), (4, 8), (8, 1), (4, 3)][offset as usize % 4];
            eval.resume_with_base_type(enc, size)
        }
        EvaluationResult::RequiresEntryValue { .. }
        | EvaluationResult::RequiresParameterRef { .. }
        | EvaluationResult::RequiresVariableValue { .. } => {
            eval.resume_with_entry_value(Entry::Value(Value::generic(5, 8)))
        }
        EvaluationResult::RequiresCallee { offset, .. } => {
            eval.resume_with_callee(CALLEES[offset as usize % 4])
        }
        EvaluationResult::RequiresIndexedAddress { index, .. } => {
            eval.resume_with_indexed_address(index.wrapping_mul(8))
        }
        EvaluationResult::RequiresTlsAddress { offset } => {
            eval.resume_with_tls_address(offset.wrapping_add(0x7000))
        }
        EvaluationResult::RequiresEntryRegister { register } => {
            eval.resume_with_entry_register(Location::register(register))
        }
        EvaluationResult::Stepped => eval.evaluate(),
        other => panic!("a request these tests do not answer: {other:?}"),
    }
}

/// Runs `eval` answering every request as `check` does; returns every
/// request and the outcome, to compare two evaluations of one expression.
fn transcript(mut eval: Evaluation<'_>) -> Vec<String> {
    eval.set_max_steps(500);
    let mut out = Vec::new();
    let mut r = eval.evaluate();
    for _ in 0..1000 {
        out.push(format!("{r:?}"));
        r = match r {
            Ok(EvaluationResult::Complete) => {
                out.push(format!(
                    "{:?} {:?}",
                    eval.result().cloned(),
                    eval.result().cloned()
                ));
                return out;
            }
            Err(_) => return out,
            Ok(request) => answer(&mut eval, request),
        };
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_op_sequences_never_panic(ops in ops()) {
        check(&ops, Encoding::default());
    }

    /// Evaluating straight from the bytes (decoding each operation as it runs,
    /// and with reused buffers) gives exactly the requests, errors and result
    /// of evaluating the decoded operations.
    #[test]
    fn from_bytes_matches_decoded_ops(ops in ops(), trace in any::<bool>()) {
        let encoding = Encoding::default();
        if let Ok(bytes) = encode(&ops, encoding) {
            let mut reference = Evaluation::new(&ops, encoding);
            reference.set_trace(trace);
            let expected = transcript(reference);
            let mut fresh = Evaluation::new(&bytes, encoding);
            fresh.set_trace(trace);
            prop_assert_eq!(&transcript(fresh), &expected);
            // A reused evaluation that left a dirty stack behind.
            let mut used = Evaluation::new(&[0x30, 0x31, 0x93, 0x04], encoding);
            let _ = used.evaluate();
            let mut reused = Evaluation::new_in(&bytes, encoding, used.into_buffers());
            reused.set_trace(trace);
            prop_assert_eq!(&transcript(reused), &expected);
            let mut restarted = Evaluation::new(&[0x30, 0x31, 0x93, 0x04], encoding);
            let _ = restarted.evaluate();
            restarted.restart(&bytes, encoding);
            restarted.set_trace(trace);
            prop_assert_eq!(&transcript(restarted), &expected);
            // Restarted while a request was outstanding (DW_OP_breg0 0).
            let mut asking = Evaluation::new(&[0x70, 0x00], encoding);
            let _ = asking.evaluate();
            asking.restart(&bytes, encoding);
            asking.set_trace(trace);
            prop_assert_eq!(&transcript(asking), &expected);
            // Restarted after a composite of two parts (whose vector the next
            // composite reuses) and an entry value.
            let mut composite =
                Evaluation::new(&[0x50, 0x93, 0x04, 0x51, 0x93, 0x04], encoding);
            let _ = composite.evaluate();
            composite.restart(&[0xa3, 0x01, 0x55, 0x9f], encoding);
            let _ = composite.evaluate();
            composite.restart(&bytes, encoding);
            composite.set_trace(trace);
            prop_assert_eq!(&transcript(composite), &expected);
            let buffers = Evaluation::new(&[0x30, 0x31], encoding).into_buffers();
            let mut rebuilt = Evaluation::new_in(&bytes, encoding, buffers);
            rebuilt.set_trace(trace);
            prop_assert_eq!(&transcript(rebuilt), &expected);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40), legacy in any::<bool>()) {
        let encoding = Encoding {
            extension: if legacy { ExtensionEncoding::Legacy } else { ExtensionEncoding::User },
            ..Encoding::default()
        };
        match decode(&bytes, encoding) {
            Ok(decoded) => {
                let mut offsets: Vec<usize> = decoded.iter().map(|(at, _)| *at).collect();
                offsets.push(bytes.len());
                let ops: Vec<Op> = decoded.into_iter().map(|(_, op)| op).collect();
                check(&ops, encoding);
                let reference = Evaluation::new(Expression::with_offsets(&ops, &offsets).unwrap(), encoding);
                prop_assert_eq!(
                    transcript(Evaluation::new(&bytes, encoding)),
                    transcript(reference)
                );
            }
            Err(e) => {
                // From bytes, an ill-formed operation is only found when reached.
                let _ = transcript(Evaluation::new(&bytes, encoding));
                prop_assert!(e.is_ill_formed());
                if let Some(offset) = e.offset() {
                    prop_assert!(offset < bytes.len());
                }
            }
        }
    }
}
