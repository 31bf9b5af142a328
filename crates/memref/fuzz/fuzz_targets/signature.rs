//! Fuzzes the MLIR signature parser: function types, single types and the
//! scan of `mlir-opt-19`'s generic output for a `func.func` (what
//! `Signature::from_mlir` reads; it runs mlir-opt itself, so it is not fuzzed here).

#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_memref::signature::{is_row_major, row_major, Dim, Layout, Type};
use locus_memref::{Error, Signature};

/// A parse error must point inside the text, on a character boundary, so a
/// caller can show the offending spot.
fn check_error(e: &Error, text: &str) {
    match e {
        Error::Parse { at, .. } => {
            assert!(*at <= text.len(), "{e} outside {} bytes", text.len());
            assert!(text.is_char_boundary(*at), "{e} inside a character");
        }
        other => panic!("not a parse error: {other}"),
    }
}

/// What parses prints back to the same value, and its checks do not panic.
fn check_signature(sig: &Signature) {
    let printed = sig.to_string();
    match Signature::parse(&printed) {
        Ok(again) => assert_eq!(&again, sig, "{printed}"),
        Err(e) => panic!("own output `{printed}` does not parse: {e}"),
    }
    sig.inputs.iter().chain(&sig.results).for_each(check_type);
}

fn check_type(t: &Type) {
    let printed = t.to_string();
    match Type::parse(&printed) {
        Ok(again) => assert_eq!(&again, t, "{printed}"),
        Err(e) => panic!("own output `{printed}` does not parse: {e}"),
    }
    let Type::MemRef(m) = t else {
        return;
    };
    // Sizes the type accepts: its static sizes, 3 for `?` (2 for unranked, rank 2).
    let sizes: Vec<i64> = match &m.shape {
        Some(shape) => shape
            .iter()
            .map(|d| match d {
                Dim::Static(v) => *v,
                Dim::Dynamic => 3,
            })
            .collect(),
        None => vec![2, 2],
    };
    let strides = row_major(&sizes);
    assert!(is_row_major(&sizes, &strides), "{sizes:?} {strides:?}");
    let dense = m.check(m.elem, 0, &sizes, &strides);
    if m.layout == Layout::Identity {
        // A dense row-major buffer with the type's own sizes always fits.
        assert!(dense.is_ok(), "{t}: {dense:?}");
        assert!(m.accepts_row_major(&sizes));
    } else {
        assert_eq!(dense.is_ok(), m.accepts_row_major(&sizes));
    }
    // Wrong rank is always refused by a ranked type.
    if m.shape.is_some() {
        let mut more = sizes.clone();
        more.push(1);
        assert!(m.check(m.elem, 0, &more, &row_major(&more)).is_err());
    }
    let _ = m.check(m.elem, -1, &sizes, &vec![-1; sizes.len()]);
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Signature::parse(text) {
        Ok(sig) => check_signature(&sig),
        Err(e) => check_error(&e, text),
    }
    match Type::parse(text) {
        Ok(t) => check_type(&t),
        Err(e) => check_error(&e, text),
    }
    // The function named by the first `@name` (the name may be empty).
    let name = text.split_once('@').map_or("", |(_, rest)| {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        &rest[..end]
    });
    match Signature::from_generic_mlir(text, name) {
        Ok(sig) => check_signature(&sig),
        Err(e) => check_error(&e, text),
    }
});
