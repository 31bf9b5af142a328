//! The canonical frame address (CFA) rule at a code address, from an ELF file's
//! `.eh_frame` call frame information (DWARF 5 section 6.4 with the `.eh_frame` changes
//! of the Linux Standard Base: 4-byte CIE pointers relative to the field, augmentation
//! strings `z`, `R`, `P`, `L`, `S`).
//!
//! AArch64 needs it to walk statepoint frames: LLVM addresses a statepoint's spill slots
//! off the stack pointer (`[x31 + off]`), and unlike x86-64 (where the caller's stack
//! pointer at a call is the callee's frame pointer + 16) the frame record `x29` points at
//! sits below the other callee-saved registers, at a distance from the stack pointer that
//! only the function's frame layout gives. Its CFI does: `CFA = x29 + N` in the body of a
//! function that keeps its frame pointer, and the stack map gives the frame's size, so the
//! stack pointer is `x29 + N - size`. Only the CFA rule is tracked; register rules are
//! skipped.

use std::ops::Range;

/// How the CFA is computed at an address: a register plus an offset (DWARF register
/// numbers), or a DWARF expression, which this reader does not evaluate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cfa {
    /// `CFA = register + offset`.
    RegisterOffset {
        /// The DWARF register number.
        register: u64,
        /// The offset.
        offset: i64,
    },
    /// `DW_CFA_def_cfa_expression`.
    Expression,
}

/// One frame description entry: the code it covers and its instructions.
#[derive(Clone, Debug)]
struct Fde {
    code: Range<u64>,
    /// The byte range of its CIE's initial instructions in the section.
    initial: Range<usize>,
    /// The byte range of its own instructions.
    instructions: Range<usize>,
    code_align: u64,
    data_align: i64,
    /// The CIE's pointer encoding (`R`), for `DW_CFA_set_loc`.
    encoding: u8,
}

/// The frame descriptions of one `.eh_frame` section, sorted by address.
#[derive(Clone, Debug)]
pub struct EhFrame<'a> {
    data: &'a [u8],
    address: u64,
    fdes: Vec<Fde>,
}

/// A cursor over the section's bytes, little-endian (x86-64 and AArch64 Linux).
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

const CUT: &str = "cut off";

impl Reader<'_> {
    fn bytes(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).ok_or(CUT)?;
        let out = self.data.get(self.at..end).ok_or(CUT)?;
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.bytes(1)?[0])
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.fixed()?))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.fixed()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.fixed()?))
    }

    fn uleb(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift < 64 {
                value |= u64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
    }

    fn sleb(&mut self) -> Result<i64, String> {
        let mut value = 0i64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift < 64 {
                value |= i64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    value |= -1i64 << shift;
                }
                return Ok(value);
            }
        }
    }

    fn cstr(&mut self) -> Result<&[u8], String> {
        let rest = self.data.get(self.at..).ok_or(CUT)?;
        let len = rest.iter().position(|&b| b == 0).ok_or(CUT)?;
        let out = &rest[..len];
        self.at += len + 1;
        Ok(out)
    }

    /// A pointer in `encoding` (`DW_EH_PE_*`); `pcrel` is the field's run-time address
    /// base (the section's address + the field's offset). `applied`: add the base of a
    /// relative encoding (a pointer), or not (a length).
    fn pointer(&mut self, encoding: u8, base: u64, applied: bool) -> Result<u64, String> {
        let field = base.wrapping_add(self.at as u64);
        let value = match encoding & 0x0f {
            0x00 => self.u64()?,
            0x01 => self.uleb()?,
            0x02 => u64::from(self.u16()?),
            0x03 => u64::from(self.u32()?),
            0x04 => self.u64()?,
            0x09 => self.sleb()? as u64,
            0x0a => i64::from(self.u16()? as i16) as u64,
            0x0b => i64::from(self.u32()? as i32) as u64,
            0x0c => self.u64()?,
            other => return Err(format!("pointer encoding {other:#x}")),
        };
        if !applied {
            return Ok(value);
        }
        match encoding & 0x70 {
            0x00 => Ok(value),
            0x10 => Ok(field.wrapping_add(value)),
            other => Err(format!("pointer application {other:#x}")),
        }
    }
}

/// What a CIE gives its FDEs.
#[derive(Clone)]
struct Cie {
    initial: Range<usize>,
    code_align: u64,
    data_align: i64,
    encoding: u8,
    augmented: bool,
}

fn parse_cie(data: &[u8], body: Range<usize>, address: u64) -> Result<Cie, String> {
    let end = body.end;
    let mut r = Reader {
        data: data.get(..end).ok_or(CUT)?,
        at: body.start,
    };
    let version = r.u8()?;
    if !matches!(version, 1 | 3 | 4) {
        return Err(format!("CIE version {version}"));
    }
    let augmentation = r.cstr()?.to_vec();
    if version == 4 {
        r.bytes(2)?; // address size, segment selector size
    }
    let code_align = r.uleb()?;
    let data_align = r.sleb()?;
    if version == 1 {
        r.u8()?;
    } else {
        r.uleb()?;
    }
    let mut encoding = 0; // DW_EH_PE_absptr
    let augmented = augmentation.first() == Some(&b'z');
    if augmented {
        let len = usize::try_from(r.uleb()?).map_err(|_| CUT)?;
        let data_end = r.at.checked_add(len).ok_or(CUT)?;
        for &c in &augmentation[1..] {
            match c {
                b'R' => encoding = r.u8()?,
                b'P' => {
                    let e = r.u8()?;
                    r.pointer(e, address, false)?;
                }
                b'L' => {
                    r.u8()?;
                }
                b'S' | b'B' | b'G' => {}
                other => return Err(format!("CIE augmentation '{}'", other as char)),
            }
        }
        r.at = data_end;
    } else if !augmentation.is_empty() {
        return Err(format!(
            "CIE augmentation \"{}\"",
            String::from_utf8_lossy(&augmentation)
        ));
    }
    Ok(Cie {
        initial: r.at..end,
        code_align,
        data_align,
        encoding,
        augmented,
    })
}

impl<'a> EhFrame<'a> {
    /// The frame descriptions of the `.eh_frame` section `data`, loaded at `address` (the
    /// file's address space: pointers relative to a field resolve against it).
    ///
    /// # Errors
    /// A message naming the entry (its offset) that cannot be read.
    pub fn new(data: &'a [u8], address: u64) -> Result<EhFrame<'a>, String> {
        let mut fdes = Vec::new();
        let mut cies: std::collections::HashMap<usize, Cie> = std::collections::HashMap::new();
        let mut at = 0;
        while at < data.len() {
            let entry = at;
            let fail = |what: String| format!(".eh_frame entry at {entry:#x}: {what}");
            let mut r = Reader { data, at };
            let length = r.u32().map_err(fail)?;
            if length == 0 {
                break; // the terminator
            }
            let length = if length == u32::MAX {
                r.u64().map_err(fail)?
            } else {
                u64::from(length)
            };
            let id_at = r.at;
            let end = usize::try_from(length)
                .ok()
                .and_then(|l| id_at.checked_add(l))
                .filter(|&e| e <= data.len())
                .ok_or_else(|| fail(CUT.into()))?;
            let id = r.u32().map_err(fail)?;
            if id == 0 {
                let cie = parse_cie(data, r.at..end, address).map_err(fail)?;
                cies.insert(entry, cie);
            } else {
                let cie_at = id_at
                    .checked_sub(id as usize)
                    .ok_or_else(|| fail("its CIE pointer leads outside the section".into()))?;
                let cie = match cies.get(&cie_at) {
                    Some(c) => c.clone(),
                    None => {
                        // A CIE after its FDE: read it where it is.
                        let mut c = Reader { data, at: cie_at };
                        let len = c.u32().map_err(fail)?;
                        let body_start = c.at + 4;
                        let body_end =
                            c.at.checked_add(len as usize)
                                .filter(|&e| e <= data.len())
                                .ok_or_else(|| fail("its CIE is cut off".into()))?;
                        let cie = parse_cie(data, body_start..body_end, address).map_err(fail)?;
                        cies.insert(cie_at, cie.clone());
                        cie
                    }
                };
                let mut r = Reader {
                    data: &data[..end],
                    at: r.at,
                };
                let start = r.pointer(cie.encoding, address, true).map_err(fail)?;
                let range = r.pointer(cie.encoding, address, false).map_err(fail)?;
                if cie.augmented {
                    let len =
                        usize::try_from(r.uleb().map_err(fail)?).map_err(|_| fail(CUT.into()))?;
                    r.bytes(len).map_err(fail)?;
                }
                fdes.push(Fde {
                    code: start..start.saturating_add(range),
                    initial: cie.initial.clone(),
                    instructions: r.at..end,
                    code_align: cie.code_align,
                    data_align: cie.data_align,
                    encoding: cie.encoding,
                });
            }
            at = end;
        }
        fdes.sort_by_key(|f| f.code.start);
        Ok(EhFrame {
            data,
            address,
            fdes,
        })
    }

    /// The CFA rule in effect at code address `pc` (the file's address space); `None`
    /// when no frame description covers it.
    ///
    /// # Errors
    /// A message naming the code address when its instructions cannot be read.
    pub fn cfa(&self, pc: u64) -> Result<Option<Cfa>, String> {
        let after = self.fdes.partition_point(|f| f.code.start <= pc);
        let Some(fde) = after
            .checked_sub(1)
            .and_then(|k| self.fdes.get(k))
            .filter(|f| pc < f.code.end)
        else {
            return Ok(None);
        };
        let mut state = State {
            cfa: Cfa::RegisterOffset {
                register: 0,
                offset: 0,
            },
            saved: Vec::new(),
            loc: fde.code.start,
        };
        let fail = |what: String| format!("the call frame information of {pc:#x}: {what}");
        // The CIE's initial instructions set the rule at the start; `loc` only moves in
        // the FDE's.
        state
            .run(self, fde, fde.initial.clone(), u64::MAX)
            .map_err(fail)?;
        state.saved.clear();
        state
            .run(self, fde, fde.instructions.clone(), pc)
            .map_err(fail)?;
        Ok(Some(state.cfa))
    }
}

struct State {
    cfa: Cfa,
    saved: Vec<Cfa>,
    loc: u64,
}

impl State {
    /// Runs the instructions in `bytes` until the location passes `pc`.
    fn run(
        &mut self,
        eh: &EhFrame<'_>,
        fde: &Fde,
        bytes: Range<usize>,
        pc: u64,
    ) -> Result<(), String> {
        let mut r = Reader {
            data: eh.data.get(..bytes.end).ok_or(CUT)?,
            at: bytes.start,
        };
        let offset_of = |cfa: Cfa, offset: i64| match cfa {
            Cfa::RegisterOffset { register, .. } => Cfa::RegisterOffset { register, offset },
            Cfa::Expression => Cfa::Expression,
        };
        while r.at < bytes.end {
            let op = r.u8()?;
            let advance = match op >> 6 {
                1 => Some(u64::from(op & 0x3f)),
                2 => {
                    r.uleb()?; // DW_CFA_offset: a register rule
                    None
                }
                3 => None, // DW_CFA_restore
                _ => match op {
                    0x00 => None, // nop
                    0x01 => {
                        let to = r.pointer(fde.encoding, eh.address, true)?;
                        if to > pc {
                            return Ok(());
                        }
                        self.loc = to;
                        None
                    }
                    0x02 => Some(u64::from(r.u8()?)),
                    0x03 => Some(u64::from(r.u16()?)),
                    0x04 => Some(u64::from(r.u32()?)),
                    // offset_extended, register, val_offset, GNU_negative_offset_extended
                    0x05 | 0x09 | 0x14 | 0x2f => {
                        r.uleb()?;
                        r.uleb()?;
                        None
                    }
                    // restore_extended, undefined, same_value, GNU_args_size
                    0x06 | 0x07 | 0x08 | 0x2e => {
                        r.uleb()?;
                        None
                    }
                    0x0a => {
                        self.saved.push(self.cfa);
                        None
                    }
                    0x0b => {
                        self.cfa = self
                            .saved
                            .pop()
                            .ok_or("DW_CFA_restore_state without a saved state")?;
                        None
                    }
                    0x0c => {
                        let register = r.uleb()?;
                        let offset =
                            i64::try_from(r.uleb()?).map_err(|_| "a CFA offset too large")?;
                        self.cfa = Cfa::RegisterOffset { register, offset };
                        None
                    }
                    0x0d => {
                        let register = r.uleb()?;
                        let offset = match self.cfa {
                            Cfa::RegisterOffset { offset, .. } => offset,
                            Cfa::Expression => 0,
                        };
                        self.cfa = Cfa::RegisterOffset { register, offset };
                        None
                    }
                    0x0e => {
                        let offset =
                            i64::try_from(r.uleb()?).map_err(|_| "a CFA offset too large")?;
                        self.cfa = offset_of(self.cfa, offset);
                        None
                    }
                    0x0f => {
                        let len = usize::try_from(r.uleb()?).map_err(|_| CUT)?;
                        r.bytes(len)?;
                        self.cfa = Cfa::Expression;
                        None
                    }
                    // expression, val_expression: a register and a block
                    0x10 | 0x16 => {
                        r.uleb()?;
                        let len = usize::try_from(r.uleb()?).map_err(|_| CUT)?;
                        r.bytes(len)?;
                        None
                    }
                    // offset_extended_sf, val_offset_sf
                    0x11 | 0x15 => {
                        r.uleb()?;
                        r.sleb()?;
                        None
                    }
                    0x12 => {
                        let register = r.uleb()?;
                        let offset = r.sleb()?.wrapping_mul(fde.data_align);
                        self.cfa = Cfa::RegisterOffset { register, offset };
                        None
                    }
                    0x13 => {
                        let offset = r.sleb()?.wrapping_mul(fde.data_align);
                        self.cfa = offset_of(self.cfa, offset);
                        None
                    }
                    0x2d => None, // DW_CFA_AARCH64_negate_ra_state (GNU_window_save)
                    other => return Err(format!("call frame instruction {other:#x}")),
                },
            };
            if let Some(delta) = advance {
                let to = self.loc.wrapping_add(delta.wrapping_mul(fde.code_align));
                if to > pc {
                    return Ok(());
                }
                self.loc = to;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Cfa, EhFrame};
    use object::{Object, ObjectSection};
    use std::process::Command;

    /// Functions with different frames: one keeping its frame pointer with callee-saved
    /// registers, one with a 5,000-byte frame, one without a frame pointer.
    const IR: &str = r#"
declare void @g(ptr)
declare i64 @h(i64)
define i64 @kept(i64 %a, i64 %b) "frame-pointer"="all" {
  %x = call i64 @h(i64 %a)
  %y = call i64 @h(i64 %b)
  %z = add i64 %x, %y
  %w = add i64 %z, %a
  ret i64 %w
}
define void @big() "frame-pointer"="all" {
  %buf = alloca [5000 x i8]
  call void @g(ptr %buf)
  call void @g(ptr %buf)
  ret void
}
define i64 @nofp(i64 %a) "frame-pointer"="none" {
  %buf = alloca [64 x i8]
  call void @g(ptr %buf)
  %x = call i64 @h(i64 %a)
  %y = add i64 %x, %a
  ret i64 %y
}
"#;

    fn run(cmd: &mut Command) -> String {
        let out = cmd
            .output()
            .expect("the LLVM 19 tools run (scripts/install-deps)");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The DWARF number of a register as llvm-dwarfdump-19 names it.
    fn number(name: &str) -> u64 {
        match name {
            "WSP" => 31,
            "W29" => 29,
            "RSP" => 7,
            "RBP" => 6,
            other => panic!("a CFA register this test does not know: {other}"),
        }
    }

    /// A row of a CFA table: address, register, offset.
    type Row = (u64, u64, i64);

    /// Every row of llvm-dwarfdump-19's CFA table (`  0x103b4: CFA=W29+48: ...`), per
    /// FDE, with the FDE's end: (address, register, offset).
    fn rows(dump: &str) -> Vec<(Vec<Row>, u64)> {
        let mut out: Vec<(Vec<Row>, u64)> = Vec::new();
        for line in dump.lines() {
            if let Some(pc) = line.split(" pc=").nth(1) {
                let end = pc.split("...").nth(1).unwrap();
                out.push((Vec::new(), u64::from_str_radix(end.trim(), 16).unwrap()));
            } else if let Some(rest) = line.trim().strip_prefix("0x") {
                let (addr, rule) = rest.split_once(": CFA=").unwrap();
                let rule = rule.split(':').next().unwrap();
                let (reg, off) = rule.split_once('+').unwrap_or((rule, "0"));
                out.last_mut().unwrap().0.push((
                    u64::from_str_radix(addr, 16).unwrap(),
                    number(reg),
                    off.parse().unwrap(),
                ));
            }
        }
        out
    }

    #[test]
    fn cfa_rules_match_llvm_dwarfdump() {
        let dir = std::env::temp_dir().join(format!("locus-cfi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ll = dir.join("cfi.ll");
        std::fs::write(&ll, IR).unwrap();
        for triple in ["aarch64-linux-gnu", "x86_64-linux-gnu"] {
            let (obj, so) = (
                dir.join(format!("{triple}.o")),
                dir.join(format!("{triple}.so")),
            );
            run(Command::new("llc-19")
                .args(["-O2", "-relocation-model=pic", "-filetype=obj"])
                .arg(format!("-mtriple={triple}"))
                .arg(&ll)
                .arg("-o")
                .arg(&obj));
            run(Command::new("ld.lld-19")
                .arg("-shared")
                .arg(&obj)
                .arg("-o")
                .arg(&so));
            let dump = run(Command::new("llvm-dwarfdump-19").arg("--eh-frame").arg(&so));
            let data = std::fs::read(&so).unwrap();
            let file = object::File::parse(&*data).unwrap();
            let section = file.section_by_name(".eh_frame").unwrap();
            let eh = EhFrame::new(section.data().unwrap(), section.address()).unwrap();
            let fdes = rows(&dump);
            assert_eq!(fdes.len(), 3, "{triple}: three functions\n{dump}");
            let mut checked = 0;
            for (rows, end) in &fdes {
                for (k, &(addr, register, offset)) in rows.iter().enumerate() {
                    let last = rows.get(k + 1).map_or(*end, |r| r.0) - 1;
                    for pc in [addr, last] {
                        assert_eq!(
                            eh.cfa(pc).unwrap(),
                            Some(Cfa::RegisterOffset { register, offset }),
                            "{triple} at {pc:#x}\n{dump}"
                        );
                        checked += 1;
                    }
                }
                assert_eq!(
                    eh.cfa(*end).unwrap().is_some(),
                    fdes.iter().any(|f| f.0[0].0 == *end)
                );
            }
            assert!(checked >= 12, "{triple}: {checked} rows");
            assert_eq!(eh.cfa(0).unwrap(), None, "{triple}: no function at 0");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cut_off_section_is_an_error_naming_the_entry() {
        // A CIE whose length runs past the section's end.
        let data = [0x40, 0, 0, 0, 0, 0, 0, 0, 1, b'z', b'R', 0];
        let e = EhFrame::new(&data, 0).unwrap_err();
        assert!(e.contains("entry at 0x0") && e.contains("cut off"), "{e}");
    }
}
