//! Per-region counters (Trident's per-1GB-region statistics): free and pinned frames of each
//! aligned extent of the largest block, kept exact by every buddy operation.
use superpager_core::os::frames::{FrameKind, PhysMem};
use superpager_core::units::Order;

fn totals(m: &PhysMem) -> (u64, u64) {
    ((0..m.regions()).map(|r| m.region_free(r)).sum(), (0..m.regions()).map(|r| m.region_unmovable(r)).sum())
}

#[test]
fn regions_count_free_and_pinned_frames_through_every_operation() {
    // Four regions of 2^10 frames, pageblocks of 2^4.
    let mut m = PhysMem::new(4 << 10, 10, 4).unwrap();
    assert_eq!(m.regions(), 4);
    assert!((0..4).all(|r| m.region_free(r) == 1 << 10 && m.region_unmovable(r) == 0));
    let big = m.alloc(Order(10), FrameKind::Anon).unwrap();
    assert_eq!(m.region_free(m.region_of(big.0)), 0);
    let mut pinned = Vec::new();
    for kind in [FrameKind::Wired, FrameKind::PageTable, FrameKind::Anon, FrameKind::File, FrameKind::Reserved] {
        let p = m.alloc(Order(0), kind).unwrap();
        pinned.push((p, kind));
    }
    let (free, unmovable) = totals(&m);
    assert_eq!(free, m.free_frames());
    assert_eq!(unmovable, 3, "wired, page-table and reserved frames pin their region; anon and file do not");
    // A pinned frame becoming movable, and back.
    let (wired, _) = pinned[0];
    m.set_kind(wired, FrameKind::Anon);
    assert_eq!(totals(&m).1, 2);
    m.set_kind(wired, FrameKind::Wired);
    assert_eq!(totals(&m).1, 3);
    m.validate().unwrap();
    // Frames reserved at boot are never freed (FrameKind::Reserved; a debug assertion holds
    // `free` to that): the reserved frame stays, pinning its region.
    for (p, kind) in pinned {
        if kind != FrameKind::Reserved {
            m.free(p, Order(0));
        }
    }
    m.free(big, Order(10));
    assert_eq!(totals(&m), ((4 << 10) - 1, 1));
    m.validate().unwrap();
}

#[test]
fn a_short_last_region_is_counted_too() {
    let m = PhysMem::new((2 << 10) + 300, 10, 4).unwrap();
    assert_eq!(m.regions(), 3);
    assert_eq!(m.region_free(2), 300);
    m.validate().unwrap();
}
