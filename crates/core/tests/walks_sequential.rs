//! Walks into a sequential stream's next page (`walks.sequential`, mmu/mod.rs) and the share of
//! them a machine does ahead of the stream (`[cache] stream_ahead`, mmu/cache.rs;
//! docs/RUNTIME_MODEL.md, "Streams across pages").
mod common;

use common::count;

use superpager_core::mmu::machine::Machine;

#[test]
fn a_sweep_walks_into_its_next_page_once_it_has_crossed_two() {
    // 8MiB read once, 8 bytes at a time: 2048 pages of 4KB, each walked at least once, in order.
    let p = common::gen_file("walks-seq-sweep.spt", "seq", 8 << 20, 0, 1);
    let r = common::simulate(&p, "skylake", "base", false);
    let (walks, seq) = (count(&r, "walks"), count(&r, "walks.sequential"));
    assert!(walks >= 2048, "{walks}");
    // Every page from the third on follows the two below it.
    assert!(seq >= 2046 && seq <= walks, "{seq} of {walks}");
}

#[test]
fn random_walks_are_not_a_stream() {
    // GUPS over 1GiB: 262,144 pages, any two pages below a walk among the last 8 walks by chance
    // about 8 x 7 / 262,144^2 of the time.
    let p = common::gen_file("walks-seq-gups.spt", "gups", 1 << 30, 100_000, 7);
    let r = common::simulate(&p, "skylake", "base", false);
    let (walks, seq) = (count(&r, "walks"), count(&r, "walks.sequential"));
    assert!(walks > 90_000, "{walks}");
    // The first touches of the table are not a stream either: GUPS touches pages at random.
    assert!(seq * 1000 < walks, "{seq} of {walks}");
    eprintln!("random: {seq} of {walks}");
}

#[test]
fn stream_ahead_takes_the_sequential_walks_off_the_walk_stall() {
    let p = common::gen_file("walks-seq-cost.spt", "seq", 8 << 20, 0, 1);
    let file = common::skylake_file("walks-seq-machine.toml", common::TWO_LEVEL_CACHE);
    // On a dependent chain the walk stall is the walks' latencies, so the cut is exact.
    let at = |f: &str| common::simulate(&p, &format!("{file}+dependence=1+stream_ahead={f}"), "base", false);
    let (none, all, half) = (at("0"), at("1"), at("0.5"));
    let kept = 1.0 - count(&none, "walks.sequential") as f64 / count(&none, "walks") as f64;
    let w0 = count(&none, "cycles.walk") as f64;
    assert!(w0 > 0.0);
    for (r, f) in [(&all, 1.0), (&half, 0.5)] {
        let want = w0 * (1.0 - f * (1.0 - kept));
        let got = count(r, "cycles.walk") as f64;
        assert!((got - want).abs() <= 1.0 + want * 1e-9, "stream_ahead {f}: {got} against {want}");
        assert_eq!(count(r, "cycles.data"), count(&none, "cycles.data"), "the data stall does not change");
    }
    assert!(count(&all, "cycles.walk") * 100 < count(&none, "cycles.walk"), "a sweep's walks are nearly all sequential");
}

#[test]
fn stream_ahead_is_a_fraction_in_the_file_and_as_a_modifier() {
    let file = common::skylake_file("walks-seq-key.toml", &common::TWO_LEVEL_CACHE.replacen("rob = 224\n", "rob = 224\nstream_ahead = 1.5\n", 1));
    let e = Machine::load(&file).expect_err("1.5 is refused").to_string();
    assert!(e.contains("stream_ahead") && e.contains("1.5"), "{e}");
    let ok = common::skylake_file("walks-seq-ok.toml", &common::TWO_LEVEL_CACHE.replacen("rob = 224\n", "rob = 224\nstream_ahead = 0.25\n", 1));
    assert_eq!(Machine::load(&ok).unwrap().cache.unwrap().stream_ahead, 0.25);
    assert_eq!(Machine::load(&format!("{ok}+stream_ahead=1")).unwrap().cache.unwrap().stream_ahead, 1.0);
    for v in ["2", "-0.1", "x"] {
        let e = Machine::load(&format!("{ok}+stream_ahead={v}")).expect_err("refused").to_string();
        assert!(e.contains(&format!("+stream_ahead={v}")), "{e}");
    }
    let e = Machine::load("skylake+stream_ahead=1").expect_err("no [cache]").to_string();
    assert!(e.contains("+stream_ahead needs a machine with a [cache] section"), "{e}");
}
