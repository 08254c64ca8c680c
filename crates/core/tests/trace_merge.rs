//! `trace merge`: inputs interleaved by instruction clocks or round robin, processes renumbered,
//! every input record written once and in its order.

mod common;
use common::*;
use superpager_core::trace::merge::{merge, Interleave};
use superpager_core::trace::{Access, AccessKind, Event, Provenance};

fn load(addr: u64) -> Rec {
    Rec::A(Access::new(addr, AccessKind::Load, 8))
}

fn insns(n: u64) -> Rec {
    Rec::E(Event::Insns { count: n })
}

/// A program of `n` loads at `base + i * 4096`, each after an instruction mark of `step`.
fn program(name: &str, base: u64, n: u64, step: u64) -> String {
    let p = tmp(name);
    let mut recs = vec![Rec::E(Event::Context { pid: 1, tid: 1 })];
    for i in 0..n {
        recs.push(insns(step));
        recs.push(load(base + i * 4096));
    }
    recs.push(Rec::E(Event::Exit { code: 0 }));
    write(&p, &recs, 7, false);
    p
}

/// The output as (pid, address) per access, and the contexts it names.
fn who_accessed(path: &str) -> Vec<(u32, u64)> {
    let mut pid = 0;
    let mut out = Vec::new();
    for r in read_all(path).unwrap() {
        match r {
            Rec::E(Event::Context { pid: p, .. }) => pid = p,
            Rec::A(a) => out.push((pid, a.addr)),
            _ => {}
        }
    }
    out
}

#[test]
fn the_lowest_instruction_clock_runs_next() {
    // A retires 10 instructions per access, B 30: with a slice of 30 instructions, A runs
    // three accesses for each of B's.
    let a = program("merge-a.spt", 0x1000_0000, 9, 10);
    let b = program("merge-b.spt", 0x2000_0000, 3, 30);
    let out = tmp("merge-ab.spt");
    let s = merge(&[&a, &b], &out, Interleave::Instructions { slice: 30 }, &Provenance::new(), &mut |_| true).unwrap();
    let got: Vec<u32> = who_accessed(&out).iter().map(|x| x.0).collect();
    assert_eq!(got, vec![1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 2]);
    assert_eq!((s.processes, s.write.accesses), (2, 12));
}

#[test]
fn a_quantum_takes_turns_and_each_input_keeps_its_order() {
    let a = program("merge-q-a.spt", 0x1000_0000, 5, 1);
    let b = program("merge-q-b.spt", 0x2000_0000, 5, 1000);
    let out = tmp("merge-q.spt");
    merge(&[&a, &b], &out, Interleave::Quantum(2), &Provenance::new(), &mut |_| true).unwrap();
    let got = who_accessed(&out);
    let pids: Vec<u32> = got.iter().map(|x| x.0).collect();
    assert_eq!(pids, vec![1, 1, 2, 2, 1, 1, 2, 2, 1, 2]);
    for (pid, base) in [(1, 0x1000_0000u64), (2, 0x2000_0000)] {
        let mine: Vec<u64> = got.iter().filter(|x| x.0 == pid).map(|x| x.1).collect();
        assert_eq!(mine, (0..5).map(|i| base + i * 4096).collect::<Vec<_>>(), "process {pid}'s accesses in order, each once");
    }
}

#[test]
fn one_trace_given_twice_is_two_programs_and_forks_are_renumbered() {
    let p = tmp("merge-fork.spt");
    let recs = vec![
        Rec::E(Event::Context { pid: 7, tid: 7 }),
        load(0x1000),
        Rec::E(Event::Fork { child: 9 }),
        Rec::E(Event::Context { pid: 9, tid: 9 }),
        load(0x2000),
        Rec::E(Event::Exit { code: 0 }),
        Rec::E(Event::Context { pid: 7, tid: 7 }),
        load(0x3000),
        Rec::E(Event::Exit { code: 0 }),
    ];
    write(&p, &recs, 1024, false);
    let out = tmp("merge-fork-out.spt");
    let s = merge(&[&p, &p], &out, Interleave::Quantum(1), &Provenance::new(), &mut |_| true).unwrap();
    assert_eq!(s.processes, 4, "each copy's parent and child are processes of their own");
    let forks: Vec<u32> = read_all(&out)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            Rec::E(Event::Fork { child }) => Some(child),
            _ => None,
        })
        .collect();
    assert_eq!(forks.len(), 2);
    assert_ne!(forks[0], forks[1]);
    // And the merged trace runs: four processes, each access once.
    let r = simulate(&out, "skylake", "base", true);
    assert_eq!(r.counters["accesses"], 6);
}

#[test]
fn bad_arguments_are_refused() {
    let a = program("merge-bad.spt", 0x1000_0000, 2, 1);
    let out = tmp("merge-bad-out.spt");
    let e = |r: superpager_core::Result<_>| r.err().map(|e: superpager_core::Error| e.to_string()).unwrap_or_default();
    assert!(e(merge(&[], &out, Interleave::Quantum(1), &Provenance::new(), &mut |_| true)).contains("no input traces"));
    assert!(e(merge(&[&a], &out, Interleave::Quantum(0), &Provenance::new(), &mut |_| true)).contains("--quantum must be at least 1"));
    assert!(e(merge(&[&a], &out, Interleave::Instructions { slice: 0 }, &Provenance::new(), &mut |_| true)).contains("--slice"));
    let missing = tmp("merge-missing.spt");
    assert!(e(merge(&[&a, &missing], &out, Interleave::Quantum(1), &Provenance::new(), &mut |_| true)).contains("merge-missing.spt"));
}
