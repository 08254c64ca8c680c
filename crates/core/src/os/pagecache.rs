//! The page cache: file contents held in frames (kind File), which outlive the processes that
//! read them, and their reclaim under memory pressure.
//!
//! Invariants (checked by `Os::validate`): a cached page's frame is an order-0 File block whose
//! reverse map names (file, index); every File frame is cached exactly once; the CLOCK queue
//! holds every cached page at least once (stale entries, left behind by an eviction or a
//! migration, are skipped when the hand reaches them).
//!
//! Reclaim is CLOCK (second chance) over cached pages, the approximation of LRU kernels use: a
//! page read since the hand last passed it is spared once. Clean pages are dropped; dirty pages
//! are written back first (counted, with their I/O). Reclaim frees SWAP_CLUSTER_MAX = 32 pages
//! per call (include/linux/swap.h), as direct reclaim does.

use super::frames::{FrameKind, Owner, PhysMem, NIL};
use std::collections::HashMap;
use crate::units::{Order, Pfn};
use std::collections::VecDeque;

/// Pages reclaimed per call (Linux SWAP_CLUSTER_MAX, include/linux/swap.h).
pub const SWAP_CLUSTER_MAX: usize = 32;

#[derive(Clone, Debug, Default)]
pub struct File {
    /// Frame of each cached page (NIL: not cached), indexed by page.
    pages: Vec<u32>,
    /// Per page: referenced since the hand passed (bit 0), dirty (bit 1).
    flags: Vec<u8>,
    pub open: u32,
}

const REFERENCED: u8 = 1;
const DIRTY: u8 = 2;

#[derive(Clone, Debug, Default)]
pub struct PageCacheCounters {
    pub hits: u64,
    pub misses: u64,
    pub evicted: u64,
    pub written_back: u64,
    pub reclaim_calls: u64,
    /// Cached pages made inactive (reference bit cleared) when their file's last opener closed
    /// it (Navarro et al.'s change to FreeBSD's page daemon; asked for by the policy).
    pub deactivated_on_close: u64,
}

#[derive(Default)]
pub struct PageCache {
    pub files: Vec<File>,
    clock: VecDeque<(u32, u64)>,
    pub counters: PageCacheCounters,
    pub cached: u64,
}

impl PageCache {
    /// A new file id.
    pub fn create(&mut self) -> u32 {
        self.files.push(File::default());
        (self.files.len() - 1) as u32
    }

    pub fn frame_of(&self, file: u32, index: u64) -> Option<u64> {
        let f = self.files.get(file as usize)?;
        f.pages.get(index as usize).copied().filter(|&p| p != NIL).map(|p| p as u64)
    }

    /// Read (or write) page `index` of `file`: a hit marks it referenced; a miss allocates a
    /// frame, reclaiming if memory is short, and first whenever free frames are at or below
    /// `reserve` (the page cache grows only above the low watermark; `u64::MAX`: never).
    /// Returns false if no frame could be had.
    #[allow(clippy::too_many_arguments)]
    pub fn access_with(&mut self, phys: &mut PhysMem, mapped: &HashMap<u64, Vec<Owner>>, file: u32, index: u64, write: bool, reserve: u64) -> bool {
        if reserve != u64::MAX && phys.available_frames() <= reserve && self.cached > 0 {
            self.reclaim(phys, mapped, SWAP_CLUSTER_MAX);
        }
        let f = &mut self.files[file as usize];
        let i = index as usize;
        if i < f.pages.len() && f.pages[i] != NIL {
            f.flags[i] |= REFERENCED | if write { DIRTY } else { 0 };
            self.counters.hits += 1;
            return true;
        }
        self.counters.misses += 1;
        let pfn = match phys.alloc_or_unreserve(Order(0), FrameKind::File) {
            Some(p) => p,
            None => {
                self.reclaim(phys, mapped, SWAP_CLUSTER_MAX);
                match phys.alloc(Order(0), FrameKind::File) {
                    Some(p) => p,
                    None => return false,
                }
            }
        };
        phys.set_owner(pfn, Owner::file(file, index));
        let f = &mut self.files[file as usize];
        if f.pages.len() <= i {
            f.pages.resize(i + 1, NIL);
            f.flags.resize(i + 1, 0);
        }
        f.pages[i] = pfn.0 as u32;
        f.flags[i] = if write { DIRTY } else { 0 };
        self.clock.push_back((file, index));
        self.cached += 1;
        true
    }

    /// Make every cached page of `file` inactive: the next reclaim takes them first.
    pub fn deactivate(&mut self, file: u32) {
        let f = &mut self.files[file as usize];
        for (i, fl) in f.flags.iter_mut().enumerate() {
            if f.pages[i] != NIL {
                *fl &= !REFERENCED;
                self.counters.deactivated_on_close += 1;
            }
        }
    }

    /// Evict up to `want` pages by CLOCK. Returns how many were freed. Pages mapped into a
    /// process (`mapped`) are kept, as if referenced: the model does not unmap them to evict.
    pub fn reclaim(&mut self, phys: &mut PhysMem, mapped: &HashMap<u64, Vec<Owner>>, want: usize) -> usize {
        self.counters.reclaim_calls += 1;
        let mut freed = 0;
        // Each live page is passed at most twice (once to clear its bit, once to evict).
        let mut budget = 2 * self.clock.len();
        while freed < want && budget > 0 {
            budget -= 1;
            let Some((file, index)) = self.clock.pop_front() else { break };
            let f = &mut self.files[file as usize];
            let i = index as usize;
            if i >= f.pages.len() || f.pages[i] == NIL {
                continue; // stale
            }
            if f.flags[i] & REFERENCED != 0 || mapped.contains_key(&(f.pages[i] as u64)) {
                f.flags[i] &= !REFERENCED;
                self.clock.push_back((file, index));
                continue;
            }
            if f.flags[i] & DIRTY != 0 {
                self.counters.written_back += 1;
            }
            let pfn = f.pages[i] as u64;
            f.pages[i] = NIL;
            f.flags[i] = 0;
            phys.free(Pfn(pfn), Order(0));
            self.cached -= 1;
            self.counters.evicted += 1;
            freed += 1;
        }
        freed
    }

    /// Mark a cached page dirty (a write through a shared file mapping).
    pub fn mark_dirty(&mut self, file: u32, index: u64) {
        if let Some(f) = self.files.get_mut(file as usize) {
            if let Some(fl) = f.flags.get_mut(index as usize) {
                *fl |= DIRTY | REFERENCED;
            }
        }
    }

    /// A cached page moved to another frame (compaction).
    pub fn moved(&mut self, file: u32, index: u64, to: u64) {
        self.files[file as usize].pages[index as usize] = to as u32;
    }

    /// Every cached page as (file, index, frame).
    pub fn pages(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.files.iter().enumerate().flat_map(|(fi, f)| {
            f.pages.iter().enumerate().filter(|(_, &p)| p != NIL).map(move |(i, &p)| (fi as u32, i as u64, p as u64))
        })
    }
}
