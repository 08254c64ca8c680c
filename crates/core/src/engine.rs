//! The event loop. Address-space events go to the OS model; accesses go to the MMU model; a
//! last-level TLB miss walks the page table the OS owns; a non-present page is a fault the
//! policy serves. Simulated cycles come from the machine's cost model (stats::cycles).
//!
//! The per-access path (`run_accesses`) allocates nothing and calls no Python: it walks a flat
//! slice of decoded records and probes TLB arrays. Misses and faults leave it through
//! out-of-line functions.

use crate::bloat::Touched;
use crate::error::{Error, Result};
use crate::mmu::host_tables::HostTables;
use crate::mmu::machine::Machine;
use crate::mmu::Mmu;
use crate::os::{MapOutcome, Os, Vma};
use crate::policy::{FaultInfo, Policy, Sys};
use crate::stats::{Results, Sample, Snapshot};
use crate::trace::{Access, AccessKind, Chunk, Event};
use crate::units::Bytes;
use crate::units::Cycles;

/// The most time-series samples a run keeps (see `Engine::sample`).
pub const MAX_SAMPLES: usize = 16384;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Simulated physical memory.
    pub memory: Bytes,
    /// Take a time-series sample every this many accesses (0 = only at the end).
    pub sample_every: u64,
    /// Run the OS invariant validator after every event and chunk (slow; for tests).
    pub validate: bool,
    /// Allow exact fast paths (the single-size lookup of base-pages-only runs). Off only to
    /// check, in tests, that they change no result.
    pub fast_paths: bool,
    /// Swap space (0: none; anonymous memory is then never reclaimed).
    pub swap: Bytes,
    /// Replacement policy for anonymous pages when swapping (`clock`, `lru`).
    pub replacement: String,
    /// Record which base pages are touched, to report bloat (`bloat.<size>`; bloat.rs). Costs a
    /// lookup per access, so off by default.
    pub bloat: bool,
    /// Keep a frame of the physical-memory map (os/physmap.rs) every this many accesses (0:
    /// none), with cells of `1 << map_region_shift` bytes (None: the largest page size).
    pub map_every: u64,
    pub map_region_shift: Option<u32>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            memory: Bytes(64 << 30),
            sample_every: 1 << 20,
            validate: false,
            fast_paths: true,
            swap: Bytes(0),
            replacement: "clock".into(),
            bloat: false,
            map_every: 0,
            map_region_shift: None,
        }
    }
}

pub struct Engine {
    pub mmu: Mmu,
    pub os: Os,
    pub policy: Box<dyn Policy>,
    pub cfg: EngineConfig,
    cur_pi: usize,
    cur_asid: u16,
    cur_live: bool,
    /// The current process has copy-on-write pages: writes must be checked.
    cur_cow: bool,
    /// The current process has trace ranges placed elsewhere: addresses must be translated.
    cur_relocated: bool,
    /// The policy places file mappings at aligned addresses (`Policy::file_mapping_alignment`).
    aligns_files: bool,
    pub accesses: u64,
    pub by_kind: [u64; 4],
    pub records: u64,
    pub instructions: u64,
    pub events: u64,
    pub series: Vec<Sample>,
    /// Times the series was thinned to stay within MAX_SAMPLES (the interval doubling each).
    pub series_decimations: u64,
    /// The next access count at which a sample or a map frame is due (the smaller of the two).
    next_sample: u64,
    next_series: u64,
    next_map: u64,
    /// Physical-memory map frames (`EngineConfig::map_every`).
    pub maps: Vec<crate::stats::MapFrame>,
    started: bool,
    /// The policy maps only base pages: use the MMU's single-size fast path (left for the
    /// general one once a coalesced entry exists, which that path does not probe).
    base_only: bool,
    /// The machine coalesces PTEs (AMD): every base-page walk checks its cache line.
    coalescing: bool,
    /// The policy runs daemons (`Policy::tick`).
    ticks: bool,
    /// The policy watches TLB misses (`Policy::on_tlb_miss`).
    tlb_miss_hook: bool,
    /// The replacement policy hears of references the TLB serves too (`sees=every`; only
    /// with swap, when it chooses victims).
    hits_are_references: bool,
    /// The miss hook reads no time (`Features::untimed_tlb_misses`).
    untimed_misses: bool,
    /// The policy serves anonymous faults itself (`Policy::serve_fault`).
    serves_faults: bool,
    /// The policy hears about unmapped ranges (`Policy::on_unmap`).
    tells_unmaps: bool,
    /// Scenario runs: pids of the current source are its trace's pids plus `pid_base`; the
    /// last pid each source ran, to resume it at its next quantum.
    pid_base: u32,
    source: u32,
    source_pid: Vec<u32>,
    cur_pid: u32,
    /// Simulated time with no process ready (a scenario's gaps between start times).
    pub idle_cycles: u64,
    /// With `EngineConfig::bloat`: the base pages each process touched, and the bloat per page
    /// size of processes that exited (measured at their exit, as their footprint is).
    touched: Option<Touched>,
    exited_bloat: [u64; crate::mmu::MAX_SIZES],
    /// The cost inputs at the last phase mark (a zero-length madvise), if any.
    phase_mark: Option<crate::stats::CostInputs>,
    /// With data caches on a nested machine: where the host's entries are (mmu/host_tables.rs).
    host_tables: Option<HostTables>,
    /// The daemons' clock's share of a shared last level (stats.rs `ClockShare`).
    clock_share: crate::stats::ClockShare,
}

/// Queue the host entries a nested walk reads to translate guest-physical `gpa`, from level
/// `w.0` down to `w.1`, and return how many of them the host's page-walk caches spared (their
/// walk starts below the deepest hit: `Mmu::host_pwcs`). A free function so that `cache_refs`
/// can hold the data caches and the host's walk caches, both in the MMU, at once; no closure,
/// since a closure would not take the AVX2 the loop is compiled with.
///
/// # Safety
/// With WIDE, as for `Tlb::access_in`.
#[inline(always)]
unsafe fn defer_host_walk<const WIDE: bool>(
    caches: &mut crate::mmu::cache::Caches,
    host_pwcs: &mut Option<crate::mmu::pwc::HostPwcs>,
    tables: &HostTables,
    gpa: u64,
    w: (u8, u8),
) -> u64 {
    // SAFETY (both): the caller's contract.
    let top = match host_pwcs {
        Some(h) => unsafe { h.start::<WIDE>(gpa, w) },
        None => w.0,
    };
    for e in tables.walk(gpa, (top, w.1)) {
        unsafe { caches.defer_in::<WIDE>(e, crate::mmu::cache::Requester::Walk) };
    }
    (w.0 - top) as u64
}

impl Engine {
    pub fn new(machine: Machine, policy: Box<dyn Policy>, cfg: EngineConfig) -> Result<Engine> {
        if cfg.memory.0 < machine.largest_page().bytes().min(64 << 20) {
            return Err(Error::usage(format!("memory {} is too small for this machine", cfg.memory)));
        }
        // A nested machine's host tables, which its data caches see above guest memory.
        let host_tables = match (&machine.cache, &machine.nested) {
            (Some(_), Some(n)) => {
                let t = HostTables::new(cfg.memory.0, machine.base_page.shift(), machine.bits_per_level as u32, n.host_levels);
                Some(match (n.host_frames, n.host_page) {
                    (crate::mmu::machine::HostFrames::Scattered, crate::mmu::machine::HostPage::Fixed(p)) => t.scattered(cfg.memory.0, p.shift()),
                    _ => t,
                })
            }
            _ => None,
        };
        if let Some(c) = &machine.cache {
            let reach = host_tables.as_ref().map_or(cfg.memory.0, |t| t.end());
            crate::mmu::cache::Caches::check_memory(c, reach).map_err(|m| Error::usage(format!("machine {}: {m}", machine.name)))?;
        }
        let f = policy.features();
        if f.needs_nested && machine.nested.is_none() {
            return Err(Error::usage(format!("policy {}: paravirtual promotion needs a guest: run on {}+nested (or --nested)", policy.name(), machine.name)));
        }
        let base_only = cfg.fast_paths && f.only_size == Some(0);
        let coalescing = machine.amd_coalescing().is_some();
        let mut mmu = Mmu::new(machine);
        mmu.track_evictions = f.wants_tlb_misses;
        let mut os = Os::new(&mmu, cfg.memory, cfg.swap, &cfg.replacement)?;
        os.configure(f.os, mmu.machine.seed)?;
        // No periodic samples when sample_every is 0: the first sample point is never reached.
        let next_series = if cfg.sample_every == 0 { u64::MAX } else { cfg.sample_every };
        let next_map = if cfg.map_every == 0 { u64::MAX } else { cfg.map_every };
        let hits_are_references = os.swap.enabled() && os.replacement.sees_every_reference();
        let next_sample = next_series.min(next_map);
        let touched = cfg.bloat.then(|| Touched::new(mmu.machine.base_page.shift()));
        let mut e = Engine {
            mmu,
            os,
            policy,
            cfg,
            cur_pi: 0,
            cur_asid: 1,
            cur_live: true,
            cur_cow: false,
            cur_relocated: false,
            aligns_files: f.places_file_mappings,
            accesses: 0,
            by_kind: [0; 4],
            records: 0,
            instructions: 0,
            events: 0,
            series: Vec::new(),
            series_decimations: 0,
            next_sample,
            next_series,
            next_map,
            maps: Vec::new(),
            started: false,
            base_only,
            coalescing,
            ticks: f.wants_tick,
            tlb_miss_hook: f.wants_tlb_misses,
            hits_are_references,
            untimed_misses: f.untimed_tlb_misses,
            serves_faults: f.serves_faults,
            tells_unmaps: f.wants_unmaps,
            pid_base: 0,
            source: 0,
            source_pid: Vec::new(),
            cur_pid: 1,
            idle_cycles: 0,
            touched,
            exited_bloat: [0; crate::mmu::MAX_SIZES],
            phase_mark: None,
            host_tables,
            clock_share: Default::default(),
        };
        e.switch_to(1);
        Ok(e)
    }

    fn switch_to(&mut self, pid: u32) {
        self.cur_pid = pid;
        self.cur_pi = self.os.proc_index(pid);
        if self.os.flush_needed {
            self.os.flush_needed = false;
            self.mmu.flush_all();
        }
        let p = &self.os.procs[self.cur_pi];
        self.cur_asid = p.asid;
        self.cur_live = p.alive && p.killed.is_none();
        self.cur_cow = p.cow_pages > 0;
        self.cur_relocated = !p.relocs.is_empty();
    }

    /// Run one chunk of source `source` (a scenario process) whose pids start at `pid_base`.
    pub fn run_chunk_as(&mut self, source: u32, pid_base: u32, c: &Chunk) -> Result<()> {
        if source != self.source || pid_base != self.pid_base {
            let old = self.source as usize;
            if self.source_pid.len() <= old.max(source as usize) {
                self.source_pid.resize(old.max(source as usize) + 1, 0);
            }
            self.source_pid[old] = self.cur_pid;
            self.source = source;
            self.pid_base = pid_base;
            self.os.pid_base = pid_base;
            let resume = match self.source_pid[source as usize] {
                0 => pid_base + 1,
                p => p,
            };
            self.switch_to(resume);
        }
        self.run_chunk(c)
    }

    /// Simulated time now: the program's cycles plus idle time (the daemons' clock: on a
    /// shared last level, with the share solved at most `stats::CLOCK_SHARE_EVERY` accesses
    /// ago, `stats::ClockShare`).
    pub fn now(&self) -> u64 {
        self.clock_share.cycles(&self.snapshot()) as u64 + self.idle_cycles
    }

    /// Let simulated time pass with no process running, up to `t` cycles, daemons ticking
    /// (at most a thousand ticks, and at least one per simulated millisecond when fewer).
    pub fn idle_until(&mut self, t: u64) {
        let ms = (self.mmu.machine.clock_ghz * 1e6) as u64;
        let now = self.now();
        if t <= now {
            return;
        }
        let step = ((t - now) / 1000).max(ms).max(1);
        let mut cur = now;
        while cur < t {
            let d = step.min(t - cur);
            self.idle_cycles += d;
            cur += d;
            if self.ticks {
                self.tick();
            }
        }
    }

    /// Run one decoded chunk.
    pub fn run_chunk(&mut self, c: &Chunk) -> Result<()> {
        if !self.started {
            self.started = true;
            self.sample();
        }
        let n = c.accesses.len();
        let mut ev = 0usize;
        let mut i = 0usize;
        while i < n {
            while ev < c.events.len() && c.events[ev].0 as usize <= i {
                self.event(&c.events[ev].1)?;
                ev += 1;
            }
            let next_ev = c.events.get(ev).map_or(n, |e| e.0 as usize);
            self.run_accesses(&c.accesses[i..next_ev])?;
            i = next_ev;
        }
        for (_, e) in &c.events[ev..] {
            self.event(e)?;
        }
        if self.ticks {
            self.tick();
        }
        if self.cfg.validate {
            self.validate().map_err(|m| Error::Sim(format!("invariant broken: {m}")))?;
        }
        Ok(())
    }

    /// The OS model's invariants (`Os::validate`), and the TLBs' coherence with the page
    /// tables: every cached translation of a live process names a page its page table maps
    /// now, at that size (a translation left behind by a missing shootdown would serve hits
    /// for a page that no longer exists). O(TLB entries + OS state): tests only.
    pub fn validate(&self) -> std::result::Result<(), String> {
        self.os.validate()?;
        self.validate_tlbs()
    }

    /// The TLB-coherence half of `validate`: every cached translation (page or coalesced
    /// entry) agrees with the page tables now.
    pub fn validate_tlbs(&self) -> std::result::Result<(), String> {
        for (ti, t) in self.mmu.tlbs.iter().enumerate() {
            for tag in t.tags() {
                let (asid, vpn, si) = crate::mmu::tlb::decode_tag(tag);
                let Some(pi) = self.os.procs.iter().position(|p| p.alive && p.asid == asid) else { continue };
                let p = &self.os.procs[pi];
                if let Some(c) = self.mmu.coalesced.as_ref().filter(|c| c.mask & (1 << si) != 0) {
                    // A coalesced entry: its group must still be coalescible (a PTE changed
                    // inside it without a shootdown would leave a stale translation).
                    let n = c.groups[(si - c.first) as usize];
                    let gs = vpn << (self.os.base.shift() + n.trailing_zeros());
                    if !self.os.base_group_contiguous(pi, gs, n) {
                        return Err(format!(
                            "TLB {ti} holds a coalesced entry for the {n} base pages at {gs:#x} (process {}), which are no longer a coalescible group",
                            p.pid
                        ));
                    }
                    continue;
                }
                let Some(size) = self.os.sizes.get(si as usize) else {
                    return Err(format!("TLB {ti} holds a translation of size index {si}, which the machine lacks"));
                };
                let va = vpn << size.shift();
                match p.pt.lookup(va) {
                    Some(tr) if tr.size_idx == si && tr.start == va => {}
                    // A piece of a larger page, splintered to the host's page size.
                    Some(tr) if tr.size_idx != si && self.mmu.tlb_size(tr.size_idx) == si => {}
                    other => {
                        return Err(format!(
                            "TLB {ti} holds a {size} translation of {va:#x} (process {}), but the page table maps {}",
                            p.pid,
                            other.map_or("nothing there".to_string(), |tr| format!("a {} page at {:#x}", self.os.sizes[tr.size_idx as usize], tr.start))
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The hot loop. The loop with data caches is a function of its own: inlined beside the
    /// loop without them, its size changed how the compiler built that one (alpha21264 with
    /// navarro, which has no caches, ran at 0.81x when the first level's set operations were
    /// inlined into the cached loop; 15 alternating runs).
    #[inline]
    fn run_accesses(&mut self, acc: &[Access]) -> Result<()> {
        let cached = self.mmu.caches.is_some();
        #[cfg(target_arch = "x86_64")]
        if self.mmu.wide {
            // SAFETY: `Mmu::wide` is set only when the CPU has AVX2.
            return unsafe {
                match cached {
                    true => self.run_accesses_wide_cached(acc),
                    false => self.run_accesses_wide(acc),
                }
            };
        }
        match cached {
            true => self.run_accesses_cached(acc),
            // SAFETY: WIDE = false takes no AVX2 path.
            false => unsafe { self.run_accesses_body::<false, false>(acc) },
        }
    }

    #[inline(never)]
    fn run_accesses_cached(&mut self, acc: &[Access]) -> Result<()> {
        // SAFETY: WIDE = false takes no AVX2 path.
        unsafe { self.run_accesses_body::<false, true>(acc) }
    }

    /// The same loop compiled for AVX2, so the TLBs' wide set operations inline into it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_accesses_wide(&mut self, acc: &[Access]) -> Result<()> {
        // SAFETY: this function is compiled with AVX2 and entered only when the CPU has it.
        unsafe { self.run_accesses_body::<true, false>(acc) }
    }

    /// The loop with data caches compiled for AVX2 (the caches' first level takes the wide set
    /// operations too where it runs beside the engine).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    unsafe fn run_accesses_wide_cached(&mut self, acc: &[Access]) -> Result<()> {
        // SAFETY: as for `run_accesses_wide`.
        unsafe { self.run_accesses_body::<true, true>(acc) }
    }

    /// # Safety
    /// With WIDE, as for `Tlb::access_in`.
    #[inline(always)]
    /// CACHED: the machine has data caches (`Mmu::caches`); compiled apart so that machines
    /// without them run exactly the loop they ran before caches existed.
    unsafe fn run_accesses_body<const WIDE: bool, const CACHED: bool>(&mut self, acc: &[Access]) -> Result<()> {
        if !self.cur_live {
            let dropped: u64 = acc.iter().map(|a| a.count as u64).sum();
            self.os.counters.accesses_dropped += dropped;
            return Ok(());
        }
        self.records += acc.len() as u64;
        let asid = self.cur_asid;
        for (i, a) in acc.iter().enumerate() {
            let moved;
            let a = if self.cur_relocated {
                moved = Access { addr: self.os.procs[self.cur_pi].relocs.translate(a.addr), ..*a };
                &moved
            } else {
                a
            };
            if CACHED {
                // The entry cache_refs will read PTE_AHEAD accesses from now.
                if let Some(n) = acc.get(i + Self::PTE_AHEAD) {
                    self.os.procs[self.cur_pi].pt.prefetch_entry(n.addr);
                }
            }
            let fetch = a.kind.is_fetch();
            let walk_refs = if CACHED { self.mmu.walk.refs } else { 0 };
            self.accesses += a.count as u64;
            self.by_kind[a.kind as usize] += a.count as u64;
            // The size of the page that served the access (None: the access killed its process).
            let served = if self.base_only {
                // SAFETY: the caller's contract.
                match unsafe { self.mmu.lookup_single_size::<WIDE>(a.addr, asid, fetch, 0) } {
                    Some(_) => {
                        if self.hits_are_references {
                            self.hit_is_a_reference(a.addr);
                        }
                        Some(0)
                    }
                    None => match self.os.procs[self.cur_pi].pt.cached_present(a.addr) {
                        // The common miss: the page is mapped and its table is in the page
                        // table's region cache; count the walk here, without the call.
                        Some(true) if !(self.os.swap.enabled() || self.coalescing && self.may_coalesce(a.addr)) => {
                            // SAFETY: the caller's contract.
                            unsafe { self.mmu.walk_only::<WIDE>(a.addr, asid, 0) };
                            Some(0)
                        }
                        // Some(false): the region cache already shows a first touch.
                        cached => self.miss_base_only(a, cached == Some(false))?,
                    },
                }
            } else {
                match self.mmu.lookup(a.addr, asid, fetch) {
                    Some((_, si)) => {
                        if self.hits_are_references {
                            self.hit_is_a_reference(a.addr);
                        }
                        Some(si)
                    }
                    None => self.miss(a)?,
                }
            };
            let Some(si) = served else {
                // Killed by this access: it and the rest of the run are dropped.
                self.accesses -= a.count as u64;
                self.by_kind[a.kind as usize] -= a.count as u64;
                let rest: u64 = acc[i..].iter().map(|a| a.count as u64).sum();
                self.os.counters.accesses_dropped += rest;
                return Ok(());
            };
            if let Some(t) = &mut self.touched {
                t.touch(self.cur_pi, a.addr);
            }
            if CACHED {
                // SAFETY: the caller's contract.
                unsafe { self.cache_refs::<WIDE>(a, si, self.mmu.walk.refs != walk_refs) };
            }
            if self.cur_cow && a.kind.writes() {
                self.write_to_cow(a)?;
            }
            if a.count > 1 {
                self.repeat_hits(fetch, si, a.count - 1);
            }
            if self.accesses >= self.next_sample {
                self.sample_due();
            }
        }
        Ok(())
    }

    /// How many accesses ahead the loop with data caches prefetches a page-table entry
    /// (`PageTable::prefetch_entry`): far enough for a host memory read to arrive, near
    /// enough that few mappings change in between (a changed one only wastes the hint).
    const PTE_AHEAD: usize = 8;

    /// With data caches: the walk's table entries (when this access walked) and then the
    /// access itself go through them by physical address. Instruction fetches do not (they
    /// cost `cycles_per_access`, as without caches); a record's repeats (a same-page run the
    /// trace collapsed) count as first-level hits. Inlined into the loop with caches only
    /// (the loop without them does not call it): 1.07x refs/s on host, alternating medians.
    ///
    /// # Safety
    /// With WIDE, as for `Tlb::access_in` (the first cache level's set operations use AVX2).
    #[inline(always)]
    unsafe fn cache_refs<const WIDE: bool>(&mut self, a: &Access, si: u32, walked: bool) {
        use crate::mmu::cache::Requester;
        // Nested: each guest entry's address, and the final one, translated by a host walk
        // whose entries the caches see too (mmu/host_tables.rs), host levels top down.
        let host = match &self.host_tables {
            Some(t) if walked => self.mmu.host_walk(si).map(|w| (t, w)),
            _ => None,
        };
        let crate::mmu::Mmu { caches, host_pwcs, walk, last_walk, machine, .. } = &mut self.mmu;
        let Some(caches) = caches.as_mut() else { return };
        // No closures here: a closure does not take the AVX2 the loop is compiled with, and the
        // first level's set operations would become calls (0.4x the refs/s on host).
        // SAFETY (every defer_in and defer_host_walk below): the caller's contract.
        let pt = &self.os.procs[self.cur_pi].pt;
        // The data's guest-physical address, read once: the final host walk (nested, walked)
        // and the data reference (not a fetch) both need it; neither does a fetch on a native
        // machine, which read none before.
        let data_pa = if (walked && host.is_some()) || !a.kind.is_fetch() { pt.paddr(a.addr) } else { None };
        if walked && machine.software_handler_cycles.is_none() {
            let (first, leaf) = *last_walk;
            let mut out = [0u64; 8];
            let n = pt.entry_addrs(a.addr, first, leaf, &mut out);
            // Host entries a host page-walk cache hit spared (`Mmu::host_pwcs`): `walk_refs`
            // counted the whole two-dimensional walk.
            let mut spared = 0u64;
            for &pa in &out[..n] {
                let mut hpa = pa;
                if let Some((t, w)) = host {
                    spared += unsafe { defer_host_walk::<WIDE>(caches, host_pwcs, t, pa, w) };
                    hpa = t.hpa(pa);
                }
                unsafe { caches.defer_in::<WIDE>(hpa, Requester::Walk) };
            }
            // The final guest-physical address's host walk.
            if let Some(((t, w), pa)) = host.and_then(|h| Some((h, data_pa?))) {
                spared += unsafe { defer_host_walk::<WIDE>(caches, host_pwcs, t, pa, w) };
            }
            walk.refs -= spared;
            if caches.marks {
                // The walk's end, for the step fit of a chain that walks ahead (mmu/cache.rs).
                caches.end_walk();
            }
        }
        if a.kind.is_fetch() {
            return;
        }
        if let Some(pa) = data_pa {
            // By host-physical address on a nested machine (mmu/host_tables.rs `hpa`).
            let pa = self.host_tables.as_ref().map_or(pa, |t| t.hpa(pa));
            unsafe { caches.defer_in::<WIDE>(pa, Requester::Data) };
        }
        if a.count > 1 {
            caches.first_level_hits(a.count as u64 - 1);
        }
    }

    /// A write in a process with copy-on-write pages: if this page is one, break the sharing
    /// (a write-protection fault).
    #[inline(never)]
    fn write_to_cow(&mut self, a: &Access) -> Result<()> {
        let pi = self.cur_pi;
        if !self.os.procs[pi].pt.maybe_cow(a.addr) {
            return Ok(());
        }
        if let Some(t) = self.os.procs[pi].pt.lookup(a.addr) {
            if t.cow {
                self.os.counters.cow_faults += 1;
                if !self.os.cow_break(pi, t, a.addr, &mut self.mmu)? {
                    return Err(self.os.oom(self.os.procs[pi].pid));
                }
                self.cur_cow = self.os.procs[pi].cow_pages > 0;
            }
        }
        Ok(())
    }

    #[inline(never)]
    fn sample_due(&mut self) {
        if self.next_series <= self.accesses {
            self.sample();
            while self.next_series <= self.accesses {
                self.next_series += self.cfg.sample_every;
            }
        }
        if self.next_map <= self.accesses {
            self.map_frame();
            while self.next_map <= self.accesses {
                self.next_map += self.cfg.map_every;
            }
        }
        self.next_sample = self.next_series.min(self.next_map);
    }

    /// The most map frames a run keeps; past it every other goes and the interval doubles.
    pub const MAX_MAP_FRAMES: usize = 1024;

    /// Record a frame of the physical-memory map (os/physmap.rs).
    pub fn map_frame(&mut self) {
        let shift = self.map_region_shift();
        let cells = self.os.phys_map(shift);
        self.maps.push(crate::stats::MapFrame { accesses: self.accesses, cells });
        if self.maps.len() > Self::MAX_MAP_FRAMES && self.cfg.map_every > 0 {
            let mut i = 0;
            self.maps.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.cfg.map_every = self.cfg.map_every.saturating_mul(2);
            self.next_map = self.accesses.saturating_add(self.cfg.map_every);
        }
    }

    pub fn map_region_shift(&self) -> u32 {
        self.cfg.map_region_shift.unwrap_or_else(|| self.mmu.machine.largest_page().shift())
    }

    /// The rest of a same-page run hits in the first structure that holds the page's size.
    #[inline(always)]
    fn repeat_hits(&mut self, fetch: bool, si: u32, n: u32) {
        // A splintered page's repeats hit the entry the TLB holds for it (`Mmu::tlb_size`).
        let si = self.mmu.tlb_size(si);
        if let Some(t) = self.mmu.first_holder[fetch as usize][si as usize] {
            let counted = self.mmu.repeat_size[fetch as usize][si as usize];
            self.mmu.counters[t].hits[counted as usize] += n as u64;
        }
    }

    /// Whether the walk to the base page at `va` could find a coalescible group: its frame
    /// sits at the same offset in a group as the page, or the region cache cannot tell.
    #[inline(always)]
    fn may_coalesce(&self, va: u64) -> bool {
        let smallest = self.mmu.coalesced.as_ref().map_or(1, |c| c.groups[0]) as u64;
        match self.os.procs[self.cur_pi].pt.cached_base_pfn(va) {
            Some(pfn) => (pfn ^ (va >> self.os.base.shift())) & (smallest - 1) == 0,
            None => true,
        }
    }

    /// A miss everywhere in a base-pages-only run: the TLBs already hold the translation (they
    /// were filled in the lookup pass); resolve it, faulting if needed, and count the walk.
    #[inline(never)]
    fn miss_base_only(&mut self, a: &Access, absent: bool) -> Result<Option<u32>> {
        let pi = self.cur_pi;
        let faults = self.os.counters.faults;
        let Some(si) = self.resolve(a, absent)? else {
            // Segfault: the access never completes; take back the misses and entries its lookup
            // recorded (the entries they displaced are not restored: docs/MODEL.md).
            self.mmu.cancel_single_size(a.addr, self.cur_asid, a.kind.is_fetch(), 0);
            return Ok(None);
        };
        // SAFETY: no AVX2 path (this is the rare miss, compiled once).
        unsafe { self.mmu.walk_only::<false>(a.addr, self.cur_asid, 0) };
        if self.os.swap.enabled() && self.walk_is_a_reference(faults) {
            // A base-pages-only policy makes no superpage to promote again.
            let _ = self.reference_walked(pi, a.addr, si);
        }
        if self.coalescing {
            let groups = self.mmu.coalesced.as_ref().map(|c| &c.groups[..]).unwrap_or(&[]);
            if let Some(k) = self.os.coalescible_group(pi, a.addr, groups) {
                // The lookup pass filled base entries; the walk found a coalescible line, so
                // they become one coalesced entry, and the one-size path (which never probes
                // coalesced entries) is done for this run.
                let si = self.mmu.refill_coalesced(a.addr, self.cur_asid, a.kind.is_fetch(), k);
                self.base_only = false;
                return Ok(Some(si));
            }
        }
        Ok(Some(0))
    }

    /// The size index of the page that maps the access's address, after faulting it in if
    /// needed (`absent`: the caller already knows nothing maps it); None if the access killed
    /// its process. What the fault handler says it mapped is not taken on trust: the page
    /// table is read again, because the fault may have mapped more than the page (a file
    /// superpage it completed and promoted) or less (kswapd, woken by the frames the fault
    /// took, reclaimed the page at once). In the second case the access faults again, as the
    /// hardware re-executes it.
    fn resolve(&mut self, a: &Access, mut absent: bool) -> Result<Option<u32>> {
        // Faults in a row for one access before giving up: each must lose its page to
        // reclaim before the access completes, which only a memory far too small does.
        const MOST_FAULTS: u32 = 16;
        let pi = self.cur_pi;
        for _ in 0..MOST_FAULTS {
            if !absent {
                if let Some(si) = self.os.procs[pi].pt.size_at(a.addr) {
                    return Ok(Some(si));
                }
            }
            if self.fault(a)?.is_none() {
                return Ok(None);
            }
            // The fault may have mapped write-protected pages (a clean superpage under AMSQM).
            self.cur_cow = self.os.procs[pi].cow_pages > 0;
            absent = false;
        }
        Err(Error::Sim(format!(
            "the page at {:#x} (process {}) was reclaimed as soon as it was faulted in, {MOST_FAULTS} times in a row: memory is too small for this working set (see --memory)",
            a.addr, self.os.procs[pi].pid
        )))
    }

    /// Whether the walk that completes an access tells the replacement policy of a reference:
    /// always for policies that read accessed bits as Linux does (the walk after a fault sets
    /// the bit), and only when the access did not fault for those that count the fault itself
    /// as the access's request (ARC, AMSQM). `faults`: the fault count before the access.
    #[inline(always)]
    fn walk_is_a_reference(&self, faults: u64) -> bool {
        self.os.counters.faults == faults || !self.os.replacement.fault_is_the_reference()
    }

    /// `sees=every`: a reference the TLB served is a request to the replacement policy too, as
    /// in a trace-driven replacement study (a record's repeats are the same request).
    #[inline(never)]
    fn hit_is_a_reference(&mut self, va: u64) {
        let pi = self.cur_pi;
        if let Some(t) = self.os.procs[pi].pt.lookup(va) {
            let r = self.os.page_ref(pi, t.start, t.size_idx);
            self.os.replacement.on_reference(r);
        }
    }

    /// A miss at every TLB level: resolve the translation (faulting if needed), fill the TLBs
    /// and count the walk. Returns the page size index, or None if the process was killed.
    #[inline(never)]
    fn miss(&mut self, a: &Access) -> Result<Option<u32>> {
        let pi = self.cur_pi;
        let fetch = a.kind.is_fetch();
        let faults = self.os.counters.faults;
        let Some(mut si) = self.resolve(a, false)? else { return Ok(None) };
        if self.tlb_miss_hook {
            // The miss handler runs before the translation is loaded, so a promotion it makes
            // is what gets loaded.
            let now = if self.untimed_misses { Cycles::UNTIMED } else { Cycles(self.now()) };
            let mut sys = Sys { os: &mut self.os, mmu: &mut self.mmu, now };
            self.policy.on_tlb_miss(&mut sys, pi, a.addr, si, fetch);
            self.cur_cow = self.os.procs[pi].cow_pages > 0;
            si = self.os.procs[pi].pt.size_at(a.addr).expect("the miss handler left the faulting address mapped");
            self.mmu.live_sizes |= 1 << si;
        }
        match &self.mmu.coalesced {
            // AMD PTE coalescing: the walk read the base PTE's cache line; a coalescible group
            // around it is cached as one entry.
            Some(c) if si == 0 => {
                let line = self.mmu.machine.amd_coalescing().map_or(1, |a| a.line_ptes);
                debug_assert!(c.groups.iter().all(|&g| g <= line));
                match self.os.coalescible_group(pi, a.addr, &c.groups) {
                    Some(k) => {
                        si = c.first + k as u32;
                        self.mmu.fill_after_walk_coalesced(a.addr, self.cur_asid, fetch, k);
                    }
                    None => {
                        self.mmu.fill_after_walk(a.addr, self.cur_asid, fetch, 0);
                    }
                }
            }
            _ => {
                self.mmu.fill_after_walk(a.addr, self.cur_asid, fetch, si);
            }
        }
        if self.os.swap.enabled() && self.walk_is_a_reference(faults) && self.reference_walked(pi, a.addr, si) {
            // The reference promoted the page again (AMSQM after a write): load that, a second
            // walk, the one the next access would otherwise make.
            si = self.os.procs[pi].pt.size_at(a.addr).expect("a promotion left the address mapped");
            self.mmu.fill_after_walk(a.addr, self.cur_asid, fetch, si);
            self.mmu.live_sizes |= 1 << si;
            self.cur_cow = self.os.procs[pi].cow_pages > 0;
        }
        Ok(Some(si))
    }

    /// Tell the OS the walk that resolved `va` to a page of size index `si` referenced it
    /// (`Os::referenced`, without reading the page table again when `si` is a page size and
    /// not a coalesced entry's). True if the reference promoted the page again.
    #[inline(always)]
    fn reference_walked(&mut self, pi: usize, va: u64, si: u32) -> bool {
        match self.os.sizes.get(si as usize) {
            Some(size) => self.os.referenced_page(pi, va & !size.mask(), si, &mut self.mmu),
            None => self.os.referenced(pi, va, &mut self.mmu),
        }
    }

    /// Serve a page fault; returns the size index of the page now mapping the address, or None
    /// if the process was killed.
    #[inline(never)]
    fn fault(&mut self, a: &Access) -> Result<Option<u32>> {
        let pi = self.cur_pi;
        let va = a.addr;
        if va >= self.os.procs[pi].pt.va_limit() {
            // Beyond what the machine's page table can map: no VMA can hold it.
            self.os.segfault(pi, va);
            self.cur_live = false;
            return Ok(None);
        }
        if let Some((start, si)) = self.os.swapped_at(pi, va) {
            // A major fault: the page is in swap.
            let si = match self.os.swap_in_at(pi, va, start, si, &mut self.mmu) {
                Some(si) => si,
                None => return Err(self.os.oom(self.os.procs[pi].pid)),
            };
            self.os.counters.major_faults += 1;
            return Ok(Some(self.fault_served(si)));
        }
        // One copy of the VMA, straight from the process's map (profiles showed time on the
        // further moves of the struct).
        let vma = match self.os.procs[pi].find_vma(va) {
            Some(v) => *v,
            None => match self.vma_outside_map(pi, va) {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        if vma.file.is_some() {
            // A file mapping: the page cache serves it (base pages; file THP is not modelled).
            if !self.os.file_fault(pi, va, &vma, a.kind.writes(), &mut self.mmu) {
                return Err(self.os.oom(self.os.procs[pi].pid));
            }
            self.os.counters.faults += 1;
            self.os.counters.faults_by_size[0] += 1;
            self.cur_cow = self.os.procs[pi].cow_pages > 0;
            return Ok(Some(0));
        }
        if self.serves_faults {
            let now = Cycles(self.now());
            let mut sys = Sys { os: &mut self.os, mmu: &mut self.mmu, now };
            if let Some(si) = self.policy.serve_fault(&mut sys, pi, va, a.kind.writes(), &vma) {
                if self.os.pt_oom {
                    return Err(self.os.oom(self.os.procs[pi].pid));
                }
                return Ok(Some(self.fault_served(si)));
            }
        }
        let d = self.policy.on_fault(&FaultInfo {
            va,
            asid: self.cur_asid,
            write: a.kind.writes(),
            fetch: a.kind == AccessKind::Fetch,
            vma: &vma,
            sizes: &self.os.sizes,
        });
        let within = if d.within_vma { (vma.start, vma.end) } else { Os::ANYWHERE };
        let wanted = d.size_idx.min(self.os.sizes.len() as u32 - 1);
        let mut si = wanted;
        let mut compacted = false;
        let mut folios = d.folio_orders;
        loop {
            if si > 0 && si != wanted && d.fallback & (1 << si) == 0 {
                si -= 1;
                continue;
            }
            if si == 0 && folios != 0 {
                // mTHP folios, largest first, before the base page.
                let order = 31 - folios.leading_zeros();
                folios &= !(1 << order);
                let bytes = self.os.base.bytes() << order;
                match self.os.map_folio(pi, va & !(bytes - 1), order as u8, (vma.start, vma.end), &mut self.mmu) {
                    MapOutcome::Mapped => break,
                    _ => continue,
                }
            }
            let size = self.os.sizes[si as usize];
            let start = va & !size.mask();
            match self.os.map_page(pi, start, si, within, &mut self.mmu) {
                MapOutcome::Mapped => break,
                MapOutcome::NoContiguousExtent => {
                    self.policy.on_alloc_failure(si);
                    if si > 0 && d.direct_compact && !compacted {
                        // Direct reclaim and compaction, once per fault; if they produce a
                        // block, release it and retry the same size.
                        compacted = true;
                        let order = self.os.order_of(si);
                        if let Some(p) = self.os.alloc_compacting(order.0, &mut self.mmu) {
                            self.os.phys.free(p, order);
                            continue;
                        }
                    }
                    if si == 0 {
                        return Err(self.os.oom(self.os.procs[pi].pid));
                    }
                }
                MapOutcome::OverlapsMapping | MapOutcome::CrossesVma => {
                    if si == 0 {
                        return Err(Error::Sim(format!("internal: base page at {va:#x} cannot be mapped")));
                    }
                }
            }
            si -= 1;
        }
        if self.os.pt_oom {
            return Err(self.os.oom(self.os.procs[pi].pid));
        }
        self.policy.on_fault_done(wanted, si);
        Ok(Some(self.fault_served(si)))
    }

    /// A fault outside every VMA: the stack grows down to it, or (a trace without address-space
    /// events) a VMA is inferred around it; otherwise the process dies of a segfault (None).
    #[inline(never)]
    fn vma_outside_map(&mut self, pi: usize, va: u64) -> Option<Vma> {
        if !self.os.procs[pi].has_layout_events {
            return Some(self.os.infer_vma(pi, va));
        }
        let grown = self.os.grow_stack(pi, va);
        if grown.is_none() {
            self.os.segfault(pi, va);
            self.cur_live = false;
        }
        grown
    }

    /// Count a fault served with a page of size index `si`, which the TLBs may now hold.
    fn fault_served(&mut self, si: u32) -> u32 {
        self.os.counters.faults += 1;
        self.os.counters.faults_by_size[si as usize] += 1;
        self.mmu.live_sizes |= 1 << si;
        si
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        self.events += 1;
        match e {
            Event::Context { pid, .. } => self.switch_to(pid.wrapping_add(self.pid_base)),
            Event::Insns { count } => self.instructions += count,
            // A zero-length madvise marks the start of the measured phase (a program's access
            // phase after its set-up): results then carry `phase`, the cost of what follows
            // the last mark. The kernel accepts it and changes nothing, nor does the OS model.
            Event::Madvise { len: 0, .. } => self.phase_mark = Some(crate::stats::CostInputs::of(&self.snapshot())),
            _ => {
                if !self.os.procs[self.cur_pi].alive {
                    return Ok(());
                }
                // A call the kernel would refuse changes nothing (counted by reason).
                if self.os.reject(self.cur_pi, e).is_some() {
                    return Ok(());
                }
                if self.aligns_files {
                    self.placed_event(e)?;
                } else {
                    self.os_event(e)?;
                }
            }
        }
        if self.cfg.validate {
            self.validate().map_err(|m| Error::Sim(format!("invariant broken after {}: {m}", e.name())))?;
        }
        Ok(())
    }

    /// An address-space event under aligned placement: the OS translates the trace's addresses
    /// (and places a new file mapping), then each resulting event is applied.
    fn placed_event(&mut self, e: &Event) -> Result<()> {
        let align = match *e {
            Event::Mmap { len, .. } => self.policy.file_mapping_alignment(len),
            _ => None,
        };
        let mut out = Vec::new();
        self.os.place_event(self.cur_pi, e, align, &mut out)?;
        for ev in &out {
            self.os_event(ev)?;
        }
        self.cur_relocated = !self.os.procs[self.cur_pi].relocs.is_empty();
        Ok(())
    }

    /// Apply an address-space event (in simulated addresses) and tell the policy.
    fn os_event(&mut self, e: &Event) -> Result<()> {
        let old_brk = self.os.procs[self.cur_pi].brk;
        if self.touched.is_some() && matches!(e, Event::Exit { .. }) {
            // Measured at exit, before the address space goes, like the process's footprint.
            let b = self.bloat_of(self.cur_pi);
            for (x, y) in self.exited_bloat.iter_mut().zip(b) {
                *x += y;
            }
        }
        if self.cfg.map_every > 0 && matches!(e, Event::Exit { .. }) && self.maps.last().is_none_or(|m| m.accesses != self.accesses) {
            // The memory as the process leaves it: the frame a report ends on.
            self.map_frame();
        }
        self.os.apply(self.cur_pi, e, &mut self.mmu)?;
        if self.tells_unmaps || self.touched.is_some() {
            self.tell_unmap(e, old_brk);
        }
        self.cur_cow = self.os.procs[self.cur_pi].cow_pages > 0;
        if let Event::Exit { .. } = e {
            self.cur_live = false;
        }
        Ok(())
    }

    /// Tell a fault-serving policy, and the touched-page record, which pages an address-space
    /// event took away.
    fn tell_unmap(&mut self, e: &Event, old_brk: u64) {
        let pi = self.cur_pi;
        let page = self.os.base.bytes();
        let up = |x: u64| x.saturating_add(page - 1) & !(page - 1);
        let (start, end) = match *e {
            Event::Munmap { addr, len } => (addr & !(page - 1), up(addr.saturating_add(len))),
            Event::Madvise { addr, len, advice } if advice == crate::trace::MADV_DONTNEED => (addr & !(page - 1), up(addr.saturating_add(len))),
            Event::Mremap { old_addr, old_len, .. } => (old_addr & !(page - 1), up(old_addr.saturating_add(old_len))),
            Event::Exit { .. } => (0, u64::MAX),
            Event::Brk { .. } if self.os.procs[pi].brk < old_brk => (self.os.procs[pi].brk, old_brk),
            _ => return,
        };
        if self.tells_unmaps {
            self.policy.on_unmap(pi, start, end);
        }
        if let Some(t) = &mut self.touched {
            t.forget(pi, start, end);
        }
    }

    /// Bytes of process `pi`'s resident superpages, per size index, that no access touched.
    fn bloat_of(&self, pi: usize) -> [u64; crate::mmu::MAX_SIZES] {
        let mut b = [0u64; crate::mmu::MAX_SIZES];
        let Some(t) = &self.touched else { return b };
        let base = self.os.base.bytes();
        self.os.procs[pi].pt.for_each_page(&mut |p| {
            if p.size_idx > 0 {
                let len = self.os.sizes[p.size_idx as usize].bytes();
                b[p.size_idx as usize] += len - t.touched_in(pi, p.start, len) * base;
            }
        });
        b
    }

    /// Let the policy's daemons run at the current simulated time.
    pub fn tick(&mut self) {
        let now = Cycles(self.now());
        let mut sys = Sys { os: &mut self.os, mmu: &mut self.mmu, now };
        self.policy.tick(&mut sys);
        // A daemon's promotion may have mapped a write-protected (clean) superpage.
        self.cur_cow = self.os.procs.get(self.cur_pi).is_some_and(|p| p.cow_pages > 0);
        if self.cfg.validate {
            if let Err(m) = self.validate() {
                panic!("invariant broken after a policy tick: {m}");
            }
        }
    }

    pub fn sample(&mut self) {
        let s = Sample::take(&self.snapshot());
        self.series.push(s);
        // Memory stays bounded whatever --sample-every asks: past MAX_SAMPLES, every other
        // sample goes and the interval doubles (the series still spans the whole run).
        if self.series.len() > MAX_SAMPLES && self.cfg.sample_every > 0 {
            let mut i = 0;
            self.series.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.cfg.sample_every = self.cfg.sample_every.saturating_mul(2);
            self.next_series = self.accesses.saturating_add(self.cfg.sample_every);
            self.next_sample = self.next_series.min(self.next_map);
            self.series_decimations += 1;
        }
    }

    /// The policy back, with what it learned (a planning pass's driver takes it so).
    pub fn into_policy(self) -> Box<dyn Policy> {
        self.policy
    }

    /// Final results. Takes a last sample first.
    pub fn results(&mut self) -> Results {
        if self.series.last().is_none_or(|s| s.accesses != self.accesses) {
            self.sample();
        }
        // A last frame, unless one was taken at this point (at a periodic mark, or at the exit
        // of the last process: the state worth showing, where this one would show memory freed).
        if self.cfg.map_every > 0 && self.maps.last().is_none_or(|m| m.accesses != self.accesses) {
            self.map_frame();
        }
        let mut r = Results::collect(&self.snapshot());
        if self.cfg.map_every > 0 {
            r.map = Some(crate::stats::PhysMap {
                region_bytes: 1u64 << self.map_region_shift(),
                legend: self.os.map_legend(),
                frames: std::mem::take(&mut self.maps),
            });
        }
        if let Some(mark) = &self.phase_mark {
            let m = &self.mmu.machine;
            let d = crate::stats::CostInputs::of(&self.snapshot()).since(mark);
            // A shared last level's at the share the phase keeps, solved once for the cycles and
            // the cache counters.
            let (kept, share) = d.shared(m);
            let mut phase = crate::stats::cycle_map(m, &crate::stats::cost_parts_of(m, &kept));
            phase.insert("accesses".into(), d.accesses);
            phase.insert("instructions".into(), d.instructions);
            phase.insert("walks".into(), d.walks);
            phase.insert("faults".into(), d.faults);
            phase.insert("walk.refs".into(), d.walk_refs);
            // What each cache level served in the phase, under the whole run's key names
            // (`cache.L2.walk.hits`, `cache.dram.walk`): a prediction's stalls come from these.
            if let Some(c) = &self.mmu.caches {
                let keys: Vec<String> = c.spec.levels.iter().map(|l| format!("cache.{}.", l.name)).collect();
                crate::stats::insert_model_counters(&mut phase, m, &d, &kept, share);
                for (who, served) in [("data", &kept.cache_data), ("walk", &kept.cache_walk)] {
                    for (i, n) in served.iter().enumerate() {
                        let key = keys.get(i).map_or(format!("cache.dram.{who}"), |k| format!("{k}{who}.hits"));
                        phase.insert(key, *n);
                    }
                }
            }
            r.phase = phase;
        }
        if self.touched.is_some() {
            let mut b = self.exited_bloat;
            for pi in (0..self.os.procs.len()).filter(|&pi| self.os.procs[pi].alive) {
                for (x, y) in b.iter_mut().zip(self.bloat_of(pi)) {
                    *x += y;
                }
            }
            for (si, size) in self.os.sizes.iter().enumerate().skip(1) {
                r.counters.insert(format!("bloat.{}", size.name()), b[si]);
            }
            r.counters.insert("bloat.total".into(), b.iter().sum());
        }
        r
    }

    /// The engine's parts and totals, borrowed for results and samples.
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            mmu: &self.mmu,
            os: &self.os,
            policy: &*self.policy,
            series: &self.series,
            accesses: self.accesses,
            by_kind: self.by_kind,
            records: self.records,
            instructions: self.instructions,
            events: self.events,
            series_decimations: self.series_decimations,
            sample_every: self.cfg.sample_every,
            idle_cycles: self.idle_cycles,
        }
    }
}
