//! The `host` machine's CPUID decoders on recorded register values, and detection here.

use std::collections::HashMap;
use superpager_core::mmu::host::{amd_tlbs, core_resources, cpuid_caches, detect, intel_tlbs, sysfs_caches, walk_fill_buffers, Cpuid, NativeCpuid, TlbsFrom};
use superpager_core::mmu::machine::Machine;

struct Recorded(HashMap<(u32, u32), [u32; 4]>);

impl Cpuid for Recorded {
    fn query(&self, leaf: u32, sub: u32) -> [u32; 4] {
        self.0.get(&(leaf, sub)).copied().unwrap_or([0; 4])
    }
}

fn vendor_regs(v: &[u8; 12], max: u32) -> [u32; 4] {
    let w = |i: usize| u32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
    [max, w(0), w(8), w(4)]
}

#[test]
fn intel_leaf_0x18_decodes_as_the_sdm_lays_it_out() {
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"GenuineIntel", 0x1c));
    // Subleaf 0: max subleaf 2; a data TLB, level 1, 4KB pages, 4-way x 16 sets.
    m.insert((0x18, 0), [2, (4 << 16) | 1, 16, 1 | (1 << 5)]);
    // A unified level-2 TLB for 4KB and 2MB pages, 16-way x 128 sets.
    m.insert((0x18, 1), [0, (16 << 16) | 0b11, 128, 3 | (2 << 5)]);
    // A fully associative level-1 data TLB for 1GB pages, 8 entries (8 ways x 1 set).
    m.insert((0x18, 2), [0, (8 << 16) | 0b1000, 1, 1 | (1 << 5) | (1 << 8)]);
    let t = intel_tlbs(&Recorded(m.clone()));
    assert_eq!(t.len(), 3);
    assert_eq!((t[0].level, t[0].stream, t[0].entries, t[0].ways, t[0].page_sizes.clone()), (1, "data", 64, 4, vec!["4KiB"]));
    assert_eq!((t[1].level, t[1].stream, t[1].entries, t[1].ways, t[1].page_sizes.clone()), (2, "unified", 2048, 16, vec!["4KiB", "2MiB"]));
    assert_eq!((t[2].entries, t[2].ways, t[2].page_sizes.clone()), (8, 8, vec!["1GiB"]));
    // And the machine built from them loads.
    let r = detect(&Recorded(m), std::path::Path::new("/nonexistent"));
    assert!(r.notes.is_empty());
    let src = r.machine_toml(include_str!("../src/machines/host.toml"));
    let mach = Machine::from_toml(&src, "test").unwrap();
    assert_eq!(mach.tlbs.len(), 3);
}

#[test]
fn amd_leaves_decode_with_the_apm_associativity_codes() {
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"AuthenticAMD", 0x10));
    m.insert((0x8000_0000, 0), [0x8000_0019, 0, 0, 0]);
    // Fn8000_0005: L1 dTLB 4KB 64 entries fully associative (0xFF); iTLB 4KB 64 fully; 2MB: 32 fully / 16 fully.
    m.insert((0x8000_0005, 0), [(0xff << 24) | (32 << 16) | (0xff << 8) | 16, (0xff << 24) | (64 << 16) | (0xff << 8) | 64, 0, 0]);
    // Fn8000_0006: L2 dTLB 4KB 2048 entries code 8 (16-way); iTLB 512 entries code 6 (8-way).
    m.insert((0x8000_0006, 0), [0, (8 << 28) | (2048 << 16) | (6 << 12) | 512, 0, 0]);
    let t = amd_tlbs(&Recorded(m));
    let find = |level, stream, size| t.iter().find(|g| g.level == level && g.stream == stream && g.page_sizes == vec![size]).map(|g| (g.entries, g.ways));
    assert_eq!(find(1, "data", "4KiB"), Some((64, 64)));
    assert_eq!(find(1, "data", "2MiB"), Some((32, 32)));
    assert_eq!(find(2, "data", "4KiB"), Some((2048, 16)));
    assert_eq!(find(2, "instruction", "4KiB"), Some((512, 8)));
    assert_eq!(find(2, "data", "2MiB"), None, "zero entries: no such TLB");
}

#[test]
fn an_amd_way_count_that_leaves_sets_not_a_power_of_two_is_raised_and_marked_an_estimate() {
    // Recorded on an AMD EPYC of family 25 model 17 (Zen 4), 2026-11-27: Fn8000_0006 gives the
    // L2 data TLB 3072 entries with code 6 (8-way) for 4KB pages, 384 sets, and code 5 (6-way)
    // for 2MB pages; the iTLB 512 entries, codes 4 and 2.
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"AuthenticAMD", 0x10));
    m.insert((0x8000_0000, 0), [0x8000_0006, 0, 0, 0]);
    m.insert((0x8000_0006, 0), [(5 << 28) | (3072 << 16) | (2 << 12) | 512, (6 << 28) | (3072 << 16) | (4 << 12) | 512, 0, 0]);
    let t = amd_tlbs(&Recorded(m.clone()));
    let find = |stream, size| t.iter().find(|g| g.level == 2 && g.stream == stream && g.page_sizes == vec![size]).unwrap();
    let d4 = find("data", "4KiB");
    assert_eq!((d4.entries, d4.ways), (3072, 12));
    assert!(d4.source.contains("says 8-way") && d4.source.contains("384 sets") && d4.source.contains("ESTIMATE"), "{}", d4.source);
    // 3072 / 6 = 512 sets: kept as CPUID gives it, with a plain source.
    let d2 = find("data", "2MiB");
    assert_eq!((d2.ways, d2.source.as_str()), (6, "CPUID Fn8000_0006"));
    assert_eq!(find("instruction", "4KiB").ways, 4);
    // The machine built from them loads (it did not: "entries/ways = 384 sets, not a power of two").
    let r = detect(&Recorded(m), std::path::Path::new("/nonexistent"));
    let src = r.machine_toml(include_str!("../src/machines/host.toml"));
    Machine::from_toml(&src, "test").unwrap();
}

#[test]
fn family_19h_splits_into_zen_3_and_zen_4_by_model() {
    assert_eq!(core_resources("AuthenticAMD", 0x19, 0x01).rob, 256, "Milan");
    assert_eq!(core_resources("AuthenticAMD", 0x19, 0x21).rob, 256, "Vermeer");
    assert_eq!(core_resources("AuthenticAMD", 0x19, 0x11).rob, 320, "Genoa, this machine on 2026-11-27");
    assert_eq!(core_resources("AuthenticAMD", 0x19, 0x61).rob, 320, "Raphael");
    assert_eq!(core_resources("AuthenticAMD", 0x19, 0xA0).core, "Zen 4", "Bergamo");
}

#[test]
fn family_17h_splits_into_zen_and_zen_2_by_model() {
    let rome = core_resources("AuthenticAMD", 0x17, 0x31);
    assert_eq!((rome.core, rome.rob, rome.walkers), ("Zen 2", 224, 2), "Rome, this machine on 2026-12-01");
    assert_eq!(core_resources("AuthenticAMD", 0x17, 0x01).rob, 192, "Naples (Zen)");
    assert_eq!(core_resources("AuthenticAMD", 0x17, 0x71).core, "Zen 2", "Matisse");
    assert_eq!(core_resources("AuthenticAMD", 0x17, 0x08).core, "Zen / Zen+", "Pinnacle Ridge (Zen+)");
}

#[test]
fn hidden_leaves_fall_back_and_say_so() {
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"GenuineIntel", 0x1c));
    let r = detect(&Recorded(m), std::path::Path::new("/nonexistent"));
    assert!(r.tlbs.is_empty() && r.notes[0].contains("leaf 0x18"), "{:?}", r.notes);
    let src = r.machine_toml(include_str!("../src/machines/host.toml"));
    assert!(Machine::from_toml(&src, "test").is_ok());
}

#[test]
fn a_known_core_with_hidden_leaves_takes_its_own_preset_tlbs() {
    // Emerald Rapids (family 6, model 0xCF, stepping 2), as a KVM guest reads it: leaf 0x18 zeros.
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"GenuineIntel", 0x1c));
    m.insert((1, 0), [(0xC << 16) | (6 << 8) | (0xF << 4) | 2, 0, 0, 0]);
    let r = detect(&Recorded(m), std::path::Path::new("/nonexistent"));
    assert_eq!((r.family, r.model), (6, 0xCF));
    assert!(r.notes[0].contains("golden-cove preset") && r.notes[0].contains("leaf 0x18"), "{:?}", r.notes);
    let find = |level, size| r.tlbs.iter().find(|g| g.level == level && g.page_sizes.contains(&size)).map(|g| (g.entries, g.ways, g.hit_cycles));
    assert_eq!(find(1, "4KiB"), Some((96, 6, None)), "Golden Cove's load DTLB, not Zen 3's 64 entries");
    assert_eq!(find(2, "2MiB"), Some((2048, 16, Some(9))));
    assert!(r.tlbs[0].source.starts_with("machines/golden-cove.toml"), "{}", r.tlbs[0].source);
    let src = r.machine_toml(include_str!("../src/machines/host.toml"));
    assert!(src.contains("TLBs: machines/golden-cove.toml (CPUID gives none here)"), "{src}");
    let mach = Machine::from_toml(&src, "test").unwrap();
    assert_eq!(mach.tlbs.len(), r.tlbs.len());
    // A core with no preset of its own (Skylake-SP's arm also holds Ice Lake) keeps Zen 3's.
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"GenuineIntel", 0x1c));
    m.insert((1, 0), [(0x5 << 16) | (6 << 8) | (0x5 << 4) | 4, 0, 0, 0]);
    let r = detect(&Recorded(m), std::path::Path::new("/nonexistent"));
    assert!(r.tlbs.is_empty() && r.notes[0].contains("Zen 3 geometry"), "{:?}", r.notes);
}

#[test]
fn a_known_core_whose_cpuid_tlbs_are_smaller_than_its_own_takes_its_preset() {
    // An AMD EPYC of family 26 model 2 (Zen 5) as a KVM guest reads it, 2026-12-02: Fn8000_0005
    // gives the L1 TLBs the core has (96-entry data, 64-entry instruction, fully associative),
    // Fn8000_0006 a 128-entry L2 data TLB (the core's has 4096), Fn8000_0019 zeros.
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"AuthenticAMD", 0x1c));
    m.insert((1, 0), [0x00b0_0f21, 0, 0, 0]);
    m.insert((0x8000_0000, 0), [0x8000_0021, 0, 0, 0]);
    m.insert((0x8000_0005, 0), [0xff60_ff40, 0xff60_ff40, 0x300c_0140, 0x2008_0140]);
    m.insert((0x8000_0006, 0), [0x4080_2040, 0x6080_4040, 0x0400_8140, 0x0c00_9140]);
    let said = amd_tlbs(&Recorded(m.clone()));
    assert!(said.iter().any(|g| g.level == 2 && g.stream == "data" && g.entries == 128), "{said:?}");
    let r = detect(&Recorded(m.clone()), std::path::Path::new("/nonexistent"));
    assert_eq!((r.family, r.model, r.tlbs_from), (26, 2, TlbsFrom::PresetCpuidSmaller));
    assert!(r.notes[0].contains("128 entries") && r.notes[0].contains("4096") && r.notes[0].contains("zen5 preset"), "{:?}", r.notes);
    let find = |level, size| r.tlbs.iter().find(|g| g.level == level && g.stream == "data" && g.page_sizes.contains(&size)).map(|g| (g.entries, g.ways));
    assert_eq!(find(2, "4KiB"), Some((4096, 16)));
    assert_eq!(find(1, "1GiB"), Some((96, 96)), "the L1 data TLB holds 1GB pages too");
    let src = r.machine_toml(include_str!("../src/machines/host.toml"));
    assert!(src.contains("TLBs: machines/zen5.toml (CPUID gives smaller ones than this core has)"), "{src}");
    assert_eq!(Machine::from_toml(&src, "test").unwrap().tlbs.len(), r.tlbs.len());
    // A core with no preset of its own (a Zen 4, family 25 model 0x11) keeps what CPUID says.
    m.insert((1, 0), [(0xA << 20) | (1 << 16) | (0xF << 8) | (1 << 4) | 1, 0, 0, 0]);
    let r = detect(&Recorded(m), std::path::Path::new("/nonexistent"));
    assert_eq!((r.family, r.model), (0x19, 0x11));
    assert_eq!(r.tlbs_from, TlbsFrom::Cpuid, "{:?}", r.notes);
    // A core with a preset whose CPUID gives at least the preset's reach keeps CPUID's: an
    // Emerald Rapids whose leaf 0x18 shows a 2048-entry 16-way STLB for 4KB and 2MB pages.
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"GenuineIntel", 0x1c));
    m.insert((1, 0), [(0xC << 16) | (6 << 8) | (0xF << 4) | 2, 0, 0, 0]);
    m.insert((0x18, 0), [0, (16 << 16) | 0b11, 128, 3 | (2 << 5)]);
    let r = detect(&Recorded(m), std::path::Path::new("/nonexistent"));
    assert_eq!((r.tlbs_from, r.tlbs.len()), (TlbsFrom::Cpuid, 1), "{:?}", r.notes);
}

#[test]
fn an_unknown_intel_model_number_with_amx_and_a_2mib_l2_is_taken_as_golden_cove() {
    // A KVM guest on 2026-12-02, as it reads: leaf 1 model 0xA7 (a Rocket Lake number), leaf 7
    // with AMX-TILE, leaf 4 a 48KiB 12-way L1D, 2MiB 16-way L2 and 105MiB L3 (Sapphire Rapids'
    // caches; Rocket Lake has no AMX and a 512KiB L2), leaf 0x18 zeros.
    let mut m = HashMap::new();
    m.insert((0, 0), vendor_regs(b"GenuineIntel", 0x20));
    m.insert((1, 0), [0x000a_0678, 0, 0, 0]);
    m.insert((7, 0), [0x2, 0xf1bf_27eb, 0x1b41_5fde, 0xbfd1_4410]);
    m.insert((4, 0), [0x0400_0121, 0x02c0_003f, 0x3f, 0]);
    m.insert((4, 1), [0x0400_0122, 0x01c0_003f, 0x3f, 0]);
    m.insert((4, 2), [0x0400_0143, 0x03c0_003f, 0x7ff, 0]);
    m.insert((4, 3), [0x0400_4163, 0x0380_003f, 0x1_bfff, 4]);
    let r = detect(&Recorded(m.clone()), std::path::Path::new("/nonexistent"));
    assert_eq!((r.family, r.model), (6, 0xA7));
    assert_eq!(r.core.core, "Golden Cove / Raptor Cove", "{:?}", r.notes);
    assert!(r.notes.iter().any(|n| n.contains("AMX") && n.contains("model 0xa7")), "{:?}", r.notes);
    assert_eq!(r.tlbs_from, TlbsFrom::PresetCpuidHidden);
    assert!(r.tlbs.iter().any(|g| g.level == 2 && g.entries == 2048), "the golden-cove STLB: {:?}", r.tlbs);
    let src = r.machine_toml(include_str!("../src/machines/host.toml"));
    assert!(src.contains("golden-cove"), "{src}");
    assert!(src.contains("walk_fill_buffers = true"), "an Intel core's [cache]: {src}");
    // Without AMX the same model number stays unknown, and so does AMX beside another L2.
    m.insert((7, 0), [0x2, 0xf1bf_27eb, 0x1b41_5fde, 0xbfd1_4410 & !(1 << 24)]);
    let r = detect(&Recorded(m.clone()), std::path::Path::new("/nonexistent"));
    assert_eq!((r.core.core, r.tlbs_from), ("unknown core", TlbsFrom::Static));
    m.insert((7, 0), [0x2, 0xf1bf_27eb, 0x1b41_5fde, 0xbfd1_4410]);
    m.insert((4, 2), [0x0400_0143, 0x03c0_003f, 0x3ff, 0]);
    assert_eq!(detect(&Recorded(m), std::path::Path::new("/nonexistent")).core.core, "unknown core", "a 1MiB L2");
}

#[test]
fn this_machine_agrees_with_sysfs_on_its_caches() {
    let sys = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let from_sysfs = sysfs_caches(sys);
    if from_sysfs.is_empty() {
        eprintln!("skipped: no cache description in sysfs here");
        return;
    }
    let r = detect(&NativeCpuid, sys);
    assert_eq!(r.caches.len(), from_sysfs.len());
    for (a, b) in r.caches.iter().zip(&from_sysfs) {
        assert_eq!((a.level, a.bytes, a.ways, a.line, a.sets), (b.level, b.bytes, b.ways, b.line, b.sets), "{a:?} vs {b:?}");
    }
    let _ = cpuid_caches(&NativeCpuid, 4);
    assert!(Machine::load("host").is_ok());
}

#[test]
fn walk_loads_take_the_fill_buffers_on_intel_cores_only() {
    // Intel's walker loads look up the L1D and its fill buffers (mmu/host.rs,
    // walk_fill_buffers); AMD's guides say nothing of the kind.
    let (intel, why) = walk_fill_buffers("GenuineIntel");
    assert!(intel && why.contains("L1+FB"), "{why}");
    for vendor in ["AuthenticAMD", "HygonGenuine"] {
        let (on, why) = walk_fill_buffers(vendor);
        assert!(!on && why.starts_with("ESTIMATE"), "{vendor}: {why}");
    }
}
