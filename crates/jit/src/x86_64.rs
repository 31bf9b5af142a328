//! The runtime's entry points on x86-64 (System V): assembly trampolines and the Rust
//! functions they call, none of which lets a panic unwind into compiled code.
//!
//! - `locus_rt_enter(frame)`: saves the callee-saved registers, records its stack pointer
//!   in the frame (where a deoptimized or failed call resumes), and calls the compiled
//!   function with the frame's six arguments.
//! - `locus_rt_ic_miss(obj, name)`: the inline-cache miss handler; passes the address of
//!   its return address (which locates the patch point) to [`ic_miss`] as a third
//!   argument; [`ic_miss`] may rewrite the return address to the end of the site.
//! - `locus_rt_ic_lookup(obj, name)`: what a megamorphic site calls; [`ic_lookup`] answers
//!   the read from the object's shape and patches nothing.
//! - `locus_rt_poll(value)` and the program's surface (`locus_rt_shape_new`,
//!   `locus_rt_shape_change`, `locus_rt_object_new`, `locus_rt_object_set`,
//!   `locus_rt_object_get`, `locus_rt_invalidate`; see [`super::abi`]): each calls its Rust
//!   half with its stack pointer at entry as a fourth argument (it points at the return
//!   address into the program; the program's frames lie above it).
//!
//! Every one of those Rust halves returns an [`Exit`] in `rax:rdx`: the value, and 0, or
//! the resume stack pointer of the innermost `locus_rt_enter` when the call failed. Then
//! the trampoline does not return into the program: it drops the compiled frames and
//! returns 0 from `locus_rt_enter` (`locus_rt_abort`), and [`Runtime::call`] reports the
//! failure. The frames dropped are compiled code's and the trampoline's, never Rust's.
//! - `locus_rt_deopt_entry`: what a patched shadow calls (through `@locus.deopt.stub`). It
//!   saves all sixteen general registers in DWARF order, the stack pointer as it was before
//!   the call (DWARF 7) and the return address, and hands them to [`deopt`]; that returns
//!   the resume stack pointer of the innermost `locus_rt_enter` and the result, and the
//!   trampoline returns the result from there, dropping the compiled frames.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::Runtime;

/// The call `locus_rt_enter` makes, and where a deoptimized call resumes. The assembly
/// reads and writes it at fixed offsets: function 0, arguments 8..56, resume 56.
#[repr(C)]
pub(super) struct EnterFrame {
    function: u64,
    args: [u64; 6],
    /// The stack pointer `locus_rt_enter` had at its call, written by it.
    resume_sp: u64,
}

impl EnterFrame {
    /// A call of `function` with `args` (at most six).
    pub(super) fn new(function: u64, args: &[u64]) -> Option<Self> {
        let mut frame = EnterFrame {
            function,
            args: [0; 6],
            resume_sp: 0,
        };
        frame.args.get_mut(..args.len())?.copy_from_slice(args);
        Some(frame)
    }
}

pub(super) use super::capture::SavedRegisters;

/// What an entry point's Rust half returns to its trampoline, in `rax:rdx`: the value for
/// the program, or with `abort_sp` not 0 the stack pointer to end the call at.
#[repr(C)]
pub(super) struct Exit {
    value: u64,
    abort_sp: u64,
}

/// A trampoline that calls its Rust half with its entry stack pointer in `rcx` and returns
/// its value, or ends the call of the program if the Rust half says so.
macro_rules! checked_entry {
    ($name:literal, $rust:literal) => {
        concat!(
            ".globl ",
            $name,
            "\n",
            ".type ",
            $name,
            ", @function\n",
            $name,
            ":\n",
            "mov rcx, rsp\n",
            "sub rsp, 8\n",
            "call {",
            $rust,
            "}\n",
            "add rsp, 8\n",
            "test rdx, rdx\n",
            "jnz locus_rt_abort\n",
            "ret\n",
            ".size ",
            $name,
            ", . - ",
            $name,
            "\n",
        )
    };
}

/// What [`deopt`] returns to the deopt entry, in `rax:rdx`.
#[repr(C)]
pub(super) struct DeoptExit {
    resume_sp: u64,
    result: i64,
}

std::arch::global_asm!(
    ".pushsection .text",
    ".globl locus_rt_enter",
    ".type locus_rt_enter, @function",
    "locus_rt_enter:",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "sub rsp, 8",
    "mov [rdi + 56], rsp",
    "mov r11, rdi",
    "mov rax, [r11]",
    "mov rsi, [r11 + 16]",
    "mov rdx, [r11 + 24]",
    "mov rcx, [r11 + 32]",
    "mov r8, [r11 + 40]",
    "mov r9, [r11 + 48]",
    "mov rdi, [r11 + 8]",
    "call rax",
    "locus_rt_resume:",
    "add rsp, 8",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
    ".size locus_rt_enter, . - locus_rt_enter",
    "",
    ".globl locus_rt_ic_miss",
    ".type locus_rt_ic_miss, @function",
    "locus_rt_ic_miss:",
    "mov rdx, rsp",
    "sub rsp, 8",
    "call {ic_miss}",
    "add rsp, 8",
    "test rdx, rdx",
    "jnz locus_rt_abort",
    "ret",
    ".size locus_rt_ic_miss, . - locus_rt_ic_miss",
    "",
    ".globl locus_rt_ic_lookup",
    ".type locus_rt_ic_lookup, @function",
    "locus_rt_ic_lookup:",
    "sub rsp, 8",
    "call {ic_lookup}",
    "add rsp, 8",
    "test rdx, rdx",
    "jnz locus_rt_abort",
    "ret",
    ".size locus_rt_ic_lookup, . - locus_rt_ic_lookup",
    "",
    // rdx: the resume stack pointer of the innermost `locus_rt_enter`; rax: 0.
    "locus_rt_abort:",
    "mov rsp, rdx",
    "jmp locus_rt_resume",
    "",
    checked_entry!("locus_rt_poll", "poll"),
    checked_entry!("locus_rt_shape_new", "shape_new"),
    checked_entry!("locus_rt_shape_change", "shape_change"),
    checked_entry!("locus_rt_object_new", "object_new"),
    checked_entry!("locus_rt_object_set", "object_set"),
    checked_entry!("locus_rt_object_get", "object_get"),
    checked_entry!("locus_rt_invalidate", "invalidate"),
    "",
    ".globl locus_rt_deopt_entry",
    ".type locus_rt_deopt_entry, @function",
    "locus_rt_deopt_entry:",
    crate::save_registers_asm!(),
    "mov rdi, rsp",
    "and rsp, -16",
    "call {deopt}",
    "mov rsp, rax",
    "mov rax, rdx",
    "jmp locus_rt_resume",
    ".size locus_rt_deopt_entry, . - locus_rt_deopt_entry",
    ".popsection",
    ic_miss = sym ic_miss,
    ic_lookup = sym ic_lookup,
    deopt = sym deopt,
    poll = sym poll,
    shape_new = sym shape_new,
    shape_change = sym shape_change,
    object_new = sym object_new,
    object_set = sym object_set,
    object_get = sym object_get,
    invalidate = sym invalidate,
);

extern "C" {
    fn locus_rt_enter(frame: *mut EnterFrame) -> i64;
    fn locus_rt_ic_miss();
    fn locus_rt_ic_lookup();
    fn locus_rt_deopt_entry();
    fn locus_rt_poll();
    fn locus_rt_shape_new();
    fn locus_rt_shape_change();
    fn locus_rt_object_new();
    fn locus_rt_object_set();
    fn locus_rt_object_get();
    fn locus_rt_invalidate();
}

/// The address the program's `@locus_ic_miss` resolves to.
pub(super) fn ic_miss_address() -> usize {
    locus_rt_ic_miss as *const () as usize
}

/// The address a megamorphic site calls.
pub(super) fn ic_lookup_address() -> usize {
    locus_rt_ic_lookup as *const () as usize
}

/// The program's surface: each name the IR declares, and the trampoline it resolves to.
pub(super) fn surface_symbols() -> [(&'static str, usize); 8] {
    [
        ("locus_ic_miss", ic_miss_address()),
        ("locus_poll", locus_rt_poll as *const () as usize),
        ("locus_shape_new", locus_rt_shape_new as *const () as usize),
        (
            "locus_shape_change",
            locus_rt_shape_change as *const () as usize,
        ),
        (
            "locus_object_new",
            locus_rt_object_new as *const () as usize,
        ),
        (
            "locus_object_set",
            locus_rt_object_set as *const () as usize,
        ),
        (
            "locus_object_get",
            locus_rt_object_get as *const () as usize,
        ),
        (
            "locus_invalidate",
            locus_rt_invalidate as *const () as usize,
        ),
    ]
}

/// The address `@locus.deopt.stub` jumps to.
pub(super) fn deopt_entry_address() -> u64 {
    locus_rt_deopt_entry as *const () as u64
}

/// One call into compiled code in progress on this thread.
struct Active {
    runtime: *const Runtime,
    frame: *const EnterFrame,
    /// The first failure during the call.
    error: Option<String>,
}

thread_local! {
    /// The calls into compiled code in progress on this thread, innermost last.
    static ACTIVE: RefCell<Vec<Active>> = const { RefCell::new(Vec::new()) };
}

/// Calls the function of `frame` through `locus_rt_enter`, with `runtime` active; returns
/// its result and the first failure of the runtime during the call, if any (the call then
/// ended there).
///
/// # Safety
///
/// The frame's function takes the frame's arguments with the C calling convention, calling
/// it is sound, and it is code of `runtime`'s program.
pub(super) unsafe fn enter(runtime: &Runtime, frame: &mut EnterFrame) -> (i64, Option<String>) {
    let frame_ptr: *mut EnterFrame = frame;
    ACTIVE.with(|a| {
        a.borrow_mut().push(Active {
            runtime,
            frame: frame_ptr,
            error: None,
        })
    });
    // SAFETY: the caller's contract; the trampoline keeps the System V conventions, and
    // every entry point the code may reach catches panics.
    let result = unsafe { locus_rt_enter(frame_ptr) };
    let error = ACTIVE.with(|a| a.borrow_mut().pop()).and_then(|a| a.error);
    (result, error)
}

/// Records `message` as the failure of this thread's innermost call (the first one
/// counts).
pub(super) fn fail(message: String) {
    ACTIVE.with(|a| {
        if let Some(active) = a.borrow_mut().last_mut() {
            active.error.get_or_insert(message);
        }
    });
}

/// Runs `f` on the innermost active runtime and its frame; `None` if there is none.
fn with_active<T>(f: impl FnOnce(&Runtime, &EnterFrame) -> T) -> Option<T> {
    let (runtime, frame) = ACTIVE.with(|a| a.borrow().last().map(|a| (a.runtime, a.frame)))?;
    // SAFETY: `enter` pushed these while the runtime and frame it borrows are live, and pops
    // them before they go away; we are inside that call.
    let runtime = unsafe { &*runtime };
    // SAFETY: as above.
    let frame = unsafe { &*frame };
    Some(f(runtime, frame))
}

/// Compiled code reached the runtime with no runtime active: nothing can be answered.
fn no_runtime(entry: &str) -> ! {
    eprintln!("locus: {entry} called outside Runtime::call; aborting");
    std::process::abort()
}

/// The Rust half of `locus_rt_ic_miss`; `return_slot` holds its return address (into the
/// patch point that missed), which the runtime may move to the end of the site.
extern "C" fn ic_miss(object: *const u64, name: u64, return_slot: *mut u64) -> Exit {
    // SAFETY: the trampoline passes its stack pointer, which points at its return address.
    let return_address = unsafe { return_slot.read() };
    let answer = with_active(|runtime, frame| {
        let answer = catch_unwind(AssertUnwindSafe(|| {
            runtime.ic_miss(object, name, return_address)
        }))
        .unwrap_or_else(|_| Err("the inline-cache miss handler panicked".to_owned()));
        match answer {
            Ok(answer) => Ok(answer),
            Err(message) => {
                fail(message);
                Err(frame.resume_sp)
            }
        }
    });
    match answer.unwrap_or_else(|| no_runtime("locus_ic_miss")) {
        Ok((value, resume)) => {
            // SAFETY: as above; the slot is the compiled caller's, live until the
            // trampoline's `ret`, and `resume` is an instruction boundary of the caller:
            // the end of the patch point, which every form of the site reaches with its
            // result in rax.
            unsafe { return_slot.write(resume) };
            Exit {
                value: value as u64,
                abort_sp: 0,
            }
        }
        Err(resume_sp) => Exit {
            value: 0,
            abort_sp: resume_sp,
        },
    }
}

/// The Rust half of `locus_rt_ic_lookup`, which megamorphic sites call: the read answered
/// without patching, or refused as the miss handler refuses it.
extern "C" fn ic_lookup(object: u64, name: u64) -> Exit {
    let answer = with_active(|runtime, frame| {
        let answer = catch_unwind(AssertUnwindSafe(|| runtime.ic_lookup(object, name)))
            .unwrap_or_else(|_| Err("the megamorphic lookup panicked".to_owned()));
        match answer {
            Ok(value) => Exit {
                value: value as u64,
                abort_sp: 0,
            },
            Err(message) => {
                fail(message);
                Exit {
                    value: 0,
                    abort_sp: frame.resume_sp,
                }
            }
        }
    });
    answer.unwrap_or_else(|| no_runtime("the megamorphic lookup"))
}

/// Where a call of the program's surface came from.
#[derive(Clone, Copy)]
pub(super) struct Caller {
    /// The program's stack: from just above the return address to the stack pointer of the
    /// innermost `locus_rt_enter`. It is mapped only if the program called from this
    /// thread's stack (see [`Caller::on_stack`]).
    pub(super) stack: (u64, u64),
}

impl Caller {
    /// Whether `start..end` lies in the program's stack: between the return address and
    /// the innermost `locus_rt_enter`, and on this thread's stack. A program that moved its
    /// stack pointer elsewhere (`llvm.stackrestore` of a global, a huge `alloca`) has no
    /// stack here: what lies between its stack pointer and the thread's stack need not be
    /// mapped.
    pub(super) fn on_stack(&self, start: u64, end: u64) -> bool {
        let (low, high) = self.stack;
        start >= low
            && end <= high
            && thread_stack().is_some_and(|(bottom, top)| bottom <= low && high <= top)
    }
}

/// This thread's stack (lowest address, end), as the C library knows it; `None` if it
/// cannot say.
fn thread_stack() -> Option<(u64, u64)> {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: no precondition; the calling thread's handle.
    let thread = unsafe { libc::pthread_self() };
    // SAFETY: `attr` is written by a successful call, and destroyed below.
    if unsafe { libc::pthread_getattr_np(thread, attr.as_mut_ptr()) } != 0 {
        return None;
    }
    let mut address = std::ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: `attr` was initialized above; the out-pointers are live locals.
    let got = unsafe { libc::pthread_attr_getstack(attr.as_ptr(), &mut address, &mut size) };
    // SAFETY: initialized above, not used after.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    if got != 0 {
        return None;
    }
    let bottom = address as u64;
    Some((bottom, bottom.checked_add(size as u64)?))
}

/// Runs the Rust half of surface entry `entry` on the active runtime; `entry_sp` is the
/// trampoline's stack pointer at entry. A failure (or panic) is recorded as the error of
/// the call, which ends (see the module documentation).
fn surface(
    entry: &str,
    entry_sp: u64,
    f: impl FnOnce(&Runtime, Caller) -> Result<u64, String>,
) -> Exit {
    let exit = with_active(|runtime, frame| {
        // SAFETY: the trampoline passes its stack pointer at entry, which points at its
        // return address into the program.
        let return_address = unsafe { (entry_sp as *const u64).read() };
        let caller = Caller {
            stack: (entry_sp.saturating_add(8), frame.resume_sp),
        };
        let result = catch_unwind(AssertUnwindSafe(|| f(runtime, caller)))
            .unwrap_or_else(|_| Err("panicked".to_owned()));
        match result {
            Ok(value) => Exit { value, abort_sp: 0 },
            Err(message) => {
                let from = runtime
                    .jit()
                    .function_at(return_address)
                    .map(|f| format!(" (called from @{})", f.name))
                    .unwrap_or_default();
                fail(format!("{entry}{from}: {message}"));
                Exit {
                    value: 0,
                    abort_sp: frame.resume_sp,
                }
            }
        }
    });
    exit.unwrap_or_else(|| no_runtime(entry))
}

/// `@locus_poll`: returns its argument; the runtime may invalidate code meanwhile.
extern "C" fn poll(value: u64, _: u64, _: u64, entry_sp: u64) -> Exit {
    surface("locus_poll", entry_sp, |runtime, _| {
        runtime.poll()?;
        Ok(value)
    })
}

/// `@locus_shape_new(ptr names, i64 count)`.
extern "C" fn shape_new(names: u64, count: u64, _: u64, entry_sp: u64) -> Exit {
    surface("locus_shape_new", entry_sp, |runtime, caller| {
        runtime.abi_shape_new(names, count, caller)
    })
}

/// `@locus_shape_change(i64 shape, ptr names, i64 count)`.
extern "C" fn shape_change(shape: u64, names: u64, count: u64, entry_sp: u64) -> Exit {
    surface("locus_shape_change", entry_sp, |runtime, caller| {
        runtime.abi_shape_change(shape, names, count, caller)
    })
}

/// `@locus_object_new(i64 shape)`.
extern "C" fn object_new(shape: u64, _: u64, _: u64, entry_sp: u64) -> Exit {
    surface("locus_object_new", entry_sp, |runtime, _| {
        runtime.abi_object_new(shape)
    })
}

/// `@locus_object_set(ptr object, i64 name, i64 value)`.
extern "C" fn object_set(object: u64, name: u64, value: u64, entry_sp: u64) -> Exit {
    surface("locus_object_set", entry_sp, |runtime, _| {
        runtime.abi_object_set(object, name, value)
    })
}

/// `@locus_object_get(ptr object, i64 name)`.
extern "C" fn object_get(object: u64, name: u64, _: u64, entry_sp: u64) -> Exit {
    surface("locus_object_get", entry_sp, |runtime, _| {
        runtime.abi_object_get(object, name)
    })
}

/// `@locus_invalidate(ptr function)`.
extern "C" fn invalidate(function: u64, _: u64, _: u64, entry_sp: u64) -> Exit {
    surface("locus_invalidate", entry_sp, |runtime, _| {
        runtime.abi_invalidate(function)
    })
}

/// The Rust half of `locus_rt_deopt_entry`.
extern "C" fn deopt(saved: *const SavedRegisters) -> DeoptExit {
    let exit = with_active(|runtime, frame| {
        // SAFETY: the trampoline passes its save area, live for this call.
        let saved = unsafe { &*saved };
        let result = catch_unwind(AssertUnwindSafe(|| {
            runtime.deoptimize(saved, frame.resume_sp)
        }))
        .unwrap_or_else(|_| {
            fail("deoptimization panicked".to_owned());
            0
        });
        DeoptExit {
            resume_sp: frame.resume_sp,
            result,
        }
    });
    exit.unwrap_or_else(|| no_runtime("the deopt entry"))
}
