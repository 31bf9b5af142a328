//! Scopes and location lists: the walk of a unit's DIEs that finds the variables in scope
//! at a PC, and where each one is there.

extern crate std;

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use gimli::AttributeValue;

use super::file::{encoding_of, Sections, R};
use super::variable::{BaseType, Pointee, Variable, VariableKind, VariableLocation};
use crate::ErrorDetail;
use crate::{decode, Encoding, Error, Op};

/// Adds the variables in scope at `pc` (file address) of one unit to `out`; `units` are
/// all of `dwarf`'s in `.debug_info` order (the unit among them), where references into
/// other units lead.
pub(super) fn scan_unit<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &gimli::Unit<R<'a>>,
    units: &[gimli::Unit<R<'a>>],
    pc: u64,
    load_bias: u64,
    out: &mut Found,
) -> Result<(), Error> {
    let mut tree = unit.entries_tree(None)?;
    let root = tree.root()?;
    let base_types = base_types(unit)?;
    let mut scan = Scan {
        dwarf,
        unit,
        units,
        pc,
        load_bias,
        out,
        base_types,
    };
    scan.children(root, None, "", 0)
}

/// A split-DWARF skeleton unit (`-gsplit-dwarf`): the unit of the same DWO id in the
/// package when there is one and it has the unit, else in the `.dwo` file its
/// `DW_AT_dwo_name` names (relative to `DW_AT_comp_dir`); read with the skeleton's
/// `.debug_addr` and bases. A `.dwo` that cannot be read is an error naming it.
pub(super) fn scan_dwo(
    dwarf: &gimli::Dwarf<R<'_>>,
    package: Option<&gimli::DwarfPackage<R<'_>>>,
    skeleton: &gimli::Unit<R<'_>>,
    (pc, load_bias): (u64, u64),
    limit: u64,
    out: &mut Found,
) -> Result<(), Error> {
    if let (Some(package), Some(id)) = (package, skeleton.dwo_id) {
        let in_package = |e: gimli::Error| ErrorDetail::Object {
            what: format!("the DWARF package (.dwp), unit of DWO id {:#x}: {e}", id.0),
        };
        if let Some(dwo) = package.find_cu(id, dwarf).map_err(in_package)? {
            let mut units = dwo.units();
            if let Some(header) = units.next().map_err(in_package)? {
                let unit = dwo.unit(header).map_err(in_package)?;
                return scan_split_unit(&dwo, unit, skeleton, (pc, load_bias), out);
            }
        }
    }
    let path = dwo_path(dwarf, skeleton)?;
    let package_note = if package.is_some() {
        "; the package (.dwp) does not have it"
    } else {
        ""
    };
    let fail = |what: String| ErrorDetail::Object {
        what: format!(
            "split DWARF (-gsplit-dwarf): the unit at .debug_info offset {:#x} is a skeleton \
             whose variables are in {path}: {what}{package_note}",
            skeleton
                .header
                .offset()
                .as_debug_info_offset()
                .map_or(0, |o| o.0)
        ),
    };
    let data = std::fs::read(&path).map_err(|e| fail(e.to_string()))?;
    let sections = Sections::read(&data, true, limit).map_err(|e| fail(e.to_string()))?;
    let mut dwo = sections.dwarf(true)?;
    dwo.make_dwo(dwarf);
    let mut units = dwo.units();
    while let Some(header) = units.next()? {
        let unit = dwo.unit(header)?;
        if unit.dwo_id != skeleton.dwo_id {
            continue;
        }
        return scan_split_unit(&dwo, unit, skeleton, (pc, load_bias), out);
    }
    Err(fail("no unit with the skeleton's DWO id".to_owned()).into())
}

/// [`scan_unit`] on a split unit, read with its skeleton's relocated attributes
/// (`.debug_addr` base and the like); a `.dwo` unit refers to no other unit.
fn scan_split_unit<'a>(
    dwo: &gimli::Dwarf<R<'a>>,
    mut unit: gimli::Unit<R<'a>>,
    skeleton: &gimli::Unit<R<'a>>,
    (pc, load_bias): (u64, u64),
    out: &mut Found,
) -> Result<(), Error> {
    unit.copy_relocated_attributes(skeleton);
    scan_unit(dwo, &unit, core::slice::from_ref(&unit), pc, load_bias, out)
}

/// The object DIE at `die` of `unit` as a [`Variable`] with its location at `pc` (file
/// address): no function, no frame base ([`Binary::object_at`](super::Binary::object_at)).
/// `die` must be where the unit's walk finds a DIE (one read from the middle of another
/// would be garbage) of a variable, parameter, constant or `DW_TAG_dwarf_procedure`.
pub(super) fn object_in_unit<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &gimli::Unit<R<'a>>,
    units: &[gimli::Unit<R<'a>>],
    die: gimli::UnitOffset,
    (pc, load_bias): (u64, u64),
) -> Result<Variable, Error> {
    let at = die
        .to_debug_info_offset(&unit.header)
        .map_or(0, |o| o.0 as u64);
    let mut entries = unit.entries();
    let mut found = false;
    while let Some((_, entry)) = entries.next_dfs()? {
        if entry.offset() >= die {
            found = entry.offset() == die;
            break;
        }
    }
    if !found {
        return Err(ErrorDetail::Dwarf {
            what: format!("no DIE at .debug_info offset {at:#x}"),
        }
        .into());
    }
    let entry = unit.entry(die)?;
    if !matches!(
        entry.tag(),
        gimli::DW_TAG_variable
            | gimli::DW_TAG_formal_parameter
            | gimli::DW_TAG_constant
            | gimli::DW_TAG_dwarf_procedure
    ) {
        return Err(ErrorDetail::Dwarf {
            what: format!(
                "the DIE at .debug_info offset {at:#x} is a {}, not an object",
                entry.tag()
            ),
        }
        .into());
    }
    let mut out = Found::default();
    let scan = Scan {
        dwarf,
        unit,
        units,
        pc,
        load_bias,
        out: &mut out,
        base_types: base_types(unit)?,
    };
    scan.variable(&entry, None, "")
}

/// Where a skeleton unit's `.dwo` is: `DW_AT_dwo_name` (`DW_AT_GNU_dwo_name`), under
/// `DW_AT_comp_dir` when relative.
fn dwo_path(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>) -> Result<String, Error> {
    let mut entries = unit.entries();
    let mut name = None;
    if let Some((_, root)) = entries.next_dfs()? {
        for at in [gimli::DW_AT_dwo_name, gimli::DW_AT_GNU_dwo_name] {
            if let Some(v) = root.attr_value(at)? {
                name = Some(dwarf.attr_string(unit, v)?.to_string_lossy().into_owned());
            }
        }
    }
    let name = name.ok_or_else(|| ErrorDetail::Object {
        what: "split DWARF: a skeleton unit without DW_AT_dwo_name".to_owned(),
    })?;
    if name.starts_with('/') {
        return Ok(name);
    }
    Ok(match &unit.comp_dir {
        Some(dir) => format!("{}/{name}", dir.to_string_lossy()),
        None => name,
    })
}

/// What a scan finds at a PC: the variables in scope and the functions (concrete, then
/// inlined) whose code holds it.
#[derive(Default)]
pub(super) struct Found {
    pub(super) variables: Vec<Variable>,
    pub(super) functions: Vec<String>,
}

struct Scan<'s, 'a> {
    dwarf: &'s gimli::Dwarf<R<'a>>,
    unit: &'s gimli::Unit<R<'a>>,
    /// Every unit of `dwarf` in `.debug_info` order, then the `.debug_types` units, for
    /// references into other units.
    units: &'s [gimli::Unit<R<'a>>],
    /// The PC at the file's own addresses (the load bias taken off).
    pc: u64,
    load_bias: u64,
    out: &'s mut Found,
    base_types: Vec<BaseType>,
}

/// Every `DW_TAG_base_type` of a unit.
pub(crate) fn base_types(unit: &gimli::Unit<R<'_>>) -> Result<Vec<BaseType>, Error> {
    let mut out = Vec::new();
    let mut entries = unit.entries();
    while let Some((_, entry)) = entries.next_dfs()? {
        if entry.tag() != gimli::DW_TAG_base_type {
            continue;
        }
        let encoding = match entry.attr_value(gimli::DW_AT_encoding)? {
            Some(AttributeValue::Encoding(e)) => e.0,
            _ => continue,
        };
        let Some(byte_size) = entry
            .attr_value(gimli::DW_AT_byte_size)?
            .and_then(|v| v.udata_value())
        else {
            continue;
        };
        out.push(BaseType {
            offset: entry.offset().0 as u64,
            encoding,
            byte_size,
        });
    }
    Ok(out)
}

/// How deep [`Scan::children`] follows nested scopes (subprograms, lexical
/// blocks, inlined subroutines): real code nests a few dozen at most.
const MAX_SCOPE_DEPTH: u32 = 256;

/// How many `DW_AT_abstract_origin`/`DW_AT_specification` links an
/// attribute is looked for through (real files chain two or three).
const MAX_ORIGIN_LINKS: u32 = 8;

type Node<'abbrev, 'unit, 'tree, 'a> = gimli::EntriesTreeNode<'abbrev, 'unit, 'tree, R<'a>>;
type Unit<'a> = gimli::Unit<R<'a>>;
/// A DIE: its unit and its offset there.
type DieRef<'s, 'a> = (&'s Unit<'a>, gimli::UnitOffset);
type Die<'abbrev, 'unit, 'a> = gimli::DebuggingInformationEntry<'abbrev, 'unit, R<'a>>;

impl<'s, 'a> Scan<'s, 'a> {
    /// Whether the DIE's `DW_AT_ranges`, or `DW_AT_low_pc` to `DW_AT_high_pc`, hold the PC.
    /// (Not gimli's `die_ranges`: it adds a `DW_AT_high_pc` size to `DW_AT_low_pc` without
    /// checking, which panics in a debug build when a file makes it overflow. A range that
    /// runs past the top of the address space ends there.)
    fn contains_pc(&self, entry: &Die<'_, '_, 'a>) -> Result<bool, Error> {
        let (mut low, mut high, mut size) = (None, None, None);
        let mut attrs = entry.attrs();
        while let Some(attr) = attrs.next()? {
            match attr.name() {
                gimli::DW_AT_low_pc => {
                    low = Some(
                        self.dwarf
                            .attr_address(self.unit, attr.value())?
                            .ok_or(gimli::Error::UnsupportedAttributeForm)?,
                    );
                }
                gimli::DW_AT_high_pc => match attr.value() {
                    AttributeValue::Udata(n) => size = Some(n),
                    v => {
                        high = Some(
                            self.dwarf
                                .attr_address(self.unit, v)?
                                .ok_or(gimli::Error::UnsupportedAttributeForm)?,
                        );
                    }
                },
                gimli::DW_AT_ranges => {
                    if let Some(mut ranges) = self.dwarf.attr_ranges(self.unit, attr.value())? {
                        while let Some(r) = ranges.next()? {
                            if r.begin <= self.pc && self.pc < r.end {
                                return Ok(true);
                            }
                        }
                        return Ok(false);
                    }
                }
                _ => {}
            }
        }
        let end = match (low, size) {
            (Some(low), Some(size)) => Some(low.saturating_add(size)),
            _ => high,
        };
        Ok(matches!((low, end), (Some(low), Some(end)) if low <= self.pc && self.pc < end))
    }

    /// Walks the children of a scope `depth` scopes deep; `frame_base` is the
    /// enclosing concrete function's, `function` its (or the inlined
    /// subroutine's) name. Scopes nested deeper than [`MAX_SCOPE_DEPTH`] are
    /// an error (each level is a stack frame here).
    fn children(
        &mut self,
        node: Node<'_, '_, '_, 'a>,
        frame_base: Option<&[u8]>,
        function: &str,
        depth: u32,
    ) -> Result<(), Error> {
        if depth > MAX_SCOPE_DEPTH {
            return Err(ErrorDetail::Dwarf {
                what: format!("scopes nested more than {MAX_SCOPE_DEPTH} deep"),
            }
            .into());
        }
        let mut children = node.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            match entry.tag() {
                gimli::DW_TAG_subprogram
                | gimli::DW_TAG_lexical_block
                | gimli::DW_TAG_inlined_subroutine => {
                    if !self.contains_pc(entry)? {
                        continue;
                    }
                    let (fb, name) = if entry.tag() == gimli::DW_TAG_lexical_block {
                        (frame_base.map(<[u8]>::to_vec), function.to_owned())
                    } else {
                        let fb = match entry.attr_value(gimli::DW_AT_frame_base)? {
                            Some(AttributeValue::Exprloc(e)) => Some(e.0.slice().to_vec()),
                            _ => frame_base.map(<[u8]>::to_vec),
                        };
                        let name = self.name(self.unit, entry)?.unwrap_or_default();
                        self.out.functions.push(name.clone());
                        (fb, name)
                    };
                    self.children(child, fb.as_deref(), &name, depth + 1)?;
                }
                // Only locals: the CU's globals are not "in scope at a PC" in
                // the sense of a frame.
                gimli::DW_TAG_formal_parameter | gimli::DW_TAG_variable if !function.is_empty() => {
                    let v = self.variable(entry, frame_base, function)?;
                    self.out.variables.push(v);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The DIE a reference of `u` (the unit `value` was read in) names: in `u` for a
    /// unit-relative reference, in whichever unit holds it for a `.debug_info` one
    /// (`DW_FORM_ref_addr`: LTO's references across units), the type a type unit of that
    /// signature holds for a `DW_FORM_ref_sig8` one.
    fn follow(&self, u: &'s Unit<'a>, value: AttributeValue<R<'a>>) -> Option<DieRef<'s, 'a>> {
        let found = self.follow_once(u, value)?;
        // A declaration that stands for a type of a type unit (`DW_AT_signature`: gcc's
        // and clang's skeleton of a type in -fdebug-types-section): that type. One hop
        // only: a file could make signatures a cycle.
        let signature = found
            .0
            .entry(found.1)
            .ok()
            .and_then(|e| e.attr_value(gimli::DW_AT_signature).ok().flatten());
        match signature {
            Some(sig @ AttributeValue::DebugTypesRef(_)) => self.follow_once(found.0, sig),
            _ => Some(found),
        }
    }

    /// [`Scan::follow`] without looking through `DW_AT_signature`.
    fn follow_once(&self, u: &'s Unit<'a>, value: AttributeValue<R<'a>>) -> Option<DieRef<'s, 'a>> {
        match value {
            AttributeValue::UnitRef(o) => Some((u, o)),
            AttributeValue::DebugInfoRef(o) => {
                if let Some(o) = o.to_unit_offset(&u.header) {
                    return Some((u, o));
                }
                let at = gimli::UnitSectionOffset::DebugInfoOffset(o);
                let i = self.units.partition_point(|x| x.header.offset() <= at);
                let other = self.units.get(i.checked_sub(1)?)?;
                Some((other, o.to_unit_offset(&other.header)?))
            }
            // A type in a type unit (`DW_FORM_ref_sig8`: gcc's -fdebug-types-section,
            // clang++'s), in `.debug_info` (DWARF 5) or `.debug_types` (DWARF 4).
            AttributeValue::DebugTypesRef(signature) => {
                self.units.iter().find_map(|t| match t.header.type_() {
                    gimli::UnitType::Type {
                        type_signature,
                        type_offset,
                    }
                    | gimli::UnitType::SplitType {
                        type_signature,
                        type_offset,
                    } if type_signature == signature => Some((t, type_offset)),
                    _ => None,
                })
            }
            _ => None,
        }
    }

    /// The DIE an attribute of `entry` (of unit `u`) refers to.
    fn referenced(
        &self,
        u: &'s Unit<'a>,
        entry: &Die<'_, '_, 'a>,
        at: gimli::DwAt,
    ) -> Result<Option<DieRef<'s, 'a>>, Error> {
        Ok(entry.attr_value(at)?.and_then(|v| self.follow(u, v)))
    }

    /// An attribute of `entry` (of unit `u`) or, failing that, of its abstract origin or
    /// specification (followed at most [`MAX_ORIGIN_LINKS`] deep: a file can make them a
    /// cycle), with the unit it was read in.
    fn attr_or_origin(
        &self,
        u: &'s Unit<'a>,
        entry: &Die<'_, '_, 'a>,
        at: gimli::DwAt,
    ) -> Result<Option<(&'s Unit<'a>, AttributeValue<R<'a>>)>, Error> {
        self.attr_or_origin_within(u, entry, at, MAX_ORIGIN_LINKS)
    }

    fn attr_or_origin_within(
        &self,
        u: &'s Unit<'a>,
        entry: &Die<'_, '_, 'a>,
        at: gimli::DwAt,
        links: u32,
    ) -> Result<Option<(&'s Unit<'a>, AttributeValue<R<'a>>)>, Error> {
        if let Some(v) = entry.attr_value(at)? {
            return Ok(Some((u, v)));
        }
        if links == 0 {
            return Ok(None);
        }
        for link in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
            if let Some((ou, o)) = self.referenced(u, entry, link)? {
                let origin = ou.entry(o)?;
                if let Some(v) = self.attr_or_origin_within(ou, &origin, at, links - 1)? {
                    return Ok(Some(v));
                }
            }
        }
        Ok(None)
    }

    fn name(&self, u: &'s Unit<'a>, entry: &Die<'_, '_, 'a>) -> Result<Option<String>, Error> {
        match self.attr_or_origin(u, entry, gimli::DW_AT_name)? {
            Some((vu, v)) => {
                let s = self.dwarf.attr_string(vu, v)?;
                Ok(Some(s.to_string_lossy().into_owned()))
            }
            None => Ok(None),
        }
    }

    /// The DIE of `entry`'s type (`DW_AT_type`, its own or its origin's).
    fn type_of(
        &self,
        u: &'s Unit<'a>,
        entry: &Die<'_, '_, 'a>,
    ) -> Result<Option<DieRef<'s, 'a>>, Error> {
        Ok(self
            .attr_or_origin(u, entry, gimli::DW_AT_type)?
            .and_then(|(vu, v)| self.follow(vu, v)))
    }

    /// The type's name and size in bytes.
    fn type_info(
        &self,
        u: &'s Unit<'a>,
        entry: &Die<'_, '_, 'a>,
    ) -> Result<(String, Option<u64>), Error> {
        let Some((tu, offset)) = self.type_of(u, entry)? else {
            return Ok(("?".to_owned(), None));
        };
        let t = tu.entry(offset)?;
        let name = match t.tag() {
            gimli::DW_TAG_pointer_type => "pointer".to_owned(),
            gimli::DW_TAG_reference_type => "reference".to_owned(),
            gimli::DW_TAG_rvalue_reference_type => "rvalue reference".to_owned(),
            gimli::DW_TAG_ptr_to_member_type => "pointer to member".to_owned(),
            gimli::DW_TAG_array_type => "array".to_owned(),
            _ => self.name(tu, &t)?.unwrap_or_else(|| "?".to_owned()),
        };
        Ok((name, self.type_size((tu, offset), 0)?))
    }

    /// The type `entry`'s `DW_AT_type` is, through typedefs and qualifiers (`const`,
    /// `volatile`, `restrict`, `_Atomic`; at most 32 of them: a file can make them a
    /// cycle): its DIE; `None` for no type.
    fn unqualified_type(
        &self,
        u: &'s Unit<'a>,
        entry: &Die<'_, '_, 'a>,
    ) -> Result<Option<DieRef<'s, 'a>>, Error> {
        let Some(mut at) = self.type_of(u, entry)? else {
            return Ok(None);
        };
        for _ in 0..32 {
            let t = at.0.entry(at.1)?;
            match t.tag() {
                gimli::DW_TAG_typedef
                | gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type => {
                    match self.referenced(at.0, &t, gimli::DW_AT_type)? {
                        Some(next) => at = next,
                        None => return Ok(None),
                    }
                }
                _ => return Ok(Some(at)),
            }
        }
        Ok(None)
    }

    /// The base type `entry`'s `DW_AT_type` is, through typedefs and
    /// qualifiers; `None` for any other type (pointers, enumerations,
    /// aggregates) or none.
    fn base_type_of(
        &self,
        u: &'s Unit<'a>,
        entry: &Die<'_, '_, 'a>,
    ) -> Result<Option<BaseType>, Error> {
        let Some((tu, offset)) = self.unqualified_type(u, entry)? else {
            return Ok(None);
        };
        let t = tu.entry(offset)?;
        if t.tag() != gimli::DW_TAG_base_type {
            return Ok(None);
        }
        let encoding = t.attr_value(gimli::DW_AT_encoding)?;
        let size = t
            .attr_value(gimli::DW_AT_byte_size)?
            .and_then(|v| v.udata_value());
        Ok(match (encoding, size) {
            (Some(AttributeValue::Encoding(e)), Some(byte_size)) => Some(BaseType {
                offset: offset.0 as u64,
                encoding: e.0,
                byte_size,
            }),
            _ => None,
        })
    }

    /// What `entry`'s pointer or reference type (through typedefs and qualifiers) points
    /// to: its size and base type. `None` for other types and `void *`.
    fn pointee(&self, u: &'s Unit<'a>, entry: &Die<'_, '_, 'a>) -> Result<Option<Pointee>, Error> {
        let Some((tu, offset)) = self.unqualified_type(u, entry)? else {
            return Ok(None);
        };
        let t = tu.entry(offset)?;
        let is_pointer = matches!(
            t.tag(),
            gimli::DW_TAG_pointer_type
                | gimli::DW_TAG_reference_type
                | gimli::DW_TAG_rvalue_reference_type
        );
        if !is_pointer || t.attr_value(gimli::DW_AT_type)?.is_none() {
            return Ok(None);
        }
        Ok(Some(Pointee {
            byte_size: self.type_info(tu, &t)?.1,
            base_type: self.base_type_of(tu, &t)?,
        }))
    }

    /// A type's size in bytes, through typedefs and qualifiers; arrays are
    /// their element size times their subranges' counts.
    fn type_size(&self, (u, offset): DieRef<'s, 'a>, depth: u32) -> Result<Option<u64>, Error> {
        if depth > 32 {
            return Ok(None);
        }
        let t = u.entry(offset)?;
        if let Some(size) = t
            .attr_value(gimli::DW_AT_byte_size)?
            .and_then(|v| v.udata_value())
        {
            return Ok(Some(size));
        }
        let address = u64::from(u.encoding().address_size);
        match t.tag() {
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => return Ok(Some(address)),
            // The Itanium C++ ABI's (x86-64, AArch64): a member function pointer is a
            // pointer and an adjustment, a data member pointer an offset. Neither gcc nor
            // clang gives the size.
            gimli::DW_TAG_ptr_to_member_type => {
                let function = match self.referenced(u, &t, gimli::DW_AT_type)? {
                    Some((mu, mo)) => mu.entry(mo)?.tag() == gimli::DW_TAG_subroutine_type,
                    None => false,
                };
                return Ok(Some(if function { 2 * address } else { address }));
            }
            // These are the size of the type they name (an enumeration its underlying
            // type's, DWARF 5); any other type without a size has none known here.
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type
            | gimli::DW_TAG_immutable_type
            | gimli::DW_TAG_enumeration_type
            | gimli::DW_TAG_array_type => {}
            _ => return Ok(None),
        }
        let inner = match self.referenced(u, &t, gimli::DW_AT_type)? {
            Some(at) => self.type_size(at, depth + 1)?,
            None => None,
        };
        if t.tag() != gimli::DW_TAG_array_type {
            return Ok(inner);
        }
        let mut total = match inner {
            Some(n) => n,
            None => return Ok(None),
        };
        let mut tree = u.entries_tree(Some(offset))?;
        let root = tree.root()?;
        let mut children = root.children();
        while let Some(child) = children.next()? {
            let sub = child.entry();
            if sub.tag() != gimli::DW_TAG_subrange_type {
                continue;
            }
            let count = match sub
                .attr_value(gimli::DW_AT_count)?
                .and_then(|v| v.udata_value())
            {
                Some(c) => c,
                None => {
                    let upper = sub
                        .attr_value(gimli::DW_AT_upper_bound)?
                        .and_then(|v| v.udata_value());
                    let lower = sub
                        .attr_value(gimli::DW_AT_lower_bound)?
                        .and_then(|v| v.udata_value())
                        .unwrap_or(0);
                    match upper {
                        Some(u) => u.saturating_sub(lower).saturating_add(1),
                        None => return Ok(None),
                    }
                }
            };
            total = total.saturating_mul(count);
        }
        Ok(Some(total))
    }

    fn variable(
        &self,
        entry: &Die<'_, '_, 'a>,
        frame_base: Option<&[u8]>,
        function: &str,
    ) -> Result<Variable, Error> {
        let encoding = encoding_of(self.unit);
        let name = self.name(self.unit, entry)?.unwrap_or_default();
        let (type_name, byte_size) = self.type_info(self.unit, entry)?;
        let base_type = self.base_type_of(self.unit, entry)?;
        let pointee = self.pointee(self.unit, entry)?;
        let location = match entry.attr_value(gimli::DW_AT_location)? {
            Some(AttributeValue::Exprloc(e)) => {
                VariableLocation::Expression(self.resolve(e.0.slice(), encoding)?)
            }
            Some(v) => {
                let mut found = VariableLocation::None;
                if let Some(mut list) = self.dwarf.attr_locations(self.unit, v)? {
                    while let Some(le) = list.next()? {
                        if le.range.begin <= self.pc && self.pc < le.range.end {
                            found = VariableLocation::Expression(
                                self.resolve(le.data.0.slice(), encoding)?,
                            );
                            break;
                        }
                    }
                }
                found
            }
            None => match self.attr_or_origin(self.unit, entry, gimli::DW_AT_const_value)? {
                Some((_, v)) => VariableLocation::Const(const_bytes(v, byte_size)),
                None => VariableLocation::None,
            },
        };
        let frame_base = match frame_base {
            Some(fb) => Some(self.resolve(fb, encoding)?),
            None => None,
        };
        Ok(Variable {
            name,
            kind: if entry.tag() == gimli::DW_TAG_formal_parameter {
                VariableKind::Parameter
            } else {
                VariableKind::Variable
            },
            function: function.to_owned(),
            die: entry
                .offset()
                .to_debug_info_offset(&self.unit.header)
                .map_or(0, |o| o.0 as u64),
            type_name,
            byte_size,
            base_type,
            pointee,
            location,
            encoding,
            frame_base,
            base_types: self.base_types.clone(),
            unit_offset: self
                .unit
                .header
                .offset()
                .as_debug_info_offset()
                .map_or(0, |o| o.0 as u64),
        })
    }

    /// Replaces `DW_OP_addrx`/`DW_OP_constx` by `DW_OP_addr`/`DW_OP_constu`
    /// with the `.debug_addr` entry, so the evaluator needs no index
    /// requests, and moves every address by the load bias. Expressions with
    /// branches keep their operations (the index rewrite changes operation
    /// sizes); their `DW_OP_addr` operands are moved in place.
    fn resolve(&self, bytes: &[u8], encoding: Encoding) -> Result<Vec<u8>, Error> {
        let Ok(ops) = decode(bytes, encoding) else {
            return Ok(bytes.to_vec());
        };
        let has_index = ops
            .iter()
            .any(|(_, op)| matches!(op, Op::Addrx(_) | Op::Constx(_)));
        let has_branch = ops
            .iter()
            .any(|(_, op)| matches!(op, Op::Bra(_) | Op::Skip(_)));
        let bias = self.load_bias;
        if has_index && !has_branch {
            let mut out = Vec::with_capacity(ops.len());
            for (_, op) in ops {
                out.push(match op {
                    Op::Addrx(i) => Op::Addr(self.address(i)?.wrapping_add(bias)),
                    // Not an address in the loaded image (e.g. a TLS offset).
                    Op::Constx(i) => Op::Constu(self.address(i)?),
                    Op::Addr(a) => Op::Addr(a.wrapping_add(bias)),
                    other => other,
                });
            }
            return crate::encode(&out, encoding);
        }
        let mut out = bytes.to_vec();
        move_decoded_addresses(&mut out, &ops, encoding, bias);
        Ok(out)
    }

    fn address(&self, index: u64) -> Result<u64, Error> {
        let i = usize::try_from(index).map_err(|_| ErrorDetail::Dwarf {
            what: "address index".into(),
        })?;
        Ok(self.dwarf.address(self.unit, gimli::DebugAddrIndex(i))?)
    }
}

/// Moves every `DW_OP_addr` operand of the expression `bytes` by `bias`, in
/// place (an expression that does not decode is left as it is).
pub(crate) fn move_addresses(bytes: &mut [u8], encoding: Encoding, bias: u64) {
    if let Ok(ops) = decode(bytes, encoding) {
        move_decoded_addresses(bytes, &ops, encoding, bias);
    }
}

/// [`move_addresses`] with the expression already decoded (`ops`).
fn move_decoded_addresses(bytes: &mut [u8], ops: &[(usize, Op)], encoding: Encoding, bias: u64) {
    if bias == 0 {
        return;
    }
    let size = usize::from(encoding.address_size);
    for (at, op) in ops {
        if let Op::Addr(a) = op {
            let moved = a.wrapping_add(bias).to_le_bytes();
            // The operand follows the opcode byte; `decode` read it there.
            if let (Some(dst), Some(src)) =
                (bytes.get_mut(at + 1..at + 1 + size), moved.get(..size))
            {
                dst.copy_from_slice(src);
            }
        }
    }
}

fn const_bytes(v: AttributeValue<R<'_>>, size: Option<u64>) -> Vec<u8> {
    let n = size
        .and_then(|s| usize::try_from(s).ok())
        .unwrap_or(8)
        .min(8);
    match v {
        AttributeValue::Block(b) => b.slice().to_vec(),
        AttributeValue::Sdata(s) => s.to_le_bytes()[..n].to_vec(),
        other => other.udata_value().unwrap_or(0).to_le_bytes()[..n].to_vec(),
    }
}
