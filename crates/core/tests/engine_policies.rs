//! The engine with the base and fixed policies: page sizes, TLB counts, faults, segfaults,
//! inferred regions, invariants and determinism.
mod common;
use common::*;
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::sim::Simulation;
use superpager_core::trace::gen::{generate, GenParams};
use superpager_core::trace::spt::SptWriter;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

fn gen_file(name: &str, kind: &str, size: u64, accesses: u64) -> String {
    common::gen_file(name, kind, size, accesses, 3)
}

fn run(path: &str, machine: &str, pol: &str, validate: bool) -> superpager_core::stats::Results {
    simulate(path, machine, pol, validate)
}

#[test]
fn base_maps_only_base_pages_and_fixed_only_its_size() {
    let p = gen_file("seq.spt", "seq", 16 << 20, 0);
    let b = run(&p, "skylake", "base", true);
    assert_eq!(b.page_size_mix["4KiB"], 1.0);
    assert_eq!(b.counters["faults"], 4096);
    assert_eq!(b.counters["footprint.bytes"], 16 << 20);
    let f = run(&p, "skylake", "fixed:2MiB", true);
    assert_eq!(f.page_size_mix["2MiB"], 1.0);
    assert_eq!(f.counters["faults"], 8);
    assert_eq!(f.counters["walks"], 8);
    assert!(b.counters["walks"] >= 4096);
    let g = run(&p, "skylake", "fixed:1GiB", true);
    assert_eq!(g.page_size_mix["1GiB"], 1.0, "fixed ignores VMA bounds by default, as Romer's FIXED");
    let h = run(&p, "skylake", "fixed:size=1GiB,fit=vma", true);
    assert_eq!(h.page_size_mix["2MiB"], 1.0, "fit=vma falls back to the largest size inside the 16MiB VMA");
    assert_eq!(h.counters["map.1GiB.crosses_vma"], 8);
}

#[test]
fn sequential_sweep_misses_once_per_page() {
    let p = gen_file("seq2.spt", "seq", 8 << 20, 0);
    let r = run(&p, "skylake", "base", false);
    assert_eq!(r.counters["tlb.L1d-4K.misses"], 2048);
    assert_eq!(r.counters["tlb.L1d-4K.hits"], (8 << 20) / 8 - 2048);
    assert_eq!(r.counters["accesses"], (8 << 20) / 8);
}

#[test]
fn same_trace_same_results() {
    let p = gen_file("det.spt", "zipf", 64 << 20, 200_000);
    let a = run(&p, "zen3", "base", false).to_json();
    let b = run(&p, "zen3", "base", false).to_json();
    assert_eq!(a, b);
}

#[test]
fn access_outside_every_vma_is_a_segfault_not_a_crash() {
    let p = tmp("segv.spt");
    write(
        &p,
        &[
            Rec::E(Event::Context { pid: 5, tid: 5 }),
            Rec::E(Event::Mmap { addr: 0x10000, len: 0x4000, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }),
            Rec::A(Access::new(0x10000, AccessKind::Store, 8)),
            Rec::A(Access::new(0x90000, AccessKind::Load, 8)),
            Rec::A(Access::new(0x11000, AccessKind::Load, 8)),
        ],
        100,
        true,
    );
    let r = run(&p, "skylake", "base", true);
    assert_eq!(r.counters["os.segv"], 1);
    assert_eq!(r.killed["5"], "SIGSEGV at 0x90000");
    assert_eq!(r.counters["os.accesses_dropped"], 2, "the faulting access and the one after it");
    assert_eq!(r.counters["accesses"], 1);
}

#[test]
fn traces_without_layout_events_get_inferred_regions() {
    let p = tmp("noevents.spt");
    let recs: Vec<Rec> = (0..100u64).map(|i| Rec::A(Access::new(0x5000_0000 + i * 4096, AccessKind::Load, 8))).collect();
    write(&p, &recs, 100, true);
    let r = run(&p, "skylake", "fixed:2MiB", true);
    assert!(r.counters["os.vmas_inferred"] >= 1);
    assert_eq!(r.counters["os.segv"], 0);
    assert_eq!(r.page_size_mix["2MiB"], 1.0);
}

#[test]
fn munmap_frees_and_shoots_down() {
    let p = tmp("munmap.spt");
    write(
        &p,
        &[
            Rec::E(Event::Mmap { addr: 0x20_0000, len: 0x20_0000, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }),
            Rec::A(Access::new(0x20_0000, AccessKind::Store, 8)),
            Rec::E(Event::Munmap { addr: 0x20_0000, len: 0x20_0000 }),
            Rec::E(Event::Mmap { addr: 0x20_0000, len: 0x20_0000, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }),
            Rec::A(Access::new(0x20_0000, AccessKind::Load, 8)),
        ],
        100,
        true,
    );
    let r = run(&p, "skylake", "base", true);
    assert_eq!(r.counters["faults"], 2, "the page was freed, so the second touch faults again");
    assert_eq!(r.counters["os.pages_freed"], 1);
    assert_eq!(r.counters["tlb.L1d-4K.misses"], 2, "the stale translation was shot down");
}

#[test]
fn out_of_memory_is_a_clear_error() {
    let p = gen_file("oom.spt", "seq", 128 << 20, 0);
    let m = Machine::load("skylake").unwrap();
    let cfg = EngineConfig { memory: Bytes(64 << 20), ..Default::default() };
    let mut s = Simulation::open(&p, vec![(m, "base".into())], cfg, false).unwrap();
    let mut err = None;
    loop {
        match s.step(8) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let e = err.expect("should run out of memory").to_string();
    assert!(e.contains("out of simulated memory") && e.contains("64MiB"), "{e}");
}

#[test]
fn unknown_names_list_the_valid_ones() {
    let e = Machine::load("pentium").unwrap_err().to_string();
    assert!(e.contains("skylake") && e.contains("alpha21264"), "{e}");
    let m = Machine::load("skylake").unwrap();
    let e = policy::build("navaro", &m.page_sizes).err().unwrap().to_string();
    assert!(e.contains("base") && e.contains("fixed"), "{e}");
    let e = policy::build("fixed:3MiB", &m.page_sizes).err().unwrap().to_string();
    assert!(e.contains("power of two"), "{e}");
    let e = policy::build("fixed:64KiB", &m.page_sizes).err().unwrap().to_string();
    assert!(e.contains("no 64KiB pages"), "{e}");
    let e = policy::build("base:x=1", &m.page_sizes).err().unwrap().to_string();
    assert!(e.contains("unknown parameter 'x'"), "{e}");
    let _ = Engine::new(m, policy::build("base", &[superpager_core::units::PageSize::K4]).unwrap(), EngineConfig::default()).unwrap();
}

/// The single-size fast path of base-pages-only runs changes no counter, sample or byte of the
/// results, on several machines (split, unified, multi-level, software-managed) and traces.
#[test]
fn fast_paths_change_no_result() {
    let segv = tmp("fp-segv.spt");
    write(
        &segv,
        &[
            Rec::E(Event::Context { pid: 2, tid: 2 }),
            Rec::E(Event::Mmap { addr: 0x10000, len: 0x40000, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }),
            Rec::A(Access::new(0x10000, AccessKind::Store, 8)),
            Rec::E(Event::Context { pid: 3, tid: 3 }),
            Rec::E(Event::Mmap { addr: 0x10000, len: 0x40000, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }),
            Rec::A(Access::new(0x20000, AccessKind::Load, 8)),
            Rec::E(Event::Context { pid: 2, tid: 2 }),
            Rec::A(Access::new(0x90000, AccessKind::Load, 8)),
            Rec::E(Event::Context { pid: 3, tid: 3 }),
            Rec::A(Access::new(0x20000, AccessKind::Load, 8)),
            Rec::A(Access::new(0x30000, AccessKind::Load, 8)),
        ],
        100,
        true,
    );
    let traces = [
        gen_file("fp-gups.spt", "gups", 64 << 20, 200_000),
        gen_file("fp-zipf.spt", "zipf", 64 << 20, 200_000),
        gen_file("fp-rb.spt", "rbtree", 2 << 20, 200_000),
        // Sequential first touches get ascending frames: zen3 coalesces, and the one-size
        // path hands over to the general one at the first coalesced fill.
        gen_file("fp-seq.spt", "seq", 8 << 20, 200_000),
        segv,
    ];
    for t in &traces {
        for machine in ["skylake", "zen3", "neoverse-n1", "romer95", "alpha21264"] {
            let json = |fast: bool| {
                let m = Machine::load(machine).unwrap();
                let cfg = EngineConfig { fast_paths: fast, sample_every: 50_000, ..Default::default() };
                let mut s = Simulation::open(t, vec![(m, "base".to_string())], cfg, false).unwrap();
                while s.step(8).unwrap() {}
                s.results().remove(0).to_json()
            };
            let fast = json(true);
            assert_eq!(fast, json(false), "{t} on {machine}");
            if machine == "zen3" && t.ends_with("fp-seq.spt") {
                assert!(fast.contains("\"coalesce.fills.32KiB\"") && !fast.contains("\"coalesce.fills\": 0"), "no coalescing on a sequential run");
            }
        }
    }
}

#[test]
fn several_runs_in_one_pass_equal_each_run_alone() {
    // One pass with several engines runs each over a window of chunks in a row, and half of them
    // on a second thread (sim.rs, run_engines); every counter must equal that of the same run on
    // its own. Small chunks: about 49, so three whole windows and a partial one.
    let p = tmp("multi.spt");
    let mut w = SptWriter::create(&p, &Provenance::new()).unwrap();
    w.set_chunk_records(4096);
    generate(&GenParams { kind: "zipf".into(), size: 64 << 20, accesses: 200_000, seed: 5, ..Default::default() }, &mut w, &mut |_| {}).unwrap();
    w.finish().unwrap();
    let runs = [("skylake", "base"), ("skylake", "linux-thp"), ("alpha21264", "navarro"), ("zen3", "fixed:2MiB"), ("romer95", "romer:approx-online")];
    let together = {
        let v = runs.iter().map(|(m, pol)| (Machine::load(m).unwrap(), pol.to_string())).collect();
        let mut s = Simulation::open(&p, v, EngineConfig::default(), false).unwrap();
        assert!(s.step(3).unwrap());
        // A step runs a whole window, though asked for 3 chunks.
        assert!(s.progress() > 0.25, "{}", s.progress());
        while s.step(3).unwrap() {}
        let busy = s.busy_seconds();
        assert_eq!(busy.len(), runs.len());
        assert!(busy.iter().all(|&b| b > 0.0), "{busy:?}");
        s.results()
    };
    for ((m, pol), t) in runs.iter().zip(&together) {
        let alone = run(&p, m, pol, false);
        assert_eq!(alone.counters, t.counters, "{m} {pol}");
    }
}
