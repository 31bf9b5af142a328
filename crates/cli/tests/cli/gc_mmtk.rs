//! `locus gc run --collector mmtk:PLAN`: the GC suite's programs under MMTk's pinning
//! plans give their `; expect:` results with frame roots, and under every plan with
//! statepoint roots (objects moving under SemiSpace and GenCopy); a program that allocates
//! past MMTk's heap makes it collect (and keeps its list); `LOCUS_GC_HEAP_SIZE` sizes the
//! heap; and the collectors MMTk cannot run are refused with one `locus: gc:` line. Each
//! run is a process of its own (one MMTk heap per process).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use crate::runtime_library;

/// MMTk's plans that pin frame roots (the only ones frame roots allow).
const PLANS: [&str; 3] = ["marksweep", "immix", "stickyimmix"];

/// A list of 2000 nodes kept in a frame root while 20 garbage objects of 1 KiB are made
/// per node (40 MB, past MMTk's 16 MiB heap), then summed: 2000 * 2001 / 2.
const CHURN: &str = r#"; expect: 2001000
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  br label %build

build:
  %i = phi i64 [ 1, %entry ], [ %i.next, %churn.done ]
  %head = phi ptr addrspace(10) [ null, %entry ], [ %node, %churn.done ]
  %node = call ptr addrspace(10) @locus_gc_alloc(i64 1, i64 8)
  %node.d = addrspacecast ptr addrspace(10) %node to ptr addrspace(11)
  store ptr addrspace(10) %head, ptr addrspace(11) %node.d
  %val.p = getelementptr i8, ptr addrspace(11) %node.d, i64 8
  store i64 %i, ptr addrspace(11) %val.p
  br label %churn

churn:
  %j = phi i64 [ 0, %build ], [ %j.next, %churn ]
  %junk = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 1024)
  %j.next = add i64 %j, 1
  %j.done = icmp eq i64 %j.next, 20
  br i1 %j.done, label %churn.done, label %churn

churn.done:
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i, 2000
  br i1 %done, label %sum, label %build

sum:
  %cur = phi ptr addrspace(10) [ %node, %churn.done ], [ %next, %sum.body ]
  %acc = phi i64 [ 0, %churn.done ], [ %acc.next, %sum.body ]
  %end = icmp eq ptr addrspace(10) %cur, null
  br i1 %end, label %exit, label %sum.body

sum.body:
  %cur.d = addrspacecast ptr addrspace(10) %cur to ptr addrspace(11)
  %v.p = getelementptr i8, ptr addrspace(11) %cur.d, i64 8
  %v = load i64, ptr addrspace(11) %v.p
  %acc.next = add i64 %acc, %v
  %next = load ptr addrspace(10), ptr addrspace(11) %cur.d
  br label %sum

exit:
  ret i64 %acc
}
"#;

fn programs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/programs");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ll"))
        .collect();
    v.sort();
    v
}

fn expected_value(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("; expect: ").map(|v| v.trim().to_string()))
}

fn gc_run(args: &[&str]) -> Output {
    gc_run_with_heap(None, args)
}

/// `locus gc run ARGS` with `LOCUS_GC_HEAP_SIZE=heap` (unset when `None`).
fn gc_run_with_heap(heap: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(LOCUS);
    cmd.args(["gc", "run", "--timeout", "60"]).args(args);
    match heap {
        Some(size) => cmd.env("LOCUS_GC_HEAP_SIZE", size),
        None => cmd.env_remove("LOCUS_GC_HEAP_SIZE"),
    };
    cmd.output().unwrap_or_else(|e| panic!("run {LOCUS}: {e}"))
}

/// Every program of the suite under `plan`, its result the one `; expect:` says.
fn suite_under(plan: &str) {
    let collector = format!("mmtk:{plan}");
    let mut failures = Vec::new();
    for p in programs() {
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let Some(expected) = expected_value(&text) else {
            continue;
        };
        let out = gc_run(&["--collector", &collector, path_str(&p)]);
        let got = text_of(&out.stdout);
        if !out.status.success() || got.trim() != expected {
            failures.push(format!(
                "{}: want {expected}, got {:?} ({}, {})",
                p.display(),
                got.trim(),
                out.status,
                text_of(&out.stderr).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{collector}:\n{}", failures.join("\n"));
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn suite_under_mmtk_marksweep() {
    suite_under("marksweep");
}

#[test]
fn suite_under_mmtk_immix() {
    suite_under("immix");
}

#[test]
fn suite_under_mmtk_stickyimmix() {
    suite_under("stickyimmix");
}

/// Past the heap: MMTk collects (the stats say so) and the list in the frame survives.
#[test]
fn mmtk_collects_and_keeps_frame_roots() {
    let dir = TempDir::new("gc_mmtk_churn");
    let file = dir.path("churn.ll");
    std::fs::write(&file, CHURN).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let expected = expected_value(CHURN).unwrap_or_default();
    for plan in PLANS {
        // A heap smaller than the churn's 40 MB, so that MMTk must collect.
        let out = gc_run_with_heap(
            Some("16M"),
            &[
                "--collector",
                &format!("mmtk:{plan}"),
                "--stats",
                path_str(&file),
            ],
        );
        let stdout = text_of(&out.stdout);
        assert!(out.status.success(), "{plan}: {}", text_of(&out.stderr));
        assert_eq!(stdout.lines().next(), Some(expected.as_str()), "{plan}");
        let collections: u64 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("collections: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{plan}: no collections line in {stdout}"));
        assert!(collections >= 1, "{plan}: MMTk never collected:\n{stdout}");
    }
}

/// Static objects (a global cast to Tracked, by a constant or through a call) in root
/// slots and in a pointer field, while MMTk collects: every plan skips them, with either
/// roots. MMTk's own tracing used to panic in a GC thread on the field ("does not belong to
/// any MMTk space"), and frame roots reported the slot as not an object.
#[test]
fn static_objects_survive_mmtk_collections() {
    let dir = TempDir::new("gc_mmtk_static");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/programs");
    let mut runs: Vec<(String, &str)> = PLANS
        .iter()
        .map(|p| (format!("mmtk:{p}"), "frames"))
        .collect();
    for plan in ["immix", "semispace", "gencopy"] {
        runs.push((format!("mmtk:{plan}"), "statepoint"));
    }
    for name in ["static_object", "static_object_from_call"] {
        let text = std::fs::read_to_string(root.join(format!("{name}.ll")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let few = "@iterations = internal constant i64 5";
        assert!(text.contains(few), "{name}");
        // 300,000 objects of 48 bytes: past the 4 MiB heap.
        let many = text.replace(few, "@iterations = internal constant i64 300000");
        let file = dir.path(&format!("{name}.ll"));
        std::fs::write(&file, many).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (collector, roots) in &runs {
            collects_and_gives(&file, collector, roots, "4M", "4242");
        }
    }
}

/// `gc run FILE` under `collector` with `roots` and a heap of `heap`: it succeeds, prints
/// `want` and collects.
fn collects_and_gives(file: &Path, collector: &str, roots: &str, heap: &str, want: &str) {
    let args = [
        "--collector",
        collector,
        "--roots",
        roots,
        "--stats",
        path_str(file),
    ];
    let out = gc_run_with_heap(Some(heap), &args);
    let stdout = text_of(&out.stdout);
    assert!(out.status.success(), "{args:?}: {}", text_of(&out.stderr));
    assert_eq!(stdout.lines().next(), Some(want), "{args:?}: {stdout}");
    assert!(!stdout.contains("collections: 0\n"), "{args:?}: {stdout}");
}

/// A function without frontend barriers inlined by `opt-19 -O2` into one with them: the
/// default `--write-barriers insert` keeps the merged store's barrier, so StickyImmix (frame
/// roots) and GenCopy (statepoint roots) keep the young objects through their nursery
/// collections (`auto`, the default before, lost them: 0).
#[test]
fn barriers_survive_inlining_into_frontend_barriers() {
    let dir = TempDir::new("gc_mmtk_inlined_barriers");
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/barriers/inlined_into_frontend_barriers.ll");
    let optimized = dir.path("optimized.ll");
    let out = Command::new("opt-19")
        .args([
            "-S",
            "-passes=default<O2>",
            path_str(&source),
            "-o",
            path_str(&optimized),
        ])
        .output()
        .unwrap_or_else(|e| panic!("opt-19: {e}"));
    assert!(out.status.success(), "opt-19: {}", text_of(&out.stderr));
    let text = std::fs::read_to_string(&optimized).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !text.contains("@attach("),
        "the optimizer did not inline @attach:\n{text}"
    );
    for (collector, roots) in [
        ("mmtk:stickyimmix", "frames"),
        ("mmtk:gencopy", "statepoint"),
    ] {
        collects_and_gives(&optimized, collector, roots, "8M", "5050");
    }
}

/// What MMTk cannot run is refused before the program runs, with one `locus: gc:` line:
/// copying plans with frame roots, the stress collector, the own moving collector.
#[test]
fn refusals() {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/programs/tree.ll");
    let tree = path_str(&tree);
    for (args, needle) in [
        (vec!["--collector", "mmtk:semispace", tree], "cannot pin"),
        (vec!["--collector", "mmtk:gencopy", tree], "cannot pin"),
        (
            vec!["--collector", "mmtk:immix", "--stress", tree],
            "--stress conflicts",
        ),
        (
            vec![
                "--collector",
                "mmtk:semispace",
                "--roots",
                "statepoint",
                "--moving",
                tree,
            ],
            "--moving",
        ),
    ] {
        let out = gc_run(&args);
        let stderr = text_of(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("locus: gc: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
    }
    let out = gc_run(&["--collector", "mmtk:nope", tree]);
    assert!(!out.status.success());
}

/// Ahead of time: a sample of the suite and the churn built by `locus gc build`, run with
/// `LOCUS_GC_COLLECTOR=mmtk:PLAN`, print what the stress collector's run prints; the churn
/// collects; an unknown collector and a copying plan are refused (one `locus: gc:` line).
#[test]
fn built_programs_under_mmtk() {
    let dir = TempDir::new("gc_mmtk_build");
    let churn = dir.path("churn.ll");
    std::fs::write(&churn, CHURN).unwrap_or_else(|e| panic!("{}: {e}", churn.display()));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc/fixtures/programs");
    let mut files: Vec<PathBuf> = ["tree", "list_sum", "julia_alloc", "gc_preserve"]
        .iter()
        .map(|n| root.join(format!("{n}.ll")))
        .collect();
    files.push(churn.clone());
    let runtime = runtime_library::runtime_dir(false);
    for file in &files {
        let prog = dir.path(&format!("{}.bin", stem(file)));
        let out = Command::new(LOCUS)
            .args([
                "gc",
                "build",
                path_str(file),
                "-o",
                path_str(&prog),
                FAST_LINK,
                "--runtime",
            ])
            .arg(runtime)
            .output()
            .unwrap_or_else(|e| panic!("run {LOCUS}: {e}"));
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            text_of(&out.stderr)
        );
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{e}"));
        let expected = expected_value(&text).unwrap_or_default();
        for plan in PLANS {
            let out = Command::new(&prog)
                .env("LOCUS_GC_COLLECTOR", format!("mmtk:{plan}"))
                .env("LOCUS_GC_HEAP_SIZE", "16M")
                .env("LOCUS_GC_STATS", "1")
                .output()
                .unwrap_or_else(|e| panic!("run {}: {e}", prog.display()));
            let stdout = text_of(&out.stdout);
            assert!(
                out.status.success(),
                "{} {plan}: {}",
                file.display(),
                text_of(&out.stderr)
            );
            assert_eq!(
                stdout.lines().next(),
                Some(expected.as_str()),
                "{} {plan}",
                file.display()
            );
            if file == &churn {
                assert!(
                    !stdout.contains("collections: 0\n"),
                    "{plan}: MMTk never collected:\n{stdout}"
                );
            }
        }
    }
    let prog = dir.path("tree.bin");
    for value in ["mmtk:semispace", "nope"] {
        let out = Command::new(&prog)
            .env("LOCUS_GC_COLLECTOR", value)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", prog.display()));
        let stderr = text_of(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{value}: {stderr}");
        assert!(out.stdout.is_empty(), "{value}");
        assert_eq!(stderr.lines().count(), 1, "{value}: {stderr}");
        assert!(stderr.starts_with("locus: gc: "), "{value}: {stderr}");
    }
}

/// `LOCUS_GC_HEAP_SIZE` sizes MMTk's heap: a program with about 29 MB live
/// (gc-runtime's fixtures/big_live.ll, 100000 nodes of 256 bytes) runs under mmtk:immix
/// and mmtk:marksweep in the default heap (grown by the runtime), in a fixed 64M one and in
/// one grown from 16M up to 256M, and runs
/// out of memory in a fixed 16M one with one `locus: gc:` line naming the limit (status 2);
/// a size that is not one is refused before the program runs (status 1).
#[test]
fn heap_size_from_environment() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc-runtime/tests/fixtures/big_live.ll");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let expected = expected_value(&text).unwrap_or_default();
    for plan in ["immix", "marksweep"] {
        let collector = format!("mmtk:{plan}");
        for heap in [None, Some("64M"), Some("67108864"), Some("16M..256M")] {
            let out = gc_run_with_heap(heap, &["--collector", &collector, path_str(&file)]);
            assert!(
                out.status.success(),
                "{plan} {heap:?}: {}",
                text_of(&out.stderr)
            );
            assert_eq!(text_of(&out.stdout).trim(), expected, "{plan} {heap:?}");
        }
        let out = gc_run_with_heap(Some("16m"), &["--collector", &collector, path_str(&file)]);
        let stderr = text_of(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{plan} 16m: {stderr}");
        assert!(out.stdout.is_empty(), "{plan} 16m");
        assert_eq!(stderr.lines().count(), 1, "{plan} 16m: {stderr}");
        assert!(
            stderr.starts_with("locus: gc: allocation: ")
                && stderr
                    .contains("out of memory: the heap is full at its limit of 16777216 bytes"),
            "{plan} 16m: {stderr}"
        );
    }
    for bad in [
        "x12",
        "12T",
        "0",
        "",
        "99999999999999999999G",
        "64M..16M",
        "..",
    ] {
        let out = gc_run_with_heap(Some(bad), &["--collector", "mmtk:immix", path_str(&file)]);
        let stderr = text_of(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{bad:?}: {stderr}");
        assert!(
            stderr.starts_with("locus: gc: LOCUS_GC_HEAP_SIZE="),
            "{bad:?}: {stderr}"
        );
    }
}

/// The collections every `locus gc run` of the statepoint tests asks MMTk for: at every
/// `N`th call that may collect (1 but for the programs that allocate a thousand objects).
fn collect_every(program: &Path) -> &'static str {
    match stem(program).as_str() {
        "tree" | "deep_recursion" => "97",
        "julia_alloc" | "julia_memory" | "list_sum" => "13",
        _ => "1",
    }
}

/// Under SemiSpace and GenCopy, which cannot pin: the suite's programs whose objects must
/// stay in place (pinned by gc_preserve / jl_roots, named by a stack root region: an
/// alloca the rewrite keeps in memory, a value kept across setjmp), and the start of the
/// one line that refuses each.
const COPYING_REFUSED: [(&str, &str); 25] = [
    ("alloca_address_as_integer", "  mmtk: the root region"),
    ("alloca_dynamic", "  mmtk: the root region"),
    ("alloca_filled_by_callee", "  mmtk: the root region"),
    ("alloca_out_param", "  mmtk: the root region"),
    ("alloca_punned_escaped", "  mmtk: the root region"),
    ("alloca_punned_masked", "  mmtk: the root region"),
    ("alloca_punned_memcpy", "  mmtk: the root region"),
    ("alloca_returned_by_call", "  mmtk: the root region"),
    ("alloca_variable_offset", "  mmtk: the root region"),
    ("gc_loaded", "locus: gc: pin: "),
    ("gc_preserve", "locus: gc: pin: "),
    ("jl_roots", "locus: gc: pin: "),
    ("julia_call", "  mmtk: the root region"),
    ("julia_call2", "  mmtk: the root region"),
    ("preserve_aggregate", "locus: gc: pin: "),
    ("preserve_no_end", "locus: gc: pin: "),
    ("returns_twice_list", "  mmtk: the root region"),
    ("returns_twice_longjmp", "  mmtk: the root region"),
    ("returns_twice_merge", "  mmtk: the root region"),
    ("returns_twice_predecessor", "  mmtk: the root region"),
    ("returns_twice_slot_reuse", "  mmtk: the root region"),
    ("returns_twice_two_calls", "  mmtk: the root region"),
    ("sret_mixed", "  mmtk: the root region"),
    ("sret_punned", "  mmtk: the root region"),
    ("sret_tracked", "  mmtk: the root region"),
];

/// What one statepoint run under MMTk gave: the result matched, and the objects moved.
struct SpRun {
    ok: bool,
    moved: u64,
    /// Write barriers run (`write barriers:` of `--stats`).
    barriers: u64,
    report: String,
}

/// `locus gc run --roots statepoint --collector mmtk:PLAN --stats` of `program`, MMTk
/// collecting at every `N`th call that may collect ([`collect_every`]), Immix and
/// StickyImmix defragmenting at each (`LOCUS_GC_MMTK_DEFRAG=1`).
fn statepoint_run(plan: &str, program: &Path) -> SpRun {
    stress_run(plan, "statepoint", program)
}

/// [`statepoint_run`] with the roots `roots` (`frames` or `statepoint`).
fn stress_run(plan: &str, roots: &str, program: &Path) -> SpRun {
    let text =
        std::fs::read_to_string(program).unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let expected = expected_value(&text).unwrap_or_default();
    let out = Command::new(LOCUS)
        .args(["gc", "run", "--timeout", "60", "--roots", roots, "--stats"])
        .args(["--collector", &format!("mmtk:{plan}"), path_str(program)])
        .env("LOCUS_GC_MMTK_COLLECT_EVERY", collect_every(program))
        // Immix and StickyImmix defragment at every collection: they move objects too.
        .env("LOCUS_GC_MMTK_DEFRAG", "1")
        .env_remove("LOCUS_GC_HEAP_SIZE")
        .output()
        .unwrap_or_else(|e| panic!("run {LOCUS}: {e}"));
    let stdout = text_of(&out.stdout);
    let stderr = text_of(&out.stderr);
    let name = stem(program);
    if let Some((_, line)) = COPYING_REFUSED
        .iter()
        .find(|(n, _)| !plan_pins(plan) && *n == name)
    {
        let last = stderr.lines().last().unwrap_or_default();
        let ok = out.status.code() == Some(2)
            && stderr.starts_with(line)
            && last.starts_with("locus: gc: ")
            && stderr.lines().filter(|l| l.starts_with("locus:")).count() == 1;
        return SpRun {
            ok,
            moved: 0,
            barriers: 0,
            report: format!("{name} refused: {}", stderr.trim()),
        };
    }
    let moved = stdout
        .lines()
        .find_map(|l| l.strip_prefix("objects moved: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let barriers = stdout
        .lines()
        .find_map(|l| l.strip_prefix("write barriers: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    SpRun {
        ok: out.status.success() && stdout.lines().next() == Some(expected.as_str()),
        moved,
        barriers,
        report: format!(
            "{name}: want {expected}, got {:?} ({}; {}), moved {moved}",
            stdout.lines().next().unwrap_or_default(),
            out.status,
            stderr.trim()
        ),
    }
}

fn plan_pins(plan: &str) -> bool {
    matches!(plan, "marksweep" | "immix" | "stickyimmix")
}

/// Statepoint roots on MMTk's five plans, MMTk collecting at (nearly) every call that may
/// collect: every program of the GC suite under SemiSpace (the ones that need objects to
/// stay in place refused with one clear line on the copying plans: [`COPYING_REFUSED`])
/// gives its `; expect:` result, as the stress collector does, and objects move in most of
/// them; so does, under GenCopy and StickyImmix, every program that writes tracked
/// pointers into memory ([`writes_tracked_pointers`]: the ones a missing write barrier can
/// break), with a sample with derived pointers (selects, vector lanes, phis),
/// callee-rooted arguments and a tree, which runs under Immix and MarkSweep too. The
/// suite's programs place no write barriers, which the generational plans need: the
/// lowering places them (`locus_gc::lower::WriteBarriers`; without them
/// `callee_rooted_field`, `vector_loaded` and `vector_masked_loads` gave wrong results on
/// both). Programs run two at a time.
#[test]
fn statepoint_roots_under_mmtk() {
    let all = programs();
    let sample: Vec<PathBuf> = all
        .iter()
        .filter(|p| {
            [
                "callee_rooted",
                "derived_select_phi",
                "tree",
                "vector_dynamic_lane",
                "vector_phi",
                "vector_struct",
            ]
            .contains(&stem(p).as_str())
        })
        .cloned()
        .collect();
    assert_eq!(sample.len(), 6);
    // On the generational plans: every program a missing barrier can break, and the sample.
    let generational: Vec<PathBuf> = all
        .iter()
        .filter(|p| writes_tracked_pointers(p) || sample.contains(p))
        .cloned()
        .collect();
    assert!(generational.len() >= 20, "{} programs", generational.len());
    let mut jobs: Vec<(&str, PathBuf)> = all.iter().map(|p| ("semispace", p.clone())).collect();
    for plan in ["gencopy", "stickyimmix"] {
        jobs.extend(generational.iter().map(|p| (plan, p.clone())));
    }
    for plan in ["immix", "marksweep"] {
        jobs.extend(sample.iter().map(|p| (plan, p.clone())));
    }
    let jobs = std::sync::Mutex::new(jobs.into_iter());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((plan, program)) = job else { break };
                let run = statepoint_run(plan, &program);
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((plan, run));
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, r)| !r.ok)
        .map(|(plan, r)| format!("{plan}: {}", r.report))
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    let semispace: Vec<&SpRun> = results
        .iter()
        .filter(|(p, _)| *p == "semispace")
        .map(|(_, r)| r)
        .collect();
    let moved_in = semispace.iter().filter(|r| r.moved > 0).count();
    let moved: u64 = semispace.iter().map(|r| r.moved).sum();
    println!(
        "semispace: {} programs, {} refused, objects moved in {moved_in} ({moved} in all)",
        semispace.len(),
        COPYING_REFUSED.len()
    );
    assert!(moved_in >= 20, "objects moved in only {moved_in} programs");
}

/// True if `program` writes tracked pointers into memory (a store, an atomic, a masked
/// store or scatter, a copy): the programs a missing write barrier can break.
fn writes_tracked_pointers(program: &Path) -> bool {
    let text =
        std::fs::read_to_string(program).unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    text.lines().any(|l| {
        let l = l.trim_start();
        (l.starts_with("store ") && l.contains("addrspace(10) %"))
            || [
                "cmpxchg",
                "atomicrmw",
                "masked.store",
                "masked.scatter",
                "memcpy",
                "memmove",
            ]
            .iter()
            .any(|w| l.contains(w))
    })
}

/// Frame roots under StickyImmix, MMTk collecting at (nearly) every call that may collect
/// and defragmenting: every program of the suite that writes tracked pointers into memory
/// gives its `; expect:` result with the barriers the lowering places. With a copying
/// nursery (before MMTk's `sticky_immix_non_moving_nursery`), `gc_loaded`, `vector_loaded`
/// (4200) and `vector_masked_loads` were wrong: the nursery copied young objects reached
/// through the remembered set, past the frame roots' transitive pin, while the code held
/// Loaded pointers to them. Programs run two at a time.
#[test]
fn frame_roots_under_stickyimmix_at_every_call() {
    let writers: Vec<PathBuf> = programs()
        .into_iter()
        .filter(|p| writes_tracked_pointers(p))
        .collect();
    let count = writers.len();
    let jobs = std::sync::Mutex::new(writers.into_iter());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some(program) = job else { break };
                let run = stress_run("stickyimmix", "frames", &program);
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((stem(&program), run));
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let problems: Vec<String> = results
        .iter()
        .filter(|(_, run)| !run.ok)
        .map(|(_, run)| format!("stickyimmix frames: {}", run.report))
        .collect();
    assert!(count >= 16, "only {count} programs write tracked pointers");
    assert_eq!(results.len(), count);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Young objects stored into an old one through a phi of derived pointers (a loop walking
/// the array's fields), an `atomicrmw xchg` and a vector store, with a collection after
/// each: on a generational plan each needs its barrier, which the lowering places (12 run;
/// with only the frontend's, none, the program gave 1800 or 200). The stress collector
/// gives 635.
const YOUNG_INTO_OLD: &str = r#"; expect: 635
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)

define ptr addrspace(10) @box(i64 %v) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %b = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %b.d = addrspacecast ptr addrspace(10) %b to ptr addrspace(11)
  store i64 %v, ptr addrspace(11) %b.d
  ret ptr addrspace(10) %b
}

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %arr = call ptr addrspace(10) @locus_gc_alloc(i64 10, i64 0)
  %arr.d = addrspacecast ptr addrspace(10) %arr to ptr addrspace(11)
  br label %fill

fill:
  %i = phi i64 [ 1, %entry ], [ %i.next, %fill ]
  %p = phi ptr addrspace(11) [ %arr.d, %entry ], [ %p.next, %fill ]
  %box = call ptr addrspace(10) @box(i64 %i)
  store ptr addrspace(10) %box, ptr addrspace(11) %p
  %junk = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 64)
  %p.next = getelementptr inbounds ptr addrspace(10), ptr addrspace(11) %p, i64 1
  %i.next = add i64 %i, 1
  %full = icmp eq i64 %i, 10
  br i1 %full, label %swap, label %fill

swap:
  %hundred = call ptr addrspace(10) @box(i64 100)
  %old = atomicrmw xchg ptr addrspace(11) %arr.d, ptr addrspace(10) %hundred seq_cst
  %j1 = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 64)
  %b200 = call ptr addrspace(10) @box(i64 200)
  %b300 = call ptr addrspace(10) @box(i64 300)
  %v0 = insertelement <2 x ptr addrspace(10)> undef, ptr addrspace(10) %b200, i32 0
  %v1 = insertelement <2 x ptr addrspace(10)> %v0, ptr addrspace(10) %b300, i32 1
  %f8 = getelementptr inbounds ptr addrspace(10), ptr addrspace(11) %arr.d, i64 8
  store <2 x ptr addrspace(10)> %v1, ptr addrspace(11) %f8, align 8
  %j2 = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 64)
  br label %sum

sum:
  %k = phi i64 [ 0, %swap ], [ %k.next, %sum ]
  %acc = phi i64 [ 0, %swap ], [ %acc.next, %sum ]
  %f = getelementptr inbounds ptr addrspace(10), ptr addrspace(11) %arr.d, i64 %k
  %e = load ptr addrspace(10), ptr addrspace(11) %f
  %e.d = addrspacecast ptr addrspace(10) %e to ptr addrspace(11)
  %x = load i64, ptr addrspace(11) %e.d
  %acc.next = add i64 %acc, %x
  %k.next = add i64 %k, 1
  %done = icmp eq i64 %k.next, 10
  br i1 %done, label %exit, label %sum

exit:
  ret i64 %acc.next
}
"#;

/// [`YOUNG_INTO_OLD`] under StickyImmix with frame and statepoint roots and GenCopy with
/// statepoint roots, collecting at every call and defragmenting: its result, with the 12
/// barriers the lowering placed run.
#[test]
fn lowering_places_the_barriers_generational_plans_need() {
    let dir = TempDir::new("gc_mmtk_barriers");
    let file = dir.path("young_into_old.ll");
    std::fs::write(&file, YOUNG_INTO_OLD).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    for (plan, roots) in [
        ("stickyimmix", "frames"),
        ("stickyimmix", "statepoint"),
        ("gencopy", "statepoint"),
    ] {
        let run = stress_run(plan, roots, &file);
        assert!(run.ok, "{plan} {roots}: {}", run.report);
        assert!(
            run.barriers == 12,
            "{plan} {roots}: {} barriers run, want 12: {}",
            run.barriers,
            run.report
        );
    }
}

/// gc-runtime's fixtures/moved.ll under every plan: a base slot and a derived pointer (a
/// select RS4GC cannot rematerialize) across a collection that moves the object on every
/// plan but MarkSweep and StickyImmix (Immix defragmenting; StickyImmix's nursery does not
/// copy, and its collections here are nursery ones). With the derived slots left alone the program returns 1; with
/// the base slots not handed over, a dangling-reference line and status 2.
#[test]
fn statepoint_slots_and_derived_pointers_move() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gc-runtime/tests/fixtures/moved.ll");
    for plan in ["semispace", "gencopy", "immix", "stickyimmix", "marksweep"] {
        let run = statepoint_run(plan, &file);
        assert!(run.ok, "{plan}: {}", run.report);
        if plan != "marksweep" && plan != "stickyimmix" {
            assert!(run.moved > 0, "{plan}: nothing moved: {}", run.report);
        }
    }
}

/// Frame roots on Immix defragmenting at every collection: compiled code keeps pointers it
/// loaded from a rooted object's fields (Loaded, addrspace 13, here from masked loads and
/// gathers) in registers while only that object is in its frame, so what a frame names is
/// pinned transitively. With the frame's objects alone pinned, defragmentation moved 16
/// objects and the program returned 4240.
#[test]
fn frame_roots_pin_what_code_loaded_from_them_under_immix_defrag() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gc/fixtures/programs/vector_masked_loads.ll");
    let out = Command::new(LOCUS)
        .args(["gc", "run", "--timeout", "60", "--collector", "mmtk:immix"])
        .arg(&file)
        .env("LOCUS_GC_MMTK_COLLECT_EVERY", "1")
        .env("LOCUS_GC_MMTK_DEFRAG", "1")
        .env_remove("LOCUS_GC_HEAP_SIZE")
        .output()
        .unwrap_or_else(|e| panic!("run {LOCUS}: {e}"));
    assert!(out.status.success(), "{}", text_of(&out.stderr));
    assert_eq!(text_of(&out.stdout), "4242\n");
}
