//! `locus stackmap --json` and `--lookup`, and the command's behaviour as a command: help,
//! several files, files without stack maps.
//!
//! The JSON is checked against llvm-readobj-19's text for every fixture; lookups are checked
//! against the symbol table of an executable linked by ld.lld-19.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use serde_json::Value;

const TRIPLES: &[&str] = &["x86_64-linux-gnu", "aarch64-linux-gnu"];

fn locus_with(args: &[&str]) -> std::process::Output {
    Command::new(LOCUS)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

fn json_of(obj: &Path) -> Value {
    let out = locus_with(&["stackmap", "--json", path_str(obj)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

/// What llvm-readobj's text says about one record: ID, offset, location kinds, live-outs.
#[derive(Debug, PartialEq)]
struct TextRecord {
    id: u64,
    offset: u64,
    kinds: Vec<String>,
    live_outs: usize,
}

fn records_from_readobj(text: &str) -> Vec<TextRecord> {
    let mut out: Vec<TextRecord> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Record ID: ") {
            let (id, off) = rest
                .split_once(", instruction offset: ")
                .unwrap_or_else(|| panic!("{t}"));
            out.push(TextRecord {
                id: id.parse().unwrap_or_else(|e| panic!("{t}: {e}")),
                offset: off.parse().unwrap_or_else(|e| panic!("{t}: {e}")),
                kinds: Vec::new(),
                live_outs: 0,
            });
        } else if let (Some(r), Some(loc)) = (out.last_mut(), t.strip_prefix('#')) {
            if let Some((_, what)) = loc.split_once(": ") {
                if let Some(kind) = what.split_whitespace().next() {
                    r.kinds.push(kind.trim_end_matches(',').to_string());
                }
            }
        } else if let (Some(r), Some((n, _))) = (out.last_mut(), t.split_once(" live-outs: ")) {
            r.live_outs = n.parse().unwrap_or_else(|e| panic!("{t}: {e}"));
        }
    }
    out
}

fn records_from_json(doc: &Value) -> Vec<TextRecord> {
    let mut out = Vec::new();
    for table in doc["files"][0]["tables"]
        .as_array()
        .unwrap_or_else(|| panic!("no tables: {doc}"))
    {
        for r in table["records"]
            .as_array()
            .unwrap_or_else(|| panic!("no records"))
        {
            out.push(TextRecord {
                id: r["id"].as_u64().unwrap_or_else(|| panic!("id: {r}")),
                offset: r["instruction_offset"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("offset: {r}")),
                kinds: r["locations"]
                    .as_array()
                    .unwrap_or_else(|| panic!("locations: {r}"))
                    .iter()
                    .map(|l| l["kind"].as_str().unwrap_or("?").to_string())
                    .collect(),
                live_outs: r["live_outs"].as_array().map_or(usize::MAX, Vec::len),
            });
        }
    }
    out
}

#[test]
fn json_agrees_with_readobj_for_every_fixture() {
    let tmp = TempDir::new("json");
    let mut compared = 0;
    for src in fixtures() {
        for triple in TRIPLES {
            let obj = tmp.path(&format!("{}-{triple}.o", stem(&src)));
            compile(&src, triple, &obj);
            let theirs = records_from_readobj(&text(&readobj(&obj)));
            let doc = json_of(&obj);
            let ours = records_from_json(&doc);
            assert!(
                !theirs.is_empty(),
                "{}: readobj shows no records",
                obj.display()
            );
            assert_eq!(ours, theirs, "{}", obj.display());
            compared += ours.len();
        }
    }
    println!("json oracle: {compared} records agree with llvm-readobj-19");
}

/// Two functions with stack maps and one without, linked into a static executable so the
/// function addresses in the section are the symbols' addresses.
const LINKED: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)
define void @ext(i64 %x) { ret void }
define i64 @alpha(i64 %a) {
  call void @ext(i64 %a)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 10, i32 0, i64 %a)
  call void @ext(i64 %a)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 11, i32 0, i64 %a, i64 99)
  ret i64 %a
}
define i64 @beta(i64 %b) {
  call void @ext(i64 %b)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 10, i32 0, i64 %b)
  ret i64 %b
}
"#;

fn linked(tmp: &TempDir) -> std::path::PathBuf {
    let src = tmp.path("linked.ll");
    std::fs::write(&src, LINKED).unwrap_or_else(|e| panic!("{e}"));
    let obj = tmp.path("linked.o");
    compile(&src, "x86_64-linux-gnu", &obj);
    let exe = tmp.path("linked");
    run_ok(
        LLD,
        &["--entry=alpha", path_str(&obj), "-o", path_str(&exe)],
    );
    exe
}

#[test]
fn lookup_finds_each_record_at_symbol_plus_offset() {
    let tmp = TempDir::new("lookup");
    let exe = linked(&tmp);
    let bytes = std::fs::read(&exe).unwrap_or_else(|e| panic!("{e}"));
    let (alpha, beta) = (elf_symbol(&bytes, "alpha"), elf_symbol(&bytes, "beta"));
    let theirs = records_from_readobj(&text(&readobj(&exe)));
    // Records follow the function order: alpha has two, beta one.
    let expected = [(alpha, &theirs[0]), (alpha, &theirs[1]), (beta, &theirs[2])];
    for (function, record) in expected {
        let address = function + record.offset;
        let arg = format!("{address:#x}");
        let out = locus_with(&["stackmap", "--lookup", &arg, path_str(&exe)]);
        assert!(out.status.success(), "{arg}: {}", text(&out.stderr));
        let shown = text(&out.stdout);
        assert!(
            shown.contains(&format!("Record ID: {}", record.id)),
            "{arg}: {shown}"
        );
        assert!(
            shown.contains(&format!("function {function:#x}")),
            "{arg}: {shown}"
        );

        // The same through JSON, and shifted by a load bias.
        let bias = 0x5555_0000_0000u64;
        let biased = format!("{:#x}", address + bias);
        let bias_arg = format!("{bias:#x}");
        let out = locus_with(&[
            "stackmap",
            "--json",
            "--load-bias",
            &bias_arg,
            "--lookup",
            &biased,
            path_str(&exe),
        ]);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
        let found = &doc["files"][0]["records"];
        assert_eq!(found.as_array().map(Vec::len), Some(1), "{doc}");
        assert_eq!(found[0]["record"]["id"].as_u64(), Some(record.id));
        assert_eq!(found[0]["record"]["address"].as_u64(), Some(address + bias));
    }

    // Several addresses at once, in the order given: a repeated option or a list. One with
    // no record among them: the others are printed, then exit 1 naming it.
    let addresses: Vec<String> = expected
        .iter()
        .map(|(f, r)| format!("{:#x}", f + r.offset))
        .collect();
    let list = format!("{},0x1,{}", addresses[2], addresses[0]);
    let out = locus_with(&[
        "stackmap",
        "--lookup",
        &list,
        "--lookup",
        &addresses[1],
        path_str(&exe),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let shown = text(&out.stdout);
    let headers: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("record(s) at"))
        .collect();
    let order = [&addresses[2], &addresses[0], &addresses[1]];
    assert_eq!(headers.len(), order.len(), "{shown}");
    for (header, address) in headers.iter().zip(order) {
        assert!(header.ends_with(&format!(" at {address}")), "{shown}");
    }
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.ends_with("no stack map record at 0x1\n"), "{err}");
    let all = addresses.join(",");
    let out = locus_with(&["stackmap", "--json", "--lookup", &all, path_str(&exe)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<Option<u64>> = (0..3)
        .map(|i| doc["files"][i]["records"][0]["record"]["id"].as_u64())
        .collect();
    let want: Vec<Option<u64>> = expected.iter().map(|(_, r)| Some(r.id)).collect();
    assert_eq!(ids, want, "{doc}");

    // An address with no record: exit 1, one line naming the file and the address.
    let out = locus_with(&["stackmap", "--lookup", "0x1", path_str(&exe)]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("locus: {}: ", exe.display())) && err.contains("0x1"),
        "{err}"
    );
}

/// In a relocatable object every function address in the section is a relocation; lookups
/// apply them, so each function is at its symbol's offset in `.text`.
#[test]
fn lookup_in_a_relocatable_object() {
    let tmp = TempDir::new("lookup-o");
    let src = tmp.path("linked.ll");
    std::fs::write(&src, LINKED).unwrap_or_else(|e| panic!("{e}"));
    let obj = tmp.path("linked.o");
    compile(&src, "x86_64-linux-gnu", &obj);
    let bytes = std::fs::read(&obj).unwrap_or_else(|e| panic!("{e}"));
    let beta = elf_symbol(&bytes, "beta");
    assert_ne!(beta, 0, "beta should not be the first function in .text");
    let theirs = records_from_readobj(&text(&readobj(&obj)));
    let address = format!("{:#x}", beta + theirs[2].offset);
    let out = locus_with(&["stackmap", "--lookup", &address, path_str(&obj)]);
    assert!(out.status.success(), "{address}: {}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains(&format!("function {beta:#x}, Record ID: {}", theirs[2].id)),
        "{shown}"
    );
}

#[test]
fn several_files_one_missing() {
    let tmp = TempDir::new("several");
    let good = tmp.path("good.o");
    compile(&fixture("registers.ll"), "x86_64-linux-gnu", &good);
    let no_section = tmp.path("plain.o");
    let plain = tmp.path("plain.ll");
    std::fs::write(&plain, "define i64 @f(i64 %a) { ret i64 %a }\n")
        .unwrap_or_else(|e| panic!("{e}"));
    compile(&plain, "x86_64-linux-gnu", &no_section);
    let missing = tmp.path("missing.o");
    let out = locus_with(&[
        "stackmap",
        path_str(&no_section),
        path_str(&good),
        path_str(&missing),
    ]);
    assert_eq!(out.status.code(), Some(1));
    // A file without a stack map section gets llvm-readobj's preamble alone (no error); the
    // good file is printed in full; both exactly as llvm-readobj prints them.
    let expected = text(&readobj(&no_section)) + &text(&readobj(&good));
    assert_eq!(text(&out.stdout), expected);
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with(&format!("locus: {}: ", missing.display())),
        "{err}"
    );
    assert!(!err.contains("panicked"));

    // A lookup needs records: there, a file without a section is an error.
    let out = locus_with(&["stackmap", "--lookup", "0x10", path_str(&no_section)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no stack map section"),
        "{}",
        text(&out.stderr)
    );
}

/// `--lookup` over a process: the same executable loaded twice at different biases, plus a
/// second one. Each address is answered by the module whose code holds it; a miss names the
/// nearest record below it.
#[test]
fn lookup_over_modules_of_a_process() {
    let tmp = TempDir::new("process");
    let exe = linked(&tmp);
    let copy = tmp.path("linked-copy");
    std::fs::copy(&exe, &copy).unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&exe).unwrap_or_else(|e| panic!("{e}"));
    let (alpha, beta) = (elf_symbol(&bytes, "alpha"), elf_symbol(&bytes, "beta"));
    let theirs = records_from_readobj(&text(&readobj(&exe)));
    let (first_bias, second_bias) = (0x10_0000_0000u64, 0x20_0000_0000u64);
    let modules = [
        format!("{}@{first_bias:#x}", exe.display()),
        format!("{}@{second_bias:#x}", copy.display()),
    ];
    let module_args = |lookups: &str, json: bool| {
        let mut a = vec!["stackmap".to_string()];
        if json {
            a.push("--json".into());
        }
        for m in &modules {
            a.extend(["--module".to_string(), m.clone()]);
        }
        a.extend(["--lookup".to_string(), lookups.to_string()]);
        a
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        locus_with(&refs)
    };

    // beta's record in the second module, alpha's second record in the first.
    let in_second = second_bias + beta + theirs[2].offset;
    let in_first = first_bias + alpha + theirs[1].offset;
    let out = run(module_args(&format!("{in_second:#x},{in_first:#x}"), false));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let headers: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("record(s) at"))
        .collect();
    assert_eq!(headers.len(), 2, "{shown}");
    assert!(
        headers[0].starts_with(&format!(
            "{} (load bias {second_bias:#x}): 1 record(s) at {in_second:#x}",
            copy.display()
        )),
        "{shown}"
    );
    assert!(
        headers[1].starts_with(&format!(
            "{} (load bias {first_bias:#x}): 1 record(s) at {in_first:#x}",
            exe.display()
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "function {:#x}, Record ID: {}",
            second_bias + beta,
            theirs[2].id
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "function {:#x}, Record ID: {}",
            first_bias + alpha,
            theirs[1].id
        )),
        "{shown}"
    );

    // The same in JSON: which module answered.
    let out = run(module_args(&format!("{in_second:#x},{in_first:#x}"), true));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let lookups = &doc["lookups"];
    assert_eq!(
        lookups[0]["module"].as_str(),
        Some(path_str(&copy)),
        "{doc}"
    );
    assert_eq!(
        lookups[0]["records"][0]["record"]["id"].as_u64(),
        Some(theirs[2].id)
    );
    assert_eq!(lookups[1]["module"].as_str(), Some(path_str(&exe)), "{doc}");
    assert_eq!(lookups[1]["load_bias"].as_u64(), Some(first_bias));

    // A miss inside the first module's code, just after alpha's second record: the line
    // names that record (module, function, offset); one outside every module names the
    // nearest record below it in any module.
    let miss = in_first + 1;
    let out = run(module_args(&format!("{miss:#x},{:#x}", u64::MAX), false));
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].contains(&format!(
            "no stack map record at {miss:#x} (in {})",
            exe.display()
        )) && lines[0].contains(&format!(
            "{} function {:#x} + {}, Record ID: {}",
            exe.display(),
            first_bias + alpha,
            theirs[1].offset,
            theirs[1].id
        )),
        "{err}"
    );
    assert!(
        lines[1].contains("(in no module's code)")
            && lines[1].contains(&format!(
                "{} function {:#x} + {}, Record ID: {}",
                copy.display(),
                second_bias + beta,
                theirs[2].offset,
                theirs[2].id
            )),
        "{err}"
    );
    let out = run(module_args(&format!("{miss:#x}"), true));
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let near = &doc["lookups"][0]["nearest_before"];
    assert_eq!(near["module"].as_str(), Some(path_str(&exe)), "{doc}");
    assert_eq!(near["id"].as_u64(), Some(theirs[1].id), "{doc}");
    assert_eq!(near["function_address"].as_u64(), Some(first_bias + alpha));

    // Below every record: the miss says so.
    let out = run(module_args("0x1", false));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no record before it"),
        "{}",
        text(&out.stderr)
    );

    // --module needs --lookup, and a malformed one is a usage error.
    for bad in [
        vec!["stackmap", "--module", modules[0].as_str()],
        vec!["stackmap", "--module", "nobias", "--lookup", "1"],
    ] {
        let out = locus_with(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
}

#[test]
fn help_names_the_subcommands_and_options() {
    let out = locus_with(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for word in ["stackmap", "tour"] {
        assert!(help.contains(word), "{help}");
    }
    let out = locus_with(&["stackmap", "--help"]);
    let help = text(&out.stdout);
    for word in [
        "--json",
        "--lookup",
        "--load-bias",
        "--lenient",
        "--module",
        "llvm-readobj",
    ] {
        assert!(help.contains(word), "{help}");
    }
    // No file: a usage error, not a panic.
    let out = locus_with(&["stackmap"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!text(&out.stderr).contains("panicked"));
}
