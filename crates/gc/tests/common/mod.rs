//! Helpers shared by locus-gc's integration tests.

use std::fs;
use std::path::{Path, PathBuf};

/// The `.ll` files of `dir` (relative to the crate), sorted; there must be some.
pub fn ll_files(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .ll files in {}", dir.display());
    v
}
