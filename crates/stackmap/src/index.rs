//! Address and ID lookup over the records of one or more tables.
//!
//! A runtime stopped at a safepoint holds a return address; this index maps it to the
//! records there. The key is the absolute code address `function address + load bias +
//! instruction offset`. Neither key is unique (the spec: "LLVM passes this ID through
//! directly to the stack map record without checking uniqueness"; several records can share
//! an offset), so both lookups return every match, in section order.
//!
//! Address lookup is the hot path (one per frame in a stack walk), so it goes through a hash
//! table of 64-byte buckets, each one cache line of four 16-byte slots, with two slots per
//! record so that a probe seldom leaves its first bucket. A slot holds the address (as a
//! 32-bit distance from the lowest indexed address), the record's place in its table, its
//! counts and the position of its function in a small side array; the records of one
//! address fill consecutive slots of one bucket. A lookup reads one bucket, compares its
//! four keys without branching (a branch on which slot matched would keep the processor from
//! overlapping the cache misses of successive lookups), and then touches only the side
//! array, which stays in cache: it never reads the record's bytes. The sorted arrays behind
//! it serve address-order iteration, addresses with more records than a bucket holds, lookup
//! by ID, and indexes whose addresses span 4 GiB or more (which the compact slots cannot
//! hold: those look addresses up by binary search).

use alloc::vec;
use alloc::vec::Vec;

use crate::endian::Endian;
use crate::parse::{Function, Record, RecordSource, Table};

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

/// Where a record is (its place in its table's records region and its function's position
/// in [`StackMapIndex::functions`]) and its two counts, so that it can be handed out without
/// reading its bytes.
#[derive(Clone, Copy, Debug)]
struct Entry {
    at: usize,
    function: u32,
    num_locations: u16,
    num_live_outs: u16,
}

/// A function of one of the indexed tables, with what it takes to make its records.
#[derive(Clone, Copy, Debug)]
struct FunctionRef<'a, E: Endian> {
    function: Function,
    table: u32,
    source: RecordSource<'a, E>,
}

/// Slots per bucket: one 64-byte cache line of 16-byte slots.
const BUCKET_SLOTS: usize = 4;

/// [`Bucket::key`] of a slot that holds nothing.
const EMPTY: u32 = 0;
/// [`Bucket::function`] of a slot whose address has several records; its
/// [`Bucket::at`] is then the position of the first in the sorted arrays.
const SEVERAL: u32 = u32::MAX;

/// Four slots, stored field by field so that the four keys are compared at once. Slots fill
/// from the first, so a bucket whose last slot is empty ends every probe sequence through it.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Bucket {
    /// Address minus [`StackMapIndex::base`], plus 1; [`EMPTY`] in an empty slot.
    key: [u32; BUCKET_SLOTS],
    /// Where the record is in its table's records region (or, for [`SEVERAL`], a position
    /// in the sorted arrays).
    at: [u32; BUCKET_SLOTS],
    /// Position in [`StackMapIndex::functions`], or [`SEVERAL`].
    function: [u32; BUCKET_SLOTS],
    /// NumLocations | NumLiveOuts << 16.
    counts: [u32; BUCKET_SLOTS],
}

impl Bucket {
    const VACANT: Bucket = Bucket {
        key: [EMPTY; BUCKET_SLOTS],
        at: [0; BUCKET_SLOTS],
        function: [0; BUCKET_SLOTS],
        counts: [0; BUCKET_SLOTS],
    };
}

/// A multimap from code address and from record ID to records.
#[derive(Clone, Debug)]
pub struct StackMapIndex<'a, E: Endian> {
    tables: Vec<Table<'a, E>>,
    load_bias: u64,
    /// The functions of all tables, table after table.
    functions: Vec<FunctionRef<'a, E>>,
    /// Sorted; parallel to `entries`. Kept apart so binary searches touch only keys.
    addresses: Vec<u64>,
    entries: Vec<Entry>,
    /// (ID, position in `entries`), sorted.
    ids: Vec<(u64, u32)>,
    /// The lowest indexed address: slot keys are relative to it.
    base: u64,
    /// Open addressing with linear probing from bucket to bucket; empty when the index is
    /// empty or does not fit the compact slots.
    buckets: Vec<Bucket>,
}

/// The bucket a key starts probing at, out of `n`.
#[inline(always)]
fn home(key: u32, n: usize) -> usize {
    // Code addresses differ mostly in their low bits: the multiply mixes them into the high
    // half, and multiply-shift maps that onto any table size without a division.
    let mixed = u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    ((mixed * n as u64) >> 32) as usize
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
        let sources: Vec<RecordSource<'a, E>> = tables.iter().map(Table::record_source).collect();
        let mut functions = Vec::new();
        let mut keyed: Vec<(u64, Entry)> = Vec::with_capacity(total);
        for ((ti, t), source) in tables.iter().enumerate().zip(&sources) {
            let first = functions.len();
            functions.extend(t.functions().map(|function| FunctionRef {
                function,
                table: ti as u32,
                source: *source,
            }));
            for (fi, f, r) in t.records_with_function_indices() {
                let address = f
                    .address
                    .wrapping_add(load_bias)
                    .wrapping_add(u64::from(r.instruction_offset()));
                let entry = Entry {
                    at: source.position(r.offset()).unwrap_or(0),
                    function: (first + fi) as u32,
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
                let f = functions.get(e.function as usize)?;
                let r = f.source.record(e.at, e.num_locations, e.num_live_outs)?;
                Some((r.id(), i as u32))
            })
            .collect();
        ids.sort_unstable();
        let base = addresses.first().copied().unwrap_or(0);
        let buckets = build_buckets(&addresses, &entries, base, functions.len());
        StackMapIndex {
            tables,
            load_bias,
            functions,
            addresses,
            entries,
            ids,
            base,
            buckets,
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

    #[inline(always)]
    fn materialize(
        &self,
        address: u64,
        at: usize,
        function: u32,
        num_locations: u16,
        num_live_outs: u16,
    ) -> Option<IndexedRecord<'a, E>> {
        let f = self.functions.get(function as usize)?;
        Some(IndexedRecord {
            address,
            function: f.function,
            table: f.table as usize,
            record: f.source.record(at, num_locations, num_live_outs)?,
        })
    }

    fn get(&self, i: usize) -> Option<IndexedRecord<'a, E>> {
        let e = self.entries.get(i)?;
        self.materialize(
            *self.addresses.get(i)?,
            e.at,
            e.function,
            e.num_locations,
            e.num_live_outs,
        )
    }

    /// Every record at absolute code address `address`, in section order.
    #[inline]
    pub fn lookup(&self, address: u64) -> Lookup<'_, 'a, E> {
        let mut l = Lookup {
            index: self,
            bucket: None,
            hits: 0,
            next: usize::MAX,
            address,
        };
        if self.buckets.is_empty() {
            // No compact slots: binary search.
            l.next = self.addresses.partition_point(|&a| a < address);
            return l;
        }
        let distance = address.wrapping_sub(self.base);
        if distance >= u64::from(u32::MAX) {
            return l;
        }
        let key = distance as u32 + 1;
        let n = self.buckets.len();
        let mut b = home(key, n);
        for _ in 0..n {
            let Some(bucket) = self.buckets.get(b) else {
                break;
            };
            // The slots with this key (never EMPTY), found without branches: which slot it is
            // varies from lookup to lookup, and a branch on it would hold up the next lookup
            // until this one's cache miss is served.
            let mut hits = 0u32;
            for i in 0..BUCKET_SLOTS {
                hits |= u32::from(bucket.key[i] == key) << i;
            }
            if hits != 0 {
                l.bucket = Some(bucket);
                l.hits = hits;
                return l;
            }
            if bucket.key[BUCKET_SLOTS - 1] == EMPTY {
                break;
            }
            b = if b + 1 == n { 0 } else { b + 1 };
        }
        l
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

/// Fills the hash table, about half full: the records of an address go to consecutive slots
/// of the first bucket on its probe sequence that has a free slot, in section order, or, when
/// they do not all fit there, one [`SEVERAL`] slot does. Returns no buckets when there is
/// nothing to index or when the compact slots cannot hold the index (addresses spanning 4 GiB
/// or more, a record past 4 GiB into its table, too many functions).
fn build_buckets(
    addresses: &[u64],
    entries: &[Entry],
    base: u64,
    num_functions: usize,
) -> Vec<Bucket> {
    let (Some(&last), Some(_)) = (addresses.last(), entries.last()) else {
        return Vec::new();
    };
    let fits = last - base < u64::from(u32::MAX)
        && num_functions < SEVERAL as usize
        && entries.len() <= u32::MAX as usize
        && entries.iter().all(|e| u32::try_from(e.at).is_ok());
    if !fits {
        return Vec::new();
    }
    // Two slots per record: a probe rarely has to leave its first bucket.
    let n = (2 * entries.len()).div_ceil(BUCKET_SLOTS);
    let mut buckets = vec![Bucket::VACANT; n];
    let mut i = 0;
    while let Some(&address) = addresses.get(i) {
        let count = addresses[i..].iter().take_while(|&&a| a == address).count();
        let key = (address - base + 1) as u32;
        let mut b = home(key, n);
        // There are more slots than records, so a free one exists.
        for _ in 0..n {
            let Some(bucket) = buckets.get_mut(b) else {
                break;
            };
            let used = bucket.key.iter().take_while(|&&k| k != EMPTY).count();
            if used < BUCKET_SLOTS {
                let group = entries.get(i..i + count).unwrap_or(&[]);
                if used + count <= BUCKET_SLOTS {
                    for (s, e) in (used..).zip(group) {
                        bucket.key[s] = key;
                        bucket.at[s] = e.at as u32;
                        bucket.function[s] = e.function;
                        bucket.counts[s] =
                            u32::from(e.num_locations) | u32::from(e.num_live_outs) << 16;
                    }
                } else {
                    bucket.key[used] = key;
                    bucket.at[used] = i as u32;
                    bucket.function[used] = SEVERAL;
                }
                break;
            }
            b = if b + 1 == n { 0 } else { b + 1 };
        }
        i += count;
    }
    buckets
}

/// The records at one address; see [`StackMapIndex::lookup`].
#[derive(Clone, Debug)]
pub struct Lookup<'i, 'a, E: Endian> {
    index: &'i StackMapIndex<'a, E>,
    /// The bucket that holds the address.
    bucket: Option<&'i Bucket>,
    /// The slots of `bucket` not yet visited that hold the address, one bit each.
    hits: u32,
    /// Position in the sorted arrays of the next of several records, or `usize::MAX`.
    next: usize,
    address: u64,
}

impl<'a, E: Endian> Iterator for Lookup<'_, 'a, E> {
    type Item = IndexedRecord<'a, E>;
    #[inline]
    fn next(&mut self) -> Option<IndexedRecord<'a, E>> {
        if self.hits != 0 {
            let i = self.hits.trailing_zeros() as usize;
            self.hits &= self.hits - 1;
            let bucket = self.bucket?;
            let (&at, &function, &counts) = (
                bucket.at.get(i)?,
                bucket.function.get(i)?,
                bucket.counts.get(i)?,
            );
            if function != SEVERAL {
                return self.index.materialize(
                    self.address,
                    at as usize,
                    function,
                    counts as u16,
                    (counts >> 16) as u16,
                );
            }
            // Too many records for the bucket: they are in the sorted arrays from `at`.
            self.hits = 0;
            self.next = at as usize;
        }
        let i = self.next;
        if self.index.addresses.get(i) != Some(&self.address) {
            self.next = usize::MAX;
            return None;
        }
        self.next = i + 1;
        self.index.get(i)
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;
    use crate::endian::LittleEndian;
    use crate::parse::{ParseOptions, Tables};

    /// One little-endian table: functions as (address, record offsets); every record has no
    /// locations or live-outs and its ID is its position in the table.
    fn table(functions: &[(u64, Vec<u32>)]) -> Vec<u8> {
        let n: usize = functions.iter().map(|(_, r)| r.len()).sum();
        let mut s = Vec::new();
        s.extend([3, 0, 0, 0]);
        s.extend((functions.len() as u32).to_le_bytes());
        s.extend(0u32.to_le_bytes());
        s.extend((n as u32).to_le_bytes());
        for (address, records) in functions {
            s.extend(address.to_le_bytes());
            s.extend(16u64.to_le_bytes());
            s.extend((records.len() as u64).to_le_bytes());
        }
        let mut id = 0u64;
        for (_, records) in functions {
            for &offset in records {
                s.extend(id.to_le_bytes());
                s.extend(offset.to_le_bytes());
                s.extend([0; 12]);
                id += 1;
            }
        }
        s
    }

    /// (address, table, ID) of every record of `sections`, in section order.
    fn expected(sections: &[&[(u64, Vec<u32>)]]) -> Vec<(u64, usize, u64)> {
        let mut all = Vec::new();
        for (t, functions) in sections.iter().enumerate() {
            let mut id = 0;
            for (address, records) in functions.iter() {
                for &offset in records {
                    all.push((address + u64::from(offset), t, id));
                    id += 1;
                }
            }
        }
        all
    }

    fn check(index: &StackMapIndex<'_, LittleEndian>, all: &[(u64, usize, u64)]) {
        for &(address, _, _) in all {
            let want: Vec<(usize, u64)> = all
                .iter()
                .filter(|x| x.0 == address)
                .map(|x| (x.1, x.2))
                .collect();
            let got: Vec<(usize, u64)> = index
                .lookup(address)
                .map(|r| {
                    assert_eq!(r.address, address);
                    let at = r
                        .function
                        .address
                        .wrapping_add(index.load_bias())
                        .wrapping_add(u64::from(r.record.instruction_offset()));
                    assert_eq!(at, address);
                    (r.table, r.record.id())
                })
                .collect();
            assert_eq!(got, want, "address {address:#x}");
        }
        for &(address, _, _) in all {
            let probes = [
                address.wrapping_sub(1),
                address.wrapping_add(1),
                address ^ (1 << 40),
                0,
                u64::MAX,
            ];
            for probe in probes {
                let want = all.iter().filter(|x| x.0 == probe).count();
                assert_eq!(index.lookup(probe).count(), want, "probe {probe:#x}");
            }
        }
    }

    #[test]
    fn compact_slots_with_shared_addresses() {
        // Groups of 1 to 6 records per address: up to 4 share a bucket, more take the
        // sorted arrays.
        let mut offsets = Vec::new();
        for i in 0..600u32 {
            for _ in 0..=(i % 6) {
                offsets.push(i * 4);
            }
        }
        let first = [(0x1000, offsets.clone()), (0x9000, vec![0, 0, 8])];
        let second = [(0x4_0000, vec![2, 2]), (0x1000, vec![0, 4])];
        let a = table(&first);
        let b = table(&second);
        let mut section = a.clone();
        section.extend(&b);
        let tables: Vec<_> = Tables::new(&section, LittleEndian, ParseOptions::default())
            .collect::<crate::Result<_>>()
            .expect("valid");
        let index = StackMapIndex::new(tables, 0);
        assert!(!index.buckets.is_empty(), "compact slots expected");
        check(&index, &expected(&[&first, &second]));
    }

    #[test]
    fn addresses_spanning_4_gib_fall_back_to_binary_search() {
        let functions = [(0x1000, vec![0, 4, 4, 8]), (0x2_0000_1000, vec![0, 0, 16])];
        let section = table(&functions);
        let tables: Vec<_> = Tables::new(&section, LittleEndian, ParseOptions::default())
            .collect::<crate::Result<_>>()
            .expect("valid");
        let index = StackMapIndex::new(tables, 0);
        assert!(index.buckets.is_empty(), "binary search expected");
        check(&index, &expected(&[&functions]));
    }

    #[test]
    fn load_bias_wraps() {
        let functions = [(0x1000, vec![0, 4, 4, 8])];
        let section = table(&functions);
        let tables: Vec<_> = Tables::new(&section, LittleEndian, ParseOptions::default())
            .collect::<crate::Result<_>>()
            .expect("valid");
        let bias = u64::MAX - 0xfff;
        let index = StackMapIndex::new(tables, bias);
        let all: Vec<_> = expected(&[&functions])
            .into_iter()
            .map(|(a, t, id)| (a.wrapping_add(bias), t, id))
            .collect();
        check(&index, &all);
    }
}
