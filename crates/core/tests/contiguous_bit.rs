//! The ARM contiguous bit (`neoverse-n1`): 16 aligned, contiguous 4KB mappings that the OS
//! marks contiguous are one 64KB TLB entry, a page size `navarro` promotes to inside its 2MB
//! reservations. Any change to one of the 16 PTEs demotes it (break-before-make with a TLB
//! shootdown), counted by reason, and the next access to the group misses the old entry; the
//! TLB-coherence validator finds a 64KB entry left stale.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const BASE: u64 = 0x4000_0000;
const PAGE: u64 = 4096;

fn engine(pol: &str) -> Engine {
    let m = Machine::load("neoverse-n1").unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(256 << 20), validate: true, ..Default::default() }).unwrap()
}

fn run(e: &mut Engine, accesses: &[(u64, AccessKind)], events: &[(usize, Event)]) {
    let mut c = Chunk::default();
    let mut ev = events.iter().peekable();
    for (i, &(va, k)) in accesses.iter().enumerate() {
        while let Some((at, x)) = ev.peek() {
            if *at > i {
                break;
            }
            c.events.push((c.accesses.len() as u32, x.clone()));
            ev.next();
        }
        c.accesses.push(Access::new(va, k, 8));
    }
    for (_, x) in ev {
        c.events.push((c.accesses.len() as u32, x.clone()));
    }
    e.run_chunk(&c).unwrap();
}

fn get(e: &mut Engine, k: &str) -> u64 {
    e.results().counters.get(k).copied().unwrap_or(0)
}

/// A process with 4MB of anonymous memory whose first 16 pages are written: one 64KB page
/// (`cow=split`: a copy-on-write break demotes, as in FreeBSD).
fn with_a_64k_page() -> Engine {
    let mut e = engine("navarro:sizes=64KiB+2MiB,cow=split");
    let anon = Event::Mmap { addr: BASE, len: 4 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 };
    let stores: Vec<(u64, AccessKind)> = (0..16).map(|i| (BASE + i * PAGE, AccessKind::Store)).collect();
    run(&mut e, &stores, &[(0, Event::Context { pid: 1, tid: 1 }), (0, anon)]);
    assert_eq!(get(&mut e, "policy.navarro.promote.64KiB"), 1);
    assert_eq!(e.os.procs[0].pt.lookup(BASE).map(|t| t.size_idx), Some(1), "pages 0..15 are one 64KB page");
    e
}

#[test]
fn a_change_to_one_pte_demotes_the_64k_page_by_reason_and_the_next_access_misses() {
    for (change, reason) in [("mprotect", "protection"), ("munmap", "partial_unmap"), ("fork-then-write", "cow")] {
        let mut e = with_a_64k_page();
        // The 64KB entry is in the TLB now: another page of the group hits it.
        let w0 = get(&mut e, "walks");
        run(&mut e, &[(BASE + 6 * PAGE, AccessKind::Load)], &[]);
        assert_eq!(get(&mut e, "walks"), w0, "{change}: page 6 hits the 64KB entry");
        let demoted = get(&mut e, &format!("demote.{reason}.64KiB"));
        match change {
            "mprotect" => run(&mut e, &[], &[(0, Event::Mprotect { addr: BASE + 3 * PAGE, len: PAGE, prot: 1 })]),
            "munmap" => run(&mut e, &[], &[(0, Event::Munmap { addr: BASE + 3 * PAGE, len: PAGE })]),
            _ => run(&mut e, &[(BASE + 3 * PAGE, AccessKind::Store)], &[(0, Event::Fork { child: 2 }), (0, Event::Context { pid: 1, tid: 1 })]),
        }
        e.validate().unwrap();
        assert_eq!(get(&mut e, &format!("demote.{reason}.64KiB")), demoted + 1, "{change}: one demotion from 64KB, counted as {reason}");
        assert_eq!(e.os.procs[0].pt.lookup(BASE + 6 * PAGE).map(|t| t.size_idx), Some(0), "{change}: page 6 is a base page now");
        // No stale translation: page 6 is no longer covered by a 64KB entry, so it walks.
        let w1 = get(&mut e, "walks");
        run(&mut e, &[(BASE + 6 * PAGE, AccessKind::Load)], &[]);
        assert_eq!(get(&mut e, "walks"), w1 + 1, "{change}: the access to page 6 must miss the old 64KB entry");
    }
}

#[test]
fn the_validator_catches_a_64k_entry_left_stale() {
    let mut e = with_a_64k_page();
    run(&mut e, &[(BASE + 6 * PAGE, AccessKind::Load)], &[]);
    e.validate().unwrap();
    // Take the 64KB mapping down behind the MMU's back (no shootdown): its TLB entry is stale.
    let mut gone = Vec::new();
    e.os.procs[0].pt.unmap_range(BASE, 16 * PAGE, &mut gone);
    assert_eq!(gone.len(), 1);
    let err = e.validate_tlbs().unwrap_err();
    assert!(err.contains("0x40000000"), "{err}");
}

#[test]
fn promote_at_maps_a_64k_page_before_its_16_pages_are_touched() {
    let mut e = engine("navarro:sizes=64KiB+2MiB,promote_at=4");
    let anon = Event::Mmap { addr: BASE, len: 4 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 };
    let stores: Vec<(u64, AccessKind)> = (0..4).map(|i| (BASE + i * PAGE, AccessKind::Store)).collect();
    run(&mut e, &stores, &[(0, Event::Context { pid: 1, tid: 1 }), (0, anon)]);
    assert_eq!(e.os.procs[0].pt.lookup(BASE + 15 * PAGE).map(|t| t.size_idx), Some(1), "4 of 16 pages promote it");
    assert_eq!(get(&mut e, "faults"), 4);
}
