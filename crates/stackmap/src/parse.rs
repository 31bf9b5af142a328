//! Validation and the zero-copy model of a `.llvm_stackmaps` section.
//!
//! Layout (spec, "Stack Map Format"), offsets relative to the start of a table:
//!
//! ```text
//! 0   u8 version (3), u8 reserved, u16 reserved
//! 4   u32 NumFunctions, u32 NumConstants, u32 NumRecords
//! 16  StkSizeRecord[NumFunctions]   24 bytes each: address, stack size, record count
//!     Constants[NumConstants]        8 bytes each
//!     StkMapRecord[NumRecords]       variable size, each a multiple of 8 bytes:
//!       u64 ID, u32 instruction offset, u16 flags, u16 NumLocations
//!       Location[NumLocations]       12 bytes each
//!       padding to 8, u16 padding, u16 NumLiveOuts
//!       LiveOut[NumLiveOuts]         4 bytes each
//!       padding to 8
//! ```
//!
//! [`Table::parse`] checks every one of these fields against the section length once; after
//! that the accessors read without further checks. A linked binary's section holds one table
//! per input object, back to back; [`Tables`] walks them all.

use crate::endian::{read_u16, read_u32, read_u64, Endian};
use crate::error::{Error, Field, Result};

const HEADER_SIZE: usize = 16;
const FUNCTION_SIZE: usize = 24;
const CONSTANT_SIZE: usize = 8;
const RECORD_HEADER_SIZE: usize = 16;
const LOCATION_SIZE: usize = 12;
const LIVE_OUT_SIZE: usize = 4;
/// Header, no locations, the u16 padding and NumLiveOuts, aligned to 8.
const MIN_RECORD_SIZE: usize = 24;

/// The only version this crate reads (spec: "current version is 3").
pub const VERSION: u8 = 3;

/// How strictly reserved fields are checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strictness {
    /// Reserved fields and padding must be zero and the functions' record counts must add up
    /// to `NumRecords`, as LLVM always writes them.
    #[default]
    Strict,
    /// Only what is needed to read the data safely is checked; reserved fields are ignored.
    Lenient,
}

/// Options for [`Table::parse`] and [`Tables`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// How strictly reserved fields are checked.
    pub strictness: Strictness,
}

#[inline(always)]
fn align8(x: usize) -> usize {
    (x + 7) & !7
}

/// One `StkSizeRecord`: a function that has stack map records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Function {
    /// The function's address as written in the section (0 plus a relocation in an
    /// unlinked object; add the load bias in a position-independent binary).
    pub address: u64,
    /// The fixed stack size, or `u64::MAX` when it is not static (dynamic allocas). On
    /// x86-64 it spans from the stack pointer at a call site up to, not including, the
    /// function's return address: the caller's stack pointer is `sp + stack_size + 8`.
    pub stack_size: u64,
    /// How many of the table's records belong to this function; records follow the
    /// function order.
    pub record_count: u64,
}

impl Function {
    /// The stack size when LLVM knew it statically.
    pub fn static_stack_size(&self) -> Option<u64> {
        (self.stack_size != u64::MAX).then_some(self.stack_size)
    }
}

/// The kind byte of a location (spec, table after "Stack Map Format").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LocationKind {
    /// 0x1: the value is in a register.
    Register = 1,
    /// 0x2: the value is the address `reg + offset` (an alloca's frame index).
    Direct = 2,
    /// 0x3: the value is in memory at `[reg + offset]` (a spill).
    Indirect = 3,
    /// 0x4: the value is the small constant in the offset field.
    Constant = 4,
    /// 0x5: the value is `Constants[offset]`.
    ConstantIndex = 5,
}

impl LocationKind {
    /// The kind for an encoding byte, if it is one.
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::Register,
            2 => Self::Direct,
            3 => Self::Indirect,
            4 => Self::Constant,
            5 => Self::ConstantIndex,
            _ => return None,
        })
    }
}

/// Where one live value is, decoded from a 12-byte `Location`.
///
/// Each variant's discriminant is its kind byte, so that [`Location::kind`] is the byte as
/// read: a caller's `match` that handles Direct and Indirect alike then compiles to one
/// jump target for both, as a C++ `switch` on the kind byte does (with random kinds, one
/// target fewer means fewer mispredicted jumps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Location {
    /// The value is in DWARF register `dwarf_reg`.
    Register {
        /// DWARF register number.
        dwarf_reg: u16,
        /// Size of the value in bytes.
        size: u16,
    } = 1,
    /// The value is the address `dwarf_reg + offset` (an alloca passed directly).
    Direct {
        /// DWARF register number of the base.
        dwarf_reg: u16,
        /// Byte offset from the base.
        offset: i32,
        /// Size of the pointed-to object's slot in bytes.
        size: u16,
    } = 2,
    /// The value is in memory at `[dwarf_reg + offset]` (a spilled value).
    Indirect {
        /// DWARF register number of the base.
        dwarf_reg: u16,
        /// Byte offset from the base.
        offset: i32,
        /// Size of the value in bytes.
        size: u16,
    } = 3,
    /// The value is a constant that fits in 32 bits (sign-extended to 64).
    Constant {
        /// The constant as stored.
        value: i32,
        /// Size of the value in bytes.
        size: u16,
    } = 4,
    /// The value is the large constant `Constants[index]`.
    ConstantIndex {
        /// Index into the table's constants.
        index: u32,
        /// The constant it names.
        value: u64,
        /// Size of the value in bytes.
        size: u16,
    } = 5,
}

impl Location {
    /// The location's kind.
    pub fn kind(&self) -> LocationKind {
        match self {
            Location::Register { .. } => LocationKind::Register,
            Location::Direct { .. } => LocationKind::Direct,
            Location::Indirect { .. } => LocationKind::Indirect,
            Location::Constant { .. } => LocationKind::Constant,
            Location::ConstantIndex { .. } => LocationKind::ConstantIndex,
        }
    }

    /// The location's size field in bytes.
    pub fn size(&self) -> u16 {
        match *self {
            Location::Register { size, .. }
            | Location::Direct { size, .. }
            | Location::Indirect { size, .. }
            | Location::Constant { size, .. }
            | Location::ConstantIndex { size, .. } => size,
        }
    }

    /// The DWARF register the location names, if any.
    pub fn dwarf_reg(&self) -> Option<u16> {
        match *self {
            Location::Register { dwarf_reg, .. }
            | Location::Direct { dwarf_reg, .. }
            | Location::Indirect { dwarf_reg, .. } => Some(dwarf_reg),
            _ => None,
        }
    }

    /// The value when it is known without a frame (Constant and ConstantIndex).
    pub fn constant(&self) -> Option<u64> {
        match *self {
            Location::Constant { value, .. } => Some(value as i64 as u64),
            Location::ConstantIndex { value, .. } => Some(value),
            _ => None,
        }
    }
}

/// One live-out register: live across the call site and to be preserved by the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LiveOut {
    /// DWARF register number.
    pub dwarf_reg: u16,
    /// Bytes of the register that are live (the runtime saves the whole register).
    pub size: u8,
}

/// One table: what one object file's code generator emitted.
#[derive(Clone, Copy, Debug)]
pub struct Table<'a, E: Endian> {
    section: &'a [u8],
    start: usize,
    end: usize,
    /// The `Constants` array, one 8-byte chunk per constant.
    constants: &'a [[u8; CONSTANT_SIZE]],
    /// The records, from the first to the end of the table.
    records: &'a [u8],
    number: usize,
    endian: E,
    num_functions: u32,
    num_constants: u32,
    num_records: u32,
}

struct Checker<'a> {
    section: &'a [u8],
    table: usize,
    strict: bool,
}

impl Checker<'_> {
    #[inline]
    fn need(&self, at: usize, len: usize, field: Field) -> Result<()> {
        let available = self.section.len().saturating_sub(at);
        if len > available {
            return Err(Error::Truncated {
                table: self.table,
                offset: at,
                field,
                needed: len as u64,
                available: available as u64,
            });
        }
        Ok(())
    }

    #[inline]
    fn count(
        &self,
        at: usize,
        from: usize,
        count: u32,
        each: usize,
        field: Field,
    ) -> Result<usize> {
        let needed = u64::from(count) * each as u64;
        let available = self.section.len().saturating_sub(from) as u64;
        if needed > available {
            return Err(Error::CountTooLarge {
                table: self.table,
                offset: at,
                field,
                count: u64::from(count),
                needed,
                available,
            });
        }
        // Fits in the section, so it fits in usize.
        Ok(needed as usize)
    }

    #[inline]
    fn zero(&self, at: usize, value: u64, field: Field) -> Result<()> {
        if self.strict && value != 0 {
            return Err(Error::NonZeroReserved {
                table: self.table,
                offset: at,
                field,
                value,
            });
        }
        Ok(())
    }
}

impl<'a, E: Endian> Table<'a, E> {
    /// Validates the table that starts at byte `start` of `section` and returns it.
    ///
    /// `number` is the table's position in the section and only used in errors. Every
    /// count is checked against the bytes left before anything is read through it, and
    /// nothing is allocated.
    pub fn parse(
        section: &'a [u8],
        start: usize,
        number: usize,
        endian: E,
        options: ParseOptions,
    ) -> Result<Self> {
        let c = Checker {
            section,
            table: number,
            strict: options.strictness == Strictness::Strict,
        };
        c.need(start, HEADER_SIZE, Field::Version)?;
        let version = section.get(start).copied().unwrap_or(0);
        if version != VERSION {
            return Err(Error::UnsupportedVersion {
                table: number,
                offset: start,
                version,
            });
        }
        let reserved8 = section.get(start + 1).copied().unwrap_or(0);
        c.zero(start + 1, u64::from(reserved8), Field::HeaderReserved)?;
        c.zero(
            start + 2,
            u64::from(read_u16(section, start + 2, endian)),
            Field::HeaderReserved,
        )?;
        let num_functions = read_u32(section, start + 4, endian);
        let num_constants = read_u32(section, start + 8, endian);
        let num_records = read_u32(section, start + 12, endian);

        let functions = start + HEADER_SIZE;
        let fn_bytes = c.count(
            start + 4,
            functions,
            num_functions,
            FUNCTION_SIZE,
            Field::NumFunctions,
        )?;
        let constants = functions + fn_bytes;
        let const_bytes = c.count(
            start + 8,
            constants,
            num_constants,
            CONSTANT_SIZE,
            Field::NumConstants,
        )?;
        let records = constants + const_bytes;
        c.count(
            start + 12,
            records,
            num_records,
            MIN_RECORD_SIZE,
            Field::NumRecords,
        )?;

        if c.strict {
            let mut sum: u64 = 0;
            for i in 0..num_functions as usize {
                let at = functions + i * FUNCTION_SIZE + 16;
                sum = sum.saturating_add(read_u64(section, at, endian));
            }
            if sum != u64::from(num_records) {
                return Err(Error::RecordCountMismatch {
                    table: number,
                    offset: functions,
                    sum,
                    num_records,
                });
            }
        }

        // Each record is checked on the fast path (`record_if_valid`) and, only if that
        // rejects it, again field by field to name the fault. `records` is inside the
        // section: the count checks above made sure of it.
        let mut rest = section.get(records..).unwrap_or(&[]);
        let mut left = num_records;
        while left > 0 {
            (rest, left) = skip_valid_records(rest, left, num_constants, endian, c.strict);
            if left > 0 {
                let at = section.len() - rest.len();
                let end = check_record_slow(&c, at, start, num_constants, endian)?;
                rest = section.get(end..).unwrap_or(&[]);
                left -= 1;
            }
        }
        let end = section.len() - rest.len();
        Ok(Table {
            section,
            start,
            end,
            constants: section
                .get(constants..records)
                .unwrap_or(&[])
                .as_chunks::<CONSTANT_SIZE>()
                .0,
            records: section.get(records..end).unwrap_or(&[]),
            number,
            endian,
            num_functions,
            num_constants,
            num_records,
        })
    }

    /// The table's position in its section (0 for the first).
    pub fn number(&self) -> usize {
        self.number
    }

    /// Byte offset of the table from the start of the section.
    pub fn offset(&self) -> usize {
        self.start
    }

    /// Size of the table in bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True if the table has no bytes (never, for a parsed table; for clippy's sake).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// The table's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.section.get(self.start..self.end).unwrap_or(&[])
    }

    /// The byte order the table was read with.
    pub fn endian(&self) -> E {
        self.endian
    }

    /// The stack map version (always [`VERSION`] for a parsed table).
    pub fn version(&self) -> u8 {
        self.section.get(self.start).copied().unwrap_or(0)
    }

    /// `NumFunctions`.
    pub fn num_functions(&self) -> u32 {
        self.num_functions
    }

    /// `NumConstants`.
    pub fn num_constants(&self) -> u32 {
        self.num_constants
    }

    /// `NumRecords`.
    pub fn num_records(&self) -> u32 {
        self.num_records
    }

    fn functions_start(&self) -> usize {
        self.start + HEADER_SIZE
    }

    fn constants_start(&self) -> usize {
        self.functions_start() + self.num_functions as usize * FUNCTION_SIZE
    }

    fn records_start(&self) -> usize {
        self.constants_start() + self.num_constants as usize * CONSTANT_SIZE
    }

    /// The `i`th function entry.
    pub fn function(&self, i: usize) -> Option<Function> {
        if i >= self.num_functions as usize {
            return None;
        }
        let at = self.functions_start() + i * FUNCTION_SIZE;
        Some(Function {
            address: read_u64(self.section, at, self.endian),
            stack_size: read_u64(self.section, at + 8, self.endian),
            record_count: read_u64(self.section, at + 16, self.endian),
        })
    }

    /// The function entries in order.
    pub fn functions(&self) -> impl ExactSizeIterator<Item = Function> + 'a {
        let t = *self;
        (0..self.num_functions as usize)
            .filter_map(move |i| t.function(i))
            .collect_exact(self.num_functions as usize)
    }

    /// The `i`th large constant.
    pub fn constant(&self, i: u32) -> Option<u64> {
        let e = self.endian;
        self.constants.get(i as usize).map(|c| e.u64(*c))
    }

    /// The large constants in order.
    pub fn constants(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        let t = *self;
        (0..self.num_constants)
            .filter_map(move |i| t.constant(i))
            .collect_exact(self.num_constants as usize)
    }

    /// The records in order.
    pub fn records(&self) -> Records<'a, E> {
        Records {
            rest: self.records,
            offset: self.records_start(),
            left: self.num_records,
            constants: self.constants,
            endian: self.endian,
        }
    }

    /// The record that starts at byte `offset` of the section, which must be one this table's
    /// [`Records`] produced (see [`Record::offset`]).
    pub fn record_at(&self, offset: usize) -> Option<Record<'a, E>> {
        if offset < self.records_start() {
            return None;
        }
        let parts = Parts::split(self.section.get(offset..self.end)?, self.endian)?;
        Some(Record::new(&parts, offset, self.constants, self.endian))
    }

    /// What an index needs to make this table's records from their counts alone.
    pub(crate) fn record_source(&self) -> RecordSource<'a, E> {
        let start = self.records_start();
        RecordSource {
            records: self.records,
            records_start: start,
            constants: self.constants,
            endian: self.endian,
        }
    }

    /// Each record with the function it belongs to (records follow the function order and
    /// each function owns `record_count` of them). Records past the sum of the counts, which
    /// only a lenient parse admits, are left out.
    pub fn records_with_functions(&self) -> impl Iterator<Item = (Function, Record<'a, E>)> + 'a {
        self.records_with_function_indices().map(|(_, f, r)| (f, r))
    }

    /// As [`Table::records_with_functions`], with the function's position in the table.
    pub(crate) fn records_with_function_indices(
        &self,
    ) -> impl Iterator<Item = (usize, Function, Record<'a, E>)> + 'a {
        let mut functions = self.functions().enumerate();
        let mut current: Option<(usize, Function)> = None;
        let mut left: u64 = 0;
        self.records().map_while(move |r| {
            while left == 0 {
                let (i, f) = functions.next()?;
                left = f.record_count;
                current = Some((i, f));
            }
            left -= 1;
            current.map(|(i, f)| (i, f, r))
        })
    }
}

/// A record's header fields and counts, as [`RecordSource::head`] reads them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordHead {
    pub(crate) instruction_offset: u32,
    pub(crate) num_locations: u16,
    pub(crate) num_live_outs: u16,
    /// Where the next record starts in the records region.
    pub(crate) next: usize,
}

/// A table's records region, from which [`RecordSource::record`] makes a record whose
/// place and counts are known (an index keeps them) without reading its bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordSource<'a, E: Endian> {
    records: &'a [u8],
    records_start: usize,
    constants: &'a [[u8; CONSTANT_SIZE]],
    endian: E,
}

impl<'a, E: Endian> RecordSource<'a, E> {
    /// Asks for the records region's bytes a little past `at` to be brought into the cache
    /// (see [`prefetch_ahead`]).
    #[inline(always)]
    pub(crate) fn prefetch_ahead(&self, at: usize) {
        prefetch_ahead(self.records.get(at..).unwrap_or(&[]));
    }

    /// What an index needs of the record `at` bytes into the records region, read from its
    /// header and counts alone (its locations and live-outs are not read), with where the
    /// next record starts.
    #[inline(always)]
    pub(crate) fn head(&self, at: usize) -> Option<RecordHead> {
        let parts = Parts::split(self.records.get(at..)?, self.endian)?;
        let h = parts.header;
        Some(RecordHead {
            instruction_offset: self.endian.u32([h[8], h[9], h[10], h[11]]),
            num_locations: parts.num_locations,
            num_live_outs: parts.num_live_outs,
            next: self.records.len() - parts.rest.len(),
        })
    }

    /// The record `at` bytes into the records region, with these counts.
    #[inline(always)]
    pub(crate) fn record(&self, at: usize, n: u16, m: u16) -> Option<Record<'a, E>> {
        let parts = Parts::with_counts(self.records.get(at..)?, n, m)?;
        Some(Record::new(
            &parts,
            self.records_start + at,
            self.constants,
            self.endian,
        ))
    }

    /// The records region, which [`crate::pod::Slots`] checks records against.
    pub(crate) fn region(&self) -> &'a [u8] {
        self.records
    }

    /// The record [`crate::pod::Slots::record`] sliced out of this source's region.
    #[inline(always)]
    pub(crate) fn assemble(&self, p: crate::pod::Pieces<'a>) -> Record<'a, E> {
        Record {
            header: p.header,
            locations: p.locations,
            live_outs: p.live_outs,
            constants: self.constants,
            offset: self.records_start + p.at as usize,
            num_locations: p.num_locations,
            num_live_outs: p.num_live_outs,
            endian: self.endian,
        }
    }
}

/// Adapter that reports a known length for a filtered range of in-bounds indices.
trait CollectExact: Iterator + Sized {
    fn collect_exact(self, len: usize) -> ExactLen<Self> {
        ExactLen {
            inner: self,
            left: len,
        }
    }
}
impl<I: Iterator> CollectExact for I {}

/// An iterator with a length known in advance.
#[derive(Clone, Debug)]
pub struct ExactLen<I> {
    inner: I,
    left: usize,
}

impl<I: Iterator> Iterator for ExactLen<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        let x = self.inner.next()?;
        self.left = self.left.saturating_sub(1);
        Some(x)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}
impl<I: Iterator> ExactSizeIterator for ExactLen<I> {}

/// A record's parts, sliced out of the bytes that start with it, with the bounds checked
/// once here.
struct Parts<'a> {
    header: &'a [u8; RECORD_HEADER_SIZE],
    /// NumLocations 12-byte locations.
    locations: &'a [u8],
    /// NumLiveOuts 4-byte live-outs.
    live_outs: &'a [[u8; LIVE_OUT_SIZE]],
    num_locations: u16,
    num_live_outs: u16,
    /// What follows the record.
    rest: &'a [u8],
}

impl<'a> Parts<'a> {
    /// Slices the record at the start of `s`, reading its two counts. Records start 8-aligned
    /// relative to their table, so the padding after the locations is 4 bytes exactly when
    /// NumLocations is odd, and after the live-outs exactly when NumLiveOuts is even.
    #[inline(always)]
    fn split<E: Endian>(s: &'a [u8], e: E) -> Option<Self> {
        let (header, rest) = s.split_first_chunk::<RECORD_HEADER_SIZE>()?;
        let n = e.u16([header[14], header[15]]);
        let (locations, rest) = rest.split_at_checked(usize::from(n) * LOCATION_SIZE)?;
        let (middle, rest) = rest.split_at_checked(usize::from(n & 1) * 4 + 4)?;
        let &[.., c0, c1] = middle else {
            return None;
        };
        let m = e.u16([c0, c1]);
        // The live-outs and the padding after them; 4m | 4 is 4m + 4 for even m, else 4m.
        let (tail, rest) = rest.split_at_checked((usize::from(m) * LIVE_OUT_SIZE) | 4)?;
        Some(Parts {
            header,
            locations,
            live_outs: tail.as_chunks::<LIVE_OUT_SIZE>().0.get(..usize::from(m))?,
            num_locations: n,
            num_live_outs: m,
            rest,
        })
    }

    /// Slices the record at the start of `s` whose counts are known, without reading it.
    /// What follows the record is not looked for.
    #[inline(always)]
    fn with_counts(s: &'a [u8], n: u16, m: u16) -> Option<Self> {
        let (header, rest) = s.split_first_chunk::<RECORD_HEADER_SIZE>()?;
        let (locations, rest) = rest.split_at_checked(usize::from(n) * LOCATION_SIZE)?;
        let first = usize::from(n & 1) * 4 + 4;
        let live_outs = rest.get(first..first + usize::from(m) * LIVE_OUT_SIZE)?;
        let live_outs = live_outs.as_chunks::<LIVE_OUT_SIZE>().0;
        Some(Parts {
            header,
            locations,
            live_outs,
            num_locations: n,
            num_live_outs: m,
            rest: &[],
        })
    }
}

/// Skips up to `count` well-formed records from the start of `s`; returns what follows them
/// and how many were left when a record failed [`record_if_valid`] (0 if none did).
#[inline(never)]
fn skip_valid_records<E: Endian>(
    mut s: &[u8],
    mut count: u32,
    num_constants: u32,
    e: E,
    strict: bool,
) -> (&[u8], u32) {
    while count > 0 {
        prefetch_ahead(s);
        match record_if_valid(s, num_constants, e, strict) {
            Some(rest) => s = rest,
            None => break,
        }
        count -= 1;
    }
    (s, count)
}

/// Asks for the bytes a little ahead of `s` to be brought into the cache. Where each record
/// starts depends on the one before (its counts), so the walk over the records is a chain of
/// dependent loads; with the next records' lines already on their way, each link costs a
/// hit in the nearest cache instead of a wait on the next one out.
#[inline(always)]
fn prefetch_ahead(s: &[u8]) {
    // The pointer is computed with wrapping arithmetic and never dereferenced.
    crate::pod::prefetch(s.as_ptr().wrapping_add(PREFETCH_DISTANCE));
}

/// How far ahead [`prefetch_ahead`] looks: some 25 records of a typical table (about 75
/// bytes each), the best of 512, 1024 and 2048 on the benchmark's section.
const PREFETCH_DISTANCE: usize = 2048;

/// Validates the record at the start of `s` and returns what follows it, or `None` if
/// anything about it is wrong ([`check_record_slow`] then says what).
///
/// Every field check of the common case, a well-formed record, is folded into two flags
/// without branches; the only branches are four bounds checks and the loops over the
/// locations and live-outs. Reserved bytes are tested by their position,
/// whatever the byte order: the first eight bytes of a location are read as one
/// little-endian word whose bits 8-15 (byte 1) and 48-63 (bytes 6-7) must be zero.
#[inline(always)]
fn record_if_valid<E: Endian>(s: &[u8], num_constants: u32, e: E, strict: bool) -> Option<&[u8]> {
    const LOCATION_RESERVED: u64 = 0xffff_0000_0000_ff00;
    const LIVE_OUT_RESERVED: u32 = 0x00ff_0000;
    let (header, s) = s.split_first_chunk::<RECORD_HEADER_SIZE>()?;
    let n = usize::from(e.u16([header[14], header[15]]));
    let mut reserved = u64::from(header[12] | header[13]);
    let (locations, s) = s.split_at_checked(n * LOCATION_SIZE)?;
    // Reserved bits are ORed over all locations and masked once.
    let mut bad = false;
    let mut words = 0u64;
    let mut rest = locations;
    while let Some((l, next)) = rest.split_first_chunk::<LOCATION_SIZE>() {
        let [k, b1, b2, b3, b4, b5, b6, b7, i0, i1, i2, i3] = *l;
        words |= u64::from_le_bytes([k, b1, b2, b3, b4, b5, b6, b7]);
        let index = e.u32([i0, i1, i2, i3]);
        bad |= (k.wrapping_sub(1) >= 5) | ((k == 5) & (index >= num_constants));
        rest = next;
    }
    reserved |= words & LOCATION_RESERVED;
    // [4 bytes of padding when NumLocations is odd,] u16 padding, NumLiveOuts. With no
    // padding, the first four bytes are the last four and are masked out.
    let (middle, s) = s.split_at_checked((n & 1) * 4 + 4)?;
    let (first, last) = (middle.first_chunk::<4>()?, middle.last_chunk::<4>()?);
    let odd = 0u32.wrapping_sub((n & 1) as u32);
    reserved |= u64::from(u32::from_le_bytes(*first) & odd) | u64::from(last[0] | last[1]);
    let m = usize::from(e.u16([last[2], last[3]]));
    // The live-outs, then 4 bytes of padding when NumLiveOuts is even: the tail's last four
    // bytes are padding exactly then. Byte 2 of each 4 bytes is reserved either way.
    let (tail, s) = s.split_at_checked(m * LIVE_OUT_SIZE + (!m & 1) * 4)?;
    let even = ((m & 1) as u32).wrapping_sub(1);
    reserved |= u64::from(u32::from_le_bytes(*tail.last_chunk::<4>()?) & even);
    let mut live_outs = 0u32;
    for l in tail.as_chunks::<LIVE_OUT_SIZE>().0 {
        live_outs |= u32::from_le_bytes(*l);
    }
    reserved |= u64::from(live_outs & LIVE_OUT_RESERVED);
    (!bad && (!strict || reserved == 0)).then_some(s)
}

/// The record at `at` checked field by field, naming the first fault.
#[cold]
#[inline(never)]
fn check_record_slow<E: Endian>(
    c: &Checker<'_>,
    at: usize,
    table_start: usize,
    num_constants: u32,
    e: E,
) -> Result<usize> {
    let s = c.section;
    c.need(at, RECORD_HEADER_SIZE, Field::RecordHeader)?;
    c.zero(
        at + 12,
        u64::from(read_u16(s, at + 12, e)),
        Field::RecordHeader,
    )?;
    let num_locations = read_u16(s, at + 14, e);
    let locations = at + RECORD_HEADER_SIZE;
    c.count(
        at + 14,
        locations,
        u32::from(num_locations),
        LOCATION_SIZE,
        Field::NumLocations,
    )?;
    for i in 0..num_locations as usize {
        let l = locations + i * LOCATION_SIZE;
        let kind = s.get(l).copied().unwrap_or(0);
        let Some(kind) = LocationKind::from_u8(kind) else {
            return Err(Error::BadLocationKind {
                table: c.table,
                offset: l,
                kind,
            });
        };
        c.zero(
            l + 1,
            u64::from(s.get(l + 1).copied().unwrap_or(0)),
            Field::LocationReserved,
        )?;
        c.zero(
            l + 6,
            u64::from(read_u16(s, l + 6, e)),
            Field::LocationReserved,
        )?;
        if kind == LocationKind::ConstantIndex {
            let index = read_u32(s, l + 8, e);
            if index >= num_constants {
                return Err(Error::ConstantIndexOutOfRange {
                    table: c.table,
                    offset: l,
                    index,
                    num_constants,
                });
            }
        }
    }
    let locations_end = locations + usize::from(num_locations) * LOCATION_SIZE;
    let live_outs_header = table_start + align8(locations_end - table_start);
    c.need(
        locations_end,
        live_outs_header + 4 - locations_end,
        Field::NumLiveOuts,
    )?;
    if live_outs_header > locations_end {
        c.zero(
            locations_end,
            u64::from(read_u32(s, locations_end, e)),
            Field::Padding,
        )?;
    }
    c.zero(
        live_outs_header,
        u64::from(read_u16(s, live_outs_header, e)),
        Field::Padding,
    )?;
    let num_live_outs = read_u16(s, live_outs_header + 2, e);
    let live_outs = live_outs_header + 4;
    c.count(
        live_outs_header + 2,
        live_outs,
        u32::from(num_live_outs),
        LIVE_OUT_SIZE,
        Field::NumLiveOuts,
    )?;
    for i in 0..num_live_outs as usize {
        let l = live_outs + i * LIVE_OUT_SIZE;
        c.zero(
            l + 2,
            u64::from(s.get(l + 2).copied().unwrap_or(0)),
            Field::LiveOutReserved,
        )?;
    }
    let live_outs_end = live_outs + usize::from(num_live_outs) * LIVE_OUT_SIZE;
    let end = table_start + align8(live_outs_end - table_start);
    c.need(live_outs_end, end - live_outs_end, Field::Padding)?;
    if end > live_outs_end {
        c.zero(
            live_outs_end,
            u64::from(read_u32(s, live_outs_end, e)),
            Field::Padding,
        )?;
    }
    Ok(end)
}

/// One `StkMapRecord`: the live values at one call site or patch point.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a, E: Endian> {
    /// ID, instruction offset, flags, NumLocations.
    header: &'a [u8; RECORD_HEADER_SIZE],
    /// The 12-byte locations.
    locations: &'a [u8],
    /// The 4-byte live-outs.
    live_outs: &'a [[u8; LIVE_OUT_SIZE]],
    /// The table's `Constants` array, for ConstantIndex locations.
    constants: &'a [[u8; CONSTANT_SIZE]],
    offset: usize,
    num_locations: u16,
    num_live_outs: u16,
    endian: E,
}

impl<'a, E: Endian> Record<'a, E> {
    #[inline(always)]
    fn new(p: &Parts<'a>, offset: usize, constants: &'a [[u8; CONSTANT_SIZE]], endian: E) -> Self {
        Record {
            header: p.header,
            locations: p.locations,
            live_outs: p.live_outs,
            constants,
            offset,
            num_locations: p.num_locations,
            num_live_outs: p.num_live_outs,
            endian,
        }
    }

    /// Byte offset of the record from the start of the section.
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The ID the intrinsic was given (not unique: LLVM passes it through unchecked).
    #[inline]
    pub fn id(&self) -> u64 {
        let [b0, b1, b2, b3, b4, b5, b6, b7, ..] = *self.header;
        self.endian.u64([b0, b1, b2, b3, b4, b5, b6, b7])
    }

    /// Offset of the record's instruction from the start of its function. What it points at
    /// depends on the intrinsic (see the crate docs): after the preceding instruction for a
    /// stackmap, the start of the reserved bytes for a patchpoint, the return address for a
    /// statepoint.
    #[inline]
    pub fn instruction_offset(&self) -> u32 {
        let h = self.header;
        self.endian.u32([h[8], h[9], h[10], h[11]])
    }

    /// The reserved record flags (LLVM writes 0).
    pub fn flags(&self) -> u16 {
        self.endian.u16([self.header[12], self.header[13]])
    }

    /// `NumLocations`.
    #[inline]
    pub fn num_locations(&self) -> u16 {
        self.num_locations
    }

    /// The `i`th location.
    #[inline]
    pub fn location(&self, i: usize) -> Option<Location> {
        let l = self
            .locations
            .get(i.checked_mul(LOCATION_SIZE)?..)?
            .first_chunk::<LOCATION_SIZE>()?;
        Some(decode_location(l, self.constants, self.endian))
    }

    /// The locations in order.
    #[inline]
    pub fn locations(&self) -> Locations<'a, E> {
        Locations {
            bytes: self.locations,
            constants: self.constants,
            endian: self.endian,
        }
    }

    /// `NumLiveOuts`.
    #[inline]
    pub fn num_live_outs(&self) -> u16 {
        self.num_live_outs
    }

    /// The live-out registers in order.
    #[inline]
    pub fn live_outs(&self) -> impl ExactSizeIterator<Item = LiveOut> + 'a {
        let e = self.endian;
        self.live_outs
            .iter()
            .map(move |&[r0, r1, _, size]| LiveOut {
                dwarf_reg: e.u16([r0, r1]),
                size,
            })
    }

    /// Size of the record in bytes, padding included.
    #[inline]
    pub fn len(&self) -> usize {
        let n = usize::from(self.num_locations);
        let m = usize::from(self.num_live_outs);
        align8(align8(RECORD_HEADER_SIZE + n * LOCATION_SIZE) + 4 + m * LIVE_OUT_SIZE)
    }

    /// Always false for a record of a validated table: a record has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Decodes one 12-byte location; a ConstantIndex names its constant (validated to exist).
#[inline(always)]
fn decode_location<E: Endian>(
    l: &[u8; LOCATION_SIZE],
    constants: &[[u8; CONSTANT_SIZE]],
    e: E,
) -> Location {
    let [kind, _, s0, s1, r0, r1, _, _, o0, o1, o2, o3] = *l;
    let size = e.u16([s0, s1]);
    let dwarf_reg = e.u16([r0, r1]);
    let raw = e.u32([o0, o1, o2, o3]);
    match kind {
        1 => Location::Register { dwarf_reg, size },
        2 => Location::Direct {
            dwarf_reg,
            offset: raw as i32,
            size,
        },
        3 => Location::Indirect {
            dwarf_reg,
            offset: raw as i32,
            size,
        },
        4 => Location::Constant {
            value: raw as i32,
            size,
        },
        5 => Location::ConstantIndex {
            index: raw,
            value: constants.get(raw as usize).map_or(0, |c| e.u64(*c)),
            size,
        },
        // The parser admits no other kind. Naming kind 1 above and answering something else
        // here lets the compiler dispatch on the kind with one jump table (its bounds check
        // always goes the same way) instead of a second data-dependent branch.
        _ => Location::Register {
            dwarf_reg: 0,
            size: 0,
        },
    }
}

/// Iterator over a record's locations.
#[derive(Clone, Debug)]
pub struct Locations<'a, E: Endian> {
    /// The locations not yet visited, 12 bytes each.
    bytes: &'a [u8],
    constants: &'a [[u8; CONSTANT_SIZE]],
    endian: E,
}

impl<E: Endian> Iterator for Locations<'_, E> {
    type Item = Location;
    #[inline]
    fn next(&mut self) -> Option<Location> {
        let (l, rest) = self.bytes.split_first_chunk::<LOCATION_SIZE>()?;
        self.bytes = rest;
        Some(decode_location(l, self.constants, self.endian))
    }
    #[inline]
    fn nth(&mut self, n: usize) -> Option<Location> {
        let skip = n.saturating_mul(LOCATION_SIZE);
        self.bytes = self.bytes.get(skip..).unwrap_or(&[]);
        self.next()
    }
    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.bytes.len() / LOCATION_SIZE;
        (n, Some(n))
    }
}

impl<E: Endian> ExactSizeIterator for Locations<'_, E> {}

impl<E: Endian> DoubleEndedIterator for Locations<'_, E> {
    #[inline]
    fn next_back(&mut self) -> Option<Location> {
        let (rest, l) = self.bytes.split_last_chunk::<LOCATION_SIZE>()?;
        self.bytes = rest;
        Some(decode_location(l, self.constants, self.endian))
    }
}

/// Iterator over the records of a table.
#[derive(Clone, Debug)]
pub struct Records<'a, E: Endian> {
    /// The bytes from the next record to the end of the table.
    rest: &'a [u8],
    /// Section offset of `rest`.
    offset: usize,
    left: u32,
    constants: &'a [[u8; CONSTANT_SIZE]],
    endian: E,
}

impl<'a, E: Endian> Iterator for Records<'a, E> {
    type Item = Record<'a, E>;
    #[inline]
    fn next(&mut self) -> Option<Record<'a, E>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        prefetch_ahead(self.rest);
        // Never `None` for a validated table; if it were, the iteration would just end.
        let Some(p) = Parts::split(self.rest, self.endian) else {
            self.left = 0;
            return None;
        };
        let r = Record::new(&p, self.offset, self.constants, self.endian);
        self.offset += self.rest.len() - p.rest.len();
        self.rest = p.rest;
        Some(r)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl<E: Endian> ExactSizeIterator for Records<'_, E> {}

/// Iterator over the tables of a section, back to back from its start. It stops after the
/// last table or after the first error.
#[derive(Clone, Debug)]
pub struct Tables<'a, E: Endian> {
    section: &'a [u8],
    at: usize,
    number: usize,
    endian: E,
    options: ParseOptions,
    done: bool,
}

impl<'a, E: Endian> Tables<'a, E> {
    /// Tables of `section`, read in byte order `endian`.
    pub fn new(section: &'a [u8], endian: E, options: ParseOptions) -> Self {
        Tables {
            section,
            at: 0,
            number: 0,
            endian,
            options,
            done: false,
        }
    }
}

impl<'a, E: Endian> Iterator for Tables<'a, E> {
    type Item = Result<Table<'a, E>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.at >= self.section.len() {
            self.done = true;
            return (self.number == 0).then_some(Err(Error::EmptySection));
        }
        match Table::parse(
            self.section,
            self.at,
            self.number,
            self.endian,
            self.options,
        ) {
            Ok(t) => {
                self.at = t.end;
                self.number += 1;
                Some(Ok(t))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Parses every table of a section.
pub fn parse_section<E: Endian>(
    section: &[u8],
    endian: E,
    options: ParseOptions,
) -> Result<alloc::vec::Vec<Table<'_, E>>> {
    Tables::new(section, endian, options).collect()
}

#[cfg(test)]
mod tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use super::*;
    use crate::endian::{BigEndian, LittleEndian, RunTimeEndian};

    /// Encodes one table; `big` picks the byte order. Each record is
    /// (id, offset, locations as (kind, size, reg, offset), live-outs as (reg, size)).
    #[allow(clippy::type_complexity)]
    fn table(
        big: bool,
        functions: &[(u64, u64, u64)],
        constants: &[u64],
        records: &[(u64, u32, Vec<(u8, u16, u16, i32)>, Vec<(u16, u8)>)],
    ) -> Vec<u8> {
        let mut s = Vec::new();
        let u16b = |s: &mut Vec<u8>, v: u16| {
            s.extend(if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        let u32b = |s: &mut Vec<u8>, v: u32| {
            s.extend(if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        let u64b = |s: &mut Vec<u8>, v: u64| {
            s.extend(if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        s.extend([3, 0, 0, 0]);
        u32b(&mut s, functions.len() as u32);
        u32b(&mut s, constants.len() as u32);
        u32b(&mut s, records.len() as u32);
        for &(a, st, n) in functions {
            u64b(&mut s, a);
            u64b(&mut s, st);
            u64b(&mut s, n);
        }
        for &c in constants {
            u64b(&mut s, c);
        }
        for (id, off, locs, los) in records {
            u64b(&mut s, *id);
            u32b(&mut s, *off);
            u16b(&mut s, 0);
            u16b(&mut s, locs.len() as u16);
            for &(k, size, reg, o) in locs {
                s.extend([k, 0]);
                u16b(&mut s, size);
                u16b(&mut s, reg);
                u16b(&mut s, 0);
                u32b(&mut s, o as u32);
            }
            while s.len() % 8 != 0 {
                s.push(0);
            }
            u16b(&mut s, 0);
            u16b(&mut s, los.len() as u16);
            for &(reg, size) in los {
                u16b(&mut s, reg);
                s.extend([0, size]);
            }
            while s.len() % 8 != 0 {
                s.push(0);
            }
        }
        s
    }

    fn sample(big: bool) -> Vec<u8> {
        table(
            big,
            &[(0x1000, 32, 2), (0x2000, u64::MAX, 1)],
            &[0x1_0000_0000, 7],
            &[
                (
                    1,
                    4,
                    vec![(1, 8, 3, 0), (2, 8, 7, 16), (3, 4, 6, -8)],
                    vec![(0, 8)],
                ),
                (
                    1,
                    9,
                    vec![(4, 8, 0, -1), (5, 8, 0, 1), (5, 8, 0, 0)],
                    vec![],
                ),
                (2, 4, vec![], vec![(3, 8), (12, 8), (13, 8)]),
            ],
        )
    }

    fn strict() -> ParseOptions {
        ParseOptions::default()
    }

    fn lenient() -> ParseOptions {
        ParseOptions {
            strictness: Strictness::Lenient,
        }
    }

    fn check_sample<E: Endian>(data: &[u8], e: E) {
        let t = Table::parse(data, 0, 0, e, strict()).expect("valid");
        assert_eq!(t.len(), data.len());
        assert_eq!(
            t.functions().collect::<Vec<_>>()[1].static_stack_size(),
            None
        );
        assert_eq!(t.constants().collect::<Vec<_>>(), [0x1_0000_0000, 7]);
        let r: Vec<_> = t.records().collect();
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[0].locations().collect::<Vec<_>>(),
            [
                Location::Register {
                    dwarf_reg: 3,
                    size: 8
                },
                Location::Direct {
                    dwarf_reg: 7,
                    offset: 16,
                    size: 8
                },
                Location::Indirect {
                    dwarf_reg: 6,
                    offset: -8,
                    size: 4
                },
            ]
        );
        assert_eq!(
            r[0].live_outs().collect::<Vec<_>>(),
            [LiveOut {
                dwarf_reg: 0,
                size: 8
            }]
        );
        assert_eq!(
            r[1].locations().map(|l| l.constant()).collect::<Vec<_>>(),
            [Some(u64::MAX), Some(7), Some(0x1_0000_0000)]
        );
        assert_eq!(r[2].num_locations(), 0);
        assert_eq!(
            r[2].live_outs().map(|l| l.dwarf_reg).collect::<Vec<_>>(),
            [3, 12, 13]
        );
        let owners: Vec<u64> = t.records_with_functions().map(|(f, _)| f.address).collect();
        assert_eq!(owners, [0x1000, 0x1000, 0x2000]);
        assert_eq!(t.record_at(r[2].offset()).map(|x| x.id()), Some(2));
    }

    #[test]
    fn both_byte_orders() {
        check_sample(&sample(false), LittleEndian);
        check_sample(&sample(false), RunTimeEndian::Little);
        check_sample(&sample(true), BigEndian);
        check_sample(&sample(true), RunTimeEndian::Big);
    }

    #[test]
    fn tables_back_to_back() {
        let mut s = sample(false);
        let first = s.len();
        s.extend(table(
            false,
            &[(0x3000, 8, 1)],
            &[],
            &[(9, 0, vec![(1, 8, 0, 0)], vec![])],
        ));
        let tables = parse_section(&s, LittleEndian, strict()).expect("valid");
        assert_eq!(tables.len(), 2);
        assert_eq!(tables[1].offset(), first);
        assert_eq!(tables[1].number(), 1);
        assert_eq!(tables[1].records().next().map(|r| r.id()), Some(9));
    }

    #[test]
    fn empty_section() {
        assert_eq!(
            parse_section(&[], LittleEndian, strict()).err(),
            Some(Error::EmptySection)
        );
    }

    #[test]
    fn every_truncation_is_an_error_naming_an_offset_inside() {
        let s = sample(false);
        for len in 1..s.len() {
            let e = parse_section(&s[..len], LittleEndian, lenient()).expect_err("truncated");
            let at = e.offset().expect("offset");
            assert!(at <= len, "len {len}: {e}");
        }
    }

    #[test]
    fn wrong_version() {
        let mut s = sample(false);
        s[0] = 2;
        assert_eq!(
            parse_section(&s, LittleEndian, strict()).err(),
            Some(Error::UnsupportedVersion {
                table: 0,
                offset: 0,
                version: 2
            })
        );
    }

    #[test]
    fn counts_larger_than_the_section() {
        for (at, field) in [
            (4, Field::NumFunctions),
            (8, Field::NumConstants),
            (12, Field::NumRecords),
        ] {
            let mut s = sample(false);
            s[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            match parse_section(&s, LittleEndian, lenient()) {
                Err(Error::CountTooLarge {
                    offset,
                    field: f,
                    count,
                    ..
                }) => {
                    assert_eq!((offset, f, count), (at, field, u64::from(u32::MAX)));
                }
                other => panic!("{field}: {other:?}"),
            }
        }
        // NumLocations of the first record.
        let mut s = sample(false);
        let rec = 16 + 2 * 24 + 2 * 8;
        s[rec + 14..rec + 16].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(matches!(
            parse_section(&s, LittleEndian, lenient()),
            Err(Error::CountTooLarge {
                field: Field::NumLocations,
                ..
            })
        ));
    }

    #[test]
    fn bad_location_kind_and_constant_index() {
        let rec = 16 + 2 * 24 + 2 * 8;
        let mut s = sample(false);
        s[rec + 16] = 9;
        assert_eq!(
            parse_section(&s, LittleEndian, strict()).err(),
            Some(Error::BadLocationKind {
                table: 0,
                offset: rec + 16,
                kind: 9
            })
        );
        let s = table(
            false,
            &[(0, 0, 1)],
            &[1],
            &[(1, 0, vec![(5, 8, 0, 1)], vec![])],
        );
        assert_eq!(
            parse_section(&s, LittleEndian, strict()).err(),
            Some(Error::ConstantIndexOutOfRange {
                table: 0,
                offset: 16 + 24 + 8 + 16,
                index: 1,
                num_constants: 1
            })
        );
    }

    #[test]
    fn reserved_fields_strict_and_lenient() {
        let rec = 16 + 2 * 24 + 2 * 8;
        for at in [1, 2, rec + 12, rec + 17, rec + 22] {
            let mut s = sample(false);
            s[at] = 1;
            assert!(
                matches!(
                    parse_section(&s, LittleEndian, strict()),
                    Err(Error::NonZeroReserved { .. })
                ),
                "byte {at}"
            );
            assert!(
                parse_section(&s, LittleEndian, lenient()).is_ok(),
                "byte {at}"
            );
        }
        // Record counts that do not add up.
        let mut s = sample(false);
        s[16 + 16] = 5;
        assert!(matches!(
            parse_section(&s, LittleEndian, strict()),
            Err(Error::RecordCountMismatch {
                sum: 6,
                num_records: 3,
                ..
            })
        ));
        assert!(parse_section(&s, LittleEndian, lenient()).is_ok());
    }
}

/// The two record validators, [`record_if_valid`] (the fast path: branch-free flags, one
/// verdict) and [`check_record_slow`] (the exact path: field by field, naming the fault),
/// must accept and reject the same bytes and agree on where an accepted record ends; and a
/// table parsed through the fast path with its fallback must end, or fail with the same
/// error, as one whose records all go through the exact path.
#[cfg(all(test, feature = "std"))]
mod validator_props {
    use alloc::vec;
    use alloc::vec::Vec;

    use proptest::prelude::*;

    use super::*;
    use crate::endian::{BigEndian, LittleEndian};

    /// A record as LLVM writes it: `(kind, size, register, offset)` locations and
    /// `(register, size)` live-outs, reserved fields zero, aligned as if it began 8-aligned.
    fn record(
        big: bool,
        id: u64,
        offset: u32,
        locations: &[(u8, u16, u16, u32)],
        live_outs: &[(u16, u8)],
    ) -> Vec<u8> {
        let mut s = Vec::new();
        let put = |s: &mut Vec<u8>, le: &[u8]| {
            if big {
                s.extend(le.iter().rev());
            } else {
                s.extend(le);
            }
        };
        put(&mut s, &id.to_le_bytes());
        put(&mut s, &offset.to_le_bytes());
        put(&mut s, &0u16.to_le_bytes());
        put(&mut s, &(locations.len() as u16).to_le_bytes());
        for &(kind, size, reg, off) in locations {
            s.extend([kind, 0]);
            put(&mut s, &size.to_le_bytes());
            put(&mut s, &reg.to_le_bytes());
            s.extend([0, 0]);
            put(&mut s, &off.to_le_bytes());
        }
        s.resize(s.len().next_multiple_of(8), 0);
        s.extend([0, 0]);
        put(&mut s, &(live_outs.len() as u16).to_le_bytes());
        for &(reg, size) in live_outs {
            put(&mut s, &reg.to_le_bytes());
            s.extend([0, size]);
        }
        s.resize(s.len().next_multiple_of(8), 0);
        s
    }

    /// Kinds 1-5 mostly, now and then one that is not a kind; indices near the constants'
    /// count.
    fn location() -> impl Strategy<Value = (u8, u16, u16, u32)> {
        (
            prop_oneof![9 => 1u8..=5, 1 => any::<u8>()],
            prop_oneof![Just(8u16), any::<u16>()],
            0u16..40,
            prop_oneof![0u32..6, any::<u32>()],
        )
    }

    /// A few records, well-formed or nearly, back to back; then bytes overwritten or bits
    /// flipped (anywhere, the counts and reserved fields included), the end cut off or junk
    /// appended.
    #[allow(clippy::type_complexity)]
    fn records() -> impl Strategy<Value = (bool, Vec<u8>, usize)> {
        let one = (
            any::<u64>(),
            any::<u32>(),
            proptest::collection::vec(location(), 0..6),
            proptest::collection::vec((0u16..40, prop_oneof![Just(8u8), any::<u8>()]), 0..5),
        );
        (
            any::<bool>(),
            proptest::collection::vec(one, 1..4),
            proptest::collection::vec(
                (any::<prop::sample::Index>(), any::<u8>(), any::<bool>()),
                0..4,
            ),
            proptest::option::of(any::<prop::sample::Index>()),
            proptest::collection::vec(any::<u8>(), 0..12),
        )
            .prop_map(|(big, recs, damage, cut, junk)| {
                let mut s = Vec::new();
                for (id, offset, locations, live_outs) in &recs {
                    s.extend(record(big, *id, *offset, locations, live_outs));
                }
                let n = recs.len();
                // A byte overwritten, or one bit flipped (which reaches every reserved bit).
                for (at, byte, flip) in damage {
                    let i = at.index(s.len());
                    s[i] = if flip { s[i] ^ (1 << (byte & 7)) } else { byte };
                }
                if let Some(cut) = cut {
                    s.truncate(cut.index(s.len() + 1));
                }
                s.extend(junk);
                (big, s, n)
            })
    }

    /// Where the record at `at` ends by each validator (`None`: rejected).
    fn both<E: Endian>(
        section: &[u8],
        at: usize,
        table_start: usize,
        num_constants: u32,
        e: E,
        strict: bool,
    ) -> (Option<usize>, Option<usize>) {
        let fast = record_if_valid(section.get(at..).unwrap_or(&[]), num_constants, e, strict)
            .map(|rest| section.len() - rest.len());
        let c = Checker {
            section,
            table: 0,
            strict,
        };
        let exact = check_record_slow(&c, at, table_start, num_constants, e).ok();
        (fast, exact)
    }

    /// Walks the records from `at` while both validators accept them, asserting that they
    /// agree on each.
    fn agree<E: Endian>(
        section: &[u8],
        mut at: usize,
        table_start: usize,
        num_constants: u32,
        e: E,
        strict: bool,
    ) -> Result<(), TestCaseError> {
        loop {
            let (fast, exact) = both(section, at, table_start, num_constants, e, strict);
            prop_assert_eq!(fast, exact, "record at {} (strict: {})", at, strict);
            match fast {
                Some(end) if end > at => at = end,
                _ => return Ok(()),
            }
        }
    }

    /// One table at `start` whose records are `records` (NumRecords `n`): the header, then
    /// `functions` function entries whose counts add up to `n` and `constants` constants.
    fn table(big: bool, records: &[u8], n: u32, functions: u32, constants: u32) -> Vec<u8> {
        let mut s = vec![3, 0, 0, 0];
        let put = |s: &mut Vec<u8>, le: &[u8]| {
            if big {
                s.extend(le.iter().rev());
            } else {
                s.extend(le);
            }
        };
        for v in [functions, constants, n] {
            put(&mut s, &v.to_le_bytes());
        }
        for f in 0..functions {
            put(&mut s, &0x1000u64.to_le_bytes());
            put(&mut s, &16u64.to_le_bytes());
            let count = if f == 0 { u64::from(n) } else { 0 };
            put(&mut s, &count.to_le_bytes());
        }
        for c in 0..u64::from(constants) {
            put(&mut s, &c.to_le_bytes());
        }
        s.extend(records);
        s
    }

    /// [`Table::parse`] with every record checked by [`check_record_slow`] alone.
    fn parse_exact<E: Endian>(
        section: &[u8],
        start: usize,
        records_start: usize,
        n: u32,
        num_constants: u32,
        e: E,
        strict: bool,
    ) -> Result<usize> {
        let c = Checker {
            section,
            table: 0,
            strict,
        };
        c.count(
            start + 12,
            records_start,
            n,
            MIN_RECORD_SIZE,
            Field::NumRecords,
        )?;
        let mut at = records_start;
        for _ in 0..n {
            at = check_record_slow(&c, at, start, num_constants, e)?;
        }
        Ok(at)
    }

    fn tables_agree<E: Endian>(
        e: E,
        big: bool,
        records: &[u8],
        n: u32,
        lead: usize,
        constants: u32,
        strict: bool,
    ) -> Result<(), TestCaseError> {
        // One function in a strict table (its count must add up), none in a lenient one.
        let functions = u32::from(strict);
        let mut section = vec![0; lead];
        section.extend(table(big, records, n, functions, constants));
        let records_start = lead + 16 + 24 * functions as usize + 8 * constants as usize;
        let options = ParseOptions {
            strictness: if strict {
                Strictness::Strict
            } else {
                Strictness::Lenient
            },
        };
        let parsed = Table::parse(&section, lead, 0, e, options).map(|t| t.end);
        let exact = parse_exact(&section, lead, records_start, n, constants, e, strict);
        prop_assert_eq!(parsed, exact);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(2048),
            ..ProptestConfig::default()
        })]

        /// Record by record: near-valid records (and what follows them, walked on while
        /// both accept), at any 8-aligned place after a table start anywhere, in both byte
        /// orders, strict and lenient.
        #[test]
        fn fast_and_exact_validators_agree_on_records(
            (big, bytes, _n) in records(),
            table_start in 0usize..24,
            slot in 0usize..4,
            num_constants in prop_oneof![0u32..6, any::<u32>()],
        ) {
            let at = table_start + 16 + 8 * slot;
            let mut section = vec![0xa5; at];
            section.extend(&bytes);
            for strict in [true, false] {
                if big {
                    agree(&section, at, table_start, num_constants, BigEndian, strict)?;
                } else {
                    agree(&section, at, table_start, num_constants, LittleEndian, strict)?;
                }
            }
        }

        /// Arbitrary bytes as a record.
        #[test]
        fn fast_and_exact_validators_agree_on_arbitrary_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..96),
            num_constants in 0u32..4,
        ) {
            for strict in [true, false] {
                agree(&bytes, 0, 0, num_constants, LittleEndian, strict)?;
                agree(&bytes, 0, 0, num_constants, BigEndian, strict)?;
            }
        }

        /// Whole tables: `Table::parse` (fast path, exact path only for a record the fast
        /// one rejects) ends where, or fails as, checking every record exactly does.
        #[test]
        fn table_parse_matches_the_exact_path(
            (big, bytes, n) in records(),
            lead in 0usize..3,
            constants in 0u32..4,
            extra in 0u32..2,
        ) {
            let lead = lead * 8;
            let n = n as u32 + extra;
            for strict in [true, false] {
                if big {
                    tables_agree(BigEndian, big, &bytes, n, lead, constants, strict)?;
                } else {
                    tables_agree(LittleEndian, big, &bytes, n, lead, constants, strict)?;
                }
            }
        }
    }
}
