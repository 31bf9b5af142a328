//! `locus sme`: check LLVM IR against the AArch64 SME streaming-mode and ZA rules.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use locus_sme::attrs::Attrs;
use locus_sme::audit::{audit, AuditReport};
use locus_sme::check::{check_ir, insns, CallReport, FunctionReport, Report};
use locus_sme::rules::{changes_text, Severity};
use serde_json::{json, Value};

use crate::input::Input;
use crate::Failure;

/// The `locus sme` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Check a module and report each function's and call's mode changes.
    ///
    /// For every defined function: its interface, whether its body streams, its ZA and ZT0
    /// state, the mode changes at entry and exit and whether it may be vectorized; for
    /// every call: the changes before it, after it and (for an invoke) after an exception,
    /// whether they are conditional, whether a lazy ZA save or a ZT0 spill and fill is
    /// needed, and whether the call may be inlined or tail-called. The calls LLVM makes for
    /// instructions that are not calls in the IR (memcpy/memset/memmove routines, libm and
    /// compiler-rt routines for `frem`, fp128 arithmetic, `llvm.cos`, i128 division, ...)
    /// are listed too, as `call SYMBOL (libcall for ...)` with the instruction that causes them. Then every broken rule, as `error:` or `warning:`
    /// with its function and instruction. The exit status is 1 when there is an error.
    Check {
        /// The module (.ll or .bc).
        file: PathBuf,
        /// Print one JSON object instead of text:
        /// {"functions": [...], "diagnostics": [{"severity", "function", "message"}]}; a call
        /// LLVM makes for a non-call instruction has "hidden": {"kind", "symbol",
        /// "instruction"} (null for calls in the IR).
        #[arg(long)]
        json: bool,
    },
    /// Audit compiled AArch64 code against the rules.
    ///
    /// Disassembles each function of an ELF object (smstart/smstop, msr/mrs of SVCR and
    /// TPIDR2_EL0, bl/b/blr, zero {za}, ZT0 ldr/str, the tbz/tbnz mode tests) and compares
    /// each call site, function entry and exit and exception landing pad with what the
    /// rules require for the caller's and callee's attributes: from the IR given with
    /// --ir, else from --attrs, else what LLVM 19 knows by name (an object records no SME
    /// attributes; other functions count as normal, private ZA). Reports each departure
    /// (a missing or unexpected mode change, a missing smstart at a landing pad, a lazy ZA
    /// save missing, not restored or not committed, ZT0 not preserved, a forbidden tail
    /// call) with function, offset and instruction. The code is followed along its
    /// branches at any optimization level: the mode tests LLVM emits are decided (also when
    /// unoptimized code spills the mode to the stack and reloads it), and a call to a
    /// function that never returns (noreturn in the IR, or abort, exit, __cxa_throw,
    /// _Unwind_Resume, ...) ends a path. The exit status is 1 when there is a departure.
    Audit {
        /// The object (.o, or a linked ELF file).
        object: PathBuf,
        /// The module the object was compiled from (.ll or .bc), for the attributes of
        /// functions and call sites.
        #[arg(long)]
        ir: Option<PathBuf>,
        /// A function's attributes, NAME=ATTR,ATTR,... (ATTR: streaming,
        /// streaming-compatible, locally-streaming, new_za, inout_za, in_zt0, ... or a full
        /// aarch64_* name); repeatable; wins over --ir.
        #[arg(long = "attrs", value_name = "NAME=ATTRS")]
        attrs: Vec<String>,
        /// Print one JSON object instead of text: {"functions": [{"name", "source",
        /// "attributes", "calls", "landing_pads"}], "departures": [{"kind", "function",
        /// "offset", "instruction", "message"}]}.
        #[arg(long)]
        json: bool,
    },
}

/// `--attrs NAME=ATTR,ATTR,...`: a function's name and the attributes given for it.
fn attrs_arg(spec: &str) -> Result<(String, Attrs), String> {
    let (name, list) = spec.split_once('=').ok_or("expected NAME=ATTR,ATTR,...")?;
    let attrs = Attrs::parse_list(list).map_err(|e| match e {
        locus_sme::Error::Attrs { message, .. } => message,
        other => other.to_string(),
    })?;
    Ok((name.trim().to_string(), attrs))
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

/// Runs a `locus sme` subcommand.
pub fn run_command(command: &Command, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Check { file, json } => {
            let bytes = input.read(file).map_err(fail)?;
            let report = check_ir(&file.display().to_string(), bytes).map_err(fail)?;
            if *json {
                let text = serde_json::to_string_pretty(&to_json(&report)).map_err(fail)?;
                writeln!(out, "{text}").map_err(fail)?;
            } else {
                write_text(&report, out).map_err(fail)?;
            }
            if report.has_errors() {
                Err(Failure::Reported)
            } else {
                Ok(())
            }
        }
        Command::Audit {
            object,
            ir,
            attrs,
            json,
        } => {
            let data = input.read(object).map_err(fail)?;
            let ir_bytes = match ir {
                Some(p) => Some((p.display().to_string(), input.read(p).map_err(fail)?)),
                None => None,
            };
            let mut given = HashMap::new();
            for spec in attrs {
                let (name, a) =
                    attrs_arg(spec).map_err(|m| fail(format!("--attrs {spec}: {m}")))?;
                given.insert(name, a);
            }
            let report = audit(
                &object.display().to_string(),
                &data,
                ir_bytes.as_ref().map(|(n, b)| (n.as_str(), b.as_slice())),
                &given,
            )
            .map_err(fail)?;
            if *json {
                let text = serde_json::to_string_pretty(&audit_json(&report)).map_err(fail)?;
                writeln!(out, "{text}").map_err(fail)?;
            } else {
                write_audit_text(&report, out).map_err(fail)?;
            }
            if report.departures.is_empty() {
                Ok(())
            } else {
                Err(Failure::Reported)
            }
        }
    }
}

/// The audit as the JSON object of `locus sme audit --json`.
#[must_use]
pub fn audit_json(report: &AuditReport) -> Value {
    let functions: Vec<Value> = report
        .functions
        .iter()
        .map(|f| {
            json!({
                "name": f.name,
                "source": f.source.as_str(),
                "attributes": f.attrs.names(),
                "calls": f.calls,
                "landing_pads": f.landing_pads,
            })
        })
        .collect();
    let departures: Vec<Value> = report
        .departures
        .iter()
        .map(|d| {
            json!({
                "kind": d.kind.as_str(),
                "function": d.function,
                "offset": d.offset,
                "instruction": d.instruction,
                "message": d.message,
            })
        })
        .collect();
    json!({"functions": functions, "departures": departures})
}

fn write_audit_text(report: &AuditReport, out: &mut dyn Write) -> std::io::Result<()> {
    for f in &report.functions {
        let names = f.attrs.names();
        writeln!(
            out,
            "@{}: {} ({}); {} call(s), {} landing pad(s)",
            f.name,
            if names.is_empty() {
                "no SME attributes".to_string()
            } else {
                names.join(" ")
            },
            f.source.as_str(),
            f.calls,
            f.landing_pads
        )?;
    }
    for d in &report.departures {
        writeln!(
            out,
            "departure: @{}+{:#x} `{}`: {}",
            d.function, d.offset, d.instruction, d.message
        )?;
    }
    writeln!(
        out,
        "{} function(s), {} departure(s)",
        report.functions.len(),
        report.departures.len()
    )
}

/// The report as the JSON object of `locus sme check --json`.
#[must_use]
pub fn to_json(report: &Report) -> Value {
    let functions: Vec<Value> = report.functions.iter().map(function_json).collect();
    let diagnostics: Vec<Value> = report
        .diagnostics
        .iter()
        .map(|d| {
            json!({
                "severity": d.severity.as_str(),
                "function": d.function,
                "message": d.full_message(),
            })
        })
        .collect();
    json!({"functions": functions, "diagnostics": diagnostics})
}

fn function_json(f: &FunctionReport) -> Value {
    let m = &f.model;
    let calls: Vec<Value> = f.calls.iter().map(call_json).collect();
    json!({
        "name": f.name,
        "interface": m.interface.as_str(),
        "locally_streaming": m.locally_streaming,
        "za": m.za.as_str(),
        "zt0": m.zt0.as_str(),
        "entry": insns(&m.entry),
        "exit": insns(&m.exit),
        "vectorize": m.vectorize,
        "calls": calls,
    })
}

fn call_json(c: &CallReport) -> Value {
    let m = &c.model;
    let hidden = c.hidden.as_ref().map(|h| {
        json!({
            "kind": h.kind.as_str(),
            "symbol": h.symbol,
            "instruction": c.instruction,
        })
    });
    json!({
        "callee": c.callee,
        "instruction": c.instruction,
        "hidden": hidden,
        "before": insns(&m.before),
        "after": insns(&m.after),
        "after_exception": insns(&m.after_exception),
        "conditional": m.conditional,
        "lazy_za_save": m.lazy_za_save,
        "zt0_spill_fill": m.preserve_zt0,
        "za_off_around_call": m.disable_za,
        "inline": m.inline,
        "tail_call": m.tail_call,
    })
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The text report of `locus sme check` (also shown by the tour).
pub(crate) fn write_text(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    for f in &report.functions {
        let m = &f.model;
        writeln!(
            out,
            "@{}: {} interface{}, ZA {}, ZT0 {}, vectorize {}",
            f.name,
            m.interface,
            if m.locally_streaming {
                ", locally streaming"
            } else {
                ""
            },
            m.za,
            m.zt0,
            yes(m.vectorize)
        )?;
        if !m.entry.is_empty() || !m.exit.is_empty() {
            writeln!(
                out,
                "  entry: {}; exit: {}",
                changes_text(&m.entry),
                changes_text(&m.exit)
            )?;
        }
        for c in &f.calls {
            writeln!(out, "  {c}")?;
        }
    }
    for d in &report.diagnostics {
        writeln!(out, "{}: @{}: {}", d.severity, d.function, d.full_message())?;
    }
    let errors = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = report.diagnostics.len() - errors;
    writeln!(out, "{errors} error(s), {warnings} warning(s)")
}
