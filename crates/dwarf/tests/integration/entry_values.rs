//! What a real frame answers for entry values (`binary::State` with
//! `callsite::EntryValues`, as `locus dwarf vars` makes them from call sites), and
//! `DW_OP_GNU_variable_value` among the variables in scope: as gdb answers them, and
//! never from anything else (memory now, registers now).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use locus_dwarf::binary::{
    evaluate_variable_in, MemoryBlock, Snapshot, Variable, VariableKind, VariableLocation,
};
use locus_dwarf::callsite::EntryValues;
use locus_dwarf::{encode, parse_text, Encoding, Error};

fn variable(name: &str, die: u64, location: VariableLocation) -> Variable {
    Variable {
        name: name.into(),
        kind: VariableKind::Variable,
        function: "f".into(),
        die,
        type_name: "long".into(),
        byte_size: Some(8),
        base_type: None,
        pointee: None,
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
    evaluate_error(v, scope, entry, snapshot).map_err(|e| e.report().to_string())
}

/// [`evaluate`], the error as it is.
fn evaluate_error(
    v: &Variable,
    scope: &[Variable],
    entry: &EntryValues,
    snapshot: &Snapshot,
) -> Result<u64, Error> {
    let mut state = snapshot.state().with_variable(v);
    state.entry = Some(entry);
    evaluate_variable_in(v, scope, &mut state).map(|e| long(e.bits.bytes()))
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
    // A variable in scope whose evaluation fails: named, with its DIE offset; the
    // failure is the error's source, printed once in the chain.
    let bad = variable("bad", 0x68, expression("DW_OP_plus DW_OP_stack_value"));
    let w = variable(
        "w",
        0x70,
        expression("DW_OP_lit1 DW_OP_GNU_variable_value 0x68 DW_OP_plus DW_OP_stack_value"),
    );
    let scope = [bad, w.clone()];
    let e = evaluate_error(&w, &scope, &entry, &snapshot).unwrap_err();
    let layer = "op #1 DW_OP_GNU_variable_value: value of the variable `bad` (DIE at 0x68)";
    assert_eq!(e.to_string(), layer);
    let cause = std::error::Error::source(&e).expect("the variable's error");
    assert_eq!(cause.to_string(), "op #0 DW_OP_plus: stack underflow");
    assert_eq!(
        e.report().to_string(),
        format!("{layer}: op #0 DW_OP_plus: stack underflow")
    );
}

/// The file range of section `name` of a little-endian ELF64 file.
fn section(elf: &[u8], name: &str) -> Option<std::ops::Range<usize>> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(header(shstrndx) + 0x18);
    (0..shnum).find_map(|i| {
        let h = header(i);
        let at = strtab + u32::from_le_bytes(elf[h..h + 4].try_into().unwrap()) as usize;
        let end = at + name.len();
        (elf.get(at..end) == Some(name.as_bytes()) && elf.get(end) == Some(&0))
            .then(|| u64_at(h + 0x18)..u64_at(h + 0x18) + u64_at(h + 0x20))
    })
}

/// The return addresses of the call sites of an ELF file's DWARF (read with gimli).
fn return_pcs(elf: &[u8]) -> Vec<u64> {
    let load = |id: gimli::SectionId| -> Result<gimli::EndianSlice<'_, gimli::LittleEndian>, ()> {
        let bytes = section(elf, id.name()).map_or(&[][..], |r| &elf[r]);
        Ok(gimli::EndianSlice::new(bytes, gimli::LittleEndian))
    };
    let dwarf = gimli::Dwarf::load(load).unwrap();
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().unwrap() {
        let unit = dwarf.unit(header).unwrap();
        let mut entries = unit.entries();
        while let Some((_, e)) = entries.next_dfs().unwrap() {
            for at in [gimli::DW_AT_call_return_pc, gimli::DW_AT_low_pc] {
                let site = matches!(
                    e.tag(),
                    gimli::DW_TAG_call_site | gimli::DW_TAG_GNU_call_site
                );
                if let (true, Some(v)) = (site, e.attr_value(at).unwrap()) {
                    out.extend(dwarf.attr_address(&unit, v).unwrap());
                }
            }
        }
    }
    out
}

/// Call sites read from damaged DWARF: `fixtures/entry_values.c` built by gcc -O2 (DWARF 5
/// and 4: DW_TAG_call_site and DW_TAG_GNU_call_site, tail calls, a self-tail-calling pair),
/// then 1-4 bytes of its `.debug_info` changed at random, 200 times each; entry values are
/// computed for PCs in every function and every call site's return address. Nothing panics or runs away
/// (the tail-call searches are bounded), whatever the call sites and targets become.
#[test]
fn damaged_call_sites_never_panic() {
    let dir = std::env::temp_dir().join(format!("locus-entry-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/entry_values.c");
    for dwarf in ["-gdwarf-5", "-gdwarf-4"] {
        let exe = dir.join(format!("entry_values{dwarf}"));
        let out = std::process::Command::new("gcc")
            .args(["-O2", dwarf, "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .expect("gcc is needed (scripts/install-deps)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let data = std::fs::read(&exe).unwrap();
        let info = section(&data, ".debug_info").expect(".debug_info");
        let pcs: Vec<u64> = [
            "leaf",
            "relay",
            "twice",
            "ping",
            "pong",
            "main",
            "clone_me.constprop.0",
        ]
        .iter()
        .filter_map(|s| locus_dwarf::binary::symbol_address(&data, s).unwrap())
        .flat_map(|a| [a, a + 5, a + 0x14])
        .collect();
        let returns = return_pcs(&data);
        assert!(returns.len() >= 10, "{returns:?}");
        let (snapshot, _) = frame();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..200 {
            let mut bad = data.clone();
            if round > 0 {
                for _ in 0..1 + next() % 4 {
                    let at = info.start + (next() as usize) % (info.end - info.start);
                    bad[at] = next() as u8;
                }
            }
            let Ok(binary) = locus_dwarf::binary::Binary::parse(&bad) else {
                continue;
            };
            let Ok(sites) = binary.call_sites() else {
                continue;
            };
            let mut answered = 0;
            for &pc in &pcs {
                for &ret in pcs.iter().chain(&returns) {
                    let entry = sites.entry_values(pc, ret, snapshot.state());
                    answered += usize::from(entry.refused.is_none());
                }
            }
            // Undamaged: the direct calls of main give entry values.
            assert!(round > 0 || answered >= 3, "{dwarf}: {answered}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
