//! `locus stackmap FILE...`: print, query and check stack map sections.

use std::io::Write;
use std::path::PathBuf;

use locus_stackmap::object::{find_section, ObjectInfo, StackMapSection};
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
    /// Object files, executables or shared libraries (ELF, Mach-O, COFF).
    #[arg(required = true)]
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
    /// Accept nonzero reserved fields and record counts that do not add up.
    #[arg(long)]
    lenient: bool,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    r.map_err(|e| format!("`{s}` is not a number: {e}"))
}

/// Runs the subcommand; each failing file gets one line on stderr.
pub fn run(args: &Args, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    let options = ParseOptions {
        strictness: if args.lenient {
            Strictness::Lenient
        } else {
            Strictness::Strict
        },
    };
    let mut failed = false;
    let mut json_files = Vec::new();
    for path in &args.files {
        let shown = path.display().to_string();
        if let Err(message) = one_file(args, options, input, path, &shown, out, &mut json_files) {
            eprintln!("locus: {shown}: {message}");
            failed = true;
        }
    }
    if args.json {
        let doc = json!({ "files": json_files });
        let text =
            serde_json::to_string_pretty(&doc).map_err(|e| Failure::Message(e.to_string()))?;
        writeln!(out, "{text}").map_err(|e| Failure::Message(e.to_string()))?;
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// Handles one file: text goes to `out` as it is made; JSON goes to `json` (one value for
/// the file, or one per looked-up address) for the caller to print once all files are read.
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
    let (info, section) = find_section(&data).map_err(|e| e.to_string())?;
    let section = section
        .ok_or("no stack map section (.llvm_stackmaps or __LLVM_STACKMAPS,__llvm_stackmaps)")?;
    // llvm-readobj prints the bytes as stored; lookups and JSON want real addresses, so they
    // read the section with the file's relocations applied.
    let bytes = if !args.lookup.is_empty() || args.json {
        section.resolved()
    } else {
        section.data
    };
    let tables = Tables::new(bytes, section.endian, options)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| match e.offset() {
            Some(o) => format!("{e} (file offset {:#x})", section.file_offset + o as u64),
            None => e.to_string(),
        })?;
    let io = |e: std::io::Error| e.to_string();

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
                    write!(out, "{}", lookup_text(r, section.arch)).map_err(io)?;
                }
            }
        }
        if !missing.is_empty() {
            return Err(format!("no stack map record at {}", missing.join(", ")));
        }
        return Ok(());
    }

    if args.json {
        json.push(file_json(shown, &info, &section, &tables, args.load_bias));
        return Ok(());
    }
    write!(out, "{}", readobj::preamble(shown, &info)).map_err(io)?;
    for t in &tables {
        write!(out, "{}", readobj::table(t)).map_err(io)?;
    }
    Ok(())
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
    section: &StackMapSection<'_>,
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
                    record_json(&r, Some(address), section.arch)
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
        "big_endian": info.endian == RunTimeEndian::Big,
        "section": { "address": section.address, "file_offset": section.file_offset, "size": section.data.len() },
        "tables": tables,
    })
}

fn lookup_text(r: &IndexedRecord<'_, RunTimeEndian>, arch: Option<Arch>) -> String {
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
        r.function.address,
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
