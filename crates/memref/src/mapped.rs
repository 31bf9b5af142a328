//! A `.npy` file mapped into memory, so a kernel can work on a large array without it being
//! read into a buffer first: the array's data is the file's pages.
//!
//! Only files whose data can be used as it is are mapped: C order, native byte order (see
//! [`MappedNpy::open`]). A mapping for reading is private (copy on write: what a kernel
//! writes into its argument stays in this process); one for `--inout` is shared, so what
//! the kernel writes is written to the file.

use std::fs::File;
use std::path::Path;

use crate::npy::{Dtype, NpyHeader};
use crate::Error;

/// A mapped `.npy` file.
#[derive(Debug)]
pub struct MappedNpy {
    base: *mut u8,
    len: usize,
    header: NpyHeader,
}

impl MappedNpy {
    /// Maps the `.npy` file at `path`, writable back to the file if `shared`. `Ok(None)`
    /// when the file cannot be used in place (Fortran order, the other byte order, not a
    /// regular file, empty, data not aligned to `align` bytes): read it instead.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if it cannot be opened or mapped, the header's errors
    /// ([`NpyHeader::parse`]), [`Error::Npy`] if the file is shorter than its data or a
    /// bool array's byte is neither 0 nor 1.
    ///
    /// # Safety
    ///
    /// While the mapping lives, nothing else may truncate or write the file: the data is
    /// handed out as a Rust slice.
    pub unsafe fn open(
        path: &Path,
        shared: bool,
        align: usize,
    ) -> Result<Option<MappedNpy>, Error> {
        // SAFETY: the caller's contract.
        unsafe { MappedNpy::open_as(path, shared, align, None) }
    }

    /// [`MappedNpy::open`], reading a dtype that names only a size (numpy's `'<V2'` for
    /// an `ml_dtypes` bfloat16) as `untyped` ([`NpyHeader::parse_as`]).
    ///
    /// # Errors
    ///
    /// As [`MappedNpy::open`]'s.
    ///
    /// # Safety
    ///
    /// As for [`MappedNpy::open`].
    pub unsafe fn open_as(
        path: &Path,
        shared: bool,
        align: usize,
        untyped: Option<Dtype>,
    ) -> Result<Option<MappedNpy>, Error> {
        let io = |e: std::io::Error| Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let file = if shared {
            File::options().read(true).write(true).open(path)
        } else {
            File::open(path)
        }
        .map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let Ok(len) = usize::try_from(meta.len()) else {
            return Ok(None);
        };
        if !meta.is_file() || len == 0 {
            return Ok(None);
        }
        let flags = if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh mapping of `len` bytes of an open file; the kernel chooses where.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io(std::io::Error::last_os_error()));
        }
        let mut mapped = MappedNpy {
            base: base.cast(),
            len,
            header: NpyHeader {
                dtype: Dtype::U8,
                shape: Vec::new(),
                fortran_order: false,
                big_endian: false,
                data_offset: 0,
                raw_descr: None,
            },
        };
        // SAFETY: the mapping's `len` bytes, alive while `mapped` is (dropped on error).
        let bytes = unsafe { std::slice::from_raw_parts(mapped.base, len) };
        let header = NpyHeader::parse_as(bytes, untyped)?;
        let misaligned = !(mapped.base as usize + header.data_offset).is_multiple_of(align.max(1));
        if header.fortran_order || header.big_endian != cfg!(target_endian = "big") || misaligned {
            return Ok(None);
        }
        let Some(need) = header.data_len() else {
            return Err(Error::Npy {
                message: format!("shape {:?} is too large", header.shape),
            });
        };
        if len - header.data_offset.min(len) < need {
            return Err(Error::Npy {
                message: format!(
                    "data at byte {} has {} bytes, shape {:?} needs {need}",
                    header.data_offset,
                    len.saturating_sub(header.data_offset),
                    header.shape
                ),
            });
        }
        if let Some(&big) = header.shape.iter().find(|&&s| i64::try_from(s).is_err()) {
            return Err(Error::Npy {
                message: format!("size {big} does not fit a memref index (i64)"),
            });
        }
        let data = bytes
            .get(header.data_offset..header.data_offset + need)
            .unwrap_or_default();
        crate::npy::check_bools(header.dtype, data, header.data_offset)?;
        mapped.header = header;
        Ok(Some(mapped))
    }

    /// The header.
    pub fn header(&self) -> &NpyHeader {
        &self.header
    }

    /// The array's data, in the file's pages.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let len = self.header.data_len().unwrap_or(0);
        // SAFETY: `open` checked the data lies within the mapping, which lives as long as
        // `self`, borrowed mutably here; `open`'s contract keeps others from changing it.
        let data = self.base.wrapping_add(self.header.data_offset);
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(data, len) }
    }

    /// The sizes as memref sizes.
    pub fn sizes(&self) -> Vec<i64> {
        self.header
            .shape
            .iter()
            .map(|&s| i64::try_from(s).unwrap_or(i64::MAX))
            .collect()
    }
}

impl Drop for MappedNpy {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once; nothing borrows it any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
