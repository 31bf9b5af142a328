//! Reads an AArch64 ELF object (relocatable or linked) into its functions: each function
//! symbol's instructions decoded ([`crate::a64`]), the symbol each `bl`/`b` reaches (from
//! its `R_AARCH64_CALL26`/`JUMP26` relocation, else from the branch target, through a PLT
//! stub to the function its GOT slot's dynamic relocation names), its jump tables
//! ([`crate::jumptable`]), and the
//! exception call-site table of the function (`.gcc_except_table`, found through the
//! relocations of `.eh_frame`), which says where each call's landing pad is.

use std::collections::HashMap;

use object::{
    Architecture, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget,
    SectionIndex, SymbolKind,
};

use crate::a64::{self, Op};
use crate::jumptable;
use crate::Error;

/// One decoded instruction of a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Byte offset from the function's start.
    pub offset: u64,
    /// The instruction word.
    pub word: u32,
    /// What it is.
    pub op: Op,
    /// For `bl`/`b`: the symbol it reaches outside the function (`None` for a branch inside
    /// the function).
    pub target: Option<String>,
}

/// One entry of a function's exception call-site table that has a landing pad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LandingPad {
    /// Start of the call-site range, from the function's start.
    pub start: u64,
    /// End of the range (exclusive).
    pub end: u64,
    /// The landing pad, from the function's start.
    pub pad: u64,
}

/// A jump table: the targets of one `br` ([`crate::jumptable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpTable {
    /// The `br`, from the function's start.
    pub br: u64,
    /// Where its entries go, from the function's start, in table order.
    pub targets: Vec<u64>,
}

/// One function of the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFunction {
    /// Its symbol's name.
    pub name: String,
    /// Its symbol's address (the offset in its section for a relocatable object).
    pub address: u64,
    /// Its instructions, in address order.
    pub instructions: Vec<Instruction>,
    /// Its call sites with a landing pad.
    pub landing_pads: Vec<LandingPad>,
    /// Its jump tables, by `br`.
    pub jump_tables: Vec<JumpTable>,
}

fn err(file: &str, message: impl Into<String>) -> Error {
    Error::Object {
        file: file.to_string(),
        message: message.into(),
    }
}

/// A function symbol: name, section, offset in the section, size.
struct Sym {
    name: String,
    section: SectionIndex,
    offset: u64,
    size: u64,
}

/// Reads the functions of an AArch64 ELF object, in address order.
///
/// # Errors
/// [`Error::Object`] when the file is not an AArch64 object or a section cannot be read.
pub fn read_functions(file: &str, data: &[u8]) -> Result<Vec<CodeFunction>, Error> {
    let obj = object::File::parse(data).map_err(|e| err(file, e.to_string()))?;
    if obj.architecture() != Architecture::Aarch64 {
        return Err(err(
            file,
            format!("not an AArch64 object ({:?})", obj.architecture()),
        ));
    }
    let mut syms = Vec::new();
    for s in obj.symbols() {
        if s.kind() != SymbolKind::Text || !s.is_definition() {
            continue;
        }
        let (Some(section), Ok(name)) = (s.section_index(), s.name()) else {
            continue;
        };
        let sec = obj
            .section_by_index(section)
            .map_err(|e| err(file, format!("symbol {name}: {e}")))?;
        let offset = s.address().checked_sub(sec.address()).ok_or_else(|| {
            err(
                file,
                format!(
                    "symbol {name} at {:#x} is before its section (at {:#x})",
                    s.address(),
                    sec.address()
                ),
            )
        })?;
        syms.push(Sym {
            name: name.to_string(),
            section,
            offset,
            size: s.size(),
        });
    }
    syms.sort_by_key(|s| (s.section.0, s.offset));
    // The function symbol at an address: a binary search of the symbols sorted by
    // address, among those starting where the last one at or before it starts (one lookup
    // per branch and relocation: a scan of every symbol made large objects quadratic).
    let name_at = |section: SectionIndex, offset: u64| {
        let end = syms.partition_point(|s| (s.section.0, s.offset) <= (section.0, offset));
        let last = syms[..end].last().filter(|s| s.section == section)?;
        let first =
            syms[..end].partition_point(|s| (s.section.0, s.offset) < (section.0, last.offset));
        syms[first..end]
            .iter()
            .find(|s| offset < s.offset.saturating_add(s.size.max(1)))
            .map(|s| s.name.clone())
    };
    // Call targets named by relocations: (section, offset) -> symbol; and the place in a
    // section each relocation points at (for a jump table's address).
    let mut targets: HashMap<(usize, u64), String> = HashMap::new();
    let mut points_at: HashMap<(usize, u64), (SectionIndex, u64)> = HashMap::new();
    let mut sections: Vec<SectionIndex> = syms.iter().map(|s| s.section).collect();
    sections.dedup();
    for &index in &sections {
        let sec = obj
            .section_by_index(index)
            .map_err(|e| err(file, e.to_string()))?;
        for (offset, reloc) in sec.relocations() {
            let RelocationTarget::Symbol(si) = reloc.target() else {
                continue;
            };
            let Ok(sym) = obj.symbol_by_index(si) else {
                continue;
            };
            if let Some(to) = sym.section_index() {
                let start = obj.section_by_index(to).map(|s| s.address()).unwrap_or(0);
                let at = sym
                    .address()
                    .wrapping_sub(start)
                    .wrapping_add_signed(reloc.addend());
                points_at.insert((index.0, offset), (to, at));
            }
            let name = if sym.kind() == SymbolKind::Section {
                sym.section_index()
                    .and_then(|s| name_at(s, u64::try_from(reloc.addend()).unwrap_or(u64::MAX)))
            } else {
                sym.name().ok().map(str::to_string)
            };
            if let Some(name) = name {
                targets.insert((index.0, offset), name);
            }
        }
    }
    let pads = landing_pads(file, &obj)?;
    let plt = plt_stubs(&obj);
    let mut out = Vec::new();
    for s in &syms {
        let sec = obj
            .section_by_index(s.section)
            .map_err(|e| err(file, e.to_string()))?;
        let data = sec
            .data()
            .map_err(|e| err(file, format!("section of {}: {e}", s.name)))?;
        let start = usize::try_from(s.offset).map_err(|e| err(file, e.to_string()))?;
        let end = s
            .offset
            .checked_add(s.size)
            .and_then(|e| usize::try_from(e).ok())
            .ok_or_else(|| {
                err(
                    file,
                    format!("{}: size {:#x} runs past the address space", s.name, s.size),
                )
            })?;
        let bytes = data.get(start..end).ok_or_else(|| {
            err(
                file,
                format!("{}: bytes {start:#x}..{end:#x} outside its section", s.name),
            )
        })?;
        let mut instructions = Vec::new();
        for (i, chunk) in bytes.chunks_exact(4).enumerate() {
            let word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let offset = 4 * i as u64;
            let op = a64::decode(word);
            let target = match op {
                Op::Bl(rel) | Op::B(rel) => targets
                    .get(&(s.section.0, s.offset + offset))
                    .cloned()
                    .or_else(|| {
                        let to = (s.offset + offset).checked_add_signed(rel)?;
                        let inside = to >= s.offset && to < s.offset.saturating_add(s.size);
                        if inside {
                            None
                        } else {
                            name_at(s.section, to)
                                .or_else(|| plt.get(&sec.address().wrapping_add(to)).cloned())
                        }
                    }),
                _ => None,
            };
            instructions.push(Instruction {
                offset,
                word,
                op,
                target,
            });
        }
        let jump_tables = jump_tables(&obj, &instructions, sec.address() + s.offset, |k| {
            points_at
                .get(&(s.section.0, s.offset + 4 * k as u64))
                .copied()
        });
        out.push(CodeFunction {
            name: s.name.clone(),
            address: s.offset,
            jump_tables,
            instructions,
            landing_pads: pads
                .get(&(s.section.0, s.offset))
                .cloned()
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The functions the PLT stubs of a linked object call, by stub address: each stub
/// (`[bti c;] adrp x16, page; ldr x17, [x16, #off]; ...; br x17`, as ld.lld and GNU ld
/// write them for AArch64) loads the GOT slot a `R_AARCH64_JUMP_SLOT` dynamic relocation
/// names. Empty for a relocatable object, whose calls name their callees by relocation.
fn plt_stubs(obj: &object::File<'_>) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let (Some(plt), Some(dynamic)) = (obj.section_by_name(".plt"), obj.dynamic_symbol_table())
    else {
        return out;
    };
    let slots: HashMap<u64, String> = obj
        .dynamic_relocations()
        .into_iter()
        .flatten()
        .filter_map(|(at, reloc)| {
            let RelocationTarget::Symbol(i) = reloc.target() else {
                return None;
            };
            let name = dynamic.symbol_by_index(i).ok()?.name().ok()?;
            Some((at, name.to_string()))
        })
        .collect();
    let Ok(data) = plt.data() else {
        return out;
    };
    let words: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    for (k, pair) in words.windows(2).enumerate() {
        let at = plt.address().wrapping_add(4 * k as u64);
        let Some(a64::TablePart::Adrp { rd: 16, page }) = a64::table_part(pair[0]) else {
            continue;
        };
        // LDR (unsigned immediate, 64-bit) x17, [x16, #imm12 * 8].
        if pair[1] & 0xffc0_03ff != 0xf940_0211 {
            continue;
        }
        let slot = (at & !0xfff)
            .wrapping_add_signed(page)
            .wrapping_add(u64::from((pair[1] >> 10) & 0xfff) * 8);
        if let Some(name) = slots.get(&slot) {
            let bti = k > 0 && words[k - 1] == a64::BTI_C;
            out.insert(if bti { at - 4 } else { at }, name.clone());
        }
    }
    out
}

/// The jump tables of a function at address `pc` whose instructions are `insts`:
/// `reloc(k)` is where a relocation at instruction `k` points (section, offset), for a
/// relocatable object; a linked one's addresses are computed.
fn jump_tables<'d>(
    obj: &object::File<'d>,
    insts: &[Instruction],
    pc: u64,
    reloc: impl Fn(usize) -> Option<(SectionIndex, u64)>,
) -> Vec<JumpTable> {
    let brs: Vec<usize> = (0..insts.len())
        .filter(|&i| matches!(insts[i].op, Op::Br(_)))
        .collect();
    if brs.is_empty() {
        return Vec::new();
    }
    let entered = jumptable::branch_targets(insts);
    let bytes = |a: jumptable::TableAddress| -> Option<&'d [u8]> {
        let (section, offset) = match reloc(a.at) {
            Some(place) => place,
            None => {
                let sec = obj
                    .sections()
                    .find(|s| a.value >= s.address() && a.value - s.address() < s.size())?;
                (sec.index(), a.value - sec.address())
            }
        };
        let data = obj.section_by_index(section).ok()?.data().ok()?;
        data.get(usize::try_from(offset).ok()?..)
    };
    let mut budget = (insts.len() as u64)
        .saturating_mul(jumptable::ENTRIES_PER_INSTRUCTION)
        .saturating_add(1024);
    let mut out = Vec::new();
    for i in brs {
        if let Some(targets) = jumptable::targets(insts, &entered, i, pc, &bytes, budget) {
            budget -= targets.len() as u64;
            out.push(JumpTable {
                br: insts[i].offset,
                targets,
            });
        }
    }
    out
}

/// The call-site tables of the object's functions, by (text section, function offset):
/// `.eh_frame`'s relocations give each FDE's function (`pc_begin`) and then its LSDA in
/// `.gcc_except_table`.
fn landing_pads(
    file: &str,
    obj: &object::File<'_>,
) -> Result<HashMap<(usize, u64), Vec<LandingPad>>, Error> {
    let mut out = HashMap::new();
    let (Some(eh), Some(lsda)) = (
        obj.section_by_name(".eh_frame"),
        obj.section_by_name(".gcc_except_table"),
    ) else {
        return Ok(out);
    };
    let table = lsda
        .data()
        .map_err(|e| err(file, format!(".gcc_except_table: {e}")))?;
    let mut relocs: Vec<_> = eh.relocations().collect();
    relocs.sort_by_key(|(o, _)| *o);
    let mut function: Option<(usize, u64)> = None;
    for (_, reloc) in relocs {
        let RelocationTarget::Symbol(si) = reloc.target() else {
            continue;
        };
        let Ok(sym) = obj.symbol_by_index(si) else {
            continue;
        };
        let Some(section) = sym.section_index() else {
            continue;
        };
        let at = sym.address().wrapping_add_signed(reloc.addend());
        if section == lsda.index() {
            if let Some(key) = function.take() {
                let offset = at
                    .checked_sub(lsda.address())
                    .and_then(|o| usize::try_from(o).ok())
                    .ok_or_else(|| {
                        err(
                            file,
                            format!(".eh_frame: LSDA pointer {at:#x} before .gcc_except_table"),
                        )
                    })?;
                let pads = parse_lsda(table, offset).ok_or_else(|| {
                    err(
                        file,
                        format!(".gcc_except_table: unreadable call-site table at {offset:#x}"),
                    )
                })?;
                out.insert(key, pads);
            }
        } else if let Ok(sec) = obj.section_by_index(section) {
            // A pc_begin before its section names no function.
            function = at.checked_sub(sec.address()).map(|o| (section.0, o));
        }
    }
    Ok(out)
}

fn uleb(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = *data.get(*pos)?;
        *pos += 1;
        if shift < 64 {
            value |= u64::from(byte & 0x7f) << shift;
        }
        shift += 7;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
}

/// A value of the call-site encoding (DW_EH_PE_uleb128, udata4 or sdata4, as LLVM emits).
fn encoded(data: &[u8], pos: &mut usize, encoding: u8) -> Option<u64> {
    match encoding & 0x0f {
        0x01 => uleb(data, pos),
        0x03 | 0x0b => {
            let b = data.get(*pos..*pos + 4)?;
            *pos += 4;
            Some(u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        }
        _ => None,
    }
}

/// The call sites with a landing pad of the LSDA (the `.gcc_except_table` entry) at byte
/// `pos` of `data` (landing-pad base: the function's start, the only one LLVM uses);
/// `None` when it cannot be read.
#[must_use]
pub fn parse_lsda(data: &[u8], mut pos: usize) -> Option<Vec<LandingPad>> {
    let lp_start = *data.get(pos)?;
    pos += 1;
    if lp_start != 0xff {
        return None;
    }
    let ttype = *data.get(pos)?;
    pos += 1;
    if ttype != 0xff {
        uleb(data, &mut pos)?;
    }
    let cs = *data.get(pos)?;
    pos += 1;
    let len = usize::try_from(uleb(data, &mut pos)?).ok()?;
    let end = pos.checked_add(len)?;
    let mut out = Vec::new();
    while pos < end {
        let start = encoded(data, &mut pos, cs)?;
        let length = encoded(data, &mut pos, cs)?;
        let pad = encoded(data, &mut pos, cs)?;
        uleb(data, &mut pos)?;
        if pad != 0 {
            out.push(LandingPad {
                start,
                end: start.checked_add(length)?,
                pad,
            });
        }
    }
    Some(out)
}
