//! A radix page table with mixed mapping sizes, shaped by the machine (levels, bits per level,
//! base page). A page whose size equals a level's span is one leaf entry at that level (x86
//! 2MB/1GB); a size between spans is stored as replicated leaf entries at the deepest level
//! whose span is at most the size (ARM's contiguous bit, Alpha's PTE replication).
//!
//! Invariants: an entry is either empty, a leaf (present, with its size index and first frame),
//! or a pointer to a child node; every leaf of a replicated page holds the same size index and
//! first frame; nodes are only created on the way to a leaf.

use crate::mmu::machine::radix_leaf_level;
use crate::units::{PageSize, Pfn};
use std::cell::Cell;

const PRESENT: u64 = 1;
const LEAF: u64 = 2;
const SIZE_SHIFT: u32 = 2; // 4 bits of size index
/// Write-protected for copy-on-write (a leaf shared after fork): a write must fault.
const COW: u64 = 64;
const PAYLOAD_SHIFT: u32 = 8; // pfn or child node index
const META_COUNT: u32 = 0x1_ffff;
const META_SIZE_SHIFT: u32 = 20;
const META_MIXED: u32 = 1 << 24;
const NO_FRAME: u64 = u64::MAX;
const REGION_CACHE: usize = 1024;

/// The region cache's tag for a region: its bits above the cache index, plus one (0 is empty).
/// Only regions below the table's limit (at most 2^57 bytes, regions of at least 2^21) are ever
/// stored, whose tags fit in 27 bits; an address far beyond gets u32::MAX, which no stored
/// entry holds, so it never hits.
#[inline(always)]
fn region_tag(region: u64) -> u32 {
    u32::try_from((region >> REGION_CACHE.trailing_zeros()) + 1).unwrap_or(u32::MAX)
}

/// Where a walk of the upper levels ends.
enum Descent {
    Absent,
    Leaf(u64),
    /// The last-level node, and the level-2 node whose entry points to it.
    LastLevel(usize, usize),
}

/// One resolved translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    pub size_idx: u32,
    /// First frame of the page (in base frames).
    pub pfn: Pfn,
    /// Virtual address where the page starts.
    pub start: u64,
    /// Write-protected for copy-on-write.
    pub cow: bool,
}

pub struct PageTable {
    levels: u8,
    bits: u32,
    base: PageSize,
    sizes: Vec<PageSize>,
    /// All nodes in one flat array: node i holds entries [i << bits, (i+1) << bits).
    nodes: Vec<u64>,
    /// Per node: how many of its entries are leaves (bits 0-16), the size index of its first
    /// leaf (bits 20-23), and whether leaves of another size were added since it was empty
    /// (bit 24). A node full of leaves of one size answers "what size maps this address"
    /// without reading the leaf itself: the hot path of a walk touches only upper levels.
    meta: Vec<u32>,
    /// Per node, a bit per entry that holds a leaf. With `meta`, answers "is this address
    /// mapped, and by what size" from 64 bytes per node instead of the 4KB node itself.
    leaf_bits: Vec<u64>,
    words_per_node: usize,
    free_nodes: Vec<u32>,
    /// Nodes in use (each takes one page-table frame).
    pub live_nodes: u64,
    /// The frame backing each node (NO_FRAME until the OS gives it one).
    node_frame: Vec<u64>,
    /// Nodes created since the OS last settled the table's frames, and frames of nodes freed
    /// since then: the table does not own an allocator, the OS reconciles (`Os::settle_pt`).
    pub created: Vec<u32>,
    pub released: Vec<u64>,
    /// Direct-mapped cache from a last-level table's span (va >> span of a level-2 entry) to
    /// that table's node, so that the common walk (upper levels unchanged) reads one entry
    /// instead of three. An entry is (region's bits above the index + 1, node, the level-2
    /// node above it), 12 bytes so that the cache stays small beside the TLB arrays; tag 0 =
    /// empty. The level-2 node gives a walk that starts one level up (its page-walk caches
    /// held only the levels above) its two entries' addresses. Cleared whenever a table node is
    /// freed.
    region_cache: Box<[Cell<(u32, u32, u32)>]>,
    /// Precomputed: span shift of an entry at each level (index = level), index mask, and one
    /// past the highest mappable address. Walks run on every TLB miss, so they compute nothing.
    span_shifts: [u32; 8],
    index_mask: u64,
    limit: u64,
}

impl PageTable {
    pub fn new(levels: u8, bits: u8, base: PageSize, sizes: Vec<PageSize>) -> PageTable {
        let mut pt = PageTable {
            levels,
            bits: bits as u32,
            base,
            sizes,
            nodes: Vec::new(),
            meta: Vec::new(),
            leaf_bits: Vec::new(),
            words_per_node: (1usize << bits).div_ceil(64),
            free_nodes: Vec::new(),
            live_nodes: 0,
            node_frame: Vec::new(),
            created: Vec::new(),
            released: Vec::new(),
            // Only tables of two levels or more consult the cache (`cached_last_level`).
            region_cache: vec![Cell::new((0u32, 0u32, 0u32)); if levels >= 2 { REGION_CACHE } else { 0 }].into_boxed_slice(),
            span_shifts: [0; 8],
            index_mask: (1u64 << bits) - 1,
            limit: 0,
        };
        for level in 1..=levels.min(7) {
            pt.span_shifts[level as usize] = base.shift() + bits as u32 * (level as u32 - 1);
        }
        pt.limit = 1u64.checked_shl(pt.span_shifts[levels as usize] + bits as u32).unwrap_or(u64::MAX);
        pt.new_node(); // the root
        pt
    }

    /// The table an exited process keeps: empty, one level of two entries, no region cache
    /// (a few hundred bytes instead of the 13 KiB of a live table, so that a trace of many
    /// short-lived processes costs the host little; nothing is ever mapped in it).
    pub fn dead(base: PageSize) -> PageTable {
        PageTable::new(1, 1, base, vec![base])
    }

    fn new_node(&mut self) -> u32 {
        self.live_nodes += 1;
        let n = match self.free_nodes.pop() {
            Some(i) => i,
            None => {
                let n = (self.nodes.len() >> self.bits) as u32;
                self.nodes.resize(self.nodes.len() + (1 << self.bits), 0);
                self.meta.push(0);
                self.leaf_bits.resize(self.leaf_bits.len() + self.words_per_node, 0);
                self.node_frame.push(NO_FRAME);
                n
            }
        };
        self.created.push(n);
        n
    }

    /// Give node `n` its frame (the OS calls this for each entry of `created`).
    pub fn set_node_frame(&mut self, n: u32, pfn: u64) {
        self.node_frame[n as usize] = pfn;
    }

    /// Frames of every live node (for exit and for the validator).
    pub fn node_frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.node_frame.iter().copied().filter(|&f| f != NO_FRAME)
    }

    #[inline(always)]
    fn slot(&self, node: usize, idx: usize) -> usize {
        (node << self.bits) | idx
    }

    /// Shift of the span one entry at `level` covers.
    #[inline(always)]
    fn span_shift(&self, level: u8) -> u32 {
        self.span_shifts[level as usize & 7]
    }

    #[inline(always)]
    fn index(&self, va: u64, level: u8) -> usize {
        ((va >> self.span_shift(level)) & self.index_mask) as usize
    }

    pub fn leaf_level(&self, p: PageSize) -> u8 {
        radix_leaf_level(self.base, self.bits as u8, self.levels, p)
    }

    /// Walk the upper levels for `va`: a leaf entry found above the last level, the
    /// last-level node that holds `va`'s entry, or nothing mapped on the way.
    #[inline(always)]
    fn descend(&self, va: u64) -> Descent {
        if va >= self.limit {
            return Descent::Absent;
        }
        let (mut node, mut parent) = (0usize, 0usize);
        let mut level = self.levels;
        while level > 1 {
            let e = self.nodes[self.slot(node, self.index(va, level))];
            if e & PRESENT == 0 {
                return Descent::Absent;
            }
            if e & LEAF != 0 {
                return Descent::Leaf(e);
            }
            parent = node;
            node = (e >> PAYLOAD_SHIFT) as usize;
            level -= 1;
        }
        Descent::LastLevel(node, parent)
    }

    fn translation(&self, e: u64, va: u64) -> Translation {
        let size_idx = ((e >> SIZE_SHIFT) & 0xf) as u32;
        let size = self.sizes[size_idx as usize];
        Translation { size_idx, pfn: Pfn(e >> PAYLOAD_SHIFT), start: va & !size.mask(), cow: e & COW != 0 }
    }

    /// Resolve `va`.
    #[inline]
    pub fn lookup(&self, va: u64) -> Option<Translation> {
        let e = self.entry_of(va)?;
        (e & PRESENT != 0 && e & LEAF != 0).then(|| self.translation(e, va))
    }

    /// The physical address `va` maps to, if mapped (the region cache first, as `size_at`).
    /// Inlined: the loop with data caches calls it for every data access.
    #[inline(always)]
    pub fn paddr(&self, va: u64) -> Option<u64> {
        let e = self.entry_of(va)?;
        if e & PRESENT == 0 || e & LEAF == 0 {
            return None;
        }
        let t = self.translation(e, va);
        Some((t.pfn.0 << self.base.shift()) + (va - t.start))
    }

    /// Physical addresses of the entries a walk of `va` reads from level `first` down to
    /// `leaf`, in the walk's order, into `out`; returns how many. Fewer when the walk ends
    /// early (nothing mapped, a leaf above `leaf`) or a node has no frame yet. Entries are 8
    /// bytes (x86-64, AArch64 and Alpha PTEs all are).
    pub fn entry_addrs(&self, va: u64, first: u8, leaf: u8, out: &mut [u64; 8]) -> usize {
        if va >= self.limit {
            return 0;
        }
        let shift = self.base.shift();
        if leaf == 1 && first <= 2 {
            // The common walks (the page-walk caches gave the levels above `first`): one or two
            // entries, whose tables the region cache usually knows. Stops at a node without a
            // frame, as the loop below does.
            if let Some((node, parent)) = self.cached_region(va) {
                let mut n = 0;
                for (level, nd) in [(2u8, parent), (1, node)] {
                    if level > first {
                        continue;
                    }
                    let f = self.node_frame[nd];
                    if f == NO_FRAME {
                        break;
                    }
                    out[n] = (f << shift) + self.index(va, level) as u64 * 8;
                    n += 1;
                }
                return n;
            }
        }
        let (mut node, mut level, mut n) = (0usize, self.levels, 0usize);
        loop {
            let idx = self.index(va, level);
            if level <= first && level >= leaf && n < out.len() {
                let f = self.node_frame[node];
                if f == NO_FRAME {
                    break;
                }
                out[n] = (f << shift) + idx as u64 * 8;
                n += 1;
            }
            if level <= leaf || level == 1 {
                break;
            }
            let e = self.nodes[self.slot(node, idx)];
            if e & PRESENT == 0 || e & LEAF != 0 {
                break;
            }
            node = (e >> PAYLOAD_SHIFT) as usize;
            level -= 1;
        }
        n
    }

    /// The size index of the page mapping `va`, if any: `lookup` without reading the
    /// last-level entry when the node's leaf bitmap and summary answer (it holds one size).
    #[inline]
    pub fn size_at(&self, va: u64) -> Option<u32> {
        if let Some(node) = self.cached_last_level(va) {
            return self.last_level_size(node, va);
        }
        match self.descend(va) {
            Descent::Absent => None,
            Descent::Leaf(e) => Some(((e >> SIZE_SHIFT) & 0xf) as u32),
            Descent::LastLevel(node, parent) => {
                self.remember_last_level(va, node, parent);
                self.last_level_size(node, va)
            }
        }
    }

    /// The entry that maps `va` (a leaf above the last level, or its last-level entry, which
    /// may be empty), the region cache first; None if the walk ends above the last level.
    #[inline(always)]
    fn entry_of(&self, va: u64) -> Option<u64> {
        let node = match self.cached_last_level(va) {
            Some(node) => node,
            None => match self.descend(va) {
                Descent::Absent => return None,
                Descent::Leaf(e) => return Some(e),
                Descent::LastLevel(node, parent) => {
                    self.remember_last_level(va, node, parent);
                    node
                }
            },
        };
        Some(self.nodes[self.slot(node, self.index(va, 1))])
    }

    /// Note in the region cache that `node` is the last-level table of `va`'s region, and
    /// `parent` the level-2 table above it.
    #[inline(always)]
    fn remember_last_level(&self, va: u64, node: usize, parent: usize) {
        if self.levels > 1 {
            let region = va >> self.span_shift(2);
            self.region_cache[region as usize & (REGION_CACHE - 1)].set((region_tag(region), node as u32, parent as u32));
        }
    }

    /// Whether `va` may be a copy-on-write page: false when the region cache shows its
    /// last-level entry and that entry is not one; true otherwise (ask `lookup`). Lets a write
    /// skip the walk in a process that has copy-on-write pages elsewhere.
    #[inline]
    pub fn maybe_cow(&self, va: u64) -> bool {
        match self.cached_last_level(va) {
            Some(node) => self.nodes[self.slot(node, self.index(va, 1))] & COW != 0,
            None => true,
        }
    }

    /// Whether `va` is mapped, when the region cache alone can tell (None: ask `size_at`).
    #[inline(always)]
    pub fn cached_present(&self, va: u64) -> Option<bool> {
        self.cached_last_level(va).map(|node| self.last_level_size(node, va).is_some())
    }

    /// The frame of the base page mapping `va`, when the region cache shows its last-level
    /// entry and that entry maps a base page (None: not known this cheaply, or not one).
    #[inline(always)]
    pub fn cached_base_pfn(&self, va: u64) -> Option<u64> {
        let node = self.cached_last_level(va)?;
        let e = self.nodes[self.slot(node, self.index(va, 1))];
        (e & PRESENT != 0 && e & LEAF != 0 && (e >> SIZE_SHIFT) & 0xf == 0).then_some(e >> PAYLOAD_SHIFT)
    }

    /// Ask the host to bring `va`'s last-level entry into its cache, when the region cache
    /// knows its table: the engine with data caches reads that entry (`paddr`) for every
    /// access, and a table larger than the host's caches makes each read wait on memory.
    /// A hint only: it changes nothing.
    #[inline(always)]
    pub fn prefetch_entry(&self, va: u64) {
        if let Some(node) = self.cached_last_level(va) {
            if let Some(e) = self.nodes.get(self.slot(node, self.index(va, 1))) {
                crate::hint::prefetch(e);
            }
        }
    }

    /// The last-level table holding `va`'s entry, if the region cache knows it.
    #[inline(always)]
    fn cached_last_level(&self, va: u64) -> Option<usize> {
        self.cached_region(va).map(|(node, _)| node)
    }

    /// The last-level node the region cache holds for `va`'s region, with the level-2 node
    /// above it.
    #[inline(always)]
    fn cached_region(&self, va: u64) -> Option<(usize, usize)> {
        if self.levels < 2 {
            return None;
        }
        let region = va >> self.span_shift(2);
        let (tag, node, parent) = self.region_cache[region as usize & (REGION_CACHE - 1)].get();
        (tag == region_tag(region)).then_some((node as usize, parent as usize))
    }

    #[inline(always)]
    fn last_level_size(&self, node: usize, va: u64) -> Option<u32> {
        let idx = self.index(va, 1);
        let m = self.meta[node];
        if m & META_MIXED == 0 {
            let w = self.leaf_bits[node * self.words_per_node + idx / 64];
            return (w >> (idx % 64) & 1 != 0).then_some((m >> META_SIZE_SHIFT) & 0xf);
        }
        let e = self.nodes[self.slot(node, idx)];
        (e & PRESENT != 0).then_some(((e >> SIZE_SHIFT) & 0xf) as u32)
    }

    fn note_leaf_added(&mut self, node: usize, idx: usize, si: u32) {
        self.leaf_bits[node * self.words_per_node + idx / 64] |= 1u64 << (idx % 64);
        let m = self.meta[node];
        let count = m & META_COUNT;
        self.meta[node] = if count == 0 {
            1 | (si << META_SIZE_SHIFT)
        } else if (m >> META_SIZE_SHIFT) & 0xf != si {
            (m + 1) | META_MIXED
        } else {
            m + 1
        };
    }

    fn note_leaf_removed(&mut self, node: usize, idx: usize) {
        self.leaf_bits[node * self.words_per_node + idx / 64] &= !(1u64 << (idx % 64));
        let m = self.meta[node] - 1;
        self.meta[node] = if m & META_COUNT == 0 { 0 } else { m };
    }

    /// Map the page of size index `si` starting at `start` (aligned) to frames from `pfn`.
    /// Returns false, changing nothing, if any part of the range is already mapped.
    pub fn map(&mut self, start: u64, si: u32, pfn: Pfn) -> bool {
        let size = self.sizes[si as usize];
        debug_assert_eq!(start & size.mask(), 0, "unaligned map");
        let leaf = self.leaf_level(size);
        if leaf == 1 && start < self.limit {
            return self.map_last_level(start, si, pfn, size);
        }
        if self.any_mapped(start, size.bytes()) {
            return false;
        }
        let reps = 1u64 << (size.shift() - self.span_shift(leaf));
        let entry = PRESENT | LEAF | ((si as u64) << SIZE_SHIFT) | (pfn.0 << PAYLOAD_SHIFT);
        for r in 0..reps {
            let va = start + (r << self.span_shift(leaf));
            let node = self.walk_create(va, leaf);
            let idx = self.index(va, leaf);
            if leaf > 1 {
                // Above the last level the slot may hold an empty lower table (nothing was
                // mapped in range): reclaim it. Last-level slots hold only leaves and are not
                // read: the write need not wait for the old value to come from memory.
                let old = self.nodes[self.slot(node, idx)];
                if old & PRESENT != 0 && old & LEAF == 0 {
                    self.free_subtree((old >> PAYLOAD_SHIFT) as u32, leaf - 1);
                }
            }
            let at = self.slot(node, idx);
            self.nodes[at] = entry;
            self.note_leaf_added(node, idx, si);
        }
        true
    }

    /// `map` for pages stored at the last level (base pages, and replicated sizes below the
    /// next level's span, which always fall in one last-level node): one walk that checks for
    /// a covering superpage on the way down and for occupied slots in the node's leaf bitmap.
    fn map_last_level(&mut self, start: u64, si: u32, pfn: Pfn, size: PageSize) -> bool {
        // Walk down once, creating missing tables; a leaf on the way is a larger page covering
        // the range. (Below a newly created table nothing can be mapped, so a refusal never
        // leaves an empty table behind.)
        let mut node = 0usize;
        let mut level = self.levels;
        if let Some(n) = self.cached_last_level(start) {
            // The region's table is known (a fault right after the walk that missed).
            node = n;
            level = 1;
        }
        while level > 1 {
            let idx = self.index(start, level);
            let e = self.nodes[self.slot(node, idx)];
            node = if e & PRESENT == 0 {
                let child = self.new_node();
                let at = self.slot(node, idx);
                self.nodes[at] = PRESENT | ((child as u64) << PAYLOAD_SHIFT);
                child as usize
            } else if e & LEAF != 0 {
                return false; // inside a larger page
            } else {
                (e >> PAYLOAD_SHIFT) as usize
            };
            level -= 1;
        }
        let first = self.index(start, 1);
        let reps = 1usize << (size.shift() - self.span_shift(1));
        for i in first..first + reps {
            if self.leaf_bits[node * self.words_per_node + i / 64] >> (i % 64) & 1 != 0 {
                return false;
            }
        }
        let entry = PRESENT | LEAF | ((si as u64) << SIZE_SHIFT) | (pfn.0 << PAYLOAD_SHIFT);
        for i in first..first + reps {
            let at = self.slot(node, i);
            self.nodes[at] = entry;
            self.note_leaf_added(node, i, si);
        }
        true
    }

    /// How many tables mapping a base page at `va` would create (0 when a larger page covers
    /// it): what the mapping will ask the frame allocator for besides the page.
    pub fn tables_missing(&self, va: u64) -> u64 {
        let mut node = 0usize;
        let mut level = self.levels;
        while level > 1 {
            let e = self.nodes[self.slot(node, self.index(va, level))];
            if e & PRESENT == 0 {
                return (level - 1) as u64;
            }
            if e & LEAF != 0 {
                return 0;
            }
            node = (e >> PAYLOAD_SHIFT) as usize;
            level -= 1;
        }
        0
    }

    fn walk_create(&mut self, va: u64, leaf: u8) -> usize {
        let mut node = 0usize;
        let mut level = self.levels;
        while level > leaf {
            let idx = self.index(va, level);
            let e = self.nodes[self.slot(node, idx)];
            node = if e & PRESENT == 0 {
                let child = self.new_node();
                let at = self.slot(node, idx);
                self.nodes[at] = PRESENT | ((child as u64) << PAYLOAD_SHIFT);
                child as usize
            } else {
                debug_assert!(e & LEAF == 0, "walk_create through a leaf");
                (e >> PAYLOAD_SHIFT) as usize
            };
            level -= 1;
        }
        node
    }

    fn free_subtree(&mut self, node: u32, level: u8) {
        if level > 1 {
            for i in 0..1usize << self.bits {
                let e = self.nodes[self.slot(node as usize, i)];
                if e & PRESENT != 0 && e & LEAF == 0 {
                    self.free_subtree((e >> PAYLOAD_SHIFT) as u32, level - 1);
                }
            }
        }
        let s = self.slot(node as usize, 0);
        self.nodes[s..s + (1 << self.bits)].fill(0);
        self.meta[node as usize] = 0;
        let w = node as usize * self.words_per_node;
        self.leaf_bits[w..w + self.words_per_node].fill(0);
        self.free_nodes.push(node);
        self.live_nodes -= 1;
        for c in self.region_cache.iter() {
            c.set((0u32, 0u32, 0u32));
        }
        let f = std::mem::replace(&mut self.node_frame[node as usize], NO_FRAME);
        if f != NO_FRAME {
            self.released.push(f);
        }
    }

    /// One past the highest address the table can map.
    #[inline(always)]
    pub fn va_limit(&self) -> u64 {
        self.limit
    }

    fn any_mapped(&self, start: u64, len: u64) -> bool {
        let mut va = start;
        let end = start.saturating_add(len).min(self.va_limit());
        while va < end {
            match self.size_at(va) {
                Some(_) => return true,
                None => va = self.next_boundary(va),
            }
        }
        false
    }

    /// The next address worth probing after an unmapped `va`: the end of the largest empty
    /// span found on the way down.
    fn next_boundary(&self, va: u64) -> u64 {
        let mut node = 0usize;
        let mut level = self.levels;
        loop {
            let e = self.nodes[self.slot(node, self.index(va, level))];
            if e & PRESENT == 0 || level == 1 {
                let s = self.span_shift(level);
                return ((va >> s) + 1).checked_shl(s).unwrap_or(u64::MAX);
            }
            node = (e >> PAYLOAD_SHIFT) as usize;
            level -= 1;
        }
    }

    /// Remove every page that overlaps [start, start+len). Returns the pages removed (whole
    /// pages: a superpage partly inside the range is removed whole).
    pub fn unmap_range(&mut self, start: u64, len: u64, out: &mut Vec<Translation>) {
        let end = start.saturating_add(len).min(self.va_limit());
        let mut va = start;
        while va < end {
            match self.lookup(va) {
                Some(t) => {
                    self.clear_page(t);
                    out.push(t);
                    va = t.start + self.sizes[t.size_idx as usize].bytes();
                }
                None => va = self.next_boundary(va),
            }
        }
    }

    /// Every page that overlaps [start, start+len), in address order (nothing changes).
    pub fn pages_in_range(&self, start: u64, len: u64, out: &mut Vec<Translation>) {
        let end = start.saturating_add(len).min(self.va_limit());
        let mut va = start;
        while va < end {
            match self.lookup(va) {
                Some(t) => {
                    out.push(t);
                    va = t.start + self.sizes[t.size_idx as usize].bytes();
                }
                None => va = self.next_boundary(va),
            }
        }
    }

    /// Remove the page `t` that `lookup` just returned (unchanged since): `unmap_range` over
    /// exactly its range, without looking it up again (a swap-out, once per evicted page).
    pub fn unmap_page(&mut self, t: Translation) {
        debug_assert_eq!(self.lookup(t.start), Some(t), "unmap_page of a page not mapped as given");
        self.clear_page(t);
    }

    fn clear_page(&mut self, t: Translation) {
        let size = self.sizes[t.size_idx as usize];
        let leaf = self.leaf_level(size);
        let reps = 1u64 << (size.shift() - self.span_shift(leaf));
        for r in 0..reps {
            let va = t.start + (r << self.span_shift(leaf));
            let mut node = 0usize;
            let mut level = self.levels;
            while level > leaf {
                let e = self.nodes[self.slot(node, self.index(va, level))];
                node = (e >> PAYLOAD_SHIFT) as usize;
                level -= 1;
            }
            let idx = self.index(va, leaf);
            let at = self.slot(node, idx);
            self.nodes[at] = 0;
            self.note_leaf_removed(node, idx);
        }
    }

    /// Point the page mapped at `t.start` (size `t.size_idx`) at new frames (a migration or
    /// a copy). Returns false if no such page is mapped there.
    pub fn set_pfn(&mut self, start: u64, si: u32, pfn: Pfn) -> bool {
        let cow = self.lookup(start).is_some_and(|t| t.cow);
        self.rewrite(start, si, pfn, cow)
    }

    /// Set or clear the copy-on-write protection of the page at `start`.
    pub fn set_cow(&mut self, start: u64, si: u32, cow: bool) -> bool {
        match self.lookup(start) {
            Some(t) if t.start == start && t.size_idx == si => self.rewrite(start, si, t.pfn, cow),
            _ => false,
        }
    }

    /// Rewrite every entry of the page at `start` (size `si`): frames and protection.
    pub fn rewrite(&mut self, start: u64, si: u32, pfn: Pfn, cow: bool) -> bool {
        let size = self.sizes[si as usize];
        let leaf = self.leaf_level(size);
        let reps = 1u64 << (size.shift() - self.span_shift(leaf));
        let entry = PRESENT | LEAF | ((si as u64) << SIZE_SHIFT) | (pfn.0 << PAYLOAD_SHIFT) | if cow { COW } else { 0 };
        for r in 0..reps {
            let va = start + (r << self.span_shift(leaf));
            let mut node = 0usize;
            let mut level = self.levels;
            while level > leaf {
                let e = self.nodes[self.slot(node, self.index(va, level))];
                if e & PRESENT == 0 || e & LEAF != 0 {
                    return false;
                }
                node = (e >> PAYLOAD_SHIFT) as usize;
                level -= 1;
            }
            let at = self.slot(node, self.index(va, leaf));
            let old = self.nodes[at];
            if old & (PRESENT | LEAF) != PRESENT | LEAF || (old >> SIZE_SHIFT) & 0xf != si as u64 {
                return false;
            }
            self.nodes[at] = entry;
        }
        true
    }

    /// Every mapped page, in address order.
    pub fn pages(&self) -> Vec<Translation> {
        let mut out = Vec::new();
        self.for_each_page(&mut |t| out.push(t));
        out
    }

    /// Call `f` on every mapped page, in address order, without building a list (a process's
    /// exit visits every page of a table that may map millions).
    pub fn for_each_page(&self, f: &mut impl FnMut(Translation)) {
        // A page larger than one slot's span fills several slots: visit it once.
        let mut last = None;
        self.collect(0, self.levels, 0, &mut |t: Translation| {
            if last != Some(t.start) {
                last = Some(t.start);
                f(t);
            }
        });
    }

    fn collect(&self, node: usize, level: u8, prefix: u64, f: &mut impl FnMut(Translation)) {
        let base = self.slot(node, 0);
        for (i, &e) in self.nodes[base..base + (1 << self.bits)].iter().enumerate() {
            if e & PRESENT == 0 {
                continue;
            }
            let va = prefix | ((i as u64) << self.span_shift(level));
            if e & LEAF != 0 {
                f(self.translation(e, va));
            } else if level > 1 {
                self.collect((e >> PAYLOAD_SHIFT) as usize, level - 1, va, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86() -> PageTable {
        PageTable::new(4, 9, PageSize::K4, vec![PageSize::K4, PageSize::K64, PageSize::M2, PageSize::G1])
    }

    #[test]
    fn maps_and_finds_each_size() {
        let mut pt = x86();
        assert!(pt.map(0x1000, 0, Pfn(7)));
        assert!(pt.map(0x20_0000, 2, Pfn(512)));
        assert!(pt.map(0x4000_0000, 3, Pfn(1 << 18)));
        assert!(pt.map(0x1_0000, 1, Pfn(16)));
        assert_eq!(pt.lookup(0x1abc).unwrap().pfn, Pfn(7));
        assert_eq!(pt.lookup(0x2f_ffff).unwrap(), Translation { size_idx: 2, pfn: Pfn(512), start: 0x20_0000, cow: false });
        assert_eq!(pt.lookup(0x7fff_ffff).unwrap().size_idx, 3);
        assert_eq!(pt.lookup(0x1_f000).unwrap().start, 0x1_0000, "replicated 64KB entry");
        assert!(pt.lookup(0x2000).is_none());
        assert_eq!(pt.pages().len(), 4);
        for va in [0x1abcu64, 0x2f_ffff, 0x7fff_ffff, 0x1_f000, 0x2000] {
            assert_eq!(pt.size_at(va), pt.lookup(va).map(|t| t.size_idx), "{va:#x}");
        }
    }

    #[test]
    fn leaf_bitmaps_answer_like_the_leaves() {
        let mut pt = x86();
        for i in 0..512u64 {
            assert!(pt.map(0x40_0000 + i * 4096, 0, Pfn(i)));
        }
        assert_eq!(pt.size_at(0x40_0000 + 77 * 4096), Some(0));
        let mut out = Vec::new();
        pt.unmap_range(0x40_0000 + 5 * 4096, 4096, &mut out);
        assert_eq!(pt.size_at(0x40_0000 + 5 * 4096), None);
        assert_eq!(pt.size_at(0x40_0000 + 6 * 4096), Some(0));
        assert!(!pt.map(0x40_0000, 1, Pfn(1 << 20)), "64KB over mapped base pages is refused");
        pt.unmap_range(0x40_0000, 0x1_0000, &mut out);
        assert!(pt.map(0x40_0000, 1, Pfn(1 << 20)));
        assert_eq!(pt.size_at(0x40_0000 + 3 * 4096), Some(1), "mixed node: read the leaf");
        assert_eq!(pt.size_at(0x40_0000 + 200 * 4096), Some(0));
    }

    #[test]
    fn refuses_overlap_and_unmaps_whole_pages() {
        let mut pt = x86();
        assert!(pt.map(0x20_0000, 0, Pfn(1)));
        assert!(!pt.map(0x20_0000, 2, Pfn(512)), "2MB over a mapped 4KB page");
        assert!(pt.map(0x60_0000, 2, Pfn(1024)));
        assert!(!pt.map(0x60_1000, 0, Pfn(9)), "4KB inside a mapped 2MB page");
        assert!(!pt.map(0x61_0000, 1, Pfn(16)), "64KB inside a mapped 2MB page");
        let mut out = Vec::new();
        pt.unmap_range(0x20_0000, 0x1000, &mut out);
        assert_eq!(out.len(), 1);
        assert!(pt.lookup(0x20_0000).is_none());
        let before = pt.live_nodes;
        assert!(pt.map(0x20_0000, 2, Pfn(512)), "the empty level-1 table gives way");
        assert_eq!(pt.live_nodes, before - 1);
        assert_eq!(pt.lookup(0x20_1000).unwrap().size_idx, 2);
        let mut all = Vec::new();
        pt.unmap_range(0, u64::MAX, &mut all);
        assert_eq!(all.len(), 2, "unmapping everything terminates and finds both pages");
    }

    #[test]
    fn maybe_cow_never_hides_a_copy_on_write_page() {
        let mut pt = x86();
        assert!(pt.map(0x20_0000, 0, Pfn(1)));
        assert!(pt.map(0x20_1000, 0, Pfn(2)));
        assert!(pt.maybe_cow(0x20_0000), "region not cached yet: the caller must look");
        // Reading the entry (as `lookup` and `size_at` do) caches the region's table.
        assert!(pt.set_cow(0x20_1000, 0, true));
        assert!(!pt.maybe_cow(0x20_0000));
        assert!(pt.maybe_cow(0x20_1000));
        assert!(!pt.maybe_cow(0x20_2000), "an empty slot is not copy-on-write");
        // A 2MB copy-on-write page replaces the table: the cache no longer answers for it.
        let mut out = Vec::new();
        pt.unmap_range(0x20_0000, 0x20_0000, &mut out);
        assert!(pt.map(0x20_0000, 2, Pfn(512)));
        assert!(pt.set_cow(0x20_0000, 2, true));
        for va in [0x20_0000u64, 0x20_1000, 0x3f_f000] {
            assert_eq!(pt.lookup(va).map(|t| t.cow), Some(true));
            assert!(pt.maybe_cow(va), "{va:#x}");
        }
    }

    /// Forget every region, so that the next answer walks the upper levels.
    fn forget_regions(pt: &PageTable) {
        for e in pt.region_cache.iter() {
            e.set((0, 0, 0));
        }
    }

    #[test]
    fn entry_addrs_from_the_region_cache_equal_a_walk_from_the_root() {
        let mut pt = x86();
        for (i, va) in [0x20_0000u64, 0x20_1000, 0x40_0000, 0x4000_0000, 0x80_0000_0000].into_iter().enumerate() {
            assert!(pt.map(va, 0, Pfn(100 + i as u64)));
        }
        // Frames for every node but one last-level table (a node without a frame ends the
        // walk's list early, cached or not).
        let created = std::mem::take(&mut pt.created);
        let skip = *created.last().unwrap();
        for (k, &n) in created.iter().enumerate() {
            if n != skip {
                pt.set_node_frame(n, 1000 + k as u64);
            }
        }
        for va in [0x20_0000u64, 0x20_1000, 0x20_2000, 0x40_0000, 0x4000_0000, 0x80_0000_0000, 0x60_0000] {
            for (first, leaf) in [(1u8, 1u8), (2, 1), (3, 1), (4, 1), (2, 2), (4, 2), (3, 3)] {
                forget_regions(&pt);
                let mut reference = [0u64; 8];
                let m = pt.entry_addrs(va, first, leaf, &mut reference);
                // Looking the address up caches its region (where a last-level table holds it).
                assert!(pt.lookup(va).is_some() || va == 0x20_2000 || va == 0x60_0000);
                assert_eq!(pt.cached_region(va).is_some(), va != 0x60_0000, "{va:#x}");
                let mut warm = [0u64; 8];
                let n = pt.entry_addrs(va, first, leaf, &mut warm);
                assert_eq!(warm[..n], reference[..m], "{va:#x} levels {first}..{leaf}");
                assert!(n >= (first - leaf + 1) as usize || va == 0x80_0000_0000 || va == 0x60_0000, "{va:#x} {first}..{leaf}: {n}");
            }
        }
    }

    #[test]
    fn region_cache_follows_tables_being_replaced() {
        let mut pt = x86();
        assert!(pt.map(0x20_0000, 0, Pfn(1)));
        assert_eq!(pt.size_at(0x20_0000), Some(0), "caches the region's table");
        let mut out = Vec::new();
        pt.unmap_range(0x20_0000, 0x1000, &mut out);
        assert_eq!(pt.size_at(0x20_0000), None);
        assert!(pt.map(0x20_0000, 2, Pfn(512)), "a 2MB page replaces the empty table");
        assert_eq!(pt.size_at(0x20_1000), Some(2), "the cached table is gone with it");
        pt.unmap_range(0x20_0000, 0x20_0000, &mut out);
        assert!(pt.map(0x20_3000, 0, Pfn(9)));
        assert_eq!(pt.size_at(0x20_3000), Some(0));
        assert_eq!(pt.size_at(0x20_4000), None);
        for va in [0x20_3000u64, 0x20_4000, 0x40_0000] {
            assert_eq!(pt.size_at(va), pt.lookup(va).map(|t| t.size_idx), "{va:#x}");
        }
    }
}
