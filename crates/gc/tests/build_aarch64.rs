//! Statepoint roots on AArch64 Linux, run under qemu-aarch64-static: GC programs lowered
//! for statepoints (`locus_gc::build::lower_for_build`), compiled by `llc-19
//! -mtriple=aarch64-linux-gnu`, linked as PIEs against the runtime library built for
//! `aarch64-unknown-linux-gnu` (with GNU ld through `aarch64-linux-gnu-gcc`, and with lld
//! through `clang-19 --target=aarch64-linux-gnu -fuse-ld=lld`), print what the same program
//! gives under `locus gc run`'s JIT on the x86-64 host with the moving stress collector
//! (`LOCUS_GC_STRESS=1 LOCUS_GC_MOVING=1`, counters from `LOCUS_GC_STATS=1`): the result,
//! collections, frames walked, roots traced, objects moved. A collection at every allocation moves
//! every object a statepoint slot names, so one slot placed wrong (the AArch64 walk
//! turns LLVM's `[sp + off]` slots into `[x29 + off']` through each function's call frame
//! information) is a dangling reference or a wrong result.
//!
//! MMTk's plans run too (`mmtk_plans_run_on_aarch64_as_on_x86_64`, and a SemiSpace run of
//! the four programs above), under a qemu-user of release 8.0 or later only. qemu-user 7.2
//! (Debian 12's `qemu-user-static`) keeps a 24-byte page descriptor for every 4 KiB guest
//! page a mapping covers, `PROT_NONE` and `MAP_NORESERVE` ones included (measured: a 64 GiB
//! reservation raises its resident memory by 384 MiB, 24.0 bytes a page; qemu 10.0 adds 0),
//! and MMTk 0.33 reserves 16.67 TiB of side metadata when it starts (18,333,139,206,144
//! bytes, fixed when mmtk is compiled, whatever the VM layout: see the runtime's
//! `mmtk::vm_layout`): about 100 GiB of descriptors, so the kernel's OOM killer ends qemu
//! (status 137). Releases from 8.0 keep page flags in an interval tree, and an MMTk
//! executable runs in about 40 MB. scripts/install-deps installs one (Debian 12's
//! backports); without one the test fails saying so.
//!
//! The oracles, the JIT's statepoint run and the executables built for this host, run on
//! x86-64: the test runs on x86-64 hosts.
//!
//! Tools: llc-19, clang-19, aarch64-linux-gnu-gcc (g++-aarch64-linux-gnu), qemu-aarch64-static
//! and the Rust target aarch64-unknown-linux-gnu (scripts/install-deps); for the MMTk runs,
//! `qemu-aarch64` 8.0 or later (Debian 12's backports: `qemu-user`) on `PATH`, or its path in
//! `LOCUS_QEMU_AARCH64`.

#![cfg(target_arch = "x86_64")]

#[path = "../../gc-runtime/tests/support/runtime_library.rs"]
mod runtime_library;

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::build::{build, lower_for_build, BuildOptions};
use locus_gc::run::{run, Roots, RunOptions};
use locus_gc::runtime::OnFault;

#[path = "support/cross_aarch64.rs"]
mod cross_aarch64;
use cross_aarch64::TARGET;
const SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// qemu's arguments that run a dynamically linked AArch64 executable against the cross
/// sysroot's C library: `-L` for its loader, and the loader told to take the sysroot's
/// libraries first. Without the path the loader reads the host's `/etc/ld.so.cache`,
/// which on a machine with Debian's multiarch AArch64 libraries (scripts/install-deps
/// installs libllvm19:arm64) names those: the sysroot's `ld.so` with another release's
/// `libc.so.6`, and MMTk's programs hung.
fn sysroot_args(exe: &Path) -> [String; 5] {
    [
        "-L".into(),
        SYSROOT.into(),
        "-E".into(),
        format!("LD_LIBRARY_PATH={SYSROOT}/lib"),
        s(exe),
    ]
}

/// The first qemu-user release whose page bookkeeping holds MMTk's reservations (see the
/// module docs).
const QEMU_FOR_MMTK: u32 = 8;

/// The environment variable naming the qemu-aarch64 for the MMTk runs.
const QEMU_ENV: &str = "LOCUS_QEMU_AARCH64";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/programs")
        .join(format!("{name}.ll"))
}

fn check(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e} (see scripts/install-deps)"));
    assert!(
        out.status.success(),
        "{shown}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A path as an argument (the test's paths are UTF-8).
fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `liblocus_gc_runtime.a` built for AArch64 as a user cross-builds it (see
/// [`cross_aarch64::cargo`]), or as [`cross_aarch64::RUNTIME_DIR_VARIABLE`] names it.
fn aarch64_runtime() -> PathBuf {
    let built = match std::env::var_os(cross_aarch64::RUNTIME_DIR_VARIABLE) {
        Some(dir) => Path::new(&dir).join("liblocus_gc_runtime.a"),
        None => {
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let target_dir = cross_aarch64::target_dir(&workspace);
            check(cross_aarch64::cargo(&workspace, "build").args(["-p", "locus-gc-runtime"]));
            target_dir.join(TARGET).join("debug/liblocus_gc_runtime.a")
        }
    };
    // A copy of this process's own: another test process may rebuild the library.
    let copy = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "liblocus_gc_runtime-aarch64-{}.a",
        std::process::id()
    ));
    std::fs::copy(&built, &copy).unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    copy
}

/// The release of a qemu from its `--version` line (`qemu-aarch64 version 10.0.2 (...)`);
/// `None` when it does not run or says no version.
fn qemu_major(program: &str) -> Option<u32> {
    let out = Command::new(program).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split("version ").nth(1)?;
    version.split('.').next()?.trim().parse().ok()
}

/// The qemu-aarch64 that runs MMTk plans: [`QEMU_ENV`]'s, else the first of `qemu-aarch64`
/// and `qemu-aarch64-static` on `PATH`; it must be release [`QEMU_FOR_MMTK`] or later
/// (scripts/install-deps installs one), or the test fails saying so.
fn qemu_for_mmtk() -> String {
    let candidates = match std::env::var_os(QEMU_ENV) {
        Some(named) => vec![named.to_string_lossy().into_owned()],
        None => vec!["qemu-aarch64".to_owned(), "qemu-aarch64-static".to_owned()],
    };
    let found = candidates
        .iter()
        .find(|q| qemu_major(q).is_some_and(|m| m >= QEMU_FOR_MMTK));
    match found {
        Some(q) => q.clone(),
        None => panic!(
            "no qemu-aarch64 of release {QEMU_FOR_MMTK}.0 or later ({}: {:?}; before 8.0 \
             qemu-user's page descriptors for MMTk's 16.67 TiB of reserved side metadata take \
             about 100 GiB): run scripts/install-deps or set {QEMU_ENV}",
            candidates.join(", "),
            candidates.iter().map(|q| qemu_major(q)).collect::<Vec<_>>()
        ),
    }
}

/// `name`'s IR lowered with `options` (its executable's main included), compiled by llc-19
/// for AArch64 Linux and linked against `runtime` as a PIE, by lld when `lld`, by GNU ld
/// otherwise; the executable's path in `dir`.
fn cross_build(
    name: &str,
    ir: &[u8],
    options: &BuildOptions,
    lld: bool,
    dir: &Path,
    runtime: &Path,
) -> PathBuf {
    // Lowered against the runtime it links: the names that runtime takes from the C
    // library are the ones the module's symbols give up.
    let options = BuildOptions {
        runtime: Some(runtime.to_path_buf()),
        ..options.clone()
    };
    let lowered = lower_for_build(name, ir, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
    let tag = format!("{name}-{:?}", options.roots);
    let (ll, obj, exe) = (
        dir.join(format!("{tag}.ll")),
        dir.join(format!("{tag}.o")),
        dir.join(format!("{tag}-aarch64")),
    );
    std::fs::write(&ll, &lowered).unwrap_or_else(|e| panic!("{}: {e}", ll.display()));
    check(Command::new("llc-19").args([
        "-O2",
        "-mtriple=aarch64-linux-gnu",
        "-filetype=obj",
        "-relocation-model=pic",
        &s(&ll),
        "-o",
        &s(&obj),
    ]));
    if options.roots == Roots::Statepoint {
        let shown = obj.display();
        let mut bytes = std::fs::read(&obj).unwrap_or_else(|e| panic!("{shown}: {e}"));
        let found = locus_stackmap::object::make_section_writable(&mut bytes)
            .unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert!(found, "{shown}: no .llvm_stackmaps section");
        std::fs::write(&obj, &bytes).unwrap_or_else(|e| panic!("{shown}: {e}"));
    }
    let mut link = if lld {
        let mut c = Command::new("clang-19");
        c.args(["--target=aarch64-linux-gnu", "-fuse-ld=lld"]);
        c
    } else {
        Command::new("aarch64-linux-gnu-gcc")
    };
    check(link.args([&s(&obj), &s(runtime), "-o", &s(&exe)]).args([
        "-rdynamic",
        "-lpthread",
        "-ldl",
        "-lm",
        "-lgcc_s",
    ]));
    let headers = check(Command::new("llvm-readobj-19").args([
        "--file-headers",
        "--dynamic-table",
        &s(&exe),
    ]));
    assert!(
        headers.contains("Machine: EM_AARCH64")
            && headers.contains("Type: SharedObject")
            && !headers.contains("TEXTREL"),
        "{name}: not an AArch64 PIE without text relocations\n{headers}"
    );
    exe
}

/// The environment of every run: the moving stress collector, its counters printed.
fn stress_env(cmd: &mut Command) -> &mut Command {
    for var in ["LOCUS_GC_COLLECTOR", "LOCUS_GC_HEAP_SIZE"] {
        cmd.env_remove(var);
    }
    cmd.env("LOCUS_GC_STRESS", "1")
        .env("LOCUS_GC_MOVING", "1")
        .env("LOCUS_GC_STATS", "1")
}

/// The environment of an MMTk run: `plan` in a 4 MiB heap, its counters printed.
fn mmtk_env<'c>(cmd: &'c mut Command, plan: &str) -> &'c mut Command {
    cmd.env_remove("LOCUS_GC_STRESS")
        .env_remove("LOCUS_GC_MOVING")
        .env("LOCUS_GC_COLLECTOR", format!("mmtk:{plan}"))
        .env("LOCUS_GC_HEAP_SIZE", "4M")
        .env("LOCUS_GC_STATS", "1")
}

/// The number after `what` on a line of `text`.
fn count(text: &str, what: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(what)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{what}` in\n{text}"))
}

#[test]
fn statepoint_programs_run_on_aarch64_as_on_x86_64() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-aarch64-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runtime = aarch64_runtime();
    let qemu = qemu_for_mmtk();
    // A list rebuilt 200 times (9,900 moves), 10,000 frames deep with derived pointers,
    // vectors of pointers through a phi, derived pointers through selects and phis, and a
    // vector of three pointers whose 32-byte spill realigns the stack (a frame of no fixed
    // size with slots off the stack pointer: placed at the CFA of the function it calls),
    // and that spill, and an alloca aligned to 64 bytes, in a frame of variable size (kept
    // from realigning, the alloca aligned by hand: slots off x29).
    let programs = [
        ("list_sum", false),
        ("deep_recursion_derived", true),
        ("vector_phi", false),
        ("derived_select_phi", true),
        ("vector_derived_shuffle", false),
        ("vector_realigned_callee", true),
        ("vector_dynamic_alloca", false),
        ("aligned_alloca_dynamic", true),
        // setjmp/longjmp (GC leaves: values live across them stay in the setjmp root
        // region, which pins them, and in their own slots, which longjmp gives back).
        ("returns_twice_longjmp", false),
        ("returns_twice_predecessor", true),
        ("returns_twice_slot_reuse", false),
        ("returns_twice_list", true),
        ("returns_twice_two_calls", false),
        ("returns_twice_merge", true),
    ];
    for (name, lld) in programs {
        let file = fixture(name);
        let ir = std::fs::read(&file).unwrap();
        let options = BuildOptions {
            roots: Roots::Statepoint,
            ..BuildOptions::default()
        };
        // The oracle: `locus gc run`'s JIT on this (x86-64) host, same lowering.
        let run_options = RunOptions {
            roots: Roots::Statepoint,
            moving: true,
            stress: true,
            on_fault: OnFault::Record,
            ..RunOptions::default()
        };
        let text = String::from_utf8(ir.clone()).unwrap();
        // SAFETY: the fixtures only touch the objects the runtime gives them, while they
        // are live (checked by the stress collector and the old copies' protection).
        let jit =
            unsafe { run(name, &text, run_options) }.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(jit.faults.is_empty(), "{name}: {:?}", jit.faults);
        let want = [
            jit.value.to_string(),
            format!("collections: {}", jit.stats.collections),
            format!("frames walked: {}", jit.stats.frames_walked),
            format!("roots traced: {}", jit.stats.roots_traced),
            format!("objects moved: {}", jit.stats.objects_moved),
        ];
        let exe = cross_build(name, &ir, &options, lld, &dir, &runtime);
        let got = check(stress_env(
            Command::new("qemu-aarch64-static").args(sysroot_args(&exe)),
        ));
        let lines: Vec<&str> = got.lines().collect();
        for line in &want {
            assert!(
                lines.contains(&line.as_str()),
                "{name} (lld: {lld}): `{line}` on x86-64, not on AArch64:\n{got}"
            );
        }
        assert_eq!(
            lines.first().copied(),
            Some(want[0].as_str()),
            "{name}: the result"
        );
        // What the setjmp programs keep across the call is pinned; they must collect.
        if name.starts_with("returns_twice") {
            assert!(jit.stats.collections > 0, "{name}: no collection");
        } else {
            assert!(
                jit.stats.objects_moved > 0,
                "{name}: nothing moved, nothing tested"
            );
        }
        println!(
            "{name}: {} on AArch64 (linked by {}), as gc run on x86-64",
            got.lines().next().unwrap_or_default(),
            if lld { "lld" } else { "GNU ld" }
        );
        // The same executable under MMTk's SemiSpace gives the same result.
        let got = check(mmtk_env(
            Command::new(&qemu).args(sysroot_args(&exe)),
            "semispace",
        ));
        assert_eq!(
            got.lines().next(),
            Some(want[0].as_str()),
            "{name} under mmtk:semispace on AArch64:\n{got}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `fixtures/inline/trees.ll` (21 trees of 8,191 nodes, 172,031 objects) built with frame
/// roots and with statepoint roots, for AArch64 and for this host, run under MMTk plans in
/// a 4 MiB heap: each plan collects, and the AArch64 executable under qemu prints what the
/// host's prints: the result, the number of collections and of objects allocated. With
/// statepoint roots SemiSpace moves every live object at each collection through the
/// AArch64 frame walk. (The number moved is not compared: it varies from run to run on
/// either machine, 96,337 to 97,701 in three runs of the x86-64 build.)
#[test]
fn mmtk_plans_run_on_aarch64_as_on_x86_64() {
    let qemu = qemu_for_mmtk();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-aarch64-mmtk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let aarch64 = aarch64_runtime();
    let host = runtime_library::runtime_dir(false).join("liblocus_gc_runtime.a");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/inline/trees.ll");
    let ir = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let cases = [
        (Roots::Frames, false, ["marksweep", "immix"]),
        (Roots::Statepoint, true, ["semispace", "immix"]),
    ];
    for (roots, lld, plans) in cases {
        let options = BuildOptions {
            roots,
            runtime: Some(host.clone()),
            ..BuildOptions::default()
        };
        let native = dir.join(format!("trees-{roots:?}-x86_64"));
        build("trees", &ir, &native, &options).unwrap_or_else(|e| panic!("trees: {e}"));
        let emulated = cross_build("trees", &ir, &options, lld, &dir, &aarch64);
        for plan in plans {
            let want = check(mmtk_env(&mut Command::new(&native), plan));
            let got = check(mmtk_env(
                Command::new(&qemu).args(sysroot_args(&emulated)),
                plan,
            ));
            let shown = format!("trees ({roots:?}) under mmtk:{plan}");
            assert_eq!(want.lines().next(), Some("8191"), "{shown} on x86-64");
            assert_eq!(
                got.lines().next(),
                Some("8191"),
                "{shown} on AArch64:\n{got}"
            );
            for what in ["collections:", "objects allocated:"] {
                assert_eq!(
                    count(&got, what),
                    count(&want, what),
                    "{shown}: `{what}` on AArch64 and x86-64:\n{got}\n{want}"
                );
            }
            assert!(count(&got, "collections:") > 0, "{shown}: no collection");
            if plan == "semispace" {
                assert!(count(&got, "objects moved:") > 0, "{shown}: nothing moved");
            }
            println!(
                "{shown}: 8191, {} collections on AArch64 (qemu {}), as on x86-64",
                count(&got, "collections:"),
                qemu_major(&qemu).unwrap_or_default()
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
