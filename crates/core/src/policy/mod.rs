//! Superpage policies. A policy decides, at hooks the engine calls, which page size maps a
//! faulting address (and, in later policies, when to promote, demote, reserve, compact and
//! evict). Mechanisms live in the OS model; policies only decide, and every decision is
//! counted with its reason.
//!
//! Adding a policy means adding one module here and one entry in `REGISTRY`.

pub mod base;
pub mod fixed;
pub mod linux_thp;
pub mod navarro;
pub mod replacement;
pub mod romer;

use crate::error::{Error, Result};
use crate::mmu::Mmu;
use crate::os::{Os, Vma};
use crate::units::{Cycles, PageSize};
use std::collections::BTreeMap;

/// What the engine knows about a fault when it asks the policy.
pub struct FaultInfo<'a> {
    pub va: u64,
    /// The faulting process's address-space identifier.
    pub asid: u16,
    pub write: bool,
    pub fetch: bool,
    pub vma: &'a Vma,
    /// The machine's page sizes, ascending (index 0 is the base page).
    pub sizes: &'a [PageSize],
}

/// A policy's answer to a fault: map the page of this size index that contains the address.
/// If it cannot be mapped, the engine tries the next smaller size, and counts why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultDecision {
    pub size_idx: u32,
    /// Require the page to lie inside the VMA (otherwise it may reach past it, as Romer's
    /// FIXED does).
    pub within_vma: bool,
    /// Smaller sizes the engine may fall back to, as a bitmask of size indices (the base page
    /// is always allowed).
    pub fallback: u32,
    /// When no free block of the size exists, run direct compaction once and retry (Linux's
    /// `defrag` setting decides this for THP faults).
    pub direct_compact: bool,
    /// Folio orders to try before the base page (bit k: a 2^k-base-page block mapped by base
    /// PTEs, Linux's mTHP on machines without that page size), largest first.
    pub folio_orders: u32,
}

impl FaultDecision {
    /// Map one base page.
    pub fn base() -> FaultDecision {
        FaultDecision { size_idx: 0, within_vma: true, fallback: 1, direct_compact: false, folio_orders: 0 }
    }
    /// Map the page of size index `si`, falling back through every smaller size.
    pub fn size(si: u32, within_vma: bool) -> FaultDecision {
        FaultDecision { size_idx: si, within_vma, fallback: u32::MAX, direct_compact: false, folio_orders: 0 }
    }
}

/// What a policy's daemons may touch: the OS model (its mechanisms) and the MMU (shootdowns),
/// at simulated time `now`.
pub struct Sys<'a> {
    pub os: &'a mut Os,
    pub mmu: &'a mut Mmu,
    pub now: Cycles,
}

impl Sys<'_> {
    /// Milliseconds of simulated time in cycles, at the machine's clock.
    pub fn ms(&self, ms: f64) -> u64 {
        (ms * self.mmu.machine.clock_ghz * 1e6) as u64
    }
}

/// Parameters given on the command line as `NAME:key=value,...`.
pub type Params = BTreeMap<String, String>;

pub trait Policy: Send {
    fn name(&self) -> String;
    /// A page fault on an unmapped address inside a VMA.
    fn on_fault(&mut self, f: &FaultInfo) -> FaultDecision;
    /// Serve an anonymous page fault of process `pi` at `va` in `vma` with the OS mechanisms
    /// directly (reservation-based policies choose the frame, not only the size). Returns the
    /// size index of the page that maps `va` afterwards, or None to let the engine map what
    /// `on_fault` decides. Called only if `serves_faults`.
    fn serve_fault(&mut self, _sys: &mut Sys, _pi: usize, _va: u64, _write: bool, _vma: &Vma) -> Option<u32> {
        None
    }
    fn serves_faults(&self) -> bool {
        false
    }
    /// When memory is reclaimed from a superpage, demote it around the victim base page and
    /// evict only that page (Navarro et al.), rather than swapping the superpage whole.
    fn demotes_on_eviction(&self) -> bool {
        false
    }
    /// Make a file's cached pages inactive when its last opener closes it (Navarro et al.),
    /// rather than leaving their reference state alone (stock FreeBSD, Linux).
    fn deactivates_on_close(&self) -> bool {
        false
    }
    /// Page-cache reclaim moves pages into the buddy lists with their contents, where they
    /// count as free and coalesce (Navarro et al.'s cache pages), rather than dropping them.
    fn cache_pages_in_buddy(&self) -> bool {
        false
    }
    /// Wired kernel pages come from pools of contiguous memory (Navarro et al.'s wired-page
    /// clustering) rather than from wherever the allocator finds a frame.
    fn clusters_wired(&self) -> bool {
        false
    }
    /// The page table replicates a superpage's PTE in each of its base slots (FreeBSD on
    /// Alpha), so promotion and demotion cost a PTE write per base page (`cycles.pte`).
    fn replicates_ptes(&self) -> bool {
        false
    }
    /// Under memory pressure, demote a superpage whose reference bit the page daemon clears,
    /// with this probability (Navarro et al.'s speculative demotion; 0: never).
    fn speculative_demotion(&self) -> f64 {
        0.0
    }
    /// Page-cache pages come from file reservations and shared file mappings are promoted in
    /// place (os/filemap.rs), with this answer to a write to a clean file superpage.
    fn file_superpages(&self) -> Option<crate::os::filemap::DirtySuperpages> {
        None
    }
    /// Place a file mapping that names no address (no MAP_FIXED) of `len` bytes at a virtual
    /// address congruent to its file offset modulo the returned size in bytes (Navarro et al.'s
    /// aligned placement, os/placement.rs); None: where the trace put it. The engine asks once
    /// with `u64::MAX` to learn whether the policy places mappings at all.
    fn file_mapping_alignment(&self, _len: u64) -> Option<u64> {
        None
    }
    /// Pages of process `pi` in [start, end) were unmapped (munmap, MADV_DONTNEED, mremap's
    /// old range, a shrinking brk; the whole space at exit). Called only if `serves_faults`.
    fn on_unmap(&mut self, _pi: usize, _start: u64, _end: u64) {}
    /// A miss at every TLB level by process `pi` at `va`, whose translation (a page of size
    /// index `size_idx`, faulted in first if it was not mapped) is about to be loaded. The
    /// policy may change the mapping here (Romer et al. promote in the miss handler); the engine
    /// then loads whatever maps `va` afterwards. Translations that left the last-level TLBs
    /// since the last call wait in `sys.mmu.evictions` when `wants_tlb_misses` asked for them.
    fn on_tlb_miss(&mut self, _sys: &mut Sys, _pi: usize, _va: u64, _size_idx: u32, _fetch: bool) {}
    /// Whether `on_tlb_miss` does anything (the engine skips the call per miss otherwise), and
    /// whether the MMU should report evictions from the last-level TLBs.
    fn wants_tlb_misses(&self) -> bool {
        false
    }
    /// The policy must first plan over the whole trace (Romer et al.'s OFFLINE): the driver
    /// replaces it with `policy::romer::offline::planned` before the run.
    fn plans_offline(&self) -> bool {
        false
    }
    /// For drivers that need the concrete policy back (OFFLINE's planning passes).
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
    /// Whether `on_unmap` should be called even though the policy does not serve faults.
    fn wants_unmaps(&self) -> bool {
        self.serves_faults()
    }
    /// A sampled access (for policies that watch access patterns).
    fn on_access_sampled(&mut self, _va: u64, _write: bool) {}
    /// The first write to a clean page.
    fn on_write_to_clean(&mut self, _va: u64) {}
    /// mprotect changed a range.
    fn on_protection_change(&mut self, _start: u64, _end: u64) {}
    /// Free memory fell below the low watermark.
    fn on_memory_pressure(&mut self) {}
    /// A fault that asked for size index `wanted` was served with `got`.
    fn on_fault_done(&mut self, _wanted: u32, _got: u32) {}
    /// A frame allocation failed for the page size index.
    fn on_alloc_failure(&mut self, _size_idx: u32) {}
    /// Periodic work (daemons). Called between chunks of the trace when `wants_tick`.
    fn tick(&mut self, _sys: &mut Sys) {}
    fn wants_tick(&self) -> bool {
        false
    }
    /// Some(size index) if this policy maps every page with that one size and never changes a
    /// mapping's size (lets the engine use its single-size fast path).
    fn only_size(&self) -> Option<u32> {
        None
    }
    /// The policy's own counters (decision reasons), as name/value pairs.
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// Builds a policy from its parameters and the machine's page sizes.
pub type PolicyBuilder = fn(&Params, &[PageSize]) -> Result<Box<dyn Policy>>;

pub struct PolicyInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub params: &'static str,
    pub build: PolicyBuilder,
}

pub const REGISTRY: [PolicyInfo; 5] = [
    PolicyInfo {
        name: "base",
        summary: "base pages only: every fault maps one base page",
        params: "(none)",
        build: base::build,
    },
    PolicyInfo {
        name: "fixed",
        summary: "Romer et al.'s FIXED: every fault maps the aligned page of one size (fixed:SIZE, e.g. fixed:64KiB)",
        params: "size=SIZE (or fixed:SIZE); fit=vma to fall back to smaller pages where SIZE would cross the VMA",
        build: fixed::build,
    },
    PolicyInfo {
        name: "linux-thp",
        summary: "Linux transparent huge pages: fault-time 2MB pages, khugepaged collapse, compaction, mTHP sizes",
        params: linux_thp::PARAMS,
        build: linux_thp::build,
    },
    PolicyInfo {
        name: "navarro",
        summary: "Navarro et al.'s reservations at first touch, incremental in-place promotion, preemption, demotion, file superpages, contiguity-aware page daemon (navarro:sizes=64KiB+4MiB)",
        params: navarro::PARAMS,
        build: navarro::build,
    },
    PolicyInfo {
        name: "romer",
        summary: "Romer et al.'s online promotion by copying, driven by TLB-miss charges: romer:fixed|asap|asap-4-64|approx-online|online|offline",
        params: romer::PARAMS,
        build: romer::build,
    },
];

/// Parse `NAME[:key=value,...]` (a bare `NAME:VALUE` sets the policy's main parameter).
pub fn parse_spec(spec: &str) -> Result<(String, Params)> {
    let (name, rest) = match spec.split_once(':') {
        Some((n, r)) => (n.trim(), r),
        None => (spec.trim(), ""),
    };
    if name.is_empty() {
        return Err(Error::usage(format!("empty policy name in '{spec}'; available: {} (see `superpager policies`)", names().join(", "))));
    }
    let mut params = Params::new();
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = match part.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
            None => ("_".to_string(), part.to_string()),
        };
        if k.is_empty() {
            return Err(Error::usage(format!("policy {name}: '{part}' has no parameter name (write key=value)")));
        }
        // A key given twice is a typo or a contradiction: say so rather than keep one.
        if let Some(old) = params.insert(k.clone(), v.clone()) {
            let key = if k == "_" { "the unnamed parameter".to_string() } else { format!("'{k}'") };
            return Err(Error::usage(format!("policy {name}: {key} is given twice ('{old}' and '{v}')")));
        }
    }
    Ok((name.to_string(), params))
}

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|p| p.name).collect()
}

/// Build a policy from `NAME[:params]` or a TOML file (`name = "fixed"` plus parameter keys).
pub fn build(spec: &str, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    let (name, params) = if spec.ends_with(".toml") {
        let src = std::fs::read_to_string(spec).map_err(|e| Error::io(spec, &e))?;
        let table: toml::Table = src
            .parse()
            .map_err(|e: toml::de::Error| Error::config(spec, "?", e.message().replace('\n', " ")))?;
        let name = table
            .get("name")
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::config(spec, "name", "a policy file needs name = \"POLICY\""))?
            .to_string();
        let mut params = Params::new();
        for (k, v) in table.iter().filter(|(k, _)| k.as_str() != "name") {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            params.insert(k.clone(), s);
        }
        (name, params)
    } else {
        parse_spec(spec)?
    };
    let info = REGISTRY.iter().find(|p| p.name == name).ok_or_else(|| {
        Error::usage(format!("unknown policy '{name}'; available: {} (see `superpager policies`)", names().join(", ")))
    })?;
    (info.build)(&params, sizes)
}

/// The size indices a `sizes=S1+S2+...` parameter names (each a superpage size of the
/// machine), ascending, after the base page (index 0); without the parameter, every size.
pub fn parse_sizes(policy: &str, params: &Params, sizes: &[PageSize]) -> Result<Vec<u32>> {
    let mut levels = vec![0u32];
    match params.get("sizes") {
        None => levels.extend(1..sizes.len() as u32),
        Some(list) => {
            let mut want = Vec::new();
            for s in list.split('+') {
                let p = PageSize::parse(s.trim()).map_err(|m| Error::usage(format!("policy {policy}: sizes: {m}")))?;
                let si = sizes.iter().position(|&x| x == p).filter(|&i| i > 0).ok_or_else(|| {
                    let have: Vec<String> = sizes[1..].iter().map(|p| p.to_string()).collect();
                    Error::usage(format!("policy {policy}: sizes: this machine has no {p} superpages (it has {})", have.join(", ")))
                })?;
                want.push(si as u32);
            }
            want.sort_unstable();
            want.dedup();
            levels.extend(want);
        }
    }
    Ok(levels)
}

/// Reject parameters a policy does not know.
pub fn check_params(policy: &str, params: &Params, known: &[&str]) -> Result<()> {
    for k in params.keys() {
        if !known.contains(&k.as_str()) {
            return Err(Error::usage(format!(
                "policy {policy}: unknown parameter '{k}' (known: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )));
        }
    }
    Ok(())
}
