//! The canonical frame address (CFA) rule at a code address, from an ELF file's
//! `.eh_frame` call frame information, read with gimli (DWARF 5 section 6.4 with the
//! `.eh_frame` changes of the Linux Standard Base).
//!
//! AArch64 needs it to walk statepoint frames: LLVM addresses a statepoint's spill slots
//! off the stack pointer (`[x31 + off]`), and unlike x86-64 (where the caller's stack
//! pointer at a call is the callee's frame pointer + 16) the frame record `x29` points at
//! sits below the other callee-saved registers, at a distance from the stack pointer that
//! only the function's frame layout gives. Its CFI does: `CFA = x29 + N` in the body of a
//! function that keeps its frame pointer, and the stack map gives the frame's size, so the
//! stack pointer is `x29 + N - size`. Only the CFA rule is used.

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, EndianSlice, FrameDescriptionEntry, LittleEndian,
    UnwindContext, UnwindSection,
};

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

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// The frame descriptions of one `.eh_frame` section (little-endian: x86-64 and AArch64
/// Linux), sorted by address.
#[derive(Clone, Debug)]
pub struct EhFrame<'a> {
    section: gimli::EhFrame<Reader<'a>>,
    bases: BaseAddresses,
    fdes: Vec<FrameDescriptionEntry<Reader<'a>>>,
}

/// A gimli error as this module words it ("cut off" for a section that ends mid-entry).
fn describe(e: gimli::Error) -> String {
    match e {
        gimli::Error::UnexpectedEof(_) => "cut off".into(),
        other => other.to_string(),
    }
}

impl<'a> EhFrame<'a> {
    /// The frame descriptions of the `.eh_frame` section `data`, loaded at `address` (the
    /// file's address space: pointers relative to a field resolve against it).
    ///
    /// # Errors
    /// A message naming the entry (its offset) that cannot be read.
    pub fn new(data: &'a [u8], address: u64) -> Result<EhFrame<'a>, String> {
        let mut section = gimli::EhFrame::new(data, LittleEndian);
        section.set_address_size(8);
        let bases = BaseAddresses::default().set_eh_frame(address);
        let mut fdes = Vec::new();
        let mut entries = section.entries(&bases);
        // Where the entry being read starts: the one after the last one read.
        let mut at = 0;
        loop {
            let fail = |e: gimli::Error| format!(".eh_frame entry at {at:#x}: {}", describe(e));
            let Some(entry) = entries.next().map_err(fail)? else {
                break;
            };
            // Each entry is its 4-byte length and `entry_len` bytes (64-bit lengths are
            // not written for .eh_frame).
            match entry {
                CieOrFde::Cie(cie) => at = cie.offset() + cie.entry_len() + 4,
                CieOrFde::Fde(partial) => {
                    let fde = partial
                        .parse(gimli::EhFrame::cie_from_offset)
                        .map_err(fail)?;
                    at = fde.offset() + fde.entry_len() + 4;
                    fdes.push(fde);
                }
            }
        }
        fdes.sort_by_key(|f| f.initial_address());
        Ok(EhFrame {
            section,
            bases,
            fdes,
        })
    }

    /// The CFA rule in effect at code address `pc` (the file's address space); `None`
    /// when no frame description covers it.
    ///
    /// # Errors
    /// A message naming the code address when its instructions cannot be read.
    pub fn cfa(&self, pc: u64) -> Result<Option<Cfa>, String> {
        let after = self.fdes.partition_point(|f| f.initial_address() <= pc);
        let Some(fde) = after
            .checked_sub(1)
            .and_then(|k| self.fdes.get(k))
            .filter(|f| pc < f.initial_address().saturating_add(f.len()))
        else {
            return Ok(None);
        };
        let mut ctx = UnwindContext::new();
        let row = fde
            .unwind_info_for_address(&self.section, &self.bases, &mut ctx, pc)
            .map_err(|e| format!("the call frame information at {pc:#x}: {}", describe(e)))?;
        Ok(Some(match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => Cfa::RegisterOffset {
                register: u64::from(register.0),
                offset: *offset,
            },
            CfaRule::Expression(_) => Cfa::Expression,
        }))
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
