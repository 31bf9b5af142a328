//! A list of SME attributes as a user writes it (`Attrs::parse_list`, what `locus sme audit
//! --attrs NAME=LIST` reads): the input, if UTF-8, is parsed. An error must be an
//! `Error::Attrs` quoting the list; what parses must print back (each attribute by its full
//! name) to a list that parses to the same attributes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_sme::attrs::Attrs;
use locus_sme::Error;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Attrs::parse_list(text) {
        Ok(attrs) => {
            let again = attrs.names().join(",");
            let attrs2 = Attrs::parse_list(&again).expect("printed attributes parse");
            assert_eq!(attrs2, attrs, "{again}");
        }
        Err(Error::Attrs { list, .. }) => assert_eq!(list, text),
        Err(e) => panic!("not an attribute-list error: {e:?}"),
    }
});
