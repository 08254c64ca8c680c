//! A calibration whose TLB probe found 2MB pages splintered makes `host` the guest of a
//! hypervisor with 4KB pages: nested walks over 4KB host pages and memory's latency taken short
//! of the TLB's reach (`NearMemory`); `+native` undoes the nesting. Without splintering, or in
//! a file written before the near-memory point existed, nothing is nested.

use superpager_core::mmu::host::{calibrated_toml, read_calibration, CalibrationInput, NearMemory, TlbProbe};
use superpager_core::mmu::machine::{HostPage, Machine};
use superpager_core::units::PageSize;

mod common;

fn input(splintered: bool, near: Option<NearMemory>) -> CalibrationInput {
    let probe = TlbProbe { lines: 8192, span: 32 << 20, packed_2m_ns: 8.9, sparse_2m_ns: if splintered { 29.2 } else { 9.1 }, sparse_4k_ns: 49.8, splintered };
    CalibrationInput {
        clock_ghz: 2.445,
        level_cycles: vec![4.0, 11.4],
        dram_cycles: 710.9,
        points: vec![(8 << 20, "2m".into(), 182.474), (1 << 30, "2m".into(), 290.8)],
        tlb_probe: Some(probe),
        near_memory: near,
        ..common::calibration_input()
    }
}

fn near() -> NearMemory {
    NearMemory { footprint: 8 << 20, ns: 182.474, cycles: 446.2 }
}

/// The file calibrate would write, loaded as a machine file (and its path, for modifiers).
fn written(inp: &CalibrationInput, tag: &str) -> (Machine, std::path::PathBuf, String) {
    let text = calibrated_toml(&common::host_template(), inp).expect("writes");
    let dir = std::env::temp_dir().join(format!("sp-splinter-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("host.toml");
    std::fs::write(&path, &text).unwrap();
    let m = Machine::load(path.to_str().unwrap()).expect("the written file loads");
    (m, path, text)
}

#[test]
fn a_splintered_calibration_nests_host_over_4kb_pages_with_near_memory() {
    let (m, path, text) = written(&input(true, Some(near())), "yes");
    let n = m.nested.as_ref().expect("nested");
    assert_eq!((n.host_levels, n.host_page), (m.walk_levels, HostPage::Fixed(PageSize::from_bytes(4096).unwrap())));
    let c = m.cache.as_ref().unwrap();
    assert_eq!(c.dram_cycles, 446.2, "memory's latency short of the TLB's reach, not the 1GiB chase's 710.9");
    assert!(text.contains("[calibration.near_memory]"), "{text}");
    let mut notes = Vec::new();
    let cal = read_calibration(&path, "Test CPU", &mut notes).unwrap();
    assert_eq!(cal.near_memory, Some(near()));
    assert!(cal.splintered().is_some());
    // +native: the same machine with its pages held whole.
    let native = Machine::load(&format!("{}+native", path.display())).unwrap();
    assert!(native.nested.is_none());
    assert_eq!(native.cache.as_ref().unwrap().dram_cycles, 446.2);
    // Nesting it again is refused, saying why.
    let e = Machine::load(&format!("{}+nested=4KiB", path.display())).err().unwrap().to_string();
    assert!(e.contains("nested twice") && e.contains("+native"), "{e}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn without_splintering_host_stays_native_with_the_largest_chase_as_memory() {
    let (m, path, _) = written(&input(false, Some(near())), "no");
    assert!(m.nested.is_none());
    assert_eq!(m.cache.as_ref().unwrap().dram_cycles, 710.9);
    let e = Machine::load(&format!("{}+native", path.display())).err().unwrap().to_string();
    assert!(e.contains("is not nested, so +native changes nothing"), "{e}");
    let cal = read_calibration(&path, "Test CPU", &mut Vec::new()).unwrap();
    assert!(cal.splintered().is_none() && cal.near_memory.is_some());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_splintered_file_without_the_near_point_is_not_nested() {
    // Written before calibrate measured memory short of the TLB's reach: host stays native
    // (its memory latency includes the walks, which nesting would charge again).
    let (m, path, _) = written(&input(true, None), "old");
    assert!(m.nested.is_none());
    assert_eq!(m.cache.as_ref().unwrap().dram_cycles, 710.9);
    let cal = read_calibration(&path, "Test CPU", &mut Vec::new()).unwrap();
    assert!(cal.splintered().is_none());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_template_without_a_walker_is_refused_by_name() {
    let t = "name = \"host\"\n[cache]\ndram_cycles = 300\n[[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n";
    let mut inp = input(true, Some(near()));
    inp.level_cycles.truncate(1);
    let e = calibrated_toml(t, &inp).err().unwrap();
    assert!(e.contains("[walker]"), "{e}");
}
