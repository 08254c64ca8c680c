//! Navarro et al.'s fragmentation control by page replacement (OSDI 2002 §4.7 and §4.8; notes
//! §A.2.9 and §A.2.10): the contiguity-aware page daemon and wired-page clustering. The third
//! piece, cache pages kept in the buddy lists, is `PhysMem::free_to_cache` and the page cache's
//! `to_cache` mode.
//!
//! - **Contiguity-aware daemon.** Woken by failures to get a contiguous extent of the preferred
//!   size (the policy counts them and calls `recover_contiguity` from its daemon tick), it
//!   restores as many extents of that size as failed since it last ran. FreeBSD's daemon walks
//!   the inactive list and moves to the cache only the pages that lie inside the extents it
//!   wants; the model reaches the same end by looking at memory extent by extent: an extent is
//!   recoverable when each of its frames is free or holds an inactive, unmapped page-cache page
//!   (anything else: an active or mapped page, anonymous memory, a page table, a wired page, a
//!   reservation, pins it). The recoverable extents that need the fewest pages moved are taken
//!   first (the daemon affects as few pages as it can), and their pages go to cache frames,
//!   dirty ones written back first. If too few extents are recoverable it stops short of its
//!   goal (counted) and sleeps until the next failure.
//! - **Wired-page clustering.** Kernel-internal wired pages come from pools: an aligned extent
//!   of the largest superpage size up to 4MB is set aside for them at a time and handed out
//!   frame by frame, so wired pages pin as few superpage-sized extents as possible.

use super::frames::{FrameKind, Owner};
use super::Os;
use crate::units::{Order, Pfn};

crate::counters! {
    /// Counters of the contiguity-aware daemon and of wired-page clustering.
    #[derive(Clone, Debug, Default)]
    pub struct DaemonCounters {
        /// Times the daemon ran with failed requests to serve.
        pub wakeups: u64 = "daemon.wakeups",
        /// Extents asked for, by order (the failed requests since the previous wake-up).
        pub wanted: Vec<u64> = by_hand,
        /// Extents made free by moving their inactive pages to cache frames, by order.
        pub recovered: Vec<u64> = by_hand,
        /// Extents that were already free when the daemon looked (memory freed meanwhile).
        pub already_free: u64 = "daemon.already_free",
        /// Wake-ups that could not meet their goal: no more recoverable extents.
        pub goal_unmet: u64 = "daemon.goal_unmet",
        /// Inactive pages moved to cache frames, and how many of them were dirty (written back).
        pub pages_to_cache: u64 = "daemon.pages_to_cache",
        pub pages_written_back: u64 = "daemon.pages_written_back",
        /// Wired pools set aside (each an aligned extent of `pool_order`).
        pub wired_pools: u64 = "daemon.wired_pools",
    }
}

/// Wired (unmovable, never freed) frames: those placed one by one (a prelude's kernel
/// allocations), and the current wired pool, frames [next, end) of an extent set aside for
/// wired pages (wired-page clustering). Every wired frame is one of these.
#[derive(Clone, Debug, Default)]
pub struct Wired {
    pub frames: Vec<u64>,
    pub pool: (u64, u64),
}

impl Wired {
    /// A wired frame was allocated; it stays for the run.
    pub fn place(&mut self, pfn: u64) {
        self.frames.push(pfn);
    }

    /// Wired frames allocated: placed ones and the unused rest of the pool.
    pub fn count(&self) -> u64 {
        self.frames.len() as u64 + (self.pool.1 - self.pool.0)
    }
}

/// The order of a wired pool: the largest superpage size of at most 4MB (Navarro's largest
/// Alpha superpage; a 1GB pool would waste a gigabyte on a few kernel pages).
fn pool_order(os: &Os) -> u8 {
    let base = os.base.shift();
    os.sizes[1..].iter().map(|s| (s.shift() - base) as u8).filter(|&o| (o as u32 + base) <= 22 && o <= os.phys.max_order()).max().unwrap_or(0)
}

impl Os {
    /// Mechanism (contiguity-aware daemon): make up to `want` extents of 2^`order` frames free
    /// by moving the inactive page-cache pages inside them to cache frames. Returns how many
    /// extents are free afterwards (recovered, or found free).
    pub fn recover_contiguity(&mut self, order: u8, want: u64) -> u64 {
        let c = &mut self.daemon;
        if c.wanted.len() <= order as usize {
            c.wanted.resize(order as usize + 1, 0);
            c.recovered.resize(order as usize + 1, 0);
        }
        c.wakeups += 1;
        c.wanted[order as usize] += want;
        if want == 0 || order > self.phys.max_order() {
            return 0;
        }
        let n = 1u64 << order;
        let total = self.phys.total_frames();
        // (pages to move, extent): every recoverable extent.
        let mut cands: Vec<(u64, u64)> = Vec::new();
        let mut ext = 0u64;
        while ext + n <= total {
            if let Some(cost) = self.recovery_cost(ext, n) {
                cands.push((cost, ext));
            }
            ext += n;
        }
        cands.sort_unstable();
        let mut got = 0u64;
        for &(cost, ext) in &cands {
            if got == want {
                break;
            }
            if cost == 0 {
                self.daemon.already_free += 1;
                got += 1;
                continue;
            }
            for f in ext..ext + n {
                if self.phys.kind_of(f) != FrameKind::File {
                    continue;
                }
                let Some((file, index)) = self.phys.owner(f).as_file() else { continue };
                if self.files.cache.inactive_page(file, index) == Some(true) {
                    self.daemon.pages_written_back += 1;
                }
                self.files.cache.page_to_cache(&mut self.phys, file, index);
                self.daemon.pages_to_cache += 1;
            }
            self.daemon.recovered[order as usize] += 1;
            got += 1;
        }
        if got < want {
            self.daemon.goal_unmet += 1;
        }
        got
    }

    /// How many pages must move to cache frames to free the extent [ext, ext + n), or None if
    /// something that cannot move pins it.
    fn recovery_cost(&self, ext: u64, n: u64) -> Option<u64> {
        let mut cost = 0u64;
        let mut f = ext;
        while f < ext + n {
            match self.phys.kind_of(f) {
                FrameKind::Free => {
                    // Skip a whole free block at once (free blocks are aligned: one that starts
                    // here lies inside the extent or covers it).
                    f += if self.phys.is_head(f) { 1u64 << self.phys.order_at(f) } else { 1 };
                    continue;
                }
                FrameKind::File => {
                    if self.phys.reservs.is_member(f) {
                        return None; // it would go back to its reservation, not to the buddy lists
                    }
                    let (file, index) = self.phys.owner(f).as_file()?;
                    if self.files.cache.inactive_page(file, index).is_none() || self.files.mappers.contains_key(&f) {
                        return None;
                    }
                    cost += 1;
                }
                _ => return None,
            }
            f += 1;
        }
        Some(cost)
    }

    /// Mechanism (wired-page clustering): one wired frame from the current pool, setting aside
    /// a new pool when it is used up. Falls back to any free frame when no pool-sized extent is
    /// free. None if memory is full.
    pub fn alloc_wired_clustered(&mut self) -> Option<u64> {
        let (next, end) = self.wired.pool;
        if next < end {
            self.wired.pool.0 += 1;
            return Some(next);
        }
        let order = pool_order(self);
        if let Some(p) = self.phys.alloc(Order(order), FrameKind::Wired) {
            self.phys.split_allocation(p, Order(0));
            self.daemon.wired_pools += 1;
            self.wired.pool = (p.0 + 1, p.0 + (1u64 << order));
            return Some(p.0);
        }
        let p = self.phys.alloc(Order(0), FrameKind::Wired)?;
        self.phys.set_owner(Pfn(p.0), Owner::NONE);
        Some(p.0)
    }
}
