//! Address and ID lookup over the records of one or more tables.
//!
//! A runtime stopped at a safepoint holds a return address; this index maps it to the
//! records there. The key is the absolute code address `function address + load bias +
//! instruction offset`. Neither key is unique (the spec: "LLVM passes this ID through
//! directly to the stack map record without checking uniqueness"; several records can share
//! an offset), so both lookups return every match, in section order.
//!
//! Address lookup is the hot path (one per frame in a stack walk), so it goes through an
//! open-addressing hash table whose slot holds the first match whole: one probe, usually one
//! cache line, then the record itself. The sorted arrays behind it serve address-order
//! iteration, addresses with several records, and lookup by ID.

use alloc::vec;
use alloc::vec::Vec;

use crate::endian::Endian;
use crate::parse::{Function, Record, Table};

/// One record found by the index, with where it came from.
#[derive(Clone, Copy, Debug)]
pub struct IndexedRecord<'a, E: Endian> {
    /// Absolute code address: function address + load bias + instruction offset.
    pub address: u64,
    /// The function the record belongs to.
    pub function: Function,
    /// Number of the table within the section.
    pub table: usize,
    /// The record.
    pub record: Record<'a, E>,
}

/// Where a record is (its table, its function within the table, its section offset) and
/// its two counts, so that it can be handed out without reading its bytes.
#[derive(Clone, Copy, Debug)]
struct Entry {
    offset: usize,
    table: u32,
    function: u32,
    num_locations: u16,
    num_live_outs: u16,
}

/// A hash slot: the address and the first record there, flattened into 32 bytes so that a
/// probe usually reads one cache line.
#[derive(Clone, Copy, Debug)]
struct Slot {
    address: u64,
    offset: usize,
    table: u32,
    function: u32,
    num_locations: u16,
    num_live_outs: u16,
    /// [`EMPTY`], [`SINGLE`], or 2 + the position in the sorted arrays of the first of
    /// several records at this address.
    kind: u32,
}

const EMPTY: u32 = 0;
const SINGLE: u32 = 1;

impl Slot {
    const VACANT: Slot = Slot::new(
        0,
        Entry {
            offset: 0,
            table: 0,
            function: 0,
            num_locations: 0,
            num_live_outs: 0,
        },
        EMPTY,
    );

    const fn new(address: u64, e: Entry, kind: u32) -> Slot {
        Slot {
            address,
            offset: e.offset,
            table: e.table,
            function: e.function,
            num_locations: e.num_locations,
            num_live_outs: e.num_live_outs,
            kind,
        }
    }

    fn entry(&self) -> Entry {
        Entry {
            offset: self.offset,
            table: self.table,
            function: self.function,
            num_locations: self.num_locations,
            num_live_outs: self.num_live_outs,
        }
    }
}

/// A multimap from code address and from record ID to records.
#[derive(Clone, Debug)]
pub struct StackMapIndex<'a, E: Endian> {
    tables: Vec<Table<'a, E>>,
    load_bias: u64,
    /// Sorted; parallel to `entries`. Kept apart so binary searches touch only keys.
    addresses: Vec<u64>,
    entries: Vec<Entry>,
    /// (ID, position in `entries`), sorted.
    ids: Vec<(u64, u32)>,
    /// Open addressing with linear probing.
    slots: Vec<Slot>,
}

#[inline(always)]
fn hash(address: u64) -> u64 {
    // Code addresses differ mostly in their low bits; mix them into the high ones, which
    // pick the slot.
    (address ^ (address >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl<'a, E: Endian> StackMapIndex<'a, E> {
    /// Indexes every record of `tables`. `load_bias` is added to each function address: the
    /// difference between where the code was loaded and the addresses the section holds
    /// (0 for a non-PIE executable, the load base for a PIE or shared object read from
    /// its file, 0 for a section read from memory after the loader relocated it).
    ///
    /// A relocatable object's section holds 0 for every function address until its
    /// relocations are applied; read it through
    /// [`StackMapSection::resolved`](crate::object::StackMapSection::resolved).
    pub fn new(tables: Vec<Table<'a, E>>, load_bias: u64) -> Self {
        let total: usize = tables.iter().map(|t| t.num_records() as usize).sum();
        let mut keyed: Vec<(u64, Entry)> = Vec::with_capacity(total);
        for (ti, t) in tables.iter().enumerate() {
            for (fi, f, r) in t.records_with_function_indices() {
                let address = f
                    .address
                    .wrapping_add(load_bias)
                    .wrapping_add(u64::from(r.instruction_offset()));
                let entry = Entry {
                    offset: r.offset(),
                    table: ti as u32,
                    function: fi as u32,
                    num_locations: r.num_locations(),
                    num_live_outs: r.num_live_outs(),
                };
                keyed.push((address, entry));
            }
        }
        // Stable: records at one address stay in section order.
        keyed.sort_by_key(|(a, _)| *a);
        let (addresses, entries): (Vec<u64>, Vec<Entry>) = keyed.into_iter().unzip();
        let mut ids: Vec<(u64, u32)> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let t = tables.get(e.table as usize)?;
                Some((t.record_at(e.offset)?.id(), i as u32))
            })
            .collect();
        ids.sort_unstable();
        let slots = build_slots(&addresses, &entries);
        StackMapIndex {
            tables,
            load_bias,
            addresses,
            entries,
            ids,
            slots,
        }
    }

    /// The indexed tables.
    pub fn tables(&self) -> &[Table<'a, E>] {
        &self.tables
    }

    /// The load bias the index was built with.
    pub fn load_bias(&self) -> u64 {
        self.load_bias
    }

    /// Number of indexed records.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if no record was indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[inline]
    fn materialize(&self, address: u64, e: Entry) -> Option<IndexedRecord<'a, E>> {
        let t = self.tables.get(e.table as usize)?;
        Some(IndexedRecord {
            address,
            function: t.function(e.function as usize)?,
            table: e.table as usize,
            record: t.record_with_counts(e.offset, e.num_locations, e.num_live_outs)?,
        })
    }

    fn get(&self, i: usize) -> Option<IndexedRecord<'a, E>> {
        self.materialize(*self.addresses.get(i)?, *self.entries.get(i)?)
    }

    #[inline]
    fn slot(&self, address: u64) -> Option<Slot> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        // Multiply-shift maps the hash onto any table size without a division.
        let mut i = ((u128::from(hash(address)) * n as u128) >> 64) as usize;
        loop {
            let s = self.slots.get(i)?;
            if s.kind == EMPTY {
                return None;
            }
            if s.address == address {
                return Some(*s);
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
    }

    /// Every record at absolute code address `address`, in section order.
    #[inline]
    pub fn lookup(&self, address: u64) -> Lookup<'_, 'a, E> {
        let (single, next) = match self.slot(address) {
            None => (None, None),
            Some(s) if s.kind == SINGLE => (Some(s.entry()), None),
            Some(s) => (None, Some(s.kind as usize - 2)),
        };
        Lookup {
            index: self,
            single,
            next,
            address,
        }
    }

    /// Every record with ID `id`, in address order.
    pub fn by_id(&self, id: u64) -> impl Iterator<Item = IndexedRecord<'a, E>> + '_ {
        let first = self.ids.partition_point(|&(k, _)| k < id);
        self.ids
            .get(first..)
            .unwrap_or(&[])
            .iter()
            .take_while(move |&&(k, _)| k == id)
            .filter_map(move |&(_, i)| self.get(i as usize))
    }

    /// Every record in address order.
    pub fn iter(&self) -> impl Iterator<Item = IndexedRecord<'a, E>> + '_ {
        (0..self.entries.len()).filter_map(move |i| self.get(i))
    }
}

/// Fills the hash table: one slot per distinct address, at most 3/4 full.
fn build_slots(addresses: &[u64], entries: &[Entry]) -> Vec<Slot> {
    let distinct =
        addresses.windows(2).filter(|w| w[0] != w[1]).count() + usize::from(!addresses.is_empty());
    let n = if distinct == 0 {
        0
    } else {
        distinct + distinct / 3 + 1
    };
    let mut slots = vec![Slot::VACANT; n];
    let mut i = 0;
    while let (Some(&address), Some(&entry)) = (addresses.get(i), entries.get(i)) {
        let count = addresses[i..].iter().take_while(|&&a| a == address).count();
        let kind = if count > 1 {
            (i as u32).saturating_add(2)
        } else {
            SINGLE
        };
        let mut at = ((u128::from(hash(address)) * n as u128) >> 64) as usize;
        while slots.get(at).is_some_and(|s| s.kind != EMPTY) {
            at = if at + 1 == n { 0 } else { at + 1 };
        }
        if let Some(slot) = slots.get_mut(at) {
            *slot = Slot::new(address, entry, kind);
        }
        i += count;
    }
    slots
}

/// The records at one address; see [`StackMapIndex::lookup`].
#[derive(Clone, Debug)]
pub struct Lookup<'i, 'a, E: Endian> {
    index: &'i StackMapIndex<'a, E>,
    /// The only record, when the address has one.
    single: Option<Entry>,
    /// Position in the sorted arrays of the next of several records.
    next: Option<usize>,
    address: u64,
}

impl<'a, E: Endian> Iterator for Lookup<'_, 'a, E> {
    type Item = IndexedRecord<'a, E>;
    #[inline]
    fn next(&mut self) -> Option<IndexedRecord<'a, E>> {
        if let Some(e) = self.single.take() {
            return self.index.materialize(self.address, e);
        }
        let i = self.next?;
        if self.index.addresses.get(i) != Some(&self.address) {
            self.next = None;
            return None;
        }
        self.next = Some(i + 1);
        self.index.get(i)
    }
}
