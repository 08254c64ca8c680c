//! A last level shared with other tenants (`[cache] tenant_fill_rate`): the level is simulated
//! whole, each hit counted by its depth in the set, and the cost model keeps the ways whose share
//! the program's own fills are of all fills (docs/RUNTIME_MODEL.md, "A last level shared by the
//! second").
mod common;

use superpager_core::mmu::cache::{CacheLevelSpec, CacheSpec, Caches, Requester};
use superpager_core::mmu::machine::Machine;
use superpager_core::stats::{cost_parts, CostInputs};

const LINE: u64 = 64;
/// The last level's sets: the same in the whole level and in every narrower one.
const SETS: u64 = 64;

fn spec(last_ways: u32, shared: bool) -> CacheSpec {
    CacheSpec {
        tenant_fill_rate: shared.then_some(0.5),
        ..common::cache_spec(vec![
            CacheLevelSpec { name: "L1".into(), bytes: 4 << 10, ways: 4, cycles: 4.0 },
            CacheLevelSpec { name: "L3".into(), bytes: SETS * LINE * last_ways as u64, ways: last_ways, cycles: 40.0 },
        ])
    }
}

fn stream() -> Vec<(u64, Requester)> {
    common::hot_and_wide_stream(0x9E37_79B9_7F4A_7C15, LINE)
}

fn run(spec: &CacheSpec) -> Caches {
    common::caches_after(spec, &stream())
}

#[test]
fn a_shared_levels_depths_give_exactly_what_each_narrower_level_of_its_sets_serves() {
    let whole = run(&spec(16, true));
    let depths = whole.last_level_depths(Requester::Data);
    assert_eq!(depths.len(), 16, "one count per way");
    let i = CostInputs {
        cache_data: whole.served(Requester::Data),
        cache_walk: whole.served(Requester::Walk),
        last_depth_data: depths,
        last_depth_walk: whole.last_level_depths(Requester::Walk),
        ..Default::default()
    };
    assert_eq!(i.with_last_level_ways(16.0), i, "all the ways: nothing moves");
    for w in 1..=16u32 {
        let narrow = run(&spec(w, false));
        let cut = i.with_last_level_ways(w as f64);
        assert_eq!(cut.cache_data, narrow.served(Requester::Data), "{w} ways, the program's references");
        assert_eq!(cut.cache_walk, narrow.served(Requester::Walk), "{w} ways, the walker's");
    }
    // Half a way keeps half the hits found at depth 0, rounded.
    let half = i.with_last_level_ways(0.5);
    assert_eq!(half.cache_data[1], (i.last_depth_data[0] as f64 * 0.5).round() as u64);
    assert_eq!(half.cache_data.iter().sum::<u64>(), i.cache_data.iter().sum::<u64>(), "references are moved, not lost");
}

#[test]
fn a_level_not_shared_counts_no_depths() {
    let c = run(&spec(16, false));
    assert!(c.last_level_depths(Requester::Data).is_empty());
}

fn machine(rate: Option<f64>) -> Machine {
    Machine::load(&common::shared_l3_file("shared", rate)).unwrap()
}

/// 100,000 data references: 40,000 L1 hits, 1,000 at each depth of the 16-way last level,
/// 44,000 to memory.
fn inputs() -> CostInputs {
    CostInputs {
        accesses: 100_000,
        cache_data: vec![40_000, 16_000, 44_000],
        cache_walk: vec![0, 0, 0],
        last_depth_data: vec![1_000; 16],
        last_depth_walk: vec![0; 16],
        ..Default::default()
    }
}

#[test]
fn the_program_keeps_the_ways_its_fills_are_the_share_of() {
    let m = machine(Some(0.05));
    let (cut, share) = inputs().shared(&m);
    let s = share.expect("a shared level");
    assert_eq!(s.of_ways, 16);
    // At the share found, w / W = F / (F + R), F the memory references over the run's time.
    let ns = cost_parts(&m, &inputs()).iter().map(|(_, v)| v).sum::<f64>() / m.clock_ghz;
    let f = cut.cache_data[2] as f64 / ns;
    assert!((s.fills_per_ns - f).abs() < 1e-9 * f, "F {} against {f}", s.fills_per_ns);
    assert!((s.ways / 16.0 - f / (f + 0.05)).abs() < 1e-6, "kept {} of 16 ways; F {f}", s.ways);
    assert!(s.ways > 0.0 && s.ways < 16.0);
    assert_eq!(cut.cache_data.iter().sum::<u64>(), 100_000);
    // Busier tenants leave it less.
    let (_, busier) = inputs().shared(&machine(Some(0.5)));
    assert!(busier.unwrap().ways < s.ways, "{} against {}", busier.unwrap().ways, s.ways);
}

#[test]
fn without_tenants_the_level_is_the_programs_and_costs_are_as_before() {
    let m = machine(None);
    let (same, share) = inputs().shared(&m);
    assert!(share.is_none());
    assert_eq!(same, inputs());
}

#[test]
fn the_rate_is_a_machine_modifier_and_zero_unshares() {
    let path = common::skylake_file(
        "shared-modifier.toml",
        "\n[cache]\ndram_cycles = 300\nmlp = 10\nwalkers = 2\nrob = 224\ntenant_fill_rate = 0.05\n\
         [[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n\
         [[cache.levels]]\nname = \"L3\"\nsize = \"1MiB\"\nways = 16\ncycles = 40\n",
    );
    let rate = |spec: &str| Machine::load(spec).map(|m| m.cache.unwrap().tenant_fill_rate);
    assert_eq!(rate(&path).unwrap(), Some(0.05));
    assert_eq!(rate(&format!("{path}+tenant_fill_rate=0.2")).unwrap(), Some(0.2));
    assert_eq!(rate(&format!("{path}+tenant_fill_rate=0")).unwrap(), None);
    let err = rate(&format!("{path}+tenant_fill_rate=-1")).unwrap_err().to_string();
    assert!(err.contains("+tenant_fill_rate=-1: lines a ns"), "{err}");
    // In the file, a rate of zero or less is refused with its key.
    let bad = common::skylake_file("shared-bad.toml", "\n[cache]\ndram_cycles = 300\nmlp = 10\nwalkers = 2\nrob = 224\ntenant_fill_rate = 0\n[[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n[[cache.levels]]\nname = \"L3\"\nsize = \"1MiB\"\nways = 16\ncycles = 40\n");
    let err = Machine::load(&bad).unwrap_err().to_string();
    assert!(err.contains("tenant_fill_rate"), "{err}");
}

#[test]
fn a_share_exponent_below_one_leaves_a_busier_program_less_and_keeps_its_equation() {
    // The same inputs and tenants with `share_exponent` 0.7: the share found satisfies
    // w / W = F^a / (F^a + R^a), and since this program fills faster than the tenants (F > R),
    // it keeps less than under LRU's proportional share.
    let rate = 0.05;
    let lru = machine(Some(rate));
    let m = Machine::load(&format!("{}+share_exponent=0.7", common::shared_l3_file("shared-exp", Some(rate)))).unwrap();
    assert_eq!(m.cache.as_ref().unwrap().share_exponent, 0.7);
    let (cut, share) = inputs().shared(&m);
    let s = share.expect("a shared level");
    let ns = cost_parts(&m, &cut).iter().map(|(_, v)| v).sum::<f64>() / m.clock_ghz;
    let f = cut.cache_data[2] as f64 / ns;
    assert!(f > rate, "the case this test is about: F {f} above R {rate}");
    let want = f.powf(0.7) / (f.powf(0.7) + rate.powf(0.7));
    assert!((s.ways / 16.0 - want).abs() < 1e-6, "kept {} of 16 ways; F {f}, want {}", s.ways, want * 16.0);
    let (_, at_one) = inputs().shared(&lru);
    assert!(s.ways < at_one.unwrap().ways, "{} against LRU's {}", s.ways, at_one.unwrap().ways);
    // At 1 the key is LRU's share exactly (the default).
    let one = Machine::load(&format!("{}+share_exponent=1", common::shared_l3_file("shared-one", Some(rate)))).unwrap();
    assert_eq!(inputs().shared(&one).1.unwrap().ways, at_one.unwrap().ways);
}

#[test]
fn a_share_exponent_out_of_range_is_refused_by_name() {
    for v in ["0", "-1", "5", "x"] {
        let spec = format!("{}+share_exponent={v}", common::shared_l3_file("shared-bad", Some(0.05)));
        let Err(e) = Machine::load(&spec) else { panic!("{v}: accepted") };
        let e = e.to_string();
        assert!(e.contains("+share_exponent=") && e.contains("0.01 to 4"), "{v}: {e}");
    }
}
