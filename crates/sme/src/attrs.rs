//! The SME attributes of a function or a call site, in both spellings, as plain data.
//!
//! Spec 004 §1 names the attributes Clang puts on functions and on call sites:
//! `aarch64_pstate_sm_enabled`, `aarch64_pstate_sm_compatible`, `aarch64_pstate_sm_body`,
//! and for ZA the older spellings `aarch64_pstate_za_new`, `aarch64_pstate_za_shared`,
//! `aarch64_pstate_za_preserved` and `aarch64_expanded_pstate_za`. LLVM 18 replaced the ZA
//! ones by `aarch64_new_za`, `aarch64_in_za`, `aarch64_out_za`, `aarch64_inout_za`,
//! `aarch64_preserves_za` and added the same five for ZT0; LLVM 19 reads only the newer
//! ones. An [`Attrs`] records which names are present (so that conflicts can be reported)
//! and answers what they mean ([`Attrs::interface`], [`Attrs::za`], [`Attrs::zt0`]), where
//! an old ZA spelling counts with its meaning in the new one ([`OldZa::meaning`]).

use std::fmt;

/// `aarch64_pstate_sm_enabled`: a streaming interface (`__arm_streaming`).
pub const SM_ENABLED: &str = "aarch64_pstate_sm_enabled";
/// `aarch64_pstate_sm_compatible`: a streaming-compatible interface.
pub const SM_COMPATIBLE: &str = "aarch64_pstate_sm_compatible";
/// `aarch64_pstate_sm_body`: a locally streaming body (`__arm_locally_streaming`).
pub const SM_BODY: &str = "aarch64_pstate_sm_body";
/// Spec 004's `aarch64_pstate_za_new` (LLVM 18+: `aarch64_new_za`).
pub const OLD_ZA_NEW: &str = "aarch64_pstate_za_new";
/// Spec 004's `aarch64_pstate_za_shared` (LLVM 18+: `aarch64_inout_za`).
pub const OLD_ZA_SHARED: &str = "aarch64_pstate_za_shared";
/// Spec 004's `aarch64_pstate_za_preserved` (LLVM 18+: `aarch64_preserves_za`, or
/// `aarch64_in_za` together with `aarch64_pstate_za_shared`).
pub const OLD_ZA_PRESERVED: &str = "aarch64_pstate_za_preserved";
/// Spec 004's `aarch64_expanded_pstate_za`: the mark of the old SMEABIPass on a new-ZA
/// function it already expanded.
pub const OLD_ZA_EXPANDED: &str = "aarch64_expanded_pstate_za";

/// The five ZA spellings of LLVM 18+, in [`State`] order (new, in, out, inout, preserves).
pub const ZA_NAMES: [&str; 5] = [
    "aarch64_new_za",
    "aarch64_in_za",
    "aarch64_out_za",
    "aarch64_inout_za",
    "aarch64_preserves_za",
];
/// The five ZT0 spellings of LLVM 18+, in [`State`] order.
pub const ZT0_NAMES: [&str; 5] = [
    "aarch64_new_zt0",
    "aarch64_in_zt0",
    "aarch64_out_zt0",
    "aarch64_inout_zt0",
    "aarch64_preserves_zt0",
];

/// Every attribute name this crate reads, in a fixed order.
pub const ALL_NAMES: [&str; 17] = [
    SM_ENABLED,
    SM_COMPATIBLE,
    SM_BODY,
    OLD_ZA_NEW,
    OLD_ZA_SHARED,
    OLD_ZA_PRESERVED,
    OLD_ZA_EXPANDED,
    ZA_NAMES[0],
    ZA_NAMES[1],
    ZA_NAMES[2],
    ZA_NAMES[3],
    ZA_NAMES[4],
    ZT0_NAMES[0],
    ZT0_NAMES[1],
    ZT0_NAMES[2],
    ZT0_NAMES[3],
    ZT0_NAMES[4],
];

/// The functions LLVM 19 knows by name (`SMEAttrs(StringRef)`), whatever their declaration
/// says: the SME ABI support routines it calls itself ([`ABI_ROUTINES`]) and the
/// streaming-compatible `__arm_sc_*` string routines ([`SC_ROUTINES`]). Spec 004 names no
/// function. Other names, `__arm_za_disable` and `__arm_get_current_vg` included, are
/// ordinary functions to LLVM 19: they get only the attributes they are declared with.
pub const KNOWN_BY_NAME: [&str; 7] = [
    ABI_ROUTINES[0],
    ABI_ROUTINES[1],
    ABI_ROUTINES[2],
    SC_ROUTINES[0],
    SC_ROUTINES[1],
    SC_ROUTINES[2],
    SC_ROUTINES[3],
];

/// The SME ABI support routines LLVM 19 knows by name (AAPCS64 SME, "SME support
/// routines"): streaming-compatible and with no lazy save around them;
/// `__arm_tpidr2_restore` also has a ZA-in interface (it runs with ZA live).
pub const ABI_ROUTINES: [&str; 3] = [
    "__arm_sme_state",
    "__arm_tpidr2_save",
    "__arm_tpidr2_restore",
];

/// The argument and temporary registers (x0-x15) an SME ABI support routine preserves, as
/// LLVM 19 calls it (`CSR_AArch64_SME_ABI_Support_Routines_PreserveMost_From_X0/X1/X2` in
/// AArch64CallingConvention.td; x19-x28 and the frame are preserved too): `None` for other
/// functions, which preserve none of them.
#[must_use]
pub fn routine_preserves(name: &str) -> Option<std::ops::RangeInclusive<u8>> {
    match name {
        "__arm_tpidr2_save" | "__arm_tpidr2_restore" => Some(0..=13),
        "__arm_get_current_vg" => Some(1..=15),
        "__arm_sme_state" => Some(2..=15),
        _ => None,
    }
}

/// The streaming-compatible string routines LLVM 19 knows by name: streaming-compatible
/// only, so a caller with ZA still sets up a lazy save around them (private ZA).
pub const SC_ROUTINES: [&str; 4] = [
    "__arm_sc_memcpy",
    "__arm_sc_memset",
    "__arm_sc_memmove",
    "__arm_sc_memchr",
];

/// The SME ABI support routines that must be declared with their ABI attributes
/// (`aarch64_pstate_sm_compatible`) because LLVM 19 does not know them by name: without
/// it they are normal functions, with PSTATE.SM changed and a lazy ZA save set up around
/// every call.
pub const ROUTINES_NEEDING_ATTRS: [&str; 2] = ["__arm_za_disable", "__arm_get_current_vg"];

/// The SME ABI routines whose calls make a body not plain to LLVM 19's inliner
/// (`isSMEABIRoutineCall` in AArch64TargetTransformInfo.cpp): a callee that calls one is
/// not inlined where a lazy ZA save, a ZT0 spill or a mode change would be needed.
/// `__arm_get_current_vg` is not among them.
pub const INLINE_BARRIER_ROUTINES: [&str; 4] = [
    ABI_ROUTINES[0],
    ABI_ROUTINES[1],
    ABI_ROUTINES[2],
    ROUTINES_NEEDING_ATTRS[0],
];

/// Every SME ABI routine this crate's [`crate::runtime`] implements.
pub const RUNTIME_ROUTINES: [&str; 5] = [
    ABI_ROUTINES[0],
    ABI_ROUTINES[1],
    ABI_ROUTINES[2],
    ROUTINES_NEEDING_ATTRS[0],
    ROUTINES_NEEDING_ATTRS[1],
];

/// How a function expects PSTATE.SM at its entry and return (spec 004 §2, the table's
/// abbreviations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interface {
    /// `N`: PSTATE.SM is 0 on entry and on return.
    Normal,
    /// `S`: PSTATE.SM is 1 on entry and on return.
    Streaming,
    /// `SC`: PSTATE.SM may be either on entry and is unchanged on return.
    StreamingCompatible,
}

impl Interface {
    /// `normal`, `streaming` or `streaming-compatible`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Normal => "normal",
            Interface::Streaming => "streaming",
            Interface::StreamingCompatible => "streaming-compatible",
        }
    }
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a function does with ZA (or ZT0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Private ZA: the function does not share it with its caller and may clobber it,
    /// so a caller with live ZA must save it lazily around the call.
    None,
    /// `new`: private interface, but the body creates fresh, zeroed state.
    New,
    /// `in`: shared; reads the state and returns it unchanged.
    In,
    /// `out`: shared; ignores the incoming state and returns new contents.
    Out,
    /// `inout`: shared; reads and writes the state.
    InOut,
    /// `preserves`: shared; neither reads nor changes the state.
    Preserves,
}

impl State {
    /// The state in [`ZA_NAMES`]/[`ZT0_NAMES`] order, without `None`.
    pub const ALL: [State; 5] = [
        State::New,
        State::In,
        State::Out,
        State::InOut,
        State::Preserves,
    ];

    /// `none`, `new`, `in`, `out`, `inout` or `preserves`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            State::None => "none",
            State::New => "new",
            State::In => "in",
            State::Out => "out",
            State::InOut => "inout",
            State::Preserves => "preserves",
        }
    }

    /// Whether the interface shares the state with the caller (in, out, inout, preserves).
    #[must_use]
    pub fn is_shared(self) -> bool {
        matches!(
            self,
            State::In | State::Out | State::InOut | State::Preserves
        )
    }

    /// Whether the function has live state in its body (new or shared).
    #[must_use]
    pub fn has_state(self) -> bool {
        self != State::None
    }

    fn index(self) -> Option<usize> {
        State::ALL.iter().position(|&s| s == self)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The old ZA spellings present (spec 004 §1), which LLVM 19 no longer reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct OldZa {
    /// `aarch64_pstate_za_new`.
    pub new: bool,
    /// `aarch64_pstate_za_shared`.
    pub shared: bool,
    /// `aarch64_pstate_za_preserved`.
    pub preserved: bool,
    /// `aarch64_expanded_pstate_za`.
    pub expanded: bool,
}

impl OldZa {
    /// Whether any old spelling is present.
    #[must_use]
    pub fn any(self) -> bool {
        self.new || self.shared || self.preserved || self.expanded
    }

    /// What the old spellings mean in the new one: `za_new` is `new`, `za_shared` is
    /// `inout`, `za_shared` with `za_preserved` is `in` (shared, left unchanged), and
    /// `za_preserved` alone is `preserves` (ZA is not clobbered, so no lazy save). When
    /// `za_new` is combined with another (an error of its own) `new` wins. `None` when no
    /// old ZA spelling is present.
    #[must_use]
    pub fn meaning(self) -> Option<State> {
        if self.new {
            Some(State::New)
        } else if self.shared && self.preserved {
            Some(State::In)
        } else if self.shared {
            Some(State::InOut)
        } else if self.preserved {
            Some(State::Preserves)
        } else {
            None
        }
    }
}

/// The SME attributes on one function or one call site (or their union, see
/// [`Attrs::union`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Attrs {
    /// `aarch64_pstate_sm_enabled`.
    pub sm_enabled: bool,
    /// `aarch64_pstate_sm_compatible`.
    pub sm_compatible: bool,
    /// `aarch64_pstate_sm_body`.
    pub sm_body: bool,
    /// The new ZA spellings present, in [`State::ALL`] order.
    pub za: [bool; 5],
    /// The ZT0 spellings present, in [`State::ALL`] order.
    pub zt0: [bool; 5],
    /// The old ZA spellings present.
    pub old_za: OldZa,
    /// One of the SME ABI support routines ([`ABI_ROUTINES`]), known by name.
    pub abi_routine: bool,
}

impl Attrs {
    /// The attributes named by `names`; names this crate does not know are ignored.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Attrs {
        let mut a = Attrs::default();
        for name in names {
            a.add(name);
        }
        a
    }

    /// The attributes of a comma-separated list as a user writes it: each an SME attribute
    /// name ([`ALL_NAMES`]) with or without its `aarch64_` prefix, or `streaming`,
    /// `streaming-compatible`, `locally-streaming`; blanks around names are ignored.
    ///
    /// # Errors
    /// [`Error::Attrs`](crate::Error::Attrs) naming the first word that is not one.
    pub fn parse_list(list: &str) -> Result<Attrs, crate::Error> {
        let mut a = Attrs::default();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let full = match item {
                "streaming" => SM_ENABLED.to_string(),
                "streaming-compatible" => SM_COMPATIBLE.to_string(),
                "locally-streaming" => SM_BODY.to_string(),
                _ if item.starts_with("aarch64_") => item.to_string(),
                _ => format!("aarch64_{item}"),
            };
            if !a.add(&full) {
                return Err(crate::Error::Attrs {
                    list: list.to_string(),
                    message: format!(
                        "`{item}` is not an SME attribute (one of {}, or streaming, \
                         streaming-compatible, locally-streaming)",
                        ALL_NAMES.join(", ")
                    ),
                });
            }
        }
        Ok(a)
    }

    /// Adds one attribute by name; returns whether the name is an SME attribute.
    pub fn add(&mut self, name: &str) -> bool {
        match name {
            SM_ENABLED => self.sm_enabled = true,
            SM_COMPATIBLE => self.sm_compatible = true,
            SM_BODY => self.sm_body = true,
            OLD_ZA_NEW => self.old_za.new = true,
            OLD_ZA_SHARED => self.old_za.shared = true,
            OLD_ZA_PRESERVED => self.old_za.preserved = true,
            OLD_ZA_EXPANDED => self.old_za.expanded = true,
            _ => {
                if let Some(i) = ZA_NAMES.iter().position(|&n| n == name) {
                    self.za[i] = true;
                } else if let Some(i) = ZT0_NAMES.iter().position(|&n| n == name) {
                    self.zt0[i] = true;
                } else {
                    return false;
                }
            }
        }
        true
    }

    /// The attribute names present, in [`ALL_NAMES`] order (the ABI-routine mark is not a
    /// name and is left out).
    #[must_use]
    pub fn names(&self) -> Vec<&'static str> {
        ALL_NAMES
            .iter()
            .copied()
            .filter(|n| Attrs::from_names([*n]).is_within(self))
            .collect()
    }

    /// What LLVM 19 knows about a function by its name ([`KNOWN_BY_NAME`]): the ABI
    /// routines are streaming-compatible with no lazy save around them, and
    /// `__arm_tpidr2_restore` has a ZA-in interface; the `__arm_sc_*` routines are only
    /// streaming-compatible. `None` for other names, `__arm_za_disable` and
    /// `__arm_get_current_vg` included (see [`ROUTINES_NEEDING_ATTRS`]).
    #[must_use]
    pub fn known_routine(name: &str) -> Option<Attrs> {
        if !KNOWN_BY_NAME.contains(&name) {
            return None;
        }
        let mut a = Attrs {
            sm_compatible: true,
            abi_routine: ABI_ROUTINES.contains(&name),
            ..Attrs::default()
        };
        if name == "__arm_tpidr2_restore" {
            a.za[1] = true;
        }
        Some(a)
    }

    /// The attributes LLVM 19 gives a call: those of the call site combined with those of
    /// the callee (`self` with `other`) as `SMEAttrs` ORs their bit masks. A
    /// streaming-compatible side wins over a streaming one (LLVM tests it first), and the
    /// ZA and ZT0 states are OR-ed in LLVM's 3-bit encoding (in 1, out 2, inout 3,
    /// preserves 4, new 5): `in` with `out` is `inout`, `in` with `preserves` is `new`, and
    /// 6 or 7 is no state at all. The old ZA spellings, which LLVM 19 ignores, are united.
    #[must_use]
    pub fn combine_llvm19(&self, other: &Attrs) -> Attrs {
        let mut c = self.union(other);
        if c.sm_compatible && c.sm_enabled && !(self.sm_enabled && self.sm_compatible) {
            c.sm_enabled = false;
        }
        c.za = combine_states(self.za, other.za);
        c.zt0 = combine_states(self.zt0, other.zt0);
        c
    }

    /// Every attribute present in either.
    #[must_use]
    pub fn union(&self, other: &Attrs) -> Attrs {
        let or5 = |a: [bool; 5], b: [bool; 5]| std::array::from_fn(|i| a[i] || b[i]);
        Attrs {
            sm_enabled: self.sm_enabled || other.sm_enabled,
            sm_compatible: self.sm_compatible || other.sm_compatible,
            sm_body: self.sm_body || other.sm_body,
            za: or5(self.za, other.za),
            zt0: or5(self.zt0, other.zt0),
            old_za: OldZa {
                new: self.old_za.new || other.old_za.new,
                shared: self.old_za.shared || other.old_za.shared,
                preserved: self.old_za.preserved || other.old_za.preserved,
                expanded: self.old_za.expanded || other.old_za.expanded,
            },
            abi_routine: self.abi_routine || other.abi_routine,
        }
    }

    /// Whether every attribute of `self` is also in `other`.
    #[must_use]
    pub fn is_within(&self, other: &Attrs) -> bool {
        self.union(other) == *other
    }

    /// The interface: streaming when `sm_enabled` is present (even alongside the
    /// conflicting `sm_compatible`, which is reported separately), streaming-compatible
    /// with `sm_compatible`, normal otherwise. `sm_body` does not change the interface.
    #[must_use]
    pub fn interface(&self) -> Interface {
        if self.sm_enabled {
            Interface::Streaming
        } else if self.sm_compatible {
            Interface::StreamingCompatible
        } else {
            Interface::Normal
        }
    }

    /// The ZA state: the new spelling when one is present (the first in [`State::ALL`]
    /// order if several are, which is reported separately), else the meaning of the old
    /// spellings, else [`State::None`].
    #[must_use]
    pub fn za(&self) -> State {
        first_state(self.za)
            .or_else(|| self.old_za.meaning())
            .unwrap_or(State::None)
    }

    /// The ZA state as LLVM 19 sees it: the new spellings only.
    #[must_use]
    pub fn za_llvm19(&self) -> State {
        first_state(self.za).unwrap_or(State::None)
    }

    /// The ZT0 state (first in [`State::ALL`] order if several are present).
    #[must_use]
    pub fn zt0(&self) -> State {
        first_state(self.zt0).unwrap_or(State::None)
    }

    /// The new ZA spellings present.
    #[must_use]
    pub fn za_states(&self) -> Vec<State> {
        states(self.za)
    }

    /// The ZT0 spellings present.
    #[must_use]
    pub fn zt0_states(&self) -> Vec<State> {
        states(self.zt0)
    }

    /// Whether the attributes mention SME at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Attrs::default()
    }
}

/// LLVM 19's encoding of a state (`SMEAttrs::StateValue`), in [`State::ALL`] order.
const LLVM19_ENCODING: [u8; 5] = [5, 1, 2, 3, 4];

fn combine_states(a: [bool; 5], b: [bool; 5]) -> [bool; 5] {
    let bits = a
        .iter()
        .chain(&b)
        .zip(LLVM19_ENCODING.iter().chain(&LLVM19_ENCODING))
        .filter(|(&set, _)| set)
        .fold(0u8, |acc, (_, &e)| acc | e);
    std::array::from_fn(|i| LLVM19_ENCODING[i] == bits)
}

fn first_state(flags: [bool; 5]) -> Option<State> {
    flags.iter().position(|&b| b).map(|i| State::ALL[i])
}

fn states(flags: [bool; 5]) -> Vec<State> {
    State::ALL
        .iter()
        .copied()
        .filter(|s| s.index().is_some_and(|i| flags[i]))
        .collect()
}

/// The new spelling of a ZA state (`aarch64_inout_za`); `None` for [`State::None`].
#[must_use]
pub fn za_name(state: State) -> Option<&'static str> {
    state.index().map(|i| ZA_NAMES[i])
}

/// The spelling of a ZT0 state (`aarch64_inout_zt0`); `None` for [`State::None`].
#[must_use]
pub fn zt0_name(state: State) -> Option<&'static str> {
    state.index().map(|i| ZT0_NAMES[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_are_read() {
        let a = Attrs::from_names([SM_ENABLED, "aarch64_inout_za", "aarch64_in_zt0", "nounwind"]);
        assert_eq!(a.interface(), Interface::Streaming);
        assert_eq!(a.za(), State::InOut);
        assert_eq!(a.zt0(), State::In);
        let old = Attrs::from_names([SM_COMPATIBLE, OLD_ZA_SHARED]);
        assert_eq!(old.interface(), Interface::StreamingCompatible);
        assert_eq!(old.za(), State::InOut);
        assert_eq!(old.za_llvm19(), State::None);
        assert_eq!(
            Attrs::from_names([OLD_ZA_SHARED, OLD_ZA_PRESERVED]).za(),
            State::In
        );
        assert_eq!(Attrs::from_names([OLD_ZA_PRESERVED]).za(), State::Preserves);
        assert_eq!(Attrs::from_names([OLD_ZA_NEW]).za(), State::New);
        assert_eq!(Attrs::default().za(), State::None);
    }

    #[test]
    fn names_round_trip() {
        for name in ALL_NAMES {
            let a = Attrs::from_names([name]);
            assert_eq!(a.names(), [name]);
        }
        let all = Attrs::from_names(ALL_NAMES);
        assert_eq!(all.names(), ALL_NAMES);
    }

    #[test]
    fn known_routines_and_union() {
        for r in KNOWN_BY_NAME {
            let a = Attrs::known_routine(r).unwrap();
            assert_eq!(a.interface(), Interface::StreamingCompatible);
            assert_eq!(a.abi_routine, ABI_ROUTINES.contains(&r));
        }
        for r in ROUTINES_NEEDING_ATTRS {
            assert!(Attrs::known_routine(r).is_none());
        }
        assert_eq!(
            Attrs::known_routine("__arm_tpidr2_restore").unwrap().za(),
            State::In
        );
        assert!(Attrs::known_routine("memcpy").is_none());
        let site = Attrs::from_names([SM_ENABLED]);
        let decl = Attrs::from_names(["aarch64_preserves_za"]);
        let u = site.union(&decl);
        assert_eq!(u.interface(), Interface::Streaming);
        assert_eq!(u.za(), State::Preserves);
        assert!(site.is_within(&u) && decl.is_within(&u) && !u.is_within(&site));
    }

    #[test]
    fn combined_as_llvm19() {
        let za = |n: &str| Attrs::from_names([n]);
        let c = |a: &str, b: &str| za(a).combine_llvm19(&za(b));
        assert_eq!(c("aarch64_in_za", "aarch64_out_za").za(), State::InOut);
        assert_eq!(c("aarch64_in_za", "aarch64_preserves_za").za(), State::New);
        assert_eq!(
            c("aarch64_out_za", "aarch64_preserves_za").za(),
            State::None
        );
        assert_eq!(c("aarch64_in_zt0", "aarch64_in_zt0").zt0(), State::In);
        assert_eq!(
            c(SM_ENABLED, SM_COMPATIBLE).interface(),
            Interface::StreamingCompatible
        );
        let both = Attrs::from_names([SM_ENABLED, SM_COMPATIBLE]);
        assert!(both.combine_llvm19(&Attrs::default()).sm_enabled);
        assert_eq!(
            Attrs::default().combine_llvm19(&za("aarch64_in_zt0")).zt0(),
            State::In
        );
    }
}
