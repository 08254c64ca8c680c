//! Bloat: bytes of resident superpages that no access touched (`EngineConfig::bloat`).
mod common;
use superpager_core::engine::EngineConfig;
use superpager_core::mmu::machine::Machine;
use superpager_core::sim::Simulation;
use superpager_core::stats::Results;

fn run(path: &str, policy: &str, bloat: bool) -> Results {
    let cfg = EngineConfig { bloat, validate: true, ..Default::default() };
    let mut s = Simulation::open(path, vec![(Machine::load("skylake").unwrap(), policy.to_string())], cfg, false).unwrap();
    while s.step(8).unwrap() {}
    s.results().remove(0)
}

#[test]
fn bloat_is_the_untouched_part_of_each_resident_superpage() {
    // 100K sequential 8-byte reads from the start of a 64MiB region: 196 base pages touched,
    // all inside the first 2MB page.
    let p = common::gen_file("bloat-seq.spt", "seq", 64 << 20, 100_000, 1);
    let touched = 196u64 * 4096;
    let two = run(&p, "fixed:2MiB", true);
    assert_eq!(two.counters["bloat.2MiB"], (2 << 20) - touched);
    assert_eq!(two.counters["bloat.total"], (2 << 20) - touched);
    let one = run(&p, "fixed:1GiB", true);
    assert_eq!(one.counters["bloat.1GiB"], (1 << 30) - touched);
    // Base pages bloat nothing; without the option no bloat field appears.
    assert_eq!(run(&p, "base", true).counters["bloat.total"], 0);
    assert!(!run(&p, "fixed:2MiB", false).counters.contains_key("bloat.total"));
}
