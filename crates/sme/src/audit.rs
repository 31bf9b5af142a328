//! The audit of compiled code (`locus sme audit`): what each function's entry and exit
//! and each call site in an AArch64 object actually do ([`crate::objfile`]), compared with
//! what the rules require ([`crate::rules`]) for the attributes of the caller and callee,
//! taken from the IR when it is given, else from `--attrs`, else from what LLVM 19 knows by
//! name (an ELF object records no SME attributes; everything else is a normal function
//! with private ZA).
//!
//! The code is read in address order and cut at each call to a function that is not an
//! SME ABI routine LLVM calls itself ([`LLVM_OWN_CALLS`]). Between two such calls the
//! mode changes must contain, in order, those after the first and before the second (the
//! entry changes before the first call, the exit changes before each `ret`), and no
//! other change; a change right after `tbz`/`tbnz` on bit 0 is conditional on PSTATE.SM as
//! LLVM expands it. A landing pad (from the exception call-site table) must make the
//! "after exception" changes of its call. A call needing a lazy ZA save must find
//! TPIDR2_EL0 pointing at a block (`msr TPIDR2_EL0, xN`, N not `xzr`) and be followed by
//! `__arm_tpidr2_restore`; a new-ZA body must commit a pending save (`__arm_tpidr2_save`)
//! before `smstart za` and zero ZA; ZT0 must be stored before and loaded after a call
//! that does not share it. Code reached only by branches is read where it is laid out,
//! so the audit is exact for the straight-line call sequences LLVM emits and approximate
//! across control flow.

use std::collections::HashMap;

use locus_llvm::{Context, Module};

use crate::a64::{Op, Svcr, SysReg};
use crate::attrs::{self, Attrs, Interface};
use crate::check::{self, CallReport, Report};
use crate::objfile::{self, CodeFunction, Instruction};
use crate::rules::{self, CallModel, Change, Insn, When};
use crate::Error;

/// The routines LLVM calls itself around mode changes, in prologues and for lazy saves:
/// calls to them do not cut the code into call sites.
pub const LLVM_OWN_CALLS: [&str; 4] = [
    attrs::ABI_ROUTINES[0],
    attrs::ABI_ROUTINES[1],
    attrs::ABI_ROUTINES[2],
    attrs::ROUTINES_NEEDING_ATTRS[1],
];

/// Added to a departure in a function with spec 004's old ZA spellings, which the model
/// reads with their meaning and LLVM 19 ignores.
pub const OLD_SPELLING_NOTE: &str = " (the function has spec 004's old ZA spelling, which \
     LLVM 19 ignores: use aarch64_inout_za and the like)";

/// What kind of departure from the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A required mode change (`smstart`/`smstop`, possibly conditional) is missing.
    MissingChange,
    /// A mode change the rules do not ask for (for example around a streaming-compatible
    /// callee).
    UnexpectedChange,
    /// A landing pad lacks the spec's "after exception" change.
    LandingPad,
    /// A call needing a lazy ZA save runs without TPIDR2_EL0 set up.
    LazySaveMissing,
    /// A lazy save set up for a call is not restored after it.
    LazySaveNotRestored,
    /// A new-ZA function does not commit its caller's pending lazy save.
    LazySaveNotCommitted,
    /// ZT0 is not stored before or not loaded after a call that does not share it.
    Zt0NotPreserved,
    /// A new-ZA (new-ZT0) function does not zero ZA (ZT0).
    NotZeroed,
    /// A tail call where the rules need code after the call.
    TailCall,
}

impl Kind {
    /// A short name (the JSON report's `kind`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::MissingChange => "missing-mode-change",
            Kind::UnexpectedChange => "unexpected-mode-change",
            Kind::LandingPad => "landing-pad",
            Kind::LazySaveMissing => "lazy-save-missing",
            Kind::LazySaveNotRestored => "lazy-save-not-restored",
            Kind::LazySaveNotCommitted => "lazy-save-not-committed",
            Kind::Zt0NotPreserved => "zt0-not-preserved",
            Kind::NotZeroed => "not-zeroed",
            Kind::TailCall => "tail-call",
        }
    }
}

/// One departure, with its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure {
    /// What kind.
    pub kind: Kind,
    /// The function.
    pub function: String,
    /// Byte offset of the instruction from the function's start.
    pub offset: u64,
    /// The instruction there, disassembled (with its call target).
    pub instruction: String,
    /// What is wrong.
    pub message: String,
}

/// Where a function's attributes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The IR given with `--ir`.
    Ir,
    /// `--attrs` on the command line.
    CommandLine,
    /// Neither: what LLVM 19 knows by name, else a normal private-ZA function.
    Default,
}

impl Source {
    /// `ir`, `attrs` or `default`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Ir => "ir",
            Source::CommandLine => "attrs",
            Source::Default => "default",
        }
    }
}

/// One audited function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionAudit {
    /// Its name.
    pub name: String,
    /// The attributes it was audited with.
    pub attrs: Attrs,
    /// Where they came from.
    pub source: Source,
    /// The call sites checked (calls to [`LLVM_OWN_CALLS`] left out).
    pub calls: usize,
    /// The landing pads checked.
    pub landing_pads: usize,
}

/// The result of an audit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditReport {
    /// Every function of the object, in address order.
    pub functions: Vec<FunctionAudit>,
    /// Every departure, by function and offset.
    pub departures: Vec<Departure>,
}

/// Reads `NAME=ATTR,ATTR,...` (`--attrs`): each ATTR an SME attribute name
/// ([`attrs::ALL_NAMES`]) with or without its `aarch64_` prefix, or `streaming`,
/// `streaming-compatible`, `locally-streaming`.
///
/// # Errors
/// [`Error::Attrs`] naming the unknown attribute or the missing `=`.
pub fn parse_attrs_arg(spec: &str) -> Result<(String, Attrs), Error> {
    let bad = |message: String| Error::Attrs {
        spec: spec.to_string(),
        message,
    };
    let (name, list) = spec
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=ATTR,ATTR,...".to_string()))?;
    let mut a = Attrs::default();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let full = match item {
            "streaming" => attrs::SM_ENABLED.to_string(),
            "streaming-compatible" => attrs::SM_COMPATIBLE.to_string(),
            "locally-streaming" => attrs::SM_BODY.to_string(),
            _ if item.starts_with("aarch64_") => item.to_string(),
            _ => format!("aarch64_{item}"),
        };
        if !a.add(&full) {
            return Err(bad(format!(
                "`{item}` is not an SME attribute (one of {}, or streaming, \
                 streaming-compatible, locally-streaming)",
                attrs::ALL_NAMES.join(", ")
            )));
        }
    }
    Ok((name.trim().to_string(), a))
}

/// What the IR says: each function's attributes and each defined function's calls.
struct IrInfo {
    attrs: HashMap<String, Attrs>,
    report: Report,
}

fn read_ir(name: &str, ir: &[u8]) -> Result<IrInfo, Error> {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, name, ir).map_err(|source| Error::Llvm {
        file: name.to_string(),
        source,
    })?;
    let attrs = module
        .function_list()
        .into_iter()
        .map(|f| (f.name(), check::function_attrs(f)))
        .collect();
    Ok(IrInfo {
        attrs,
        report: check::check_module(&module),
    })
}

/// Audits the object `data` (named `file`), with the IR `ir` (name, bytes) when given and
/// the attributes of `--attrs` (which win over the IR's).
///
/// # Errors
/// [`Error::Object`] when the object cannot be read, [`Error::Llvm`] when the IR cannot.
pub fn audit(
    file: &str,
    data: &[u8],
    ir: Option<(&str, &[u8])>,
    given: &HashMap<String, Attrs>,
) -> Result<AuditReport, Error> {
    let functions = objfile::read_functions(file, data)?;
    let ir = ir.map(|(n, b)| read_ir(n, b)).transpose()?;
    let lookup = |name: &str| -> (Attrs, Source) {
        let known = Attrs::known_routine(name).unwrap_or_default();
        if let Some(a) = given.get(name) {
            return (a.combine_llvm19(&known), Source::CommandLine);
        }
        if let Some(a) = ir.as_ref().and_then(|i| i.attrs.get(name)) {
            return (a.combine_llvm19(&known), Source::Ir);
        }
        (known, Source::Default)
    };
    let mut report = AuditReport::default();
    for f in &functions {
        let (caller, source) = lookup(&f.name);
        let ir_calls = ir
            .as_ref()
            .and_then(|i| i.report.function(&f.name))
            .map(|r| r.calls.as_slice())
            .unwrap_or_default();
        let mut audit = FunctionAuditor::new(f, caller, ir_calls, &lookup);
        audit.run();
        report.functions.push(FunctionAudit {
            name: f.name.clone(),
            attrs: caller,
            source,
            calls: audit.calls.len(),
            landing_pads: f.landing_pads.len(),
        });
        report.departures.extend(audit.departures);
    }
    Ok(report)
}

/// A call site in the code.
struct Site {
    /// Index of the instruction.
    index: usize,
    callee: String,
    tail: bool,
    callee_attrs: Attrs,
    model: CallModel,
    /// The IR's call is one LLVM makes for an instruction (a library call).
    hidden: bool,
}

/// One event of the code that the rules speak about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Change(Change),
    TpidrSet,
    TpidrReset,
    Restore,
    Commit,
    ZeroZa,
    ZeroZt0,
    SpillZt0,
    FillZt0,
    Ret,
}

struct FunctionAuditor<'a> {
    f: &'a CodeFunction,
    caller: Attrs,
    /// (instruction index, event), in address order.
    events: Vec<(usize, Event)>,
    calls: Vec<Site>,
    departures: Vec<Departure>,
}

/// The mode changes of an `smstart`/`smstop` (both for the operand-less forms).
fn changes_of(op: Op, when: When) -> Vec<Change> {
    let (field, sm, za) = match op {
        Op::Smstart(s) => (s, Insn::SmstartSm, Insn::SmstartZa),
        Op::Smstop(s) => (s, Insn::SmstopSm, Insn::SmstopZa),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    if field != Svcr::Za {
        out.push(Change { insn: sm, when });
    }
    if field != Svcr::Sm {
        out.push(Change { insn: za, when });
    }
    out
}

impl<'a> FunctionAuditor<'a> {
    fn new(
        f: &'a CodeFunction,
        caller: Attrs,
        ir_calls: &[CallReport],
        lookup: &dyn Fn(&str) -> (Attrs, Source),
    ) -> FunctionAuditor<'a> {
        let mut used = vec![false; ir_calls.len()];
        let mut events = Vec::new();
        let mut calls = Vec::new();
        let mut prev = Op::Other(0);
        for (index, inst) in f.instructions.iter().enumerate() {
            let guard = match prev {
                Op::Tb {
                    nonzero, bit: 0, ..
                } => When::IfSmWas(!nonzero),
                _ => When::Always,
            };
            prev = inst.op;
            for c in changes_of(inst.op, guard) {
                events.push((index, Event::Change(c)));
            }
            let event = match inst.op {
                Op::Msr(SysReg::Tpidr2, 31) => Some(Event::TpidrReset),
                Op::Msr(SysReg::Tpidr2, _) => Some(Event::TpidrSet),
                Op::ZeroZa => Some(Event::ZeroZa),
                Op::ZeroZt0 => Some(Event::ZeroZt0),
                Op::StrZt0(_) => Some(Event::SpillZt0),
                Op::LdrZt0(_) => Some(Event::FillZt0),
                Op::Ret(_) => Some(Event::Ret),
                _ => None,
            };
            if let Some(e) = event {
                events.push((index, e));
            }
            // `br` is also a jump-table branch: it counts as an indirect tail call only
            // when the IR has an indirect call not yet matched.
            let unmatched_indirect = || {
                ir_calls
                    .iter()
                    .enumerate()
                    .any(|(i, c)| !used[i] && c.callee.starts_with("(indirect"))
            };
            let (callee, tail) = match (inst.op, &inst.target) {
                (Op::Bl(_), Some(t)) => (t.clone(), false),
                (Op::B(_), Some(t)) => (t.clone(), true),
                (Op::Blr(_), _) => ("(indirect)".to_string(), false),
                (Op::Br(_), _) if unmatched_indirect() => ("(indirect)".to_string(), true),
                _ => continue,
            };
            match callee.as_str() {
                "__arm_tpidr2_restore" => events.push((index, Event::Restore)),
                "__arm_tpidr2_save" => events.push((index, Event::Commit)),
                _ => {}
            }
            if LLVM_OWN_CALLS.contains(&callee.as_str()) {
                continue;
            }
            let indirect = callee.starts_with('(');
            let matched = ir_calls.iter().enumerate().position(|(i, c)| {
                !used[i]
                    && if indirect {
                        c.callee.starts_with("(indirect")
                    } else {
                        c.callee == callee
                    }
            });
            let (callee_attrs, hidden) = match matched {
                Some(i) => {
                    used[i] = true;
                    (ir_calls[i].callee_attrs, ir_calls[i].hidden.is_some())
                }
                None if indirect => (Attrs::default(), false),
                None => (lookup(&callee).0, false),
            };
            let invoke = f
                .landing_pads
                .iter()
                .any(|p| (p.start..p.end).contains(&inst.offset));
            calls.push(Site {
                index,
                callee,
                tail,
                callee_attrs,
                model: rules::call_model(&caller, &callee_attrs, invoke),
                hidden,
            });
        }
        FunctionAuditor {
            f,
            caller,
            events,
            calls,
            departures: Vec::new(),
        }
    }

    fn inst(&self, index: usize) -> &Instruction {
        &self.f.instructions[index]
    }

    fn report(&mut self, kind: Kind, index: usize, mut message: String) {
        if self.caller.old_za.any() && kind != Kind::UnexpectedChange {
            message.push_str(OLD_SPELLING_NOTE);
        }
        let inst = &self.f.instructions[index];
        let instruction = match (&inst.op, &inst.target) {
            (Op::Bl(_), Some(t)) => format!("bl {t}"),
            (Op::B(_), Some(t)) => format!("b {t}"),
            (op, _) => op.to_string(),
        };
        self.departures.push(Departure {
            kind,
            function: self.f.name.clone(),
            offset: inst.offset,
            instruction,
            message,
        });
    }

    fn call_name(site: &Site) -> String {
        if site.callee.starts_with('(') {
            "an indirect callee".to_string()
        } else {
            format!("@{}", site.callee)
        }
    }

    fn run(&mut self) {
        let last = self.f.instructions.len();
        if last == 0 {
            return;
        }
        let model = rules::function_model(&self.caller);
        let lp_regions = self.landing_pad_regions();
        let in_lp = |i: usize| lp_regions.iter().any(|&(_, s, e)| (s..e).contains(&i));
        // Gaps between call sites.
        let bounds: Vec<usize> = self.calls.iter().map(|c| c.index).collect();
        for k in 0..=bounds.len() {
            let start = if k == 0 { 0 } else { bounds[k - 1] + 1 };
            let end = bounds.get(k).copied().unwrap_or(last);
            let prev = k.checked_sub(1).map(|i| &self.calls[i]);
            let next = self.calls.get(k);
            let head: Vec<Change> = match prev {
                None => model.entry.clone(),
                Some(p) if p.tail => Vec::new(),
                Some(p) => p.model.after.clone(),
            };
            let tail: Vec<Change> = next.map(|n| n.model.before.clone()).unwrap_or_default();
            let observed: Vec<(usize, Change)> = self
                .events
                .iter()
                .filter(|(i, _)| (start..end).contains(i) && !in_lp(*i))
                .filter_map(|&(i, e)| match e {
                    Event::Change(c) => Some((i, c)),
                    _ => None,
                })
                .collect();
            let rets: Vec<usize> = self
                .events
                .iter()
                .filter(|(i, e)| (start..end).contains(i) && *e == Event::Ret)
                .map(|&(i, _)| i)
                .collect();
            self.check_gap(&head, &tail, &observed, start, end, k, &rets, &model.exit);
        }
        self.check_calls();
        self.check_entry(&model);
        for (call, start, end) in lp_regions {
            let want = self.calls[call].model.after_exception.clone();
            let got: Vec<Change> = self
                .events
                .iter()
                .filter(|(i, _)| (start..end).contains(i))
                .filter_map(|&(_, e)| match e {
                    Event::Change(c) => Some(c),
                    _ => None,
                })
                .collect();
            for c in missing(&want, &got) {
                let name = Self::call_name(&self.calls[call]);
                let offset = self.inst(self.calls[call].index).offset;
                self.report(
                    Kind::LandingPad,
                    start,
                    format!(
                        "missing `{c}` at the exception landing pad of the call to {name} at \
                         +{offset:#x} (spec 004 §2, \"After exception\")"
                    ),
                );
            }
        }
    }

    /// Landing pads: (call site index, first instruction, end) where the region ends at
    /// the first call site, `ret` or unconditional branch.
    fn landing_pad_regions(&self) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for pad in &self.f.landing_pads {
            let Some(call) = self
                .calls
                .iter()
                .position(|c| (pad.start..pad.end).contains(&self.inst(c.index).offset))
            else {
                continue;
            };
            let Some(start) = self.f.instructions.iter().position(|i| i.offset == pad.pad) else {
                continue;
            };
            let end = (start..self.f.instructions.len())
                .find(|&i| {
                    matches!(self.inst(i).op, Op::Ret(_) | Op::B(_) | Op::Br(_))
                        || self.calls.iter().any(|c| c.index == i)
                })
                .unwrap_or(self.f.instructions.len());
            out.push((call, start, end));
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn check_gap(
        &mut self,
        head: &[Change],
        tail: &[Change],
        observed: &[(usize, Change)],
        start: usize,
        end: usize,
        k: usize,
        rets: &[usize],
        exit: &[Change],
    ) {
        let got: Vec<Change> = observed.iter().map(|&(_, c)| c).collect();
        let want: Vec<Change> = head.iter().chain(tail).copied().collect();
        let at = end.min(self.f.instructions.len() - 1);
        let prev = k.checked_sub(1).map(|i| Self::call_name(&self.calls[i]));
        let next = self.calls.get(k).map(Self::call_name);
        let missing_idx = missing_indices(&want, &got);
        for i in missing_idx {
            let c = want[i];
            let place = if i < head.len() {
                match &prev {
                    Some(p) => format!("after the call to {p}"),
                    None => "at the function's entry".to_string(),
                }
            } else {
                format!(
                    "before the call to {}",
                    next.clone().unwrap_or_else(|| "?".into())
                )
            };
            let index = if i < head.len() { start.min(at) } else { at };
            self.report(
                Kind::MissingChange,
                index,
                format!("missing `{c}` {place} (spec 004 §2)"),
            );
        }
        for &r in rets {
            let before: Vec<Change> = observed
                .iter()
                .filter(|(i, _)| *i < r)
                .map(|&(_, c)| c)
                .collect();
            for c in missing(exit, &before) {
                self.report(
                    Kind::MissingChange,
                    r,
                    format!("missing `{c}` before the function returns (spec 004 §2)"),
                );
            }
        }
        let allowed = |c: &Change| want.contains(c) || (!rets.is_empty() && exit.contains(c));
        // Only PSTATE.SM changes are judged unexpected: ZA is also turned on and off by
        // the body itself (`llvm.aarch64.sme.za.enable`/`disable`).
        for &(i, c) in observed {
            if allowed(&c) || !c.insn.is_sm() {
                continue;
            }
            let compatible = |site: Option<&Site>| {
                site.is_some_and(|s| s.callee_attrs.interface() == Interface::StreamingCompatible)
            };
            let prev_site = k.checked_sub(1).map(|j| &self.calls[j]);
            let next_site = self.calls.get(k);
            let message = if c.insn.is_sm() && (compatible(prev_site) || compatible(next_site)) {
                let name = if compatible(next_site) {
                    next.clone()
                } else {
                    prev.clone()
                };
                format!(
                    "mode change `{c}` around a call to streaming-compatible {} (spec 004 §2: \
                     no change for a streaming-compatible callee)",
                    name.unwrap_or_default()
                )
            } else {
                format!("`{c}` where the rules require no such change (spec 004 §2)")
            };
            self.report(Kind::UnexpectedChange, i, message);
        }
    }

    fn check_calls(&mut self) {
        let mut tpidr_set = false;
        let mut e = 0;
        for k in 0..self.calls.len() {
            let index = self.calls[k].index;
            let prev_end = k.checked_sub(1).map_or(0, |j| self.calls[j].index + 1);
            let next_start = self
                .calls
                .get(k + 1)
                .map_or(self.f.instructions.len(), |c| c.index);
            let mut spilled = false;
            while e < self.events.len() && self.events[e].0 < index {
                match self.events[e].1 {
                    Event::TpidrSet => tpidr_set = true,
                    Event::TpidrReset => tpidr_set = false,
                    Event::SpillZt0 if self.events[e].0 >= prev_end => spilled = true,
                    _ => {}
                }
                e += 1;
            }
            let site = &self.calls[k];
            let name = Self::call_name(site);
            let after = |ev: Event| {
                self.events
                    .iter()
                    .any(|&(i, x)| i > index && i < next_start && x == ev)
            };
            let mut found = Vec::new();
            if site.model.lazy_za_save && !tpidr_set {
                let note = if site.hidden {
                    " (a library call LLVM makes for an instruction: LLVM 19 sets the lazy \
                     save up for only some of these, see `locus sme check`)"
                } else {
                    ""
                };
                found.push((
                    Kind::LazySaveMissing,
                    format!(
                        "lazy ZA save missing: {name} has a private ZA interface but \
                         TPIDR2_EL0 does not point at a TPIDR2 block at the call{note}"
                    ),
                ));
            }
            if site.model.lazy_za_save && !site.tail && !after(Event::Restore) {
                found.push((
                    Kind::LazySaveNotRestored,
                    format!("lazy ZA save not restored: no `__arm_tpidr2_restore` after the call to {name}"),
                ));
            }
            if site.model.preserve_zt0 && !spilled {
                found.push((
                    Kind::Zt0NotPreserved,
                    format!("ZT0 not preserved: no `str zt0` before the call to {name}, which does not share ZT0"),
                ));
            }
            if site.model.preserve_zt0 && !site.tail && !after(Event::FillZt0) {
                found.push((
                    Kind::Zt0NotPreserved,
                    format!("ZT0 not preserved: no `ldr zt0` after the call to {name}, which does not share ZT0"),
                ));
            }
            if site.tail && !site.model.tail_call {
                found.push((
                    Kind::TailCall,
                    format!(
                        "tail call to {name}, but the rules need code after it (mode \
                         change, lazy save restore, ZT0 fill or exit; spec 004 §2)"
                    ),
                ));
            }
            for (kind, message) in found {
                self.report(kind, index, message);
            }
        }
    }

    fn check_entry(&mut self, model: &rules::FunctionModel) {
        let first_call = self
            .calls
            .first()
            .map_or(self.f.instructions.len(), |c| c.index);
        let gap: Vec<(usize, Event)> = self
            .events
            .iter()
            .filter(|(i, _)| *i < first_call)
            .copied()
            .collect();
        let za_on = gap
            .iter()
            .find(|(_, e)| matches!(e, Event::Change(c) if c.insn == Insn::SmstartZa));
        let at = za_on.map_or(0, |&(i, _)| i);
        if model.commit_lazy_save
            && !gap
                .iter()
                .any(|&(i, e)| e == Event::Commit && (za_on.is_none() || i < at))
        {
            self.report(
                Kind::LazySaveNotCommitted,
                at,
                "lazy save not committed: a new-ZA function must call `__arm_tpidr2_save` \
                 when TPIDR2_EL0 is set, before it turns ZA on"
                    .to_string(),
            );
        }
        for (needed, event, what) in [
            (model.zero_za, Event::ZeroZa, "ZA (`zero {za}`)"),
            (model.zero_zt0, Event::ZeroZt0, "ZT0 (`zero { zt0 }`)"),
        ] {
            if needed && !gap.iter().any(|&(_, e)| e == event) {
                self.report(
                    Kind::NotZeroed,
                    at,
                    format!("a new-state function must zero {what} after enabling ZA"),
                );
            }
        }
    }
}

/// The indices of `want` not found, in order, in `got` (greedy subsequence match).
fn missing_indices(want: &[Change], got: &[Change]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    for (i, w) in want.iter().enumerate() {
        match got[pos..].iter().position(|g| g == w) {
            Some(j) => pos += j + 1,
            None => out.push(i),
        }
    }
    out
}

fn missing(want: &[Change], got: &[Change]) -> Vec<Change> {
    missing_indices(want, got)
        .into_iter()
        .map(|i| want[i])
        .collect()
}
