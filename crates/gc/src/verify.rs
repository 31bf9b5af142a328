//! The GC invariants of spec 003 ("Инварианты"), checked on LLVM IR.
//!
//! Late root placement can only find every GC-tracked pointer and every use of one if the
//! frontend (and the optimizer after it) keeps to a few rules about the address spaces
//! ([`crate::addrspace`]). This module checks them, one [`Rule`] each, and reports every
//! break as a [`Violation`] naming the rule, the function and the instruction:
//!
//! - [`Rule::AddrSpaceCast`]: the only casts involving the GC spaces are
//!   `0 -> 10/11/12`, `10 -> 11` and `10 -> 12`. In particular Derived -> CalleeRooted is
//!   forbidden (a CalleeRooted pointer must still fit in a GC slot), so is Tracked ->
//!   untracked (that is what `julia.pointer_from_objref` is for), and so is anything
//!   involving Loaded (13). Constant-expression casts are checked too.
//! - [`Rule::TrackedGep`]: no `getelementptr` in the Tracked space (scalar or vector): its
//!   result could not be stored in a GC slot; decay to Derived first.
//! - [`Rule::IntPtrCast`]: no `inttoptr` producing and no `ptrtoint` consuming a pointer in
//!   10-13 (it would make some integers GC pointers). A frontend injects constants with
//!   `inttoptr` in address space 0 and then casts.
//! - [`Rule::CalleeRootedUse`]: the only use of a CalleeRooted (12) value is as an argument
//!   of a call whose parameter has that type: no load or store through it, no phi, select,
//!   GEP, compare, operand bundle, variadic argument, and so on. (Casting it is caught by
//!   [`Rule::AddrSpaceCast`], storing it by [`Rule::DecayedLoadStore`], returning it by
//!   [`Rule::Return`], converting it to an integer by [`Rule::IntPtrCast`], passing it to
//!   `julia.call` by [`Rule::JlcallArgument`]: each break is reported once.)
//! - [`Rule::DecayedLoadStore`]: no load, store, `atomicrmw` or `cmpxchg` of a value that
//!   holds a Derived (11) or CalleeRooted (12) pointer (loading and storing *through* a
//!   Derived pointer is the normal way to reach an object's fields).
//! - [`Rule::Return`]: a function returns Tracked pointers only: no return value holding a
//!   pointer in 11, 12 or 13 (scalar, vector element or struct field).
//! - [`Rule::JlcallArgument`]: the arguments of `julia.call` (and Julia's `julia.call2`)
//!   after the function pointer are Tracked (10) pointers, as the jlcall ABI's
//!   `jl_value_t*` array requires; the function pointer itself is untracked (0).
//! - [`Rule::PointerFromObjref`]: `julia.pointer_from_objref` takes a Tracked pointer and
//!   gives an untracked one, as the spec declares it (its lowering is a 10 -> 0 cast).
//! - [`Rule::GcPreserveEnd`]: `llvm.julia.gc_preserve_end` takes the token of a
//!   `llvm.julia.gc_preserve_begin` (its region is defined by that pairing).
//! - [`Rule::PgcstackEntry`] (a warning): `julia.get_pgcstack` is called in the entry block.
//!   The spec does not require this, and Locus's lowering moves a later call there; but
//!   Julia's own pass finds the call only in the entry block, and leaves a function that
//!   makes it elsewhere without roots.
//!
//! Julia's own verifier (`llvm-gc-invariant-verifier.cpp`) is laxer in places, where this
//! one follows the spec's text: it accepts `0 -> 13` casts and casts from spaces other than
//! 0 into the GC spaces, checks only scalar pointers in loads, stores and returns, forbids
//! GEPs on Tracked pointers only in its "strong" mode, checks no constant expressions, and
//! of the uses of CalleeRooted values forbids only loads and stores through them.
//!
//! Constant null, `undef` and `poison` CalleeRooted pointers refer to no object and are not
//! reported as uses. Global initializers are not code and are not checked.

use std::collections::HashSet;
use std::fmt;

use locus_llvm::ir::{Call, Function, Instruction, Opcode, Type, Value, ValueKind};
use locus_llvm::Module;

use crate::addrspace::is_gc;
use crate::contract::{
    CALLEE_ROOTED, DERIVED, GET_PGCSTACK, JULIA_CALL, JULIA_CALL2, LOADED, POINTER_FROM_OBJREF,
    PRESERVE_BEGIN, PRESERVE_END, TRACKED, UNTRACKED,
};

/// The jlcall marker calls.
const JULIA_CALLS: &[&str] = &[JULIA_CALL, JULIA_CALL2];

/// The casts allowed among the GC spaces, as the help and messages print them.
const ALLOWED_CASTS: &str = "allowed: 0 -> 10/11/12, 10 -> 11, 10 -> 12";

/// How bad a violation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The module breaks an invariant of the spec: lowering it would be unsound.
    Error,
    /// The module breaks a Locus convention that the spec does not state.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One invariant (see the module documentation for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Only `0 -> 10/11/12`, `10 -> 11` and `10 -> 12` among the GC address spaces.
    AddrSpaceCast,
    /// No `getelementptr` producing a Tracked pointer.
    TrackedGep,
    /// No `inttoptr` into, or `ptrtoint` out of, address spaces 10-13.
    IntPtrCast,
    /// CalleeRooted values only as call arguments.
    CalleeRootedUse,
    /// No load or store of Derived or CalleeRooted values.
    DecayedLoadStore,
    /// Only Tracked pointers returned.
    Return,
    /// `julia.call` arguments are Tracked.
    JlcallArgument,
    /// `julia.pointer_from_objref` goes from Tracked to untracked.
    PointerFromObjref,
    /// `llvm.julia.gc_preserve_end` ends a `gc_preserve_begin`.
    GcPreserveEnd,
    /// `julia.get_pgcstack` in the entry block (a warning).
    PgcstackEntry,
}

impl Rule {
    /// Every rule, in the order of the module documentation.
    pub const ALL: [Rule; 10] = [
        Rule::AddrSpaceCast,
        Rule::TrackedGep,
        Rule::IntPtrCast,
        Rule::CalleeRootedUse,
        Rule::DecayedLoadStore,
        Rule::Return,
        Rule::JlcallArgument,
        Rule::PointerFromObjref,
        Rule::GcPreserveEnd,
        Rule::PgcstackEntry,
    ];

    /// The rule's short name, as violations print it (`addrspacecast`, `tracked-gep`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Rule::AddrSpaceCast => "addrspacecast",
            Rule::TrackedGep => "tracked-gep",
            Rule::IntPtrCast => "int-ptr-cast",
            Rule::CalleeRootedUse => "callee-rooted-use",
            Rule::DecayedLoadStore => "decayed-load-store",
            Rule::Return => "return",
            Rule::JlcallArgument => "jlcall-argument",
            Rule::PointerFromObjref => "pointer-from-objref",
            Rule::GcPreserveEnd => "gc-preserve-end",
            Rule::PgcstackEntry => "pgcstack-entry",
        }
    }

    /// The rule whose [`Rule::name`] is `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
    }

    /// What the rule requires, in one line.
    #[must_use]
    pub fn summary(self) -> &'static str {
        match self {
            Rule::AddrSpaceCast => {
                "only 0 -> 10/11/12, 10 -> 11 and 10 -> 12 casts involve the GC spaces"
            }
            Rule::TrackedGep => "no getelementptr on a Tracked (10) pointer",
            Rule::IntPtrCast => "no inttoptr into, or ptrtoint out of, address spaces 10-13",
            Rule::CalleeRootedUse => "CalleeRooted (12) values are only passed to calls",
            Rule::DecayedLoadStore => "no load or store of Derived (11) or CalleeRooted values",
            Rule::Return => "only Tracked pointers are returned (no 11, 12 or 13)",
            Rule::JlcallArgument => "julia.call arguments after the function are Tracked",
            Rule::PointerFromObjref => "julia.pointer_from_objref maps Tracked to untracked",
            Rule::GcPreserveEnd => "gc_preserve_end takes a gc_preserve_begin token",
            Rule::PgcstackEntry => "julia.get_pgcstack is called in the entry block",
        }
    }

    /// Whether a break of the rule is an error or a warning.
    #[must_use]
    pub fn severity(self) -> Severity {
        match self {
            Rule::PgcstackEntry => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One break of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule broken.
    pub rule: Rule,
    /// The function, without `@`.
    pub function: String,
    /// The instruction, as LLVM prints it (on one line).
    pub instruction: String,
    /// What is wrong.
    pub message: String,
}

impl Violation {
    /// The rule's severity.
    #[must_use]
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }

    /// Whether this is an error (not a warning).
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.severity() == Severity::Error
    }
}

impl fmt::Display for Violation {
    /// `RULE: function @F, instruction `I`: MESSAGE`, on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: function @{}, instruction `{}`: {}",
            self.rule, self.function, self.instruction, self.message
        )
    }
}

/// How strict the check is.
///
/// Lenient (the default) accepts what Julia's own verifier accepts and the lowering
/// handles: `getelementptr` on Tracked (10) pointers (Julia checks that only in its
/// "strong" mode, since LLVM's optimizer makes them), CalleeRooted (12) values in phis,
/// selects, vector and GEP operations (the lowering lifts them to their tracked bases), and
/// casts from untracked (0) to Loaded (13), and `julia.pointer_from_objref` on a Derived (11)
/// pointer. Strict reports those as well.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Report every rule as written in spec 003.
    pub strict: bool,
}

impl VerifyOptions {
    /// Every rule.
    pub const STRICT: VerifyOptions = VerifyOptions { strict: true };
}

/// Checks every function defined in `module`; the violations in module order, then
/// instruction order.
#[must_use]
pub fn verify_module(module: &Module<'_>, options: VerifyOptions) -> Vec<Violation> {
    module
        .function_list()
        .into_iter()
        .flat_map(|f| verify_function(f, options))
        .collect()
}

/// Checks one function (nothing for a declaration).
#[must_use]
pub fn verify_function(function: Function<'_>, options: VerifyOptions) -> Vec<Violation> {
    if function.is_declaration() {
        return Vec::new();
    }
    let mut checker = Checker {
        function,
        name: function.name(),
        out: Vec::new(),
        strict: options.strict,
    };
    for inst in function.instructions() {
        checker.instruction(inst);
    }
    checker.out
}

/// The name the messages give an address space.
fn space_name(space: u32) -> String {
    match space {
        UNTRACKED => "untracked (0)".into(),
        TRACKED => "Tracked (10)".into(),
        DERIVED => "Derived (11)".into(),
        CALLEE_ROOTED => "CalleeRooted (12)".into(),
        LOADED => "Loaded (13)".into(),
        other => format!("address space {other}"),
    }
}

/// The address space of a pointer or vector of pointers.
fn scalar_space(ty: Type<'_>) -> Option<u32> {
    ty.scalar().address_space()
}

/// The spaces among `wanted` of the pointers `ty` holds, by name, joined with "and".
fn held_spaces(ty: Type<'_>, wanted: &[u32]) -> Option<String> {
    let held: Vec<String> = ty
        .pointer_address_spaces()
        .into_iter()
        .filter(|s| wanted.contains(s))
        .map(space_name)
        .collect();
    (!held.is_empty()).then(|| held.join(" and "))
}

fn holds_space(ty: Type<'_>, space: u32) -> bool {
    ty.holds_pointer_in(|s| s == space)
}

/// LLVM's text on one line (instructions print on one line; this is a guard).
fn one_line(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines.join(" ")
}

/// An operand as it appears in an instruction: `ptr addrspace(12) %c`, `ptr @g`,
/// `ptr addrspace(12) null` (an unnamed instruction: the whole instruction).
fn operand_text(v: Value<'_>) -> String {
    let name = v.name();
    let sigil = if v.is_global() {
        "@"
    } else if matches!(v.kind(), ValueKind::Instruction | ValueKind::Argument) {
        "%"
    } else {
        return one_line(&v.print());
    };
    if name.is_empty() {
        one_line(&v.print())
    } else {
        format!("{} {sigil}{name}", v.ty().print())
    }
}

/// Whether `from -> to` is an allowed cast; otherwise why not.
fn cast_problem(from: u32, to: u32, strict: bool) -> Option<String> {
    if !is_gc(from) && !is_gc(to) {
        return None;
    }
    // Julia's verifier accepts any cast out of untracked memory; the frontend takes
    // responsibility for such pointers (spec 003), and the lowering roots nothing for them.
    if !strict && from == UNTRACKED {
        return None;
    }
    let allowed = matches!(
        (from, to),
        (UNTRACKED, TRACKED | DERIVED | CALLEE_ROOTED) | (TRACKED, DERIVED | CALLEE_ROOTED)
    );
    if allowed {
        return None;
    }
    let why = match (from, to) {
        (DERIVED, CALLEE_ROOTED) => {
            "; Derived -> CalleeRooted is forbidden explicitly: a CalleeRooted pointer must \
             still fit in a GC slot, and a derived pointer does not"
        }
        (TRACKED, UNTRACKED) => {
            "; a raw pointer to an object comes from julia.pointer_from_objref, whose caller \
             keeps the object rooted"
        }
        (DERIVED | CALLEE_ROOTED, _) => {
            "; a decayed pointer never goes back: the root placement could not find its base"
        }
        (LOADED, _) | (_, LOADED) => "; Loaded pointers are only made by loads",
        _ => "",
    };
    Some(format!(
        "addrspacecast from {} to {} is not allowed ({ALLOWED_CASTS}){why}",
        space_name(from),
        space_name(to)
    ))
}

struct Checker<'m> {
    function: Function<'m>,
    name: String,
    out: Vec<Violation>,
    strict: bool,
}

impl<'m> Checker<'m> {
    fn report(&mut self, rule: Rule, inst: Instruction<'m>, message: String) {
        self.out.push(Violation {
            rule,
            function: self.name.clone(),
            instruction: one_line(&inst.print()),
            message,
        });
    }

    fn instruction(&mut self, inst: Instruction<'m>) {
        let op = |i: u32| inst.operand(i);
        match inst.opcode() {
            Opcode::AddrSpaceCast => {
                if let (Some(src), Some(to)) = (op(0), scalar_space(inst.ty())) {
                    if let Some(from) = scalar_space(src.ty()) {
                        if let Some(problem) = cast_problem(from, to, self.strict) {
                            self.report(Rule::AddrSpaceCast, inst, problem);
                        }
                    }
                }
            }
            Opcode::GetElementPtr if self.strict && scalar_space(inst.ty()) == Some(TRACKED) => {
                self.report(Rule::TrackedGep, inst, tracked_gep_message(None));
            }
            Opcode::IntToPtr => {
                if let Some(space) = scalar_space(inst.ty()).filter(|&s| is_gc(s)) {
                    self.report(Rule::IntPtrCast, inst, inttoptr_message(space, None));
                }
            }
            Opcode::PtrToInt => {
                let space = op(0).and_then(|v| scalar_space(v.ty()));
                if let Some(space) = space.filter(|&s| is_gc(s)) {
                    self.report(Rule::IntPtrCast, inst, ptrtoint_message(space, None));
                }
            }
            Opcode::Load => self.decayed(inst, inst.ty(), "loads"),
            Opcode::Store => {
                if let Some(v) = op(0) {
                    self.decayed(inst, v.ty(), "stores");
                }
            }
            Opcode::AtomicRMW => {
                if let Some(v) = op(1) {
                    self.decayed(inst, v.ty(), "exchanges");
                }
            }
            Opcode::AtomicCmpXchg => {
                if let Some(v) = op(2) {
                    self.decayed(inst, v.ty(), "exchanges");
                }
            }
            Opcode::Ret => {
                if let Some(v) = op(0) {
                    if let Some(held) = held_spaces(v.ty(), &[DERIVED, CALLEE_ROOTED, LOADED]) {
                        let message = format!(
                            "returns a value holding a {held} pointer: only Tracked (10) \
                             pointers may be returned (the caller must be able to root them)"
                        );
                        self.report(Rule::Return, inst, message);
                    }
                }
            }
            _ => {}
        }
        if let Some(call) = inst.as_call() {
            self.call(inst, call);
        }
        self.callee_rooted_operands(inst);
        self.constants(inst);
    }

    /// [`Rule::DecayedLoadStore`]: `inst` moves a value of type `ty` to or from memory.
    fn decayed(&mut self, inst: Instruction<'m>, ty: Type<'m>, verb: &str) {
        if let Some(held) = held_spaces(ty, &[DERIVED, CALLEE_ROOTED]) {
            let message = format!(
                "{verb} a value holding a {held} pointer: Derived and CalleeRooted pointers \
                 may not be loaded or stored as values (the root placement could not find \
                 their base); store the Tracked (10) pointer instead"
            );
            self.report(Rule::DecayedLoadStore, inst, message);
        }
    }

    fn call(&mut self, inst: Instruction<'m>, call: Call<'m>) {
        let Some(name) = call.callee_name() else {
            return;
        };
        if JULIA_CALLS.contains(&name.as_str()) {
            self.jlcall(inst, call, &name);
        } else if name == POINTER_FROM_OBJREF {
            let args = call.arguments();
            // Julia's optimizer also passes Derived (11) pointers; only strict mode refuses.
            let arg_ok = args.len() == 1
                && (is_scalar_pointer_in(args[0].ty(), TRACKED)
                    || (!self.strict && is_scalar_pointer_in(args[0].ty(), DERIVED)));
            let result_ok = is_scalar_pointer_in(inst.ty(), UNTRACKED);
            if !arg_ok || !result_ok {
                let args: Vec<String> = args.iter().map(|a| a.ty().print()).collect();
                let message = format!(
                    "{POINTER_FROM_OBJREF} is called as `{} ({})`: it takes one Tracked (10) \
                     pointer and returns an untracked (0) one (`ptr (ptr addrspace(10))`), \
                     since it is lowered to an addrspacecast from 10 to 0",
                    inst.ty().print(),
                    args.join(", ")
                );
                self.report(Rule::PointerFromObjref, inst, message);
            }
        } else if name == PRESERVE_END {
            let token = call.arguments().first().copied();
            let from_begin = token
                .and_then(Value::as_instruction)
                .and_then(Instruction::as_call)
                .and_then(Call::callee_name)
                .is_some_and(|n| n == PRESERVE_BEGIN);
            if !from_begin {
                let what = token.map_or_else(|| "nothing".into(), operand_text);
                let message = format!(
                    "{PRESERVE_END} ends `{what}`, which is not a call of {PRESERVE_BEGIN}: \
                     the preserved region is the pairing of the two"
                );
                self.report(Rule::GcPreserveEnd, inst, message);
            }
        } else if name == GET_PGCSTACK {
            let in_entry = inst.block().is_some() && inst.block() == self.function.entry_block();
            if !in_entry {
                let message = format!(
                    "{GET_PGCSTACK} is called outside the entry block: Locus moves the call \
                     into the entry block and gives the function a GC frame, but Julia's own \
                     pass would leave this function without roots"
                );
                self.report(Rule::PgcstackEntry, inst, message);
            }
        }
    }

    /// [`Rule::JlcallArgument`].
    fn jlcall(&mut self, inst: Instruction<'m>, call: Call<'m>, name: &str) {
        let args = call.arguments();
        match args.first() {
            None => {
                let message = format!("{name} without a function pointer");
                self.report(Rule::JlcallArgument, inst, message);
            }
            Some(f) if !is_scalar_pointer_in(f.ty(), UNTRACKED) => {
                let message = format!(
                    "the function of {name} is `{}`, not an untracked (0) pointer: it is \
                     called directly by the jlcall convention",
                    operand_text(*f)
                );
                self.report(Rule::JlcallArgument, inst, message);
            }
            Some(_) => {}
        }
        for (i, arg) in args.iter().enumerate().skip(1) {
            if !is_scalar_pointer_in(arg.ty(), TRACKED) {
                let message = format!(
                    "argument {i} of {name} (counting the function pointer as 0) is `{}`, \
                     not a Tracked (10) pointer: jlcall arguments travel in an array of \
                     jl_value_t* that the callee may keep",
                    operand_text(*arg)
                );
                self.report(Rule::JlcallArgument, inst, message);
            }
        }
    }

    /// [`Rule::CalleeRootedUse`], for every operand of `inst` that holds a CalleeRooted pointer. Uses that
    /// another rule covers are left to it, so each break is reported once.
    fn callee_rooted_operands(&mut self, inst: Instruction<'m>) {
        let operands = inst.operands();
        let n = operands.len();
        for (i, v) in operands.into_iter().enumerate() {
            // Null, undef and poison refer to no object.
            if !holds_space(v.ty(), CALLEE_ROOTED) || v.is_null() || v.is_undef() {
                continue;
            }
            let shown = operand_text(v);
            let problem = match inst.opcode() {
                // Rule::AddrSpaceCast, Rule::IntPtrCast and Rule::Return.
                Opcode::AddrSpaceCast | Opcode::PtrToInt | Opcode::Ret => None,
                // Rule::DecayedLoadStore covers the value operands.
                Opcode::Store if i == 0 => None,
                Opcode::AtomicRMW if i == 1 => None,
                Opcode::AtomicCmpXchg if i >= 1 => None,
                Opcode::Load => Some("is loaded through".to_string()),
                Opcode::Store | Opcode::AtomicRMW | Opcode::AtomicCmpXchg => {
                    Some("is stored through".to_string())
                }
                op if op.is_call() => self.callee_rooted_call_use(inst, i, n),
                // Lifted to their tracked bases by the lowering, as Julia does.
                Opcode::Phi
                | Opcode::Select
                | Opcode::GetElementPtr
                | Opcode::ExtractElement
                | Opcode::InsertElement
                | Opcode::ShuffleVector
                | Opcode::BitCast
                | Opcode::Freeze
                | Opcode::ICmp
                    if !self.strict =>
                {
                    None
                }
                op => Some(format!("is used by {}", opcode_name(op, inst))),
            };
            if let Some(problem) = problem {
                let message = format!(
                    "`{shown}` is CalleeRooted (12) and {problem}: the only use allowed of a \
                     CalleeRooted value is as a call argument of that type"
                );
                self.report(Rule::CalleeRootedUse, inst, message);
            }
        }
    }

    /// Why operand `i` (of `n`) of a call may not be CalleeRooted, if it may not.
    fn callee_rooted_call_use(&self, inst: Instruction<'m>, i: usize, n: usize) -> Option<String> {
        let call = inst.as_call()?;
        let num_args = call.num_arguments() as usize;
        if i + 1 == n {
            return Some("is called".into());
        }
        if i >= num_args {
            return Some("is an operand bundle value".into());
        }
        let name = call.callee_name();
        if name.as_deref().is_some_and(|n| JULIA_CALLS.contains(&n)) {
            return None; // Rule::JlcallArgument
        }
        let fixed = call.function_type().param_types().unwrap_or_default();
        if i >= fixed.len() {
            return Some(format!(
                "is passed as variadic argument {i}, where the callee has no parameter of \
                 its type"
            ));
        }
        if let Some(f) = call.called_function() {
            let declared = f.function_type().param_types().unwrap_or_default();
            let ty = inst.operand(i as u32).map(|v| v.ty());
            if declared.get(i).copied() != ty {
                let declared = declared.get(i).map_or("none".into(), |t| t.print());
                return Some(format!(
                    "is passed as argument {i} of @{}, whose parameter there is `{declared}`",
                    f.name()
                ));
            }
        }
        None
    }

    /// The cast, GEP and CalleeRooted rules inside the constant expressions among the operands of `inst`.
    fn constants(&mut self, inst: Instruction<'m>) {
        let mut seen = HashSet::new();
        let mut work: Vec<Value<'m>> = inst
            .operands()
            .into_iter()
            .filter(|v| is_walked_constant(*v))
            .collect();
        while let Some(c) = work.pop() {
            if !seen.insert(c) {
                continue;
            }
            let operands = c.operands();
            work.extend(operands.iter().copied().filter(|v| is_walked_constant(*v)));
            let Some(op) = c.constant_opcode() else {
                continue;
            };
            let shown = one_line(&c.print());
            let src = operands.first().map(|v| v.ty());
            match op {
                Opcode::AddrSpaceCast => {
                    let from = src.and_then(scalar_space);
                    if let (Some(from), Some(to)) = (from, scalar_space(c.ty())) {
                        if let Some(problem) = cast_problem(from, to, self.strict) {
                            let message = format!("in constant expression `{shown}`: {problem}");
                            self.report(Rule::AddrSpaceCast, inst, message);
                        }
                    }
                }
                Opcode::GetElementPtr if scalar_space(c.ty()) == Some(TRACKED) => {
                    if self.strict {
                        self.report(Rule::TrackedGep, inst, tracked_gep_message(Some(&shown)));
                    }
                }
                Opcode::IntToPtr => {
                    if let Some(space) = scalar_space(c.ty()).filter(|&s| is_gc(s)) {
                        let message = inttoptr_message(space, Some(&shown));
                        self.report(Rule::IntPtrCast, inst, message);
                    }
                }
                Opcode::PtrToInt => {
                    if let Some(space) = src.and_then(scalar_space).filter(|&s| is_gc(s)) {
                        let message = ptrtoint_message(space, Some(&shown));
                        self.report(Rule::IntPtrCast, inst, message);
                    }
                }
                _ => {
                    if let Some(v) = operands.iter().find(|v| holds_space(v.ty(), CALLEE_ROOTED)) {
                        let message = format!(
                            "`{}` is CalleeRooted (12) and is used in constant expression \
                             `{shown}`: the only use allowed of a CalleeRooted value is as a \
                             call argument of that type",
                            operand_text(*v)
                        );
                        self.report(Rule::CalleeRootedUse, inst, message);
                    }
                }
            }
        }
    }
}

/// Constants whose operands are walked: expressions and aggregates, not globals (whose
/// initializers are not code).
fn is_walked_constant(v: Value<'_>) -> bool {
    matches!(
        v.kind(),
        ValueKind::ConstantExpr | ValueKind::ConstantAggregate
    )
}

fn is_scalar_pointer_in(ty: Type<'_>, space: u32) -> bool {
    ty.is_pointer() && ty.address_space() == Some(space)
}

fn opcode_name(op: Opcode, inst: Instruction<'_>) -> String {
    // The instruction's own text starts with its opcode (after `%x = `).
    let text = inst.print();
    let rest = text.split_once(" = ").map_or(text.as_str(), |(_, r)| r);
    match rest.split_whitespace().next() {
        Some(word) if !word.is_empty() => format!("`{word}`"),
        _ => format!("{op:?}"),
    }
}

fn tracked_gep_message(constant: Option<&str>) -> String {
    let place = constant.map_or_else(String::new, |c| format!("in constant expression `{c}`: "));
    format!(
        "{place}getelementptr on a Tracked (10) pointer is not allowed: its result could not \
         be stored in a GC slot; addrspacecast the pointer to Derived (11) first"
    )
}

fn inttoptr_message(space: u32, constant: Option<&str>) -> String {
    let place = constant.map_or_else(String::new, |c| format!("in constant expression `{c}`: "));
    format!(
        "{place}inttoptr to a {} pointer is not allowed: GC pointers may not come from \
         integers (make an untracked (0) pointer and addrspacecast it)",
        space_name(space)
    )
}

fn ptrtoint_message(space: u32, constant: Option<&str>) -> String {
    let place = constant.map_or_else(String::new, |c| format!("in constant expression `{c}`: "));
    format!(
        "{place}ptrtoint of a {} pointer is not allowed: GC pointers may not become \
         integers (use julia.pointer_from_objref for a raw pointer)",
        space_name(space)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_llvm::{Context, Module};

    fn rules(ir: &str, options: VerifyOptions) -> Vec<Rule> {
        let ctx = Context::new();
        let module = match Module::parse_ir(&ctx, "t.ll", ir) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        verify_module(&module, options)
            .into_iter()
            .map(|v| v.rule)
            .collect()
    }

    /// Lenient (the default) accepts what Julia's own verifier accepts outside its strong
    /// mode; strict reports it.
    #[test]
    fn lenient_accepts_what_julia_accepts() {
        let cases = [
            (
                "%o = load ptr addrspace(10), ptr null\n  %g = getelementptr i8, ptr addrspace(10) %o, i64 8",
                Rule::TrackedGep,
            ),
            (
                "%o = load ptr addrspace(10), ptr null\n  %a = addrspacecast ptr addrspace(10) %o to ptr addrspace(12)\n  %s = select i1 %c, ptr addrspace(12) %a, ptr addrspace(12) null",
                Rule::CalleeRootedUse,
            ),
            (
                "%l = addrspacecast ptr null to ptr addrspace(13)",
                Rule::AddrSpaceCast,
            ),
            (
                "%o = load ptr addrspace(10), ptr null\n  %d = addrspacecast ptr addrspace(10) %o to ptr addrspace(11)\n  %r = call ptr @julia.pointer_from_objref(ptr addrspace(11) %d)",
                Rule::PointerFromObjref,
            ),
        ];
        for (body, rule) in cases {
            let ir = format!(
                "declare ptr @julia.pointer_from_objref(ptr addrspace(11))\n\
                 define void @f(i1 %c) {{\n  {body}\n  ret void\n}}\n"
            );
            assert_eq!(rules(&ir, VerifyOptions::default()), [], "{body}");
            assert_eq!(rules(&ir, VerifyOptions::STRICT), [rule], "{body}");
        }
        // What Julia rejects too stays an error in both.
        let load = "define void @f(ptr addrspace(12) %p) {\n  %v = load i64, ptr addrspace(12) %p\n  ret void\n}\n";
        assert_eq!(
            rules(load, VerifyOptions::default()),
            [Rule::CalleeRootedUse]
        );
    }
}
