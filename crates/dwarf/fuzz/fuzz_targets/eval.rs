//! Fuzzes the DWARF expression layer: decode, encode, text, evaluate, access.

#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_dwarf::access::{read, write, Target};
use locus_dwarf::ErrorDetail;
use locus_dwarf::{
    decode, decode_into, encode, parse_text, to_text, Encoding, Entry, Error, Evaluation,
    EvaluationResult, Expression, ExtensionEncoding, Location, Value,
};

/// Every register is 16 bytes of its number; memory below 0x10000 reads as
/// the low address byte; writes succeed inside the same ranges.
struct Fake;

impl Target for Fake {
    fn read_memory(&mut self, _space: u64, address: u64, buf: &mut [u8]) -> bool {
        if address.saturating_add(buf.len() as u64) > 0x10000 {
            return false;
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (address as usize + i) as u8;
        }
        true
    }
    fn read_register(&mut self, register: u16, offset: u64, buf: &mut [u8]) -> bool {
        if offset.saturating_add(buf.len() as u64) > 16 {
            return false;
        }
        buf.fill(register as u8);
        true
    }
    fn write_memory(&mut self, _space: u64, address: u64, bytes: &[u8]) -> bool {
        address.saturating_add(bytes.len() as u64) <= 0x10000
    }
    fn write_register(&mut self, _register: u16, offset: u64, bytes: &[u8]) -> bool {
        offset.saturating_add(bytes.len() as u64) <= 16
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let encoding = Encoding {
        address_size: if mode & 1 == 0 { 8 } else { 4 },
        offset_size: if mode & 2 == 0 { 4 } else { 8 },
        extension: if mode & 4 == 0 {
            ExtensionEncoding::User
        } else {
            ExtensionEncoding::Legacy
        },
    };
    let decoded = match decode(bytes, encoding) {
        Ok(d) => d,
        Err(e) => {
            if let Some(offset) = e.offset() {
                assert!(offset < bytes.len(), "{e} outside {} bytes", bytes.len());
            }
            assert!(e.is_ill_formed());
            return;
        }
    };
    let mut offsets: Vec<usize> = decoded.iter().map(|(o, _)| *o).collect();
    offsets.push(bytes.len());
    let ops: Vec<_> = decoded.into_iter().map(|(_, op)| op).collect();
    // Bytes -> ops -> bytes -> ops. Minimal LEB128s can move branch targets
    // of an input with padded LEB128s; nothing else may differ.
    let again = encode(&ops, encoding).expect("decoded ops encode");
    match decode(&again, encoding).map_err(Error::into_detail) {
        Ok(d) => assert_eq!(ops, d.into_iter().map(|(_, op)| op).collect::<Vec<_>>()),
        Err(ErrorDetail::BadBranchTarget { .. }) => assert!(again.len() < bytes.len()),
        Err(e) => panic!("re-encoded bytes do not decode: {e}"),
    }
    // Ops -> text -> ops.
    let text = to_text(&ops);
    assert_eq!(
        parse_text(&text, |_| None).expect("printed text parses"),
        ops
    );

    // decode_into gives the same operations and offsets.
    let (mut ops2, mut offsets2) = (Vec::new(), Vec::new());
    decode_into(bytes, encoding, &mut ops2, &mut offsets2).expect("decodes like decode");
    assert_eq!((&ops2, &offsets2), (&ops, &offsets));
    let expression = Expression::with_offsets(&ops2, &offsets2).expect("decode's offsets");
    let mut eval = Evaluation::new(expression, encoding);
    eval.set_max_steps(2_000);
    let mut r = eval.evaluate();
    for _ in 0..2_000 {
        r = match r {
            Ok(EvaluationResult::Complete) => break,
            Err(e) if matches!(e.detail(), ErrorDetail::Eval { .. }) => {
                let ErrorDetail::Eval { index, .. } = e.detail() else {
                    unreachable!()
                };
                assert!(*index <= ops.len());
                return;
            }
            Err(e) => panic!("unexpected error kind {e:?}"),
            Ok(EvaluationResult::RequiresRegister { register }) => {
                eval.resume_with_register(&[register as u8; 16])
            }
            Ok(EvaluationResult::RequiresMemory { size, address, .. }) => {
                let mut buf = vec![0; usize::from(size)];
                if Fake.read_memory(0, address, &mut buf) {
                    eval.resume_with_memory(&buf)
                } else {
                    return;
                }
            }
            Ok(EvaluationResult::RequiresLane) => eval.resume_with_lane(3),
            Ok(EvaluationResult::RequiresIteration) => eval.resume_with_iteration(1),
            Ok(EvaluationResult::RequiresFrameBase) => eval.resume_with_frame_base(0x100),
            Ok(EvaluationResult::RequiresCallFrameCfa) => eval.resume_with_call_frame_cfa(0x200),
            Ok(EvaluationResult::RequiresObjectAddress) => eval.resume_with_object_address(0x300),
            Ok(EvaluationResult::RequiresBaseType { offset }) => {
                eval.resume_with_base_type((offset % 9) as u8, offset % 9)
            }
            Ok(
                EvaluationResult::RequiresEntryValue { .. }
                | EvaluationResult::RequiresParameterRef { .. }
                | EvaluationResult::RequiresVariableValue { .. },
            ) => eval.resume_with_entry_value(Entry::Value(Value::generic(5, 8))),
            Ok(EvaluationResult::RequiresCallee { offset, .. }) => {
                // The callee is the expression itself from byte `offset`,
                // which may recurse or be ill-formed.
                let start = (offset as usize).min(bytes.len());
                eval.resume_with_callee(&bytes[start..])
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
            // A request added later: the fuzzer should answer it.
            Ok(other) => panic!("unanswered request {other:?}"),
        };
    }
    if let Some(loc) = eval.location_result() {
        assert!(loc.weight() <= 2 * locus_dwarf::eval::MAX_LOCATION_WEIGHT);
        if let Ok(bits) = read(&loc, 96, &mut Fake) {
            assert_eq!(bits.bit_len(), 96);
            let _ = write(&loc, bits.bytes(), 96, &mut Fake);
        }
    }
    let _ = eval.stack();
});
