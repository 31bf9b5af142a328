//! Calling compiled kernels: typed symbols and dynamic (libffi) calls.
//!
//! [`Library::ciface`] gives the `_mlir_ciface_NAME` wrapper as a typed
//! function pointer for signatures known at compile time (the call then costs
//! what a C call does). [`Library::function`] pairs a symbol with a run-time
//! [`Signature`]; [`Function::call`] checks every argument against it and
//! calls the C wrapper through libffi, taking results from the struct whose
//! pointer is the wrapper's first parameter (when there is a struct result:
//! several results, or one memref). [`Function::call_expanded`] calls the
//! function itself in the expanded convention; it accepts only functions
//! without results, because a struct returned by value in LLVM does not
//! follow the platform C ABI (see [`crate::descriptor`]).
//!
//! By job: `library` (loading), `args` (argument checks and preparation), `ffi` (libffi's
//! call interfaces) and `results` (where results live and who frees them).

use std::ffi::c_void;
use std::marker::PhantomData;

use libffi::middle::{Arg as FfiArg, Cif, CodePtr};

use crate::owned::{libc_free, Allocation, FreeFn};
use crate::signature::{Signature, Type};
use crate::Error;

mod args;
mod ffi;
mod library;
mod results;

use args::{prepare_memref, write_back, Prepared};
use ffi::{descriptor_words, scalar_ffi_type, struct_result, Slot, NO_COMPLEX_SCALARS};
use results::{overlap, resolve, RawResult};

pub use args::{Arg, MemRefArg, Scalar};
pub use library::Library;
pub use results::{Origin, ReturnedMemRef};

/// Options of a dynamic call.
///
/// ```
/// use locus_memref::CallOptions;
///
/// let options = CallOptions::default().copy_strided(true).borrow_results(false);
/// assert!(options.copies_strided() && !options.borrows_results());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CallOptions {
    copy_strided: bool,
    borrow_results: bool,
    report_faults: bool,
    free: FreeFn,
}

impl Default for CallOptions {
    /// Strided views given to identity-layout parameters are refused; fresh
    /// results are freed with C's `free`; a fault in the kernel is the process's
    /// business (no handler is installed).
    fn default() -> Self {
        CallOptions {
            copy_strided: false,
            borrow_results: false,
            report_faults: false,
            free: libc_free(),
        }
    }
}

impl CallOptions {
    /// Copy a strided view given to an identity-layout parameter into a
    /// contiguous buffer (and back after the call, if writable) instead of
    /// refusing it.
    pub fn copy_strided(mut self, copy: bool) -> Self {
        self.copy_strided = copy;
        self
    }

    /// The kernel keeps the buffers it returns (a cache, a pool of its own):
    /// no result is freed ([`Origin::Kept`]), except the heap copies of
    /// unranked results' descriptors, which are always the caller's (spec
    /// 002, "Lifetime"). At worst this leaks, so it needs no `unsafe`.
    pub fn borrow_results(mut self, borrow: bool) -> Self {
        self.borrow_results = borrow;
        self
    }

    /// Frees fresh results, and the heap descriptors of unranked results,
    /// with `free` instead of C's `free`.
    ///
    /// # Safety
    ///
    /// The kernel must allocate what it returns with the allocator `free`
    /// belongs to (for example a kernel lowered with
    /// `use-generic-functions`, whose `memref.alloc` calls
    /// `_mlir_memref_to_llvm_alloc`).
    pub unsafe fn free_with(mut self, free: FreeFn) -> Self {
        self.free = free;
        self
    }

    /// A fault in the kernel (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, a stack
    /// overflow; on this thread or on one the kernel makes) ends the process with one
    /// `locus:` line naming the signal, the address and the function (the kernel's symbol,
    /// as `dladdr` finds it), and exit status 3 ([`locus_signals::FAULT_EXIT_STATUS`]),
    /// instead of a silent death. The call installs the process's fault handlers
    /// ([`locus_signals::install`], once per process; they pass on every fault outside
    /// such a call) and opens a [`locus_signals::fault_scope`] around the kernel alone:
    /// not around the argument checks, whose errors stay errors. While the kernel runs, a
    /// fault on any thread of the process is reported so: a host that relies on its own
    /// SIGSEGV handling on other threads (guard pages) should leave this off.
    ///
    /// ```text
    /// locus: SIGSEGV (null pointer dereference) at address 0x0 in function `deref` (pc 0x7f0c2e1b5106 = deref+0x6) in /tmp/kernel.so
    /// ```
    pub fn report_faults(mut self, report: bool) -> Self {
        self.report_faults = report;
        self
    }

    /// Whether a fault in the kernel is reported ([`CallOptions::report_faults`]).
    pub fn reports_faults(&self) -> bool {
        self.report_faults
    }

    /// Whether strided views are copied for identity-layout parameters.
    pub fn copies_strided(&self) -> bool {
        self.copy_strided
    }

    /// Whether results are left to the kernel.
    pub fn borrows_results(&self) -> bool {
        self.borrow_results
    }
}

/// A result of a dynamic call.
#[derive(Debug)]
pub enum Value<'a> {
    /// A scalar.
    Scalar(Scalar),
    /// A memref.
    MemRef(ReturnedMemRef<'a>),
}

/// A function of a [`Library`] with its run-time signature.
pub struct Function<'lib> {
    name: String,
    signature: Signature,
    ciface: Option<*mut c_void>,
    expanded: Option<*mut c_void>,
    /// The libffi call descriptions, prepared once from the signature.
    ciface_cif: Option<Cif>,
    expanded_cif: Option<Cif>,
    /// Where each result lies in the C wrapper's result struct, and the struct's size.
    result_offsets: Vec<usize>,
    result_size: usize,
    _lib: PhantomData<&'lib Library>,
}

impl std::fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("signature", &self.signature.to_string())
            .field("ciface", &self.ciface)
            .field("expanded", &self.expanded)
            .finish()
    }
}

impl<'lib> Function<'lib> {
    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The signature.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// Checks the arguments against the signature, copying strided views for
    /// identity-layout parameters when `copy_strided` is set.
    fn prepare<'a>(
        &self,
        args: &'a [Arg<'_>],
        copy_strided: bool,
    ) -> Result<Vec<Option<Prepared<'a>>>, Error> {
        self.signature.check_arity(args.len())?;
        let mut out = Vec::with_capacity(args.len());
        for (index, (arg, ty)) in args.iter().zip(&self.signature.inputs).enumerate() {
            match (arg, ty) {
                (Arg::Scalar(s), Type::Scalar(e)) => {
                    if s.elem() != *e {
                        return Err(Error::Argument {
                            index,
                            message: format!(
                                "scalar of type {}, the signature wants {e}",
                                s.elem()
                            ),
                        });
                    }
                    if scalar_ffi_type(*e).is_none() {
                        return Err(Error::Argument {
                            index,
                            message: NO_COMPLEX_SCALARS.into(),
                        });
                    }
                    out.push(None);
                }
                (Arg::MemRef(m), Type::MemRef(t)) => {
                    out.push(Some(prepare_memref(index, m, t, copy_strided)?))
                }
                (Arg::Scalar(s), Type::MemRef(t)) => {
                    return Err(Error::Argument {
                        index,
                        message: format!("scalar {} given, the signature wants {t}", s.elem()),
                    })
                }
                (Arg::MemRef(m), Type::Scalar(e)) => {
                    return Err(Error::Argument {
                        index,
                        message: format!(
                            "memref of {} given, the signature wants scalar {e}",
                            m.elem
                        ),
                    })
                }
            }
        }
        // A row-major copy of a buffer that another argument also reaches (one array
        // given twice, numpy-style) keeps the elements as given, so that only what the
        // kernel changes in the copy is written back over the buffer.
        for (i, p) in out.iter_mut().enumerate() {
            let (Some(p), Arg::MemRef(m)) = (p, &args[i]) else {
                continue;
            };
            let shared = args.iter().enumerate().any(|(j, other)| {
                let range = |(start, len): (usize, usize)| (start as i128, (start + len) as i128);
                matches!(other, Arg::MemRef(o) if j != i && overlap(range(o.buffer), range(m.buffer)))
            });
            if let (true, true, true, Some(copy)) = (shared, p.gathered, m.writable, &p.copy) {
                // SAFETY: the copy holds the span's bytes, made just now.
                p.pristine = Some(unsafe { Allocation::copy_of(copy.ptr().cast(), p.span.1) }?);
            }
        }
        Ok(out)
    }

    /// Calls `_mlir_ciface_NAME` with checked arguments; returns the results in order.
    ///
    /// Memref results borrow the arguments (and the library) for `'a`: a
    /// kernel may return an argument, a subview of one, or a global of the
    /// library. Each result's [`Origin`] is found by comparing its pointers
    /// and the bytes it reaches with every argument's buffer and every other
    /// result: results pointing into an argument are never freed, results
    /// pointing into one fresh allocation share one guard that frees it once,
    /// when the last of them is dropped, and globals are never freed. The
    /// heap descriptors of unranked results are freed as soon as they are
    /// read. A fresh allocation is one the kernel made with `malloc` (or the
    /// allocator of [`CallOptions::free_with`]), as [`Library::function`]'s
    /// contract states; [`CallOptions::borrow_results`] frees none.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] (and the view errors) for arguments that do not fit the
    /// signature, found before the kernel runs. After it ran, [`Error::Result`] or
    /// [`Error::NullDescriptor`] for results that cannot be read (an unranked result
    /// with a negative rank, a null descriptor): the buffers the kernel returned are then
    /// **not freed**, since what a result aliases is not known until every result is read,
    /// and freeing one that points into an argument or a global would be a bad free.
    ///
    /// The results cannot outlive what they may alias:
    ///
    /// ```compile_fail
    /// # use locus_memref::{CallOptions, Function, MemRefArg, MemRefViewMut, Value};
    /// # fn f(same: &Function<'_>) -> Result<(), locus_memref::Error> {
    /// let mut data = vec![1.0f32, 2.0];
    /// let mut view = MemRefViewMut::contiguous(&mut data, [2])?;
    /// // `same` returns its argument.
    /// let results = same.call([MemRefArg::from_view_mut(&mut view).into()],
    /// CallOptions::default())?;
    /// drop(data); // error: `data` is still borrowed by `results`
    /// let [Value::MemRef(m)] = results.as_slice() else { return Ok(()) };
    /// println!("{:?}", m.to_bytes());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// The arguments are taken, so one cannot be passed to another call (which may write
    /// its buffer) while a result that may alias it lives:
    ///
    /// ```compile_fail
    /// # use locus_memref::{CallOptions, Function, MemRefArg, MemRefViewMut, Value};
    /// # fn f(same: &Function<'_>) -> Result<(), locus_memref::Error> {
    /// let mut data = vec![1.0f32, 2.0];
    /// let mut view = MemRefViewMut::contiguous(&mut data, [2])?;
    /// let args = [MemRefArg::from_view_mut(&mut view).into()];
    /// let first = same.call(args, CallOptions::default())?;
    /// let again = same.call(args, CallOptions::default())?; // error: `args` was moved
    /// # drop((first, again));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Nor the library, whose globals they may point into:
    ///
    /// ```compile_fail
    /// # use locus_memref::{CallOptions, Library, Signature, Value};
    /// # fn f(lib: Library) -> Result<(), locus_memref::Error> {
    /// let results = {
    ///     // SAFETY: `table` returns a global of the library (`memref.get_global`).
    ///     let table = unsafe { lib.function("table", Signature::parse("() -> memref<4xf32>")?) }?;
    ///     table.call([], CallOptions::default())?
    /// };
    /// drop(lib); // error: `lib` is still borrowed by `results`
    /// let [Value::MemRef(m)] = results.as_slice() else { return Ok(()) };
    /// println!("{:?}", m.to_bytes());
    /// # Ok(())
    /// # }
    /// ```
    pub fn call<'a>(
        &self,
        args: impl IntoIterator<Item = Arg<'a>>,
        options: CallOptions,
    ) -> Result<Vec<Value<'a>>, Error>
    where
        'lib: 'a,
    {
        // The arguments are taken, not borrowed: a result may alias an argument's buffer,
        // and an argument passed again to another call (which may write its buffer) while
        // that result lives would change memory behind the result's shared view.
        let mut args: Vec<Arg<'a>> = args.into_iter().collect();
        let args = args.as_mut_slice();
        let Some(code) = self.ciface else {
            return Err(Error::Library {
                what: format!("_mlir_ciface_{}", self.name),
                message: "not in the library (compile with C wrappers requested)".into(),
            });
        };
        for (index, t) in self.signature.results.iter().enumerate() {
            if matches!(t, Type::Scalar(e) if scalar_ffi_type(*e).is_none()) {
                return Err(Error::Result {
                    index,
                    message: NO_COMPLEX_SCALARS.into(),
                });
            }
        }
        let prepared = self.prepare(args, options.copy_strided)?;
        // Descriptor storage: must not move until the call returns.
        let mut ranked: Vec<Vec<i64>> = Vec::new();
        let mut unranked: Vec<[i64; 2]> = Vec::new();
        for (p, ty) in prepared.iter().zip(&self.signature.inputs) {
            if let (Some(p), Type::MemRef(t)) = (p, ty) {
                ranked.push(descriptor_words(p.aligned, p.offset, p.sizes, &p.strides));
                if t.shape.is_none() {
                    unranked.push([p.sizes.len() as i64, 0]);
                }
            }
        }
        let (mut ri, mut ui) = (0, 0);
        let mut slots = Vec::new();
        // The result struct (a pointer first) when results are a struct.
        let results = &self.signature.results;
        let struct_result = struct_result(&self.signature);
        let offsets = &self.result_offsets;
        let mut result_buf = vec![0u64; self.result_size.div_ceil(8).max(1)];
        if struct_result {
            slots.push(Slot::Ptr(result_buf.as_mut_ptr().cast()));
        }
        for (i, (p, ty)) in prepared.iter().zip(&self.signature.inputs).enumerate() {
            match (p, ty) {
                (None, _) => {
                    if let Arg::Scalar(s) = &args[i] {
                        slots.push(Slot::scalar(*s));
                    }
                }
                (Some(_), Type::MemRef(t)) => {
                    let d = ranked[ri].as_mut_ptr().cast::<c_void>();
                    ri += 1;
                    if t.shape.is_none() {
                        unranked[ui][1] = d as i64;
                        slots.push(Slot::Ptr(unranked[ui].as_mut_ptr().cast()));
                        ui += 1;
                    } else {
                        slots.push(Slot::Ptr(d));
                    }
                }
                (Some(_), Type::Scalar(_)) => {}
            }
        }
        let Some(cif) = &self.ciface_cif else {
            return Err(Error::Argument {
                index: 0,
                message: NO_COMPLEX_SCALARS.into(),
            });
        };
        let ffi_args: Vec<FfiArg> = slots.iter().map(Slot::arg).collect();
        let scope = options.report_faults.then(locus_signals::reporting_scope);
        // SAFETY: `Library::function`'s contract makes the signature the
        // function's type; the cif follows the C wrapper's convention for it;
        // every pointer passed points to storage alive until after the call.
        // libffi writes at most a full register (8 bytes) of return value.
        let ret: [u64; 2] = unsafe { cif.call(CodePtr(code), &ffi_args) };
        drop(scope);
        // An error here is reported once the results are read (and their buffers
        // guarded, so dropping them frees what is the kernel's).
        let written = write_back(&prepared, args);
        let mut values = Vec::with_capacity(results.len());
        if !struct_result {
            if let Some(Type::Scalar(e)) = results.first() {
                let bytes: Vec<u8> = ret.iter().flat_map(|w| w.to_ne_bytes()).collect();
                let s = Scalar::read(*e, &bytes).ok_or(Error::Result {
                    index: 0,
                    message: format!("cannot read a {e}"),
                })?;
                values.push(Value::Scalar(s));
            }
            return written.map(|()| values);
        }
        let bytes: &[u8] = {
            let p = result_buf.as_ptr().cast::<u8>();
            // SAFETY: the buffer's own bytes.
            unsafe { std::slice::from_raw_parts(p, result_buf.len() * 8) }
        };
        // Heap descriptors of unranked results: the caller's (spec 002,
        // "Lifetime"), freed when this is dropped, once their words are copied.
        let mut heaps: Vec<Allocation> = Vec::new();
        let mut raws = Vec::new();
        // Each result in order: a scalar, or `None` for the next memref.
        let mut fields = Vec::with_capacity(results.len());
        for (index, (t, &off)) in results.iter().zip(offsets).enumerate() {
            let field = &bytes[off..];
            let word = |k: usize| -> i64 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&field[8 * k..8 * k + 8]);
                i64::from_ne_bytes(w)
            };
            match t {
                Type::Scalar(e) => {
                    let s = Scalar::read(*e, field).ok_or(Error::Result {
                        index,
                        message: format!("cannot read a {e}"),
                    })?;
                    fields.push(Some(Value::Scalar(s)));
                }
                Type::MemRef(m) => {
                    let words = match m.rank() {
                        Some(r) => (0..3 + 2 * r).map(word).collect::<Vec<i64>>(),
                        None => {
                            let rank = word(0);
                            let heap = word(1) as *mut c_void;
                            if !heap.is_null() && !heaps.iter().any(|h| h.ptr() == heap) {
                                // SAFETY: an unranked result's descriptor is a
                                // fresh heap copy the caller frees, from the
                                // kernel's allocator (`Library::function`'s or
                                // `CallOptions::free_with`'s contract); the
                                // check above makes one guard per pointer.
                                heaps.extend(unsafe { Allocation::new(heap, options.free) });
                            }
                            if heap.is_null() || !(0..=64).contains(&rank) {
                                return Err(Error::Result {
                                    index,
                                    message: format!(
                                        "unranked result has rank {rank} and descriptor {heap:?}"
                                    ),
                                });
                            }
                            let n = 3 + 2 * rank as usize;
                            // SAFETY: an unranked result points to a heap ranked
                            // descriptor of `rank`, alive until `heaps` is dropped.
                            unsafe { std::slice::from_raw_parts(heap.cast::<i64>(), n) }.to_vec()
                        }
                    };
                    let r = (words.len() - 3) / 2;
                    raws.push(RawResult {
                        index,
                        elem: m.elem,
                        allocated: words[0] as *mut c_void,
                        aligned: words[1] as *mut c_void,
                        offset: words[2],
                        sizes: words[3..3 + r].to_vec(),
                        strides: words[3 + r..3 + 2 * r].to_vec(),
                        unranked: m.rank().is_none(),
                    });
                    fields.push(None);
                }
            }
        }
        drop(heaps);
        let spans: Vec<(usize, (i128, i128), Option<Allocation>)> = prepared
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = p.as_ref()?;
                let start = p.span.0 as i128;
                Some((i, (start, start + p.span.1.max(1) as i128), p.copy.clone()))
            })
            .collect();
        let origins = resolve(&raws, &spans, &options)?;
        let mut memrefs = raws.into_iter().zip(origins);
        let values = fields
            .into_iter()
            .filter_map(|v| match v {
                Some(v) => Some(v),
                None => {
                    let (r, (origin, owner)) = memrefs.next()?;
                    Some(Value::MemRef(ReturnedMemRef {
                        raw: r,
                        origin,
                        owner,
                        _borrow: PhantomData,
                    }))
                }
            })
            .collect();
        // Dropped on an error: the results' guards free what is the kernel's.
        written.map(|()| values)
    }

    /// Calls the function itself in the expanded convention (each memref as
    /// `allocated, aligned, offset, sizes.., strides..`; unranked as `rank,
    /// descriptor pointer`). Only for functions without results: results
    /// come back as an LLVM struct, which does not follow the C ABI.
    pub fn call_expanded(&self, args: &mut [Arg<'_>], copy_strided: bool) -> Result<(), Error> {
        if !self.signature.results.is_empty() {
            return Err(Error::Result {
                index: 0,
                message: "results are only taken through _mlir_ciface_ wrappers: LLVM struct \
                          returns of the expanded form do not follow the platform C ABI"
                    .into(),
            });
        }
        let Some(code) = self.expanded else {
            return Err(Error::Library {
                what: self.name.clone(),
                message: "not in the library".into(),
            });
        };
        let prepared = self.prepare(args, copy_strided)?;
        let mut ranked: Vec<Vec<i64>> = Vec::new();
        let mut slots = Vec::new();
        for (i, (p, ty)) in prepared.iter().zip(&self.signature.inputs).enumerate() {
            match (p, ty) {
                (Some(p), Type::MemRef(t)) => {
                    if t.shape.is_none() {
                        ranked.push(descriptor_words(p.aligned, p.offset, p.sizes, &p.strides));
                    } else {
                        slots.push(Slot::Ptr(p.aligned.cast()));
                        slots.push(Slot::Ptr(p.aligned.cast()));
                        slots.push(Slot::I64(p.offset));
                        slots.extend(p.sizes.iter().map(|&s| Slot::I64(s)));
                        slots.extend(p.strides.iter().map(|&s| Slot::I64(s)));
                    }
                    if t.shape.is_none() {
                        let last = ranked.len() - 1;
                        slots.push(Slot::I64(p.sizes.len() as i64));
                        slots.push(Slot::Ptr(ranked[last].as_mut_ptr().cast()));
                    }
                }
                _ => {
                    if let Arg::Scalar(s) = &args[i] {
                        slots.push(Slot::scalar(*s));
                    }
                }
            }
        }
        let Some(cif) = &self.expanded_cif else {
            return Err(Error::Argument {
                index: 0,
                message: NO_COMPLEX_SCALARS.into(),
            });
        };
        let ffi_args: Vec<FfiArg> = slots.iter().map(Slot::arg).collect();
        // SAFETY: as in `call`; `ranked`'s inner buffers do not move (only
        // the outer Vec may grow, which moves the inner Vec headers, not their heap data).
        unsafe { cif.call::<()>(CodePtr(code), &ffi_args) };
        write_back(&prepared, args)
    }
}
