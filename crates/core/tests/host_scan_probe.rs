//! calibrate's scan probe (docs/RUNTIME_MODEL.md, "The last level's latency, read where it
//! holds the chase") is written to the calibration file whole, with the lines that pass between
//! two reads of a hot line, and a file without it has none.

use superpager_core::mmu::host::{calibrated_toml, CalibrationInput, ScanProbe};

mod common;

fn probe() -> ScanProbe {
    ScanProbe { hot: 768 << 10, region: 1 << 30, streams: 8, ns_hot: 127.14, ns_alone: 117.31 }
}

fn written(p: Option<ScanProbe>) -> toml::Value {
    let c = CalibrationInput { scan_probe: p, ..common::calibration_input() };
    toml::from_str(&calibrated_toml(&common::host_template(), &c).unwrap()).unwrap()
}

#[test]
fn the_probe_is_written_whole_with_the_lines_passing_between_two_hot_reads() {
    assert_eq!(probe().passing_lines(), 12_288 * 9, "768KiB of lines, each followed by 8 random ones");
    let v = written(Some(probe()));
    let s = &v["calibration"]["scan_probe"];
    assert_eq!(s["hot"].as_str(), Some("768KiB"));
    assert_eq!(s["region"].as_str(), Some("1GiB"));
    assert_eq!(s["streams"].as_integer(), Some(8));
    assert_eq!(s["passing_lines"].as_integer(), Some(110_592));
    assert_eq!(s["ns_hot"].as_float(), Some(127.14));
    assert_eq!(s["ns_alone"].as_float(), Some(117.31));
}

#[test]
fn a_calibration_without_the_probe_writes_none() {
    let v = written(None);
    assert!(v["calibration"].get("scan_probe").is_none());
}
