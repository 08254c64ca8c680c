//! `sees=`: which references a replacement policy hears of. By default (`walks`) a reference
//! the TLB serves leaves no trace, as on hardware; `sees=every` tells the policy of every
//! record, as a trace-driven replacement study sees its reference string.

mod common;
use common::replacement_counter;
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::trace::{Access, AccessKind, Chunk, Event};
use superpager_core::units::Bytes;

/// ARC's hit counters after page A is faulted in, page B after it, then A read three times
/// more (each a TLB hit: the machine's TLB holds both).
fn arc_hits(sees: &str) -> (u64, u64) {
    let m = Machine::load("skylake").unwrap();
    let p = policy::build("base", &m.page_sizes).unwrap();
    let cfg = EngineConfig { memory: Bytes(64 << 20), swap: Bytes(64 << 20), replacement: format!("arc:sees={sees}"), validate: true, ..Default::default() };
    let mut e = Engine::new(m, p, cfg).unwrap();
    const A: u64 = 0x4000_0000;
    const B: u64 = A + 0x1000;
    let mut c = Chunk::default();
    c.events.push((0, Event::Context { pid: 1, tid: 1 }));
    c.events.push((0, Event::Mmap { addr: A, len: 1 << 20, prot: 3, flags: 0x22, fd: -1, offset: 0 }));
    for va in [A, B, A, A, A] {
        c.accesses.push(Access::new(va, AccessKind::Load, 8));
    }
    e.run_chunk(&c).unwrap();
    e.validate().unwrap();
    let r = e.os.replacement.as_ref();
    (replacement_counter(r, "replacement.arc.hits_t1"), replacement_counter(r, "replacement.arc.hits_t2"))
}

#[test]
fn by_default_references_the_tlb_serves_are_not_seen() {
    assert_eq!(arc_hits("walks"), (0, 0), "both faults were the pages' requests; the TLB served the rest");
}

#[test]
fn sees_every_hears_each_tlb_hit() {
    // A's first re-reference finds it in T1 and moves it to T2; the next two find it in T2.
    assert_eq!(arc_hits("every"), (1, 2));
}
