//! The fast path: the common operations run straight from their bytes,
//! without building an [`Op`] (`fast_step`).

use super::*;

impl<'a> Evaluation<'a> {
    /// The two most common location expressions of optimized code (most
    /// entries of a location list), evaluated without entering the loop: a
    /// lone `DW_OP_regN`, and a constant (`DW_OP_litN`, `DW_OP_constu`,
    /// `DW_OP_consts`) then `DW_OP_stack_value`. Exactly the state
    /// `run_bytes` leaves after them (each operation counted against the step
    /// limit, the result in `top`), for an evaluation that has not started,
    /// with an empty stack, no trace and a valid encoding; `false` (nothing
    /// done) otherwise.
    #[inline(always)]
    pub(super) fn constant_shortcut(&mut self) -> bool {
        let Some(bytes) = self.bytes else {
            return false;
        };
        let top = match *bytes {
            [code @ 0x50..=0x6f] => {
                LocationDescription::single(Storage::Register(u16::from(code - 0x50)), 0)
            }
            [code @ (0x30..=0x4f | 0x10 | 0x11), .., 0x9f] => {
                let n = match code {
                    0x30..=0x4f if bytes.len() == 2 => u64::from(code - 0x30),
                    0x10 | 0x11 => match short_leb(bytes, 1, code == 0x11) {
                        Some((n, end)) if end + 1 == bytes.len() => n as u64,
                        _ => return false,
                    },
                    _ => return false,
                };
                let a = self.address_size;
                let len = ValueType::Generic.size(a).min(8);
                let bits = Value::generic(n, a).bits;
                LocationDescription::single(Storage::Implicit(Bytes::from_le(bits, len)), 0)
            }
            _ => return false,
        };
        let steps = if bytes.len() == 1 { 1 } else { 2 };
        if !self.may_shortcut(steps) {
            return false;
        }
        self.steps += steps;
        self.pc = steps as usize;
        self.byte_pc = bytes.len();
        self.next_byte = bytes.len();
        // `top` is empty (checked): nothing to drop.
        core::mem::forget(self.top.replace(Entry::Location(top)));
        self.complete = true;
        true
    }

    /// `constant_shortcut` for decoded operations ([`Evaluation::new`]): a
    /// lone `DW_OP_regN`, or a constant then `DW_OP_stack_value`, evaluated
    /// without entering the loop, leaving exactly the state `run_general`
    /// leaves after them; `false` (nothing done) otherwise. Without it a
    /// fresh evaluation of these (most of a location list's entries)
    /// allocated its stack for one entry.
    #[inline(always)]
    pub(super) fn ops_shortcut(&mut self) -> bool {
        let a = self.address_size;
        let top = match self.ops {
            [Op::Reg(r)] => LocationDescription::single(Storage::Register(u16::from(*r)), 0),
            [c, Op::StackValue] => {
                let n = match c {
                    Op::Lit(n) => u64::from(*n),
                    Op::Constu(v) => *v,
                    Op::Consts(v) => *v as u64,
                    _ => return false,
                };
                let len = ValueType::Generic.size(a).min(8);
                let bits = Value::generic(n, a).bits;
                LocationDescription::single(Storage::Implicit(Bytes::from_le(bits, len)), 0)
            }
            _ => return false,
        };
        let steps = self.ops.len() as u64;
        if self.bytes.is_some() || self.pc != 0 || !self.may_shortcut(steps) {
            return false;
        }
        self.steps += steps;
        self.pc = self.ops.len();
        // `top` is empty (checked): nothing to drop.
        core::mem::forget(self.top.replace(Entry::Location(top)));
        self.complete = true;
        true
    }

    /// Whether a shortcut of `steps` operations may stand for the loop: the
    /// evaluation has not started, its stack is empty, it is not traced, the
    /// step limit leaves room for `steps` and the encoding is valid.
    #[inline(always)]
    fn may_shortcut(&self, steps: u64) -> bool {
        !((self.byte_pc != 0)
            | self.complete
            | self.trace
            | self.callee.is_some()
            | !self.stack.is_empty()
            | self.top.is_some()
            | (self.max_steps.saturating_sub(self.steps) < steps)
            | !matches!(self.encoding.address_size, 4 | 8)
            | !matches!(self.encoding.offset_size, 4 | 8))
    }

    /// The most common location expression of optimized code, a lone
    /// `DW_OP_regN` (most entries of a location list), evaluated without
    /// entering the loop: exactly the state `run_bytes` leaves after it
    /// (one step counted, the register location as the result), for an
    /// evaluation that has not started, with an empty stack, no trace and a
    /// valid encoding; `false` (nothing done) otherwise.
    #[inline(always)]
    pub(super) fn lone_register(&mut self) -> bool {
        let Some(&[code @ 0x50..=0x6f]) = self.bytes else {
            return false;
        };
        if !self.may_shortcut(1) {
            return false;
        }
        self.steps += 1;
        self.pc = 1;
        self.byte_pc = 1;
        self.next_byte = 1;
        // `top` is empty (checked): nothing to drop.
        core::mem::forget(
            self.top
                .replace(Entry::Location(LocationDescription::single(
                    Storage::Register(u16::from(code - 0x50)),
                    0,
                ))),
        );
        self.complete = true;
        true
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
                    Storage::Implicit(Bytes::from(block)),
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
                self.entry_value(Bytes::from(block))
            }
            _ => return None,
        })
    }
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
