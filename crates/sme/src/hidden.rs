//! The calls LLVM makes that are not calls in the IR: memory intrinsics that become
//! `memcpy`/`__arm_sc_memcpy` and the like, and IR operations and intrinsics lowered to
//! library calls (`frem`, `fp128` arithmetic, `llvm.cos`, `i128` division, ...).
//!
//! Spec 004 §2 "Unchained Function calls": such a call is a call like any other for the
//! streaming-mode rules ("a function with `aarch64_pstate_sm_enabled` calls a function that
//! is not streaming compatible": `smstop` before, `smstart` after), and LLVM 19 lowers it
//! through the same `LowerCall`, taking the callee's SME attributes from its symbol name
//! (`SMEAttrs(StringRef)`): the `__arm_sc_*` routines are streaming-compatible, every
//! other routine is a normal function with a private ZA interface. [`crate::check`] gives
//! each hidden call the model of a call to such a callee.

use locus_llvm::ir::{Function, Instruction, Opcode, Type, TypeKind, Value};

use crate::libcalls::{self, Fp, Lowering, MemOp};

/// Why LLVM makes a call the IR does not spell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HiddenKind {
    /// An `llvm.memcpy`/`memmove`/`memset` not expanded inline: the C library's routine, or
    /// the streaming-compatible `__arm_sc_*` one from a function that may stream.
    MemRoutine,
    /// An IR operation or intrinsic with no AArch64 instruction: a libm or compiler-rt
    /// routine.
    Libcall,
}

impl HiddenKind {
    /// `mem_routine` or `libcall`, as the JSON report spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            HiddenKind::MemRoutine => "mem_routine",
            HiddenKind::Libcall => "libcall",
        }
    }
}

/// One call LLVM makes for an instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenCall {
    /// Why.
    pub kind: HiddenKind,
    /// The routine called.
    pub symbol: String,
}

/// How LLVM 19 lowers function `f` of a module with target triple `triple`, from its
/// attributes: whether it may stream (from `may_stream`, the caller's SME attributes),
/// `optsize`/`minsize`, and its `"target-features"` (features given to llc on its command
/// line are not in the IR and count as absent).
#[must_use]
pub fn lowering(f: Function<'_>, may_stream: bool, triple: &str) -> Lowering {
    use locus_llvm::ir::AttributeIndex::Function as F;
    let features = f.string_attribute(F, "target-features").unwrap_or_default();
    Lowering {
        may_stream,
        optsize: f.has_attribute(F, "optsize") || f.has_attribute(F, "minsize"),
        sincos: Lowering::triple_has_sincos(triple),
        ..Lowering::default()
    }
    .with_features(&features)
}

/// The hidden calls of every instruction of `f` that makes some, in instruction order.
/// A `sin` and a `cos` of one scalar value in one block make one `sincos` call (where the
/// C library has it), at the first of the two.
#[must_use]
pub fn function_hidden_calls<'m>(
    f: Function<'m>,
    lowering: &Lowering,
) -> Vec<(Instruction<'m>, Vec<HiddenCall>)> {
    let mut out = Vec::new();
    for block in f.blocks() {
        let insts = block.instructions();
        let mut paired: Vec<Instruction<'m>> = Vec::new();
        for &inst in &insts {
            if paired.contains(&inst) {
                continue;
            }
            let mut calls = hidden_calls(inst, lowering);
            if lowering.sincos {
                if let Some((partner, ty)) = sincos_partner(inst, &insts) {
                    paired.push(partner);
                    calls = vec![libcall(libcalls::sincos(ty))];
                }
            }
            if !calls.is_empty() {
                out.push((inst, calls));
            }
        }
    }
    out
}

fn libcall(symbol: String) -> HiddenCall {
    HiddenCall {
        kind: HiddenKind::Libcall,
        symbol,
    }
}

/// The scalar floating-point type of `t`, and how many lanes (1 for a scalar, N for a
/// fixed vector `<N x T>`); `None` for scalable vectors and non-floating-point types.
fn fp_lanes(t: Type<'_>) -> Option<(Fp, u32)> {
    let (scalar, lanes) = match t.kind() {
        TypeKind::Vector => (t.element_type()?, t.vector_len()?),
        _ => (t, 1),
    };
    let fp = match scalar.kind() {
        TypeKind::Half => Fp::Half,
        TypeKind::BFloat => Fp::BFloat,
        TypeKind::Float => Fp::Float,
        TypeKind::Double => Fp::Double,
        TypeKind::Fp128 => Fp::Fp128,
        _ => return None,
    };
    Some((fp, lanes))
}

/// The integer width of `t` (or of its fixed-vector elements), with the lane count.
fn int_lanes(t: Type<'_>) -> Option<(u32, u32)> {
    match t.kind() {
        TypeKind::Vector => Some((t.element_type()?.int_width()?, t.vector_len()?)),
        TypeKind::Integer => Some((t.int_width()?, 1)),
        _ => None,
    }
}

/// `symbols`, each repeated `lanes` times (an operation on a fixed vector is split into one
/// call per element), as library calls.
fn per_lane(symbols: Vec<String>, lanes: u32) -> Vec<HiddenCall> {
    (0..lanes)
        .flat_map(|_| symbols.iter().cloned().map(libcall))
        .collect()
}

fn operand_type(inst: Instruction<'_>, index: u32) -> Option<Type<'_>> {
    inst.operand(index).map(Value::ty)
}

/// The calls for a conversion: `routine` of the operand's element type (read by `from`)
/// and the result's (read by `to`), once per lane of the operand.
fn conversion<A, B>(
    inst: Instruction<'_>,
    from: impl Fn(Type<'_>) -> Option<(A, u32)>,
    to: impl Fn(Type<'_>) -> Option<(B, u32)>,
    routine: impl FnOnce(A, B) -> Option<String>,
) -> Vec<HiddenCall> {
    let (Some((a, lanes)), Some((b, _))) = (operand_type(inst, 0).and_then(from), to(inst.ty()))
    else {
        return Vec::new();
    };
    per_lane(routine(a, b).into_iter().collect(), lanes)
}

/// The calls LLVM 19 makes for one instruction (the `sin`/`cos` pairing aside, see
/// [`function_hidden_calls`]).
#[must_use]
pub fn hidden_calls(inst: Instruction<'_>, lowering: &Lowering) -> Vec<HiddenCall> {
    let op = inst.opcode();
    let none = Vec::new;
    match op {
        Opcode::FAdd | Opcode::FSub | Opcode::FMul | Opcode::FDiv | Opcode::FRem => {
            let name = match op {
                Opcode::FAdd => "fadd",
                Opcode::FSub => "fsub",
                Opcode::FMul => "fmul",
                Opcode::FDiv => "fdiv",
                _ => "frem",
            };
            let Some((fp, lanes)) = fp_lanes(inst.ty()) else {
                return none();
            };
            per_lane(libcalls::arithmetic(name, fp).into_iter().collect(), lanes)
        }
        Opcode::FCmp => {
            let Some((fp, lanes)) = operand_type(inst, 0).and_then(fp_lanes) else {
                return none();
            };
            // `fcmp [flags] <predicate> ...`: the flags come first.
            let printed = inst.print();
            let words: Vec<&str> = printed
                .split_whitespace()
                .skip_while(|w| *w != "fcmp")
                .skip(1)
                .collect();
            let flags: Vec<&str> = words
                .iter()
                .copied()
                .take_while(|w| FAST_MATH_FLAGS.contains(w))
                .collect();
            let predicate = words.get(flags.len()).copied().unwrap_or_default();
            let no_nans = flags.contains(&"nnan") || flags.contains(&"fast");
            per_lane(
                libcalls::compare(predicate, fp, no_nans)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                lanes,
            )
        }
        Opcode::FPToSI | Opcode::FPToUI => conversion(inst, fp_lanes, int_lanes, |fp, width| {
            libcalls::fp_to_int(op == Opcode::FPToSI, fp, width)
        }),
        Opcode::SIToFP | Opcode::UIToFP => conversion(inst, int_lanes, fp_lanes, |width, fp| {
            libcalls::int_to_fp(op == Opcode::SIToFP, width, fp, lowering.fullfp16)
        }),
        Opcode::FPExt | Opcode::FPTrunc => {
            conversion(inst, fp_lanes, fp_lanes, libcalls::extend_or_truncate)
        }
        Opcode::SDiv | Opcode::UDiv | Opcode::SRem | Opcode::URem => {
            let name = match op {
                Opcode::SDiv => "sdiv",
                Opcode::UDiv => "udiv",
                Opcode::SRem => "srem",
                _ => "urem",
            };
            let Some((width, lanes)) = int_lanes(inst.ty()) else {
                return none();
            };
            per_lane(
                libcalls::divide(name, width)
                    .map(String::from)
                    .into_iter()
                    .collect(),
                lanes,
            )
        }
        Opcode::Call => intrinsic_calls(inst, lowering),
        _ => none(),
    }
}

/// The fast-math flags `fcmp` prints before its predicate.
const FAST_MATH_FLAGS: [&str; 8] = [
    "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc", "fast",
];

/// The name after `llvm.` of a called intrinsic, if the instruction calls one.
fn intrinsic_name(inst: Instruction<'_>) -> Option<String> {
    let call = inst.as_call()?;
    if !call.is_intrinsic() {
        return None;
    }
    let name = call.called_function()?.name();
    name.strip_prefix("llvm.").map(str::to_string)
}

fn intrinsic_calls(inst: Instruction<'_>, lowering: &Lowering) -> Vec<HiddenCall> {
    let Some(name) = intrinsic_name(inst) else {
        return Vec::new();
    };
    let mem = [
        ("memcpy.", MemOp::Copy),
        ("memmove.", MemOp::Move),
        ("memset.", MemOp::Set),
    ];
    if let Some((prefix, op)) = mem.iter().find(|(p, _)| name.starts_with(p)) {
        let always_inline = name.starts_with(&format!("{prefix}inline."));
        let size = inst.operand(2).and_then(Value::const_uint);
        return libcalls::mem_routine(*op, size, always_inline, lowering)
            .map(|symbol| HiddenCall {
                kind: HiddenKind::MemRoutine,
                symbol,
            })
            .into_iter()
            .collect();
    }
    let Some(base) = libcalls::INTRINSICS
        .iter()
        .find(|b| name.starts_with(&format!("{b}.")))
    else {
        return Vec::new();
    };
    let Some((fp, lanes)) = operand_type(inst, 0).and_then(fp_lanes) else {
        return Vec::new();
    };
    let width = int_lanes(inst.ty()).map_or(0, |(w, _)| w);
    per_lane(libcalls::intrinsic(base, fp, width, lowering), lanes)
}

/// For a scalar `llvm.sin`/`llvm.cos` call: the other of the pair on the same value and
/// type in the same block, with the type.
fn sincos_partner<'m>(
    inst: Instruction<'m>,
    block: &[Instruction<'m>],
) -> Option<(Instruction<'m>, Fp)> {
    let which = |i: Instruction<'m>| {
        let name = intrinsic_name(i)?;
        let is_sin = name.starts_with("sin.");
        (is_sin || name.starts_with("cos.")).then_some(is_sin)
    };
    let sin = which(inst)?;
    let arg = inst.operand(0)?;
    let (fp, 1) = fp_lanes(arg.ty())? else {
        return None;
    };
    if fp == Fp::BFloat {
        return None;
    }
    block
        .iter()
        .find(|&&other| {
            other != inst && which(other) == Some(!sin) && other.operand(0) == Some(arg)
        })
        .map(|&other| (other, fp))
}
