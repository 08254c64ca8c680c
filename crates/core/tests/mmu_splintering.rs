//! Page splintering: a guest whose host maps its memory with smaller pages (`+nested=4KiB`)
//! gets TLB entries of the host's page size, since one entry caches the whole gVA-to-hPA
//! translation (Pham et al., MICRO 2015). The walk still goes to the guest's page, and a
//! shootdown of the guest page drops every piece of it.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::mmu::Mmu;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const BASE: u64 = 0x4000_0000;
const PAGE: u64 = 4096;

fn engine(machine: &str, pol: &str, memory: u64) -> Engine {
    let m = Machine::load(machine).unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(memory), validate: true, ..Default::default() }).unwrap()
}

fn run(e: &mut Engine, accesses: &[u64], events: &[Event]) {
    let mut c = Chunk::default();
    for x in events {
        c.events.push((0, x.clone()));
    }
    for &va in accesses {
        c.accesses.push(Access::new(va, AccessKind::Store, 8));
    }
    e.run_chunk(&c).unwrap();
}

fn get(e: &mut Engine, k: &str) -> u64 {
    e.results().counters.get(k).copied().unwrap_or(0)
}

fn mapped(len: u64) -> Vec<Event> {
    vec![Event::Context { pid: 1, tid: 1 }, Event::Mmap { addr: BASE, len, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }]
}

/// 64 different 4KB pages of the first 2MB, twice over.
fn pieces() -> Vec<u64> {
    (0..2).flat_map(|_| (0..64).map(|i| BASE + i * 7 * PAGE)).collect()
}

#[test]
fn a_guest_2mb_page_over_4kb_host_pages_walks_once_per_4kb_piece() {
    // Host backs each guest page with a page of its size: one walk loads the 2MB entry.
    let mut whole = engine("skylake+nested", "fixed:2MiB", 256 << 20);
    run(&mut whole, &pieces(), &mapped(4 << 20));
    assert_eq!(get(&mut whole, "walks"), 1);
    // Host pages of 4KB: each 4KB piece is its own entry, loaded by its own (2MB) walk, and
    // the second pass hits the 64 entries (skylake's L1 DTLB holds 64 4KB entries).
    let mut split = engine("skylake+nested=4KiB", "fixed:2MiB", 256 << 20);
    run(&mut split, &pieces(), &mapped(4 << 20));
    assert_eq!(get(&mut split, "walks"), 64);
    assert_eq!(split.os.procs[0].pt.lookup(BASE).map(|t| t.size_idx), Some(1), "the guest still maps a 2MB page");
    split.validate().unwrap();
}

#[test]
fn a_splintered_walk_goes_to_the_guest_page_and_loads_a_host_sized_entry() {
    let mut mmu = Mmu::new(Machine::load("skylake+nested=4KiB").unwrap());
    assert_eq!(mmu.tlb_size(1), 0, "2MB guest pages are held at 4KB");
    assert_eq!(mmu.tlb_size(0), 0);
    // A cold 2MB guest walk reads 3 guest entries (levels 4-2), each and the final address
    // translated by 4 host references: 4 x 5 - 1.
    assert_eq!(mmu.fill_after_walk(BASE, 1, false, 1), 19);
    mmu.live_sizes |= 0b11;
    assert_eq!(mmu.lookup(BASE + 8, 1, false).map(|h| h.1), Some(0), "the same 4KB piece hits, as a 4KB entry");
    assert_eq!(mmu.lookup(BASE + PAGE, 1, false), None, "another piece of the same 2MB page misses");
    // Native, and a host that matches the guest's pages, keep whole entries.
    assert_eq!(Mmu::new(Machine::load("skylake").unwrap()).tlb_size(1), 1);
    assert_eq!(Mmu::new(Machine::load("skylake+nested").unwrap()).tlb_size(1), 1);
    // A 2MB host under 1GB guest pages splinters those to 2MB and leaves 2MB pages whole.
    let m = Mmu::new(Machine::load("skylake+nested=2MiB").unwrap());
    assert_eq!((m.tlb_size(0), m.tlb_size(1), m.tlb_size(2)), (0, 1, 1));
}

#[test]
fn unmapping_a_splintered_page_drops_every_piece() {
    for (pol, len, memory) in [("fixed:2MiB", 4u64 << 20, 256u64 << 20), ("fixed:1GiB", 1 << 30, 2 << 30)] {
        let mut e = engine("skylake+nested=4KiB", pol, memory);
        run(&mut e, &pieces(), &mapped(len));
        let w = get(&mut e, "walks");
        // munmap shoots the guest page down; a piece left in a TLB would be a translation of
        // memory the page table no longer maps, which the validator reports.
        run(&mut e, &[], &[Event::Munmap { addr: BASE, len }]);
        e.validate().unwrap_or_else(|m| panic!("{pol}: {m}"));
        run(&mut e, &pieces()[..1], &mapped(len)[1..]);
        assert_eq!(get(&mut e, "walks"), w + 1, "{pol}: the first piece walks again");
        e.validate().unwrap();
    }
}
