//! Capturing the registers at a patch point or stack map shadow (x86-64 System V): the
//! trampoline every runtime built on stack maps needs, to read live values where LLVM put
//! them.
//!
//! [`capture_trampoline!`](crate::capture_trampoline) defines an assembly function to give
//! a patch point as its target (or to call from a patched shadow). It saves the sixteen
//! general registers in DWARF order, the stack pointer as it was before the call pushed
//! the return address (DWARF 7) and the return address (16), and calls a Rust handler
//! with them ([`SavedRegisters`]); what the handler returns is the trampoline's result in
//! `rax`. The compiled caller's frame is intact meanwhile, so its spill slots and allocas
//! can be read through [`SavedRegisters::frame`] and the record's locations
//! (`locus_stackmap::Frame::value`). The trampoline aligns the stack for the handler
//! itself, so it may be reached where the stack is not aligned (a shadow); it keeps
//! every callee-saved register, and a patch point's C calling convention lets it clobber
//! the rest.
//!
//! ```
//! use locus_jit::{capture_trampoline, SavedRegisters};
//!
//! /// Answers the stack pointer the caller had, read from the saved registers.
//! extern "C" fn on_capture(saved: &SavedRegisters) -> u64 {
//!     saved.register(7).unwrap_or(0)
//! }
//!
//! capture_trampoline!(fn my_capture => on_capture);
//!
//! fn main() {
//!     // `my_capture as usize` is the target to give a patch point (a host symbol of
//!     // the JIT); called from Rust here, it reports the caller's stack pointer.
//!     let target = my_capture as *const () as usize;
//!     assert_ne!(target, 0);
//!     let here = 0u8;
//!     // SAFETY: the trampoline takes no arguments and the handler does not unwind.
//!     let sp = unsafe { my_capture() };
//!     let local = &here as *const u8 as u64;
//!     assert!(sp <= local && local - sp < 4096, "{sp:#x} {local:#x}");
//! }
//! ```
//!
//! The runtime's own deoptimization entry saves the registers with the same sequence
//! ([`save_registers_asm!`](crate::save_registers_asm)), then resumes elsewhere instead of
//! returning.

use locus_stackmap::Frame;

/// The registers a capture trampoline saved, in DWARF order: `rax, rdx, rcx, rbx, rsi,
/// rdi, rbp, rsp, r8 .. r15` (0 to 15; `rsp`, 7, as it was before the call to the
/// trampoline), then the return address (16). The layout the assembly writes: 17 words.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedRegisters(pub [u64; 17]);

impl SavedRegisters {
    /// The value of DWARF register `dwarf_reg` (0 to 16; 16 is the return address).
    #[must_use]
    pub fn register(&self, dwarf_reg: u16) -> Option<u64> {
        self.0.get(usize::from(dwarf_reg)).copied()
    }

    /// The address the trampoline returns to: just after the call in the patch point (a
    /// patch point's record is the nearest before it).
    #[must_use]
    pub fn return_address(&self) -> u64 {
        self.0[16]
    }

    /// The stopped frame, to read a record's locations from
    /// (`locus_stackmap::Frame::value`): these registers, and this process's memory.
    ///
    /// # Safety
    ///
    /// Every address the frame is asked to read is mapped and readable for the length
    /// asked: those of the stack map record of the site that called the trampoline are,
    /// while its handler runs (the compiled frame is intact).
    #[must_use]
    pub unsafe fn frame(&self) -> StoppedFrame<'_> {
        StoppedFrame { saved: self }
    }
}

/// A frame stopped in a capture trampoline (see [`SavedRegisters::frame`]).
#[derive(Clone, Copy, Debug)]
pub struct StoppedFrame<'a> {
    saved: &'a SavedRegisters,
}

impl Frame for StoppedFrame<'_> {
    fn register(&self, dwarf_reg: u16) -> Option<u64> {
        self.saved.register(dwarf_reg)
    }

    fn read_memory(&self, address: u64, buf: &mut [u8]) -> bool {
        // SAFETY: the contract of `SavedRegisters::frame`, which made `self`: the address
        // range is readable. Byte copies: no alignment needed.
        unsafe {
            std::ptr::copy_nonoverlapping(address as *const u8, buf.as_mut_ptr(), buf.len());
        }
        true
    }
}

/// The assembly (Intel syntax, one string) that saves the registers as
/// [`SavedRegisters`] lays them out, in 136 bytes it reserves below the return address:
/// afterwards `rsp` points at the saved registers, and `rax` holds the return address.
/// For use inside `global_asm!`; [`capture_trampoline!`](crate::capture_trampoline) is the
/// whole trampoline.
#[macro_export]
macro_rules! save_registers_asm {
    () => {
        concat!(
            "sub rsp, 136\n",
            "mov [rsp + 0], rax\n",
            "mov [rsp + 8], rdx\n",
            "mov [rsp + 16], rcx\n",
            "mov [rsp + 24], rbx\n",
            "mov [rsp + 32], rsi\n",
            "mov [rsp + 40], rdi\n",
            "mov [rsp + 48], rbp\n",
            // rsp before the call: above the save area and the return address.
            "lea rax, [rsp + 144]\n",
            "mov [rsp + 56], rax\n",
            "mov [rsp + 64], r8\n",
            "mov [rsp + 72], r9\n",
            "mov [rsp + 80], r10\n",
            "mov [rsp + 88], r11\n",
            "mov [rsp + 96], r12\n",
            "mov [rsp + 104], r13\n",
            "mov [rsp + 112], r14\n",
            "mov [rsp + 120], r15\n",
            "mov rax, [rsp + 136]\n",
            "mov [rsp + 128], rax\n",
        )
    };
}

/// Defines `NAME`, a capture trampoline (see the [module documentation](self)) that calls
/// `HANDLER`, an `extern "C" fn(&SavedRegisters) -> u64`, and returns its result:
/// `capture_trampoline!(fn NAME => HANDLER);` (with an optional visibility before `fn`).
/// `NAME` is an assembly symbol, global in the program: it must be unique in the process.
/// The handler must not unwind (an `extern "C"` function aborts if it panics).
#[macro_export]
macro_rules! capture_trampoline {
    ($vis:vis fn $name:ident => $handler:path) => {
        const _: extern "C" fn(&$crate::SavedRegisters) -> u64 = $handler;
        ::std::arch::global_asm!(
            ".pushsection .text",
            concat!(".globl ", stringify!($name)),
            concat!(".type ", stringify!($name), ", @function"),
            concat!(stringify!($name), ":"),
            $crate::save_registers_asm!(),
            // rbx (saved above, callee-saved for the handler) keeps the save area's
            // address across a call made with the stack aligned.
            "mov rbx, rsp",
            "and rsp, -16",
            "mov rdi, rbx",
            "call {handler}",
            "mov rsp, rbx",
            "mov rbx, [rsp + 24]",
            "add rsp, 136",
            "ret",
            concat!(".size ", stringify!($name), ", . - ", stringify!($name)),
            ".popsection",
            handler = sym $handler,
        );
        unsafe extern "C" {
            $vis fn $name() -> u64;
        }
    };
}
