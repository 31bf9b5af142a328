//! Location descriptions: one or more single locations, each a storage and a
//! bit offset within it (spec 001, "Location Description").

use alloc::vec::Vec;
use core::hash::{Hash, Hasher};
use core::ops::{Deref, DerefMut};

/// A piece of storage a single location points into.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Storage {
    /// Memory of an address space (0 is the default, global memory).
    Memory {
        /// The DWARF address space number.
        address_space: u64,
    },
    /// An architecture register, by DWARF register number.
    Register(u16),
    /// The bytes of a value (`DW_OP_implicit_value`, `DW_OP_stack_value`).
    Implicit(Bytes),
    /// An implicit pointer to the object a DIE describes
    /// (`DW_OP_implicit_pointer`, `DW_OP_aspace_implicit_pointer`). It has no
    /// bits of its own: reading it gives undefined bits.
    ImplicitPointer {
        /// Offset of the DIE in `.debug_info`.
        die: u64,
        /// Byte offset into the pointed-to object.
        byte_offset: i64,
        /// The pointer's address space: `None` for
        /// `DW_OP_implicit_pointer`, the popped one for
        /// `DW_OP_aspace_implicit_pointer`.
        address_space: Option<u64>,
    },
    /// Storage whose every bit is undefined (optimized away).
    Undefined,
    /// The concatenation of parts.
    Composite(Vec<Part>),
}

impl Storage {
    /// The storage's size in bits, when it is known without asking the
    /// target: memory, the size of the address space (`address_size` bytes
    /// of address); implicit storage, its bytes; an implicit pointer, an
    /// address; a composite, the sum of its parts. `None` for a register
    /// (its size is the target's) and for undefined storage (which has no
    /// size).
    pub fn bit_size(&self, address_size: u8) -> Option<u128> {
        match self {
            Storage::Memory { .. } => Some(1u128 << (u32::from(address_size).min(8) * 8 + 3)),
            Storage::Implicit(b) => Some(b.len() as u128 * 8),
            Storage::ImplicitPointer { .. } => Some(u128::from(address_size.min(8)) * 8),
            Storage::Composite(parts) => Some(
                parts
                    .iter()
                    .map(|p| u128::from(p.bit_size))
                    .fold(0, u128::saturating_add),
            ),
            Storage::Register(_) | Storage::Undefined => None,
        }
    }
}

/// A short run of bytes: the bytes of implicit storage, and the nested
/// expression of an entry-value request. A byte slice
/// (`Deref<Target = [u8]>`) stored inline when short (every
/// `DW_OP_stack_value`, most entry values), so that most of them allocate
/// nothing. Build one from a `Vec<u8>` or a slice (`vec![1, 2].into()`,
/// `Bytes::from(&b[..])`); `to_vec()` gives a `Vec<u8>` back.
#[derive(Clone)]
pub struct Bytes(BytesRepr);

#[derive(Clone)]
enum BytesRepr {
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    Heap(Vec<u8>),
}

/// Implicit bytes up to this many are stored inline: a generic or typed
/// value is at most 8, a `DW_OP_implicit_value` often 16.
const INLINE_BYTES: usize = 16;

impl Bytes {
    /// The first `len` (at most 8) little-endian bytes of `bits`, inline.
    #[inline(always)]
    pub(crate) fn from_le(bits: u64, len: u8) -> Bytes {
        let mut bytes = [0; INLINE_BYTES];
        bytes[..8].copy_from_slice(&bits.to_le_bytes());
        Bytes(BytesRepr::Inline {
            len: len.min(8),
            bytes,
        })
    }

    /// Whether the bytes are stored inline (own no allocation).
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self.0, BytesRepr::Inline { .. })
    }

    /// The bytes as a slice.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            BytesRepr::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(bytes),
            BytesRepr::Heap(v) => v,
        }
    }

    /// The bytes as a `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_slice().to_vec()
    }
}

impl From<&[u8]> for Bytes {
    fn from(b: &[u8]) -> Bytes {
        match u8::try_from(b.len()) {
            Ok(len) if b.len() <= INLINE_BYTES => {
                let mut bytes = [0; INLINE_BYTES];
                for (d, s) in bytes.iter_mut().zip(b) {
                    *d = *s;
                }
                Bytes(BytesRepr::Inline { len, bytes })
            }
            _ => Bytes(BytesRepr::Heap(b.to_vec())),
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        if v.len() <= INLINE_BYTES {
            Bytes::from(v.as_slice())
        } else {
            Bytes(BytesRepr::Heap(v))
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

// Shown, compared and hashed as the byte slice, however it is stored.
impl core::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Bytes) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Bytes {}

impl Hash for Bytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

/// One part of a composite storage: `bit_size` bits starting at `location`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Part {
    /// Where the part's bits are.
    pub location: LocationDescription,
    /// The part's size in bits.
    pub bit_size: u64,
}

/// A single location: a storage and a bit offset within it. For memory the
/// offset is the address times 8 (plus a bit offset).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SingleLocation {
    /// The storage.
    pub storage: Storage,
    /// Offset within the storage, in bits.
    pub bit_offset: u128,
}

/// A location description: one or more single locations (an object may live
/// in several places at once; reads may use any, writes must update all).
/// The DWARF contract's name, distinct from the stack-map contract's
/// `locus_stackmap::Location` (where a live value is at a safepoint).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocationDescription {
    /// The places; never empty when built by the evaluator.
    pub places: Places,
}

/// The former name of [`LocationDescription`], kept for one release so that
/// existing code builds; new code names the contract.
pub type Location = LocationDescription;

/// The places of a [`LocationDescription`]: a slice of single locations
/// (`Deref<Target = [SingleLocation]>`), with the usual single place stored
/// inline so that most locations the evaluator builds allocate nothing.
/// Build one with [`Places::one`] or from a `Vec` (`vec![..].into()`).
#[derive(Clone, Debug)]
pub struct Places(Repr);

#[derive(Clone, Debug)]
enum Repr {
    One(SingleLocation),
    Many(Vec<SingleLocation>),
}

impl Places {
    /// One place.
    pub fn one(place: SingleLocation) -> Places {
        Places(Repr::One(place))
    }

    /// Whether the one place is stored inline (not in a vector).
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self.0, Repr::One(_))
    }

    /// The places as a slice.
    pub fn as_slice(&self) -> &[SingleLocation] {
        match &self.0 {
            Repr::One(p) => core::slice::from_ref(p),
            Repr::Many(v) => v,
        }
    }

    /// The places as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [SingleLocation] {
        match &mut self.0 {
            Repr::One(p) => core::slice::from_mut(p),
            Repr::Many(v) => v,
        }
    }

    /// Adds a place.
    pub fn push(&mut self, place: SingleLocation) {
        match &mut self.0 {
            Repr::Many(v) => v.push(place),
            Repr::One(_) => {
                let Repr::One(first) = core::mem::replace(&mut self.0, Repr::Many(Vec::new()))
                else {
                    return;
                };
                self.0 = Repr::Many(alloc::vec![first, place]);
            }
        }
    }
}

impl Deref for Places {
    type Target = [SingleLocation];
    fn deref(&self) -> &[SingleLocation] {
        self.as_slice()
    }
}

impl DerefMut for Places {
    fn deref_mut(&mut self) -> &mut [SingleLocation] {
        self.as_mut_slice()
    }
}

impl From<Vec<SingleLocation>> for Places {
    fn from(mut v: Vec<SingleLocation>) -> Places {
        match (v.len(), v.pop()) {
            (1, Some(p)) => Places::one(p),
            (_, Some(p)) => {
                v.push(p);
                Places(Repr::Many(v))
            }
            _ => Places(Repr::Many(v)),
        }
    }
}

impl FromIterator<SingleLocation> for Places {
    fn from_iter<I: IntoIterator<Item = SingleLocation>>(iter: I) -> Places {
        Places::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl<'p> IntoIterator for &'p Places {
    type Item = &'p SingleLocation;
    type IntoIter = core::slice::Iter<'p, SingleLocation>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<'p> IntoIterator for &'p mut Places {
    type Item = &'p mut SingleLocation;
    type IntoIter = core::slice::IterMut<'p, SingleLocation>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_mut_slice().iter_mut()
    }
}

// Equality and hashing see only the places, however they are stored.
impl PartialEq for Places {
    fn eq(&self, other: &Places) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Places {}

impl Hash for Places {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

/// Why an offset could not be applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OffsetOutOfRange;

impl SingleLocation {
    /// Memory at byte `address` of `address_space`.
    pub fn memory(address_space: u64, address: u64) -> SingleLocation {
        SingleLocation {
            storage: Storage::Memory { address_space },
            bit_offset: u128::from(address) * 8,
        }
    }

    /// The memory byte address and bit remainder, if this is memory.
    pub fn memory_address(&self) -> Option<(u64, u64, u8)> {
        match self.storage {
            Storage::Memory { address_space } => Some((
                address_space,
                (self.bit_offset / 8) as u64,
                (self.bit_offset % 8) as u8,
            )),
            _ => None,
        }
    }

    /// Adds `bits` (may be negative) to the offset. The result must be
    /// non-negative and less than the storage's [`Storage::bit_size`] when
    /// that is known (memory: `address_size` bytes of address); registers
    /// are not checked here (their size is the target's). Undefined storage
    /// has no offset: it is left unchanged.
    pub fn offset_bits(&mut self, bits: i128, address_size: u8) -> Result<(), OffsetOutOfRange> {
        if matches!(self.storage, Storage::Undefined) {
            return Ok(());
        }
        let new = (self.bit_offset as i128)
            .checked_add(bits)
            .ok_or(OffsetOutOfRange)?;
        if new < 0 {
            return Err(OffsetOutOfRange);
        }
        if let Some(size) = self.storage.bit_size(address_size) {
            if new as u128 >= size {
                return Err(OffsetOutOfRange);
            }
        }
        self.bit_offset = new as u128;
        Ok(())
    }
}

impl LocationDescription {
    /// A size measure: the number of single locations and composite parts,
    /// counted through nested composites. The evaluator bounds it so that no
    /// expression can build an unbounded location.
    #[inline]
    pub fn weight(&self) -> usize {
        // The usual case inline: one place that is not a composite.
        if let [p] = self.places.as_slice() {
            if !matches!(p.storage, Storage::Composite(_)) {
                return 1;
            }
        }
        self.weight_of_places()
    }

    fn weight_of_places(&self) -> usize {
        self.places
            .iter()
            .map(|p| match &p.storage {
                Storage::Composite(parts) => 1 + parts_weight(parts),
                _ => 1,
            })
            .fold(0usize, usize::saturating_add)
    }

    /// A location with one place.
    pub fn single(storage: Storage, bit_offset: u128) -> LocationDescription {
        LocationDescription {
            places: Places::one(SingleLocation {
                storage,
                bit_offset,
            }),
        }
    }

    /// Memory at byte `address` of `address_space`.
    pub fn memory(address_space: u64, address: u64) -> LocationDescription {
        LocationDescription {
            places: Places::one(SingleLocation::memory(address_space, address)),
        }
    }

    /// Register `register` at offset 0.
    pub fn register(register: u16) -> LocationDescription {
        LocationDescription::single(Storage::Register(register), 0)
    }

    /// The undefined location.
    pub fn undefined() -> LocationDescription {
        LocationDescription::single(Storage::Undefined, 0)
    }

    /// A complete composite of `parts` at offset 0.
    pub fn composite(parts: Vec<Part>) -> LocationDescription {
        LocationDescription::single(Storage::Composite(parts), 0)
    }

    /// Adds `bits` to the offset of every place (the spec's rule for
    /// `DW_OP_offset` & co. on a multi-place description).
    pub fn offset_bits(&mut self, bits: i128, address_size: u8) -> Result<(), OffsetOutOfRange> {
        for p in self.places.iter_mut() {
            p.offset_bits(bits, address_size)?;
        }
        Ok(())
    }

    /// If this is a single memory location in address space 0 at a whole
    /// byte, its address: the implicit conversion of a memory location
    /// description to a generic value.
    pub fn as_default_address(&self) -> Option<u64> {
        match self.places.as_slice() {
            [p] => match p.memory_address() {
                Some((0, addr, 0)) => Some(addr),
                _ => None,
            },
            _ => None,
        }
    }
}

/// [`Location::weight`] of a list of parts.
pub(crate) fn parts_weight(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| 1 + p.location.weight())
        .fold(0usize, usize::saturating_add)
}
