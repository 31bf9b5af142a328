//! What of the JIT runtime carries over to AArch64, run for real under
//! `qemu-aarch64-static`.
//!
//! The runtime itself (crates/jit) cannot run on AArch64: its trampolines and the code it
//! patches them with are x86-64 assembly. (The toolchain could build it: scripts/
//! install-deps installs the AArch64 Rust target, the cross sysroot and Debian's AArch64
//! LLVM 19, with which cli's `gc_aarch64` tests run `locus gc run` under qemu.) What runs
//! here is the AArch64 half of the inline-cache contract, with Locus doing on the host
//! what the runtime does, and a freestanding C harness (`fixtures/aarch64/harness.c`: its
//! own `_start` and system calls) doing what the trampolines and stubs do:
//!
//! - `fixtures/aarch64/ic.ll` is compiled for `aarch64-linux-gnu` in process
//!   ([`locus_llvm::emit_object`]); its stack maps print exactly as those of `llc-19`'s
//!   object of the same IR (`llvm-readobj-19 --stackmap`), and Locus's index of the linked
//!   executable's section gives the records `llvm-readobj-19` gives;
//! - every miss reports its return address; Locus's index finds the patch point at
//!   `return address - 16` (LLVM's AArch64 patch point call is `movz/movk/movk x16; blr
//!   x16`), and the bytes LLVM put there equal Locus's AArch64 call encoding of the miss
//!   handler (`locus_stackmap::patch::encode_call`);
//! - Locus's encodings of calls to the stubs (checked against `llvm-mc-19`) are written
//!   over each site's reserved bytes (read-write, then read-execute, caches flushed), and
//!   the program then gives the same answer with the misses and hits a per-site cache
//!   predicts; patching back to the miss handler restores LLVM's bytes and all misses.
//!
//! LLVM 19's AArch64 patch point lowering takes the call target as an immediate: a
//! symbolic target (`ptr @locus_ic_miss`, as the x86-64 runtime's programs use) is emitted
//! as the address of LLVM's own in-memory object for the symbol, not relocated (the
//! program then jumps into the compiler's heap). So the program is linked twice: once to
//! learn the miss handler's address, then with that address as an integer target.

#![allow(clippy::unwrap_used)]

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::process::Command;

use locus_llvm::{emit_object, Context, Module};
use locus_stackmap::object::find_section;
use locus_stackmap::patch::{encode_call, Arch};
use locus_stackmap::{parse_section, ParseOptions, StackMapIndex};

type TestResult = Result<(), Box<dyn StdError>>;

const TRIPLE: &str = "aarch64-linux-gnu";
const QEMU: &str = "qemu-aarch64-static";
/// Rounds of `@run` in the harness (its `ROUNDS`).
const ROUNDS: u64 = 4;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/aarch64")
        .join(name)
}

/// A fresh directory for the test's files, removed when it is dropped.
fn scratch() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("locus-jit-aarch64-")
        .tempdir()
}

/// Runs `program` and returns its standard output; fails if it does not succeed.
fn run(program: &str, args: &[&str]) -> Result<String, Box<dyn StdError>> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program} ({e}); scripts/install-deps installs it"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {} failed ({:?}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `ic.ll` with the miss handler at `miss` as the patch points' integer target.
fn program(miss: u64) -> Result<String, Box<dyn StdError>> {
    let ir = std::fs::read_to_string(fixture("ic.ll"))?;
    Ok(ir.replace(
        "ptr @locus_ic_miss, i32 2",
        &format!("ptr inttoptr (i64 {miss} to ptr), i32 2"),
    ))
}

/// Compiles `ir` for AArch64 in process to `dir/ic.o` and links it after the harness into
/// a static executable.
fn build(dir: &Path, ir: &str) -> Result<PathBuf, Box<dyn StdError>> {
    let context = Context::new();
    let module = Module::parse_ir(&context, "ic.ll", ir.as_bytes())?;
    let object = emit_object(&module, TRIPLE, "", "")?;
    let ic = dir.join("ic.o");
    std::fs::write(&ic, object)?;
    let harness = dir.join("harness.o");
    if !harness.exists() {
        run(
            "clang-19",
            &[
                &format!("--target={TRIPLE}"),
                "-O1",
                "-ffreestanding",
                "-fno-builtin",
                "-nostdlib",
                "-c",
                path(&fixture("harness.c")),
                "-o",
                path(&harness),
            ],
        )?;
    }
    let exe = dir.join("ic");
    run(
        "ld.lld-19",
        &["-static", path(&harness), path(&ic), "-o", path(&exe)],
    )?;
    Ok(exe)
}

/// The address of symbol `name` in `exe`.
fn symbol(exe: &Path, name: &str) -> Result<u64, Box<dyn StdError>> {
    let nm = run("llvm-nm-19", &[path(exe)])?;
    nm.lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            let (address, _, sym) = (words.next()?, words.next()?, words.next()?);
            (sym == name).then(|| u64::from_str_radix(address, 16).ok())?
        })
        .ok_or_else(|| format!("no symbol {name}").into())
}

/// What one run of the harness printed.
#[derive(Debug)]
struct Output {
    /// (return address, shape, 24 bytes from return address - 16) of each distinct miss.
    misses_seen: Vec<(u64, u64, Vec<u8>)>,
    result: i64,
    misses: u64,
    hits: u64,
}

fn unhex(s: &str) -> Result<Vec<u8>, Box<dyn StdError>> {
    (0..s.len())
        .step_by(2)
        .map(|i| Ok(u8::from_str_radix(s.get(i..i + 2).ok_or("odd hex")?, 16)?))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs the harness under qemu with `patches` (site, bytes) applied first.
fn harness(exe: &Path, patches: &[(u64, Vec<u8>)]) -> Result<Output, Box<dyn StdError>> {
    let args: Vec<String> = patches
        .iter()
        .map(|(site, bytes)| format!("{site:x}={}", hex(bytes)))
        .collect();
    let mut all = vec![path(exe)];
    all.extend(args.iter().map(String::as_str));
    let text = run(QEMU, &all)?;
    let mut out = Output {
        misses_seen: Vec::new(),
        result: 0,
        misses: 0,
        hits: 0,
    };
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["miss", lr, shape, bytes] => out.misses_seen.push((
                u64::from_str_radix(lr.trim_start_matches("0x"), 16)?,
                shape.parse()?,
                unhex(bytes)?,
            )),
            ["result", h] => out.result = h.parse()?,
            ["misses", m, "hits", k] => {
                out.misses = m.parse()?;
                out.hits = k.parse()?;
            }
            _ => return Err(format!("unexpected output: {line}").into()),
        }
    }
    Ok(out)
}

/// What `@run` returns for the harness's objects.
fn model() -> i64 {
    // (x, y, z) of o0, o1, o2.
    let objects: [(i64, i64, i64); 3] = [(3, 4, 5), (10, 20, 30), (-2, 7, 11)];
    let mut h: i64 = 17;
    for _ in 0..ROUNDS {
        for (x, y, z) in objects {
            h = h.wrapping_mul(31).wrapping_add(x * x + y * y) ^ (3 * z);
        }
    }
    h
}

/// `llvm-mc-19`'s encoding of `text` for AArch64.
fn assemble(text: &str, dir: &Path) -> Result<Vec<u8>, Box<dyn StdError>> {
    let s = dir.join("patch.s");
    std::fs::write(&s, text)?;
    let out = run(
        "llvm-mc-19",
        &["-triple=aarch64-linux-gnu", "-show-encoding", path(&s)],
    )?;
    let mut bytes = Vec::new();
    for line in out.lines() {
        let Some(start) = line.find("encoding: [") else {
            continue;
        };
        let list = &line[start + 11..];
        let list = list.split(']').next().unwrap_or_default();
        for b in list.split(',') {
            bytes.push(u8::from_str_radix(b.trim().trim_start_matches("0x"), 16)?);
        }
    }
    Ok(bytes)
}

/// The patch point call LLVM emits for `target` (below 2^48), nop-padded to `reserved`.
fn call_text(target: u64, reserved: usize) -> String {
    let mut text = format!(
        "movz x16, #{}, lsl #32\nmovk x16, #{}, lsl #16\nmovk x16, #{}\nblr x16\n",
        (target >> 32) & 0xffff,
        (target >> 16) & 0xffff,
        target & 0xffff
    );
    for _ in 0..(reserved - 16) / 4 {
        text.push_str("nop\n");
    }
    text
}

/// What `llvm-readobj-19 --stackmap` prints: each record's (ID, instruction offset), and
/// each function's address.
type Printed = (Vec<(u64, u64)>, Vec<u64>);

/// The records and functions `llvm-readobj-19 --stackmap` prints for `file`.
fn readobj_records(file: &Path) -> Result<Printed, Box<dyn StdError>> {
    let text = run("llvm-readobj-19", &["--stackmap", path(file)])?;
    let mut records = Vec::new();
    let mut functions = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Record ID: ") {
            let (id, offset) = rest
                .split_once(", instruction offset: ")
                .ok_or("bad record line")?;
            records.push((id.parse()?, offset.parse()?));
        } else if let Some(rest) = line.strip_prefix("Function address: ") {
            functions.push(rest.split(',').next().unwrap_or_default().parse()?);
        }
    }
    Ok((records, functions))
}

#[test]
fn aarch64_patch_points_are_found_patched_and_put_back_under_qemu() -> TestResult {
    let scratch = scratch()?;
    let dir = scratch.path();
    // Link once to learn where the miss handler is, then with it as the target; the
    // harness comes first and the program's size does not change, so it stays put.
    let exe = build(dir, &program(0x1000)?)?;
    let miss = symbol(&exe, "locus_ic_miss")?;
    let ir = program(miss)?;
    let exe = build(dir, &ir)?;
    assert_eq!(symbol(&exe, "locus_ic_miss")?, miss);

    // In-process code generation gives the stack maps llc-19 gives.
    let ll = dir.join("ic.ll");
    std::fs::write(&ll, &ir)?;
    let llc = dir.join("llc.o");
    run(
        "llc-19",
        &[
            &format!("-mtriple={TRIPLE}"),
            "-relocation-model=pic",
            "-filetype=obj",
            path(&ll),
            "-o",
            path(&llc),
        ],
    )?;
    let ours = run("llvm-readobj-19", &["--stackmap", path(&dir.join("ic.o"))])?;
    let theirs = run("llvm-readobj-19", &["--stackmap", path(&llc)])?;
    let body = |s: &str| s.lines().skip(3).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&ours), body(&theirs));

    // Locus's index of the executable's section has llvm-readobj's records.
    let data = std::fs::read(&exe)?;
    let (_, section) = find_section(&data)?;
    let section = section.ok_or("no stack map section")?;
    assert_eq!(section.arch, Some(Arch::AArch64));
    let tables = parse_section(section.resolved(), section.endian, ParseOptions::default())?;
    let index = StackMapIndex::new(tables, 0);
    let (records, functions) = readobj_records(&exe)?;
    let mut indexed: Vec<(u64, u64)> = index
        .iter()
        .map(|r| (r.record.id(), r.address - r.function.address))
        .collect();
    indexed.sort_unstable();
    let mut expected = records.clone();
    expected.sort_unstable();
    assert_eq!(indexed, expected);
    assert_eq!(records.len(), 3);
    assert_eq!(functions, [symbol(&exe, "norm")?, symbol(&exe, "weight")?]);
    let reserved = |id: u64| if id == 3 { 24 } else { 16 };

    // Every read misses: 3 sites x 3 objects x ROUNDS. Each miss's return address is
    // 16 bytes past a patch point record, where LLVM's bytes are Locus's call encoding.
    let first = harness(&exe, &[])?;
    assert_eq!(first.result, model());
    assert_eq!((first.misses, first.hits), (9 * ROUNDS, 0));
    assert_eq!(first.misses_seen.len(), 6, "{first:?}");
    let mut sites = Vec::new();
    for (lr, _, bytes) in &first.misses_seen {
        let site = lr - 16;
        let id = index
            .lookup(site)
            .map(|r| r.record.id())
            .next()
            .ok_or_else(|| format!("no record at {site:#x}"))?;
        let n = reserved(id);
        assert_eq!(
            bytes[..n],
            encode_call(Arch::AArch64, miss, n)?[..],
            "site {id}"
        );
        if !sites.contains(&(id, site)) {
            sites.push((id, site));
        }
    }
    sites.sort_unstable();
    assert_eq!(sites.len(), 3);

    // Each site patched to call the stub for shape 0 (the slot of its property there).
    let mut patches = Vec::new();
    let mut back = Vec::new();
    for (id, site) in &sites {
        let stub = symbol(&exe, &format!("stub_s0_k{}", id - 1))?;
        let n = reserved(*id);
        let bytes = encode_call(Arch::AArch64, stub, n)?;
        assert_eq!(bytes, assemble(&call_text(stub, n), dir)?, "site {id}");
        patches.push((*site, bytes));
        back.push((*site, encode_call(Arch::AArch64, miss, n)?));
    }
    let patched = harness(&exe, &patches)?;
    assert_eq!(patched.result, model());
    // o0 and o2 (shape 0) hit at every site; o1 (shape 1) misses through the stub's tail
    // call, whose return address is still the site's.
    assert_eq!((patched.misses, patched.hits), (3 * ROUNDS, 6 * ROUNDS));
    let mut missed: Vec<(u64, u64)> = patched
        .misses_seen
        .iter()
        .map(|(lr, shape, _)| (lr - 16, *shape))
        .collect();
    missed.sort_unstable();
    let mut want: Vec<(u64, u64)> = sites.iter().map(|(_, site)| (*site, 1)).collect();
    want.sort_unstable();
    assert_eq!(missed, want);

    // Patched back to the miss handler: LLVM's bytes again, and every read misses.
    let mut all = patches.clone();
    all.extend(back.iter().cloned());
    let restored = harness(&exe, &all)?;
    assert_eq!(restored.result, model());
    assert_eq!((restored.misses, restored.hits), (9 * ROUNDS, 0));
    for (lr, _, bytes) in &restored.misses_seen {
        let original = first
            .misses_seen
            .iter()
            .find(|(l, _, _)| l == lr)
            .ok_or("a new return address")?;
        assert_eq!(bytes, &original.2);
    }
    Ok(())
}
