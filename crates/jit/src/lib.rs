//! The runtime side of patch points and stack maps, running for real on x86-64 Linux:
//! inline caches on `llvm.experimental.patchpoint` sites, and deoptimization through the
//! shadow of an `llvm.experimental.stackmap` (spec 000, Motivation: "inline caches" and
//! "deoptimization").
//!
//! A [`Runtime`] compiles one program with [`StackMapJit`] and links it against its own
//! entry points, which the IR declares:
//!
//! - `declare i64 @locus_ic_miss(ptr, i64)`: the miss handler of an inline cache. A
//!   property read `get(obj, name)` is a patch point that first targets it:
//!   `call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 ID, i32 16,
//!   ptr @locus_ic_miss, i32 2, ptr %obj, i64 NAME)`. On a miss the handler finds the site
//!   from its return address (the patch point's record is at the start of the reserved
//!   bytes, which LLVM filled with a 13-byte call), looks the property up in the object's
//!   shape, and patches the site to call a stub for the shapes seen there, x86-64 code
//!   encoded directly into stub memory the runtime manages ([`stub`]; no LLVM module, a
//!   few microseconds a stub, and a stub's memory is reused once no site calls it); later
//!   reads of those shapes do not enter the runtime. A site specialized on
//!   [`Options::max_shapes`] shapes (polymorphic) that sees one more becomes megamorphic:
//!   it is patched to call the runtime's lookup, which answers every read from the
//!   object's shape without patching again. When the site reserves enough bytes (33 for
//!   one shape without hit counting, 41 with it, the runtime's object index being below
//!   2 GiB as it is when there is room; 37 and 41 elsewhere; [`fast_path`] gives the encoding and the
//!   sizes) the handler writes the stub's fast path into the site itself instead: check
//!   the object, compare the shape, load the slot, and call the miss handler for other
//!   objects and shapes ([`Options::inline_fast_path`]). The miss handler finds a site from its return
//!   address (`return address - 13` for a call, a table for an inline fast path) and
//!   rewrites that return address to the end of the site, so a site can change form while
//!   a miss in it is pending. See [`Runtime::change_shape`] for how sites
//!   are patched back.
//! - `declare i64 @locus_poll(i64)`: a runtime call that returns its argument. The
//!   runtime may invalidate compiled code during it ([`Runtime::invalidate_at_poll`]).
//!   A stack map after it, `call void (i64, i32, ...) @llvm.experimental.stackmap(i64 ID,
//!   i32 8, live values...)`, is a deoptimization point: invalidating the function
//!   ([`Runtime::invalidate`]) overwrites the shadow of each of its stack maps with a call
//!   to the deopt entry, which saves every register and hands Rust the register file and
//!   the frame; Rust reads the record's live values and finishes the function in an
//!   interpreter of the IR after the stack map (`deopt.rs`), and the result is returned from
//!   the compiled function's caller, [`Runtime::call`], as if the code had returned it.
//!   Only a frame [`Runtime::call`] called directly is deoptimized (the function record's
//!   stack size tells): returning into a compiled caller would need the caller's
//!   callee-saved registers, which the deoptimized function saved where only its unwind
//!   tables say, so reaching an invalidated shadow in a deeper frame is an error of the
//!   call.
//!
//! # Object models
//!
//! The caches read objects through an [`ObjectModel`] ([`object_model`]): where the shape
//! word is, how a property name resolves for a shape (a slot at a byte offset, or a slow
//! path), what a miss does, and whether the objects live in an [`ObjectArena`] whose index
//! the compiled code checks them against. The built-in shapes model, [`Shapes`]
//! ([`shapes`]), is one ordinary implementation, in a module of its own: [`Runtime::new`]
//! runs the program over a `Shapes` of its own, [`Runtime::with_model`] over any model
//! (a `Shapes` too, or a language's own objects, whose layout changes it reports with
//! [`Runtime::invalidate_shape`]). The caches, stubs, fast paths and patching know only the
//! trait. The runtime names `Shapes` in two places: the program's surface below
//! (`@locus_shape_new` and friends make shapes and objects for the IR, in the runtime's
//! [`Runtime::shapes`]), and the conveniences that forward to it ([`Runtime::add_shape`],
//! [`Runtime::new_object`], [`Runtime::change_shape`], ...). The stubs and fast paths are
//! encoded for the model's [`Layout`] ([`encode_stub_in`], [`encode_fast_path_in`]).
//!
//! # The program's surface
//!
//! A program makes its own shapes and objects, changes shapes and invalidates code through
//! these functions, which it declares and the JIT resolves to the runtime (every one with
//! the C calling convention; `i64` and `ptr` are 64 bits):
//!
//! | declaration | what it does |
//! |---|---|
//! | `i64 @locus_shape_new(ptr %names, i64 %count)` | a new shape with `count` distinct property names, the `i64`s at `names`; returns its ID |
//! | `i64 @locus_shape_change(i64 %shape, ptr %names, i64 %count)` | [`Runtime::change_shape`]: the shape's properties in a new order (the same names), its objects rearranged, every site specialized on it patched back; returns how many sites were |
//! | `ptr @locus_object_new(i64 %shape)` | a new object of the shape, every property 0; it lives as long as the runtime |
//! | `void @locus_object_set(ptr %object, i64 %name, i64 %value)` | sets a property |
//! | `i64 @locus_object_get(ptr %object, i64 %name)` | reads a property without a cache |
//! | `i64 @locus_ic_miss(ptr %object, i64 %name)` | the miss handler: only as the target of a patch point (above) |
//! | `i64 @locus_poll(i64 %value)` | returns `value`; the runtime may invalidate code meanwhile (above) |
//! | `i64 @locus_invalidate(ptr %function)` | [`Runtime::invalidate`] of a function of the program; returns the shadows patched. A stack map right after the call deoptimizes the caller at once if it invalidated itself |
//!
//! A *shape* is a list of property names; a *property name* is any 64-bit number (an
//! interned string's ID in a real language; `120` for `x` in the examples); shape IDs are
//! handed out from 0. An *object* is the address of a block of 64-bit words the runtime's
//! [`Shapes`] owns, in its arena: the shape's ID, then one word per property in the shape's order,
//! which is what the fast paths read. Nothing the program passes is trusted: an object must
//! be an address the runtime handed out, a shape an ID it handed out, the names an array
//! lying in a section of the program (a global) or on the program's stack, and a function
//! a function of the program. A bad argument (null or unknown object, unknown shape, a
//! property the object's shape lacks, a name given twice, names out of bounds), or any
//! other failure of the runtime during a call, ends the call at once: the compiled frames
//! are dropped, as a deoptimization drops them, and [`Runtime::call`] returns the error,
//! which names the entry point and the function that called it.
//!
//! A patched site answers as the miss handler would, errors included, so caching changes
//! no answer: before it reads an object's shape, its stub or inline fast path looks the
//! address up in the runtime's *object index*, a table beside the arena in which the word
//! of each object's address holds that address and no other address finds itself
//! ([`Runtime::is_indexed`], always [`Runtime::is_object`]'s answer). A copy of an object's
//! words elsewhere, an address inside an object, null, an object of another runtime or of
//! a dropped one thus goes to the miss handler, which refuses it, and the check itself
//! reads only the index, which is mapped whole. The arena holds 256 MiB of objects
//! (reserved when the runtime is made, used as objects are made); an object that does not
//! fit is an error. What the promise does not cover: a program that writes an object's
//! words itself instead of through `@locus_object_set` (its shape word, say) has changed
//! the runtime's memory, which both paths then read.
//!
//! ```
//! use locus_jit::Runtime;
//!
//! let ir = r#"
//! declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
//! declare i64 @locus_ic_miss(ptr, i64)
//! declare i64 @locus_shape_new(ptr, i64)
//! declare ptr @locus_object_new(i64)
//! declare void @locus_object_set(ptr, i64, i64)
//!
//! @point = private constant [2 x i64] [i64 120, i64 121]
//!
//! define i64 @main() {
//!   %shape = call i64 @locus_shape_new(ptr @point, i64 2)
//!   %o = call ptr @locus_object_new(i64 %shape)
//!   call void @locus_object_set(ptr %o, i64 121, i64 42)
//!   %y = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 1, i32 48, ptr @locus_ic_miss, i32 2, ptr %o, i64 121)
//!   ret i64 %y
//! }
//! "#;
//! let rt = Runtime::new("point.ll", ir, true)?;
//! // SAFETY: `@main` takes no arguments.
//! assert_eq!(unsafe { rt.call("main", &[])? }, 42);
//! assert_eq!(rt.stats().misses, 1);
//! # Ok::<(), locus_llvm::Error>(())
//! ```
//!
//! The shadow must be at least 5 bytes: the patch is a `call rel32` to a stub the runtime
//! adds to the program (`@locus.deopt.stub`, which jumps on through a literal), so it
//! clobbers no register the record may name. Every patch rewrites all reserved bytes,
//! padded with nops, through `locus_stackmap::patch::write_code` (W^X).
//!
//! What each site reserves is read from the IR (the stack map section does not record it).
//!
//! # Live-out registers
//!
//! Programs are compiled without patch point live-outs (LLVM's
//! `-enable-patchpoint-liveness=false` while the runtime's program compiles, and back on
//! afterwards): LLVM 19 crashes computing them on x86-64 for any patch point followed by a
//! call in the same function (the shadow stack pointer is live there; llvm-project issue
//! 53828), and the runtime's patch points use the C calling convention, whose call
//! clobbers what a live-out list would spare. LLVM's options are process globals, so no
//! other compilation of this crate runs meanwhile; other modules keep their live-outs.
//!
//! # AArch64
//!
//! The runtime is x86-64 only: its trampolines, deopt entry and inline fast paths are
//! x86-64 code, and no AArch64 Rust target is installed where it is built. Its stubs have
//! an AArch64 encoding ([`encode_stub_aarch64`], any [`Layout`]), checked against
//! `llvm-mc-19` and run under `qemu-aarch64-static` in a freestanding C harness by the
//! tests. What carries
//! over is tested under `qemu-aarch64-static` (`tests/jit_aarch64.rs`): stack maps of
//! AArch64 code compiled in process, patch point sites found from a miss's return address
//! (`- 16`), Locus's AArch64 call sequences (LLVM's own bytes, `llvm-mc-19`'s encodings)
//! written over the sites and run, with the same answers and the misses a per-site cache
//! predicts. LLVM 19 emits a symbolic patch point target on AArch64 as the address of its
//! own in-memory symbol object, so AArch64 programs must give the target as an integer.
//!
//! # Threads and state
//!
//! Compiled code enters the runtime only through [`Runtime::call`]; the entry points find
//! their runtime and the call's frame on a per-thread stack of the calls in progress (the
//! one piece of per-thread state; a failure is recorded there, for the call it ends). A
//! thread that runs the program's code without [`Runtime::call`] (a thread the program
//! starts itself) has no runtime there: a miss, a lookup or a surface call on it aborts
//! the process.
//!
//! Without [`Options::concurrent_patching`] the program runs and is patched only on the
//! thread that made the runtime: [`Runtime::call`] and every patch from another thread
//! is an error, so the single-thread writer (pages read+write, then read+execute) never
//! changes code another thread runs. With it, `Runtime` is shared by reference between
//! threads (it is `Sync`), and any of them calls the program: misses and megamorphic
//! lookups run on the thread that read, the runtime's state is behind a mutex, and the
//! miss handler holds the runtime's patch lock while it decides a site's new cases and
//! patches it, as do [`Runtime::specialize`], [`Runtime::invalidate_shape`] and
//! [`Runtime::invalidate`], so patches happen one at a time whichever thread makes them.
//! Each patch follows x86-64's cross-modifying-code protocol (`cross_modify.rs`: a `jmp $`
//! over the site's first bytes, the rest of its first instruction, then the first bytes,
//! each step followed by a `membarrier` that serializes every core). The protocol, not
//! stopping threads at safepoints, because it needs nothing of the program (safepoints
//! would need every thread to poll often). The object model is called from every thread
//! (it is `Send + Sync`); the hit counter is incremented without a lock (hits on two
//! threads at once may be lost).
//!
//! What concurrent patching gives up:
//! - Rewriting a fast path: a thread past a site's first instruction may be anywhere in
//!   the rest of the site and must find the same bytes there, so a site's forms differ in
//!   their first instruction only. A concurrent site is laid out as `movabs r11, target;
//!   call r11; jmp end` and a *body* after it: the inline fast path, reached by a `jmp`
//!   that replaces the `movabs` as the first instruction (`cross_modify.rs`). The body is
//!   written once, the first time the site is specialized (those bytes were never run),
//!   and never changed: a thread may be in it at any time after. The site switches to it
//!   whenever its cases are the body's again, and calls a stub for any other cases
//!   (changing a fast path in place would need every thread stopped out of it, which
//!   the protocol exists to avoid). A site needs 15 bytes more than the fast path (and
//!   at most 142 in all) for a body; smaller and larger ones call stubs. The `jmp` costs
//!   a hit about 12% (the `jit_ic` bench: 1.11-1.13x a plain load, against 1.00x
//!   without concurrent patching and 1.50x for a stub).
//! - Freeing stubs at once: a thread past a site's `movabs` may still call the stub the
//!   site called, so a stub no site calls any more is kept until [`Runtime::reclaim_stubs`]
//!   (whose caller says no thread can be in it).
//! - Deoptimization shadows: a shadow is several instructions of the compiled function,
//!   and [`Runtime::invalidate`] overwrites them all. With concurrent patching the shadow
//!   is written with the same protocol (no page is ever writable without being
//!   executable, a thread reaching the shadow's start waits for the whole write), but a
//!   thread already past the shadow's first instruction when it is written runs the new
//!   bytes from where it is: invalidate only while no other thread runs a function's
//!   shadow (at a quiescent moment, or from the one thread that runs it).
//!
//! No panic crosses into compiled code: every entry point catches it and reports it as an
//! error of the call.

// The runtime's trampolines are x86-64 assembly (ELF).
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

mod abi;
mod arena;
pub mod capture;
mod code_area;
mod cross_modify;
mod deopt;
pub mod fast_path;
mod inline_cache;
pub mod object_model;
pub mod shapes;
mod sites;
pub mod stub;
pub mod stub_aarch64;
mod x86_64;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use locus_llvm::jit_stackmaps::StackMapJit;
use locus_llvm::{Error, Result};

pub use capture::{SavedRegisters, StoppedFrame};
pub use deopt::Continuation;
pub use fast_path::{encode_fast_path, encode_fast_path_in, FastPath, Layout, ObjectIndex};
pub use inline_cache::ShapeId;
pub use object_model::{ObjectArena, ObjectModel, Resolution};
pub use shapes::Shapes;
pub use sites::{Site, SiteKind};
pub use stub::{encode_stub, encode_stub_in};
pub use stub_aarch64::{encode_fast_path_aarch64, encode_stub_aarch64};

/// What the runtime did since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Sites and shadows rewritten (each patch rewrites all of a site's reserved bytes).
    pub patches: u64,
    /// Calls of the inline-cache miss handler.
    pub misses: u64,
    /// Property reads answered by a patched-in stub or inline fast path without entering
    /// the runtime (0 unless [`Options::count_hits`]).
    pub hits: u64,
    /// Deoptimizations: compiled frames finished by the interpreter.
    pub deopts: u64,
    /// Stubs made for inline caches (encoded into the runtime's stub memory).
    pub stubs: u64,
    /// Reads answered by the megamorphic lookup (sites that saw more than
    /// [`Options::max_shapes`] shapes).
    pub lookups: u64,
}

/// How a [`Runtime`] runs its inline caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Patch sites on a miss. Off, the miss handler answers every read without patching
    /// (the program then runs entirely through the runtime).
    pub caching: bool,
    /// Count hits in [`Stats::hits`] (one memory increment per hit). Off, `hits` stays 0.
    pub count_hits: bool,
    /// Write the fast path into a site that has room for it instead of a call to a stub
    /// (see [`fast_path`]); sites too small for it call a stub either way.
    pub inline_fast_path: bool,
    /// The most shapes a site is specialized on (polymorphic); the next one makes the
    /// site megamorphic: it then calls the runtime's lookup and is never patched again.
    pub max_shapes: usize,
    /// Run the program on any number of threads ([`Runtime::call`] from each): misses,
    /// megamorphic lookups and repatching happen on whichever thread reads, one patch at a
    /// time under the runtime's patch lock, and each patch follows x86-64's
    /// cross-modifying-code protocol (`cross_modify.rs`, serialized with `membarrier`) so
    /// that the other threads may be running the site meanwhile. A site's inline fast path
    /// is then written once, after its call form, and switched to and from by its first
    /// instruction (see [the threads section](self#threads-and-state)), and the memory of
    /// a stub no site calls any more is kept until [`Runtime::reclaim_stubs`]. Off, the program runs and is patched only on the thread
    /// that made the runtime.
    pub concurrent_patching: bool,
    /// A fault in the program (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, a stack overflow;
    /// on the calling thread or on one the program makes) ends the process with one
    /// `locus:` line naming the signal, the address and the program's function, and exit
    /// status 3 ([`locus_signals::FAULT_EXIT_STATUS`]), instead of a silent death:
    ///
    /// ```text
    /// locus: SIGSEGV (null pointer dereference) at address 0x0 in function `read` (JIT-compiled code, pc 0x7f2a6c1c5013 = read+0x13)
    /// ```
    ///
    /// The runtime registers the program's functions with [`locus_signals::register_code`]
    /// for as long as it lives, resolves the program's `pthread_create` to
    /// [`locus_signals::program_pthread_create`] (unless the host names its own), and
    /// [`Runtime::call`] installs the process's handlers ([`locus_signals::install`], once
    /// per process) and opens a [`locus_signals::fault_scope`] around the call. While a
    /// call runs, a fault on any thread of the process is reported so: a host that relies
    /// on its own SIGSEGV handling on other threads (guard pages) should leave this off.
    /// Off, a fault is the process's business.
    pub report_faults: bool,
}

impl Default for Options {
    /// Caching on, hits counted, fast paths inline where they fit, up to 4 shapes a site,
    /// patching for one thread, faults not reported.
    fn default() -> Self {
        Options {
            caching: true,
            count_hits: true,
            inline_fast_path: true,
            max_shapes: 4,
            concurrent_patching: false,
            report_faults: false,
        }
    }
}

/// A program compiled with its inline caches and deoptimization points.
///
/// See the [module documentation](self).
pub struct Runtime {
    /// The program's functions as the fault handler names them ([`Options::report_faults`]);
    /// kept for its `Drop`, and first, so that it is withdrawn before the code is freed.
    _code: Option<locus_signals::CodeRegistration>,
    jit: StackMapJit,
    /// Patch points and stack maps of the program, by ID.
    sites: HashMap<u64, Site>,
    /// How to finish each function after each of its stack maps, by stack map ID.
    continuations: HashMap<u64, std::result::Result<Continuation, String>>,
    /// The address of `@locus.deopt.stub`.
    deopt_stub: u64,
    options: Options,
    /// The program's object model, which the caches read objects through.
    model: Arc<dyn ObjectModel>,
    /// The built-in shapes the program's surface makes shapes and objects in (the model
    /// too, unless the runtime was made with another).
    shapes: Arc<Shapes>,
    /// The header (miss handler, hit counter) the compiled code reaches when the model
    /// has no arena of its own.
    header: arena::ObjectArena,
    /// The runtime's mutable state, locked for each access (never while taking `patching`).
    state: Mutex<inline_cache::State>,
    /// Held while a site's cases are decided and the site is patched (a miss, a
    /// specialization, a shape's sites patched back, shadows written): one patch at a time,
    /// from whichever thread.
    patching: Mutex<()>,
    /// The thread that made the runtime: without [`Options::concurrent_patching`] the only
    /// one that may run the program or patch it.
    owner: std::thread::ThreadId,
    /// [`Stats::lookups`], counted outside the state's lock: megamorphic reads on many
    /// threads would otherwise all take it.
    lookups: std::sync::atomic::AtomicU64,
}

// SAFETY: what other threads reach through `&Runtime`: the JIT's `&self` methods, which
// read plain data fixed once the program was compiled (functions, sections, the stack map
// index; the LLVM engine and its memory manager are not touched after construction); the
// sites and continuations, likewise; the model and shapes (`Send + Sync`); the header
// arena (`Sync`); the state and the patch lock (mutexes). Running or patching the program
// from a thread other than the owner is refused without `Options::concurrent_patching`
// (`Runtime::call`, `Runtime::check_thread`), so the single-thread code writer never
// rewrites code another thread may be running.
unsafe impl Sync for Runtime {}

/// The IR the runtime adds to every program: the stub a patched shadow calls. It jumps to
/// the deopt entry through a literal, so no register is changed on the way.
fn deopt_stub_ir(entry: u64) -> String {
    format!(
        "\ndefine void @locus.deopt.stub() naked noinline nounwind {{\n  \
         call void asm sideeffect \"jmpq *0(%rip)\\0A.quad {entry:#x}\", \"\"()\n  \
         unreachable\n}}\n"
    )
}

impl Runtime {
    /// Compiles `ir` (LLVM IR text) with the runtime's entry points and the deopt stub.
    /// With `caching` false the miss handler answers every read without patching (the
    /// program then runs entirely through the runtime). Hits are counted and fast paths
    /// written inline where they fit ([`Options::default`] but for `caching`).
    ///
    /// # Errors
    ///
    /// Those of [`StackMapJit::new`]; [`Error::Jit`] when one ID names sites of different
    /// sizes or a patch point reserves fewer than 13 bytes.
    pub fn new(name: &str, ir: &str, caching: bool) -> Result<Self> {
        Runtime::with_options(
            name,
            ir,
            Options {
                caching,
                ..Options::default()
            },
        )
    }

    /// [`Runtime::new`] with all the [`Options`].
    ///
    /// # Errors
    ///
    /// As for [`Runtime::new`].
    pub fn with_options(name: &str, ir: &str, options: Options) -> Result<Self> {
        Runtime::with_host_symbols(name, ir, options, &[])
    }

    /// [`Runtime::with_options`], with more host symbols the program's declarations
    /// resolve to (name as the IR spells it, address), before the process's: a host's own
    /// `pthread_create`, say.
    ///
    /// # Errors
    ///
    /// As for [`Runtime::new`]; [`Error::Jit`] if one names a function the runtime
    /// provides or the program defines.
    pub fn with_host_symbols(
        name: &str,
        ir: &str,
        options: Options,
        host: &[(&str, usize)],
    ) -> Result<Self> {
        let shapes = Arc::new(Shapes::new().map_err(|e| jit_error(&e))?);
        Runtime::build(name, ir, options, host, shapes.clone(), shapes)
    }

    /// Compiles the program over `model`, with `shapes` for its surface.
    fn build(
        name: &str,
        ir: &str,
        options: Options,
        host: &[(&str, usize)],
        model: Arc<dyn ObjectModel>,
        shapes: Arc<Shapes>,
    ) -> Result<Self> {
        if options.concurrent_patching {
            cross_modify::register().map_err(|e| jit_error(&e))?;
        }
        let (sites, continuations) = sites::scan(name, ir)?;
        // A header page and an index of one word: the header is all the compiled code
        // reaches of it.
        let header = arena::ObjectArena::new(3).map_err(|e| jit_error(&e))?;
        let mut text = ir.to_owned();
        text.push_str(&deopt_stub_ir(x86_64::deopt_entry_address()));
        let surface = x86_64::surface_symbols();
        if let Some((clash, _)) = host
            .iter()
            .find(|(h, _)| surface.iter().any(|(s, _)| s == h))
        {
            return Err(jit_error(&format!(
                "host symbol `{clash}` is one of the runtime's entry points"
            )));
        }
        let mut symbols: Vec<(&str, usize)> = surface.iter().chain(host).copied().collect();
        if options.report_faults {
            // The program's threads get an alternate signal stack, so that their stack
            // overflows are reported too; a host's own `pthread_create` comes first.
            for (name, address) in locus_signals::thread_symbols() {
                if !host.iter().any(|(h, _)| *h == name) {
                    symbols.push((name, address));
                }
            }
        }
        let jit = StackMapJit::without_patchpoint_liveness(name, text, &symbols)?;
        let deopt_stub = jit
            .function_address("locus.deopt.stub")
            .ok_or_else(|| jit_error("the deopt stub was not compiled"))?;
        let code = options.report_faults.then(|| {
            locus_signals::register_code(jit.functions().iter().map(|f| locus_signals::CodeRange {
                start: f.address as usize,
                len: f.end.saturating_sub(f.address) as usize,
                name: f.name.clone(),
            }))
        });
        Ok(Runtime {
            _code: code,
            jit,
            sites,
            continuations,
            deopt_stub,
            options,
            model,
            shapes,
            header,
            state: Mutex::new(inline_cache::State::new()),
            patching: Mutex::new(()),
            owner: std::thread::current().id(),
            lookups: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// [`Runtime::with_options`] with the program's object model: its inline caches read
    /// objects as `model` says (see [`object_model`]); the runtime keeps it as long as it
    /// lives, and the language keeps its own handle to change it. The program's surface
    /// still makes shapes and objects in a [`Shapes`] of the runtime's
    /// ([`Runtime::shapes`]), which its sites then do not read.
    ///
    /// # Errors
    ///
    /// As for [`Runtime::new`].
    pub fn with_model(
        name: &str,
        ir: &str,
        options: Options,
        model: Arc<dyn ObjectModel>,
    ) -> Result<Self> {
        let shapes = Arc::new(Shapes::unread().map_err(|e| jit_error(&e))?);
        Runtime::build(name, ir, options, &[], model, shapes)
    }

    /// The compiled program.
    #[must_use]
    pub fn jit(&self) -> &StackMapJit {
        &self.jit
    }

    /// The program's patch points and stack maps, by ID, with what each reserves.
    #[must_use]
    pub fn sites(&self) -> &HashMap<u64, Site> {
        &self.sites
    }

    /// The options the runtime was made with.
    #[must_use]
    pub fn options(&self) -> Options {
        self.options
    }

    /// What the runtime did so far.
    #[must_use]
    pub fn stats(&self) -> Stats {
        let mut stats = self.state().stats;
        stats.hits = self.header_arena().hits().load(Ordering::Relaxed);
        stats.lookups = self.lookups.load(Ordering::Relaxed);
        stats
    }

    /// Calls `function`, an `i64` function of up to six `i64` or pointer arguments with the
    /// C calling convention, through the runtime's entry (which is where a deoptimized frame
    /// returns to).
    ///
    /// # Errors
    ///
    /// [`Error::Jit`] if the program defines no `function`, more than six arguments are
    /// given, or the runtime failed during the call (a property missing from an object's
    /// shape, a bad argument to the program's surface, a deoptimization it could not
    /// finish); the message says what failed. The call ends at the first failure: the
    /// compiled frames are dropped (see [the surface](self#the-programs-surface)).
    ///
    /// # Safety
    ///
    /// `function` takes `args.len()` arguments of 64 bits or fewer (pointers among them point
    /// where the program expects, such as objects from [`Runtime::new_object`]) and calling
    /// it is sound.
    pub unsafe fn call(&self, function: &str, args: &[u64]) -> Result<i64> {
        let address = self
            .jit
            .function_address(function)
            .ok_or_else(|| jit_error(&format!("the program defines no function `{function}`")))?;
        self.check_thread()
            .map_err(|e| jit_error(&format!("`{function}`: {e}")))?;
        let mut frame = x86_64::EnterFrame::new(address, args)
            .ok_or_else(|| jit_error(&format!("`{function}`: more than six arguments")))?;
        let scope = self
            .options
            .report_faults
            .then(locus_signals::reporting_scope);
        // SAFETY: the caller's contract on `function` and `args`; `self` outlives the call
        // and is the active runtime for it.
        let (result, error) = unsafe { x86_64::enter(self, &mut frame) };
        drop(scope);
        match error {
            Some(message) => Err(jit_error(&format!("`{function}`: {message}"))),
            None => Ok(result),
        }
    }

    /// Refuses a thread other than the one that made the runtime, unless the runtime
    /// patches for threads ([`Options::concurrent_patching`]).
    pub(crate) fn check_thread(&self) -> std::result::Result<(), String> {
        if self.options.concurrent_patching || std::thread::current().id() == self.owner {
            Ok(())
        } else {
            Err(
                "the program runs and is patched only on the thread that made the runtime \
                 (Options::concurrent_patching lets other threads)"
                    .to_owned(),
            )
        }
    }

    /// The runtime's state, locked.
    pub(crate) fn state(&self) -> MutexGuard<'_, inline_cache::State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The patch lock (see `patching`).
    pub(crate) fn patching(&self) -> MutexGuard<'_, ()> {
        self.patching.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `len` bytes of code at `address`, which must lie in a code section of the
    /// program or of a stub; `None` otherwise.
    #[must_use]
    pub fn code_bytes(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        let end = address.checked_add(len as u64)?;
        let in_program = self.jit.sections().iter().any(|s| {
            s.kind == locus_llvm::jit_stackmaps::SectionKind::Code
                && s.contains(address)
                && end <= s.address + s.size
        });
        if !in_program {
            return self.stub_bytes(address, len);
        }
        // SAFETY: the range lies in a code section of the live JIT: mapped and readable
        // (read-execute, or read-write for the moment of a patch, which is not now).
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, len) };
        Some(bytes.to_vec())
    }

    /// The absolute address of the record of site `id` in the program (the first, if the
    /// ID is used more than once).
    #[must_use]
    pub fn site_address(&self, id: u64) -> Option<u64> {
        self.jit.stack_maps().by_id(id).next().map(|r| r.address)
    }

    /// The address of the inline-cache miss handler the program's patch points call first.
    #[must_use]
    pub fn miss_handler_address() -> u64 {
        x86_64::ic_miss_address() as u64
    }

    /// The kinds of location (1 Register, 2 Direct, 3 Indirect, 4 Constant, 5
    /// ConstantIndex) that deoptimizations have read live values from.
    #[must_use]
    pub fn deopt_location_kinds(&self) -> Vec<u8> {
        self.state().location_kinds.iter().copied().collect()
    }
}

pub(crate) fn jit_error(message: &str) -> Error {
    Error::Jit {
        message: message.to_owned(),
    }
}
