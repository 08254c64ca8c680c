//! Multi-phase experiments on one simulated machine, for runs a scenario's processes cannot
//! express: phases that must follow each other in order (each starting when the previous
//! ended) with measurements taken between them.
//!
//! `fragmentation` is Navarro et al.'s sustained-benefit experiment (OSDI 2002 §6.4, Figs. 4
//! and 5): wired kernel pages are placed, a web server fills memory with its files through the
//! page cache and exits, a large dense program runs several times in a row, and the web server
//! runs again. Each phase reports the superpages it got and its page-ins; the contiguity metric
//! is sampled throughout.

use crate::engine::{Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::mmu::machine::Machine;
use crate::os::prelude::Prelude;
use crate::policy;
use crate::stats::Sample;
use crate::trace::spt::PrefetchReader;
use serde::Serialize;
use std::collections::BTreeMap;

/// What one phase did.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub label: String,
    /// Simulated time at its start and end (ms).
    pub start_ms: f64,
    pub end_ms: f64,
    /// Page-cache misses: pages read from disk.
    pub page_ins: u64,
    /// Page walks (data-TLB misses reaching the walker) and accesses of the phase.
    pub walks: u64,
    pub accesses: u64,
    /// Superpages promoted in the phase, per size (the policy's `promote.<size>` counters).
    pub promotions: BTreeMap<String, u64>,
    /// The most pages of the largest superpage size mapped at once during the phase.
    pub largest_pages_peak: u64,
    /// Contiguity metric at the end of the phase.
    pub contiguity_end: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FragmentationOutcome {
    pub machine: String,
    pub policy: String,
    pub memory: String,
    pub largest_size: String,
    pub phases: Vec<Phase>,
    /// (ms, contiguity metric, phase label), sampled through the program runs and at every
    /// phase boundary (preludes take no simulated time).
    pub series: Vec<(f64, f64, String)>,
    /// Every counter of the whole run, as `simulate` reports them.
    pub counters: BTreeMap<String, u64>,
}

pub struct FragmentationSetup {
    pub machine: Machine,
    pub policy: String,
    pub memory: crate::units::Bytes,
    pub seed: u64,
    /// Wired frames placed before the web server (scattered, or pooled under clustering).
    pub wired: u64,
    /// The web server (a `webserver` prelude, run twice).
    pub web: Prelude,
    /// The dense program's trace, run `runs` times in a row.
    pub program: String,
    pub runs: u32,
    pub sample_every: u64,
    pub validate: bool,
}

fn promotions(e: &Engine) -> BTreeMap<String, u64> {
    let pname = e.policy.name();
    e.policy.counters().into_iter().filter_map(|(k, v)| k.strip_prefix(&format!("{pname}.promote.")).map(|s| (s.to_string(), v))).collect()
}

/// Run the experiment; `progress(label, fraction)` hears about each phase.
pub fn fragmentation(s: &FragmentationSetup, progress: &mut dyn FnMut(&str, f64)) -> Result<FragmentationOutcome> {
    if !matches!(s.web, Prelude::Webserver { .. }) {
        return Err(Error::usage("the fragmentation experiment's web server must be a webserver prelude"));
    }
    let pol = policy::build(&s.policy, &s.machine.page_sizes)?;
    let cfg = EngineConfig { memory: s.memory, sample_every: s.sample_every, validate: s.validate, ..EngineConfig::default() };
    let mut e = Engine::new(s.machine.clone(), pol, cfg)?;
    let largest = *e.os.sizes.last().expect("a machine has page sizes");
    let ms_per_cycle = 1.0 / (e.mmu.machine.clock_ghz * 1e6);
    let mut series: Vec<(f64, f64, String)> = Vec::new();
    let mut phases = Vec::new();
    let sample = |e: &mut Engine, label: &str, series: &mut Vec<(f64, f64, String)>| {
        let smp = Sample::take(&e.snapshot());
        series.push((smp.cycles as f64 * ms_per_cycle, smp.contiguity, label.to_string()));
    };
    let wired = Prelude::Wired { count: s.wired, below: u64::MAX };
    wired.apply(&mut e.os, s.seed, &mut |f| progress("wired pages", f))?;
    sample(&mut e, "boot", &mut series);

    // A phase: note the counters, run it, and report the differences.
    struct Before {
        ms: f64,
        misses: u64,
        walks: u64,
        accesses: u64,
        promo: BTreeMap<String, u64>,
        samples: usize,
    }
    let before = |e: &Engine| Before {
        ms: e.now() as f64 * ms_per_cycle,
        misses: e.os.files.cache.counters.misses,
        walks: e.mmu.walk.walks.iter().sum(),
        accesses: e.accesses,
        promo: promotions(e),
        samples: e.series.len(),
    };
    let finish = |e: &mut Engine, b: Before, label: String| -> Phase {
        let promo = promotions(e).into_iter().map(|(k, v)| (k.clone(), v - b.promo.get(&k).copied().unwrap_or(0))).collect();
        let name = largest.name();
        let peak = e.series[b.samples..].iter().map(|x| x.resident.get(&name).copied().unwrap_or(0) / largest.bytes()).max().unwrap_or(0);
        let smp = Sample::take(&e.snapshot());
        Phase {
            label,
            start_ms: b.ms,
            end_ms: e.now() as f64 * ms_per_cycle,
            page_ins: e.os.files.cache.counters.misses - b.misses,
            walks: e.mmu.walk.walks.iter().sum::<u64>() - b.walks,
            accesses: e.accesses - b.accesses,
            promotions: promo,
            largest_pages_peak: peak,
            contiguity_end: smp.contiguity,
        }
    };

    let b = before(&e);
    s.web.apply(&mut e.os, s.seed ^ 0x77eb, &mut |f| progress("web server", f))?;
    phases.push(finish(&mut e, b, "web server".into()));
    sample(&mut e, "web server", &mut series);
    validate(&e, "the web server")?;

    for run in 0..s.runs {
        let label = format!("program run {}", run + 1);
        let b = before(&e);
        let mut reader = PrefetchReader::open(&s.program, false)?;
        let total = reader.meta.file_len.saturating_sub(reader.meta.data_offset).max(1);
        while let Some(c) = reader.next()? {
            let done = c.end_offset - reader.meta.data_offset;
            e.run_chunk_as(run, (run + 1) * 100_000, &c)?;
            reader.give_back(c);
            progress(&label, done as f64 / total as f64);
            let n = e.series.len();
            if n > 0 && series.last().is_none_or(|x| x.0 < e.series[n - 1].cycles as f64 * ms_per_cycle) {
                let smp = &e.series[n - 1];
                series.push((smp.cycles as f64 * ms_per_cycle, smp.contiguity, label.clone()));
            }
        }
        // The program's own samples count toward its peak; take one at its end as well.
        e.sample();
        phases.push(finish(&mut e, b, label.clone()));
        sample(&mut e, &label, &mut series);
        validate(&e, &label)?;
    }

    let b = before(&e);
    s.web.apply(&mut e.os, s.seed ^ 0x77eb, &mut |f| progress("web server again", f))?;
    phases.push(finish(&mut e, b, "web server again".into()));
    sample(&mut e, "web server again", &mut series);
    validate(&e, "the web server's second run")?;

    let results = e.results();
    Ok(FragmentationOutcome {
        machine: results.machine,
        policy: results.policy,
        memory: results.memory,
        largest_size: largest.name(),
        phases,
        series,
        counters: results.counters,
    })
}

fn validate(e: &Engine, after: &str) -> Result<()> {
    if e.cfg.validate {
        e.validate().map_err(|m| Error::Sim(format!("invariant broken after {after}: {m}")))?;
    }
    Ok(())
}

/// How the strided-preemption adversary's little free memory lies (Navarro et al. §A.4.5: the
/// setup is stripped from the text; these are two readings of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FreeMemory {
    /// Whole: `free_extents` aligned extents of the largest size are free, every other frame
    /// is wired ("only a little memory available, in contiguous runs").
    Extents,
    /// Scattered inside reservations: another process reserves those extents and populates
    /// every base page but one of each smallest-superpage region, so no two free frames are
    /// adjacent and every free frame sits in a reservation ("no memory available in contiguous
    /// runs").
    Scattered,
}

impl FreeMemory {
    pub fn parse(s: &str) -> Result<FreeMemory> {
        match s {
            "extents" => Ok(FreeMemory::Extents),
            "scattered" => Ok(FreeMemory::Scattered),
            _ => Err(Error::usage(format!("free_memory: unknown value '{s}' (expected extents or scattered)"))),
        }
    }
}

/// What the strided-preemption adversary measured (Navarro et al. §A.4.5). Every count but
/// `counters` is the strided process's alone (the set-up phase subtracted).
#[derive(Clone, Debug, Serialize)]
pub struct StridedOutcome {
    pub policy: String,
    /// Free memory at the start: `free_extents` extents of the largest size, lying as
    /// `free_memory` says.
    pub free_extents: u64,
    pub free_memory: FreeMemory,
    pub touches: u64,
    pub faults: u64,
    /// Faults during which the policy preempted at least one reservation (`navarro`'s
    /// `fault.preempting`).
    pub faults_preempting: u64,
    /// Reservations made and failed (the policy's attempts), reservations the policy preempted
    /// for a request, and reservations the allocator dissolved because no free frame was left
    /// (summed over sizes).
    pub reservations: u64,
    pub reservations_failed: u64,
    pub preemptions: u64,
    pub dissolved_for_frames: u64,
    pub cycles: u64,
    /// The whole run's counters, set-up phase included.
    pub counters: BTreeMap<String, u64>,
}

/// The strided-preemption adversary: memory is wired everywhere except `free_extents` aligned
/// extents of the largest page size (with `FreeMemory::Scattered`, another process then
/// reserves and nearly fills them), and one process writes one byte every `stride` bytes of a
/// large mapping, `touches` times, so first touches keep asking for extents that are scarce.
/// With `validate`, the OS model's invariants are checked after each phase.
#[allow(clippy::too_many_arguments)]
pub fn strided_preemption(
    machine: Machine,
    policy_spec: &str,
    memory: crate::units::Bytes,
    free_extents: u64,
    free_memory: FreeMemory,
    stride: u64,
    touches: u64,
    validate: bool,
) -> Result<StridedOutcome> {
    use crate::trace::{Access, AccessKind, Chunk, Event, MAP_ANONYMOUS, MAP_PRIVATE};
    let pol = policy::build(policy_spec, &machine.page_sizes)?;
    let cfg = EngineConfig { memory, sample_every: 0, validate, ..EngineConfig::default() };
    let mut e = Engine::new(machine, pol, cfg)?;
    let largest = e.os.sizes.last().expect("page sizes").bytes() >> e.os.base.shift();
    let extents = e.os.phys.total_frames() / largest;
    if free_extents == 0 || free_extents >= extents {
        return Err(Error::usage(format!("free_extents must be between 1 and {} (the memory's largest-size extents minus one)", extents - 1)));
    }
    // Keep `free_extents` extents spread over memory free; wire every other frame.
    let step = extents / free_extents;
    let keep = |pfn: u64| {
        let x = pfn / largest;
        x % step == step / 2 && x / step < free_extents
    };
    for pfn in 0..e.os.phys.total_frames() {
        if !keep(pfn) && e.os.phys.kind_of(pfn) == crate::os::frames::FrameKind::Free && e.os.phys.alloc_at(pfn, 0, crate::os::frames::FrameKind::Wired) {
            e.os.wired.place(pfn);
        }
    }
    let page = e.os.base.bytes();
    let mapping = |pid: u32, addr: u64, len: u64| {
        let mut c = Chunk::default();
        c.events.push((0, Event::Context { pid, tid: pid }));
        c.events.push((0, Event::Mmap { addr, len, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
        c
    };
    let mut before = BTreeMap::new();
    if free_memory == FreeMemory::Scattered {
        // Another process maps as much as is free and writes every base page but the last of
        // each smallest-superpage region: its reservations take the free extents, and their
        // unpopulated frames, one per region, are all the free memory left.
        let per = e.os.sizes.get(1).map_or(1, |s| s.bytes() / page);
        let len = free_extents * largest * page;
        let mut c = mapping(2, 0x200_0000_0000, len);
        for i in (0..len / page).filter(|i| per > 1 && i % per != per - 1) {
            c.accesses.push(Access::new(0x200_0000_0000 + i * page, AccessKind::Store, 1));
        }
        e.run_chunk(&c)?;
        before = e.results().counters;
    }
    const BASE: u64 = 0x100_0000_0000;
    let mut c = mapping(1, BASE, stride * touches);
    for i in 0..touches {
        c.accesses.push(Access::new(BASE + i * stride, AccessKind::Store, 1));
    }
    e.run_chunk(&c)?;
    let r = e.results();
    // The strided process's share of the counters starting with `prefix`, or named `key`.
    let share = |k: &String, v: &u64| v - before.get(k).copied().unwrap_or(0);
    let sum = |prefix: &str| r.counters.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| share(k, v)).sum::<u64>();
    let one = |key: &str| r.counters.get_key_value(key).map_or(0, |(k, v)| share(k, v));
    let pname = r.policy.clone();
    Ok(StridedOutcome {
        policy: pname.clone(),
        free_extents,
        free_memory,
        touches,
        faults: one("faults"),
        faults_preempting: one(&format!("policy.{pname}.fault.preempting")),
        reservations: sum(&format!("policy.{pname}.reserve.")),
        reservations_failed: sum(&format!("policy.{pname}.reserve_failed.")),
        preemptions: sum(&format!("policy.{pname}.preempt.")),
        dissolved_for_frames: one("reserv.reclaimed"),
        cycles: one("cycles.total"),
        counters: r.counters,
    })
}

/// What the dirty-file adversary measured (Navarro et al. §A.4.5).
#[derive(Clone, Debug, Serialize)]
pub struct DirtyFileOutcome {
    pub policy: String,
    pub file_bytes: u64,
    /// Every `every`-th page was written.
    pub every: u64,
    pub pages_written: u64,
    /// File superpages built by reading the mapping, per size.
    pub superpages: BTreeMap<String, u64>,
    /// Pages the flush must write (dirty in the page cache at the end) and their bytes.
    pub dirty_pages: u64,
    pub flush_bytes: u64,
    /// The run's cycles, and what writing `flush_bytes` back costs at the machine's I/O rate.
    pub cycles: u64,
    pub flush_cycles: u64,
    pub walks: u64,
    pub counters: BTreeMap<String, u64>,
}

/// The dirty-file adversary: map a file shared, read every page, write every `every`-th page;
/// then count what a flush would write.
pub fn dirty_file(machine: Machine, policy_spec: &str, memory: crate::units::Bytes, file_bytes: u64, every: u64) -> Result<DirtyFileOutcome> {
    use crate::trace::{Access, AccessKind, Chunk, Event, MAP_SHARED};
    if every == 0 {
        return Err(Error::usage("every must be at least 1"));
    }
    let pol = policy::build(policy_spec, &machine.page_sizes)?;
    let cfg = EngineConfig { memory, sample_every: 0, ..EngineConfig::default() };
    let mut e = Engine::new(machine, pol, cfg)?;
    let page = e.os.base.bytes();
    let pages = file_bytes / page;
    const BASE: u64 = 0x100_0000_0000;
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    c.events.push((0, Event::FileOpen { fd: 3, path: "/adversary/file".into(), size: file_bytes }));
    c.events.push((0, Event::Mmap { addr: BASE, len: file_bytes, prot: 3, flags: MAP_SHARED, fd: 3, offset: 0 }));
    for i in 0..pages {
        c.accesses.push(Access::new(BASE + i * page, AccessKind::Load, 8));
    }
    let mut written = 0;
    for i in (0..pages).step_by(every as usize) {
        c.accesses.push(Access::new(BASE + i * page, AccessKind::Store, 8));
        written += 1;
    }
    e.run_chunk(&c)?;
    let r = e.results();
    let superpages = r.counters.iter().filter_map(|(k, v)| k.strip_prefix("file.superpages.").map(|s| (s.to_string(), *v))).collect();
    let dirty = r.counters["pagecache.dirty_pages"];
    Ok(DirtyFileOutcome {
        policy: r.policy.clone(),
        file_bytes,
        every,
        pages_written: written,
        superpages,
        dirty_pages: dirty,
        flush_bytes: dirty * page,
        cycles: r.counters["cycles.total"],
        flush_cycles: ((dirty * page) as f64 / 1024.0 * e.mmu.machine.io_cycles_per_kib) as u64,
        walks: r.counters["walks"],
        counters: r.counters,
    })
}

/// What the shared-file experiment measured (aligned placement of file mappings).
#[derive(Clone, Debug, Serialize)]
pub struct SharedFileOutcome {
    pub policy: String,
    pub processes: u32,
    /// Per process: the trace's mapping address, the address the OS placed it at, and its
    /// page walks.
    pub trace_addresses: Vec<u64>,
    pub placed_addresses: Vec<u64>,
    pub walks: Vec<u64>,
    /// Walks in the passes after the first (the first faults every page in and promotes).
    pub walks_after_first_pass: Vec<u64>,
    /// File superpages built (promotions of file mappings, and mappings made whole at a fault
    /// from a cached extent; all processes), per size.
    pub superpages: BTreeMap<String, u64>,
    pub counters: BTreeMap<String, u64>,
}

/// Several processes map one file shared at addresses like Linux's (2MB-aligned: every other
/// one is not aligned to 4MB), one after another, and each reads every page `passes` times.
/// Aligned placement (Navarro et al., notes §A.2.11) lets each of them map the shared page-cache
/// extents with the largest superpages; without it, only the processes whose address agrees.
pub fn shared_file(
    machine: Machine,
    policy_spec: &str,
    memory: crate::units::Bytes,
    file_bytes: u64,
    processes: u32,
    passes: u32,
) -> Result<SharedFileOutcome> {
    use crate::trace::{Access, AccessKind, Chunk, Event, MAP_SHARED};
    if processes == 0 || passes == 0 {
        return Err(Error::usage("processes and passes must be at least 1"));
    }
    let pol = policy::build(policy_spec, &machine.page_sizes)?;
    let cfg = EngineConfig { memory, sample_every: 0, ..EngineConfig::default() };
    let mut e = Engine::new(machine, pol, cfg)?;
    let page = e.os.base.bytes();
    // Each process's mapping: 2MB past a 1GB boundary for odd processes, on it for even ones.
    let addr = |k: u32| 0x100_0000_0000u64 + k as u64 * (1 << 30) + (k as u64 % 2) * (2 << 20);
    let walked = |e: &Engine| e.mmu.walk.walks.iter().sum::<u64>();
    let (mut walks, mut later, mut placed) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..processes {
        let pid = k + 1;
        let start = walked(&e);
        let mut first = 0;
        for pass in 0..passes {
            let mut c = Chunk::default();
            c.events.push((0, Event::Context { pid, tid: pid }));
            if pass == 0 {
                c.events.push((0, Event::FileOpen { fd: 3, path: "/shared/file".into(), size: file_bytes }));
                c.events.push((0, Event::Mmap { addr: addr(k), len: file_bytes, prot: 1, flags: MAP_SHARED, fd: 3, offset: 0 }));
            }
            for i in 0..file_bytes / page {
                c.accesses.push(Access::new(addr(k) + i * page, AccessKind::Load, 8));
            }
            e.run_chunk(&c)?;
            if pass == 0 {
                first = walked(&e) - start;
            }
        }
        let pi = e.os.proc_index(pid);
        placed.push(e.os.procs[pi].relocs.translate(addr(k)));
        walks.push(walked(&e) - start);
        later.push(walked(&e) - start - first);
    }
    let r = e.results();
    // Promoted in place, or mapped whole at a fault from an extent already cached.
    let at_fault = |size: &str| r.counters.get(&format!("file.mapped_at_fault.{size}")).copied().unwrap_or(0);
    let superpages = r.counters.iter().filter_map(|(k, v)| k.strip_prefix("file.superpages.").map(|s| (s.to_string(), *v + at_fault(s)))).collect();
    Ok(SharedFileOutcome {
        policy: r.policy.clone(),
        processes,
        trace_addresses: (0..processes).map(addr).collect(),
        placed_addresses: placed,
        walks,
        walks_after_first_pass: later,
        superpages,
        counters: r.counters,
    })
}
