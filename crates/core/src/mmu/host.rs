//! The `host` machine: this CPU's TLB and cache geometry, read from CPUID and sysfs, with where
//! each number came from (`superpager machines host --explain`).
//!
//! Sources, in order: Intel CPUID leaf 0x18 (deterministic address translation parameters) and
//! leaf 4 (deterministic cache parameters); AMD CPUID Fn8000_0005/6 (L1/L2 TLBs and caches),
//! Fn8000_0019 (1GB TLBs) and Fn8000_001D (cache topology), as the Intel SDM vol. 2A (CPUID)
//! and the AMD APM vol. 3 (appendix E) define them; `/sys/devices/system/cpu/cpu0/cache` for
//! caches. A hypervisor may hide leaves (they read as zeros): then a core we know takes the TLBs
//! of its own preset (`CoreResources::tlb_preset`), and what is still missing keeps the static
//! preset's value (machines/host.toml, Zen 3's geometry); a note says which.
//! The data caches CPUID or sysfs gives become the machine's `[cache]` section (mmu/cache.rs);
//! their latencies come from `superpager calibrate` (a calibration file for this CPU) or are
//! ESTIMATEs, and the core's out-of-order resources from a table of known cores below.
//!
//! CPUID is injected (`Cpuid`), so the decoders are tested on recorded register values.

use super::cache::ShareLaw;
use crate::units::Bytes;

/// One CPUID query: (leaf, subleaf) -> [eax, ebx, ecx, edx].
pub trait Cpuid {
    fn query(&self, leaf: u32, sub: u32) -> [u32; 4];
}

/// The CPU this runs on.
pub struct NativeCpuid;

impl Cpuid for NativeCpuid {
    #[cfg(target_arch = "x86_64")]
    fn query(&self, leaf: u32, sub: u32) -> [u32; 4] {
        // Leaves above the maximum return zeros or the highest basic leaf's values: the
        // callers check the maxima first.
        let r = std::arch::x86_64::__cpuid_count(leaf, sub);
        [r.eax, r.ebx, r.ecx, r.edx]
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn query(&self, _leaf: u32, _sub: u32) -> [u32; 4] {
        [0; 4]
    }
}

/// A TLB as CPUID describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlbGeometry {
    pub level: u32,
    /// "data", "instruction" or "unified".
    pub stream: &'static str,
    pub entries: u32,
    pub ways: u32,
    /// Page sizes among 4KiB, 2MiB, 1GiB (4MB, a 32-bit paging size, is dropped).
    pub page_sizes: Vec<&'static str>,
    pub source: String,
    /// Cycles a hit costs beyond a first-level hit, where the source gives one (a preset's
    /// `hit_cycles`); CPUID gives none, and `host` then charges its ESTIMATE of 7.
    pub hit_cycles: Option<u32>,
}

/// A cache as CPUID or sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheGeometry {
    pub level: u32,
    pub kind: String,
    pub bytes: u64,
    pub ways: u32,
    pub line: u32,
    pub sets: u32,
    pub source: String,
}

impl CacheGeometry {
    /// The name a `[cache]` level of the host machine gets: L1d, L2, L3.
    pub fn model_name(&self) -> String {
        format!("L{}{}", self.level, if self.level == 1 { "d" } else { "" })
    }
}

/// What was found, and the machine TOML built from it.
pub struct HostReport {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    pub model_name: String,
    pub tlbs: Vec<TlbGeometry>,
    /// Why `tlbs` are what they are.
    pub tlbs_from: TlbsFrom,
    /// The core's out-of-order resources and TLB preset (`identify_core`).
    pub core: CoreResources,
    pub caches: Vec<CacheGeometry>,
    pub notes: Vec<String>,
    /// Latencies measured by `superpager calibrate` on this CPU (None: ESTIMATEs).
    pub calibration: Option<Calibration>,
}

/// Where `host`'s TLBs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbsFrom {
    /// CPUID's TLB leaves, as they read.
    Cpuid,
    /// The core's preset: CPUID's TLB leaves read as zeros.
    PresetCpuidHidden,
    /// The core's preset: CPUID reports fewer 4KB data-TLB entries than the core has.
    PresetCpuidSmaller,
    /// Nothing: `tlbs` is empty and the static preset's (Zen 3) TLBs stay.
    Static,
}

/// What `superpager calibrate` measured: cycles per level of `[cache]` (then memory) and the
/// clock they were converted with, read back from the machine file it wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    pub path: String,
    pub cpu: String,
    pub date: String,
    pub clock_ghz: f64,
    /// How calibrate had the clock (the `clock ...` part of `[calibration].method`: measured by
    /// an add chain, or /proc/cpuinfo's); "" in files written before the clock was measured.
    pub clock_how: String,
    pub level_cycles: Vec<f64>,
    /// Each level's size as the chase saw it ("" where it kept CPUID's): a virtual machine may
    /// get a small share of a large shared last-level cache.
    pub level_sizes: Vec<String>,
    pub dram_cycles: f64,
    /// The TLB probe's result, when calibrate ran it (files written before it existed have none).
    pub tlb_probe: Option<TlbProbe>,
    /// The walk probe's result, likewise.
    pub walk_probe: Option<WalkProbe>,
    /// Memory's latency before the TLB's reach ends (files written before it existed have none).
    pub near_memory: Option<NearMemory>,
    /// The last level's capacity fitted to the chase at the largest footprint (files written
    /// before the twenty-eighth session have none).
    pub last_level_fit: Option<LastLevelFit>,
    /// How a process's 4KB frames lie (files written before the thirty-sixth session, or where
    /// pagemap gave no frame numbers, have none).
    pub frames: Option<FrameProbe>,
    /// Whether the host scatters the guest's memory over its frames (files written before the
    /// thirty-seventh session, or where 2MB pages could not be had, have none).
    pub host_frames: Option<HostFramesProbe>,
    /// The instruction window and how much of a walk a full one hides (files written before the
    /// thirty-ninth session, or where 2MB pages could not be had, have none).
    pub window_probe: Option<WindowProbe>,
    /// The walk probe over four times its footprint (files written before the fifty-fourth
    /// session, or where that much memory or 2MB pages could not be had, have none).
    pub walk_probe_far: Option<WalkProbe>,
    /// The share exponent's fit (files written before the fifty-fourth session, or where the
    /// last level is not shared or a walk probe is missing, have none).
    pub share_fit: Option<ShareFit>,
    /// The stream probe and the share of a stream's walks done ahead (files written before the
    /// fifty-eighth session, or where 2MB pages could not be had, have none).
    pub stream_probe: Option<StreamProbe>,
}

impl Calibration {
    /// Memory's latency short of the TLB's reach, where the TLB probe found 2MB pages splintered:
    /// `host` is then the guest of a hypervisor with 4KB pages (`nest_over_4kib_pages`). None
    /// without splintering, or in a file written before the near point was measured.
    pub fn splintered(&self) -> Option<&NearMemory> {
        self.tlb_probe.as_ref().filter(|p| p.splintered)?;
        self.near_memory.as_ref()
    }
}

/// `superpager calibrate`'s TLB probe (model/calibrate.py, docs/RUNTIME_MODEL.md): a chase over
/// one line in each 4KB page of `span` bytes on 2MB pages, against the same `lines` packed
/// together, and the sparse chase on 4KB pages for scale. `splintered`: the sparse chase took
/// more than 1.5x the packed one, so the TLB holds this machine's 2MB pages as smaller pieces
/// (a virtual machine whose host backs guest memory with 4KB pages does this).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct TlbProbe {
    pub lines: u64,
    pub span: u64,
    pub packed_2m_ns: f64,
    pub sparse_2m_ns: f64,
    pub sparse_4k_ns: f64,
    pub splintered: bool,
}

impl TlbProbe {
    /// What the probe says, in one line.
    pub fn summary(&self) -> String {
        format!(
            "{} lines one per 4KB page over {} on 2MB pages: {:.1} ns a step, against {:.1} ns packed together ({:.1} ns on 4KB pages)",
            self.lines,
            Bytes(self.span),
            self.sparse_2m_ns,
            self.packed_2m_ns,
            self.sparse_4k_ns
        )
    }

    fn from_toml(v: &ProbeTable) -> Option<TlbProbe> {
        let num = |k: &str| v.get(k).and_then(toml_number);
        Some(TlbProbe {
            lines: v.get("lines")?.as_integer()? as u64,
            span: Bytes::parse(v.get("span")?.as_str()?).ok()?.0,
            packed_2m_ns: num("packed_2m_ns")?,
            sparse_2m_ns: num("sparse_2m_ns")?,
            sparse_4k_ns: num("sparse_4k_ns")?,
            splintered: v.get("splintered")?.as_bool()?,
        })
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = toml::map::Map::new();
        p.insert("lines".into(), toml::Value::Integer(self.lines as i64));
        p.insert("span".into(), toml::Value::String(Bytes(self.span).to_string()));
        p.insert("packed_2m_ns".into(), toml::Value::Float(self.packed_2m_ns));
        p.insert("sparse_2m_ns".into(), toml::Value::Float(self.sparse_2m_ns));
        p.insert("sparse_4k_ns".into(), toml::Value::Float(self.sparse_4k_ns));
        p.insert("splintered".into(), toml::Value::Boolean(self.splintered));
        toml::Value::Table(p)
    }
}

/// `superpager calibrate`'s walk probe (model/calibrate.py, docs/RUNTIME_MODEL.md, "The walk
/// probe"): k chases at once over one random cycle of `footprint` bytes (chase.c's CHAINS), on
/// 4KB and on 2MB pages, ns per load at each k. Each replaces a core-table number in `[cache]`:
/// - `mlp`, the most misses seen in flight at once: max over k of min(k, ns_2m(1) / ns_2m(k))
///   (on 2MB pages, where walks are fewest);
/// - `walkers`, the walkers the busiest chase needs: a walk holds one for `walk_ns`, ns_4k(1)
///   less a load's time without a walk (ns_2m(1) where 2MB pages are held whole; memory's
///   latency short of the TLB's reach where the TLB splinters them, since then the 2MB chase
///   walks too), so max over k of min(k, walk_ns / ns_4k(k)) (`walkers_rule` "busiest-walk",
///   the overlap model's reading; cache::stall_cycles). None where a walk costs nothing at one
///   chain.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct WalkProbe {
    pub footprint: u64,
    pub chains: Vec<u32>,
    pub ns_4k: Vec<f64>,
    pub ns_2m: Vec<f64>,
    pub walkers: Option<u32>,
    /// Absent in files of the probe's first version (walkers only).
    #[serde(default)]
    pub mlp: Option<u32>,
    /// How `walkers` was read from the chases: "busiest-walk" (`WALKERS_RULE`, which
    /// the overlap model takes). Absent in files whose `walkers` counted walks overlapping as the
    /// additive model read them; `host` does not take those.
    #[serde(default)]
    pub walkers_rule: Option<String>,
    /// How long one walk held a walker, in ns (`walkers`' numerator). Absent in files before
    /// the "busiest-walk" rule, where it was ns_4k(1) - ns_2m(1).
    #[serde(default)]
    pub walk_ns: Option<f64>,
    /// The norm the overlap's bounds combine by (`[cache] bounds_norm`), fitted to the probe's
    /// chases by the model (model/calibrate.py `fit_bounds_norm`): 0, the largest bound alone.
    /// Absent in files written before the fifty-first session, or where no chase count filled a
    /// resource.
    #[serde(default)]
    pub bounds_norm: Option<f64>,
    /// Each norm the fit tried, with the model's error against the probe (root mean square of the
    /// log ratios of ns a load).
    #[serde(default)]
    pub bounds_norm_errors: Option<Vec<(f64, f64)>>,
}

/// The `walkers_rule` calibrate writes and `host` takes: "busiest-walk" (the thirty-eighth
/// session's). "busiest" (the thirty-third's) timed one walk as ns_4k(1) - ns_2m(1) on every
/// machine, which under-reads it where the TLB splinters 2MB pages (docs/RUNTIME_MODEL.md,
/// "The walk probe"); `host` does not take those, nor files without a rule.
pub const WALKERS_RULE: &str = "busiest-walk";

impl WalkProbe {
    /// `walkers` where it was read by the rule the overlap model takes (`WALKERS_RULE`).
    pub fn walkers_taken(&self) -> Option<u32> {
        self.walkers.filter(|_| self.walkers_rule.as_deref() == Some(WALKERS_RULE))
    }

    /// Whether `n` overlapping is all the probe could see: as many as the most chases it ran at
    /// once, so the machine may overlap more (docs/RUNTIME_MODEL.md, "The walk probe").
    pub fn at_ceiling(&self, n: u32) -> bool {
        self.chains.iter().max().is_some_and(|&top| n >= top)
    }

    /// What the probe measured, in one line: ns a load on 2MB pages, and what 4KB pages add, at each k.
    pub fn summary(&self) -> String {
        let by_k = |f: &dyn Fn(f64, f64) -> f64| -> String {
            self.chains.iter().zip(self.ns_4k.iter().zip(&self.ns_2m)).map(|(k, (a, b))| format!("{k}: {:.1}", f(*a, *b))).collect::<Vec<_>>().join(", ")
        };
        let walk = self.walk_ns.map(|w| format!("; one walk {w:.1} ns")).unwrap_or_default();
        format!(
            "k chases at once over {}, by k: ns a load on 2MB pages {}; what 4KB pages add {}{walk}",
            Bytes(self.footprint),
            by_k(&|_, b| b),
            by_k(&|a, b| a - b)
        )
    }

    fn from_toml(v: &ProbeTable) -> Option<WalkProbe> {
        let (chains, ns_4k, ns_2m) = read_series(v, "chains")?;
        let (walkers, mlp) = (optional_count(v, "walkers")?, optional_count(v, "mlp")?);
        let walkers_rule = v.get("walkers_rule").and_then(|r| r.as_str()).map(str::to_string);
        let walk_ns = match v.get("walk_ns") {
            Some(w) => Some(toml_number(w)?),
            None => None,
        };
        let bounds_norm = match v.get("bounds_norm") {
            Some(p) => Some(toml_number(p).filter(|&p| p == 0.0 || (1.0..=1e6).contains(&p))?),
            None => None,
        };
        let bounds_norm_errors = match v.get("bounds_norm_errors") {
            Some(e) => Some(read_pairs(e)?),
            None => None,
        };
        Some(WalkProbe {
            footprint: Bytes::parse(v.get("footprint")?.as_str()?).ok()?.0,
            chains,
            ns_4k,
            ns_2m,
            walkers,
            mlp,
            walkers_rule,
            walk_ns,
            bounds_norm,
            bounds_norm_errors,
        })
    }

    /// The norm `host` takes (`[cache] bounds_norm`): the fitted one, where it is not 0.
    pub fn bounds_norm_taken(&self) -> Option<f64> {
        self.bounds_norm.filter(|&p| p >= 1.0)
    }

    /// What the norm's fit found, in one line.
    pub fn bounds_norm_summary(&self) -> Option<String> {
        let errors = self.bounds_norm_errors.as_ref()?;
        let name = |p: f64| if p == 0.0 { "the largest".to_string() } else { format!("{p}") };
        let list = errors.iter().map(|(p, e)| format!("{} {e:.3}", name(*p))).collect::<Vec<_>>().join(", ");
        Some(format!(
            "the model on calibrate's chase read as k chases at once, its ns a load at each k where a resource is full relative to the largest k where none is, against the walk probe's likewise; error (RMS of log ratios) by norm: {list}"
        ))
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = series_toml(self.footprint, "chains", &self.chains, &self.ns_4k, &self.ns_2m);
        if let Some(r) = &self.walkers_rule {
            p.insert("walkers_rule".into(), toml::Value::String(r.clone()));
        }
        if let Some(w) = &self.walk_ns {
            p.insert("walk_ns".into(), rounded(*w));
        }
        if let Some(n) = self.bounds_norm {
            p.insert("bounds_norm".into(), toml::Value::Float(n));
        }
        if let Some(e) = &self.bounds_norm_errors {
            p.insert("bounds_norm_errors".into(), pairs_toml(e, rounded));
        }
        self.insert_counts(&mut p, self.walkers);
        toml::Value::Table(p)
    }

    /// The counts it measured (`walkers`, `mlp`), as integer keys of `t`; none where it gave no
    /// verdict. Both the probe's own table (`walkers` as read) and `[cache]` (`walkers` where
    /// host takes it: `walkers_taken`) carry them.
    fn insert_counts(&self, t: &mut toml::map::Map<String, toml::Value>, walkers: Option<u32>) {
        for (k, n) in [("walkers", walkers), ("mlp", self.mlp)] {
            if let Some(n) = n {
                t.insert(k.into(), toml::Value::Integer(n as i64));
            }
        }
    }
}

/// calibrate's window probe (`[calibration.window_probe]`, model/calibrate.py `window_probe`,
/// chase.c `window`): independent loads at random lines of `footprint`, each followed by `pads[i]`
/// register adds, ns a load on 4KB and 2MB pages (medians), and the same loop with each address
/// taking the load before's value (`dep_4k`, `dep_2m`: one load's latency, nothing overlapping).
/// - `window`: instructions the core holds behind an outstanding load. A load's latency over
///   the slope of ns against adds (on 2MB pages, where the loads overlap). It becomes `[cache]
///   rob`: the reorder buffer's entries where nothing else runs out first.
/// - `walk_hiding`: how much of what 4KB pages add a full window hides. At each pad, with n
///   loads in flight (dep_2m / ns_2m), the window's chain shows (ns_4k - ns_2m) x n of the
///   (dep_4k - dep_2m) a walk adds alone; `walk_hiding` is the k of 1 / (1 + k (n - 1)) that
///   fits those shares best (cache::stall_cycles). None where 4KB pages added nothing alone.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct WindowProbe {
    pub footprint: u64,
    pub pads: Vec<u32>,
    pub ns_4k: Vec<f64>,
    pub ns_2m: Vec<f64>,
    pub dep_4k: f64,
    pub dep_2m: f64,
    pub window: Option<u32>,
    #[serde(default)]
    pub walk_hiding: Option<f64>,
}

impl WindowProbe {
    /// What the probe measured, in one line.
    pub fn summary(&self) -> String {
        let at = |ns: &[f64]| self.pads.iter().zip(ns).map(|(p, n)| format!("{p}: {n:.1}")).collect::<Vec<_>>().join(", ");
        format!(
            "independent loads over {}, each followed by P adds, ns a load by P on 2MB pages {}; on 4KB pages {}; one load alone {:.1} / {:.1} ns on 2MB / 4KB pages",
            Bytes(self.footprint),
            at(&self.ns_2m),
            at(&self.ns_4k),
            self.dep_2m,
            self.dep_4k
        )
    }

    fn from_toml(v: &ProbeTable) -> Option<WindowProbe> {
        let (pads, ns_4k, ns_2m) = read_series(v, "pads")?;
        // A walk_hiding present must be a number from 0 up (else the probe is not read at all).
        let window = optional_count(v, "window")?;
        let walk_hiding = match v.get("walk_hiding") {
            Some(k) => Some(toml_number(k).filter(|k| (0.0..=1e6).contains(k))?),
            None => None,
        };
        Some(WindowProbe {
            footprint: Bytes::parse(v.get("footprint")?.as_str()?).ok()?.0,
            pads,
            ns_4k,
            ns_2m,
            dep_4k: v.get("dep_4k").and_then(toml_number)?,
            dep_2m: v.get("dep_2m").and_then(toml_number)?,
            window,
            walk_hiding,
        })
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = series_toml(self.footprint, "pads", &self.pads, &self.ns_4k, &self.ns_2m);
        p.insert("dep_4k".into(), rounded(self.dep_4k));
        p.insert("dep_2m".into(), rounded(self.dep_2m));
        self.insert_model_keys(&mut p, "window");
        toml::Value::Table(p)
    }

    /// What the model takes from it (`window`, `walk_hiding`), as keys of `t`, the window under
    /// `window_key` (the probe's own table: "window"; `[cache]`: "rob"); none where it gave no
    /// verdict.
    fn insert_model_keys(&self, t: &mut toml::map::Map<String, toml::Value>, window_key: &str) {
        if let Some(w) = self.window {
            t.insert(window_key.into(), toml::Value::Integer(w as i64));
        }
        if let Some(k) = self.walk_hiding {
            t.insert("walk_hiding".into(), rounded(k));
        }
    }
}

/// A probe's count under `k`: Some(None) where absent, Some(Some(n)) for a positive integer, and
/// None otherwise (a probe with a bad count is not read at all).
fn optional_count(v: &ProbeTable, k: &str) -> Option<Option<u32>> {
    match v.get(k) {
        Some(w) => u32::try_from(w.as_integer()?).ok().filter(|w| *w >= 1).map(Some),
        None => Some(None),
    }
}

/// A probe's series as its table records them: the counts under `key` (chains, pads) and ns a
/// load at each on 4KB and 2MB pages (`ns_4k`, `ns_2m`), of one length; None otherwise.
fn read_series(v: &ProbeTable, key: &str) -> Option<(Vec<u32>, Vec<f64>, Vec<f64>)> {
    let floats = |k: &str| v.get(k)?.as_array()?.iter().map(toml_number).collect::<Option<Vec<f64>>>();
    let counts: Vec<u32> = v.get(key)?.as_array()?.iter().map(|c| c.as_integer().and_then(|i| u32::try_from(i).ok())).collect::<Option<_>>()?;
    let (ns_4k, ns_2m) = (floats("ns_4k")?, floats("ns_2m")?);
    if ns_4k.len() != counts.len() || ns_2m.len() != counts.len() {
        return v.refuse(&format!("{key}, ns_4k and ns_2m are not of one length"));
    }
    Some((counts, ns_4k, ns_2m))
}

/// The table `read_series` reads, with the probe's footprint.
fn series_toml(footprint: u64, key: &str, counts: &[u32], ns_4k: &[f64], ns_2m: &[f64]) -> toml::map::Map<String, toml::Value> {
    let mut p = toml::map::Map::new();
    p.insert("footprint".into(), toml::Value::String(Bytes(footprint).to_string()));
    p.insert(key.into(), toml::Value::Array(counts.iter().map(|k| toml::Value::Integer(*k as i64)).collect()));
    p.insert("ns_4k".into(), toml::Value::Array(ns_4k.iter().copied().map(rounded).collect()));
    p.insert("ns_2m".into(), toml::Value::Array(ns_2m.iter().copied().map(rounded).collect()));
    p
}

/// A fit's (value tried, error) pairs as its table records them, `[[x, e], ...]`; None where any
/// entry is not a pair of numbers.
fn read_pairs(v: &toml::Value) -> Option<Vec<(f64, f64)>> {
    v.as_array()?
        .iter()
        .map(|pair| {
            let a = pair.as_array().filter(|a| a.len() == 2)?;
            Some((toml_number(&a[0])?, toml_number(&a[1])?))
        })
        .collect()
}

/// The table `read_pairs` reads, each error written by `error`.
fn pairs_toml(pairs: &[(f64, f64)], error: fn(f64) -> toml::Value) -> toml::Value {
    toml::Value::Array(pairs.iter().map(|&(x, e)| toml::Value::Array(vec![toml::Value::Float(x), error(e)])).collect())
}

/// A number as the calibration file records it: to three decimals (a time in ns to the picosecond).
fn rounded(x: f64) -> toml::Value {
    toml::Value::Float((x * 1000.0).round() / 1000.0)
}

/// A TOML number, float or integer (a hand-edited file may write `dram_cycles = 300`).
fn toml_number(x: &toml::Value) -> Option<f64> {
    x.as_float().or_else(|| x.as_integer().map(|i| i as f64))
}

/// calibrate's frame probe (`[calibration.frames]`): `footprint` bytes touched page by page on
/// 4KB pages, `repeats` times, each read back from /proc/self/pagemap. `new_runs` is, per
/// repeat, the share of neighbouring pages whose frames are not neighbours (a new run of frames
/// starts); `scatter` is their median, which becomes the machine's `[frames] scatter`
/// (os/frames `Scatter`: the data caches are indexed by the frames a kernel really hands out).
/// `groups_8` and `groups_512` (per repeat; empty in files written before the forty-sixth
/// session) are how close together the frames lie: the distinct aligned groups of 8 and of 512
/// frames the pages are in, a page. On a nested machine whose host maps guest memory with 4KB
/// pages those are the host page-table lines and pages a process's walks read. Recorded, not
/// used by the model (`scatter` places a new run anywhere; docs/RUNTIME_MODEL.md, "Does the
/// machine care where the frames are?": the machine's speedups did not follow them).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct FrameProbe {
    pub footprint: u64,
    pub new_runs: Vec<f64>,
    pub scatter: f64,
    #[serde(default)]
    pub groups_8: Vec<f64>,
    #[serde(default)]
    pub groups_512: Vec<f64>,
}

impl FrameProbe {
    /// What the probe says, in one line.
    pub fn summary(&self) -> String {
        let list = |xs: &[f64], digits: usize| xs.iter().map(|f| format!("{f:.digits$}")).collect::<Vec<_>>().join(", ");
        let mut s = format!(
            "{} touched page by page on 4KB pages, read back from /proc/self/pagemap: a new run of frames starts at {} of the pages (the median of {})",
            Bytes(self.footprint),
            format_args!("{:.2}", self.scatter),
            list(&self.new_runs, 2)
        );
        if !self.groups_8.is_empty() && !self.groups_512.is_empty() {
            s += &format!(
                "; the pages lie in {} distinct groups of 8 frames a page and {} of 512 (recorded, not used)",
                list(&self.groups_8, 3),
                list(&self.groups_512, 4)
            );
        }
        s
    }

    fn from_toml(v: &ProbeTable) -> Option<FrameProbe> {
        let scatter = v.get("scatter").and_then(toml_number).filter(|f| (0.0..=1.0).contains(f))?;
        let list = |k: &str| -> Option<Vec<f64>> { Some(v.get(k)?.as_array()?.iter().filter_map(toml_number).collect()) };
        Some(FrameProbe {
            footprint: Bytes::parse(v.get("footprint")?.as_str()?).ok()?.0,
            new_runs: list("new_runs")?,
            scatter,
            // Absent from files written before the forty-sixth session.
            groups_8: list("groups_8").unwrap_or_default(),
            groups_512: list("groups_512").unwrap_or_default(),
        })
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = toml::map::Map::new();
        p.insert("footprint".into(), toml::Value::String(Bytes(self.footprint).to_string()));
        let floats = |xs: &[f64]| toml::Value::Array(xs.iter().map(|f| toml::Value::Float((f * 1e4).round() / 1e4)).collect());
        p.insert("new_runs".into(), floats(&self.new_runs));
        p.insert("scatter".into(), toml::Value::Float(self.rounded()));
        for (k, xs) in [("groups_8", &self.groups_8), ("groups_512", &self.groups_512)] {
            if !xs.is_empty() {
                p.insert(k.into(), floats(xs));
            }
        }
        toml::Value::Table(p)
    }

    /// `scatter` as the files carry it.
    fn rounded(&self) -> f64 {
        (self.scatter * 1e4).round() / 1e4
    }

    /// The machine's `[frames]` table.
    fn frames_toml(&self) -> toml::Value {
        let mut f = toml::map::Map::new();
        f.insert("scatter".into(), toml::Value::Float(self.rounded()));
        toml::Value::Table(f)
    }
}

/// calibrate's host-frames probe (`[calibration.host_frames]`, model/calibrate.py
/// `host_frames_probe`): a dependent chase on 2MB pages over `lines` lines one every 64KiB
/// (`strided_ns` a step), and over as many one every 68KiB (`control_ns`). An L2 of 1MiB or 2MiB
/// in 16 ways indexes its sets by physical bits 6-15 or 6-16: the strided lines share bits 6-15,
/// and so crowd one or two sets, where the host keeps a guest 2MB page's 4KB pieces in order; the
/// control's lines differ in bits 12-15 either way. `scattered` is calibrate's verdict: the
/// strided chase was not much slower than the control, so the L2 did not see the guest's bits
/// 12-15, and a nested `host` scatters its host frames (`HostFrames::Scattered`). Only a host
/// that splinters 2MB pages is nested, so only there does the verdict count.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct HostFramesProbe {
    pub lines: u64,
    pub strided_ns: f64,
    pub control_ns: f64,
    pub scattered: bool,
}

impl HostFramesProbe {
    /// What the probe says, in one line.
    pub fn summary(&self) -> String {
        format!(
            "a chase on 2MB pages over {} lines one every 64KiB took {:.1} ns a step, over as many one every 68KiB {:.1} ns ({:.2}x): {}",
            self.lines,
            self.strided_ns,
            self.control_ns,
            self.strided_ns / self.control_ns,
            if self.scattered {
                "the L2 does not see the guest's address bits 12-15, so the host scatters its frames"
            } else {
                "the L2 sees the guest's address bits 12-15, so the host keeps them in order"
            }
        )
    }

    fn from_toml(v: &ProbeTable) -> Option<HostFramesProbe> {
        let (strided_ns, control_ns) = (v.get("strided_ns").and_then(toml_number)?, v.get("control_ns").and_then(toml_number)?);
        if !(strided_ns > 0.0 && control_ns > 0.0) {
            return v.refuse("strided_ns and control_ns are not both above 0");
        }
        Some(HostFramesProbe { lines: v.get("lines")?.as_integer()? as u64, strided_ns, control_ns, scattered: v.get("scattered")?.as_bool()? })
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = toml::map::Map::new();
        p.insert("lines".into(), toml::Value::Integer(self.lines as i64));
        p.insert("strided_ns".into(), toml::Value::Float((self.strided_ns * 1000.0).round() / 1000.0));
        p.insert("control_ns".into(), toml::Value::Float((self.control_ns * 1000.0).round() / 1000.0));
        p.insert("scattered".into(), toml::Value::Boolean(self.scattered));
        toml::Value::Table(p)
    }
}

/// calibrate's scan probe (model/chase.c `scan`; docs/RUNTIME_MODEL.md, "The last level's
/// latency, read where it holds the chase"): on 2MB pages, one step of a dependent chase over a
/// hot cycle of `hot` bytes, then `streams` independent loads at random lines of `region`,
/// `ns_hot` an iteration; `ns_alone` the same with a hot cycle of one line. Between two reads of
/// a hot line `passing_lines` distinct lines pass, more than the caches hold: an LRU hierarchy
/// misses every hot read (an iteration then takes memory's latency at least), a hierarchy that
/// keeps lines read again does not. Recorded for the model's replacement policy to be fitted
/// with; no part of the model reads it yet (the model's caches are LRU).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct ScanProbe {
    pub hot: u64,
    pub region: u64,
    pub streams: u32,
    pub ns_hot: f64,
    pub ns_alone: f64,
}

impl ScanProbe {
    /// Distinct lines between two reads of a hot line.
    pub fn passing_lines(&self) -> u64 {
        self.hot / 64 * (1 + self.streams as u64)
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = toml::map::Map::new();
        p.insert("hot".into(), toml::Value::String(Bytes(self.hot).to_string()));
        p.insert("region".into(), toml::Value::String(Bytes(self.region).to_string()));
        p.insert("streams".into(), toml::Value::Integer(self.streams as i64));
        p.insert("passing_lines".into(), toml::Value::Integer(self.passing_lines() as i64));
        p.insert("ns_hot".into(), toml::Value::Float((self.ns_hot * 1000.0).round() / 1000.0));
        p.insert("ns_alone".into(), toml::Value::Float((self.ns_alone * 1000.0).round() / 1000.0));
        toml::Value::Table(p)
    }
}

/// Memory's latency where calibrate's chase has left the last cache level but not yet the TLB's
/// reach: the 2MB point at the smallest footprint at least twice what the last level was seen to
/// hold (model/calibrate.py `near_memory`). On a machine whose TLB splinters 2MB pages, the chase
/// at its largest footprint also pays a 4KB TLB miss and a two-dimensional walk on most steps;
/// `host` is then nested (the walks are simulated) and takes memory's latency from here, so the
/// walks are not charged twice (docs/RUNTIME_MODEL.md, "The splintered host").
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct NearMemory {
    pub footprint: u64,
    pub ns: f64,
    pub cycles: f64,
}

impl NearMemory {
    fn from_toml(v: &ProbeTable) -> Option<NearMemory> {
        let (ns, cycles) = (v.get("ns").and_then(toml_number)?, v.get("cycles").and_then(toml_number)?);
        if !(ns > 0.0 && cycles > 0.0) {
            return v.refuse("ns and cycles are not both above 0");
        }
        Some(NearMemory { footprint: Bytes::parse(v.get("footprint")?.as_str()?).ok()?.0, ns, cycles })
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = toml::map::Map::new();
        p.insert("footprint".into(), toml::Value::String(Bytes(self.footprint).to_string()));
        p.insert("ns".into(), toml::Value::Float((self.ns * 1000.0).round() / 1000.0));
        p.insert("cycles".into(), toml::Value::Float((self.cycles * 10.0).round() / 10.0));
        toml::Value::Table(p)
    }
}

/// What `superpager calibrate` hands over to be written as the calibrated host machine.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct CalibrationInput {
    pub cpu: String,
    pub date: String,
    pub method: String,
    pub clock_ghz: f64,
    pub level_cycles: Vec<f64>,
    pub level_sizes: Vec<String>,
    pub dram_cycles: f64,
    /// (footprint bytes, "4k" or "2m", ns per step) for every point measured.
    pub points: Vec<(u64, String, f64)>,
    /// None where 2MB pages could not be had.
    #[serde(default)]
    pub tlb_probe: Option<TlbProbe>,
    /// None where 2MB pages could not be had.
    #[serde(default)]
    pub walk_probe: Option<WalkProbe>,
    /// None where no point lay that far beyond the last level.
    #[serde(default)]
    pub near_memory: Option<NearMemory>,
    /// None where the chase at the largest footprint lacks a 4KB or a 2MB point.
    #[serde(default)]
    pub last_level_fit: Option<LastLevelFit>,
    /// None where /proc/self/pagemap gave no frame numbers (not root).
    #[serde(default)]
    pub frames: Option<FrameProbe>,
    /// None where 2MB pages could not be had.
    #[serde(default)]
    pub host_frames: Option<HostFramesProbe>,
    /// None where 2MB pages could not be had, or the architecture has no add chain in chase.c.
    #[serde(default)]
    pub window_probe: Option<WindowProbe>,
    /// None where 2MB pages could not be had.
    #[serde(default)]
    pub scan_probe: Option<ScanProbe>,
    /// The walk probe over four times `walk_probe`'s footprint; None where it did not run.
    #[serde(default)]
    pub walk_probe_far: Option<WalkProbe>,
    /// None where the share's fit did not run (`ShareFit`).
    #[serde(default)]
    pub share_fit: Option<ShareFit>,
    /// None where 2MB pages could not be had (`StreamProbe`).
    #[serde(default)]
    pub stream_probe: Option<StreamProbe>,
}

/// The ways of a level simulated smaller than CPUID says (a size calibrate saw, or the last
/// level's fit): as many as keep its set count a power of two, at most CPUID's `ways`. Why: the
/// level is this machine's share of a larger cache, whose sets are indexed by the address's low
/// bits; other tenants' lines take ways in every set, not whole sets. A set count that is no
/// power of two is hashed (cache.rs `set_of`), which spreads lines whose low bits agree (a
/// binary search's probes, a page's same offset on many pages) over every set, so the fit's
/// sizes of three quarters (1536KiB in 16 ways) and halves (2MiB) would index differently, and
/// a program with such lines would see a cache of another kind at each. 1536KiB in 16 ways of
/// 64 bytes (1,536 sets) becomes 12 ways of 2,048 sets; 2MiB keeps 16 ways. A size no power of
/// two of sets fits keeps CPUID's ways (and is hashed).
pub fn share_ways(bytes: u64, line: u64, ways: u64) -> u64 {
    (1..=ways.max(1)).rev().find(|&w| bytes.is_multiple_of(line * w) && (bytes / (line * w)).is_power_of_two()).unwrap_or(ways)
}

/// The ways of a level of `cpu_bytes` in `cpu_ways` (CPUID's) simulated at `bytes`: the share's
/// (`share_ways`) where `bytes` is smaller, else None (CPUID's shape stands).
fn shared_ways(bytes: u64, cpu_bytes: u64, cpu_ways: u64, line: u64) -> Option<u64> {
    (bytes < cpu_bytes).then(|| share_ways(bytes, line, cpu_ways))
}

/// A `[cache]` level entry (its size and ways CPUID's) at the `size` calibrate saw or fitted.
fn resize_level(level: &mut toml::map::Map<String, toml::Value>, size: &str, line: u64) {
    let cpu_bytes = level.get("size").and_then(|s| s.as_str()).and_then(|s| Bytes::parse(s).ok());
    let cpu_ways = level.get("ways").and_then(|w| w.as_integer());
    level.insert("size".into(), toml::Value::String(size.to_string()));
    if let (Some(cpu), Some(w), Ok(b)) = (cpu_bytes, cpu_ways, Bytes::parse(size)) {
        if let Some(ways) = shared_ways(b.0, cpu.0, w as u64, line) {
            level.insert("ways".into(), toml::Value::Integer(ways as i64));
        }
    }
}

/// The calibrated host machine file: `host_toml` (the host preset as built from CPUID) with the
/// measured latencies, effective sizes and clock, and a `[calibration]` table saying how.
pub fn calibrated_toml(host_toml: &str, c: &CalibrationInput) -> std::result::Result<String, String> {
    let mut v: toml::Value = toml::from_str(host_toml).map_err(|e| e.to_string())?;
    let t = v.as_table_mut().ok_or("the host preset is not a table")?;
    let cache = t.get_mut("cache").and_then(|x| x.as_table_mut()).ok_or("the host machine has no [cache] section: CPUID and sysfs gave no data cache")?;
    let line = cache.get("line_bytes").and_then(|x| x.as_integer()).unwrap_or(64) as u64;
    let levels = cache.get_mut("levels").and_then(|x| x.as_array_mut()).ok_or("[cache] has no levels")?;
    if levels.len() != c.level_cycles.len() {
        return Err(format!("{} latencies for {} cache levels", c.level_cycles.len(), levels.len()));
    }
    // The last level's latency where the fit read it with the size it chose.
    let last = levels.len().saturating_sub(1);
    let fitted_level = c.last_level_fit.as_ref().and_then(|f| f.level());
    // A shared last level stays at CPUID's size (`LastLevelFit::tenant_fill_rate`).
    let shared = c.last_level_fit.as_ref().and_then(|f| f.tenant_fill_rate);
    for (i, l) in levels.iter_mut().enumerate() {
        let l = l.as_table_mut().ok_or("a cache level is not a table")?;
        let cycles = fitted_level.filter(|_| i == last).unwrap_or(c.level_cycles[i]);
        l.insert("cycles".into(), toml::Value::Float((cycles * 10.0).round() / 10.0));
        if let Some(sz) = c.level_sizes.get(i).filter(|s| !(s.is_empty() || i == last && shared.is_some())) {
            resize_level(l, sz, line);
        }
    }
    // Splintered: memory's latency short of the TLB's reach, since the walks are nested below;
    // where the last level's fit set it, the fit's (it reads the whole curve, not one point).
    let near = c.near_memory.as_ref().filter(|_| c.tlb_probe.as_ref().is_some_and(|p| p.splintered));
    let fitted = c.last_level_fit.as_ref().and_then(|f| f.memory());
    let dram = fitted.unwrap_or_else(|| near.map_or(c.dram_cycles, |m| m.cycles));
    cache.insert("dram_cycles".into(), toml::Value::Float((dram * 10.0).round() / 10.0));
    if let Some(p) = &c.walk_probe {
        // With the last level shared the rule's walkers are not taken (`HostReport::walkers`).
        p.insert_counts(cache, p.walkers_taken().filter(|_| shared.is_none()));
        if let Some(n) = p.bounds_norm_taken() {
            cache.insert("bounds_norm".into(), toml::Value::Float(n));
        }
    }
    if let Some(p) = &c.window_probe {
        p.insert_model_keys(cache, "rob");
    }
    if let Some(p) = &c.stream_probe {
        p.insert_model_keys(cache, line, c.clock_ghz);
    }
    if let Some(r) = shared {
        cache.insert("tenant_fill_rate".into(), toml::Value::Float(r));
        if let Some(taken) = c.share_fit.as_ref().and_then(|f| f.taken()) {
            insert_share_keys(cache, taken);
        }
        if let Some(f) = &c.last_level_fit {
            f.insert_share_law(cache);
        }
    }
    if let Some(cost) = t.get_mut("cost").and_then(|x| x.as_table_mut()) {
        cost.insert("clock_ghz".into(), toml::Value::Float(c.clock_ghz));
    }
    let mut cal = toml::map::Map::new();
    cal.insert("cpu".into(), toml::Value::String(c.cpu.clone()));
    cal.insert("date".into(), toml::Value::String(c.date.clone()));
    cal.insert("method".into(), toml::Value::String(c.method.clone()));
    let pts = c
        .points
        .iter()
        .map(|(fp, pages, ns)| {
            let mut p = toml::map::Map::new();
            p.insert("footprint".into(), toml::Value::String(Bytes(*fp).to_string()));
            p.insert("pages".into(), toml::Value::String(pages.clone()));
            p.insert("ns".into(), toml::Value::Float((ns * 1000.0).round() / 1000.0));
            toml::Value::Table(p)
        })
        .collect();
    cal.insert("points".into(), toml::Value::Array(pts));
    if let Some(p) = &c.tlb_probe {
        cal.insert("tlb_probe".into(), p.to_toml());
    }
    if let Some(p) = &c.walk_probe {
        cal.insert("walk_probe".into(), p.to_toml());
    }
    if let Some(p) = &c.walk_probe_far {
        cal.insert("walk_probe_far".into(), p.to_toml());
    }
    if let Some(f) = &c.share_fit {
        cal.insert("share_fit".into(), f.to_toml());
    }
    if let Some(s) = &c.stream_probe {
        cal.insert("stream_probe".into(), s.to_toml());
    }
    if let Some(m) = &c.near_memory {
        cal.insert("near_memory".into(), m.to_toml());
    }
    if let Some(f) = &c.last_level_fit {
        cal.insert("last_level_fit".into(), f.to_toml());
    }
    if let Some(f) = &c.frames {
        cal.insert("frames".into(), f.to_toml());
        t.insert("frames".into(), f.frames_toml());
    }
    if let Some(w) = &c.window_probe {
        cal.insert("window_probe".into(), w.to_toml());
    }
    if let Some(h) = &c.host_frames {
        cal.insert("host_frames".into(), h.to_toml());
    }
    if let Some(p) = &c.scan_probe {
        cal.insert("scan_probe".into(), p.to_toml());
    }
    t.insert("calibration".into(), toml::Value::Table(cal));
    if near.is_some() {
        nest_over_4kib_pages(t, c.host_frames.as_ref())?;
    }
    t.insert("name".into(), toml::Value::String("host".into()));
    toml::to_string(&v).map_err(|e| e.to_string())
}

/// Make machine table `t` the guest of a hypervisor that backs it with 4KB pages: nested walks
/// over host tables of as many levels as the guest's, 2MB guest pages splintered into 4KB TLB
/// entries (docs/MODEL.md, "Splintering"). Its memory latency is the caller's to set
/// (`NearMemory`). Its frames are scattered where the host-frames probe says so.
fn nest_over_4kib_pages(t: &mut toml::map::Map<String, toml::Value>, frames: Option<&HostFramesProbe>) -> std::result::Result<(), String> {
    let walker = t.get_mut("walker").and_then(|w| w.as_table_mut()).ok_or("the host machine has no [walker] section")?;
    let levels = walker.get("levels").and_then(|l| l.as_integer()).ok_or("the host machine's [walker] has no levels")?;
    let mut nested = toml::map::Map::new();
    nested.insert("host_levels".into(), toml::Value::Integer(levels));
    nested.insert("host_page_size".into(), toml::Value::String("4KiB".into()));
    if frames.is_some_and(|f| f.scattered) {
        nested.insert("host_frames".into(), toml::Value::String("scattered".into()));
    }
    walker.insert("nested".into(), toml::Value::Table(nested));
    Ok(())
}

/// `superpager calibrate`'s fit of the last cache level's capacity (model/calibrate.py
/// `fit_last_level`; docs/RUNTIME_MODEL.md, "The last level's fit"). The model itself is run on
/// the chase at `footprint` (one random cycle of lines, every step dependent), on 4KB and on 2MB
/// pages, with the last level at each of `sizes`; `chosen` is the size whose predicted ns a step
/// come nearest to what the chase measured there (root mean square of the log ratios, both page
/// sizes; the larger size on a tie). Why a fit at all: a virtual machine shares its host's last
/// level with other tenants, and what keeps a page-table line between two of its walks is the
/// capacity left to it, which CPUID's size does not say and a cyclic chase alone does not show.
///
/// Since the forty-fourth session the fit also sets memory's latency ("Memory's latency, fitted"):
/// for each size it takes the latency (`memory_cycles`) at which the model comes nearest to the
/// chase at every one of `footprints` on both page sizes, and `chosen` is the size whose pair
/// comes nearest over all of them (`rms`). Memory's latency read from one point (`near_memory`,
/// the largest point) mixes in the last level's hits or the walks; the fit does not. Files
/// written before carry neither, and keep memory's latency as read.
///
/// Since the forty-fifth session each size also takes the last level's latency
/// (`level_cycles`) from the 2MB chase at the largest footprint past the level above that the
/// size holds whole, not from a point past it where memory serves part of the chase ("The last
/// level's latency, read where it holds the chase"). Files written before keep it as read.
/// Invariants: `sizes`, `ns_4k` and `ns_2m` have one entry per size, sizes descending, and
/// `chosen` is one of `sizes`; `memory_cycles`, `rms` and `level_cycles` are empty or have one entry per size;
/// `footprints` is empty (the fit ran at `footprint` alone) or ascending and ends at `footprint`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct LastLevelFit {
    pub footprint: u64,
    pub measured_4k_ns: f64,
    pub measured_2m_ns: f64,
    pub sizes: Vec<u64>,
    pub ns_4k: Vec<f64>,
    pub ns_2m: Vec<f64>,
    pub chosen: u64,
    /// The footprints whose chase points the fit compared (empty: `footprint` alone).
    #[serde(default)]
    pub footprints: Vec<u64>,
    /// Memory's latency (cycles) fitted with each size (empty: not fitted).
    #[serde(default)]
    pub memory_cycles: Vec<f64>,
    /// Root mean square of the log ratios over every point compared, at each size.
    #[serde(default)]
    pub rms: Vec<f64>,
    /// The last level's latency (cycles) at each size: the 2MB chase at the largest footprint
    /// past the level above that the size holds whole (empty: the latency as read, one for every
    /// size).
    #[serde(default)]
    pub level_cycles: Vec<f64>,
    /// The rate at which other tenants fill the level (lines a ns) that leaves the chase the
    /// chosen size: where set, `host` simulates the level at CPUID's size, shared (cache.rs
    /// `CacheSpec::tenant_fill_rate`; docs/RUNTIME_MODEL.md, "A last level shared by the
    /// second"). None in files written before it.
    #[serde(default)]
    pub tenant_fill_rate: Option<f64>,
    /// How a share of the level keeps its hits where it is shared (cache.rs
    /// `CacheSpec::share_law`): the reuse law in files calibrate writes since it existed, the
    /// depth law in files from before (absent).
    #[serde(default)]
    pub share_law: Option<ShareLaw>,
}

impl LastLevelFit {
    fn chosen_at(&self) -> usize {
        self.sizes.iter().position(|s| *s == self.chosen).unwrap_or(0)
    }

    /// Memory's latency (cycles) fitted with the chosen size; None in a file from before the
    /// fit set it.
    pub fn memory(&self) -> Option<f64> {
        self.memory_cycles.get(self.chosen_at()).copied()
    }

    /// The last level's latency (cycles) read with the chosen size; None in a file from before
    /// the fit read it.
    pub fn level(&self) -> Option<f64> {
        self.level_cycles.get(self.chosen_at()).copied()
    }

    /// What was measured and what the model gave at the size chosen, in one line.
    pub fn summary(&self) -> String {
        let at = self.chosen_at();
        let (memory, over) = match (self.memory(), self.rms.get(at)) {
            (Some(m), Some(r)) => (
                format!(" and memory at {m:.1} cycles"),
                format!(
                    "; over the chase at {} on both page sizes its times are {:.1}% off the measured ones (root mean square)",
                    self.footprints.iter().map(|f| Bytes(*f).to_string()).collect::<Vec<_>>().join(", "),
                    r * 100.0
                ),
            ),
            _ => (String::new(), String::new()),
        };
        format!(
            "the model on the chase at {} gives {:.1} ns a step on 4KB pages and {:.1} on 2MB with the last level at {}{memory}, against {:.1} and {:.1} measured{over} ({} sizes tried, {} down to {})",
            Bytes(self.footprint),
            self.ns_4k.get(at).copied().unwrap_or(f64::NAN),
            self.ns_2m.get(at).copied().unwrap_or(f64::NAN),
            Bytes(self.chosen),
            self.measured_4k_ns,
            self.measured_2m_ns,
            self.sizes.len(),
            Bytes(self.sizes.first().copied().unwrap_or(0)),
            Bytes(self.sizes.last().copied().unwrap_or(0)),
        )
    }

    fn from_toml(v: &ProbeTable) -> Option<LastLevelFit> {
        let floats = |k: &str| v.get(k)?.as_array()?.iter().map(toml_number).collect::<Option<Vec<f64>>>();
        let bytes = |x: &toml::Value| Bytes::parse(x.as_str()?).ok().map(|b| b.0);
        let sizes: Vec<u64> = v.get("sizes")?.as_array()?.iter().map(bytes).collect::<Option<_>>()?;
        let (ns_4k, ns_2m) = (floats("ns_4k")?, floats("ns_2m")?);
        let chosen = bytes(v.get("chosen")?)?;
        let optional = |k: &str| if v.get(k).is_some() { floats(k) } else { Some(Vec::new()) };
        let (memory_cycles, rms, level_cycles) = (optional("memory_cycles")?, optional("rms")?, optional("level_cycles")?);
        let footprints: Vec<u64> = match v.get("footprints") {
            Some(f) => f.as_array()?.iter().map(bytes).collect::<Option<_>>()?,
            None => Vec::new(),
        };
        if !sizes.contains(&chosen) {
            return v.refuse("chosen is not one of sizes");
        }
        // A value per size; the optional series (absent from older files) may be empty instead.
        let series = [
            ("ns_4k", &ns_4k, false),
            ("ns_2m", &ns_2m, false),
            ("memory_cycles", &memory_cycles, true),
            ("rms", &rms, true),
            ("level_cycles", &level_cycles, true),
        ];
        for (k, x, optional) in series {
            if x.len() != sizes.len() && !(optional && x.is_empty()) {
                return v.refuse(&format!("{k} has {} entries for {} sizes", x.len(), sizes.len()));
            }
        }
        Some(LastLevelFit {
            footprint: Bytes::parse(v.get("footprint")?.as_str()?).ok()?.0,
            measured_4k_ns: v.get("measured_4k_ns").and_then(toml_number)?,
            measured_2m_ns: v.get("measured_2m_ns").and_then(toml_number)?,
            sizes,
            ns_4k,
            ns_2m,
            chosen,
            footprints,
            memory_cycles,
            rms,
            level_cycles,
            tenant_fill_rate: v.get("tenant_fill_rate").and_then(toml_number).filter(|r| *r > 0.0 && r.is_finite()),
            share_law: match v.get("share_law") {
                Some(l) => Some(ShareLaw::parse(l.as_str()?)?),
                None => None,
            },
        })
    }

    /// The `[cache] share_law` a shared level takes from the fit: "reuse" where the fit says so
    /// (nothing is written for the depth law, the default).
    fn insert_share_law(&self, cache: &mut toml::map::Map<String, toml::Value>) {
        if self.tenant_fill_rate.is_some() && self.share_law == Some(ShareLaw::Reuse) {
            cache.insert("share_law".into(), toml::Value::String(ShareLaw::Reuse.name().into()));
        }
    }

    fn to_toml(&self) -> toml::Value {
        let round = |x: &f64| toml::Value::Float((x * 1000.0).round() / 1000.0);
        let size = |b: &u64| toml::Value::String(Bytes(*b).to_string());
        let mut p = toml::map::Map::new();
        p.insert("footprint".into(), size(&self.footprint));
        p.insert("measured_4k_ns".into(), round(&self.measured_4k_ns));
        p.insert("measured_2m_ns".into(), round(&self.measured_2m_ns));
        p.insert("sizes".into(), toml::Value::Array(self.sizes.iter().map(size).collect()));
        p.insert("ns_4k".into(), toml::Value::Array(self.ns_4k.iter().map(round).collect()));
        p.insert("ns_2m".into(), toml::Value::Array(self.ns_2m.iter().map(round).collect()));
        p.insert("chosen".into(), size(&self.chosen));
        if let Some(r) = self.tenant_fill_rate {
            p.insert("tenant_fill_rate".into(), toml::Value::Float((r * 1e6).round() / 1e6));
        }
        if let Some(l) = self.share_law {
            p.insert("share_law".into(), toml::Value::String(l.name().into()));
        }
        if !self.footprints.is_empty() {
            p.insert("footprints".into(), toml::Value::Array(self.footprints.iter().map(size).collect()));
        }
        let cycles = |x: &f64| toml::Value::Float((x * 10.0).round() / 10.0);
        for (key, v) in [("memory_cycles", &self.memory_cycles), ("level_cycles", &self.level_cycles)] {
            if !v.is_empty() {
                p.insert(key.into(), toml::Value::Array(v.iter().map(cycles).collect()));
            }
        }
        if !self.rms.is_empty() {
            let share = |x: &f64| toml::Value::Float((x * 10000.0).round() / 10000.0);
            p.insert("rms".into(), toml::Value::Array(self.rms.iter().map(share).collect()));
        }
        toml::Value::Table(p)
    }
}

/// `superpager calibrate`'s fit of how a program's share of the shared last level grows with its
/// fills (model/calibrate.py `fit_share_exponent`; docs/RUNTIME_MODEL.md, "The share's exponent,
/// fitted"). The model is run on calibrate's chase read as k chases at once over the walk probe's
/// footprint and over the far walk probe's (four times it), first as calibrate wrote it (the
/// exponent 1, `walk_hiding` as the window probe read it), then with each exponent a of the fit's
/// and `walk_hiding` 0, the tenants' rate set so that the one chase keeps the size the last
/// level's fit chose: R_a = R (C / s - 1)^(1/a - 1). The candidate whose ns a load at every k of
/// two or more is nearest both probes (root mean square of the log ratios, 4KB and 2MB pages)
/// is taken.
/// Invariants: `exponent` is within `SHARE_EXPONENTS`; `walk_hiding` and `tenant_fill_rate` are
/// both present (a candidate with `walk_hiding` 0 won) or both absent (the model as calibrate
/// wrote it won, and `host` takes nothing from the fit).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct ShareFit {
    pub exponent: f64,
    #[serde(default)]
    pub walk_hiding: Option<f64>,
    #[serde(default)]
    pub tenant_fill_rate: Option<f64>,
    /// The error of the model as calibrate wrote it (exponent 1, the window probe's hiding).
    pub as_written_error: f64,
    /// Each exponent tried with `walk_hiding` 0, and its error.
    pub errors: Vec<(f64, f64)>,
}

impl ShareFit {
    /// (exponent, walk_hiding, tenants' rate) `host` takes, where a candidate other than the
    /// model as written won.
    pub fn taken(&self) -> Option<(f64, f64, f64)> {
        Some((self.exponent, self.walk_hiding?, self.tenant_fill_rate?))
    }

    /// What the fit found, in one line.
    pub fn summary(&self) -> String {
        let list = self.errors.iter().map(|(a, e)| format!("{a} {e:.3}")).collect::<Vec<_>>().join(", ");
        format!(
            "the model on calibrate's chase read as k chases at once over both walk probes' footprints, against them (RMS of log ratios of ns a load, k from 2): as written {:.3}; with walk_hiding 0, by exponent: {list}",
            self.as_written_error
        )
    }

    fn from_toml(v: &ProbeTable) -> Option<ShareFit> {
        let exponent = v.get("exponent").and_then(toml_number).filter(|a| crate::mmu::machine::SHARE_EXPONENTS.contains(a))?;
        let optional = |k: &str| match v.get(k) {
            Some(x) => toml_number(x).filter(|x| *x >= 0.0 && x.is_finite()).map(Some),
            None => Some(None),
        };
        let (walk_hiding, tenant_fill_rate) = (optional("walk_hiding")?, optional("tenant_fill_rate")?);
        if walk_hiding.is_some() != tenant_fill_rate.is_some() {
            return v.refuse("walk_hiding and tenant_fill_rate are not both present or both absent");
        }
        let errors = read_pairs(v.get("errors")?)?;
        Some(ShareFit { exponent, walk_hiding, tenant_fill_rate, as_written_error: v.get("as_written_error").and_then(toml_number)?, errors })
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = toml::map::Map::new();
        p.insert("exponent".into(), toml::Value::Float(self.exponent));
        if let Some(k) = self.walk_hiding {
            p.insert("walk_hiding".into(), rounded(k));
        }
        if let Some(r) = self.tenant_fill_rate {
            p.insert("tenant_fill_rate".into(), toml::Value::Float((r * 1e6).round() / 1e6));
        }
        let share = |x: f64| toml::Value::Float((x * 10000.0).round() / 10000.0);
        p.insert("as_written_error".into(), share(self.as_written_error));
        p.insert("errors".into(), pairs_toml(&self.errors, share));
        toml::Value::Table(p)
    }
}

/// calibrate's stream probe (chase.c `sweep`, docs/RUNTIME_MODEL.md, "Streams across pages"):
/// ns a 4KB page of a sequential read over `footprint` on 4KB pages and on 2MB pages; the
/// model's walk stall a 4KB page of the same sweep on each, with `stream_ahead` 0 on the machine
/// as written so far; and the share of a stream's walks the machine does ahead of it, 1 -
/// (measured 4KB - 2MB) / (model's 4KB - 2MB) within 0 and 1, which `host` takes as `[cache]
/// stream_ahead`.
/// Invariants: `stream_ahead`, where present, is within 0 and 1, and the model's two figures
/// are present with it (the fit ran) or absent with it (it did not).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct StreamProbe {
    pub footprint: u64,
    pub ns_4k: f64,
    pub ns_2m: f64,
    #[serde(default)]
    pub model_4k: Option<f64>,
    #[serde(default)]
    pub model_2m: Option<f64>,
    #[serde(default)]
    pub stream_ahead: Option<f64>,
}

impl StreamProbe {
    /// Cycles a line of `line_bytes` took in the sweep on 2MB pages at `clock_ghz`: memory's
    /// line rate as one core streams (`[cache] dram_line_cycles`; docs/RUNTIME_MODEL.md,
    /// "Memory's line rate"), to a tenth of a cycle; None where the probe read no time.
    pub fn line_cycles(&self, line_bytes: u64, clock_ghz: f64) -> Option<f64> {
        let c = self.ns_2m * line_bytes as f64 / 4096.0 * clock_ghz;
        (c.is_finite() && c > 0.0).then(|| (c * 10.0).round() / 10.0)
    }

    /// The share `host` takes, where the fit ran.
    pub fn taken(&self) -> Option<f64> {
        self.stream_ahead.filter(|a| (0.0..=1.0).contains(a))
    }

    /// The `[cache]` keys the probe sets, in both files `host` is written to (`calibrated_toml`,
    /// `HostReport::cache_toml`): `stream_ahead` where its fit ran, `dram_line_cycles` wherever
    /// it read a time (`line_cycles` for lines of `line_bytes` at `clock_ghz`).
    fn insert_model_keys(&self, t: &mut toml::map::Map<String, toml::Value>, line_bytes: u64, clock_ghz: f64) {
        if let Some(a) = self.taken() {
            t.insert("stream_ahead".into(), toml::Value::Float(a));
        }
        if let Some(l) = self.line_cycles(line_bytes, clock_ghz) {
            t.insert("dram_line_cycles".into(), toml::Value::Float(l));
        }
    }

    /// What the probe measured and the fit made of it, in one line.
    pub fn summary(&self) -> String {
        let measured = format!(
            "a sequential read over {} took {:.1} ns a 4KB page on 4KB pages and {:.1} on 2MB pages (chase.c sweep)",
            Bytes(self.footprint),
            self.ns_4k,
            self.ns_2m
        );
        match (self.model_4k, self.model_2m, self.taken()) {
            (Some(m4), Some(m2), Some(a)) => format!(
                "{measured}; the model's walks on the same sweep stall {m4:.1} and {m2:.1} ns a page, so the machine does {a} of a stream's walks ahead of it \
                 (1 - {:.1} / {:.1}, within 0 and 1)",
                self.ns_4k - self.ns_2m,
                m4 - m2
            ),
            _ => format!("{measured}; not fitted"),
        }
    }

    fn from_toml(v: &ProbeTable) -> Option<StreamProbe> {
        let num = |k: &str| v.get(k).and_then(toml_number);
        let stream_ahead = match v.get("stream_ahead") {
            Some(x) => Some(toml_number(x).filter(|a| (0.0..=1.0).contains(a))?),
            None => None,
        };
        let (model_4k, model_2m) = (num("model_4k"), num("model_2m"));
        if stream_ahead.is_some() != (model_4k.is_some() && model_2m.is_some()) {
            return v.refuse("stream_ahead is not given with both model_4k and model_2m");
        }
        Some(StreamProbe {
            footprint: Bytes::parse(v.get("footprint")?.as_str()?).ok()?.0,
            ns_4k: num("ns_4k")?,
            ns_2m: num("ns_2m")?,
            model_4k,
            model_2m,
            stream_ahead,
        })
    }

    fn to_toml(&self) -> toml::Value {
        let mut p = toml::map::Map::new();
        p.insert("footprint".into(), toml::Value::String(Bytes(self.footprint).to_string()));
        for (k, x) in [
            ("ns_4k", Some(self.ns_4k)),
            ("ns_2m", Some(self.ns_2m)),
            ("model_4k", self.model_4k),
            ("model_2m", self.model_2m),
            ("stream_ahead", self.stream_ahead),
        ] {
            if let Some(x) = x {
                p.insert(k.into(), toml::Value::Float((x * 1000.0).round() / 1000.0));
            }
        }
        toml::Value::Table(p)
    }
}

/// The `[cache]` keys the share's fit sets where a candidate other than the model as written
/// won: `share_exponent`, and `walk_hiding` and `tenant_fill_rate` in place of the window
/// probe's and the last level's fit's.
fn insert_share_keys(cache: &mut toml::map::Map<String, toml::Value>, (a, k, r): (f64, f64, f64)) {
    cache.insert("share_exponent".into(), toml::Value::Float(a));
    cache.insert("walk_hiding".into(), rounded(k));
    cache.insert("tenant_fill_rate".into(), toml::Value::Float(r));
}

/// The source every number of calibration `k` starts from.
fn measured_by(k: &Calibration) -> String {
    format!("measured by superpager calibrate on {} ({})", k.date, k.path)
}

/// Where `calibrate` writes, and `host` reads, the calibration: $SUPERPAGER_CALIBRATION, else
/// $XDG_CONFIG_HOME/superpager/host.toml, else ~/.config/superpager/host.toml.
pub fn calibration_path() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("SUPERPAGER_CALIBRATION") {
        return Some(p.into());
    }
    let base = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(x) => std::path::PathBuf::from(x),
        None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(base.join("superpager").join("host.toml"))
}

/// The clock's part of calibrate's `method` text: from its "; clock ..." clause to the end
/// ("clock measured by a chain of dependent adds (...), 3.342 GHz; /proc/cpuinfo says 2.246 GHz").
pub fn clock_how(method: &str) -> String {
    method.find("; clock ").map_or(String::new(), |i| method[i + 2..].to_string())
}

/// Read a calibration file (a machine TOML with a `[calibration]` table); None if it is absent,
/// unreadable, or not of this CPU (`cpu` differs from the model name), with a note saying why.
pub fn read_calibration(path: &std::path::Path, cpu: &str, notes: &mut Vec<String>) -> Option<Calibration> {
    let src = std::fs::read_to_string(path).ok()?;
    let shown = path.display().to_string();
    let v: toml::Value = match toml::from_str(&src) {
        Ok(v) => v,
        Err(e) => {
            notes.push(format!("{shown}: not read ({}); latencies are ESTIMATEs", e.message().replace('\n', " ")));
            return None;
        }
    };
    let Some(cal) = v.get("calibration") else {
        notes.push(format!("{shown}: no [calibration] table (not a file superpager calibrate wrote); latencies are ESTIMATEs"));
        return None;
    };
    let got = cal.get("cpu").and_then(|c| c.as_str()).unwrap_or_default();
    if got != cpu {
        notes.push(format!("{shown} was calibrated on '{got}', not this CPU ('{cpu}'); latencies are ESTIMATEs (run superpager calibrate)"));
        return None;
    }
    // What the latencies need: a bad or missing one drops the whole calibration, with a note
    // naming the key (never silently: the predictions would change with no word why).
    let mut refuse = |key: &str, what: &str| {
        notes.push(format!("{shown}: {key} {what}; latencies are ESTIMATEs (run superpager calibrate again)"));
        None
    };
    let cache = v.get("cache");
    let Some(levels) = cache.and_then(|c| c.get("levels")).and_then(|l| l.as_array()) else {
        return refuse("cache.levels", "is missing or not a list of levels");
    };
    let mut level_cycles = Vec::new();
    for (i, l) in levels.iter().enumerate() {
        match l.get("cycles").map(toml_number) {
            Some(Some(c)) => level_cycles.push(c),
            Some(None) => return refuse(&format!("cache.levels[{i}].cycles"), "is not a number"),
            None => {}
        }
    }
    let level_sizes: Vec<String> = levels.iter().map(|l| l.get("size").and_then(|s| s.as_str()).unwrap_or_default().to_string()).collect();
    let Some(dram_cycles) = cache.and_then(|c| c.get("dram_cycles")).and_then(toml_number) else {
        return refuse("cache.dram_cycles", "is missing or not a number");
    };
    let clock_ghz = match v.get("cost").and_then(|c| c.get("clock_ghz")).map(toml_number) {
        None => 2.5,
        Some(Some(g)) if g > 0.0 && g.is_finite() => g,
        Some(_) => return refuse("cost.clock_ghz", "is not a positive number"),
    };
    Some(Calibration {
        path: shown.to_string(),
        cpu: got.to_string(),
        date: cal.get("date").and_then(|d| d.as_str()).unwrap_or_default().to_string(),
        clock_ghz,
        clock_how: clock_how(cal.get("method").and_then(|m| m.as_str()).unwrap_or_default()),
        level_cycles,
        level_sizes,
        dram_cycles,
        tlb_probe: read_probe(cal, "tlb_probe", TlbProbe::from_toml, &shown, notes),
        walk_probe: read_probe(cal, "walk_probe", WalkProbe::from_toml, &shown, notes),
        near_memory: read_probe(cal, "near_memory", NearMemory::from_toml, &shown, notes),
        last_level_fit: read_probe(cal, "last_level_fit", LastLevelFit::from_toml, &shown, notes),
        frames: read_probe(cal, "frames", FrameProbe::from_toml, &shown, notes),
        host_frames: read_probe(cal, "host_frames", HostFramesProbe::from_toml, &shown, notes),
        window_probe: read_probe(cal, "window_probe", WindowProbe::from_toml, &shown, notes),
        walk_probe_far: read_probe(cal, "walk_probe_far", WalkProbe::from_toml, &shown, notes),
        share_fit: read_probe(cal, "share_fit", ShareFit::from_toml, &shown, notes),
        stream_probe: read_probe(cal, "stream_probe", StreamProbe::from_toml, &shown, notes),
    })
}

/// A probe's table in a calibration file: None where it is absent (a calibration from before
/// the probe, or one that skipped it); None with a note naming the table and the key its reader
/// gave up on (missing, of the wrong kind or out of its range; `ProbeTable::why`) where it is
/// present but not read, as the model then goes on without that probe and the user should know
/// why.
fn read_probe<T>(cal: &toml::Value, key: &str, from: fn(&ProbeTable) -> Option<T>, shown: &str, notes: &mut Vec<String>) -> Option<T> {
    let table = ProbeTable::new(cal.get(key)?);
    let got = from(&table);
    if got.is_none() {
        notes.push(format!("{shown}: [calibration.{key}] not read: {}; host goes on without that probe (run superpager calibrate again)", table.why()));
    }
    got
}

/// A probe's table as its reader (`from_toml`) sees it. Every reader gives up at its first key
/// that is missing or does not read (a `?`), so the last key it asked for is the one it gave up
/// on: `get` remembers it, and `why` names it for `read_probe`'s note. A check across keys
/// (series of one length, two keys given together) names its keys itself (`refuse`).
struct ProbeTable<'a> {
    table: &'a toml::Value,
    last: std::cell::RefCell<Refused>,
}

enum Refused {
    Nothing,
    Key { key: String, present: bool },
    Across(String),
}

impl<'a> ProbeTable<'a> {
    fn new(table: &'a toml::Value) -> ProbeTable<'a> {
        ProbeTable { table, last: std::cell::RefCell::new(Refused::Nothing) }
    }

    fn get(&self, key: &str) -> Option<&'a toml::Value> {
        let got = self.table.get(key);
        *self.last.borrow_mut() = Refused::Key { key: key.to_string(), present: got.is_some() };
        got
    }

    /// Give up on a check across keys, `what` saying which and why.
    fn refuse<T>(&self, what: &str) -> Option<T> {
        *self.last.borrow_mut() = Refused::Across(what.to_string());
        None
    }

    /// Why the reader gave up, in a phrase: the key and its value as the file has it.
    fn why(&self) -> String {
        if !self.table.is_table() {
            return "it is not a table of keys".to_string();
        }
        match &*self.last.borrow() {
            Refused::Nothing => "no key read".to_string(),
            Refused::Key { key, present: false } => format!("{key} is missing"),
            Refused::Key { key, present: true } => {
                let value = self.table.get(key).map(|v| v.to_string()).unwrap_or_default();
                let value = if value.chars().count() > 40 { format!("{}...", value.chars().take(40).collect::<String>()) } else { value };
                format!("{key} = {value} is of the wrong kind or out of its range")
            }
            Refused::Across(what) => what.clone(),
        }
    }
}

/// The out-of-order resources the overlap model needs, for the cores we know, with sources.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreResources {
    pub core: &'static str,
    /// Reorder-buffer entries.
    pub rob: u32,
    /// L1D misses in flight (fill buffers / miss address buffers).
    pub mlp: u32,
    /// Concurrent hardware page walks.
    pub walkers: u32,
    pub source: &'static str,
    /// The preset (mmu/machine.rs PRESETS) whose TLBs are this core's, from its vendor's documents:
    /// `host` takes them when CPUID gives no TLB geometry or a smaller one. None: host.toml's Zen 3 geometry stays.
    pub tlb_preset: Option<&'static str>,
}

/// Whether the walker's loads that miss the L1D take its fill buffers (`[cache]
/// walk_fill_buffers`), a property of the vendor's design, and where that comes from.
pub fn walk_fill_buffers(vendor: &str) -> (bool, &'static str) {
    let intel = vendor == "GenuineIntel";
    (
        intel,
        if intel {
            // The event exists on Haswell and Broadwell; later cores' manuals no longer list it.
            "Intel's PAGE_WALKER_LOADS.DTLB_L1 event (Haswell, Broadwell: event 0xBC umask 0x11) counts walker loads \"that hit in the L1+FB\": \
         they look up the L1D and its fill buffers as loads do; ESTIMATE that later cores keep this"
        } else {
            "ESTIMATE: nothing AMD publishes (its optimization guides, its PPRs' events) puts table-walker loads in the L1D's miss buffers, \
         and nothing is known of other vendors here: walks take walkers only"
        },
    )
}

/// The share of the data misses in a sequential stream that the second level's prefetcher
/// runs ahead of (`[cache] stream_prefetch`), by vendor, and where that comes from.
pub fn stream_prefetch(vendor: &str) -> (f64, &'static str) {
    match vendor {
        "AuthenticAMD" | "HygonGenuine" => (
            1.0,
            "AMD's Software Optimization Guide for AMD64 Processors (25112 rev. 3.06, 5.6 \"Hardware Prefetching\"): misses to lines l and l + 1 \
             start a prefetch of l + 3 into the L2, ascending or descending; later guides keep the L2 stream prefetcher. Not measured here",
        ),
        "GenuineIntel" => (
            1.0,
            "Intel's IA-32 Optimization Reference Manual (ch. 6, \"Optimizing Cache Usage\"): the streamer follows up to 8 streams into the L2, \
             none across a 4K boundary; later manuals keep it. Not measured here",
        ),
        _ => (0.0, "ESTIMATE: nothing known of this vendor's prefetchers here: every miss costs its level"),
    }
}

/// Known cores by (vendor, family, model); unknown ones get ESTIMATEs.
pub fn core_resources(vendor: &str, family: u32, model: u32) -> CoreResources {
    match (vendor, family, model) {
        // Golden Cove / Raptor Cove server cores: Sapphire Rapids (0x8F), Emerald Rapids (0xCF);
        // client Alder/Raptor Lake P-cores (0x97, 0x9A, 0xB7, 0xBA, 0xBF).
        ("GenuineIntel", 6, 0x8F | 0xCF | 0x97 | 0x9A | 0xB7 | 0xBA | 0xBF) => CoreResources {
            core: "Golden Cove / Raptor Cove",
            rob: 512,
            mlp: 16,
            walkers: 4,
            source: "Intel Architecture Day 2021 (Golden Cove: 512-entry ROB, 4 page walkers); Intel 64 and IA-32 Optimization Reference Manual, Golden Cove (16 L1D fill buffers)",
            tlb_preset: Some("golden-cove"),
        },
        // Skylake / Cascade Lake / Ice Lake server and client. No TLB preset: Ice Lake's TLBs
        // (Sunny Cove) are not Skylake's.
        ("GenuineIntel", 6, 0x55 | 0x4E | 0x5E | 0x8E | 0x9E | 0x6A | 0x6C | 0x7E) => CoreResources {
            core: "Skylake family",
            rob: 224,
            mlp: 12,
            walkers: 2,
            source: "Intel Optimization Reference Manual, Skylake microarchitecture (224-entry ROB, 12 fill buffers, 2 page walks in parallel)",
            tlb_preset: None,
        },
        // Zen 4: Genoa and Storm Peak (0x10-0x1F), Raphael (0x60-0x6F), Phoenix (0x70-0x7F),
        // Bergamo and Siena (0xA0-0xAF). The rest of family 19h is Zen 3.
        ("AuthenticAMD", 0x19, 0x10..=0x1F | 0x60..=0x7F | 0xA0..=0xAF) => CoreResources {
            core: "Zen 4",
            rob: 320,
            mlp: 24,
            walkers: 6,
            source: "Software Optimization Guide for the AMD Zen4 Microarchitecture, pub. 57647 (320-entry retire queue); 6 page table walkers and 24 outstanding L1D misses: ESTIMATE, as Zen 3",
            tlb_preset: None,
        },
        ("AuthenticAMD", 0x19, _) => CoreResources {
            core: "Zen 3",
            rob: 256,
            mlp: 24,
            walkers: 6,
            source: "AMD Software Optimization Guide for Family 19h (256-entry retire queue on Zen 3, 6 page table walkers); 24 outstanding L1D misses: ESTIMATE",
            tlb_preset: None,
        },
        // Zen 2: Rome (0x31), Renoir and Lucienne (0x60-0x6F), Matisse (0x71), Van Gogh (0x90),
        // Mendocino (0xA0). The rest of family 17h is Zen and Zen+.
        ("AuthenticAMD", 0x17, 0x30..=0x3F | 0x60..=0x7F | 0x90..=0xAF) => CoreResources {
            core: "Zen 2",
            rob: 224,
            mlp: 22,
            walkers: 2,
            source: "Software Optimization Guide for AMD Family 17h Models 30h and Greater Processors, pub. 56305 (224-entry retire queue, two hardware page table walkers); 22 outstanding L1D misses: ESTIMATE",
            tlb_preset: None,
        },
        ("AuthenticAMD", 0x17, _) => CoreResources {
            core: "Zen / Zen+",
            rob: 192,
            mlp: 22,
            walkers: 2,
            source: "Software Optimization Guide for AMD Family 17h Processors, pub. 55723 (192-entry retire queue, two page table walkers); 22 outstanding L1D misses: ESTIMATE",
            tlb_preset: None,
        },
        ("AuthenticAMD", 0x1A, _) => CoreResources {
            core: "Zen 5",
            rob: 448,
            mlp: 24,
            walkers: 6,
            source: "AMD Software Optimization Guide for Family 1Ah (448-entry retire queue); L1D misses in flight and page walkers: ESTIMATE, as Zen 3/4",
            tlb_preset: Some("zen5"),
        },
        _ => CoreResources { core: "unknown core", rob: 256, mlp: 12, walkers: 2, source: "ESTIMATE: no entry for this core in mmu/host.rs", tlb_preset: None },
    }
}

/// AMX-TILE, CPUID leaf 7 subleaf 0 EDX bit 24 (Intel SDM vol. 2A, CPUID): the tile
/// registers first shipped in Sapphire Rapids' Golden Cove cores and are on Intel's server
/// cores only.
const AMX_TILE: u32 = 1 << 24;

/// The core: by `core_resources` from its model number; where that number is one we do not know
/// (hypervisors report made-up ones: a VM whose cores are Golden Cove reported model 0xA7, a
/// Rocket Lake number, on 2026-12-02), from what the core has. An Intel core with AMX and
/// a 2MiB L2 (CPUID leaf 4) is a Golden Cove-class server core: Sapphire and Emerald Rapids have
/// both, and so does Granite Rapids, whose Redwood Cove this table does not tell apart. The
/// second value says how the core was told, when it was not by its model number.
/// `caches` are the ones `detect` found (CPUID leaf 4, else sysfs).
pub fn identify_core(c: &dyn Cpuid, vendor: &str, family: u32, model: u32, caches: &[CacheGeometry]) -> (CoreResources, Option<String>) {
    let by_model = core_resources(vendor, family, model);
    if by_model.core != "unknown core" || vendor != "GenuineIntel" || family != 6 {
        return (by_model, None);
    }
    let amx = c.query(0, 0)[0] >= 7 && c.query(7, 0)[3] & AMX_TILE != 0;
    let l2 = caches.iter().find(|g| g.level == 2 && g.kind != "Instruction").map(|g| g.bytes);
    if amx && l2 == Some(2 << 20) {
        let golden = core_resources(vendor, 6, 0x8F);
        let how = format!(
            "model {model:#x} is not one this table knows, but the core has AMX (CPUID leaf 7 EDX[24]) and a 2MiB L2 (leaf 4), \
             which Intel's server cores have from Sapphire Rapids on: taken as {} (Granite Rapids' Redwood Cove would look the same)",
            golden.core
        );
        return (golden, Some(how));
    }
    (by_model, None)
}

/// Latencies in cycles when no calibration exists: ESTIMATEs of a current server core
/// (L1 5, L2 16, L3 70, DRAM 300), replaced by `superpager calibrate`'s measurements.
const ESTIMATED_LATENCY: [f64; 4] = [5.0, 16.0, 70.0, 300.0];

fn vendor(c: &dyn Cpuid) -> String {
    let r = c.query(0, 0);
    let mut b = Vec::with_capacity(12);
    for w in [r[1], r[3], r[2]] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    String::from_utf8_lossy(&b).trim_end_matches('\0').to_string()
}

fn model_name(c: &dyn Cpuid) -> String {
    if c.query(0x8000_0000, 0)[0] < 0x8000_0004 {
        return String::new();
    }
    let mut b = Vec::with_capacity(48);
    for leaf in 0x8000_0002..=0x8000_0004u32 {
        for w in c.query(leaf, 0) {
            b.extend_from_slice(&w.to_le_bytes());
        }
    }
    String::from_utf8_lossy(&b).trim_end_matches('\0').trim().to_string()
}

/// Family and model with the extended fields (Intel SDM vol. 2A, CPUID leaf 1, EAX).
fn family_model(c: &dyn Cpuid) -> (u32, u32) {
    let a = c.query(1, 0)[0];
    let base_family = (a >> 8) & 0xf;
    let family = if base_family == 0xf { base_family + ((a >> 20) & 0xff) } else { base_family };
    let model = if base_family == 0x6 || base_family == 0xf { ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4) } else { (a >> 4) & 0xf };
    (family, model)
}

/// Intel leaf 0x18: one TLB per subleaf with a valid type (EDX[4:0]).
pub fn intel_tlbs(c: &dyn Cpuid) -> Vec<TlbGeometry> {
    if c.query(0, 0)[0] < 0x18 {
        return Vec::new();
    }
    let max_sub = c.query(0x18, 0)[0];
    let mut out = Vec::new();
    for sub in 0..=max_sub.min(64) {
        let [_, ebx, ecx, edx] = c.query(0x18, sub);
        let stream = match edx & 0x1f {
            1 | 4 | 5 => "data", // data, load-only, store-only
            2 => "instruction",
            3 => "unified",
            _ => continue,
        };
        let level = (edx >> 5) & 7;
        let fully = edx >> 8 & 1 == 1;
        let ways = ebx >> 16;
        let sets = ecx;
        let entries = ways * sets;
        let mut sizes = Vec::new();
        if ebx & 1 != 0 {
            sizes.push("4KiB");
        }
        if ebx & 2 != 0 {
            sizes.push("2MiB");
        }
        if ebx & 8 != 0 {
            sizes.push("1GiB");
        }
        if entries == 0 || sizes.is_empty() {
            continue;
        }
        out.push(TlbGeometry {
            level,
            stream,
            entries,
            ways: if fully { entries } else { ways },
            page_sizes: sizes,
            source: format!("CPUID leaf 0x18 subleaf {sub}"),
            hit_cycles: None,
        });
    }
    out
}

/// AMD L2 TLB and cache associativity codes (AMD APM vol. 3, CPUID Fn8000_0006); 0xF is full.
fn amd_l2_ways(code: u32, entries: u32) -> u32 {
    match code {
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 => 8,
        8 => 16,
        0xa => 32,
        0xb => 48,
        0xc => 64,
        0xd => 96,
        0xe => 128,
        0xf => entries,
        _ => 0,
    }
}

/// The way count to model for a TLB of `entries` that CPUID calls `ways`-way: `ways` itself when
/// it leaves a power-of-two number of sets (the TLB model indexes sets by address bits), else the
/// smallest larger way count that does. The AMD APM's codes (Fn8000_0006) have no 12-way entry,
/// and a Zen 4 reports its 3072-entry L2 data TLB as 8-way (384 sets); read as "at least 8", the
/// next geometry that can exist is 12-way with 256 sets. None when no way count up to `entries`
/// works (entries not a power of two times a divisor).
fn power_of_two_sets(entries: u32, ways: u32) -> Option<u32> {
    (ways..=entries).find(|&w| entries.is_multiple_of(w) && (entries / w).is_power_of_two())
}

/// AMD Fn8000_0005 (L1), Fn8000_0006 (L2) and Fn8000_0019 (1GB) TLBs.
pub fn amd_tlbs(c: &dyn Cpuid) -> Vec<TlbGeometry> {
    let max = c.query(0x8000_0000, 0)[0];
    let mut out = Vec::new();
    let mut push = |level: u32, stream: &'static str, entries: u32, ways: u32, size: &'static str, src: &str| {
        if entries == 0 || ways == 0 {
            return;
        }
        match power_of_two_sets(entries, ways) {
            Some(w) if w == ways => out.push(TlbGeometry { level, stream, entries, ways, page_sizes: vec![size], source: src.to_string(), hit_cycles: None }),
            Some(w) => {
                let source = format!(
                    "{src} says {ways}-way, but {entries} entries / {ways} ways = {} sets; ESTIMATE: {w}-way, {} sets \
                     (AMD's associativity codes are a table with gaps, and a TLB whose way count has no code, such as \
                     12, reports the next lower one)",
                    entries as f64 / ways as f64,
                    entries / w
                );
                out.push(TlbGeometry { level, stream, entries, ways: w, page_sizes: vec![size], source, hit_cycles: None });
            }
            None => {}
        }
    };
    if max >= 0x8000_0005 {
        let [eax, ebx, _, _] = c.query(0x8000_0005, 0);
        // L1: associativity is the way count itself, 0xFF fully associative.
        let l1 = |assoc: u32, n: u32| if assoc == 0xff { n } else { assoc };
        let src = "CPUID Fn8000_0005";
        push(1, "data", ebx >> 16 & 0xff, l1(ebx >> 24, ebx >> 16 & 0xff), "4KiB", src);
        push(1, "instruction", ebx & 0xff, l1(ebx >> 8 & 0xff, ebx & 0xff), "4KiB", src);
        push(1, "data", eax >> 16 & 0xff, l1(eax >> 24, eax >> 16 & 0xff), "2MiB", src);
        push(1, "instruction", eax & 0xff, l1(eax >> 8 & 0xff, eax & 0xff), "2MiB", src);
    }
    if max >= 0x8000_0006 {
        let [eax, ebx, _, _] = c.query(0x8000_0006, 0);
        let src = "CPUID Fn8000_0006";
        let (de, ie) = (ebx >> 16 & 0xfff, ebx & 0xfff);
        push(2, "data", de, amd_l2_ways(ebx >> 28, de), "4KiB", src);
        push(2, "instruction", ie, amd_l2_ways(ebx >> 12 & 0xf, ie), "4KiB", src);
        let (de, ie) = (eax >> 16 & 0xfff, eax & 0xfff);
        push(2, "data", de, amd_l2_ways(eax >> 28, de), "2MiB", src);
        push(2, "instruction", ie, amd_l2_ways(eax >> 12 & 0xf, ie), "2MiB", src);
    }
    if max >= 0x8000_0019 {
        let [eax, ebx, _, _] = c.query(0x8000_0019, 0);
        let src = "CPUID Fn8000_0019";
        for (level, r) in [(1, eax), (2, ebx)] {
            let (de, ie) = (r >> 16 & 0xfff, r & 0xfff);
            push(level, "data", de, amd_l2_ways(r >> 28, de), "1GiB", src);
            push(level, "instruction", ie, amd_l2_ways(r >> 12 & 0xf, ie), "1GiB", src);
        }
    }
    out
}

/// The TLBs of a preset (mmu/machine.rs PRESETS), as `host` takes them for a core whose CPUID
/// hides its own: loaded as any machine is, and each one's source is the preset's file.
pub fn preset_tlbs(name: &str) -> Vec<TlbGeometry> {
    use crate::mmu::machine::{Machine, Stream};
    use crate::units::PageSize;
    let Ok(m) = Machine::load(name) else { return Vec::new() };
    let size = |i: &u32| match m.page_sizes[*i as usize] {
        PageSize::K4 => Some("4KiB"),
        PageSize::M2 => Some("2MiB"),
        PageSize::G1 => Some("1GiB"),
        _ => None,
    };
    m.tlbs
        .iter()
        .map(|t| TlbGeometry {
            level: u32::from(t.level),
            stream: match t.stream {
                Stream::Data => "data",
                Stream::Instruction => "instruction",
                Stream::Unified => "unified",
            },
            entries: t.entries,
            ways: t.ways,
            page_sizes: t.sizes.iter().filter_map(size).collect(),
            source: format!("machines/{name}.toml, its {} (the vendor's documents, as that file cites them)", t.name),
            hit_cycles: (t.hit_cycles > 0.0).then_some(t.hit_cycles as u32),
        })
        .collect()
}

/// The data (or unified) TLB that holds the most 4KB translations.
fn largest_4k_data_tlb(tlbs: &[TlbGeometry]) -> Option<&TlbGeometry> {
    tlbs.iter().filter(|g| g.stream != "instruction" && g.page_sizes.contains(&"4KiB")).max_by_key(|g| g.entries)
}

/// Caches from Intel leaf 4 or AMD Fn8000_001D (the same layout).
pub fn cpuid_caches(c: &dyn Cpuid, leaf: u32) -> Vec<CacheGeometry> {
    let max = if leaf >= 0x8000_0000 { c.query(0x8000_0000, 0)[0] } else { c.query(0, 0)[0] };
    if max < leaf {
        return Vec::new();
    }
    let mut out = Vec::new();
    for sub in 0..16 {
        let [eax, ebx, ecx, _] = c.query(leaf, sub);
        let kind = match eax & 0x1f {
            0 => break,
            1 => "Data",
            2 => "Instruction",
            3 => "Unified",
            _ => continue,
        };
        let ways = (ebx >> 22) + 1;
        let parts = ((ebx >> 12) & 0x3ff) + 1;
        let line = (ebx & 0xfff) + 1;
        let sets = ecx + 1;
        out.push(CacheGeometry {
            level: (eax >> 5) & 7,
            kind: kind.to_string(),
            bytes: ways as u64 * parts as u64 * line as u64 * sets as u64,
            ways,
            line,
            sets,
            source: format!("CPUID leaf {leaf:#x} subleaf {sub}"),
        });
    }
    out
}

/// Caches from /sys/devices/system/cpu/cpu0/cache (any architecture Linux describes).
pub fn sysfs_caches(root: &std::path::Path) -> Vec<CacheGeometry> {
    let mut out = Vec::new();
    for i in 0..16 {
        let d = root.join(format!("index{i}"));
        let read = |f: &str| std::fs::read_to_string(d.join(f)).ok().map(|s| s.trim().to_string());
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else {
            break;
        };
        let num = |f: &str| read(f).and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
        out.push(CacheGeometry {
            level: level.parse().unwrap_or(0),
            kind,
            bytes: Bytes::parse(&size).map(|b| b.0).unwrap_or(0),
            ways: num("ways_of_associativity"),
            line: num("coherency_line_size"),
            sets: num("number_of_sets"),
            source: format!("{}", d.display()),
        });
    }
    out
}

/// Reads this machine.
pub fn detect(c: &dyn Cpuid, sysfs_cache: &std::path::Path) -> HostReport {
    let v = vendor(c);
    let (family, model) = family_model(c);
    let mut notes = Vec::new();
    let mut tlbs = match v.as_str() {
        "GenuineIntel" => intel_tlbs(c),
        "AuthenticAMD" | "HygonGenuine" => amd_tlbs(c),
        _ => Vec::new(),
    };
    let mut tlbs_from = TlbsFrom::Cpuid;
    let mut caches = match v.as_str() {
        "GenuineIntel" => cpuid_caches(c, 4),
        "AuthenticAMD" | "HygonGenuine" => cpuid_caches(c, 0x8000_001d),
        _ => Vec::new(),
    };
    if caches.is_empty() {
        caches = sysfs_caches(sysfs_cache);
    }
    let (core, how) = identify_core(c, &v, family, model, &caches);
    notes.extend(how);
    let preset = core.tlb_preset.map(|p| (p, preset_tlbs(p))).filter(|(_, t)| !t.is_empty());
    if tlbs.is_empty() {
        let leaves = if v == "GenuineIntel" { "leaf 0x18" } else { "Fn8000_0005/6/19" };
        let from = match preset {
            Some((p, t)) => {
                tlbs = t;
                tlbs_from = TlbsFrom::PresetCpuidHidden;
                format!("the {p} preset's, this core's ({}) as its vendor documents them", core.core)
            }
            None => {
                tlbs_from = TlbsFrom::Static;
                "the static preset's (Zen 3 geometry, an ESTIMATE)".to_string()
            }
        };
        notes.push(format!("CPUID gives no TLB geometry on this {v} CPU ({leaves}: leaves read as zeros, as a hypervisor may make them): the TLBs are {from}"));
    } else if let Some((p, t)) = preset {
        // A hypervisor may report TLBs of its own making; it cannot make the core's smaller, so
        // CPUID numbers below the core's documented reach are not this core's.
        let entries = |g: Option<&TlbGeometry>| g.map_or(0, |g| g.entries);
        let (said, has) = (largest_4k_data_tlb(&tlbs), entries(largest_4k_data_tlb(&t)));
        if entries(said) < has {
            notes.push(format!(
                "CPUID gives this {} a largest data TLB of {} entries for 4KB pages ({}), where the core has {has}: \
                 the numbers are not this core's (a hypervisor's), so the TLBs are the {p} preset's, as its vendor documents them",
                core.core,
                entries(said),
                said.map_or("CPUID", |g| g.source.as_str())
            ));
            tlbs = t;
            tlbs_from = TlbsFrom::PresetCpuidSmaller;
        }
    }
    HostReport { vendor: v, family, model, model_name: model_name(c), tlbs, tlbs_from, core, caches, notes, calibration: None }
}

/// This machine as `host` describes it: `detect` on this CPU, with the calibration file
/// (`calibration_path`) when one was made on it.
pub fn detect_here() -> HostReport {
    let mut r = detect(&NativeCpuid, std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"));
    r.calibration = calibration_path().and_then(|p| read_calibration(&p, &r.model_name, &mut r.notes));
    if let Some(named) = std::env::var_os("SUPERPAGER_CALIBRATION").filter(|p| !std::path::Path::new(p).exists()) {
        // Asked for by name: its absence is worth a word (the default file's is not).
        r.notes.push(format!("SUPERPAGER_CALIBRATION names {}, which does not exist; latencies are ESTIMATEs", std::path::Path::new(&named).display()));
    }
    if let Some(c) = r.calibration.as_ref() {
        match (c.splintered(), c.tlb_probe.as_ref().filter(|p| p.splintered)) {
            (Some(_), _) => r.notes.push(
                "calibrate's TLB probe found 2MB pages held in the TLB as smaller pieces, as in a virtual machine whose host backs guest memory with 4KB pages: host models this machine so, nested walks over 4KB host pages with 2MB pages splintered (host+native: as if they were held whole; docs/RUNTIME_MODEL.md, \"The splintered host\")".to_string(),
            ),
            (None, Some(p)) => r.notes.push(format!(
                "calibrate's TLB probe found 2MB pages held in the TLB as smaller pieces ({}), as in a virtual machine whose host backs guest memory with 4KB pages; this calibration predates the splintered model, so host is native here and may misjudge what 2MB pages gain (run superpager calibrate again; docs/RUNTIME_MODEL.md, \"The splintered host\")",
                p.summary()
            )),
            _ => {}
        }
    }
    if let Some(n) = r.fit_note() {
        r.notes.push(n);
    }
    r
}

impl HostReport {
    /// A note where calibrate's last-level fit made the last level smaller than CPUID says:
    /// every prediction on `host` rests on it, so `predict` and `bench --model` repeat it.
    pub fn fit_note(&self) -> Option<String> {
        let last = *self.data_caches().last()?;
        let fit = self.usable_calibration()?.last_level_fit.as_ref()?;
        if let (Some(_), Some(r)) = (fit.tenant_fill_rate, self.tenant_fill_rate()) {
            let keeps = match self.share_taken() {
                Some((a, _, _)) => format!("each run keeps the share F^a / (F^a + R^a) of its ways, F its own fills and a = {a} (calibrate's share fit, \"The share's exponent, fitted\")"),
                None => "each run keeps the share of its ways that its own fills are of all fills".to_string(),
            };
            let keeps = if fit.share_law == Some(ShareLaw::Reuse) {
                format!("{keeps}; a hit is kept by the chance that fewer tenants' lines than the ways above it came to its set since the line's last use (the reuse law, \"A share that remembers when a line was last used\")")
            } else {
                keeps
            };
            return Some(format!(
                "the L{} ({}) is shared with other tenants who fill it at {r:.4} lines a ns, the rate that leaves calibrate's chase the {} its last-level fit chose: {keeps} (docs/RUNTIME_MODEL.md, \"A last level shared by the second\")",
                last.level,
                Bytes(last.bytes),
                Bytes(fit.chosen)
            ));
        }
        (fit.chosen < last.bytes).then(|| {
            format!(
                "calibrate's last-level fit simulates the L{} at {} (CPUID says {}): there {} (docs/RUNTIME_MODEL.md, \"The last level's fit\")",
                last.level,
                Bytes(fit.chosen),
                Bytes(last.bytes),
                fit.summary()
            )
        })
    }

    /// The data caches the model uses: data and unified levels, in order.
    pub fn data_caches(&self) -> Vec<&CacheGeometry> {
        let mut v: Vec<&CacheGeometry> = self.caches.iter().filter(|c| c.kind != "Instruction").collect();
        v.sort_by_key(|c| c.level);
        v
    }

    /// The calibration, when it describes as many levels as CPUID gives (else every latency
    /// is an ESTIMATE).
    fn usable_calibration(&self) -> Option<&Calibration> {
        let n = self.data_caches().len();
        self.calibration.as_ref().filter(|c| c.level_cycles.len() == n)
    }

    /// The latency of data-cache level `i` (memory when `i` is the number of levels), in
    /// cycles, and where it came from.
    pub fn latency(&self, i: usize) -> (f64, String) {
        let n = self.data_caches().len();
        match self.usable_calibration() {
            Some(k) => {
                let src = measured_by(k);
                let level = k.last_level_fit.as_ref().filter(|_| n > 0 && i == n - 1).and_then(|f| f.level());
                if let Some(c) = level {
                    return (c, format!("{src}: the 2MB chase at the largest footprint past the level above that the fitted size holds whole (docs/RUNTIME_MODEL.md, \"The last level's latency, read where it holds the chase\")"));
                }
                let fit = k.last_level_fit.as_ref().filter(|_| i >= n);
                if let Some((f, m)) = fit.and_then(|f| Some((f, f.memory()?))) {
                    let from = Bytes(f.footprints.first().copied().unwrap_or(f.footprint));
                    return (m, format!("{src}: fitted with the last level to the chase over every footprint from {from} up (docs/RUNTIME_MODEL.md, \"Memory's latency, fitted\")"));
                }
                match k.splintered() {
                    Some(m) if i >= n => (
                        m.cycles,
                        format!(
                            "{src}: the 2MB chase at {}, {:.1} ns, short of the TLB's reach (the nested walks are charged apart)",
                            Bytes(m.footprint),
                            m.ns
                        ),
                    ),
                    _ => (if i < n { k.level_cycles[i] } else { k.dram_cycles }, src),
                }
            }
            None => (ESTIMATED_LATENCY[if i < n { i.min(2) } else { 3 }], "ESTIMATE (run superpager calibrate)".to_string()),
        }
    }

    /// The size calibrate saw data-cache level `i` hold, when it saw less than CPUID says.
    fn seen_size(&self, i: usize) -> Option<&String> {
        // A shared last level is simulated at CPUID's size (`tenant_fill_rate`).
        if i + 1 == self.data_caches().len() && self.tenant_fill_rate().is_some() {
            return None;
        }
        self.usable_calibration().and_then(|c| c.level_sizes.get(i)).filter(|s| !s.is_empty())
    }

    /// The rate at which other tenants fill the last level, where calibrate's fit gave one
    /// (`LastLevelFit::tenant_fill_rate`). Where the share's fit took an exponent, the rate it
    /// set for it (`share_taken`).
    pub fn tenant_fill_rate(&self) -> Option<f64> {
        let r = self.usable_calibration()?.last_level_fit.as_ref()?.tenant_fill_rate?;
        Some(self.share_taken().map_or(r, |(_, _, r)| r))
    }

    /// (exponent, walk_hiding, tenants' rate) of calibrate's share fit, where it took an exponent
    /// and the last level is shared (`ShareFit::taken`): what `host` takes from it.
    fn share_taken(&self) -> Option<(f64, f64, f64)> {
        let c = self.usable_calibration()?;
        c.last_level_fit.as_ref()?.tenant_fill_rate?;
        c.share_fit.as_ref()?.taken()
    }

    /// Concurrent page walks: calibrate's walk probe where it measured them, else the core
    /// table's (`core_resources`); and where the number came from (with the probe's figures).
    pub fn walkers(&self) -> (u32, String) {
        if let (Some(c), Some(_)) = (self.usable_calibration(), self.tenant_fill_rate()) {
            if let Some(read) = c.walk_probe.as_ref().and_then(|p| p.walkers_taken()) {
                return (
                    self.core.walkers,
                    format!(
                        "{} (calibrate's walk probe on {} read {} by its rule, not taken: the rule times one walk at one chase against a load at k chases, \
                         and with the last level shared k chases fill it k times as fast and keep more of it, so their walks are shorter than the one timed \
                         and the rule reads too many walkers; docs/RUNTIME_MODEL.md, \"A last level shared by the second\")",
                        self.core.source, c.date, read
                    ),
                );
            }
        }
        let (n, src) = self.probed(|p| p.walkers_taken(), |r| r.walkers);
        let stale = self.usable_calibration().filter(|c| c.walk_probe.as_ref().is_some_and(|p| p.walkers.is_some() && p.walkers_taken().is_none()));
        match stale {
            Some(c) => (
                n,
                format!(
                    "{src} (calibrate's walk probe of {} read walkers by an earlier rule than the overlap model's; run superpager calibrate again)",
                    c.date
                ),
            ),
            None => (n, src),
        }
    }

    /// Instructions the window holds: calibrate's window probe where it measured them, else the
    /// core table's reorder buffer; and where the number came from.
    pub fn window(&self) -> (u32, String) {
        let measured = self.usable_calibration().and_then(|c| {
            let p = c.window_probe.as_ref()?;
            Some((p.window?, format!("measured by calibrate's window probe on {} ({}): {}", c.date, c.path, p.summary())))
        });
        measured.unwrap_or_else(|| (self.core.rob, self.core.source.to_string()))
    }

    /// L1D misses in flight, the same way.
    pub fn mlp(&self) -> (u32, String) {
        self.probed(|p| p.mlp, |r| r.mlp)
    }

    fn probed(&self, probe: fn(&WalkProbe) -> Option<u32>, table: fn(&CoreResources) -> u32) -> (u32, String) {
        let measured = self.usable_calibration().and_then(|c| {
            let p = c.walk_probe.as_ref()?;
            let n = probe(p)?;
            let ceiling = if p.at_ceiling(n) { format!("at least {n}, as many as the chases it runs at once; ") } else { String::new() };
            Some((n, format!("measured by calibrate's walk probe on {} ({}): {ceiling}{}", c.date, c.path, p.summary())))
        });
        measured.unwrap_or_else(|| {
            let r = &self.core;
            (table(r), r.source.to_string())
        })
    }

    /// The `[cache]` section: geometry from CPUID/sysfs, latencies calibrated or estimated,
    /// out-of-order resources from `core_resources`. None when no data cache was found.
    pub fn cache_toml(&self) -> Option<toml::Value> {
        let caches = self.data_caches();
        if caches.is_empty() {
            return None;
        }
        let mut levels = Vec::new();
        for (i, g) in caches.iter().enumerate() {
            let mut e = toml::map::Map::new();
            e.insert("name".into(), toml::Value::String(g.model_name()));
            e.insert("size".into(), toml::Value::String(Bytes(g.bytes).to_string()));
            e.insert("ways".into(), toml::Value::Integer(g.ways as i64));
            if let Some(seen) = self.seen_size(i) {
                resize_level(&mut e, seen, caches[0].line as u64);
            }
            e.insert("cycles".into(), toml::Value::Float(self.latency(i).0));
            levels.push(toml::Value::Table(e));
        }
        let mut t = toml::map::Map::new();
        t.insert("line_bytes".into(), toml::Value::Integer(caches[0].line as i64));
        t.insert("levels".into(), toml::Value::Array(levels));
        t.insert("dram_cycles".into(), toml::Value::Float(self.latency(caches.len()).0));
        t.insert("mlp".into(), toml::Value::Integer(self.mlp().0 as i64));
        t.insert("walkers".into(), toml::Value::Integer(self.walkers().0 as i64));
        t.insert("walk_fill_buffers".into(), toml::Value::Boolean(walk_fill_buffers(&self.vendor).0));
        t.insert("stream_prefetch".into(), toml::Value::Float(stream_prefetch(&self.vendor).0));
        t.insert("rob".into(), toml::Value::Integer(self.window().0 as i64));
        if let Some(k) = self.usable_calibration().and_then(|c| c.window_probe.as_ref()?.walk_hiding) {
            t.insert("walk_hiding".into(), rounded(k));
        }
        if let Some(c) = self.usable_calibration() {
            if let Some(p) = &c.stream_probe {
                p.insert_model_keys(&mut t, caches[0].line as u64, c.clock_ghz);
            }
        }
        if let Some(r) = self.tenant_fill_rate() {
            t.insert("tenant_fill_rate".into(), toml::Value::Float(r));
            if let Some(taken) = self.share_taken() {
                insert_share_keys(&mut t, taken);
            }
            if let Some(f) = self.usable_calibration().and_then(|c| c.last_level_fit.as_ref()) {
                f.insert_share_law(&mut t);
            }
        }
        if let Some(n) = self.usable_calibration().and_then(|c| c.walk_probe.as_ref()?.bounds_norm_taken()) {
            t.insert("bounds_norm".into(), toml::Value::Float(n));
        }
        Some(toml::Value::Table(t))
    }
}

impl HostReport {
    /// The `host` machine TOML: the static preset with the TLBs CPUID gave, when it gave any.
    pub fn machine_toml(&self, template: &str) -> String {
        let mut v: toml::Value = toml::from_str(template).expect("the host preset parses");
        let t = v.as_table_mut().expect("a table");
        let name = if self.model_name.is_empty() { format!("{} family {} model {}", self.vendor, self.family, self.model) } else { self.model_name.clone() };
        let preset = || self.tlbs.first().map(|g| g.source.split(',').next().unwrap_or_default()).unwrap_or_default();
        let how = match self.tlbs_from {
            TlbsFrom::Static => "TLBs: static Zen 3 geometry (CPUID gives none here)".to_string(),
            TlbsFrom::Cpuid => "TLBs from CPUID".to_string(),
            TlbsFrom::PresetCpuidHidden => format!("TLBs: {} (CPUID gives none here)", preset()),
            TlbsFrom::PresetCpuidSmaller => format!("TLBs: {} (CPUID gives smaller ones than this core has)", preset()),
        };
        t.insert("description".into(), toml::Value::String(format!("this machine: {name}; {how}")));
        if !self.tlbs.is_empty() {
            let mut list = Vec::new();
            for (i, g) in self.tlbs.iter().enumerate() {
                let mut e = toml::map::Map::new();
                let tag = match g.stream {
                    "data" => "d",
                    "instruction" => "i",
                    _ => "",
                };
                e.insert("name".into(), toml::Value::String(format!("L{}{tag}-{}-{i}", g.level, g.page_sizes.join("/"))));
                e.insert("level".into(), toml::Value::Integer(g.level as i64));
                e.insert("stream".into(), toml::Value::String(g.stream.to_string()));
                e.insert("entries".into(), toml::Value::Integer(g.entries as i64));
                e.insert("ways".into(), toml::Value::Integer(g.ways as i64));
                e.insert("page_sizes".into(), toml::Value::Array(g.page_sizes.iter().map(|s| toml::Value::String(s.to_string())).collect()));
                if g.level >= 2 {
                    // ESTIMATE of 7, as the static preset, where the source gives none.
                    e.insert("hit_cycles".into(), toml::Value::Integer(g.hit_cycles.unwrap_or(7) as i64));
                }
                list.push(toml::Value::Table(e));
            }
            t.insert("tlb".into(), toml::Value::Array(list));
        }
        if let Some(c) = self.cache_toml() {
            t.insert("cache".into(), c);
            // Its memory latency is already the near point's (`latency`).
            if let Some(k) = self.usable_calibration().filter(|k| k.splintered().is_some()) {
                nest_over_4kib_pages(t, k.host_frames.as_ref()).expect("the host preset has [walker] levels");
            }
        }
        if let (Some(cal), Some(cost)) = (&self.calibration, t.get_mut("cost").and_then(|c| c.as_table_mut())) {
            cost.insert("clock_ghz".into(), toml::Value::Float(cal.clock_ghz));
        }
        if let Some(f) = self.calibration.as_ref().and_then(|c| c.frames.as_ref()) {
            t.insert("frames".into(), f.frames_toml());
        }
        toml::to_string(&v).expect("serialises")
    }

    /// One line per number: what, value, source.
    pub fn explain(&self) -> Vec<(String, String, String)> {
        let mut out = vec![(
            "cpu".to_string(),
            format!("{} ({}, family {}, model {})", self.model_name, self.vendor, self.family, self.model),
            "CPUID leaves 0, 1, 0x80000002-4".to_string(),
        )];
        for g in &self.tlbs {
            out.push((format!("L{} {} TLB {}", g.level, g.stream, g.page_sizes.join("/")), format!("{} entries, {}-way", g.entries, g.ways), g.source.clone()));
        }
        for c in &self.caches {
            out.push((
                format!("L{} {} cache", c.level, c.kind.to_lowercase()),
                format!("{}, {}-way, {}-byte lines, {} sets", Bytes(c.bytes), c.ways, c.line, c.sets),
                c.source.clone(),
            ));
        }
        let n = self.data_caches().len();
        for (i, c) in self.data_caches().iter().enumerate() {
            let (v, src) = self.latency(i);
            out.push((format!("L{} latency", c.level), format!("{v:.1} cycles"), src.clone()));
            // A plain byte count (files calibrate wrote before the twenty-fourth session) in
            // binary units, as CPUID's size beside it.
            let seen = self.seen_size(i).map(|s| s.parse::<u64>().map_or(s.clone(), |b| Bytes(b).to_string()));
            // The size's own source: where the latency came from may be another rule's.
            let src = self.usable_calibration().map_or(src, measured_by);
            if let Some(sz) = seen.filter(|s| *s != Bytes(c.bytes).to_string()) {
                let fit = self.usable_calibration().and_then(|k| k.last_level_fit.as_ref()).filter(|f| i + 1 == n && Bytes(f.chosen).to_string() == sz);
                // A size that is no whole number of KiB (a set count for 20 ways) also in MiB.
                let mut shown = match sz.strip_suffix('B').and_then(|b| b.parse::<u64>().ok()) {
                    Some(b) => format!("{sz} ({:.2}MiB)", b as f64 / (1u64 << 20) as f64),
                    None => sz.clone(),
                };
                // The share's shape where it gave up ways (`shared_ways`).
                if let Ok(Bytes(b)) = Bytes::parse(&sz) {
                    if let Some(ways) = shared_ways(b, c.bytes, c.ways as u64, c.line as u64).filter(|&w| w != c.ways as u64) {
                        shown = format!("{shown}, {ways}-way, {} sets", b / (c.line as u64 * ways));
                    }
                }
                match fit {
                    Some(f) => out.push((
                        format!("L{} size (fitted)", c.level),
                        shown,
                        format!("{src}: calibrate's last-level fit, {} (CPUID says {})", f.summary(), Bytes(c.bytes)),
                    )),
                    None => out.push((format!("L{} size seen", c.level), shown, format!("{src}: the chase slows beyond it (CPUID says {})", Bytes(c.bytes)))),
                }
            }
        }
        if let (Some(r), Some(k), Some(last)) = (self.tenant_fill_rate(), self.usable_calibration(), self.data_caches().last()) {
            let f = k.last_level_fit.as_ref().expect("a fill rate comes from the fit");
            let (root, law) = match self.share_taken() {
                Some((a, _, _)) => (format!("^(1/{a})"), "F^a / (F^a + R^a) with a the share's exponent".to_string()),
                None => (String::new(), "F / (F + R)".to_string()),
            };
            out.push((
                format!("L{} shared", last.level),
                format!("tenants fill {r:.4} lines a ns"),
                format!(
                    "measured by superpager calibrate on {} ({}): the rate R = F (C / s - 1){root} that leaves calibrate's chase, filling the level at F lines a ns, \
                     the s = {} of C = {} its last-level fit chose ({}); the level is simulated whole and each run keeps w of its ways where \
                     w / ways = {law}, F its own fills ([cache] tenant_fill_rate; docs/RUNTIME_MODEL.md, \"A last level shared by the second\")",
                    k.date,
                    k.path,
                    Bytes(f.chosen),
                    Bytes(last.bytes),
                    f.summary()
                ),
            ));
            if let Some(s) = &k.share_fit {
                let (value, how) = match s.taken() {
                    Some((a, h, _)) => (
                        format!("{a}"),
                        format!(
                            "each run keeps w / ways = F^a / (F^a + R^a) of the level, R = F (C / s - 1)^(1/a) (so the chase keeps the size chosen), with walk_hiding {h} in place of the window probe's ([cache] share_exponent)"
                        ),
                    ),
                    None => ("1".to_string(), "the model as calibrate wrote it was nearest, so [cache] keeps the exponent 1 and the window probe's walk_hiding".to_string()),
                };
                out.push((
                    "share's exponent".to_string(),
                    value,
                    format!(
                        "fitted by superpager calibrate on {} ({}): {}; {how}; docs/RUNTIME_MODEL.md, \"The share's exponent, fitted\"",
                        k.date,
                        k.path,
                        s.summary()
                    ),
                ));
            }
            let (law, how) = match f.share_law {
                Some(ShareLaw::Reuse) => (
                    "reuse",
                    "a hit the level whole served is kept by the chance that fewer tenants' lines than the ways above it entered its set since the line's last use, \
                     the tenants bringing in R lines a ns over the level's sets (with the share's exponent a, F (R / F)^a), for the time the model gives the run",
                ),
                _ => ("depth", "a hit is kept where it was found within the w most recent lines of its set (this calibration is from before the reuse law)"),
            };
            out.push((
                "share's law".to_string(),
                law.to_string(),
                format!("written by superpager calibrate on {} ({}): {how} ([cache] share_law; docs/RUNTIME_MODEL.md, \"A share that remembers when a line was last used\")", k.date, k.path),
            ));
        }
        if let Some(k) = self.usable_calibration() {
            if let Some(s) = &k.stream_probe {
                out.push((
                    "stream ahead".to_string(),
                    s.taken().map_or("0 (not fitted)".to_string(), |a| format!("{a}")),
                    format!(
                        "measured by superpager calibrate on {} ({}): {}; that share of the walks into a sequential stream's next page (walks.sequential) costs nothing \
                         ([cache] stream_ahead; docs/RUNTIME_MODEL.md, \"Streams across pages\")",
                        k.date,
                        k.path,
                        s.summary()
                    ),
                ));
                let line = self.data_caches().first().map_or(64, |c| c.line as u64);
                if let Some(l) = s.line_cycles(line, k.clock_ghz) {
                    out.push((
                        "memory's line rate".to_string(),
                        format!("{l} cycles a line"),
                        format!(
                            "calibrate's sweep on 2MB pages, {:.1} ns a 4KB page over its {line}-byte lines at {:.2} GHz ({}, {}): a run takes at least its lines from \
                             memory times this ([cache] dram_line_cycles; docs/RUNTIME_MODEL.md, \"Memory's line rate\")",
                            s.ns_2m, k.clock_ghz, k.date, k.path
                        ),
                    ));
                }
            }
        }
        if n > 0 {
            let (v, src) = self.latency(n);
            out.push(("memory latency".to_string(), format!("{v:.1} cycles"), src));
            if let Some(k) = self.usable_calibration() {
                let how = if k.clock_how.is_empty() { String::new() } else { format!(": {}", k.clock_how) };
                out.push(("clock".to_string(), format!("{:.2} GHz", k.clock_ghz), format!("as calibrate converted its timings ({}){how}", k.path)));
                if let Some(p) = &k.tlb_probe {
                    let held = if p.splintered { "as smaller pieces (splintered)" } else { "whole" };
                    out.push(("2MB pages in the TLB".to_string(), held.to_string(), format!("calibrate's TLB probe on {}: {}", k.date, p.summary())));
                }
                if k.splintered().is_some() {
                    out.push((
                        "page walks".to_string(),
                        "nested, over 4KB host pages".to_string(),
                        "the TLB probe's splintering: a guest whose hypervisor backs it with 4KB pages (host+native: one-dimensional walks, 2MB pages whole); \
                         the host's entries held in page-walk caches of the guest's geometry, as AMD's walker caches both dimensions (Bhargava et al., ASPLOS 2008; docs/MODEL.md)"
                            .to_string(),
                    ));
                }
                if let Some(h) = &k.host_frames {
                    let (v, how) = match (k.splintered().is_some(), h.scattered) {
                        (true, true) => {
                            ("scattered", "the caches see guest memory by host frames scattered a 4KB page at a time ([walker.nested] host_frames)")
                        }
                        (true, false) => ("in order", "the caches see guest memory in the host's frames in order"),
                        (false, _) => ("not modelled", "host is not nested here, so where the host puts guest memory does not enter the model"),
                    };
                    out.push(("host frames".to_string(), v.to_string(), format!("calibrate's host-frames probe on {}: {}; {how}", k.date, h.summary())));
                }
            }
            if let Some(f) = self.calibration.as_ref().and_then(|c| c.frames.as_ref()) {
                out.push((
                    "4KB frames scattered".to_string(),
                    format!("{:.2} of them start a new run", f.scatter),
                    format!(
                        "calibrate's frame probe on {}: {}; the OS model places them so ([frames] scatter)",
                        self.calibration.as_ref().map_or("", |c| c.date.as_str()),
                        f.summary()
                    ),
                ));
            }
            let r = &self.core;
            out.push((format!("reorder buffer ({})", r.core), r.rob.to_string(), r.source.to_string()));
            if let Some((c, p)) = self.usable_calibration().and_then(|c| Some((c, c.window_probe.as_ref()?))) {
                let (w, src) = self.window();
                out.push(("instruction window".to_string(), w.to_string(), src));
                let k = p.walk_hiding.map_or("0 (none)".to_string(), |k| format!("{k:.3}"));
                let probe = format!(
                    "calibrate's window probe on {} ({}): what 4KB pages add to its loads at each P, against what they add to one load alone",
                    c.date, c.path
                );
                // Where the share's fit took an exponent, its walk_hiding stands in for the probe's.
                let (k, src) = match self.share_taken() {
                    Some((_, h, _)) => (
                        format!("{h}"),
                        format!("calibrate's share fit, with the share's exponent (\"The share's exponent, fitted\"; [cache] walk_hiding), in place of {probe}, which read {k}"),
                    ),
                    _ => (k, format!("{probe} ([cache] walk_hiding)")),
                };
                out.push(("walks hidden in a full window".to_string(), k, src));
            }
            for (item, (n, src)) in [("misses in flight", self.mlp()), ("page walks in flight", self.walkers())] {
                out.push((item.to_string(), n.to_string(), src));
            }
            if let Some((c, p)) = self.usable_calibration().and_then(|c| Some((c, c.walk_probe.as_ref()?))) {
                if let Some(summary) = p.bounds_norm_summary() {
                    let n = p.bounds_norm_taken().map_or("none (the largest bound alone)".to_string(), |n| format!("{n}"));
                    out.push((
                        "bounds' norm".to_string(),
                        n,
                        format!("fitted to calibrate's walk probe on {} ({}): {summary} ([cache] bounds_norm)", c.date, c.path),
                    ));
                }
            }
            let (fb, src) = walk_fill_buffers(&self.vendor);
            out.push(("walk loads in fill buffers".to_string(), if fb { "yes" } else { "no" }.to_string(), src.to_string()));
            let (pf, src) = stream_prefetch(&self.vendor);
            out.push((
                "stream prefetch".to_string(),
                format!("{pf}"),
                format!("{src}; that share of the L2's data misses in a sequential stream costs as its hits ([cache] stream_prefetch; docs/RUNTIME_MODEL.md, \"Streams the prefetcher runs ahead of\")"),
            ));
        }
        out
    }
}
