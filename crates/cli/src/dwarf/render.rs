//! How locations and values look: the JSON shapes of `locus dwarf eval` and
//! the trace's drawings of stack entries.

use locus_dwarf::{Entry, Location, SingleLocation, Storage, Value, ValueType};
use serde_json::{json, Value as Json};

use super::context::hex;

/// A number that may not fit JSON's usual u64 range.
fn big(n: u128) -> Json {
    match u64::try_from(n) {
        Ok(n) => json!(n),
        Err(_) => json!(n.to_string()),
    }
}

/// `generic`, `signed 4`, `unsigned 8`, ...: the value type's debug name,
/// lowercased, so new kinds of types print without changes here.
pub fn type_name(ty: ValueType) -> String {
    format!("{ty:?}")
        .to_lowercase()
        .replace('(', " ")
        .replace(')', "")
}

/// The JSON of one single location.
pub fn single_json(p: &SingleLocation) -> Json {
    match &p.storage {
        Storage::Memory { address_space } => json!({
            "storage": "memory", "space": address_space, "bit_offset": big(p.bit_offset)
        }),
        Storage::Register(r) => json!({
            "storage": "register", "register": r, "bit_offset": big(p.bit_offset)
        }),
        Storage::Implicit(bytes) => json!({
            "storage": "implicit", "bytes": hex(bytes), "bit_offset": big(p.bit_offset)
        }),
        Storage::ImplicitPointer {
            die, byte_offset, ..
        } => json!({
            "storage": "implicit_pointer", "die": die, "byte_offset": byte_offset
        }),
        Storage::Undefined => json!({"storage": "undefined", "bit_offset": big(p.bit_offset)}),
        Storage::Composite(parts) => {
            let parts: Vec<Json> = parts
                .iter()
                .map(|part| json!({"bit_size": part.bit_size, "location": location_json(&part.location)}))
                .collect();
            json!({"storage": "composite", "bit_offset": big(p.bit_offset), "parts": parts})
        }
    }
}

/// The JSON list of a location description's places.
pub fn location_json(l: &Location) -> Json {
    Json::Array(l.places.iter().map(single_json).collect())
}

/// A value as target-order hex bytes.
pub fn value_hex(v: &Value, address_size: u8) -> String {
    hex(&v.to_bytes(address_size))
}

/// One single location, as the spec's figures draw it: storage, then the
/// offset, composites with their parts in order.
pub fn draw_single(p: &SingleLocation) -> String {
    let off = |what: String| {
        if p.bit_offset.is_multiple_of(8) {
            format!("{what} +{} bytes", p.bit_offset / 8)
        } else {
            format!("{what} +{} bits", p.bit_offset)
        }
    };
    match &p.storage {
        Storage::Memory { address_space } => {
            let addr = p.bit_offset / 8;
            let bits = p.bit_offset % 8;
            let space = if *address_space == 0 {
                String::new()
            } else {
                format!(" (space {address_space})")
            };
            if bits == 0 {
                format!("memory{space} @ {addr:#x}")
            } else {
                format!("memory{space} @ {addr:#x} +{bits} bits")
            }
        }
        Storage::Register(r) => off(format!("register {r}")),
        Storage::Implicit(bytes) => off(format!("implicit [{}]", hex(bytes))),
        Storage::ImplicitPointer {
            die, byte_offset, ..
        } => {
            format!("implicit pointer to DIE {die:#x} +{byte_offset}")
        }
        Storage::Undefined => "undefined".to_string(),
        Storage::Composite(parts) => {
            let parts: Vec<String> = parts
                .iter()
                .map(|part| format!("{} bits: {}", part.bit_size, draw_location(&part.location)))
                .collect();
            off(format!("composite {{ {} }}", parts.join(" | ")))
        }
    }
}

/// A location description: its places, `or` between them.
pub fn draw_location(l: &Location) -> String {
    let places: Vec<String> = l.places.iter().map(draw_single).collect();
    if places.is_empty() {
        "(no places)".to_string()
    } else {
        places.join(" or ")
    }
}

/// One stack entry.
pub fn draw_entry(e: &Entry, address_size: u8) -> String {
    match e {
        Entry::Value(v) => format!(
            "value {} {:#x}",
            type_name(v.ty),
            u64::from_le_bytes({
                let mut b = [0u8; 8];
                for (d, s) in b.iter_mut().zip(v.to_bytes(address_size)) {
                    *d = s;
                }
                b
            })
        ),
        Entry::Location(l) => format!("location {}", draw_location(l)),
    }
}

/// Operations on one line, `; `-separated; an entry value's nested expression is
/// disassembled too: `DW_OP_entry_value [55] (DW_OP_reg5)`.
pub fn ops_text(ops: &[locus_dwarf::Op], encoding: locus_dwarf::Encoding) -> String {
    ops.iter()
        .map(|op| {
            let text = locus_dwarf::to_text(std::slice::from_ref(op));
            match op {
                locus_dwarf::Op::EntryValue(block) => match locus_dwarf::decode(block, encoding) {
                    Ok(inner) => {
                        let inner: Vec<locus_dwarf::Op> =
                            inner.into_iter().map(|(_, op)| op).collect();
                        format!("{text} ({})", ops_text(&inner, encoding))
                    }
                    Err(_) => text,
                },
                _ => text,
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
