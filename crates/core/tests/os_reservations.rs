//! Reservations (os/frames/reserv.rs), the mechanism under Navarro et al.'s policy: an extent set
//! aside at first touch, populated page by page, promoted in place once full; frames freed
//! inside it go back to it; an emptied one returns to the buddy allocator; a preempted one
//! splits into freed, dropped and smaller partial pieces. The validator runs after each step.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::os::frames::FrameKind;
use superpager_core::os::promote::PromoteResult;
use superpager_core::os::MapOutcome;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::{Bytes, Order};

const BASE: u64 = 0x4000_0000; // 2MB-aligned
const PAGE: u64 = 4096;

/// An engine with one process that has a 4MB anonymous VMA at BASE; returns it and the
/// process index.
fn setup() -> (Engine, usize) {
    let m = Machine::load("skylake").unwrap();
    let p = policy::build("base", &m.page_sizes).unwrap();
    let mut e = Engine::new(m, p, EngineConfig { memory: Bytes(64 << 20), validate: true, ..Default::default() }).unwrap();
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    c.events.push((0, Event::Mmap { addr: BASE, len: 4 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
    e.run_chunk(&c).unwrap();
    let pi = e.os.proc_index(1);
    (e, pi)
}

fn kind(e: &Engine, k: FrameKind) -> u64 {
    e.os.phys.frames_by_kind()[k as usize]
}

#[test]
fn a_reservation_fills_then_promotes_in_place() {
    let (mut e, pi) = setup();
    let free0 = e.os.phys.free_frames();
    // First touch in the middle of the 2MB extent: the frame at the matching offset.
    let id = e.os.reserve_and_map(pi, BASE + 77 * PAGE + 8, 1, 100, &mut e.mmu).unwrap();
    let r = e.os.phys.reservs.get(id).unwrap().clone();
    assert_eq!((r.order, r.popcnt, r.last_alloc), (9, 1, 100));
    assert_eq!(r.pfn % 512, 0, "aligned to 2MB");
    let t = e.os.procs[pi].pt.lookup(BASE + 77 * PAGE).unwrap();
    assert_eq!(t.pfn.0, r.pfn + 77, "the frame at the page's offset");
    assert_eq!((kind(&e, FrameKind::Anon), kind(&e, FrameKind::Reservation)), (1, 511));
    e.os.validate().unwrap();
    // Not full: promotion is refused.
    assert_eq!(e.os.promote_in_place(pi, BASE, 1, &mut e.mmu), PromoteResult::NotFullyPopulated);
    for i in (0..512).filter(|&i| i != 77) {
        assert_eq!(e.os.map_from_reservation(pi, BASE + i * PAGE, id, 200 + i, &mut e.mmu), MapOutcome::Mapped);
    }
    assert_eq!(e.os.map_from_reservation(pi, BASE, id, 999, &mut e.mmu), MapOutcome::OverlapsMapping, "already populated");
    e.os.validate().unwrap();
    assert_eq!(e.os.phys.reservs.get(id).unwrap().popcnt, 512);
    assert_eq!(e.os.promote_in_place(pi, BASE, 1, &mut e.mmu), PromoteResult::Promoted, "no copy needed");
    assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 1);
    e.os.validate().unwrap();
    // Unmapping the 2MB page gives every frame back to the reservation, which, empty, returns
    // its extent to the buddy allocator.
    e.os.unmap_range(pi, BASE, 2 << 20, &mut e.mmu);
    e.os.validate().unwrap();
    assert_eq!(e.os.phys.reservs.count(), 0);
    assert_eq!(kind(&e, FrameKind::Reservation), 0);
    assert!(e.os.phys.free_frames() >= free0 - 8, "only page-table frames may remain in use");
    assert!(e.os.phys.largest_free_order().unwrap() >= 9);
}

#[test]
fn freed_pages_return_to_their_reservation() {
    let (mut e, pi) = setup();
    let id = e.os.reserve_and_map(pi, BASE, 1, 1, &mut e.mmu).unwrap();
    for i in 1..10 {
        e.os.map_from_reservation(pi, BASE + i * PAGE, id, 1 + i, &mut e.mmu);
    }
    // MADV_DONTNEED on 3 pages: their frames are reserved again, not free.
    let free = e.os.phys.free_frames();
    e.os.unmap_range(pi, BASE + 2 * PAGE, 3 * PAGE, &mut e.mmu);
    e.os.validate().unwrap();
    assert_eq!(e.os.phys.free_frames(), free);
    assert_eq!(e.os.phys.reservs.get(id).unwrap().popcnt, 7);
    assert_eq!(kind(&e, FrameKind::Reservation), 512 - 7);
    // Touched again, a page gets the same frame back.
    let pfn = e.os.phys.reservs.get(id).unwrap().pfn;
    assert_eq!(e.os.map_from_reservation(pi, BASE + 3 * PAGE, id, 50, &mut e.mmu), MapOutcome::Mapped);
    assert_eq!(e.os.procs[pi].pt.lookup(BASE + 3 * PAGE).unwrap().pfn.0, pfn + 3);
    e.os.validate().unwrap();
}

#[test]
fn preemption_splits_into_freed_dropped_and_partial_pieces() {
    let (mut e, pi) = setup();
    let id = e.os.reserve_and_map(pi, BASE, 1, 1, &mut e.mmu).unwrap();
    // Pieces of 16 frames (64KB): piece 0 full, piece 1 with 3 pages, the other 30 empty.
    for i in (1..16).chain(16..19) {
        e.os.map_from_reservation(pi, BASE + i * PAGE, id, 10, &mut e.mmu);
    }
    let free = e.os.phys.free_frames();
    let out = e.os.phys.reserv_split(id, Order(4));
    assert_eq!((out.freed, out.dropped_full, out.partial.len()), (30, 1, 1));
    e.os.validate().unwrap();
    assert_eq!(e.os.phys.free_frames(), free + 30 * 16);
    let p = e.os.phys.reservs.get(out.partial[0]).unwrap();
    assert_eq!((p.order, p.popcnt, p.last_alloc), (4, 3, 10));
    assert_eq!(kind(&e, FrameKind::Reservation), 13);
    // The partial piece keeps working as a reservation of 16 frames.
    let pid = out.partial[0];
    assert_eq!(e.os.map_from_reservation(pi, BASE + 20 * PAGE, pid, 11, &mut e.mmu), MapOutcome::Mapped);
    // Dissolving it frees its 12 unpopulated frames; its 4 pages stay mapped.
    let out = e.os.phys.reserv_split(pid, Order(0));
    assert_eq!((out.freed, out.dropped_full, out.partial.len()), (12, 4, 0));
    assert_eq!(e.os.phys.reservs.count(), 0);
    e.os.validate().unwrap();
    assert!(e.os.procs[pi].pt.lookup(BASE + 20 * PAGE).is_some());
}

#[test]
fn exit_and_fork_release_reserved_frames() {
    let (mut e, pi) = setup();
    let id = e.os.reserve_and_map(pi, BASE, 1, 1, &mut e.mmu).unwrap();
    for i in 1..100 {
        e.os.map_from_reservation(pi, BASE + i * PAGE, id, 2, &mut e.mmu);
    }
    // A child shares the 100 pages copy-on-write; the parent exits; the child writes one page
    // (a copy) and exits: every frame comes back, no reservation survives.
    let mut c = Chunk::default();
    c.events.push((0, Event::Fork { child: 2 }));
    c.events.push((0, Event::Exit { code: 0 }));
    c.events.push((0, Event::Context { pid: 2, tid: 2 }));
    c.accesses.push(Access::new(BASE + 5 * PAGE, AccessKind::Store, 8));
    c.events.push((1, Event::Exit { code: 0 }));
    e.run_chunk(&c).unwrap();
    e.os.validate().unwrap();
    assert_eq!(e.os.phys.reservs.count(), 0);
    assert_eq!(kind(&e, FrameKind::Anon) + kind(&e, FrameKind::Reservation), 0);
}
