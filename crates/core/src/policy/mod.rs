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
pub mod romer;
pub mod trident;

use crate::error::{Error, Result};
use crate::mmu::Mmu;
use crate::os::{Os, OsFeatures, Vma};
use crate::units::{Cycles, PageSize};
use std::any::Any;

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

pub use crate::spec::Params;

/// What a policy asks of the engine and the OS, once, when a run starts (`Policy::features`).
/// Everything is off by default: a policy that only answers `on_fault` needs nothing more.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Features {
    /// `serve_fault` serves anonymous faults (reservation-based policies choose the frame,
    /// not only the size).
    pub serves_faults: bool,
    /// `on_unmap` hears about every unmapped range.
    pub wants_unmaps: bool,
    /// `on_tlb_miss` runs at every miss of the last-level TLBs, and the MMU keeps the
    /// translations that leave them for it (`Mmu::evictions`).
    pub wants_tlb_misses: bool,
    /// `on_tlb_miss` never reads `sys.now`: the engine then skips costing the run so far at
    /// each miss (the cost model over the run's totals, most of a miss's time otherwise) and
    /// passes `Cycles::UNTIMED`.
    pub untimed_tlb_misses: bool,
    /// `tick` runs between chunks (daemons).
    pub wants_tick: bool,
    /// Every page is mapped with this one size index and no mapping ever changes size (the
    /// engine's single-size fast path).
    pub only_size: Option<u32>,
    /// `file_mapping_alignment` places file mappings that name no address.
    pub places_file_mappings: bool,
    /// Passes over the whole trace before the measured run (Romer et al.'s OFFLINE plans its
    /// static superpages so); see `end_planning_pass`. 0: none.
    pub planning_passes: u32,
    /// The policy runs in a guest and talks to the hypervisor (Trident-pv's hypercalls): the
    /// machine must walk nested page tables (`MACHINE+nested`).
    pub needs_nested: bool,
    /// The OS mechanisms the policy turns on.
    pub os: OsFeatures,
}

/// A superpage policy. The engine calls these hooks; each says when it fires. A policy is
/// `Any`, so a test may look at the concrete one inside an engine (`&mut *e.policy as &mut dyn
/// Any`); the engine and the drivers never do.
pub trait Policy: Any + Send {
    fn name(&self) -> String;
    /// Read once by `Engine::new` (and by the driver for `planning_passes`): what this policy
    /// needs. It must not change during a run.
    fn features(&self) -> Features {
        Features::default()
    }
    /// A page fault on an unmapped address inside a VMA (every fault unless `serve_fault`
    /// served it): which page size maps it.
    fn on_fault(&mut self, f: &FaultInfo) -> FaultDecision;
    /// With `serves_faults`, before `on_fault`: serve an anonymous page fault of process `pi` at
    /// `va` in `vma` with the OS mechanisms directly. Returns the size index of the page that
    /// maps `va` afterwards, or None to let the engine map what `on_fault` decides.
    fn serve_fault(&mut self, _sys: &mut Sys, _pi: usize, _va: u64, _write: bool, _vma: &Vma) -> Option<u32> {
        None
    }
    /// With `places_file_mappings`, at every mmap of a file that names no address (no
    /// MAP_FIXED) of `len` bytes: place it at a virtual address congruent to its file offset
    /// modulo the returned size in bytes (Navarro et al.'s aligned placement,
    /// os/placement.rs); None: where the trace put it.
    fn file_mapping_alignment(&self, _len: u64) -> Option<u64> {
        None
    }
    /// With `wants_unmaps`, after pages of process `pi` in [start, end) were unmapped (munmap,
    /// MADV_DONTNEED, mremap's old range, a shrinking brk; the whole space at exit).
    fn on_unmap(&mut self, _pi: usize, _start: u64, _end: u64) {}
    /// With `wants_tlb_misses`, at a miss at every TLB level by process `pi` at `va`, whose
    /// translation (a page of size index `size_idx`, faulted in first if it was not mapped) is
    /// about to be loaded. The policy may change the mapping here (Romer et al. promote in the
    /// miss handler); the engine then loads whatever maps `va` afterwards. Translations that
    /// left the last-level TLBs since the last call wait in `sys.mmu.evictions`.
    fn on_tlb_miss(&mut self, _sys: &mut Sys, _pi: usize, _va: u64, _size_idx: u32, _fetch: bool) {}
    /// After every fault the engine mapped: it asked for size index `wanted` and got `got`
    /// (smaller when the larger page could not be had).
    fn on_fault_done(&mut self, _wanted: u32, _got: u32) {}
    /// During a fault, each time no frame block of size index `size_idx` could be allocated
    /// (before falling back to a smaller size).
    fn on_alloc_failure(&mut self, _size_idx: u32) {}
    /// With `wants_tick`, between chunks of the trace: periodic work (daemons).
    fn tick(&mut self, _sys: &mut Sys) {}
    /// With `planning_passes`, after planning pass `pass` (from 0) ran the whole trace: learn
    /// from it and return whether another pass is wanted. Either way the policy must be ready
    /// for what follows: the next pass, or (false, or the last pass) the measured run.
    fn end_planning_pass(&mut self, _pass: u32) -> bool {
        false
    }
    /// The policy's own counters (decision reasons), as name/value pairs, read at the end.
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

pub const REGISTRY: [PolicyInfo; 6] = [
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
    PolicyInfo {
        name: "trident",
        summary: "Trident's 1GB, 2MB and 4KB pages: 1GB then 2MB at fault, background promotion to 1GB first, then 2MB",
        params: trident::PARAMS,
        build: trident::build,
    },
];

/// Parse `NAME[:key=value,...]` (a bare `NAME:VALUE` sets the policy's main parameter).
pub fn parse_spec(spec: &str) -> Result<(String, Params)> {
    crate::spec::parse("policy", spec, &format!("{} (see `superpager policies`)", names().join(", ")))
}

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|p| p.name).collect()
}

/// Build a policy from `NAME[:params]` or a TOML file (`name = "fixed"` plus parameter keys).
pub fn build(spec: &str, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    let (name, params) = if spec.ends_with(".toml") {
        let src = std::fs::read_to_string(spec).map_err(|e| Error::io(spec, &e))?;
        let table: toml::Table = src.parse().map_err(|e: toml::de::Error| Error::config(spec, "?", e.message().replace('\n', " ")))?;
        let name = table.get("name").and_then(|v| v.as_str()).ok_or_else(|| Error::config(spec, "name", "a policy file needs name = \"POLICY\""))?.to_string();
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
    let info = REGISTRY
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Error::usage(format!("unknown policy '{name}'; available: {} (see `superpager policies`)", names().join(", "))))?;
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
