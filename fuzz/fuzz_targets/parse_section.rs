//! Fuzzes the `.llvm_stackmaps` parser: the input is a section, parsed in both byte orders
//! and both strictness modes; everything that parses is walked, indexed, looked up and
//! viewed as statepoints, and the parser's invariants are asserted along the way. Every
//! lookup (`lookup` and `lookup_all`, of each record's address, its neighbours and misses)
//! is checked against the records the tables assign to functions (`lookups.rs`; the `index`
//! target checks the same on generated well-formed sections against its own model).

#![no_main]

mod lookups;

use libfuzzer_sys::fuzz_target;
use locus_stackmap::{
    BigEndian, Endian, LittleEndian, Location, ParseOptions, StackMapIndex, StatepointRecord,
    Strictness, Table, Tables,
};
use lookups::{check_lookups, Expected};

fuzz_target!(|data: &[u8]| {
    check(data, LittleEndian);
    check(data, BigEndian);
});

/// Parses `data` strictly and leniently; a strict success must be a lenient success with the
/// same tables.
fn check<E: Endian>(data: &[u8], e: E) {
    let strict = parse(data, e, Strictness::Strict);
    let lenient = parse(data, e, Strictness::Lenient);
    let span = |t: &Table<'_, E>| (t.offset(), t.len());
    if strict.1 {
        assert!(lenient.1, "strict parse succeeded, lenient failed");
        assert_eq!(
            strict.0.iter().map(span).collect::<Vec<_>>(),
            lenient.0.iter().map(span).collect::<Vec<_>>()
        );
    }
}

/// The tables that parse (all of them, or those before the first error) and whether the
/// whole section parsed.
fn parse<E: Endian>(data: &[u8], e: E, strictness: Strictness) -> (Vec<Table<'_, E>>, bool) {
    let mut tables = Vec::new();
    let mut ok = true;
    for t in Tables::new(data, e, ParseOptions { strictness }) {
        match t {
            Ok(t) => tables.push(t),
            Err(err) => {
                if let Some(offset) = err.offset() {
                    assert!(offset <= data.len(), "{err} outside {} bytes", data.len());
                }
                let _ = err.to_string();
                ok = false;
            }
        }
    }
    walk(data, &tables);
    (tables, ok)
}

/// Reads everything, checking that tables and records tile, then indexes and looks up.
fn walk<E: Endian>(data: &[u8], tables: &[Table<'_, E>]) {
    let mut end = 0;
    let mut with_functions = 0;
    for t in tables {
        assert_eq!(t.offset(), end);
        end = t.offset() + t.len();
        assert!(end <= data.len());
        assert_eq!(t.bytes().len(), t.len());
        assert_eq!(t.version(), 3);
        assert_eq!(t.functions().count(), t.num_functions() as usize);
        assert_eq!(t.constants().count(), t.num_constants() as usize);
        for f in t.functions() {
            let _ = f.static_stack_size();
        }
        let mut next = None;
        for r in t.records() {
            if let Some(n) = next {
                assert_eq!(r.offset(), n);
            }
            next = Some(r.offset() + r.len());
            assert!(r.offset() + r.len() <= end);
            let _ = (r.id(), r.instruction_offset(), r.flags());
            let mut count = 0;
            for (i, l) in r.locations().enumerate() {
                assert_eq!(r.location(i), Some(l));
                let _ = (l.kind(), l.size(), l.dwarf_reg(), l.constant());
                if let Location::ConstantIndex { index, value, .. } = l {
                    assert_eq!(t.constant(index), Some(value));
                }
                count += 1;
            }
            assert_eq!(count, usize::from(r.num_locations()));
            assert!(r.location(count).is_none());
            assert_eq!(r.live_outs().count(), usize::from(r.num_live_outs()));
            assert!(t.record_at(r.offset()).is_some_and(|a| a.id() == r.id()));
            if let Ok(sp) = StatepointRecord::new(r) {
                let _ = (sp.id(), sp.calling_convention(), sp.flags());
                let deopt = sp.deopt().count();
                let pairs = sp.gc_pointers().count();
                assert_eq!(pairs, sp.num_gc_pointers());
                assert_eq!(3 + deopt + 2 * pairs, usize::from(r.num_locations()));
            }
        }
        if let Some(n) = next {
            assert_eq!(n, end);
        }
        with_functions += t.records_with_functions().count();
    }

    // The bias comes from the data so that address arithmetic wraps sometimes.
    let bias = data
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let index = StackMapIndex::new(tables.to_vec(), bias);
    assert_eq!(index.len(), with_functions);
    // What the tables say is at each address: every record that has a function.
    let mut expected = Expected::new();
    for (ti, t) in tables.iter().enumerate() {
        for (f, r) in t.records_with_functions() {
            let address = f
                .address
                .wrapping_add(bias)
                .wrapping_add(u64::from(r.instruction_offset()));
            expected.entry(address).or_default().push((ti, r.offset()));
        }
    }
    check_lookups(&index, &expected, &[bias]);
    for x in index.iter() {
        let same = |y: &locus_stackmap::IndexedRecord<'_, E>| {
            y.table == x.table && y.record.offset() == x.record.offset()
        };
        assert!(index.by_id(x.record.id()).any(|y| same(&y)));
    }
    for probe in [0, 1, bias, u64::MAX] {
        let _ = index.by_id(probe).count();
    }
}
