//! `locus`: the runtime side of LLVM's code-generation contracts, from the command line.
//!
//! This binary only parses arguments, reads files and formats output; everything else
//! lives in the `locus-*` crates.

mod dwarf;
mod gc;
mod input;
mod jit;
mod memref;
mod readobj;
mod sme;
mod stackmap;
mod tour;
mod watchdog;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The runtime side of LLVM's code-generation contracts.
#[derive(Parser)]
#[command(name = "locus", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Read at most this many bytes of any one input file (`-` is standard input); a
    /// bigger or endless input is an error. It also bounds what an object's compressed
    /// DWARF sections decompress to, together (`dwarf vars`).
    #[arg(
        long,
        global = true,
        value_name = "BYTES",
        default_value_t = input::DEFAULT_LIMIT
    )]
    max_input_bytes: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Print, query and check the stack maps (.llvm_stackmaps) of object files.
    ///
    /// Default output is the text `llvm-readobj --stackmap` prints, for every table in the
    /// section (llvm-readobj prints only the first).
    Stackmap(stackmap::Args),
    /// Precise GC for any LLVM frontend, Julia-style: place GC roots late, run under a
    /// stress collector.
    #[command(subcommand)]
    Gc(gc::Command),
    /// DWARF location expressions with location descriptions on the stack: evaluate,
    /// disassemble, and find the variables of a binary at a PC.
    #[command(subcommand)]
    Dwarf(dwarf::Command),
    /// MLIR memrefs: compile kernels to shared libraries and call them on .npy files.
    #[command(subcommand)]
    Memref(memref::Command),
    /// AArch64 SME: where calls switch streaming mode or save ZA, and what breaks the rules.
    #[command(subcommand)]
    Sme(sme::Command),
    /// JIT: compile LLVM IR in process, keeping its stack maps, and run it.
    #[command(subcommand)]
    Jit(jit::Command),
    /// A walk through every contract Locus implements, on embedded samples.
    Tour(tour::Args),
}

/// Why a subcommand failed; either way the exit status is 1.
pub enum Failure {
    /// Printed as `locus: <message>`.
    Message(String),
    /// The subcommand already printed its errors.
    Reported,
}

/// Standard output as the subcommands write it. A reader that stops early (`locus tour |
/// head -1`) ends the process quietly, as it ends `cat`: by SIGPIPE's default action, not
/// by a "Broken pipe" error or a panic. Any other error (a full disk) is returned, naming
/// standard output, so the subcommand fails with exit status 1 instead of reporting
/// success after lost output.
///
/// SIGPIPE itself stays ignored (as Rust leaves it) until a program runs
/// ([`sigpipe_for_program`], [`sigpipe_for_program_beside_tools`]): a child tool (llc-19,
/// mlir-opt-19) that exits before reading all its input is then an error of that tool, not
/// a silent death of Locus by the signal.
struct Stdout<'a>(std::io::StdoutLock<'a>);

impl Stdout<'_> {
    fn checked<T>(result: std::io::Result<T>) -> std::io::Result<T> {
        result.map_err(|e| {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                die_of_sigpipe();
            }
            std::io::Error::new(e.kind(), format!("standard output: {e}"))
        })
    }
}

impl Write for Stdout<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Stdout::checked(self.0.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Stdout::checked(self.0.flush())
    }
}

/// Ends the process by SIGPIPE's default action: quietly, with the status a shell expects
/// of a writer whose reader went away.
fn die_of_sigpipe() -> ! {
    // SAFETY: restores a signal's default action; no memory is touched.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // SAFETY: raising it under the default action ends the process.
    unsafe { libc::raise(libc::SIGPIPE) };
    std::process::exit(128 + libc::SIGPIPE)
}

/// Gives SIGPIPE its default action for a program Locus runs in its own process (after any
/// child tool has run): a reader that stops early ends it as it would end the program on
/// its own, instead of the program looping on failed writes.
pub fn sigpipe_for_program() {
    // SAFETY: sets a signal's disposition; no handler of ours is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// [`sigpipe_for_program`] for a run whose child tools (mlir-opt-19, llc-19...) run on the
/// same thread as the program, between its start and the call (`memref run`): from now on
/// SIGPIPE ends the process by its default action, as it would end the program on its own
/// (as `cat` ends), unless this process has a child process at that moment. A write to a
/// tool's input pipe after the tool exited happens while the tool is still a child (not
/// yet waited for), and fails with `EPIPE` instead, which makes it that tool's error as
/// before. A program that runs child processes of its own and writes to a closed pipe
/// while one lives gets `EPIPE` too, as under an ignored SIGPIPE.
pub fn sigpipe_for_program_beside_tools() {
    extern "C" fn on_sigpipe(_: std::ffi::c_int) {
        // SAFETY: the calling thread's errno location is always valid.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: as above.
        let saved = unsafe { *errno };
        // SAFETY: a zeroed siginfo_t is a valid out-value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // WNOWAIT | WNOHANG: asks whether a child exists, waiting for none and reaping
        // none (the system call is async-signal-safe; it fails with ECHILD if none).
        // SAFETY: a valid out-pointer.
        let has_child = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WSTOPPED | libc::WCONTINUED | libc::WNOHANG | libc::WNOWAIT,
            )
        } == 0;
        if !has_child {
            // SAFETY: restores the default action; no memory is touched.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
            // SAFETY: the signal again: blocked while this handler runs, it ends the process
            // as soon as the handler returns.
            unsafe { libc::raise(libc::SIGPIPE) };
        }
        // SAFETY: as above.
        unsafe { *errno = saved };
    }
    // SAFETY: a zeroed sigaction is a valid value to fill in.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_sigpipe as extern "C" fn(std::ffi::c_int) as libc::sighandler_t;
    // SAFETY: a valid signal set to initialise.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: installs a valid action whose handler is async-signal-safe (above).
    unsafe { libc::sigaction(libc::SIGPIPE, &action, std::ptr::null_mut()) };
}

/// Every thread of the process is made through this `pthread_create`, which gives it an
/// alternate signal stack before its start routine runs
/// ([`locus_gc::signals::program_pthread_create`]): a stack overflow in any thread, one a
/// program run by `jit run` or `gc run` makes, one a shared library makes (MLIR's async
/// runtime for `memref run`, a `dlopen`ed library, `dlsym(RTLD_DEFAULT,
/// "pthread_create")`), or Rust's own, is then a `locus:` line and exit status 3 instead of
/// a silent death. The definition is in the executable, so Rust's `std::thread` binds to
/// it when linking, and it is in the dynamic symbol table (the linker exports it because
/// libLLVM and libc, linked against, reference or define the name; the `threads` tests
/// check it), so every library resolves to it when loaded; the C library's own is the
/// next definition (`dlsym(RTLD_NEXT)`).
///
/// # Safety
///
/// As for `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Option<extern "C" fn(*mut std::ffi::c_void) -> *mut std::ffi::c_void>,
    arg: *mut std::ffi::c_void,
) -> std::ffi::c_int {
    // SAFETY: the caller's promise, forwarded.
    unsafe { locus_gc::signals::program_pthread_create(thread, attr, start, arg) }
}

/// Writes `locus: MESSAGE` to standard error. A closed or full standard error is no
/// reason to panic: the exit status still tells.
pub fn report(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "locus: {message}");
}

/// Prints `--help`, `--version` or a usage error as clap does (status 0 or 2), except that
/// help lost to a full disk is an error (status 1).
fn usage(e: &clap::Error) -> ExitCode {
    let printed = e.print().and_then(|()| std::io::stdout().flush());
    match Stdout::checked(printed) {
        Err(lost) if !e.use_stderr() => {
            report(&lost.to_string());
            ExitCode::FAILURE
        }
        _ => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    // LLVM's fatal errors (and its out-of-memory on a damaged input) end with a `locus:`
    // line and status 1; a crash anywhere else, in Locus or in LLVM reading a damaged
    // input, with a `locus:` line naming the signal and function, status 3.
    locus_llvm::report_fatal_errors();
    locus_gc::signals::install();
    let _crash_scope = locus_gc::signals::fault_scope(false);
    let input = input::Input::new(cli.max_input_bytes);
    let mut out = Stdout(std::io::stdout().lock());
    let result = match cli.command {
        Command::Stackmap(args) => stackmap::run(&args, &input, &mut out),
        Command::Gc(command) => gc::run_command(&command, &input, &mut out),
        Command::Dwarf(command) => dwarf::run_command(&command, &input, &mut out),
        Command::Memref(command) => memref::run_command(&command, &input, &mut out),
        Command::Sme(command) => sme::run_command(&command, &input, &mut out),
        Command::Jit(command) => jit::run_command(&command, &input, &mut out),
        Command::Tour(args) => tour::run(&args, &mut out),
    };
    // Output still buffered is output too: failing to write it fails the command.
    let flushed = out.flush();
    let result = result.and_then(|()| flushed.map_err(|e| Failure::Message(e.to_string())));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Message(message)) => {
            report(&message);
            ExitCode::FAILURE
        }
        Err(Failure::Reported) => ExitCode::FAILURE,
    }
}
