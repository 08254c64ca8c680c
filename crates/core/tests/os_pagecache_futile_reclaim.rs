//! Page-cache reclaim skips a scan that would free nothing (os/pagecache.rs, `futile_at`): once
//! a scan found every cached page mapped, the next one returns at once, until a page is
//! unmapped or the cache changes; then it frees what it would have freed without the memo.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::os::frames::Owner;
use superpager_core::policy;
use superpager_core::units::Bytes;

const PAGE: u64 = 4096;

fn engine() -> Engine {
    let m = Machine::load("skylake").unwrap();
    let p = policy::build("base", &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(64 << 20), ..Default::default() }).unwrap()
}

fn reclaim(e: &mut Engine, n: usize) -> usize {
    let os = &mut e.os;
    os.files.cache.reclaim(&mut os.phys, &os.files.mappers, n)
}

/// Four cached pages of one file, each listed as mapped by a process (as a file mapping would).
fn mapped_pages(e: &mut Engine) -> (u32, Vec<(u64, Owner)>) {
    let f = e.os.files.cache.create();
    let mut maps = Vec::new();
    for i in 0..4 {
        e.os.read_file(f, i * PAGE, PAGE).unwrap();
        let pfn = e.os.files.cache.frame_of(f, i).unwrap();
        let m = Owner::anon(0, 0x1000 + i);
        e.os.files.mappers.add(pfn, m);
        maps.push((pfn, m));
    }
    (f, maps)
}

#[test]
fn unmapping_a_page_after_a_futile_scan_lets_the_next_free_it() {
    let mut e = engine();
    let (f, maps) = mapped_pages(&mut e);
    assert_eq!(reclaim(&mut e, 32), 0, "every page is mapped");
    assert_eq!(reclaim(&mut e, 32), 0, "nothing changed: still nothing to free");
    let (pfn, m) = maps[2];
    e.os.files.mappers.unlist(pfn, m);
    assert_eq!(reclaim(&mut e, 32), 1, "the unmapped page goes");
    assert_eq!(e.os.files.cache.frame_of(f, 2), None);
    assert!((0..4).filter(|&i| i != 2).all(|i| e.os.files.cache.frame_of(f, i).is_some()), "the mapped ones stay");
    assert_eq!(e.os.files.cache.counters.evicted, 1);
}

#[test]
fn a_page_read_after_a_futile_scan_is_free_to_go() {
    let mut e = engine();
    let (f, _) = mapped_pages(&mut e);
    assert_eq!(reclaim(&mut e, 32), 0);
    // A fresh read: unreferenced and unmapped, the first page the next scan may take.
    e.os.read_file(f, 9 * PAGE, PAGE).unwrap();
    assert_eq!(reclaim(&mut e, 32), 1);
    assert_eq!(e.os.files.cache.frame_of(f, 9), None);
}

#[test]
fn a_scan_asked_for_nothing_is_not_taken_as_futile() {
    let mut e = engine();
    let f = e.os.files.cache.create();
    e.os.read_file(f, 0, PAGE).unwrap();
    assert_eq!(reclaim(&mut e, 0), 0, "asked for none");
    assert_eq!(reclaim(&mut e, 1), 1, "the unmapped page is still there to free");
}

#[test]
fn a_page_read_by_the_access_that_reclaimed_is_free_to_go() {
    // A read below its reserve reclaims before it inserts: that reclaim is futile (every page
    // mapped), and the page the read then adds must not be hidden by it from the next scan.
    let mut e = engine();
    let (f, _) = mapped_pages(&mut e);
    let os = &mut e.os;
    assert!(os.files.cache.access_with(&mut os.phys, &os.files.mappers, f, 9, false, u64::MAX - 1));
    assert_eq!(os.files.cache.counters.evicted, 0, "the reclaim inside the read found nothing");
    assert_eq!(reclaim(&mut e, 32), 1, "the page read is unmapped and unreferenced");
    assert_eq!(e.os.files.cache.frame_of(f, 9), None);
}
