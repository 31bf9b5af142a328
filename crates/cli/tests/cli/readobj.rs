//! Oracle test for `locus stackmap FILE`: its output must be byte-identical to
//! `llvm-readobj-19 --stackmap FILE`.
//!
//! Every `tests/fixtures/stackmap/*.ll` is compiled at test time with `llc-19` for each triple
//! in [`TRIPLES`] (plus Mach-O and COFF objects of one fixture, and a shared object with a
//! `DT_SONAME`), and both tools are run on the same path. A linked executable whose section holds two tables back to back checks that locus
//! prints the first table as llvm-readobj does and the second one after it. Damaged copies of
//! real objects check that bad input gives one clear error line, never a panic. Every machine
//! llc-19 makes stack maps for, objects without a stack map section (on every machine llc-19
//! writes objects for) and a static archive are compared too.
//!
//! The LLVM 19 tools are required: when one is missing the tests fail and say so.
//! The exact text format is described in `tests/fixtures/stackmap/FORMAT.md`.

use crate::common::*;
use std::fs;
use std::path::{Path, PathBuf};

/// Every fixture is compiled for each of these. The first two are the required targets; the
/// big-endian AArch64 ELF is printed by llvm-readobj too, so it is held to the same standard.
const TRIPLES: &[&str] = &[
    "x86_64-linux-gnu",
    "aarch64-linux-gnu",
    "aarch64_be-linux-gnu",
];

/// Other container formats, from one fixture (llvm-readobj prints stack maps for Mach-O and
/// COFF too; their preamble has no `LoadName:` line).
const OTHER_FORMATS: &[(&str, &str)] = &[
    ("patchpoint_anyreg.ll", "x86_64-apple-macosx"),
    ("patchpoint_anyreg.ll", "arm64-apple-macosx"),
    ("patchpoint_anyreg.ll", "x86_64-pc-windows-msvc"),
    ("patchpoint_anyreg.ll", "aarch64-pc-windows-msvc"),
];

/// Text that must appear in the llvm-readobj output of the fixtures for each of the two main
/// triples, so that an edit to a fixture cannot silently drop what the set is meant to cover.
const COVERAGE: &[(&str, &str)] = &[
    ("a Register location", "Register R#"),
    ("a Direct location", ": Direct R#"),
    ("an Indirect (spilled) location", ": Indirect [R#"),
    ("a small Constant location", ": Constant "),
    ("a ConstantIndex location", ": ConstantIndex #"),
    ("a constant pool entry", "\n  #1: "),
    (
        "a dynamic frame (UINT64_MAX stack size)",
        "stack size: 18446744073709551615,",
    ),
    ("a record with no locations", "    0 locations:\n"),
    ("a 16-byte live-out", "(16-bytes)"),
    (
        "a record ID above i64::MAX",
        "Record ID: 18446744073709551615,",
    ),
];

// ---------------------------------------------------------------------------------------------
// The oracle.
// ---------------------------------------------------------------------------------------------

#[test]
fn readobj_oracle() {
    let tmp = TempDir::new("oracle");
    // (label, object, triple whose coverage it counts for)
    let mut objects: Vec<(String, PathBuf, &str)> = Vec::new();
    for src in fixtures() {
        for &triple in TRIPLES {
            let obj = tmp.path(&format!("{}.{triple}.o", stem(&src)));
            compile(&src, triple, &obj);
            objects.push((format!("{} ({triple})", stem(&src)), obj, triple));
        }
    }
    for &(name, triple) in OTHER_FORMATS {
        let src = fixture(name);
        let obj = tmp.path(&format!("{}.{triple}.o", stem(&src)));
        compile(&src, triple, &obj);
        objects.push((format!("{} ({triple})", stem(&src)), obj, triple));
    }
    objects.push((
        "constants (x86_64-linux-gnu, linked with ld.lld-19 -shared -soname libsm.so.1)".into(),
        shared_object_with_soname(&tmp),
        "shared",
    ));

    let mut matched = 0usize;
    let mut failures = Vec::new();
    // Concatenated readobj output per main triple, for the coverage check.
    let mut seen: Vec<(&str, String)> = TRIPLES[..2].iter().map(|&t| (t, String::new())).collect();

    for (label, obj, triple) in &objects {
        let expected = readobj(obj);
        let expected_text = text(&expected);
        assert!(
            expected_text.contains("\nLLVM StackMap Version: 3\n"),
            "{label}: llvm-readobj-19 printed no stack map for {}:\n{expected_text}",
            obj.display()
        );
        if let Some((_, acc)) = seen.iter_mut().find(|(t, _)| t == triple) {
            acc.push_str(&expected_text);
        }
        match check_identical(label, obj, &expected, &locus(obj)) {
            Ok(()) => matched += 1,
            Err(msg) => failures.push(msg),
        }
    }

    println!("readobj oracle: {matched} objects matched");

    for (triple, acc) in &seen {
        for (what, needle) in COVERAGE {
            assert!(
                acc.contains(needle),
                "the fixtures no longer cover {what} on {triple} (no {needle:?} in llvm-readobj output)"
            );
        }
        let has_live_outs = acc
            .lines()
            .any(|l| l.ends_with("]") && l.contains(" live-outs: [ R#"));
        assert!(
            has_live_outs,
            "the fixtures have no non-empty live-out list on {triple}"
        );
    }

    if !failures.is_empty() {
        panic!(
            "{} of {} objects differ from llvm-readobj-19 ({matched} matched):\n\n{}",
            failures.len(),
            objects.len(),
            failures.join("\n")
        );
    }
}

/// A shared object with a `DT_SONAME`, so llvm-readobj prints `LoadName: libsm.so.1`. The
/// stack map section is read-only and holds absolute relocations, hence `-z notext`.
fn shared_object_with_soname(tmp: &TempDir) -> PathBuf {
    let obj = tmp.path("constants.pic.o");
    run_ok(
        LLC,
        &[
            "-mtriple=x86_64-linux-gnu",
            "-relocation-model=pic",
            "-filetype=obj",
            path_str(&fixture("constants.ll")),
            "-o",
            path_str(&obj),
        ],
    );
    let so = tmp.path("libsm.so.1");
    run_ok(
        LLD,
        &[
            "-shared",
            "-z",
            "notext",
            "-soname",
            "libsm.so.1",
            path_str(&obj),
            "-o",
            path_str(&so),
        ],
    );
    so
}

/// A linked file whose `.llvm_stackmaps` holds two tables back to back: llvm-readobj prints
/// only the first; locus must print that text identically and then the second table.
#[test]
fn linked_executable_with_two_tables() {
    let tmp = TempDir::new("linked");
    let triple = "x86_64-linux-gnu";
    let first_obj = tmp.path("registers.o");
    let second_obj = tmp.path("constants.o");
    compile(&fixture("registers.ll"), triple, &first_obj);
    compile(&fixture("constants.ll"), triple, &second_obj);
    let exe = tmp.path("two-tables");
    // A static, non-PIE executable: the read-only section's absolute relocations are resolved
    // at link time, so the function addresses are real.
    run_ok(
        LLD,
        &[
            "--entry=registers",
            path_str(&first_obj),
            path_str(&second_obj),
            "-o",
            path_str(&exe),
        ],
    );

    let read =
        |p: &Path| fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    let exe_bytes = read(&exe);
    let sizes = [&first_obj, &second_obj].map(|p| stackmap_section(&read(p)).size);
    assert_eq!(
        stackmap_section(&exe_bytes).size,
        sizes[0] + sizes[1],
        "the linked .llvm_stackmaps is not the two input tables back to back"
    );

    let first = text(&readobj(&exe));
    assert!(
        first.contains("Record ID: 18446744073709551615,"),
        "unexpected first table:\n{first}"
    );
    assert!(
        !first.contains("Record ID: 11,"),
        "llvm-readobj printed the second table?\n{first}"
    );

    let got = locus(&exe);
    assert!(
        got.status.success(),
        "`locus stackmap {}` failed ({}):\n{}",
        exe.display(),
        got.status,
        text(&got.stderr)
    );
    let got_text = text(&got.stdout);
    if !got_text.starts_with(&first) {
        panic!(
            "locus does not start with llvm-readobj's text of the first table:\n{}",
            diff(&first, got_text.get(..first.len()).unwrap_or(&got_text))
        );
    }

    // The second table is what llvm-readobj prints for constants.o alone, with the function
    // address the linker gave `constants`.
    let alone = text(&readobj(&second_obj));
    let body_at = alone
        .find("LLVM StackMap Version: 3\n")
        .unwrap_or_else(|| panic!("no table in llvm-readobj output:\n{alone}"));
    let address = elf_symbol(&exe_bytes, "constants");
    assert_ne!(address, 0);
    let second = alone[body_at..].replacen(
        "  Function address: 0, ",
        &format!("  Function address: {address}, "),
        1,
    );
    let rest = &got_text[first.len()..];
    assert!(
        rest.contains(&second),
        "after the first table, locus does not print the second table as expected.\n\
         expected (somewhere after the first table):\n{second}\nlocus printed after the first table:\n{rest}"
    );
    println!("readobj oracle: linked file matched (first table identical, second table printed)");
}

// ---------------------------------------------------------------------------------------------
// Bad input: exit status 1, one `locus: FILE: ...` line mentioning the offset, no panic.
// ---------------------------------------------------------------------------------------------

/// Compiles `fixture` for x86-64 and returns the object's bytes and its stack map section.
fn real_object(tmp: &TempDir, fixture_name: &str) -> (Vec<u8>, ElfSection) {
    let obj = tmp.path(&format!("{}.orig.o", fixture_name.trim_end_matches(".ll")));
    compile(&fixture(fixture_name), "x86_64-linux-gnu", &obj);
    let bytes = fs::read(&obj).unwrap_or_else(|e| panic!("cannot read {}: {e}", obj.display()));
    let section = stackmap_section(&bytes);
    (bytes, section)
}

fn write(tmp: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = tmp.path(name);
    fs::write(&path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

/// The numbers that follow the word "offset" in `line` (after spaces, `:` or `=`), read as
/// hex when written `0x..` and as decimal otherwise.
fn offsets_mentioned(line: &str) -> Vec<u64> {
    let lower = line.to_ascii_lowercase();
    lower
        .match_indices("offset")
        .filter_map(|(i, w)| {
            let rest = lower[i + w.len()..].trim_start_matches([' ', ':', '=']);
            let (digits, radix) = match rest.strip_prefix("0x") {
                Some(hex) => (hex, 16),
                None => (rest, 10),
            };
            let end = digits
                .find(|c: char| !c.is_digit(radix))
                .unwrap_or(digits.len());
            u64::from_str_radix(&digits[..end], radix).ok()
        })
        .collect()
}

/// Runs locus on a damaged file and checks the error contract. `offsets`, when not empty, are
/// offsets from the start of the stack map section of which the message must give one after the
/// word "offset" (counted from the section, or from the start of the file: `section_at` is the
/// section's file offset).
fn expect_error(what: &str, path: &Path, section_at: usize, offsets: &[usize]) {
    let out = locus(path);
    let stderr = text(&out.stderr);
    let context = format!(
        "{what}: `locus stackmap {}` exited with {}\nstdout:\n{}\nstderr:\n{stderr}",
        path.display(),
        out.status,
        text(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "{context}\n(locus panicked)");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{context}\n(expected exit status 1)"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{context}\n(expected exactly one stderr line)"
    );
    let line = lines[0];
    let prefix = format!("locus: {}: ", path.display());
    assert!(
        line.starts_with(&prefix),
        "{context}\n(the line must start with {prefix:?})"
    );
    let mentioned = offsets_mentioned(line);
    assert!(
        !mentioned.is_empty(),
        "{context}\n(the line must give the offset: the word \"offset\" and a number)"
    );
    assert!(
        offsets.is_empty()
            || mentioned.iter().any(|&m| {
                offsets
                    .iter()
                    .any(|&o| m == o as u64 || m == (section_at + o) as u64)
            }),
        "{context}\n(the line must give one of the offsets {offsets:?})"
    );
}

#[test]
fn bad_truncated_section() {
    let tmp = TempDir::new("truncated");
    let (orig, sec) = real_object(&tmp, "registers.ll");
    // Shrink the section's sh_size: first into the 16-byte header, then into the last record.
    for (name, size) in [("header", 12usize), ("record", sec.size - 12)] {
        let mut bytes = orig.clone();
        bytes[sec.header + 32..sec.header + 40].copy_from_slice(&(size as u64).to_le_bytes());
        let path = write(&tmp, &format!("truncated-{name}.o"), &bytes);
        expect_error(
            &format!("section truncated inside the {name}"),
            &path,
            sec.offset,
            &[],
        );
    }
}

#[test]
fn bad_version_byte() {
    let tmp = TempDir::new("version");
    let (orig, sec) = real_object(&tmp, "registers.ll");
    for version in [2u8, 4, 0xff] {
        let mut bytes = orig.clone();
        bytes[sec.offset] = version;
        let path = write(&tmp, &format!("version-{version}.o"), &bytes);
        expect_error(&format!("version byte {version}"), &path, sec.offset, &[0]);
    }
}

#[test]
fn bad_num_records_too_large() {
    let tmp = TempDir::new("numrecords");
    let (orig, sec) = real_object(&tmp, "registers.ll");
    for count in [1000u32, u32::MAX] {
        let mut bytes = orig.clone();
        bytes[sec.offset + 12..sec.offset + 16].copy_from_slice(&count.to_le_bytes());
        let path = write(&tmp, &format!("numrecords-{count}.o"), &bytes);
        expect_error(&format!("NumRecords = {count}"), &path, sec.offset, &[]);
    }
}

#[test]
fn bad_constant_index_out_of_range() {
    let tmp = TempDir::new("constindex");
    let (orig, sec) = real_object(&tmp, "constants.ll");
    let section = &orig[sec.offset..sec.offset + sec.size];
    let (loc, num_constants) = first_constant_index_location(section);
    for index in [num_constants, u32::MAX] {
        let mut bytes = orig.clone();
        let at = sec.offset + loc + 8; // the location's Offset field holds the index
        bytes[at..at + 4].copy_from_slice(&index.to_le_bytes());
        let path = write(&tmp, &format!("constindex-{index}.o"), &bytes);
        expect_error(
            &format!("ConstantIndex {index} with NumConstants {num_constants}"),
            &path,
            sec.offset,
            &[loc, loc + 8],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Every machine: `Format:` and `Arch:` as llvm-readobj names them.
// ---------------------------------------------------------------------------------------------

/// LLVM 19's archiver.
const AR: &str = "llvm-ar-19";

/// A stack map with one 32-bit live value, which llc-19 compiles for 32-bit targets too.
const SMALL_STACKMAP: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)
define void @f(i32 %a) {
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 1, i32 0, i32 %a)
  ret void
}
"#;

/// A function and no stack map.
const NO_STACKMAP: &str = "define i32 @f(i32 %a) { ret i32 %a }\n";

/// Every target llc-19 writes a stack map section for (ELF of both classes and byte orders,
/// Mach-O, COFF). The others crash or refuse the intrinsic in LLVM 19.
const STACKMAP_MACHINES: &[&str] = &[
    "x86_64-linux-gnu",
    "x86_64-linux-gnux32",
    "aarch64-linux-gnu",
    "aarch64_be-linux-gnu",
    "powerpc64-linux-gnu",
    "powerpc64le-linux-gnu",
    "powerpc-linux-gnu",
    "powerpcle-linux-gnu",
    "riscv64-linux-gnu",
    "s390x-linux-gnu",
    "i686-apple-macosx",
    "x86_64-apple-macosx",
    "arm64-apple-macosx",
    "arm64_32-apple-watchos",
    "x86_64-pc-windows-msvc",
    "aarch64-pc-windows-msvc",
    "arm64ec-pc-windows-msvc",
];

/// Targets llc-19 writes objects for but no stack maps: their objects without a stack map
/// section still get llvm-readobj's preamble, so their names are checked too. (triple, extra
/// llc arguments)
const PREAMBLE_MACHINES: &[(&str, &[&str])] = &[
    ("i386-linux-gnu", &[]),
    ("i486-elfiamcu", &[]),
    ("arm-linux-gnueabi", &[]),
    ("armeb-linux-gnueabi", &[]),
    ("mips-linux-gnu", &[]),
    ("mipsel-linux-gnu", &[]),
    ("mips64-linux-gnuabi64", &[]),
    ("mips64el-linux-gnuabi64", &[]),
    ("sparc-linux-gnu", &[]),
    ("sparcel-linux-gnu", &[]),
    ("sparcv9-linux-gnu", &[]),
    ("loongarch32-linux-gnu", &[]),
    ("loongarch64-linux-gnu", &[]),
    ("hexagon-linux", &[]),
    ("bpfel", &[]),
    ("bpfeb", &[]),
    ("avr", &[]),
    ("lanai", &[]),
    ("m68k-linux", &[]),
    ("msp430", &[]),
    ("xtensa", &[]),
    ("ve-linux", &[]),
    ("riscv32-linux-gnu", &[]),
    ("aarch64-linux-gnu_ilp32", &[]),
    ("amdgcn-amd-amdhsa", &[]),
    ("amdgcn-amd-amdhsa", &["-mcpu=gfx942"]),
    ("r600", &["-mcpu=cypress"]),
    ("i686-pc-windows-msvc", &[]),
    ("thumbv7-pc-windows-msvc", &[]),
    ("armv7-apple-ios", &[]),
];

/// Writes `source` to `NAME.ll` in `tmp` and compiles it with llc-19 for `triple`.
fn compile_text(tmp: &TempDir, name: &str, source: &str, triple: &str, extra: &[&str]) -> PathBuf {
    let src = tmp.path(&format!("{name}.ll"));
    fs::write(&src, source).unwrap_or_else(|e| panic!("cannot write {}: {e}", src.display()));
    let obj = tmp.path(&format!("{name}.{triple}{}.o", extra.join("")));
    let mtriple = format!("-mtriple={triple}");
    let mut args = vec![mtriple.as_str(), "-filetype=obj"];
    args.extend_from_slice(extra);
    args.extend([path_str(&src), "-o", path_str(&obj)]);
    run_ok(LLC, &args);
    obj
}

#[test]
fn every_machine_llc_makes_stack_maps_for() {
    let tmp = TempDir::new("machines");
    let mut failures = Vec::new();
    for &triple in STACKMAP_MACHINES {
        let obj = compile_text(&tmp, "small", SMALL_STACKMAP, triple, &[]);
        let expected = readobj(&obj);
        assert!(
            text(&expected).contains("\nLLVM StackMap Version: 3\n"),
            "{triple}: llvm-readobj-19 printed no stack map:\n{}",
            text(&expected)
        );
        if let Err(msg) = check_identical(triple, &obj, &expected, &locus(&obj)) {
            failures.push(msg);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "readobj oracle: {} machines with stack maps matched",
        STACKMAP_MACHINES.len()
    );
}

/// An object without a stack map section: llvm-readobj prints the preamble alone and exits
/// 0; so does locus, on every machine llc-19 writes objects for.
#[test]
fn no_stack_map_section_prints_the_preamble() {
    let tmp = TempDir::new("nosection");
    let mut failures = Vec::new();
    let all = STACKMAP_MACHINES
        .iter()
        .map(|&t| (t, &[][..]))
        .chain(PREAMBLE_MACHINES.iter().copied());
    let mut compared = 0;
    for (triple, extra) in all {
        let obj = compile_text(&tmp, "plain", NO_STACKMAP, triple, extra);
        let expected = readobj(&obj);
        assert!(
            text(&expected).starts_with("\nFile: ") && !text(&expected).contains("StackMap"),
            "{triple}: unexpected llvm-readobj-19 output:\n{}",
            text(&expected)
        );
        let label = format!("{triple} {}", extra.join(" "));
        if let Err(msg) = check_identical(&label, &obj, &expected, &locus(&obj)) {
            failures.push(msg);
        }
        compared += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("readobj oracle: {compared} objects without stack maps matched");
}

/// A static archive: llvm-readobj prints every object member as `ARCHIVE(MEMBER)`, with or
/// without a stack map, of any machine, and skips members that are not objects.
#[test]
fn static_archive_prints_every_member() {
    let tmp = TempDir::new("archive");
    let x86 = tmp.path("registers.o");
    compile(&fixture("registers.ll"), "x86_64-linux-gnu", &x86);
    let rv = compile_text(&tmp, "small", SMALL_STACKMAP, "riscv64-linux-gnu", &[]);
    let plain = compile_text(&tmp, "plain", NO_STACKMAP, "x86_64-linux-gnu", &[]);
    let macho = compile_text(&tmp, "small", SMALL_STACKMAP, "arm64-apple-macosx", &[]);
    let note = write(&tmp, "notes.txt", b"not an object\n");
    let lib = tmp.path("libmixed.a");
    let members = [&x86, &rv, &plain, &note, &macho];
    let mut args = vec!["rc", path_str(&lib)];
    args.extend(members.iter().map(|p| path_str(p)));
    run_ok(AR, &args);

    let expected = readobj(&lib);
    let shown = text(&expected);
    assert_eq!(
        shown.matches("\nFile: ").count(),
        4,
        "llvm-readobj-19 should print the four objects:\n{shown}"
    );
    if let Err(msg) = check_identical("archive", &lib, &expected, &locus(&lib)) {
        panic!("{msg}");
    }

    // No members at all: nothing printed, success.
    let empty = write(&tmp, "empty.a", b"!<arch>\n");
    if let Err(msg) = check_identical("empty archive", &empty, &readobj(&empty), &locus(&empty)) {
        panic!("{msg}");
    }
    println!(
        "readobj oracle: archive of {} members matched",
        members.len()
    );
}

/// Two stack maps in two functions, for the unreadable-section tests.
const TWO_RECORDS: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)
define i64 @g(i64 %a, i64 %b) {
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 7, i32 0, i64 %a, i64 %b)
  ret i64 %a
}
define void @h(i32 %c) {
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 8, i32 4, i32 %c, i32 42)
  ret void
}
"#;

/// `llvm-readobj-19 --stackmap FILE...` where it may warn: (stdout, stderr).
fn readobj_warning(files: &[&Path]) -> (Vec<u8>, String) {
    let mut args = vec!["--stackmap"];
    args.extend(files.iter().map(|p| path_str(p)));
    let out = run(READOBJ, &args);
    assert!(
        out.status.success(),
        "`{READOBJ} {}` failed ({}):\n{}",
        args.join(" "),
        out.status,
        text(&out.stderr)
    );
    (out.stdout, text(&out.stderr))
}

/// A stack map section llvm-readobj cannot read (LLVM 19.1.7's own
/// `test/tools/llvm-readobj/ELF/stackmap.test` makes these with yaml2obj: a section shorter
/// than the header, a version other than 3, a section past the end of the file) gets a warning
/// from llvm-readobj after the preamble, exit 0; locus prints the same preamble, then its
/// error line, exit 1. In a linked file whose second table is damaged, llvm-readobj prints the
/// first table (it reads no other): locus prints it too before its error. Given several files
/// at once, both print the same text for all of them.
#[test]
fn unreadable_section_leaves_llvm_readobjs_text() {
    let tmp = TempDir::new("unreadable");
    let triple = "x86_64-linux-gnu";
    let good = compile_text(&tmp, "two", TWO_RECORDS, triple, &[]);
    let orig = fs::read(&good).unwrap_or_else(|e| panic!("cannot read {}: {e}", good.display()));
    let sec = stackmap_section(&orig);
    let set = |bytes: &mut Vec<u8>, at: usize, v: &[u8]| bytes[at..at + v.len()].copy_from_slice(v);

    let mut damaged: Vec<(&str, Vec<u8>)> = Vec::new();
    for version in [2u8, 4] {
        let mut b = orig.clone();
        b[sec.offset] = version;
        damaged.push((
            if version == 2 {
                "version-2"
            } else {
                "version-4"
            },
            b,
        ));
    }
    for (name, size) in [("size-0", 0u64), ("size-15", 15)] {
        let mut b = orig.clone();
        set(&mut b, sec.header + 32, &size.to_le_bytes());
        damaged.push((name, b));
    }
    let mut b = orig.clone();
    let past_end = (orig.len() + 0x100) as u64;
    set(&mut b, sec.header + 24, &past_end.to_le_bytes());
    damaged.push(("past-the-end", b));

    // A linked file whose second table has version 4.
    let other = compile_text(&tmp, "small", SMALL_STACKMAP, triple, &[]);
    let exe = tmp.path("two-tables");
    run_ok(
        LLD,
        &[
            "--entry=g",
            path_str(&good),
            path_str(&other),
            "-o",
            path_str(&exe),
        ],
    );
    let mut linked =
        fs::read(&exe).unwrap_or_else(|e| panic!("cannot read {}: {e}", exe.display()));
    let linked_sec = stackmap_section(&linked);
    assert!(
        linked_sec.size > sec.size,
        "the linked file has one table only"
    );
    linked[linked_sec.offset + sec.size] = 4;
    damaged.push(("second-table-version-4", linked));

    let mut paths = vec![good.clone()];
    for (name, bytes) in &damaged {
        let path = write(&tmp, &format!("{name}.o"), bytes);
        let (expected, warning) = readobj_warning(&[&path]);
        assert!(
            warning.is_empty() == (*name == "second-table-version-4"),
            "{name}: llvm-readobj-19 warned {warning:?}"
        );
        let got = locus(&path);
        let context = format!(
            "{name}: `locus stackmap {}` exited with {}\nstderr:\n{}",
            path.display(),
            got.status,
            text(&got.stderr)
        );
        assert_eq!(got.status.code(), Some(1), "{context}");
        assert_eq!(text(&got.stderr).lines().count(), 1, "{context}");
        assert!(
            got.stdout == expected,
            "{context}\nstdout differs from llvm-readobj-19's:\n{}",
            diff(&text(&expected), &text(&got.stdout))
        );
        paths.push(path);
    }
    paths.push(good);

    // All at once: the same text, one error line per damaged file.
    let all: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (expected, _) = readobj_warning(&all);
    let mut args = vec!["stackmap"];
    args.extend(all.iter().map(|p| path_str(p)));
    let got = run(LOCUS, &args);
    assert_eq!(got.status.code(), Some(1));
    assert_eq!(text(&got.stderr).lines().count(), damaged.len());
    assert!(
        got.stdout == expected,
        "several files: stdout differs from llvm-readobj-19's:\n{}",
        diff(&text(&expected), &text(&got.stdout))
    );
    println!(
        "readobj oracle: {} unreadable sections print llvm-readobj's text",
        damaged.len()
    );
}
