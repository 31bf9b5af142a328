//! Property tests for the `.llvm_stackmaps` parser, index and statepoint view.
//!
//! A Rust model of a section (tables of functions, constants and records with every
//! location kind and live-outs) is generated, encoded in either byte order (spec 000,
//! "Stack Map Format"), and then:
//! - parsed back: strict parsing succeeds and the parsed tables equal the model field by
//!   field, the tables and records tile the section exactly, and the index finds every
//!   record by address and by ID;
//! - damaged (truncated at every length, bytes flipped, a count overwritten with a huge
//!   value): parsing never panics, errors point inside the section, and truncation is
//!   always detected unless it falls exactly on a table boundary.
//!
//! Arbitrary bytes are also fed to the parser (then everything it accepts is walked) and to
//! `object::find_section`, which must never panic.
//!
//! `PROPTEST_CASES` scales every case count (the defaults keep the file well under 30 s in
//! a debug build on two cores).

use locus_stackmap::object::find_section;
use locus_stackmap::{
    parse_section, BigEndian, Endian, Error, Field, IndexOptions, IndexedRecord, LittleEndian,
    Location, ParseOptions, RunTimeEndian, StackMapIndex, StatepointRecord, Strictness, Table,
    Tables,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

/// One location as the generator decides it; `ConstantIndex` holds a valid index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MLoc {
    Register { reg: u16, size: u16 },
    Direct { reg: u16, offset: i32, size: u16 },
    Indirect { reg: u16, offset: i32, size: u16 },
    Constant { value: i32, size: u16 },
    ConstantIndex { index: u32, size: u16 },
}

impl MLoc {
    /// (kind byte, size, DWARF register, offset field) as written in the section.
    fn fields(self) -> (u8, u16, u16, u32) {
        match self {
            MLoc::Register { reg, size } => (1, size, reg, 0),
            MLoc::Direct { reg, offset, size } => (2, size, reg, offset as u32),
            MLoc::Indirect { reg, offset, size } => (3, size, reg, offset as u32),
            MLoc::Constant { value, size } => (4, size, 0, value as u32),
            MLoc::ConstantIndex { index, size } => (5, size, 0, index),
        }
    }

    /// The location the parser must produce.
    fn expected(self, constants: &[u64]) -> Location {
        match self {
            MLoc::Register { reg, size } => Location::Register {
                dwarf_reg: reg,
                size,
            },
            MLoc::Direct { reg, offset, size } => Location::Direct {
                dwarf_reg: reg,
                offset,
                size,
            },
            MLoc::Indirect { reg, offset, size } => Location::Indirect {
                dwarf_reg: reg,
                offset,
                size,
            },
            MLoc::Constant { value, size } => Location::Constant { value, size },
            MLoc::ConstantIndex { index, size } => Location::ConstantIndex {
                index,
                value: constants.get(index as usize).copied().unwrap_or(u64::MAX),
                size,
            },
        }
    }

    /// The value of a constant location.
    fn constant(self, constants: &[u64]) -> Option<u64> {
        match self {
            MLoc::Constant { value, .. } => Some(value as i64 as u64),
            MLoc::ConstantIndex { index, .. } => constants.get(index as usize).copied(),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MLiveOut {
    reg: u16,
    size: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct MRecord {
    id: u64,
    offset: u32,
    locations: Vec<MLoc>,
    live_outs: Vec<MLiveOut>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct MFunction {
    address: u64,
    stack_size: u64,
    records: Vec<MRecord>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct MTable {
    functions: Vec<MFunction>,
    constants: Vec<u64>,
}

impl MTable {
    fn records(&self) -> impl Iterator<Item = (&MFunction, &MRecord)> {
        self.functions
            .iter()
            .flat_map(|f| f.records.iter().map(move |r| (f, r)))
    }

    fn num_records(&self) -> usize {
        self.functions.iter().map(|f| f.records.len()).sum()
    }
}

/// What the statepoint view must make of a record (the lowering's layout: three constants
/// (calling convention, flags, N), N deopt locations, then (base, derived) pairs).
fn model_statepoint(r: &MRecord, constants: &[u64]) -> Option<(u64, u64, usize, usize)> {
    let cc = r.locations.first()?.constant(constants)?;
    let flags = r.locations.get(1)?.constant(constants)?;
    let n = r.locations.get(2)?.constant(constants)?;
    let n = usize::try_from(n).ok()?;
    let after = n.checked_add(3)?;
    let rest = r.locations.len().checked_sub(after)?;
    (rest % 2 == 0).then_some((cc, flags, n, rest / 2))
}

// ---------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------

/// Upper bounds for the generated model.
#[derive(Clone, Copy, Debug)]
struct Limits {
    tables: usize,
    functions: usize,
    records: usize,
    locations: usize,
    live_outs: usize,
    constants: usize,
}

/// For the round-trip properties.
const LARGE: Limits = Limits {
    tables: 3,
    functions: 4,
    records: 4,
    locations: 9,
    live_outs: 5,
    constants: 5,
};
/// For the mutation properties, which parse the section once per byte.
const SMALL: Limits = Limits {
    tables: 3,
    functions: 2,
    records: 2,
    locations: 5,
    live_outs: 3,
    constants: 3,
};

/// A size field: mostly the usual power-of-two sizes, sometimes anything.
fn size() -> impl Strategy<Value = u16> {
    prop_oneof![4 => prop::sample::select(vec![1u16, 2, 4, 8, 16, 32]), 1 => any::<u16>()]
}

/// A DWARF register: mostly small numbers, sometimes anything.
fn reg() -> impl Strategy<Value = u16> {
    prop_oneof![3 => 0u16..32, 1 => any::<u16>()]
}

/// A location; a ConstantIndex one holds a seed that [`fix_indices`] turns into an index.
fn location() -> impl Strategy<Value = MLoc> {
    prop_oneof![
        (reg(), size()).prop_map(|(reg, size)| MLoc::Register { reg, size }),
        (reg(), any::<i32>(), size()).prop_map(|(reg, offset, size)| MLoc::Direct {
            reg,
            offset,
            size
        }),
        (reg(), any::<i32>(), size()).prop_map(|(reg, offset, size)| MLoc::Indirect {
            reg,
            offset,
            size
        }),
        (any::<i32>(), size()).prop_map(|(value, size)| MLoc::Constant { value, size }),
        (any::<u32>(), size()).prop_map(|(index, size)| MLoc::ConstantIndex { index, size }),
    ]
}

/// Locations laid out as a `gc.statepoint` record: calling convention, flags, N, N deopt
/// values, pairs (and sometimes one location too many, to be rejected).
fn statepoint_locations(l: Limits) -> impl Strategy<Value = Vec<MLoc>> {
    (
        0i32..20,
        0i32..4,
        prop::collection::vec(location(), 0..=l.locations / 2),
        prop::collection::vec((location(), location()), 0..=l.locations / 2),
        prop::option::weighted(0.2, location()),
    )
        .prop_map(|(cc, flags, deopt, pairs, extra)| {
            let mut v = vec![
                MLoc::Constant { value: cc, size: 8 },
                MLoc::Constant {
                    value: flags,
                    size: 8,
                },
                MLoc::Constant {
                    value: deopt.len() as i32,
                    size: 8,
                },
            ];
            v.extend(deopt);
            for (base, derived) in pairs {
                v.push(base);
                v.push(derived);
            }
            v.extend(extra);
            v
        })
}

fn record(l: Limits) -> impl Strategy<Value = MRecord> {
    (
        // Small IDs collide, as LLVM allows.
        prop_oneof![0u64..4, any::<u64>()],
        prop_oneof![0u32..64, any::<u32>()],
        prop_oneof![
            3 => prop::collection::vec(location(), 0..=l.locations),
            1 => statepoint_locations(l),
        ],
        prop::collection::vec(
            (reg(), any::<u8>()).prop_map(|(reg, size)| MLiveOut { reg, size }),
            0..=l.live_outs,
        ),
    )
        .prop_map(|(id, offset, locations, live_outs)| MRecord {
            id,
            offset,
            locations,
            live_outs,
        })
}

fn function(l: Limits) -> impl Strategy<Value = MFunction> {
    (
        prop_oneof![Just(0u64), 0x1000u64..0x2000, any::<u64>()],
        prop_oneof![0u64..256, Just(u64::MAX)],
        prop::collection::vec(record(l), 0..=l.records),
    )
        .prop_map(|(address, stack_size, records)| MFunction {
            address,
            stack_size,
            records,
        })
}

/// Makes every ConstantIndex location name an existing constant (or become a Constant when
/// the table has none).
fn fix_indices(mut t: MTable) -> MTable {
    let n = t.constants.len() as u32;
    for f in &mut t.functions {
        for r in &mut f.records {
            for loc in &mut r.locations {
                if let MLoc::ConstantIndex { index, size } = *loc {
                    *loc = if n == 0 {
                        MLoc::Constant {
                            value: index as i32,
                            size,
                        }
                    } else {
                        MLoc::ConstantIndex {
                            index: index % n,
                            size,
                        }
                    };
                }
            }
        }
    }
    t
}

fn table(l: Limits) -> impl Strategy<Value = MTable> {
    (
        prop::collection::vec(function(l), 0..=l.functions),
        prop::collection::vec(any::<u64>(), 0..=l.constants),
    )
        .prop_map(|(functions, constants)| {
            fix_indices(MTable {
                functions,
                constants,
            })
        })
}

fn section(l: Limits) -> impl Strategy<Value = Vec<MTable>> {
    prop::collection::vec(table(l), 1..=l.tables)
}

// ---------------------------------------------------------------------------------------
// The encoder
// ---------------------------------------------------------------------------------------

/// Where the encoder put things, for the mutation properties.
#[derive(Clone, Debug, Default)]
struct Layout {
    /// (start, end) of each table.
    tables: Vec<(usize, usize)>,
    /// Every count field: (table number, offset, width in bytes, what it counts).
    counts: Vec<(usize, usize, usize, Field)>,
    /// Every reserved field and padding: (table number, offset, width in bytes, field).
    reserved: Vec<(usize, usize, usize, Field)>,
    /// Every location: (table number, offset, NumConstants of its table).
    locations: Vec<(usize, usize, u32)>,
}

struct Writer {
    buf: Vec<u8>,
    big: bool,
}

impl Writer {
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn u16(&mut self, v: u16) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn u32(&mut self, v: u32) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn u64(&mut self, v: u64) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    /// A reserved field of `width` bytes, zero as LLVM writes it; its place goes to `layout`.
    fn reserved(&mut self, layout: &mut Layout, table: usize, width: usize, field: Field) {
        layout.reserved.push((table, self.buf.len(), width, field));
        self.buf.extend(std::iter::repeat_n(0, width));
    }
    /// The spec's "uint32 : Padding (only if required to align to 8 byte)".
    fn align8(&mut self, layout: &mut Layout, table: usize, table_start: usize) {
        if (self.buf.len() - table_start) & 7 != 0 {
            self.reserved(layout, table, 4, Field::Padding);
        }
    }
}

/// Encodes the tables back to back, as a linker concatenates them.
fn encode(tables: &[MTable], big: bool) -> (Vec<u8>, Layout) {
    let mut w = Writer {
        buf: Vec::new(),
        big,
    };
    let mut layout = Layout::default();
    for (ti, t) in tables.iter().enumerate() {
        let start = w.buf.len();
        w.u8(3);
        w.reserved(&mut layout, ti, 1, Field::HeaderReserved);
        w.reserved(&mut layout, ti, 2, Field::HeaderReserved);
        layout.counts.push((ti, start + 4, 4, Field::NumFunctions));
        w.u32(t.functions.len() as u32);
        layout.counts.push((ti, start + 8, 4, Field::NumConstants));
        w.u32(t.constants.len() as u32);
        layout.counts.push((ti, start + 12, 4, Field::NumRecords));
        w.u32(t.num_records() as u32);
        for f in &t.functions {
            w.u64(f.address);
            w.u64(f.stack_size);
            layout.counts.push((ti, w.buf.len(), 8, Field::Function));
            w.u64(f.records.len() as u64);
        }
        for &c in &t.constants {
            w.u64(c);
        }
        for (_, r) in t.records() {
            w.u64(r.id);
            w.u32(r.offset);
            w.reserved(&mut layout, ti, 2, Field::RecordHeader);
            layout
                .counts
                .push((ti, w.buf.len(), 2, Field::NumLocations));
            w.u16(r.locations.len() as u16);
            for loc in &r.locations {
                let (kind, size, reg, raw) = loc.fields();
                layout
                    .locations
                    .push((ti, w.buf.len(), t.constants.len() as u32));
                w.u8(kind);
                w.reserved(&mut layout, ti, 1, Field::LocationReserved);
                w.u16(size);
                w.u16(reg);
                w.reserved(&mut layout, ti, 2, Field::LocationReserved);
                w.u32(raw);
            }
            w.align8(&mut layout, ti, start);
            w.reserved(&mut layout, ti, 2, Field::Padding);
            layout.counts.push((ti, w.buf.len(), 2, Field::NumLiveOuts));
            w.u16(r.live_outs.len() as u16);
            for lo in &r.live_outs {
                w.u16(lo.reg);
                w.reserved(&mut layout, ti, 1, Field::LiveOutReserved);
                w.u8(lo.size);
            }
            w.align8(&mut layout, ti, start);
        }
        layout.tables.push((start, w.buf.len()));
    }
    (w.buf, layout)
}

// ---------------------------------------------------------------------------------------
// Checks shared by the properties
// ---------------------------------------------------------------------------------------

fn strict() -> ParseOptions {
    ParseOptions {
        strictness: Strictness::Strict,
    }
}

fn lenient() -> ParseOptions {
    ParseOptions {
        strictness: Strictness::Lenient,
    }
}

/// The parsed tables equal the model, field by field, and tile the section.
fn check_equal<E: Endian>(
    parsed: &[Table<'_, E>],
    model: &[MTable],
    layout: &Layout,
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(parsed.len(), model.len());
    let mut expected_start = 0;
    for (ti, (t, m)) in parsed.iter().zip(model).enumerate() {
        // Tiling: each table starts where the previous ended, where the encoder put it.
        prop_assert_eq!(t.number(), ti);
        prop_assert_eq!(t.offset(), expected_start);
        prop_assert_eq!((t.offset(), t.offset() + t.len()), layout.tables[ti]);
        prop_assert!(!t.is_empty());
        prop_assert_eq!(t.bytes(), &bytes[t.offset()..t.offset() + t.len()]);
        expected_start = t.offset() + t.len();

        prop_assert_eq!(t.version(), 3);
        prop_assert_eq!(t.num_functions() as usize, m.functions.len());
        prop_assert_eq!(t.num_constants() as usize, m.constants.len());
        prop_assert_eq!(t.num_records() as usize, m.num_records());

        // Functions.
        prop_assert_eq!(t.functions().len(), m.functions.len());
        for (i, (f, mf)) in t.functions().zip(&m.functions).enumerate() {
            prop_assert_eq!(f.address, mf.address);
            prop_assert_eq!(f.stack_size, mf.stack_size);
            prop_assert_eq!(f.record_count, mf.records.len() as u64);
            prop_assert_eq!(
                f.static_stack_size(),
                (mf.stack_size != u64::MAX).then_some(mf.stack_size)
            );
            prop_assert_eq!(t.function(i), Some(f));
        }
        prop_assert_eq!(t.function(m.functions.len()), None);

        // Constants.
        prop_assert_eq!(t.constants().collect::<Vec<_>>(), m.constants.clone());
        for (i, &c) in m.constants.iter().enumerate() {
            prop_assert_eq!(t.constant(i as u32), Some(c));
        }
        prop_assert_eq!(t.constant(m.constants.len() as u32), None);

        // Records, with the function each belongs to.
        prop_assert_eq!(t.records().len(), m.num_records());
        let with_functions: Vec<_> = t.records_with_functions().collect();
        prop_assert_eq!(with_functions.len(), m.num_records());
        let mut next_record = None;
        for ((r, (mf, mr)), (f, r2)) in t.records().zip(m.records()).zip(with_functions) {
            prop_assert_eq!(r.offset(), r2.offset());
            prop_assert_eq!(f.address, mf.address);
            prop_assert_eq!(f.record_count, mf.records.len() as u64);
            // Records tile the record area: each starts where the previous ended.
            if let Some(n) = next_record {
                prop_assert_eq!(r.offset(), n);
            }
            next_record = Some(r.offset() + r.len());
            prop_assert_eq!(r.len() % 8, 0);
            prop_assert!(!r.is_empty());

            prop_assert_eq!(r.id(), mr.id);
            prop_assert_eq!(r.instruction_offset(), mr.offset);
            prop_assert_eq!(usize::from(r.num_locations()), mr.locations.len());
            let expected: Vec<Location> = mr
                .locations
                .iter()
                .map(|l| l.expected(&m.constants))
                .collect();
            prop_assert_eq!(r.locations().len(), expected.len());
            prop_assert_eq!(r.locations().collect::<Vec<_>>(), expected.clone());
            for (i, (e, ml)) in expected.iter().zip(&mr.locations).enumerate() {
                prop_assert_eq!(r.location(i), Some(*e));
                let (kind, size, _, _) = ml.fields();
                prop_assert_eq!(e.kind() as u8, kind);
                prop_assert_eq!(e.size(), size);
                prop_assert_eq!(e.constant(), ml.constant(&m.constants));
                // ConstantIndex resolves to the constant it names.
                if let (Location::ConstantIndex { index, value, .. }, MLoc::ConstantIndex { .. }) =
                    (e, ml)
                {
                    prop_assert_eq!(Some(*value), t.constant(*index));
                }
            }
            prop_assert_eq!(r.location(expected.len()), None);
            prop_assert_eq!(usize::from(r.num_live_outs()), mr.live_outs.len());
            let live_outs: Vec<_> = r
                .live_outs()
                .map(|lo| MLiveOut {
                    reg: lo.dwarf_reg,
                    size: lo.size,
                })
                .collect();
            prop_assert_eq!(r.live_outs().len(), mr.live_outs.len());
            prop_assert_eq!(live_outs, mr.live_outs.clone());

            let again = t.record_at(r.offset());
            prop_assert!(again.is_some());
            if let Some(again) = again {
                prop_assert_eq!(again.id(), r.id());
                prop_assert_eq!(again.len(), r.len());
            }

            // The statepoint view accepts exactly the records with the statepoint layout.
            match (StatepointRecord::new(r), model_statepoint(mr, &m.constants)) {
                (Ok(sp), Some((cc, flags, n, pairs))) => {
                    prop_assert_eq!(sp.id(), mr.id);
                    prop_assert_eq!(sp.calling_convention(), cc);
                    prop_assert_eq!(sp.flags(), flags);
                    prop_assert_eq!(sp.deopt().len(), n);
                    prop_assert_eq!(sp.deopt().collect::<Vec<_>>(), expected[3..3 + n].to_vec());
                    prop_assert_eq!(sp.num_gc_pointers(), pairs);
                    prop_assert_eq!(sp.gc_pointers().len(), pairs);
                    for (k, p) in sp.gc_pointers().enumerate() {
                        prop_assert_eq!(p.base, expected[3 + n + 2 * k]);
                        prop_assert_eq!(p.derived, expected[3 + n + 2 * k + 1]);
                    }
                }
                (Err(Error::NotAStatepoint { offset, .. }), None) => {
                    prop_assert_eq!(offset, r.offset());
                }
                (got, want) => {
                    return Err(TestCaseError::fail(format!(
                        "statepoint view of {mr:?}: got {got:?}, expected {want:?}"
                    )))
                }
            }
        }
        if let Some(n) = next_record {
            prop_assert_eq!(n, t.offset() + t.len());
        }
        prop_assert!(t.record_at(t.offset() + t.len()).is_none());
    }
    prop_assert_eq!(expected_start, bytes.len());
    Ok(())
}

/// The index finds every record by its absolute address and by its ID.
fn check_index<E: Endian>(
    parsed: &[Table<'_, E>],
    model: &[MTable],
    bias: u64,
    probe: u64,
) -> Result<(), TestCaseError> {
    let index = StackMapIndex::new(parsed.to_vec(), bias);
    let total: usize = model.iter().map(MTable::num_records).sum();
    prop_assert_eq!(index.len(), total);
    prop_assert_eq!(index.is_empty(), total == 0);
    prop_assert_eq!(index.load_bias(), bias);
    prop_assert_eq!(index.tables().len(), parsed.len());

    let address_of = |f: &MFunction, r: &MRecord| {
        f.address
            .wrapping_add(bias)
            .wrapping_add(u64::from(r.offset))
    };
    let all: Vec<(usize, u64, u64)> = model
        .iter()
        .enumerate()
        .flat_map(|(ti, m)| m.records().map(move |(f, r)| (ti, address_of(f, r), r.id)))
        .collect();

    let addresses: Vec<u64> = index.iter().map(|x| x.address).collect();
    prop_assert_eq!(addresses.len(), total);
    prop_assert!(
        addresses.windows(2).all(|w| w[0] <= w[1]),
        "iter() not in address order"
    );

    for ((ti, t), m) in parsed.iter().enumerate().zip(model) {
        for (r, (mf, mr)) in t.records().zip(m.records()) {
            let address = address_of(mf, mr);
            let found: Vec<_> = index.lookup(address).collect();
            let same_address = all.iter().filter(|&&(_, a, _)| a == address).count();
            prop_assert_eq!(found.len(), same_address);
            prop_assert!(found.iter().all(|x| x.address == address));
            let me = found
                .iter()
                .find(|x| x.table == ti && x.record.offset() == r.offset());
            prop_assert!(
                me.is_some(),
                "record at {:#x} not found at {:#x}",
                r.offset(),
                address
            );
            if let Some(me) = me {
                prop_assert_eq!(me.function.address, mf.address);
                prop_assert_eq!(me.function.stack_size, mf.stack_size);
                prop_assert_eq!(me.record.id(), mr.id);
                // The index makes its records without bounds checks: they must be the
                // table's own, part for part.
                prop_assert_eq!(me.record.len(), r.len());
                prop_assert!(me.record.locations().eq(r.locations()));
                prop_assert!(me.record.live_outs().eq(r.live_outs()));
            }
            // Records at one address come in section order.
            let order: Vec<(usize, usize)> =
                found.iter().map(|x| (x.table, x.record.offset())).collect();
            prop_assert!(
                order.windows(2).all(|w| w[0] < w[1]),
                "lookup order {:?}",
                order
            );

            let by_id: Vec<_> = index.by_id(mr.id).collect();
            let same_id = all.iter().filter(|&&(_, _, id)| id == mr.id).count();
            prop_assert_eq!(by_id.len(), same_id);
            prop_assert!(by_id.iter().all(|x| x.record.id() == mr.id));
            prop_assert!(by_id
                .iter()
                .any(|x| x.table == ti && x.record.offset() == r.offset()));
        }
    }

    // Batched lookups answer as one lookup per address, in order, misses and repeats
    // included (more addresses than the look-ahead, so that its window slides).
    let mut batch: Vec<u64> = all.iter().map(|&(_, a, _)| a).collect();
    batch.extend([probe, probe.wrapping_add(1), 0, u64::MAX]);
    batch.extend(all.iter().rev().map(|&(_, a, _)| a));
    let key = |x: &IndexedRecord<'_, E>| (x.address, x.table, x.record.offset());
    let one_by_one: Vec<(u64, Vec<_>)> = batch
        .iter()
        .map(|&a| (a, index.lookup(a).map(|x| key(&x)).collect()))
        .collect();
    let batched = index.lookup_all(&batch);
    prop_assert_eq!(batched.len(), batch.len());
    let batched: Vec<(u64, Vec<_>)> = batched
        .map(|l| (l.address(), l.map(|x| key(&x)).collect()))
        .collect();
    prop_assert_eq!(batched, one_by_one.clone());

    // Built with huge pages asked for, the index answers the same.
    let huge = StackMapIndex::with_options(
        parsed.to_vec(),
        bias,
        IndexOptions::default().huge_pages(true),
    );
    let huge_batched: Vec<(u64, Vec<_>)> = huge
        .lookup_all(&batch)
        .map(|l| (l.address(), l.map(|x| key(&x)).collect()))
        .collect();
    prop_assert_eq!(huge_batched, one_by_one);

    // An arbitrary address or ID finds exactly the records that have it.
    let at_probe = all.iter().filter(|&&(_, a, _)| a == probe).count();
    prop_assert_eq!(index.lookup(probe).count(), at_probe);
    let with_probe = all.iter().filter(|&&(_, _, id)| id == probe).count();
    prop_assert_eq!(index.by_id(probe).count(), with_probe);
    Ok(())
}

/// Parses `bytes` in byte order `e` and checks the result against the model.
fn roundtrip<E: Endian>(
    bytes: &[u8],
    e: E,
    model: &[MTable],
    layout: &Layout,
    bias: u64,
    probe: u64,
) -> Result<(), TestCaseError> {
    for options in [strict(), lenient()] {
        let parsed = Tables::new(bytes, e, options).collect::<Result<Vec<_>, Error>>();
        let parsed = match parsed {
            Ok(p) => p,
            Err(err) => return Err(TestCaseError::fail(format!("{options:?}: {err}"))),
        };
        check_equal(&parsed, model, layout, bytes)?;
        prop_assert!(parsed
            .iter()
            .flat_map(|t| t.records())
            .all(|r| r.flags() == 0));
        let again =
            parse_section(bytes, e, options).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(again.len(), parsed.len());
        check_index(&parsed, model, bias, probe)?;
    }
    Ok(())
}

/// Parses damaged bytes both ways; nothing may panic, errors must point into the section,
/// and whatever parses must be walkable. Returns the strict and lenient results.
fn parse_damaged<E: Endian>(
    bytes: &[u8],
    e: E,
) -> Result<[Result<usize, Error>; 2], TestCaseError> {
    let mut out = [Ok(0), Ok(0)];
    for (slot, options) in out.iter_mut().zip([strict(), lenient()]) {
        let mut ok = Vec::new();
        let mut error = None;
        for t in Tables::new(bytes, e, options) {
            match t {
                Ok(t) => ok.push(t),
                Err(err) => error = Some(err),
            }
        }
        walk(&ok)?;
        *slot = match error {
            Some(err) => {
                if let Some(offset) = err.offset() {
                    prop_assert!(
                        offset <= bytes.len(),
                        "{} is outside {} bytes",
                        err,
                        bytes.len()
                    );
                }
                // Display must not panic either.
                let _ = err.to_string();
                Err(err)
            }
            None => Ok(ok.len()),
        };
    }
    Ok(out)
}

/// [`parse_damaged`] when only "no panic, errors in range, walkable" matters.
fn survives<E: Endian>(bytes: &[u8], e: E) -> Result<(), TestCaseError> {
    parse_damaged(bytes, e).map(|_| ())
}

/// Reads everything a parsed table offers, builds an index and looks things up, and views
/// every record as a statepoint. Only checks internal consistency: the bytes are arbitrary.
fn walk<E: Endian>(tables: &[Table<'_, E>]) -> Result<(), TestCaseError> {
    let mut end = tables.first().map_or(0, |t| t.offset());
    for t in tables {
        prop_assert_eq!(t.offset(), end);
        end = t.offset() + t.len();
        prop_assert_eq!(t.bytes().len(), t.len());
        prop_assert_eq!(t.functions().count(), t.num_functions() as usize);
        for i in 0..=t.num_functions() as usize {
            let _ = t.function(i);
        }
        prop_assert_eq!(t.constants().count(), t.num_constants() as usize);
        prop_assert_eq!(t.records().count(), t.num_records() as usize);
        let mut next = None;
        for r in t.records() {
            if let Some(n) = next {
                prop_assert_eq!(r.offset(), n);
            }
            next = Some(r.offset() + r.len());
            prop_assert!(r.offset() + r.len() <= end);
            let _ = (r.id(), r.instruction_offset(), r.flags());
            let locations: Vec<_> = r.locations().collect();
            prop_assert_eq!(locations.len(), usize::from(r.num_locations()));
            for (i, l) in locations.iter().enumerate() {
                prop_assert_eq!(r.location(i), Some(*l));
                let _ = (l.kind(), l.size(), l.dwarf_reg(), l.constant());
                if let Location::ConstantIndex { index, value, .. } = *l {
                    prop_assert_eq!(t.constant(index), Some(value));
                }
            }
            prop_assert_eq!(r.location(locations.len()), None);
            prop_assert_eq!(r.live_outs().count(), usize::from(r.num_live_outs()));
            prop_assert!(t.record_at(r.offset()).is_some());
            if let Ok(sp) = StatepointRecord::new(r) {
                let _ = (
                    sp.id(),
                    sp.calling_convention(),
                    sp.flags(),
                    sp.record().offset(),
                );
                let deopt = sp.deopt().count();
                let pairs = sp.gc_pointers().count();
                prop_assert_eq!(pairs, sp.num_gc_pointers());
                prop_assert_eq!(3 + deopt + 2 * pairs, usize::from(r.num_locations()));
            }
        }
        if let Some(n) = next {
            prop_assert_eq!(n, end);
        }
        prop_assert!(t.records_with_functions().count() <= t.num_records() as usize);
    }
    for bias in [0u64, 0x5555_0000_0000, u64::MAX] {
        let index = StackMapIndex::new(tables.to_vec(), bias);
        let records: Vec<_> = index.iter().collect();
        prop_assert_eq!(records.len(), index.len());
        for x in &records {
            prop_assert!(index
                .lookup(x.address)
                .any(|y| y.table == x.table && y.record.offset() == x.record.offset()));
            prop_assert!(index
                .by_id(x.record.id())
                .any(|y| y.table == x.table && y.record.offset() == x.record.offset()));
            let _ = index.lookup(x.address.wrapping_add(1)).count();
        }
        let _ = index.lookup(0).count();
        let _ = index.lookup(u64::MAX).count();
        let _ = index.by_id(0).count();
    }
    Ok(())
}

/// Case counts: the default unless `PROPTEST_CASES` asks for another.
fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// Properties of valid sections
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cases(256))]

    /// Valid sections parse (strict and lenient) to exactly the model, in both byte orders
    /// and with the byte order fixed at compile time or at run time, and the index finds
    /// every record.
    #[test]
    fn valid_sections_roundtrip(model in section(LARGE), bias in prop_oneof![Just(0u64), any::<u64>()], probe in prop_oneof![0u64..0x2100, any::<u64>()]) {
        let (le, le_layout) = encode(&model, false);
        let (be, be_layout) = encode(&model, true);
        prop_assert_eq!(le.len(), be.len());
        prop_assert_eq!(&le_layout.tables, &be_layout.tables);
        roundtrip(&le, LittleEndian, &model, &le_layout, bias, probe)?;
        roundtrip(&be, BigEndian, &model, &be_layout, bias, probe)?;
        roundtrip(&le, RunTimeEndian::Little, &model, &le_layout, bias, probe)?;
        roundtrip(&be, RunTimeEndian::Big, &model, &be_layout, bias, probe)?;
    }

    /// A valid section read in the wrong byte order never panics.
    #[test]
    fn wrong_endian_never_panics(model in section(LARGE)) {
        let (le, _) = encode(&model, false);
        let (be, _) = encode(&model, true);
        survives(&le, BigEndian)?;
        survives(&be, LittleEndian)?;
    }
}

// ---------------------------------------------------------------------------------------
// Mutations of valid sections
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cases(96))]

    /// Every truncation is an error, except one exactly at a table boundary, which parses
    /// to the tables before it.
    #[test]
    fn truncation_is_detected(model in section(SMALL), big in any::<bool>()) {
        let (bytes, layout) = encode(&model, big);
        let boundaries: Vec<usize> = layout.tables.iter().map(|&(_, end)| end).collect();
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let results = if big { parse_damaged(cut, BigEndian)? } else { parse_damaged(cut, LittleEndian)? };
            let boundary = boundaries.iter().position(|&b| b == len);
            for result in results {
                match (boundary, result) {
                    (Some(k), Ok(n)) => prop_assert_eq!(n, k + 1),
                    (None, Err(Error::EmptySection)) => prop_assert_eq!(len, 0),
                    (None, Err(err)) => {
                        // The error is in the table the cut falls into.
                        let table = boundaries.iter().position(|&b| b > len).unwrap_or(0);
                        let offset = err.offset().unwrap_or(usize::MAX);
                        prop_assert!(offset >= layout.tables[table].0, "{} before table {}", err, table);
                    }
                    (b, r) => {
                        return Err(TestCaseError::fail(format!(
                            "truncated to {len} of {} bytes (boundary {b:?}): {r:?}",
                            bytes.len()
                        )));
                    }
                }
            }
        }
    }

    /// Flipping bytes never panics; errors point into the section.
    #[test]
    fn flipped_bytes_never_panic(
        model in section(SMALL),
        big in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8),
    ) {
        let (mut bytes, _) = encode(&model, big);
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        survives(&bytes, LittleEndian)?;
        survives(&bytes, BigEndian)?;
    }

    /// A count overwritten with a huge value is reported at the count (a huge function
    /// record count is a mismatch in strict mode and harmless in lenient mode).
    #[test]
    fn huge_counts_are_rejected(
        model in section(SMALL),
        big in any::<bool>(),
        which in any::<prop::sample::Index>(),
        huge in prop_oneof![Just(u64::MAX), 0x8000u64..=0xffff, 0x1_0000u64..=u64::from(u32::MAX), any::<u64>().prop_map(|x| x | 0x8000_0000_0000_0000)],
    ) {
        let (mut bytes, layout) = encode(&model, big);
        let (table, at, width, field) = layout.counts[which.index(layout.counts.len())];
        let value = match width {
            2 => huge.max(0x8000) & 0xffff,
            4 => (huge & 0xffff_ffff).max(0x1_0000),
            _ => huge.max(0x1_0000_0000),
        };
        put(&mut bytes, at, width, value, big);
        let [strict_result, lenient_result] =
            if big { parse_damaged(&bytes, BigEndian)? } else { parse_damaged(&bytes, LittleEndian)? };
        match field {
            Field::Function => {
                let functions = layout.tables[table].0 + 16;
                match strict_result {
                    Err(Error::RecordCountMismatch { offset, table: t, .. }) => {
                        prop_assert_eq!(offset, functions);
                        prop_assert_eq!(t, table);
                    }
                    other => return Err(TestCaseError::fail(format!("{other:?}"))),
                }
                prop_assert_eq!(lenient_result, Ok(model.len()));
            }
            _ => {
                for result in [strict_result, lenient_result] {
                    match result {
                        Err(Error::CountTooLarge { offset, table: t, count, .. }) => {
                            prop_assert_eq!(offset, at);
                            prop_assert_eq!(t, table);
                            prop_assert_eq!(count, value);
                        }
                        other => return Err(TestCaseError::fail(format!("{field:?} = {value}: {other:?}"))),
                    }
                }
            }
        }
    }
}

/// Writes `value` as a `width`-byte field at `at`.
fn put(bytes: &mut [u8], at: usize, width: usize, value: u64, big: bool) {
    let raw = if big {
        value.to_be_bytes()
    } else {
        value.to_le_bytes()
    };
    let raw = if big {
        &raw[8 - width..]
    } else {
        &raw[..width]
    };
    bytes[at..at + width].copy_from_slice(raw);
}

/// Parses `bytes` with `options` in the byte order the encoder used.
fn parse_as(bytes: &[u8], big: bool, options: ParseOptions) -> Result<usize, Error> {
    if big {
        parse_section(bytes, BigEndian, options).map(|t| t.len())
    } else {
        parse_section(bytes, LittleEndian, options).map(|t| t.len())
    }
}

proptest! {
    #![proptest_config(cases(128))]

    /// A non-zero reserved field or padding is reported at its offset in strict mode and
    /// ignored in lenient mode, which still reads the model.
    #[test]
    fn nonzero_reserved_is_strict_only(
        model in section(SMALL),
        big in any::<bool>(),
        which in any::<prop::sample::Index>(),
        value in any::<u64>(),
    ) {
        let (mut bytes, layout) = encode(&model, big);
        let (table, at, width, field) = layout.reserved[which.index(layout.reserved.len())];
        let value = (value & (u64::MAX >> (64 - 8 * width))).max(1);
        put(&mut bytes, at, width, value, big);
        prop_assert_eq!(
            parse_as(&bytes, big, strict()),
            Err(Error::NonZeroReserved { table, offset: at, field, value })
        );
        if big {
            let parsed = parse_section(&bytes, BigEndian, lenient()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            check_equal(&parsed, &model, &layout, &bytes)?;
        } else {
            let parsed = parse_section(&bytes, LittleEndian, lenient()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            check_equal(&parsed, &model, &layout, &bytes)?;
        }
    }

    /// A location with an unknown kind, or a ConstantIndex past the constants, is reported
    /// at the location in both modes.
    #[test]
    fn bad_locations_are_rejected(
        model in section(SMALL),
        big in any::<bool>(),
        which in any::<prop::sample::Index>(),
        kind in prop_oneof![Just(0u8), 6u8..=255],
        excess in prop_oneof![0u32..3, Just(u32::MAX)],
        as_index in any::<bool>(),
    ) {
        let (mut bytes, layout) = encode(&model, big);
        prop_assume!(!layout.locations.is_empty());
        let (table, at, num_constants) = layout.locations[which.index(layout.locations.len())];
        let expected = if as_index {
            let index = num_constants.saturating_add(excess);
            bytes[at] = 5;
            put(&mut bytes, at + 8, 4, u64::from(index), big);
            Error::ConstantIndexOutOfRange { table, offset: at, index, num_constants }
        } else {
            bytes[at] = kind;
            Error::BadLocationKind { table, offset: at, kind }
        };
        for options in [strict(), lenient()] {
            prop_assert_eq!(parse_as(&bytes, big, options), Err(expected.clone()));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Arbitrary bytes
// ---------------------------------------------------------------------------------------

/// Arbitrary bytes: a third of them behind a plausible header (version 3, small counts) so
/// the parser gets past the first checks, a third near a valid section.
fn arbitrary_section() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        (
            any::<bool>(),
            0u32..4,
            0u32..4,
            0u32..6,
            prop::collection::vec(
                prop_oneof![3 => Just(0u8), 1 => 0u8..8, 1 => any::<u8>()],
                0..768
            )
        )
            .prop_map(|(big, nf, nc, nr, tail)| {
                let mut v = vec![3, 0, 0, 0];
                for n in [nf, nc, nr] {
                    v.extend(if big {
                        n.to_be_bytes()
                    } else {
                        n.to_le_bytes()
                    });
                }
                v.extend(tail);
                v
            }),
        // Near-valid: an encoded section with some bytes replaced by anything and
        // anything appended.
        (
            section(SMALL),
            any::<bool>(),
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            prop::collection::vec(any::<u8>(), 0..24),
        )
            .prop_map(|(model, big, writes, tail)| {
                let (mut v, _) = encode(&model, big);
                for (at, b) in writes {
                    let i = at.index(v.len());
                    v[i] = b;
                }
                v.extend(tail);
                v
            }),
    ]
}

proptest! {
    #![proptest_config(cases(512))]

    /// The parser never panics on arbitrary bytes, and what it accepts can be walked.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in arbitrary_section()) {
        survives(&bytes, LittleEndian)?;
        survives(&bytes, BigEndian)?;
        survives(&bytes, RunTimeEndian::Big)?;
    }

    /// Table::parse at any start offset, even past the end, never panics.
    #[test]
    fn parse_at_any_start_never_panics(
        bytes in arbitrary_section(),
        start in prop_oneof![0usize..600, Just(usize::MAX), any::<usize>()],
    ) {
        for options in [strict(), lenient()] {
            match Table::parse(&bytes, start, 7, LittleEndian, options) {
                Ok(t) => {
                    prop_assert_eq!(t.offset(), start);
                    prop_assert!(start + t.len() <= bytes.len());
                    walk(&[t])?;
                }
                Err(err) => {
                    if let Some(offset) = err.offset() {
                        prop_assert!(offset <= bytes.len().max(start));
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Object files
// ---------------------------------------------------------------------------------------

/// A minimal relocatable ELF64 file (x86-64 little-endian or s390x big-endian) whose only
/// sections are `.llvm_stackmaps` holding `section` and `.shstrtab`.
fn elf(section: &[u8], big: bool) -> Vec<u8> {
    let mut w = Writer {
        buf: Vec::new(),
        big,
    };
    let names = b"\0.llvm_stackmaps\0.shstrtab\0";
    let data_at = 64;
    let names_at = data_at + section.len();
    let headers_at = (names_at + names.len() + 7) & !7;
    // e_ident: magic, ELFCLASS64, data encoding, EV_CURRENT, System V ABI.
    w.buf
        .extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, if big { 2 } else { 1 }, 1, 0]);
    w.buf.extend_from_slice(&[0; 8]);
    w.u16(1); // ET_REL
    w.u16(if big { 22 } else { 62 }); // EM_S390, EM_X86_64
    w.u32(1); // e_version
    w.u64(0); // e_entry
    w.u64(0); // e_phoff
    w.u64(headers_at as u64); // e_shoff
    w.u32(0); // e_flags
    w.u16(64); // e_ehsize
    w.u16(0); // e_phentsize
    w.u16(0); // e_phnum
    w.u16(64); // e_shentsize
    w.u16(3); // e_shnum
    w.u16(2); // e_shstrndx
    w.buf.extend_from_slice(section);
    w.buf.extend_from_slice(names);
    w.buf.resize(headers_at, 0);
    // Section headers: null, .llvm_stackmaps, .shstrtab.
    let headers: [(u32, u32, u64, usize, usize, u64); 3] = [
        (0, 0, 0, 0, 0, 0),
        (1, 1, 2, data_at, section.len(), 8), // SHT_PROGBITS, SHF_ALLOC
        (17, 3, 0, names_at, names.len(), 1), // SHT_STRTAB
    ];
    for (name, kind, flags, offset, size, align) in headers {
        w.u32(name);
        w.u32(kind);
        w.u64(flags);
        w.u64(0); // sh_addr
        w.u64(offset as u64);
        w.u64(size as u64);
        w.u32(0); // sh_link
        w.u32(0); // sh_info
        w.u64(align);
        w.u64(0); // sh_entsize
    }
    w.buf
}

/// Runs `find_section` and, when it finds a section, parses and walks it.
fn find_and_walk(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok((_, Some(s))) = find_section(bytes) {
        prop_assert!(s.data.len() <= bytes.len());
        survives(s.data, s.endian)?;
    }
    Ok(())
}

/// Arbitrary bytes, most of them behind the magic number of a format `object` reads.
fn arbitrary_object() -> impl Strategy<Value = Vec<u8>> {
    let magic = prop::sample::select(vec![
        &b""[..],
        b"\x7fELF\x02\x01\x01\0",
        b"\x7fELF\x02\x02\x01\0",
        b"\x7fELF\x01\x01\x01\0",
        b"\xcf\xfa\xed\xfe",
        b"\xfe\xed\xfa\xcf",
        b"\xce\xfa\xed\xfe",
        b"MZ",
        b"\x64\x86",
        b"\xca\xfe\xba\xbe",
    ]);
    (
        magic,
        prop::collection::vec(prop_oneof![2 => Just(0u8), 3 => any::<u8>()], 0..1024),
    )
        .prop_map(|(magic, tail)| [magic, &tail[..]].concat())
}

proptest! {
    #![proptest_config(cases(64))]

    /// `find_section` returns the stack map section of an ELF file, and it parses to the
    /// model in the file's byte order.
    #[test]
    fn elf_section_is_found(model in section(LARGE), big in any::<bool>()) {
        let (bytes, layout) = encode(&model, big);
        let file = elf(&bytes, big);
        let found = find_section(&file);
        let (info, s) = match found {
            Ok((info, Some(s))) => (info, s),
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        prop_assert!(info.is_64);
        prop_assert_eq!(s.data, &bytes[..]);
        prop_assert_eq!(s.file_offset, 64);
        prop_assert_eq!(s.endian, if big { RunTimeEndian::Big } else { RunTimeEndian::Little });
        prop_assert_eq!(s.arch.is_some(), !big);
        let parsed = parse_section(s.data, s.endian, strict()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_equal(&parsed, &model, &layout, &bytes)?;
    }

    /// A damaged ELF file never makes `find_section` panic.
    #[test]
    fn damaged_elf_never_panics(
        model in section(SMALL),
        big in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let (bytes, _) = encode(&model, big);
        let mut file = elf(&bytes, big);
        find_and_walk(&file[..cut.index(file.len())])?;
        for (at, x) in flips {
            let i = at.index(file.len());
            file[i] ^= x;
        }
        find_and_walk(&file)?;
    }
}

proptest! {
    #![proptest_config(cases(512))]

    /// `find_section` never panics on arbitrary bytes.
    #[test]
    fn find_section_never_panics(bytes in arbitrary_object()) {
        find_and_walk(&bytes)?;
    }
}
