//! Locus's own conformance suite for root placement, checked with LLVM's FileCheck.
//!
//! Every module in `fixtures/filecheck` is written for this suite (not copied from Julia)
//! and states, in FileCheck directives, what Julia's `LateLowerGCFrame` (and, for
//! `; mode: final`, `FinalLowerGC`) does with it: which values get a slot, how many slots
//! the frame has, where the stores and null stores go, the lifted `%gclift` selects and
//! phis, and the frame's layout and linking. Its first line is `; mode: intermediate`
//! (stop at `julia.new_gc_frame` and friends) or `; mode: final`; a second line
//! `; barriers: frontend|insert|auto` picks who places the write barriers (default `auto`,
//! the lowering's default).
//!
//! Each fixture is lowered in process, LLVM's verifier must accept the result, and
//! `FileCheck-19 FIXTURE --input-file OUT` must accept the printed module. A fixture on
//! which Locus is known to differ from Julia is listed in `KNOWN_FAILURES` with the
//! reason; its checks still say what Julia does. The test fails if any fixture outside
//! that list fails, and also if a listed one passes (so the list cannot go stale).
//!
//! FileCheck is not optional: without `FileCheck-19` (or `/usr/lib/llvm-19/bin/FileCheck`)
//! the test fails and says to run `scripts/install-deps`.

mod common;

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::lower::{lower_module_with, LowerOptions, ThreadOptions, WriteBarriers};
use locus_llvm::{Context, Module};

use common::ll_files;

/// Fixtures on which Locus's output is known to differ from Julia's, with the reason.
/// The checks in these files are Julia's; remove an entry when the lowering is fixed.
const KNOWN_FAILURES: &[(&str, &str)] = &[
    (
        "loop_phi.ll",
        "extra null stores of the back-edge value's slot at the top of %a and %latch, where \
         Julia stores only the phi (harmless: that slot's value is dead there)",
    ),
    (
        "vector_insert_shuffle.ll",
        "a shufflevector of Tracked pointers is rooted as a new value (its lanes extracted \
         and stored) instead of as the values put into its lanes: same objects, extra stores",
    ),
];

/// The FileCheck binary: `FileCheck-19` on PATH, else LLVM 19's own directory.
fn filecheck() -> PathBuf {
    let on_path = Command::new("FileCheck-19").arg("--version").output();
    match on_path {
        Ok(_) => PathBuf::from("FileCheck-19"),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let fallback = PathBuf::from("/usr/lib/llvm-19/bin/FileCheck");
            assert!(
                fallback.is_file(),
                "neither `FileCheck-19` on PATH nor {} exists: run scripts/install-deps \
                 (it installs LLVM 19's tools); this test does not skip without them",
                fallback.display()
            );
            fallback
        }
        Err(e) => panic!("cannot run FileCheck-19: {e}"),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| panic!("{}: no file name", path.display()))
}

/// Lowers one fixture and runs FileCheck on the result; `Err` says why it failed.
fn check_fixture(path: &Path, filecheck: &Path, out_dir: &Path) -> Result<(), String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let intermediate_only = match text.lines().next() {
        Some("; mode: intermediate") => true,
        Some("; mode: final") => false,
        other => {
            return Err(format!(
                "first line must be `; mode: intermediate` or `; mode: final`, not {other:?}"
            ))
        }
    };
    let barriers = match text
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("; barriers: "))
    {
        None | Some("auto") => WriteBarriers::Auto,
        Some("frontend") => WriteBarriers::Frontend,
        Some("insert") => WriteBarriers::Insert,
        Some(other) => {
            return Err(format!(
                "`; barriers:` takes frontend, insert or auto, not {other:?}"
            ))
        }
    };
    let ctx = Context::new();
    let shown = path.display().to_string();
    let module = Module::parse_ir(&ctx, &shown, &text).map_err(|e| format!("parse: {e}"))?;
    module
        .verify()
        .map_err(|e| format!("the fixture itself does not verify: {e}"))?;
    let threads = ThreadOptions::default().with_write_barriers(barriers);
    lower_module_with(&module, LowerOptions { intermediate_only }, threads)
        .map_err(|e| format!("lowering failed: {e}"))?;
    let printed = module.print();
    let out = out_dir.join(file_name(path));
    fs::write(&out, &printed).map_err(|e| format!("{}: {e}", out.display()))?;
    module
        .verify()
        .map_err(|e| format!("LLVM's verifier rejects the lowered module: {e}"))?;
    let run = Command::new(filecheck)
        .arg(path)
        .arg("--input-file")
        .arg(&out)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", filecheck.display()))?;
    if run.status.success() {
        Ok(())
    } else {
        Err(format!(
            "FileCheck failed (lowered module in {}):\n{}",
            out.display(),
            String::from_utf8_lossy(&run.stderr)
        ))
    }
}

#[test]
fn gc_lowering_matches_julia_on_the_filecheck_fixtures() {
    let filecheck = filecheck();
    let fixtures = ll_files("fixtures/filecheck");
    let names: Vec<String> = fixtures.iter().map(|p| file_name(p)).collect();
    for (known, _) in KNOWN_FAILURES {
        assert!(
            names.iter().any(|n| n == known),
            "KNOWN_FAILURES lists {known}, which is not in fixtures/filecheck"
        );
    }
    let out_dir = std::env::temp_dir().join(format!("locus-gc-filecheck-{}", std::process::id()));
    fs::create_dir_all(&out_dir).unwrap_or_else(|e| panic!("{}: {e}", out_dir.display()));

    let mut passed = 0;
    let mut problems = Vec::new();
    for (path, name) in fixtures.iter().zip(&names) {
        let known = KNOWN_FAILURES.iter().find(|(n, _)| n == name);
        match (check_fixture(path, &filecheck, &out_dir), known) {
            (Ok(()), None) => passed += 1,
            (Ok(()), Some((_, reason))) => {
                passed += 1;
                problems.push(format!(
                    "{name} passes but is listed in KNOWN_FAILURES ({reason}): remove it from \
                     the list"
                ));
            }
            (Err(why), None) => problems.push(format!("{name}: {why}")),
            (Err(why), Some((_, reason))) => {
                eprintln!("{name}: known failure ({reason})");
                // Only the first line: the full FileCheck output is for the fixtures that
                // are expected to pass.
                let first = why.lines().next().unwrap_or_default();
                eprintln!("    {first}");
            }
        }
    }
    println!("gc filecheck: {passed}/{} fixtures pass", fixtures.len());
    if problems.is_empty() {
        let _ = fs::remove_dir_all(&out_dir);
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n\n"));
}
