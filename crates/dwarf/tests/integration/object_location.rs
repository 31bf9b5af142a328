//! `DW_OP_push_object_address` with an object in several places: the
//! normative text has it push the current object's location description,
//! which (like any location description in the extension) may have several
//! places. A [`Target`] gives one with `Target::object_location`
//! (`binary::Snapshot::object_location` in a snapshot); writes through the
//! result go to every place, or to none when one cannot be written.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;

use locus_dwarf::{
    parse_text, Encoding, Entry, Error, Evaluation, LocationDescription, SingleLocation, Storage,
    Target,
};

/// Register 3 (4 bytes), memory at 0x1000 of spaces 0 and 1, and an object
/// that is either a location description or an address.
#[derive(Default)]
struct Object {
    registers: BTreeMap<u16, Vec<u8>>,
    location: Option<LocationDescription>,
    address: Option<u64>,
}

impl Target for Object {
    fn read_memory(&mut self, _space: u64, _address: u64, _buf: &mut [u8]) -> bool {
        false
    }
    fn read_register(&mut self, register: u16, at: u64, buf: &mut [u8]) -> bool {
        let at = at as usize;
        match self
            .registers
            .get(&register)
            .and_then(|r| r.get(at..at + buf.len()))
        {
            Some(b) => {
                buf.copy_from_slice(b);
                true
            }
            None => false,
        }
    }
    fn register_sizes(&mut self, each: &mut dyn FnMut(u16, u64)) {
        for (r, bytes) in &self.registers {
            each(*r, bytes.len() as u64);
        }
    }
    fn object_address(&mut self) -> Result<u64, locus_dwarf::Unavailable> {
        self.address.ok_or(locus_dwarf::Unavailable::Missing)
    }
    fn object_location(&mut self) -> Option<LocationDescription> {
        self.location.clone()
    }
}

fn three_places() -> LocationDescription {
    LocationDescription {
        places: vec![
            SingleLocation {
                storage: Storage::Register(3),
                bit_offset: 0,
            },
            SingleLocation::memory(0, 0x1000),
            SingleLocation::memory(1, 0x1000),
        ]
        .into(),
    }
}

fn evaluate(text: &str, target: &mut Object, encoding: Encoding) -> Result<Entry, Error> {
    let ops = parse_text(text, |_| None)?;
    let mut eval = Evaluation::new(&ops, encoding);
    eval.evaluate_with(target)?;
    Ok(eval.result().cloned().unwrap())
}

#[test]
fn push_object_address_pushes_every_place_of_the_object() {
    let mut t = Object {
        location: Some(three_places()),
        address: Some(0x2000),
        ..Object::default()
    };
    t.registers.insert(3, vec![0; 4]);
    // The location takes precedence over the address.
    let e = evaluate("DW_OP_push_object_address", &mut t, Encoding::default()).unwrap();
    assert_eq!(e, Entry::Location(three_places()));
    // An offset moves every place.
    let e = evaluate(
        "DW_OP_push_object_address DW_OP_LLVM_offset_uconst 2",
        &mut t,
        Encoding::default(),
    )
    .unwrap();
    let Entry::Location(l) = e else {
        panic!("{e:?}")
    };
    let offsets: Vec<u128> = l.places.iter().map(|p| p.bit_offset).collect();
    assert_eq!(offsets, [16, 0x1002 * 8, 0x1002 * 8]);
    // Past the end of the 4-byte register: an evaluation error of the offset.
    let e = evaluate(
        "DW_OP_push_object_address DW_OP_LLVM_offset_uconst 5",
        &mut t,
        Encoding::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("op #1 DW_OP_offset_uconst: offset moves"),
        "{e}"
    );
}

#[test]
fn without_an_object_location_the_address_answers() {
    let mut t = Object {
        address: Some(0x1_0000_2000),
        ..Object::default()
    };
    let e = evaluate("DW_OP_push_object_address", &mut t, Encoding::default()).unwrap();
    assert_eq!(
        e,
        Entry::Location(LocationDescription::memory(0, 0x1_0000_2000))
    );
    // Cut to the address size, as `resume_with_object_address` does.
    let four = Encoding {
        address_size: 4,
        ..Encoding::default()
    };
    let e = evaluate("DW_OP_push_object_address", &mut t, four).unwrap();
    assert_eq!(e, Entry::Location(LocationDescription::memory(0, 0x2000)));
    let mut none = Object::default();
    let e = evaluate("DW_OP_push_object_address", &mut none, Encoding::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "op #0 DW_OP_push_object_address: object address is not in the target"
    );
}

#[cfg(feature = "binary")]
mod snapshot {
    use super::*;
    use locus_dwarf::access::{read, write};
    use locus_dwarf::binary::{MemoryBlock, Snapshot};

    fn snapshot(object: LocationDescription) -> Snapshot {
        let mut s = Snapshot {
            object_location: Some(object),
            ..Snapshot::default()
        };
        s.registers.insert(3, vec![0x11, 0x22, 0x33, 0x44]);
        for space in [0, 1] {
            s.memory.push(MemoryBlock {
                space,
                address: 0x1000,
                bytes: vec![0x55, 0x66, 0x77, 0x88],
            });
        }
        s
    }

    fn location_of(snap: &Snapshot, text: &str) -> LocationDescription {
        let ops = parse_text(text, |_| None).unwrap();
        let mut eval = Evaluation::new(&ops, Encoding::default());
        eval.evaluate_with(&mut snap.state()).unwrap();
        eval.location_result().unwrap()
    }

    #[test]
    fn writes_through_the_object_go_to_every_place() {
        let snap = snapshot(three_places());
        let loc = location_of(&snap, "DW_OP_push_object_address");
        assert_eq!(loc, three_places());
        let mut after = snap.clone();
        write(&loc, &[0xaa, 0xbb, 0xcc, 0xdd], 32, &mut after).unwrap();
        assert_eq!(after.registers[&3], [0xaa, 0xbb, 0xcc, 0xdd]);
        for b in &after.memory {
            assert_eq!(b.bytes, [0xaa, 0xbb, 0xcc, 0xdd], "space {}", b.space);
        }
        assert_eq!(
            read(&loc, 32, &mut after).unwrap().bytes(),
            [0xaa, 0xbb, 0xcc, 0xdd]
        );
        // Through an offset: the last two bytes of each place.
        let loc = location_of(
            &snap,
            "DW_OP_push_object_address DW_OP_LLVM_offset_uconst 2",
        );
        let mut after = snap.clone();
        write(&loc, &[1, 2], 16, &mut after).unwrap();
        assert_eq!(after.registers[&3], [0x11, 0x22, 1, 2]);
        for b in &after.memory {
            assert_eq!(b.bytes, [0x55, 0x66, 1, 2], "space {}", b.space);
        }
    }

    #[test]
    fn an_implicit_place_refuses_the_write_before_any_place_is_written() {
        let mut object = three_places();
        object.places.push(SingleLocation {
            storage: Storage::Implicit(vec![9, 9, 9, 9].into()),
            bit_offset: 0,
        });
        let snap = snapshot(object.clone());
        let loc = location_of(&snap, "DW_OP_push_object_address");
        assert_eq!(loc, object);
        let mut after = snap.clone();
        let e = write(&loc, &[0xaa, 0xbb, 0xcc, 0xdd], 32, &mut after).unwrap_err();
        assert!(e.to_string().contains("implicit"), "{e}");
        // The register and both memory places, before the implicit one, are unchanged.
        assert_eq!(after, snap);
        // Undefined storage likewise.
        let mut object = three_places();
        object.places.push(SingleLocation {
            storage: Storage::Undefined,
            bit_offset: 0,
        });
        let snap = snapshot(object);
        let loc = location_of(&snap, "DW_OP_push_object_address");
        let mut after = snap.clone();
        assert!(write(&loc, &[1], 8, &mut after).is_err());
        assert_eq!(after, snap);
    }
}
