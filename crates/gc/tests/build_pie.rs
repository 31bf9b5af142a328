//! `locus gc build --roots statepoint` executables are position-independent (`ET_DYN`), with
//! GNU ld (clang-19's default) and with lld, and have no text relocation, yet the runtime
//! finds the stack maps' functions at their run-time addresses: programs that collect and
//! move objects print their `; expect:` value. The oracles are LLVM's: `llvm-readobj-19`
//! for the file type, the dynamic table and the linker's `.comment`, and the programs'
//! results under the moving stress collector and MMTk's SemiSpace.
//!
//! The runtime library is built as a user builds it (`cargo build -p locus-gc-runtime`)
//! into a target directory of its own (see `runtime_library.rs`).

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::build::{build, lower_for_build, BuildOptions};
use locus_gc::run::Roots;

fn fixture(sub: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(sub)
        .join(format!("{name}.ll"))
}

/// The value a fixture's `; expect: N` first line names.
fn expected(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("; expect: "))
        .unwrap_or_else(|| panic!("{}: no `; expect:` line", file.display()))
        .trim()
        .to_owned()
}

/// A directory of this test's own under the target's scratch directory.
fn scratch(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-pie-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

fn tool(name: &str, args: &[&str]) -> String {
    let out = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Checks what llvm-readobj-19 says of `exe`: a PIE (`ET_DYN` with an interpreter), no
/// `DT_TEXTREL` nor `TEXTREL` flag, relative dynamic relocations, linked by lld when `lld`.
fn check_pie(exe: &Path, lld: bool) {
    let exe = &exe.display().to_string();
    let headers = tool(
        "llvm-readobj-19",
        &["--file-headers", "--program-headers", exe],
    );
    assert!(
        headers.contains("Type: SharedObject (0x3)"),
        "{exe}: not ET_DYN\n{headers}"
    );
    assert!(
        headers.contains("PT_INTERP"),
        "{exe}: a PIE has an interpreter"
    );
    let dynamic = tool("llvm-readobj-19", &["--dynamic-table", exe]);
    assert!(
        !dynamic.contains("TEXTREL"),
        "{exe}: a text relocation\n{dynamic}"
    );
    assert!(
        dynamic.contains("RELA ") || dynamic.contains("RELR "),
        "{exe}: no dynamic relocations at all?\n{dynamic}"
    );
    let comment = tool("llvm-readobj-19", &["--string-dump=.comment", exe]);
    assert_eq!(
        comment.contains(" LLD "),
        lld,
        "{exe}: linked by the wrong linker\n{comment}"
    );
}

/// Runs `exe` with `env` and returns its standard output, which must be its only output
/// (with the counters of `LOCUS_GC_STATS=1`) with status 0.
fn run(exe: &Path, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(exe);
    for var in [
        "LOCUS_GC_STRESS",
        "LOCUS_GC_MOVING",
        "LOCUS_GC_COLLECTOR",
        "LOCUS_GC_HEAP_SIZE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("LOCUS_GC_STATS", "1").envs(env.iter().copied());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{} {env:?}: {:?}\n{stderr}",
        exe.display(),
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The counter `name` of a `LOCUS_GC_STATS=1` output.
fn counter(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": ")?.parse().ok())
        .unwrap_or_else(|| panic!("no counter `{name}` in\n{stdout}"))
}

/// The program's result, its first line, is `want`, and the collector moved objects.
fn check_result(stdout: &str, want: &str, what: &str) {
    assert_eq!(stdout.lines().next(), Some(want), "{what}:\n{stdout}");
    assert!(
        counter(stdout, "collections") > 0 && counter(stdout, "objects moved") > 0,
        "{what}: nothing collected or moved, nothing tested\n{stdout}"
    );
}

#[test]
fn statepoint_executables_are_pies_without_text_relocations_with_ld_and_lld() {
    let runtime = runtime_library::runtime_dir(false);
    let dir = scratch("linkers");
    for (linker, args) in [("ld", vec![]), ("lld", vec!["-fuse-ld=lld".to_owned()])] {
        let lld = linker == "lld";
        // A tree under the moving stress collector: a collection at every allocation, every
        // object moved, so every return address in the walk must be found in the maps.
        // A long run under SemiSpace: MMTk's copying plan, collecting as the heap fills.
        for (sub, name, env) in [
            (
                "programs",
                "tree",
                &[("LOCUS_GC_STRESS", "1"), ("LOCUS_GC_MOVING", "1")][..],
            ),
            (
                "statepoint",
                "long_moving",
                &[
                    ("LOCUS_GC_COLLECTOR", "mmtk:semispace"),
                    ("LOCUS_GC_HEAP_SIZE", "16M"),
                ][..],
            ),
        ] {
            if lld && name == "tree" {
                continue; // the hand-linked test below runs tree linked by lld
            }
            let file = fixture(sub, name);
            let exe = dir.join(format!("{name}-{linker}"));
            let options = BuildOptions {
                roots: Roots::Statepoint,
                runtime: Some(runtime.to_path_buf()),
                link_args: args.clone(),
                ..BuildOptions::default()
            };
            let ir = std::fs::read(&file).unwrap();
            build(&file.display().to_string(), &ir, &exe, &options)
                .unwrap_or_else(|e| panic!("{name} with {linker}: {e}"));
            check_pie(&exe, lld);
            let stdout = run(&exe, env);
            check_result(&stdout, &expected(&file), &format!("{name} with {linker}"));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The steps the README gives for linking by hand: the lowered module compiled by llc-19,
/// its stack map section made writable by llvm-objcopy-19, linked by clang-19 with lld
/// (which refuses the object as llc-19 writes it).
#[test]
fn a_statepoint_program_links_by_hand_as_a_pie() {
    let runtime = runtime_library::runtime_dir(false).join("liblocus_gc_runtime.a");
    let dir = scratch("by-hand");
    let file = fixture("programs", "tree");
    let options = BuildOptions {
        roots: Roots::Statepoint,
        ..BuildOptions::default()
    };
    let lowered = lower_for_build("tree", &std::fs::read(&file).unwrap(), &options).unwrap();
    let (ll, obj, exe) = (dir.join("tree.ll"), dir.join("tree.o"), dir.join("tree"));
    std::fs::write(&ll, lowered).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    tool(
        "llc-19",
        &[
            "-O2",
            "-filetype=obj",
            "-relocation-model=pic",
            &s(&ll),
            "-o",
            &s(&obj),
        ],
    );
    let link = |exe: &Path| {
        Command::new("clang-19")
            .args([
                &s(&obj),
                &s(&runtime),
                "-rdynamic",
                "-lpthread",
                "-ldl",
                "-lm",
            ])
            .args(["-lgcc_s", "-fuse-ld=lld", "-o", &s(exe)])
            .output()
            .unwrap()
    };
    let refused = link(&exe);
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("recompile with -fPIC"),
        "lld linked LLVM's read-only .llvm_stackmaps into a PIE: {:?}",
        refused.status
    );
    tool(
        "llvm-objcopy-19",
        &[
            "--set-section-flags",
            ".llvm_stackmaps=alloc,load,contents,data",
            &s(&obj),
        ],
    );
    let linked = link(&exe);
    assert!(
        linked.status.success(),
        "{}",
        String::from_utf8_lossy(&linked.stderr)
    );
    check_pie(&exe, true);
    let stdout = run(&exe, &[("LOCUS_GC_STRESS", "1"), ("LOCUS_GC_MOVING", "1")]);
    check_result(&stdout, &expected(&file), "tree linked by hand");
    std::fs::remove_dir_all(&dir).unwrap();
}
