//! A level `host` simulates smaller than CPUID says (a size calibrate saw, or the last level's
//! fit) is this machine's share of the whole: it keeps a power-of-two set count, indexed by the
//! address's low bits as the whole cache is, and gives up ways (`share_ways`). A level at
//! CPUID's size keeps CPUID's ways, whatever its set count.

use superpager_core::mmu::cache::{CacheLevelSpec, Caches, Requester};
use superpager_core::mmu::host::{calibrated_toml, detect, read_calibration, share_ways, CacheGeometry, CalibrationInput, HostReport};

mod common;

#[test]
fn a_share_keeps_a_power_of_two_of_sets_and_gives_up_ways() {
    // The last level's fit tries CPUID's size times 1, 3/4, 1/2, 3/8, ... (calibrate.py
    // FIT_SCALES): the halves keep 16 ways, the three quarters take 12.
    assert_eq!(share_ways(2 << 20, 64, 16), 16, "2MiB: 2,048 sets of 16");
    assert_eq!(share_ways(1536 << 10, 64, 16), 12, "1536KiB: 2,048 sets of 12, not 1,536 of 16");
    assert_eq!(share_ways(3 << 20, 64, 16), 12, "3MiB: 4,096 sets of 12");
    assert_eq!(share_ways(1 << 20, 64, 16), 16);
    assert_eq!(share_ways(5 << 20, 64, 16), 10, "5MiB: 8,192 sets of 10");
    // 17 lines' worth has no power-of-two set count at 16 ways or fewer: CPUID's ways (hashed).
    assert_eq!(share_ways(17 * 64 * 1024, 64, 16), 16);
    assert_eq!(share_ways(48 << 10, 64, 12), 12, "48KiB in 12 ways: 64 sets already");
}

fn geometry(level: u32, bytes: u64, ways: u32) -> CacheGeometry {
    CacheGeometry { level, kind: "Data".into(), bytes, ways, line: 64, sets: (bytes / 64 / ways as u64) as u32, source: "test".into() }
}

/// The calibration file for a two-level host whose second level calibrate sized at `l2`.
fn calibration_file(l2: &str, tag: &str) -> std::path::PathBuf {
    let template = common::CALIBRATION_TEMPLATE.replace("size = \"1MiB\"\nways = 8", "size = \"32MiB\"\nways = 16");
    let input = CalibrationInput { level_cycles: vec![4.0, 40.0], level_sizes: vec![String::new(), l2.into()], ..common::calibration_input() };
    let text = calibrated_toml(&template, &input).unwrap();
    let dir = std::env::temp_dir().join(format!("sp-share-ways-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("host.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `host` as a CPU with a 32KiB 8-way L1 and `l2` (CPUID's) reports it, with the calibration at
/// `path`.
fn host(path: &std::path::Path, l2: CacheGeometry) -> HostReport {
    let mut notes = Vec::new();
    let cal = read_calibration(path, "Test CPU", &mut notes).expect("reads back");
    let mut r = detect(&common::NoLeaves, std::path::Path::new("/nonexistent"));
    r.caches = vec![geometry(1, 32 << 10, 8), l2];
    r.model_name = "Test CPU".into();
    r.calibration = Some(cal);
    r
}

#[test]
fn the_calibration_file_and_host_simulate_a_three_quarter_share_in_twelve_ways() {
    let path = calibration_file("1536KiB", "file");
    let v: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["cache"]["levels"][1]["size"].as_str(), Some("1536KiB"));
    assert_eq!(v["cache"]["levels"][1]["ways"].as_integer(), Some(12), "the file's level is the share's shape");
    assert_eq!(v["cache"]["levels"][0]["ways"].as_integer(), Some(8), "a level at CPUID's size keeps its ways");
    // host, built from CPUID's geometry and this calibration, simulates the same shape.
    let r = host(&path, geometry(2, 32 << 20, 16));
    let t = r.cache_toml().unwrap();
    assert_eq!(t["levels"][1]["size"].as_str(), Some("1536KiB"));
    assert_eq!(t["levels"][1]["ways"].as_integer(), Some(12));
    assert_eq!(t["levels"][0]["ways"].as_integer(), Some(8));
    // `machines host --explain` says the shape beside the size.
    let rows = r.explain();
    let seen = rows.iter().find(|(k, _, _)| k == "L2 size seen").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(seen.1, "1536KiB, 12-way, 2048 sets");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_level_at_cpuids_size_keeps_its_ways_though_its_sets_are_no_power_of_two() {
    // 30MiB in 12 ways: 40,960 sets, hashed (cache.rs `set_of`), as CPUID gives it.
    let path = calibration_file("30MiB", "cpuid");
    let t = host(&path, geometry(2, 30 << 20, 12)).cache_toml().unwrap();
    assert_eq!((t["levels"][1]["size"].as_str(), t["levels"][1]["ways"].as_integer()), (Some("30MiB"), Some(12)));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// Lines 4KB apart at one offset (the probes of a binary search's upper levels on pages in
/// order) in a 1536KiB level: in 1,536 hashed sets of 16 they spread over every set; in 2,048
/// low-bit sets of 12, as in 2MiB of 2,048 sets of 16, they share 32 sets (bits 12-16 of the
/// address) and miss once those sets' ways are full.
#[test]
fn strided_lines_miss_in_the_share_as_in_the_whole_and_not_in_a_hashed_cache() {
    let misses = |ways: u32| {
        let spec = common::cache_spec(vec![CacheLevelSpec { name: "L3".into(), bytes: 1536 << 10, ways, cycles: 40.0 }]);
        let mut c = Caches::with_replay_thread(&spec, false);
        // 2,048 lines 4KB apart (8MiB), read twice: the second pass hits only what stayed.
        for _pass in 0..2 {
            for i in 0..2048u64 {
                c.access(i << 12, Requester::Data);
            }
        }
        let (levels, _) = c.counts();
        levels[0].misses[0]
    };
    let (hashed, share) = (misses(16), misses(12));
    assert!(hashed < 2048 + 100, "hashed: the second pass mostly hits ({hashed} misses)");
    assert_eq!(share, 4096, "low bits: 32 sets of 12 hold 384 of 2,048 lines, LRU keeps none of a cyclic pass");
}
