//! Binary and text forms of DWARF expression operations.

use crate::common;
use locus_dwarf::ErrorDetail;

use locus_dwarf::{decode, encode, parse_text, to_text, Encoding, ExtensionEncoding, Op};
use proptest::prelude::*;

const USER: Encoding = Encoding {
    address_size: 8,
    offset_size: 4,
    extension: ExtensionEncoding::User,
};
const LEGACY: Encoding = Encoding {
    address_size: 8,
    offset_size: 4,
    extension: ExtensionEncoding::Legacy,
};

fn all_encodings() -> Vec<Encoding> {
    let mut v = Vec::new();
    for extension in [ExtensionEncoding::User, ExtensionEncoding::Legacy] {
        for address_size in [4, 8] {
            for offset_size in [4, 8] {
                v.push(Encoding {
                    address_size,
                    offset_size,
                    extension,
                });
            }
        }
    }
    v
}

fn no_regs(_: &str) -> Option<u16> {
    None
}

/// One of every operation, with operands exercising sign and width.
fn all_ops() -> Vec<Op> {
    let mut v = vec![
        Op::Addr(0xdead_beef),
        Op::Deref,
        Op::Const1u(0xff),
        Op::Const1s(-1),
        Op::Const2u(0xbeef),
        Op::Const2s(-300),
        Op::Const4u(0xdead_beef),
        Op::Const4s(-70000),
        Op::Const8u(u64::MAX),
        Op::Const8s(i64::MIN),
        Op::Constu(u64::MAX),
        Op::Consts(i64::MIN),
        Op::Dup,
        Op::Drop,
        Op::Over,
        Op::Pick(3),
        Op::Swap,
        Op::Rot,
        Op::Xderef,
        Op::Abs,
        Op::And,
        Op::Div,
        Op::Minus,
        Op::Mod,
        Op::Mul,
        Op::Neg,
        Op::Not,
        Op::Or,
        Op::Plus,
        Op::PlusUconst(624_485),
        Op::Shl,
        Op::Shr,
        Op::Shra,
        Op::Xor,
        Op::Bra(0),
        Op::Eq,
        Op::Ge,
        Op::Gt,
        Op::Le,
        Op::Lt,
        Op::Ne,
        Op::Skip(0),
        Op::Regx(2560),
        Op::Fbreg(-123_456),
        Op::Bregx(17, i64::MAX),
        Op::Piece(4),
        Op::DerefSize(4),
        Op::XderefSize(2),
        Op::Nop,
        Op::PushObjectAddress,
        Op::Call2(0x1234),
        Op::Call4(0x1234_5678),
        Op::CallRef(0x8765_4321),
        Op::FormTlsAddress,
        Op::CallFrameCfa,
        Op::BitPiece {
            size: 3,
            offset: 129,
        },
        Op::ImplicitValue(vec![1, 2, 3, 0xff]),
        Op::ImplicitValue(vec![]),
        Op::StackValue,
        Op::ImplicitPointer {
            die: 0x2a,
            offset: -8,
        },
        Op::Addrx(3),
        Op::Constx(300),
        Op::EntryValue(vec![0x55]),
        Op::ConstType {
            type_offset: 0x30,
            value: vec![0, 0, 0x80, 0x3f],
        },
        Op::RegvalType {
            register: 2560,
            type_offset: 0,
        },
        Op::DerefType {
            size: 8,
            type_offset: 0x44,
        },
        Op::XderefType {
            size: 4,
            type_offset: 0x44,
        },
        Op::Convert(0x3a),
        Op::Reinterpret(0),
        Op::FormAspaceAddress,
        Op::PushLane,
        Op::Offset,
        Op::OffsetUconst(20),
        Op::BitOffset,
        Op::CallFrameEntryReg(16),
        Op::Undefined,
        Op::AspaceBregx {
            register: 1,
            offset: -64,
        },
        Op::AspaceImplicitPointer {
            die: 0x99,
            offset: 4,
        },
        Op::PieceEnd,
        Op::Extend {
            bit_size: 32,
            count: 64,
        },
        Op::SelectBitPiece {
            bit_size: 32,
            count: 64,
        },
    ];
    for n in 0..32 {
        v.push(Op::Lit(n));
        v.push(Op::Reg(n));
        v.push(Op::Breg(n, i64::from(n) * 1000 - 16_000));
    }
    v
}

fn encodable(op: &Op, enc: Encoding) -> bool {
    !(enc.extension == ExtensionEncoding::User && matches!(op, Op::AspaceImplicitPointer { .. }))
}

#[test]
fn every_op_round_trips_in_every_encoding() {
    for enc in all_encodings() {
        for op in all_ops() {
            if !encodable(&op, enc) {
                continue;
            }
            // Addresses/offsets above 32 bits with size 4 are errors, tested below.
            let bytes = encode(std::slice::from_ref(&op), enc)
                .unwrap_or_else(|e| panic!("{op:?} {enc:?}: {e}"));
            let decoded = decode(&bytes, enc).unwrap_or_else(|e| panic!("{op:?} {enc:?}: {e}"));
            assert_eq!(decoded, vec![(0, op.clone())], "{enc:?} {bytes:02x?}");
            assert_eq!(encode(&[decoded[0].1.clone()], enc).unwrap(), bytes);
        }
        // The whole sequence at once (branches with displacement 0 land on the
        // next operation).
        let ops: Vec<Op> = all_ops()
            .into_iter()
            .filter(|o| encodable(o, enc))
            .collect();
        let bytes = encode(&ops, enc).unwrap();
        let decoded: Vec<Op> = decode(&bytes, enc)
            .unwrap()
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        assert_eq!(decoded, ops);
    }
}

#[test]
fn every_op_round_trips_through_text() {
    let ops = all_ops();
    let text = to_text(&ops);
    assert_eq!(parse_text(&text, no_regs).unwrap(), ops);
    assert_eq!(to_text(&parse_text(&text, no_regs).unwrap()), text);
    for op in &ops {
        let t = to_text(std::slice::from_ref(op));
        assert!(t.starts_with(op.name()), "{t}");
        assert_eq!(parse_text(&t, no_regs).unwrap(), vec![op.clone()], "{t}");
    }
}

#[test]
fn aspace_implicit_pointer_has_no_user_sub_opcode() {
    let op = Op::AspaceImplicitPointer { die: 1, offset: 2 };
    let err = encode(&[Op::Nop, op.clone()], USER).unwrap_err();
    assert!(matches!(
        err.clone().into_detail(),
        ErrorDetail::Unencodable {
            index: 1,
            op: "DW_OP_aspace_implicit_pointer",
            ..
        }
    ));
    // Legacy 0xe9 with a 4-byte DIE offset and SLEB displacement, as in
    // LLVM's test `.cfi_escape ... 0xe9, 0x1, 0x0, 0x0, 0x0, 0x2`.
    assert_eq!(encode(&[op], LEGACY).unwrap(), [0xe9, 1, 0, 0, 0, 2]);
}

#[test]
fn standard_numbering() {
    let cases: Vec<(Op, Vec<u8>)> = vec![
        (Op::Addr(0xbeef), vec![0x03, 0xef, 0xbe, 0, 0, 0, 0, 0, 0]),
        (Op::Deref, vec![0x06]),
        (Op::Constu(624_485), vec![0x10, 0xe5, 0x8e, 0x26]),
        (Op::Consts(-123_456), vec![0x11, 0xc0, 0xbb, 0x78]),
        (Op::Consts(-1), vec![0x11, 0x7f]),
        (Op::Consts(63), vec![0x11, 0x3f]),
        (Op::Consts(64), vec![0x11, 0xc0, 0x00]),
        (Op::Lit(0), vec![0x30]),
        (Op::Lit(31), vec![0x4f]),
        (Op::Reg(0), vec![0x50]),
        (Op::Reg(31), vec![0x6f]),
        (Op::Breg(0, -8), vec![0x70, 0x78]),
        (Op::Breg(31, 0), vec![0x8f, 0x00]),
        (Op::Regx(2560), vec![0x90, 0x80, 0x14]),
        (Op::Fbreg(-20), vec![0x91, 0x6c]),
        (Op::Bregx(7, 16), vec![0x92, 0x07, 0x10]),
        (Op::Piece(4), vec![0x93, 0x04]),
        (Op::Bra(-3), vec![0x28, 0xfd, 0xff]),
        (Op::Skip(0), vec![0x2f, 0x00, 0x00]),
        (Op::BitPiece { size: 3, offset: 5 }, vec![0x9d, 3, 5]),
        (Op::ImplicitValue(vec![1, 2]), vec![0x9e, 0x02, 1, 2]),
        (Op::StackValue, vec![0x9f]),
        (
            Op::ImplicitPointer {
                die: 0x10,
                offset: 0,
            },
            vec![0xa0, 0x10, 0, 0, 0, 0],
        ),
        (Op::EntryValue(vec![0x55]), vec![0xa3, 0x01, 0x55]),
        (
            Op::ConstType {
                type_offset: 0x2a,
                value: vec![1, 0],
            },
            vec![0xa4, 0x2a, 0x02, 1, 0],
        ),
        (
            Op::RegvalType {
                register: 3,
                type_offset: 0x2a,
            },
            vec![0xa5, 3, 0x2a],
        ),
        (Op::Convert(0x2a), vec![0xa8, 0x2a]),
        (Op::Reinterpret(0x2a), vec![0xa9, 0x2a]),
        (Op::CallFrameCfa, vec![0x9c]),
        (Op::Nop, vec![0x96]),
    ];
    for enc in [USER, LEGACY] {
        for (op, bytes) in &cases {
            assert_eq!(
                &encode(std::slice::from_ref(op), enc).unwrap(),
                bytes,
                "{op:?}"
            );
            assert_eq!(decode(bytes, enc).unwrap(), vec![(0, op.clone())]);
        }
    }
    // 4-byte addresses.
    let enc4 = Encoding {
        address_size: 4,
        ..USER
    };
    assert_eq!(
        encode(&[Op::Addr(0xbeef)], enc4).unwrap(),
        [0x03, 0xef, 0xbe, 0, 0]
    );
    assert!(matches!(
        encode(&[Op::Addr(1 << 32)], enc4).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Unencodable { index: 0, .. })
    ));
    assert!(matches!(
        encode(&[Op::Lit(32)], USER).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Unencodable { .. })
    ));
    assert!(matches!(
        encode(
            &[Op::ConstType {
                type_offset: 0,
                value: vec![0; 256]
            }],
            USER
        )
        .map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Unencodable { .. })
    ));
}

#[test]
fn extension_numbering() {
    // (op, user bytes, legacy bytes)
    let cases: Vec<(Op, Vec<u8>, Vec<u8>)> = vec![
        (Op::FormAspaceAddress, vec![0xe9, 0x02], vec![0xe1]),
        (Op::PushLane, vec![0xe9, 0x03], vec![0xe2]),
        (Op::Offset, vec![0xe9, 0x04], vec![0xe3]),
        (Op::OffsetUconst(20), vec![0xe9, 0x05, 20], vec![0xe4, 20]),
        (Op::BitOffset, vec![0xe9, 0x06], vec![0xe5]),
        (Op::CallFrameEntryReg(0), vec![0xe9, 0x07, 0], vec![0xe6, 0]),
        (Op::Undefined, vec![0xe9, 0x08], vec![0xe7]),
        (
            Op::AspaceBregx {
                register: 0,
                offset: 2,
            },
            vec![0xe9, 0x09, 0, 2],
            vec![0xe8, 0, 2],
        ),
        (
            Op::AspaceBregx {
                register: 0,
                offset: -2,
            },
            vec![0xe9, 0x09, 0, 0x7e],
            vec![0xe8, 0, 0x7e],
        ),
        (Op::PieceEnd, vec![0xe9, 0x0a], vec![0xea]),
        (
            Op::Extend {
                bit_size: 0,
                count: 0,
            },
            vec![0xe9, 0x0b, 0, 0],
            vec![0xeb, 0, 0],
        ),
        (
            Op::SelectBitPiece {
                bit_size: 0,
                count: 0,
            },
            vec![0xe9, 0x0c, 0, 0],
            vec![0xec, 0, 0],
        ),
    ];
    for (op, user, legacy) in cases {
        let ops = std::slice::from_ref(&op);
        assert_eq!(encode(ops, USER).unwrap(), user, "{op:?}");
        assert_eq!(encode(ops, LEGACY).unwrap(), legacy, "{op:?}");
        assert_eq!(decode(&user, USER).unwrap(), vec![(0, op.clone())]);
        assert_eq!(decode(&legacy, LEGACY).unwrap(), vec![(0, op.clone())]);
    }
    // Cross-decoding: the legacy opcodes are unknown under User; 0xe9 0x02 under
    // Legacy is aspace_implicit_pointer, truncated.
    assert_eq!(
        decode(&[0x30, 0xe1], USER),
        Err(ErrorDetail::UnknownOpcode {
            offset: 1,
            opcode: 0xe1
        }
        .into())
    );
    assert_eq!(
        decode(&[0xe9, 0x02], LEGACY),
        Err(ErrorDetail::Truncated {
            offset: 0,
            op: "DW_OP_aspace_implicit_pointer"
        }
        .into())
    );
    assert_eq!(
        decode(&[0x96, 0xe9, 0x7f], USER),
        Err(ErrorDetail::UnknownUserOpcode {
            offset: 1,
            sub_opcode: 0x7f
        }
        .into())
    );
}

#[test]
fn spec_examples_assemble() {
    let ops = parse_text(common::MULTI_LANE, common::resolve).unwrap();
    let half = [
        Op::PushLane,
        Op::Constu(4),
        Op::Mul,
        Op::Offset,
        Op::Piece(4),
    ];
    let mut expected = vec![Op::Regx(2560)];
    expected.extend_from_slice(&half);
    expected.push(Op::Regx(2561));
    expected.extend_from_slice(&half);
    assert_eq!(ops, expected);
    let half_bytes = [0xe9, 0x03, 0x10, 0x04, 0x1e, 0xe9, 0x04, 0x93, 0x04];
    let mut bytes = vec![0x90, 0x80, 0x14];
    bytes.extend_from_slice(&half_bytes);
    bytes.extend_from_slice(&[0x90, 0x81, 0x14]);
    bytes.extend_from_slice(&half_bytes);
    assert_eq!(encode(&ops, USER).unwrap(), bytes);

    let mixed = "DW_OP_regx VGPR0; DW_OP_push_lane; DW_OP_uconst 4; DW_OP_mul; DW_OP_offset;
        DW_OP_piece 4; DW_OP_addr 0xbeef; DW_OP_piece 2; DW_OP_uconst 0xf00d;
        DW_OP_stack_value; DW_OP_piece 2; DW_OP_piece_end";
    let ops = parse_text(mixed, common::resolve).unwrap();
    assert_eq!(ops.len(), 12);
    assert_eq!(ops[6], Op::Addr(0xbeef));
    assert_eq!(ops[8], Op::Constu(0xf00d));
    assert_eq!(ops[11], Op::PieceEnd);
    assert_eq!(
        &encode(&ops, LEGACY).unwrap()[..],
        &[
            0x90, 0x80, 0x14, 0xe2, 0x10, 0x04, 0x1e, 0xe3, 0x93, 0x04, 0x03, 0xef, 0xbe, 0, 0, 0,
            0, 0, 0, 0x93, 0x02, 0x10, 0x8d, 0xe0, 0x03, 0x9f, 0x93, 0x02, 0xea
        ][..]
    );

    let aspace = "DW_OP_regval_type SGPR0 Generic DW_OP_uconst 1 DW_OP_form_aspace_address DW_OP_offset 0x10";
    // As written, the spec gives DW_OP_offset an operand; DW_OP_offset takes
    // it from the stack, so `0x10` is not an operation name.
    let err = parse_text(aspace, common::resolve).unwrap_err();
    assert_eq!(err.offset(), Some(aspace.len() - 4));
    let ops = parse_text(
        "DW_OP_regval_type SGPR0 Generic DW_OP_uconst 1 DW_OP_form_aspace_address DW_OP_offset_uconst 0x10",
        common::resolve,
    )
    .unwrap();
    assert_eq!(
        ops,
        [
            Op::RegvalType {
                register: 32,
                type_offset: 0
            },
            Op::Constu(1),
            Op::FormAspaceAddress,
            Op::OffsetUconst(16)
        ]
    );

    let bits = parse_text(
        "DW_OP_regx SGPR3\nDW_OP_uconst 20\nDW_OP_bit_offset",
        common::resolve,
    )
    .unwrap();
    assert_eq!(bits, [Op::Regx(35), Op::Constu(20), Op::BitOffset]);
    assert_eq!(
        encode(&bits, USER).unwrap(),
        [0x90, 0x23, 0x10, 0x14, 0xe9, 0x06]
    );
}

#[test]
fn llvm_names_and_syntax_details() {
    let ops = parse_text(
        "DW_OP_LLVM_user DW_OP_LLVM_offset_uconst 20, DW_OP_LLVM_push_lane DW_OP_LLVM_aspace_bregx 5 -0x10 \
         DW_OP_breg7 -8 DW_OP_implicit_value [01 02 ff] DW_OP_const_type 0x2a [0000803f] DW_OP_entry_value []",
        no_regs,
    )
    .unwrap();
    assert_eq!(
        ops,
        [
            Op::OffsetUconst(20),
            Op::PushLane,
            Op::AspaceBregx {
                register: 5,
                offset: -16
            },
            Op::Breg(7, -8),
            Op::ImplicitValue(vec![1, 2, 0xff]),
            Op::ConstType {
                type_offset: 0x2a,
                value: vec![0, 0, 0x80, 0x3f]
            },
            Op::EntryValue(vec![]),
        ]
    );
    assert_eq!(
        to_text(&ops[..3]),
        "DW_OP_offset_uconst 20\nDW_OP_push_lane\nDW_OP_aspace_bregx 5 -16"
    );
}

#[test]
fn gnu_aliases_decode_as_dwarf5() {
    let cases: Vec<(Vec<u8>, Op, Vec<u8>)> = vec![
        (vec![0xe0], Op::FormTlsAddress, vec![0x9b]),
        (
            vec![0xf2, 0x10, 0, 0, 0, 0x7c],
            Op::ImplicitPointer {
                die: 0x10,
                offset: -4,
            },
            vec![0xa0, 0x10, 0, 0, 0, 0x7c],
        ),
        (
            vec![0xf3, 0x01, 0x55],
            Op::EntryValue(vec![0x55]),
            vec![0xa3, 0x01, 0x55],
        ),
        (
            vec![0xf4, 0x2a, 0x01, 0x07],
            Op::ConstType {
                type_offset: 0x2a,
                value: vec![7],
            },
            vec![0xa4, 0x2a, 0x01, 0x07],
        ),
        (
            vec![0xf5, 0x03, 0x2a],
            Op::RegvalType {
                register: 3,
                type_offset: 0x2a,
            },
            vec![0xa5, 0x03, 0x2a],
        ),
        (
            vec![0xf6, 0x04, 0x2a],
            Op::DerefType {
                size: 4,
                type_offset: 0x2a,
            },
            vec![0xa6, 0x04, 0x2a],
        ),
        (vec![0xf7, 0x2a], Op::Convert(0x2a), vec![0xa8, 0x2a]),
        (vec![0xf9, 0x2a], Op::Reinterpret(0x2a), vec![0xa9, 0x2a]),
        (vec![0xfb, 0x02], Op::Addrx(2), vec![0xa1, 0x02]),
        (vec![0xfc, 0x02], Op::Constx(2), vec![0xa2, 0x02]),
    ];
    for enc in [USER, LEGACY] {
        for (gnu, op, standard) in &cases {
            assert_eq!(decode(gnu, enc).unwrap(), vec![(0, op.clone())]);
            assert_eq!(&encode(std::slice::from_ref(op), enc).unwrap(), standard);
        }
    }
    assert_eq!(
        parse_text("DW_OP_GNU_entry_value [55] DW_OP_GNU_convert 0x2a", no_regs).unwrap(),
        [Op::EntryValue(vec![0x55]), Op::Convert(0x2a)]
    );
    assert_eq!(
        decode(&[0xf3, 0x02, 0x55], USER),
        Err(ErrorDetail::Truncated {
            offset: 0,
            op: "DW_OP_entry_value"
        }
        .into())
    );
}

#[test]
fn text_errors() {
    let cases: &[(&str, usize)] = &[
        ("DW_OP_lit32", 0),
        ("DW_OP_lit1 DW_OP_frobnicate", 11),
        ("DW_OP_piece", 11),
        ("DW_OP_piece -1", 12),
        ("DW_OP_const1u 256", 14),
        ("DW_OP_const1s -129", 14),
        ("DW_OP_regx VGPR9", 11),
        ("DW_OP_implicit_value [0]", 21),
        ("DW_OP_implicit_value [0g]", 21),
        ("DW_OP_implicit_value [00", 21),
        ("42", 0),
        ("DW_OP_LLVM_plus", 0),
        ("DW_OP_reg01", 0),
    ];
    for (text, offset) in cases {
        let err = parse_text(text, common::resolve).unwrap_err();
        assert_eq!(err.offset(), Some(*offset), "{text}: {err}");
        assert!(matches!(
            err.clone().into_detail(),
            ErrorDetail::Syntax { .. }
        ));
    }
}

#[test]
fn binary_errors() {
    // Truncated operands name the operation's opcode offset and name.
    assert_eq!(
        decode(&[0x30, 0x03, 1, 2, 3], USER),
        Err(ErrorDetail::Truncated {
            offset: 1,
            op: "DW_OP_addr"
        }
        .into())
    );
    assert_eq!(
        decode(&[0x90, 0x80], USER),
        Err(ErrorDetail::Truncated {
            offset: 0,
            op: "DW_OP_regx"
        }
        .into())
    );
    assert_eq!(
        decode(&[0xe9, 0x05, 0x80], USER),
        Err(ErrorDetail::Truncated {
            offset: 0,
            op: "DW_OP_offset_uconst"
        }
        .into())
    );
    assert_eq!(
        decode(&[0x9e, 0x05, 1, 2], USER),
        Err(ErrorDetail::Truncated {
            offset: 0,
            op: "DW_OP_implicit_value"
        }
        .into())
    );
    // Huge block length must not allocate or panic.
    let mut huge = vec![0x9e];
    huge.extend_from_slice(&[0xff; 9]);
    huge.push(0x01);
    assert!(matches!(
        decode(&huge, USER).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::Truncated { offset: 0, .. })
    ));
    // LEB overflow.
    let mut over = vec![0x10];
    over.extend_from_slice(&[0xff; 9]);
    over.push(0x02);
    assert_eq!(
        decode(&over, USER),
        Err(ErrorDetail::BadLeb {
            offset: 0,
            op: "DW_OP_constu"
        }
        .into())
    );
    let mut max = vec![0x10];
    max.extend_from_slice(&[0xff; 9]);
    max.push(0x01);
    assert_eq!(decode(&max, USER).unwrap(), vec![(0, Op::Constu(u64::MAX))]);
    let mut sover = vec![0x11];
    sover.extend_from_slice(&[0x80; 9]);
    sover.push(0x01);
    assert!(matches!(
        decode(&sover, USER).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::BadLeb { .. })
    ));
    let mut smin = vec![0x11];
    smin.extend_from_slice(&[0x80; 9]);
    smin.push(0x7f);
    assert_eq!(
        decode(&smin, USER).unwrap(),
        vec![(0, Op::Consts(i64::MIN))]
    );
    // Unknown opcodes (0xf0, 0xfa and 0xfd are gcc's DW_OP_GNU_uninit,
    // DW_OP_GNU_parameter_ref and DW_OP_GNU_variable_value).
    for code in [
        0x00u8, 0x01, 0x02, 0x04, 0x05, 0x07, 0xaa, 0xed, 0xf1, 0xf8, 0xff,
    ] {
        assert_eq!(
            decode(&[0x96, code], LEGACY),
            Err(ErrorDetail::UnknownOpcode {
                offset: 1,
                opcode: code
            }
            .into())
        );
    }
    // DW_OP_GNU_uninit marks a location's value as not initialized yet: decoded, printed,
    // and nothing in the evaluation (`DW_OP_reg0; DW_OP_GNU_uninit`, g++ -Og).
    assert_eq!(
        decode(&[0x50, 0xf0], LEGACY).unwrap(),
        vec![(0, Op::Reg(0)), (1, Op::GnuUninit)]
    );
    assert_eq!(Op::GnuUninit.name(), "DW_OP_GNU_uninit");
    // Branches: to the end is fine, past it or into an operand is not.
    assert!(decode(&[0x2f, 0x00, 0x00], USER).is_ok());
    assert!(decode(&[0x30, 0x28, 0xfc, 0xff], USER).is_ok());
    assert_eq!(
        decode(&[0x2f, 0x01, 0x00], USER),
        Err(ErrorDetail::BadBranchTarget {
            offset: 0,
            op: "DW_OP_skip",
            target: 4
        }
        .into())
    );
    assert_eq!(
        decode(&[0x30, 0x28, 0xfb, 0xff], USER),
        Err(ErrorDetail::BadBranchTarget {
            offset: 1,
            op: "DW_OP_bra",
            target: -1
        }
        .into())
    );
    assert!(matches!(
        decode(&[0x10, 0x80, 0x01, 0x2f, 0xfe, 0xff], USER)
            .map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::BadBranchTarget { target: 4, .. })
    ));
    // Bad encodings.
    let bad = Encoding {
        address_size: 2,
        ..USER
    };
    assert!(matches!(
        decode(&[0x96], bad).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::BadEncoding { .. })
    ));
    assert!(matches!(
        encode(&[], bad).map_err(locus_dwarf::Error::into_detail),
        Err(ErrorDetail::BadEncoding { .. })
    ));
    assert_eq!(decode(&[], USER).unwrap(), vec![]);
}

#[test]
fn every_truncation_is_an_error_inside_the_input() {
    for enc in [USER, LEGACY] {
        let ops: Vec<Op> = all_ops()
            .into_iter()
            .filter(|o| encodable(o, enc))
            .collect();
        let bytes = encode(&ops, enc).unwrap();
        let boundaries: Vec<usize> = decode(&bytes, enc)
            .unwrap()
            .iter()
            .map(|(o, _)| *o)
            .collect();
        for cut in 0..bytes.len() {
            let r = decode(&bytes[..cut], enc);
            if boundaries.contains(&cut) {
                // Cutting at an op boundary leaves a well-formed prefix, unless
                // it leaves a branch pointing past the end (all branches here
                // have displacement 0, i.e. point to the next op).
                if let Err(e) = r {
                    assert!(
                        matches!(e.clone().into_detail(), ErrorDetail::BadBranchTarget { .. }),
                        "{cut}: {e}"
                    );
                }
            } else {
                let e = r.unwrap_err();
                let off = e.offset().unwrap();
                assert!(off < cut, "{cut}: {e}");
                assert!(boundaries.contains(&off), "{cut}: {e}");
            }
        }
    }
}

// --- Property tests -------------------------------------------------------

fn block() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..12)
}

fn arb_op() -> impl Strategy<Value = Op> {
    let simple = proptest::sample::select(vec![
        Op::Deref,
        Op::Dup,
        Op::Drop,
        Op::Over,
        Op::Swap,
        Op::Rot,
        Op::Xderef,
        Op::Abs,
        Op::And,
        Op::Div,
        Op::Minus,
        Op::Mod,
        Op::Mul,
        Op::Neg,
        Op::Not,
        Op::Or,
        Op::Plus,
        Op::Shl,
        Op::Shr,
        Op::Shra,
        Op::Xor,
        Op::Eq,
        Op::Ge,
        Op::Gt,
        Op::Le,
        Op::Lt,
        Op::Ne,
        Op::Nop,
        Op::PushObjectAddress,
        Op::FormTlsAddress,
        Op::CallFrameCfa,
        Op::StackValue,
        Op::FormAspaceAddress,
        Op::PushLane,
        Op::Offset,
        Op::BitOffset,
        Op::Undefined,
        Op::PieceEnd,
    ]);
    let fixed = prop_oneof![
        any::<u32>().prop_map(|v| Op::Addr(u64::from(v))),
        any::<u8>().prop_map(Op::Const1u),
        any::<i8>().prop_map(Op::Const1s),
        any::<u16>().prop_map(Op::Const2u),
        any::<i16>().prop_map(Op::Const2s),
        any::<u32>().prop_map(Op::Const4u),
        any::<i32>().prop_map(Op::Const4s),
        any::<u64>().prop_map(Op::Const8u),
        any::<i64>().prop_map(Op::Const8s),
        any::<u8>().prop_map(Op::Pick),
        any::<u8>().prop_map(Op::DerefSize),
        any::<u8>().prop_map(Op::XderefSize),
        any::<u16>().prop_map(Op::Call2),
        any::<u32>().prop_map(Op::Call4),
        any::<u32>().prop_map(|v| Op::CallRef(u64::from(v))),
        (0u8..32).prop_map(Op::Lit),
        (0u8..32).prop_map(Op::Reg),
        (0u8..32, any::<i64>()).prop_map(|(r, d)| Op::Breg(r, d)),
        (any::<u16>()).prop_map(|_| Op::Bra(0)),
        (any::<u16>()).prop_map(|_| Op::Skip(0)),
    ];
    let leb = prop_oneof![
        any::<u64>().prop_map(Op::Constu),
        any::<i64>().prop_map(Op::Consts),
        any::<u64>().prop_map(Op::PlusUconst),
        any::<u64>().prop_map(Op::Regx),
        any::<i64>().prop_map(Op::Fbreg),
        (any::<u64>(), any::<i64>()).prop_map(|(r, d)| Op::Bregx(r, d)),
        any::<u64>().prop_map(Op::Piece),
        (any::<u64>(), any::<u64>()).prop_map(|(size, offset)| Op::BitPiece { size, offset }),
        block().prop_map(Op::ImplicitValue),
        (any::<u32>(), any::<i64>()).prop_map(|(d, offset)| Op::ImplicitPointer {
            die: u64::from(d),
            offset
        }),
        any::<u64>().prop_map(Op::Addrx),
        any::<u64>().prop_map(Op::Constx),
        block().prop_map(Op::EntryValue),
        (any::<u64>(), block())
            .prop_map(|(type_offset, value)| Op::ConstType { type_offset, value }),
        (any::<u64>(), any::<u64>()).prop_map(|(register, type_offset)| Op::RegvalType {
            register,
            type_offset
        }),
        (any::<u8>(), any::<u64>())
            .prop_map(|(size, type_offset)| Op::DerefType { size, type_offset }),
        (any::<u8>(), any::<u64>())
            .prop_map(|(size, type_offset)| Op::XderefType { size, type_offset }),
        any::<u64>().prop_map(Op::Convert),
        any::<u64>().prop_map(Op::Reinterpret),
    ];
    let ext = prop_oneof![
        any::<u64>().prop_map(Op::OffsetUconst),
        any::<u64>().prop_map(Op::CallFrameEntryReg),
        (any::<u64>(), any::<i64>())
            .prop_map(|(register, offset)| Op::AspaceBregx { register, offset }),
        (any::<u32>(), any::<i64>()).prop_map(|(d, offset)| Op::AspaceImplicitPointer {
            die: u64::from(d),
            offset
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(bit_size, count)| Op::Extend { bit_size, count }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(bit_size, count)| Op::SelectBitPiece { bit_size, count }),
    ];
    prop_oneof![simple, fixed, leb, ext]
}

/// Random op sequences with branches retargeted to random operation
/// boundaries (branch encodings are 3 bytes whatever the displacement).
fn arb_program() -> impl Strategy<Value = (Vec<Op>, Vec<usize>)> {
    (
        proptest::collection::vec(arb_op(), 0..40),
        proptest::collection::vec(any::<usize>(), 40),
    )
}

fn retarget(ops: &mut [Op], picks: &[usize], enc: Encoding) {
    let mut boundaries = vec![0usize];
    for op in ops.iter() {
        let len = encode(std::slice::from_ref(op), enc).map_or(0, |b| b.len());
        let end = boundaries.last().copied().unwrap_or(0) + len;
        boundaries.push(end);
    }
    for (i, op) in ops.iter_mut().enumerate() {
        let end = boundaries[i + 1] as i64;
        let target = boundaries[picks[i] % boundaries.len()] as i64;
        let disp = i16::try_from(target - end).unwrap_or(0);
        match op {
            Op::Bra(d) | Op::Skip(d) => *d = disp,
            _ => {}
        }
    }
}

proptest! {
    #[test]
    fn random_programs_round_trip((ops, picks) in arb_program()) {
        for enc in all_encodings() {
            let mut ops: Vec<Op> = ops.iter().filter(|o| encodable(o, enc)).cloned().collect();
            retarget(&mut ops, &picks, enc);
            let bytes = encode(&ops, enc).unwrap();
            let decoded = decode(&bytes, enc).unwrap();
            let back: Vec<Op> = decoded.iter().map(|(_, o)| o.clone()).collect();
            prop_assert_eq!(&back, &ops);
            prop_assert_eq!(encode(&back, enc).unwrap(), bytes);
            let text = to_text(&ops);
            let parsed = parse_text(&text, no_regs).unwrap();
            prop_assert_eq!(&parsed, &ops);
            prop_assert_eq!(to_text(&parsed), text);
        }
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        for enc in all_encodings() {
            match decode(&bytes, enc) {
                Ok(ops) => {
                    // Canonical input re-encodes; all we require is that
                    // decoding the re-encoding gives the same operations.
                    let ops: Vec<Op> = ops.into_iter().map(|(_, o)| o).collect();
                    if let Ok(again) = encode(&ops, enc) {
                        let back: Vec<Op> = decode(&again, enc).unwrap().into_iter().map(|(_, o)| o).collect();
                        prop_assert_eq!(back, ops);
                    }
                }
                Err(e) => {
                    let off = e.offset().unwrap();
                    prop_assert!(off < bytes.len(), "{} for {:02x?}", e, bytes);
                }
            }
        }
    }

    #[test]
    fn garbage_text_never_panics(text in "[ -~\n;\\[\\]]{0,64}") {
        if let Err(e) = parse_text(&text, common::resolve) {
            prop_assert!(e.offset().unwrap() <= text.len());
        }
    }

    #[test]
    fn op_soup_text_never_panics(words in proptest::collection::vec(
        proptest::sample::select(vec!["DW_OP_regx", "DW_OP_bregx", "DW_OP_LLVM_user", "DW_OP_lit3",
            "VGPR0", "-5", "0x10", "[01", "02]", "[]", "DW_OP_const_type", "Generic", ";", "DW_OP_bra",
            "-0x8000", "99999999999999999999", "DW_OP_LLVM_aspace_bregx"]), 0..12)) {
        let text = words.join(" ");
        if let Err(e) = parse_text(&text, common::resolve) {
            prop_assert!(e.offset().unwrap() <= text.len());
        }
    }
}
