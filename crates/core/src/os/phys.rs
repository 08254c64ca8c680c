//! Physical memory for the minimal OS side: frames handed out as naturally aligned extents of
//! 2^order base frames from a bump pointer, with per-order free lists for reuse.
//!
//! This allocator models no fragmentation (it never coalesces, and alignment gaps go back to
//! the free lists as aligned pieces); the buddy allocator with migrate types and compaction
//! replaces it behind the same `FrameAllocator` trait in the OS-memory-manager work.
//!
//! Invariants: every frame below `next` is either in exactly one free list entry or allocated;
//! free-list entries are aligned to their order.

use crate::units::{Order, Pfn};

pub trait FrameAllocator: Send {
    /// An aligned extent of 2^order frames, or None when no such extent exists.
    fn alloc(&mut self, order: Order) -> Option<Pfn>;
    /// Return an extent (it may be a piece of a larger allocation).
    fn free(&mut self, pfn: Pfn, order: Order);
    fn total_frames(&self) -> u64;
    fn free_frames(&self) -> u64;
}

pub struct BumpAllocator {
    total: u64,
    next: u64,
    free_lists: Vec<Vec<u64>>,
    /// Bit o set when free_lists[o] is not empty (finds a larger extent to split in O(1)).
    nonempty: u64,
    free_count: u64,
}

impl BumpAllocator {
    pub fn new(total_frames: u64, max_order: u8) -> BumpAllocator {
        BumpAllocator { total: total_frames, next: 0, free_lists: vec![Vec::new(); max_order as usize + 1], nonempty: 0, free_count: 0 }
    }

    fn push_free(&mut self, mut pfn: u64, end: u64) {
        // Split [pfn, end) into maximal aligned pieces.
        while pfn < end {
            // The largest order that is aligned at pfn and fits before end.
            let max = (self.free_lists.len() - 1) as u32;
            let o = max.min(pfn.trailing_zeros()).min(63 - (end - pfn).leading_zeros());
            self.free_lists[o as usize].push(pfn);
            self.nonempty |= 1 << o;
            self.free_count += 1 << o;
            pfn += 1 << o;
        }
    }
}

impl FrameAllocator for BumpAllocator {
    fn alloc(&mut self, order: Order) -> Option<Pfn> {
        let o = order.0 as usize;
        if o >= self.free_lists.len() {
            return None;
        }
        if let Some(p) = self.free_lists[o].pop() {
            if self.free_lists[o].is_empty() {
                self.nonempty &= !(1 << o);
            }
            self.free_count -= 1 << o;
            return Some(Pfn(p));
        }
        // Split the smallest larger free extent.
        let larger = self.nonempty & !((2u64 << o) - 1);
        if larger != 0 {
            let big = larger.trailing_zeros() as usize;
            let p = self.free_lists[big].pop().expect("nonempty bit set for an empty list");
            if self.free_lists[big].is_empty() {
                self.nonempty &= !(1 << big);
            }
            self.free_count -= 1 << big;
            self.push_free(p + (1 << o), p + (1 << big));
            return Some(Pfn(p));
        }
        let n = 1u64 << o;
        let start = (self.next + n - 1) & !(n - 1);
        if start + n > self.total {
            return None;
        }
        let gap_start = self.next;
        self.next = start + n;
        self.push_free(gap_start, start);
        Some(Pfn(start))
    }

    fn free(&mut self, pfn: Pfn, order: Order) {
        self.push_free(pfn.0, pfn.0 + (1u64 << order.0));
    }

    fn total_frames(&self) -> u64 {
        self.total
    }

    fn free_frames(&self) -> u64 {
        self.total - self.next + self.free_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_conserved() {
        let mut a = BumpAllocator::new(4096, 10);
        let p = a.alloc(Order(0)).unwrap();
        let q = a.alloc(Order(9)).unwrap();
        assert_eq!(q.0 % 512, 0);
        assert_eq!(a.free_frames(), 4096 - 1 - 512);
        a.free(q, Order(9));
        a.free(p, Order(0));
        assert_eq!(a.free_frames(), 4096);
        // No coalescing in this allocator: the freed pieces serve requests of their own size.
        assert_eq!(a.alloc(Order(9)), Some(q));
        let mut n = 0;
        while a.alloc(Order(0)).is_some() {
            n += 1;
        }
        assert_eq!(n, 4096 - 512, "every other frame is still allocatable, one at a time");
        assert_eq!(a.free_frames(), 0);
    }
}
