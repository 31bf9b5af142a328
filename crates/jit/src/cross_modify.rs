//! Patching a site while other threads may be executing it (x86-64 cross-modifying code),
//! for [`super::Options::concurrent_patching`].
//!
//! The protocol is the one the Intel SDM (vol. 3, 8.1.3, "Handling Self- and
//! Cross-Modifying Code") and Linux's `text_poke_bp` follow: make sure no processor
//! can be part-way through the instruction being changed, change it, and have every
//! processor execute a serializing instruction before it may run the new bytes. In user
//! space the serialization of all of the process's threads is
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)` (Linux 4.16): each thread
//! running on a core is interrupted and returns through a core-serializing instruction.
//!
//! 1. The pages of the site are made read+write+execute (threads running on them must not
//!    fault, as they would while the pages were read+write only: this is the one moment
//!    the program's code is both writable and executable).
//! 2. The first two bytes become `jmp $` (`EB FE`), written atomically (`xchg`): a thread
//!    that reaches the site now waits there. Serialize: every thread is now either
//!    waiting at the site, or before it, or past its first instruction.
//! 3. The rest of the first instruction is written. No thread can be inside it: those
//!    past it fetched it whole before step 2's serialization. Serialize.
//! 4. The first two bytes are written (atomically): waiting threads run the new
//!    instruction. Serialize; the pages go back to read+execute.
//!
//! Only one instruction may change: a thread past it may be anywhere in the rest of the
//! site (in the stub it called, say, returning to the bytes after the call), so those
//! bytes must stay as they are. The runtime's call-form sites (`movabs r11, target;
//! call r11; nops`) differ only in the `movabs`'s immediate, so every patch between them
//! (a stub for other cases, the megamorphic lookup, the miss handler) is one instruction;
//! an inline fast path is many, which is why concurrent patching uses no inline fast path.
//! A thread past the `movabs` may still call the old target: a stub the site no longer
//! calls is kept until [`super::Runtime::reclaim_stubs`] says no thread can be in it.
//!
//! Why not stop threads at safepoints instead: the runtime's programs poll only where they
//! call `@locus_poll`, and a thread spinning in compiled code between polls would stall
//! every patch; the protocol needs nothing of the program. If the two first bytes straddle
//! a cache line the `xchg` is a split lock (atomic, but slow, and fatal where the kernel
//! is told to make split locks fatal).

/// `membarrier` commands (linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: libc::c_long = 1 << 5;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: libc::c_long = 1 << 6;

/// `jmp $`: a thread that reaches the site waits there.
const SPIN: [u8; 2] = [0xeb, 0xfe];

/// Bytes of the one instruction a concurrent patch may change: `movabs r11, imm64`.
pub(super) const FIRST_INSTRUCTION: usize = 10;

/// Registers the process for core-serializing membarriers (idempotent).
pub(super) fn register() -> Result<(), String> {
    // SAFETY: the membarrier system call with a command and no pointers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
            0,
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "concurrent patching needs membarrier's core serialization: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Every thread of the process executes a core-serializing instruction.
fn serialize() -> Result<(), String> {
    // SAFETY: as in `register`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
            0,
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("membarrier: {}", std::io::Error::last_os_error()))
    }
}

/// Stores the two bytes `value` at `address` in one atomic access.
///
/// # Safety
///
/// `address .. address + 2` is mapped and writable.
unsafe fn store_pair(address: *mut u8, value: [u8; 2]) {
    let mut v = u16::from_le_bytes(value);
    // SAFETY: the caller's contract; `xchg` with memory is locked and atomic for an
    // unaligned operand too.
    unsafe {
        std::arch::asm!(
            "xchg word ptr [{p}], {v:x}",
            p = in(reg) address,
            v = inout(reg) v,
            options(nostack, preserves_flags)
        );
    }
    let _ = v;
}

/// `mprotect` of the pages covering `start .. end`.
fn protect(start: usize, end: usize, prot: libc::c_int) -> Result<(), String> {
    let page = 4096;
    let first = start & !(page - 1);
    let last = end.div_ceil(page) * page;
    // SAFETY: the caller of `write_site` owns these pages (its contract).
    let rc = unsafe { libc::mprotect(first as *mut libc::c_void, last - first, prot) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("mprotect: {}", std::io::Error::last_os_error()))
    }
}

/// Rewrites the site at `address`, whose bytes are `old`, to `new` with the protocol of
/// the [module documentation](self).
///
/// # Errors
///
/// If `old` and `new` differ past the first instruction or in length, or a system call
/// fails.
///
/// # Safety
///
/// `address .. address + old.len()` is a patch point of code the caller owns (read+execute
/// pages), holding `old`, a call form whose first instruction is a `movabs r11`, as is
/// `new`'s; the patch is made by one thread at a time.
pub(super) unsafe fn write_site(address: *mut u8, old: &[u8], new: &[u8]) -> Result<(), String> {
    if old.len() != new.len()
        || old.len() < FIRST_INSTRUCTION
        || old[FIRST_INSTRUCTION..] != new[FIRST_INSTRUCTION..]
    {
        return Err(format!(
            "{:#x}: a concurrent patch changes only the first instruction of a call",
            address as u64
        ));
    }
    // SAFETY: the caller's contract; only the first instruction changes, so a thread
    // past it runs the same bytes as before.
    unsafe { write_region(address, old, new) }
}

/// Rewrites the `old.len()` bytes at `address` to `new` with the protocol of the [module
/// documentation](self) (`jmp $` over the first two bytes, the rest, the first two), so
/// that no thread runs a torn first instruction and every page stays executable.
///
/// # Errors
///
/// If `old` and `new` differ in length or are shorter than 2 bytes, or a system call
/// fails.
///
/// # Safety
///
/// `address .. address + old.len()` is code the caller owns (read+execute pages), holding
/// `old`; one thread at a time patches it; and a thread past the region's first
/// instruction when it is written may run the new bytes where it is: the caller accepts
/// that (no thread is there, or the bytes after the first instruction do not change).
pub(super) unsafe fn write_region(address: *mut u8, old: &[u8], new: &[u8]) -> Result<(), String> {
    if old.len() != new.len() || old.len() < 2 {
        return Err(format!(
            "{:#x}: a concurrent patch of {} bytes with {}",
            address as u64,
            old.len(),
            new.len()
        ));
    }
    if old == new {
        return Ok(());
    }
    let start = address as usize;
    let end = start + new.len();
    protect(
        start,
        end,
        libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
    )?;
    let result = (|| {
        // SAFETY: the site's first bytes, writable now.
        unsafe { store_pair(address, SPIN) };
        serialize()?;
        // Only the bytes that change: a thread past the first instruction keeps running
        // the bytes that stay.
        for (i, (byte, was)) in new.iter().zip(old).enumerate().skip(2) {
            if byte != was {
                // SAFETY: byte `i` of the region, writable now; no thread is inside its
                // first instruction (step 2), and a thread past it is the caller's promise.
                unsafe { address.wrapping_add(i).write_volatile(*byte) };
            }
        }
        serialize()?;
        // SAFETY: as above.
        unsafe { store_pair(address, [new[0], new[1]]) };
        serialize()
    })();
    protect(start, end, libc::PROT_READ | libc::PROT_EXEC)?;
    result
}
