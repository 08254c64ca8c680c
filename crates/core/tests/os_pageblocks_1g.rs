//! Trident's 1GB pageblocks (its kernel fixes pageblock_order at 18): unmovable allocations
//! gather in whole 1GB regions and Linux's compaction skips those regions, so Linux's own
//! compaction can free 1GB regions on fragmented memory (Trident's Table 3, "normal
//! compaction"). With Linux's 2MB pageblocks, page tables land in the regions the program's
//! memory occupies and the migrate scanner empties regions that can never become free.
//! Also: compaction splits a huge page it has no free block of its size for, and moves its
//! base pages (Linux's migrate_pages on -ENOMEM).
mod common;
use superpager_core::engine::EngineConfig;
use superpager_core::stats::Results;

/// Memory fragmented by Trident's recipe (page cache scattered over every 1GB region), then a
/// 4GiB GUPS table: fault-time 1GB allocations fail, the scanner asks for compaction.
const SCENARIO: &str = r#"
memory = "8GiB"
seed = 1
machine = "skylake"
sample_every = 0

[[prelude]]
kind = "trident"

[[process]]
gen = "gups"
size = "4GiB"
accesses = "1M"
"#;

fn run(policy: &str) -> Results {
    common::run_scenario(
        SCENARIO,
        "pageblocks.toml",
        "skylake",
        policy,
        EngineConfig { validate: false, sample_every: 0, map_every: 1 << 40, map_region_shift: Some(30), ..Default::default() },
    )
}

const DAEMON: &str = "scan_sleep_ms=10,alloc_sleep_ms=10";

#[test]
fn linux_compaction_frees_1gb_regions_only_with_1gb_pageblocks_and_smart_compaction_copies_less() {
    let normal = run(&format!("trident:smart=false,pageblock_1g=true,{DAEMON}"));
    let normal_2m = run(&format!("trident:smart=false,pageblock_1g=false,{DAEMON}"));
    let smart = run(&format!("trident:pageblock_1g=true,{DAEMON}"));
    let promoted = |r: &Results| r.counters.get("policy.khugepaged.scan_1g.succeed").copied().unwrap_or(0);
    let copied = |r: &Results| r.counters["compact.bytes_migrated"];
    // Fault-time 1GB allocations failed in every run: the 1GB pages came from the scanner.
    for r in [&normal, &normal_2m, &smart] {
        assert!(r.counters["policy.fault.1g_fallback"] > 0);
    }
    for r in [&normal, &normal_2m, &smart] {
        eprintln!("C complete {} success {} promoted {}", r.counters["compact.complete"], r.counters["compact.success"], promoted(r));
    }
    assert!(promoted(&normal) >= 2, "Linux's compaction with 1GB pageblocks frees regions: {}", promoted(&normal));
    // With 2MB pageblocks it empties regions that hold page tables: fewer 1GB pages, each
    // bought with more copying.
    assert!(promoted(&normal_2m) < promoted(&normal), "{} against {}", promoted(&normal_2m), promoted(&normal));
    assert!(copied(&normal_2m) * promoted(&normal) > copied(&normal) * promoted(&normal_2m));
    // Huge pages it found no free 2MB block for were split and moved as base pages (Linux's
    // migrate_pages on -ENOMEM), each counted as a demotion by compaction.
    assert!(normal_2m.counters["compact.split"] > 0);
    assert_eq!(normal_2m.counters["compact.split"], normal_2m.counters["demote.compaction.2MiB"]);
    // Smart compaction: at least as many 1GB pages, fewer bytes copied per page.
    assert!(promoted(&smart) >= promoted(&normal));
    assert!(copied(&smart) * promoted(&normal) < copied(&normal) * promoted(&smart));
    // The map at the program's exit: with 1GB pageblocks the page tables sit in one region.
    let unmovable = |r: &Results| r.map.as_ref().unwrap().frames[0].cells.bytes().filter(|&b| b == b'3').count();
    assert_eq!(unmovable(&normal), 1, "{}", normal.map.as_ref().unwrap().frames[0].cells);
}
