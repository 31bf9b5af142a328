//! The stack map index: building it from section bytes or an object file, and reading its
//! tables, functions, constants, records, locations, live-outs and statepoint views.
//!
//! Records are named by their *number*: their position in section order, counting across
//! tables (table 0's records first). `LocusRecord::number` is that number; every call
//! that reads a record takes it, and checks it against the count.

use std::ffi::c_char;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

use locus_stackmap::object::{find_section, ObjectInfo};
use locus_stackmap::statepoint::StatepointRecord;
use locus_stackmap::{
    names, Arch, IndexedRecord, Location, ParseOptions, Record, RunTimeEndian, StackMapIndex,
    Strictness, Table, Tables,
};

use crate::status::{
    arg, bytes, guard, CBuf, Failure, LocusError, LocusStatus, Out, LOCUS_ERR_INVALID_ARGUMENT,
    LOCUS_ERR_NOT_FOUND, LOCUS_ERR_NO_STACKMAPS,
};

/// `LocusIndexInfo.arch` and the `arch` argument of the patch calls: unknown or none.
pub const LOCUS_ARCH_UNKNOWN: u32 = 0;
/// x86-64.
pub const LOCUS_ARCH_X86_64: u32 = 1;
/// AArch64 (little-endian code).
pub const LOCUS_ARCH_AARCH64: u32 = 2;

/// Byte order argument: the byte order of the machine running this library.
pub const LOCUS_ENDIAN_NATIVE: u32 = 0;
/// Byte order argument: little-endian.
pub const LOCUS_ENDIAN_LITTLE: u32 = 1;
/// Byte order argument: big-endian.
pub const LOCUS_ENDIAN_BIG: u32 = 2;

/// Index flag: check only what is needed to read the section safely; reserved fields,
/// padding and the functions' record counts are not checked (LLVM always writes them
/// right, so the default is strict).
pub const LOCUS_INDEX_LENIENT: u32 = 1;
/// Index flag for `locus_index_from_object`: index the section's bytes as stored in the
/// file, without applying the file's relocations to them. In a relocatable object every
/// function address then reads 0, as `llvm-readobj --stackmap` prints it.
pub const LOCUS_INDEX_UNRELOCATED: u32 = 2;

/// `LocusRecord.function` of a record that no function's record count covers (only a
/// lenient parse admits one).
pub const LOCUS_NO_FUNCTION: u32 = u32::MAX;

/// Location kind: the value is in a register.
pub const LOCUS_LOCATION_REGISTER: u8 = 1;
/// Location kind: the value is the address `register + offset`.
pub const LOCUS_LOCATION_DIRECT: u8 = 2;
/// Location kind: the value is in memory at `[register + offset]`.
pub const LOCUS_LOCATION_INDIRECT: u8 = 3;
/// Location kind: the value is the small constant in `offset`.
pub const LOCUS_LOCATION_CONSTANT: u8 = 4;
/// Location kind: the value is the table's constant number `constant_index`.
pub const LOCUS_LOCATION_CONSTANT_INDEX: u8 = 5;

/// An index over the stack map tables of one section. Opaque: made by
/// `locus_index_from_section` or `locus_index_from_object`, freed by `locus_index_free`.
///
/// It holds its own copy of the section's bytes. Calls that only read it may run on several
/// threads at once.
pub struct LocusIndex {
    /// Borrows `owned`'s bytes: dropped first (see `Drop`).
    inner: ManuallyDrop<Inner<'static>>,
    /// Declared after `inner`, and freed after it.
    _owned: OwnedBytes,
}

/// Bytes from `Box::into_raw`, freed on drop. Raw, not a `Box`, so that moving it does not
/// assert unique access while `Inner` borrows them.
struct OwnedBytes(*mut [u8]);

impl Drop for OwnedBytes {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` in `LocusIndex::build` and is
        // freed only here, once.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

impl Drop for LocusIndex {
    fn drop(&mut self) {
        // SAFETY: `inner` is dropped only here, before `_owned` frees the bytes it borrows.
        unsafe { ManuallyDrop::drop(&mut self.inner) };
    }
}

/// Where one record is, in section order.
#[derive(Clone, Copy, Debug)]
struct Meta {
    table: u32,
    /// Position of its function in its table, or `LOCUS_NO_FUNCTION`.
    function: u32,
    /// Byte offset of the record from the start of the section.
    offset: usize,
}

pub(crate) struct Inner<'a> {
    index: StackMapIndex<'a, RunTimeEndian>,
    /// Every record of every table, in section order.
    records: Vec<Meta>,
    /// The number of each table's first record; one more entry, the total.
    table_first: Vec<usize>,
    /// Record numbers of the indexed records in address order, built when first asked for.
    by_address: OnceLock<Vec<usize>>,
    arch: u32,
    endian: RunTimeEndian,
    section_size: usize,
}

impl<'a> Inner<'a> {
    fn new(
        section: &'a [u8],
        endian: RunTimeEndian,
        load_bias: u64,
        options: ParseOptions,
        arch: u32,
    ) -> Result<Self, Failure> {
        let tables: Vec<Table<'a, RunTimeEndian>> = Tables::new(section, endian, options)
            .collect::<Result<_, _>>()
            .map_err(|e| Failure::stackmap("parsing the stack map section", &e))?;
        let mut records = Vec::new();
        let mut table_first = Vec::with_capacity(tables.len() + 1);
        for (ti, t) in tables.iter().enumerate() {
            table_first.push(records.len());
            // Records follow the function order, each function owning `record_count`.
            let mut functions = t.functions().enumerate();
            let mut current: Option<usize> = None;
            let mut left = 0u64;
            for r in t.records() {
                while left == 0 {
                    match functions.next() {
                        Some((i, f)) => {
                            left = f.record_count;
                            current = Some(i);
                        }
                        None => {
                            current = None;
                            break;
                        }
                    }
                }
                if current.is_some() {
                    left -= 1;
                }
                records.push(Meta {
                    table: ti as u32,
                    function: current.map_or(LOCUS_NO_FUNCTION, |i| i as u32),
                    offset: r.offset(),
                });
            }
        }
        table_first.push(records.len());
        Ok(Inner {
            index: StackMapIndex::new(tables, load_bias),
            records,
            table_first,
            by_address: OnceLock::new(),
            arch,
            endian,
            section_size: section.len(),
        })
    }

    fn table(&self, table: usize) -> Result<&Table<'a, RunTimeEndian>, Failure> {
        let tables = self.index.tables();
        tables
            .get(table)
            .ok_or_else(|| Failure::out_of_range("table", table as u64, tables.len() as u64))
    }

    /// The record numbered `number` and where it is.
    fn record(&self, number: usize) -> Result<(Meta, Record<'a, RunTimeEndian>), Failure> {
        let m = *self.records.get(number).ok_or_else(|| {
            Failure::out_of_range("record", number as u64, self.records.len() as u64)
        })?;
        let t = self.table(m.table as usize)?;
        let r = t.record_at(m.offset).ok_or_else(|| {
            Failure::new(
                crate::status::LOCUS_ERR_INTERNAL,
                format!("record {number} at offset {:#x} cannot be read", m.offset),
            )
        })?;
        Ok((m, r))
    }

    /// The C description of record `number`.
    fn describe(&self, number: usize) -> Result<LocusRecord, Failure> {
        let (m, r) = self.record(number)?;
        let function = self
            .table(m.table as usize)?
            .function(m.function as usize)
            .filter(|_| m.function != LOCUS_NO_FUNCTION);
        let (function_address, stack_size) = function.map_or((0, 0), |f| (f.address, f.stack_size));
        Ok(LocusRecord {
            number: number as u64,
            id: r.id(),
            address: function_address
                .wrapping_add(self.index.load_bias())
                .wrapping_add(u64::from(r.instruction_offset())),
            function_address,
            stack_size,
            section_offset: r.offset() as u64,
            instruction_offset: r.instruction_offset(),
            table: m.table,
            function: m.function,
            flags: r.flags(),
            num_locations: r.num_locations(),
            num_live_outs: r.num_live_outs(),
        })
    }

    /// The number of a record the index handed out.
    fn number_of(&self, found: &IndexedRecord<'a, RunTimeEndian>) -> Result<usize, Failure> {
        let first = self.table_first.get(found.table).copied().unwrap_or(0);
        let end = self.table_first.get(found.table + 1).copied().unwrap_or(0);
        let own = self.records.get(first..end).unwrap_or(&[]);
        let offset = found.record.offset();
        match own.binary_search_by_key(&offset, |m| m.offset) {
            Ok(i) => Ok(first + i),
            Err(_) => Err(Failure::new(
                crate::status::LOCUS_ERR_INTERNAL,
                format!("the index found a record at offset {offset:#x} that is not listed"),
            )),
        }
    }

    fn by_address(&self) -> &[usize] {
        self.by_address.get_or_init(|| {
            self.index
                .iter()
                .filter_map(|found| self.number_of(&found).ok())
                .collect()
        })
    }
}

impl LocusIndex {
    /// Copies `section` and indexes the copy.
    fn build(
        section: &[u8],
        endian: RunTimeEndian,
        load_bias: u64,
        flags: u32,
        arch: u32,
    ) -> Result<Box<LocusIndex>, Failure> {
        let options = ParseOptions {
            strictness: if flags & LOCUS_INDEX_LENIENT != 0 {
                Strictness::Lenient
            } else {
                Strictness::Strict
            },
        };
        let owned = OwnedBytes(Box::into_raw(Box::<[u8]>::from(section)));
        // SAFETY: the bytes stay allocated, and are never written, until `owned` drops;
        // the index that borrows them as 'static is dropped before it (`LocusIndex`'s Drop),
        // and if `Inner::new` fails or panics nothing that borrows them survives.
        let section: &'static [u8] = unsafe { &*owned.0 };
        let inner = Inner::new(section, endian, load_bias, options, arch)?;
        Ok(Box::new(LocusIndex {
            inner: ManuallyDrop::new(inner),
            _owned: owned,
        }))
    }
}

/// What `locus_index_info` reports about an index.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusIndexInfo {
    /// Number of tables in the section (one per object file that was linked in).
    pub num_tables: u64,
    /// Number of records in all tables: the record numbers are `0 .. num_records`.
    pub num_records: u64,
    /// Number of records the address index holds (those some function's count covers; all
    /// of them in a strictly parsed section).
    pub num_indexed: u64,
    /// The load bias added to every function address.
    pub load_bias: u64,
    /// Size of the section in bytes.
    pub section_size: u64,
    /// `LOCUS_ARCH_*` of the object file, `LOCUS_ARCH_UNKNOWN` for a bare section.
    pub arch: u32,
    /// True when the section is big-endian.
    pub big_endian: bool,
}

/// One table's header, from `locus_index_table`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusTable {
    /// Byte offset of the table from the start of the section.
    pub section_offset: u64,
    /// Size of the table in bytes.
    pub size: u64,
    /// The number of the table's first record (its records are numbered consecutively).
    pub first_record: u64,
    /// `NumFunctions`.
    pub num_functions: u32,
    /// `NumConstants`.
    pub num_constants: u32,
    /// `NumRecords`.
    pub num_records: u32,
    /// The stack map version (3).
    pub version: u8,
}

/// One `StkSizeRecord`, from `locus_index_function`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusFunction {
    /// The function's address as the section holds it (0 in an unrelocated object).
    pub address: u64,
    /// The fixed stack size, or `UINT64_MAX` when it is not static.
    pub stack_size: u64,
    /// How many of the table's records belong to the function.
    pub record_count: u64,
}

/// One record, as `locus_index_record`, the lookups and `locus_index_record_by_address`
/// describe it. A plain copy: it stays valid after the index is freed, but its `number`
/// means something only to the index it came from.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusRecord {
    /// The record's number (its position in section order): pass it to the calls that read
    /// its locations, live-outs and statepoint view.
    pub number: u64,
    /// The ID the intrinsic was given (not unique).
    pub id: u64,
    /// Absolute code address: function address + load bias + instruction offset (what a
    /// return address is compared with).
    pub address: u64,
    /// The address of the record's function as the section holds it (0 without one).
    pub function_address: u64,
    /// The function's stack size (`UINT64_MAX` if not static; 0 without a function).
    pub stack_size: u64,
    /// Byte offset of the record from the start of the section.
    pub section_offset: u64,
    /// Offset of the record's instruction from the start of its function.
    pub instruction_offset: u32,
    /// The table the record is in.
    pub table: u32,
    /// Position of its function in the table, or `LOCUS_NO_FUNCTION`.
    pub function: u32,
    /// The record's flags field (LLVM writes 0).
    pub flags: u16,
    /// `NumLocations`.
    pub num_locations: u16,
    /// `NumLiveOuts`.
    pub num_live_outs: u16,
}

/// One location: where one live value is.
///
/// | `kind` | value | fields used |
/// |---|---|---|
/// | `LOCUS_LOCATION_REGISTER` | the register's contents | `dwarf_reg`, `size` |
/// | `LOCUS_LOCATION_DIRECT` | the address `dwarf_reg + offset` | `dwarf_reg`, `offset`, `size` |
/// | `LOCUS_LOCATION_INDIRECT` | the `size` bytes at `[dwarf_reg + offset]` | `dwarf_reg`, `offset`, `size` |
/// | `LOCUS_LOCATION_CONSTANT` | `offset`, sign-extended (also in `constant`) | `offset`, `size` |
/// | `LOCUS_LOCATION_CONSTANT_INDEX` | `constant` = the table's constant `constant_index` | `constant_index`, `constant`, `size` |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusLocation {
    /// The value without a frame: the sign-extended small constant or the large constant
    /// (0 for the other kinds).
    pub constant: u64,
    /// The offset from the register (Direct, Indirect) or the small constant as stored.
    pub offset: i32,
    /// The index into the table's constants (ConstantIndex), else 0.
    pub constant_index: u32,
    /// DWARF register number (Register, Direct, Indirect), else 0.
    pub dwarf_reg: u16,
    /// Size of the value in bytes.
    pub size: u16,
    /// One of the `LOCUS_LOCATION_*` kinds.
    pub kind: u8,
}

/// One live-out register.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusLiveOut {
    /// DWARF register number.
    pub dwarf_reg: u16,
    /// Bytes of the register that are live.
    pub size: u8,
}

/// A record read as a `gc.statepoint`: three constants (calling convention, flags, the
/// number of deopt locations), the deopt locations, then (base, derived) pairs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusStatepoint {
    /// The statepoint ID (the record ID).
    pub id: u64,
    /// The LLVM calling convention number of the wrapped call.
    pub calling_convention: u64,
    /// The statepoint flags operand.
    pub flags: u64,
    /// Number of deopt locations (`locus_statepoint_deopt`).
    pub num_deopt: u64,
    /// Number of (base, derived) pairs (`locus_statepoint_gc_pointer`).
    pub num_gc_pointers: u64,
}

/// One relocated pointer of a statepoint: where its base object is and where the (possibly
/// interior) pointer is. Treat a statepoint's pairs as a set (LLVM promises no order):
/// update every base, then recompute every derived pointer from its base.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocusGcPointer {
    /// Location of the base pointer.
    pub base: LocusLocation,
    /// Location of the derived pointer.
    pub derived: LocusLocation,
}

/// Bytes in each name buffer of `LocusObjectInfo`, the NUL included.
pub const LOCUS_NAME_SIZE: usize = 64;
/// Bytes in `LocusObjectInfo.load_name`, the NUL included.
pub const LOCUS_LOAD_NAME_SIZE: usize = 256;

/// `LocusObjectInfo.format`: a format this library does not name.
pub const LOCUS_FORMAT_OTHER: u32 = 0;
/// ELF.
pub const LOCUS_FORMAT_ELF: u32 = 1;
/// Mach-O.
pub const LOCUS_FORMAT_MACHO: u32 = 2;
/// COFF or PE.
pub const LOCUS_FORMAT_COFF: u32 = 3;

/// What `locus_object_info` reports about an object file: what `llvm-readobj` prints
/// before its dump (`Format:`, `Arch:`, `AddressSize:`, `LoadName:`), and whether it has
/// stack maps.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LocusObjectInfo {
    /// The format name as LLVM gives it (e.g. `elf64-x86-64`), NUL-terminated.
    pub format_name: [c_char; LOCUS_NAME_SIZE],
    /// The architecture name as LLVM gives it (e.g. `x86_64`), NUL-terminated.
    pub arch_name: [c_char; LOCUS_NAME_SIZE],
    /// An ELF shared object's `DT_SONAME`, NUL-terminated (cut if longer than the buffer;
    /// `load_name_len` is its full length). Empty without one.
    pub load_name: [c_char; LOCUS_LOAD_NAME_SIZE],
    /// Length of the whole `DT_SONAME` in bytes.
    pub load_name_len: u64,
    /// One of the `LOCUS_FORMAT_*` values.
    pub format: u32,
    /// `LOCUS_ARCH_*`: the architecture when it is one the patch calls encode for.
    pub arch: u32,
    /// The header's machine: ELF `e_machine`, Mach-O `cputype`, COFF `Machine`.
    pub machine: u32,
    /// True for a 64-bit file.
    pub is_64: bool,
    /// True for a big-endian file.
    pub big_endian: bool,
    /// True when the file has a `DT_SONAME`.
    pub has_load_name: bool,
    /// True when the file has a stack map section.
    pub has_stackmaps: bool,
}

fn arch_code(arch: Option<Arch>) -> u32 {
    match arch {
        Some(Arch::X86_64) => LOCUS_ARCH_X86_64,
        Some(Arch::AArch64) => LOCUS_ARCH_AARCH64,
        None => LOCUS_ARCH_UNKNOWN,
    }
}

/// The C form of a location.
pub(crate) fn to_c_location(l: Location) -> LocusLocation {
    let mut c = LocusLocation {
        kind: l.kind() as u8,
        size: l.size(),
        dwarf_reg: l.dwarf_reg().unwrap_or(0),
        constant: l.constant().unwrap_or(0),
        ..LocusLocation::default()
    };
    match l {
        Location::Direct { offset, .. } | Location::Indirect { offset, .. } => c.offset = offset,
        Location::Constant { value, .. } => c.offset = value,
        Location::ConstantIndex { index, .. } => c.constant_index = index,
        Location::Register { .. } => {}
    }
    c
}

/// The location a C caller describes; fails on an unknown kind.
pub(crate) fn from_c_location(c: &LocusLocation) -> Result<Location, Failure> {
    let (dwarf_reg, offset, size) = (c.dwarf_reg, c.offset, c.size);
    Ok(match c.kind {
        LOCUS_LOCATION_REGISTER => Location::Register { dwarf_reg, size },
        LOCUS_LOCATION_DIRECT => Location::Direct {
            dwarf_reg,
            offset,
            size,
        },
        LOCUS_LOCATION_INDIRECT => Location::Indirect {
            dwarf_reg,
            offset,
            size,
        },
        LOCUS_LOCATION_CONSTANT => Location::Constant {
            value: offset,
            size,
        },
        LOCUS_LOCATION_CONSTANT_INDEX => Location::ConstantIndex {
            index: c.constant_index,
            value: c.constant,
            size,
        },
        kind => {
            return Err(Failure::new(
                crate::status::LOCUS_ERR_BAD_LOCATION_KIND,
                format!("location kind {kind} is not one of 1 (Register) to 5 (ConstantIndex)"),
            ))
        }
    })
}

/// Refuses flag bits outside `known`.
fn check_flags(flags: u32, known: u32) -> Result<(), Failure> {
    if flags & !known != 0 {
        return Err(Failure::new(
            LOCUS_ERR_INVALID_ARGUMENT,
            format!("unknown flag bits {:#x}", flags & !known),
        ));
    }
    Ok(())
}

/// The index behind a handle, or a null-argument failure.
///
/// # Safety
///
/// `index` is null or a live handle from `locus_index_from_*`.
unsafe fn handle<'i>(index: *const LocusIndex) -> Result<&'i Inner<'static>, Failure> {
    // SAFETY: forwarded from the caller.
    let index = unsafe { arg(index, "index") }?;
    Ok(&index.inner)
}

/// Indexes the stack map section `data[0 .. len]` (one or more tables back to back, as in
/// a linked binary's `.llvm_stackmaps`).
///
/// `endian` is `LOCUS_ENDIAN_NATIVE`, `LOCUS_ENDIAN_LITTLE` or `LOCUS_ENDIAN_BIG`;
/// `load_bias` is added to every function address (0 for a section read from memory after
/// the loader relocated it, or from a non-PIE executable); `flags` is 0 or
/// `LOCUS_INDEX_LENIENT`. The section is copied: the caller may free `data` after the call.
/// On success `*out_index` is the new index (free it with `locus_index_free`); on failure
/// it is set to NULL.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT` (`out_index`, or `data` with `len` > 0),
/// `LOCUS_ERR_INVALID_ARGUMENT`, and the parse errors (`LOCUS_ERR_TRUNCATED`,
/// `LOCUS_ERR_EMPTY_SECTION`, ...) with the offset of the field at fault.
///
/// # Safety
///
/// `data` points to `len` readable bytes (or `len` is 0); `out_index` is null or writable;
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_from_section(
    data: *const u8,
    len: usize,
    endian: u32,
    load_bias: u64,
    flags: u32,
    out_index: *mut *mut LocusIndex,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let out = Out::new(out_index, "out_index")?;
        // SAFETY: `out_index` is writable (this function's contract).
        unsafe { out.set(std::ptr::null_mut()) };
        // SAFETY: `data` holds `len` readable bytes (this function's contract).
        let section = unsafe { bytes(data, len, "data") }?;
        check_flags(flags, LOCUS_INDEX_LENIENT)?;
        let endian = match endian {
            LOCUS_ENDIAN_NATIVE if cfg!(target_endian = "big") => RunTimeEndian::Big,
            LOCUS_ENDIAN_NATIVE | LOCUS_ENDIAN_LITTLE => RunTimeEndian::Little,
            LOCUS_ENDIAN_BIG => RunTimeEndian::Big,
            other => {
                return Err(Failure::new(
                    LOCUS_ERR_INVALID_ARGUMENT,
                    format!(
                        "endian {other} is not LOCUS_ENDIAN_NATIVE (0), _LITTLE (1) or _BIG (2)"
                    ),
                ))
            }
        };
        let index = LocusIndex::build(section, endian, load_bias, flags, LOCUS_ARCH_UNKNOWN)?;
        // SAFETY: as above.
        unsafe { out.set(Box::into_raw(index)) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Finds the stack map section of the object file `data[0 .. len]` (ELF, Mach-O or COFF:
/// a relocatable object, an executable or a shared library) and indexes it.
///
/// By default the file's relocations of the section are applied first, so that function
/// addresses are real ones (in a relocatable object, the functions' offsets in their
/// section); `LOCUS_INDEX_UNRELOCATED` indexes the bytes as stored. `flags` may also hold
/// `LOCUS_INDEX_LENIENT`. `load_bias` is added to every function address (the load base of
/// a PIE or shared object read from its file). The section is copied: the caller may free
/// `data` after the call. On failure `*out_index` is set to NULL.
///
/// Errors: as `locus_index_from_section`, plus `LOCUS_ERR_OBJECT` (not an object file) and
/// `LOCUS_ERR_NO_STACKMAPS` (no stack map section).
///
/// # Safety
///
/// As for `locus_index_from_section`.
#[no_mangle]
pub unsafe extern "C" fn locus_index_from_object(
    data: *const u8,
    len: usize,
    load_bias: u64,
    flags: u32,
    out_index: *mut *mut LocusIndex,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let out = Out::new(out_index, "out_index")?;
        // SAFETY: `out_index` is writable (this function's contract).
        unsafe { out.set(std::ptr::null_mut()) };
        // SAFETY: `data` holds `len` readable bytes (this function's contract).
        let file = unsafe { bytes(data, len, "data") }?;
        check_flags(flags, LOCUS_INDEX_LENIENT | LOCUS_INDEX_UNRELOCATED)?;
        let (_, section) =
            find_section(file).map_err(|e| Failure::stackmap("reading the object file", &e))?;
        let section = section.ok_or_else(|| {
            Failure::new(
                LOCUS_ERR_NO_STACKMAPS,
                "the object file has no stack map section (.llvm_stackmaps, __llvm_stackmaps)",
            )
        })?;
        let bytes = if flags & LOCUS_INDEX_UNRELOCATED != 0 {
            section.data
        } else {
            section.resolved()
        };
        let index = LocusIndex::build(
            bytes,
            section.endian,
            load_bias,
            flags,
            arch_code(section.arch),
        )?;
        // SAFETY: as above.
        unsafe { out.set(Box::into_raw(index)) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Frees an index. Null is accepted and does nothing.
///
/// # Safety
///
/// `index` is null or a handle from `locus_index_from_*` that was not freed yet; no other
/// call may be using it, and it must not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn locus_index_free(index: *mut LocusIndex) {
    if index.is_null() {
        return;
    }
    // A panic in a destructor must not cross the boundary either; there is nothing to
    // report it to, so it is swallowed (the memory may then leak).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the handle came from Box::into_raw in locus_index_from_* and is freed
        // once (this function's contract).
        drop(unsafe { Box::from_raw(index) });
    }));
}

/// Describes the object file `data[0 .. len]` as `llvm-readobj` does before its dump, and
/// says whether it has stack maps.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OBJECT`.
///
/// # Safety
///
/// `data` points to `len` readable bytes (or `len` is 0); `out` is null or writable; `err`
/// is null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_object_info(
    data: *const u8,
    len: usize,
    out: *mut LocusObjectInfo,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let out = Out::new(out, "out")?;
        // SAFETY: `data` holds `len` readable bytes (this function's contract).
        let file = unsafe { bytes(data, len, "data") }?;
        let (info, section) =
            find_section(file).map_err(|e| Failure::stackmap("reading the object file", &e))?;
        let c = object_info(&info, section.is_some());
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

fn object_info(info: &ObjectInfo, has_stackmaps: bool) -> LocusObjectInfo {
    use locus_stackmap::object::BinaryFormat;
    use std::fmt::Write as _;
    let mut c = LocusObjectInfo {
        format_name: [0; LOCUS_NAME_SIZE],
        arch_name: [0; LOCUS_NAME_SIZE],
        load_name: [0; LOCUS_LOAD_NAME_SIZE],
        load_name_len: 0,
        format: match info.format {
            BinaryFormat::Elf => LOCUS_FORMAT_ELF,
            BinaryFormat::MachO => LOCUS_FORMAT_MACHO,
            BinaryFormat::Coff | BinaryFormat::Pe => LOCUS_FORMAT_COFF,
            _ => LOCUS_FORMAT_OTHER,
        },
        arch: arch_code(match info.architecture {
            locus_stackmap::object::Architecture::X86_64 => Some(Arch::X86_64),
            locus_stackmap::object::Architecture::Aarch64 => Some(Arch::AArch64),
            _ => None,
        }),
        machine: info.machine,
        is_64: info.is_64,
        big_endian: info.endian == RunTimeEndian::Big,
        has_load_name: info.load_name.is_some(),
        has_stackmaps,
    };
    let _ = CBuf::new(&mut c.format_name).write_str(names::format_name(info));
    let _ = CBuf::new(&mut c.arch_name).write_str(names::arch_name(info));
    if let Some(name) = &info.load_name {
        c.load_name_len = name.len() as u64;
        let _ = CBuf::new(&mut c.load_name).write_str(name);
    }
    c
}

/// Reports the index's counts, load bias, architecture and byte order.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_info(
    index: *const LocusIndex,
    out: *mut LocusIndexInfo,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let info = LocusIndexInfo {
            num_tables: inner.index.tables().len() as u64,
            num_records: inner.records.len() as u64,
            num_indexed: inner.index.len() as u64,
            load_bias: inner.index.load_bias(),
            section_size: inner.section_size as u64,
            arch: inner.arch,
            big_endian: inner.endian == RunTimeEndian::Big,
        };
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(info) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads the header of table `table` (0 for the first).
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE`.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_table(
    index: *const LocusIndex,
    table: u64,
    out: *mut LocusTable,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let t = inner.table(usize::try_from(table).unwrap_or(usize::MAX))?;
        let c = LocusTable {
            section_offset: t.offset() as u64,
            size: t.len() as u64,
            first_record: inner.table_first.get(t.number()).copied().unwrap_or(0) as u64,
            num_functions: t.num_functions(),
            num_constants: t.num_constants(),
            num_records: t.num_records(),
            version: t.version(),
        };
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads function `function` of table `table`.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE`.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_function(
    index: *const LocusIndex,
    table: u64,
    function: u64,
    out: *mut LocusFunction,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let t = inner.table(usize::try_from(table).unwrap_or(usize::MAX))?;
        let f = usize::try_from(function)
            .ok()
            .and_then(|i| t.function(i))
            .ok_or_else(|| {
                Failure::out_of_range("function", function, u64::from(t.num_functions()))
            })?;
        let c = LocusFunction {
            address: f.address,
            stack_size: f.stack_size,
            record_count: f.record_count,
        };
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads constant `constant` (0-based) of table `table`'s `Constants` array.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE`.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_constant(
    index: *const LocusIndex,
    table: u64,
    constant: u64,
    out: *mut u64,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let t = inner.table(usize::try_from(table).unwrap_or(usize::MAX))?;
        let value = u32::try_from(constant)
            .ok()
            .and_then(|i| t.constant(i))
            .ok_or_else(|| {
                Failure::out_of_range("constant", constant, u64::from(t.num_constants()))
            })?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(value) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Describes record number `record` (section order: `0 .. num_records` of
/// `locus_index_info`).
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE`.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_record(
    index: *const LocusIndex,
    record: u64,
    out: *mut LocusRecord,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let c = inner.describe(usize::try_from(record).unwrap_or(usize::MAX))?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Describes the `position`th indexed record in address order (`0 .. num_indexed`; records
/// at one address in section order). The first call sorts nothing but walks the index
/// once to number its records (8 bytes per record, kept with the index).
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE`.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_record_by_address(
    index: *const LocusIndex,
    position: u64,
    out: *mut LocusRecord,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let order = inner.by_address();
        let number = usize::try_from(position)
            .ok()
            .and_then(|p| order.get(p))
            .ok_or_else(|| {
                Failure::out_of_range("address-order position", position, order.len() as u64)
            })?;
        let c = inner.describe(*number)?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Copies up to `capacity` of `found`'s records into `out` and reports how many there were.
///
/// # Safety
///
/// `out` is null or has room for `capacity` records; `out_count` is null or writable.
unsafe fn fill<'a>(
    inner: &Inner<'a>,
    found: impl Iterator<Item = IndexedRecord<'a, RunTimeEndian>>,
    out: *mut LocusRecord,
    capacity: usize,
    out_count: *mut usize,
) -> Result<(), Failure> {
    let count = Out::new(out_count, "out_count")?;
    if out.is_null() && capacity > 0 {
        return Err(Failure::null("out"));
    }
    let mut n = 0usize;
    for r in found {
        if n < capacity {
            let c = inner.describe(inner.number_of(&r)?)?;
            // SAFETY: `out` has room for `capacity` records (this function's contract) and
            // n < capacity.
            unsafe { out.wrapping_add(n).write(c) };
        }
        n += 1;
    }
    // SAFETY: `out_count` is writable (this function's contract).
    unsafe { count.set(n) };
    Ok(())
}

/// Finds every record at absolute code address `address` (a return address, for
/// statepoints and stack maps after a call), in section order. Writes the first
/// `capacity` of them to `out` and their total number to `*out_count` (0 when there is
/// none: not an error). `out` may be NULL when `capacity` is 0, to count.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`.
///
/// # Safety
///
/// `index` is null or a live index; `out` is null or has room for `capacity` records;
/// `out_count` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_lookup(
    index: *const LocusIndex,
    address: u64,
    out: *mut LocusRecord,
    capacity: usize,
    out_count: *mut usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { fill(inner, inner.index.lookup(address), out, capacity, out_count) }
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Looks up many return addresses at once (a stack walk's): for each `addresses[i]`,
/// `out_counts[i]` is the number of records there and `out_records[i]` the first of them
/// in section order (all zero when there is none). The index fetches the memory of the
/// lookups some addresses ahead, so that their cache misses overlap: faster than one
/// `locus_index_lookup` per address on large indexes.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT` (any array, when `count` > 0), `LOCUS_ERR_INVALID_ARGUMENT`
/// (`count` too large for the arrays to exist).
///
/// # Safety
///
/// `index` is null or a live index; `addresses` holds `count` readable values and
/// `out_records` and `out_counts` room for `count` each (any of them may be null when
/// `count` is 0); `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_lookup_each(
    index: *const LocusIndex,
    addresses: *const u64,
    count: usize,
    out_records: *mut LocusRecord,
    out_counts: *mut usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        if count > 0 && (out_records.is_null() || out_counts.is_null()) {
            return Err(Failure::null(if out_records.is_null() {
                "out_records"
            } else {
                "out_counts"
            }));
        }
        if count > isize::MAX as usize / std::mem::size_of::<LocusRecord>() {
            return Err(Failure::new(
                LOCUS_ERR_INVALID_ARGUMENT,
                format!("count {count} is larger than any array of records"),
            ));
        }
        let addresses = if count == 0 {
            &[][..]
        } else if addresses.is_null() {
            return Err(Failure::null("addresses"));
        } else {
            // SAFETY: not null, `count` readable values (this function's contract), and
            // count * 8 fits an isize (checked above, records being larger).
            unsafe { std::slice::from_raw_parts(addresses, count) }
        };
        for (i, found) in inner.index.lookup_all(addresses).enumerate() {
            let mut n = 0usize;
            let mut first = LocusRecord::default();
            for r in found {
                if n == 0 {
                    first = inner.describe(inner.number_of(&r)?)?;
                }
                n += 1;
            }
            // SAFETY: both arrays have room for `count` entries (this function's contract)
            // and i < count.
            unsafe { out_records.wrapping_add(i).write(first) };
            // SAFETY: as above.
            unsafe { out_counts.wrapping_add(i).write(n) };
        }
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Finds every record with ID `id`, in address order; otherwise as `locus_index_lookup`.
/// The first call sorts the records by ID (16 bytes per record, kept with the index).
///
/// # Safety
///
/// As for `locus_index_lookup`.
#[no_mangle]
pub unsafe extern "C" fn locus_index_lookup_id(
    index: *const LocusIndex,
    id: u64,
    out: *mut LocusRecord,
    capacity: usize,
    out_count: *mut usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { fill(inner, inner.index.by_id(id), out, capacity, out_count) }
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Describes the record at the highest indexed address below `address` (the first in
/// section order when several share it): the record a code address without one of its
/// own follows.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_NOT_FOUND` (no record below `address`).
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_index_nearest_before(
    index: *const LocusIndex,
    address: u64,
    out: *mut LocusRecord,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let found = inner.index.nearest_before(address).ok_or_else(|| {
            Failure::new(
                LOCUS_ERR_NOT_FOUND,
                format!("no record lies below address {address:#x}"),
            )
        })?;
        let c = inner.describe(inner.number_of(&found)?)?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads location `location` (0-based) of record number `record`.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE` (record or location).
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_record_location(
    index: *const LocusIndex,
    record: u64,
    location: u64,
    out: *mut LocusLocation,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let (_, r) = inner.record(usize::try_from(record).unwrap_or(usize::MAX))?;
        let l = usize::try_from(location)
            .ok()
            .and_then(|i| r.location(i))
            .ok_or_else(|| {
                Failure::out_of_range("location", location, u64::from(r.num_locations()))
            })?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(to_c_location(l)) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads live-out `live_out` (0-based) of record number `record`.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE` (record or live-out).
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_record_live_out(
    index: *const LocusIndex,
    record: u64,
    live_out: u64,
    out: *mut LocusLiveOut,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let (_, r) = inner.record(usize::try_from(record).unwrap_or(usize::MAX))?;
        let l = usize::try_from(live_out)
            .ok()
            .and_then(|i| r.live_outs().nth(i))
            .ok_or_else(|| {
                Failure::out_of_range("live-out", live_out, u64::from(r.num_live_outs()))
            })?;
        let c = LocusLiveOut {
            dwarf_reg: l.dwarf_reg,
            size: l.size,
        };
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// The statepoint view of a record, or the failure naming why it is not one.
fn statepoint<'a>(
    inner: &Inner<'a>,
    record: u64,
) -> Result<StatepointRecord<'a, RunTimeEndian>, Failure> {
    let (_, r) = inner.record(usize::try_from(record).unwrap_or(usize::MAX))?;
    StatepointRecord::new(r)
        .map_err(|e| Failure::stackmap(&format!("reading record {record} as a statepoint"), &e))
}

/// Reads record number `record` as a `gc.statepoint` record.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_OUT_OF_RANGE`, `LOCUS_ERR_NOT_A_STATEPOINT`
/// (its locations do not start with the three constants, or what follows the deopt
/// locations is not whole pairs).
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_record_statepoint(
    index: *const LocusIndex,
    record: u64,
    out: *mut LocusStatepoint,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let s = statepoint(inner, record)?;
        let c = LocusStatepoint {
            id: s.id(),
            calling_convention: s.calling_convention(),
            flags: s.flags(),
            num_deopt: s.deopt().len() as u64,
            num_gc_pointers: s.num_gc_pointers() as u64,
        };
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads deopt location `deopt` (0-based, in the `"deopt"` bundle's order) of the
/// statepoint record number `record`.
///
/// Errors: as `locus_record_statepoint`, and `LOCUS_ERR_OUT_OF_RANGE` for `deopt`.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_statepoint_deopt(
    index: *const LocusIndex,
    record: u64,
    deopt: u64,
    out: *mut LocusLocation,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let s = statepoint(inner, record)?;
        let mut all = s.deopt();
        let n = all.len() as u64;
        let l = usize::try_from(deopt)
            .ok()
            .and_then(|i| all.nth(i))
            .ok_or_else(|| Failure::out_of_range("deopt location", deopt, n))?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(to_c_location(l)) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads (base, derived) pair `pair` (0-based, record order) of the statepoint record
/// number `record`.
///
/// Errors: as `locus_record_statepoint`, and `LOCUS_ERR_OUT_OF_RANGE` for `pair`.
///
/// # Safety
///
/// `index` is null or a live index; `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_statepoint_gc_pointer(
    index: *const LocusIndex,
    record: u64,
    pair: u64,
    out: *mut LocusGcPointer,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { handle(index) }?;
        let out = Out::new(out, "out")?;
        let s = statepoint(inner, record)?;
        let mut all = s.gc_pointers();
        let n = all.len() as u64;
        let p = usize::try_from(pair)
            .ok()
            .and_then(|i| all.nth(i))
            .ok_or_else(|| Failure::out_of_range("gc pointer pair", pair, n))?;
        let c = LocusGcPointer {
            base: to_c_location(p.base),
            derived: to_c_location(p.derived),
        };
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(c) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// The record a C caller names, for the frame calls.
pub(crate) fn record_of<'a>(
    inner: &Inner<'a>,
    record: u64,
) -> Result<Record<'a, RunTimeEndian>, Failure> {
    Ok(inner
        .record(usize::try_from(record).unwrap_or(usize::MAX))?
        .1)
}

/// The inner index of a handle, for the frame calls.
///
/// # Safety
///
/// `index` is null or a live handle.
pub(crate) unsafe fn inner_of<'i>(index: *const LocusIndex) -> Result<&'i Inner<'static>, Failure> {
    // SAFETY: forwarded from the caller.
    unsafe { handle(index) }
}
