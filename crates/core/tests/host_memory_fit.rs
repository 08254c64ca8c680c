//! Memory's latency fitted with the last level (docs/RUNTIME_MODEL.md, "Memory's latency,
//! fitted"): the fitted latency is the one `host` simulates, on a splintered host as on a native
//! one, it survives the calibration file, `machines host --explain` says where it came from, and
//! a file written before the fit set it keeps memory's latency as read.

use std::collections::HashMap;
use superpager_core::mmu::host::{calibrated_toml, Calibration, LastLevelFit, NearMemory, TlbProbe};

mod common;

/// A fit over four footprints that chose 2MiB with memory at 577 cycles (the read latency 414.3).
fn fit() -> LastLevelFit {
    LastLevelFit {
        footprint: 1 << 30,
        measured_4k_ns: 359.3,
        measured_2m_ns: 259.6,
        sizes: vec![4 << 20, 2 << 20, 1 << 20],
        ns_4k: vec![349.9, 367.0, 382.1],
        ns_2m: vec![228.5, 237.0, 249.6],
        chosen: 2 << 20,
        footprints: vec![16 << 20, 64 << 20, 256 << 20, 1 << 30],
        memory_cycles: vec![604.0, 577.0, 502.0],
        rms: vec![0.0675, 0.0453, 0.1188],
        level_cycles: vec![],
        tenant_fill_rate: None,
        share_law: None,
    }
}

fn input(f: LastLevelFit, splintered: bool) -> superpager_core::mmu::host::CalibrationInput {
    let tlb = TlbProbe { lines: 8192, span: 32 << 20, packed_2m_ns: 5.0, sparse_2m_ns: 17.6, sparse_4k_ns: 34.3, splintered };
    superpager_core::mmu::host::CalibrationInput {
        level_cycles: vec![4.0, 43.3],
        level_sizes: vec![String::new(), format!("{}MiB", f.chosen >> 20)],
        dram_cycles: 414.3,
        tlb_probe: Some(tlb),
        near_memory: Some(NearMemory { footprint: 8 << 20, ns: 92.1, cycles: 331.0 }),
        last_level_fit: Some(f),
        ..common::calibration_input()
    }
}

fn read_back(text: &str, tag: &str) -> (Calibration, std::path::PathBuf) {
    common::read_calibration_back(text, &format!("memfit-{tag}"))
}

fn report(cal: Calibration) -> superpager_core::mmu::host::HostReport {
    common::two_level_report(cal)
}

#[test]
fn the_fitted_latency_is_memorys_on_a_splintered_host_and_on_a_native_one() {
    for splintered in [true, false] {
        let text = calibrated_toml(&common::host_template(), &input(fit(), splintered)).unwrap();
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["cache"]["dram_cycles"].as_float(), Some(577.0), "splintered {splintered}: {text}");
        let (cal, path) = read_back(&text, &format!("dram-{splintered}"));
        assert_eq!(cal.last_level_fit, Some(fit()), "written and read back whole");
        let r = report(cal);
        let (cycles, src) = r.latency(2);
        assert_eq!(cycles, 577.0);
        assert!(src.contains("fitted with the last level to the chase over every footprint from 16MiB up"), "{src}");
        let toml = r.cache_toml().unwrap();
        assert_eq!(toml["dram_cycles"].as_float(), Some(577.0), "host simulates the fitted latency");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}

#[test]
fn a_fit_without_memory_keeps_memorys_latency_as_read() {
    let old = LastLevelFit { footprints: vec![], memory_cycles: vec![], rms: vec![], ..fit() };
    for (splintered, want) in [(true, 331.0), (false, 414.3)] {
        let text = calibrated_toml(&common::host_template(), &input(old.clone(), splintered)).unwrap();
        assert!(!text.contains("memory_cycles"), "{text}");
        let (cal, path) = read_back(&text, &format!("old-{splintered}"));
        assert_eq!(cal.last_level_fit.as_ref().and_then(|f| f.memory()), None);
        assert_eq!(report(cal).latency(2).0, want, "splintered {splintered}: the near point, else the largest point");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}

#[test]
fn a_fit_whose_latencies_do_not_match_its_sizes_is_not_read() {
    let text = calibrated_toml(&common::host_template(), &input(fit(), true))
        .unwrap()
        .replace("memory_cycles = [604.0, 577.0, 502.0]", "memory_cycles = [604.0, 577.0]");
    let (cal, path) = common::read_calibration_left_out(&text, "memfit-short", "last_level_fit", "memory_cycles has 2 entries for 3 sizes");
    assert_eq!(cal.last_level_fit, None, "a hand-edited fit with two latencies for three sizes");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn the_explanation_gives_the_fitted_latency_and_how_near_the_model_came() {
    let (cal, path) = read_back(&calibrated_toml(&common::host_template(), &input(fit(), true)).unwrap(), "explain");
    let r = report(cal);
    let rows: HashMap<String, (String, String)> = r.explain().into_iter().map(|(k, v, s)| (k, (v, s))).collect();
    let (v, _) = rows.get("memory latency").expect("a memory row");
    assert_eq!(v, "577.0 cycles");
    let note = r.fit_note().expect("a note: the L2 is fitted below CPUID's size");
    assert!(note.contains("with the last level at 2MiB and memory at 577.0 cycles, against 359.3 and 259.6 measured"), "{note}");
    assert!(note.contains("over the chase at 16MiB, 64MiB, 256MiB, 1GiB on both page sizes its times are 4.5% off the measured ones"), "{note}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
