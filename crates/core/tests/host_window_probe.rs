//! calibrate's window probe in the calibration file: written by `calibrated_toml`, read back by
//! `read_calibration`; its window becomes `[cache] rob` and its `walk_hiding` the key of that
//! name, and a probe that gave no verdict leaves both as they were.

use superpager_core::mmu::host::{calibrated_toml, read_calibration, CalibrationInput, WindowProbe};
use superpager_core::mmu::machine::Machine;

mod common;
use common::{host_template, tmp};

/// The Zen 5 VM's medians of 2026-12-03 (docs/RUNTIME_MODEL.md, "Walks in a full window").
fn probe(window: Option<u32>, walk_hiding: Option<f64>) -> WindowProbe {
    WindowProbe {
        footprint: 1 << 30,
        pads: vec![0, 16, 32, 64, 96, 192],
        ns_4k: vec![16.4, 33.9, 48.3, 83.8, 119.2, 220.9],
        ns_2m: vec![15.6, 29.9, 42.6, 68.1, 93.3, 192.5],
        dep_4k: 263.1,
        dep_2m: 203.4,
        window,
        walk_hiding,
    }
}

fn input(p: Option<WindowProbe>) -> CalibrationInput {
    CalibrationInput { window_probe: p, ..common::calibration_input() }
}

#[test]
fn the_probe_is_written_read_back_and_sets_the_window_and_walk_hiding() {
    let text = calibrated_toml(&host_template(), &input(Some(probe(Some(253), Some(0.215))))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["rob"].as_integer(), Some(253), "{text}");
    assert_eq!(v["cache"]["walk_hiding"].as_float(), Some(0.215), "{text}");
    assert_eq!(v["calibration"]["window_probe"]["window"].as_integer(), Some(253), "{text}");
    let p = tmp("cal-window.toml");
    std::fs::write(&p, &text).unwrap();
    let cal = read_calibration(std::path::Path::new(&p), "Test CPU", &mut Vec::new()).unwrap();
    assert_eq!(cal.window_probe, Some(probe(Some(253), Some(0.215))));
    let c = Machine::load(&p).unwrap().cache.unwrap();
    assert_eq!((c.rob, c.walk_hiding), (253.0, 0.215));
    let said = probe(None, None).summary();
    assert!(said.contains("2MB pages 0: 15.6, 16: 29.9") && said.contains("one load alone 203.4 / 263.1 ns"), "{said}");
}

#[test]
fn a_probe_without_verdicts_leaves_the_window_and_walk_hiding_alone() {
    let text = calibrated_toml(&host_template(), &input(Some(probe(None, None)))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["cache"]["rob"].as_integer(), Some(256), "the template's: {text}");
    assert!(v["cache"].get("walk_hiding").is_none(), "{text}");
    assert!(text.contains("[calibration.window_probe]"), "{text}");
    let none = calibrated_toml(&host_template(), &input(None)).unwrap();
    assert!(!none.contains("window_probe") && !none.contains("walk_hiding"), "{none}");
}

#[test]
fn a_malformed_probe_is_not_read() {
    let text = calibrated_toml(&host_template(), &input(Some(probe(Some(253), Some(0.215))))).unwrap();
    for (from, to) in [("window = 253", "window = 0"), ("walk_hiding = 0.215\nwindow", "walk_hiding = -1.0\nwindow"), ("dep_2m = 203.4", "dep_2m = \"fast\"")] {
        let bad = text.replacen(from, to, 1);
        assert_ne!(bad, text, "{from}");
        let p = tmp("cal-window-bad.toml");
        std::fs::write(&p, &bad).unwrap();
        let mut notes = Vec::new();
        let cal = read_calibration(std::path::Path::new(&p), "Test CPU", &mut notes).unwrap();
        assert_eq!(cal.window_probe, None, "{to}");
        assert!(notes.iter().any(|n| n.contains("[calibration.window_probe] not read")), "{to}: {notes:?}");
    }
}
