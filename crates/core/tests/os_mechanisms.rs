//! OS mechanisms one at a time: fork with copy-on-write (shared pages, copies on write, reuse by
//! the last mapper, superpages copied whole), MADV_COLLAPSE, and stack growth.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

fn engine(pol: &str) -> Engine {
    let m = Machine::load("skylake").unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(256 << 20), validate: true, ..Default::default() }).unwrap()
}

fn chunk(recs: &[Rec]) -> Chunk {
    let mut c = Chunk::default();
    for r in recs {
        match r {
            Rec::A(a) => c.accesses.push(*a),
            Rec::E(e) => c.events.push((c.accesses.len() as u32, e.clone())),
        }
    }
    c
}

enum Rec {
    A(Access),
    E(Event),
}

const BASE: u64 = 0x4000_0000;

fn mmap(len: u64) -> Rec {
    Rec::E(Event::Mmap { addr: BASE, len, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 })
}
fn ctx(pid: u32) -> Rec {
    Rec::E(Event::Context { pid, tid: pid })
}
fn store(va: u64) -> Rec {
    Rec::A(Access::new(va, AccessKind::Store, 8))
}
fn load(va: u64) -> Rec {
    Rec::A(Access::new(va, AccessKind::Load, 8))
}

#[test]
fn child_write_copies_then_parent_reuses() {
    let mut e = engine("base");
    let mut recs = vec![ctx(1), mmap(1 << 20)];
    for i in 0..10 {
        recs.push(store(BASE + i * 4096));
    }
    recs.push(Rec::E(Event::Fork { child: 2 }));
    e.run_chunk(&chunk(&recs)).unwrap();
    let anon = |e: &Engine| e.os.phys.frames_by_kind()[1];
    assert_eq!(anon(&e), 10, "fork shares, it does not copy");
    assert_eq!(e.os.counters.pages_shared, 10);
    // The child reads (no fault) and writes page 0 (a copy).
    e.run_chunk(&chunk(&[ctx(2), load(BASE + 4096), store(BASE)])).unwrap();
    assert_eq!(e.os.counters.cow_copies, 1);
    assert_eq!(anon(&e), 11);
    // The parent writes page 0: it is the last mapper now, so it takes the page back.
    e.run_chunk(&chunk(&[ctx(1), store(BASE)])).unwrap();
    assert_eq!(e.os.counters.cow_reuses, 1);
    assert_eq!(e.os.counters.cow_copies, 1);
    assert_eq!(anon(&e), 11);
    assert_eq!(e.os.counters.cow_faults, 2);
    // Both exit: every frame comes back.
    e.run_chunk(&chunk(&[Rec::E(Event::Exit { code: 0 }), ctx(2), Rec::E(Event::Exit { code: 0 })])).unwrap();
    assert_eq!(anon(&e), 0);
    assert_eq!(e.os.phys.free_frames(), e.os.phys.total_frames());
    assert!(e.os.shared.is_empty());
}

#[test]
fn a_shared_superpage_is_copied_whole() {
    let mut e = engine("fixed:2MiB");
    e.run_chunk(&chunk(&[ctx(1), mmap(4 << 20), store(BASE), store(BASE + (2 << 20)), Rec::E(Event::Fork { child: 2 })])).unwrap();
    assert_eq!(e.os.phys.frames_by_kind()[1], 1024);
    e.run_chunk(&chunk(&[ctx(2), store(BASE + 12345)])).unwrap();
    assert_eq!(e.os.counters.cow_copies, 1);
    assert_eq!(e.os.phys.frames_by_kind()[1], 1536, "a 2MB copy");
    assert_eq!(e.os.procs[1].resident[1], 2, "the child still maps two 2MB pages");
    assert_eq!(e.os.compaction.bytes_copied_direct, 2 << 20);
}

#[test]
fn exit_of_the_parent_leaves_the_child_its_pages() {
    let mut e = engine("base");
    e.run_chunk(&chunk(&[ctx(1), mmap(1 << 20), store(BASE), Rec::E(Event::Fork { child: 2 }), Rec::E(Event::Exit { code: 0 })])).unwrap();
    assert_eq!(e.os.phys.frames_by_kind()[1], 1, "the child keeps the page");
    e.run_chunk(&chunk(&[ctx(2), store(BASE)])).unwrap();
    assert_eq!(e.os.counters.cow_reuses, 1, "sole mapper: no copy");
    assert_eq!(e.os.counters.cow_copies, 0);
}

#[test]
fn madvise_collapse_promotes_now_and_stack_grows_down() {
    let mut e = engine("base");
    let mut recs = vec![ctx(1), mmap(4 << 20)];
    for i in 0..40 {
        recs.push(store(BASE + i * 4096));
    }
    recs.push(Rec::E(Event::Madvise { addr: BASE, len: 4 << 20, advice: MADV_COLLAPSE }));
    e.run_chunk(&chunk(&recs)).unwrap();
    assert_eq!(e.os.compaction.collapse[0], 1, "the populated 2MB range collapses even under `base`");
    assert_eq!(e.os.procs[0].resident[1], 1);
    assert_eq!(e.os.compaction.collapse[1], 1, "the untouched one has no page table (pmd_null)");
    // A stack VMA grows down on a fault just below it.
    let top = 0x7fff_0000_0000u64;
    let stack = Rec::E(Event::Mmap { addr: top - (128 << 10), len: 128 << 10, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, fd: -1, offset: 0 });
    e.run_chunk(&chunk(&[stack, store(top - 8), store(top - (1 << 20))])).unwrap();
    assert_eq!(e.os.counters.stack_growths, 1);
    assert_eq!(e.os.counters.segv, 0);
    e.run_chunk(&chunk(&[store(top - (64 << 20))])).unwrap();
    assert_eq!(e.os.counters.segv, 1, "beyond RLIMIT_STACK: a segfault");
}

#[test]
fn contiguous_base_pages_promote_in_place_and_demote_back() {
    use superpager_core::os::promote::{DemoteReason, DemoteResult, PromoteResult};
    let mut e = engine("base");
    let mut recs = vec![ctx(1), mmap(4 << 20)];
    for i in 0..512 {
        recs.push(store(BASE + i * 4096));
    }
    recs.push(store(BASE + (2 << 20)));
    e.run_chunk(&chunk(&recs)).unwrap();
    let free_before = e.os.phys.free_frames();
    assert_eq!(e.os.promote_in_place(0, BASE + (2 << 20), 1, &mut e.mmu), PromoteResult::NotFullyPopulated);
    assert_eq!(e.os.promote_in_place(0, BASE, 1, &mut e.mmu), PromoteResult::Promoted, "fresh memory hands out ascending frames");
    assert_eq!(e.os.procs[0].resident[1], 1);
    assert_eq!(e.os.promote_in_place(0, BASE, 1, &mut e.mmu), PromoteResult::AlreadyLarger);
    e.os.validate().unwrap();
    assert!(e.os.phys.free_frames() >= free_before, "no copy: no new frames (a page-table page may come back)");
    assert_eq!(e.os.demote(0, BASE + 5000, 0, DemoteReason::Protection, &mut e.mmu), DemoteResult::Demoted);
    assert_eq!(e.os.promotions.demote_by[DemoteReason::Protection as usize][1], 1, "counted by reason and size");
    assert_eq!(e.os.procs[0].resident[0], 513);
    e.os.validate().unwrap();
    // After demotion each base page is its own allocation: unmapping one frees just it.
    e.run_chunk(&chunk(&[Rec::E(Event::Madvise { addr: BASE + 4096, len: 4096, advice: MADV_DONTNEED })])).unwrap();
    assert_eq!(e.os.phys.frames_by_kind()[1], 512);
    assert_eq!(e.os.promote_in_place(0, BASE, 1, &mut e.mmu), PromoteResult::NotFullyPopulated);
    e.run_chunk(&chunk(&[Rec::E(Event::Munmap { addr: BASE + 8192, len: 4096 })])).unwrap();
    assert_eq!(e.os.promote_in_place(0, BASE, 1, &mut e.mmu), PromoteResult::CrossesVma, "munmap split the VMA");
}

#[test]
fn file_mappings_map_the_page_cache() {
    let mut e = engine("base");
    let f = 0x6000_0000u64;
    let g = 0x7000_0000u64;
    let open = Rec::E(Event::FileOpen { fd: 3, path: "/data/table".into(), size: 1 << 20 });
    let read = Rec::E(Event::FileRead { fd: 3, offset: 0, len: 8192 });
    let private = Rec::E(Event::Mmap { addr: f, len: 1 << 20, prot: 3, flags: MAP_PRIVATE, fd: 3, offset: 0 });
    let shared = Rec::E(Event::Mmap { addr: g, len: 1 << 20, prot: 3, flags: MAP_SHARED, fd: 3, offset: 0 });
    e.run_chunk(&chunk(&[ctx(1), open, read, private, shared, load(f), load(f + 3 * 4096), store(f + 4096)])).unwrap();
    let c = &e.os.counters;
    assert_eq!((c.file_minor_faults, c.file_major_faults), (2, 1), "pages 0 and 1 were read; page 3 was not");
    assert_eq!(c.file_private_copies, 1, "a private write copies the page");
    assert_eq!(e.os.phys.frames_by_kind()[2], 3, "three page-cache frames");
    assert_eq!(e.os.phys.frames_by_kind()[1], 1, "one anonymous copy");
    // The shared mapping maps the same page-cache frame as the private one's read.
    e.run_chunk(&chunk(&[load(g), store(g + 4096 * 3)])).unwrap();
    assert_eq!(e.os.procs[0].pt.lookup(g).unwrap().pfn, e.os.procs[0].pt.lookup(f).unwrap().pfn);
    assert_eq!(e.os.counters.file_pages_dirtied, 1);
    // A write to a clean shared page is seen once (it was mapped write-protected).
    e.run_chunk(&chunk(&[store(g), store(g + 8)])).unwrap();
    assert_eq!(e.os.counters.file_pages_dirtied, 2);
    // Fork shares the mappings; compaction moves page-cache pages under every mapping.
    e.run_chunk(&chunk(&[Rec::E(Event::Fork { child: 2 }), ctx(2), load(f + 3 * 4096)])).unwrap();
    e.os.compact(9, &mut e.mmu);
    e.os.validate().unwrap();
    // Unmapping leaves the pages in the page cache.
    e.run_chunk(&chunk(&[Rec::E(Event::Exit { code: 0 }), ctx(1), Rec::E(Event::Exit { code: 0 })])).unwrap();
    assert_eq!(e.os.phys.frames_by_kind()[2], 3);
    assert_eq!(e.os.phys.frames_by_kind()[1], 0);
    assert!(e.os.files.mappers.is_empty());
}

#[test]
fn mthp_folios_are_contiguous_blocks_mapped_by_base_ptes() {
    let mut e = engine("linux-thp:enabled=never,hugepages-64kB=always,hugepages-16kB=always");
    e.run_chunk(&chunk(&[ctx(1), mmap(1 << 20), store(BASE + 5 * 4096), store(BASE + 17 * 4096)])).unwrap();
    let pt = &e.os.procs[0].pt;
    let first = pt.lookup(BASE).expect("the whole 64KiB folio is mapped").pfn.0;
    assert_eq!(first % 16, 0, "naturally aligned block");
    for k in 0..16 {
        let t = pt.lookup(BASE + k * 4096).unwrap();
        assert_eq!((t.size_idx, t.pfn.0), (0, first + k), "base PTEs over one contiguous block");
    }
    assert_eq!(e.os.promotions.folio_alloc[4], 2);
    assert_eq!(e.os.procs[0].resident[0], 32);
    // A folio cannot cover a partly mapped range: the next size down is tried.
    e.run_chunk(&chunk(&[Rec::E(Event::Madvise { addr: BASE + (1 << 16), len: 4096, advice: MADV_DONTNEED }), store(BASE + (1 << 16))])).unwrap();
    assert_eq!(e.os.promotions.folio_fallback[4], 1);
    assert_eq!(e.os.promotions.folio_fallback[2], 1, "the 16KiB range around it is still partly mapped");
    assert_eq!(e.os.procs[0].resident[0], 32, "one base page came back");
}

#[test]
fn unmapping_part_of_a_superpage_splits_it() {
    let mut e = engine("fixed:size=2MiB,fit=vma");
    e.run_chunk(&chunk(&[ctx(1), mmap(4 << 20), store(BASE), store(BASE + (2 << 20))])).unwrap();
    assert_eq!(e.os.procs[0].resident[1], 2);
    // MADV_DONTNEED on one base page: the 2MB page becomes 511 base pages.
    e.run_chunk(&chunk(&[Rec::E(Event::Madvise { addr: BASE + 8192, len: 4096, advice: MADV_DONTNEED })])).unwrap();
    assert_eq!((e.os.procs[0].resident[0], e.os.procs[0].resident[1]), (511, 1));
    assert_eq!(e.os.phys.frames_by_kind()[1], 511 + 512);
    // munmap of the first 4KB of the second 2MB page: the VMA splits, the page splits.
    e.run_chunk(&chunk(&[Rec::E(Event::Munmap { addr: BASE + (2 << 20), len: 4096 })])).unwrap();
    assert_eq!((e.os.procs[0].resident[0], e.os.procs[0].resident[1]), (511 + 511, 0));
    // The rest of it is still there: no fault on touching it.
    let faults = e.os.counters.faults;
    e.run_chunk(&chunk(&[load(BASE + (2 << 20) + 4096 * 9)])).unwrap();
    assert_eq!(e.os.counters.faults, faults);
    e.os.validate().unwrap();
}
