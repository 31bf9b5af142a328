//! Address and ID lookup over the records of one or more tables.
//!
//! A runtime stopped at a safepoint holds a return address; this index maps it to the
//! records there. The key is the absolute code address `function address + load bias +
//! instruction offset`. Neither key is unique (the spec: "LLVM passes this ID through
//! directly to the stack map record without checking uniqueness"; several records can share
//! an offset), so both lookups return every match, in section order.
//!
//! **What it holds.** The index borrows the section: it keeps no copy of a record, only
//! where each one is. Its records are laid out in address order in *blocks* of one 64-byte
//! cache line, four 16-byte slots each: the address (as its 32-bit distance from the lowest
//! indexed address, plus one: 0 marks an empty slot), the record's place in its table, its
//! counts and the position of its function in a small side array. A *cell directory* cuts
//! the indexed address range into cells of `2^shift` bytes (about one cell per record) and
//! names the block each cell's records begin in: a byte per cell, relative to a base per 64
//! cells, so that a million-record index's directory (some 0.6 MiB) mostly stays in cache.
//! Blocks are filled in address order, and a cell of at most four records is never split
//! between two blocks (when one would be, it moves whole to the next block), so a lookup
//! reads the cell's directory byte and base, then one block, compares its four keys at
//! once, and hands out the records it matched from the slots alone, without reading the
//! records' bytes. A cell with more records (a dense stretch of code, or more than four
//! records at one address) runs into the next block and is searched out of line. (With a
//! 4-byte directory entry per cell, the directory fell out of cache and lookups took 20%
//! longer on the benchmark.) That directory read is the price of building the index front
//! to back: the hash table this layout replaced found a record's slot from its address
//! alone, and its single lookups were some 5-15% faster on the benchmark's machine, but
//! filling it took random writes all over it and a sort, and its time to a usable index
//! was more than four times this one's.
//!
//! **What it costs to build.** Validated tables list their records function by function,
//! and in the usual case (LLVM emits each function's records in code order, and functions
//! in address order) that is address order already: the index then reads each record's
//! header once, in section order, and writes the blocks and the directory front to back:
//! no sort, no hashing, no random writes. It checks the order as it goes; records out of
//! order are sorted (stably: records at one address stay in section order) and laid out
//! from the sorted list. Lookup by ID needs the records sorted by ID, which costs a sort
//! of every record: that table is built on the first [`StackMapIndex::by_id`] call (once;
//! the index stays `Sync`), so that a runtime that only looks addresses up never pays for
//! it.
//!
//! **Lookups.** What limits lookups is how many of them the processor keeps in flight while
//! each waits for its block's cache miss, and that depends on how many instructions each
//! one puts in flight. So the common case is kept short: the cell and the block are
//! computed without branches on the address, the four keys are compared with one SIMD
//! compare, the rarer cases (a cell that spans blocks, an index without compact slots) are
//! out of line, and a slot's record is made without bounds checks: the slots (the crate's
//! one audited unsafe module, `pod`) check every record put in a slot once, against its
//! function's records region, so the lookup need not (a check there, on data that arrives
//! with the block's cache miss, made single lookups up to a third slower). On request ([`IndexOptions::huge_pages`]) the blocks of
//! a huge table are advised onto 2 MiB pages (Linux), since each lookup would otherwise
//! also miss the TLB; that is a change to the process's memory the caller chooses.
//!
//! A lookup still waits for its block with its instructions in flight, and the processor's
//! window holds only so many of them. [`StackMapIndex::lookup_all`] answers many addresses at
//! once (a stack walk's return addresses, say): it prefetches each address's directory
//! byte and then its block some lookups before it answers it, so the misses overlap
//! without filling the window.
//!
//! Indexes whose addresses span 4 GiB or more (which the 32-bit keys cannot hold) keep their
//! records in one sorted array instead and look addresses up by binary search.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use once_cell::race::OnceBox;

use crate::endian::Endian;
use crate::parse::{Function, Record, RecordSource, Table};
use crate::pod::{prefetch, Block, CellTable, Slot, Slots, BLOCK_SLOTS, EMPTY, NO_BLOCK};

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

/// The key of an address too far from [`StackMapIndex::base`] to be indexed: no slot
/// holds it (the compact slots take only addresses whose key is below it).
const NO_KEY: u32 = u32::MAX;

/// [`Directory::offsets`] of a cell whose records may not all be in the block it names:
/// they run into the next block(s), or the block is too far from the base to be named.
const LEAVES: u8 = 0x80;
/// [`Directory::offsets`] of a cell whose block could not be named (too far from its
/// word's base): it is found by binary search.
const UNNAMED: u8 = 0x7f;

/// Which block each cell's records begin in. Cells are laid out in address order, so that
/// the blocks of 64 consecutive cells are close together: a base per 64 cells and a byte
/// per cell name them. The bytes of a million-record index take some 0.6 MiB and mostly stay
/// in cache, where a word per cell would not.
#[derive(Clone, Debug)]
struct Directory {
    /// Per 64 cells, the block the first of them begins in (the words); per cell, the
    /// block it begins in minus its word's base, below [`UNNAMED`] (or `UNNAMED`), with
    /// [`LEAVES`] set if the cell's records do not all lie in that block (the bytes). An
    /// empty cell names the block the records before it end in (no slot there holds its
    /// keys). Reads clamp to the last cell, so that an address past the indexed ones lands
    /// there (where no slot holds its key) without a bounds check.
    cells: CellTable,
}

impl Directory {
    /// The directory of an index with no compact slots: one cell that leaves the common
    /// path.
    fn unnamed() -> Self {
        Directory::of(vec![0], vec![LEAVES | UNNAMED])
    }

    /// The directory of these words and bytes; one cell that leaves the common path if
    /// they do not make a [`CellTable`] (never: `new` builds a word per 64 bytes).
    fn of(words: Vec<u32>, bytes: Vec<u8>) -> Self {
        let cells =
            CellTable::new(words, bytes).unwrap_or_else(|| CellTable::one(0, LEAVES | UNNAMED));
        Directory { cells }
    }

    /// The directory of the cells whose records begin at slot `cells[c]` and end before
    /// `cells[c + 1]` (in order), with at least one cell, in an index of `blocks` blocks:
    /// every entry without [`LEAVES`] names one of them.
    fn new(cells: &[u32], blocks: usize) -> Self {
        let n = cells.len().saturating_sub(1);
        let mut bases = Vec::with_capacity(n.div_ceil(64).max(1));
        let mut offsets = Vec::with_capacity(n.max(1));
        // The last block holding a record so far.
        let mut last = 0u32;
        let mut base = 0u32;
        for (c, pair) in cells.windows(2).enumerate() {
            let (p, q) = (pair[0], pair[1]);
            let (first, leaves) = if q > p {
                let (first, end) = (p / BLOCK_SLOTS as u32, (q - 1) / BLOCK_SLOTS as u32);
                last = end;
                (first, end != first)
            } else {
                (last, false)
            };
            if c % 64 == 0 {
                base = first;
                bases.push(base);
            }
            let named = (first as usize) < blocks;
            offsets.push(match first.wrapping_sub(base) {
                o if o < u32::from(UNNAMED) && named => o as u8 | if leaves { LEAVES } else { 0 },
                _ => LEAVES | UNNAMED,
            });
        }
        if n == 0 {
            bases.push(0);
            offsets.push(if blocks > 0 { 0 } else { LEAVES | UNNAMED });
        }
        // One base per 64 cells (pushed above at every 64th).
        debug_assert_eq!(bases.len(), offsets.len().div_ceil(64));
        Directory::of(bases, offsets)
    }

    /// The base and the byte of cell `c`; a cell past the last reads the last one's.
    #[inline(always)]
    fn entry(&self, c: usize) -> (u32, u8) {
        self.cells.get(c)
    }

    fn heap_bytes(&self) -> usize {
        self.cells.heap_bytes()
    }
}

/// A multimap from code address and from record ID to records.
///
/// It borrows the section its tables were parsed from (`'a`) and holds about 20-30 bytes
/// per record (see [`StackMapIndex::heap_bytes`]).
#[derive(Clone, Debug)]
pub struct StackMapIndex<'a, E: Endian> {
    tables: Vec<Table<'a, E>>,
    load_bias: u64,
    /// The functions of all tables, table after table.
    functions: Vec<FunctionRef<'a, E>>,
    /// Number of indexed records.
    len: usize,
    /// The lowest indexed address: slot keys are relative to it.
    base: u64,
    /// The records in address order (records at one address in section order), four slots
    /// a block, then one vacant block; a slot's key is the record's address minus `base`,
    /// plus 1 ([`EMPTY`] in an empty slot), its region the record's function's position in
    /// `functions`. Only the vacant block when `compact` is false.
    slots: Slots<'a, FunctionRef<'a, E>>,
    /// Which block the records of each cell begin in (cell `c` holds the keys - 1 in
    /// `c << shift .. (c + 1) << shift`), and whether they end in it. When `compact` is
    /// false, one cell that leaves the common path.
    directory: Directory,
    /// log2 of the bytes of code a cell covers.
    shift: u32,
    /// The position after the last record (in `blocks`' slots, or in `sorted`).
    end: usize,
    /// Whether the records are in `blocks`; if not, they are in `sorted`.
    compact: bool,
    /// The records in address order, with their addresses, when they do not fit the compact
    /// slots (addresses spanning 4 GiB or more); empty otherwise.
    sorted: Vec<(u64, Entry)>,
    /// (ID, position of the record in address order), sorted; built by the first
    /// [`StackMapIndex::by_id`].
    ids: OnceBox<Vec<(u64, usize)>>,
}

/// Why laying records out in blocks stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// A record's address is below the one before it: they need sorting first.
    Unsorted,
    /// A record does not fit the compact slots (too far from the base, too far into its
    /// table, too many records or functions).
    Wide,
}

/// How [`StackMapIndex::with_options`] builds an index; the default is what
/// [`StackMapIndex::new`] does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexOptions {
    /// Ask Linux to back the index's blocks with transparent 2 MiB pages
    /// (`madvise(MADV_HUGEPAGE)` on the index's own allocation; with the `std` feature on
    /// Linux, elsewhere nothing). Off by default: it changes how the process's memory is
    /// backed, which is the caller's choice. On a 1M-record index it took roughly 5-15% off
    /// the lookup time; results are the same either way.
    pub huge_pages: bool,
}

impl IndexOptions {
    /// These options with [`IndexOptions::huge_pages`] set to `on`.
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.huge_pages = on;
        self
    }
}

/// Lays records out in blocks and the cell directory, fed in address order.
struct Layout<'a, E: Endian> {
    slots: Slots<'a, FunctionRef<'a, E>>,
    cells: Vec<u32>,
    shift: u32,
    /// The directory grows no longer than this: beyond it, cells are merged pairwise.
    max_cells: usize,
    base: u64,
    last: u64,
    /// The slot the next record goes to.
    next: usize,
}

/// The smallest shift that cuts `span` bytes into at most `cells` cells.
fn shift_for(span: u64, cells: usize) -> u32 {
    let cells = cells.max(1) as u64;
    let mut shift = 0;
    while shift < 32 && (span >> shift) >= cells {
        shift += 1;
    }
    shift
}

impl<'a, E: Endian> Layout<'a, E> {
    /// A layout for about `records` records of `functions` over about `span` bytes of code.
    fn new(
        functions: &[FunctionRef<'a, E>],
        records: usize,
        span: u64,
        options: IndexOptions,
    ) -> Self {
        // Blocks hold four records each, less the slots left empty where a cell would
        // otherwise straddle two blocks.
        let slots = Slots::new(
            functions.iter().map(|f| (*f, f.source.region())),
            records / BLOCK_SLOTS + records / 16 + 1,
            options.huge_pages,
        );
        Layout {
            slots,
            cells: Vec::with_capacity(records + 2),
            shift: shift_for(span, records),
            max_cells: 2 * records + 64,
            base: 0,
            last: 0,
            next: 0,
        }
    }

    /// Adds the record at `address` (not below any added before).
    #[inline(always)]
    fn push(&mut self, address: u64, e: Entry) -> Result<(), Stop> {
        if self.next == 0 {
            self.base = address;
            self.last = address;
        }
        if address < self.last {
            return Err(Stop::Unsorted);
        }
        self.last = address;
        let distance = address - self.base;
        // `Slots::set` checks the record against its function's records region below (the
        // records of a validated table always pass).
        let fits = distance < u64::from(NO_KEY - 1)
            && u32::try_from(e.at).is_ok()
            && self.next < (u32::MAX as usize) - 2 * BLOCK_SLOTS;
        if !fits {
            return Err(Stop::Wide);
        }
        let mut cell = (distance >> self.shift) as usize;
        while cell >= self.max_cells {
            self.coarsen();
            cell = (distance >> self.shift) as usize;
        }
        let slot = self.next % BLOCK_SLOTS;
        if cell >= self.cells.len() {
            // The first record of its cell: this cell and the empty ones before it begin
            // here.
            self.cells.resize(cell + 1, self.next as u32);
        } else if slot == 0 {
            // The block is full and this record's cell is in it: if the cell began in it
            // after its first slot, the cell moves whole to a fresh block, so that it stays
            // in one block.
            let from = self.cells.get(cell).map_or(0, |&c| c as usize);
            let moved = self.next - from;
            if !from.is_multiple_of(BLOCK_SLOTS) && moved < BLOCK_SLOTS {
                self.move_to_fresh_block(from, moved);
            }
        }
        if self.next.is_multiple_of(BLOCK_SLOTS) {
            self.slots.push_block();
        }
        let (b, s) = (self.next / BLOCK_SLOTS, self.next % BLOCK_SLOTS);
        let slot = Slot {
            key: distance as u32 + 1,
            at: e.at as u32,
            region: e.function,
            num_locations: e.num_locations,
            num_live_outs: e.num_live_outs,
        };
        if !self.slots.set(b, s, slot) {
            // Not inside its function's records region (or too many functions): the
            // layout is dropped.
            return Err(Stop::Wide);
        }
        self.next += 1;
        Ok(())
    }

    /// Moves the `moved` records of the last cell, which begin at slot `from` of the last
    /// (full) block, to the first slots of a new block.
    #[cold]
    fn move_to_fresh_block(&mut self, from: usize, moved: usize) {
        let pushed = self.slots.pushed();
        let (Some(old), true) = (pushed.checked_sub(1), moved > 0) else {
            return;
        };
        let to = pushed * BLOCK_SLOTS;
        self.slots.push_block();
        for i in 0..moved {
            let s = (from + i) % BLOCK_SLOTS;
            if let Some(slot) = self.slots.slot(old, s) {
                // Checked when it was set; the same record passes again.
                self.slots.set(pushed, i, slot);
            }
            self.slots.clear(old, s);
        }
        // The cell, and the empty cells just before it, now begin in the new block.
        for c in self.cells.iter_mut().rev() {
            if *c as usize != from {
                break;
            }
            *c = to as u32;
        }
        self.next = to + moved;
    }

    /// Doubles the bytes each cell covers, merging cells pairwise.
    #[cold]
    fn coarsen(&mut self) {
        let merged = self.cells.len().div_ceil(2);
        for i in 0..merged {
            let start = self.cells.get(2 * i).copied().unwrap_or(0);
            if let Some(c) = self.cells.get_mut(i) {
                *c = start;
            }
        }
        self.cells.truncate(merged);
        self.shift += 1;
    }

    /// Lays the index out: the blocks (a vacant one after the records) and the directory.
    fn finish(mut self, index: &mut StackMapIndex<'a, E>) {
        let end = self.next;
        self.cells.push(end as u32);
        index.directory = Directory::new(&self.cells, self.slots.blocks().len());
        index.slots = self.slots;
        index.shift = self.shift;
        index.base = self.base;
        index.end = end;
    }
}

/// Calls `emit` with the address and entry of each record of `tables`, in section order,
/// until it returns an error. Records follow the function order and each function owns
/// `record_count` of them; records past the sum of the counts, which only a lenient parse
/// admits, are left out.
fn each_record<E: Endian>(
    tables: &[Table<'_, E>],
    functions: &[FunctionRef<'_, E>],
    load_bias: u64,
    mut emit: impl FnMut(u64, Entry) -> Result<(), Stop>,
) -> Result<(), Stop> {
    let mut first = 0usize;
    for t in tables {
        let count = t.num_functions() as usize;
        let own = functions.get(first..first + count).unwrap_or(&[]);
        let mut fs = own.iter().enumerate();
        let mut left_in_table = t.num_records();
        let mut at = 0usize;
        'functions: while left_in_table > 0 {
            let Some((i, f)) = fs.next() else {
                break;
            };
            let address = f.function.address.wrapping_add(load_bias);
            let function = (first + i) as u32;
            let mut left = f.function.record_count;
            while left > 0 {
                if left_in_table == 0 {
                    break 'functions;
                }
                // Every record of a validated table is in its records region.
                f.source.prefetch_ahead(at);
                let Some(h) = f.source.head(at) else {
                    break 'functions;
                };
                let entry = Entry {
                    at,
                    function,
                    num_locations: h.num_locations,
                    num_live_outs: h.num_live_outs,
                };
                emit(address.wrapping_add(u64::from(h.instruction_offset)), entry)?;
                at = h.next;
                left -= 1;
                left_in_table -= 1;
            }
        }
        first += count;
    }
    Ok(())
}

/// About how many bytes of code the records of `functions` cover, from the functions'
/// addresses alone (the records' own offsets are read only while laying them out): the
/// span of the function addresses, scaled up for the records of the last function.
fn estimate_span<E: Endian>(
    functions: &[FunctionRef<'_, E>],
    load_bias: u64,
    records: usize,
) -> u64 {
    let mut lo = u64::MAX;
    let mut hi = 0u64;
    let mut at_hi = 0u64;
    for f in functions.iter().filter(|f| f.function.record_count > 0) {
        let a = f.function.address.wrapping_add(load_bias);
        lo = lo.min(a);
        if a > hi {
            (hi, at_hi) = (a, 0);
        }
        if a == hi {
            at_hi = at_hi.saturating_add(f.function.record_count);
        }
    }
    let records = records as u64;
    if hi > lo && records > at_hi {
        let scaled = u128::from(hi - lo) * u128::from(records) / u128::from(records - at_hi);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    } else {
        // One function: call sites some 16 bytes apart.
        records.saturating_mul(16)
    }
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
    ///
    /// This reads each record's header once and, when the records are in address order
    /// (the usual case), writes the index front to back; the table for
    /// [`StackMapIndex::by_id`] is built when first needed.
    pub fn new(tables: Vec<Table<'a, E>>, load_bias: u64) -> Self {
        Self::with_options(tables, load_bias, IndexOptions::default())
    }

    /// [`StackMapIndex::new`] built as `options` say.
    pub fn with_options(tables: Vec<Table<'a, E>>, load_bias: u64, options: IndexOptions) -> Self {
        let total: usize = tables.iter().map(|t| t.num_records() as usize).sum();
        let mut functions = Vec::new();
        for (ti, t) in tables.iter().enumerate() {
            let source = t.record_source();
            functions.extend(t.functions().map(|function| FunctionRef {
                function,
                table: ti as u32,
                source,
            }));
        }
        let mut index = StackMapIndex {
            tables: Vec::new(),
            load_bias,
            functions: Vec::new(),
            len: 0,
            base: 0,
            slots: Slots::new([], 0, false),
            directory: Directory::new(&[0], 1),
            shift: 0,
            end: 0,
            compact: true,
            sorted: Vec::new(),
            ids: OnceBox::new(),
        };
        // The usual case: records already in address order, laid out as they are read.
        let mut len = 0usize;
        let mut layout = Layout::new(
            &functions,
            total,
            estimate_span(&functions, load_bias, total),
            options,
        );
        let streamed = each_record(&tables, &functions, load_bias, |address, e| {
            len += 1;
            layout.push(address, e)
        });
        if streamed.is_ok() {
            layout.finish(&mut index);
            index.len = len;
        } else {
            drop(layout);
            let mut sorted: Vec<(u64, Entry)> = Vec::with_capacity(total);
            let _ = each_record(&tables, &functions, load_bias, |address, e| {
                sorted.push((address, e));
                Ok(())
            });
            // Stable: records at one address stay in section order.
            sorted.sort_by_key(|(a, _)| *a);
            index.len = sorted.len();
            let span = match (sorted.first(), sorted.last()) {
                (Some(&(first, _)), Some(&(last, _))) => last - first,
                _ => 0,
            };
            let mut layout = Layout::new(&functions, sorted.len(), span, options);
            if sorted
                .iter()
                .try_for_each(|&(a, e)| layout.push(a, e))
                .is_ok()
            {
                layout.finish(&mut index);
            } else {
                drop(layout);
                index.compact = false;
                index.directory = Directory::unnamed();
                index.end = sorted.len();
                sorted.shrink_to_fit();
                index.sorted = sorted;
            }
        }
        index.tables = tables;
        index.functions = functions;
        index
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
        self.len
    }

    /// True if no record was indexed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the index holds on the heap (its arrays' capacities, the table for
    /// [`StackMapIndex::by_id`] once built; the section's bytes, which it borrows, are not
    /// counted).
    pub fn heap_bytes(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * core::mem::size_of::<T>()
        }
        let ids = self
            .ids
            .get()
            .map_or(0, |v| bytes(v) + core::mem::size_of::<Vec<(u64, usize)>>());
        bytes(&self.tables)
            + bytes(&self.functions)
            + self.slots.heap_bytes()
            + self.directory.heap_bytes()
            + bytes(&self.sorted)
            + ids
    }

    /// The record of slot `s` of `block` ([`Slots::record`]), with its function. Never
    /// `None` for a filled slot ([`Layout::push`] fills slots with records of `functions`).
    #[inline(always)]
    fn slot_record(&self, address: u64, block: &Block, s: usize) -> Option<IndexedRecord<'a, E>> {
        let (f, pieces) = self.slots.record(block, s)?;
        Some(IndexedRecord {
            address,
            function: f.function,
            table: f.table as usize,
            record: f.source.assemble(pieces),
        })
    }

    /// The record at position `p` in address order (a slot of the blocks, or a place in
    /// `sorted`), if one is there.
    #[inline]
    fn get(&self, p: usize) -> Option<IndexedRecord<'a, E>> {
        if self.compact {
            let (b, s) = (p / BLOCK_SLOTS, p % BLOCK_SLOTS);
            let block = self.slots.blocks().get(b)?;
            let key = block.key[s];
            if key == EMPTY || p >= self.end() {
                return None;
            }
            let address = self.base.wrapping_add(u64::from(key - 1));
            self.slot_record(address, block, s)
        } else {
            let &(address, e) = self.sorted.get(p)?;
            let f = self.functions.get(e.function as usize)?;
            Some(IndexedRecord {
                address,
                function: f.function,
                table: f.table as usize,
                record: f.source.record(e.at, e.num_locations, e.num_live_outs)?,
            })
        }
    }

    /// The position after the last record.
    fn end(&self) -> usize {
        self.end
    }

    /// The key of position `p` ([`EMPTY`] for an empty slot), compact indexes only.
    #[inline]
    fn key_at(&self, p: usize) -> u32 {
        self.slots
            .blocks()
            .get(p / BLOCK_SLOTS)
            .map_or(EMPTY, |b| b.key[p % BLOCK_SLOTS])
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

    /// The cell of `key`. Addresses past the indexed ones give cells past the last one,
    /// which the directory reads as the last cell (where no slot holds their key).
    #[inline(always)]
    fn cell(&self, key: u32) -> usize {
        ((u64::from(key) - 1) >> self.shift) as usize
    }

    /// The block cell `c` (from [`StackMapIndex::cell`]) begins in and its directory byte.
    #[inline(always)]
    fn block_of(&self, c: usize) -> (usize, u8) {
        let (base, offset) = self.directory.entry(c);
        (base as usize + usize::from(offset & !LEAVES), offset)
    }

    /// Starts bringing the directory entries of `address` into the cache.
    #[inline(always)]
    fn prefetch_cell(&self, address: u64) {
        let c = self.cell(self.key(address));
        prefetch(self.directory.cells.byte_address(c));
    }

    /// Starts bringing the block of `address` into the cache (reading its directory entry).
    #[inline(always)]
    fn prefetch_block(&self, address: u64) {
        let (b, _) = self.block_of(self.cell(self.key(address)));
        prefetch(self.slots.block_address(b));
    }

    /// The records at each of `addresses`, in order: what [`StackMapIndex::lookup`] gives for
    /// each, but faster when there are several. While it answers one address it has the
    /// block of an address [`LOOKAHEAD`] places further on brought into the cache (and the
    /// directory entries of one twice as far), on x86-64, so the lookups' cache misses overlap
    /// instead of each one holding up the processor. A stack walk can collect its frames'
    /// return addresses first (by frame pointer, say) and look them all up this way.
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
        let far = addresses
            .get(..addresses.len().min(2 * LOOKAHEAD))
            .unwrap_or(&[]);
        for &a in far {
            self.prefetch_cell(a);
        }
        let near = addresses
            .get(..addresses.len().min(LOOKAHEAD))
            .unwrap_or(&[]);
        for &a in near {
            self.prefetch_block(a);
        }
        LookupAll {
            index: self,
            addresses: addresses.iter(),
            ahead: addresses.get(near.len()..).unwrap_or(&[]).iter(),
            far_ahead: addresses.get(far.len()..).unwrap_or(&[]).iter(),
        }
    }

    /// Every record at absolute code address `address`, in section order.
    #[inline]
    pub fn lookup(&self, address: u64) -> Lookup<'_, 'a, E> {
        // Everything up to the block's cache miss is computed without branches on the
        // address, and the common case (the address's cell lies in one block) takes no
        // other path: the fewer instructions a lookup puts in flight, the more lookups the
        // processor overlaps.
        let key = self.key(address);
        let c = self.cell(key);
        let (b, offset) = self.block_of(c);
        let mut l = Lookup {
            index: self,
            block: &NO_BLOCK,
            hits: 0,
            next: usize::MAX,
            key,
            address,
        };
        if offset & LEAVES == 0 {
            // A directory entry without LEAVES names one of the blocks (`Directory::new`);
            // the vacant last block's empty slots would answer if it did not.
            let block = self.slots.block(b);
            // The cell's records (none, or all of them) are in this block, and no other
            // cell's record has this key.
            l.block = block;
            l.hits = block.hits(key);
        } else {
            l.next = self.search(address, key, b, offset & UNNAMED == UNNAMED);
        }
        l
    }

    /// The rest of [`StackMapIndex::lookup`] when the cell of `key` runs on past block `b`,
    /// the one it begins in (or its block is `unnamed`), or when the index is not compact:
    /// the position where its records begin (`usize::MAX` if there are none). Out of line,
    /// and it answers in a register, so that the common case stays short.
    #[cold]
    #[inline(never)]
    fn search(&self, address: u64, key: u32, b: usize, unnamed: bool) -> usize {
        if !self.compact {
            return self.sorted.partition_point(|&(a, _)| a < address);
        }
        let first = if unnamed {
            // The first record with the key is in the last block whose first key is below
            // it, or first in the next one (first slots are never empty).
            let real = self
                .slots
                .blocks()
                .get(..self.end.div_ceil(BLOCK_SLOTS))
                .unwrap_or(&[]);
            real.partition_point(|block| block.key[0] < key)
                .saturating_sub(1)
        } else {
            b
        };
        let mut i = first * BLOCK_SLOTS;
        while i < self.end {
            let k = self.key_at(i);
            if k == key {
                return i;
            }
            if k > key {
                break;
            }
            i += 1;
        }
        usize::MAX
    }

    /// Every record with ID `id`, in address order.
    ///
    /// The first call sorts every record's ID (the index reads each record's ID from the
    /// section then) and keeps the table for later calls: 16 bytes per record, counted by
    /// [`StackMapIndex::heap_bytes`] from then on.
    pub fn by_id(&self, id: u64) -> impl Iterator<Item = IndexedRecord<'a, E>> + '_ {
        let ids = self.ids.get_or_init(|| {
            let mut ids: Vec<(u64, usize)> = (0..self.end())
                .filter_map(|p| Some((self.get(p)?.record.id(), p)))
                .collect();
            ids.sort_unstable();
            Box::new(ids)
        });
        let first = ids.partition_point(|&(k, _)| k < id);
        ids.get(first..)
            .unwrap_or(&[])
            .iter()
            .take_while(move |&&(k, _)| k == id)
            .filter_map(move |&(_, p)| self.get(p))
    }

    /// The record at the highest indexed address below `address` (the first of them, in
    /// section order, when several share it): what a code address without a record of its
    /// own follows. `None` when no record lies below `address`.
    pub fn nearest_before(&self, address: u64) -> Option<IndexedRecord<'a, E>> {
        if !self.compact {
            let below = self.sorted.partition_point(|&(a, _)| a < address);
            let at = self.sorted.get(below.checked_sub(1)?)?.0;
            return self.get(self.sorted.partition_point(|&(a, _)| a < at));
        }
        if address <= self.base || self.len == 0 {
            return None;
        }
        // Keys of addresses up to and past the last indexed one, clamped: every indexed key
        // is below NO_KEY.
        let key = self.key(address);
        let end = self.end();
        // The last position whose key is below `key`: in the last block whose first key is
        // below it (first slots are never empty).
        let real = self
            .slots
            .blocks()
            .get(..end.div_ceil(BLOCK_SLOTS))
            .unwrap_or(&[]);
        let b = real.partition_point(|b| b.key[0] < key).checked_sub(1)?;
        let mut p = ((b + 1) * BLOCK_SLOTS).min(end);
        let below = loop {
            p = p.checked_sub(1)?;
            let k = self.key_at(p);
            if k != EMPTY && k < key {
                break k;
            }
        };
        // The first record at that address.
        let mut first = p;
        let mut i = p;
        while let Some(prev) = i.checked_sub(1) {
            let k = self.key_at(prev);
            if k == below {
                first = prev;
            } else if k != EMPTY {
                break;
            }
            i = prev;
        }
        self.get(first)
    }

    /// Every record in address order.
    pub fn iter(&self) -> impl Iterator<Item = IndexedRecord<'a, E>> + '_ {
        (0..self.end()).filter_map(move |p| self.get(p))
    }
}

/// How many addresses ahead [`StackMapIndex::lookup_all`] fetches blocks (and twice as many
/// ahead, directory entries): enough lookups to cover a cache miss (about 200 ns on the
/// benchmark's machine, at 10-30 ns a lookup).
pub const LOOKAHEAD: usize = 16;

/// The records at each of several addresses; see [`StackMapIndex::lookup_all`].
#[derive(Clone, Debug)]
pub struct LookupAll<'i, 'a, E: Endian> {
    index: &'i StackMapIndex<'a, E>,
    /// The addresses not yet looked up.
    addresses: core::slice::Iter<'i, u64>,
    /// The addresses whose blocks are not yet fetched: [`LOOKAHEAD`] behind `addresses`.
    ahead: core::slice::Iter<'i, u64>,
    /// The addresses whose directory entries are not yet fetched: 2 [`LOOKAHEAD`] behind.
    far_ahead: core::slice::Iter<'i, u64>,
}

impl<'i, 'a, E: Endian> Iterator for LookupAll<'i, 'a, E> {
    type Item = Lookup<'i, 'a, E>;
    #[inline]
    fn next(&mut self) -> Option<Lookup<'i, 'a, E>> {
        let &address = self.addresses.next()?;
        if let Some(&a) = self.far_ahead.next() {
            self.index.prefetch_cell(a);
        }
        if let Some(&a) = self.ahead.next() {
            self.index.prefetch_block(a);
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
    /// The block that holds the address's cell (if it lies in one block).
    block: &'i Block,
    /// The slots of `block` not yet visited that hold the address, one bit each.
    hits: u32,
    /// When the cell runs past its block (or the index is not compact): the position of the
    /// next record to look at; `usize::MAX` otherwise, or when there are no more.
    next: usize,
    key: u32,
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
            let i = self.hits.trailing_zeros() as usize & (BLOCK_SLOTS - 1);
            self.hits &= self.hits - 1;
            // Slot `i` of `self.block` holds the key looked up, so it is filled: never
            // `None`.
            return self.index.slot_record(self.address, self.block, i);
        }
        if self.next != usize::MAX {
            return self.step();
        }
        None
    }
}

impl<'a, E: Endian> Lookup<'_, 'a, E> {
    /// The next record at the address from position `next` on.
    #[cold]
    fn step(&mut self) -> Option<IndexedRecord<'a, E>> {
        let index = self.index;
        while self.next < index.end {
            let p = self.next;
            self.next += 1;
            if index.compact {
                match index.key_at(p) {
                    EMPTY => continue,
                    k if k == self.key => return index.get(p),
                    _ => break,
                }
            } else {
                match index.sorted.get(p) {
                    Some(&(a, _)) if a == self.address => return index.get(p),
                    _ => break,
                }
            }
        }
        self.next = usize::MAX;
        None
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

    /// The record at the highest address below `address` (the first of them in section
    /// order), by brute force.
    fn nearest_model(all: &[(u64, usize, u64)], address: u64) -> Option<(u64, usize, u64)> {
        let below = all.iter().filter(|x| x.0 < address).map(|x| x.0).max()?;
        all.iter().find(|x| x.0 == below).copied()
    }

    #[test]
    fn layouts_of_many_shapes() {
        // Functions in address order or not, records dense (cells that span blocks, cells
        // moved whole to the next block), sparse (a directory coarsened while it is
        // written), sharing addresses (more than a block holds), and now and then a
        // function 4 GiB away; each index checked against the records it was built from.
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n.max(1)
        };
        let (mut compact, mut wide) = (0, 0);
        for case in 0..400 {
            let n_functions = 1 + next(6) as usize;
            let gap = [1u64, 4, 40, 1000][next(4) as usize];
            let mut address = 0x40_0000 + next(0x1000) * 16;
            let mut functions = Vec::new();
            for _ in 0..n_functions {
                let mut offsets = Vec::new();
                let mut offset = next(64) as u32;
                for _ in 0..next(80) {
                    match next(10) {
                        0..=1 => {}
                        2 => offset += next(4096) as u32,
                        _ => offset += 1 + next(gap) as u32,
                    }
                    offsets.push(offset);
                }
                functions.push((address, offsets));
                address += u64::from(offset) + next(256);
                if next(40) == 0 {
                    address += 1 << 32;
                }
            }
            if case % 3 == 0 {
                functions.reverse();
            }
            let section = table(&functions);
            let bias = [0, 0x1000, u64::MAX - 0x10_0000][next(3) as usize];
            let index = index_of(&section, bias);
            if index.compact {
                compact += 1;
            } else {
                wide += 1;
            }
            let all: Vec<_> = expected(&[&functions])
                .into_iter()
                .map(|(a, t, id)| (a.wrapping_add(bias), t, id))
                .collect();
            check(&index, &all);
            let mut sorted = all.clone();
            sorted.sort_by_key(|x| x.0);
            let order: Vec<_> = index
                .iter()
                .map(|r| (r.address, r.table, r.record.id()))
                .collect();
            assert_eq!(order, sorted, "case {case}");
            for &(a, _, id) in &all {
                for probe in [a, a.wrapping_add(1), a.wrapping_add(100)] {
                    let got = index
                        .nearest_before(probe)
                        .map(|r| (r.address, r.table, r.record.id()));
                    assert_eq!(got, nearest_model(&all, probe), "case {case} {probe:#x}");
                }
                assert!(index.by_id(id).any(|r| r.address == a));
            }
            assert!(index.nearest_before(0).is_none());
            assert_eq!(
                index.nearest_before(u64::MAX).map(|r| r.address),
                nearest_model(&all, u64::MAX).map(|x| x.0)
            );
        }
        assert!(compact > 200 && wide > 10, "{compact} compact, {wide} wide");
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
        fn arrays(index: &StackMapIndex<'_, LittleEndian>) -> usize {
            index.tables.capacity() * core::mem::size_of::<Table<'_, LittleEndian>>()
                + index.functions.capacity() * core::mem::size_of::<FunctionRef<'_, LittleEndian>>()
                + index.slots.heap_bytes()
                + index.directory.heap_bytes()
                + index.sorted.capacity() * core::mem::size_of::<(u64, Entry)>()
        }
        let empty = table(&[]);
        let index = index_of(&empty, 0);
        // One vacant block, the directory's two words, and nothing else.
        assert_eq!(index.heap_bytes(), arrays(&index));
        assert_eq!(
            (index.slots.blocks().len(), index.directory.cells.bytes()),
            (1, &[0][..])
        );

        let offsets: Vec<u32> = (0..100).map(|i| i * 4).collect();
        let section = table(&[(0x1000, offsets)]);
        let index = index_of(&section, 0);
        assert!(index.compact);
        assert_eq!(index.heap_bytes(), arrays(&index));
        // 100 records: at least 25 full blocks and the vacant one, and a directory word
        // per cell; at most 2 blocks of every 5 records' slots (growth) and 2 words per
        // record.
        let bytes = index.heap_bytes() - arrays(&index) + index.slots.capacity() * 64;
        assert!(bytes >= 26 * 64, "{bytes}");
        assert!(
            index.heap_bytes() < 100 * 40 + 1024,
            "{}",
            index.heap_bytes()
        );
        // The ID table, once built, is counted too: 16 bytes per record.
        let before = index.heap_bytes();
        assert_eq!(index.by_id(3).count(), 1);
        assert!(
            index.heap_bytes() >= before + 100 * 16,
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
