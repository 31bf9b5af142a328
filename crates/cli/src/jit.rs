//! `locus jit`: compile LLVM IR in process with the JIT that keeps its stack maps, and run it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use locus_jit::Runtime;
use locus_llvm::{Context, Module};

use crate::input::Input;
use crate::{watchdog, Failure};

/// The `locus jit` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Compile a module for this machine and call its entry function.
    ///
    /// The entry must be defined as `i64 NAME()` with the C calling convention; its result
    /// is printed on its own line. External functions resolve to this process's symbols
    /// (libc). The module's stack maps (llvm.experimental.stackmap, patchpoint and
    /// statepoint records) are captured with the code and indexed by address, and its stack
    /// maps' shadows can be patched to deoptimize (--invalidate).
    ///
    /// The module runs with Locus's runtime linked in; it declares what it uses of it (C
    /// calling convention, i64 and ptr are 64 bits):
    ///
    ///   i64  @locus_shape_new(ptr %names, i64 %count)     a shape: `count` distinct
    ///        property names (the i64s at `names`, a global or on the stack); its ID
    ///   i64  @locus_shape_change(i64 %shape, ptr %names, i64 %count)   the same names in
    ///        a new order: objects rearranged, sites specialized on the shape patched
    ///        back; returns how many
    ///   ptr  @locus_object_new(i64 %shape)                an object, every property 0
    ///   void @locus_object_set(ptr %object, i64 %name, i64 %value)
    ///   i64  @locus_object_get(ptr %object, i64 %name)    a read without a cache
    ///   i64  @locus_ic_miss(ptr %object, i64 %name)       the miss handler: the target of
    ///        a property read `call i64 (...) @llvm.experimental.patchpoint.i64(i64 ID, i32
    ///        BYTES, ptr @locus_ic_miss, i32 2, ptr %object, i64 %name)`, BYTES >= 13 (a
    ///        site of 41 or more gets the fast path written into it); the first read of
    ///        each shape at a site misses, then the site is patched to answer it; a
    ///        site that sees more than --max-shapes shapes is answered by a lookup
    ///   i64  @locus_poll(i64 %value)                      returns `value`
    ///   i64  @locus_invalidate(ptr %function)             deoptimize a function of the
    ///        module: its stack maps' shadows (>= 5 bytes) are patched; returns how many
    ///        (as --invalidate: only the entry's own frame deoptimizes)
    ///
    /// A property name is any 64-bit number; an object is an address the runtime handed
    /// out (its words: the shape's ID, then one per property in the shape's order). A bad
    /// argument (a null or unknown object, an unknown shape, a property its shape lacks)
    /// ends the run with a `locus:` line naming the entry point and its caller: exit
    /// status 1. Patched reads check the object too: a copy of an object, an address
    /// inside one or null is refused as by the miss handler. Objects live in the
    /// runtime's arena of 256 MiB: an object that does not fit is an error too. A fault
    /// in the compiled code ends the run with a `locus:` line naming the signal and the
    /// function: exit status 3; so do abort(), a signal the program sends itself
    /// (raise), and a stack overflow in any thread it creates with pthread_create.
    /// --timeout ends a run that takes too long: exit status 124.
    #[command(verbatim_doc_comment)]
    Run {
        /// The module (.ll or .bc).
        file: PathBuf,
        /// The function to call.
        #[arg(long, value_name = "NAME", default_value = "main")]
        entry: String,
        /// After the result, print `records: N` (the stack map records captured) and the
        /// runtime's counts: patches, misses, hits, deopts, stubs (made, each encoded
        /// into the runtime's stub memory), lookups (reads at megamorphic sites).
        #[arg(long)]
        stats: bool,
        /// Invalidate this function before the call (repeatable): its stack maps'
        /// shadows call the deopt entry, and a call that reaches one is finished by
        /// Locus's interpreter from the record's live values. Only the entry's own frame
        /// deoptimizes; reaching a patched shadow in a function called by compiled code
        /// is an error.
        #[arg(long, value_name = "FUNCTION")]
        invalidate: Vec<String>,
        /// Never patch a property read: every read goes through the miss handler (misses
        /// count every read, hits stay 0). The answers are the same, errors included: a
        /// patched site checks that the object is one the runtime handed out before it
        /// reads its shape, and leaves anything else to the miss handler.
        #[arg(long)]
        no_cache: bool,
        /// The most shapes a property read is specialized on; a read that sees one more
        /// becomes megamorphic: the runtime's lookup answers it from then on (counted as
        /// lookups), and it is never patched again.
        #[arg(long, value_name = "N", default_value_t = 4)]
        max_shapes: usize,
        #[arg(long, value_name = "SECONDS", value_parser = watchdog::parse_seconds, help = watchdog::HELP)]
        timeout: Option<Duration>,
    },
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

/// Runs a `locus jit` subcommand.
pub fn run_command(command: &Command, input: &Input, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Run {
            file,
            entry,
            stats,
            invalidate,
            no_cache,
            max_shapes,
            timeout,
        } => {
            let name = file.display().to_string();
            let _watchdog = watchdog::start(*timeout, &name);
            let ir = input.read(file).map_err(fail)?;
            let text = check_entry(&name, &ir, entry)?;
            let options = RunOptions {
                stats: *stats,
                caching: !*no_cache,
                max_shapes: *max_shapes,
            };
            run_with_runtime(&name, &text, entry, options, invalidate, out)
        }
    }
}

/// How `jit run` runs the module.
#[derive(Clone, Copy)]
// Read only by the runtime, which runs on x86-64 Linux alone.
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code)
)]
struct RunOptions {
    /// Print the counts after the result.
    stats: bool,
    /// Patch property reads (off: `--no-cache`).
    caching: bool,
    /// `--max-shapes`.
    max_shapes: usize,
}

/// Compiles `text` with the JIT runtime linked in, invalidates `invalidate`, calls `entry`
/// and prints its result (and the runtime's counts with `stats`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn run_with_runtime(
    name: &str,
    text: &str,
    entry: &str,
    options: RunOptions,
    invalidate: &[String],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    use locus_jit::Options;

    // A fault in the compiled code ends the process with one `locus:` line naming the
    // signal, the address and the function, and exit status 3 (the runtime registers the
    // functions and opens the scope around the call; the program's threads get an
    // alternate signal stack, so their overflows are reported too). A crash of LLVM
    // compiling it is main's crash scope's.
    let runtime_options = Options {
        caching: options.caching,
        max_shapes: options.max_shapes,
        report_faults: true,
        ..Options::default()
    };
    let rt = Runtime::with_options(name, text, runtime_options).map_err(fail)?;
    for function in invalidate {
        rt.invalidate(function).map_err(fail)?;
    }
    crate::sigpipe_for_program();
    // SAFETY: `check_entry` found `entry` defined as `i64 ()` with the C calling
    // convention. What the code does is the module's business, as with any program run.
    let result = unsafe { rt.call(entry, &[]) };
    let result = result.map_err(fail)?;
    writeln!(out, "{result}").map_err(fail)?;
    if options.stats {
        let s = rt.stats();
        writeln!(out, "records: {}", rt.jit().stack_maps().len()).map_err(fail)?;
        writeln!(out, "patches: {}", s.patches).map_err(fail)?;
        writeln!(out, "misses: {}", s.misses).map_err(fail)?;
        writeln!(out, "hits: {}", s.hits).map_err(fail)?;
        writeln!(out, "deopts: {}", s.deopts).map_err(fail)?;
        writeln!(out, "stubs: {}", s.stubs).map_err(fail)?;
        writeln!(out, "lookups: {}", s.lookups).map_err(fail)?;
    }
    Ok(())
}

/// The runtime's trampolines are x86-64 assembly: elsewhere `jit run` refuses.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn run_with_runtime(
    _name: &str,
    _text: &str,
    _entry: &str,
    _options: RunOptions,
    _invalidate: &[String],
    _out: &mut dyn Write,
) -> Result<(), Failure> {
    Err(fail(
        "locus jit run needs x86-64 Linux (the runtime's trampolines)",
    ))
}

/// Fails unless the module (IR text or bitcode) defines `entry` as `i64 ()` with the C
/// calling convention; returns the module as IR text, which the runtime reads.
fn check_entry(name: &str, ir: &[u8], entry: &str) -> Result<String, Failure> {
    let context = Context::new();
    let module = Module::parse_ir(&context, name, ir).map_err(fail)?;
    let Some(function) = module.function(entry).filter(|f| !f.is_declaration()) else {
        return Err(fail(format!("{name}: no function @{entry} is defined")));
    };
    let returns_i64 = function.return_type().int_width() == Some(64);
    // 0 is LLVM's `ccc`, the C calling convention.
    if !returns_i64 || !function.params().is_empty() || function.calling_convention() != 0 {
        return Err(fail(format!(
            "{name}: @{entry} must be `i64 @{entry}()` with the C calling convention, not `{}`",
            function
                .print()
                .lines()
                .next()
                .unwrap_or_default()
                .trim_end_matches(" {")
        )));
    }
    Ok(module.print())
}
