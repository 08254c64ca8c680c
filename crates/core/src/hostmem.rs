//! The simulator's own memory on huge pages.
//!
//! The model's large tables (page-table nodes, frame metadata, TLB and cache tag arrays) are
//! read at random, one entry per simulated access: a 1GiB trace's last-level page table is
//! 2MiB of entries, a 32MiB last-level cache is 4MiB of tags. On 4KiB host pages every such
//! read is likely a host TLB miss as well as a host cache miss. The hosts these runs use have
//! THP in `madvise` mode (../shared/notes/platform.md: huge pages give 1.7-1.9x here), so
//! nothing the process does not advise gets a huge page.
//!
//! `HugeAlloc` is a global allocator that places every allocation of at least `HUGE_MIN`
//! bytes on a 2MiB boundary and advises it `MADV_HUGEPAGE`; smaller ones go to the system
//! allocator unchanged. Where THP is off (or not Linux) the advice is refused and ignored:
//! the memory works the same, on base pages. It changes where memory lies, never what the
//! model computes (no result depends on an address).

use std::alloc::{GlobalAlloc, Layout, System};

/// x86-64's (and AArch64 4KiB-granule's) PMD size: the smallest THP.
const HUGE: usize = 2 << 20;
/// Allocations from this size up are huge-page aligned and advised. One huge page: anything
/// smaller would be padded to one and mostly wasted.
const HUGE_MIN: usize = HUGE;

pub struct HugeAlloc;

impl HugeAlloc {
    #[inline(always)]
    fn layout_for(l: Layout) -> Layout {
        if l.size() >= HUGE_MIN && l.align() < HUGE {
            // A size too close to isize::MAX for the larger alignment keeps its own (and
            // dealloc, computing the same, agrees).
            Layout::from_size_align(l.size(), HUGE).unwrap_or(l)
        } else {
            l
        }
    }

    #[inline(always)]
    fn advise(p: *mut u8, l: Layout) {
        #[cfg(target_os = "linux")]
        if !p.is_null() && l.size() >= HUGE_MIN {
            // SAFETY: [p, p + size) is the allocation just made, rounded down to whole huge
            // pages inside it; madvise only changes how the kernel backs it.
            unsafe {
                libc::madvise(p as *mut libc::c_void, l.size() & !(HUGE - 1), libc::MADV_HUGEPAGE);
            }
        }
    }
}

// SAFETY: every call forwards to `System` with a layout that is a pure function of the
// caller's (`layout_for`), so alloc and dealloc of one block always agree.
unsafe impl GlobalAlloc for HugeAlloc {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let h = Self::layout_for(l);
        // SAFETY: the caller's contract, with a layout at least as strict.
        let p = unsafe { System.alloc(h) };
        Self::advise(p, h);
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let h = Self::layout_for(l);
        // SAFETY: as for alloc.
        let p = unsafe { System.alloc_zeroed(h) };
        Self::advise(p, h);
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from alloc with `layout_for(l)`.
        unsafe { System.dealloc(p, Self::layout_for(l)) }
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let old = Self::layout_for(l);
        // SAFETY: the caller's contract: new_size is valid for l's alignment.
        let new = Self::layout_for(unsafe { Layout::from_size_align_unchecked(new_size, l.align()) });
        if old.align() == new.align() {
            // Both small, or both huge-aligned: the system can grow the block in place.
            // SAFETY: `p` was allocated with `old`; the alignment is unchanged.
            let q = unsafe { System.realloc(p, old, new_size) };
            if new_size > l.size() {
                Self::advise(q, new);
            }
            return q;
        }
        // Crossing HUGE_MIN: a new block with the other alignment, then copy.
        // SAFETY: as for alloc and dealloc; the copy is within both blocks.
        unsafe {
            let q = self.alloc(Layout::from_size_align_unchecked(new_size, l.align()));
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                self.dealloc(p, l);
            }
            q
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_huge_aligned_and_survive_growth_and_shrinking() {
        let a = HugeAlloc;
        unsafe {
            let small = Layout::from_size_align(1 << 20, 8).unwrap();
            let p = a.alloc(small);
            assert!(!p.is_null());
            p.write_bytes(7, small.size());
            // Growing past HUGE_MIN moves it onto a 2MiB boundary and keeps the contents.
            let q = a.realloc(p, small, 5 << 20);
            assert_eq!(q as usize % HUGE, 0);
            assert_eq!((*q, *q.add((1 << 20) - 1)), (7, 7));
            let big = Layout::from_size_align(5 << 20, 8).unwrap();
            // Shrinking below it moves it back to an ordinary block, contents kept.
            let r = a.realloc(q, big, 1000);
            assert_eq!(*r.add(999), 7);
            a.dealloc(r, Layout::from_size_align(1000, 8).unwrap());
            let z = a.alloc_zeroed(big);
            assert_eq!(z as usize % HUGE, 0);
            assert_eq!(*z.add(big.size() - 1), 0);
            a.dealloc(z, big);
        }
    }
}
