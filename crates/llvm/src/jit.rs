//! Running IR in process: LLVM's ORC LLJIT.
//!
//! A [`Jit`] compiles modules for the host, in this process, when one of their symbols is
//! first looked up, and links them against two sources of definitions, searched in this
//! order:
//!
//! 1. what was added to it (its main JITDylib): the IR of [`Jit::add_module`] and
//!    [`Jit::add_ir`], and the host addresses of [`Jit::define_symbol`] (for example a Rust
//!    `extern "C" fn` the IR calls);
//! 2. the symbols of the process, as `dlsym` finds them: libc (`strlen`, `malloc`), the
//!    other shared libraries loaded, and whatever the executable exports dynamically (a
//!    Rust executable exports nothing of its own by default: give its functions to
//!    [`Jit::define_symbol`]). LLJIT (LLVM 17 and later) sets this up itself, as a
//!    `<Process Symbols>` JITDylib after the main one in the link order, and the C API
//!    cannot turn it off. So an explicit definition always wins over a process symbol of
//!    the same name, and defining a name libc also has is not a conflict.
//!
//! A name found in neither is an error.
//!
//! Errors are never printed and do not end the process: they come back as [`Error::Jit`]
//! from the call that caused them. A module is compiled (whole) and linked only when one
//! of its symbols is first looked up, so an external that resolves nowhere, or an error
//! while compiling (bad inline assembly, say), is found then: that lookup fails with a
//! message naming the symbol asked for and the cause (`Symbols not found: [ name ]`, or
//! LLVM's diagnostic). The module's symbols stay failed: every later lookup of one fails
//! too (naming only the symbol asked for), and no code of the module is ever handed out.
//! The JIT remains usable for other modules. What LLVM itself treats as a fatal error (an
//! instruction selection failure, say) still ends the process, as in code generation
//! ([`crate::emit_object`]); modules are verified before they are added, which rules out
//! the commonest cause.
//!
//! # Garbage collection
//!
//! Functions with `gc "statepoint-example"` and explicit `llvm.experimental.gc.statepoint`
//! calls compile and run (libLLVM-19 has the built-in GC strategies). That strategy, like
//! LLVM's other built-in one (`coreclr`), takes only `addrspace(1)` pointers for GC
//! pointers: the verifier rejects a `gc.relocate` of any other address space. Pointers
//! in other address spaces, `addrspace(10)` included, are plain 64-bit pointers to the
//! JIT and to the C ABI of the host functions.
//!
//! ```
//! use locus_llvm::jit::Jit;
//!
//! let mut jit = Jit::new()?;
//! jit.add_ir(
//!     "add.ll",
//!     "define i64 @add(i64 %a, i64 %b) {\n  %s = add i64 %a, %b\n  ret i64 %s\n}\n",
//! )?;
//! // SAFETY: `@add` has exactly this C signature, and `jit` outlives the call.
//! let add: extern "C" fn(i64, i64) -> i64 = unsafe { jit.lookup_fn("add")? };
//! assert_eq!(add(2, 40), 42);
//! # Ok::<(), locus_llvm::Error>(())
//! ```
//!
//! # Ownership
//!
//! ORC takes ownership of the modules it compiles and needs them in a context of its own
//! (a "thread-safe context"). [`Jit::add_module`] therefore leaves the caller's [`Module`]
//! alone and adds a copy, made by writing it to bitcode and reading that back into the
//! JIT's context. Every JIT has one such context, which lives as long as it does.
//!
//! # Threads
//!
//! A `Jit` is neither `Send` nor `Sync`, like [`crate::Context`]: modules are compiled on
//! the thread that looks their symbols up, in a context only that thread touches. Several
//! threads may each own a JIT. The code a JIT produced is ordinary machine code, though,
//! and may be called from any thread while the JIT lives (see [`Jit::lookup_fn`]).

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use llvm_sys::bit_writer::LLVMWriteBitcodeToMemoryBuffer;
use llvm_sys::core::{
    LLVMContextSetDiagnosticHandler, LLVMCreateMemoryBufferWithMemoryRangeCopy,
    LLVMDisposeMemoryBuffer, LLVMDisposeModule, LLVMGetDiagInfoDescription,
    LLVMGetDiagInfoSeverity, LLVMSetModuleIdentifier,
};
use llvm_sys::error::{
    LLVMCreateStringError, LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage,
};
use llvm_sys::ir_reader::LLVMParseIRInContext;
use llvm_sys::object::{
    LLVMCreateBinary, LLVMDisposeBinary, LLVMDisposeSymbolIterator, LLVMGetSymbolName,
    LLVMGetSymbolSize, LLVMMoveToNextSymbol, LLVMObjectFileCopySymbolIterator,
    LLVMObjectFileIsSymbolIteratorAtEnd,
};
use llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcCreateLLJITBuilder, LLVMOrcDisposeLLJIT,
    LLVMOrcLLJITAddLLVMIRModule, LLVMOrcLLJITGetExecutionSession, LLVMOrcLLJITGetGlobalPrefix,
    LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITGetObjTransformLayer, LLVMOrcLLJITGetTripleString,
    LLVMOrcLLJITLookup, LLVMOrcLLJITMangleAndIntern, LLVMOrcLLJITRef,
};
use llvm_sys::orc2::{
    LLVMJITEvaluatedSymbol, LLVMJITSymbolFlags, LLVMJITSymbolGenericFlags, LLVMOrcAbsoluteSymbols,
    LLVMOrcCSymbolMapPair, LLVMOrcCreateNewThreadSafeContext, LLVMOrcCreateNewThreadSafeModule,
    LLVMOrcDisposeMaterializationUnit, LLVMOrcDisposeThreadSafeContext,
    LLVMOrcExecutionSessionSetErrorReporter, LLVMOrcJITDylibDefine,
    LLVMOrcObjectTransformLayerSetTransform, LLVMOrcThreadSafeContextGetContext,
    LLVMOrcThreadSafeContextRef,
};
use llvm_sys::prelude::{LLVMDiagnosticInfoRef, LLVMMemoryBufferRef, LLVMModuleRef};
use llvm_sys::LLVMDiagnosticSeverity;

use crate::codegen::init_targets;
use crate::error::{Error, Result};
use crate::ffi::{from_c_str, Message};
use crate::module::{verify_raw, Module};

/// An ORC LLJIT for the host: compiles IR in this process and hands out the addresses of
/// its symbols. Dropping it frees every module, all the code it compiled and its data.
///
/// See the [module documentation](self) for how symbols resolve and how errors are
/// reported.
pub struct Jit {
    raw: LLVMOrcLLJITRef,
    /// The context every module added to this JIT is parsed into (ORC's modules keep it
    /// alive too; this is our own reference).
    tsc: LLVMOrcThreadSafeContextRef,
    /// Where the session's error reporter, the context's diagnostic handler and the object
    /// transform keep what they are told; boxed so its address is stable, and freed after
    /// all three are gone.
    reports: Box<Reports>,
    /// Keeps `Jit` `!Send` and `!Sync`: see the module documentation.
    _not_send: PhantomData<*mut ()>,
}

impl Jit {
    /// Creates a JIT for the host (the target LLVM detects, with the host CPU and its
    /// features), with nothing defined in it; the process's own symbols are visible.
    ///
    /// # Errors
    ///
    /// [`Error::Jit`] if LLVM cannot make a JIT for the host (a host other than x86-64 or
    /// AArch64, whose targets are the only ones registered).
    pub fn new() -> Result<Jit> {
        init_targets();
        // SAFETY: no preconditions; the builder is consumed by `LLVMOrcCreateLLJIT`.
        let builder = unsafe { LLVMOrcCreateLLJITBuilder() };
        let mut raw = ptr::null_mut();
        // SAFETY: `builder` is fresh and handed over (even on failure); the out-pointer is
        // valid for writes.
        let error = unsafe { LLVMOrcCreateLLJIT(&mut raw, builder) };
        // SAFETY: null or an error of that call, ours to consume.
        if let Some(message) = unsafe { take_error(error) } {
            return Err(Error::Jit { message });
        }
        if raw.is_null() {
            return Err(jit_error("LLVM created no JIT"));
        }
        // SAFETY: no preconditions; disposed in `Drop`.
        let tsc = unsafe { LLVMOrcCreateNewThreadSafeContext() };
        let jit = Jit {
            raw,
            tsc,
            reports: Box::default(),
            _not_send: PhantomData,
        };
        let reports: *const Reports = &*jit.reports;
        // SAFETY: the JIT is live.
        let session = unsafe { LLVMOrcLLJITGetExecutionSession(jit.raw) };
        // SAFETY: the session is live; the reporter's state outlives it (it is freed after
        // `LLVMOrcDisposeLLJIT`). Without this, ORC prints such errors to stderr.
        unsafe {
            LLVMOrcExecutionSessionSetErrorReporter(
                session,
                on_session_error,
                reports.cast_mut().cast(),
            );
        }
        // SAFETY: `tsc` is live.
        let ctx = unsafe { LLVMOrcThreadSafeContextGetContext(jit.tsc) };
        // SAFETY: the context belongs to `tsc`, which lives until after the JIT (and with
        // it every module in the context) is disposed; so does the handler's state. With
        // the handler, an error diagnostic during compilation is collected instead of
        // printed and followed by `exit(1)`.
        unsafe {
            LLVMContextSetDiagnosticHandler(ctx, Some(on_diagnostic), reports.cast_mut().cast());
        }
        // SAFETY: the JIT is live.
        let layer = unsafe { LLVMOrcLLJITGetObjTransformLayer(jit.raw) };
        // SAFETY: the layer belongs to the JIT; the transform's state outlives it. Every
        // object passes through here right after its module is compiled, on the same
        // thread, so the errors collected meanwhile are that module's.
        unsafe {
            LLVMOrcObjectTransformLayerSetTransform(
                layer,
                check_compiled_object,
                reports.cast_mut().cast(),
            );
        }

        Ok(jit)
    }

    /// The JIT's target triple, e.g. `x86_64-pc-linux-gnu`.
    #[must_use]
    pub fn triple(&self) -> String {
        // SAFETY: the JIT is live.
        let triple = unsafe { LLVMOrcLLJITGetTripleString(self.raw) };
        // SAFETY: a NUL-terminated string owned by the JIT, copied at once.
        unsafe { from_c_str(triple) }.unwrap_or_default()
    }

    /// Defines `name` as the host address `address`, for the IR to call or read: typically
    /// a Rust `extern "C" fn` (`f as *const () as usize`) or a static's address. The IR
    /// declares it (`declare i64 @name(i64)`) with a signature that matches the Rust one
    /// under the C calling convention. The definition takes precedence over a process
    /// symbol of the same name (for modules linked after it).
    ///
    /// The JIT only records the address: what it points to must stay valid for as long as
    /// JIT code may use it.
    ///
    /// # Errors
    ///
    /// [`Error::Jit`] if `name` is already defined in this JIT (by an earlier call or by a
    /// module added earlier; not if only the process has it), if `address` is null, or if
    /// `name` contains a NUL byte.
    pub fn define_symbol(&mut self, name: &str, address: usize) -> Result<()> {
        if address == 0 {
            return Err(jit_error(&format!(
                "cannot define `{name}` at a null address"
            )));
        }
        let c_name = c_name(name)?;
        // SAFETY: the JIT is live, the name NUL-terminated. The entry's reference passes to
        // `LLVMOrcAbsoluteSymbols` below.
        let entry = unsafe { LLVMOrcLLJITMangleAndIntern(self.raw, c_name.as_ptr()) };
        let mut pair = LLVMOrcCSymbolMapPair {
            Name: entry,
            Sym: LLVMJITEvaluatedSymbol {
                Address: address as u64,
                // As the process-symbol generator flags what it finds.
                Flags: LLVMJITSymbolFlags {
                    GenericFlags: LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsExported
                        as u8,
                    TargetFlags: 0,
                },
            },
        };
        // SAFETY: one valid pair, whose name reference the unit takes over; the array
        // itself stays ours.
        let unit = unsafe { LLVMOrcAbsoluteSymbols(&mut pair, 1) };
        // SAFETY: the JIT is live.
        let dylib = unsafe { LLVMOrcLLJITGetMainJITDylib(self.raw) };
        // SAFETY: the JIT and its main JITDylib are live; on success the JITDylib owns the
        // unit.
        let error = unsafe { LLVMOrcJITDylibDefine(dylib, unit) };
        // SAFETY: null or an error of that call, ours to consume.
        if let Some(message) = unsafe { take_error(error) } {
            // SAFETY: on failure the unit is still ours, and disposed once.
            unsafe { LLVMOrcDisposeMaterializationUnit(unit) };
            return Err(Error::Jit { message });
        }
        Ok(())
    }

    /// Adds a copy of `module` to the JIT (the caller keeps the original). Nothing is
    /// compiled until one of its symbols is looked up.
    ///
    /// A module without a data layout gets the JIT's; one without a triple is compiled
    /// for the host all the same.
    ///
    /// # Errors
    ///
    /// [`Error::Verify`] if the module is invalid; [`Error::Jit`] if it defines a symbol
    /// the JIT already defines or its data layout is not the JIT's.
    pub fn add_module(&mut self, module: &Module<'_>) -> Result<()> {
        module.verify()?;
        // SAFETY: the module is live; the buffer is ours, and handed to the parser below.
        let buffer = unsafe { LLVMWriteBitcodeToMemoryBuffer(module.as_raw()) };
        if buffer.is_null() {
            return Err(jit_error("LLVM could not write the module as bitcode"));
        }
        let name = module.name();
        // SAFETY: a live buffer, ours to hand over.
        let copy = unsafe { self.parse(buffer, &name) }?;
        // SAFETY: `copy` is live; LLVM copies the name.
        unsafe { LLVMSetModuleIdentifier(copy.0, name.as_ptr().cast(), name.len()) };
        self.add(copy)
    }

    /// Parses `text` (LLVM IR text, or bitcode) into the JIT's context and adds it, as
    /// [`Jit::add_module`] would. `name` becomes the module identifier and the file name in
    /// diagnostics.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] if `text` is not well-formed IR, [`Error::Verify`] if the module is
    /// invalid, and otherwise as [`Jit::add_module`].
    pub fn add_ir(&mut self, name: &str, text: impl AsRef<[u8]>) -> Result<()> {
        let text = text.as_ref();
        let c_name = CString::new(name).map_err(|_| Error::Parse {
            message: format!("module name {name:?} contains a NUL byte"),
        })?;
        // What Module::parse_ir checks first: LLVM's reader crashes on what it refuses.
        crate::module::check_input(name, text)?;
        // SAFETY: `text` is valid for `text.len()` bytes and copied, as is the name.
        let buffer = unsafe {
            LLVMCreateMemoryBufferWithMemoryRangeCopy(
                text.as_ptr().cast(),
                text.len(),
                c_name.as_ptr(),
            )
        };
        // SAFETY: a live buffer, ours to hand over.
        let module = unsafe { self.parse(buffer, name) }?;
        // SAFETY: the module is live while `module` is.
        unsafe { verify_raw(module.0, "the module is invalid") }?;
        self.add(module)
    }

    /// The address of the symbol `name` (unmangled, as the IR spells it: `add` for
    /// `@add`), compiling and linking its module first if this is the first lookup into
    /// it. Symbols defined with [`Jit::define_symbol`] and process symbols can be looked up
    /// too.
    ///
    /// # Errors
    ///
    /// [`Error::Jit`] if nothing defines `name` (`Symbols not found: [ name ]`), or if its
    /// module cannot be materialized: an external it uses resolves nowhere (the message
    /// names it too), or compiling it reported an error (the message quotes LLVM's
    /// diagnostic). Once a module failed, lookups of its symbols keep failing. Also for a
    /// name with a NUL byte.
    pub fn lookup(&self, name: &str) -> Result<u64> {
        let c_name = c_name(name)?;
        // Anything reported before belongs to an earlier call.
        self.reports.clear();
        let mut address = 0;
        let compiling = crate::codegen::compiling();
        // SAFETY: the JIT is live, the name NUL-terminated, the out-pointer valid for
        // writes. Compilation happens here, on this thread.
        let error = unsafe { LLVMOrcLLJITLookup(self.raw, &mut address, c_name.as_ptr()) };
        drop(compiling);
        // SAFETY: null or an error of that call, ours to consume.
        let mut messages: Vec<String> = unsafe { take_error(error) }.into_iter().collect();
        messages.extend(self.reports.take());
        // Left over only if compilation failed before its object reached the transform.
        messages.extend(self.reports.take_compile_errors());
        if !messages.is_empty() {
            return Err(Error::Jit {
                message: messages.join("\n"),
            });
        }
        if address == 0 {
            return Err(jit_error(&format!("`{name}` resolved to a null address")));
        }
        Ok(address)
    }

    /// Looks `name` up as [`Jit::lookup`] does and returns its address as a value of type
    /// `F`, normally a function pointer type such as `extern "C" fn(i64, i64) -> i64`.
    ///
    /// `F` must be pointer-sized; anything else is rejected at compile time.
    ///
    /// # Safety
    ///
    /// The caller must guarantee, for as long as it uses the result, that
    ///
    /// * `F` is a pointer type that is valid for the symbol: for a function, an
    ///   `extern "C" fn` (or `unsafe extern "C" fn`) whose parameter and return types
    ///   match the IR function's under the C calling convention (`i64` ↔ `i64`,
    ///   `ptr` ↔ a raw pointer or reference, `void` ↔ no return type; a function with
    ///   another calling convention, e.g. `fastcc`, cannot be called from Rust); for data,
    ///   a raw pointer to the type the IR gives it;
    /// * the `Jit` is alive: dropping it frees the code and the data, and calling or
    ///   reading through the result afterwards is a use after free (the result does not
    ///   borrow the `Jit`, so the compiler cannot check this);
    /// * calling the function is itself sound: its preconditions hold, what it calls back
    ///   into (host symbols) is sound to call that way, and a Rust panic never unwinds
    ///   through JIT frames (host functions must not unwind; use `extern "C"`, which
    ///   aborts on an escaping panic).
    ///
    /// # Errors
    ///
    /// As [`Jit::lookup`].
    pub unsafe fn lookup_fn<F: Copy>(&self, name: &str) -> Result<F> {
        const {
            assert!(
                size_of::<F>() == size_of::<usize>(),
                "lookup_fn needs a pointer-sized type, such as an extern \"C\" fn"
            );
        }
        let address = usize::try_from(self.lookup(name)?)
            .map_err(|_| jit_error(&format!("the address of `{name}` does not fit a pointer")))?;
        // SAFETY: `F` has the size of `usize` (checked above); that the bits are a valid
        // `F` is the caller's promise.
        Ok(unsafe { std::mem::transmute_copy::<usize, F>(&address) })
    }

    /// The size in bytes of symbol `name` (unmangled, as for [`Jit::lookup`]) as the object
    /// LLVM compiled it into records it (ELF's `st_size`: for a function, its code), so
    /// that `lookup(name)..lookup(name) + size` is the function's code. Known once its
    /// module was compiled (after a lookup into it); `None` before, and for symbols without
    /// a recorded size (those of [`Jit::define_symbol`] and of the process).
    ///
    /// ```
    /// use locus_llvm::jit::Jit;
    ///
    /// let mut jit = Jit::new()?;
    /// jit.add_ir("one.ll", "define i64 @one() {\n  ret i64 1\n}\n")?;
    /// assert_eq!(jit.symbol_size("one"), None); // not compiled yet
    /// jit.lookup("one")?;
    /// assert!(jit.symbol_size("one").is_some_and(|size| size > 0));
    /// # Ok::<(), locus_llvm::Error>(())
    /// ```
    #[must_use]
    pub fn symbol_size(&self, name: &str) -> Option<u64> {
        // SAFETY: the JIT is live; no preconditions.
        let prefix = unsafe { LLVMOrcLLJITGetGlobalPrefix(self.raw) } as u8;
        let key = match prefix {
            0 => name.to_owned(),
            p => format!("{}{name}", char::from(p)),
        };
        lock(&self.reports.sizes).get(&key).copied()
    }

    /// Parses `buffer` (which this consumes) into the JIT's context.
    ///
    /// # Safety
    ///
    /// `buffer` is a live memory buffer that is ours to hand over to LLVM.
    unsafe fn parse(&self, buffer: LLVMMemoryBufferRef, name: &str) -> Result<RawModule> {
        // SAFETY: the context lives as long as `self.tsc`, and no compilation runs in it
        // now (compilation happens inside `lookup`, on this same thread).
        let ctx = unsafe { LLVMOrcThreadSafeContextGetContext(self.tsc) };
        let mut raw = ptr::null_mut();
        let mut message = ptr::null_mut();
        // SAFETY: `ctx` is live, `buffer` is handed over (freed inside, success or not),
        // and both out-pointers are valid for writes.
        let failed = unsafe { LLVMParseIRInContext(ctx, buffer, &mut raw, &mut message) };
        // SAFETY: null or an error message, ours to release with `LLVMDisposeMessage`.
        let message = unsafe { Message::from_raw(message) };
        if failed != 0 || raw.is_null() {
            return Err(Error::Parse {
                message: message.text_or(&format!("{name}: cannot parse module")),
            });
        }
        // SAFETY: a module just parsed into the JIT's context, ours to dispose.
        Ok(unsafe { RawModule::from_raw(raw) })
    }

    /// Hands `module` (in the JIT's context) to the JIT's main JITDylib.
    fn add(&mut self, module: RawModule) -> Result<()> {
        // One JITLink block per function: with all of a module's functions in one `.text`,
        // ORC's dependency tracking grows with the square of their number (see
        // `crate::passes`). ELF only: other formats name sections otherwise.
        if self.triple().contains("linux") {
            // SAFETY: the JIT's own copy, live and used by no other thread yet.
            unsafe { crate::passes::place_functions_in_sections(module.0) };
        }
        // SAFETY: the module lives in `self.tsc`'s context; the thread-safe module takes
        // ownership of it (and a reference to the context).
        let tsm = unsafe { LLVMOrcCreateNewThreadSafeModule(module.into_raw(), self.tsc) };
        // SAFETY: the JIT is live.
        let dylib = unsafe { LLVMOrcLLJITGetMainJITDylib(self.raw) };
        // SAFETY: the JIT and its main JITDylib are live; it takes ownership of `tsm`
        // whatever the outcome.
        let error = unsafe { LLVMOrcLLJITAddLLVMIRModule(self.raw, dylib, tsm) };
        // SAFETY: null or an error of that call, ours to consume.
        match unsafe { take_error(error) } {
            Some(message) => Err(Error::Jit { message }),
            None => Ok(()),
        }
    }
}

impl Drop for Jit {
    fn drop(&mut self) {
        // SAFETY: created by `LLVMOrcCreateLLJIT`, disposed once; this frees its modules
        // and code.
        let error = unsafe { LLVMOrcDisposeLLJIT(self.raw) };
        // SAFETY: null or an error of that call, ours to consume.
        drop(unsafe { take_error(error) });
        // SAFETY: our reference, released once; the JIT's modules, which held the others,
        // are gone, so this frees the context. `self.reports` is freed after this.
        unsafe { LLVMOrcDisposeThreadSafeContext(self.tsc) };
    }
}

impl fmt::Debug for Jit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jit")
            .field("triple", &self.triple())
            .finish_non_exhaustive()
    }
}

/// A module in the JIT's context not yet handed to ORC; disposed on drop.
struct RawModule(LLVMModuleRef);

impl RawModule {
    /// Takes ownership of `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live module that is ours to dispose, in a context that outlives the
    /// `RawModule`.
    unsafe fn from_raw(raw: LLVMModuleRef) -> Self {
        RawModule(raw)
    }

    fn into_raw(self) -> LLVMModuleRef {
        let raw = self.0;
        std::mem::forget(self);
        raw
    }
}

impl Drop for RawModule {
    fn drop(&mut self) {
        // SAFETY: the module is ours (never handed over: `into_raw` forgets `self`) and
        // disposed once, while its context lives.
        unsafe { LLVMDisposeModule(self.0) };
    }
}

/// Failures ORC and LLVM report out of band, collected for the call in progress.
#[derive(Default)]
struct Reports {
    /// From the execution session's error reporter.
    session: Mutex<Vec<String>>,
    /// Error diagnostics of the module being compiled, from the context's handler.
    compile: Mutex<Vec<String>>,
    /// The size of every sized symbol of the objects compiled so far, by object name.
    sizes: Mutex<HashMap<String, u64>>,
}

impl Reports {
    fn push(&self, message: String) {
        lock(&self.session).push(message);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.session))
    }

    fn push_compile_error(&self, message: String) {
        lock(&self.compile).push(message);
    }

    fn take_compile_errors(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.compile))
    }

    fn clear(&self) {
        lock(&self.session).clear();
        lock(&self.compile).clear();
    }
}

/// Locks `mutex`, poisoned or not (the data are plain strings and sizes, always consistent).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The execution session's error reporter: failures no caller can be told about directly,
/// chiefly a symbol the JIT linker cannot resolve (the lookup that caused it only hears
/// that materialization failed).
extern "C" fn on_session_error(state: *mut c_void, error: LLVMErrorRef) {
    // SAFETY: ORC hands the reporter an error to consume.
    let message = unsafe { take_error(error) }.unwrap_or_default();
    if state.is_null() || message.is_empty() {
        return;
    }
    // SAFETY: `state` is the `Reports` box of the `Jit` that owns the session, freed only
    // after the session.
    unsafe { &*state.cast::<Reports>() }.push(message);
}

/// The JIT context's diagnostic handler: keeps error diagnostics (compilation errors),
/// drops warnings, remarks and notes.
extern "C" fn on_diagnostic(info: LLVMDiagnosticInfoRef, state: *mut c_void) {
    // SAFETY: LLVM passes a live diagnostic for the duration of the call.
    let severity = unsafe { LLVMGetDiagInfoSeverity(info) };
    if !matches!(severity, LLVMDiagnosticSeverity::LLVMDSError) || state.is_null() {
        return;
    }
    // SAFETY: as above.
    let text = unsafe { LLVMGetDiagInfoDescription(info) };
    // SAFETY: the description is ours, to be released with `LLVMDisposeMessage`.
    let text = unsafe { Message::from_raw(text) }.text_or("unknown error");
    // SAFETY: `state` is the `Reports` box of the `Jit` whose context this is, freed only
    // after the context.
    unsafe { &*state.cast::<Reports>() }.push_compile_error(text);
}

/// The object transform: an object whose compilation reported errors (bad inline
/// assembly, say) is refused, which fails the materialization of its module. ORC then
/// reports the error to the session, fails the lookup, and marks the module's symbols as
/// failed, so no later lookup hands out the code either.
extern "C" fn check_compiled_object(
    state: *mut c_void,
    object: *mut LLVMMemoryBufferRef,
) -> LLVMErrorRef {
    if state.is_null() || object.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `state` is the `Reports` box of the `Jit` that owns the layer, freed only
    // after the JIT.
    let reports = unsafe { &*state.cast::<Reports>() };
    let errors = reports.take_compile_errors();
    if errors.is_empty() {
        // SAFETY: ORC passes a valid pointer to the object buffer, live for this call.
        let object = unsafe { *object };
        // SAFETY: as above.
        unsafe { record_symbol_sizes(reports, object) };
        return ptr::null_mut();
    }
    // SAFETY: ORC passes a valid in-out pointer to an object buffer we now own.
    let buffer = unsafe { *object };
    // SAFETY: on error the buffer is ours to free ...
    unsafe { LLVMDisposeMemoryBuffer(buffer) };
    // SAFETY: ... and the (valid) pointer to it must be reset to null.
    unsafe { *object = ptr::null_mut() };
    let message = CString::new(errors.join("\n").replace('\0', " ")).unwrap_or_default();
    // SAFETY: a NUL-terminated string, copied by LLVM; ORC consumes the error.
    unsafe { LLVMCreateStringError(message.as_ptr()) }
}

/// Records the size of every sized symbol of a compiled object, for [`Jit::symbol_size`].
/// An object LLVM cannot read as a binary is skipped (its symbols have no size then).
///
/// # Safety
///
/// `object` is null or a live memory buffer, not consumed here.
unsafe fn record_symbol_sizes(reports: &Reports, object: LLVMMemoryBufferRef) {
    if object.is_null() {
        return;
    }
    let mut message = ptr::null_mut();
    // SAFETY: the buffer is live for this call and not consumed (the binary borrows it and
    // is disposed below); the context is only needed for IR files; the message, if any,
    // is ours and disposed by `Message`.
    let binary = unsafe { LLVMCreateBinary(object, ptr::null_mut(), &mut message) };
    // SAFETY: null or an error message, ours to release with `LLVMDisposeMessage`.
    drop(unsafe { Message::from_raw(message) });
    if binary.is_null() {
        return;
    }
    let mut sizes = lock(&reports.sizes);
    // SAFETY: `binary` is a live object file; the iterator is disposed below.
    let symbols = unsafe { LLVMObjectFileCopySymbolIterator(binary) };
    // SAFETY: both live; the iterator belongs to `binary`.
    while unsafe { LLVMObjectFileIsSymbolIteratorAtEnd(binary, symbols) } == 0 {
        // SAFETY: the iterator is not at the end; the name is owned by the binary and
        // copied at once.
        let name = unsafe { LLVMGetSymbolName(symbols) };
        // SAFETY: as above.
        let size = unsafe { LLVMGetSymbolSize(symbols) };
        if !name.is_null() && size > 0 {
            // SAFETY: a NUL-terminated name owned by the binary, live until it is disposed.
            let name = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            sizes.entry(name).or_insert(size);
        }
        // SAFETY: the iterator is live and not at the end.
        unsafe { LLVMMoveToNextSymbol(symbols) };
    }
    // SAFETY: disposed once, before its binary.
    unsafe { LLVMDisposeSymbolIterator(symbols) };
    // SAFETY: disposed once; nothing borrows it any more.
    unsafe { LLVMDisposeBinary(binary) };
}

/// Consumes an LLVM error: `None` for success (null), else its message.
///
/// # Safety
///
/// `error` is null or a live error that is ours to consume, and consumed nowhere else.
unsafe fn take_error(error: LLVMErrorRef) -> Option<String> {
    if error.is_null() {
        return None;
    }
    // SAFETY: a live error, consumed by this call; the message is ours to dispose.
    let raw = unsafe { LLVMGetErrorMessage(error) };
    // SAFETY: null or the NUL-terminated message, alive until disposed below.
    let Some(message) = (unsafe { from_c_str(raw) }) else {
        return Some("unknown JIT error".to_owned());
    };
    // SAFETY: from `LLVMGetErrorMessage`, disposed once.
    unsafe { LLVMDisposeErrorMessage(raw) };
    Some(message)
}

fn jit_error(message: &str) -> Error {
    Error::Jit {
        message: message.to_owned(),
    }
}

fn c_name(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| jit_error(&format!("symbol name {name:?} contains a NUL byte")))
}
