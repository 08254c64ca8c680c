//! Randomised property tests of the OS model: random sequences of mmap, munmap, mprotect,
//! madvise, brk, fork (copy-on-write), exit, context switches, accesses (in and out of VMAs), file reads that
//! force reclaim, and compaction, under several policies. The engine runs its validator after
//! every event, chunk and daemon tick (EngineConfig::validate), so any broken invariant fails
//! the test with the event that broke it.

use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::trace::gen::Rng;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const MB: u64 = 1 << 20;

struct World {
    rng: Rng,
    /// Live pids and, per pid, its mapped regions (start, len).
    procs: Vec<(u32, Vec<(u64, u64)>)>,
    next_pid: u32,
    /// Pids of processes that exited: a fork may reuse one, as Linux reuses pids.
    dead: Vec<u32>,
    fds: u32,
    /// Touch whole regions (every page), to build memory pressure.
    dense: bool,
    /// The current process's VMAs as the engine has them.
    live: Vec<(u64, u64)>,
}

impl World {
    fn region(&mut self) -> (u64, u64) {
        // Regions at 2MB-aligned slots, some misaligned by a few pages, 4KB to 6MB long.
        let slot = 0x10_0000_0000 + self.rng.below(64) * 8 * MB;
        let skew = if self.rng.below(3) == 0 { self.rng.below(16) * 4096 } else { 0 };
        let len = match self.rng.below(4) {
            0 => (1 + self.rng.below(8)) * 4096,
            1 => 2 * MB,
            _ => (1 + self.rng.below(1536)) * 4096,
        };
        (slot + skew, len)
    }

    /// One random step for the current process, as records of a chunk.
    fn step(&mut self, cur: usize, c: &mut Chunk) -> usize {
        let ev = |c: &mut Chunk, e: Event| {
            let at = c.accesses.len() as u32;
            c.events.push((at, e));
        };
        let (pid, _) = self.procs[cur];
        match self.rng.below(100) {
            0..=11 => {
                let (addr, len) = self.region();
                ev(c, Event::Mmap { addr, len, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, fd: -1, offset: 0 });
                self.procs[cur].1.push((addr, len));
            }
            12..=15 => {
                if let Some(&(a, l)) = self.pick(cur) {
                    let off = self.rng.below(l / 4096) * 4096;
                    let len = (1 + self.rng.below(600)) * 4096;
                    ev(c, Event::Munmap { addr: a + off, len });
                }
            }
            16..=17 => {
                if let Some(&(a, l)) = self.pick(cur) {
                    ev(c, Event::Mprotect { addr: a, len: l / 2 + 4096, prot: 1 });
                }
            }
            18..=20 => {
                if let Some(&(a, l)) = self.pick(cur) {
                    let advice = [MADV_HUGEPAGE, MADV_DONTNEED, MADV_NOHUGEPAGE][self.rng.below(3) as usize];
                    ev(c, Event::Madvise { addr: a, len: l, advice });
                }
            }
            21 => {
                let top = 0x5000_0000 + self.rng.below(8) * MB;
                ev(c, Event::Brk { addr: 0x5000_0000 });
                ev(c, Event::Brk { addr: top });
                self.procs[cur].1.push((0x5000_0000, top - 0x5000_0000));
            }
            22..=23 if self.procs.len() < 6 => {
                let child = match self.dead.pop() {
                    Some(p) if self.rng.below(2) == 0 => p,
                    other => {
                        self.dead.extend(other);
                        self.next_pid += 1;
                        self.next_pid - 1
                    }
                };
                ev(c, Event::Fork { child });
                let regions = self.procs[cur].1.clone();
                self.procs.push((child, regions));
            }
            24 if self.procs.len() > 1 => {
                ev(c, Event::Exit { code: 0 });
                self.dead.push(pid);
                self.procs.remove(cur);
                let next = self.rng.below(self.procs.len() as u64) as usize;
                ev(c, Event::Context { pid: self.procs[next].0, tid: self.procs[next].0 });
                return next;
            }
            35..=38 => {
                // Map a file (private or shared) over a region and touch it.
                let (addr, len) = self.region();
                let fd = self.fds as i32;
                self.fds += 1;
                ev(c, Event::FileOpen { fd, path: format!("/data/f{}", self.rng.below(6)), size: 64 * MB });
                let flags = if self.rng.below(2) == 0 { MAP_PRIVATE } else { MAP_SHARED };
                ev(c, Event::Mmap { addr, len, prot: 3, flags: flags | MAP_FIXED, fd, offset: self.rng.below(8) * MB });
                self.procs[cur].1.push((addr, len));
                for _ in 0..1 + self.rng.below(40) {
                    let kind = if self.rng.below(3) == 0 { AccessKind::Store } else { AccessKind::Load };
                    c.accesses.push(Access::new(addr + self.rng.below(len), kind, 8));
                }
            }
            25..=28 => {
                // Read a file: the page cache grows until reclaim has to make room.
                let fd = self.fds as i32;
                self.fds += 1;
                ev(c, Event::FileOpen { fd, path: format!("/data/f{}", self.rng.below(6)), size: 64 * MB });
                ev(c, Event::FileRead { fd, offset: self.rng.below(16) * MB, len: (1 + self.rng.below(48)) * MB });
                ev(c, Event::FileClose { fd });
            }
            29..=33 => {
                let next = self.rng.below(self.procs.len() as u64) as usize;
                ev(c, Event::Context { pid: self.procs[next].0, tid: self.procs[next].0 });
                return next;
            }
            34 => {
                // A stray access outside every region (a segfault for this process, unless a
                // region happens to be there).
                c.accesses.push(Access::new(0x7_0000_0000 + self.rng.below(1 << 20) * 4096, AccessKind::Load, 8));
            }
            _ if self.dense => {
                if let Some(&(a, l)) = self.pick(cur) {
                    let mut va = a;
                    while va < a + l {
                        c.accesses.push(Access::new(va, AccessKind::Store, 8));
                        va += 4096;
                    }
                }
            }
            _ => {
                if let Some(&(a, l)) = self.pick(cur) {
                    for _ in 0..1 + self.rng.below(200) {
                        let va = a + self.rng.below(l);
                        let kind = if self.rng.below(2) == 0 { AccessKind::Load } else { AccessKind::Store };
                        c.accesses.push(Access::new(va, kind, 8));
                    }
                }
            }
        }
        let _ = pid;
        cur
    }

    /// A region of the current process: one of its live VMAs (as the engine has them) most of
    /// the time, sometimes one the test remembers (which may have been unmapped since: a
    /// segfault).
    fn pick(&mut self, cur: usize) -> Option<&(u64, u64)> {
        let use_live = self.rng.below(50) != 0 && !self.live.is_empty();
        let list = if use_live { &self.live } else { &self.procs[cur].1 };
        let n = list.len() as u64;
        if n == 0 {
            return None;
        }
        let i = self.rng.below(n) as usize;
        let list = if use_live { &self.live } else { &self.procs[cur].1 };
        list.get(i)
    }
}

fn run(seed: u64, machine: &str, pol: &str, steps: usize) -> Engine {
    run_with(seed, machine, pol, steps, 4 << 30, "clock")
}

fn run_with(seed: u64, machine: &str, pol: &str, steps: usize, swap: u64, replacement: &str) -> Engine {
    run_full(seed, machine, pol, steps, swap, replacement, false)
}

fn run_full(seed: u64, machine: &str, pol: &str, steps: usize, swap: u64, replacement: &str, dense: bool) -> Engine {
    let m = Machine::load(machine).unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    let memory = if dense { 64 * MB } else { 256 * MB };
    let cfg = EngineConfig {
        memory: Bytes(memory),
        validate: true,
        sample_every: 1000,
        fast_paths: true,
        swap: Bytes(swap),
        replacement: replacement.into(),
        bloat: seed.is_multiple_of(2),
        // The physical-memory map on a third of the seeds: its frames must not disturb a run.
        map_every: if seed.is_multiple_of(3) { 500 } else { 0 },
        map_region_shift: if seed.is_multiple_of(3) { Some(21) } else { None },
    };
    let mut e = Engine::new(m, p, cfg).unwrap();
    let mut w = World { rng: Rng::new(seed), procs: vec![(1, Vec::new())], next_pid: 2, dead: Vec::new(), fds: 3, dense, live: Vec::new() };
    let mut cur = 0;
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    for i in 0..steps {
        let pi = e.os.procs.iter().position(|p| p.pid == w.procs[cur].0);
        w.live = pi.map(|pi| e.os.procs[pi].vmas.values().map(|v| (v.start, v.end - v.start)).collect()).unwrap_or_default();
        cur = w.step(cur, &mut c);
        if c.accesses.len() + c.events.len() > 0 {
            if let Err(err) = e.run_chunk(&c) {
                panic!(
                    "seed {seed} {machine} {pol} step {i}: {err} (frames {:?}, swap {}/{} pages, replacement tracks {})",
                    e.os.phys.frames_by_kind(),
                    e.os.swap.used,
                    e.os.swap.total,
                    e.os.replacement.len()
                );
            }
            c.clear();
            let p = w.procs[cur].0;
            c.events.push((0, Event::Context { pid: p, tid: p }));
            if i % 7 == 0 {
                // Compaction for a 2MB block (or the machine's largest), whatever the policy, then
                // check everything.
                let size = e.os.sizes.iter().find(|s| s.bytes() >= 2 * MB).or(e.os.sizes.last()).unwrap();
                let order = (size.shift() - e.os.base.shift()) as u8;
                e.os.compact(order, &mut e.mmu);
                e.os.validate().unwrap_or_else(|m| panic!("seed {seed} {pol}: after compaction: {m}"));
                if i % 21 == 0 && order < e.os.phys.max_order() {
                    // A block twice that size: huge pages become sources, and one with no free
                    // block of its size left is split and moved as base pages.
                    e.os.compact(order + 1, &mut e.mmu);
                    e.os.validate().unwrap_or_else(|m| panic!("seed {seed} {pol}: after compaction for order {}: {m}", order + 1));
                }
            }
        }
    }
    e
}

#[test]
fn invariants_hold_under_random_operations() {
    let mut reclaimed = 0;
    let mut migrated = 0;
    let mut collapsed = 0;
    let mut cow = 0;
    let mut file_faults = 0;
    for seed in 0..6 {
        for pol in [
            "base",
            "fixed:2MiB:fit=vma",
            "linux-thp:defrag=always,scan_sleep_millisecs=0,alloc_sleep_millisecs=0,pages_to_scan=65536,hugepages-64kB=always,hugepages-16kB=madvise",
        ] {
            let pol = pol.replace("fixed:2MiB:fit=vma", "fixed:size=2MiB,fit=vma");
            let e = run(seed, "skylake", &pol, 700);
            reclaimed += e.os.files.cache.counters.evicted;
            migrated += e.os.compaction.pages_migrated;
            collapsed += e.os.compaction.collapse[0];
            cow += e.os.counters.cow_copies.min(1) + e.os.counters.cow_reuses.min(1);
            file_faults += e.os.counters.file_minor_faults + e.os.counters.file_private_copies + e.os.counters.file_pages_dirtied;
        }
    }
    // The sequences must actually exercise the mechanisms they claim to test.
    assert!(reclaimed > 0, "no page-cache reclaim happened");
    assert!(migrated > 0, "compaction never migrated a page");
    assert!(collapsed > 0, "khugepaged never collapsed a range");
    assert!(cow >= 4, "copy-on-write copies and reuses were barely exercised ({cow})");
    assert!(file_faults > 0, "file mappings were never exercised");
}

#[test]
fn invariants_hold_under_swapping() {
    let mut out = 0;
    let mut back = 0;
    for seed in 20..24 {
        for (pol, rep) in [
            ("base", "clock"),
            ("linux-thp:defrag=always,scan_sleep_millisecs=0", "lru"),
            ("fixed:size=2MiB,fit=vma", "clock"),
            ("base", "arc"),
            ("fixed:size=2MiB,fit=vma", "arc"),
        ] {
            let e = run_full(seed, "skylake", pol, 600, 1 << 30, rep, true);
            out += e.os.swap.counters.out_pages;
            back += e.os.swap.counters.in_pages;
        }
    }
    assert!(out > 0 && back > 0, "memory pressure must swap pages out ({out}) and fault them back ({back})");
}

#[test]
fn invariants_hold_under_amsqm() {
    // AMSQM drives navarro's promotions (threshold, prefetch) and demotes on writes; its
    // lists are checked after every event (every resident unit in exactly one list,
    // Σ c_i·size_i within C).
    let (mut out, mut superpages_out, mut write_demotions) = (0, 0, 0);
    for seed in 30..33 {
        for (machine, rep) in [
            ("amsqm09", "amsqm"),
            ("skylake", "amsqm:threshold=0,grow=always"),
            ("amsqm09", "amsqm:write_demote=false,alpha=1"),
            ("amsqm09+base=4KiB", "amsqm:grow=always"),
        ] {
            let mut e = run_full(seed, machine, "navarro", 500, 1 << 30, rep, true);
            let r = e.results();
            out += e.os.swap.counters.out_pages;
            superpages_out += r.counters["replacement.amsqm.evict_superpages"];
            write_demotions += r.counters.iter().filter(|(k, _)| k.starts_with("demote.dirty.")).map(|(_, v)| v).sum::<u64>();
        }
    }
    assert!(out > 0 && superpages_out > 0, "memory pressure must evict units, superpages among them ({out}, {superpages_out})");
    assert!(write_demotions > 0, "writes must demote superpages");
}

#[test]
fn invariants_hold_on_other_page_size_sets() {
    for seed in 10..12 {
        run(seed, "neoverse-n1", "fixed:size=64KiB,fit=vma", 500);
        run(seed, "alpha21264", "fixed:size=512KiB,fit=vma", 500);
    }
}

#[test]
fn conservation_at_every_sample() {
    let e = run(3, "skylake", "linux-thp:defrag=always", 800);
    assert!(e.series.len() > 3);
    for s in &e.series {
        let total: u64 = s.frames.values().sum();
        assert_eq!(total, e.os.phys.total_frames(), "free plus used frames must equal the total at every sample: {:?}", s.frames);
    }
}

#[test]
fn invariants_hold_with_reservations() {
    // navarro: reservations, preemption, incremental promotion among random mmaps, unmaps,
    // forks, exits, file traffic, swapping and compaction.
    // On zen3 the walker coalesces PTEs too: the validator checks every coalesced entry
    // against the page table after each chunk.
    let mut reserved = 0;
    let mut coalesced = 0;
    for seed in 30..34 {
        for machine in ["skylake", "alpha21264", "neoverse-n1", "zen3"] {
            let e = run(seed, machine, "navarro:retry_smaller=true", 500);
            reserved += e.os.phys.reservs.counters.created.iter().sum::<u64>();
            coalesced += e.mmu.coalesced.as_ref().map_or(0, |c| c.fills.iter().sum::<u64>());
        }
        let e = run_full(seed, "alpha21264", "navarro", 500, 1 << 30, "clock", true);
        reserved += e.os.phys.reservs.counters.created.iter().sum::<u64>();
    }
    assert!(reserved > 0, "no reservation was made");
    assert!(coalesced > 0, "no walk coalesced on zen3");
}
