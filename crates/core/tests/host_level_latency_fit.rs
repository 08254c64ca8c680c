//! The last level's latency read with the fitted size (docs/RUNTIME_MODEL.md, "The last
//! level's latency, read where it holds the chase"): the latency the fit read with the size it
//! chose is the one the file writes and `host` simulates, `machines host --explain` says where
//! it came from, a file written before keeps the latency as read, and a hand-edited fit whose
//! latencies do not match its sizes is not read.

use superpager_core::mmu::host::{calibrated_toml, Calibration, CalibrationInput, LastLevelFit};

mod common;

/// A fit that chose 2MiB, with the last level read at 62.7 cycles there (the 2MB chase at 2MiB)
/// and at 143.5 (the point past it, as read) where no point lay within the size.
fn fit(level_cycles: Vec<f64>) -> LastLevelFit {
    LastLevelFit {
        footprint: 1 << 30,
        measured_4k_ns: 393.0,
        measured_2m_ns: 255.3,
        sizes: vec![4 << 20, 2 << 20, 1 << 20],
        ns_4k: vec![369.9, 401.5, 409.3],
        ns_2m: vec![244.2, 261.7, 268.3],
        chosen: 2 << 20,
        footprints: vec![16 << 20, 64 << 20, 256 << 20, 1 << 30],
        memory_cycles: vec![656.0, 612.0, 569.0],
        rms: vec![0.1037, 0.0818, 0.1052],
        level_cycles,
        tenant_fill_rate: None,
        share_law: None,
    }
}

fn input(f: LastLevelFit) -> CalibrationInput {
    CalibrationInput {
        // As read by the level rules: the point past the share, where memory serves part.
        level_cycles: vec![4.0, 143.5],
        level_sizes: vec![String::new(), "2MiB".into()],
        last_level_fit: Some(f),
        ..common::calibration_input()
    }
}

fn written(f: LastLevelFit, tag: &str) -> (toml::Value, Calibration, std::path::PathBuf) {
    let text = calibrated_toml(&common::host_template(), &input(f)).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    let (cal, path) = common::read_calibration_back(&text, &format!("levelfit-{tag}"));
    (v, cal, path)
}

fn last_level_cycles(v: &toml::Value) -> Option<f64> {
    v["cache"]["levels"].as_array()?.last()?["cycles"].as_float()
}

#[test]
fn the_fitted_latency_is_the_last_levels_in_the_file_and_in_host() {
    let f = fit(vec![143.5, 62.7, 143.5]);
    let (v, cal, path) = written(f.clone(), "new");
    assert_eq!(last_level_cycles(&v), Some(62.7), "the file's [cache] takes the chosen size's latency");
    assert_eq!(cal.last_level_fit, Some(f), "written and read back whole");
    let r = common::two_level_report(cal);
    let (cycles, src) = r.latency(1);
    assert_eq!(cycles, 62.7);
    assert!(src.contains("the largest footprint past the level above that the fitted size holds whole"), "{src}");
    assert_eq!(r.latency(0).0, 4.0, "the level above is as read");
    let rows = r.explain();
    let size = rows.iter().find(|(k, _, _)| k == "L2 size (fitted)").expect("a fitted size row");
    assert!(size.2.contains("calibrate's last-level fit") && !size.2.contains("holds whole"), "the size's source is the fit's, not the latency's: {}", size.2);
    let levels = r.cache_toml().unwrap()["levels"].as_array().unwrap().clone();
    assert_eq!(levels.last().unwrap()["cycles"].as_float(), Some(62.7), "host simulates it");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_fit_without_level_latencies_keeps_the_latency_as_read() {
    let (v, cal, path) = written(fit(vec![]), "old");
    assert!(!v["calibration"]["last_level_fit"].as_table().unwrap().contains_key("level_cycles"));
    assert_eq!(last_level_cycles(&v), Some(143.5));
    assert_eq!(cal.last_level_fit.as_ref().and_then(|f| f.level()), None);
    let (cycles, src) = common::two_level_report(cal).latency(1);
    assert_eq!(cycles, 143.5);
    assert!(!src.contains("holds whole"), "{src}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_fit_whose_level_latencies_do_not_match_its_sizes_is_not_read() {
    let text = calibrated_toml(&common::host_template(), &input(fit(vec![143.5, 62.7, 143.5])))
        .unwrap()
        .replace("level_cycles = [143.5, 62.7, 143.5]", "level_cycles = [143.5, 62.7]");
    assert!(text.contains("level_cycles = [143.5, 62.7]\n"), "the edit took: {text}");
    let (cal, path) = common::read_calibration_left_out(&text, "levelfit-short", "last_level_fit", "level_cycles has 2 entries for 3 sizes");
    assert_eq!(cal.last_level_fit, None, "a hand-edited fit with two latencies for three sizes");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
