//! Jump tables: where a `br` that dispatches through a table goes. LLVM 19's AArch64
//! backend lowers a `switch` to a table of 1-, 2- or 4-byte entries (`ldrb`, `ldrh`,
//! `ldrsw` at the table's address plus the index), each the distance of a case block from
//! a base label (`adr`), in instructions for the narrow entries (`add x, base, entry, lsl
//! #2`) and in bytes for the 4-byte ones; the table's address comes from `adrp`+`add`
//! (small code model), `adr` (tiny) or `movz`/`movk` (large). The index is bounded by a
//! compare and an unsigned branch before the dispatch (`cmp wI, #n; b.hi default`, or
//! `b.ls`/`b.lo` to it), or by a mask (`and wI, wJ, #(2^k - 1)`); unoptimized code keeps
//! it in a stack slot between the two.
//!
//! A dispatch is decoded only when every part is found in the straight-line code before
//! the `br` that no other branch enters, and every entry lands on an instruction of the
//! function: otherwise [`targets`] says `None`, and the audit treats the `br` as an
//! indirect tail call.

use std::collections::HashMap;

use crate::a64::{self, cond, Op, TablePart};
use crate::objfile::Instruction;

/// The most entries the tables of a function may have in all, for each of its
/// instructions (LLVM's tables are at least 10% dense, and a case is at least one
/// instruction), plus a constant: hostile input cannot make the reading quadratic.
pub const ENTRIES_PER_INSTRUCTION: u64 = 16;
/// The most instructions searched back from the `br` for each part.
const WINDOW: usize = 64;

/// Where the table is: the instruction a relocation would name it at (the `adrp`, `adr`
/// or `movz`), and the address the instructions compute (for a linked file; the
/// function's own address added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableAddress {
    /// The index of the instruction that starts the address.
    pub at: usize,
    /// The address the instructions compute.
    pub value: u64,
}

fn writes(word: u32, r: u8) -> bool {
    a64::written(word).iter().any(|x| x == r)
}

/// The branches inside the function, by target (instruction indices): for the check
/// that no other path enters a dispatch.
#[must_use]
pub fn branch_targets(insts: &[Instruction]) -> HashMap<usize, Vec<usize>> {
    let mut out: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, x) in insts.iter().enumerate() {
        let Some(off) = x.op.branch_offset() else {
            continue;
        };
        let Some(to) = x.offset.checked_add_signed(off) else {
            continue;
        };
        match usize::try_from(to / 4) {
            Ok(k) if to % 4 == 0 && k < insts.len() => out.entry(k).or_default().push(i),
            _ => {}
        }
    }
    out
}

/// The straight-line code before instruction `end`: its first index (after the nearest
/// branch, or `WINDOW` back).
fn line_start(insts: &[Instruction], end: usize) -> usize {
    let lo = end.saturating_sub(WINDOW);
    (lo..end)
        .rev()
        .find(|&k| insts[k].op.is_branch())
        .map_or(lo, |k| k + 1)
}

/// The nearest instruction in `lo..end` that writes register `r`, if no branch target
/// lies between it and `end`.
fn writer(
    insts: &[Instruction],
    entered: &HashMap<usize, Vec<usize>>,
    lo: usize,
    end: usize,
    r: u8,
) -> Option<usize> {
    let k = (lo..end).rev().find(|&k| writes(insts[k].word, r))?;
    (k + 1..end).all(|j| !entered.contains_key(&j)).then_some(k)
}

/// The targets (byte offsets in the function, in table order, repeated as the table
/// repeats them) of the `br` at index `br`, when it is a jump-table dispatch: `table`
/// gives the bytes from the table's start to the end of its section (or `None`), `pc` is
/// the function's address (for `adrp`'s page), and a table of more than `max_entries`
/// entries is not read.
#[must_use]
pub fn targets<'d>(
    insts: &[Instruction],
    entered: &HashMap<usize, Vec<usize>>,
    br: usize,
    pc: u64,
    table: &dyn Fn(TableAddress) -> Option<&'d [u8]>,
    max_entries: u64,
) -> Option<Vec<u64>> {
    let Op::Br(dest) = insts.get(br)?.op else {
        return None;
    };
    let lo = line_start(insts, br);
    let part = |k: usize| a64::table_part(insts[k].word);
    // br xD, where xD = xA + (entry << shift) and xA = adr base.
    let sum_at = writer(insts, entered, lo, br, dest)?;
    let Some(TablePart::AddShifted { rn, rm, shift, .. }) = part(sum_at) else {
        return None;
    };
    let base_at = writer(insts, entered, lo, sum_at, rn)?;
    let Some(TablePart::Adr { offset, .. }) = part(base_at) else {
        return None;
    };
    let base = insts[base_at].offset.checked_add_signed(offset)?;
    let load_at = writer(insts, entered, lo, sum_at, rm)?;
    let Some(TablePart::LoadEntry {
        rn: table_reg,
        rm: index,
        size,
        scaled,
        ..
    }) = part(load_at)
    else {
        return None;
    };
    let entry_shift = match size {
        1 | 2 if shift == 2 => 2,
        4 if shift == 0 => 0,
        _ => return None,
    };
    if size > 1 && !scaled {
        return None;
    }
    let address = table_address(insts, entered, lo, load_at, table_reg, pc)?;
    let count = index_bound(insts, entered, load_at, index)?;
    if count == 0 || count > max_entries {
        return None;
    }
    let bytes = table(address)?;
    let len = usize::from(size);
    let mut out = Vec::new();
    for k in 0..usize::try_from(count).ok()? {
        let b = bytes.get(k * len..(k + 1) * len)?;
        let entry: i64 = match size {
            1 => i64::from(b[0]),
            2 => i64::from(u16::from_le_bytes([b[0], b[1]])),
            _ => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        };
        let to = base.checked_add_signed(entry.checked_mul(1 << entry_shift)?)?;
        let i = usize::try_from(to / 4).ok()?;
        if to % 4 != 0 || i >= insts.len() {
            return None;
        }
        out.push(to);
    }
    Some(out)
}

/// The table's address in register `r` at instruction `end`: `adrp`+`add`, `adr`, or
/// `movz`+`movk`s.
fn table_address(
    insts: &[Instruction],
    entered: &HashMap<usize, Vec<usize>>,
    lo: usize,
    end: usize,
    r: u8,
    pc: u64,
) -> Option<TableAddress> {
    let here = |k: usize| pc.wrapping_add(insts[k].offset);
    let at = writer(insts, entered, lo, end, r)?;
    match a64::table_part(insts[at].word)? {
        TablePart::Adr { offset, .. } => Some(TableAddress {
            at,
            value: here(at).wrapping_add_signed(offset),
        }),
        TablePart::AddImm { rn, imm, .. } if rn == r => {
            let page_at = writer(insts, entered, lo, at, r)?;
            let TablePart::Adrp { page, .. } = a64::table_part(insts[page_at].word)? else {
                return None;
            };
            let value = (here(page_at) & !0xfff)
                .wrapping_add_signed(page)
                .wrapping_add(imm);
            Some(TableAddress { at: page_at, value })
        }
        TablePart::Movk { .. } => {
            // movz then movks, each the nearest writer of the one after it; walking back,
            // the later ones' bits win.
            let mut k = at;
            let (mut value, mut known) = (0u64, 0u64);
            loop {
                match a64::table_part(insts[k].word)? {
                    TablePart::Movk { bits, shift, .. } => {
                        let mask = 0xffff_u64 << shift;
                        value |= bits & mask & !known;
                        known |= mask;
                        k = writer(insts, entered, lo, k, r)?;
                    }
                    TablePart::Movz { value: v, .. } => {
                        return Some(TableAddress {
                            at: k,
                            value: value | (v & !known),
                        });
                    }
                    _ => return None,
                }
            }
        }
        _ => None,
    }
}

/// What holds the index while walking back: a register, or a stack slot (base `sp` or
/// `x29`, byte offset) unoptimized code spilled it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Reg(u8),
    Slot(u8, i64),
}

/// How many entries the index held in `index` at instruction `load` may select: walking
/// back from the load through copies, spills and reloads to a mask of the index, or to
/// an unsigned compare with an immediate whose branch leaves the dispatch for larger
/// values (`b.hi`/`b.hs` falling through to it, `b.ls`/`b.lo` to it). The walk stays on
/// straight-line code no other branch enters.
fn index_bound(
    insts: &[Instruction],
    entered: &HashMap<usize, Vec<usize>>,
    load: usize,
    index: u8,
) -> Option<u64> {
    let mut holders = vec![Holder::Reg(index)];
    // The bounding branch's condition, once passed.
    let mut branch: Option<u8> = None;
    // The compare, once passed, when the register it tests is not yet known to hold the
    // index (unoptimized code compares before it reloads the spilled index): the register
    // and the bound.
    let mut pending: Option<(u8, u64)> = None;
    let mut k = load;
    for _ in 0..WINDOW {
        if let Some(sources) = entered.get(&k) {
            // Only the dispatch's own start may be entered, by the bounding branch
            // (`b.ls`/`b.lo` to it, the only branch there, no fall-through into it).
            if branch.is_some() {
                return None;
            }
            let from = insts.get(k.checked_sub(1)?)?;
            if !matches!(from.op, Op::B(_) | Op::Br(_) | Op::Ret(_)) {
                return None;
            }
            let &[j] = sources.as_slice() else {
                return None;
            };
            match insts[j].op {
                Op::BCond(c, _) if c == cond::LS || c == cond::LO => {
                    branch = Some(c);
                    k = j;
                    continue;
                }
                _ => return None,
            }
        }
        k = k.checked_sub(1)?;
        let x = &insts[k];
        if let Op::BCond(c, off) = x.op {
            // Falling through to the dispatch: a `b.hi`/`b.hs` elsewhere.
            let elsewhere = x.offset.checked_add_signed(off) != Some(x.offset + 4);
            if branch.is_some() || !elsewhere || (c != cond::HI && c != cond::HS) {
                return None;
            }
            branch = Some(c);
            continue;
        }
        if x.op.is_branch() {
            return None;
        }
        let before = step_back(&holders, x.word);
        if let Some((r, count)) = pending {
            if before.contains(&Holder::Reg(r)) {
                return Some(count);
            }
            if writes(x.word, r) {
                return None;
            }
        } else if let Some(c) = branch {
            if let Some(TablePart::CmpImm { rn, imm }) = a64::table_part(x.word) {
                let count = match c {
                    cond::HI | cond::LS => imm.checked_add(1)?,
                    _ => imm,
                };
                // The compare reads its register before it writes it.
                if before.contains(&Holder::Reg(rn)) {
                    return Some(count);
                }
                pending = Some((rn, count));
            } else if a64::may_set_flags(x.word) {
                return None;
            }
        }
        if let Some(TablePart::AndLowBits { rd, bits, .. }) = a64::table_part(x.word) {
            if holders.contains(&Holder::Reg(rd)) {
                return 1u64.checked_shl(u32::from(bits));
            }
        }
        holders = before;
        if holders.is_empty() {
            return None;
        }
    }
    None
}

/// The holders of a value before instruction `word`, given its holders after it.
fn step_back(after: &[Holder], word: u32) -> Vec<Holder> {
    let mut out: Vec<Holder> = after.to_vec();
    let written = a64::written(word);
    let access = a64::access(word).filter(|a| a64::FRAME_BASES.contains(&a.base));
    if let Op::Mov(d, s) = a64::decode(word) {
        if out.contains(&Holder::Reg(d)) && s != 31 {
            out.retain(|h| *h != Holder::Reg(d));
            out.push(Holder::Reg(s));
            return out;
        }
    }
    if let Some(a) = access.filter(|a| a.data[1].is_none()) {
        if let (Some(r), Some(o)) = (a.data[0], a.offset) {
            let slot = Holder::Slot(a.base, o);
            if a.store && out.contains(&slot) {
                out.retain(|h| *h != slot);
                out.push(Holder::Reg(r));
                return out;
            }
            if !a.store && out.contains(&Holder::Reg(r)) && a.size >= 4 {
                out.retain(|h| *h != Holder::Reg(r));
                out.push(slot);
                return out;
            }
        }
    }
    // Anything else: what it writes held something else before; a store may overwrite
    // a slot (stores through other bases are taken not to reach them, as
    // `audit::State::other` takes them); a change of their base moves them.
    out.retain(|h| match *h {
        Holder::Reg(r) => !written.iter().any(|x| x == r),
        Holder::Slot(base, o) => {
            let overwritten = access.is_some_and(|a| {
                a.store
                    && a.base == base
                    && a.offset.is_none_or(|at| {
                        o >= at && o < at.saturating_add(i64::try_from(a.size).unwrap_or(i64::MAX))
                    })
            });
            !written.iter().any(|x| x == base) && !overwritten
        }
    });
    out
}
