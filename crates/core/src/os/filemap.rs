//! File mappings: `mmap` of a file maps its page-cache pages into the process.
//!
//! A fault on a file VMA finds the page in the page cache (a minor fault) or reads it from the
//! file (a major fault, with its I/O), and maps that very frame with a base page (file THP is
//! not modelled). The frame stays owned by the page cache; `Files::mappers` lists every
//! mapping of it (the reverse map). Writes:
//! - MAP_SHARED: a clean page is mapped write-protected so the first write is seen (Linux's
//!   page_mkwrite): it marks the page dirty and unprotects it; dirty pages are written back when
//!   reclaimed (`pagecache.written_back`).
//! - MAP_PRIVATE: the page is mapped write-protected; a write copies it into an anonymous page
//!   (copy-on-write from the page cache). A first touch that writes copies at once.
//!
//! Reclaim keeps mapped page-cache pages (the model does not unmap them to evict); compaction
//! moves them and repoints every mapping.
//!
//! **File superpages** (`OsFeatures::file_superpages`, asked for by `navarro`; Navarro et al. reserve
//! for every memory object, files included). A page read into the cache takes its frame from a
//! *file reservation*: an aligned extent of the largest superpage size that lies inside the
//! file, keyed by (file, order, first index), so that the file's pages sit at matching offsets.
//! When every base page of an aligned region of a `MAP_SHARED` mapping is mapped, with frames
//! that are contiguous and aligned and with one protection (all clean and write-protected, or
//! all dirty), the region is promoted in place: one page-table entry over the page-cache
//! frames, which stay order-0 page-cache pages (each with its own reverse-map entry). A write
//! to a clean file superpage (`DirtySuperpages`):
//! - `Demote` (the paper's choice): demote it one size at a time around the written page, so
//!   dirty state stays per base page and only that page is written back;
//! - `Whole`: keep the superpage, and mark every page of it dirty (one dirty bit for all of it):
//!   all of it is written back.
//! - `Hash` (discussed by the paper, not implemented there): keep the superpage; a SHA-1 digest
//!   of each page taken when it was read lets the flush write only the pages whose contents
//!   changed. The first write to the clean superpage traps (its dirty bit); the model then
//!   keeps noting which pages the program writes (at no simulated cost: the hardware would not
//!   trap) so that the flush writes exactly those, and charges the hashing
//!   (`cost.hash_cycles_per_kib`) for every page read from disk and every page of a dirty
//!   superpage at the flush.
//!
//! Compaction does not move frames under a file superpage.

use super::frames::{FrameKind, Owner};
use super::pagetable::Translation;
use super::{MapOutcome, Os, Vma};
use crate::mmu::Mmu;
use crate::trace::MAP_SHARED;
use crate::units::{Order, Pfn};

/// What a write to a clean file superpage does (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DirtySuperpages {
    Demote,
    Whole,
    Hash,
}

crate::counters! {
    #[derive(Clone, Debug, Default)]
    pub struct FileSuperpageCounters {
        /// File reservations made, and requests for one that found no free extent (by order).
        pub reserved: [u64; 24] = by_hand,
        pub reserve_failed: [u64; 24] = by_hand,
        /// File mappings promoted in place, by size index.
        pub promoted: [u64; 8] = by_hand,
        /// File superpages mapped whole at a read fault because the page cache already held the
        /// aligned extent fully populated (FreeBSD's `vm_fault_soft_fast` with a fully populated
        /// reservation), by size index.
        pub mapped_at_fault: [u64; 8] = by_hand,
        /// Pages read ahead at file-mapping faults (`OsFeatures::file_readahead`).
        pub readahead_pages: u64 = "file.readahead_pages",
        /// Demotion steps caused by writes to clean file superpages (`Demote`).
        pub dirty_demotions: u64 = "file.dirty_demotions",
        /// Clean file superpages made dirty whole by a write (`Whole`), and their pages.
        pub dirtied_whole: u64 = "file.dirtied_whole",
        pub dirtied_whole_pages: u64 = "file.dirtied_whole_pages",
        /// Fully mapped aligned regions of a shared file mapping that could not be promoted, by
        /// reason: the virtual offset disagrees with the file offset modulo the size; the frames
        /// are not one aligned extent (the pages did not come from one file reservation); the
        /// pages differ in protection (some dirty, some clean).
        pub refused_misaligned: u64 = "file.promote_refused.misaligned",
        pub refused_not_contiguous: u64 = "file.promote_refused.not_contiguous",
        pub refused_mixed_protection: u64 = "file.promote_refused.mixed_protection",
        /// Read faults where the page cache held the file's aligned extent around the page
        /// ready to map as one superpage, but the mapping's address disagrees with the file
        /// offset modulo its size (counted per fault and size).
        pub at_fault_misaligned: u64 = "file.map_at_fault_refused.misaligned",
        /// `Hash`: bytes hashed (every page read from disk, and every page of a dirty superpage
        /// when it is flushed), and the dirty file superpages, by (process, start, size index).
        pub hashed_bytes: u64 = by_hand,
        pub hash_dirty: std::collections::BTreeSet<(usize, u64, u32)> = by_hand,
    }
}

impl Os {
    /// A frame for page `index` of `file` from a file reservation (made here if none covers the
    /// page), or None if no reservation can have it.
    pub(crate) fn file_reserved_frame(&mut self, file: u32, index: u64) -> Option<u64> {
        let pages = self.file_pages(file);
        let now = self.counters.faults;
        let orders: Vec<u8> = (1..self.sizes.len() as u32).rev().filter(|&si| self.file_size_allowed(si)).map(|si| self.order_of(si).0).collect();
        for &o in &orders {
            let start = index & !((1u64 << o) - 1);
            let Some(&(id, pfn)) = self.files.reservs.get(&(file, o, start)) else { continue };
            let live = self.phys.reservs.get(id).is_some_and(|r| r.pfn == pfn && r.order == o);
            if !live {
                self.files.reservs.remove(&(file, o, start));
                continue;
            }
            if let Some(p) = self.phys.reserv_alloc(id, index - start, FrameKind::File, now) {
                return Some(p.0);
            }
        }
        for &o in &orders {
            let start = index & !((1u64 << o) - 1);
            if start + (1u64 << o) > pages || o > self.phys.max_order() {
                continue;
            }
            match self.phys.reserv_create(Order(o), Owner::file(file, start), now) {
                Some((id, pfn)) => {
                    self.files.counters.reserved[o as usize] += 1;
                    self.files.reservs.insert((file, o, start), (id, pfn.0));
                    return self.phys.reserv_alloc(id, index - start, FrameKind::File, now).map(|p| p.0);
                }
                None => self.files.counters.reserve_failed[o as usize] += 1,
            }
        }
        None
    }

    /// Whether file superpages may take size index `si` (`OsFeatures::file_size_mask`).
    fn file_size_allowed(&self, si: u32) -> bool {
        let m = self.features.file_size_mask;
        m == 0 || m & (1 << si) != 0
    }

    /// The aligned region of size index `si` around `page` as (bytes, base pages, start), when
    /// file superpages may take that size and the region lies inside `vma`.
    fn file_region(&self, si: u32, page: u64, vma: &Vma) -> Option<(u64, u64, u64)> {
        let size = self.sizes[si as usize].bytes();
        let start = page & !(size - 1);
        let inside = start >= vma.start && start + size <= vma.end;
        (self.file_size_allowed(si) && inside).then_some((size, size >> self.base.shift(), start))
    }

    /// The file's length in base pages (from the largest size an open announced).
    fn file_pages(&self, file: u32) -> u64 {
        self.files.sizes.get(&file).copied().unwrap_or(0).div_ceil(self.base.bytes())
    }

    /// Promote the largest region around `page` of the file mapping `vma` whose base pages are
    /// all mapped, contiguous and aligned in memory, with one protection. A private mapping's
    /// pages qualify while they are page-cache pages, read-only (FreeBSD promotes a program's
    /// text and read-only data this way); a page copied on write is anonymous and blocks it.
    fn promote_file_mapping(&mut self, pi: usize, page: u64, vma: &Vma, mmu: &mut Mmu) {
        let (_, off) = vma.file.expect("a file VMA");
        let shift = self.base.shift();
        let mut pages = Vec::new();
        for si in (1..self.sizes.len() as u32).rev() {
            let Some((size, n, start)) = self.file_region(si, page, vma) else { continue };
            pages.clear();
            self.procs[pi].pt.pages_in_range(start, size, &mut pages);
            let covered: u64 = pages.iter().map(|t| self.sizes[t.size_idx as usize].bytes()).sum();
            if covered != size || pages.iter().any(|t| t.size_idx >= si || !self.is_file_frame(t.pfn.0)) {
                continue; // not all mapped yet (or already larger)
            }
            // Fully mapped: from here on, a refusal is counted with its reason.
            if ((start - vma.start + off) >> shift) & (n - 1) != 0 {
                self.files.counters.refused_misaligned += 1;
                continue;
            }
            let first = pages[0].pfn.0;
            if first & (n - 1) != 0 || pages.iter().any(|t| t.pfn.0 != first + ((t.start - start) >> shift)) {
                self.files.counters.refused_not_contiguous += 1;
                continue;
            }
            let cow = pages[0].cow;
            if pages.iter().any(|t| t.cow != cow) {
                self.files.counters.refused_mixed_protection += 1;
                continue;
            }
            self.take_down_for_promotion(pi, start, size, mmu);
            let ok = self.procs[pi].pt.map(start, si, Pfn(first));
            debug_assert!(ok, "file promotion target still mapped");
            if cow {
                self.procs[pi].pt.set_cow(start, si, true);
                self.procs[pi].cow_pages += 1;
            }
            self.procs[pi].resident[si as usize] += 1;
            self.files.counters.promoted[si as usize] += 1;
            self.promotions.promote_ptes += n;
            self.settle_after_resize(pi, si, mmu);
            return;
        }
    }

    /// At a read fault on `page` of the file mapping `vma`, map the largest aligned region around
    /// it with one superpage when nothing of the region is mapped in this process yet and the
    /// page cache holds the whole extent, contiguous and aligned (the pages came from one file
    /// reservation, filled by earlier processes or reads). This is how a program started again
    /// maps its binary's and libraries' pages: FreeBSD's `vm_fault_soft_fast` maps the
    /// superpage of a fully populated reservation at once. Returns whether it mapped one.
    fn map_cached_superpage(&mut self, pi: usize, page: u64, vma: &Vma, mmu: &mut Mmu) -> bool {
        let (file, off) = vma.file.expect("a file VMA");
        let shift = self.base.shift();
        let mut pages = Vec::new();
        for si in (1..self.sizes.len() as u32).rev() {
            let Some((size, n, start)) = self.file_region(si, page, vma) else { continue };
            let first_index = (start - vma.start + off) >> shift;
            if first_index & (n - 1) != 0 {
                // The mapping's offset disagrees with the address: never a superpage. Counted
                // when the page cache holds the file's extent around the page ready to map.
                let index = (page - vma.start + off) >> shift;
                if self.cached_extent(file, index & !(n - 1), n).is_some() {
                    self.files.counters.at_fault_misaligned += 1;
                }
                continue;
            }
            pages.clear();
            self.procs[pi].pt.pages_in_range(start, size, &mut pages);
            if !pages.is_empty() {
                continue; // part of it is mapped: promotion's business
            }
            let Some(f0) = self.cached_extent(file, first_index, n) else { continue };
            let ok = self.procs[pi].pt.map(start, si, Pfn(f0));
            debug_assert!(ok, "an unmapped region");
            self.procs[pi].pt.set_cow(start, si, true);
            self.procs[pi].cow_pages += 1;
            self.procs[pi].resident[si as usize] += 1;
            let vpn = start >> shift;
            for k in 0..n {
                self.files.mappers.add(f0 + k, Owner::anon(pi, vpn + k));
            }
            self.files.counters.mapped_at_fault[si as usize] += 1;
            self.settle_after_resize(pi, si, mmu);
            return true;
        }
        false
    }

    /// Read the `file_readahead` pages after `index` into the page cache (those not cached
    /// yet, up to the end of the file), as FreeBSD's fault read-ahead does. They come from the
    /// file's reservation like any page-cache page, which is what fills its extents.
    fn read_ahead(&mut self, file: u32, index: u64, mmu: &mut Mmu) {
        let n = self.features.file_readahead as u64;
        if n == 0 {
            return;
        }
        let pages = self.file_pages(file);
        for i in index + 1..(index + 1 + n).min(pages) {
            if self.files.cache.frame_of(file, i).is_some() {
                continue;
            }
            if !self.cache_page(file, i, Some(&mut *mmu)) {
                return; // memory is short: the read-ahead is only a hint
            }
            self.files.counters.readahead_pages += 1;
            if !self.in_prelude {
                self.counters.file_read_bytes += self.base.bytes();
            }
        }
    }

    /// The first frame of pages `first..first + n` of `file` when the page cache holds them all
    /// in one aligned, contiguous run of frames (from one file reservation).
    fn cached_extent(&self, file: u32, first: u64, n: u64) -> Option<u64> {
        let f0 = self.files.cache.frame_of(file, first)?;
        let whole = f0 & (n - 1) == 0 && (1..n).all(|k| self.files.cache.frame_of(file, first + k) == Some(f0 + k));
        whole.then_some(f0)
    }

    /// Whether frame `pfn` (a page-cache page) is mapped by a superpage somewhere.
    pub(crate) fn file_frame_in_superpage(&self, pfn: u64) -> bool {
        self.files.mappers.get(&pfn).is_some_and(|l| {
            l.iter().any(|m| {
                let (pi, vpn) = m.as_anon().expect("a mapping");
                self.procs[pi].pt.lookup(vpn << self.base.shift()).is_some_and(|t| t.size_idx > 0)
            })
        })
    }

    /// A fault at `va` in the file VMA `vma`. Returns false if memory ran out. A page read from
    /// disk is followed by the read-ahead, once the page is mapped (reclaim keeps mapped pages,
    /// so the read-ahead cannot take it back).
    pub fn file_fault(&mut self, pi: usize, va: u64, vma: &Vma, write: bool, mmu: &mut Mmu) -> bool {
        let (file, off) = vma.file.expect("a file VMA");
        let page = va & !(self.base.bytes() - 1);
        let index = (page - vma.start + off) >> self.base.shift();
        let hit = self.files.cache.frame_of(file, index).is_some();
        let ok = self.file_fault_map(pi, page, index, hit, vma, write, mmu);
        if ok && !hit {
            self.read_ahead(file, index, mmu);
        }
        ok
    }

    /// `file_fault` for the page at `page`, page `index` of the file, which the page cache held
    /// before the fault when `hit`.
    #[allow(clippy::too_many_arguments)]
    fn file_fault_map(&mut self, pi: usize, page: u64, index: u64, hit: bool, vma: &Vma, write: bool, mmu: &mut Mmu) -> bool {
        let (file, _) = vma.file.expect("a file VMA");
        let base = self.base.bytes();
        if !self.cache_page(file, index, Some(mmu)) {
            return false;
        }
        if hit {
            self.counters.file_minor_faults += 1;
        } else {
            self.counters.file_major_faults += 1;
            if !self.in_prelude {
                self.counters.file_read_bytes += base;
            }
        }
        let shared = vma.flags & MAP_SHARED != 0;
        if !write && self.features.file_superpages.is_some() && self.map_cached_superpage(pi, page, vma, mmu) {
            return true;
        }
        if write && !shared {
            // Private write: the process gets its own copy at once.
            if self.map_page(pi, page, 0, Os::ANYWHERE, mmu) != MapOutcome::Mapped {
                return false;
            }
            self.counters.zeroed_bytes -= base;
            self.compaction.bytes_copied_direct += base;
            self.counters.file_private_copies += 1;
            return true;
        }
        let pfn = self.files.cache.frame_of(file, index).expect("just cached");
        let ok = self.procs[pi].pt.map(page, 0, Pfn(pfn));
        debug_assert!(ok, "file fault on a mapped page");
        let protect = !(shared && write);
        if protect {
            self.procs[pi].pt.set_cow(page, 0, true);
            self.procs[pi].cow_pages += 1;
        } else {
            self.files.cache.mark_dirty(file, index);
            self.counters.file_pages_dirtied += 1;
        }
        self.procs[pi].resident[0] += 1;
        self.files.mappers.add(pfn, Owner::anon(pi, page >> self.base.shift()));
        self.settle_pt_with(pi, Some(mmu));
        if (shared || !write) && self.features.file_superpages.is_some() {
            self.promote_file_mapping(pi, page, vma, mmu);
        }
        true
    }

    /// A write at `va` to the write-protected page-cache page `t` (a file mapping).
    pub(crate) fn file_write(&mut self, pi: usize, mut t: Translation, va: u64, mmu: &mut Mmu) -> bool {
        let shared = self.procs[pi].find_vma(t.start).is_some_and(|v| v.flags & MAP_SHARED != 0);
        if t.size_idx > 0 && !shared {
            // A write to a private file superpage: copy on write breaks it down to the written
            // base page, which is then copied (the rest stay page-cache pages).
            while t.size_idx > 0 && self.demote(pi, va, t.size_idx - 1, super::promote::DemoteReason::Cow, mmu) == super::promote::DemoteResult::Demoted {
                match self.procs[pi].pt.lookup(va) {
                    Some(n) => t = n,
                    None => return false,
                }
            }
        }
        if t.size_idx > 0 {
            match self.features.file_superpages.unwrap_or(DirtySuperpages::Demote) {
                DirtySuperpages::Demote => {
                    // Demote around the written page until it is a base page of its own.
                    while t.size_idx > 0
                        && self.demote(pi, va, t.size_idx - 1, super::promote::DemoteReason::Dirty, mmu) == super::promote::DemoteResult::Demoted
                    {
                        self.files.counters.dirty_demotions += 1;
                        match self.procs[pi].pt.lookup(va) {
                            Some(n) => t = n,
                            None => return false,
                        }
                    }
                }
                DirtySuperpages::Whole if shared => {
                    // One dirty bit for the whole superpage: every page of it is dirty now.
                    let n = 1u64 << self.order_of(t.size_idx).0;
                    for k in 0..n {
                        if let Some((file, index)) = self.phys.owner(t.pfn.0 + k).as_file() {
                            self.files.cache.mark_dirty(file, index);
                        }
                    }
                    self.files.counters.dirtied_whole += 1;
                    self.files.counters.dirtied_whole_pages += n;
                    self.counters.file_pages_dirtied += n;
                    mmu.invalidate(t.start, self.procs[pi].asid, t.size_idx);
                    self.procs[pi].cow_pages -= 1;
                    self.procs[pi].pt.set_cow(t.start, t.size_idx, false);
                    return true;
                }
                DirtySuperpages::Hash if shared => {
                    let key = (pi, t.start, t.size_idx);
                    if !self.files.counters.hash_dirty.insert(key) {
                        // Already dirty: the hardware would not trap; only the model looks.
                        self.counters.cow_faults -= 1;
                    }
                    let index_page = t.pfn.0 + ((va - t.start) >> self.base.shift());
                    if let Some((file, index)) = self.phys.owner(index_page).as_file() {
                        self.files.cache.mark_dirty(file, index);
                        self.counters.file_pages_dirtied += 1;
                    }
                    return true; // stays write-protected so that later writes are seen too
                }
                DirtySuperpages::Whole | DirtySuperpages::Hash => {}
            }
        }
        let (file, index) = self.phys.owner(t.pfn.0).as_file().expect("a page-cache frame");
        let asid = self.procs[pi].asid;
        mmu.invalidate(t.start, asid, t.size_idx);
        self.procs[pi].cow_pages -= 1;
        if shared {
            self.procs[pi].pt.set_cow(t.start, t.size_idx, false);
            self.files.cache.mark_dirty(file, index);
            self.counters.file_pages_dirtied += 1;
            return true;
        }
        // Private: copy into an anonymous page.
        let Some(new) = self.alloc_reclaiming(Order(0), FrameKind::Anon, Some(mmu)) else { return false };
        self.files.mappers.unlist(t.pfn.0, Owner::anon(pi, t.start >> self.base.shift()));
        self.procs[pi].pt.rewrite(t.start, t.size_idx, new, false);
        self.phys.set_owner(new, Owner::anon(pi, t.start >> self.base.shift()));
        if self.swap.enabled() {
            let r = self.page_ref(pi, t.start, t.size_idx);
            self.replacement.on_insert(r);
        }
        self.compaction.bytes_copied_direct += self.base.bytes();
        self.counters.file_private_copies += 1;
        true
    }

    /// Whether the mapped frame is a page-cache frame (a file mapping).
    pub(crate) fn is_file_frame(&self, pfn: u64) -> bool {
        self.phys.kind_of(pfn) == FrameKind::File
    }
}
