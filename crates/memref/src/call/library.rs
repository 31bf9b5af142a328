//! Loading: a shared library of compiled kernels and its symbols.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::path::Path;

use super::ffi::{ciface_cif, expanded_cif, field_layout};
use super::Function;
use crate::signature::Signature;
use crate::Error;

/// A shared library holding compiled kernels.
pub struct Library {
    lib: libloading::Library,
    path: String,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library").field("path", &self.path).finish()
    }
}

impl Library {
    /// Opens a shared library, binding every symbol it needs now: a symbol
    /// that no loaded library defines is a [`Error::Library`] error
    /// naming it (the loader's message), not a crash at the first call.
    ///
    /// # Safety
    ///
    /// Opening a library runs its initializers: it must be one built to be
    /// loaded into this process (as [`crate::compile`] builds them).
    pub unsafe fn open(path: &Path) -> Result<Library, Error> {
        // SAFETY: forwarded.
        unsafe { Library::open_with(path, false) }
    }

    /// Opens a library whose symbols kernels opened later may use (as
    /// `mlir-cpu-runner -shared-libs` does): RTLD_GLOBAL, every symbol
    /// bound now. Open it before the kernel's library and keep it while
    /// the kernel's is open.
    ///
    /// # Safety
    ///
    /// As for [`Library::open`]: opening it runs its initializers.
    pub unsafe fn open_global(path: &Path) -> Result<Library, Error> {
        // SAFETY: forwarded.
        unsafe { Library::open_with(path, true) }
    }

    /// # Safety
    ///
    /// As for [`Library::open`].
    unsafe fn open_with(path: &Path, global: bool) -> Result<Library, Error> {
        let shown = path.display().to_string();
        // A bare file name would be searched for in the system's paths.
        let full = if path.components().count() == 1 {
            Path::new(".").join(path)
        } else {
            path.to_path_buf()
        };
        // RTLD_NOW: every symbol the library needs is bound now, so one that no
        // loaded library defines is this error (dlerror names it) rather than
        // the dynamic loader ending the process at the first call through it.
        // RTLD_LOCAL for kernels: their symbols do not leak into later libraries.
        #[cfg(unix)]
        let opened = {
            use libloading::os::unix;
            let scope = if global {
                unix::RTLD_GLOBAL
            } else {
                unix::RTLD_LOCAL
            };
            // SAFETY: the caller vouches for the library's initializers.
            unsafe { unix::Library::open(Some(&full), unix::RTLD_NOW | scope) }
                .map(libloading::Library::from)
        };
        #[cfg(not(unix))]
        let _ = global;
        #[cfg(not(unix))]
        // SAFETY: the caller vouches for the library's initializers.
        let opened = unsafe { libloading::Library::new(&full) };
        let lib = opened.map_err(|e| {
            // dlerror starts with the path, which `what` already gives.
            let message = e.to_string();
            let prefix = format!("{}: ", full.display());
            Error::Library {
                what: shown.clone(),
                message: message
                    .strip_prefix(&prefix)
                    .unwrap_or(&message)
                    .to_string(),
            }
        })?;
        Ok(Library { lib, path: shown })
    }

    /// The path the library was opened from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The address of `symbol`.
    pub fn address(&self, symbol: &str) -> Result<*mut c_void, Error> {
        // SAFETY: the symbol is only read as an address, never as a value.
        let sym = unsafe { self.lib.get::<*mut c_void>(symbol.as_bytes()) };
        match sym {
            Ok(s) => {
                // SAFETY: `Symbol<*mut c_void>` derefs to the symbol's address.
                let p = unsafe { s.try_as_raw_ptr() }.unwrap_or(std::ptr::null_mut());
                if p.is_null() {
                    Err(Error::Library {
                        what: symbol.to_string(),
                        message: format!("symbol is null in {}", self.path),
                    })
                } else {
                    Ok(p)
                }
            }
            Err(e) => Err(Error::Library {
                what: symbol.to_string(),
                message: format!("not found in {}: {e}", self.path),
            }),
        }
    }

    /// The C wrapper `_mlir_ciface_NAME` as a function pointer of type `F`.
    ///
    /// # Safety
    ///
    /// `F` must be an `unsafe extern "C" fn` type matching the wrapper: a
    /// pointer to the result struct first (when the function has a struct
    /// result), then `*mut MemRefDescriptor<T, N>` (or
    /// `*mut UnrankedMemRefDescriptor`) per memref and the scalars as they are.
    /// The pointer must not be used after the library is dropped.
    pub unsafe fn ciface<F: Copy>(&self, name: &str) -> Result<F, Error> {
        // SAFETY: forwarded.
        unsafe { self.typed(&format!("_mlir_ciface_{name}")) }
    }

    /// The symbol `name` as a function pointer of type `F` (for the expanded
    /// convention: memrefs as `allocated, aligned, offset, sizes.., strides..`).
    ///
    /// # Safety
    ///
    /// As for [`Library::ciface`], with the function's real type.
    pub unsafe fn typed<F: Copy>(&self, symbol: &str) -> Result<F, Error> {
        if std::mem::size_of::<F>() != std::mem::size_of::<*mut c_void>() {
            return Err(Error::Library {
                what: symbol.to_string(),
                message: "the requested type is not a function pointer".into(),
            });
        }
        let p = self.address(symbol)?;
        // SAFETY: same size checked above; the caller vouches for the type.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    /// `name` with a run-time signature.
    ///
    /// # Safety
    ///
    /// `signature` must be the function's real MLIR type (for example taken
    /// with [`Signature::from_mlir`] from the source the library was built from).
    ///
    /// And the function must return memrefs as MLIR's default lowering does,
    /// since [`Function::call`] frees what it cannot tell from a buffer the
    /// kernel keeps: every memref result is a global (`memref.get_global`),
    /// points into an argument or into another result's allocation, or is a
    /// fresh `malloc` allocation (`memref.alloc`) that the caller now owns;
    /// an unranked result's descriptor is a fresh `malloc` copy (spec 002,
    /// "Lifetime"). A kernel returning buffers it keeps is called with
    /// [`CallOptions::borrow_results`](super::CallOptions::borrow_results); one allocating with
    /// another allocator,
    /// with [`CallOptions::free_with`](super::CallOptions::free_with).
    pub unsafe fn function(&self, name: &str, signature: Signature) -> Result<Function<'_>, Error> {
        let ciface = self.address(&format!("_mlir_ciface_{name}")).ok();
        let expanded = self.address(name).ok();
        if ciface.is_none() && expanded.is_none() {
            return Err(Error::Library {
                what: format!("_mlir_ciface_{name}"),
                message: format!("neither it nor `{name}` is in {}", self.path),
            });
        }
        let ciface_cif = ciface.and_then(|_| ciface_cif(&signature));
        let expanded_cif = expanded.and_then(|_| expanded_cif(&signature));
        let mut result_offsets = Vec::with_capacity(signature.results.len());
        let mut result_size = 0usize;
        for t in &signature.results {
            let (size, align) = field_layout(t);
            result_size = result_size.next_multiple_of(align);
            result_offsets.push(result_size);
            result_size += size;
        }
        Ok(Function {
            name: name.to_string(),
            signature,
            ciface,
            expanded,
            ciface_cif,
            expanded_cif,
            result_offsets,
            result_size,
            _lib: PhantomData,
        })
    }
}
