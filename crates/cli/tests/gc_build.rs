//! `locus gc build`: programs of the GC suite compiled ahead of time and linked against
//! `liblocus_gc_runtime.a` behave as `locus gc run` on the same file (the oracle): the same
//! result with and without `LOCUS_GC_STRESS=1`, the same fault lines and exit statuses;
//! and neither the runtime library nor the executables need libLLVM (llvm-readobj-19).
//!
//! The runtime library is built by this test alone (`cargo build -p locus-gc-runtime` into
//! `target/gc-runtime-alone`): in a build of the whole workspace cargo unifies locus-gc's
//! features, and the library it makes then holds locus-gc's LLVM half too, which a program
//! cannot link without libLLVM.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::*;

/// A sample of the GC suite's programs: trees, lists, deep recursion, Julia's allocations
/// and calls, callee-rooted arguments, preserved objects, jl_roots, vectors, aggregates.
const PROGRAMS: [&str; 10] = [
    "tree",
    "list_sum",
    "deep_recursion",
    "julia_alloc",
    "julia_call",
    "callee_rooted",
    "gc_preserve",
    "jl_roots",
    "vector_phi",
    "mixed_aggregate",
];

fn gc_fixture(sub: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures")
        .join(sub)
        .join(format!("{name}.ll"))
}

/// The directory holding `liblocus_gc_runtime.{a,so}`, built once per test binary.
fn runtime_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let target = workspace.join("target/gc-runtime-alone");
        let cargo = option_env!("CARGO").unwrap_or("cargo");
        let out = Command::new(cargo)
            .args(["build", "--quiet", "-p", "locus-gc-runtime"])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(&workspace)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cargo}: {e}"));
        assert!(
            out.status.success(),
            "cargo build -p locus-gc-runtime: {}",
            text(&out.stderr)
        );
        target.join("debug")
    })
}

fn locus_gc(args: &[&str]) -> Output {
    Command::new(LOCUS)
        .arg("gc")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

/// `locus gc build FILE -o PROG --runtime DIR EXTRA...`, which must succeed.
fn build(file: &Path, prog: &Path, extra: &[&str]) {
    let mut args = vec![
        "build",
        path_str(file),
        "-o",
        path_str(prog),
        "--runtime",
        path_str(runtime_dir()),
    ];
    args.extend_from_slice(extra);
    let out = locus_gc(&args);
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "locus gc build {}: {:?}\n{}",
        file.display(),
        out.status,
        text(&out.stderr)
    );
}

fn run_prog(prog: &Path, stress: bool) -> Output {
    let mut cmd = Command::new(prog);
    if stress {
        cmd.env("LOCUS_GC_STRESS", "1");
    } else {
        cmd.env_remove("LOCUS_GC_STRESS");
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()))
}

/// One fault line with its numbers (addresses, offsets) blanked and the part that names
/// the function cut off: JIT and ahead-of-time code differ there.
fn fault_shape(stderr: &str) -> String {
    let line = stderr.lines().next().unwrap_or_default();
    let line = line.split(" in function ").next().unwrap_or_default();
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '0' && chars.peek() == Some(&'x') {
            chars.next();
            while chars.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                chars.next();
            }
            out.push_str("0x_");
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn programs_built_ahead_of_time_print_what_gc_run_prints() {
    let tmp = TempDir::new("gc-build");
    let mut checked = 0;
    for name in PROGRAMS {
        let file = gc_fixture("programs", name);
        let prog = tmp.path(name);
        build(&file, &prog, &[]);
        for stress in [false, true] {
            let mut args = vec!["run", path_str(&file)];
            if stress {
                args.insert(1, "--stress");
            }
            let jit = locus_gc(&args);
            assert!(jit.status.success(), "gc run {name}: {}", text(&jit.stderr));
            let aot = run_prog(&prog, stress);
            assert_eq!(
                aot.status.code(),
                Some(0),
                "{name} (stress {stress}): {}",
                text(&aot.stderr)
            );
            assert_eq!(
                text(&aot.stdout),
                text(&jit.stdout),
                "{name} (stress {stress})"
            );
            assert!(aot.stderr.is_empty(), "{name}: {}", text(&aot.stderr));
            checked += 1;
        }
    }
    println!(
        "{checked} runs of {} built programs agree with gc run",
        PROGRAMS.len()
    );
}

/// Every program of `fixtures/faulting` (a dangling reference under stress, a fatal signal,
/// a stack overflow) ends the executable with the status `gc run` ends with and one line
/// that reads the same up to the function's name.
#[test]
fn faults_end_the_executable_as_they_end_gc_run() {
    let tmp = TempDir::new("gc-build-faults");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/faulting");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let mut dangling = 0;
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap_or_default();
        let stress = source.lines().any(|l| l.trim() == "; stress");
        let prog = tmp.path(&stem(file));
        build(file, &prog, &[]);
        let mut args = vec!["run", path_str(file)];
        if stress {
            args.insert(1, "--stress");
        }
        let jit = locus_gc(&args);
        let aot = run_prog(&prog, stress);
        let (jit_err, aot_err) = (text(&jit.stderr), text(&aot.stderr));
        assert!(
            matches!(jit.status.code(), Some(2 | 3)),
            "{}: {jit_err}",
            file.display()
        );
        assert_eq!(
            aot.status.code(),
            jit.status.code(),
            "{}: {aot_err}",
            file.display()
        );
        assert_eq!(aot_err.lines().count(), 1, "{}: {aot_err}", file.display());
        assert!(aot_err.starts_with("locus: "), "{aot_err}");
        assert_eq!(
            fault_shape(&aot_err),
            fault_shape(&jit_err),
            "{}",
            file.display()
        );
        if aot_err.starts_with("locus: gc: dangling reference") {
            dangling += 1;
        }
    }
    assert!(dangling >= 1, "no dangling reference among {files:?}");
}

/// The runtime library and what it links need no libLLVM: llvm-readobj-19's list of needed
/// libraries of the shared library and of a built executable.
#[test]
fn neither_the_runtime_nor_the_program_needs_libllvm() {
    let tmp = TempDir::new("gc-build-needed");
    let prog = tmp.path("tree");
    build(&gc_fixture("programs", "tree"), &prog, &[]);
    let so = runtime_dir().join("liblocus_gc_runtime.so");
    for file in [so.as_path(), prog.as_path()] {
        let needed = text(&run_ok(READOBJ, &["--needed-libs", path_str(file)]));
        assert!(needed.contains("libc.so"), "{needed}");
        assert!(
            !needed.to_lowercase().contains("llvm"),
            "{} needs LLVM:\n{needed}",
            file.display()
        );
    }
}

#[test]
fn a_missing_runtime_and_a_bad_entry_are_one_line_and_status_1() {
    let tmp = TempDir::new("gc-build-errors");
    let file = gc_fixture("programs", "tree");
    let missing = tmp.path("nowhere.a");
    let out = locus_gc(&[
        "build",
        path_str(&file),
        "-o",
        path_str(&tmp.path("p")),
        "--runtime",
        path_str(&missing),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("liblocus_gc_runtime.a was not found") && err.contains("nowhere.a"),
        "{err}"
    );
    let out = locus_gc(&[
        "build",
        path_str(&file),
        "-o",
        path_str(&tmp.path("p")),
        "--runtime",
        path_str(runtime_dir()),
        "--entry",
        "no_such_function",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("entry @no_such_function"), "{err}");
    assert!(!tmp.path("p").exists());
}

/// The by-hand route gives the same program: `--emit-ir` writes the module that is
/// compiled, which llc-19 and clang-19 turn into an executable printing the same result.
#[test]
fn the_emitted_ir_builds_by_hand_with_llc_and_clang() {
    let tmp = TempDir::new("gc-build-by-hand");
    let file = gc_fixture("programs", "list_sum");
    let ir = tmp.path("list_sum.ll");
    build(&file, &tmp.path("unused"), &["--emit-ir", path_str(&ir)]);
    let obj = tmp.path("list_sum.o");
    run_ok(
        LLC,
        &[
            "-O2",
            "-filetype=obj",
            "-relocation-model=pic",
            path_str(&ir),
            "-o",
            path_str(&obj),
        ],
    );
    let prog = tmp.path("list_sum");
    let lib = runtime_dir().join("liblocus_gc_runtime.a");
    run_ok(
        "clang-19",
        &[
            path_str(&obj),
            path_str(&lib),
            "-rdynamic",
            "-lpthread",
            "-ldl",
            "-lm",
            "-lgcc_s",
            "-o",
            path_str(&prog),
        ],
    );
    let out = run_prog(&prog, true);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "5050");
}
