//! Every record written to an .spt file reads back the same, across chunk boundaries.
mod common;
use common::*;
use superpager_core::trace::gen::Rng;
use superpager_core::trace::*;

fn sample_records(n: usize, seed: u64) -> Vec<Rec> {
    let mut rng = Rng::new(seed);
    let mut v = vec![Rec::E(Event::Context { pid: 7, tid: 8 })];
    for i in 0..n {
        if i % 97 == 0 {
            v.push(Rec::E(match rng.below(6) {
                0 => Event::Mmap { addr: rng.next_u64() >> 20 << 12, len: 1 << 21, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 },
                1 => Event::Brk { addr: rng.next_u64() >> 16 },
                2 => Event::FileOpen { fd: 3, path: format!("/data/file{i}"), size: rng.below(1 << 30) },
                3 => Event::Insns { count: rng.below(100_000) },
                4 => Event::Context { pid: 7 + rng.below(3) as u32, tid: 1 },
                _ => Event::Exit { code: -(rng.below(3) as i32) },
            }));
        }
        let kind = AccessKind::from_bits(rng.below(4) as u8);
        let size = [1u8, 2, 4, 8, 16, 3, 200][rng.below(7) as usize];
        v.push(Rec::A(Access { addr: rng.next_u64() >> rng.below(40), count: 1 + (rng.below(10) == 0) as u32 * 5, kind, size }));
    }
    v
}

fn same(a: &[Rec], b: &[Rec]) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        match (x, y) {
            (Rec::A(p), Rec::A(q)) => assert_eq!(p, q, "record {i}"),
            (Rec::E(p), Rec::E(q)) => assert_eq!(p, q, "record {i}"),
            _ => panic!("record {i}: kinds differ"),
        }
    }
}

#[test]
fn uncollapsed_records_roundtrip_over_many_chunks() {
    let recs = sample_records(20_000, 1);
    let p = tmp("roundtrip.spt");
    write(&p, &recs, 333, false);
    // The writer repeats the context at the top of every chunk; the reader drops the repeats,
    // so only genuine switches come back.
    let filtered: Vec<Rec> = read_all(&p).unwrap();
    same(&recs, &filtered);
}

#[test]
fn collapsing_keeps_every_access_and_its_page() {
    let p = tmp("collapse.spt");
    let recs: Vec<Rec> = (0..10_000u64)
        .map(|i| Rec::A(Access::new(0x1000_0000 + (i / 50) * 4096 + (i % 50) * 8, if i % 2 == 0 { AccessKind::Load } else { AccessKind::Store }, 8)))
        .collect();
    write(&p, &recs, 1 << 20, true);
    let back = read_all(&p).unwrap();
    assert_eq!(back.len(), 200, "50 accesses per page collapse into one record");
    let mut total = 0;
    for (i, r) in back.iter().enumerate() {
        let Rec::A(a) = r else { panic!() };
        assert_eq!(a.addr >> 12, (0x1000_0000u64 >> 12) + i as u64);
        assert_eq!(a.kind, AccessKind::Modify);
        total += a.count;
    }
    assert_eq!(total, 10_000);
}

#[test]
fn fetches_and_data_keep_separate_runs() {
    let p = tmp("streams.spt");
    let recs = vec![
        Rec::A(Access::new(0x400000, AccessKind::Fetch, 4)),
        Rec::A(Access::new(0x400004, AccessKind::Load, 8)),
        Rec::A(Access::new(0x400008, AccessKind::Fetch, 4)),
    ];
    write(&p, &recs, 100, true);
    assert_eq!(read_all(&p).unwrap().len(), 3);
}
