//! Chapter: stack maps and patch points.
//!
//! Input: `stackmap.ll`, one function per intrinsic. Locus compiles it in process with LLVM 19
//! for x86-64 and AArch64, reads the `.llvm_stackmaps` section, explains each record, checks
//! its text against `llvm-readobj-19 --stackmap`, re-encodes the patch point's reserved
//! bytes as a call and checks them with `llvm-mc-19 --disassemble`, and reads the
//! statepoint's values out of a frame.

use locus_llvm::{emit_object, Context, Module};
use locus_stackmap::object::find_section;
use locus_stackmap::patch::encode_call;
use locus_stackmap::regs::register_name;
use locus_stackmap::{
    Arch, Frame, Location, ParseOptions, Record, RunTimeEndian, StatepointRecord, Tables,
};

use super::{tool, Tour};
use crate::{readobj, Failure};

const SAMPLE: &str = include_str!("stackmap.ll");

/// Where the sample's patch point sends calls after patching: any address will do for an
/// encoding; nothing jumps there.
const NEW_TARGET: u64 = 0x7f12_3456_9abc;

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

pub fn run(tour: &mut Tour<'_>) -> Result<(), Failure> {
    tour.line("Input: an LLVM IR module with one function per intrinsic that writes stack maps:")?;
    tour.line(
        "  @loop_head       llvm.experimental.stackmap, ID 1, 16 shadow bytes, after a call",
    )?;
    tour.line(
        "  @property_get    llvm.experimental.patchpoint.i64, ID 2, anyregcc, 20 reserved bytes",
    )?;
    tour.line("  @allocate_pair   llvm.experimental.gc.statepoint, ID 3, \"deopt\" and \"gc-live\" bundles")?;
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "stackmap.ll", SAMPLE).map_err(fail)?;
    module.verify().map_err(fail)?;
    for (triple, arch) in [
        ("x86_64-linux-gnu", Arch::X86_64),
        ("aarch64-linux-gnu", Arch::AArch64),
    ] {
        tour.line("")?;
        let object = emit_object(&module, triple, "", "").map_err(fail)?;
        tour.line(format!(
            "{triple}: compiled in process by LLVM 19 (locus-llvm), {} bytes of ELF",
            object.len()
        ))?;
        one_target(tour, triple, arch, &object)?;
    }
    Ok(())
}

fn name(arch: Arch, reg: u16) -> String {
    register_name(arch, reg).map_or_else(|| format!("R#{reg}"), |n| n.into_owned())
}

fn signed(offset: i32) -> String {
    if offset < 0 {
        format!(" - {}", offset.unsigned_abs())
    } else {
        format!(" + {offset}")
    }
}

fn describe(arch: Arch, l: &Location) -> String {
    match *l {
        Location::Register { dwarf_reg, size } => {
            format!("Register {} ({size} bytes)", name(arch, dwarf_reg))
        }
        Location::Direct {
            dwarf_reg, offset, ..
        } => {
            format!(
                "Direct {}{} (an alloca's address)",
                name(arch, dwarf_reg),
                signed(offset)
            )
        }
        Location::Indirect {
            dwarf_reg,
            offset,
            size,
        } => {
            format!(
                "Indirect [{}{}] ({size} bytes spilled)",
                name(arch, dwarf_reg),
                signed(offset)
            )
        }
        Location::Constant { value, .. } => format!("Constant {value}"),
        Location::ConstantIndex { index, value, .. } => {
            format!("ConstantIndex #{index} = {value:#x}")
        }
    }
}

fn one_target(tour: &mut Tour<'_>, triple: &str, arch: Arch, object: &[u8]) -> Result<(), Failure> {
    let (info, section) = find_section(object).map_err(fail)?;
    let section = section.ok_or_else(|| fail("the object has no .llvm_stackmaps section"))?;
    let tables = Tables::new(section.data, section.endian, ParseOptions::default())
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let records: u32 = tables.iter().map(|t| t.num_records()).sum();
    tour.line(format!(
        "  .llvm_stackmaps: {} bytes, {} table(s), {records} records; every count, offset and kind checked",
        section.data.len(),
        tables.len()
    ))?;
    for (_, r) in tables.iter().flat_map(|t| t.records_with_functions()) {
        let what = match r.id() {
            1 => "stackmap: offset = right after the call that precedes it",
            2 => "patchpoint: offset = first of the reserved bytes",
            _ => "statepoint: offset = return address of the call",
        };
        tour.line(format!(
            "  record ID {} at offset {} ({what})",
            r.id(),
            r.instruction_offset()
        ))?;
        if r.id() == 3 {
            statepoint(tour, arch, r)?;
        } else {
            for (i, l) in r.locations().enumerate() {
                tour.line(format!("    #{} {}", i + 1, describe(arch, &l)))?;
            }
        }
        if r.num_live_outs() > 0 {
            let regs: Vec<String> = r.live_outs().map(|lo| name(arch, lo.dwarf_reg)).collect();
            tour.line(format!(
                "    live-outs (the runtime must preserve): {}",
                regs.join(" ")
            ))?;
        }
    }

    // Cross-check 1: the whole section as llvm-readobj prints it.
    let path = tour.scratch_file(&format!("{triple}.o"));
    std::fs::write(&path, object).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    let shown = path.display().to_string();
    let theirs = tool("llvm-readobj-19", &["--stackmap", &shown], None)?;
    let mut ours = readobj::preamble(&shown, &info);
    for t in &tables {
        ours.push_str(&readobj::table(t));
    }
    if ours != theirs {
        return Err(fail(format!(
            "llvm-readobj-19 --stackmap disagrees:\n--- locus\n{ours}--- llvm-readobj-19\n{theirs}"
        )));
    }
    tour.passed(format!(
        "llvm-readobj-19 --stackmap prints the same {} lines",
        theirs.lines().count()
    ))?;

    // Cross-check 2: patch the inline cache, disassemble what Locus encoded.
    let bytes = encode_call(arch, NEW_TARGET, 20).map_err(fail)?;
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    tour.line(format!(
        "  patch: the 20 reserved bytes of record 2, re-encoded to call {NEW_TARGET:#x}:"
    ))?;
    tour.line(format!("    {}", hex.join(" ")))?;
    let listing: Vec<String> = bytes.iter().map(|b| format!("{b:#04x}")).collect();
    let mc_triple = format!("--triple={triple}");
    let asm = tool(
        "llvm-mc-19",
        &["--disassemble", &mc_triple],
        Some(&listing.join(" ")),
    )?;
    let instructions: Vec<String> = asm
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('.'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for i in &instructions {
        tour.line(format!("    {i}"))?;
    }
    let expected_call = match arch {
        Arch::X86_64 => {
            instructions.iter().any(|i| {
                i.contains("movabsq") && i.to_lowercase().contains(&format!("{NEW_TARGET:#x}"))
            }) && instructions
                .iter()
                .any(|i| i.starts_with("callq") && i.contains("%r11"))
        }
        Arch::AArch64 => {
            aarch64_target(&instructions) == Some(NEW_TARGET)
                && instructions.iter().any(|i| i == "blr x16")
        }
    };
    let all_decoded = !asm.contains("invalid instruction encoding");
    if !(expected_call && all_decoded) {
        return Err(fail(
            "llvm-mc-19 does not read the patch back as a call to the new target",
        ));
    }
    tour.passed(format!(
        "llvm-mc-19 decodes all {} bytes: a call to {NEW_TARGET:#x}, then nops",
        bytes.len()
    ))
}

/// The value `mov x16, #a` / `movk x16, #b, lsl #s` lines put in x16, as llvm-mc prints them.
fn aarch64_target(instructions: &[String]) -> Option<u64> {
    let mut x16 = 0u64;
    for i in instructions {
        let Some(rest) = i
            .strip_prefix("mov x16, #")
            .or_else(|| i.strip_prefix("movk x16, #"))
        else {
            continue;
        };
        let mut parts = rest.split([',', ' ', '/']).filter(|p| !p.is_empty());
        let imm: u64 = parts.next()?.parse().ok()?;
        let shift: u32 = match (parts.next(), parts.next()) {
            (Some("lsl"), Some(s)) => s.trim_start_matches('#').parse().ok()?,
            _ => 0,
        };
        x16 = (x16 & !(0xffff << shift)) | (imm << shift);
    }
    Some(x16)
}

/// A frame stopped at the statepoint, made up for the tour: the stack pointer and the two
/// spill slots the record names. The live-frame test does the same on real frames.
struct SampleFrame {
    sp_reg: u16,
    sp: u64,
    slots: Vec<(u64, u64)>,
}

impl Frame for SampleFrame {
    fn register(&self, dwarf_reg: u16) -> Option<u64> {
        (dwarf_reg == self.sp_reg).then_some(self.sp)
    }
    fn read_memory(&self, address: u64, buf: &mut [u8]) -> bool {
        let Some(&(_, v)) = self.slots.iter().find(|(a, _)| *a == address) else {
            return false;
        };
        let bytes = v.to_le_bytes();
        match bytes.get(..buf.len()) {
            Some(b) => {
                buf.copy_from_slice(b);
                true
            }
            None => false,
        }
    }
}

fn statepoint(
    tour: &mut Tour<'_>,
    arch: Arch,
    r: Record<'_, RunTimeEndian>,
) -> Result<(), Failure> {
    let sp = StatepointRecord::new(r).map_err(fail)?;
    tour.line(format!(
        "    calling convention {}, flags {}",
        sp.calling_convention(),
        sp.flags()
    ))?;
    let deopt: Vec<String> = sp.deopt().map(|l| describe(arch, &l)).collect();
    tour.line(format!("    deopt: {}", deopt.join(", ")))?;
    for p in sp.gc_pointers() {
        tour.line(format!(
            "    gc pointer: base {}, derived {}",
            describe(arch, &p.base),
            describe(arch, &p.derived)
        ))?;
    }
    // A frame as the collector would see it: the stack pointer, and the caller's values of
    // %pc (0x1234) and %obj (0x5000_0000) in the slots the record names.
    let sp_reg = match arch {
        Arch::X86_64 => locus_stackmap::regs::x86_64::RSP,
        Arch::AArch64 => locus_stackmap::regs::aarch64::SP,
    };
    let mut frame = SampleFrame {
        sp_reg,
        sp: 0x7ffd_0000,
        slots: Vec::new(),
    };
    let pc_slot = sp.deopt().next().map(|l| frame.address(&l));
    let obj_slot = sp.gc_pointers().next().map(|p| frame.address(&p.base));
    for (slot, value) in [(pc_slot, 0x1234), (obj_slot, 0x5000_0000)] {
        if let Some(Ok(Some(address))) = slot {
            frame.slots.push((address, value));
        }
    }
    let deopt = sp
        .deopt()
        .map(|l| frame.value(&l))
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let gc = sp
        .gc_pointers()
        .map(|p| frame.value(&p.base))
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let hex = |v: &[u64]| {
        v.iter()
            .map(|x| format!("{x:#x}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    tour.line(format!(
        "    read from a frame with {} = {:#x}: deopt values [{}], gc pointers [{}]",
        name(arch, sp_reg),
        frame.sp,
        hex(&deopt),
        hex(&gc)
    ))
}
