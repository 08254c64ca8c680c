//! The reuse law of a shared last level (`[cache] share_law = "reuse"`, mmu/reuse.rs): the level
//! counts each hit by its depth and by the level's references since the line's last use, and
//! a share keeps a hit by the chance that fewer tenants' lines than the ways above it entered
//! its set in that time (docs/RUNTIME_MODEL.md, "A share that remembers when a line was last
//! used").
mod common;

use std::collections::HashMap;
use superpager_core::mmu::cache::{CacheLevelSpec, CacheSpec, Caches, Requester, ShareLaw};
use superpager_core::mmu::machine::Machine;
use superpager_core::mmu::reuse::{self, BUCKETS};
use superpager_core::stats::{cost_parts, CostInputs};

const LINE: u64 = 64;
const SETS: u64 = 64;
const WAYS: usize = 16;

fn spec(law: ShareLaw) -> CacheSpec {
    CacheSpec {
        tenant_fill_rate: Some(0.5),
        share_law: law,
        ..common::cache_spec(vec![
            CacheLevelSpec { name: "L1".into(), bytes: 4 << 10, ways: 4, cycles: 4.0 },
            CacheLevelSpec { name: "L3".into(), bytes: SETS * LINE * WAYS as u64, ways: WAYS as u32, cycles: 40.0 },
        ])
    }
}

fn stream() -> Vec<(u64, Requester)> {
    common::hot_and_wide_stream(0x2545_F491_4F6C_DD1D, LINE)
}

fn run(spec: &CacheSpec) -> Caches {
    common::caches_after(spec, &stream())
}

/// An independent reference: the two levels as plain lists in recency order, and the last
/// level's clock kept in a map by line; the last level's hits by (depth, gap bucket).
fn reference() -> [Vec<u64>; 2] {
    let mut l1: Vec<Vec<u64>> = vec![Vec::new(); 16]; // 4KiB in 4 ways of 64-byte lines: 16 sets
    let mut l3: Vec<Vec<u64>> = vec![Vec::new(); SETS as usize];
    let mut last_use: HashMap<u64, u64> = HashMap::new();
    let mut clock = 0u64;
    let mut hist = [vec![0u64; WAYS * BUCKETS], vec![0u64; WAYS * BUCKETS]];
    for (pa, who) in stream() {
        let line = pa / LINE;
        let r = if who == Requester::Data { 0 } else { 1 };
        let set = &mut l1[(line % 16) as usize];
        if let Some(p) = set.iter().position(|&t| t == line) {
            set.remove(p);
            set.insert(0, line);
            continue;
        }
        set.insert(0, line);
        set.truncate(4);
        let set = &mut l3[(line % SETS) as usize];
        let now = clock;
        clock += 1;
        if let Some(d) = set.iter().position(|&t| t == line) {
            hist[r][d * BUCKETS + reuse::bucket(now - last_use[&line])] += 1;
            set.remove(d);
        }
        set.insert(0, line);
        set.truncate(WAYS);
        last_use.insert(line, now);
    }
    hist
}

fn inputs(c: &Caches) -> CostInputs {
    let (served, depth, by_reuse) = c.served_depths_reuse(true);
    CostInputs {
        accesses: 60_000,
        cache_data: served[0].clone(),
        cache_walk: served[1].clone(),
        last_depth_data: depth[0].clone(),
        last_depth_walk: depth[1].clone(),
        last_reuse_data: by_reuse[0].clone(),
        last_reuse_walk: by_reuse[1].clone(),
        ..Default::default()
    }
}

#[test]
fn the_level_counts_each_hit_by_depth_and_gap_as_a_plain_list_and_clock_do() {
    let c = run(&spec(ShareLaw::Reuse));
    let (_, depth, by_reuse) = c.served_depths_reuse(true);
    let want = reference();
    assert_eq!(by_reuse[0], want[0], "the program's hits");
    assert_eq!(by_reuse[1], want[1], "the walker's hits");
    // Summed over the gaps, the counts are the depth law's.
    for r in 0..2 {
        let sums: Vec<u64> = (0..WAYS).map(|d| by_reuse[r][d * BUCKETS..(d + 1) * BUCKETS].iter().sum()).collect();
        assert_eq!(sums, depth[r]);
    }
    assert!(want[0].iter().sum::<u64>() > 1000, "the stream hits the level");
}

#[test]
fn under_the_depth_law_no_gaps_are_counted_and_served_counts_are_the_same() {
    let depth = run(&spec(ShareLaw::Depth));
    let by_reuse = run(&spec(ShareLaw::Reuse));
    assert!(depth.served_depths_reuse(true).2[0].is_empty());
    assert_eq!(depth.served_by_both(), by_reuse.served_by_both());
}

fn machine(law: &str) -> Machine {
    Machine::load(&format!("{}+share_law={law}", common::shared_l3_file("reuse-law", Some(0.05)))).unwrap()
}

#[test]
fn the_share_keeps_each_hit_by_its_poisson_chance_at_the_solved_share() {
    let m = machine("reuse");
    let i = inputs(&common::caches_after(m.cache.as_ref().unwrap(), &stream()));
    let (cut, share) = i.shared(&m);
    let s = share.expect("a shared level");
    // The hits kept are the law's with the tenants' 0.05 lines a ns over the run's own time
    // with those hits (a fixed point), spread over the level's sets.
    let ns = cost_parts(&m, &cut).iter().map(|(_, v)| v).sum::<f64>() / m.clock_ghz;
    let n = cut.cache_data.len();
    let sets = ((1u64 << 20) / 64 / 16) as f64;
    let refs = (i.cache_data[n - 2] + i.cache_data[n - 1] + i.cache_walk[n - 2] + i.cache_walk[n - 1]) as f64;
    let kept = reuse::kept(&i.last_reuse_data, 16, 0.05 * ns / refs / sets).round() as u64;
    assert!(cut.cache_data[n - 2].abs_diff(kept) <= 1, "{} kept against the law's {kept}", cut.cache_data[n - 2]);
    assert!(cut.cache_data[n - 2] < i.cache_data[n - 2], "the tenants take some");
    // The share reported is LRU's proportional share at the fills found.
    let f = (cut.cache_data[n - 1] + cut.cache_walk[n - 1]) as f64 / ns;
    assert!((s.fills_per_ns - f).abs() < 1e-9 * f);
    assert!((s.ways / 16.0 - f / (f + 0.05)).abs() < 1e-9, "kept {} of 16 ways; F {f}", s.ways);
    assert_eq!(cut.cache_data.iter().sum::<u64>(), i.cache_data.iter().sum::<u64>(), "references are moved, not lost");
    // The daemons' clock's ways keep as many hits under the depth law.
    let at = i.with_last_level_ways(s.depth_ways);
    let both = |x: &CostInputs| x.cache_data[n - 2] + x.cache_walk[n - 2];
    assert!(both(&at).abs_diff(both(&cut)) <= 2, "{} against {}", both(&at), both(&cut));
}

#[test]
fn lines_that_come_back_before_many_fills_are_kept_where_the_depth_law_loses_them() {
    // A 1MiB level (1,024 sets of 16 ways) and a program that mostly hits it: 4,000 hot lines
    // (about four to a set) used in turn, and every tenth reference a line never used again.
    // The tenants fill the level as fast as the program references it, ten times its own
    // fills, so the program's share is under three ways: the depth law loses a hot line found
    // with three or four of its set's other hot lines above it. But a hot line comes back after 4,444 of
    // the program's references, in which the tenants bring about four lines to its set: with
    // four hot lines above it, fewer than the sixteen ways, so the reuse law keeps it.
    let file = common::shared_l3_file("reuse-busy", Some(1.0));
    let mut c = Caches::new(Machine::load(&format!("{file}+share_law=reuse")).unwrap().cache.as_ref().unwrap());
    let mut hot = 0u64;
    for i in 0..400_000u64 {
        let pa = if i % 10 == 0 {
            (1 << 30) + i * LINE
        } else {
            hot = (hot + 1) % 4000;
            hot * LINE
        };
        c.defer(pa, Requester::Data);
    }
    let i = inputs(&c);
    let n = i.cache_data.len();
    let unshared = Machine::load(&common::shared_l3_file("reuse-busy", None)).unwrap();
    let refs_per_ns = (i.cache_data[n - 2] + i.cache_data[n - 1]) as f64 / (cost_parts(&unshared, &i).iter().map(|(_, v)| v).sum::<f64>() / unshared.clock_ghz);
    let busy = |law: &str| Machine::load(&format!("{file}+tenant_fill_rate={refs_per_ns}+share_law={law}")).unwrap();
    let (by_reuse, s) = i.shared(&busy("reuse"));
    let (by_depth, t) = i.shared(&busy("depth"));
    let (s, t) = (s.unwrap(), t.unwrap());
    assert!(t.ways < 3.0, "a share below the hot lines' depth: {t:?}");
    let whole = i.cache_data[n - 2];
    assert!(by_depth.cache_data[n - 2] < whole * 6 / 10, "the depth law loses those deeper than its share: {} of {whole}", by_depth.cache_data[n - 2]);
    assert!(by_reuse.cache_data[n - 2] > whole * 9 / 10, "the reuse law keeps most: {} of {whole} ({s:?})", by_reuse.cache_data[n - 2]);
}

#[test]
fn the_law_is_a_machine_key_and_a_modifier_and_a_bad_one_is_refused_by_name() {
    let law = |spec: &str| Machine::load(spec).map(|m| m.cache.unwrap().share_law);
    let file = common::shared_l3_file("reuse-key", Some(0.05));
    assert_eq!(law(&file).unwrap(), ShareLaw::Depth, "the depth law where absent");
    assert_eq!(law(&format!("{file}+share_law=reuse")).unwrap(), ShareLaw::Reuse);
    let err = law(&format!("{file}+share_law=lru")).unwrap_err().to_string();
    assert!(err.contains("+share_law=lru: depth or reuse"), "{err}");
    let written = common::skylake_file(
        "reuse-key-file.toml",
        "\n[cache]\ndram_cycles = 300\nmlp = 10\nwalkers = 2\nrob = 224\ntenant_fill_rate = 0.05\nshare_law = \"reuse\"\n\
         [[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n\
         [[cache.levels]]\nname = \"L3\"\nsize = \"1MiB\"\nways = 16\ncycles = 40\n",
    );
    assert_eq!(law(&written).unwrap(), ShareLaw::Reuse);
    let bad = common::skylake_file(
        "reuse-key-bad.toml",
        "\n[cache]\ndram_cycles = 300\nmlp = 10\nwalkers = 2\nrob = 224\ntenant_fill_rate = 0.05\nshare_law = \"lru\"\n\
         [[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n\
         [[cache.levels]]\nname = \"L3\"\nsize = \"1MiB\"\nways = 16\ncycles = 40\n",
    );
    let err = law(&bad).unwrap_err().to_string();
    assert!(err.contains("cache.share_law") && err.contains("\"lru\""), "{err}");
}
