//! Format version 2's second data predictor: interleaved streams cost a short delta each,
//! records read back exactly, and version-1 files still read.
mod common;
use common::*;
use superpager_core::trace::gen::Rng;
use superpager_core::trace::*;

/// A sequential sweep interleaved with random probes of a far-away table (pagerank's shape).
fn two_streams(n: u64) -> Vec<Rec> {
    let mut rng = Rng::new(5);
    let mut v = vec![Rec::E(Event::Context { pid: 1, tid: 1 })];
    for i in 0..n {
        v.push(Rec::A(Access::new(0x5555_0000_0000 + i * 4, AccessKind::Load, 4)));
        v.push(Rec::A(Access::new(0x7f00_0000_0000 + (rng.below(1 << 25) << 3), AccessKind::Load, 8)));
    }
    v
}

#[test]
fn interleaved_streams_read_back_exactly() {
    let recs = two_streams(50_000);
    let p = tmp("pred2.spt");
    write(&p, &recs, 7_001, false);
    assert_eq!(read_all(&p).unwrap(), recs);
}

#[test]
fn a_second_predictor_keeps_the_sweep_cheap() {
    // Raw payload size (before zstd) per record: with one data predictor every record would
    // carry a ~6-byte delta between the two regions; with two, the sweep's records carry 1.
    let recs = two_streams(50_000);
    let p = tmp("pred2size.spt");
    write(&p, &recs, 1 << 20, false);
    let bytes = std::fs::metadata(&p).unwrap().len() as f64;
    let per_access = bytes / 100_000.0;
    assert!(per_access < 2.6, "{per_access:.2} bytes per access");
}

#[test]
fn version_1_files_still_read() {
    // A file written as version 2 without any second-predictor record is a valid version-1
    // file once its magic says so (version 2 only adds meaning to a bit version 1 kept 0).
    let recs =
        vec![Rec::E(Event::Context { pid: 1, tid: 1 }), Rec::A(Access::new(0x1000, AccessKind::Load, 8)), Rec::A(Access::new(0x1008, AccessKind::Store, 8))];
    let p = tmp("v1.spt");
    write(&p, &recs, 100, false);
    let mut bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[..8], spt::FILE_MAGIC);
    bytes[..8].copy_from_slice(spt::FILE_MAGIC_V1);
    std::fs::write(&p, &bytes).unwrap();
    assert_eq!(read_all(&p).unwrap(), recs);
}
