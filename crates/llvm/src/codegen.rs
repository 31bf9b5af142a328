//! Emit object files and assembly in process, as `llc-19` would.
//!
//! Settings match `llc-19 -relocation-model=pic`: default optimization level (`-O2`),
//! position-independent code, the target's default code model. The module is verified
//! first (LLVM's C API skips the verifier, and invalid IR can crash code generation), then
//! compiled from a private copy with the requested triple, so the caller's module is left
//! as it was.

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;
use std::sync::{Once, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use llvm_sys::core::{LLVMDisposeMemoryBuffer, LLVMGetBufferSize, LLVMGetBufferStart};
use llvm_sys::prelude::LLVMMemoryBufferRef;
use llvm_sys::target::{
    LLVMInitializeAArch64AsmParser, LLVMInitializeAArch64AsmPrinter, LLVMInitializeAArch64Target,
    LLVMInitializeAArch64TargetInfo, LLVMInitializeAArch64TargetMC, LLVMInitializeX86AsmParser,
    LLVMInitializeX86AsmPrinter, LLVMInitializeX86Target, LLVMInitializeX86TargetInfo,
    LLVMInitializeX86TargetMC,
};
use llvm_sys::target_machine::{
    LLVMCodeGenFileType, LLVMCodeGenOptLevel, LLVMCodeModel, LLVMCreateTargetMachine,
    LLVMDisposeTargetMachine, LLVMGetDefaultTargetTriple, LLVMGetTargetFromTriple,
    LLVMNormalizeTargetTriple, LLVMRelocMode, LLVMTargetMachineEmitToMemoryBuffer,
    LLVMTargetMachineRef,
};

use crate::error::{Error, Result};
use crate::ffi::Message;
use crate::module::Module;

/// Compiles `module` for `triple` into a relocatable object file (ELF on Linux triples).
///
/// `triple` may be any spelling LLVM normalizes (`x86_64-linux-gnu`,
/// `aarch64-unknown-linux-gnu`); an empty one means the module's own triple, or the host's
/// when the module names none. `cpu` (`""` for generic, or e.g. `skylake`, `neoverse-v1`)
/// and `features` (`""` or e.g. `+avx2,-sse4a`) are passed to LLVM as `llc` passes `-mcpu`
/// and `-mattr`, but checked first: a CPU or feature the target does not know is an error
/// here (`llc` warns and ignores it, and for x86-64 an unknown CPU then aborts). `native`
/// is not special. The registered targets are x86-64 and AArch64.
///
/// Invalid IR is caught by the verifier and by LLVM's diagnostics; what LLVM itself treats
/// as a fatal error (for example a feature string that disables what the code needs, such
/// as `-sse2` for floating point on x86-64) still ends the process.
///
/// # Errors
///
/// [`Error::Verify`] if the module is invalid, [`Error::Target`] if the triple names no
/// registered target or the CPU or a feature is unknown to it, [`Error::Codegen`] if LLVM reports an error while compiling.
pub fn emit_object(
    module: &Module<'_>,
    triple: &str,
    cpu: &str,
    features: &str,
) -> Result<Vec<u8>> {
    emit(
        module,
        triple,
        cpu,
        features,
        LLVMCodeGenFileType::LLVMObjectFile,
    )
}

/// Compiles `module` for `triple` into assembly text (AT&T syntax on x86-64), as
/// `llc -filetype=asm` would. Arguments and errors are those of [`emit_object`].
///
/// # Errors
///
/// As [`emit_object`]; also [`Error::Codegen`] if the assembly is not UTF-8.
pub fn emit_assembly(
    module: &Module<'_>,
    triple: &str,
    cpu: &str,
    features: &str,
) -> Result<String> {
    let bytes = emit(
        module,
        triple,
        cpu,
        features,
        LLVMCodeGenFileType::LLVMAssemblyFile,
    )?;
    String::from_utf8(bytes).map_err(|e| Error::Codegen {
        message: format!("the assembly is not UTF-8: {e}"),
    })
}

/// Registers the X86 and AArch64 targets with LLVM, once per process. LLVM's target
/// registry is itself process-global, so this is the one global initialization Locus does.
/// The JIT ([`crate::jit`]) shares it: the host target is one of these two.
pub(crate) fn init_targets() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let registrations: [unsafe extern "C" fn(); 10] = [
            LLVMInitializeX86TargetInfo,
            LLVMInitializeX86Target,
            LLVMInitializeX86TargetMC,
            LLVMInitializeX86AsmPrinter,
            // The asm parser is needed to emit objects from modules with inline assembly.
            LLVMInitializeX86AsmParser,
            LLVMInitializeAArch64TargetInfo,
            LLVMInitializeAArch64Target,
            LLVMInitializeAArch64TargetMC,
            LLVMInitializeAArch64AsmPrinter,
            LLVMInitializeAArch64AsmParser,
        ];
        for register in registrations {
            // SAFETY: these registration functions have no preconditions; `Once` keeps
            // them from racing each other.
            unsafe { register() };
        }
    });
}

/// LLVM's command-line options are process globals that every compilation reads. This
/// crate's compilations (object emission, the ORC JIT's lookups, [`crate::StackMapJit`])
/// hold this lock shared; changing an option holds it exclusively, so that no compilation
/// reads an option while it changes.
static LLVM_OPTIONS: RwLock<()> = RwLock::new(());

/// Held while this crate compiles (see [`LLVM_OPTIONS`]).
pub(crate) fn compiling() -> RwLockReadGuard<'static, ()> {
    // The lock guards no data: a panic while it was held left nothing half-done.
    LLVM_OPTIONS.read().unwrap_or_else(PoisonError::into_inner)
}

/// LLVM's patch point live-out analysis (`-enable-patchpoint-liveness`) turned off while
/// this lives, with no other compilation of this crate running; back on when dropped.
pub(crate) struct PatchpointLivenessOff {
    _only: RwLockWriteGuard<'static, ()>,
}

impl PatchpointLivenessOff {
    pub(crate) fn new() -> Result<PatchpointLivenessOff> {
        let only = LLVM_OPTIONS.write().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: no compilation of this crate runs while the write lock is held.
        if unsafe { locus_llvm_set_patchpoint_liveness(0) } != 0 {
            return Err(Error::Jit {
                message: "LLVM has no boolean option -enable-patchpoint-liveness".to_owned(),
            });
        }
        Ok(PatchpointLivenessOff { _only: only })
    }
}

impl Drop for PatchpointLivenessOff {
    fn drop(&mut self) {
        // SAFETY: the write lock is still held (fields drop after this). The option was
        // found when it was turned off.
        unsafe { locus_llvm_set_patchpoint_liveness(1) };
    }
}

extern "C" {
    /// In `src/subtarget.cpp`: sets LLVM's `-enable-patchpoint-liveness`; 0 if done, 1 if
    /// LLVM has no such option. Only with [`LLVM_OPTIONS`] held exclusively.
    fn locus_llvm_set_patchpoint_liveness(on: c_int) -> c_int;

    /// In `src/subtarget.cpp`: 0 if `cpu` and `features` suit the target of `triple`,
    /// else 1 with a message to free with `LLVMDisposeMessage`.
    fn locus_llvm_check_subtarget(
        triple: *const c_char,
        cpu: *const c_char,
        features: *const c_char,
        message: *mut *mut c_char,
    ) -> c_int;
}

/// A target machine, disposed on drop.
struct TargetMachine {
    raw: LLVMTargetMachineRef,
    /// The normalized triple it was made for.
    triple: CString,
}

impl TargetMachine {
    fn new(triple: &str, cpu: &str, features: &str) -> Result<Self> {
        let target_error = |message: String| Error::Target {
            triple: triple.to_owned(),
            message,
        };
        let c_string = |what: &str, value: &str| {
            CString::new(value).map_err(|_| target_error(format!("the {what} contains a NUL byte")))
        };
        let c_triple = c_string("triple", triple)?;
        let c_cpu = c_string("CPU name", cpu)?;
        let c_features = c_string("feature string", features)?;

        // SAFETY: `c_triple` is NUL-terminated.
        let normalized = unsafe { LLVMNormalizeTargetTriple(c_triple.as_ptr()) };
        // SAFETY: the triple is ours, to be released with `LLVMDisposeMessage`.
        let normalized = unsafe { Message::from_raw(normalized) }
            .text()
            .unwrap_or_default();
        let normalized = c_string("triple", &normalized)?;

        let mut target = ptr::null_mut();
        let mut message = ptr::null_mut();
        // SAFETY: `normalized` is NUL-terminated; both out-pointers are valid for writes.
        let failed =
            unsafe { LLVMGetTargetFromTriple(normalized.as_ptr(), &mut target, &mut message) };
        // SAFETY: null or an error message, ours to release with `LLVMDisposeMessage`.
        let message = unsafe { Message::from_raw(message) };
        if failed != 0 || target.is_null() {
            return Err(target_error(
                message.text_or("no registered target for this triple"),
            ));
        }

        // LLVM only warns about an unknown CPU or feature, and an unknown x86-64 CPU then
        // aborts the process: check both first.
        let mut message = ptr::null_mut();
        // SAFETY: the strings are NUL-terminated, the targets are registered, and the
        // out-pointer is valid for writes.
        let bad = unsafe {
            locus_llvm_check_subtarget(
                normalized.as_ptr(),
                c_cpu.as_ptr(),
                c_features.as_ptr(),
                &mut message,
            )
        };
        // SAFETY: null or a message to free with `LLVMDisposeMessage` (see the declaration).
        let message = unsafe { Message::from_raw(message) };
        if bad != 0 {
            return Err(target_error(message.text_or("invalid CPU or features")));
        }

        // SAFETY: `target` came from the registry (which lives as long as the process);
        // the strings are NUL-terminated and copied by LLVM.
        let raw = unsafe {
            LLVMCreateTargetMachine(
                target,
                normalized.as_ptr(),
                c_cpu.as_ptr(),
                c_features.as_ptr(),
                LLVMCodeGenOptLevel::LLVMCodeGenLevelDefault,
                LLVMRelocMode::LLVMRelocPIC,
                LLVMCodeModel::LLVMCodeModelDefault,
            )
        };
        if raw.is_null() {
            return Err(target_error(
                "LLVM could not create a target machine".to_owned(),
            ));
        }
        Ok(TargetMachine {
            raw,
            triple: normalized,
        })
    }
}

impl Drop for TargetMachine {
    fn drop(&mut self) {
        // SAFETY: created by `LLVMCreateTargetMachine`, disposed once.
        unsafe { LLVMDisposeTargetMachine(self.raw) };
    }
}

/// A memory buffer LLVM filled; disposed on drop.
struct MemoryBuffer(LLVMMemoryBufferRef);

impl MemoryBuffer {
    /// Takes ownership of `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live memory buffer that is ours to dispose, and disposed nowhere else.
    unsafe fn from_raw(raw: LLVMMemoryBufferRef) -> Self {
        MemoryBuffer(raw)
    }

    fn to_vec(&self) -> Vec<u8> {
        // SAFETY: the buffer is live.
        let start = unsafe { LLVMGetBufferStart(self.0) };
        // SAFETY: as above; start and size describe its contents.
        let size = unsafe { LLVMGetBufferSize(self.0) };
        if start.is_null() || size == 0 {
            return Vec::new();
        }
        // SAFETY: `start` is valid for `size` bytes while the buffer lives.
        unsafe { std::slice::from_raw_parts(start.cast::<u8>(), size) }.to_vec()
    }
}

impl Drop for MemoryBuffer {
    fn drop(&mut self) {
        // SAFETY: the buffer was handed to us by LLVM and is disposed once.
        unsafe { LLVMDisposeMemoryBuffer(self.0) };
    }
}

fn emit(
    module: &Module<'_>,
    triple: &str,
    cpu: &str,
    features: &str,
    kind: LLVMCodeGenFileType,
) -> Result<Vec<u8>> {
    module.verify()?;
    init_targets();

    let triple = if triple.is_empty() {
        let own = module.target_triple();
        if own.is_empty() {
            // SAFETY: no preconditions.
            let host = unsafe { LLVMGetDefaultTargetTriple() };
            // SAFETY: the triple is ours, to be released with `LLVMDisposeMessage`.
            unsafe { Message::from_raw(host) }.text_or("")
        } else {
            own
        }
    } else {
        triple.to_owned()
    };
    let machine = TargetMachine::new(&triple, cpu, features)?;

    // Code generation rewrites the IR it compiles (CodeGenPrepare, intrinsic lowering) and
    // LLVM sets the data layout on it: work on a copy, with the triple `llc -mtriple` sets.
    let mut copy = module.clone();
    copy.set_target_triple(machine.triple.as_c_str());

    let ctx = module.context();
    ctx.clear_errors();
    let mut message = ptr::null_mut();
    let mut buffer = ptr::null_mut();
    let compiling = compiling();
    // SAFETY: the machine and the module are live; both out-pointers are valid for writes.
    // Error diagnostics go to the context's handler instead of ending the process.
    let failed = unsafe {
        LLVMTargetMachineEmitToMemoryBuffer(
            machine.raw,
            copy.as_raw(),
            kind,
            &mut message,
            &mut buffer,
        )
    };
    drop(compiling);
    // SAFETY: null or an error message, ours to release with `LLVMDisposeMessage`.
    let message = unsafe { Message::from_raw(message) };
    // SAFETY: the buffer LLVM filled, ours to dispose.
    let buffer = (!buffer.is_null()).then(|| unsafe { MemoryBuffer::from_raw(buffer) });
    let mut errors = ctx.take_errors();
    if failed != 0 {
        errors.insert(0, message.text_or("LLVM could not emit the file"));
    }
    if !errors.is_empty() {
        return Err(Error::Codegen {
            message: errors.join("\n"),
        });
    }
    match buffer {
        Some(buffer) => Ok(buffer.to_vec()),
        None => Err(Error::Codegen {
            message: format!("LLVM returned no output for {}", display(&machine.triple)),
        }),
    }
}

fn display(s: &CStr) -> String {
    s.to_string_lossy().into_owned()
}
