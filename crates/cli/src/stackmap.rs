//! `locus stackmap FILE...`: print, query and check stack map sections.

use std::io::Write;
use std::path::PathBuf;

use locus_stackmap::names;
use locus_stackmap::object::{
    archive_members, find_section, object_info, ObjectInfo, StackMapSection,
};
use locus_stackmap::regs::register_name;
use locus_stackmap::{
    Arch, IndexedRecord, Location, ParseOptions, RunTimeEndian, StackMapIndex, Strictness, Table,
    Tables,
};
use serde_json::{json, Value};

use crate::input::Input;
use crate::{readobj, Failure};

/// Arguments of `locus stackmap`.
#[derive(clap::Args)]
pub struct Args {
    /// Object files, executables, shared libraries (ELF, Mach-O, COFF) or static archives of
    /// them (every member is printed, as llvm-readobj prints them).
    #[arg(required_unless_present = "modules")]
    files: Vec<PathBuf>,
    /// Print JSON for programs instead of llvm-readobj's text. Function addresses in it are
    /// after the file's relocations (llvm-readobj's text shows them before).
    #[arg(long)]
    json: bool,
    /// Print only the records at this code address (decimal or 0x-hex): function address
    /// (after the file's relocations) + load bias + instruction offset. Repeat it, or give
    /// a comma-separated list, to look up several (a stack's return addresses, say); an
    /// address with no record is an error, after the others are printed.
    #[arg(long, value_name = "ADDR", value_parser = parse_u64, value_delimiter = ',')]
    lookup: Vec<u64>,
    /// Added to every function address (where a PIE or shared object was loaded).
    #[arg(long, value_name = "BIAS", default_value = "0", value_parser = parse_u64)]
    load_bias: u64,
    /// A module of a process, for `--lookup` over the whole process: FILE@BIAS, BIAS being
    /// where it was loaded (as for --load-bias). Repeat it for every module. Each address is
    /// answered by the module whose code contains it; a miss names the nearest record below
    /// it (module, function, offset).
    #[arg(
        long = "module",
        value_name = "FILE@BIAS",
        value_parser = parse_module,
        requires = "lookup",
        conflicts_with = "files"
    )]
    modules: Vec<Module>,
    /// Accept nonzero reserved fields and record counts that do not add up.
    #[arg(long)]
    lenient: bool,
}

/// One `--module FILE@BIAS`.
#[derive(Clone, Debug)]
struct Module {
    path: PathBuf,
    bias: u64,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    r.map_err(|e| format!("`{s}` is not a number: {e}"))
}

/// `FILE@BIAS`, split at the last `@` (a file name may hold one).
fn parse_module(s: &str) -> Result<Module, String> {
    let (path, bias) = s
        .rsplit_once('@')
        .ok_or_else(|| format!("`{s}` is not FILE@BIAS (no `@`)"))?;
    if path.is_empty() {
        return Err(format!("`{s}` names no file before the `@`"));
    }
    Ok(Module {
        path: PathBuf::from(path),
        bias: parse_u64(bias)?,
    })
}

/// The message for a file without a stack map section, where one is needed.
const NO_SECTION: &str =
    "no stack map section (.llvm_stackmaps or __LLVM_STACKMAPS,__llvm_stackmaps)";

fn parse_options(args: &Args) -> ParseOptions {
    ParseOptions {
        strictness: if args.lenient {
            Strictness::Lenient
        } else {
            Strictness::Strict
        },
    }
}

/// Runs the subcommand; each failing file gets one line on stderr.
pub fn run(args: &Args, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    if !args.modules.is_empty() {
        return process_lookup(args, input, out);
    }
    let options = parse_options(args);
    let mut failed = false;
    let mut json_files = Vec::new();
    for path in &args.files {
        let shown = path.display().to_string();
        if let Err(message) = one_file(args, options, input, path, &shown, out, &mut json_files) {
            crate::report(&format!("{shown}: {message}"));
            failed = true;
        }
    }
    if args.json {
        print_json(out, &json!({ "files": json_files }))?;
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// Writes `doc` to `out`, pretty-printed, on its own line.
fn print_json(out: &mut dyn Write, doc: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| Failure::Message(e.to_string()))?;
    writeln!(out, "{text}").map_err(|e| Failure::Message(e.to_string()))
}

/// Handles one file argument: an object file, or a static archive whose object members are
/// handled one after the other as `ARCHIVE(MEMBER)`, as llvm-readobj names them.
fn one_file(
    args: &Args,
    options: ParseOptions,
    input: &Input,
    path: &std::path::Path,
    shown: &str,
    out: &mut dyn Write,
    json: &mut Vec<Value>,
) -> Result<(), String> {
    let data = input.read_unnamed(path)?;
    let Some(members) = archive_members(&data).map_err(|e| e.to_string())? else {
        return one_object(args, options, &data, shown, out, json);
    };
    for member in members {
        let name = format!("{shown}({})", member.name);
        one_object(args, options, member.data, &name, out, json)
            .map_err(|e| format!("member {}: {e}", member.name))?;
    }
    Ok(())
}

/// The tables of `section`, from its relocated bytes when `resolved`; an error names its file
/// offset.
fn tables<'a>(
    section: &'a StackMapSection<'_>,
    resolved: bool,
    options: ParseOptions,
) -> impl Iterator<Item = Result<Table<'a, RunTimeEndian>, String>> + 'a {
    let bytes = if resolved {
        section.resolved()
    } else {
        section.data
    };
    Tables::new(bytes, section.endian, options).map(|t| {
        t.map_err(|e| match e.offset() {
            Some(o) => format!("{e} (file offset {:#x})", section.file_offset + o as u64),
            None => e.to_string(),
        })
    })
}

/// Every table of `section` (see [`tables`]), or the first error.
fn read_tables<'a>(
    section: &'a StackMapSection<'_>,
    resolved: bool,
    options: ParseOptions,
) -> Result<Vec<Table<'a, RunTimeEndian>>, String> {
    tables(section, resolved, options).collect()
}

/// Handles one object file: text goes to `out` as it is made; JSON goes to `json` (one
/// value for the file, or one per looked-up address) for the caller to print once all files
/// are read.
fn one_object(
    args: &Args,
    options: ParseOptions,
    data: &[u8],
    shown: &str,
    out: &mut dyn Write,
    json: &mut Vec<Value>,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let text = args.lookup.is_empty() && !args.json;
    let (info, section) = match find_section(data) {
        Ok(found) => found,
        Err(e) => {
            // An object whose stack map section lies outside the file: llvm-readobj has
            // printed the preamble by then.
            if let (true, Ok(info)) = (text, object_info(data)) {
                write!(out, "{}", readobj::preamble(shown, &info)).map_err(io)?;
            }
            return Err(e.to_string());
        }
    };
    let Some(section) = section else {
        // llvm-readobj prints the preamble alone and succeeds; a lookup has nothing to find.
        if !args.lookup.is_empty() {
            return Err(NO_SECTION.into());
        }
        if args.json {
            json.push(file_json(shown, &info, None, &[], args.load_bias));
        } else {
            write!(out, "{}", readobj::preamble(shown, &info)).map_err(io)?;
        }
        return Ok(());
    };
    if text {
        // llvm-readobj prints the bytes as stored. It prints the preamble before it reads the
        // section, and a table before it reads the next (it reads only the first): so does
        // locus, and a section it cannot read leaves the same text on stdout, its error
        // following on stderr.
        write!(out, "{}", readobj::preamble(shown, &info)).map_err(io)?;
        for t in tables(&section, false, options) {
            write!(out, "{}", readobj::table(&t?)).map_err(io)?;
        }
        return Ok(());
    }
    // Lookups and JSON want real addresses: they read the section with the file's
    // relocations applied.
    let tables = read_tables(&section, true, options)?;

    if !args.lookup.is_empty() {
        let index = StackMapIndex::new(tables, args.load_bias);
        let mut missing = Vec::new();
        for records in index.lookup_all(&args.lookup) {
            let address = records.address();
            let found: Vec<_> = records.collect();
            if found.is_empty() {
                missing.push(format!("{address:#x}"));
            } else if args.json {
                let records: Vec<Value> = found
                    .iter()
                    .map(|r| indexed_json(r, section.arch))
                    .collect();
                json.push(json!({ "file": shown, "address": address, "records": records }));
            } else {
                writeln!(out, "{shown}: {} record(s) at {address:#x}", found.len()).map_err(io)?;
                for r in &found {
                    write!(out, "{}", lookup_text(r, section.arch, args.load_bias)).map_err(io)?;
                }
            }
        }
        if !missing.is_empty() {
            return Err(format!("no stack map record at {}", missing.join(", ")));
        }
        return Ok(());
    }

    json.push(file_json(
        shown,
        &info,
        Some(&section),
        &tables,
        args.load_bias,
    ));
    Ok(())
}

/// One module of a process, read and indexed: its records at their loaded addresses.
struct Loaded<'a> {
    shown: String,
    bias: u64,
    /// The module's code at its loaded addresses.
    code: Vec<std::ops::Range<u64>>,
    arch: Option<Arch>,
    index: StackMapIndex<'a, RunTimeEndian>,
}

impl Loaded<'_> {
    fn contains(&self, address: u64) -> bool {
        self.code.iter().any(|r| r.contains(&address))
    }
}

/// `--lookup` over the modules of a process (`--module FILE@BIAS`): each address is answered
/// by the first module whose code contains it. An address without a record gets a stderr
/// line naming the nearest record below it (in its module, or in any module when none
/// contains it); JSON lists it with `"records": []` and `"nearest_before"`.
fn process_lookup(args: &Args, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    let options = parse_options(args);
    let fail = |module: &Module, message: String| {
        Failure::Message(format!("module {}: {message}", module.path.display()))
    };
    let mut data = Vec::with_capacity(args.modules.len());
    for module in &args.modules {
        data.push(
            input
                .read_unnamed(&module.path)
                .map_err(|e| fail(module, e))?,
        );
    }
    let mut sections = Vec::with_capacity(args.modules.len());
    for (module, bytes) in args.modules.iter().zip(&data) {
        let (info, section) = find_section(bytes).map_err(|e| fail(module, e.to_string()))?;
        let section = section.ok_or_else(|| fail(module, NO_SECTION.into()))?;
        sections.push((info, section));
    }
    let mut loaded = Vec::with_capacity(args.modules.len());
    for (module, (info, section)) in args.modules.iter().zip(&sections) {
        let tables = read_tables(section, true, options).map_err(|e| fail(module, e))?;
        let rebase = |r: &std::ops::Range<u64>| {
            r.start.wrapping_add(module.bias)..r.end.wrapping_add(module.bias)
        };
        loaded.push(Loaded {
            shown: module.path.display().to_string(),
            bias: module.bias,
            code: info.code.iter().map(rebase).collect(),
            arch: section.arch,
            index: StackMapIndex::new(tables, module.bias),
        });
    }

    let io = |e: std::io::Error| Failure::Message(e.to_string());
    let mut json_found = Vec::new();
    let mut misses = Vec::new();
    for &address in &args.lookup {
        let owner = loaded.iter().find(|m| m.contains(address));
        let found: Vec<_> = owner.map_or_else(Vec::new, |m| m.index.lookup(address).collect());
        if let (Some(m), false) = (owner, found.is_empty()) {
            if args.json {
                let records: Vec<Value> = found.iter().map(|r| indexed_json(r, m.arch)).collect();
                json_found.push(json!({
                    "module": m.shown, "load_bias": m.bias, "address": address, "records": records,
                }));
            } else {
                writeln!(
                    out,
                    "{} (load bias {:#x}): {} record(s) at {address:#x}",
                    m.shown,
                    m.bias,
                    found.len()
                )
                .map_err(io)?;
                for r in &found {
                    write!(out, "{}", lookup_text(r, m.arch, m.bias)).map_err(io)?;
                }
            }
            continue;
        }
        // A miss: the nearest record below, in the owner or else in any module.
        let nearest = match owner {
            Some(m) => m.index.nearest_before(address).map(|r| (m, r)),
            None => loaded
                .iter()
                .filter_map(|m| m.index.nearest_before(address).map(|r| (m, r)))
                .max_by_key(|(_, r)| r.address),
        };
        let place = match owner {
            Some(m) => format!("in {}", m.shown),
            None => "in no module's code".to_string(),
        };
        let near_text = match &nearest {
            Some((m, r)) => format!(
                "nearest record before it: {} function {:#x} + {}, Record ID: {}, at {:#x}",
                m.shown,
                r.function.address.wrapping_add(m.bias),
                r.record.instruction_offset(),
                r.record.id(),
                r.address
            ),
            None => "no record before it".to_string(),
        };
        misses.push(format!(
            "no stack map record at {address:#x} ({place}); {near_text}"
        ));
        if args.json {
            let near = nearest.map(|(m, r)| {
                json!({
                    "module": m.shown,
                    "load_bias": m.bias,
                    "function_address": r.function.address.wrapping_add(m.bias),
                    "instruction_offset": r.record.instruction_offset(),
                    "id": r.record.id(),
                    "address": r.address,
                })
            });
            json_found.push(json!({
                "module": owner.map(|m| m.shown.as_str()),
                "address": address,
                "records": [],
                "nearest_before": near,
            }));
        }
    }
    if args.json {
        print_json(out, &json!({ "lookups": json_found }))?;
    }
    for miss in &misses {
        crate::report(&miss.to_string());
    }
    if misses.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

fn reg_name(arch: Option<Arch>, reg: u16) -> Value {
    match arch.and_then(|a| register_name(a, reg)) {
        Some(n) => Value::String(n.into_owned()),
        None => Value::Null,
    }
}

fn location_json(l: &Location, arch: Option<Arch>) -> Value {
    match *l {
        Location::Register { dwarf_reg, size } => {
            json!({ "kind": "Register", "dwarf_reg": dwarf_reg, "register": reg_name(arch, dwarf_reg), "size": size })
        }
        Location::Direct {
            dwarf_reg,
            offset,
            size,
        } => {
            json!({ "kind": "Direct", "dwarf_reg": dwarf_reg, "register": reg_name(arch, dwarf_reg), "offset": offset, "size": size })
        }
        Location::Indirect {
            dwarf_reg,
            offset,
            size,
        } => {
            json!({ "kind": "Indirect", "dwarf_reg": dwarf_reg, "register": reg_name(arch, dwarf_reg), "offset": offset, "size": size })
        }
        Location::Constant { value, size } => {
            json!({ "kind": "Constant", "value": value, "size": size })
        }
        Location::ConstantIndex { index, value, size } => {
            json!({ "kind": "ConstantIndex", "index": index, "value": value, "size": size })
        }
    }
}

fn record_json(
    r: &locus_stackmap::Record<'_, RunTimeEndian>,
    address: Option<u64>,
    arch: Option<Arch>,
) -> Value {
    json!({
        "id": r.id(),
        "instruction_offset": r.instruction_offset(),
        "address": address,
        "section_offset": r.offset(),
        "locations": r.locations().map(|l| location_json(&l, arch)).collect::<Vec<_>>(),
        "live_outs": r.live_outs().map(|lo| json!({
            "dwarf_reg": lo.dwarf_reg, "register": reg_name(arch, lo.dwarf_reg), "size": lo.size
        })).collect::<Vec<_>>(),
    })
}

fn indexed_json(r: &IndexedRecord<'_, RunTimeEndian>, arch: Option<Arch>) -> Value {
    json!({
        "table": r.table,
        "function_address": r.function.address,
        "record": record_json(&r.record, Some(r.address), arch),
    })
}

fn file_json(
    shown: &str,
    info: &ObjectInfo,
    section: Option<&StackMapSection<'_>>,
    tables: &[Table<'_, RunTimeEndian>],
    load_bias: u64,
) -> Value {
    let tables: Vec<Value> = tables
        .iter()
        .map(|t| {
            let functions: Vec<Value> = t
                .functions()
                .map(|f| json!({ "address": f.address, "stack_size": f.static_stack_size(), "record_count": f.record_count }))
                .collect();
            let records: Vec<Value> = t
                .records_with_functions()
                .map(|(f, r)| {
                    let address = f.address.wrapping_add(load_bias).wrapping_add(u64::from(r.instruction_offset()));
                    record_json(&r, Some(address), section.and_then(|s| s.arch))
                })
                .collect();
            json!({
                "offset": t.offset(),
                "size": t.len(),
                "version": t.version(),
                "functions": functions,
                "constants": t.constants().collect::<Vec<_>>(),
                "records": records,
            })
        })
        .collect();
    json!({
        "file": shown,
        "format": format!("{:?}", info.format),
        "architecture": format!("{:?}", info.architecture),
        "llvm_format": names::format_name(info),
        "llvm_arch": names::arch_name(info),
        "big_endian": info.endian == RunTimeEndian::Big,
        "section": section.map(|s| json!({ "address": s.address, "file_offset": s.file_offset, "size": s.data.len() })),
        "tables": tables,
    })
}

/// One looked-up record as text; `bias` is added to the function's address, as it was to
/// the record's.
fn lookup_text(r: &IndexedRecord<'_, RunTimeEndian>, arch: Option<Arch>, bias: u64) -> String {
    use std::fmt::Write as _;
    let name = |reg: u16| {
        arch.and_then(|a| register_name(a, reg))
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    };
    let mut s = String::new();
    let rec = &r.record;
    let _ = writeln!(
        s,
        "  table {}, function {:#x}, Record ID: {}, instruction offset: {}",
        r.table,
        r.function.address.wrapping_add(bias),
        rec.id(),
        rec.instruction_offset()
    );
    for (i, l) in rec.locations().enumerate() {
        let _ = match l {
            Location::Register { dwarf_reg, size } => {
                writeln!(
                    s,
                    "    #{}: Register R#{dwarf_reg}{}, size: {size}",
                    i + 1,
                    name(dwarf_reg)
                )
            }
            Location::Direct {
                dwarf_reg,
                offset,
                size,
            } => {
                writeln!(
                    s,
                    "    #{}: Direct R#{dwarf_reg}{} + {offset}, size: {size}",
                    i + 1,
                    name(dwarf_reg)
                )
            }
            Location::Indirect {
                dwarf_reg,
                offset,
                size,
            } => {
                writeln!(
                    s,
                    "    #{}: Indirect [R#{dwarf_reg}{} + {offset}], size: {size}",
                    i + 1,
                    name(dwarf_reg)
                )
            }
            Location::Constant { value, size } => {
                writeln!(s, "    #{}: Constant {value}, size: {size}", i + 1)
            }
            Location::ConstantIndex { index, value, size } => {
                writeln!(
                    s,
                    "    #{}: ConstantIndex #{index} ({value}), size: {size}",
                    i + 1
                )
            }
        };
    }
    for lo in rec.live_outs() {
        let _ = writeln!(
            s,
            "    live-out R#{}{} ({} bytes)",
            lo.dwarf_reg,
            name(lo.dwarf_reg),
            lo.size
        );
    }
    s
}
