//! The TLB and walk probes' results (`superpager calibrate`) survive the calibration file:
//! written by `calibrated_toml`, read back by `read_calibration`; the walk probe's walkers go
//! into `[cache]`.

use superpager_core::mmu::host::{calibrated_toml, read_calibration, Calibration, CalibrationInput, TlbProbe, WalkProbe, WALKERS_RULE};

mod common;
use common::CALIBRATION_TEMPLATE as TEMPLATE;

fn input(probe: Option<TlbProbe>, walk: Option<WalkProbe>) -> CalibrationInput {
    CalibrationInput { tlb_probe: probe, walk_probe: walk, ..common::calibration_input() }
}

fn probe(splintered: bool) -> TlbProbe {
    TlbProbe { lines: 8192, span: 32 << 20, packed_2m_ns: 5.9, sparse_2m_ns: if splintered { 21.6 } else { 6.1 }, sparse_4k_ns: 45.5, splintered }
}

fn read_back(text: &str) -> (Calibration, Vec<String>) {
    // One directory per call: tests run in parallel, and two files of one length (a name by
    // length once) had one test remove the other's file before it was read.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sp-probe-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("host.toml");
    std::fs::write(&path, text).unwrap();
    let mut notes = Vec::new();
    let cal = read_calibration(&path, "Test CPU", &mut notes).expect("reads back");
    std::fs::remove_dir_all(&dir).unwrap();
    (cal, notes)
}

fn round_trip(p: Option<TlbProbe>) -> (Option<TlbProbe>, Vec<String>) {
    let (cal, notes) = read_back(&calibrated_toml(TEMPLATE, &input(p, None)).unwrap());
    (cal.tlb_probe, notes)
}

fn walk(walkers: Option<u32>) -> WalkProbe {
    WalkProbe {
        footprint: 1 << 30,
        chains: vec![1, 4, 16],
        ns_4k: vec![443.7, 91.1, 20.5],
        ns_2m: vec![288.1, 63.7, 15.3],
        walkers,
        mlp: Some(14),
        walkers_rule: Some(WALKERS_RULE.to_string()),
        walk_ns: Some(155.6),
        bounds_norm: None,
        bounds_norm_errors: None,
    }
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

#[test]
fn the_walk_probe_is_read_back_and_its_walkers_replace_the_tables() {
    let text = calibrated_toml(TEMPLATE, &input(None, Some(walk(Some(16))))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["walkers"].as_integer(), Some(16), "{text}");
    assert_eq!(v["cache"]["mlp"].as_integer(), Some(14), "{text}");
    let (cal, notes) = read_back(&text);
    assert_eq!(cal.walk_probe, Some(walk(Some(16))));
    assert!(notes.is_empty(), "{notes:?}");
    // 16 of 16 chases overlapping is the probe's ceiling, not a count; 14 is a count.
    assert!(walk(None).at_ceiling(16) && !walk(None).at_ceiling(14));
    let said = walk(None).summary();
    assert!(said.contains("2MB pages 1: 288.1, 4: 63.7, 16: 15.3; what 4KB pages add 1: 155.6, 4: 27.4, 16: 5.2; one walk 155.6 ns"), "{said}");
}

#[test]
fn a_walk_probe_without_a_verdict_leaves_the_tables_walkers() {
    let text = calibrated_toml(TEMPLATE, &input(None, Some(walk(None)))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert!(v["cache"].get("walkers").is_none(), "{text}");
    assert_eq!(v["cache"]["mlp"].as_integer(), Some(14), "{text}");
    assert_eq!(read_back(&text).0.walk_probe, Some(walk(None)));
}

#[test]
fn a_walk_probe_of_the_first_version_without_mlp_reads_back() {
    let text = calibrated_toml(TEMPLATE, &input(None, Some(WalkProbe { mlp: None, ..walk(Some(32)) }))).unwrap();
    assert!(!text.contains("mlp"), "{text}");
    assert_eq!(read_back(&text).0.walk_probe, Some(WalkProbe { mlp: None, ..walk(Some(32)) }));
}

#[test]
fn walkers_counted_by_the_earlier_rule_are_not_taken() {
    // Files written before the thirty-third session counted walks overlapping as the additive
    // model read them; the overlap model reads the chases differently, so host keeps the table's.
    let old = WalkProbe { walkers_rule: None, ..walk(Some(32)) };
    let text = calibrated_toml(TEMPLATE, &input(None, Some(old.clone()))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert!(v["cache"].get("walkers").is_none(), "{text}");
    assert_eq!(v["cache"]["mlp"].as_integer(), Some(14), "{text}");
    let back = read_back(&text).0.walk_probe.unwrap();
    assert_eq!((back.walkers, back.walkers_taken()), (Some(32), None));
    assert_eq!(walk(Some(32)).walkers_taken(), Some(32));
    // Nor those of the thirty-third session's rule, which timed a walk as what 4KB pages add
    // to a load with one chase: on a host that splinters 2MB pages, less than a walk.
    let busiest = WalkProbe { walkers_rule: Some("busiest".into()), walk_ns: None, ..walk(Some(13)) };
    let text = calibrated_toml(TEMPLATE, &input(None, Some(busiest))).unwrap();
    let back = read_back(&text).0.walk_probe.unwrap();
    assert_eq!((back.walkers, back.walkers_taken(), back.walk_ns), (Some(13), None, None));
}

#[test]
fn the_bounds_norm_fitted_to_the_walk_probe_goes_into_the_cache_and_reads_back() {
    // calibrate's fit (model/calibrate.py `fit_bounds_norm`) found 2 nearest the probe.
    let errors = vec![(0.0, 0.179), (4.0, 0.144), (2.0, 0.089), (1.0, 0.233)];
    let fitted = WalkProbe { bounds_norm: Some(2.0), bounds_norm_errors: Some(errors.clone()), ..walk(Some(32)) };
    let text = calibrated_toml(TEMPLATE, &input(None, Some(fitted.clone()))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["bounds_norm"].as_float(), Some(2.0), "{text}");
    let back = read_back(&text).0.walk_probe.unwrap();
    assert_eq!(back, fitted);
    assert_eq!(back.bounds_norm_taken(), Some(2.0));
    let summary = back.bounds_norm_summary().unwrap();
    assert!(summary.contains("the largest 0.179, 4 0.144, 2 0.089, 1 0.233"), "{summary}");
    // A fit that found the largest bound alone nearest writes no norm into [cache].
    let largest = WalkProbe { bounds_norm: Some(0.0), bounds_norm_errors: Some(errors), ..walk(Some(32)) };
    let text = calibrated_toml(TEMPLATE, &input(None, Some(largest.clone()))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert!(v["cache"].get("bounds_norm").is_none(), "{text}");
    assert_eq!(read_back(&text).0.walk_probe, Some(largest));
    // Files written before the fit have neither key.
    assert_eq!(walk(Some(32)).bounds_norm_taken(), None);
    assert!(walk(Some(32)).bounds_norm_summary().is_none());
}
