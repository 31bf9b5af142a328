//! Damaged bitcode is refused before LLVM's reader sees it, naming the byte offset.
//!
//! The inputs are `llvm-as-19` output of the crate's fixtures (made at test time), raw and
//! in the wrapper header LLVM writes for Darwin triples, changed at every byte and cut
//! short at many lengths. The oracle for what is well-formed is LLVM itself: every
//! undamaged file passes the check and parses, and every input the check refuses, LLVM's
//! reader (`llvm-dis-19`) or its bitstream walk (`llvm-bcanalyzer-19`) refuses, on a
//! sample.

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_llvm::bitcode::{self, BitcodeError};
use locus_llvm::{Context, Error, Module};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A directory of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("locus-bitcode-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `llvm-as-19` of `ll` (text), in `dir`.
fn assemble(dir: &Path, name: &str, ll: &str) -> Vec<u8> {
    let src = dir.join(format!("{name}.ll"));
    let out = dir.join(format!("{name}.bc"));
    std::fs::write(&src, ll).unwrap_or_else(|e| panic!("{e}"));
    let status = Command::new("llvm-as-19")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("llvm-as-19: {e}"));
    assert!(status.success(), "llvm-as-19 {name}");
    std::fs::read(&out).unwrap_or_else(|e| panic!("{e}"))
}

/// The fixtures as bitcode: each raw, and one in the Darwin wrapper.
fn inputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all = Vec::new();
    for name in ["debug_info", "cfg", "ir_walk"] {
        let ll = std::fs::read_to_string(fixture(&format!("{name}.ll")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        all.push((name.to_string(), assemble(dir, name, &ll)));
        if name == "cfg" {
            // A Darwin triple makes LLVM's writer put the wrapper header in front.
            let darwin = ll
                .lines()
                .filter(|l| !l.starts_with("target triple") && !l.starts_with("target datalayout"))
                .collect::<Vec<_>>()
                .join("\n");
            let darwin = format!("target triple = \"x86_64-apple-macosx\"\n{darwin}\n");
            let bc = assemble(dir, "cfg_darwin", &darwin);
            assert_eq!(bc[..4], [0xde, 0xc0, 0x17, 0x0b], "no wrapper header");
            all.push(("cfg_darwin".to_string(), bc));
        }
    }
    all
}

/// The damaged versions of `bc`: every byte changed (three ways in turn), and cut short at
/// every length that is a multiple of 4 up to 64 bytes, then every 13th.
fn damaged(bc: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..bc.len() {
        let mut d = bc.to_vec();
        d[i] = match i % 3 {
            0 => d[i] ^ 0xff,
            1 => d[i].wrapping_add(1),
            _ => d[i] ^ 0x10,
        };
        out.push((format!("byte {i} changed"), d));
    }
    for len in (0..bc.len()).filter(|l| (l % 4 == 0 && *l <= 64) || l % 13 == 0) {
        out.push((format!("cut at {len}"), bc[..len].to_vec()));
    }
    out
}

#[test]
fn undamaged_bitcode_passes_and_parses() {
    let dir = Scratch::new("whole");
    for (name, bc) in inputs(&dir.0) {
        bitcode::check(&bc).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ctx = Context::new();
        let module = Module::parse_ir(&ctx, &name, &bc).unwrap_or_else(|e| panic!("{name}: {e}"));
        module.verify().unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn damaged_bitcode_is_refused_naming_an_offset() {
    let dir = Scratch::new("damaged");
    let (mut refused, mut total) = (0, 0);
    let ctx = Context::new();
    for (name, bc) in inputs(&dir.0) {
        for (what, d) in damaged(&bc) {
            if !bitcode::is_bitcode(&d) {
                continue; // no magic number: IR text to LLVM
            }
            total += 1;
            let Err(e) = bitcode::check(&d) else {
                continue;
            };
            refused += 1;
            let BitcodeError { offset, message } = &e;
            assert!(
                *offset <= d.len() as u64 && !message.is_empty(),
                "{name}, {what}: {e}"
            );
            // What the check refuses, parse_ir refuses the same way (LLVM never sees it).
            match Module::parse_ir(&ctx, "d.bc", &d) {
                Err(Error::Parse { message }) => assert!(
                    message.starts_with("d.bc: error: malformed bitcode at byte "),
                    "{name}, {what}: {message}"
                ),
                other => panic!("{name}, {what}: {other:?}"),
            };
        }
    }
    // Most damage is in records' contents, which only LLVM's reader can judge.
    assert!(refused > total / 10, "{refused} of {total} refused");
    eprintln!("{refused} of {total} damaged inputs refused by the check");
}

/// Random bitstreams after the magic number (and random wrapper headers): the check never
/// panics, and a refusal names an offset inside the input. (LLVM is not run on them.)
#[test]
fn random_bitstreams_are_judged_without_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        // xorshift64*: a fixed sequence, the same on every run.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut refused = 0;
    for i in 0..4000 {
        let words = 1 + (next() % 128) as usize;
        let mut d: Vec<u8> = (0..words * 4).map(|_| next() as u8).collect();
        if i % 4 == 0 {
            // A wrapper header whose offset and size are random but mostly small.
            let mut w = vec![0xde, 0xc0, 0x17, 0x0b, 0, 0, 0, 0];
            w.extend_from_slice(&((next() % 64) as u32).to_le_bytes());
            w.extend_from_slice(&((next() % 600) as u32).to_le_bytes());
            w.extend_from_slice(&[0; 4]);
            w.extend_from_slice(b"BC\xc0\xde");
            w.extend_from_slice(&d);
            d = w;
        } else {
            d.splice(0..0, *b"BC\xc0\xde");
        }
        if let Err(e) = bitcode::check(&d) {
            refused += 1;
            assert!(e.offset <= d.len() as u64, "{e}");
        }
    }
    assert!(refused > 3000, "{refused} of 4000 refused");
}

/// Whether `tool` (an LLVM tool taking a bitcode file) reads `path` without error.
fn llvm_reads(tool: &str, path: &Path, args: &[&str]) -> bool {
    Command::new(tool)
        .arg(path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
        .status
        .success()
}

/// What the check refuses, LLVM refuses too: its reader (`llvm-dis-19`) fails or crashes
/// on it, or its walk of the bitstream (`llvm-bcanalyzer-19`) finds it malformed. (LLVM's
/// reader reaches function bodies through the offsets of the value symbol table, so it
/// never reads some damaged bytes between them; `llvm-bcanalyzer-19`, reading in order,
/// does.) A sample: every 16th damaged input of one fixture, and the wrapped one's header.
#[test]
fn what_the_check_refuses_llvm_refuses() {
    let dir = Scratch::new("llvm-dis");
    let all = inputs(&dir.0);
    let path = dir.0.join("d.bc");
    let mut compared = 0;
    for (name, bc) in all
        .iter()
        .filter(|(n, _)| n == "debug_info" || n == "cfg_darwin")
    {
        for (k, (what, d)) in damaged(bc).into_iter().enumerate() {
            if name == "cfg_darwin" && !what.starts_with("byte") {
                continue;
            }
            let sample = if name == "cfg_darwin" {
                k < 12
            } else {
                k % 16 == 0
            };
            if !sample || !bitcode::is_bitcode(&d) || bitcode::check(&d).is_ok() {
                continue;
            }
            std::fs::write(&path, &d).unwrap_or_else(|e| panic!("{e}"));
            compared += 1;
            assert!(
                !llvm_reads("llvm-dis-19", &path, &["-o", "/dev/null"])
                    || !llvm_reads("llvm-bcanalyzer-19", &path, &[]),
                "{name}, {what}: refused ({}) but LLVM reads it",
                bitcode::check(&d)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default()
            );
        }
    }
    assert!(compared > 20, "{compared}");
}

/// Writes the damaged inputs to `LOCUS_BITCODE_DAMAGED_DIR`, with whether the check refuses
/// each (`.refused` beside it): for measuring what reaches LLVM, with the CLI.
#[test]
#[ignore = "writes files for a measurement; run by hand"]
fn write_damaged_inputs() {
    let Some(out) = std::env::var_os("LOCUS_BITCODE_DAMAGED_DIR") else {
        return;
    };
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("{e}"));
    let dir = Scratch::new("write");
    for (name, bc) in inputs(&dir.0) {
        for (k, (_, d)) in damaged(&bc).into_iter().enumerate() {
            let file = out.join(format!("{name}-{k}.bc"));
            std::fs::write(&file, &d).unwrap_or_else(|e| panic!("{e}"));
            if bitcode::check(&d).is_err() {
                std::fs::write(file.with_extension("refused"), "")
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}
