//! Results: named counters (like FreeBSD's vm.reserv.* sysctls), the cycle breakdown of the cost
//! model, the page-size mix, and a sampled time series. Everything is in sorted maps so the
//! JSON is byte-identical for the same inputs.

use crate::mmu::Mmu;
use crate::os::compact::{CollapseResult, CompactResult};
use crate::os::fragmentation;
use crate::os::frames::FrameKind;
use crate::os::MapOutcome;
use crate::os::Os;
use crate::policy::Policy;
use crate::units::PageSize;

/// Fractions are rounded so that results print the same on every platform.
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
use serde::Serialize;
use std::collections::BTreeMap;

/// One time-series sample.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Sample {
    pub accesses: u64,
    pub cycles: u64,
    pub walks: u64,
    pub faults: u64,
    /// Resident bytes per page-size name.
    pub resident: BTreeMap<String, u64>,
    /// Frames by kind (free, anon, file, page_table, wired, reserved).
    pub frames: BTreeMap<String, u64>,
    /// Free buddy blocks per order (index = order).
    pub free_blocks: Vec<u64>,
    /// Linux's unusable free space index for each superpage size (0 = every free frame could
    /// serve a request of that size, 1 = none could).
    pub unusable_index: BTreeMap<String, f64>,
    /// Navarro et al.'s contiguity metric (1 = all memory free in maximal blocks).
    pub contiguity: f64,
    /// The coalescing opportunity now: of the live processes' resident base mappings, the
    /// share in coalescible aligned groups of each size (os/contiguity.rs). Left empty when
    /// the live base mappings outnumber 1/128 of the accesses since the previous sample: a
    /// page costs the pass about what three accesses cost the simulation (measured on GUPS
    /// 1GiB), so the bound keeps sampling under about 3%. The end-of-run figures are exact.
    pub coalescible: BTreeMap<String, f64>,
}

/// What results are made from, borrowed from an engine at one instant (`Engine::snapshot`):
/// its parts and its run totals. Results depend on this, not on the engine.
pub struct Snapshot<'a> {
    pub mmu: &'a Mmu,
    pub os: &'a Os,
    pub policy: &'a dyn Policy,
    pub series: &'a [Sample],
    pub accesses: u64,
    /// Accesses by kind: load, store, modify, fetch.
    pub by_kind: [u64; 4],
    pub records: u64,
    pub instructions: u64,
    pub events: u64,
    pub series_decimations: u64,
    /// The sampling interval in force at the end.
    pub sample_every: u64,
    /// Simulated time with no process ready.
    pub idle_cycles: u64,
}

impl Sample {
    pub fn take(e: &Snapshot) -> Sample {
        let resident = e.os.resident_now().into_iter().enumerate().map(|(i, b)| (e.os.sizes[i].name(), b)).collect();
        let phys = &e.os.phys;
        let kinds = phys.frames_by_kind();
        let base = e.os.base.shift();
        Sample {
            accesses: e.accesses,
            cycles: cycles_total(e) as u64 + e.idle_cycles,
            walks: e.mmu.walk.walks.iter().sum(),
            faults: e.os.counters.faults,
            resident,
            frames: FrameKind::ALL.iter().map(|k| (k.name().to_string(), kinds[*k as usize])).collect(),
            free_blocks: (0..=phys.max_order()).map(|o| phys.free_blocks(o)).collect(),
            unusable_index: e.os.sizes[1..]
                .iter()
                .filter(|s| s.shift() - base <= phys.max_order() as u32)
                .map(|s| (s.name(), round6(fragmentation::unusable_index(phys, (s.shift() - base) as u8))))
                .collect(),
            contiguity: round6(fragmentation::contiguity(phys, &e.os.sizes)),
            coalescible: {
                let since = e.accesses - e.series.last().map_or(0, |s| s.accesses);
                match e.os.live_contiguity(since / 128) {
                    Some(c) if c.base_pages > 0 => crate::os::contiguity::CONTIGUITY_GROUPS
                        .iter()
                        .zip(c.grouped)
                        .map(|(&n, g)| (group_name(e.os.sizes[0], n), round6(g as f64 / c.base_pages as f64)))
                        .collect(),
                    _ => BTreeMap::new(),
                }
            },
        }
    }
}

/// The name of a coalescing group of `n` base pages (`16KiB` for 4 pages of 4KiB).
fn group_name(base: PageSize, n: u32) -> String {
    PageSize::from_bytes(base.bytes() * n as u64).map_or(format!("x{n}"), |p| p.name())
}

/// The cost model: cycles = accesses x base + deeper-level TLB hits x their latency + walk
/// references x reference latency (or misses x handler cost, for software-managed TLBs) +
/// faults x fault cost + zeroed KiB x zeroing cost + copied KiB x copy cost (+ the smaller
/// parts below: I/O, PTE replication, hashing, a policy's miss-handler bookkeeping).
pub fn cycles(e: &Snapshot) -> BTreeMap<String, u64> {
    cycle_map(&e.mmu.machine, &cycle_parts(e))
}

/// Bytes the flush hashes: every page of every dirty file superpage (`dirty=hash`).
pub fn hash_flush_bytes(e: &Snapshot) -> u64 {
    e.os.files.counters.hash_dirty.iter().map(|k| e.os.sizes[k.2 as usize].bytes()).sum()
}

/// Simulated time so far, with the share of a shared last level solved for these counts.
pub fn cycles_total(e: &Snapshot) -> f64 {
    cycle_parts(e).iter().map(|(_, v)| v).sum()
}

/// Accesses between two solves of the daemons' clock's last-level share (`ClockShare`).
/// A policy that reads the clock on every fault (navarro's `serve_fault`) read a fresh share
/// each time: sixty cost evaluations a fault, 2.7x navarro's run time on the 1GiB Zipf trace
/// (forty-eighth session). The share moves as the run's totals do, a few parts in a thousand
/// over this many accesses once the run has some length, so a clock this stale is off by
/// far less than the model's own error; every reported counter still solves it afresh.
pub const CLOCK_SHARE_EVERY: u64 = 1 << 16;

/// The share of a shared last level's ways a program filling it at `f` lines a ns keeps against
/// tenants filling it at `rate`: LRU's proportional share f / (f + R) at the exponent `a` 1 (the
/// same arithmetic as before the exponent existed, so results without the key are unchanged to
/// the bit), f^a / (f^a + R^a) otherwise (`[cache] share_exponent`).
fn share_of_fills(f: f64, rate: f64, a: f64) -> f64 {
    if a == 1.0 {
        f / (f + rate)
    } else {
        f.powf(a) / (f.powf(a) + rate.powf(a))
    }
}

/// Most steps of the reuse law's fixed point on the run's time (`CostInputs::shared_by_reuse`).
const REUSE_FIXED_POINT_STEPS: usize = 100;

/// The daemons' clock (`Engine::now`): `cycles_total`, except that where the machine's last
/// level is shared (`[cache] tenant_fill_rate`) the share is the one solved at most
/// `CLOCK_SHARE_EVERY` accesses ago, and the inputs are cut to it. Deterministic: when the
/// share is solved again depends on the access count only.
///
/// Invariant: `solved` is None, or (accesses at the solve, ways kept then) with that count at
/// most the run's accesses now.
#[derive(Debug, Default)]
pub struct ClockShare {
    solved: std::cell::Cell<Option<(u64, f64)>>,
}

impl ClockShare {
    pub fn cycles(&self, e: &Snapshot) -> f64 {
        let m = &e.mmu.machine;
        let shared = m.cache.as_ref().is_some_and(|c| c.tenant_fill_rate.is_some());
        let cut = match self.solved.get() {
            _ if !shared => CostInputs::of(e),
            // Between solves, the depth law at the ways that kept as many hits (the reuse law's
            // counts are not read: they are the larger part of the inputs, and this runs a fault).
            Some((at, ways)) if at <= e.accesses && e.accesses - at < CLOCK_SHARE_EVERY => CostInputs::of_with(e, false).with_last_level_ways(ways),
            _ => {
                let i = CostInputs::of(e);
                let (cut, share) = i.shared(m);
                self.solved.set(share.map(|s| (i.accesses, s.depth_ways)));
                cut
            }
        };
        cost_parts_of(m, &cut).iter().map(|(_, v)| v).sum()
    }
}

/// Everything the cost model reads from a run, as running totals: the cycles of any stretch of
/// the run are the model applied to the difference of its ends (`CostInputs::since`), which
/// is how a measured phase is costed (the overlap model is not linear in the totals).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostInputs {
    pub accesses: u64,
    pub instructions: u64,
    /// Hits per TLB structure.
    pub tlb_hits: Vec<u64>,
    pub walks: u64,
    /// Of `walks`, those into a sequential stream's next page (`walks.sequential`).
    pub sequential_walks: u64,
    pub walk_refs: u64,
    pub faults: u64,
    pub zeroed_bytes: u64,
    pub copied_direct_bytes: u64,
    pub pte_writes: u64,
    pub hashed_bytes: u64,
    pub io_bytes: u64,
    pub bookkeeping_cycles: u64,
    /// With data caches: references served per level (then memory), by the program and by
    /// the walker.
    pub cache_data: Vec<u64>,
    pub cache_walk: Vec<u64>,
    /// Of the program's references the second level missed, those in a sequential stream
    /// (mmu/cache.rs `Streams`; `cache.<L2>.data.streamed`): the overlap model times
    /// `[cache] stream_prefetch` of them as the second level's hits (`timed_by_prefetch`).
    pub streamed_data: u64,
    /// Where the last level is shared (`[cache] tenant_fill_rate`): its hits by their depth in
    /// the set, by the program and by the walker (mmu/cache.rs `LevelCounts::depth`); empty
    /// elsewhere. `cache_data` and `cache_walk` count the level whole: `shared` cuts it to the
    /// ways the program keeps.
    pub last_depth_data: Vec<u64>,
    pub last_depth_walk: Vec<u64>,
    /// Under the reuse law (`[cache] share_law = "reuse"`): its hits by depth and time since
    /// last use (mmu/reuse.rs, `CacheLevel::reuse`: ways x `reuse::BUCKETS`), by the program
    /// and by the walker; empty elsewhere.
    pub last_reuse_data: Vec<u64>,
    pub last_reuse_walk: Vec<u64>,
    /// Where the machine walks ahead of a dependent chain (`[cache] walk_ahead`): the walks'
    /// cycles that fit under the data misses of the 1, 2 and 3 steps before each, and the
    /// walks' cycles in all (mmu/cache.rs `StepFit`, rounded to cycles); 0 elsewhere.
    pub ahead_fit_cycles: [u64; crate::mmu::cache::AHEAD_STEPS],
    pub ahead_walk_cycles: u64,
}

/// The part of a shared last level a run keeps (`CostInputs::shared`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LastLevelShare {
    /// Ways kept, of `of_ways` (a fraction of a way counts that share of the hits at that depth).
    pub ways: f64,
    pub of_ways: usize,
    /// The program's own fills of the level a nanosecond at that share (F).
    pub fills_per_ns: f64,
    /// The ways at which the depth law keeps as many hits as the share did (`ways` under the
    /// depth law; under the reuse law, what the daemons' clock costs at between solves).
    pub depth_ways: f64,
}

impl CostInputs {
    pub fn of(e: &Snapshot) -> CostInputs {
        CostInputs::of_with(e, true)
    }

    /// `of`, with the reuse law's counts (`last_reuse_*`) read only where `reuse`.
    pub fn of_with(e: &Snapshot, reuse: bool) -> CostInputs {
        let ([cache_data, cache_walk], [last_depth_data, last_depth_walk], [last_reuse_data, last_reuse_walk], streamed_data) = match &e.mmu.caches {
            Some(c) => c.served_depths_reuse_streamed(reuse),
            None => Default::default(),
        };
        let (fit, walked) = e.mmu.caches.as_ref().map_or(([0.0; crate::mmu::cache::AHEAD_STEPS], 0.0), |c| c.ahead_fit());
        CostInputs {
            accesses: e.accesses,
            instructions: e.instructions,
            tlb_hits: e.mmu.counters.iter().map(|c| c.hits.iter().sum()).collect(),
            walks: e.mmu.walk.walks.iter().sum(),
            sequential_walks: e.mmu.walk.sequential,
            walk_refs: e.mmu.walk.refs,
            faults: e.os.counters.faults + e.os.counters.cow_faults,
            zeroed_bytes: e.os.counters.zeroed_bytes,
            // Only copies the program waits for (direct compaction); daemons run on another core.
            copied_direct_bytes: e.os.compaction.bytes_copied_direct,
            // PTE replication: every PTE a promotion or demotion rewrites (Navarro et al. §A.2.12).
            pte_writes: if e.os.features().pte_replication { e.os.promotions.promote_ptes + e.os.promotions.demote_ptes } else { 0 },
            // Hash digests (navarro:dirty=hash): pages hashed as read, dirty superpages at the flush.
            hashed_bytes: e.os.files.counters.hashed_bytes + hash_flush_bytes(e),
            // Swap-ins and direct swap-outs stall the program; kswapd's writes run beside it.
            io_bytes: e.os.swap.counters.in_bytes + e.os.swap.counters.out_bytes_direct + e.os.counters.file_read_bytes,
            bookkeeping_cycles: e.os.counters.bookkeeping_cycles,
            cache_data,
            cache_walk,
            streamed_data,
            last_depth_data,
            last_depth_walk,
            last_reuse_data,
            last_reuse_walk,
            ahead_fit_cycles: fit.map(|f| f.round() as u64),
            ahead_walk_cycles: walked.round() as u64,
        }
    }

    /// What happened after `earlier` (an earlier snapshot of the same run).
    pub fn since(&self, earlier: &CostInputs) -> CostInputs {
        let sub = |a: &[u64], b: &[u64]| a.iter().zip(b.iter().chain(std::iter::repeat(&0))).map(|(x, y)| x.saturating_sub(*y)).collect();
        CostInputs {
            accesses: self.accesses.saturating_sub(earlier.accesses),
            instructions: self.instructions.saturating_sub(earlier.instructions),
            tlb_hits: sub(&self.tlb_hits, &earlier.tlb_hits),
            walks: self.walks.saturating_sub(earlier.walks),
            sequential_walks: self.sequential_walks.saturating_sub(earlier.sequential_walks),
            walk_refs: self.walk_refs.saturating_sub(earlier.walk_refs),
            faults: self.faults.saturating_sub(earlier.faults),
            zeroed_bytes: self.zeroed_bytes.saturating_sub(earlier.zeroed_bytes),
            copied_direct_bytes: self.copied_direct_bytes.saturating_sub(earlier.copied_direct_bytes),
            pte_writes: self.pte_writes.saturating_sub(earlier.pte_writes),
            hashed_bytes: self.hashed_bytes.saturating_sub(earlier.hashed_bytes),
            io_bytes: self.io_bytes.saturating_sub(earlier.io_bytes),
            bookkeeping_cycles: self.bookkeeping_cycles.saturating_sub(earlier.bookkeeping_cycles),
            cache_data: sub(&self.cache_data, &earlier.cache_data),
            cache_walk: sub(&self.cache_walk, &earlier.cache_walk),
            streamed_data: self.streamed_data.saturating_sub(earlier.streamed_data),
            last_depth_data: sub(&self.last_depth_data, &earlier.last_depth_data),
            last_depth_walk: sub(&self.last_depth_walk, &earlier.last_depth_walk),
            last_reuse_data: sub(&self.last_reuse_data, &earlier.last_reuse_data),
            last_reuse_walk: sub(&self.last_reuse_walk, &earlier.last_reuse_walk),
            ahead_fit_cycles: std::array::from_fn(|k| self.ahead_fit_cycles[k].saturating_sub(earlier.ahead_fit_cycles[k])),
            ahead_walk_cycles: self.ahead_walk_cycles.saturating_sub(earlier.ahead_walk_cycles),
        }
    }

    /// These inputs with the last level cut to `ways` of its ways: the hits found deeper in
    /// their set become references to memory (LRU: a level of the same sets in fewer ways holds
    /// exactly each set's most recent lines), and those at the depth `ways` falls in count by
    /// its fraction, rounded. Unchanged where the level is not shared.
    pub fn with_last_level_ways(&self, ways: f64) -> CostInputs {
        let mut out = self.clone();
        self.cut_into(ways, &mut out);
        out
    }

    /// `with_last_level_ways` into `out`, a copy of these inputs: only its served counts are
    /// written, in place (the share's bisection cuts one copy sixty times without allocating).
    fn cut_into(&self, ways: f64, out: &mut CostInputs) {
        let pairs = [(&mut out.cache_data, &self.cache_data, &self.last_depth_data), (&mut out.cache_walk, &self.cache_walk, &self.last_depth_walk)];
        for (served, whole, depth) in pairs {
            served.copy_from_slice(whole);
            let n = served.len();
            if depth.is_empty() || n < 2 {
                continue;
            }
            let whole = ways.floor().max(0.0) as usize;
            let frac = ways - whole as f64;
            let kept: u64 = depth.iter().take(whole).sum::<u64>() + depth.get(whole).map_or(0, |&d| (d as f64 * frac).round() as u64);
            let moved = served[n - 2].saturating_sub(kept);
            served[n - 2] -= moved;
            served[n - 1] += moved;
        }
    }

    /// `cut_into` under the reuse law (mmu/reuse.rs), into `out`: each hit the level whole
    /// served kept by its chance that fewer tenants' lines than the ways above it entered its
    /// set since its last use, `per_gap` of them to a set for each of the level's references
    /// between (`reuse::kept`), rounded.
    fn cut_reuse_into(&self, of_ways: usize, per_gap: f64, out: &mut CostInputs) {
        let pairs = [(&mut out.cache_data, &self.cache_data, &self.last_reuse_data), (&mut out.cache_walk, &self.cache_walk, &self.last_reuse_walk)];
        for (served, whole, hist) in pairs {
            served.copy_from_slice(whole);
            let n = served.len();
            if n < 2 || hist.len() != of_ways * crate::mmu::reuse::BUCKETS {
                continue;
            }
            let kept = (crate::mmu::reuse::kept(hist, of_ways, per_gap).round() as u64).min(served[n - 2]);
            let moved = served[n - 2] - kept;
            served[n - 2] -= moved;
            served[n - 1] += moved;
        }
    }

    /// The ways at which the depth law (`cut_into`) keeps as many of the last level's hits as
    /// `cut` (these inputs cut some other way) does: the share a stale clock costs at.
    fn depth_ways_keeping(&self, cut: &CostInputs) -> f64 {
        let n = self.cache_data.len();
        if n < 2 {
            return 0.0;
        }
        let kept = (cut.cache_data[n - 2] + cut.cache_walk[n - 2]) as f64;
        let at = |d: usize| self.last_depth_data.get(d).copied().unwrap_or(0) + self.last_depth_walk.get(d).copied().unwrap_or(0);
        let of_ways = self.last_depth_data.len().max(self.last_depth_walk.len());
        let mut sum = 0.0;
        for d in 0..of_ways {
            let here = at(d) as f64;
            if sum + here >= kept {
                return d as f64 + if here > 0.0 { (kept - sum) / here } else { 0.0 };
            }
            sum += here;
        }
        of_ways as f64
    }

    /// The share of a shared last level (`[cache] tenant_fill_rate` R) this run keeps, and the
    /// inputs cut to it. Other tenants fill the level at R lines a ns and the program at F, its
    /// references that reach memory over its time; under LRU each keeps the share of the ways
    /// its fills are of all fills, so it keeps w of the W ways where w / W = F(w) / (F(w) + R),
    /// F(w) and its time both the model's with w ways (with `[cache] share_exponent` a,
    /// F(w)^a / (F(w)^a + R^a): the right side still rises with F). The w is found by bisection
    /// (60 halvings of [0, W]): at w = 0 the left side is 0 and the right positive, at W the left
    /// is 1 and the right below it, so a root lies between. None where the level is not shared; where no
    /// reference reaches the level the program keeps all of it (nothing depends on it). That is
    /// the depth law; under the reuse law (`[cache] share_law = "reuse"`) the hits are kept by
    /// the time since each line's last use instead (`shared_by_reuse`).
    pub fn shared(&self, m: &crate::mmu::machine::Machine) -> (CostInputs, Option<LastLevelShare>) {
        let Some(rate) = m.cache.as_ref().and_then(|c| c.tenant_fill_rate) else { return (self.clone(), None) };
        let of_ways = self.last_depth_data.len().max(self.last_depth_walk.len());
        if of_ways == 0 {
            return (self.clone(), None);
        }
        let w_all = of_ways as f64;
        if m.cache.as_ref().is_some_and(|c| c.share_law == crate::mmu::cache::ShareLaw::Reuse)
            && !(self.last_reuse_data.is_empty() && self.last_reuse_walk.is_empty())
        {
            return self.shared_by_reuse(m, rate, of_ways);
        }
        // F at w ways: lines from memory a ns of the time the model gives the run with them,
        // with `cut` (a copy of these inputs) cut to w ways.
        let mut cut = self.clone();
        let fills = |w: f64, cut: &mut CostInputs| {
            self.cut_into(w, cut);
            let dram = cut.cache_data.last().copied().unwrap_or(0) + cut.cache_walk.last().copied().unwrap_or(0);
            let cycles: f64 = cost_parts_of(m, cut).iter().map(|(_, v)| v).sum();
            let ns = cycles / m.clock_ghz.max(1e-9);
            if ns > 0.0 {
                dram as f64 / ns
            } else {
                0.0
            }
        };
        if fills(0.0, &mut cut) <= 0.0 {
            let f = fills(w_all, &mut cut);
            return (cut, Some(LastLevelShare { ways: w_all, of_ways, fills_per_ns: f, depth_ways: w_all }));
        }
        let a = m.cache.as_ref().map_or(1.0, |c| c.share_exponent);
        let gap = |w: f64, f: f64| w / w_all - share_of_fills(f, rate, a);
        let (mut lo, mut hi) = (0.0, w_all);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            let f = fills(mid, &mut cut);
            if gap(mid, f) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let f = fills(hi, &mut cut);
        (cut, Some(LastLevelShare { ways: hi, of_ways, fills_per_ns: f, depth_ways: hi }))
    }

    /// `shared` under the reuse law (`[cache] share_law = "reuse"`, mmu/reuse.rs): every hit
    /// the level whole served is kept by its chance that fewer tenants' lines than the ways
    /// above it entered its set since its last use, the tenants bringing in R_e lines a ns over
    /// the level's S sets, and the time since the last use the line's gap in the level's
    /// references times the run's ns a reference. That time is the model's with the hits kept,
    /// so it is a fixed point: from the level whole (the shortest time), each step cuts the hits
    /// at the time the step before gave, which only lengthens it, until it moves by less than a
    /// part in 10^9 (at most REUSE_FIXED_POINT_STEPS steps). R_e is R at the exponent 1; with an
    /// exponent a, the rate that leaves the program's fills F the share F^a / (F^a + R^a) under
    /// LRU's proportional law, F (R / F)^a. The share reported is that share of the ways at the
    /// F found, and `depth_ways` the ways at which the depth law keeps as many hits.
    fn shared_by_reuse(&self, m: &crate::mmu::machine::Machine, rate: f64, of_ways: usize) -> (CostInputs, Option<LastLevelShare>) {
        let spec = m.cache.as_ref().expect("a shared level has a [cache]");
        let a = spec.share_exponent;
        let w_all = of_ways as f64;
        let sets = spec.levels.last().map_or(1, |l| l.sets(spec.line_bytes)) as f64;
        let n = self.cache_data.len();
        let level_refs = (self.cache_data[n - 2] + self.cache_data[n - 1] + self.cache_walk[n - 2] + self.cache_walk[n - 1]) as f64;
        // The model's time (ns) and the program's fills of the level with `cut`'s hits.
        let time_and_fills = |cut: &CostInputs| {
            let cycles: f64 = cost_parts_of(m, cut).iter().map(|(_, v)| v).sum();
            let dram = cut.cache_data[n - 1] + cut.cache_walk[n - 1];
            (cycles / m.clock_ghz.max(1e-9), dram as f64)
        };
        let mut cut = self.clone();
        let (mut ns, mut dram) = time_and_fills(&cut);
        if level_refs > 0.0 && ns > 0.0 {
            for _ in 0..REUSE_FIXED_POINT_STEPS {
                let f = (dram / ns).max(1e-12);
                let r_e = if a == 1.0 { rate } else { f * (rate / f).powf(a) };
                self.cut_reuse_into(of_ways, r_e * ns / level_refs / sets, &mut cut);
                let (now_ns, now_dram) = time_and_fills(&cut);
                let settled = (now_ns - ns).abs() <= 1e-9 * ns;
                (ns, dram) = (now_ns, now_dram);
                if settled {
                    break;
                }
            }
        }
        let f = if ns > 0.0 { dram / ns } else { 0.0 };
        let share = if f <= 0.0 { 1.0 } else { share_of_fills(f, rate, a) };
        let depth_ways = self.depth_ways_keeping(&cut);
        (cut, Some(LastLevelShare { ways: w_all * share, of_ways, fills_per_ns: f, depth_ways }))
    }
}

/// A shared last level's counters (docs/RUNTIME_MODEL.md, "A last level shared by the second"):
/// the bytes and thousandths of ways the run keeps, its own fills a millisecond at that share,
/// and what the level whole would have served, by requester (`hits_whole`).
fn insert_share(c: &mut BTreeMap<String, u64>, level: &str, s: &LastLevelShare, whole: &CostInputs, bytes: u64) {
    c.insert(format!("cache.{level}.kept_bytes"), (bytes as f64 * s.ways / s.of_ways.max(1) as f64).round() as u64);
    c.insert(format!("cache.{level}.kept_ways_x1000"), (s.ways * 1000.0).round() as u64);
    c.insert(format!("cache.{level}.fills_per_ms"), (s.fills_per_ns * 1e6).round() as u64);
    let n = whole.cache_data.len();
    if n >= 2 {
        c.insert(format!("cache.{level}.data.hits_whole"), whole.cache_data[n - 2]);
        c.insert(format!("cache.{level}.walk.hits_whole"), whole.cache_walk[n - 2]);
    }
}

fn cycle_parts(e: &Snapshot) -> [(&'static str, f64); 12] {
    cost_parts(&e.mmu.machine, &CostInputs::of(e))
}

/// The cost model applied to `i` (see `cycles`). With data caches (the machine's `[cache]`),
/// data stalls and walk references come from what each level served and the overlap model
/// (mmu/cache.rs); a nested walk's host references, which do not go through them, cost
/// `walker.ref_cycles` each.
pub fn cost_parts(m: &crate::mmu::machine::Machine, i: &CostInputs) -> [(&'static str, f64); 12] {
    cost_parts_of(m, &i.shared(m).0)
}

/// Cycles of hits in TLB levels beyond the first, and how many such hits: with data caches
/// they overlap as walks do.
fn tlb_beyond_first(m: &crate::mmu::machine::Machine, i: &CostInputs) -> (f64, u64) {
    let cycles = m.tlbs.iter().zip(&i.tlb_hits).map(|(t, &h)| h as f64 * t.hit_cycles).sum();
    let hits = m.tlbs.iter().zip(&i.tlb_hits).filter(|(t, _)| t.hit_cycles > 0.0).map(|(_, &h)| h).sum();
    (cycles, hits)
}

/// The overlap model's inputs from `i`: the translations, and the program's references.
fn translation_of<'a>(i: &'a CostInputs, tlb: (f64, u64)) -> (crate::mmu::cache::Translation<'a>, u64) {
    // The shares of the walks that fit under the misses before each, where steps were marked.
    let ahead_fit = (i.ahead_walk_cycles > 0).then(|| i.ahead_fit_cycles.map(|f| f as f64 / i.ahead_walk_cycles as f64));
    let t = crate::mmu::cache::Translation {
        walk: &i.cache_walk,
        walks: i.walks,
        sequential: i.sequential_walks,
        streamed: i.streamed_data,
        tlb_cycles: tlb.0,
        tlb_hits: tlb.1,
        ahead_fit,
    };
    (t, i.cache_data.iter().sum())
}

/// What bounds the overlapped part of the stalls of inputs already cut to the program's share
/// (`mmu::cache::OverlapBounds`); None without data caches.
pub fn overlap_bounds_of(m: &crate::mmu::machine::Machine, i: &CostInputs) -> Option<crate::mmu::cache::OverlapBounds> {
    let spec = m.cache.as_ref()?;
    let (t, data_accesses) = translation_of(i, tlb_beyond_first(m, i));
    Some(crate::mmu::cache::overlap_bounds(spec, &i.cache_data, t, data_accesses, i.instructions))
}

/// The counters of `overlap_bounds_of`: `overlap.fill_buffers_cycles`, `overlap.window_cycles`
/// and `overlap.walkers_cycles`, the largest the bound (docs/RUNTIME_MODEL.md, "Overlap").
fn insert_overlap(c: &mut BTreeMap<String, u64>, b: &crate::mmu::cache::OverlapBounds) {
    c.insert("overlap.fill_buffers_cycles".into(), b.fill_buffers.round() as u64);
    c.insert("overlap.window_cycles".into(), b.window.round() as u64);
    c.insert("overlap.walkers_cycles".into(), b.walkers.round() as u64);
    c.insert("overlap.bandwidth_cycles".into(), b.bandwidth.round() as u64);
}

/// The counters the model adds on a machine with data caches, for the whole run or a phase:
/// a shared last level's (`insert_share`, from `whole` and the `share` solved for it) and the
/// overlap bounds of `kept`, the inputs cut to that share (`insert_overlap`), and the second
/// level's streamed data misses (`cache.<L2>.data.streamed`).
pub fn insert_model_counters(
    c: &mut BTreeMap<String, u64>,
    m: &crate::mmu::machine::Machine,
    whole: &CostInputs,
    kept: &CostInputs,
    share: Option<LastLevelShare>,
) {
    if let (Some(s), Some(l)) = (share, m.cache.as_ref().and_then(|c| c.levels.last())) {
        insert_share(c, &l.name, &s, whole, l.bytes);
    }
    if let Some(b) = overlap_bounds_of(m, kept) {
        insert_overlap(c, &b);
    }
    if let Some(second) = m.cache.as_ref().and_then(|s| s.levels.get(1)) {
        // Why a miss cost as the second level's hit: it was in a stream (mmu/cache.rs `Streams`).
        c.insert(format!("cache.{}.data.streamed", second.name), kept.streamed_data);
    }
    if m.cache.as_ref().is_some_and(|s| s.marks_steps()) {
        // The step fit that caps the walks a chain's guesses hide (mmu/cache.rs `StepFit`).
        for (k, f) in whole.ahead_fit_cycles.iter().enumerate() {
            c.insert(format!("walk_ahead.fit{}_cycles", k + 1), *f);
        }
        c.insert("walk_ahead.walk_cycles".into(), whole.ahead_walk_cycles);
    }
}

/// `cost_parts` on inputs whose last level is already cut to the program's share (what
/// `CostInputs::shared` gives), for a caller that needs the share too and solves it once.
pub fn cost_parts_of(m: &crate::mmu::machine::Machine, i: &CostInputs) -> [(&'static str, f64); 12] {
    let (tlb_raw, tlb_hits) = tlb_beyond_first(m, i);
    let stalls = m.cache.as_ref().map(|spec| {
        let (t, data_accesses) = translation_of(i, (tlb_raw, tlb_hits));
        let ((d, w, tlb), b) = crate::mmu::cache::stalls_and_bounds(spec, &i.cache_data, t, data_accesses, i.instructions);
        (d, w, i.cache_walk.iter().sum::<u64>(), tlb, b.bandwidth)
    });
    let access = match &m.cache {
        // With caches, the program's own work: at least its instructions at `ipc`.
        Some(c) => (i.accesses as f64 * m.cycles_per_access).max(i.instructions as f64 / c.ipc),
        None => i.accesses as f64 * m.cycles_per_access,
    };
    let tlb = stalls.map_or(tlb_raw, |s| s.3);
    let walk = match (m.software_handler_cycles, stalls) {
        (Some(h), _) => i.walks as f64 * h,
        (None, Some((_, w, cached, _, _))) => w + i.walk_refs.saturating_sub(cached) as f64 * m.walk_ref_cycles,
        (None, None) => i.walk_refs as f64 * m.walk_ref_cycles,
    };
    // Memory's line rate (`[cache] dram_line_cycles`): the accesses take at least the lines they
    // read from memory at that rate, work and stalls together (a core streaming at the rate
    // works while the lines come), so what is short of it is waiting on memory.
    let bandwidth = stalls.map_or(0.0, |s| (s.4 - (access + s.0 + walk + tlb)).max(0.0));
    let kib = |b: u64| b as f64 / 1024.0;
    [
        ("cycles.access", access),
        ("cycles.data", stalls.map_or(0.0, |s| s.0)),
        ("cycles.bandwidth", bandwidth),
        ("cycles.tlb", tlb),
        ("cycles.walk", walk),
        ("cycles.fault", i.faults as f64 * m.fault_cycles),
        ("cycles.zero", kib(i.zeroed_bytes) * m.zero_cycles_per_kib),
        ("cycles.copy", kib(i.copied_direct_bytes) * m.copy_cycles_per_kib),
        ("cycles.io", kib(i.io_bytes) * m.io_cycles_per_kib),
        ("cycles.pte", i.pte_writes as f64 * m.pte_write_cycles),
        ("cycles.hash", kib(i.hashed_bytes) * m.hash_cycles_per_kib),
        ("cycles.bookkeeping", i.bookkeeping_cycles as f64),
    ]
}

/// The `cycles.*` breakdown of `parts` with its total; `cycles.data` only with data caches, and
/// `cycles.bandwidth` only with memory's line rate (`[cache] dram_line_cycles`).
pub fn cycle_map(m: &crate::mmu::machine::Machine, parts: &[(&'static str, f64)]) -> BTreeMap<String, u64> {
    let total: f64 = parts.iter().map(|(_, v)| v).sum();
    let mut out = BTreeMap::new();
    for (k, v) in parts {
        // `cycles.data` exists only in the model with data caches: results of machines without
        // a `[cache]` section stay byte-identical to what they were before it existed.
        if *k == "cycles.data" && m.cache.is_none() {
            continue;
        }
        // Likewise `cycles.bandwidth`, only where the machine has memory's line rate.
        if *k == "cycles.bandwidth" && m.cache.as_ref().is_none_or(|c| c.dram_line_cycles <= 0.0) {
            continue;
        }
        out.insert(k.to_string(), v.round() as u64);
    }
    out.insert("cycles.total".to_string(), total.round() as u64);
    out
}

#[derive(Clone, Debug, Serialize)]
pub struct Results {
    pub machine: String,
    pub policy: String,
    pub memory: String,
    pub counters: BTreeMap<String, u64>,
    /// Fraction of the resident footprint mapped by each page size at the end of the trace
    /// (each process counted just before it exited).
    pub page_size_mix: BTreeMap<String, f64>,
    /// Derived figures (rates), for reading; everything here follows from `counters`.
    pub derived: BTreeMap<String, f64>,
    /// Processes killed by the simulated OS: pid and reason.
    pub killed: BTreeMap<String, String>,
    /// After a phase mark (a zero-length madvise in the trace): the `cycles.*` breakdown,
    /// accesses, instructions, walks and faults of what followed the last mark. Absent (not
    /// empty) in runs without one.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub phase: BTreeMap<String, u64>,
    pub series: Vec<Sample>,
    /// Frames of the physical-memory map, when the run asked for them (`map_every`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map: Option<PhysMap>,
}

/// One frame of the physical-memory map (os/physmap.rs): a character per cell.
#[derive(Clone, Debug, Serialize)]
pub struct MapFrame {
    pub accesses: u64,
    pub cells: String,
}

/// A run's physical-memory map: cell size, what each code means, and the frames.
#[derive(Clone, Debug, Serialize)]
pub struct PhysMap {
    pub region_bytes: u64,
    pub legend: Vec<String>,
    pub frames: Vec<MapFrame>,
}

impl Results {
    pub fn collect(e: &Snapshot) -> Results {
        let mut c = BTreeMap::new();
        let sizes = &e.os.sizes;
        c.insert("accesses".into(), e.accesses);
        for (k, name) in ["load", "store", "modify", "fetch"].iter().enumerate() {
            c.insert(format!("accesses.{name}"), e.by_kind[k]);
        }
        c.insert("records".into(), e.records);
        c.insert("series.decimations".into(), e.series_decimations);
        c.insert("series.sample_every".into(), e.sample_every);
        c.insert("events".into(), e.events);
        c.insert("instructions".into(), e.instructions);
        for (i, t) in e.mmu.machine.tlbs.iter().enumerate() {
            let k = &e.mmu.counters[i];
            c.insert(format!("tlb.{}.hits", t.name), k.hits.iter().sum());
            c.insert(format!("tlb.{}.misses", t.name), k.misses.iter().sum());
            for &s in &t.sizes {
                let n = sizes[s as usize].name();
                c.insert(format!("tlb.{}.hits.{n}", t.name), k.hits[s as usize]);
                c.insert(format!("tlb.{}.misses.{n}", t.name), k.misses[s as usize]);
            }
        }
        if let Some(co) = &e.mmu.coalesced {
            // AMD PTE coalescing: fills and hits by group size, per structure and in all.
            let names: Vec<String> = e.mmu.machine.coalesced_sizes().iter().map(|p| p.name()).collect();
            let mut hits = 0;
            for (k, n) in names.iter().enumerate() {
                let si = (co.first as usize) + k;
                c.insert(format!("coalesce.fills.{n}"), co.fills[k]);
                for (i, t) in e.mmu.machine.tlbs.iter().enumerate() {
                    if e.mmu.holds_size(i, si as u32) {
                        let kc = &e.mmu.counters[i];
                        c.insert(format!("tlb.{}.hits.{n}", t.name), kc.hits[si]);
                        c.insert(format!("tlb.{}.misses.{n}", t.name), kc.misses[si]);
                        hits += kc.hits[si];
                    }
                }
            }
            c.insert("coalesce.fills".into(), co.fills.iter().sum());
            c.insert("coalesce.hits".into(), hits);
        }
        let ct = e.os.end_contiguity();
        c.insert("contiguity.base_pages".into(), ct.base_pages);
        for (k, &n) in crate::os::contiguity::CONTIGUITY_GROUPS.iter().enumerate() {
            c.insert(format!("contiguity.grouped.{}", group_name(sizes[0], n)), ct.grouped[k]);
        }
        let walks: u64 = e.mmu.walk.walks.iter().sum();
        c.insert("walks".into(), walks);
        let oc = &e.os.counters;
        // Every scalar counter of the walker and every OS part, under the key its struct declares.
        let parts = std::iter::once(&e.mmu.walk as &dyn crate::counters::Counters).chain(e.os.counter_parts()).chain(e.os.replacement.counters());
        for part in parts {
            part.each(&mut |k, v| {
                c.insert(k.to_string(), v);
            });
        }
        for (i, s) in sizes.iter().enumerate() {
            let n = s.name();
            c.insert(format!("walks.{n}"), e.mmu.walk.walks[i]);
            c.insert(format!("faults.{n}"), oc.faults_by_size[i]);
            for (k, o) in MapOutcome::ALL.iter().enumerate() {
                let v = oc.map_outcomes[i][k];
                if v > 0 || *o == MapOutcome::Mapped {
                    c.insert(format!("map.{n}.{}", o.name()), v);
                }
            }
        }
        c.insert("os.page_table_nodes".into(), e.os.procs.iter().map(|p| p.pt.live_nodes).sum());
        let phys = &e.os.phys;
        let kinds = phys.frames_by_kind();
        for k in FrameKind::ALL {
            c.insert(format!("frames.{}", k.name()), kinds[k as usize]);
        }
        c.insert("frames.total".into(), phys.total_frames());
        let pc = &phys.counters;
        for o in 0..=phys.max_order() as usize {
            if pc.allocs[o] > 0 || pc.alloc_failures[o] > 0 {
                c.insert(format!("buddy.alloc.order{o}"), pc.allocs[o]);
                c.insert(format!("buddy.alloc_failed.order{o}"), pc.alloc_failures[o]);
            }
        }
        let cp = &e.os.compaction;
        for r in CompactResult::ALL {
            c.insert(format!("compact.{}", r.name()), cp.runs[r as usize]);
        }
        for r in CollapseResult::ALL {
            c.insert(format!("collapse.{}", r.name()), cp.collapse[r as usize]);
        }
        for r in crate::os::promote::PromoteResult::ALL {
            c.insert(format!("promote_in_place.{}", r.name()), e.os.promotions.promote[r as usize]);
        }
        for o in 1..e.os.promotions.folio_alloc.len() {
            let (a, f) = (e.os.promotions.folio_alloc[o], e.os.promotions.folio_fallback[o]);
            if a > 0 || f > 0 {
                let kb = (e.os.base.bytes() << o) >> 10;
                c.insert(format!("mthp.{kb}kB.anon_fault_alloc"), a);
                c.insert(format!("mthp.{kb}kB.anon_fault_fallback"), f);
            }
        }
        for r in crate::os::promote::DemoteResult::ALL {
            c.insert(format!("demote.{}", r.name()), e.os.promotions.demote[r as usize]);
        }
        for why in crate::os::promote::DemoteReason::ALL {
            for (si, s) in sizes.iter().enumerate().skip(1) {
                c.insert(format!("demote.{}.{}", why.name(), s.name()), e.os.promotions.demote_by[why as usize][si]);
            }
        }
        c.insert("faults.zero_fill".into(), oc.faults - oc.major_faults - oc.file_minor_faults - oc.file_major_faults);
        c.insert("pagecache.pages".into(), e.os.files.cache.cached);
        c.insert("pagecache.dirty_pages".into(), e.os.files.cache.dirty_pages());
        let fc = &e.os.files.counters;
        c.insert("file.hashed_bytes".into(), fc.hashed_bytes + hash_flush_bytes(e));
        c.insert("file.hash_dirty_superpages".into(), fc.hash_dirty.len() as u64);
        c.insert("pagecache.cache_frames".into(), e.os.phys.cache_frames());
        let rc = &e.os.phys.reservs.counters;
        let dc = &e.os.daemon;
        // Per superpage size: file superpages, reservations and the daemon, by size index or
        // by order above the base page.
        for (si, s) in sizes.iter().enumerate().skip(1) {
            let o = (s.shift() - sizes[0].shift()) as usize;
            let name = s.name();
            c.insert(format!("file.superpages.{name}"), fc.promoted.get(si).copied().unwrap_or(0));
            c.insert(format!("file.mapped_at_fault.{name}"), fc.mapped_at_fault.get(si).copied().unwrap_or(0));
            c.insert(format!("file.reserve.{name}"), fc.reserved.get(o).copied().unwrap_or(0));
            c.insert(format!("file.reserve_failed.{name}"), fc.reserve_failed.get(o).copied().unwrap_or(0));
            if let (Some(&made), Some(&failed)) = (rc.created.get(o), rc.create_failed.get(o)) {
                c.insert(format!("reserv.created.{name}"), made);
                c.insert(format!("reserv.create_failed.{name}"), failed);
            }
            c.insert(format!("daemon.wanted.{name}"), dc.wanted.get(o).copied().unwrap_or(0));
            c.insert(format!("daemon.recovered.{name}"), dc.recovered.get(o).copied().unwrap_or(0));
        }
        for (k, v) in e.policy.counters() {
            c.insert(format!("policy.{k}"), v);
        }
        // The cost model's inputs with a shared last level's share solved once, for the cache
        // counters and the cycles below.
        let whole = CostInputs::of(e);
        let (kept, share) = whole.shared(&e.mmu.machine);
        if let Some(caches) = &e.mmu.caches {
            // What each data-cache level served, by requester (mmu/cache.rs); a shared last
            // level's at the share the run keeps (`CostInputs::shared`).
            let (levels, dram) = caches.counts();
            for (i, l) in levels.iter().enumerate() {
                for (who, r, served) in [("data", 0, &kept.cache_data), ("walk", 1, &kept.cache_walk)] {
                    let moved = l.hits[r] - served[i];
                    c.insert(format!("cache.{}.{who}.hits", l.name), served[i]);
                    c.insert(format!("cache.{}.{who}.misses", l.name), l.misses[r] + moved);
                }
            }
            let n = levels.len();
            c.insert("cache.dram.data".into(), kept.cache_data[n]);
            c.insert("cache.dram.walk".into(), kept.cache_walk[n]);
            debug_assert!(kept.cache_data[n] >= dram[0] && kept.cache_walk[n] >= dram[1]);
            insert_model_counters(&mut c, &e.mmu.machine, &whole, &kept, share);
        }
        if let Some(h) = &e.mmu.host_pwcs {
            // A nested walk's host entries that its page-walk caches held (mmu/pwc.rs).
            c.insert("pwc.host.hits".into(), h.hits);
            c.insert("pwc.host.misses".into(), h.misses);
        }
        c.extend(cycle_map(&e.mmu.machine, &cost_parts_of(&e.mmu.machine, &kept)));
        c.insert("cycles.idle".into(), e.idle_cycles);

        let end = e.os.end_resident();
        let total: u64 = end.iter().sum();
        let mut mix = BTreeMap::new();
        for (i, s) in sizes.iter().enumerate() {
            mix.insert(s.name(), if total > 0 { end[i] as f64 / total as f64 } else { 0.0 });
            c.insert(format!("footprint.bytes.{}", s.name()), end[i]);
        }
        c.insert("footprint.bytes".into(), total);

        let mut d = BTreeMap::new();
        let per = |x: u64| if e.accesses > 0 { x as f64 / e.accesses as f64 } else { 0.0 };
        d.insert("walks_per_access".into(), per(walks));
        d.insert("cycles_per_access".into(), per(c["cycles.total"]));
        if e.instructions > 0 {
            d.insert("walks_per_kilo_instruction".into(), walks as f64 * 1000.0 / e.instructions as f64);
            // Romer et al.'s TLBMCPI: TLB-service cycles (miss handling, the policy's
            // bookkeeping, promotion copies) per instruction, and its three parts (Figure 3).
            let insns = e.instructions as f64;
            let (h, b, cp) = (c["cycles.walk"] as f64, c["cycles.bookkeeping"] as f64, c["cycles.copy"] as f64);
            d.insert("tlbmcpi".into(), round6((h + b + cp) / insns));
            d.insert("tlbmcpi.handler".into(), round6(h / insns));
            d.insert("tlbmcpi.bookkeeping".into(), round6(b / insns));
            d.insert("tlbmcpi.copy".into(), round6(cp / insns));
        }
        if ct.base_pages > 0 {
            // The coalescing opportunity (Solomon D2): the share of resident base mappings in
            // coalescible aligned groups of 4, 8 and 16 pages.
            for (k, &n) in crate::os::contiguity::CONTIGUITY_GROUPS.iter().enumerate() {
                let name = PageSize::from_bytes(sizes[0].bytes() * n as u64).map_or(format!("x{n}"), |p| p.name());
                d.insert(format!("coalescible.{name}"), round6(ct.grouped[k] as f64 / ct.base_pages as f64));
            }
        }
        let killed = e.os.procs.iter().filter_map(|p| p.killed.as_ref().map(|k| (p.pid.to_string(), k.clone()))).collect();
        Results {
            machine: e.mmu.machine.name.clone(),
            policy: e.policy.name(),
            memory: e.os.memory.to_string(),
            counters: c,
            page_size_mix: mix,
            derived: d,
            killed,
            phase: BTreeMap::new(),
            series: e.series.to_vec(),
            map: None,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialise")
    }
}
