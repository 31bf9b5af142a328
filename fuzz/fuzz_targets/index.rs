//! Fuzzes `StackMapIndex` on well-formed sections: the input drives a generator of tables
//! (functions whose addresses cluster, repeat, straddle the 4 GiB span the compact slots
//! hold or wrap with the load bias; records that share addresses, more of them than a block
//! holds; every location kind, live-outs; lenient tables whose function counts do not add
//! up), which are encoded little- or big-endian and parsed. The index built from them is
//! checked against the generator's model, not the parser: every record is found by its
//! address through `lookup` and `lookup_all` with its ID, function, locations and live-outs,
//! addresses without records answer none, and `by_id` finds every record with an ID.
//! (`parse_section` checks the same lookups on whatever random bytes happen to parse.)

#![no_main]

mod lookups;

use std::collections::BTreeMap;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use locus_stackmap::{
    BigEndian, Endian, LittleEndian, Location, ParseOptions, StackMapIndex, Strictness, Tables,
};
use lookups::{check_lookups, Expected, Key};

/// (kind, size, DWARF register, offset field) as written; ConstantIndex names a constant.
type MLoc = (u8, u16, u16, u32);

struct MRecord {
    id: u64,
    offset: u32,
    locations: Vec<MLoc>,
    live_outs: Vec<(u16, u8)>,
}

struct MFunction {
    address: u64,
    stack_size: u64,
    /// The record count as written (a lenient table's need not add up).
    count: u64,
}

struct MTable {
    functions: Vec<MFunction>,
    constants: Vec<u64>,
    records: Vec<MRecord>,
}

impl MTable {
    /// Each record's function, as the spec assigns them: in order, `count` each; records
    /// past the sum have none.
    fn owners(&self) -> Vec<Option<usize>> {
        let mut owners = Vec::with_capacity(self.records.len());
        let mut functions = self.functions.iter().enumerate();
        let mut current = None;
        let mut left = 0u64;
        for _ in &self.records {
            while left == 0 {
                match functions.next() {
                    Some((i, f)) => {
                        current = Some(i);
                        left = f.count;
                    }
                    None => {
                        current = None;
                        break;
                    }
                }
            }
            if current.is_none() {
                owners.push(None);
                continue;
            }
            left -= 1;
            owners.push(current);
        }
        owners
    }
}

/// A 64-bit address near `base`: the same, a little above, at the edge of the 4 GiB the
/// compact slots span, or anywhere.
fn near(u: &mut Unstructured<'_>, base: u64) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => base,
        1 | 2 => base.wrapping_add(u64::from(u.arbitrary::<u16>()?)),
        3 => base.wrapping_add(u64::from(u32::MAX) - 8 + u64::from(u.int_in_range(0u8..=16)?)),
        4 => base.wrapping_sub(u64::from(u.arbitrary::<u16>()?)),
        _ => u.arbitrary()?,
    })
}

fn location(u: &mut Unstructured<'_>, constants: usize) -> Result<MLoc> {
    let kind = u.int_in_range(1u8..=5)?;
    let size = if u.ratio(7, 8)? { 8 } else { u.arbitrary()? };
    let reg = u.int_in_range(0u16..=32)?;
    Ok(match kind {
        5 if constants > 0 => (5, size, 0, u.choose_index(constants)? as u32),
        5 | 4 => (4, size, 0, u.arbitrary()?),
        1 => (1, size, reg, 0),
        k => (k, size, reg, u.arbitrary()?),
    })
}

fn table(u: &mut Unstructured<'_>, base: u64, strict: bool) -> Result<MTable> {
    let constants: Vec<u64> = (0..u.int_in_range(0..=3)?)
        .map(|_| u.arbitrary())
        .collect::<Result<_>>()?;
    let mut records = Vec::new();
    let mut offset = 0u32;
    let mut id = 0u64;
    for _ in 0..u.int_in_range(0..=64)? {
        // Offsets repeat (several records at one address), climb or jump.
        offset = match u.int_in_range(0u8..=4)? {
            0 | 1 => offset,
            2 | 3 => offset.wrapping_add(u32::from(u.int_in_range(1u8..=16)?)),
            _ => u.arbitrary()?,
        };
        id = if u.ratio(1, 2)? {
            id
        } else {
            u.int_in_range(0..=8)?
        };
        let locations = (0..u.int_in_range(0..=4)?)
            .map(|_| location(u, constants.len()))
            .collect::<Result<_>>()?;
        let live_outs = (0..u.int_in_range(0..=3)?)
            .map(|_| Ok((u.int_in_range(0u16..=32)?, u.arbitrary()?)))
            .collect::<Result<_>>()?;
        records.push(MRecord {
            id,
            offset,
            locations,
            live_outs,
        });
    }
    // Split the records among the functions; a lenient table may miscount.
    let n = u.int_in_range(0..=6)?;
    // A strict table's counts must add up, so its records need a function.
    let n = if strict && !records.is_empty() {
        n.max(1)
    } else {
        n
    };
    let mut left = records.len() as u64;
    let mut functions = Vec::new();
    let mut address = base;
    for i in 0..n {
        address = near(u, address)?;
        let count = if i + 1 == n {
            left
        } else {
            u.int_in_range(0..=left)?
        };
        left -= count;
        let count = if strict || u.ratio(3, 4)? {
            count
        } else {
            match u.int_in_range(0u8..=2)? {
                0 => count.saturating_add(1),
                1 => count.saturating_sub(1),
                _ => u.arbitrary()?,
            }
        };
        functions.push(MFunction {
            address,
            stack_size: if u.ratio(1, 8)? { u64::MAX } else { 16 },
            count,
        });
    }
    Ok(MTable {
        functions,
        constants,
        records,
    })
}

/// Encodes `tables` back to back; returns the section and each record's offset in it.
fn encode(tables: &[MTable], big: bool) -> (Vec<u8>, Vec<Vec<usize>>) {
    let mut s = Vec::new();
    let mut offsets = Vec::new();
    let put = |s: &mut Vec<u8>, le: &[u8]| {
        if big {
            s.extend(le.iter().rev());
        } else {
            s.extend(le);
        }
    };
    for t in tables {
        s.extend([3, 0, 0, 0]);
        put(&mut s, &(t.functions.len() as u32).to_le_bytes());
        put(&mut s, &(t.constants.len() as u32).to_le_bytes());
        put(&mut s, &(t.records.len() as u32).to_le_bytes());
        for f in &t.functions {
            put(&mut s, &f.address.to_le_bytes());
            put(&mut s, &f.stack_size.to_le_bytes());
            put(&mut s, &f.count.to_le_bytes());
        }
        for c in &t.constants {
            put(&mut s, &c.to_le_bytes());
        }
        let mut at = Vec::new();
        for r in &t.records {
            at.push(s.len());
            put(&mut s, &r.id.to_le_bytes());
            put(&mut s, &r.offset.to_le_bytes());
            put(&mut s, &0u16.to_le_bytes());
            put(&mut s, &(r.locations.len() as u16).to_le_bytes());
            for &(kind, size, reg, off) in &r.locations {
                s.extend([kind, 0]);
                put(&mut s, &size.to_le_bytes());
                put(&mut s, &reg.to_le_bytes());
                s.extend([0, 0]);
                put(&mut s, &off.to_le_bytes());
            }
            s.resize(s.len().next_multiple_of(8), 0);
            s.extend([0, 0]);
            put(&mut s, &(r.live_outs.len() as u16).to_le_bytes());
            for &(reg, size) in &r.live_outs {
                put(&mut s, &reg.to_le_bytes());
                s.extend([0, size]);
            }
            s.resize(s.len().next_multiple_of(8), 0);
        }
        offsets.push(at);
    }
    (s, offsets)
}

/// The location the parser must make of a model location.
fn expected_location((kind, size, reg, off): MLoc, constants: &[u64]) -> Location {
    match kind {
        1 => Location::Register {
            dwarf_reg: reg,
            size,
        },
        2 => Location::Direct {
            dwarf_reg: reg,
            offset: off as i32,
            size,
        },
        3 => Location::Indirect {
            dwarf_reg: reg,
            offset: off as i32,
            size,
        },
        4 => Location::Constant {
            value: off as i32,
            size,
        },
        _ => Location::ConstantIndex {
            index: off,
            value: constants[off as usize],
            size,
        },
    }
}

struct Input {
    big: bool,
    strict: bool,
    bias: u64,
    tables: Vec<MTable>,
    probes: Vec<u64>,
}

fn input(u: &mut Unstructured<'_>) -> Result<Input> {
    let big = u.arbitrary()?;
    let strict = u.arbitrary()?;
    let base = match u.int_in_range(0u8..=3)? {
        0 => 0x1000,
        1 => u64::MAX - u64::from(u.arbitrary::<u16>()?),
        2 => u64::from(u32::MAX) - u64::from(u.arbitrary::<u8>()?),
        _ => u.arbitrary()?,
    };
    let bias = match u.int_in_range(0u8..=3)? {
        0 => 0,
        1 => 0x5555_5555_4000,
        2 => base.wrapping_neg(),
        _ => u.arbitrary()?,
    };
    let mut tables = Vec::new();
    for _ in 0..u.int_in_range(1..=3)? {
        tables.push(table(u, base, strict)?);
    }
    let probes = (0..u.int_in_range(0..=4)?)
        .map(|_| u.arbitrary())
        .collect::<Result<_>>()?;
    Ok(Input {
        big,
        strict,
        bias,
        tables,
        probes,
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = input(&mut Unstructured::new(data)) else {
        return;
    };
    let (section, offsets) = encode(&input.tables, input.big);
    if input.big {
        check(&input, &section, &offsets, BigEndian);
    } else {
        check(&input, &section, &offsets, LittleEndian);
    }
});

fn check<E: Endian>(input: &Input, section: &[u8], offsets: &[Vec<usize>], e: E) {
    let strictness = if input.strict {
        Strictness::Strict
    } else {
        Strictness::Lenient
    };
    let tables: Vec<_> = Tables::new(section, e, ParseOptions { strictness })
        .collect::<Result<_, _>>()
        .unwrap_or_else(|err| panic!("a generated section does not parse: {err}"));
    assert_eq!(tables.len(), input.tables.len());
    for (t, at) in tables.iter().zip(offsets) {
        assert!(t.records().map(|r| r.offset()).eq(at.iter().copied()));
    }

    // What the model says is where.
    let mut expected = Expected::new();
    let mut by_key: BTreeMap<Key, (&MTable, &MFunction, &MRecord)> = BTreeMap::new();
    for (ti, (m, at)) in input.tables.iter().zip(offsets).enumerate() {
        for ((r, owner), &offset) in m.records.iter().zip(m.owners()).zip(at) {
            let Some(fi) = owner else { continue };
            let f = &m.functions[fi];
            let address = f
                .address
                .wrapping_add(input.bias)
                .wrapping_add(u64::from(r.offset));
            expected.entry(address).or_default().push((ti, offset));
            by_key.insert((ti, offset), (m, f, r));
        }
    }

    let index = StackMapIndex::new(tables, input.bias);
    check_lookups(&index, &expected, &input.probes);

    // Every record found has the model's contents.
    for (&address, keys) in &expected {
        for x in index.lookup(address) {
            let (m, f, r) = by_key[&(x.table, x.record.offset())];
            assert_eq!(x.function.address, f.address);
            assert_eq!(x.function.stack_size, f.stack_size);
            assert_eq!(x.record.id(), r.id);
            assert_eq!(x.record.instruction_offset(), r.offset);
            let locations: Vec<Location> = r
                .locations
                .iter()
                .map(|&l| expected_location(l, &m.constants))
                .collect();
            assert!(x.record.locations().eq(locations));
            assert!(x
                .record
                .live_outs()
                .map(|l| (l.dwarf_reg, l.size))
                .eq(r.live_outs.iter().copied()));
        }
        assert_eq!(index.lookup(address).count(), keys.len());
    }
    // By ID: every indexed record with that ID, in address order.
    let mut ids: BTreeMap<u64, Vec<(u64, Key)>> = BTreeMap::new();
    for (&address, keys) in &expected {
        for &k in keys {
            ids.entry(by_key[&k].2.id).or_default().push((address, k));
        }
    }
    for (&id, want) in &ids {
        let got: Vec<(u64, Key)> = index
            .by_id(id)
            .map(|x| (x.address, (x.table, x.record.offset())))
            .collect();
        let mut got_sorted = got.clone();
        got_sorted.sort();
        let mut want = want.clone();
        want.sort();
        assert_eq!(got_sorted, want, "by_id({id})");
        assert!(
            got.windows(2).all(|w| w[0].0 <= w[1].0),
            "by_id({id}) order"
        );
    }
    assert_eq!(
        index.by_id(u64::MAX).count(),
        ids.get(&u64::MAX).map_or(0, Vec::len)
    );
}
