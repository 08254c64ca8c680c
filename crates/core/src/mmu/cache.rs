//! Data caches (issue 24): set-associative, LRU, physically indexed levels through which the
//! program's data accesses and the page walker's references go.
//!
//! Structure and invariants:
//! - A level is `sets x ways` lines of `line_bytes`; a set's tags are kept in recency order
//!   (slot 0 most recent), `EMPTY` slots only at the tail. A line is in at most one slot of
//!   its set.
//! - An access probes the levels in order; the first that holds the line serves it, and every
//!   level before it is filled (the line moves to slot 0, the last slot's line is evicted).
//!   Levels are neither inclusive nor exclusive: an eviction from one level changes no other
//!   (the "fill on the way, no back-invalidation" hierarchy pycachesim builds with
//!   `load_from`, which tests/test_cache_vs_pycachesim.py checks exactly).
//! - Writes are handled as reads (write-allocate); write-backs of dirty lines are not traffic
//!   here. Instruction fetches do not go through these caches.
//!
//! - The engine queues its references (`Caches::defer`) and the levels apply them in batches,
//!   in order, prefetching each one's set rows a few references ahead; every counter read
//!   applies the queue first (`Caches::settled`), so no reader can tell the difference.
//!
//! What a level served, split by requester (the program, or the page walker), is all the
//! cost model needs: stats::cache_cycles turns the counts into stall cycles with the overlap
//! model (docs/RUNTIME_MODEL.md). The hot path allocates nothing.

use super::lru_set;

/// An empty slot (no physical line has this number: lines are addresses >> 6 at least).
const EMPTY: u64 = u64::MAX;

/// Who made a reference: the program (a load or store) or the page walker (a table entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requester {
    Data = 0,
    Walk = 1,
}

/// One cache level as a machine file describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheLevelSpec {
    pub name: String,
    pub bytes: u64,
    pub ways: u32,
    /// Load-to-use latency of a hit here, in cycles.
    pub cycles: f64,
}

/// A machine's `[cache]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheSpec {
    pub line_bytes: u32,
    pub levels: Vec<CacheLevelSpec>,
    /// Latency of a reference no level holds (DRAM), in cycles.
    pub dram_cycles: f64,
    /// Most independent data misses in flight at once (L1D miss-status registers / fill buffers).
    pub mlp: f64,
    /// Page walks in flight at once (the hardware page walkers).
    pub walkers: f64,
    /// Instructions the out-of-order window holds (reorder buffer entries).
    pub rob: f64,
    /// Instructions per data access to assume when the trace counts no instructions.
    pub instructions_per_access: f64,
    /// Instructions per cycle when nothing stalls: the program's own work is at least
    /// instructions / ipc cycles (`cycles.access`).
    pub ipc: f64,
    /// Fraction of misses on a chain of dependent loads (a property of the program:
    /// `+dependence=F` sets it; 0 = all independent).
    pub dependence: f64,
}

impl CacheSpec {
    /// Latency of each level (then memory), in cycles.
    pub fn latencies(&self) -> Vec<f64> {
        self.levels.iter().map(|l| l.cycles).chain(std::iter::once(self.dram_cycles)).collect()
    }
}

pub struct CacheLevel {
    pub name: String,
    sets: usize,
    ways: usize,
    /// sets - 1 when the sets are a power of two, else 0 (`set_of` takes the modulo).
    set_mask: u64,
    /// This level's sets take the AVX2 set operations (mmu/lru_set.rs) when the replay is
    /// compiled for them: the CPU has AVX2 and the way count is one they handle.
    wide: bool,
    tags: Vec<u64>,
    /// Hits by requester.
    pub hits: [u64; 2],
    pub misses: [u64; 2],
}

impl CacheLevel {
    fn new(spec: &CacheLevelSpec, line_bytes: u32) -> CacheLevel {
        let lines = (spec.bytes / line_bytes as u64).max(1) as usize;
        let ways = (spec.ways as usize).clamp(1, lines);
        let sets = lines / ways;
        let set_mask = if sets.is_power_of_two() { sets as u64 - 1 } else { 0 };
        let wide = lru_set::wide_available(ways as u32);
        CacheLevel { name: spec.name.clone(), sets, ways, set_mask, wide, tags: vec![EMPTY; sets * ways], hits: [0; 2], misses: [0; 2] }
    }

    /// The set `line` maps to: its low bits, or, when the sets are not a power of two (a
    /// last-level cache of 260MiB in 20 ways has 212,992 sets), a multiplicative hash of the line
    /// scaled to the set count (no division on the hot path; last-level caches hash addresses
    /// to slices anyway).
    #[inline(always)]
    fn set_of(&self, line: u64) -> usize {
        if self.set_mask != 0 || self.sets == 1 {
            (line & self.set_mask) as usize
        } else {
            ((line.wrapping_mul(0x9E37_79B9_7F4A_7C15) as u128 * self.sets as u128) >> 64) as usize
        }
    }

    /// Look `line` up: on a hit move it to the front of its set, on a miss put it there (the
    /// set's least recent line falls out). Returns whether it hit.
    ///
    /// # Safety
    /// With WIDE, the caller must be compiled with AVX2 enabled (`#[target_feature]`); the
    /// level's own `wide` says whether the CPU has it.
    #[inline(always)]
    unsafe fn access<const WIDE: bool>(&mut self, line: u64) -> bool {
        let base = self.set_of(line) * self.ways;
        let set = &mut self.tags[base..base + self.ways];
        #[cfg(target_arch = "x86_64")]
        if WIDE && self.wide {
            if set[0] == line {
                return true; // already the most recent: nothing moves
            }
            // SAFETY: `wide` is set only where the CPU has AVX2 and for set sizes the routine
            // handles; the caller's contract covers the rest.
            return unsafe { lru_set::wide::access(set, line) };
        }
        lru_set::access(set, line) == lru_set::Outcome::Hit
    }

    pub fn sets(&self) -> usize {
        self.sets
    }
}

/// References queued before the levels see them (`Caches::defer`), and how far ahead of the
/// one being replayed a queued reference's set rows are prefetched. The simulated caches' tag
/// arrays are larger than the host's own caches (a 32MiB last level is 4MiB of tags), so a
/// probe in program order waits on host memory each time; replaying a batch with its rows
/// requested AHEAD references early lets those waits overlap. 64 and 8 are a first choice,
/// not tuned: a batch of lines fits the host's L1, and 8 rows in flight is below the misses a
/// core keeps outstanding (docs/RUNTIME_MODEL.md, "Speed").
const BATCH: usize = 64;
const AHEAD: usize = 8;

/// The levels, what they served, and the queue of references they have not yet seen.
///
/// Invariant: every counter read goes through `Caches::settled`, which replays the queue
/// first, so a reader sees exactly the state an in-order, one-at-a-time hierarchy would have
/// (the queue changes when references are applied, never their order or outcome).
pub struct CacheState {
    pub levels: Vec<CacheLevel>,
    /// References no level held, by requester.
    pub dram: [u64; 2],
    /// Queued references: line << 1 | requester.
    queue: [u64; BATCH],
    queued: usize,
    /// Some level takes the AVX2 set operations: replay through the AVX2-compiled loop.
    wide: bool,
}

impl CacheState {
    /// One reference to `line`. Returns the index of the level that served it (`levels.len()`
    /// = memory). A level that misses is filled as it is passed: levels change nothing in each
    /// other, so filling on the way down leaves what filling after the search would.
    ///
    /// # Safety
    /// With WIDE, as for `CacheLevel::access`.
    #[inline(always)]
    unsafe fn apply<const WIDE: bool>(&mut self, line: u64, r: usize) -> usize {
        let n = self.levels.len();
        for (i, l) in self.levels.iter_mut().enumerate() {
            // SAFETY: the caller's contract, passed on.
            if unsafe { l.access::<WIDE>(line) } {
                l.hits[r] += 1;
                return i;
            }
            l.misses[r] += 1;
        }
        self.dram[r] += 1;
        n
    }

    /// Ask the host to bring `line`'s set row of every level past the first into its cache.
    #[inline(always)]
    fn prefetch(&self, line: u64) {
        for l in &self.levels[1..] {
            let base = l.set_of(line) * l.ways;
            crate::hint::prefetch(&l.tags[base]);
            if l.ways > 8 {
                // A row of more than 8 tags spans a second host line.
                crate::hint::prefetch(&l.tags[base + 8]);
            }
        }
    }

    /// Apply every queued reference, in order.
    fn replay(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is set only when the CPU has AVX2.
            return unsafe { self.replay_wide() };
        }
        // SAFETY: WIDE = false takes no AVX2 path.
        unsafe { self.replay_body::<false>() }
    }

    /// The replay compiled for AVX2, so the levels' wide set operations inline into it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn replay_wide(&mut self) {
        // SAFETY: compiled with AVX2 and entered only when the CPU has it.
        unsafe { self.replay_body::<true>() }
    }

    /// # Safety
    /// With WIDE, as for `CacheLevel::access`.
    #[inline(always)]
    unsafe fn replay_body<const WIDE: bool>(&mut self) {
        let q = self.queued;
        for &e in &self.queue[..q.min(AHEAD)] {
            self.prefetch(e >> 1);
        }
        for i in 0..q {
            if i + AHEAD < q {
                self.prefetch(self.queue[i + AHEAD] >> 1);
            }
            let e = self.queue[i];
            // SAFETY: the caller's contract, passed on.
            unsafe { self.apply::<WIDE>(e >> 1, (e & 1) as usize) };
        }
        self.queued = 0;
    }
}

pub struct Caches {
    pub spec: CacheSpec,
    line_shift: u32,
    // A RefCell so that readers holding `&Caches` (results, samples, `Engine::now`) can
    // replay the queue before they count.
    state: std::cell::RefCell<CacheState>,
}

impl Caches {
    pub fn new(spec: &CacheSpec) -> Caches {
        let levels: Vec<CacheLevel> = spec.levels.iter().map(|l| CacheLevel::new(l, spec.line_bytes)).collect();
        let wide = levels.iter().any(|l| l.wide);
        let state = CacheState { levels, dram: [0; 2], queue: [0; BATCH], queued: 0, wide };
        Caches { spec: spec.clone(), line_shift: spec.line_bytes.trailing_zeros(), state: std::cell::RefCell::new(state) }
    }

    /// One reference to physical address `pa`, applied now. Returns the index of the level
    /// that served it (`levels.len()` = memory).
    pub fn access(&mut self, pa: u64, who: Requester) -> usize {
        let line = pa >> self.line_shift;
        let s = self.state.get_mut();
        s.replay();
        // SAFETY: WIDE = false takes no AVX2 path (the answer is the same either way).
        unsafe { s.apply::<false>(line, who as usize) }
    }

    /// One reference to physical address `pa`, queued: the levels see it, in order, before
    /// anyone reads a counter. The engine's path (nothing it decides depends on which level
    /// served a reference, only the counts do).
    #[inline(always)]
    pub fn defer(&mut self, pa: u64, who: Requester) {
        let line = pa >> self.line_shift;
        let s = self.state.get_mut();
        s.queue[s.queued] = line << 1 | who as u64;
        s.queued += 1;
        if s.queued == BATCH {
            s.replay();
        }
    }

    /// `n` more references that hit the first level (a same-page run the trace collapsed:
    /// its line addresses are gone, so they count as first-level hits; docs/RUNTIME_MODEL.md).
    #[inline(always)]
    pub fn first_level_hits(&mut self, n: u64) {
        if let Some(l) = self.state.get_mut().levels.first_mut() {
            l.hits[0] += n;
        }
    }

    /// The levels and their counters, with every queued reference applied.
    pub fn settled(&self) -> std::cell::Ref<'_, CacheState> {
        self.state.borrow_mut().replay();
        self.state.borrow()
    }

    /// References served by each level (then memory), for one requester.
    pub fn served(&self, who: Requester) -> Vec<u64> {
        let r = who as usize;
        let s = self.settled();
        s.levels.iter().map(|l| l.hits[r]).chain(std::iter::once(s.dram[r])).collect()
    }
}

/// Stall cycles the caches add, from what each level served (the overlap model of
/// docs/RUNTIME_MODEL.md). `data[i]`/`walk[i]`: references served by level i (the last entry:
/// memory), `lat[i]` = `spec.latencies()[i]` their latencies. `accesses`, `instructions`: of the run (instructions 0:
/// unknown). Returns (data stall, walk stall).
///
/// - A data reference that hits the first level costs nothing beyond `cycles_per_access` (the
///   pipeline hides an L1 hit); one served by level i stalls `lat[i] - lat[0]`.
/// - A walk reference costs its full latency: a walk's references are a dependent chain.
/// - Independent misses overlap. How many are in flight is what the window holds: the accesses
///   in `rob` instructions times the fraction of them that miss, at least 1 and at most `mlp`
///   (walks: at most `walkers`). A fraction `dependence` of misses is on a dependent chain and
///   overlaps with nothing.
pub fn stall_cycles(spec: &CacheSpec, data: &[u64], walk: &[u64], accesses: u64, instructions: u64, walks: u64) -> (f64, f64) {
    if accesses == 0 {
        return (0.0, 0.0);
    }
    let lat = spec.latencies();
    let ipa = if instructions > 0 { instructions as f64 / accesses as f64 } else { spec.instructions_per_access };
    let window = spec.rob / ipa.max(1e-9); // accesses the window holds
    let data_misses: u64 = data[1..].iter().sum();
    let in_flight = |events: f64, cap: f64| (window * events / accesses as f64).clamp(1.0, cap.max(1.0));
    let d = spec.dependence.clamp(0.0, 1.0);
    let share = |overlap: f64| d + (1.0 - d) / overlap;
    let data_raw: f64 = data.iter().zip(&lat).skip(1).map(|(&n, &l)| n as f64 * (l - lat[0]).max(0.0)).sum();
    let walk_raw: f64 = walk.iter().zip(&lat).map(|(&n, &l)| n as f64 * l).sum();
    (data_raw * share(in_flight(data_misses as f64, spec.mlp)), walk_raw * share(in_flight(walks as f64, spec.walkers)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(levels: &[(u64, u32)]) -> CacheSpec {
        CacheSpec {
            line_bytes: 64,
            levels: levels
                .iter()
                .enumerate()
                .map(|(i, &(bytes, ways))| CacheLevelSpec { name: format!("L{}", i + 1), bytes, ways, cycles: [4.0, 14.0, 50.0][i] })
                .collect(),
            dram_cycles: 200.0,
            mlp: 10.0,
            walkers: 2.0,
            rob: 200.0,
            instructions_per_access: 4.0,
            ipc: 2.0,
            dependence: 0.0,
        }
    }

    #[test]
    fn queued_references_count_exactly_as_references_applied_at_once() {
        // Three levels, small enough that a pseudo-random stream hits and misses in each; the
        // queue is read mid-batch (a partial batch) and after several full ones.
        let s = spec(&[(1 << 10, 2), (1 << 13, 4), (1 << 15, 16)]);
        let (mut now, mut queued) = (Caches::new(&s), Caches::new(&s));
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..10_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pa = x % (1 << 17);
            let who = if i % 3 == 0 { Requester::Walk } else { Requester::Data };
            now.access(pa, who);
            queued.defer(pa, who);
            if i == 100 || i == 4_321 {
                assert_eq!(queued.served(Requester::Data), now.served(Requester::Data), "after {i}");
            }
        }
        for who in [Requester::Data, Requester::Walk] {
            assert_eq!(queued.served(who), now.served(who));
        }
        let (a, b) = (now.settled(), queued.settled());
        for (x, y) in a.levels.iter().zip(&b.levels) {
            assert_eq!((x.hits, x.misses), (y.hits, y.misses));
        }
        assert!(a.levels.iter().all(|l| l.hits[0] > 0 && l.misses[0] > 0), "the stream exercises every level");
    }

    #[test]
    fn lru_evicts_the_least_recent_line_of_a_set() {
        // One set of 2 ways: lines a, b fill it; touching a makes b the victim of c.
        let mut c = Caches::new(&spec(&[(128, 2)]));
        for pa in [0u64, 64, 0, 128] {
            c.access(pa, Requester::Data);
        }
        assert_eq!(c.access(0, Requester::Data), 0, "a was kept");
        assert_eq!(c.access(64, Requester::Data), 1, "b was evicted");
    }

    #[test]
    fn a_miss_fills_every_level_before_the_one_that_served_it() {
        let mut c = Caches::new(&spec(&[(128, 2), (1024, 4)]));
        assert_eq!(c.access(0x1000, Requester::Walk), 2);
        assert_eq!(c.access(0x1000, Requester::Walk), 0);
        // Evict it from L1 (one set of 2 ways) only.
        c.access(0x2000, Requester::Data);
        c.access(0x3000, Requester::Data);
        assert_eq!(c.access(0x1000, Requester::Walk), 1, "still in L2");
        assert_eq!(c.served(Requester::Walk), vec![1, 1, 1]);
        assert_eq!(c.served(Requester::Data), vec![0, 0, 2]);
    }

    #[test]
    fn stall_overlaps_independent_misses_up_to_the_window_and_mlp() {
        let s = spec(&[(1 << 15, 8), (1 << 20, 16)]);
        assert_eq!(s.latencies(), vec![4.0, 14.0, 200.0]);
        // 1000 accesses, 4000 instructions: the 200-instruction window holds 50 accesses.
        // 100 of them went to memory (10% miss): 5 in flight, so each costs (200-4)/5.
        let (d, w) = stall_cycles(&s, &[900, 0, 100], &[0, 0, 0], 1000, 4000, 0);
        assert!((d - 100.0 * 196.0 / 5.0).abs() < 1e-9, "{d}");
        assert_eq!(w, 0.0);
        // Every access misses: 50 in flight, capped at mlp = 10.
        let (d, _) = stall_cycles(&s, &[0, 0, 1000], &[0, 0, 0], 1000, 4000, 0);
        assert!((d - 1000.0 * 196.0 / 10.0).abs() < 1e-9, "{d}");
        // A pointer chase: nothing overlaps.
        let chase = CacheSpec { dependence: 1.0, ..s.clone() };
        let (d, _) = stall_cycles(&chase, &[0, 0, 1000], &[0, 0, 0], 1000, 4000, 0);
        assert!((d - 1000.0 * 196.0).abs() < 1e-9, "{d}");
        // Walks: 1000 walks of one reference served by L2 (14 cycles each), 2 walkers.
        let (_, w) = stall_cycles(&s, &[1000, 0, 0], &[0, 1000, 0], 1000, 4000, 1000);
        assert!((w - 1000.0 * 14.0 / 2.0).abs() < 1e-9, "{w}");
    }
}
