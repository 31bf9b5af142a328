//! The routines LLVM 19 calls on AArch64 (ELF, Linux) for IR operations that have no
//! instruction: which symbol, for which operation and type. Pure tables; [`crate::hidden`]
//! finds the operations in a module.
//!
//! Spec 004 §2 "Unchained Function calls": an intrinsic "which in turn is lowered to a
//! function call (e.g. `@llvm.cos()`)" is still a call, and a streaming caller stops
//! streaming around it. What becomes a call is LLVM's business, not the spec's: these
//! tables are what `llc-19 -mtriple=aarch64-linux-gnu` emits, as `tests/llc_oracle.rs`
//! checks (the legalizer's `RTLIB` names, `AArch64ISelLowering.cpp`'s `Expand` and
//! `LibCall` actions, `AArch64SelectionDAGInfo.cpp` for the memory routines).

/// A floating-point scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fp {
    /// `half`.
    Half,
    /// `bfloat`.
    BFloat,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `fp128` (`long double` on AArch64 Linux).
    Fp128,
}

impl Fp {
    /// The libm suffix: `f` for types LLVM promotes to `float`, none for `double`, `l` for
    /// `fp128`.
    fn libm(self, base: &str) -> String {
        match self {
            Fp::Half | Fp::BFloat | Fp::Float => format!("{base}f"),
            Fp::Double => base.to_string(),
            Fp::Fp128 => format!("{base}l"),
        }
    }

    /// The compiler-rt mode letters (`sf`, `df`, `tf`, `hf`).
    fn mode(self) -> &'static str {
        match self {
            Fp::Half => "hf",
            Fp::BFloat | Fp::Float => "sf",
            Fp::Double => "df",
            Fp::Fp128 => "tf",
        }
    }
}

/// What decides the lowering besides the operation: the function's attributes and target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lowering {
    /// The function may run streaming (a streaming or streaming-compatible interface, or a
    /// locally streaming body): LLVM 19 calls `__arm_sc_memcpy`/`memmove`/`memset`
    /// instead of the C library's (`!SMEAttrs::hasNonStreamingInterfaceAndBody()`).
    pub may_stream: bool,
    /// `optsize` or `minsize`: fewer loads and stores before a memory routine is called.
    pub optsize: bool,
    /// FEAT_MOPS (`+mops`, Armv8.8-A, Armv9.3-A): memory copies and sets are instructions.
    pub mops: bool,
    /// SVE (`+sve`, `+sve2...`, Armv9-A): `llvm.ldexp` on `half`/`float`/`double` is
    /// `fscale`.
    pub sve: bool,
    /// FEAT_FP16 (`+fullfp16`, implied by SVE): an `i128` converts to `half` directly.
    pub fullfp16: bool,
    /// The C library has `sincos` (GNU, Android, Fuchsia triples): a `sin` and a `cos` of
    /// the same value in one block become one call.
    pub sincos: bool,
}

impl Lowering {
    /// Reads a `"target-features"` string (`+a,-b,...`, later entries win) into `self`.
    #[must_use]
    pub fn with_features(mut self, features: &str) -> Lowering {
        for f in features.split(',').map(str::trim) {
            let (on, name) = if let Some(n) = f.strip_prefix('+') {
                (true, n)
            } else if let Some(n) = f.strip_prefix('-') {
                (false, n)
            } else {
                continue;
            };
            let arch = |versions: &[&str]| versions.contains(&name);
            if name == "mops" || (on && arch(&["v8.8a", "v8.9a", "v9.3a", "v9.4a", "v9.5a"])) {
                self.mops = on;
            }
            if name == "sve"
                || name.starts_with("sve2")
                || (on && (name.starts_with("v9") && name.ends_with('a')))
            {
                self.sve = on;
                self.fullfp16 |= on;
            }
            if name == "fullfp16" {
                self.fullfp16 = on;
            }
        }
        self
    }

    /// Whether a target triple's C library has `sincos` (`TargetLowering`'s
    /// `SINCOS_F32` name is set for GNU environments, Android and Fuchsia). An empty
    /// triple counts as `aarch64-linux-gnu`.
    #[must_use]
    pub fn triple_has_sincos(triple: &str) -> bool {
        triple.is_empty()
            || triple.contains("-gnu")
            || triple.contains("android")
            || triple.contains("fuchsia")
    }
}

/// The routines for `fadd`, `fsub`, `fmul`, `fdiv` or `frem` on a scalar of type `ty`:
/// `fp128` arithmetic is soft-float, `frem` is `fmod` on every type.
#[must_use]
pub fn arithmetic(op: &str, ty: Fp) -> Option<String> {
    let soft = match op {
        "frem" => return Some(ty.libm("fmod")),
        "fadd" => "add",
        "fsub" => "sub",
        "fmul" => "mul",
        "fdiv" => "div",
        _ => return None,
    };
    (ty == Fp::Fp128).then(|| format!("__{soft}tf3"))
}

/// The routines for `fcmp <predicate>` on `fp128` (in LLVM's call order); none on other
/// types. `one` and `ueq` take two calls. With `nnan` (`no_nans`) an unordered predicate
/// is its ordered one and `one` is `une`, except `ord` and `uno`.
#[must_use]
pub fn compare(predicate: &str, ty: Fp, no_nans: bool) -> Vec<&'static str> {
    if ty != Fp::Fp128 {
        return Vec::new();
    }
    if no_nans {
        return match predicate {
            "oeq" | "ueq" => vec!["__eqtf2"],
            "one" | "une" => vec!["__netf2"],
            "olt" | "ult" => vec!["__lttf2"],
            "ole" | "ule" => vec!["__letf2"],
            "ogt" | "ugt" => vec!["__gttf2"],
            "oge" | "uge" => vec!["__getf2"],
            "ord" | "uno" => vec!["__unordtf2"],
            _ => Vec::new(),
        };
    }
    match predicate {
        "oeq" => vec!["__eqtf2"],
        "une" => vec!["__netf2"],
        "one" | "ueq" => vec!["__eqtf2", "__unordtf2"],
        "olt" | "uge" => vec!["__lttf2"],
        "ole" | "ugt" => vec!["__letf2"],
        "ogt" | "ule" => vec!["__gttf2"],
        "oge" | "ult" => vec!["__getf2"],
        "ord" | "uno" => vec!["__unordtf2"],
        _ => Vec::new(),
    }
}

/// The integer width LLVM widens an `iN` conversion to (32, 64 or 128); `None` above 128.
fn bucket(width: u32) -> Option<(u32, &'static str)> {
    match width {
        0 => None,
        1..=32 => Some((32, "si")),
        33..=64 => Some((64, "di")),
        65..=128 => Some((128, "ti")),
        _ => None,
    }
}

/// The routine for `fptosi`/`fptoui` (and the conversion inside `llvm.fpto[su]i.sat`) from
/// `from` to `iN`: every width from `fp128`, only widths above 64 from the other types. A
/// narrow unsigned conversion from `fp128` is done by the signed routine of the wider
/// type, as LLVM promotes it.
#[must_use]
pub fn fp_to_int(signed: bool, from: Fp, width: u32) -> Option<String> {
    let (wide, letters) = bucket(width)?;
    if from != Fp::Fp128 && wide < 128 {
        return None;
    }
    let unsigned = !signed && (wide == 128 || width == wide);
    let un = if unsigned { "uns" } else { "" };
    Some(format!("__fix{un}{}{letters}", from.mode()))
}

/// The routine for `sitofp`/`uitofp` from `iN` to `to`: every width to `fp128`, only
/// widths above 64 to the other types (`half` through `float` without FEAT_FP16).
/// `bfloat` from `i128` crashes llc-19 and is not predicted.
#[must_use]
pub fn int_to_fp(signed: bool, width: u32, to: Fp, fullfp16: bool) -> Option<String> {
    let (wide, letters) = bucket(width)?;
    let mode = match to {
        Fp::BFloat => return None,
        Fp::Half if !fullfp16 => "sf",
        _ => to.mode(),
    };
    if to != Fp::Fp128 && wide < 128 {
        return None;
    }
    let un = if signed { "" } else { "un" };
    Some(format!("__float{un}{letters}{mode}"))
}

/// The routine for `fpext`/`fptrunc` between `fp128` and `half`, `float` or `double`.
#[must_use]
pub fn extend_or_truncate(from: Fp, to: Fp) -> Option<String> {
    match (from, to) {
        (Fp::Half | Fp::Float | Fp::Double, Fp::Fp128) => {
            Some(format!("__extend{}tf2", from.mode()))
        }
        (Fp::Fp128, Fp::Half | Fp::Float | Fp::Double) => Some(format!("__trunctf{}2", to.mode())),
        _ => None,
    }
}

/// The routine for `sdiv`, `udiv`, `srem`, `urem` on `iN`: widths 65 to 128 (wider
/// divisions are expanded into loops in IR before instruction selection).
#[must_use]
pub fn divide(op: &str, width: u32) -> Option<&'static str> {
    if !(65..=128).contains(&width) {
        return None;
    }
    match op {
        "sdiv" => Some("__divti3"),
        "udiv" => Some("__udivti3"),
        "srem" => Some("__modti3"),
        "urem" => Some("__umodti3"),
        _ => None,
    }
}

/// Intrinsics that are a libm call on every floating-point type.
const LIBM_ALWAYS: [&str; 17] = [
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp", "exp2", "exp10",
    "log", "log2", "log10", "pow", "frexp",
];

/// Intrinsics that are an instruction except on `fp128` (`sqrtl`, `floorl`, ...).
const LIBM_FP128: [(&str, &str); 15] = [
    ("sqrt", "sqrt"),
    ("floor", "floor"),
    ("ceil", "ceil"),
    ("trunc", "trunc"),
    ("rint", "rint"),
    ("nearbyint", "nearbyint"),
    ("round", "round"),
    ("roundeven", "roundeven"),
    ("minnum", "fmin"),
    ("maxnum", "fmax"),
    ("fma", "fma"),
    ("lround", "lround"),
    ("llround", "llround"),
    ("lrint", "lrint"),
    ("llrint", "llrint"),
];

/// The names of the intrinsics [`intrinsic`] knows, the dotted ones first, so that a
/// prefix match on `llvm.<name>.` finds the right one.
pub const INTRINSICS: [&str; 37] = [
    "fptosi.sat",
    "fptoui.sat",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "exp",
    "exp2",
    "exp10",
    "log",
    "log2",
    "log10",
    "pow",
    "frexp",
    "ldexp",
    "powi",
    "fmuladd",
    "sqrt",
    "floor",
    "ceil",
    "trunc",
    "rint",
    "nearbyint",
    "round",
    "roundeven",
    "minnum",
    "maxnum",
    "fma",
    "lround",
    "llround",
    "lrint",
    "llrint",
];

/// The routines for intrinsic `llvm.<name>` whose first argument is a scalar of type
/// `ty` (`width`: the integer result width, for `llvm.fpto[su]i.sat`), in LLVM's order
/// where it has one.
#[must_use]
pub fn intrinsic(name: &str, ty: Fp, width: u32, lowering: &Lowering) -> Vec<String> {
    if ty == Fp::BFloat {
        return Vec::new();
    }
    if LIBM_ALWAYS.contains(&name) {
        return vec![ty.libm(name)];
    }
    if let Some((_, base)) = LIBM_FP128.iter().find(|(n, _)| *n == name) {
        return if ty == Fp::Fp128 {
            vec![ty.libm(base)]
        } else {
            Vec::new()
        };
    }
    match name {
        "ldexp" if ty == Fp::Fp128 || !lowering.sve => vec![ty.libm("ldexp")],
        "powi" => vec![format!(
            "__powi{}2",
            if ty == Fp::Half { "sf" } else { ty.mode() }
        )],
        "fmuladd" if ty == Fp::Fp128 => vec!["__multf3".into(), "__addtf3".into()],
        "fptosi.sat" | "fptoui.sat" if ty == Fp::Fp128 && width <= 64 => {
            let signed = name == "fptosi.sat";
            let mut calls = vec!["__getf2".to_string(), "__gttf2".to_string()];
            calls.extend(fp_to_int(signed, ty, width));
            if signed {
                calls.push("__unordtf2".into());
            }
            calls
        }
        _ => Vec::new(),
    }
}

/// The routine for `sin` and `cos` of one value together.
#[must_use]
pub fn sincos(ty: Fp) -> String {
    ty.libm("sincos")
}

/// A memory intrinsic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemOp {
    /// `llvm.memcpy`.
    Copy,
    /// `llvm.memmove`.
    Move,
    /// `llvm.memset`.
    Set,
}

impl MemOp {
    /// The C name (`memcpy`, `memmove`, `memset`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            MemOp::Copy => "memcpy",
            MemOp::Move => "memmove",
            MemOp::Set => "memset",
        }
    }
}

/// Whether LLVM 19 expands a memory intrinsic of constant `size` into loads and stores
/// (16 bytes at most each): up to 16 of them for a copy (4 with `optsize`), 32 for a set
/// (8), and 4 non-overlapping ones for a move (`MaxStoresPerMem*` in
/// `AArch64ISelLowering.cpp`).
#[must_use]
pub fn mem_expanded(op: MemOp, size: u64, optsize: bool) -> bool {
    let ops = size.div_ceil(16);
    match op {
        MemOp::Copy => ops <= if optsize { 4 } else { 16 },
        MemOp::Set => ops <= if optsize { 8 } else { 32 },
        MemOp::Move => size / 16 + u64::from((size % 16).count_ones()) <= 4,
    }
}

/// The routine an `llvm.memcpy`/`memmove`/`memset` calls, with its size when constant:
/// none when FEAT_MOPS does it or it is expanded, the streaming-compatible `__arm_sc_*`
/// routine from a function that may stream, else the C library's. The `.inline` variants
/// (`always_inline`) call no C library routine, but LLVM 19 asks the target for its own
/// lowering before it forces the expansion, and AArch64 answers with the `__arm_sc_*` call
/// whatever `AlwaysInline` says (`AArch64SelectionDAGInfo::EmitTargetCodeForMemset`).
#[must_use]
pub fn mem_routine(
    op: MemOp,
    size: Option<u64>,
    always_inline: bool,
    lowering: &Lowering,
) -> Option<String> {
    if lowering.mops
        || size.is_some_and(|n| n == 0 || mem_expanded(op, n, lowering.optsize))
        || (always_inline && !lowering.may_stream)
    {
        return None;
    }
    Some(if lowering.may_stream {
        format!("__arm_sc_{}", op.as_str())
    } else {
        op.as_str().to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(arithmetic("frem", Fp::Half).as_deref(), Some("fmodf"));
        assert_eq!(arithmetic("fadd", Fp::Fp128).as_deref(), Some("__addtf3"));
        assert_eq!(arithmetic("fadd", Fp::Double), None);
        assert_eq!(compare("one", Fp::Fp128, false), ["__eqtf2", "__unordtf2"]);
        assert_eq!(compare("ult", Fp::Fp128, false), ["__getf2"]);
        assert_eq!(compare("ult", Fp::Fp128, true), ["__lttf2"]);
        assert_eq!(fp_to_int(false, Fp::Fp128, 8).as_deref(), Some("__fixtfsi"));
        assert_eq!(
            fp_to_int(false, Fp::Fp128, 32).as_deref(),
            Some("__fixunstfsi")
        );
        assert_eq!(
            fp_to_int(false, Fp::Half, 100).as_deref(),
            Some("__fixunshfti")
        );
        assert_eq!(fp_to_int(true, Fp::Double, 64), None);
        assert_eq!(
            int_to_fp(true, 128, Fp::Half, false).as_deref(),
            Some("__floattisf")
        );
        assert_eq!(
            int_to_fp(false, 16, Fp::Fp128, false).as_deref(),
            Some("__floatunsitf")
        );
        assert_eq!(
            extend_or_truncate(Fp::Fp128, Fp::Half).as_deref(),
            Some("__trunctfhf2")
        );
        assert_eq!(divide("urem", 96), Some("__umodti3"));
        assert_eq!(divide("sdiv", 256), None);
        let l = Lowering::default();
        assert_eq!(intrinsic("cos", Fp::Half, 0, &l), ["cosf"]);
        assert_eq!(intrinsic("minnum", Fp::Fp128, 0, &l), ["fminl"]);
        assert!(intrinsic("sqrt", Fp::Double, 0, &l).is_empty());
        assert_eq!(intrinsic("powi", Fp::Half, 0, &l), ["__powisf2"]);
        let sve = l.with_features("+sve");
        assert!(sve.sve && sve.fullfp16);
        assert!(intrinsic("ldexp", Fp::Float, 0, &sve).is_empty());
        assert!(!l.with_features("+sve,-sve").sve);
        assert!(l.with_features("+v9.4a").mops);
    }

    #[test]
    fn memory_routines() {
        assert!(mem_expanded(MemOp::Copy, 256, false) && !mem_expanded(MemOp::Copy, 257, false));
        assert!(mem_expanded(MemOp::Set, 512, false) && !mem_expanded(MemOp::Set, 513, false));
        assert!(!mem_expanded(MemOp::Copy, 65, true));
        assert!(mem_expanded(MemOp::Move, 64, false) && !mem_expanded(MemOp::Move, 31, false));
        let streaming = Lowering {
            may_stream: true,
            ..Lowering::default()
        };
        assert_eq!(
            mem_routine(MemOp::Copy, None, false, &streaming).as_deref(),
            Some("__arm_sc_memcpy")
        );
        assert_eq!(
            mem_routine(MemOp::Set, Some(1000), false, &Lowering::default()).as_deref(),
            Some("memset")
        );
        assert_eq!(mem_routine(MemOp::Set, Some(8), false, &streaming), None);
        assert_eq!(
            mem_routine(MemOp::Set, Some(1024), true, &Lowering::default()),
            None
        );
        assert_eq!(
            mem_routine(MemOp::Set, Some(1024), true, &streaming).as_deref(),
            Some("__arm_sc_memset")
        );
        assert_eq!(
            mem_routine(MemOp::Move, None, false, &streaming.with_features("+mops")),
            None
        );
    }
}
