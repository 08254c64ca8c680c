//! Hints to the host CPU, which change no result.

/// Ask the host to bring the cache line holding `x` into its first-level cache, ahead of a
/// read the model will make soon (the simulated tables are larger than the host's caches).
/// A no-op where the target has no prefetch instruction here.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `x` is a live reference, and a prefetch reads and writes nothing in any case.
    // SSE, which has the instruction, is part of every x86-64 CPU.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(x as *const T as *const i8, _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
