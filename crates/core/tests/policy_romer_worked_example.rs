//! Romer et al.'s worked example (§4.2, Figure 2), exactly: a 3-entry fully associative LRU
//! TLB; references to pages 8, 1, 7, 6, 5, 0 leave {0, 5, 6} in the TLB, and the next
//! reference to page 1 misses. It charges prefetch({0,1}) (page 0 is resident) and
//! capacity({4,5,6,7}) (coalescing 5, 6, 7 puts page 1 at depth 3: d = 5, c = 3, N = 3).
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy::{self, romer::Romer};
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const BASE: u64 = 0x4000_0000; // 8MB-aligned
const PAGE: u64 = 4096;

/// romer95 with one 3-entry data TLB.
fn machine() -> Machine {
    let src = include_str!("../src/machines/romer95.toml");
    let dtlb_end = src.find("[[tlb]]\nname = \"ITLB\"").unwrap();
    let walker = src.find("[walker]").unwrap();
    let src = format!("{}{}", &src[..dtlb_end], &src[walker..]).replace("entries = 32\nways = 32", "entries = 3\nways = 3");
    Machine::from_toml(&src, "romer95-3").unwrap()
}

fn engine(pol: &str) -> Engine {
    let m = machine();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(256 << 20), validate: true, ..Default::default() }).unwrap()
}

/// Reference the pages (the first call maps the region).
fn touch(e: &mut Engine, pages: &[u64]) {
    let mut c = Chunk::default();
    if e.accesses == 0 {
        c.events.push((0, Event::Context { pid: 1, tid: 1 }));
        c.events.push((0, Event::Mmap { addr: BASE, len: 8 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
    }
    for &p in pages {
        c.accesses.push(Access::new(BASE + p * PAGE, AccessKind::Load, 8));
    }
    e.run_chunk(&c).unwrap();
}

/// The policy, after it has seen the evictions the last fill caused.
fn romer(e: &mut Engine) -> &mut Romer {
    let r = (&mut *e.policy as &mut dyn std::any::Any).downcast_mut::<Romer>().unwrap();
    r.sync_evictions(&mut e.mmu);
    r
}

#[test]
fn the_papers_example_charges_prefetch_01_and_capacity_4567() {
    let mut e = engine("romer:online");
    touch(&mut e, &[8, 1, 7, 6, 5, 0]);
    let pi = e.os.proc_index(1);
    let asid = e.os.procs[pi].asid;
    // TLB = {0, 5, 6}: tlbcount of each is 1; 7, 1 and 8 were evicted.
    for p in [0, 5, 6] {
        assert_eq!(romer(&mut e).tlbcount(asid, BASE + p * PAGE, PAGE, 0), Some(1), "page {p} resident");
    }
    for p in [1, 7, 8] {
        assert_eq!(romer(&mut e).tlbcount(asid, BASE + p * PAGE, PAGE, 0), Some(0), "page {p} evicted");
    }
    // {4,5,6,7} holds two resident pages; {0..7} has two positive halves.
    assert_eq!(romer(&mut e).tlbcount(asid, BASE + 4 * PAGE, 4 * PAGE, 0), Some(2));
    assert_eq!(romer(&mut e).tlbcount(asid, BASE, 8 * PAGE, 0), Some(2));
    let before01 = romer(&mut e).charges(asid, BASE, 2 * PAGE).unwrap();
    let before4567 = romer(&mut e).charges(asid, BASE + 4 * PAGE, 4 * PAGE).unwrap();
    let before67 = romer(&mut e).charges(asid, BASE + 6 * PAGE, 2 * PAGE).unwrap();
    let before_all = romer(&mut e).charges(asid, BASE, 8 * PAGE).unwrap();
    let before_hi = romer(&mut e).charges(asid, BASE + 8 * PAGE, 8 * PAGE).unwrap();
    touch(&mut e, &[1]);
    let r = romer(&mut e);
    let after01 = r.charges(asid, BASE, 2 * PAGE).unwrap();
    let after4567 = r.charges(asid, BASE + 4 * PAGE, 4 * PAGE).unwrap();
    let after67 = r.charges(asid, BASE + 6 * PAGE, 2 * PAGE).unwrap();
    assert_eq!(after01.0 - before01.0, 1, "prefetch({{0,1}}) charged: page 0 is resident");
    assert_eq!(after01.1 - before01.1, 0, "capacity({{0,1}}) not charged: d - c + 1 = 5 > 3");
    assert_eq!(after4567.1 - before4567.1, 1, "capacity({{4,5,6,7}}) charged: d - c + 1 = 3 <= 3");
    assert_eq!(after4567.0 - before4567.0, 0, "prefetch({{4,5,6,7}}) not charged: it does not contain page 1");
    assert_eq!(after67.1 - before67.1, 0, "capacity({{6,7}}) not charged: d - c + 1 = 4 > 3");
    // {0..7} contains page 1 and the resident 0, 5, 6: prefetch charged; it covers all four
    // entries above page 1, so capacity too.
    let all = r.charges(asid, BASE, 8 * PAGE).unwrap();
    assert_eq!((all.0 - before_all.0, all.1 - before_all.1), (1, 1));
    // {8..15}: page 8 lies below page 1 in the stack and nothing of it is resident.
    assert_eq!(r.charges(asid, BASE + 8 * PAGE, 8 * PAGE).unwrap(), before_hi);
}

#[test]
fn approx_online_keeps_no_capacity_charges() {
    let mut e = engine("romer:approx-online");
    touch(&mut e, &[8, 1, 7, 6, 5, 0, 1]);
    let pi = e.os.proc_index(1);
    let asid = e.os.procs[pi].asid;
    let r = romer(&mut e);
    // {0,1}: the last miss (page 0 resident). {4,5,6,7}: the misses on 6 (7 resident) and 5
    // (6 and 7 resident). No capacity charges at all.
    assert_eq!(r.charges(asid, BASE, 2 * PAGE).unwrap(), (1, 0));
    assert_eq!(r.charges(asid, BASE + 4 * PAGE, 4 * PAGE).unwrap(), (2, 0));
    let c = e.results().counters;
    assert_eq!(c["policy.romer.capacity_charges"], 0);
    assert_eq!(c["policy.romer.misses"], 7);
}
