//! `liblocus_gc_runtime.{a,so}` as a user builds them (`cargo build [--release] -p
//! locus-gc-runtime`; the debug build with line tables only, [`DEBUG_INFO`]), for the tests
//! and benchmarks of several crates, which include this file with `#[path]`.
//!
//! The build goes to a target directory of its own (`target/gc-runtime-alone`), which no
//! outer cargo holds locked while tests run; cargo's own lock orders the test processes
//! that build at once. Each process then links against a copy of its own, so that no
//! other process's build can rewrite the library under it.
//!
//! Unless [`RUNTIME_DIR_VARIABLE`] names a directory holding the debug libraries already
//! built: `make test` names its workspace build's (`target/debug`, which `locus gc build`
//! also finds by default), so that its tests do not build the runtime and its
//! dependencies a second time (about 150 s of CPU on 2 cores).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directory holding this process's copy of `liblocus_gc_runtime.a` and `.so`, built
/// (debug, or optimized when `release`) and copied once per process.
pub fn runtime_dir(release: bool) -> &'static Path {
    static DEBUG: OnceLock<PathBuf> = OnceLock::new();
    static RELEASE: OnceLock<PathBuf> = OnceLock::new();
    let cell = if release { &RELEASE } else { &DEBUG };
    cell.get_or_init(|| match std::env::var_os(RUNTIME_DIR_VARIABLE) {
        Some(dir) if !release => built_by_caller(PathBuf::from(dir)),
        _ => build(release),
    })
}

/// The environment variable naming a directory that holds the debug
/// `liblocus_gc_runtime.a` and `.so`, built before the tests ran and not rebuilt while
/// they run (a workspace build's `target/debug`).
pub const RUNTIME_DIR_VARIABLE: &str = "LOCUS_TEST_GC_RUNTIME_DIR";

fn built_by_caller(dir: PathBuf) -> PathBuf {
    for name in ["liblocus_gc_runtime.a", "liblocus_gc_runtime.so"] {
        assert!(
            dir.join(name).is_file(),
            "{RUNTIME_DIR_VARIABLE}={}: no {name} there (cargo build -p locus-gc-runtime)",
            dir.display()
        );
    }
    dir
}

/// The debug build's debug information: line tables only. With full debug information the
/// archive is 157 MB and GNU ld takes 1.7 s to link a one-function program against it (the
/// tests link hundreds); with line tables 80 MB and 1.0 s, and panics still name the line.
pub const DEBUG_INFO: &str = "profile.dev.debug=\"line-tables-only\"";

fn build(release: bool) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = workspace.join("target/gc-runtime-alone");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let mut args = vec!["build", "--quiet", "-p", "locus-gc-runtime"];
    if release {
        args.push("--release");
    } else {
        args.extend(["--config", DEBUG_INFO]);
    }
    let out = Command::new(cargo)
        .args(&args)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&workspace)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo}: {e}"));
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let built = target.join(if release { "release" } else { "debug" });
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    remove_copies_of_ended_processes(tmp);
    let copy = tmp.join(format!(
        "gc-runtime-{}-{}",
        if release { "release" } else { "debug" },
        std::process::id()
    ));
    std::fs::create_dir_all(&copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    for name in ["liblocus_gc_runtime.a", "liblocus_gc_runtime.so"] {
        std::fs::copy(built.join(name), copy.join(name))
            .unwrap_or_else(|e| panic!("copying {}: {e}", built.join(name).display()));
    }
    copy
}

/// Removes the copies made by test processes that have ended (each is about 190 MB in a
/// debug build, and nothing else removes them): a directory `gc-runtime-PROFILE-PID` whose
/// process is gone. Copies of running processes stay, whatever their age.
fn remove_copies_of_ended_processes(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("gc-runtime-")) else {
            continue;
        };
        let Some((_, pid)) = rest.split_once('-') else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            // Another process may be removing it too: a failure is harmless.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
