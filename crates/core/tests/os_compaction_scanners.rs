//! Linux's compaction (os/compact.rs), two behaviours of its scanners:
//! - the free targets a run isolated but did not use go back, and the next run's free scanner
//!   starts again at the highest of them (Linux's compact_zone after release_freepages), so a
//!   pageblock's remaining free frames are not skipped;
//! - a huge page that finds no free block of its size is split and its base pages moved
//!   (Linux's migrate_pages on -ENOMEM), counted as a demotion by compaction.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::os::compact::CompactResult;
use superpager_core::os::frames::FrameKind;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const BASE: u64 = 0x4000_0000;
const PAGE: u64 = 4096;
/// Frames per 2MB pageblock (skylake: 4KB base pages, Linux's pageblock_order 9).
const PB: u64 = 512;

/// skylake with 1GiB of memory (its least: one page of its largest size); the validator runs
/// at the end of each test rather than after every event, over 262,144 frames.
fn engine(pol: &str) -> Engine {
    let m = Machine::load("skylake").unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(1 << 30), ..Default::default() }).unwrap()
}

fn run(e: &mut Engine, events: Vec<Event>, stores: impl Iterator<Item = u64>) {
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    for ev in events {
        c.events.push((0, ev));
    }
    for va in stores {
        c.accesses.push(Access::new(va, AccessKind::Store, 8));
    }
    e.run_chunk(&c).unwrap();
}

fn mmap(len: u64) -> Event {
    Event::Mmap { addr: BASE, len, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }
}

fn pfn_of(e: &Engine, va: u64) -> u64 {
    let t = e.os.procs[0].pt.lookup(va).expect("mapped");
    t.pfn.0 + ((va - t.start) / PAGE)
}

/// Pin a free frame (a wired kernel page): compaction cannot move it or use it.
fn pin(e: &mut Engine, f: u64) {
    assert!(e.os.phys.alloc_at(f, 0, FrameKind::Wired));
    e.os.wired.place(f);
}

fn all_free(e: &Engine, frames: std::ops::Range<u64>) -> bool {
    frames.into_iter().all(|f| e.os.phys.kind_of(f) == FrameKind::Free)
}

#[test]
fn the_free_scanner_returns_to_the_targets_a_run_left_unused() {
    let mut e = engine("base");
    let pages = 2048;
    run(&mut e, vec![mmap(pages * PAGE)], (0..pages).map(|i| BASE + i * PAGE));
    // A pageblock filled by the program, and a free one above it.
    let pb_of = |e: &Engine, i: u64| pfn_of(e, BASE + i * PAGE) / PB;
    let s = (0..e.os.phys.total_frames() / PB).find(|&pb| (0..pages).filter(|&i| pb_of(&e, i) == pb).count() as u64 == PB);
    let s = s.expect("a pageblock of the program's pages");
    let t = (s + 1..e.os.phys.total_frames() / PB).rev().find(|&pb| all_free(&e, pb * PB..(pb + 1) * PB)).expect("a free pageblock above it");
    // Three quarters of s unmapped: 128 pages left, 64 in each half.
    let unmaps = (0..pages)
        .filter(|&i| pb_of(&e, i) == s && !pfn_of(&e, BASE + i * PAGE).is_multiple_of(4))
        .map(|i| Event::Munmap { addr: BASE + i * PAGE, len: PAGE })
        .collect();
    run(&mut e, unmaps, std::iter::empty());
    // Free frames only in s and t, and the last frame of each half of t pinned, so that no 1MB
    // block is free.
    for f in 0..e.os.phys.total_frames() {
        if (f / PB != s && f / PB != t || f % (PB / 2) == PB / 2 - 1 && f / PB == t) && e.os.phys.kind_of(f) == FrameKind::Free {
            pin(&mut e, f);
        }
    }
    // Compaction for a 1MB block (order 8: half a pageblock). The first run moves the 64 pages
    // of s's lower half into t; 446 of t's 510 targets are left over and go back.
    let half = PB / 2;
    assert_eq!(e.os.compact(8, &mut e.mmu), CompactResult::Success);
    assert_eq!(e.os.compaction.pages_migrated, 64);
    assert!(all_free(&e, s * PB..s * PB + half));
    for f in s * PB..s * PB + half {
        pin(&mut e, f);
    }
    // The second run needs 64 of them for s's upper half: it finds them only if its free
    // scanner starts at t again rather than below it, where nothing is free.
    assert_eq!(e.os.compact(8, &mut e.mmu), CompactResult::Success);
    assert_eq!(e.os.compaction.pages_migrated, 128);
    assert!(all_free(&e, s * PB + half..(s + 1) * PB));
    e.os.validate().unwrap();
}

#[test]
fn a_huge_page_without_a_free_block_of_its_size_is_split_and_moved_as_base_pages() {
    // One 2MB page at fault (THP) in the upper half of a 4MB block whose lower half is free,
    // then every free 2MB block elsewhere broken up: compaction for a 4MB block must move the
    // page out, and can only do so 4KB at a time. (The lower half is held while the page is
    // placed, so that the page cannot go there.)
    let mut e = engine("linux-thp:enabled=always,khugepaged=0");
    let lower = 2 * 2 * PB;
    assert!(e.os.phys.alloc_at(lower, 9, FrameKind::Wired));
    run(&mut e, vec![mmap(2 << 20)], std::iter::once(BASE));
    let huge = pfn_of(&e, BASE);
    assert_eq!(e.os.procs[0].pt.lookup(BASE).unwrap().size_idx, 1);
    assert_eq!(huge, lower + PB, "the THP went to the next free 2MB block");
    e.os.phys.free(superpager_core::units::Pfn(lower), superpager_core::units::Order(9));
    let block = huge / (2 * PB);
    for f in 0..e.os.phys.total_frames() {
        if f / (2 * PB) != block && f.is_multiple_of(2) && e.os.phys.kind_of(f) == FrameKind::Free {
            pin(&mut e, f);
        }
    }
    let before = e.os.compaction.pages_migrated;
    assert_eq!(e.os.compact(10, &mut e.mmu), CompactResult::Success);
    assert_eq!(e.os.compaction.splits, 1);
    assert_eq!(e.os.compaction.pages_migrated - before, 512, "its 512 base pages, one by one");
    // Still mapped, now by 4KB pages, none of them in the old block.
    let t = e.os.procs[0].pt.lookup(BASE).unwrap();
    assert_eq!(t.size_idx, 0);
    assert_ne!(pfn_of(&e, BASE) / (2 * PB), block);
    let r = e.results();
    assert_eq!(r.counters["compact.split"], 1);
    assert_eq!(r.counters["demote.compaction.2MiB"], 1);
    e.os.validate().unwrap();
}
