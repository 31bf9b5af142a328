//! A synthetic but realistic `.llvm_stackmaps` v3 section for the benchmarks.
//!
//! The layout is exactly the one `locus_stackmap::parse` documents, little-endian:
//! header, `StkSizeRecord`s, constants, then records, each record padded to 8 bytes after
//! its locations and after its live-outs. Every reserved field and padding byte is zero and
//! the functions' record counts add up to `NumRecords`, so a strict parse accepts it.
//!
//! What it looks like (deterministic for a given seed):
//! - functions at increasing 16-aligned addresses from 0x40_1000, with skewed record
//!   counts (most have a few hundred records, one in ten a few thousand), stack sizes that
//!   are multiples of 8 and now and then `u64::MAX` (dynamic allocas);
//! - records at increasing instruction offsets inside their function (2 to 40 bytes apart,
//!   about 3% sharing the previous record's offset, as back-to-back stackmaps do); IDs are
//!   the statepoint default `0xABCDEF00` half of the time, else small patchpoint IDs or,
//!   rarely, arbitrary 64-bit values;
//! - 0 to 8 locations per record, of all five kinds: registers (DWARF 0..=16, size 8,
//!   sometimes 4 or 16), Direct and Indirect slots off `%rsp`/`%rbp` (offsets multiple of
//!   8 in -512..512), small constants, and ConstantIndex into the table's constants;
//! - live-outs on about 15% of records: 1 to 4 distinct registers in increasing order,
//!   general-purpose ones of size 8 and vector ones (DWARF 17..=32) of size 16.

/// What [`generate`] produced: the section and, per record, what a lookup should find.
pub struct Section {
    /// The section bytes (one table).
    pub bytes: Vec<u8>,
    /// Per record in section order: its absolute address (function address + offset).
    pub addresses: Vec<u64>,
    /// Per record in section order: its ID.
    pub ids: Vec<u64>,
    /// `NumFunctions`.
    pub num_functions: usize,
    /// `NumConstants`.
    pub num_constants: usize,
    /// Total locations over all records.
    pub num_locations: usize,
    /// Total live-outs over all records.
    pub num_live_outs: usize,
    /// How many locations of each kind (index = kind byte - 1).
    pub kinds: [usize; 5],
}

/// SplitMix64: small, fast and good enough for synthetic data and shuffles.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift; the tiny bias is irrelevant here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

fn pad8(out: &mut Vec<u8>) {
    while out.len() & 7 != 0 {
        out.push(0);
    }
}

/// Splits `total` records over `n` functions with a skewed distribution, each at least 1.
fn record_counts(rng: &mut Rng, n: usize, total: usize) -> Vec<usize> {
    assert!(n > 0 && total >= n, "need at least one record per function");
    let weights: Vec<u64> = (0..n)
        .map(|_| {
            if rng.chance(10) {
                rng.range(1_000, 10_000)
            } else {
                rng.range(1, 1_000)
            }
        })
        .collect();
    let sum: u64 = weights.iter().sum();
    let spare = (total - n) as u64;
    let mut counts: Vec<usize> = weights
        .iter()
        .map(|&w| 1 + (u128::from(spare) * u128::from(w) / u128::from(sum)) as usize)
        .collect();
    let mut given: usize = counts.iter().sum();
    let mut i = 0;
    while given < total {
        counts[i % n] += 1;
        given += 1;
        i += 1;
    }
    counts
}

/// Generates one table with `num_functions` functions, `num_records` records and
/// `num_constants` large constants (`num_constants > 0`), deterministically from `seed`.
pub fn generate(
    num_functions: usize,
    num_records: usize,
    num_constants: usize,
    seed: u64,
) -> Section {
    assert!(num_constants > 0, "ConstantIndex locations need constants");
    let mut rng = Rng::new(seed);
    let counts = record_counts(&mut rng, num_functions, num_records);

    // Lay the records out first so the function addresses can follow the code sizes.
    let mut records = Vec::with_capacity(num_records * 80);
    let mut offsets_per_function: Vec<Vec<u32>> = Vec::with_capacity(num_functions);
    let mut ids = Vec::with_capacity(num_records);
    let (mut num_locations, mut num_live_outs, mut kinds) = (0usize, 0usize, [0usize; 5]);
    for &count in &counts {
        let mut offsets = Vec::with_capacity(count);
        let mut offset = rng.range(4, 64) as u32;
        for k in 0..count {
            if k > 0 && !rng.chance(3) {
                offset += rng.range(2, 40) as u32;
            }
            offsets.push(offset);
            let id = match rng.below(100) {
                0..=49 => 0xABCD_EF00,
                50..=97 => rng.below(1 << 16),
                _ => rng.next_u64(),
            };
            ids.push(id);
            // Record header: ID, instruction offset, flags, NumLocations.
            let n = rng.below(9) as u16;
            records.extend(id.to_le_bytes());
            records.extend(offset.to_le_bytes());
            records.extend(0u16.to_le_bytes());
            records.extend(n.to_le_bytes());
            for _ in 0..n {
                let (kind, size, reg, raw): (u8, u16, u16, u32) = match rng.below(100) {
                    0..=24 => {
                        let size = match rng.below(10) {
                            0 => 4,
                            1 => 16,
                            _ => 8,
                        };
                        (1, size, rng.range(0, 16) as u16, 0)
                    }
                    25..=34 => {
                        let base = if rng.chance(50) { 7 } else { 6 };
                        (2, 8, base, (rng.range(0, 128) as i32 * 8 - 512) as u32)
                    }
                    35..=69 => {
                        let base = if rng.chance(70) { 7 } else { 6 };
                        let size = if rng.chance(80) { 8 } else { 4 };
                        (3, size, base, (rng.range(0, 128) as i32 * 8 - 512) as u32)
                    }
                    70..=89 => {
                        let value = if rng.chance(90) {
                            rng.range(0, 1100) as i32 - 100
                        } else {
                            rng.next_u64() as i32
                        };
                        (4, 8, 0, value as u32)
                    }
                    _ => (5, 8, 0, rng.below(num_constants as u64) as u32),
                };
                kinds[usize::from(kind) - 1] += 1;
                // Kind, reserved, size, DWARF register, reserved, offset or constant.
                records.extend([kind, 0]);
                records.extend(size.to_le_bytes());
                records.extend(reg.to_le_bytes());
                records.extend(0u16.to_le_bytes());
                records.extend(raw.to_le_bytes());
            }
            num_locations += usize::from(n);
            pad8(&mut records);
            let mut live_outs: Vec<u16> = Vec::new();
            if rng.chance(15) {
                let want = rng.range(1, 4) as usize;
                while live_outs.len() < want {
                    let r = rng.range(0, 32) as u16;
                    if !live_outs.contains(&r) {
                        live_outs.push(r);
                    }
                }
                live_outs.sort_unstable();
            }
            records.extend(0u16.to_le_bytes());
            records.extend((live_outs.len() as u16).to_le_bytes());
            for &r in &live_outs {
                records.extend(r.to_le_bytes());
                records.push(0);
                records.push(if r <= 16 { 8 } else { 16 });
            }
            num_live_outs += live_outs.len();
            pad8(&mut records);
        }
        offsets_per_function.push(offsets);
    }

    let mut bytes = Vec::with_capacity(16 + num_functions * 24 + num_constants * 8 + records.len());
    bytes.extend([3, 0, 0, 0]);
    bytes.extend((num_functions as u32).to_le_bytes());
    bytes.extend((num_constants as u32).to_le_bytes());
    bytes.extend((num_records as u32).to_le_bytes());
    let mut addresses = Vec::with_capacity(num_records);
    let mut address: u64 = 0x40_1000;
    for offsets in &offsets_per_function {
        let stack_size = if rng.chance(2) {
            u64::MAX
        } else {
            rng.range(1, 512) * 8
        };
        bytes.extend(address.to_le_bytes());
        bytes.extend(stack_size.to_le_bytes());
        bytes.extend((offsets.len() as u64).to_le_bytes());
        addresses.extend(offsets.iter().map(|&o| address + u64::from(o)));
        let code_size = u64::from(offsets.last().copied().unwrap_or(0)) + rng.range(16, 256);
        address = (address + code_size + 15) & !15;
    }
    for _ in 0..num_constants {
        // Large constants: what does not fit in the 32-bit offset field.
        bytes.extend((rng.next_u64() | (1 << 40)).to_le_bytes());
    }
    bytes.extend_from_slice(&records);
    Section {
        bytes,
        addresses,
        ids,
        num_functions,
        num_constants,
        num_locations,
        num_live_outs,
        kinds,
    }
}
