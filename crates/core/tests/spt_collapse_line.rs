//! The writer's run collapse at a cache line (`set_collapse_shift(LINE_COLLAPSE_SHIFT)`,
//! `capture --collapse line`): consecutive accesses join only while they stay in one 64-byte
//! line, so every line a run touches keeps a record; at a page (the default) they join while
//! they stay in one 4KiB page.

mod common;
use common::*;
use superpager_core::trace::spt::SptWriter;
use superpager_core::trace::{Access, AccessKind, Provenance, RecordSink, COLLAPSE_SHIFT, LINE_COLLAPSE_SHIFT};

/// Eight-byte loads: two in line 0x1000, two in line 0x1040, one back in line 0x1000, a store
/// in line 0x1040, then one in the next page.
fn accesses() -> Vec<Access> {
    let l = |a| Access::new(a, AccessKind::Load, 8);
    vec![l(0x1000), l(0x1008), l(0x1040), l(0x1078), l(0x1010), Access::new(0x1048, AccessKind::Store, 8), l(0x2000)]
}

fn written(shift: u32) -> Vec<(u64, u32, AccessKind)> {
    let p = tmp(&format!("collapse-{shift}.spt"));
    let mut w = SptWriter::create(&p, &Provenance::new()).unwrap();
    w.set_collapse_shift(shift);
    for a in accesses() {
        w.access(a).unwrap();
    }
    w.finish().unwrap();
    read_all(&p)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            Rec::A(a) => Some((a.addr, a.count, a.kind)),
            Rec::E(_) => None,
        })
        .collect()
}

#[test]
fn a_line_collapse_keeps_a_record_for_each_line_in_order() {
    use AccessKind::*;
    assert_eq!(written(LINE_COLLAPSE_SHIFT), vec![(0x1000, 2, Load), (0x1040, 2, Load), (0x1010, 1, Load), (0x1048, 1, Store), (0x2000, 1, Load)]);
}

#[test]
fn a_page_collapse_joins_the_lines_of_a_page_into_its_first_access() {
    use AccessKind::*;
    assert_eq!(written(COLLAPSE_SHIFT), vec![(0x1000, 6, Modify), (0x2000, 1, Load)]);
}

#[test]
fn both_collapses_keep_every_access() {
    let total = |v: Vec<(u64, u32, AccessKind)>| v.iter().map(|r| r.1 as u64).sum::<u64>();
    assert_eq!(total(written(LINE_COLLAPSE_SHIFT)), 7);
    assert_eq!(total(written(COLLAPSE_SHIFT)), 7);
}

#[test]
#[should_panic(expected = "outside 64B..4KiB")]
fn a_block_larger_than_a_page_is_refused() {
    let p = tmp("collapse-13.spt");
    let mut w = SptWriter::create(&p, &Provenance::new()).unwrap();
    w.set_collapse_shift(13);
}
