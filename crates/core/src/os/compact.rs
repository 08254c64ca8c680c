//! Mechanisms that move memory: compaction (Linux's two-scanner algorithm, mm/compaction.c)
//! and promotion by copy (khugepaged's collapse, mm/khugepaged.c). Policies decide when; these
//! do the work, charge its cost and count every outcome.
//!
//! Compaction: a migrate scanner walks pageblocks upwards from the bottom of memory and isolates
//! movable allocated blocks, in batches of COMPACT_CLUSTER_MAX = 32 (include/linux/swap.h); a
//! free scanner walks pageblocks downwards from the top and isolates free blocks as targets.
//! Each isolated block is copied to a target, its mapping repointed and its TLB entries shot
//! down, and the old frames freed (merging with their buddies). The run stops as soon as a
//! free block of the requested order exists, or when the scanners meet. Like Linux's
//! asynchronous mode (used for THP faults and kcompactd), the migrate scanner only takes
//! pageblocks labelled movable, and the free scanner only targets movable pageblocks. The
//! scanners' positions persist between runs, and restart once they have met.

use super::frames::{FrameKind, MigrateType, Owner};
use super::promote::{DemoteReason, DemoteResult};
use super::Os;
use crate::mmu::Mmu;
use crate::units::{Order, Pfn};

/// Linux COMPACT_CLUSTER_MAX (= SWAP_CLUSTER_MAX, include/linux/swap.h): pages migrated per batch.
pub const COMPACT_CLUSTER_MAX: usize = 32;

outcome! {
    /// Why a compaction run ended (Linux's `enum compact_result`, the outcomes that apply here).
    pub enum CompactResult {
        /// A free block of the requested order exists now (or already did).
        Success => "success",
        /// The scanners met without producing one.
        Complete => "complete",
        /// Not worth trying: too few free frames for the order even if all were contiguous.
        Skipped => "skipped",
    }
}

outcome! {
    /// Why a collapse (promotion by copy) did or did not happen: khugepaged's `enum scan_result`
    /// (mm/khugepaged.c), the outcomes this model can produce.
    pub enum CollapseResult {
        Succeed => "succeed",
        /// No page table covers the range: nothing mapped (SCAN_PMD_NULL).
        PmdNull => "pmd_null",
        /// Already mapped by a page of the target size or larger (SCAN_PMD_MAPPED).
        PmdMapped => "pmd_mapped",
        /// More unmapped base pages than max_ptes_none (SCAN_EXCEED_NONE_PTE).
        ExceedNonePte => "exceed_none_pte",
        /// The aligned range is not inside one suitable VMA (SCAN_VMA_CHECK).
        VmaCheck => "vma_check",
        /// Part of the range is mapped by pages this collapse cannot take (SCAN_PAGE_COMPOUND).
        PageCompound => "page_compound",
        /// No free block of the target order, even after compaction (SCAN_ALLOC_HUGE_PAGE_FAIL).
        AllocHugePageFail => "alloc_huge_page_fail",
        /// More base pages shared with another process than max_ptes_shared (SCAN_EXCEED_SHARED_PTE).
        ExceedSharedPte => "exceed_shared_pte",
        /// More swapped-out base pages than max_ptes_swap (SCAN_EXCEED_SWAP_PTE).
        ExceedSwapPte => "exceed_swap_pte",
    }
}

/// khugepaged's limits on what a range may hold and still be collapsed, in base pages.
#[derive(Clone, Copy, Debug)]
pub struct CollapseLimits {
    pub max_none: u64,
    pub max_swap: u64,
    pub max_shared: u64,
    /// The new page may reach past its VMA into unmapped address space or other anonymous
    /// VMAs (Romer et al.'s potential superpages are aligned address ranges, not VMAs); a
    /// file mapping in the range still refuses (VmaCheck).
    pub past_vma: bool,
    /// Charge the copy of the whole new page, not only its mapped part (Romer et al.'s
    /// worst case: "we move all of the data into the contiguous memory").
    pub copy_whole: bool,
    /// How the contents of 2MB pages inside the range reach the new page.
    pub exchange: Exchange,
}

/// Trident-pv's copy-less promotion (Ram et al. §6; the authors' `trident_virt_hc` branch): a
/// guest promoting to 1GB asks the hypervisor to exchange the guest-physical 2MB mappings of
/// the old pages with those of the new block instead of copying them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// Copy everything (native Linux, Trident).
    Copy,
    /// Exchange by hypercall when more than one of the range's slots is a 2MB page (the
    /// authors' `nr_pmds > 1`); 4KB-mapped slots are still copied. `host_backs_2m`: the host
    /// maps guest memory with 2MB pages or larger, which a 2MB exchange needs; when it does not,
    /// the first hypercall fails entry by entry and the guest copies instead.
    Hypercall { host_backs_2m: bool },
}

/// Entries one exchange hypercall carries: a 4KB shared page of 8-byte frame numbers (the
/// authors' KVM_HC_EXCHANGE_PFN_RANGE takes lists of 512).
pub const EXCHANGE_BATCH: u64 = 512;

impl CollapseLimits {
    /// No limits: collapse whatever is there, inside its VMA.
    pub const ANY: CollapseLimits =
        CollapseLimits { max_none: u64::MAX, max_swap: u64::MAX, max_shared: u64::MAX, past_vma: false, copy_whole: false, exchange: Exchange::Copy };
}

crate::counters! {
    /// Persistent scanner positions and counters.
    #[derive(Clone, Debug, Default)]
    pub struct Compaction {
        /// Next pageblock the migrate scanner takes (frame number).
        migrate_pfn: u64 = not_a_counter,
        /// One past the last pageblock the free scanner has not yet taken (0 = top of memory).
        free_pfn: u64 = not_a_counter,
        pub runs: [u64; CompactResult::ALL.len()] = by_hand,
        pub pages_migrated: u64 = "compact.pages_migrated",
        pub bytes_migrated: u64 = "compact.bytes_migrated",
        /// Bytes copied (migration and collapse) by work the program waits for (direct
        /// compaction at a fault), and by daemons running beside it.
        pub bytes_copied_direct: u64 = "copy.bytes_direct",
        pub bytes_copied_background: u64 = "copy.bytes_background",
        pub bytes_zeroed_background: u64 = "os.zeroed_bytes_background",
        pub pageblocks_scanned: u64 = "compact.pageblocks_scanned",
        /// Pageblocks the migrate scanner passed over because they are not movable.
        pub pageblocks_skipped: u64 = "compact.pageblocks_skipped",
        /// Huge pages split into base pages because no free block of their size was left to
        /// migrate them to (Linux's `thp_split` from migrate_pages).
        pub splits: u64 = "compact.split",
        /// Collapses by outcome (CollapseResult index).
        pub collapse: [u64; CollapseResult::ALL.len()] = by_hand,
        /// Trident-pv's exchanges (`Exchange::Hypercall`): hypercalls made, 2MB mappings
        /// exchanged instead of copied, and entries the host refused (then copied).
        pub exchange_hypercalls: u64 = "compact.exchange_hypercalls",
        pub exchanged_pmds: u64 = "compact.exchanged_pmds",
        pub exchange_failed_pmds: u64 = "compact.exchange_failed_pmds",
    }
}

impl Os {
    /// Compact memory until a free block of `order` exists. `mmu` receives the shootdowns.
    pub fn compact(&mut self, order: u8, mmu: &mut Mmu) -> CompactResult {
        let r = self.compact_inner(order, mmu);
        self.compaction.runs[r as usize] += 1;
        r
    }

    fn compact_inner(&mut self, order: u8, mmu: &mut Mmu) -> CompactResult {
        if self.phys.largest_free_order().is_some_and(|o| o >= order) {
            return CompactResult::Success;
        }
        // Linux's compaction_suitable: free memory must exceed the request (plus a margin:
        // here the request again) before compaction can help.
        if self.phys.free_frames() < 2u64 << order {
            return CompactResult::Skipped;
        }
        let pbo = self.phys.pageblock_order();
        let pb = 1u64 << pbo;
        let total = self.phys.total_frames();
        let top = total & !(pb - 1);
        if self.compaction.free_pfn == 0 || self.compaction.free_pfn > top {
            self.compaction.free_pfn = top;
        }
        // Targets isolated by the free scanner: allocated blocks held aside (kind Anon, no owner).
        let mut pool: Vec<(u64, u8)> = Vec::new();
        let mut batch: Vec<(u64, u8)> = Vec::with_capacity(COMPACT_CLUSTER_MAX);
        let result = 'outer: loop {
            let m = self.compaction.migrate_pfn;
            if m + pb > self.compaction.free_pfn {
                // The scanners met: start over next time (Linux resets the cached positions).
                self.compaction.migrate_pfn = 0;
                self.compaction.free_pfn = top;
                break CompactResult::Complete;
            }
            self.compaction.pageblocks_scanned += 1;
            let pbi = (m >> pbo) as usize;
            if self.phys.pageblock_type(pbi) != MigrateType::Movable {
                self.compaction.pageblocks_skipped += 1;
                self.compaction.migrate_pfn += pb;
                continue;
            }
            // Isolate the movable blocks of this pageblock, smaller than the order sought.
            let mut f = m;
            let end = (m + pb).min(total);
            while f < end {
                let o = if self.phys.is_head(f) { self.phys.order_at(f) } else { 0 };
                if self.phys.is_head(f) && o < order && self.compaction_may_move(f) {
                    batch.push((f, o));
                }
                f += 1u64 << o;
                if batch.len() == COMPACT_CLUSTER_MAX || f >= end {
                    for &(src, so) in batch.iter() {
                        if !self.move_or_split(&mut pool, src, so, m + pb, mmu) {
                            // No target left between the scanners.
                            batch.clear();
                            self.compaction.migrate_pfn = self.compaction.free_pfn;
                            continue 'outer;
                        }
                    }
                    batch.clear();
                    if self.phys.largest_free_order().is_some_and(|lo| lo >= order) {
                        break 'outer CompactResult::Success;
                    }
                }
            }
            self.compaction.migrate_pfn += pb;
        };
        // Return the unused targets, and move the free scanner back up to the highest of them so
        // that the next run scans their pageblock again (Linux's compact_zone: "Release free
        // pages and update where the free scanner should restart, so we don't leave any
        // returned pages behind"; it only goes back, never forward). Without this the free
        // scanner would skip a pageblock's remaining free frames after every run: harmless with
        // 2MB pageblocks, a whole 1GB of targets with Trident's 1GB ones.
        if let Some(&(high, _)) = pool.iter().max_by_key(|&&(p, _)| p) {
            self.compaction.free_pfn = self.compaction.free_pfn.max((high & !(pb - 1)) + pb);
        }
        for (p, o) in pool {
            self.phys.free(Pfn(p), Order(o));
        }
        result
    }

    /// Allocate an anonymous block of `order` the way Linux's slow path does for a costly
    /// order with direct reclaim and compaction allowed: try; reclaim page cache until free
    /// memory reaches the compaction gap (2 << order frames, `compact_gap`); try again;
    /// compact; try again.
    pub fn alloc_compacting(&mut self, order: u8, mmu: &mut Mmu) -> Option<Pfn> {
        if let Some(p) = self.phys.alloc(Order(order), FrameKind::Anon) {
            return Some(p);
        }
        self.reclaim_for(order);
        if let Some(p) = self.phys.alloc(Order(order), FrameKind::Anon) {
            return Some(p);
        }
        if self.compact(order, mmu) == CompactResult::Success {
            return self.phys.alloc(Order(order), FrameKind::Anon);
        }
        None
    }

    /// Move the block at `src` (order `so`) to a target above `floor`. When no free block of
    /// its order is left, a huge page is split and its base pages moved one by one, as Linux's
    /// migrate_pages does when compaction_alloc has no folio of its order (-ENOMEM:
    /// try_split_folio, counted as a THP split). Returns false when the targets ran out.
    fn move_or_split(&mut self, pool: &mut Vec<(u64, u8)>, src: u64, so: u8, floor: u64, mmu: &mut Mmu) -> bool {
        if let Some(dst) = self.take_target(pool, so, floor) {
            self.migrate_block(src, so, dst, mmu);
            return true;
        }
        if so == 0 || pool.is_empty() || !self.split_for_compaction(src, mmu) {
            return false;
        }
        for piece in src..src + (1u64 << so) {
            let Some(dst) = self.take_target(pool, 0, floor) else { return false };
            self.migrate_block(piece, 0, dst, mmu);
        }
        true
    }

    /// Split the huge page whose block starts at `src` into base pages mapped in place, so that
    /// compaction can move them one at a time. Only a block mapped by one page of its own size
    /// and one process (not shared) can be split; returns whether it was.
    fn split_for_compaction(&mut self, src: u64, mmu: &mut Mmu) -> bool {
        let Some((pi, vpn)) = self.phys.owner(src).as_anon() else { return false };
        let va = vpn << self.base.shift();
        if self.procs[pi].pt.lookup(va).is_none_or(|t| t.pfn.0 != src || t.size_idx == 0) {
            return false;
        }
        let ok = self.demote(pi, va, 0, DemoteReason::Compaction, mmu) == DemoteResult::Demoted;
        self.compaction.splits += ok as u64;
        ok
    }

    /// Whether compaction may move the allocated block whose head is `f`: movable contents
    /// with an owner to repoint, outside any reservation (moving a frame would empty its slot
    /// in the extent) and not under a file superpage (whose frames must stay contiguous).
    pub(crate) fn compaction_may_move(&self, f: u64) -> bool {
        let k = self.phys.kind_of(f);
        k.movable() && self.phys.owner(f) != Owner::NONE && !self.phys.reservs.is_member(f) && !(k == FrameKind::File && self.file_frame_in_superpage(f))
    }

    /// Mechanism: direct reclaim of page cache until twice a block of `order` is free (Linux's
    /// margin before compaction can help), or nothing more can be reclaimed.
    pub fn reclaim_for(&mut self, order: u8) {
        let gap = 2u64 << order;
        while self.phys.free_frames() < gap {
            self.counters.direct_reclaims += 1;
            if self.files.cache.reclaim(&mut self.phys, &self.files.mappers, super::pagecache::SWAP_CLUSTER_MAX) == 0 {
                break;
            }
        }
    }

    /// A free target block of order `o` from the pool, running the free scanner down (not
    /// below `floor`) when the pool has none.
    fn take_target(&mut self, pool: &mut Vec<(u64, u8)>, o: u8, floor: u64) -> Option<u64> {
        loop {
            // Smallest pooled block that fits; split it down if larger.
            if let Some(i) = (0..pool.len()).filter(|&i| pool[i].1 >= o).min_by_key(|&i| pool[i].1) {
                let (p, po) = pool.swap_remove(i);
                if po > o {
                    self.phys.split_allocation(Pfn(p), Order(o));
                    let mut q = p + (1u64 << o);
                    while q < p + (1u64 << po) {
                        pool.push((q, o));
                        q += 1u64 << o;
                    }
                }
                return Some(p);
            }
            let pbo = self.phys.pageblock_order();
            let pb = 1u64 << pbo;
            if self.compaction.free_pfn < floor + pb {
                return None;
            }
            self.compaction.free_pfn -= pb;
            let start = self.compaction.free_pfn;
            if self.phys.pageblock_type((start >> pbo) as usize) != MigrateType::Movable {
                continue;
            }
            let mut f = start;
            while f < start + pb {
                match self.phys.free_block_containing(f) {
                    Some((head, ho)) if head >= start => {
                        let ok = self.phys.alloc_at(head, ho, FrameKind::Anon);
                        debug_assert!(ok);
                        pool.push((head, ho));
                        f = head + (1u64 << ho);
                    }
                    _ => f += if self.phys.is_head(f) { 1u64 << self.phys.order_at(f) } else { 1 },
                }
            }
        }
    }

    /// Move the movable block at `src` (order `o`) to the isolated target `dst`.
    pub(crate) fn migrate_block(&mut self, src: u64, o: u8, dst: u64, mmu: &mut Mmu) {
        let owner = self.phys.owner(src);
        if let Some((file, index)) = owner.as_file() {
            // A page-cache page: repoint the cache and every mapping of it.
            if let Some(list) = self.files.mappers.take(src) {
                for m in &list {
                    let (pi, vpn) = m.as_anon().expect("a mapping");
                    let va = vpn << self.base.shift();
                    let ok = self.procs[pi].pt.set_pfn(va, 0, Pfn(dst));
                    debug_assert!(ok, "file reverse map names an unmapped page");
                    mmu.invalidate(va, self.procs[pi].asid, 0);
                }
                self.files.mappers.put(dst, list);
            }
            self.phys.set_kind(Pfn(dst), FrameKind::File);
            self.phys.set_owner(Pfn(dst), owner);
            self.files.cache.moved(file, index, dst);
            self.phys.free(Pfn(src), Order(o));
            self.compaction.pages_migrated += 1;
            self.compaction.bytes_migrated += self.base.bytes() << o;
            self.note_copy(self.base.bytes() << o);
            return;
        }
        let si = self.size_index_of_order(o);
        // Repoint every mapping (several after fork) and shoot its translation down.
        for &m in self.mappers(src).iter() {
            let (pi, vpn) = m.as_anon().expect("compaction isolates only mapped or cached blocks");
            let va = vpn << self.base.shift();
            let ok = self.procs[pi].pt.set_pfn(va, si, Pfn(dst));
            debug_assert!(ok, "reverse map names an unmapped page");
            mmu.invalidate(va, self.procs[pi].asid, si);
        }
        if owner == Owner::SHARED {
            let list = self.shared.remove(&src).expect("shared block without a list");
            self.shared.insert(dst, list);
        }
        self.phys.set_owner(Pfn(dst), owner);
        self.phys.free(Pfn(src), Order(o));
        let bytes = self.base.bytes() << o;
        self.compaction.pages_migrated += 1;
        self.compaction.bytes_migrated += bytes;
        self.note_copy(bytes);
    }

    fn note_copy(&mut self, bytes: u64) {
        if self.in_daemon {
            self.compaction.bytes_copied_background += bytes;
        } else {
            self.compaction.bytes_copied_direct += bytes;
        }
    }

    pub(crate) fn size_index_of_order(&self, o: u8) -> u32 {
        self.sizes.iter().position(|s| s.shift() - self.base.shift() == o as u32).expect("anonymous blocks have the order of a page size") as u32
    }

    /// Mechanism: promote by copy. Replace whatever maps [start, start + size of `si`) in
    /// process `pi` with one new page of size `si`: copy the mapped base pages, zero the rest,
    /// free the old frames. `max_none` bounds the unmapped base pages; `compact` allows direct
    /// compaction when no free block exists.
    pub fn collapse(&mut self, pi: usize, start: u64, si: u32, lim: CollapseLimits, compact: bool, mmu: &mut Mmu) -> CollapseResult {
        let r = self.collapse_inner(pi, start, si, lim, compact, mmu);
        self.compaction.collapse[r as usize] += 1;
        r
    }

    fn collapse_inner(&mut self, pi: usize, start: u64, si: u32, lim: CollapseLimits, compact: bool, mmu: &mut Mmu) -> CollapseResult {
        let size = self.sizes[si as usize];
        let len = size.bytes();
        if lim.past_vma {
            let p = &self.procs[pi];
            let clash = p.vmas.range(..start + len).next_back().is_some_and(|(_, v)| v.end > start && v.file.is_some())
                || p.vmas.range(start..start + len).any(|(_, v)| v.file.is_some());
            if clash || start + len > p.pt.va_limit() {
                return CollapseResult::VmaCheck;
            }
        } else {
            match self.procs[pi].find_vma(start) {
                Some(v) if v.start <= start && start + len <= v.end && v.file.is_none() => {}
                _ => return CollapseResult::VmaCheck,
            }
        }
        let mut pages = std::mem::take(&mut self.scratch);
        pages.clear();
        self.procs[pi].pt.pages_in_range(start, len, &mut pages);
        let outcome = (|| {
            let swapped: u64 = self.procs[pi].swapped.starting_in(start, start + len).iter().map(|(_, e)| 1u64 << self.order_of(e.si).0).sum();
            if pages.is_empty() && swapped == 0 {
                return Err(CollapseResult::PmdNull);
            }
            if swapped > lim.max_swap {
                return Err(CollapseResult::ExceedSwapPte);
            }
            if pages.iter().any(|t| t.size_idx >= si) {
                return Err(CollapseResult::PmdMapped);
            }
            let mapped: u64 = pages.iter().map(|t| self.sizes[t.size_idx as usize].bytes()).sum();
            let none = ((len - mapped) >> self.base.shift()) - swapped;
            if none > lim.max_none {
                return Err(CollapseResult::ExceedNonePte);
            }
            let shared: u64 =
                pages.iter().filter(|t| self.phys.owner(t.pfn.0) == Owner::SHARED).map(|t| self.sizes[t.size_idx as usize].bytes() >> self.base.shift()).sum();
            if shared > lim.max_shared {
                return Err(CollapseResult::ExceedSharedPte);
            }
            Ok(mapped)
        })();
        let mapped = match outcome {
            Ok(m) => m,
            Err(r) => {
                self.scratch = pages;
                return r;
            }
        };
        let order = self.order_of(si);
        let got = if compact { self.alloc_compacting(order.0, mmu) } else { self.phys.alloc(order, FrameKind::Anon) };
        let Some(new) = got else {
            self.scratch = pages;
            return CollapseResult::AllocHugePageFail;
        };
        // Swapped-out pages in the range are read back into the new page (khugepaged's
        // __collapse_huge_page_swapin).
        let swapped_bytes: u64 = self.procs[pi].swapped.starting_in(start, start + len).iter().map(|(_, e)| self.sizes[e.si as usize].bytes()).sum();
        if swapped_bytes > 0 {
            self.drop_swapped(pi, start, start + len);
            self.swap.counters.in_bytes += swapped_bytes;
        }
        // Take the old pages down (with their shootdowns), then map the new page.
        let asid = self.procs[pi].asid;
        let mut removed = Vec::with_capacity(pages.len());
        self.procs[pi].pt.unmap_range(start, len, &mut removed);
        for t in &removed {
            mmu.invalidate(t.start, asid, t.size_idx);
        }
        self.release(pi, &removed);
        self.install_large_page(pi, start, si, new, mmu);
        let mut copied = if lim.copy_whole { len } else { mapped };
        if let Exchange::Hypercall { host_backs_2m } = lim.exchange {
            let pmd = self.base.bytes() << 9;
            let nr_pmds = pages.iter().filter(|t| self.sizes[t.size_idx as usize].bytes() == pmd).count() as u64;
            if nr_pmds > 1 {
                if host_backs_2m {
                    self.compaction.exchange_hypercalls += nr_pmds.div_ceil(EXCHANGE_BATCH);
                    self.compaction.exchanged_pmds += nr_pmds;
                    copied -= nr_pmds * pmd;
                } else {
                    // The host cannot swap a 2MB mapping it backs with smaller pages: every
                    // entry of the first hypercall fails and the guest copies them all.
                    self.compaction.exchange_hypercalls += 1;
                    self.compaction.exchange_failed_pmds += nr_pmds;
                }
            }
        }
        self.note_copy(copied);
        let mapped = if lim.copy_whole { len } else { mapped + swapped_bytes };
        if self.in_daemon {
            self.compaction.bytes_zeroed_background += len - mapped;
        } else {
            self.counters.zeroed_bytes += len - mapped;
        }
        self.scratch = pages;
        CollapseResult::Succeed
    }
}
