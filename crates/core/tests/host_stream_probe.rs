//! calibrate's stream probe (docs/RUNTIME_MODEL.md, "Streams across pages") survives the
//! calibration file, sets `[cache] stream_ahead` where its fit ran (and only there) and `[cache]
//! dram_line_cycles` from its 2MB time wherever it ran, and `machines host --explain` says what
//! it measured.

use std::collections::HashMap;
use superpager_core::mmu::host::{calibrated_toml, CalibrationInput, StreamProbe};

mod common;
use common::CALIBRATION_TEMPLATE as TEMPLATE;

fn fitted() -> StreamProbe {
    StreamProbe { footprint: 256 << 20, ns_4k: 283.761, ns_2m: 280.5, model_4k: Some(94.665), model_2m: Some(10.089), stream_ahead: Some(0.961) }
}

fn with(probe: Option<StreamProbe>) -> String {
    calibrated_toml(TEMPLATE, &CalibrationInput { stream_probe: probe, ..common::calibration_input() }).unwrap()
}

#[test]
fn a_fitted_probe_sets_stream_ahead_in_both_files_and_explain_shows_it() {
    let text = with(Some(fitted()));
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["stream_ahead"].as_float(), Some(0.961), "{text}");
    let (cal, path) = common::read_calibration_back(&text, "stream-fitted");
    assert_eq!(cal.stream_probe, Some(fitted()), "written and read back whole");
    let r = common::two_level_report(cal);
    assert_eq!(r.cache_toml().unwrap()["stream_ahead"].as_float(), Some(0.961));
    let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
    let (a, why) = &rows["stream ahead"];
    assert_eq!(a, "0.961");
    assert!(why.contains("283.8 ns a 4KB page on 4KB pages and 280.5 on 2MB") && why.contains("1 - 3.3 / 84.6"), "{why}");
    assert!(!why.contains("  "), "one sentence, no run of spaces: {why}");
    // Memory's line rate: 280.5 ns a 4KB page on 2MB pages over its 64 lines at 2.5 GHz,
    // 10.96 cycles a line, to a tenth.
    assert_eq!(v["cache"]["dram_line_cycles"].as_float(), Some(11.0), "{text}");
    assert_eq!(r.cache_toml().unwrap()["dram_line_cycles"].as_float(), Some(11.0));
    let (l, why) = &rows["memory's line rate"];
    assert_eq!(l, "11 cycles a line");
    assert!(why.contains("280.5 ns a 4KB page over its 64-byte lines at 2.50 GHz") && why.contains("dram_line_cycles"), "{why}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_probe_without_its_fit_changes_nothing_in_cache() {
    let bare = StreamProbe { model_4k: None, model_2m: None, stream_ahead: None, ..fitted() };
    let text = with(Some(bare.clone()));
    // [cache] as without the probe, but for memory's line rate, which needs no fit.
    let cache = |t: &str| {
        let mut c = toml::from_str::<toml::Value>(t).unwrap()["cache"].clone();
        let line = c.as_table_mut().unwrap().remove("dram_line_cycles");
        (c, line)
    };
    assert_eq!(cache(&text).0, cache(&with(None)).0, "[cache] as without the probe");
    assert_eq!((cache(&text).1, cache(&with(None)).1), (Some(toml::Value::Float(11.0)), None));
    let (cal, path) = common::read_calibration_back(&text, "stream-bare");
    assert_eq!(cal.stream_probe, Some(bare));
    let r = common::two_level_report(cal);
    assert!(r.cache_toml().unwrap().get("stream_ahead").is_none());
    let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
    assert_eq!(rows["stream ahead"].0, "0 (not fitted)");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_share_outside_0_and_1_or_a_fit_without_the_models_figures_is_not_read() {
    for (bad, tag, why) in [
        ("stream_ahead = 0.961", "stream_ahead = 1.5", "stream_ahead = 1.5 is of the wrong kind or out of its range"),
        ("model_2m = 10.089\n", "", "stream_ahead is not given with both model_4k and model_2m"),
    ] {
        // In the probe's own table ([cache] carries a stream_ahead of its own, before it).
        let good = with(Some(fitted()));
        let at = good.find("[calibration.stream_probe]").expect("the probe's table");
        let text = format!("{}{}", &good[..at], good[at..].replacen(bad, tag, 1));
        assert_ne!(text, good, "the test changed the file");
        let (cal, path) = common::read_calibration_left_out(&text, "stream-bad", "stream_probe", why);
        assert_eq!(cal.stream_probe, None, "{text}");
        assert!(common::two_level_report(cal).cache_toml().unwrap().get("stream_ahead").is_none());
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
