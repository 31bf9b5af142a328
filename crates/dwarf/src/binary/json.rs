//! The CTX.json / SNAP.json format: registers, memory, lane and, for
//! `locus dwarf vars`, the CFA, frame base and registers at function entry.
//!
//! ```json
//! {"address_size": 8,
//!  "registers": {"NAME": {"number": N, "value": "HEX"}},
//!  "memory": [{"space": 0, "address": N, "bytes": "HEX"}],
//!  "lane": N, "iteration": N, "cfa": N, "frame_base": N, "object_address": N,
//!  "object_location": [PLACE, ...],
//!  "entry_registers": {"NAME": {"number": N, "value": "HEX"}}}
//! ```
//! Numbers may also be strings, decimal or `0x` hex. Bytes are in target
//! (little-endian) order. "object_location" is what `DW_OP_push_object_address`
//! pushes when the object is more than an address in global memory (it takes
//! precedence over "object_address"): a location description of one or more
//! places, each in the shape `locus dwarf eval` prints a location's places
//! (`{"storage": "memory", "space": S, "address": A}`, `{"storage": "register",
//! "register": N or NAME}`, `{"storage": "implicit", "bytes": "HEX"}`,
//! `{"storage": "undefined"}`, `{"storage": "implicit_pointer", "die": D,
//! "byte_offset": O}`, `{"storage": "composite", "parts": [{"bit_size": B,
//! "location": [PLACE, ...]}]}`, each with an optional "bit_offset"; for
//! memory it is the whole offset, the address times 8). Writes through it
//! (`eval --write`) go to every place. `locus dwarf snapshot` adds "pc", "load_bias" (which
//! `vars --snapshot` uses when `--pc`/`--load-bias` are not given), "thread",
//! "tid", "frame" and "module"; other keys are ignored.

extern crate std;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::{MemoryBlock, Snapshot};
use crate::{Location, LocationDescription, Part, Places, SingleLocation, Storage};
use serde_json::{json, Value};

/// A parsed context: the snapshot plus the register names it defines.
#[derive(Default)]
pub struct Context {
    /// What the evaluator's requests are answered from.
    pub snapshot: Snapshot,
    /// Register names → DWARF numbers, for the text syntax.
    pub names: BTreeMap<String, u16>,
}

/// Parses `0x`-hex or decimal.
pub fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses hex bytes, ignoring whitespace.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let digits = digits
        .strip_prefix(b"0x".as_slice())
        .unwrap_or(digits.as_slice());
    if digits.len() % 2 != 0 {
        return Err(format!("`{s}`: odd number of hex digits"));
    }
    digits
        .chunks(2)
        .map(|p| {
            core::str::from_utf8(p)
                .ok()
                .and_then(|t| u8::from_str_radix(t, 16).ok())
                .ok_or_else(|| format!("`{s}`: not hex"))
        })
        .collect()
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn number(v: &Value, what: &str) -> Result<u64, String> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| format!("{what}: not a u64")),
        Value::String(s) => parse_number(s).ok_or_else(|| format!("{what}: `{s}` is not a number")),
        _ => Err(format!("{what}: expected a number")),
    }
}

fn registers(
    v: &Value,
    what: &str,
    names: &mut BTreeMap<String, u16>,
) -> Result<BTreeMap<u16, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    let Some(map) = v.as_object() else {
        return Err(format!("{what}: expected an object"));
    };
    for (name, r) in map {
        let n = r
            .get("number")
            .ok_or_else(|| format!("{what}.{name}: no \"number\""))?;
        let n = number(n, &format!("{what}.{name}.number"))?;
        let n =
            u16::try_from(n).map_err(|_| format!("{what}.{name}: register number too large"))?;
        let value = r
            .get("value")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{what}.{name}: no \"value\" hex string"))?;
        out.insert(n, parse_hex(value)?);
        names.insert(name.clone(), n);
    }
    Ok(out)
}

/// A bit offset: a number, or a bigger one as a decimal string (as
/// `eval` prints them).
fn bit_offset(v: &Value, what: &str) -> Result<u128, String> {
    match v {
        Value::String(s) if !s.trim().starts_with("0x") && !s.trim().starts_with("0X") => s
            .trim()
            .parse()
            .map_err(|_| format!("{what}: `{s}` is not a number")),
        other => number(other, what).map(u128::from),
    }
}

/// One place of a location description in the JSON shape `eval` prints
/// (`render::single_json`); register names are those of `names`.
fn place(v: &Value, what: &str, names: &BTreeMap<String, u16>) -> Result<SingleLocation, String> {
    let storage = v
        .get("storage")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what}: no \"storage\" string"))?;
    let offset = match v.get("bit_offset") {
        Some(b) => Some(bit_offset(b, &format!("{what}.bit_offset"))?),
        None => None,
    };
    let (storage, bit_offset) = match storage {
        "memory" => {
            let space = match v.get("space") {
                Some(s) => number(s, &format!("{what}.space"))?,
                None => 0,
            };
            let address = match v.get("address") {
                Some(a) => Some(number(a, &format!("{what}.address"))?),
                None => None,
            };
            let bits = match (address, offset) {
                (Some(a), Some(b)) if u128::from(a) != b / 8 => {
                    return Err(format!(
                        "{what}: \"address\" {a:#x} and \"bit_offset\" {b} disagree (bit_offset is the address times 8)"
                    ))
                }
                (_, Some(b)) => b,
                (Some(a), None) => u128::from(a) * 8,
                (None, None) => return Err(format!("{what}: no \"address\"")),
            };
            (Storage::Memory { address_space: space }, bits)
        }
        "register" => {
            let r = v
                .get("register")
                .ok_or_else(|| format!("{what}: no \"register\""))?;
            let n = match r.as_str().and_then(|name| names.get(name)) {
                Some(&n) => n,
                None => {
                    let n = number(r, &format!("{what}.register"))?;
                    u16::try_from(n).map_err(|_| format!("{what}: register number too large"))?
                }
            };
            (Storage::Register(n), offset.unwrap_or(0))
        }
        "implicit" => {
            let bytes = v
                .get("bytes")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{what}: no \"bytes\" hex string"))?;
            (
                Storage::Implicit(parse_hex(bytes)?.into()),
                offset.unwrap_or(0),
            )
        }
        "implicit_pointer" => {
            let die = number(
                v.get("die").ok_or_else(|| format!("{what}: no \"die\""))?,
                &format!("{what}.die"),
            )?;
            let byte_offset = match v.get("byte_offset") {
                None => 0,
                Some(Value::Number(n)) => n
                    .as_i64()
                    .ok_or_else(|| format!("{what}.byte_offset: not an i64"))?,
                Some(o) => number(o, &format!("{what}.byte_offset"))? as i64,
            };
            let address_space = match v.get("space") {
                Some(s) => Some(number(s, &format!("{what}.space"))?),
                None => None,
            };
            (
                Storage::ImplicitPointer {
                    die,
                    byte_offset,
                    address_space,
                },
                offset.unwrap_or(0),
            )
        }
        "undefined" => (Storage::Undefined, offset.unwrap_or(0)),
        "composite" => {
            let parts = v
                .get("parts")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{what}: no \"parts\" array"))?;
            let parts = parts
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let at = format!("{what}.parts[{i}]");
                    let bit_size = number(
                        p.get("bit_size")
                            .ok_or_else(|| format!("{at}: no \"bit_size\""))?,
                        &format!("{at}.bit_size"),
                    )?;
                    let location = location(
                        p.get("location")
                            .ok_or_else(|| format!("{at}: no \"location\""))?,
                        &format!("{at}.location"),
                        names,
                    )?;
                    Ok(Part { location, bit_size })
                })
                .collect::<Result<Vec<Part>, String>>()?;
            (Storage::Composite(parts), offset.unwrap_or(0))
        }
        other => {
            return Err(format!(
                "{what}: unknown storage `{other}` (memory, register, implicit, implicit_pointer, undefined, composite)"
            ))
        }
    };
    Ok(SingleLocation {
        storage,
        bit_offset,
    })
}

/// A location description: a list of places (or one place), as `eval`
/// prints a location.
pub fn location(
    v: &Value,
    what: &str,
    names: &BTreeMap<String, u16>,
) -> Result<LocationDescription, String> {
    let places: Vec<SingleLocation> = match v {
        Value::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, p)| place(p, &format!("{what}[{i}]"), names))
            .collect::<Result<_, _>>()?,
        Value::Object(_) => vec![place(v, what, names)?],
        _ => return Err(format!("{what}: expected a list of places")),
    };
    if places.is_empty() {
        return Err(format!(
            "{what}: a location description has at least one place"
        ));
    }
    Ok(LocationDescription {
        places: Places::from(places),
    })
}

impl Context {
    /// Parses the JSON text of a context file.
    pub fn parse(text: &str) -> Result<Context, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if !doc.is_object() {
            return Err("expected a JSON object".into());
        }
        let mut c = Context::default();
        if let Some(a) = doc.get("address_size") {
            let a = number(a, "address_size")?;
            if a != 4 && a != 8 {
                return Err("address_size must be 4 or 8".into());
            }
            c.snapshot.address_size = a as u8;
        }
        if let Some(r) = doc.get("registers") {
            c.snapshot.registers = registers(r, "registers", &mut c.names)?;
        }
        if let Some(r) = doc.get("entry_registers") {
            let mut ignored = BTreeMap::new();
            c.snapshot.entry_registers = registers(r, "entry_registers", &mut ignored)?;
        }
        if let Some(m) = doc.get("memory") {
            let list = m.as_array().ok_or("memory: expected an array")?;
            for (i, b) in list.iter().enumerate() {
                let space = match b.get("space") {
                    Some(s) => number(s, &format!("memory[{i}].space"))?,
                    None => 0,
                };
                let address = number(
                    b.get("address")
                        .ok_or_else(|| format!("memory[{i}]: no \"address\""))?,
                    &format!("memory[{i}].address"),
                )?;
                let bytes = b
                    .get("bytes")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("memory[{i}]: no \"bytes\" hex string"))?;
                c.snapshot.memory.push(MemoryBlock {
                    space,
                    address,
                    bytes: parse_hex(bytes)?,
                });
            }
        }
        for (key, slot) in [
            ("lane", &mut c.snapshot.lane),
            ("iteration", &mut c.snapshot.iteration),
            ("cfa", &mut c.snapshot.cfa),
            ("frame_base", &mut c.snapshot.frame_base),
            ("object_address", &mut c.snapshot.object_address),
        ] {
            if let Some(v) = doc.get(key) {
                *slot = Some(number(v, key)?);
            }
        }
        if let Some(l) = doc.get("object_location") {
            c.snapshot.object_location = Some(location(l, "object_location", &c.names)?);
        }
        Ok(c)
    }
}

fn registers_json(registers: &BTreeMap<u16, Vec<u8>>, names: &BTreeMap<String, u16>) -> Value {
    let mut out = serde_json::Map::new();
    for (n, bytes) in registers {
        let name = names
            .iter()
            .find(|(_, &m)| m == *n)
            .map_or_else(|| format!("r{n}"), |(name, _)| name.clone());
        out.insert(name, serde_json::json!({"number": n, "value": hex(bytes)}));
    }
    Value::Object(out)
}

impl Context {
    /// A snapshot in the CTX.json format [`Context::parse`] reads, registers under the
    /// names in `names` (`rN` for the others): what `locus dwarf eval --write` prints.
    pub fn to_json(snapshot: &Snapshot, names: &BTreeMap<String, u16>) -> Value {
        let memory: Vec<Value> = snapshot
            .memory
            .iter()
            .map(|b| serde_json::json!({"space": b.space, "address": b.address, "bytes": hex(&b.bytes)}))
            .collect();
        let mut doc = serde_json::json!({
            "address_size": snapshot.address_size,
            "registers": registers_json(&snapshot.registers, names),
            "memory": memory,
        });
        if !snapshot.entry_registers.is_empty() {
            doc["entry_registers"] = registers_json(&snapshot.entry_registers, names);
        }
        for (key, v) in [
            ("lane", snapshot.lane),
            ("iteration", snapshot.iteration),
            ("cfa", snapshot.cfa),
            ("frame_base", snapshot.frame_base),
            ("object_address", snapshot.object_address),
        ] {
            if let Some(v) = v {
                doc[key] = serde_json::json!(v);
            }
        }
        if let Some(l) = &snapshot.object_location {
            doc["object_location"] = location_json(l);
        }
        doc
    }
}

/// A number that may not fit JSON's usual u64 range.
fn big(n: u128) -> Value {
    match u64::try_from(n) {
        Ok(n) => json!(n),
        Err(_) => json!(n.to_string()),
    }
}

/// The JSON of one single location.
pub fn single_json(p: &SingleLocation) -> Value {
    match &p.storage {
        Storage::Memory { address_space } => json!({
            "storage": "memory", "space": address_space, "bit_offset": big(p.bit_offset),
            "address": format!("{:#x}", p.bit_offset / 8)
        }),
        Storage::Register(r) => json!({
            "storage": "register", "register": r, "bit_offset": big(p.bit_offset)
        }),
        Storage::Implicit(bytes) => json!({
            "storage": "implicit", "bytes": hex(bytes), "bit_offset": big(p.bit_offset)
        }),
        Storage::ImplicitPointer {
            die,
            byte_offset,
            address_space,
        } => {
            let mut place = json!({
                "storage": "implicit_pointer", "die": die, "byte_offset": byte_offset,
                "bit_offset": big(p.bit_offset)
            });
            // DW_OP_aspace_implicit_pointer's address space (none for DW_OP_implicit_pointer).
            if let Some(space) = address_space {
                place["space"] = json!(space);
            }
            place
        }
        Storage::Undefined => json!({"storage": "undefined", "bit_offset": big(p.bit_offset)}),
        Storage::Composite(parts) => {
            let parts: Vec<Value> = parts
                .iter()
                .map(|part| json!({"bit_size": part.bit_size, "location": location_json(&part.location)}))
                .collect();
            json!({"storage": "composite", "bit_offset": big(p.bit_offset), "parts": parts})
        }
    }
}

/// The JSON list of a location description's places.
pub fn location_json(l: &Location) -> Value {
    Value::Array(l.places.iter().map(single_json).collect())
}
