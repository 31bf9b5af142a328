//! Execution as the oracle. Freestanding programs (no libc: fixtures/qemu/support.S has
//! `_start` and the system calls) are built with
//! `clang-19 --target=aarch64-linux-gnu -march=armv9-a+sme -nostdlib -static -fuse-ld=lld`,
//! linked with Locus's own SME ABI routines (src/runtime/sme_abi.S), and run under
//! `qemu-aarch64-static -cpu max`. Each callee reads SVCR on entry, each caller in its
//! body and after the call, and the caller's caller after it returns; the model, applied
//! to the IR clang produced for the same source, must predict every PSTATE.SM and
//! PSTATE.ZA seen. The ZA program checks lazy-save round trips bring ZA back intact.

// Helpers outside #[test] functions unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use locus_sme::attrs::Interface;
use locus_sme::check::{check_ir, Report};
use locus_sme::rules::{Change, Insn, When};

const CLANG: &str = "clang-19";
const QEMU: &str = "qemu-aarch64-static";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/qemu")
}

fn runtime() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runtime/sme_abi.S")
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("locus-sme-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}); scripts/install-deps installs it"));
    assert!(
        out.status.success(),
        "{program} {} failed ({:?}): {}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

const FLAGS: [&str; 5] = [
    "--target=aarch64-linux-gnu",
    "-march=armv9-a+sme",
    "-O1",
    "-ffreestanding",
    "-fno-builtin",
];

/// Compiles `c` to IR (for the model) and to a static executable linked with `abi` (the
/// runtime's source), runs it under qemu and returns the model's report and the output.
fn build_and_run(dir: &Path, name: &str, c: &Path, abi: &Path) -> (Report, String) {
    let (report, exe) = build(dir, name, c, abi);
    let out = run(QEMU, &["-cpu", "max", exe.to_str().unwrap()]);
    (report, String::from_utf8(out).unwrap())
}

/// Compiles `c` to IR (checked by the model) and to a static executable.
fn build(dir: &Path, name: &str, c: &Path, abi: &Path) -> (Report, PathBuf) {
    let inc = format!("-I{}", fixtures().display());
    let ll = dir.join(format!("{name}.ll"));
    let exe = dir.join(name);
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend([inc.as_str(), "-S", "-emit-llvm", c.to_str().unwrap(), "-o"]);
    args.push(ll.to_str().unwrap());
    run(CLANG, &args);
    let mut args: Vec<&str> = FLAGS.to_vec();
    let support = fixtures().join("support.S");
    args.extend([
        inc.as_str(),
        "-nostdlib",
        "-static",
        "-fuse-ld=lld",
        ll.to_str().unwrap(),
        support.to_str().unwrap(),
        abi.to_str().unwrap(),
        "-o",
        exe.to_str().unwrap(),
    ]);
    run(CLANG, &args);
    let report = check_ir(ll.to_str().unwrap(), std::fs::read(&ll).unwrap()).unwrap();
    (report, exe)
}

/// Applies `changes` to PSTATE.SM `sm`; conditions test `reference`, the mode before
/// the call (or at the function's entry).
fn apply(mut sm: bool, changes: &[Change], reference: bool) -> bool {
    for c in changes {
        let runs = match c.when {
            When::Always => true,
            When::IfSmWas(v) => v == reference,
        };
        if runs {
            match c.insn {
                Insn::SmstartSm => sm = true,
                Insn::SmstopSm => sm = false,
                Insn::SmstartZa | Insn::SmstopZa => {}
            }
        }
    }
    sm
}

/// The mode a callee leaves on return, by its interface.
fn returns_with(interface: Interface, entered: bool) -> bool {
    match interface {
        Interface::Normal => false,
        Interface::Streaming => true,
        Interface::StreamingCompatible => entered,
    }
}

const CALLERS: [(&str, &str, &str); 5] = [
    ("n", "", ""),
    ("s", "", "__arm_streaming"),
    ("sc", "", "__arm_streaming_compatible"),
    ("ls", "__arm_locally_streaming", ""),
    (
        "lsc",
        "__arm_locally_streaming",
        "__arm_streaming_compatible",
    ),
];
const CALLEES: [(&str, &str); 3] = [
    ("n", ""),
    ("s", "__arm_streaming"),
    ("sc", "__arm_streaming_compatible"),
];

/// The matrix as C: for each caller kind and callee kind a callee, a caller, and for
/// callers that may be entered streaming a streaming wrapper; `main` runs each (from
/// normal mode, and through the wrapper) and prints `name result callee caller_body
/// caller_after outer_after` with the SVCR values in hex.
fn matrix_source() -> (String, Vec<(String, String, Option<String>)>) {
    let mut c = String::from(
        "#include \"support.h\"\n\
         static volatile u64 rec[4];\n\
         static void report(const char *name, float r) {\n  \
           union { float f; u32 u; } v = { r };\n  \
           put(name); put(\" \"); put_hex(v.u);\n  \
           for (int i = 0; i < 4; i++) put_hex(rec[i]);\n  put(\"\\n\");\n}\n",
    );
    let mut runs = Vec::new();
    let mut main = String::from("int main(void) {\n  float r;\n");
    for (cn, cpre, cpost) in CALLERS {
        for (tn, tpost) in CALLEES {
            let callee = format!("{tn}_callee_of_{cn}");
            let caller = format!("{cn}_calls_{tn}");
            c.push_str(&format!(
                "__attribute__((noinline)) float {callee}(float x) {tpost} {{\n  \
                   rec[0] = svcr();\n  return x * 2.0f + 1.0f;\n}}\n\
                 {cpre} __attribute__((noinline)) float {caller}(float x) {cpost} {{\n  \
                   rec[1] = svcr();\n  float r = {callee}(x);\n  rec[2] = svcr();\n  \
                   return r + 0.5f;\n}}\n"
            ));
            main.push_str(&format!(
                "  r = {caller}(3.0f);\n  rec[3] = svcr();\n  report(\"{caller}@n\", r);\n"
            ));
            runs.push((format!("{caller}@n"), caller.clone(), None));
            if cpost == "__arm_streaming_compatible" {
                let wrap = format!("{caller}_from_streaming");
                c.push_str(&format!(
                    "__attribute__((noinline)) float {wrap}(float x) __arm_streaming {{\n  \
                       float r = {caller}(x);\n  rec[3] = svcr();\n  return r;\n}}\n"
                ));
                main.push_str(&format!(
                    "  r = {wrap}(3.0f);\n  report(\"{caller}@s\", r);\n"
                ));
                runs.push((format!("{caller}@s"), caller, Some(wrap)));
            }
        }
    }
    main.push_str("  return 0;\n}\n");
    c.push_str(&main);
    (c, runs)
}

#[test]
fn streaming_mode_matrix_runs_as_the_model_says() {
    let dir = scratch("matrix");
    let (source, runs) = matrix_source();
    let c = dir.join("matrix.c");
    std::fs::write(&c, &source).unwrap();
    let (report, out) = build_and_run(&dir, "matrix", &c, &runtime());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), runs.len(), "{out}");
    let mut matched = 0;
    let mut failures = Vec::new();
    for ((label, caller, wrap), line) in runs.iter().zip(&lines) {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], label, "{out}");
        let hex = |i: usize| u64::from_str_radix(words[i].trim_start_matches("0x"), 16).unwrap();
        let result = f32::from_bits(u32::try_from(hex(1)).unwrap());
        let seen = [hex(2), hex(3), hex(4), hex(5)];

        // The model: from the outer function (main, normal; or the streaming wrapper)
        // through the caller's entry, its call, its exit, back to the outer function.
        let outer_name = wrap.as_deref().unwrap_or("main");
        let outer = report.function(outer_name).unwrap();
        let outer_body = outer.model.interface == Interface::Streaming;
        let outer_call = outer.calls.iter().find(|k| &k.callee == caller).unwrap();
        let f = report.function(caller).unwrap();
        let call = &f.calls[0];
        let entered = apply(outer_body, &outer_call.model.before, outer_body);
        let body = apply(entered, &f.model.entry, entered);
        let callee_entry = apply(body, &call.model.before, body);
        let back = returns_with(call.callee_attrs.interface(), callee_entry);
        let after = apply(back, &call.model.after, body);
        let left = apply(after, &f.model.exit, entered);
        let outer_after = apply(left, &outer_call.model.after, outer_body);
        let predicted = [callee_entry, body, after, outer_after].map(u64::from);
        // SVCR bit 0 is PSTATE.SM; bit 1 (ZA) stays 0 in these ZA-less functions.
        if seen != predicted || result != 7.5 {
            failures.push(format!(
                "{label}: SVCR (callee, caller body, caller after, outer after) = {seen:?}, model {predicted:?}; result {result}"
            ));
        } else {
            matched += 1;
        }
    }
    assert!(failures.is_empty(), "{}\n{out}", failures.join("\n"));
    eprintln!("qemu: {matched}/{} matrix runs match the model", runs.len());
    assert_eq!(matched, 21);
    let _ = std::fs::remove_dir_all(&dir);
}

const ZA_CALLERS: [(&str, &str, &str); 5] = [
    ("new", "__arm_new(\"za\")", ""),
    ("in", "", "__arm_in(\"za\")"),
    ("out", "", "__arm_out(\"za\")"),
    ("inout", "", "__arm_inout(\"za\")"),
    ("preserves", "", "__arm_preserves(\"za\")"),
];
const ZA_CALLEES: [(&str, &str); 4] = [
    ("private", ""),
    ("private_sc", "__arm_streaming_compatible"),
    ("inout", "__arm_inout(\"za\")"),
    ("preserves", "__arm_preserves(\"za\")"),
];

/// ZA callers of every state calling private and shared callees; each callee records
/// SVCR and TPIDR2_EL0 on entry, the caller both after the call. Callers with a shared
/// interface are called from a new-ZA function.
fn za_matrix_source() -> (String, Vec<(String, String)>) {
    let mut c = String::from(
        "#include \"support.h\"\n\
         static volatile u64 rec[4];\n\
         static void report(const char *name) {\n  \
           put(name); put(\" \");\n  for (int i = 0; i < 4; i++) put_hex(rec[i]);\n  put(\"\\n\");\n}\n",
    );
    let mut main = String::from("int main(void) {\n");
    let mut runs = Vec::new();
    for (zn, zpre, zpost) in ZA_CALLERS {
        for (tn, tpost) in ZA_CALLEES {
            let callee = format!("{tn}_callee_of_za_{zn}");
            let caller = format!("za_{zn}_calls_{tn}");
            c.push_str(&format!(
                "__attribute__((noinline)) void {callee}(void) {tpost} {{\n  \
                   rec[0] = svcr();\n  rec[1] = tpidr2();\n}}\n\
                 {zpre} __attribute__((noinline)) void {caller}(void) {zpost} {{\n  \
                   {callee}();\n  rec[2] = svcr();\n  rec[3] = tpidr2();\n}}\n"
            ));
            let entry = if zpre.is_empty() {
                let outer = format!("{caller}_outer");
                c.push_str(&format!(
                    "__arm_new(\"za\") __attribute__((noinline)) void {outer}(void) {{ {caller}(); }}\n"
                ));
                outer
            } else {
                caller.clone()
            };
            main.push_str(&format!("  {entry}();\n  report(\"{caller}\");\n"));
            runs.push((caller, callee));
        }
    }
    main.push_str("  return 0;\n}\n");
    c.push_str(&main);
    (c, runs)
}

#[test]
fn za_matrix_runs_as_the_model_says() {
    let dir = scratch("za-matrix");
    let (source, runs) = za_matrix_source();
    let c = dir.join("za_matrix.c");
    std::fs::write(&c, &source).unwrap();
    let (report, out) = build_and_run(&dir, "za_matrix", &c, &runtime());
    let v = za_lines(&out);
    let mut lazy = 0;
    for (caller, callee) in &runs {
        let f = report.function(caller).unwrap();
        let call = f.calls.iter().find(|k| &k.callee == callee).unwrap();
        let seen = &v[caller.as_str()];
        // In the callee: ZA is on either way (live, or dormant with a lazy save pending);
        // TPIDR2_EL0 points at the caller's block exactly when the model sets up a lazy
        // save. Back in the caller: ZA on (re-enabled), no save pending.
        let pending = seen[1] != 0;
        assert_eq!(seen[0], 2, "{caller}: callee SVCR\n{out}");
        assert_eq!(
            pending, call.model.lazy_za_save,
            "{caller}: TPIDR2_EL0\n{out}"
        );
        assert_eq!(
            (seen[2], seen[3]),
            (2, 0),
            "{caller}: after the call\n{out}"
        );
        lazy += usize::from(pending);
    }
    eprintln!(
        "qemu: {}/{} ZA runs match the model ({lazy} lazy saves)",
        runs.len(),
        runs.len()
    );
    assert_eq!((runs.len(), lazy), (20, 10));
    let _ = std::fs::remove_dir_all(&dir);
}

fn za_lines(out: &str) -> std::collections::HashMap<String, Vec<u64>> {
    out.lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            let key = w.next().unwrap().to_string();
            let vals = w
                .map(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).unwrap())
                .collect();
            (key, vals)
        })
        .collect()
}

#[test]
fn lazy_save_round_trips_keep_za() {
    let dir = scratch("za");
    let (report, out) = build_and_run(&dir, "za", &fixtures().join("za.c"), &runtime());
    let v = za_lines(&out);
    const SM: u64 = 1;
    const ZA: u64 = 2;

    // The model on the same IR: a new-ZA caller sets up a lazy save around each call to
    // a private-ZA function and turns ZA back on after it; the callee with its own ZA
    // commits the save on entry.
    let lazy = |caller: &str, callee: &str| {
        let f = report.function(caller).unwrap();
        let c = f.calls.iter().find(|c| c.callee == callee).unwrap();
        assert!(c.model.lazy_za_save, "{caller} -> {callee}");
        assert_eq!(c.model.after.last().map(|c| c.insn), Some(Insn::SmstartZa));
        let fill = f.calls.iter().find(|c| c.callee == "fill_za").unwrap();
        assert!(!fill.model.lazy_za_save);
        f.model.exit.clone()
    };
    let clobber = report.function("clobber").unwrap();
    assert!(clobber.model.commit_lazy_save && clobber.model.zero_za);

    // round_trip: ZA intact; clobber ran with its own ZA (SM 0, ZA 1) after committing
    // (TPIDR2_EL0 null); the caller had ZA back after the call; main sees ZA off.
    let exit = lazy("round_trip", "clobber");
    assert_eq!(
        exit.iter().map(|c| c.insn).collect::<Vec<_>>(),
        [Insn::SmstopZa]
    );
    assert_eq!(v["round_trip"], [1, ZA, 0, ZA, 0], "{out}");
    // round_trip_disable: the private callee runs with ZA dormant (on, TPIDR2_EL0 set),
    // __arm_za_disable commits and turns it off; the caller restores it.
    lazy("round_trip_disable", "disabler");
    let r = &v["round_trip_disable"];
    assert_eq!((r[0], r[1]), (1, ZA), "{out}");
    assert_ne!(
        r[2], 0,
        "TPIDR2_EL0 should point at the caller's block: {out}"
    );
    assert_eq!((r[3], r[4], r[5]), (0, ZA, 0), "{out}");
    // round_trip_streaming: streaming and ZA at once.
    let f = report.function("round_trip_streaming").unwrap();
    let c = f.calls.iter().find(|c| c.callee == "clobber").unwrap();
    assert_eq!(
        c.model.after.iter().map(|c| c.insn).collect::<Vec<_>>(),
        [Insn::SmstartSm, Insn::SmstartZa]
    );
    assert_eq!(v["round_trip_streaming"], [1, ZA, 0, SM | ZA, 0], "{out}");

    // __arm_sme_state: bit 63 (SME available), SM, ZA; TPIDR2_EL0 null in a new-ZA body
    // without a pending save.
    let top = 1 << 63;
    assert_eq!(v["sme_state"], [top, top | SM, top | ZA, 0], "{out}");
    // __arm_get_current_vg: SVE's VG in normal mode (cntd), SVL/8 when streaming.
    let vg = &v["vg"];
    assert_eq!((vg[0], vg[2]), (vg[1], vg[3]), "{out}");
    assert!(vg[0] > 0 && vg[2] > 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The round trip can fail: with a runtime whose `__arm_tpidr2_restore` loads nothing, ZA
/// comes back as the callee left it.
#[test]
fn a_broken_restore_is_caught() {
    let dir = scratch("broken");
    let abi = std::fs::read_to_string(runtime()).unwrap();
    let broken = abi.replace("ldr     za[w12, 0], [x16]", "nop");
    assert_ne!(abi, broken);
    let path = dir.join("broken_abi.S");
    std::fs::write(&path, broken).unwrap();
    let (_, out) = build_and_run(&dir, "za", &fixtures().join("za.c"), &path);
    let v = za_lines(&out);
    assert_eq!(v["round_trip"][0], 0, "{out}");
    assert_eq!(v["round_trip_disable"][0], 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Why `sm_body` with the SVE calling convention is an error: the model reports it on the
/// IR clang produced, and the program runs only while the SVE and streaming vector
/// lengths happen to agree. With qemu's defaults (SVE 64 bytes, streaming 32) the
/// prologue's stores overrun the frame.
#[test]
fn sve_pcs_with_sm_body_breaks_when_vector_lengths_differ() {
    let dir = scratch("sve-pcs");
    let (report, exe) = build(&dir, "sve_pcs", &fixtures().join("sve_pcs.c"), &runtime());
    assert!(
        report
            .diagnostics
            .iter()
            .any(|d| d.function == "clobber_sve" && d.message.contains("aarch64_sve_vector_pcs")),
        "{:?}",
        report.diagnostics
    );
    let exe = exe.to_str().unwrap();
    let equal = run(QEMU, &["-cpu", "max,sve-default-vector-length=32", exe]);
    assert_eq!(
        String::from_utf8(equal).unwrap(),
        "bad 0x0000000000000000 \n"
    );
    let differ = Command::new(QEMU)
        .args([
            "-cpu",
            "max,sve-default-vector-length=64,sme-default-vector-length=32",
            exe,
        ])
        .current_dir(&dir) // a crash may leave a core file
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&differ.stdout);
    assert!(
        !differ.status.success() || stdout != "bad 0x0000000000000000 \n",
        "the overrun went unnoticed: {stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
