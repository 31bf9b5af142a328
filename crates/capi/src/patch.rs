//! Patching the space a patch point (or a stack map's shadow) reserves: the encoders
//! (x86-64 and AArch64) and the W^X code writer.
//!
//! A record's instruction address is where the patch region starts for
//! `llvm.experimental.patchpoint` (its `numBytes` reserved bytes) and for
//! `llvm.experimental.stackmap` (its `numShadowBytes` shadow); the section does not record
//! the size, the caller knows it from the intrinsic it emitted. A region is always
//! rewritten whole (LLVM's rule: "the runtime must patch all reserved bytes, padding with
//! nops if necessary").
//!
//! | arch | call sequence | bytes |
//! |---|---|---|
//! | x86-64 | `movabs $target, %r11; call *%r11`, then LLVM's nops | 13 |
//! | AArch64 | `movz/movk x16` (3 or 4), `blr x16`, then `nop`s | 16 below 2^48, else 20 |

use std::ffi::c_char;
use std::fmt::Write as _;

use locus_stackmap::patch::{call_sequence_len, encode_call_into, encode_nops_into};
use locus_stackmap::{regs, Arch};

use crate::index::{LOCUS_ARCH_AARCH64, LOCUS_ARCH_X86_64};
use crate::status::{
    bytes, bytes_mut, guard, CBuf, Failure, LocusError, LocusStatus, Out,
    LOCUS_ERR_BUFFER_TOO_SMALL, LOCUS_ERR_INVALID_ARGUMENT, LOCUS_ERR_NOT_FOUND,
    LOCUS_ERR_UNSUPPORTED,
};

/// The architecture a C caller names.
fn arch_of(arch: u32) -> Result<Arch, Failure> {
    match arch {
        LOCUS_ARCH_X86_64 => Ok(Arch::X86_64),
        LOCUS_ARCH_AARCH64 => Ok(Arch::AArch64),
        other => Err(Failure::new(
            LOCUS_ERR_INVALID_ARGUMENT,
            format!("arch {other} is not LOCUS_ARCH_X86_64 (1) or LOCUS_ARCH_AARCH64 (2)"),
        )),
    }
}

/// The architecture this library was built for: `LOCUS_ARCH_X86_64` or
/// `LOCUS_ARCH_AARCH64` in `*out`.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_UNSUPPORTED` (another architecture).
///
/// # Safety
///
/// `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_host_arch(out: *mut u32, err: *mut LocusError) -> LocusStatus {
    let body = || {
        let out = Out::new(out, "out")?;
        let arch = match Arch::host() {
            Some(Arch::X86_64) => LOCUS_ARCH_X86_64,
            Some(Arch::AArch64) => LOCUS_ARCH_AARCH64,
            None => {
                return Err(Failure::new(
                    LOCUS_ERR_UNSUPPORTED,
                    "this library was built for an architecture it encodes no patches for",
                ))
            }
        };
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(arch) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// The size in bytes of the call sequence to `target` on `arch`: the least `reserved` that
/// `locus_encode_call` and `locus_patch_call` accept (13 on x86-64; on AArch64 16 below
/// 2^48, else 20).
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_INVALID_ARGUMENT` (unknown `arch`).
///
/// # Safety
///
/// `out` and `err` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_call_sequence_len(
    arch: u32,
    target: u64,
    out: *mut usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let out = Out::new(out, "out")?;
        let n = call_sequence_len(arch_of(arch)?, target);
        // SAFETY: `out` is writable (this function's contract).
        unsafe { out.set(n) };
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Encodes a call to the absolute address `target` followed by nops into all of
/// `out[0 .. reserved]`: the bytes a patch region of `reserved` bytes is rewritten with.
/// Nothing is written on failure.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_INVALID_ARGUMENT`,
/// `LOCUS_ERR_PATCH_TOO_LARGE` (`reserved` below `locus_call_sequence_len`),
/// `LOCUS_ERR_MISALIGNED_PATCH` (AArch64: `reserved` not a multiple of 4).
///
/// # Safety
///
/// `out` points to `reserved` writable bytes (or `reserved` is 0); `err` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn locus_encode_call(
    arch: u32,
    target: u64,
    out: *mut u8,
    reserved: usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let arch = arch_of(arch)?;
        // SAFETY: `out` holds `reserved` writable bytes (this function's contract).
        let out = unsafe { bytes_mut(out, reserved, "out") }?;
        // Encoded aside first, so that a failure leaves `out` as it was.
        let mut buf = vec![0u8; out.len()];
        encode_call_into(arch, target, &mut buf)
            .map_err(|e| Failure::stackmap("encoding the call", &e))?;
        out.copy_from_slice(&buf);
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Fills all of `out[0 .. len]` with nops (LLVM's x86-64 nop padding; AArch64 `nop`), e.g.
/// to turn a patch point's call into a fall-through.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_INVALID_ARGUMENT`,
/// `LOCUS_ERR_MISALIGNED_PATCH` (AArch64: `len` not a multiple of 4).
///
/// # Safety
///
/// `out` points to `len` writable bytes (or `len` is 0); `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_encode_nops(
    arch: u32,
    out: *mut u8,
    len: usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let arch = arch_of(arch)?;
        // SAFETY: `out` holds `len` writable bytes (this function's contract).
        let out = unsafe { bytes_mut(out, len, "out") }?;
        encode_nops_into(arch, out).map_err(|e| Failure::stackmap("encoding nops", &e))
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Copies `bytes[0 .. len]` to the code at `address` under W^X: the pages covering the
/// range are made read+write, written, the instruction cache is synchronized (AArch64),
/// and the pages are made read+execute again. Never writable and executable at once.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_CODE_WRITE` (`mprotect` failed:
/// `os_error` holds `errno`; if the second one failed the pages may be left read+write),
/// `LOCUS_ERR_UNSUPPORTED` (not a Unix system).
///
/// # Safety
///
/// - `address .. address + len` is mapped code that the caller owns and may change (its
///   own JIT code or a loaded object it patches). Every page the range touches ends up
///   read+execute, whatever it was before.
/// - While the call runs no thread may execute, read or write anything on those pages
///   (they are not executable in between, and a half-written sequence must never run);
///   they must not hold this library's code.
/// - The bytes are a complete instruction sequence for the region (a patch region is
///   always rewritten whole).
/// - `bytes` points to `len` readable bytes; `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_write_code(
    address: *mut u8,
    bytes_: *const u8,
    len: usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        // SAFETY: `bytes_` holds `len` readable bytes (this function's contract).
        let code = unsafe { bytes(bytes_, len, "bytes") }?;
        if address.is_null() && len > 0 {
            return Err(Failure::null("address"));
        }
        #[cfg(unix)]
        {
            // SAFETY: forwarded from this function's contract.
            unsafe { locus_stackmap::patch::write_code(address, code) }
                .map_err(|e| Failure::stackmap("writing code", &e))
        }
        #[cfg(not(unix))]
        {
            let _ = code;
            Err(Failure::new(
                LOCUS_ERR_UNSUPPORTED,
                "code writing needs a Unix system",
            ))
        }
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Rewrites the patch region of `reserved` bytes at `address` with a call to `target`
/// followed by nops (`locus_encode_call`, then `locus_write_code`). Nothing is written when
/// encoding fails.
///
/// Errors: those of `locus_encode_call`, `LOCUS_ERR_MISALIGNED_PATCH` (AArch64: `address`
/// not 4-byte aligned), and those of `locus_write_code`.
///
/// # Safety
///
/// As for `locus_write_code` over `address .. address + reserved`; moreover `address` is
/// the start of a patch region (a patch point's or stack map's instruction address) of
/// exactly `reserved` bytes, `arch` is the architecture of the code there, and `target` is
/// a function that may be called there (with the patch point's calling convention,
/// preserving what the code after the region expects).
#[no_mangle]
pub unsafe extern "C" fn locus_patch_call(
    arch: u32,
    address: *mut u8,
    reserved: usize,
    target: u64,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let arch = arch_of(arch)?;
        if address.is_null() {
            return Err(Failure::null("address"));
        }
        #[cfg(unix)]
        {
            // SAFETY: forwarded from this function's contract.
            unsafe { locus_stackmap::patch::patch_call(arch, address, reserved, target) }
                .map_err(|e| Failure::stackmap("patching a call", &e))
        }
        #[cfg(not(unix))]
        {
            let _ = (arch, reserved, target);
            Err(Failure::new(
                LOCUS_ERR_UNSUPPORTED,
                "code writing needs a Unix system",
            ))
        }
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Rewrites the `len` bytes at `address` with nops (`locus_encode_nops`, then
/// `locus_write_code`), e.g. to neutralize a patch point's call.
///
/// Errors: those of `locus_encode_nops`, `LOCUS_ERR_MISALIGNED_PATCH` (AArch64 address),
/// and those of `locus_write_code`.
///
/// # Safety
///
/// As for `locus_patch_call`, with `len` in place of `reserved`.
#[no_mangle]
pub unsafe extern "C" fn locus_patch_nops(
    arch: u32,
    address: *mut u8,
    len: usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let arch = arch_of(arch)?;
        if address.is_null() {
            return Err(Failure::null("address"));
        }
        #[cfg(unix)]
        {
            // SAFETY: forwarded from this function's contract.
            unsafe { locus_stackmap::patch::patch_nops(arch, address, len) }
                .map_err(|e| Failure::stackmap("patching nops", &e))
        }
        #[cfg(not(unix))]
        {
            let _ = (arch, len);
            Err(Failure::new(
                LOCUS_ERR_UNSUPPORTED,
                "code writing needs a Unix system",
            ))
        }
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}

/// Writes the conventional name of DWARF register `dwarf_reg` on `arch` (e.g. `rsp`,
/// `x29`), NUL-terminated, into `buf[0 .. capacity]`, and its length (without the NUL) to
/// `*out_len` when `out_len` is not NULL.
///
/// Errors: `LOCUS_ERR_NULL_ARGUMENT`, `LOCUS_ERR_INVALID_ARGUMENT`, `LOCUS_ERR_NOT_FOUND`
/// (the register has no name), `LOCUS_ERR_BUFFER_TOO_SMALL` (`*out_len` still says how long
/// the name is: `capacity` must be at least that plus one).
///
/// # Safety
///
/// `buf` points to `capacity` writable bytes (or `capacity` is 0); `out_len` and `err`
/// are null or writable.
#[no_mangle]
pub unsafe extern "C" fn locus_register_name(
    arch: u32,
    dwarf_reg: u16,
    buf: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
    err: *mut LocusError,
) -> LocusStatus {
    let body = || {
        let arch_ = arch_of(arch)?;
        let name = regs::register_name(arch_, dwarf_reg).ok_or_else(|| {
            Failure::new(
                LOCUS_ERR_NOT_FOUND,
                format!("DWARF register {dwarf_reg} has no name on arch {arch}"),
            )
        })?;
        if !out_len.is_null() {
            // SAFETY: not null, and writable (this function's contract).
            unsafe { out_len.write(name.len()) };
        }
        if buf.is_null() {
            return Err(Failure::null("buf"));
        }
        if capacity <= name.len() {
            return Err(Failure::new(
                LOCUS_ERR_BUFFER_TOO_SMALL,
                format!(
                    "the name needs {} bytes; `buf` has {capacity}",
                    name.len() + 1
                ),
            ));
        }
        // SAFETY: `buf` holds `capacity` writable bytes (this function's contract).
        let out = unsafe { bytes_mut(buf.cast::<u8>(), capacity, "buf") }?;
        // SAFETY: u8 and c_char have one size and alignment; the slice is the same.
        let out = unsafe { &mut *(out as *mut [u8] as *mut [c_char]) };
        let _ = CBuf::new(out).write_str(&name);
        Ok(())
    };
    // SAFETY: `err` is null or writable (this function's contract).
    unsafe { guard(err, body) }
}
