//! Address and ID lookup over the records of one or more tables.
//!
//! A runtime stopped at a safepoint holds a return address; this index maps it to the
//! records there. The key is the absolute code address `function address + load bias +
//! instruction offset`. Neither key is unique (the spec: "LLVM passes this ID through
//! directly to the stack map record without checking uniqueness"; several records can share
//! an offset), so both lookups return every match, in section order.
//!
//! Address lookup is the hot path (one per frame in a stack walk), so it goes through a hash
//! table of 64-byte buckets, each one cache line of four 16-byte slots, a power of two of
//! them with at least two slots per record, so that a probe seldom leaves its first bucket.
//! A slot holds the address (as its 32-bit distance from the lowest indexed address, plus
//! one: 0 marks an empty slot), the
//! record's place in its table, its counts and the position of its function in a small side
//! array; the records of one address fill consecutive slots of one bucket. A lookup reads
//! one bucket, compares its four keys at once, and then touches only the side array, which
//! stays in cache: it never reads the record's bytes.
//!
//! What limits lookups is how many of them the processor keeps in flight while each waits
//! for its bucket's cache miss, and that depends on how many instructions each one puts in
//! flight. So the common case is kept short: the key and the bucket are computed without
//! branches, the four keys are compared with one SIMD compare, the rarer cases (a full home
//! bucket, an index without compact slots) are out of line, and a slot's record is made
//! without bounds checks: [`build_buckets`] checks every record it puts in a slot (once,
//! against its table, which was validated when parsed), so the lookup need not. On huge
//! tables the buckets are advised onto 2 MiB pages (Linux), since each lookup would
//! otherwise also miss the TLB.
//!
//! A lookup still waits for its bucket with its instructions in flight, and the processor's
//! window holds only so many of them. [`StackMapIndex::lookup_all`] answers many addresses at
//! once (a stack walk's return addresses, say): it prefetches each address's bucket some
//! lookups before it answers it, so the misses overlap without filling the window; on the
//! benchmark's index that halves the time per lookup.
//!
//! The sorted arrays behind the buckets serve address-order iteration, addresses with more
//! records than a bucket holds, lookup by ID, and indexes whose addresses span 4 GiB or more
//! (which the compact slots cannot hold: those look addresses up by binary search).

use alloc::vec;
use alloc::vec::Vec;

use crate::endian::Endian;
use crate::parse::{Function, Record, RecordSource, Table};
use crate::prefetch::prefetch;

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
/// The key of an address too far from [`StackMapIndex::base`] to be indexed: no slot
/// holds it (the compact slots take only addresses whose key is below it).
const NO_KEY: u32 = u32::MAX;
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
    /// The slots that hold `key` (never [`EMPTY`]), one bit each, found without branches:
    /// which slot it is varies from lookup to lookup, and a branch on it would hold up the
    /// next lookup until this one's cache miss is served.
    #[inline(always)]
    fn hits(&self, key: u32) -> u32 {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            use core::arch::x86_64::{
                __m128i, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_movemask_ps, _mm_set1_epi32,
            };
            // One compare of all four keys: the fewer instructions wait for the bucket's
            // cache miss, the more lookups the processor keeps in flight.
            // SAFETY: `[u32; 4]` and `__m128i` have the same size, and any bits are valid
            // for both.
            let keys = unsafe { core::mem::transmute::<[u32; BUCKET_SLOTS], __m128i>(self.key) };
            // SAFETY: the target has SSE2 (the `cfg` above: x86-64 targets without it, such
            // as kernels', take the loop below).
            let wanted = unsafe { _mm_set1_epi32(key as i32) };
            // SAFETY: as above.
            let equal = unsafe { _mm_cmpeq_epi32(keys, wanted) };
            // SAFETY: as above.
            let equal = unsafe { _mm_castsi128_ps(equal) };
            // SAFETY: as above.
            unsafe { _mm_movemask_ps(equal) as u32 }
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        {
            let mut hits = 0u32;
            for i in 0..BUCKET_SLOTS {
                hits |= u32::from(self.key[i] == key) << i;
            }
            hits
        }
    }

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
    /// Open addressing with linear probing from bucket to bucket, a power of two of them;
    /// two vacant buckets when the index is empty or does not fit the compact slots
    /// (`compact` is then false).
    buckets: Vec<Bucket>,
    /// [`home`]'s shift for `buckets.len()` (a power of two).
    shift: u32,
    /// Whether `buckets` holds every address; if not, lookups search `addresses`.
    compact: bool,
}

/// The bucket a key starts probing at, in a table of `2^(64 - shift)` buckets.
#[inline(always)]
fn home(key: u32, shift: u32) -> usize {
    // Code addresses differ mostly in their low bits: the multiply mixes them into the high
    // bits, which pick the bucket (Fibonacci hashing: one multiply and one shift).
    (u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
}

/// The shift that makes [`home`] pick one of `n` buckets (`n` a power of two, at least 2).
fn shift_for(n: usize) -> u32 {
    debug_assert!(n >= 2 && n.is_power_of_two());
    64 - n.trailing_zeros()
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
                // Every record of the table is in its records region.
                let Some(at) = source.position(r.offset()) else {
                    continue;
                };
                let address = f
                    .address
                    .wrapping_add(load_bias)
                    .wrapping_add(u64::from(r.instruction_offset()));
                let entry = Entry {
                    at,
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
        let mut buckets = build_buckets(&addresses, &entries, base, &functions);
        let compact = !buckets.is_empty();
        if !compact {
            buckets = vec![Bucket::VACANT; 2];
        }
        let shift = shift_for(buckets.len());
        StackMapIndex {
            tables,
            load_bias,
            functions,
            addresses,
            entries,
            ids,
            base,
            buckets,
            shift,
            compact,
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

    /// Bytes the index holds on the heap (its arrays' capacities; the section's bytes,
    /// which it borrows, are not counted).
    pub fn heap_bytes(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * core::mem::size_of::<T>()
        }
        bytes(&self.tables)
            + bytes(&self.functions)
            + bytes(&self.addresses)
            + bytes(&self.entries)
            + bytes(&self.ids)
            + bytes(&self.buckets)
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

    /// The record of a bucket slot that is not [`SEVERAL`], without bounds checks.
    ///
    /// # Safety
    ///
    /// `(at, function, counts)` must be the fields of one slot of `self.buckets` that is not
    /// [`SEVERAL`]: [`build_buckets`] only fills such a slot with a function position and a
    /// record that it has checked.
    #[inline(always)]
    unsafe fn slot_record(
        &self,
        address: u64,
        at: u32,
        function: u32,
        counts: u32,
    ) -> IndexedRecord<'a, E> {
        // SAFETY: `build_buckets` made sure that `function` is a position in
        // `self.functions`; the buckets are never changed after that.
        let f = unsafe { self.functions.get_unchecked(function as usize) };
        // SAFETY: `build_buckets` also made sure that `record(at, counts)` of its source is
        // `Some`.
        let record = unsafe {
            f.source
                .record_unchecked(at as usize, counts as u16, (counts >> 16) as u16)
        };
        IndexedRecord {
            address,
            function: f.function,
            table: f.table as usize,
            record,
        }
    }

    #[inline]
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

    /// The slot key of `address`: its distance from the base plus one, or [`NO_KEY`].
    #[inline(always)]
    fn key(&self, address: u64) -> u32 {
        let distance = address.wrapping_sub(self.base);
        if distance < u64::from(NO_KEY - 1) {
            distance as u32 + 1
        } else {
            NO_KEY
        }
    }

    /// Starts bringing the home bucket of `address` into the cache.
    #[inline(always)]
    fn prefetch(&self, address: u64) {
        let b = home(self.key(address), self.shift);
        prefetch(self.buckets.as_ptr().wrapping_add(b));
    }

    /// The records at each of `addresses`, in order: what [`StackMapIndex::lookup`] gives for
    /// each, but faster when there are several. While it answers one address it has the
    /// bucket of an address [`LOOKAHEAD`] places further on brought into the cache (on
    /// x86-64), so the lookups' cache misses overlap instead of each one holding up the
    /// processor. A stack walk can collect its frames' return addresses first (by frame
    /// pointer, say) and look them all up this way.
    ///
    /// ```
    /// # use locus_stackmap::{LittleEndian, ParseOptions, StackMapIndex, Tables};
    /// # let mut section = vec![3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    /// # section.extend(0x1000u64.to_le_bytes());
    /// # section.extend(16u64.to_le_bytes());
    /// # section.extend(1u64.to_le_bytes());
    /// # section.extend(7u64.to_le_bytes());
    /// # section.extend(0x10u32.to_le_bytes());
    /// # section.extend([0; 12]);
    /// # let tables = Tables::new(&section, LittleEndian, ParseOptions::default())
    /// #     .collect::<Result<Vec<_>, _>>()?;
    /// let index = StackMapIndex::new(tables, 0);
    /// let return_addresses = [0x1010, 0x2000, 0x1010];
    /// let ids: Vec<Vec<u64>> = index
    ///     .lookup_all(&return_addresses)
    ///     .map(|records| records.map(|r| r.record.id()).collect())
    ///     .collect();
    /// assert_eq!(ids, [vec![7], vec![], vec![7]]);
    /// # Ok::<(), locus_stackmap::Error>(())
    /// ```
    pub fn lookup_all<'i>(&'i self, addresses: &'i [u64]) -> LookupAll<'i, 'a, E> {
        let (first, ahead) = addresses.split_at(addresses.len().min(LOOKAHEAD));
        for &a in first {
            self.prefetch(a);
        }
        LookupAll {
            index: self,
            addresses: addresses.iter(),
            ahead: ahead.iter(),
        }
    }

    /// Every record at absolute code address `address`, in section order.
    #[inline]
    pub fn lookup(&self, address: u64) -> Lookup<'_, 'a, E> {
        let mut l = Lookup {
            index: self,
            bucket: &Bucket::VACANT,
            hits: 0,
            next: usize::MAX,
            address,
        };
        // Everything up to the bucket's cache miss is computed without branches on the
        // address, and the common case (the address is in its home bucket) takes no other
        // path: the fewer instructions a lookup puts in flight, the more lookups the
        // processor overlaps.
        let key = self.key(address);
        let b = home(key, self.shift);
        debug_assert!(b < self.buckets.len());
        // SAFETY: `home` answers below 2^(64 - shift), and `new` made `buckets` exactly that
        // long (a power of two, with `shift_for`); neither changes after that.
        let bucket = unsafe { self.buckets.get_unchecked(b) };
        let hits = bucket.hits(key);
        if hits != 0 {
            l.bucket = bucket;
            l.hits = hits;
        } else if self.compact {
            if let Some((bucket, hits)) = self.probe_on(key, b) {
                l.bucket = bucket;
                l.hits = hits;
            }
        } else {
            l.next = self.search_sorted(address);
        }
        l
    }

    /// The rest of [`StackMapIndex::lookup`] when home bucket `b` does not hold `key`:
    /// probing goes on while the buckets are full. Out of line, and it answers in registers,
    /// so that the common case stays short.
    #[cold]
    #[inline(never)]
    fn probe_on(&self, key: u32, mut b: usize) -> Option<(&Bucket, u32)> {
        let n = self.buckets.len();
        for _ in 0..n {
            if self.buckets.get(b)?.key[BUCKET_SLOTS - 1] == EMPTY {
                return None;
            }
            b = if b + 1 == n { 0 } else { b + 1 };
            let next = self.buckets.get(b)?;
            let hits = next.hits(key);
            if hits != 0 {
                return Some((next, hits));
            }
        }
        None
    }

    /// Where the records at `address` start in the sorted arrays, for an index without
    /// compact slots.
    #[cold]
    #[inline(never)]
    fn search_sorted(&self, address: u64) -> usize {
        self.addresses.partition_point(|&a| a < address)
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

    /// The record at the highest indexed address below `address` (the first of them, in
    /// section order, when several share it): what a code address without a record of its
    /// own follows. `None` when no record lies below `address`.
    pub fn nearest_before(&self, address: u64) -> Option<IndexedRecord<'a, E>> {
        let below = self.addresses.partition_point(|&a| a < address);
        let at = *self.addresses.get(below.checked_sub(1)?)?;
        self.get(self.addresses.partition_point(|&a| a < at))
    }

    /// Every record in address order.
    pub fn iter(&self) -> impl Iterator<Item = IndexedRecord<'a, E>> + '_ {
        (0..self.entries.len()).filter_map(move |i| self.get(i))
    }
}

/// Fills the hash table, at most half full: the records of an address go to consecutive slots
/// of the first bucket on its probe sequence that has a free slot, in section order, or, when
/// they do not all fit there, one [`SEVERAL`] slot does. Returns no buckets when there is
/// nothing to index or when the compact slots cannot hold the index (addresses spanning 4 GiB
/// or more, a record past 4 GiB into its table, too many functions).
fn build_buckets<E: Endian>(
    addresses: &[u64],
    entries: &[Entry],
    base: u64,
    functions: &[FunctionRef<'_, E>],
) -> Vec<Bucket> {
    let (Some(&last), Some(_)) = (addresses.last(), entries.last()) else {
        return Vec::new();
    };
    let fits = last - base < u64::from(NO_KEY - 1)
        && functions.len() < SEVERAL as usize
        && entries.len() <= u32::MAX as usize
        && entries.iter().all(|e| u32::try_from(e.at).is_ok());
    if !fits {
        return Vec::new();
    }
    // At least two slots per record (a probe rarely has to leave its first bucket), rounded
    // up to a power of two buckets.
    let n = (2 * entries.len())
        .div_ceil(BUCKET_SLOTS)
        .next_power_of_two()
        .max(2);
    let shift = shift_for(n);
    let mut buckets: Vec<Bucket> = Vec::with_capacity(n);
    advise_huge_pages(&mut buckets);
    buckets.resize(n, Bucket::VACANT);
    let mut i = 0;
    while let Some(&address) = addresses.get(i) {
        let count = addresses[i..].iter().take_while(|&&a| a == address).count();
        let key = (address - base + 1) as u32;
        let mut b = home(key, shift);
        // There are more slots than records, so a free one exists.
        for _ in 0..n {
            let Some(bucket) = buckets.get_mut(b) else {
                break;
            };
            let used = bucket.key.iter().take_while(|&&k| k != EMPTY).count();
            if used < BUCKET_SLOTS {
                let group = entries.get(i..i + count).unwrap_or(&[]);
                // The lookup hands out a slot's record without bounds checks
                // (`StackMapIndex::slot_record`), so each is checked here; the records of a
                // validated table always pass.
                let checked = group.len() == count
                    && group.iter().all(|e| {
                        functions.get(e.function as usize).is_some_and(|f| {
                            f.source
                                .record(e.at, e.num_locations, e.num_live_outs)
                                .is_some()
                        })
                    });
                if checked && used + count <= BUCKET_SLOTS {
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

/// Asks Linux to back the (not yet touched) capacity of `buckets` with 2 MiB pages where it
/// can. Each lookup lands on a random bucket, so with 4 KiB pages nearly every lookup in a
/// large index also misses the TLB; on the benchmark's 1M-record index the hint took
/// roughly 5-15% off the lookup time (a noisy shared machine). It is only a hint: memory
/// and results are the same without it.
fn advise_huge_pages(buckets: &mut Vec<Bucket>) {
    #[cfg(all(feature = "std", target_os = "linux"))]
    {
        const HUGE: usize = 2 << 20;
        let start = buckets.as_mut_ptr() as usize;
        let end = start + buckets.capacity() * core::mem::size_of::<Bucket>();
        // Only whole huge pages inside the allocation.
        let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if first < last {
            // SAFETY: the range lies inside the vector's own allocation, and MADV_HUGEPAGE
            // changes how the kernel backs those pages, never their contents. A failure
            // (no transparent huge pages) leaves everything as it was.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(all(feature = "std", target_os = "linux")))]
    let _ = buckets;
}

/// How many addresses ahead [`StackMapIndex::lookup_all`] fetches buckets: enough lookups
/// to cover a cache miss (about 200 ns on the benchmark's machine, at 20-30 ns a lookup).
/// Of 4, 8, 16 and 32 on the benchmark's 1M-record index, 16 and 32 were best.
pub const LOOKAHEAD: usize = 16;

/// The records at each of several addresses; see [`StackMapIndex::lookup_all`].
#[derive(Clone, Debug)]
pub struct LookupAll<'i, 'a, E: Endian> {
    index: &'i StackMapIndex<'a, E>,
    /// The addresses not yet looked up.
    addresses: core::slice::Iter<'i, u64>,
    /// The addresses whose buckets are not yet fetched: [`LOOKAHEAD`] behind `addresses`.
    ahead: core::slice::Iter<'i, u64>,
}

impl<'i, 'a, E: Endian> Iterator for LookupAll<'i, 'a, E> {
    type Item = Lookup<'i, 'a, E>;
    #[inline]
    fn next(&mut self) -> Option<Lookup<'i, 'a, E>> {
        let &address = self.addresses.next()?;
        if let Some(&a) = self.ahead.next() {
            self.index.prefetch(a);
        }
        Some(self.index.lookup(address))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.addresses.size_hint()
    }
}

impl<E: Endian> ExactSizeIterator for LookupAll<'_, '_, E> {}

/// The records at one address; see [`StackMapIndex::lookup`].
#[derive(Clone, Debug)]
pub struct Lookup<'i, 'a, E: Endian> {
    index: &'i StackMapIndex<'a, E>,
    /// The bucket that holds the address ([`Bucket::VACANT`] if none does).
    bucket: &'i Bucket,
    /// The slots of `bucket` not yet visited that hold the address, one bit each.
    hits: u32,
    /// Position in the sorted arrays of the next of several records, or `usize::MAX`.
    next: usize,
    address: u64,
}

impl<E: Endian> Lookup<'_, '_, E> {
    /// The address looked up.
    pub fn address(&self) -> u64 {
        self.address
    }
}

impl<'a, E: Endian> Iterator for Lookup<'_, 'a, E> {
    type Item = IndexedRecord<'a, E>;
    #[inline]
    fn next(&mut self) -> Option<IndexedRecord<'a, E>> {
        if self.hits != 0 {
            // `hits` has one bit per slot, so the mask changes nothing but lets the compiler
            // drop the bounds checks.
            let i = self.hits.trailing_zeros() as usize & (BUCKET_SLOTS - 1);
            self.hits &= self.hits - 1;
            let b = self.bucket;
            let (at, function, counts) = (b.at[i], b.function[i], b.counts[i]);
            if function != SEVERAL {
                // SAFETY: `self.bucket` is one of the index's buckets (VACANT has no hits).
                return Some(unsafe { self.index.slot_record(self.address, at, function, counts) });
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
    use alloc::vec;
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

    #[test]
    fn nearest_before_is_the_last_record_below() {
        let section = table(&[(0x1000, vec![0x10, 0x10, 0x40]), (0x2000, vec![0x8])]);
        let index = index_of(&section, 0x100);
        let near = |a: u64| index.nearest_before(a).map(|r| (r.address, r.record.id()));
        assert_eq!(near(0x1110), None);
        assert_eq!(near(0x1111), Some((0x1110, 0)));
        assert_eq!(near(0x1140), Some((0x1110, 0)));
        assert_eq!(near(0x1141), Some((0x1140, 2)));
        assert_eq!(near(u64::MAX), Some((0x2108, 3)));
        assert_eq!(
            index_of(&table(&[]), 0)
                .nearest_before(u64::MAX)
                .map(|r| r.address),
            None
        );
    }

    /// The index of every table of a valid little-endian `section`.
    fn index_of(section: &[u8], load_bias: u64) -> StackMapIndex<'_, LittleEndian> {
        let tables: Vec<_> = Tables::new(section, LittleEndian, ParseOptions::default())
            .collect::<crate::Result<_>>()
            .expect("valid");
        StackMapIndex::new(tables, load_bias)
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
        // Batched: the same answers, address by address, misses included.
        let mut batch: Vec<u64> = all.iter().map(|x| x.0).collect();
        batch.extend([0, 1, u64::MAX]);
        batch.extend(all.iter().map(|x| x.0.wrapping_add(1)));
        let ids = |l: Lookup<'_, '_, LittleEndian>| -> Vec<(usize, u64)> {
            l.map(|r| (r.table, r.record.id())).collect()
        };
        let mut n = 0;
        for (l, &a) in index.lookup_all(&batch).zip(&batch) {
            assert_eq!(l.address(), a);
            assert_eq!(ids(l), ids(index.lookup(a)), "batched {a:#x}");
            n += 1;
        }
        assert_eq!(n, batch.len());
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
        let index = index_of(&section, 0);
        assert!(index.compact, "compact slots expected");
        check(&index, &expected(&[&first, &second]));
    }

    #[test]
    fn addresses_spanning_4_gib_fall_back_to_binary_search() {
        let functions = [(0x1000, vec![0, 4, 4, 8]), (0x2_0000_1000, vec![0, 0, 16])];
        let section = table(&functions);
        let index = index_of(&section, 0);
        assert!(!index.compact, "binary search expected");
        check(&index, &expected(&[&functions]));
    }

    #[test]
    fn widest_compact_span_and_addresses_just_past_it() {
        // The farthest record gets the largest key the compact slots hold; addresses past it
        // (whose distance from the base no key can stand for) are found nowhere.
        let far = u32::MAX - 2;
        let functions = [(0x1000, vec![0, 4, 4]), (0x1000 + u64::from(far), vec![0])];
        let section = table(&functions);
        let index = index_of(&section, 0);
        assert!(index.compact, "compact slots expected");
        check(&index, &expected(&[&functions]));
        for past in [1, 2, 3, 1 << 32] {
            let probe = 0x1000 + u64::from(far) + past;
            assert_eq!(index.lookup(probe).count(), 0, "probe {probe:#x}");
        }
        // One byte wider and the index falls back to binary search, with the same answers.
        let functions = [
            (0x1000, vec![0, 4, 4]),
            (0x1000 + u64::from(far) + 1, vec![0]),
        ];
        let section = table(&functions);
        let index = index_of(&section, 0);
        assert!(!index.compact, "binary search expected");
        check(&index, &expected(&[&functions]));
    }

    #[test]
    fn heap_bytes_counts_every_array() {
        let empty = table(&[]);
        let index = index_of(&empty, 0);
        // Two vacant buckets and nothing else.
        assert_eq!(
            index.heap_bytes(),
            2 * 64 + index.tables.capacity() * core::mem::size_of::<Table<'_, LittleEndian>>()
        );
        let offsets: Vec<u32> = (0..100).map(|i| i * 4).collect();
        let section = table(&[(0x1000, offsets)]);
        let index = index_of(&section, 0);
        // 100 records: 200 slots, 50 buckets rounded up to 64; 8 + 16 + 16 bytes of sorted
        // address, entry and (ID, position) per record.
        assert!(
            index.heap_bytes() >= 64 * 64 + 100 * (8 + 16 + 16),
            "{}",
            index.heap_bytes()
        );
        assert!(
            index.heap_bytes() < 64 * 64 + 100 * 64 + 1024,
            "{}",
            index.heap_bytes()
        );
    }

    #[test]
    fn load_bias_wraps() {
        let functions = [(0x1000, vec![0, 4, 4, 8])];
        let section = table(&functions);
        let bias = u64::MAX - 0xfff;
        let index = index_of(&section, bias);
        let all: Vec<_> = expected(&[&functions])
            .into_iter()
            .map(|(a, t, id)| (a.wrapping_add(bias), t, id))
            .collect();
        check(&index, &all);
    }
}
