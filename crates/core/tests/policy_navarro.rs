//! The `navarro` policy on the OS model, with the invariant validator on: reservations at first
//! touch, incremental promotion in place, one size against several, preemption when contiguity
//! runs out, and everything released at unmap and exit.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::os::frames::FrameKind;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const BASE: u64 = 0x1_0000_0000; // aligned to every superpage size

fn engine(machine: &str, pol: &str, memory: u64) -> Engine {
    let m = Machine::load(machine).unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(memory), validate: true, ..Default::default() }).unwrap()
}

/// Run `events`, then one access of `kind` to each address.
fn run_as(e: &mut Engine, kind: AccessKind, events: Vec<Event>, accesses: impl IntoIterator<Item = u64>) {
    let mut c = Chunk::default();
    for ev in events {
        c.events.push((0, ev));
    }
    for va in accesses {
        c.accesses.push(Access::new(va, kind, 8));
    }
    e.run_chunk(&c).unwrap();
}

/// Writes (first touches of anonymous memory).
fn run(e: &mut Engine, events: Vec<Event>, accesses: impl IntoIterator<Item = u64>) {
    run_as(e, AccessKind::Store, events, accesses);
}

/// Reads (a file mapping read in stays clean).
fn read(e: &mut Engine, events: Vec<Event>, accesses: impl IntoIterator<Item = u64>) {
    run_as(e, AccessKind::Load, events, accesses);
}

fn setup(e: &mut Engine, len: u64) {
    run(e, vec![Event::Context { pid: 1, tid: 1 }, Event::Mmap { addr: BASE, len, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }], []);
}

fn counter(e: &mut Engine, name: &str) -> u64 {
    let r = e.results();
    *r.counters.get(name).unwrap_or_else(|| panic!("no counter {name}"))
}

#[test]
fn sequential_first_touch_promotes_incrementally_to_the_largest_size() {
    // Alpha: 8KB pages, superpages of 64KB, 512KB, 4MB.
    let mut e = engine("alpha21264", "navarro", 256 << 20);
    setup(&mut e, 16 << 20);
    let page = 8192u64;
    // Touch the first 64KB: one 4MB reservation, then a 64KB promotion.
    run(&mut e, vec![], (0..8).map(|i| BASE + i * page));
    let pi = e.os.proc_index(1);
    assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 1, "64KB after 8 pages");
    assert_eq!(e.os.phys.reservs.count(), 1);
    // The rest of the 16MB, in order: every 4MB ends as one page.
    run(&mut e, vec![], (8..2048).map(|i| BASE + i * page));
    for k in 0..4 {
        assert_eq!(e.os.procs[pi].pt.lookup(BASE + k * (4 << 20)).unwrap().size_idx, 3);
    }
    assert_eq!(counter(&mut e, "policy.navarro.reserve.4MiB"), 4);
    // Each fault promotes the largest region it completes: the last 64KB of a 512KB region
    // completes both and becomes part of a 512KB page at once (and likewise for 4MB).
    assert_eq!(counter(&mut e, "policy.navarro.promote.64KiB"), 4 * 8 * 7);
    assert_eq!(counter(&mut e, "policy.navarro.promote.512KiB"), 4 * 7);
    assert_eq!(counter(&mut e, "policy.navarro.promote.4MiB"), 4);
    assert_eq!(counter(&mut e, "policy.navarro.fault.from_reservation"), 2048 - 4);
    assert_eq!(e.os.phys.frames_by_kind()[FrameKind::Reservation as usize], 0, "all populated");
}

#[test]
fn preferred_size_respects_the_object_and_what_is_populated() {
    let mut e = engine("alpha21264", "navarro", 256 << 20);
    // A 600KB object: the largest aligned superpage inside it is 512KB (at its start).
    setup(&mut e, 600 << 10);
    run(&mut e, vec![], [BASE + 8192]);
    assert_eq!(counter(&mut e, "policy.navarro.reserve.512KiB"), 1);
    // A fault past 512KB gets a 64KB reservation (the 512KB region above would cross the end).
    run(&mut e, vec![], [BASE + (512 << 10) + 8192]);
    assert_eq!(counter(&mut e, "policy.navarro.reserve.64KiB"), 1);
    assert!(counter(&mut e, "policy.navarro.preferred_capped.object") >= 2);
    // Why neither is a superpage: each holds one populated page of its 64 and 8.
    assert_eq!(counter(&mut e, "policy.navarro.unpromoted.not_fully_populated.512KiB"), 1);
    assert_eq!(counter(&mut e, "policy.navarro.unpromoted.not_fully_populated.64KiB"), 1);
    assert_eq!(counter(&mut e, "policy.navarro.unpromoted.pages_populated"), 2);
    assert_eq!(counter(&mut e, "policy.navarro.unpromoted.pages_reserved"), 64 + 8);
    // At exit the same reasons are kept.
    run(&mut e, vec![Event::Exit { code: 0 }], []);
    assert_eq!(counter(&mut e, "policy.navarro.unpromoted.not_fully_populated.512KiB"), 1);
}

#[test]
fn one_size_only() {
    let mut e = engine("alpha21264", "navarro:sizes=64KiB", 256 << 20);
    setup(&mut e, 4 << 20);
    run(&mut e, vec![], (0..512).map(|i| BASE + i * 8192));
    let pi = e.os.proc_index(1);
    let mut pages = Vec::new();
    e.os.procs[pi].pt.pages_in_range(BASE, 4 << 20, &mut pages);
    assert_eq!(pages.len(), 64);
    assert!(pages.iter().all(|t| t.size_idx == 1), "only 64KB pages");
    assert_eq!(counter(&mut e, "policy.navarro.reserve.64KiB"), 64);
    assert!(policy::build("navarro:sizes=2MiB", &Machine::load("alpha21264").unwrap().page_sizes).is_err());
}

#[test]
fn scarce_contiguity_preempts_the_least_recently_allocated_reservation() {
    // 40MB of memory on Alpha: about nine free 4MB extents. Touch one page in each of forty
    // 4MB regions: the first reservations take every free 4MB extent, the next ones the 512KB
    // extents left over; then no list can yield 4MB and, with retry_smaller, faults preempt
    // the least recently allocated reservation for a 512KB extent.
    let mut e = engine("alpha21264", "navarro:retry_smaller=true", 40 << 20);
    setup(&mut e, 160 << 20);
    run(&mut e, vec![], (0..40).map(|k| BASE + k * (4 << 20)));
    let big = counter(&mut e, "policy.navarro.reserve.4MiB");
    assert!((6..12).contains(&big), "{big} 4MB reservations");
    assert!(counter(&mut e, "policy.navarro.preempt.list_512KiB") >= 1);
    assert!(counter(&mut e, "policy.navarro.reserve.512KiB") >= 1);
    // The oldest reservation was the one broken: region 0 is no longer 4MB-reserved.
    let pi = e.os.proc_index(1);
    let first = e.os.procs[pi].pt.lookup(BASE).unwrap().pfn.0;
    assert!(e.os.phys.reservs.live().all(|(_, r)| !(r.order == 9 && r.pfn <= first && first < r.pfn + 512)));
}

#[test]
fn unmap_and_exit_release_every_reserved_frame() {
    let mut e = engine("skylake", "navarro", 256 << 20);
    setup(&mut e, 8 << 20);
    run(&mut e, vec![], (0..700).map(|i| BASE + i * 4096));
    assert_eq!(counter(&mut e, "policy.navarro.promote.2MiB"), 1);
    // Region 1 holds pages 0..188. Unmap its pages 128..256: the reservation keeps the rest.
    let r1 = BASE + (2 << 20);
    run(&mut e, vec![Event::Munmap { addr: r1 + 128 * 4096, len: 128 * 4096 }], []);
    assert_eq!(e.os.phys.reservs.count(), 2);
    let pi = e.os.proc_index(1);
    let base_pfn = e.os.procs[pi].pt.lookup(r1).unwrap().pfn.0;
    // Mapped again and touched, page 130 gets its old frame back from the reservation.
    run(
        &mut e,
        vec![Event::Mmap { addr: r1 + 128 * 4096, len: 128 * 4096, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, fd: -1, offset: 0 }],
        [r1 + 130 * 4096],
    );
    assert_eq!(e.os.procs[pi].pt.lookup(r1 + 130 * 4096).unwrap().pfn.0, base_pfn + 130);
    assert!(counter(&mut e, "policy.navarro.fault.from_reservation") > 700 - 4);
    run(&mut e, vec![Event::Exit { code: 0 }], []);
    assert_eq!(e.os.phys.reservs.count(), 0);
    assert_eq!(e.os.phys.frames_by_kind()[FrameKind::Reservation as usize], 0);
    assert_eq!(e.os.phys.frames_by_kind()[FrameKind::Anon as usize], 0);
}

#[test]
fn a_promoted_2mb_page_is_seen_by_every_lookup() {
    let mut e = engine("skylake", "navarro", 256 << 20);
    setup(&mut e, 8 << 20);
    run(&mut e, vec![], (0..512).map(|i| BASE + i * 4096));
    let pi = e.os.proc_index(1);
    for va in [BASE, BASE + 4096 * 77, BASE + (2 << 20) - 8] {
        assert_eq!(e.os.procs[pi].pt.size_at(va), Some(1), "{va:#x}");
        assert_eq!(e.os.procs[pi].pt.lookup(va).map(|t| t.size_idx), Some(1));
    }
    // A neighbouring 4KB page maps fine after the promotion.
    run(&mut e, vec![], [BASE + (2 << 20) + 4096]);
    assert_eq!(e.os.procs[pi].pt.size_at(BASE + (2 << 20) + 4096), Some(0));
}

#[test]
fn a_protection_change_demotes_incrementally() {
    let mut e = engine("alpha21264", "navarro", 256 << 20);
    setup(&mut e, 4 << 20);
    run(&mut e, vec![], (0..512).map(|i| BASE + i * 8192));
    let pi = e.os.proc_index(1);
    assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 3);
    // Make one 8KB page read-only: 4MB -> 512KB -> 64KB -> 8KB around it, nothing more.
    let x = BASE + (1 << 20) + 8192;
    run(&mut e, vec![Event::Mprotect { addr: x, len: 8192, prot: 1 }], []);
    let size = |e: &Engine, va: u64| e.os.procs[pi].pt.lookup(va).unwrap().size_idx;
    assert_eq!(counter(&mut e, "os.protection_demotes"), 3);
    assert_eq!(size(&e, x), 0);
    assert_eq!(size(&e, x - 8192), 0, "its 64KB neighbours became 8KB pages");
    assert_eq!(size(&e, BASE + (1 << 20) + (64 << 10)), 1, "the other 64KB pieces stay");
    assert_eq!(size(&e, BASE), 2, "the other 512KB pieces stay");
    assert_eq!(size(&e, BASE + (2 << 20)), 2);
}

#[test]
fn eviction_demotes_around_the_victim_instead_of_swapping_the_superpage_whole() {
    // 24MB of memory and swap; a 4MB superpage first, then enough other pages to force
    // reclaim. The cold superpage is evicted one base page at a time: each eviction demotes
    // the piece holding the victim one size at a time, and only base pages go to swap.
    let m = Machine::load("alpha21264").unwrap();
    let p = policy::build("navarro", &m.page_sizes).unwrap();
    let cfg = EngineConfig { memory: Bytes(24 << 20), swap: Bytes(64 << 20), validate: true, ..Default::default() };
    let mut e = Engine::new(m, p, cfg).unwrap();
    setup(&mut e, 48 << 20);
    run(&mut e, vec![], (0..512).map(|i| BASE + i * 8192));
    let pi = e.os.proc_index(1);
    assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 3);
    run(&mut e, vec![], (512..3200).map(|i| BASE + i * 8192));
    let out = counter(&mut e, "swap.out");
    let demotions = counter(&mut e, "swap.evict_demotions");
    assert!(out > 0 && demotions >= 3, "{out} swapped out, {demotions} demotion steps");
    assert!(e.os.procs[pi].swapped.entries().iter().all(|(_, s)| s.si == 0), "only base pages went to swap");
    let mut pages = Vec::new();
    e.os.procs[pi].pt.pages_in_range(BASE, 4 << 20, &mut pages);
    assert!(pages.iter().any(|t| t.size_idx >= 1), "the pieces not yet evicted stay superpages");
}

#[test]
fn closing_a_file_last_makes_its_cached_pages_inactive() {
    for (pol, want) in [("navarro", 10), ("base", 0)] {
        let mut e = engine("skylake", pol, 256 << 20);
        let open = Event::FileOpen { fd: 3, path: "/data/f".into(), size: 1 << 20 };
        let read = Event::FileRead { fd: 3, offset: 0, len: 10 * 4096 };
        run(&mut e, vec![Event::Context { pid: 1, tid: 1 }, open, read.clone(), read, Event::FileClose { fd: 3 }], []);
        assert_eq!(counter(&mut e, "pagecache.deactivated_on_close"), want, "{pol}");
    }
}

#[test]
fn a_population_threshold_below_one_zeroes_the_rest_and_promotes() {
    // Every other 8KB page of a 4MB region: never fully populated, so threshold 1 (the paper's
    // choice) promotes nothing. Threshold 0.5 fills each region once half of it is populated
    // (zeroed pages count, so larger regions fill sooner) and ends with one 4MB page: the
    // program touched 256 pages, the policy zeroed at least the other 256, some of them before
    // the program would have touched them.
    for (pol, size) in [("navarro", 0), ("navarro:threshold=0.5", 3)] {
        let mut e = engine("alpha21264", pol, 256 << 20);
        setup(&mut e, 4 << 20);
        run(&mut e, vec![], (0..256).map(|i| BASE + 2 * i * 8192));
        let pi = e.os.proc_index(1);
        assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, size, "{pol}");
        let zeroed = counter(&mut e, "policy.navarro.prezeroed_pages");
        if size == 0 {
            assert_eq!(zeroed, 0);
        } else {
            assert!((256..512).contains(&zeroed), "{zeroed} pages zeroed ahead");
        }
    }
    assert!(policy::build("navarro:threshold=1.5", &Machine::load("alpha21264").unwrap().page_sizes).is_err());
}

#[test]
fn pte_replication_charges_a_write_per_base_pte_of_each_promotion() {
    // 4MB touched in order on Alpha: 56 promotions to 64KB (8 PTEs each), 7 to 512KB (64),
    // 1 to 4MB (512): 448 + 448 + 512 = 1408 PTE writes.
    let page = 8192u64;
    let mut plain = engine("alpha21264", "navarro", 256 << 20);
    let mut repl = engine("alpha21264", "navarro:pte_replication=true", 256 << 20);
    for e in [&mut plain, &mut repl] {
        setup(e, 4 << 20);
        run(e, vec![], (0..512).map(|i| BASE + i * page));
        assert_eq!(counter(e, "promote_in_place.ptes_covered"), 1408);
    }
    let w = repl.mmu.machine.pte_write_cycles;
    assert!(w > 0.0);
    assert_eq!(counter(&mut plain, "cycles.pte"), 0, "no replication: PTE rewrites cost nothing extra");
    assert_eq!(counter(&mut repl, "cycles.pte"), (1408.0 * w) as u64);
    assert_eq!(counter(&mut repl, "cycles.total") - counter(&mut plain, "cycles.total"), (1408.0 * w) as u64);
}

#[test]
fn speculative_demotion_splits_a_superpage_whose_bit_is_cleared_and_repromotes_it_when_all_used() {
    // A hot 4MB superpage while new pages keep pushing memory into reclaim: the CLOCK hand
    // clears its reference bit, and with p = 1 it is demoted (one size per step, 3 steps); the
    // program keeps touching all of it, so every piece is referenced again and the region is
    // promoted back to 4MB in place. With demote_p=0 nothing is demoted speculatively.
    let page = 8192u64;
    let hot = BASE;
    let cold = BASE + (8 << 20);
    for (pol, want) in [("navarro", true), ("navarro:demote_p=0", false)] {
        let m = Machine::load("alpha21264").unwrap();
        let p = policy::build(pol, &m.page_sizes).unwrap();
        let cfg = EngineConfig { memory: Bytes(24 << 20), swap: Bytes(64 << 20), validate: true, ..Default::default() };
        let mut e = Engine::new(m, p, cfg).unwrap();
        setup(&mut e, 64 << 20);
        run(&mut e, vec![], (0..512).map(|i| hot + i * page));
        let pi = e.os.proc_index(1);
        assert_eq!(e.os.procs[pi].pt.lookup(hot).unwrap().size_idx, 3);
        for round in 0..24u64 {
            let fresh = (round * 128..(round + 1) * 128).map(|i| cold + i * page);
            run(&mut e, vec![], fresh.chain((0..512).map(|i| hot + i * page)));
        }
        let spec = counter(&mut e, "swap.speculative_demotions");
        let again = counter(&mut e, "swap.repromotions");
        assert!(counter(&mut e, "swap.out") > 0, "{pol}: memory pressure");
        if want {
            assert!(spec >= 3, "{pol}: {spec} speculative demotion steps");
            assert!(again >= 1, "{pol}: {again} repromotions");
        } else {
            assert_eq!((spec, again), (0, 0), "{pol}");
        }
    }
}

/// The dirty-file adversary's core (§A.4.5): map a 16MB file shared, read every page (the
/// mapping becomes 4MB superpages), write every 512th page.
fn dirty_file_run(pol: &str) -> Engine {
    let page = 8192u64;
    let mut e = engine("alpha21264", pol, 256 << 20);
    let open = Event::FileOpen { fd: 3, path: "/data/big".into(), size: 16 << 20 };
    let map = Event::Mmap { addr: BASE, len: 16 << 20, prot: 3, flags: MAP_SHARED, fd: 3, offset: 0 };
    read(&mut e, vec![Event::Context { pid: 1, tid: 1 }, open, map], (0..2048).map(|i| BASE + i * page));
    let pi = e.os.proc_index(1);
    for k in 0..4 {
        assert_eq!(e.os.procs[pi].pt.lookup(BASE + k * (4 << 20)).unwrap().size_idx, 3, "{pol}: reading it all made 4MB pages");
    }
    run(&mut e, vec![], (0..4).map(|k| BASE + k * 512 * page));
    e
}

#[test]
fn a_read_file_mapping_becomes_superpages_and_a_write_demotes_or_dirties_it_whole() {
    let mut d = dirty_file_run("navarro");
    assert_eq!(counter(&mut d, "file.superpages.4MiB"), 4);
    assert_eq!(counter(&mut d, "file.reserve.4MiB"), 4, "one file reservation per 4MB of the file");
    assert_eq!(counter(&mut d, "pagecache.dirty_pages"), 4, "demote on write: only the written pages are dirty");
    assert_eq!(counter(&mut d, "file.dirty_demotions"), 4 * 3, "4MB -> 512KB -> 64KB -> 8KB around each write");
    let pi = d.os.proc_index(1);
    assert_eq!(d.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 0);
    assert_eq!(d.os.procs[pi].pt.lookup(BASE + (64 << 10)).unwrap().size_idx, 1, "the rest stays in superpages");
    let mut w = dirty_file_run("navarro:dirty=whole");
    assert_eq!(counter(&mut w, "pagecache.dirty_pages"), 2048, "one dirty bit per superpage: all of it must be written");
    assert_eq!((counter(&mut w, "file.dirtied_whole"), counter(&mut w, "file.dirty_demotions")), (4, 0));
    // Hash digests: the superpages stay, the flush writes only the written pages, and every
    // page was hashed as it was read (16MB) and again at the flush (4 dirty 4MB superpages).
    let mut h = dirty_file_run("navarro:dirty=hash");
    assert_eq!(counter(&mut h, "pagecache.dirty_pages"), 4);
    assert_eq!(counter(&mut h, "file.dirty_demotions"), 0);
    let pi = h.os.proc_index(1);
    assert_eq!(h.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 3, "still a 4MB page");
    assert_eq!(counter(&mut h, "file.hashed_bytes"), (16 << 20) + 4 * (4 << 20));
    assert!(counter(&mut h, "cycles.hash") > 0);
    assert_eq!(counter(&mut d, "cycles.hash"), 0);
    // A second write to a dirty superpage is not a fault (the model only notes the page).
    let faults = counter(&mut h, "faults.cow");
    run(&mut h, vec![], [BASE + 8192]);
    assert_eq!(counter(&mut h, "faults.cow"), faults);
    assert_eq!(counter(&mut h, "pagecache.dirty_pages"), 5);
    // Exit releases every mapping; the pages stay cached.
    for e in [&mut d, &mut w, &mut h] {
        run(e, vec![Event::Exit { code: 0 }], []);
        assert!(e.os.files.mappers.is_empty());
        e.os.validate().unwrap();
    }
}

#[test]
fn a_file_mapping_whose_offsets_disagree_is_not_promoted_and_says_why() {
    // The mapping starts at file offset 8KB on a 4MB-aligned address: no aligned region of the
    // mapping lines up with an aligned extent of the file. (Placement off: with it on, the
    // mapping would be moved to agree; os_placement.rs.)
    let page = 8192u64;
    let mut e = engine("alpha21264", "navarro:align_files=false", 256 << 20);
    let open = Event::FileOpen { fd: 3, path: "/data/f".into(), size: 8 << 20 };
    let map = Event::Mmap { addr: BASE, len: 4 << 20, prot: 3, flags: MAP_SHARED, fd: 3, offset: page };
    read(&mut e, vec![Event::Context { pid: 1, tid: 1 }, open, map], (0..512).map(|i| BASE + i * page));
    assert_eq!(counter(&mut e, "file.superpages.64KiB"), 0);
    assert_eq!(counter(&mut e, "file.promote_refused.misaligned"), 64 + 8 + 1, "every 64KB, 512KB and 4MB region");
}

#[test]
fn mremap_of_a_promoted_shared_file_mapping_keeps_the_page_cache_consistent() {
    // Page-cache pages are unmapped by mremap and fault back in from the cache at the new
    // address (no I/O); before, they were moved as if anonymous and their reverse-map entries
    // went stale (the validator caught it).
    let page = 8192u64;
    let mut e = engine("alpha21264", "navarro", 256 << 20);
    let open = Event::FileOpen { fd: 3, path: "/data/f".into(), size: 8 << 20 };
    let map = Event::Mmap { addr: BASE, len: 8 << 20, prot: 1, flags: MAP_SHARED, fd: 3, offset: 0 };
    let all = || (0..1024).map(|i| BASE + i * page);
    read(&mut e, vec![Event::Context { pid: 1, tid: 1 }, open, map], all());
    let read_in = counter(&mut e, "file.read_bytes");
    let grow = Event::Mremap { old_addr: BASE, old_len: 8 << 20, new_addr: BASE, new_len: 16 << 20 };
    read(&mut e, vec![grow], all());
    assert_eq!(counter(&mut e, "file.read_bytes"), read_in, "refaulted from the page cache");
    let pi = e.os.proc_index(1);
    assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 3, "promoted again once all mapped");
}

#[test]
fn a_fault_is_served_when_its_page_tables_take_back_the_reservation_made_for_it() {
    // Alpha memory wired but for one free 4MB extent: the first touch reserves all of it, and
    // the page-table frames its mapping needs can only come from that reservation, which is
    // dissolved to give them. The page stays mapped; the policy must not try to map it again.
    let m = Machine::load("alpha21264").unwrap();
    let o = superpager_core::experiment::strided_preemption(
        m,
        "navarro",
        Bytes(64 << 20),
        1,
        superpager_core::experiment::FreeMemory::Extents,
        64 << 10,
        400,
        true,
    )
    .unwrap();
    assert_eq!(o.faults, 400);
    assert!(o.counters["policy.navarro.fault.reservation_dissolved"] >= 1, "{:?}", o.counters);
}

#[test]
fn strided_touches_into_scattered_free_memory_preempt_on_every_fault() {
    // Every free frame lies alone inside another process's reservations (all but one 8KB page
    // of each 64KB written). A base page then comes from the lists, one level of one
    // reservation at a time (§A.2.4), not from dissolving a whole reservation, whose 63 other
    // frames would serve the next faults without a preemption.
    use superpager_core::experiment::{strided_preemption, FreeMemory};
    for policy in ["navarro", "navarro:retry_smaller=true"] {
        let m = Machine::load("alpha21264").unwrap();
        let o = strided_preemption(m, policy, Bytes(64 << 20), 8, FreeMemory::Scattered, 1 << 20, 300, true).unwrap();
        assert_eq!(o.faults, 300);
        assert_eq!(o.faults_preempting, 300, "{policy}: {} dissolved whole", o.dissolved_for_frames);
        assert_eq!(o.dissolved_for_frames, 0, "{policy}");
        assert_eq!(o.reservations, 0, "{policy}: no extent of any superpage size is free");
        // The first fault breaks a 4MB reservation down to a lone frame (three levels).
        assert!(o.preemptions >= o.faults + 2, "{policy}: {}", o.preemptions);
    }
}

#[test]
fn strided_touches_into_whole_free_extents_preempt_on_at_most_one_fault_in_f_minus_1() {
    // A break keeps one piece reserved, takes one and frees the other F-2 (Alpha: F = 8), which
    // serve the next requests of that size: at most 1 fault in 7 preempts.
    use superpager_core::experiment::{strided_preemption, FreeMemory};
    for free in [1, 2] {
        let m = Machine::load("alpha21264").unwrap();
        let o = strided_preemption(m, "navarro:retry_smaller=true", Bytes(64 << 20), free, FreeMemory::Extents, 1 << 20, 400, true).unwrap();
        assert_eq!(o.faults, 400);
        assert!(o.faults_preempting > 0 && o.faults_preempting * 7 <= o.faults, "{free}: {} of {}", o.faults_preempting, o.faults);
    }
}

#[test]
fn promote_at_promotes_the_smallest_size_once_k_pages_are_there() {
    // neoverse-n1: 64KB contiguous-bit pages of 16 base pages. Four of a 64KB region's pages
    // touched: the default waits for all 16; promote_at=4 zeroes the other 12 and maps 64KB
    // (the 2MB level keeps its full-population rule).
    for (pol, size, zeroed) in [("navarro", 0, 0), ("navarro:promote_at=4", 1, 12), ("navarro:promote_at=5", 0, 0)] {
        let mut e = engine("neoverse-n1", pol, 256 << 20);
        setup(&mut e, 4 << 20);
        run(&mut e, vec![], (0..4).map(|i| BASE + i * 4096));
        let pi = e.os.proc_index(1);
        assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, size, "{pol}");
        assert_eq!(counter(&mut e, "policy.navarro.prezeroed_pages"), zeroed, "{pol}");
    }
    let sizes = Machine::load("neoverse-n1").unwrap().page_sizes;
    for (spec, want) in [("navarro:promote_at=0", "from 1 to 16 (base pages in a 64KiB page)"), ("navarro:promote_at=17", "promote_at=17")] {
        let e = policy::build(spec, &sizes).err().unwrap_or_else(|| panic!("{spec} accepted")).to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{spec}: {e}");
    }
}

#[test]
fn promote_false_keeps_the_reservations_contiguity_in_base_pages() {
    // Every page of a 4MB region touched in a scattered order: navarro promotes it; with
    // promote=false every page stays a base page, yet each sits at its offset in a reservation,
    // so all of them lie in coalescible groups (what AMD's coalescing can use).
    for (pol, promoted) in [("navarro", true), ("navarro:promote=false", false)] {
        let mut e = engine("zen3", pol, 256 << 20);
        setup(&mut e, 4 << 20);
        run(&mut e, vec![], (0..1024u64).map(|i| BASE + (i * 389 % 1024) * 4096));
        let pi = e.os.proc_index(1);
        let c = e.os.contiguity_of(pi);
        if promoted {
            assert!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx > 0, "{pol}");
            assert_eq!(counter(&mut e, "policy.navarro.promote_skipped.promotion_off"), 0);
        } else {
            assert_eq!(e.os.procs[pi].pt.lookup(BASE).unwrap().size_idx, 0, "{pol}");
            assert_eq!(c.base_pages, 1024);
            assert_eq!(c.grouped, [1024, 1024, 1024], "{pol}: every page in aligned contiguous groups");
            assert_eq!(counter(&mut e, "policy.navarro.promote_skipped.promotion_off"), 1024);
        }
    }
}

#[test]
fn speculate_reserves_past_a_small_anonymous_mapping() {
    // A 64KB anonymous mapping in the middle of a 2MB region, touched in a scattered order. The
    // paper's preferred size is capped by the object, so no reservation covers it and the buddy
    // allocator places its pages; speculate=true reserves the 2MB extent around it (FreeBSD's
    // "speculate that the object may grow"), so its 16 pages sit at their offsets in it: all in
    // coalescible groups, and counted as one speculative reservation.
    let start = BASE + (1 << 20);
    for (pol, reserved, grouped) in [("navarro:promote=false", 0, [0, 0, 0]), ("navarro:promote=false,speculate=true", 1, [16, 16, 16])] {
        let mut e = engine("zen3", pol, 256 << 20);
        let map = Event::Mmap { addr: start, len: 64 << 10, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 };
        run(&mut e, vec![Event::Context { pid: 1, tid: 1 }, map], (0..16u64).map(|i| start + (i * 7 % 16) * 4096));
        let pi = e.os.proc_index(1);
        let c = e.os.contiguity_of(pi);
        assert_eq!(c.base_pages, 16, "{pol}");
        assert_eq!(counter(&mut e, "policy.navarro.reserve.2MiB"), reserved, "{pol}");
        if reserved > 0 {
            assert_eq!(counter(&mut e, "policy.navarro.reserve_speculative"), 1, "{pol}");
        }
        assert_eq!(c.grouped, grouped, "{pol}");
    }
}
