//! Object files: the DWARF sections of an ELF file (compressed or not, relocated when
//! relocatable), split DWARF (`.dwp` packages, `.dwo` files), and [`Binary`], which reads
//! them once for any number of PCs.

extern crate std;

use alloc::borrow::ToOwned;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use gimli::{AttributeValue, EndianSlice, LittleEndian};
use object::{Object as _, ObjectSection as _};

use super::scopes::{object_in_unit, scan_dwo, scan_unit, Found};
use super::variable::{LocationExpression, Variable, VariableLocation};
use crate::callsite::CallSites;
use crate::op::Op;
use crate::sections::DEFAULT_MAX_SECTION_BYTES;
use crate::ErrorDetail;
use crate::{Encoding, Error};

pub(crate) type R<'a> = EndianSlice<'a, LittleEndian>;

/// The DWARF sections of an object, decompressed (`SHF_COMPRESSED`: zlib or
/// zstd, as `-gz` writes them) where they are compressed, by name; the
/// [`gimli::Dwarf`] of [`Sections::dwarf`] borrows from them.
pub(crate) struct Sections<'d> {
    by_name: BTreeMap<String, alloc::borrow::Cow<'d, [u8]>>,
}

impl<'d> Sections<'d> {
    /// Reads the `.debug_*` sections of `data`, at most `limit` bytes
    /// decompressed in all; a relocatable object's with its relocations
    /// applied (see [`crate::sections::relocate`]). Refused: big-endian
    /// objects, relocatable objects with several code sections and objects
    /// without `.debug_info` (unless `split`: a `.dwo`, whose sections end
    /// in `.dwo`).
    pub(crate) fn read(data: &'d [u8], split: bool, limit: u64) -> Result<Sections<'d>, Error> {
        let file = object::File::parse(data).map_err(|e| ErrorDetail::Object {
            what: e.to_string(),
        })?;
        if !file.is_little_endian() {
            return Err(ErrorDetail::Object {
                what: format!(
                    "a big-endian object ({:?}): only little-endian targets are supported",
                    file.architecture()
                ),
            }
            .into());
        }
        if !split {
            check_debug_info(&file)?;
            check_one_code_section(&file)?;
        }
        // A `.dwo` or `.dwp` (`split`) is relocatable too, but has no relocations.
        let relocatable = !split && file.kind() == object::ObjectKind::Relocatable;
        let mut by_name = BTreeMap::new();
        let mut decompressed = 0;
        for section in file.sections() {
            let Ok(name) = section.name() else { continue };
            // `.zdebug_*`: GNU's older compressed sections, decompressed alike.
            let name = match name.strip_prefix(".zdebug_") {
                Some(rest) => format!(".debug_{rest}"),
                None if name.starts_with(".debug_") => name.to_owned(),
                None => continue,
            };
            let mut bytes =
                crate::sections::section_bytes(&section, &name, limit, &mut decompressed)?;
            if relocatable {
                crate::sections::relocate(&file, &section, &name, &mut bytes)?;
            }
            by_name.insert(name, bytes);
        }
        Ok(Sections { by_name })
    }

    /// The DWARF over these sections (`.dwo` names when `split`).
    pub(crate) fn dwarf(&self, split: bool) -> Result<gimli::Dwarf<R<'_>>, Error> {
        gimli::Dwarf::load(|id| -> Result<R<'_>, Error> {
            let name = if split {
                id.dwo_name()
            } else {
                Some(id.name())
            };
            let bytes = name
                .and_then(|n| self.by_name.get(n))
                .map_or(&[][..], |b| &b[..]);
            Ok(EndianSlice::new(bytes, LittleEndian))
        })
    }

    /// The DWARF package over these sections (a `.dwp`'s, read with
    /// `split`).
    pub(crate) fn package(&self) -> Result<gimli::DwarfPackage<R<'_>>, Error> {
        let empty = EndianSlice::new(&[][..], LittleEndian);
        gimli::DwarfPackage::load(
            |id| -> Result<R<'_>, Error> {
                let bytes = id
                    .dwo_name()
                    .and_then(|n| self.by_name.get(n))
                    .map_or(&[][..], |b| &b[..]);
                Ok(EndianSlice::new(bytes, LittleEndian))
            },
            empty,
        )
    }
}

/// Refuses a relocatable object (`.o`) with more than one non-empty code
/// section (`-ffunction-sections`, C++ inline functions): its relocations
/// are applied with every section at address 0 (as llvm-dwarfdump reads
/// it), so two code sections would give their functions the same addresses.
fn check_one_code_section(file: &object::File<'_>) -> Result<(), Error> {
    if file.kind() != object::ObjectKind::Relocatable {
        return Ok(());
    }
    let code = file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text && s.size() > 0)
        .count();
    if code <= 1 {
        return Ok(());
    }
    Err(ErrorDetail::Object {
        what: format!(
            "a relocatable object (.o) with {code} code sections: their addresses overlap \
             until linked; link it first"
        ),
    }
    .into())
}

/// Refuses a file without DWARF to read: no `.debug_info` (stripped, or
/// built without `-g`; `.zdebug_info` is the old compressed spelling).
fn check_debug_info(file: &object::File<'_>) -> Result<(), Error> {
    let size = [".debug_info", ".zdebug_info"]
        .iter()
        .filter_map(|n| file.section_by_name(n))
        .map(|s| s.size())
        .max()
        .unwrap_or(0);
    if size > 0 {
        return Ok(());
    }
    let why = if file.section_by_name(".gnu_debuglink").is_some() {
        "stripped (its DWARF is in a separate file named by .gnu_debuglink)"
    } else if file.symbols().next().is_none() {
        "stripped"
    } else {
        "built without -g, or its debug sections were stripped"
    };
    Err(ErrorDetail::Object {
        what: format!("no DWARF: the file has no .debug_info section ({why})"),
    }
    .into())
}

/// Refuses a split-DWARF skeleton unit (`-gsplit-dwarf`) where its `.dwo` is
/// not followed ([`location_expressions`]).
fn check_not_skeleton(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>) -> Result<(), Error> {
    if unit.dwo_id.is_none() {
        return Ok(());
    }
    let mut entries = unit.entries();
    let mut dwo = String::from("?");
    if let Some((_, root)) = entries.next_dfs()? {
        for at in [gimli::DW_AT_dwo_name, gimli::DW_AT_GNU_dwo_name] {
            if let Some(v) = root.attr_value(at)? {
                dwo = dwarf.attr_string(unit, v)?.to_string_lossy().into_owned();
            }
        }
    }
    Err(ErrorDetail::Object {
        what: format!(
            "split DWARF (-gsplit-dwarf): the unit at .debug_info offset {:#x} is a skeleton; \
             its variables are in {dwo} (.dwo/.dwp files are not read)",
            unit.header
                .offset()
                .as_debug_info_offset()
                .map_or(0, |o| o.0)
        ),
    }
    .into())
}

pub(crate) fn encoding_of(unit: &gimli::Unit<R<'_>>) -> Encoding {
    let e = unit.encoding();
    Encoding {
        address_size: e.address_size,
        offset_size: e.format.word_size(),
        ..Encoding::default()
    }
}

/// An object file's DWARF, read once: the object parsed, its `.debug_*`
/// sections found and decompressed by [`Binary::parse`]; then
/// [`Binary::variables_at`] as many PCs as needed (each frame of each thread
/// of a core file) without reading the file again.
///
/// ```no_run
/// use locus_dwarf::binary::{evaluate_variable, Binary, Snapshot};
///
/// let data = std::fs::read("a.out")?;
/// let binary = Binary::parse(&data)?.with_load_bias(0x5555_5555_4000);
/// let snapshot = Snapshot::default();
/// for pc in [0x5555_5555_5130, 0x5555_5555_5190] {
///     for v in binary.variables_at(pc)? {
///         println!("{} = {:?}", v.name, evaluate_variable(&v, &snapshot).map(|e|
/// e.bits.to_hex()));
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Binary<'d> {
    data: &'d [u8],
    sections: Sections<'d>,
    /// A DWARF package's sections (`.dwp`), for split units.
    package: Option<Sections<'d>>,
    load_bias: u64,
    /// The bound on each file's decompressed sections, together.
    limit: u64,
}

impl<'d> Binary<'d> {
    /// Reads the object's DWARF sections (refused: not an object file,
    /// big-endian, no `.debug_info`, a relocatable object with several code
    /// sections). A relocatable object (`.o`) is read as llvm-dwarfdump
    /// reads it: its relocations applied, its code section at address 0.
    /// Sections are decompressed to at most
    /// [`DEFAULT_MAX_SECTION_BYTES`] in all (see [`Binary::parse_bounded`]).
    pub fn parse(data: &'d [u8]) -> Result<Binary<'d>, Error> {
        Binary::parse_bounded(data, DEFAULT_MAX_SECTION_BYTES)
    }

    /// [`Binary::parse`], with a compressed section (`-gz`, `.zdebug_*`)
    /// refused when its header claims, or its stream produces, more than
    /// what is left of `limit` bytes for the object's decompressed sections
    /// together; the bound applies alike (per file) to
    /// [`Binary::with_package`] and split units' `.dwo` files.
    pub fn parse_bounded(data: &'d [u8], limit: u64) -> Result<Binary<'d>, Error> {
        Ok(Binary {
            data,
            sections: Sections::read(data, false, limit)?,
            package: None,
            load_bias: 0,
            limit,
        })
    }

    /// Adds a DWARF package (`.dwp`, as `llvm-dwp` or `dwp` write it): the
    /// variables of a split-DWARF skeleton unit are looked up in it by DWO
    /// id, and in the `.dwo` file the skeleton names only when the package
    /// does not have the unit. gdb reads `BINARY.dwp` beside the binary;
    /// `locus dwarf vars` does the same. Refused: not an object, big-endian,
    /// a malformed `.debug_cu_index`.
    pub fn with_package(mut self, dwp: &'d [u8]) -> Result<Binary<'d>, Error> {
        let sections = Sections::read(dwp, true, self.limit)?;
        sections.package()?;
        self.package = Some(sections);
        Ok(self)
    }

    /// Sets how far the file was moved when loaded (see [`variables_at`]).
    pub fn with_load_bias(mut self, load_bias: u64) -> Binary<'d> {
        self.load_bias = load_bias;
        self
    }

    /// The load bias.
    pub fn load_bias(&self) -> u64 {
        self.load_bias
    }

    /// The object's bytes.
    pub fn data(&self) -> &'d [u8] {
        self.data
    }

    /// The variables and formal parameters in scope at `pc` (an address in
    /// the running program), as [`variables_at`] finds them.
    pub fn variables_at(&self, pc: u64) -> Result<Vec<Variable>, Error> {
        Ok(self.scopes_at(pc)?.variables)
    }

    /// The DIEs of `vars` (what [`Binary::variables_at`] found in a caller's frame at its
    /// lookup pc, one byte before its return address) whose location is the same at
    /// `return_address`: still in scope, with the same expression, one that names no other
    /// DIE (no implicit pointer, `DW_OP_call*` or GNU variable or parameter reference).
    ///
    /// Only such a variable may be read from the caller's call-clobbered registers
    /// ([`crate::unwind::Frame::call_clobbered`]). The compiler keeps a location in one
    /// over a call's return only when the callee leaves the register alone (gcc's IPA-RA
    /// knows which registers a function of the unit writes): there, between the call and
    /// its return nothing writes the register, so what the frames it called left in it is
    /// the caller's value. (Registers results come back in are never among them: the call
    /// itself writes those.)
    ///
    /// Only where `sites` ([`Binary::call_sites`]) know the call returns there, from a
    /// function gcc knew ([`CallSites::returns_to`]): clang does no IPA-RA, and after a
    /// `noreturn` call the code at the return address is another path's, to which clang
    /// gives the same location in one entry spanning the call (a caller read the
    /// register the callee had left: a wrong value).
    ///
    /// # Errors
    /// As [`Binary::variables_at`] at `return_address`.
    pub fn kept_across_call(
        &self,
        vars: &[Variable],
        return_address: u64,
        sites: &CallSites,
    ) -> Result<BTreeSet<u64>, Error> {
        if !sites.returns_to(return_address) {
            return Ok(BTreeSet::new());
        }
        let after = self.variables_at(return_address)?;
        let names_no_die = |bytes: &[u8], encoding: Encoding| {
            crate::op::decode(bytes, encoding).is_ok_and(|ops| {
                !ops.iter().any(|(_, op)| {
                    matches!(
                        op,
                        Op::Call2(_)
                            | Op::Call4(_)
                            | Op::CallRef(_)
                            | Op::ImplicitPointer { .. }
                            | Op::AspaceImplicitPointer { .. }
                            | Op::GnuParameterRef(_)
                            | Op::GnuVariableValue(_)
                    )
                })
            })
        };
        Ok(vars
            .iter()
            .filter(|v| match &v.location {
                VariableLocation::Expression(bytes) => {
                    names_no_die(bytes, v.encoding)
                        && after
                            .iter()
                            .any(|a| a.die == v.die && a.location == v.location)
                }
                _ => false,
            })
            .map(|v| v.die)
            .collect())
    }

    /// The functions whose code holds `pc` (an address in the running program): the
    /// concrete function, then each function inlined there, innermost last (the frames
    /// gdb shows for one frame of the call-frame information, innermost first there).
    pub fn functions_at(&self, pc: u64) -> Result<Vec<String>, Error> {
        Ok(self.scopes_at(pc)?.functions)
    }

    fn scopes_at(&self, pc: u64) -> Result<Found, Error> {
        let dwarf = self.sections.dwarf(false)?;
        let package = self.package.as_ref().map(Sections::package).transpose()?;
        let load_bias = self.load_bias;
        let pc = pc.wrapping_sub(load_bias);
        let mut out = Found::default();
        let units = all_units(&dwarf)?;
        for unit in &units {
            if unit.dwo_id.is_some() {
                scan_dwo(
                    &dwarf,
                    package.as_ref(),
                    unit,
                    (pc, load_bias),
                    self.limit,
                    &mut out,
                )?;
                continue;
            }
            scan_unit(&dwarf, unit, &units, pc, load_bias, &mut out)?;
        }
        Ok(out)
    }

    /// The object the DIE at `.debug_info` offset `die` describes, as a [`Variable`] with
    /// its location at `pc` (an address in the running program): a variable, parameter,
    /// constant or `DW_TAG_dwarf_procedure` (gcc's for the object an implicit pointer to a
    /// string literal names). The DIE an implicit pointer (`DW_OP_implicit_pointer`) names
    /// need not be in scope; gdb reads it anywhere. It has no `function` and no frame base:
    /// evaluate it in the frame of the pointer (whose function's frame base gdb uses for a
    /// `DW_OP_fbreg` there). A DIE with no location at `pc` has
    /// [`VariableLocation::None`](super::VariableLocation::None).
    ///
    /// The offset is untrusted: one that is no DIE of the file's units (outside them, in a
    /// unit header, inside another DIE), a DIE of another kind, or a DIE of a split-DWARF
    /// skeleton unit (whose DIEs are in its `.dwo`) is an error.
    pub fn object_at(&self, die: u64, pc: u64) -> Result<Variable, Error> {
        let dwarf = self.sections.dwarf(false)?;
        let no_die = || ErrorDetail::Dwarf {
            what: format!("no DIE at .debug_info offset {die:#x}"),
        };
        let offset = gimli::DebugInfoOffset(usize::try_from(die).map_err(|_| no_die())?);
        // A unit past the one holding the DIE that cannot be read does not stop the lookup
        // (only references into it would).
        let (units, broken) = units_before_error(&dwarf);
        for unit in &units {
            let Some(in_unit) = offset.to_unit_offset(&unit.header) else {
                continue;
            };
            if unit.dwo_id.is_some() {
                return Err(ErrorDetail::Dwarf {
                    what: format!(
                        "DIE {die:#x} is in a split-DWARF skeleton unit: its objects are in the \
                         .dwo and are not looked up by offset"
                    ),
                }
                .into());
            }
            let pc = pc.wrapping_sub(self.load_bias);
            return object_in_unit(&dwarf, unit, &units, in_unit, (pc, self.load_bias));
        }
        Err(broken.unwrap_or_else(|| no_die().into()))
    }

    /// Every location expression in the binary, as [`location_expressions`].
    pub fn location_expressions(&self) -> Result<Vec<LocationExpression>, Error> {
        let dwarf = self.sections.dwarf(false)?;
        let mut out = Vec::new();
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            check_not_skeleton(&dwarf, &unit)?;
            let encoding = encoding_of(&unit);
            let mut entries = unit.entries();
            while let Some((_, entry)) = entries.next_dfs()? {
                for at in [gimli::DW_AT_location, gimli::DW_AT_frame_base] {
                    let Some(value) = entry.attr_value(at)? else {
                        continue;
                    };
                    if let AttributeValue::Exprloc(e) = value {
                        out.push(LocationExpression {
                            bytes: e.0.slice().to_vec(),
                            encoding,
                            in_list: false,
                        });
                    } else if let Some(mut list) = dwarf.attr_locations(&unit, value)? {
                        while let Some(le) = list.next()? {
                            out.push(LocationExpression {
                                bytes: le.data.0.slice().to_vec(),
                                encoding,
                                in_list: true,
                            });
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The call sites and functions of the binary, for the entry values of
    /// frames ([`CallSites::entry_values`]), with this binary's load bias.
    pub fn call_sites(&self) -> Result<CallSites, Error> {
        let dwarf = self.sections.dwarf(false)?;
        CallSites::read(&dwarf, self.load_bias)
    }

    /// The address of symbol `name` in the object's symbol table, if present.
    pub fn symbol_address(&self, name: &str) -> Result<Option<u64>, Error> {
        symbol_address(self.data, name)
    }
}

/// The address of symbol `name` in the object's symbol table, if present.
pub fn symbol_address(data: &[u8], name: &str) -> Result<Option<u64>, Error> {
    use object::ObjectSymbol as _;
    let file = object::File::parse(data).map_err(|e| ErrorDetail::Object {
        what: e.to_string(),
    })?;
    Ok(file
        .symbols()
        .find(|s| s.name() == Ok(name))
        .map(|s| s.address()))
}

/// Every location expression in the binary: each `DW_AT_location` and
/// `DW_AT_frame_base` expression and every entry of every location list.
pub fn location_expressions(data: &[u8]) -> Result<Vec<LocationExpression>, Error> {
    Binary::parse(data)?.location_expressions()
}

/// The variables and formal parameters in scope at `pc`: those of every
/// subprogram, lexical block and inlined subroutine whose ranges contain
/// `pc`, innermost scope last. Reads the file each time: for several PCs of
/// one file, [`Binary::parse`] it once.
///
/// `pc` is an address in the running program, and `load_bias` how far the
/// file was moved when loaded: 0 for a position-dependent executable, the
/// load base for a position-independent one (0x555555554000 under gdb) or a
/// shared library. Scopes and location lists are matched at
/// `pc - load_bias`, and every `DW_OP_addr` (and `DW_OP_addrx`) address in
/// the expressions handed out is moved by `load_bias`, so that they name
/// the running program's memory.
pub fn variables_at(data: &[u8], pc: u64, load_bias: u64) -> Result<Vec<Variable>, Error> {
    Binary::parse(data)?
        .with_load_bias(load_bias)
        .variables_at(pc)
}

/// Every unit of `dwarf`, in `.debug_info` order: a scan follows references from one into
/// another (`DW_FORM_ref_addr`, which LTO writes between the units of its sources).
fn all_units<'a>(dwarf: &gimli::Dwarf<R<'a>>) -> Result<Vec<gimli::Unit<R<'a>>>, Error> {
    let (units, broken) = units_before_error(dwarf);
    match broken {
        Some(e) => Err(e),
        None => Ok(units),
    }
}

/// The units of `dwarf` in `.debug_info` order, then those of `.debug_types` (DWARF 4's
/// type units, after every `.debug_info` unit as their offsets sort), up to the first that
/// cannot be read, and that one's error.
fn units_before_error<'a>(dwarf: &gimli::Dwarf<R<'a>>) -> (Vec<gimli::Unit<R<'a>>>, Option<Error>) {
    let mut out = Vec::new();
    let mut info = dwarf.units();
    let mut types = dwarf.type_units();
    let broken = push_units(dwarf, &mut || info.next(), &mut out)
        .or_else(|| push_units(dwarf, &mut || types.next(), &mut out));
    (out, broken)
}

/// Appends to `out` the unit of each header `next` gives, up to the end or the first
/// that cannot be read, whose error it returns.
fn push_units<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    next: &mut dyn FnMut() -> gimli::Result<Option<gimli::UnitHeader<R<'a>>>>,
    out: &mut Vec<gimli::Unit<R<'a>>>,
) -> Option<Error> {
    loop {
        match next().and_then(|h| h.map(|h| dwarf.unit(h)).transpose()) {
            Ok(None) => return None,
            Ok(Some(unit)) => out.push(unit),
            Err(e) => return Some(e.into()),
        }
    }
}
