//! Attributes and memory effects: where an attribute sits ([`AttributeIndex`]), the one
//! set of accessors that reads attributes of functions and of call sites alike
//! ([`AttributeHolder`]), and LLVM's `memory(...)` attribute decoded
//! ([`MemoryEffects`]).

use std::ffi::c_uint;

use llvm_sys::core::{
    LLVMGetCallSiteEnumAttribute, LLVMGetCallSiteStringAttribute, LLVMGetEnumAttributeAtIndex,
    LLVMGetEnumAttributeKindForName, LLVMGetEnumAttributeValue, LLVMGetStringAttributeAtIndex,
    LLVMGetStringAttributeValue, LLVMGetTypeAttributeValue, LLVMIsEnumAttribute,
    LLVMIsTypeAttribute,
};
use llvm_sys::prelude::LLVMAttributeRef;
use llvm_sys::{LLVMAttributeFunctionIndex, LLVMAttributeReturnIndex};

use super::{Call, Function, Type};
use crate::ffi::{flag, lossy};

/// Where an attribute sits: on the function (or call), on its return value, or on a
/// parameter (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributeIndex {
    /// Function attributes (`returns_twice`, `memory(read)`, `"gc-leaf-function"`).
    Function,
    /// Return value attributes (`noalias`, `nonnull`).
    Return,
    /// Attributes of parameter `n`, counted from 0.
    Param(u32),
}

impl AttributeIndex {
    /// LLVM's index: `~0` for the function, 0 for the return value, `n + 1` for
    /// parameter `n`.
    pub(crate) fn raw(self) -> Option<c_uint> {
        match self {
            AttributeIndex::Function => Some(LLVMAttributeFunctionIndex),
            AttributeIndex::Return => Some(LLVMAttributeReturnIndex),
            AttributeIndex::Param(n) => n.checked_add(1).filter(|&i| i != u32::MAX),
        }
    }
}

/// What attributes are read from: a function (its declaration's attributes) or a call
/// site (the attributes written on the call itself). Both answer the same questions
/// through the same code; only the two LLVM getters differ.
#[derive(Clone, Copy)]
pub(super) enum AttributeHolder<'m> {
    /// A function's own attributes.
    Function(Function<'m>),
    /// A call site's own attributes (not its callee's).
    Call(Call<'m>),
}

impl<'m> AttributeHolder<'m> {
    /// Whether attribute `name` is at `index`: an enum or int attribute when LLVM knows
    /// the name (`returns_twice`, `noreturn`, `memory`, `nonnull`), a string attribute
    /// otherwise (`"gc-leaf-function"`).
    pub(super) fn has(self, index: AttributeIndex, name: &str) -> bool {
        match enum_kind(name) {
            Some(kind) => !self.enum_attribute(index, kind).is_null(),
            None => self.string(index, name).is_some(),
        }
    }

    /// The integer of an int attribute (`memory`, `dereferenceable`, `align`, …), or 0
    /// for a plain enum attribute; `None` when absent or of another sort.
    pub(super) fn int(self, index: AttributeIndex, name: &str) -> Option<u64> {
        let attr = self.enum_attribute(index, enum_kind(name)?);
        if attr.is_null() {
            return None;
        }
        // SAFETY: `attr` is a live enum attribute (it was found) and the value is only
        // read from enum and int attributes (`LLVMIsEnumAttribute` covers both), for which
        // it is defined.
        let is_enum = flag(unsafe { LLVMIsEnumAttribute(attr) });
        // SAFETY: as above.
        let is_type = flag(unsafe { LLVMIsTypeAttribute(attr) });
        // SAFETY: as above.
        (is_enum && !is_type).then(|| unsafe { LLVMGetEnumAttributeValue(attr) })
    }

    /// The type of a type attribute (`sret(%T)`, `elementtype(i32)`, `byval(...)`).
    pub(super) fn ty(self, index: AttributeIndex, name: &str) -> Option<Type<'m>> {
        let attr = self.enum_attribute(index, enum_kind(name)?);
        if attr.is_null() {
            return None;
        }
        // SAFETY: `attr` is a live attribute (it was found).
        if !flag(unsafe { LLVMIsTypeAttribute(attr) }) {
            return None;
        }
        // SAFETY: the type is read only from a type attribute.
        let ty = unsafe { LLVMGetTypeAttributeValue(attr) };
        // SAFETY: null or a type of the holder's context.
        unsafe { Type::from_nullable(ty) }
    }

    /// The value of string attribute `key` (`"gc-leaf-function"` → `Some("")`).
    pub(super) fn string(self, index: AttributeIndex, key: &str) -> Option<String> {
        let idx = index.raw()?;
        let len = c_uint::try_from(key.len()).ok()?;
        let key = key.as_ptr().cast();
        let attr = match self {
            // SAFETY: `f` is a live function; the key is valid for `len` bytes.
            Self::Function(f) => unsafe {
                LLVMGetStringAttributeAtIndex(f.as_raw(), idx, key, len)
            },
            // SAFETY: `c` is a live call site; the key is valid for `len` bytes.
            Self::Call(c) => unsafe {
                LLVMGetCallSiteStringAttribute(c.instruction().as_raw(), idx, key, len)
            },
        };
        if attr.is_null() {
            return None;
        }
        let mut len: c_uint = 0;
        // SAFETY: `attr` is a live string attribute (it was found by string key).
        let ptr = unsafe { LLVMGetStringAttributeValue(attr, &mut len) };
        // SAFETY: the value is valid for `len` bytes while the attribute lives, and is
        // copied at once.
        Some(unsafe { lossy(ptr, len as usize) })
    }

    /// The memory effects of the holder's own `memory(...)` attribute; unknown without one.
    pub(super) fn memory_effects(self) -> MemoryEffects {
        self.int(AttributeIndex::Function, "memory")
            .map_or(MemoryEffects::UNKNOWN, MemoryEffects::from_bits)
    }

    /// The enum, int or type attribute of kind `kind` at `index`, or null.
    fn enum_attribute(self, index: AttributeIndex, kind: c_uint) -> LLVMAttributeRef {
        let Some(idx) = index.raw() else {
            return std::ptr::null_mut();
        };
        match self {
            // SAFETY: `f` is a live function and `kind` a known attribute kind.
            Self::Function(f) => unsafe { LLVMGetEnumAttributeAtIndex(f.as_raw(), idx, kind) },
            // SAFETY: `c` is a live call site and `kind` a known attribute kind.
            Self::Call(c) => unsafe {
                LLVMGetCallSiteEnumAttribute(c.instruction().as_raw(), idx, kind)
            },
        }
    }
}

/// The enum kind LLVM gives an attribute name (`returns_twice`, `memory`), or `None` for
/// names it does not know (string attributes such as `"gc-leaf-function"`).
fn enum_kind(name: &str) -> Option<c_uint> {
    // SAFETY: the pointer is valid for `name.len()` bytes.
    let kind = unsafe { LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) };
    (kind != 0).then_some(kind)
}

/// How an operation may touch one kind of memory (LLVM's `ModRefInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModRef {
    /// Neither reads nor writes.
    None,
    /// May read.
    Ref,
    /// May write.
    Mod,
    /// May read and write.
    ModRef,
}

impl ModRef {
    fn from_bits(bits: u32) -> ModRef {
        match bits & 3 {
            0 => ModRef::None,
            1 => ModRef::Ref,
            2 => ModRef::Mod,
            _ => ModRef::ModRef,
        }
    }

    /// Whether reading is allowed.
    #[must_use]
    pub fn may_read(self) -> bool {
        matches!(self, ModRef::Ref | ModRef::ModRef)
    }

    /// Whether writing is allowed.
    #[must_use]
    pub fn may_write(self) -> bool {
        matches!(self, ModRef::Mod | ModRef::ModRef)
    }
}

/// The kinds of memory LLVM's `memory(...)` attribute distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryLocation {
    /// `argmem`: memory reached through pointer arguments.
    Argument,
    /// `inaccessiblemem`: memory the IR cannot reach.
    Inaccessible,
    /// Everything else.
    Other,
}

impl MemoryLocation {
    const ALL: [MemoryLocation; 3] = [
        MemoryLocation::Argument,
        MemoryLocation::Inaccessible,
        MemoryLocation::Other,
    ];

    fn shift(self) -> u32 {
        match self {
            MemoryLocation::Argument => 0,
            MemoryLocation::Inaccessible => 2,
            MemoryLocation::Other => 4,
        }
    }
}

/// LLVM's memory effects (the `memory(...)` attribute): for each [`MemoryLocation`],
/// whether it may be read and written.
///
/// In LLVM 19 `memory` is an int attribute whose value packs two bits (`ModRef`) per
/// location: argument memory in bits 0–1, inaccessible memory in bits 2–3, other memory in
/// bits 4–5. So `memory(none)` is 0, `memory(read)` is `0b01_01_01` and
/// `memory(argmem: readwrite)` is `0b11`. A function without the attribute may do
/// anything ([`MemoryEffects::UNKNOWN`]). Older spellings (`readnone`, `readonly`) are
/// turned into `memory(...)` by LLVM's parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemoryEffects(u32);

impl MemoryEffects {
    /// No memory access at all (`memory(none)`).
    pub const NONE: MemoryEffects = MemoryEffects(0);
    /// Reads any memory, writes none (`memory(read)`).
    pub const READ_ONLY: MemoryEffects = MemoryEffects(0b01_01_01);
    /// Writes any memory, reads none (`memory(write)`).
    pub const WRITE_ONLY: MemoryEffects = MemoryEffects(0b10_10_10);
    /// May read and write any memory (no attribute).
    pub const UNKNOWN: MemoryEffects = MemoryEffects(0b11_11_11);

    /// From the attribute's integer value; bits above the three locations are ignored.
    #[must_use]
    pub fn from_bits(bits: u64) -> MemoryEffects {
        // The mask keeps the value within 6 bits, so the conversion cannot fail.
        MemoryEffects(u32::try_from(bits & 0b11_11_11).unwrap_or(0b11_11_11))
    }

    /// The attribute's integer value.
    #[must_use]
    pub fn bits(self) -> u32 {
        self.0
    }

    /// How `location` may be accessed.
    #[must_use]
    pub fn get(self, location: MemoryLocation) -> ModRef {
        ModRef::from_bits(self.0 >> location.shift())
    }

    /// Whether no memory is accessed (`memory(none)`).
    #[must_use]
    pub fn does_not_access_memory(self) -> bool {
        self.0 == 0
    }

    /// Whether memory is at most read (`memory(read)` or narrower).
    #[must_use]
    pub fn only_reads_memory(self) -> bool {
        MemoryLocation::ALL
            .iter()
            .all(|&l| !self.get(l).may_write())
    }

    /// Whether memory is at most written.
    #[must_use]
    pub fn only_writes_memory(self) -> bool {
        MemoryLocation::ALL.iter().all(|&l| !self.get(l).may_read())
    }

    /// Whether only argument memory may be accessed (`memory(argmem: ...)`).
    #[must_use]
    pub fn only_accesses_argument_memory(self) -> bool {
        self.get(MemoryLocation::Inaccessible) == ModRef::None
            && self.get(MemoryLocation::Other) == ModRef::None
    }

    /// The effects allowed by both (`&` in LLVM).
    #[must_use]
    pub fn intersect(self, other: MemoryEffects) -> MemoryEffects {
        MemoryEffects(self.0 & other.0)
    }

    /// The effects allowed by either (`|` in LLVM).
    #[must_use]
    pub fn union(self, other: MemoryEffects) -> MemoryEffects {
        MemoryEffects(self.0 | other.0)
    }
}
