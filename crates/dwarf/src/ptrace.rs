//! A live process as a [`Stopped`] target (feature `ptrace`, Linux), what `locus dwarf vars
//! --pid PID` reads. Every thread is attached with
//! `PTRACE_SEIZE` and stopped with `PTRACE_INTERRUPT` (no signal is sent, so none is left
//! pending), its registers read with `PTRACE_GETREGSET` (`NT_PRSTATUS`, `NT_PRFPREG`: the
//! same layouts as a core's notes), the mapped files listed from `/proc/PID/maps`, the
//! readable memory copied through `/proc/PID/mem`, and every thread detached again, which
//! lets it run on as it was. Linux only.

extern crate std;

use std::borrow::ToOwned;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{format, vec};

use crate::binary::MemoryBlock;
use crate::corefile;
use crate::stopped::{Arch, Mapping, Stopped, Thread};

/// The most memory copied from a process (readable mappings past it are listed as missing).
const MAX_COPY: u64 = 512 << 20;

/// Threads attached so far; dropping it detaches them all.
struct Attached(Vec<libc::pid_t>);

impl Drop for Attached {
    fn drop(&mut self) {
        for &tid in &self.0 {
            detach(tid);
        }
    }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Attaches to `tid` and stops it, without a signal.
fn seize_and_stop(tid: libc::pid_t) -> Result<(), String> {
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: PTRACE_SEIZE takes no pointers (addr and data are 0).
    let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, null, null) };
    if r == -1 {
        return Err(format!("ptrace(PTRACE_SEIZE, {tid}): {}", errno()));
    }
    // SAFETY: PTRACE_INTERRUPT takes no pointers.
    let r = unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, null, null) };
    if r == -1 {
        return Err(format!("ptrace(PTRACE_INTERRUPT, {tid}): {}", errno()));
    }
    let mut status = 0;
    // SAFETY: `status` is a valid, writable c_int for the duration of the call.
    let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
    if r == -1 {
        return Err(format!("waitpid({tid}): {}", errno()));
    }
    Ok(())
}

/// Lets `tid` run on, no signal delivered.
fn detach(tid: libc::pid_t) {
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: PTRACE_DETACH with data 0 takes no pointers.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, null, null) };
}

/// The register set `note` (`NT_PRSTATUS`, `NT_PRFPREG`) of a stopped tracee, as bytes.
fn register_set(tid: libc::pid_t, note: libc::c_int) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; 4096];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, which is writable and outlives the call; the kernel
    // writes at most `iov_len` bytes and stores the length it wrote in `iov.iov_len`.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            tid,
            note as usize as *mut libc::c_void,
            (&mut iov as *mut libc::iovec).cast::<libc::c_void>(),
        )
    };
    if r == -1 {
        return Err(format!(
            "ptrace(PTRACE_GETREGSET, {tid}, {note}): {}",
            errno()
        ));
    }
    buf.truncate(iov.iov_len);
    Ok(buf)
}

fn arch() -> Result<Arch, String> {
    if cfg!(target_arch = "x86_64") {
        Ok(Arch::X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(Arch::Aarch64)
    } else {
        Err("--pid works on x86-64 and AArch64 hosts only".into())
    }
}

/// One thread's registers (the `elf_prstatus` layout the core reader knows: `pr_reg`
/// after 112 bytes).
fn thread(arch: Arch, tid: libc::pid_t) -> Result<Thread, String> {
    let mut desc = vec![0u8; 112];
    desc.extend(register_set(tid, libc::NT_PRSTATUS)?);
    let (mut registers, pc) = corefile::prstatus_registers(arch, &desc)
        .ok_or_else(|| format!("thread {tid}: the kernel returned too few register bytes"))?;
    if let Ok(fp) = register_set(tid, libc::NT_PRFPREG) {
        registers.extend(corefile::fpreg_registers(arch, &fp));
    }
    Ok(Thread {
        tid: u32::try_from(tid).unwrap_or(0),
        signal: 0,
        pc,
        registers,
    })
}

/// One line of `/proc/PID/maps`: start, end, permissions, file offset, path.
type MapsLine = (u64, u64, String, u64, String);

/// The lines of `/proc/PID/maps`.
fn maps(pid: u32) -> Result<Vec<MapsLine>, String> {
    let path = format!("/proc/{pid}/maps");
    let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut f = line.split_whitespace();
        let bad = || format!("{path}:{}: cannot read `{line}`", n + 1);
        let range = f.next().ok_or_else(bad)?;
        let perms = f.next().ok_or_else(bad)?.to_owned();
        let offset = u64::from_str_radix(f.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
        let _device = f.next();
        let _inode = f.next();
        let name = f.collect::<Vec<_>>().join(" ");
        let (s, e) = range.split_once('-').ok_or_else(bad)?;
        let start = u64::from_str_radix(s, 16).map_err(|_| bad())?;
        let end = u64::from_str_radix(e, 16).map_err(|_| bad())?;
        out.push((start, end, perms, offset, name));
    }
    Ok(out)
}

/// Stops process `pid`, reads its threads, mapped files and memory, and lets it run on.
pub fn capture(pid: u32) -> Result<Stopped, String> {
    let arch = arch()?;
    let task = format!("/proc/{pid}/task");
    let mut tids: Vec<libc::pid_t> = fs::read_dir(&task)
        .map_err(|e| format!("{task}: {e} (no such process?)"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut attached = Attached(Vec::new());
    for &tid in &tids {
        seize_and_stop(tid)?;
        attached.0.push(tid);
    }
    let mut threads = Vec::new();
    for &tid in &tids {
        threads.push(thread(arch, tid)?);
    }
    // The thread group leader first: gdb's thread 1.
    let leader = threads.iter().position(|t| t.tid == pid);
    if let Some(i) = leader {
        let t = threads.remove(i);
        threads.insert(0, t);
    }
    let mem_path = format!("/proc/{pid}/mem");
    let mem = fs::File::open(&mem_path).map_err(|e| format!("{mem_path}: {e}"))?;
    let mut mappings = Vec::new();
    let mut memory = Vec::new();
    let mut missing = Vec::new();
    let mut copied = 0u64;
    for (start, end, perms, offset, name) in maps(pid)? {
        if name.starts_with('/') {
            mappings.push(Mapping {
                start,
                end,
                file_offset: offset,
                path: name.clone(),
            });
        }
        if !perms.starts_with('r') || name == "[vvar]" || name == "[vsyscall]" {
            continue;
        }
        let len = end - start;
        if copied + len > MAX_COPY {
            missing.push((start, end, format!("not copied (over {MAX_COPY} bytes)")));
            continue;
        }
        let mut bytes = vec![0u8; usize::try_from(len).map_err(|e| e.to_string())?];
        match mem.read_exact_at(&mut bytes, start) {
            Ok(()) => {
                copied += len;
                memory.push(MemoryBlock {
                    space: 0,
                    address: start,
                    bytes,
                });
            }
            Err(e) => missing.push((start, end, format!("{mem_path}: {e}"))),
        }
    }
    drop(attached);
    let entry = auxv_entry(pid);
    Ok(Stopped {
        arch,
        threads,
        mappings,
        memory,
        missing,
        entry,
    })
}

/// `AT_ENTRY` from `/proc/PID/auxv`.
fn auxv_entry(pid: u32) -> Option<u64> {
    let bytes = fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let words: Vec<u64> = bytes
        .chunks_exact(8)
        .filter_map(|c| Some(u64::from_le_bytes(c.try_into().ok()?)))
        .collect();
    let pairs: BTreeMap<u64, u64> = words.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    pairs.get(&9).copied()
}
