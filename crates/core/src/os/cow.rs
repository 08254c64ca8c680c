//! fork with copy-on-write, and the reverse map of shared pages.
//!
//! A block mapped by one process has that mapping as its owner in the frame table. After fork
//! both parent and child map every page of the parent, write-protected (the COW bit of the
//! page-table entry); the block's owner becomes `Owner::SHARED` and `Os::shared` lists every
//! mapping. A write to a COW page breaks the sharing: if the writer is the last mapper it simply
//! takes the page back (Linux's reuse); otherwise it gets a copy. A superpage is copied whole at
//! its size, as Linux did before 5.8 (do_huge_pmd_wp_page allocated a new THP); when no block of
//! that size is free, or the policy asks for it (`OsFeatures::cow_splits`, FreeBSD's behaviour),
//! the writer's copy is made of base pages instead, counted as a `cow` demotion.
//!
//! Invariants (checked by `Os::validate`): a SHARED block's list has at least two mappings, each
//! of which maps the block; a block with a single mapping has that mapping as its owner; a COW
//! entry maps a block (shared or, after the other mappers left, not).

use super::frames::{FrameKind, Owner};
use super::pagetable::Translation;
use super::{MapOutcome, Os};
use crate::error::Result;
use crate::mmu::Mmu;
use crate::units::Pfn;

/// Every mapping of a block, owned so that the caller may change the OS while it walks them.
/// A block mapped once, the usual case (every swap-out's victim), needs no list.
pub enum Mappers {
    One([Owner; 1]),
    Many(Vec<Owner>),
}

impl std::ops::Deref for Mappers {
    type Target = [Owner];
    fn deref(&self) -> &[Owner] {
        match self {
            Mappers::One(o) => o,
            Mappers::Many(v) => v,
        }
    }
}

impl Os {
    /// Every mapping of the block at `pfn`.
    pub fn mappers(&self, pfn: u64) -> Mappers {
        let o = self.phys.owner(pfn);
        if o == Owner::SHARED {
            Mappers::Many(self.shared.get(&pfn).cloned().unwrap_or_default())
        } else if o == Owner::NONE {
            Mappers::Many(Vec::new())
        } else {
            Mappers::One([o])
        }
    }

    fn add_mapper(&mut self, pfn: u64, m: Owner) {
        let o = self.phys.owner(pfn);
        if o == Owner::SHARED {
            self.shared.get_mut(&pfn).expect("shared block without a list").push(m);
        } else {
            self.shared.insert(pfn, vec![o, m]);
            self.phys.set_owner(Pfn(pfn), Owner::SHARED);
        }
    }

    /// Drop mapping `m` of the block at `pfn`. Returns true if it was the last one (the caller
    /// frees the block).
    pub(crate) fn remove_mapper(&mut self, pfn: u64, m: Owner) -> bool {
        let o = self.phys.owner(pfn);
        if o != Owner::SHARED {
            debug_assert_eq!(o, m, "unmapping a block through a mapping that does not own it");
            return true;
        }
        let list = self.shared.get_mut(&pfn).expect("shared block without a list");
        if let Some(i) = list.iter().position(|&x| x == m) {
            list.swap_remove(i);
        }
        if list.len() == 1 {
            let last = list[0];
            self.shared.remove(&pfn);
            self.phys.set_owner(Pfn(pfn), last);
        }
        false
    }

    /// Mapping `old` of the block at `pfn` is now `new` (mremap moved it).
    pub(crate) fn replace_mapper(&mut self, pfn: u64, old: Owner, new: Owner) {
        if self.phys.owner(pfn) == Owner::SHARED {
            if let Some(x) = self.shared.get_mut(&pfn).and_then(|l| l.iter_mut().find(|x| **x == old)) {
                *x = new;
            }
        } else {
            self.phys.set_owner(Pfn(pfn), new);
        }
    }

    /// Nothing is shared and nothing tracked (no copy-on-write sharing, no file page mapped, no
    /// swap): every mapped page owns its block outright, so freeing a page is freeing its block.
    pub(crate) fn pages_own_their_blocks(&self) -> bool {
        self.shared.is_empty() && self.files.mappers.is_empty() && !self.swap.enabled()
    }

    /// Pages removed from process `pi`'s page table: drop their mappings, free the blocks no
    /// one maps any more, keep the counters.
    pub(crate) fn release(&mut self, pi: usize, removed: &[Translation]) {
        // A buffer kept between calls: a swap-out releases one page, many times a second.
        let mut blocks = std::mem::take(&mut self.blocks_scratch);
        blocks.clear();
        if self.pages_own_their_blocks() {
            // The frame table need not be read page by page (a large unmap).
            for t in removed {
                self.procs[pi].resident[t.size_idx as usize] -= 1;
                self.procs[pi].cow_pages -= t.cow as u64;
                blocks.push((t.pfn.0, self.order_of(t.size_idx).0));
            }
            self.counters.pages_freed += blocks.len() as u64;
            self.phys.free_many(&mut blocks);
            self.blocks_scratch = blocks;
            return;
        }
        for t in removed {
            self.procs[pi].resident[t.size_idx as usize] -= 1;
            if t.cow {
                self.procs[pi].cow_pages -= 1;
            }
            let me = Owner::anon(pi, t.start >> self.base.shift());
            if self.is_file_frame(t.pfn.0) {
                // A file mapping: the pages stay in the page cache (a file superpage has a
                // reverse-map entry per base page).
                for k in 0..1u64 << self.order_of(t.size_idx).0 {
                    self.files.mappers.unlist(t.pfn.0 + k, Owner(me.0 + k));
                }
                continue;
            }
            if self.swap.enabled() {
                let r = self.page_ref(pi, t.start, t.size_idx);
                self.replacement.on_remove(r);
            }
            if self.remove_mapper(t.pfn.0, me) {
                blocks.push((t.pfn.0, self.order_of(t.size_idx).0));
            }
        }
        self.counters.pages_freed += blocks.len() as u64;
        self.phys.free_many(&mut blocks);
        self.blocks_scratch = blocks;
    }

    /// fork: the child `ci` gets the parent's VMAs and every page, both write-protected.
    pub(crate) fn fork_pages(&mut self, pi: usize, ci: usize, mmu: &mut Mmu) {
        let pages = self.procs[pi].pt.pages();
        let asid = self.procs[pi].asid;
        for t in &pages {
            let ok = self.procs[ci].pt.map(t.start, t.size_idx, t.pfn);
            debug_assert!(ok, "fork: child's page table already maps {:#x}", t.start);
            if self.is_file_frame(t.pfn.0) {
                // A file mapping: the child maps the same page-cache page, with the same
                // protection (shared mappings stay shared; private ones copy on write).
                if t.cow {
                    self.procs[ci].pt.set_cow(t.start, t.size_idx, true);
                    self.procs[ci].cow_pages += 1;
                }
                self.procs[ci].resident[t.size_idx as usize] += 1;
                let me = Owner::anon(ci, t.start >> self.base.shift());
                for k in 0..1u64 << self.order_of(t.size_idx).0 {
                    self.files.mappers.add(t.pfn.0 + k, Owner(me.0 + k));
                }
                continue;
            }
            self.procs[ci].pt.set_cow(t.start, t.size_idx, true);
            if !t.cow {
                self.procs[pi].pt.set_cow(t.start, t.size_idx, true);
                self.procs[pi].cow_pages += 1;
                // The parent's writable translation must go (Linux flushes the parent's TLB).
                mmu.invalidate(t.start, asid, t.size_idx);
            }
            self.procs[ci].cow_pages += 1;
            self.procs[ci].resident[t.size_idx as usize] += 1;
            if self.swap.enabled() {
                let r = self.page_ref(ci, t.start, t.size_idx);
                self.replacement.on_insert(r);
            }
            self.add_mapper(t.pfn.0, Owner::anon(ci, t.start >> self.base.shift()));
        }
        self.counters.pages_shared += pages.len() as u64;
        self.settle_pt_with(ci, Some(mmu));
    }

    /// A write by process `pi` to the COW page `t`. Returns false if memory ran out.
    pub fn cow_break(&mut self, pi: usize, t: Translation, va: u64, mmu: &mut Mmu) -> Result<bool> {
        if self.is_file_frame(t.pfn.0) {
            return Ok(self.file_write(pi, t, va, mmu));
        }
        let me = Owner::anon(pi, t.start >> self.base.shift());
        let asid = self.procs[pi].asid;
        mmu.invalidate(t.start, asid, t.size_idx);
        if self.phys.owner(t.pfn.0) != Owner::SHARED && t.size_idx > 0 && self.swap.enabled() && self.replacement.demote_on_write() {
            // A write to a clean superpage under AMSQM: demote it one size at a time around the
            // written page, so that only that base page becomes dirty; the other pieces stay
            // clean (write-protected) units of their sizes.
            let (start, si) = (t.start, t.size_idx);
            let mut t = t;
            while t.size_idx > 0 && self.demote(pi, va, t.size_idx - 1, super::promote::DemoteReason::Dirty, mmu) == super::promote::DemoteResult::Demoted {
                match self.procs[pi].pt.lookup(va) {
                    Some(n) => t = n,
                    None => return Ok(false),
                }
            }
            if t.size_idx < si && self.replacement.repromote_after_write() {
                // The seed checks for promotion at every request: the next reference to the
                // region promotes it again (Os::referenced).
                self.spec.regions.insert((self.procs[pi].pid, start), super::swap::Demoted::after_write(si));
            }
            if !t.cow {
                return Ok(true);
            }
            mmu.invalidate(t.start, asid, t.size_idx);
            self.procs[pi].pt.set_cow(t.start, t.size_idx, false);
            self.procs[pi].cow_pages -= 1;
            self.counters.cow_reuses += 1;
            return Ok(true);
        }
        if self.phys.owner(t.pfn.0) != Owner::SHARED {
            // The other mappers are gone: take the page back without copying.
            self.procs[pi].pt.set_cow(t.start, t.size_idx, false);
            self.procs[pi].cow_pages -= 1;
            self.counters.cow_reuses += 1;
            return Ok(true);
        }
        let order = self.order_of(t.size_idx);
        let bytes = self.sizes[t.size_idx as usize].bytes();
        // Page cache only (no swap) before falling back to base pages below. With `cow_splits`
        // a superpage goes straight to base pages; the model copies all of them at once, where
        // FreeBSD copies each when it is written (the copy cost is an upper bound).
        let split = self.features.cow_splits && t.size_idx > 0;
        let new = if split { None } else { self.alloc_reclaiming(order, FrameKind::Anon, None) };
        self.remove_mapper(t.pfn.0, me);
        self.procs[pi].cow_pages -= 1;
        self.counters.cow_copies += 1;
        self.compaction.bytes_copied_direct += bytes;
        match new {
            Some(p) => {
                self.procs[pi].pt.rewrite(t.start, t.size_idx, p, false);
                self.phys.set_owner(p, me);
            }
            None => {
                // No block of the page's size: the writer's copy is made of base pages.
                let mut gone = Vec::new();
                self.procs[pi].pt.unmap_range(t.start, bytes, &mut gone);
                self.procs[pi].resident[t.size_idx as usize] -= 1;
                if self.swap.enabled() {
                    let r = self.page_ref(pi, t.start, t.size_idx);
                    self.replacement.on_remove(r);
                }
                self.counters.cow_demoted += 1;
                self.promotions.demote_by[super::promote::DemoteReason::Cow as usize][t.size_idx as usize] += 1;
                let base = self.base.bytes();
                for k in 0..bytes / base {
                    let va = t.start + k * base;
                    match self.map_page(pi, va, 0, Os::ANYWHERE, mmu) {
                        MapOutcome::Mapped => {}
                        _ => return Ok(false),
                    }
                }
                // map_page counted zeroing; this memory is copied instead.
                self.counters.zeroed_bytes -= bytes;
            }
        }
        self.settle_pt_with(pi, Some(mmu));
        Ok(true)
    }
}
