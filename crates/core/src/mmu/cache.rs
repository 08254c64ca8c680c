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
//!   in order, prefetching each one's set rows a few references ahead, on the engine's thread
//!   or a thread of their own. Every counter read applies the queue first (`Caches::counts`),
//!   so no reader can tell the difference.
//! - Since no level changes another, each level's state depends only on the references that
//!   reach it: the first level's on every reference, each later level's on the misses of the
//!   level before. So the hierarchy is a pipeline, and the first level can instead run where
//!   the engine makes the reference, queueing only its misses
//!   (`Caches::with_first_level_here`; its tags are a few KiB, in the host's own L1). That
//!   pays where most references would stop there and the replay thread is the slower side: a
//!   nested walk's repeated host entries. Where the engine's thread is the slower side, it only
//!   adds to it.
//!
//! What a level served, split by requester (the program, or the page walker), is all the
//! cost model needs: stats::cache_cycles turns the counts into stall cycles with the overlap
//! model (docs/RUNTIME_MODEL.md). The hot path allocates nothing.

use super::lru_set;

/// An empty slot: no line's tag (`Caches::check_memory` refuses memories whose lines would
/// reach it).
const EMPTY: u32 = u32::MAX;

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

impl CacheLevelSpec {
    /// The sets the level has with lines of `line_bytes` (`CacheLevel::shape`).
    pub fn sets(&self, line_bytes: u32) -> usize {
        CacheLevel::shape(self, line_bytes).0
    }
}

/// The most cache levels a machine has (a machine file is refused with more: mmu/machine.rs).
/// Four covers every CPU CPUID describes (L1 to an L4 such as Intel's eDRAM); it lets the
/// overlap model keep a level's counts and latencies on the stack.
pub const MAX_LEVELS: usize = 4;

/// A machine's `[cache]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheSpec {
    pub line_bytes: u32,
    /// One to `MAX_LEVELS` levels, nearest the core first.
    pub levels: Vec<CacheLevelSpec>,
    /// Latency of a reference no level holds (DRAM), in cycles.
    pub dram_cycles: f64,
    /// Most independent data misses in flight at once (L1D miss-status registers / fill buffers).
    pub mlp: f64,
    /// Page walks in flight at once (the hardware page walkers).
    pub walkers: f64,
    /// The page walker's loads that miss the first level hold one of its fill buffers (`mlp`)
    /// as a data miss does: Intel cores, whose walker loads look up "the L1+FB" (the
    /// PAGE_WALKER_LOADS events). Off: walks take walkers only.
    pub walk_fill_buffers: bool,
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
    /// Fraction of the dependent chain's translations (walks and second-level TLB hits) that
    /// start under the step before's miss, because the next address follows from branches the
    /// core predicts rather than from the loaded value: a B-tree's descent or a binary search,
    /// not a pointer chase (a property of the program: `+walk_ahead=F` sets it; 0 = none).
    pub walk_ahead: f64,
    /// Of the same chain's walks, the fractions whose guess made two and three steps before
    /// lands in the right page, so that the walk starts under those steps' misses too (at most
    /// `walk_ahead`, and `walk_ahead3` at most this; 0 = none: a guess reaches one step). Read
    /// with the step fit (`StepFit`); a property of the program, as `walk_ahead`
    /// (`+walk_ahead2=F`, `+walk_ahead3=F`).
    pub walk_ahead2: f64,
    pub walk_ahead3: f64,
    /// Fraction of the walks into a sequential stream's next page (`walks.sequential`: a walk
    /// whose two pages below, or two above, are among the last 8 walks', mmu/mod.rs) that the
    /// machine does ahead of the stream, so that they cost nothing: its prefetchers run ahead
    /// across the page boundary, or the core runs ahead of a stream its memory bandwidth
    /// bounds. They are taken at the average walk's cost and leave every term
    /// (docs/RUNTIME_MODEL.md, "Streams across pages"). calibrate measures it with chase.c
    /// `sweep` (host.rs `StreamProbe`); `+stream_ahead=F` sets it; 0 (every walk costs as the
    /// others) where absent.
    pub stream_ahead: f64,
    /// Fraction of the data references in a sequential stream that miss the second level
    /// (`streamed`, `Streams`) which its stream prefetcher brings in ahead of them, so that they
    /// cost as its hits: AMD's and Intel's cores prefetch lines that follow a run of misses in
    /// either direction into the L2 (AMD, Software Optimization Guide for AMD64 Processors,
    /// 25112 rev. 3.06, 5.6 "Hardware Prefetching": lines l and l + 1 start a prefetch of
    /// l + 3; Intel, IA-32 Optimization Reference Manual, ch. 6 "Optimizing Cache Usage": up to
    /// 8 streams, none across a 4K boundary). Every count stays as it is (a prefetched line
    /// enters the levels as the demand would have); only the time changes
    /// (docs/RUNTIME_MODEL.md, "Streams the prefetcher runs ahead of"). `host` sets 1;
    /// `+stream_prefetch=F` sets it; 0 (every miss costs its level) where absent.
    pub stream_prefetch: f64,
    /// Cycles a line read from memory takes at the rate one core streams lines in: the accesses
    /// take at least the lines they read from memory (data and walk, streamed or not) times
    /// this, work and stalls together, a floor outside the three bounds the overlap model takes
    /// the busiest of (`OverlapBounds::bandwidth`, stats::cost_parts_of `cycles.bandwidth`;
    /// docs/RUNTIME_MODEL.md, "Memory's line rate"). `host`:
    /// calibrate's stream probe (chase.c `sweep` on 2MB pages, ns a 4KB page over its lines, at
    /// the clock); `+dram_line_cycles=N` sets it; 0 (no such bound) where absent.
    pub dram_line_cycles: f64,
    /// How much of a translation's latency a full window hides (0: none, the chain model). In
    /// the window's term an access's translation shows 1 / (1 + `walk_hiding` x (c - 1)) of its
    /// latency, c the accesses the window holds, so all of it when one access is in flight and
    /// less as more are (measured with chase.c `window`, docs/RUNTIME_MODEL.md, "Walks in a full
    /// window"; `+walk_hiding=K` sets it).
    pub walk_hiding: f64,
    /// Lines a nanosecond that other tenants (other virtual machines, other processes) bring
    /// into the last level, which they share with the program: under LRU each keeps the share of
    /// the ways its own fills are of all fills, so the program keeps w of the level's W ways
    /// where w / W = F / (F + R), F its own fills a nanosecond (its references the last level
    /// did not hold, over the time the model gives it), R this rate. The level is simulated
    /// whole and the depth of every hit in its set kept (`LevelCounts::depth`), so one run gives
    /// what any w ways of the same sets would have served, and the cost model solves for w
    /// (`CostInputs::shared`, docs/RUNTIME_MODEL.md, "A last level shared by the second").
    /// None: the level is the program's alone, at its size.
    pub tenant_fill_rate: Option<f64>,
    /// How the program's share of a shared last level grows with its own fills: it keeps w of W
    /// ways where w / W = F^a / (F^a + R^a). 1 (the default) is LRU's proportional share above.
    /// Below 1, a program filling faster than the tenants keeps less than its share of the fills
    /// and one filling slower keeps more, as under a replacement that ages out lines brought in
    /// and not used again before lines used twice (the fifty-third session's what-if, where
    /// 0.7 with `walk_hiding` 0 fitted calibrate's probes over 1GiB and 4GiB: docs/RUNTIME_MODEL.md,
    /// "A share that grows slower than the fills"). calibrate fits it to its walk probes over
    /// `--largest` and four times it (host.rs `ShareFit`; "The share's exponent, fitted"), with
    /// the rate R (C / s - 1)^(1/a - 1) (C the level, s the share the last level's fit chose), so
    /// that its chase keeps that share; `+share_exponent=A` sets it alone.
    pub share_exponent: f64,
    /// How a share of w ways keeps a shared last level's hits (mmu/reuse.rs): `Depth`, each hit
    /// found within the set's w most recent lines (what a level of the same sets in w ways
    /// serves); `Reuse`, each hit by the chance that fewer tenants' lines than the ways left
    /// above it entered its set since its last use. `[cache] share_law`, "depth" where absent;
    /// calibrate writes "reuse" (docs/RUNTIME_MODEL.md, "A share that remembers when a line was
    /// last used"); `+share_law=L` sets it.
    pub share_law: ShareLaw,
    /// How the window's bound combines with the resources it waits on (fill buffers, walkers:
    /// `OverlapBounds`): None, the largest alone; Some(p), the p-norm of the window's bound and
    /// of each resource the window holds more demand for than it has (its misses or walks in
    /// flight capped at `mlp` or `walkers`), so that where a full resource and the window are
    /// near each other each waits on the other, and a resource with room is waited on only as
    /// the largest is. p from calibrate's walk probe where `calibrate --bounds-norm-fit` fitted it
    /// (docs/RUNTIME_MODEL.md, "Bounds near each other"); `+bounds_norm=P` sets it, 0 unsets.
    pub bounds_norm: Option<f64>,
}

/// How a shared last level's share keeps hits (`CacheSpec::share_law`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShareLaw {
    #[default]
    Depth,
    Reuse,
}

impl ShareLaw {
    pub fn parse(v: &str) -> Option<ShareLaw> {
        match v {
            "depth" => Some(ShareLaw::Depth),
            "reuse" => Some(ShareLaw::Reuse),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ShareLaw::Depth => "depth",
            ShareLaw::Reuse => "reuse",
        }
    }
}

/// The window's bound and the others (each with whether the window holds more demand for it
/// than it has) combined as `CacheSpec::bounds_norm` says: the largest; or, with a norm p, the
/// p-norm of the window and the full resources (scaled by the largest, so no power
/// overflows), never less than the largest of all.
#[inline]
pub fn combine_bounds(norm: Option<f64>, window: f64, others: [(f64, bool); 2]) -> f64 {
    let largest = others.iter().fold(window, |m, &(b, _)| m.max(b));
    let Some(p) = norm else { return largest };
    let m = others.iter().filter(|o| o.1).fold(window, |m, &(b, _)| m.max(b));
    if m <= 0.0 {
        return largest;
    }
    let sum = others.iter().filter(|o| o.1).fold((window / m).powf(p), |s, &(b, _)| s + (b / m).powf(p));
    (m * sum.powf(1.0 / p)).max(largest)
}

impl CacheSpec {
    /// `levels` of `line_bytes`-byte lines with the overlap model's plain settings: memory at
    /// 300 cycles, 10 misses and 2 walks in flight, a 200-instruction window, 4 instructions an
    /// access at 2 a cycle (the machine file's defaults for the last two), nothing dependent or
    /// hidden, the last level not shared. For code that builds caches without a machine file:
    /// the tests, and `cache_served`, which reads only what each level served.
    pub fn of_levels(line_bytes: u32, levels: Vec<CacheLevelSpec>) -> CacheSpec {
        assert!((1..=MAX_LEVELS).contains(&levels.len()), "a cache of {} levels (1 to {MAX_LEVELS})", levels.len());
        CacheSpec {
            line_bytes,
            levels,
            dram_cycles: 300.0,
            mlp: 10.0,
            walkers: 2.0,
            walk_fill_buffers: false,
            rob: 200.0,
            instructions_per_access: 4.0,
            ipc: 2.0,
            dependence: 0.0,
            walk_ahead: 0.0,
            walk_ahead2: 0.0,
            walk_ahead3: 0.0,
            stream_ahead: 0.0,
            stream_prefetch: 0.0,
            dram_line_cycles: 0.0,
            walk_hiding: 0.0,
            tenant_fill_rate: None,
            share_exponent: 1.0,
            share_law: ShareLaw::Depth,
            bounds_norm: None,
        }
    }

    /// Whether runs on this machine mark each walk's end for the step fit (`StepFit`): a
    /// dependent chain whose walks start ahead of it.
    pub fn marks_steps(&self) -> bool {
        self.walk_ahead > 0.0 && self.dependence > 0.0
    }

    /// Latency of each level (then memory), in cycles.
    pub fn latencies(&self) -> Vec<f64> {
        self.levels.iter().map(|l| l.cycles).chain(std::iter::once(self.dram_cycles)).collect()
    }
}

pub struct CacheLevel {
    pub name: String,
    sets: usize,
    ways: usize,
    /// Tags a set's row holds: `ways`, or the wide routine's row (8 or 16) with the lanes past
    /// `ways` kept empty.
    row: usize,
    /// sets - 1 when the sets are a power of two, else 0 (`set_of` takes the modulo).
    set_mask: u64,
    /// A line's tag is line >> tag_shift: the set's index bits are dropped where the sets are a
    /// power of two (they are the same for every line of the set), which keeps tags within u32
    /// for every memory `Caches::check_memory` allows.
    tag_shift: u32,
    /// This level's sets take the AVX2 set operations (mmu/lru_set.rs) when the replay is
    /// compiled for them: the CPU has AVX2 and the set fits a row of 16 tags.
    wide: bool,
    /// The replay prefetches this level's set rows ahead (`CacheState::prefetch`): its tags
    /// are larger than PREFETCH_FROM, so a row is likely out of the host's L2.
    far: bool,
    /// u32 tags, on the host's 2MB pages when large (`hint::HostArray`): half the host memory
    /// u64 tags took, so a 16-way set is one host cache line.
    tags: crate::hint::HostArray<u32>,
    /// Hits by requester.
    pub hits: [u64; 2],
    pub misses: [u64; 2],
    /// Where the level is shared (`CacheSpec::tenant_fill_rate`, the last level only): hits by
    /// the depth the line was found at in its set (0: the most recent), by requester; `ways`
    /// entries. Empty elsewhere (the hot path then never looks at depths).
    pub depth: Vec<[u64; 2]>,
    /// Under the reuse law (`CacheSpec::share_law`, mmu/reuse.rs): hits by (depth, bucket of
    /// the level's references since the line's last use), `ways` x `reuse::BUCKETS` entries,
    /// by requester. Empty elsewhere.
    pub reuse: Vec<[u64; 2]>,
    /// Under the reuse law: the level's reference count when each line was last used, in the
    /// set's order (the line at depth d of set s at `s * ways + d`), so that it moves as the tags
    /// do. Empty elsewhere.
    stamps: crate::hint::HostArray<u64>,
    /// References to the level so far (the reuse law's clock).
    clock: u64,
}

impl CacheLevel {
    /// (sets, ways, tag_shift) of a level.
    fn shape(spec: &CacheLevelSpec, line_bytes: u32) -> (usize, usize, u32) {
        let lines = (spec.bytes / line_bytes as u64).max(1) as usize;
        let ways = (spec.ways as usize).clamp(1, lines);
        let sets = lines / ways;
        (sets, ways, if sets.is_power_of_two() { sets.trailing_zeros() } else { 0 })
    }

    /// `by_depth`: count hits by their depth in the set (`depth`); `by_reuse` (with it): and by
    /// the time since their last use (`reuse`).
    fn new(spec: &CacheLevelSpec, line_bytes: u32, by_depth: bool, by_reuse: bool) -> CacheLevel {
        let (sets, ways, tag_shift) = CacheLevel::shape(spec, line_bytes);
        let set_mask = if sets.is_power_of_two() { sets as u64 - 1 } else { 0 };
        let wide_row = lru_set::wide32_row(ways as u32);
        let row = wide_row.unwrap_or(ways);
        CacheLevel {
            name: spec.name.clone(),
            sets,
            ways,
            row,
            set_mask,
            tag_shift,
            wide: wide_row.is_some(),
            far: sets * row * std::mem::size_of::<u32>() > PREFETCH_FROM,
            tags: crate::hint::HostArray::filled(sets * row, EMPTY),
            hits: [0; 2],
            misses: [0; 2],
            depth: if by_depth { vec![[0; 2]; ways] } else { Vec::new() },
            reuse: if by_depth && by_reuse { vec![[0; 2]; ways * super::reuse::BUCKETS] } else { Vec::new() },
            stamps: crate::hint::HostArray::filled(if by_depth && by_reuse { sets * ways } else { 0 }, 0),
            clock: 0,
        }
    }

    /// Under the reuse law: count a reference to `line` by requester `r` that was `found` at
    /// that depth (None: a miss, the line now at the front), and move the set's stamps as
    /// `access_depth` moved its tags (move to front, the least recent out on a miss).
    #[inline(always)]
    fn stamp(&mut self, line: u64, found: Option<usize>, r: usize) {
        let base = self.set_of(line) * self.ways;
        let now = self.clock;
        self.clock += 1;
        let last = found.unwrap_or(self.ways - 1);
        if let Some(d) = found {
            let gap = now - self.stamps[base + d];
            self.reuse[d * super::reuse::BUCKETS + super::reuse::bucket(gap)][r] += 1;
        }
        self.stamps.copy_within(base..base + last, base + 1);
        self.stamps[base] = now;
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
    /// FRONT: first see whether the line is already the set's most recent, where nothing moves.
    /// That branch pays where the row is far (the wide routine would wait for all of it) and
    /// costs where it is near and the answer unpredictable (the first level: a mispredicted
    /// branch costs more than the wide routine, which leaves such a row as it was anyway).
    ///
    /// # Safety
    /// With WIDE, the caller must be compiled with AVX2 enabled (`#[target_feature]`); the
    /// level's own `wide` says whether the CPU has it.
    #[inline(always)]
    unsafe fn access<const WIDE: bool, const FRONT: bool>(&mut self, line: u64) -> bool {
        let base = self.set_of(line) * self.row;
        let tag = (line >> self.tag_shift) as u32;
        debug_assert!(line >> self.tag_shift < EMPTY as u64, "line {line:#x} beyond the tags' reach (Caches::check_memory)");
        let row = &mut self.tags[base..base + self.row];
        if (FRONT || !(WIDE && self.wide)) && row[0] == tag {
            return true; // already the most recent: nothing moves
        }
        #[cfg(target_arch = "x86_64")]
        if WIDE && self.wide {
            // SAFETY: `wide` is set only where the CPU has AVX2 and the row is the one the
            // routine takes for this many ways; the caller's contract covers the rest.
            return unsafe { lru_set::wide::access32(row, self.ways, tag) };
        }
        lru_set::access(&mut row[..self.ways], tag) == lru_set::Outcome::Hit
    }

    /// `access`, returning the depth the line was found at in its set before it moved to the
    /// front (0: the most recent), or None on a miss: under LRU a level of the same sets in d
    /// or fewer ways would have missed it, in more would have hit.
    ///
    /// # Safety
    /// As for `access`.
    #[inline(always)]
    unsafe fn access_depth<const WIDE: bool>(&mut self, line: u64) -> Option<usize> {
        let base = self.set_of(line) * self.row;
        let tag = (line >> self.tag_shift) as u32;
        let row = &mut self.tags[base..base + self.row];
        if row[0] == tag {
            return Some(0);
        }
        #[cfg(target_arch = "x86_64")]
        if WIDE && self.wide {
            // SAFETY: as in `access`.
            let way = unsafe { lru_set::wide::access32_way(row, self.ways, tag) } as usize;
            return (way < self.ways).then_some(way);
        }
        let way = row[..self.ways].iter().position(|&t| t == tag);
        lru_set::access(&mut row[..self.ways], tag);
        way
    }

    pub fn sets(&self) -> usize {
        self.sets
    }
}

/// References queued before the levels see them (`Caches::defer`), and how far ahead of the
/// one being replayed a queued reference's set rows are prefetched. The simulated caches' tag
/// arrays are larger than the host's own caches (a 32MiB last level is 4MiB of tags), so a
/// probe in program order waits on host memory each time; replaying a batch with its rows
/// requested AHEAD references early lets those waits overlap. A batch of 64 lines fits the
/// host's L1. AHEAD = 16 (16 references' rows in flight, within the misses a core keeps
/// outstanding) gave 1.10x the refs/s of 8 on the AMD EPYC VM, whose L3 answers in about
/// 135ns (host, Zipf 1GiB, 9 alternating runs each, medians); 32 was not clearly better
/// (docs/RUNTIME_MODEL.md, "Speed").
const BATCH: usize = 64;
const AHEAD: usize = 16;

/// Levels whose tags take more host memory than this have their rows prefetched AHEAD; smaller
/// ones (an L2 of 1MiB in 8 ways has 64KiB of tags) stay in the host's own L2 (at least 256KiB
/// on any x86-64 of the last decade), where a prefetch is an instruction spent for nothing.
const PREFETCH_FROM: usize = 256 << 10;

/// The levels that replay the queue (every level, or the levels after the first where the
/// first runs on the engine's side) and what they served.
pub struct CacheState {
    pub levels: Vec<CacheLevel>,
    /// References no level held, by requester.
    pub dram: [u64; 2],
    /// Which of `levels` is the hierarchy's second (the first may run on the engine's side:
    /// `Caches::with_first_level_here`); `usize::MAX` where there is none.
    second: usize,
    /// The data references that missed the second level, watched for streams (`Streams`; boxed,
    /// as `steps`, so the state moves between threads as a small value).
    streams: Box<Streams>,
    /// Some level takes the AVX2 set operations: replay through the AVX2-compiled loop.
    wide: bool,
    /// How much of each walk fits under the data miss before it (`StepFit`); None where the
    /// machine marks no steps (`CacheSpec::walk_ahead` 0), and the queue then holds no marks.
    steps: Option<Box<StepFit>>,
}

/// Streams the second level's prefetcher follows at once, one to a 4KB frame (Intel, IA-32
/// Optimization Reference Manual, ch. 6: "up to 8 simultaneous independent streams from eight
/// different 4K regions", "only one stream per 4K page").
const STREAMS: usize = 8;

/// Misses in a row, one line apart in one direction, that make the last of them streamed:
/// AMD's misses to l and l + 1 start a prefetch of l + 3, and l + 2 is missed on the way, so
/// the fourth line of a run is the first the prefetcher brought in.
const STREAM_RUN: u32 = 4;

/// The second level's stream prefetcher as the model sees it (`CacheSpec::stream_prefetch`):
/// the data references that miss the second level, followed per 4KB frame. A miss one line
/// above the frame's last (or below it) extends the frame's run in that direction; any other
/// starts a new run of one. A miss that makes its run `STREAM_RUN` long or longer is
/// *streamed*. The prefetcher works on physical lines and does not cross a 4K boundary
/// (Intel's manual, "independent of paging modes"), so a run starts again at each 4KB frame
/// whatever the page size: a sweep's first three lines of each frame are not streamed.
/// A frame not followed takes the place of the one least recently missed.
///
/// Invariants: each of `frame` (`u64::MAX`: none yet) appears at most once; `last[i]` is a
/// line of `frame[i]`; `run[i]` is the run's length, positive ascending and negative
/// descending (1: no direction yet); `used[i]` is when entry i last missed, in misses, all
/// distinct where nonzero; `streamed` is at most the misses seen.
#[derive(Clone, Debug)]
struct Streams {
    frame: [u64; STREAMS],
    last: [u64; STREAMS],
    run: [i32; STREAMS],
    used: [u64; STREAMS],
    misses: u64,
    frame_shift: u32,
    streamed: u64,
}

impl Streams {
    fn new(line_bytes: u32) -> Streams {
        Streams {
            frame: [u64::MAX; STREAMS],
            last: [0; STREAMS],
            run: [0; STREAMS],
            used: [0; STREAMS],
            misses: 0,
            frame_shift: 12u32.saturating_sub(line_bytes.trailing_zeros()),
            streamed: 0,
        }
    }

    /// A data reference to `line` that missed the second level.
    #[inline(always)]
    fn missed(&mut self, line: u64) {
        let frame = line >> self.frame_shift;
        self.misses += 1;
        let i = match self.frame.iter().position(|&f| f == frame) {
            Some(i) => {
                let run = self.run[i];
                self.run[i] = match line.wrapping_sub(self.last[i]) {
                    1 => run.max(1) + 1,
                    d if d == u64::MAX => run.min(-1) - 1,
                    _ => 1,
                };
                i
            }
            None => {
                // The least recently missed frame's place (an unused one first: `used` 0).
                let i = (0..STREAMS).min_by_key(|&i| self.used[i]).unwrap_or(0);
                self.frame[i] = frame;
                self.run[i] = 1;
                i
            }
        };
        self.last[i] = line;
        self.used[i] = self.misses;
        self.streamed += (self.run[i].unsigned_abs() >= STREAM_RUN) as u64;
    }
}

/// `data` (references served by each level, then memory) as the overlap model times it:
/// `stream_prefetch` of the `streamed` references, which missed the second level, served by
/// it instead, taken from the levels below it in proportion to what each served (which of
/// them a streamed reference came from is not kept: a shared last level's share is solved on
/// the counts). Unchanged with fewer than three entries or nothing streamed.
pub fn timed_by_prefetch(spec: &CacheSpec, data: &mut [u64], streamed: u64) {
    let n = data.len();
    let f = spec.stream_prefetch.clamp(0.0, 1.0);
    if n < 3 || streamed == 0 || f == 0.0 {
        return;
    }
    let mut beyond: u64 = data[2..].iter().sum();
    let mut moved = (f * streamed.min(beyond) as f64).round() as u64;
    data[1] += moved;
    // From memory up, each level's part of what is left; the last one visited takes the rest.
    for j in (2..n).rev() {
        let take = if beyond == data[j] { moved } else { ((moved as f64 * data[j] as f64 / beyond as f64).round() as u64).min(moved) };
        let take = take.min(data[j]);
        beyond -= data[j];
        data[j] -= take;
        moved -= take;
    }
    debug_assert_eq!(moved, 0);
}

/// A queued word that is not a reference but the end of a walk (`Caches::end_walk`): this bit,
/// the walk's references that hit a first level replayed elsewhere (`<< AHEAD_STEPS`), and, in
/// bit j below that, whether the data reference j + 1 before the walk hit that level (so was not
/// queued). A line never reaches bit 63 (tags name at most 2^32 sets' worth of lines,
/// `Caches::check_memory`).
const WALK_END: u64 = 1 << 63;

/// How many steps back a chain's walk may have started (`CacheSpec::walk_ahead`,
/// `walk_ahead2`, `walk_ahead3`).
pub const AHEAD_STEPS: usize = 3;

/// Per step of a dependent chain, how much of its walk fits under the data misses of the steps
/// before it (docs/RUNTIME_MODEL.md, "Walks ahead of a dependent chain"): a walk started on a
/// guess k steps ahead runs while those k steps' misses are outstanding, and no longer, so of
/// a walk of w cycles after misses of m1 (the step just before), m2, m3, min(w, m1 + ... + mk)
/// can hide. The overlap model takes the run's sums; summed over the run, min(W, D) credits a
/// long walk after a short miss (or after a hit) with the slack of other steps' misses, which
/// a machine cannot lend it.
///
/// Invariants: `walk` holds the queued walk references' latencies since the last walk end;
/// `fit[0] <= fit[1] <= fit[2] <= walked` (each step adds min(w, S_k), nondecreasing in k, and
/// w); `last` holds the stalls of the last AHEAD_STEPS queued data references, most recent
/// first; `lat` has one latency per level this state replays, then memory's. Latencies are the
/// levels' own (a shared last level counts whole here: the share is solved later, over the
/// run's counts, and this is a ratio of them).
#[derive(Clone, Debug)]
struct StepFit {
    lat: Vec<f64>,
    /// The first level's latency: a data reference stalls beyond it, and a walk reference that
    /// hit it where it runs on the engine's side costs it.
    first: f64,
    walk: f64,
    last: [f64; AHEAD_STEPS],
    fit: [f64; AHEAD_STEPS],
    walked: f64,
}

impl StepFit {
    fn of(spec: &CacheSpec) -> Option<StepFit> {
        let lat = spec.latencies();
        spec.marks_steps().then(|| StepFit { first: lat[0], lat, walk: 0.0, last: [0.0; AHEAD_STEPS], fit: [0.0; AHEAD_STEPS], walked: 0.0 })
    }

    /// A reference served by this state's level `served` (`levels.len()`: memory).
    #[inline(always)]
    fn served(&mut self, served: usize, r: usize) {
        let l = self.lat[served];
        if r == Requester::Walk as usize {
            self.walk += l;
        } else {
            self.last.rotate_right(1);
            self.last[0] = l - self.first;
        }
    }

    /// A walk's end (`WALK_END`).
    #[inline(always)]
    fn walk_end(&mut self, word: u64) {
        let w = self.walk + ((word & !WALK_END) >> AHEAD_STEPS) as f64 * self.first;
        // The steps before, most recent first: a first-level hit where the engine ran it
        // stalled nothing and was not queued; the others are `last` in turn.
        let (mut queued, mut before) = (self.last.iter(), 0.0);
        for k in 0..AHEAD_STEPS {
            if word >> k & 1 == 0 {
                before += queued.next().copied().unwrap_or(0.0);
            }
            self.fit[k] += w.min(before);
        }
        self.walked += w;
        self.walk = 0.0;
    }
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
            if !l.depth.is_empty() {
                // A shared level: where in its set the line was found (`CacheLevel::depth`).
                // SAFETY: the caller's contract, passed on.
                let found = unsafe { l.access_depth::<WIDE>(line) };
                if !l.stamps.is_empty() {
                    l.stamp(line, found, r);
                }
                if let Some(d) = found {
                    l.hits[r] += 1;
                    l.depth[d][r] += 1;
                    return i;
                }
            } else if unsafe { l.access::<WIDE, true>(line) } {
                // SAFETY (the call): the caller's contract, passed on.
                l.hits[r] += 1;
                return i;
            }
            l.misses[r] += 1;
            if i == self.second && r == Requester::Data as usize {
                self.streams.missed(line);
            }
        }
        self.dram[r] += 1;
        n
    }

    /// Ask the host to bring `line`'s set row of every far level into its cache.
    #[inline(always)]
    fn prefetch(&self, line: u64) {
        for l in &self.levels {
            if !l.far {
                continue;
            }
            let set = l.set_of(line);
            let base = set * l.row;
            crate::hint::prefetch(&l.tags[base]);
            if l.row > 16 {
                // A row of more than 16 tags spans a second host line.
                crate::hint::prefetch(&l.tags[base + 16]);
            }
            if !l.stamps.is_empty() {
                // The reuse law's stamps for the set: 8 to a host line.
                let at = set * l.ways;
                crate::hint::prefetch(&l.stamps[at]);
                if l.ways > 8 {
                    crate::hint::prefetch(&l.stamps[(at + l.ways - 1).min(l.stamps.len() - 1)]);
                }
            }
        }
    }

    /// Apply queued references (line << 1 | requester), in order.
    pub(super) fn replay_batch(&mut self, refs: &[u64]) {
        self.replay_stream(refs, &[], false);
    }

    /// `replay_batch` on one batch of a stream: `next` is the batch after it (empty if none is
    /// queued yet), whose first rows are prefetched while this one's last references are
    /// applied, so a batch's start does not wait on host memory; `ahead_done`: the batch before
    /// did that for this one. Returns whether this call did it for `next` (its `ahead_done`).
    pub(super) fn replay_stream(&mut self, refs: &[u64], next: &[u64], ahead_done: bool) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is set only when the CPU has AVX2.
            return unsafe { self.replay_wide(refs, next, ahead_done) };
        }
        // SAFETY: WIDE = false takes no AVX2 path.
        unsafe { self.replay_body::<false>(refs, next, ahead_done) }
    }

    /// The replay compiled for AVX2, so the levels' wide set operations inline into it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn replay_wide(&mut self, refs: &[u64], next: &[u64], ahead_done: bool) -> bool {
        // SAFETY: compiled with AVX2 and entered only when the CPU has it.
        unsafe { self.replay_body::<true>(refs, next, ahead_done) }
    }

    /// # Safety
    /// With WIDE, as for `CacheLevel::access`.
    #[inline(always)]
    unsafe fn replay_body<const WIDE: bool>(&mut self, refs: &[u64], next: &[u64], ahead_done: bool) -> bool {
        let q = refs.len();
        if !ahead_done {
            for &e in &refs[..q.min(AHEAD)] {
                self.prefetch(e >> 1);
            }
        }
        for i in 0..q {
            if let Some(&e) = refs.get(i + AHEAD).or_else(|| next.get(i + AHEAD - q)) {
                self.prefetch(e >> 1);
            }
            let e = refs[i];
            // One test a reference where no steps are marked (the common case).
            if self.steps.is_none() {
                // SAFETY: the caller's contract, passed on.
                unsafe { self.apply::<WIDE>(e >> 1, (e & 1) as usize) };
                continue;
            }
            if e & WALK_END != 0 {
                if let Some(st) = &mut self.steps {
                    st.walk_end(e);
                }
                continue;
            }
            // SAFETY: as above.
            let served = unsafe { self.apply::<WIDE>(e >> 1, (e & 1) as usize) };
            if let Some(st) = &mut self.steps {
                st.served(served, (e & 1) as usize);
            }
        }
        // The last AHEAD references prefetched `next`'s first AHEAD.
        !next.is_empty() && q >= AHEAD
    }
}

/// A batch of queued references: line << 1 | requester. The replay thread's ring holds these
/// too.
#[derive(Clone, Copy)]
pub(super) struct Batch {
    refs: [u64; BATCH],
    n: usize,
}

impl Batch {
    pub(super) const EMPTY: Batch = Batch { refs: [0; BATCH], n: 0 };

    pub(super) fn refs(&self) -> &[u64] {
        &self.refs[..self.n]
    }
}

/// Where the levels replay the queue: on this thread, or on a thread of their own
/// (mmu/replay_thread.rs), which takes the levels' work off the engine's thread.
enum Replay {
    Here(CacheState),
    Thread(super::replay_thread::ReplayThread),
}

/// A run that reads the counters more often than once per this many references on average
/// (a policy whose clock is read on every fault or TLB miss, `Engine::now`) replays on the
/// engine's thread again: each read waits for the other thread to finish the queue, which
/// costs more than the replay it saves. Checked from the 64th read on.
const THREAD_MIN_REFS_PER_READ: u64 = 16_384;

struct Inner {
    batch: Batch,
    replay: Replay,
    /// First-level hits of collapsed same-page runs (`Caches::first_level_hits`) while the first
    /// level replays, added to it when the counters are read (never touched by the replay
    /// thread).
    pending_first_level_hits: u64,
    reads: u64,
    refs: u64,
}

impl Inner {
    /// Hand the queued references to the levels.
    #[inline(always)]
    fn flush(&mut self) {
        let n = self.batch.n;
        if n == 0 {
            return;
        }
        self.refs += n as u64;
        match &mut self.replay {
            Replay::Here(s) => s.replay_batch(self.batch.refs()),
            Replay::Thread(t) => t.publish(&self.batch),
        }
        self.batch.n = 0;
    }

    /// Every queued reference applied, every count in place: the levels are this thread's to
    /// read or change until the next `flush`.
    fn settle(&mut self) -> &mut CacheState {
        self.flush();
        self.reads += 1;
        if let Replay::Thread(t) = &mut self.replay {
            t.drain();
            if self.reads >= 64 && self.refs / self.reads < THREAD_MIN_REFS_PER_READ {
                self.replay = Replay::Here(self.take_levels());
            }
        }
        let pending = std::mem::take(&mut self.pending_first_level_hits);
        // SAFETY: drained just above (or replaying here).
        let s = unsafe { self.state_mut() };
        if let Some(l) = s.levels.first_mut() {
            l.hits[Requester::Data as usize] += pending;
        }
        s
    }

    /// The levels, out of wherever they replay (a replay thread is drained and stopped);
    /// `replay` is left empty until the caller puts them back.
    fn take_levels(&mut self) -> CacheState {
        match std::mem::replace(&mut self.replay, Replay::Here(CacheState::empty())) {
            Replay::Here(s) => s,
            Replay::Thread(t) => t.into_state(),
        }
    }

    /// # Safety
    /// Only after `settle`, with no `flush` since.
    unsafe fn state_mut(&mut self) -> &mut CacheState {
        match &mut self.replay {
            Replay::Here(s) => s,
            // SAFETY: the caller's contract: the other thread has applied everything
            // published and waits for more.
            Replay::Thread(t) => unsafe { t.state_mut() },
        }
    }
}

impl CacheState {
    pub(super) fn empty() -> CacheState {
        CacheState { levels: Vec::new(), dram: [0; 2], second: usize::MAX, streams: Box::new(Streams::new(64)), wide: false, steps: None }
    }
}

/// Counts for the program (0) and the walker (1).
pub type ByRequester = [Vec<u64>; 2];

/// What one level served, by requester (`Caches::counts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelCounts {
    pub name: String,
    pub hits: [u64; 2],
    pub misses: [u64; 2],
    /// A shared level's hits by depth in the set (`CacheLevel::depth`); empty elsewhere.
    pub depth: Vec<[u64; 2]>,
}

/// The levels, what they served, and the queue of references the replaying levels have not
/// yet seen.
///
/// Invariant: every counter read goes through `Caches::counts`, which has every queued
/// reference applied first, so a reader sees exactly the state an in-order, one-at-a-time
/// hierarchy would have (the queue changes when references are applied, and on which thread,
/// never their order or outcome).
pub struct Caches {
    pub spec: CacheSpec,
    line_shift: u32,
    /// The first level where it runs on the engine's side, applied as each reference is made
    /// (`with_first_level_here`); None where it replays with the others (or there are no levels).
    first: Option<CacheLevel>,
    /// The machine marks each walk's end in the queue (`end_walk`, `StepFit`).
    pub marks: bool,
    /// Where the first level runs here: whether each of the last AHEAD_STEPS data references
    /// hit it (bit 0 the most recent), and its walk hits at the last walk's end (`end_walk`
    /// hands the replay both).
    data_hits: u64,
    walk_hits_at_end: u64,
    // A RefCell so that readers holding `&Caches` (results, samples, `Engine::now`) can
    // settle the queue before they count.
    inner: std::cell::RefCell<Inner>,
}

impl Caches {
    /// Caches that replay on the engine's thread (`set_replay_thread` moves them).
    pub fn new(spec: &CacheSpec) -> Caches {
        Caches::with_replay_thread(spec, false)
    }

    pub fn with_replay_thread(spec: &CacheSpec, thread: bool) -> Caches {
        // Only the last level is shared with other tenants (`tenant_fill_rate`).
        let shared = |i: usize| spec.tenant_fill_rate.is_some() && i + 1 == spec.levels.len();
        let by_reuse = spec.share_law == ShareLaw::Reuse;
        let levels: Vec<CacheLevel> = spec.levels.iter().enumerate().map(|(i, l)| CacheLevel::new(l, spec.line_bytes, shared(i), by_reuse)).collect();
        let wide = levels.iter().any(|l| l.wide);
        let steps = StepFit::of(spec).map(Box::new);
        let marks = steps.is_some();
        let second = if levels.len() >= 2 { 1 } else { usize::MAX };
        let streams = Box::new(Streams::new(spec.line_bytes));
        let replay = Replay::Here(CacheState { levels, dram: [0; 2], second, streams, wide, steps });
        let inner = Inner { batch: Batch::EMPTY, replay, pending_first_level_hits: 0, reads: 0, refs: 0 };
        let mut c = Caches {
            spec: spec.clone(),
            line_shift: spec.line_bytes.trailing_zeros(),
            first: None,
            marks,
            data_hits: 0,
            walk_hits_at_end: 0,
            inner: std::cell::RefCell::new(inner),
        };
        if thread {
            c.set_replay_thread(true);
        }
        c
    }

    /// The first level taken out of the replay, to run where references are made: only its
    /// misses are queued (module comment). Every queued reference is applied first, so no count
    /// changes.
    pub fn with_first_level_here(mut self) -> Caches {
        if self.first.is_some() {
            return self;
        }
        let i = self.inner.get_mut();
        let s = i.settle();
        if !s.levels.is_empty() {
            self.first = Some(s.levels.remove(0));
            // The second level is now this state's first.
            s.second = s.second.checked_sub(1).unwrap_or(usize::MAX);
            s.wide = s.levels.iter().any(|l| l.wide);
            if let Some(st) = &mut s.steps {
                // This side tells the replay of its hits (`end_walk`); the latencies left are
                // the replayed levels'.
                st.lat.remove(0);
            }
        }
        self
    }

    /// Replay on a thread of their own (`on`), or on the caller's: every queued reference is
    /// applied first, so no count changes.
    pub fn set_replay_thread(&mut self, on: bool) {
        let i = self.inner.get_mut();
        i.settle();
        i.reads = 0;
        i.refs = 0;
        let state = i.take_levels();
        i.replay = match on {
            true => match super::replay_thread::ReplayThread::spawn(state) {
                Ok(t) => Replay::Thread(t),
                Err(state) => Replay::Here(state),
            },
            false => Replay::Here(state),
        };
    }

    /// Refuses a physical memory larger than the tags can name (u32 tags: 256GiB at least,
    /// far more where the sets are a power of two).
    pub fn check_memory(spec: &CacheSpec, memory: u64) -> Result<(), String> {
        for l in &spec.levels {
            let (_, _, tag_shift) = CacheLevel::shape(l, spec.line_bytes);
            let reach = ((u32::MAX as u128) << tag_shift) * spec.line_bytes as u128;
            if memory as u128 > reach {
                return Err(format!("cache level {}: its tags name physical memory up to {reach} bytes; memory {memory} is larger", l.name));
            }
        }
        Ok(())
    }

    /// Whether the levels after the first replay on a thread of their own now.
    pub fn on_replay_thread(&self) -> bool {
        matches!(self.inner.borrow().replay, Replay::Thread(_))
    }

    /// One reference to physical address `pa`, applied now. Returns the index of the level
    /// that served it (`levels.len()` = memory). The step fit (`StepFit`) reads the queue
    /// only: the engine's references, and their walks' ends, all go through `defer`.
    pub fn access(&mut self, pa: u64, who: Requester) -> usize {
        let line = pa >> self.line_shift;
        // SAFETY: WIDE = false takes no AVX2 path (the answer is the same either way).
        if unsafe { self.first_level::<false>(line, who) } {
            return 0;
        }
        let s = self.inner.get_mut().settle();
        // SAFETY: as above.
        self.first.is_some() as usize + unsafe { s.apply::<false>(line, who as usize) }
    }

    /// `line` through the first level where it runs here: whether it hit (false where it
    /// replays).
    ///
    /// # Safety
    /// With WIDE, as for `CacheLevel::access`.
    #[inline(always)]
    unsafe fn first_level<const WIDE: bool>(&mut self, line: u64, who: Requester) -> bool {
        let Some(f) = &mut self.first else { return false };
        // SAFETY: the caller's contract.
        let hit = unsafe { f.access::<WIDE, false>(line) };
        // Counted without a branch: whether a reference hits the first level is as good as
        // random here.
        f.hits[who as usize] += hit as u64;
        f.misses[who as usize] += !hit as u64;
        if who == Requester::Data {
            // A constant test where this inlines (every call site names its requester).
            self.data_hits = (self.data_hits << 1 | hit as u64) & ((1 << AHEAD_STEPS) - 1);
        }
        hit
    }

    /// One reference to physical address `pa`, queued: the levels see it, in order, before
    /// anyone reads a counter. The engine's path (nothing it decides depends on which level
    /// served a reference, only the counts do).
    #[inline(always)]
    pub fn defer(&mut self, pa: u64, who: Requester) {
        // SAFETY: WIDE = false takes no AVX2 path.
        unsafe { self.defer_in::<false>(pa, who) }
    }

    /// `defer`, with the first level's AVX2 set operations where WIDE.
    ///
    /// # Safety
    /// With WIDE, as for `CacheLevel::access`.
    #[inline(always)]
    pub unsafe fn defer_in<const WIDE: bool>(&mut self, pa: u64, who: Requester) {
        let line = pa >> self.line_shift;
        // SAFETY: the caller's contract.
        let hit = unsafe { self.first_level::<WIDE>(line, who) };
        // Queued only if it missed, without a branch: the slot is written either way and kept
        // only on a miss (a batch is never full between calls, so slot n exists).
        let i = self.inner.get_mut();
        i.batch.refs[i.batch.n] = line << 1 | who as u64;
        i.batch.n += !hit as usize;
        if i.batch.n == BATCH {
            i.flush();
        }
    }

    /// `n` more references that hit the first level (a same-page run the trace collapsed:
    /// its line addresses are gone, so they count as first-level hits; docs/RUNTIME_MODEL.md).
    #[inline(always)]
    pub fn first_level_hits(&mut self, n: u64) {
        match &mut self.first {
            Some(f) => f.hits[Requester::Data as usize] += n,
            None => self.inner.get_mut().pending_first_level_hits += n,
        }
    }

    /// The end of a walk's references, queued where the machine marks steps (`marks`): the
    /// replay then knows how long the walk took against the data misses before it (`StepFit`).
    /// With the first level on this side, the walk's hits in it and which of the last data
    /// references hit it go with the mark, since none of them was queued.
    #[inline(always)]
    pub fn end_walk(&mut self) {
        let (hits, data_hits) = match &self.first {
            Some(f) => {
                let h = f.hits[Requester::Walk as usize];
                (h - std::mem::replace(&mut self.walk_hits_at_end, h), self.data_hits)
            }
            None => (0, 0),
        };
        let i = self.inner.get_mut();
        i.batch.refs[i.batch.n] = WALK_END | hits << AHEAD_STEPS | data_hits;
        i.batch.n += 1;
        if i.batch.n == BATCH {
            i.flush();
        }
    }

    /// The marked steps' walk cycles that fit under the data misses of the 1, 2 and 3 steps
    /// before each, and their walk cycles in all (`StepFit`; 0 where the machine marks none),
    /// every queued reference applied.
    pub fn ahead_fit(&self) -> ([f64; AHEAD_STEPS], f64) {
        if !self.marks {
            // Nothing to settle for: a read here would count toward the replay thread's
            // reads-per-reference rule (`THREAD_MIN_REFS_PER_READ`) for nothing.
            return ([0.0; AHEAD_STEPS], 0.0);
        }
        let mut i = self.inner.borrow_mut();
        let rest = i.settle();
        rest.steps.as_ref().map_or(([0.0; AHEAD_STEPS], 0.0), |s| (s.fit, s.walked))
    }

    /// What each level served, first level first, and what memory served (references no level
    /// held), by requester, with every queued reference applied.
    pub fn counts(&self) -> (Vec<LevelCounts>, [u64; 2]) {
        let mut i = self.inner.borrow_mut();
        let rest = i.settle();
        let of = |l: &CacheLevel| LevelCounts { name: l.name.clone(), hits: l.hits, misses: l.misses, depth: l.depth.clone() };
        (self.first.iter().chain(&rest.levels).map(of).collect(), rest.dram)
    }

    /// References served by each level (then memory), for one requester.
    pub fn served(&self, who: Requester) -> Vec<u64> {
        let ([data, walk], _) = self.served_by_both();
        if who == Requester::Data {
            data
        } else {
            walk
        }
    }

    /// The last level's hits by depth in the set, for one requester, where it is shared
    /// (`CacheSpec::tenant_fill_rate`); empty elsewhere.
    pub fn last_level_depths(&self, who: Requester) -> Vec<u64> {
        let (_, [data, walk]) = self.served_by_both();
        if who == Requester::Data {
            data
        } else {
            walk
        }
    }

    /// `served` and `last_level_depths` for the program and the walker, in that order, from one
    /// read of the counts (each read settles the queue, waiting on the replay thread).
    pub fn served_by_both(&self) -> ([Vec<u64>; 2], [Vec<u64>; 2]) {
        let (served, depths, _) = self.served_depths_reuse(false);
        (served, depths)
    }

    /// `served_by_both`, and under the reuse law (with `reuse`) the last level's hits by depth
    /// and time since last use (`CacheLevel::reuse`), by requester; empty elsewhere.
    pub fn served_depths_reuse(&self, reuse: bool) -> (ByRequester, ByRequester, ByRequester) {
        let (served, depths, by_reuse, _) = self.served_depths_reuse_streamed(reuse);
        (served, depths, by_reuse)
    }

    /// `served_depths_reuse`, and the data references in a stream that missed the second level
    /// (`Streams`), from one read of the counts.
    pub fn served_depths_reuse_streamed(&self, reuse: bool) -> (ByRequester, ByRequester, ByRequester, u64) {
        let mut i = self.inner.borrow_mut();
        let rest = i.settle();
        let levels: Vec<&CacheLevel> = self.first.iter().chain(&rest.levels).collect();
        let served = |r: usize| levels.iter().map(|l| l.hits[r]).chain(std::iter::once(rest.dram[r])).collect();
        let depths = |r: usize| levels.last().map_or(Vec::new(), |l| l.depth.iter().map(|d| d[r]).collect());
        let by_reuse = |r: usize| if reuse { levels.last().map_or(Vec::new(), |l| l.reuse.iter().map(|d| d[r]).collect()) } else { Vec::new() };
        ([served(0), served(1)], [depths(0), depths(1)], [by_reuse(0), by_reuse(1)], rest.streams.streamed)
    }

    /// The data references in a sequential stream that missed the second level (`Streams`),
    /// every queued reference applied.
    pub fn streamed(&self) -> u64 {
        self.served_depths_reuse_streamed(false).3
    }
}

/// The translation latencies of a run that the overlap model charges beside its data misses:
/// walk references by the level that served each (`walk[i]`, as `data`), the walks, and the hits
/// in TLB levels beyond the first (`tlb_cycles` in all, `tlb_hits` of them).
#[derive(Clone, Copy, Debug, Default)]
pub struct Translation<'a> {
    pub walk: &'a [u64],
    pub walks: u64,
    /// Of `walks`, those into a sequential stream's next page (`CacheSpec::stream_ahead`).
    pub sequential: u64,
    /// Of the program's references (not a translation's, but read beside them), the misses of
    /// the second level in a sequential stream (`Streams`, `CacheSpec::stream_prefetch`).
    pub streamed: u64,
    pub tlb_cycles: f64,
    pub tlb_hits: u64,
    /// Of the dependent chain's walk cycles, the shares that fit under the data misses of the
    /// 1, 2 and 3 steps before each (`StepFit`); None where no steps were marked: the run's sums
    /// alone cap what `walk_ahead` hides.
    pub ahead_fit: Option<[f64; AHEAD_STEPS]>,
}

/// Stall cycles the caches add, from what each level served (the overlap model of
/// docs/RUNTIME_MODEL.md, "Overlap"). `data[i]`: data references served by level i (the last
/// entry: memory), `lat[i]` = `spec.latencies()[i]` their latencies. `accesses`, `instructions`:
/// of the run (instructions 0: unknown). Returns (data stall, walk stall, TLB-hit stall).
///
/// - A data reference that hits the first level costs nothing beyond `cycles_per_access` (the
///   pipeline hides an L1 hit); one served by level i stalls `lat[i] - lat[0]`: D in all.
/// - A walk reference costs its full latency, since a walk's references are a dependent chain:
///   W in all. A hit in a TLB level beyond the first costs that level's `hit_cycles`: T in all.
/// - A fraction `dependence` of each is on a dependent chain and overlaps with nothing, except
///   that a fraction `walk_ahead` of the chain's translations runs under the chain's data misses
///   (at most all of them: `walk_ahead` x min(W + T, D) is hidden, shared between W and T). Where
///   the next address is picked by branches on the loaded data (which child of a B-tree node,
///   which half of a binary search), the core predicts them and issues the next load before the
///   step before's data arrives. A wrong guess is squashed, but its translation stays in the TLB
///   (Intel SDM vol. 3A, 4.10.2.3: translations for speculative accesses may be cached), so the
///   walk is done early wherever the guess lands in the right page. A pointer chase's next
///   address is the loaded value, and nothing runs ahead of it (docs/RUNTIME_MODEL.md,
///   "Walks ahead of a dependent chain").
/// - The rest overlaps, and takes as long as the busiest of three resources:
///   - the window: an access's translation (TLB hit or walk) and its miss are one chain, and the
///     window holds `rob` instructions' worth of accesses; (D + s(W + T)) / chains in the window,
///     where s = 1 / (1 + `walk_hiding` x (chains - 1)) is the share of a translation the chain
///     shows (1 by default: all of it);
///   - the fill buffers: D / misses in the window, at most `mlp`; with `walk_fill_buffers`, the
///     walk references beyond the first level are in this term too, as long as data misses
///     served by the same level (D + W' over data and walk misses in the window);
///   - the page walkers: W / walks in the window, at most `walkers`.
/// - The data stall is what the misses alone would take (D over the fill buffers' overlap); the
///   walk stall is what walks add to that, and the TLB-hit stall what the TLB hits add after
///   them. So translations that hit the TLBs or the caches hide under data misses that fill the
///   fill buffers, and walks that reach memory make the walkers the bottleneck (measured on the
///   Zen 5 and Sapphire Rapids VMs, docs/RUNTIME_MODEL.md, "Walks under data misses").
pub fn stall_cycles(spec: &CacheSpec, data: &[u64], t: Translation, accesses: u64, instructions: u64) -> (f64, f64, f64) {
    overlap(spec, data, t, accesses, instructions).0
}

/// What bounds the overlapped part of the stalls (`stall_cycles`'s three resources, each with
/// every translation, TLB hits included): the cycles the independent misses would take under
/// the fill buffers alone, the window alone, and the page walkers alone. The largest is the
/// bound; the dependent fraction (`dependence`) is costed outside it. Which one it is, by name,
/// is for the reader of the counters (`overlap.*_cycles`; python/superpager/model/predict.py,
/// `bound`): one rule, in one place.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OverlapBounds {
    pub fill_buffers: f64,
    pub window: f64,
    pub walkers: f64,
    /// The lines read from memory at `CacheSpec::dram_line_cycles` each (0 without it): not
    /// one of the three, but a floor under the run's whole time, its work included
    /// (stats::cost_parts_of, `cycles.bandwidth`).
    pub bandwidth: f64,
}

/// `stall_cycles` and `overlap_bounds` from one pass.
pub fn stalls_and_bounds(spec: &CacheSpec, data: &[u64], t: Translation, accesses: u64, instructions: u64) -> ((f64, f64, f64), OverlapBounds) {
    overlap(spec, data, t, accesses, instructions)
}

/// `stall_cycles` and the bounds it took the busiest of (`OverlapBounds`).
pub fn overlap_bounds(spec: &CacheSpec, data: &[u64], t: Translation, accesses: u64, instructions: u64) -> OverlapBounds {
    overlap(spec, data, t, accesses, instructions).1
}

fn overlap(spec: &CacheSpec, served: &[u64], t: Translation, accesses: u64, instructions: u64) -> ((f64, f64, f64), OverlapBounds) {
    if accesses == 0 {
        return ((0.0, 0.0, 0.0), OverlapBounds::default());
    }
    // What the program's references stall: streams the prefetcher ran ahead of as the second
    // level's hits (`timed_by_prefetch`). On the stack, as the latencies are: the shared last
    // level's bisection calls this sixty times a cost.
    debug_assert!(served.len() == spec.levels.len() + 1 && served.len() <= MAX_LEVELS + 1);
    let mut timed = [0u64; MAX_LEVELS + 1];
    let data = &mut timed[..served.len()];
    data.copy_from_slice(served);
    timed_by_prefetch(spec, data, t.streamed);
    let data: &[u64] = data;
    let mut lat = [0.0f64; MAX_LEVELS + 1];
    for (b, l) in lat.iter_mut().zip(spec.levels.iter().map(|l| l.cycles).chain(std::iter::once(spec.dram_cycles))) {
        *b = l;
    }
    let lat = &lat[..spec.levels.len() + 1];
    let ipa = if instructions > 0 { instructions as f64 / accesses as f64 } else { spec.instructions_per_access };
    let window = spec.rob / ipa.max(1e-9); // accesses the window holds
                                           // References served beyond the first level, and the cycles they stall beyond its latency.
    let misses = |served: &[u64]| served[1..].iter().sum::<u64>();
    let beyond_first = |served: &[u64]| served.iter().zip(lat).skip(1).map(|(&n, &l)| n as f64 * (l - lat[0]).max(0.0)).sum::<f64>();
    let data_misses = misses(data);
    let in_flight = |events: f64, cap: f64| (window * events / accesses as f64).clamp(1.0, cap.max(1.0));
    // The window holds more of them than the resource has room for (`in_flight` capped).
    let full = |events: f64, cap: f64| window * events / accesses as f64 > cap.max(1.0);
    let d = spec.dependence.clamp(0.0, 1.0);
    let data_raw = beyond_first(data);
    // The walks a stream's run-ahead did (`stream_ahead`), at the average walk's cost, leave
    // every term: what is left of the walks' references is the rest's.
    let kept = if t.walks > 0 { 1.0 - spec.stream_ahead.clamp(0.0, 1.0) * t.sequential.min(t.walks) as f64 / t.walks as f64 } else { 1.0 };
    let walk_raw: f64 = kept * t.walk.iter().zip(lat).map(|(&n, &l)| n as f64 * l).sum::<f64>();
    let data_alone = data_raw / in_flight(data_misses as f64, spec.mlp);
    // Memory's line rate (`dram_line_cycles`): every line read from memory, the program's and
    // the walker's, streamed or not (a prefetched line is read all the same). A floor under the
    // run's whole time, work included (stats::cost_parts_of), not under its stalls alone.
    let from_memory = |r: &[u64]| r.last().copied().unwrap_or(0) as f64 * spec.dram_line_cycles.max(0.0);
    let bandwidth = from_memory(served) + from_memory(t.walk);
    let chains = in_flight(data_misses.max(t.walks).max(t.tlb_hits) as f64, window);
    let walkers = walk_raw / in_flight(t.walks as f64, spec.walkers);
    // With walk_fill_buffers, the fill buffers also hold the walk references that missed the
    // first level, each as long as a data miss served by the same level.
    let fill_events = if spec.walk_fill_buffers { data_misses + misses(t.walk) } else { data_misses } as f64;
    let fill_buffers = if spec.walk_fill_buffers { (data_raw + kept * beyond_first(t.walk)) / in_flight(fill_events, spec.mlp) } else { data_alone };
    let contended = [(fill_buffers, full(fill_events, spec.mlp)), (walkers, full(t.walks as f64, spec.walkers))];
    // The share of a translation the window's chain shows (all of it with one access in flight).
    let shown = 1.0 / (1.0 + spec.walk_hiding.max(0.0) * (chains - 1.0));
    let window_of = |translate: f64| (data_raw + translate * shown) / chains;
    let busiest = |translate: f64| combine_bounds(spec.bounds_norm, window_of(translate), contended);
    let (with_walks, with_all) = (busiest(walk_raw), busiest(walk_raw + t.tlb_cycles));
    let bounds = OverlapBounds { fill_buffers, window: window_of(walk_raw + t.tlb_cycles), walkers, bandwidth };
    let part = |raw: f64, overlapped: f64| d * raw + (1.0 - d) * overlapped;
    // The chain's translations that run under its data misses, as a share of each.
    let translate = walk_raw + t.tlb_cycles;
    let exposed = if translate > 0.0 { 1.0 - ahead_share(spec, t.ahead_fit, window) * data_raw.min(translate) / translate } else { 1.0 };
    ((part(data_raw, data_alone), part(walk_raw * exposed, with_walks - data_alone), part(t.tlb_cycles * exposed, with_all - with_walks)), bounds)
}

/// The share of a dependent chain's translations its guesses hide. A walk starts under the
/// misses of the steps since the first guess that lands in its page: k steps back with
/// probability p_k - p_(k+1) (`walk_ahead`, `walk_ahead2`, `walk_ahead3`: the chance that a
/// guess made k steps before lands in the right page; p_4 = 0), and then hides what fits under
/// those k misses (`fit[k-1]`, the step fit's share). A guess k steps ahead needs the window to
/// hold the k steps before the walk's and its own (`window`, in accesses): p_k is 0 beyond it.
/// Without step figures, `walk_ahead` alone, capped by the run's sums as before the step fit.
fn ahead_share(spec: &CacheSpec, fit: Option<[f64; AHEAD_STEPS]>, window: f64) -> f64 {
    let p1 = spec.walk_ahead.clamp(0.0, 1.0);
    let Some(fit) = fit else { return p1 };
    // Nested: a guess that lands in the right page k steps before does from k - 1 steps too.
    let held = |k: f64, p: f64| if window >= k + 1.0 { p } else { 0.0 };
    let p2 = held(2.0, spec.walk_ahead2.clamp(0.0, p1));
    let p3 = held(3.0, spec.walk_ahead3.clamp(0.0, p2));
    let p = [p1, p2, p3, 0.0];
    (0..AHEAD_STEPS).map(|k| (p[k] - p[k + 1]) * fit[k].clamp(0.0, 1.0)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(levels: &[(u64, u32)]) -> CacheSpec {
        let levels = levels
            .iter()
            .enumerate()
            .map(|(i, &(bytes, ways))| CacheLevelSpec { name: format!("L{}", i + 1), bytes, ways, cycles: [4.0, 14.0, 50.0][i] })
            .collect();
        CacheSpec { dram_cycles: 200.0, ..CacheSpec::of_levels(64, levels) }
    }

    /// A pseudo-random stream over `span` bytes: (address, requester).
    fn stream(n: u64, span: u64) -> impl Iterator<Item = (u64, Requester)> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        (0..n).map(move |i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % span, if i % 3 == 0 { Requester::Walk } else { Requester::Data })
        })
    }

    fn assert_same_counts(a: &Caches, b: &Caches) {
        for who in [Requester::Data, Requester::Walk] {
            assert_eq!(a.served(who), b.served(who));
        }
        assert_eq!(a.counts(), b.counts());
    }

    #[test]
    fn queued_references_count_exactly_as_references_applied_at_once() {
        // Three levels, small enough that a pseudo-random stream hits and misses in each; the
        // queue is read mid-batch (a partial batch) and after several full ones. Queued, the
        // levels replay on this thread and on a thread of their own, with the first level among
        // them or on this side.
        let s = spec(&[(1 << 10, 2), (1 << 13, 4), (1 << 15, 16)]);
        for (thread, here) in [(false, false), (true, false), (false, true), (true, true)] {
            let (mut now, mut queued) = (Caches::with_replay_thread(&s, false), Caches::with_replay_thread(&s, thread));
            if here {
                queued = queued.with_first_level_here();
            }
            assert_eq!(queued.on_replay_thread(), thread);
            for (i, (pa, who)) in stream(100_000, 1 << 17).enumerate() {
                now.access(pa, who);
                queued.defer(pa, who);
                if i % 7 == 0 {
                    now.first_level_hits(3);
                    queued.first_level_hits(3);
                }
                if i == 100 || i == 4_321 {
                    assert_eq!(queued.served(Requester::Data), now.served(Requester::Data), "after {i}");
                }
            }
            assert_same_counts(&now, &queued);
            assert_eq!(queued.on_replay_thread(), thread, "3 reads in 100,000 references keep the thread");
            let (levels, _) = now.counts();
            assert!(levels.iter().all(|l| l.hits[0] > 0 && l.misses[0] > 0), "the stream exercises every level");
        }
    }

    /// The first level runs as references are made and the later levels replay its misses:
    /// the counts must be those of one hierarchy applying every reference in order. Checked
    /// against a plain one written here (a Vec per set, most recent first, filled on the way),
    /// on a stream where runs of references repeat a few lines, as a nested walk's host
    /// entries do, so that the first level both hits and misses often.
    #[test]
    fn the_pipeline_counts_what_one_hierarchy_applying_every_reference_counts() {
        let levels = [(1u64 << 10, 2u32), (1 << 13, 4), (1 << 15, 16)];
        let s = spec(&levels);
        let mut plain: Vec<Vec<Vec<u64>>> = levels.iter().map(|&(b, w)| vec![Vec::new(); (b / 64 / w as u64) as usize]).collect();
        let mut plain_hits = vec![[0u64; 2]; levels.len() + 1];
        for (thread, here) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut c = Caches::with_replay_thread(&s, thread);
            if here {
                c = c.with_first_level_here();
            }
            plain.iter_mut().flatten().for_each(|set| set.clear());
            plain_hits.iter_mut().for_each(|h| *h = [0; 2]);
            let hot = [0x10_0000u64, 0x10_0040, 0x20_0000];
            for (i, (pa, who)) in stream(60_000, 1 << 17).enumerate() {
                let pa = if i % 5 < 3 { hot[i % 3] } else { pa };
                c.defer(pa, who);
                let line = pa >> 6;
                let mut served = levels.len();
                for (l, &(_, ways)) in levels.iter().enumerate() {
                    let sets = plain[l].len() as u64;
                    let set = &mut plain[l][(line % sets) as usize];
                    let hit = set.iter().position(|&x| x == line);
                    match hit {
                        Some(k) => {
                            set.remove(k);
                        }
                        None if set.len() == ways as usize => {
                            set.pop();
                        }
                        None => {}
                    }
                    set.insert(0, line);
                    if hit.is_some() {
                        served = l;
                        break;
                    }
                }
                plain_hits[served][who as usize] += 1;
            }
            for who in [Requester::Data, Requester::Walk] {
                let want: Vec<u64> = plain_hits.iter().map(|h| h[who as usize]).collect();
                assert_eq!(c.served(who), want, "{who:?}, replay thread {thread}, first level here {here}");
            }
            let (counted, _) = c.counts();
            assert!(counted[0].hits[1] > 10_000 && counted[0].misses[1] > 1_000, "the first level hits and misses: {counted:?}");
        }
    }

    /// The replay thread sleeps once it has caught up and is woken only when a quarter of its
    /// ring waits, or by a read: a read with fewer batches waiting than that, while it sleeps,
    /// must wake it and count every reference.
    #[test]
    fn a_read_wakes_a_sleeping_replay_thread() {
        // A lost wake would make a read wait forever: fail loudly instead of hanging the run.
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(std::time::Duration::from_secs(60)) {
                eprintln!("a_read_wakes_a_sleeping_replay_thread: a read waited 60 s for the replay thread (a lost wake)");
                std::process::abort();
            }
        });
        let s = spec(&[(1 << 10, 2), (1 << 13, 4)]);
        let (mut here, mut there) = (Caches::with_replay_thread(&s, false), Caches::with_replay_thread(&s, true));
        let mut refs = stream(3 * 64 * 10, 1 << 16);
        for round in 0..10 {
            // Three batches, then time for the thread to apply them and go to sleep.
            for (pa, who) in refs.by_ref().take(3 * 64) {
                here.defer(pa, who);
                there.defer(pa, who);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(there.served(Requester::Data), here.served(Requester::Data), "round {round}");
        }
        assert!(there.on_replay_thread());
        assert_same_counts(&here, &there);
        done.send(()).unwrap();
        watchdog.join().unwrap();
    }

    #[test]
    fn counters_read_often_take_the_replay_back_to_the_engines_thread() {
        let s = spec(&[(1 << 10, 2), (1 << 13, 4)]);
        let (mut here, mut there) = (Caches::with_replay_thread(&s, false), Caches::with_replay_thread(&s, true));
        for (i, (pa, who)) in stream(20_000, 1 << 16).enumerate() {
            here.defer(pa, who);
            there.defer(pa, who);
            if i % 100 == 0 {
                let _ = there.counts(); // a counter read every 100 references
            }
        }
        assert!(!there.on_replay_thread(), "64 reads at fewer than 16,384 references apart");
        assert_same_counts(&here, &there);
    }

    #[test]
    fn memories_beyond_the_u32_tags_reach_are_refused() {
        // 48KiB and 3MiB in 12 ways of 64 bytes: 64 and 4,096 sets, powers of two, so tags drop
        // the index bits. 30MiB in 12 ways: 40,960 sets, hashed, so tags are whole line numbers
        // and reach (2^32 - 1) x 64 bytes, just under 256GiB.
        let pow2 = spec(&[(48 << 10, 12), (3 << 20, 12)]);
        assert!(Caches::check_memory(&pow2, 1 << 40).is_ok(), "1TiB: within 2^32 tags of 2^12 sets");
        let hashed = spec(&[(48 << 10, 12), (30 << 20, 12)]);
        assert!(Caches::check_memory(&hashed, 255 << 30).is_ok());
        let e = Caches::check_memory(&hashed, 300 << 30).unwrap_err();
        assert!(e.contains("cache level L2") && e.contains("322122547200"), "{e}");
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
        fn walks(walk: &[u64], walks: u64) -> Translation<'_> {
            Translation { walk, walks, ..Translation::default() }
        }
        let s = spec(&[(1 << 15, 8), (1 << 20, 16)]);
        assert_eq!(s.latencies(), vec![4.0, 14.0, 200.0]);
        // 1000 accesses, 4000 instructions: the 200-instruction window holds 50 accesses.
        // 100 of them went to memory (10% miss): 5 in flight, so each costs (200-4)/5.
        let (d, w, _) = stall_cycles(&s, &[900, 0, 100], walks(&[0, 0, 0], 0), 1000, 4000);
        assert!((d - 100.0 * 196.0 / 5.0).abs() < 1e-9, "{d}");
        assert_eq!(w, 0.0);
        // Every access misses: 50 in flight, capped at mlp = 10.
        let (d, _, _) = stall_cycles(&s, &[0, 0, 1000], walks(&[0, 0, 0], 0), 1000, 4000);
        assert!((d - 1000.0 * 196.0 / 10.0).abs() < 1e-9, "{d}");
        // A pointer chase: nothing overlaps.
        let chase = CacheSpec { dependence: 1.0, ..s.clone() };
        let (d, _, _) = stall_cycles(&chase, &[0, 0, 1000], walks(&[0, 0, 0], 0), 1000, 4000);
        assert!((d - 1000.0 * 196.0).abs() < 1e-9, "{d}");
        // Walks: 1000 walks of one reference served by L2 (14 cycles each), 2 walkers.
        let (_, w, _) = stall_cycles(&s, &[1000, 0, 0], walks(&[0, 1000, 0], 1000), 1000, 4000);
        assert!((w - 1000.0 * 14.0 / 2.0).abs() < 1e-9, "{w}");
        // Every access walks (one reference, served by L2) and then misses to memory: the fill
        // buffers are the busiest, 1000 x 196 / 10 = 19600 cycles, against 1000 x 14 / 2 = 7000
        // for the walkers and 1000 x (196 + 14) / 50 = 4200 for the window. The walks hide.
        let (d, w, _) = stall_cycles(&s, &[0, 0, 1000], walks(&[0, 1000, 0], 1000), 1000, 4000);
        assert!((d - 19600.0).abs() < 1e-9 && w.abs() < 1e-9, "{d} {w}");
        // The same walks reaching memory (200 cycles): the walkers take 1000 x 200 / 2 = 100000,
        // and walks add 100000 - 19600.
        let (d, w, _) = stall_cycles(&s, &[0, 0, 1000], walks(&[0, 0, 1000], 1000), 1000, 4000);
        assert!((d - 19600.0).abs() < 1e-9 && (w - 80400.0).abs() < 1e-9, "{d} {w}");
        // Five accesses in the window, each a chain of an L2 walk and a memory miss, and 10
        // walkers: now the window is the busiest, 100 x (196 + 14) / 5 = 4200 against 100 x 196 /
        // 5 = 3920 for the misses alone, so walks add 280.
        let wide = CacheSpec { walkers: 10.0, ..s.clone() };
        let (d, w, _) = stall_cycles(&wide, &[900, 0, 100], walks(&[0, 100, 0], 100), 1000, 4000);
        assert!((d - 3920.0).abs() < 1e-9 && (w - 280.0).abs() < 1e-9, "{d} {w}");
        // On a dependent chain both are paid in full.
        let (d, w, _) = stall_cycles(&chase, &[0, 0, 1000], walks(&[0, 1000, 0], 1000), 1000, 4000);
        assert!((d - 196000.0).abs() < 1e-9 && (w - 14000.0).abs() < 1e-9, "{d} {w}");
        // No walks, but every access hits the second-level TLB (9 cycles) and misses to memory:
        // the window takes 1000 x (196 + 9) / 50 = 4100, under the fill buffers' 19600, so the TLB
        // hits add nothing; on a dependent chain they add their 9000 in full.
        let hits = Translation { walk: &[0, 0, 0], walks: 0, sequential: 0, streamed: 0, tlb_cycles: 9000.0, tlb_hits: 1000, ahead_fit: None };
        let (d, w, t) = stall_cycles(&s, &[0, 0, 1000], hits, 1000, 4000);
        assert!((d - 19600.0).abs() < 1e-9 && w == 0.0 && t.abs() < 1e-9, "{d} {w} {t}");
        let (_, _, t) = stall_cycles(&chase, &[0, 0, 1000], hits, 1000, 4000);
        assert!((t - 9000.0).abs() < 1e-9, "{t}");
        // All L1 hits: the window is the busiest, 1000 x 9 / 50 = 180 cycles of TLB hits.
        let (_, _, t) = stall_cycles(&s, &[1000, 0, 0], hits, 1000, 4000);
        assert!((t - 180.0).abs() < 1e-9, "{t}");
    }

    #[test]
    fn a_dependent_chain_walks_ahead_under_its_misses_where_its_branches_are_predicted() {
        let s = spec(&[(1 << 15, 8), (1 << 20, 16)]);
        let chase = CacheSpec { dependence: 1.0, ..s.clone() };
        let descent = CacheSpec { walk_ahead: 0.5, ..chase.clone() };
        // 1000 steps, each a walk of one L2 reference (14 cycles) and a memory miss (196 beyond
        // L1): a chase pays 14000 for its walks. A descent whose guesses land in the right page
        // half the time hides half of them under its 196000 of misses: 7000 remain.
        let w1 = Translation { walk: &[0, 1000, 0], walks: 1000, ..Translation::default() };
        let (d, w, _) = stall_cycles(&chase, &[0, 0, 1000], w1, 1000, 4000);
        assert!((d - 196000.0).abs() < 1e-9 && (w - 14000.0).abs() < 1e-9, "{d} {w}");
        let (d, w, _) = stall_cycles(&descent, &[0, 0, 1000], w1, 1000, 4000);
        assert!((d - 196000.0).abs() < 1e-9 && (w - 7000.0).abs() < 1e-9, "{d} {w}");
        // Misses only to L2 (10 cycles beyond L1: 10000 in all) under walks of 14000 and TLB hits
        // of 6000: at most the 10000 of misses can hide, half of it here, shared 14:6 between
        // walks and TLB hits: 14000 - 3500 and 6000 - 1500.
        let both = Translation { walk: &[0, 1000, 0], walks: 1000, sequential: 0, streamed: 0, tlb_cycles: 6000.0, tlb_hits: 1000, ahead_fit: None };
        let (d, w, t) = stall_cycles(&descent, &[0, 1000, 0], both, 1000, 4000);
        assert!((d - 10000.0).abs() < 1e-9 && (w - 10500.0).abs() < 1e-9 && (t - 4500.0).abs() < 1e-9, "{d} {w} {t}");
        // Independent misses (dependence 0) are not changed by it.
        let free = CacheSpec { walk_ahead: 1.0, ..s.clone() };
        assert_eq!(stall_cycles(&free, &[0, 0, 1000], w1, 1000, 4000), stall_cycles(&s, &[0, 0, 1000], w1, 1000, 4000));
    }

    #[test]
    fn a_walk_ahead_hides_only_what_fits_under_the_miss_just_before_it() {
        let s = spec(&[(1 << 15, 8), (1 << 20, 16)]);
        let descent = CacheSpec { dependence: 1.0, walk_ahead: 0.5, ..s.clone() };
        // As in the test above, 1000 steps of an L2 walk reference (14000) and a memory miss
        // (196000), of which a quarter of the walks' cycles fit step by step under the miss
        // before: 0.5 x 0.25 x 14000 = 1750 hide, 12250 remain (7000 from the sums alone).
        let w1 = Translation { walk: &[0, 1000, 0], walks: 1000, ahead_fit: Some([0.25, 0.5, 1.0]), ..Translation::default() };
        let (d, w, _) = stall_cycles(&descent, &[0, 0, 1000], w1, 1000, 4000);
        assert!((d - 196000.0).abs() < 1e-9 && (w - 12250.0).abs() < 1e-9, "{d} {w}");
        // Every walk fits: the sums' cap, as without the fit.
        let whole = Translation { ahead_fit: Some([1.0; AHEAD_STEPS]), ..w1 };
        let (_, w, _) = stall_cycles(&descent, &[0, 0, 1000], whole, 1000, 4000);
        assert!((w - 7000.0).abs() < 1e-9, "{w}");
        // Guesses two and three steps back land in the right page 0.3 and 0.1 of the time: the
        // walk starts one step back 0.2 of the time (fits 0.25), two 0.2 (0.5), three 0.1 (all):
        // 0.05 + 0.1 + 0.1 = 0.25 of 14000 hide, 10500 remain.
        let deeper = CacheSpec { walk_ahead2: 0.3, walk_ahead3: 0.1, ..descent.clone() };
        let (_, w, _) = stall_cycles(&deeper, &[0, 0, 1000], w1, 1000, 4000);
        assert!((w - 10500.0).abs() < 1e-9, "{w}");
        // A window of 3 accesses (rob 12, 4 instructions an access) holds the walk's step and two
        // before it, not three: 0.2 x 0.25 + 0.3 x 0.5 = 0.2 of 14000 hide, 11200 remain.
        let short = CacheSpec { rob: 12.0, ..deeper.clone() };
        let (_, w, _) = stall_cycles(&short, &[0, 0, 1000], w1, 1000, 4000);
        assert!((w - 11200.0).abs() < 1e-9, "{w}");
        // Without step figures the deeper marks change nothing: walk_ahead and the sums.
        let plain = Translation { ahead_fit: None, ..w1 };
        assert_eq!(stall_cycles(&deeper, &[0, 0, 1000], plain, 1000, 4000), stall_cycles(&descent, &[0, 0, 1000], plain, 1000, 4000));
    }

    /// The step fit of a short chain, worked by hand, through `defer` and `end_walk` (L1 4
    /// cycles, L2 14, memory 200: a data reference from memory stalls 196).
    fn step_fit_of(c: &mut Caches) -> ([f64; AHEAD_STEPS], f64) {
        let line = |i: u64| i << 20; // lines far apart: each new one comes from memory
        c.defer(line(1), Requester::Data); // a miss: 196
        c.defer(line(2), Requester::Walk); // a walk from memory: 200, after a miss of 196
        c.end_walk(); // fits 196 of its 200
        c.defer(line(3), Requester::Data); // a miss: 196
        c.defer(line(2), Requester::Walk); // the same entry, now in L1: 4
        c.end_walk(); // fits all 4
        c.defer(line(1), Requester::Data); // an L1 hit: no stall
        c.defer(line(4), Requester::Walk); // 200, after a data reference that stalled nothing
        c.end_walk(); // fits nothing
        c.defer(line(5), Requester::Data);
        c.ahead_fit()
    }

    #[test]
    fn a_chains_walk_fits_step_by_step_under_the_miss_before_it_wherever_its_levels_replay() {
        let s = CacheSpec { dependence: 1.0, walk_ahead: 0.5, ..spec(&[(1 << 15, 8), (1 << 20, 16)]) };
        for (thread, here) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut c = Caches::with_replay_thread(&s, thread);
            if here {
                c = c.with_first_level_here();
            }
            assert!(c.marks);
            // Of 200 + 4 + 200 walk cycles, one step back: 196 + 4 + 0; two: 196 + 4 + 196 (the
            // hit, then the second miss); three: 196 + 4 + 200 (0 + 196 + 196 before it).
            assert_eq!(step_fit_of(&mut c), ([200.0, 396.0, 400.0], 404.0), "thread {thread}, first level here {here}");
        }
        // A machine that walks nothing ahead marks no steps (end_walk is the engine's to skip).
        let none = Caches::new(&CacheSpec { walk_ahead: 0.0, ..s.clone() });
        assert!(!none.marks);
        assert_eq!(none.ahead_fit(), ([0.0; AHEAD_STEPS], 0.0));
    }

    #[test]
    fn a_bounds_norm_softens_the_window_against_full_resources_only() {
        let full = |b: f64| (b, true);
        let room = |b: f64| (b, false);
        assert_eq!(combine_bounds(None, 3.0, [full(4.0), room(1.0)]), 4.0, "no norm: the largest");
        assert!((combine_bounds(Some(2.0), 3.0, [full(4.0), room(1.0)]) - 5.0).abs() < 1e-12, "the 2-norm of 3 and 4");
        assert_eq!(combine_bounds(Some(2.0), 3.0, [room(4.0), room(2.0)]), 4.0, "resources with room: the largest");
        assert!((combine_bounds(Some(1.0), 3.0, [full(4.0), full(2.0)]) - 9.0).abs() < 1e-12, "the 1-norm: the sum");
        assert_eq!(combine_bounds(Some(2.0), 0.0, [full(0.0), room(0.0)]), 0.0, "nothing to overlap");
        // Never below the largest, even where the largest has room.
        assert_eq!(combine_bounds(Some(2.0), 3.0, [full(1.0), room(10.0)]), 10.0);
        // Huge bounds do not overflow (scaled by the largest).
        assert!((combine_bounds(Some(8.0), 1e300, [full(1e300), room(0.0)]) / 1e300 - 2f64.powf(1.0 / 8.0)).abs() < 1e-12);
        // In the model: 1000 accesses, a 200-instruction window of 50, each a walk of one L2
        // reference (14 cycles: W = 14000) and a miss to memory (196 beyond L1: D = 196000),
        // mlp 4 and 10 walkers. Fill buffers D / 4 = 49000 (full: 50 misses for 4); window
        // (D + W) / 50 = 4200; walkers W / 10 = 1400 (full: 50 walks for 10). The largest,
        // 49000, is all the data's, and walks add nothing; under p = 2 the stall is
        // sqrt(49000^2 + 4200^2 + 1400^2) = 49199.6, and walks add the 199.6 beyond the data's.
        let s = CacheSpec { mlp: 4.0, walkers: 10.0, ..spec(&[(1 << 15, 8), (1 << 20, 16)]) };
        let w1 = Translation { walk: &[0, 1000, 0], walks: 1000, ..Translation::default() };
        let (d, w, _) = stall_cycles(&s, &[0, 0, 1000], w1, 1000, 4000);
        assert!((d - 49000.0).abs() < 1e-9 && w.abs() < 1e-9, "{d} {w}");
        let soft = CacheSpec { bounds_norm: Some(2.0), ..s.clone() };
        let (d, w, _) = stall_cycles(&soft, &[0, 0, 1000], w1, 1000, 4000);
        let want = (49000f64.powi(2) + 4200f64.powi(2) + 1400f64.powi(2)).sqrt() - 49000.0;
        assert!((d - 49000.0).abs() < 1e-9 && (w - want).abs() < 1e-9 && (w - 199.6).abs() < 0.1, "{d} {w}");
        // The bounds themselves do not change: they are what each resource alone would take.
        assert_eq!(overlap_bounds(&soft, &[0, 0, 1000], w1, 1000, 4000), overlap_bounds(&s, &[0, 0, 1000], w1, 1000, 4000));
        // With room in both (mlp and walkers 100 for 50 in flight) the window's 4200 is the
        // stall, norm or not: nothing queues.
        let roomy = CacheSpec { mlp: 100.0, walkers: 100.0, ..soft.clone() };
        let (d, w, _) = stall_cycles(&roomy, &[0, 0, 1000], w1, 1000, 4000);
        assert!((d + w - 4200.0).abs() < 1e-9, "{d} {w}");
        // A dependent chain pays everything in full, norm or not.
        let chase = CacheSpec { dependence: 1.0, ..soft.clone() };
        assert_eq!(stall_cycles(&chase, &[0, 0, 1000], w1, 1000, 4000), stall_cycles(&CacheSpec { dependence: 1.0, ..s }, &[0, 0, 1000], w1, 1000, 4000));
    }

    #[test]
    fn the_overlap_bounds_name_the_resource_the_independent_stalls_take() {
        // 1000 accesses, 4000 instructions, a 200-instruction window (50 accesses in it), each
        // walking (one memory reference, 200 cycles: W = 200000) and missing to memory (196
        // beyond L1: D = 196000). Window: (D + W) / 50 = 7920. Fill buffers: D / min(50, mlp).
        // Walkers: W / min(50, walkers).
        let base = spec(&[(1 << 15, 8), (1 << 20, 16)]);
        let w1 = Translation { walk: &[0, 0, 1000], walks: 1000, ..Translation::default() };
        type Term = fn(&OverlapBounds) -> f64; // which of the three a case makes the busiest
        let cases: [(CacheSpec, &str, Term, f64); 3] = [
            (CacheSpec { mlp: 100.0, walkers: 100.0, ..base.clone() }, "window", |b| b.window, 7920.0),
            (CacheSpec { mlp: 2.0, walkers: 100.0, ..base.clone() }, "fill_buffers", |b| b.fill_buffers, 98000.0),
            (CacheSpec { mlp: 100.0, walkers: 1.0, ..base.clone() }, "walkers", |b| b.walkers, 200000.0),
        ];
        for (s, name, of, busiest) in cases {
            let b = overlap_bounds(&s, &[0, 0, 1000], w1, 1000, 4000);
            assert!((of(&b) - busiest).abs() < 1e-6, "{name} is the busiest: {b:?}");
            let largest = b.fill_buffers.max(b.window).max(b.walkers);
            assert!((largest - busiest).abs() < 1e-6, "{name}: {largest}");
            // With nothing dependent, the stalls are exactly the busiest resource's time.
            let (d, w, t) = stall_cycles(&s, &[0, 0, 1000], w1, 1000, 4000);
            assert!((d + w + t - largest).abs() < 1e-6, "{name}: {d} + {w} + {t} against {largest}");
        }
        assert_eq!(overlap_bounds(&base, &[1000, 0, 0], Translation::default(), 1000, 4000), OverlapBounds::default(), "every access an L1 hit");
    }

    #[test]
    fn walks_into_a_streams_next_page_leave_the_stalls_as_stream_ahead_says() {
        // As below: 50 accesses in the window, each walking (W = 14000) and missing to memory
        // (D = 196000); the window is the busiest and walks add (D + W) / 50 - D / 50 = 280.
        let s = CacheSpec { mlp: 100.0, walkers: 100.0, ..spec(&[(1 << 15, 8), (1 << 20, 16)]) };
        let t = Translation { walk: &[0, 1000, 0], walks: 1000, sequential: 250, ..Translation::default() };
        let walk = |s: &CacheSpec| stall_cycles(s, &[0, 0, 1000], t, 1000, 4000).1;
        assert!((walk(&s) - 280.0).abs() < 1e-9, "stream_ahead 0: every walk costs");
        // stream_ahead 1: the 250 sequential walks leave, 3/4 of W is left: 10500 / 50.
        assert!((walk(&CacheSpec { stream_ahead: 1.0, ..s.clone() }) - 210.0).abs() < 1e-9);
        // 0.5: half of them leave, 7/8 of W: 12250 / 50.
        assert!((walk(&CacheSpec { stream_ahead: 0.5, ..s.clone() }) - 245.0).abs() < 1e-9);
        // On a dependent chain the walk stall is W itself, cut the same way.
        let chain = CacheSpec { dependence: 1.0, stream_ahead: 1.0, ..s.clone() };
        assert!((walk(&chain) - 10500.0).abs() < 1e-9, "{}", walk(&chain));
        // No sequential walks: nothing leaves, whatever the machine does ahead.
        let none = Translation { sequential: 0, ..t };
        assert_eq!(
            stall_cycles(&CacheSpec { stream_ahead: 1.0, ..s.clone() }, &[0, 0, 1000], none, 1000, 4000),
            stall_cycles(&s, &[0, 0, 1000], none, 1000, 4000)
        );
        // The data stall is the misses' alone either way.
        assert_eq!(
            stall_cycles(&CacheSpec { stream_ahead: 1.0, ..s.clone() }, &[0, 0, 1000], t, 1000, 4000).0,
            stall_cycles(&s, &[0, 0, 1000], t, 1000, 4000).0
        );
    }

    #[test]
    fn a_full_window_hides_part_of_each_translation_as_walk_hiding_says() {
        // 1000 accesses, 4000 instructions, a 200-instruction window: 50 accesses in it. Misses
        // and walkers never run short (100 each), so the window is the busiest. Each access walks
        // (one L2 reference, 14 cycles: W = 14000) and misses to memory (196 beyond L1: D =
        // 196000). The chain model: (D + W) / 50 = 4200 against D / 50 = 3920: walks add 280.
        let s = CacheSpec { mlp: 100.0, walkers: 100.0, ..spec(&[(1 << 15, 8), (1 << 20, 16)]) };
        let w1 = Translation { walk: &[0, 1000, 0], walks: 1000, ..Translation::default() };
        let (d, w, _) = stall_cycles(&s, &[0, 0, 1000], w1, 1000, 4000);
        assert!((d - 3920.0).abs() < 1e-9 && (w - 280.0).abs() < 1e-9, "{d} {w}");
        // walk_hiding 1: the chain shows 1 / (1 + 49) of W, 280 cycles, so walks add 280 / 50.
        let (_, w, _) = stall_cycles(&CacheSpec { walk_hiding: 1.0, ..s.clone() }, &[0, 0, 1000], w1, 1000, 4000);
        assert!((w - 5.6).abs() < 1e-9, "{w}");
        // walk_hiding 0.5: 1 / (1 + 24.5) of W shows: 14000 / 25.5 / 50.
        let (_, w, _) = stall_cycles(&CacheSpec { walk_hiding: 0.5, ..s.clone() }, &[0, 0, 1000], w1, 1000, 4000);
        assert!((w - 14000.0 / 25.5 / 50.0).abs() < 1e-9, "{w}");
        // One access in the window (4 instructions' room): nothing to hide under, all of W shows.
        let narrow = CacheSpec { rob: 4.0, ..s.clone() };
        let (_, w, _) = stall_cycles(&CacheSpec { walk_hiding: 1.0, ..narrow.clone() }, &[0, 0, 1000], w1, 1000, 4000);
        assert!((w - 14000.0).abs() < 1e-9, "{w}");
        assert_eq!(
            stall_cycles(&narrow, &[0, 0, 1000], w1, 1000, 4000),
            stall_cycles(&CacheSpec { walk_hiding: 1.0, ..narrow.clone() }, &[0, 0, 1000], w1, 1000, 4000)
        );
        // The walkers still bound the walks: with 2 of them, 14000 / 2 = 7000 whatever is hidden.
        let few = CacheSpec { walkers: 2.0, walk_hiding: 1.0, ..s.clone() };
        let (_, w, _) = stall_cycles(&few, &[0, 0, 1000], w1, 1000, 4000);
        assert!((w - (7000.0 - 3920.0)).abs() < 1e-9, "{w}");
    }

    #[test]
    fn walk_loads_beyond_the_first_level_share_the_fill_buffers_where_the_core_says_so() {
        let walks = |walk| Translation { walk, walks: 1000, ..Translation::default() };
        // 10 walkers, so that the walkers are never the busiest here; 1000 accesses, 50 in the
        // window, each walking (one reference) and then missing to memory (196 beyond L1).
        let off = CacheSpec { walkers: 10.0, ..spec(&[(1 << 15, 8), (1 << 20, 16)]) };
        let on = CacheSpec { walk_fill_buffers: true, ..off.clone() };
        // Walk references served by L2: without the key the fill buffers hold the misses alone,
        // 1000 x 196 / 10 = 19600, and the walks hide. With it they also hold each walk
        // reference for 14 - 4 cycles: (196000 + 10000) / 10 = 20600, so walks add 1000.
        let (d, w, _) = stall_cycles(&off, &[0, 0, 1000], walks(&[0, 1000, 0]), 1000, 4000);
        assert!((d - 19600.0).abs() < 1e-9 && w.abs() < 1e-9, "{d} {w}");
        let (d, w, _) = stall_cycles(&on, &[0, 0, 1000], walks(&[0, 1000, 0]), 1000, 4000);
        assert!((d - 19600.0).abs() < 1e-9 && (w - 1000.0).abs() < 1e-9, "{d} {w}");
        // Walk references served by memory: the walkers take 1000 x 200 / 10 = 20000, the fill
        // buffers with the walks (196000 + 196000) / 10 = 39200: 4KB pages' walks double the run.
        let (_, w, _) = stall_cycles(&off, &[0, 0, 1000], walks(&[0, 0, 1000]), 1000, 4000);
        assert!((w - 400.0).abs() < 1e-9, "{w}");
        let (_, w, _) = stall_cycles(&on, &[0, 0, 1000], walks(&[0, 0, 1000]), 1000, 4000);
        assert!((w - 19600.0).abs() < 1e-9, "{w}");
        // Walk references that hit L1 take no fill buffer.
        let (_, w, _) = stall_cycles(&on, &[0, 0, 1000], walks(&[1000, 0, 0]), 1000, 4000);
        assert!(w.abs() < 1e-9, "{w}");
    }
}
