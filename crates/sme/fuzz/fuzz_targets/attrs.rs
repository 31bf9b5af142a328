//! `--attrs NAME=ATTR,...`: the input, if UTF-8, is parsed. An error must be an
//! `Error::Attrs` quoting the argument; what parses must print back (each attribute by its
//! full name) to an argument that parses to the same attributes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_sme::audit::parse_attrs_arg;
use locus_sme::Error;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_attrs_arg(text) {
        Ok((name, attrs)) => {
            let again = format!("{name}={}", attrs.names().join(","));
            let (name2, attrs2) = parse_attrs_arg(&again).expect("printed attributes parse");
            assert_eq!(name2, name.trim());
            assert_eq!(attrs2, attrs, "{again}");
        }
        Err(Error::Attrs { spec, .. }) => assert_eq!(spec, text),
        Err(e) => panic!("not an --attrs error: {e:?}"),
    }
});
