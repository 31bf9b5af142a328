//! The audit of compiled code (`locus sme audit`): what each function's entry and exit
//! and each call site in an AArch64 object actually do ([`crate::objfile`]), compared with
//! what the rules require ([`crate::rules`]) for the attributes of the caller and callee,
//! taken from the IR when it is given, else from `--attrs`, else from what LLVM 19 knows by
//! name (an ELF object records no SME attributes; everything else is a normal function
//! with private ZA).
//!
//! Each function's code is followed along its branches (`b`, `b.cond`, `cbz`/`cbnz`,
//! `tbz`/`tbnz`, a jump table's `br` to each of its cases ([`crate::jumptable`]); `ret`,
//! a tail call (a `br` that is not a jump table is an indirect one) and a call to a
//! function that never returns end a path (`noreturn` in the IR, else [`NORETURN`]); a
//! `b` to the function's very end that no path reaches goes to the empty block
//! unoptimized code leaves after a noreturn call, not into the next function; landing
//! pads, from the exception call-site table, start paths of their own; a call or tail call
//! to a machine-outlined `OUTLINED_FUNCTION_n` follows its straight-line body in place,
//! its tail call being the caller's) by a forward dataflow whose value at each
//! instruction is the set of states the paths reaching it bring: PSTATE.SM, the mode
//! changes run since the path's last call site (or the entry, or the landing pad),
//! whether TPIDR2_EL0 points at a lazy-save block, whether ZT0 is stored, which lazy save
//! or ZT0 fill is still owed, and the new-ZA entry's commit and zeroing. Calls to the SME
//! ABI routines LLVM calls itself ([`LLVM_OWN_CALLS`]) are not call sites. A
//! streaming-compatible function is followed once per entry mode.
//!
//! What each path must do: from its start to the next call site, the changes after that
//! start (the entry's, the previous call's, or the "after exception" ones at a landing
//! pad) then those before the call, in order, and no other change of PSTATE.SM; to a
//! `ret`, those of the start then the exit's. A call needing a lazy ZA save must find
//! TPIDR2_EL0 set up (`msr TPIDR2_EL0, xN`, N not `xzr`) and, where the block's address is
//! known (`sub xN, x29, #16`, followed through stack slots and `sp`, `x29` or `x19`
//! offsets), a TPIDR2 block as the AAPCS64 lays it out (the buffer's address, `sp` less
//! the streaming vector length squared, with `sp` set to it; `num_za_save_slices` from
//! `rdsvl #1`; zero reserved bytes), `__arm_tpidr2_restore` must get that block in x0,
//! and each path after it must reach
//! `__arm_tpidr2_restore` (or learn from `mrs xN, TPIDR2_EL0; cbnz xN` that the callee left
//! the save uncommitted), and TPIDR2_EL0 must be null again (`msr TPIDR2_EL0, xzr`, or a
//! register known to be zero) at every return and call to a function sharing ZA; PSTATE.ZA
//! (followed through `smstart`/`smstop`, not known after a private-ZA callee) must be on
//! at a call needing a lazy save, a call to or return from a function sharing ZA, and
//! `__arm_tpidr2_restore`; a new-ZA body must commit a pending save (`__arm_tpidr2_save`, or
//! learn from `cbz` on TPIDR2_EL0 that none is pending) before `smstart za` and zero ZA;
//! ZT0 must be stored before and loaded after a call that does not share it.
//!
//! **Branches and soundness.** A branch on PSTATE.SM is decided: `tbz`/`tbnz` on bit 0 of
//! a register holding the mode (`__arm_sme_state`'s x0, `mrs xN, SVCR`, copied by `mov` or
//! `and #1`, kept across calls in x19-x28 and at landing pads, and through the stack slots
//! unoptimized code spills it to: a store and a load of the same `sp`-, `x29`- or
//! `x19`-relative slot, with `sp` moves followed; [`a64::written`] says which registers
//! every other instruction overwrites); a test of a register not known to hold the mode
//! goes both ways, like any other branch. Where the mode is not known (at
//! a landing pad, where the unwinder leaves whatever mode it had), reading it splits the
//! path in two, and the conditional changes that follow speak of the mode read.
//! Every other branch is taken both ways, and a departure on any path is reported: a
//! compiled function must keep the rules on every path it can take, and the only
//! correlated branches in LLVM's SME code are the mode tests, which are decided. (Code
//! that keeps the rules only because two data branches always go the same way would be
//! reported.) A departure found under one entry mode of a streaming-compatible function
//! says which. Code no branch reaches (dead code, or the cases of a dispatch the audit
//! cannot read) is followed from an unknown state: its call sites' own requirements are
//! checked, what came before them is not (nor are its conditional changes until it reads
//! the mode). An indirect call the optimizer duplicated has the attributes of the IR's
//! indirect call through the same register, else those all the IR's indirect calls share.
//! A function with more than 200 000 states is reported as [`Kind::TooComplex`]; a write
//! of SVCR from a register (`msr SVCR, x0`, hand-written) as [`Kind::Unfollowed`], the path
//! ending there rather than going on with a guessed mode.

use std::collections::{HashMap, VecDeque};

use locus_llvm::{Context, Module};

use crate::a64::{self, Op, Svcr, SysReg};
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
    /// TPIDR2_EL0 still points at a lazy-save block where ZA must be active (at a return,
    /// or a call to a function sharing ZA): it was not reset to null after the call the
    /// save was for, or after a new-ZA function committed its caller's.
    LazySaveNotReset,
    /// PSTATE.ZA is off where ZA's contents must be live: at a call needing a lazy save, a
    /// call to a function sharing ZA, the return of one, or `__arm_tpidr2_restore`; or it
    /// is turned off while a lazy save may be uncommitted.
    ZaOff,
    /// ZT0 is not stored before or not loaded after a call that does not share it.
    Zt0NotPreserved,
    /// A new-ZA (new-ZT0) function does not zero ZA (ZT0).
    NotZeroed,
    /// A tail call where the rules need code after the call.
    TailCall,
    /// The function has too many paths for the audit: it is incomplete.
    TooComplex,
    /// An instruction sets the mode in a way the audit does not follow (`msr SVCR, xN`,
    /// hand-written): the paths through it are not audited past it.
    Unfollowed,
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
            Kind::LazySaveNotReset => "lazy-save-not-reset",
            Kind::ZaOff => "za-off",
            Kind::Zt0NotPreserved => "zt0-not-preserved",
            Kind::NotZeroed => "not-zeroed",
            Kind::TailCall => "tail-call",
            Kind::TooComplex => "too-complex",
            Kind::Unfollowed => "unfollowed",
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

/// Functions that never return, by the names the C and C++ runtimes give them: the audit
/// ends a path at a call to one (with the IR, its `noreturn` attribute says so).
pub const NORETURN: [&str; 10] = [
    "abort",
    "exit",
    "_Exit",
    "__stack_chk_fail",
    "_Unwind_Resume",
    "__cxa_throw",
    "__cxa_rethrow",
    "__cxa_bad_cast",
    "__clang_call_terminate",
    "_ZSt9terminatev",
];

/// What the IR says: each function's attributes and each defined function's calls.
struct IrInfo {
    attrs: HashMap<String, Attrs>,
    /// Functions declared `noreturn`.
    noreturn: std::collections::HashSet<String>,
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
    let noreturn = module
        .function_list()
        .into_iter()
        .filter(|f| f.has_attribute(locus_llvm::ir::AttributeIndex::Function, "noreturn"))
        .map(|f| f.name())
        .collect();
    Ok(IrInfo {
        attrs,
        noreturn,
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
    let outlined: HashMap<String, Outlined> = functions
        .iter()
        .filter_map(|f| Some((f.name.clone(), outlined(f)?)))
        .collect();
    let mut report = AuditReport::default();
    for f in &functions {
        let (caller, source) = lookup(&f.name);
        if outlined.contains_key(&f.name) {
            report.functions.push(FunctionAudit {
                name: f.name.clone(),
                attrs: caller,
                source,
                calls: 0,
                landing_pads: 0,
            });
            continue;
        }
        let ir_calls = ir
            .as_ref()
            .and_then(|i| i.report.function(&f.name))
            .map(|r| r.calls.as_slice())
            .unwrap_or_default();
        let noreturn = |name: &str| {
            NORETURN.contains(&name) || ir.as_ref().is_some_and(|i| i.noreturn.contains(name))
        };
        let mut audit = FunctionAuditor::new(f, caller, ir_calls, &lookup, &noreturn, &outlined);
        audit.run();
        report.functions.push(FunctionAudit {
            name: f.name.clone(),
            attrs: caller,
            source,
            calls: audit.calls.len(),
            landing_pads: f.landing_pads.len(),
        });
        report.departures.extend(audit.departures());
    }
    Ok(report)
}

/// A machine-outlined body (`OUTLINED_FUNCTION_n`, LLVM's machine outliner at -Oz moves
/// repeated sequences such as a lazy-save set-up there): straight-line instructions, then
/// `ret` or a tail call. A call to one is followed in place, its tail call being the
/// caller's call; the body is not audited as a function of its own.
struct Outlined {
    body: Vec<Instruction>,
    /// The tail call's target, the call site the body leads to.
    tail: Option<String>,
}

/// The prefix of LLVM's machine-outlined function names.
const OUTLINED_PREFIX: &str = "OUTLINED_FUNCTION_";

fn outlined(f: &CodeFunction) -> Option<Outlined> {
    if !f.name.starts_with(OUTLINED_PREFIX) {
        return None;
    }
    let (last, body) = f.instructions.split_last()?;
    let mut body = body.to_vec();
    let tail = match (last.op, &last.target) {
        (Op::Ret(_), _) => None,
        (Op::B(_), Some(t)) if LLVM_OWN_CALLS.contains(&t.as_str()) => {
            // A tail call to an SME ABI routine is the routine's call, then a return.
            body.push(Instruction {
                op: Op::Bl(0),
                ..last.clone()
            });
            None
        }
        (Op::B(_), Some(t)) => Some(t.clone()),
        _ => return None,
    };
    let straight = body.iter().all(|x| match x.op {
        Op::Bl(_) => x
            .target
            .as_deref()
            .is_some_and(|t| LLVM_OWN_CALLS.contains(&t)),
        op => !op.is_branch(),
    });
    straight.then_some(Outlined { body, tail })
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
    /// The callee never returns: the path ends at the call (or goes to its landing pad).
    noreturn: bool,
    /// The index of the instruction at its landing pad, for a call with one.
    pad: Option<usize>,
}

/// A function's call-site ranges with a landing pad, sorted by start, for one binary
/// search per call site.
struct PadTable(Vec<objfile::LandingPad>);

impl PadTable {
    fn new(f: &CodeFunction) -> PadTable {
        let mut pads = f.landing_pads.clone();
        pads.sort_by_key(|p| (p.start, p.end));
        PadTable(pads)
    }

    /// The landing pad (offset from the function's start) of the call at `offset`.
    fn pad_of(&self, offset: u64) -> Option<u64> {
        let end = self.0.partition_point(|p| p.start <= offset);
        // Ranges do not overlap in LLVM's tables; a few that do are searched back.
        self.0[..end]
            .iter()
            .rev()
            .take(8)
            .find(|p| offset < p.end)
            .map(|p| p.pad)
    }
}

/// The index of the instruction at byte `offset` of `f`.
fn instruction_at(f: &CodeFunction, offset: u64) -> Option<usize> {
    let i = usize::try_from(offset / 4).ok()?;
    f.instructions
        .get(i)
        .filter(|x| x.offset == offset)
        .map(|_| i)
}

struct FunctionAuditor<'a> {
    f: &'a CodeFunction,
    caller: Attrs,
    calls: Vec<Site>,
    /// The targets of each jump-table `br` (instruction indices).
    jumps: HashMap<usize, Vec<usize>>,
    /// The bodies of the machine-outlined functions called, by instruction index.
    inlined: HashMap<usize, Vec<Instruction>>,
    /// Instruction index -> call site.
    site_at: HashMap<usize, usize>,
    /// Departures found, by (kind, instruction, message), with the entry modes (PSTATE.SM
    /// 0, 1) they were found under.
    found: Vec<((Kind, usize, String), [bool; 2])>,
    /// Where each departure is in `found`.
    found_at: HashMap<(Kind, usize, String), usize>,
    /// The dataflow gave up (too many states).
    too_complex: bool,
}

/// The most states the dataflow of one function may visit before it gives up.
const MAX_STATES: usize = 200_000;
/// The farthest an `sp`-relative slot or address is followed from `sp` (1 MiB).
const MAX_SP_OFFSET: u64 = 1 << 20;
/// The most mode changes one path segment records (a loop of changes without a call).
const MAX_SEEN: usize = 16;

/// The mode changes of an `smstart`/`smstop` (both for the operand-less forms).
fn changes_of(op: Op) -> Vec<Insn> {
    let (field, sm, za) = match op {
        Op::Smstart(s) => (s, Insn::SmstartSm, Insn::SmstartZa),
        Op::Smstop(s) => (s, Insn::SmstopSm, Insn::SmstopZa),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    if field != Svcr::Za {
        out.push(sm);
    }
    if field != Svcr::Sm {
        out.push(za);
    }
    out
}

/// Where the path segment a state is on began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Anchor {
    /// The function's entry.
    Entry,
    /// The return from call site k.
    Call(usize),
    /// The landing pad of call site k.
    Pad(usize),
    /// Code no path from the entry or a landing pad reaches (the targets of a jump
    /// table): what happened before is not known, and is not judged.
    Unknown,
}

/// What a register is known to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fact {
    /// Bit 0 is PSTATE.SM as it was when read (`__arm_sme_state`, `mrs SVCR`).
    Sm(bool),
    /// TPIDR2_EL0 as it was when read.
    Tpidr2,
    /// Zero (`mov xN, xzr`, as unoptimized code resets TPIDR2_EL0 through a register).
    Zero,
    /// An address in the frame: the base register (`sp`, `x29` or `x19`) plus an offset
    /// (`sub x9, x29, #16`; `sp`-based ones follow `sp`'s moves).
    Frame(u8, i64),
    /// The streaming vector length in bytes (`rdsvl xN, #1`): a TPIDR2 block's
    /// `num_za_save_slices`.
    Svl,
    /// A lazy-save buffer's address: `sp` less the vector length squared (`msub`).
    Buffer,
}

/// The state at one point of one path: the dataflow's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct State {
    anchor: Anchor,
    /// The mode changes run since the anchor, with their instruction.
    seen: Vec<(usize, Insn)>,
    /// PSTATE.SM, when known.
    sm: Option<bool>,
    /// Registers known to hold a mode or TPIDR2_EL0, sorted.
    regs: Vec<(u8, Fact)>,
    /// Stack slots known to hold one: (base register, one of [`a64::FRAME_BASES`]; byte
    /// offset), as
    /// unoptimized code spills the mode it tests.
    slots: Vec<(u8, i64, Fact)>,
    /// At a landing pad, where the mode is not known until it is read, and on paths from
    /// code no branch reaches, whose entry mode is not known: the mode the conditional
    /// changes speak of (the mode read last).
    cond_sm: Option<bool>,
    /// The path began in code no branch reaches: the entry mode says nothing of it.
    free: bool,
    /// TPIDR2_EL0 points at a lazy-save block (`None`: not known).
    tpidr2_set: Option<bool>,
    /// PSTATE.ZA, when known.
    za: Option<bool>,
    /// The TPIDR2 block TPIDR2_EL0 was last pointed at, when its address is known (base,
    /// offset, as [`Fact::Frame`]).
    block: Option<(u8, i64)>,
    /// `sp` was set to a lazy-save buffer's address: the buffer is allocated.
    buffer_live: bool,
    /// ZT0 stored since the anchor.
    zt0_spilled: bool,
    /// A call whose lazy save is not restored yet.
    pending_restore: Option<usize>,
    /// A call whose ZT0 is not loaded back yet.
    pending_fill: Option<usize>,
    /// Entry segment only: a pending lazy save is committed (or there was none).
    committed: bool,
    /// Entry segment only: the first `smstart za`.
    za_on: Option<usize>,
    zeroed_za: bool,
    zeroed_zt0: bool,
}

impl State {
    fn fact(&self, r: u8) -> Option<Fact> {
        self.regs.iter().find(|(x, _)| *x == r).map(|&(_, f)| f)
    }

    fn set(&mut self, r: u8, fact: Option<Fact>) {
        self.regs.retain(|(x, _)| *x != r);
        if r == 29 || r == 19 {
            self.forget_base(r);
        }
        if let Some(f) = fact {
            self.regs.push((r, f));
            self.regs.sort_unstable_by_key(|(x, _)| *x);
        }
    }

    /// A frame base register changed: what was known relative to it is lost.
    fn forget_base(&mut self, base: u8) {
        self.slots.retain(|s| s.0 != base);
        self.regs
            .retain(|&(_, f)| !matches!(f, Fact::Frame(b, _) if b == base));
        if self.block.is_some_and(|(b, _)| b == base) {
            self.block = None;
        }
    }

    /// Where register `r` points in the frame: (base, offset) of [`Fact::Frame`], or the
    /// frame base itself.
    fn frame_place(&self, r: u8) -> Option<(u8, i64)> {
        match self.fact(r) {
            Some(Fact::Frame(b, o)) => Some((b, o)),
            _ => a64::FRAME_BASES.contains(&r).then_some((r, 0)),
        }
    }

    /// What the value an instruction computes is known to be, for the arithmetic of a
    /// lazy-save set-up ([`a64::FrameArith`]), from the facts before it.
    fn arith_fact(&self, word: u32) -> Option<(u8, Option<Fact>)> {
        Some(match a64::frame_arith(word)? {
            a64::FrameArith::AddImm { rd, rn, imm } => {
                let fact = self
                    .frame_place(rn)
                    .map(|(b, o)| Fact::Frame(b, o.saturating_add(imm)))
                    .or_else(|| (imm == 0).then(|| self.fact(rn)).flatten());
                (rd, fact)
            }
            a64::FrameArith::Rdsvl { rd, imm } => (rd, (imm == 1).then_some(Fact::Svl)),
            a64::FrameArith::Msub { rd, rn, rm, ra } => {
                let svl2 = self.fact(rn) == Some(Fact::Svl) && self.fact(rm) == Some(Fact::Svl);
                let from_sp = matches!(self.fact(ra), Some(Fact::Frame(31, 0)));
                (rd, (svl2 && from_sp).then_some(Fact::Buffer))
            }
        })
    }

    /// Follows a load or store of a general-purpose register through the stack slots
    /// based on `sp`, `x29` or `x19` ([`a64::FRAME_BASES`]), and forgets what other
    /// instructions write. A store through another base is taken not to reach the slots
    /// (LLVM spills to slots whose address is not taken); slots of different bases are
    /// kept apart (LLVM addresses one slot from one base in a function).
    fn other(&mut self, word: u32) {
        let access = a64::access(word);
        let arith = self.arith_fact(word);
        let zero_store = access.is_some_and(|a| a.store && a.data.contains(&Some(31)));
        if self.regs.is_empty() && self.slots.is_empty() && arith.is_none() && !zero_store {
            return;
        }
        let mut loaded: Vec<(u8, Option<Fact>)> = Vec::new();
        if let Some((a, (base, delta))) =
            access.and_then(|a| self.frame_place(a.base).map(|p| (a, p)))
        {
            let offset = a.offset.map(|o| o.saturating_add(delta));
            let regs = a.data.iter().flatten().count().max(1) as u64;
            let each = i64::try_from(a.size / regs).unwrap_or(i64::MAX);
            if a.store {
                let (lo, hi) = match offset {
                    Some(o) => (
                        o,
                        o.saturating_add(i64::try_from(a.size).unwrap_or(i64::MAX)),
                    ),
                    None => (i64::MIN, i64::MAX),
                };
                self.slots
                    .retain(|&(b, o, _)| b != base || o < lo || o >= hi);
                if let Some(o) = offset {
                    for (k, r) in a.data.iter().enumerate() {
                        // The zero register stores zeroes (a TPIDR2 block's reserved
                        // bytes).
                        let fact = r.and_then(|r| {
                            if r == 31 {
                                Some(Fact::Zero)
                            } else {
                                self.fact(r)
                            }
                        });
                        if let Some(f) = fact {
                            let at = o.saturating_add(each.saturating_mul(k as i64));
                            self.slots.push((base, at, f));
                        }
                    }
                    self.slots.sort_unstable_by_key(|&(b, o, _)| (b, o));
                }
            } else {
                for (k, r) in a.data.iter().enumerate() {
                    let Some(r) = *r else { continue };
                    let at = offset.map(|o| o.saturating_add(each.saturating_mul(k as i64)));
                    let fact = self
                        .slots
                        .iter()
                        .find(|&&(b, o, _)| b == base && Some(o) == at)
                        .map(|&(_, _, f)| f);
                    loaded.push((r, fact));
                }
            }
        }
        let written = a64::written(word);
        for r in written.iter() {
            match r {
                31 => match written.sp_add {
                    // The slots stay where they are; their offsets from sp change.
                    Some(add) => {
                        for slot in self.slots.iter_mut().filter(|s| s.0 == 31) {
                            slot.1 = slot.1.saturating_sub(add);
                        }
                        for (_, f) in &mut self.regs {
                            if let Fact::Frame(31, o) = f {
                                *o = o.saturating_sub(add);
                            }
                        }
                        if let Some((31, o)) = &mut self.block {
                            *o = o.saturating_sub(add);
                        }
                        // A loop that moves sp (a stack probe) would make new offsets
                        // forever: what drifts beyond any frame is forgotten.
                        let near = |o: i64| o.unsigned_abs() <= MAX_SP_OFFSET;
                        self.slots.retain(|&(b, o, _)| b != 31 || near(o));
                        self.regs
                            .retain(|&(_, f)| !matches!(f, Fact::Frame(31, o) if !near(o)));
                        if self.block.is_some_and(|(b, o)| b == 31 && !near(o)) {
                            self.block = None;
                        }
                    }
                    None => {
                        // `mov sp, xN` of a buffer's address allocates it (what moves
                        // sp later allocates below it or is the epilogue).
                        if arith.is_some_and(|(_, f)| f == Some(Fact::Buffer)) {
                            self.buffer_live = true;
                        }
                        self.forget_base(31);
                    }
                },
                r => self.set(r, None),
            }
        }
        for (r, fact) in loaded {
            if r != 31 {
                self.set(r, fact);
            }
        }
        // The frame bases stay bases of their own: `mov x29, sp` says nothing lasting.
        if let Some((rd, fact)) = arith.filter(|&(rd, f)| {
            rd != 31 && !(a64::FRAME_BASES.contains(&rd) && matches!(f, Some(Fact::Frame(..))))
        }) {
            self.set(rd, fact);
        }
    }

    /// What the TPIDR2 block at `block` lacks for a lazy save, if anything: the AAPCS64's
    /// layout, as LLVM 19 fills it (the buffer's address at +0, `num_za_save_slices` = the
    /// streaming vector length at +8, zero reserved bytes at +10 and +12), and the buffer
    /// allocated (`sp` set to it).
    fn block_lacks(&self, (base, at): (u8, i64)) -> Option<&'static str> {
        let slot = |off: i64| {
            self.slots
                .iter()
                .find(|&&(b, o, _)| b == base && o == at.saturating_add(off))
                .map(|&(_, _, f)| f)
        };
        if slot(0) != Some(Fact::Buffer) {
            Some("the lazy-save buffer's address (bytes 0-7)")
        } else if !self.buffer_live {
            Some("an allocated buffer (`sp` was never set to the buffer's address)")
        } else if slot(8) != Some(Fact::Svl) {
            Some("num_za_save_slices = the streaming vector length (bytes 8-9)")
        } else if slot(10) != Some(Fact::Zero) || slot(12) != Some(Fact::Zero) {
            Some("zeroed reserved bytes (10-15)")
        } else {
            None
        }
    }

    /// A call clobbers x0-x18 and x30.
    fn clobber_call(&mut self) {
        self.regs.retain(|(x, _)| (19..=29).contains(x));
    }

    /// A call to an SME ABI routine clobbers less ([`attrs::routine_preserves`]).
    fn clobber_routine(&mut self, name: Option<&str>) {
        match name.and_then(attrs::routine_preserves) {
            Some(kept) => self
                .regs
                .retain(|(x, _)| kept.contains(x) || (19..=29).contains(x)),
            None => self.clobber_call(),
        }
    }

    /// A new segment begins at `anchor`.
    fn anchored(&self, anchor: Anchor) -> State {
        State {
            anchor,
            seen: Vec::new(),
            zt0_spilled: false,
            committed: true,
            za_on: None,
            zeroed_za: true,
            zeroed_zt0: true,
            ..self.clone()
        }
    }
}

/// The states after PSTATE.SM is read into register `r`: the mode, when known; else (at a
/// landing pad, where the unwinder leaves whatever mode) one state for each mode, each
/// knowing it, and the conditional changes of the segment then speak of it.
fn read_mode(mut s: State, r: u8) -> Vec<State> {
    match s.sm {
        Some(sm) => {
            s.set(r, Some(Fact::Sm(sm)));
            if s.free {
                s.cond_sm = Some(sm);
            }
            vec![s]
        }
        None => [false, true]
            .into_iter()
            .map(|sm| {
                let mut t = s.clone();
                t.sm = Some(sm);
                t.cond_sm = Some(sm);
                t.set(r, Some(Fact::Sm(sm)));
                t
            })
            .collect(),
    }
}

/// Whether a function with attributes `a` shares ZA (or ZT0, which needs PSTATE.ZA on)
/// with its caller: ZA is active at its entry and must be at its return.
fn shares_za(a: &Attrs) -> bool {
    !rules::has_private_za_interface(a)
}

/// State `s` going on to the instruction of `f` after `i` (none after the last).
fn fall_through(f: &CodeFunction, i: usize, s: State) -> Vec<(usize, State)> {
    if i + 1 < f.instructions.len() {
        vec![(i + 1, s)]
    } else {
        Vec::new()
    }
}

/// `want` as it applies when PSTATE.SM was `sm` (before the call, or at the entry).
fn concrete(want: &[Change], sm: bool) -> Vec<Change> {
    want.iter()
        .filter(|c| match c.when {
            When::Always => true,
            When::IfSmWas(x) => x == sm,
        })
        .copied()
        .collect()
}

impl<'a> FunctionAuditor<'a> {
    fn new(
        f: &'a CodeFunction,
        caller: Attrs,
        ir_calls: &[CallReport],
        lookup: &dyn Fn(&str) -> (Attrs, Source),
        noreturn: &dyn Fn(&str) -> bool,
        outlined: &HashMap<String, Outlined>,
    ) -> FunctionAuditor<'a> {
        // The IR's calls not yet matched, in order: by callee, and the indirect ones.
        let mut direct: HashMap<&str, VecDeque<usize>> = HashMap::new();
        let mut indirect_calls = VecDeque::new();
        for (i, c) in ir_calls.iter().enumerate() {
            if c.callee.starts_with("(indirect") {
                indirect_calls.push_back(i);
            } else {
                direct.entry(c.callee.as_str()).or_default().push_back(i);
            }
        }
        let mut ir_indirect = indirect_calls.iter().map(|&i| ir_calls[i].callee_attrs);
        let agreed = ir_indirect.next().filter(|a| ir_indirect.all(|b| b == *a));
        let mut by_register: HashMap<u8, Attrs> = HashMap::new();
        let pads = PadTable::new(f);
        let jumps: HashMap<usize, Vec<usize>> = f
            .jump_tables
            .iter()
            .filter_map(|t| {
                let mut to: Vec<usize> = t
                    .targets
                    .iter()
                    .filter_map(|&o| instruction_at(f, o))
                    .collect();
                to.sort_unstable();
                to.dedup();
                Some((instruction_at(f, t.br)?, to))
            })
            .collect();
        let mut calls = Vec::new();
        let mut inlined = HashMap::new();
        for (index, inst) in f.instructions.iter().enumerate() {
            // A `br` that is not a jump-table dispatch is an indirect tail call.
            let (callee, tail) = match (inst.op, &inst.target) {
                (Op::Bl(_) | Op::B(_), Some(t)) => {
                    let tail = matches!(inst.op, Op::B(_));
                    match outlined.get(t) {
                        // An outlined body: its tail call is the caller's call (a tail
                        // call when branched to), its `ret` a return to the caller (or
                        // the caller's return).
                        Some(o) => {
                            inlined.insert(index, o.body.clone());
                            match &o.tail {
                                Some(x) => (x.clone(), tail),
                                None => continue,
                            }
                        }
                        None => (t.clone(), tail),
                    }
                }
                (Op::Blr(_), _) => ("(indirect)".to_string(), false),
                (Op::Br(_), _) if !jumps.contains_key(&index) => ("(indirect)".to_string(), true),
                _ => continue,
            };
            if LLVM_OWN_CALLS.contains(&callee.as_str()) {
                continue;
            }
            let indirect = callee.starts_with('(');
            let matched = if indirect {
                indirect_calls.pop_front()
            } else {
                direct
                    .get_mut(callee.as_str())
                    .and_then(VecDeque::pop_front)
            };
            let register = match inst.op {
                Op::Blr(r) | Op::Br(r) => Some(r),
                _ => None,
            };
            let (callee_attrs, hidden, ends) = match matched {
                Some(i) => {
                    let c = &ir_calls[i];
                    (c.callee_attrs, c.hidden.is_some(), c.noreturn)
                }
                // An indirect call the optimizer duplicated (tail duplication): that of
                // the same register, else the IR's indirect calls' if they all agree.
                None if indirect => {
                    let same_reg = register.and_then(|r| by_register.get(&r)).copied();
                    (same_reg.or(agreed).unwrap_or_default(), false, false)
                }
                None => (lookup(&callee).0, false, false),
            };
            if let Some(r) = register {
                by_register.insert(r, callee_attrs);
            }
            let pad = pads.pad_of(inst.offset);
            let noreturn = ends || (!indirect && noreturn(&callee));
            calls.push(Site {
                index,
                callee,
                tail,
                callee_attrs,
                model: rules::call_model(&caller, &callee_attrs, pad.is_some()),
                hidden,
                noreturn,
                pad: pad.and_then(|p| instruction_at(f, p)),
            });
        }
        let mut audit = FunctionAuditor {
            f,
            caller,
            calls,
            jumps,
            inlined,
            site_at: HashMap::new(),
            found: Vec::new(),
            found_at: HashMap::new(),
            too_complex: false,
        };
        audit.index_sites();
        // A `b` to the function's very end that no path reaches goes to the empty block
        // unoptimized code leaves after a noreturn call, not into the next function.
        let reached = audit.reachable();
        let end = f.instructions.len() as u64 * 4;
        let before = audit.calls.len();
        audit.calls.retain(|c| {
            let inst = &f.instructions[c.index];
            let to_end = match inst.op {
                Op::B(off) => inst.offset.checked_add_signed(off) == Some(end),
                _ => false,
            };
            reached[c.index] || !to_end
        });
        if audit.calls.len() != before {
            audit.index_sites();
        }
        audit
    }

    /// Indexes the call sites by instruction.
    fn index_sites(&mut self) {
        self.site_at = self
            .calls
            .iter()
            .enumerate()
            .map(|(k, c)| (c.index, k))
            .collect();
    }

    fn inst(&self, index: usize) -> &Instruction {
        &self.f.instructions[index]
    }

    /// Records a departure found when the function was entered with PSTATE.SM = `case`.
    fn report(&mut self, case: bool, kind: Kind, index: usize, message: String) {
        let key = (kind, index, message);
        match self.found_at.get(&key) {
            Some(&at) => self.found[at].1[usize::from(case)] = true,
            None => {
                let mut cases = [false; 2];
                cases[usize::from(case)] = true;
                self.found_at.insert(key.clone(), self.found.len());
                self.found.push((key, cases));
            }
        }
    }

    /// The departures, in the order of the code; for a streaming-compatible function, one
    /// found under one entry mode only says which.
    fn departures(&self) -> Vec<Departure> {
        let compatible = self.caller.interface() == Interface::StreamingCompatible;
        let mut found = self.found.clone();
        found.sort_by_key(|((_, index, _), _)| *index);
        found
            .into_iter()
            .map(|((kind, index, mut message), cases)| {
                if compatible && cases != [true, true] {
                    let sm = u8::from(cases[1]);
                    message.push_str(&format!(" (when entered with PSTATE.SM = {sm})"));
                }
                if self.caller.old_za.any() && kind != Kind::UnexpectedChange {
                    message.push_str(OLD_SPELLING_NOTE);
                }
                let inst = &self.f.instructions[index];
                let instruction = match (&inst.op, &inst.target) {
                    (Op::Bl(_), Some(t)) => format!("bl {t}"),
                    (Op::B(_), Some(t)) => format!("b {t}"),
                    (op, _) => op.to_string(),
                };
                Departure {
                    kind,
                    function: self.f.name.clone(),
                    offset: inst.offset,
                    instruction,
                    message,
                }
            })
            .collect()
    }

    fn call_name(site: &Site) -> String {
        if site.callee.starts_with('(') {
            "an indirect callee".to_string()
        } else {
            format!("@{}", site.callee)
        }
    }

    /// The instruction index at `offset` bytes from instruction `index`, inside the
    /// function.
    fn index_at(&self, index: usize, offset: i64) -> Option<usize> {
        let to = self.inst(index).offset.checked_add_signed(offset)?;
        (to % 4 == 0)
            .then(|| usize::try_from(to / 4).ok())
            .flatten()
            .filter(|&i| i < self.f.instructions.len() && self.inst(i).offset == to)
    }

    /// Runs the dataflow for both entry modes of a streaming-compatible function, else for
    /// the entry mode of its interface.
    fn run(&mut self) {
        if self.f.instructions.is_empty() {
            return;
        }
        let cases: &[bool] = match self.caller.interface() {
            Interface::StreamingCompatible => &[false, true],
            Interface::Streaming => &[true],
            Interface::Normal => &[false],
        };
        for &case in cases {
            self.run_case(case);
        }
        if self.too_complex {
            self.report(
                false,
                Kind::TooComplex,
                0,
                format!(
                    "more than {MAX_STATES} states of the code's paths: the audit of this \
                     function is incomplete"
                ),
            );
        }
    }

    /// The forward dataflow for one entry mode: the set of states at each instruction,
    /// each state one class of paths (sets are joined by union, so a state never loses
    /// what one path knows). Mode tests (`tbz`/`tbnz` on bit 0 of a register holding
    /// PSTATE.SM) follow only the edge the mode takes; other branches follow both.
    fn run_case(&mut self, case: bool) {
        let model = rules::function_model(&self.caller);
        let n = self.f.instructions.len();
        let entry = State {
            anchor: Anchor::Entry,
            seen: Vec::new(),
            sm: Some(case),
            regs: Vec::new(),
            slots: Vec::new(),
            cond_sm: None,
            free: false,
            // A new-ZA body is entered with TPIDR2_EL0 null or pointing at its caller's
            // block.
            tpidr2_set: if model.commit_lazy_save {
                None
            } else {
                Some(false)
            },
            za: shares_za(&self.caller).then_some(true),
            block: None,
            buffer_live: false,
            zt0_spilled: false,
            pending_restore: None,
            pending_fill: None,
            committed: !model.commit_lazy_save,
            za_on: None,
            zeroed_za: !model.zero_za,
            zeroed_zt0: !model.zero_zt0,
        };
        let mut visited: std::collections::HashSet<(usize, State)> = Default::default();
        let reached = self.reachable();
        let mut seeded = reached.clone();
        let mut work = vec![(0, entry)];
        // Every instruction before it is seeded (seeding only ever sets), so the search for
        // the next unseeded one resumes here: linear in the function, not quadratic.
        let mut unseeded = 0;
        loop {
            while let Some((i, s)) = work.pop() {
                if visited.len() >= MAX_STATES {
                    self.too_complex = true;
                    return;
                }
                if !visited.insert((i, s.clone())) {
                    continue;
                }
                seeded[i] = true;
                work.extend(self.step(case, &model, i, s));
            }
            // Code no branch reaches (the targets of a jump table): from an unknown
            // state. (Code only a mode test that goes the other way reaches is not
            // run in this entry mode.)
            let Some(i) = (unseeded..n).find(|&i| !seeded[i]) else {
                break;
            };
            unseeded = i + 1;
            seeded[i] = true;
            work.push((
                i,
                State {
                    anchor: Anchor::Unknown,
                    seen: Vec::new(),
                    sm: None,
                    regs: Vec::new(),
                    slots: Vec::new(),
                    cond_sm: None,
                    free: true,
                    tpidr2_set: None,
                    za: None,
                    block: None,
                    buffer_live: false,
                    zt0_spilled: true,
                    pending_restore: None,
                    pending_fill: None,
                    committed: true,
                    za_on: None,
                    zeroed_za: true,
                    zeroed_zt0: true,
                },
            ));
        }
    }

    /// Which instructions some branch reaches from the entry or a landing pad, every
    /// conditional branch taken both ways (a `br` that is not a call goes nowhere known).
    fn reachable(&self) -> Vec<bool> {
        let n = self.f.instructions.len();
        let mut seen = vec![false; n];
        let mut work = vec![0];
        work.extend(
            self.f
                .landing_pads
                .iter()
                .filter_map(|p| instruction_at(self.f, p.pad)),
        );
        while let Some(i) = work.pop() {
            if i >= n || std::mem::replace(&mut seen[i], true) {
                continue;
            }
            let tail = self
                .site_at
                .get(&i)
                .is_some_and(|&k| self.calls[k].tail || self.calls[k].noreturn);
            match self.inst(i).op {
                _ if tail => {}
                _ if self.site_at.contains_key(&i) => work.push(i + 1),
                Op::Ret(_) => {}
                Op::Br(_) => work.extend(self.jumps.get(&i).into_iter().flatten()),
                Op::B(off) => work.extend(self.index_at(i, off)),
                Op::BCond(_, offset) | Op::Cb { offset, .. } | Op::Tb { offset, .. } => {
                    work.push(i + 1);
                    work.extend(self.index_at(i, offset));
                }
                _ => work.push(i + 1),
            }
        }
        seen
    }

    /// One instruction on the paths of state `s`: the states after it, with where they go.
    fn step(
        &mut self,
        case: bool,
        model: &rules::FunctionModel,
        i: usize,
        s: State,
    ) -> Vec<(usize, State)> {
        let f = self.f;
        let next = |s: State| fall_through(f, i, s);
        if let Some(body) = self.inlined.get(&i).cloned() {
            let mut states = vec![s];
            for inst in &body {
                states = states
                    .into_iter()
                    .flat_map(|s| self.apply(case, i, inst, s))
                    .collect();
            }
            return states
                .into_iter()
                .flat_map(|s| match (self.site_at.get(&i), self.inst(i).op) {
                    (Some(&k), _) => self.call_site(case, model, i, k, s),
                    (None, Op::B(_)) => {
                        self.arrive(case, model, i, &s, None);
                        Vec::new()
                    }
                    (None, _) => next(s),
                })
                .collect();
        }
        if let Some(&k) = self.site_at.get(&i) {
            return self.call_site(case, model, i, k, s);
        }
        let inst = self.inst(i).clone();
        match inst.op {
            Op::Ret(_) => {
                self.arrive(case, model, i, &s, None);
                Vec::new()
            }
            Op::B(off) => self.index_at(i, off).map(|t| (t, s)).into_iter().collect(),
            Op::Br(_) => {
                let targets = self.jumps.get(&i).into_iter().flatten();
                targets.map(|&t| (t, s.clone())).collect()
            }
            Op::BCond(_, off) => {
                let mut out = next(s.clone());
                out.extend(self.index_at(i, off).map(|t| (t, s)));
                out
            }
            Op::Cb {
                nonzero,
                reg,
                offset,
            } => {
                // A test of TPIDR2_EL0: zero means no lazy save is pending (nothing to
                // commit); non-zero after a call means the callee did not commit the
                // save, so ZA is intact and needs no restore.
                let tpidr2 = s.fact(reg) == Some(Fact::Tpidr2);
                let edge = |mut s: State, zero: bool| {
                    if tpidr2 && zero {
                        s.committed = true;
                        s.tpidr2_set = Some(false);
                    } else if tpidr2 {
                        s.pending_restore = None;
                        s.tpidr2_set.get_or_insert(true);
                    }
                    s
                };
                let mut out = next(edge(s.clone(), nonzero));
                out.extend(self.index_at(i, offset).map(|t| (t, edge(s, !nonzero))));
                out
            }
            Op::Tb {
                nonzero,
                reg,
                bit,
                offset,
            } => {
                // The mode the register holds, when known from its source; a test of
                // anything else goes both ways.
                let value = match s.fact(reg) {
                    Some(Fact::Sm(v)) if bit == 0 => Some(v),
                    _ => None,
                };
                let target = self.index_at(i, offset);
                match value {
                    Some(v) if v == nonzero => target.map(|t| (t, s)).into_iter().collect(),
                    Some(_) => next(s),
                    None => {
                        let mut out = next(s.clone());
                        out.extend(target.map(|t| (t, s)));
                        out
                    }
                }
            }
            _ => self
                .apply(case, i, &inst, s)
                .into_iter()
                .flat_map(next)
                .collect(),
        }
    }

    /// Call site `k` at instruction `i` on the paths of state `s`: the checks where the
    /// segment ends, then the states after the call (and at its landing pad).
    fn call_site(
        &mut self,
        case: bool,
        model: &rules::FunctionModel,
        i: usize,
        k: usize,
        s: State,
    ) -> Vec<(usize, State)> {
        let f = self.f;
        let next = |s: State| fall_through(f, i, s);
        self.arrive(case, model, i, &s, Some(k));
        let site = &self.calls[k];
        let mut out = Vec::new();
        if let Some(pad) = site.pad {
            let mut at_pad = s.anchored(Anchor::Pad(k));
            // The unwinder restores the callee-saved registers; the mode is what it
            // leaves.
            at_pad.sm = None;
            at_pad.cond_sm = None;
            at_pad.clobber_call();
            at_pad.pending_restore = None;
            at_pad.pending_fill = None;
            at_pad.za = None;
            if site.model.lazy_za_save {
                at_pad.tpidr2_set = None;
            }
            out.push((pad, at_pad));
        }
        if site.tail || site.noreturn {
            return out;
        }
        let mut after = s.anchored(Anchor::Call(k));
        after.clobber_call();
        after.pending_restore = site.model.lazy_za_save.then_some(k);
        after.pending_fill = site.model.preserve_zt0.then_some(k);
        // A private-ZA callee returns with ZA off or dormant; one that committed the
        // lazy save returns with TPIDR2_EL0 null.
        if !shares_za(&site.callee_attrs) {
            after.za = None;
        }
        if site.model.lazy_za_save {
            after.tpidr2_set = None;
        }
        out.extend(next(after));
        out
    }

    /// An instruction that does not branch, at (or, for a machine-outlined body, called
    /// from) instruction `i`: the states after it.
    fn apply(&mut self, case: bool, i: usize, inst: &Instruction, mut s: State) -> Vec<State> {
        match inst.op {
            Op::Smstart(_) | Op::Smstop(_) => {
                for insn in changes_of(inst.op) {
                    if s.seen.len() < MAX_SEEN {
                        s.seen.push((i, insn));
                    }
                    match insn {
                        Insn::SmstartSm => s.sm = Some(true),
                        Insn::SmstopSm => s.sm = Some(false),
                        Insn::SmstopZa => {
                            // A lazy save not known to be committed (by the callee, or
                            // by this new-ZA body for its caller) is lost with ZA.
                            let uncommitted = s.tpidr2_set == Some(true)
                                || (s.tpidr2_set.is_none()
                                    && (s.pending_restore.is_some() || !s.committed));
                            if uncommitted && s.za != Some(false) {
                                self.report(
                                    case,
                                    Kind::ZaOff,
                                    i,
                                    "PSTATE.ZA turned off while TPIDR2_EL0 may point at a lazy \
                                     save not yet committed: the saved ZA is lost"
                                        .to_string(),
                                );
                            }
                            s.za = Some(false);
                        }
                        Insn::SmstartZa if s.anchor == Anchor::Entry && s.za_on.is_none() => {
                            s.za = Some(true);
                            s.za_on = Some(i);
                            if !s.committed {
                                self.report(
                                    case,
                                    Kind::LazySaveNotCommitted,
                                    i,
                                    "lazy save not committed: a new-ZA function must call \
                                     `__arm_tpidr2_save` when TPIDR2_EL0 is set, before it \
                                     turns ZA on"
                                        .to_string(),
                                );
                                s.committed = true;
                            }
                        }
                        Insn::SmstartZa => s.za = Some(true),
                    }
                }
            }
            Op::Msr(SysReg::Tpidr2, r) => {
                s.tpidr2_set = Some(r != 31 && s.fact(r) != Some(Fact::Zero));
                s.block = match s.fact(r) {
                    Some(Fact::Frame(b, o)) if r != 31 => Some((b, o)),
                    _ => None,
                };
            }
            Op::Mrs(r, SysReg::Svcr) => {
                return read_mode(s, r);
            }
            Op::Msr(SysReg::Svcr, r) => {
                // PSTATE.SM and PSTATE.ZA become bits of a register: guessing them would
                // judge the rest of the path on a mode it may not have.
                self.report(
                    case,
                    Kind::Unfollowed,
                    i,
                    format!(
                        "`{}` sets PSTATE.SM and PSTATE.ZA from a register, which the audit \
                         does not follow: the code after it on this path is not audited",
                        Op::Msr(SysReg::Svcr, r)
                    ),
                );
                return Vec::new();
            }
            Op::Mrs(r, SysReg::Tpidr2) => s.set(r, Some(Fact::Tpidr2)),
            Op::Mov(d, 31) => s.set(d, Some(Fact::Zero)),
            Op::Mov(d, r) | Op::And1(d, r) => s.set(d, s.fact(r)),
            Op::ZeroZa => s.zeroed_za = true,
            Op::ZeroZt0 => s.zeroed_zt0 = true,
            Op::StrZt0(_) => s.zt0_spilled = true,
            Op::LdrZt0(_) => s.pending_fill = None,
            Op::Bl(_) | Op::Blr(_) => {
                match inst.target.as_deref() {
                    Some("__arm_tpidr2_restore") => {
                        if s.za != Some(true) && !s.free {
                            self.report(
                                case,
                                Kind::ZaOff,
                                i,
                                "`__arm_tpidr2_restore` called with PSTATE.ZA not on: the \
                                 restore needs `smstart za` first"
                                    .to_string(),
                            );
                        }
                        if let Some((b, o)) = s.block {
                            if s.fact(0) != Some(Fact::Frame(b, o)) && !s.free {
                                self.report(
                                    case,
                                    Kind::LazySaveNotRestored,
                                    i,
                                    "`__arm_tpidr2_restore` called without the TPIDR2 block \
                                     TPIDR2_EL0 was set to in x0"
                                        .to_string(),
                                );
                            }
                        }
                        s.pending_restore = None;
                    }
                    Some("__arm_tpidr2_save") => s.committed = true,
                    _ => {}
                }
                let sme_state = inst.target.as_deref() == Some("__arm_sme_state");
                s.clobber_routine(inst.target.as_deref());
                if sme_state {
                    return read_mode(s, 0);
                }
            }
            Op::Other(word) => s.other(word),
            _ => {}
        }
        vec![s]
    }

    /// The checks where a path segment ends: at call site `k` (`None`: a return).
    fn arrive(
        &mut self,
        case: bool,
        model: &rules::FunctionModel,
        i: usize,
        s: &State,
        k: Option<usize>,
    ) {
        let caller_sm = case;
        // What must have happened since the anchor: its changes, then the call's (or the
        // exit's).
        let (head, from) = match s.anchor {
            Anchor::Entry => (Some(model.entry.clone()), 0),
            Anchor::Call(j) if self.calls[j].tail => (Some(Vec::new()), i),
            Anchor::Call(j) => (
                Some(self.calls[j].model.after.clone()),
                self.calls[j].index + 1,
            ),
            Anchor::Pad(j) => (
                Some(self.calls[j].model.after_exception.clone()),
                self.calls[j].pad.unwrap_or(i),
            ),
            Anchor::Unknown => (None, i),
        };
        // A path from code no branch reaches that has not read the mode: what its
        // conditional changes speak of is not known.
        let head = head.filter(|_| !s.free || s.cond_sm.is_some());
        // The conditional changes after a call speak of the mode before it: the entry's,
        // or the one read on a path whose mode was not known (code after a landing pad
        // or reached by no branch).
        let head_sm = match s.anchor {
            Anchor::Call(_) => s.cond_sm.unwrap_or(caller_sm),
            _ => caller_sm,
        };
        let tail = match k {
            Some(k) => self.calls[k].model.before.clone(),
            None => model.exit.clone(),
        };
        if let Some(head) = head {
            self.compare(
                case,
                s,
                &concrete(&head, head_sm),
                &concrete(&tail, s.cond_sm.unwrap_or(caller_sm)),
                from,
                i,
                k,
            );
        }
        for (pending, kind, what) in [
            (
                s.pending_restore,
                Kind::LazySaveNotRestored,
                "lazy ZA save not restored: no `__arm_tpidr2_restore` after the call to",
            ),
            (
                s.pending_fill,
                Kind::Zt0NotPreserved,
                "ZT0 not preserved: no `ldr zt0` after the call to",
            ),
        ] {
            if let Some(j) = pending {
                let name = Self::call_name(&self.calls[j]);
                let suffix = if kind == Kind::Zt0NotPreserved {
                    ", which does not share ZT0"
                } else {
                    ""
                };
                self.report(
                    case,
                    kind,
                    self.calls[j].index,
                    format!("{what} {name}{suffix}"),
                );
            }
        }
        if s.anchor == Anchor::Entry {
            let at = s.za_on.unwrap_or(0);
            if !s.committed {
                self.report(
                    case,
                    Kind::LazySaveNotCommitted,
                    at,
                    "lazy save not committed: a new-ZA function must call `__arm_tpidr2_save` \
                     when TPIDR2_EL0 is set, before it turns ZA on"
                        .to_string(),
                );
            }
            for (done, what) in [
                (s.zeroed_za, "ZA (`zero {za}`)"),
                (s.zeroed_zt0, "ZT0 (`zero { zt0 }`)"),
            ] {
                if !done {
                    self.report(
                        case,
                        Kind::NotZeroed,
                        at,
                        format!("a new-state function must zero {what} after enabling ZA"),
                    );
                }
            }
        }
        let Some(k) = k else {
            if shares_za(&self.caller) && s.za == Some(false) {
                self.report(
                    case,
                    Kind::ZaOff,
                    i,
                    "PSTATE.ZA is off at the return of a function sharing ZA".to_string(),
                );
            }
            // A function without ZA state may set TPIDR2_EL0 for its caller (a runtime's
            // own helper does): only one with ZA state must leave it null.
            let za_state = shares_za(&self.caller) || model.commit_lazy_save;
            if za_state && s.tpidr2_set == Some(true) {
                self.report(
                    case,
                    Kind::LazySaveNotReset,
                    i,
                    "TPIDR2_EL0 still points at a lazy-save block at the return: it must be \
                     reset to null (`msr TPIDR2_EL0, xzr`) once the save is restored or \
                     committed"
                        .to_string(),
                );
            }
            return;
        };
        let site = &self.calls[k];
        let name = Self::call_name(site);
        let mut found = Vec::new();
        if site.model.lazy_za_save && s.tpidr2_set == Some(false) {
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
        if let (true, Some(Some(missing))) = (
            site.model.lazy_za_save && s.tpidr2_set == Some(true),
            s.block.map(|b| s.block_lacks(b)),
        ) {
            found.push((
                Kind::LazySaveMissing,
                format!(
                    "lazy ZA save incomplete at the call to {name}: the TPIDR2 block \
                     TPIDR2_EL0 points at lacks {missing}"
                ),
            ));
        }
        if site.model.preserve_zt0 && !s.zt0_spilled {
            found.push((
                Kind::Zt0NotPreserved,
                format!("ZT0 not preserved: no `str zt0` before the call to {name}, which does not share ZT0"),
            ));
        }
        if shares_za(&site.callee_attrs) {
            if s.za == Some(false) {
                found.push((
                    Kind::ZaOff,
                    format!("PSTATE.ZA is off at the call to {name}, which shares ZA"),
                ));
            }
            if s.tpidr2_set == Some(true) {
                found.push((
                    Kind::LazySaveNotReset,
                    format!(
                        "TPIDR2_EL0 still points at a lazy-save block at the call to {name}, \
                         which shares ZA: it must be reset to null (`msr TPIDR2_EL0, xzr`) \
                         once the save is restored or committed"
                    ),
                ));
            }
        } else if site.model.lazy_za_save && s.za == Some(false) {
            found.push((
                Kind::ZaOff,
                format!(
                    "PSTATE.ZA is off at the call to {name}, which needs a lazy save: ZA's \
                     contents are lost"
                ),
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
            self.report(case, kind, i, message);
        }
    }

    /// The mode changes of one path segment (from the anchor at instruction `from` to
    /// instruction `to`: call site `k`, or a return) against `head` then `tail`.
    #[allow(clippy::too_many_arguments)]
    fn compare(
        &mut self,
        case: bool,
        s: &State,
        head: &[Change],
        tail: &[Change],
        from: usize,
        to: usize,
        k: Option<usize>,
    ) {
        let got: Vec<Change> = s
            .seen
            .iter()
            .map(|&(_, insn)| Change {
                insn,
                when: When::Always,
            })
            .collect();
        let want: Vec<Change> = head
            .iter()
            .chain(tail)
            .map(|c| Change {
                insn: c.insn,
                when: When::Always,
            })
            .collect();
        let prev = match s.anchor {
            Anchor::Call(j) => Some(Self::call_name(&self.calls[j])),
            _ => None,
        };
        let next = k.map(|k| Self::call_name(&self.calls[k]));
        let originals: Vec<Change> = head.iter().chain(tail).copied().collect();
        for idx in missing_indices(&want, &got) {
            let c = originals[idx];
            let in_head = idx < head.len();
            let (kind, place, at) = if in_head {
                match (s.anchor, &prev) {
                    (Anchor::Pad(j), _) => {
                        let name = Self::call_name(&self.calls[j]);
                        let offset = self.inst(self.calls[j].index).offset;
                        (
                            Kind::LandingPad,
                            format!(
                                "at the exception landing pad of the call to {name} at \
                                 +{offset:#x} (spec 004 §2, \"After exception\")"
                            ),
                            from,
                        )
                    }
                    (_, Some(p)) => (
                        Kind::MissingChange,
                        format!("after the call to {p} (spec 004 §2)"),
                        from.min(to),
                    ),
                    (_, None) => (
                        Kind::MissingChange,
                        "at the function's entry (spec 004 §2)".to_string(),
                        from.min(to),
                    ),
                }
            } else {
                match &next {
                    Some(nm) => (
                        Kind::MissingChange,
                        format!("before the call to {nm} (spec 004 §2)"),
                        to,
                    ),
                    None => (
                        Kind::MissingChange,
                        "before the function returns (spec 004 §2)".to_string(),
                        to,
                    ),
                }
            };
            self.report(case, kind, at, format!("missing `{c}` {place}"));
        }
        // PSTATE.ZA changes are judged only in a function without ZA or ZT0 state (a
        // body with state turns ZA on and off itself, `llvm.aarch64.sme.za.enable` and
        // `disable`): it has no reason to, and turning ZA off there loses a caller's
        // uncommitted lazy save.
        let judge_za =
            self.caller.za() == attrs::State::None && self.caller.zt0() == attrs::State::None;
        let compatible = |site: Option<&Site>| {
            site.is_some_and(|s| s.callee_attrs.interface() == Interface::StreamingCompatible)
        };
        let prev_compatible = match s.anchor {
            Anchor::Call(j) => compatible(self.calls.get(j)),
            _ => false,
        };
        let next_compatible = compatible(k.and_then(|k| self.calls.get(k)));
        for &(i, insn) in &s.seen {
            if (!insn.is_sm() && !judge_za) || want.iter().any(|w| w.insn == insn) {
                continue;
            }
            let c = Change {
                insn,
                when: When::Always,
            };
            let message = if !insn.is_sm() {
                format!(
                    "`{c}` in a function without ZA or ZT0 state (spec 004 §3: turning ZA off \
                     loses a caller's uncommitted lazy save, turning it on leaves it on)"
                )
            } else if prev_compatible || next_compatible {
                let name = if next_compatible {
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
            self.report(case, Kind::UnexpectedChange, i, message);
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
