//! Navarro et al.'s fragmentation control (§A.2.9-10 of the notes): page-cache pages reclaimed
//! into the buddy lists with their contents (cache frames), reused when referenced again or
//! lost when their frame is allocated; the contiguity-aware daemon; wired-page clustering. The
//! validator runs after each step.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::os::frames::FrameKind;
use superpager_core::os::prelude::Prelude;
use superpager_core::os::OsFeatures;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::{Bytes, Order};

const PAGE: u64 = 4096;
const BASE: u64 = 0x4000_0000;

fn engine(to_cache: bool) -> Engine {
    let m = Machine::load("skylake").unwrap();
    let p = policy::build("base", &m.page_sizes).unwrap();
    let mut e = Engine::new(m, p, EngineConfig { memory: Bytes(64 << 20), validate: true, ..Default::default() }).unwrap();
    e.os.files.cache.to_cache = to_cache;
    e
}

fn reclaim(e: &mut Engine, n: usize) -> usize {
    let os = &mut e.os;
    os.files.cache.reclaim(&mut os.phys, &os.files.mappers, n)
}

#[test]
fn reclaimed_pages_keep_their_contents_in_the_buddy_lists() {
    let mut e = engine(true);
    let f = e.os.files.cache.create();
    for i in 0..64 {
        e.os.read_file(f, i * PAGE, PAGE).unwrap();
    }
    let free0 = e.os.phys.free_frames();
    assert_eq!(reclaim(&mut e, 64), 64);
    assert_eq!(e.os.phys.free_frames(), free0 + 64, "cache frames count as free");
    assert_eq!(e.os.phys.cache_frames(), 64);
    assert_eq!(e.os.phys.frames_by_kind()[FrameKind::File as usize], 0);
    assert_eq!(e.os.files.cache.cache_pages(&e.os.phys), 64);
    e.os.validate().unwrap();
    let misses = e.os.files.cache.counters.misses;
    for i in 0..64 {
        e.os.read_file(f, i * PAGE, PAGE).unwrap();
    }
    assert_eq!(e.os.files.cache.counters.misses, misses, "no page read again from disk");
    assert_eq!(e.os.files.cache.counters.cache_reactivated, 64);
    assert_eq!(e.os.phys.cache_frames(), 0);
    e.os.validate().unwrap();
}

#[test]
fn without_cache_mode_reclaimed_pages_are_dropped() {
    let mut e = engine(false);
    let f = e.os.files.cache.create();
    for i in 0..8 {
        e.os.read_file(f, i * PAGE, PAGE).unwrap();
    }
    assert_eq!(reclaim(&mut e, 8), 8);
    assert_eq!(e.os.phys.cache_frames(), 0);
    let misses = e.os.files.cache.counters.misses;
    e.os.read_file(f, 0, 8 * PAGE).unwrap();
    assert_eq!(e.os.files.cache.counters.misses, misses + 8);
    e.os.validate().unwrap();
}

#[test]
fn allocating_a_cache_frame_loses_its_contents() {
    let mut e = engine(true);
    let f = e.os.files.cache.create();
    e.os.read_file(f, 0, 2 * PAGE).unwrap();
    let x = e.os.files.cache.frame_of(f, 0).unwrap();
    assert_eq!(reclaim(&mut e, 2), 2);
    assert!(e.os.phys.alloc_at(x, 0, FrameKind::Anon));
    assert_eq!((e.os.phys.counters.cache_lost, e.os.phys.cache_frames()), (1, 1));
    e.os.phys.free(superpager_core::units::Pfn(x), Order(0));
    e.os.validate().unwrap();
    let misses = e.os.files.cache.counters.misses;
    e.os.read_file(f, 0, 2 * PAGE).unwrap();
    assert_eq!(e.os.files.cache.counters.misses, misses + 1, "page 0 is gone, page 1 is still there");
    assert_eq!(e.os.files.cache.counters.cache_reactivated, 1);
    e.os.validate().unwrap();
}

#[test]
fn a_referenced_cache_page_inside_a_reservation_preempts_it() {
    let mut e = engine(true);
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    c.events.push((0, Event::Mmap { addr: BASE, len: 4 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
    e.run_chunk(&c).unwrap();
    let pi = e.os.proc_index(1);
    let f = e.os.files.cache.create();
    e.os.read_file(f, 0, PAGE).unwrap();
    let x = e.os.files.cache.frame_of(f, 0).unwrap();
    assert_eq!(reclaim(&mut e, 1), 1);
    let id = e.os.reserve_and_map(pi, BASE + 77 * PAGE, 1, 1, &mut e.mmu).unwrap();
    let r = e.os.phys.reservs.get(id).unwrap().clone();
    assert!(r.pfn <= x && x < r.pfn + 512 && x != r.pfn + 77, "the extent holds the cache frame, unpopulated");
    assert_eq!(e.os.phys.cache_frames(), 1, "a reservation keeps the contents it has not populated");
    e.os.validate().unwrap();
    e.os.read_file(f, 0, PAGE).unwrap();
    assert_eq!(e.os.files.cache.counters.cache_reactivated, 1);
    assert_eq!(e.os.phys.counters.cache_reclaimed_preempting, 1);
    assert!(e.os.phys.reservs.get(id).is_none(), "the reservation was dissolved");
    assert_eq!(e.os.phys.kind_of(x), FrameKind::File);
    e.os.validate().unwrap();
}

/// 64MB of 4KB frames: a 32MB file's pages, then wired frames everywhere else. The file's
/// first 2048 pages are active (referenced again), the others inactive. Returns the engine
/// and, per 2MB extent of file pages and free frames, whether all its file pages are inactive.
fn fragmented() -> (Engine, Vec<bool>) {
    let mut e = engine(true);
    let f = e.os.files.cache.create();
    e.os.read_file(f, 0, 8192 * PAGE).unwrap();
    e.os.files.cache.deactivate(f);
    e.os.read_file(f, 0, 2048 * PAGE).unwrap(); // referenced again: active
    assert_eq!(e.os.files.cache.counters.evicted, 0, "nothing reclaimed yet");
    while let Some(p) = e.os.phys.alloc(Order(0), FrameKind::Wired) {
        e.os.wired.place(p.0);
    }
    e.os.validate().unwrap();
    let mut extents = Vec::new();
    for ext in 0..e.os.phys.total_frames() / 512 {
        let frames: Vec<_> = (ext * 512..ext * 512 + 512).map(|p| (e.os.phys.kind_of(p), e.os.phys.owner(p).as_file())).collect();
        let file = |(k, o): &(FrameKind, Option<(u32, u64)>)| *k == FrameKind::File && o.is_some();
        if frames.iter().any(file) && frames.iter().all(|x| file(x) || x.0 == FrameKind::Free) {
            extents.push(frames.iter().filter(|x| file(x)).all(|(_, o)| o.unwrap().1 >= 2048));
        }
    }
    (e, extents)
}

fn free_in_blocks_of(e: &Engine, order: u8) -> u64 {
    (order..=e.os.phys.max_order()).map(|o| e.os.phys.free_blocks(o) << o).sum()
}

#[test]
fn the_daemon_frees_extents_of_inactive_pages_only() {
    let (mut e, extents) = fragmented();
    let inactive = extents.iter().filter(|&&x| x).count() as u64;
    assert!(extents.len() >= 14 && inactive >= 10, "layout: {extents:?}");
    assert_eq!(free_in_blocks_of(&e, 9), 0);
    assert_eq!(e.os.recover_contiguity(9, 3), 3);
    let moved = e.os.daemon.pages_to_cache;
    assert!(moved > 0 && moved <= 3 * 512, "only pages of the extents it wanted ({moved})");
    assert_eq!(free_in_blocks_of(&e, 9), 3 * 512);
    e.os.validate().unwrap();
    // The three it freed count as free now; the rest it recovers.
    assert_eq!(e.os.recover_contiguity(9, 100), inactive);
    assert_eq!(e.os.daemon.already_free, 3);
    assert_eq!(e.os.daemon.goal_unmet, 1);
    assert_eq!(e.os.daemon.recovered[9], inactive);
    assert_eq!(free_in_blocks_of(&e, 9), inactive * 512);
    let f = 0;
    for i in 0..2048u64 {
        assert!(e.os.files.cache.frame_of(f, i).is_some(), "active pages stay");
    }
    e.os.validate().unwrap();
}

fn extents_with_wired(e: &Engine) -> usize {
    let mut ext: Vec<u64> = e.os.wired.frames.iter().map(|f| f / 512).collect();
    ext.sort_unstable();
    ext.dedup();
    ext.len()
}

#[test]
fn clustered_wired_pages_pin_few_extents() {
    let wired = Prelude::Wired { count: 600, below: u64::MAX };
    let mut scattered = engine(false);
    wired.apply(&mut scattered.os, 7, &mut |_| {}).unwrap();
    let mut clustered = engine(false);
    clustered.os.configure(OsFeatures { wired_clustering: true, ..OsFeatures::default() }, 1).unwrap();
    wired.apply(&mut clustered.os, 7, &mut |_| {}).unwrap();
    assert_eq!(clustered.os.wired.frames.len(), 600);
    assert_eq!(extents_with_wired(&clustered), 2, "600 frames in two 2MB pools");
    assert_eq!(clustered.os.daemon.wired_pools, 2);
    assert!(extents_with_wired(&scattered) >= 30, "scattered: nearly every one of the 32 extents");
    clustered.os.validate().unwrap();
    scattered.os.validate().unwrap();
}
