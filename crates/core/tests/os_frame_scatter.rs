//! Scattered 4KB frames (`[frames] scatter`, os/frames `Scatter`): the machine key and its
//! modifier, calibrate's frame probe in the calibration file, and what scattering does to the
//! data caches, which are indexed by the frames the OS model hands out.

use superpager_core::mmu::host::{calibrated_toml, read_calibration, CalibrationInput, FrameProbe};
use superpager_core::mmu::machine::Machine;

mod common;
use common::{simulate, skylake_file, strided_trace, tmp, CALIBRATION_TEMPLATE, TWO_LEVEL_CACHE};

/// skylake with a two-level data cache (an L2 of 1MiB in 8 ways: set index bits 6-16) and the
/// `[frames]` text given.
fn machine_file(name: &str, frames: &str) -> String {
    skylake_file(name, &format!("{TWO_LEVEL_CACHE}{frames}"))
}

#[test]
fn the_key_and_the_modifier_set_the_fraction_and_bad_values_are_refused() {
    let plain = machine_file("plain.toml", "");
    assert_eq!(Machine::load(&plain).unwrap().frame_scatter, 0.0, "no [frames]: the buddy's own order");
    let half = machine_file("half.toml", "\n[frames]\nscatter = 0.5\n");
    assert_eq!(Machine::load(&half).unwrap().frame_scatter, 0.5);
    let m = Machine::load("skylake+scatter=0.25").unwrap();
    assert_eq!(m.frame_scatter, 0.25);
    assert_eq!(m.name, "skylake+scatter=0.25");
    let bad = machine_file("bad.toml", "\n[frames]\nscatter = 1.5\n");
    let e = Machine::load(&bad).unwrap_err().to_string();
    assert!(e.contains("frames.scatter") && e.contains("1.5"), "{e}");
    for v in ["x", "-0.1", "NaN"] {
        let e = Machine::load(&format!("skylake+scatter={v}")).unwrap_err().to_string();
        assert!(e.contains("+scatter=") && e.contains("fraction"), "{v}: {e}");
    }
}

fn probe() -> FrameProbe {
    FrameProbe {
        footprint: 256 << 20,
        new_runs: vec![0.8673, 0.4952, 0.6],
        scatter: 0.6,
        groups_8: vec![0.507, 0.1426, 0.1313],
        groups_512: vec![0.0611, 0.0107, 0.004],
    }
}

fn input(frames: Option<FrameProbe>) -> CalibrationInput {
    CalibrationInput { frames, ..common::calibration_input() }
}

#[test]
fn the_frame_probe_is_written_read_back_and_becomes_the_machines_scatter() {
    let text = calibrated_toml(CALIBRATION_TEMPLATE, &input(Some(probe()))).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["frames"]["scatter"].as_float(), Some(0.6), "{text}");
    assert_eq!(v["calibration"]["frames"]["footprint"].as_str(), Some("256MiB"), "{text}");
    let p = tmp("cal-frames.toml");
    std::fs::write(&p, &text).unwrap();
    let mut notes = Vec::new();
    let cal = read_calibration(std::path::Path::new(&p), "Test CPU", &mut notes).unwrap();
    assert_eq!(cal.frames, Some(probe()));
    assert!(probe().summary().contains("0.60"), "{}", probe().summary());

    assert!(probe().summary().contains("0.143") && probe().summary().contains("0.0107"), "the locality is said: {}", probe().summary());
    assert_eq!(v["calibration"]["frames"]["groups_512"][1].as_float(), Some(0.0107), "{text}");

    // A file written before the locality was recorded reads back without it.
    let older = text.lines().filter(|l| !l.starts_with("groups_")).collect::<Vec<_>>().join("\n");
    std::fs::write(&p, &older).unwrap();
    let cal = read_calibration(std::path::Path::new(&p), "Test CPU", &mut notes).unwrap();
    assert_eq!(cal.frames, Some(FrameProbe { groups_8: vec![], groups_512: vec![], ..probe() }));
    assert!(!cal.frames.unwrap().summary().contains("groups"), "nothing said of what was not read");

    let none = calibrated_toml(CALIBRATION_TEMPLATE, &input(None)).unwrap();
    assert!(!none.contains("frames"), "no probe (pagemap unreadable): no key: {none}");
    std::fs::write(&p, text.replace("scatter = 0.6\n", "scatter = 2.0\n")).unwrap();
    let cal = read_calibration(std::path::Path::new(&p), "Test CPU", &mut notes).unwrap();
    assert_eq!(cal.frames, None, "a scatter outside 0..1 is not read");
}

#[test]
fn scattered_frames_spread_a_strided_array_over_the_cache_sets() {
    let trace = strided_trace("strided64k.spt");
    let plain = simulate(&trace, &machine_file("m0.toml", ""), "base", true);
    let scattered = simulate(&trace, &machine_file("m1.toml", "\n[frames]\nscatter = 1.0\n"), "base", true);
    let again = simulate(&trace, &machine_file("m2.toml", "\n[frames]\nscatter = 1.0\n"), "base", true);
    let hits = |r: &superpager_core::stats::Results| r.counters["cache.L2.data.hits"];
    // In address order the 256 lines sit on consecutive frames 16 apart: set bits 12-15 are
    // the same for all, so they share 2 of the L2's 2048 sets (16 lines) and every pass misses.
    assert!(hits(&plain) < 300, "address order: {} L2 hits", hits(&plain));
    // Scattered, they spread over the sets that bits 12-16 choose (32 sets, 256 lines).
    assert!(hits(&scattered) > 4 * hits(&plain).max(100), "scattered: {} L2 hits against {}", hits(&scattered), hits(&plain));
    assert_eq!(scattered.counters["buddy.scatter_new_runs"], 4096, "every 4KB page started a run");
    assert_eq!(plain.counters["buddy.scatter_new_runs"], 0);
    assert_eq!(scattered.counters, again.counters, "same machine and seed, same frames");
    // 2MB pages are not scattered: the same frames under fixed:2MiB either way.
    let huge0 = simulate(&trace, &machine_file("m3.toml", ""), "fixed:2MiB", true);
    let huge1 = simulate(&trace, &machine_file("m4.toml", "\n[frames]\nscatter = 1.0\n"), "fixed:2MiB", true);
    assert_eq!(huge0.counters["cache.L2.data.hits"], huge1.counters["cache.L2.data.hits"]);
}
