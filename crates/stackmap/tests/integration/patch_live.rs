//! Patches live code on an x86-64 Linux host and runs it.
//!
//! A tiny function is written into freshly mapped pages (mapped read+write, then made
//! read+execute: never both), with a 16-byte patch region of nops in the middle. The test
//! calls it, patches the region with `patch_call` to call a Rust `extern "C"` function,
//! calls again and checks the new target ran, repatches to a second target, and finally
//! neutralizes the region with nops.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::sync::atomic::{AtomicU64, Ordering};

use locus_stackmap::patch::{self, Arch};

/// Bytes of the patch region in the test function.
const REGION: usize = 16;

/// The function's code: `sub $8, %rsp; xor %eax, %eax; <region>; add $8, %rsp; ret`. The
/// `sub` keeps the stack 16-byte aligned at the call made from the region. Returns the
/// code and the offset of the region.
fn function_code() -> (Vec<u8>, usize) {
    let mut code = vec![0x48, 0x83, 0xec, 0x08, 0x31, 0xc0];
    let region_at = code.len();
    code.extend(patch::encode_nops(Arch::X86_64, REGION).unwrap_or_default());
    code.extend([0x48, 0x83, 0xc4, 0x08, 0xc3]);
    (code, region_at)
}

/// `len` bytes of anonymous memory, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// Maps `pages` pages read+write and copies `code` to `offset`, then makes them
    /// read+execute.
    fn with_code(pages: usize, offset: usize, code: &[u8]) -> Mapping {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = pages * page;
        assert!(offset + code.len() <= len);
        // SAFETY: a fresh private anonymous mapping.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(
            ptr,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        let ptr = ptr.cast::<u8>();
        // SAFETY: the mapping is `len` bytes, writable, and holds `offset + code.len()`.
        let dest = unsafe { ptr.add(offset) };
        // SAFETY: as above; the code is ours and does not overlap the new mapping.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), dest, code.len()) };
        // SAFETY: our own mapping.
        let rc = unsafe { libc::mprotect(ptr.cast(), len, libc::PROT_READ | libc::PROT_EXEC) };
        assert_eq!(rc, 0, "mprotect: {}", std::io::Error::last_os_error());
        Mapping { ptr, len }
    }

    fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset < self.len);
        // SAFETY: in bounds.
        unsafe { self.ptr.add(offset) }
    }

    /// The mapping's permissions as /proc/self/maps shows them (e.g. `r-xp`).
    fn permissions(&self) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let start = self.ptr as usize;
        for line in maps.lines() {
            let mut fields = line.split_whitespace();
            let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
                continue;
            };
            let Some((lo, hi)) = range.split_once('-') else {
                continue;
            };
            let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            else {
                continue;
            };
            if lo <= start && start < hi {
                return perms.to_string();
            }
        }
        String::from("(not mapped)")
    }

    /// The code at `offset` as a function.
    ///
    /// # Safety
    ///
    /// Valid x86-64 code of that signature must be there.
    unsafe fn function(&self, offset: usize) -> extern "C" fn() -> u64 {
        // SAFETY: forwarded from the caller.
        unsafe { std::mem::transmute::<*mut u8, extern "C" fn() -> u64>(self.at(offset)) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer used.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

static FIRST_HITS: AtomicU64 = AtomicU64::new(0);
static SECOND_HITS: AtomicU64 = AtomicU64::new(0);

extern "C" fn first_target() -> u64 {
    FIRST_HITS.fetch_add(1, Ordering::SeqCst);
    0x1111
}

extern "C" fn second_target() -> u64 {
    SECOND_HITS.fetch_add(1, Ordering::SeqCst);
    0x2222
}

/// Runs the patch / call / repatch / neutralize cycle on a function at `offset` of a
/// mapping of `pages` pages.
fn cycle(
    pages: usize,
    offset: usize,
    first: extern "C" fn() -> u64,
    second: extern "C" fn() -> u64,
) -> (u64, u64, u64, u64) {
    let (code, region_at) = function_code();
    let map = Mapping::with_code(pages, offset, &code);
    let site = map.at(offset + region_at);
    // SAFETY: the mapping holds the function just written.
    let f = unsafe { map.function(offset) };

    let before = f();

    // SAFETY: our own code pages; no other thread runs them; the region is 16 bytes.
    let patched = unsafe { patch::patch_call(Arch::X86_64, site, REGION, first as usize as u64) };
    assert_eq!(patched, Ok(()));
    assert_eq!(
        map.permissions(),
        "r-xp",
        "W^X: the pages must be read+execute again"
    );
    let after_first = f();

    // SAFETY: as above.
    let patched = unsafe { patch::patch_call(Arch::X86_64, site, REGION, second as usize as u64) };
    assert_eq!(patched, Ok(()));
    let after_second = f();

    // SAFETY: as above.
    let patched = unsafe { patch::patch_nops(Arch::X86_64, site, REGION) };
    assert_eq!(patched, Ok(()));
    assert_eq!(map.permissions(), "r-xp");
    let after_nops = f();

    (before, after_first, after_second, after_nops)
}

#[test]
fn patch_call_redirects_live_code() {
    let first_hits = FIRST_HITS.load(Ordering::SeqCst);
    let second_hits = SECOND_HITS.load(Ordering::SeqCst);

    let results = cycle(1, 64, first_target, second_target);
    assert_eq!(results, (0, 0x1111, 0x2222, 0));
    assert_eq!(FIRST_HITS.load(Ordering::SeqCst), first_hits + 1);
    assert_eq!(SECOND_HITS.load(Ordering::SeqCst), second_hits + 1);
}

static EDGE_FIRST_HITS: AtomicU64 = AtomicU64::new(0);

extern "C" fn edge_first() -> u64 {
    EDGE_FIRST_HITS.fetch_add(1, Ordering::SeqCst);
    0x3333
}

extern "C" fn edge_second() -> u64 {
    0x4444
}

/// The patch region straddles a page boundary: both pages must be made writable and
/// executable again.
#[test]
fn patch_across_a_page_boundary() {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // The region starts 6 bytes into the function; put it 5 bytes before the boundary.
    let offset = page - 6 - 5;
    let results = cycle(2, offset, edge_first, edge_second);
    assert_eq!(results, (0, 0x3333, 0x4444, 0));
    assert_eq!(EDGE_FIRST_HITS.load(Ordering::SeqCst), 1);
}

/// `write_code` alone: replace a whole function body.
#[test]
fn write_code_replaces_a_function() {
    // mov $42, %eax; ret
    let map = Mapping::with_code(1, 0, &[0xb8, 0x2a, 0, 0, 0, 0xc3]);
    // SAFETY: the mapping holds the function just written.
    let f = unsafe { map.function(0) };
    assert_eq!(f(), 42);
    // mov $7, %eax; ret
    // SAFETY: our own code page; nothing runs it meanwhile.
    let written = unsafe { patch::write_code(map.at(0), &[0xb8, 0x07, 0, 0, 0, 0xc3]) };
    assert_eq!(written, Ok(()));
    assert_eq!(map.permissions(), "r-xp");
    assert_eq!(f(), 7);
}

/// A failing `mprotect` is reported with its errno: an address in the kernel half of the
/// address space is never mapped in a process, which gives ENOMEM.
#[test]
fn write_code_reports_errno() {
    let address = 0xffff_8000_0000_0000_u64 as usize as *mut u8;
    // SAFETY: nothing is mapped there, so mprotect fails before anything is written.
    let written = unsafe { patch::write_code(address, &[0x90]) };
    assert_eq!(
        written,
        Err(locus_stackmap::Error::CodeWrite {
            errno: libc::ENOMEM
        })
    );
}
