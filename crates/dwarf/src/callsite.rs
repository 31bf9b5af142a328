//! Entry values from call sites (feature `binary`): what a parameter register held when
//! a function was entered, from the caller's `DW_TAG_call_site_parameter`s
//! (`DW_TAG_GNU_call_site_parameter`) at the call that returns to the caller frame's PC,
//! each `DW_AT_call_value` evaluated in the caller's frame. This is how gdb answers
//! `DW_OP_entry_value(DW_OP_regN)` (`m=m@entry=3`).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use gimli::AttributeValue;

use crate::binary::{self, encoding_of, Decoded, R};
use crate::{Encoding, Entry, Error, Target};

/// `DW_TAG_GNU_call_site`.
const GNU_CALL_SITE: gimli::DwTag = gimli::DwTag(0x4109);
/// `DW_TAG_GNU_call_site_parameter`.
const GNU_CALL_SITE_PARAMETER: gimli::DwTag = gimli::DwTag(0x410a);
/// `DW_AT_GNU_call_site_value`.
const GNU_CALL_SITE_VALUE: gimli::DwAt = gimli::DwAt(0x2111);

/// One parameter of a call site: the register it is passed in, and the caller-side
/// expression of its value.
struct Parameter {
    register: u16,
    value: Vec<u8>,
    encoding: Encoding,
}

/// The registers at entry of the function called from the call that returns to
/// `return_pc` (an address in the running program; `load_bias` as for
/// [`binary::variables_at`]), each evaluated against `caller`, the caller frame (a
/// [`binary::State`] or any [`Target`]). Parameters whose value cannot be computed there (a register the caller frame
/// does not know) are left out, so their entry values stay unanswered.
pub fn entry_registers<T: Target + ?Sized>(
    data: &[u8],
    return_pc: u64,
    load_bias: u64,
    caller: &mut T,
) -> Result<BTreeMap<u16, Vec<u8>>, Error> {
    let sections = binary::Sections::read(data, false)?;
    let dwarf = sections.dwarf(false)?;
    entry_registers_in(&dwarf, return_pc, load_bias, caller)
}

/// [`entry_registers`] in DWARF already read.
pub(crate) fn entry_registers_in<T: Target + ?Sized>(
    dwarf: &gimli::Dwarf<R<'_>>,
    return_pc: u64,
    load_bias: u64,
    caller: &mut T,
) -> Result<BTreeMap<u16, Vec<u8>>, Error> {
    let at = return_pc.wrapping_sub(load_bias);
    let mut out = BTreeMap::new();
    for p in parameters(dwarf, at)? {
        let Ok(expr) = Decoded::new(&p.value, p.encoding) else {
            continue;
        };
        let mut eval = expr.evaluation(p.encoding);
        if eval.evaluate_with(&mut *caller).is_err() {
            continue;
        }
        if let Some(Entry::Value(v)) = eval.into_result() {
            out.insert(p.register, v.to_bytes(p.encoding.address_size));
        }
    }
    Ok(out)
}

/// The register parameters of the call site whose return address is `at` (file address).
fn parameters(dwarf: &gimli::Dwarf<R<'_>>, at: u64) -> Result<Vec<Parameter>, Error> {
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let encoding = encoding_of(&unit);
        let mut entries = unit.entries();
        let mut depth = 0isize;
        let mut site_depth: Option<isize> = None;
        let mut found = Vec::new();
        while let Some((delta, entry)) = entries.next_dfs()? {
            depth += delta;
            if let Some(d) = site_depth {
                if depth <= d {
                    return Ok(found);
                }
                if depth == d + 1
                    && matches!(
                        entry.tag(),
                        gimli::DW_TAG_call_site_parameter | GNU_CALL_SITE_PARAMETER
                    )
                {
                    if let Some(p) = parameter(entry, encoding)? {
                        found.push(p);
                    }
                }
                continue;
            }
            let return_pc = match entry.tag() {
                gimli::DW_TAG_call_site => entry.attr_value(gimli::DW_AT_call_return_pc)?,
                GNU_CALL_SITE => entry.attr_value(gimli::DW_AT_low_pc)?,
                _ => continue,
            };
            let Some(v) = return_pc else { continue };
            if dwarf.attr_address(&unit, v)? == Some(at) {
                site_depth = Some(depth);
            }
        }
        if site_depth.is_some() {
            return Ok(found);
        }
    }
    Ok(Vec::new())
}

/// A call-site parameter passed in a register (`DW_AT_location` `DW_OP_regN`), with its
/// value expression.
fn parameter(
    entry: &gimli::DebuggingInformationEntry<'_, '_, R<'_>>,
    encoding: Encoding,
) -> Result<Option<Parameter>, Error> {
    let Some(AttributeValue::Exprloc(location)) = entry.attr_value(gimli::DW_AT_location)? else {
        return Ok(None);
    };
    let register = match crate::decode(location.0.slice(), encoding)?.as_slice() {
        [(_, crate::Op::Reg(r))] => u16::from(*r),
        [(_, crate::Op::Regx(r))] => match u16::try_from(*r) {
            Ok(r) => r,
            Err(_) => return Ok(None),
        },
        _ => return Ok(None),
    };
    let value = match entry.attr_value(gimli::DW_AT_call_value)? {
        Some(v) => Some(v),
        None => entry.attr_value(GNU_CALL_SITE_VALUE)?,
    };
    let Some(AttributeValue::Exprloc(value)) = value else {
        return Ok(None);
    };
    Ok(Some(Parameter {
        register,
        value: value.0.slice().to_vec(),
        encoding,
    }))
}
