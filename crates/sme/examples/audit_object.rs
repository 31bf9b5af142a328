//! An auditor checking a compiled SME object: does the code switch PSTATE.SM and save ZA
//! where the SME rules say it must?
//!
//! Builds a small C file with SME ACLE attributes into an AArch64 object (and its IR, which
//! carries the attributes: an ELF object records none) with
//! `clang-19 --target=aarch64-linux-gnu -march=armv9-a+sme -O2`, then audits it twice:
//! 1. with the attributes from the IR: clang's code keeps every rule, so nothing is reported;
//! 2. with the IR of the same source where `scale` is declared `__arm_streaming`, as if the
//!    object had been built against an old header that lacked the attribute: `apply` calls
//!    `scale` without the `smstart sm` it needs, and the audit says where.
//!
//! Run: `cargo run -p locus-sme --example audit_object`. Exits 1 if either audit does not
//! find what it should, 2 if clang-19 is missing or fails.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, ExitCode, Stdio};

use locus_sme::audit::{audit, AuditReport};

/// Streaming code, a ZA user and a normal caller of a function the header says is normal.
const SOURCE: &str = r#"
void scale(float *v, int n);                        /* the header: a normal function */
float dot(const float *a, const float *b, int n) __arm_streaming_compatible;
void accumulate(void) __arm_inout("za");

__arm_locally_streaming float locally(const float *a, int n) {
  return dot(a, a, n);                              /* body streams, dot is compatible */
}

float streaming_caller(const float *a, int n) __arm_streaming {
  return dot(a, a, n) + 1.0f;
}

__arm_new("za") void fresh_za(void) {
  accumulate();                                     /* ZA shared with the callee */
}

void apply(float *v, int n) {
  scale(v, n);                                      /* no mode change: scale is normal */
}
"#;

/// Runs clang-19 on `source` with `extra` options, returning what it writes.
fn clang(source: &str, extra: &[&str]) -> Result<Vec<u8>, String> {
    let mut child = Command::new("clang-19")
        .args(["--target=aarch64-linux-gnu", "-march=armv9-a+sme", "-O2"])
        .args(["-ffreestanding", "-x", "c", "-", "-o", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run clang-19 ({e}); scripts/install-deps installs it"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(source.as_bytes())
            .map_err(|e| format!("clang-19: writing the source: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("clang-19: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "clang-19 {extra:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

/// Prints each function and departure of `report`.
fn print(title: &str, report: &AuditReport) {
    println!("{title}:");
    for f in &report.functions {
        let attrs = f.attrs.names();
        println!(
            "  {:<17} {} call site(s), attributes from {}: {}",
            f.name,
            f.calls,
            f.source.as_str(),
            if attrs.is_empty() {
                "none".to_string()
            } else {
                attrs.join(" ")
            }
        );
    }
    for d in &report.departures {
        println!(
            "  DEPARTURE {} in {}+{:#x} `{}`: {}",
            d.kind.as_str(),
            d.function,
            d.offset,
            d.instruction,
            d.message
        );
    }
    if report.departures.is_empty() {
        println!("  no departures");
    }
}

fn main() -> ExitCode {
    // The header as it should have been: `scale` streams.
    let fixed = SOURCE.replace(
        "void scale(float *v, int n);",
        "void scale(float *v, int n) __arm_streaming;",
    );
    let built = clang(SOURCE, &["-c"]).and_then(|object| {
        let ir = clang(SOURCE, &["-S", "-emit-llvm"])?;
        let fixed_ir = clang(&fixed, &["-S", "-emit-llvm"])?;
        Ok((object, ir, fixed_ir))
    });
    let (object, ir, fixed_ir) = match built {
        Ok(built) => built,
        Err(e) => {
            eprintln!("audit_object: {e}");
            return ExitCode::from(2);
        }
    };

    // 1. The attributes as the compiler saw them: from the IR.
    let clean = match audit("sme.o", &object, Some(("sme.ll", &ir)), &HashMap::new()) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("audit_object: {e}");
            return ExitCode::FAILURE;
        }
    };
    print("audit with the IR's attributes", &clean);

    // 2. The same object against the IR of the right header: the call to `scale` needs
    // `smstart sm` before it and `smstop sm` after it.
    let broken = match audit(
        "sme.o",
        &object,
        Some(("fixed.ll", &fixed_ir)),
        &HashMap::new(),
    ) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("audit_object: {e}");
            return ExitCode::FAILURE;
        }
    };
    print(
        "audit against the IR where scale is __arm_streaming",
        &broken,
    );

    let caught = broken.departures.iter().any(|d| d.function == "apply");
    if clean.departures.is_empty() && caught && clean.functions.len() == 4 {
        println!("ok: clang's code keeps the rules; the missing smstart in apply is found");
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "audit_object: expected 4 functions and no departure, then one in apply; got {} \
             functions, {} and {} departures",
            clean.functions.len(),
            clean.departures.len(),
            broken.departures.len()
        );
        ExitCode::FAILURE
    }
}
