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
//! MMTk's plans are not run here: under qemu-user their address-space reservation gets the
//! emulator killed.
//!
//! The oracle, the JIT's statepoint run, walks x86-64 frames only: the test runs on x86-64
//! hosts.
//!
//! Tools: llc-19, clang-19, aarch64-linux-gnu-gcc (g++-aarch64-linux-gnu), qemu-aarch64-static
//! and the Rust target aarch64-unknown-linux-gnu (scripts/install-deps).

#![cfg(target_arch = "x86_64")]

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_gc::build::{lower_for_build, BuildOptions};
use locus_gc::run::{run, Roots, RunOptions};
use locus_gc::runtime::OnFault;

const TARGET: &str = "aarch64-unknown-linux-gnu";
const SYSROOT: &str = "/usr/aarch64-linux-gnu";

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

/// `liblocus_gc_runtime.a` built for AArch64 as a user cross-builds it, into the target
/// directory the host runtime's tests use (`target/gc-runtime-alone`: no outer cargo holds
/// it locked).
fn aarch64_runtime() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target_dir = workspace.join("target/gc-runtime-alone");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    check(
        Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "locus-gc-runtime",
                "--target",
                TARGET,
            ])
            .env("CARGO_TARGET_DIR", &target_dir)
            // The shared library (cdylib) links with the cross compiler.
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                "aarch64-linux-gnu-gcc",
            )
            .current_dir(&workspace),
    );
    let built = target_dir.join(TARGET).join("debug/liblocus_gc_runtime.a");
    // A copy of this process's own: another test process may rebuild the library.
    let copy = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "liblocus_gc_runtime-aarch64-{}.a",
        std::process::id()
    ));
    std::fs::copy(&built, &copy).unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    copy
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

#[test]
fn statepoint_programs_run_on_aarch64_as_on_x86_64() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("build-aarch64-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runtime = aarch64_runtime();
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    // A list rebuilt 200 times (9,900 moves), 10,000 frames deep with derived pointers,
    // vectors of pointers through a phi, derived pointers through selects and phis.
    let programs = [
        ("list_sum", false),
        ("deep_recursion_derived", true),
        ("vector_phi", false),
        ("derived_select_phi", true),
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
        let lowered = lower_for_build(name, &ir, &options).unwrap();
        let (ll, obj, exe) = (
            dir.join(format!("{name}.ll")),
            dir.join(format!("{name}.o")),
            dir.join(format!("{name}-aarch64")),
        );
        std::fs::write(&ll, &lowered).unwrap();
        check(Command::new("llc-19").args([
            "-O2",
            "-mtriple=aarch64-linux-gnu",
            "-filetype=obj",
            "-relocation-model=pic",
            &s(&ll),
            "-o",
            &s(&obj),
        ]));
        let mut bytes = std::fs::read(&obj).unwrap();
        assert!(locus_stackmap::object::make_section_writable(&mut bytes).unwrap());
        std::fs::write(&obj, &bytes).unwrap();
        let mut link = if lld {
            let mut c = Command::new("clang-19");
            c.args(["--target=aarch64-linux-gnu", "-fuse-ld=lld"]);
            c
        } else {
            Command::new("aarch64-linux-gnu-gcc")
        };
        check(link.args([&s(&obj), &s(&runtime), "-o", &s(&exe)]).args([
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
        let got = check(stress_env(Command::new("qemu-aarch64-static").args([
            "-L",
            SYSROOT,
            &s(&exe),
        ])));
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
        assert!(
            jit.stats.objects_moved > 0,
            "{name}: nothing moved, nothing tested"
        );
        println!(
            "{name}: {} on AArch64 (linked by {}), as gc run on x86-64",
            got.lines().next().unwrap_or_default(),
            if lld { "lld" } else { "GNU ld" }
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
