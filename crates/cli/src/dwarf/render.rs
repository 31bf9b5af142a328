//! How locations and values look: the JSON shapes of `locus dwarf eval`, its
//! text for a person (the default), and the trace's drawings of stack entries.

use std::collections::BTreeMap;

use locus_dwarf::{Entry, Location, SingleLocation, Storage, Value, ValueType};
use serde_json::Value as Json;

use locus_dwarf::binary::json::hex;

/// `generic`, `signed 4`, `unsigned 8`, ...: the value type's debug name,
/// lowercased, so new kinds of types print without changes here.
pub fn type_name(ty: ValueType) -> String {
    format!("{ty:?}")
        .to_lowercase()
        .replace('(', " ")
        .replace(')', "")
}

pub use locus_dwarf::binary::json::location_json;

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

/// A number of the JSON: a u64, or a bigger one as a decimal string.
fn json_u128(v: &Json) -> u128 {
    match v {
        Json::String(s) => s.parse().unwrap_or(0),
        other => other.as_u64().map_or(0, u128::from),
    }
}

/// ` at byte N` / ` at bit N` (nothing at 0).
fn at_offset(bit_offset: u128) -> String {
    match bit_offset {
        0 => String::new(),
        b if b.is_multiple_of(8) => format!(" at byte {}", b / 8),
        b => format!(" at bit {b}"),
    }
}

/// Hex bytes with a space between bytes.
fn spaced(hex: &str) -> String {
    let bytes: Vec<&str> = (0..hex.len())
        .step_by(2)
        .filter_map(|i| hex.get(i..i + 2))
        .collect();
    bytes.join(" ")
}

/// ` = N` for implicit bytes (a `DW_OP_stack_value`'s, target order: little-endian) of at
/// most 8: the number they hold, signed and unsigned when those differ (the value's type is
/// not kept in the location).
fn implicit_number(hex: &str) -> String {
    let len = hex.len() / 2;
    if len == 0 || len > 8 || !hex.len().is_multiple_of(2) {
        return String::new();
    }
    let mut bytes = [0u8; 8];
    for (i, b) in bytes.iter_mut().enumerate().take(len) {
        match hex
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            Some(v) => *b = v,
            None => return String::new(),
        }
    }
    let unsigned = u64::from_le_bytes(bytes);
    let shift = 64 - 8 * len as u32;
    let signed = ((unsigned << shift) as i64) >> shift;
    if signed < 0 {
        format!(" = {signed} (signed) or {unsigned} (unsigned)")
    } else {
        format!(" = {unsigned}")
    }
}

/// One place of the JSON location, for a person; composites on the lines after.
fn place_text(p: &Json, names: &BTreeMap<String, u16>, indent: usize, lines: &mut Vec<String>) {
    let pad = " ".repeat(indent);
    let bit_offset = json_u128(&p["bit_offset"]);
    let line = match p["storage"].as_str().unwrap_or_default() {
        "memory" => {
            let bits = if bit_offset.is_multiple_of(8) {
                String::new()
            } else {
                format!(" + {} bits", bit_offset % 8)
            };
            format!(
                "memory {:#x}{bits}, address space {}",
                bit_offset / 8,
                p["space"]
            )
        }
        "register" => {
            let n = p["register"].as_u64().unwrap_or_default();
            let name = names
                .iter()
                .find(|(_, &m)| u64::from(m) == n)
                .map_or_else(|| n.to_string(), |(name, _)| format!("{name} ({n})"));
            format!("register {name}{}", at_offset(bit_offset))
        }
        "implicit" => {
            let hex = p["bytes"].as_str().unwrap_or_default();
            format!(
                "implicit value {}{}{}",
                spaced(hex),
                implicit_number(hex),
                at_offset(bit_offset)
            )
        }
        "implicit_pointer" => format!(
            "implicit pointer to DIE {:#x} + {}",
            p["die"].as_u64().unwrap_or_default(),
            p["byte_offset"]
        ),
        "composite" => {
            lines.push(format!("{pad}composite{}:", at_offset(bit_offset)));
            let mut start = 0u128;
            for part in p["parts"].as_array().map_or(&[][..], Vec::as_slice) {
                let size = json_u128(&part["bit_size"]);
                let places = part["location"].as_array().map_or(&[][..], Vec::as_slice);
                lines.push(format!(
                    "{pad}  bits {start}..{}:",
                    start.saturating_add(size)
                ));
                for place in places {
                    place_text(place, names, indent + 4, lines);
                }
                start = start.saturating_add(size);
            }
            return;
        }
        other => other.to_string(),
    };
    lines.push(format!("{pad}{line}"));
}

/// `locus dwarf eval`: the result for a person, from its JSON. A value
/// as gdb prints a number of its type, a location as its places (each holds the
/// object), then what was written, read (only with `--read`) and the context after a
/// write.
pub fn result_text(doc: &Json, names: &BTreeMap<String, u16>) -> String {
    let mut lines = Vec::new();
    if doc["result"] == "value" {
        lines.push(format!(
            "{} ({})",
            doc["number"].as_str().unwrap_or_default(),
            doc["type"].as_str().unwrap_or_default()
        ));
    } else {
        let places = doc["location"].as_array().map_or(&[][..], Vec::as_slice);
        match places {
            [] => lines.push("no places".to_string()),
            [one] => place_text(one, names, 0, &mut lines),
            many => {
                lines.push(format!("{} places, each holding the object:", many.len()));
                for p in many {
                    place_text(p, names, 2, &mut lines);
                }
            }
        }
    }
    if let Some(w) = doc["wrote"].as_str() {
        lines.push(format!("wrote {} bytes", w.len() / 2));
    }
    if let Some(r) = doc["read"].as_str() {
        let bytes: Vec<&str> = (0..r.len())
            .step_by(2)
            .filter_map(|i| r.get(i..i + 2))
            .collect();
        lines.push(format!("bytes: {}", bytes.join(" ")));
    }
    if let Some(c) = doc.get("context") {
        lines.push(format!(
            "context: {}",
            serde_json::to_string_pretty(c).unwrap_or_default()
        ));
    }
    lines.join("\n")
}

/// `locus dwarf vars` for a person, from its JSON: as gdb's `info args` and `info locals`
/// print them (`n = 4`), each with its kind, type and location expression; a thread's
/// frame first when the target is a core file or a process.
pub fn vars_text(doc: &Json) -> String {
    let mut lines = Vec::new();
    let text = |v: &Json| v.as_str().unwrap_or_default().to_string();
    if let Some(threads) = doc["threads"].as_array() {
        lines.push(format!(
            "{}, {} loaded at {}",
            text(&doc["target"]),
            text(&doc["binary"]),
            text(&doc["load_bias"])
        ));
        if let Some(u) = doc["unwinding"].as_str() {
            lines.push(format!("note: {u}"));
        }
        for t in threads {
            let mut head = format!("thread {} (tid {}", t["thread"], t["tid"]);
            if t["signal"].as_i64().is_some_and(|s| s != 0) {
                head.push_str(&format!(", signal {}", t["signal"]));
            }
            head.push_str(&format!(") frame {}", t["frame"]));
            if let Some(pc) = t["pc"].as_str() {
                head.push_str(&format!(" pc {pc}"));
            }
            if let Some(f) = t["function"].as_str() {
                head.push_str(&format!(" in {f}"));
            }
            if let Some(m) = t["module"].as_str() {
                head.push_str(&format!(" ({m})"));
            }
            lines.push(head);
            for key in ["error", "note"] {
                if let Some(e) = t[key].as_str() {
                    lines.push(format!("  {key}: {e}"));
                }
            }
            if let Some(why) = t["entry_values"]["refused"].as_str() {
                lines.push(format!("  no entry values: {why}"));
            }
            variable_lines(&t["variables"], &mut lines);
        }
    } else {
        lines.push(format!("pc {}", text(&doc["pc"])));
        variable_lines(&doc["variables"], &mut lines);
    }
    lines.join("\n")
}

/// One line a variable: `name = value  (kind type: expression)`; without a value (no
/// target), `name  (kind type: expression)`.
fn variable_lines(vars: &Json, lines: &mut Vec<String>) {
    let Some(vars) = vars.as_array() else { return };
    if vars.is_empty() {
        lines.push("  no variables in scope".to_string());
    }
    for v in vars {
        let name = v["name"].as_str().unwrap_or("?");
        let value = if v["synthetic_pointer"].is_object() {
            Some(synthetic_pointer(v))
        } else if let Some(n) = v["number"].as_str() {
            Some(n.to_string())
        } else if let Some(e) = v["error"].as_str() {
            Some(format!("<error: {e}>"))
        } else if let Some(h) = v["value"].as_str() {
            Some(if !h.is_empty() && h.chars().all(|c| c == '?') {
                "<optimized out>".to_string()
            } else {
                format!("[{h}]")
            })
        } else {
            v["const_value"].as_str().map(|c| format!("[{c}]"))
        };
        let how = match (v["expression"].as_str(), v["const_value"].as_str()) {
            (Some(e), _) => e.replace('\n', ", "),
            (None, Some(_)) => "DW_AT_const_value".to_string(),
            (None, None) => "no location".to_string(),
        };
        let ty = v["type"].as_str().unwrap_or("?");
        let kind = v["kind"].as_str().unwrap_or("variable");
        match value {
            Some(value) => lines.push(format!("  {name} = {value}  ({kind} {ty}: {how})")),
            None => lines.push(format!("  {name}  ({kind} {ty}: {how})")),
        }
    }
}

/// An implicit pointer as `<synthetic pointer> (&x, = 5)`: the object it points to (its
/// name, else its DIE), the byte offset into it when not 0, and the value `*p` reads.
fn synthetic_pointer(v: &Json) -> String {
    let (to, at) = (&v["points_to"], &v["synthetic_pointer"]);
    if let Some(e) = to["error"].as_str() {
        return format!("<synthetic pointer> (<error: {e}>)");
    }
    if !to.is_object() {
        return "<synthetic pointer>".to_string();
    }
    let mut object = match (to["name"].as_str(), at["die"].as_u64()) {
        (Some(name), _) => format!("&{name}"),
        (None, Some(die)) => format!("&<DIE {die:#x}>"),
        (None, None) => "&?".to_string(),
    };
    match at["byte_offset"].as_i64() {
        Some(0) | None => {}
        Some(n) => object.push_str(&format!(" {n:+} bytes")),
    }
    match to["number"].as_str() {
        Some(n) => format!("<synthetic pointer> ({object}, = {n})"),
        None => format!("<synthetic pointer> ({object})"),
    }
}
