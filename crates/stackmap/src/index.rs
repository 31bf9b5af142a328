//! Address and ID lookup over the records of one or more tables.
//!
//! A runtime stopped at a safepoint holds a return address; this index maps it to the
//! records there. The key is the absolute code address `function address + load bias +
//! instruction offset`. Neither key is unique (the spec: "LLVM passes this ID through
//! directly to the stack map record without checking uniqueness"; several records can share
//! an offset), so both lookups return every match, in section order.

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

#[derive(Clone, Copy, Debug)]
struct Entry {
    table: u32,
    function: u32,
    offset: usize,
}

/// A multimap from code address and from record ID to records.
#[derive(Clone, Debug)]
pub struct StackMapIndex<'a, E: Endian> {
    tables: Vec<Table<'a, E>>,
    load_bias: u64,
    /// Sorted; parallel to `entries`. Kept apart so the binary search touches only keys.
    addresses: Vec<u64>,
    entries: Vec<Entry>,
    /// (ID, position in `entries`), sorted.
    ids: Vec<(u64, u32)>,
}

impl<'a, E: Endian> StackMapIndex<'a, E> {
    /// Indexes every record of `tables`. `load_bias` is added to each function address: the
    /// difference between where the code was loaded and the addresses the section holds
    /// (0 for a non-PIE executable, the load base for a PIE or shared object read from
    /// its file, 0 for a section read from memory after the loader relocated it).
    pub fn new(tables: Vec<Table<'a, E>>, load_bias: u64) -> Self {
        let total: usize = tables.iter().map(|t| t.num_records() as usize).sum();
        let mut keyed: Vec<(u64, Entry)> = Vec::with_capacity(total);
        for (ti, t) in tables.iter().enumerate() {
            let mut fi = 0u32;
            let mut left = 0u64;
            let mut functions = t.functions();
            let mut current: Option<Function> = None;
            for r in t.records() {
                while left == 0 {
                    match functions.next() {
                        Some(f) => {
                            current = Some(f);
                            left = f.record_count;
                            fi += 1;
                        }
                        None => {
                            current = None;
                            break;
                        }
                    }
                }
                let Some(f) = current else { break };
                left -= 1;
                let address = f
                    .address
                    .wrapping_add(load_bias)
                    .wrapping_add(u64::from(r.instruction_offset()));
                keyed.push((
                    address,
                    Entry {
                        table: ti as u32,
                        function: fi - 1,
                        offset: r.offset(),
                    },
                ));
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
        StackMapIndex {
            tables,
            load_bias,
            addresses,
            entries,
            ids,
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

    fn get(&self, i: usize) -> Option<IndexedRecord<'a, E>> {
        let e = self.entries.get(i)?;
        let t = self.tables.get(e.table as usize)?;
        Some(IndexedRecord {
            address: *self.addresses.get(i)?,
            function: t.function(e.function as usize)?,
            table: e.table as usize,
            record: t.record_at(e.offset)?,
        })
    }

    /// Every record at absolute code address `address`, in section order.
    pub fn lookup(&self, address: u64) -> impl Iterator<Item = IndexedRecord<'a, E>> + '_ {
        let first = self.addresses.partition_point(|&a| a < address);
        let n = self
            .addresses
            .get(first..)
            .map_or(0, |rest| rest.iter().take_while(|&&a| a == address).count());
        (first..first + n).filter_map(move |i| self.get(i))
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
