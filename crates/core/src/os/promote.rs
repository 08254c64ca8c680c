//! Promotion in place and demotion: the mechanisms reservation-based systems (Navarro et al.)
//! and Trident use alongside promotion by copy (os/compact.rs `collapse`).
//!
//! - Promote in place: a range whose base pages (or smaller pages) are all mapped, unshared,
//!   and already sit in physically contiguous, aligned frames is remapped as one page of the
//!   larger size; the frames' allocations are joined. Only page-table entries change.
//! - Demote: a page is split into pages of a smaller size, each mapping its part of the old
//!   frames; the allocation is split so each piece can be freed, moved or evicted alone.
//!
//! Every attempt returns a typed outcome, counted.

use super::frames::{FrameKind, Owner};
use super::{MapOutcome, Os};
use crate::mmu::Mmu;
use crate::units::{Order, Pfn};

outcome! {
    pub enum PromoteResult {
        Promoted => "promoted",
        /// Some base page of the range is not mapped.
        NotFullyPopulated => "not_fully_populated",
        /// The frames are not contiguous and aligned (a copy would be needed).
        NotContiguous => "not_contiguous",
        /// The range is not inside one VMA.
        CrossesVma => "crosses_vma",
        /// Already mapped by a page of this size or larger.
        AlreadyLarger => "already_larger",
        /// Some page is shared with another process (copy-on-write) or with the page cache.
        Shared => "shared",
    }
}

outcome! {
    /// Why a superpage was demoted (one size down per step): every change to part of a
    /// superpage's PTEs needs one (for the ARM contiguous bit, with break-before-make).
    pub enum DemoteReason {
        /// mprotect changed part of it.
        Protection => "protection",
        /// munmap (or a shrinking mremap or brk) removed part of it.
        PartialUnmap => "partial_unmap",
        /// A write to a clean file superpage, under `dirty=demote`.
        Dirty => "dirty",
        /// Reclaim evicts part of it.
        Reclaim => "reclaim",
        /// A write to a shared copy-on-write superpage found no block of its size: the
        /// writer's copy is made of base pages.
        Cow => "cow",
        /// Navarro et al.'s speculative demotion under memory pressure.
        Speculative => "speculative",
        /// Compaction found no free block of its size to move it to, and moves its base pages
        /// instead (Linux's migrate_pages splits a large folio on -ENOMEM).
        Compaction => "compaction",
    }
}

outcome! {
    pub enum DemoteResult {
        Demoted => "demoted",
        /// Nothing of a larger size is mapped there.
        NotMapped => "not_mapped",
        /// Shared with another process: demoting one mapping would split the block under it.
        Shared => "shared",
    }
}

crate::counters! {
    /// Promotions and demotions in place by outcome, mTHP folio allocations by order, and the
    /// PTEs they rewrote.
    #[derive(Clone, Debug, Default)]
    pub struct PromoteCounters {
        pub promote: [u64; PromoteResult::ALL.len()] = by_hand,
        pub demote: [u64; DemoteResult::ALL.len()] = by_hand,
        /// Demotion steps done, by reason and by the size index demoted from.
        pub demote_by: [[u64; crate::mmu::MAX_SIZES]; DemoteReason::ALL.len()] = by_hand,
        /// mTHP folios mapped, and attempts that fell back, per order.
        pub folio_alloc: [u64; 21] = by_hand,
        pub folio_fallback: [u64; 21] = by_hand,
        /// Base pages covered by in-place promotions: the PTEs a page table that replicates a
        /// superpage's PTE in every base slot (Alpha, Navarro et al. §A.2.6) rewrites, so the
        /// promotion cost that is linear in superpage size.
        pub promote_ptes: u64 = "promote_in_place.ptes_covered",
        /// Base pages covered by demotions (each step rewrites the PTEs of the page it splits).
        pub demote_ptes: u64 = "demote.ptes_covered",
    }
}

impl Os {
    /// Mechanism: map an mTHP folio: one naturally aligned block of 2^`order` base frames for
    /// [start, start + 2^order base pages), mapped by base PTEs (Linux's alloc_anon_folio on
    /// x86). The range must lie inside `within` and be entirely unmapped. Counted per order.
    pub fn map_folio(&mut self, pi: usize, start: u64, order: u8, within: (u64, u64), mmu: &mut Mmu) -> super::MapOutcome {
        use super::MapOutcome;
        let base = self.base.bytes();
        let len = base << order;
        let out = (|| {
            if start < within.0 || start + len > within.1 {
                return MapOutcome::CrossesVma;
            }
            let mut v = Vec::new();
            self.procs[pi].pt.pages_in_range(start, len, &mut v);
            if !v.is_empty() || self.swapped_overlaps(pi, start, start + len) {
                return MapOutcome::OverlapsMapping;
            }
            let Some(pfn) = self.phys.alloc(Order(order), super::frames::FrameKind::Anon) else {
                return MapOutcome::NoContiguousExtent;
            };
            let vpn = start >> self.base.shift();
            self.phys.set_owner(pfn, Owner::anon(pi, vpn));
            self.phys.split_allocation(pfn, Order(0));
            for k in 0..1u64 << order {
                let ok = self.procs[pi].pt.map(start + k * base, 0, Pfn(pfn.0 + k));
                debug_assert!(ok);
                if self.swap.enabled() {
                    let r = self.page_ref(pi, start + k * base, 0);
                    self.replacement.on_insert(r);
                }
            }
            self.procs[pi].resident[0] += 1u64 << order;
            self.counters.zeroed_bytes += len;
            if !self.settle_pt_with(pi, Some(mmu)) {
                self.pt_oom = true;
            }
            if self.phys.available_frames() < self.watermarks.1 {
                self.kswapd(mmu);
            }
            MapOutcome::Mapped
        })();
        let o = (order as usize).min(self.promotions.folio_alloc.len() - 1);
        if out == MapOutcome::Mapped {
            self.promotions.folio_alloc[o] += 1;
        } else {
            self.promotions.folio_fallback[o] += 1;
        }
        out
    }

    /// Mechanism: promote [start, start + size of `si`) of process `pi` in place.
    pub fn promote_in_place(&mut self, pi: usize, start: u64, si: u32, mmu: &mut Mmu) -> PromoteResult {
        let r = self.promote_inner(pi, start, si, mmu);
        self.promotions.promote[r as usize] += 1;
        if r == PromoteResult::Promoted {
            self.promotions.promote_ptes += 1 << self.order_of(si).0;
        }
        r
    }

    fn promote_inner(&mut self, pi: usize, start: u64, si: u32, mmu: &mut Mmu) -> PromoteResult {
        let size = self.sizes[si as usize].bytes();
        match self.procs[pi].find_vma(start) {
            Some(v) if v.start <= start && start + size <= v.end => {
                if v.file.is_some() {
                    return PromoteResult::Shared; // page-cache pages: file THP is not modelled
                }
            }
            _ => return PromoteResult::CrossesVma,
        }
        let mut pages = Vec::new();
        self.procs[pi].pt.pages_in_range(start, size, &mut pages);
        if pages.iter().any(|t| t.size_idx >= si) {
            return PromoteResult::AlreadyLarger;
        }
        let mapped: u64 = pages.iter().map(|t| self.sizes[t.size_idx as usize].bytes()).sum();
        if mapped != size {
            return PromoteResult::NotFullyPopulated;
        }
        // Write-protected pieces are shared copy-on-write, except the clean pieces of a demoted
        // superpage under AMSQM, which are this process's own.
        let clean_ok = self.swap.enabled() && self.replacement.demote_on_write();
        if pages.iter().any(|t| (t.cow && !clean_ok) || self.phys.owner(t.pfn.0) == Owner::SHARED) {
            return PromoteResult::Shared;
        }
        let order = self.order_of(si);
        let first = pages[0].pfn.0;
        let shift = self.base.shift();
        if first & ((1u64 << order.0) - 1) != 0 || pages.iter().any(|t| t.pfn.0 != first + ((t.start - start) >> shift)) {
            return PromoteResult::NotContiguous;
        }
        if !self.phys.merge_allocation(Pfn(first), order) {
            return PromoteResult::NotContiguous;
        }
        self.take_down_for_promotion(pi, start, size, mmu);
        self.install_large_page(pi, start, si, Pfn(first), mmu);
        PromoteResult::Promoted
    }

    /// Unmap the smaller pages in [start, start + size) that a promotion replaces: TLB entries,
    /// resident and write-protection counts, and replacement (which does not track page-cache
    /// frames).
    pub(crate) fn take_down_for_promotion(&mut self, pi: usize, start: u64, size: u64, mmu: &mut Mmu) {
        let asid = self.procs[pi].asid;
        let mut gone = Vec::new();
        self.procs[pi].pt.unmap_range(start, size, &mut gone);
        for t in &gone {
            mmu.invalidate(t.start, asid, t.size_idx);
            self.procs[pi].resident[t.size_idx as usize] -= 1;
            self.procs[pi].cow_pages -= t.cow as u64;
            if self.swap.enabled() && !self.is_file_frame(t.pfn.0) {
                let r = self.page_ref(pi, t.start, t.size_idx);
                self.replacement.on_remove(r);
            }
        }
    }

    /// After process `pi`'s pages changed size (a promotion or demotion, now mapping size `si`):
    /// page-table frames, and the page-walk caches that cached the old tables.
    pub(crate) fn settle_after_resize(&mut self, pi: usize, si: u32, mmu: &mut Mmu) {
        self.settle_pt_with(pi, Some(mmu));
        mmu.flush_pwc();
        mmu.live_sizes |= 1 << si;
    }

    /// Map the block at `pfn` as one page of size `si` at `start`, where the smaller pages
    /// were just taken down (a promotion, in place or by copy): owner, counters, replacement,
    /// page-table frames, and the page-walk caches that cached the old tables.
    pub(crate) fn install_large_page(&mut self, pi: usize, start: u64, si: u32, pfn: Pfn, mmu: &mut Mmu) {
        let ok = self.procs[pi].pt.map(start, si, pfn);
        debug_assert!(ok, "promotion target still mapped after unmapping it");
        self.phys.set_owner(pfn, Owner::anon(pi, start >> self.base.shift()));
        self.procs[pi].resident[si as usize] += 1;
        if self.swap.enabled() {
            let r = self.page_ref(pi, start, si);
            self.replacement.on_insert(r);
            if si > 0 && self.replacement.demote_on_write() {
                // A clean superpage (AMSQM): write-protected, so that the first write is seen
                // and demotes it (cow_break).
                self.procs[pi].pt.set_cow(start, si, true);
                self.procs[pi].cow_pages += 1;
            }
        }
        self.settle_after_resize(pi, si, mmu);
    }

    /// Mechanism: demote the page mapping `va` in process `pi` into pages of size `to`.
    pub fn demote(&mut self, pi: usize, va: u64, to: u32, why: DemoteReason, mmu: &mut Mmu) -> DemoteResult {
        let before = self.procs[pi].pt.lookup(va).map(|t| t.size_idx);
        let r = self.demote_inner(pi, va, to, mmu);
        self.promotions.demote[r as usize] += 1;
        if let (DemoteResult::Demoted, Some(si)) = (r, before) {
            self.promotions.demote_ptes += 1 << self.order_of(si).0;
            self.promotions.demote_by[why as usize][si as usize] += 1;
        }
        r
    }

    fn demote_inner(&mut self, pi: usize, va: u64, to: u32, mmu: &mut Mmu) -> DemoteResult {
        let Some(t) = self.procs[pi].pt.lookup(va).filter(|t| t.size_idx > to) else {
            return DemoteResult::NotMapped;
        };
        if self.phys.owner(t.pfn.0) == Owner::SHARED {
            return DemoteResult::Shared;
        }
        let size = self.sizes[t.size_idx as usize].bytes();
        let piece = self.sizes[to as usize].bytes();
        let asid = self.procs[pi].asid;
        let mut gone = Vec::new();
        self.procs[pi].pt.unmap_range(t.start, size, &mut gone);
        mmu.invalidate(t.start, asid, t.size_idx);
        self.procs[pi].resident[t.size_idx as usize] -= 1;
        // A file superpage maps order-0 page-cache frames that replacement does not track.
        let file = self.is_file_frame(t.pfn.0);
        if self.swap.enabled() && !file {
            let r = self.page_ref(pi, t.start, t.size_idx);
            self.replacement.note_demotion(r);
            self.replacement.on_remove(r);
        }
        if !file {
            self.phys.split_allocation(t.pfn, Order(self.order_of(to).0));
        }
        let step = piece >> self.base.shift();
        for k in 0..size / piece {
            let s = t.start + k * piece;
            let ok = self.procs[pi].pt.map(s, to, Pfn(t.pfn.0 + k * step));
            debug_assert!(ok);
            if t.cow {
                self.procs[pi].pt.set_cow(s, to, true);
            }
            self.procs[pi].resident[to as usize] += 1;
            if self.swap.enabled() && !file {
                let r = self.page_ref(pi, s, to);
                self.replacement.on_insert(r);
            }
        }
        if t.cow {
            self.procs[pi].cow_pages += size / piece - 1;
        }
        self.settle_after_resize(pi, to, mmu);
        DemoteResult::Demoted
    }
}

impl Os {
    /// Mechanism: reserve the aligned extent of page size `si` that contains `va`, for process
    /// `pi`, and map `va`'s base page from it (the frame at the matching offset). Returns the
    /// reservation, or why it could not be made.
    pub fn reserve_and_map(&mut self, pi: usize, va: u64, si: u32, now: u64, mmu: &mut Mmu) -> std::result::Result<u32, MapOutcome> {
        let size = self.sizes[si as usize].bytes();
        let start = va & !(size - 1);
        let owner = Owner::anon(pi, start >> self.base.shift());
        let Some((id, _)) = self.phys.reserv_create(self.order_of(si), owner, now) else {
            return Err(MapOutcome::NoContiguousExtent);
        };
        match self.map_from_reservation(pi, va, id, now, mmu) {
            MapOutcome::Mapped => Ok(id),
            // The frame went back to the reservation, which, empty, returned to the allocator.
            other => Err(other),
        }
    }

    /// Mechanism: map `va`'s base page of process `pi` from reservation `id`.
    pub fn map_from_reservation(&mut self, pi: usize, va: u64, id: u32, now: u64, mmu: &mut Mmu) -> MapOutcome {
        let shift = self.base.shift();
        let Some(r) = self.phys.reservs.get(id) else { return MapOutcome::NoContiguousExtent };
        let Some((rpi, vpn)) = r.owner.as_anon() else { return MapOutcome::NoContiguousExtent };
        let page = va >> shift;
        if rpi != pi || page < vpn || page - vpn >= r.frames() {
            return MapOutcome::CrossesVma;
        }
        let Some(pfn) = self.phys.reserv_alloc(id, page - vpn, FrameKind::Anon, now) else {
            return MapOutcome::OverlapsMapping;
        };
        self.map_fresh_frames(pi, page << shift, 0, pfn, mmu)
    }
}
