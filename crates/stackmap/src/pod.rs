//! The crate's unsafe code for speed, in one place (as `object`'s `pod.rs`), behind a small
//! safe API. Everything else in the crate is safe code (`#![deny(unsafe_code)]` at the
//! crate root); the one other module allowed `unsafe` is [`crate::patch`]'s code writer,
//! whose unsafety is its contract (it writes into live code), not a shortcut for speed.
//!
//! What is here and why each piece is sound:
//! - [`prefetch`]: a cache hint. It never dereferences its pointer and never faults, so any
//!   pointer will do.
//! - [`eq_mask4`]: four 32-bit compares in one SSE2 instruction on x86-64 (the index's
//!   lookup compares a block's four keys at once); the same answer from a loop elsewhere.
//!   The intrinsics only need SSE2, which the `cfg` requires.
//! - [`CellTable`]: the index's cell directory (a byte per cell, a word per 64 cells), read
//!   on every lookup without a bounds check: the cell is clamped to the last one first (a
//!   compare and a conditional move, no branch), and the words cover the bytes.
//! - [`Slots`]: the index's records, four to a 64-byte [`Block`], each slot checked once
//!   when filled and read back without a check: every slot of a block names a record that
//!   lies inside its region, which only this module can make or change.
//! - [`advise_huge_pages`]: `madvise(MADV_HUGEPAGE)` over whole huge pages inside a
//!   vector's own allocation (Linux with `std`); only called when the caller asked for it
//!   ([`crate::IndexOptions::huge_pages`]): a parser makes no process-visible change of
//!   its own accord.
//!
//! Every function here is compiled on every target the crate claims (x86-64 and AArch64
//! Linux, and `no_std` x86-64 without SSE); the portable fallbacks are tested against the
//! fast paths on the host (`cargo test -p locus-stackmap pod`).

use alloc::boxed::Box;
use alloc::vec::Vec;

/// Asks for the cache line that holds `p` to be brought into the nearest cache, without
/// waiting for it. Only a hint: it never faults and never reads `p` in the program's sense,
/// so any address will do. A no-op on targets without a prefetch instruction here.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    // SAFETY: the target has SSE (the `cfg`); a prefetch is a hint that never faults,
    // whatever the address, and never dereferences it.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = p;
}

/// Which of the four `keys` equal `key`: bit `i` set when `keys[i] == key`. Without
/// branches, so that which slot matches (different on every lookup) holds nothing up.
#[inline(always)]
pub(crate) fn eq_mask4(block: &Block, key: u32) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use core::arch::x86_64::{
            __m128i, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_movemask_ps, _mm_set1_epi32,
        };
        // One compare of all four keys: the fewer instructions wait for the block's cache
        // miss, the more lookups the processor keeps in flight.
        // SAFETY: `[u32; 4]` and `__m128i` have the same size, and any bits are valid for
        // both (a copy of the value). Read as the block's field, it is known to be 64-byte
        // aligned, so the compare takes it straight from memory.
        let keys = unsafe { core::mem::transmute::<[u32; 4], __m128i>(block.key) };
        // SAFETY: the target has SSE2 (the `cfg` above: x86-64 targets without it, such as
        // kernels', take the loop below); no memory is touched.
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
        eq_mask4_portable(&block.key, key)
    }
}

/// [`eq_mask4`] without SIMD: what targets without SSE2 run, and the reference the tests
/// hold the SIMD path to.
#[inline(always)]
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2", not(test)),
    allow(dead_code)
)]
pub(crate) fn eq_mask4_portable(keys: &[u32; 4], key: u32) -> u32 {
    let mut hits = 0u32;
    for (i, &k) in keys.iter().enumerate() {
        hits |= u32::from(k == key) << i;
    }
    hits
}

/// Slots per [`Block`]: one 64-byte cache line of 16-byte slots.
pub(crate) const BLOCK_SLOTS: usize = 4;

/// [`Block::key`] of a slot that holds nothing.
pub(crate) const EMPTY: u32 = 0;

/// The bytes of a stack map record's fixed header (ID, instruction offset, reserved, count).
pub(crate) const RECORD_HEADER: usize = 16;

/// The record an empty slot names: a header, no locations, then the padding and a
/// NumLiveOuts word (4 bytes each), no live-outs. [`Slots`] reads it for empty slots, so
/// that every slot, filled or not, names bytes that exist.
static VACANT_RECORD: [u8; RECORD_HEADER + 8] = [0; RECORD_HEADER + 8];

/// Four slots of [`Slots`], stored field by field so that the four keys are compared at
/// once ([`eq_mask4`]). Only this module makes or changes one, so every slot of every block
/// names a record that [`Slots::set`] checked (or, empty, [`VACANT_RECORD`]).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Block {
    /// The slots' keys: the caller's, [`EMPTY`] in an empty slot.
    pub(crate) key: [u32; BLOCK_SLOTS],
    /// Where each slot's record is in its region.
    at: [u32; BLOCK_SLOTS],
    /// Each slot's owner (the vacant entry, after the others, in an empty slot).
    region: [u32; BLOCK_SLOTS],
    /// Each slot's NumLocations | NumLiveOuts << 16.
    counts: [u32; BLOCK_SLOTS],
}

/// A block of empty slots that belongs to no [`Slots`] (so [`Slots::record`] reads it as
/// its own vacant block): where a lookup starts before it knows its block.
pub(crate) static NO_BLOCK: Block = Block {
    key: [EMPTY; BLOCK_SLOTS],
    at: [0; BLOCK_SLOTS],
    region: [0; BLOCK_SLOTS],
    counts: [0; BLOCK_SLOTS],
};

impl Block {
    /// A block of empty slots, each naming the vacant record, region `vacant`.
    fn vacant(vacant: u32) -> Block {
        Block {
            key: [EMPTY; BLOCK_SLOTS],
            at: [0; BLOCK_SLOTS],
            region: [vacant; BLOCK_SLOTS],
            counts: [0; BLOCK_SLOTS],
        }
    }

    /// The slots that hold `key`, one bit each ([`eq_mask4`]).
    #[inline(always)]
    pub(crate) fn hits(&self, key: u32) -> u32 {
        eq_mask4(self, key)
    }
}

/// What a slot holds, as [`Slots::set`] takes it and [`Slots::slot`] gives it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The caller's key (not [`EMPTY`] for a filled slot).
    pub(crate) key: u32,
    /// Where the record is in its region.
    pub(crate) at: u32,
    /// Which owner (its position in what [`Slots::new`] took).
    pub(crate) region: u32,
    /// The record's NumLocations.
    pub(crate) num_locations: u16,
    /// The record's NumLiveOuts.
    pub(crate) num_live_outs: u16,
}

/// A record's pieces, as [`Slots::record`] slices them out of its region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pieces<'a> {
    /// Where the record is in its region.
    pub(crate) at: u32,
    /// Its fixed header.
    pub(crate) header: &'a [u8; RECORD_HEADER],
    /// Its NumLocations 12-byte locations.
    pub(crate) locations: &'a [u8],
    /// Its NumLiveOuts 4-byte live-outs.
    pub(crate) live_outs: &'a [[u8; 4]],
    /// NumLocations.
    pub(crate) num_locations: u16,
    /// NumLiveOuts.
    pub(crate) num_live_outs: u16,
}

/// Where the live-outs of a record with `n` locations start: records start 8-aligned, so 4
/// bytes of padding follow the locations when `n` is odd, then the 4-byte NumLiveOuts word.
#[inline(always)]
fn record_live_outs(n: u16) -> usize {
    RECORD_HEADER + usize::from(n) * 12 + usize::from(n & 1) * 4 + 4
}

/// The bytes of a record with `n` locations and `m` live-outs from its start to the end
/// of its live-outs, and where its live-outs start.
#[inline(always)]
fn record_extent(n: u16, m: u16) -> (usize, usize) {
    let live_outs = record_live_outs(n);
    (live_outs + usize::from(m) * 4, live_outs)
}

/// Records laid out in [`Block`]s of four slots, each naming a record in the byte region
/// of one of a fixed set of owners (an index's functions, each with its table's records
/// region), checked once when the slot is filled so that reading it back
/// ([`Slots::record`]) takes no check on the slot's contents: on the index's lookup path,
/// a check on data that arrives with the block's cache miss (the record's bounds, the
/// owner's position) made single lookups up to a third slower.
///
/// The last block is always a vacant one that no [`Slots::set`] fills: block reads clamp
/// to it.
///
/// The invariant the unchecked reads rest on: when `owners` is not empty, every slot of
/// every block in `blocks` names an entry of `owners` and a record inside that entry's
/// region ([`Slots::set`] checks both; an empty slot names the vacant entry, last in
/// `owners`, whose region is [`VACANT_RECORD`]). Only this module makes or changes a
/// [`Block`], and `owners` never changes after [`Slots::new`].
#[derive(Clone, Debug)]
pub(crate) struct Slots<'a, O> {
    /// The blocks pushed so far, then the vacant one.
    blocks: Vec<Block>,
    /// The owners with their regions, then the vacant entry (a copy of the first owner
    /// with [`VACANT_RECORD`]); empty when there are no owners. At most `u32::MAX`
    /// entries, so that a slot can name each.
    owners: Box<[(O, &'a [u8])]>,
}

impl<'a, O: Copy> Slots<'a, O> {
    /// Slots over `owners` (named by position) and their regions, with room for `blocks`
    /// blocks before the vacant one, their allocation advised onto huge pages if
    /// `huge_pages` ([`advise_huge_pages`]). Owners past `u32::MAX - 1` are left out
    /// (`set` refuses their records).
    pub(crate) fn new(
        owners: impl IntoIterator<Item = (O, &'a [u8])>,
        blocks: usize,
        huge_pages: bool,
    ) -> Self {
        let mut entries: Vec<(O, &'a [u8])> = owners.into_iter().collect();
        entries.truncate(u32::MAX as usize - 1);
        if let Some(&(first, _)) = entries.first() {
            entries.push((first, &VACANT_RECORD));
        }
        let mut v = Vec::with_capacity(blocks.saturating_add(1));
        if huge_pages {
            advise_huge_pages(&mut v);
        }
        let mut slots = Slots {
            blocks: v,
            owners: entries.into_boxed_slice(),
        };
        slots.push_block();
        slots
    }

    /// The position of the vacant entry (0 when there are no owners).
    fn vacant(&self) -> u32 {
        self.owners.len().saturating_sub(1) as u32
    }

    /// The number of blocks pushed ([`Slots::push_block`]), not counting the vacant one
    /// after them.
    pub(crate) fn pushed(&self) -> usize {
        self.blocks.len().saturating_sub(1)
    }

    /// Adds a block of empty slots, number [`Slots::pushed`] - 1 after the call.
    pub(crate) fn push_block(&mut self) {
        let vacant = self.vacant();
        self.blocks.push(Block::vacant(vacant));
    }

    /// Fills slot `s` of pushed block `b` with `slot`, if `slot.region` is an owner and
    /// the record it names lies inside the owner's region; false (and nothing changed)
    /// otherwise, or when `b` was not pushed.
    pub(crate) fn set(&mut self, b: usize, s: usize, slot: Slot) -> bool {
        let (len, _) = record_extent(slot.num_locations, slot.num_live_outs);
        let real = self.owners.len().saturating_sub(1);
        let fits = (slot.region as usize) < real
            && self.owners.get(slot.region as usize).is_some_and(|(_, r)| {
                (slot.at as usize)
                    .checked_add(len)
                    .is_some_and(|end| end <= r.len())
            });
        let pushed = self.pushed();
        match (
            fits && s < BLOCK_SLOTS && b < pushed,
            self.blocks.get_mut(b),
        ) {
            (true, Some(block)) => {
                block.key[s] = slot.key;
                block.at[s] = slot.at;
                block.region[s] = slot.region;
                block.counts[s] =
                    u32::from(slot.num_locations) | u32::from(slot.num_live_outs) << 16;
                true
            }
            _ => false,
        }
    }

    /// Empties slot `s` of block `b` (nothing if there is no such slot).
    pub(crate) fn clear(&mut self, b: usize, s: usize) {
        let vacant = self.vacant();
        if let (Some(block), true) = (self.blocks.get_mut(b), s < BLOCK_SLOTS) {
            block.key[s] = EMPTY;
            block.at[s] = 0;
            block.region[s] = vacant;
            block.counts[s] = 0;
        }
    }

    /// What slot `s` of block `b` holds, if there is such a slot.
    pub(crate) fn slot(&self, b: usize, s: usize) -> Option<Slot> {
        let block = self.blocks.get(b)?;
        let counts = *block.counts.get(s)?;
        Some(Slot {
            key: block.key[s],
            at: block.at[s],
            region: block.region[s],
            num_locations: counts as u16,
            num_live_outs: (counts >> 16) as u16,
        })
    }

    /// Every block, the vacant one last.
    pub(crate) fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Block `b`, or the vacant last block when `b` is past it; without a branch.
    #[inline(always)]
    pub(crate) fn block(&self, b: usize) -> &Block {
        // `blocks` is never empty (`new` pushes the vacant block, nothing pops), so the
        // subtraction cannot wrap and the clamped index is in bounds.
        let b = b.min(self.blocks.len() - 1);
        // SAFETY: `b < self.blocks.len()` (just above).
        unsafe { self.blocks.get_unchecked(b) }
    }

    /// Where block `b` is (or would be): for [`prefetch`], which never dereferences it, so
    /// no clamp (one instruction less per address in `lookup_all`).
    #[inline(always)]
    pub(crate) fn block_address(&self, b: usize) -> *const Block {
        self.blocks.as_ptr().wrapping_add(b)
    }

    /// The owner and the record of slot `s & 3` of `block`, filled or not (an empty slot
    /// gives the vacant record: no locations, no live-outs), without a check on the slot's
    /// contents or a branch on them. `None` when there are no owners. `block` must be one
    /// of this store's ([`Slots::block`]); any other reads as the vacant last block.
    #[inline(always)]
    pub(crate) fn record(&self, block: &Block, s: usize) -> Option<(&O, Pieces<'a>)> {
        // Both branches here test what is known long before the block's bytes arrive (the
        // store's own fields and the block's address), so they hold nothing up.
        if self.owners.is_empty() {
            return None;
        }
        let first = self.blocks.as_ptr() as usize;
        let offset = (block as *const Block as usize).wrapping_sub(first);
        let block = if offset < self.blocks.len() * core::mem::size_of::<Block>() {
            block
        } else {
            self.block(usize::MAX)
        };
        let s = s & (BLOCK_SLOTS - 1);
        let (at, counts, region) = (block.at[s], block.counts[s], block.region[s] as usize);
        let (n, m) = (counts as u16, (counts >> 16) as u16);
        debug_assert!(region < self.owners.len());
        // SAFETY: `block` is one of `self.blocks` (just above) and `owners` is not empty,
        // so by the invariant of `Slots` the slot names an entry of `self.owners`.
        let (owner, bytes) = unsafe { self.owners.get_unchecked(region) };
        let bytes: &'a [u8] = bytes;
        let live_outs = record_live_outs(n);
        // By the same invariant `at + len <= bytes.len()` (`set` checked it; the vacant
        // record is 24 bytes, an empty slot's `len` 20): the pointers below stay inside
        // `bytes` and keep its lifetime, and `[u8; N]` has alignment 1.
        debug_assert!(at as usize + record_extent(n, m).0 <= bytes.len());
        let base = bytes.as_ptr().wrapping_add(at as usize);
        // SAFETY: the header's `RECORD_HEADER` bytes are inside `bytes` (see above).
        let header = unsafe { &*base.cast::<[u8; RECORD_HEADER]>() };
        // SAFETY: and the `12 n` bytes of locations after it.
        let locations = unsafe {
            core::slice::from_raw_parts(base.wrapping_add(RECORD_HEADER), usize::from(n) * 12)
        };
        let live_start = base.wrapping_add(live_outs).cast::<[u8; 4]>();
        // SAFETY: and the `m` 4-byte live-outs, which end at `at + len`.
        let live_outs = unsafe { core::slice::from_raw_parts(live_start, usize::from(m)) };
        let pieces = Pieces {
            at,
            header,
            locations,
            live_outs,
            num_locations: n,
            num_live_outs: m,
        };
        Some((owner, pieces))
    }

    /// Bytes on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * core::mem::size_of::<Block>()
            + core::mem::size_of_val::<[(O, &[u8])]>(&self.owners)
    }

    /// The blocks' capacity, for tests of the heap size.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.blocks.capacity()
    }
}

/// A byte per cell and a word per 64 cells (the index's cell directory), read by cell
/// without a bounds check or a branch: the cell is clamped to the last one first (a compare
/// and a conditional move), so an address past the indexed ones reads the last cell.
#[derive(Clone, Debug)]
pub(crate) struct CellTable {
    /// One per 64 entries of `bytes`: `words.len() == bytes.len().div_ceil(64)`.
    words: Box<[u32]>,
    /// Never empty.
    bytes: Box<[u8]>,
    /// `bytes.len() - 1`, the last cell.
    last: usize,
}

impl CellTable {
    /// The table of `bytes` and `words`, one word per 64 bytes; `None` unless there is at
    /// least one byte and exactly that many words.
    pub(crate) fn new(words: Vec<u32>, bytes: Vec<u8>) -> Option<Self> {
        (!bytes.is_empty() && words.len() == bytes.len().div_ceil(64)).then(|| CellTable {
            last: bytes.len() - 1,
            words: words.into_boxed_slice(),
            bytes: bytes.into_boxed_slice(),
        })
    }

    /// The table of one cell.
    pub(crate) fn one(word: u32, byte: u8) -> Self {
        CellTable {
            words: Box::new([word]),
            bytes: Box::new([byte]),
            last: 0,
        }
    }

    /// The number of cells (at least 1).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The word and the byte of cell `c`, or of the last cell when `c` is past it.
    #[inline(always)]
    pub(crate) fn get(&self, c: usize) -> (u32, u8) {
        // `last` is `bytes.len() - 1` (`new`, `one`).
        let c = c.min(self.last);
        debug_assert!(c < self.bytes.len() && c / 64 < self.words.len());
        // SAFETY: `words` has a word for every 64 bytes (`new`), so `c / 64 <
        // self.words.len()` for `c < self.bytes.len()` (just above); neither changes after
        // `new`.
        let word = unsafe { *self.words.get_unchecked(c / 64) };
        // SAFETY: `c < self.bytes.len()` (just above).
        let byte = unsafe { *self.bytes.get_unchecked(c) };
        (word, byte)
    }

    /// Where the byte [`CellTable::get`] reads for `c` is: for [`prefetch`].
    #[inline(always)]
    pub(crate) fn byte_address(&self, c: usize) -> *const u8 {
        self.bytes.as_ptr().wrapping_add(c.min(self.last))
    }

    /// The bytes.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 4 + self.bytes.len()
    }
}

/// Asks Linux to back the (not yet touched) capacity of `v` with 2 MiB pages where it can
/// (`madvise(MADV_HUGEPAGE)` over the whole huge pages inside the vector's allocation).
/// Only a hint: memory contents and results are the same without it; elsewhere than Linux
/// with `std`, nothing. Only the caller's explicit choice should lead here: it changes how
/// the process's memory is backed.
pub(crate) fn advise_huge_pages<T>(v: &mut Vec<T>) {
    #[cfg(all(feature = "std", target_os = "linux"))]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_mut_ptr() as usize;
        let end = start + v.capacity() * core::mem::size_of::<T>();
        // Only whole huge pages inside the allocation.
        let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if first < last {
            // SAFETY: the range lies inside the vector's own allocation (which `&mut`
            // keeps alive and unmoved for the call), and MADV_HUGEPAGE changes how the
            // kernel backs those pages, never their contents. A failure (no transparent
            // huge pages) leaves everything as it was, so the result is ignored.
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
    let _ = v;
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn eq_mask4_agrees_with_the_portable_loop() {
        let keys = [
            [0, 0, 0, 0],
            [1, 2, 3, 4],
            [7, 7, 9, 7],
            [u32::MAX, 0, u32::MAX, 5],
        ];
        let block = |key| Block {
            key,
            ..Block::vacant(0)
        };
        for k in &keys {
            for key in [0, 1, 2, 3, 4, 5, 7, 9, u32::MAX, 0x8000_0000] {
                assert_eq!(
                    eq_mask4(&block(*k), key),
                    eq_mask4_portable(k, key),
                    "{k:?} {key}"
                );
            }
        }
        assert_eq!(eq_mask4(&block([7, 7, 9, 7]), 7), 0b1011);
        assert_eq!(eq_mask4(&block([1, 2, 3, 4]), 5), 0);
    }

    #[test]
    fn cell_tables_clamp_and_hold_a_word_per_64_cells() {
        let t = CellTable::new(vec![1, 2], (0..65).collect()).unwrap_or_else(|| panic!());
        assert_eq!((t.get(0), t.get(63), t.get(64)), ((1, 0), (1, 63), (2, 64)));
        assert_eq!(
            (t.get(65), t.get(usize::MAX), t.len()),
            ((2, 64), (2, 64), 65)
        );
        assert_eq!(t.heap_bytes(), 8 + 65);
        assert!(CellTable::new(vec![], vec![]).is_none());
        assert!(CellTable::new(vec![1], (0..65).collect()).is_none());
        assert!(CellTable::new(vec![1, 2, 3], (0..65).collect()).is_none());
    }

    #[test]
    fn prefetch_takes_any_address() {
        prefetch(core::ptr::null::<u8>());
        prefetch(usize::MAX as *const u64);
        let v = [1u8; 100];
        prefetch(v.as_ptr().wrapping_add(1 << 40));
    }

    /// A record of `n` locations and `m` live-outs at the start of 64 bytes: header bytes
    /// 1..=16, the rest 0xee.
    fn region(n: u16) -> Vec<u8> {
        let mut r: Vec<u8> = (1..=16).collect();
        r.resize(64, 0xee);
        r[14..16].copy_from_slice(&n.to_le_bytes());
        r
    }

    fn slot(key: u32, at: u32, region: u32, n: u16, m: u16) -> Slot {
        Slot {
            key,
            at,
            region,
            num_locations: n,
            num_live_outs: m,
        }
    }

    #[test]
    fn slots_take_only_records_inside_their_region() {
        let (a, b) = (region(2), region(0));
        let mut slots = Slots::new([(10u8, &a[..]), (20u8, &b[..])], 1, false);
        // Nothing to fill before a block is pushed (the vacant last one is never filled).
        assert!(!slots.set(0, 0, slot(1, 0, 0, 2, 0)));
        slots.push_block();
        assert_eq!(slots.pushed(), 1);
        // 16 + 24 + 4 + 4 * 5 = 64 bytes: fits exactly; one live-out more does not.
        assert!(slots.set(0, 0, slot(1, 0, 0, 2, 5)));
        assert!(!slots.set(0, 1, slot(2, 0, 0, 2, 6)));
        // Past the region's end, an owner that does not exist (2 is the vacant entry), a
        // slot past the block, a block not pushed.
        assert!(!slots.set(0, 1, slot(2, 48, 1, 0, 0)));
        assert!(!slots.set(0, 1, slot(2, 0, 2, 0, 0)));
        assert!(!slots.set(0, 4, slot(2, 0, 1, 0, 0)));
        assert!(!slots.set(1, 0, slot(2, 0, 1, 0, 0)));
        assert!(slots.set(0, 1, slot(2, 44, 1, 0, 0)));
        assert_eq!(slots.slot(0, 1), Some(slot(2, 44, 1, 0, 0)));
        assert_eq!(slots.slot(0, 4), None);

        let block = slots.block(0);
        assert_eq!(block.hits(1), 0b01);
        let (owner, p) = slots.record(block, 0).unwrap_or_else(|| panic!());
        assert_eq!(
            (*owner, p.at, p.num_locations, p.num_live_outs),
            (10, 0, 2, 5)
        );
        assert_eq!(p.header[0], 1);
        assert_eq!((p.locations.len(), p.live_outs.len()), (24, 5));
        let (owner, p) = slots.record(block, 1).unwrap_or_else(|| panic!());
        assert_eq!((*owner, p.at, p.header[0]), (20, 44, 0xee));
        // An empty slot gives the vacant record: no locations, no live-outs.
        let (_, p) = slots.record(block, 2).unwrap_or_else(|| panic!());
        assert_eq!(
            (p.locations.len(), p.live_outs.len(), p.header),
            (0, 0, &[0; 16])
        );
        // A block that is not the store's (a copy of one) reads as the vacant block.
        let copy = *block;
        let (_, p) = slots.record(&copy, 0).unwrap_or_else(|| panic!());
        assert_eq!((p.at, p.num_locations, p.num_live_outs), (0, 0, 0));
        let (_, p) = slots.record(&NO_BLOCK, 1).unwrap_or_else(|| panic!());
        assert_eq!((p.at, p.num_locations, p.num_live_outs), (0, 0, 0));
        // Blocks past the end read as the vacant last block.
        assert_eq!(slots.block(usize::MAX).hits(1), 0);
        slots.clear(0, 0);
        assert_eq!(slots.slot(0, 0), Some(slot(EMPTY, 0, 2, 0, 0)));
        assert_eq!(slots.block(0).hits(1), 0);
    }

    #[test]
    fn slots_without_owners_read_nothing() {
        let mut slots: Slots<'_, u8> = Slots::new([], 0, false);
        slots.push_block();
        assert!(!slots.set(0, 0, slot(1, 0, 0, 0, 0)));
        assert!(slots.record(slots.block(0), 0).is_none());
        assert_eq!(slots.blocks().len(), 2);
    }

    #[test]
    fn huge_page_advice_changes_no_contents() {
        let mut v: Vec<u64> = Vec::with_capacity(1 << 20);
        advise_huge_pages(&mut v);
        v.extend(0..1000);
        assert_eq!(v.iter().sum::<u64>(), 999 * 1000 / 2);
    }
}
