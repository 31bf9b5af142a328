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
//! bytes must stay as they are. A concurrent site is laid out so that every patch is one
//! instruction:
//!
//! ```text
//! call form:       movabs r11, target   ; 10 bytes: the one instruction patches change
//!                  call r11             ; 41 FF D3
//!                  jmp end              ; EB rel8: a stub or the lookup returns here
//!                  body or nops         ; never run in this form
//! fast path form:  jmp body             ; EB 0D, then 8 dead bytes
//!                  call r11; jmp end    ; as before, for threads past the first instruction
//!           body:  the inline fast path, encoded for reserved - 15 bytes; ends at `end`
//! ```
//!
//! Patches between call forms (a stub for other cases, the megamorphic lookup, the miss
//! handler) change only the `movabs`'s immediate; switching to or from the fast path, the
//! first two bytes. Past the first instruction only never-run bytes are written:
//! `jmp end` over LLVM's nops the first time the runtime patches a site (only the miss
//! handler was called from LLVM's form, and it returns to the end), and the body, once,
//! where none was (`check_patch` enforces it). A body is never changed, since a thread may
//! be in it from the first time it was switched to: a site whose cases are no longer the
//! body's calls a stub. A thread past the `movabs` may still call the old target: a stub
//! the site no longer calls is kept until [`super::Runtime::reclaim_stubs`] says no thread
//! can be in it.
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

/// The bytes of a concurrent site before its fast path's body: the first instruction
/// (`movabs r11, target`, or `jmp body` and 8 dead bytes), `call r11`, `jmp end`.
pub(super) const TAIL: usize = 15;

/// `call r11`.
const CALL_R11: [u8; 3] = [0x41, 0xff, 0xd3];

/// Whether a site of `reserved` bytes has the concurrent layout (room for its `jmp end`,
/// whose rel8 reaches the end): only such sites get an inline fast path.
pub(super) fn has_tail(reserved: usize) -> bool {
    (TAIL..=TAIL + 127).contains(&reserved)
}

/// `jmp end` at byte 13 of a site of `reserved` bytes.
fn jump_to_end(reserved: usize) -> [u8; 2] {
    [0xeb, (reserved - TAIL) as u8]
}

/// A concurrent site's call form: `movabs r11, target; call r11; jmp end`, then `body`
/// (a fast path's, kept as it is: a thread may be running it) or nops. Without the
/// concurrent layout, `encode_call`'s form (nops after the call).
pub(super) fn call_form(
    target: u64,
    reserved: usize,
    body: Option<&[u8]>,
) -> Result<Vec<u8>, String> {
    use locus_stackmap::patch::{encode_call, encode_nops, Arch};
    let mut bytes = encode_call(Arch::X86_64, target, reserved).map_err(|e| e.to_string())?;
    if has_tail(reserved) {
        bytes.truncate(13);
        bytes.extend_from_slice(&jump_to_end(reserved));
        match body {
            Some(body) if body.len() == reserved - TAIL => bytes.extend_from_slice(body),
            _ => {
                bytes.extend(encode_nops(Arch::X86_64, reserved - TAIL).map_err(|e| e.to_string())?)
            }
        }
    }
    Ok(bytes)
}

/// A concurrent site's fast path form: `jmp body` (2 bytes) over the 8 bytes that follow
/// in `old` (dead), `call r11; jmp end` (never run in this form, kept for threads that
/// are past the call form's first instruction), then `body`, a fast path encoded for
/// `reserved - TAIL` bytes.
pub(super) fn fast_path_form(old: &[u8], body: &[u8]) -> Option<Vec<u8>> {
    let reserved = old.len();
    if !has_tail(reserved) || body.len() != reserved - TAIL {
        return None;
    }
    let mut bytes = vec![0xeb, (TAIL - 2) as u8];
    bytes.extend_from_slice(old.get(2..FIRST_INSTRUCTION)?);
    bytes.extend_from_slice(&CALL_R11);
    bytes.extend_from_slice(&jump_to_end(reserved));
    bytes.extend_from_slice(body);
    Some(bytes)
}

/// Whether patching a site from `old` to `new` changes only bytes no thread can be
/// running but at the first instruction: the first instruction (10 bytes), and past
/// `call r11` only what was never run: the `jmp end` written over LLVM's nops (a site the
/// runtime has not patched yet: only the miss handler was called from it, and it returns
/// to the end), or a body written where there was none (`has_body` false: the bytes after
/// `jmp end` were dead). A site without the concurrent layout changes its first
/// instruction only.
///
/// # Errors
///
/// Which rule `new` breaks.
pub(super) fn check_patch(old: &[u8], new: &[u8], has_body: bool) -> Result<(), String> {
    let reserved = old.len();
    let fixed = if has_tail(reserved) { 13 } else { reserved };
    if new.len() != reserved
        || reserved < 13
        || old.get(FIRST_INSTRUCTION..fixed) != new.get(FIRST_INSTRUCTION..fixed)
        || old[FIRST_INSTRUCTION..13] != CALL_R11
    {
        return Err("a concurrent patch changes only the first instruction of a call".into());
    }
    if !has_tail(reserved) {
        return Ok(());
    }
    let tailed = old[13..TAIL] == jump_to_end(reserved);
    if tailed && old[13..TAIL] != new[13..TAIL] {
        return Err("a concurrent patch keeps a site's jump to its end".into());
    }
    if has_body && old[TAIL..] != new[TAIL..] {
        return Err("a concurrent patch keeps a site's fast path, which a thread may run".into());
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_changes_the_first_instruction_and_never_run_bytes_only() -> Result<(), String> {
        use locus_stackmap::patch::{encode_call, Arch};
        let llvm = encode_call(Arch::X86_64, 0x1111, 64).map_err(|e| e.to_string())?;
        let call = call_form(0x2222, 64, None)?;
        assert_eq!(call[13..15], [0xeb, 49]);
        // LLVM's nops past the call were never run: the jump and a body may go there.
        check_patch(&llvm, &call, false)?;
        let body = vec![0x90; 49];
        let fast = fast_path_form(&call, &body).ok_or("no fast path form")?;
        assert_eq!(
            (fast[..2].to_vec(), &fast[2..15]),
            (vec![0xeb, 0x0d], &call[2..15])
        );
        check_patch(&call, &fast, false)?;
        // Once a body is there it stays; the call forms keep it.
        let back = call_form(0x3333, 64, Some(&body))?;
        check_patch(&fast, &back, true)?;
        let other = fast_path_form(&back, &[0xcc; 49]).ok_or("no fast path form")?;
        assert!(check_patch(&back, &other, true).is_err());
        // The jump to the end stays; `call r11` stays.
        let mut moved = back.clone();
        moved[14] = 10;
        assert!(check_patch(&back, &moved, true).is_err());
        let mut no_call = back.clone();
        no_call[11] = 0x90;
        assert!(check_patch(&back, &no_call, true).is_err());
        // A site without the layout (too large for the jump): the first instruction only.
        let big = call_form(0x2222, 200, None)?;
        assert_eq!(
            big,
            encode_call(Arch::X86_64, 0x2222, 200).map_err(|e| e.to_string())?
        );
        check_patch(&big, &call_form(0x4444, 200, None)?, false)?;
        assert!(fast_path_form(&big, &[0x90; 185]).is_none());
        Ok(())
    }
}
