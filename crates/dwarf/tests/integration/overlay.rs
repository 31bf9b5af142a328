//! `DW_OP_LLVM_overlay` and `DW_OP_LLVM_bit_overlay` as LLVM's
//! AMDGPUDwarfExtensionsForHeterogeneousDebugging.rst defines them
//! ("Composite Location Description Operations", and the partially
//! registerized array example of "Support for Runtime Overlay Composites"),
//! and `DW_OP_LLVM_nop` (LLVM 19's `DW_OP_LLVM_user` sub-opcode 0x01).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::access::{read, write};
use locus_dwarf::ErrorDetail;
use locus_dwarf::{
    decode, encode, parse_text, to_text, Encoding, Entry, Error, ErrorKind, ExtensionEncoding,
    Location, Op, Part, Storage,
};

use crate::eval_support;

use eval_support::{run_text, Ctx};

const USER: Encoding = Encoding {
    address_size: 8,
    offset_size: 4,
    extension: ExtensionEncoding::User,
};
const LEGACY: Encoding = Encoding {
    extension: ExtensionEncoding::Legacy,
    ..USER
};

fn location(text: &str, ctx: &mut Ctx) -> Location {
    match run_text(text, ctx).unwrap() {
        Entry::Location(l) => l,
        Entry::Value(v) => panic!("expected a location, got {v:?}"),
    }
}

fn eval_error(text: &str) -> ErrorKind {
    match run_text(text, &mut Ctx::default()).map_err(locus_dwarf::Error::into_detail) {
        Err(ErrorDetail::Eval { kind, .. }) => kind,
        other => panic!("expected an evaluation error, got {other:?}"),
    }
}

fn part(location: Location, bit_size: u64) -> Part {
    Part { location, bit_size }
}

fn reg(r: u16, bit_offset: u128) -> Location {
    Location::single(Storage::Register(r), bit_offset)
}

fn mem(address: u64) -> Location {
    Location::memory(0, address)
}

/// R0 = base address of dst (0x1000), R1 = i (2), R2 = the registerized
/// dst[i]; memory holds dst[0..4] = 10, 11, 12, 13 (u32).
fn array_target() -> Ctx {
    let mut c = Ctx::default();
    c.registers.insert(0, 0x1000u64.to_le_bytes().to_vec());
    c.registers.insert(1, 2u64.to_le_bytes().to_vec());
    c.registers.insert(2, 0x77u64.to_le_bytes().to_vec());
    let dst: Vec<u8> = (10..14u32).flat_map(u32::to_le_bytes).collect();
    c.memory.push((0, 0x1000, dst));
    c
}

/// The normative text's example: dst in memory at R0, with dst[i] in R2.
const DST: &str = "DW_OP_breg0 0
    DW_OP_reg2
    DW_OP_breg1 0 DW_OP_lit4 DW_OP_mul
    DW_OP_lit4
    DW_OP_LLVM_overlay";

/// The rest of the default address space after `end` bits from 0x1000,
/// capped at 2^64 - 1 bits.
fn memory_tail(end: u64) -> u64 {
    u64::MAX - end
}

#[test]
fn partially_registerized_array() {
    let mut ctx = array_target();
    let l = location(DST, &mut ctx);
    assert_eq!(
        l,
        Location::composite(vec![
            part(mem(0x1000), 64),
            part(reg(2, 0), 32),
            part(mem(0x100c), memory_tail(96)),
        ])
    );
    // Reading dst[0..4]: memory, memory, R2's low 4 bytes, memory.
    let bits = read(&l, 16 * 8, &mut ctx).unwrap();
    assert_eq!(bits.to_hex(), "0a0000000b000000770000000d000000");
    // Writing dst[1..3] through it: dst[1] to memory, dst[2] to R2 only.
    let mut at4 = l.clone();
    at4.offset_bits(32, 8).unwrap();
    let data: Vec<u8> = [0x1111_1111u32, 0x2222_2222]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    write(&at4, &data, 64, &mut ctx).unwrap();
    assert_eq!(
        ctx.read(0, 0x1004, 4).unwrap(),
        0x1111_1111u32.to_le_bytes()
    );
    assert_eq!(ctx.read(0, 0x1008, 4).unwrap(), 12u32.to_le_bytes());
    assert_eq!(ctx.registers[&2][..4], 0x2222_2222u32.to_le_bytes());
    assert_eq!(ctx.registers[&2][4..], [0; 4]);
}

#[test]
fn the_overlay_at_the_start_has_no_leading_part() {
    let l = location(
        "DW_OP_addr 0x1000 DW_OP_regx 5 DW_OP_lit0 DW_OP_lit8 DW_OP_LLVM_overlay",
        &mut Ctx::default(),
    );
    assert_eq!(
        l,
        Location::composite(vec![
            part(reg(5, 0), 64),
            part(mem(0x1008), memory_tail(64)),
        ])
    );
}

#[test]
fn implicit_base_sizes_are_checked_and_the_last_part_is_the_rest() {
    // An 8-byte implicit base with a register over bytes 2..4.
    let l = location(
        "DW_OP_implicit_value [0001020304050607] DW_OP_reg3 DW_OP_lit2 DW_OP_lit2 DW_OP_overlay",
        &mut Ctx::default(),
    );
    let imp = |off: u128| {
        Location::single(
            Storage::Implicit([0u8, 1, 2, 3, 4, 5, 6, 7].as_slice().into()),
            off,
        )
    };
    assert_eq!(
        l,
        Location::composite(vec![
            part(imp(0), 16),
            part(reg(3, 0), 16),
            part(imp(32), 32)
        ])
    );
    let mut ctx = Ctx::default();
    ctx.registers.insert(3, vec![0xaa, 0xbb, 0xcc]);
    assert_eq!(read(&l, 64, &mut ctx).unwrap().to_hex(), "0001aabb04050607");
    // Ending exactly at the end: no trailing part.
    let l = location(
        "DW_OP_implicit_value [00010203] DW_OP_reg3 DW_OP_lit2 DW_OP_lit2 DW_OP_overlay",
        &mut Ctx::default(),
    );
    assert_eq!(l.places.len(), 1);
    match &l.places[0].storage {
        Storage::Composite(parts) => assert_eq!(parts.len(), 2),
        s => panic!("expected a composite, got {s:?}"),
    }
}

#[test]
fn bit_overlay_positions_bits() {
    // Bits 3..8 of a 2-byte implicit base come from register 4.
    let text = "DW_OP_implicit_value [ffff] DW_OP_reg4 DW_OP_lit3 DW_OP_lit5 DW_OP_bit_overlay";
    let l = location(text, &mut Ctx::default());
    let imp =
        |off: u128| Location::single(Storage::Implicit([0xffu8, 0xff].as_slice().into()), off);
    assert_eq!(
        l,
        Location::composite(vec![part(imp(0), 3), part(reg(4, 0), 5), part(imp(8), 8)])
    );
    let mut ctx = Ctx::default();
    ctx.registers.insert(4, vec![0b0000_0000]);
    // Low 3 bits from the base (1), then 5 zero bits, then 0xff.
    assert_eq!(read(&l, 16, &mut ctx).unwrap().to_hex(), "07ff");
    // The same through DW_OP_overlay's byte units is a different overlay.
    let bytes = location(
        "DW_OP_implicit_value [ffff] DW_OP_reg4 DW_OP_lit0 DW_OP_lit1 DW_OP_overlay",
        &mut Ctx::default(),
    );
    assert_eq!(
        bytes,
        Location::composite(vec![part(reg(4, 0), 8), part(imp(8), 8)])
    );
}

#[test]
fn zero_size_pushes_the_base_and_a_full_cover_pushes_the_overlay() {
    let base = "DW_OP_implicit_value [01020304]";
    let l = location(
        &format!("{base} DW_OP_reg1 DW_OP_lit2 DW_OP_lit0 DW_OP_overlay"),
        &mut Ctx::default(),
    );
    assert_eq!(
        l,
        Location::single(Storage::Implicit([1u8, 2, 3, 4].as_slice().into()), 0)
    );
    let l = location(
        &format!("{base} DW_OP_reg1 DW_OP_lit0 DW_OP_lit4 DW_OP_overlay"),
        &mut Ctx::default(),
    );
    assert_eq!(l, reg(1, 0));
    // rbss counts from the base's offset.
    let l = location(
        &format!("{base} DW_OP_lit1 DW_OP_offset DW_OP_reg1 DW_OP_lit0 DW_OP_lit3 DW_OP_overlay"),
        &mut Ctx::default(),
    );
    assert_eq!(l, reg(1, 0));
}

#[test]
fn every_place_of_a_multi_place_base_is_kept() {
    // A base in two places (a composite whose part is in two places is what
    // the evaluator can build): rbss is the smaller of the two.
    let mut ctx = Ctx::default();
    ctx.registers.insert(6, vec![0; 8]);
    ctx.memory.push((0, 0x2000, vec![0x55; 8]));
    let base = Location {
        places: vec![
            Location::single(Storage::Implicit([9u8; 4].as_slice().into()), 0).places[0].clone(),
            Location::single(Storage::Implicit([8u8; 6].as_slice().into()), 0).places[0].clone(),
        ]
        .into(),
    };
    let ops = parse_text("DW_OP_reg6 DW_OP_lit1 DW_OP_lit1 DW_OP_overlay", |_| None).unwrap();
    let mut eval = locus_dwarf::Evaluation::new(&ops, USER);
    eval.push(Entry::Location(base.clone()));
    assert_eq!(
        eval.evaluate().unwrap(),
        locus_dwarf::EvaluationResult::Complete
    );
    let mut tail = base.clone();
    tail.offset_bits(16, 8).unwrap();
    assert_eq!(
        eval.location_result().unwrap(),
        Location::composite(vec![part(base, 8), part(reg(6, 0), 8), part(tail, 16)])
    );
    // Past the shorter place's end is ill-formed even though the longer has room.
    let ops = parse_text("DW_OP_reg6 DW_OP_lit1 DW_OP_lit4 DW_OP_overlay", |_| None).unwrap();
    let mut eval = locus_dwarf::Evaluation::new(&ops, USER);
    eval.push(Entry::Location(Location {
        places: vec![
            Location::single(Storage::Implicit([9u8; 4].as_slice().into()), 0).places[0].clone(),
            Location::single(Storage::Implicit([8u8; 6].as_slice().into()), 0).places[0].clone(),
        ]
        .into(),
    }));
    let err = eval.evaluate().unwrap_err();
    assert!(
        matches!(
            err.clone().into_detail(),
            ErrorDetail::Eval {
                kind: ErrorKind::BadOverlay(_),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn ill_formed_overlays() {
    // Past the end of the base (rbss(BL) < BO + BS).
    for text in [
        "DW_OP_implicit_value [01020304] DW_OP_reg1 DW_OP_lit2 DW_OP_lit3 DW_OP_overlay",
        "DW_OP_implicit_value [01] DW_OP_reg1 DW_OP_lit0 DW_OP_lit9 DW_OP_bit_overlay",
        "DW_OP_implicit_value [01020304] DW_OP_lit1 DW_OP_offset DW_OP_reg1 DW_OP_lit0 DW_OP_lit4 DW_OP_overlay",
        // A composite base: its size is the sum of its parts.
        "DW_OP_reg0 DW_OP_piece 2 DW_OP_reg1 DW_OP_piece 2 DW_OP_piece_end DW_OP_reg5 DW_OP_lit3 DW_OP_lit2 DW_OP_overlay",
        // Beyond the end of the 64-bit address space.
        "DW_OP_const8u 0xfffffffffffffffe DW_OP_reg1 DW_OP_lit0 DW_OP_lit4 DW_OP_overlay",
    ] {
        let e = eval_error(text);
        assert!(matches!(e, ErrorKind::BadOverlay(_)), "{text}: {e:?}");
        assert!(Error::from(ErrorDetail::Eval {
            index: 0,
            op: "",
            kind: e
        })
        .is_ill_formed());
    }
    // Negative size or offset.
    for text in [
        "DW_OP_addr 0x10 DW_OP_reg1 DW_OP_lit0 DW_OP_consts -1 DW_OP_overlay",
        "DW_OP_addr 0x10 DW_OP_reg1 DW_OP_consts -8 DW_OP_lit1 DW_OP_bit_overlay",
    ] {
        assert!(
            matches!(eval_error(text), ErrorKind::BadOverlay(_)),
            "{text}"
        );
    }
    // Wrong stack entries: too few, a non-integral size, an incomplete
    // composite where a location is needed, a non-generic value as a location.
    assert_eq!(
        eval_error("DW_OP_reg1 DW_OP_lit0 DW_OP_lit4 DW_OP_overlay"),
        ErrorKind::StackUnderflow
    );
    assert!(matches!(
        eval_error("DW_OP_addr 0x10 DW_OP_reg1 DW_OP_lit0 DW_OP_reg2 DW_OP_overlay"),
        ErrorKind::TypeMismatch(_)
    ));
    // (ill-formed by the normative text's composite rules)
    assert!(matches!(
        eval_error("DW_OP_reg0 DW_OP_piece 4 DW_OP_reg1 DW_OP_lit0 DW_OP_lit4 DW_OP_overlay"),
        ErrorKind::IllFormed(_)
    ));
}

#[test]
fn overlay_of_generic_values_uses_memory_locations() {
    // Generic values convert to default-address-space memory locations.
    let l = location(
        "DW_OP_lit16 DW_OP_lit0 DW_OP_lit4 DW_OP_lit4 DW_OP_overlay",
        &mut Ctx::default(),
    );
    assert_eq!(
        l,
        Location::composite(vec![
            part(mem(16), 32),
            part(mem(0), 32),
            part(mem(24), memory_tail(64)),
        ])
    );
}

#[test]
fn text_round_trips_and_has_no_encoding() {
    for (text, op) in [
        ("DW_OP_LLVM_overlay", Op::Overlay),
        ("DW_OP_overlay", Op::Overlay),
        ("DW_OP_LLVM_user DW_OP_LLVM_bit_overlay", Op::BitOverlay),
        ("DW_OP_bit_overlay", Op::BitOverlay),
        ("DW_OP_LLVM_nop", Op::LlvmNop),
        ("DW_OP_nop", Op::Nop),
    ] {
        let ops = parse_text(text, |_| None).unwrap();
        assert_eq!(ops, [op], "{text}");
        assert_eq!(parse_text(&to_text(&ops), |_| None).unwrap(), ops);
    }
    // LLVM 19's DW_OP_LLVM_user table has no sub-opcode for the overlays,
    // and there is no direct opcode for them.
    for op in [Op::Overlay, Op::BitOverlay] {
        assert!(matches!(
            encode(std::slice::from_ref(&op), USER).map_err(locus_dwarf::Error::into_detail),
            Err(ErrorDetail::Unencodable { .. })
        ));
        assert!(matches!(
            encode(&[op], LEGACY).map_err(locus_dwarf::Error::into_detail),
            Err(ErrorDetail::Unencodable { .. })
        ));
    }
}

#[test]
fn llvm_nop_decodes() {
    let ops: Vec<_> = decode(&[0xe9, 0x01, 0x30, 0xe9, 0x01], USER)
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(ops, [(0, Op::LlvmNop), (2, Op::Lit(0)), (3, Op::LlvmNop)]);
    assert_eq!(
        encode(&[Op::LlvmNop, Op::Lit(0)], USER).unwrap(),
        [0xe9, 0x01, 0x30]
    );
    // The legacy encoding has no LLVM_nop: DW_OP_nop means the same.
    assert_eq!(encode(&[Op::LlvmNop], LEGACY).unwrap(), [0x96]);
    assert!(Op::LlvmNop.is_extension());
    assert_eq!(Op::LlvmNop.name(), "DW_OP_LLVM_nop");
    // It evaluates to nothing, from bytes as from ops.
    let bytes = [0xe9, 0x01, 0x35, 0xe9, 0x01, 0x9f];
    let mut eval = locus_dwarf::Evaluation::new(&bytes, USER);
    assert_eq!(
        eval.evaluate().unwrap(),
        locus_dwarf::EvaluationResult::Complete
    );
    assert_eq!(
        eval.location_result().unwrap(),
        Location::single(
            Storage::Implicit([5u8, 0, 0, 0, 0, 0, 0, 0].as_slice().into()),
            0
        )
    );
}

/// A target with one 8-byte register (R3) that tells its size.
struct SizedRegister;

impl locus_dwarf::Target for SizedRegister {
    fn read_memory(&mut self, _: u64, _: u64, _: &mut [u8]) -> bool {
        false
    }
    fn read_register(&mut self, _: u16, _: u64, _: &mut [u8]) -> bool {
        false
    }
    fn register_sizes(&mut self, each: &mut dyn FnMut(u16, u64)) {
        each(3, 8);
    }
}

#[test]
fn overlay_on_a_register_base_uses_its_size() {
    // Memory over bytes 2..6 of R3 (8 bytes): R3's first 2 bytes, the
    // memory, R3's last 2 bytes.
    let text = "DW_OP_reg3 DW_OP_addr 0x100 DW_OP_lit2 DW_OP_lit4 DW_OP_overlay";
    let expected = Location::composite(vec![
        part(reg(3, 0), 16),
        part(mem(0x100), 32),
        part(reg(3, 48), 16),
    ]);
    // The size from the target ...
    let ops = parse_text(text, |_| None).unwrap();
    let mut eval = locus_dwarf::Evaluation::new(&ops, USER);
    eval.evaluate_with(&mut SizedRegister).unwrap();
    assert_eq!(eval.location_result().unwrap(), expected);
    // ... or from the caller.
    let mut eval = locus_dwarf::Evaluation::new(&ops, USER);
    eval.set_register_size(3, 8);
    eval.evaluate().unwrap();
    assert_eq!(eval.location_result().unwrap(), expected);
    // Exactly to the register's end: no tail; the whole register: the overlay.
    let ops = parse_text(
        "DW_OP_reg3 DW_OP_addr 0x100 DW_OP_lit4 DW_OP_lit4 DW_OP_overlay",
        |_| None,
    )
    .unwrap();
    let mut eval = locus_dwarf::Evaluation::new(&ops, USER);
    eval.evaluate_with(&mut SizedRegister).unwrap();
    assert_eq!(
        eval.location_result().unwrap(),
        Location::composite(vec![part(reg(3, 0), 32), part(mem(0x100), 32)])
    );
    let ops = parse_text(
        "DW_OP_reg3 DW_OP_addr 0x100 DW_OP_lit0 DW_OP_lit8 DW_OP_overlay",
        |_| None,
    )
    .unwrap();
    let mut eval = locus_dwarf::Evaluation::new(&ops, USER);
    eval.evaluate_with(&mut SizedRegister).unwrap();
    assert_eq!(eval.location_result().unwrap(), mem(0x100));
    // Past its end (bit 61 + 4 bits > 64): ill-formed.
    let ops = parse_text(
        "DW_OP_reg3 DW_OP_addr 0x100 DW_OP_constu 61 DW_OP_lit4 DW_OP_bit_overlay",
        |_| None,
    )
    .unwrap();
    let mut eval = locus_dwarf::Evaluation::new(&ops, USER);
    match eval
        .evaluate_with(&mut SizedRegister)
        .map_err(locus_dwarf::Error::into_detail)
    {
        Err(ErrorDetail::Eval {
            index: 4,
            kind: ErrorKind::BadOverlay(what),
            ..
        }) => assert!(what.contains("past the end"), "{what}"),
        other => panic!("expected an ill-formed overlay, got {other:?}"),
    }
}

#[test]
fn overlay_on_a_register_base_of_unknown_size_is_refused() {
    // Ctx tells no register sizes: the overlay's end cannot be checked nor
    // the tail sized, whether the register is the base or a place of it.
    for text in [
        "DW_OP_reg3 DW_OP_addr 0x100 DW_OP_lit2 DW_OP_lit4 DW_OP_overlay",
        "DW_OP_reg3 DW_OP_addr 0x100 DW_OP_lit0 DW_OP_lit0 DW_OP_overlay",
        "DW_OP_regx 70 DW_OP_lit1 DW_OP_offset DW_OP_addr 0x100 DW_OP_lit2 DW_OP_lit4 DW_OP_bit_overlay",
    ] {
        match eval_error(text) {
            ErrorKind::BadOverlay(what) => {
                assert!(what.contains("register whose size is not known"), "{text}: {what}")
            }
            other => panic!("{text}: expected an ill-formed overlay, got {other:?}"),
        }
    }
    // A register as the overlay (not the base) needs no size.
    let l = location(
        "DW_OP_addr 0x100 DW_OP_reg3 DW_OP_lit0 DW_OP_lit4 DW_OP_overlay",
        &mut Ctx::default(),
    );
    assert_eq!(
        l,
        Location::composite(vec![part(reg(3, 0), 32), part(mem(0x104), memory_tail(32))])
    );
}
