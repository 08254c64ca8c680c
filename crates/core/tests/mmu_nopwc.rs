//! `MACHINE+nopwc`: the same machine with no page-walk caches, so every walk reads each level
//! from the top (to measure what the caches give, and what a walker without them would cost).

mod common;
use common::{gen_file, simulate};
use superpager_core::mmu::machine::Machine;

#[test]
fn without_walk_caches_every_walk_reads_every_level() {
    let trace = gen_file("nopwc-gups.spt", "gups", 64 << 20, 50_000, 5);
    let with = simulate(&trace, "skylake", "base", true);
    let without = simulate(&trace, "skylake+nopwc", "base", true);
    let (w, wo) = (&with.counters, &without.counters);
    assert_eq!(w["walks"], wo["walks"], "the TLBs are the same, so the same accesses walk");
    assert!(w["pwc.hits"] > 0, "skylake's walks hit its caches");
    assert_eq!(wo.get("pwc.hits").copied().unwrap_or(0), 0, "none to hit");
    // Four levels a walk on 4KB pages, none spared.
    assert_eq!(wo["walk.refs"], 4 * wo["walks"], "{wo:?}");
    assert!(w["walk.refs"] < wo["walk.refs"]);
}

#[test]
fn a_machine_without_walk_caches_refuses_the_modifier() {
    let Err(e) = Machine::load("skylake+nopwc+nopwc") else { panic!("refused") };
    let e = e.to_string();
    assert!(e.contains("has no page-walk caches, so +nopwc changes nothing"), "{e}");
}
