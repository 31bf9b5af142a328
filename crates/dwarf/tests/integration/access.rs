//! Reading and writing through location descriptions at bit granularity
//! (`locus_dwarf::access`): registers, memory in address spaces, implicit
//! bytes, undefined storage, nested composites, multiple places.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::eval_support;
use locus_dwarf::ErrorDetail;

use eval_support::{evaluate, Ctx};
use locus_dwarf::access::{read, write, Bits};
use locus_dwarf::{parse_text, Encoding, ErrorKind, Location, Part, SingleLocation, Storage};

fn ctx() -> Ctx {
    let mut c = Ctx::default();
    c.registers.insert(1, vec![0x11, 0x22, 0x33, 0x44]);
    c.registers
        .insert(2, vec![0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5, 0x06, 0x17]);
    c.memory.push((0, 0x1000, (0u8..32).collect()));
    c.memory.push((3, 0x40, vec![0x99, 0x88, 0x77, 0x66]));
    c
}

fn reg(r: u16, bit_offset: u128) -> Location {
    Location::single(Storage::Register(r), bit_offset)
}

fn part(location: Location, bit_size: u64) -> Part {
    Part { location, bit_size }
}

fn hex(loc: &Location, bytes: u64, c: &mut Ctx) -> String {
    read(loc, bytes * 8, c).unwrap().to_hex()
}

#[test]
fn reads_each_storage_kind() {
    let mut c = ctx();
    assert_eq!(hex(&reg(1, 8), 2, &mut c), "2233");
    assert_eq!(hex(&Location::memory(0, 0x1004), 3, &mut c), "040506");
    assert_eq!(hex(&Location::memory(3, 0x41), 2, &mut c), "8877");
    let imp = Location::single(Storage::Implicit(vec![1, 2, 3].into()), 8);
    // Past the end of implicit storage: undefined, not invented.
    assert_eq!(hex(&imp, 3, &mut c), "0203??");
    assert_eq!(hex(&Location::undefined(), 2, &mut c), "????");
    let ptr = Location::single(
        Storage::ImplicitPointer {
            die: 1,
            byte_offset: 0,
            address_space: None,
        },
        0,
    );
    assert_eq!(hex(&ptr, 1, &mut c), "??");
}

#[test]
fn bit_offsets_and_masks() {
    let mut c = ctx();
    // 12 bits starting at bit 4 of register 1 (0x4433_2211): 0x221.
    let bits = read(&reg(1, 4), 12, &mut c).unwrap();
    assert_eq!(bits.bit_len(), 12);
    assert_eq!(bits.bytes(), [0x21, 0x02]);
    assert!(bits.is_fully_defined());
    assert_eq!(bits.byte(1), Some(0x02));
    // A composite of 4 register bits and 4 undefined bits: byte 0 is
    // partly defined, so it prints ?? but its mask says which bits are known.
    let loc = Location::composite(vec![
        part(reg(1, 0), 4),
        part(Location::undefined(), 4),
        part(reg(2, 0), 8),
    ]);
    let bits = read(&loc, 16, &mut c).unwrap();
    assert_eq!(bits.to_hex(), "??a0");
    assert_eq!(bits.defined_mask(), [0x0f, 0xff]);
    assert_eq!(bits.bytes()[0] & 0x0f, 0x1);
    assert!(bits.is_bit_defined(3) && !bits.is_bit_defined(4));
}

#[test]
fn nested_composites_and_bits_past_the_end() {
    let mut c = ctx();
    let inner = Location::composite(vec![
        part(Location::memory(0, 0x1010), 8),
        part(reg(2, 8), 8),
    ]);
    // Offset 8 bits into the inner composite: starts at its second part.
    let inner_at_1 = Location::single(
        Storage::Composite(inner.places[0].storage.clone().into_parts()),
        8,
    );
    let outer = Location::composite(vec![
        part(inner_at_1, 8),
        part(inner, 16),
        part(reg(1, 24), 8),
    ]);
    // b1 | 10 b1 | 44 | past the end ??
    assert_eq!(hex(&outer, 5, &mut c), "b110b144??");
}

trait IntoParts {
    fn into_parts(self) -> Vec<Part>;
}

impl IntoParts for Storage {
    fn into_parts(self) -> Vec<Part> {
        match self {
            Storage::Composite(p) => p,
            _ => panic!(),
        }
    }
}

#[test]
fn multiple_places_read_the_first_readable() {
    let mut c = ctx();
    let loc = Location {
        places: vec![
            SingleLocation::memory(0, 0x9000), // unmapped
            SingleLocation {
                storage: Storage::Register(1),
                bit_offset: 0,
            },
        ]
        .into(),
    };
    assert_eq!(hex(&loc, 2, &mut c), "1122");
    // None readable: the error names the last one.
    let loc = Location::memory(0, 0x9000);
    match read(&loc, 8, &mut c).map_err(locus_dwarf::Error::into_detail) {
        Err(ErrorDetail::Access {
            kind:
                ErrorKind::MemoryUnavailable {
                    address_space: 0,
                    address: 0x9000,
                    size: 1,
                },
        }) => {}
        other => panic!("{other:?}"),
    }
    let e = read(&reg(7, 0), 8, &mut c).unwrap_err();
    assert_eq!(e.to_string(), "access: cannot access register 7");
    assert!(!e.is_ill_formed());
}

#[test]
fn writes_go_to_every_place_at_bit_granularity() {
    let mut c = ctx();
    // A variable in register 1 bits 4..20 and, at the same time, memory.
    let loc = Location {
        places: vec![
            SingleLocation {
                storage: Storage::Register(1),
                bit_offset: 4,
            },
            SingleLocation::memory(0, 0x1000),
        ]
        .into(),
    };
    write(&loc, &[0xcd, 0xab], 16, &mut c).unwrap();
    // Register 1: 0x44332211 with bits 4..20 = 0xabcd -> 0x443abcd1.
    assert_eq!(c.registers[&1], [0xd1, 0xbc, 0x3a, 0x44]);
    assert_eq!(c.read(0, 0x1000, 3).unwrap(), [0xcd, 0xab, 2]);
    // Through a composite spanning a register and another address space.
    let comp = Location::composite(vec![
        part(reg(2, 4), 4),
        part(Location::memory(3, 0x42), 12),
    ]);
    write(&comp, &[0x5f, 0xe3], 16, &mut c).unwrap();
    assert_eq!(c.registers[&2][0], 0xf0, "low nibble kept, high nibble 0xf");
    // The next 12 bits (0xe35) go to 0x42 (8 bits) and half of 0x43.
    assert_eq!(c.read(3, 0x42, 2).unwrap(), [0x35, 0x6e]);
    assert_eq!(read(&comp, 16, &mut c).unwrap().bytes(), [0x5f, 0xe3]);
}

#[test]
fn writes_to_implicit_or_undefined_storage_fail_before_writing() {
    let mut c = ctx();
    let before = c.registers.clone();
    for other in [
        Location::single(Storage::Implicit(vec![0; 4].into()), 0),
        Location::undefined(),
    ] {
        let loc = Location::composite(vec![part(reg(1, 0), 8), part(other, 8)]);
        let e = write(&loc, &[1, 2], 16, &mut c).unwrap_err();
        assert!(
            matches!(
                e.clone().into_detail(),
                ErrorDetail::Access {
                    kind: ErrorKind::NotWritable(_)
                }
            ),
            "{e:?}"
        );
    }
    assert_eq!(c.registers, before);
    // Past the end of a composite.
    let loc = Location::composite(vec![part(reg(1, 0), 8)]);
    assert!(write(&loc, &[1, 2], 16, &mut c).is_err());
    // Data shorter than the bit length.
    assert!(write(&reg(1, 0), &[1], 16, &mut c).is_err());
    // Writing a register the target does not know.
    let e = write(&reg(9, 0), &[1], 8, &mut c).unwrap_err();
    assert_eq!(e.to_string(), "access: cannot access register 9");
}

#[test]
fn the_spec_mixed_composite_reads_through() {
    // "Source Language Variable Spread Across Multiple Kinds of Locations"
    // with VGPR0 = register 2 (two 4-byte lanes), lane 1.
    let text = "DW_OP_regx 2 DW_OP_push_lane DW_OP_uconst 4 DW_OP_mul DW_OP_offset DW_OP_piece 4
        DW_OP_addr 0x1002 DW_OP_piece 2 DW_OP_uconst 0xf00d DW_OP_stack_value DW_OP_piece 2 DW_OP_piece_end";
    let ops = parse_text(text, |_| None).unwrap();
    let mut c = ctx();
    c.lane = 1;
    let eval = evaluate(&ops, &mut c, Encoding::default()).unwrap();
    let loc = eval.location_result().unwrap();
    assert_eq!(
        hex(&loc, 8, &mut c),
        "e4f50617".to_owned() + "0203" + "0df0"
    );
    // Reading past the composite's end is undefined.
    assert_eq!(hex(&loc, 9, &mut c), "e4f5061702030df0??");
    // Writing fails: the last part is implicit.
    assert!(write(&loc, &[0; 8], 64, &mut c).is_err());
    // The first 6 bytes are writable.
    write(&loc, &[1, 2, 3, 4, 5, 6], 48, &mut c).unwrap();
    assert_eq!(c.registers[&2][4..], [1, 2, 3, 4]);
    assert_eq!(c.read(0, 0x1002, 2).unwrap(), [5, 6]);
}

#[test]
fn bits_helpers() {
    let b = Bits::from_bytes(&[0xab, 0x01]);
    assert_eq!(b.to_hex(), "ab01");
    assert!(b.is_fully_defined());
    let u = Bits::undefined(12).unwrap();
    assert_eq!(u.to_hex(), "????");
    assert!(Bits::undefined(u64::MAX).is_err());
    assert!(read(&Location::undefined(), u64::MAX, &mut ctx()).is_err());
}

proptest::proptest! {
    /// Write then read gives back the bits, for random bit offsets and
    /// lengths through a composite of two registers and memory.
    #[test]
    fn write_then_read_round_trips(
        off in 0u64..24, len in 1u64..40, data in proptest::collection::vec(proptest::prelude::any::<u8>(), 5),
        split1 in 1u64..20, split2 in 1u64..20,
    ) {
        let mut c = ctx();
        c.registers.insert(1, vec![0; 8]);
        c.registers.insert(2, vec![0xff; 8]);
        let comp = Location::composite(vec![
            part(reg(1, u128::from(off % 7)), split1),
            part(reg(2, 3), split2),
            part(Location::memory(0, 0x1003), 64),
        ]);
        let loc = Location::single(
            match comp.places[0].storage.clone() { s @ Storage::Composite(_) => s, _ => unreachable!() },
            u128::from(off),
        );
        write(&loc, &data, len, &mut c).unwrap();
        let bits = read(&loc, len, &mut c).unwrap();
        proptest::prop_assert!(bits.is_fully_defined());
        for i in 0..len {
            let want = data[(i / 8) as usize] >> (i % 8) & 1;
            let got = bits.bytes()[(i / 8) as usize] >> (i % 8) & 1;
            proptest::prop_assert_eq!(want, got, "bit {}", i);
        }
    }
}
