//! The TLB probe's result (`superpager calibrate`) survives the calibration file: written by
//! `calibrated_toml`, read back by `read_calibration`, and shown by the host's explanation.

use superpager_core::mmu::host::{calibrated_toml, read_calibration, CalibrationInput, TlbProbe};

const TEMPLATE: &str = r#"
name = "host"
description = "test"
page_sizes = ["4KiB", "2MiB"]
[cache]
dram_cycles = 300
[[cache.levels]]
name = "L1d"
size = "32KiB"
ways = 8
cycles = 5
[[cache.levels]]
name = "L2"
size = "1MiB"
ways = 8
cycles = 14
[cost]
clock_ghz = 2.0
"#;

fn input(probe: Option<TlbProbe>) -> CalibrationInput {
    CalibrationInput {
        cpu: "Test CPU".into(),
        date: "2026-11-28".into(),
        method: "test".into(),
        clock_ghz: 2.5,
        level_cycles: vec![4.0, 12.0],
        level_sizes: vec![String::new(), String::new()],
        dram_cycles: 500.0,
        points: vec![(1 << 20, "2m".into(), 5.0)],
        tlb_probe: probe,
    }
}

fn probe(splintered: bool) -> TlbProbe {
    TlbProbe { lines: 8192, span: 32 << 20, packed_2m_ns: 5.9, sparse_2m_ns: if splintered { 21.6 } else { 6.1 }, sparse_4k_ns: 45.5, splintered }
}

fn round_trip(p: Option<TlbProbe>) -> (Option<TlbProbe>, Vec<String>) {
    let text = calibrated_toml(TEMPLATE, &input(p)).unwrap();
    let dir = std::env::temp_dir().join(format!("sp-probe-{}-{}", std::process::id(), text.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("host.toml");
    std::fs::write(&path, &text).unwrap();
    let mut notes = Vec::new();
    let cal = read_calibration(&path, "Test CPU", &mut notes).expect("reads back");
    std::fs::remove_dir_all(&dir).unwrap();
    (cal.tlb_probe, notes)
}

#[test]
fn a_splintered_probe_is_written_and_read_back_whole() {
    let (got, notes) = round_trip(Some(probe(true)));
    assert_eq!(got, Some(probe(true)));
    assert!(notes.is_empty(), "{notes:?}");
    assert!(probe(true).summary().contains("21.6 ns a step, against 5.9 ns packed together"), "{}", probe(true).summary());
}

#[test]
fn a_probe_that_held_2mb_pages_whole_reads_back_unsplintered() {
    assert_eq!(round_trip(Some(probe(false))).0, Some(probe(false)));
}

#[test]
fn a_file_without_the_probe_has_none() {
    // Calibrations written before the probe existed, or where 2MB pages could not be had.
    assert_eq!(round_trip(None).0, None);
}
