//! The OS memory manager: processes, their address spaces (VMAs) and page tables, physical
//! memory, and the mechanisms every policy uses. docs/MODEL.md describes the whole model.
//!
//! Where things live: `frames` (frame table, buddy allocator, mobility grouping), `pagetable`
//! (radix tables with mixed sizes), this file (processes, VMAs from trace events, demand paging,
//! exit, watermarks, the validator), `cow` (fork and copy-on-write, reverse map of shared pages),
//! `filemap` (file mappings), `pagecache` (files, CLOCK reclaim), `swap` (swap-out by the
//! replacement policy, major faults), `compact` (compaction, promotion by copy), `promote`
//! (promotion in place, demotion, mTHP folios), `fragmentation` (metrics), `prelude`
//! (fragmentation preludes), `zeroed` (lazily committed zeroed arrays).
//!
//! What it simplifies (each listed in docs/MODEL.md): mremap drops pages that do not stay
//! aligned; unmapping part of a shared superpage removes all of it; reclaim keeps mapped
//! page-cache pages; there is no file THP and no swap cache.

/// A typed outcome of a mechanism or decision: an enum whose variants each have the name their
/// counter carries (`<mechanism>.<name>`), with `ALL` to enumerate them.
macro_rules! outcome {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $var:ident => $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum $name { $($(#[$vm])* $var,)+ }
        impl $name {
            pub const ALL: [$name; [$($s),+].len()] = [$($name::$var),+];
            pub fn name(self) -> &'static str {
                [$($s),+][self as usize]
            }
        }
    };
}

pub mod compact;
pub mod contiguity;
pub mod cow;
pub mod filemap;
pub mod files;
pub mod fragmentation;
pub mod frames;
pub mod mappers;
pub mod pagecache;
pub mod pagedaemon;
pub mod pagetable;
pub mod physmap;
pub mod placement;
pub mod prelude;
pub mod promote;
pub mod smart_compact;
pub mod swap;
pub mod swapped;
pub mod zeroed;

use crate::error::{Error, Result};
use crate::fasthash::FastMap;
use crate::mmu::{Mmu, MAX_SIZES};
use crate::replacement::Replacement;
use crate::trace::*;
use crate::units::Pfn;
use crate::units::{Bytes, Order, PageSize};
use frames::{FrameKind, Owner, PhysMem};
use pagetable::{PageTable, Translation};
use std::collections::{BTreeMap, HashMap};

/// Why `Os::reject` refused an event (the kernel's error in brackets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The range wraps or leaves the virtual address space (EINVAL, ENOMEM).
    Range,
    /// A file offset whose end overflows the largest file (EOVERFLOW, EINVAL).
    Offset,
    /// The process already has vm.max_map_count VMAs (ENOMEM).
    MapCount,
    /// A descriptor outside 0..fs.nr_open (EBADF, EMFILE).
    Fd,
    /// A fork whose child pid belongs to a live process: the kernel never hands out a pid in
    /// use (kernel/pid.c, alloc_pid), so the trace is inconsistent.
    Pid,
}

/// fs.nr_open's default, the most descriptors a process may have (fs/file.c: 1024 * 1024).
pub const NR_OPEN: i32 = 1024 * 1024;

/// DEFAULT_MAX_MAP_COUNT, the default of vm.max_map_count (include/linux/mm.h: USHRT_MAX -
/// MAPCOUNT_ELF_CORE_MARGIN = 65535 - 5).
pub const MAX_MAP_COUNT: usize = 65530;
/// MAX_RW_COUNT, the most one read(2) transfers (include/linux/fs.h: INT_MAX & PAGE_MASK).
pub const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// MAX_LFS_FILESIZE on 64-bit kernels (include/linux/fs.h: LLONG_MAX).
pub const MAX_LFS_FILESIZE: u64 = i64::MAX as u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmaKind {
    Anon,
    File,
    Heap,
    Stack,
    /// Created by the engine for a trace without address-space events (docs/MODEL.md).
    Inferred,
}

#[derive(Clone, Copy, Debug)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub prot: u8,
    pub flags: u32,
    pub kind: VmaKind,
    /// MADV_HUGEPAGE (Some(true)) / MADV_NOHUGEPAGE (Some(false)).
    pub thp_advice: Option<bool>,
    /// A file mapping: the page-cache file and the file offset of `start`.
    pub file: Option<(u32, u64)>,
}

impl Vma {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Anonymous memory (heap, stack, anonymous mmap, or a region inferred from accesses): what
    /// THP-style policies may back with superpages.
    pub fn is_anonymous(&self) -> bool {
        matches!(self.kind, VmaKind::Anon | VmaKind::Heap | VmaKind::Stack | VmaKind::Inferred)
    }

    /// Whether the aligned range of `bytes` (a power of two) around `va` lies inside the VMA:
    /// the rule for mapping `va` with a page of that size.
    pub fn holds_aligned(&self, va: u64, bytes: u64) -> bool {
        let start = va & !(bytes - 1);
        start >= self.start && start + bytes <= self.end
    }
}

pub struct Process {
    pub pid: u32,
    pub asid: u16,
    /// Keyed by start address; VMAs never overlap.
    pub vmas: BTreeMap<u64, Vma>,
    pub pt: PageTable,
    pub alive: bool,
    /// Why the process died abnormally (e.g. "SIGSEGV at 0x...").
    pub killed: Option<String>,
    /// Whether the trace has told us this process's layout (mmap/brk events). If not, VMAs are
    /// inferred from accesses.
    pub has_layout_events: bool,
    pub heap_start: Option<u64>,
    pub brk: u64,
    /// Resident pages per size index.
    pub resident: [u64; MAX_SIZES],
    /// Open files: descriptor to page-cache file id.
    pub fds: HashMap<i32, u32>,
    /// Mappings write-protected for copy-on-write.
    pub cow_pages: u64,
    /// Pages swapped out, by start address.
    pub swapped: swapped::SwappedPages,
    /// Trace ranges the OS placed elsewhere (aligned placement of file mappings; os/placement.rs).
    pub relocs: placement::Relocations,
    /// Base pages only partly mapped at the trace's 4KB granularity (a trace from a 4KB-page
    /// machine on a larger base page): the page's start, and which of its 4KB granules the
    /// trace maps. A page absent here is wholly mapped, or wholly not.
    pub partial_pages: FastMap<u64, u64>,
}

impl Process {
    pub fn find_vma(&self, va: u64) -> Option<&Vma> {
        self.vmas.range(..=va).next_back().map(|(_, v)| v).filter(|v| va < v.end)
    }
}

outcome! {
    /// Why a request to map a page did or did not succeed (every outcome is counted).
    pub enum MapOutcome {
        Mapped => "mapped",
        /// No free aligned extent of that size.
        NoContiguousExtent => "no_contiguous_extent",
        /// Part of the aligned range is already mapped with smaller pages.
        OverlapsMapping => "overlaps_mapping",
        /// The aligned page would reach outside the VMA.
        CrossesVma => "crosses_vma",
    }
}

crate::counters! {
    #[derive(Clone, Debug, Default)]
    pub struct OsCounters {
        pub faults: u64 = "faults",
        pub faults_by_size: [u64; MAX_SIZES] = by_hand,
        pub zeroed_bytes: u64 = "os.zeroed_bytes",
        /// map attempts by (size index, outcome index).
        pub map_outcomes: [[u64; MapOutcome::ALL.len()]; MAX_SIZES] = by_hand,
        pub segv: u64 = "os.segv",
        pub accesses_dropped: u64 = "os.accesses_dropped",
        pub vmas_inferred: u64 = "os.vmas_inferred",
        /// Anonymous mmaps merged into an adjacent VMA (`merge_anon_neighbours`).
        pub vmas_merged: u64 = "os.vmas_merged",
        pub pages_freed: u64 = "os.pages_freed",
        pub pages_moved: u64 = "os.pages_moved",
        pub forks: u64 = "os.forks",
        pub exits: u64 = "os.exits",
        pub direct_reclaims: u64 = "os.direct_reclaims",
        pub kswapd_wakes: u64 = "os.kswapd_wakes",
        pub kswapd_reclaimed: u64 = "os.kswapd_reclaimed",
        /// Pages shared by fork, COW faults that reused the page, copied it, or copied it into
        /// base pages (no free block of its size).
        pub pages_shared: u64 = "os.pages_shared",
        pub cow_reuses: u64 = "cow.reuses",
        pub cow_copies: u64 = "cow.copies",
        pub cow_demoted: u64 = "cow.copies_into_base_pages",
        /// Write-protection faults on copy-on-write pages.
        pub cow_faults: u64 = "faults.cow",
        /// Faults that read a page back from swap.
        pub major_faults: u64 = "faults.major",
        pub stack_growths: u64 = "os.stack_growths",
        /// Partial unmaps of a shared superpage, which removed all of it.
        pub partial_unmaps_whole: u64 = "os.partial_unmaps_whole",
        /// Superpages demoted (one size down per step) because mprotect changed part of them.
        pub protection_demotes: u64 = "os.protection_demotes",
        /// Superpages mprotect changed in part that could not be demoted (shared): they keep
        /// their old protection in the model (counted).
        pub protection_demote_refused: u64 = "os.protection_demote_refused",
        /// File mmaps whose descriptor the trace never opened (served as anonymous memory).
        pub file_mmaps_unknown_fd: u64 = "file.mmaps_unknown_fd",
        /// Events the kernel would have refused, ignored (`Os::reject`): a range that wraps or
        /// leaves the virtual address space (EINVAL/ENOMEM), a file offset whose end overflows
        /// (EOVERFLOW), an mmap past vm.max_map_count VMAs (ENOMEM).
        pub rejected_range: u64 = "os.rejected.range",
        pub rejected_offset: u64 = "os.rejected.offset",
        pub rejected_map_count: u64 = "os.rejected.map_count",
        pub rejected_fd: u64 = "os.rejected.fd",
        pub rejected_pid: u64 = "os.rejected.pid",
        /// read(2) events longer than MAX_RW_COUNT, cut to it as the kernel does.
        pub reads_clamped: u64 = "file.reads_clamped",
        /// Faults on file mappings: the page was in the page cache (minor) or read from disk (major).
        pub file_minor_faults: u64 = "faults.minor",
        pub file_major_faults: u64 = "faults.major_file",
        /// Private file pages copied on write, shared file pages dirtied.
        pub file_private_copies: u64 = "file.private_copies",
        pub file_pages_dirtied: u64 = "file.pages_dirtied",
        /// Bytes read from files by the program (read() misses, major faults on file mappings).
        pub file_read_bytes: u64 = "file.read_bytes",
        /// Cycles a policy's own per-miss bookkeeping costs beyond the machine's miss handler
        /// (Romer et al.'s counters: Table 3's 130 or 2600 cycles against 30).
        pub bookkeeping_cycles: u64 = by_hand,
    }
}

/// The OS mechanisms a policy turns on, once, before the run (`Policy::features`); every one
/// is off by default (stock Linux behaviour).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OsFeatures {
    /// Evicting part of a superpage demotes it around the victim and evicts that base page,
    /// rather than swapping the superpage whole (Navarro et al. §4.4).
    pub evict_demotes: bool,
    /// A file's cached pages become inactive when its last opener closes it (Navarro et al.
    /// §A.2.9), rather than keeping their reference state (stock FreeBSD, Linux).
    pub deactivate_on_close: bool,
    /// Page-cache reclaim moves pages into the buddy lists with their contents, where they
    /// count as free and coalesce (Navarro et al.'s cache pages, §A.2.9).
    pub cache_pages_in_buddy: bool,
    /// Wired kernel pages come from pools of contiguous memory (Navarro et al.'s wired-page
    /// clustering, §A.2.10).
    pub wired_clustering: bool,
    /// Promotions and demotions rewrite every base PTE of the superpage (FreeBSD on Alpha
    /// replicates a superpage's PTE in each base slot); `cycles.pte` charges them.
    pub pte_replication: bool,
    /// Under memory pressure, demote a superpage whose reference bit the page daemon clears,
    /// with this probability (Navarro et al.'s speculative demotion; 0: never).
    pub speculative_demotion: f64,
    /// Page-cache pages come from file reservations and shared file mappings are promoted in
    /// place (os/filemap.rs), with this answer to a write to a clean file superpage; None: off.
    pub file_superpages: Option<filemap::DirtySuperpages>,
    /// The superpage sizes file superpages may take: bit `si` allows size index `si`; 0 allows
    /// every size of the machine (a policy's `sizes=` restricts it).
    pub file_size_mask: u32,
    /// At a file-mapping fault that reads its page from disk, also read this many pages after
    /// it (FreeBSD's fault read-ahead); 0: only the page.
    pub file_readahead: u32,
    /// A write to a shared copy-on-write superpage breaks the writer's mapping into base pages
    /// (counted as a `cow` demotion), as FreeBSD's pmap demotes a read-only superpage at a
    /// write fault; otherwise it is copied whole at its size (Linux before 5.8).
    pub cow_splits: bool,
    /// Pageblocks (the unit of migrate-type grouping and of compaction's scanners) of this
    /// order instead of one last-level table's span. Trident's kernel fixes pageblock_order at
    /// 18, a 1GB pageblock (notes D1 §1.1: "pageblock_order is fixed at 18"), so unmovable
    /// allocations gather in whole 1GB regions and compaction skips those regions whole.
    pub pageblock_order: Option<u8>,
    /// A fallback steal that does not relabel its pageblock still moves the pageblock's free
    /// blocks to the requester's lists, as Linux 4.x's `steal_suitable_fallback` did (Trident's
    /// kernel is 4.17); os/frames/mod.rs.
    pub steal_moves_free_blocks: bool,
}

pub struct Os {
    pub sizes: Vec<PageSize>,
    pub base: PageSize,
    pub memory: Bytes,
    pub procs: Vec<Process>,
    pub phys: PhysMem,
    pub counters: OsCounters,
    levels: u8,
    bits: u8,
    next_asid: u16,
    scratch: Vec<Translation>,
    /// `release`'s list of blocks to free, kept between calls.
    blocks_scratch: Vec<(u64, u8)>,
    /// Resident bytes per size at the end of each process, summed (for page_size_mix).
    pub final_resident: [u64; MAX_SIZES],
    /// The coalescing opportunity of the processes that exited, measured at exit.
    pub final_contiguity: contiguity::Contiguity,
    /// Segmentation faults: (pid, address).
    pub segv_log: Vec<(u32, u64)>,
    /// Address-space identifiers wrapped around: the engine must flush every TLB.
    pub flush_needed: bool,
    /// A page-table page could not be allocated (out of memory).
    pub pt_oom: bool,
    pub compaction: compact::Compaction,
    /// Set while a policy daemon (khugepaged, kcompactd) works: its copies run beside the
    /// program and are not charged to it.
    pub in_daemon: bool,
    /// The mechanisms the policy turned on (`Os::configure`); fixed for the run.
    features: OsFeatures,
    /// Index in `procs` of each pid.
    proc_by_pid: FastMap<u32, usize>,
    /// Aligned placement of file mappings: where moved mappings go and what it decided.
    pub placement: placement::Placement,
    /// Speculative demotion's state (its probability is `OsFeatures::speculative_demotion`).
    pub spec: swap::SpeculativeDemotion,
    pub daemon: pagedaemon::DaemonCounters,
    /// Wired (unmovable, never freed) frames and the current wired pool.
    pub wired: pagedaemon::Wired,
    /// Added to pids named by fork events (a scenario keeps its processes' pids apart).
    pub pid_base: u32,
    /// Free-frame watermarks (min, low, high): below low, kswapd reclaims up to high.
    pub watermarks: (u64, u64, u64),
    /// Blocks mapped by several processes (after fork), with every mapping.
    pub shared: FastMap<u64, Vec<Owner>>,
    /// A prelude is running: its file reads are not the program's I/O.
    pub in_prelude: bool,
    /// The page cache and files (their ids, sizes, mappings and reservations).
    pub files: files::Files,
    /// Which anonymous page to swap out (tracks pages only when swap is enabled).
    pub replacement: Box<dyn Replacement>,
    /// Swap space, its slots and its counters.
    pub swap: swap::SwapSpace,
    pub promotions: promote::PromoteCounters,
}

/// Linux's zone watermarks (mm/page_alloc.c): min_free_kbytes = int_sqrt(lowmem_kbytes * 16),
/// clamped to [128, 262144] KiB; low = min + max(min / 4, managed * watermark_scale_factor /
/// 10000) and high = min + 2 * the same, with watermark_scale_factor = 10.
pub fn linux_watermarks(frames: u64, page_bytes: u64) -> (u64, u64, u64) {
    let kbytes = frames * page_bytes / 1024;
    let min_kb = ((kbytes * 16) as f64).sqrt() as u64;
    let min = min_kb.clamp(128, 262_144) * 1024 / page_bytes;
    let tmp = (min / 4).max(frames * 10 / 10_000);
    (min, min + tmp, min + 2 * tmp)
}

impl Os {
    /// `swap`: swap space (0: none, anonymous memory is never reclaimed); `replacement`: the
    /// policy choosing what to swap out.
    pub fn new(mmu: &Mmu, memory: Bytes, swap: Bytes, replacement: &str) -> Result<Os> {
        let m = &mmu.machine;
        let frames = memory.0 >> m.base_page.shift();
        let max_order = (m.largest_page().shift() - m.base_page.shift()) as u8;
        // Pageblocks are one last-level table's span (Linux: pageblock_order = the PMD order).
        let mut phys = PhysMem::new(frames, max_order, m.bits_per_level).map_err(|e| Error::usage(format!("memory {memory}: {e}")))?;
        phys.scatter = frames::Scatter::new(m.frame_scatter, m.seed);
        let mut replacement = crate::replacement::build(replacement)?;
        let pages: Vec<u64> = m.page_sizes.iter().map(|s| s.bytes() >> m.base_page.shift()).collect();
        replacement.set_page_sizes(&pages, m.base_page.bytes());
        Ok(Os {
            sizes: m.page_sizes.clone(),
            base: m.base_page,
            memory,
            procs: Vec::new(),
            phys,
            counters: OsCounters::default(),
            levels: m.walk_levels,
            bits: m.bits_per_level,
            next_asid: 1,
            scratch: Vec::new(),
            blocks_scratch: Vec::new(),
            final_resident: [0; MAX_SIZES],
            final_contiguity: Default::default(),
            segv_log: Vec::new(),
            flush_needed: false,
            pt_oom: false,
            compaction: compact::Compaction::default(),
            in_daemon: false,
            features: OsFeatures::default(),
            proc_by_pid: FastMap::default(),
            daemon: Default::default(),
            pid_base: 0,
            watermarks: linux_watermarks(frames, m.base_page.bytes()),
            shared: FastMap::default(),
            in_prelude: false,
            replacement,
            files: files::Files::default(),
            placement: Default::default(),
            spec: Default::default(),
            wired: Default::default(),
            swap: swap::SwapSpace::new(swap.0 >> m.base_page.shift()),
            promotions: promote::PromoteCounters::default(),
        })
    }

    /// The index of live process `pid`, if there is one.
    pub(crate) fn live_proc(&self, pid: u32) -> Option<usize> {
        self.proc_by_pid.get(&pid).copied().filter(|&pi| self.procs[pi].alive)
    }

    /// Turn on the mechanisms the policy asks for (`Policy::features`), before the run;
    /// `seed` drives speculative demotion's draws.
    pub fn configure(&mut self, f: OsFeatures, seed: u64) -> Result<()> {
        if let Some(o) = f.pageblock_order {
            let o = o.min(self.phys.max_order());
            if o != self.phys.pageblock_order() {
                // Before anything is allocated: the frame table is built again with them.
                assert_eq!(self.phys.free_frames(), self.phys.total_frames(), "pageblocks change only on an empty machine");
                let scatter = self.phys.scatter.take();
                self.phys = PhysMem::new(self.phys.total_frames(), self.phys.max_order(), o).map_err(Error::usage)?;
                self.phys.scatter = scatter;
            }
        }
        self.phys.steal_moves_free_blocks = f.steal_moves_free_blocks;
        self.features = f;
        self.files.cache.to_cache = f.cache_pages_in_buddy;
        self.spec.rng = crate::trace::gen::Rng::new(seed ^ 0x5045_4344);
        self.replacement.report_cleared(f.speculative_demotion > 0.0);
        Ok(())
    }

    /// Every part's counters, for the results to collect (each names its own keys).
    pub fn counter_parts(&self) -> [&dyn crate::counters::Counters; 11] {
        [
            &self.counters,
            &self.phys.counters,
            &self.phys.reservs.counters,
            &self.compaction,
            &self.promotions,
            &self.swap,
            &self.swap.counters,
            &self.files.cache.counters,
            &self.files.counters,
            &self.placement.counters,
            &self.daemon,
        ]
    }

    /// The mechanisms in force.
    pub fn features(&self) -> &OsFeatures {
        &self.features
    }

    /// Mark what follows as a daemon's work (khugepaged, kcompactd: it runs beside the program,
    /// its copies are not charged to it) or not; returns the previous setting, to restore.
    pub fn set_daemon(&mut self, on: bool) -> bool {
        std::mem::replace(&mut self.in_daemon, on)
    }

    /// Charge the program `cycles` of a policy's own bookkeeping (a software miss handler's
    /// work beyond the handler itself: `cycles.bookkeeping`).
    pub fn charge_bookkeeping(&mut self, cycles: u64) {
        self.counters.bookkeeping_cycles += cycles;
    }

    /// A copy of `bytes` the program waits for, made by a policy (a superpage made by copying
    /// in the miss handler): `copy.bytes_direct`.
    pub fn charge_direct_copy(&mut self, bytes: u64) {
        self.compaction.bytes_copied_direct += bytes;
    }

    /// The process with this pid (the latest to have it), created on first sight.
    pub fn proc_index(&mut self, pid: u32) -> usize {
        // A map, not a scan: a trace may name hundreds of thousands of processes.
        if let Some(&i) = self.proc_by_pid.get(&pid) {
            return i;
        }
        self.spawn(pid)
    }

    /// A new process with this pid, which from now on names it; a dead process that had the
    /// pid keeps its entry (and its counts) under no name.
    fn spawn(&mut self, pid: u32) -> usize {
        let asid = self.next_asid;
        self.next_asid = self.next_asid.wrapping_add(1).max(1);
        if self.next_asid == 1 {
            self.flush_needed = true;
        }
        self.procs.push(Process {
            pid,
            asid,
            vmas: BTreeMap::new(),
            pt: PageTable::new(self.levels, self.bits, self.base, self.sizes.clone()),
            alive: true,
            killed: None,
            has_layout_events: false,
            heap_start: None,
            brk: 0,
            resident: [0; MAX_SIZES],
            fds: HashMap::new(),
            cow_pages: 0,
            swapped: swapped::SwappedPages::new(self.base),
            relocs: Default::default(),
            partial_pages: FastMap::default(),
        });
        let pi = self.procs.len() - 1;
        self.proc_by_pid.insert(pid, pi);
        self.settle_pt(pi);
        pi
    }

    /// Give new page-table nodes their frames and free the frames of released nodes (the page
    /// table itself owns no allocator). Returns false if a frame could not be had.
    #[inline]
    pub fn settle_pt(&mut self, pi: usize) -> bool {
        self.settle_pt_with(pi, None)
    }

    /// `settle_pt`, able to swap (with the MMU for shootdowns) when memory is short.
    pub fn settle_pt_with(&mut self, pi: usize, mut mmu: Option<&mut Mmu>) -> bool {
        let pt = &mut self.procs[pi].pt;
        if pt.created.is_empty() && pt.released.is_empty() {
            return true;
        }
        let mut ok = true;
        for f in std::mem::take(&mut pt.released) {
            self.phys.free(Pfn(f), Order(0));
        }
        let created = std::mem::take(&mut self.procs[pi].pt.created);
        for n in created {
            match self.alloc_reclaiming(Order(0), FrameKind::PageTable, mmu.as_deref_mut()) {
                Some(f) => self.procs[pi].pt.set_node_frame(n, f.0),
                None => ok = false,
            }
        }
        ok
    }

    /// Allocate a block; if none is free, reclaim directly (page cache first, then, with the
    /// MMU at hand for shootdowns, swap) about SWAP_CLUSTER_MAX pages per base page of the
    /// block, and try once more. Counted in `os.direct_reclaims`.
    pub(crate) fn alloc_reclaiming(&mut self, order: Order, kind: FrameKind, mmu: Option<&mut Mmu>) -> Option<Pfn> {
        // Unpopulated frames of reservations count as free: they are taken back first.
        if let Some(p) = self.phys.alloc_or_unreserve(order, kind) {
            return Some(p);
        }
        self.counters.direct_reclaims += 1;
        let want = pagecache::SWAP_CLUSTER_MAX << order.0.min(9);
        if self.files.cache.reclaim(&mut self.phys, &self.files.mappers, want) == 0 {
            if let Some(m) = mmu {
                self.swap_out(want as u64, m);
            }
        }
        self.phys.alloc(order, kind)
    }

    /// `map_page`'s bounds when the page may lie anywhere.
    pub const ANYWHERE: (u64, u64) = (0, u64::MAX);

    pub fn order_of(&self, si: u32) -> Order {
        Order((self.sizes[si as usize].shift() - self.base.shift()) as u8)
    }

    /// Mechanism: map a page of size `si` at aligned `start` in process `pi`, taking and zeroing
    /// fresh frames; the page must lie in `within` ([lo, hi); `ANYWHERE` for no limit). Counted
    /// by outcome.
    pub fn map_page(&mut self, pi: usize, start: u64, si: u32, within: (u64, u64), mmu: &mut Mmu) -> MapOutcome {
        self.map_page_with(pi, start, si, within, mmu, true)
    }

    /// `map_page` for a page just taken out of swap (`swap_in_at`): swapped pages never overlap
    /// one another, so nothing else in swap overlaps its range and the check is skipped (one
    /// hash probe per page size, on every major fault).
    pub(crate) fn map_swapped_in(&mut self, pi: usize, start: u64, si: u32, mmu: &mut Mmu) -> MapOutcome {
        debug_assert!(!self.swapped_overlaps(pi, start, start + self.sizes[si as usize].bytes()), "swapped pages overlap at {start:#x}");
        self.map_page_with(pi, start, si, Os::ANYWHERE, mmu, false)
    }

    fn map_page_with(&mut self, pi: usize, start: u64, si: u32, within: (u64, u64), mmu: &mut Mmu, check_swap: bool) -> MapOutcome {
        let size = self.sizes[si as usize];
        let out = (|| {
            let (lo, hi) = within;
            if start < lo || start + size.bytes() > hi {
                return MapOutcome::CrossesVma;
            }
            if check_swap && !self.procs[pi].swapped.is_empty() && self.swapped_overlaps(pi, start, start + size.bytes()) {
                // Part of the range is in swap: a larger page would lose it.
                return MapOutcome::OverlapsMapping;
            }
            // A base page may reclaim (page cache, then swap); a larger one only takes what is
            // free (the policy decides about compaction).
            let got = if si == 0 {
                self.alloc_reclaiming(Order(0), FrameKind::Anon, Some(mmu))
            } else {
                self.phys.alloc_zeroed_first(self.order_of(si), FrameKind::Anon)
            };
            let Some(pfn) = got else { return MapOutcome::NoContiguousExtent };
            self.map_fresh_frames(pi, start, si, pfn, mmu)
        })();
        self.counters.map_outcomes[si as usize][out as usize] += 1;
        out
    }

    /// Map freshly allocated anonymous frames `pfn` as the page of size `si` at `start`, zeroed:
    /// the page table, reverse map, counters, replacement, page-table frames, and kswapd when
    /// free memory runs low. On an overlapping mapping the frames are freed.
    pub(crate) fn map_fresh_frames(&mut self, pi: usize, start: u64, si: u32, pfn: Pfn, mmu: &mut Mmu) -> MapOutcome {
        if !self.procs[pi].pt.map(start, si, pfn) {
            self.phys.free(pfn, self.order_of(si));
            return MapOutcome::OverlapsMapping;
        }
        self.procs[pi].resident[si as usize] += 1;
        if !self.phys.take_zeroed(pfn) {
            self.counters.zeroed_bytes += self.sizes[si as usize].bytes();
        }
        self.phys.set_owner(pfn, Owner::anon(pi, start >> self.base.shift()));
        if self.swap.enabled() {
            let r = self.page_ref(pi, start, si);
            self.replacement.on_insert(r);
        }
        if !self.settle_pt_with(pi, Some(mmu)) {
            self.pt_oom = true;
        }
        if self.phys.available_frames() < self.watermarks.1 {
            self.kswapd(mmu);
        }
        MapOutcome::Mapped
    }

    /// Demote, one size down at a time, the page that straddles the boundary at `edge` (starts
    /// before it and ends after it) until none does.
    fn demote_straddling(&mut self, pi: usize, edge: u64, mmu: &mut Mmu) {
        while let Some(t) = self.procs[pi].pt.lookup(edge) {
            if t.start >= edge || t.size_idx == 0 {
                return;
            }
            if self.demote(pi, edge, t.size_idx - 1, promote::DemoteReason::Protection, mmu) != promote::DemoteResult::Demoted {
                self.counters.protection_demote_refused += 1;
                return;
            }
            self.counters.protection_demotes += 1;
        }
    }

    /// Mechanism: unmap every page overlapping the range, free its frames, shoot down its TLB
    /// entries.
    pub fn unmap_range(&mut self, pi: usize, start: u64, len: u64, mmu: &mut Mmu) {
        // A superpage that straddles an end of the range is split first (Linux splits the THP
        // and unmaps only the part asked for); the rest of it stays mapped with base pages.
        // A shared superpage cannot be split under one mapping: it goes whole (counted).
        let end = start.saturating_add(len);
        for edge in [start, end.saturating_sub(1)] {
            if let Some(t) = self.procs[pi].pt.lookup(edge) {
                let size = self.sizes[t.size_idx as usize].bytes();
                let (ts, te) = (t.start, t.start + size);
                // Only what stays inside a VMA is kept (Romer's FIXED may map past a VMA).
                let keep = (ts >= start || self.covered(pi, ts, start)) && (te <= end || self.covered(pi, end, te));
                if t.size_idx > 0
                    && (ts < start || te > end)
                    && keep
                    && self.demote(pi, edge, 0, promote::DemoteReason::PartialUnmap, mmu) != promote::DemoteResult::Demoted
                {
                    self.counters.partial_unmaps_whole += 1;
                }
            }
        }
        let mut removed = std::mem::take(&mut self.scratch);
        removed.clear();
        self.procs[pi].pt.unmap_range(start, len, &mut removed);
        let asid = self.procs[pi].asid;
        for t in &removed {
            mmu.invalidate(t.start, asid, t.size_idx);
        }
        self.release(pi, &removed);
        if !removed.is_empty() {
            mmu.flush_pwc();
        }
        self.scratch = removed;
        self.drop_swapped(pi, start, start.saturating_add(len));
    }

    /// Whether VMAs cover all of [a, b).
    fn covered(&self, pi: usize, a: u64, b: u64) -> bool {
        let mut at = a;
        while at < b {
            match self.procs[pi].find_vma(at) {
                Some(v) => at = v.end,
                None => return false,
            }
        }
        true
    }

    /// Track the trace's 4KB granules in the base pages at either end of [a, b), when the base
    /// page is larger (`Process::partial_pages`): mapped when `map`, else unmapped. Returns,
    /// for an unmap, whether the first and the last base page of the range are still partly
    /// mapped (so they stay). O(1); nothing is kept when the base page is 4KB.
    fn note_granules(&mut self, pi: usize, a: u64, b: u64, map: bool) -> (bool, bool) {
        const G: u64 = 4096;
        let page = self.base.bytes();
        if page <= G || b <= a {
            return (false, false);
        }
        let ones = |n: u64| if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let all = ones(page / G);
        let (a, b) = (a & !(G - 1), b.saturating_add(G - 1) & !(G - 1));
        // The granules of the page at `p` that [a, b) covers.
        let mask = |p: u64| {
            let lo = (a.max(p) - p) / G;
            let hi = (b.min(p + page) - p) / G;
            if hi <= lo {
                0
            } else {
                ones(hi - lo) << lo
            }
        };
        let mut kept = [false, false];
        let (first, last) = (a & !(page - 1), (b - 1) & !(page - 1));
        for (k, p) in [first, last].into_iter().enumerate() {
            if k == 1 && last == first {
                kept[1] = kept[0];
                break;
            }
            let m = mask(p);
            if m == all {
                if map {
                    self.procs[pi].partial_pages.remove(&p);
                }
                continue;
            }
            // No entry: the page is wholly mapped (a VMA covers it) or wholly not.
            let had = self.procs[pi].partial_pages.get(&p).copied().unwrap_or(if self.procs[pi].find_vma(p).is_some() { all } else { 0 });
            let parts = &mut self.procs[pi].partial_pages;
            if map {
                let now = had | m;
                if now == all {
                    parts.remove(&p);
                } else {
                    parts.insert(p, now);
                }
            } else {
                let now = had & !m;
                if now == 0 {
                    parts.remove(&p);
                } else {
                    parts.insert(p, now);
                    kept[k] = true;
                }
            }
        }
        (kept[0], kept[1])
    }

    /// Insert a VMA, replacing whatever it overlaps (MAP_FIXED semantics).
    fn insert_vma(&mut self, pi: usize, v: Vma, mmu: &mut Mmu) {
        self.remove_vmas(pi, v.start, v.end, mmu);
        self.procs[pi].vmas.insert(v.start, v);
    }

    /// Merge the private anonymous VMA at `start` with neighbours it touches that have the same
    /// protection, flags and advice, as Linux's `vma_merge` does at mmap (FreeBSD's
    /// `vm_map_insert` likewise extends an adjacent anonymous entry). Without it, memory a
    /// program maps piece by piece (malloc's mmap'd chunks, slab pages) would never hold an
    /// aligned 2MB or 1GB range inside one VMA, as it does on a real kernel.
    fn merge_anon_neighbours(&mut self, pi: usize, start: u64) {
        let p = &mut self.procs[pi];
        let Some(mut v) = p.vmas.get(&start).copied() else { return };
        let same = |a: &Vma, b: &Vma| {
            a.kind == b.kind && a.prot == b.prot && a.flags == b.flags && a.thp_advice == b.thp_advice && a.file.is_none() && b.file.is_none()
        };
        let mut merged = false;
        if let Some((_, prev)) = p.vmas.range(..start).next_back() {
            if prev.end == start && same(prev, &v) {
                let prev_start = prev.start;
                p.vmas.remove(&start);
                v.start = prev_start;
                p.vmas.get_mut(&prev_start).unwrap().end = v.end;
                merged = true;
            }
        }
        if let Some((_, next)) = p.vmas.range(v.end..).next() {
            if next.start == v.end && same(next, &v) {
                let (next_start, next_end) = (next.start, next.end);
                p.vmas.remove(&next_start);
                p.vmas.get_mut(&v.start).unwrap().end = next_end;
                merged = true;
            }
        }
        self.counters.vmas_merged += merged as u64;
    }

    /// Split VMAs so that `at` is a boundary.
    fn split_at(&mut self, pi: usize, at: u64) {
        let p = &mut self.procs[pi];
        let hit = p.vmas.range(..at).next_back().map(|(_, v)| *v);
        if let Some(v) = hit {
            if v.start < at && at < v.end {
                let mut right = v;
                right.start = at;
                if let Some((f, off)) = v.file {
                    right.file = Some((f, off + (at - v.start)));
                }
                p.vmas.get_mut(&v.start).unwrap().end = at;
                p.vmas.insert(at, right);
            }
        }
    }

    fn remove_vmas(&mut self, pi: usize, start: u64, end: u64, mmu: &mut Mmu) {
        self.split_at(pi, start);
        self.split_at(pi, end);
        let keys: Vec<u64> = self.procs[pi].vmas.range(start..end).map(|(k, _)| *k).collect();
        for k in keys {
            self.procs[pi].vmas.remove(&k);
        }
        self.unmap_range(pi, start, end - start, mmu);
    }

    /// Modify the VMAs inside [start, end) with `f`, splitting at the edges.
    fn modify_vmas(&mut self, pi: usize, start: u64, end: u64, f: impl Fn(&mut Vma)) {
        self.split_at(pi, start);
        self.split_at(pi, end);
        for (_, v) in self.procs[pi].vmas.range_mut(start..end) {
            f(v);
        }
    }

    /// Infer an anonymous VMA around `va` for a process whose trace has no layout events: the
    /// naturally aligned block of the machine's largest page size, clipped to its neighbours.
    pub fn infer_vma(&mut self, pi: usize, va: u64) -> Vma {
        let big = self.sizes.last().unwrap().bytes();
        let p = &self.procs[pi];
        let mut start = va & !(big - 1);
        let mut end = start.saturating_add(big);
        if let Some((_, prev)) = p.vmas.range(..=va).next_back() {
            start = start.max(prev.end);
        }
        if let Some((_, next)) = p.vmas.range(va + 1..).next() {
            end = end.min(next.start);
        }
        let v = Vma { start, end, prot: PROT_READ | PROT_WRITE, flags: MAP_PRIVATE | MAP_ANONYMOUS, kind: VmaKind::Inferred, thp_advice: None, file: None };
        self.procs[pi].vmas.insert(start, v);
        self.counters.vmas_inferred += 1;
        v
    }

    /// Record a segmentation fault: the process is killed, its later accesses dropped.
    pub fn segfault(&mut self, pi: usize, va: u64) {
        let p = &mut self.procs[pi];
        if p.killed.is_none() {
            let limit = p.pt.va_limit();
            p.killed = Some(if va >= limit {
                format!("SIGSEGV at {va:#x} (beyond the machine's {}-bit virtual address space)", limit.trailing_zeros())
            } else {
                format!("SIGSEGV at {va:#x}")
            });
            self.counters.segv += 1;
            self.segv_log.push((p.pid, va));
        }
    }

    /// Why the kernel would refuse event `e` of process `pi` (counted), or None. The model
    /// applies only what a kernel would have done, so a malformed or hostile trace cannot
    /// make it do unbounded work: every range lies inside the address space, no end wraps.
    pub fn reject(&mut self, pi: usize, e: &Event) -> Option<Reject> {
        let limit = self.procs[pi].pt.va_limit();
        let outside = |a: u64, len: u64| a.checked_add(len).is_none_or(|end| end > limit);
        let why = match *e {
            Event::Mmap { addr, len, flags, offset, .. } => {
                if outside(addr, len) {
                    Some(Reject::Range)
                } else if flags & MAP_ANONYMOUS == 0 && offset.checked_add(len).is_none_or(|end| end > MAX_LFS_FILESIZE) {
                    Some(Reject::Offset)
                } else if self.procs[pi].vmas.len() >= MAX_MAP_COUNT {
                    Some(Reject::MapCount)
                } else {
                    None
                }
            }
            Event::Munmap { addr, len } | Event::Mprotect { addr, len, .. } | Event::Madvise { addr, len, .. } => outside(addr, len).then_some(Reject::Range),
            // A new length of 0 is EINVAL, and so is a move onto a range that overlaps the old
            // one (mm/mremap.c, mremap_to); in place (the same address) it resizes.
            Event::Mremap { old_addr, old_len, new_addr, new_len } => {
                let overlap = new_addr != old_addr && new_addr < old_addr.saturating_add(old_len) && old_addr < new_addr.saturating_add(new_len);
                (new_len == 0 || overlap || outside(old_addr, old_len) || outside(new_addr, new_len)).then_some(Reject::Range)
            }
            Event::Brk { addr } => (addr > limit).then_some(Reject::Range),
            // Descriptors are below fs.nr_open (EBADF, EMFILE otherwise).
            Event::FileOpen { fd, .. } => (!(0..NR_OPEN).contains(&fd)).then_some(Reject::Fd),
            Event::FileRead { offset, len, .. } => offset.checked_add(len.min(MAX_RW_COUNT)).is_none_or(|end| end > MAX_LFS_FILESIZE).then_some(Reject::Offset),
            // A child pid that a dead process had is reused (a new process); a live one is not.
            Event::Fork { child } => self.live_proc(child.wrapping_add(self.pid_base)).is_some().then_some(Reject::Pid),
            _ => None,
        };
        match why {
            Some(Reject::Range) => self.counters.rejected_range += 1,
            Some(Reject::Offset) => self.counters.rejected_offset += 1,
            Some(Reject::MapCount) => self.counters.rejected_map_count += 1,
            Some(Reject::Fd) => self.counters.rejected_fd += 1,
            Some(Reject::Pid) => self.counters.rejected_pid += 1,
            None => {}
        }
        why
    }

    /// Apply an address-space event of process `pi`.
    pub fn apply(&mut self, pi: usize, e: &Event, mmu: &mut Mmu) -> Result<()> {
        let page = self.base.bytes();
        let up = |x: u64| x.saturating_add(page - 1) & !(page - 1);
        match *e {
            Event::Mmap { addr, len, prot, flags, fd, offset } => {
                self.procs[pi].has_layout_events = true;
                if len == 0 {
                    return Ok(());
                }
                let kind = if flags & MAP_ANONYMOUS != 0 {
                    if flags & MAP_GROWSDOWN != 0 {
                        VmaKind::Stack
                    } else {
                        VmaKind::Anon
                    }
                } else {
                    VmaKind::File
                };
                // A page-aligned VMA (a trace from a machine with a smaller base page may
                // name addresses inside one of this machine's pages).
                let start = addr & !(page - 1);
                // A file mapping maps the page cache of the file its descriptor names (a trace
                // without the open event gets anonymous memory, counted).
                let file = if kind == VmaKind::File {
                    let f = self.procs[pi].fds.get(&fd).map(|&id| (id, offset.saturating_sub(addr - start)));
                    if f.is_none() {
                        self.counters.file_mmaps_unknown_fd += 1;
                    }
                    f
                } else {
                    None
                };
                let v = Vma { start, end: up(addr.saturating_add(len)), prot, flags, kind, thp_advice: None, file };
                self.note_granules(pi, addr, addr.saturating_add(len), true);
                self.insert_vma(pi, v, mmu);
                if kind == VmaKind::Anon && flags & MAP_SHARED == 0 {
                    self.merge_anon_neighbours(pi, start);
                }
            }
            Event::Munmap { addr, len } => {
                // A base page the trace still maps part of stays (a 4KB-granular trace on a
                // larger base page: the neighbouring mapping may share it).
                let end = addr.saturating_add(len);
                let head_kept = self.note_granules(pi, addr, end, false);
                let mut s = addr & !(page - 1);
                let mut e = up(end);
                if head_kept.0 {
                    s += page;
                }
                if head_kept.1 && e > s {
                    e -= page;
                }
                if s < e {
                    self.remove_vmas(pi, s, e, mmu);
                }
            }
            Event::Mremap { old_addr, old_len, new_addr, new_len } => {
                self.procs[pi].has_layout_events = true;
                // Page-aligned, as mmap's (a 4KB-granular trace on a larger base page).
                let (o, n) = (old_addr & !(page - 1), new_addr & !(page - 1));
                self.mremap(pi, o, up(old_addr + old_len) - o, n, up(new_addr + new_len) - n, mmu);
            }
            Event::Mprotect { addr, len, prot } => {
                let (s, e) = (addr & !(page - 1), up(addr.saturating_add(len)));
                // One protection per TLB entry: a superpage the range cuts is demoted, one size
                // at a time, until no page straddles either end (Navarro et al.'s
                // protection-triggered demotion; Linux splits the huge PMD likewise).
                for edge in [s, e] {
                    self.demote_straddling(pi, edge, mmu);
                }
                self.modify_vmas(pi, s, e, |v| v.prot = prot);
                if mmu.coalesced.is_some() {
                    // A coalesced entry needs one protection over its group: those around
                    // either end now straddle two (Linux flushes the range; entries wholly
                    // inside changed uniformly).
                    let asid = self.procs[pi].asid;
                    for edge in [s, e] {
                        mmu.invalidate_coalesced(edge.wrapping_sub(page), asid);
                        mmu.invalidate_coalesced(edge, asid);
                    }
                }
            }
            Event::Brk { addr } => {
                self.procs[pi].has_layout_events = true;
                let p = &mut self.procs[pi];
                match p.heap_start {
                    None => {
                        p.heap_start = Some(up(addr));
                        p.brk = up(addr);
                    }
                    Some(h) => {
                        let new = up(addr).max(h);
                        let old = p.brk;
                        p.brk = new;
                        if new > old {
                            // Grow the heap VMA (or create it).
                            let v = Vma {
                                start: h,
                                end: new,
                                prot: PROT_READ | PROT_WRITE,
                                flags: MAP_PRIVATE | MAP_ANONYMOUS,
                                kind: VmaKind::Heap,
                                thp_advice: None,
                                file: None,
                            };
                            let keep = self.procs[pi].vmas.get(&h).and_then(|x| x.thp_advice);
                            self.procs[pi].vmas.remove(&h);
                            self.remove_vmas(pi, old.max(h), new, mmu);
                            self.procs[pi].vmas.insert(h, Vma { thp_advice: keep, ..v });
                        } else if new < old {
                            self.remove_vmas(pi, new, old, mmu);
                            if new > h {
                                if let Some(v) = self.procs[pi].vmas.get_mut(&h) {
                                    v.end = new;
                                }
                            }
                        }
                    }
                }
            }
            Event::Madvise { addr, len, advice } => {
                let (s, e) = (addr & !(page - 1), up(addr.saturating_add(len)));
                match advice {
                    MADV_COLLAPSE => self.madvise_collapse(pi, s, e, mmu),
                    MADV_DONTNEED => self.unmap_range(pi, s, e - s, mmu),
                    MADV_HUGEPAGE => self.modify_vmas(pi, s, e, |v| v.thp_advice = Some(true)),
                    MADV_NOHUGEPAGE => self.modify_vmas(pi, s, e, |v| v.thp_advice = Some(false)),
                    _ => {}
                }
            }
            Event::Fork { child } => {
                // `reject` refused a live child pid: this one is new or reused after an exit.
                let ci = self.spawn(child.wrapping_add(self.pid_base));
                let vmas = self.procs[pi].vmas.clone();
                let (hs, brk, layout) = (self.procs[pi].heap_start, self.procs[pi].brk, self.procs[pi].has_layout_events);
                let relocs = self.procs[pi].relocs.clone();
                let partial = self.procs[pi].partial_pages.clone();
                let c = &mut self.procs[ci];
                c.vmas = vmas;
                c.relocs = relocs;
                c.partial_pages = partial;
                c.heap_start = hs;
                c.brk = brk;
                c.has_layout_events = layout;
                self.counters.forks += 1;
                self.fork_pages(pi, ci, mmu);
                // Swapped pages: the child's entries share the parent's slots.
                self.fork_swapped(pi, ci);
            }
            Event::Exit { .. } => self.exit(pi, mmu),
            Event::FileOpen { fd, ref path, size } => {
                let id = self.files.open(path, size);
                self.procs[pi].fds.insert(fd, id);
            }
            Event::FileClose { fd } => {
                if let Some(id) = self.procs[pi].fds.remove(&fd) {
                    let f = &mut self.files.cache.files[id as usize];
                    f.open = f.open.saturating_sub(1);
                    if f.open == 0 && self.features.deactivate_on_close {
                        self.files.cache.deactivate(id);
                    }
                }
            }
            Event::FileRead { fd, offset, len } => {
                if let Some(&id) = self.procs[pi].fds.get(&fd) {
                    if len > MAX_RW_COUNT {
                        self.counters.reads_clamped += 1;
                    }
                    self.read_file_with(id, offset, len.min(MAX_RW_COUNT), Some(mmu))?;
                }
            }
            Event::Context { .. } | Event::Insns { .. } => {}
        }
        Ok(())
    }

    /// kswapd: free memory fell below the low watermark; reclaim page cache until it reaches
    /// the high watermark (or nothing is left). It runs beside the program: no cycles charged.
    pub fn kswapd(&mut self, mmu: &mut Mmu) {
        self.counters.kswapd_wakes += 1;
        let was = self.in_daemon;
        self.in_daemon = true;
        while self.phys.available_frames() < self.watermarks.2 {
            let mut n = self.files.cache.reclaim(&mut self.phys, &self.files.mappers, pagecache::SWAP_CLUSTER_MAX) as u64;
            if n == 0 {
                n = self.swap_out(pagecache::SWAP_CLUSTER_MAX as u64, mmu);
            }
            self.counters.kswapd_reclaimed += n;
            if n == 0 {
                break;
            }
        }
        self.in_daemon = was;
    }

    /// MADV_COLLAPSE: collapse every PMD-size range inside [start, end) now, whatever the THP
    /// settings, ignoring khugepaged's max_ptes_* limits and compacting if needed (as Linux's
    /// madvise_collapse does, Documentation/admin-guide/mm/transhuge.rst).
    fn madvise_collapse(&mut self, pi: usize, start: u64, end: u64, mmu: &mut Mmu) {
        let pmd = self.base.bytes() << self.bits;
        let Some(si) = self.sizes.iter().position(|s| s.bytes() == pmd) else { return };
        // Only a PMD inside one VMA can collapse: try those, in address order, and count every
        // other PMD of the range as refused by the VMA check without visiting it (the range
        // may span the whole address space).
        let first = start.next_multiple_of(pmd);
        let total = if end >= first { (end - first) / pmd } else { 0 };
        let spans: Vec<(u64, u64)> =
            self.procs[pi].vmas.values().filter(|v| v.end > start && v.start < end).map(|v| (v.start.max(start), v.end.min(end))).collect();
        let mut tried = 0;
        for (s, e) in spans {
            let mut a = s.next_multiple_of(pmd);
            while a + pmd <= e {
                self.collapse(pi, a, si as u32, compact::CollapseLimits::ANY, true, mmu);
                tried += 1;
                a += pmd;
            }
        }
        self.compaction.collapse[compact::CollapseResult::VmaCheck as usize] += total - tried;
    }

    /// A fault below a stack VMA grows it (MAP_GROWSDOWN), within RLIMIT_STACK's default of
    /// 8MiB and keeping stack_guard_gap (256 pages, mm/mmap.c) above the mapping below.
    /// Returns the grown VMA.
    pub fn grow_stack(&mut self, pi: usize, va: u64) -> Option<Vma> {
        const RLIMIT_STACK: u64 = 8 << 20;
        let page = self.base.bytes();
        let p = &self.procs[pi];
        let (_, next) = p.vmas.range(va..).next()?;
        if next.kind != VmaKind::Stack || va + RLIMIT_STACK < next.end {
            return None;
        }
        let prev_end = p.vmas.range(..va).next_back().map_or(0, |(_, v)| v.end);
        if va < prev_end + 256 * page {
            return None;
        }
        let mut v = *next;
        self.procs[pi].vmas.remove(&v.start);
        v.start = va & !(page - 1);
        self.procs[pi].vmas.insert(v.start, v);
        self.counters.stack_growths += 1;
        Some(v)
    }

    /// read() of [offset, offset+len) of a file: every page goes through the page cache.
    pub fn read_file(&mut self, file: u32, offset: u64, len: u64) -> Result<()> {
        self.read_file_with(file, offset, len, None)
    }

    /// Bring page `index` of `file` into the page cache (or touch it there), reclaiming page
    /// cache and, with the MMU at hand for shootdowns, swapping when memory is short.
    pub(crate) fn cache_page(&mut self, file: u32, index: u64, mmu: Option<&mut Mmu>) -> bool {
        let low = self.watermarks.1;
        if self.features.file_superpages.is_some() && !self.files.cache.is_present(&self.phys, file, index) {
            if self.phys.available_frames() <= low && self.files.cache.cached > 0 {
                self.files.cache.reclaim(&mut self.phys, &self.files.mappers, pagecache::SWAP_CLUSTER_MAX);
            }
            if self.features.file_superpages == Some(filemap::DirtySuperpages::Hash) {
                self.files.counters.hashed_bytes += self.base.bytes(); // its digest, as it is read
            }
            if let Some(pfn) = self.file_reserved_frame(file, index) {
                self.files.cache.insert_at(&mut self.phys, file, index, pfn);
                return true;
            }
        }
        if self.files.cache.access_with(&mut self.phys, &self.files.mappers, file, index, false, low) {
            return true;
        }
        let Some(m) = mmu else { return false };
        self.swap_out(pagecache::SWAP_CLUSTER_MAX as u64, m) > 0
            && self.files.cache.access_with(&mut self.phys, &self.files.mappers, file, index, false, u64::MAX)
    }

    /// `read_file`, able to swap when memory is short.
    pub fn read_file_with(&mut self, file: u32, offset: u64, len: u64, mut mmu: Option<&mut Mmu>) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let shift = self.base.shift();
        for index in offset >> shift..=(offset + len - 1) >> shift {
            let miss = self.files.cache.frame_of(file, index).is_none();
            if !self.cache_page(file, index, mmu.as_deref_mut()) {
                return Err(Error::Sim(format!(
                    "out of simulated memory: {} is exhausted by mappings that cannot be reclaimed (swap is full or off: see --swap)",
                    self.memory
                )));
            }
            if miss && !self.in_prelude {
                self.counters.file_read_bytes += self.base.bytes();
            }
        }
        Ok(())
    }

    fn mremap(&mut self, pi: usize, old: u64, old_len: u64, new: u64, new_len: u64, mmu: &mut Mmu) {
        let Some(v) = self.procs[pi].find_vma(old).cloned() else { return };
        // Swapped pages move with the range when they stay aligned; the others are dropped.
        for (k, e) in self.take_swapped(pi, old, old + old_len) {
            let size = self.sizes[e.si as usize].bytes();
            let to = new.wrapping_add(k.wrapping_sub(old));
            if k >= old && to & (size - 1) == 0 && to + size <= new + new_len {
                self.procs[pi].swapped.insert(to, e);
            } else {
                self.swap.slot_put(e.slot);
            }
        }
        let mut moved = Vec::new();
        self.procs[pi].pt.unmap_range(old, old_len, &mut moved);
        let asid = self.procs[pi].asid;
        for t in &moved {
            mmu.invalidate(t.start, asid, t.size_idx);
        }
        mmu.flush_pwc();
        self.remove_vmas(pi, old, old + old_len, mmu);
        let nv = Vma { start: new, end: new + new_len, ..v };
        self.insert_vma(pi, nv, mmu);
        self.settle_pt(pi);
        let shift = self.base.shift();
        for t in moved {
            let size = self.sizes[t.size_idx as usize].bytes();
            let to = new.wrapping_add(t.start.wrapping_sub(old));
            // Page-cache pages are not moved: they are unmapped here and fault back in from the
            // cache at the new address (their reverse-map entries name the file mapping).
            let keep = t.start >= old && to & (size - 1) == 0 && to + size <= new + new_len && !self.is_file_frame(t.pfn.0);
            if keep && self.procs[pi].pt.map(to, t.size_idx, t.pfn) {
                self.counters.pages_moved += 1;
                if t.cow {
                    self.procs[pi].pt.set_cow(to, t.size_idx, true);
                }
                self.replace_mapper(t.pfn.0, Owner::anon(pi, t.start >> shift), Owner::anon(pi, to >> shift));
                if self.swap.enabled() {
                    let (a, b) = (self.page_ref(pi, t.start, t.size_idx), self.page_ref(pi, to, t.size_idx));
                    self.replacement.on_remove(a);
                    self.replacement.on_insert(b);
                }
            } else {
                self.release(pi, &[t]);
            }
        }
        // The pages mapped at the new address may have needed page-table nodes of their own.
        self.settle_pt(pi);
    }

    /// Mechanism: process exit frees everything it had.
    pub fn exit(&mut self, pi: usize, _mmu: &mut Mmu) {
        if !self.procs[pi].alive {
            return;
        }
        self.procs[pi].relocs = Default::default();
        if !self.spec.regions.is_empty() {
            let pid = self.procs[pi].pid;
            self.spec.regions.retain(|k, _| k.0 != pid);
        }
        for (s, n) in self.procs[pi].resident.iter().enumerate() {
            if s < self.sizes.len() {
                self.final_resident[s] += n * self.sizes[s].bytes();
            }
        }
        let c = self.contiguity_of(pi);
        self.final_contiguity.add(&c);
        // No per-page shootdown: the address-space identifier dies with the process and is
        // not reused until the identifiers wrap, when every TLB is flushed (flush_needed). The
        // page table goes whole: one traversal finds every page to free.
        let pages: u64 = self.procs[pi].resident.iter().sum();
        if self.pages_own_their_blocks() && self.phys.reservs.count() == 0 && pages >= 64 {
            // What `release` does in that case, without a list of every page: the frames are
            // freed straight from the table. Freeing many blocks does not depend on their
            // order, so the buddy lists end exactly as `release` leaves them.
            let orders: Vec<u8> = (0..self.sizes.len() as u32).map(|si| self.order_of(si).0).collect();
            let pt = &self.procs[pi].pt;
            let freed = self.phys.free_blocks_visited(None, &mut |f| pt.for_each_page(&mut |t| f(t.pfn.0, orders[t.size_idx as usize])));
            debug_assert_eq!(freed, pages, "resident pages disagree with the page table");
            self.counters.pages_freed += freed;
            let p = &mut self.procs[pi];
            p.resident = [0; MAX_SIZES];
            p.cow_pages = 0;
        } else {
            let pages = self.procs[pi].pt.pages();
            self.release(pi, &pages);
        }
        self.drop_swapped(pi, 0, u64::MAX);
        let old = std::mem::replace(&mut self.procs[pi].pt, PageTable::dead(self.base));
        for f in old.node_frames().chain(old.released.iter().copied()) {
            self.phys.free(Pfn(f), Order(0));
        }
        // A dead process keeps an empty table that holds no frame.
        self.procs[pi].pt.created.clear();
        let p = &mut self.procs[pi];
        debug_assert_eq!(p.resident, [0; MAX_SIZES]);
        debug_assert_eq!(p.cow_pages, 0);
        p.vmas.clear();
        p.alive = false;
        self.counters.exits += 1;
    }

    /// Resident bytes per size: processes still alive, plus those that exited (at exit time).
    pub fn end_resident(&self) -> Vec<u64> {
        let mut r = self.final_resident;
        for p in self.procs.iter().filter(|p| p.alive) {
            for (s, n) in p.resident.iter().enumerate() {
                if s < self.sizes.len() {
                    r[s] += n * self.sizes[s].bytes();
                }
            }
        }
        r[..self.sizes.len()].to_vec()
    }

    pub fn resident_now(&self) -> Vec<u64> {
        let mut r = vec![0u64; self.sizes.len()];
        for p in self.procs.iter().filter(|p| p.alive) {
            for s in 0..self.sizes.len() {
                r[s] += p.resident[s] * self.sizes[s].bytes();
            }
        }
        r
    }

    pub fn oom(&self, pid: u32) -> Error {
        Error::Sim(format!(
            "out of simulated memory: {} is exhausted (process {pid}) and nothing is left to reclaim (the page cache is empty, and swap is full or off: see --swap); give the scenario or --memory a larger size",
            self.memory
        ))
    }

    /// Check the OS model's invariants (run by tests after every event; O(frames + pages)):
    /// the allocator's own (frames::PhysMem::validate), every mapping points at a block it
    /// owns (head, order of its size, anonymous, reverse map naming this mapping), every
    /// anonymous block is mapped exactly once, page-table frames match live table nodes,
    /// resident counters match the page tables, VMAs are sorted and disjoint, and free plus
    /// used frames equals the total.
    pub fn validate(&self) -> std::result::Result<(), String> {
        self.phys.validate()?;
        self.phys.validate_reservations()?;
        self.files.validate()?;
        let mut anon_frames = 0u64;
        let mut pt_frames = 0u64;
        let mut shared_seen = 0u64;
        let mut file_mapped = 0u64;
        let mut file_ptes = 0u64;
        for (pi, p) in self.procs.iter().enumerate() {
            let pages = p.pt.pages();
            let mut per = [0u64; MAX_SIZES];
            let mut last_end = 0u64;
            let mut cow = 0u64;
            for t in &pages {
                per[t.size_idx as usize] += 1;
                if t.start < last_end {
                    return Err(format!("pid {}: overlapping pages at {:#x}", p.pid, t.start));
                }
                last_end = t.start + self.sizes[t.size_idx as usize].bytes();
                let o = self.order_of(t.size_idx).0;
                let f = t.pfn.0;
                if f < self.phys.total_frames() && self.phys.kind_of(f) == FrameKind::File && o > 0 {
                    // A file superpage: order-0 page-cache frames, each listing this mapping.
                    for k in 0..1u64 << o {
                        let g = f + k;
                        let want = Owner::anon(pi, (t.start >> self.base.shift()) + k);
                        let ok = self.phys.kind_of(g) == FrameKind::File
                            && self.phys.is_head(g)
                            && self.phys.order_at(g) == 0
                            && self.phys.owner(g).as_file().is_some()
                            && self.files.mappers.get(&g).is_some_and(|l| l.contains(&want));
                        if !ok {
                            return Err(format!("pid {}: file superpage at {:#x} covers frame {g:#x}, not a page-cache page listing it", p.pid, t.start));
                        }
                    }
                    file_mapped += 1 << o;
                    file_ptes += 1;
                    if t.cow {
                        cow += 1;
                    }
                    continue;
                }
                if f >= self.phys.total_frames() || !self.phys.is_head(f) || self.phys.order_at(f) != o {
                    return Err(format!("pid {}: page at {:#x} maps frame {f:#x}, which is not the head of an order-{o} block", p.pid, t.start));
                }
                let want = Owner::anon(pi, t.start >> self.base.shift());
                if self.phys.kind_of(f) == FrameKind::File {
                    let ok = self.phys.owner(f).as_file().is_some() && self.files.mappers.get(&f).is_some_and(|l| l.contains(&want));
                    if !ok || o != 0 {
                        return Err(format!("pid {}: page at {:#x} maps page-cache frame {f:#x} without being listed as its mapper", p.pid, t.start));
                    }
                    file_mapped += 1;
                    file_ptes += 1;
                    if t.cow {
                        cow += 1;
                    }
                    continue;
                }
                if self.phys.kind_of(f) != FrameKind::Anon {
                    return Err(format!("pid {}: page at {:#x} maps a {} frame", p.pid, t.start, self.phys.kind_of(f).name()));
                }
                let owner = self.phys.owner(f);
                if owner == Owner::SHARED {
                    let list = self.shared.get(&f).ok_or_else(|| format!("frame {f:#x} is marked shared but has no list"))?;
                    if list.len() < 2 || !list.contains(&want) {
                        return Err(format!("pid {}: shared frame {f:#x} mapped at {:#x} does not list this mapping ({} mappers)", p.pid, t.start, list.len()));
                    }
                    // Count a shared block once: at its first listed mapping.
                    if list[0] == want {
                        anon_frames += 1u64 << o;
                    }
                    shared_seen += 1;
                } else if owner != want {
                    return Err(format!(
                        "pid {}: frame {f:#x} mapped at {:#x} has reverse map {:?}, expected {:?} (double-mapped or stale)",
                        p.pid, t.start, owner, want
                    ));
                } else {
                    anon_frames += 1u64 << o;
                }
                if t.cow {
                    cow += 1;
                }
            }
            if cow != p.cow_pages {
                return Err(format!("pid {}: {} copy-on-write pages counted, {} in the page table", p.pid, p.cow_pages, cow));
            }
            if per != p.resident {
                return Err(format!("pid {}: resident counters {:?} disagree with the page table {:?}", p.pid, &p.resident[..4], &per[..4]));
            }
            let nodes = p.pt.node_frames().count() as u64;
            if p.alive && nodes != p.pt.live_nodes {
                return Err(format!("pid {}: {} page-table nodes but {} frames back them", p.pid, p.pt.live_nodes, nodes));
            }
            pt_frames += nodes;
            let mut prev_end = 0;
            for (k, v) in &p.vmas {
                if *k != v.start || v.start >= v.end || v.start < prev_end {
                    return Err(format!("pid {}: bad VMA [{:#x},{:#x})", p.pid, v.start, v.end));
                }
                prev_end = v.end;
            }
        }
        let by_kind = self.phys.frames_by_kind();
        if by_kind[FrameKind::Anon as usize] != anon_frames {
            return Err(format!("anonymous frames not conserved: {} allocated, {} mapped (leaked or lost)", by_kind[FrameKind::Anon as usize], anon_frames));
        }
        self.validate_swap()?;
        let mapped_pages: u64 = self.procs.iter().map(|p| p.resident.iter().sum::<u64>()).sum::<u64>() - file_ptes;
        let file_listed: u64 = self.files.mappers.values().map(|l| l.len() as u64).sum();
        if file_listed != file_mapped {
            return Err(format!("page-cache frames list {file_listed} mappings, page tables hold {file_mapped}"));
        }
        if self.swap.enabled() && self.replacement.len() as u64 != mapped_pages {
            return Err(format!("replacement tracks {} pages, {mapped_pages} are mapped", self.replacement.len()));
        }
        self.replacement.check()?;
        let listed: u64 = self.shared.values().map(|l| l.len() as u64).sum();
        if listed != shared_seen {
            return Err(format!("shared blocks list {listed} mappings but {shared_seen} page-table entries map shared blocks"));
        }
        let mut file_frames = 0u64;
        for (file, index, f) in self.files.cache.pages() {
            if !self.phys.is_head(f) || self.phys.order_at(f) != 0 || self.phys.kind_of(f) != FrameKind::File {
                return Err(format!("page cache: file {file} page {index} is in frame {f:#x}, which is not an order-0 file frame"));
            }
            if self.phys.owner(f) != Owner::file(file, index) {
                return Err(format!("page cache: frame {f:#x} holds file {file} page {index} but its reverse map says {:?}", self.phys.owner(f)));
            }
            file_frames += 1;
        }
        for pfn in 0..self.phys.total_frames() {
            if let Some(o) = self.phys.cache_owner(pfn) {
                let (file, index) = o.as_file().expect("checked by the frame table");
                if !self.files.cache.in_cache_frame(file, index, pfn) {
                    return Err(format!("cache frame {pfn:#x} holds file {file} page {index}, which the page cache does not list there"));
                }
            }
        }
        if by_kind[FrameKind::File as usize] != file_frames || file_frames != self.files.cache.cached {
            return Err(format!("file frames: {} allocated, {} cached, {} counted", by_kind[FrameKind::File as usize], file_frames, self.files.cache.cached));
        }
        for &f in &self.wired.frames {
            if !self.phys.is_head(f) || self.phys.kind_of(f) != FrameKind::Wired {
                return Err(format!("wired frame {f:#x} is no longer a wired block"));
            }
        }
        if by_kind[FrameKind::Wired as usize] != self.wired.frames.len() as u64 + (self.wired.pool.1 - self.wired.pool.0) {
            return Err(format!("{} wired frames allocated, {} placed", by_kind[FrameKind::Wired as usize], self.wired.frames.len()));
        }
        if by_kind[FrameKind::PageTable as usize] != pt_frames {
            return Err(format!("page-table frames: {} allocated, {} in live tables", by_kind[FrameKind::PageTable as usize], pt_frames));
        }
        let used: u64 = by_kind[1..].iter().sum();
        if used + self.phys.free_frames() != self.phys.total_frames() {
            return Err(format!("frames not conserved: {used} used + {} free != {} total", self.phys.free_frames(), self.phys.total_frames()));
        }
        Ok(())
    }
}
