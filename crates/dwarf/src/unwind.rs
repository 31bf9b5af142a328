//! Frames beyond the innermost (feature `binary`): call-frame information
//! (`.eh_frame`, else `.debug_frame`, read with gimli's unwinder) of the
//! file mapped at each PC gives the caller's registers and each frame's CFA.
//!
//! The caller gets the stack pointer (the CFA), the PC (the return address)
//! and the callee-saved registers (saved where the CFI says, else unchanged);
//! the other registers are not known in a caller's frame and are left out, so
//! a variable held in one there is reported as unreadable rather than guessed.
//! The call-clobbered registers a call leaves alone when its callee does
//! ([`Arch::kept_unless_written`](crate::stopped::Arch::kept_unless_written))
//! go along apart ([`Frame::call_clobbered`]), for the variables whose location
//! the compiler kept over the call (gcc's IPA-RA).
//! CFA and register rules written as DWARF expressions (a signal trampoline's,
//! over the signal context) are evaluated with the frame's registers and the
//! target's memory; the frame a signal interrupted gets every register its
//! trampoline restores, and its PC is the interrupted instruction
//! ([`Frame::interrupted`]). A `DW_CFA_val_expression` or another rule not
//! followed stops the walk, with the reason.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use gimli::{CfaRule, EndianSlice, LittleEndian, RegisterRule, UnwindSection as _};
use object::{Object as _, ObjectSection as _};

use crate::stopped::{register_u64, Stopped, Thread};
use crate::Error;
use crate::ErrorDetail;

/// The most frames [`frames`] walks.
pub const MAX_FRAMES: usize = 256;

/// One frame of a thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Its PC: where it runs (frame 0) or returns to (callers).
    pub pc: u64,
    /// The registers known in it, by DWARF number.
    pub registers: BTreeMap<u16, Vec<u8>>,
    /// In a caller, the call-clobbered registers of
    /// [`Arch::kept_unless_written`](crate::stopped::Arch::kept_unless_written) as the
    /// frames it called left them (where their CFI saved them, else unchanged): its own
    /// values only where the callee leaves them alone, which only the compiler knows
    /// ([`crate::binary::Binary::kept_across_call`]). Empty in the innermost frame, whose
    /// `registers` hold them all.
    pub call_clobbered: BTreeMap<u16, Vec<u8>>,
    /// Its canonical frame address, when its CFI was found.
    pub cfa: Option<u64>,
    /// A signal interrupted it (the frame it "called" is a signal trampoline's, whose
    /// CFI restores every register from the signal context): its PC is the instruction
    /// to run next, not a return address, and every register is its own.
    pub interrupted: bool,
    /// The file mapped at its PC.
    pub module: Option<String>,
}

impl Frame {
    /// The PC to look its scopes and location lists up at: the PC itself in
    /// the innermost frame and in one a signal interrupted, one byte back in a
    /// caller (inside the call, not at the instruction after it).
    pub fn lookup_pc(&self, index: usize) -> u64 {
        if index == 0 || self.interrupted {
            self.pc
        } else {
            self.pc.wrapping_sub(1)
        }
    }
}

/// The frames of `thread`, innermost first, at most `max`; and, when the
/// walk ended before reaching the outermost frame, why. `file` gives a
/// mapped file's bytes by the path the target mapped it from (the caller
/// decides: the binary it was given, or the file on this machine).
pub fn frames(
    stopped: &Stopped,
    thread: &Thread,
    max: usize,
    file: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
) -> (Vec<Frame>, Option<String>) {
    let mut files: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    let mut out = Vec::new();
    let mut frame = Frame {
        pc: thread.pc,
        registers: thread.registers.clone(),
        call_clobbered: BTreeMap::new(),
        cfa: None,
        interrupted: false,
        module: stopped.module_at(thread.pc).map(|m| m.path.clone()),
    };
    let max = max.min(MAX_FRAMES);
    loop {
        let index = out.len();
        let step = match frame.module.clone() {
            None => Err(format!("no mapped file holds pc {:#x}", frame.pc)),
            Some(path) => {
                let data = files.entry(path.clone()).or_insert_with(|| file(&path));
                match data {
                    None => Err(format!("cannot read {path} for its call-frame information")),
                    Some(data) => caller(stopped, &frame, index, &path, data),
                }
            }
        };
        match step {
            Ok((cfa, next)) => {
                frame.cfa = Some(cfa);
                let done = next.is_none();
                out.push(frame);
                if done {
                    return (out, None);
                }
                if out.len() >= max {
                    return (out, Some(format!("stopped after {max} frames")));
                }
                let Some(next) = next else {
                    return (out, None);
                };
                if next.pc == 0 {
                    return (out, None);
                }
                let sp = |f: &Frame| register_u64(&f.registers, stopped.arch.sp());
                if let (Some(old), Some(new)) = (sp(out.last().unwrap_or(&next)), sp(&next)) {
                    if new <= old {
                        return (
                            out,
                            Some(format!(
                                "the stack pointer did not grow past {old:#x} (a corrupt stack?)"
                            )),
                        );
                    }
                }
                frame = next;
            }
            Err(why) => {
                out.push(frame);
                return (out, Some(why));
            }
        }
    }
}

/// The frame's CFA and its caller (none when the return address is
/// undefined: the outermost frame).
fn caller(
    stopped: &Stopped,
    frame: &Frame,
    index: usize,
    path: &str,
    data: &[u8],
) -> Result<(u64, Option<Frame>), String> {
    let arch = stopped.arch;
    let placed = stopped
        .place(data, path)
        .map_err(|e| format!("{path}: {e}"))?;
    let file = object::File::parse(data).map_err(|e| format!("{path}: {e}"))?;
    let at = frame.lookup_pc(index).wrapping_sub(placed.load_bias);
    let rules = Rules::find(&file, at).map_err(|e| format!("{path}: {e}"))?;
    let Some(rules) = rules else {
        return Err(format!(
            "no call-frame information for pc {:#x} in {path}",
            frame.pc
        ));
    };
    let value = |r: u16| register_u64(&frame.registers, r);
    let cfa = match rules.cfa {
        CfaRule::RegisterAndOffset { register, offset } => value(register.0)
            .ok_or_else(|| format!("the CFA needs register {}, not known here", register.0))?
            .wrapping_add_signed(offset),
        // A signal trampoline's: the CFA read from the signal context.
        CfaRule::Expression(_) => {
            let bytes = rules.cfa_expression.as_deref().ok_or_else(|| {
                format!(
                    "the CFA expression at pc {:#x} is not in its section",
                    frame.pc
                )
            })?;
            evaluate_cfi(stopped, &frame.registers, bytes, None)
                .map_err(|e| format!("the CFA expression at pc {:#x}: {e}", frame.pc))?
        }
    };
    let read = |address: u64| -> Result<Vec<u8>, String> {
        stopped
            .read(address, 8)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| format!("the saved register at {address:#x} is not in memory"))
    };
    // A register's rule, and the bytes of its expression (`DW_CFA_expression`).
    let entry = |r: u16| rules.registers.iter().find(|(n, _, _)| *n == r);
    let rule = |r: u16| entry(r).map(|(_, rule, _)| rule.clone());
    let expression = |r: u16| entry(r).and_then(|(_, _, bytes)| bytes.clone());
    let mut registers = BTreeMap::new();
    let mut call_clobbered = BTreeMap::new();
    let ra = arch.return_address();
    // A register as this frame has it, or was left it (carried on while no CFI rule says
    // otherwise).
    let known = |r: u16| {
        frame
            .registers
            .get(&r)
            .or_else(|| frame.call_clobbered.get(&r))
            .cloned()
    };
    // A signal trampoline's CFI restores every register it names from the signal
    // context: the interrupted frame's own values, all of them.
    let mut wanted: Vec<u16> = frame
        .registers
        .keys()
        .chain(frame.call_clobbered.keys())
        .copied()
        .filter(|&r| arch.callee_saved(r) || arch.kept_unless_written(r))
        .chain(
            rules
                .registers
                .iter()
                .filter(|_| rules.signal_trampoline)
                .map(|(r, _, _)| *r),
        )
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    if !wanted.contains(&ra) {
        wanted.push(ra);
    }
    let mut return_address = None;
    // Register `r` in the caller, by the rule of this frame's CFI.
    let recover = |r: u16| -> Result<Option<Vec<u8>>, String> {
        Ok(match rule(r) {
            None if r == arch.sp() => Some(cfa.to_le_bytes().to_vec()),
            // gimli keeps no entry for an undefined rule: no return address, the outermost
            // frame (`_start`'s CFI says so).
            None if r == ra => None,
            None | Some(RegisterRule::SameValue) => known(r),
            Some(RegisterRule::Undefined) => None,
            Some(RegisterRule::Offset(o)) => Some(read(cfa.wrapping_add_signed(o))?),
            Some(RegisterRule::ValOffset(o)) => {
                Some(cfa.wrapping_add_signed(o).to_le_bytes().to_vec())
            }
            // Only a register this frame surely has: a call-clobbered one it was left
            // is its own value only where the compiler says so.
            Some(RegisterRule::Register(from)) => frame.registers.get(&from.0).cloned(),
            // The address the expression computes from the CFA holds it (a signal
            // context's slot).
            Some(RegisterRule::Expression(_)) => {
                let bytes = expression(r).ok_or_else(|| {
                    format!(
                        "register {r}'s rule at pc {:#x} is not in its section",
                        frame.pc
                    )
                })?;
                let at = evaluate_cfi(stopped, &frame.registers, &bytes, Some(cfa))
                    .map_err(|e| format!("register {r}'s rule at pc {:#x}: {e}", frame.pc))?;
                Some(read(at)?)
            }
            Some(other) => {
                return Err(format!(
                    "register {r} at pc {:#x} has a rule not followed ({other:?})",
                    frame.pc
                ))
            }
        })
    };
    for r in wanted {
        let recovered = recover(r);
        // A call-clobbered register carried along is a frame's own only where a
        // compiler says so: one that cannot be recovered is left out, not a reason to
        // stop the walk.
        let carried =
            !rules.signal_trampoline && !arch.callee_saved(r) && arch.kept_unless_written(r);
        let bytes = match recovered {
            Ok(bytes) => bytes,
            Err(_) if carried => None,
            Err(e) => return Err(e),
        };
        if carried {
            if let Some(bytes) = bytes {
                call_clobbered.insert(r, bytes);
            }
            continue;
        }
        if r == ra {
            return_address = bytes.as_deref().map(|b| {
                let mut buf = [0u8; 8];
                let n = b.len().min(8);
                buf[..n].copy_from_slice(&b[..n]);
                u64::from_le_bytes(buf)
            });
            if !arch.callee_saved(r) {
                continue;
            }
        }
        if let Some(bytes) = bytes {
            registers.insert(r, bytes);
        }
    }
    if rule(arch.sp()).is_none() {
        registers.insert(arch.sp(), cfa.to_le_bytes().to_vec());
    }
    let Some(pc) = return_address else {
        return Ok((cfa, None));
    };
    if arch == crate::stopped::Arch::X86_64 {
        registers.insert(16, pc.to_le_bytes().to_vec());
    }
    Ok((
        cfa,
        Some(Frame {
            pc,
            registers,
            call_clobbered,
            cfa: None,
            interrupted: rules.signal_trampoline,
            module: stopped.module_at(pc).map(|m| m.path.clone()),
        }),
    ))
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// The CFI row of one PC: its CFA rule and register rules, with the bytes of the rules
/// written as expressions, and whether its CIE is a signal trampoline's (augmentation
/// `S`).
struct Rules {
    cfa: CfaRule<usize>,
    cfa_expression: Option<Vec<u8>>,
    registers: Vec<(u16, RegisterRule<usize>, Option<Vec<u8>>)>,
    signal_trampoline: bool,
}

impl Rules {
    /// The row for file address `at`, from `.eh_frame` or `.debug_frame`.
    fn find(file: &object::File<'_>, at: u64) -> Result<Option<Rules>, Error> {
        let text = file.section_by_name(".text").map_or(0, |s| s.address());
        let mut ctx = gimli::UnwindContext::new();
        if let Some(section) = file.section_by_name(".eh_frame") {
            let data = section.data().map_err(|e| ErrorDetail::Object {
                what: format!(".eh_frame: {e}"),
            })?;
            let eh = gimli::EhFrame::new(data, LittleEndian);
            let bases = gimli::BaseAddresses::default()
                .set_eh_frame(section.address())
                .set_text(text);
            if let Ok(fde) = eh.fde_for_address(&bases, at, gimli::EhFrame::cie_from_offset) {
                if let Ok(row) = fde.unwind_info_for_address(&eh, &bases, &mut ctx, at) {
                    return Ok(Some(Rules::of(row, &eh, fde.cie().is_signal_trampoline())));
                }
            }
        }
        if let Some(section) = file.section_by_name(".debug_frame") {
            let data = section.data().map_err(|e| ErrorDetail::Object {
                what: format!(".debug_frame: {e}"),
            })?;
            let mut debug: gimli::DebugFrame<Slice<'_>> =
                gimli::DebugFrame::new(data, LittleEndian);
            debug.set_address_size(8);
            let bases = gimli::BaseAddresses::default();
            if let Ok(fde) = debug.fde_for_address(&bases, at, gimli::DebugFrame::cie_from_offset) {
                if let Ok(row) = fde.unwind_info_for_address(&debug, &bases, &mut ctx, at) {
                    return Ok(Some(Rules::of(
                        row,
                        &debug,
                        fde.cie().is_signal_trampoline(),
                    )));
                }
            }
        }
        Ok(None)
    }

    fn of<'d, S: gimli::UnwindSection<Slice<'d>>>(
        row: &gimli::UnwindTableRow<usize>,
        section: &S,
        signal_trampoline: bool,
    ) -> Rules {
        let bytes =
            |e: &gimli::UnwindExpression<usize>| e.get(section).ok().map(|x| x.0.slice().to_vec());
        Rules {
            cfa: row.cfa().clone(),
            cfa_expression: match row.cfa() {
                CfaRule::Expression(e) => bytes(e),
                CfaRule::RegisterAndOffset { .. } => None,
            },
            registers: row
                .registers()
                .map(|(r, rule)| {
                    let expression = match rule {
                        RegisterRule::Expression(e) | RegisterRule::ValExpression(e) => bytes(e),
                        _ => None,
                    };
                    (r.0, rule.clone(), expression)
                })
                .collect(),
            signal_trampoline,
        }
    }
}

/// Evaluates a CFI expression (a signal trampoline's) with the frame's registers and the
/// target's memory, `initial` pushed first (the CFA, for a register's rule): the address
/// or value it computes.
fn evaluate_cfi(
    stopped: &Stopped,
    registers: &BTreeMap<u16, Vec<u8>>,
    bytes: &[u8],
    initial: Option<u64>,
) -> Result<u64, String> {
    use crate::{Entry, Evaluation, Value, ValueType};
    let mut eval = Evaluation::new(bytes, crate::Encoding::default());
    if let Some(v) = initial {
        eval.push(Entry::Value(Value {
            ty: ValueType::Generic,
            bits: v,
        }));
    }
    let none = BTreeMap::new();
    let mut state = stopped.state(registers, None, &none);
    eval.evaluate_with(&mut state).map_err(|e| format!("{e}"))?;
    match eval.result() {
        Some(Entry::Value(v)) if v.ty == ValueType::Generic => Ok(v.bits),
        _ => Err(String::from("the expression computes no address")),
    }
}
