//! llc-19's assembly and the model, as sequences of events: what the llc oracle
//! (`llc_oracle.rs`) and the run on LLVM's own tests (`llvm_tests.rs`) compare.

use locus_sme::attrs::{State, ABI_ROUTINES};
use locus_sme::check::Report;
use locus_sme::rules::{Change, Insn, When};

/// The routines llc-19 calls itself (around mode changes, in prologues, for lazy saves);
/// the asm side leaves them out.
pub const LLC_OWN_CALLS: [&str; 4] = [
    "__arm_sme_state",
    "__arm_tpidr2_save",
    "__arm_tpidr2_restore",
    "__arm_get_current_vg",
];

/// One event in a function's code, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A mode change; `Some(sm)` when a test of PSTATE.SM guards it so that it runs only
    /// when PSTATE.SM was `sm`.
    Mode(Insn, Option<bool>),
    /// A call to a non-ABI function.
    Call(String),
    /// `msr TPIDR2_EL0, xN`: a lazy save set up.
    LazySetup,
    /// `msr TPIDR2_EL0, xzr`: no lazy save any more (seen only by [`asm_events_with_resets`]).
    LazyReset,
    /// `bl __arm_tpidr2_restore`.
    Restore,
    /// `bl __arm_tpidr2_save`: a pending lazy save committed.
    Commit,
    /// `zero {za}`.
    ZeroZa,
    /// `zero { zt0 }`.
    ZeroZt0,
    /// `str zt0, [...]`: ZT0 spilled around a call.
    SpillZt0,
    /// `ldr zt0, [...]`: ZT0 filled after a call.
    FillZt0,
}

/// The events of function `name` in llc's assembly.
pub fn asm_events(asm: &str, name: &str) -> Vec<Event> {
    asm_events_with_resets(asm, name)
        .into_iter()
        .filter(|e| *e != Event::LazyReset)
        .collect()
}

/// [`asm_events`] with the resets of TPIDR2_EL0.
pub fn asm_events_with_resets(asm: &str, name: &str) -> Vec<Event> {
    let start = format!("{name}:");
    let mut lines = asm.lines().skip_while(|l| !l.starts_with(&start)).skip(1);
    let mut events = Vec::new();
    let mut prev = String::new();
    for line in lines.by_ref() {
        let line = line.split("//").next().unwrap_or("").trim();
        if line.starts_with(".Lfunc_end") {
            break;
        }
        if line.is_empty() || line.ends_with(':') || line.starts_with('.') {
            continue;
        }
        let mut words = line.split_whitespace();
        let op = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        let guard = match prev.as_str() {
            "tbz" => Some(true),
            "tbnz" => Some(false),
            _ => None,
        };
        match (op, rest.first().copied()) {
            ("smstart", Some("sm")) => events.push(Event::Mode(Insn::SmstartSm, guard)),
            ("smstop", Some("sm")) => events.push(Event::Mode(Insn::SmstopSm, guard)),
            ("smstart", Some("za")) => events.push(Event::Mode(Insn::SmstartZa, guard)),
            ("smstop", Some("za")) => events.push(Event::Mode(Insn::SmstopZa, guard)),
            ("smstart" | "smstop", _) => panic!("{name}: unexpected `{line}`"),
            ("bl", Some("__arm_tpidr2_restore")) => events.push(Event::Restore),
            ("blr", _) => events.push(Event::Call("(indirect)".into())),
            ("bl", Some("__arm_tpidr2_save")) => events.push(Event::Commit),
            ("bl", Some(f)) if !LLC_OWN_CALLS.contains(&f) => events.push(Event::Call(f.into())),
            // A tail call (libcalls in tail position are tail-called without a `tail` mark).
            ("b", Some(f)) if !f.starts_with('.') => events.push(Event::Call(f.into())),
            ("msr", Some("TPIDR2_EL0,")) if rest.get(1) != Some(&"xzr") => {
                events.push(Event::LazySetup)
            }
            ("msr", Some("TPIDR2_EL0,")) => events.push(Event::LazyReset),
            ("str", Some("zt0,")) => events.push(Event::SpillZt0),
            ("ldr", Some("zt0,")) => events.push(Event::FillZt0),
            // `zero {za}` zeroes all of ZA; `zero {za0.d, ...}` only tiles (a body's own).
            ("zero", _) if line.split_whitespace().collect::<String>() == "zero{za}" => {
                events.push(Event::ZeroZa)
            }
            ("zero", _) if line.contains("zt0") => events.push(Event::ZeroZt0),
            _ => {}
        }
        prev = op.to_string();
    }
    events
}

pub fn mode(c: &Change) -> Event {
    Event::Mode(
        c.insn,
        match c.when {
            When::Always => None,
            When::IfSmWas(sm) => Some(sm),
        },
    )
}

/// The events the model predicts for function `name` (after-exception changes are
/// compared separately).
pub fn model_events(report: &Report, name: &str) -> Vec<Event> {
    let f = report.function(name).unwrap();
    let mut ev = Vec::new();
    // A locally streaming function starts streaming first; then a new-ZA/ZT0 body
    // commits a pending lazy save and turns ZA on.
    ev.extend(f.model.entry.iter().filter(|c| c.insn.is_sm()).map(mode));
    if f.model.commit_lazy_save {
        // Departure (extra work): LLVM 19 treats its own `__arm_tpidr2_save` call in a
        // new-ZT0 function as a call that must preserve ZT0, though ZT0 is not live yet.
        let zt0 = f.model.zt0 == State::New;
        if zt0 {
            ev.push(Event::SpillZt0);
        }
        ev.push(Event::Commit);
        if zt0 {
            ev.push(Event::FillZt0);
        }
    }
    ev.extend(f.model.entry.iter().filter(|c| !c.insn.is_sm()).map(mode));
    if f.model.zero_za {
        ev.push(Event::ZeroZa);
    }
    if f.model.zero_zt0 {
        ev.push(Event::ZeroZt0);
    }
    for c in &f.calls {
        // The routines LLVM knows by name are called by llc itself too; the asm side skips
        // them.
        // A call the IR makes itself to a routine llc also calls is seen on the asm side
        // as what llc's own call would be.
        if ABI_ROUTINES.contains(&c.callee.as_str()) {
            assert!(c.model.before.is_empty() && c.model.after.is_empty());
            match c.callee.as_str() {
                "__arm_tpidr2_save" => ev.push(Event::Commit),
                "__arm_tpidr2_restore" => ev.push(Event::Restore),
                _ => {}
            }
            continue;
        }
        // The lazy save is set up (in IR, by LLVM's SME ABI pass) before the call's own
        // mode changes.
        if c.model.lazy_za_save {
            ev.push(Event::LazySetup);
        }
        if c.model.preserve_zt0 {
            ev.push(Event::SpillZt0);
        }
        ev.extend(c.model.before.iter().map(mode));
        let callee = if c.callee.starts_with("(indirect") {
            "(indirect)".to_string()
        } else {
            c.callee.clone()
        };
        // `__arm_get_current_vg` called by the IR: the asm side cannot tell it from llc's
        // own call (in a prologue), and leaves both out.
        if !LLC_OWN_CALLS.contains(&callee.as_str()) {
            ev.push(Event::Call(callee));
        }
        ev.extend(c.model.after.iter().map(mode));
        if c.model.preserve_zt0 {
            ev.push(Event::FillZt0);
        }
        if c.model.lazy_za_save {
            ev.push(Event::Restore);
        }
    }
    ev.extend(f.model.exit.iter().map(mode));
    ev
}

/// The events with the calls' names sorted in place: LLVM schedules calls that are not part
/// of a chain freely (spec 004 §2, "Unchained Function calls"), so the several calls one
/// instruction makes (`fcmp one`, `llvm.fptosi.sat`, a vector split into lanes) come in
/// no fixed order; what surrounds each call is still compared position by position.
pub fn calls_sorted(mut events: Vec<Event>) -> Vec<Event> {
    let mut names: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Call(n) => Some(n.clone()),
            _ => None,
        })
        .collect();
    names.sort();
    let mut names = names.into_iter();
    for e in &mut events {
        if let Event::Call(n) = e {
            *n = names.next().unwrap();
        }
    }
    events
}

/// The events as a lazy save and a ZT0 spill mean them, not where the scheduler puts them:
/// each call is marked with whether a lazy save is set up while it runs (TPIDR2_EL0 set
/// and not reset since), and the ZT0 spills are counted instead of placed. LLVM 19 emits
/// the TPIDR2_EL0 set-up and reset and the ZT0 spills of the calls one instruction makes
/// (a vector split into lanes, `fcmp one`) as unchained nodes: one set-up serves them all
/// and the spills are hoisted together; every call still runs with the lazy save in place
/// and is followed by its own fill and restore.
pub fn as_meant(events: Vec<Event>, model: bool) -> (Vec<Event>, usize) {
    let mut out = Vec::new();
    let mut lazy = false;
    let mut spills = 0;
    for e in events {
        match e {
            Event::LazySetup => lazy = true,
            // The model sets a lazy save up again before each call; llc resets TPIDR2_EL0
            // only at the end of a sequence.
            Event::LazyReset => lazy = false,
            // In the model each lazy save ends with its restore.
            Event::Restore if model => {
                lazy = false;
                out.push(Event::Restore);
            }
            Event::SpillZt0 => spills += 1,
            Event::Call(n) if lazy => out.push(Event::Call(format!("{n} (lazy save)"))),
            e => out.push(e),
        }
    }
    (out, spills)
}
