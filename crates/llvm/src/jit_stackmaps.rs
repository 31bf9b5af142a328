//! A JIT that keeps its stack maps: LLVM's MCJIT with a memory manager of our own.
//!
//! A runtime that uses `llvm.experimental.stackmap` or `llvm.experimental.patchpoint.*`
//! needs the `.llvm_stackmaps` section of the code it generated, with each function's
//! address relocated to where the code was loaded (spec 000, "Stack Map Section": "a JIT
//! ... can read the section directly from memory"). ORC's default LLJIT linker (JITLink)
//! does not keep that section, so [`crate::jit::Jit`] cannot give it. A [`StackMapJit`]
//! compiles one module with MCJIT, whose RuntimeDyld linker asks the memory manager for
//! every allocatable section by name, and LLVM 19's C API lets us be that memory manager
//! (`LLVMCreateSimpleMCJITMemoryManager`):
//!
//! - every section is placed in one address range the JIT reserves for itself (so the
//!   PC-relative references between sections, `.eh_frame`'s for one, always reach), page
//!   aligned, read-write while RuntimeDyld writes and relocates it;
//! - when MCJIT finalizes the code, code sections become read-execute and read-only data
//!   read-only (W^X: no page is ever writable and executable at once);
//! - the sections named [`STACK_MAP_SECTIONS`] (`.llvm_stackmaps` in ELF and COFF,
//!   `__llvm_stackmaps` in Mach-O) are then parsed in place with `locus_stackmap` and
//!   indexed by absolute address ([`StackMapJit::stack_maps`]) before [`StackMapJit::new`]
//!   returns. Sections are matched by name only: code may be in any section. On x86-64
//!   MCJIT compiles for the large code model, so a function without a `section` attribute
//!   is in `.ltext`, not `.text`; one with `section ".text.hot"` is in `.text.hot`.
//!
//! Why MCJIT and not ORC's RTDyld object layer with MCJIT-like callbacks (LLVM 19 has both):
//! the two use the same linker and the same callbacks, but with ORC the memory manager is
//! created per object inside ORC's lookup, finalization happens on ORC's schedule, and the
//! section must be matched back to its `MaterializationResponsibility`; with MCJIT one
//! module is one engine and one memory manager, `LLVMGetFunctionAddress` returns only after
//! relocations are applied and memory is finalized, and disposing the engine is the one
//! point where code, sections and index go away. A JIT for a dynamic language compiles a
//! module per unit of code anyway; make one `StackMapJit` per module.
//!
//! # Symbols
//!
//! External symbols resolve to the host addresses given to [`StackMapJit::new`] (for Rust
//! `extern "C"` functions the IR calls), else to the process's symbols (`dlsym`). A used
//! declaration found in neither is refused before anything is compiled: MCJIT would end
//! the process on it. Error diagnostics of code generation (bad inline assembly) come back
//! as [`Error::Jit`]; what LLVM itself treats as fatal (an instruction selection failure,
//! running out of the JIT's 1 GiB of address space) still ends the process.
//!
//! # Memory
//!
//! Dropping the JIT disposes the engine (which deregisters the code's unwind tables), then
//! drops the index, then unmaps the whole range: code, data, the stack map section. What
//! is mapped for all live JITs of the process is [`jit_memory_in_use`].
//!
//! ```
//! # #[cfg(target_arch = "x86_64")] {
//! use locus_llvm::jit_stackmaps::StackMapJit;
//!
//! let ir = r#"
//! declare void @llvm.experimental.stackmap(i64, i32, ...)
//!
//! define i64 @twice(i64 %a) {
//!   %d = add i64 %a, %a
//!   call void (i64, i32, ...) @llvm.experimental.stackmap(i64 7, i32 0, i64 %d)
//!   ret i64 %d
//! }
//! "#;
//! let jit = StackMapJit::new("twice.ll", ir, &[])?;
//! let twice = jit.function_address("twice").ok_or("no @twice")?;
//! let record = jit.stack_maps().by_id(7).next().ok_or("no record 7")?;
//! assert_eq!(record.function.address, twice);
//! // SAFETY: `@twice` is `i64 (i64)` with the C calling convention; `jit` lives on.
//! let f: extern "C" fn(i64) -> i64 = unsafe { jit.lookup_fn("twice")? };
//! assert_eq!(f(21), 42);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_uint, c_void, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use llvm_sys::core::{
    LLVMCreateMemoryBufferWithMemoryRangeCopy, LLVMGetFirstFunction, LLVMGetFirstGlobal,
    LLVMGetFirstUse, LLVMGetNamedFunction, LLVMGetNamedGlobal, LLVMGetNextFunction,
    LLVMGetNextGlobal, LLVMIsDeclaration,
};
use llvm_sys::execution_engine::{
    LLVMAddGlobalMapping, LLVMCreateMCJITCompilerForModule, LLVMCreateSimpleMCJITMemoryManager,
    LLVMDisposeExecutionEngine, LLVMExecutionEngineRef, LLVMGetFunctionAddress,
    LLVMInitializeMCJITCompilerOptions, LLVMLinkInMCJIT, LLVMMCJITCompilerOptions,
};
use llvm_sys::ir_reader::LLVMParseIRInContext;
use llvm_sys::prelude::{LLVMBool, LLVMModuleRef, LLVMValueRef};
use locus_stackmap::{ParseOptions, StackMapIndex, Tables};

use crate::codegen::{compiling, init_targets, PatchpointLivenessOff};
use crate::error::{Error, Result};
use crate::ffi::{value_name, Message};
use crate::module::{verify_raw, Context, Module};

/// The byte order of the host, in which the JIT's stack maps are written.
#[cfg(target_endian = "little")]
pub type HostEndian = locus_stackmap::LittleEndian;
/// The byte order of the host, in which the JIT's stack maps are written.
#[cfg(target_endian = "big")]
pub type HostEndian = locus_stackmap::BigEndian;

/// The names of the stack map section: ELF and COFF, then Mach-O.
pub const STACK_MAP_SECTIONS: [&str; 2] = [".llvm_stackmaps", "__llvm_stackmaps"];

/// Address space reserved per JIT; sections are placed in it.
const RESERVED_BYTES: usize = 1 << 30;

/// Bytes of sections mapped by all live JITs of the process.
static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Bytes of section memory (whole pages) currently mapped by all live [`StackMapJit`]s of
/// the process: back to its earlier value once the JITs made since are dropped.
#[must_use]
pub fn jit_memory_in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

/// What a section holds, and so its protection once the code is finalized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SectionKind {
    /// Code: read-execute.
    Code,
    /// Read-only data (the stack maps, constants, unwind tables): read-only.
    ReadOnlyData,
    /// Writable data: read-write.
    Data,
}

/// One section the linker placed, as it asked for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// The section's name in the object (`.text`, `.text.hot`, `.llvm_stackmaps`, ...).
    pub name: String,
    /// The linker's number for it.
    pub id: u32,
    /// Where it was placed.
    pub address: u64,
    /// Its size in bytes, as the linker asked (code sections include the linker's stubs).
    pub size: u64,
    /// What it holds.
    pub kind: SectionKind,
}

impl Section {
    /// Whether `address` lies in the section.
    #[must_use]
    pub fn contains(&self, address: u64) -> bool {
        address >= self.address && address - self.address < self.size
    }
}

/// A function the module defines, where it was compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledFunction {
    /// Its name in the IR (`add` for `@add`).
    pub name: String,
    /// The address of its first instruction.
    pub address: u64,
    /// An upper bound of its code: the next compiled function's address in the same
    /// section, or the end of the section (alignment padding included).
    pub end: u64,
}

/// A module compiled in process by MCJIT, with its stack maps indexed by absolute address.
/// Dropping it frees the code, its data, the stack map section and the index.
///
/// See the [module documentation](self).
pub struct StackMapJit {
    /// Borrows the stack map sections in `state`'s memory: declared (so dropped) before it.
    index: StackMapIndex<'static, HostEndian>,
    functions: Vec<CompiledFunction>,
    /// The sections placed, copied from `state` once the code is finalized.
    sections: Vec<Section>,
    engine: LLVMExecutionEngineRef,
    /// The memory manager's state: the reserved range and the sections in it. Unmapped when
    /// dropped, after the engine is disposed (in `Drop`) and the index dropped.
    state: Box<State>,
    /// The context of the module the engine owns; disposed after the engine.
    context: Context,
    /// Keeps `StackMapJit` `!Send` and `!Sync`, like [`Context`].
    _not_send: PhantomData<*mut ()>,
}

impl StackMapJit {
    /// Parses `ir` (LLVM IR text or bitcode; `name` names it in diagnostics), compiles it
    /// for the host and indexes its stack maps. `symbols` gives host addresses for names
    /// the module declares (a Rust `extern "C" fn` as `f as usize`); names it does not
    /// declare are ignored. What they point to must stay valid while the code may use it.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] and [`Error::Verify`] for bad IR; [`Error::Jit`] if a host symbol
    /// names a function or global the module defines, a used declaration resolves
    /// nowhere, MCJIT cannot be created, code generation reports an error, memory cannot
    /// be mapped or protected, or a stack map section does not parse (the message names
    /// the section and its address).
    pub fn new(name: &str, ir: impl AsRef<[u8]>, symbols: &[(&str, usize)]) -> Result<Self> {
        StackMapJit::build(name, ir.as_ref(), symbols, true, false)
    }

    /// [`StackMapJit::from_module`], with every function keeping its frame pointer: MCJIT's
    /// C API sets each function's `"frame-pointer"` attribute from one engine-wide option
    /// (`none` unless asked), so a module that needs its frame-pointer chain (a collector
    /// that walks it to statepoint records) must ask here.
    ///
    /// # Errors
    ///
    /// As [`StackMapJit::new`].
    pub fn from_module_with_frame_pointers(
        module: &Module<'_>,
        symbols: &[(&str, usize)],
    ) -> Result<Self> {
        let bitcode = module.write_bitcode().ok_or_else(|| {
            jit_error(&format!(
                "cannot write module `{}` as bitcode",
                module.name()
            ))
        })?;
        StackMapJit::build(&module.name(), &bitcode, symbols, true, true)
    }

    /// [`StackMapJit::new`] with LLVM's patch point live-out analysis off (empty live-out
    /// lists), for the JIT runtime (`locus-jit`): see its "Live-out registers".
    pub fn without_patchpoint_liveness(
        name: &str,
        ir: impl AsRef<[u8]>,
        symbols: &[(&str, usize)],
    ) -> Result<Self> {
        StackMapJit::build(name, ir.as_ref(), symbols, false, false)
    }

    fn build(
        name: &str,
        ir: &[u8],
        symbols: &[(&str, usize)],
        patchpoint_liveness: bool,
        frame_pointers: bool,
    ) -> Result<Self> {
        init_targets();
        link_in_mcjit();
        let context = Context::new();
        let module = parse(&context, name, ir)?;
        let defined = defined_functions(module.0);
        let state = Box::new(State {
            arena: RefCell::new(Arena::reserve(RESERVED_BYTES)?),
            module: Cell::new(None),
        });
        let engine = create_engine(module, &state, frame_pointers)?;
        let mut jit = StackMapJit {
            index: StackMapIndex::new(Vec::new(), 0),
            functions: Vec::new(),
            sections: Vec::new(),
            engine,
            state,
            context,
            _not_send: PhantomData,
        };
        jit.compile(name, &defined, symbols, patchpoint_liveness)?;
        Ok(jit)
    }

    /// Compiles a copy of `module` (the caller keeps it), as [`StackMapJit::new`] does.
    ///
    /// # Errors
    ///
    /// As [`StackMapJit::new`].
    pub fn from_module(module: &Module<'_>, symbols: &[(&str, usize)]) -> Result<Self> {
        let bitcode = module.write_bitcode().ok_or_else(|| {
            jit_error(&format!(
                "cannot write module `{}` as bitcode",
                module.name()
            ))
        })?;
        StackMapJit::new(&module.name(), bitcode, symbols)
    }

    /// The index of every stack map record of the compiled code, by absolute address
    /// (function address + instruction offset; the load bias is 0) and by ID.
    #[must_use]
    pub fn stack_maps(&self) -> &StackMapIndex<'_, HostEndian> {
        &self.index
    }

    /// The bytes of each stack map section, as relocated in memory (none if the module has
    /// no stack map, patch point or statepoint).
    pub fn stack_map_sections(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.sections()
            .iter()
            .filter(|s| is_stack_map_section(&s.name))
            // SAFETY: the section lies in the JIT's mapped memory, readable and no longer
            // written since the code was finalized, until `self` is dropped.
            .map(|s| unsafe { section_bytes(s) })
    }

    /// The read-only data section `name` (`.eh_frame`, say) and its bytes, as relocated in
    /// memory at its [`Section::address`]; `None` when the module has no such section or it
    /// is writable data (which the compiled code may write while the slice lives).
    #[must_use]
    pub fn read_only_section(&self, name: &str) -> Option<(&Section, &[u8])> {
        self.sections()
            .iter()
            .find(|s| s.name == name && s.kind == SectionKind::ReadOnlyData)
            // SAFETY: the section lies in the JIT's mapped memory, read-only since the code
            // was finalized, until `self` is dropped.
            .map(|s| (s, unsafe { section_bytes(s) }))
    }

    /// Every section the linker placed, in the order it asked for them.
    #[must_use]
    pub fn sections(&self) -> &[Section] {
        &self.sections
    }

    /// The functions the module defines that the linker exports, by address.
    #[must_use]
    pub fn functions(&self) -> &[CompiledFunction] {
        &self.functions
    }

    /// The address of function `name` (as the IR spells it), if the module defines it.
    #[must_use]
    pub fn function_address(&self, name: &str) -> Option<u64> {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.address)
    }

    /// The compiled function whose code holds `address`, if any.
    #[must_use]
    pub fn function_at(&self, address: u64) -> Option<&CompiledFunction> {
        self.functions
            .iter()
            .find(|f| address >= f.address && address < f.end)
    }

    /// The address of function `name` as a value of type `F`, normally an `extern "C" fn`
    /// type. `F` must be pointer-sized (checked at compile time).
    ///
    /// # Safety
    ///
    /// As [`crate::jit::Jit::lookup_fn`]: `F` matches the function's C signature, the JIT
    /// outlives every use of the result, calling it is sound, and no panic unwinds through
    /// its frames.
    ///
    /// # Errors
    ///
    /// [`Error::Jit`] if the module defines no function `name`.
    pub unsafe fn lookup_fn<F: Copy>(&self, name: &str) -> Result<F> {
        const {
            assert!(
                size_of::<F>() == size_of::<usize>(),
                "lookup_fn needs a pointer-sized type, such as an extern \"C\" fn"
            );
        }
        let address = self
            .function_address(name)
            .ok_or_else(|| jit_error(&format!("the module defines no function `{name}`")))?;
        let address = usize::try_from(address)
            .map_err(|_| jit_error(&format!("the address of `{name}` does not fit a pointer")))?;
        // SAFETY: `F` has the size of `usize` (checked above); that the bits are a valid
        // `F` is the caller's promise.
        Ok(unsafe { std::mem::transmute_copy::<usize, F>(&address) })
    }

    /// Maps `symbols`, checks that every used declaration resolves, compiles and finalizes
    /// the module, and indexes its stack maps.
    fn compile(
        &mut self,
        name: &str,
        defined: &[String],
        symbols: &[(&str, usize)],
        patchpoint_liveness: bool,
    ) -> Result<()> {
        let module = self.module()?;
        let mut mapped = Vec::new();
        for &(symbol, address) in symbols {
            if self.map_symbol(module, symbol, address)? {
                mapped.push(symbol);
            }
        }
        check_resolvable(module, &mapped)?;
        self.context.clear_errors();
        let mut functions = Vec::new();
        // The first address compiles the module: with LLVM's options held still.
        let (_shared, _exclusive) = if patchpoint_liveness {
            (Some(compiling()), None)
        } else {
            (None, Some(PatchpointLivenessOff::new()?))
        };
        for function in defined {
            let c_name = c_name(function)?;
            // SAFETY: the engine is live and the name NUL-terminated. The first call
            // compiles the whole module, applies its relocations and finalizes its memory.
            let address = unsafe { LLVMGetFunctionAddress(self.engine, c_name.as_ptr()) };
            let errors = self.context.take_errors();
            if !errors.is_empty() {
                return Err(jit_error(&format!(
                    "{name}: code generation failed: {}",
                    errors.join("\n")
                )));
            }
            if address != 0 {
                functions.push((function.clone(), address));
            }
        }
        self.sections = self.state.finalized_sections(name, !functions.is_empty())?;
        self.functions = bound_functions(functions, &self.sections);
        let mut tables = Vec::new();
        for section in &self.sections {
            if !is_stack_map_section(&section.name) {
                continue;
            }
            // SAFETY: the section lies in memory that stays mapped, and is no longer
            // written, until the index (dropped first) is gone; see `StackMapJit`'s fields.
            let bytes = unsafe { section_bytes(section) };
            let mut end = 0;
            for table in Tables::new(bytes, HostEndian::default(), ParseOptions::default()) {
                match table {
                    Ok(table) => {
                        end = table.offset() + table.len();
                        tables.push(table);
                    }
                    // RuntimeDyld sizes a section for the stubs its relocations might need
                    // and pads that end to the stubs' alignment (seen on AArch64: a table
                    // of 0xd8 bytes in a bigger section): zeros after the last table.
                    Err(_)
                        if end > 0
                            && bytes.get(end..).is_some_and(|t| t.iter().all(|&b| b == 0)) =>
                    {
                        break
                    }
                    Err(e) => {
                        return Err(jit_error(&format!(
                            "{name}: section {} at {:#x}: {e}",
                            section.name, section.address
                        )))
                    }
                }
            }
        }
        self.index = StackMapIndex::new(tables, 0);
        Ok(())
    }

    /// The module the engine owns.
    fn module(&self) -> Result<LLVMModuleRef> {
        self.state
            .module
            .get()
            .ok_or_else(|| jit_error("the engine holds no module"))
    }

    /// Maps `symbol` to `address` if the module declares it; false if it does not.
    fn map_symbol(&self, module: LLVMModuleRef, symbol: &str, address: usize) -> Result<bool> {
        let Some(global) = named_global(module, symbol)? else {
            return Ok(false);
        };
        // SAFETY: a live global of the engine's module.
        if unsafe { LLVMIsDeclaration(global) } == 0 {
            return Err(jit_error(&format!(
                "host symbol `{symbol}` is defined by the module too"
            )));
        }
        if address == 0 {
            return Err(jit_error(&format!(
                "host symbol `{symbol}` has a null address"
            )));
        }
        // SAFETY: the engine and the global (of its module) are live; MCJIT records the
        // address and resolves references to the global's name to it.
        unsafe { LLVMAddGlobalMapping(self.engine, global, address as *mut c_void) };
        Ok(true)
    }
}

impl Drop for StackMapJit {
    fn drop(&mut self) {
        // SAFETY: created by `LLVMCreateMCJITCompilerForModule`, disposed once. This frees
        // the module and the memory manager (whose `destroy` leaves `state` alone) and
        // deregisters the code's unwind tables, which still lie in mapped memory: `state`
        // is unmapped after this, when the fields drop (the index first).
        unsafe { LLVMDisposeExecutionEngine(self.engine) };
    }
}

impl fmt::Debug for StackMapJit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackMapJit")
            .field("functions", &self.functions)
            .field("sections", &self.sections())
            .field("records", &self.index.len())
            .finish_non_exhaustive()
    }
}

/// The memory manager's state, shared with its callbacks through a raw pointer.
struct State {
    arena: RefCell<Arena>,
    /// The module handed to the engine (owned by it).
    module: Cell<Option<LLVMModuleRef>>,
}

impl State {
    /// The sections placed; fails if the memory manager reported an error or, when code
    /// was compiled, was never asked to finalize.
    fn finalized_sections(&self, name: &str, compiled: bool) -> Result<Vec<Section>> {
        let arena = self
            .arena
            .try_borrow()
            .map_err(|_| jit_error("the JIT's memory is in use"))?;
        if let Some(error) = &arena.error {
            return Err(jit_error(&format!("{name}: {error}")));
        }
        if compiled && !arena.finalized {
            return Err(jit_error(&format!(
                "{name}: MCJIT returned code it did not finalize"
            )));
        }
        Ok(arena.sections.clone())
    }
}

/// The range reserved for one JIT's sections, handed out page by page.
struct Arena {
    base: *mut u8,
    reserved: usize,
    /// Bytes handed out from `base` (whole pages).
    used: usize,
    /// Bytes of the pages handed out (what this arena added to [`IN_USE`]).
    committed: usize,
    page: usize,
    sections: Vec<Section>,
    /// Whether each section of `sections` got its final protection.
    protected: Vec<bool>,
    finalized: bool,
    /// The first failure of a callback, for the call that caused it.
    error: Option<String>,
}

impl Arena {
    /// Reserves `bytes` of address space, inaccessible until handed out.
    fn reserve(bytes: usize) -> Result<Arena> {
        let page = page_size();
        // SAFETY: a new private anonymous mapping that overlaps nothing; `Drop` unmaps it.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                bytes,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(jit_error(&format!(
                "cannot reserve {bytes} bytes of address space for JIT code: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Arena {
            base: base.cast(),
            reserved: bytes,
            used: 0,
            committed: 0,
            page,
            sections: Vec::new(),
            protected: Vec::new(),
            finalized: false,
            error: None,
        })
    }

    /// Hands out `size` bytes aligned to `align` (and to a page), read-write; null if the
    /// request cannot be met (the reason goes to `error`).
    fn allocate(
        &mut self,
        size: usize,
        align: usize,
        id: u32,
        name: String,
        kind: SectionKind,
    ) -> *mut u8 {
        let align = align.max(1).max(self.page);
        let span = size.max(1).div_ceil(self.page).saturating_mul(self.page);
        let start = self.used.div_ceil(align).saturating_mul(align);
        if !align.is_power_of_two() || start.saturating_add(span) > self.reserved {
            self.fail(format!(
                "cannot place section {name} ({size} bytes, alignment {align}): the JIT's \
                 {} bytes of address space are used up",
                self.reserved
            ));
            return ptr::null_mut();
        }
        // SAFETY: `start + span <= reserved`, so the address stays inside the reservation.
        let address = unsafe { self.base.add(start) };
        if let Err(error) = protect(address, span, libc::PROT_READ | libc::PROT_WRITE) {
            self.fail(format!("cannot map section {name}: {error}"));
            return ptr::null_mut();
        }
        self.used = start + span;
        self.committed += span;
        IN_USE.fetch_add(span, Ordering::Relaxed);
        self.sections.push(Section {
            name,
            id,
            address: address as u64,
            size: size as u64,
            kind,
        });
        self.protected.push(false);
        address
    }

    /// Gives every section not yet finalized its final protection; false on failure.
    fn finalize(&mut self) -> bool {
        for (i, section) in self.sections.iter().enumerate() {
            if self.protected.get(i).copied().unwrap_or(true) {
                continue;
            }
            let prot = match section.kind {
                SectionKind::Code => libc::PROT_READ | libc::PROT_EXEC,
                SectionKind::ReadOnlyData => libc::PROT_READ,
                SectionKind::Data => libc::PROT_READ | libc::PROT_WRITE,
            };
            let span = (section.size.max(1) as usize).div_ceil(self.page) * self.page;
            let address = section.address as *mut u8;
            if section.kind == SectionKind::Code {
                flush_instruction_cache(address, section.size as usize);
            }
            if let Err(error) = protect(address, span, prot) {
                let message = format!(
                    "cannot protect section {} at {:#x}: {error}",
                    section.name, section.address
                );
                self.fail(message);
                return false;
            }
            if let Some(done) = self.protected.get_mut(i) {
                *done = true;
            }
        }
        self.finalized = true;
        true
    }

    fn fail(&mut self, message: String) {
        self.error.get_or_insert(message);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the whole reservation made in `reserve`, unmapped once; nothing uses it
        // any more (the engine is disposed and the index dropped before the arena).
        unsafe { libc::munmap(self.base.cast(), self.reserved) };
        IN_USE.fetch_sub(self.committed, Ordering::Relaxed);
    }
}

/// Sets the protection of `len` bytes at `address` (page aligned, inside an arena).
fn protect(address: *mut u8, len: usize, prot: libc::c_int) -> std::io::Result<()> {
    // SAFETY: callers pass page-aligned ranges inside their own arena's reservation, which
    // no Rust reference covers while its protection changes.
    let status = unsafe { libc::mprotect(address.cast(), len, prot) };
    if status == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Makes code just written visible to instruction fetch (needed on AArch64 only).
#[cfg(target_arch = "aarch64")]
fn flush_instruction_cache(address: *mut u8, len: usize) {
    extern "C" {
        /// libgcc's and compiler-rt's cache maintenance for a range of fresh code.
        fn __clear_cache(start: *mut c_char, end: *mut c_char);
    }
    let end = address.wrapping_add(len);
    // SAFETY: the range is mapped (a section of the arena) and readable.
    unsafe { __clear_cache(address.cast(), end.cast()) };
}

/// Makes code just written visible to instruction fetch (needed on AArch64 only).
#[cfg(not(target_arch = "aarch64"))]
fn flush_instruction_cache(_address: *mut u8, _len: usize) {}

fn page_size() -> usize {
    // SAFETY: no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| s.is_power_of_two())
        .unwrap_or(4096)
}

/// The bytes of `section`.
///
/// # Safety
///
/// The section lies in an arena that stays mapped, readable and unwritten for `'a`.
unsafe fn section_bytes<'a>(section: &Section) -> &'a [u8] {
    // SAFETY: the caller's contract; the linker asked for `size` bytes there.
    unsafe { std::slice::from_raw_parts(section.address as *const u8, section.size as usize) }
}

fn is_stack_map_section(name: &str) -> bool {
    STACK_MAP_SECTIONS.contains(&name)
}

/// The arena of the memory manager whose opaque pointer is `opaque`, unless it is busy.
///
/// # Safety
///
/// `opaque` is null or the `State` of a live `StackMapJit`.
unsafe fn arena<'a>(opaque: *mut c_void) -> Option<std::cell::RefMut<'a, Arena>> {
    if opaque.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let state = unsafe { &*opaque.cast::<State>() };
    state.arena.try_borrow_mut().ok()
}

/// The section name LLVM passes (null reads as empty).
fn section_name(name: *const c_char) -> String {
    if name.is_null() {
        return String::new();
    }
    // SAFETY: RuntimeDyld passes a NUL-terminated name, live for the call.
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// The memory manager's code section callback. Never unwinds: failures return null.
extern "C" fn allocate_code(
    opaque: *mut c_void,
    size: usize,
    align: c_uint,
    id: c_uint,
    name: *const c_char,
) -> *mut u8 {
    // SAFETY: `opaque` is the `State` the JIT registered, alive as long as the engine.
    let Some(mut arena) = (unsafe { arena(opaque) }) else {
        return ptr::null_mut();
    };
    arena.allocate(
        size,
        align as usize,
        id,
        section_name(name),
        SectionKind::Code,
    )
}

/// The memory manager's data section callback. Never unwinds: failures return null.
extern "C" fn allocate_data(
    opaque: *mut c_void,
    size: usize,
    align: c_uint,
    id: c_uint,
    name: *const c_char,
    read_only: LLVMBool,
) -> *mut u8 {
    // SAFETY: as in `allocate_code`.
    let Some(mut arena) = (unsafe { arena(opaque) }) else {
        return ptr::null_mut();
    };
    let kind = if read_only != 0 {
        SectionKind::ReadOnlyData
    } else {
        SectionKind::Data
    };
    arena.allocate(size, align as usize, id, section_name(name), kind)
}

/// The memory manager's finalize callback: relocations are applied, so protect the pages.
/// Returns nonzero on failure (MCJIT ignores it; the JIT reads the arena's error).
extern "C" fn finalize(opaque: *mut c_void, _error: *mut *mut c_char) -> LLVMBool {
    // SAFETY: as in `allocate_code`.
    let Some(mut arena) = (unsafe { arena(opaque) }) else {
        return 1;
    };
    LLVMBool::from(!arena.finalize())
}

/// The memory manager's destroy callback: the state belongs to the `StackMapJit`, which
/// frees it after the engine.
extern "C" fn destroy(_opaque: *mut c_void) {}

/// Links MCJIT into the process (once; otherwise the engine cannot be created).
fn link_in_mcjit() {
    static LINK: Once = Once::new();
    // SAFETY: no preconditions.
    LINK.call_once(|| unsafe { LLVMLinkInMCJIT() });
}

/// A parsed module not yet handed to the engine; disposed on drop.
struct OwnedModule(LLVMModuleRef);

impl Drop for OwnedModule {
    fn drop(&mut self) {
        // SAFETY: the module is ours (never handed over: `create_engine` forgets it).
        unsafe { llvm_sys::core::LLVMDisposeModule(self.0) };
    }
}

/// Parses and verifies `ir` into `context`.
fn parse(context: &Context, name: &str, ir: &[u8]) -> Result<OwnedModule> {
    let c_name = CString::new(name).map_err(|_| Error::Parse {
        message: format!("module name {name:?} contains a NUL byte"),
    })?;
    // What Module::parse_ir checks first: LLVM's reader crashes on what it refuses.
    crate::module::check_input(name, ir)?;
    // SAFETY: `ir` is valid for its length and copied, as is the name.
    let buffer = unsafe {
        LLVMCreateMemoryBufferWithMemoryRangeCopy(ir.as_ptr().cast(), ir.len(), c_name.as_ptr())
    };
    let mut raw = ptr::null_mut();
    let mut message = ptr::null_mut();
    // SAFETY: the context is live, the buffer is handed over (freed inside, success or
    // not), and both out-pointers are valid for writes.
    let failed = unsafe { LLVMParseIRInContext(context.as_raw(), buffer, &mut raw, &mut message) };
    // SAFETY: null or an error message, ours to release with `LLVMDisposeMessage`.
    let message = unsafe { Message::from_raw(message) };
    if failed != 0 || raw.is_null() {
        return Err(Error::Parse {
            message: message.text_or(&format!("{name}: cannot parse module")),
        });
    }
    let module = OwnedModule(raw);
    // SAFETY: the module is live while `module` is.
    unsafe { verify_raw(module.0, &format!("{name}: the module is invalid")) }?;
    Ok(module)
}

/// Creates MCJIT for `module` with a memory manager on `state`. The engine owns the module
/// (recorded in `state`), whatever the outcome.
fn create_engine(
    module: OwnedModule,
    state: &State,
    frame_pointers: bool,
) -> Result<LLVMExecutionEngineRef> {
    let opaque: *const State = state;
    // SAFETY: all four callbacks are given; `opaque` outlives the memory manager (the JIT
    // frees `state` after disposing the engine, which owns the memory manager).
    let manager = unsafe {
        LLVMCreateSimpleMCJITMemoryManager(
            opaque.cast_mut().cast(),
            allocate_code,
            allocate_data,
            finalize,
            Some(destroy),
        )
    };
    if manager.is_null() {
        return Err(jit_error("LLVM created no MCJIT memory manager"));
    }
    // SAFETY: all-zero is a valid value of this plain C struct (LLVM fills it next).
    let mut options: LLVMMCJITCompilerOptions = unsafe { std::mem::zeroed() };
    let size = size_of::<LLVMMCJITCompilerOptions>();
    // SAFETY: `options` is valid for writes of `size` bytes.
    unsafe { LLVMInitializeMCJITCompilerOptions(&mut options, size) };
    // As `llc`'s default, `-O2`.
    options.OptLevel = 2;
    options.MCJMM = manager;
    // The C API writes `"frame-pointer"` on every function from this flag.
    options.NoFramePointerElim = LLVMBool::from(frame_pointers);
    let raw_module = module.0;
    std::mem::forget(module);
    state.module.set(Some(raw_module));
    let mut engine = ptr::null_mut();
    let mut message = ptr::null_mut();
    // SAFETY: the module and the memory manager are live and handed over (the builder
    // inside owns both, and frees them on failure); the out-pointers are valid for writes.
    let failed = unsafe {
        LLVMCreateMCJITCompilerForModule(&mut engine, raw_module, &mut options, size, &mut message)
    };
    // SAFETY: null or an error message allocated with `strdup`; `LLVMDisposeMessage`
    // releases it with `free`.
    let message = unsafe { Message::from_raw(message) };
    if failed != 0 || engine.is_null() {
        state.module.set(None);
        return Err(jit_error(&message.text_or("LLVM could not create MCJIT")));
    }
    Ok(engine)
}

/// The names of the functions `module` defines, in module order.
fn defined_functions(module: LLVMModuleRef) -> Vec<String> {
    let mut names = Vec::new();
    // SAFETY: the module is live.
    let mut function = unsafe { LLVMGetFirstFunction(module) };
    while !function.is_null() {
        // SAFETY: a live function of the module.
        if unsafe { LLVMIsDeclaration(function) } == 0 {
            // SAFETY: as above.
            names.push(unsafe { value_name(function) });
        }
        // SAFETY: as above.
        function = unsafe { LLVMGetNextFunction(function) };
    }
    names.retain(|n| !n.is_empty());
    names
}

/// The function or global variable `name` of `module`.
fn named_global(module: LLVMModuleRef, name: &str) -> Result<Option<LLVMValueRef>> {
    let c_name = c_name(name)?;
    // SAFETY: the module is live, the name NUL-terminated.
    let function = unsafe { LLVMGetNamedFunction(module, c_name.as_ptr()) };
    if !function.is_null() {
        return Ok(Some(function));
    }
    // SAFETY: as above.
    let global = unsafe { LLVMGetNamedGlobal(module, c_name.as_ptr()) };
    Ok((!global.is_null()).then_some(global))
}

/// Fails for a declaration the code uses that neither `mapped` nor the process defines:
/// MCJIT would end the process on it.
fn check_resolvable(module: LLVMModuleRef, mapped: &[&str]) -> Result<()> {
    let mut missing = Vec::new();
    let mut check = |value: LLVMValueRef| -> Result<()> {
        // SAFETY: a live global value of the module.
        if unsafe { LLVMIsDeclaration(value) } == 0 {
            return Ok(());
        }
        // SAFETY: as above.
        if unsafe { LLVMGetFirstUse(value) }.is_null() {
            return Ok(());
        }
        // SAFETY: as above.
        let name = unsafe { value_name(value) };
        if name.starts_with("llvm.") || mapped.contains(&name.as_str()) {
            return Ok(());
        }
        let c_name = c_name(&name)?;
        // SAFETY: a NUL-terminated name; `RTLD_DEFAULT` searches the process's objects.
        if unsafe { libc::dlsym(libc::RTLD_DEFAULT, c_name.as_ptr()) }.is_null() {
            missing.push(name);
        }
        Ok(())
    };
    // SAFETY: the module is live.
    let mut function = unsafe { LLVMGetFirstFunction(module) };
    while !function.is_null() {
        check(function)?;
        // SAFETY: a live function of the module.
        function = unsafe { LLVMGetNextFunction(function) };
    }
    // SAFETY: the module is live.
    let mut global = unsafe { LLVMGetFirstGlobal(module) };
    while !global.is_null() {
        check(global)?;
        // SAFETY: a live global of the module.
        global = unsafe { LLVMGetNextGlobal(global) };
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(jit_error(&format!(
        "symbols not found: {} (declared and used by the module, given neither as host \
         symbols nor found in the process)",
        missing.join(", ")
    )))
}

/// Sorts `functions` by address and bounds each by the next one in its section.
fn bound_functions(
    mut functions: Vec<(String, u64)>,
    sections: &[Section],
) -> Vec<CompiledFunction> {
    functions.sort_by_key(|(_, address)| *address);
    let mut out = Vec::with_capacity(functions.len());
    for (i, (name, address)) in functions.iter().enumerate() {
        let section = sections.iter().find(|s| s.contains(*address));
        let section_end = section.map_or(*address, |s| s.address + s.size);
        let next = functions
            .get(i + 1)
            .map(|(_, next)| *next)
            .filter(|next| section.is_some_and(|s| s.contains(*next)));
        out.push(CompiledFunction {
            name: name.clone(),
            address: *address,
            end: next.unwrap_or(section_end),
        });
    }
    out
}

fn jit_error(message: &str) -> Error {
    Error::Jit {
        message: message.to_owned(),
    }
}

fn c_name(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| jit_error(&format!("symbol name {name:?} contains a NUL byte")))
}
