//! The `gc.statepoint` view of a record.
//!
//! A record emitted for `llvm.experimental.gc.statepoint` lays its locations out as LLVM's
//! statepoint lowering writes them: three Constant locations (the call's calling convention,
//! the statepoint flags, and the number of deopt locations N), then N locations for the
//! `"deopt"` operand bundle, then (base, derived) pairs for the `"gc-live"` pointers.
//! The record's instruction offset is the call's return address.
//!
//! The pairs are what survives code generation, not the bundle itself: LLVM 19 writes one
//! pair per distinct `gc.relocate` left after CodeGenPrepare (a relocate of a constant-offset
//! GEP becomes a GEP of the relocated base, and its pair disappears), and in no promised
//! order (the live-frame test saw them in reverse). A collector should treat the pairs as a
//! set: update every base, then recompute every derived pointer from its base.

use crate::endian::Endian;
use crate::error::{Error, Result};
use crate::parse::{Location, Locations, Record};

/// A record read as a statepoint.
#[derive(Clone, Copy, Debug)]
pub struct StatepointRecord<'a, E: Endian> {
    record: Record<'a, E>,
    calling_convention: u64,
    flags: u64,
    num_deopt: usize,
}

/// One relocated pointer: where its base object is and where the (possibly interior)
/// pointer itself is. They are the same location for a pointer to an object's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcPointer {
    /// Location of the base pointer.
    pub base: Location,
    /// Location of the derived pointer.
    pub derived: Location,
}

impl<'a, E: Endian> StatepointRecord<'a, E> {
    /// Reads `record` as a statepoint. Fails if it does not start with the three constants
    /// or if N deopt locations do not fit, or if what follows them is not whole pairs.
    pub fn new(record: Record<'a, E>) -> Result<Self> {
        let bad = |i: usize| Error::NotAStatepoint {
            offset: record.offset(),
            location: i,
        };
        let constant = |i: usize| match record.location(i) {
            Some(Location::Constant { value, .. }) => Ok(value as i64 as u64),
            Some(Location::ConstantIndex { value, .. }) => Ok(value),
            _ => Err(bad(i)),
        };
        let calling_convention = constant(0)?;
        let flags = constant(1)?;
        let n = constant(2)?;
        let total = usize::from(record.num_locations());
        let after_deopt = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(3))
            .filter(|&e| e <= total);
        let Some(after_deopt) = after_deopt else {
            return Err(bad(2));
        };
        if (total - after_deopt) % 2 != 0 {
            return Err(bad(total - 1));
        }
        Ok(StatepointRecord {
            record,
            calling_convention,
            flags,
            num_deopt: after_deopt - 3,
        })
    }

    /// The underlying record.
    pub fn record(&self) -> Record<'a, E> {
        self.record
    }

    /// The statepoint ID (the record ID).
    pub fn id(&self) -> u64 {
        self.record.id()
    }

    /// The LLVM calling convention number of the wrapped call.
    pub fn calling_convention(&self) -> u64 {
        self.calling_convention
    }

    /// The statepoint flags operand.
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// The locations of the `"deopt"` bundle's values, in bundle order.
    pub fn deopt(&self) -> impl ExactSizeIterator<Item = Location> + 'a {
        self.record.locations().skip(3).take(self.num_deopt)
    }

    /// Number of relocated pointers.
    pub fn num_gc_pointers(&self) -> usize {
        (usize::from(self.record.num_locations()) - 3 - self.num_deopt) / 2
    }

    /// The (base, derived) pairs of the relocated pointers, in record order (which LLVM does
    /// not tie to the bundle's order).
    pub fn gc_pointers(&self) -> GcPointers<'a, E> {
        let mut locations = self.record.locations();
        for _ in 0..3 + self.num_deopt {
            locations.next();
        }
        GcPointers { locations }
    }
}

/// Iterator over a statepoint's (base, derived) pairs.
#[derive(Clone, Debug)]
pub struct GcPointers<'a, E: Endian> {
    locations: Locations<'a, E>,
}

impl<E: Endian> Iterator for GcPointers<'_, E> {
    type Item = GcPointer;
    fn next(&mut self) -> Option<GcPointer> {
        let base = self.locations.next()?;
        let derived = self.locations.next()?;
        Some(GcPointer { base, derived })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.locations.len() / 2;
        (n, Some(n))
    }
}

impl<E: Endian> ExactSizeIterator for GcPointers<'_, E> {}
