//! Fuzzes object-file reading: the input is an object file; `find_section` looks for its
//! stack map section, which is then parsed both ways, walked and indexed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_stackmap::object::find_section;
use locus_stackmap::{
    Endian, ParseOptions, RunTimeEndian, StackMapIndex, StatepointRecord, Strictness, Tables,
};

fuzz_target!(|data: &[u8]| {
    let Ok((_info, Some(section))) = find_section(data) else {
        return;
    };
    assert!(section.data.len() <= data.len());
    check(section.data, section.endian);
});

fn check(data: &[u8], e: RunTimeEndian) {
    for strictness in [Strictness::Strict, Strictness::Lenient] {
        let mut tables = Vec::new();
        for t in Tables::new(data, e, ParseOptions { strictness }) {
            match t {
                Ok(t) => tables.push(t),
                Err(err) => {
                    if let Some(offset) = err.offset() {
                        assert!(offset <= data.len(), "{err} outside {} bytes", data.len());
                    }
                }
            }
        }
        let mut end = 0;
        for t in &tables {
            assert_eq!(t.offset(), end);
            end = t.offset() + t.len();
            for r in t.records() {
                assert!(r.offset() + r.len() <= end);
                assert_eq!(r.locations().count(), usize::from(r.num_locations()));
                assert_eq!(r.live_outs().count(), usize::from(r.num_live_outs()));
                if let Ok(sp) = StatepointRecord::new(r) {
                    let _ = (sp.deopt().count(), sp.gc_pointers().count());
                }
            }
            let _ = (
                t.functions().count(),
                t.constants().count(),
                e.is_big_endian(),
            );
        }
        let index = StackMapIndex::new(tables, 0);
        for x in index.iter() {
            assert!(index.lookup(x.address).count() >= 1);
            assert!(index.by_id(x.record.id()).count() >= 1);
        }
    }
}
