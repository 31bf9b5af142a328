//! Chapter: DWARF location descriptions on the stack (spec 001).
//!
//! First the spec's own example of a variable spread across two vector registers, one lane
//! each, evaluated step by step against a made-up GPU context. Then a real optimized
//! binary: clang-19 -g -O2 builds a small C function, gdb stops in it and records the
//! registers (at the function's entry too: the entry values) and the stack; Locus finds
//! the variables in scope at that PC, evaluates their location expressions against what
//! gdb recorded, and must print what gdb prints.

use std::collections::BTreeMap;

use locus_dwarf::binary::{self, Frame, MemoryBlock, Snapshot, VariableLocation};
use locus_dwarf::{decode, parse_text, to_text, Encoding, Evaluation, Op};
use locus_stackmap::regs::register_number;
use locus_stackmap::Arch;

use super::{tool, Tour};
use crate::Failure;

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(format!("dwarf chapter: {e}"))
}

/// The spec's "Source Language Variable Spread Across Multiple Vector Registers".
const MULTI_LANE: &str = "DW_OP_regx VGPR0; DW_OP_push_lane; DW_OP_uconst 4; DW_OP_mul; \
    DW_OP_offset; DW_OP_piece 4; DW_OP_regx VGPR1; DW_OP_push_lane; DW_OP_uconst 4; DW_OP_mul; \
    DW_OP_offset; DW_OP_piece 4";

const SOURCE: &str = r#"volatile long sink_total;
__attribute__((noinline)) void sink(long x) { sink_total += x; }
struct pair { int lo; int hi; };
__attribute__((noinline)) int split(int a, int b)
{
    struct pair p = {a * 3, b + 7};
    long sum = (long)a + b;
    sink(p.lo);
    sink(p.hi); /* gdb stops here */
    sink(sum);
    return p.lo + p.hi;
}
int main(void) { return split(5, 4) & 0x7f; }
"#;

/// The line gdb stops at (1-based).
const STOP_LINE: usize = 9;

pub fn run_chapter(tour: &mut Tour<'_>) -> Result<(), Failure> {
    spec_example(tour)?;
    tour.line("")?;
    against_gdb(tour)
}

fn spec_example(tour: &mut Tour<'_>) -> Result<(), Failure> {
    tour.line("The spec's variable spread across two vector registers, lane 3 of each")?;
    tour.line("(VGPR0 = DWARF register 2560, VGPR1 = 2561; lane i of VGPR0 holds i*0x100):")?;
    let names = |n: &str| match n {
        "VGPR0" => Some(2560),
        "VGPR1" => Some(2561),
        _ => None,
    };
    let ops = parse_text(MULTI_LANE, names).map_err(fail)?;
    let mut snap = Snapshot {
        lane: Some(3),
        ..Snapshot::default()
    };
    let lanes = |add: u32| -> Vec<u8> {
        (0..64u32)
            .flat_map(|i| (i * 0x100 + add).to_le_bytes())
            .collect()
    };
    snap.registers.insert(2560, lanes(0));
    snap.registers.insert(2561, lanes(1));
    // Step by step: the stack after each of the first six operations.
    for k in 1..=6u64 {
        let mut ev = Evaluation::new(&ops, Encoding::default());
        ev.set_max_steps(k);
        let _ = binary::run(&mut ev, &ops, &snap, Frame::default());
        let stack: Vec<String> = ev
            .stack()
            .iter()
            .rev()
            .map(|e| crate::dwarf::render::draw_entry(e, 8))
            .collect();
        let op = ops
            .get(k as usize - 1)
            .map(|o| to_text(std::slice::from_ref(o)))
            .unwrap_or_default();
        tour.line(format!(
            "  {op:<22} stack (top first): {}",
            stack.join(" | ")
        ))?;
    }
    let mut ev = Evaluation::new(&ops, Encoding::default());
    binary::run(&mut ev, &ops, &snap, Frame::default()).map_err(|e| fail(e.report()))?;
    let loc = ev.location_result().ok_or_else(|| fail("no location"))?;
    let bits = binary::read(&loc, 64, &snap).map_err(fail)?;
    tour.line("  ... (the same for VGPR1), then the result: a composite of two 32-bit parts,")?;
    tour.line("  register 2560 at bit 96 and register 2561 at bit 96.")?;
    if bits.to_hex() != "0003000001030000" {
        return Err(fail(format!(
            "read {} through the composite",
            bits.to_hex()
        )));
    }
    tour.passed(format!(
        "reading 8 bytes through it gives lane 3 of both registers: {}",
        bits.to_hex()
    ))
}

/// Parses `info registers` output into DWARF-numbered little-endian registers.
fn registers(text: &str) -> BTreeMap<u16, Vec<u8>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(name), Some(value)) = (f.next(), f.next()) else {
            continue;
        };
        // The general-purpose registers and rip, which `info registers` lists first.
        let Some(n) = register_number(Arch::X86_64, name) else {
            continue;
        };
        if let Ok(v) = u64::from_str_radix(value.trim_start_matches("0x"), 16) {
            out.insert(n, v.to_le_bytes().to_vec());
        }
    }
    out
}

/// The text between two markers gdb was asked to echo.
fn section<'t>(text: &'t str, from: &str, to: &str) -> &'t str {
    let start = text.find(from).map_or(text.len(), |i| i + from.len());
    let rest = &text[start..];
    &rest[..rest.find(to).unwrap_or(rest.len())]
}

fn against_gdb(tour: &mut Tour<'_>) -> Result<(), Failure> {
    tour.line("A real optimized binary: clang-19 -g -O2 of this function")?;
    for line in SOURCE.lines().skip(3).take(9) {
        tour.line(format!("    {line}"))?;
    }
    let src = tour.scratch_file("split.c");
    let exe = tour.scratch_file("split");
    let stack = tour.scratch_file("stack.bin");
    std::fs::write(&src, SOURCE).map_err(|e| fail(format!("{}: {e}", src.display())))?;
    let (src_s, exe_s, stack_s) = (
        src.display().to_string(),
        exe.display().to_string(),
        stack.display().to_string(),
    );
    tool(
        "clang-19",
        &["-g", "-O2", "-no-pie", "-o", &exe_s, &src_s],
        None,
    )?;
    let stop = format!("break split.c:{STOP_LINE}");
    let dump = format!("dump binary memory {stack_s} $sp-256 $sp+512");
    let gdb = tool(
        "gdb",
        &[
            "-batch",
            "-nx",
            "-ex",
            "break *split",
            "-ex",
            &stop,
            "-ex",
            "run",
            "-ex",
            "echo @@entry\\n",
            "-ex",
            "info registers",
            "-ex",
            "echo @@end\\n",
            "-ex",
            "continue",
            "-ex",
            "echo @@stop\\n",
            "-ex",
            "info registers",
            "-ex",
            "echo @@end\\n",
            "-ex",
            &dump,
            "-ex",
            "echo @@a\\n",
            "-ex",
            "print a",
            "-ex",
            "echo @@b\\n",
            "-ex",
            "print b",
            "-ex",
            "echo @@sum\\n",
            "-ex",
            "print sum",
            "-ex",
            "echo @@p\\n",
            "-ex",
            "print p",
            "-ex",
            "echo @@end\\n",
            "-ex",
            "kill",
            &exe_s,
        ],
        None,
    )?;
    let entry = registers(section(&gdb, "@@entry", "@@end"));
    let regs = registers(section(&gdb, "@@stop", "@@end"));
    let pc = regs
        .get(&16)
        .map(|b| u64::from_le_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
        .ok_or_else(|| fail(format!("gdb did not stop in split:\n{gdb}")))?;
    let sp = regs
        .get(&7)
        .map(|b| u64::from_le_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
        .unwrap_or(0);
    let bytes = std::fs::read(&stack).map_err(|e| fail(format!("{stack_s}: {e}")))?;
    let snap = Snapshot {
        registers: regs,
        entry_registers: entry,
        memory: vec![MemoryBlock {
            space: 0,
            address: sp.wrapping_sub(256),
            bytes,
        }],
        ..Snapshot::default()
    };
    tour.line(format!(
        "gdb stops at pc {pc:#x} (line {STOP_LINE}) after recording the registers at split's entry;"
    ))?;
    tour.line(
        "Locus reads the DWARF at that pc and evaluates each variable against gdb's registers:",
    )?;
    let data = std::fs::read(&exe).map_err(|e| fail(format!("{exe_s}: {e}")))?;
    let vars = binary::variables_at(&data, pc, 0).map_err(fail)?;
    let mut checked = 0;
    for name in ["a", "b", "sum", "p"] {
        let v = vars
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| fail(format!("Locus finds no variable `{name}` at {pc:#x}")))?;
        let text = match &v.location {
            VariableLocation::Expression(b) => {
                let ops: Vec<Op> = decode(b, v.encoding)
                    .map_err(fail)?
                    .into_iter()
                    .map(|(_, op)| op)
                    .collect();
                crate::dwarf::render::ops_text(&ops, v.encoding)
            }
            other => format!("{other:?}"),
        };
        let value = binary::evaluate_variable(v, &snap).map_err(|e| fail(e.report()))?;
        let ours = render(name, &value.bits);
        let theirs = section(&gdb, &format!("@@{name}\n"), "@@")
            .trim()
            .split_once(" = ")
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        tour.line(format!(
            "  {name:<4} {text:<60} Locus: {ours:<32} gdb: {theirs}"
        ))?;
        if ours != theirs {
            return Err(fail(format!("`{name}`: Locus says {ours}, gdb {theirs}")));
        }
        checked += 1;
    }
    tour.line(
        "  (a and b are dead at the stop: DW_OP_entry_value reads their registers at entry;",
    )?;
    tour.line(
        "   p.lo was never kept anywhere: its piece is empty, so Locus reads it as undefined)",
    )?;
    tour.passed(format!(
        "gdb 13 prints the same values for all {checked} variables, entry values and pieces included"
    ))
}

/// Formats a value the way gdb prints these variables: ints in decimal, the struct's
/// fields, `<optimized out>` for undefined bits.
fn render(name: &str, bits: &locus_dwarf::access::Bits) -> String {
    let int = |from: usize, len: usize| -> String {
        let mut b = [0u8; 8];
        for (i, slot) in b.iter_mut().enumerate().take(len) {
            match bits.byte(from + i) {
                Some(x) => *slot = x,
                None => return "<optimized out>".to_string(),
            }
        }
        let v = u64::from_le_bytes(b);
        if len == 4 {
            (v as u32 as i32).to_string()
        } else {
            (v as i64).to_string()
        }
    };
    match name {
        "p" => format!("{{lo = {}, hi = {}}}", int(0, 4), int(4, 4)),
        "sum" => int(0, 8),
        _ => int(0, 4),
    }
}
