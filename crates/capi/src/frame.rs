//! Reading a location's value out of a stopped frame the caller describes.
//!
//! A `LocusFrame` gives the registers (a callback, or an array indexed by DWARF register
//! number) and the memory (a callback, or, without one, plain reads of this process's own
//! memory: a runtime walking its own stack).

use std::ffi::c_void;

use locus_stackmap::{Frame, Location};

use crate::index::{from_c_location, inner_of, record_of, LocusIndex, LocusLocation};
use crate::status::{
    arg, guard, Failure, LocusError, LocusStatus, Out, LOCUS_ERR_INVALID_ARGUMENT,
};

/// Reads DWARF register `dwarf_reg` of the frame into `*value`; returns false when the
/// frame does not know it.
pub type LocusReadRegister =
    Option<unsafe extern "C" fn(context: *mut c_void, dwarf_reg: u16, value: *mut u64) -> bool>;

/// Fills `buf[0 .. len]` with the bytes at `address`; returns false when they cannot be
/// read.
pub type LocusReadMemory = Option<
    unsafe extern "C" fn(context: *mut c_void, address: u64, buf: *mut u8, len: usize) -> bool,
>;

/// A stopped frame, as the caller describes it.
///
/// Registers: when `read_register` is not NULL it is asked for each register; otherwise
/// `registers[r]` is the value of DWARF register `r` for `r < num_registers`, and other
/// registers are unknown. Memory: when `read_memory` is not NULL it reads memory;
/// otherwise the addresses are read directly in this process (then every address an
/// Indirect location names must be readable, see `locus_location_value`). `context` is
/// passed to the callbacks untouched.
///
/// Which register values a frame holds is the caller's business: at a statepoint, the
/// callee-saved registers at the call, with the stack pointer as it was before the call
/// pushed the return address (x86-64) or at the `bl` (AArch64).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LocusFrame {
    /// Passed to the callbacks.
    pub context: *mut c_void,
    /// Register callback, or NULL to use `registers`.
    pub read_register: LocusReadRegister,
    /// Register values by DWARF number (used when `read_register` is NULL; may be NULL
    /// when `num_registers` is 0).
    pub registers: *const u64,
    /// Number of entries in `registers`.
    pub num_registers: usize,
    /// Memory callback, or NULL to read this process's memory directly.
    pub read_memory: LocusReadMemory,
    /// True when memory holds values most significant byte first.
    pub big_endian: bool,
}

/// A `LocusFrame` seen as a `Frame`. Made only by the entry points below, whose
/// contracts make its callbacks, array and (without a memory callback) addresses valid.
struct CFrame<'a>(&'a LocusFrame);

impl Frame for CFrame<'_> {
    fn register(&self, dwarf_reg: u16) -> Option<u64> {
        let f = self.0;
        if let Some(read) = f.read_register {
            let mut value = 0u64;
            // SAFETY: the callback is the caller's, valid to call with its context and a
            // writable u64 (the entry point's contract).
            return unsafe { read(f.context, dwarf_reg, &mut value) }.then_some(value);
        }
        let r = usize::from(dwarf_reg);
        if f.registers.is_null() || r >= f.num_registers {
            return None;
        }
        // SAFETY: `registers` holds `num_registers` values (the entry point's contract)
        // and r is below that.
        Some(unsafe { f.registers.wrapping_add(r).read() })
    }

    fn read_memory(&self, address: u64, buf: &mut [u8]) -> bool {
        let f = self.0;
        if let Some(read) = f.read_memory {
            // SAFETY: the callback is the caller's, valid to call with its context and a
            // buffer of `buf.len()` writable bytes.
            return unsafe { read(f.context, address, buf.as_mut_ptr(), buf.len()) };
        }
        let Ok(address) = usize::try_from(address) else {
            return false;
        };
        if address == 0 {
            return false;
        }
        // SAFETY: without a memory callback the caller promises that every address the
        // locations name is readable in this process (the entry point's contract); `buf`
        // is a separate Rust buffer.
        unsafe { std::ptr::copy_nonoverlapping(address as *const u8, buf.as_mut_ptr(), buf.len()) };
        true
    }

    fn big_endian(&self) -> bool {
        self.0.big_endian
    }
}

/// The value `location` describes in `frame`, as a 64-bit word: a register's contents
/// (zero-extended from `size` bytes), the address `register + offset` (Direct), the `size`
/// bytes at `[register + offset]` (Indirect, zero-extended, in the frame's byte order), or
/// the constant.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_BAD_LOCATION_KIND`,
/// `LOCUS_ERR_REGISTER_UNAVAILABLE`, `LOCUS_ERR_MEMORY_UNREADABLE`,
/// `LOCUS_ERR_UNSUPPORTED_SIZE` (a Register or Indirect value wider than 8 bytes: read it
/// through `locus_location_address`).
///
/// # Safety
///
/// `location`, `frame` are null or valid; `out` and `err` are null or writable. The frame's
/// callbacks are safe to call with its `context`; `registers` holds `num_registers` values;
/// without a memory callback, `[register + offset, + size)` of an Indirect location must be
/// readable memory of this process (a null address is refused, any other is read).
#[no_mangle]
pub unsafe extern "C" fn locus_location_value(
    location: *const LocusLocation,
    frame: *const LocusFrame,
    out: *mut u64,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: null or valid (this function's contract).
        let location = unsafe { arg(location, "location") }?;
        // SAFETY: null or valid (this function's contract).
        let frame = unsafe { arg(frame, "frame") }?;
        let out = Out::new(out, "out")?;
        let l = from_c_location(location)?;
        let v = CFrame(frame)
            .value(&l)
            .map_err(|e| Failure::stackmap(&describe("reading", &l), &e))?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(v) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// The address a Direct or Indirect location refers to (`register + offset`), for values
/// wider than 8 bytes or to update a spilled pointer in place (a moving collector).
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_BAD_LOCATION_KIND`,
/// `LOCUS_ERR_REGISTER_UNAVAILABLE`, `LOCUS_ERR_INVALID_ARGUMENT` (a Register or constant
/// location, which has no address).
///
/// # Safety
///
/// As for `locus_location_value` (memory is not read).
#[no_mangle]
pub unsafe extern "C" fn locus_location_address(
    location: *const LocusLocation,
    frame: *const LocusFrame,
    out: *mut u64,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: null or valid (this function's contract).
        let location = unsafe { arg(location, "location") }?;
        // SAFETY: null or valid (this function's contract).
        let frame = unsafe { arg(frame, "frame") }?;
        let out = Out::new(out, "out")?;
        let l = from_c_location(location)?;
        let a = CFrame(frame)
            .address(&l)
            .map_err(|e| Failure::stackmap(&describe("addressing", &l), &e))?
            .ok_or_else(|| {
                Failure::new(
                    LOCUS_ERR_INVALID_ARGUMENT,
                    format!(
                        "{}: only Direct and Indirect locations have an address",
                        describe("addressing", &l)
                    ),
                )
            })?;
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(a) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Reads the values of all of record number `record`'s locations in `frame` into
/// `out[0 .. num_locations]` (as `locus_location_value` reads each). `capacity` is the room
/// in `out`; the record's `num_locations` must fit.
///
/// Errors: those of `locus_location_value` (the message names the location), plus
/// `LOCUS_ERR_OUT_OF_RANGE` (no such record) and `LOCUS_ERR_BUFFER_TOO_SMALL`.
///
/// # Safety
///
/// `index` is null or a live index; `out` is null or has room for `capacity` values; the
/// rest as for `locus_location_value`.
#[no_mangle]
pub unsafe extern "C" fn locus_record_values(
    index: *const LocusIndex,
    record: u64,
    frame: *const LocusFrame,
    out: *mut u64,
    capacity: usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `index` is null or live (this function's contract).
        let inner = unsafe { inner_of(index) }?;
        // SAFETY: null or valid (this function's contract).
        let frame = unsafe { arg(frame, "frame") }?;
        let r = record_of(inner, record)?;
        let n = usize::from(r.num_locations());
        if n > 0 && out.is_null() {
            return Err(Failure::null("out"));
        }
        if n > capacity {
            return Err(Failure::new(
                crate::status::LOCUS_ERR_BUFFER_TOO_SMALL,
                format!("record {record} has {n} locations; `out` has room for {capacity}"),
            ));
        }
        for (i, l) in r.locations().enumerate() {
            let v = CFrame(frame)
                .value(&l)
                .map_err(|e| Failure::stackmap(&format!("record {record}, location {i}"), &e))?;
            // SAFETY: `out` has room for `capacity` values and i < n <= capacity.
            unsafe { out.wrapping_add(i).write(v) };
        }
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// "reading the Indirect location [R#7 + 8]" and the like, for messages.
fn describe(verb: &str, l: &Location) -> String {
    match *l {
        Location::Register { dwarf_reg, .. } => {
            format!("{verb} the Register location R#{dwarf_reg}")
        }
        Location::Direct {
            dwarf_reg, offset, ..
        } => format!("{verb} the Direct location R#{dwarf_reg} + {offset}"),
        Location::Indirect {
            dwarf_reg, offset, ..
        } => format!("{verb} the Indirect location [R#{dwarf_reg} + {offset}]"),
        Location::Constant { value, .. } => format!("{verb} the Constant location {value}"),
        Location::ConstantIndex { index, .. } => {
            format!("{verb} the ConstantIndex location #{index}")
        }
    }
}
