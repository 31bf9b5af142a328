//! A cache prefetch hint, where the target has one.

/// Asks for the cache line that holds `p` to be brought into the nearest cache, without
/// waiting for it. Only a hint: it never faults and never reads `p` in the program's sense,
/// so any address will do. A no-op on targets without a prefetch instruction here.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    // SAFETY: the target has SSE (the `cfg`); a prefetch is a hint that never faults,
    // whatever the address, and never dereferences it.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = p;
}
