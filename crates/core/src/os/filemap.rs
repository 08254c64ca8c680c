//! File mappings: `mmap` of a file maps its page-cache pages into the process.
//!
//! A fault on a file VMA finds the page in the page cache (a minor fault) or reads it from the
//! file (a major fault, with its I/O), and maps that very frame with a base page (file THP is
//! not modelled). The frame stays owned by the page cache; `Os::file_mappers` lists every
//! mapping of it (the reverse map). Writes:
//! - MAP_SHARED: a clean page is mapped write-protected so the first write is seen (Linux's
//!   page_mkwrite): it marks the page dirty and unprotects it; dirty pages are written back when
//!   reclaimed (`pagecache.written_back`).
//! - MAP_PRIVATE: the page is mapped write-protected; a write copies it into an anonymous page
//!   (copy-on-write from the page cache). A first touch that writes copies at once.
//!
//! Reclaim keeps mapped page-cache pages (the model does not unmap them to evict); compaction
//! moves them and repoints every mapping.

use super::frames::{FrameKind, Owner};
use super::pagetable::Translation;
use super::{MapOutcome, Os, Vma};
use crate::mmu::Mmu;
use crate::trace::MAP_SHARED;
use crate::units::{Order, Pfn};

impl Os {
    /// A fault at `va` in the file VMA `vma`. Returns false if memory ran out.
    pub fn file_fault(&mut self, pi: usize, va: u64, vma: &Vma, write: bool, mmu: &mut Mmu) -> bool {
        let (file, off) = vma.file.expect("a file VMA");
        let base = self.base.bytes();
        let page = va & !(base - 1);
        let index = (page - vma.start + off) >> self.base.shift();
        let hit = self.cache.frame_of(file, index).is_some();
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
        if write && !shared {
            // Private write: the process gets its own copy at once.
            if self.map_page(pi, page, 0, None, mmu) != MapOutcome::Mapped {
                return false;
            }
            self.counters.zeroed_bytes -= base;
            self.compaction.bytes_copied_direct += base;
            self.counters.file_private_copies += 1;
            return true;
        }
        let pfn = self.cache.frame_of(file, index).expect("just cached");
        let ok = self.procs[pi].pt.map(page, 0, Pfn(pfn));
        debug_assert!(ok, "file fault on a mapped page");
        let protect = !(shared && write);
        if protect {
            self.procs[pi].pt.set_cow(page, 0, true);
            self.procs[pi].cow_pages += 1;
        } else {
            self.cache.mark_dirty(file, index);
            self.counters.file_pages_dirtied += 1;
        }
        self.procs[pi].resident[0] += 1;
        self.file_mappers.entry(pfn).or_default().push(Owner::anon(pi, page >> self.base.shift()));
        self.settle_pt_with(pi, Some(mmu));
        true
    }

    /// A write to the write-protected page-cache page `t` (a file mapping).
    pub(crate) fn file_write(&mut self, pi: usize, t: Translation, mmu: &mut Mmu) -> bool {
        let (file, index) = self.phys.owner(t.pfn.0).as_file().expect("a page-cache frame");
        let shared = self.procs[pi].find_vma(t.start).is_some_and(|v| v.flags & MAP_SHARED != 0);
        let asid = self.procs[pi].asid;
        mmu.invalidate(t.start, asid, t.size_idx);
        self.procs[pi].cow_pages -= 1;
        if shared {
            self.procs[pi].pt.set_cow(t.start, t.size_idx, false);
            self.cache.mark_dirty(file, index);
            self.counters.file_pages_dirtied += 1;
            return true;
        }
        // Private: copy into an anonymous page.
        let Some(new) = self.alloc_reclaiming(Order(0), FrameKind::Anon, Some(mmu)) else { return false };
        self.unlist_file_mapper(t.pfn.0, Owner::anon(pi, t.start >> self.base.shift()));
        self.procs[pi].pt.rewrite(t.start, t.size_idx, new, false);
        self.phys.set_owner(new, Owner::anon(pi, t.start >> self.base.shift()));
        if self.swap_total > 0 {
            let r = self.page_ref(pi, t.start, t.size_idx);
            self.replacement.on_insert(r);
        }
        self.compaction.bytes_copied_direct += self.base.bytes();
        self.counters.file_private_copies += 1;
        true
    }

    pub(crate) fn unlist_file_mapper(&mut self, pfn: u64, m: Owner) {
        if let Some(list) = self.file_mappers.get_mut(&pfn) {
            if let Some(i) = list.iter().position(|&x| x == m) {
                list.swap_remove(i);
            }
            if list.is_empty() {
                self.file_mappers.remove(&pfn);
            }
        }
    }

    /// Whether the mapped frame is a page-cache frame (a file mapping).
    pub(crate) fn is_file_frame(&self, pfn: u64) -> bool {
        self.phys.kind_of(pfn) == FrameKind::File
    }
}
