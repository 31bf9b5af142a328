//! Reading and writing through a location description at bit granularity
//! (spec 001, "Location Description": every location is an offset into a
//! storage; composites concatenate the bits of their parts).
//!
//! Design: after an evaluation, the caller holds a [`LocationDescription`] and wants the
//! object's bits (to print a variable) or to change them (to set one). A read
//! may touch many storages (a composite spread over registers, memory in
//! several address spaces, implicit bytes), so this layer takes a
//! caller-supplied [`Target`] (its four access methods) instead of a
//! pause-and-resume protocol: the order of the accesses does not matter, the
//! caller has the registers and memory at hand anyway, and a trait keeps the
//! common case (print a variable) one call. The evaluator itself stays free
//! of callbacks: its `DW_OP_deref*` use the same splitting into storage
//! accesses, but ask for each one with a request.
//!
//! Bits are numbered little-endian: bit `i` of a storage is bit `i % 8` of
//! byte `i / 8`. Undefined storage, implicit pointers, bytes past the end of
//! implicit storage and bits past the last part of a composite read as
//! *undefined*: [`Bits`] carries a per-bit defined mask, so a consumer can
//! print `??` instead of inventing a value. Writes go to every place of a
//! multi-place description (and of each part's description); writing to
//! implicit or undefined storage is an error, checked before anything is
//! written.
//!
//! ```
//! use locus_dwarf::access::{read, write, Target};
//! use locus_dwarf::{Location, Part, Storage};
//!
//! struct Regs([u8; 8]);
//! impl Target for Regs {
//!     fn read_memory(&mut self, _: u64, _: u64, _: &mut [u8]) -> bool { false }
//!     fn read_register(&mut self, r: u16, at: u64, buf: &mut [u8]) -> bool {
//!         let at = at as usize;
//!         match self.0.get(at..at + buf.len()) {
//!             Some(b) if r == 0 => { buf.copy_from_slice(b); true }
//!             _ => false,
//!         }
//!     }
//!     fn write_register(&mut self, r: u16, at: u64, bytes: &[u8]) -> bool {
//!         let at = at as usize;
//!         match self.0.get_mut(at..at + bytes.len()) {
//!             Some(b) if r == 0 => { b.copy_from_slice(bytes); true }
//!             _ => false,
//!         }
//!     }
//! }
//!
//! // Two bytes of register 0, then two undefined bytes.
//! let loc = Location::composite(vec![
//!     Part { location: Location::register(0), bit_size: 16 },
//!     Part { location: Location::undefined(), bit_size: 16 },
//! ]);
//! let mut regs = Regs([0x34, 0x12, 0, 0, 0, 0, 0, 0]);
//! assert_eq!(read(&loc, 32, &mut regs)?.to_hex(), "3412????");
//! write(&Location::register(0), &[0xcd, 0xab], 16, &mut regs)?;
//! assert_eq!(read(&loc, 16, &mut regs)?.bytes(), [0xcd, 0xab]);
//! assert!(write(&loc, &[0; 4], 32, &mut regs).is_err()); // the undefined part
//! # Ok::<(), locus_dwarf::Error>(())
//! ```

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::Error;
use crate::eval::ErrorKind;
use crate::location::{LocationDescription, Part, Storage};
use crate::ErrorDetail;

/// The most bits one read or write may cover (128 MiB), so that no request
/// can make this layer allocate without bound.
pub const MAX_ACCESS_BITS: u64 = 1 << 30;

/// Deepest composite nesting [`read`] and [`write()`] follow.
pub const MAX_NESTING: usize = 1024;

pub use crate::target::Target;

/// Bits read through a location, with a per-bit mask of which are defined.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bits {
    bytes: Vec<u8>,
    defined: Vec<u8>,
    bit_len: u64,
}

impl Bits {
    /// `bit_len` undefined (zero) bits.
    pub fn undefined(bit_len: u64) -> Result<Bits, ErrorKind> {
        if bit_len > MAX_ACCESS_BITS {
            return Err(ErrorKind::TooLarge("access of more than 2^30 bits"));
        }
        let n = bit_len.div_ceil(8) as usize;
        Ok(Bits {
            bytes: vec![0; n],
            defined: vec![0; n],
            bit_len,
        })
    }

    /// Fully defined bits from `bytes` (`bytes.len() * 8` bits).
    pub fn from_bytes(bytes: &[u8]) -> Bits {
        Bits {
            bytes: bytes.to_vec(),
            defined: vec![0xff; bytes.len()],
            bit_len: bytes.len() as u64 * 8,
        }
    }

    /// Number of bits.
    pub fn bit_len(&self) -> u64 {
        self.bit_len
    }

    /// The bits, packed little-endian; undefined bits are 0.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The defined mask: bit `i` is set if bit `i` of [`Bits::bytes`] is
    /// defined.
    pub fn defined_mask(&self) -> &[u8] {
        &self.defined
    }

    /// Whether bit `i` is defined.
    pub fn is_bit_defined(&self, i: u64) -> bool {
        i < self.bit_len && get_bit(&self.defined, i)
    }

    /// Whether every bit is defined.
    pub fn is_fully_defined(&self) -> bool {
        (0..self.bit_len).all(|i| get_bit(&self.defined, i))
    }

    /// Byte `i` if all of its bits (within [`Bits::bit_len`]) are defined.
    pub fn byte(&self, i: usize) -> Option<u8> {
        let start = i as u64 * 8;
        let end = (start + 8).min(self.bit_len);
        if start >= self.bit_len || !(start..end).all(|b| get_bit(&self.defined, b)) {
            return None;
        }
        self.bytes.get(i).copied()
    }

    /// Lower-case hex, two digits a byte; a byte with any undefined bit is
    /// written `??`.
    pub fn to_hex(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(self.bytes.len() * 2);
        for i in 0..self.bytes.len() {
            match self.byte(i) {
                Some(b) => {
                    s.push(char::from(HEX[usize::from(b >> 4)]));
                    s.push(char::from(HEX[usize::from(b & 15)]));
                }
                None => s.push_str("??"),
            }
        }
        s
    }

    /// Sets bits `[dst_bit, dst_bit + len)` from `src` starting at `src_bit`
    /// and marks them defined.
    pub(crate) fn fill(&mut self, src: &[u8], src_bit: u64, dst_bit: u64, len: u64) {
        copy_bits(src, src_bit, &mut self.bytes, dst_bit, len);
        for i in dst_bit..dst_bit.saturating_add(len).min(self.bit_len) {
            set_bit(&mut self.defined, i, true);
        }
    }
}

fn get_bit(bytes: &[u8], i: u64) -> bool {
    let Ok(byte) = usize::try_from(i / 8) else {
        return false;
    };
    bytes.get(byte).is_some_and(|b| b >> (i % 8) & 1 != 0)
}

fn set_bit(bytes: &mut [u8], i: u64, v: bool) {
    let Ok(byte) = usize::try_from(i / 8) else {
        return;
    };
    if let Some(b) = bytes.get_mut(byte) {
        let m = 1u8 << (i % 8);
        if v {
            *b |= m;
        } else {
            *b &= !m;
        }
    }
}

/// Copies `len` bits; bits outside either slice are skipped.
pub(crate) fn copy_bits(src: &[u8], src_bit: u64, dst: &mut [u8], dst_bit: u64, len: u64) {
    if src_bit.is_multiple_of(8) && dst_bit.is_multiple_of(8) {
        let (s, d) = ((src_bit / 8) as usize, (dst_bit / 8) as usize);
        let whole = (len / 8) as usize;
        let n = whole
            .min(src.len().saturating_sub(s))
            .min(dst.len().saturating_sub(d));
        if let (Some(from), Some(to)) = (src.get(s..s + n), dst.get_mut(d..d + n)) {
            to.copy_from_slice(from);
        }
        let done = n as u64 * 8;
        for i in done..len {
            set_bit(dst, dst_bit + i, get_bit(src, src_bit + i));
        }
        return;
    }
    for i in 0..len {
        set_bit(dst, dst_bit + i, get_bit(src, src_bit + i));
    }
}

/// Storage that must be asked for: memory of an address space or a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    Memory(u64),
    Register(u16),
}

/// One access to a [`Place`]: `len` bits at bit `src_bit` of the storage,
/// going to (or coming from) bit `dst_bit` of the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fetch {
    pub place: Place,
    pub src_bit: u128,
    pub dst_bit: u64,
    pub len: u64,
}

impl Fetch {
    /// The whole bytes covering the access: first byte and count.
    pub fn span(&self) -> Result<(u64, u64), ErrorKind> {
        let first = self.src_bit / 8;
        let end = self.src_bit.saturating_add(u128::from(self.len));
        let last = end.saturating_sub(1) / 8;
        let first = u64::try_from(first).map_err(|_| ErrorKind::OffsetOutOfRange)?;
        let last = u64::try_from(last).map_err(|_| ErrorKind::OffsetOutOfRange)?;
        Ok((first, last - first + 1))
    }

    /// Bit of the first span byte where the access starts.
    pub fn shift(&self) -> u64 {
        (self.src_bit % 8) as u64
    }
}

/// The parts of a composite that overlap its bits `start..end`, each with the
/// overlap's first and end bit and the part's own first bit (bits of the
/// composite).
fn overlapping(
    parts: &[Part],
    start: u128,
    end: u128,
) -> impl Iterator<Item = (&Part, u128, u128, u128)> {
    let mut pos = 0u128;
    parts.iter().filter_map(move |part| {
        let first = pos;
        pos = pos.saturating_add(u128::from(part.bit_size));
        let (s, e) = (first.max(start), pos.min(end));
        (s < e).then_some((part, s, e, first))
    })
}

/// Splits a read of `len` bits at bit `offset` of `storage` into the object's
/// bits at `dst_bit`: implicit bytes are copied into `bits` now, undefined
/// bits are left undefined, registers and memory become `fetches`.
pub(crate) fn plan_read(
    storage: &Storage,
    offset: u128,
    dst_bit: u64,
    len: u64,
    bits: &mut Bits,
    fetches: &mut Vec<Fetch>,
    depth: usize,
) -> Result<(), ErrorKind> {
    if depth > MAX_NESTING {
        return Err(ErrorKind::TooLarge("composite nesting too deep"));
    }
    if len == 0 {
        return Ok(());
    }
    match storage {
        Storage::Memory { address_space } => fetches.push(Fetch {
            place: Place::Memory(*address_space),
            src_bit: offset,
            dst_bit,
            len,
        }),
        Storage::Register(r) => fetches.push(Fetch {
            place: Place::Register(*r),
            src_bit: offset,
            dst_bit,
            len,
        }),
        Storage::Implicit(bytes) => {
            let size = bytes.len() as u128 * 8;
            if offset < size {
                let n = (size - offset).min(u128::from(len)) as u64;
                bits.fill(bytes, offset as u64, dst_bit, n);
            }
        }
        Storage::Undefined | Storage::ImplicitPointer { .. } => {}
        Storage::Composite(parts) => {
            let (start, end) = (offset, offset.saturating_add(u128::from(len)));
            for (part, s, e, ps) in overlapping(parts, start, end) {
                let Some(first) = part.location.places.first() else {
                    continue;
                };
                plan_read(
                    &first.storage,
                    first.bit_offset.saturating_add(s - ps),
                    dst_bit + (s - start) as u64,
                    (e - s) as u64,
                    bits,
                    fetches,
                    depth + 1,
                )?;
            }
        }
    }
    Ok(())
}

/// Splits a write of `len` bits at bit `offset` of `storage` (from the
/// object's bit `src_bit`) into register and memory stores, through every
/// place of every part. Implicit, implicit-pointer and undefined storage,
/// and bits past a composite's last part, cannot be written.
fn plan_write(
    storage: &Storage,
    offset: u128,
    src_bit: u64,
    len: u64,
    stores: &mut Vec<Fetch>,
    depth: usize,
) -> Result<(), ErrorKind> {
    if depth > MAX_NESTING {
        return Err(ErrorKind::TooLarge("composite nesting too deep"));
    }
    if len == 0 {
        return Ok(());
    }
    match storage {
        Storage::Memory { address_space } => stores.push(Fetch {
            place: Place::Memory(*address_space),
            src_bit: offset,
            dst_bit: src_bit,
            len,
        }),
        Storage::Register(r) => stores.push(Fetch {
            place: Place::Register(*r),
            src_bit: offset,
            dst_bit: src_bit,
            len,
        }),
        Storage::Implicit(_) | Storage::ImplicitPointer { .. } => {
            return Err(ErrorKind::NotWritable("implicit storage"))
        }
        Storage::Undefined => return Err(ErrorKind::NotWritable("undefined storage")),
        Storage::Composite(parts) => {
            let (start, end) = (offset, offset.saturating_add(u128::from(len)));
            for (part, s, e, ps) in overlapping(parts, start, end) {
                for place in &part.location.places {
                    plan_write(
                        &place.storage,
                        place.bit_offset.saturating_add(s - ps),
                        src_bit + (s - start) as u64,
                        (e - s) as u64,
                        stores,
                        depth + 1,
                    )?;
                }
            }
            let size = parts
                .iter()
                .fold(0u128, |n, p| n.saturating_add(u128::from(p.bit_size)));
            if size < end {
                return Err(ErrorKind::NotWritable("bits past the end of a composite"));
            }
        }
    }
    Ok(())
}

/// Reads a span of whole bytes of a place.
fn read_span(
    target: &mut (impl Target + ?Sized),
    place: Place,
    first: u64,
    buf: &mut [u8],
) -> Result<(), ErrorKind> {
    let ok = match place {
        Place::Memory(space) => target.read_memory(space, first, buf),
        Place::Register(r) => target.read_register(r, first, buf),
    };
    if ok {
        Ok(())
    } else {
        Err(unavailable(place, first, buf.len()))
    }
}

fn unavailable(place: Place, first: u64, size: usize) -> ErrorKind {
    match place {
        Place::Memory(address_space) => ErrorKind::MemoryUnavailable {
            address_space,
            address: first,
            size: size as u64,
        },
        Place::Register(register) => ErrorKind::RegisterUnavailable { register },
    }
}

fn span_len(n: u64) -> Result<usize, ErrorKind> {
    usize::try_from(n).map_err(|_| ErrorKind::TooLarge("access span"))
}

fn access_error(error: ErrorKind) -> Error {
    ErrorDetail::Access { kind: error }.into()
}

/// Reads `bit_len` bits through `location`.
///
/// Any place of a multi-place description holds the object, so the places
/// are tried in order and the first that can be read wins (the error of the
/// last one is returned if none can). Within a composite, each part's first
/// place is read. Undefined bits (see the module docs) are reported in the
/// result's mask, not as an error; an unreadable register or memory range is
/// an [`ErrorDetail::Access`].
pub fn read(
    location: &LocationDescription,
    bit_len: u64,
    target: &mut (impl Target + ?Sized),
) -> Result<Bits, Error> {
    let mut last = ErrorKind::UndefinedRead;
    for place in &location.places {
        match read_place(&place.storage, place.bit_offset, bit_len, target) {
            Ok(bits) => return Ok(bits),
            Err(e) => last = e,
        }
    }
    if location.places.is_empty() {
        return Bits::undefined(bit_len).map_err(access_error);
    }
    Err(access_error(last))
}

fn read_place(
    storage: &Storage,
    offset: u128,
    bit_len: u64,
    target: &mut (impl Target + ?Sized),
) -> Result<Bits, ErrorKind> {
    let mut bits = Bits::undefined(bit_len)?;
    let mut fetches = Vec::new();
    plan_read(storage, offset, 0, bit_len, &mut bits, &mut fetches, 0)?;
    let mut buf = Vec::new();
    for f in &fetches {
        let (first, n) = f.span()?;
        buf.clear();
        buf.resize(span_len(n)?, 0);
        read_span(target, f.place, first, &mut buf)?;
        bits.fill(&buf, f.shift(), f.dst_bit, f.len);
    }
    Ok(bits)
}

/// Writes the first `bit_len` bits of `data` (little-endian bit order)
/// through `location`: to every place, and through every place of every
/// composite part. Partial bytes of registers and memory are read, merged
/// and written back.
///
/// Fails before writing anything if some bit would go to implicit,
/// implicit-pointer or undefined storage (or past a composite's end), or if
/// `data` is shorter than `bit_len` bits. A target refusing a store is an
/// error too, but stores before it have been done.
pub fn write(
    location: &LocationDescription,
    data: &[u8],
    bit_len: u64,
    target: &mut (impl Target + ?Sized),
) -> Result<(), Error> {
    if bit_len > data.len() as u64 * 8 {
        return Err(access_error(ErrorKind::BadSize(bit_len)));
    }
    if bit_len > MAX_ACCESS_BITS {
        return Err(access_error(ErrorKind::TooLarge(
            "access of more than 2^30 bits",
        )));
    }
    let mut stores = Vec::new();
    for place in &location.places {
        plan_write(&place.storage, place.bit_offset, 0, bit_len, &mut stores, 0)
            .map_err(access_error)?;
    }
    let mut buf = Vec::new();
    for s in &stores {
        store(target, s, data, &mut buf).map_err(access_error)?;
    }
    Ok(())
}

fn store(
    target: &mut (impl Target + ?Sized),
    s: &Fetch,
    data: &[u8],
    buf: &mut Vec<u8>,
) -> Result<(), ErrorKind> {
    let (first, n) = s.span()?;
    buf.clear();
    buf.resize(span_len(n)?, 0);
    // Keep the neighbouring bits of partly written bytes.
    if s.shift() != 0 || !(s.shift() + s.len).is_multiple_of(8) {
        read_span(target, s.place, first, buf)?;
    }
    copy_bits(data, s.dst_bit, buf, s.shift(), s.len);
    let ok = match s.place {
        Place::Memory(space) => target.write_memory(space, first, buf),
        Place::Register(r) => target.write_register(r, first, buf),
    };
    if ok {
        Ok(())
    } else {
        Err(unavailable(s.place, first, buf.len()))
    }
}
