//! A dependent chain's walks that start on guesses (`[cache] walk_ahead`, `walk_ahead2`,
//! `walk_ahead3`) hide only what fits under the data misses of the steps before each (mmu/cache.rs
//! `StepFit`; docs/RUNTIME_MODEL.md, "Walks ahead of a dependent chain").
mod common;

use common::count;

use superpager_core::mmu::machine::Machine;

#[test]
fn a_chains_walks_hide_by_the_share_that_fits_under_the_steps_before_them() {
    // A pointer chase over 64MiB of 64-byte elements: nearly every step walks and misses the
    // 1MiB L2, so the data misses far outlast the walks and only the step fit caps what hides.
    let p = common::gen_file("walk-ahead-chase.spt", "chase", 64 << 20, 200_000, 3);
    let file = common::skylake_file("walk-ahead-machine.toml", common::TWO_LEVEL_CACHE);
    let at = |marks: &str| common::simulate(&p, &format!("{file}+dependence=1{marks}"), "base", false);
    let (none, one, deep) = (at(""), at("+walk_ahead=0.5"), at("+walk_ahead=0.5+walk_ahead2=0.4+walk_ahead3=0.2"));
    // Nothing walks ahead: no step is marked, and no counter says otherwise.
    assert!(!none.counters.contains_key("walk_ahead.walk_cycles"));
    let w0 = count(&none, "cycles.walk") as f64;
    assert!(w0 > 0.0 && (count(&none, "cycles.data") as f64) > 2.0 * w0, "the misses outlast the walks");
    let (walked, fit) = (count(&one, "walk_ahead.walk_cycles") as f64, ["fit1", "fit2", "fit3"].map(|k| count(&one, &format!("walk_ahead.{k}_cycles")) as f64));
    assert!(walked > 0.0);
    assert!(fit[0] <= fit[1] && fit[1] <= fit[2] && fit[2] <= walked, "{fit:?} of {walked}");
    // A chase's steps miss one after another, so most walks fit under the one miss before.
    assert!(fit[0] > 0.5 * walked, "{fit:?} of {walked}");
    // Every walk is on the chain and the misses outlast them: the walk stall is what the guesses
    // leave, 1 - a of it, a = 0.5 f1 with one step, 0.1 f1 + 0.2 f2 + 0.2 f3 with three.
    let f = fit.map(|x| x / walked);
    for (r, a) in [(&one, 0.5 * f[0]), (&deep, 0.1 * f[0] + 0.2 * f[1] + 0.2 * f[2])] {
        let (got, want) = (count(r, "cycles.walk") as f64, w0 * (1.0 - a));
        assert!((got - want).abs() <= 2.0 + want * 1e-6, "{got} against {want} (a = {a})");
        assert_eq!(count(r, "cycles.data"), count(&none, "cycles.data"), "the data stall does not change");
    }
    // The same walks and references under each: only the cost differs.
    assert_eq!(count(&deep, "walk_ahead.walk_cycles"), count(&one, "walk_ahead.walk_cycles"));
    assert_eq!(count(&deep, "walk.refs"), count(&none, "walk.refs"));
}

#[test]
fn deeper_guesses_are_fractions_no_likelier_than_the_nearer_ones() {
    let with = |extra: &str| {
        common::skylake_file(
            &format!("walk-ahead-key{}.toml", extra.len()),
            &common::TWO_LEVEL_CACHE.replacen("rob = 224\n", &format!("rob = 224\n{extra}"), 1),
        )
    };
    let ok = with("walk_ahead = 0.9\nwalk_ahead2 = 0.6\nwalk_ahead3 = 0.1\n");
    let c = Machine::load(&ok).unwrap().cache.unwrap();
    assert_eq!((c.walk_ahead, c.walk_ahead2, c.walk_ahead3), (0.9, 0.6, 0.1));
    let e = Machine::load(&with("walk_ahead = 0.5\nwalk_ahead2 = 0.6\n")).expect_err("more than walk_ahead").to_string();
    assert!(e.contains("walk_ahead2") && e.contains("0.6"), "{e}");
    let e = Machine::load(&with("walk_ahead2 = 1.5\n")).expect_err("not a fraction").to_string();
    assert!(e.contains("walk_ahead2") && e.contains("1.5"), "{e}");
    // As modifiers, checked once all are applied (so their order on the line does not matter).
    assert_eq!(Machine::load(&format!("{ok}+walk_ahead3=0.5+walk_ahead2=0.7")).unwrap().cache.unwrap().walk_ahead3, 0.5);
    let e = Machine::load(&format!("{ok}+walk_ahead3=0.7")).expect_err("more than walk_ahead2").to_string();
    assert!(e.contains("walk_ahead3 0.7 is more than walk_ahead2 0.6"), "{e}");
    let e = Machine::load(&format!("{ok}+walk_ahead2=x")).expect_err("not a number").to_string();
    assert!(e.contains("+walk_ahead2=x"), "{e}");
}
