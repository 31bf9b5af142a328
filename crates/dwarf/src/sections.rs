//! One DWARF section's bytes, decompressed without trusting the sizes it
//! claims: a compressed section (`SHF_COMPRESSED` zlib or zstd, as `-gz`
//! writes them, or GNU's `.zdebug_*`) whose header claims more than a limit
//! is refused before anything is allocated, and its stream is decompressed
//! into a buffer that stops one byte past what the header claims, so a
//! decompression bomb costs no more than the limit. The limit bounds all of an
//! object's decompressed sections together: many sections just under it
//! would otherwise multiply it.

extern crate std;

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use std::io::Read;

use object::{CompressionFormat, ObjectSection};

use crate::Error;
use crate::ErrorDetail;

/// The default bound on an object's decompressed sections, together: 256 MiB,
/// the CLI's default `--max-input-bytes`.
pub const DEFAULT_MAX_SECTION_BYTES: u64 = 256 << 20;

/// The bytes of `section` (called `name` in messages), decompressed where it
/// is compressed; refused when its header claims more than the `limit` less
/// the `used` bytes other sections decompressed to, or its stream does not
/// decompress to exactly what the header claims. Adds what it decompresses
/// to `used`.
pub(crate) fn section_bytes<'d>(
    section: &object::Section<'d, '_>,
    name: &str,
    limit: u64,
    used: &mut u64,
) -> Result<Cow<'d, [u8]>, Error> {
    let at = section.file_range().map_or(0, |r| r.0);
    let fail = |what: String| ErrorDetail::Object {
        what: format!("section {name} (file offset {at:#x}): {what}"),
    };
    let compressed = section
        .compressed_data()
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if compressed.format == CompressionFormat::None {
        return Ok(Cow::Borrowed(compressed.data));
    }
    let claimed = compressed.uncompressed_size;
    let left = limit.saturating_sub(*used);
    if claimed > left {
        let others = if *used > 0 {
            format!(" less the {used} bytes other sections decompressed to")
        } else {
            String::new()
        };
        return Err(fail(format!(
            "its compression header claims {claimed} bytes, more than the limit of {limit} \
             (--max-input-bytes){others}"
        ))
        .into());
    }
    // `claimed <= limit`, which fits in memory's sizes on the targets Locus reads.
    let cap = usize::try_from(claimed).map_err(|_| fail("too large".into()))?;
    let mut out = Vec::with_capacity(cap);
    let bound = claimed.saturating_add(1);
    let read = match compressed.format {
        CompressionFormat::Zlib => flate2::read::ZlibDecoder::new(compressed.data)
            .take(bound)
            .read_to_end(&mut out)
            .map(|_| ()),
        CompressionFormat::Zstandard => zstd_frames(compressed.data, bound, &mut out),
        other => {
            return Err(fail(format!("unsupported compression {other:?}")).into());
        }
    };
    read.map_err(|e| fail(format!("cannot decompress ({:?}): {e}", compressed.format)))?;
    if out.len() as u64 != claimed {
        let got = if out.len() as u64 > claimed {
            format!("more than {claimed}")
        } else {
            out.len().to_string()
        };
        return Err(fail(format!(
            "its {:?} stream decompresses to {got} bytes, but its header claims {claimed}",
            compressed.format
        ))
        .into());
    }
    *used += claimed;
    Ok(Cow::Owned(out))
}

/// Decompresses the zstd frames of `input` (skippable frames skipped) into
/// `out`, at most `bound` bytes in all.
fn zstd_frames(mut input: &[u8], bound: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
    use ruzstd::frame::ReadFrameHeaderError;
    use ruzstd::frame_decoder::FrameDecoderError;
    let invalid = |e: &dyn core::fmt::Display| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
    };
    while !input.is_empty() && (out.len() as u64) < bound {
        let decoder = match ruzstd::StreamingDecoder::new(&mut input) {
            Ok(decoder) => decoder,
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                input = usize::try_from(length)
                    .ok()
                    .and_then(|n| input.get(n..))
                    .ok_or_else(|| invalid(&"a skippable frame past the end"))?;
                continue;
            }
            Err(e) => return Err(invalid(&e)),
        };
        let left = bound - out.len() as u64;
        decoder.take(left).read_to_end(out)?;
    }
    Ok(())
}

/// Applies a relocatable object's relocations to one of its DWARF sections
/// (`bytes`, decompressed), as llvm-dwarfdump does: every section at address
/// 0, so the DWARF's code addresses are offsets in the object's one code
/// section, and its offsets into other DWARF sections are what the linker
/// would write. Only absolute relocations of 4 or 8 bytes are what producers
/// write in DWARF (x86-64 `R_X86_64_32`/`64`, AArch64 `ABS32`/`ABS64`); any
/// other, one past the section's end or a value that does not fit is an error.
pub(crate) fn relocate(
    file: &object::File<'_>,
    section: &object::Section<'_, '_>,
    name: &str,
    bytes: &mut Cow<'_, [u8]>,
) -> Result<(), Error> {
    use object::{Object as _, ObjectSymbol as _, RelocationKind, RelocationTarget};
    for (offset, r) in section.relocations() {
        let fail = |what: String| ErrorDetail::Object {
            what: format!("section {name}, relocation at offset {offset:#x}: {what}"),
        };
        let size = usize::from(r.size() / 8);
        if r.kind() != RelocationKind::Absolute || !matches!(size, 4 | 8) {
            return Err(fail(format!(
                "unsupported relocation {:?} of {} bits in DWARF",
                r.flags(),
                r.size()
            ))
            .into());
        }
        let target = match r.target() {
            RelocationTarget::Symbol(i) => file
                .symbol_by_index(i)
                .map(|s| s.address())
                .map_err(|e| fail(e.to_string()))?,
            RelocationTarget::Section(_) => 0,
            other => return Err(fail(format!("unsupported target {other:?}")).into()),
        };
        let at = usize::try_from(offset)
            .ok()
            .filter(|&at| at.checked_add(size).is_some_and(|end| end <= bytes.len()))
            .ok_or_else(|| fail(format!("past the section's end ({} bytes)", bytes.len())))?;
        let field = &mut bytes.to_mut()[at..at + size];
        let mut old = [0u8; 8];
        old[..size].copy_from_slice(field);
        let implicit = if r.has_implicit_addend() {
            u64::from_le_bytes(old)
        } else {
            0
        };
        let value = target
            .wrapping_add(r.addend() as u64)
            .wrapping_add(implicit);
        if size == 4 && u32::try_from(value).is_err() {
            return Err(fail(format!("the value {value:#x} does not fit 32 bits")).into());
        }
        field.copy_from_slice(&value.to_le_bytes()[..size]);
    }
    Ok(())
}
