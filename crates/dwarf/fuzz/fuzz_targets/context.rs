//! Fuzzes the CTX.json / SNAP.json reader of `locus dwarf eval --context` and `vars
//! --snapshot` (`locus_dwarf::binary::json`, feature `json`): the input is the file's text. A context that parses is written back with `Context::to_json` and read
//! again, which must give the same snapshot. Nothing may panic or allocate without bound.

#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_dwarf::binary::json as context;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = context::parse_number(text);
    let _ = context::parse_hex(text);
    let Ok(parsed) = context::Context::parse(text) else {
        return;
    };
    let json = context::Context::to_json(&parsed.snapshot, &parsed.names).to_string();
    let again = context::Context::parse(&json)
        .unwrap_or_else(|e| panic!("the context written back does not parse: {e}\n{json}"));
    assert_eq!(again.snapshot, parsed.snapshot, "{json}");
});
