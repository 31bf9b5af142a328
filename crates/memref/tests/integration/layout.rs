//! Layout tests: the Rust descriptors against fixed expectations and against
//! the C structs of spec 002 compiled by `clang-19` at test time.

// Test helpers may panic; `0..0` loops come from the rank-generic macros at rank 0.
#![allow(clippy::unwrap_used, clippy::reversed_empty_ranges)]

use std::ffi::{c_void, CString};
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use locus_memref::{MemRefDescriptor, MemRefView, UnrankedMemRefDescriptor};

type D<const N: usize> = MemRefDescriptor<f32, N>;

/// Rust-side offsets `[allocated, aligned, offset, sizes, strides]` and size/align.
macro_rules! rust_layout {
    ($n:literal) => {
        (
            [
                offset_of!(D<$n>, allocated),
                offset_of!(D<$n>, aligned),
                offset_of!(D<$n>, offset),
                offset_of!(D<$n>, sizes),
                offset_of!(D<$n>, strides),
            ],
            size_of::<D<$n>>(),
            align_of::<D<$n>>(),
        )
    };
}

#[cfg(target_pointer_width = "64")]
#[test]
fn fixed_layout_64bit() {
    let layouts = [
        rust_layout!(0),
        rust_layout!(1),
        rust_layout!(2),
        rust_layout!(3),
        rust_layout!(4),
    ];
    for (n, (offs, size, align)) in layouts.into_iter().enumerate() {
        assert_eq!(offs, [0, 8, 16, 24, 24 + 8 * n], "rank {n}");
        assert_eq!(size, 24 + 16 * n, "rank {n}");
        assert_eq!(align, 8, "rank {n}");
    }
    // Rank 0 is exactly {allocated, aligned, offset}.
    assert_eq!(size_of::<D<0>>(), 3 * 8);
    assert_eq!(size_of::<UnrankedMemRefDescriptor>(), 16);
    assert_eq!(offset_of!(UnrankedMemRefDescriptor, descriptor), 8);
    // Element type does not change the layout.
    assert_eq!(
        size_of::<MemRefDescriptor<u8, 3>>(),
        size_of::<MemRefDescriptor<f64, 3>>()
    );
}

/// The C library built from tests/c/layout.c, opened with dlopen.
struct CLib(*mut c_void);

impl CLib {
    /// Builds and opens the library once per test process (tests run in
    /// parallel and would otherwise race on the output file).
    fn build() -> CLib {
        static HANDLE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        CLib(*HANDLE.get_or_init(|| Self::build_uncached().0 as usize) as *mut c_void)
    }

    fn build_uncached() -> CLib {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/layout.c");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("locus_memref_layout.so");
        let status = Command::new("clang-19")
            .args([
                "-std=c11", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-o",
            ])
            .arg(&out)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "the layout test needs clang-19 on PATH to compile {} ({e}); \
                     install it (apt-get install clang-19)",
                    src.display()
                )
            });
        assert!(
            status.success(),
            "clang-19 failed to compile {}",
            src.display()
        );
        let path = CString::new(out.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; the library has no initializers with side effects.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {} failed", out.display());
        CLib(handle)
    }

    /// Looks up `name` and reinterprets it as the function pointer type `F`.
    ///
    /// # Safety
    /// `F` must be the symbol's C signature.
    unsafe fn sym<F: Copy>(&self, name: &str) -> F {
        let c = CString::new(name).unwrap();
        // SAFETY: valid handle and C string.
        let p = unsafe { libc::dlsym(self.0, c.as_ptr()) };
        assert!(!p.is_null(), "symbol {name} missing");
        assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
        // SAFETY: the caller guarantees `F` is the right fn-pointer type.
        unsafe { std::mem::transmute_copy(&p) }
    }
}

type SizeFn = unsafe extern "C" fn() -> usize;
type OffsetFn = unsafe extern "C" fn(i32) -> usize;

macro_rules! compare_rank {
    ($lib:expr, $n:literal) => {{
        let lib: &CLib = $lib;
        let (offs, size, align) = rust_layout!($n);
        // SAFETY: signatures match tests/c/layout.c.
        let c_size: SizeFn = unsafe { lib.sym(concat!("locus_sizeof_", $n)) };
        // SAFETY: as above.
        let c_align: SizeFn = unsafe { lib.sym(concat!("locus_alignof_", $n)) };
        // SAFETY: as above.
        let c_off: OffsetFn = unsafe { lib.sym(concat!("locus_offsetof_", $n)) };
        // SAFETY: the C functions take no pointers.
        let c_size = unsafe { c_size() };
        // SAFETY: as above.
        let c_align = unsafe { c_align() };
        assert_eq!(c_size, size, "sizeof rank {}", $n);
        assert_eq!(c_align, align, "alignof rank {}", $n);
        let fields = if $n == 0 { 3 } else { 5 };
        for f in 0..fields {
            // SAFETY: as above.
            let c = unsafe { c_off(f as i32) };
            assert_eq!(c, offs[f], "offsetof field {} rank {}", f, $n);
        }
        // The rank-0 Rust struct has its (empty) arrays at the end: nothing
        // follows `offset`, as in the C struct.
        if $n == 0 {
            assert_eq!(offs[3], c_size);
            assert_eq!(offs[4], c_size);
        }

        // C reads every field of a Rust descriptor passed by pointer.
        let mut buf = vec![0f32; 64];
        let base = buf.as_mut_ptr();
        let mut sizes = [0i64; $n];
        let mut strides = [0i64; $n];
        for k in 0..$n {
            sizes[k] = (2 + k as i64) + (1 << 40); // high bits catch narrow C fields
            strides[k] = -(7 + k as i64) - (1 << 41);
        }
        let d = D::<$n>::new(base, base.wrapping_add(3), 5 + (1 << 42), sizes, strides);
        let field: unsafe extern "C" fn(*const D<$n>, i32, i32) -> i64 =
            // SAFETY: as above.
            unsafe { lib.sym(concat!("locus_field_", $n)) };
        // SAFETY: `d` is a live descriptor of rank $n; C reads its scalar fields and
        // nothing through its pointers.
        let scalars = [0, 1, 2].map(|f| unsafe { field(&d, f, 0) });
        assert_eq!(
            scalars,
            [base as i64, base.wrapping_add(3) as i64, 5 + (1 << 42)]
        );
        for k in 0..$n {
            // SAFETY: as above; C reads entry `k`, below the rank, of `sizes`.
            let size = unsafe { field(&d, 3, k as i32) };
            // SAFETY: as above, of `strides`.
            let stride = unsafe { field(&d, 4, k as i32) };
            assert_eq!((size, stride), (sizes[k], strides[k]));
        }

        // C writes a descriptor through a pointer (as a ciface result) and Rust reads it.
        let fill: unsafe extern "C" fn(*mut D<$n>, *mut f32) =
            // SAFETY: as above.
            unsafe { lib.sym(concat!("locus_fill_", $n)) };
        let mut out = D::<$n>::new(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            -1, // all-ones: a C field narrower than 64 bits leaves bits set
            [-1; $n],
            [-1; $n],
        );
        // SAFETY: C writes every field of `out`, a live descriptor of rank $n, and
        // stores `base` (and `base + 1`) in it without reading through them.
        unsafe { fill(&mut out, base) };
        assert_eq!(out.allocated, base);
        assert_eq!(out.aligned, base.wrapping_add(1));
        assert_eq!(out.offset, $n + 2);
        for k in 0..$n {
            assert_eq!(out.sizes[k], 10 * k as i64 + 1);
            assert_eq!(out.strides[k], -(k as i64 + 3));
        }
        drop(buf);
    }};
}

#[test]
fn rust_layout_equals_c_layout() {
    let lib = CLib::build();
    compare_rank!(&lib, 0);
    compare_rank!(&lib, 1);
    compare_rank!(&lib, 2);
    compare_rank!(&lib, 3);
    compare_rank!(&lib, 4);
    // SAFETY: signatures match tests/c/layout.c.
    let s: SizeFn = unsafe { lib.sym("locus_sizeof_unranked") };
    // SAFETY: as above.
    let a: SizeFn = unsafe { lib.sym("locus_alignof_unranked") };
    // SAFETY: as above.
    let o: OffsetFn = unsafe { lib.sym("locus_offsetof_unranked") };
    // SAFETY: the C functions take no pointers.
    assert_eq!(unsafe { s() }, size_of::<UnrankedMemRefDescriptor>());
    // SAFETY: as above.
    assert_eq!(unsafe { a() }, align_of::<UnrankedMemRefDescriptor>());
    // SAFETY: as above.
    assert_eq!(unsafe { o(0) }, offset_of!(UnrankedMemRefDescriptor, rank));
    // SAFETY: as above.
    let descriptor_offset = unsafe { o(1) };
    assert_eq!(
        descriptor_offset,
        offset_of!(UnrankedMemRefDescriptor, descriptor)
    );
}

macro_rules! c_loads_match_view {
    ($lib:expr, $view:expr, $n:literal) => {{
        let v = $view;
        let load: unsafe extern "C" fn(*const D<$n>, *const i64) -> f32 =
            // SAFETY: signature matches tests/c/layout.c.
            unsafe { $lib.sym(concat!("locus_load_", $n)) };
        let d = v.to_descriptor();
        for (ix, x) in v.indices().zip(v.iter()) {
            // SAFETY: the descriptor points into a live slice and `ix` is inside the
            // view's box.
            let c = unsafe { load(&d, ix.as_ptr()) };
            assert_eq!(c, *x, "index {ix:?}");
        }
    }};
}

#[test]
fn c_linearization_reads_the_view_elements() {
    let lib = CLib::build();
    let data: Vec<f32> = (0..120).map(|i| i as f32).collect();
    c_loads_match_view!(
        lib,
        MemRefView::<f32, 0>::new(&data, 17, [], []).unwrap(),
        0
    );
    c_loads_match_view!(lib, MemRefView::new(&data, 119, [40], [-3]).unwrap(), 1);
    let m = MemRefView::contiguous(&data, [4, 5, 6]).unwrap();
    c_loads_match_view!(lib, m, 3);
    c_loads_match_view!(lib, m.transpose(0, 2).unwrap(), 3);
    c_loads_match_view!(lib, m.subview([1, 4, 0], [3, 2, 3], [1, -2, 2]).unwrap(), 3);
    let mat = MemRefView::contiguous(&data, [10, 12]).unwrap();
    let t = mat
        .transpose(0, 1)
        .unwrap()
        .subview([2, 1], [5, 4], [2, 2])
        .unwrap();
    c_loads_match_view!(lib, t, 2);
    c_loads_match_view!(lib, MemRefView::new(&data, 3, [3, 4], [0, 1]).unwrap(), 2);
    c_loads_match_view!(
        lib,
        MemRefView::new(&data, 0, [2, 3, 4, 5], [60, 20, 5, 1]).unwrap(),
        4
    );

    // Unranked: C reads the rank and loads through the type-erased pointer.
    let mut d = t.to_descriptor();
    let u = d.as_unranked();
    let rank: unsafe extern "C" fn(*const UnrankedMemRefDescriptor) -> i64 =
        // SAFETY: the signature matches tests/c/layout.c.
        unsafe { lib.sym("locus_unranked_rank") };
    let load: unsafe extern "C" fn(*const UnrankedMemRefDescriptor, *const i64) -> f32 =
        // SAFETY: as above.
        unsafe { lib.sym("locus_unranked_load_2") };
    // SAFETY: `u` points at `d`, alive for the call.
    assert_eq!(unsafe { rank(&u) }, 2);
    for (ix, x) in t.indices().zip(t.iter()) {
        // SAFETY: as above; `ix` holds the two indices the C function reads.
        assert_eq!(unsafe { load(&u, ix.as_ptr()) }, *x);
    }
}
