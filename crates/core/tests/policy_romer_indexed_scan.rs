//! ONLINE's capacity scan counted from order statistics (`capacity_scan=indexed`) charges
//! exactly what visiting the eviction stack entry by entry charges (`capacity_scan=linear`):
//! the same counters, promotions and cycles, on machines whose largest page is small
//! (romer95, 8MB) and large (skylake, 1GB), with several segments, munmaps and re-mappings.
//! The bookkeeping's invariants are checked after every chunk.
mod common;
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy::{self, romer::Romer};
use superpager_core::trace::*;
use superpager_core::units::Bytes;

/// A small xorshift generator: the test's accesses are the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        common::xorshift(&mut self.0)
    }
}

/// Chunks of accesses over three mappings in different segments: a hot one read with a skewed
/// distribution, a colder one, and one unmapped and mapped again half way.
fn chunks(seed: u64, per_chunk: usize, n: usize) -> Vec<Chunk> {
    const A: u64 = 0x10_0000_0000;
    const B: u64 = 0x20_0000_0000;
    const C: u64 = 0x30_0000_0000;
    let mut r = Rng(seed);
    let mut out = Vec::new();
    for i in 0..n {
        let mut c = Chunk::default();
        if i == 0 {
            c.events.push((0, Event::Context { pid: 1, tid: 1 }));
        }
        if i == 0 || i == n / 2 {
            if i > 0 {
                c.events.push((0, Event::Munmap { addr: C, len: 8 << 20 }));
            }
            for (at, len) in [(A, 48u64 << 20), (B, 16 << 20), (C, 8 << 20)] {
                if i == 0 || at == C {
                    c.events.push((0, Event::Mmap { addr: at, len, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
                }
            }
        }
        for _ in 0..per_chunk {
            let x = r.next();
            let va = match x % 8 {
                0..=4 => (A + (((x >> 8) % (48 << 20)) >> (x % 3 * 3))) & !7, // skewed toward low pages
                5 | 6 => (B + (x >> 8) % (16 << 20)) & !7,
                _ => (C + (x >> 8) % (8 << 20)) & !7,
            };
            c.accesses.push(Access::new(va, if x & 0x100 != 0 { AccessKind::Store } else { AccessKind::Load }, 8));
        }
        out.push(c);
    }
    out
}

/// romer95 with 8-entry TLBs (a small budget puts charges near their thresholds), and phases
/// that stay in one window of one segment, with a few references elsewhere between them.
fn small_machine() -> Machine {
    let src = include_str!("../src/machines/romer95.toml").replace("entries = 32\nways = 32", "entries = 8\nways = 8");
    Machine::from_toml(&src, "romer95-8").unwrap()
}

fn phased_chunks(seed: u64) -> Vec<Chunk> {
    const SEGS: [u64; 3] = [0x4000_0000, 0x8000_0000, 0xc000_0000]; // 8MB-aligned
    let mut r = Rng(seed);
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    for at in SEGS {
        c.events.push((0, Event::Mmap { addr: at, len: 8 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
    }
    let mut out = Vec::new();
    for phase in 0..120 {
        let seg = SEGS[(r.next() % 3) as usize];
        let window = 1u64 << (14 + r.next() % 10); // 16KB to 8MB
        let start = seg + (r.next() % ((8 << 20) / window)) * window;
        for _ in 0..(200 + r.next() % 2000) {
            c.accesses.push(Access::new(start + ((r.next() % window) & !7), AccessKind::Load, 8));
        }
        for _ in 0..r.next() % 12 {
            let other = SEGS[(r.next() % 3) as usize];
            c.accesses.push(Access::new(other + ((r.next() % (8 << 20)) & !7), AccessKind::Load, 8));
        }
        if phase % 10 == 9 {
            out.push(std::mem::take(&mut c));
        }
    }
    out
}

/// The run's counters but the scan's own, and how many entries the statistics counted.
fn run(machine: &Machine, pol: &str, chunks: &[Chunk]) -> (std::collections::BTreeMap<String, u64>, u64) {
    let p = policy::build(pol, &machine.page_sizes).unwrap();
    let mut e = Engine::new(machine.clone(), p, EngineConfig { memory: Bytes(1 << 30), ..Default::default() }).unwrap();
    for c in chunks {
        e.run_chunk(c).unwrap();
        let r = (&mut *e.policy as &mut dyn std::any::Any).downcast_mut::<Romer>().unwrap();
        r.sync_evictions(&mut e.mmu);
        r.check_capacity_bookkeeping();
    }
    let mut counters = e.results().counters;
    counters.remove("policy.romer.capacity_scan_steps");
    let counted = counters.remove("policy.romer.capacity_scan_counted").unwrap_or(0);
    (counters, counted)
}

fn same_charges(machine: &str, seed: u64) {
    let (m, cs) = match machine {
        "romer95-8" => (small_machine(), phased_chunks(seed)),
        _ => (Machine::load(machine).unwrap(), chunks(seed, 20_000, 8)),
    };
    let (linear, _) = run(&m, "romer:online,capacity_scan=linear", &cs);
    let (indexed, counted) = run(&m, "romer:online,capacity_scan=indexed", &cs);
    assert!(counted > 0, "{machine}: the statistics were never used");
    assert!(indexed["policy.romer.capacity_charges"] > 0, "{machine}: no capacity charge to compare");
    let differ: Vec<_> = linear.iter().filter(|(k, v)| indexed.get(*k) != Some(v)).map(|(k, v)| (k.clone(), *v, indexed.get(k).copied())).collect();
    assert!(differ.is_empty(), "{machine}, seed {seed}: {differ:?}");
}

#[test]
fn indexed_scan_charges_as_the_linear_one_on_romer95() {
    same_charges("romer95", 7);
}

#[test]
fn indexed_scan_charges_as_the_linear_one_with_8_tlb_entries() {
    for seed in [1, 2, 3] {
        same_charges("romer95-8", seed);
    }
}

#[test]
fn indexed_scan_charges_as_the_linear_one_on_skylake() {
    same_charges("skylake", 11);
}

#[test]
fn indexed_scan_charges_as_the_linear_one_on_neoverse() {
    same_charges("neoverse-n1", 3);
}

#[test]
fn a_bad_capacity_scan_value_names_the_key() {
    let m = Machine::load("skylake").unwrap();
    let e = policy::build("romer:online,capacity_scan=fast", &m.page_sizes).err().expect("refused");
    assert!(e.to_string().contains("capacity_scan=fast"), "{e}");
}
