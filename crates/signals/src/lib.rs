//! Fatal signals in code a process runs for someone else: one `locus:` line naming the
//! signal, the address and the function, and a documented exit status, instead of a
//! silent death.
//!
//! A process that runs code it did not write (JIT-compiled IR, an MLIR kernel from a
//! shared library, a program under a garbage collector) dies without a word when that code
//! faults. This crate turns a SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGTRAP raised by such
//! code, stack overflow included, into one line on standard error and an exit status:
//!
//! ```text
//! locus: SIGSEGV (null pointer dereference) at address 0x0 in function `deref` (JIT-compiled code, pc 0x7f2a6c1c5013 = deref+0x13)
//! locus: SIGSEGV (stack overflow) at address 0x7ffc3e1f6ff8 in function `recurse` (JIT-compiled code, pc 0x7f2a6c1c5004 = recurse+0x4)
//! locus: SIGFPE (integer divide by zero) at address 0x7f2a6c1c501a in function `divide` (JIT-compiled code, pc 0x7f2a6c1c501a = divide+0x1a)
//! ```
//!
//! A host installs the handlers once, names the code it compiled, and opens a scope around
//! each call into foreign code; outside a scope and registered code, faults go to the
//! handler that was there before (Rust's own, say). [`reporting_scope`] does both the
//! installing and the opening, for a caller that reports faults around one call:
//!
//! ```
//! use locus_signals::{fault_scope, install, register_code, CodeRange};
//!
//! extern "C" fn kernel(x: u64) -> u64 {
//!     x + 1
//! }
//!
//! assert!(install());
//! let start = kernel as extern "C" fn(u64) -> u64 as usize;
//! // Names the code in the line (a JIT's functions have no symbol `dladdr` could find).
//! let _code = register_code([CodeRange { start, len: 16, name: "kernel".into() }]);
//! let result = {
//!     // While the scope lives, a fault on this thread (or on a thread the code made)
//!     // prints the line and exits with status 3.
//!     let _scope = fault_scope(false);
//!     kernel(41)
//! };
//! assert_eq!(result, 42);
//! ```
//!
//! The exit status is [`FAULT_EXIT_STATUS`] (3).
//!
//! The crate is independent of LLVM and of the collector: Locus's GC runtime
//! (`locus_gc_runtime::signals`), memref kernels (`locus_memref::CallOptions::report_faults`)
//! and JIT runtime (`locus_jit::Options::report_faults`) use [`install`] and [`fault_scope`]
//! (through [`reporting_scope`]) and [`register_code`] the same way. A component that makes some faults expected (the stress collector protects
//! the pages of freed objects, so that an access to one faults) claims them through one
//! [`FaultClaimer`] ([`set_claimer`]), which says what the fault is and how the process
//! ends, or lets the access run again.
//!
//! # Which faults are reported
//!
//! [`install`] sets process-wide handlers (once; `SA_SIGINFO | SA_ONSTACK`) and gives the
//! calling thread an alternate signal stack of at least 64 KiB if it has none (or a smaller
//! one), so that a stack overflow can be reported too. The handler claims a fault when
//!
//! 1. the [claimer](set_claimer) claims it (then it says what happens: the process ends
//!    with its message, `locus: MESSAGE, caught as SIGSEGV` and where, and the status it
//!    names or by `abort`; or the faulting instruction runs again; the GC runtime's claimer
//!    does this for an access to a freed object of a stress-mode heap);
//! 2. the faulting thread is inside a [`fault_scope`] (as `locus_gc::run` is while its entry
//!    runs), or the faulting instruction is in code registered with [`register_code`], or
//!    a scope is live on any thread of the process (a program is running: the fault is in
//!    a thread it created).
//!
//! While a scope is live, the signals that end a process by default and that the program
//! sends itself (`abort`'s SIGABRT, `raise`, `kill` of its own process ID) or that the
//! kernel sends for what it did (`alarm`'s SIGALRM, SIGXCPU and SIGXFSZ of a resource
//! limit) are reported the same way, `locus: SIGABRT (abort called in this process)`,
//! exit status 3. Those sent by other processes (`kill` from a shell, `timeout(1)`) keep
//! their default action, and a signal the process ignores (`nohup`'s SIGHUP) stays
//! ignored. SIGPIPE is not handled: a reader that stops early ends Locus quietly.
//!
//! A thread the program creates needs an alternate signal stack of its own for its stack
//! overflow to be reported (without one the kernel cannot deliver the fault and kills the
//! process with no word). [`program_pthread_create`] gives each new thread one before its
//! start routine runs, and a thread-local destructor frees it when the thread ends. A JIT
//! running a program resolves the program's `pthread_create` to it ([`thread_symbols`]);
//! a binary that defines `pthread_create` as a call of it, exported (the `locus` binary
//! does), makes every thread of the process through it: those shared libraries make
//! (MLIR's async runtime, a `dlopen`ed library, `dlsym(RTLD_DEFAULT, "pthread_create")`)
//! and Rust's `std::thread` too.
//!
//! Any other fault is passed on to the handler that was installed before (Rust's own stack
//! overflow handler, or a host's), called directly with the same arguments; if there was
//! none, the default action is restored and the faulting instruction runs again, which ends
//! the process as if no handler had been installed. Signals sent by another process
//! (`kill`) are always passed on.
//!
//! # Async-signal safety
//!
//! The handler allocates nothing and takes no lock: it formats into a fixed buffer on its
//! own (alternate) stack with `core::fmt` (which neither allocates nor locks) and writes
//! it with `write(2)`, then leaves with `_exit(2)` (or `abort`). What it looks up lives in
//! tables of atomic pointers ([`HandlerTable`], growing by linked blocks that are
//! allocated when an entry is added, never by the handler): the registered code, and the
//! claimer's own (the stress heaps' chunks). Each entry is immutable once published (apart from atomics), and an
//! entry is only freed after it was removed from its table and no handler is still reading
//! (a global count of handlers running, checked with sequentially consistent atomics). The
//! per-thread state it reads (the thread's stack bounds and fault scope) is in
//! `const`-initialised thread-locals without destructors, which are plain TLS loads.
//! One look-up is not async-signal-safe, and is made only once the process is known to be
//! ending: the function name of a faulting instruction outside registered code comes from
//! `dladdr`, which takes the dynamic loader's (recursive) lock: a fault while another
//! thread holds it waits for that thread. The handlers are installed with `SA_NODEFER`,
//! so a fault inside the handler itself (or inside a handler it chains to) reaches it
//! again instead of a blocked signal, which the kernel answers by killing the process
//! silently: the second fault is reported in one fixed line, `locus: SIGSEGV inside the
//! fault handler (a second fault while reporting one)`, exit status 3.
//!
//! # Platforms
//!
//! Linux on x86-64 and AArch64: the tests run on `x86_64-unknown-linux-gnu`, and
//! `scripts/ci-checks aarch64` type-checks the crate for `aarch64-unknown-linux-gnu`. The
//! program counter and stack pointer at a fault (for `name+offset` and for telling a stack
//! overflow by the stack pointer) and the `si_code` causes are read on Linux only. The
//! code is written for other Unix systems too (`errno` through the `errno` crate, stack
//! bounds on macOS), but no other target is compiled or tested, so none is claimed.
//!
//! # Limits
//!
//! A process has one handler per signal: a host that installs its own handlers after
//! [`install`] replaces this one. A handler called through chaining runs with this
//! handler's signal mask and stack. Stack overflow is recognised by the fault address lying
//! near the bottom of the faulting thread's stack (bounds taken when [`install`] ran on
//! that thread) or, on a thread where it never ran, near the stack pointer; a thread that
//! neither called [`install`] nor was made by [`program_pthread_create`] has no alternate
//! stack of ours, so its overflow may not be reportable: in a binary that does not define
//! `pthread_create` as above, threads a shared library makes itself (a kernel's runtime
//! thread pool, say) are such threads, and so are, in any binary, threads made by a direct
//! `clone` system call or by the C library for itself (`timer_create`'s helper).

use std::cell::{Cell, RefCell, UnsafeCell};
use std::ffi::{c_int, c_void, CStr};
use std::fmt::{self, Write as _};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The exit status after a fatal signal in code Locus runs (other than a fault a
/// [claimer](set_claimer) ends the process for with a status of its own).
pub const FAULT_EXIT_STATUS: i32 = 3;

/// The signals handled: the faults first ([`FAULTS`] of them), then the signals whose
/// default action ends the process that a program sends itself (`abort`, `raise`, `kill`
/// of its own process) or gets from the kernel for what it did (`alarm`, a resource limit).
/// SIGPIPE is not among them: a reader that stops early ends Locus quietly, by design.
const SIGNALS: [c_int; 18] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGSYS,
];

/// How many of [`SIGNALS`] are faults (the rest end the process when sent).
const FAULTS: usize = 5;

/// The smallest alternate signal stack this module accepts on a thread.
const ALT_STACK_BYTES: usize = 64 << 10;

/// How far below the bottom of the stack (Linux keeps a 1 MiB gap under a growing main
/// stack) and above it a fault still counts as a stack overflow.
const STACK_SLACK: usize = 1 << 20;

/// Slots of one block of a [`HandlerTable`] (the first block is inline; more are linked
/// when it is full).
const TABLE_SLOTS: usize = 1024;

/// The number of signal handlers running now, in any thread, that may be reading a
/// [`HandlerTable`]'s entries.
static READERS: AtomicUsize = AtomicUsize::new(0);

/// Proof that the holder counts among the signal handlers running now: entries found in a
/// [`HandlerTable`] stay valid while it lives. Only the handler makes one; a
/// [`FaultClaimer`] gets it with the [`Fault`] ([`Fault::readers`]). Not `Send`.
pub struct Readers {
    _not_send: PhantomData<*const ()>,
}

impl Readers {
    fn enter() -> Readers {
        READERS.fetch_add(1, Ordering::SeqCst);
        Readers {
            _not_send: PhantomData,
        }
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        READERS.fetch_sub(1, Ordering::SeqCst);
    }
}

impl fmt::Debug for Readers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Readers")
    }
}

/// A lock-free table of pointers to entries a signal handler reads: what a
/// [`FaultClaimer`] looks up (the stress heaps' chunks, for the GC runtime's) lives in one,
/// as the registered code does. It holds 1024 entries inline and grows by blocks of 1024
/// when full: [`HandlerTable::push`] allocates the next block (outside any handler) and
/// links it with an atomic pointer, which a handler follows without allocating or locking;
/// blocks are freed only when the table itself is dropped. An entry must not change after
/// it is inserted (apart from its atomics) and must stay valid until
/// [`HandlerTable::remove`] returns, which waits until no handler is running.
///
/// ```
/// use locus_signals::HandlerTable;
///
/// static RANGES: HandlerTable<(usize, usize)> = HandlerTable::new();
/// let range = Box::new((0x1000, 0x2000));
/// // SAFETY: the box is neither written nor dropped before `remove` returns.
/// let slot = unsafe { RANGES.push(&*range) };
/// RANGES.remove(slot);
/// drop(range);
/// ```
pub struct HandlerTable<T> {
    slots: [AtomicPtr<T>; TABLE_SLOTS],
    /// The block that continues the table once these slots are full; null until then.
    /// Set once (by `push`), freed only by `Drop`, so a handler may follow it.
    next: AtomicPtr<HandlerTable<T>>,
}

impl<T> fmt::Debug for HandlerTable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut used = 0;
        let mut blocks = 0;
        let mut block = Some(self);
        while let Some(b) = block {
            blocks += 1;
            used += b
                .slots
                .iter()
                .filter(|s| !s.load(Ordering::Relaxed).is_null())
                .count();
            block = b.next_block();
        }
        f.debug_struct("HandlerTable")
            .field("entries", &used)
            .field("blocks", &blocks)
            .finish()
    }
}

impl<T> Default for HandlerTable<T> {
    fn default() -> Self {
        HandlerTable::new()
    }
}

impl<T> Drop for HandlerTable<T> {
    fn drop(&mut self) {
        let next = *self.next.get_mut();
        if !next.is_null() {
            // SAFETY: `next` came from `Box::into_raw` in `next_or_grow` and is owned by
            // this table alone; `&mut self` means no handler can be reading it.
            drop(unsafe { Box::from_raw(next) });
        }
    }
}

impl<T> HandlerTable<T> {
    /// An empty table (`const`: tables are statics, which a handler can reach).
    #[must_use]
    pub const fn new() -> HandlerTable<T> {
        HandlerTable {
            slots: [const { AtomicPtr::new(ptr::null_mut()) }; TABLE_SLOTS],
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The block after this one, if the table has grown past it.
    fn next_block(&self) -> Option<&HandlerTable<T>> {
        let next = self.next.load(Ordering::SeqCst);
        // SAFETY: a non-null `next` is a live block owned by this table (see `next`).
        unsafe { next.as_ref() }
    }

    /// The block after this one, allocated and linked if there is none yet.
    fn next_or_grow(&self) -> &HandlerTable<T> {
        if let Some(next) = self.next_block() {
            return next;
        }
        let fresh = Box::into_raw(Box::new(HandlerTable::new()));
        match self
            .next
            .compare_exchange(ptr::null_mut(), fresh, Ordering::SeqCst, Ordering::SeqCst)
        {
            // SAFETY: just linked; freed only when this table is dropped.
            Ok(_) => unsafe { &*fresh },
            Err(current) => {
                // Another thread linked a block first: ours was never published.
                // SAFETY: `fresh` is from `Box::into_raw` above and nobody else saw it.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: `current` is non-null (the exchange from null failed) and live.
                unsafe { &*current }
            }
        }
    }

    /// Publishes `entry` (non-null) and returns its slot, for [`HandlerTable::remove`].
    /// The table grows when full, so this always succeeds (allocating a block of 1024
    /// slots when every slot is taken).
    ///
    /// # Safety
    ///
    /// `entry` is non-null and points to a `T` that stays valid, and is not written, until
    /// [`HandlerTable::remove`] of the slot returned has returned (handlers on any thread
    /// read it until then, hence `T: Sync`).
    pub unsafe fn push(&self, entry: *const T) -> usize
    where
        T: Sync,
    {
        let mut block = self;
        let mut first = 0usize;
        loop {
            let free = block.slots.iter().position(|slot| {
                slot.compare_exchange(
                    ptr::null_mut(),
                    entry.cast_mut(),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
            });
            if let Some(i) = free {
                return first + i;
            }
            block = block.next_or_grow();
            first += TABLE_SLOTS;
        }
    }

    /// Withdraws the entry in `slot` and waits until no handler can still be reading it.
    pub fn remove(&self, slot: usize) {
        let mut block = Some(self);
        for _ in 0..slot / TABLE_SLOTS {
            block = block.and_then(HandlerTable::next_block);
        }
        if let Some(s) = block.and_then(|b| b.slots.get(slot % TABLE_SLOTS)) {
            s.store(ptr::null_mut(), Ordering::SeqCst);
        }
        // A handler that loaded the entry incremented READERS before (both SeqCst), so
        // once the count is seen at 0 after the store, none holds it.
        while READERS.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// The first answer of `f` over the entries, for a signal handler (which holds
    /// `readers`).
    pub fn find<'r, R>(
        &self,
        _readers: &'r Readers,
        mut f: impl FnMut(&'r T) -> Option<R>,
    ) -> Option<R>
    where
        T: 'r,
    {
        let mut block = Some(self);
        while let Some(b) = block {
            let found = b.slots.iter().find_map(|slot| {
                let entry = slot.load(Ordering::SeqCst);
                // SAFETY: a non-null entry stays valid until `remove` returns, which waits
                // for every `Readers`, and `_readers` lives for 'r.
                (!entry.is_null()).then(|| f(unsafe { &*entry })).flatten()
            });
            if found.is_some() {
                return found;
            }
            block = b.next_block();
        }
        None
    }
}

/// A fault the handler asks the [claimer](set_claimer) about: a SIGSEGV, SIGBUS, SIGILL,
/// SIGFPE or SIGTRAP the kernel raised for an instruction.
#[derive(Debug)]
pub struct Fault<'r> {
    /// The signal (`libc::SIGSEGV`, ...).
    pub signal: c_int,
    /// The address the kernel reports (`si_addr`): the memory accessed, for SIGSEGV and
    /// SIGBUS.
    pub addr: usize,
    /// The faulting instruction's address, or 0 where the platform does not tell.
    pub pc: usize,
    readers: &'r Readers,
}

impl<'r> Fault<'r> {
    /// The handler's proof for reading the claimer's [`HandlerTable`]s.
    #[must_use]
    pub fn readers(&self) -> &'r Readers {
        self.readers
    }
}

/// What a [`FaultClaimer`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Not the claimer's: the handler goes on as without a claimer.
    Pass,
    /// The claimer made the access possible (and recorded it): the faulting instruction
    /// runs again.
    Retry,
    /// The line the claimer wrote is printed, followed by `, caught as SIGNAL` and where
    /// the instruction is, and the process ends with this status.
    Exit(i32),
    /// As [`Claim::Exit`], but the process ends by `abort`.
    Abort,
}

/// Claims faults a component expects (see [`set_claimer`]). Called inside the signal
/// handler, so it must be async-signal-safe: no allocation, no lock; what it reads lives in
/// [`HandlerTable`]s or atomics. For [`Claim::Exit`] and [`Claim::Abort`] it first writes
/// what the fault is into `message` (after `locus: `, which is there already); a message
/// written with any other answer is dropped.
pub type FaultClaimer = fn(fault: &Fault<'_>, message: &mut dyn fmt::Write) -> Claim;

/// The claimer, as an address (0: none). The one piece of process-wide state a claimer
/// needs: a signal's handler is process-wide, so what it consults is too, and it cannot
/// take a lock or reach a caller's value; a plain atomic is what it can read.
static CLAIMER: AtomicUsize = AtomicUsize::new(0);

/// Makes `claimer` the process's: the handler asks it first about every fault. Set once:
/// false (and nothing changes) if another claimer is set already; true if the one set is
/// this one (compared by address: the same function is expected to have one). The GC
/// runtime sets its own (an access to a freed object of a stress heap) when it installs
/// the handlers.
///
/// # Safety
///
/// `claimer` runs inside the signal handler, on whatever thread faulted, possibly in the
/// middle of `malloc` or while that thread holds a lock. It must be async-signal-safe: no
/// allocation, no lock, no panic or unwinding; what it reads lives in [`HandlerTable`]s
/// or atomics. It must not call [`HandlerTable::remove`] (its own [`Readers`] are live,
/// so that would wait forever), and it answers [`Claim::Retry`] only after making the
/// faulting access possible (else the instruction faults again, forever).
pub unsafe fn set_claimer(claimer: FaultClaimer) -> bool {
    set_once(&CLAIMER, claimer as usize)
}

/// Stores `address` in `slot` if it holds none (0); true if the slot now holds `address`.
fn set_once(slot: &AtomicUsize, address: usize) -> bool {
    match slot.compare_exchange(0, address, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => true,
        Err(current) => current == address,
    }
}

/// The claimer set, if any.
fn claimer() -> Option<FaultClaimer> {
    let address = CLAIMER.load(Ordering::SeqCst);
    // SAFETY: a non-zero value was stored by `set_claimer` from a `FaultClaimer`.
    (address != 0).then(|| unsafe { std::mem::transmute::<usize, FaultClaimer>(address) })
}

/// Turns the symbol `dladdr` finds for a faulting instruction into the name the fault line
/// shows (see [`set_symbol_namer`]).
pub type SymbolNamer = fn(symbol: &[u8]) -> &[u8];

/// The symbol namer, as an address (0: none); process-wide for the reason [`CLAIMER`] is.
static NAMER: AtomicUsize = AtomicUsize::new(0);

/// Makes `namer` the process's: a fault line names a function found by `dladdr` (code not
/// registered with [`register_code`]) by what `namer` answers for its symbol, and keeps the
/// symbol in the `pc = SYMBOL+OFFSET` part. Set once, as [`set_claimer`]: false (and
/// nothing changes) if another namer is set already. The GC runtime sets one that names
/// the `main` a `locus gc build` executable renamed by its source name.
///
/// # Safety
///
/// `namer` runs inside the signal handler, as a [`FaultClaimer`] does, and must be
/// async-signal-safe in the same way.
pub unsafe fn set_symbol_namer(namer: SymbolNamer) -> bool {
    set_once(&NAMER, namer as usize)
}

/// The symbol namer set, if any.
fn symbol_namer() -> Option<SymbolNamer> {
    let address = NAMER.load(Ordering::SeqCst);
    // SAFETY: a non-zero value was stored by `set_symbol_namer` from a `SymbolNamer`.
    (address != 0).then(|| unsafe { std::mem::transmute::<usize, SymbolNamer>(address) })
}

/// A function's code, for naming the function a fault happened in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeRange {
    /// The address of its first instruction.
    pub start: usize,
    /// Its size in bytes.
    pub len: usize,
    /// Its name, as printed in the fault line.
    pub name: String,
}

/// Registered code, sorted by start.
struct CodeTable {
    ranges: Vec<CodeRange>,
}

impl CodeTable {
    fn find(&self, pc: usize) -> Option<&CodeRange> {
        let i = self
            .ranges
            .partition_point(|r| r.start <= pc)
            .checked_sub(1)?;
        let r = &self.ranges[i];
        (pc - r.start < r.len).then_some(r)
    }
}

static CODE: HandlerTable<CodeTable> = HandlerTable::new();

/// Code registered with [`register_code`]; dropping it withdraws the code (the signal
/// handler no longer names it, nor claims faults in it).
#[derive(Debug)]
#[must_use = "the registration ends when dropped"]
pub struct CodeRegistration {
    table: Option<Box<CodeTableOwner>>,
}

/// Owns a registered table (boxed so its address is stable).
struct CodeTableOwner {
    table: CodeTable,
    slot: usize,
}

impl fmt::Debug for CodeTableOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodeTable")
            .field("ranges", &self.table.ranges)
            .field("slot", &self.slot)
            .finish()
    }
}

impl Drop for CodeRegistration {
    fn drop(&mut self) {
        if let Some(owner) = self.table.take() {
            CODE.remove(owner.slot);
        }
    }
}

/// Registers code (JIT-compiled functions, typically) so that a fault in it is reported
/// with the function's name and `name+offset`, and claimed by the handler even outside a
/// [`fault_scope`]. Any number of registrations may be live at once (the handler's table
/// grows by blocks of 1024); each lasts until its [`CodeRegistration`] is dropped.
pub fn register_code(ranges: impl IntoIterator<Item = CodeRange>) -> CodeRegistration {
    let mut ranges: Vec<CodeRange> = ranges.into_iter().filter(|r| r.len > 0).collect();
    ranges.sort_by_key(|r| r.start);
    let mut owner = Box::new(CodeTableOwner {
        table: CodeTable { ranges },
        slot: 0,
    });
    // SAFETY: the table lives in the box, which `CodeRegistration` keeps (never writing
    // the table) until its `Drop` removes the slot.
    owner.slot = unsafe { CODE.push(&owner.table) };
    CodeRegistration { table: Some(owner) }
}

/// What the handler does with a fault claimed through a scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScopeMode {
    None = 0,
    Exit = 1,
    Abort = 2,
}

thread_local! {
    /// This thread's innermost fault scope.
    static SCOPE: Cell<u8> = const { Cell::new(ScopeMode::None as u8) };
    /// This thread's stack, `(low, high)`, or zeros if unknown.
    static STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// The alternate signal stack this module gave this thread.
    static ALT_STACK: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

/// While it lives, every fatal signal on this thread is reported and ends the process
/// (see the [module documentation](self)), with [`FAULT_EXIT_STATUS`], or by `abort` if
/// `abort` is true. Scopes nest; dropping one restores the one before. Not `Send`.
#[derive(Debug)]
#[must_use = "the scope ends when dropped"]
pub struct FaultScope {
    prev: u8,
    abort: bool,
    _not_send: PhantomData<*const ()>,
}

/// Live [`FaultScope`]s in the process, and how many of them ask for `abort`: while one
/// lives a program is running, and a fault on a thread outside any scope (a thread the
/// program created) or a terminating signal the program sent itself is reported too.
static LIVE_SCOPES: AtomicUsize = AtomicUsize::new(0);
static ABORT_SCOPES: AtomicUsize = AtomicUsize::new(0);

/// [`install`]s the handlers (once per process) and prepares this thread, then enters a
/// [`FaultScope`] on it that ends the process with [`FAULT_EXIT_STATUS`] (not `abort`):
/// what a caller reporting the faults of one call into foreign code (a kernel, a JIT's
/// function) holds around that call. Should the handlers fail to install, the scope is
/// still entered, and faults end the process as they would without this crate.
///
/// ```
/// extern "C" fn kernel(x: u64) -> u64 {
///     x * 2
/// }
///
/// let result = {
///     let _scope = locus_signals::reporting_scope();
///     kernel(21)
/// };
/// assert_eq!(result, 42);
/// ```
pub fn reporting_scope() -> FaultScope {
    install();
    fault_scope(false)
}

/// Enters a [`FaultScope`] on this thread. Call [`install`] first (or use
/// [`reporting_scope`], which does both).
pub fn fault_scope(abort: bool) -> FaultScope {
    let mode = if abort {
        ScopeMode::Abort
    } else {
        ScopeMode::Exit
    };
    LIVE_SCOPES.fetch_add(1, Ordering::SeqCst);
    if abort {
        ABORT_SCOPES.fetch_add(1, Ordering::SeqCst);
    }
    let prev = SCOPE.with(|s| s.replace(mode as u8));
    FaultScope {
        prev,
        abort,
        _not_send: PhantomData,
    }
}

impl Drop for FaultScope {
    fn drop(&mut self) {
        let prev = self.prev;
        let _ = SCOPE.try_with(|s| s.set(prev));
        if self.abort {
            ABORT_SCOPES.fetch_sub(1, Ordering::SeqCst);
        }
        LIVE_SCOPES.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The scope that claims a signal on this thread: its own, else the process's while a
/// program runs (abort if any live scope asks for it).
fn current_scope() -> u8 {
    let own = SCOPE.try_with(Cell::get).unwrap_or(ScopeMode::None as u8);
    if own != ScopeMode::None as u8 || LIVE_SCOPES.load(Ordering::SeqCst) == 0 {
        own
    } else if ABORT_SCOPES.load(Ordering::SeqCst) != 0 {
        ScopeMode::Abort as u8
    } else {
        ScopeMode::Exit as u8
    }
}

/// The actions that were installed before ours, one per entry of [`SIGNALS`], written once
/// before our handler for that signal is installed and only read afterwards.
struct OldActions(UnsafeCell<[MaybeUninit<libc::sigaction>; SIGNALS.len()]>);

// SAFETY: each element is written once, by `install_handlers` under a `OnceLock`, before
// the handler that reads it is installed (the `sigaction` system call orders the two), and
// only read afterwards.
unsafe impl Sync for OldActions {}

static OLD: OldActions = OldActions(UnsafeCell::new(
    [const { MaybeUninit::uninit() }; SIGNALS.len()],
));

/// Installs the handlers (once per process) and prepares the calling thread: an alternate
/// signal stack of at least 64 KiB, and its stack bounds for recognising an overflow.
/// Returns false if the handlers could not be installed (faults then end the process as
/// they would without Locus).
pub fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    let installed = *INSTALLED.get_or_init(install_handlers);
    prepare_thread();
    installed
}

fn install_handlers() -> bool {
    let mut all = true;
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: a zeroed sigaction is a valid value to be overwritten.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the current action into a valid out-pointer.
        if unsafe { libc::sigaction(sig, ptr::null(), &mut old) } != 0 {
            all = false;
            continue;
        }
        // SAFETY: runs once (under the OnceLock), before our handler for `sig` exists, so
        // nothing reads this element yet.
        unsafe { (*OLD.0.get())[i].write(old) };
        if i >= FAULTS && old.sa_sigaction != libc::SIG_DFL {
            continue; // ignored (nohup) or the host's: left as it is
        }
        // SAFETY: as above, a valid value to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)
            as libc::sighandler_t;
        // SA_NODEFER: a fault inside the handler is delivered to it again (and reported as
        // such) instead of meeting a blocked signal, which the kernel answers by killing
        // the process silently.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        // SAFETY: a valid signal set to initialise.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: installs a valid action; the handler is async-signal-safe (module docs).
        if unsafe { libc::sigaction(sig, &action, ptr::null_mut()) } != 0 {
            all = false;
        }
    }
    all
}

/// A thread's start routine, called as C calls it. `C-unwind`: a thread that ends by
/// `pthread_exit` or cancellation unwinds (a forced unwind) through
/// [`program_thread_start`], and `C-unwind` is the ABI under which Rust lets a foreign
/// unwind cross a frame (the tests end such threads).
type StartRoutine = unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void;

/// `pthread_create`'s type, with the start routine as [`StartRoutine`].
type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut c_void,
) -> c_int;

/// What [`program_pthread_create`] hands the new thread, in memory from `malloc` (a
/// `pthread_create` out of memory fails with `EAGAIN`; a Rust allocation would abort).
#[derive(Clone, Copy)]
struct ThreadStart {
    start: StartRoutine,
    arg: *mut c_void,
}

/// The first function of a thread made by [`program_pthread_create`]: prepares the thread
/// as [`install`] does, then runs the creator's start routine. Nothing of ours is live
/// across that call, so a forced unwind (`pthread_exit`, cancellation) crosses this frame
/// with nothing to run; the alternate stack is freed by a thread-local destructor, which
/// the C library runs at thread exit whichever way the thread ends.
unsafe extern "C-unwind" fn program_thread_start(block: *mut c_void) -> *mut c_void {
    // SAFETY: `program_pthread_create` wrote a `ThreadStart` in this `malloc` block and
    // gave it to this thread only; read once, then freed.
    let ThreadStart { start, arg } = unsafe { block.cast::<ThreadStart>().read() };
    // SAFETY: as above; not used again.
    unsafe { libc::free(block) };
    prepare_thread();
    // SAFETY: the creator's promise (as for `pthread_create`) that `start(arg)` is sound
    // to run on a new thread.
    unsafe { start(arg) }
}

/// The `pthread_create` that [`program_pthread_create`] wraps: the next definition after
/// the object this code is in (`dlsym(RTLD_NEXT)`), so that a binary that defines
/// `pthread_create` itself as [`program_pthread_create`] reaches the C library's, not
/// itself (the C library is always loaded after the executable). If the loader finds none
/// past this object (a library loaded before the C library), the one this object links
/// to. Looked up once.
fn next_pthread_create() -> PthreadCreate {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let mut found = NEXT.load(Ordering::Acquire);
    if found == 0 {
        // SAFETY: a NUL-terminated name; `dlsym` only reads the loader's tables.
        found = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) } as usize;
        if found == 0 {
            found = libc::pthread_create as *const () as usize;
        }
        // Racing threads store the same address.
        NEXT.store(found, Ordering::Release);
    }
    // SAFETY: the loader's `pthread_create`, or the C library's, whose type this is (the
    // start routine's "C-unwind" ABI is the "C" ABI that also lets unwinding pass).
    unsafe { std::mem::transmute::<usize, PthreadCreate>(found) }
}

/// `pthread_create` that gives the new thread an alternate signal stack and its stack
/// bounds before the start routine runs, so that its stack overflow is reported like the
/// main thread's (without one, the kernel cannot deliver the fault and kills the process
/// silently). Otherwise it is `pthread_create` (the next definition after this code's
/// object, see below): same arguments, same result; `EAGAIN` if the small block handed to
/// the thread cannot be allocated, `EINVAL` for a null start routine.
///
/// Two ways to use it:
///
/// - a JIT running a program resolves the program's `pthread_create` to it
///   ([`thread_symbols`]);
/// - a binary defines `pthread_create` itself as a call of this function, exported in its
///   dynamic symbol table (the `locus` binary does): every thread of the process is then
///   made through it, those of shared libraries (`dlopen`ed ones, MLIR's async runtime,
///   `dlsym(RTLD_DEFAULT, "pthread_create")`) and Rust's `std::thread` included. The
///   C library's own is found with `dlsym(RTLD_NEXT)`, so the definition must be in the
///   same object as this crate (the executable), not in a library loaded after libc.
///
/// # Safety
///
/// As for `pthread_create(3)`: `thread` is valid for a write, `attr` is null or an
/// initialised attribute object, and `start(arg)` is sound to run on a new thread.
pub unsafe extern "C" fn program_pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Option<extern "C" fn(*mut c_void) -> *mut c_void>,
    arg: *mut c_void,
) -> c_int {
    let Some(start) = start else {
        return libc::EINVAL;
    };
    let create = next_pthread_create();
    // SAFETY: the same function pointer; "C-unwind" is the "C" calling convention.
    let start = unsafe {
        std::mem::transmute::<extern "C" fn(*mut c_void) -> *mut c_void, StartRoutine>(start)
    };
    // SAFETY: a plain allocation of the block's size, checked for null below.
    let block = unsafe { libc::malloc(std::mem::size_of::<ThreadStart>()) }.cast::<ThreadStart>();
    if block.is_null() {
        return libc::EAGAIN;
    }
    // SAFETY: `malloc`'s alignment suits any type of its size; the block is ours.
    unsafe { block.write(ThreadStart { start, arg }) };
    // SAFETY: the caller's promise; the trampoline takes the block and frees it.
    let status = unsafe { create(thread, attr, program_thread_start, block.cast()) };
    if status != 0 {
        // SAFETY: no thread was made, so the block is still ours.
        unsafe { libc::free(block.cast()) };
    }
    status
}

/// The symbols a JIT running a program should resolve to Locus's own (name as the IR
/// spells it, address): `pthread_create` ([`program_pthread_create`]).
pub fn thread_symbols() -> [(&'static str, usize); 1] {
    [(
        "pthread_create",
        program_pthread_create
            as unsafe extern "C" fn(
                *mut libc::pthread_t,
                *const libc::pthread_attr_t,
                Option<extern "C" fn(*mut c_void) -> *mut c_void>,
                *mut c_void,
            ) -> c_int as usize,
    )]
}

/// Records this thread's stack bounds and gives it an alternate signal stack if it lacks
/// one large enough.
fn prepare_thread() {
    if STACK.try_with(Cell::get) == Ok((0, 0)) {
        if let Some(b) = StackBounds::current_thread() {
            let _ = STACK.try_with(|s| s.set((b.low, b.high)));
        }
    }
    let _ = ALT_STACK.try_with(|alt| {
        if alt.borrow().is_some() {
            return;
        }
        // SAFETY: a zeroed stack_t is a valid out-value.
        let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: queries the current alternate stack into a valid out-pointer.
        if unsafe { libc::sigaltstack(ptr::null(), &mut current) } != 0 {
            return;
        }
        let enabled = current.ss_flags & libc::SS_DISABLE == 0;
        if enabled && current.ss_size >= ALT_STACK_BYTES {
            return;
        }
        if current.ss_flags & libc::SS_ONSTACK != 0 {
            return; // running on it: leave it alone
        }
        *alt.borrow_mut() = AltStack::new();
    });
}

/// The address range of a thread's stack: `low..high`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackBounds {
    /// The lowest address of the stack.
    pub low: usize,
    /// One past the highest address of the stack.
    pub high: usize,
}

impl StackBounds {
    /// The current thread's stack, where the platform can tell: Linux through
    /// `pthread_getattr_np` (built and tested); Android and macOS have branches of their
    /// own (`pthread_getattr_np`, `pthread_get_stackaddr_np`) that no check here compiles
    /// (see [Platforms](crate#platforms)); `None` elsewhere.
    #[must_use]
    pub fn current_thread() -> Option<StackBounds> {
        stack::current()
    }

    /// Whether `len` bytes at `addr` lie inside the stack.
    #[must_use]
    pub fn contains(&self, addr: usize, len: usize) -> bool {
        addr >= self.low && addr.checked_add(len).is_some_and(|end| end <= self.high)
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod stack {
    use super::StackBounds;

    pub(super) fn current() -> Option<StackBounds> {
        // SAFETY: a zeroed attribute object is a valid out-value for `pthread_getattr_np`.
        let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
        // SAFETY: no preconditions.
        let thread = unsafe { libc::pthread_self() };
        // SAFETY: `attr` is valid for a write.
        if unsafe { libc::pthread_getattr_np(thread, &mut attr) } != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: `attr` was initialised by `pthread_getattr_np` just above.
        let rc = unsafe { libc::pthread_attr_getstack(&attr, &mut addr, &mut size) };
        // SAFETY: `attr` is initialised, and destroyed once.
        unsafe { libc::pthread_attr_destroy(&mut attr) };
        let low = addr as usize;
        if rc != 0 || low == 0 || size == 0 {
            return None;
        }
        Some(StackBounds {
            low,
            high: low.checked_add(size)?,
        })
    }
}

#[cfg(target_os = "macos")]
mod stack {
    use super::StackBounds;

    pub(super) fn current() -> Option<StackBounds> {
        // SAFETY: no preconditions.
        let me = unsafe { libc::pthread_self() };
        // SAFETY: reads the current thread's descriptor.
        let top = unsafe { libc::pthread_get_stackaddr_np(me) } as usize;
        // SAFETY: as above.
        let size = unsafe { libc::pthread_get_stacksize_np(me) };
        if top == 0 || size == 0 {
            return None;
        }
        Some(StackBounds {
            low: top.checked_sub(size)?,
            high: top,
        })
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
mod stack {
    use super::StackBounds;

    pub(super) fn current() -> Option<StackBounds> {
        None
    }
}

/// An alternate signal stack of this module's, with a guard page below it.
struct AltStack {
    base: usize,
    len: usize,
    stack: usize,
}

impl AltStack {
    fn new() -> Option<AltStack> {
        // SAFETY: no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let size = ALT_STACK_BYTES.max(libc::SIGSTKSZ * 4);
        let len = size + page;
        // SAFETY: a fresh anonymous private mapping; affects no existing memory.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let base = base as usize;
        // SAFETY: the lowest page of our mapping becomes the guard; a failure only loses
        // the guard.
        unsafe { libc::mprotect(base as *mut c_void, page, libc::PROT_NONE) };
        let stack = libc::stack_t {
            ss_sp: (base + page) as *mut c_void,
            ss_flags: 0,
            ss_size: size,
        };
        // SAFETY: a valid stack description of memory that lives until `drop`, which
        // disables it first.
        if unsafe { libc::sigaltstack(&stack, ptr::null_mut()) } != 0 {
            // SAFETY: our mapping, unused.
            unsafe { libc::munmap(base as *mut c_void, len) };
            return None;
        }
        Some(AltStack {
            base,
            len,
            stack: base + page,
        })
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: a zeroed stack_t is a valid out-value.
        let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-pointer.
        let queried = unsafe { libc::sigaltstack(ptr::null(), &mut current) } == 0;
        if queried && current.ss_sp as usize == self.stack {
            if current.ss_flags & libc::SS_ONSTACK != 0 {
                return; // cannot happen at thread exit; leak rather than pull it away
            }
            let disable = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disables the alternate stack of this (exiting) thread.
            unsafe { libc::sigaltstack(&disable, ptr::null_mut()) };
        }
        // SAFETY: our mapping, no longer this thread's alternate stack.
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

/// A line formatted on the stack: at most 1 KiB, cut short beyond.
struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Line {
    fn new() -> Line {
        Line {
            buf: [0; 1024],
            len: 0,
        }
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        // One byte is kept for the newline.
        let room = self.buf.len() - 1 - self.len;
        let n = bytes.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    /// Writes the line and a newline to standard error with `write(2)`.
    fn print(mut self) {
        self.buf[self.len] = b'\n';
        self.len += 1;
        self.write_out();
    }

    /// Writes what the line holds so far (no newline) and empties it: before a look-up
    /// that may block (`dladdr` waits for the loader's lock), so that the fault itself is
    /// on standard error whatever happens next.
    fn flush(&mut self) {
        self.write_out();
        self.len = 0;
    }

    fn write_out(&self) {
        let mut rest = &self.buf[..self.len];
        while !rest.is_empty() {
            // SAFETY: writes initialised bytes from our buffer.
            let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
            match usize::try_from(n) {
                Ok(n) if n > 0 => rest = &rest[n.min(rest.len())..],
                _ if n < 0 && errno() == libc::EINTR => {}
                _ => return,
            }
        }
    }
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_bytes(s.as_bytes());
        Ok(())
    }
}

/// This thread's `errno`, through the `errno` crate: each C library names its location
/// differently (`__errno_location` on Linux, `__errno` on Android, `__error` on macOS and
/// the BSDs). A plain TLS read, async-signal-safe.
fn errno() -> c_int {
    errno::errno().0
}

/// Sets this thread's `errno` (the handler restores the interrupted code's).
fn set_errno(value: c_int) {
    errno::set_errno(errno::Errno(value));
}

thread_local! {
    /// How many of this module's handlers are running on this thread (more than one: a
    /// fault inside the handler, or inside a handler it chained to).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The handler of every signal in [`SIGNALS`].
extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let saved = errno();
    let depth = DEPTH.try_with(|d| d.replace(d.get() + 1)).unwrap_or(0);
    if depth > 0 && is_fault(sig, info) {
        second_fault(sig);
    }
    if !handle(sig, info, context) {
        chain(sig, info, context);
    }
    let _ = DEPTH.try_with(|d| d.set(depth));
    set_errno(saved);
}

/// Whether the kernel raised `sig` for an instruction (not a signal sent by a process).
fn is_fault(sig: c_int, info: *const libc::siginfo_t) -> bool {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler (null checked).
    SIGNALS[..FAULTS].contains(&sig) && !info.is_null() && unsafe { (*info).si_code } > 0
}

/// A fault while this thread was already handling one: nothing the first handler was
/// doing can be trusted, so one fixed line and the fault exit status.
fn second_fault(sig: c_int) -> ! {
    let mut line = Line::new();
    line.push_bytes(b"locus: ");
    line.push_bytes(signal_name(sig).as_bytes());
    line.push_bytes(b" inside the fault handler (a second fault while reporting one)");
    line.print();
    exit(FAULT_EXIT_STATUS)
}

/// Reports a terminating signal the program sent itself (`abort`, `raise`, `kill` of its
/// own process) or that the kernel sent for what it did (`alarm`, a resource limit) while
/// a program runs; false if it is not ours (no program runs, or another process sent it).
fn handle_sent(sig: c_int, info: &libc::siginfo_t) -> bool {
    let scope = current_scope();
    if scope == ScopeMode::None as u8 {
        return false;
    }
    // SAFETY: `si_pid` is the field the kernel fills for a signal a process sent.
    let from_self = info.si_code <= 0 && unsafe { info.si_pid() } == unsafe { libc::getpid() };
    // The kernel's own signals that answer what the program did; not a terminal's SIGINT,
    // SIGQUIT or SIGHUP (also sent by the kernel), which keep their default action.
    let for_what_it_did = info.si_code > 0
        && matches!(
            sig,
            libc::SIGALRM
                | libc::SIGVTALRM
                | libc::SIGPROF
                | libc::SIGXCPU
                | libc::SIGXFSZ
                | libc::SIGSYS
        );
    if !(from_self || for_what_it_did) {
        return false;
    }
    let mut line = Line::new();
    let _ = write!(line, "locus: {} ", signal_name(sig));
    line.push_bytes(if sig == libc::SIGABRT {
        b"(abort called in this process)"
    } else if from_self {
        b"(sent by this process to itself: raise or kill)"
    } else {
        b"(sent by the kernel: a timer or a resource limit)"
    });
    line.print();
    if scope == ScopeMode::Abort as u8 {
        abort();
    }
    exit(FAULT_EXIT_STATUS)
}

/// Handles a fault this module claims, which ends the process unless it returns true (the
/// faulting instruction may run again). False: not ours, to be passed on.
fn handle(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let info = unsafe { &*info };
    if !SIGNALS[..FAULTS].contains(&sig) {
        return handle_sent(sig, info);
    }
    if info.si_code <= 0 {
        return false; // sent by a process (kill, raise, sigqueue), not a fault
    }
    // SAFETY: for the fault signals handled here, `si_addr` is the field the kernel fills.
    let addr = unsafe { info.si_addr() } as usize;
    let (mut pc, sp) = registers(context);
    if pc == 0 && sig != libc::SIGSEGV && sig != libc::SIGBUS {
        pc = addr; // SIGILL, SIGFPE, SIGTRAP: the address is the instruction's
    }
    let readers = Readers::enter();
    if let Some(claimer) = claimer() {
        let fault = Fault {
            signal: sig,
            addr,
            pc,
            readers: &readers,
        };
        let mut line = Line::new();
        line.push_bytes(b"locus: ");
        let end = match claimer(&fault, &mut line) {
            Claim::Pass => None,
            Claim::Retry => return true,
            Claim::Exit(status) => Some(Some(status)),
            Claim::Abort => Some(None),
        };
        if let Some(status) = end {
            let _ = write!(line, ", caught as {}", signal_name(sig));
            write_location(&mut line, &readers, pc);
            line.print();
            match status {
                Some(status) => exit(status),
                None => abort(),
            }
        }
    }
    let scope = current_scope();
    let in_code = CODE.find(&readers, |t| t.find(pc)).is_some();
    if scope == ScopeMode::None as u8 && !in_code {
        return false;
    }
    let overflow = sig == libc::SIGSEGV && is_stack_overflow(addr, sp);
    let mut line = Line::new();
    let _ = write!(
        line,
        "locus: {} ({}) at address {addr:#x}",
        signal_name(sig),
        cause(sig, info.si_code, addr, overflow)
    );
    write_location(&mut line, &readers, pc);
    line.print();
    if scope == ScopeMode::Abort as u8 {
        abort();
    }
    exit(FAULT_EXIT_STATUS)
}

fn exit(status: i32) -> ! {
    // SAFETY: `_exit` is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(status) }
}

fn abort() -> ! {
    // The default action for SIGABRT, in case someone caught it; then abort.
    // SAFETY: `signal` with SIG_DFL and `abort` end the process; no memory is touched.
    unsafe { libc::signal(libc::SIGABRT, libc::SIG_DFL) };
    std::process::abort()
}

/// Passes a fault this module does not claim to the action installed before it.
fn chain(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else {
        return;
    };
    // SAFETY: `OLD.0.get()` is valid for reads; the index is bounds-checked and no reference
    // to the whole table is made (another element may be being written).
    let slot = unsafe { &raw const (*OLD.0.get())[i] };
    // SAFETY: the element was written before this handler was installed for `sig` (see
    // `OldActions`), and is only read; `MaybeUninit<T>` has the layout of `T`.
    let old = unsafe { &*slot.cast::<libc::sigaction>() };
    let handler = old.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Back to the default action; returning runs the faulting instruction again, which
        // now ends the process the way it would have without us (a signal sent by a
        // process is not repeated: it is re-raised).
        // SAFETY: a valid zeroed action with the default handler.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = libc::SIG_DFL;
        // SAFETY: installs the default action.
        unsafe { libc::sigaction(sig, &action, ptr::null_mut()) };
        // SAFETY: `info` is the kernel's siginfo (checked non-null).
        if info.is_null() || unsafe { (*info).si_code } <= 0 {
            // SAFETY: re-raises the signal to this thread under the default action.
            unsafe { libc::raise(sig) };
        }
        return;
    }
    if old.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so this is its type.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute::<libc::sighandler_t, _>(handler) };
        f(sig, info, context);
    } else {
        // SAFETY: without SA_SIGINFO the previous handler takes the signal number only.
        let f: extern "C" fn(c_int) =
            unsafe { std::mem::transmute::<libc::sighandler_t, _>(handler) };
        f(sig);
    }
}

/// The program counter and stack pointer at the fault, where the platform tells.
fn registers(context: *mut c_void) -> (usize, usize) {
    if context.is_null() {
        return (0, 0);
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: the kernel passes a `ucontext_t` as an SA_SIGINFO handler's third
        // argument.
        let uc = unsafe { &*context.cast::<libc::ucontext_t>() };
        let gregs = &uc.uc_mcontext.gregs;
        (
            gregs[libc::REG_RIP as usize] as usize,
            gregs[libc::REG_RSP as usize] as usize,
        )
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    {
        // SAFETY: as above.
        let uc = unsafe { &*context.cast::<libc::ucontext_t>() };
        (uc.uc_mcontext.pc as usize, uc.uc_mcontext.sp as usize)
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        (0, 0)
    }
}

/// Whether a SIGSEGV at `addr` with stack pointer `sp` is a stack overflow.
fn is_stack_overflow(addr: usize, sp: usize) -> bool {
    let (low, high) = STACK.try_with(Cell::get).unwrap_or((0, 0));
    if low != 0 {
        let near_bottom = |x: usize| x < high && x.saturating_add(STACK_SLACK) >= low;
        return near_bottom(addr)
            && addr < low.saturating_add(STACK_SLACK)
            && (sp == 0 || near_bottom(sp));
    }
    sp != 0 && addr > 4096 && addr.abs_diff(sp) < 64 << 10
}

fn signal_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGALRM => "SIGALRM",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => "signal",
    }
}

/// The `si_code` values told apart (Linux's; elsewhere none matches).
#[cfg(target_os = "linux")]
mod code {
    use std::ffi::c_int;
    pub(super) const SEGV_MAPERR: c_int = 1;
    pub(super) const SEGV_ACCERR: c_int = 2;
    pub(super) const BUS_ADRALN: c_int = 1;
    pub(super) const BUS_ADRERR: c_int = 2;
    pub(super) const FPE_INTDIV: c_int = 1;
    pub(super) const FPE_INTOVF: c_int = 2;
    /// Sent by the kernel itself: on x86-64, a general protection fault (a non-canonical
    /// address), whose `si_addr` is 0 whatever the address was.
    pub(super) const SI_KERNEL: c_int = 0x80;
}

#[cfg(not(target_os = "linux"))]
mod code {
    use std::ffi::c_int;
    pub(super) const SEGV_MAPERR: c_int = c_int::MIN;
    pub(super) const SEGV_ACCERR: c_int = c_int::MIN;
    pub(super) const BUS_ADRALN: c_int = c_int::MIN;
    pub(super) const BUS_ADRERR: c_int = c_int::MIN;
    pub(super) const FPE_INTDIV: c_int = c_int::MIN;
    pub(super) const FPE_INTOVF: c_int = c_int::MIN;
    pub(super) const SI_KERNEL: c_int = c_int::MIN;
}

fn cause(sig: c_int, si_code: c_int, addr: usize, overflow: bool) -> &'static str {
    use code::*;
    let code = si_code;
    match sig {
        libc::SIGSEGV if overflow => "stack overflow",
        libc::SIGSEGV if code == SI_KERNEL => {
            "general protection fault: a non-canonical address (such as a poisoned pointer), \
             which the kernel does not report"
        }
        libc::SIGSEGV if addr < 4096 => "null pointer dereference",
        libc::SIGSEGV if code == SEGV_MAPERR => "address not mapped",
        libc::SIGSEGV if code == SEGV_ACCERR => "access not permitted",
        libc::SIGSEGV => "invalid memory reference",
        libc::SIGBUS if code == BUS_ADRALN => "misaligned address",
        libc::SIGBUS if code == BUS_ADRERR => "nonexistent physical address",
        libc::SIGBUS => "bus error",
        libc::SIGILL => "illegal instruction",
        libc::SIGFPE if code == FPE_INTDIV => "integer divide by zero",
        libc::SIGFPE if code == FPE_INTOVF => "integer overflow",
        libc::SIGFPE => "arithmetic exception",
        libc::SIGTRAP => "trap",
        _ => "fault",
    }
}

/// Appends where `pc` is: the registered function, else what `dladdr` says.
fn write_location(line: &mut Line, readers: &Readers, pc: usize) {
    if pc == 0 {
        return;
    }
    if let Some(r) = CODE.find(readers, |t| t.find(pc)) {
        let _ = write!(
            line,
            " in function `{}` (JIT-compiled code, pc {pc:#x} = {}+{:#x})",
            r.name,
            r.name,
            pc - r.start
        );
        return;
    }
    line.flush();
    // SAFETY: a zeroed Dl_info is a valid out-value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` only reads the loader's tables (not async-signal-safe: see the
    // module documentation); the out-pointer is valid.
    if unsafe { libc::dladdr(pc as *const c_void, &mut info) } == 0 {
        let _ = write!(line, " at pc {pc:#x}");
        return;
    }
    let file = || {
        // SAFETY: a NUL-terminated string owned by the loader, or null.
        (!info.dli_fname.is_null()).then(|| unsafe { CStr::from_ptr(info.dli_fname) })
    };
    if info.dli_sname.is_null() {
        let _ = write!(line, " at pc {pc:#x}");
    } else {
        // SAFETY: as above.
        let name = unsafe { CStr::from_ptr(info.dli_sname) }.to_bytes();
        line.push_bytes(b" in function `");
        line.push_bytes(symbol_namer().map_or(name, |namer| namer(name)));
        let _ = write!(line, "` (pc {pc:#x} = ");
        line.push_bytes(name);
        let _ = write!(line, "+{:#x}", pc.wrapping_sub(info.dli_saddr as usize));
        line.push_bytes(b")");
    }
    if let Some(file) = file() {
        line.push_bytes(b" in ");
        line.push_bytes(file.to_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past one block, entries land in linked blocks; every one is found, removed ones
    /// are not, and their slots are reused before the table grows again.
    #[test]
    fn a_table_grows_past_one_block() {
        let table: HandlerTable<usize> = HandlerTable::new();
        let values: Vec<Box<usize>> = (0..2 * TABLE_SLOTS + 5).map(Box::new).collect();
        // SAFETY: the boxes outlive the table (dropped after it, below) and are not written.
        let slots: Vec<usize> = values.iter().map(|v| unsafe { table.push(&**v) }).collect();
        assert_eq!(slots, (0..values.len()).collect::<Vec<_>>());
        assert!(format!("{table:?}").contains("blocks: 3"), "{table:?}");
        let readers = Readers::enter();
        for v in [0, TABLE_SLOTS - 1, TABLE_SLOTS, 2 * TABLE_SLOTS + 4] {
            assert_eq!(table.find(&readers, |&x| (x == v).then_some(x)), Some(v));
        }
        drop(readers);
        table.remove(TABLE_SLOTS + 7);
        let readers = Readers::enter();
        let wanted = TABLE_SLOTS + 7;
        assert_eq!(table.find(&readers, |&x| (x == wanted).then_some(x)), None);
        drop(readers);
        let again = Box::new(usize::MAX);
        // SAFETY: as above.
        assert_eq!(unsafe { table.push(&*again) }, TABLE_SLOTS + 7);
        assert!(format!("{table:?}").contains("blocks: 3"), "{table:?}");
        drop(table);
        drop(again);
        drop(values);
    }

    /// More than a block of code registrations: the last one is found by the handler's
    /// look-up, and dropping the registrations empties the table again.
    #[test]
    fn code_registrations_past_one_block_are_found() {
        let base = 0x10_0000_0000usize;
        let registrations: Vec<CodeRegistration> = (0..TABLE_SLOTS + 10)
            .map(|i| {
                register_code([CodeRange {
                    start: base + i * 64,
                    len: 64,
                    name: format!("f{i}"),
                }])
            })
            .collect();
        let last = base + (TABLE_SLOTS + 9) * 64 + 3;
        let readers = Readers::enter();
        let name = CODE
            .find(&readers, |t| t.find(last))
            .map(|r| r.name.clone());
        drop(readers);
        assert_eq!(name.as_deref(), Some("f1033"));
        drop(registrations);
        let readers = Readers::enter();
        assert!(CODE.find(&readers, |t| t.find(last)).is_none());
    }
}
