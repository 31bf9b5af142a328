//! The C API from C: `examples/readobj.c` and `tests/c/api_test.c` compiled by clang-19
//! against the static library `liblocus_capi.a` this build made.
//!
//! - `readobj_matches_llvm_readobj`: `fixtures/runtime.ll` compiled by llc-19 for ELF
//!   x86-64, AArch64 and big-endian AArch64, Mach-O and COFF (and linked into a shared
//!   object with a `DT_SONAME`); readobj's output must be byte-identical to
//!   `llvm-readobj-19 --stackmap` on each, and on all of them in one run.
//! - `api_test`: every entry point of `include/locus.h`, with good and bad inputs; the
//!   test also fails when a function the header declares is not called in `api_test.c`.
//! - `api_test_under_asan`: the same program built with AddressSanitizer and
//!   UndefinedBehaviorSanitizer (the Rust side's allocations go through the same malloc).
//!
//! The LLVM 19 tools are required (scripts/install-deps); when one is missing the tests fail
//! and say so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CRATE: &str = env!("CARGO_MANIFEST_DIR");

/// The static library of this build: `liblocus_capi.a` in the profile directory the test
/// binary runs from (`target/<profile>/deps/<test>` → `target/<profile>`).
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let found = exe
        .ancestors()
        .skip(1)
        .take(4)
        .map(|dir| dir.join("liblocus_capi.a"))
        .find(|p| p.is_file());
    match found {
        Some(p) => p,
        None => panic!(
            "liblocus_capi.a not found next to {} or its parents: build it with `cargo build -p locus-capi`",
            exe.display()
        ),
    }
}

fn tmp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (scripts/install-deps installs it): {e}"))
}

fn run_ok(program: &str, args: &[&str]) -> Output {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {} failed ({}):\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str()
        .unwrap_or_else(|| panic!("non-UTF-8 path {}", p.display()))
}

/// Compiles `source` against the header and the static library.
fn compile_c(source: &Path, out: &Path, extra: &[&str]) {
    let include = Path::new(CRATE).join("include");
    let lib = static_lib();
    let mut args = vec![
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-g",
        "-I",
        s(&include),
    ];
    args.extend_from_slice(extra);
    args.extend([
        s(source),
        s(&lib),
        "-lpthread",
        "-ldl",
        "-lm",
        "-lgcc_s",
        "-o",
        s(out),
    ]);
    run_ok("clang-19", &args);
}

fn fixture(name: &str) -> PathBuf {
    Path::new(CRATE).join("fixtures").join(name)
}

fn llc(source: &Path, triple: &str, out: &Path, extra: &[&str]) {
    let mut args = vec![format!("-mtriple={triple}"), "-filetype=obj".into()];
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend([s(source).into(), "-o".into(), s(out).into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ok("llc-19", &args);
}

/// The first line where `a` and `b` differ, for failure messages.
fn first_difference(a: &str, b: &str) -> String {
    let i = a
        .lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or(a.lines().count().min(b.lines().count()));
    format!(
        "line {}:\n  llvm-readobj-19: {:?}\n  readobj.c:       {:?}",
        i + 1,
        a.lines().nth(i).unwrap_or("<end>"),
        b.lines().nth(i).unwrap_or("<end>")
    )
}

#[test]
fn readobj_matches_llvm_readobj() {
    let dir = tmp_dir("readobj");
    let readobj = dir.join("readobj");
    compile_c(&Path::new(CRATE).join("examples/readobj.c"), &readobj, &[]);
    let source = fixture("runtime.ll");
    let mut objects = Vec::new();
    for triple in [
        "x86_64-linux-gnu",
        "aarch64-linux-gnu",
        "aarch64_be-linux-gnu",
        "x86_64-apple-macosx",
        "arm64-apple-macosx",
        "x86_64-pc-windows-msvc",
    ] {
        let obj = dir.join(format!("runtime.{triple}.o"));
        llc(&source, triple, &obj, &[]);
        objects.push(obj);
    }
    // A shared object: addresses written by the linker, and a LoadName. The section holds
    // absolute relocations, hence -z notext.
    let pic = dir.join("runtime.pic.o");
    llc(
        &source,
        "x86_64-linux-gnu",
        &pic,
        &["-relocation-model=pic"],
    );
    let so = dir.join("libcapi.so.1");
    run_ok(
        "ld.lld-19",
        &[
            "-shared",
            "-soname",
            "libcapi.so.1",
            "-z",
            "notext",
            s(&pic),
            "-o",
            s(&so),
        ],
    );
    objects.push(so);
    // Without stack maps: the preamble only.
    let plain = dir.join("plain.o");
    llc(&fixture("plain.ll"), "x86_64-linux-gnu", &plain, &[]);
    objects.push(plain);

    let mut records = 0usize;
    let mut failures = Vec::new();
    for obj in &objects {
        let expected = run_ok("llvm-readobj-19", &["--stackmap", s(obj)]).stdout;
        let got = run(s(&readobj), &[s(obj)]);
        let (expected, got_text) = (
            String::from_utf8_lossy(&expected).into_owned(),
            String::from_utf8_lossy(&got.stdout).into_owned(),
        );
        if !got.status.success() {
            failures.push(format!(
                "{}: readobj.c failed ({}): {}",
                obj.display(),
                got.status,
                String::from_utf8_lossy(&got.stderr)
            ));
        } else if expected != got_text {
            failures.push(format!(
                "{}: differs from llvm-readobj-19 at {}",
                obj.display(),
                first_difference(&expected, &got_text)
            ));
        } else {
            records += expected.matches("  Record ID: ").count();
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // All files in one run, as llvm-readobj prints several.
    let args: Vec<&str> = objects.iter().map(|p| s(p)).collect();
    let mut with_flag = vec!["--stackmap"];
    with_flag.extend(&args);
    let expected = run_ok("llvm-readobj-19", &with_flag).stdout;
    let got = run_ok(s(&readobj), &args).stdout;
    assert!(
        expected == got,
        "all files at once: {}",
        first_difference(
            &String::from_utf8_lossy(&expected),
            &String::from_utf8_lossy(&got)
        )
    );
    // 8 records in each of the 7 objects with stack maps.
    assert_eq!(records, 56, "records matched");
    println!(
        "readobj.c: {} files, {records} records identical to llvm-readobj-19",
        objects.len()
    );

    // Damaged input: an error line and status 1, never a crash.
    let bad = dir.join("bad.o");
    let mut bytes = std::fs::read(&objects[0]).unwrap_or_default();
    let at = find(&bytes, &[3, 0, 0, 0, 6, 0, 0, 0]).unwrap_or_else(|| {
        panic!("no stack map header (version 3, 6 functions) in the x86-64 object")
    });
    bytes[at] = 2;
    std::fs::write(&bad, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let out = run(s(&readobj), &[s(&bad)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("LOCUS_ERR_UNSUPPORTED_VERSION") && stderr.contains("version 2"),
        "{stderr}"
    );
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The functions `include/locus.h` declares.
fn declared_functions() -> Vec<String> {
    let header = std::fs::read_to_string(Path::new(CRATE).join("include/locus.h"))
        .unwrap_or_else(|e| panic!("reading include/locus.h: {e}"));
    let mut names = Vec::new();
    for line in header.lines().filter(|l| !l.starts_with("//")) {
        if let Some(start) = line.find("locus_") {
            let rest = &line[start..];
            if let Some(end) = rest.find('(') {
                let name = &rest[..end];
                if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    names.push(name.to_string());
                }
            }
        }
    }
    names
}

fn api_test_program(dir: &Path, extra: &[&str]) -> (PathBuf, PathBuf) {
    let obj = dir.join("runtime.o");
    llc(&fixture("runtime.ll"), "x86_64-linux-gnu", &obj, &[]);
    let exe = dir.join("api_test");
    compile_c(&Path::new(CRATE).join("tests/c/api_test.c"), &exe, extra);
    (exe, obj)
}

fn run_api_test(exe: &Path, obj: &Path) -> String {
    let out = run(s(exe), &[s(obj)]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "api_test failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn api_test() {
    let source = std::fs::read_to_string(Path::new(CRATE).join("tests/c/api_test.c"))
        .unwrap_or_else(|e| panic!("{e}"));
    let declared = declared_functions();
    assert!(
        declared.len() >= 30,
        "only {} functions found in locus.h",
        declared.len()
    );
    let untested: Vec<&String> = declared
        .iter()
        .filter(|f| !source.contains(&format!("{f}(")))
        .collect();
    assert!(untested.is_empty(), "api_test.c never calls {untested:?}");

    let dir = tmp_dir("api");
    let (exe, obj) = api_test_program(&dir, &[]);
    let stdout = run_api_test(&exe, &obj);
    println!("{} entry points; {}", declared.len(), stdout.trim());
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("api_test: "))
        .unwrap_or_else(|| panic!("no summary line in {stdout:?}"));
    assert!(summary.ends_with(", 0 failed"), "{summary}");
}

#[test]
fn api_test_under_asan() {
    let dir = tmp_dir("asan");
    let (exe, obj) = api_test_program(
        &dir,
        // -fsanitize=function is left out: it reads a type signature before every function
        // called through a pointer, and the test calls code it wrote into a fresh page.
        &[
            "-fsanitize=address,undefined",
            "-fno-sanitize=function",
            "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer",
        ],
    );
    // ASan's leak checker would also report the Rust standard library's one-time
    // allocations (the panic machinery, thread-locals): leaks are left to the plain run.
    let out = Command::new(&exe)
        .arg(&obj)
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    assert!(
        out.status.success(),
        "api_test under ASan/UBSan failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The C example in the crate docs (lib.rs) compiles against the header as it is.
#[test]
fn crate_docs_c_example_compiles() {
    let lib_rs = std::fs::read_to_string(Path::new(CRATE).join("src/lib.rs"))
        .unwrap_or_else(|e| panic!("reading src/lib.rs: {e}"));
    let mut example = String::new();
    let mut inside = false;
    for line in lib_rs.lines() {
        let text = line.strip_prefix("//!").unwrap_or("");
        let text = text.strip_prefix(' ').unwrap_or(text);
        match (inside, text) {
            (false, "```c") => inside = true,
            (true, "```") => break,
            (true, _) => {
                example.push_str(text);
                example.push('\n');
            }
            _ => {}
        }
    }
    assert!(
        example.contains("locus_index_lookup"),
        "no C example in lib.rs"
    );
    let dir = tmp_dir("docs");
    let source = dir.join("example.c");
    std::fs::write(&source, example).unwrap_or_else(|e| panic!("{e}"));
    let include = Path::new(CRATE).join("include");
    run_ok(
        "clang-19",
        &[
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
            s(&include),
            s(&source),
        ],
    );
}

/// The plain api_test under valgrind: no invalid access and nothing definitely leaked (every
/// index it builds, good or refused, is freed by `locus_index_free` or never handed out).
#[test]
fn api_test_under_valgrind() {
    let dir = tmp_dir("valgrind");
    let (exe, obj) = api_test_program(&dir, &[]);
    let out = run(
        "valgrind",
        &[
            "--quiet",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
            "--error-exitcode=9",
            s(&exe),
            s(&obj),
        ],
    );
    assert!(
        out.status.success(),
        "api_test under valgrind failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Live values: `fixtures/live.ll` linked into `tests/c/live_test.c`, which reads `@run`'s
/// statepoint and stack map values through the C API while `@run` is stopped in a call,
/// from an index of its own executable; they must be the values `@run` was given.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn live_values() {
    let dir = tmp_dir("live");
    let obj = dir.join("live.o");
    llc(
        &fixture("live.ll"),
        "x86_64-linux-gnu",
        &obj,
        &["-relocation-model=static"],
    );
    let exe = dir.join("live_test");
    compile_c(
        &Path::new(CRATE).join("tests/c/live_test.c"),
        &exe,
        &["-no-pie", s(&obj)],
    );
    let out = run(s(&exe), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "live_test failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // At each stop 2 batch-lookup checks; the statepoint's 2 counts, 5 deopt values, 2 pairs
    // (derived, slot) and 2 base counts; the stack map's 14 values read two ways.
    assert!(
        stdout.contains("live_test: 46 values checked, 0 failed"),
        "{stdout}"
    );
    println!("{}", stdout.trim());
}

/// The shared library: it exports exactly the functions the header declares (`nm -D`),
/// and `examples/readobj.c` linked against it prints what llvm-readobj-19 prints.
#[test]
fn shared_library() {
    let so = static_lib().with_file_name("liblocus_capi.so");
    assert!(so.is_file(), "{} not built", so.display());
    let nm = run_ok("llvm-nm-19", &["-D", "--defined-only", s(&so)]);
    let mut exported: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|name| name.starts_with("locus_"))
        .map(str::to_string)
        .collect();
    exported.sort();
    let mut declared = declared_functions();
    declared.sort();
    assert_eq!(
        exported, declared,
        "liblocus_capi.so exports vs locus.h declares"
    );

    let dir = tmp_dir("shared");
    let exe = dir.join("readobj");
    let include = Path::new(CRATE).join("include");
    let lib_dir = so.parent().unwrap_or(Path::new("."));
    let rpath = format!("-Wl,-rpath,{}", s(lib_dir));
    run_ok(
        "clang-19",
        &[
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-I",
            s(&include),
            s(&Path::new(CRATE).join("examples/readobj.c")),
            "-L",
            s(lib_dir),
            "-llocus_capi",
            &rpath,
            "-o",
            s(&exe),
        ],
    );
    let obj = dir.join("runtime.o");
    llc(&fixture("runtime.ll"), "aarch64-linux-gnu", &obj, &[]);
    let expected = run_ok("llvm-readobj-19", &["--stackmap", s(&obj)]).stdout;
    let got = run_ok(s(&exe), &[s(&obj)]).stdout;
    assert!(
        expected == got,
        "{}",
        first_difference(
            &String::from_utf8_lossy(&expected),
            &String::from_utf8_lossy(&got)
        )
    );
}
