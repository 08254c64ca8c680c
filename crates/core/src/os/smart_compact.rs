//! Smart compaction (Trident, §5.4 and Figure 8b; the authors' `trident_compaction` branch):
//! free one largest-block region (1GB on x86) by choosing where to copy from, rather than
//! scanning memory in address order as Linux's compaction does (os/compact.rs).
//!
//! One request runs up to `retries` attempts. Each attempt:
//! 1. **Source**: the region with the most free frames among those with no pinned frame
//!    (`PhysMem::region_unmovable`), other than the previous attempt's source, and not chosen
//!    within `cooldown` (the kernel's 120 ms `compaction_timeout`: a region chosen recently
//!    and still not free "may have some pinned pages"). Its choice time is recorded.
//! 2. The source's allocated blocks are checked before anything moves: a block compaction
//!    cannot take (a reservation's frames, a file superpage's frames, an unowned block) ends
//!    the attempt with nothing copied (`Unmovable`). The kernel learns this while migrating;
//!    the model knows it from the frame table and says so here rather than waste the copies.
//! 3. **Targets**: the regions with the fewest free frames (but some), fullest first; each
//!    block of the source is copied into a free block of its size in the current target,
//!    moving to the next-fullest region when one runs out.
//! 4. The source's last block leaving lets the buddy allocator merge the region: one free
//!    block of the largest order.
//!
//! Costs: every block copied is counted like Linux compaction's (`compact.pages_migrated`,
//! `compact.bytes_migrated`, `copy.bytes_*`); the outcome says how many bytes this request
//! copied and how many regions it freed.
//!
//! Not modelled: the kernel's early abort when more than 512 free 2MB blocks exist and the
//! source still has free frames it could not isolate. In this model a source's free frames
//! stay in the buddy lists, targets are chosen in other regions, so there is nothing left to
//! isolate and the abort would never fire.

use super::frames::FrameKind;
use super::Os;
use crate::mmu::Mmu;

outcome! {
    /// How a smart compaction request ended.
    pub enum SmartResult {
        /// A free block of the largest order exists (made by this request, or already there).
        Success => "success",
        /// No region qualifies as a source (each has a pinned frame, was the last source, or
        /// was chosen within the cooldown).
        NoSource => "no_source",
        /// The other regions' free frames cannot hold the source's occupied ones.
        NoTarget => "no_target",
        /// The last attempt's source held a block compaction cannot move.
        Unmovable => "unmovable",
        /// Every attempt was used without freeing a region.
        RetriesExhausted => "retries_exhausted",
    }
}

/// The knobs of smart compaction.
#[derive(Clone, Copy, Debug)]
pub struct SmartLimits {
    /// Source-to-target attempts per request (the artifact's `smart_compaction_retries` = 5).
    pub retries: u32,
    /// Simulated cycles during which a chosen source is not chosen again.
    pub cooldown: u64,
}

/// What one request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmartOutcome {
    pub result: SmartResult,
    pub attempts: u32,
    pub bytes_copied: u64,
    pub regions_freed: u32,
}

impl Os {
    /// Mechanism: smart compaction for a free block of the largest order, at simulated time
    /// `now` (see the module comment).
    pub fn smart_compact(&mut self, now: u64, lim: SmartLimits, mmu: &mut Mmu) -> SmartOutcome {
        let order = self.phys.max_order();
        let span = 1u64 << order;
        let mut out = SmartOutcome { result: SmartResult::RetriesExhausted, attempts: 0, bytes_copied: 0, regions_freed: 0 };
        let mut previous = None;
        let whole = |os: &Os, r: usize| (r as u64 + 1) * span <= os.phys.total_frames();
        for _ in 0..lim.retries.max(1) {
            if self.phys.largest_free_order().is_some_and(|o| o >= order) {
                out.result = SmartResult::Success;
                return out;
            }
            let cooled = |r: usize| {
                let t = self.phys.region_chosen_at(r);
                t == 0 || now.saturating_sub(t) >= lim.cooldown
            };
            let source = (0..self.phys.regions())
                .filter(|&r| whole(self, r) && self.phys.region_unmovable(r) == 0 && Some(r) != previous && cooled(r))
                .max_by_key(|&r| (self.phys.region_free(r), std::cmp::Reverse(r)));
            let Some(src) = source else {
                out.result = SmartResult::NoSource;
                return out;
            };
            out.attempts += 1;
            previous = Some(src);
            // Time 0 means "never chosen": a request at time 0 records 1.
            self.phys.note_region_chosen(src, now.max(1));
            let start = src as u64 * span;
            let Some(blocks) = self.movable_blocks(start, span) else {
                out.result = SmartResult::Unmovable;
                continue;
            };
            let occupied: u64 = blocks.iter().map(|&(_, o)| 1u64 << o).sum();
            let room: u64 = (0..self.phys.regions()).filter(|&r| r != src).map(|r| self.phys.region_free(r)).sum();
            if room < occupied {
                out.result = SmartResult::NoTarget;
                return out;
            }
            let mut targets: Vec<usize> = (0..self.phys.regions()).filter(|&r| r != src && self.phys.region_free(r) > 0).collect();
            targets.sort_by_key(|&r| (self.phys.region_free(r), r));
            let mut pool: Vec<(u64, u8)> = Vec::new();
            let mut next_target = 0;
            let mut stuck = false;
            for &(b, o) in &blocks {
                let dst = loop {
                    if let Some(d) = take_fitting(&mut self.phys, &mut pool, o) {
                        break Some(d);
                    }
                    // This target is used up (or holds no block big enough): the next-fullest.
                    let Some(&t) = targets.get(next_target) else { break None };
                    next_target += 1;
                    pool = self.free_blocks_in(t as u64 * span, span);
                };
                let Some(dst) = dst else {
                    stuck = true;
                    break;
                };
                self.migrate_block(b, o, dst, mmu);
                out.bytes_copied += self.base.bytes() << o;
            }
            if !stuck && self.phys.region_free(src) == span {
                out.regions_freed += 1;
                out.result = SmartResult::Success;
                return out;
            }
            out.result = if stuck { SmartResult::NoTarget } else { SmartResult::RetriesExhausted };
        }
        if self.phys.largest_free_order().is_some_and(|o| o >= order) {
            out.result = SmartResult::Success;
        }
        out
    }

    /// The allocated blocks of frames [start, start + n), if compaction can move every one.
    fn movable_blocks(&self, start: u64, n: u64) -> Option<Vec<(u64, u8)>> {
        let mut blocks = Vec::new();
        let mut f = start;
        while f < start + n {
            let o = self.phys.order_at(f);
            if self.phys.kind_of(f) != FrameKind::Free {
                if !self.compaction_may_move(f) {
                    return None;
                }
                blocks.push((f, o));
            }
            f += 1u64 << o;
        }
        Some(blocks)
    }

    /// The free blocks of frames [start, start + n), as (head, order).
    fn free_blocks_in(&self, start: u64, n: u64) -> Vec<(u64, u8)> {
        let mut free = Vec::new();
        let mut f = start;
        while f < start + n {
            let o = self.phys.order_at(f);
            if self.phys.kind_of(f) == FrameKind::Free {
                free.push((f, o));
            }
            f += 1u64 << o;
        }
        free
    }
}

/// Allocate a block of order `o` out of the smallest pooled free block that holds one; the
/// rest of that block goes back to the pool as the buddies the split leaves.
fn take_fitting(phys: &mut super::frames::PhysMem, pool: &mut Vec<(u64, u8)>, o: u8) -> Option<u64> {
    let i = (0..pool.len()).filter(|&i| pool[i].1 >= o).min_by_key(|&i| pool[i].1)?;
    let (p, po) = pool.swap_remove(i);
    let ok = phys.alloc_at(p, o, FrameKind::Anon);
    debug_assert!(ok, "a pooled block was not free");
    for k in o..po {
        pool.push((p + (1u64 << k), k));
    }
    Some(p)
}
