//! Every program in `fixtures/programs` run under the stress collector (a collection at every
//! call that may collect, freed objects poisoned and never reused): the result must be the
//! one its `; expect:` line gives, with no fault; and the frames use no more slots than the
//! most values rooted together at one safepoint. (That the oracle can fail, a dropped root
//! caught as a dangling reference, is tested through the CLI in crates/cli/tests/gc.rs,
//! since a program whose root was dropped may crash its process.)

mod common;

use std::fs;
use std::path::Path;

use locus_gc::run::{run, Roots, RunOptions, RunOutcome};
use locus_gc::runtime::OnFault;

use common::ll_files;

fn expected(text: &str, path: &Path) -> i64 {
    text.lines()
        .find_map(|l| l.strip_prefix("; expect: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}: no `; expect: N` line", path.display()))
}

fn run_file(path: &Path, stress: bool) -> RunOutcome {
    run_file_with(path, stress, None)
}

/// Runs `path`, with the LLVM pass pipeline `passes` run on it after lowering.
fn run_file_with(path: &Path, stress: bool, passes: Option<&str>) -> RunOutcome {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let options = RunOptions {
        stress,
        on_fault: OnFault::Record,
        passes: passes.map(str::to_owned),
        ..RunOptions::default()
    };
    // SAFETY: the fixtures only touch the objects the runtime gives them, while they are
    // live (checked under the stress collector, which makes freed objects inaccessible).
    unsafe { run(&path.display().to_string(), &text, options) }
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_program_gives_its_result_under_stress() {
    every_program_gives_its_result_through(None);
}

/// The same with LLVM's standard pipelines run on each lowered module before it is
/// compiled (issue 23, section 3): the stress collector then checks the frames as the
/// optimizer left them, so a frame store the optimizer dropped frees a live object.
#[test]
fn every_program_gives_its_result_through_o1_under_stress() {
    every_program_gives_its_result_through(Some("default<O1>"));
}

/// As above at -O2 (a test of its own, so that the levels run at once).
#[test]
fn every_program_gives_its_result_through_o2_under_stress() {
    every_program_gives_its_result_through(Some("default<O2>"));
}

/// As above at -O3.
#[test]
fn every_program_gives_its_result_through_o3_under_stress() {
    every_program_gives_its_result_through(Some("default<O3>"));
}

fn every_program_gives_its_result_through(passes: Option<&str>) {
    let mut passed = Vec::new();
    for path in ll_files("fixtures/programs") {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let out = run_file_with(&path, true, passes);
        assert!(
            out.faults.is_empty(),
            "{} (passes {passes:?}): faults {:#?}",
            path.display(),
            out.faults
        );
        assert_eq!(
            out.value,
            expected(&text, &path),
            "{} (passes {passes:?})",
            path.display()
        );
        assert!(
            out.stats.collections > 0,
            "{}: the stress collector never ran",
            path.display()
        );
        passed.push(
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
    }
    println!(
        "gc programs under --stress, passes {}: {} passed: {}",
        passes.unwrap_or("none"),
        passed.len(),
        passed.join(", ")
    );
}

/// x86-64's data layout with Julia's non-integral address spaces (`ni:10:11:12:13`), as
/// Julia's modules have it: without them LLVM may turn a tracked pointer into an integer
/// (`gc_loaded.ll` at -O2), which the GC invariants refuse.
const JULIA_DATA_LAYOUT: &str =
    "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128-ni:10:11:12:13";

/// LLVM's standard pipelines run on each program *before* it is lowered, as Julia runs its
/// optimizer before LateLowerGCFrame: the lowering must root what the optimizer made of
/// the program (values kept in registers across calls, loads forwarded, code inlined and
/// duplicated). Each level's output runs with frame roots under the stress collector, the
/// same level run again after the lowering (Julia's pipeline optimizes after
/// LateLowerGCFrame too: the optimizer's `tail` markers must not let it drop frame stores),
/// and with statepoint roots under the moving one.
///
/// O2 is Julia's default level, O3 adds the vectorizers (O1 is left out for CI time); a
/// test each, so that they run at once.
#[test]
fn every_program_gives_its_result_at_o2_before_the_lowering() {
    every_program_gives_its_result_optimized_before_the_lowering("default<O2>");
}

/// See [`every_program_gives_its_result_at_o2_before_the_lowering`].
#[test]
fn every_program_gives_its_result_at_o3_before_the_lowering() {
    every_program_gives_its_result_optimized_before_the_lowering("default<O3>");
}

fn every_program_gives_its_result_optimized_before_the_lowering(level: &str) {
    let layout = format!("--data-layout={JULIA_DATA_LAYOUT}");
    let mut failed = Vec::new();
    let mut runs = 0;
    let passes = format!("-passes={level}");
    for path in ll_files("fixtures/programs") {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let want = expected(&text, &path);
        let optimized = opt(&text, &[&layout, &passes]);
        let name = format!("{} ({level} before)", path.display());
        for (roots, moving) in [(Roots::Frames, false), (Roots::Statepoint, true)] {
            let options = RunOptions {
                roots,
                moving,
                stress: true,
                on_fault: OnFault::Record,
                passes: (roots == Roots::Frames).then(|| level.to_owned()),
                ..RunOptions::default()
            };
            runs += 1;
            // SAFETY: as in `run_file_with`; the optimizer keeps the programs' meaning.
            match unsafe { run(&name, &optimized, options) } {
                Ok(out) if out.faults.is_empty() && out.value == want => {}
                Ok(out) => failed.push(format!(
                    "{name} {roots:?}: value {} (want {want}), {} faults, the first {:?}",
                    out.value,
                    out.faults.len(),
                    out.faults.first()
                )),
                Err(e) => failed.push(format!("{name} {roots:?}: {e}")),
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    println!("{runs} runs of programs optimized before the lowering gave their results");
}

#[test]
fn slots_meet_the_live_together_lower_bound() {
    for path in ll_files("fixtures/programs") {
        let out = run_file(&path, false);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for f in &out.reports {
            // A value live across a `returns_twice` call keeps a slot of its own (see
            // below): more slots than values live together.
            if text.contains(") returns_twice") && f.slots > f.max_live {
                continue;
            }
            assert_eq!(
                f.slots,
                f.max_live,
                "{} @{}: {} slots for at most {} live together",
                path.display(),
                f.function,
                f.slots,
                f.max_live
            );
        }
    }
}

/// A phi of values defined above it leans on their roots; a loop-carried phi does not.
#[test]
fn phis_of_rooted_values_need_no_slot() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/programs");
    let refined = run_file(&dir.join("phi_refine.ll"), true);
    assert_eq!(refined.reports[0].slots, 2, "{:#?}", refined.reports);
    let looped = run_file(&dir.join("list_sum.ll"), true);
    let rooted: Vec<&str> = looped.reports[0]
        .safepoints
        .iter()
        .flat_map(|s| s.live.iter().map(|(n, _)| n.as_str()))
        .collect();
    assert!(
        rooted.contains(&"%head"),
        "the loop-carried phi %head must be rooted: {rooted:?}"
    );
}

/// A value live across a `returns_twice` call keeps a slot of its own: code after the second
/// return may find the frame as the first return left it. Here %a (live across the
/// returns_twice call) and %b (live later, when %a is dead) would otherwise share a slot.
#[test]
fn values_live_across_returns_twice_get_their_own_slot() {
    let ir = |attr: &str| {
        format!(
            r#"
declare ptr @julia.get_pgcstack()
declare ptr addrspace(10) @locus_gc_alloc(i64, i64)
declare i32 @checkpoint(ptr) {attr}
declare void @use(ptr addrspace(10))

define void @f() {{
  %pgcstack = call ptr @julia.get_pgcstack()
  %a = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %r = call i32 @checkpoint(ptr null)
  call void @use(ptr addrspace(10) %a)
  %b = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  %c = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)
  call void @use(ptr addrspace(10) %b)
  ret void
}}
attributes #0 = {{ returns_twice }}
"#
        )
    };
    let slots = |text: String| {
        let ctx = locus_llvm::Context::new();
        let module =
            locus_llvm::Module::parse_ir(&ctx, "rt.ll", text).unwrap_or_else(|e| panic!("{e}"));
        let reports =
            locus_gc::lower::lower_module(&module, locus_gc::lower::LowerOptions::default())
                .unwrap_or_else(|e| panic!("{e}"));
        reports[0].slots
    };
    assert_eq!(
        slots(ir("")),
        1,
        "without returns_twice %a and %b share a slot"
    );
    assert_eq!(
        slots(ir("#0")),
        2,
        "with returns_twice %a keeps its own slot"
    );
}

/// Julia's write barriers reach the runtime, counted; one whose child is null is dropped.
#[test]
fn write_barriers_reach_the_runtime() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/programs");
    let out = run_file(&dir.join("write_barrier.ll"), true);
    assert_eq!(out.stats.write_barriers, 1, "{:?}", out.stats);
}

/// A Julia intrinsic that nothing here implements (LowerPTLS's `julia.ptls_states`) is
/// refused before the module runs, naming the call, not left to fail in the JIT.
#[test]
fn unimplemented_julia_intrinsics_are_refused_by_name() {
    let ir = r#"
declare ptr @julia.get_pgcstack()
declare ptr @julia.ptls_states()
define i64 @main() {
  %p = call ptr @julia.get_pgcstack()
  %t = call ptr @julia.ptls_states()
  ret i64 0
}
"#;
    match locus_gc::run::prepare("ptls_states.ll", ir, "main") {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("@julia.ptls_states is left after lowering"),
                "{text}"
            );
        }
        Ok(_) => panic!("a module calling julia.ptls_states was prepared to run"),
    }
}

/// Julia's allocations run on the Locus runtime: the objects are tagged (`julia.typeof`
/// reads the tag back) and scanned, and `julia.gc_alloc_memory` makes arrays both inline
/// and through the runtime's `GenericMemory` call.
#[test]
fn julia_allocations_run_on_the_runtime() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/programs");
    let list = run_file(&dir.join("julia_alloc.ll"), true);
    assert_eq!(list.stats.objects_allocated, 300, "{:?}", list.stats);
    assert_eq!(list.stats.write_barriers, 100, "{:?}", list.stats);
    let memory = run_file(&dir.join("julia_memory.ll"), true);
    // 304 boxes and 2 memories: 4 * 8 + 16 and 300 * 8 + 16 bytes.
    assert_eq!(memory.stats.objects_allocated, 306, "{:?}", memory.stats);
    assert_eq!(
        memory.stats.bytes_allocated,
        304 * 8 + 48 + 2416,
        "{:?}",
        memory.stats
    );
}

/// IR whose roots the lowering cannot keep is refused with an error naming the
/// instruction, never lowered with an object left unrooted (each of these programs freed a
/// live object under the stress collector before). A `; refused: TEXT` line says what the
/// error must contain.
#[test]
fn what_cannot_be_rooted_is_refused() {
    let files = ll_files("fixtures/refused");
    for path in files {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let want = text
            .lines()
            .find_map(|l| l.strip_prefix("; refused: "))
            .unwrap_or_else(|| panic!("{}: no `; refused:` line", path.display()));
        match locus_gc::run::prepare(&path.display().to_string(), &text, "main") {
            Err(e) => {
                let got = e.to_string();
                assert!(
                    got.contains(want) && got.contains("function @main, instruction `"),
                    "{}: {got}",
                    path.display()
                );
            }
            Ok(_) => panic!("{}: lowered instead of refused", path.display()),
        }
    }
}

/// N allocations all live to the function's end keep about N²/2 (safepoint, root) pairs:
/// past `MAX_LIVE_PAIRS` (N = 3000) the lowering refuses the function by name instead of
/// growing without bound (N = 8000 took 2.7 GB and 40 s); N = 100 lowers and runs.
#[test]
fn too_many_roots_live_across_safepoints_are_refused() {
    let program = |n: usize| {
        let mut text = String::from(
            "declare ptr @julia.get_pgcstack()\n\
             declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)\n\
             define void @keep(ptr addrspace(10) %x) noinline {\n  ret void\n}\n\
             define i64 @main() {\n  %pg = call ptr @julia.get_pgcstack()\n",
        );
        for i in 0..n {
            text.push_str(&format!(
                "  %o{i} = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 8)\n"
            ));
        }
        for i in 0..n {
            text.push_str(&format!("  call void @keep(ptr addrspace(10) %o{i})\n"));
        }
        text.push_str("  ret i64 7\n}\n");
        text
    };
    match locus_gc::run::prepare("roots.ll", program(3000), "main") {
        Err(e) => {
            let got = e.to_string();
            assert!(
                got.contains("function @main") && got.contains("GC values live across safepoints"),
                "{got}"
            );
        }
        Ok(_) => panic!("3000 roots live across 3000 safepoints were lowered"),
    }
    if let Err(e) = locus_gc::run::prepare("roots.ll", program(100), "main") {
        panic!("100 roots: {e}");
    }
}

/// `opt-19 ARGS -S` on `text`, as LLVM's own tool prints it.
fn opt(text: &str, args: &[&str]) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("opt-19")
        .args(args)
        .arg("-S")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("opt-19: {e}"));
    let Some(mut stdin) = child.stdin.take() else {
        panic!("opt-19: no standard input")
    };
    let input = text.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("opt-19: {e}"));
    match writer.join() {
        Ok(Ok(())) => {}
        _ => panic!("opt-19 did not read its input"),
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The frame store that roots `%o` across a safepoint with optimistic memory effects
/// survives LLVM's own -O2 pipeline (`opt-19`) on `locus gc lower`'s output; with the
/// promises put back on the lowered call, as the lowering left them before it took them
/// away, opt-19's dead-store elimination drops it (the failure this guards against).
#[test]
fn frame_stores_survive_opt_19() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/programs");
    let root_store = "store ptr addrspace(10) %o, ptr";
    // (fixture, what the lowering removes, how the unfixed lowering left it)
    let cases = [
        (
            "safepoint_argmem_read.ll",
            r#"attributes #0 = { noinline "julia.safepoint" }"#,
            r#"attributes #0 = { noinline "julia.safepoint" memory(argmem: read) }"#,
        ),
        (
            "safepoint_readnone_gcstack.ll",
            "attributes #0 = { noinline }",
            "attributes #0 = { noinline memory(argmem: readwrite) }",
        ),
    ];
    for (file, stripped, promised) in cases {
        let path = dir.join(file);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let ctx = locus_llvm::Context::new();
        let module = locus_llvm::Module::parse_ir(&ctx, file, &text)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        // Without the inlined allocation fast path: its loads through the chain head would
        // keep the frame store alive even with the promises left (the negative case below).
        let threads = locus_gc::lower::ThreadOptions::default()
            .with_inline_alloc(locus_gc::lower::InlineAlloc::Never);
        locus_gc::lower::lower_module_with(
            &module,
            locus_gc::lower::LowerOptions::default(),
            threads,
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        let lowered = module.print();
        assert!(lowered.contains(stripped), "{file}: {lowered}");
        assert!(
            !lowered.contains("ptr readnone"),
            "{file}: a readnone argument is left: {lowered}"
        );
        let optimized = opt(&lowered, &["-passes=default<O2>"]);
        assert!(
            optimized.contains(root_store),
            "{file}: opt-19 -O2 dropped the frame store of %o:\n{optimized}"
        );
        let unfixed = lowered
            .replace(stripped, promised)
            .replace("@poll(ptr %pgcstack)", "@poll(ptr readnone %pgcstack)");
        assert!(
            !opt(&unfixed, &["-passes=default<O2>"]).contains(root_store),
            "{file}: with the promises left on the call the store should be dead to opt-19"
        );
    }
}

/// A pipeline LLVM cannot parse is refused, naming it, before anything runs.
#[test]
fn a_bad_pass_pipeline_is_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/programs");
    let text = fs::read_to_string(dir.join("tree.ll")).unwrap_or_else(|e| panic!("tree.ll: {e}"));
    for bad in ["no-such-pass", "default<O7>", "function(dse", ""] {
        match locus_gc::run::prepare_with_passes("tree.ll", &text, "main", Some(bad)) {
            Err(e) => {
                let got = e.to_string();
                assert!(
                    got.contains(&format!("cannot run the pass pipeline `{bad}`")),
                    "{bad}: {got}"
                );
            }
            Ok(_) => panic!("the pipeline `{bad}` was accepted"),
        }
    }
}
