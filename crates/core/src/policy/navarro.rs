//! `navarro`: reservation-based superpages with incremental promotion (Navarro, Iyer, Druschel,
//! Cox, "Practical, transparent operating system support for superpages", OSDI 2002, §4 and
//! §5; docs/NAVARRO.md describes each rule as modelled).
//!
//! On a first touch the policy reserves an aligned extent of the preferred superpage size
//! around the page (os/frames/reserv.rs) and maps the page at the frame with the matching offset; the
//! neighbours' first touches take the other frames of the extent; as soon as an aligned
//! extent of a superpage size inside a reservation is fully populated it is promoted in place,
//! smallest sizes first (incremental promotion), with no copying. When no extent of the wanted
//! size is free, the least recently allocated reservation that can yield one is preempted.
//!
//! Structures (per process) and their invariants:
//! - *Population map*: `leaves` holds the base pages this policy populated and that are still
//!   mapped; `nodes[(l, idx)]` (located by hash, created lazily: a missing node has both
//!   counts 0) counts, for the aligned region of level-`l` size with index `idx`, its children
//!   (regions of level l-1) with at least one populated page (`somepop`) and fully populated
//!   (`fullpop`); counts change upward only on a child's 0<->1 and (fan-1)<->fan transitions.
//!   Each node also counts its present children by the largest extent each would yield if
//!   preempted (`by_yield`), so the list a reservation belongs on is read off its own node; a
//!   population change walks up the path until a region's view (present, full, yield) is
//!   unchanged.
//! - *Reservations*: `reservs[(l, idx)]` names the reservation whose extent is that level-`l`
//!   region. A reservation can die behind the policy's back (its last page unmapped), so every
//!   use checks it is still the same live extent (`ResRef::live`).
//! - *Reservation lists*: one per level below the largest; a reservation is on the list of the
//!   largest extent it would yield if preempted, keyed by the time of its latest allocation
//!   (the head is the least recently allocated); partial pieces of a preempted reservation go
//!   to the head of their list.
//!
//! The OS mechanisms the policy switches on live in the OS model: demotion on protection
//! change and on eviction (os/mod.rs, os/swap.rs), speculative demotion and repromotion
//! (os/swap.rs), file reservations and file superpages with demote-on-write, whole-dirtying or
//! page digests (os/filemap.rs), cache pages in the buddy lists, the contiguity-aware daemon
//! and wired-page clustering (os/frames/mod.rs, os/pagedaemon.rs), aligned placement of file
//! mappings (os/placement.rs, asked for through `file_mapping_alignment`), PTE replication's
//! cost (stats.rs). Not modelled (docs/NAVARRO.md): pages a child inherits at fork are not in
//! its population map.

use super::{FaultDecision, FaultInfo, Features, Params, Policy, Sys};
use crate::error::Result;
use crate::fasthash::FastMap;
use crate::os::filemap::DirtySuperpages;
use crate::os::promote::PromoteResult;
use crate::os::{MapOutcome, OsFeatures, Vma, VmaKind};
use crate::pageset::PageSet;
use crate::units::{Order, PageSize};
use std::collections::BTreeSet;

/// How long after its wake-up the page daemon runs: one scheduling quantum of FreeBSD 4 (HZ =
/// 100, a 10ms tick), since the faulting process keeps the CPU until then (the paper's machine
/// has one).
const DAEMON_DELAY_MS: f64 = 10.0;

pub const PARAMS: &str = "sizes=S1+S2+... (superpage sizes to use; default: every size of the machine); \
retry_smaller=true (when the preferred extent cannot be had even by preemption, try the intermediate sizes before a base page); \
threshold=F (promote once a fraction F of a region is populated, zeroing the rest; default 1); \
promote_at=K (for the smallest superpage size only: promote once K of its base pages are populated, zeroing the rest; \
K from 1, eager, to all of them, the default: 16 for a 64KB contiguous-bit page of 4KB ones, Solomon's \"more aggressive promotion policies\"); \
fragmentation=none|cache|daemon (fragmentation control: none; cache pages kept in the buddy lists; \
or that plus the contiguity-aware page daemon, deactivate-on-close and wired-page clustering; default daemon); \
demote_p=P (probability of demoting a superpage whose reference bit the page daemon clears under pressure; default 1; 0 turns speculative demotion off); \
dirty=demote|whole|hash (a write to a clean file superpage demotes it so dirty state stays per base page, the paper's choice; or dirties all of it; or keeps it, with page digests so the flush writes only changed pages; default demote); \
pte_replication=true (charge a PTE write per base page for every promotion and demotion step, as FreeBSD on Alpha pays; cycles.pte); \
readahead=N (at a fault that reads a file mapping's page from disk, also read the N pages after it, as FreeBSD's vm_fault does with VM_FAULT_READ_AHEAD_INIT = 15, sys/vm/vm_map.h; default 0, how the model ran before this knob: Navarro's results were measured so); \
speculate=true (reserve the whole aligned extent, up to 2MB, around a fault in anonymous memory even where it reaches past the mapping, \
as FreeBSD's vm_reserv_alloc_page does for objects that are not vnodes (\"Speculate that the object may grow\", sys/vm/vm_reserv.c), \
so small heaps and mappings get contiguity too; counted navarro.reserve_speculative; default false: the paper's preferred size, capped by the object's size); \
promote=false (reserve and place pages, but never promote anonymous memory: the contiguity reservations alone create, \
which AMD coalescing can use; counted navarro.promote_skipped.promotion_off); \
cow=copy|split (a write to a superpage shared copy-on-write after fork: copy it whole, the default, or break the writer's mapping into base pages as FreeBSD does, counted as demote.cow.<size>); \
align_files=false (leave file mappings where the trace put them; default true: a shared file mapping that names no address goes to one congruent to its file offset modulo the largest superpage size no larger than it)";

/// Navarro et al.'s fragmentation-control schemes (§6.4 compares "cache" and "daemon").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FragControl {
    /// Reclaimed page-cache pages are dropped; nothing else.
    None,
    /// Cache pages are coalesced in the buddy lists, usable by reservations.
    Cache,
    /// Cache, plus the contiguity-aware daemon, deactivation on close, wired-page clustering.
    Daemon,
}

/// A write to a superpage shared copy-on-write after fork (`cow=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CowBreak {
    /// Copy it whole at its size (the model's behaviour before this knob; Linux before 5.8).
    Copy,
    /// Break the writer's mapping into base pages, a `cow` demotion (FreeBSD's pmap).
    Split,
}

/// The largest extent `speculate=true` reserves past a mapping's ends: FreeBSD's one
/// reservation size on amd64 and arm64 with 4KB pages (VM_LEVEL_0_ORDER = 9,
/// sys/amd64/include/vmparam.h, sys/arm64/include/vmparam.h); larger extents keep the cap.
const SPECULATIVE_MAX: u64 = 2 << 20;

/// Most levels a population map has (one per page size used).
const MAX_LEVELS: usize = crate::mmu::MAX_SIZES;

#[derive(Clone, Copy, Debug, Default)]
struct Node {
    somepop: u32,
    fullpop: u32,
    /// The present children (somepop > 0) by the level of the largest extent each would yield
    /// if preempted: `by_yield[k]` of them yield a level-k extent; children that would yield
    /// nothing (every page populated) are not counted. Kept up to date on every population
    /// change, so the list a reservation belongs on is known without visiting its subtree.
    by_yield: [u32; MAX_LEVELS],
}

impl Node {
    /// The level of the largest extent the level-`l` region would yield if preempted: `l - 1`
    /// while a child region is empty, else the best of its children's (None: every page is
    /// populated).
    fn yields(&self, l: usize, fan: u64) -> Option<usize> {
        if (self.somepop as u64) < fan {
            return Some(l - 1);
        }
        (0..l.saturating_sub(1)).rev().find(|&k| self.by_yield[k] > 0)
    }
}

/// How one region changed, as its parent sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Seen {
    present: bool,
    full: bool,
    yields: Option<usize>,
}

/// A reservation as the policy knows it: the id and the extent it had when made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ResRef {
    id: u32,
    pfn: u64,
    order: u8,
}

impl ResRef {
    fn live(&self, sys: &Sys) -> bool {
        sys.os.phys.reservs.get(self.id).is_some_and(|r| r.pfn == self.pfn && r.order == self.order)
    }
}

#[derive(Default)]
struct ProcMap {
    leaves: PageSet,
    nodes: FastMap<(u8, u64), Node>,
    reservs: FastMap<(u8, u64), ResRef>,
}

/// What an attempt to reserve an extent for a faulting page got.
enum Reserved {
    /// A reservation, with the page mapped from it.
    Made(ResRef),
    /// The page was mapped from a new reservation that did not outlive the mapping: the page
    /// tables it needed took the reservation's free frames back (no other frame was free).
    MappedThenDissolved,
    /// No reservation (counted in `reserve_failed`); the page is not mapped.
    Failed,
}

/// Where a reservation sits on the lists.
#[derive(Clone, Copy)]
struct Listed {
    list: u8,
    key: i64,
    pi: usize,
    level: u8,
    idx: u64,
}

#[derive(Default, Clone)]
struct Counters {
    faults: u64,
    from_reservation: u64,
    reserved: Vec<u64>,
    reserve_failed: Vec<u64>,
    preempted: Vec<u64>,
    base_fallback: u64,
    base_preempt: u64,
    /// Faults during which the policy preempted at least one reservation (for the page, a
    /// reservation, or the page's tables).
    faults_preempting: u64,
    /// Faults whose page was mapped from a reservation that the mapping's own page-table frames
    /// then dissolved (no free frame was left but the reservation's).
    reservation_dissolved: u64,
    promoted: Vec<u64>,
    promote_refused: [u64; 8],
    cap_object: u64,
    cap_overlap: u64,
    preferred: Vec<u64>,
    /// Reservation extents that ended (at their process's exit) without becoming one superpage
    /// because they were never fully populated, by level; and how full they were.
    unpromoted_partial: Vec<u64>,
    unpromoted_pages: u64,
    unpromoted_frames: u64,
    /// Pages mapped and zeroed ahead of their first touch so a region could be promoted.
    prezeroed: u64,
    /// Threshold promotions not tried because part of the region was in swap.
    prefetch_refused_swapped: u64,
    /// Faults after which promotion was not tried because `promote=false`.
    promotion_off: u64,
    /// Reservations made under `speculate=true` whose extent reaches past the mapping.
    reserved_speculative: u64,
}

pub struct Navarro {
    /// Machine size index of each level; level 0 is the base page.
    levels: Vec<u32>,
    shifts: Vec<u32>,
    /// Children per node at each level (level 0 unused).
    fan: Vec<u64>,
    retry_smaller: bool,
    /// Promote a region once this fraction of it is populated, zeroing the rest (1: only full
    /// regions, the paper's choice).
    threshold: f64,
    /// Base pages of the smallest superpage size that must be populated before it is
    /// promoted (the rest zeroed); None: `threshold` decides there too.
    promote_at: Option<u64>,
    frag: FragControl,
    pte_replication: bool,
    /// Place file mappings that name no address at aligned addresses (os/placement.rs).
    align_files: bool,
    /// Pages read after a file-mapping page read from disk (`readahead=`).
    readahead: u32,
    /// What a write to a shared copy-on-write superpage does (`cow=`).
    cow: CowBreak,
    /// Promote anonymous regions at all (`promote=`); off, reservations only place pages.
    promote_on: bool,
    /// Reserve past an anonymous mapping's ends (`speculate=`, FreeBSD's rule).
    speculate: bool,
    /// Speculative demotion's probability (the paper's p; 1 as recalled, UNVERIFIED: notes §A.4.6).
    demote_p: f64,
    /// A write to a clean file superpage: demote it (the paper's choice) or dirty it whole.
    dirty: DirtySuperpages,
    /// Extents of the preferred size that could not be had since the daemon last ran, as
    /// (level, process, region index): the daemon's goal.
    failed: BTreeSet<(usize, usize, u64)>,
    /// When the woken daemon gets to run (simulated cycles): one scheduling quantum after the
    /// first failure it serves.
    daemon_due: Option<u64>,
    procs: FastMap<usize, ProcMap>,
    lists: Vec<BTreeSet<(i64, ResRef)>>,
    listed: FastMap<ResRef, Listed>,
    clock: i64,
    head_clock: i64,
    c: Counters,
}

/// navarro's parameters (`navarro:key=value,...`, each described in `PARAMS`); the defaults
/// are the paper's system.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct NavarroParams {
    /// Read by `parse_sizes`.
    #[allow(dead_code)]
    sizes: Option<String>,
    retry_smaller: bool,
    #[serde(deserialize_with = "crate::spec::fraction")]
    threshold: f64,
    promote_at: Option<u64>,
    fragmentation: FragControl,
    pte_replication: bool,
    #[serde(deserialize_with = "crate::spec::probability")]
    demote_p: f64,
    dirty: DirtySuperpages,
    align_files: bool,
    readahead: u32,
    cow: CowBreak,
    promote: bool,
    speculate: bool,
}

impl Default for NavarroParams {
    fn default() -> Self {
        NavarroParams {
            sizes: None,
            retry_smaller: false,
            threshold: 1.0,
            promote_at: None,
            fragmentation: FragControl::Daemon,
            pte_replication: false,
            demote_p: 1.0,
            dirty: DirtySuperpages::Demote,
            align_files: true,
            readahead: 0,
            cow: CowBreak::Copy,
            promote: true,
            speculate: false,
        }
    }
}

pub fn build(params: &Params, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    Ok(Box::new(Navarro::new(params, sizes)?))
}

impl Navarro {
    fn new(params: &Params, sizes: &[PageSize]) -> Result<Navarro> {
        let NavarroParams {
            sizes: _,
            retry_smaller,
            threshold,
            promote_at,
            fragmentation: frag,
            pte_replication,
            demote_p,
            dirty,
            align_files,
            readahead,
            cow,
            promote,
            speculate,
        } = crate::spec::from_params("policy", "navarro", params)?;
        let levels = super::parse_sizes("navarro", params, sizes)?;
        let shifts: Vec<u32> = levels.iter().map(|&si| sizes[si as usize].shift()).collect();
        let fan: Vec<u64> = (0..levels.len()).map(|l| if l == 0 { 0 } else { 1u64 << (shifts[l] - shifts[l - 1]) }).collect();
        if let Some(k) = promote_at {
            let Some(&pages) = fan.get(1) else {
                return Err(crate::error::Error::usage("policy navarro: promote_at needs a superpage size (sizes= leaves only the base page)".to_string()));
            };
            if k == 0 || k > pages {
                return Err(crate::error::Error::usage(format!(
                    "policy navarro: promote_at={k}: must be from 1 to {pages} (base pages in a {} page)",
                    sizes[levels[1] as usize]
                )));
            }
        }
        let n = levels.len();
        Ok(Navarro {
            levels,
            shifts,
            fan,
            retry_smaller,
            threshold,
            promote_at,
            frag,
            pte_replication,
            align_files,
            readahead,
            cow,
            promote_on: promote,
            speculate,
            demote_p,
            dirty,
            failed: BTreeSet::new(),
            daemon_due: None,
            procs: FastMap::default(),
            lists: vec![BTreeSet::new(); n.saturating_sub(1)],
            listed: FastMap::default(),
            clock: 0,
            head_clock: 0,
            c: Counters {
                reserved: vec![0; n],
                reserve_failed: vec![0; n],
                preempted: vec![0; n],
                promoted: vec![0; n],
                preferred: vec![0; n],
                unpromoted_partial: vec![0; n],
                ..Default::default()
            },
        })
    }

    fn top(&self) -> usize {
        self.levels.len() - 1
    }

    fn idx(&self, l: usize, va: u64) -> u64 {
        va >> self.shifts[l]
    }

    fn node(&self, pi: usize, l: usize, idx: u64) -> Node {
        self.procs.get(&pi).and_then(|m| m.nodes.get(&(l as u8, idx))).copied().unwrap_or_default()
    }

    /// Population map: base page `page` (a byte address) became populated (`on`) or not. Each
    /// level up the path sees its child's change (present, full, what it would yield) and
    /// updates its counts; the walk stops at the first region whose own view is unchanged.
    fn set_population(&mut self, pi: usize, page: u64, on: bool) {
        let top = self.top();
        let (shifts, fan) = (&self.shifts, &self.fan);
        let m = self.procs.entry(pi).or_default();
        let vpn = page >> shifts[0];
        let changed = if on { m.leaves.insert(vpn) } else { m.leaves.remove(vpn) };
        if !changed {
            return;
        }
        // A base page is present and full at once, and yields nothing of its own.
        let page_seen = |populated: bool| Seen { present: populated, full: populated, yields: None };
        let (mut was, mut is) = (page_seen(!on), page_seen(on));
        for l in 1..=top {
            let key = (l as u8, page >> shifts[l]);
            let n = m.nodes.entry(key).or_default();
            let f = fan[l];
            let seen = |n: &Node| Seen { present: n.somepop > 0, full: n.fullpop as u64 == f, yields: n.yields(l, f) };
            let before = seen(n);
            if was.present != is.present {
                n.somepop = if is.present { n.somepop + 1 } else { n.somepop - 1 };
            }
            if was.full != is.full {
                n.fullpop = if is.full { n.fullpop + 1 } else { n.fullpop - 1 };
            }
            if l >= 2 {
                if let (true, Some(y)) = (was.present, was.yields) {
                    n.by_yield[y] -= 1;
                }
                if let (true, Some(y)) = (is.present, is.yields) {
                    n.by_yield[y] += 1;
                }
            }
            let after = seen(n);
            if n.somepop == 0 {
                debug_assert!(n.by_yield.iter().all(|&c| c == 0), "empty region ({l}, {}) still counts children", key.1);
                m.nodes.remove(&key);
            }
            if before == after {
                break;
            }
            (was, is) = (before, after);
        }
    }

    /// Why the reservations of process `pi` are not superpages: (level, populated base pages,
    /// base pages) of each one not fully populated. A reservation whose pages are all gone
    /// (dead) has nothing populated and is skipped.
    fn partial_reservations(&self, pi: usize) -> Vec<(usize, u64, u64)> {
        let Some(m) = self.procs.get(&pi) else { return Vec::new() };
        let mut out = Vec::new();
        for &(l, idx) in m.reservs.keys() {
            let l = l as usize;
            let n = m.nodes.get(&(l as u8, idx)).copied().unwrap_or_default();
            if n.somepop == 0 || n.fullpop as u64 == self.fan[l] {
                continue;
            }
            let start = idx << (self.shifts[l] - self.shifts[0]);
            let pages = 1u64 << (self.shifts[l] - self.shifts[0]);
            let populated = m.leaves.count_in(start, start + pages);
            out.push((l, populated, pages));
        }
        out
    }

    /// The live reservation whose extent holds `va`, with its level.
    fn find_reservation(&mut self, sys: &Sys, pi: usize, va: u64) -> Option<(usize, ResRef)> {
        for l in (1..=self.top()).rev() {
            let key = (l as u8, self.idx(l, va));
            let Some(&r) = self.procs.get(&pi).and_then(|m| m.reservs.get(&key)) else { continue };
            if r.live(sys) {
                return Some((l, r));
            }
            self.forget(pi, l, key.1, r);
        }
        None
    }

    fn forget(&mut self, pi: usize, l: usize, idx: u64, r: ResRef) {
        if let Some(m) = self.procs.get_mut(&pi) {
            if m.reservs.get(&(l as u8, idx)) == Some(&r) {
                m.reservs.remove(&(l as u8, idx));
            }
        }
        if let Some(e) = self.listed.remove(&r) {
            self.lists[e.list as usize].remove(&(e.key, r));
        }
    }

    /// The preferred level for a fault at `va` in `vma` (§A.2.3), capped by the population map.
    fn preferred(&mut self, pi: usize, vma: &Vma, va: u64) -> usize {
        let len = vma.end - vma.start;
        let mut want = 0;
        for l in (1..=self.top()).rev() {
            let size = 1u64 << self.shifts[l];
            let start = va & !(size - 1);
            let fits = match vma.kind {
                // FreeBSD reserves for anonymous objects past their ends, speculating that they
                // grow (vm_reserv_alloc_page); the frames stay free for others until preempted.
                _ if self.speculate && size <= SPECULATIVE_MAX => true,
                // Growing objects may reach past their growing end, capped at their size.
                VmaKind::Heap => start >= vma.start && size <= len,
                VmaKind::Stack => start + size <= vma.end && size <= len,
                _ => vma.holds_aligned(va, size),
            };
            if fits {
                want = l;
                break;
            }
        }
        if want < self.top() {
            self.c.cap_object += 1;
        }
        // Overlap limit: the first node on the root-to-leaf path with nothing populated.
        let mut limit = 0;
        for l in (1..=self.top()).rev() {
            if self.node(pi, l, self.idx(l, va)).somepop == 0 {
                limit = l;
                break;
            }
        }
        if limit < want {
            self.c.cap_overlap += 1;
            want = limit;
        }
        self.c.preferred[want] += 1;
        want
    }

    /// The level of the largest extent reservation `(l, idx)` would yield if preempted.
    fn yield_level(&self, pi: usize, l: usize, idx: u64) -> Option<usize> {
        self.node(pi, l, idx).yields(l, self.fan[l])
    }

    /// `yield_level` by visiting the subtree (what `Node::by_yield` saves), for the tests.
    #[cfg(test)]
    fn yield_level_by_descent(&self, pi: usize, l: usize, idx: u64) -> Option<usize> {
        let n = self.node(pi, l, idx);
        if (n.somepop as u64) < self.fan[l] {
            return Some(l - 1);
        }
        if l == 1 {
            return None;
        }
        let per = self.fan[l];
        (idx * per..(idx + 1) * per).filter_map(|c| self.yield_level_by_descent(pi, l - 1, c)).max()
    }

    /// Put reservation `r` at `(l, idx)` on the list it belongs to now; `key` None keeps its
    /// old place in time (the list may change), Some(k) moves it there.
    fn relist(&mut self, pi: usize, l: usize, idx: u64, r: ResRef, key: Option<i64>) {
        let old = self.listed.remove(&r);
        if let Some(e) = old {
            self.lists[e.list as usize].remove(&(e.key, r));
        }
        let Some(list) = self.yield_level(pi, l, idx) else { return };
        let key = key.or(old.map(|e| e.key)).unwrap_or(self.clock);
        self.lists[list].insert((key, r));
        self.listed.insert(r, Listed { list: list as u8, key, pi, level: l as u8, idx });
    }

    fn register(&mut self, pi: usize, l: usize, idx: u64, r: ResRef, key: Option<i64>) {
        self.procs.entry(pi).or_default().reservs.insert((l as u8, idx), r);
        self.relist(pi, l, idx, r, key);
    }

    /// Preempt the least recently allocated reservation able to yield an extent of level
    /// `want` (from its list, or a larger one's). Returns whether one was broken.
    fn preempt(&mut self, sys: &mut Sys, want: usize) -> bool {
        for list in want..self.lists.len() {
            while let Some(&(key, r)) = self.lists[list].iter().next() {
                self.lists[list].remove(&(key, r));
                let Some(e) = self.listed.remove(&r) else { continue };
                if !r.live(sys) {
                    self.forget(e.pi, e.level as usize, e.idx, r);
                    continue;
                }
                self.break_reservation(sys, r, e);
                self.c.preempted[list] += 1;
                return true;
            }
        }
        false
    }

    /// Make sure `frames` free frames plus the tables mapping `page` would create can come from
    /// the buddy allocator, preempting reservations from the lists (one level of one
    /// reservation at a time, §A.2.4) while they cannot: the paper's allocator takes a base
    /// page from the buddy lists, then from the 8KB reservation list as the last resort. (The
    /// OS model's own fallback would dissolve the oldest reservation whole, FreeBSD's later
    /// vm_reserv_reclaim_inactive.) Returns whether it preempted.
    fn preempt_until_free(&mut self, sys: &mut Sys, pi: usize, page: u64, frames: u64) -> bool {
        // Tables are only looked at when the buddy lists are nearly empty (a walk per fault).
        const MOST_TABLES: u64 = 8;
        if sys.os.phys.free_frames() >= frames + MOST_TABLES {
            return false;
        }
        let need = frames + sys.os.procs[pi].pt.tables_missing(page);
        let mut preempted = false;
        while sys.os.phys.free_frames() < need && self.preempt(sys, 0) {
            preempted = true;
        }
        preempted
    }

    /// Split a reservation into extents of the next smaller level: empty ones are freed, full
    /// ones dropped, partial ones become reservations at the head of their lists.
    fn break_reservation(&mut self, sys: &mut Sys, r: ResRef, e: Listed) {
        let (pi, l) = (e.pi, e.level as usize);
        if let Some(m) = self.procs.get_mut(&pi) {
            m.reservs.remove(&(l as u8, e.idx));
        }
        let to = Order((self.shifts[l - 1] - self.shifts[0]) as u8);
        let out = sys.os.phys.reserv_split(r.id, to);
        // (Pieces of one base page are empty or full, so partial pieces have level l-1 >= 1.)
        for nid in out.partial {
            let p = sys.os.phys.reservs.get(nid).expect("a fresh partial piece");
            let nr = ResRef { id: nid, pfn: p.pfn, order: p.order };
            let Some((_, vpn)) = p.owner.as_anon() else { continue };
            let idx = (vpn << self.shifts[0]) >> self.shifts[l - 1];
            self.head_clock -= 1;
            let key = i64::MIN / 2 + self.head_clock;
            self.register(pi, l - 1, idx, nr, Some(key));
        }
    }

    fn serve_fault_inner(&mut self, sys: &mut Sys, pi: usize, va: u64, vma: &Vma) -> Option<u32> {
        if self.daemon_due.is_some_and(|t| sys.now.0 >= t) {
            self.run_daemon(sys);
        }
        self.clock += 1;
        self.c.faults += 1;
        let page = va & !((1u64 << self.shifts[0]) - 1);
        // The page's tables come from the buddy allocator too, whichever way the page is had.
        self.preempt_until_free(sys, pi, page, 0);
        // A frame already reserved for this page?
        if let Some((l, r)) = self.find_reservation(sys, pi, va) {
            if sys.os.map_from_reservation(pi, va, r.id, self.clock as u64, sys.mmu) == MapOutcome::Mapped {
                self.c.from_reservation += 1;
                self.set_population(pi, page, true);
                let idx = self.idx(l, va);
                if !r.live(sys) {
                    self.forget(pi, l, idx, r);
                    return self.served_without_reservation(sys, pi, va);
                }
                self.relist(pi, l, idx, r, Some(self.clock));
                return Some(self.promote(sys, pi, va, l, r, vma));
            }
        }
        let want = self.preferred(pi, vma, va);
        let mut tries: Vec<usize> = if want > 0 { vec![want] } else { Vec::new() };
        if self.retry_smaller {
            tries.extend((1..want).rev());
        }
        for l in tries {
            match self.reserve(sys, pi, va, l) {
                Reserved::Made(r) => {
                    if !vma.holds_aligned(va, 1u64 << self.shifts[l]) {
                        self.c.reserved_speculative += 1;
                    }
                    self.set_population(pi, page, true);
                    let idx = self.idx(l, va);
                    self.register(pi, l, idx, r, Some(self.clock));
                    return Some(self.promote(sys, pi, va, l, r, vma));
                }
                Reserved::MappedThenDissolved => {
                    self.set_population(pi, page, true);
                    return self.served_without_reservation(sys, pi, va);
                }
                Reserved::Failed => {}
            }
        }
        if want > 0 {
            self.c.base_fallback += 1;
        }
        // A base page: the buddy allocator, then (last resort) preempting reservations from
        // the lists (§A.2.4 step 4) until the page and its tables have free frames.
        if self.preempt_until_free(sys, pi, page, 1) {
            self.c.base_preempt += 1;
        }
        let out = sys.os.map_page(pi, page, 0, (vma.start, vma.end), sys.mmu);
        if out != MapOutcome::Mapped {
            // Under memory pressure the page may have been mapped by an attempt above and swapped
            // out at once (its reservation then died): bring it back like any swapped page.
            if sys.os.swapped_at(pi, va).is_some() {
                return sys.os.swap_in(pi, va, sys.mmu);
            }
            return None; // the engine's own path reports the out-of-memory
        }
        self.set_population(pi, page, true);
        Some(0)
    }

    /// Reserve an extent of level `l` around `va` and map `va` from it, preempting as needed.
    fn reserve(&mut self, sys: &mut Sys, pi: usize, va: u64, l: usize) -> Reserved {
        for _ in 0..8 {
            match sys.os.reserve_and_map(pi, va, self.levels[l], self.clock as u64, sys.mmu) {
                Ok(id) => {
                    self.c.reserved[l] += 1;
                    return match sys.os.phys.reservs.get(id) {
                        Some(p) => Reserved::Made(ResRef { id, pfn: p.pfn, order: p.order }),
                        None => Reserved::MappedThenDissolved,
                    };
                }
                Err(MapOutcome::NoContiguousExtent) => {
                    if !self.preempt(sys, l) {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        self.c.reserve_failed[l] += 1;
        if self.frag == FragControl::Daemon {
            self.failed.insert((l, pi, self.idx(l, va)));
            if self.daemon_due.is_none() {
                self.daemon_due = Some(sys.now.0 + sys.ms(DAEMON_DELAY_MS));
            }
        }
        Reserved::Failed
    }

    /// A fault whose page was mapped from a reservation that the mapping's own page-table
    /// frames then dissolved: served, as a base page with no reservation behind it (counted).
    fn served_without_reservation(&mut self, sys: &Sys, pi: usize, va: u64) -> Option<u32> {
        self.c.reservation_dissolved += 1;
        Some(sys.os.procs[pi].pt.size_at(va).unwrap_or(0))
    }

    /// Incremental promotion (§A.2.6): the largest fully populated region on `va`'s path that
    /// lies in a reservation is promoted in place. Returns the size index now mapping `va`.
    fn promote(&mut self, sys: &mut Sys, pi: usize, va: u64, res_level: usize, r: ResRef, vma: &Vma) -> u32 {
        if !self.promote_on {
            self.c.promotion_off += 1;
            return sys.os.procs[pi].pt.size_at(va).unwrap_or(0);
        }
        for l in (1..=res_level).rev() {
            let full = (self.node(pi, l, self.idx(l, va)).fullpop as u64) >= self.fan[l];
            let start = va & !((1u64 << self.shifts[l]) - 1);
            if !full && !self.prezero(sys, pi, start, l, r, vma) {
                continue;
            }
            match sys.os.promote_in_place(pi, start, self.levels[l], sys.mmu) {
                PromoteResult::Promoted => self.c.promoted[l] += 1,
                PromoteResult::AlreadyLarger => {}
                other => self.c.promote_refused[(other as usize).min(7)] += 1,
            }
            break;
        }
        sys.os.procs[pi].pt.size_at(va).unwrap_or(0)
    }

    /// The contiguity-aware page daemon: woken by the failures since it last ran, it restores
    /// one extent per failed (process, region) of each size, largest sizes first.
    fn run_daemon(&mut self, sys: &mut Sys) {
        self.daemon_due = None;
        let mut per_level = vec![0u64; self.levels.len()];
        for &(l, _, _) in &self.failed {
            per_level[l] += 1;
        }
        self.failed.clear();
        for l in (1..self.levels.len()).rev() {
            if per_level[l] > 0 {
                let order = (self.shifts[l] - self.shifts[0]) as u8;
                sys.os.recover_contiguity(order, per_level[l]);
            }
        }
    }

    /// The population threshold below 1 (§A.2.6's alternative): once at least `threshold` of
    /// the region at `start` (level `l`, inside reservation `r` and the VMA) is populated, map
    /// and zero the rest from the reservation so it can be promoted. Returns whether it did.
    fn prezero(&mut self, sys: &mut Sys, pi: usize, start: u64, l: usize, r: ResRef, vma: &Vma) -> bool {
        let s0 = self.shifts[0];
        let pages = 1u64 << (self.shifts[l] - s0);
        // Populated pages needed: promote_at for the smallest superpage size, else threshold.
        // A replacement that manages superpages (AMSQM) sets the threshold.
        let threshold = sys.os.replacement.promotion_threshold().unwrap_or(self.threshold);
        let need = match self.promote_at {
            Some(k) if l == 1 => k as f64,
            _ => threshold * pages as f64,
        };
        if need >= pages as f64 || start < vma.start || start + (1u64 << self.shifts[l]) > vma.end {
            return false;
        }
        // Part of the region is in swap: prefetching it would read it back, which this model
        // does not do at promotion; the region waits until its pages fault back in.
        if sys.os.swapped_overlaps(pi, start, start + (1u64 << self.shifts[l])) {
            self.c.prefetch_refused_swapped += 1;
            return false;
        }
        let Some(m) = self.procs.get(&pi) else { return false };
        let have = m.leaves.count_in(start >> s0, (start >> s0) + pages);
        if (have as f64) < need {
            return false;
        }
        for k in 0..pages {
            let page = start + (k << s0);
            if self.procs.get(&pi).is_some_and(|m| m.leaves.contains(page >> s0)) {
                continue;
            }
            if sys.os.map_from_reservation(pi, page, r.id, self.clock as u64, sys.mmu) != MapOutcome::Mapped {
                return false; // something else maps it (or the frame is gone): leave it
            }
            self.set_population(pi, page, true);
            self.c.prezeroed += 1;
        }
        true
    }
}

impl Policy for Navarro {
    fn name(&self) -> String {
        "navarro".into()
    }

    fn on_fault(&mut self, _f: &FaultInfo) -> FaultDecision {
        FaultDecision::base()
    }

    fn features(&self) -> Features {
        let daemon = self.frag == FragControl::Daemon;
        Features {
            serves_faults: true,
            wants_unmaps: true,
            wants_tick: daemon,
            places_file_mappings: self.align_files && self.shifts.len() > 1,
            os: OsFeatures {
                evict_demotes: true,
                deactivate_on_close: daemon,
                cache_pages_in_buddy: self.frag != FragControl::None,
                wired_clustering: daemon,
                pte_replication: self.pte_replication,
                speculative_demotion: self.demote_p,
                file_superpages: Some(self.dirty),
                file_size_mask: self.levels[1..].iter().fold(0, |m, &si| m | 1 << si),
                file_readahead: self.readahead,
                cow_splits: self.cow == CowBreak::Split,
                pageblock_order: None,
                steal_moves_free_blocks: false,
            },
            ..Features::default()
        }
    }

    fn file_mapping_alignment(&self, len: u64) -> Option<u64> {
        // The largest superpage size in use no larger than the mapping (notes §A.2.11).
        if !self.align_files {
            return None;
        }
        self.shifts[1..].iter().rev().map(|&s| 1u64 << s).find(|&size| size <= len)
    }

    fn tick(&mut self, sys: &mut Sys) {
        if self.daemon_due.is_some_and(|t| sys.now.0 >= t) {
            self.run_daemon(sys);
        }
    }

    fn serve_fault(&mut self, sys: &mut Sys, pi: usize, va: u64, _write: bool, vma: &Vma) -> Option<u32> {
        let preempted_before: u64 = self.c.preempted.iter().sum();
        let out = self.serve_fault_inner(sys, pi, va, vma);
        if self.c.preempted.iter().sum::<u64>() > preempted_before {
            self.c.faults_preempting += 1;
        }
        out
    }

    fn on_unmap(&mut self, pi: usize, start: u64, end: u64) {
        if start == 0 && end == u64::MAX {
            // Exit: say why the reservations left are not superpages, then forget them (their
            // frames went back to them, and they died with the last one).
            for (l, populated, pages) in self.partial_reservations(pi) {
                self.c.unpromoted_partial[l] += 1;
                self.c.unpromoted_pages += populated;
                self.c.unpromoted_frames += pages;
            }
            if let Some(m) = self.procs.remove(&pi) {
                for r in m.reservs.values() {
                    if let Some(e) = self.listed.remove(r) {
                        self.lists[e.list as usize].remove(&(e.key, *r));
                    }
                }
            }
            return;
        }
        let Some(m) = self.procs.get(&pi) else { return };
        let s0 = self.shifts[0];
        let mut gone = Vec::new();
        m.leaves.for_each_in(start >> s0, end.div_ceil(1 << s0), |vpn| gone.push(vpn));
        let mut touched = BTreeSet::new();
        for vpn in gone {
            let va = vpn << s0;
            self.set_population(pi, va, false);
            for l in 1..=self.top() {
                let key = (l as u8, self.idx(l, va));
                if let Some(&r) = self.procs.get(&pi).and_then(|m| m.reservs.get(&key)) {
                    touched.insert((l, key.1, r));
                }
            }
        }
        // Fewer pages: the reservations may now yield larger extents (same place in time).
        // Dead ones are dropped the next time they are looked at.
        for (l, idx, r) in touched {
            if self.listed.contains_key(&r) || self.yield_level(pi, l, idx).is_some() {
                self.relist(pi, l, idx, r, None);
            }
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let name = |l: usize| format!("{}", crate::units::Bytes(1u64 << self.shifts[l]));
        let mut v = vec![
            ("navarro.faults".to_string(), self.c.faults),
            ("navarro.fault.from_reservation".to_string(), self.c.from_reservation),
            ("navarro.fault.base_fallback".to_string(), self.c.base_fallback),
            ("navarro.promote_skipped.promotion_off".to_string(), self.c.promotion_off),
            ("navarro.fault.base_preempt".to_string(), self.c.base_preempt),
            ("navarro.fault.preempting".to_string(), self.c.faults_preempting),
            ("navarro.fault.reservation_dissolved".to_string(), self.c.reservation_dissolved),
            ("navarro.prezeroed_pages".to_string(), self.c.prezeroed),
            ("navarro.promote_skipped.swapped".to_string(), self.c.prefetch_refused_swapped),
            ("navarro.preferred_capped.object".to_string(), self.c.cap_object),
            ("navarro.preferred_capped.overlap".to_string(), self.c.cap_overlap),
        ];
        for l in 0..self.levels.len() {
            v.push((format!("navarro.preferred.{}", name(l)), self.c.preferred[l]));
            if l > 0 {
                v.push((format!("navarro.reserve.{}", name(l)), self.c.reserved[l]));
                v.push((format!("navarro.reserve_failed.{}", name(l)), self.c.reserve_failed[l]));
                v.push((format!("navarro.promote.{}", name(l)), self.c.promoted[l]));
            }
            if l < self.lists.len() {
                v.push((format!("navarro.preempt.list_{}", name(l)), self.c.preempted[l]));
            }
        }
        // Reservations not fully populated: those of exited processes, plus the live ones.
        let mut partial = self.c.unpromoted_partial.clone();
        let (mut pages, mut frames) = (self.c.unpromoted_pages, self.c.unpromoted_frames);
        let mut pis: Vec<usize> = self.procs.keys().copied().collect();
        pis.sort_unstable();
        for pi in pis {
            for (l, p, f) in self.partial_reservations(pi) {
                partial[l] += 1;
                pages += p;
                frames += f;
            }
        }
        for (l, n) in partial.iter().enumerate().skip(1) {
            v.push((format!("navarro.unpromoted.not_fully_populated.{}", name(l)), *n));
        }
        v.push(("navarro.unpromoted.pages_populated".to_string(), pages));
        v.push(("navarro.unpromoted.pages_reserved".to_string(), frames));
        if self.speculate {
            v.push(("navarro.reserve_speculative".to_string(), self.c.reserved_speculative));
        }
        for (i, n) in self.c.promote_refused.iter().enumerate().filter(|(_, &n)| n > 0) {
            v.push((format!("navarro.promote_refused.{}", PromoteResult::ALL.get(i).map_or("other", |r| r.name())), *n));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::gen::Rng;

    /// The yields kept in each node equal the definition (a descent over the subtree), and the
    /// presence and fullness counts equal a recount from the populated pages, after every step
    /// of random populating and depopulating on three size ladders.
    #[test]
    fn kept_yields_equal_a_descent() {
        for sizes in [vec!["4KiB", "16KiB", "64KiB", "256KiB"], vec!["8KiB", "64KiB", "512KiB", "4MiB"], vec!["4KiB", "64KiB", "2MiB"]] {
            let sizes: Vec<PageSize> = sizes.iter().map(|s| PageSize::parse(s).unwrap()).collect();
            let mut nav = Navarro::new(&Params::default(), &sizes).unwrap_or_else(|e| panic!("{e}"));
            let top = nav.top();
            let base = nav.shifts[0];
            // The pages of two top-level regions.
            let pages = 2u64 << (nav.shifts[top] - base);
            let mut rng = Rng::new(sizes.len() as u64);
            let mut populated = std::collections::BTreeSet::new();
            let mut checked_deep = 0;
            for step in 0..30_000u64 {
                // Phases that mostly fill, then mostly empty, then mix: regions become full,
                // partly full and empty at every level.
                let fill = match (step / 5_000) % 3 {
                    0 => 9,
                    1 => 1,
                    _ => 5,
                };
                let p = rng.below(pages);
                let on = rng.below(10) < fill;
                nav.set_population(0, p << base, on);
                if on {
                    populated.insert(p);
                } else {
                    populated.remove(&p);
                }
                if step % 101 == 0 {
                    for l in 1..=top {
                        let span = nav.shifts[l] - base;
                        for idx in 0..(pages >> span) {
                            let want = nav.yield_level_by_descent(0, l, idx);
                            assert_eq!(nav.yield_level(0, l, idx), want, "step {step}, level {l}, region {idx}");
                            checked_deep += (want.is_none() || want < Some(l - 1)) as u32;
                            let lo = idx << span;
                            let pop = populated.range(lo..lo + (1u64 << span)).count() as u64;
                            assert_eq!(nav.node(0, l, idx).somepop > 0, pop > 0, "step {step}, level {l}, region {idx}");
                            assert_eq!(nav.node(0, l, idx).fullpop as u64 == nav.fan[l], pop == 1u64 << span, "step {step}, level {l}, region {idx}");
                        }
                    }
                }
            }
            assert!(checked_deep > 100, "the walk rarely reached regions with no empty child ({checked_deep})");
        }
    }
}
