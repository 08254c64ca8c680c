//! AMSQM's transitions against hand-worked sequences (Itshak and Wiseman 2009; docs/AMSQM.md).
//! Classes here: 4KB, 8KB and 16KB units (1, 2 and 4 base pages); β = 4 gives bounds 4, 8
//! and 16, γ = 0.25. Lists are shown MRU first.

mod common;
use common::replacement_counter;
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::replacement::amsqm::Amsqm;
use superpager_core::replacement::{PageRef, Part, Replacement};
use superpager_core::spec::Params;
use superpager_core::trace::{Access, AccessKind, Chunk, Event};
use superpager_core::units::Bytes;

const K: u64 = 4096;

fn unit(class: u32, i: u64) -> PageRef {
    PageRef { pid: 1, start: 0x100_0000 + i * 0x10_0000 + ((class as u64) << 40), size_idx: class }
}

fn amsqm(params: &[(&str, &str)]) -> Amsqm {
    let p: Params = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut a = Amsqm::build(&p).unwrap();
    a.set_page_sizes(&[1, 2, 4], K);
    a
}

fn counter(a: &Amsqm, key: &str) -> u64 {
    replacement_counter(a, key)
}

/// Class `c`'s lists: T1, T2, B1, B2, Q.
#[track_caller]
fn lists(a: &Amsqm, c: usize, want: [&[PageRef]; 5]) {
    assert_eq!(a.lists(c), want.map(|l| l.to_vec()));
    a.check().unwrap();
}

#[test]
fn a_miss_enters_t1_of_its_class_and_a_reference_moves_it_to_t2() {
    let mut a = amsqm(&[]);
    let (x, y) = (unit(0, 1), unit(1, 1));
    a.on_insert(x);
    a.on_insert(y);
    lists(&a, 0, [&[x], &[], &[], &[], &[]]);
    lists(&a, 1, [&[y], &[], &[], &[], &[]]);
    a.on_reference(y);
    lists(&a, 1, [&[], &[y], &[], &[], &[]]);
    assert_eq!(a.count(&y), Some(1));
    assert_eq!(a.len(), 2);
}

#[test]
fn a_count_saturates_at_its_bound_and_is_aged_to_gamma_times_it() {
    let mut a = amsqm(&[]);
    let x = unit(0, 1); // class 0: bound 4·1/1 = 4
    a.on_insert(x);
    for want in [1, 2, 3, 4, 1] {
        a.on_reference(x);
        assert_eq!(a.count(&x), Some(want));
    }
    assert_eq!(counter(&a, "replacement.amsqm.counts_aged"), 1);
}

#[test]
fn the_class_of_highest_rank_gives_up_memory() {
    // Two 4KB and two 8KB units, targets 0: dif = 2 and 4 base pages (0.5 and 1 of the
    // largest); class 0's LRU unit is the oldest (rec 1 against 0). α = 0.5: ranks 0.75 and
    // 0.5, so class 0 gives; α = 1 looks at the excess only, so class 1 gives.
    for (alpha, class) in [("0.5", 0), ("1", 1)] {
        let mut a = amsqm(&[("alpha", alpha)]);
        let (a0, x1, b0, y1) = (unit(0, 1), unit(1, 1), unit(0, 2), unit(1, 2));
        for u in [a0, x1, b0, y1] {
            a.on_insert(u);
        }
        let v = a.victim().unwrap();
        let want = if class == 0 { a0 } else { x1 };
        assert_eq!(v.page, want, "alpha {alpha}");
        // Evicted whole: the part named is the unit itself.
        assert_eq!(v.part, Some(Part { va: want.start, size_idx: want.size_idx }));
        lists(&a, class, [&[if class == 0 { b0 } else { y1 }], &[], &[want], &[], &[]]);
        assert_eq!(counter(&a, "replacement.amsqm.capacity"), 6);
    }
}

#[test]
fn a_ghost_hit_in_b1_grows_the_classes_t1_target() {
    let mut a = amsqm(&[]);
    let (x, y) = (unit(0, 1), unit(0, 2));
    a.on_insert(x);
    a.on_insert(y);
    assert_eq!(a.victim().unwrap().page, x); // |T1| = 2 > P = 0: T1 gives, into B1
    a.on_insert(x);
    assert_eq!(a.targets(0).0, 1.0);
    lists(&a, 0, [&[y], &[x], &[], &[], &[]]);
    assert_eq!(counter(&a, "replacement.amsqm.ghost_hits_b1"), 1);
}

#[test]
fn removing_the_victim_leaves_its_ghost_but_after_it_comes_back_removes_the_unit() {
    let mut a = amsqm(&[]);
    let (x, y) = (unit(0, 1), unit(0, 2));
    a.on_insert(x);
    a.on_insert(y);
    assert_eq!(a.victim().unwrap().page, x);
    // The OS unmaps the victim it is evicting: the ghost stays in B1.
    a.on_remove(x);
    lists(&a, 0, [&[y], &[], &[x], &[], &[]]);
    // Faulted back (a ghost hit), then unmapped: it leaves every list.
    a.on_insert(x);
    a.on_remove(x);
    lists(&a, 0, [&[y], &[], &[], &[], &[]]);
    assert_eq!(a.len(), 1);
}

#[test]
fn a_hot_ghost_hit_in_b2_grows_the_class_and_resets_the_count() {
    // x (class 1, bound 8) is referenced until its count is 5 > 2γ·bound = 4, then evicted
    // from T2 into B2. Its return is hot: s_1 grows to 1 and the count restarts at γ·8 = 2.
    // A lukewarm return (count 4) grows nothing, unless grow=always.
    for (refs, grow, hot, s) in [(5, "hot", 1, 1.0), (4, "hot", 0, 0.0), (4, "always", 0, 1.0)] {
        let mut a = amsqm(&[("grow", grow)]);
        let x = unit(1, 1);
        a.on_insert(x);
        for _ in 0..refs {
            a.on_reference(x);
        }
        assert_eq!(a.victim().unwrap().page, x); // T1 empty: T2 gives, into B2
        lists(&a, 1, [&[], &[], &[], &[x], &[]]);
        let p_before = a.targets(1).0;
        a.on_insert(x);
        lists(&a, 1, [&[], &[x], &[], &[], &[]]);
        assert_eq!(counter(&a, "replacement.amsqm.hot_ghost_hits"), hot, "{refs} references, grow={grow}");
        assert_eq!(a.targets(1), (p_before, s), "{refs} references, grow={grow}");
        if hot == 1 || grow == "always" {
            assert_eq!(a.count(&x), Some(2));
        }
    }
}

#[test]
fn demoted_pieces_enter_the_fraction_buffer_and_compete_with_t1() {
    let mut a = amsqm(&[]);
    let s = unit(2, 1); // a 16KB unit
    a.on_insert(s);
    for _ in 0..3 {
        a.on_reference(s);
    }
    // The OS demotes it into two 8KB pieces: they go to Q^1 with its count.
    a.note_demotion(s);
    a.on_remove(s);
    let p0 = PageRef { size_idx: 1, ..s };
    let p1 = PageRef { start: s.start + 2 * K, ..p0 };
    a.on_insert(p0);
    a.on_insert(p1);
    lists(&a, 1, [&[], &[], &[], &[], &[p1, p0]]);
    assert_eq!(a.count(&p0), Some(3));
    assert_eq!(counter(&a, "replacement.amsqm.demoted_pieces"), 2);
    // A new 8KB unit arrives after them; Q's LRU (p0) is older than T1's (n): p0 is evicted,
    // into B1 (T1 is over its target P = 0).
    let n = unit(1, 9);
    a.on_insert(n);
    lists(&a, 1, [&[n], &[], &[], &[], &[p1, p0]]);
    assert_eq!(a.victim().unwrap().page, p0);
    lists(&a, 1, [&[n], &[], &[p0], &[], &[p1]]);
    assert_eq!(counter(&a, "replacement.amsqm.evict_q"), 1);
    // A reference to a piece in Q moves it to T2.
    a.on_reference(p1);
    lists(&a, 1, [&[n], &[p1], &[p0], &[], &[]]);
    assert_eq!(counter(&a, "replacement.amsqm.hits_q"), 1);
}

#[test]
fn bad_parameters_name_the_key() {
    for (k, v, want) in [
        ("alpha", "2", "alpha"),
        ("beta", "0.5", "beta=0.5 must be at least 1"),
        ("gamma", "0.7", "gamma=0.7"),
        ("grow", "never", "grow"),
        ("depth", "1", "unknown parameter 'depth'"),
    ] {
        let p: Params = [(k.to_string(), v.to_string())].into_iter().collect();
        let e = Amsqm::build(&p).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(want), "{k}={v}: {e}");
    }
}

/// A write to a clean superpage demotes it, one size at a time around the written page, into
/// clean pieces in the fraction buffers; the written base page alone becomes dirty.
/// A 256KB-aligned region at B, and the base page of `amsqm09` (8KB).
const B: u64 = 0x4000_0000;
const PAGE: u64 = 8192;

/// An engine on `amsqm09` under navarro with `replacement`, after reading 17 of the 32 pages of a
/// 256KB region at B: past the threshold (0.5), navarro has promoted it with the rest prefetched.
fn promoted_region(replacement: &str) -> Engine {
    let m = Machine::load("amsqm09").unwrap();
    let p = policy::build("navarro", &m.page_sizes).unwrap();
    let cfg = EngineConfig { memory: Bytes(64 << 20), swap: Bytes(64 << 20), replacement: replacement.into(), validate: true, ..Default::default() };
    let mut e = Engine::new(m, p, cfg).unwrap();
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    c.events.push((0, Event::Mmap { addr: B, len: 1 << 20, prot: 3, flags: 0x22, fd: -1, offset: 0 }));
    for i in 0..17 {
        c.accesses.push(Access::new(B + i * PAGE, AccessKind::Load, 8));
    }
    e.run_chunk(&c).unwrap();
    e
}

#[test]
fn a_write_to_a_superpage_demotes_it_into_clean_pieces() {
    let mut e = promoted_region("amsqm");
    let page = PAGE;
    let t = e.os.procs[0].pt.lookup(B).unwrap();
    assert_eq!((t.size_idx, t.cow), (5, true), "a clean (write-protected) 256KB page");
    // Write the 6th base page.
    let mut w = Chunk::default();
    w.accesses.push(Access::new(B + 5 * page, AccessKind::Store, 8));
    e.run_chunk(&w).unwrap();
    e.validate().unwrap();
    let pt = &e.os.procs[0].pt;
    let sizes: Vec<(u64, u32, bool)> = [0u64, 16, 8, 4, 6, 5]
        .iter()
        .map(|&i| {
            let t = pt.lookup(B + i * page).unwrap();
            ((t.start - B) / page, t.size_idx, t.cow)
        })
        .collect();
    // 256KB -> 128KB [16..32) clean, then 64KB [8..16), 32KB [0..4), 16KB [6..8), and the two
    // base pages 4 (clean) and 5 (written, dirty).
    assert_eq!(sizes, vec![(0, 2, true), (16, 4, true), (8, 3, true), (4, 0, true), (6, 1, true), (5, 0, false)]);
    let r = e.results();
    let dirty: u64 = ["16KiB", "32KiB", "64KiB", "128KiB", "256KiB"].iter().map(|s| r.counters[&format!("demote.dirty.{s}")]).sum();
    assert_eq!(dirty, 5, "one demotion step per size");
    assert_eq!(r.counters["replacement.amsqm.demoted_pieces"], 10, "two pieces per step, each into a fraction buffer");
}

#[test]
fn the_seeds_machine_takes_its_base_page_as_a_parameter() {
    let m = Machine::load("amsqm09").unwrap();
    assert_eq!(m.base_page.to_string(), "8KiB");
    let m = Machine::load("amsqm09+base=4KiB").unwrap();
    assert_eq!(m.base_page.to_string(), "4KiB");
    let sizes: Vec<String> = m.page_sizes.iter().map(|s| s.to_string()).collect();
    assert_eq!(sizes, ["4KiB", "8KiB", "16KiB", "32KiB", "64KiB", "128KiB", "256KiB"]);
    // Both TLBs hold the new base page; the machine's name says how it was made.
    assert!(m.tlbs.iter().all(|t| t.sizes.contains(&0)));
    assert_eq!(m.name, "amsqm09+base=4KiB");
    for (spec, want) in [("amsqm09+base=512KiB", "8KiB is smaller than base_page 512KiB"), ("amsqm09+base=3KiB", "not a power of two")] {
        let e = Machine::load(spec).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(want), "{spec}: {e}");
    }
}

/// `repromote=true`: the next reference to a superpage that a write demoted promotes it again
/// in place, clean (write-protected), as the seed's promotion check at every request would.
#[test]
fn repromote_promotes_a_write_demoted_superpage_at_its_next_reference() {
    for (repromote, want) in [(false, (0, false)), (true, (5, true))] {
        let mut e = promoted_region(&format!("amsqm:repromote={repromote}"));
        let page = PAGE;
        let mut c = Chunk::default();
        // Write the 6th base page (demoted around it), then read the 20th (a walk: demotion
        // took the TLB entries down).
        c.accesses.push(Access::new(B + 5 * page, AccessKind::Store, 8));
        c.accesses.push(Access::new(B + 20 * page, AccessKind::Load, 8));
        e.run_chunk(&c).unwrap();
        e.validate().unwrap();
        let t = e.os.procs[0].pt.lookup(B + 20 * page).unwrap();
        let sp = if t.size_idx == 5 { (5, t.cow) } else { (0, false) };
        assert_eq!(sp, want, "repromote={repromote}: a 256KB page again, clean");
        let r = e.results();
        assert_eq!(r.counters["swap.write_repromotions"], repromote as u64);
        assert_eq!(r.counters["swap.write_repromote_refused"], 0);
    }
}
