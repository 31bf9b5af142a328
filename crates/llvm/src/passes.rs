//! Running LLVM's optimizer in process, as `opt-19 -passes=PIPELINE` does, and taking back
//! the memory-effect promises a call makes to it.
//!
//! [`run_passes`] hands a module to LLVM's new pass manager through the C API
//! (`LLVMRunPasses` with `LLVMPassBuilderOptions`). The pipeline is opt's text syntax:
//! `default<O2>`, `function(dse,instcombine)`, `always-inline,sroa`, and so on. A pipeline
//! LLVM cannot parse (an unknown pass, unbalanced brackets) is refused with
//! [`Error::Passes`] and the module is left as it was; the module is verified before the
//! passes run (passes on invalid IR may crash LLVM) and again after.
//!
//! No target machine is given: the passes see LLVM's generic cost model, as `opt` does for
//! a module without a target triple. What the optimizer may assume about memory does not
//! depend on it.
//!
//! [`forget_memory_effects`] removes what a call site and its callee promise about the
//! memory the call touches (`memory(...)`, and `readnone`/`readonly`/`writeonly` on its
//! arguments), so that the optimizer treats the call as reading and writing anything: what
//! a code generator needs when it knows better than the attributes (a call that may run a
//! garbage collector reads the roots the caller stored before it).
//!
//! [`function_sections`] gives every function a section of its own, as `-ffunction-sections`
//! does, for a module about to be JIT-compiled: ORC records, for each symbol of a JITLink
//! block, the symbols its block depends on, so a module whose N functions share one `.text`
//! section (one block) costs it memory in N² (LLVM 19's `lli-19 -jit-kind=orc` on 10,000
//! two-line functions calling one another: 1.37 GB resident, 150 MB with a section each).
//! [`Jit`](crate::jit::Jit) does this to its own copy of every module it is given on Linux.
//!
//! ```
//! use locus_llvm::passes::run_passes;
//! use locus_llvm::{Context, Module};
//!
//! let ctx = Context::new();
//! let module = Module::parse_ir(&ctx, "dead.ll", r#"
//!     define i64 @f() {
//!       %slot = alloca i64
//!       store i64 1, ptr %slot
//!       %v = load i64, ptr %slot
//!       ret i64 %v
//!     }
//! "#)?;
//! run_passes(&module, "default<O2>")?;
//! assert!(!module.print().contains("alloca"));
//! assert!(run_passes(&module, "no-such-pass").is_err());
//! # Ok::<(), locus_llvm::Error>(())
//! ```

use std::ffi::CString;

use llvm_sys::core::{
    LLVMGetEnumAttributeKindForName, LLVMGetFirstFunction, LLVMGetNextFunction, LLVMGetSection,
    LLVMGetValueName2, LLVMIsDeclaration, LLVMRemoveCallSiteEnumAttribute,
    LLVMRemoveEnumAttributeAtIndex, LLVMSetSection,
};
use llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use llvm_sys::prelude::LLVMModuleRef;
use llvm_sys::transforms::pass_builder::{
    LLVMCreatePassBuilderOptions, LLVMDisposePassBuilderOptions, LLVMPassBuilderOptionsRef,
    LLVMRunPasses,
};

use crate::error::{Error, Result};
use crate::ffi::from_c_str;
use crate::ir::{AttributeIndex, Call, Function, Instruction, Opcode};
use crate::module::Module;

/// Pass builder options, disposed on drop.
struct Options(LLVMPassBuilderOptionsRef);

impl Drop for Options {
    fn drop(&mut self) {
        // SAFETY: created by `LLVMCreatePassBuilderOptions`, disposed once.
        unsafe { LLVMDisposePassBuilderOptions(self.0) };
    }
}

/// Takes an `LLVMErrorRef`'s message and releases both; `None` for success.
///
/// # Safety
///
/// `error` is null or an error LLVM returned that nothing else consumes.
unsafe fn take_error(error: LLVMErrorRef) -> Option<String> {
    if error.is_null() {
        return None;
    }
    // SAFETY: a live error, consumed here (LLVMGetErrorMessage releases it).
    let raw = unsafe { LLVMGetErrorMessage(error) };
    // SAFETY: a NUL-terminated string from LLVMGetErrorMessage (or null).
    let text = unsafe { from_c_str(raw) }.unwrap_or_default();
    if !raw.is_null() {
        // SAFETY: from `LLVMGetErrorMessage`, disposed once.
        unsafe { LLVMDisposeErrorMessage(raw) };
    }
    Some(text)
}

/// Runs `pipeline` (opt's `-passes=` syntax, e.g. `default<O2>`) on `module` in process.
///
/// # Errors
///
/// [`Error::Verify`] if the module is invalid before or after the passes, and
/// [`Error::Passes`] if LLVM cannot parse or build the pipeline (the module is then
/// unchanged) or the string holds a NUL byte.
pub fn run_passes(module: &Module<'_>, pipeline: &str) -> Result<()> {
    let refuse = |message: String| Error::Passes {
        pipeline: pipeline.to_owned(),
        message,
    };
    let text = CString::new(pipeline).map_err(|_| refuse("it contains a NUL byte".into()))?;
    if pipeline.trim().is_empty() {
        return Err(refuse("the pipeline is empty".into()));
    }
    module.verify()?;
    // SAFETY: no preconditions; disposed by `Options`.
    let options = Options(unsafe { LLVMCreatePassBuilderOptions() });
    // SAFETY: the module is live and valid (verified above), the pipeline NUL-terminated,
    // no target machine (null is accepted) and the options live.
    let error = unsafe {
        LLVMRunPasses(
            module.as_raw(),
            text.as_ptr(),
            std::ptr::null_mut(),
            options.0,
        )
    };
    // SAFETY: the error LLVMRunPasses returned, consumed only here.
    if let Some(message) = unsafe { take_error(error) } {
        return Err(refuse(message));
    }
    module.verify()
}

/// The parameter attributes that promise how a call uses the memory an argument points to.
const ARGUMENT_MEMORY_ATTRIBUTES: [&str; 3] = ["readnone", "readonly", "writeonly"];

/// LLVM's kind number for the enum attribute `name` (0 if it has none).
fn kind(name: &str) -> u32 {
    // SAFETY: the name is valid for its length.
    unsafe { LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) }
}

/// Removes every promise about memory from `call` and from the function it calls (if it
/// calls one directly): the `memory(...)` attribute and `readnone`, `readonly` and
/// `writeonly` on each argument, at the call site and on the callee. The optimizer then
/// assumes the call may read and write any memory that escaped, as it does for a call to an
/// unknown function. Returns true if anything was removed.
///
/// A callee changed here changes for every call of it in the module: it only loses
/// promises, so no other call becomes wrong, only less optimized.
pub fn forget_memory_effects(call: Call<'_>) -> bool {
    let raw = call.instruction().as_raw();
    let mut removed = call
        .called_function()
        .is_some_and(forget_function_memory_effects);
    for (index, name) in memory_attributes(call.num_arguments()) {
        let (Some(idx), kind) = (index.raw(), kind(name)) else {
            continue;
        };
        if kind != 0 && call.has_attribute(index, name) {
            // SAFETY: `raw` is a live call site of a module `call` borrows; removing an
            // attribute creates nothing and leaves the IR valid.
            unsafe { LLVMRemoveCallSiteEnumAttribute(raw, idx, kind) };
            removed = true;
        }
    }
    removed
}

/// Where memory promises live on a function or call of `params` arguments, and their names.
fn memory_attributes(params: u32) -> impl Iterator<Item = (AttributeIndex, &'static str)> {
    std::iter::once((AttributeIndex::Function, "memory")).chain((0..params).flat_map(|i| {
        ARGUMENT_MEMORY_ATTRIBUTES
            .into_iter()
            .map(move |name| (AttributeIndex::Param(i), name))
    }))
}

/// Removes the `memory(...)` attribute and the parameters' `readnone`, `readonly` and
/// `writeonly` from `f`. Returns true if anything was removed.
pub fn forget_function_memory_effects(f: Function<'_>) -> bool {
    let params = u32::try_from(f.params().len()).unwrap_or(u32::MAX);
    let mut removed = false;
    for (index, name) in memory_attributes(params) {
        let (Some(idx), kind) = (index.raw(), kind(name)) else {
            continue;
        };
        if kind != 0 && f.has_attribute(index, name) {
            // SAFETY: a live function of a module `f` borrows; removing an attribute
            // creates nothing and leaves the IR valid.
            unsafe { LLVMRemoveEnumAttributeAtIndex(f.as_raw(), idx, kind) };
            removed = true;
        }
    }
    removed
}

/// Puts every defined function that has no section of its own in `.text.NAME`, as
/// `-ffunction-sections` does for ELF, so that each becomes a block of its own when JITLink
/// links the object (see the [module documentation](self) for why). Returns how many
/// functions it placed.
///
/// ```
/// use locus_llvm::passes::function_sections;
/// use locus_llvm::{Context, Module};
///
/// let ctx = Context::new();
/// let module = Module::parse_ir(&ctx, "two.ll", r#"
///     declare void @g()
///     define void @f() { call void @g() ret void }
///     define void @h() section ".init" { ret void }
/// "#)?;
/// assert_eq!(function_sections(&module), 1);
/// let text = module.print();
/// assert!(text.contains(r#"define void @f() section ".text.f""#));
/// assert!(text.contains(r#"define void @h() section ".init""#));
/// # Ok::<(), locus_llvm::Error>(())
/// ```
pub fn function_sections(module: &Module<'_>) -> usize {
    // SAFETY: a live module, borrowed for the call.
    unsafe { place_functions_in_sections(module.as_raw()) }
}

/// [`function_sections`] on a raw module (the JIT places its own copy of each module).
///
/// # Safety
///
/// `module` is a live module that no other thread uses during the call.
pub(crate) unsafe fn place_functions_in_sections(module: LLVMModuleRef) -> usize {
    let mut placed = 0;
    // SAFETY: a live module (the caller's promise).
    let mut f = unsafe { LLVMGetFirstFunction(module) };
    while !f.is_null() {
        // SAFETY: `f` is a live function of the module.
        let defined = unsafe { LLVMIsDeclaration(f) } == 0;
        // SAFETY: a live function.
        let current = unsafe { LLVMGetSection(f) };
        // SAFETY: null or the function's section name, read at once.
        let current = unsafe { from_c_str(current) };
        if defined && current.is_none_or(|s| s.is_empty()) {
            let mut len = 0;
            // SAFETY: a live value; the name is `len` bytes owned by it, copied at once.
            let name = unsafe { LLVMGetValueName2(f, &mut len) };
            // SAFETY: as above.
            let name = unsafe { std::slice::from_raw_parts(name.cast::<u8>(), len) };
            let mut section = b".text.".to_vec();
            section.extend_from_slice(name);
            if let Ok(section) = CString::new(section) {
                // SAFETY: a live function and a NUL-terminated name, which LLVM copies.
                unsafe { LLVMSetSection(f, section.as_ptr()) };
                placed += 1;
            }
        }
        // SAFETY: `f` is a live function of the module.
        f = unsafe { LLVMGetNextFunction(f) };
    }
    placed
}

/// Sets the garbage collector strategy of `f` (`gc "NAME"` in the IR), as
/// `rewrite-statepoints-for-gc` reads it: it rewrites only functions whose strategy is
/// `statepoint-example` or `coreclr`. `None` removes it.
///
/// ```
/// use locus_llvm::passes::set_gc;
/// use locus_llvm::{Context, Module};
///
/// let ctx = Context::new();
/// let module = Module::parse_ir(&ctx, "f.ll", "define void @f() { ret void }")?;
/// let f = module.function("f").ok_or("no @f")?;
/// set_gc(f, Some("statepoint-example"));
/// assert_eq!(f.gc().as_deref(), Some("statepoint-example"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn set_gc(f: Function<'_>, strategy: Option<&str>) {
    let name = strategy.and_then(|s| CString::new(s).ok());
    let ptr = name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
    // SAFETY: a live function of a module `f` borrows; the name is NUL-terminated (or null,
    // which clears it) and LLVM copies it.
    unsafe { llvm_sys::core::LLVMSetGC(f.as_raw(), ptr) };
}

/// Adds the enum or integer attribute `name` with `value` to `f` itself (such as
/// `uwtable(async)`: `"uwtable"`, 2), replacing one of the same kind. Returns false, and
/// adds nothing, when LLVM has no such attribute.
pub fn add_function_enum_attribute(f: Function<'_>, name: &str, value: u64) -> bool {
    let kind = kind(name);
    if kind == 0 {
        return false;
    }
    let raw = f.as_raw();
    // SAFETY: a live function, whose module is live.
    let module = unsafe { llvm_sys::core::LLVMGetGlobalParent(raw) };
    // SAFETY: a live module, whose context is live.
    let ctx = unsafe { llvm_sys::core::LLVMGetModuleContext(module) };
    // SAFETY: a live context and a kind LLVM named.
    let attr = unsafe { llvm_sys::core::LLVMCreateEnumAttribute(ctx, kind, value) };
    // SAFETY: a live function and an attribute of its context.
    unsafe {
        llvm_sys::core::LLVMAddAttributeAtIndex(raw, llvm_sys::LLVMAttributeFunctionIndex, attr)
    };
    true
}

/// Adds the string attribute `key="value"` to `f` itself (such as `"frame-pointer"="all"`
/// or `"gc-leaf-function"`), replacing one with the same key.
pub fn add_function_string_attribute(f: Function<'_>, key: &str, value: &str) {
    let raw = f.as_raw();
    // SAFETY: a live function, whose module is live.
    let module = unsafe { llvm_sys::core::LLVMGetGlobalParent(raw) };
    // SAFETY: a live module, whose context is live.
    let ctx = unsafe { llvm_sys::core::LLVMGetModuleContext(module) };
    // SAFETY: a live context.
    let attr = unsafe { string_attribute(ctx, key, value) };
    // SAFETY: a live function and an attribute of its context.
    unsafe {
        llvm_sys::core::LLVMAddAttributeAtIndex(raw, llvm_sys::LLVMAttributeFunctionIndex, attr)
    };
}

/// Adds the string attribute `key="value"` to the call site `call` itself (such as
/// `"gc-leaf-function"` on a call of inline assembly); false if `call` is no call or
/// `invoke`.
pub fn add_call_string_attribute(call: Instruction<'_>, key: &str, value: &str) -> bool {
    if !matches!(call.opcode(), Opcode::Call | Opcode::Invoke) {
        return false;
    }
    let raw = call.as_raw();
    // SAFETY: a live instruction.
    let ty = unsafe { llvm_sys::core::LLVMTypeOf(raw) };
    // SAFETY: a live type, whose context is the module's.
    let ctx = unsafe { llvm_sys::core::LLVMGetTypeContext(ty) };
    // SAFETY: a live context.
    let attr = unsafe { string_attribute(ctx, key, value) };
    // SAFETY: a live call site and an attribute of its context.
    unsafe {
        llvm_sys::core::LLVMAddCallSiteAttribute(raw, llvm_sys::LLVMAttributeFunctionIndex, attr)
    };
    true
}

/// The string attribute `key="value"` of context `ctx`.
///
/// # Safety
/// `ctx` is a live context.
unsafe fn string_attribute(
    ctx: llvm_sys::prelude::LLVMContextRef,
    key: &str,
    value: &str,
) -> llvm_sys::prelude::LLVMAttributeRef {
    let len = |s: &str| u32::try_from(s.len()).unwrap_or(u32::MAX);
    // SAFETY: `ctx` is live (the caller's promise); the key and value are valid for their
    // lengths and LLVM copies them into the attribute.
    unsafe {
        llvm_sys::core::LLVMCreateStringAttribute(
            ctx,
            key.as_ptr().cast(),
            len(key),
            value.as_ptr().cast(),
            len(value),
        )
    }
}
