//! `locus gc build`: programs of the GC suite compiled ahead of time and linked against
//! `liblocus_gc_runtime.a` behave as `locus gc run` on the same file (the oracle): the same
//! result and the same collector counters (`LOCUS_GC_STATS=1` against `--stats`:
//! collections, frames walked, roots traced, objects freed and moved) with and without
//! `LOCUS_GC_STRESS=1`, the same fault lines and exit statuses;
//! and neither the runtime library nor the executables need libLLVM (llvm-readobj-19).
//! Both kinds of roots: Julia-style frames, and statepoints, whose stack maps the runtime
//! reads back from the executable.
//!
//! The runtime library is built by this test as a user builds it (`cargo build -p
//! locus-gc-runtime`), into a target directory of its own (`target/gc-runtime-alone`), which
//! no outer cargo holds locked while tests run, or taken from `make test`'s workspace build
//! (crates/gc-runtime/tests/support/runtime_library.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use crate::dropped_relocation::lower_and_drop_first_relocation;
use crate::runtime_library;

/// A sample of the GC suite's programs: a tree, a list, Julia's allocations, callee-rooted
/// arguments, preserved objects, vectors.
const PROGRAMS: [&str; 6] = [
    "tree",
    "list_sum",
    "julia_alloc",
    "callee_rooted",
    "gc_preserve",
    "vector_phi",
];

fn gc_fixture(sub: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures")
        .join(sub)
        .join(format!("{name}.ll"))
}

/// The directory holding `liblocus_gc_runtime.{a,so}`, built as a user builds them.
fn runtime_dir() -> &'static Path {
    runtime_library::runtime_dir(false)
}

fn locus_gc(args: &[&str]) -> Output {
    Command::new(LOCUS)
        .arg("gc")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

/// `build FILE -o PROG --runtime DIR`: the arguments of `locus gc` every build here gives.
fn build_args<'a>(file: &'a Path, prog: &'a Path) -> Vec<&'a str> {
    vec![
        "build",
        path_str(file),
        "-o",
        path_str(prog),
        "--runtime",
        path_str(runtime_dir()),
    ]
}

/// `locus gc build FILE -o PROG --runtime DIR EXTRA...`, which must succeed; linked with
/// lld ([`FAST_LINK`]) unless `extra` names a `--linker`.
fn build(file: &Path, prog: &Path, extra: &[&str]) {
    let mut args = build_args(file, prog);
    if !extra.contains(&"--linker") {
        args.push(FAST_LINK);
    }
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

/// Runs a built program with its counters printed (`LOCUS_GC_STATS=1`, as `gc run --stats`).
fn run_prog(prog: &Path, stress: bool) -> Output {
    let mut cmd = Command::new(prog);
    cmd.env("LOCUS_GC_STATS", "1");
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
            let mut args = vec!["run", "--stats", path_str(&file)];
            if stress {
                args.insert(1, "--stress");
            }
            let jit = locus_gc(&args);
            assert!(jit.status.success(), "gc run {name}: {}", text(&jit.stderr));
            let aot = run_prog(&prog, stress);
            assert!(text(&aot.stdout).contains("\ncollections: "), "{name}");
            assert_eq!(
                aot.status.code(),
                Some(0),
                "{name} (stress {stress}): {}",
                text(&aot.stderr)
            );
            assert_eq!(
                counts(&aot.stdout),
                counts(&jit.stdout),
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
/// libraries of the shared library and of a built executable, linked by the default
/// linker driver (clang-19 with the system's linker) and run.
#[test]
fn neither_the_runtime_nor_the_program_needs_libllvm() {
    let tmp = TempDir::new("gc-build-needed");
    let prog = tmp.path("tree");
    build(
        &gc_fixture("programs", "tree"),
        &prog,
        &["--linker", "clang-19"],
    );
    let out = run_prog(&prog, false);
    assert_eq!(
        (out.status.code(), text(&out.stdout).lines().next()),
        (Some(0), Some("511")),
        "{}",
        text(&out.stderr)
    );
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

/// The programs run with statepoint roots: lists, Julia's allocations and calls, preserved
/// objects, jl_roots, aggregates. (Not tree or deep_recursion: their moving runs take
/// seconds, copying every live object at each of their many collections.)
const STATEPOINT_PROGRAMS: [&str; 6] = [
    "list_sum",
    "julia_alloc",
    "julia_call",
    "gc_preserve",
    "jl_roots",
    "mixed_aggregate",
];

/// Statepoint roots: the runtime reads the stack maps back from the executable's
/// `.llvm_stackmaps` section. Each program prints what `gc run --roots statepoint --stats`
/// prints, without stress, under stress and with the moving collector (`LOCUS_GC_MOVING=1`).
#[test]
fn statepoint_programs_read_their_stack_maps_and_print_what_gc_run_prints() {
    let tmp = TempDir::new("gc-build-statepoint");
    let mut checked = 0;
    for name in STATEPOINT_PROGRAMS {
        let file = gc_fixture("programs", name);
        let prog = tmp.path(name);
        build(&file, &prog, &["--roots", "statepoint"]);
        for (stress, moving) in [(false, false), (true, false), (true, true)] {
            let mut args = vec!["run", "--stats", "--roots", "statepoint", path_str(&file)];
            if stress {
                args.insert(1, "--stress");
            }
            if moving {
                args.insert(1, "--moving");
            }
            let jit = locus_gc(&args);
            assert!(jit.status.success(), "gc run {name}: {}", text(&jit.stderr));
            let mut cmd = Command::new(&prog);
            cmd.env("LOCUS_GC_STRESS", if stress { "1" } else { "0" });
            cmd.env("LOCUS_GC_MOVING", if moving { "1" } else { "0" });
            cmd.env("LOCUS_GC_STATS", "1");
            let aot = cmd.output().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                aot.status.code(),
                Some(0),
                "{name} (stress {stress}, moving {moving}): {}",
                text(&aot.stderr)
            );
            assert_eq!(counts(&aot.stdout), counts(&jit.stdout), "{name}");
            checked += 1;
        }
    }
    println!(
        "{checked} runs of {} statepoint programs agree with gc run",
        STATEPOINT_PROGRAMS.len()
    );
}

/// The oracle can fail ahead of time too: a relocation dropped from the rewritten module
/// (its uses given the pre-call value) ends the executable under the moving collector as
/// it ends `gc run --moving --stress`: status 2 and the same line, or the same result.
#[test]
fn a_dropped_relocation_is_caught_in_the_executable_as_in_gc_run() {
    let tmp = TempDir::new("gc-build-stale");
    let (mut caught, mut tried) = (0, 0);
    for name in STATEPOINT_PROGRAMS {
        let file = gc_fixture("programs", name);
        // (jl_roots pins its object: nothing is relocated.)
        let (_, Some((lhs, edited))) = lower_and_drop_first_relocation(LOCUS, &file, &tmp.0) else {
            continue;
        };
        tried += 1;
        let prog = tmp.path(&format!("{name}-stale"));
        build(&edited, &prog, &["--roots", "statepoint"]);
        let jit = locus_gc(&[
            "run",
            "--roots",
            "statepoint",
            "--moving",
            "--stress",
            path_str(&edited),
        ]);
        let aot = Command::new(&prog)
            .env("LOCUS_GC_STRESS", "1")
            .env("LOCUS_GC_MOVING", "1")
            .output()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (jit_err, aot_err) = (text(&jit.stderr), text(&aot.stderr));
        assert_eq!(
            aot.status.code(),
            jit.status.code(),
            "{name} without {lhs}: {aot_err} / gc run: {jit_err}"
        );
        assert_eq!(fault_shape(&aot_err), fault_shape(&jit_err), "{name}");
        assert_eq!(text(&aot.stdout), text(&jit.stdout), "{name}");
        if aot.status.code() == Some(2) {
            assert!(
                aot_err.starts_with("locus: gc: dangling reference"),
                "{aot_err}"
            );
            caught += 1;
        }
    }
    assert!(
        tried >= 3 && caught >= 1,
        "{caught} of {tried} dropped relocations caught"
    );
    println!("dropped relocations caught ahead of time: {caught} of {tried}");
}

/// A stripped statepoint executable cannot size its functions: one `locus: gc:` line and
/// status 1, the entry never called.
#[test]
fn a_stripped_statepoint_executable_says_why_it_cannot_run() {
    let tmp = TempDir::new("gc-build-stripped");
    let prog = tmp.path("tree");
    build(
        &gc_fixture("programs", "tree"),
        &prog,
        &["--roots", "statepoint"],
    );
    run_ok("llvm-strip-19", &["--strip-all", path_str(&prog)]);
    let out = run_prog(&prog, true);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.starts_with("locus: gc: cannot read the program's stack maps: ")
            && err.contains("stripped")
            && err.lines().count() == 1,
        "{err}"
    );
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
    // An entry that is not there, a linker driver that is not there, and one that fails on
    // an argument given to it.
    let prog = tmp.path("p");
    for (extra, needle) in [
        (["--entry", "no_such_function"], "entry @no_such_function"),
        (
            ["--linker", "/nonexistent/cc"],
            "cannot run /nonexistent/cc",
        ),
        (["--link-arg", "-fuse-ld=nonexistent"], "nonexistent"),
    ] {
        let mut args = build_args(&file, &prog);
        args.extend(extra);
        let out = locus_gc(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(
            err.starts_with("locus: ") && err.contains(needle),
            "{extra:?}: {err}"
        );
        assert!(!prog.exists(), "{extra:?}");
    }
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
    assert_eq!(text(&out.stdout).lines().next(), Some("5050"));
}

/// `gc lower --roots statepoint` writes a module that links against the runtime library as
/// it is: its wrappers of the runtime's collecting calls are internal, so they neither
/// clash with the library's functions nor capture the library's own calls. A C-style main
/// added in IR calls `locus_gc_main_statepoints` with the program's entry; the executable
/// prints what `gc run` prints, with the moving collector too.
#[test]
fn the_statepoint_lowering_links_against_the_runtime_as_it_is() {
    let tmp = TempDir::new("gc-lower-statepoint-link");
    let file = gc_fixture("programs", "tree");
    let lowered = tmp.path("tree.ll");
    let out = locus_gc(&[
        "lower",
        "--roots",
        "statepoint",
        path_str(&file),
        "-o",
        path_str(&lowered),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ir = std::fs::read_to_string(&lowered).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        ir.contains("define internal ptr addrspace(1) @locus_gc_alloc("),
        "{ir}"
    );
    let ir = ir.replace("define i64 @main()", "define i64 @tree_main()")
        + "\ndeclare i32 @locus_gc_main_statepoints(ptr)\n\
           define i32 @main() {\n  %s = call i32 @locus_gc_main_statepoints(ptr @tree_main)\n  ret i32 %s\n}\n";
    std::fs::write(&lowered, ir).unwrap_or_else(|e| panic!("{e}"));
    let obj = tmp.path("tree.o");
    run_ok(
        LLC,
        &[
            "-O2",
            "-filetype=obj",
            path_str(&lowered),
            "-o",
            path_str(&obj),
        ],
    );
    let prog = tmp.path("tree");
    let lib = runtime_dir().join("liblocus_gc_runtime.a");
    run_ok(
        "clang-19",
        &[
            "-no-pie",
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
    let expected = locus_gc(&["run", path_str(&file)]);
    assert!(expected.status.success(), "{}", text(&expected.stderr));
    let expected = text(&expected.stdout);
    let out = Command::new(&prog)
        .env("LOCUS_GC_STRESS", "1")
        .env("LOCUS_GC_MOVING", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().next(), expected.lines().next());
}

/// Runs `prog` with `LOCUS_GC_STATS=1` and the environment `env` (each name set to its
/// value, or removed when the value is `None`); the output must be a success.
fn run_with(prog: &Path, env: &[(&str, Option<&str>)]) -> String {
    let mut cmd = Command::new(prog);
    cmd.env("LOCUS_GC_STATS", "1")
        .env_remove("LOCUS_GC_COLLECTOR")
        .env_remove("LOCUS_GC_STRESS");
    for (name, value) in env {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{} {env:?}: {:?} {}",
        prog.display(),
        out.status,
        text(&out.stderr)
    );
    counts(&out.stdout)
}

/// What `LOCUS_GC_STATS=1` printed, without the pause times (`pause median:`, `pause
/// max:`): every other counter is the same from run to run, the times are not.
fn counts(stdout: &[u8]) -> String {
    text(stdout)
        .lines()
        .filter(|l| !l.starts_with("pause "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `--collector mmtk:marksweep`: the executable runs MMTk's MarkSweep when its environment
/// names no collector, and prints what a `--collector locus` build prints under
/// `LOCUS_GC_COLLECTOR=mmtk:marksweep` (the oracle; MMTk's counters differ from the
/// runtime's own mark-sweep's, so the two cannot be confused); `LOCUS_GC_COLLECTOR` and
/// `LOCUS_GC_STRESS=1` in its environment still win. Without `--collector` the executable
/// runs MMTk's Immix (its counters differ from MarkSweep's too). An unknown name and a plan
/// that cannot pin with frame roots are refused: status 1, one `locus:` line, nothing
/// written.
#[test]
fn the_collector_option_sets_the_executables_default_collector() {
    let tmp = TempDir::new("gc-build-collector");
    let file = gc_fixture("programs", "tree");
    let (marksweep, plain) = (tmp.path("tree-marksweep"), tmp.path("tree"));
    let unnamed = tmp.path("tree-default");
    build(&file, &marksweep, &["--collector", "mmtk:marksweep"]);
    build(&file, &plain, &["--collector", "locus"]);
    build(&file, &unnamed, &[]);
    let under = |prog: &Path, collector: Option<&str>, stress: Option<&str>| {
        run_with(
            prog,
            &[
                ("LOCUS_GC_COLLECTOR", collector),
                ("LOCUS_GC_STRESS", stress),
            ],
        )
    };
    let mmtk = under(&plain, Some("mmtk:marksweep"), None);
    let own = under(&plain, None, None);
    assert_ne!(mmtk, own, "MMTk's counters look like the runtime's own");
    assert_eq!(under(&marksweep, None, None), mmtk, "the default collector");
    // LOCUS_GC_STRESS=0 is no stress: the built-in default still holds.
    assert_eq!(under(&marksweep, None, Some("0")), mmtk);
    assert_eq!(
        under(&marksweep, Some("locus"), None),
        own,
        "LOCUS_GC_COLLECTOR wins"
    );
    assert_eq!(
        under(&marksweep, None, Some("1")),
        under(&plain, None, Some("1")),
        "LOCUS_GC_STRESS=1 wins"
    );
    let immix = under(&plain, Some("mmtk:immix"), None);
    assert_ne!(immix, mmtk, "Immix's counters look like MarkSweep's");
    assert_eq!(under(&marksweep, Some("mmtk:immix"), None), immix);
    // Without --collector, MMTk's Immix (the CLI's default collector).
    assert_eq!(
        under(&unnamed, None, None),
        immix,
        "the default build's collector"
    );

    for (name, needle) in [
        ("nope", "unknown collector `nope`"),
        ("mmtk:nope", "nope"),
        ("mmtk:semispace", "cannot pin"),
    ] {
        let prog = tmp.path("refused");
        let mut args = build_args(&file, &prog);
        args.extend(["--collector", name]);
        let out = locus_gc(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.starts_with("locus: ") && err.contains(needle) && err.lines().count() == 1,
            "{name}: {err}"
        );
        assert!(!prog.exists(), "{name}");
    }
}

/// Programs that throw and catch C++ exceptions through compiled frames (`invoke`, landing
/// pads) build with statepoint roots, link the C++ runtime, and print their `; expect:`
/// value under the moving stress collector; a program without C++ does not depend on
/// libstdc++ (linked as needed), checked with llvm-readobj-19's dynamic section. In one, a
/// function ends with a call to a noreturn function that collects: its return address is
/// the function's end, which the walk must take for compiled code.
#[test]
fn statepoint_programs_that_unwind_cxx_style_build_and_run() {
    let tmp = TempDir::new("gc-build-invoke");
    for name in [
        "invoke_catch_exception",
        "invoke_cleanup_resume",
        "invoke_noreturn_call_ends_function",
    ] {
        let file = gc_fixture("statepoint", name);
        let source = std::fs::read_to_string(&file).expect("fixture");
        let expect = source
            .lines()
            .find_map(|l| l.strip_prefix("; expect: "))
            .unwrap_or_else(|| panic!("{name}: no `; expect:` line"))
            .trim()
            .to_owned();
        let prog = tmp.path(name);
        build(&file, &prog, &["--roots", "statepoint"]);
        let out = Command::new(&prog)
            .env("LOCUS_GC_STRESS", "1")
            .env("LOCUS_GC_MOVING", "1")
            .env_remove("LOCUS_GC_COLLECTOR")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), expect, "{name}");
    }
    let plain = tmp.path("tree");
    build(
        &gc_fixture("programs", "tree"),
        &plain,
        &["--roots", "statepoint"],
    );
    let dynamic = Command::new("llvm-readobj-19")
        .arg("--needed-libs")
        .arg(&plain)
        .output()
        .expect("llvm-readobj-19 is required (scripts/install-deps)");
    assert!(
        !text(&dynamic.stdout).contains("libstdc++"),
        "{}",
        text(&dynamic.stdout)
    );
}
