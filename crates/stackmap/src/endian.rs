//! Byte order of a stack map section.
//!
//! LLVM writes `.llvm_stackmaps` in the target's byte order. A reader fixed at compile time
//! ([`LittleEndian`], [`BigEndian`]) costs nothing per field; [`RunTimeEndian`] serves tools that
//! learn the order from an object file.

/// A byte order. Implementations decide how the fixed-size fields of the section are read.
pub trait Endian: Copy + core::fmt::Debug + 'static {
    /// True for big-endian data.
    fn is_big_endian(self) -> bool;

    /// Reads a `u16` in this byte order.
    #[inline(always)]
    fn u16(self, b: [u8; 2]) -> u16 {
        if self.is_big_endian() {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }

    /// Reads a `u32` in this byte order.
    #[inline(always)]
    fn u32(self, b: [u8; 4]) -> u32 {
        if self.is_big_endian() {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    /// Reads a `u64` in this byte order.
    #[inline(always)]
    fn u64(self, b: [u8; 8]) -> u64 {
        if self.is_big_endian() {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    }
}

/// Little-endian data (x86-64, AArch64 little-endian), fixed at compile time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LittleEndian;

impl Endian for LittleEndian {
    #[inline(always)]
    fn is_big_endian(self) -> bool {
        false
    }
}

/// Big-endian data (SystemZ, PowerPC big-endian, `aarch64_be`), fixed at compile time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BigEndian;

impl Endian for BigEndian {
    #[inline(always)]
    fn is_big_endian(self) -> bool {
        true
    }
}

/// A byte order chosen at run time, for example from an object file's header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunTimeEndian {
    /// Least significant byte first.
    #[default]
    Little,
    /// Most significant byte first.
    Big,
}

impl Endian for RunTimeEndian {
    #[inline(always)]
    fn is_big_endian(self) -> bool {
        self == RunTimeEndian::Big
    }
}

/// Reads fixed-size fields from `data`; out-of-range reads give zero. The parser validates
/// every offset before the model reads it, so the zero is never observed on a parsed table,
/// but it keeps even a logic error from turning into a panic.
#[inline(always)]
pub(crate) fn bytes<const N: usize>(data: &[u8], at: usize) -> [u8; N] {
    match data.get(at..at.wrapping_add(N)) {
        Some(b) => {
            let mut out = [0u8; N];
            out.copy_from_slice(b);
            out
        }
        None => [0u8; N],
    }
}

#[inline(always)]
pub(crate) fn read_u16<E: Endian>(data: &[u8], at: usize, e: E) -> u16 {
    e.u16(bytes(data, at))
}

#[inline(always)]
pub(crate) fn read_u32<E: Endian>(data: &[u8], at: usize, e: E) -> u32 {
    e.u32(bytes(data, at))
}

#[inline(always)]
pub(crate) fn read_u64<E: Endian>(data: &[u8], at: usize, e: E) -> u64 {
    e.u64(bytes(data, at))
}
