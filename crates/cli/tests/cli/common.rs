//! Helpers shared by the CLI's integration tests: temporary directories, running LLVM's
//! tools and the `locus` binary, and a small ELF reader for finding sections and symbols.

// Each test binary uses a different subset.
#![allow(dead_code)]

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub const LLC: &str = "llc-19";
pub const READOBJ: &str = "llvm-readobj-19";
pub const LLD: &str = "ld.lld-19";
pub const LOCUS: &str = env!("CARGO_BIN_EXE_locus");
/// What the tests give `locus gc build` to link with lld (`ld.lld` of clang-19's, from
/// scripts/install-deps): GNU ld takes 1.6 s to link a program against the debug runtime
/// library, lld 0.45 s, and the tests link many. One test links with the default.
pub const FAST_LINK: &str = "--link-arg=-fuse-ld=lld";
// ---------------------------------------------------------------------------------------------
// Small helpers: temporary directories, running tools, diffs.
// ---------------------------------------------------------------------------------------------

/// A fresh directory under the system temp dir, removed when the test passes and kept (with its
/// path printed) when it fails.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "locus-readobj-{tag}-{}-{n}-{nanos}",
            std::process::id()
        ));
        fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create temp dir {}: {e}", dir.display()));
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("(kept the test's files in {})", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stackmap")
}

pub fn fixture(name: &str) -> PathBuf {
    fixture_dir().join(name)
}

/// All `.ll` fixtures, sorted by name.
pub fn fixtures() -> Vec<PathBuf> {
    let dir = fixture_dir();
    let entries = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read fixture dir {}: {e}", dir.display()));
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no .ll fixtures in {}", dir.display());
    out
}

pub fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs a command; a missing program is a test failure with a message saying what to install.
pub fn run(program: &str, args: &[&str]) -> Output {
    match Command::new(program).args(args).output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => panic!(
            "`{program}` was not found on PATH. The readobj oracle needs the LLVM 19 tools \
             llc-19, llvm-readobj-19 and ld.lld-19 (Debian packages llvm-19 and lld-19; \
             scripts/install-deps installs them). This test does not skip."
        ),
        Err(e) => panic!("cannot run `{program} {}`: {e}", args.join(" ")),
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn path_str(path: &Path) -> &str {
    path.to_str()
        .unwrap_or_else(|| panic!("non-UTF-8 path {}", path.display()))
}

/// Runs a tool that must succeed; returns its stdout.
pub fn run_ok(program: &str, args: &[&str]) -> Vec<u8> {
    let out = run(program, args);
    if !out.status.success() {
        panic!(
            "`{program} {}` failed ({}):\n{}",
            args.join(" "),
            out.status,
            text(&out.stderr)
        );
    }
    out.stdout
}

/// `llc-19 -mtriple=TRIPLE -filetype=obj SRC -o OUT`.
pub fn compile(src: &Path, triple: &str, out: &Path) {
    let mtriple = format!("-mtriple={triple}");
    run_ok(
        LLC,
        &[
            &mtriple,
            "-filetype=obj",
            path_str(src),
            "-o",
            path_str(out),
        ],
    );
}

/// `llvm-readobj-19 --stackmap FILE`, which must succeed without warnings.
pub fn readobj(obj: &Path) -> Vec<u8> {
    let args = ["--stackmap", path_str(obj)];
    let out = run(READOBJ, &args);
    if !out.status.success() || !out.stderr.is_empty() {
        panic!(
            "`{READOBJ} --stackmap {}` did not run cleanly ({}):\n{}",
            obj.display(),
            out.status,
            text(&out.stderr)
        );
    }
    out.stdout
}

/// `locus stackmap FILE`.
pub fn locus(obj: &Path) -> Output {
    match Command::new(LOCUS)
        .args(["stackmap", path_str(obj)])
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("cannot run {LOCUS}: {e}"),
    }
}

/// A readable report of the lines where `expected` (llvm-readobj) and `actual` (locus) differ,
/// compared line by line: two lines of context, then up to eight differing pairs.
pub fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.split_inclusive('\n').collect();
    let a: Vec<&str> = actual.split_inclusive('\n').collect();
    let n = e.len().max(a.len());
    let differing: Vec<usize> = (0..n).filter(|&i| e.get(i) != a.get(i)).collect();
    let mut out = format!(
        "{} of {n} lines differ (llvm-readobj: {} lines, {} bytes; locus: {} lines, {} bytes)\n",
        differing.len(),
        e.len(),
        expected.len(),
        a.len(),
        actual.len()
    );
    let Some(&first) = differing.first() else {
        return out;
    };
    for (i, line) in e
        .iter()
        .enumerate()
        .take(first)
        .skip(first.saturating_sub(2))
    {
        out.push_str(&format!("             {:>4}   {line:?}\n", i + 1));
    }
    let show = |lines: &[&str], i: usize| match lines.get(i) {
        Some(line) => format!("{line:?}"),
        None => "(output ended)".to_string(),
    };
    for &i in differing.iter().take(8) {
        out.push_str(&format!("llvm-readobj {:>4}   {}\n", i + 1, show(&e, i)));
        out.push_str(&format!("       locus {:>4}   {}\n", i + 1, show(&a, i)));
    }
    if differing.len() > 8 {
        out.push_str(&format!(
            "... and {} more differing lines\n",
            differing.len() - 8
        ));
    }
    out
}

/// Compares locus's run on `obj` with llvm-readobj's output.
pub fn check_identical(
    label: &str,
    obj: &Path,
    expected: &[u8],
    got: &Output,
) -> Result<(), String> {
    if !got.status.success() {
        return Err(format!(
            "{label}: `locus stackmap {}` failed ({}); stderr:\n{}",
            obj.display(),
            got.status,
            text(&got.stderr)
        ));
    }
    if got.stdout == expected {
        return Ok(());
    }
    Err(format!(
        "{label}: `locus stackmap {}` differs from llvm-readobj-19\n{}{}",
        obj.display(),
        diff(&text(expected), &text(&got.stdout)),
        if got.stderr.is_empty() {
            String::new()
        } else {
            format!("locus stderr:\n{}", text(&got.stderr))
        }
    ))
}

// ---------------------------------------------------------------------------------------------
// A tiny ELF64 little-endian reader: section headers and the symbol table.
// ---------------------------------------------------------------------------------------------

pub struct ElfSection {
    pub name: String,
    pub kind: u32,
    pub link: u32,
    /// File offset of the section's contents.
    pub offset: usize,
    pub size: usize,
    /// File offset of the section header itself.
    pub header: usize,
}

pub fn rd_u16(d: &[u8], at: usize) -> u16 {
    match d.get(at..at + 2) {
        Some(b) => u16::from_le_bytes([b[0], b[1]]),
        None => panic!("read past the end of the file at {at:#x}"),
    }
}

pub fn rd_u32(d: &[u8], at: usize) -> u32 {
    match d.get(at..at + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => panic!("read past the end of the file at {at:#x}"),
    }
}

pub fn rd_u64(d: &[u8], at: usize) -> u64 {
    match d.get(at..at + 8) {
        Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => panic!("read past the end of the file at {at:#x}"),
    }
}

pub fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or_else(|_| panic!("{v} does not fit usize"))
}

pub fn c_string(d: &[u8], at: usize) -> String {
    let tail = d.get(at..).unwrap_or_default();
    let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
    String::from_utf8_lossy(&tail[..end]).into_owned()
}

/// The section headers of an ELF64 little-endian file (what llc-19/ld.lld-19 write for
/// x86_64-linux-gnu and aarch64-linux-gnu).
pub fn elf_sections(d: &[u8]) -> Vec<ElfSection> {
    assert!(
        d.len() >= 64 && d[..4] == *b"\x7fELF" && d[4] == 2 && d[5] == 1,
        "not an ELF64 little-endian file"
    );
    let shoff = to_usize(rd_u64(d, 0x28));
    let shentsize = usize::from(rd_u16(d, 0x3a));
    let shnum = usize::from(rd_u16(d, 0x3c));
    let shstrndx = usize::from(rd_u16(d, 0x3e));
    let raw: Vec<(u32, u32, u32, usize, usize, usize)> = (0..shnum)
        .map(|i| {
            let h = shoff + i * shentsize;
            (
                rd_u32(d, h),                // sh_name
                rd_u32(d, h + 4),            // sh_type
                rd_u32(d, h + 40),           // sh_link
                to_usize(rd_u64(d, h + 24)), // sh_offset
                to_usize(rd_u64(d, h + 32)), // sh_size
                h,
            )
        })
        .collect();
    let strtab = raw
        .get(shstrndx)
        .map(|r| r.3)
        .unwrap_or_else(|| panic!("bad e_shstrndx {shstrndx}"));
    raw.into_iter()
        .map(|(name, kind, link, offset, size, header)| ElfSection {
            name: c_string(d, strtab + name as usize),
            kind,
            link,
            offset,
            size,
            header,
        })
        .collect()
}

pub fn stackmap_section(d: &[u8]) -> ElfSection {
    elf_sections(d)
        .into_iter()
        .find(|s| s.name == ".llvm_stackmaps")
        .unwrap_or_else(|| panic!("the object has no .llvm_stackmaps section"))
}

/// The value of the symbol `name` in the ELF file's `.symtab`.
pub fn elf_symbol(d: &[u8], name: &str) -> u64 {
    let sections = elf_sections(d);
    let symtab = sections
        .iter()
        .find(|s| s.kind == 2) // SHT_SYMTAB
        .unwrap_or_else(|| panic!("no .symtab"));
    let strtab = sections
        .get(symtab.link as usize)
        .unwrap_or_else(|| panic!("bad .symtab sh_link"));
    (0..symtab.size / 24)
        .map(|i| symtab.offset + i * 24)
        .find(|&sym| c_string(d, strtab.offset + rd_u32(d, sym) as usize) == name)
        .map(|sym| rd_u64(d, sym + 8))
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

/// Offset (from the start of the section) of the first ConstantIndex location of the first
/// table, and the table's NumConstants. Walks the layout of the spec's "Stack Map Format".
pub fn first_constant_index_location(section: &[u8]) -> (usize, u32) {
    let num_functions = rd_u32(section, 4) as usize;
    let num_constants = rd_u32(section, 8);
    let num_records = rd_u32(section, 12);
    let align8 = |x: usize| (x + 7) & !7;
    let mut rec = 16 + 24 * num_functions + 8 * num_constants as usize;
    for _ in 0..num_records {
        let num_locations = usize::from(rd_u16(section, rec + 14));
        for j in 0..num_locations {
            let loc = rec + 16 + 12 * j;
            if section[loc] == 5 {
                return (loc, num_constants);
            }
        }
        let live_outs_at = align8(rec + 16 + 12 * num_locations) + 2;
        let num_live_outs = usize::from(rd_u16(section, live_outs_at));
        rec = align8(live_outs_at + 2 + 4 * num_live_outs);
    }
    panic!("the table has no ConstantIndex location");
}
