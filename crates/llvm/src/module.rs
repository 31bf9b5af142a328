//! Contexts and modules: parse IR text or bitcode, verify, print, list functions; and
//! modules a caller owns, borrowed in place ([`Context::borrow_raw`], [`BorrowedModule`]).

use std::cell::RefCell;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;

use llvm_sys::analysis::{LLVMVerifierFailureAction, LLVMVerifyModule};
use llvm_sys::core::{
    LLVMCloneModule, LLVMContextCreate, LLVMContextDispose, LLVMContextSetDiagnosticHandler,
    LLVMCreateMemoryBufferWithMemoryRangeCopy, LLVMDisposeModule, LLVMGetDiagInfoDescription,
    LLVMGetDiagInfoSeverity, LLVMGetFirstFunction, LLVMGetModuleContext, LLVMGetModuleIdentifier,
    LLVMGetNextFunction, LLVMGetTarget, LLVMGetValueName2, LLVMPrintModuleToString, LLVMSetTarget,
};
use llvm_sys::core::{
    LLVMDeleteInstruction, LLVMGetFirstUse, LLVMGetPoison, LLVMReplaceAllUsesWith, LLVMTypeOf,
};
use llvm_sys::core::{
    LLVMGetFirstGlobal, LLVMGetFirstGlobalAlias, LLVMGetFirstGlobalIFunc, LLVMGetLinkage,
    LLVMGetNextGlobal, LLVMGetNextGlobalAlias, LLVMGetNextGlobalIFunc, LLVMIsDeclaration,
};
use llvm_sys::ir_reader::LLVMParseIRInContext;
use llvm_sys::prelude::{LLVMContextRef, LLVMDiagnosticInfoRef, LLVMModuleRef, LLVMValueRef};
use llvm_sys::{LLVMDiagnosticSeverity, LLVMLinkage};

use crate::error::{Error, Result};
use crate::ffi::{from_c_str, lossy, Message};

/// Error diagnostics LLVM reports through the context while code is generated.
#[derive(Default)]
struct Diagnostics {
    errors: RefCell<Vec<String>>,
}

/// Receives every diagnostic of one context. Without a handler LLVM prints errors and
/// calls `exit(1)`; with this one they are collected and returned as [`Error::Codegen`].
/// Warnings, remarks and notes are dropped.
extern "C" fn on_diagnostic(info: LLVMDiagnosticInfoRef, state: *mut c_void) {
    // SAFETY: LLVM passes a live diagnostic for the duration of the call.
    let severity = unsafe { LLVMGetDiagInfoSeverity(info) };
    if !matches!(severity, LLVMDiagnosticSeverity::LLVMDSError) {
        return;
    }
    // SAFETY: as above.
    let text = unsafe { LLVMGetDiagInfoDescription(info) };
    // SAFETY: the description is ours, to be released with `LLVMDisposeMessage`.
    let text = unsafe { Message::from_raw(text) }.text_or("unknown error");
    if state.is_null() {
        return;
    }
    // SAFETY: `state` is the `Box<Diagnostics>` the owning `Context` registered; the box
    // outlives the LLVM context (it is freed after `LLVMContextDispose`).
    let diagnostics = unsafe { &*state.cast::<Diagnostics>() };
    if let Ok(mut errors) = diagnostics.errors.try_borrow_mut() {
        errors.push(text);
    }
}

/// An LLVM context: owns types, constants and every [`Module`] parsed into it.
///
/// A context and everything in it belong to one thread at a time; LLVM does not lock them.
/// Several threads may each use their own context. `Context` is therefore neither `Send`
/// nor `Sync`:
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<locus_llvm::Context>();
/// ```
pub struct Context {
    raw: LLVMContextRef,
    diagnostics: Box<Diagnostics>,
    /// False for a context borrowed from the caller ([`Context::borrow_raw`]): never
    /// disposed here, and its diagnostic handler is the caller's.
    owned: bool,
    /// Keeps `Context` `!Send` and `!Sync` even if the raw pointer type changes.
    _not_send: PhantomData<*mut ()>,
}

impl Context {
    /// Creates an empty context.
    #[must_use]
    pub fn new() -> Self {
        // SAFETY: no preconditions; the result is disposed in `Drop`.
        let raw = unsafe { LLVMContextCreate() };
        let diagnostics = Box::<Diagnostics>::default();
        let state: *const Diagnostics = &*diagnostics;
        // SAFETY: `raw` is live; `state` stays valid until after the context is disposed.
        unsafe {
            LLVMContextSetDiagnosticHandler(raw, Some(on_diagnostic), state.cast_mut().cast())
        };
        Context {
            raw,
            diagnostics,
            owned: true,
            _not_send: PhantomData,
        }
    }

    /// A context the caller created and owns (an `LLVMContextRef` from llvm-sys, inkwell's
    /// `Context::raw`, or `llvm::wrap(&M.getContext())` in a pass plugin), lent to Locus so
    /// that a module living in it can be borrowed ([`BorrowedModule::new`]). Dropping the
    /// result leaves the context as it was: it is not disposed and its diagnostic handler
    /// is not replaced, so diagnostics LLVM reports while Locus works in it (code
    /// generation's, [`crate::emit_object`]) go to the caller's handler rather than come
    /// back as errors. Verification, the IR walk and building IR report none.
    ///
    /// # Errors
    ///
    /// [`Error::Borrow`] when `raw` is null.
    ///
    /// # Safety
    ///
    /// - `raw` is a live `LLVMContext` of the same LLVM 19 library this crate links
    ///   (`libLLVM-19.so`: not a second copy of LLVM linked statically elsewhere);
    /// - it stays alive, and is not disposed, for as long as the result and every module
    ///   and value Locus hands out from it live (the borrow checker ties those to the
    ///   result, not to the LLVM context);
    /// - nothing else uses the context on another thread meanwhile (LLVM does not lock it).
    pub unsafe fn borrow_raw(raw: LLVMContextRef) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::Borrow {
                message: "the caller's LLVMContextRef is null".into(),
            });
        }
        Ok(Context {
            raw,
            diagnostics: Box::<Diagnostics>::default(),
            owned: false,
            _not_send: PhantomData,
        })
    }

    /// The raw handle, for the other modules of this crate.
    #[allow(dead_code)]
    pub(crate) fn as_raw(&self) -> LLVMContextRef {
        self.raw
    }

    /// Forgets the error diagnostics collected so far.
    pub(crate) fn clear_errors(&self) {
        if let Ok(mut errors) = self.diagnostics.errors.try_borrow_mut() {
            errors.clear();
        }
    }

    /// Takes the error diagnostics collected since the last call.
    pub(crate) fn take_errors(&self) -> Vec<String> {
        match self.diagnostics.errors.try_borrow_mut() {
            Ok(mut errors) => std::mem::take(&mut *errors),
            Err(_) => Vec::new(),
        }
    }
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if !self.owned {
            // The caller's context (`borrow_raw`): theirs to dispose.
            return;
        }
        // SAFETY: created by `LLVMContextCreate`, disposed once; every `Module` borrowing
        // this context has been dropped already (the borrow checker sees to it).
        unsafe { LLVMContextDispose(self.raw) };
        // `self.diagnostics` is freed after this, once LLVM can no longer call the handler.
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("raw", &self.raw)
            .field("owned", &self.owned)
            .finish()
    }
}

/// An LLVM module living in a [`Context`]. Disposed on drop, unless it is the caller's own
/// module borrowed through a [`BorrowedModule`].
pub struct Module<'ctx> {
    raw: LLVMModuleRef,
    ctx: &'ctx Context,
    /// False for a module the caller owns ([`BorrowedModule`]): never disposed here.
    owned: bool,
    /// Instructions erased through [`crate::builder::Builder::erase`]: detached from their
    /// blocks but kept alive until the module is dropped, so that handles to them never
    /// dangle. See `crate::builder` for the invariants.
    erased: RefCell<Vec<LLVMValueRef>>,
}

impl<'ctx> Module<'ctx> {
    /// Parses a module from LLVM IR text (or bitcode; LLVM tells them apart by the magic
    /// number). The input is copied; `name` becomes the module identifier and the file
    /// name in diagnostics.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] with LLVM's diagnostic, which begins `name:line:column: error:`,
    /// when the input is not well-formed IR, or when `name` contains a NUL byte; for
    /// bitcode whose structure is damaged, `name: error: malformed bitcode at byte N: ...`
    /// ([`crate::bitcode::check`]), before LLVM reads it. A module that parses may still be
    /// invalid: see [`Module::verify`].
    pub fn parse_ir(ctx: &'ctx Context, name: &str, text: impl AsRef<[u8]>) -> Result<Self> {
        let text = text.as_ref();
        check_input(name, text)?;
        let c_name = CString::new(name).map_err(|_| Error::Parse {
            message: format!("module name {name:?} contains a NUL byte"),
        })?;
        // SAFETY: `text` is valid for `text.len()` bytes and is copied; `c_name` is a
        // NUL-terminated string that LLVM also copies.
        let buffer = unsafe {
            LLVMCreateMemoryBufferWithMemoryRangeCopy(
                text.as_ptr().cast(),
                text.len(),
                c_name.as_ptr(),
            )
        };
        let mut raw = ptr::null_mut();
        let mut message = ptr::null_mut();
        // SAFETY: `ctx.raw` is live, `buffer` is a fresh buffer whose ownership passes to
        // LLVM (it is freed inside this call, success or not), and both out-pointers are
        // valid for writes.
        let failed = unsafe { LLVMParseIRInContext(ctx.raw, buffer, &mut raw, &mut message) };
        // SAFETY: null or an error message, ours to release with `LLVMDisposeMessage`.
        let message = unsafe { Message::from_raw(message) };
        if failed != 0 || raw.is_null() {
            return Err(Error::Parse {
                message: message.text_or(&format!("{name}: cannot parse module")),
            });
        }
        Ok(Module {
            raw,
            ctx,
            owned: true,
            erased: RefCell::default(),
        })
    }

    /// Runs the LLVM verifier over the whole module.
    ///
    /// # Errors
    ///
    /// [`Error::Verify`] with every complaint of the verifier (each names the broken rule
    /// and prints the instruction at fault).
    pub fn verify(&self) -> Result<()> {
        // SAFETY: `self.raw` is live while `self` is.
        unsafe { verify_raw(self.raw, "the module is invalid") }
    }

    /// The module as LLVM IR text, as `llvm-dis` would print it.
    #[must_use]
    pub fn print(&self) -> String {
        // SAFETY: `self.raw` is live.
        let text = unsafe { LLVMPrintModuleToString(self.raw) };
        // SAFETY: the string is ours, to be released with `LLVMDisposeMessage`.
        let text = unsafe { Message::from_raw(text) };
        text.text().unwrap_or_default()
    }

    /// The module as bitcode (what `llvm-as` writes), or `None` if LLVM could not write it.
    #[must_use]
    pub fn write_bitcode(&self) -> Option<Vec<u8>> {
        // SAFETY: `self.raw` is live; the buffer is ours and disposed below.
        let buffer = unsafe { llvm_sys::bit_writer::LLVMWriteBitcodeToMemoryBuffer(self.raw) };
        if buffer.is_null() {
            return None;
        }
        // SAFETY: `buffer` is live.
        let start = unsafe { llvm_sys::core::LLVMGetBufferStart(buffer) }.cast::<u8>();
        // SAFETY: as above.
        let size = unsafe { llvm_sys::core::LLVMGetBufferSize(buffer) };
        // SAFETY: `start` and `size` describe bytes the buffer owns, copied at once.
        let bytes = unsafe { std::slice::from_raw_parts(start, size) }.to_vec();
        // SAFETY: `buffer` came from LLVM above and is disposed exactly once.
        unsafe { llvm_sys::core::LLVMDisposeMemoryBuffer(buffer) };
        Some(bytes)
    }

    /// The names of the module's functions, definitions and declarations (intrinsics
    /// included), in module order.
    #[must_use]
    pub fn functions(&self) -> Vec<String> {
        let mut names = Vec::new();
        // SAFETY: `self.raw` is live; the iteration follows LLVM's function list.
        let mut function = unsafe { LLVMGetFirstFunction(self.raw) };
        while !function.is_null() {
            let mut len = 0;
            // SAFETY: `function` is a live function of this module.
            let name = unsafe { LLVMGetValueName2(function, &mut len) };
            // SAFETY: the name is valid for `len` bytes while the module is not changed,
            // and is copied at once.
            names.push(unsafe { lossy(name, len) });
            // SAFETY: as above.
            function = unsafe { LLVMGetNextFunction(function) };
        }
        names
    }

    /// The names of the global symbols the module defines that a linker resolves other
    /// objects' references to: functions, variables, aliases and ifuncs with a linkage
    /// other than `internal`, `private` or `available_externally` (whose body is for
    /// inlining only and never emitted), whatever their visibility (a hidden symbol still
    /// takes references within the executable). In module order, functions first.
    #[must_use]
    pub fn linked_definitions(&self) -> Vec<String> {
        type First = unsafe extern "C" fn(LLVMModuleRef) -> LLVMValueRef;
        type Next = unsafe extern "C" fn(LLVMValueRef) -> LLVMValueRef;
        let lists: [(First, Next); 4] = [
            (LLVMGetFirstFunction, LLVMGetNextFunction),
            (LLVMGetFirstGlobal, LLVMGetNextGlobal),
            (LLVMGetFirstGlobalAlias, LLVMGetNextGlobalAlias),
            (LLVMGetFirstGlobalIFunc, LLVMGetNextGlobalIFunc),
        ];
        let mut names = Vec::new();
        for (first, next) in lists {
            // SAFETY: `self.raw` is live; the walk follows one of its global lists, which
            // is not changed meanwhile.
            let mut value = unsafe { first(self.raw) };
            while !value.is_null() {
                // SAFETY: `value` is a live global of this module (aliases and ifuncs are
                // never declarations).
                let declaration = unsafe { LLVMIsDeclaration(value) } != 0;
                // SAFETY: as above.
                let linkage = unsafe { LLVMGetLinkage(value) };
                let local = matches!(
                    linkage,
                    LLVMLinkage::LLVMInternalLinkage
                        | LLVMLinkage::LLVMPrivateLinkage
                        | LLVMLinkage::LLVMAvailableExternallyLinkage
                );
                if !declaration && !local {
                    let mut len = 0;
                    // SAFETY: as above.
                    let name = unsafe { LLVMGetValueName2(value, &mut len) };
                    // SAFETY: the name is valid for `len` bytes, and is copied at once.
                    names.push(unsafe { lossy(name, len) });
                }
                // SAFETY: as above.
                value = unsafe { next(value) };
            }
        }
        names
    }

    /// The module identifier (the `name` given to [`Module::parse_ir`]).
    #[must_use]
    pub fn name(&self) -> String {
        let mut len = 0;
        // SAFETY: `self.raw` is live.
        let name = unsafe { LLVMGetModuleIdentifier(self.raw, &mut len) };
        // SAFETY: the identifier is valid for `len` bytes, and is copied at once.
        unsafe { lossy(name, len) }
    }

    /// The module's target triple (`target triple = "..."`), empty when it names none.
    #[must_use]
    pub fn target_triple(&self) -> String {
        // SAFETY: `self.raw` is live.
        let triple = unsafe { LLVMGetTarget(self.raw) };
        // SAFETY: a NUL-terminated string owned by the module, copied at once.
        unsafe { from_c_str(triple) }.unwrap_or_default()
    }

    /// The context this module lives in.
    #[must_use]
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    /// Sets the module's target triple (used by code generation on a private copy).
    pub(crate) fn set_target_triple(&mut self, triple: &CStr) {
        // SAFETY: `self.raw` is live and LLVM copies the string.
        unsafe { LLVMSetTarget(self.raw, triple.as_ptr()) };
    }

    /// The raw handle, for the other modules of this crate.
    pub(crate) fn as_raw(&self) -> LLVMModuleRef {
        self.raw
    }

    /// Keeps `inst` alive until the module is dropped, and frees it then.
    ///
    /// # Safety
    ///
    /// `inst` is an instruction of this module, already removed from its block, with no
    /// uses left, and handed over only once.
    pub(crate) unsafe fn keep_erased(&self, inst: LLVMValueRef) {
        if let Ok(mut erased) = self.erased.try_borrow_mut() {
            erased.push(inst);
        }
    }
}

impl Clone for Module<'_> {
    /// A deep copy in the same context.
    fn clone(&self) -> Self {
        // SAFETY: `self.raw` is live; the copy is a new module owned by the result.
        let raw = unsafe { LLVMCloneModule(self.raw) };
        Module {
            raw,
            ctx: self.ctx,
            // The copy is ours even when the original is the caller's.
            owned: true,
            erased: RefCell::default(),
        }
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        // Erased instructions first: they are no longer in any block, so disposing the
        // module would not free them, and they may still use its blocks or metadata.
        for inst in self.erased.get_mut().drain(..).rev() {
            // Each was a live instruction of this module, removed from its block and never
            // freed (`keep_erased`'s contract); it is freed exactly once here. Any use of it
            // left (there should be none) is first pointed at poison so that no user
            // dangles.
            // SAFETY: `inst` is a live instruction.
            if !unsafe { LLVMGetFirstUse(inst) }.is_null() {
                // SAFETY: as above.
                let ty = unsafe { LLVMTypeOf(inst) };
                // SAFETY: `ty` is the instruction's first-class type, of a live context.
                let poison = unsafe { LLVMGetPoison(ty) };
                // SAFETY: `inst` is live and `poison` has its type.
                unsafe { LLVMReplaceAllUsesWith(inst, poison) };
            }
            // SAFETY: `inst` is live, detached, unused, and freed only here.
            unsafe { LLVMDeleteInstruction(inst) };
        }
        if !self.owned {
            // The caller's module (`BorrowedModule`): theirs to dispose.
            return;
        }
        // SAFETY: the module is owned by `self` and disposed once, before its context.
        unsafe { LLVMDisposeModule(self.raw) };
    }
}

/// A module the caller created and owns, in a context it owns, borrowed so that Locus can
/// check and change it in place: [`Module::verify`], the GC verifier and lowering
/// (`locus_gc::verify::verify_module`, `locus_gc::lower::lower_module`), the SME check
/// (`locus_sme::check::check_module`) and every other function taking a `&Module` run on
/// it directly, with no printing and re-parsing. It dereferences to a [`Module`] and is
/// never disposed by Locus; a [`Clone`] of it is a new module Locus owns (in the same
/// context).
///
/// With inkwell (feature `llvm19-1`; its llvm-sys must be the one this crate links, which
/// cargo unifies when both ask for `llvm-sys` 191):
///
/// ```ignore
/// let ctx = unsafe { locus_llvm::Context::borrow_raw(inkwell_ctx.raw()) }?;
/// let module = unsafe { locus_llvm::BorrowedModule::new(&ctx, inkwell_module.as_mut_ptr()) }?;
/// locus_gc::lower::lower_module(&module, Default::default())?;
/// drop(module); // before inkwell touches its module again
/// ```
///
/// Only a shared reference to the [`Module`] is handed out, so the borrowed handle cannot
/// be moved out of the `BorrowedModule` (and outlive it) or swapped with a module Locus
/// owns.
pub struct BorrowedModule<'ctx> {
    module: Module<'ctx>,
}

impl<'ctx> BorrowedModule<'ctx> {
    /// Borrows `raw`, a module living in `ctx`, until the result is dropped. Instructions
    /// Locus erases meanwhile are freed when it is dropped; the module is not.
    ///
    /// # Errors
    ///
    /// [`Error::Borrow`] when `raw` is null or lives in another context than `ctx`.
    ///
    /// # Safety
    ///
    /// - `raw` is a live `LLVMModule` of the same LLVM 19 library this crate links, in the
    ///   context `ctx` stands for ([`Context::borrow_raw`], or a context Locus created);
    /// - nothing else uses the module, or anything in it, while the result lives (no other
    ///   thread, no handle of the caller's: inkwell's `Module` included) — Locus may
    ///   rewrite and erase instructions, add declarations and change attributes;
    /// - nothing disposes the module while the result lives; Locus never disposes it (the
    ///   caller still must, later, as it always had to);
    /// - the module's context outlives the result (ensured by `ctx` when Locus created
    ///   it; the caller's promise to [`Context::borrow_raw`] otherwise).
    pub unsafe fn new(ctx: &'ctx Context, raw: LLVMModuleRef) -> Result<Self> {
        if raw.is_null() {
            return Err(Error::Borrow {
                message: "the caller's LLVMModuleRef is null".into(),
            });
        }
        // SAFETY: `raw` is a live module (the caller's promise).
        let raw_ctx = unsafe { LLVMGetModuleContext(raw) };
        if raw_ctx != ctx.raw {
            return Err(Error::Borrow {
                message: format!(
                    "the caller's module lives in context {raw_ctx:p}, not in the one given \
                     ({:p})",
                    ctx.raw
                ),
            });
        }
        Ok(BorrowedModule {
            module: Module {
                raw,
                ctx,
                owned: false,
                erased: RefCell::default(),
            },
        })
    }

    /// The borrowed module's raw handle, the one given to [`BorrowedModule::new`].
    #[must_use]
    pub fn as_raw(&self) -> LLVMModuleRef {
        self.module.raw
    }
}

impl<'ctx> std::ops::Deref for BorrowedModule<'ctx> {
    type Target = Module<'ctx>;

    fn deref(&self) -> &Module<'ctx> {
        &self.module
    }
}

impl fmt::Debug for BorrowedModule<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BorrowedModule").field(&self.module).finish()
    }
}

impl fmt::Debug for Module<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module")
            .field("name", &self.name())
            .field("functions", &self.functions())
            .finish()
    }
}

/// Runs LLVM's verifier on `raw`; `fallback` is the error's message when LLVM gives none.
///
/// # Safety
///
/// `raw` is a live module.
pub(crate) unsafe fn verify_raw(raw: LLVMModuleRef, fallback: &str) -> Result<()> {
    let mut message = ptr::null_mut();
    // SAFETY: `raw` is live (the caller's contract); with `ReturnStatusAction` the verifier
    // neither prints nor aborts, and the message it always allocates is disposed by
    // `Message`.
    let broken = unsafe {
        LLVMVerifyModule(
            raw,
            LLVMVerifierFailureAction::LLVMReturnStatusAction,
            &mut message,
        )
    };
    // SAFETY: the verifier's message, ours to release with `LLVMDisposeMessage`.
    let message = unsafe { Message::from_raw(message) };
    if broken != 0 {
        return Err(Error::Verify {
            message: message.text_or(fallback),
        });
    }
    Ok(())
}

/// What is checked before LLVM parses `text` as IR text or bitcode: the nesting of IR text
/// ([`MAX_NESTING`]), the structure of bitcode ([`crate::bitcode::check`]). LLVM's reader
/// can crash on either, where the crash cannot be reported as an error.
pub(crate) fn check_input(name: &str, text: &[u8]) -> Result<()> {
    if crate::bitcode::is_bitcode(text) {
        return crate::bitcode::check(text).map_err(|e| Error::Parse {
            message: format!("{name}: error: {e}"),
        });
    }
    if let Some((line, column)) = too_deep(text) {
        return Err(Error::Parse {
            message: format!(
                "{name}:{line}:{column}: error: brackets nested more than {MAX_NESTING} \
                 deep (LLVM's parser recurses once per level and would overflow its stack)"
            ),
        });
    }
    Ok(())
}

/// The deepest nesting of `(`, `[` and `{` accepted in IR text. LLVM's parser recurses once
/// per level of a type or constant (and its verifier and printer once more), about 1 KiB
/// of stack each: nesting of 100 000 overflows an 8 MiB main thread inside LLVM, where it
/// cannot be reported. Real IR nests a few levels (a C type's nesting, a constant
/// expression's).
pub const MAX_NESTING: usize = 1000;

/// Where IR text first nests brackets deeper than [`MAX_NESTING`] (1-based line and
/// column), outside strings and comments; `None` for shallower text and for bitcode.
fn too_deep(text: &[u8]) -> Option<(usize, usize)> {
    if crate::bitcode::is_bitcode(text) {
        return None;
    }
    let (mut depth, mut line, mut line_start) = (0usize, 1usize, 0usize);
    let (mut in_string, mut in_comment) = (false, false);
    for (i, &byte) in text.iter().enumerate() {
        match byte {
            b'\n' => {
                line += 1;
                line_start = i + 1;
                in_comment = false;
            }
            _ if in_comment => {}
            // LLVM strings escape a quote as \22, so a quote always ends one.
            b'"' => in_string = !in_string,
            _ if in_string => {}
            b';' => in_comment = true,
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some((line, i - line_start + 1));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}
