//! A debugger reading the variables of a core file, as gdb's `bt` and `info locals` would.
//!
//! Builds a small C program with `clang-19 -g -O2` in a temporary directory, runs it under
//! gdb until it traps and writes a core there (`generate-core-file`), then, with Locus
//! alone:
//! 1. reads the core (`corefile::parse`: threads' registers from `NT_PRSTATUS`, memory
//!    from `PT_LOAD`, mapped files from `NT_FILE`) and places the executable in it (its
//!    load bias: the program is position-independent);
//! 2. unwinds the trapping thread with the executable's CFI (`unwind::frames`);
//! 3. for each frame in the executable, finds the variables in scope at its PC in the DWARF
//!    (`Binary::variables_at`) and evaluates their location expressions against the frame
//!    (`binary::evaluate_variable_in`), printing each as gdb prints a number of its type.
//!
//! Run: `cargo run -p locus-dwarf --example core_variables`. Exits 1 if a value is not
//! what the program computed, 2 if clang-19 or gdb is missing or fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use locus_dwarf::binary::{evaluate_variable_in, Binary, State, Variable};
use locus_dwarf::callsite::EntryValues;
use locus_dwarf::{corefile, unwind};

/// `area` traps with `product` (a volatile, so in memory) equal to 3 * 2 * 7 * 2 = 84 when
/// run with no arguments (argc = 1).
const PROGRAM: &str = r#"
struct point { long x, y; };

__attribute__((noinline)) long area(struct point *p, long scale) {
  long w = p->x * scale;
  long h = p->y * scale;
  volatile long product = w * h;
  __builtin_trap();
  return product;
}

int main(int argc, char **argv) {
  struct point p = { argc + 2, argc * 7 };
  return (int)area(&p, 2);
}
"#;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `program` with `args`; its standard error if it fails.
fn tool(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program} ({e}); scripts/install-deps installs it"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Builds the program and makes a core of it in `dir`: (executable, core).
fn build_and_crash(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let (src, exe, core) = (dir.join("area.c"), dir.join("area"), dir.join("area.core"));
    std::fs::write(&src, PROGRAM).map_err(|e| format!("{}: {e}", src.display()))?;
    let path = |p: &Path| p.display().to_string();
    tool("clang-19", &["-g", "-O2", &path(&src), "-o", &path(&exe)])?;
    // gdb stops at the trap (SIGILL) and writes the core there.
    let generate = format!("generate-core-file {}", path(&core));
    tool(
        "gdb",
        &["-batch", "-nx", "-ex", "run", "-ex", &generate, &path(&exe)],
    )?;
    if !core.exists() {
        return Err("gdb wrote no core".into());
    }
    Ok((exe, core))
}

/// Prints each variable of one frame as `type name = value`; returns the values that are
/// numbers, by name.
fn frame_variables(vars: &[Variable], state: &State<'_>) -> BTreeMap<String, String> {
    let mut numbers = BTreeMap::new();
    for v in vars {
        // The frame's registers and memory, with this variable's frame base and types.
        let mut target = state.clone().with_variable(v);
        let shown = match evaluate_variable_in(v, vars, &mut target) {
            Ok(found) => match v.number(&found.bits) {
                Some(n) => {
                    numbers.insert(v.name.clone(), n.clone());
                    n
                }
                // No bit defined: the compiler kept the value nowhere at this PC.
                None if found.bits.defined_mask().iter().all(|&m| m == 0) => {
                    "<optimized out>".to_string()
                }
                // A pointer or a struct: its bytes, little-endian.
                None => format!("bytes {}", found.bits.to_hex()),
            },
            // Typically a register the frame no longer has, or an entry value no call
            // site gives: gdb prints `<optimized out>` too.
            Err(e) => format!("<optimized out: {e}>"),
        };
        println!("    {} {} = {shown}", v.type_name, v.name);
    }
    numbers
}

fn run(dir: &Path) -> Result<bool, String> {
    let (exe, core) = build_and_crash(dir)?;
    let exe_name = exe.display().to_string();
    let exe_bytes = std::fs::read(&exe).map_err(|e| format!("{exe_name}: {e}"))?;
    let core_bytes = std::fs::read(&core).map_err(|e| format!("{}: {e}", core.display()))?;

    // 1. The stopped target, and where the executable sits in it.
    let mut stopped =
        corefile::parse(&core_bytes, &core.display().to_string()).map_err(|e| e.to_string())?;
    let placed = stopped
        .place(&exe_bytes, &exe_name)
        .map_err(|e| e.to_string())?;
    corefile::check_binary(&stopped, &placed, &exe_bytes).map_err(|e| e.to_string())?;
    // A core leaves out read-only file pages (code, constants): take them from the file.
    stopped.fill_from_file(&placed, &exe_bytes);
    let thread = stopped.thread(1).map_err(|e| e.to_string())?;
    println!(
        "core: {} thread(s), thread 1 (tid {}) stopped by signal {} at pc {:#x}; load bias {:#x}",
        stopped.threads.len(),
        thread.tid,
        thread.signal,
        thread.pc,
        placed.load_bias
    );

    // 2. Its frames, unwound with the CFI of each mapped file (read from this machine).
    let (frames, _why_stopped) =
        unwind::frames(&stopped, thread, unwind::MAX_FRAMES, &mut |path| {
            std::fs::read(path).ok()
        });
    let binary = Binary::parse(&exe_bytes)
        .map_err(|e| e.to_string())?
        .with_load_bias(placed.load_bias);

    // Parameters that -O2 did not keep (`DW_OP_entry_value`) come from the caller's
    // call site (`DW_TAG_call_site_parameter`), evaluated in the caller's frame.
    let sites = binary.call_sites().map_err(|e| e.to_string())?;
    let none = BTreeMap::new();

    // 3. The variables of each frame in the executable.
    let mut found = BTreeMap::new();
    for (i, frame) in frames.iter().enumerate() {
        // Callers' PCs are return addresses: look their scopes up one byte before.
        let pc = frame.lookup_pc(i);
        let functions = binary.functions_at(pc).map_err(|e| e.to_string())?;
        if frame.module.as_deref() != Some(placed.path.as_str()) || functions.is_empty() {
            continue; // the C library's frames, _start: no DWARF here
        }
        println!(
            "  frame #{i} pc {:#x} in {}",
            frame.pc,
            functions.join(" < ")
        );
        let entry = match frames.get(i + 1) {
            Some(caller) => {
                let in_caller = stopped.state(&caller.registers, caller.cfa, &none);
                sites.entry_values(pc, caller.pc, in_caller)
            }
            None => EntryValues::refused("the outermost frame has no caller"),
        };
        let mut state = stopped.state(&frame.registers, frame.cfa, &none);
        state.entry = Some(&entry);
        let vars = binary.variables_at(pc).map_err(|e| e.to_string())?;
        for (name, value) in frame_variables(&vars, &state) {
            found.insert(format!("#{i} {name}"), value);
        }
    }

    // What the program computed: the volatile product is in memory, so it is always
    // there; `scale` (2) only through main's call site.
    let value = |name: &str| found.get(name).map(String::as_str);
    Ok(value("#0 product") == Some("84") && value("#0 scale") == Some("2"))
}

fn main() -> ExitCode {
    let dir = TempDir(std::env::temp_dir().join(format!("locus-core-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir_all(&dir.0) {
        eprintln!("core_variables: {}: {e}", dir.0.display());
        return ExitCode::from(2);
    }
    match run(&dir.0) {
        Ok(true) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("core_variables: in frame #0, `product` is not 84 or `scale` not 2");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("core_variables: {e}");
            ExitCode::from(2)
        }
    }
}
