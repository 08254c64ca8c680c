//! Pids: a fork may reuse the pid of a process that exited (a new process, as Linux does), and
//! a fork naming a live process's pid is refused (counted as os.rejected.pid).
mod common;
use common::{run_records as run, small_engine as engine};
use superpager_core::trace::*;

fn store(va: u64) -> Result<Access, Event> {
    Ok(Access::new(va, AccessKind::Store, 8))
}
fn ctx(pid: u32) -> Result<Access, Event> {
    Err(Event::Context { pid, tid: pid })
}
fn fork(child: u32) -> Result<Access, Event> {
    Err(Event::Fork { child })
}
const HEAP: u64 = 0x60000;

#[test]
fn a_fork_reuses_the_pid_of_an_exited_process() {
    // The fuzzer's find: romer:asap maps the heap with a superpage, a child exits, and a second
    // fork under the same pid once copied the pages into the dead child's table.
    let mut e = engine("romer95", "romer:asap");
    let prelude = [ctx(1), Err(Event::Brk { addr: HEAP }), Err(Event::Brk { addr: 0x80_0000 }), store(0x60_0000)];
    run(&mut e, &prelude);
    run(&mut e, &[fork(2), ctx(2), store(0x60_0000), Err(Event::Exit { code: 0 }), ctx(1)]);
    run(&mut e, &[fork(2), ctx(2), store(0x60_0000)]);
    assert_eq!(e.os.counters.forks, 2);
    assert_eq!(e.os.counters.exits, 1);
    assert_eq!(e.os.counters.rejected_pid, 0);
    let twos: Vec<bool> = e.os.procs.iter().filter(|p| p.pid == 2).map(|p| p.alive).collect();
    assert_eq!(twos, [false, true], "the dead pid 2 keeps its entry; the new one is alive");
    assert_eq!(e.os.counters.cow_faults, 2, "each child's store broke copy-on-write");
    e.validate().unwrap();
}

#[test]
fn a_fork_onto_a_live_pid_is_refused() {
    let mut e = engine("skylake", "base");
    run(&mut e, &[ctx(1), Err(Event::Brk { addr: HEAP }), Err(Event::Brk { addr: 0x40_0000 }), store(HEAP), fork(2), fork(2), fork(1)]);
    assert_eq!(e.os.counters.forks, 1);
    assert_eq!(e.os.counters.rejected_pid, 2, "pid 2 after its fork, and the parent's own pid");
    assert_eq!(e.os.procs.iter().filter(|p| p.alive).count(), 2);
    e.validate().unwrap();
}
