//! `romer:VARIANT`: Romer, Ohlrich, Karlin and Bershad, "Reducing TLB and Memory Overhead Using
//! Online Superpage Promotion" (ISCA 1995). Superpages are made by *copying* a region into
//! fresh contiguous memory, in the software TLB-miss handler, once the misses a superpage would
//! have saved pay for the copy (a ski-rental argument). docs/ROMER.md describes each rule and
//! constant as modelled.
//!
//! Variants (§5, Table 3):
//! - `fixed` (size=SIZE): one page size from the start, no promotion (FIXED 4KB/16KB/64KB);
//! - `asap`: promote a potential superpage as soon as all its base pages were referenced;
//! - `asap-4-64`: only 4KB and 64KB; promote a 64KB region once half its pages were referenced;
//! - `approx-online`: prefetch charges only; promote at prefetch >= 0.125R, then take the
//!   threshold off every larger potential superpage containing it;
//! - `online`: prefetch and capacity charges; promote at prefetch > 0.125R or capacity >
//!   0.625R; take prefetch(P) off the larger ones and reset their capacity charges;
//! - `offline`: the greedy, iterative approximation of the best static set of superpages,
//!   planned over the whole trace before the run (offline.rs).
//!
//! R = promotion cost / miss cost = (3000 cycles per KB copied x KB) / 30 cycles (§4.3), so 100
//! per KB of superpage. Every decision is counted with its reason (`counters`).

pub mod offline;
pub mod stack;
pub mod tree;

use super::{parse_sizes, FaultDecision, FaultInfo, Features, Params, Policy, Sys};
use crate::error::{Error, Result};
use crate::fasthash::FastMap;
use crate::os::compact::{CollapseLimits, CollapseResult};
use crate::units::PageSize;
use stack::{EvictedStack, SegmentOf};
use tree::{Geometry, Segments, GROUPS};

/// Copy cost of a promotion: 3,000 cycles per KB copied, instructions plus cache-miss stalls
/// (Romer et al. §4.3).
pub const COPY_CYCLES_PER_KIB: f64 = 3000.0;
/// Baseline TLB-miss cost: 30 cycles (Romer et al. §4.3, Table 3).
pub const MISS_CYCLES: f64 = 30.0;
/// Promotion thresholds in units of R, calibrated on OFFLINE's unpromoted candidates: 99% of
/// prefetch charges below 0.125R, 99% of capacity charges below 0.625R (§4.3).
pub const PREFETCH_THRESHOLD: f64 = 0.125;
pub const CAPACITY_THRESHOLD: f64 = 0.625;
/// Per-miss bookkeeping beyond the 30-cycle handler (Table 3: APPROX-ONLINE 130 = 30 + 100;
/// ONLINE 2600 = 30 + 100 + 2470).
pub const APPROX_BOOKKEEPING_CYCLES: u64 = 100;
pub const ONLINE_BOOKKEEPING_CYCLES: u64 = 2570;
/// Appendix A: charges propagate eagerly to superpages up to 64KB and are deferred above.
pub const DEFER_FROM: u64 = 64 << 10;

pub const PARAMS: &str = "VARIANT: fixed | asap | asap-4-64 | approx-online | online | offline (romer:online); \
size=SIZE (fixed: the page size; default the base page); \
sizes=S1+S2+... (superpage sizes to use; default every size of the machine; asap-4-64 uses 64KiB only); \
threshold=F (prefetch threshold in units of R; default 0.125); capacity_threshold=F (online; default 0.625); \
copy_cycles_per_kib=C (default 3000) and miss_cycles=M (default 30): R = C x KB / M; \
bookkeeping_cycles=B (per-miss cost beyond the handler; default 100 approx-online, 2570 online, 0 otherwise); \
defer=true|false (Appendix A's deferred counters above 64KB; default true; results are the same either way); \
passes=N (offline: at most N planning passes; default 8); \
past_vma=true (a promotion may reach past its VMA into unmapped address space, as the paper's address-range model; default false: inside one VMA); \
capacity_scan=auto|linear|indexed (online: visit the eviction stack entry by entry, or count its deep part from order statistics; same results; default auto: indexed when the largest page holds 16384 base pages or more)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Fixed,
    Asap,
    Asap464,
    ApproxOnline,
    Online,
    Offline,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Fixed => "fixed",
            Variant::Asap => "asap",
            Variant::Asap464 => "asap-4-64",
            Variant::ApproxOnline => "approx-online",
            Variant::Online => "online",
            Variant::Offline => "offline",
        }
    }
    const ALL: [Variant; 6] = [Variant::Fixed, Variant::Asap, Variant::Asap464, Variant::ApproxOnline, Variant::Online, Variant::Offline];
}

/// What the miss handler charges and promotes on. OFFLINE's planning passes charge like
/// ONLINE but never promote; its final run promotes nothing at misses (its pages are made at
/// their first touch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    None,
    Asap,
    Asap464,
    Approx,
    Online,
    Measure,
}

#[derive(Default, Clone)]
struct Counters {
    misses: u64,
    untracked: u64,
    prefetch_charges: u64,
    capacity_charges: u64,
    capacity_scan_steps: u64,
    capacity_scan_counted: u64,
    deferred_charges: u64,
    flushes: u64,
    promoted: Vec<u64>,
    promote_failed: [u64; CollapseResult::ALL.len()],
    copied_bytes: u64,
    demotions_seen: u64,
    /// Reasons (see `why_not`) per level, of segments already gone.
    why: Vec<[u64; 4]>,
}

pub struct Romer {
    variant: Variant,
    mode: Mode,
    /// Machine size index of each level; level 0 is the base page.
    levels: Vec<u32>,
    /// Level of each machine size index (None: not a size this policy uses).
    level_of_si: Vec<Option<usize>>,
    sizes: Vec<PageSize>,
    segs: Segments,
    fixed_si: u32,
    /// Thresholds per level, in charges (0 for level 0): APPROX-ONLINE promotes when prefetch
    /// reaches its threshold, ONLINE when a charge exceeds one.
    thr_prefetch: Vec<u64>,
    thr_capacity: Vec<u64>,
    bookkeeping: u64,
    /// Deferred counters from this level up (None: eager everywhere).
    defer_level: Option<usize>,
    /// Entries of each eviction group's TLB (0 until the first miss tells).
    group_entries: [u32; GROUPS],
    /// ONLINE: the translations below the TLB, per group, and those in it.
    stacks: Vec<EvictedStack>,
    residents: [Vec<u64>; GROUPS],
    resident_at: [FastMap<u64, u32>; GROUPS],
    epoch: u32,
    /// Scratch lists (kept to avoid allocating per miss).
    touched: Vec<(u32, u32)>,
    fresh_roots: Vec<(u32, u32)>,
    candidates: Vec<(usize, usize)>,
    /// ONLINE: count the deep part of capacity scans from order statistics (`capacity_scan=`;
    /// None: when the largest page holds at least `INDEX_SCAN_FROM` base pages).
    index_scan: Option<bool>,
    asid_of: FastMap<usize, u16>,
    /// OFFLINE: the superpages to make at first touch, per address space: (start, level).
    plan: Option<offline::Plan>,
    planning_passes: u32,
    /// OFFLINE: still planning (each pass a run of the whole trace, `end_offline_pass`).
    planning: bool,
    /// The parameters this policy was built from: OFFLINE starts each pass afresh from them.
    params: Params,
    /// OFFLINE's run: bytes of planned superpages made by the last fault, whose copy the next
    /// miss charges (the fault and its miss are one handler invocation).
    pending_copy: u64,
    /// OFFLINE's planning: the prefetch-charged chain of this miss (segment, va, lowest level),
    /// which the capacity charges skip so that no miss is counted twice for one superpage.
    exclude: Option<(usize, u64, usize)>,
    copy_cycles_per_kib: f64,
    miss_cycles: f64,
    /// OFFLINE's planning: charges of segments already gone (unmapped, exited).
    harvest: offline::Charges,
    /// OFFLINE: planning passes run before this run.
    pub offline_passes: u32,
    /// Promotions may reach past their VMA into unmapped address space (the paper's
    /// potential superpages are address ranges); by default a superpage stays inside one VMA,
    /// as an OS must map only valid addresses.
    past_vma: bool,
    /// Parameters given besides the variant and `fixed`'s size (sorted), for `name`.
    given: Vec<(String, String)>,
    c: Counters,
}

/// romer's parameters (`romer:VARIANT,key=value,...`, each described in `PARAMS`).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RomerParams {
    #[serde(rename = "_")]
    bare: Option<String>,
    variant: Option<String>,
    size: Option<String>,
    /// Read by `parse_sizes`.
    #[allow(dead_code)]
    sizes: Option<String>,
    #[serde(deserialize_with = "crate::spec::non_negative")]
    threshold: f64,
    #[serde(deserialize_with = "crate::spec::non_negative")]
    capacity_threshold: f64,
    #[serde(deserialize_with = "crate::spec::non_negative")]
    copy_cycles_per_kib: f64,
    #[serde(deserialize_with = "crate::spec::non_negative")]
    miss_cycles: f64,
    /// Default: the variant's (Table 3).
    #[serde(deserialize_with = "non_negative_some")]
    bookkeeping_cycles: Option<f64>,
    defer: bool,
    #[serde(deserialize_with = "crate::spec::non_negative")]
    passes: f64,
    past_vma: bool,
    capacity_scan: CapacityScan,
}

fn non_negative_some<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    crate::spec::non_negative(d).map(Some)
}

/// How the capacity scan finds its candidates: by the segment index, by a linear pass, or
/// whichever is cheaper for the run (`auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum CapacityScan {
    Auto,
    Linear,
    Indexed,
}

impl Default for RomerParams {
    fn default() -> Self {
        RomerParams {
            bare: None,
            variant: None,
            size: None,
            sizes: None,
            threshold: PREFETCH_THRESHOLD,
            capacity_threshold: CAPACITY_THRESHOLD,
            copy_cycles_per_kib: COPY_CYCLES_PER_KIB,
            miss_cycles: MISS_CYCLES,
            bookkeeping_cycles: None,
            defer: true,
            passes: 8.0,
            past_vma: false,
            capacity_scan: CapacityScan::Auto,
        }
    }
}

pub fn build(params: &Params, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    Ok(Box::new(Romer::from_params(params, sizes)?))
}

impl Romer {
    pub fn from_params(params: &Params, sizes: &[PageSize]) -> Result<Romer> {
        let p: RomerParams = crate::spec::from_params("policy", "romer", params)?;
        let names: Vec<&str> = Variant::ALL.iter().map(|v| v.name()).collect();
        let vname = p
            .variant
            .as_ref()
            .or(p.bare.as_ref())
            .ok_or_else(|| Error::usage(format!("policy romer needs a variant: romer:VARIANT with VARIANT one of {}", names.join(", "))))?;
        let variant = Variant::ALL
            .iter()
            .copied()
            .find(|v| v.name() == vname)
            .ok_or_else(|| Error::usage(format!("policy romer: unknown variant '{vname}' (known: {})", names.join(", "))))?;
        let mut levels = parse_sizes("romer", params, sizes)?;
        let mut fixed_si = 0;
        match variant {
            Variant::Asap464 => {
                let k64 = PageSize::parse("64KiB").expect("a valid size");
                let si = sizes
                    .iter()
                    .position(|&s| s == k64)
                    .ok_or_else(|| Error::usage("policy romer:asap-4-64 needs a machine with 64KiB pages (romer95 has every power of two)".to_string()))?;
                if params.contains_key("sizes") {
                    return Err(Error::usage("policy romer:asap-4-64 uses 64KiB pages only; sizes= does not apply".to_string()));
                }
                levels = vec![0, si as u32];
            }
            Variant::Fixed => {
                if let Some(s) = &p.size {
                    let p = PageSize::parse(s).map_err(|m| Error::usage(format!("policy romer: size: {m}")))?;
                    fixed_si = sizes.iter().position(|&x| x == p).ok_or_else(|| {
                        let have: Vec<String> = sizes.iter().map(|p| p.to_string()).collect();
                        Error::usage(format!("policy romer:fixed: this machine has no {p} pages (it has {})", have.join(", ")))
                    })? as u32;
                }
            }
            _ => {}
        }
        if p.size.is_some() && variant != Variant::Fixed {
            return Err(Error::usage(format!("policy romer:{}: size= is for romer:fixed", variant.name())));
        }
        let (thr, cthr, copy, miss) = (p.threshold, p.capacity_threshold, p.copy_cycles_per_kib, p.miss_cycles);
        if miss <= 0.0 {
            return Err(Error::usage("policy romer: miss_cycles must be positive".to_string()));
        }
        let default_bk = match variant {
            Variant::ApproxOnline => APPROX_BOOKKEEPING_CYCLES,
            Variant::Online => ONLINE_BOOKKEEPING_CYCLES,
            _ => 0,
        };
        let bookkeeping = p.bookkeeping_cycles.unwrap_or(default_bk as f64) as u64;
        let defer = p.defer;
        let passes = p.passes as u32;
        let past_vma = p.past_vma;
        let index_scan = match p.capacity_scan {
            CapacityScan::Auto => None,
            CapacityScan::Linear => Some(false),
            CapacityScan::Indexed => Some(true),
        };
        let shifts: Vec<u32> = levels.iter().map(|&si| sizes[si as usize].shift()).collect();
        // R for a page of `level`: copy cost of the whole page over the miss cost (§4.3).
        let r = |l: usize| copy * (1u64 << (shifts[l] - 10)) as f64 / miss;
        let thr_prefetch: Vec<u64> = (0..levels.len()).map(|l| if l == 0 { 0 } else { (thr * r(l)).ceil().max(1.0) as u64 }).collect();
        let thr_capacity: Vec<u64> = (0..levels.len()).map(|l| if l == 0 { 0 } else { (cthr * r(l)).ceil().max(1.0) as u64 }).collect();
        let defer_level = if defer { (1..levels.len()).find(|&l| sizes[levels[l] as usize].bytes() >= DEFER_FROM) } else { None };
        let mut level_of_si = vec![None; sizes.len()];
        for (l, &si) in levels.iter().enumerate() {
            level_of_si[si as usize] = Some(l);
        }
        let mode = match variant {
            Variant::Fixed => Mode::None,
            Variant::Asap => Mode::Asap,
            Variant::Asap464 => Mode::Asap464,
            Variant::ApproxOnline => Mode::Approx,
            Variant::Online => Mode::Online,
            Variant::Offline => Mode::Measure,
        };
        let n = levels.len();
        let offline = variant == Variant::Offline;
        let mut r = Romer {
            variant,
            mode,
            sizes: sizes.to_vec(),
            segs: Segments::new(Geometry::new(&shifts)),
            levels,
            level_of_si,
            fixed_si,
            thr_prefetch,
            thr_capacity,
            bookkeeping,
            defer_level,
            group_entries: [0; GROUPS],
            stacks: Vec::new(),
            residents: Default::default(),
            resident_at: Default::default(),
            epoch: 0,
            touched: Vec::new(),
            fresh_roots: Vec::new(),
            candidates: Vec::new(),
            index_scan,
            asid_of: FastMap::default(),
            plan: None,
            planning_passes: passes,
            planning: offline && passes > 0,
            params: params.clone(),
            pending_copy: 0,
            exclude: None,
            copy_cycles_per_kib: copy,
            miss_cycles: miss,
            harvest: offline::Charges::new(),
            offline_passes: 0,
            past_vma,
            given: params.iter().filter(|(k, _)| !matches!(k.as_str(), "_" | "variant" | "size")).map(|(k, v)| (k.clone(), v.clone())).collect(),
            c: Counters { promoted: vec![0; n], why: vec![[0; 4]; n], ..Default::default() },
        };
        if offline {
            // The first planning pass measures with no superpage planned; with no pass at all,
            // the measured run has none.
            if r.planning {
                r.measure_with(offline::Plan::default());
            } else {
                r.run_with(offline::Plan::default());
            }
        }
        Ok(r)
    }

    fn levels_n(&self) -> usize {
        self.levels.len()
    }

    /// Smallest prefetch threshold above the deferral level: a fresh segment's slack.
    fn initial_slack(&self) -> u64 {
        match self.defer_level {
            Some(d) => self.thr_prefetch[d + 1..].iter().copied().min().unwrap_or(u64::MAX),
            None => u64::MAX,
        }
    }

    /// A stack/resident key for the translation of `level` at `va` in `asid`.
    fn key(&self, asid: u16, va: u64, level: usize) -> u64 {
        pack_key(self.segs.geo.shift[0], asid, va, level)
    }

    fn unkey(&self, k: u64) -> (u16, u64, usize) {
        unpack_key(self.segs.geo.shift[0], k)
    }

    fn online_like(&self) -> bool {
        matches!(self.mode, Mode::Online | Mode::Measure)
    }

    fn counting(&self) -> bool {
        matches!(self.mode, Mode::Approx | Mode::Online | Mode::Measure)
    }

    /// Learn the TLB sizes at the first miss (capacity charges need them).
    fn init_groups(&mut self, sys: &Sys) {
        if self.group_entries[0] != 0 || self.group_entries[1] != 0 {
            return;
        }
        for g in 0..GROUPS {
            self.group_entries[g] = sys.mmu.group_entries(g as u8);
        }
        if self.online_like() {
            let top = self.segs.geo.pages(self.levels_n() - 1) as usize;
            let seg_of = SegmentOf { base_shift: self.segs.geo.shift[0], seg_shift: self.segs.geo.seg_shift, top_level: self.levels_n() - 1 };
            let indexed = self.index_scan.unwrap_or(top >= INDEX_SCAN_FROM);
            self.stacks = (0..GROUPS)
                .map(|g| {
                    let cap = top + self.group_entries[g] as usize;
                    if indexed {
                        EvictedStack::with_depths(cap, seg_of)
                    } else {
                        EvictedStack::new(cap)
                    }
                })
                .collect();
        }
        self.touched.reserve(4096);
    }

    /// Apply the evictions the MMU reported since the last miss (Appendix A, "on evicting q").
    fn drain_evictions(&mut self, sys: &mut Sys) {
        self.sync_evictions(sys.mmu);
    }

    /// Apply the evictions the MMU holds now (the handler itself learns of them at the next
    /// miss; tests and inspection call this to see the TLB as it is).
    pub fn sync_evictions(&mut self, mmu: &mut crate::mmu::Mmu) {
        let mut ev = std::mem::take(&mut mmu.evictions);
        for &(g, tag) in &ev {
            let (asid, vpn, si) = crate::mmu::tlb::decode_tag(tag);
            let Some(level) = self.level_of_si.get(si as usize).copied().flatten() else { continue };
            let va = vpn << self.sizes[si as usize].shift();
            self.evict(g as usize, asid, va, level);
        }
        ev.clear();
        mmu.evictions = ev;
    }

    fn evict(&mut self, g: usize, asid: u16, va: u64, level: usize) {
        let Some(si) = self.segs.find(asid, va) else {
            // Its segment was unmapped whole (its shootdown arrives after `on_unmap`): the
            // translation is no longer resident, and no stack keeps it, as nothing can charge
            // for it again.
            if self.online_like() {
                let k = self.key(asid, va, level);
                self.remove_resident(g, k);
            }
            return;
        };
        let online = self.online_like();
        let geo = &self.segs.geo;
        let seg = &mut self.segs.list[si];
        if seg.tlbcount[geo.node(level, va)][g] <= 0 {
            return; // stale: the page was promoted over, demoted or forgotten since
        }
        drop_positive(seg, geo, level, va, g);
        if online {
            for l in level + 1..geo.levels() {
                let a = geo.node(l, va);
                seg.rescount[a][g] = seg.rescount[a][g].saturating_sub(1);
            }
            let k = self.key(asid, va, level);
            self.remove_resident(g, k);
            self.stacks[g].push_front(k);
        }
    }

    /// ONLINE: the translations of pages in `start..end` of `asid` (unmapped) are dead. The
    /// resident ones leave the resident set now, as their shootdown would have them leave it
    /// (which, heard at the next miss, then finds nothing left to do), and no stack keeps them:
    /// the capacity scan must not count dead translations above live ones.
    fn forget_dead_translations(&mut self, asid: u16, start: u64, end: u64) {
        let base = self.segs.geo.shift[0];
        let inside = |k: u64| {
            let (a, v, _) = unpack_key(base, k);
            a == asid && v >= start && v < end
        };
        for g in 0..GROUPS.min(self.stacks.len()) {
            let dead: Vec<u64> = self.residents[g].iter().copied().filter(|&k| inside(k)).collect();
            for k in dead {
                let (a, va, level) = unpack_key(base, k);
                self.evict(g, a, va, level); // onto the stack, which the next line clears
                self.remove_resident(g, k); // evict keeps it when the count says it is gone already
            }
            self.unstack_range(g, asid, start, end);
        }
    }

    /// Take the translations of `asid` starting in `start..end` off group `g`'s stack: each
    /// possible key is looked up when the range is small, else the stack is swept.
    fn unstack_range(&mut self, g: usize, asid: u16, start: u64, end: u64) {
        let Some(st) = self.stacks.get_mut(g) else { return };
        let geo = &self.segs.geo;
        let base = geo.shift[0];
        let keys: u64 = (0..geo.levels()).map(|l| (end.saturating_sub(start) >> geo.shift[l]).saturating_add(1)).sum();
        if keys < st.len() as u64 {
            for l in 0..geo.levels() {
                let sh = geo.shift[l];
                let mut v = start.div_ceil(1 << sh) << sh;
                while v < end {
                    st.remove(pack_key(base, asid, v, l));
                    let Some(next) = v.checked_add(1 << sh) else { break };
                    v = next;
                }
            }
        } else {
            st.remove_where(|k| {
                let (a, v, _) = unpack_key(base, k);
                a == asid && v >= start && v < end
            });
        }
    }

    fn remove_resident(&mut self, g: usize, k: u64) {
        if let Some(i) = self.resident_at[g].remove(&k) {
            let i = i as usize;
            self.residents[g].swap_remove(i);
            if i < self.residents[g].len() {
                let moved = self.residents[g][i];
                self.resident_at[g].insert(moved, i as u32);
            }
        }
    }

    /// The translation of `level` at `va` enters group `g`'s TLB (Appendix A, "on a miss").
    fn insert(&mut self, g: usize, asid: u16, va: u64, level: usize) {
        let Some(si) = self.segs.find(asid, va) else { return };
        let online = self.online_like();
        let geo = &self.segs.geo;
        let seg = &mut self.segs.list[si];
        let n = geo.node(level, va);
        if seg.tlbcount[n][g] < 0 {
            return;
        }
        seg.tlbcount[n][g] += 1;
        let mut rising = seg.tlbcount[n][g] == 1;
        for l in level + 1..geo.levels() {
            let a = geo.node(l, va);
            if rising {
                rising = seg.tlbcount[a][g] == 0;
                seg.tlbcount[a][g] += 1;
            }
            if online {
                seg.rescount[a][g] = seg.rescount[a][g].saturating_add(1);
            }
        }
        if online {
            let k = self.key(asid, va, level);
            self.stacks[g].remove(k);
            if !self.resident_at[g].contains_key(&k) {
                self.resident_at[g].insert(k, self.residents[g].len() as u32);
                self.residents[g].push(k);
            }
        }
    }

    /// Mark the base page at `va` referenced (first touch), up the tree.
    fn reference(&mut self, seg: usize, va: u64) {
        let geo = &self.segs.geo;
        let s = &mut self.segs.list[seg];
        if s.refd[geo.node(0, va)] != 0 {
            return;
        }
        for l in 0..geo.levels() {
            s.refd[geo.node(l, va)] += 1;
        }
    }

    /// The OS changed a page we promoted (demotion on mprotect, partial munmap, copy-on-write):
    /// find the promoted page above `level` at `va` and forget it (Appendix A: "on demoting
    /// P, tlbcount(P) = 0").
    fn forget_promotion(&mut self, seg: usize, va: u64, level: usize) {
        let geo = self.segs.geo.clone();
        let Some(top) = (level + 1..geo.levels()).find(|&l| self.segs.list[seg].promoted[geo.node(l, va)]) else { return };
        let p = geo.node(top, va);
        let s = &mut self.segs.list[seg];
        for g in 0..GROUPS {
            if s.tlbcount[p][g] > 0 {
                // Its own translation counted; it is gone.
                s.tlbcount[p][g] = 1;
                drop_positive(s, &geo, top, va, g);
            }
        }
        s.promoted[p] = false;
        for l in 0..top {
            for n in geo.descendants(p, l) {
                s.tlbcount[n] = [0; GROUPS];
            }
        }
        self.c.demotions_seen += 1;
    }

    /// Add one prefetch charge to the potential superpages at levels `from..` containing `va`
    /// (eagerly up to the deferral level, then as one deferred charge).
    fn charge_prefetch(&mut self, seg: usize, va: u64, from: usize) {
        let geo = &self.segs.geo;
        let s = &mut self.segs.list[seg];
        let top = geo.levels();
        for l in from..top {
            match self.defer_level {
                Some(d) if l > d => {
                    // Every strict ancestor of the node just below owes one charge.
                    let holder = geo.node(l - 1, va);
                    if s.deferred[holder] == 0 {
                        s.dirty.push(holder as u32);
                    }
                    s.deferred[holder] += 1;
                    s.pending += 1;
                    self.c.deferred_charges += 1;
                    break;
                }
                _ => s.prefetch[geo.node(l, va)] += 1,
            }
        }
        self.c.prefetch_charges += 1;
        if s.pending > 0 && s.pending >= s.min_slack {
            self.flush(seg);
        }
    }

    /// Apply a segment's deferred charges and recompute its slack.
    fn flush(&mut self, seg: usize) {
        let Some(d) = self.defer_level else { return };
        let geo = &self.segs.geo;
        let s = &mut self.segs.list[seg];
        if s.pending > 0 {
            self.c.flushes += 1;
        }
        for &h in &s.dirty {
            let h = h as usize;
            let v = s.deferred[h];
            s.deferred[h] = 0;
            let hl = geo.level_of(h);
            let va = geo.va_of(s.va, h);
            for l in hl + 1..geo.levels() {
                s.prefetch[geo.node(l, va)] += v;
            }
        }
        s.dirty.clear();
        s.pending = 0;
        let mut slack = u64::MAX;
        for l in d + 1..geo.levels() {
            for n in geo.descendants(geo.offset[geo.levels() - 1], l) {
                if s.tlbcount[n][0] >= 0 && !s.promoted[n] {
                    slack = slack.min(self.thr_prefetch[l].saturating_sub(s.prefetch[n] as u64));
                }
            }
        }
        s.min_slack = slack.max(1);
    }

    /// ONLINE's capacity charges for a miss on the translation `u` (§4.2): with the stack of
    /// translations above u's previous reference at depth d, a potential superpage P covering c
    /// of them is charged when d - c + 1 <= N (it would have kept u in an N-entry TLB).
    /// Charged nodes that reach the capacity threshold are pushed to `self.candidates`.
    fn charge_capacity(&mut self, g: usize, u: u64) {
        let n_entries = self.group_entries[g] as usize;
        if n_entries < 2 || !self.stacks[g].contains(u) {
            return;
        }
        let budget = n_entries - 2;
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            for s in self.segs.list.iter_mut() {
                s.mark.fill(0);
                s.seen.fill(0);
            }
            self.epoch = 1;
        }
        let epoch = self.epoch;
        let geo = self.segs.geo.clone();
        let top = geo.levels() - 1;
        let root = geo.offset[top];
        let rn = self.residents[g].len();
        // The most entries any potential superpage holds so far: a segment root's.
        let mut max_in = self.segs.list.iter().map(|s| s.rescount[root][g] as usize).max().unwrap_or(0);
        self.touched.clear();
        let mut j = 0usize;
        let mut found = false;
        // A potential superpage holds at most its base pages' worth of entries, so once the
        // entries it would need exceed that, its level needs no more counting.
        let mut lo = 1usize;
        let u_time = self.stacks[g].time_of(u);
        // With order statistics, when u lies so deep that no potential superpage below a
        // segment root can hold enough entries (a level-(top-1) node counts at most its
        // residents, no more than rn, plus the entries visited while its level still counts),
        // everything above u is counted from the statistics.
        let mut counted = None;
        if let (Some(lo_t), true) = (u_time, top >= 1) {
            let deep = self.stacks[g].between(lo_t, u32::MAX) as usize;
            let lower_most = rn + (geo.pages(top - 1) as usize + budget).saturating_sub(1 + rn);
            if lower_most < (rn + deep).saturating_sub(budget) {
                counted = count_rest(&self.stacks[g], &mut self.segs, &mut self.fresh_roots, &mut self.touched, (lo_t, u32::MAX), g, epoch, rn, budget);
            }
        }
        // Then every node not counted from the statistics holds only its residents, at most rn,
        // fewer than `need`: none of them can be charged, so the residents' loop is skipped.
        let residents_may_charge = counted.is_none();
        let mut tried = counted.is_some();
        let visit = counted.is_none();
        for k in self.stacks[g].iter().take_while(|_| visit) {
            if k == u {
                found = true;
                break;
            }
            if let (true, false, Some(lo_t)) = (lo == top, tried, u_time) {
                // From here on every entry counts toward its segment's root only: count the
                // rest, down to u, from the order statistics instead of visiting it.
                tried = true;
                let st = &self.stacks[g];
                let hi_t = st.time_of(k).expect("k is in the stack") + 1;
                counted = count_rest(st, &mut self.segs, &mut self.fresh_roots, &mut self.touched, (lo_t, hi_t), g, epoch, rn + j, budget);
                if counted.is_some() {
                    break;
                }
            }
            j += 1;
            self.c.capacity_scan_steps += 1;
            let need_now = (rn + j + 1).saturating_sub(budget) as u64;
            while lo < top && geo.pages(lo) < need_now {
                lo += 1;
            }
            let (asid, va, level) = unpack_key(geo.shift[0], k);
            if let Some(si) = self.segs.find(asid, va) {
                let s = &mut self.segs.list[si];
                for l in (level + 1).max(lo)..=top {
                    let a = geo.node(l, va);
                    if s.mark[a] != epoch {
                        s.mark[a] = epoch;
                        s.scratch[a] = 0;
                        self.touched.push((si as u32, a as u32));
                    }
                    s.scratch[a] += 1;
                }
                if level < top {
                    max_in = max_in.max(s.rescount[root][g] as usize + s.scratch[root] as usize);
                }
            }
            if rn + j - max_in.min(rn + j) > budget {
                return; // even the fullest potential superpage leaves too many entries out
            }
        }
        if let Some((n, fullest)) = counted {
            self.c.capacity_scan_counted += n as u64;
            j += n;
            max_in = max_in.max(fullest);
            found = true;
        }
        if !found || rn + j - max_in.min(rn + j) > budget {
            return; // (after counting from the statistics: the same test as in the visit)
        }
        let above = rn + j;
        let need = above.saturating_sub(budget).max(1);
        // OFFLINE's planning: the superpages this miss already charged a prefetch to.
        let excl = self.exclude.take();
        let skip = |si: usize, a: usize, l: usize| excl.is_some_and(|(es, ev, ej)| es == si && l >= ej && geo.node(l, ev) == a);
        let mut charged = std::mem::take(&mut self.candidates);
        // Candidates: ancestors of the scanned entries, then of the resident ones.
        for &(si, a) in &self.touched {
            let s = &mut self.segs.list[si as usize];
            let a = a as usize;
            s.seen[a] = epoch;
            let inn = s.rescount[a][g] as usize + s.scratch[a] as usize;
            let l = geo.level_of(a);
            if inn >= need && s.tlbcount[a][0] >= 0 && !skip(si as usize, a, l) {
                s.capacity[a] += 1;
                self.c.capacity_charges += 1;
                if s.capacity[a] as u64 > self.thr_capacity[l] {
                    charged.push((si as usize, a));
                }
            }
        }
        let from_residents = if residents_may_charge { self.residents[g].len() } else { 0 };
        for i in 0..from_residents {
            let k = self.residents[g][i];
            let (asid, va, level) = self.unkey(k);
            let Some(si) = self.segs.find(asid, va) else { continue };
            let s = &mut self.segs.list[si];
            for l in level + 1..=top {
                let a = geo.node(l, va);
                if s.seen[a] == epoch {
                    continue;
                }
                s.seen[a] = epoch;
                let scratch = if s.mark[a] == epoch { s.scratch[a] } else { 0 };
                let inn = s.rescount[a][g] as usize + scratch as usize;
                if inn >= need && s.tlbcount[a][0] >= 0 && !skip(si, a, l) {
                    s.capacity[a] += 1;
                    self.c.capacity_charges += 1;
                    if s.capacity[a] as u64 > self.thr_capacity[l] {
                        charged.push((si, a));
                    }
                }
            }
        }
        self.candidates = charged;
    }

    /// Promote the potential superpage `node` of segment `seg` by copying (§3): the OS copies
    /// the whole region into a fresh aligned block; the counters below it are retired.
    fn promote(&mut self, sys: &mut Sys, pi: usize, seg: usize, node: usize) -> bool {
        let geo = self.segs.geo.clone();
        let level = geo.level_of(node);
        if level == 0 {
            return false;
        }
        {
            let s = &self.segs.list[seg];
            if s.tlbcount[node][0] < 0 || s.promoted[node] {
                return false; // already inside a page promoted this miss
            }
        }
        self.flush(seg);
        let va = geo.va_of(self.segs.list[seg].va, node);
        let lim = CollapseLimits { past_vma: self.past_vma, copy_whole: true, ..CollapseLimits::ANY };
        let r = sys.os.collapse(pi, va, self.levels[level], lim, false, sys.mmu);
        let online = self.online_like();
        let mode = self.mode;
        let s = &mut self.segs.list[seg];
        if r != CollapseResult::Succeed {
            // Counted; the charges start over so a refused page does not retry at every miss.
            self.c.promote_failed[r as usize] += 1;
            s.failed[node] = 1 + r as u8;
            s.prefetch[node] = 0;
            s.capacity[node] = 0;
            return false;
        }
        self.c.promoted[level] += 1;
        self.c.copied_bytes += geo.pages(level) << geo.shift[0];
        s.failed[node] = 0;
        // The components' translations were shot down; P's own is not loaded yet.
        for g in 0..GROUPS {
            if s.tlbcount[node][g] > 0 {
                s.tlbcount[node][g] = 1;
                drop_positive(s, &geo, level, va, g);
            }
            let inside = s.rescount[node][g];
            if inside > 0 {
                for l in level + 1..geo.levels() {
                    let a = geo.node(l, va);
                    s.rescount[a][g] = s.rescount[a][g].saturating_sub(inside);
                }
            }
        }
        let own_prefetch = s.prefetch[node];
        for l in 0..level {
            for n in geo.descendants(node, l) {
                s.tlbcount[n] = [-1; GROUPS];
                s.rescount[n] = [0; GROUPS];
                s.prefetch[n] = 0;
                s.capacity[n] = 0;
                s.deferred[n] = 0;
                s.promoted[n] = false;
            }
        }
        s.tlbcount[node] = [0; GROUPS];
        s.rescount[node] = [0; GROUPS];
        s.promoted[node] = true;
        s.prefetch[node] = 0;
        s.capacity[node] = 0;
        // Charges of the larger potential superpages that this one's misses also paid (§4.3).
        for l in level + 1..geo.levels() {
            let a = geo.node(l, va);
            match mode {
                Mode::Approx => s.prefetch[a] = s.prefetch[a].saturating_sub(self.thr_prefetch[level] as u32),
                Mode::Online => {
                    s.prefetch[a] = s.prefetch[a].saturating_sub(own_prefetch);
                    s.capacity[a] = 0;
                }
                _ => {}
            }
        }
        if online {
            let end = va + (geo.pages(level) << geo.shift[0]);
            let asid = s.asid;
            let base = geo.shift[0];
            let inside = |k: u64| {
                let (a, v, _) = unpack_key(base, k);
                a == asid && v >= va && v < end
            };
            for g in 0..GROUPS {
                self.unstack_range(g, asid, va, end);
                let gone: Vec<u64> = self.residents[g].iter().copied().filter(|&k| inside(k)).collect();
                for k in gone {
                    self.remove_resident(g, k);
                }
            }
        }
        self.flush(seg);
        true
    }

    /// Which potential superpages to promote after this miss's charges, largest first.
    fn pick(&mut self, seg: usize, va: u64, from: usize) {
        let geo = &self.segs.geo;
        let s = &self.segs.list[seg];
        for l in (from..geo.levels()).rev() {
            let a = geo.node(l, va);
            // ONLINE promotes past the thresholds ("capacity(P) > 0.625R or prefetch(P) >
            // 0.125R"); APPROX-ONLINE when prefetch reaches 0.125R (§4.3).
            let over = if self.mode == Mode::Online { s.prefetch[a] as u64 > self.thr_prefetch[l] } else { s.prefetch[a] as u64 >= self.thr_prefetch[l] };
            if over {
                self.candidates.push((seg, a));
                break;
            }
        }
    }

    /// ASAP: the potential superpages containing `va` whose base pages were all referenced
    /// (or, for ASAP-4-64, the 64KB region once half were), largest first, into `candidates`:
    /// if the OS refuses the largest, the next one is tried. One that crossed its VMA is not
    /// retried (VMAs rarely change under a region whose pages are all in use).
    fn asap_candidates(&mut self, seg: usize, va: u64, level: usize) {
        let geo = &self.segs.geo;
        let s = &self.segs.list[seg];
        let crossed = 1 + CollapseResult::VmaCheck as u8;
        for l in (level + 1..geo.levels()).rev() {
            let a = geo.node(l, va);
            let full = match self.mode {
                Mode::Asap464 => 2 * s.refd[a] as u64 >= geo.pages(l),
                _ => s.refd[a] as u64 == geo.pages(l),
            };
            if full && s.failed[a] != crossed {
                self.candidates.push((seg, a));
            }
        }
    }

    /// Add the reason each touched, unpromoted potential superpage of `s` did not become a
    /// superpage: 0 its promotion failed (the OS refused: counted by reason), 1 not all its
    /// pages referenced (ASAP), 2 under half referenced (ASAP-4-64), 3 charges below threshold.
    fn why_not(&self, s: &tree::Segment, why: &mut [[u64; 4]]) {
        let geo = &self.segs.geo;
        for l in 1..geo.levels() {
            for n in geo.descendants(geo.offset[geo.levels() - 1], l) {
                if s.refd[n] == 0 || s.promoted[n] || s.tlbcount[n][0] < 0 {
                    continue;
                }
                let r = if s.failed[n] != 0 {
                    0
                } else {
                    match self.mode {
                        Mode::Asap => 1,
                        Mode::Asap464 => 2,
                        _ => 3,
                    }
                };
                why[l][r] += 1;
            }
        }
    }

    /// Charges of the unpromoted potential superpages of segment `i` (deferred ones applied).
    fn segment_charges(&mut self, i: usize, into: &mut offline::Charges) {
        self.flush(i);
        let geo = &self.segs.geo;
        let top = geo.offset[geo.levels() - 1];
        let s = &self.segs.list[i];
        for l in 1..geo.levels() {
            for n in geo.descendants(top, l) {
                if s.promoted[n] || s.tlbcount[n][0] < 0 {
                    continue;
                }
                let (p, c) = (s.prefetch[n] as u64, s.capacity[n] as u64);
                if p > 0 || c > 0 {
                    let e = into.entry((s.asid, geo.va_of(s.va, n), l)).or_insert((0, 0, 0));
                    e.0 += p;
                    e.1 += c;
                    e.2 = e.2.max(s.refd[n] as u64);
                }
            }
        }
    }

    /// OFFLINE's measured run: the planned superpages are made at first touch; nothing is
    /// charged or promoted at misses.
    pub fn run_with(&mut self, plan: offline::Plan) {
        self.plan = Some(plan);
        self.mode = Mode::None;
    }

    /// OFFLINE's planning pass: the planned superpages exist; every potential superpage is
    /// charged as under ONLINE, and nothing is promoted.
    pub fn measure_with(&mut self, plan: offline::Plan) {
        self.plan = Some(plan);
        self.mode = Mode::Measure;
    }

    /// Every potential superpage's charges at the end of a planning pass (deferred charges
    /// applied), except those promoted or inside a planned superpage.
    pub fn final_charges(&mut self) -> offline::Charges {
        let mut ch = std::mem::take(&mut self.harvest);
        for i in 0..self.segs.list.len() {
            self.segment_charges(i, &mut ch);
        }
        ch
    }

    /// The (prefetch, capacity) charges of the potential superpage of `bytes` at `va` in
    /// `asid`, deferred charges included (for tests and inspection).
    pub fn charges(&mut self, asid: u16, va: u64, bytes: u64) -> Option<(u64, u64)> {
        let l = (0..self.levels_n()).find(|&l| self.level_bytes(l) == bytes)?;
        let si = self.segs.find(asid, va)?;
        self.flush(si);
        let n = self.segs.geo.node(l, va);
        let s = &self.segs.list[si];
        Some((s.prefetch[n] as u64, s.capacity[n] as u64))
    }

    /// Appendix A's tlbcount of the page of `bytes` at `va` in group `g`.
    pub fn tlbcount(&mut self, asid: u16, va: u64, bytes: u64, g: usize) -> Option<i16> {
        let l = (0..self.levels_n()).find(|&l| self.level_bytes(l) == bytes)?;
        let si = self.segs.find(asid, va)?;
        Some(self.segs.list[si].tlbcount[self.segs.geo.node(l, va)][g])
    }

    /// Check ONLINE's capacity bookkeeping (tests): every stack's order statistics, and that
    /// each node's `rescount` is the number of its group's resident translations strictly
    /// below it (so at most `rn`, which the statistics-counted scans assume).
    pub fn check_capacity_bookkeeping(&mut self) {
        for st in &self.stacks {
            st.check();
        }
        let geo = self.segs.geo.clone();
        for g in 0..self.stacks.len().min(GROUPS) {
            let mut want: FastMap<(usize, usize), u16> = FastMap::default();
            for &k in &self.residents[g] {
                let (asid, va, level) = unpack_key(geo.shift[0], k);
                if let Some(si) = self.segs.find(asid, va) {
                    for l in level + 1..geo.levels() {
                        *want.entry((si, geo.node(l, va))).or_default() += 1;
                    }
                }
            }
            for (si, s) in self.segs.list.iter().enumerate() {
                for a in geo.offset[1]..geo.nodes {
                    let w = want.get(&(si, a)).copied().unwrap_or(0);
                    assert_eq!(s.rescount[a][g], w, "rescount of node {a} of segment {si}, group {g}");
                }
            }
        }
    }

    /// Whether ONLINE's eviction stack of group `g` holds the translation of the page of
    /// `bytes` at `va` (tests).
    pub fn on_stack(&self, g: usize, asid: u16, va: u64, bytes: u64) -> bool {
        let Some(l) = (0..self.levels_n()).find(|&l| self.level_bytes(l) == bytes) else { return false };
        self.stacks.get(g).is_some_and(|st| st.contains(self.key(asid, va, l)))
    }

    pub fn copy_cycles_per_kib(&self) -> f64 {
        self.copy_cycles_per_kib
    }

    pub fn miss_cycles(&self) -> f64 {
        self.miss_cycles
    }

    pub fn level_bytes(&self, l: usize) -> u64 {
        self.segs.geo.pages(l) << self.segs.geo.shift[0]
    }
}

/// ONLINE's capacity scans use order statistics by default when the largest page holds at
/// least this many base pages (64MB at 4KB): then a scan can be hundreds of thousands of
/// entries deep (1GB pages on x86). Below it the early stop keeps scans short; on `romer95`
/// (8MB) the two ways ran within the noise of each other, so the default keeps the plain visit.
const INDEX_SCAN_FROM: usize = 16384;

/// The rest of a capacity scan, the entries with times strictly between `lo_t` (the missed
/// translation's) and `hi_t`, when only segment roots still count (every lower level's potential
/// superpages are already too small to hold enough entries). `above` entries (residents and
/// visited ones) were counted before the range. Adds each segment's entries in that range to its root's scratch, exactly as
/// visiting them one by one would, for every segment that could still be charged; the others
/// cannot reach `need` either way. Roots counted for the first time join `touched` in the
/// order the visit would have met them (latest entry first; `fresh` is scratch). Returns the entries in the range and the
/// fullest root's count, or None (nothing changed) when a segment that could be charged keeps
/// no order statistics of its own: the caller then goes on visiting.
#[allow(clippy::too_many_arguments)]
fn count_rest(
    st: &EvictedStack,
    segs: &mut Segments,
    fresh: &mut Vec<(u32, u32)>,
    touched: &mut Vec<(u32, u32)>,
    (lo_t, hi_t): (u32, u32),
    g: usize,
    epoch: u32,
    above: usize,
    budget: usize,
) -> Option<(usize, usize)> {
    let n = st.between(lo_t, hi_t) as usize;
    let need = (above + n).saturating_sub(budget).max(1);
    let geo = &segs.geo;
    let root = geo.offset[geo.levels() - 1];
    let seg_key = |s: &tree::Segment| tree::segment_key(geo.seg_shift, s.asid, s.va);
    let counted = |s: &tree::Segment| s.rescount[root][g] as usize + if s.mark[root] == epoch { s.scratch[root] as usize } else { 0 };
    // A segment can be charged only if all of the range's entries could be its own.
    let could = |s: &tree::Segment| counted(s) + n.min(st.segment_len(seg_key(s)) as usize) >= need;
    for s in segs.list.iter() {
        if could(s) {
            st.segment_between(seg_key(s), lo_t, hi_t)?;
        }
    }
    fresh.clear();
    let mut fullest = 0;
    for (si, s) in segs.list.iter_mut().enumerate() {
        if !could(s) {
            continue;
        }
        let (c, latest) = st.segment_between(seg_key(s), lo_t, hi_t).expect("checked above");
        if c > 0 {
            if s.mark[root] != epoch {
                s.mark[root] = epoch;
                s.scratch[root] = 0;
                fresh.push((latest.expect("a latest entry"), si as u32));
            }
            s.scratch[root] += c;
        }
        fullest = fullest.max(counted(s));
    }
    fresh.sort_unstable_by_key(|f| std::cmp::Reverse(f.0));
    touched.extend(fresh.iter().map(|&(_, si)| (si, root as u32)));
    Some((n, fullest))
}

/// Pack (asid, translation start, level) into one key: the asid in the top 16 bits, the base
/// page number (of a 48-bit address) above the 5-bit level.
fn pack_key(base_shift: u32, asid: u16, va: u64, level: usize) -> u64 {
    ((asid as u64) << 48) | ((va >> base_shift) << 5) | level as u64
}

fn unpack_key(base_shift: u32, k: u64) -> (u16, u64, usize) {
    ((k >> 48) as u16, ((k >> 5) & ((1u64 << 43) - 1)) << base_shift, (k & 31) as usize)
}

/// Node `level` at `va` loses one from its count in group `g` (its translation left the TLB,
/// or it stopped counting its own); ancestors whose count reaches 0 tell their parents in turn
/// (Appendix A, "on evicting q").
fn drop_positive(s: &mut tree::Segment, geo: &Geometry, level: usize, va: u64, g: usize) {
    let n = geo.node(level, va);
    s.tlbcount[n][g] -= 1;
    let mut zero = s.tlbcount[n][g] == 0;
    for l in level + 1..geo.levels() {
        if !zero {
            break;
        }
        let a = geo.node(l, va);
        s.tlbcount[a][g] -= 1;
        zero = s.tlbcount[a][g] == 0;
    }
}

impl Policy for Romer {
    fn name(&self) -> String {
        let mut n = match self.variant {
            Variant::Fixed => format!("romer:fixed,size={}", self.sizes[self.fixed_si as usize]),
            v => format!("romer:{}", v.name()),
        };
        // The parameters given, so that runs side by side keep their names apart.
        for (k, v) in &self.given {
            n.push_str(&format!(",{k}={v}"));
        }
        n
    }

    fn on_fault(&mut self, f: &FaultInfo) -> FaultDecision {
        if self.variant == Variant::Fixed {
            // As Romer's FIXED: the aligned page may reach past the VMA (memory overhead).
            return FaultDecision::size(self.fixed_si, false);
        }
        if let Some(plan) = &self.plan {
            if let Some(l) = plan.level_at(f.asid, f.va) {
                return FaultDecision::size(self.levels[l], false);
            }
        }
        FaultDecision::base()
    }

    fn on_fault_done(&mut self, wanted: u32, got: u32) {
        if self.plan.is_some() && wanted > 0 && got == wanted {
            // OFFLINE pays the worst-case copy for each superpage it makes.
            if let Some(l) = self.level_of_si.get(wanted as usize).copied().flatten() {
                self.c.promoted[l] += 1;
                self.c.copied_bytes += self.level_bytes(l);
                self.pending_copy += self.level_bytes(l);
            }
        }
    }

    fn features(&self) -> Features {
        // on_tlb_miss reads no time: its costs are counted (bookkeeping, copies), not scheduled.
        Features {
            wants_tlb_misses: true,
            untimed_tlb_misses: true,
            wants_unmaps: true,
            planning_passes: if self.planning { self.planning_passes } else { 0 },
            ..Features::default()
        }
    }

    fn end_planning_pass(&mut self, pass: u32) -> bool {
        self.end_offline_pass(pass)
    }

    fn on_tlb_miss(&mut self, sys: &mut Sys, pi: usize, va: u64, si: u32, fetch: bool) {
        self.init_groups(sys);
        self.drain_evictions(sys);
        let asid = sys.os.procs[pi].asid;
        self.asid_of.insert(pi, asid);
        let Some(mut level) = self.level_of_si.get(si as usize).copied().flatten() else {
            self.c.untracked += 1;
            return;
        };
        self.c.misses += 1;
        sys.os.charge_bookkeeping(self.bookkeeping);
        if self.pending_copy > 0 {
            // OFFLINE's superpage made by this miss's fault: its copy, as a promotion's.
            sys.os.charge_direct_copy(self.pending_copy);
            self.pending_copy = 0;
        }
        let slack = self.initial_slack();
        let seg = self.segs.get_or_create(asid, va, slack);
        self.reference(seg, va);
        if self.mode == Mode::None {
            return;
        }
        let g = sys.mmu.group_of(fetch) as usize;
        let geo = self.segs.geo.clone();
        let u = geo.node(level, va);
        if self.segs.list[seg].tlbcount[u][0] < 0 || (level > 0 && !self.segs.list[seg].promoted[u]) {
            // The tree and the page table disagree: the OS demoted (or mapped) behind us.
            self.forget_promotion(seg, va, level);
            if level > 0 {
                self.segs.list[seg].promoted[u] = true;
                for l in 0..level {
                    for n in geo.descendants(u, l) {
                        self.segs.list[seg].tlbcount[n] = [-1; GROUPS];
                    }
                }
            }
        }
        self.candidates.clear();
        match self.mode {
            Mode::Asap | Mode::Asap464 => {
                self.asap_candidates(seg, va, level);
            }
            Mode::Approx | Mode::Online | Mode::Measure => {
                // Prefetch: every potential superpage containing va and a TLB-resident
                // translation (the chain above the lowest positive tlbcount).
                let s = &self.segs.list[seg];
                let lowest = (level + 1..geo.levels()).find(|&l| s.tlbcount[geo.node(l, va)][g] > 0);
                if let Some(j) = lowest {
                    self.charge_prefetch(seg, va, j);
                }
                if self.online_like() {
                    let k = self.key(asid, va, level);
                    self.exclude = if self.mode == Mode::Measure { lowest.map(|j| (seg, va, j)) } else { None };
                    self.charge_capacity(g, k);
                }
                if self.mode != Mode::Measure {
                    if let Some(j) = lowest {
                        self.pick(seg, va, j);
                    }
                } else {
                    self.candidates.clear();
                }
            }
            Mode::None => {}
        }
        // Promote, largest first; a page containing va becomes the translation loaded.
        if !self.candidates.is_empty() && self.mode != Mode::Measure {
            let mut cands = std::mem::take(&mut self.candidates);
            cands.sort_by_key(|&(_, n)| std::cmp::Reverse(geo.level_of(n)));
            for &(sg, n) in &cands {
                if self.promote(sys, pi, sg, n) {
                    let pva = geo.va_of(self.segs.list[sg].va, n);
                    let pl = geo.level_of(n);
                    if sg == seg && pva <= va && va < pva + self.level_bytes(pl) {
                        level = pl;
                    }
                }
            }
            cands.clear();
            self.candidates = cands;
            self.drain_evictions(sys);
        }
        if self.counting() {
            self.insert(g, asid, va & !(self.level_bytes(level) - 1), level);
        }
    }

    fn on_unmap(&mut self, pi: usize, start: u64, end: u64) {
        let Some(&asid) = self.asid_of.get(&pi) else { return };
        let seg_bytes = 1u64 << self.segs.geo.seg_shift;
        let gone: Vec<usize> = (0..self.segs.list.len())
            .filter(|&i| {
                let s = &self.segs.list[i];
                s.asid == asid && s.va >= start && s.va.saturating_add(seg_bytes) <= end
            })
            .collect();
        for i in gone {
            let mut why = std::mem::take(&mut self.c.why);
            self.why_not(&self.segs.list[i], &mut why);
            self.c.why = why;
            if self.mode == Mode::Measure {
                let mut h = std::mem::take(&mut self.harvest);
                self.segment_charges(i, &mut h);
                self.harvest = h;
            }
        }
        self.segs.drop_range(asid, start, end);
        // Partly unmapped segments: the unmapped base pages are no longer referenced.
        let geo = self.segs.geo.clone();
        let seg_bytes = 1u64 << geo.seg_shift;
        let page = 1u64 << geo.shift[0];
        for s in self.segs.list.iter_mut().filter(|s| s.asid == asid && s.va < end && s.va + seg_bytes > start) {
            let lo = start.max(s.va);
            let hi = end.min(s.va + seg_bytes);
            let mut v = lo;
            while v < hi {
                if s.refd[geo.node(0, v)] != 0 {
                    for l in 0..geo.levels() {
                        s.refd[geo.node(l, v)] -= 1;
                    }
                }
                v += page;
            }
        }
        if self.online_like() {
            self.forget_dead_translations(asid, start, end);
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let c = &self.c;
        let mut v = vec![
            ("romer.misses".to_string(), c.misses),
            ("romer.misses_untracked".to_string(), c.untracked),
            ("romer.prefetch_charges".to_string(), c.prefetch_charges),
            ("romer.capacity_charges".to_string(), c.capacity_charges),
            ("romer.capacity_scan_steps".to_string(), c.capacity_scan_steps),
            ("romer.capacity_scan_counted".to_string(), c.capacity_scan_counted),
            ("romer.deferred_charges".to_string(), c.deferred_charges),
            ("romer.deferred_flushes".to_string(), c.flushes),
            ("romer.copied_bytes".to_string(), c.copied_bytes),
            ("romer.demotions_seen".to_string(), c.demotions_seen),
            ("romer.offline.passes".to_string(), self.offline_passes as u64),
            ("romer.offline.planned".to_string(), self.plan.as_ref().map_or(0, |p| p.len() as u64)),
        ];
        for (i, r) in CollapseResult::ALL.iter().enumerate() {
            if *r != CollapseResult::Succeed {
                v.push((format!("romer.promote_failed.{}", r.name()), c.promote_failed[i]));
            }
        }
        // Why each potential superpage the program touched did not become one: counted when
        // its segment went away (unmap, exit), plus the segments still mapped.
        let mut why = c.why.clone();
        for s in &self.segs.list {
            self.why_not(s, &mut why);
        }
        for l in 1..self.levels_n() {
            let name = self.sizes[self.levels[l] as usize].name();
            v.push((format!("romer.promoted.{name}"), c.promoted[l]));
            if self.variant == Variant::Fixed || self.plan.is_some() {
                continue;
            }
            let reasons = ["promote_failed", "not_all_referenced", "under_half_referenced", "below_threshold"];
            for (r, rn) in reasons.iter().enumerate() {
                if why[l][r] > 0 || r == 0 || (r == 1 && self.mode == Mode::Asap) || (r == 2 && self.mode == Mode::Asap464) || (r == 3 && self.counting()) {
                    v.push((format!("romer.not_promoted.{name}.{rn}"), why[l][r]));
                }
            }
        }
        v
    }
}
