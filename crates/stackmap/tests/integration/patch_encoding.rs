//! Checks the patch encoders against LLVM itself.
//!
//! At test time, `llc-19` compiles patch points with many `numBytes` values, for x86-64
//! (with each nop tuning) and AArch64, into objects in a temporary directory. The test
//! reads each patch region out of `.text` (function symbol + the stack map record's
//! instruction offset, `numBytes` long) and compares it with what `locus_stackmap::patch`
//! encodes: a null-target patch point is nops only; a constant-target one is LLVM's call
//! sequence followed by nops.
//!
//! `llvm-mc-19` then disassembles our call sequences (and assembles the AArch64 one from
//! text) as an independent check of the instruction encodings.
//!
//! Missing LLVM 19 tools make the tests fail with a message saying so.

use std::fs;

use std::process::Command;

use locus_stackmap::patch::{self, aarch64, x86_64, Arch};

use crate::common;

use common::{llvm_tool, TempDir};

type TestResult = Result<(), String>;

// ---------------------------------------------------------------------------------------
// Tools and scratch space
// ---------------------------------------------------------------------------------------

/// Runs a command, returning its stdout; a failure carries stderr.
fn run(cmd: &mut Command, stdin: Option<&str>) -> Result<String, String> {
    use std::io::Write;
    use std::process::Stdio;

    let shown = format!("{cmd:?}");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("{shown}: {e}"))?;
    if let Some(mut pipe) = child.stdin.take() {
        if let Some(text) = stdin {
            pipe.write_all(text.as_bytes())
                .map_err(|e| format!("{shown}: stdin: {e}"))?;
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("{shown}: output not UTF-8: {e}"))
}

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

/// LLVM IR with one function `f<n>` per size, each holding a void patch point with ID `n`,
/// `numBytes` `n`, no call arguments, and the given constant target (0 = null).
fn patchpoint_module(target: u64, sizes: &[usize]) -> String {
    let mut ir =
        String::from("declare void @llvm.experimental.patchpoint.void(i64, i32, ptr, i32, ...)\n");
    for n in sizes {
        ir.push_str(&format!(
            "define void @f{n}() {{\n\
             entry:\n  \
               call void (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.void(\
             i64 {n}, i32 {n}, ptr inttoptr (i64 {target} to ptr), i32 0)\n  \
               ret void\n\
             }}\n"
        ));
    }
    ir
}

/// Compiles `ir` with `llc-19 -filetype=obj` and returns, for each patch point, its ID
/// (= `numBytes`) and the bytes of its reserved region.
fn compile_regions(
    dir: &TempDir,
    name: &str,
    triple: &str,
    cpu: Option<&str>,
    ir: &str,
) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let llc = llvm_tool("llc")?;
    let ll = dir.0.join(format!("{name}.ll"));
    let obj = dir.0.join(format!("{name}.o"));
    fs::write(&ll, ir).map_err(|e| format!("writing {}: {e}", ll.display()))?;
    let mut cmd = Command::new(llc);
    cmd.arg(format!("-mtriple={triple}")).arg("-filetype=obj");
    if let Some(cpu) = cpu {
        cmd.arg(format!("-mcpu={cpu}"));
    }
    cmd.arg(&ll).arg("-o").arg(&obj);
    run(&mut cmd, None)?;
    let data = fs::read(&obj).map_err(|e| format!("reading {}: {e}", obj.display()))?;

    let elf = Elf::new(&data)?;
    let text = elf.section(".text")?;
    let stackmaps = elf.section(".llvm_stackmaps")?;
    let mut regions = Vec::new();
    for (id, offset) in stackmap_records(stackmaps)? {
        let function = elf.symbol(&format!("f{id}"))?;
        let start = usize::try_from(function + u64::from(offset)).map_err(|e| e.to_string())?;
        let len = usize::try_from(id).map_err(|e| e.to_string())?;
        let bytes = text
            .get(start..start + len)
            .ok_or_else(|| format!("{name}: region of f{id} at {start:#x}+{len} outside .text"))?;
        regions.push((id, bytes.to_vec()));
    }
    if regions.len() != ir.matches("define void").count() {
        return Err(format!("{name}: found {} stack map records", regions.len()));
    }
    Ok(regions)
}

// ---------------------------------------------------------------------------------------
// Minimal ELF64 little-endian and stack map readers (independent of the crate's parser)
// ---------------------------------------------------------------------------------------

fn u16_at(d: &[u8], at: usize) -> Result<u16, String> {
    d.get(at..at + 2)
        .and_then(|b| b.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or_else(|| format!("truncated at {at:#x}"))
}

fn u32_at(d: &[u8], at: usize) -> Result<u32, String> {
    d.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| format!("truncated at {at:#x}"))
}

fn u64_at(d: &[u8], at: usize) -> Result<u64, String> {
    d.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| format!("truncated at {at:#x}"))
}

fn usize_at(d: &[u8], at: usize) -> Result<usize, String> {
    usize::try_from(u64_at(d, at)?).map_err(|e| e.to_string())
}

fn c_str(d: &[u8], at: usize) -> Result<&str, String> {
    let tail = d
        .get(at..)
        .ok_or_else(|| format!("string at {at:#x} outside table"))?;
    let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
    std::str::from_utf8(&tail[..end]).map_err(|e| e.to_string())
}

struct Section<'a> {
    name: &'a str,
    kind: u32,
    link: usize,
    data: &'a [u8],
}

struct Elf<'a> {
    sections: Vec<Section<'a>>,
}

impl<'a> Elf<'a> {
    fn new(d: &'a [u8]) -> Result<Self, String> {
        if d.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
            return Err("not an ELF64 little-endian object".into());
        }
        let shoff = usize_at(d, 0x28)?;
        let shentsize = usize::from(u16_at(d, 0x3a)?);
        let shnum = usize::from(u16_at(d, 0x3c)?);
        let shstrndx = usize::from(u16_at(d, 0x3e)?);
        let mut raw = Vec::new();
        for i in 0..shnum {
            let h = shoff + i * shentsize;
            let (name, kind) = (u32_at(d, h)?, u32_at(d, h + 4)?);
            let (offset, size) = (usize_at(d, h + 24)?, usize_at(d, h + 32)?);
            let link = u32_at(d, h + 40)? as usize;
            let data = if kind == 8 {
                &d[..0] // SHT_NOBITS
            } else {
                d.get(offset..offset + size).ok_or("section outside file")?
            };
            raw.push((name as usize, kind, link, data));
        }
        let names = raw
            .get(shstrndx)
            .map(|s| s.3)
            .ok_or("no section name table")?;
        let sections = raw
            .iter()
            .map(|&(name, kind, link, data)| {
                Ok(Section {
                    name: c_str(names, name)?,
                    kind,
                    link,
                    data,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Elf { sections })
    }

    fn section(&self, name: &str) -> Result<&'a [u8], String> {
        self.sections
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.data)
            .ok_or_else(|| format!("no {name} section"))
    }

    /// The value of the symbol `name` (its offset in `.text` in a relocatable object).
    fn symbol(&self, name: &str) -> Result<u64, String> {
        let symtab = self
            .sections
            .iter()
            .find(|s| s.kind == 2)
            .ok_or("no .symtab")?;
        let strtab = self.sections.get(symtab.link).ok_or("no .strtab")?.data;
        for entry in symtab.data.chunks_exact(24) {
            if c_str(strtab, u32_at(entry, 0)? as usize)? == name {
                return u64_at(entry, 8);
            }
        }
        Err(format!("no symbol {name}"))
    }
}

/// The (ID, instruction offset) of every record of a version 3 `.llvm_stackmaps` table.
fn stackmap_records(d: &[u8]) -> Result<Vec<(u64, u32)>, String> {
    if d.first() != Some(&3) {
        return Err("stack map version is not 3".into());
    }
    let num_functions = u32_at(d, 4)? as usize;
    let num_constants = u32_at(d, 8)? as usize;
    let num_records = u32_at(d, 12)? as usize;
    let mut at = 16 + num_functions * 24 + num_constants * 8;
    let mut records = Vec::new();
    for _ in 0..num_records {
        let id = u64_at(d, at)?;
        let offset = u32_at(d, at + 8)?;
        let num_locations = usize::from(u16_at(d, at + 14)?);
        at += 16 + num_locations * 12;
        at = at.next_multiple_of(8);
        let num_live_outs = usize::from(u16_at(d, at + 2)?);
        at += 4 + num_live_outs * 4;
        at = at.next_multiple_of(8);
        records.push((id, offset));
    }
    Ok(records)
}

// ---------------------------------------------------------------------------------------
// x86-64
// ---------------------------------------------------------------------------------------

/// The CPUs whose tuning gives each nop maximum (None = `llc` without `-mcpu`).
const X86_TUNINGS: [(Option<&str>, x86_64::NopTuning); 4] = [
    (None, x86_64::NopTuning::Max10),
    (Some("silvermont"), x86_64::NopTuning::Max7),
    (Some("bdver1"), x86_64::NopTuning::Max11),
    (Some("x86-64"), x86_64::NopTuning::Max15),
];

const X86_TARGET: u64 = 0x1122_3344_5566_7788;

#[test]
fn x86_64_null_target_padding_matches_llc() -> TestResult {
    let dir = TempDir::new("x86-null")?;
    let sizes: Vec<usize> = (0..=48).collect();
    let ir = patchpoint_module(0, &sizes);
    for (cpu, tuning) in X86_TUNINGS {
        let name = format!("x86-null-{}", cpu.unwrap_or("default"));
        let regions = compile_regions(&dir, &name, "x86_64-linux-gnu", cpu, &ir)?;
        for (n, llc_bytes) in regions {
            let n = n as usize;
            let ours = x86_64::encode_nops_tuned(n, tuning);
            assert_eq!(ours, llc_bytes, "{name}: {n} bytes of nops");
            if cpu.is_none() {
                assert_eq!(patch::encode_nops(Arch::X86_64, n).as_ref(), Ok(&llc_bytes));
            }
        }
    }
    Ok(())
}

#[test]
fn x86_64_call_and_padding_match_llc() -> TestResult {
    let dir = TempDir::new("x86-call")?;
    let sizes: Vec<usize> = (13..=48).collect();
    for target in [X86_TARGET, 0x1000, 0xffff_0000_0000_0002] {
        let ir = patchpoint_module(target, &sizes);
        for (cpu, tuning) in X86_TUNINGS {
            let name = format!("x86-call-{target:x}-{}", cpu.unwrap_or("default"));
            let regions = compile_regions(&dir, &name, "x86_64-linux-gnu", cpu, &ir)?;
            for (n, llc_bytes) in regions {
                let n = n as usize;
                let ours = x86_64::encode_call_tuned(target, n, tuning);
                assert_eq!(
                    ours.as_ref(),
                    Ok(&llc_bytes),
                    "{name}: patch point of {n} bytes"
                );
                if cpu.is_none() {
                    assert_eq!(
                        patch::encode_call(Arch::X86_64, target, n).as_ref(),
                        Ok(&llc_bytes)
                    );
                }
            }
        }
    }
    Ok(())
}

/// Disassembles `bytes` with `llvm-mc-19 --disassemble` and returns the instruction lines
/// (mnemonic and operands, comments dropped).
fn disassemble(triple: &str, bytes: &[u8]) -> Result<Vec<String>, String> {
    let mc = llvm_tool("llvm-mc")?;
    // AArch64 immediates start with '#', so its comments are '//'.
    let comment = if triple.starts_with("aarch64") {
        "//"
    } else {
        "#"
    };
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:#04x}")).collect();
    let out = run(
        Command::new(mc)
            .arg("--disassemble")
            .arg("--print-imm-hex")
            .arg(format!("-triple={triple}")),
        Some(&hex.join(" ")),
    )?;
    Ok(out
        .lines()
        .map(|l| l.split(comment).next().unwrap_or("").trim())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty() && !l.starts_with('.'))
        .collect())
}

/// Parses an immediate as llvm-mc prints it with `--print-imm-hex` (`0x..` or `-0x..`).
fn parse_imm(text: &str) -> Result<u64, String> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits = digits
        .strip_prefix("0x")
        .ok_or_else(|| format!("immediate {text:?}"))?;
    let value = u64::from_str_radix(digits, 16).map_err(|e| format!("immediate {text:?}: {e}"))?;
    Ok(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[test]
fn x86_64_call_disassembles_as_movabs_call_nops() -> TestResult {
    for target in [X86_TARGET, 0, 1, u64::MAX, 0x8000_0000_0000_0000] {
        for (_, tuning) in X86_TUNINGS {
            let reserved = 50;
            let bytes =
                x86_64::encode_call_tuned(target, reserved, tuning).map_err(|e| e.to_string())?;
            let lines = disassemble("x86_64", &bytes)?;
            let movabs = lines.first().ok_or("no instructions")?;
            let imm = movabs
                .strip_prefix("movabsq $")
                .and_then(|rest| rest.strip_suffix(", %r11"))
                .ok_or_else(|| format!("expected movabsq $imm, %r11, got {movabs:?}"))?;
            assert_eq!(parse_imm(imm)?, target, "{movabs}");
            assert_eq!(lines.get(1).map(String::as_str), Some("callq *%r11"));
            let nops = &lines[2..];
            assert!(
                nops.iter().all(|l| l.starts_with("nop")),
                "{tuning:?}: {nops:?}"
            );
            let max = tuning.max_len();
            assert_eq!(
                nops.len(),
                (reserved - 13).div_ceil(max),
                "{tuning:?}: {nops:?}"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// AArch64
// ---------------------------------------------------------------------------------------

/// Runs a `movz`/`movk`* / `blr` sequence of instruction words and returns the register
/// branched through and its value, and the number of bytes the sequence took.
fn run_aarch64_call(bytes: &[u8]) -> Result<(u32, u64, usize), String> {
    let mut regs = [0u64; 32];
    for (i, word) in bytes.chunks_exact(4).enumerate() {
        let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        let rd = (word & 31) as usize;
        let imm = u64::from((word >> 5) & 0xffff);
        let shift = ((word >> 21) & 3) * 16;
        match word & 0xff80_0000 {
            0xd280_0000 => regs[rd] = imm << shift,
            0xf280_0000 => regs[rd] = (regs[rd] & !(0xffff << shift)) | (imm << shift),
            _ if word & 0xffff_fc1f == 0xd63f_0000 => {
                let rn = (word >> 5) & 31;
                return Ok((rn, regs[rn as usize], (i + 1) * 4));
            }
            _ => return Err(format!("unexpected instruction {word:#010x} at {}", i * 4)),
        }
    }
    Err("no blr".into())
}

const NOP_BYTES: [u8; 4] = aarch64::NOP.to_le_bytes();

#[test]
fn aarch64_null_target_padding_matches_llc() -> TestResult {
    let dir = TempDir::new("a64-null")?;
    let sizes: Vec<usize> = (0..=64).step_by(4).collect();
    let regions = compile_regions(
        &dir,
        "a64-null",
        "aarch64-linux-gnu",
        None,
        &patchpoint_module(0, &sizes),
    )?;
    for (n, llc_bytes) in regions {
        let n = n as usize;
        assert_eq!(
            patch::encode_nops(Arch::AArch64, n).as_ref(),
            Ok(&llc_bytes),
            "{n} bytes"
        );
    }
    Ok(())
}

/// LLVM's AArch64 call is 16 bytes and loads 48 bits; ours is 20 bytes and loads 64. For a
/// 48-bit target both must branch through x16 to the same address, and the nops after
/// byte 20 must be identical.
#[test]
fn aarch64_call_and_padding_match_llc() -> TestResult {
    let dir = TempDir::new("a64-call")?;
    let sizes: Vec<usize> = (16..=64).step_by(4).collect();
    for target in [0x0000_1234_5678_9abc_u64, 0x1000, 0xffff_ffff_ffff] {
        let name = format!("a64-call-{target:x}");
        let regions = compile_regions(
            &dir,
            &name,
            "aarch64-linux-gnu",
            None,
            &patchpoint_module(target, &sizes),
        )?;
        for (n, llc_bytes) in regions {
            let n = n as usize;
            let (reg, value, len) = run_aarch64_call(&llc_bytes)?;
            assert_eq!(
                (reg, value, len),
                (16, target, 16),
                "{name}: llc's call, {n} bytes"
            );
            assert!(
                llc_bytes[16..].chunks(4).all(|c| c == NOP_BYTES),
                "{name}: {n}"
            );
            // Below 2^48 Locus emits LLVM's own 16-byte form: the whole region must equal
            // what llc-19 emitted for the same target and size.
            let ours = patch::encode_call(Arch::AArch64, target, n).map_err(|e| e.to_string())?;
            assert_eq!(ours, llc_bytes, "{name}: {n} bytes");
            assert_eq!(
                run_aarch64_call(&ours)?,
                (16, target, 16),
                "{name}: our call, {n} bytes"
            );
        }
    }
    Ok(())
}

#[test]
fn aarch64_call_assembles_from_text() -> TestResult {
    let mc = llvm_tool("llvm-mc")?;
    let target = 0xfedc_ba98_7654_3210_u64;
    let asm = format!(
        "movz x16, #{:#x}\nmovk x16, #{:#x}, lsl #16\nmovk x16, #{:#x}, lsl #32\n\
         movk x16, #{:#x}, lsl #48\nblr x16\nnop\n",
        target & 0xffff,
        (target >> 16) & 0xffff,
        (target >> 32) & 0xffff,
        target >> 48
    );
    let out = run(
        Command::new(mc)
            .arg("-triple=aarch64")
            .arg("-show-encoding"),
        Some(&asm),
    )?;
    let mut assembled = Vec::new();
    for line in out.lines() {
        if let Some(enc) = line.split("encoding: [").nth(1) {
            for byte in enc.trim_end_matches(']').split(',') {
                assembled.push(parse_imm(byte.trim())? as u8);
            }
        }
    }
    let ours = patch::encode_call(Arch::AArch64, target, 24).map_err(|e| e.to_string())?;
    assert_eq!(ours, assembled, "llvm-mc output:\n{out}");
    Ok(())
}

#[test]
fn aarch64_call_disassembles_as_movz_movk_blr_nops() -> TestResult {
    for target in [0u64, 1, 0xfedc_ba98_7654_3210, u64::MAX, 0x1_0000_0000] {
        let bytes = patch::encode_call(Arch::AArch64, target, 32).map_err(|e| e.to_string())?;
        let lines = disassemble("aarch64", &bytes)?;
        assert_eq!(lines.len(), 8, "{lines:?}");
        // Below 2^48 the sequence is LLVM's: three moves (bits 47:32 first); above, four.
        let moves = patch::call_sequence_len(Arch::AArch64, target) / 4 - 1;
        assert_eq!(moves, if target >> 48 == 0 { 3 } else { 4 });
        // llvm-mc prints movz as its alias `mov x16, #value` (already shifted) when it can,
        // else as `movz x16, #imm, lsl #shift`.
        let mut x16 = match lines[0].strip_prefix("mov x16, #") {
            Some(value) => parse_imm(value)?,
            None => 0,
        };
        let movz = lines[0].starts_with("movz x16, #");
        if !movz && !lines[0].starts_with("mov x16, #") {
            return Err(format!("expected mov(z) x16, got {:?}", lines[0]));
        }
        let first = usize::from(!movz);
        for line in &lines[first..moves] {
            let rest = line
                .strip_prefix("movk x16, #")
                .or_else(|| line.strip_prefix("movz x16, #"))
                .ok_or_else(|| format!("expected movk x16, got {line:?}"))?;
            let (imm, shift) = match rest.split_once(", lsl #") {
                Some((imm, shift)) => (imm, shift.parse::<u32>().map_err(|e| e.to_string())?),
                None => (rest, 0),
            };
            x16 = (x16 & !(0xffff << shift)) | (parse_imm(imm)? << shift);
        }
        assert_eq!(x16, target, "{lines:?}");
        assert_eq!(lines[moves], "blr x16");
        assert!(lines[moves + 1..].iter().all(|l| l == "nop"), "{lines:?}");
    }
    Ok(())
}
