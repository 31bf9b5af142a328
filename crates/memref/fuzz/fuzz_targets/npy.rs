//! Fuzzes the `.npy` reader: whatever parses has data of the size its shape
//! and dtype say, sizes that fit memref indices, and writes back to a file
//! that parses to the same array. The first byte picks the type a dtype naming
//! only a size is read as (`parse_as`), or none.

#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_memref::npy::{Dtype, NpyArray};
use locus_memref::Error;

fuzz_target!(|input: &[u8]| {
    // The first byte names the type untyped dtypes ('<V2', '<f1') are read as, if any.
    let Some((&pick, data)) = input.split_first() else {
        return;
    };
    let untyped = Dtype::ml_dtypes().nth(usize::from(pick % 8));
    let a = match NpyArray::parse_as(data, untyped) {
        Ok(a) => a,
        Err(e) => {
            assert!(matches!(e, Error::Npy { .. }), "{e}");
            return;
        }
    };
    let count = a.shape().iter().try_fold(1usize, |n, &s| n.checked_mul(s));
    let want = count.and_then(|c| c.checked_mul(a.dtype().size()));
    assert_eq!(want, Some(a.bytes().len()), "{:?}", a.shape());
    assert!(a.bytes().len() <= data.len());
    let sizes = a.sizes();
    assert_eq!(sizes.len(), a.shape().len());
    assert!(sizes.iter().all(|&s| s >= 0), "{sizes:?}");
    let file = a.to_npy();
    match NpyArray::parse_as(&file, untyped) {
        Ok(b) => assert_eq!(a, b),
        Err(e) => panic!("own output does not parse: {e}"),
    }
});
