//! The text syntax reads what llvm-dwarfdump 19 and gdb 13 print: every case
//! below is a tool's output for the bytes next to it (llvm-dwarfdump-19
//! `--debug-frame`/`--debug-info` and gdb's `info scope` with `maint set dwarf
//! always-disassemble on`, on objects assembled with these expressions), and
//! must parse to the operations the bytes decode to.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::ErrorDetail;
use locus_dwarf::{decode, parse_text, parse_text_with, Encoding, Op, Syntax};

fn ops_of(hex: &str) -> Vec<Op> {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    decode(&bytes, Encoding::default())
        .unwrap()
        .into_iter()
        .map(|(_, op)| op)
        .collect()
}

/// llvm-dwarfdump-19's spelling (x86-64 register names), as printed.
const LLVM: &[(&str, &str)] = &[
    ("033412000000000000", r#"DW_OP_addr 0x1234"#),
    ("06", r#"DW_OP_deref"#),
    ("0805", r#"DW_OP_const1u 0x5"#),
    ("09fb", r#"DW_OP_const1s -5"#),
    ("0a0102", r#"DW_OP_const2u 0x201"#),
    ("0bfeff", r#"DW_OP_const2s -2"#),
    ("0c01000000", r#"DW_OP_const4u 0x1"#),
    ("0dffffffff", r#"DW_OP_const4s -1"#),
    ("0e0101010101010101", r#"DW_OP_const8u 0x101010101010101"#),
    ("0fffffffffffffffff", r#"DW_OP_const8s -1"#),
    ("10ac02", r#"DW_OP_constu 0x12c"#),
    ("11d47d", r#"DW_OP_consts -300"#),
    ("12", r#"DW_OP_dup"#),
    ("13", r#"DW_OP_drop"#),
    ("14", r#"DW_OP_over"#),
    ("1502", r#"DW_OP_pick 0x2"#),
    ("16", r#"DW_OP_swap"#),
    ("17", r#"DW_OP_rot"#),
    ("18", r#"DW_OP_xderef"#),
    ("19", r#"DW_OP_abs"#),
    ("1a", r#"DW_OP_and"#),
    ("1b", r#"DW_OP_div"#),
    ("1c", r#"DW_OP_minus"#),
    ("1d", r#"DW_OP_mod"#),
    ("1e", r#"DW_OP_mul"#),
    ("1f", r#"DW_OP_neg"#),
    ("20", r#"DW_OP_not"#),
    ("21", r#"DW_OP_or"#),
    ("22", r#"DW_OP_plus"#),
    ("2310", r#"DW_OP_plus_uconst 0x10"#),
    ("24", r#"DW_OP_shl"#),
    ("25", r#"DW_OP_shr"#),
    ("26", r#"DW_OP_shra"#),
    ("27", r#"DW_OP_xor"#),
    ("29", r#"DW_OP_eq"#),
    ("30", r#"DW_OP_lit0"#),
    ("4f", r#"DW_OP_lit31"#),
    ("50", r#"DW_OP_reg0 RAX"#),
    ("57", r#"DW_OP_reg7 RSP"#),
    ("6f", r#"DW_OP_reg31 XMM14"#),
    ("7008", r#"DW_OP_breg0 RAX+8"#),
    ("7778", r#"DW_OP_breg7 RSP-8"#),
    ("9011", r#"DW_OP_regx XMM0"#),
    ("916c", r#"DW_OP_fbreg -20"#),
    ("920710", r#"DW_OP_bregx RSP+16"#),
    ("9304", r#"DW_OP_piece 0x4"#),
    ("9404", r#"DW_OP_deref_size 0x4"#),
    ("9502", r#"DW_OP_xderef_size 0x2"#),
    ("96", r#"DW_OP_nop"#),
    ("97", r#"DW_OP_push_object_address"#),
    ("983412", r#"DW_OP_call2 0x1234"#),
    ("9901000000", r#"DW_OP_call4 0x1"#),
    ("9a10000000", r#"<decoding error> 9a 10 00 00 00"#),
    ("9b", r#"DW_OP_form_tls_address"#),
    ("9c", r#"DW_OP_call_frame_cfa"#),
    ("9d2008", r#"DW_OP_bit_piece 0x20 0x8"#),
    (
        "9e0401020304",
        r#"DW_OP_implicit_value 0x4 0x01 0x02 0x03 0x04"#,
    ),
    ("9f", r#"DW_OP_stack_value"#),
    ("a0400000007c", r#"<decoding error> a0 40 00 00 00 7c"#),
    ("a102", r#"DW_OP_addrx 0x2"#),
    ("a203", r#"DW_OP_constx 0x3"#),
    (
        "a301559f",
        r#"DW_OP_entry_value(DW_OP_reg5 RDI), DW_OP_stack_value"#,
    ),
    (
        "a303750006",
        r#"DW_OP_entry_value(DW_OP_breg5 RDI+0, DW_OP_deref"#,
    ),
    ("a42a0401000000", r#"<decoding error> a4 2a 04 01 00 00 00"#),
    ("a5052a", r#"DW_OP_regval_type RDI <base_type ref: 0x2a>"#),
    ("a6042a", r#"<decoding error> a6 04 2a"#),
    ("a82a", r#"DW_OP_convert 0x2a"#),
    ("a800", r#"DW_OP_convert 0x0"#),
    ("a92a", r#"<decoding error> a9 2a"#),
    ("e0", r#"DW_OP_GNU_push_tls_address"#),
    ("f30155", r#"DW_OP_GNU_entry_value(DW_OP_reg5 RDI)"#),
    ("f3029011", r#"DW_OP_GNU_entry_value(DW_OP_regx XMM0)"#),
    ("e901", r#"DW_OP_LLVM_user DW_OP_LLVM_nop"#),
    ("e902", r#"<decoding error> e9 02"#),
    ("e903", r#"<decoding error> e9 03"#),
    ("e904", r#"<decoding error> e9 04"#),
    ("e90514", r#"<decoding error> e9 05 14"#),
    (
        "030000000000000000e902",
        r#"DW_OP_addr 0x0, <decoding error> e9 02"#,
    ),
    (
        "a3027008069f",
        r#"DW_OP_entry_value(DW_OP_breg0 RAX+8), DW_OP_deref, DW_OP_stack_value"#,
    ),
    (
        "12a30155229f",
        r#"DW_OP_dup, DW_OP_entry_value(DW_OP_reg5 RDI), DW_OP_plus, DW_OP_stack_value"#,
    ),
    (
        "0334120000000000009f",
        r#"DW_OP_addr 0x1234, DW_OP_stack_value"#,
    ),
    ("08059f", r#"DW_OP_const1u 0x5, DW_OP_stack_value"#),
    ("09fb9f", r#"DW_OP_const1s -5, DW_OP_stack_value"#),
    ("0a01029f", r#"DW_OP_const2u 0x201, DW_OP_stack_value"#),
    ("0bfeff9f", r#"DW_OP_const2s -2, DW_OP_stack_value"#),
    ("0c010000009f", r#"DW_OP_const4u 0x1, DW_OP_stack_value"#),
    ("0dffffffff9f", r#"DW_OP_const4s -1, DW_OP_stack_value"#),
    (
        "0e01010101010101019f",
        r#"DW_OP_const8u 0x101010101010101, DW_OP_stack_value"#,
    ),
    (
        "0fffffffffffffffff9f",
        r#"DW_OP_const8s -1, DW_OP_stack_value"#,
    ),
    ("10ac029f", r#"DW_OP_constu 0x12c, DW_OP_stack_value"#),
    ("11d47d9f", r#"DW_OP_consts -300, DW_OP_stack_value"#),
    (
        "303015019f",
        r#"DW_OP_lit0, DW_OP_lit0, DW_OP_pick 0x1, DW_OP_stack_value"#,
    ),
    (
        "3023109f",
        r#"DW_OP_lit0, DW_OP_plus_uconst 0x10, DW_OP_stack_value"#,
    ),
    (
        "302f01003028fcff9f",
        r#"DW_OP_lit0, DW_OP_skip +1, DW_OP_lit0, DW_OP_bra -4, DW_OP_stack_value"#,
    ),
    ("509304", r#"DW_OP_reg0 RAX, DW_OP_piece 0x4"#),
    ("70009404", r#"DW_OP_breg0 RAX+0, DW_OP_deref_size 0x4"#),
    ("9650", r#"DW_OP_nop, DW_OP_reg0 RAX"#),
    ("982b00", r#"DW_OP_call2 0x2b"#),
    ("992b000000", r#"DW_OP_call4 0x2b"#),
    ("509d2008", r#"DW_OP_reg0 RAX, DW_OP_bit_piece 0x20 0x8"#),
    ("a02b0000007c", r#"<decoding error> a0 2b 00 00 00 7c"#),
    ("a100", r#"DW_OP_addrx 0x0"#),
    (
        "a42b0801000000000000009f",
        r#"<decoding error> a4 2b 08 01 00 00 00 00 00 00 00 9f"#,
    ),
    (
        "a5052b9f",
        r#"DW_OP_regval_type RDI (0x0000002b) "long", DW_OP_stack_value"#,
    ),
    (
        "7000a6082b9f",
        r#"DW_OP_breg0 RAX+0, <decoding error> a6 08 2b 9f"#,
    ),
    (
        "30a82b9f",
        r#"DW_OP_lit0, DW_OP_convert (0x0000002b) "long", DW_OP_stack_value"#,
    ),
    (
        "30a8009f",
        r#"DW_OP_lit0, DW_OP_convert 0x0, DW_OP_stack_value"#,
    ),
    ("30a92b9f", r#"DW_OP_lit0, <decoding error> a9 2b 9f"#),
    (
        "f301559f",
        r#"DW_OP_GNU_entry_value(DW_OP_reg5 RDI), DW_OP_stack_value"#,
    ),
    (
        "e90150",
        r#"DW_OP_LLVM_user DW_OP_LLVM_nop, DW_OP_reg0 RAX"#,
    ),
    (
        "7000069b",
        r#"DW_OP_breg0 RAX+0, DW_OP_deref, DW_OP_form_tls_address"#,
    ),
    ("7000e0", r#"DW_OP_breg0 RAX+0, DW_OP_GNU_push_tls_address"#),
];

/// gdb 13's listing (x86-64), as printed by `info scope`.
const GDB: &[(&str, &str)] = &[
    ("0334120000000000009f", "     0: DW_OP_addr 0x1234\n     9: DW_OP_stack_value"),
    ("08059f", "     0: DW_OP_const1u 5\n     2: DW_OP_stack_value"),
    ("09fb9f", "     0: DW_OP_const1s -5\n     2: DW_OP_stack_value"),
    ("0a01029f", "     0: DW_OP_const2u 513\n     3: DW_OP_stack_value"),
    ("0bfeff9f", "     0: DW_OP_const2s -2\n     3: DW_OP_stack_value"),
    ("0c010000009f", "     0: DW_OP_const4u 1\n     5: DW_OP_stack_value"),
    ("0dffffffff9f", "     0: DW_OP_const4s -1\n     5: DW_OP_stack_value"),
    ("0e01010101010101019f", "     0: DW_OP_const8u 72340172838076673\n     9: DW_OP_stack_value"),
    ("0fffffffffffffffff9f", "     0: DW_OP_const8s -1\n     9: DW_OP_stack_value"),
    ("10ac029f", "     0: DW_OP_constu 300\n     3: DW_OP_stack_value"),
    ("11d47d9f", "     0: DW_OP_consts -300\n     3: DW_OP_stack_value"),
    ("303015019f", "     0: DW_OP_lit0\n     1: DW_OP_lit0\n     2: DW_OP_pick 1\n     4: DW_OP_stack_value"),
    ("3023109f", "     0: DW_OP_lit0\n     1: DW_OP_plus_uconst 16\n     3: DW_OP_stack_value"),
    ("302f01003028fcff9f", "     0: DW_OP_lit0\n     1: DW_OP_skip to 5\n     4: DW_OP_lit0\n     5: DW_OP_bra 4\n     8: DW_OP_stack_value"),
    ("7008", "     0: DW_OP_breg0 8 [$rax]"),
    ("7778", "     0: DW_OP_breg7 -8 [$rsp]"),
    ("9011", "     0: DW_OP_regx 17 [$xmm0]"),
    ("916c", "     0: DW_OP_fbreg -20"),
    ("920710", "     0: DW_OP_bregx register 7 [$rsp] offset 16"),
    ("509304", "     0: DW_OP_reg0 [$rax]\n     1: DW_OP_piece 4 (bytes)"),
    ("70009404", "     0: DW_OP_breg0 0 [$rax]\n     2: DW_OP_deref_size 4"),
    ("9650", "     0: DW_OP_nop\n     1: DW_OP_reg0 [$rax]"),
    ("97", "     0: DW_OP_push_object_address"),
    ("982b00", "     0: DW_OP_call2 offset 2b"),
    ("992b000000", "     0: DW_OP_call4 offset 2b"),
    ("9c", "     0: DW_OP_call_frame_cfa"),
    ("509d2008", "     0: DW_OP_reg0 [$rax]\n     1: DW_OP_bit_piece size 32 offset 8 (bits)"),
    ("a02b0000007c", "     0: DW_OP_implicit_pointer DIE 2b offset -4"),
    ("a301559f", "     0: DW_OP_entry_value\n       2: DW_OP_reg5 [$rdi]\n     3: DW_OP_stack_value"),
    ("a3037500069f", "     0: DW_OP_entry_value\n       2: DW_OP_breg5 0 [$rdi]\n       4: DW_OP_deref\n     5: DW_OP_stack_value"),
    ("a42b0801000000000000009f", "     0: DW_OP_const_type<long [0x2b]> 8 byte block: 01 00 00 00 00 00 00 00\n    11: DW_OP_stack_value"),
    ("a5052b9f", "     0: DW_OP_regval_type<long [0x2b]> [$rdi]\n     3: DW_OP_stack_value"),
    ("7000a6082b9f", "     0: DW_OP_breg0 0 [$rax]\n     2: DW_OP_deref_type<long [0x2b]> 8\n     5: DW_OP_stack_value"),
    ("30a82b9f", "     0: DW_OP_lit0\n     1: DW_OP_convert<long [0x2b]>\n     3: DW_OP_stack_value"),
    ("30a8009f", "     0: DW_OP_lit0\n     1: DW_OP_convert<0>\n     3: DW_OP_stack_value"),
    ("30a92b9f", "     0: DW_OP_lit0\n     1: DW_OP_reinterpret<long [0x2b]>\n     3: DW_OP_stack_value"),
    ("f301559f", "     0: DW_OP_GNU_entry_value\n       2: DW_OP_reg5 [$rdi]\n     3: DW_OP_stack_value"),
];

#[test]
fn llvm_dwarfdump_spelling() {
    for (hex, text) in LLVM {
        let parsed = parse_text(text, |_| None).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed, ops_of(hex), "{text}");
    }
}

#[test]
fn gdb_spelling() {
    for (hex, text) in GDB {
        let parsed = parse_text(text, |_| None).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed, ops_of(hex), "{text}");
    }
}

/// A location list entry and an attribute as llvm-dwarfdump prints them,
/// with the range before and the attribute's parentheses around.
#[test]
fn llvm_dwarfdump_lines_as_printed() {
    let cases = [
        (
            "[0x0000000000000089, 0x000000000000008a): DW_OP_entry_value(DW_OP_reg5 RDI), DW_OP_stack_value)",
            "a301559f",
        ),
        ("DW_AT_location\t(DW_OP_reg5 RDI)", "55"),
        ("(DW_OP_breg7 RSP+8, DW_OP_deref_size 0x10, DW_OP_stack_value)", "770894109f"),
        (
            "DW_OP_regval_type XMM2 (0x0000002a) \"double\", DW_OP_convert (0x00000038) \"int\", DW_OP_convert 0x0, DW_OP_stack_value",
            "a5132aa838a8009f",
        ),
    ];
    for (text, hex) in cases {
        assert_eq!(parse_text(text, |_| None).unwrap(), ops_of(hex), "{text}");
    }
    // A base type reference is a `.debug_info` offset: the unit's is subtracted.
    let syntax = Syntax {
        encoding: Encoding::default(),
        unit_offset: 0x100,
        registers: &|_| None,
    };
    assert_eq!(
        parse_text_with("DW_OP_lit1, DW_OP_convert (0x0000012a) \"int\"", &syntax).unwrap(),
        [Op::Lit(1), Op::Convert(0x2a)]
    );
    assert!(parse_text_with("DW_OP_convert (0x0000002a)", &syntax).is_err());
}

/// llvm-dwarfdump 19 closes no entry value whose nested expression has more
/// than one operation: the nested expression then runs to the end.
#[test]
fn llvm_dwarfdump_unclosed_entry_value() {
    assert_eq!(
        parse_text("DW_OP_entry_value(DW_OP_breg5 RDI+0, DW_OP_deref", |_| None).unwrap(),
        ops_of("a303750006")
    );
}

/// AArch64 names as llvm-dwarfdump 19 prints them (`W0`..`W30`, `WSP`,
/// `B0`.., `Z0`.., `PN0`..), and the usual aliases.
#[test]
fn aarch64_register_names() {
    let cases = [
        ("DW_OP_reg0 W0", "50"),
        ("DW_OP_breg31 WSP+16", "8f10"),
        ("DW_OP_bregx WSP-8", "921f78"),
        ("DW_OP_regx B8", "9048"),
        ("DW_OP_regx Z3", "9063"),
        ("DW_OP_regx PN1", "9031"),
        ("DW_OP_regx VG", "902e"),
        ("DW_OP_breg29 X29+0", "8d00"),
        ("DW_OP_regx V31", "905f"),
    ];
    for (text, hex) in cases {
        assert_eq!(parse_text(text, |_| None).unwrap(), ops_of(hex), "{text}");
    }
}

/// A register name next to its number must name that register, when known;
/// names of other architectures pass.
#[test]
fn register_names_are_checked() {
    let err = |text: &str| match parse_text(text, |_| None).map_err(locus_dwarf::Error::into_detail)
    {
        Err(ErrorDetail::Syntax {
            offset, message, ..
        }) => (offset, message),
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(
        err("DW_OP_reg5 RSI"),
        (11, "register name does not match the register number")
    );
    assert_eq!(
        err("DW_OP_breg7 RBP+8"),
        (12, "register name does not match the register number")
    );
    assert_eq!(
        err("0: DW_OP_breg7 8 [$rbp]"),
        (17, "register name does not match the register number")
    );
    assert_eq!(err("DW_OP_bregx FOO+8").1, "unknown register name");
    assert_eq!(err("DW_OP_regx FOO").1, "unknown register name");
    assert_eq!(
        parse_text(
            "DW_OP_breg2 X2+8, DW_OP_reg10 [$bad_register_number]",
            |_| None
        )
        .unwrap(),
        [Op::Breg(2, 8), Op::Reg(10)]
    );
    // Names given by the caller come first.
    assert_eq!(
        parse_text("DW_OP_regx SGPR0", |n| (n == "SGPR0").then_some(32)).unwrap(),
        [Op::Regx(32)]
    );
}

/// What gdb cannot give back is refused or read as printed.
#[test]
fn gdb_limits() {
    // gdb prints the length of an implicit value, not its bytes.
    assert!(matches!(
        parse_text("     0: DW_OP_implicit_value 4", |_| None)
            .map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Syntax { offset: 29, .. })
    ));
    // A branch target past 16 bits of displacement.
    assert!(parse_text("     0: DW_OP_skip to 70000", |_| None).is_err());
    // Without byte offsets, `to N` counts from the start of the text.
    assert_eq!(
        parse_text("DW_OP_lit0 DW_OP_skip to 5 DW_OP_lit0 DW_OP_lit1", |_| None).unwrap(),
        [Op::Lit(0), Op::Skip(1), Op::Lit(0), Op::Lit(1)]
    );
}

/// `locus dwarf vars` prints an entry value's block and its operations; the
/// operations must encode to the block.
#[test]
fn entry_value_block_with_its_operations() {
    assert_eq!(
        parse_text(
            "DW_OP_entry_value [55] (DW_OP_reg5); DW_OP_stack_value",
            |_| None
        )
        .unwrap(),
        ops_of("a301559f")
    );
    assert!(matches!(
        parse_text("DW_OP_entry_value [55] (DW_OP_reg4)", |_| None)
            .map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Syntax { offset: 23, .. })
    ));
}

/// The DWARF 6 draft's spelling of each operation it shares with LLVM 19
/// (Issue 230524.1 "Locations on the stack" and the proposals after it):
/// each reads as the operation LLVM's spelling names, and prints with the
/// name this crate prints.
const DWARF6: &[(&str, &str, &str)] = &[
    ("DW_OP_undefined", "DW_OP_LLVM_undefined", "DW_OP_undefined"),
    ("DW_OP_offset", "DW_OP_LLVM_offset", "DW_OP_offset"),
    (
        "DW_OP_offset_uconst 4",
        "DW_OP_LLVM_offset_uconst 4",
        "DW_OP_offset_uconst 4",
    ),
    (
        "DW_OP_bit_offset",
        "DW_OP_LLVM_bit_offset",
        "DW_OP_bit_offset",
    ),
    ("DW_OP_push_lane", "DW_OP_LLVM_push_lane", "DW_OP_push_lane"),
    (
        "DW_OP_form_aspace_address",
        "DW_OP_LLVM_form_aspace_address",
        "DW_OP_form_aspace_address",
    ),
    (
        "DW_OP_aspace_bregx 7 -8",
        "DW_OP_LLVM_aspace_bregx 7 -8",
        "DW_OP_aspace_bregx 7 -8",
    ),
    (
        "DW_OP_aspace_implicit_pointer 0x2a 4",
        "DW_OP_LLVM_aspace_implicit_pointer 0x2a 4",
        "DW_OP_aspace_implicit_pointer 0x2a 4",
    ),
    (
        "DW_OP_call_frame_entry_reg 6",
        "DW_OP_LLVM_call_frame_entry_reg 6",
        "DW_OP_call_frame_entry_reg 6",
    ),
    ("DW_OP_piece_end", "DW_OP_LLVM_piece_end", "DW_OP_piece_end"),
    (
        "DW_OP_extend 32 4",
        "DW_OP_LLVM_extend 32 4",
        "DW_OP_extend 32 4",
    ),
    (
        "DW_OP_select_bit_piece 32 4",
        "DW_OP_LLVM_select_bit_piece 32 4",
        "DW_OP_select_bit_piece 32 4",
    ),
    ("DW_OP_overlay", "DW_OP_LLVM_overlay", "DW_OP_overlay"),
    (
        "DW_OP_bit_overlay",
        "DW_OP_LLVM_bit_overlay",
        "DW_OP_bit_overlay",
    ),
    (
        "DW_OP_push_object_location",
        "DW_OP_push_object_address",
        "DW_OP_push_object_address",
    ),
    (
        "DW_OP_form_tls_location",
        "DW_OP_form_tls_address",
        "DW_OP_form_tls_address",
    ),
];

#[test]
fn dwarf6_spellings_name_the_same_operations() {
    for &(dwarf6, other, printed) in DWARF6 {
        let ops = parse_text(dwarf6, |_| None).unwrap();
        assert_eq!(ops, parse_text(other, |_| None).unwrap(), "{dwarf6}");
        assert_eq!(locus_dwarf::to_text(&ops), printed, "{dwarf6}");
    }
    // In a sequence, between other operations, with llvm-dwarfdump's commas.
    assert_eq!(
        parse_text(
            "DW_OP_push_object_location, DW_OP_lit8, DW_OP_offset, DW_OP_deref",
            |_| None
        )
        .unwrap(),
        [Op::PushObjectAddress, Op::Lit(8), Op::Offset, Op::Deref]
    );
}
