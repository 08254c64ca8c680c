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

/// An array on the host's 2MB pages where it has them (an anonymous mapping advised
/// MADV_HUGEPAGE, which THP's `madvise` mode honours), for large arrays the model probes at
/// random: the data caches' tag arrays (2MiB for a 32MiB last level), where a probe would
/// otherwise often miss the host's TLB as well as its caches. Smaller arrays, and any whose
/// mapping fails, come from the allocator. Either way the array starts on a 64-byte boundary,
/// so a row of 64 aligned bytes is one host cache line. Contents are the same either way.
pub struct HostArray<T: Copy> {
    ptr: *mut T,
    len: usize,
    /// Bytes mapped; 0 when the allocator's (`layout`).
    mapped: usize,
    layout: std::alloc::Layout,
}

// SAFETY: a HostArray owns its memory alone, as a Vec does.
unsafe impl<T: Copy + Send> Send for HostArray<T> {}

/// Arrays smaller than this come from the allocator (one 2MB page).
const HUGE_BYTES: usize = 2 << 20;

impl<T: Copy> HostArray<T> {
    pub fn filled(len: usize, value: T) -> HostArray<T> {
        let bytes = (len * std::mem::size_of::<T>()).max(1);
        let layout = std::alloc::Layout::from_size_align(bytes, 64.max(std::mem::align_of::<T>())).expect("an array the host can hold");
        let mut a = HostArray { ptr: std::ptr::null_mut(), len, mapped: 0, layout };
        if bytes >= HUGE_BYTES {
            let mapped = bytes.div_ceil(HUGE_BYTES) * HUGE_BYTES;
            // SAFETY: a new private anonymous mapping; no existing memory is touched.
            let p = unsafe { libc::mmap(std::ptr::null_mut(), mapped, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
            if p != libc::MAP_FAILED {
                // SAFETY: advice on the mapping just made; failing it changes nothing but speed.
                unsafe { libc::madvise(p, mapped, libc::MADV_HUGEPAGE) };
                (a.ptr, a.mapped) = (p as *mut T, mapped);
            }
        }
        if a.ptr.is_null() {
            // SAFETY: the layout's size is not zero.
            a.ptr = unsafe { std::alloc::alloc(layout) } as *mut T;
            if a.ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
        }
        for i in 0..len {
            // SAFETY: the memory holds len Ts, uninitialised until written here.
            unsafe { a.ptr.add(i).write(value) };
        }
        a
    }
}

impl<T: Copy> std::ops::Deref for HostArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised values for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for HostArray<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for deref; `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: Copy> Drop for HostArray<T> {
    fn drop(&mut self) {
        if self.mapped > 0 {
            // SAFETY: the mapping made in `filled`, not used after this.
            unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.mapped) };
        } else {
            // SAFETY: allocated in `filled` with this layout; T is Copy (nothing to drop).
            unsafe { std::alloc::dealloc(self.ptr as *mut u8, self.layout) };
        }
    }
}
