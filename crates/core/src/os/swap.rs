//! Swap: anonymous pages leave memory when the page cache has nothing left to give, chosen by
//! the pluggable replacement policy (replacement/), and come back on a major fault.
//!
//! A swapped-out page keeps its size: a 2MB page is written and read back whole (Linux's
//! THP_SWAP); if no block of its size is free when it is needed again, only the faulting base
//! page is read back and the rest stays in swap as base pages. A page shared after fork leaves
//! every mapping at once; each mapping gets its own swap slot (the model keeps no swap cache, so
//! swap space is counted per mapping) and reads back its own copy.
//!
//! Invariants (checked by `Os::validate`): a swapped range overlaps no mapped page of its
//! process; every entry names a live slot of `SwapSpace`, which counts its references; when swap is enabled the
//! replacement policy tracks exactly the mapped pages.

use super::{MapOutcome, Os};
use crate::mmu::Mmu;
use crate::replacement::{PageRef, Victim};

/// A swapped-out page: its size and its swap slot (shared by fork's copies of the entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapEntry {
    pub si: u32,
    pub slot: u64,
}

crate::counters! {
    #[derive(Clone, Debug, Default)]
    pub struct SwapCounters {
        pub out_pages: u64 = "swap.out",
        pub out_bytes: u64 = "swap.out_bytes",
        /// Of out_bytes: written by direct reclaim (the faulting program waits), not kswapd.
        pub out_bytes_direct: u64 = "swap.out_bytes_direct",
        pub in_pages: u64 = "swap.in",
        pub in_bytes: u64 = "swap.in_bytes",
        /// Victims shared after fork (swapped out of every mapping).
        pub shared: u64 = "swap.out_shared",
        /// Swap-outs refused because swap was full.
        pub full: u64 = "swap.full",
        /// Swapped pages read back as one base page (no block of their size was free).
        pub split_on_swapin: u64 = "swap.split_on_swapin",
        /// Demotion steps taken so that only a victim's base page was evicted, not its whole
        /// superpage (policies that ask for it: Navarro et al.'s eviction-triggered demotion).
        pub evict_demotions: u64 = "swap.evict_demotions",
        /// Superpages demoted speculatively when the page daemon cleared their reference bit
        /// (Navarro et al.; probability `OsFeatures::speculative_demotion`), counted per demotion step.
        pub speculative_demotions: u64 = "swap.speculative_demotions",
        /// Speculatively demoted regions promoted again once every piece was referenced, and those
        /// that could not be (a piece was evicted or unmapped meanwhile).
        pub repromotions: u64 = "swap.repromotions",
        pub repromote_refused: u64 = "swap.repromote_refused",
        /// AMSQM with `repromote=true`: superpages demoted by a write and promoted again in
        /// place at the next reference to them, and those that could not be (a piece evicted
        /// or moved).
        pub write_repromotions: u64 = "swap.write_repromotions",
        pub write_repromote_refused: u64 = "swap.write_repromote_refused",
    }
}

/// Speculative demotion's state: its random source (seeded by `Os::configure`), the regions
/// waiting to be promoted again by (pid, start), and a buffer for the pages the page daemon
/// cleared.
pub struct SpeculativeDemotion {
    pub rng: crate::trace::gen::Rng,
    pub regions: crate::fasthash::FastMap<(u32, u64), Demoted>,
    pub(crate) scratch: Vec<PageRef>,
}

impl Default for SpeculativeDemotion {
    fn default() -> Self {
        SpeculativeDemotion { rng: crate::trace::gen::Rng::new(1), regions: Default::default(), scratch: Vec::new() }
    }
}

/// A demoted region waiting to be promoted again: speculatively demoted (Navarro et al.), it
/// waits for all of it to be referenced again; demoted by a write under AMSQM with
/// `repromote=true`, for the next reference to any of it (`seen` empty, `missing` 1).
#[derive(Clone, Debug)]
pub struct Demoted {
    pub si: u32,
    /// Base pages referenced since the demotion (bit per base page) and how many are not.
    pub seen: Vec<u64>,
    pub missing: u64,
}

impl Demoted {
    /// A region demoted by a write, to be promoted at the next reference to any piece.
    pub fn after_write(si: u32) -> Demoted {
        Demoted { si, seen: Vec::new(), missing: 1 }
    }

    /// Demoted by a write: any reference completes it (it keeps no per-page bits).
    fn waits_for_any_reference(&self) -> bool {
        self.seen.is_empty()
    }
}

crate::counters! {
    /// Swap space and its slots, in base pages. A slot holds one swapped-out page (of any size)
    /// and is referenced by every swap entry naming it (fork's copies share it).
    ///
    /// Invariants (`SwapSpace::validate`, and `Os::validate` for the entries): every slot has a
    /// reference and a size; `used` is the sum of the slots' sizes and never exceeds `total`.
    #[derive(Clone, Debug, Default)]
    pub struct SwapSpace {
        /// Swap space (0: none; anonymous memory is never reclaimed).
        pub total: u64 = "swap.total_pages",
        pub used: u64 = "swap.used_pages",
        /// Slot -> (references, size in base pages); (0, 0) for a free slot. Slots are reused
        /// (`free_slots`), so the table is as long as the most slots ever in use at once.
        slots: Vec<(u32, u64)> = not_a_counter,
        free_slots: Vec<u64> = not_a_counter,
        pub counters: SwapCounters = by_hand,
    }
}

impl SwapSpace {
    pub fn new(pages: u64) -> SwapSpace {
        SwapSpace { total: pages, ..Default::default() }
    }

    pub fn enabled(&self) -> bool {
        self.total > 0
    }

    /// Whether `pages` more base pages fit.
    pub fn has_room(&self, pages: u64) -> bool {
        self.used + pages <= self.total
    }

    /// A new swap slot of `pages` base pages referenced by `refs` entries.
    fn slot_new(&mut self, pages: u64, refs: u32) -> u64 {
        assert!(refs > 0 && pages > 0 && self.has_room(pages), "swap slot of {pages} pages, {refs} references, {} free", self.total - self.used);
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push((0, 0));
                self.slots.len() as u64 - 1
            }
        };
        self.slots[slot as usize] = (refs, pages);
        self.used += pages;
        slot
    }

    fn live_slot(&mut self, slot: u64) -> &mut (u32, u64) {
        self.slots.get_mut(slot as usize).filter(|e| e.0 > 0).expect("swap entry without a slot")
    }

    /// One entry referencing `slot` is gone; the slot is freed with its last entry.
    pub(crate) fn slot_put(&mut self, slot: u64) {
        let e = self.live_slot(slot);
        e.0 -= 1;
        if e.0 == 0 {
            let pages = std::mem::take(&mut e.1);
            self.free_slots.push(slot);
            self.used -= pages;
        }
    }

    /// Another entry now references `slot` (fork, mremap copies).
    pub(crate) fn slot_get(&mut self, slot: u64) {
        self.live_slot(slot).0 += 1;
    }

    /// Check the slots against the references the entries make (`refs`: slot -> entries).
    pub fn validate(&self, refs: &std::collections::HashMap<u64, u32>) -> Result<(), String> {
        let mut used = 0;
        let mut live = 0;
        for (slot, &(r, pages)) in self.slots.iter().enumerate() {
            let slot = slot as u64;
            let entries = refs.get(&slot).copied().unwrap_or(0);
            if entries != r || (r > 0) != (pages > 0) {
                return Err(format!("swap slot {slot}: {r} references counted, {entries} entries, {pages} pages"));
            }
            live += (r > 0) as usize;
            used += pages;
        }
        if refs.len() != live || self.free_slots.len() + live != self.slots.len() {
            return Err("swap entries name slots that do not exist (or the free slots are miscounted)".into());
        }
        if used != self.used || used > self.total {
            return Err(format!("swap: {} pages counted in use, slots hold {used} (total {})", self.used, self.total));
        }
        Ok(())
    }
}

impl Os {
    pub(crate) fn page_ref(&self, pi: usize, start: u64, si: u32) -> PageRef {
        PageRef { pid: self.procs[pi].pid, start, size_idx: si }
    }

    /// The hardware set the accessed bit of the page mapping `va` (a walk resolved it). True if
    /// the reference promoted its region again (the TLB entry just loaded is then stale).
    pub fn referenced(&mut self, pi: usize, va: u64, mmu: &mut Mmu) -> bool {
        match self.procs[pi].pt.lookup(va) {
            Some(t) => self.referenced_page(pi, t.start, t.size_idx, mmu),
            None => false,
        }
    }

    /// `referenced` when the caller knows the page mapping the address: its start and size
    /// index (the walk that just resolved it; saves reading the page table again).
    pub fn referenced_page(&mut self, pi: usize, start: u64, si: u32, mmu: &mut Mmu) -> bool {
        debug_assert!(self.procs[pi].pt.lookup(start).is_some_and(|t| t.start == start && t.size_idx == si));
        let r = self.page_ref(pi, start, si);
        self.replacement.on_reference(r);
        if !self.spec.regions.is_empty() {
            return self.note_piece_referenced(pi, start, si, mmu);
        }
        false
    }

    /// Repromotion: the piece [start, start + its size) of a demoted region was referenced.
    /// A speculatively demoted region (Navarro et al.) is promoted again in place (its frames
    /// never moved) once every piece has been; one demoted by a write (AMSQM), at once. True if
    /// it was.
    fn note_piece_referenced(&mut self, pi: usize, start: u64, si: u32, mmu: &mut Mmu) -> bool {
        let pid = self.procs[pi].pid;
        let shift = self.base.shift();
        for big in (si as usize + 1)..self.sizes.len() {
            let size = self.sizes[big].bytes();
            let key = (pid, start & !(size - 1));
            let Some(d) = self.spec.regions.get_mut(&key) else { continue };
            if d.si as usize != big {
                continue;
            }
            let after_write = d.waits_for_any_reference();
            if after_write {
                d.missing = 0;
            } else {
                let first = (start - key.1) >> shift;
                for i in first..first + (self.sizes[si as usize].bytes() >> shift) {
                    let w = &mut d.seen[(i / 64) as usize];
                    if *w >> (i % 64) & 1 == 0 {
                        *w |= 1 << (i % 64);
                        d.missing -= 1;
                    }
                }
            }
            if d.missing > 0 {
                return false;
            }
            self.spec.regions.remove(&key);
            let promoted = self.promote_in_place(pi, key.1, big as u32, mmu) == super::promote::PromoteResult::Promoted;
            let c = &mut self.swap.counters;
            match (after_write, promoted) {
                (false, true) => c.repromotions += 1,
                (false, false) => c.repromote_refused += 1,
                (true, true) => c.write_repromotions += 1,
                (true, false) => c.write_repromote_refused += 1,
            }
            return promoted;
        }
        false
    }

    /// Speculative demotion (Navarro et al. §A.2.7): each superpage whose reference bit the
    /// page daemon just cleared is demoted, with probability `OsFeatures::speculative_demotion`, one size at a
    /// time around its first base page, so that its pieces get reference bits of their own; the
    /// region is promoted again when all of them are referenced.
    fn speculative_demotions(&mut self, mmu: &mut Mmu) {
        let mut cleared = std::mem::take(&mut self.spec.scratch);
        self.replacement.drain_cleared(&mut cleared);
        for r in cleared.drain(..) {
            if r.size_idx == 0 || self.spec.rng.unit() >= self.features.speculative_demotion {
                continue;
            }
            let Some(pi) = self.live_proc(r.pid) else { continue };
            if self.procs[pi].pt.lookup(r.start).is_none_or(|t| t.start != r.start || t.size_idx != r.size_idx) {
                continue;
            }
            let mut si = r.size_idx;
            while si > 0 && self.demote(pi, r.start, si - 1, super::promote::DemoteReason::Speculative, mmu) == super::promote::DemoteResult::Demoted {
                self.swap.counters.speculative_demotions += 1;
                si -= 1;
            }
            if si < r.size_idx {
                let pages = self.sizes[r.size_idx as usize].bytes() >> self.base.shift();
                self.spec.regions.insert((r.pid, r.start), Demoted { si: r.size_idx, seen: vec![0; pages.div_ceil(64) as usize], missing: pages });
            }
        }
        self.spec.scratch = cleared;
    }

    /// Swap out up to `want` base pages' worth of anonymous memory. Returns pages freed.
    pub fn swap_out(&mut self, want: u64, mmu: &mut Mmu) -> u64 {
        if !self.swap.enabled() {
            return 0;
        }
        let mut freed = 0;
        let mut tries = self.replacement.len() + 1;
        while freed < want && tries > 0 {
            tries -= 1;
            let Some(Victim { page: v, part }) = self.replacement.victim() else { break };
            if self.features.speculative_demotion > 0.0 {
                self.speculative_demotions(mmu);
            }
            let Some(pi) = self.live_proc(v.pid) else { continue };
            let Some(mut t) = self.procs[pi].pt.lookup(v.start).filter(|t| t.start == v.start && t.size_idx == v.size_idx) else {
                continue;
            };
            if self.is_file_frame(t.pfn.0) {
                continue; // the page cache reclaims file pages
            }
            // Part of a superpage: the one the replacement names, or (the policy demotes on
            // eviction, Navarro et al.) its first base page.
            let part = part.map(|p| (p.va, p.size_idx)).or((self.features.evict_demotes && t.size_idx > 0).then_some((v.start, 0)));
            if let Some((at, to)) = part {
                // Demote one size at a time until the piece holding `at` is a page of its
                // own; only it is evicted, the other pieces stay superpages.
                while t.size_idx > to
                    && self.demote(pi, t.start, t.size_idx - 1, super::promote::DemoteReason::Reclaim, mmu) == super::promote::DemoteResult::Demoted
                {
                    self.swap.counters.evict_demotions += 1;
                    match self.procs[pi].pt.lookup(at) {
                        Some(n) => t = n,
                        None => break,
                    }
                }
            }
            // Every mapping of the block goes to swap (several after fork: they share the slot
            // and each reads back its own copy, as the model keeps no swap cache).
            let mappers = self.mappers(t.pfn.0);
            let pages = 1u64 << self.order_of(t.size_idx).0;
            if !self.swap.has_room(pages) {
                self.swap.counters.full += 1;
                self.replacement.restore(v);
                break;
            }
            if mappers.len() > 1 {
                self.swap.counters.shared += 1;
            }
            let bytes = self.sizes[t.size_idx as usize].bytes();
            let slot = self.swap.slot_new(pages, mappers.len() as u32);
            let mut gone = std::mem::take(&mut self.scratch);
            for m in mappers.iter() {
                let (mpi, vpn) = m.as_anon().expect("anonymous mapping");
                let start = vpn << self.base.shift();
                gone.clear();
                if mpi == pi && start == t.start {
                    // The page found above (other mappers, after fork, may map it otherwise).
                    self.procs[pi].pt.unmap_page(t);
                    gone.push(t);
                } else {
                    self.procs[mpi].pt.unmap_range(start, bytes, &mut gone);
                }
                mmu.invalidate(start, self.procs[mpi].asid, t.size_idx);
                self.release(mpi, &gone);
                self.procs[mpi].swapped.insert(start, SwapEntry { si: t.size_idx, slot });
            }
            self.scratch = gone;
            self.swap.counters.out_pages += 1;
            self.swap.counters.out_bytes += bytes;
            if !self.in_daemon {
                self.swap.counters.out_bytes_direct += bytes;
            }
            freed += pages;
        }
        freed
    }

    /// The swapped page of process `pi` that contains `va`, if any: (start, size index).
    pub fn swapped_at(&self, pi: usize, va: u64) -> Option<(u64, u32)> {
        self.procs[pi].swapped.containing(va, &self.sizes).map(|(start, e)| (start, e.si))
    }

    /// A major fault: read the swapped page containing `va` back. Returns the size index now
    /// mapping `va`, or None if memory ran out.
    pub fn swap_in(&mut self, pi: usize, va: u64, mmu: &mut Mmu) -> Option<u32> {
        let (start, si) = self.swapped_at(pi, va)?;
        self.swap_in_at(pi, va, start, si, mmu)
    }

    /// `swap_in` of the swapped page (start, size index) that `swapped_at` found for `va`.
    pub fn swap_in_at(&mut self, pi: usize, va: u64, start: u64, si: u32, mmu: &mut Mmu) -> Option<u32> {
        let entry = self.procs[pi].swapped.remove(start).expect("swapped_at found it");
        let pages = 1u64 << self.order_of(si).0;
        let mut at = (start, si);
        if self.map_swapped_in(pi, start, si, mmu) != MapOutcome::Mapped {
            if si == 0 {
                self.procs[pi].swapped.insert(start, entry);
                return None;
            }
            // No block of its size: read back just the faulting base page; the others stay in
            // swap as base pages of the same slot.
            self.swap.counters.split_on_swapin += 1;
            let base = self.base.bytes();
            let page = va & !(base - 1);
            for k in 0..pages {
                let s = start + k * base;
                if s != page {
                    self.procs[pi].swapped.insert(s, SwapEntry { si: 0, slot: entry.slot });
                    self.swap.slot_get(entry.slot);
                }
            }
            if self.map_swapped_in(pi, page, 0, mmu) != MapOutcome::Mapped {
                self.procs[pi].swapped.insert(page, SwapEntry { si: 0, slot: entry.slot });
                return None;
            }
            at = (page, 0);
        }
        self.swap.slot_put(entry.slot);
        let bytes = self.sizes[at.1 as usize].bytes();
        // Read from swap, not zeroed.
        self.counters.zeroed_bytes -= bytes;
        self.swap.counters.in_pages += 1;
        self.swap.counters.in_bytes += bytes;
        Some(at.1)
    }

    /// Whether any swapped page of `pi` overlaps [start, end).
    pub fn swapped_overlaps(&self, pi: usize, start: u64, end: u64) -> bool {
        // A page starting at `start` contains it: the first test finds it, the second need not
        // probe there (for a base page's range, the second probes nothing).
        self.swapped_at(pi, start).is_some() || self.procs[pi].swapped.any_start_in(start.saturating_add(1), end)
    }

    /// Drop swapped pages of `pi` that overlap [start, end) (munmap, exit).
    pub(crate) fn drop_swapped(&mut self, pi: usize, start: u64, end: u64) {
        for (_, e) in self.take_swapped(pi, start, end) {
            self.swap.slot_put(e.slot);
        }
    }

    /// Remove and return the swapped entries of `pi` that overlap [start, end).
    pub(crate) fn take_swapped(&mut self, pi: usize, start: u64, end: u64) -> Vec<(u64, SwapEntry)> {
        if self.procs[pi].swapped.is_empty() {
            return Vec::new();
        }
        let first = self.swapped_at(pi, start).map_or(start, |(s, _)| s);
        let out = self.procs[pi].swapped.starting_in(first, end);
        for &(k, _) in &out {
            self.procs[pi].swapped.remove(k);
        }
        out
    }

    /// fork: the child's copies of the parent's swapped entries share their slots.
    pub(crate) fn fork_swapped(&mut self, pi: usize, ci: usize) {
        let sw = self.procs[pi].swapped.clone();
        for (_, e) in sw.entries() {
            self.swap.slot_get(e.slot);
        }
        self.procs[ci].swapped = sw;
    }

    /// Check the swap bookkeeping: slots' reference counts and sizes.
    pub(crate) fn validate_swap(&self) -> Result<(), String> {
        let mut refs: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
        for p in &self.procs {
            p.swapped.check(&self.sizes).map_err(|e| format!("pid {}: {e}", p.pid))?;
            for (start, e) in p.swapped.entries() {
                let len = self.sizes[e.si as usize].bytes();
                let mut v = Vec::new();
                p.pt.pages_in_range(start, len, &mut v);
                if !v.is_empty() {
                    return Err(format!("pid {}: swapped page at {start:#x} is also mapped", p.pid));
                }
                *refs.entry(e.slot).or_default() += 1;
            }
        }
        self.swap.validate(&refs)
    }
}
