//! Memory's line rate (`[cache] dram_line_cycles`, stats::cost_parts_of `cycles.bandwidth`;
//! docs/RUNTIME_MODEL.md, "Memory's line rate"): a run takes at least the lines it reads from
//! memory at that rate, work and stalls together.
mod common;

use common::count;

/// The accesses' cycles that the floor is set against: work, stalls and translations.
fn busy(r: &superpager_core::stats::Results) -> u64 {
    ["cycles.access", "cycles.data", "cycles.walk", "cycles.tlb"].iter().map(|k| count(r, k)).sum()
}

#[test]
fn a_sweep_takes_at_least_its_lines_from_memory_at_the_rate_and_no_count_changes() {
    // 8MiB read once on a two-level machine whose prefetcher runs ahead of every stream.
    let p = common::line_sweep("line-rate-sweep.spt", 8 << 20);
    let file = common::skylake_file("line-rate-machine.toml", common::TWO_LEVEL_CACHE);
    let at = |n: &str| common::simulate(&p, &format!("{file}+stream_prefetch=1+dram_line_cycles={n}"), "base", false);
    let (none, slow, fast) = (at("0"), at("200"), at("0.01"));
    assert!(!none.counters.contains_key("cycles.bandwidth"), "no rate, no part");
    let lines = count(&slow, "cache.dram.data") + count(&slow, "cache.dram.walk");
    assert!(lines >= 2048 * 64, "every line of the sweep from memory: {lines}");
    // At 200 cycles a line the rate holds the run: the accesses take the lines' time, to rounding.
    let held = busy(&slow) + count(&slow, "cycles.bandwidth");
    assert!(count(&slow, "cycles.bandwidth") > 0 && held.abs_diff(lines * 200) <= 5, "{held} against {}", lines * 200);
    assert_eq!(busy(&slow), busy(&none), "the floor adds its own part and moves no other");
    // A rate far above the run's own: the part is there, at 0, and the time as without it.
    assert_eq!((count(&fast, "cycles.bandwidth"), count(&fast, "cycles.total")), (0, count(&none, "cycles.total")));
    for (k, v) in &none.counters {
        if !k.starts_with("cycles.") && !k.starts_with("overlap.") {
            assert_eq!(slow.counters.get(k), Some(v), "{k}: the rate changes times, not counts");
        }
    }
    assert_eq!(count(&slow, "overlap.bandwidth_cycles"), lines * 200, "the floor itself, reported");
}

#[test]
fn dram_line_cycles_is_a_number_of_cycles_in_the_file_and_as_a_modifier() {
    common::check_cache_key("dram_line_cycles", |c| c.dram_line_cycles, "-1", 16.4, 3.0, &["-2", "x"]);
}
