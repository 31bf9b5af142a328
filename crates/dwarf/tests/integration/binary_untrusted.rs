//! `locus_dwarf::binary` on untrusted object files: the inputs the `binary` fuzz target
//! (crates/dwarf/fuzz) found or that reading the code showed, each written here as the
//! smallest ELF file with the DWARF that shows it. Each must give an answer or an error, never
//! a panic, a stack overflow or a hang.

#![cfg(feature = "binary")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::ErrorDetail;
use std::time::{Duration, Instant};

use locus_dwarf::binary::{
    evaluate_variable, variables_at, Snapshot, Variable, VariableKind, VariableLocation,
    MAX_NESTED_EVALUATIONS,
};
use locus_dwarf::{Encoding, Error};

// ---------------------------------------------------------------------------------------
// A minimal ELF64 little-endian executable with .debug_abbrev and .debug_info
// ---------------------------------------------------------------------------------------

const DW_TAG_COMPILE_UNIT: u8 = 0x11;
const DW_TAG_SUBPROGRAM: u8 = 0x2e;
const DW_TAG_LEXICAL_BLOCK: u8 = 0x0b;
const DW_TAG_VARIABLE: u8 = 0x34;
const DW_TAG_BASE_TYPE: u8 = 0x24;

const DW_AT_NAME: u8 = 0x03;
const DW_AT_LOW_PC: u8 = 0x11;
const DW_AT_HIGH_PC: u8 = 0x12;
const DW_AT_LOCATION: u8 = 0x02;
const DW_AT_TYPE: u8 = 0x49;
const DW_AT_BYTE_SIZE: u8 = 0x0b;
const DW_AT_ABSTRACT_ORIGIN: u8 = 0x31;

const DW_FORM_ADDR: u8 = 0x01;
const DW_FORM_DATA1: u8 = 0x0b;
const DW_FORM_DATA8: u8 = 0x07;
const DW_FORM_STRING: u8 = 0x08;
const DW_FORM_REF4: u8 = 0x13;
const DW_FORM_EXPRLOC: u8 = 0x18;

/// An abbreviation: code, tag, children, (attribute, form) pairs (all below 0x80, so one
/// byte each in ULEB128).
type Abbrev = (u8, u8, bool, &'static [(u8, u8)]);

fn abbrevs(list: &[Abbrev]) -> Vec<u8> {
    let mut s = Vec::new();
    for &(code, tag, children, attrs) in list {
        s.extend([code, tag, u8::from(children)]);
        for &(at, form) in attrs {
            s.extend([at, form]);
        }
        s.extend([0, 0]);
    }
    s.push(0);
    s
}

/// A DWARF 4 compile unit (8-byte addresses) around `dies`, which start at unit offset 11.
fn unit(dies: &[u8]) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend((7 + dies.len() as u32).to_le_bytes());
    s.extend(4u16.to_le_bytes());
    s.extend(0u32.to_le_bytes());
    s.push(8);
    s.extend(dies);
    s
}

/// The offset of the first DIE within its unit.
const FIRST_DIE: u32 = 11;

/// An ELF64 x86-64 executable whose only contents are a `.text` without bytes (at 0x401000,
/// 0x1000 long) and the two DWARF sections.
fn elf(abbrev: &[u8], info: &[u8]) -> Vec<u8> {
    let shstrtab = b"\0.text\0.debug_abbrev\0.debug_info\0.shstrtab\0";
    let name = |n: &str| {
        let needle = format!("\0{n}\0");
        shstrtab
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .expect("section name") as u32
            + 1
    };
    let mut f = vec![0u8; 64];
    let data_at = f.len();
    f.extend(abbrev);
    let info_at = f.len();
    f.extend(info);
    let strtab_at = f.len();
    f.extend(shstrtab);
    f.resize(f.len().next_multiple_of(8), 0);
    let sh_at = f.len();
    // (name, type, flags, address, offset, size)
    let sections: [(u32, u32, u64, u64, usize, usize); 5] = [
        (0, 0, 0, 0, 0, 0),
        (name(".text"), 8, 6, 0x401000, data_at, 0x1000),
        (name(".debug_abbrev"), 1, 0, 0, data_at, abbrev.len()),
        (name(".debug_info"), 1, 0, 0, info_at, info.len()),
        (name(".shstrtab"), 3, 0, 0, strtab_at, shstrtab.len()),
    ];
    for (n, ty, flags, addr, off, size) in sections {
        f.extend(n.to_le_bytes());
        f.extend(ty.to_le_bytes());
        f.extend(flags.to_le_bytes());
        f.extend(addr.to_le_bytes());
        f.extend((off as u64).to_le_bytes());
        f.extend((size as u64).to_le_bytes());
        f.extend(0u32.to_le_bytes()); // link
        f.extend(0u32.to_le_bytes()); // info
        f.extend(1u64.to_le_bytes()); // alignment
        f.extend(0u64.to_le_bytes()); // entry size
    }
    let mut h = Vec::new();
    h.extend(b"\x7fELF");
    h.extend([2, 1, 1, 0]); // 64-bit, little-endian, version 1, System V
    h.extend([0; 8]);
    h.extend(2u16.to_le_bytes()); // ET_EXEC
    h.extend(62u16.to_le_bytes()); // EM_X86_64
    h.extend(1u32.to_le_bytes());
    h.extend(0x401000u64.to_le_bytes()); // entry
    h.extend(0u64.to_le_bytes()); // program headers: none
    h.extend((sh_at as u64).to_le_bytes());
    h.extend(0u32.to_le_bytes()); // flags
    h.extend(64u16.to_le_bytes()); // header size
    h.extend(56u16.to_le_bytes()); // program header size
    h.extend(0u16.to_le_bytes()); // program headers
    h.extend(64u16.to_le_bytes()); // section header size
    h.extend((sections.len() as u16).to_le_bytes());
    h.extend(4u16.to_le_bytes()); // .shstrtab's index
    f[..64].copy_from_slice(&h);
    f
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// The usual abbreviations: 1 compile unit, 2 subprogram (low_pc, high_pc as a size),
/// 3 variable (name, type, location), 4 base type.
const UNIT: Abbrev = (
    1,
    DW_TAG_COMPILE_UNIT,
    true,
    &[(DW_AT_NAME, DW_FORM_STRING)],
);
const SUBPROGRAM: Abbrev = (
    2,
    DW_TAG_SUBPROGRAM,
    true,
    &[
        (DW_AT_NAME, DW_FORM_STRING),
        (DW_AT_LOW_PC, DW_FORM_ADDR),
        (DW_AT_HIGH_PC, DW_FORM_DATA8),
    ],
);
const VARIABLE: Abbrev = (
    3,
    DW_TAG_VARIABLE,
    false,
    &[
        (DW_AT_NAME, DW_FORM_STRING),
        (DW_AT_TYPE, DW_FORM_REF4),
        (DW_AT_LOCATION, DW_FORM_EXPRLOC),
    ],
);
const BASE_TYPE: Abbrev = (
    4,
    DW_TAG_BASE_TYPE,
    false,
    &[
        (DW_AT_NAME, DW_FORM_STRING),
        (DW_AT_BYTE_SIZE, DW_FORM_DATA1),
    ],
);

/// A subprogram DIE: `name`, from `low` for `size` bytes.
fn subprogram(name: &str, low: u64, size: u64) -> Vec<u8> {
    let mut d = vec![SUBPROGRAM.0];
    d.extend(cstr(name));
    d.extend(low.to_le_bytes());
    d.extend(size.to_le_bytes());
    d
}

/// A variable DIE whose value is 31 (`DW_OP_lit31 DW_OP_stack_value`), of the type at unit
/// offset `ty`.
fn variable(name: &str, ty: u32) -> Vec<u8> {
    let mut d = vec![VARIABLE.0];
    d.extend(cstr(name));
    d.extend(ty.to_le_bytes());
    d.extend([2, 0x30 + 31, 0x9f]);
    d
}

/// A base type DIE: `int`, 4 bytes.
fn base_type() -> Vec<u8> {
    let mut d = vec![BASE_TYPE.0];
    d.extend(cstr("int"));
    d.push(4);
    d
}

// ---------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------

/// Found by the fuzzer: a subprogram whose `DW_AT_high_pc` size runs past the top of the
/// address space. gimli's `die_ranges` added it to `DW_AT_low_pc` unchecked ("attempt to add
/// with overflow" in a debug build); the range now ends at the top.
#[test]
fn high_pc_size_past_the_top_of_the_address_space() {
    let low = 0xffff_ffff_ffff_f000;
    let mut dies = vec![UNIT.0];
    dies.extend(cstr("cu"));
    let int_at = FIRST_DIE + dies.len() as u32;
    dies.extend(base_type());
    dies.extend(subprogram("f", low, 0x2000));
    dies.extend(variable("x", int_at));
    dies.extend([0, 0]);
    let file = elf(
        &abbrevs(&[UNIT, SUBPROGRAM, VARIABLE, BASE_TYPE]),
        &unit(&dies),
    );

    let vars = variables_at(&file, low + 0x800, 0).expect("reads");
    let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["x"]);
    assert_eq!(vars[0].function, "f");
    let e = evaluate_variable(&vars[0], &Snapshot::default()).expect("evaluates");
    assert_eq!(e.bits.bytes(), 31u32.to_le_bytes());
    // Below the function: nothing in scope.
    assert!(variables_at(&file, low - 1, 0).expect("reads").is_empty());
}

/// A variable whose `DW_AT_abstract_origin` is itself: following origins for its name, type
/// or constant value never ended (a stack overflow).
#[test]
fn abstract_origin_cycle() {
    const ORIGIN: Abbrev = (
        5,
        DW_TAG_VARIABLE,
        false,
        &[
            (DW_AT_ABSTRACT_ORIGIN, DW_FORM_REF4),
            (DW_AT_LOCATION, DW_FORM_EXPRLOC),
        ],
    );
    let mut dies = vec![UNIT.0];
    dies.extend(cstr("cu"));
    dies.extend(subprogram("f", 0x401000, 0x100));
    let me = FIRST_DIE + dies.len() as u32;
    dies.push(ORIGIN.0);
    dies.extend(me.to_le_bytes());
    dies.extend([2, 0x30 + 31, 0x9f]);
    dies.extend([0, 0]);
    let file = elf(&abbrevs(&[UNIT, SUBPROGRAM, ORIGIN]), &unit(&dies));
    // An answer or an error; not a stack overflow.
    let _ = variables_at(&file, 0x401010, 0);
}

/// Lexical blocks nested `depth` deep around the PC, a variable in the innermost.
fn nested_blocks(depth: usize) -> Vec<u8> {
    const BLOCK: Abbrev = (
        6,
        DW_TAG_LEXICAL_BLOCK,
        true,
        &[(DW_AT_LOW_PC, DW_FORM_ADDR), (DW_AT_HIGH_PC, DW_FORM_DATA8)],
    );
    let mut dies = vec![UNIT.0];
    dies.extend(cstr("cu"));
    let int_at = FIRST_DIE + dies.len() as u32;
    dies.extend(base_type());
    dies.extend(subprogram("f", 0x401000, 0x100));
    for _ in 0..depth {
        dies.push(BLOCK.0);
        dies.extend(0x401000u64.to_le_bytes());
        dies.extend(0x100u64.to_le_bytes());
    }
    dies.extend(variable("x", int_at));
    dies.extend(vec![0; depth + 2]);
    elf(
        &abbrevs(&[UNIT, SUBPROGRAM, VARIABLE, BASE_TYPE, BLOCK]),
        &unit(&dies),
    )
}

/// Scopes nested 100,000 deep (1.7 MB of DWARF): each level was a stack frame, and the
/// stack overflowed. Past 256 levels they are now an error.
#[test]
fn deeply_nested_scopes() {
    for depth in [10, 250] {
        let vars = variables_at(&nested_blocks(depth), 0x401010, 0).expect("reads");
        assert_eq!(vars.len(), 1, "depth {depth}");
    }
    for depth in [300, 100_000] {
        match variables_at(&nested_blocks(depth), 0x401010, 0)
            .map_err(locus_dwarf::Error::into_detail)
        {
            Err(ErrorDetail::Dwarf { what }) => assert!(what.contains("nested"), "{what}"),
            other => panic!("depth {depth}: {other:?}"),
        }
    }
}

fn uleb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// `DW_OP_lit0`, then `body` and `DW_OP_plus_uconst 1` while the count is below `n`: about
/// `5 n` steps of the evaluator (its limit is 100,000 per evaluation).
fn counting_loop(body: &[u8], n: u64) -> Vec<u8> {
    let mut e = vec![0x30];
    let top = e.len();
    e.extend(body);
    e.extend([0x23, 1, 0x12, 0x10]);
    uleb(n, &mut e);
    e.push(0x2d); // DW_OP_lt
    let back = top as i64 - (e.len() + 3) as i64;
    e.push(0x28); // DW_OP_bra
    e.extend((back as i16).to_le_bytes());
    e
}

fn long_variable(location: Vec<u8>, frame_base: Option<Vec<u8>>) -> Variable {
    Variable {
        name: "x".into(),
        kind: VariableKind::Variable,
        function: "f".into(),
        die: 0,
        type_name: "long".into(),
        byte_size: Some(8),
        base_type: None,
        pointee: None,
        location: VariableLocation::Expression(location),
        encoding: Encoding::default(),
        frame_base,
        base_types: Vec::new(),
        unit_offset: 0,
    }
}

/// Evaluates `v` in a thread and fails if it takes a minute (it is left running then).
fn evaluate_in_time(v: Variable, snapshot: Snapshot) -> (Result<Vec<u8>, Error>, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        let r = evaluate_variable(&v, &snapshot).map(|e| e.bits.bytes().to_vec());
        let _ = tx.send((r, start.elapsed()));
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the evaluation did not end within a minute")
}

/// Found by reading `run`: every frame base and entry value is a nested evaluation with
/// its own step limit, so an expression that asks for one in a loop did up to 100,000 times
/// 100,000 steps (20 s in a release build for 40 bytes; nesting multiplied again). One
/// evaluation now starts at most `MAX_NESTED_EVALUATIONS` nested ones.
#[test]
fn nested_evaluations_in_a_loop_are_bounded() {
    // An entry value whose expression counts to 19,000, asked for 14,000 times.
    let inner = counting_loop(&[], 19_000);
    let mut body = vec![0xa3]; // DW_OP_entry_value
    uleb(inner.len() as u64, &mut body);
    body.extend(&inner);
    body.push(0x13); // DW_OP_drop
    let mut outer = counting_loop(&body, 14_000);
    outer.push(0x9f); // DW_OP_stack_value
    let (r, took) = evaluate_in_time(long_variable(outer, None), Snapshot::default());
    match r.map_err(locus_dwarf::Error::into_detail) {
        Err(e @ ErrorDetail::Unanswered { .. }) => {
            assert!(e.to_string().contains("nested evaluations"), "{e}")
        }
        other => panic!("{other:?} after {took:?}"),
    }

    // A frame base that counts to 19,000, asked for by DW_OP_fbreg 14,000 times.
    let frame_base = counting_loop(&[], 19_000);
    let mut outer = counting_loop(&[0x91, 0, 0x13], 14_000); // DW_OP_fbreg 0, DW_OP_drop
    outer.push(0x9f);
    let (r, took) = evaluate_in_time(long_variable(outer, Some(frame_base)), Snapshot::default());
    match r.map_err(locus_dwarf::Error::into_detail) {
        Err(e @ ErrorDetail::Unanswered { .. }) => {
            assert!(e.to_string().contains("nested evaluations"), "{e}")
        }
        other => panic!("{other:?} after {took:?}"),
    }

    // As many nested evaluations as allowed still answer.
    let inner = counting_loop(&[], 10);
    let mut body = vec![0xa3];
    uleb(inner.len() as u64, &mut body);
    body.extend(&inner);
    body.push(0x13);
    let mut outer = counting_loop(&body, u64::from(MAX_NESTED_EVALUATIONS));
    outer.push(0x9f);
    let (r, _) = evaluate_in_time(long_variable(outer, None), Snapshot::default());
    assert_eq!(
        r.expect("evaluates"),
        u64::from(MAX_NESTED_EVALUATIONS).to_le_bytes()
    );
}

/// `Variable::number`: a value of each base type encoding as gdb 13 prints it
/// (`print`/`info locals` on C variables of those types).
#[test]
fn variable_numbers_as_gdb_prints_them() {
    use locus_dwarf::access::Bits;
    use locus_dwarf::binary::BaseType;
    let of = |encoding: u8, bytes: &[u8]| {
        let mut v = long_variable(Vec::new(), None);
        v.byte_size = Some(bytes.len() as u64);
        v.base_type = Some(BaseType {
            offset: 0x2a,
            encoding,
            byte_size: bytes.len() as u64,
        });
        v.number(&Bits::from_bytes(bytes))
    };
    let cases: &[(u8, &[u8], &str)] = &[
        (0x05, &(-5i32).to_le_bytes(), "-5"),
        (0x05, &i64::MIN.to_le_bytes(), "-9223372036854775808"),
        (0x07, &u64::MAX.to_le_bytes(), "18446744073709551615"),
        (0x07, &7007u16.to_le_bytes(), "7007"),
        (0x04, &18.75f64.to_le_bytes(), "18.75"),
        (0x04, &0.1f32.to_le_bytes(), "0.100000001"),
        (0x02, &[1], "true"),
        (0x02, &[0], "false"),
        (0x02, &[2], "2"),
        (0x06, b"A", "65 'A'"),
        (0x06, &[0xff], "-1 '\\377'"),
        (0x08, &[0xff], "255 '\\377'"),
        (0x06, b"\n", "10 '\\n'"),
        (0x06, &[0], "0 '\\000'"),
        (0x06, b"'", "39 '\\''"),
    ];
    for &(encoding, bytes, printed) in cases {
        assert_eq!(of(encoding, bytes).as_deref(), Some(printed), "{bytes:?}");
    }
    // Not printed as a number: 16-byte long double, UTF characters, a size
    // that differs from the bits read, undefined bits, no base type.
    assert_eq!(of(0x04, &[0; 16]), None);
    assert_eq!(of(0x10, &[0x41, 0]), None);
    let mut v = long_variable(Vec::new(), None);
    v.base_type = Some(BaseType {
        offset: 0x2a,
        encoding: 0x05,
        byte_size: 8,
    });
    assert_eq!(v.number(&Bits::from_bytes(&[1, 0, 0, 0])), None);
    assert_eq!(v.number(&Bits::undefined(64).unwrap()), None);
    assert_eq!(
        v.number(&Bits::from_bytes(&5i64.to_le_bytes())).as_deref(),
        Some("5")
    );
    v.base_type = None;
    assert_eq!(v.number(&Bits::from_bytes(&5i64.to_le_bytes())), None);
}

/// `Binary::object_at` with the DIE offsets an implicit pointer may carry: the object (a
/// `DW_TAG_dwarf_procedure`, as gcc names for a pointer to a string literal) read at byte
/// offsets as `*p` reads it; a procedure that is an implicit pointer to itself (read once,
/// not followed); one without a location (undefined); and offsets that are no object DIE
/// (outside the unit, its header, inside a DIE, a subprogram), each an error.
#[test]
fn implicit_pointer_targets_by_offset() {
    use locus_dwarf::binary::{evaluate_part_in, Binary};
    use locus_dwarf::Storage;
    const DW_TAG_POINTER_TYPE: u8 = 0x0f;
    const DW_TAG_DWARF_PROCEDURE: u8 = 0x36;
    const POINTER: Abbrev = (
        5,
        DW_TAG_POINTER_TYPE,
        false,
        &[(DW_AT_BYTE_SIZE, DW_FORM_DATA1), (DW_AT_TYPE, DW_FORM_REF4)],
    );
    const PROCEDURE: Abbrev = (
        6,
        DW_TAG_DWARF_PROCEDURE,
        false,
        &[(DW_AT_LOCATION, DW_FORM_EXPRLOC)],
    );
    const EMPTY_PROCEDURE: Abbrev = (7, DW_TAG_DWARF_PROCEDURE, false, &[]);
    // DW_OP_implicit_pointer to the DIE at `die` (4-byte offset: DWARF 4, 32-bit), +`by`.
    let implicit_pointer = |die: u32, by: u8| {
        let mut e = vec![0xa0];
        e.extend(die.to_le_bytes());
        e.push(by);
        e
    };

    let mut dies = vec![UNIT.0];
    dies.extend(cstr("cu"));
    let int_at = FIRST_DIE + dies.len() as u32;
    dies.extend(base_type());
    let pointer_at = FIRST_DIE + dies.len() as u32;
    dies.extend([POINTER.0, 8]);
    dies.extend(int_at.to_le_bytes());
    let subprogram_at = FIRST_DIE + dies.len() as u32;
    dies.extend(subprogram("f", 0x401000, 0x100));
    // After the subprogram: its variable (code, "p", type, length, 6-byte expression) and
    // the end of its children.
    let literal_at = FIRST_DIE + dies.len() as u32 + 1 + 2 + 4 + 1 + 6 + 1;
    dies.push(VARIABLE.0);
    dies.extend(cstr("p"));
    dies.extend(pointer_at.to_le_bytes());
    let expr = implicit_pointer(literal_at, 1);
    dies.push(expr.len() as u8);
    dies.extend(&expr);
    dies.push(0);
    assert_eq!(FIRST_DIE + dies.len() as u32, literal_at);
    dies.extend([PROCEDURE.0, 5, 0x9e, 3]); // DW_OP_implicit_value 3 "abc"
    dies.extend(b"abc");
    let itself_at = FIRST_DIE + dies.len() as u32;
    let expr = implicit_pointer(itself_at, 0);
    dies.extend([PROCEDURE.0, expr.len() as u8]);
    dies.extend(&expr);
    let empty_at = FIRST_DIE + dies.len() as u32;
    dies.push(EMPTY_PROCEDURE.0);
    dies.push(0);
    let info = unit(&dies);
    let file = elf(
        &abbrevs(&[
            UNIT,
            SUBPROGRAM,
            VARIABLE,
            BASE_TYPE,
            POINTER,
            PROCEDURE,
            EMPTY_PROCEDURE,
        ]),
        &info,
    );
    let binary = Binary::parse(&file).expect("reads");
    let pc = 0x401010;

    // The pointer's pointee is its type's target: 4 bytes.
    let vars = binary.variables_at(pc).expect("reads");
    let [p] = vars.as_slice() else {
        panic!("{vars:?}")
    };
    assert_eq!(p.pointee.and_then(|t| t.byte_size), Some(4));

    let snapshot = Snapshot::default();
    let part = |die: u32, at: (i64, u64)| {
        let object = binary.object_at(u64::from(die), pc).expect("an object");
        evaluate_part_in(&object, &[], at.0, at.1, &mut snapshot.state())
    };
    let literal = part(literal_at, (1, 1)).expect("reads");
    assert_eq!(literal.bits.bytes(), b"b");
    // Past the end of the literal: undefined; outside it: an error.
    let tail = part(literal_at, (2, 4)).expect("reads");
    assert_eq!(tail.bits.byte(0), Some(b'c'));
    assert!(!tail.bits.is_fully_defined());
    for outside in [3, -1, i64::MAX, i64::MIN] {
        let e = part(literal_at, (outside, 1)).expect_err("outside");
        assert!(e.to_string().contains("outside its storage"), "{e}");
    }
    let itself = part(itself_at, (0, 4)).expect("reads");
    assert!(!itself.bits.is_fully_defined());
    assert!(matches!(
        itself.location.as_ref().map(|l| &l.places[0].storage),
        Some(Storage::ImplicitPointer { die, .. }) if *die == u64::from(itself_at)
    ));
    let object = binary
        .object_at(u64::from(empty_at), pc)
        .expect("an object");
    assert_eq!(object.location, VariableLocation::None);
    let empty = part(empty_at, (0, 4)).expect("reads");
    assert_eq!(empty.bits.bit_len(), 32);
    assert!(!empty.bits.is_fully_defined());

    let len = info.len() as u64;
    for die in [0, 5, u64::from(literal_at) + 1, len, len + 100, u64::MAX] {
        let e = binary.object_at(die, pc).expect_err("no DIE");
        assert!(e.to_string().contains("no DIE at"), "{die:#x}: {e}");
    }
    let e = binary
        .object_at(u64::from(subprogram_at), pc)
        .expect_err("not an object");
    assert!(e.to_string().contains("DW_TAG_subprogram"), "{e}");
}
