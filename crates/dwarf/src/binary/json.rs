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
//!
//! Errors are [`ErrorDetail::Json`]: a [`JsonErrorKind`] and the key path of the value at
//! fault.
//!
//! ```
//! use locus_dwarf::binary::json::{location_json, Context};
//! use locus_dwarf::{Error, ErrorDetail, JsonErrorKind};
//!
//! let ctx = Context::parse(
//!     r#"{"registers": {"rsp": {"number": 7, "value": "00e0ffffff7f0000"}},
//!         "memory": [{"address": "0x7fffffffe000", "bytes": "2a000000"}],
//!         "object_location": [{"storage": "register", "register": "rsp"}]}"#,
//! )?;
//! assert_eq!(ctx.names["rsp"], 7);
//! assert_eq!(ctx.snapshot.memory[0].bytes, [42, 0, 0, 0]);
//! let object = ctx.snapshot.object_location.as_ref().expect("given");
//! assert_eq!(location_json(object)[0]["register"], 7);
//! // What `Context::to_json` writes reads back as the same snapshot.
//! let again = Context::parse(&Context::to_json(&ctx.snapshot, &ctx.names).to_string())?;
//! assert_eq!(again.snapshot, ctx.snapshot);
//!
//! let e = Context::parse(r#"{"memory": [{"address": 16, "bytes": "2a0"}]}"#).unwrap_err();
//! assert_eq!(
//!     e.detail(),
//!     &ErrorDetail::Json {
//!         at: "memory[0].bytes".into(),
//!         kind: JsonErrorKind::OddHexDigits("2a0".into()),
//!     }
//! );
//! assert_eq!(e.to_string(), "memory[0].bytes: `2a0`: odd number of hex digits");
//! # Ok::<(), Error>(())
//! ```

extern crate std;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::{MemoryBlock, Snapshot};
use crate::ErrorDetail;
use crate::{
    Error, JsonErrorKind, Location, LocationDescription, Part, Places, SingleLocation, Storage,
};
use serde_json::{json, Value};

/// A parsed context: the snapshot plus the register names it defines.
#[derive(Clone, Debug, Default, PartialEq)]
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

/// The error at key path `at`.
fn error(at: &str, kind: JsonErrorKind) -> Error {
    ErrorDetail::Json {
        at: at.to_string(),
        kind,
    }
    .into()
}

/// Parses hex bytes (target order, an optional `0x` first), ignoring whitespace. Errors
/// are [`ErrorDetail::Json`] with an empty key path.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, Error> {
    hex_at(s, "")
}

/// [`parse_hex`] of the value at key path `at`.
fn hex_at(s: &str, at: &str) -> Result<Vec<u8>, Error> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let digits = digits
        .strip_prefix(b"0x".as_slice())
        .unwrap_or(digits.as_slice());
    if digits.len() % 2 != 0 {
        return Err(error(at, JsonErrorKind::OddHexDigits(s.to_string())));
    }
    digits
        .chunks(2)
        .map(|p| {
            core::str::from_utf8(p)
                .ok()
                .and_then(|t| u8::from_str_radix(t, 16).ok())
                .ok_or_else(|| error(at, JsonErrorKind::NotHex(s.to_string())))
        })
        .collect()
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn number(v: &Value, what: &str) -> Result<u64, Error> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| error(what, JsonErrorKind::OutOfRange("a u64"))),
        Value::String(s) => {
            parse_number(s).ok_or_else(|| error(what, JsonErrorKind::NotANumber(s.clone())))
        }
        _ => Err(error(what, JsonErrorKind::Expected("a number"))),
    }
}

/// The value of `key` in `v`; `what` is `v`'s key path.
fn field<'a>(v: &'a Value, key: &'static str, what: &str) -> Result<&'a Value, Error> {
    v.get(key)
        .ok_or_else(|| error(what, JsonErrorKind::Missing(key)))
}

/// The hex string of `key` in `v`, as bytes.
fn hex_field(v: &Value, key: &'static str, what: &str) -> Result<Vec<u8>, Error> {
    let at = format!("{what}.{key}");
    match field(v, key, what)? {
        Value::String(s) => hex_at(s, &at),
        _ => Err(error(&at, JsonErrorKind::Expected("a hex string"))),
    }
}

/// A DWARF register number.
fn register_number(v: &Value, what: &str) -> Result<u16, Error> {
    u16::try_from(number(v, what)?).map_err(|_| error(what, JsonErrorKind::OutOfRange("a u16")))
}

fn registers(
    v: &Value,
    what: &str,
    names: &mut BTreeMap<String, u16>,
) -> Result<BTreeMap<u16, Vec<u8>>, Error> {
    let mut out = BTreeMap::new();
    let Some(map) = v.as_object() else {
        return Err(error(what, JsonErrorKind::Expected("an object")));
    };
    for (name, r) in map {
        let at = format!("{what}.{name}");
        let n = register_number(field(r, "number", &at)?, &format!("{at}.number"))?;
        out.insert(n, hex_field(r, "value", &at)?);
        names.insert(name.clone(), n);
    }
    Ok(out)
}

/// A bit offset: a number, or a bigger one as a decimal string (as
/// `eval` prints them).
fn bit_offset(v: &Value, what: &str) -> Result<u128, Error> {
    match v {
        Value::String(s) if !s.trim().starts_with("0x") && !s.trim().starts_with("0X") => s
            .trim()
            .parse()
            .map_err(|_| error(what, JsonErrorKind::NotANumber(s.clone()))),
        other => number(other, what).map(u128::from),
    }
}

/// The number of an optional key, checked if present.
fn optional(v: &Value, key: &str, what: &str) -> Result<Option<u64>, Error> {
    v.get(key)
        .map(|n| number(n, &format!("{what}.{key}")))
        .transpose()
}

/// One place of a location description in the JSON shape `eval` prints
/// ([`single_json`]); register names are those of `names`.
fn place(v: &Value, what: &str, names: &BTreeMap<String, u16>) -> Result<SingleLocation, Error> {
    let storage = match field(v, "storage", what)? {
        Value::String(s) => s.as_str(),
        _ => {
            return Err(error(
                &format!("{what}.storage"),
                JsonErrorKind::Expected("a string"),
            ))
        }
    };
    let offset = match v.get("bit_offset") {
        Some(b) => Some(bit_offset(b, &format!("{what}.bit_offset"))?),
        None => None,
    };
    let (storage, bit_offset) = match storage {
        "memory" => {
            let space = optional(v, "space", what)?.unwrap_or(0);
            let address = optional(v, "address", what)?;
            let bits = match (address, offset) {
                (Some(a), Some(b)) if u128::from(a) != b / 8 => {
                    return Err(error(
                        what,
                        JsonErrorKind::AddressMismatch {
                            address: a,
                            bit_offset: b,
                        },
                    ))
                }
                (_, Some(b)) => b,
                (Some(a), None) => u128::from(a) * 8,
                (None, None) => return Err(error(what, JsonErrorKind::Missing("address"))),
            };
            (
                Storage::Memory {
                    address_space: space,
                },
                bits,
            )
        }
        "register" => {
            let r = field(v, "register", what)?;
            let n = match r.as_str().and_then(|name| names.get(name)) {
                Some(&n) => n,
                None => register_number(r, &format!("{what}.register"))?,
            };
            (Storage::Register(n), offset.unwrap_or(0))
        }
        "implicit" => (
            Storage::Implicit(hex_field(v, "bytes", what)?.into()),
            offset.unwrap_or(0),
        ),
        "implicit_pointer" => {
            let die = number(field(v, "die", what)?, &format!("{what}.die"))?;
            let at = format!("{what}.byte_offset");
            let byte_offset = match v.get("byte_offset") {
                None => 0,
                Some(Value::Number(n)) => n
                    .as_i64()
                    .ok_or_else(|| error(&at, JsonErrorKind::OutOfRange("an i64")))?,
                // As a string: the i64's bits, as DW_OP_implicit_pointer's operand.
                Some(o) => number(o, &at)? as i64,
            };
            (
                Storage::ImplicitPointer {
                    die,
                    byte_offset,
                    address_space: optional(v, "space", what)?,
                },
                offset.unwrap_or(0),
            )
        }
        "undefined" => (Storage::Undefined, offset.unwrap_or(0)),
        "composite" => {
            let parts = match field(v, "parts", what)? {
                Value::Array(parts) => parts,
                _ => {
                    return Err(error(
                        &format!("{what}.parts"),
                        JsonErrorKind::Expected("an array"),
                    ))
                }
            };
            let parts = parts
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let at = format!("{what}.parts[{i}]");
                    let bit_size = number(field(p, "bit_size", &at)?, &format!("{at}.bit_size"))?;
                    let location =
                        location(field(p, "location", &at)?, &format!("{at}.location"), names)?;
                    Ok(Part { location, bit_size })
                })
                .collect::<Result<Vec<Part>, Error>>()?;
            (Storage::Composite(parts), offset.unwrap_or(0))
        }
        other => {
            return Err(error(
                &format!("{what}.storage"),
                JsonErrorKind::UnknownStorage(other.to_string()),
            ))
        }
    };
    Ok(SingleLocation {
        storage,
        bit_offset,
    })
}

/// A location description: a list of places (or one place), as `eval`
/// prints a location ([`location_json`]). `what` is its key path, named by errors;
/// register names are those of `names` (or DWARF numbers).
pub fn location(
    v: &Value,
    what: &str,
    names: &BTreeMap<String, u16>,
) -> Result<LocationDescription, Error> {
    let places: Vec<SingleLocation> = match v {
        Value::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, p)| place(p, &format!("{what}[{i}]"), names))
            .collect::<Result<_, _>>()?,
        Value::Object(_) => vec![place(v, what, names)?],
        _ => return Err(error(what, JsonErrorKind::Expected("a list of places"))),
    };
    if places.is_empty() {
        return Err(error(what, JsonErrorKind::NoPlaces));
    }
    Ok(LocationDescription {
        places: Places::from(places),
    })
}

impl Context {
    /// Parses the JSON text of a context file. Errors are [`ErrorDetail::Json`], naming the key
    /// path of the value at fault.
    pub fn parse(text: &str) -> Result<Context, Error> {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| error("", JsonErrorKind::NotJson(e.to_string())))?;
        if !doc.is_object() {
            return Err(error("", JsonErrorKind::Expected("an object")));
        }
        let mut c = Context::default();
        if let Some(a) = doc.get("address_size") {
            let a = number(a, "address_size")?;
            c.snapshot.address_size = match a {
                4 | 8 => a as u8,
                _ => return Err(error("address_size", JsonErrorKind::OutOfRange("4 or 8"))),
            };
        }
        if let Some(r) = doc.get("registers") {
            c.snapshot.registers = registers(r, "registers", &mut c.names)?;
        }
        if let Some(r) = doc.get("entry_registers") {
            let mut ignored = BTreeMap::new();
            c.snapshot.entry_registers = registers(r, "entry_registers", &mut ignored)?;
        }
        if let Some(m) = doc.get("memory") {
            let list = m
                .as_array()
                .ok_or_else(|| error("memory", JsonErrorKind::Expected("an array")))?;
            for (i, b) in list.iter().enumerate() {
                let at = format!("memory[{i}]");
                let space = optional(b, "space", &at)?.unwrap_or(0);
                let address = number(field(b, "address", &at)?, &format!("{at}.address"))?;
                c.snapshot.memory.push(MemoryBlock {
                    space,
                    address,
                    bytes: hex_field(b, "bytes", &at)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The key path and kind of the error parsing `text`.
    fn at(text: &str) -> (String, JsonErrorKind) {
        match Context::parse(text).map_err(Error::into_detail) {
            Err(ErrorDetail::Json { at, kind }) => (at, kind),
            other => panic!("{text}: {:?}", other.map(|c| c.snapshot)),
        }
    }

    #[test]
    fn errors_name_the_key_path() {
        let missing = |key| JsonErrorKind::Missing(key);
        assert_eq!(
            at(r#"{"registers": {"rsp": {"value": "00"}}}"#),
            ("registers.rsp".into(), missing("number"))
        );
        assert_eq!(
            at(r#"{"entry_registers": {"rdi": {"number": 70000, "value": "00"}}}"#),
            (
                "entry_registers.rdi.number".into(),
                JsonErrorKind::OutOfRange("a u16")
            )
        );
        assert_eq!(
            at(r#"{"memory": [{"address": "x", "bytes": ""}]}"#),
            (
                "memory[0].address".into(),
                JsonErrorKind::NotANumber("x".into())
            )
        );
        assert_eq!(
            at(r#"{"address_size": 2}"#),
            ("address_size".into(), JsonErrorKind::OutOfRange("4 or 8"))
        );
        let composite = r#"{"object_location": [{"storage": "undefined"},
            {"storage": "composite", "parts": [{"bit_size": 8, "location": []}]}]}"#;
        assert_eq!(
            at(composite),
            (
                "object_location[1].parts[0].location".into(),
                JsonErrorKind::NoPlaces
            )
        );
        assert_eq!(
            at(r#"{"object_location": {"storage": "memory", "address": 2, "bit_offset": 8}}"#),
            (
                "object_location".into(),
                JsonErrorKind::AddressMismatch {
                    address: 2,
                    bit_offset: 8
                }
            )
        );
        assert_eq!(
            at(r#"{"object_location": {"storage": "tape"}}"#),
            (
                "object_location.storage".into(),
                JsonErrorKind::UnknownStorage("tape".into())
            )
        );
        assert!(matches!(at("{"), (p, JsonErrorKind::NotJson(_)) if p.is_empty()));
        assert_eq!(
            at("[]"),
            (String::new(), JsonErrorKind::Expected("an object"))
        );
        assert_eq!(
            parse_hex("0x1g"),
            Err(error("", JsonErrorKind::NotHex("0x1g".into())))
        );
    }
}
