//! `locus dwarf eval` / `disasm` / `vars`, run as a user would: the spec's worked examples
//! (`shared/spec/001_dwarf_location_descriptions_on_stack.md`) with a context file, the
//! error line on bad input, and `vars` on a binary clang-19 builds at test time.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{TempDir, LOCUS};
use locus_stackmap::regs::register_number;
use locus_stackmap::Arch;
use serde_json::{json, Value};

/// The spec's registers (AMDGPU DWARF numbers) and some memory:
/// SGPR0 = 0x1000 (the frame / descriptor address), SGPR3 = 0xdeadbeef,
/// VGPR0/VGPR1 = 64 lanes of 4 bytes, lane i holding i * 0x100 (+1 in VGPR1),
/// memory 0x1000: 42 (u64), 0x1010: 11 22 33 44, 0xbeef: aa bb, space 1 at 0x1010: 55 66 77 88.
fn context(dir: &TempDir) -> PathBuf {
    let vgpr = |add: u32| -> String {
        (0..64u32)
            .flat_map(|i| (i * 0x100 + add).to_le_bytes())
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let ctx = json!({
        "address_size": 8,
        "registers": {
            "SGPR0": {"number": 32, "value": "0010000000000000"},
            "SGPR3": {"number": 35, "value": "efbeadde"},
            "VGPR0": {"number": 2560, "value": vgpr(0)},
            "VGPR1": {"number": 2561, "value": vgpr(1)},
        },
        "memory": [
            {"space": 0, "address": 0x1000, "bytes": "2a000000000000000000000000000000112233440000"},
            {"space": 0, "address": "0xbeef", "bytes": "aabb"},
            {"space": 1, "address": 0x1010, "bytes": "55667788"},
        ],
        "lane": 3,
    });
    let path = dir.path("ctx.json");
    std::fs::write(&path, ctx.to_string()).unwrap();
    path
}

fn locus(args: &[&str]) -> Output {
    std::process::Command::new(LOCUS)
        .args(args)
        .output()
        .expect("cannot run locus")
}

/// Runs `locus dwarf eval --json --context CTX ARGS...` on the test context; returns the
/// JSON on stdout's last line.
fn eval(args: &[&str]) -> Value {
    let dir = TempDir::new("dwarf-eval");
    eval_json_in(&context(&dir), args)
}

/// `locus dwarf eval --json --context CTX ARGS...`, which must succeed: the JSON on
/// stdout's last line.
fn eval_json_in(ctx: &Path, args: &[&str]) -> Value {
    let (code, stdout, stderr) = eval_in(ctx, args);
    assert_eq!(
        code,
        Some(0),
        "locus dwarf eval {args:?} failed: {stderr}{stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Runs `locus dwarf ARGS...` which must fail with one error line; returns it.
fn eval_error(args: &[&str]) -> String {
    let dir = TempDir::new("dwarf-err");
    let ctx = context(&dir);
    let mut all = vec!["dwarf", "eval", "--context", ctx.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = locus(&all);
    assert_eq!(out.status.code(), Some(1), "locus {all:?} should fail");
    assert!(out.stdout.is_empty(), "no output on error");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one error line: {stderr}");
    assert!(stderr.starts_with("locus: dwarf: "), "{stderr}");
    stderr.trim_end().to_string()
}

fn mem(space: u64, address: u64) -> Value {
    json!({"storage": "memory", "space": space, "bit_offset": address * 8, "address": format!("{address:#x}")})
}

fn reg(r: u64, bit_offset: u64) -> Value {
    json!({"storage": "register", "register": r, "bit_offset": bit_offset})
}

fn part(bit_size: u64, location: Value) -> Value {
    json!({"bit_size": bit_size, "location": [location]})
}

fn composite(parts: Vec<Value>) -> Value {
    json!([{"storage": "composite", "bit_offset": 0, "parts": parts}])
}

#[test]
fn dynamic_array_size() {
    let r = eval(&[
        "--result",
        "value",
        "DW_OP_regval_type SGPR0 Generic DW_OP_deref",
    ]);
    assert_eq!(
        r,
        json!({"result": "value", "type": "generic", "value": "2a00000000000000", "number": "42"})
    );
}

#[test]
fn variable_in_register() {
    let r = eval(&["--read", "4", "DW_OP_regx SGPR3"]);
    assert_eq!(
        r,
        json!({"result": "location", "location": [reg(35, 0)], "read": "efbeadde"})
    );
    // The count in hex too, as the other address options take it.
    assert_eq!(eval(&["--read", "0x4", "DW_OP_regx SGPR3"]), r);
}

#[test]
fn variable_in_memory() {
    let r = eval(&[
        "--result",
        "location",
        "--read",
        "4",
        "DW_OP_regval_type SGPR0 Generic; DW_OP_plus_uconst 0x10",
    ]);
    assert_eq!(
        r,
        json!({"result": "location", "location": [mem(0, 0x1010)], "read": "11223344"})
    );
}

#[test]
fn composite_across_register_undefined_memory() {
    let r = eval(&[
        "--read",
        "8",
        "DW_OP_regx SGPR3\nDW_OP_piece 4\nDW_OP_piece 2\nDW_OP_bregx SGPR0 0x10\nDW_OP_piece 2",
    ]);
    let undefined = json!({"storage": "undefined", "bit_offset": 0});
    assert_eq!(
        r["location"],
        composite(vec![
            part(32, reg(35, 0)),
            part(16, undefined),
            part(16, mem(0, 0x1010))
        ])
    );
    // The undefined part reads as undefined, not as invented bytes.
    assert_eq!(r["read"], "efbeadde????1122");
}

#[test]
fn spilled_to_a_vector_register_lane() {
    let r = eval(&[
        "--read",
        "4",
        "DW_OP_regx",
        "VGPR0",
        "DW_OP_offset_uconst",
        "20",
    ]);
    assert_eq!(r["location"], json!([reg(2560, 160)]));
    assert_eq!(r["read"], "00050000");
}

const MULTI_LANE: &str = "DW_OP_regx VGPR0 DW_OP_push_lane DW_OP_uconst 4 DW_OP_mul DW_OP_offset \
    DW_OP_piece 4 DW_OP_regx VGPR1 DW_OP_push_lane DW_OP_uconst 4 DW_OP_mul DW_OP_offset DW_OP_piece 4";

#[test]
fn spread_across_vector_registers_with_push_lane() {
    let r = eval(&["--read", "8", MULTI_LANE]);
    assert_eq!(
        r["location"],
        composite(vec![part(32, reg(2560, 96)), part(32, reg(2561, 96))])
    );
    assert_eq!(r["read"], "0003000001030000");
}

#[test]
fn mixed_composite_with_piece_end() {
    let r = eval(&[
        "--read",
        "8",
        "DW_OP_regx VGPR0; DW_OP_push_lane; DW_OP_uconst 4; DW_OP_mul; DW_OP_offset; DW_OP_piece 4;
         DW_OP_addr 0xbeef; DW_OP_piece 2; DW_OP_uconst 0xf00d; DW_OP_stack_value; DW_OP_piece 2;
         DW_OP_piece_end",
    ]);
    let implicit = json!({"storage": "implicit", "bytes": "0df0000000000000", "bit_offset": 0});
    assert_eq!(
        r["location"],
        composite(vec![
            part(32, reg(2560, 96)),
            part(16, mem(0, 0xbeef)),
            part(16, implicit)
        ])
    );
    assert_eq!(r["read"], "00030000aabb0df0");
}

#[test]
fn address_spaces() {
    let r = eval(&[
        "--read",
        "4",
        "DW_OP_regval_type SGPR0 Generic DW_OP_uconst 1 DW_OP_form_aspace_address DW_OP_offset_uconst 0x10",
    ]);
    assert_eq!(r["location"], json!([mem(1, 0x1010)]));
    assert_eq!(r["read"], "55667788");
}

#[test]
fn bit_offsets() {
    let r = eval(&[
        "--read",
        "1",
        "DW_OP_regx SGPR3 DW_OP_uconst 20 DW_OP_bit_offset",
    ]);
    assert_eq!(r["location"], json!([reg(35, 20)]));
    // Bits 20..28 of 0xdeadbeef.
    assert_eq!(r["read"], format!("{:02x}", (0xdead_beefu32 >> 20) & 0xff));
}

#[test]
fn hex_in_both_encodings_and_disasm() {
    let user = eval(&["--read", "4", "--hex", "908014e90514"]);
    let legacy = eval(&["--read", "4", "--encoding", "legacy", "--hex", "908014e414"]);
    assert_eq!(user, legacy);
    assert_eq!(user["location"], json!([reg(2560, 160)]));
    let out = locus(&["dwarf", "disasm", "908014e90514"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "DW_OP_regx 2560\nDW_OP_offset_uconst 20\n"
    );
    let out = locus(&["dwarf", "disasm", "--encoding", "legacy", "908014e414"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "DW_OP_regx 2560\nDW_OP_offset_uconst 20\n"
    );
}

#[test]
fn value_results() {
    let r = eval(&["DW_OP_lit7 DW_OP_lit5 DW_OP_minus"]);
    assert_eq!(
        r,
        json!({"result": "value", "type": "generic", "value": "0200000000000000", "number": "2"})
    );
    // A stack value is a location (implicit storage) under the extension.
    let r = eval(&["DW_OP_lit7 DW_OP_stack_value"]);
    assert_eq!(
        r["location"],
        json!([{"storage": "implicit", "bytes": "0700000000000000", "bit_offset": 0}])
    );
}

/// The normative text's overlay: a register over bytes 1..3 of memory at 0x1010
/// (11 22 33 44 00 00), read and written through; and `DW_OP_LLVM_nop`.
#[test]
fn overlay_and_llvm_nop() {
    let r = eval(&[
        "--read",
        "6",
        "DW_OP_addr 0x1010; DW_OP_regx SGPR3; DW_OP_lit1; DW_OP_lit2; DW_OP_LLVM_overlay",
    ]);
    assert_eq!(
        r["location"],
        composite(vec![
            part(8, mem(0, 0x1010)),
            part(16, reg(35, 0)),
            part(u64::MAX - 24, mem(0, 0x1013)),
        ])
    );
    assert_eq!(r["read"], "11efbe440000");
    let r = eval(&[
        "--read",
        "2",
        "DW_OP_implicit_value [aabb]; DW_OP_regx SGPR3; DW_OP_lit4; DW_OP_lit4; DW_OP_bit_overlay",
    ]);
    assert_eq!(r["read"], "fabb");
    let e = eval_error(&[
        "DW_OP_implicit_value [aabb]; DW_OP_regx SGPR3; DW_OP_lit1; DW_OP_lit2; DW_OP_overlay",
    ]);
    assert!(
        e.starts_with("locus: dwarf: op #4 DW_OP_overlay: ill-formed overlay"),
        "{e}"
    );
    let out = locus(&["dwarf", "disasm", "e90130e901"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "DW_OP_LLVM_nop\nDW_OP_lit0\nDW_OP_LLVM_nop\n"
    );
}

#[test]
fn errors_name_the_operation() {
    let e = eval_error(&["DW_OP_lit1 DW_OP_plus"]);
    assert_eq!(e, "locus: dwarf: op #1 DW_OP_plus: stack underflow");
    let e = eval_error(&["DW_OP_skip -3"]);
    assert!(
        e.starts_with("locus: dwarf: op #0 DW_OP_skip: step limit"),
        "{e}"
    );
    let e = eval_error(&["DW_OP_lit0 DW_OP_deref"]);
    assert!(
        e.starts_with("locus: dwarf: op #1 DW_OP_deref: memory 0x0"),
        "{e}"
    );
    let e = eval_error(&["DW_OP_regx NOSUCH"]);
    assert!(e.contains("NOSUCH"), "{e}");
    let e = eval_error(&["--hex", "ff"]);
    assert!(e.contains("unknown opcode 0xff"), "{e}");
    let e = eval_error(&["--hex", "0c0102"]);
    assert!(e.contains("DW_OP_const4u"), "{e}");
    let e = eval_error(&["--hex", "zz"]);
    assert!(e.contains("hex"), "{e}");
    let e = eval_error(&["--result", "value", "DW_OP_regx SGPR3"]);
    assert!(
        e.starts_with("locus: dwarf: op #1 end of expression"),
        "{e}"
    );
    let out = locus(&["dwarf", "disasm", "e9ff01"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("locus: dwarf: "));
}

#[test]
fn trace_draws_each_step() {
    let dir = TempDir::new("dwarf-trace");
    let ctx = context(&dir);
    let out = locus(&[
        "dwarf",
        "eval",
        "--context",
        ctx.to_str().unwrap(),
        "--trace",
        "--json",
        MULTI_LANE,
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let steps: Vec<&str> = stdout.lines().filter(|l| l.starts_with("op #")).collect();
    assert_eq!(steps.len(), 12, "{stdout}");
    assert!(steps[1].contains("DW_OP_push_lane"), "{stdout}");
    assert!(stdout.contains("value generic 0x3"), "{stdout}");
    assert!(stdout.contains("register 2560 +12 bytes"), "{stdout}");
    assert!(
        stdout.contains(
            "composite { 32 bits: register 2560 +12 bytes | 32 bits: register 2561 +12 bytes }"
        ),
        "{stdout}"
    );
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["result"], "location");
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../dwarf/fixtures")
        .join(name)
}

/// `locus dwarf vars` on a clang-19 -O2 binary: the parameters and locals of the function
/// containing the PC, each with a location expression from its location list.
#[test]
fn vars_lists_the_variables_in_scope() {
    let dir = TempDir::new("dwarf-vars");
    let exe = dir.path("pieces");
    let src = fixture("pieces.c");
    compile("clang-19", &["-g", "-O2"], &[&src], &exe);
    // The PC of the call to `sink` inside `split`: its address from the symbol table.
    let nm = std::process::Command::new("nm").arg(&exe).output().unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    let split = nm
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let (a, _, n) = (f.next()?, f.next()?, f.next()?);
            (n == "split").then(|| u64::from_str_radix(a, 16).ok())?
        })
        .expect("no symbol split");
    // One byte past the entry: the parameters' first location-list entries.
    let pc = format!("{:#x}", split + 1);
    let doc = locus_json(&["dwarf", "vars", exe.to_str().unwrap(), "--pc", &pc]);
    // The same PC named by symbol (nm is the independent reader of the symbol table).
    let by_symbol = locus_json(&["dwarf", "vars", exe.to_str().unwrap(), "--pc", "split+1"]);
    assert_eq!(by_symbol, doc);
    let vars = doc["variables"].as_array().unwrap();
    let names: Vec<&str> = vars.iter().filter_map(|v| v["name"].as_str()).collect();
    assert!(names.contains(&"a") && names.contains(&"b"), "{doc}");
    for v in vars.iter().filter(|v| v["kind"] == "parameter") {
        assert_eq!(v["function"], "split");
        // At the entry, the parameters are in their argument registers (rdi = 5, rsi = 4).
        let e = v["expression"].as_str().unwrap_or_default();
        assert!(e.starts_with("DW_OP_reg"), "{doc}");
    }
}

fn gdb_registers(text: &str) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(name), Some(value)) = (f.next(), f.next()) else {
            continue;
        };
        // The general-purpose registers (and rip), by their x86-64 DWARF numbers.
        if let Some(n) = register_number(Arch::X86_64, name) {
            let v = u64::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
            let hex: String = v.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect();
            out.insert(name.to_string(), json!({"number": n, "value": hex}));
        }
    }
    out
}

/// gdb's output for `commands` (each an `-ex`) run in batch mode on `exe`.
fn run_gdb(exe: &Path, commands: &[&str]) -> String {
    let mut args: Vec<&str> = vec!["-batch", "-nx"];
    for c in commands {
        args.extend(["-ex", c]);
    }
    let out = std::process::Command::new("gdb")
        .args(&args)
        .arg(exe)
        .output()
        .unwrap_or_else(|e| panic!("gdb is needed (scripts/install-deps): {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The number gdb printed (`$1 = N`) after `echo @@NAME`.
fn gdb_number(gdb: &str, name: &str) -> i64 {
    between(gdb, &format!("@@{name}\n"), "@@")
        .split(" = ")
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("gdb printed no number for {name} ({e}):\n{gdb}"))
}

/// Up to 8 bytes written as little-endian hex, as a number.
fn le_hex(hex: &str) -> u64 {
    let mut b = [0u8; 8];
    for (i, slot) in b.iter_mut().enumerate().take(hex.len() / 2) {
        *slot = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    u64::from_le_bytes(b)
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `locus dwarf vars EXE --pc PC [extra...] --snapshot` with `snap` written next to it.
fn vars_with_snapshot(dir: &TempDir, exe: &Path, pc: u64, extra: &[&str], snap: &Value) -> Value {
    let snap_path = dir.path("snap.json");
    std::fs::write(&snap_path, snap.to_string()).unwrap();
    let pc = format!("{pc:#x}");
    let mut args = vec![
        "dwarf",
        "vars",
        "--json",
        exe.to_str().unwrap(),
        "--pc",
        &pc,
    ];
    args.extend(extra);
    args.extend(["--snapshot", snap_path.to_str().unwrap()]);
    let out = locus(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn between<'t>(text: &'t str, from: &str, to: &str) -> &'t str {
    let start = text.find(from).map(|i| i + from.len()).unwrap();
    let rest = &text[start..];
    &rest[..rest.find(to).unwrap()]
}

/// `locus dwarf vars --snapshot` against gdb: gdb stops in `split` of the clang-19 -O2
/// fixture (recording the registers at its entry, at the stop and the stack), the
/// snapshot is written in the CLI's format, and the values Locus prints for the
/// parameters (entry values by then) and `sum` are those gdb prints.
#[test]
fn vars_with_a_gdb_snapshot_match_gdb() {
    let dir = TempDir::new("dwarf-vars-gdb");
    let exe = dir.path("pieces");
    compile(
        "clang-19",
        &["-g", "-O2", "-no-pie"],
        &[&fixture("pieces.c")],
        &exe,
    );
    let src = std::fs::read_to_string(fixture("pieces.c")).unwrap();
    let line = src.lines().position(|l| l.contains("BREAK split")).unwrap() + 1;
    let stack = dir.path("stack.bin");
    let stop = format!("break pieces.c:{line}");
    let dump = format!("dump binary memory {} $sp-256 $sp+512", stack.display());
    let gdb = run_gdb(
        &exe,
        &[
            "break *split",
            &stop,
            "run",
            "echo @@entry\\n",
            "info registers",
            "echo @@end\\n",
            "continue",
            "echo @@stop\\n",
            "info registers",
            "echo @@end\\n",
            &dump,
            "echo @@a\\n",
            "print a",
            "echo @@b\\n",
            "print b",
            "echo @@sum\\n",
            "print sum",
            "echo @@end\\n",
            "kill",
        ],
    );
    let regs = gdb_registers(between(&gdb, "@@stop", "@@end"));
    let rsp = u64::from_str_radix(
        between(&gdb, "@@stop", "@@end")
            .lines()
            .find(|l| l.starts_with("rsp"))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let pc = le_hex(regs["rip"]["value"].as_str().unwrap());
    let stack_hex = hex_of(&std::fs::read(&stack).unwrap());
    let snap = json!({
        "address_size": 8,
        "registers": regs,
        "entry_registers": gdb_registers(between(&gdb, "@@entry", "@@end")),
        "memory": [{"space": 0, "address": rsp - 256, "bytes": stack_hex}],
    });
    let doc = vars_with_snapshot(&dir, &exe, pc, &[], &snap);
    let vars = doc["variables"].as_array().unwrap();
    for (name, size) in [("a", 4), ("b", 4), ("sum", 8)] {
        let v = vars.iter().find(|v| v["name"] == name).expect(name);
        let hex = v["value"].as_str().unwrap_or_else(|| panic!("{v}"));
        assert_eq!(hex.len(), size * 2, "{v}");
        assert_eq!(le_hex(hex) as i64, gdb_number(&gdb, name), "{name}: {v}");
    }
    // The parameters are dead at the stop: their values come from DW_OP_entry_value.
    let a = vars.iter().find(|v| v["name"] == "a").unwrap();
    assert!(
        a["expression"]
            .as_str()
            .unwrap()
            .contains("DW_OP_entry_value"),
        "{a}"
    );
}

/// `locus dwarf vars --load-bias` on position-independent executables, against gdb (which
/// runs them at a load base of its own): the PC is taken at the file's addresses less the
/// bias, and the function-scope static, whose location is an address in the file
/// (`DW_OP_addrx` from clang, rewritten; `DW_OP_addr` from gcc, moved in place), is read at
/// its address in the running program, as gdb reads it. Without the bias the running PC is
/// in no function of the file.
#[test]
fn vars_in_a_pie_with_its_load_bias_match_gdb() {
    for compiler in ["clang-19", "gcc"] {
        pie_vars_match_gdb(compiler);
    }
}

fn pie_vars_match_gdb(compiler: &str) {
    let dir = TempDir::new(&format!("dwarf-vars-pie-{compiler}"));
    let exe = dir.path("statics");
    let flags = ["-g", "-O1", "-fPIE", "-pie"];
    compile(compiler, &flags, &[&fixture("statics.c")], &exe);
    let counter = dir.path("counter.bin");
    let dump = format!(
        "dump binary memory {} &counter ((char *)&counter)+4",
        counter.display()
    );
    let gdb = run_gdb(
        &exe,
        &[
            "break bump",
            "run",
            // The second call: the static has been added to once.
            "continue",
            "echo @@maps\\n",
            "info proc mappings",
            "echo @@regs\\n",
            "info registers",
            "echo @@end\\n",
            "echo @@counter\\n",
            "print counter",
            "echo @@addr\\n",
            "print/x (long)&counter",
            "echo @@end\\n",
            &dump,
            "kill",
        ],
    );
    let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap();
    // The load base: the start of the executable's mapping at file offset 0.
    let base = between(&gdb, "@@maps", "@@regs")
        .lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 5 && f[3] == "0x0" && f.last().is_some_and(|p| p.ends_with("/statics"))
        })
        .map(|l| hex(l.split_whitespace().next().unwrap()))
        .unwrap_or_else(|| panic!("{compiler}: no mapping of the executable in:\n{gdb}"));
    assert_ne!(base, 0, "a PIE runs away from address 0");
    let regs = gdb_registers(between(&gdb, "@@regs", "@@end"));
    let pc = le_hex(regs["rip"]["value"].as_str().unwrap());
    let address = hex(between(&gdb, "@@addr\n", "@@end")
        .split(" = ")
        .nth(1)
        .unwrap());
    let theirs = gdb_number(&gdb, "counter");
    assert_eq!(theirs, 43, "40 + the first call's 3:\n{gdb}");
    let snap = json!({
        "address_size": 8,
        "registers": regs,
        "memory": [{"space": 0, "address": address, "bytes": hex_of(&std::fs::read(&counter).unwrap())}],
    });
    let run = |bias: u64| {
        let bias = format!("{bias:#x}");
        vars_with_snapshot(&dir, &exe, pc, &["--load-bias", &bias], &snap)
    };
    let doc = run(base);
    let vars = doc["variables"].as_array().unwrap();
    let v = vars
        .iter()
        .find(|v| v["name"] == "counter")
        .unwrap_or_else(|| panic!("{compiler}: no counter at {pc:#x}, bias {base:#x}: {doc}"));
    assert_eq!(v["function"], "bump", "{v}");
    assert!(
        v["expression"].as_str().unwrap().starts_with("DW_OP_addr "),
        "{v}"
    );
    let value = v["value"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(le_hex(value) as i64, theirs, "{compiler}: {v}");
    // The same call without the bias: the running PC is outside every function of the file.
    let doc = run(0);
    assert_eq!(doc["variables"].as_array().map(Vec::len), Some(0), "{doc}");
}

/// Results a person can read: values as gdb prints numbers of their type, locations as
/// their places (memory as address and address space), bytes only with `--read`.
#[test]
fn results_for_a_person() {
    let text = |args: &[&str]| -> String {
        let dir = TempDir::new("dwarf-text");
        let ctx = context(&dir);
        let mut all = vec!["dwarf", "eval", "--context", ctx.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = locus(&all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(text(&["DW_OP_consts -5"]), "-5 (generic)\n");
    // A DW_OP_stack_value's implicit storage shows the number it holds (its type is not
    // kept: signed and unsigned when they differ).
    assert_eq!(
        text(&["DW_OP_consts -5 DW_OP_stack_value"]),
        "implicit value fb ff ff ff ff ff ff ff = -5 (signed) or 18446744073709551611 (unsigned)\n"
    );
    assert_eq!(
        text(&["DW_OP_lit8 DW_OP_stack_value"]),
        "implicit value 08 00 00 00 00 00 00 00 = 8\n"
    );
    // DW_OP_convert to a base type needs the binary's DIEs; typed values come from the
    // evaluator here through regval_type of the generic type.
    assert_eq!(
        text(&[
            "--result",
            "value",
            "DW_OP_regval_type SGPR0 Generic DW_OP_deref"
        ]),
        "42 (generic)\n"
    );
    assert_eq!(
        text(&["DW_OP_addr 0x1010 DW_OP_lit1 DW_OP_form_aspace_address"]),
        "memory 0x1010, address space 1\n"
    );
    assert_eq!(
        text(&[
            "--read",
            "4",
            "DW_OP_addr 0x1010 DW_OP_lit1 DW_OP_form_aspace_address"
        ]),
        "memory 0x1010, address space 1\nbytes: 55 66 77 88\n"
    );
    assert_eq!(
        text(&["DW_OP_regx SGPR3 DW_OP_piece 2 DW_OP_addr 0xbeef DW_OP_piece 2"]),
        "composite:\n  bits 0..16:\n    register SGPR3 (35)\n  bits 16..32:\n    memory 0xbeef, address space 0\n"
    );
    // The JSON keeps its fields and adds the readable ones.
    let r = eval(&["DW_OP_addr 0x1010 DW_OP_lit1 DW_OP_form_aspace_address"]);
    assert_eq!(r["location"], json!([mem(1, 0x1010)]));
    let r = eval(&["--result", "value", "DW_OP_consts -5"]);
    assert_eq!(
        r,
        json!({"result": "value", "type": "generic", "value": "fbffffffffffffff", "number": "-5"})
    );
}

/// `--write HEX` goes through every part of a composite (and every place of a
/// multi-place description), refuses implicit storage before writing anything, and
/// prints the context afterwards in the CTX.json format.
#[test]
fn writes_through_the_result() {
    let r = eval(&[
        "--write",
        "aabbccdd",
        "--read",
        "4",
        "DW_OP_regx SGPR3 DW_OP_piece 2 DW_OP_addr 0x1010 DW_OP_piece 2",
    ]);
    assert_eq!(r["wrote"], "aabbccdd");
    assert_eq!(r["read"], "aabbccdd");
    let ctx = &r["context"];
    assert_eq!(ctx["registers"]["SGPR3"]["value"], "aabbadde");
    let block = ctx["memory"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["address"] == 0x1000 && b["space"] == 0)
        .unwrap();
    assert_eq!(
        block["bytes"],
        "2a000000000000000000000000000000ccdd33440000"
    );
    // The context printed reads back as a context.
    let dir = TempDir::new("dwarf-write");
    let path = dir.path("after.json");
    std::fs::write(&path, ctx.to_string()).unwrap();
    let r = eval_json_in(&path, &["--read", "2", "DW_OP_addr 0x1010"]);
    assert_eq!(r["read"], "ccdd");
    // Implicit storage in the last part: refused, nothing printed (the register part
    // was not written either: the whole write is planned first).
    let e = eval_error(&[
        "--write",
        "aabbccdd",
        "DW_OP_regx SGPR3 DW_OP_piece 2 DW_OP_lit7 DW_OP_stack_value DW_OP_piece 2",
    ]);
    assert!(e.contains("--write") && e.contains("implicit"), "{e}");
    // Bytes that are not hex.
    let e = eval_error(&["--write", "xyz", "DW_OP_regx SGPR3"]);
    assert!(e.contains("--write"), "{e}");
}

/// The spec's context ([`context`]) with `object_location` set: what
/// `DW_OP_push_object_address` pushes.
fn context_with_object(dir: &TempDir, object_location: Value) -> PathBuf {
    let path = context(dir);
    let mut ctx: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    ctx["object_location"] = object_location;
    std::fs::write(&path, ctx.to_string()).unwrap();
    path
}

/// The bytes of the memory block of `space` at `address` in a printed context.
fn block(ctx: &Value, space: u64, address: u64) -> String {
    ctx["memory"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["address"] == address && b["space"] == space)
        .unwrap()["bytes"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A context's `object_location` (the normative text: `DW_OP_push_object_address`
/// pushes the current object's location description, which may have several places)
/// is the multi-place description `--write` writes through: every place is written (a
/// register named as the context names it, memory of two address spaces), also after an
/// offset moves every place; the context afterwards shows each.
#[test]
fn writes_through_an_object_in_several_places() {
    let dir = TempDir::new("dwarf-object");
    let places = json!([
        {"storage": "register", "register": "SGPR3"},
        {"storage": "memory", "space": 0, "address": "0x1010"},
        {"storage": "memory", "space": 1, "address": 0x1010},
    ]);
    let ctx = context_with_object(&dir, places);
    let run = |args: &[&str]| eval_json_in(&ctx, args);
    // Without --write: the three places, as eval prints a location.
    let r = run(&["DW_OP_push_object_address"]);
    assert_eq!(
        r["location"],
        json!([reg(35, 0), mem(0, 0x1010), mem(1, 0x1010)])
    );
    let r = run(&[
        "--write",
        "aabbccdd",
        "--read",
        "4",
        "DW_OP_push_object_address",
    ]);
    assert_eq!(r["wrote"], "aabbccdd");
    assert_eq!(r["read"], "aabbccdd");
    let after = &r["context"];
    assert_eq!(after["registers"]["SGPR3"]["value"], "aabbccdd");
    assert_eq!(
        block(after, 0, 0x1000),
        "2a000000000000000000000000000000aabbccdd0000"
    );
    assert_eq!(block(after, 1, 0x1010), "aabbccdd");
    // Nothing else changed; the object's location is printed back as it was read.
    assert_eq!(block(after, 0, 0xbeef), "aabb");
    assert_eq!(after["registers"]["SGPR0"]["value"], "0010000000000000");
    assert_eq!(
        after["object_location"],
        json!([reg(35, 0), mem(0, 0x1010), mem(1, 0x1010)])
    );
    // An offset moves every place: two bytes into each.
    let r = run(&[
        "--write",
        "0102",
        "DW_OP_push_object_address DW_OP_LLVM_offset_uconst 2",
    ]);
    let after = &r["context"];
    assert_eq!(after["registers"]["SGPR3"]["value"], "efbe0102");
    assert_eq!(
        block(after, 0, 0x1000),
        "2a000000000000000000000000000000112201020000"
    );
    assert_eq!(block(after, 1, 0x1010), "55660102");
    // The printed context reads back: the written bytes are there, through the object.
    let again = dir.path("after.json");
    std::fs::write(&again, after.to_string()).unwrap();
    let r = eval_json_in(&again, &["--read", "4", "DW_OP_push_object_address"]);
    assert_eq!(r["read"], "efbe0102");
    assert_eq!(r["location"].as_array().unwrap().len(), 3);
}

/// An object one of whose places is implicit storage: `--write` is refused with one
/// error line, no context printed and the context file untouched (that the register and
/// memory places listed first keep their bytes is checked on the snapshot itself in
/// locus-dwarf's tests/object_location.rs); reads still go through it.
#[test]
fn a_write_to_an_object_with_an_implicit_place_is_refused() {
    let dir = TempDir::new("dwarf-object-implicit");
    let ctx = context_with_object(
        &dir,
        json!([
            {"storage": "register", "register": 35},
            {"storage": "memory", "address": "0x1010"},
            {"storage": "implicit", "bytes": "efbeadde"},
        ]),
    );
    let before = std::fs::read_to_string(&ctx).unwrap();
    let (code, stdout, e) = eval_in(&ctx, &["--write", "aabbccdd", "DW_OP_push_object_address"]);
    assert_eq!(code, Some(1), "the write should fail");
    assert!(stdout.is_empty(), "no context printed on refusal");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("locus: dwarf: ") && e.contains("--write") && e.contains("implicit"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&ctx).unwrap(), before);
    // Reading is fine.
    let r = eval_json_in(&ctx, &["--read", "4", "DW_OP_push_object_address"]);
    assert_eq!(r["read"], "efbeadde");
    assert_eq!(r["location"][2]["storage"], "implicit");
    // A malformed object location names the field.
    let bad = context_with_object(&dir, json!([{"storage": "tape"}]));
    let (code, _, e) = eval_in(&bad, &["DW_OP_push_object_address"]);
    assert_eq!(code, Some(1));
    assert!(
        e.contains("object_location[0]") && e.contains("tape"),
        "{e}"
    );
}

/// Builds `src` with `compiler -g -O2` into `dir`; `None` if the compiler is missing
/// (gcc is optional, clang-19 is not).
fn build(dir: &TempDir, compiler: &str, src: &Path, name: &str) -> Option<PathBuf> {
    let exe = dir.path(name);
    let out = std::process::Command::new(compiler)
        .args(["-g", "-O2", "-o"])
        .arg(&exe)
        .arg(src)
        .output();
    match out {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(exe)
        }
        Err(_) if compiler != "clang-19" => None,
        Err(e) => panic!("clang-19 is needed (scripts/install-deps): {e}"),
    }
}

/// Every `DW_AT_location` / `DW_AT_frame_base` expression llvm-dwarfdump-19 prints of
/// `exe`, location-list entries as printed (`[lo, hi): ...`).
fn llvm_dwarfdump_expressions(exe: &Path) -> Vec<String> {
    let out = std::process::Command::new("llvm-dwarfdump-19")
        .arg("--debug-info")
        .arg(exe)
        .output()
        .unwrap_or_else(|e| panic!("llvm-dwarfdump-19 is needed: {e}"));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut exprs = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        let s = line.trim();
        if s.starts_with("DW_AT_location") || s.starts_with("DW_AT_frame_base") {
            let value = s.split_once("\t(").map_or("", |(_, v)| v);
            in_list = !(value.starts_with("DW_OP") || value.starts_with('<'));
            if !in_list {
                exprs.push(s.to_string());
            }
        } else if in_list && s.starts_with('[') {
            exprs.push(s.to_string());
        } else {
            in_list = false;
        }
    }
    exprs
}

/// Registers 0-16 (8 bytes, pointing into a block of stack memory), 17-32 (16 bytes),
/// the same at function entry, a CFA and a frame base: enough for every expression of
/// the fixtures to evaluate (those that read elsewhere fail, the same way in both forms).
fn x86_64_context(dir: &TempDir) -> PathBuf {
    let mut regs = serde_json::Map::new();
    for n in 0..=32u64 {
        let value = if n <= 16 {
            hex_of(&(0x7000 + n * 8).to_le_bytes())
        } else {
            hex_of(&[n as u8; 16])
        };
        regs.insert(format!("r{n}"), json!({"number": n, "value": value}));
    }
    let stack: Vec<u8> = (0..0x400u32).map(|i| (i * 7) as u8).collect();
    let ctx = json!({
        "address_size": 8,
        "registers": regs,
        "entry_registers": regs,
        "memory": [{"address": 0x6e00, "bytes": hex_of(&stack)}],
        "cfa": 0x7100,
        "frame_base": 0x7080,
    });
    let path = dir.path("x86_64.json");
    std::fs::write(&path, ctx.to_string()).unwrap();
    path
}

/// Whether `bytes`, after their length (ULEB128, or 2 bytes in DWARF 4 location lists),
/// are in the ELF file's `.debug_info` or location lists: the empty-range entries gimli
/// skips (gcc's location views) are found here.
fn in_sections(data: &[u8], bytes: &[u8]) -> bool {
    let mut uleb = Vec::new();
    let mut n = bytes.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        uleb.push(if n == 0 { b } else { b | 0x80 });
        if n == 0 {
            break;
        }
    }
    let fixed = (bytes.len() as u16).to_le_bytes().to_vec();
    common::elf_sections(data)
        .into_iter()
        .filter(|s| [".debug_info", ".debug_loclists", ".debug_loc"].contains(&s.name.as_str()))
        .any(|s| {
            let section = &data[s.offset..s.offset + s.size];
            [&uleb, &fixed].iter().any(|len| {
                let needle = [len.as_slice(), bytes].concat();
                section.windows(needle.len()).any(|w| w == needle)
            })
        })
}

/// `locus dwarf eval --json --context CTX ARGS`: (exit status, stdout, stderr).
fn eval_in(ctx: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec![
        "dwarf",
        "eval",
        "--json",
        "--context",
        ctx.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = locus(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What llvm-dwarfdump-19 prints of real clang-19 (and gcc) -g -O2 binaries reads back:
/// each printed location expression parses to the bytes the object holds (or, for LLVM's
/// padded ULEB128s, to the operations they decode to), and `locus dwarf eval` gives the
/// same answer for the text as for the bytes.
#[test]
fn llvm_dwarfdump_expressions_round_trip() {
    use locus_dwarf::binary::location_expressions;
    use locus_dwarf::{decode, encode, parse_text_with, Syntax};

    let dir = TempDir::new("dwarf-roundtrip");
    let ctx = x86_64_context(&dir);
    let (mut total, mut identical, mut padded, mut evaluated) = (0, 0, 0, 0);
    for (compiler, fixture_name) in [
        ("clang-19", "pieces.c"),
        ("clang-19", "statics.c"),
        ("gcc", "pieces.c"),
        ("gcc", "statics.c"),
    ] {
        let name = format!("{compiler}-{fixture_name}.out");
        let Some(exe) = build(&dir, compiler, &fixture(fixture_name), &name) else {
            continue;
        };
        let data = std::fs::read(&exe).unwrap();
        let objects = location_expressions(&data).unwrap();
        let encoding = objects.first().unwrap().encoding;
        let printed = llvm_dwarfdump_expressions(&exe);
        let syntax = Syntax {
            encoding,
            unit_offset: 0,
            registers: &|_| None,
        };
        let mut from_text = Vec::new();
        for text in &printed {
            let ops =
                parse_text_with(text, &syntax).unwrap_or_else(|e| panic!("{name}: `{text}`: {e}"));
            let bytes = encode(&ops, encoding).unwrap_or_else(|e| panic!("{text}: {e}"));
            // The object holds the same bytes; or, where LLVM pads a ULEB128 (the base
            // type of DW_OP_convert, written before the DIE offsets are known), bytes
            // that decode to the same operations.
            if objects.iter().any(|o| o.bytes == bytes) || in_sections(&data, &bytes) {
                identical += 1;
            } else {
                let same_ops = objects.iter().any(|o| {
                    decode(&o.bytes, encoding)
                        .is_ok_and(|d| d.into_iter().map(|(_, op)| op).eq(ops.iter().cloned()))
                });
                assert!(
                    same_ops,
                    "{name}: `{text}` ({}) is not in the object",
                    hex_of(&bytes)
                );
                padded += 1;
            }
            from_text.push((bytes, text));
        }
        total += printed.len();
        // Evaluated alike: text and bytes (distinct expressions only).
        let mut seen = std::collections::BTreeSet::new();
        for (bytes, text) in &from_text {
            if bytes.is_empty() || !seen.insert(bytes.clone()) {
                continue;
            }
            let by_text = eval_in(&ctx, &[text.as_str()]);
            let by_hex = eval_in(&ctx, &["--hex", &hex_of(bytes)]);
            assert_eq!(by_text, by_hex, "{name}: `{text}`");
            evaluated += 1;
        }
    }
    eprintln!(
        "{total} printed expressions read back ({identical} to the object's bytes, {padded} to \
         its operations), {evaluated} distinct ones evaluated alike"
    );
    assert!(total >= 150, "{total}");
}

/// What `locus dwarf disasm` and `locus dwarf vars` print reads back through `eval`.
#[test]
fn disasm_and_vars_read_back() {
    use locus_dwarf::binary::location_expressions;
    use locus_dwarf::{encode, parse_text, Encoding};

    let dir = TempDir::new("dwarf-readback");
    let ctx = x86_64_context(&dir);
    let exe = build(&dir, "clang-19", &fixture("pieces.c"), "pieces").unwrap();
    let data = std::fs::read(&exe).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let objects = location_expressions(&data).unwrap();
    for e in &objects {
        if e.bytes.is_empty() || !seen.insert(e.bytes.clone()) {
            continue;
        }
        let hex = hex_of(&e.bytes);
        let out = locus(&["dwarf", "disasm", &hex]);
        assert!(out.status.success(), "{hex}");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            eval_in(&ctx, &[text.as_str()]),
            eval_in(&ctx, &["--hex", &hex]),
            "{text}"
        );
    }
    // vars at every PC where a location list changes, in the functions of the fixture.
    let mut checked = 0;
    for f in ["split", "pack"] {
        for offset in [1, 8, 20, 40] {
            let pc = format!("{f}+{offset}");
            let doc = locus_json(&["dwarf", "vars", exe.to_str().unwrap(), "--pc", &pc]);
            for v in doc["variables"].as_array().unwrap() {
                let Some(text) = v["expression"].as_str() else {
                    continue;
                };
                let ops = parse_text(text, |_| None).unwrap_or_else(|e| panic!("`{text}`: {e}"));
                let bytes = encode(&ops, Encoding::default()).unwrap();
                assert!(
                    objects.iter().any(|e| e.bytes == bytes),
                    "`{text}` is not an expression of the binary"
                );
                assert_eq!(
                    eval_in(&ctx, &[text]),
                    eval_in(&ctx, &["--hex", &hex_of(&bytes)]),
                    "{text}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "{checked}");
}

// ---------------------------------------------------------------------------------------------
// Real targets (issue 15 §1): core files, live processes, snapshots, refusals.
// ---------------------------------------------------------------------------------------------

/// Two threads: `worker` computes a few values and spins; then the main thread aborts.
const THREADS_C: &str = r#"
#include <pthread.h>
#include <stdlib.h>
volatile long sink_v;
volatile int started, stop;
__attribute__((noinline)) void sink(long x) { sink_v += x; }
__attribute__((noinline)) void *worker(void *arg) {
  long id = (long)arg;
  long sq = id * id + 5;
  int half = (int)(sq / 2);
  sink(sq); sink(half);
  started = 1;
  while (!stop) ;
  sink(sq); sink(half); sink(id);
  return 0;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, worker, (void *)41);
  while (!started) ;
  abort();
}
"#;

/// `vars --core` on a core of two threads: every thread's innermost frame by default (the
/// aborting main thread first, in libc; the worker spinning in `worker`), `--thread 2`
/// alone; the worker's variables compared with gdb's `thread 2`.
#[test]
fn vars_on_every_thread_of_a_core() {
    let dir = TempDir::new("dwarf-threads");
    let exe = clang(&dir, "threads", THREADS_C, &["-g", "-O2", "-pthread"]);
    let core = core_of(&dir, &exe);
    let (exe_s, core_s) = (exe.to_str().unwrap(), core.to_str().unwrap());
    let all = locus_json(&["dwarf", "vars", exe_s, "--core", core_s]);
    let threads = all["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{all}");
    assert_eq!(threads[0]["signal"], 6);
    assert!(
        threads[0]["note"].as_str().unwrap().contains("libc"),
        "{all}"
    );
    assert_eq!(threads[1]["function"], "worker", "{all}");
    assert_ne!(threads[0]["tid"], threads[1]["tid"]);
    let one = locus_json(&["dwarf", "vars", exe_s, "--core", core_s, "--thread", "2"]);
    assert_eq!(one["threads"].as_array().unwrap().len(), 1);
    assert_eq!(one["threads"][0], threads[1]);
    let commands = ["thread 2", "info locals", "info args"];
    let (compared, matched, numbers) =
        compare_threads_with_gdb(&["-c", core_s], &commands, &exe, &[(0, &threads[1])]);
    eprintln!("threads: {matched} of {compared} variables match gdb ({numbers} as numbers)");
    assert!(compared >= 3, "too few compared: {compared}");
    assert!(numbers >= 3, "too few printed as numbers: {numbers}");
    assert_eq!(compared, matched);
}

/// A clang-19 -O2 program whose `inner` (called from `middle`, called from `main`) computes
/// a few values, then aborts (a core) or, with SPIN set, spins until killed (a process).
const TARGET_C: &str = r#"
#include <stdlib.h>
volatile long sink_v;
volatile int stop;
__attribute__((noinline)) void sink(long x) { sink_v += x; }
__attribute__((noinline)) int inner(int n, long k, double d) {
  int a = n * 3 + 1;
  long b = k ^ a;
  double e = d * a;
  sink(a); sink(b); sink((long)e);
  if (getenv("SPIN")) { while (!stop) ; } else abort();
  sink(a); sink(b); sink((long)e); sink(n); sink(k);
  return a + (int)b + (int)e;
}
__attribute__((noinline)) int middle(int m) {
  int q = m * 7;
  long r = (long)q << 20;
  unsigned short h = (unsigned short)(q * 1000 + 7);
  long w = r / 3 + m;
  int s = inner(m + 1, r, q * 0.25);
  sink(q); sink(r); sink(h); sink(w);
  return s + q;
}
int main(int argc, char **argv) {
  int t = argc + 2;
  long big = (long)argc << 40;
  int u = middle(t);
  sink(u); sink(t); sink(big);
  return 0;
}
"#;

/// Compiles `source` with clang-19 and `flags` into `dir/name`.
fn clang(dir: &TempDir, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.path(&format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out_path = dir.path(name);
    // Run in `dir`: the binary's DW_AT_comp_dir, under which a relative DW_AT_dwo_name is.
    let out = std::process::Command::new("clang-19")
        .args(flags)
        .arg("-o")
        .arg(&out_path)
        .arg(&src)
        .current_dir(&dir.0)
        .output()
        .unwrap_or_else(|e| panic!("clang-19 is needed (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out_path
}

/// Compiles `sources` with `compiler` and `flags` into `exe` (`compiler FLAGS -o EXE
/// SOURCES`), which must succeed.
fn compile(compiler: &str, flags: &[&str], sources: &[&Path], exe: &Path) {
    let out = std::process::Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(exe)
        .args(sources)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} is needed (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "{compiler}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A core of `exe` aborting: the kernel's (`ulimit -c unlimited`, written where
/// /proc/sys/kernel/core_pattern says when that is a plain name), else gdb's
/// `generate-core-file` at the abort.
fn core_of(dir: &TempDir, exe: &Path) -> PathBuf {
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -c unlimited; exec {}", exe.display()))
        .current_dir(&dir.0)
        .status()
        .unwrap();
    let found = std::fs::read_dir(&dir.0).unwrap().find_map(|e| {
        let p = e.ok()?.path();
        p.file_name()?.to_str()?.starts_with("core").then_some(p)
    });
    if let Some(core) = found {
        return core;
    }
    let core = dir.path("gdb.core");
    let gen = format!("generate-core-file {}", core.display());
    run_gdb(exe, &["run", &gen]);
    assert!(core.exists(), "neither the kernel nor gdb wrote a core");
    core
}

/// `locus ARGS`, which must succeed, as JSON.
/// Runs `locus ARGS...` (with `--json` for `vars`) and parses its output.
fn locus_json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    if args.get(1) == Some(&"vars") {
        args.push("--json");
    }
    let args = &args[..];
    let out = locus(args);
    assert!(
        out.status.success(),
        "locus {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A variable's value as a number of its type (little-endian bytes, signed unless the
/// type says `unsigned`), when every byte is defined and it is an integer of at most 8
/// bytes.
fn our_number(v: &Value) -> Option<i64> {
    let hex = v["value"].as_str()?;
    let ty = v["type"].as_str()?;
    let integer = ["int", "long", "short", "char"]
        .iter()
        .any(|t| ty.contains(t));
    if hex.contains('?') || hex.is_empty() || hex.len() > 16 || !integer {
        return None;
    }
    let u = le_hex(hex);
    let shift = 64 - hex.len() as u32 * 4;
    Some(if ty.contains("unsigned") {
        u as i64
    } else {
        ((u << shift) as i64) >> shift
    })
}

/// gdb's `frame apply all -s -- info locals` / `info args` output as (function, name,
/// value as printed): each `#N ... in FUNC (` or `#N  FUNC (` header names the frame's
/// function for the `name = value` lines after it.
fn gdb_values(text: &str) -> Vec<(String, String, String)> {
    let mut function = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            let head = line.split(" (").next().unwrap_or_default();
            function = head.rsplit(' ').next().unwrap_or_default().to_string();
            continue;
        }
        if let Some((name, value)) = line.split_once(" = ") {
            if !name.contains(' ') {
                out.push((function.clone(), name.to_string(), value.trim().to_string()));
            }
        }
    }
    out
}

/// Compares the variables `locus` found in each frame of thread 1 with gdb's `info locals`
/// and `info args` in the frame of the same function; returns (compared, matched, numbers).
/// Compared: every variable locus prints a `number` for (matched when it is gdb's text
/// exactly: integers, floats, booleans, characters; counted in `numbers`), every other
/// integer gdb prints a number for (matched when locus reads the same number from the
/// bytes) and every variable gdb says is `<optimized out>` (matched when locus has no fully
/// defined value either). Variables gdb reads through a register the caller frame does not know
/// (gdb assumes it unchanged; locus refuses) are printed, not counted.
fn compare_with_gdb(
    gdb_args: &[&str],
    exe: &Path,
    frames: &[(usize, Value)],
) -> (usize, usize, usize) {
    let threads: Vec<(usize, &Value)> =
        frames.iter().map(|(f, d)| (*f, &d["threads"][0])).collect();
    let commands = [
        "frame apply all -s -- info locals",
        "frame apply all -s -- info args",
    ];
    compare_threads_with_gdb(gdb_args, &commands, exe, &threads)
}

/// [`compare_with_gdb`] for `threads` items of `locus dwarf vars` (frame number, thread),
/// against gdb's output for `commands`.
fn compare_threads_with_gdb(
    gdb_args: &[&str],
    commands: &[&str],
    exe: &Path,
    threads: &[(usize, &Value)],
) -> (usize, usize, usize) {
    let mut args: Vec<&str> = vec!["-batch", "-nx"];
    args.extend_from_slice(gdb_args);
    for c in commands {
        args.extend(["-ex", c]);
    }
    let out = std::process::Command::new("gdb")
        .args(&args)
        .arg(exe)
        .output()
        .unwrap_or_else(|e| panic!("gdb is needed (scripts/install-deps): {e}"));
    let gdb = String::from_utf8_lossy(&out.stdout);
    let (mut compared, mut matched, mut numbers) = (0, 0, 0);
    for &(frame, t) in threads {
        let function = t["function"].as_str().unwrap();
        let ours = t["variables"].as_array().unwrap();
        let in_frame = gdb_values(&gdb)
            .into_iter()
            .filter(|(f, _, _)| f == function);
        for (_, name, theirs) in in_frame {
            let Some(v) = ours.iter().find(|v| v["name"] == name.as_str()) else {
                continue;
            };
            let mine = our_number(v);
            let defined = v["value"].as_str().is_some_and(|h| !h.contains('?'));
            let agree = if theirs == "<optimized out>" {
                !defined
            } else if let Some(number) = v["number"].as_str() {
                // Printed as a number of its base type: exactly gdb's text
                // (integers, floats, booleans, characters).
                numbers += 1;
                number == theirs
            } else if let Ok(n) = theirs.parse::<i64>() {
                if v["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("cannot access register"))
                {
                    eprintln!(
                        "frame {frame} {function} {name}: gdb {theirs}, locus {}",
                        v["error"]
                    );
                    continue;
                }
                mine == Some(n)
            } else {
                continue;
            };
            compared += 1;
            if agree {
                matched += 1;
            } else {
                eprintln!("frame {frame} {function} {name}: gdb {theirs}, locus {v}");
            }
        }
    }
    (compared, matched, numbers)
}

/// The frame numbers (locus's, without gdb's inlined frames) of `inner`, `middle` and
/// `main` in thread 1's backtrace: its first three in the program (`_start` follows).
fn program_frames(doc: &Value) -> Vec<usize> {
    let exe = doc["binary"].as_str().unwrap();
    doc["threads"][0]["backtrace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["module"] == exe)
        .map(|f| f["frame"].as_u64().unwrap() as usize)
        .take(3)
        .collect()
}

/// `vars --core`: the thread that aborted, its innermost frame (in libc: a note, no
/// variables), then the three frames of the program unwound through libc's CFI, each
/// compared with gdb on the same core. A snapshot of one frame gives the same values.
#[test]
fn vars_on_a_core_file_match_gdb() {
    let dir = TempDir::new("dwarf-core");
    let exe = clang(&dir, "target", TARGET_C, &["-g", "-O2"]);
    let core = core_of(&dir, &exe);
    let (exe_s, core_s) = (exe.to_str().unwrap(), core.to_str().unwrap());
    let top = locus_json(&["dwarf", "vars", exe_s, "--core", core_s]);
    assert_eq!(top["threads"].as_array().unwrap().len(), 1, "{top}");
    let t = &top["threads"][0];
    assert_eq!(t["signal"], 6, "{top}");
    assert_eq!(t["frame"], 0);
    let frames = program_frames(&top);
    assert_eq!(frames.len(), 3, "inner, middle, main: {top}");
    let mut docs = Vec::new();
    for &f in &frames {
        let n = f.to_string();
        let doc = locus_json(&["dwarf", "vars", exe_s, "--core", core_s, "--frame", &n]);
        docs.push((f, doc));
    }
    let functions: Vec<&str> = docs
        .iter()
        .map(|(_, d)| d["threads"][0]["function"].as_str().unwrap())
        .collect();
    assert_eq!(functions, ["inner", "middle", "main"]);
    let (compared, matched, numbers) = compare_with_gdb(&["-c", core_s], &exe, &docs);
    eprintln!("core: {matched} of {compared} variables match gdb ({numbers} as numbers)");
    assert!(compared >= 12, "too few compared: {compared}");
    assert!(numbers >= 8, "too few printed as numbers: {numbers}");
    assert_eq!(compared, matched);

    // The snapshot of `inner`'s frame, read back by `vars --snapshot`: the same values.
    let inner = frames[0].to_string();
    let snap = locus_json(&[
        "dwarf", "snapshot", exe_s, "--core", core_s, "--frame", &inner,
    ]);
    assert_eq!(snap["thread"], 1);
    assert!(
        snap["registers"]["rsp"]["number"] == 7,
        "{}",
        snap["registers"]
    );
    let snap_path = dir.path("snap.json");
    std::fs::write(&snap_path, snap.to_string()).unwrap();
    let again = locus_json(&[
        "dwarf",
        "vars",
        exe_s,
        "--snapshot",
        snap_path.to_str().unwrap(),
    ]);
    let values = |vars: &Value| -> Vec<(Value, Value)> {
        vars.as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].clone(), v["value"].clone()))
            .collect()
    };
    assert_eq!(
        values(&again["variables"]),
        values(&docs[0].1["threads"][0]["variables"])
    );
    // A thread that is not there, and a frame past the outermost: errors (status 1), not
    // empty lists (the frame was an `error` in the listing, status 0). The thread's message
    // is not an object file's ("cannot read the object file: no thread 2").
    let out = locus(&["dwarf", "vars", exe_s, "--core", core_s, "--thread", "2"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no thread 2") && !stderr.contains("object file"),
        "{stderr}"
    );
    let out = locus(&["dwarf", "vars", exe_s, "--core", core_s, "--frame", "1000"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("thread 1: no frame 1000"), "{stderr}");
    // A directory for the core is named once; a --pc past the address space is refused.
    let out = locus(&["dwarf", "vars", exe_s, "--core", "."]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "locus: dwarf: .: Is a directory (os error 21)\n"
    );
    let out = locus(&["dwarf", "vars", exe_s, "--pc", "main+0xffffffffffffffff"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("past the end of the address space"));
}

/// `vars --pid`: a spinning process is stopped, read and let go (still running, not
/// traced), frame 0 is `inner` itself; its frames compared with gdb attaching afterwards.
#[test]
fn vars_on_a_live_process_match_gdb() {
    let dir = TempDir::new("dwarf-pid");
    let exe = clang(&dir, "target", TARGET_C, &["-g", "-O2"]);
    let mut child = std::process::Command::new(&exe)
        .env("SPIN", "1")
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let exe_s = exe.to_str().unwrap();
    // Until it spins in `inner`.
    let mut docs = Vec::new();
    for _ in 0..50 {
        let doc = locus_json(&["dwarf", "vars", exe_s, "--pid", &pid]);
        if doc["threads"][0]["function"] == "inner" {
            docs.push((0, doc));
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(docs.len(), 1, "the process never reached inner");
    for f in [1usize, 2] {
        let n = f.to_string();
        docs.push((
            f,
            locus_json(&["dwarf", "vars", exe_s, "--pid", &pid, "--frame", &n]),
        ));
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        status
            .lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_default()
            .to_string()
    };
    assert!(field("State:").contains('R'), "{status}");
    assert!(field("TracerPid:").ends_with("\t0"), "{status}");
    let (compared, matched, numbers) = compare_with_gdb(&["-p", &pid], &exe, &docs);
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("process: {matched} of {compared} variables match gdb ({numbers} as numbers)");
    assert!(numbers >= 8, "too few printed as numbers: {numbers}");
    assert!(compared >= 12, "too few compared: {compared}");
    assert_eq!(compared, matched);
}

/// What `vars` cannot read is refused in one line with exit status 1, never an empty list:
/// a stripped binary, one built without -g, split DWARF whose .dwo is gone, a big-endian
/// object. Split DWARF with its .dwo or a .dwp package, and compressed sections (zlib, zstd,
/// .zdebug) are read.
#[test]
fn unreadable_binaries_are_refused() {
    let dir = TempDir::new("dwarf-refuse");
    let small = "int f(int x) { return x * 3; }\nint main(void) { return f(2); }\n";
    let plain = clang(&dir, "plain", small, &["-g", "-O2"]);
    let stripped = dir.path("stripped");
    std::fs::copy(&plain, &stripped).unwrap();
    assert!(std::process::Command::new("strip")
        .arg(&stripped)
        .status()
        .unwrap()
        .success());
    // Split DWARF is read from the .dwo the skeleton names: the same variables and
    // expressions as without -gsplit-dwarf. Without its .dwo it is refused, naming it.
    let split = clang(&dir, "split", small, &["-g", "-O2", "-gsplit-dwarf"]);
    let listed = |exe: &Path| -> Vec<Value> {
        let doc = locus_json(&["dwarf", "vars", exe.to_str().unwrap(), "--pc", "f+1"]);
        doc["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| json!([v["name"], v["kind"], v["expression"]]))
            .collect()
    };
    let in_plain = listed(&plain);
    assert!(!in_plain.is_empty());
    assert_eq!(listed(&split), in_plain);
    // Compressed debug sections (-gz: zlib; -gz=zstd) are decompressed.
    for gz in ["-gz", "-gz=zstd"] {
        let name = format!("gz{}", gz.len());
        let exe = clang(&dir, &name, small, &["-g", "-O2", gz]);
        assert_eq!(listed(&exe), in_plain, "{gz}");
    }
    // GNU's older .zdebug_* sections too.
    let zgnu = dir.path("zgnu");
    let objcopy = std::process::Command::new("objcopy")
        .arg("--compress-debug-sections=zlib-gnu")
        .arg(&plain)
        .arg(&zgnu)
        .status()
        .unwrap();
    assert!(objcopy.success());
    assert_eq!(listed(&zgnu), in_plain, "zlib-gnu");
    // A DWARF package beside the binary (BINARY.dwp, where gdb looks) is read instead of
    // the .dwo files, which may then be gone.
    let packaged = dir.path("packaged");
    std::fs::copy(&split, &packaged).unwrap();
    let dwp = std::process::Command::new("llvm-dwp-19")
        .arg("-e")
        .arg(&packaged)
        .arg("-o")
        .arg(dir.path("packaged.dwp"))
        .current_dir(dir.path(""))
        .status()
        .unwrap();
    assert!(dwp.success());
    std::fs::remove_file(dir.path("split-split.dwo")).unwrap();
    assert_eq!(listed(&packaged), in_plain, ".dwp");
    // A package whose unit cannot be read is refused, naming the package.
    std::fs::write(dir.path("garbage"), [0xffu8; 8]).unwrap();
    let objcopy = std::process::Command::new("objcopy")
        .arg("--update-section")
        .arg(format!(".debug_info.dwo={}", dir.path("garbage").display()))
        .arg(dir.path("packaged.dwp"))
        .status()
        .unwrap();
    assert!(objcopy.success());
    let out = locus(&["dwarf", "vars", packaged.to_str().unwrap(), "--pc", "f+1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(".dwp") && err.lines().count() == 1, "{err}");
    let cases = [
        (stripped, "no .debug_info"),
        (clang(&dir, "nodebug", small, &["-O2"]), "no .debug_info"),
        (split, "split-split.dwo"),
        (
            clang(
                &dir,
                "be.o",
                small,
                &["-g", "-O2", "-c", "--target=powerpc64-linux-gnu"],
            ),
            "big-endian",
        ),
    ];
    for (file, why) in &cases {
        let out = locus(&["dwarf", "vars", file.to_str().unwrap(), "--pc", "0x1000"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {err}", file.display());
        assert!(out.stdout.is_empty(), "{}", file.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(why), "{}: {err}", file.display());
    }
}

/// A freestanding AArch64 program (raw system calls): `inner(4, 0x150000)` computes
/// `a = 13`, `b = 0x15000d`, then sends itself SIGABRT.
const AARCH64_C: &str = r#"
static long sys(long n, long a, long b) {
  register long x8 __asm__("x8") = n; register long x0 __asm__("x0") = a; register long x1 __asm__("x1") = b;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
  return x0;
}
volatile long sink_v;
__attribute__((noinline)) void sink(long x) { sink_v += x; }
__attribute__((noinline)) int inner(int n, long k) {
  int a = n * 3 + 1;
  long b = k ^ a;
  sink(a); sink(b);
  sys(129, sys(172, 0, 0), 6);  /* kill(getpid(), SIGABRT) */
  sink(a); sink(b); sink(n);
  return a + (int)b;
}
void _start(void) {
  int r = inner(4, 0x150000);
  sink(r);
  sys(93, 0, 0);
}
"#;

/// `vars --core` on an AArch64 core that qemu-aarch64 writes (no NT_FILE: the binary is
/// placed by its entry point): x0-x30/sp from NT_PRSTATUS, the innermost frame `inner`
/// with the values the program computes (k through its entry value, from `_start`'s call
/// site), and `_start` unwound from the CFI. gdb here reads no AArch64 core, so the
/// program's own arithmetic is the oracle.
#[test]
fn vars_on_an_aarch64_core() {
    let dir = TempDir::new("dwarf-aarch64");
    let exe = clang(
        &dir,
        "a64",
        AARCH64_C,
        &[
            "--target=aarch64-linux-gnu",
            "-g",
            "-O2",
            "-nostdlib",
            "-static",
            "-fuse-ld=lld",
        ],
    );
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -c unlimited; exec qemu-aarch64-static {}",
            exe.display()
        ))
        .current_dir(&dir.0)
        .output()
        .expect("qemu-aarch64-static is needed (scripts/install-deps)");
    let core = std::fs::read_dir(&dir.0)
        .unwrap()
        .find_map(|e| {
            let p = e.ok()?.path();
            p.to_str()?.ends_with(".core").then_some(p)
        })
        .expect("qemu wrote no core");
    let (exe_s, core_s) = (exe.to_str().unwrap(), core.to_str().unwrap());
    let doc = locus_json(&["dwarf", "vars", exe_s, "--core", core_s]);
    let t = &doc["threads"][0];
    assert_eq!(t["signal"], 6, "{doc}");
    assert_eq!(t["function"], "inner", "{doc}");
    let value = |name: &str| {
        let v = t["variables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {doc}"));
        our_number(v).unwrap_or_else(|| panic!("{name}: {v}"))
    };
    assert_eq!(
        [value("n"), value("k"), value("a"), value("b")],
        [4, 0x150000, 13, 0x15000d]
    );
    let caller = locus_json(&["dwarf", "vars", exe_s, "--core", core_s, "--frame", "1"]);
    assert_eq!(caller["threads"][0]["function"], "_start", "{caller}");
}

/// Builds `crates/dwarf/fixtures/entry_values.c` with `compiler` at -O2 -g into `dir`.
fn build_entry_values(compiler: &str, dir: &TempDir) -> PathBuf {
    let exe = dir.path(&format!("entry_values-{compiler}"));
    compile(
        compiler,
        &["-O2", "-g"],
        &[&fixture("entry_values.c")],
        &exe,
    );
    exe
}

/// `scripts/dwarf-gdb-compare --json` on a binary stopped at every `stop_here`: gdb's
/// values of every frame against `locus dwarf vars` on gdb's cores and on the stopped
/// process (`--live`).
fn gdb_compare(exe: &Path, live: u32) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/dwarf-gdb-compare");
    let out = std::process::Command::new(script)
        .args(["--locus", LOCUS, "--break", "stop_here", "--json", "--live"])
        .arg(live.to_string())
        .arg(exe)
        .output()
        .expect("python3 and gdb are needed (scripts/install-deps)");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "dwarf-gdb-compare: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Frame `frame` of a core of `exe` stopped at its `stop`th call of `stop_here` (gdb's
/// gcore), as `locus dwarf vars --json` gives it; and gdb's backtrace there.
fn vars_at_stop(exe: &Path, dir: &TempDir, stop: u32, frame: u32) -> (Value, String) {
    let core = dir.path(&format!("core-{stop}"));
    let mut commands = vec!["break stop_here".to_owned(), "run".to_owned()];
    if stop > 1 {
        // `continue N` passes the breakpoint N - 1 times.
        commands.push(format!("continue {}", stop - 1));
    }
    commands.extend([
        "bt".to_owned(),
        format!("gcore {}", core.display()),
        "kill".to_owned(),
    ]);
    let mut gdb = std::process::Command::new("gdb");
    gdb.args(["-nx", "-batch"]);
    for c in &commands {
        gdb.args(["-ex", c]);
    }
    let out = gdb
        .arg(exe)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("gdb is needed");
    let bt = String::from_utf8_lossy(&out.stdout).into_owned();
    let exe_s = exe.to_str().unwrap();
    let core_s = core.to_str().unwrap();
    let n = frame.to_string();
    let doc = locus_json(&["dwarf", "vars", exe_s, "--core", core_s, "--frame", &n]);
    (doc["threads"][0].clone(), bt)
}

/// Variable `name` of `function` in a thread's JSON.
fn variable<'t>(thread: &'t Value, function: &str, name: &str) -> &'t Value {
    thread["variables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["function"] == function && v["name"] == name)
        .unwrap_or_else(|| panic!("no {function}:{name} in {thread}"))
}

/// The value `locus dwarf vars` gives variable `name` of `function` in a thread's JSON:
/// its number, or `<optimized out>` and why.
fn var_of(thread: &Value, function: &str, name: &str) -> (Option<String>, Option<String>) {
    let v = variable(thread, function, name);
    (
        v["number"].as_str().map(str::to_owned),
        v["optimized_out"].as_str().map(str::to_owned),
    )
}

/// Read-only data of the executable in a gdb `gcore` core, which leaves out the unwritten
/// file mappings holding it (no `PT_LOAD` at all): read from the executable, as gdb reads
/// it (it was "cannot access 17 bytes of memory"), at -O0 and -O2 with gcc and clang.
#[test]
fn read_only_data_a_core_left_out_is_read_from_the_executable() {
    let dir = TempDir::new("dwarf-rodata");
    for compiler in ["gcc", "clang-19"] {
        for level in ["-O0", "-O2"] {
            let exe = dir.path(&format!("rodata-{compiler}{level}"));
            compile(compiler, &[level, "-g"], &[&fixture("rodata.c")], &exe);
            let (thread, bt) = vars_at_stop(&exe, &dir, 1, 1);
            let var = |name: &str| variable(&thread, "lookup", name);
            let at = format!("{compiler}{level}: {bt}");
            assert_eq!(
                var("table")["value"],
                "0000010501010101010100000000000000",
                "{at}"
            );
            if compiler == "gcc" {
                // clang names no `__func__` variable.
                assert_eq!(var("__func__")["value"], "6c6f6f6b757000", "{at}");
            }
            assert_eq!(var("counter")["number"], "1", "{at}");
        }
    }
}

/// clang -flto: one unit per source and `DW_FORM_ref_addr` references across units. The
/// function inlined from the other source and its variables are found (they were missing:
/// its name and origin are in the other unit), and types defined there are named and
/// sized (they were `?` with no value).
#[test]
fn lto_references_across_units_are_followed() {
    let dir = TempDir::new("dwarf-lto");
    let exe = dir.path("lto");
    compile(
        "clang-19",
        &["-O2", "-g", "-flto", "-fuse-ld=lld"],
        &[&fixture("lto_main.c"), &fixture("lto_scale.c")],
        &exe,
    );
    let (thread, bt) = vars_at_stop(&exe, &dir, 1, 1);
    for (function, name, number, ty) in [
        ("main", "argc", "1", "int"),
        ("main", "base", "42", "int"),
        ("main", "len", "60000", "uLong"),
        ("scale", "x", "42", "int"),
        ("scale", "n", "60001", "uLong"),
        ("scale", "k", "60008", "uLong"),
    ] {
        let v = variable(&thread, function, name);
        assert_eq!(v["number"], number, "{function}:{name}: {v}\n{bt}");
        assert_eq!(v["type"], ty, "{function}:{name}: {v}");
    }
    assert_eq!(
        thread["backtrace"][1]["functions"],
        serde_json::json!(["scale", "main"]),
        "{thread}"
    );
}

/// Call sites in an abstract instance (gcc-12 -O2, `fixtures/abstract_call_site.c`): the
/// entry values of `leaf`'s parameters come from call sites that gcc put in `parse`'s
/// abstract instance, found by their return PCs (they were "no DW_TAG_call_site returns
/// to ..."). Where a value is given it is the one gdb gives (`tokens@entry=`); where not, it
/// is the call site's value that the caller's frame cannot compute (a caller-saved register).
#[test]
fn call_sites_in_an_abstract_instance_give_entry_values() {
    let dir = TempDir::new("dwarf-abstract-call-site");
    let exe = dir.path("abstract_call_site");
    compile(
        "gcc",
        &["-O2", "-g"],
        &[&fixture("abstract_call_site.c")],
        &exe,
    );
    let mut given = 0;
    for stop in 1..=5 {
        let (thread, bt) = vars_at_stop(&exe, &dir, stop, 1);
        let at = format!("stop {stop}: {thread}\n{bt}");
        assert!(thread["entry_values"]["call_site"].is_string(), "{at}");
        let tokens = variable(&thread, "leaf", "tokens");
        if let Some(why) = tokens["optimized_out"].as_str() {
            assert!(
                why.contains("cannot be computed in the caller's frame"),
                "{at}"
            );
            continue;
        }
        // The pointer's bytes, little-endian.
        let bytes = tokens["value"].as_str().unwrap_or_default();
        let value: String = (0..bytes.len() / 2)
            .rev()
            .map(|i| &bytes[2 * i..2 * i + 2])
            .collect();
        let gdb = bt
            .lines()
            .find(|l| l.starts_with("#1 "))
            .and_then(|l| l.split("tokens=tokens@entry=").nth(1))
            .and_then(|rest| rest.split([' ', ',']).next())
            .unwrap_or_else(|| panic!("no tokens@entry in gdb's frame #1: {at}"));
        let gdb = u64::from_str_radix(gdb.trim_start_matches("0x"), 16).ok();
        assert_eq!(u64::from_str_radix(&value, 16).ok(), gdb, "{at}");
        given += 1;
    }
    assert!(given >= 2, "{given} of 5 stops gave leaf's tokens");
}

/// Entry values in optimized code against gdb 13 (issue 22): the fixture built by gcc and
/// clang-19 at -O2, stopped at each `stop_here`, every frame of gdb's cores and of the
/// stopped process compared; no wrong value, and every scalar gdb prints is Locus's too
/// except where gdb shows a caller-saved register's stale value in an outer frame.
#[test]
fn entry_values_against_gdb() {
    let dir = TempDir::new("dwarf-entry-values");
    for compiler in ["gcc", "clang-19"] {
        let exe = build_entry_values(compiler, &dir);
        let doc = gdb_compare(&exe, 2);
        let count = |k: &str| doc[k].as_u64().unwrap_or(0);
        assert_eq!(count("WRONG"), 0, "{compiler}: {doc:#}");
        assert_eq!(count("locus-failed"), 0, "{compiler}: {doc:#}");
        assert_eq!(count("locus-error"), 0, "{compiler}: {doc:#}");
        assert_eq!(count("stops"), 11, "{compiler}: {doc:#}");
        assert!(count("live frames") >= 5, "{compiler}: {doc:#}");
        assert!(count("compared") >= 60, "{compiler}: {doc:#}");
        // Where Locus says <optimized out> and gdb printed a value, it is only a register
        // an outer frame does not know (gdb prints the inner frame's stale value).
        let reasons = doc["reasons"].as_object().unwrap();
        for reason in reasons.keys() {
            assert!(
                reason.contains("not known in this frame")
                    || reason.contains("is not in the target"),
                "{compiler}: {reason}"
            );
        }
        assert!(
            count("agree") * 10 >= count("compared") * 7,
            "{compiler}: {doc:#}"
        );
    }
}

/// Thread-local variables of the executable (`fixtures/tls.c`, gcc and clang-19 at -O0 and
/// -O2): each worker's own function-static `visits`, read from its static TLS block below
/// fs_base (it was "the target has no thread-local storage"); against gdb on every frame,
/// no wrong value.
#[test]
fn thread_local_variables_are_each_threads_own() {
    let dir = TempDir::new("dwarf-tls");
    for compiler in ["gcc", "clang-19"] {
        for level in ["-O0", "-O2"] {
            let exe = dir.path(&format!("tls-{compiler}{level}"));
            compile(
                compiler,
                &[level, "-g", "-pthread"],
                &[&fixture("tls.c")],
                &exe,
            );
            for id in 1..=2u32 {
                let (frame, bt) = vars_at_stop(&exe, &dir, id, 1);
                let at = format!("{compiler} {level} stop {id}: {frame:#}\n{bt}");
                let visits = (id + 1).to_string();
                assert_eq!(
                    var_of(&frame, "worker", "visits").0.as_deref(),
                    Some(visits.as_str()),
                    "{at}"
                );
            }
            let doc = gdb_compare(&exe, 0);
            assert_eq!(
                doc["WRONG"].as_u64().unwrap_or(0),
                0,
                "{compiler} {level}: {doc:#}"
            );
        }
    }
}

/// A caller frame whose call does not return (`fixtures/noreturn_call.c`, clang-19 -O2,
/// `fatal` in a unit of its own, stopped in its `pause`): clang gives the code at the
/// return address (another path's) the same register as `i` in one location-list entry
/// spanning the call, so "same location at the call and its return address" held, and
/// `i` was read from rcx as the callee left it (a wrong value). Call-clobbered registers
/// are read only after a call gcc knew returns: `i` is `<optimized out>`.
#[test]
fn a_call_that_does_not_return_keeps_no_register() {
    let dir = TempDir::new("dwarf-noreturn");
    let exe = dir.path("noreturn_call");
    let sources = [fixture("noreturn_call.c"), fixture("noreturn_fatal.c")];
    compile(
        "clang-19",
        &["-O2", "-g"],
        &[&sources[0], &sources[1]],
        &exe,
    );
    let mut child = std::process::Command::new(&exe).spawn().unwrap();
    let pid = child.id().to_string();
    let exe_s = exe.to_str().unwrap();
    // Until it waits in `fatal` (frame 1), called from `work` (frame 2).
    let mut work = Value::Null;
    for _ in 0..50 {
        let doc = locus_json(&["dwarf", "vars", exe_s, "--pid", &pid, "--frame", "2"]);
        if doc["threads"][0]["function"] == "work" {
            work = doc["threads"][0].clone();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(work["function"], "work", "{work:#}");
    let i = variable(&work, "work", "i");
    assert!(i["number"].is_null(), "{work:#}");
    assert!(
        i["optimized_out"]
            .as_str()
            .is_some_and(|w| w.contains("register 2")),
        "{work:#}"
    );
}

/// Frames above a signal handler (`fixtures/signal_frame.c`: SIGALRM interrupts `work`'s
/// loop; gcc and clang-19 -O2): the signal trampoline's CFI is DWARF expressions over the
/// signal context, which the unwinder now evaluates, so `work` (interrupted: its PC is
/// the interrupted instruction, all its registers its own) and `main` are reached; every
/// value agrees with gdb (the walk stopped at the trampoline before: 2 frames, the rest
/// "locus-failed").
#[test]
fn frames_above_a_signal_handler_are_unwound() {
    let dir = TempDir::new("dwarf-signal-frame");
    for compiler in ["gcc", "clang-19"] {
        let exe = dir.path(&format!("signal_frame-{compiler}"));
        compile(
            compiler,
            &["-O2", "-g"],
            &[&fixture("signal_frame.c")],
            &exe,
        );
        let doc = gdb_compare(&exe, 1);
        let count = |k: &str| doc[k].as_u64().unwrap_or(0);
        assert_eq!(count("WRONG"), 0, "{compiler}: {doc:#}");
        assert_eq!(count("locus-failed"), 0, "{compiler}: {doc:#}");
        assert_eq!(count("locus-error"), 0, "{compiler}: {doc:#}");
        assert!(count("frames") >= 4, "{compiler}: {doc:#}");
        assert!(count("agree") >= 3, "{compiler}: {doc:#}");
    }
}

/// Types in type units (`fixtures/type_units.c`, -fdebug-types-section: gcc's DWARF 4
/// `.debug_types` and DWARF 5, clang++-19 as C++): the variables' types are declarations
/// naming them by signature; followed, `p` and `q` are the 16-byte `point` gdb prints
/// (they were `[]` of type `?`). The variable-length array's size is not in its type: an
/// error says so (it showed as `[]`).
#[test]
fn types_in_type_units_are_followed() {
    let dir = TempDir::new("dwarf-type-units");
    let builds: [(&str, &[&str]); 3] = [
        ("gcc", &["-gdwarf-4"]),
        ("gcc", &["-gdwarf-5"]),
        ("clang++-19", &["-gdwarf-5", "-x", "c++"]),
    ];
    for (i, (compiler, flags)) in builds.into_iter().enumerate() {
        let exe = dir.path(&format!("type_units-{i}"));
        let mut all = vec!["-O0", "-g", "-fdebug-types-section"];
        all.extend_from_slice(flags);
        compile(compiler, &all, &[&fixture("type_units.c")], &exe);
        let (frame, bt) = vars_at_stop(&exe, &dir, 1, 1);
        let at = format!("{compiler} {flags:?}: {frame:#}\n{bt}");
        // p = {x = 1, y = -4, w = 2.5}; q = {x = -3, ...}
        let w = 2.5f64
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        for (name, x) in [("p", "01000000"), ("q", "fdffffff")] {
            let v = variable(&frame, "f", name);
            assert_eq!(v["type"], "point", "{name}: {at}");
            assert_eq!(v["byte_size"], 16, "{name}: {at}");
            assert_eq!(
                v["value"].as_str(),
                Some(format!("{x}fcffffff{w}").as_str()),
                "{name}: {at}"
            );
        }
        let vla = variable(&frame, "f", "vla");
        assert!(
            vla["error"]
                .as_str()
                .is_some_and(|e| e.contains("size of its type is not known")),
            "{at}"
        );
    }
}

/// C++ types without `DW_AT_byte_size` (`fixtures/references.cpp`, clang++-19 and g++ -O0):
/// rvalue references are 8 bytes, the referenced object's address as gdb prints it after
/// `@` (they were sized as the type they name: 1 byte of a `char&&`, 32 of a `Big&&`);
/// pointers to members are the Itanium ABI's 8 (data) and 16 (function: pointer and
/// adjustment) bytes, an array of three data member pointers 24 (a member function pointer
/// was sized from its member's type).
#[test]
fn references_and_member_pointers_have_their_abi_size() {
    let dir = TempDir::new("dwarf-references");
    for compiler in ["clang++-19", "g++"] {
        let exe = dir.path(&format!("references-{compiler}"));
        compile(
            compiler,
            &["-O0", "-g"],
            &[&fixture("references.cpp")],
            &exe,
        );
        let (refs, bt) = vars_at_stop(&exe, &dir, 1, 1);
        let at = format!("{compiler}: {refs:#}\n{bt}");
        assert_eq!(variable(&refs, "refs", "big")["byte_size"], 8, "{at}");
        // (gdb's backtrace shows a struct argument as `...`.)
        for name in ["c", "i", "lref"] {
            let v = variable(&refs, "refs", name);
            assert_eq!(v["byte_size"], 8, "{name}: {at}");
            // gdb: `c=@0x7fffffffe67f: 65 'A'`; Locus: the address's bytes, little-endian.
            let gdb = bt
                .split(&format!("{name}=@0x"))
                .nth(1)
                .and_then(|rest| rest.split(':').next())
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .unwrap_or_else(|| panic!("{name}: no address in gdb's backtrace: {at}"));
            let want: String = gdb
                .to_le_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(v["value"].as_str(), Some(want.as_str()), "{name}: {at}");
        }
        let (members, bt) = vars_at_stop(&exe, &dir, 2, 1);
        let at = format!("{compiler}: {members:#}\n{bt}");
        let value = |name: &str| {
            let v = variable(&members, "members", name);
            (
                v["byte_size"].as_u64(),
                v["value"].as_str().map(str::to_owned),
            )
        };
        // `a` is at 32 (after the vtable pointer and 24 bytes), `b` at 40.
        let word = |n: u64| {
            n.to_le_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        assert_eq!(value("pm"), (Some(8), Some(word(32))), "{at}");
        assert_eq!(value("pl"), (Some(8), Some(word(40))), "{at}");
        assert_eq!(value("arr"), (Some(24), Some(word(32).repeat(3))), "{at}");
        // A virtual function's is 1 + its vtable offset; the adjustment is 0.
        assert_eq!(value("pvf"), (Some(16), Some(word(1) + &word(0))), "{at}");
        let get = bt
            .split(") 0x")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .unwrap_or_else(|| panic!("no S::get address in gdb's backtrace: {at}"));
        assert_eq!(value("pmf"), (Some(16), Some(word(get) + &word(0))), "{at}");
    }
}

/// A caller's values in call-clobbered registers that gcc's IPA-RA knows the callee leaves
/// alone (`fixtures/ipa_ra.c`): in an outer frame they were `<optimized out>` ("register 5
/// is not known in this frame"); now, where the caller's location holds over the call's
/// return, they are read from the registers the inner frames left, as gdb reads them. A
/// call's result register and a value live over a call that writes every register stay
/// unknown. Against gdb on every frame of every stop (gcc and clang-19 -O2): no wrong
/// value, and gcc's `keeps(n=7, m=5)` given in frame 2.
#[test]
fn registers_the_callee_leaves_alone_are_read_in_the_caller() {
    let dir = TempDir::new("dwarf-ipa-ra");
    for compiler in ["gcc", "clang-19"] {
        let exe = dir.path(&format!("ipa_ra-{compiler}"));
        compile(compiler, &["-O2", "-g"], &[&fixture("ipa_ra.c")], &exe);
        let doc = gdb_compare(&exe, 1);
        let count = |k: &str| doc[k].as_u64().unwrap_or(0);
        assert_eq!(count("WRONG"), 0, "{compiler}: {doc:#}");
        assert_eq!(count("locus-error"), 0, "{compiler}: {doc:#}");
        assert_eq!(count("stops"), 5, "{compiler}: {doc:#}");
        if compiler == "gcc" {
            // stop_here <- leaf <- keeps(7, 5) <- main
            let (thread, bt) = vars_at_stop(&exe, &dir, 1, 2);
            for (name, value) in [("n", "7"), ("m", "5")] {
                assert_eq!(
                    var_of(&thread, "keeps", name).0.as_deref(),
                    Some(value),
                    "{name}: {thread:#}\n{bt}"
                );
            }
            assert!(count("agree") >= 25, "{doc:#}");
        }
    }
}

/// A call site in another unit (gcc -O2, `fixtures/cross_unit.c` and
/// `cross_unit_callee.c`): its DW_AT_call_origin is that unit's declaration of `work`,
/// and the out-of-line copy of `work` (also inlined in its own unit) names itself only
/// through its abstract instance. Its entry values come from main's call site, as gdb
/// gives them (they were `<optimized out>`: "whose code has no DWARF here").
#[test]
fn entry_values_through_a_declaration_in_another_unit() {
    let dir = TempDir::new("dwarf-cross-unit");
    let exe = dir.path("cross_unit");
    let sources = [fixture("cross_unit.c"), fixture("cross_unit_callee.c")];
    compile("gcc", &["-O2", "-g"], &[&sources[0], &sources[1]], &exe);
    // Stop 1: stop_here <- work(a, 4, 7) <- main.
    let (work, bt) = vars_at_stop(&exe, &dir, 1, 1);
    assert!(bt.contains("work (p=p@entry=0x"), "{bt}");
    assert!(bt.contains("n=n@entry=4, k=k@entry=7"), "{bt}");
    for (name, value) in [("n", "4"), ("k", "7")] {
        assert_eq!(
            var_of(&work, "work", name).0.as_deref(),
            Some(value),
            "{work:#}"
        );
    }
    let doc = gdb_compare(&exe, 1);
    let count = |k: &str| doc[k].as_u64().unwrap_or(0);
    assert_eq!(count("WRONG"), 0, "{doc:#}");
    assert_eq!(count("stops"), 3, "{doc:#}");
    for reason in doc["reasons"].as_object().unwrap().keys() {
        assert!(reason.contains("not known in this frame"), "{reason}");
    }
}

/// The cases one by one, gcc 12 -O2: a tail call's arguments are not the callee's
/// (leaf() reached from main through relay()'s `jmp`: gdb's chain main -> relay -> leaf);
/// two tail calls to leaf() from twice() leave no one chain; ping() and pong() tail-call
/// each other, so ping's entry values could be a later entry's; clone_me.constprop's
/// dropped parameter is DW_OP_GNU_parameter_ref, answered from the caller's
/// DW_AT_call_parameter; an indirect call's target is DW_AT_call_target (clang).
#[test]
fn entry_values_only_from_a_call_that_enters_the_function() {
    let dir = TempDir::new("dwarf-entry-cases");
    let exe = build_entry_values("gcc", &dir);
    // Stop 1: stop_here <- leaf(3, 2) <- [relay(2, 3), a tail call] <- main (argc 1).
    let (leaf, bt) = vars_at_stop(&exe, &dir, 1, 1);
    assert!(bt.contains("leaf (a=a@entry=3"), "{bt}");
    assert_eq!(
        var_of(&leaf, "leaf", "a").0.as_deref(),
        Some("3"),
        "{leaf:#}"
    );
    assert!(
        leaf["entry_values"]["call_site"]
            .as_str()
            .unwrap()
            .contains("relay"),
        "{leaf:#}"
    );
    // Stop 2: leaf(41, 11) from twice(0, 41), which tail-calls leaf from two places.
    let (leaf, _) = vars_at_stop(&exe, &dir, 2, 1);
    let why = leaf["entry_values"]["refused"].as_str().unwrap_or_default();
    assert!(why.contains("no one chain of tail calls"), "{leaf:#}");
    let (a, a_why) = var_of(&leaf, "leaf", "a");
    assert_eq!(a, None, "{leaf:#}");
    assert!(
        a_why.unwrap_or_default().contains("no one chain"),
        "{leaf:#}"
    );
    // Stop 4: ping(0) after ping(4) -> pong(3) -> ping(2) -> pong(1) -> ping(0).
    let (ping, bt) = vars_at_stop(&exe, &dir, 4, 1);
    assert!(bt.contains("ping (n=<optimized out>)"), "{bt}");
    let (n, why) = var_of(&ping, "ping", "n");
    assert_eq!(n, None, "{ping:#}");
    assert!(
        why.unwrap_or_default()
            .contains("can call itself through tail calls"),
        "{ping:#}"
    );
    // Stops 7 and 8: clone_me(61, 7) and clone_me(62, 9), `unused` dropped by IPA.
    for (stop, unused) in [(7, "7"), (8, "9")] {
        let (clone, bt) = vars_at_stop(&exe, &dir, stop, 1);
        assert!(bt.contains(&format!("unused={unused}")), "{bt}");
        assert_eq!(
            var_of(&clone, "clone_me", "unused").0.as_deref(),
            Some(unused),
            "{clone:#}"
        );
    }
    // Stop 10: direct(0, 2, 'x') called through a pointer. gcc's call site names no target:
    // refused, as gdb refuses it; clang's DW_AT_call_target (DW_OP_reg14, callee-saved)
    // evaluated in via_pointer's frame is direct: its entry values, as gdb prints them.
    let (direct, _) = vars_at_stop(&exe, &dir, 10, 1);
    let why = direct["entry_values"]["refused"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("names no target"), "{direct:#}");
    let clang = build_entry_values("clang-19", &dir);
    let (direct, bt) = vars_at_stop(&clang, &dir, 10, 1);
    assert!(bt.contains("direct (p=p@entry=0"), "{bt}");
    assert_eq!(
        var_of(&direct, "direct", "p").0.as_deref(),
        Some("0"),
        "{direct:#}"
    );
    let site = direct["entry_values"]["call_site"]
        .as_str()
        .unwrap_or_default();
    assert!(site.contains("via_pointer"), "{direct:#}");
}

/// Implicit pointers to objects that are no variable in scope, against gdb 13 (gcc -O2,
/// `fixtures/implicit_pointer.c`, DWARF 5's DW_OP_implicit_pointer and DWARF 4's
/// DW_OP_GNU_implicit_pointer): main's `myVersion` and `tail` point into a string literal,
/// a DW_TAG_dwarf_procedure (as llvm-dwarfdump-19 shows) whose location is the literal, at
/// byte offsets 0 and 8; middle's `p` and `hi` point 4 bytes into an array and a struct.
/// Each pointee is what the pointer's type reads there, as gdb prints `*p` (they had none,
/// or the whole object), and `scripts/dwarf-gdb-compare` counts every one as agreeing.
#[test]
fn implicit_pointers_to_objects_out_of_scope_match_gdb() {
    let dir = TempDir::new("dwarf-implicit-pointee");
    for debug in ["-g", "-gdwarf-4"] {
        let exe = dir.path(&format!("implicit_pointer{debug}"));
        compile(
            "gcc",
            &["-O2", debug],
            &[&fixture("implicit_pointer.c")],
            &exe,
        );
        let dump = std::process::Command::new("llvm-dwarfdump-19")
            .arg("--debug-info")
            .arg(&exe)
            .output()
            .expect("llvm-dwarfdump-19 is needed (scripts/install-deps)");
        let dump = String::from_utf8_lossy(&dump.stdout);
        let exe_s = exe.to_str().unwrap();
        let stops: [(u32, &[(&str, &str)]); 2] = [
            (1, &[("myVersion", "49 '1'"), ("tail", "109 'm'")]),
            (2, &[("p", "6"), ("hi", "15")]),
        ];
        for (stop, pointers) in stops {
            // gdb's `*p` in the caller of stop_here, and a core there for Locus.
            let core = dir.path(&format!("core{debug}-{stop}"));
            let mut commands = vec!["break stop_here".to_owned(), "run".to_owned()];
            if stop > 1 {
                commands.push(format!("continue {}", stop - 1));
            }
            commands.push("up".to_owned());
            for (name, _) in pointers {
                commands.push(format!("echo @@{name}\\n"));
                commands.push(format!("print *{name}"));
            }
            commands.extend([
                "echo @@end\\n".to_owned(),
                format!("gcore {}", core.display()),
                "kill".to_owned(),
            ]);
            let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
            let gdb = run_gdb(&exe, &commands);
            let core_s = core.to_str().unwrap();
            let doc = locus_json(&["dwarf", "vars", exe_s, "--core", core_s, "--frame", "1"]);
            let thread = &doc["threads"][0];
            let text = String::from_utf8_lossy(
                &locus(&["dwarf", "vars", exe_s, "--core", core_s, "--frame", "1"]).stdout,
            )
            .into_owned();
            for &(name, expected) in pointers {
                let theirs = between(&gdb, &format!("@@{name}\n"), "@@");
                let theirs = theirs.split(" = ").nth(1).unwrap_or_default().trim();
                assert_eq!(theirs, expected, "{debug}: gdb's *{name}:\n{gdb}");
                let v = thread["variables"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == name)
                    .unwrap_or_else(|| panic!("{debug}: no {name} in {thread:#}"));
                let to = &v["points_to"];
                assert_eq!(to["number"].as_str(), Some(theirs), "{debug}: {v:#}");
                assert!(
                    text.contains(&format!("= {theirs})")),
                    "{debug}: {name}: {text}"
                );
                if stop == 1 {
                    // Not a variable: gcc's DW_TAG_dwarf_procedure for the literal.
                    let die = v["synthetic_pointer"]["die"].as_u64().unwrap();
                    let tag = format!("0x{die:08x}:   DW_TAG_dwarf_procedure");
                    assert!(dump.contains(&tag), "{debug}: {tag} in:\n{dump}");
                    assert!(to.get("name").is_none(), "{debug}: {v:#}");
                    assert_eq!(to["value"].as_str().map(str::len), Some(2), "{v:#}");
                } else {
                    assert_eq!(v["synthetic_pointer"]["byte_offset"], 4, "{v:#}");
                    assert_eq!(to["value"].as_str().map(str::len), Some(8), "{v:#}");
                }
            }
        }
        let doc = gdb_compare(&exe, 2);
        let count = |k: &str| doc[k].as_u64().unwrap_or(0);
        assert_eq!(count("stops"), 3, "{debug}: {doc:#}");
        assert!(count("compared") >= 12, "{debug}: {doc:#}");
        assert_eq!(count("agree"), count("compared"), "{debug}: {doc:#}");
    }
}

/// An implicit pointer place keeps its bit offset and address space when a context's
/// `object_location` is printed back (`DW_OP_push_object_address`; was: both dropped, as
/// the context fuzz target found).
#[test]
fn implicit_pointer_places_round_trip() {
    let dir = TempDir::new("dwarf-implicit-pointer");
    let ctx = dir.path("ctx.json");
    let place = json!({"storage": "implicit_pointer", "die": 5, "byte_offset": 2, "space": 1, "bit_offset": 8});
    let doc = json!({"address_size": 8, "object_location": [place]});
    std::fs::write(&ctx, doc.to_string()).unwrap();
    let out = eval_json_in(&ctx, &["--result", "location", "DW_OP_push_object_address"]);
    assert_eq!(out["location"], json!([place]), "{out}");
    let place =
        json!({"storage": "implicit_pointer", "die": 5, "byte_offset": -1, "bit_offset": 0});
    let doc = json!({"address_size": 8, "object_location": [place]});
    std::fs::write(&ctx, doc.to_string()).unwrap();
    let out = eval_json_in(&ctx, &["--result", "location", "DW_OP_push_object_address"]);
    assert_eq!(out["location"], json!([place]), "{out}");
}

/// `--max-input-bytes` bounds what a compressed DWARF section decompresses to, not only the
/// file read: a 4 MiB section of zeros that llvm-objcopy-19 compresses into a few KiB is
/// refused under a 1 MB limit (one `locus:` line naming the file, the section and both
/// sizes, exit 1) and read under the default; `-gz=zlib` and `-gz=zstd` objects print what
/// the uncompressed one does; a relocatable object reads as linked.
#[test]
fn compressed_sections_are_bounded_by_max_input_bytes() {
    let dir = TempDir::new("dwarf-gz");
    let small = "int f(int x) { int y = x * 3; return y + 1; }\nint main(void) { return f(2); }\n";
    let plain = clang(&dir, "plain", small, &["-g", "-O1"]);
    let vars = |file: &Path, limit: &str| {
        locus(&[
            "--max-input-bytes",
            limit,
            "dwarf",
            "vars",
            file.to_str().unwrap(),
            "--pc",
            "f+1",
        ])
    };
    let expected = vars(&plain, "268435456");
    assert_eq!(expected.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&expected.stdout).contains('x'));
    for z in ["zlib", "zstd"] {
        let flag = format!("-gz={z}");
        let file = clang(&dir, z, small, &["-g", "-O1", &flag]);
        assert_eq!(vars(&file, "268435456").stdout, expected.stdout, "{flag}");
    }
    std::fs::write(dir.path("zeros"), vec![0u8; 4 << 20]).unwrap();
    let objcopy = |args: &[&std::ffi::OsStr]| {
        let status = std::process::Command::new("llvm-objcopy-19")
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "llvm-objcopy-19 {args:?}");
    };
    let junk = format!(".debug_junk={}", dir.path("zeros").display());
    let added = dir.path("added");
    objcopy(&[
        "--add-section".as_ref(),
        junk.as_ref(),
        plain.as_os_str(),
        added.as_os_str(),
    ]);
    let bomb = dir.path("bomb");
    objcopy(&[
        "--compress-debug-sections=zlib".as_ref(),
        added.as_os_str(),
        bomb.as_os_str(),
    ]);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 1_000_000);
    let out = vars(&bomb, "1000000");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("locus: ") && err.contains(bomb.to_str().unwrap()),
        "{err}"
    );
    assert!(
        err.contains(".debug_junk") && err.contains("4194304") && err.contains("1000000"),
        "{err}"
    );
    assert_eq!(vars(&bomb, "268435456").stdout, expected.stdout);
    // A relocatable object reads as linked (its relocations applied, `.text` at 0) but for
    // the `pc` line; with several code sections it is refused.
    let object = clang(&dir, "t.o", small, &["-g", "-O1", "-c"]);
    let out = vars(&object, "268435456");
    let text = String::from_utf8_lossy(&out.stdout);
    let linked = String::from_utf8_lossy(&expected.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        linked.lines().skip(1).collect::<Vec<_>>()
    );
    let object = clang(
        &dir,
        "s.o",
        small,
        &["-g", "-O1", "-c", "-ffunction-sections"],
    );
    let out = vars(&object, "268435456");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("relocatable object") && err.lines().count() == 1,
        "{err}"
    );
}
