//! `locus dwarf`: evaluate, assemble and disassemble DWARF location expressions, and find
//! the variables of a binary at a PC.
//!
//! This module only parses arguments, reads files and formats output: the evaluation is
//! `locus_dwarf`'s, and its requests (registers, memory, lane, frame base) are answered
//! from the context file by `Evaluation::evaluate_with` on the snapshot's `State`.

pub(crate) mod render;
mod target;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use locus_dwarf::binary::{self, Decoded, VariableKind, VariableLocation};
use locus_dwarf::{
    access, decode, encode, parse_text_with, to_text, Encoding, Entry, Error, Evaluation,
    ExtensionEncoding, Location, Op, Storage, Syntax,
};
use locus_dwarf::{ErrorDetail, ErrorKind, Request, Unavailable};
use serde_json::{json, Value as Json};

// The CTX.json / SNAP.json format is locus-dwarf's.
use locus_dwarf::binary::json as context;
pub use locus_dwarf::binary::json::Context;

use crate::input::Input;
use crate::Failure;

/// Which result kind the expression is evaluated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ResultKind {
    /// A value (e.g. an array bound); a memory location of address space 0 converts to its
    /// address.
    Value,
    /// A location description (e.g. `DW_AT_location`); a generic value converts to memory.
    Location,
}

/// How the extension operations are encoded in `--hex` input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum EncodingArg {
    /// `DW_OP_LLVM_user` (0xe9) + sub-opcode, as current LLVM writes.
    #[default]
    User,
    /// The older direct opcodes 0xe1-0xec.
    Legacy,
}

/// The `locus dwarf` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Evaluate an expression against a context of registers and memory and print the
    /// result (`--json` for JSON).
    Eval {
        /// Registers, memory, lane and the current object, as JSON.
        ///
        /// {"address_size", "registers": {NAME:
        /// {"number": DWARF number, "value": little-endian hex}}, "memory": [{"space",
        /// "address", "bytes": hex}], "lane", "iteration", "cfa", "frame_base", "object_address",
        /// "object_location"}. "object_location" is what DW_OP_push_object_address
        /// pushes when the object is more than an address in global memory: a list of
        /// places in the shape of a location result ({"storage": "memory", "space",
        /// "address"}, {"storage": "register", "register": number or NAME}, {"storage":
        /// "implicit", "bytes"}, {"storage": "undefined"}, {"storage": "composite",
        /// "parts": [{"bit_size", "location": [...]}]}, each with an optional
        /// "bit_offset"); several places are one object in several places at once, and
        /// `--write` writes to all of them.
        #[arg(long, value_name = "CTX.json")]
        context: Option<PathBuf>,
        /// Also read N bytes through the resulting location (`??` for undefined bytes),
        /// after `--write` (decimal or 0x hex).
        #[arg(long, value_name = "N", value_parser = parse_bias)]
        read: Option<u64>,
        /// Write these bytes (hex, target order) through the resulting location: to every
        /// place of a multi-place description (DW_OP_push_object_address of a context whose
        /// "object_location" has several places, for one) and every part of a composite.
        /// Implicit and undefined storage is refused before anything is written. The
        /// context is printed afterwards (`context`, in the CTX.json format).
        #[arg(long, value_name = "HEX")]
        write: Option<String>,
        /// Print one JSON object instead of text: `result`, `type`, `value` (target-order
        /// hex bytes) and `number` (as gdb prints it) for a value; `location` (each place's
        /// `storage`, `space`, `address`, `register`, `bit_offset`) for a location; `read`,
        /// `wrote` and `context` when asked. The text (the default) prints a value as gdb
        /// prints a number of its type, a location as its places (memory as an address and
        /// address space), bytes only with `--read`.
        #[arg(long)]
        json: bool,
        /// The result kind the expression is evaluated for (default: whatever is on top of
        /// the stack).
        #[arg(long, value_enum)]
        result: Option<ResultKind>,
        /// Encoding of the extension operations in `--hex`.
        #[arg(long, value_enum, default_value_t = EncodingArg::User)]
        encoding: EncodingArg,
        /// Print the stack after each operation.
        #[arg(long)]
        trace: bool,
        /// The expression's bytes in hex.
        #[arg(long, value_name = "HEX", conflicts_with = "expr")]
        hex: Option<String>,
        /// The expression as text: operations separated by spaces, newlines, `,` or `;`.
        /// llvm-dwarfdump's spelling (`DW_OP_breg7 RSP+8, DW_OP_entry_value(DW_OP_reg5
        /// RDI)`) and gdb's listing (`0: DW_OP_breg7 8 [$rsp]`) are read too, with their
        /// x86-64 and AArch64 register names.
        #[arg(
            value_name = "EXPR",
            required_unless_present = "hex",
            allow_negative_numbers = true
        )]
        expr: Vec<String>,
    },
    /// Print the text form of an encoded expression.
    Disasm {
        /// The expression's bytes in hex.
        hex: String,
        /// Encoding of the extension operations.
        #[arg(long, value_enum, default_value_t = EncodingArg::User)]
        encoding: EncodingArg,
        /// Address size (4 or 8) for `DW_OP_addr`.
        #[arg(long, default_value_t = 8)]
        address_size: u8,
    },
    /// List the variables and parameters in scope at a PC of a binary, with their location
    /// expressions and, given a snapshot, a core file or a process, their values.
    ///
    /// With `--core CORE` or `--pid PID`, the registers of each thread (or of `--thread N`)
    /// come from the core's NT_PRSTATUS/NT_PRFPREG notes or from ptrace, memory from the
    /// core's PT_LOAD segments (what the core left out of the binary's own segments is read
    /// from BINARY) or from /proc/PID/mem, and the load bias of BINARY from the mapped files
    /// (NT_FILE, /proc/PID/maps). The innermost frame by default; `--frame N` unwinds with
    /// the call-frame information of each mapped file (callers know sp, pc and the
    /// callee-saved registers; a call-clobbered one only for a variable whose location the
    /// compiler kept over the call, as gcc's IPA-RA does where the callee leaves the
    /// register alone). A process is stopped with PTRACE_SEIZE/PTRACE_INTERRUPT and
    /// detached afterwards, no signal sent.
    ///
    /// Each variable with a value has `value` (its bytes in hex, `??` where undefined) and,
    /// when its type is a base type (through typedefs and qualifiers) and every bit is
    /// defined, `number`: the value as gdb prints it (`-5`, `18.75`, `true`, `65 'A'`).
    ///
    /// Values on entry (DW_OP_entry_value, DW_OP_GNU_parameter_ref; gdb's `x@entry`) come
    /// from the caller's call site, evaluated in the caller's frame, only when that call
    /// provably enters the frame's function: directly, or through one chain of tail calls,
    /// and the function cannot tail-call itself (as gdb decides). Otherwise, and for a
    /// register a caller frame does not know, the variable is `<optimized out>` and the JSON
    /// says why ("optimized_out"), as it says where the frame's entry values come from
    /// ("entry_values").
    Vars {
        /// An ELF file with DWARF (the executable or a shared library of the target).
        binary: PathBuf,
        /// The PC in the running program: decimal, 0x hex, or a symbol with an optional
        /// offset (`split+4`, moved by the load bias). Taken from the target with `--core`
        /// and `--pid`, and from the snapshot's "pc" when it has one.
        #[arg(long, value_name = "ADDR", conflicts_with_all = ["core", "pid"])]
        pc: Option<String>,
        /// How far the file was moved when loaded: 0 for a position-dependent executable,
        /// the load base of a PIE or shared library (gdb runs PIEs at 0x555555554000).
        /// Applied to the PC and to every DW_OP_addr. Default: the snapshot's "load_bias",
        /// else 0.
        #[arg(long, value_name = "BIAS", value_parser = parse_bias, conflicts_with_all = ["core", "pid"])]
        load_bias: Option<u64>,
        /// Registers, memory, CFA and registers at function entry, as JSON: the CTX.json
        /// format of `eval --context` plus "cfa", "frame_base", "entry_registers" and,
        /// as `locus dwarf snapshot` writes them, "pc" and "load_bias".
        #[arg(long, value_name = "SNAP.json", conflicts_with_all = ["core", "pid"])]
        snapshot: Option<PathBuf>,
        /// A core file of the program (ELF ET_CORE, x86-64 or AArch64).
        #[arg(long, value_name = "CORE", conflicts_with = "pid")]
        core: Option<PathBuf>,
        /// A running process: attached, read, and detached.
        #[arg(long, value_name = "PID")]
        pid: Option<u32>,
        /// Only thread N (numbered from 1 in the core's order; the main thread first for a
        /// process). Default: every thread.
        #[arg(long, value_name = "N")]
        thread: Option<usize>,
        /// Frame N of each thread, counted as the call-frame information unwinds the stack
        /// (0: the innermost). gdb counts more frames where code was inlined or reached by
        /// a tail call: each function inlined at a frame's pc is a gdb frame of its own
        /// (here its variables are in that frame, each naming its "function"; the JSON
        /// backtrace lists each frame's "functions", innermost first), and gdb adds a frame
        /// for each tail call it can prove (here none: they left no stack frame).
        #[arg(long, value_name = "N", default_value_t = 0)]
        frame: usize,
        /// Print JSON instead of text: {"pc", "variables": [...]}, or with --core/--pid
        /// {"target", "binary", "load_bias", "threads": [{"thread", "tid", "signal",
        /// "frame", "pc", "module", "cfa", "function", "backtrace", "entry_values",
        /// "variables"}]}; each variable {"name", "kind", "function", "type", "byte_size",
        /// "die", "expression" or "const_value", and with a target "location", "value",
        /// "number" and "optimized_out" (why, when gdb would print `<optimized out>`: no
        /// location here, an entry value no call site provably gives, a register a caller
        /// frame does not know) or "error"; an implicit pointer (gdb's `<synthetic pointer>`)
        /// has "synthetic_pointer" {"die", "byte_offset"} and "points_to": the object's
        /// "name" and "function" when it is a variable, and "location", "value" and "number"
        /// of what `*p` reads there, as gdb prints it}. "entry_values" says which call site
        /// gave the frame's entry values (DW_OP_entry_value, DW_OP_GNU_parameter_ref), or why
        /// none can be trusted ("refused": the call site does not provably call this
        /// function, it can tail-call itself, no caller).
        #[arg(long)]
        json: bool,
    },
    /// Write the snapshot (SNAP.json) of one frame of a core file or a process, which
    /// `vars --snapshot` and `eval --context` read: {"address_size", "registers": {NAME:
    /// {"number": DWARF number, "value": little-endian hex}}, "memory": [{"space",
    /// "address", "bytes": hex}], "cfa", "entry_registers" (as "registers", from the
    /// caller's call sites), "pc", "load_bias", "thread", "tid", "frame", "module"}. Numbers may be JSON numbers or "0x" strings.
    Snapshot {
        /// The executable or shared library whose load bias is recorded.
        binary: PathBuf,
        /// A core file.
        #[arg(
            long,
            value_name = "CORE",
            conflicts_with = "pid",
            required_unless_present = "pid"
        )]
        core: Option<PathBuf>,
        /// A running process: attached, read, and detached.
        #[arg(long, value_name = "PID")]
        pid: Option<u32>,
        /// Thread N, numbered from 1.
        #[arg(long, value_name = "N", default_value_t = 1)]
        thread: usize,
        /// Frame N (0: the innermost).
        #[arg(long, value_name = "N", default_value_t = 0)]
        frame: usize,
    },
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(format!("dwarf: {e}"))
}

/// The DWARF package of `binary` where gdb looks for it: `BINARY.dwp` beside it, if there
/// is one.
fn read_package(input: &Input, binary: &std::path::Path) -> Result<Option<Vec<u8>>, Failure> {
    let mut name = binary.as_os_str().to_owned();
    name.push(".dwp");
    let dwp = PathBuf::from(name);
    if binary == std::path::Path::new("-") || !dwp.is_file() {
        return Ok(None);
    }
    input.read(&dwp).map(Some).map_err(fail)
}

/// `data`'s DWARF, with its package's when it has one; its sections decompress to no more
/// than `limit` bytes together (`--max-input-bytes`).
fn open_binary<'d>(
    data: &'d [u8],
    package: Option<&'d [u8]>,
    path: &std::path::Path,
    limit: u64,
) -> Result<binary::Binary<'d>, Failure> {
    let bin = binary::Binary::parse_bounded(data, limit).map_err(|e| io_fail(path, e))?;
    match package {
        Some(dwp) => bin
            .with_package(dwp)
            .map_err(|e| fail(format!("{}.dwp: {e}", path.display()))),
        None => Ok(bin),
    }
}

fn io_fail(path: &std::path::Path, e: impl std::fmt::Display) -> Failure {
    Failure::Message(format!("dwarf: {}: {e}", path.display()))
}

fn write_out(out: &mut dyn Write, text: impl AsRef<str>) -> Result<(), Failure> {
    writeln!(out, "{}", text.as_ref()).map_err(|e| Failure::Message(e.to_string()))
}

/// Runs a `locus dwarf` subcommand.
pub fn run_command(command: &Command, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Disasm {
            hex,
            encoding,
            address_size,
        } => {
            let enc = encoding_of(*encoding, *address_size);
            let bytes = context::parse_hex(hex).map_err(fail)?;
            let ops = decode(&bytes, enc).map_err(fail)?;
            let ops: Vec<Op> = ops.into_iter().map(|(_, op)| op).collect();
            write_out(out, to_text(&ops))
        }
        Command::Eval {
            context,
            read,
            write,
            json,
            result,
            encoding,
            trace,
            hex,
            expr,
        } => {
            let ctx = match context {
                Some(path) => {
                    let text = input.read_to_string(path).map_err(fail)?;
                    Context::parse(&text).map_err(|e| io_fail(path, e))?
                }
                None => Context::default(),
            };
            let write = match write {
                Some(h) => Some(context::parse_hex(h).map_err(|e| fail(format!("--write: {e}")))?),
                None => None,
            };
            let request = EvalRequest {
                read: *read,
                write,
                result: *result,
                encoding: *encoding,
                trace: *trace,
            };
            let ops = parse_ops(&ctx, hex.as_deref(), expr, *encoding).map_err(fail)?;
            let doc = eval(&ctx, &ops, &request, out)?;
            if *json {
                write_out(out, doc.to_string())
            } else {
                write_out(out, render::result_text(&doc, &ctx.names))
            }
        }
        Command::Vars {
            binary,
            pc,
            load_bias,
            snapshot,
            core,
            pid,
            thread,
            frame,
            json,
        } => {
            let doc = if let Some(source) = source(core.as_deref(), *pid) {
                target::vars(input, binary, &source, *thread, *frame)?
            } else if thread.is_some() || *frame != 0 {
                return Err(fail("--thread and --frame need --core or --pid"));
            } else {
                vars(
                    input,
                    binary,
                    pc.as_deref(),
                    *load_bias,
                    snapshot.as_deref(),
                )?
            };
            if *json {
                write_out(out, serde_json::to_string_pretty(&doc).map_err(fail)?)
            } else {
                write_out(out, render::vars_text(&doc))
            }
        }
        Command::Snapshot {
            binary,
            core,
            pid,
            thread,
            frame,
        } => {
            let source = source(core.as_deref(), *pid)
                .ok_or_else(|| fail("snapshot needs --core CORE or --pid PID"))?;
            let doc = target::snapshot(input, binary, &source, *thread, *frame)?;
            write_out(out, doc.to_string())
        }
    }
}

fn source(core: Option<&std::path::Path>, pid: Option<u32>) -> Option<target::Source<'_>> {
    match (core, pid) {
        (Some(c), _) => Some(target::Source::Core(c)),
        (None, Some(p)) => Some(target::Source::Pid(p)),
        (None, None) => None,
    }
}

fn encoding_of(e: EncodingArg, address_size: u8) -> Encoding {
    Encoding {
        address_size,
        extension: match e {
            EncodingArg::User => ExtensionEncoding::User,
            EncodingArg::Legacy => ExtensionEncoding::Legacy,
        },
        ..Encoding::default()
    }
}

/// What `locus dwarf eval` was asked besides the expression.
pub struct EvalRequest {
    /// Bytes to read through the result.
    pub read: Option<u64>,
    /// Bytes to write through the result (before reading).
    pub write: Option<Vec<u8>>,
    /// The result kind.
    pub result: Option<ResultKind>,
    /// The extension encoding (for branch offsets and `--hex`).
    pub encoding: EncodingArg,
    /// Print the stack after each operation.
    pub trace: bool,
}

/// The operations, from hex (with their byte offsets) or text.
pub fn parse_ops(
    ctx: &Context,
    hex: Option<&str>,
    expr: &[String],
    encoding: EncodingArg,
) -> Result<Decoded, Error> {
    match hex {
        Some(h) => {
            let bytes = context::parse_hex(h)?;
            Decoded::new(&bytes, encoding_of(encoding, ctx.snapshot.address_size))
        }
        None => {
            // Branch displacements of text are in bytes of the encoded form.
            let enc = encoding_of(encoding, ctx.snapshot.address_size);
            let syntax = Syntax {
                encoding: enc,
                unit_offset: 0,
                registers: &|name| ctx.names.get(name).copied(),
            };
            let ops = parse_text_with(&expr.join(" "), &syntax)?;
            match encode(&ops, enc) {
                Ok(bytes) => Decoded::new(&bytes, enc),
                Err(_) => Ok(Decoded {
                    offsets: Vec::new(),
                    ops,
                }),
            }
        }
    }
}

fn end_error(ops: &[Op], what: &str) -> Failure {
    fail(format!("op #{} end of expression: {what}", ops.len()))
}

/// Evaluates `ops` in `ctx` and builds the JSON answer (printing the trace first).
pub fn eval(
    ctx: &Context,
    expr: &Decoded,
    request: &EvalRequest,
    out: &mut dyn Write,
) -> Result<Json, Failure> {
    let ops = &expr.ops;
    let enc = encoding_of(request.encoding, ctx.snapshot.address_size);
    let a = ctx.snapshot.address_size;
    if request.trace {
        trace(ctx, expr, enc, out)?;
    }
    let mut ev = evaluation(expr, enc);
    ev.evaluate_with(&mut ctx.snapshot.state())
        .map_err(|e| fail(e.report()))?;
    let top = ev.result().cloned();
    let want_location = request.result == Some(ResultKind::Location)
        || (request.result.is_none()
            && (request.read.is_some()
                || request.write.is_some()
                || matches!(top, Some(Entry::Location(_)) | None)));
    if request.write.is_some() && request.result == Some(ResultKind::Value) {
        return Err(fail("--write needs a location result, not --result value"));
    }
    if !want_location {
        let v = match &top {
            Some(e) => e.to_value(a).ok_or_else(|| {
                end_error(
                    ops,
                    "the result is a location description that is not a memory address, not a value",
                )
            })?,
            None => return Err(end_error(ops, "the stack is empty: no value")),
        };
        return Ok(json!({
            "result": "value",
            "type": render::type_name(v.ty),
            "value": render::value_hex(&v, a),
            "number": v.number(a).to_string(),
        }));
    }
    let loc: Location = match top {
        None => Location::undefined(),
        // `--result location` takes no typed value; the default mode reads its bytes.
        Some(Entry::Value(v))
            if v.ty != locus_dwarf::ValueType::Generic && request.result.is_some() =>
        {
            return Err(end_error(
                ops,
                "the result is a value of a non-generic type, not a location",
            ))
        }
        Some(e) => e.into_location(a),
    };
    let mut doc = json!({"result": "location", "location": render::location_json(&loc)});
    let mut target = ctx.snapshot.clone();
    if let Some(bytes) = &request.write {
        let bits = (bytes.len() as u64).saturating_mul(8);
        access::write(&loc, bytes, bits, &mut target)
            .map_err(|e| end_error(ops, &format!("--write: {e}")))?;
        doc["wrote"] = json!(context::hex(bytes));
        doc["context"] = Context::to_json(&target, &ctx.names);
    }
    if let Some(n) = request.read {
        let bits =
            access::read(&loc, n.saturating_mul(8), &mut target).map_err(|e| fail(e.report()))?;
        doc["read"] = json!(bits.to_hex());
    }
    Ok(doc)
}

/// Most steps a trace shows (and executes: a loop stops the trace there).
const TRACE_LIMIT: u64 = 2000;

/// Prints the stack after each operation (top first): one evaluation with
/// `set_trace`, which stops after every operation with `Stepped`.
fn trace(ctx: &Context, expr: &Decoded, enc: Encoding, out: &mut dyn Write) -> Result<(), Failure> {
    let ops = &expr.ops;
    let mut ev = evaluation(expr, enc);
    ev.set_trace(true);
    ev.set_max_steps(TRACE_LIMIT);
    let mut executed = 0usize;
    let mut written: Result<(), Failure> = Ok(());
    let r = ev.evaluate_traced_with(&mut ctx.snapshot.state(), &mut |ev: &Evaluation<'_>| {
        if written.is_err() {
            return;
        }
        written = draw_step(ctx, ops, executed, &ev.stack(), out);
        executed = ev.pc();
    });
    written?;
    match r {
        Err(e) if matches!(e.kind(), Some(ErrorKind::StepLimitExceeded(_))) => {
            write_out(out, format!("(trace stops after {TRACE_LIMIT} operations)"))
        }
        // Any other error: the real evaluation reports it.
        _ => Ok(()),
    }
}

/// One step of a trace: the operation executed and the stack after it, top first.
fn draw_step(
    ctx: &Context,
    ops: &[Op],
    executed: usize,
    stack: &[Entry],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let text = ops
        .get(executed)
        .map_or(String::new(), |op| to_text(std::slice::from_ref(op)));
    write_out(out, format!("op #{executed} {text}"))?;
    if stack.is_empty() {
        write_out(out, "    (empty stack)")?;
    }
    for (depth, e) in stack.iter().rev().enumerate() {
        write_out(
            out,
            format!(
                "    [{depth}] {}",
                render::draw_entry(e, ctx.snapshot.address_size)
            ),
        )?;
    }
    Ok(())
}

/// An evaluation of `expr`, with its byte offsets when it has them (text that cannot be
/// encoded has none; its branches then fail).
fn evaluation(expr: &Decoded, enc: Encoding) -> Evaluation<'_> {
    if expr.offsets.is_empty() {
        Evaluation::new(&expr.ops, enc)
    } else {
        expr.evaluation(enc)
    }
}

fn vars(
    input: &Input,
    path: &std::path::Path,
    pc: Option<&str>,
    load_bias: Option<u64>,
    snapshot: Option<&std::path::Path>,
) -> Result<Json, Failure> {
    let data = input.read(path).map_err(fail)?;
    let (snap, snap_pc, snap_bias) = match snapshot {
        Some(p) => {
            let text = input.read_to_string(p).map_err(fail)?;
            let (pc, bias) = target::snapshot_pc(&text);
            let snap = Context::parse(&text).map_err(|e| io_fail(p, e))?.snapshot;
            (Some(snap), pc, bias)
        }
        None => (None, None, None),
    };
    let load_bias = load_bias.or(snap_bias).unwrap_or(0);
    let pc = match (pc, snap_pc) {
        (Some(pc), _) => resolve_pc(&data, pc, load_bias).map_err(|e| io_fail(path, e))?,
        (None, Some(pc)) => pc,
        (None, None) => {
            return Err(fail(
                "vars needs --pc ADDR (or a snapshot with \"pc\", --core or --pid)",
            ))
        }
    };
    let package = read_package(input, path)?;
    let bin = open_binary(&data, package.as_deref(), path, input.limit)?.with_load_bias(load_bias);
    let vars = bin.variables_at(pc).map_err(|e| io_fail(path, e))?;
    let state = snap.as_ref().map(binary::Snapshot::state);
    let list = variables_json(&vars, state.as_ref(), None, (&bin, pc));
    Ok(json!({"pc": format!("{pc:#x}"), "variables": list}))
}

/// Each variable as JSON: name, kind, function, type, byte_size, die, its expression (or
/// const_value) and, given a snapshot, its location and value (or the error): `value` its
/// bytes in hex (`??` where undefined), `number` as gdb prints a value of its base type
/// (absent for other types and when some bit is undefined). `at` is the binary and the pc
/// the variables were found at (for the objects implicit pointers name). `kept`: in a
/// caller's frame, the variables whose location the compiler kept over the call
/// ([`binary::Binary::kept_across_call`]) and the state they are read in, which has the
/// call-clobbered registers the frames it called left.
fn variables_json(
    vars: &[binary::Variable],
    state: Option<&binary::State<'_>>,
    kept: Option<(&BTreeSet<u64>, &binary::State<'_>)>,
    at: (&binary::Binary<'_>, u64),
) -> Vec<Json> {
    let mut list = Vec::new();
    for v in vars {
        let state = match kept {
            Some((dies, kept_state)) if dies.contains(&v.die) => Some(kept_state),
            _ => state,
        };
        let mut item = json!({
            "name": v.name,
            "kind": match v.kind { VariableKind::Parameter => "parameter", VariableKind::Variable => "variable" },
            "function": v.function,
            "type": v.type_name,
            "byte_size": v.byte_size,
            "die": v.die,
        });
        match &v.location {
            VariableLocation::Expression(bytes) => {
                item["expression"] = match decode(bytes, v.encoding) {
                    Ok(ops) => {
                        let ops: Vec<Op> = ops.into_iter().map(|(_, op)| op).collect();
                        json!(render::ops_text(&ops, v.encoding))
                    }
                    Err(e) => json!(format!("<{e}>")),
                };
            }
            VariableLocation::Const(bytes) => {
                item["const_value"] = json!(context::hex(bytes));
            }
            VariableLocation::None => item["expression"] = Json::Null,
        }
        if let Some(state) = state {
            let location = evaluate_into(&mut item, v, vars, state, None);
            // gdb's `<synthetic pointer>`: the pointer has no bits, the object it points
            // to has a value.
            if let Some(Storage::ImplicitPointer {
                die, byte_offset, ..
            }) = location
                .as_ref()
                .and_then(|l| l.places.first())
                .map(|p| &p.storage)
            {
                if let Some(map) = item.as_object_mut() {
                    map.remove("optimized_out");
                }
                item["synthetic_pointer"] = json!({"die": die, "byte_offset": byte_offset});
                item["points_to"] = points_to(v, (*die, *byte_offset), vars, state, at);
            }
        }
        list.push(item);
    }
    list
}

/// What the implicit pointer `pointer` points to, as gdb's `*pointer` reads it: the object
/// the DIE `die` describes (a variable in scope, else the DIE looked up in the binary at
/// the pc: gcc names a `DW_TAG_dwarf_procedure` for a pointer to a string literal), with
/// its `name` and `function` when it has them, and the bytes the pointer's pointee type
/// reads at `byte_offset` (the whole object when that type is unknown) as `location`,
/// `value` and `number`; or `error`. An object that is an implicit pointer itself is not
/// followed, so a cycle of them ends here.
fn points_to(
    pointer: &binary::Variable,
    (die, byte_offset): (u64, i64),
    scope: &[binary::Variable],
    state: &binary::State<'_>,
    (bin, pc): (&binary::Binary<'_>, u64),
) -> Json {
    let found;
    let object = match scope.iter().find(|t| t.die == die) {
        Some(t) => t,
        None => match bin.object_at(die, pc) {
            Ok(mut o) => {
                // Evaluated in the pointer's frame, as gdb does (`DW_OP_fbreg` there is
                // the frame's function's).
                o.frame_base.clone_from(&pointer.frame_base);
                found = o;
                &found
            }
            Err(e) => return json!({"error": describe(&e)}),
        },
    };
    let mut to = json!({});
    for (key, text) in [("name", &object.name), ("function", &object.function)] {
        if !text.is_empty() {
            to[key] = json!(text);
        }
    }
    let part = pointer
        .pointee
        .filter(|p| p.byte_size.is_some())
        .map(|p| (p, byte_offset));
    evaluate_into(&mut to, object, scope, state, part);
    to
}

/// `--load-bias` and `eval --read`: decimal or 0x hex.
fn parse_bias(s: &str) -> Result<u64, String> {
    context::parse_number(s).ok_or_else(|| format!("`{s}` is not a number"))
}

/// `--pc`: a number, or a symbol (at its address in the file, moved by `load_bias`) with an
/// optional `+offset` (`split+4`).
fn resolve_pc(data: &[u8], pc: &str, load_bias: u64) -> Result<u64, String> {
    if let Some(n) = context::parse_number(pc) {
        return Ok(n);
    }
    let (name, offset) = match pc.split_once('+') {
        Some((n, o)) => (
            n,
            context::parse_number(o).ok_or_else(|| format!("--pc `{pc}`: bad offset"))?,
        ),
        None => (pc, 0),
    };
    let base = binary::symbol_address(data, name)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("--pc `{pc}`: no symbol `{name}`"))?;
    base.checked_add(load_bias)
        .and_then(|a| a.checked_add(offset))
        .ok_or_else(|| format!("--pc `{pc}`: past the end of the address space"))
}

/// Evaluates `v` in `state` (among the variables `scope`) into `item`: its `location`,
/// `value`, `number` and `optimized_out`, or `error`; the location, if there is one.
/// With `part`, only what a pointer to that type at that byte offset reads of it, as a
/// number of that type.
fn evaluate_into(
    item: &mut Json,
    v: &binary::Variable,
    scope: &[binary::Variable],
    state: &binary::State<'_>,
    part: Option<(binary::Pointee, i64)>,
) -> Option<Location> {
    let mut state = state.clone().with_variable(v);
    let evaluated = match part {
        None => binary::evaluate_variable_in(v, scope, &mut state),
        Some((p, offset)) => {
            let size = p.byte_size.unwrap_or(0);
            binary::evaluate_part_in(v, scope, offset, size, &mut state)
        }
    };
    match evaluated {
        Ok(r) => {
            if let Some(l) = &r.location {
                item["location"] = render::location_json(l);
            }
            item["value"] = json!(r.bits.to_hex());
            let number = match part {
                None => v.number(&r.bits),
                Some((p, _)) => p
                    .base_type
                    .and_then(|b| b.number(&r.bits, v.encoding.address_size)),
            };
            if let Some(n) = number {
                item["number"] = json!(n);
            } else if v.location == VariableLocation::None {
                item["optimized_out"] = json!("no location at this pc");
            } else if r.bits.bit_len() > 0 && r.bits.defined_mask().iter().all(|&m| m == 0) {
                item["optimized_out"] = json!("the location is undefined here");
            } else if r.bits.bit_len() == 0 && part.is_none() && v.byte_size.is_none() {
                // Not an empty value: nothing was read (it showed as `[]`).
                item["error"] = json!(
                    "the size of its type is not known (a variable-length array, or a type \
                     without DW_AT_byte_size)"
                );
            }
            r.location
        }
        Err(e) => {
            match optimized_out(&e) {
                Some(why) => {
                    let size = part.map_or(v.byte_size, |(p, _)| p.byte_size);
                    let size = size.unwrap_or(0).min(4096) as usize;
                    item["value"] = json!("??".repeat(size));
                    item["optimized_out"] = json!(why);
                }
                None => item["error"] = json!(describe(&e)),
            }
            None
        }
    }
}

/// Why a variable is `<optimized out>`, as gdb would print it, when evaluating it failed
/// for want of something the frame cannot know: an entry value no call site provably gives
/// (or any other request the target cannot answer), or a register a caller frame does not
/// have (not saved by its callees). `None` for real errors (unreadable memory, ill-formed
/// expressions), which stay errors.
fn optimized_out(e: &Error) -> Option<String> {
    let register = |r: u16| {
        format!(
            "register {r} is not known in this frame (the core or snapshot lacks it, or a \
             caller frame has only the registers its callees saved)"
        )
    };
    match e.detail() {
        // A register the frame does not have (`DW_OP_bregN` of a caller frame's scratch one).
        ErrorDetail::Unanswered {
            request: Request::Register(r),
            reason: Unavailable::Missing,
            ..
        } => Some(register(*r)),
        ErrorDetail::Unanswered { .. } => Some(e.report().to_string()),
        ErrorDetail::Eval {
            kind: ErrorKind::RegisterUnavailable { register: r },
            ..
        }
        | ErrorDetail::Access {
            kind: ErrorKind::RegisterUnavailable { register: r },
        } => Some(register(*r)),
        _ => None,
    }
}

fn describe(e: &Error) -> String {
    e.report().to_string()
}
