//! Location descriptions: one or more single locations, each a storage and a
//! bit offset within it (spec 001, "Location Description").

use alloc::vec;
use alloc::vec::Vec;

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
    Implicit(Vec<u8>),
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

/// One part of a composite storage: `bit_size` bits starting at `location`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Part {
    /// Where the part's bits are.
    pub location: Location,
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// The places; never empty when built by the evaluator.
    pub places: Vec<SingleLocation>,
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
    /// non-negative and, for memory, within the address space
    /// (`address_size` bytes of address).
    pub fn offset_bits(&mut self, bits: i128, address_size: u8) -> Result<(), OffsetOutOfRange> {
        let new = (self.bit_offset as i128)
            .checked_add(bits)
            .ok_or(OffsetOutOfRange)?;
        if new < 0 {
            return Err(OffsetOutOfRange);
        }
        if matches!(self.storage, Storage::Memory { .. }) {
            let limit = 1i128 << (u32::from(address_size).min(8) * 8 + 3);
            if new >= limit {
                return Err(OffsetOutOfRange);
            }
        }
        self.bit_offset = new as u128;
        Ok(())
    }
}

impl Location {
    /// A size measure: the number of single locations and composite parts,
    /// counted through nested composites. The evaluator bounds it so that no
    /// expression can build an unbounded location.
    pub fn weight(&self) -> usize {
        self.places
            .iter()
            .map(|p| match &p.storage {
                Storage::Composite(parts) => 1 + parts_weight(parts),
                _ => 1,
            })
            .fold(0usize, usize::saturating_add)
    }

    /// A location with one place.
    pub fn single(storage: Storage, bit_offset: u128) -> Location {
        Location {
            places: vec![SingleLocation {
                storage,
                bit_offset,
            }],
        }
    }

    /// Memory at byte `address` of `address_space`.
    pub fn memory(address_space: u64, address: u64) -> Location {
        Location {
            places: vec![SingleLocation::memory(address_space, address)],
        }
    }

    /// Register `register` at offset 0.
    pub fn register(register: u16) -> Location {
        Location::single(Storage::Register(register), 0)
    }

    /// The undefined location.
    pub fn undefined() -> Location {
        Location::single(Storage::Undefined, 0)
    }

    /// A complete composite of `parts` at offset 0.
    pub fn composite(parts: Vec<Part>) -> Location {
        Location::single(Storage::Composite(parts), 0)
    }

    /// Adds `bits` to the offset of every place (the spec's rule for
    /// `DW_OP_offset` & co. on a multi-place description).
    pub fn offset_bits(&mut self, bits: i128, address_size: u8) -> Result<(), OffsetOutOfRange> {
        for p in &mut self.places {
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
