//! A structural check of bitcode before LLVM's reader sees it.
//!
//! LLVM's bitcode reader trusts parts of the bitstream it reads: skipping a record whose
//! abbreviation has its array operand last reads past the abbreviation's operand list, an
//! abbreviation with no operands is a fatal error, and so on. [`check`] walks the bitstream
//! first, as LLVM 19's reader will read it, and refuses, with the byte offset where the
//! walk stopped:
//!
//! - a wrapper header (`0x0B17C0DE`) whose bitcode offset and size are not inside the
//!   file; a missing magic number (`BC` `0xC0DE`); a size that is not a multiple of 4
//!   bytes (LLVM's own conditions);
//! - a block LLVM skips by its length (the module, its identification, blocks it does not
//!   know) whose length runs past the end; a module block whose `END_BLOCK` is not where
//!   its length says (LLVM would stop reading the module there, and then reach function
//!   bodies through offsets into a module it did not finish: a crash, sometimes); a block
//!   it reads whose abbreviation width is 0 or over 32 bits, or nested more than
//!   [`MAX_BLOCK_DEPTH`] deep;
//! - an abbreviation definition with no operands, an unknown encoding, or a fixed or VBR
//!   width over 32 bits;
//! - a record whose abbreviation ID is not defined in its block (nor by the `BLOCKINFO`
//!   block for its block ID), whose abbreviation starts with an array or a blob, has an
//!   array that is not second to last or whose elements are not a fixed, VBR or char6
//!   encoding, or whose array or blob runs past the end; a VBR value longer than LLVM reads
//!   (32 or 64 bits);
//! - in `BLOCKINFO`, an abbreviation before `SETBID`, or `SETBID` with no operand;
//! - a field cut short by the end of the bitstream.
//!
//! The walk follows LLVM's reader so as to refuse nothing LLVM's writer produces and
//! little else LLVM reads: it skips the blocks LLVM skips without looking inside; it goes
//! on after a block where LLVM does: at the end its length gives for the module and its
//! identification (skipped first, read later), after `END_BLOCK` for the others; function
//! bodies, which LLVM reaches through the offsets the value symbol table gives, are
//! followed only while their length agrees (else the walk stops there and accepts); at the
//! top level it stops, as LLVM does, when fewer than 9 bytes remain (the padding some
//! tools leave). Its time is linear in the size of the input. Damaged bitcode it refuses
//! is refused by LLVM too: by its reader, or, for bytes the reader happens never to read
//! (between function bodies it jumps over), by `llvm-bcanalyzer`'s walk of the bitstream.
//!
//! What this cannot check is the meaning of the records (type and value numbers, operand
//! counts of instructions): damage there still reaches LLVM's reader, which finds most of
//! it but not all.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// The deepest nesting of blocks accepted (LLVM's writer nests four: module, function,
/// constants or metadata, and none deeper).
pub const MAX_BLOCK_DEPTH: usize = 64;

/// Why [`check`] refused an input: what was wrong, and the byte offset in the input where
/// the walk found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitcodeError {
    /// Offset in bytes from the start of the input (the wrapper's, if there is one).
    pub offset: u64,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for BitcodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed bitcode at byte {}: {}",
            self.offset, self.message
        )
    }
}

impl std::error::Error for BitcodeError {}

/// The magic number of raw bitcode.
const MAGIC: [u8; 4] = [b'B', b'C', 0xc0, 0xde];
/// The wrapper header's magic, 0x0B17C0DE little-endian.
const WRAPPER_MAGIC: [u8; 4] = [0xde, 0xc0, 0x17, 0x0b];
/// The wrapper header: magic, version, offset, size, CPU type.
const WRAPPER_BYTES: usize = 20;

/// Whether `bytes` start as bitcode does (raw or wrapped), which is how LLVM tells
/// bitcode from IR text.
pub fn is_bitcode(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC) || bytes.starts_with(&WRAPPER_MAGIC)
}

/// Walks the bitstream of `bytes` (see the [module documentation](self)).
///
/// # Errors
///
/// A [`BitcodeError`] naming the byte offset and the fault when the input is not
/// well-formed bitcode; `Ok` does not promise that LLVM will accept its records.
pub fn check(bytes: &[u8]) -> Result<(), BitcodeError> {
    let fail = |offset: usize, message: String| BitcodeError {
        offset: offset as u64,
        message,
    };
    if !bytes.len().is_multiple_of(4) {
        return Err(fail(
            bytes.len(),
            format!("size {} is not a multiple of 4 bytes", bytes.len()),
        ));
    }
    let (start, stream) = if bytes.starts_with(&WRAPPER_MAGIC) {
        // LLVM needs the offset and size fields (16 bytes); the CPU type it does not read.
        let field = |at: usize| -> Result<usize, BitcodeError> {
            bytes
                .get(at..at + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(|b| u32::from_le_bytes(b) as usize)
                .ok_or_else(|| {
                    fail(
                        bytes.len(),
                        format!(
                            "the wrapper header is cut short ({} bytes of {WRAPPER_BYTES})",
                            bytes.len()
                        ),
                    )
                })
        };
        let (offset, size) = (field(8)?, field(12)?);
        match offset.checked_add(size) {
            Some(end) if end <= bytes.len() => (offset, &bytes[offset..end]),
            _ => {
                return Err(fail(
                    8,
                    format!(
                        "the wrapper header puts the bitcode at offset {offset}, size {size}, \
                         past the end of the {}-byte input",
                        bytes.len()
                    ),
                ))
            }
        }
    } else {
        (0, bytes)
    };
    if !stream.starts_with(&MAGIC) {
        return Err(fail(start, "no bitcode magic number ('BC' 0xC0DE)".into()));
    }
    Walk::new(stream)
        .run()
        .map_err(|(bit, message)| BitcodeError {
            offset: start as u64 + bit / 8,
            message,
        })
}

/// An abbreviation operand, as LLVM reads its definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Literal(u64),
    Fixed(u32),
    Vbr(u32),
    Array,
    Char6,
    Blob,
}

type Abbrev = Rc<[Op]>;

/// Abbreviations by block ID, as a `BLOCKINFO` block defines them.
type BlockInfo = HashMap<u32, Vec<Abbrev>>;

/// One open block.
struct Scope {
    id: u32,
    /// The abbreviation ID width.
    width: u32,
    /// Where the block ends by its length (a bit position).
    end: u64,
    /// Where LLVM goes on after the block.
    then: Then,
    /// Abbreviations from the `BLOCKINFO` block for this ID when the block was entered.
    inherited: Rc<Vec<Abbrev>>,
    /// Abbreviations defined in the block.
    own: Vec<Abbrev>,
    /// In a `BLOCKINFO` block: the abbreviations being defined, by block ID, and the
    /// block ID of `SETBID`.
    info: Option<(BlockInfo, Option<u32>)>,
}

/// The top level's pseudo block ID.
const TOP: u32 = u32::MAX;
const BLOCKINFO: u32 = 0;
const MODULE: u32 = 8;
const FUNCTION: u32 = 12;

/// Where LLVM's reader goes on after a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    /// LLVM never reads the block: it skips it by its length (which must fit).
    Skip,
    /// It skips the block by its length first (which must fit) and reads it later: what
    /// follows starts where the length says.
    AtLength,
    /// It reads the block in turn: what follows starts after its `END_BLOCK`.
    AfterEnd,
    /// A function body: LLVM reaches each through the offsets of the value symbol table,
    /// and the next one at its offset, skipping some by their length. Where the length
    /// and `END_BLOCK` disagree, the walk cannot tell where LLVM goes on, and stops
    /// (accepting the rest).
    Function,
}

/// How LLVM 19's reader (`BitcodeReader.cpp`) treats block `block` inside block `parent`.
fn reading(parent: u32, block: u32) -> Then {
    match (parent, block) {
        // Identification and module: skipped, read later; string and symbol tables: read.
        (TOP, 13 | MODULE) => Then::AtLength,
        (TOP, 23 | 25) => Then::AfterEnd,
        // BLOCKINFO, attributes, attribute groups, constants, value symbol table, metadata,
        // types, use lists, operand bundle tags, metadata kinds, sync scope names.
        (MODULE, FUNCTION) => Then::Function,
        (MODULE, BLOCKINFO | 9 | 10 | 11 | 14 | 15 | 17 | 18 | 21 | 22 | 26) => Then::AfterEnd,
        // Constants, value symbol table, metadata, metadata attachments, use lists.
        (FUNCTION, 11 | 14 | 15 | 16 | 18) => Then::AfterEnd,
        _ => Then::Skip,
    }
}

/// The walk's error: the bit position and what is wrong.
type Fault = (u64, String);

struct Walk<'a> {
    bytes: &'a [u8],
    /// The next bit to read.
    bit: u64,
    /// The end of the bitstream (a bit position).
    limit: u64,
    /// The last `BLOCKINFO` block's abbreviations, by block ID.
    blockinfo: HashMap<u32, Rc<Vec<Abbrev>>>,
}

impl<'a> Walk<'a> {
    fn new(bytes: &'a [u8]) -> Walk<'a> {
        Walk {
            bytes,
            bit: 32, // past the magic number
            limit: bytes.len() as u64 * 8,
            blockinfo: HashMap::new(),
        }
    }

    fn fault<T>(&self, message: impl Into<String>) -> Result<T, Fault> {
        Err((self.bit, message.into()))
    }

    /// Reads `n` (at most 64) bits, least significant first.
    fn read(&mut self, n: u32) -> Result<u64, Fault> {
        if u64::from(n) > self.limit.saturating_sub(self.bit) {
            return self.fault("the bitstream ends inside a field");
        }
        let mut value = 0u64;
        let mut got = 0;
        while got < n {
            let byte = self.bytes[(self.bit / 8) as usize];
            let shift = (self.bit % 8) as u32;
            let take = (8 - shift).min(n - got);
            let bits = (u64::from(byte) >> shift) & ((1u64 << take) - 1);
            value |= bits << got;
            got += take;
            self.bit += u64::from(take);
        }
        Ok(value)
    }

    /// Reads a VBR field of chunk `width` as LLVM does: 32-bit values for the stream's own
    /// fields (`max_bits` 32), 64-bit ones for record operands.
    fn vbr(&mut self, width: u32, max_bits: u32) -> Result<u64, Fault> {
        let at = self.bit;
        let high = 1u64 << (width - 1);
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let piece = self.read(width)?;
            if shift < 64 {
                value |= (piece & (high - 1)) << shift;
            }
            if piece & high == 0 {
                // LLVM keeps a 32-bit field's value in 32 bits.
                return Ok(if max_bits == 32 {
                    value & u64::from(u32::MAX)
                } else {
                    value
                });
            }
            shift += width - 1;
            // A chunk of one bit carries no data: LLVM reads on until a 0 or the end.
            if width > 1 && shift >= max_bits {
                return Err((
                    at,
                    format!("a VBR{width} value longer than {max_bits} bits"),
                ));
            }
        }
    }

    fn align32(&mut self) -> Result<(), Fault> {
        let aligned = self.bit.div_ceil(32) * 32;
        if aligned > self.limit {
            return self.fault("the bitstream ends before a 32-bit boundary");
        }
        self.bit = aligned;
        Ok(())
    }

    fn run(mut self) -> Result<(), Fault> {
        let len_bits = self.bytes.len() as u64 * 8;
        self.limit = len_bits;
        let mut scopes: Vec<Scope> = Vec::new();
        // The top level: abbreviation IDs of 2 bits and no abbreviations but those
        // defined there.
        let mut top = Scope {
            id: TOP,
            width: 2,
            end: len_bits,
            then: Then::AfterEnd,
            inherited: Rc::new(Vec::new()),
            own: Vec::new(),
            info: None,
        };
        loop {
            if scopes.is_empty() && (self.bit / 8) + 8 >= self.bytes.len() as u64 {
                return Ok(()); // LLVM's reader stops here too: padding may follow
            }
            let scope = scopes.last_mut().unwrap_or(&mut top);
            let (width, parent) = (scope.width, scope.id);
            let at = self.bit;
            let id = self.read(width)?;
            match id {
                0 => {
                    // END_BLOCK
                    let Some(done) = scopes.pop() else {
                        return Err((at, "END_BLOCK outside any block".into()));
                    };
                    self.align32()?;
                    match done.then {
                        // LLVM's reader stops reading the module at its END_BLOCK, and
                        // what the length says is left over (function bodies, typically)
                        // it then reaches through offsets into a module it did not finish.
                        Then::AtLength if done.id == MODULE && self.bit != done.end => {
                            return Err((
                                at,
                                format!(
                                    "the module block ends at byte {}, but its length says byte {}",
                                    self.bit / 8,
                                    done.end / 8
                                ),
                            ));
                        }
                        Then::AtLength => self.bit = done.end,
                        Then::Function if self.bit != done.end => return Ok(()),
                        _ => {}
                    }
                    if let Some((info, _)) = done.info {
                        // A BLOCKINFO block replaces the one before, as in LLVM's reader.
                        self.blockinfo = info.into_iter().map(|(k, v)| (k, Rc::new(v))).collect();
                    }
                }
                1 => {
                    // ENTER_SUBBLOCK
                    let block = self.vbr(8, 32)? as u32;
                    let code_width = self.vbr(4, 32)?;
                    self.align32()?;
                    let words = self.read(32)?;
                    let block_end = self.bit + words * 32;
                    let then = reading(parent, block);
                    if matches!(then, Then::Skip | Then::AtLength) && block_end > len_bits {
                        // LLVM skips this block by its length first: it must fit.
                        return Err((
                            at,
                            format!(
                                "block {block} of {words} words runs past the end of the \
                                 bitstream (byte {})",
                                len_bits / 8
                            ),
                        ));
                    }
                    if then == Then::Skip {
                        // Never read by LLVM: skipped by its length, contents unchecked.
                        self.bit = block_end;
                        continue;
                    }
                    if code_width == 0 || code_width > 32 {
                        return Err((
                            at,
                            format!(
                                "block {block}: abbreviation width {code_width} (LLVM reads 1 \
                                 to 32)"
                            ),
                        ));
                    }
                    if scopes.len() >= MAX_BLOCK_DEPTH {
                        return Err((
                            at,
                            format!("blocks nested more than {MAX_BLOCK_DEPTH} deep"),
                        ));
                    }
                    scopes.push(Scope {
                        id: block,
                        width: code_width as u32,
                        end: block_end,
                        then,
                        inherited: self.blockinfo.get(&block).cloned().unwrap_or_default(),
                        own: Vec::new(),
                        info: (block == BLOCKINFO).then(|| (HashMap::new(), None)),
                    });
                }
                2 => {
                    // DEFINE_ABBREV
                    let abbrev = self.define_abbrev(at)?;
                    let scope = scopes.last_mut().unwrap_or(&mut top);
                    match &mut scope.info {
                        Some((info, Some(bid))) => info.entry(*bid).or_default().push(abbrev),
                        Some((_, None)) => {
                            return Err((at, "BLOCKINFO: an abbreviation before SETBID".into()))
                        }
                        None => scope.own.push(abbrev),
                    }
                }
                _ => {
                    let (code, first) = if id == 3 {
                        self.unabbreviated()?
                    } else {
                        let scope = scopes.last().unwrap_or(&top);
                        let index = (id - 4) as usize;
                        let abbrev = scope
                            .inherited
                            .get(index)
                            .or_else(|| scope.own.get(index.wrapping_sub(scope.inherited.len())))
                            .cloned();
                        let Some(abbrev) = abbrev else {
                            return Err((
                                at,
                                format!(
                                    "abbreviation ID {id} is not defined in block {}",
                                    scope.id
                                ),
                            ));
                        };
                        self.abbreviated(at, &abbrev)?
                    };
                    if let Some(Scope {
                        info: Some((_, bid)),
                        ..
                    }) = scopes.last_mut()
                    {
                        if code == 1 {
                            // SETBID
                            let Some(value) = first else {
                                return Err((at, "BLOCKINFO: SETBID with no block ID".into()));
                            };
                            *bid = Some(value as u32);
                        }
                    }
                }
            }
        }
    }

    /// Reads a DEFINE_ABBREV's operands (after its ID).
    fn define_abbrev(&mut self, at: u64) -> Result<Abbrev, Fault> {
        let count = self.vbr(5, 32)?;
        if count == 0 {
            return Err((at, "an abbreviation with no operands".into()));
        }
        let mut ops = Vec::new();
        for _ in 0..count {
            // Each operand takes at least 4 bits, so a count past the block ends here.
            if self.read(1)? == 1 {
                ops.push(Op::Literal(self.vbr(8, 64)?));
                continue;
            }
            let encoding_at = self.bit;
            let op = match self.read(3)? {
                kind @ (1 | 2) => {
                    let data = self.vbr(5, 64)?;
                    if data > 32 {
                        return Err((
                            encoding_at,
                            format!(
                                "an abbreviation operand {data} bits wide (LLVM reads at most 32)"
                            ),
                        ));
                    }
                    match (kind, data as u32) {
                        (_, 0) => Op::Literal(0), // as LLVM reads it
                        (1, d) => Op::Fixed(d),
                        (_, d) => Op::Vbr(d),
                    }
                }
                3 => Op::Array,
                4 => Op::Char6,
                5 => Op::Blob,
                e => {
                    return Err((
                        encoding_at,
                        format!("abbreviation operand encoding {e} is not one of 1-5"),
                    ))
                }
            };
            ops.push(op);
        }
        Ok(ops.into())
    }

    /// Reads an UNABBREV_RECORD (after its ID): its code and first operand.
    fn unabbreviated(&mut self) -> Result<(u64, Option<u64>), Fault> {
        let code = self.vbr(6, 32)?;
        let count = self.vbr(6, 32)?;
        let mut first = None;
        for i in 0..count {
            let v = self.vbr(6, 64)?;
            if i == 0 {
                first = Some(v);
            }
        }
        Ok((code, first))
    }

    /// Reads a scalar operand.
    fn scalar(&mut self, op: Op) -> Result<u64, Fault> {
        match op {
            Op::Literal(v) => Ok(v),
            Op::Fixed(w) => self.read(w),
            Op::Vbr(w) => self.vbr(w, 64),
            Op::Char6 => self.read(6),
            Op::Array | Op::Blob => self.fault("an array or blob where a scalar is expected"),
        }
    }

    /// Reads a record with abbreviation `abbrev`, as LLVM's `readRecord` does: its code
    /// and first operand.
    fn abbreviated(&mut self, at: u64, abbrev: &[Op]) -> Result<(u64, Option<u64>), Fault> {
        let Some((&code_op, rest)) = abbrev.split_first() else {
            return Err((at, "an abbreviation with no operands".into()));
        };
        if matches!(code_op, Op::Array | Op::Blob) {
            return Err((at, "the abbreviation starts with an array or a blob".into()));
        }
        // LLVM keeps the code as a 32-bit number.
        let code = self.scalar(code_op)? & u64::from(u32::MAX);
        let mut first = None;
        let mut i = 0;
        while i < rest.len() {
            let op = rest[i];
            i += 1;
            match op {
                Op::Array => {
                    let count = self.vbr(6, 32)?;
                    if i + 1 != rest.len() {
                        return Err((
                            at,
                            "the abbreviation's array is not its second-to-last operand".into(),
                        ));
                    }
                    let element = rest[i];
                    i += 1;
                    let bits =
                        match element {
                            Op::Fixed(w) => u64::from(w),
                            Op::Char6 => 6,
                            Op::Vbr(w) => u64::from(w),
                            Op::Literal(_) | Op::Array | Op::Blob => return Err((
                                at,
                                "the abbreviation's array elements are not a fixed, VBR or char6 \
                                 encoding"
                                    .into(),
                            )),
                        };
                    if count.saturating_mul(bits) > self.limit.saturating_sub(self.bit) {
                        return self.fault(format!(
                            "an array of {count} elements runs past the end of the bitstream"
                        ));
                    }
                    for k in 0..count {
                        let v = self.scalar(element)?;
                        if k == 0 && first.is_none() {
                            first = Some(v);
                        }
                    }
                }
                Op::Blob => {
                    let len = self.vbr(6, 32)?;
                    self.align32()?;
                    let bytes = len.div_ceil(4) * 4;
                    if bytes * 8 > self.limit.saturating_sub(self.bit) {
                        return self.fault(format!(
                            "a blob of {len} bytes runs past the end of the bitstream"
                        ));
                    }
                    if first.is_none() && len > 0 {
                        first = Some(u64::from(self.bytes[(self.bit / 8) as usize]));
                    }
                    self.bit += bytes * 8;
                }
                scalar => {
                    let v = self.scalar(scalar)?;
                    if first.is_none() {
                        first = Some(v);
                    }
                }
            }
        }
        Ok((code, first))
    }
}
