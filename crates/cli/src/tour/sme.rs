//! Chapter: AArch64 SME streaming mode and ZA.
//!
//! Input: a small module (embedded below) with a caller of every kind calling a normal
//! function, a streaming-compatible ZA function, a new-ZA function, and one with the old
//! ZA spelling of spec 004. Locus shows each function's and call's mode changes, then
//! compiles the module with `llc-19 -mtriple=aarch64-linux-gnu -mattr=+sme` and checks
//! that the `smstart`/`smstop` instructions, in order and with their PSTATE.SM tests, and
//! the lazy-save set-up are exactly where the model put them; and shows that LLVM 19
//! ignores the old spelling, as the model's warning says.

use locus_sme::check::{check_ir, Report};
use locus_sme::rules::{Change, When};

use super::{tool, Tour};
use crate::Failure;

const SAMPLE: &str = r#"declare float @normal(float)
declare float @streaming(float) "aarch64_pstate_sm_enabled"

define float @from_normal(float %x) {
  %r = call float @streaming(float %x) "aarch64_pstate_sm_enabled"
  ret float %r
}

define float @from_streaming(float %x) "aarch64_pstate_sm_enabled" {
  %r = call float @normal(float %x)
  ret float %r
}

define float @from_compatible(float %x) "aarch64_pstate_sm_compatible" "aarch64_inout_za" {
  %r = call float @normal(float %x)
  ret float %r
}

define float @locally_streaming(float %x) "aarch64_pstate_sm_body" "aarch64_pstate_sm_compatible" {
  %r = call float @normal(float %x)
  ret float %r
}

define float @new_za(float %x) "aarch64_new_za" {
  %r = call float @normal(float %x)
  ret float %r
}

define float @old_spelling(float %x) "aarch64_pstate_za_shared" {
  %r = call float @normal(float %x)
  ret float %r
}
"#;

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

/// One mode change or call, as the model predicts it and as it is read from llc's output:
/// the instruction (`smstart sm`, …), `?1`/`?0` when guarded by a test that runs it only
/// when PSTATE.SM was 1/0, `call @f`, or `lazy save` for a TPIDR2_EL0 set-up.
fn model_events(report: &Report, name: &str) -> Vec<String> {
    let show = |c: &Change| match c.when {
        When::Always => c.insn.as_str().to_string(),
        When::IfSmWas(sm) => format!("{} ?{}", c.insn, u8::from(sm)),
    };
    let Some(f) = report.function(name) else {
        return Vec::new();
    };
    let mut ev: Vec<String> = f.model.entry.iter().map(show).collect();
    for c in &f.calls {
        if c.model.lazy_za_save {
            ev.push("lazy save".into());
        }
        ev.extend(c.model.before.iter().map(show));
        ev.push(format!("call @{}", c.callee));
        ev.extend(c.model.after.iter().map(show));
    }
    ev.extend(f.model.exit.iter().map(show));
    ev
}

fn asm_events(asm: &str, name: &str) -> Vec<String> {
    let start = format!("{name}:");
    let mut ev = Vec::new();
    let mut prev = "";
    for line in asm.lines().skip_while(|l| !l.starts_with(&start)).skip(1) {
        let line = line.split("//").next().unwrap_or("").trim();
        if line.starts_with(".Lfunc_end") {
            break;
        }
        if line.is_empty() || line.ends_with(':') || line.starts_with('.') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let op = words.first().copied().unwrap_or("");
        let arg = words.get(1).copied().unwrap_or("");
        let guard = match prev {
            "tbz" => " ?1",
            "tbnz" => " ?0",
            _ => "",
        };
        match op {
            "smstart" | "smstop" => ev.push(format!("{op} {arg}{guard}")),
            "bl" if !arg.starts_with("__arm_") => ev.push(format!("call @{arg}")),
            "msr" if arg == "TPIDR2_EL0," && words.get(2) != Some(&"xzr") => {
                ev.push("lazy save".into());
            }
            _ => {}
        }
        prev = op;
    }
    ev
}

pub fn run_chapter(tour: &mut Tour<'_>) -> Result<(), Failure> {
    tour.line("Input: callers of every kind (normal, streaming, streaming-compatible with ZA,")?;
    tour.line("  locally streaming and compatible, new ZA, old ZA spelling) each calling a")?;
    tour.line("  function with float arguments and results.")?;
    let report = check_ir("sme.ll", SAMPLE).map_err(fail)?;
    tour.line("")?;
    tour.line("The model (locus sme check):")?;
    let mut text = Vec::new();
    crate::sme::write_text(&report, &mut text).map_err(fail)?;
    for line in String::from_utf8_lossy(&text).lines() {
        tour.line(format!("  {line}"))?;
    }

    let sample = tour.scratch_file("sme.ll");
    std::fs::write(&sample, SAMPLE).map_err(|e| fail(format!("{}: {e}", sample.display())))?;
    let shown = sample.display().to_string();
    let asm = tool(
        "llc-19",
        &[
            "-mtriple=aarch64-linux-gnu",
            "-mattr=+sme",
            "-o",
            "-",
            &shown,
        ],
        None,
    )?;
    tour.line("")?;
    tour.line("llc-19 -mtriple=aarch64-linux-gnu -mattr=+sme, mode changes read back (?1: runs only if PSTATE.SM was 1):")?;
    let mut matched = 0;
    for f in &report.functions {
        let want = model_events(&report, &f.name);
        let got = asm_events(&asm, &f.name);
        tour.line(format!("  @{}: {}", f.name, got.join(", ")))?;
        if f.name == "old_spelling" {
            // LLVM 19 ignores `aarch64_pstate_za_shared`: no lazy save.
            if got.iter().any(|e| e == "lazy save") || !want.iter().any(|e| e == "lazy save") {
                return Err(fail(format!(
                    "@old_spelling: expected the model's lazy save and none from LLVM 19, got {got:?}"
                )));
            }
            continue;
        }
        if want != got {
            return Err(fail(format!(
                "@{}: the model says {want:?}, llc-19 emitted {got:?}",
                f.name
            )));
        }
        matched += 1;
    }
    tour.passed(format!(
        "llc-19 places every smstart/smstop, mode test and lazy save where the model does ({matched} functions)"
    ))?;
    tour.passed(
        "LLVM 19 ignores the old spelling `aarch64_pstate_za_shared` (no lazy save), as the warning says",
    )?;
    Ok(())
}
