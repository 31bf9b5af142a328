//! The rules: what a function does at entry and exit, what a call does around itself,
//! and which attribute combinations are wrong. Pure functions of [`Attrs`].
//!
//! Sources: spec 004 §2 "Restrictions on attributes", the transition table of "Compiler
//! inserted streaming-mode changes", "Functions with `__attribute__((arm_locally_streaming))`",
//! "Preventing the use of illegal instructions" (vectorization), "Other things to
//! consider" (inlining, tail calls) and §3 (lazy save, new ZA). Where spec 004 is silent
//! (ZT0, the details of the lazy save) the rules follow the AAPCS64 SME ABI as LLVM 19
//! implements it.

use std::fmt;

use crate::attrs::{self, Attrs, Interface, State};

/// An instruction that changes PSTATE.SM or PSTATE.ZA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Insn {
    /// `smstart sm`: enter streaming mode (zeroes the vector registers).
    SmstartSm,
    /// `smstop sm`: leave streaming mode (zeroes the vector registers).
    SmstopSm,
    /// `smstart za`: enable ZA.
    SmstartZa,
    /// `smstop za`: disable ZA (its contents are lost).
    SmstopZa,
}

impl Insn {
    /// The assembly spelling, `"smstart sm"` and so on.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Insn::SmstartSm => "smstart sm",
            Insn::SmstopSm => "smstop sm",
            Insn::SmstartZa => "smstart za",
            Insn::SmstopZa => "smstop za",
        }
    }

    /// Whether it changes PSTATE.SM (rather than PSTATE.ZA).
    #[must_use]
    pub fn is_sm(self) -> bool {
        matches!(self, Insn::SmstartSm | Insn::SmstopSm)
    }
}

impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a change runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum When {
    /// Every time.
    Always,
    /// Only when PSTATE.SM was this value before the call (or at the function's entry):
    /// the compiler tests the mode (`__arm_sme_state` or `mrs svcr`) and branches.
    IfSmWas(bool),
}

/// One mode change and its condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Change {
    /// The instruction.
    pub insn: Insn,
    /// When it runs.
    pub when: When,
}

impl Change {
    fn always(insn: Insn) -> Change {
        Change {
            insn,
            when: When::Always,
        }
    }

    fn when(insn: Insn, when: When) -> Change {
        Change { insn, when }
    }

    /// Whether it runs only under a condition on PSTATE.SM.
    #[must_use]
    pub fn is_conditional(self) -> bool {
        self.when != When::Always
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.when {
            When::Always => write!(f, "{}", self.insn),
            When::IfSmWas(sm) => write!(f, "{} if PSTATE.SM was {}", self.insn, u8::from(sm)),
        }
    }
}

/// Changes as `locus sme check` lists them: `A, B`, or `-` for none.
pub fn changes_text(changes: &[Change]) -> String {
    if changes.is_empty() {
        "-".to_owned()
    } else {
        changes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The mode a body runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyMode {
    /// PSTATE.SM is 0.
    NonStreaming,
    /// PSTATE.SM is 1 (a streaming interface or a locally streaming body).
    Streaming,
    /// Whatever the caller had (a streaming-compatible function without `sm_body`).
    AsCaller,
}

/// The mode a function's body runs in: locally streaming bodies stream whatever the
/// interface ("for the caller the attribute is synonymous to 'streaming'", spec 004 §2).
#[must_use]
pub fn body_mode(a: &Attrs) -> BodyMode {
    if a.sm_body || a.sm_enabled {
        BodyMode::Streaming
    } else if a.sm_compatible {
        BodyMode::AsCaller
    } else {
        BodyMode::NonStreaming
    }
}

/// What a function does at its own boundaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionModel {
    /// Its interface.
    pub interface: Interface,
    /// `sm_body`: the body streams whatever the interface.
    pub locally_streaming: bool,
    /// Its ZA state (old spellings counted with their new meaning).
    pub za: State,
    /// Its ZT0 state.
    pub zt0: State,
    /// Mode changes at entry, in order.
    pub entry: Vec<Change>,
    /// Mode changes before each return, in order.
    pub exit: Vec<Change>,
    /// A new-ZA or new-ZT0 function with a private ZA interface first commits a lazy save its caller may have left
    /// pending (`__arm_tpidr2_save` when TPIDR2_EL0 is not null, then TPIDR2_EL0 = 0).
    pub commit_lazy_save: bool,
    /// It zeroes ZA after enabling it (new ZA).
    pub zero_za: bool,
    /// It zeroes ZT0 after enabling ZA (new ZT0).
    pub zero_zt0: bool,
    /// Whether loop and SLP vectorization may run on it (not for streaming, locally
    /// streaming or streaming-compatible functions, spec 004 §2).
    pub vectorize: bool,
}

/// Whether a function has a private ZA interface: it shares neither ZA nor ZT0 with its
/// caller (sharing ZT0 needs PSTATE.ZA on, so it shares the ZA interface too).
#[must_use]
pub fn has_private_za_interface(a: &Attrs) -> bool {
    !a.za().is_shared() && !a.zt0().is_shared()
}

/// The model of a function with attributes `a`.
#[must_use]
pub fn function_model(a: &Attrs) -> FunctionModel {
    let interface = a.interface();
    let za = a.za();
    let zt0 = a.zt0();
    let mut entry = Vec::new();
    let mut exit = Vec::new();
    // Locally streaming: smstart after the frame is set up, smstop before it is torn
    // down; a compatible interface may already be streaming, so test first.
    if a.sm_body && interface != Interface::Streaming {
        let when = if interface == Interface::StreamingCompatible {
            When::IfSmWas(false)
        } else {
            When::Always
        };
        entry.push(Change::when(Insn::SmstartSm, when));
        exit.push(Change::when(Insn::SmstopSm, when));
    }
    // A new-ZA or new-ZT0 body turns ZA on itself only behind a private interface; when
    // it shares ZA or ZT0 with its caller, ZA is already on and no lazy save is pending.
    let new_state = (za == State::New || zt0 == State::New) && has_private_za_interface(a);
    if new_state {
        entry.push(Change::always(Insn::SmstartZa));
        exit.insert(0, Change::always(Insn::SmstopZa));
    }
    FunctionModel {
        interface,
        locally_streaming: a.sm_body,
        za,
        zt0,
        entry,
        exit,
        commit_lazy_save: new_state,
        zero_za: za == State::New,
        zero_zt0: zt0 == State::New,
        vectorize: !(a.sm_enabled || a.sm_compatible || a.sm_body),
    }
}

/// What a call does around itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallModel {
    /// Changes before the call, in order.
    pub before: Vec<Change>,
    /// Changes after a normal return, in order.
    pub after: Vec<Change>,
    /// Changes on the exception edge of an `invoke`, at the landing pad (spec 004's "After
    /// exception" column; the unwinder enters landing pads with PSTATE.SM = 0).
    pub after_exception: Vec<Change>,
    /// Whether some change runs only under a test of PSTATE.SM (streaming-compatible
    /// callers).
    pub conditional: bool,
    /// The caller has ZA state and the callee a private ZA interface (and is not an SME
    /// ABI routine): the caller sets up a lazy save (TPIDR2_EL0 points at its TPIDR2
    /// block) before the call, and after it enables ZA and calls `__arm_tpidr2_restore`
    /// if the callee committed the save.
    pub lazy_za_save: bool,
    /// The caller has ZT0 state the callee does not share: ZT0 is spilled before the call
    /// and filled after it.
    pub preserve_zt0: bool,
    /// The caller has ZT0 state but no ZA state and the callee a private ZA interface: ZA
    /// is disabled before the call and enabled after it (the ZT0 spill covers ZT0).
    pub disable_za: bool,
    /// Whether the SME rules let the call be inlined: never across a change of PSTATE.SM
    /// or of body mode (spec 004 §2), never a new-ZA or new-ZT0 body; where the call needs
    /// a lazy ZA save or a ZT0 spill (on which spec 004 is silent) only when the callee's
    /// body is plain, as LLVM 19 does (see [`call_model_with_body`]).
    pub inline: bool,
    /// Whether the SME rules let the call be a tail call.
    pub tail_call: bool,
}

impl CallModel {
    /// Whether the call may change PSTATE.SM.
    #[must_use]
    pub fn changes_sm(&self) -> bool {
        self.before
            .iter()
            .chain(&self.after)
            .any(|c| c.insn.is_sm())
    }
}

/// The transitions of spec 004's table for a call from a body running in `from` to a
/// callee with interface `to`: (before, after, after exception).
#[must_use]
pub fn transitions(from: BodyMode, to: Interface) -> (Vec<Change>, Vec<Change>, Vec<Change>) {
    use Insn::{SmstartSm, SmstopSm};
    let a = Change::always;
    let was = |sm| move |i| Change::when(i, When::IfSmWas(sm));
    match (from, to) {
        (BodyMode::NonStreaming, Interface::Normal | Interface::StreamingCompatible) => {
            (vec![], vec![], vec![])
        }
        (BodyMode::NonStreaming, Interface::Streaming) => {
            (vec![a(SmstartSm)], vec![a(SmstopSm)], vec![])
        }
        (BodyMode::Streaming, Interface::Normal) => {
            (vec![a(SmstopSm)], vec![a(SmstartSm)], vec![a(SmstartSm)])
        }
        (BodyMode::Streaming, _) => (vec![], vec![], vec![a(SmstartSm)]),
        (BodyMode::AsCaller, Interface::Normal) => (
            vec![was(true)(SmstopSm)],
            vec![was(true)(SmstartSm)],
            vec![was(true)(SmstartSm)],
        ),
        (BodyMode::AsCaller, Interface::Streaming) => (
            vec![was(false)(SmstartSm)],
            vec![was(false)(SmstopSm)],
            vec![was(true)(SmstartSm)],
        ),
        (BodyMode::AsCaller, Interface::StreamingCompatible) => {
            (vec![], vec![], vec![was(true)(SmstartSm)])
        }
    }
}

/// The model of a call from a function with attributes `caller` to a callee with
/// (effective, see [`crate::check`]) attributes `callee`. The after-exception changes are
/// filled in only when `invoke` is true: after a plain call an exception leaves the
/// caller too.
#[must_use]
pub fn call_model(caller: &Attrs, callee: &Attrs, invoke: bool) -> CallModel {
    call_model_with_body(caller, callee, invoke, false)
}

/// [`call_model`] knowing whether the callee's body is plain: defined, with no inline
/// assembly, no intrinsic calls (debug intrinsics aside) and no calls to SME ABI routines,
/// so that LLVM 19 trusts it to run with ZA saved lazily or ZT0 spilled around it
/// (`hasPossibleIncompatibleOps`). Only the lazy-save and ZT0 cases depend on it.
#[must_use]
pub fn call_model_with_body(
    caller: &Attrs,
    callee: &Attrs,
    invoke: bool,
    plain_body: bool,
) -> CallModel {
    let from = body_mode(caller);
    let (mut before, mut after, exc) = transitions(from, callee.interface());
    let after_exception = if invoke { exc } else { Vec::new() };
    let private_za = has_private_za_interface(callee) && !callee.abi_routine;
    let lazy_za_save = caller.za().has_state() && private_za;
    let preserve_zt0 = caller.zt0().has_state() && !callee.zt0().is_shared();
    let disable_za = caller.zt0().has_state() && !caller.za().has_state() && private_za;
    if disable_za {
        before.insert(0, Change::always(Insn::SmstopZa));
    }
    if lazy_za_save || disable_za {
        after.push(Change::always(Insn::SmstartZa));
    }
    let conditional = before
        .iter()
        .chain(&after)
        .chain(&after_exception)
        .any(|c| c.is_conditional());
    let changes_sm = before.iter().chain(&after).any(|c| c.insn.is_sm());
    // Inlining would run the callee's body in the caller's mode (spec 004 §2, "Other
    // things to consider"); a new-ZA/ZT0 body has no place in the caller either. Spec 004
    // says nothing about inlining and ZA: as in LLVM 19, a body that needs ZA saved
    // lazily or ZT0 spilled around it is inlined when it is plain (it neither touches ZA
    // nor ZT0, and its own calls get their own saves in the caller).
    let same_body = match (from, body_mode(callee)) {
        (_, BodyMode::AsCaller) => true,
        (f, c) => f == c,
    };
    let new_body = callee.za() == State::New || callee.zt0() == State::New;
    let inline =
        !changes_sm && same_body && !new_body && (plain_body || !(lazy_za_save || preserve_zt0));
    // A tail call leaves nothing to run after it: no mode to restore, no ZA to re-enable,
    // no locally streaming or new-ZA exit.
    let caller_exit = caller.sm_body || caller.za() == State::New || caller.zt0() == State::New;
    let tail_call = !changes_sm && !lazy_za_save && !preserve_zt0 && !disable_za && !caller_exit;
    CallModel {
        before,
        after,
        after_exception,
        conditional,
        lazy_za_save,
        preserve_zt0,
        disable_za,
        inline,
        tail_call,
    }
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing; the module is still well-formed.
    Warning,
    /// The module breaks a rule.
    Error,
}

impl Severity {
    /// `error` or `warning`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A broken rule, without its place (the checker adds function and instruction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong and, where it helps, what to write instead.
    pub message: String,
}

fn error(message: String) -> Finding {
    Finding {
        severity: Severity::Error,
        message,
    }
}

fn warning(message: String) -> Finding {
    Finding {
        severity: Severity::Warning,
        message,
    }
}

/// The findings on one attribute set (of a function, or of a call site when `what` says
/// so): the spec's restrictions, the mutual exclusions of the newer ZA and ZT0 spellings,
/// the old spellings LLVM 19 ignores, and `sm_body` on a declaration.
#[must_use]
pub fn attr_findings(a: &Attrs, declaration: bool, what: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    if a.sm_enabled && a.sm_compatible {
        out.push(error(format!(
            "{what} has both `{}` and `{}` (spec 004 §2: not allowed)",
            attrs::SM_COMPATIBLE,
            attrs::SM_ENABLED
        )));
    }
    if a.old_za.new && a.old_za.preserved {
        out.push(error(format!(
            "{what} has both `{}` and `{}` (spec 004 §2: not allowed)",
            attrs::OLD_ZA_NEW,
            attrs::OLD_ZA_PRESERVED
        )));
    }
    if a.old_za.new && a.old_za.shared {
        out.push(error(format!(
            "{what} has both `{}` and `{}` (spec 004 §2: not allowed)",
            attrs::OLD_ZA_NEW,
            attrs::OLD_ZA_SHARED
        )));
    }
    for (states, name) in [
        (
            a.za_states(),
            attrs::za_name as fn(State) -> Option<&'static str>,
        ),
        (a.zt0_states(), attrs::zt0_name),
    ] {
        if states.len() > 1 {
            let names: Vec<String> = states
                .iter()
                .filter_map(|&s| name(s))
                .map(|n| format!("`{n}`"))
                .collect();
            out.push(error(format!(
                "{what} has {}, which are mutually exclusive",
                names.join(" and ")
            )));
        }
    }
    if let (Some(old), Some(&new)) = (a.old_za.meaning(), a.za_states().first()) {
        if old != new {
            out.push(error(format!(
                "{what} says ZA `{}` in the old spelling but `{}` in the new one",
                old,
                new.as_str()
            )));
        }
    }
    if a.abi_routine && (a.za() == State::New || a.zt0() == State::New) {
        out.push(error(format!(
            "{what} is an SME ABI support routine and cannot have a new ZA or ZT0 body"
        )));
    }
    if a.sm_body && declaration {
        out.push(error(format!(
            "{what} is a declaration with `{}`, which is only valid on definitions (spec 004 §1)",
            attrs::SM_BODY
        )));
    }
    for (present, name) in [
        (a.old_za.new, attrs::OLD_ZA_NEW),
        (a.old_za.shared, attrs::OLD_ZA_SHARED),
        (a.old_za.preserved, attrs::OLD_ZA_PRESERVED),
        (a.old_za.expanded, attrs::OLD_ZA_EXPANDED),
    ] {
        if !present {
            continue;
        }
        let meaning = match name {
            attrs::OLD_ZA_NEW => "`aarch64_new_za`",
            attrs::OLD_ZA_SHARED if a.old_za.preserved => {
                "`aarch64_in_za` (together with `aarch64_pstate_za_preserved`)"
            }
            attrs::OLD_ZA_SHARED => "`aarch64_inout_za`",
            attrs::OLD_ZA_PRESERVED if a.old_za.shared => {
                "`aarch64_in_za` (together with `aarch64_pstate_za_shared`)"
            }
            attrs::OLD_ZA_PRESERVED => "`aarch64_preserves_za`",
            _ => {
                "nothing: it only marked a new-ZA function the old SMEABIPass had expanded; drop it"
            }
        };
        out.push(warning(format!(
            "{what} has `{name}`, which LLVM 19 ignores; in the LLVM 18+ spelling it means {meaning}"
        )));
    }
    out
}

/// Where a direct call site and its callee's declaration (with what LLVM 19 knows of the
/// callee by name) disagree: both give an interface, or a ZA or a ZT0 state, and they
/// differ. LLVM 19 combines the two ([`Attrs::combine_llvm19`]) without a word, so this is a
/// warning that says what the combination means. Attributes present only at the call site
/// are combined silently, as LLVM does.
#[must_use]
pub fn call_site_findings(site: &Attrs, decl: &Attrs, callee: &str) -> Vec<Finding> {
    let interface = |a: &Attrs| (a.sm_enabled || a.sm_compatible).then(|| a.interface());
    let combined = site.combine_llvm19(decl);
    let mut out = Vec::new();
    if let (Some(s), Some(d)) = (interface(site), interface(decl)) {
        if s != d {
            out.push(warning(format!(
                "the call site says @{callee} has a {s} interface but its declaration says {d}; LLVM 19 combines them into {}",
                combined.interface()
            )));
        }
    }
    for (what, s, d, c) in [
        (
            "ZA",
            site.za_states(),
            decl.za_states(),
            combined.za_llvm19(),
        ),
        ("ZT0", site.zt0_states(), decl.zt0_states(), combined.zt0()),
    ] {
        if !s.is_empty() && !d.is_empty() && s != d {
            let list = |v: &[State]| {
                v.iter()
                    .map(|x| format!("`{x}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let meaning = if c == State::None {
                "no state (a private interface)".to_string()
            } else {
                format!("`{c}`")
            };
            out.push(warning(format!(
                "the call site says {what} {} but @{callee} is declared {what} {}; LLVM 19 combines \
                 them (OR-ing its encodings) into {meaning}",
                list(&s),
                list(&d)
            )));
        }
    }
    out
}

/// An SME ABI routine that LLVM 19 does not know by name, declared without
/// `aarch64_pstate_sm_compatible`: LLVM treats it as the normal function its declaration
/// says it is, changing PSTATE.SM around calls from streaming bodies and setting up a lazy
/// ZA save.
#[must_use]
pub fn routine_attrs_finding(name: &str, decl: &Attrs) -> Option<Finding> {
    (attrs::ROUTINES_NEEDING_ATTRS.contains(&name) && !decl.sm_compatible).then(|| {
        warning(format!(
            "@{name} is an SME ABI routine (streaming-compatible) but is declared without `{}`; \
             LLVM 19 does not know it by name and treats it as a normal function: a streaming \
             caller leaves streaming mode around it and a caller with ZA sets up a lazy save",
            attrs::SM_COMPATIBLE
        ))
    })
}

/// A function with ZA state in which LLVM makes `count` library calls for instructions
/// ([`crate::hidden`]), each needing a lazy ZA save. LLVM 19 lowers them as unchained
/// calls and sets the lazy save up for only some: in its output the first one runs with
/// TPIDR2_EL0 set, later ones (until an ordinary call sets it up again) with ZA live and
/// TPIDR2_EL0 reset, against the AAPCS64 (a private-ZA callee must not find ZA active
/// without a lazy save). The model keeps the rule; this warns that llc-19 departs from it.
#[must_use]
pub fn unchained_lazy_save_finding(count: usize) -> Finding {
    warning(format!(
        "LLVM 19 makes {count} library calls for instructions of this function that each need a \
         lazy ZA save, and sets the save up only for some of them: later ones may run with ZA \
         live and TPIDR2_EL0 reset (move them to their own function, or save ZA around them)"
    ))
}

/// A call LLVM 19 would make a tail call (it is marked `tail` or `musttail` and followed by
/// `ret`) although ZT0 must be filled after it: LLVM 19's tail-call check asks about mode
/// changes, lazy ZA saves and locally streaming bodies but not about ZT0, so a caller that
/// shares ZT0 (in, out, inout, preserves) spills ZT0 to a stack slot, frees the frame and
/// branches to a callee that does not share it: the caller's caller gets ZT0 clobbered
/// (llvm-project#165371). Compiled code with it is an `sme audit` tail-call departure.
#[must_use]
pub fn zt0_tail_call_finding(caller: &Attrs, model: &CallModel, callee: &str) -> Option<Finding> {
    let changes_sm = model
        .before
        .iter()
        .chain(&model.after)
        .any(|c| c.insn.is_sm());
    let caller_exit = caller.sm_body || caller.za() == State::New || caller.zt0() == State::New;
    (model.preserve_zt0 && !changes_sm && !model.lazy_za_save && !caller_exit).then(|| {
        warning(format!(
            "LLVM 19 makes this call to @{callee}, which does not share ZT0, a tail call \
             (llvm-project#165371): ZT0 is spilled to a slot the tail call frees and never \
             filled, so this function's caller loses ZT0 (drop `tail`, or make the call \
             not the last thing before `ret`)"
        ))
    })
}

/// LLVM's number for the `aarch64_sve_vector_pcs` calling convention.
pub const SVE_VECTOR_PCS: u32 = 98;

/// A locally streaming function with the SVE calling convention: its SVE callee-saves
/// would be spilled in the prologue, before `smstart`, with one vector length and
/// reloaded with another, which LLVM does not support (spec 004 §2, "Functions with
/// `__attribute__((arm_locally_streaming))`": "can be prevented in Clang through emitting
/// a diagnostic"). LLVM 19 compiles it without a word.
#[must_use]
pub fn sve_pcs_finding(a: &Attrs, calling_convention: u32) -> Option<Finding> {
    (a.sm_body && a.interface() != Interface::Streaming && calling_convention == SVE_VECTOR_PCS)
        .then(|| {
            error(format!(
                "`{}` with the `aarch64_sve_vector_pcs` calling convention: the SVE callee-saves are \
                 spilled before the body starts streaming, with a different vector length \
                 (spec 004 §2: unsupported)",
                attrs::SM_BODY
            ))
        })
}

/// A caller without ZA (or ZT0) state calling a function that shares it: the callee
/// expects live contents that the caller does not have (AAPCS64 SME; Clang rejects such
/// calls, LLVM 19 compiles them). SME ABI routines are exempt: they are called with ZA
/// dormant.
#[must_use]
pub fn shared_state_findings(caller: &Attrs, callee: &Attrs, name: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    if callee.abi_routine {
        return out;
    }
    for (what, caller_state, callee_state) in [
        ("ZA", caller.za(), callee.za()),
        ("ZT0", caller.zt0(), callee.zt0()),
    ] {
        if callee_state.is_shared() && !caller_state.has_state() {
            out.push(error(format!(
                "@{name} shares {what} (`{callee_state}`) but the caller has no {what} state to share"
            )));
        }
    }
    out
}

/// Whether code running in `from` and a callee with interface `to` may see different
/// SVE vector lengths (so scalable vectors must not cross the call, spec 004 §2).
#[must_use]
pub fn may_differ_in_vl(from: BodyMode, to: Interface) -> bool {
    !matches!(
        (from, to),
        (_, Interface::StreamingCompatible)
            | (BodyMode::NonStreaming, Interface::Normal)
            | (BodyMode::Streaming, Interface::Streaming)
    )
}

/// The finding for a scalable vector crossing a call that may change the vector length.
#[must_use]
pub fn scalable_call_finding(callee: &str, from: BodyMode, to: Interface) -> Finding {
    let mode = match from {
        BodyMode::NonStreaming => "non-streaming",
        BodyMode::Streaming => "streaming",
        BodyMode::AsCaller => "streaming-compatible",
    };
    error(format!(
        "a scalable vector is passed to or returned from @{callee} ({to} interface) by a {mode} body: \
         the two may run with different SVE vector lengths (spec 004 §2, undefined behaviour)"
    ))
}

/// The finding for a locally streaming function whose interface passes scalable vectors.
#[must_use]
pub fn scalable_body_finding(interface: Interface) -> Finding {
    error(format!(
        "a scalable vector is passed to or returned from a function with a {interface} interface \
         but `{}`: its body runs with the streaming vector length (spec 004 §2, undefined behaviour)",
        attrs::SM_BODY
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::{SM_BODY, SM_COMPATIBLE, SM_ENABLED};

    fn names(changes: &[Change]) -> Vec<String> {
        changes.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_spec_table() {
        let n = Attrs::default();
        let s = Attrs::from_names([SM_ENABLED]);
        let sc = Attrs::from_names([SM_COMPATIBLE]);
        let row = |from: &Attrs, to: &Attrs| {
            let m = call_model(from, to, true);
            (names(&m.before), names(&m.after), names(&m.after_exception))
        };
        let e: Vec<String> = vec![];
        let v = |x: &str| vec![x.to_string()];
        assert_eq!(row(&n, &n), (e.clone(), e.clone(), e.clone()));
        assert_eq!(row(&n, &s), (v("smstart sm"), v("smstop sm"), e.clone()));
        assert_eq!(row(&n, &sc), (e.clone(), e.clone(), e.clone()));
        assert_eq!(
            row(&s, &n),
            (v("smstop sm"), v("smstart sm"), v("smstart sm"))
        );
        assert_eq!(row(&s, &s), (e.clone(), e.clone(), v("smstart sm")));
        assert_eq!(row(&s, &sc), (e.clone(), e.clone(), v("smstart sm")));
        assert_eq!(
            row(&sc, &n),
            (
                v("smstop sm if PSTATE.SM was 1"),
                v("smstart sm if PSTATE.SM was 1"),
                v("smstart sm if PSTATE.SM was 1")
            )
        );
        assert_eq!(
            row(&sc, &s),
            (
                v("smstart sm if PSTATE.SM was 0"),
                v("smstop sm if PSTATE.SM was 0"),
                v("smstart sm if PSTATE.SM was 1")
            )
        );
        assert_eq!(
            row(&sc, &sc),
            (e.clone(), e.clone(), v("smstart sm if PSTATE.SM was 1"))
        );
        // A locally streaming caller is a streaming one at its calls.
        let ls = Attrs::from_names([SM_BODY]);
        assert_eq!(row(&ls, &n), row(&s, &n));
        assert!(call_model(&sc, &n, false).conditional);
        assert!(!call_model(&s, &n, false).conditional);
        assert!(call_model(&s, &n, false).after_exception.is_empty());
    }

    #[test]
    fn entry_and_exit() {
        let ls = function_model(&Attrs::from_names([SM_BODY]));
        assert_eq!(names(&ls.entry), ["smstart sm"]);
        assert_eq!(names(&ls.exit), ["smstop sm"]);
        assert!(!ls.vectorize);
        let lsc = function_model(&Attrs::from_names([SM_BODY, SM_COMPATIBLE]));
        assert_eq!(names(&lsc.entry), ["smstart sm if PSTATE.SM was 0"]);
        let lss = function_model(&Attrs::from_names([SM_BODY, SM_ENABLED]));
        assert!(lss.entry.is_empty());
        let nz = function_model(&Attrs::from_names(["aarch64_new_za", SM_BODY]));
        assert_eq!(names(&nz.entry), ["smstart sm", "smstart za"]);
        assert_eq!(names(&nz.exit), ["smstop za", "smstop sm"]);
        assert!(nz.commit_lazy_save && nz.zero_za && !nz.zero_zt0);
        assert!(function_model(&Attrs::default()).vectorize);
    }

    #[test]
    fn za_and_zt0_around_calls() {
        let za = Attrs::from_names(["aarch64_inout_za"]);
        let n = Attrs::default();
        let m = call_model(&za, &n, false);
        assert!(m.lazy_za_save && !m.inline && !m.tail_call);
        assert_eq!(names(&m.after), ["smstart za"]);
        let routine = Attrs::known_routine("__arm_sme_state").unwrap();
        assert!(!call_model(&za, &routine, false).lazy_za_save);
        assert!(!call_model(&za, &Attrs::from_names(["aarch64_preserves_za"]), false).lazy_za_save);
        let zt0 = Attrs::from_names(["aarch64_inout_zt0"]);
        let m = call_model(&zt0, &n, false);
        assert!(m.preserve_zt0 && m.disable_za && !m.lazy_za_save);
        assert_eq!(names(&m.before), ["smstop za"]);
        assert_eq!(names(&m.after), ["smstart za"]);
        let m = call_model(&n, &n, false);
        assert!(m.inline && m.tail_call);
        // A plain private-ZA body inlines into a ZA caller (LLVM 19); a new-ZA one never.
        assert!(call_model_with_body(&za, &n, false, true).inline);
        let new_za = Attrs::from_names(["aarch64_new_za"]);
        assert!(!call_model_with_body(&za, &new_za, false, true).inline);
        assert!(call_model_with_body(&zt0, &n, false, true).inline);
        // Inlining a locally streaming body into a normal caller would stream nothing.
        assert!(!call_model(&n, &Attrs::from_names([SM_BODY]), false).inline);
        assert!(!call_model(&Attrs::from_names([SM_BODY]), &n, false).tail_call);
    }

    #[test]
    fn findings() {
        let f = attr_findings(&Attrs::from_names([SM_ENABLED, SM_COMPATIBLE]), false, "@f");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        let f = attr_findings(&Attrs::from_names([SM_BODY]), true, "@f");
        assert!(f[0].message.contains("only valid on definitions"));
        let f = attr_findings(&Attrs::from_names([attrs::OLD_ZA_SHARED]), false, "@f");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(f[0].message.contains("`aarch64_inout_za`"));
        assert!(may_differ_in_vl(BodyMode::AsCaller, Interface::Normal));
        assert!(!may_differ_in_vl(
            BodyMode::Streaming,
            Interface::StreamingCompatible
        ));
    }
}
