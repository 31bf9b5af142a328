//! Reading live values out of a stopped frame.
//!
//! The caller supplies a [`Frame`]: the values of the DWARF registers at the record's
//! address and a way to read memory. [`Frame::value`] turns a [`Location`] into the value it
//! describes (spec, the location table: Register = the register's contents, Direct = the
//! address `reg + offset`, Indirect = the bytes at `[reg + offset]`, Constant = the offset
//! field, ConstantIndex = `Constants[offset]`).
//!
//! Which register values a frame holds is the caller's business: at a statepoint the
//! callee-saved registers at the call, with the stack pointer as it was before the call
//! pushed the return address (x86-64) or at the `bl` (AArch64).

use crate::error::{Error, Result};
use crate::parse::Location;

/// A stopped frame: registers by DWARF number, and memory.
pub trait Frame {
    /// The value of DWARF register `dwarf_reg`, or `None` if the frame does not know it.
    fn register(&self, dwarf_reg: u16) -> Option<u64>;

    /// Fills `buf` with the bytes at `address`. Returns false if they cannot be read.
    fn read_memory(&self, address: u64, buf: &mut [u8]) -> bool;

    /// True if memory holds values most significant byte first.
    fn big_endian(&self) -> bool {
        false
    }

    /// The value `location` describes, as a 64-bit word.
    ///
    /// Register and Indirect values narrower than 8 bytes are zero-extended from their low
    /// bytes; sizes above 8 are refused with [`Error::UnsupportedSize`] (use
    /// [`Frame::address`] and read the bytes yourself).
    fn value(&self, location: &Location) -> Result<u64> {
        match *location {
            Location::Register { dwarf_reg, size } => {
                let v = self
                    .register(dwarf_reg)
                    .ok_or(Error::RegisterUnavailable { dwarf_reg })?;
                truncate(v, size)
            }
            Location::Direct {
                dwarf_reg, offset, ..
            } => {
                let base = self
                    .register(dwarf_reg)
                    .ok_or(Error::RegisterUnavailable { dwarf_reg })?;
                Ok(base.wrapping_add(offset as i64 as u64))
            }
            Location::Indirect {
                dwarf_reg,
                offset,
                size,
            } => {
                let base = self
                    .register(dwarf_reg)
                    .ok_or(Error::RegisterUnavailable { dwarf_reg })?;
                let address = base.wrapping_add(offset as i64 as u64);
                let n = usize::from(size);
                if n > 8 {
                    return Err(Error::UnsupportedSize { size });
                }
                // A narrow value sits in the low-order bytes of the word: the first n bytes
                // of a little-endian word, the last n of a big-endian one.
                let big = self.big_endian();
                let mut buf = [0u8; 8];
                let range = if big { 8 - n..8 } else { 0..n };
                let Some(dst) = buf.get_mut(range) else {
                    return Err(Error::UnsupportedSize { size });
                };
                if !self.read_memory(address, dst) {
                    return Err(Error::MemoryUnreadable { address, size: n });
                }
                Ok(if big {
                    u64::from_be_bytes(buf)
                } else {
                    u64::from_le_bytes(buf)
                })
            }
            Location::Constant { value, .. } => Ok(value as i64 as u64),
            Location::ConstantIndex { value, .. } => Ok(value),
        }
    }

    /// The address a Direct or Indirect location refers to (`reg + offset`); `None` for the
    /// other kinds.
    fn address(&self, location: &Location) -> Result<Option<u64>> {
        match *location {
            Location::Direct {
                dwarf_reg, offset, ..
            }
            | Location::Indirect {
                dwarf_reg, offset, ..
            } => {
                let base = self
                    .register(dwarf_reg)
                    .ok_or(Error::RegisterUnavailable { dwarf_reg })?;
                Ok(Some(base.wrapping_add(offset as i64 as u64)))
            }
            _ => Ok(None),
        }
    }
}

fn truncate(v: u64, size: u16) -> Result<u64> {
    match size {
        1 => Ok(v & 0xff),
        2 => Ok(v & 0xffff),
        4 => Ok(v & 0xffff_ffff),
        8 => Ok(v),
        _ => Err(Error::UnsupportedSize { size }),
    }
}
