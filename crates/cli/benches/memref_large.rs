//! `locus memref call` on large arrays against numpy doing the same arithmetic with its own
//! file I/O, side by side (issue 14, section 5): wall time and peak memory (the child's
//! maximum resident set, from `wait4`) of
//!
//! - `locus memref call k.so scale --arg A.npy --out R.npy`, where `scale` returns a fresh
//!   `a * 2 + 1`, and
//! - `python3 -c 'a = np.load(A); r = a * 2; r += 1; np.save(R, r)'`.
//!
//! The results must be equal byte for byte. Printed: the medians of 3 alternating runs,
//! the time ratio (goal: locus at most 1.5x numpy's) and each side's peak memory over the
//! input array's size (goal: locus at most 2.5x). `LOCUS_BENCH_ELEMENTS` sets the size
//! (default 100M f32 elements: 400 MB per array; the files go to the target directory).
//! numpy comes from `scripts/install-deps` (python3-numpy).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const KERNEL: &str = "\
func.func @scale(%a: memref<?xf32>) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2.0 : f32
  %one = arith.constant 1.0 : f32
  %n = memref.dim %a, %c0 : memref<?xf32>
  %r = memref.alloc(%n) : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xf32>
    %y = arith.mulf %x, %two : f32
    %z = arith.addf %y, %one : f32
    memref.store %z, %r[%i] : memref<?xf32>
  }
  return %r : memref<?xf32>
}
";

const NUMPY: &str = "import sys, numpy as np
a = np.load(sys.argv[1])
r = a * np.float32(2)
r += np.float32(1)
np.save(sys.argv[2], r)
";

/// Runs `cmd` and returns its wall time and peak resident set in bytes.
fn measure(cmd: &mut Command) -> (Duration, u64) {
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, waited for once, here (the `Child` is not waited).
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(waited, pid, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed ({status})"
    );
    std::mem::forget(child);
    // ru_maxrss is in kilobytes on Linux.
    (elapsed, usage.ru_maxrss as u64 * 1024)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The data of a `.npy` file (after its header).
fn npy_data(path: &Path) -> Vec<u8> {
    let file = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = locus_memref::npy::NpyHeader::parse(&file).unwrap_or_else(|e| panic!("{e}"));
    file[header.data_offset..].to_vec()
}

/// A Python with numpy: `python3` first, else the system's (where `python3-numpy` goes).
fn python() -> &'static str {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .args(["-c", "import numpy"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| panic!("no python3 with numpy: run scripts/install-deps"))
}

fn main() {
    let n: usize = std::env::var("LOCUS_BENCH_ELEMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000_000);
    let locus = env!("CARGO_BIN_EXE_locus");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("memref-large");
    std::fs::create_dir_all(&dir).unwrap();
    let kernel = dir.join("scale.mlir");
    std::fs::write(&kernel, KERNEL).unwrap();
    let so = dir.join("scale.so");
    let out = Command::new(locus)
        .args(["memref", "compile"])
        .arg(&kernel)
        .arg("-o")
        .arg(&so)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The input, written in chunks so this process stays small.
    let input = dir.join("a.npy");
    {
        let header =
            locus_memref::npy::NpyHeader::encode(locus_memref::npy::Dtype::F32, &[n], false);
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        f.write_all(&header).unwrap();
        let mut chunk = Vec::with_capacity(1 << 20);
        for i in 0..n {
            chunk.extend_from_slice(&((i % 1000) as f32 * 0.25).to_le_bytes());
            if chunk.len() >= 1 << 20 {
                f.write_all(&chunk).unwrap();
                chunk.clear();
            }
        }
        f.write_all(&chunk).unwrap();
        f.flush().unwrap();
    }
    let input_bytes = (4 * n) as f64;
    let python = python();
    let (r_locus, r_numpy) = (dir.join("r_locus.npy"), dir.join("r_numpy.npy"));
    let (mut lt, mut lm, mut nt, mut nm) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (t, m) = measure(
            Command::new(locus)
                .args(["memref", "call"])
                .arg(&so)
                .args([
                    "scale",
                    "--sig",
                    "(memref<?xf32>) -> memref<?xf32>",
                    "--arg",
                ])
                .arg(&input)
                .arg("--out")
                .arg(&r_locus),
        );
        lt.push(t.as_secs_f64());
        lm.push(m as f64);
        let (t, m) = measure(
            Command::new(python)
                .args(["-c", NUMPY])
                .arg(&input)
                .arg(&r_numpy),
        );
        nt.push(t.as_secs_f64());
        nm.push(m as f64);
    }
    assert!(
        npy_data(&r_locus) == npy_data(&r_numpy),
        "locus and numpy computed different arrays"
    );
    let (lt, lm, nt, nm) = (median(lt), median(lm), median(nt), median(nm));
    println!(
        "== memref call on {n} f32 elements ({:.0} MB per array), medians of 3 ==",
        input_bytes / 1e6
    );
    println!(
        " locus: {:.3} s, peak {:.0} MB = {:.2}x the input (goal <= 2.5: {})",
        lt,
        lm / 1e6,
        lm / input_bytes,
        if lm / input_bytes <= 2.5 {
            "met"
        } else {
            "missed"
        }
    );
    println!(
        " numpy: {:.3} s, peak {:.0} MB = {:.2}x the input",
        nt,
        nm / 1e6,
        nm / input_bytes
    );
    println!(
        " ratio locus/numpy time = {:.2} (goal <= 1.5: {})",
        lt / nt,
        if lt / nt <= 1.5 { "met" } else { "missed" }
    );
    for f in [&input, &r_locus, &r_numpy] {
        let _ = std::fs::remove_file(f);
    }
}
