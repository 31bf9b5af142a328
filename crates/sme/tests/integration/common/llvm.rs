//! LLVM's own test files (not in this repository: `scripts/llvm-19-tests` extracts those of
//! LLVM 19.1.7), read from the directories named by environment variables, and the llc
//! command line of each file's RUN lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The SME tests of the directory in `$var` (`sme-*.ll`, `sve-streaming-mode-*.ll`: the
/// directory may hold other tests `scripts/llvm-19-tests` extracted), sorted. Panics when
/// the variable is unset.
pub fn files(var: &str) -> Vec<PathBuf> {
    let dir = std::env::var(var).unwrap_or_else(|_| {
        panic!("set {var} to the directory scripts/llvm-19-tests extracted (see src/lib.rs)")
    });
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("${var}={dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ll"))
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with("sme-") || n.starts_with("sve-streaming-mode-")
            })
        })
        .collect();
    files.sort();
    files
}

/// llc options after which llc does not print assembly for the whole module, or for a
/// target whose object files are not ELF: a RUN line with one of them is not run.
/// (`-force-streaming` and `-force-streaming-compatible` are run: in LLVM 19 they choose
/// the subtarget's instructions only, `AArch64TargetMachine::getSubtargetImpl`, not the
/// SME attributes the calls are lowered with.)
const UNMODELLED: [&str; 6] = [
    "-stop-after",
    "-stop-before",
    "-run-pass",
    "-filetype",
    "-mtriple=aarch64-apple",
    "-mtriple=arm64-apple",
];

/// The options of the first RUN line of `text` that runs `llc` on the file as it is (not
/// under `not`, not through `sed`, none of [`UNMODELLED`]), without `-o`, the input and
/// what follows the first pipe; `-mtriple=aarch64-linux-gnu` added when neither the line
/// nor the module names a triple. `None` when no RUN line qualifies. A file without RUN
/// lines (an excerpt) gets `-mtriple=aarch64-linux-gnu -mattr=+sme,+sme2`.
pub fn llc_options(text: &str) -> Option<Vec<String>> {
    if !text.contains("RUN:") {
        return Some(vec![
            "-mtriple=aarch64-linux-gnu".to_string(),
            "-mattr=+sme,+sme2".to_string(),
        ]);
    }
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let Some((_, run)) = line.split_once("RUN:") else {
            continue;
        };
        let run = run.trim();
        if let Some(head) = run.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(run);
        lines.push(std::mem::take(&mut current));
    }
    'line: for line in lines {
        let command = line.split('|').next().unwrap_or("");
        let mut words = command.split_whitespace();
        if words.next() != Some("llc") {
            continue;
        }
        let mut options = Vec::new();
        let mut skip_next = false;
        for w in words {
            if std::mem::take(&mut skip_next) {
                continue;
            }
            if UNMODELLED
                .iter()
                .any(|u| w.starts_with(u) || w == u.trim_start_matches('-'))
            {
                continue 'line;
            }
            match w {
                "-o" => skip_next = true,
                "<" | "%s" | "2>&1" => {}
                _ if w.starts_with('-') => options.push(w.to_string()),
                _ => continue 'line,
            }
        }
        if text.contains("target triple = \"arm64-apple") {
            continue;
        }
        if !options.iter().any(|o| o.starts_with("-mtriple")) && !text.contains("target triple") {
            options.push("-mtriple=aarch64-linux-gnu".to_string());
        }
        return Some(options);
    }
    None
}

/// Runs llc-19 with `options` (and `extra`) on `path`, in the temporary directory (a crash
/// may leave a core file).
pub fn llc(path: &Path, options: &[String], extra: &[&str]) -> Output {
    Command::new("llc-19")
        .args(options)
        .args(extra)
        .arg(path)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run llc-19 ({e}); scripts/install-deps installs it"))
}

/// The first line of a tool's standard error.
pub fn first_error_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}
