//! Asynchronous pre-zeroing (Trident's `async_zeroing` branch): a daemon zeroes free 1GB
//! blocks while the machine is idle, and a 1GB fault that gets one skips the zero-fill.
mod common;
use superpager_core::engine::EngineConfig;
use superpager_core::os::frames::{FrameKind, PhysMem};
use superpager_core::stats::Results;
use superpager_core::units::{Order, Pfn};

/// A program that starts after 200 ms of idle time and faults in 2GiB.
const SCENARIO: &str = r#"
memory = "4GiB"
seed = 1
machine = "skylake"

[[process]]
gen = "gups"
size = "2GiB"
accesses = "200K"
start = "200ms"
"#;

fn run(policy: &str) -> Results {
    common::run_scenario(SCENARIO, "prezero.toml", "skylake", policy, EngineConfig { validate: true, ..Default::default() })
}

#[test]
fn idle_time_zeroes_1gb_blocks_and_1gb_faults_skip_the_zero_fill() {
    let off = run("trident:khugepaged=0");
    let on = run("trident:khugepaged=0,prezero=true");
    for r in [&off, &on] {
        assert_eq!(r.counters["policy.fault.1g_alloc"], 2);
    }
    assert_eq!(off.counters["os.zeroed_bytes"], 2 << 30);
    assert_eq!(off.counters["prezero.blocks_zeroed"], 0);
    // Every free 1GB block (memory less the kernel's boot reservation) was zeroed in the idle
    // time; the program used two.
    assert!(on.counters["prezero.blocks_zeroed"] >= 2, "{}", on.counters["prezero.blocks_zeroed"]);
    assert_eq!(on.counters["prezero.blocks_used"], 2);
    assert_eq!(on.counters["os.zeroed_bytes"], 0);
    assert!(on.counters["cycles.zero"] == 0 && off.counters["cycles.zero"] > 0);
    assert!(on.counters["policy.prezero.busy_cycles"] > 0);
    assert!(on.counters["policy.prezero.busy_cycles"] <= on.counters["cycles.idle"] + on.counters["cycles.total"]);

    // A daemon with no CPU zeroes nothing. (One test: the runs share a generated trace.)
    let r = run("trident:khugepaged=0,prezero=true,prezero_cpu=0");
    assert_eq!(r.counters["prezero.blocks_zeroed"], 0);
    assert_eq!(r.counters["os.zeroed_bytes"], 2 << 30);
}

#[test]
fn a_free_or_split_clears_the_flag_and_ordinary_allocations_take_unzeroed_blocks_first() {
    // Two 1GB regions of 4KB frames (max order 18).
    let mut m = PhysMem::new(2 << 18, 18, 9).unwrap();
    let z = m.prezero_one().expect("a free 1GB block");
    assert_eq!(m.prezero_one().map(|p| p != z), Some(true), "the second block is next");
    assert_eq!(m.prezero_one(), None, "both are zeroed");
    m.validate().unwrap();
    // A small allocation splits one of them: that region is no longer zeroed.
    let small = m.alloc(Order(0), FrameKind::Anon).unwrap();
    assert_eq!(m.zeroed_free_blocks(), 1);
    m.validate().unwrap();
    // A fault takes the remaining zeroed block whole and learns that it is zeroed.
    let big = m.alloc_zeroed_first(Order(18), FrameKind::Anon).unwrap();
    assert!(m.take_zeroed(big));
    assert!(!m.take_zeroed(big), "taken once");
    // Freed, it holds the program's data again.
    m.free(big, Order(18));
    m.free(small, Order(0));
    assert_eq!(m.zeroed_free_blocks(), 0);
    m.validate().unwrap();
    let again = m.alloc_zeroed_first(Order(18), FrameKind::Anon).unwrap();
    assert!(!m.take_zeroed(again));
    let _ = Pfn(0);
}
