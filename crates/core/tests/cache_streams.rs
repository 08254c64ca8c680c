//! The second level's stream prefetcher (mmu/cache.rs `Streams`, `[cache] stream_prefetch`;
//! docs/RUNTIME_MODEL.md, "Streams the prefetcher runs ahead of"): which of the program's
//! misses of the second level are streamed, and what the model charges for them.
mod common;

use common::count;
use superpager_core::mmu::cache::{timed_by_prefetch, CacheLevelSpec, CacheSpec, Caches, Requester};

/// Three small levels (1KiB, 8KiB, 32KiB), so a sweep over a mebibyte misses all of them.
fn small() -> CacheSpec {
    let level = |name: &str, bytes: u64, ways: u32, cycles: f64| CacheLevelSpec { name: name.into(), bytes, ways, cycles };
    CacheSpec::of_levels(64, vec![level("L1", 1 << 10, 2, 4.0), level("L2", 8 << 10, 4, 14.0), level("L3", 32 << 10, 8, 50.0)])
}

/// The references (line, requester) through caches laid out as `thread` and `here` say:
/// (streamed, the second level's data misses).
fn run(refs: &[(u64, Requester)], thread: bool, here: bool) -> (u64, u64) {
    let mut c = Caches::with_replay_thread(&small(), thread);
    if here {
        c = c.with_first_level_here();
    }
    for &(line, who) in refs {
        c.defer(line << 6, who);
    }
    let (levels, _) = c.counts();
    (c.streamed(), levels[1].misses[0])
}

fn data(lines: impl Iterator<Item = u64>) -> Vec<(u64, Requester)> {
    lines.map(|l| (l, Requester::Data)).collect()
}

/// A line of the 4KB frame `f` (64 lines to a frame).
const FRAME: u64 = 64;

#[test]
fn a_sweep_is_streamed_from_the_fourth_line_of_each_frame_up_or_down() {
    let frames = 256;
    let up = data(0..frames * FRAME);
    let (streamed, misses) = run(&up, false, false);
    assert_eq!(misses, frames * FRAME, "a sweep over 1MiB misses the 8KiB level every time");
    // AMD: l and l + 1 start the prefetch of l + 3; no stream crosses a 4KB frame.
    assert_eq!(streamed, frames * (FRAME - 3));
    let down = data((0..frames * FRAME).rev());
    assert_eq!(run(&down, false, false).0, frames * (FRAME - 3), "descending, as ascending");
}

#[test]
fn eight_sweeps_in_step_are_followed_and_a_ninth_takes_them_all_away() {
    // k arrays 8MiB apart, read in step: line i of each in turn.
    let in_step = |k: u64| data((0..16 * FRAME).flat_map(move |i| (0..k).map(move |a| a * (8 << 20) / 64 + i)));
    assert_eq!(run(&in_step(8), false, false).0, 8 * 16 * (FRAME - 3), "eight streams, one to a frame, all followed");
    // Nine frames missed in turn: each evicts the one least recently missed, the next to come.
    assert_eq!(run(&in_step(9), false, false).0, 0, "more streams than the prefetcher follows");
}

#[test]
fn strides_random_lines_and_the_walkers_references_are_not_streams() {
    assert_eq!(run(&data((0..4096).map(|i| 2 * i)), false, false).0, 0, "every other line");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random = data((0..100_000).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % (1 << 24)
    }));
    let (streamed, misses) = run(&random, false, false);
    assert!(misses > 99_000, "{misses}");
    assert_eq!(streamed, 0, "random lines over 1GiB");
    let walks: Vec<_> = (0..16 * FRAME).map(|l| (l, Requester::Walk)).collect();
    assert_eq!(run(&walks, false, false).0, 0, "the walker's references are not watched");
}

#[test]
fn the_count_is_the_same_wherever_the_levels_replay() {
    // A sweep with random data and walk references between its lines.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut refs = Vec::new();
    for i in 0..40 * FRAME {
        refs.push((i, Requester::Data));
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        refs.push(((1 << 20) + x % (1 << 16), if x & 1 == 0 { Requester::Data } else { Requester::Walk }));
    }
    let plain = run(&refs, false, false);
    assert!(plain.0 > 30 * (FRAME - 3), "{plain:?}");
    for (thread, here) in [(true, false), (false, true), (true, true)] {
        assert_eq!(run(&refs, thread, here), plain, "replay thread {thread}, first level here {here}");
    }
}

#[test]
fn streamed_references_are_timed_as_the_second_levels_hits_taken_from_below_it_in_proportion() {
    let timed = |f: f64, mut d: [u64; 4], streamed: u64| {
        timed_by_prefetch(&CacheSpec { stream_prefetch: f, ..small() }, &mut d, streamed);
        d
    };
    // 40 streamed of the 50 references the L3 (30) and memory (20) served.
    let served = [100, 50, 30, 20];
    assert_eq!(timed(1.0, served, 40), [100, 90, 6, 4], "memory gives 40 x 20/50 = 16, the L3 the other 24");
    assert_eq!(timed(0.5, served, 40), [100, 70, 18, 12], "half of them: 8 from memory, 12 from the L3");
    assert_eq!(timed(0.0, served, 40), served, "no prefetcher: unchanged");
    assert_eq!(timed(1.0, [10, 5, 0, 3], 9), [10, 8, 0, 0], "never more than the levels below served");
}

#[test]
fn stream_prefetch_changes_the_data_stall_of_a_sweep_and_no_count() {
    // 8MiB read once, 8 bytes at a time, on a two-level machine, in a trace that keeps each line
    // (as `capture --collapse line`; a trace collapsed by page shows a page's first line only):
    // every line misses the L2.
    let p = common::line_sweep("streams-sweep.spt", 8 << 20);
    let file = common::skylake_file("streams-machine.toml", common::TWO_LEVEL_CACHE);
    let at = |f: &str| common::simulate(&p, &format!("{file}+stream_prefetch={f}"), "base", false);
    let (off, on) = (at("0"), at("1"));
    let (streamed, misses) = (count(&off, "cache.L2.data.streamed"), count(&off, "cache.L2.data.misses"));
    // 2048 frames of 64 lines, the first three of each not streamed.
    assert!(misses >= 2048 * 64, "{misses}");
    assert_eq!(streamed, 2048 * 61, "{streamed} of {misses}");
    for (k, v) in &off.counters {
        if !k.starts_with("cycles.") && !k.starts_with("overlap.") {
            assert_eq!(on.counters.get(k), Some(v), "{k}: the prefetcher changes times, not counts");
        }
    }
    let (d0, d1) = (count(&off, "cycles.data"), count(&on, "cycles.data"));
    assert!(d1 * 5 < d0, "streamed misses cost as L2 hits: {d1} against {d0}");
}

#[test]
fn stream_prefetch_is_a_fraction_in_the_file_and_as_a_modifier() {
    common::check_cache_key("stream_prefetch", |c| c.stream_prefetch, "1.5", 0.25, 1.0, &["2", "-0.1", "x"]);
}
