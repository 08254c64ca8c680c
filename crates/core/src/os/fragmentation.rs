//! Fragmentation metrics, computed from the buddy allocator's free-block counts in O(orders).
//!
//! - Free extents per order: the number of free buddy blocks of each order. Because free buddies
//!   always merge, every free, aligned extent of order k lies inside one free block of order >= k.
//! - Linux's unusable free space index for order j (mm/vmstat.c `unusable_free_index`, shown in
//!   /sys/kernel/debug/extfrag/unusable_index): the fraction of free memory that lies in blocks
//!   smaller than 2^j frames, so cannot serve a request of order j. 0 = none, 1 = all of it.
//! - Navarro et al.'s contiguity metric (OSDI 2002, section 6.4, Fig. 5): each base page scores
//!   by the largest fully free, aligned superpage-size region it lies in (larger regions score
//!   more), summed and normalised by the score of an entirely free memory. The paper's weights
//!   are not legible in our copy of it; we weight a region by the rank of its superpage size
//!   (1 for the smallest superpage size, 2 for the next, ...), so the metric is 1 when all memory
//!   is free in maximal blocks and 0 when no free extent reaches the smallest superpage size.

use super::frames::PhysMem;
use crate::units::PageSize;

/// Linux's unusable free space index for requests of 2^order frames.
pub fn unusable_index(m: &PhysMem, order: u8) -> f64 {
    let free = m.free_frames();
    if free == 0 {
        return 0.0;
    }
    let usable: u64 = (order..=m.max_order()).map(|o| m.free_blocks(o) << o).sum();
    (free - usable) as f64 / free as f64
}

/// Navarro's contiguity metric (see the module comment for the weights).
pub fn contiguity(m: &PhysMem, sizes: &[PageSize]) -> f64 {
    let base = sizes[0].shift();
    let orders: Vec<u32> = sizes[1..].iter().map(|s| s.shift() - base).collect();
    if orders.is_empty() || m.total_frames() == 0 {
        return 0.0;
    }
    let weight = |o: u8| orders.iter().filter(|&&k| k <= o as u32).count() as f64;
    let score: f64 = (0..=m.max_order()).map(|o| (m.free_blocks(o) << o) as f64 * weight(o)).sum();
    score / (m.total_frames() as f64 * orders.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::frames::FrameKind;
    use crate::units::Order;

    #[test]
    fn free_memory_scores_fully_and_fragmented_memory_does_not() {
        let sizes = [PageSize::K4, PageSize::M2];
        let mut m = PhysMem::new(4096, 9, 9).unwrap();
        assert_eq!(contiguity(&m, &sizes), 1.0);
        assert_eq!(unusable_index(&m, 9), 0.0);
        // One wired frame in each 2MB block: nothing usable at order 9, half the memory free
        // in order-8 blocks and smaller.
        for b in 0..8u64 {
            assert!(m.alloc_at(b * 512, 0, FrameKind::Wired));
        }
        assert_eq!(contiguity(&m, &sizes), 0.0);
        assert_eq!(unusable_index(&m, 9), 1.0);
        assert!(unusable_index(&m, 8) > 0.0 && unusable_index(&m, 8) < 1.0);
        assert_eq!(unusable_index(&m, 0), 0.0);
        let _ = Order(0);
    }
}
