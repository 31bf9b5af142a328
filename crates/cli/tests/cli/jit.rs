//! `locus jit run`: compiles a module in process, calls `i64 NAME()`, prints the result and
//! with `--stats` the stack map records captured; bad entries and unresolved symbols are
//! errors with exit status 1.

// The runtime's trampolines are x86-64 assembly; elsewhere `jit run` refuses.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// `@main` computes 6 * 7 through `@mul`; each has a stack map, `@mul` in a section of its
/// own, and a patch point with no target (nops) in `@main`.
const MODULE: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)
declare void @llvm.experimental.patchpoint.void(i64, i32, ptr, i32, ...)

define i64 @mul(i64 %a, i64 %b) section ".text.cold" {
  %p = mul i64 %a, %b
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 1, i32 0, i64 %p, i64 %a)
  ret i64 %p
}

define i64 @main() {
  %r = call i64 @mul(i64 6, i64 7)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 2, i32 8, i64 %r)
  call void (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.void(i64 3, i32 16, ptr null, i32 0, i64 %r)
  ret i64 %r
}

define i64 @minus() {
  ret i64 -5
}
"#;

fn write_module(dir: &TempDir, name: &str, text: &str) -> String {
    let path = dir.path(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path_str(&path).to_owned()
}

fn locus_jit(args: &[&str]) -> Output {
    run(LOCUS, &[&["jit", "run"], args].concat())
}

fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}, stderr: {}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn runs_the_entry_and_prints_its_result() {
    let dir = TempDir::new("jit-run");
    let file = write_module(&dir, "six_times_seven.ll", MODULE);
    assert_eq!(stdout_ok(&locus_jit(&[&file])), "42\n");
    assert_eq!(stdout_ok(&locus_jit(&[&file, "--entry", "minus"])), "-5\n");
}

#[test]
fn stats_count_the_stack_map_records() {
    let dir = TempDir::new("jit-stats");
    let file = write_module(&dir, "six_times_seven.ll", MODULE);
    assert_eq!(
        stdout_ok(&locus_jit(&[&file, "--stats"])),
        "42\nrecords: 3\npatches: 0\nmisses: 0\nhits: 0\ndeopts: 0\nstubs: 0\nlookups: 0\n"
    );
    let plain = write_module(&dir, "plain.ll", "define i64 @main() {\n  ret i64 7\n}\n");
    assert_eq!(
        stdout_ok(&locus_jit(&["--stats", &plain])),
        "7\nrecords: 0\npatches: 0\nmisses: 0\nhits: 0\ndeopts: 0\nstubs: 0\nlookups: 0\n"
    );
}

#[test]
fn reads_standard_input_and_calls_libc() {
    let ir = r#"
declare i64 @strlen(ptr)
@s = private constant [12 x i8] c"hello, jit!\00"
define i64 @main() {
  %n = call i64 @strlen(ptr @s)
  ret i64 %n
}
"#;
    let mut child = Command::new(LOCUS)
        .args(["jit", "run", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"));
    child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(ir.as_bytes()))
        .transpose()
        .unwrap_or_else(|e| panic!("cannot write to locus: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("locus did not finish: {e}"));
    assert_eq!(stdout_ok(&out), "11\n");
}

#[test]
fn bad_entries_and_symbols_are_errors() {
    let dir = TempDir::new("jit-errors");
    let file = write_module(&dir, "six_times_seven.ll", MODULE);
    let cases: [(&[&str], &str); 3] = [
        (&["--entry", "nothing"], "no function @nothing is defined"),
        (&["--entry", "mul"], "must be `i64 @mul()`"),
        (
            &["--entry", "llvm.experimental.stackmap"],
            "no function @llvm.experimental.stackmap is defined",
        ),
    ];
    for (args, message) in cases {
        let out = locus_jit(&[&[file.as_str()], args].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with("locus: ") && stderr.contains(message),
            "{args:?}: {stderr}"
        );
    }
    let unresolved = write_module(
        &dir,
        "unresolved.ll",
        "declare i64 @locus_no_such_symbol()\ndefine i64 @main() {\n  %r = call i64 @locus_no_such_symbol()\n  ret i64 %r\n}\n",
    );
    let out = locus_jit(&[&unresolved]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("locus_no_such_symbol"));
    let broken = write_module(&dir, "broken.ll", "define i64 @main( {\n");
    let out = locus_jit(&[&broken]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("broken.ll"),
        "{}",
        text(&out.stderr)
    );
}

/// `--invalidate FUNCTION` patches the function's stack map shadows to call the deopt entry
/// before the run: the call is finished by Locus's interpreter from the record's live
/// values, with the compiled code's result; `--stats` counts the patch and the deopt. Only
/// the entry's own frame deoptimizes: a call of the invalidated function from compiled
/// code ends the run with an error.
#[test]
fn invalidated_functions_deoptimize_to_the_same_result() {
    let t = TempDir::new("jit-deopt");
    let ll = t.path("deopt.ll");
    std::fs::write(
        &ll,
        "declare void @llvm.experimental.stackmap(i64, i32, ...)\n\
         declare i64 @locus_poll(i64)\n\
         @a = global i64 5\n\
         @b = global i64 9\n\
         define i64 @main() {\n\
         \x20 %a = load i64, ptr @a\n\
         \x20 %b = load i64, ptr @b\n\
         \x20 %t = mul i64 %a, 3\n\
         \x20 %u = add i64 %a, 11\n\
         \x20 %p = call i64 @locus_poll(i64 %t)\n\
         \x20 call void (i64, i32, ...) @llvm.experimental.stackmap(i64 100, i32 8, i64 %p, i64 %u, i64 %b)\n\
         \x20 %v = add i64 %p, %b\n\
         \x20 %r = mul i64 %v, %u\n\
         \x20 ret i64 %r\n\
         }\n\
         define i64 @outer() {\n\
         \x20 %r = call i64 @main()\n\
         \x20 %s = add i64 %r, 1\n\
         \x20 ret i64 %s\n\
         }\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["jit", "run", path_str(&ll), "--stats"];
        args.extend(extra);
        Command::new(LOCUS).args(&args).output().unwrap()
    };
    let ok = |out: Output| {
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).to_string()
    };
    // (5 * 3 + 9) * (5 + 11)
    assert_eq!(
        ok(run(&[])),
        "384\nrecords: 1\npatches: 0\nmisses: 0\nhits: 0\ndeopts: 0\nstubs: 0\nlookups: 0\n"
    );
    assert_eq!(
        ok(run(&["--invalidate", "main"])),
        "384\nrecords: 1\npatches: 1\nmisses: 0\nhits: 0\ndeopts: 1\nstubs: 0\nlookups: 0\n"
    );
    assert_eq!(
        ok(run(&["--entry", "outer"])),
        "385\nrecords: 1\npatches: 0\nmisses: 0\nhits: 0\ndeopts: 0\nstubs: 0\nlookups: 0\n"
    );
    let out = run(&["--entry", "outer", "--invalidate", "main"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("@main (stack map 100) was not called by Runtime::call"),
        "{}",
        text(&out.stderr)
    );
}

/// `tests/fixtures/jit/shapes.ll`: the program makes its own shapes and objects through
/// the runtime's surface and reads them at four patch points in a loop, changing a shape
/// midway (its comments give the counts).
fn shapes_fixture() -> String {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jit/shapes.ll");
    path_str(&path).to_owned()
}

/// What `@main` of `shapes.ll` computes, from the values it gives its objects.
fn shapes_checksum() -> i64 {
    let (x, y, z) = (120, 121, 122);
    let object = |vals: [(u64, i64); 4]| -> HashMap<u64, i64> { vals.into_iter().collect() };
    let mut a1 = object([(x, 3), (y, 4), (z, 5), (0, 0)]);
    let a2 = object([(x, -2), (y, 7), (z, 11), (0, 0)]);
    let b = object([(x, 10), (y, 20), (z, 30), (0, 0)]);
    let c = object([(x, 6), (y, 8), (z, 9), (119, 1000)]);
    let step = |o: &HashMap<u64, i64>, h: i64| -> i64 {
        let norm = o[&x]
            .wrapping_mul(o[&x])
            .wrapping_add(o[&y].wrapping_mul(o[&y]));
        h.wrapping_mul(31).wrapping_add(norm) ^ o[&z].wrapping_mul(3)
    };
    let mut h: i64 = 17;
    for i in 0..10 {
        a1.insert(x, i);
        h = step(&a1, h);
        h = step(&b, h);
        h = step(&a2, h);
        h = step(&c, h);
        h = h.wrapping_add(c[&119]).wrapping_add(i);
    }
    h
}

/// The same checksum with caching on and off (`--no-cache`), equal to what the program
/// computes; with caching, misses are the 10 distinct (site, shape) pairs plus the 9
/// re-misses at the 3 sites the shape change patched back, every other read (130 in all)
/// a hit; without, every read misses and nothing is patched. With `--max-shapes 1` the
/// sites that see a second shape answer through the runtime's lookup.
#[test]
fn a_program_s_own_objects_are_read_through_inline_caches() {
    let file = shapes_fixture();
    let expected = shapes_checksum();
    assert_eq!(
        stdout_ok(&locus_jit(&[&file, "--stats"])),
        format!("{expected}\nrecords: 4\npatches: 22\nmisses: 19\nhits: 111\ndeopts: 0\nstubs: 15\nlookups: 0\n")
    );
    assert_eq!(
        stdout_ok(&locus_jit(&[&file, "--stats", "--no-cache"])),
        format!("{expected}\nrecords: 4\npatches: 0\nmisses: 130\nhits: 0\ndeopts: 0\nstubs: 0\nlookups: 0\n")
    );
    assert_eq!(stdout_ok(&locus_jit(&[&file])), format!("{expected}\n"));
    // One shape a site: the sites that see a second go megamorphic, and the runtime's
    // lookup answers their reads from then on; the same checksum, every read counted once.
    let out = stdout_ok(&locus_jit(&[&file, "--stats", "--max-shapes", "1"]));
    let count = |what: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(what)?.strip_prefix(": ")?.parse().ok())
            .unwrap_or(u64::MAX)
    };
    assert!(out.starts_with(&format!("{expected}\n")), "{out}");
    assert!(count("lookups") > 0, "{out}");
    assert_eq!(
        count("hits") + count("misses") + count("lookups"),
        130,
        "{out}"
    );
}

/// The declarations of the runtime's surface, for the programs below.
const SURFACE: &str = "declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)\n\
    declare void @llvm.experimental.stackmap(i64, i32, ...)\n\
    declare i64 @locus_ic_miss(ptr, i64)\n\
    declare i64 @locus_shape_new(ptr, i64)\n\
    declare i64 @locus_shape_change(i64, ptr, i64)\n\
    declare ptr @locus_object_new(i64)\n\
    declare void @locus_object_set(ptr, i64, i64)\n\
    declare i64 @locus_object_get(ptr, i64)\n\
    declare i64 @locus_invalidate(ptr)\n\
    declare void @abort()\n\
    @xy = private constant [2 x i64] [i64 120, i64 121]\n\
    @data = private global [4 x i64] zeroinitializer\n";

/// A property read of `%o` at patch point `id`, of 32 bytes (a stub's call when hits are
/// counted).
fn get(result: &str, id: u32, object: &str, name: u64) -> String {
    get_sized(result, id, 32, object, name)
}

/// A property read of `%o` at patch point `id` reserving `bytes`.
fn get_sized(result: &str, id: u32, bytes: u32, object: &str, name: u64) -> String {
    format!(
        "  {result} = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 {id}, i32 {bytes}, ptr @locus_ic_miss, i32 2, ptr {object}, i64 {name})\n"
    )
}

/// A program whose `@main` runs `body` after making `%o`, an object of shape [x, y], then
/// calls `abort` (which a call ended by the runtime never reaches).
fn surface_program(body: &str) -> String {
    format!(
        "{SURFACE}define i64 @main() {{\n  \
         %s = call i64 @locus_shape_new(ptr @xy, i64 2)\n  \
         %o = call ptr @locus_object_new(i64 %s)\n\
         {body}  call void @abort()\n  ret i64 0\n}}\n"
    )
}

/// Bad arguments to the surface end the run with one `locus:` line naming the entry point,
/// its caller and the fault, exit status 1, before the program goes on (it would abort).
#[test]
fn bad_calls_of_the_runtime_s_surface_end_the_run() {
    let dir = TempDir::new("jit-surface-errors");
    let cases: [(&str, &str, String); 10] = [
        (
            "null_object",
            "locus_object_set (called from @main): 0x0 is not an object of this runtime",
            "  call void @locus_object_set(ptr null, i64 120, i64 1)\n".into(),
        ),
        (
            "unknown_object",
            "is not an object of this runtime",
            "  %p = getelementptr i64, ptr %o, i64 1\n  %v = call i64 @locus_object_get(ptr %p, i64 120)\n".into(),
        ),
        (
            "missing_property",
            "locus_object_set (called from @main): shape 0 has no property 122",
            "  call void @locus_object_set(ptr %o, i64 122, i64 1)\n".into(),
        ),
        (
            "unknown_shape",
            "locus_object_new (called from @main): no shape 7",
            "  %q = call ptr @locus_object_new(i64 7)\n".into(),
        ),
        (
            "names_out_of_bounds",
            "locus_shape_new (called from @main): 3 names at 0x0 are neither in the program's sections nor on its stack",
            "  %t = call i64 @locus_shape_new(ptr null, i64 3)\n".into(),
        ),
        (
            "names_past_a_global",
            "neither in the program's sections nor on its stack",
            "  %t = call i64 @locus_shape_new(ptr @xy, i64 1000)\n".into(),
        ),
        (
            "a_name_twice",
            "locus_shape_new (called from @main): property 0 is named twice",
            "  %t = call i64 @locus_shape_new(ptr @data, i64 4)\n".into(),
        ),
        (
            "not_a_rearrangement",
            "locus_shape_change (called from @main): ",
            "  %t = call i64 @locus_shape_change(i64 %s, ptr @data, i64 2)\n".into(),
        ),
        (
            "read_of_a_missing_property",
            "shape 0 has no property 119",
            get("%w", 1, "%o", 119),
        ),
        (
            "read_of_an_unknown_object",
            "is not an object of this runtime",
            get("%w", 1, "@data", 120),
        ),
    ];
    for (name, message, body) in cases {
        let file = write_module(&dir, &format!("{name}.ll"), &surface_program(&body));
        let out = locus_jit(&[&file, "--stats"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(out.stdout.is_empty(), "{name}");
        assert!(
            stderr.starts_with("locus: ")
                && stderr.contains("`main`: ")
                && stderr.contains(message),
            "{name}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
    }
    let invalid = write_module(
        &dir,
        "invalidate_data.ll",
        &surface_program("  %n = call i64 @locus_invalidate(ptr @data)\n"),
    );
    let out = locus_jit(&[&invalid]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a function of the program"),
        "{}",
        text(&out.stderr)
    );
}

/// A fault in the compiled code (here a load from null next to a patched read) ends the
/// run with one `locus:` line naming the signal and the function, exit status 3.
#[test]
fn a_fault_in_compiled_code_is_reported() {
    let dir = TempDir::new("jit-surface-fault");
    let program = format!(
        "{SURFACE}define i64 @read(ptr %o, ptr %p) {{\n{}  \
         %w = load volatile i64, ptr %p\n  %r = add i64 %v, %w\n  ret i64 %r\n}}\n\
         define i64 @main() {{\n  \
         %s = call i64 @locus_shape_new(ptr @xy, i64 2)\n  \
         %o = call ptr @locus_object_new(i64 %s)\n  \
         %a = call i64 @read(ptr %o, ptr @data)\n  \
         %b = call i64 @read(ptr %o, ptr null)\n  ret i64 %b\n}}\n",
        get_sized("%v", 1, 64, "%o", 121)
    );
    let file = write_module(&dir, "fault.ll", &program);
    let out = locus_jit(&[&file]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.starts_with("locus: SIGSEGV (null pointer dereference) at address 0x0")
            && stderr.contains("in function `read`"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(out.stdout.is_empty());
}

/// Forged objects, made by the program, read at a patched site (a 16-byte one that calls
/// a stub, a 64-byte one with the fast path inline) after a real object of the shape
/// patched it: each run ends with the same `locus:` line and exit status 1 with caching
/// and with `--no-cache` (addresses aside, which differ from run to run). Before patched
/// sites checked the object, the copies answered 42 with caching and null faulted
/// (status 3). A real object answers 84 both ways.
#[test]
fn forged_objects_are_refused_with_and_without_caching() {
    let dir = TempDir::new("jit-forged");
    // Each body makes `%f` from `%o` (shape [x, y], y = 42) and the shape `%s`.
    let copy = |to: &str| {
        format!(
            "  %w0 = load i64, ptr %o\n  %o1 = getelementptr i64, ptr %o, i64 1\n  \
             %w1 = load i64, ptr %o1\n  %o2 = getelementptr i64, ptr %o, i64 2\n  \
             %w2 = load i64, ptr %o2\n  store i64 %w0, ptr {to}\n  \
             %t1 = getelementptr i64, ptr {to}, i64 1\n  store i64 %w1, ptr %t1\n  \
             %t2 = getelementptr i64, ptr {to}, i64 2\n  store i64 %w2, ptr %t2\n"
        )
    };
    let forgeries: [(&str, String); 8] = [
        ("real", "  %f = getelementptr i8, ptr %o, i64 0\n".into()),
        (
            "global_copy",
            format!(
                "{}  %f = getelementptr i8, ptr @fake, i64 0\n",
                copy("@fake")
            ),
        ),
        (
            "stack_copy",
            format!("  %f = alloca [3 x i64], align 8\n{}", copy("%f")),
        ),
        (
            "unaligned_copy",
            "  %f = getelementptr i8, ptr @bytes, i64 1\n  \
             call void @llvm.memcpy.p0.p0.i64(ptr %f, ptr %o, i64 24, i1 false)\n"
                .into(),
        ),
        (
            "copy_inside_an_object",
            "  %b = call i64 @locus_shape_new(ptr @four, i64 4)\n  \
             %big = call ptr @locus_object_new(i64 %b)\n  \
             call void @locus_object_set(ptr %big, i64 2, i64 %s)\n  \
             call void @locus_object_set(ptr %big, i64 4, i64 42)\n  \
             %f = getelementptr i8, ptr %big, i64 16\n"
                .into(),
        ),
        (
            "copy_past_the_last_object",
            format!(
                "  %last = call ptr @locus_object_new(i64 %s)\n  \
                 %f = getelementptr i8, ptr %last, i64 24\n{}",
                copy("%f")
            ),
        ),
        (
            "inside_an_object",
            "  %f = getelementptr i8, ptr %o, i64 8\n".into(),
        ),
        ("null", "  %f = getelementptr i8, ptr null, i64 0\n".into()),
    ];
    let mut compared = 0;
    for bytes in [16, 64] {
        for (name, body) in &forgeries {
            let program = format!(
                "{SURFACE}@fake = global [3 x i64] zeroinitializer\n\
                 @bytes = global [32 x i8] zeroinitializer\n\
                 @four = private constant [4 x i64] [i64 1, i64 2, i64 3, i64 4]\n\
                 declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)\n\
                 define i64 @read(ptr %o) {{\n{}  ret i64 %v\n}}\n\
                 define i64 @main() {{\n  \
                 %s = call i64 @locus_shape_new(ptr @xy, i64 2)\n  \
                 %o = call ptr @locus_object_new(i64 %s)\n  \
                 call void @locus_object_set(ptr %o, i64 121, i64 42)\n  \
                 %a = call i64 @read(ptr %o)\n\
                 {body}  %c = call i64 @read(ptr %f)\n  %r = add i64 %a, %c\n  ret i64 %r\n}}\n",
                get_sized("%v", 1, bytes, "%o", 121)
            );
            let file = write_module(&dir, &format!("{name}{bytes}.ll"), &program);
            let cached = locus_jit(&[&file]);
            let uncached = locus_jit(&[&file, "--no-cache"]);
            if *name == "real" {
                assert_eq!(stdout_ok(&cached), "84\n");
                assert_eq!(stdout_ok(&uncached), "84\n");
                continue;
            }
            for out in [&cached, &uncached] {
                let stderr = text(&out.stderr);
                assert_eq!(out.status.code(), Some(1), "{name}, {bytes}: {stderr}");
                assert!(out.stdout.is_empty(), "{name}, {bytes}");
                assert!(
                    stderr.starts_with("locus: JIT error: `main`: 0x")
                        && stderr.ends_with(" is not an object of this runtime\n"),
                    "{name}, {bytes}: {stderr}"
                );
                assert_eq!(stderr.lines().count(), 1, "{name}, {bytes}: {stderr}");
            }
            // The same line but for the address, which moves from run to run.
            let line = |out: &Output| {
                let stderr = text(&out.stderr);
                let at = stderr.find("0x").unwrap_or(0);
                let end = stderr[at..].find(' ').map_or(stderr.len(), |e| at + e);
                format!("{}ADDRESS{}", &stderr[..at], &stderr[end..])
            };
            assert_eq!(line(&cached), line(&uncached), "{name}, {bytes}");
            if *name == "null" {
                assert_eq!(text(&cached.stderr), text(&uncached.stderr));
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 14);
}

/// A program that makes objects forever (of a shape of 65536 properties, 512 KiB each)
/// fills the runtime's arena of 256 MiB and ends with one `locus:` line, exit status 1,
/// after 511 objects, instead of taking all memory.
#[test]
fn objects_past_the_arena_end_the_run() {
    let dir = TempDir::new("jit-arena");
    let program = format!(
        "{SURFACE}define i64 @main() {{\n\
         entry:\n  %names = alloca [65536 x i64], align 8\n  br label %fill\n\
         fill:\n  %i = phi i64 [0, %entry], [%i1, %fill]\n  \
         %p = getelementptr i64, ptr %names, i64 %i\n  store i64 %i, ptr %p\n  \
         %i1 = add i64 %i, 1\n  %full = icmp eq i64 %i1, 65536\n  \
         br i1 %full, label %make, label %fill\n\
         make:\n  %s = call i64 @locus_shape_new(ptr %names, i64 65536)\n  br label %loop\n\
         loop:\n  %o = call ptr @locus_object_new(i64 %s)\n  br label %loop\n}}\n"
    );
    let file = write_module(&dir, "forever.ll", &program);
    let out = locus_jit(&[&file, "--timeout", "60"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    // 511 objects of 65537 words.
    assert_eq!(
        stderr,
        "locus: JIT error: `main`: locus_object_new (called from @main): the object arena \
         is full (267915256 of 268435456 bytes used; an object of 65537 words does not fit)\n"
    );
}

/// Property names may be on the program's stack; objects are zero until set; a shape
/// change from the program reports the sites it patched back.
#[test]
fn names_on_the_stack_and_a_shape_change_from_the_program() {
    let dir = TempDir::new("jit-surface-stack");
    let program = format!(
        "{SURFACE}define i64 @main() {{\n  \
         %names = alloca [3 x i64], align 8\n  \
         store i64 7, ptr %names\n  \
         %n1 = getelementptr i64, ptr %names, i64 1\n  store i64 8, ptr %n1\n  \
         %n2 = getelementptr i64, ptr %names, i64 2\n  store i64 9, ptr %n2\n  \
         %s = call i64 @locus_shape_new(ptr %names, i64 3)\n  \
         %o = call ptr @locus_object_new(i64 %s)\n  \
         call void @locus_object_set(ptr %o, i64 9, i64 40)\n\
         {}{}  \
         store i64 9, ptr %names\n  store i64 7, ptr %n2\n  \
         %back = call i64 @locus_shape_change(i64 %s, ptr %names, i64 3)\n\
         {}  %g = call i64 @locus_object_get(ptr %o, i64 9)\n  \
         %r1 = add i64 %nine, %seven\n  %r2 = add i64 %r1, %nine2\n  \
         %r3 = mul i64 %back, 1000\n  %r4 = add i64 %r2, %r3\n  %r = add i64 %r4, %g\n  \
         ret i64 %r\n}}\n",
        get("%nine", 1, "%o", 9),
        get("%seven", 2, "%o", 7),
        get("%nine2", 1, "%o", 9),
    );
    let file = write_module(&dir, "stack.ll", &program);
    // 40 + 0 + 40 + 2 sites patched back * 1000 + 40; misses: sites 1, 2, then site 1
    // again; patches: one per miss, two back; a stub per miss.
    assert_eq!(
        stdout_ok(&locus_jit(&[&file, "--stats"])),
        "2120\nrecords: 3\npatches: 5\nmisses: 3\nhits: 0\ndeopts: 0\nstubs: 3\nlookups: 0\n"
    );
}

/// `@locus_invalidate` from the program: the entry invalidates itself and deoptimizes at
/// the stack map right after the call, and the interpreter finishes it with the compiled
/// result. A function called by compiled code is not deoptimized: its compiled caller's
/// registers cannot be put back without its unwind tables, so the run ends with an error.
#[test]
fn a_program_invalidates_its_own_code() {
    let dir = TempDir::new("jit-surface-invalidate");
    let program = format!(
        "{SURFACE}@seven = global i64 7\n\
         define i64 @main() {{\n  \
         %a = load i64, ptr @seven\n  \
         %t = mul i64 %a, 5\n  \
         %n = call i64 @locus_invalidate(ptr @main)\n  \
         call void (i64, i32, ...) @llvm.experimental.stackmap(i64 10, i32 8, i64 %n, i64 %t, i64 %a)\n  \
         %u = add i64 %t, %n\n  %r = mul i64 %u, %a\n  ret i64 %r\n}}\n\
         define i64 @nested() {{\n  \
         %r = call i64 @main()\n  ret i64 %r\n}}\n"
    );
    let file = write_module(&dir, "invalidate.ll", &program);
    // (7 * 5 + 1 shadow patched) * 7 = 252, by the interpreter.
    assert_eq!(
        stdout_ok(&locus_jit(&[&file, "--stats"])),
        "252\nrecords: 1\npatches: 1\nmisses: 0\nhits: 0\ndeopts: 1\nstubs: 0\nlookups: 0\n"
    );
    let out = locus_jit(&[&file, "--entry", "nested"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("locus: ")
            && stderr.contains(
                "deoptimization failed: @main (stack map 10) was not called by Runtime::call"
            ),
        "{stderr}"
    );
}

/// Programs that end themselves or never end: `abort()`, `raise()` and a stack overflow in
/// a thread the program made each end with one `locus:` line and exit status 3 (they died
/// silently by the signal before); `--timeout` ends an endless loop with status 124, and
/// a program that forks finishes in both processes.
#[test]
fn silent_deaths_and_hangs_of_the_program_are_reported() {
    let dir = TempDir::new("jit-deaths");
    let cases = [
        (
            "abort.ll",
            "declare void @abort()\ndefine i64 @main() {\n  call void @abort()\n  ret i64 0\n}\n",
            "locus: SIGABRT (abort called in this process)",
        ),
        (
            "raise.ll",
            "declare i32 @raise(i32)\ndefine i64 @main() {\n  %r = call i32 @raise(i32 15)\n  ret i64 0\n}\n",
            "locus: SIGTERM (sent by this process to itself: raise or kill)",
        ),
        (
            "thread.ll",
            r#"declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
define i64 @rec(i64 %n) {
  %a = alloca [64 x i64]
  store volatile i64 %n, ptr %a
  %m = add i64 %n, 1
  %r = call i64 @rec(i64 %m)
  %s = add i64 %r, 1
  ret i64 %s
}
define ptr @body(ptr %x) {
  %r = call i64 @rec(i64 0)
  ret ptr null
}
define i64 @main() {
  %t = alloca i64
  %c = call i32 @pthread_create(ptr %t, ptr null, ptr @body, ptr null)
  %tid = load i64, ptr %t
  %j = call i32 @pthread_join(i64 %tid, ptr null)
  ret i64 0
}
"#,
            "locus: SIGSEGV (stack overflow) at address 0x",
        ),
    ];
    for (name, ir, line) in cases {
        let path = write_module(&dir, name, ir);
        let out = locus_jit(&[&path]);
        assert_eq!(out.status.code(), Some(3), "{name}: {out:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with(line), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
    }
    let endless = write_module(
        &dir,
        "loop.ll",
        "define i64 @main() {\nentry:\n  br label %l\nl:\n  br label %l\n}\n",
    );
    let started = std::time::Instant::now();
    let out = locus_jit(&[&endless, "--timeout", "0.5"]);
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(
        text(&out.stderr),
        format!(
            "locus: {endless}: not finished after 0.5 seconds (--timeout): ended, exit status 124\n"
        )
    );
    // A run that finishes in time is not affected.
    let quick = write_module(&dir, "quick.ll", "define i64 @main() {\n  ret i64 7\n}\n");
    assert_eq!(stdout_ok(&locus_jit(&[&quick, "--timeout", "30"])), "7\n");
    // A program that forks: both processes finish the run; the child has no watchdog
    // thread to stop (joining the parent's handle there panicked, about 1 run in 3).
    let forks = write_module(
        &dir,
        "fork.ll",
        "declare i32 @fork()\ndeclare i32 @wait(ptr)\ndefine i64 @main() {\n  %p = call i32 @fork()\n  \
         %child = icmp eq i32 %p, 0\n  br i1 %child, label %c, label %w\nw:\n  \
         %s = call i32 @wait(ptr null)\n  ret i64 1\nc:\n  ret i64 2\n}\n",
    );
    for _ in 0..6 {
        let out = locus_jit(&[&forks, "--timeout", "30"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(!text(&out.stderr).contains("panicked"), "{out:?}");
        let stdout = text(&out.stdout);
        let mut printed: Vec<&str> = stdout.lines().collect();
        printed.sort_unstable();
        assert_eq!(printed, ["1", "2"], "{out:?}");
    }
    let help = run(LOCUS, &["jit", "run", "--help"]);
    assert!(
        text(&help.stdout).contains("--timeout <SECONDS>"),
        "{help:?}"
    );
}
