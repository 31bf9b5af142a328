//! A program built with statepoint roots that has no statepoint at all (it never calls
//! anything that may collect): LLVM writes no `.llvm_stackmaps` section for it, and the
//! executable still runs (`locus gc build` marks it, `contract::STATEPOINT_PROGRAM_MARKER`)
//! instead of stopping with "no .llvm_stackmaps section".

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::Path;
use std::process::Command;

use locus_gc::build::{build, BuildOptions};
use locus_gc::run::Roots;

#[test]
fn a_program_without_statepoints_runs_with_statepoint_roots() {
    if !cfg!(target_arch = "x86_64") {
        return; // the host's statepoint walk is what the build refuses elsewhere
    }
    let ir = b"define i64 @main() {\n  %a = add i64 40, 2\n  ret i64 %a\n}\n";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-no-statepoints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prog = dir.join("answer");
    let options = BuildOptions {
        roots: Roots::Statepoint,
        runtime: Some(runtime_library::runtime_dir(false).to_path_buf()),
        ..BuildOptions::default()
    };
    build("answer.ll", ir, &prog, &options).unwrap_or_else(|e| panic!("answer.ll: {e}"));
    for collector in [None, Some("locus"), Some("mmtk:semispace")] {
        let mut cmd = Command::new(&prog);
        cmd.env_remove("LOCUS_GC_COLLECTOR")
            .env_remove("LOCUS_GC_STRESS");
        if let Some(c) = collector {
            cmd.env("LOCUS_GC_COLLECTOR", c);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{collector:?}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "42\n",
            "{collector:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
