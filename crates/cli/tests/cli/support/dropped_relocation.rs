//! A relocation dropped from a module `locus gc lower --roots statepoint` wrote, the
//! set-up the oracle tests of `gc run` (`gc.rs`) and `gc build` (`gc_build.rs`)
//! share: each use of the relocated value after the statepoint is given the value from
//! before the call, as a lowering that forgot the relocation would leave it.

// Each test binary uses a different subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `program` lowered by `locus gc lower --roots statepoint` (`locus` the executable) into
/// `dir/STEM.ll`, and that module with its first relocation dropped
/// ([`first_relocation_dropped`]) in `dir/STEM-stale.ll`: (the lowered file, and the
/// relocated name with the edited file, if anything is relocated).
pub fn lower_and_drop_first_relocation(
    locus: &str,
    program: &Path,
    dir: &Path,
) -> (PathBuf, Option<(String, PathBuf)>) {
    let stem = program
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rewritten = dir.join(format!("{stem}.ll"));
    let out = Command::new(locus)
        .args(["gc", "lower", "--roots", "statepoint", "-o"])
        .arg(&rewritten)
        .arg(program)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {locus}: {e}"));
    assert!(
        out.status.success(),
        "gc lower --roots statepoint {}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let lowered = std::fs::read_to_string(&rewritten)
        .unwrap_or_else(|e| panic!("{}: {e}", rewritten.display()));
    let dropped = first_relocation_dropped(&lowered).map(|(lhs, edited)| {
        let path = dir.join(format!("{stem}-stale.ll"));
        std::fs::write(&path, edited).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        (lhs, path)
    });
    (rewritten, dropped)
}

/// The `gc.relocate` lines of a rewritten module: (line number, relocated name, the
/// pre-call derived value it replaces).
pub fn relocations(rewritten: &str) -> Vec<(usize, String, String)> {
    rewritten
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("@llvm.experimental.gc.relocate"))
        .filter_map(|(i, l)| {
            let lhs = l.trim().split(' ').next()?.to_owned();
            let (_, derived) = l.rsplit_once(", ")?;
            let derived = derived.trim_end_matches(')').to_owned();
            (lhs.starts_with('%') && derived.starts_with('%')).then_some((i, lhs, derived))
        })
        .collect()
}

/// `text` with every whole `from` token outside line `at` replaced by `to`.
pub fn use_stale(text: &str, at: usize, from: &str, to: &str) -> String {
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        let mut rest = l;
        if i != at {
            while let Some(k) = rest.find(from) {
                let after = &rest[k + from.len()..];
                let whole =
                    !after.starts_with(|c: char| c.is_alphanumeric() || c == '.' || c == '_');
                out.push_str(&rest[..k]);
                out.push_str(if whole { to } else { from });
                rest = after;
            }
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// The rewritten module with its first relocation dropped: (the relocated name, the
/// edited module), or `None` when nothing is relocated (a program whose objects are all
/// pinned, by `jl_roots` say).
pub fn first_relocation_dropped(rewritten: &str) -> Option<(String, String)> {
    let (line, lhs, derived) = relocations(rewritten).into_iter().next()?;
    let edited = use_stale(rewritten, line, &lhs, &derived);
    Some((lhs, edited))
}
