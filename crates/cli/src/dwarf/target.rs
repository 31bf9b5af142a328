//! `locus dwarf vars --core CORE` / `--pid PID` and `locus dwarf snapshot`: a stopped
//! target (a core file read by `locus_dwarf::corefile`, a process read through ptrace)
//! placed against the binary, one frame of each thread (or of `--thread N`) unwound by
//! `locus_dwarf::unwind`, and the variables in scope there evaluated against it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use locus_dwarf::binary::{Binary, Snapshot};
use locus_dwarf::callsite::{CallSites, EntryValues};
use locus_dwarf::ptrace;
use locus_dwarf::stopped::{Placed, Stopped, Thread};
use locus_dwarf::unwind::{self, Frame};
use serde_json::{json, Value as Json};

use super::{context, fail, io_fail, open_binary, read_package, variables_json, Context};
use crate::input::Input;
use crate::Failure;

/// Where the target comes from.
pub enum Source<'a> {
    /// A core file.
    Core(&'a Path),
    /// A live process.
    Pid(u32),
}

impl Source<'_> {
    fn describe(&self) -> String {
        match self {
            Source::Core(p) => format!("core {}", p.display()),
            Source::Pid(pid) => format!("pid {pid}"),
        }
    }
}

/// The stopped target, with the binary placed in it and the bytes the core left out
/// filled from the binary.
pub struct Loaded {
    stopped: Stopped,
    placed: Placed,
    data: Vec<u8>,
    /// `BINARY.dwp`, when there is one.
    package: Option<Vec<u8>>,
    /// `--max-input-bytes`: the bound on a decompressed DWARF section.
    limit: u64,
}

/// Reads the target and places `binary` in it.
pub fn load(input: &Input, binary: &Path, source: &Source<'_>) -> Result<Loaded, Failure> {
    let data = input.read_unnamed(binary).map_err(|e| io_fail(binary, e))?;
    let mut stopped = match source {
        Source::Core(path) => {
            let core = input.read_unnamed(path).map_err(|e| io_fail(path, e))?;
            locus_dwarf::corefile::parse(&core, &path.display().to_string()).map_err(fail)?
        }
        Source::Pid(pid) => ptrace::capture(*pid).map_err(|e| fail(format!("pid {pid}: {e}")))?,
    };
    let placed = stopped
        .place(&data, &binary.display().to_string())
        .map_err(|e| io_fail(binary, format!("{e} ({})", source.describe())))?;
    locus_dwarf::corefile::check_binary(&stopped, &placed, &data)
        .map_err(|e| io_fail(binary, format!("{e} ({})", source.describe())))?;
    stopped.fill_from_file(&placed, &data);
    Ok(Loaded {
        stopped,
        placed,
        data,
        package: read_package(input, binary)?,
        limit: input.limit,
    })
}

impl Loaded {
    /// The frames of `thread` up to `frame` (all of them, at most `max`), and why the walk
    /// stopped early.
    fn frames(&self, thread: &Thread, max: usize) -> (Vec<Frame>, Option<String>) {
        let (placed, data) = (&self.placed, &self.data);
        unwind::frames(&self.stopped, thread, max, &mut |path| {
            if path == placed.path {
                Some(data.clone())
            } else {
                std::fs::read(path).ok()
            }
        })
    }

    /// Frame `n` of `thread`, or why it cannot be had.
    fn frame(&self, thread: &Thread, n: usize) -> Result<(Frame, Vec<Frame>), String> {
        let (frames, why) = self.frames(thread, unwind::MAX_FRAMES);
        match frames.get(n) {
            Some(f) => Ok((f.clone(), frames)),
            None => Err(format!(
                "no frame {n}: {} frame(s) unwound{}",
                frames.len(),
                why.map_or(String::new(), |w| format!(" ({w})"))
            )),
        }
    }

    /// What is known of the entry of each frame's function from `index` out (element 0 is
    /// frame `index`'s), from its caller's call site when that call provably enters it
    /// (`CallSites::entry_values`), evaluated in the caller's frame. The outermost frames
    /// come first: a caller's call values may need its own entry values.
    fn entry_values(&self, sites: &CallSites, frames: &[Frame], index: usize) -> Vec<EntryValues> {
        let mut out: Vec<EntryValues> = Vec::new();
        let none = Registers::new();
        for i in (index..frames.len()).rev() {
            let values = match frames.get(i + 1) {
                None => EntryValues::refused("the outermost frame has no caller"),
                Some(caller) if caller.module.as_deref() != Some(self.placed.path.as_str()) => {
                    EntryValues::refused(format!(
                        "the caller (pc {}) is not in {}",
                        hex(caller.pc),
                        self.placed.path
                    ))
                }
                Some(caller) => {
                    let mut state = self.stopped.state(&caller.registers, caller.cfa, &none);
                    state.entry = out.last();
                    sites.entry_values(frames[i].lookup_pc(i), caller.pc, state)
                }
            };
            out.push(values);
        }
        out.reverse();
        out
    }

    /// The snapshot of frame `index` of `frames`: its registers and CFA, the memory, and
    /// the registers at its function's entry ([`Loaded::entry_values`]).
    fn snapshot(
        &self,
        bin: &Binary<'_>,
        frames: &[Frame],
        index: usize,
    ) -> Result<Snapshot, Failure> {
        let Some(frame) = frames.get(index) else {
            return Ok(self.stopped.snapshot(Default::default(), None));
        };
        let mut snap = self.stopped.snapshot(frame.registers.clone(), frame.cfa);
        let sites = bin.call_sites().map_err(fail)?;
        if let Some(entry) = self.entry_values(&sites, frames, index).first() {
            snap.entry_registers = entry.registers.clone();
        }
        Ok(snap)
    }

    /// The binary's DWARF, read once for every thread and frame.
    fn binary(&self, path: &Path) -> Result<Binary<'_>, Failure> {
        Ok(
            open_binary(&self.data, self.package.as_deref(), path, self.limit)?
                .with_load_bias(self.placed.load_bias),
        )
    }
}

/// Registers by DWARF number.
type Registers = BTreeMap<u16, Vec<u8>>;

fn hex(n: u64) -> String {
    format!("{n:#x}")
}

/// Where a frame's entry values come from (`{"call_site"}`), or why there are none
/// (`{"refused"}`).
fn entry_json(e: &EntryValues) -> Json {
    match &e.refused {
        Some(why) => json!({"refused": why}),
        None => json!({"call_site": e.site}),
    }
}

/// The frames as `{"frame", "pc", "module"}`, for choosing `--frame`; frames in the
/// binary also have `"functions"`: the function and those inlined into it at the frame's
/// pc, innermost first (gdb shows each as a frame of its own).
fn backtrace(frames: &[Frame], bin: &Binary<'_>, module: &str) -> Json {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut item = json!({"frame": i, "pc": hex(f.pc), "module": f.module});
            if f.module.as_deref() == Some(module) {
                if let Ok(mut functions) = bin.functions_at(f.lookup_pc(i)) {
                    functions.reverse();
                    item["functions"] = json!(functions);
                }
            }
            item
        })
        .collect()
}

/// `locus dwarf vars BINARY --core CORE | --pid PID [--thread N] [--frame N]`.
pub fn vars(
    input: &Input,
    binary: &Path,
    source: &Source<'_>,
    thread: Option<usize>,
    frame: usize,
) -> Result<Json, Failure> {
    let loaded = load(input, binary, source)?;
    let bin = loaded.binary(binary)?;
    let numbers: Vec<usize> = match thread {
        Some(n) => {
            loaded.stopped.thread(n).map_err(fail)?;
            vec![n]
        }
        None => (1..=loaded.stopped.threads.len()).collect(),
    };
    let mut threads = Vec::new();
    for n in numbers {
        let t = loaded.stopped.thread(n).map_err(fail)?;
        let mut item = json!({"thread": n, "tid": t.tid, "signal": t.signal, "frame": frame});
        match loaded.frame(t, frame) {
            Err(e) => item["error"] = json!(e),
            Ok((f, frames)) => {
                item["pc"] = json!(hex(f.pc));
                item["module"] = json!(f.module);
                if let Some(cfa) = f.cfa {
                    item["cfa"] = json!(hex(cfa));
                }
                item["backtrace"] = backtrace(&frames, &bin, &loaded.placed.path);
                if f.module.as_deref() == Some(loaded.placed.path.as_str()) {
                    let at = f.lookup_pc(frame);
                    let vars = bin.variables_at(at).map_err(|e| io_fail(binary, e))?;
                    if let Some(name) = vars.last().map(|v| v.function.clone()) {
                        item["function"] = json!(name);
                    }
                    let sites = bin.call_sites().map_err(|e| io_fail(binary, e))?;
                    let entry = loaded.entry_values(&sites, &frames, frame);
                    let none = Registers::new();
                    // The thread's own block of the executable's thread-local variables.
                    let tls = locus_dwarf::stopped::static_tls_block(
                        bin.data(),
                        loaded.stopped.arch,
                        &t.registers,
                    );
                    let mut state = loaded.stopped.state(&f.registers, f.cfa, &none);
                    state.entry = entry.first();
                    state.tls_block = tls;
                    if let Some(e) = entry.first() {
                        item["entry_values"] = entry_json(e);
                    }
                    // A caller's variables the compiler kept over the call in a register
                    // the callee leaves alone (gcc's IPA-RA) read the call-clobbered ones.
                    // (The innermost frame has none apart: its registers hold them all.)
                    let kept = if f.call_clobbered.is_empty() {
                        BTreeSet::new()
                    } else {
                        bin.kept_across_call(&vars, f.pc, &sites)
                            .map_err(|e| io_fail(binary, e))?
                    };
                    let mut with_kept = f.call_clobbered.clone();
                    with_kept.extend(f.registers.iter().map(|(r, b)| (*r, b.clone())));
                    let mut kept_state = state.clone();
                    kept_state.registers = &with_kept;
                    item["variables"] = json!(variables_json(
                        &vars,
                        Some(&state),
                        Some((&kept, &kept_state)),
                        (&bin, at)
                    ));
                } else {
                    item["variables"] = json!([]);
                    item["note"] = json!(format!(
                        "frame {frame} is not in {} (pc {} in {}); pick another with --frame (see backtrace)",
                        binary.display(),
                        hex(f.pc),
                        f.module.as_deref().unwrap_or("no mapped file")
                    ));
                }
            }
        }
        threads.push(item);
    }
    // Nothing to show in any thread (`--frame` past every thread's last): an error, as
    // `snapshot` refuses it, not a listing of errors with status 0.
    let errors: Vec<String> = threads
        .iter()
        .filter_map(|t| Some(format!("thread {}: {}", t["thread"], t["error"].as_str()?)))
        .collect();
    if !threads.is_empty() && errors.len() == threads.len() {
        return Err(fail(errors.join("; ")));
    }
    let mut doc = json!({
        "target": source.describe(),
        "binary": loaded.placed.path,
        "load_bias": hex(loaded.placed.load_bias),
        "threads": threads,
    });
    if frame > 0 {
        doc["unwinding"] = json!(
            "caller frames: sp, pc and the callee-saved registers from the CFI; other registers are unknown there, but for a variable whose location the compiler kept over the call (a register the callee leaves alone, gcc's IPA-RA)"
        );
    }
    Ok(doc)
}

/// `locus dwarf snapshot BINARY --core CORE | --pid PID [--thread N] [--frame N]`: the
/// SNAP.json `vars --snapshot` reads, with `pc`, `load_bias`, `thread`, `tid`, `frame`.
pub fn snapshot(
    input: &Input,
    binary: &Path,
    source: &Source<'_>,
    thread: usize,
    frame: usize,
) -> Result<Json, Failure> {
    let loaded = load(input, binary, source)?;
    let t = loaded.stopped.thread(thread).map_err(fail)?;
    let (f, frames) = loaded
        .frame(t, frame)
        .map_err(|e| fail(format!("thread {thread}: {e}")))?;
    let bin = loaded.binary(binary)?;
    let snap = loaded.snapshot(&bin, &frames, frame)?;
    let arch = loaded.stopped.arch;
    let names = snap
        .registers
        .keys()
        .map(|&r| (arch.register_name(r), r))
        .collect();
    let mut doc = Context::to_json(&snap, &names);
    doc["pc"] = json!(hex(f.lookup_pc(frame)));
    doc["load_bias"] = json!(hex(loaded.placed.load_bias));
    doc["thread"] = json!(thread);
    doc["tid"] = json!(t.tid);
    doc["frame"] = json!(frame);
    doc["module"] = json!(f.module);
    Ok(doc)
}

/// `pc` and `load_bias` of a SNAP.json written by `locus dwarf snapshot`, if present.
pub fn snapshot_pc(text: &str) -> (Option<u64>, Option<u64>) {
    let Ok(doc) = serde_json::from_str::<Json>(text) else {
        return (None, None);
    };
    let get = |key: &str| match doc.get(key)? {
        Json::String(s) => context::parse_number(s),
        Json::Number(n) => n.as_u64(),
        _ => None,
    };
    (get("pc"), get("load_bias"))
}
