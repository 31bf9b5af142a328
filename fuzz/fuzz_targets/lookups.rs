//! The lookup oracle shared by `parse_section` and `index`: every lookup an index answers is
//! checked against what the tables say is at that address.

use std::collections::BTreeMap;

use locus_stackmap::{Endian, IndexedRecord, StackMapIndex};

/// A record by (table number, section offset).
pub type Key = (usize, usize);

/// Records by absolute address, each address's in section order.
pub type Expected = BTreeMap<u64, Vec<Key>>;

fn key<E: Endian>(x: &IndexedRecord<'_, E>) -> Key {
    (x.table, x.record.offset())
}

/// The records at `address`, checked one by one: each at `address`, each its table's own
/// record part for part (the index hands records out without bounds checks).
fn found<'a, E: Endian>(
    index: &StackMapIndex<'a, E>,
    records: impl Iterator<Item = IndexedRecord<'a, E>>,
    address: u64,
) -> Vec<Key> {
    records
        .map(|x| {
            assert_eq!(x.address, address);
            let own = index
                .tables()
                .get(x.table)
                .and_then(|t| t.record_at(x.record.offset()))
                .unwrap_or_else(|| panic!("record {:?} at {address:#x} is no table's", key(&x)));
            assert_eq!(x.record.len(), own.len());
            assert_eq!(x.record.id(), own.id());
            assert_eq!(x.record.instruction_offset(), own.instruction_offset());
            assert!(x.record.locations().eq(own.locations()));
            assert!(x.record.live_outs().eq(own.live_outs()));
            key(&x)
        })
        .collect()
}

/// Checks `index` against `expected`: its length and address order; `lookup` of every
/// expected address, of its neighbours (one below and above, 4 GiB away) and of `probes`
/// answers exactly the expected records in section order, and nothing where none is
/// expected; `lookup_all` over all of them (with repeats, longer than its look-ahead)
/// answers the same, address by address.
pub fn check_lookups<E: Endian>(index: &StackMapIndex<'_, E>, expected: &Expected, probes: &[u64]) {
    let total: usize = expected.values().map(Vec::len).sum();
    assert_eq!(index.len(), total);
    assert_eq!(index.is_empty(), total == 0);
    let order: Vec<(u64, Key)> = index.iter().map(|x| (x.address, key(&x))).collect();
    let want: Vec<(u64, Key)> = expected
        .iter()
        .flat_map(|(&a, keys)| keys.iter().map(move |&k| (a, k)))
        .collect();
    assert_eq!(order, want, "iter() is not the records in address order");

    let mut batch = Vec::new();
    for &a in expected.keys() {
        batch.extend([
            a,
            a.wrapping_sub(1),
            a.wrapping_add(1),
            a.wrapping_add(1 << 32),
            a.wrapping_sub(1 << 32),
        ]);
    }
    // The edges of what the compact slots can hold, from the lowest address.
    if let Some(&low) = expected.keys().next() {
        for d in [
            u64::from(u32::MAX) - 3,
            u64::from(u32::MAX) - 2,
            u64::from(u32::MAX) - 1,
        ] {
            batch.push(low.wrapping_add(d));
        }
    }
    batch.extend(probes);
    batch.extend([0, 1, u64::MAX]);
    for &a in &batch {
        let got = found(index, index.lookup(a), a);
        let want = expected.get(&a).map_or(&[][..], Vec::as_slice);
        assert_eq!(got, want, "lookup({a:#x})");
    }
    // Batched, with the expected addresses once more at the end so that the look-ahead
    // window slides over repeats.
    batch.extend(expected.keys().rev());
    let mut n = 0;
    for (l, &a) in index.lookup_all(&batch).zip(&batch) {
        assert_eq!(l.address(), a);
        let got = found(index, l, a);
        let want = expected.get(&a).map_or(&[][..], Vec::as_slice);
        assert_eq!(got, want, "lookup_all at {a:#x}");
        n += 1;
    }
    assert_eq!(n, batch.len());
    assert_eq!(index.lookup_all(&batch).len(), batch.len());
}
