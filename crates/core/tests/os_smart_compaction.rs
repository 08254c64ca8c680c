//! Smart compaction (Trident §5.4): on memory fragmented by Trident's recipe, it frees 1GB
//! regions by copying only the chosen regions' occupied frames, where Linux's compaction copies
//! in address order and may free none.
use superpager_core::engine::EngineConfig;
use superpager_core::mmu::machine::Machine;
use superpager_core::scenario::{ensure_traces, Scenario};
use superpager_core::sim::ScenarioRun;

const SCENARIO: &str = r#"
memory = "3GiB"
seed = 1
machine = "skylake"
policy = "trident"

[[prelude]]
kind = "trident"
reads = "20K"

[[process]]
gen = "gups"
size = "1GiB"
accesses = "1M"
"#;

fn run(policy: &str) -> superpager_core::stats::Results {
    let sc = Scenario::parse(SCENARIO, "smart.toml").unwrap();
    ensure_traces(&sc, &mut |_, _| {}).unwrap();
    let cfg = EngineConfig { validate: true, ..Default::default() };
    let mut r = ScenarioRun::open(&sc, Machine::load("skylake").unwrap(), policy, cfg, &mut |_, _| {}).unwrap();
    while r.step(8).unwrap() {}
    r.results()
}

#[test]
fn smart_compaction_frees_a_1gb_region_that_normal_compaction_does_not() {
    let knobs = "fault_1g=false,scan_sleep_ms=1,alloc_sleep_ms=1";
    let smart = run(&format!("trident:{knobs}"));
    let normal = run(&format!("trident:{knobs},smart=false"));
    let c = |r: &superpager_core::stats::Results, k: &str| r.counters.get(k).copied().unwrap_or(0);
    assert!(c(&smart, "policy.smart_compaction.regions_freed") >= 1, "{:?}", smart.counters);
    assert_eq!(c(&smart, "policy.khugepaged.scan_1g.succeed"), 1);
    assert_eq!(smart.page_size_mix["1GiB"], 1.0);
    // Each region it freed cost at most a region's worth of copying.
    assert!(c(&smart, "policy.smart_compaction.bytes_copied") <= c(&smart, "policy.smart_compaction.regions_freed") << 30);
    assert_eq!(c(&normal, "policy.smart_compaction.attempts"), 0);
    assert!(c(&normal, "policy.khugepaged.scan_1g.succeed") <= c(&smart, "policy.khugepaged.scan_1g.succeed"));
}
