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
//!
//! With `to_cache` (Navarro et al. §A.2.9, FreeBSD's cache queue made part of the buddy
//! allocator), reclaim does not drop a page: its frame goes to the buddy lists with its contents
//! (`PhysMem::free_to_cache`), where it counts as free and coalesces. The page stays listed here
//! with the CACHED flag; a later access that finds the contents still there takes the frame back
//! (a hit, no I/O: `cache_reactivated`), preempting the reservation that held it if any; if the
//! frame was allocated meanwhile, the access is a miss like any other.

use super::frames::{FrameKind, Owner, PhysMem, NIL};
use super::mappers::Mappers;
use crate::units::{Order, Pfn};
use std::collections::VecDeque;

/// Pages reclaimed per call (Linux SWAP_CLUSTER_MAX, include/linux/swap.h).
pub const SWAP_CLUSTER_MAX: usize = 32;

#[derive(Clone, Debug, Default)]
pub struct File {
    /// Frame and flags of each cached page, by page index.
    pages: PageMap,
    pub open: u32,
}

/// Pages per `PageMap` chunk.
const CHUNK: usize = 64;

#[derive(Clone, Debug)]
struct PageChunk {
    pfn: [u32; CHUNK],
    flags: [u8; CHUNK],
    /// Entries whose frame is not NIL (the chunk is dropped when none are).
    live: u32,
}

/// A file's page index → (frame, flags), sparse: chunks of 64 pages in an ordered map, so
/// memory follows the pages cached, not the largest offset a trace names (a file offset near
/// 2^64 costs one chunk), and iteration is in index order (deterministic results).
#[derive(Clone, Debug, Default)]
struct PageMap {
    chunks: std::collections::BTreeMap<u64, Box<PageChunk>>,
}

impl PageMap {
    #[inline]
    fn split(index: u64) -> (u64, usize) {
        (index / CHUNK as u64, (index % CHUNK as u64) as usize)
    }
    /// (frame, flags) of page `index`; (NIL, 0) when not listed.
    #[inline]
    fn get(&self, index: u64) -> (u32, u8) {
        let (c, i) = Self::split(index);
        self.chunks.get(&c).map_or((NIL, 0), |ch| (ch.pfn[i], ch.flags[i]))
    }
    fn set(&mut self, index: u64, pfn: u32, flags: u8) {
        let (c, i) = Self::split(index);
        if pfn == NIL {
            if let Some(ch) = self.chunks.get_mut(&c) {
                if ch.pfn[i] != NIL {
                    ch.live -= 1;
                }
                ch.pfn[i] = NIL;
                ch.flags[i] = 0;
                if ch.live == 0 {
                    self.chunks.remove(&c);
                }
            }
            return;
        }
        let ch = self.chunks.entry(c).or_insert_with(|| Box::new(PageChunk { pfn: [NIL; CHUNK], flags: [0; CHUNK], live: 0 }));
        if ch.pfn[i] == NIL {
            ch.live += 1;
        }
        ch.pfn[i] = pfn;
        ch.flags[i] = flags;
    }
    /// The flags of a listed page.
    #[inline]
    fn flags_mut(&mut self, index: u64) -> Option<&mut u8> {
        let (c, i) = Self::split(index);
        self.chunks.get_mut(&c).filter(|ch| ch.pfn[i] != NIL).map(|ch| &mut ch.flags[i])
    }
    /// Every listed page, in index order: (index, frame, flags).
    fn iter(&self) -> impl Iterator<Item = (u64, u32, u8)> + '_ {
        self.chunks
            .iter()
            .flat_map(|(&c, ch)| (0..CHUNK).filter(move |&i| ch.pfn[i] != NIL).map(move |i| (c * CHUNK as u64 + i as u64, ch.pfn[i], ch.flags[i])))
    }
    fn for_each_flags_mut(&mut self, f: &mut dyn FnMut(&mut u8)) {
        for ch in self.chunks.values_mut() {
            for i in 0..CHUNK {
                if ch.pfn[i] != NIL {
                    f(&mut ch.flags[i]);
                }
            }
        }
    }
}

const REFERENCED: u8 = 1;
const DIRTY: u8 = 2;
/// The page's frame is free (or reserved, unpopulated) and may still hold its contents.
const CACHED: u8 = 4;

crate::counters! {
    #[derive(Clone, Debug, Default)]
    pub struct PageCacheCounters {
        pub hits: u64 = "pagecache.hits",
        pub misses: u64 = "pagecache.misses",
        pub evicted: u64 = "pagecache.evicted",
        pub written_back: u64 = "pagecache.written_back",
        /// Cached pages made inactive (reference bit cleared) when their file's last opener closed
        /// it (Navarro et al.'s change to FreeBSD's page daemon; asked for by the policy).
        pub deactivated_on_close: u64 = "pagecache.deactivated_on_close",
        /// Pages reclaimed into the buddy lists with their contents (`to_cache`).
        pub to_cache: u64 = "pagecache.to_cache",
        /// Accesses that found their page's contents still in a cache frame and took it back.
        pub cache_reactivated: u64 = "pagecache.cache_reactivated",
    }
}

#[derive(Default)]
pub struct PageCache {
    pub files: Vec<File>,
    clock: VecDeque<(u32, u64)>,
    pub counters: PageCacheCounters,
    /// Pages held in allocated File frames (not counting cache frames).
    pub cached: u64,
    /// Reclaim moves pages to cache frames instead of dropping them (see the header).
    pub to_cache: bool,
    /// Changes to the cache's pages, queue and flags (every `&mut` method but `reclaim` counts
    /// one).
    changes: u64,
    /// (`changes`, the mappers' changes) when a reclaim last freed nothing. Such a scan leaves
    /// every live page unreferenced and mapped, and the queue as it was after two full turns,
    /// so until either count moves another scan would free nothing and change nothing: it is
    /// skipped. (kswapd asks at every wake under swap pressure, where all that is left of the
    /// page cache is mapped program text.)
    futile_at: Option<(u64, u64)>,
}

impl PageCache {
    /// A new file id.
    pub fn create(&mut self) -> u32 {
        self.changes += 1;
        self.files.push(File::default());
        (self.files.len() - 1) as u32
    }

    /// The allocated frame holding page `index` of `file` (None if not cached, or only in a
    /// cache frame).
    pub fn frame_of(&self, file: u32, index: u64) -> Option<u64> {
        let (p, fl) = self.files.get(file as usize)?.pages.get(index);
        (p != NIL && fl & CACHED == 0).then_some(p as u64)
    }

    /// Whether page `index` of `file` has its contents in memory (in an allocated frame, or in
    /// a cache frame that still holds them).
    pub fn is_present(&self, phys: &PhysMem, file: u32, index: u64) -> bool {
        let Some(f) = self.files.get(file as usize) else { return false };
        let (p, fl) = f.pages.get(index);
        if p == NIL {
            return false;
        }
        fl & CACHED == 0 || phys.cache_owner(p as u64) == Some(Owner::file(file, index))
    }

    /// Page `index` of `file`, not present, was read into the allocated `File` frame `pfn` (a
    /// frame the caller chose: a file reservation's). Counted as a miss.
    pub fn insert_at(&mut self, phys: &mut PhysMem, file: u32, index: u64, pfn: u64) {
        self.changes += 1;
        self.counters.misses += 1;
        phys.set_owner(Pfn(pfn), Owner::file(file, index));
        self.files[file as usize].pages.set(index, pfn as u32, 0);
        self.clock.push_back((file, index));
        self.cached += 1;
    }

    /// Pages held in allocated frames and dirty (written, not yet written back).
    pub fn dirty_pages(&self) -> u64 {
        self.files.iter().map(|f| f.pages.iter().filter(|&(_, _, fl)| fl & (DIRTY | CACHED) == DIRTY).count() as u64).sum()
    }

    /// Whether page `index` of `file` is allocated, inactive (unreferenced) and clean or dirty,
    /// i.e. one the page daemon may move to a cache frame; returns its dirty bit.
    pub fn inactive_page(&self, file: u32, index: u64) -> Option<bool> {
        let (p, fl) = self.files.get(file as usize)?.pages.get(index);
        (p != NIL && fl & (CACHED | REFERENCED) == 0).then_some(fl & DIRTY != 0)
    }

    /// Move one allocated page to a cache frame (written back first if dirty). The caller has
    /// checked it is inactive and unmapped.
    pub fn page_to_cache(&mut self, phys: &mut PhysMem, file: u32, index: u64) {
        self.changes += 1;
        let f = &mut self.files[file as usize];
        let (p, fl) = f.pages.get(index);
        if fl & DIRTY != 0 {
            self.counters.written_back += 1;
        }
        let pfn = p as u64;
        f.pages.set(index, p, CACHED);
        phys.free_to_cache(pfn, Owner::file(file, index));
        self.cached -= 1;
        self.counters.to_cache += 1;
    }

    /// Read (or write) page `index` of `file`: a hit marks it referenced; a miss allocates a
    /// frame, reclaiming if memory is short, and first whenever free frames are at or below
    /// `reserve` (the page cache grows only above the low watermark; `u64::MAX`: never).
    /// Returns false if no frame could be had.
    #[allow(clippy::too_many_arguments)]
    pub fn access_with(&mut self, phys: &mut PhysMem, mapped: &Mappers, file: u32, index: u64, write: bool, reserve: u64) -> bool {
        self.changes += 1;
        if reserve != u64::MAX && phys.available_frames() <= reserve && self.cached > 0 {
            self.reclaim_before_change(phys, mapped);
        }
        let f = &mut self.files[file as usize];
        let (p, fl) = f.pages.get(index);
        if p != NIL {
            if fl & CACHED == 0 {
                f.pages.set(index, p, fl | REFERENCED | if write { DIRTY } else { 0 });
                self.counters.hits += 1;
                return true;
            }
            // In a cache frame: reuse the contents if they are still there.
            let pfn = p as u64;
            f.pages.set(index, NIL, 0);
            if phys.reclaim_cache_frame(pfn, Owner::file(file, index)) {
                let f = &mut self.files[file as usize];
                f.pages.set(index, pfn as u32, REFERENCED | if write { DIRTY } else { 0 });
                self.clock.push_back((file, index));
                self.cached += 1;
                self.counters.hits += 1;
                self.counters.cache_reactivated += 1;
                return true;
            }
        }
        self.counters.misses += 1;
        let pfn = match phys.alloc_or_unreserve(Order(0), FrameKind::File) {
            Some(p) => p,
            None => {
                self.reclaim_before_change(phys, mapped);
                match phys.alloc(Order(0), FrameKind::File) {
                    Some(p) => p,
                    None => return false,
                }
            }
        };
        phys.set_owner(pfn, Owner::file(file, index));
        self.files[file as usize].pages.set(index, pfn.0 as u32, if write { DIRTY } else { 0 });
        self.clock.push_back((file, index));
        self.cached += 1;
        true
    }

    /// Make every cached page of `file` inactive: the next reclaim takes them first.
    pub fn deactivate(&mut self, file: u32) {
        self.changes += 1;
        let mut n = 0;
        self.files[file as usize].pages.for_each_flags_mut(&mut |fl| {
            if *fl & CACHED == 0 {
                *fl &= !REFERENCED;
                n += 1;
            }
        });
        self.counters.deactivated_on_close += n;
    }

    /// `reclaim` inside a method that changes the pages after it (a read marking a page
    /// referenced or adding an unreferenced one): the change is counted after the reclaim, so
    /// that a futile one cannot make the next reclaim skip a scan that would now free a page.
    fn reclaim_before_change(&mut self, phys: &mut PhysMem, mapped: &Mappers) {
        self.reclaim(phys, mapped, SWAP_CLUSTER_MAX);
        self.changes += 1;
    }

    /// Evict up to `want` pages by CLOCK. Returns how many were freed. Pages mapped into a
    /// process (`mapped`) are kept, as if referenced: the model does not unmap them to evict.
    pub fn reclaim(&mut self, phys: &mut PhysMem, mapped: &Mappers, want: usize) -> usize {
        let now = (self.changes, mapped.changes());
        if self.futile_at == Some(now) {
            debug_assert!(
                self.clock.iter().all(|&(file, index)| {
                    let (p, fl) = self.files[file as usize].pages.get(index);
                    p == NIL || fl & CACHED != 0 || (fl & REFERENCED == 0 && mapped.contains_key(&(p as u64)))
                }),
                "a skipped reclaim would have found a page to free"
            );
            return 0;
        }
        let freed = self.scan(phys, mapped, want);
        self.futile_at = (freed == 0 && want > 0).then_some(now);
        freed
    }

    /// `reclaim`'s CLOCK scan.
    fn scan(&mut self, phys: &mut PhysMem, mapped: &Mappers, want: usize) -> usize {
        let mut freed = 0;
        // Each live page is passed at most twice (once to clear its bit, once to evict).
        let mut budget = 2 * self.clock.len();
        while freed < want && budget > 0 {
            budget -= 1;
            let Some((file, index)) = self.clock.pop_front() else { break };
            let f = &mut self.files[file as usize];
            let (p, fl) = f.pages.get(index);
            if p == NIL || fl & CACHED != 0 {
                continue; // stale
            }
            let referenced = fl & REFERENCED != 0;
            if referenced || mapped.contains_key(&(p as u64)) {
                if referenced {
                    // (A mapped page passes here at every reclaim: write only a change.)
                    f.pages.set(index, p, fl & !REFERENCED);
                }
                self.clock.push_back((file, index));
                continue;
            }
            self.counters.evicted += 1;
            freed += 1;
            if self.to_cache {
                self.page_to_cache(phys, file, index);
                continue;
            }
            let f = &mut self.files[file as usize];
            if fl & DIRTY != 0 {
                self.counters.written_back += 1;
            }
            f.pages.set(index, NIL, 0);
            phys.free(Pfn(p as u64), Order(0));
            self.cached -= 1;
        }
        freed
    }

    /// Mark a cached page dirty (a write through a shared file mapping).
    pub fn mark_dirty(&mut self, file: u32, index: u64) {
        self.changes += 1;
        if let Some(fl) = self.files.get_mut(file as usize).and_then(|f| f.pages.flags_mut(index)) {
            if *fl & CACHED == 0 {
                *fl |= DIRTY | REFERENCED;
            }
        }
    }

    /// A cached page moved to another frame (compaction).
    pub fn moved(&mut self, file: u32, index: u64, to: u64) {
        self.changes += 1;
        let f = &mut self.files[file as usize];
        let (_, fl) = f.pages.get(index);
        f.pages.set(index, to as u32, fl);
    }

    /// Every page held in an allocated frame, as (file, index, frame).
    pub fn pages(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.files.iter().enumerate().flat_map(|(fi, f)| f.pages.iter().filter(|&(_, _, fl)| fl & CACHED == 0).map(move |(i, p, _)| (fi as u32, i, p as u64)))
    }

    /// Whether page `index` of `file` is listed as held in cache frame `pfn`.
    pub fn in_cache_frame(&self, file: u32, index: u64, pfn: u64) -> bool {
        let Some(f) = self.files.get(file as usize) else { return false };
        let (p, fl) = f.pages.get(index);
        p != NIL && p as u64 == pfn && fl & CACHED != 0
    }

    /// Pages listed as being in cache frames whose contents are still there.
    pub fn cache_pages(&self, phys: &PhysMem) -> u64 {
        let mut n = 0;
        for (fi, f) in self.files.iter().enumerate() {
            for (i, p, fl) in f.pages.iter() {
                if fl & CACHED != 0 && phys.cache_owner(p as u64) == Some(Owner::file(fi as u32, i)) {
                    n += 1;
                }
            }
        }
        n
    }
}
