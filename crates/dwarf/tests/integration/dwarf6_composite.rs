//! The DWARF 6 draft's `DW_OP_composite` ("Locations on the Stack", DWARF
//! issue 230524.1, section 3.12 "Composite Locations"): it pushes a new,
//! empty composite; each piece operation pops a piece location `LP` and the
//! composite `LC` below it and pushes `LC` extended; the composite is a
//! location at every step. LLVM 19's pieces build an *incomplete* composite
//! that `DW_OP_LLVM_piece_end` closes, and that no other operation may touch
//! before. The two agree where both can be written, and differ where the
//! draft uses its composite before the end.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::access::read;
use locus_dwarf::ErrorDetail;
use locus_dwarf::{
    encode, parse_text, to_text, Encoding, Entry, ErrorKind, Location, Op, Part, Storage,
};

use crate::eval_support;

use eval_support::{run_text, Ctx};

fn location(text: &str, ctx: &mut Ctx) -> Location {
    match run_text(text, ctx).unwrap() {
        Entry::Location(l) => l,
        Entry::Value(v) => panic!("expected a location, got {v:?}"),
    }
}

fn reg(r: u16) -> Location {
    Location::single(Storage::Register(r), 0)
}

fn part(location: Location, bit_size: u64) -> Part {
    Part { location, bit_size }
}

/// r3 = 0x44434241 (low bytes), r10 = 0x..6261.
fn registers() -> Ctx {
    let mut c = Ctx::default();
    c.registers
        .insert(3, 0x1111_1111_4443_4241u64.to_le_bytes().to_vec());
    c.registers
        .insert(10, 0x2222_2222_2222_6261u64.to_le_bytes().to_vec());
    c
}

/// The draft's D.1.3 example, "a variable whose first four bytes reside in
/// register 3 and whose next two bytes reside in register 10", written with
/// DW_OP_composite first, is LLVM's pieces closed by piece_end, and reads the
/// same six bytes.
#[test]
fn draft_example_equals_llvm_pieces_then_piece_end() {
    let mut ctx = registers();
    let draft = location(
        "DW_OP_composite DW_OP_reg3 DW_OP_piece 4 DW_OP_reg10 DW_OP_piece 2",
        &mut ctx,
    );
    let llvm = location(
        "DW_OP_reg3 DW_OP_piece 4 DW_OP_reg10 DW_OP_piece 2 DW_OP_LLVM_piece_end",
        &mut ctx,
    );
    let expected = Location::composite(vec![part(reg(3), 32), part(reg(10), 16)]);
    assert_eq!(draft, expected);
    assert_eq!(llvm, expected);
    assert_eq!(read(&draft, 48, &mut ctx).unwrap().to_hex(), "414243446162");
}

/// The draft's composite is a location as soon as it is pushed: an offset
/// applies to it mid-expression. LLVM's incomplete composite may not be
/// offset before piece_end (an ill-formed expression in the normative text).
#[test]
fn draft_composite_is_a_location_before_the_end() {
    let mut ctx = registers();
    let l = location(
        "DW_OP_composite DW_OP_reg3 DW_OP_piece 4 DW_OP_reg10 DW_OP_piece 2 DW_OP_lit3 DW_OP_offset",
        &mut ctx,
    );
    assert_eq!(read(&l, 24, &mut ctx).unwrap().to_hex(), "446162");
    match run_text(
        "DW_OP_reg3 DW_OP_piece 4 DW_OP_reg10 DW_OP_piece 2 DW_OP_lit3 DW_OP_offset",
        &mut ctx,
    )
    .map_err(locus_dwarf::Error::into_detail)
    {
        Err(ErrorDetail::Eval {
            kind: ErrorKind::IllFormed(_),
            ..
        }) => {}
        other => panic!("expected ill-formed, got {other:?}"),
    }
    // A stack operation may copy it (it is a complete location); LLVM's
    // incomplete composite may not be copied.
    let dup = location(
        "DW_OP_composite DW_OP_reg3 DW_OP_piece 4 DW_OP_dup DW_OP_drop",
        &mut ctx,
    );
    assert_eq!(dup, Location::composite(vec![part(reg(3), 32)]));
    assert!(run_text("DW_OP_reg3 DW_OP_piece 4 DW_OP_dup", &mut ctx).is_err());
}

/// "When a new composite is to be started (rather than add to a previous
/// composite location on the stack)": the second DW_OP_composite begins a
/// composite of its own, which a piece then nests in the first.
#[test]
fn a_second_composite_starts_a_new_one_and_nests() {
    let mut ctx = registers();
    let l = location(
        "DW_OP_composite DW_OP_reg3 DW_OP_piece 4 \
         DW_OP_composite DW_OP_reg10 DW_OP_piece 2 DW_OP_piece 2",
        &mut ctx,
    );
    let inner = Location::composite(vec![part(reg(10), 16)]);
    assert_eq!(
        l,
        Location::composite(vec![part(reg(3), 32), part(inner, 16)])
    );
    assert_eq!(read(&l, 48, &mut ctx).unwrap().to_hex(), "414243446162");
    // Without the piece that nests it, the result is the newer composite.
    let top = location(
        "DW_OP_composite DW_OP_reg3 DW_OP_piece 4 DW_OP_composite DW_OP_reg10 DW_OP_piece 2",
        &mut ctx,
    );
    assert_eq!(top, Location::composite(vec![part(reg(10), 16)]));
}

/// The draft's compatibility rules: a piece on a composite that is alone on
/// the stack adds an undefined piece; an empty DW_OP_composite is an empty
/// composite; LLVM's piece_end closes a draft composite too.
#[test]
fn empty_pieces_empty_composite_and_piece_end() {
    let mut ctx = registers();
    assert_eq!(
        location("DW_OP_composite DW_OP_piece 4", &mut ctx),
        Location::composite(vec![part(Location::undefined(), 32)])
    );
    assert_eq!(
        location("DW_OP_composite", &mut ctx),
        Location::composite(Vec::new())
    );
    assert_eq!(
        location(
            "DW_OP_composite DW_OP_reg3 DW_OP_piece 4 DW_OP_LLVM_piece_end",
            &mut ctx
        ),
        Location::composite(vec![part(reg(3), 32)])
    );
    // A value is not a composite's address.
    assert!(run_text("DW_OP_composite DW_OP_lit1 DW_OP_plus", &mut ctx).is_err());
}

/// Text only: parsed and printed by name, refused by the encoder (the
/// draft's opcode is "TBA"; LLVM 19 has none), never decoded.
#[test]
fn text_only_operation() {
    let ops = parse_text("DW_OP_composite, DW_OP_reg3, DW_OP_piece 4", |_| None).unwrap();
    assert_eq!(ops, [Op::Composite, Op::Reg(3), Op::Piece(4)]);
    assert_eq!(to_text(&ops), "DW_OP_composite\nDW_OP_reg3\nDW_OP_piece 4");
    match encode(&ops, Encoding::default()).map_err(locus_dwarf::Error::into_detail) {
        Err(ErrorDetail::Unencodable { index: 0, op, .. }) => assert_eq!(op, "DW_OP_composite"),
        other => panic!("expected Unencodable, got {other:?}"),
    }
}
