//! The MMU model: a TLB hierarchy built from a machine description, page-walk caches, and the
//! cost of a walk (native radix, nested 2D, or a software miss handler).
//!
//! Lookup order: level 1 structures serving the access's stream, then level 2, and so on. A
//! structure is probed once per page size it holds that is currently mapped somewhere
//! (`live_sizes`), so a base-pages-only run probes each structure once. When a level hits,
//! every earlier-level structure that holds that page size records a miss and is filled; when
//! all levels miss, the walker runs and every structure holding the size records a miss and is
//! filled. Misses are therefore attributed only to structures that could have held the
//! translation.

pub mod cache;
pub mod host;
pub mod host_tables;
pub mod lru_set;
pub mod machine;
pub mod pwc;
mod replay_thread;
pub mod reuse;
pub mod tlb;

use crate::units::PageSize;
use machine::Machine;
use tlb::{make_tag, Tlb};

pub const MAX_SIZES: usize = 16;

/// Walks remembered to tell a sequential stream's next page (`WalkCounters::sequential`): a
/// few, so that a program sweeping up to four arrays in step is seen in each.
const RECENT_WALKS: usize = 8;

/// Per-structure counters, split by page-size index.
#[derive(Clone, Debug, Default)]
pub struct TlbCounters {
    pub hits: [u64; MAX_SIZES],
    pub misses: [u64; MAX_SIZES],
}

/// AMD PTE coalescing as the MMU sees it: the size indices of coalesced entries (after the
/// page sizes) and what they did.
#[derive(Clone, Debug)]
pub struct CoalescedSizes {
    /// Size index of the first coalesced size; group k has index `first + k`.
    pub first: u32,
    /// Base pages per group, ascending.
    pub groups: Vec<u32>,
    /// Bitmask of the coalesced size indices.
    pub mask: u32,
    /// Walks whose base PTE was cached as a coalesced entry, per group.
    pub fills: Vec<u64>,
}

crate::counters! {
    /// Page walks by the size they found, memory references they made, and page-walk-cache use.
    #[derive(Clone, Debug, Default)]
    pub struct WalkCounters {
        pub walks: [u64; MAX_SIZES] = by_hand,
        pub refs: u64 = "walk.refs",
        /// Walks to a page whose two pages below (or two above: the same size as the TLB holds
        /// it) are among the last `RECENT_WALKS` walks' pages: a sequential stream crossing into
        /// its next page, seen crossing twice before, as a stream prefetcher waits to see a
        /// stream before it runs ahead of it (`[cache] stream_ahead`, mmu/cache.rs). Two, not
        /// one, so that a binary search's last probes, a page apart, are not taken for one.
        pub sequential: u64 = "walks.sequential",
        pub pwc_hits: u64 = "pwc.hits",
        pub pwc_misses: u64 = "pwc.misses",
    }
}

/// One step of the lookup order: a structure, its level index, and the sizes it holds.
#[derive(Clone, Copy, Debug)]
struct Probe {
    tlb: usize,
    level: usize,
    holds: u32,
}

pub struct Mmu {
    pub machine: Machine,
    pub tlbs: Vec<Tlb>,
    pub counters: Vec<TlbCounters>,
    pub walk: WalkCounters,
    /// route[stream][level] = structures probed at that level (stream 0 data, 1 fetch).
    route: [Vec<Vec<usize>>; 2],
    /// The same, flattened in lookup order, per stream.
    probes: [Vec<Probe>; 2],
    /// Per stream and size: the structures holding that size, in lookup order (tlb, level).
    holders: [Vec<Vec<(usize, usize)>>; 2],
    /// Bitmask of size indices each structure holds.
    holds: Vec<u32>,
    /// For each stream and size: the first structure (in lookup order) that holds it.
    pub first_holder: [[Option<usize>; MAX_SIZES]; 2],
    shifts: [u32; MAX_SIZES],
    /// Some TLB structure or page-walk cache uses the AVX2 set operations (`Tlb::wide`), so the
    /// engine runs its AVX2-compiled loop.
    pub wide: bool,
    /// Bitmask of page sizes mapped anywhere right now; sizes outside it are not probed.
    pub live_sizes: u32,
    /// Page-walk caches of the guest's (or, natively, the only) walk.
    pwcs: pwc::Pwcs,
    /// Nested machines with data caches: page-walk caches of the host's entries, of the guest's
    /// geometry, consulted by each host walk the engine sends through the data caches
    /// (`Engine::cache_refs`); None otherwise, where a nested walk costs
    /// `(g+1)(h+1)-1` references as before.
    /// Host entries whose read a hit made unnecessary are not sent through the data caches (nor
    /// counted in `walk.refs`).
    pub host_pwcs: Option<pwc::HostPwcs>,
    leaf_level: [u8; MAX_SIZES],
    /// Nested paging: per guest size index, the host references to translate one
    /// guest-physical address (None: native).
    nested_host_refs: Option<[u64; MAX_SIZES]>,
    /// Splintering: a guest running on a host that maps its memory with pages of size index
    /// `h` (`+nested=SIZE`) gets TLB entries of at most that size, since one entry caches the
    /// whole gVA-to-hPA translation, whose reach is the smaller of the two pages (Pham et al.,
    /// MICRO 2015, "page splintering"). `tlb_size(si)` is `min(si, h)` for page sizes; None:
    /// native, or a host that backs each guest page with a page of its size.
    splinter: Option<u32>,
    /// Page sizes a TLB lookup probes: every one, except those splintering keeps out of the
    /// TLBs (their translations are held at the host's page size).
    probe_sizes: u32,
    /// AMD PTE coalescing (None: the machine does not coalesce).
    pub coalesced: Option<CoalescedSizes>,
    /// Per stream and size: the size index a structure counts a repeat hit under in
    /// `first_holder` (a coalesced size, in a structure that holds only base pages, was
    /// filled as the base page).
    pub repeat_size: [[u32; MAX_SIZES]; 2],
    /// Per structure: its eviction group (see `evictions`), or NO_GROUP if not last-level.
    group: Vec<u8>,
    /// Per stream: the eviction group of its last-level structures.
    stream_group: [u8; 2],
    /// When set, every translation that leaves a last-level structure (replaced by a fill,
    /// shot down, flushed) is appended to `evictions` as (group, tag), for policies that keep
    /// their own picture of what the TLB holds (Romer et al.'s tlbcount). The consumer drains
    /// it; it never holds more than the structures' entries plus those shot down since.
    pub track_evictions: bool,
    pub evictions: Vec<(u8, u64)>,
    /// The page-table levels the last walk read, (first, leaf): with data caches, the engine
    /// sends those entries' physical addresses through them (guest levels only when nested).
    pub last_walk: (u8, u8),
    /// The pages of the last `RECENT_WALKS` walks, each as (page number << 4) | size index
    /// (u64::MAX: none yet), and the slot the next one takes.
    recent_walks: [u64; RECENT_WALKS],
    recent_at: usize,
    /// Data caches (the machine's `[cache]`), None for machines without one.
    pub caches: Option<cache::Caches>,
}

/// Not a last-level structure: its evictions are not reported.
pub const NO_GROUP: u8 = u8::MAX;

impl Mmu {
    pub fn new(machine: Machine) -> Mmu {
        let mut tlbs = Vec::new();
        let mut holds = Vec::new();
        for (i, t) in machine.tlbs.iter().enumerate() {
            tlbs.push(Tlb::new(t.entries, t.ways, t.replacement, machine.seed.wrapping_add(i as u64 * 7919)));
            holds.push(t.sizes.iter().fold(0u32, |m, &s| m | 1 << s));
        }
        let coalesced = machine.amd_coalescing().map(|a| {
            let first = machine.page_sizes.len() as u32;
            let mask = (0..a.groups.len() as u32).fold(0u32, |m, k| m | 1 << (first + k));
            for &t in &a.structures {
                holds[t] |= mask;
            }
            CoalescedSizes { first, groups: a.groups.clone(), mask, fills: vec![0; a.groups.len()] }
        });
        let all_sizes: Vec<PageSize> = machine.page_sizes.iter().copied().chain(machine.coalesced_sizes()).collect();
        let max_level = machine.tlbs.iter().map(|t| t.level).max().unwrap_or(1);
        let mut route: [Vec<Vec<usize>>; 2] = [Vec::new(), Vec::new()];
        for (si, fetch) in [(0usize, false), (1usize, true)] {
            for level in 1..=max_level {
                let v: Vec<usize> = machine.tlbs.iter().enumerate().filter(|(_, t)| t.level == level && t.stream.serves(fetch)).map(|(i, _)| i).collect();
                if !v.is_empty() {
                    route[si].push(v);
                }
            }
        }
        let mut first_holder = [[None; MAX_SIZES]; 2];
        let mut repeat_size = [[0u32; MAX_SIZES]; 2];
        let coal_mask = coalesced.as_ref().map_or(0, |c| c.mask);
        for s in 0..2 {
            for size in 0..all_sizes.len() {
                repeat_size[s][size] = size as u32;
                // A coalesced entry is filled as the base page where its size is not held.
                let wanted = if coal_mask & (1 << size) != 0 { 1 << size | 1 } else { 1 << size };
                first_holder[s][size] = route[s].iter().flatten().copied().find(|&t| holds[t] & wanted != 0);
                if let Some(t) = first_holder[s][size] {
                    if holds[t] & (1 << size) == 0 {
                        repeat_size[s][size] = 0;
                    }
                }
            }
        }
        let mut shifts = [0u32; MAX_SIZES];
        let mut leaf_level = [1u8; MAX_SIZES];
        for (i, p) in all_sizes.iter().enumerate() {
            shifts[i] = p.shift();
            // A coalesced entry comes from a walk to a base PTE.
            leaf_level[i] = machine.leaf_level(if i < machine.page_sizes.len() { *p } else { machine.base_page });
        }
        let bits = machine.bits_per_level as u32;
        let pwcs = pwc::Pwcs::new(&machine.pwc, machine.base_page.shift(), bits, 31);
        // The host's tables have the guest's geometry (`HostTables`), and its walker the same
        // page-walk caches: AMD's caches hold both dimensions' entries (mmu/pwc.rs).
        let host_pwcs = match (&machine.nested, &machine.cache) {
            (Some(_), Some(_)) => Some(pwc::HostPwcs::new(pwc::Pwcs::new(&machine.pwc, machine.base_page.shift(), bits, 131))),
            _ => None,
        };
        let nested_host_refs = machine.nested.as_ref().map(|n| {
            // Host levels walked for one guest-physical reference: down to the host page's leaf.
            std::array::from_fn(|si| {
                let host = match n.host_page {
                    machine::HostPage::Fixed(p) => p,
                    machine::HostPage::Guest => machine.page_sizes.get(si).copied().unwrap_or(machine.base_page),
                };
                let leaf = machine::radix_leaf_level(machine.base_page, machine.bits_per_level, n.host_levels, host);
                (n.host_levels - leaf + 1) as u64
            })
        });
        let splinter = match machine.nested.as_ref().map(|n| n.host_page) {
            Some(machine::HostPage::Fixed(p)) => machine.size_index(p).filter(|&h| (h as usize) + 1 < machine.page_sizes.len()),
            _ => None,
        };
        let probe_sizes = match splinter {
            // Page sizes above the host's never reach a TLB; coalesced sizes (indices past the
            // page sizes) are untouched.
            Some(h) => !(((1u32 << machine.page_sizes.len()) - 1) & !((2u32 << h) - 1)),
            None => u32::MAX,
        };
        let n = tlbs.len();
        let flat = |r: &Vec<Vec<usize>>| -> Vec<Probe> {
            r.iter().enumerate().flat_map(|(li, v)| v.iter().map(move |&t| (t, li))).map(|(t, li)| Probe { tlb: t, level: li, holds: holds[t] }).collect()
        };
        let probes = [flat(&route[0]), flat(&route[1])];
        let by_size = |ps: &Vec<Probe>| -> Vec<Vec<(usize, usize)>> {
            (0..MAX_SIZES).map(|si| ps.iter().filter(|p| p.holds & (1 << si) != 0).map(|p| (p.tlb, p.level)).collect()).collect()
        };
        let holders = [by_size(&probes[0]), by_size(&probes[1])];
        // Eviction groups: the last level of each stream's route. A unified last level
        // (serving both streams) is one group; split ones are two.
        let mut group = vec![NO_GROUP; n];
        let mut stream_group = [0u8; 2];
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for s in 0..2 {
            let Some(last) = route[s].last() else { continue };
            let g = match groups.iter().position(|v| v == last) {
                Some(g) => g,
                None => {
                    groups.push(last.clone());
                    groups.len() - 1
                }
            };
            stream_group[s] = g as u8;
            for &t in last {
                group[t] = g as u8;
            }
        }
        // The AVX2 loop pays off when a structure on the path can use the wide set operations.
        let wide = tlbs.iter().chain(pwcs.tlbs()).chain(host_pwcs.iter().flat_map(|p| p.tlbs())).any(|t| t.wide);
        Mmu {
            wide,
            coalesced,
            repeat_size,
            group,
            stream_group,
            track_evictions: false,
            evictions: Vec::new(),
            last_walk: (0, 0),
            recent_walks: [u64::MAX; RECENT_WALKS],
            recent_at: 0,
            // A nested walk makes ten or more references per access, most of them to a few host
            // entry lines the first level holds: there the replay thread is the slower side, and
            // the first level runs beside the engine instead (mmu/cache.rs; docs/RUNTIME_MODEL.md,
            // "Speed").
            caches: machine.cache.as_ref().map(|c| match machine.nested {
                Some(_) => cache::Caches::new(c).with_first_level_here(),
                None => cache::Caches::new(c),
            }),
            probes,
            holders,
            machine,
            tlbs,
            counters: vec![TlbCounters::default(); n],
            walk: WalkCounters::default(),
            route,
            holds,
            first_holder,
            shifts,
            live_sizes: 1,
            pwcs,
            host_pwcs,
            leaf_level,
            nested_host_refs,
            splinter,
            probe_sizes,
        }
    }

    /// A nested walk's host dimension for a guest page of size index `si`: the host levels read
    /// to translate one guest-physical address, from the top down to `leaf`, as (top, leaf);
    /// None natively.
    #[inline(always)]
    pub fn host_walk(&self, si: u32) -> Option<(u8, u8)> {
        let h = self.nested_host_refs?[si as usize & (MAX_SIZES - 1)] as u8;
        let top = self.machine.nested.as_ref().map_or(0, |n| n.host_levels);
        Some((top, top + 1 - h))
    }

    /// The size index a TLB entry for a page of size index `si` has: `si`, or the host's page
    /// size where splintering holds it at that (`splinter`).
    #[inline(always)]
    pub fn tlb_size(&self, si: u32) -> u32 {
        match self.splinter {
            Some(h) if si > h && (si as usize) < self.machine.page_sizes.len() => h,
            _ => si,
        }
    }

    /// Probe the hierarchy. On a hit returns (level index, size index) and has already counted
    /// the hit and the earlier-level misses and fills. On a miss returns None and changes
    /// nothing: the caller resolves the size (page table) and calls `fill_after_walk`.
    #[inline(always)]
    pub fn lookup(&mut self, va: u64, asid: u16, fetch: bool) -> Option<(usize, u32)> {
        let stream = fetch as usize;
        let live = self.live_sizes & self.probe_sizes;
        let (tlbs, counters, shifts) = (&mut self.tlbs, &mut self.counters, &self.shifts);
        let mut found = None;
        'outer: for p in self.probes[stream].iter() {
            let mut m = p.holds & live;
            if m & m.wrapping_sub(1) != 0 && tlbs[p.tlb].sets == 1 {
                // Several live sizes in one fully associative structure: one pass for all.
                let mut by_size: [u64; tlb::TAG_SIZES] = std::array::from_fn(tlb::no_tag);
                let sought = m;
                while m != 0 {
                    let si = m.trailing_zeros() as usize & (MAX_SIZES - 1);
                    m &= m - 1;
                    by_size[si] = make_tag(asid, va >> shifts[si], si as u32);
                }
                if let Some(si) = tlbs[p.tlb].probe_sizes(&by_size, sought) {
                    counters[p.tlb].hits[si as usize & (MAX_SIZES - 1)] += 1;
                    found = Some((p.level, si));
                    break 'outer;
                }
                continue;
            }
            while m != 0 {
                let si = m.trailing_zeros();
                m &= m - 1;
                let vpn = va >> shifts[si as usize & (MAX_SIZES - 1)];
                if tlbs[p.tlb].probe(vpn, make_tag(asid, vpn, si)) {
                    counters[p.tlb].hits[si as usize & (MAX_SIZES - 1)] += 1;
                    found = Some((p.level, si));
                    break 'outer;
                }
            }
        }
        if let Some((li, si)) = found {
            if li > 0 {
                self.miss_and_fill(stream, li, va, asid, si);
            }
        }
        found
    }

    /// Record misses in, and fill, every structure before level `upto` (exclusive) that holds
    /// size `si` for this stream. A coalesced entry goes into a structure that does not hold
    /// coalesced entries as the base page it was found for.
    #[inline]
    fn miss_and_fill(&mut self, stream: usize, upto: usize, va: u64, asid: u16, si: u32) {
        let coal = self.coalesced.as_ref().map_or(0, |c| c.mask) & (1 << si) != 0;
        let (tlbs, counters, shifts) = (&mut self.tlbs, &mut self.counters, &self.shifts);
        for p in self.probes[stream].iter() {
            if p.level >= upto {
                break;
            }
            let fsi = if p.holds & (1 << si) != 0 {
                si
            } else if coal && p.holds & 1 != 0 {
                0
            } else {
                continue;
            };
            let s = fsi as usize & (MAX_SIZES - 1);
            let vpn = va >> shifts[s];
            counters[p.tlb].misses[s] += 1;
            let victim = tlbs[p.tlb].fill(vpn, make_tag(asid, vpn, fsi));
            if self.track_evictions && self.group[p.tlb] != NO_GROUP {
                if let Some(v) = victim {
                    self.evictions.push((self.group[p.tlb], v));
                }
            }
        }
    }

    /// Lookup for runs where every mapping has the one size `si` (the `base` policy): each
    /// structure holding `si` is probed and, on a miss, filled in the same pass (`Tlb::access`).
    /// Returns the level index of the hit, or None after a miss everywhere (every structure
    /// already counted its miss and holds the translation; the caller then counts the walk with
    /// `walk_only`). Counters and TLB contents end exactly as with `lookup` + `fill_after_walk`.
    ///
    /// # Safety
    /// With WIDE, as for `Tlb::access_in` (the engine's AVX2-compiled loop, when `self.wide`).
    #[inline(always)]
    pub unsafe fn lookup_single_size<const WIDE: bool>(&mut self, va: u64, asid: u16, fetch: bool, si: u32) -> Option<usize> {
        let s = si as usize & (MAX_SIZES - 1);
        let vpn = va >> self.shifts[s];
        let tag = make_tag(asid, vpn, si);
        let (tlbs, counters) = (&mut self.tlbs, &mut self.counters);
        for &(t, level) in self.holders[fetch as usize][s].iter() {
            // SAFETY: the caller's contract.
            if unsafe { tlbs[t].access_in::<WIDE>(vpn, tag) } {
                counters[t].hits[s] += 1;
                return Some(level);
            }
            counters[t].misses[s] += 1;
        }
        None
    }

    /// Take back what `lookup_single_size` did for an access that turned out to fault fatally:
    /// its misses and its entries (the entries those displaced are not restored).
    pub fn cancel_single_size(&mut self, va: u64, asid: u16, fetch: bool, si: u32) {
        for p in self.probes[fetch as usize].iter() {
            if p.holds & (1 << si) != 0 {
                self.counters[p.tlb].misses[si as usize] -= 1;
            }
        }
        self.invalidate(va, asid, si);
    }

    /// Count a walk to a page of size `si` whose TLB fills were already done; returns its
    /// memory references.
    ///
    /// # Safety
    /// With WIDE, as for `Tlb::access_in`.
    #[inline(always)]
    pub unsafe fn walk_only<const WIDE: bool>(&mut self, va: u64, asid: u16, si: u32) -> u64 {
        self.walk.walks[si as usize] += 1;
        // SAFETY: the caller's contract.
        let refs = unsafe { self.walk_refs::<WIDE>(va, asid, si) };
        self.walk.refs += refs;
        refs
    }

    /// After a walk found a translation of size `si`: count the misses, fill every level, and
    /// return the walk's memory references (page-walk caches applied).
    #[inline]
    pub fn fill_after_walk(&mut self, va: u64, asid: u16, fetch: bool, si: u32) -> u64 {
        let stream = fetch as usize;
        let levels = self.route[stream].len();
        // The walk goes to the guest's page of size `si`; the TLBs take what they can hold.
        self.miss_and_fill(stream, levels, va, asid, self.tlb_size(si));
        self.walk.walks[si as usize] += 1;
        // SAFETY: no AVX2 path.
        let refs = unsafe { self.walk_refs::<false>(va, asid, si) };
        self.walk.refs += refs;
        refs
    }

    /// After a walk that ended at a base PTE whose cache line holds a coalescible group of
    /// `groups[k]` pages around it: fill every level with the coalesced entry (as the base page
    /// where coalesced entries are not held), count the walk as a base-page walk, and return
    /// its memory references.
    pub fn fill_after_walk_coalesced(&mut self, va: u64, asid: u16, fetch: bool, k: usize) -> u64 {
        let c = self.coalesced.as_mut().expect("a coalescing machine");
        c.fills[k] += 1;
        let csi = c.first + k as u32;
        self.live_sizes |= 1 << csi;
        let levels = self.route[fetch as usize].len();
        self.miss_and_fill(fetch as usize, levels, va, asid, csi);
        self.walk.walks[0] += 1;
        // SAFETY: no AVX2 path.
        let refs = unsafe { self.walk_refs::<false>(va, asid, 0) };
        self.walk.refs += refs;
        refs
    }

    /// After `lookup_single_size` missed everywhere and filled base entries for `va`, and the
    /// walk found a coalescible group `k`: replace those entries with the coalesced one in the
    /// structures that hold it, moving their misses to its size. Returns its size index.
    pub fn refill_coalesced(&mut self, va: u64, asid: u16, fetch: bool, k: usize) -> u32 {
        let c = self.coalesced.as_mut().expect("a coalescing machine");
        c.fills[k] += 1;
        let csi = c.first + k as u32;
        self.live_sizes |= 1 << csi;
        let (s0, sc) = (self.shifts[0], self.shifts[csi as usize]);
        for &(t, _level) in self.holders[fetch as usize][0].iter() {
            if self.holds[t] & (1 << csi) == 0 {
                continue;
            }
            self.tlbs[t].invalidate(va >> s0, make_tag(asid, va >> s0, 0));
            self.counters[t].misses[0] -= 1;
            self.counters[t].misses[csi as usize] += 1;
            let victim = self.tlbs[t].fill(va >> sc, make_tag(asid, va >> sc, csi));
            if self.track_evictions && self.group[t] != NO_GROUP {
                if let Some(v) = victim {
                    self.evictions.push((self.group[t], v));
                }
            }
        }
        csi
    }

    /// Memory references of a native (or nested) radix walk to a leaf for size `si`.
    ///
    /// # Safety
    /// With WIDE, as for `Tlb::access_in`.
    #[inline(always)]
    unsafe fn walk_refs<const WIDE: bool>(&mut self, va: u64, asid: u16, si: u32) -> u64 {
        let top = self.machine.walk_levels;
        let leaf = self.leaf_level[si as usize];
        // SAFETY: the caller's contract.
        let start = unsafe { self.pwcs.start::<WIDE>(va, asid, top, leaf, &mut self.walk.pwc_hits, &mut self.walk.pwc_misses) };
        let guest = (start - leaf + 1) as u64;
        self.last_walk = (start, leaf);
        self.note_sequential(va, si);
        match self.nested_host_refs {
            None => guest,
            // Each guest reference (and the final guest-physical address) is itself translated
            // by a host walk: (g+1)(h+1)-1 references (Bhargava et al., ASPLOS 2008).
            Some(h) => {
                let h = h[si as usize & (MAX_SIZES - 1)];
                (guest + 1) * (h + 1) - 1
            }
        }
    }

    /// Count the walk to `va`'s page of size `si` as sequential where the last `RECENT_WALKS`
    /// walks went to the two pages below it, or the two above, and remember it. The page is the
    /// one the TLB holds (`tlb_size`): a splintered 2MB page's 4KB pieces are walked one by one,
    /// and a stream crosses from piece to piece as it would from page to page.
    #[inline(always)]
    fn note_sequential(&mut self, va: u64, si: u32) {
        let held = self.tlb_size(si);
        let key = ((va >> self.shifts[held as usize]) << 4) | (held as u64 & 0xf);
        // A page up or down is 16 apart in the key, with the size's bits equal. A key near 0 or
        // u64::MAX wraps to one no walk has (u64::MAX marks an empty slot).
        let seen = |k: u64| k != u64::MAX && self.recent_walks.contains(&k);
        let (down, up) = (key.wrapping_sub(16), key.wrapping_add(16));
        if (seen(down) && seen(down.wrapping_sub(16))) || (seen(up) && seen(up.wrapping_add(16))) {
            self.walk.sequential += 1;
        }
        self.recent_walks[self.recent_at] = key;
        self.recent_at = (self.recent_at + 1) % RECENT_WALKS;
    }

    /// Drop a translation from every structure (a shootdown). A base page's shootdown also
    /// drops the coalesced entries that cover it: the OS does not know they exist (INVLPG
    /// of any address in a coalesced entry removes the entry).
    pub fn invalidate(&mut self, va: u64, asid: u16, si: u32) {
        let t = self.tlb_size(si);
        if t != si {
            self.invalidate_splintered(va, asid, si, t);
            return;
        }
        if si == 0 {
            self.invalidate_coalesced(va, asid);
        }
        self.invalidate_one(va, asid, si);
    }

    /// Drop the pieces of size index `t` a splintered page of size index `si` at `va` left in
    /// the TLBs: one by one for up to 512 of them, else by a scan of the structures holding
    /// that size (a 1GB guest page over 4KB host pages has 262,144).
    #[cold]
    fn invalidate_splintered(&mut self, va: u64, asid: u16, si: u32, t: u32) {
        let (big, small) = (self.shifts[si as usize], self.shifts[t as usize]);
        let first = (va >> big << (big - small)) & ((1u64 << 44) - 1); // as tags keep page numbers
        let pieces = 1u64 << (big - small);
        if pieces <= 512 {
            for k in 0..pieces {
                self.invalidate_one((first + k) << small, asid, t);
            }
            return;
        }
        for ti in 0..self.tlbs.len() {
            if self.holds[ti] & (1 << t) == 0 {
                continue;
            }
            let doomed: Vec<(u64, u64)> = self.tlbs[ti]
                .tags()
                .filter_map(|tag| {
                    let (a, vpn, s) = tlb::decode_tag(tag);
                    (a == asid && s == t && vpn >= first && vpn < first + pieces).then_some((vpn, tag))
                })
                .collect();
            for (vpn, tag) in doomed {
                if self.tlbs[ti].invalidate(vpn, tag) && self.track_evictions && self.group[ti] != NO_GROUP {
                    self.evictions.push((self.group[ti], tag));
                }
            }
        }
    }

    /// Drop the coalesced entries covering `va` (none on a machine that does not coalesce),
    /// leaving its base-page entry.
    pub fn invalidate_coalesced(&mut self, va: u64, asid: u16) {
        if let Some(c) = &self.coalesced {
            let (first, n) = (c.first, c.groups.len() as u32);
            for csi in first..first + n {
                self.invalidate_one(va, asid, csi);
            }
        }
    }

    fn invalidate_one(&mut self, va: u64, asid: u16, si: u32) {
        let vpn = va >> self.shifts[si as usize];
        let tag = make_tag(asid, vpn, si);
        for (ti, t) in self.tlbs.iter_mut().enumerate() {
            if self.holds[ti] & (1 << si) != 0 && t.invalidate(vpn, tag) && self.track_evictions && self.group[ti] != NO_GROUP {
                self.evictions.push((self.group[ti], tag));
            }
        }
    }

    /// Whether structure `t` holds entries of size index `si` (page or coalesced size).
    pub fn holds_size(&self, t: usize, si: u32) -> bool {
        self.holds[t] & (1 << si) != 0
    }

    /// The eviction group of the last-level structures serving this stream.
    pub fn group_of(&self, fetch: bool) -> u8 {
        self.stream_group[fetch as usize]
    }

    /// Entries in the last-level structures of eviction group `g`.
    pub fn group_entries(&self, g: u8) -> u32 {
        self.group.iter().zip(&self.tlbs).filter(|(&gg, _)| gg == g).map(|(_, t)| t.sets * t.ways).sum()
    }

    /// Drop every cached translation (address-space identifiers wrapped around).
    pub fn flush_all(&mut self) {
        for (ti, t) in self.tlbs.iter_mut().enumerate() {
            if self.track_evictions && self.group[ti] != NO_GROUP {
                let g = self.group[ti];
                self.evictions.extend(t.tags().map(|tag| (g, tag)));
            }
            t.flush();
        }
        self.flush_pwc();
    }

    /// Drop everything cached for the page-table structure (after unmapping page tables).
    pub fn flush_pwc(&mut self) {
        self.pwcs.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_hit_refills_l1_and_counts_l1_miss() {
        let m = Machine::load("skylake").unwrap();
        let mut mmu = Mmu::new(m);
        let va = 0x7f00_0000_1000;
        assert_eq!(mmu.lookup(va, 1, false), None);
        let refs = mmu.fill_after_walk(va, 1, false, 0);
        assert_eq!(refs, 4, "cold walk of a 4KB page reads 4 levels");
        assert_eq!(mmu.lookup(va, 1, false), Some((0, 0)));
        // Evict from L1d-4K (4-way, 16 sets): 4 more pages in the same set.
        for i in 1..=4u64 {
            let v = va + i * 16 * 4096;
            assert!(mmu.lookup(v, 1, false).is_none());
            mmu.fill_after_walk(v, 1, false, 0);
        }
        assert_eq!(mmu.lookup(va, 1, false), Some((1, 0)), "should hit in the STLB");
        assert_eq!(mmu.lookup(va, 1, false), Some((0, 0)), "and be back in L1");
    }

    #[test]
    fn page_walk_caches_shorten_walks() {
        let mut mmu = Mmu::new(Machine::load("skylake").unwrap());
        let va = 0x7f00_0000_0000;
        mmu.fill_after_walk(va, 1, false, 0);
        // Same 2MB region: the PDE cache holds the level-2 entry, only the PTE is read.
        assert_eq!(mmu.fill_after_walk(va + 4096, 1, false, 0), 1);
        // 2MB page in the same 1GB region: PDPTE cached, one read (the PDE leaf).
        assert_eq!(mmu.fill_after_walk(va + (2 << 20), 1, false, 1), 1);
        // New 1GB region in the same 512GB: PML4E cached, PDPTE+PDE+PTE read.
        assert_eq!(mmu.fill_after_walk(va + (1 << 30), 1, false, 0), 3);
    }

    #[test]
    fn nested_walk_costs_two_dimensions() {
        let src = include_str!("../machines/skylake.toml").replace(
            "pwc = [\n  { level = 4, sets = 1, ways = 4 },\n  { level = 3, sets = 2, ways = 4 },\n  { level = 2, sets = 4, ways = 8 },\n]",
            "nested = { host_levels = 4, host_page_size = \"4KiB\" }",
        );
        let mut mmu = Mmu::new(Machine::from_toml(&src, "t").unwrap());
        assert_eq!(mmu.fill_after_walk(0x1000, 1, false, 0), 24);
    }

    #[test]
    fn nested_walks_with_matching_host_pages_cost_24_15_8() {
        // Ram et al. (Trident) §2: 24, 15 and 8 references for 4KB+4KB, 2MB+2MB, 1GB+1GB.
        // Cold walks far apart, so no page-walk-cache entry helps.
        let mut mmu = Mmu::new(Machine::load("skylake+nested").unwrap());
        assert_eq!(mmu.fill_after_walk(0x1000, 1, false, 0), 24);
        assert_eq!(mmu.fill_after_walk(1 << 40, 1, false, 1), 15);
        assert_eq!(mmu.fill_after_walk(2 << 40, 1, false, 2), 8);
        // A host that maps everything with 4KB pages: a guest 1GB walk costs 2 guest
        // references, each and the final address translated by 4 host ones: 3 x 5 - 1.
        let mut mmu = Mmu::new(Machine::load("skylake+nested=4KiB").unwrap());
        assert_eq!(mmu.fill_after_walk(2 << 40, 1, false, 2), 14);
    }

    #[test]
    fn nested_suffix_errors_name_the_spec() {
        for (spec, want) in [
            ("skylake+nestd", "is not +nested"),
            ("skylake+nested=3KiB", "host page"),
            ("skylake+nested=64KiB", "not one of skylake's page sizes"),
            ("romer95+nested", "software-managed TLB"),
        ] {
            let e = Machine::load(spec).err().unwrap_or_else(|| panic!("{spec} loaded")).to_string();
            assert!(e.contains(want) && e.contains(spec) && !e.contains('\n'), "{spec}: {e}");
        }
        assert_eq!(Machine::load("skylake+nested=2MiB").unwrap().name, "skylake+nested=2MiB");
    }

    #[test]
    fn asids_do_not_share_entries() {
        let mut mmu = Mmu::new(Machine::adhoc_tlb("64:4").unwrap());
        mmu.fill_after_walk(0x1000, 1, false, 0);
        assert!(mmu.lookup(0x1000, 1, false).is_some());
        assert!(mmu.lookup(0x1000, 2, false).is_none());
    }
}
