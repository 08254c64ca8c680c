//! Calibrate's last-level fit (docs/RUNTIME_MODEL.md, "The last level's fit") survives the
//! calibration file, its size is the one `host` simulates, and `machines host --explain` says
//! where that size came from.

use std::collections::HashMap;
use superpager_core::mmu::host::{calibrated_toml, clock_how, detect, CacheGeometry, Calibration, CalibrationInput, LastLevelFit};

mod common;
use common::CALIBRATION_TEMPLATE as TEMPLATE;

fn fit() -> LastLevelFit {
    LastLevelFit {
        footprint: 1 << 30,
        measured_4k_ns: 331.391,
        measured_2m_ns: 209.152,
        sizes: vec![16 << 20, 8 << 20, 2 << 20],
        ns_4k: vec![165.5, 190.0, 303.3],
        ns_2m: vec![146.6, 150.0, 208.7],
        chosen: 2 << 20,
        footprints: vec![],
        memory_cycles: vec![],
        rms: vec![],
        level_cycles: vec![],
        tenant_fill_rate: None,
        share_law: None,
    }
}

fn input(f: Option<LastLevelFit>) -> CalibrationInput {
    let last = f.as_ref().map_or(String::new(), |f| format!("{}MiB", f.chosen >> 20));
    CalibrationInput {
        method: "dependent pointer chase (test); clock measured by a chain of dependent adds (model/chase.c clock), 3.342 GHz; /proc/cpuinfo says 2.246 GHz"
            .into(),
        clock_ghz: 3.342,
        level_cycles: vec![4.0, 43.3],
        level_sizes: vec![String::new(), last],
        dram_cycles: 414.3,
        points: vec![(1 << 30, "4k".into(), 331.391), (1 << 30, "2m".into(), 209.152)],
        last_level_fit: f,
        ..common::calibration_input()
    }
}

fn read_back(text: &str, tag: &str) -> (Calibration, std::path::PathBuf) {
    common::read_calibration_back(text, &format!("llfit-{tag}"))
}

#[test]
fn the_fit_is_written_and_read_back_whole_and_sizes_the_last_level() {
    let text = calibrated_toml(TEMPLATE, &input(Some(fit()))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["levels"][1]["size"].as_str(), Some("2MiB"), "{text}");
    assert_eq!(v["calibration"]["last_level_fit"]["chosen"].as_str(), Some("2MiB"), "{text}");
    let (cal, path) = read_back(&text, "whole");
    assert_eq!(cal.last_level_fit, Some(fit()));
    assert_eq!(cal.level_sizes[1], "2MiB");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_file_without_the_fit_has_none() {
    let text = calibrated_toml(TEMPLATE, &input(None)).unwrap();
    assert!(!text.contains("last_level_fit"), "{text}");
    let (cal, path) = read_back(&text, "none");
    assert_eq!(cal.last_level_fit, None);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_fit_whose_choice_is_not_among_its_sizes_is_not_read() {
    let text = calibrated_toml(TEMPLATE, &input(Some(fit()))).unwrap().replace("chosen = \"2MiB\"", "chosen = \"4MiB\"");
    let (cal, path) = common::read_calibration_left_out(&text, "llfit-bad", "last_level_fit", "chosen is not one of sizes");
    assert_eq!(cal.last_level_fit, None, "a hand-edited choice outside the sizes tried");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn the_summary_gives_the_model_at_the_chosen_size_beside_the_measurement() {
    let said = fit().summary();
    assert!(
        said.contains("at 1GiB gives 303.3 ns a step on 4KB pages and 208.7 on 2MB with the last level at 2MiB, against 331.4 and 209.2 measured"),
        "{said}"
    );
    assert!(said.contains("3 sizes tried, 16MiB down to 2MiB"), "{said}");
}

#[test]
fn explain_names_the_fitted_last_level_and_not_a_seen_one() {
    let (cal, path) = read_back(&calibrated_toml(TEMPLATE, &input(Some(fit()))).unwrap(), "explain");
    let r = common::two_level_report(cal);
    let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
    let (size, src) = rows.get("L2 size (fitted)").unwrap_or_else(|| panic!("{:?}", rows.keys()));
    assert_eq!(size, "2MiB");
    assert!(src.contains("calibrate's last-level fit") && src.contains("CPUID says 16MiB"), "{src}");
    assert!(!rows.contains_key("L2 size seen"));
    // The clock row says how calibrate had the clock (its method's clause).
    let (ghz, how) = rows.get("clock").expect("a clock row");
    assert_eq!(ghz, "3.34 GHz");
    assert!(how.ends_with(": clock measured by a chain of dependent adds (model/chase.c clock), 3.342 GHz; /proc/cpuinfo says 2.246 GHz"), "{how}");
    // predict and bench --model repeat the host's notes: this one says the L2 is fitted.
    let note = r.fit_note().expect("a note for a level fitted below CPUID's size");
    assert!(note.starts_with("calibrate's last-level fit simulates the L2 at 2MiB (CPUID says 16MiB): there the model on the chase at 1GiB"), "{note}");
    let toml = r.cache_toml().unwrap();
    assert_eq!(toml["levels"][1]["size"].as_str(), Some("2MiB"), "host simulates the fitted size");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn the_clocks_clause_is_cut_from_the_method_and_absent_in_older_files() {
    assert_eq!(clock_how("chase, 2MB pages, median of 3; clock from /proc/cpuinfo (2.4 GHz)"), "clock from /proc/cpuinfo (2.4 GHz)");
    assert_eq!(clock_how("dependent pointer chase, median of 3"), "");
}

#[test]
fn a_fit_that_kept_cpuids_size_gives_no_note() {
    let kept = LastLevelFit { chosen: 16 << 20, ..fit() };
    let (cal, path) = read_back(&calibrated_toml(TEMPLATE, &input(Some(kept))).unwrap(), "kept");
    let mut r = detect(&common::NoLeaves, std::path::Path::new("/nonexistent"));
    r.caches = vec![
        CacheGeometry { level: 2, kind: "Unified".into(), bytes: 16 << 20, ways: 16, line: 64, sets: 16384, source: "test".into() },
        CacheGeometry { level: 1, kind: "Data".into(), bytes: 32 << 10, ways: 8, line: 64, sets: 64, source: "test".into() },
    ];
    r.model_name = "Test CPU".into();
    r.calibration = Some(cal);
    assert_eq!(r.fit_note(), None);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// A fit that found tenants (`tenant_fill_rate`): the last level is simulated at CPUID's size
/// and shared, and the walk probe's walkers, which its rule over-reads when the level is
/// shared, give way to the core's (docs/RUNTIME_MODEL.md, "A last level shared by the second").
#[test]
fn a_fit_with_tenants_shares_the_whole_level_and_leaves_the_walk_probes_walkers() {
    use superpager_core::mmu::host::{WalkProbe, WALKERS_RULE};
    let walk = WalkProbe {
        footprint: 1 << 30,
        chains: vec![1, 4, 16],
        ns_4k: vec![443.7, 91.1, 20.5],
        ns_2m: vec![288.1, 63.7, 15.3],
        walkers: Some(22),
        mlp: Some(14),
        walkers_rule: Some(WALKERS_RULE.to_string()),
        walk_ns: Some(155.6),
        bounds_norm: None,
        bounds_norm_errors: None,
    };
    let shared = LastLevelFit { tenant_fill_rate: Some(0.0624), ..fit() };
    let text = calibrated_toml(TEMPLATE, &CalibrationInput { walk_probe: Some(walk), ..input(Some(shared.clone())) }).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["levels"][1]["size"].as_str(), Some("1MiB"), "the template's (CPUID's) size stays: {text}");
    assert_eq!(v["cache"]["tenant_fill_rate"].as_float(), Some(0.0624), "{text}");
    assert!(v["cache"].get("walkers").is_none(), "the probe's 22 is not written: {text}");
    let (cal, path) = read_back(&text, "tenants");
    assert_eq!(cal.last_level_fit, Some(shared));
    let r = common::two_level_report(cal);
    assert_eq!(r.tenant_fill_rate(), Some(0.0624));
    let toml = r.cache_toml().unwrap();
    assert_eq!(toml["levels"][1]["size"].as_str(), Some("16MiB"), "host simulates CPUID's size");
    assert_eq!(toml["tenant_fill_rate"].as_float(), Some(0.0624));
    let (n, src) = r.walkers();
    assert_ne!(n, 22, "{src}");
    assert!(src.contains("read 22 by its rule, not taken"), "{src}");
    let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
    let (rate, why) = rows.get("L2 shared").unwrap_or_else(|| panic!("{:?}", rows.keys()));
    assert_eq!(rate, "tenants fill 0.0624 lines a ns");
    assert!(why.contains("the s = 2MiB of C = 16MiB its last-level fit chose"), "{why}");
    assert!(!rows.contains_key("L2 size (fitted)"), "the level is not simulated at the fitted size");
    assert!(r.fit_note().unwrap().contains("shared with other tenants who fill it at 0.0624 lines a ns"));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
