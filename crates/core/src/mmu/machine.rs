//! Machine descriptions: TLB hierarchy, page-table walker, page-walk caches, cost constants.
//! Loaded from TOML (presets ship in `crates/core/src/machines/`, each constant with its source).
//! Every error names the file and the key.

use super::cache::{CacheLevelSpec, CacheSpec, ShareLaw};
use super::tlb::Replacement;
use crate::error::{Error, Result};
use crate::units::PageSize;
use serde::Deserialize;

/// Which accesses a structure serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Data,
    Instruction,
    Unified,
}

impl Stream {
    #[inline(always)]
    pub fn serves(self, fetch: bool) -> bool {
        match self {
            Stream::Unified => true,
            Stream::Data => !fetch,
            Stream::Instruction => fetch,
        }
    }
}

#[derive(Clone, Debug)]
pub struct TlbSpec {
    pub name: String,
    pub level: u8,
    pub stream: Stream,
    pub entries: u32,
    pub ways: u32,
    /// Indices into `Machine::page_sizes`.
    pub sizes: Vec<u32>,
    pub replacement: Replacement,
    /// Cycles a hit in this structure costs beyond a first-level hit.
    pub hit_cycles: f64,
}

#[derive(Clone, Debug)]
pub struct PwcSpec {
    /// Page-table level whose entries it caches (2 = PDE on x86, 3 = PDPTE, 4 = PML4E).
    pub level: u8,
    pub sets: u32,
    pub ways: u32,
}

/// The most entries a TLB or page-walk cache of a machine file may have: far above any real one
/// (the largest second-level TLBs hold a few thousand), and low enough that a typo cannot make
/// the simulator allocate gigabytes for its tags.
pub const MAX_STRUCTURE_ENTRIES: u32 = 1 << 20;
/// The most ways a TLB or page-walk cache may have (a fully associative one searches them all).
pub const MAX_STRUCTURE_WAYS: u32 = 4096;

/// Two-dimensional (nested) translation: a guest's walk under a hypervisor's page tables.
#[derive(Clone, Debug)]
pub struct NestedSpec {
    pub host_levels: u8,
    pub host_page: HostPage,
    /// Where the host puts guest memory in its own physical memory, as the data caches (indexed
    /// by host-physical address) see it.
    pub host_frames: HostFrames,
}

/// How a hypervisor's frames back guest-physical memory (`[walker.nested] host_frames`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostFrames {
    /// Host-physical = guest-physical: one contiguous allocation (the default, and what a host
    /// backing guest memory with pages as large as the guest's keeps within each page).
    InOrder,
    /// Each host page (`host_page_size`) of guest memory sits in a host frame of its own,
    /// scattered over the host's memory: a host whose free memory is fragmented (the reason a
    /// host backs a guest with 4KB pages at all) hands them out so. Then a guest 2MB page's
    /// 4KB pieces fall in cache sets as 4KB pages scattered by the guest do.
    Scattered,
}

impl HostFrames {
    pub fn parse(s: &str) -> std::result::Result<HostFrames, String> {
        match s {
            "in-order" => Ok(HostFrames::InOrder),
            "scattered" => Ok(HostFrames::Scattered),
            _ => Err(format!("'{s}' is not in-order or scattered")),
        }
    }
}

impl std::fmt::Display for HostFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            HostFrames::InOrder => "in-order",
            HostFrames::Scattered => "scattered",
        })
    }
}

/// The page size the host maps guest-physical memory with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostPage {
    /// One size for all guest memory.
    Fixed(PageSize),
    /// The same size as the guest page being walked to: the host backs a guest 2MB page with a
    /// 2MB page and a guest 1GB page with a 1GB page, as Trident running in both guest and host
    /// tries to (Ram et al. §6, whose 24/15/8 references assume this).
    Guest,
}

impl HostPage {
    pub fn parse(s: &str) -> std::result::Result<HostPage, String> {
        if s == "guest" {
            return Ok(HostPage::Guest);
        }
        PageSize::parse(s).map(HostPage::Fixed).map_err(|m| format!("{m} (or 'guest': the host page matches the guest page)"))
    }
}

impl std::fmt::Display for HostPage {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            HostPage::Fixed(p) => write!(f, "{p}"),
            HostPage::Guest => f.write_str("guest"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Coalescing {
    None,
    /// AMD PTE coalescing: on a walk that ends at a base PTE, the hardware reads the PTEs that
    /// share its cache line; an aligned group of `groups[k]` of them that is present,
    /// physically contiguous, aligned and uniform in attributes is cached as one entry (16KB
    /// or 32KB with 4KB pages) in the `structures` that hold coalesced entries.
    Amd(AmdCoalescing),
    /// ARM contiguous bit: `pages` aligned contiguous PTEs marked by the OS form one entry.
    ArmContiguous {
        pages: u32,
    },
}

impl Coalescing {
    /// One line for `superpager machines`: "none", "amd: 16KiB, 32KiB entries from the 8 PTEs
    /// of a line, held in L1d, L2d", "arm-contiguous: 16 pages".
    pub fn to_string_for(&self, m: &Machine) -> String {
        match self {
            Coalescing::None => "none".into(),
            Coalescing::ArmContiguous { pages } => format!("arm-contiguous: {pages} pages"),
            Coalescing::Amd(a) => {
                let sizes: Vec<String> = m.coalesced_sizes().iter().map(|p| p.to_string()).collect();
                let held: Vec<&str> = a.structures.iter().map(|&t| m.tlbs[t].name.as_str()).collect();
                format!("amd: {} entries from the {} PTEs of a line, held in {}", sizes.join(", "), a.line_ptes, held.join(", "))
            }
        }
    }
}

/// The parameters of AMD PTE coalescing (`[coalescing] kind = "amd"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmdCoalescing {
    /// Group sizes in base pages, ascending, each a power of two no larger than `line_ptes`.
    pub groups: Vec<u32>,
    /// PTEs the walker reads in one cache-line fetch (`line_bytes / pte_bytes`): a group
    /// never spans two lines.
    pub line_ptes: u32,
    /// Indices into `Machine::tlbs` of the structures that hold coalesced entries.
    pub structures: Vec<usize>,
}

#[derive(Clone, Debug)]
pub struct Machine {
    pub name: String,
    pub description: String,
    pub base_page: PageSize,
    /// Ascending; index 0 is the base page.
    pub page_sizes: Vec<PageSize>,
    pub tlbs: Vec<TlbSpec>,
    pub walk_levels: u8,
    pub bits_per_level: u8,
    pub pwc: Vec<PwcSpec>,
    pub nested: Option<NestedSpec>,
    /// Some(cycles) for a software-managed TLB: every last-level miss runs a handler.
    pub software_handler_cycles: Option<f64>,
    pub walk_ref_cycles: f64,
    pub cycles_per_access: f64,
    pub fault_cycles: f64,
    pub zero_cycles_per_kib: f64,
    /// Copying a KiB (promotion by copy, migration for compaction).
    pub copy_cycles_per_kib: f64,
    /// Core clock, to turn daemon periods given in milliseconds (khugepaged sleeps) into cycles.
    pub clock_ghz: f64,
    /// Reading or writing a KiB of swap or of a file (the program waits for it).
    pub io_cycles_per_kib: f64,
    /// Writing one PTE, charged per PTE rewritten by promotions and demotions when the OS
    /// replicates a superpage's PTE in every base slot (Alpha under FreeBSD; the policy asks).
    pub pte_write_cycles: f64,
    /// Hashing a KiB with SHA-1 (Navarro et al.'s hash-digest write-back choice).
    pub hash_cycles_per_kib: f64,
    pub coalescing: Coalescing,
    /// Data caches and the overlap model; None keeps the one-cycle-per-access model.
    pub cache: Option<CacheSpec>,
    /// `[frames] scatter`: the fraction of a process's 4KB anonymous frames that start a new
    /// run at a free frame picked at random (os/frames `Scatter`); 0 (the default) keeps the
    /// buddy's own order, which on fresh memory is address order.
    pub frame_scatter: f64,
    pub seed: u64,
    /// Where this machine came from (preset name or file path).
    pub origin: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineFile {
    name: String,
    #[serde(default)]
    description: String,
    base_page: String,
    page_sizes: Vec<String>,
    tlb: Vec<TlbFile>,
    walker: WalkerFile,
    cost: CostFile,
    coalescing: Option<CoalescingFile>,
    cache: Option<CacheFile>,
    frames: Option<FramesFile>,
    /// Where a calibrated machine's latencies came from (`superpager calibrate` writes it:
    /// cpu, date, method); not used by the model.
    #[allow(dead_code)]
    calibration: Option<toml::Value>,
    #[serde(default)]
    seed: u64,
}

/// `[cache]`: data caches and the overlap model (mmu/cache.rs, docs/RUNTIME_MODEL.md).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    #[serde(default = "line64")]
    line_bytes: u32,
    levels: Vec<CacheLevelFile>,
    dram_cycles: f64,
    mlp: f64,
    walkers: f64,
    /// Walk references beyond the first level hold fill buffers (cache.rs CacheSpec).
    #[serde(default)]
    walk_fill_buffers: bool,
    rob: f64,
    #[serde(default = "four")]
    instructions_per_access: f64,
    #[serde(default = "two")]
    ipc: f64,
    #[serde(default)]
    dependence: f64,
    #[serde(default)]
    walk_ahead: f64,
    #[serde(default)]
    walk_ahead2: f64,
    #[serde(default)]
    walk_ahead3: f64,
    /// Walks into a sequential stream's next page done ahead of it (cache.rs CacheSpec).
    #[serde(default)]
    stream_ahead: f64,
    /// Streamed misses of the second level its prefetcher runs ahead of (cache.rs CacheSpec).
    #[serde(default)]
    stream_prefetch: f64,
    /// Cycles a line from memory takes at one core's streaming rate (cache.rs CacheSpec).
    #[serde(default)]
    dram_line_cycles: f64,
    #[serde(default)]
    walk_hiding: f64,
    /// The last level shared with other tenants who fill it at this many lines a ns
    /// (cache.rs CacheSpec).
    #[serde(default)]
    tenant_fill_rate: Option<f64>,
    /// How the program's share of that level grows with its fills (cache.rs CacheSpec); 1, LRU's
    /// proportional share, where absent.
    #[serde(default = "one")]
    share_exponent: f64,
    /// How a share keeps the level's hits (cache.rs CacheSpec): "depth" where absent, or "reuse".
    #[serde(default)]
    share_law: Option<String>,
    /// The p-norm the overlap's three bounds combine by (cache.rs CacheSpec); absent: the largest.
    #[serde(default)]
    bounds_norm: Option<f64>,
}

/// `[frames]`: where the OS model's frame allocator puts a process's 4KB pages.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FramesFile {
    #[serde(default)]
    scatter: f64,
}

/// The `[frames] scatter` fraction, checked.
fn frame_scatter(v: f64) -> std::result::Result<f64, String> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("a fraction from 0 to 1, not {v}"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheLevelFile {
    name: String,
    size: String,
    ways: u32,
    cycles: f64,
}

fn line64() -> u32 {
    64
}
fn one() -> f64 {
    1.0
}

/// The values `[cache] share_exponent` and `+share_exponent` take: above 0 (at 0 every program
/// would keep half the level whatever it fills), at most 4 (a share steeper than that is a step).
pub const SHARE_EXPONENTS: std::ops::RangeInclusive<f64> = 0.01..=4.0;

fn four() -> f64 {
    4.0
}
/// ESTIMATE: a sustained 2 instructions per cycle for the program's own work.
fn two() -> f64 {
    2.0
}

/// Check `[cache]`: every level a power-of-two number of sets, latencies non-decreasing.
fn cache_spec(c: &CacheFile) -> std::result::Result<CacheSpec, (String, String)> {
    let bad = |k: &str, m: String| (format!("cache.{k}"), m);
    if !c.line_bytes.is_power_of_two() || !(8..=4096).contains(&c.line_bytes) {
        return Err(bad("line_bytes", format!("{} is not a power of two from 8 to 4096", c.line_bytes)));
    }
    if c.levels.is_empty() || c.levels.len() > crate::mmu::cache::MAX_LEVELS {
        return Err(bad("levels", format!("between 1 and {} levels", crate::mmu::cache::MAX_LEVELS)));
    }
    let mut levels = Vec::new();
    let mut prev = 0.0f64;
    for (i, l) in c.levels.iter().enumerate() {
        let k = |f: &str| format!("levels[{i}].{f}");
        let bytes = crate::units::Bytes::parse(&l.size).map_err(|m| bad(&k("size"), m))?.0;
        let lines = bytes / c.line_bytes as u64;
        if l.ways == 0 || lines == 0 || !lines.is_multiple_of(l.ways as u64) {
            return Err(bad(&k("ways"), format!("{} of {}-byte lines does not divide into {} ways", l.size, c.line_bytes, l.ways)));
        }
        if lines > 1 << 26 {
            return Err(bad(&k("size"), format!("{} is more than 2^26 lines: not a cache this model can hold", l.size)));
        }
        if l.ways > 64 {
            return Err(bad(&k("ways"), format!("at most 64 ways, not {}", l.ways)));
        }
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(l.cycles >= prev) || !l.cycles.is_finite() {
            return Err(bad(&k("cycles"), format!("{} must be a number no smaller than the level above's ({prev})", l.cycles)));
        }
        prev = l.cycles;
        levels.push(CacheLevelSpec { name: l.name.clone(), bytes, ways: l.ways, cycles: l.cycles });
    }
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    if !(c.dram_cycles >= prev) || !c.dram_cycles.is_finite() || c.dram_cycles > MAX_COST_CYCLES {
        return Err(bad("dram_cycles", format!("{} must be a number no smaller than the last level's ({prev})", c.dram_cycles)));
    }
    for (k, v) in [("mlp", c.mlp), ("walkers", c.walkers), ("rob", c.rob), ("instructions_per_access", c.instructions_per_access), ("ipc", c.ipc)] {
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(v >= 1.0) || !v.is_finite() || v > 1e6 {
            return Err(bad(k, format!("must be a number from 1 to 1e6, not {v}")));
        }
    }
    for (k, v) in [
        ("dependence", c.dependence),
        ("walk_ahead", c.walk_ahead),
        ("walk_ahead2", c.walk_ahead2),
        ("walk_ahead3", c.walk_ahead3),
        ("stream_ahead", c.stream_ahead),
        ("stream_prefetch", c.stream_prefetch),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(bad(k, format!("a fraction from 0 to 1, not {v}")));
        }
    }
    if let Some(m) = walk_ahead_out_of_order(c.walk_ahead, c.walk_ahead2, c.walk_ahead3) {
        return Err(bad(m.0, m.1));
    }
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    if !(c.dram_line_cycles >= 0.0) || c.dram_line_cycles > MAX_COST_CYCLES {
        return Err(bad("dram_line_cycles", format!("must be a number of cycles from 0 to {MAX_COST_CYCLES}, not {}", c.dram_line_cycles)));
    }
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    if !(c.walk_hiding >= 0.0) || c.walk_hiding > 1e6 {
        return Err(bad("walk_hiding", format!("must be a number from 0 to 1e6, not {}", c.walk_hiding)));
    }
    if let Some(r) = c.tenant_fill_rate {
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(r > 0.0) || r > 1e6 {
            return Err(bad("tenant_fill_rate", format!("must be a number of lines a ns above 0 and at most 1e6, not {r}")));
        }
        if c.levels.len() < 2 {
            return Err(bad("tenant_fill_rate", "a shared last level needs a level above it (the first level runs where references are made)".into()));
        }
    }
    if !SHARE_EXPONENTS.contains(&c.share_exponent) {
        return Err(bad("share_exponent", format!("must be a number from {} to {}, not {}", SHARE_EXPONENTS.start(), SHARE_EXPONENTS.end(), c.share_exponent)));
    }
    let share_law = match c.share_law.as_deref() {
        None => ShareLaw::Depth,
        Some(v) => ShareLaw::parse(v).ok_or_else(|| bad("share_law", format!("\"depth\" or \"reuse\", not \"{v}\"")))?,
    };
    if let Some(p) = c.bounds_norm {
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(p >= 1.0) || p > 1e6 {
            return Err(bad("bounds_norm", format!("must be a number from 1 to 1e6, not {p}")));
        }
    }
    Ok(CacheSpec {
        line_bytes: c.line_bytes,
        levels,
        dram_cycles: c.dram_cycles,
        mlp: c.mlp,
        walkers: c.walkers,
        walk_fill_buffers: c.walk_fill_buffers,
        rob: c.rob,
        instructions_per_access: c.instructions_per_access,
        ipc: c.ipc,
        dependence: c.dependence,
        walk_ahead: c.walk_ahead,
        walk_ahead2: c.walk_ahead2,
        walk_ahead3: c.walk_ahead3,
        stream_ahead: c.stream_ahead,
        stream_prefetch: c.stream_prefetch,
        dram_line_cycles: c.dram_line_cycles,
        walk_hiding: c.walk_hiding,
        tenant_fill_rate: c.tenant_fill_rate,
        share_exponent: c.share_exponent,
        share_law,
        bounds_norm: c.bounds_norm,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlbFile {
    name: String,
    level: u8,
    #[serde(default = "unified")]
    stream: String,
    entries: u32,
    ways: u32,
    page_sizes: Vec<String>,
    #[serde(default = "lru")]
    replacement: String,
    #[serde(default)]
    hit_cycles: f64,
}

fn unified() -> String {
    "unified".into()
}
fn lru() -> String {
    "lru".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WalkerFile {
    levels: u8,
    bits_per_level: u8,
    ref_cycles: f64,
    #[serde(default)]
    pwc: Vec<PwcFile>,
    nested: Option<NestedFile>,
    software_handler_cycles: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PwcFile {
    level: u8,
    sets: u32,
    ways: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NestedFile {
    host_levels: u8,
    host_page_size: String,
    /// "in-order" (default) or "scattered" (`HostFrames`).
    host_frames: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CostFile {
    cycles_per_access: f64,
    fault_cycles: f64,
    zero_cycles_per_kib: f64,
    /// Default: twice the zeroing cost (a copy reads and writes). ESTIMATE.
    copy_cycles_per_kib: Option<f64>,
    /// Default 2.5 GHz. ESTIMATE.
    clock_ghz: Option<f64>,
    /// Default 2500 cycles per KiB (about 1 GB/s at 2.5 GHz, an SSD). ESTIMATE.
    io_cycles_per_kib: Option<f64>,
    /// Default: one page-walk memory reference (walker.ref_cycles). ESTIMATE.
    pte_write_cycles: Option<f64>,
    /// Default 20 cycles per byte (SHA-1 in software on a machine of the paper's era). ESTIMATE.
    hash_cycles_per_kib: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CoalescingFile {
    kind: String,
    /// The largest group, in base pages.
    pages: u32,
    /// AMD: the group sizes (default: every power of two from 4 up to `pages`).
    groups: Option<Vec<u32>>,
    /// AMD: the walker's cache line and PTE sizes (default 64 and 8 bytes).
    line_bytes: Option<u32>,
    pte_bytes: Option<u32>,
    /// AMD: names of the TLB structures that hold coalesced entries (default: every
    /// structure that holds base pages).
    structures: Option<Vec<String>>,
}

/// Check and resolve `[coalescing]` for kind "amd" against the machine's TLB structures.
fn amd_coalescing(c: &CoalescingFile, tlbs: &[TlbSpec], base: PageSize, sizes: &[PageSize]) -> std::result::Result<AmdCoalescing, (&'static str, String)> {
    let cfg = |k: &'static str, m: String| (k, m);
    let line = c.line_bytes.unwrap_or(64);
    let pte = c.pte_bytes.unwrap_or(8);
    if pte == 0 || line < pte || !line.is_multiple_of(pte) {
        return Err(cfg("coalescing.line_bytes", format!("{line} is not a positive multiple of pte_bytes ({pte})")));
    }
    let line_ptes = line / pte;
    let mut groups = c.groups.clone().unwrap_or_else(|| (2..=c.pages.trailing_zeros()).map(|k| 1u32 << k).collect());
    groups.sort_unstable();
    groups.dedup();
    if groups.is_empty() {
        return Err(cfg("coalescing.groups", "needs at least one group size".into()));
    }
    for &g in &groups {
        if g < 2 || !g.is_power_of_two() || g > c.pages {
            return Err(cfg("coalescing.groups", format!("{g} is not a power of two from 2 to pages ({})", c.pages)));
        }
        if g > line_ptes {
            return Err(cfg("coalescing.groups", format!("a group of {g} PTEs spans more than one {line}-byte line ({line_ptes} PTEs)")));
        }
        if let Some(p) = PageSize::from_bytes(base.bytes() * g as u64).ok().filter(|p| sizes.contains(p)) {
            return Err(cfg("coalescing.groups", format!("a group of {g} is {p}, already one of the page sizes")));
        }
    }
    let structures = match &c.structures {
        None => (0..tlbs.len()).filter(|&i| tlbs[i].sizes.contains(&0)).collect(),
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                match tlbs.iter().position(|t| &t.name == n) {
                    Some(i) if tlbs[i].sizes.contains(&0) => v.push(i),
                    Some(_) => return Err(cfg("coalescing.structures", format!("'{n}' does not hold base pages, so it cannot hold coalesced ones"))),
                    None => return Err(cfg("coalescing.structures", format!("no TLB structure is named '{n}'"))),
                }
            }
            v
        }
    };
    // Size indices of coalesced entries follow the page sizes; a TLB tag has 4 bits for them
    // and index 15 is reserved (`tlb::EMPTY`).
    if sizes.len() + groups.len() > 15 {
        return Err(cfg("coalescing.groups", format!("{} page sizes and {} group sizes: at most 15 together", sizes.len(), groups.len())));
    }
    Ok(AmdCoalescing { groups, line_ptes, structures })
}

/// In a radix table of `levels` levels of `bits` index bits over `base` pages, the level
/// (1 = last) whose entries map a page of size `p`: the highest level whose entry span is at
/// most `p`.
pub fn radix_leaf_level(base: PageSize, bits: u8, levels: u8, p: PageSize) -> u8 {
    let mut level = 1u8;
    while level < levels && base.shift() + bits as u32 * level as u32 <= p.shift() {
        level += 1;
    }
    level
}

/// Presets compiled into the library: (name, one-line summary, TOML).
pub const PRESETS: [(&str, &str); 9] = [
    ("alpha21264", include_str!("../machines/alpha21264.toml")),
    ("romer95", include_str!("../machines/romer95.toml")),
    ("skylake", include_str!("../machines/skylake.toml")),
    ("golden-cove", include_str!("../machines/golden-cove.toml")),
    ("zen3", include_str!("../machines/zen3.toml")),
    ("zen5", include_str!("../machines/zen5.toml")),
    ("neoverse-n1", include_str!("../machines/neoverse-n1.toml")),
    ("amsqm09", include_str!("../machines/amsqm09.toml")),
    ("host", include_str!("../machines/host.toml")),
];

/// The largest cost a machine file may give one event: 1e9 cycles, a simulated second at 1GHz.
pub const MAX_COST_CYCLES: f64 = 1e9;
/// The fastest clock a machine file may give (GHz).
pub const MAX_CLOCK_GHZ: f64 = 100.0;

/// A preset's TOML: `host` is built from this CPU (mmu/host.rs) over its static file.
pub fn preset_source(name: &str) -> Option<String> {
    let (_, src) = PRESETS.iter().find(|p| p.0 == name)?;
    if name == "host" {
        return Some(super::host::detect_here().machine_toml(src));
    }
    Some(src.to_string())
}

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.0).collect()
}

/// The key on the line a TOML error points at, for a one-line message.
fn key_at(src: &str, span: Option<std::ops::Range<usize>>) -> (usize, String) {
    let Some(sp) = span else { return (0, "?".into()) };
    let start = sp.start.min(src.len());
    let line_no = src[..start].matches('\n').count() + 1;
    let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
    let line = &src[line_start..line_end];
    let key = match line.split_once('=') {
        Some((k, _)) => k.trim().to_string(),
        None => line.trim().trim_matches(|c| c == '[' || c == ']').to_string(),
    };
    (line_no, key)
}

fn toml_error(file: &str, src: &str, e: &toml::de::Error) -> Error {
    let (line, key) = key_at(src, e.span());
    let msg = e.message().replace('\n', " ");
    Error::config(file, &key, format!("line {line}: {msg}"))
}

impl Machine {
    /// A preset by name, or a TOML file by path, optionally followed by modifiers:
    /// `+nested` or `+nested=HOSTPAGE` (a page size, or `guest`, the default): the same
    /// machine running a guest under a hypervisor whose page tables have as many levels as
    /// the guest's; `+nocoalesce`: the same machine with PTE coalescing turned off (to measure
    /// what coalescing gives); `+base=SIZE`: the same machine with another base page;
    /// `+nocache`: without its data caches (the one-cycle-per-access model); `+dependence=F`:
    /// the fraction of the program's misses on a dependent chain (docs/RUNTIME_MODEL.md);
    /// `+walk_ahead=F`: the fraction of that chain's translations that run ahead under its misses;
    /// `+walk_ahead2=F`, `+walk_ahead3=F`: the fractions of its walks whose guess made two and
    /// three steps before lands in the right page (`[cache] walk_ahead2`, `walk_ahead3`);
    /// `+stream_ahead=F`: the fraction of walks into a sequential stream's next page done ahead
    /// of it (`[cache] stream_ahead`);
    /// `+stream_prefetch=F`: the fraction of the data misses in a sequential stream that the
    /// second level's prefetcher runs ahead of (`[cache] stream_prefetch`);
    /// `+dram_line_cycles=N`: the cycles a line from memory takes at one core's streaming rate
    /// (`[cache] dram_line_cycles`; 0: no such bound);
    /// `+walk_hiding=K`: how much a full window hides of a translation (`[cache] walk_hiding`);
    /// `+rob=N`: the instructions the window holds (`[cache] rob`); `+walkers=N`: the page
    /// walks in flight (`[cache] walkers`); `+mlp=N`: the L1D misses in flight (`[cache] mlp`);
    /// `+tenant_fill_rate=R`: the last level shared with tenants filling it at R lines a ns
    /// (`[cache] tenant_fill_rate`; 0: the program's alone);
    /// `+share_exponent=A`: how a program's share of a shared last level grows with its fills
    /// (`[cache] share_exponent`; 1: LRU's proportional share);
    /// `+share_law=L`: how a share of a shared last level keeps its hits, "depth" or "reuse"
    /// (`[cache] share_law`);
    /// `+bounds_norm=P`: the overlap's three bounds combined by their P-norm (`[cache]
    /// bounds_norm`; 0: the largest alone);
    /// `+scatter=F`: the fraction of 4KB anonymous frames placed at random (`[frames]`);
    /// `+native`: a nested machine (`host` where its TLB splinters 2MB pages) without nesting;
    /// `+nopwc`: the same machine without page-walk caches (every walk from the top level).
    pub fn load(spec: &str) -> Result<Machine> {
        let mut parts = spec.split('+');
        let name = parts.next().unwrap_or_default();
        let suffixes: Vec<&str> = parts.collect();
        let base = suffixes.iter().filter_map(|s| s.strip_prefix("base=")).next_back();
        let mut m = match base {
            Some(b) => Machine::load_with_base(spec, name, b)?,
            None => Machine::load_plain(name)?,
        };
        let mut any = false;
        for suffix in suffixes {
            any = true;
            if suffix.starts_with("base=") {
                // Applied to the machine's file above.
            } else if suffix == "nocache" {
                if m.cache.take().is_none() {
                    return Err(Error::usage(format!("machine '{spec}': {name} has no [cache] section, so +nocache changes nothing")));
                }
            } else if let Some((
                key @ ("dependence" | "walk_ahead" | "walk_ahead2" | "walk_ahead3" | "stream_ahead" | "stream_prefetch" | "dram_line_cycles" | "walk_hiding"
                | "share_exponent" | "rob" | "walkers" | "mlp"),
                v,
            )) = suffix.split_once('=')
            {
                // Settings of the overlap model: two properties of the program (fractions), and
                // what-ifs of the core (how much a full window hides of a translation, how many
                // instructions the window holds, how many walks and misses it keeps in flight).
                let Some(c) = m.cache.as_mut() else {
                    return Err(Error::usage(format!("machine '{spec}': +{key} needs a machine with a [cache] section ({name} has none)")));
                };
                let (field, range, what) = match key {
                    "dependence" => (&mut c.dependence, 0.0..=1.0, "a fraction from 0 to 1"),
                    "walk_ahead" => (&mut c.walk_ahead, 0.0..=1.0, "a fraction from 0 to 1"),
                    "walk_ahead2" => (&mut c.walk_ahead2, 0.0..=1.0, "a fraction from 0 to 1"),
                    "walk_ahead3" => (&mut c.walk_ahead3, 0.0..=1.0, "a fraction from 0 to 1"),
                    "stream_ahead" => (&mut c.stream_ahead, 0.0..=1.0, "a fraction from 0 to 1"),
                    "stream_prefetch" => (&mut c.stream_prefetch, 0.0..=1.0, "a fraction from 0 to 1"),
                    "dram_line_cycles" => (&mut c.dram_line_cycles, 0.0..=MAX_COST_CYCLES, "a number of cycles from 0 up"),
                    "walk_hiding" => (&mut c.walk_hiding, 0.0..=1e6, "a number from 0 to 1e6"),
                    "share_exponent" => (&mut c.share_exponent, SHARE_EXPONENTS, "a number from 0.01 to 4"),
                    "walkers" => (&mut c.walkers, 1.0..=1e6, "a number from 1 to 1e6"),
                    "mlp" => (&mut c.mlp, 1.0..=1e6, "a number from 1 to 1e6"),
                    _ => (&mut c.rob, 1.0..=1e6, "a number from 1 to 1e6"),
                };
                match v.parse::<f64>() {
                    Ok(x) if range.contains(&x) => *field = x,
                    _ => return Err(Error::usage(format!("machine '{spec}': +{key}={v}: {what}"))),
                }
            } else if let Some(v) = suffix.strip_prefix("share_law=") {
                // What-if: the other law for what a share of a shared last level keeps.
                let Some(c) = m.cache.as_mut() else {
                    return Err(Error::usage(format!("machine '{spec}': +share_law needs a machine with a [cache] section ({name} has none)")));
                };
                match ShareLaw::parse(v) {
                    Some(l) => c.share_law = l,
                    None => return Err(Error::usage(format!("machine '{spec}': +share_law={v}: depth or reuse"))),
                }
            } else if let Some(v) = suffix.strip_prefix("bounds_norm=") {
                // What-if: the overlap's bounds combined by another norm, or by the largest (0).
                let Some(c) = m.cache.as_mut() else {
                    return Err(Error::usage(format!("machine '{spec}': +bounds_norm needs a machine with a [cache] section ({name} has none)")));
                };
                match v.parse::<f64>() {
                    Ok(0.0) => c.bounds_norm = None,
                    Ok(x) if (1.0..=1e6).contains(&x) => c.bounds_norm = Some(x),
                    _ => return Err(Error::usage(format!("machine '{spec}': +bounds_norm={v}: 0 (the largest bound) or a number from 1 to 1e6"))),
                }
            } else if let Some(v) = suffix.strip_prefix("tenant_fill_rate=") {
                // What-if: the last level shared with busier or quieter tenants, or not at all.
                let Some(c) = m.cache.as_mut() else {
                    return Err(Error::usage(format!("machine '{spec}': +tenant_fill_rate needs a machine with a [cache] section ({name} has none)")));
                };
                match v.parse::<f64>() {
                    Ok(0.0) => c.tenant_fill_rate = None,
                    Ok(x) if x > 0.0 && x <= 1e6 && c.levels.len() >= 2 => c.tenant_fill_rate = Some(x),
                    Ok(x) if x > 0.0 && x <= 1e6 => {
                        return Err(Error::usage(format!("machine '{spec}': +tenant_fill_rate: a shared last level needs a level above it ({name} has one)")))
                    }
                    _ => return Err(Error::usage(format!("machine '{spec}': +tenant_fill_rate={v}: lines a ns, from 0 (not shared) to 1e6"))),
                }
            } else if let Some(v) = suffix.strip_prefix("scatter=") {
                match v.parse::<f64>().map_err(|e| e.to_string()).and_then(frame_scatter) {
                    Ok(f) => m.frame_scatter = f,
                    Err(_) => return Err(Error::usage(format!("machine '{spec}': +scatter={v}: a fraction from 0 to 1"))),
                }
            } else if suffix == "native" {
                // `host` on a machine whose TLB splinters 2MB pages is nested (mmu/host.rs,
                // `splinter`); this is the same machine with its pages held whole.
                if m.nested.take().is_none() {
                    return Err(Error::usage(format!("machine '{spec}': {name} is not nested, so +native changes nothing")));
                }
            } else if suffix == "nopwc" {
                // What-if: the walker without page-walk caches (every walk from the top level).
                if m.pwc.is_empty() {
                    return Err(Error::usage(format!("machine '{spec}': {name} has no page-walk caches, so +nopwc changes nothing")));
                }
                m.pwc.clear();
            } else if suffix == "nocoalesce" {
                if m.coalescing == Coalescing::None {
                    return Err(Error::usage(format!("machine '{spec}': {name} does not coalesce PTEs, so +nocoalesce changes nothing")));
                }
                m.coalescing = Coalescing::None;
            } else {
                m.nest(spec, name, suffix)?;
            }
            m.name = format!("{}+{suffix}", m.name);
        }
        if let Some((key, why)) = m.cache.as_ref().and_then(|c| walk_ahead_out_of_order(c.walk_ahead, c.walk_ahead2, c.walk_ahead3)) {
            return Err(Error::usage(format!("machine '{spec}': {key} {why}")));
        }
        if any {
            m.origin = spec.to_string();
        }
        Ok(m)
    }

    /// The `+nested[=HOSTPAGE]` modifier of `load`.
    fn nest(&mut self, spec: &str, name: &str, suffix: &str) -> Result<()> {
        let host = match suffix.split_once('=') {
            None if suffix == "nested" => "guest",
            Some(("nested", h)) => h,
            _ => {
                return Err(Error::usage(format!(
                    "machine '{spec}': '+{suffix}' is not +nested, +nested=HOSTPAGE (a page size, or guest), +native, +nopwc, +nocoalesce, +base=SIZE, +nocache, +dependence=F, +walk_ahead=F, +walk_ahead2=F, +walk_ahead3=F, +stream_ahead=F, +stream_prefetch=F, +dram_line_cycles=N, +walk_hiding=K, +share_exponent=A, +share_law=L, +rob=N, +walkers=N, +mlp=N, +tenant_fill_rate=R, +bounds_norm=P or +scatter=F"
                )))
            }
        };
        if self.nested.is_some() {
            return Err(Error::usage(format!("machine '{spec}': nested twice (a host whose TLB splinters 2MB pages is nested already; +native undoes it)")));
        }
        let host_page = HostPage::parse(host).map_err(|m| Error::usage(format!("machine '{spec}': host page: {m}")))?;
        if self.software_handler_cycles.is_some() {
            return Err(Error::usage(format!("machine '{spec}': {name} has a software-managed TLB; nested paging needs a hardware walker")));
        }
        if let HostPage::Fixed(p) = host_page {
            if p < self.base_page || self.size_index(p).is_none() {
                return Err(Error::usage(format!("machine '{spec}': host page {p} is not one of {name}'s page sizes")));
            }
        }
        self.nested = Some(NestedSpec { host_levels: self.walk_levels, host_page, host_frames: HostFrames::InOrder });
        Ok(())
    }

    /// AMD PTE coalescing, when this machine does it.
    pub fn amd_coalescing(&self) -> Option<&AmdCoalescing> {
        match &self.coalescing {
            Coalescing::Amd(a) => Some(a),
            _ => None,
        }
    }

    /// The reach of each coalesced entry, in the order of their size indices (which follow
    /// `page_sizes`): 16KiB and 32KiB on `zen3`.
    pub fn coalesced_sizes(&self) -> Vec<PageSize> {
        self.amd_coalescing()
            .map_or(Vec::new(), |a| a.groups.iter().map(|&g| PageSize::from_bytes(self.base_page.bytes() * g as u64).expect("checked by the loader")).collect())
    }

    /// The `+base=SIZE` modifier of `load`: the machine with another base page (AMSQM's
    /// machine leaves it open: 8KB or 4KB). The new base page joins the page sizes and every
    /// TLB that held the old one; sizes below it are refused by the loader.
    fn load_with_base(spec: &str, name: &str, base: &str) -> Result<Machine> {
        let bad = |m: String| Error::usage(format!("machine '{spec}': +base={base}: {m}"));
        let size = PageSize::parse(base).map_err(bad)?;
        let (src, label) = match preset_source(name) {
            Some(src) => (src, format!("preset {name}")),
            None => (std::fs::read_to_string(name).map_err(|e| Error::io(name, &e))?, name.to_string()),
        };
        let mut v: toml::Value = toml::from_str(&src).map_err(|e| toml_error(&label, &src, &e))?;
        let t = v.as_table_mut().ok_or_else(|| bad("the machine file is not a table".into()))?;
        let old = t.get("base_page").and_then(|b| b.as_str()).map(str::to_string).unwrap_or_default();
        let new = size.to_string();
        t.insert("base_page".into(), toml::Value::String(new.clone()));
        let add = |list: &mut toml::Value| {
            if let Some(a) = list.as_array_mut() {
                if a.iter().any(|s| s.as_str() == Some(old.as_str())) && !a.iter().any(|s| s.as_str() == Some(new.as_str())) {
                    a.insert(0, toml::Value::String(new.clone()));
                }
            }
        };
        if let Some(ps) = t.get_mut("page_sizes") {
            add(ps);
        }
        if let Some(tlbs) = t.get_mut("tlb").and_then(|x| x.as_array_mut()) {
            for tlb in tlbs {
                if let Some(ps) = tlb.get_mut("page_sizes") {
                    add(ps);
                }
            }
        }
        let src = toml::to_string(&v).map_err(|e| bad(e.to_string()))?;
        Machine::from_toml(&src, &format!("{label} with base page {new}"))
    }

    fn load_plain(name_or_path: &str) -> Result<Machine> {
        if let Some(src) = preset_source(name_or_path) {
            return Machine::from_toml(&src, &format!("preset {name_or_path}"));
        }
        if name_or_path.ends_with(".toml") || std::path::Path::new(name_or_path).exists() {
            let src = std::fs::read_to_string(name_or_path).map_err(|e| Error::io(name_or_path, &e))?;
            return Machine::from_toml(&src, name_or_path);
        }
        Err(Error::usage(format!("unknown machine '{name_or_path}'; presets: {} (or give a path to a .toml file)", preset_names().join(", "))))
    }

    pub fn from_toml(src: &str, file: &str) -> Result<Machine> {
        let f: MachineFile = toml::from_str(src).map_err(|e| toml_error(file, src, &e))?;
        let cfg = |key: &str, msg: String| Error::config(file, key, msg);
        let base = PageSize::parse(&f.base_page).map_err(|m| cfg("base_page", m))?;
        let mut sizes = Vec::new();
        for (i, s) in f.page_sizes.iter().enumerate() {
            let p = PageSize::parse(s).map_err(|m| cfg(&format!("page_sizes[{i}]"), m))?;
            if p < base {
                return Err(cfg(&format!("page_sizes[{i}]"), format!("{p} is smaller than base_page {base}")));
            }
            sizes.push(p);
        }
        if !sizes.contains(&base) {
            sizes.push(base);
        }
        sizes.sort();
        sizes.dedup();
        if sizes.len() > 16 {
            return Err(cfg("page_sizes", "at most 16 page sizes".into()));
        }
        if f.tlb.is_empty() {
            return Err(cfg("tlb", "a machine needs at least one [[tlb]]".into()));
        }
        let mut tlbs = Vec::new();
        for (i, t) in f.tlb.iter().enumerate() {
            let k = |field: &str| format!("tlb[{i}].{field}");
            if t.entries == 0 || t.ways == 0 || t.entries % t.ways != 0 {
                return Err(cfg(&k("ways"), format!("{} ways must divide {} entries", t.ways, t.entries)));
            }
            let sets = t.entries / t.ways;
            if !sets.is_power_of_two() {
                return Err(cfg(&k("entries"), format!("entries/ways = {sets} sets, not a power of two")));
            }
            if t.ways > MAX_STRUCTURE_WAYS {
                return Err(cfg(&k("ways"), format!("at most {MAX_STRUCTURE_WAYS} ways")));
            }
            if t.entries > MAX_STRUCTURE_ENTRIES {
                return Err(cfg(&k("entries"), format!("at most {MAX_STRUCTURE_ENTRIES} entries")));
            }
            let replacement =
                Replacement::parse(&t.replacement).ok_or_else(|| cfg(&k("replacement"), format!("'{}' is not one of lru, plru, random", t.replacement)))?;
            if replacement == Replacement::Plru && (!t.ways.is_power_of_two() || t.ways > 64) {
                return Err(cfg(&k("replacement"), format!("tree pseudo-LRU needs a power-of-two number of ways up to 64, not {}", t.ways)));
            }
            let stream = match t.stream.as_str() {
                "data" => Stream::Data,
                "instruction" => Stream::Instruction,
                "unified" => Stream::Unified,
                o => return Err(cfg(&k("stream"), format!("'{o}' is not one of data, instruction, unified"))),
            };
            if t.level == 0 {
                return Err(cfg(&k("level"), "levels count from 1".into()));
            }
            let mut idx = Vec::new();
            for (j, s) in t.page_sizes.iter().enumerate() {
                let p = PageSize::parse(s).map_err(|m| cfg(&format!("tlb[{i}].page_sizes[{j}]"), m))?;
                let pos = sizes
                    .iter()
                    .position(|&q| q == p)
                    .ok_or_else(|| cfg(&format!("tlb[{i}].page_sizes[{j}]"), format!("{p} is not one of the machine's page_sizes")))?;
                idx.push(pos as u32);
            }
            if idx.is_empty() {
                return Err(cfg(&k("page_sizes"), "a TLB must hold at least one page size".into()));
            }
            if tlbs.iter().any(|x: &TlbSpec| x.name == t.name) {
                return Err(cfg(&k("name"), format!("duplicate structure name '{}'", t.name)));
            }
            tlbs.push(TlbSpec {
                name: t.name.clone(),
                level: t.level,
                stream,
                entries: t.entries,
                ways: t.ways,
                sizes: idx,
                replacement,
                hit_cycles: t.hit_cycles,
            });
        }
        let w = &f.walker;
        if w.levels == 0 || w.levels > 6 {
            return Err(cfg("walker.levels", "between 1 and 6".into()));
        }
        if w.bits_per_level == 0 || w.bits_per_level > 16 {
            return Err(cfg("walker.bits_per_level", "between 1 and 16".into()));
        }
        let mut pwc = Vec::new();
        for (i, p) in w.pwc.iter().enumerate() {
            if p.level < 2 || p.level > w.levels {
                return Err(cfg(&format!("walker.pwc[{i}].level"), format!("must be between 2 and walker.levels ({})", w.levels)));
            }
            if p.sets == 0 || !p.sets.is_power_of_two() || p.ways == 0 {
                return Err(cfg(&format!("walker.pwc[{i}].sets"), "sets must be a power of two and ways positive".into()));
            }
            if p.ways > MAX_STRUCTURE_WAYS || p.sets as u64 * p.ways as u64 > MAX_STRUCTURE_ENTRIES as u64 {
                return Err(cfg(&format!("walker.pwc[{i}].ways"), format!("at most {MAX_STRUCTURE_WAYS} ways and {MAX_STRUCTURE_ENTRIES} entries")));
            }
            pwc.push(PwcSpec { level: p.level, sets: p.sets, ways: p.ways });
        }
        let nested = match &w.nested {
            None => None,
            Some(n) => {
                let host_page = HostPage::parse(&n.host_page_size).map_err(|m| cfg("walker.nested.host_page_size", m))?;
                let host_frames =
                    n.host_frames.as_deref().map_or(Ok(HostFrames::InOrder), HostFrames::parse).map_err(|m| cfg("walker.nested.host_frames", m))?;
                if host_frames == HostFrames::Scattered && host_page == HostPage::Guest {
                    return Err(cfg(
                        "walker.nested.host_frames",
                        "scattered needs a fixed host_page_size (the frames are scattered a host page at a time)".into(),
                    ));
                }
                Some(NestedSpec { host_levels: n.host_levels, host_page, host_frames })
            }
        };
        let coalescing = match &f.coalescing {
            None => Coalescing::None,
            Some(c) => {
                if !c.pages.is_power_of_two() || c.pages < 2 {
                    return Err(cfg("coalescing.pages", "a power of two of at least 2".into()));
                }
                match c.kind.as_str() {
                    "none" => Coalescing::None,
                    "amd" => Coalescing::Amd(amd_coalescing(c, &tlbs, base, &sizes).map_err(|(k, m)| cfg(k, m))?),
                    "arm-contiguous" => Coalescing::ArmContiguous { pages: c.pages },
                    o => return Err(cfg("coalescing.kind", format!("'{o}' is not one of none, amd, arm-contiguous"))),
                }
            }
        };
        let tlb_costs: Vec<(String, f64)> = f.tlb.iter().enumerate().map(|(i, t)| (format!("tlb[{i}].hit_cycles"), t.hit_cycles)).collect();
        for (key, v) in [
            ("walker.ref_cycles", w.ref_cycles),
            ("cost.cycles_per_access", f.cost.cycles_per_access),
            ("cost.fault_cycles", f.cost.fault_cycles),
            ("cost.zero_cycles_per_kib", f.cost.zero_cycles_per_kib),
            ("cost.copy_cycles_per_kib", f.cost.copy_cycles_per_kib.unwrap_or(0.0)),
            ("cost.clock_ghz", f.cost.clock_ghz.unwrap_or(1.0)),
            ("cost.io_cycles_per_kib", f.cost.io_cycles_per_kib.unwrap_or(0.0)),
            ("cost.pte_write_cycles", f.cost.pte_write_cycles.unwrap_or(0.0)),
            ("cost.hash_cycles_per_kib", f.cost.hash_cycles_per_kib.unwrap_or(0.0)),
            ("walker.software_handler_cycles", w.software_handler_cycles.unwrap_or(0.0)),
        ]
        .into_iter()
        .chain(tlb_costs.iter().map(|(k, v)| (k.as_str(), *v)))
        {
            // Written so that NaN fails too.
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            if !(v >= 0.0) || !v.is_finite() {
                return Err(cfg(key, format!("must be a non-negative number, not {v}")));
            }
            // A larger cost per event would make cycle totals saturate: nonsense, not a machine.
            let max = if key == "cost.clock_ghz" { MAX_CLOCK_GHZ } else { MAX_COST_CYCLES };
            if v > max {
                return Err(cfg(key, format!("{v} is implausibly large (at most {max:e})")));
            }
        }
        Ok(Machine {
            name: f.name,
            description: f.description,
            base_page: base,
            page_sizes: sizes,
            tlbs,
            walk_levels: w.levels,
            bits_per_level: w.bits_per_level,
            pwc,
            nested,
            software_handler_cycles: w.software_handler_cycles,
            walk_ref_cycles: w.ref_cycles,
            cycles_per_access: f.cost.cycles_per_access,
            fault_cycles: f.cost.fault_cycles,
            zero_cycles_per_kib: f.cost.zero_cycles_per_kib,
            copy_cycles_per_kib: f.cost.copy_cycles_per_kib.unwrap_or(2.0 * f.cost.zero_cycles_per_kib),
            clock_ghz: match f.cost.clock_ghz {
                Some(g) if g > 0.0 => g,
                Some(_) => return Err(cfg("cost.clock_ghz", "must be a positive number".to_string())),
                None => 2.5,
            },
            io_cycles_per_kib: f.cost.io_cycles_per_kib.unwrap_or(2500.0),
            pte_write_cycles: f.cost.pte_write_cycles.unwrap_or(w.ref_cycles),
            hash_cycles_per_kib: f.cost.hash_cycles_per_kib.unwrap_or(20.0 * 1024.0),
            coalescing,
            cache: match &f.cache {
                None => None,
                Some(c) => Some(cache_spec(c).map_err(|(k, m)| cfg(&k, m))?),
            },
            frame_scatter: match &f.frames {
                None => 0.0,
                Some(fr) => frame_scatter(fr.scatter).map_err(|m| cfg("frames.scatter", m))?,
            },
            seed: f.seed,
            origin: file.to_string(),
        })
    }

    /// `--tlb ENTRIES:WAYS[:PAGESIZE]`: one LRU structure named L1, one page size.
    pub fn adhoc_tlb(spec: &str) -> Result<Machine> {
        let parts: Vec<&str> = spec.split(':').collect();
        let bad = |m: &str| Error::usage(format!("tlb {spec}: {m} (form: ENTRIES:WAYS[:PAGESIZE], e.g. 64:4 or 32:32:8KiB)"));
        if parts.len() < 2 || parts.len() > 3 {
            return Err(bad("expected two or three fields"));
        }
        let entries: u32 = parts[0].parse().map_err(|_| bad("ENTRIES is not a number"))?;
        let ways: u32 = parts[1].parse().map_err(|_| bad("WAYS is not a number"))?;
        let page = parts.get(2).copied().unwrap_or("4KiB");
        PageSize::parse(page).map_err(|m| bad(&m))?;
        let src = format!(
            r#"name = "tlb-{entries}x{ways}-{page}"
description = "ad-hoc: one {entries}-entry {ways}-way LRU TLB of {page} pages"
base_page = "{page}"
page_sizes = ["{page}"]
[[tlb]]
name = "L1"
level = 1
entries = {entries}
ways = {ways}
page_sizes = ["{page}"]
[walker]
levels = 4
bits_per_level = 9
ref_cycles = 0
[cost]
cycles_per_access = 0
fault_cycles = 0
zero_cycles_per_kib = 0
"#
        );
        Machine::from_toml(&src, &format!("tlb {spec}")).map_err(|e| match e {
            Error::Config { msg, .. } => bad(&msg),
            o => o,
        })
    }

    pub fn size_index(&self, p: PageSize) -> Option<u32> {
        self.page_sizes.iter().position(|&q| q == p).map(|i| i as u32)
    }

    /// Radix level (1 = leaf table) whose entries map a page of size `p`: the deepest level
    /// whose span is at most `p`. Sizes between level spans are stored replicated there.
    pub fn leaf_level(&self, p: PageSize) -> u8 {
        radix_leaf_level(self.base_page, self.bits_per_level, self.walk_levels, p)
    }

    pub fn largest_page(&self) -> PageSize {
        *self.page_sizes.last().unwrap()
    }

    pub fn summary(&self) -> String {
        let sizes: Vec<String> = self.page_sizes.iter().map(|p| p.to_string()).collect();
        let tl: Vec<String> = self.tlbs.iter().map(|t| format!("{} {}x{}", t.name, t.entries, t.ways)).collect();
        format!("{} [{}]", sizes.join("/"), tl.join(", "))
    }
}

/// Where a guess that lands in the right page k steps before a walk is said to be likelier than
/// one from fewer steps (`[cache] walk_ahead` >= `walk_ahead2` >= `walk_ahead3`: a guess made
/// further back lands in the right page only if the nearer ones do): the key and why.
fn walk_ahead_out_of_order(p1: f64, p2: f64, p3: f64) -> Option<(&'static str, String)> {
    if p2 > p1 {
        Some(("walk_ahead2", format!("{p2} is more than walk_ahead {p1}: a guess two steps back lands in the right page only where one step back does")))
    } else if p3 > p2 {
        Some(("walk_ahead3", format!("{p3} is more than walk_ahead2 {p2}: a guess three steps back lands in the right page only where two steps back does")))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_loads() {
        for (name, _) in PRESETS {
            let m = Machine::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!m.tlbs.is_empty());
        }
    }

    #[test]
    fn adhoc_tlb_builds_one_structure() {
        let m = Machine::adhoc_tlb("64:4").unwrap();
        assert_eq!(m.tlbs.len(), 1);
        assert_eq!(m.tlbs[0].name, "L1");
        assert_eq!(m.tlbs[0].entries / m.tlbs[0].ways, 16);
        assert!(Machine::adhoc_tlb("64:5").is_err());
        assert!(Machine::adhoc_tlb("64").is_err());
        assert_eq!(Machine::adhoc_tlb("32:32:8KiB").unwrap().base_page, PageSize::K8);
    }

    #[test]
    fn errors_name_the_key() {
        let bad = include_str!("../machines/skylake.toml").replace("entries = 1536", "entries = \"many\"");
        let e = Machine::from_toml(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("entries"), "{e}");
        let bad = include_str!("../machines/skylake.toml").replace("ways = 12", "wayz = 12");
        let e = Machine::from_toml(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("wayz"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn structures_too_large_to_be_real_are_refused_before_anything_is_allocated() {
        // The machine_toml fuzz target found a page-walk cache of 477,777,777 ways (gigabytes of
        // tags); a TLB of 2^31 entries in one way is as bad.
        let src = include_str!("../machines/skylake.toml");
        let bad = src.replace("{ level = 4, sets = 1, ways = 4 }", "{ level = 4, sets = 1, ways = 477777777 }");
        assert_ne!(bad, src);
        let e = Machine::from_toml(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("walker.pwc[0].ways") && e.contains("at most 4096 ways"), "{e}");
        let bad = src.replace("{ level = 2, sets = 4, ways = 8 }", "{ level = 2, sets = 1048576, ways = 8 }");
        assert!(Machine::from_toml(&bad, "x.toml").unwrap_err().to_string().contains("1048576 entries"));
        let bad = src.replacen("entries = 1536\nways = 12", "entries = 2147483648\nways = 1", 1);
        assert_ne!(bad, src);
        let e = Machine::from_toml(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("entries"), "{e}");
    }

    #[test]
    fn x86_leaf_levels() {
        let m = Machine::load("skylake").unwrap();
        assert_eq!(m.leaf_level(PageSize::K4), 1);
        assert_eq!(m.leaf_level(PageSize::M2), 2);
        assert_eq!(m.leaf_level(PageSize::G1), 3);
        assert_eq!(m.leaf_level(PageSize::K64), 1);
    }
}
