//! Executable memory the runtime manages for its stubs, W^X without `mprotect`.
//!
//! Each chunk is one `memfd` mapped twice: a read+execute view, where stubs run, and a
//! read+write view at another address, where the runtime writes them. No address is ever
//! writable and executable at once, and writing a stub changes no page protection, so
//! other threads running other stubs of the same page are undisturbed (a `mprotect` to
//! read+write would make them fault). Stubs are handed out in blocks of [`BLOCK`] bytes;
//! a freed block goes on a free list of its size and is the next one handed out for a
//! stub of that size: the memory of a site's stub is reused once the site is patched
//! back or on to another stub.
//!
//! x86-64 keeps instruction fetch coherent with stores, and a stub's address reaches
//! compiled code only through a later patch of a site, so nothing more is needed after the
//! copy (an AArch64 port would clean and invalidate the lines, as
//! `locus_stackmap::patch::write_code` does).

use std::collections::HashMap;

/// The granule of stub memory: blocks are multiples of it, aligned to it.
pub(super) const BLOCK: usize = 32;

/// Bytes of each chunk mapped (more for a stub larger than that).
const CHUNK: usize = 64 * 1024;

/// One memfd mapped twice.
struct Chunk {
    exec: *mut u8,
    write: *mut u8,
    len: usize,
    /// Bytes handed out from the start.
    next: usize,
}

/// Stub memory (see the [module documentation](self)).
pub(super) struct CodeArea {
    chunks: Vec<Chunk>,
    /// Freed blocks by size, as execute-view addresses.
    free: HashMap<usize, Vec<u64>>,
    /// The size of each block in use, by its execute-view address.
    in_use: HashMap<u64, usize>,
}

impl CodeArea {
    /// An area with nothing mapped yet.
    pub(super) fn new() -> Self {
        CodeArea {
            chunks: Vec::new(),
            free: HashMap::new(),
            in_use: HashMap::new(),
        }
    }

    /// Copies `code` into a block of the area; returns its (execute) address.
    pub(super) fn add(&mut self, code: &[u8]) -> Result<u64, String> {
        if code.is_empty() {
            return Err("an empty stub".to_owned());
        }
        let size = code.len().div_ceil(BLOCK) * BLOCK;
        let exec = match self.free.get_mut(&size).and_then(Vec::pop) {
            Some(address) => address,
            None => self.carve(size)?,
        };
        let write = self
            .write_view(exec, size)
            .ok_or_else(|| format!("stub memory at {exec:#x} is not the area's"))?;
        // SAFETY: `write .. write + size` is the write view of a block of a live chunk,
        // handed out to no other stub (just carved or taken off the free list), so no
        // reference points there; `code` is a separate slice no longer than `size`.
        let block = unsafe { std::slice::from_raw_parts_mut(write, size) };
        let (stub, padding) = block.split_at_mut(code.len());
        stub.copy_from_slice(code);
        // `int3`: never run.
        padding.fill(0xcc);
        self.in_use.insert(exec, size);
        Ok(exec)
    }

    /// Returns the block at `address` to the area: the next stub of its size goes there.
    /// Nothing must run it any more.
    pub(super) fn free(&mut self, address: u64) {
        if let Some(size) = self.in_use.remove(&address) {
            self.free.entry(size).or_default().push(address);
        }
    }

    /// Whether `address .. address + len` lies in one block in use.
    pub(super) fn contains(&self, address: u64, len: usize) -> bool {
        let end = address.saturating_add(len as u64);
        self.in_use
            .iter()
            .any(|(start, size)| *start <= address && end <= start + *size as u64)
    }

    /// Bytes in blocks in use, and bytes mapped.
    pub(super) fn usage(&self) -> (usize, usize) {
        (
            self.in_use.values().sum(),
            self.chunks.iter().map(|c| c.len).sum(),
        )
    }

    /// The write-view address of the `size` bytes at execute address `exec`.
    fn write_view(&self, exec: u64, size: usize) -> Option<*mut u8> {
        self.chunks.iter().find_map(|c| {
            let start = c.exec as u64;
            let offset = exec.checked_sub(start)? as usize;
            (offset + size <= c.len).then(|| c.write.wrapping_add(offset))
        })
    }

    /// A fresh block of `size` bytes, from the last chunk or a new one.
    fn carve(&mut self, size: usize) -> Result<u64, String> {
        if let Some(chunk) = self.chunks.last_mut() {
            if chunk.len - chunk.next >= size {
                let address = chunk.exec as u64 + chunk.next as u64;
                chunk.next += size;
                return Ok(address);
            }
        }
        let mut chunk = Chunk::map(size.max(CHUNK))?;
        let address = chunk.exec as u64;
        chunk.next = size;
        self.chunks.push(chunk);
        Ok(address)
    }
}

impl Chunk {
    /// Maps `len` bytes (rounded up to pages) twice: read+execute and read+write.
    fn map(len: usize) -> Result<Self, String> {
        let page = 4096;
        let len = len.div_ceil(page) * page;
        let error =
            |what: &str| format!("stub memory: {what}: {}", std::io::Error::last_os_error());
        // SAFETY: a name for the memfd, NUL-terminated; no other precondition.
        let fd = unsafe { libc::memfd_create(c"locus-stubs".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(error("memfd_create"));
        }
        let close = |fd| {
            // SAFETY: the descriptor made above, closed once.
            unsafe { libc::close(fd) };
        };
        // SAFETY: the descriptor made above.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            let e = error("ftruncate");
            close(fd);
            return Err(e);
        }
        let map = |prot| {
            // SAFETY: a shared mapping of the memfd at an address the kernel picks; no
            // memory of the process is affected.
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) }
        };
        let exec = map(libc::PROT_READ | libc::PROT_EXEC);
        if exec == libc::MAP_FAILED {
            let e = error("mmap (read+execute)");
            close(fd);
            return Err(e);
        }
        let write = map(libc::PROT_READ | libc::PROT_WRITE);
        if write == libc::MAP_FAILED {
            let e = error("mmap (read+write)");
            // SAFETY: the mapping made above, used by nothing yet.
            unsafe { libc::munmap(exec, len) };
            close(fd);
            return Err(e);
        }
        // The mappings keep the memory; the descriptor is no longer needed.
        close(fd);
        Ok(Chunk {
            exec: exec.cast(),
            write: write.cast(),
            len,
            next: 0,
        })
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: the two mappings `map` made; the runtime that owns them is going, with
        // the program that could call into them.
        unsafe { libc::munmap(self.exec.cast(), self.len) };
        // SAFETY: as above.
        unsafe { libc::munmap(self.write.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_reused_by_size_and_run() -> Result<(), String> {
        let mut area = CodeArea::new();
        // mov eax, 42; ret
        let a = area.add(&[0xb8, 42, 0, 0, 0, 0xc3])?;
        let b = area.add(&[0x90; 40])?;
        assert_eq!(b, a + 32);
        assert_eq!(area.usage(), (96, CHUNK));
        // SAFETY: `a` holds `mov eax, 42; ret`, a complete function of no arguments.
        let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(a as usize) };
        assert_eq!(f(), 42);
        area.free(a);
        assert!(!area.contains(a, 1) && area.contains(b, 64));
        let c = area.add(&[0xb8, 7, 0, 0, 0, 0xc3])?;
        assert_eq!(c, a);
        // SAFETY: as above, now `mov eax, 7; ret`.
        let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(c as usize) };
        assert_eq!(f(), 7);
        let big = area.add(&vec![0xc3; CHUNK + 1])?;
        assert!(area.contains(big, CHUNK + 1));
        assert!(area.add(&[]).is_err());
        Ok(())
    }
}
