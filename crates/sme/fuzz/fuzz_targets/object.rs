//! The audit's object reader and its dataflow: the input is an ELF file. Reading it
//! (symbols, relocations, `.eh_frame`'s relocations to each function's LSDA, the call-site
//! tables of `.gcc_except_table`, each function's instructions and jump tables) must succeed or fail with
//! `Error::Object` naming the file; what is read must be consistent (instructions at
//! offsets 0, 4, 8, ...; landing pads inside their function); the audit of what is read,
//! without IR and with every function streaming-compatible and sharing ZA and ZT0 (the most
//! paths and checks), must finish, and every departure must name a function of the object
//! and one of its instructions.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use locus_sme::attrs::Attrs;
use locus_sme::audit::audit;
use locus_sme::objfile::read_functions;
use locus_sme::Error;

fuzz_target!(|data: &[u8]| {
    let functions = match read_functions("fuzz.o", data) {
        Ok(f) => f,
        Err(Error::Object { file, .. }) => {
            assert_eq!(file, "fuzz.o");
            return;
        }
        Err(e) => panic!("not an object error: {e:?}"),
    };
    for f in &functions {
        for (i, inst) in f.instructions.iter().enumerate() {
            assert_eq!(inst.offset, 4 * i as u64, "{}", f.name);
        }
        for p in &f.landing_pads {
            assert!(p.start <= p.end, "{}: {p:?}", f.name);
        }
        // Jump tables: a `br` of the function, each case one of its instructions.
        let end = 4 * f.instructions.len() as u64;
        for t in &f.jump_tables {
            assert!(t.br % 4 == 0 && t.br < end, "{}: {t:?}", f.name);
            assert!(t.targets.iter().all(|&o| o % 4 == 0 && o < end), "{}: {t:?}", f.name);
        }
    }
    // Bounded work: the dataflow's state bound keeps each function finite, but a file of
    // many large functions would only make the fuzzer slow.
    if functions
        .iter()
        .map(|f| f.instructions.len())
        .sum::<usize>()
        > 20_000
    {
        return;
    }
    let everything = Attrs::from_names([
        "aarch64_pstate_sm_compatible",
        "aarch64_inout_za",
        "aarch64_inout_zt0",
    ]);
    for given in [
        HashMap::new(),
        functions
            .iter()
            .map(|f| (f.name.clone(), everything))
            .collect(),
    ] {
        let report = audit("fuzz.o", data, None, &given).expect("read once, read again");
        assert_eq!(report.functions.len(), functions.len());
        for d in &report.departures {
            // Symbol names need not be unique: one of that name has the instruction.
            assert!(
                functions
                    .iter()
                    .filter(|f| f.name == d.function)
                    .any(|f| f.instructions.iter().any(|i| i.offset == d.offset)),
                "{}+{:#x}",
                d.function,
                d.offset
            );
        }
    }
});
