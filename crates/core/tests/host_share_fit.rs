//! Calibrate's fit of the share's exponent (docs/RUNTIME_MODEL.md, "The share's exponent,
//! fitted") survives the calibration file, sets `[cache]` where it took a candidate (and only
//! there), and `machines host --explain` says what it found.

use std::collections::HashMap;
use superpager_core::mmu::host::{calibrated_toml, CalibrationInput, LastLevelFit, ShareFit};

mod common;
use common::CALIBRATION_TEMPLATE as TEMPLATE;

fn shared_fit() -> LastLevelFit {
    LastLevelFit {
        footprint: 1 << 30,
        measured_4k_ns: 331.391,
        measured_2m_ns: 209.152,
        sizes: vec![16 << 20, 2 << 20],
        ns_4k: vec![165.5, 303.3],
        ns_2m: vec![146.6, 208.7],
        chosen: 2 << 20,
        footprints: vec![],
        memory_cycles: vec![],
        rms: vec![],
        level_cycles: vec![],
        tenant_fill_rate: Some(0.0624),
        share_law: None,
    }
}

/// A fit the candidate a = 0.7 with `walk_hiding` 0 won: R_0.7 = 0.0624 (16 / 2 - 1)^(1/0.7 - 1).
fn taken() -> ShareFit {
    ShareFit {
        exponent: 0.7,
        walk_hiding: Some(0.0),
        tenant_fill_rate: Some(0.143671),
        as_written_error: 0.2113,
        errors: vec![(1.0, 0.18), (0.85, 0.12), (0.7, 0.09), (0.6, 0.1), (0.5, 0.14)],
    }
}

fn input(share: Option<ShareFit>) -> CalibrationInput {
    CalibrationInput {
        level_cycles: vec![4.0, 43.3],
        level_sizes: vec![String::new(), "2MiB".into()],
        last_level_fit: Some(shared_fit()),
        share_fit: share,
        ..common::calibration_input()
    }
}

#[test]
fn a_taken_fit_sets_the_exponent_the_rate_and_no_hiding_in_both_files() {
    let text = calibrated_toml(TEMPLATE, &input(Some(taken()))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["share_exponent"].as_float(), Some(0.7), "{text}");
    assert_eq!(v["cache"]["walk_hiding"].as_float(), Some(0.0), "{text}");
    assert_eq!(v["cache"]["tenant_fill_rate"].as_float(), Some(0.143671), "the fit's rate, not the last level's 0.0624: {text}");
    let (cal, path) = common::read_calibration_back(&text, "share-taken");
    assert_eq!(cal.share_fit, Some(taken()), "written and read back whole");
    let r = common::two_level_report(cal);
    assert_eq!(r.tenant_fill_rate(), Some(0.143671));
    let c = r.cache_toml().unwrap();
    assert_eq!(c["share_exponent"].as_float(), Some(0.7));
    assert_eq!(c["walk_hiding"].as_float(), Some(0.0));
    let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
    let (a, why) = rows.get("share's exponent").unwrap_or_else(|| panic!("{:?}", rows.keys()));
    assert_eq!(a, "0.7");
    assert!(why.contains("as written 0.211") && why.contains("0.7 0.090"), "{why}");
    assert!(why.contains("(so the chase keeps the size chosen), with walk_hiding 0 in place"), "one sentence, no run of spaces: {why}");
    assert!(rows["L2 shared"].1.contains("F^a / (F^a + R^a)"), "{}", rows["L2 shared"].1);
    assert!(r.fit_note().unwrap().contains("a = 0.7"));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn explain_gives_the_fits_hiding_and_the_window_probes_reading_beside_it() {
    use superpager_core::mmu::host::WindowProbe;
    let window = WindowProbe {
        footprint: 1 << 30,
        pads: vec![0, 16],
        ns_4k: vec![17.5, 30.0],
        ns_2m: vec![13.4, 25.0],
        dep_4k: 286.8,
        dep_2m: 185.1,
        window: Some(233),
        walk_hiding: Some(0.172),
    };
    for (share, shown) in [(Some(taken()), "0"), (None, "0.172")] {
        let text = calibrated_toml(TEMPLATE, &CalibrationInput { window_probe: Some(window.clone()), ..input(share.clone()) }).unwrap();
        let (cal, path) = common::read_calibration_back(&text, "share-hiding");
        let r = common::two_level_report(cal);
        let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
        let (k, why) = &rows["walks hidden in a full window"];
        assert_eq!(k, shown, "{why}");
        assert_eq!(share.is_some(), why.contains("which read 0.172"), "{why}");
        assert_eq!(r.cache_toml().unwrap()["walk_hiding"].as_float(), Some(shown.parse().unwrap()));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}

#[test]
fn a_fit_the_model_as_written_won_changes_nothing_in_cache() {
    let kept = ShareFit { exponent: 1.0, walk_hiding: None, tenant_fill_rate: None, ..taken() };
    let with = calibrated_toml(TEMPLATE, &input(Some(kept.clone()))).unwrap();
    let without = calibrated_toml(TEMPLATE, &input(None)).unwrap();
    let cache = |t: &str| toml::from_str::<toml::Value>(t).unwrap()["cache"].clone();
    assert_eq!(cache(&with), cache(&without), "[cache] as without the fit");
    assert!(cache(&with).get("share_exponent").is_none());
    let (cal, path) = common::read_calibration_back(&with, "share-kept");
    assert_eq!(cal.share_fit, Some(kept));
    let r = common::two_level_report(cal);
    assert_eq!(r.tenant_fill_rate(), Some(0.0624), "the last level's rate stands");
    let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
    assert_eq!(rows["share's exponent"].0, "1");
    assert!(rows["share's exponent"].1.contains("the model as calibrate wrote it was nearest"));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_fit_with_a_hiding_but_no_rate_or_an_exponent_out_of_range_is_not_read() {
    let text = calibrated_toml(TEMPLATE, &input(Some(taken()))).unwrap();
    for (from, to, why) in [
        ("tenant_fill_rate = 0.143671\n", "", "walk_hiding and tenant_fill_rate are not both present or both absent"),
        ("exponent = 0.7", "exponent = 9.0", "exponent = 9.0 is of the wrong kind or out of its range"),
    ] {
        // The fit's own table is the file's last mention of each key ([cache] comes first).
        let at = text.rfind(from).unwrap_or_else(|| panic!("{from} is in the file: {text}"));
        let bad = format!("{}{to}{}", &text[..at], &text[at + from.len()..]);
        let (cal, path) = common::read_calibration_left_out(&bad, "share-bad", "share_fit", why);
        assert_eq!(cal.share_fit, None, "{to}");
        assert_eq!(common::two_level_report(cal).tenant_fill_rate(), Some(0.0624));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}

#[test]
fn no_shared_level_no_share_keys() {
    let alone = CalibrationInput { last_level_fit: Some(LastLevelFit { tenant_fill_rate: None, ..shared_fit() }), ..input(Some(taken())) };
    let text = calibrated_toml(TEMPLATE, &alone).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert!(v["cache"].get("share_exponent").is_none() && v["cache"].get("tenant_fill_rate").is_none(), "{text}");
}
