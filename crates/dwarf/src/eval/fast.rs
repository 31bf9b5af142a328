//! The fast path: the common operations run straight from their bytes,
//! without building an [`Op`] (`fast_step`).

use super::*;

/// What a shortcut stands for: a whole expression of one of the shapes
/// optimized code emits most, evaluated (or asked for) without the loop.
#[derive(Clone, Copy)]
enum Short {
    /// A lone `DW_OP_regN` (`DW_OP_reg` for operations): the register.
    Register(u16),
    /// A constant (`DW_OP_litN`, `DW_OP_constu`, `DW_OP_consts`) then
    /// `DW_OP_stack_value`.
    Constant(u64),
    /// A lone `DW_OP_fbreg`: the request for the frame base.
    FrameBase(i64),
    /// `DW_OP_entry_value(DW_OP_regN)` then `DW_OP_stack_value`: the
    /// request for the entry value (the stack value runs after the answer).
    EntryRegister(u8),
}

impl<'a> Evaluation<'a> {
    /// The most common whole expressions of optimized code (most entries of
    /// a location list): a lone `DW_OP_regN`, a constant then
    /// `DW_OP_stack_value`, a lone `DW_OP_fbreg` and
    /// `DW_OP_entry_value(DW_OP_regN) DW_OP_stack_value`, a lone
    /// `DW_OP_implicit_value` and composites of registers and constants
    /// (`composite_shortcut`, from bytes), from bytes or decoded, evaluated
    /// without entering the loop up to the end or to their first request. For a fresh evaluation ([`Evaluation::new`],
    /// [`Evaluation::restart`]; nothing pushed,
    /// not run) without trace, with a valid encoding and room for the
    /// operations in the step limit; `None` (nothing done) otherwise.
    /// Leaves exactly the state the loop leaves after the same operations
    /// (steps counted, operation and byte positions, the result in `top` or
    /// the request's pending answer): the property tests compare them.
    #[inline(always)]
    pub(super) fn shortcut(&mut self) -> Option<EvaluationResult> {
        if !matches!(self.encoding.address_size, 4 | 8)
            | !matches!(self.encoding.offset_size, 4 | 8)
            | (self.max_steps < 2)
        {
            return None;
        }
        // The lone register first, written straight into `top` (through a
        // shared `Short` it was assembled on the machine stack and copied).
        if let Some(&[code @ 0x50..=0x6f]) = self.bytes {
            self.complete_with(
                LocationDescription::single(Storage::Register(u16::from(code - 0x50)), 0),
                1,
                1,
            );
            return Some(EvaluationResult::Complete);
        }
        let (short, ops) = match self.bytes {
            Some(bytes) => match bytes_shortcut(bytes) {
                Some(short) => short,
                // Only what may start a composite of registers and constants
                // (the call cost the other expressions).
                None if matches!(bytes.first(), Some(0x10 | 0x11 | 0x30..=0x6f)) => {
                    return self.composite_shortcut(bytes)
                }
                None => return self.implicit_value_shortcut(bytes),
            },
            None => match self.ops {
                // A lone DW_OP_implicit_value: its block.
                [Op::ImplicitValue(block)] => {
                    let implicit = Storage::Implicit(short_bytes(block.as_slice()));
                    self.complete_with(LocationDescription::single(implicit, 0), 1, 0);
                    return Some(EvaluationResult::Complete);
                }
                ops => match ops_shortcut(ops) {
                    Some(short) => short,
                    None if matches!(
                        ops,
                        [
                            Op::Reg(_) | Op::Lit(_) | Op::Constu(_) | Op::Consts(_),
                            _,
                            ..
                        ]
                    ) =>
                    {
                        return self.ops_composite_shortcut()
                    }
                    None => return None,
                },
            },
        };
        let len = self.bytes.map_or(0, <[u8]>::len);
        let a = self.address_size;
        match short {
            Short::Register(r) => {
                self.complete_with(
                    LocationDescription::single(Storage::Register(r), 0),
                    ops,
                    len,
                );
            }
            Short::Constant(n) => {
                let size = ValueType::Generic.size(a).min(8);
                let bits = Value::generic(n, a).bits;
                self.complete_with(
                    LocationDescription::single(Storage::Implicit(Bytes::from_le(bits, size)), 0),
                    ops,
                    len,
                );
            }
            Short::FrameBase(offset) => {
                // As the loop stops at its request: one step, the operation
                // not passed yet (from bytes, its end is the next one).
                self.fresh = false;
                self.steps = 1;
                self.next_byte = len;
                self.pending = Some(Pending::FrameBase { offset });
                return Some(EvaluationResult::RequiresFrameBase);
            }
            Short::EntryRegister(code) => {
                self.fresh = false;
                self.steps = 1;
                if self.bytes.is_some() {
                    // After the block: DW_OP_entry_value, its length, regN.
                    self.next_byte = 3;
                }
                self.pending = Some(Pending::EntryValue);
                self.entry_expression = Bytes::from_le(u64::from(code), 1);
                return Some(EvaluationResult::RequiresEntryValue {
                    register: Some(u16::from(code - 0x50)),
                });
            }
        }
        Some(EvaluationResult::Complete)
    }

    /// The composites of optimized code as a whole expression: pieces
    /// (`DW_OP_piece`) of registers (`DW_OP_regN`) and of constants
    /// (`DW_OP_litN`, `DW_OP_constu`, `DW_OP_consts` then
    /// `DW_OP_stack_value`), their parts written straight into the vector
    /// the result keeps, without the stack. Only where every check of the
    /// loop passes (no register sizes given, each part within its value and
    /// below the size that needs the composite's sum checked, at most 512
    /// parts, the step limit); `None` (nothing done) otherwise, the loop
    /// then runs. Leaves the loop's state (`shortcut`).
    #[inline(never)]
    fn composite_shortcut(&mut self, bytes: &[u8]) -> Option<EvaluationResult> {
        if !self.register_sizes().is_empty() {
            return None;
        }
        let a = self.address_size;
        let value_len = ValueType::Generic.size(a).min(8);
        let large = address_space_bits(a) >> LARGE_PART_SHIFT;
        // A new composite fills the vector a previous one left (as `piece`).
        let mut parts = core::mem::take(&mut self.parts);
        // Parts are read into `chunk` (register or value, bits: plain
        // integers) and moved into `parts` by `extend` a chunk at a time,
        // which writes each in place: building a part and then pushing it
        // wrote it in narrow stores that the push's wide loads could not be
        // forwarded from (a stall per part, not seen in instruction counts).
        let mut chunk = [(false, 0u64, 0u64); 8];
        let mut held = 0;
        let mut count = 0;
        let mut pos = 0;
        let mut ops = 0u64;
        let complete = loop {
            let Some(&code) = bytes.get(pos) else {
                // An empty expression is no composite.
                break count != 0;
            };
            let (register, v, bits) = match code {
                0x50..=0x6f => {
                    pos += 1;
                    ops += 1;
                    (true, u64::from(code - 0x50), u64::MAX)
                }
                0x30..=0x4f | 0x10 | 0x11 => {
                    let (n, next) = match code {
                        0x30..=0x4f => (i64::from(code - 0x30), pos + 1),
                        _ => match short_leb(bytes, pos + 1, code == 0x11) {
                            Some(n) => n,
                            None => break false,
                        },
                    };
                    if bytes.get(next) != Some(&0x9f) {
                        break false;
                    }
                    pos = next + 1;
                    ops += 2;
                    let value = Value::generic(n as u64, a).bits;
                    (false, value, u64::from(value_len) * 8)
                }
                _ => break false,
            };
            if bytes.get(pos) != Some(&0x93) {
                break false;
            }
            let Some((size, next)) = short_leb(bytes, pos + 1, false) else {
                break false;
            };
            pos = next;
            ops += 1;
            // Unsigned, below 2^63: the product is checked as `piece_bytes`
            // does, then the part's checks of `piece`.
            let Some(bit_size) = (size as u64).checked_mul(8) else {
                break false;
            };
            if bit_size > bits || u128::from(bit_size) > large || count >= 512 {
                break false;
            }
            if held == chunk.len() {
                extend_parts(&mut parts, &chunk, value_len);
                held = 0;
            }
            chunk[held] = (register, v, bit_size);
            held += 1;
            count += 1;
        };
        if complete {
            extend_parts(&mut parts, &chunk[..held], value_len);
        }
        if !complete || ops > self.max_steps {
            // The parts own nothing (registers, inline bytes).
            parts.clear();
            self.parts = parts;
            return None;
        }
        self.fresh = false;
        self.steps = ops;
        self.pc = ops as usize;
        self.byte_pc = bytes.len();
        self.next_byte = bytes.len();
        // `top` is empty (fresh): nothing to drop.
        core::mem::forget(
            self.top
                .replace(Entry::Location(LocationDescription::composite(parts))),
        );
        self.complete = true;
        Some(EvaluationResult::Complete)
    }

    /// `composite_shortcut` of decoded operations.
    #[inline(never)]
    fn ops_composite_shortcut(&mut self) -> Option<EvaluationResult> {
        if !self.register_sizes().is_empty() {
            return None;
        }
        let a = self.address_size;
        let value_len = ValueType::Generic.size(a).min(8);
        let large = address_space_bits(a) >> LARGE_PART_SHIFT;
        let mut parts = core::mem::take(&mut self.parts);
        // As in `composite_shortcut`: read into `chunk`, then `extend`.
        let mut chunk = [(false, 0u64, 0u64); 8];
        let mut held = 0;
        let mut count = 0;
        let mut rest = self.ops;
        let complete = loop {
            let (register, v, bits, after) = match rest {
                [] => break count != 0,
                [Op::Reg(r), after @ ..] => (true, u64::from(*r), u64::MAX, after),
                [c, Op::StackValue, after @ ..] => {
                    let n = match c {
                        Op::Lit(n) => u64::from(*n),
                        Op::Constu(v) => *v,
                        Op::Consts(v) => *v as u64,
                        _ => break false,
                    };
                    let value = Value::generic(n, a).bits;
                    (false, value, u64::from(value_len) * 8, after)
                }
                _ => break false,
            };
            let [Op::Piece(size), after @ ..] = after else {
                break false;
            };
            rest = after;
            let Some(bit_size) = size.checked_mul(8) else {
                break false;
            };
            if bit_size > bits || u128::from(bit_size) > large || count >= 512 {
                break false;
            }
            if held == chunk.len() {
                extend_parts(&mut parts, &chunk, value_len);
                held = 0;
            }
            chunk[held] = (register, v, bit_size);
            held += 1;
            count += 1;
        };
        if complete {
            extend_parts(&mut parts, &chunk[..held], value_len);
        }
        let ops = self.ops.len();
        if !complete || ops as u64 > self.max_steps {
            // The parts own nothing (registers, inline bytes).
            parts.clear();
            self.parts = parts;
            return None;
        }
        self.complete_with(LocationDescription::composite(parts), ops as u64, 0);
        Some(EvaluationResult::Complete)
    }

    /// A lone `DW_OP_implicit_value` (from bytes): its block is the
    /// result, as the loop leaves it; `None` (nothing done) for anything
    /// else.
    #[inline(always)]
    fn implicit_value_shortcut(&mut self, bytes: &[u8]) -> Option<EvaluationResult> {
        let [0x9e, ..] = bytes else {
            return None;
        };
        let (len, start) = short_leb(bytes, 1, false)?;
        let block = bytes.get(start..)?;
        if block.len() as u64 != len as u64 {
            return None;
        }
        self.complete_with(
            LocationDescription::single(Storage::Implicit(short_bytes(block)), 0),
            1,
            bytes.len(),
        );
        Some(EvaluationResult::Complete)
    }

    /// Ends a shortcut of `ops` operations (`len` bytes, 0 for decoded
    /// operations) with `top` as the result, as `finish` would.
    #[inline(always)]
    fn complete_with(&mut self, top: LocationDescription, ops: u64, len: usize) {
        self.fresh = false;
        self.steps = ops;
        self.pc = ops as usize;
        self.byte_pc = len;
        self.next_byte = len;
        // `top` is empty (fresh): nothing to drop.
        core::mem::forget(self.top.replace(Entry::Location(top)));
        self.complete = true;
    }

    /// The most common operations of compiled code, executed straight from
    /// the bytes without building an [`Op`]: `DW_OP_lit*`, `DW_OP_reg*`,
    /// `DW_OP_breg*`, `DW_OP_fbreg`, `DW_OP_stack_value`, `DW_OP_constu`,
    /// `DW_OP_consts`, `DW_OP_plus_uconst`, `DW_OP_piece`, `DW_OP_deref`,
    /// `DW_OP_implicit_value`, `DW_OP_entry_value` and the binary arithmetic
    /// operations. Exactly what [`Evaluation::step`] does for them; `None`
    /// for anything else (or an operand this shortcut does not read), which
    /// then takes the general path. Only for the root expression (not in a
    /// callee).
    #[inline(always)]
    pub(super) fn fast_step(&mut self, bytes: &[u8], code: u8) -> Option<Step> {
        let pos = self.byte_pc;
        let a = self.address_size;
        Some(match code {
            0x30..=0x4f => {
                self.next_byte = pos + 1;
                self.push_value(Value::generic(u64::from(code - 0x30), a));
                self.advance_root()
            }
            0x50..=0x6f => {
                self.next_byte = pos + 1;
                self.push_register(u16::from(code - 0x50));
                self.advance_root()
            }
            0x9f => {
                self.next_byte = pos + 1;
                match self.stack_value() {
                    Ok(()) => self.advance_root(),
                    Err(e) => Err(e.into()),
                }
            }
            0x06 => {
                self.next_byte = pos + 1;
                self.deref(a, ValueType::Generic)
            }
            0x10 | 0x11 | 0x23 | 0x93 => {
                let (n, next) = short_leb(bytes, pos + 1, code == 0x11)?;
                self.next_byte = next;
                let r = match code {
                    0x10 | 0x11 => {
                        self.push_value(Value::generic(n as u64, a));
                        Ok(())
                    }
                    0x23 => self.plus_uconst(n as u64),
                    _ => self.piece_bytes(n as u64),
                };
                match r {
                    Ok(()) => self.advance_root(),
                    Err(e) => Err(e.into()),
                }
            }
            0x1a..=0x1e | 0x21 | 0x22 | 0x24..=0x27 => {
                self.next_byte = pos + 1;
                let op = match code {
                    0x1a => BinaryOp::And,
                    0x1b => BinaryOp::Div,
                    0x1c => BinaryOp::Minus,
                    0x1d => BinaryOp::Mod,
                    0x1e => BinaryOp::Mul,
                    0x21 => BinaryOp::Or,
                    0x22 => BinaryOp::Plus,
                    0x24 => BinaryOp::Shl,
                    0x25 => BinaryOp::Shr,
                    0x26 => BinaryOp::Shra,
                    _ => BinaryOp::Xor,
                };
                match self.binary(op) {
                    Ok(()) => self.advance_root(),
                    Err(e) => Err(e.into()),
                }
            }
            0x70..=0x8f | 0x91 => {
                let (offset, next) = short_leb(bytes, pos + 1, true)?;
                self.next_byte = next;
                if code == 0x91 {
                    self.request(
                        Pending::FrameBase { offset },
                        EvaluationResult::RequiresFrameBase,
                    )
                } else {
                    self.request(
                        Pending::Breg {
                            offset,
                            address_space: None,
                        },
                        EvaluationResult::RequiresRegister {
                            register: u16::from(code - 0x70),
                        },
                    )
                }
            }
            0x9e => {
                // DW_OP_implicit_value: short blocks are stored inline.
                let (len, start) = short_leb(bytes, pos + 1, false)?;
                let end = start.checked_add(usize::try_from(len).ok()?)?;
                let block = bytes.get(start..end)?;
                self.next_byte = end;
                self.push_loc(LocationDescription::single(
                    Storage::Implicit(short_bytes(block)),
                    0,
                ));
                self.advance_root()
            }
            0xa3 => {
                // DW_OP_entry_value: the block is copied into the request
                // (inline if short).
                let (len, start) = short_leb(bytes, pos + 1, false)?;
                let end = start.checked_add(usize::try_from(len).ok()?)?;
                let block = bytes.get(start..end)?;
                self.next_byte = end;
                self.entry_value(short_bytes(block))
            }
            _ => return None,
        })
    }
}

/// Appends `composite_shortcut`'s parts: `(true, r, bits)` register `r`,
/// `(false, v, bits)` an implicit value's first `value_len` bytes.
#[inline(always)]
fn extend_parts(parts: &mut Vec<Part>, chunk: &[(bool, u64, u64)], value_len: u8) {
    if parts.capacity() == 0 {
        // A fresh evaluation's first parts: allocated directly, room for a
        // few more (`extend` would reserve through its growth path).
        *parts = Vec::with_capacity(chunk.len().max(4));
    }
    parts.extend(chunk.iter().map(|&(register, v, bit_size)| Part {
        location: LocationDescription::single(
            if register {
                Storage::Register(v as u16)
            } else {
                Storage::Implicit(Bytes::from_le(v, value_len))
            },
            0,
        ),
        bit_size,
    }));
}

/// `Bytes::from(block)`, built in registers when `block` has at most 8
/// bytes (a `DW_OP_implicit_value` of a scalar): `Bytes::from` fills its
/// array through memory, byte-wide stores that the wider loads moving the
/// result then could not be forwarded from (a stall per expression that
/// instruction counts do not show).
#[inline(always)]
pub(super) fn short_bytes(block: &[u8]) -> Bytes {
    if let Ok(b) = <[u8; 8]>::try_from(block) {
        return Bytes::from_le(u64::from_le_bytes(b), 8);
    }
    if block.len() < 8 {
        let mut v = 0u64;
        for (i, b) in block.iter().enumerate() {
            v |= u64::from(*b) << (8 * i);
        }
        return Bytes::from_le(v, block.len() as u8);
    }
    Bytes::from(block)
}

/// A LEB128 (signed or not) of at most 9 bytes (63 bits: it cannot
/// overflow) at `pos`, and the offset after it; `None` if longer or truncated
/// (the general decoder then reports or handles it). Unsigned values are
/// below 2^63, so they fit the `i64`.
#[inline(always)]
pub(super) fn short_leb(bytes: &[u8], pos: usize, signed: bool) -> Option<(i64, usize)> {
    // One byte, the usual case.
    let b = *bytes.get(pos)?;
    if b & 0x80 == 0 {
        let value = if signed && b & 0x40 != 0 {
            i64::from(b) - 0x80
        } else {
            i64::from(b)
        };
        return Some((value, pos + 1));
    }
    short_leb_long(bytes, pos, signed)
}

/// `short_leb` of two bytes or more.
#[inline(never)]
pub(super) fn short_leb_long(bytes: &[u8], pos: usize, signed: bool) -> Option<(i64, usize)> {
    let mut value = 0i64;
    for i in 0..9 {
        let b = *bytes.get(pos + i)?;
        value |= i64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let shift = 7 * (i + 1);
            if signed && shift < 64 && b & 0x40 != 0 {
                value |= -1i64 << shift;
            }
            return Some((value, pos + i + 1));
        }
    }
    None
}

/// The shortcut of `bytes` (see [`Evaluation::shortcut`]) and its number of
/// operations.
#[inline(always)]
fn bytes_shortcut(bytes: &[u8]) -> Option<(Short, u64)> {
    Some(match *bytes {
        [code @ 0x50..=0x6f] => (Short::Register(u16::from(code - 0x50)), 1),
        [code @ 0x30..=0x4f, 0x9f] => (Short::Constant(u64::from(code - 0x30)), 2),
        [code @ (0x10 | 0x11), .., 0x9f] => match short_leb(bytes, 1, code == 0x11) {
            Some((n, end)) if end + 1 == bytes.len() => (Short::Constant(n as u64), 2),
            _ => return None,
        },
        [0x91, ..] => match short_leb(bytes, 1, true) {
            Some((n, end)) if end == bytes.len() => (Short::FrameBase(n), 1),
            _ => return None,
        },
        [0xa3, 1, code @ 0x50..=0x6f, 0x9f] => (Short::EntryRegister(code), 2),
        _ => return None,
    })
}

/// The shortcut of decoded operations (see [`Evaluation::shortcut`]) and
/// their number.
#[inline(always)]
fn ops_shortcut(ops: &[Op]) -> Option<(Short, u64)> {
    Some(match ops {
        [Op::Reg(r)] => (Short::Register(u16::from(*r)), 1),
        [Op::Fbreg(offset)] => (Short::FrameBase(*offset), 1),
        [c, Op::StackValue] => match c {
            Op::Lit(n) => (Short::Constant(u64::from(*n)), 2),
            Op::Constu(v) => (Short::Constant(*v), 2),
            Op::Consts(v) => (Short::Constant(*v as u64), 2),
            Op::EntryValue(block) => match block.as_slice() {
                [code @ 0x50..=0x6f] => (Short::EntryRegister(*code), 2),
                _ => return None,
            },
            _ => return None,
        },
        _ => return None,
    })
}
