//! The inlined allocation fast path (`locus_gc::lower::inline_alloc`) in executables built
//! as a user builds them (`locus gc build`): `fixtures/inline/trees.ll` allocates 172,031
//! objects through `locus_gc_alloc` calls with constant sizes in a 4 MB MMTk heap. Built
//! with the fast path inlined and without, with frame and statepoint roots, it must print
//! its `; expect:` value under every plan that takes those roots, collect, and count the
//! same number of objects allocated either way (`LOCUS_GC_STATS=1`): the inlined path
//! counts in the runtime's per-thread counters. The lowered text says which build inlined.
//!
//! The runtime library is built as a user builds it (see `runtime_library.rs`).

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::build::{build, lower_for_build, BuildOptions};
use locus_gc::lower::InlineAlloc;
use locus_gc::run::Roots;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/inline/trees.ll")
}

/// The program's result and the runtime's `objects allocated` and `collections` counts.
fn run(exe: &Path, collector: &str) -> (String, u64, u64) {
    let out = Command::new(exe)
        .env("LOCUS_GC_COLLECTOR", collector)
        .env("LOCUS_GC_HEAP_SIZE", "4M")
        .env("LOCUS_GC_STATS", "1")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{} under {collector}: {stdout}{stderr}",
        exe.display()
    );
    let text = format!("{stdout}{stderr}");
    let count = |what: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(what)?.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no `{what}` in\n{text}"))
    };
    let result = stdout.lines().next().unwrap_or_default().to_owned();
    (result, count("objects allocated:"), count("collections:"))
}

#[test]
fn inlined_allocations_give_the_calls_results_and_counts() {
    let runtime = runtime_library::runtime_dir(false).join("liblocus_gc_runtime.a");
    let file = fixture();
    let ir = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let shown = file.display().to_string();
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("inline-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for (roots, plans) in [
        (Roots::Frames, &["immix", "stickyimmix", "marksweep"][..]),
        (
            Roots::Statepoint,
            &["immix", "stickyimmix", "marksweep", "semispace", "gencopy"][..],
        ),
    ] {
        let mut counts = Vec::new();
        for inline in [InlineAlloc::Auto, InlineAlloc::Never] {
            let options = BuildOptions {
                roots,
                runtime: Some(runtime.clone()),
                inline_alloc: inline,
                ..BuildOptions::default()
            };
            let text = lower_for_build(&shown, &ir, &options)
                .unwrap_or_else(|e| panic!("{shown} ({roots:?}, {inline:?}): {e}"));
            // Statepoint roots always inline (the rewrite's own final lowering).
            let inlined = inline == InlineAlloc::Auto || roots == Roots::Statepoint;
            assert_eq!(
                text.contains("alloc.fast"),
                inlined,
                "{roots:?}, {inline:?}: the fast path in the lowered text"
            );
            let exe = dir.join(format!("trees-{roots:?}-{inline:?}"));
            build(&shown, &ir, &exe, &options)
                .unwrap_or_else(|e| panic!("{shown} ({roots:?}, {inline:?}): {e}"));
            for plan in plans {
                let (result, objects, collections) = run(&exe, &format!("mmtk:{plan}"));
                assert_eq!(result, "8191", "{roots:?}, {inline:?}, {plan}");
                assert!(
                    collections >= 1,
                    "{roots:?}, {inline:?}, {plan}: no collection"
                );
                counts.push((*plan, inline, objects));
            }
        }
        for &(plan, _, objects) in &counts {
            // 21 trees of 8,191 nodes and 20 buffers.
            assert_eq!(objects, 21 * 8191 + 20, "{roots:?}, {plan}: {counts:?}");
        }
    }
}
