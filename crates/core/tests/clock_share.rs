//! The daemons' clock on a shared last level (`stats::ClockShare`): the share it costs the run
//! at is solved again only once `CLOCK_SHARE_EVERY` accesses have passed since the last solve,
//! while every reported counter solves it afresh. Where the level is not shared the clock is
//! the cost model's total exactly.
mod common;

use common::{run_records as run, small_engine};
use superpager_core::engine::Engine;
use superpager_core::mmu::machine::Machine;
use superpager_core::stats::{cost_parts, cycles_total, CostInputs, CLOCK_SHARE_EVERY};
use superpager_core::trace::*;

const A: u64 = 0x4000_0000;
const SPAN: u64 = 16 << 20;

fn machine_file(rate: Option<f64>) -> String {
    common::shared_l3_file("clock-share", rate)
}

/// `n` loads at pseudo-random lines of the first `span` bytes of the mapping (a new seed a call,
/// so the run's totals, and with them its share, keep moving).
fn loads(n: u64, span: u64, seed: &mut u64) -> Vec<Result<Access, Event>> {
    (0..n).map(|_| Ok(Access::new(A + (common::xorshift(seed) >> 8) % span / 64 * 64, AccessKind::Load, 8))).collect()
}

fn start(rate: Option<f64>) -> Engine {
    let mut e = small_engine(&machine_file(rate), "base");
    run(&mut e, &[Err(Event::Context { pid: 1, tid: 1 }), Err(Event::Mmap { addr: A, len: SPAN, prot: 3, flags: 0x22, fd: -1, offset: 0 })]);
    e
}

/// The cost model's total with the share solved for the counts now.
fn fresh(e: &Engine) -> u64 {
    cycles_total(&e.snapshot()) as u64 + e.idle_cycles
}

#[test]
fn the_clock_keeps_a_share_for_its_window_and_solves_it_again_after() {
    let mut e = start(Some(0.05));
    let unshared = Machine::load(&machine_file(None)).unwrap();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    // More than a window's accesses since the start: the first read solves the share.
    run(&mut e, &loads(CLOCK_SHARE_EVERY + 1_000, 1 << 20, &mut seed));
    let solved_at = CostInputs::of(&e.snapshot());
    let ways = solved_at.shared(&e.mmu.machine).1.expect("the level is shared").ways;
    assert_eq!(e.now(), fresh(&e), "a solve: the clock is the cost model's total");
    // Within the window, over sixteen times the footprint: the run's fills, and its fresh
    // share, move; the clock keeps the share it solved.
    run(&mut e, &loads(CLOCK_SHARE_EVERY / 2, SPAN, &mut seed));
    let now = CostInputs::of(&e.snapshot());
    assert!(now.accesses - solved_at.accesses < CLOCK_SHARE_EVERY);
    let moved = now.shared(&e.mmu.machine).1.unwrap().ways;
    assert!((moved - ways).abs() > 0.01, "the fresh share moved ({ways} to {moved} ways)");
    let stale: f64 = cost_parts(&unshared, &now.with_last_level_ways(ways)).iter().map(|(_, v)| v).sum();
    assert_eq!(e.now(), stale as u64 + e.idle_cycles, "the clock costs the run at the share it solved");
    assert_ne!(e.now(), fresh(&e), "and that is not the fresh share's total");
    // Past the window: solved again.
    run(&mut e, &loads(CLOCK_SHARE_EVERY / 2 + 1, SPAN, &mut seed));
    assert_eq!(e.now(), fresh(&e));
    // Reported counters solve the share afresh whatever the clock holds.
    run(&mut e, &loads(1_000, SPAN, &mut seed));
    let r = e.results();
    let again = CostInputs::of(&e.snapshot()).shared(&e.mmu.machine).1.unwrap();
    assert_eq!(r.counters["cache.L3.kept_ways_x1000"], (again.ways * 1000.0).round() as u64);
}

#[test]
fn where_the_level_is_not_shared_the_clock_is_the_total() {
    let mut e = start(None);
    let mut seed = 7u64;
    for n in [10, 5_000, CLOCK_SHARE_EVERY, 3] {
        run(&mut e, &loads(n, SPAN, &mut seed));
        assert_eq!(e.now(), fresh(&e), "after {n} more loads");
    }
}
