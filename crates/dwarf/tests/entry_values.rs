//! What a real frame answers for entry values (`binary::State` with
//! `callsite::EntryValues`, as `locus dwarf vars` makes them from call sites), and
//! `DW_OP_GNU_variable_value` among the variables in scope: as gdb answers them, and
//! never from anything else (memory now, registers now).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::binary::{
    evaluate_variable_in, MemoryBlock, Snapshot, Variable, VariableKind, VariableLocation,
};
use locus_dwarf::callsite::EntryValues;
use locus_dwarf::{encode, parse_text, Encoding};

fn variable(name: &str, die: u64, location: VariableLocation) -> Variable {
    Variable {
        name: name.into(),
        kind: VariableKind::Variable,
        function: "f".into(),
        die,
        type_name: "long".into(),
        byte_size: Some(8),
        base_type: None,
        location,
        encoding: Encoding::default(),
        frame_base: None,
        base_types: Vec::new(),
        unit_offset: 0x100,
    }
}

fn expression(text: &str) -> VariableLocation {
    let ops = parse_text(text, |_| None).unwrap();
    VariableLocation::Expression(encode(&ops, Encoding::default()).unwrap())
}

fn long(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().unwrap())
}

/// rdi (5) holds 0x1000 now; memory at 0x1000 holds 99 now. On entry (the caller's call
/// site) rdi was 3 and pointed to 42; the parameter at unit offset 0x2f6 was 7.
fn frame() -> (Snapshot, EntryValues) {
    let mut snapshot = Snapshot::default();
    snapshot
        .registers
        .insert(5, 0x1000u64.to_le_bytes().to_vec());
    snapshot.memory.push(MemoryBlock {
        space: 0,
        address: 0x1000,
        bytes: 99u64.to_le_bytes().to_vec(),
    });
    let mut entry = EntryValues::default();
    entry.registers.insert(5, 3u64.to_le_bytes().to_vec());
    entry.data.insert(5, 42u64.to_le_bytes().to_vec());
    entry
        .parameters
        .insert(0x100 + 0x2f6, 7u64.to_le_bytes().to_vec());
    (snapshot, entry)
}

fn evaluate(
    v: &Variable,
    scope: &[Variable],
    entry: &EntryValues,
    snapshot: &Snapshot,
) -> Result<u64, String> {
    let mut state = snapshot.state().with_variable(v);
    state.entry = Some(entry);
    evaluate_variable_in(v, scope, &mut state)
        .map(|e| long(e.bits.bytes()))
        .map_err(|e| e.to_string())
}

#[test]
fn entry_values_come_from_the_call_site_only() {
    let (snapshot, entry) = frame();
    let one = |text: &str| {
        evaluate(
            &variable("p", 0x40, expression(text)),
            &[],
            &entry,
            &snapshot,
        )
    };
    // A register's value on entry.
    assert_eq!(one("DW_OP_entry_value [55] DW_OP_stack_value"), Ok(3));
    // What it pointed to on entry: DW_AT_call_data_value, not the memory now (99).
    assert_eq!(
        one("DW_OP_entry_value [75 00 94 08] DW_OP_stack_value"),
        Ok(42)
    );
    assert_eq!(
        one("DW_OP_entry_value [75 00 06] DW_OP_stack_value"),
        Ok(42)
    );
    // gcc's IPA clones: the parameter the caller's DW_AT_call_parameter binds.
    assert_eq!(
        one("DW_OP_GNU_parameter_ref 0x2f6 DW_OP_stack_value"),
        Ok(7)
    );
    // Anything else gdb refuses too (here: rdi + 8 on entry would be read now).
    let e = one("DW_OP_entry_value [75 08] DW_OP_stack_value").unwrap_err();
    assert!(
        e.contains("gdb takes only a register's value or its pointee"),
        "{e}"
    );
    // A register the call site does not pass, a parameter it does not bind.
    let e = one("DW_OP_entry_value [54] DW_OP_stack_value").unwrap_err();
    assert!(e.contains("passes no value for it"), "{e}");
    let e = one("DW_OP_GNU_parameter_ref 0x300 DW_OP_stack_value").unwrap_err();
    assert!(e.contains("parameter DIE 0x400"), "{e}");
    // A refused call site refuses every entry value, saying why.
    let refused = EntryValues::refused("f can call itself through tail calls");
    let v = variable(
        "p",
        0x40,
        expression("DW_OP_entry_value [55] DW_OP_stack_value"),
    );
    let e = evaluate(&v, &[], &refused, &snapshot).unwrap_err();
    assert!(e.contains("f can call itself through tail calls"), "{e}");
}

#[test]
fn gnu_variable_value_is_the_value_of_a_variable_in_scope() {
    let (snapshot, entry) = frame();
    let n = variable(
        "n",
        0x40,
        VariableLocation::Const(5u64.to_le_bytes().to_vec()),
    );
    let m = variable("m", 0x48, expression("DW_OP_breg5 0"));
    let x = variable(
        "x",
        0x50,
        expression("DW_OP_GNU_variable_value 0x40 DW_OP_GNU_variable_value 0x48 DW_OP_plus DW_OP_stack_value"),
    );
    let scope = [n, m, x.clone()];
    assert_eq!(evaluate(&x, &scope, &entry, &snapshot), Ok(5 + 99));
    // Not in scope: not answered.
    let y = variable(
        "y",
        0x58,
        expression("DW_OP_GNU_variable_value 0x60 DW_OP_stack_value"),
    );
    let e = evaluate(&y, std::slice::from_ref(&y), &entry, &snapshot).unwrap_err();
    assert!(e.contains("DW_OP_GNU_variable_value"), "{e}");
    // A variable whose value is its own: refused after a bounded nesting, not a hang.
    let z = variable(
        "z",
        0x60,
        expression("DW_OP_GNU_variable_value 0x60 DW_OP_stack_value"),
    );
    let e = evaluate(&z, std::slice::from_ref(&z), &entry, &snapshot).unwrap_err();
    assert!(e.contains("nested"), "{e}");
}
