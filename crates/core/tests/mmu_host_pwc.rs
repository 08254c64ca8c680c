//! A nested machine with data caches keeps page-walk caches of the host's entries
//! (`Mmu::host_pwcs`, mmu/pwc.rs): a host walk starts below the deepest host entry they hold,
//! the entries it skips are neither sent through the data caches nor counted in `walk.refs`,
//! and `pwc.host.*` count what they did. Without data caches a nested walk costs its full
//! (g+1)(h+1)-1 references as before.

mod common;
use common::{gen_file, simulate, skylake_file, TWO_LEVEL_CACHE};

/// skylake with a two-level data cache, nested over 4KB host pages; `cache` false leaves the
/// data caches out.
fn machine_file(name: &str, cache: bool) -> String {
    let nested = "\n[walker.nested]\nhost_levels = 4\nhost_page_size = \"4KiB\"\n";
    skylake_file(name, &format!("{}{nested}", if cache { TWO_LEVEL_CACHE } else { "" }))
}

#[test]
fn host_entries_the_host_pwcs_hold_are_not_read() {
    let trace = gen_file("hpwc-gups.spt", "gups", 64 << 20, 100_000, 3);
    let r = simulate(&trace, &machine_file("hpwc-cached.toml", true), "base", true);
    let c = &r.counters;
    let (hits, misses) = (c["pwc.host.hits"], c["pwc.host.misses"]);
    assert!(hits > 0 && misses > 0, "host pwc hits {hits}, misses {misses}");
    // Every walk reference counted went through the data caches, and none other.
    assert_eq!(c["walk.refs"], c["cache.L1d.walk.hits"] + c["cache.L1d.walk.misses"]);
    // Without data caches the same walks count the full two-dimensional walk, (g+1)(h+1)-1
    // references. A host-cache hit at level L lets the host walk skip the 4-(L-1) levels above
    // it: 1 to 3 a hit. A 64MiB footprint's guest-physical memory lies under a few host PDEs,
    // which the PDE cache keeps, so most hits skip 3.
    let full = simulate(&trace, &machine_file("hpwc-nocache.toml", false), "base", true);
    assert_eq!(full.counters["walks"], c["walks"], "the host caches change no TLB or walk outcome");
    assert_eq!(full.counters["pwc.hits"], c["pwc.hits"], "nor the guest's walk caches");
    assert!(!full.counters.contains_key("pwc.host.hits"), "no host caches without data caches");
    let spared = full.counters["walk.refs"] - c["walk.refs"];
    assert!((2 * hits..=3 * hits).contains(&spared), "{spared} references spared by {hits} host pwc hits");
    // Same inputs, same counters.
    let again = simulate(&trace, &machine_file("hpwc-cached2.toml", true), "base", true);
    assert_eq!(again.counters, r.counters);
}
