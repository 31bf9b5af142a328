//! Writing patch bytes into live code pages under W^X: the pages are never writable and
//! executable at once.
//!
//! [`write_code`] makes the pages covering the range `PROT_READ | PROT_WRITE`, copies the
//! bytes, makes the instruction cache see them (AArch64: `dc cvau` / `ic ivau` over the
//! range with the line sizes from `CTR_EL0`, then `dsb ish` and `isb`; x86-64 keeps its
//! instruction cache coherent by itself), and makes the pages `PROT_READ | PROT_EXEC`
//! again. [`patch_call`] and [`patch_nops`] encode a whole patch region and write it.

use crate::error::{Error, Result};

use super::{encode_call, encode_nops, Arch};

/// Copies `bytes` to the code at `address`, switching the covering pages to read+write
/// for the copy and back to read+execute after it.
///
/// An empty `bytes` does nothing.
///
/// # Errors
///
/// [`Error::CodeWrite`] with the `errno` of a failed `mprotect` (the pages may then be
/// left read+write if the second one failed), or `EINVAL` when the range wraps around
/// the address space or the page size is unusable.
///
/// # Safety
///
/// * `address .. address + bytes.len()` must be mapped code that the caller owns and may
///   change (its own JIT code or a loaded object it patches). Every page the range touches
///   ends up `PROT_READ | PROT_EXEC`, whatever its protection was before: the original
///   protection is assumed to be read+execute.
/// * While this call runs, no thread may execute, read or write anything on those pages:
///   they are not executable in between, so *any* code on them (not only the patched
///   bytes) faults if it runs, and a half-written sequence must never be executed. In
///   particular the pages must not hold the code of this function or anything it calls.
/// * The bytes must form a complete, valid instruction sequence for the region (see the
///   [module docs](super): a patch region is always rewritten whole).
pub unsafe fn write_code(address: *mut u8, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let page = page_size()?;
    let start = address as usize;
    let end = start.checked_add(bytes.len()).ok_or(Error::CodeWrite {
        errno: libc::EINVAL,
    })?;
    let first_page = start & !(page - 1);
    let last_page_end = end.checked_add(page - 1).ok_or(Error::CodeWrite {
        errno: libc::EINVAL,
    })? & !(page - 1);
    let span = last_page_end - first_page;

    // SAFETY: the caller guarantees that the pages are mapped code it owns that nothing
    // runs on meanwhile.
    unsafe { protect(first_page, span, libc::PROT_READ | libc::PROT_WRITE)? };
    // SAFETY: the range is mapped (caller's contract) and now writable; `bytes` is a
    // separate live slice, so the two do not overlap.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), address, bytes.len()) };
    // SAFETY: the range is mapped and readable.
    unsafe { flush_icache(start, end) };
    // SAFETY: as for the first protect.
    unsafe { protect(first_page, span, libc::PROT_READ | libc::PROT_EXEC) }
}

/// Encodes a call to `target` filling the `reserved` bytes at `address` (see
/// [`encode_call`]) and writes it with [`write_code`].
///
/// Errors: those of [`encode_call`], [`Error::MisalignedPatch`] when `address` is not
/// instruction-aligned (AArch64: 4 bytes), and those of [`write_code`]. Nothing is written
/// when encoding fails.
///
/// # Safety
///
/// As for [`write_code`], over `address .. address + reserved`; moreover `address` must be
/// the start of a patch region (a patch point's or a stack map's instruction address) of
/// exactly `reserved` bytes, `arch` must be the architecture of the code there, and
/// `target` must be a function that can be called there (with the calling convention of
/// the patch point, preserving whatever the code after the region expects).
pub unsafe fn patch_call(arch: Arch, address: *mut u8, reserved: usize, target: u64) -> Result<()> {
    check_address(arch, address)?;
    let bytes = encode_call(arch, target, reserved)?;
    // SAFETY: forwarded from the caller.
    unsafe { write_code(address, &bytes) }
}

/// Overwrites the `len` bytes at `address` with nops (see [`encode_nops`]), e.g. to turn
/// a patch point's call into a fall-through.
///
/// Errors: those of [`encode_nops`], [`Error::MisalignedPatch`] for a misaligned address,
/// and those of [`write_code`].
///
/// # Safety
///
/// As for [`patch_call`], with `len` in place of `reserved`.
pub unsafe fn patch_nops(arch: Arch, address: *mut u8, len: usize) -> Result<()> {
    check_address(arch, address)?;
    let bytes = encode_nops(arch, len)?;
    // SAFETY: forwarded from the caller.
    unsafe { write_code(address, &bytes) }
}

/// Refuses an address that is not instruction-aligned for `arch`.
fn check_address(arch: Arch, address: *mut u8) -> Result<()> {
    let align = arch.instruction_align();
    if !(address as usize).is_multiple_of(align) {
        return Err(Error::MisalignedPatch {
            value: address as u64,
            align: align as u64,
        });
    }
    Ok(())
}

/// The system page size, a power of two.
fn page_size() -> Result<usize> {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    match usize::try_from(size) {
        Ok(size) if size.is_power_of_two() => Ok(size),
        _ => Err(Error::CodeWrite {
            errno: libc::EINVAL,
        }),
    }
}

/// `mprotect(start, len, prot)`, with the `errno` as the error.
///
/// # Safety
///
/// `start` is page-aligned and the pages are the caller's to change.
unsafe fn protect(start: usize, len: usize, prot: libc::c_int) -> Result<()> {
    // SAFETY: forwarded from the caller.
    let rc = unsafe { libc::mprotect(start as *mut libc::c_void, len, prot) };
    if rc == 0 {
        Ok(())
    } else {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        Err(Error::CodeWrite { errno })
    }
}

/// Makes instruction fetches from `start .. end` see the bytes just stored there: clean
/// the data cache to the point of unification, invalidate the instruction cache, and
/// synchronize (the sequence of compiler-rt's `__clear_cache`). Each step is skipped when
/// `CTR_EL0` says the hardware does not need it (IDC, DIC).
///
/// # Safety
///
/// The range is mapped and readable.
#[cfg(target_arch = "aarch64")]
unsafe fn flush_icache(start: usize, end: usize) {
    use core::arch::asm;

    let ctr: u64;
    // SAFETY: reading CTR_EL0 at EL0 is allowed on Linux (trapped and emulated where the
    // hardware does not permit it) and on macOS.
    unsafe { asm!("mrs {0}, ctr_el0", out(reg) ctr, options(nomem, nostack, preserves_flags)) };

    // CTR_EL0.IDC (bit 28): no data cache clean needed for instruction coherence.
    if ctr & (1 << 28) == 0 {
        // DminLine, bits 19:16: log2 of the smallest data cache line, in 4-byte words.
        let line = 4usize << ((ctr >> 16) & 0xf);
        let mut addr = start & !(line - 1);
        while addr < end {
            // SAFETY: cleaning a readable line changes no contents.
            unsafe { asm!("dc cvau, {0}", in(reg) addr, options(nostack, preserves_flags)) };
            addr += line;
        }
    }
    // SAFETY: barriers have no memory-safety effect.
    unsafe { asm!("dsb ish", options(nostack, preserves_flags)) };

    // CTR_EL0.DIC (bit 29): no instruction cache invalidation needed.
    if ctr & (1 << 29) == 0 {
        // IminLine, bits 3:0.
        let line = 4usize << (ctr & 0xf);
        let mut addr = start & !(line - 1);
        while addr < end {
            // SAFETY: invalidating instruction cache lines changes no memory.
            unsafe { asm!("ic ivau, {0}", in(reg) addr, options(nostack, preserves_flags)) };
            addr += line;
        }
        // SAFETY: barrier.
        unsafe { asm!("dsb ish", options(nostack, preserves_flags)) };
    }
    // SAFETY: barrier.
    unsafe { asm!("isb", options(nostack, preserves_flags)) };
}

/// x86-64 (and other architectures this crate encodes nothing for): instruction caches are
/// coherent with stores, so there is nothing to do.
///
/// # Safety
///
/// None needed; `unsafe` only to match the AArch64 version.
#[cfg(not(target_arch = "aarch64"))]
unsafe fn flush_icache(_start: usize, _end: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_sane() {
        let page = page_size().unwrap_or(0);
        assert!(page >= 4096 && page.is_power_of_two());
    }

    #[test]
    fn misaligned_address_is_refused_before_writing() {
        // The address is never dereferenced: alignment is checked first.
        let address = 0x1002 as *mut u8;
        // SAFETY: fails before touching memory.
        let got = unsafe { patch_call(Arch::AArch64, address, 20, 0) };
        assert_eq!(
            got,
            Err(Error::MisalignedPatch {
                value: 0x1002,
                align: 4
            })
        );
        // SAFETY: fails before touching memory.
        let got = unsafe { patch_nops(Arch::AArch64, address, 8) };
        assert_eq!(
            got,
            Err(Error::MisalignedPatch {
                value: 0x1002,
                align: 4
            })
        );
    }

    #[test]
    fn too_small_is_refused_before_writing() {
        let address = 0x1000 as *mut u8;
        // SAFETY: fails before touching memory.
        let got = unsafe { patch_call(Arch::X86_64, address, 5, 0) };
        assert_eq!(
            got,
            Err(Error::PatchTooLarge {
                needed: 13,
                reserved: 5
            })
        );
    }

    #[test]
    fn empty_write_does_nothing() {
        // SAFETY: nothing is written for an empty slice.
        assert_eq!(unsafe { write_code(core::ptr::null_mut(), &[]) }, Ok(()));
    }

    #[test]
    fn wrapping_range_is_refused() {
        let address = usize::MAX as *mut u8;
        // SAFETY: fails before touching memory.
        let got = unsafe { write_code(address, &[0x90, 0x90]) };
        assert_eq!(
            got,
            Err(Error::CodeWrite {
                errno: libc::EINVAL
            })
        );
    }
}
