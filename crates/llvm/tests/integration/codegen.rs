//! Code generation checked against LLVM's own tools: an object emitted in process must
//! carry the same `.llvm_stackmaps` section, as `llvm-readobj-19 --stackmap` prints it, as
//! the object `llc-19 -filetype=obj -relocation-model=pic` makes from the same IR.

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::process::Command;

use locus_llvm::{emit_assembly, emit_object, Context, Error, Module};

type TestResult = Result<(), Box<dyn StdError>>;

const STACKMAPS: &str = include_str!("../../fixtures/stackmaps.ll");

/// `e_machine` values of the ELF targets tested.
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

/// The header fields and section names of a little-endian ELF64 file; `None` if the bytes
/// are not one or a header points outside them.
struct Elf {
    machine: u16,
    sections: Vec<String>,
}

fn read_elf(bytes: &[u8]) -> Option<Elf> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| {
        let v = u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?);
        usize::try_from(v).ok()
    };
    // Magic, ELFCLASS64, ELFDATA2LSB.
    if bytes.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let machine = u16_at(0x12)?;
    let shoff = u64_at(0x28)?;
    let shentsize = usize::from(u16_at(0x3a)?);
    let shnum = usize::from(u16_at(0x3c)?);
    let shstrndx = usize::from(u16_at(0x3e)?);
    let header = |index: usize| shoff.checked_add(index.checked_mul(shentsize)?);
    let strtab = u64_at(header(shstrndx)? + 0x18)?;
    let mut sections = Vec::with_capacity(shnum);
    for index in 0..shnum {
        let name_at = strtab.checked_add(usize::try_from(u32_at(header(index)?)?).ok()?)?;
        let rest = bytes.get(name_at..)?;
        let len = rest.iter().position(|&b| b == 0)?;
        sections.push(String::from_utf8_lossy(&rest[..len]).into_owned());
    }
    Some(Elf { machine, sections })
}

/// A file under Cargo's per-target scratch directory, unique to this test and triple.
fn scratch(test: &str, triple: &str, suffix: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "locus-llvm-{test}-{triple}-{}{suffix}",
        std::process::id()
    ))
}

/// Runs an LLVM tool and returns its standard output; a missing tool or a failure is an
/// error that says which command it was.
fn run(tool: &str, args: &[&str]) -> Result<String, Box<dyn StdError>> {
    let output = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {tool} (install llvm-19): {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{tool} {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// `llvm-readobj-19 --stackmap` of an object file, without the `File:` line (the only one
/// that names the path).
fn readobj_stackmap(object: &Path) -> Result<String, Box<dyn StdError>> {
    let path = object.to_str().ok_or("non-UTF-8 scratch path")?;
    let text = run("llvm-readobj-19", &["--stackmap", path])?;
    Ok(text
        .lines()
        .filter(|line| !line.trim_start().starts_with("File:"))
        .map(|line| format!("{line}\n"))
        .collect())
}

/// Emits the fixture for `triple` in process, checks the ELF and its sections, and compares
/// the stack map with the one from `llc-19`'s object.
fn stackmaps_match_llc(triple: &str, machine: u16) -> TestResult {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "stackmaps.ll", STACKMAPS)?;
    module.verify()?;
    let object = emit_object(&module, triple, "", "")?;

    let elf = read_elf(&object).ok_or("the object is not a little-endian ELF64 file")?;
    assert_eq!(elf.machine, machine, "e_machine for {triple}");
    assert!(
        elf.sections.iter().any(|name| name == ".llvm_stackmaps"),
        "no .llvm_stackmaps section for {triple}; sections: {:?}",
        elf.sections
    );

    let ours = scratch("stackmaps", triple, "-locus.o");
    let ir = scratch("stackmaps", triple, ".ll");
    let theirs = scratch("stackmaps", triple, "-llc.o");
    std::fs::write(&ours, &object)?;
    std::fs::write(&ir, STACKMAPS)?;
    let (ir_path, llc_path) = (
        ir.to_str().ok_or("non-UTF-8 scratch path")?,
        theirs.to_str().ok_or("non-UTF-8 scratch path")?,
    );
    run(
        "llc-19",
        &[
            &format!("-mtriple={triple}"),
            "-filetype=obj",
            "-relocation-model=pic",
            "-o",
            llc_path,
            ir_path,
        ],
    )?;

    let expected = readobj_stackmap(&theirs)?;
    let actual = readobj_stackmap(&ours)?;
    for path in [&ours, &ir, &theirs] {
        std::fs::remove_file(path)?;
    }
    assert!(
        expected.contains("Num Records: 3") && expected.contains("Record ID: 2"),
        "unexpected llc stack map:\n{expected}"
    );
    assert_eq!(actual, expected, "stack maps differ for {triple}");
    Ok(())
}

#[test]
fn x86_64_stackmaps_match_llc() -> TestResult {
    stackmaps_match_llc("x86_64-linux-gnu", EM_X86_64)
}

#[test]
fn aarch64_stackmaps_match_llc() -> TestResult {
    stackmaps_match_llc("aarch64-linux-gnu", EM_AARCH64)
}

#[test]
fn emitting_leaves_the_module_unchanged() -> TestResult {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "stackmaps.ll", STACKMAPS)?;
    let before = module.print();
    emit_object(&module, "aarch64-linux-gnu", "", "")?;
    assert_eq!(module.print(), before);
    assert_eq!(module.target_triple(), "");
    Ok(())
}

#[test]
fn assembly_names_the_functions_and_the_section() -> TestResult {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "stackmaps.ll", STACKMAPS)?;
    let asm = emit_assembly(&module, "x86_64-linux-gnu", "skylake", "+avx2")?;
    assert!(asm.contains("live_values:"), "{asm}");
    assert!(asm.contains(".llvm_stackmaps"), "{asm}");
    let asm = emit_assembly(&module, "aarch64-linux-gnu", "neoverse-v1", "")?;
    assert!(asm.contains("constants:"), "{asm}");
    Ok(())
}

#[test]
fn module_queries() -> TestResult {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "stackmaps.ll", STACKMAPS)?;
    assert_eq!(module.name(), "stackmaps.ll");
    assert_eq!(
        module.functions(),
        [
            "llvm.experimental.stackmap",
            "callee",
            "constants",
            "live_values"
        ]
    );
    // The printed text parses back to the same text.
    let again = Module::parse_ir(&ctx, "again.ll", module.print())?;
    again.verify()?;
    assert_eq!(again.functions(), module.functions());
    let clone = module.clone();
    drop(module);
    assert_eq!(clone.functions().len(), 4);
    Ok(())
}

#[test]
fn bitcode_is_accepted_too() -> TestResult {
    // Not a real bitcode file: LLVM must recognise the magic and complain about bitcode.
    let ctx = Context::new();
    match Module::parse_ir(&ctx, "bad.bc", b"BC\xc0\xde\x00\x00") {
        Err(Error::Parse { message }) => assert!(message.contains("bad.bc"), "{message}"),
        other => return Err(format!("expected a parse error, got {other:?}").into()),
    }
    Ok(())
}

#[test]
fn bad_ir_is_a_parse_error_with_the_line() -> TestResult {
    let ctx = Context::new();
    let text = "define i32 @f() {\nentry:\n  %x = frobnicate i32 1, 2\n  ret i32 %x\n}\n";
    match Module::parse_ir(&ctx, "bad.ll", text) {
        Err(Error::Parse { message }) => {
            assert!(message.contains("bad.ll:3:"), "no line 3 in: {message}");
            assert!(message.contains("frobnicate"), "{message}");
        }
        other => return Err(format!("expected a parse error, got {other:?}").into()),
    }
    match Module::parse_ir(&ctx, "nul\0name", "") {
        Err(Error::Parse { message }) => assert!(message.contains("NUL"), "{message}"),
        other => return Err(format!("expected a parse error, got {other:?}").into()),
    }
    Ok(())
}

#[test]
fn invalid_module_is_a_verify_error() -> TestResult {
    // Parses, but %x does not dominate its use in %join.
    let text = r#"
define i32 @f(i1 %c) {
entry:
  br i1 %c, label %then, label %join
then:
  %x = add i32 1, 2
  br label %join
join:
  ret i32 %x
}
"#;
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "invalid.ll", text)?;
    match module.verify() {
        Err(Error::Verify { message }) => {
            assert!(message.contains("dominate"), "{message}")
        }
        other => return Err(format!("expected a verify error, got {other:?}").into()),
    }
    // Code generation verifies first rather than crashing on invalid IR.
    match emit_object(&module, "x86_64-linux-gnu", "", "") {
        Err(Error::Verify { .. }) => Ok(()),
        other => Err(format!("expected a verify error, got {:?}", other.map(|o| o.len())).into()),
    }
}

#[test]
fn unknown_targets_are_target_errors() -> TestResult {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "stackmaps.ll", STACKMAPS)?;
    for triple in ["riscv64-linux-gnu", "nonsense", "x86_64\0linux"] {
        match emit_object(&module, triple, "", "") {
            Err(Error::Target { triple: t, message }) => {
                assert_eq!(t, triple);
                assert!(!message.is_empty());
            }
            other => {
                return Err(format!(
                    "{triple}: expected a target error, got {:?}",
                    other.map(|o| o.len())
                )
                .into())
            }
        }
    }
    Ok(())
}

#[test]
fn cpus_and_features_are_checked() -> TestResult {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "stackmaps.ll", STACKMAPS)?;
    for (triple, cpu, features) in [
        ("x86_64-linux-gnu", "generic", ""),
        ("x86_64-linux-gnu", "x86-64-v3", "+avx2,-sse4a"),
        ("aarch64-linux-gnu", "generic", ""),
        ("aarch64-linux-gnu", "cortex-a72", "+sve,+sme"),
    ] {
        emit_object(&module, triple, cpu, features)?;
    }
    // An unknown x86-64 CPU would make LLVM abort the process; each of these must be an
    // error that names the culprit instead.
    for (triple, cpu, features, culprit) in [
        ("x86_64-linux-gnu", "notacpu", "", "notacpu"),
        ("aarch64-linux-gnu", "skylake", "", "skylake"),
        ("x86_64-linux-gnu", "", "+bogus", "bogus"),
        ("x86_64-linux-gnu", "", "avx2", "avx2"),
        ("aarch64-linux-gnu", "", "+avx2", "avx2"),
    ] {
        match emit_object(&module, triple, cpu, features) {
            Err(Error::Target { message, .. }) => {
                assert!(message.contains(culprit), "{message}")
            }
            other => {
                return Err(format!(
                    "{triple} {cpu} {features}: expected a target error, got {:?}",
                    other.map(|o| o.len())
                )
                .into())
            }
        }
    }
    Ok(())
}

#[test]
fn codegen_errors_are_returned_not_fatal() -> TestResult {
    // Valid IR, but the inline assembly does not assemble: LLVM reports it through the
    // context's diagnostic handler, which would otherwise exit the process.
    let text = r#"
define void @f() {
  call void asm sideeffect "not_an_instruction %eax", ""()
  ret void
}
"#;
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "asm.ll", text)?;
    module.verify()?;
    match emit_object(&module, "x86_64-linux-gnu", "", "") {
        Err(Error::Codegen { message }) => {
            assert!(
                message.contains("invalid instruction mnemonic 'not_an_instruction'"),
                "{message}"
            )
        }
        other => {
            return Err(
                format!("expected a codegen error, got {:?}", other.map(|o| o.len())).into(),
            )
        }
    }
    // The context is still usable afterwards.
    let module = Module::parse_ir(&ctx, "stackmaps.ll", STACKMAPS)?;
    emit_object(&module, "x86_64-linux-gnu", "", "")?;
    Ok(())
}

#[test]
fn errors_display_their_message() {
    let error = Error::Target {
        triple: "riscv64".into(),
        message: "no target\n".into(),
    };
    assert_eq!(
        error.to_string(),
        "no target machine for `riscv64`: no target"
    );
}
