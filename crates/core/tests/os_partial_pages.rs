//! A trace from a 4KB-page machine replayed on a larger base page: two mappings may share one
//! base page. Unmapping one leaves the page to the other (bzip2 and sqlite3 under Debian's
//! ld.so: a file mapping read and unmapped, an anonymous mapping in the next 4KB). Before,
//! the munmap removed the shared 8KB page and the program faulted at an address it owned.
mod common;
use common::{run_records as run, small_engine};
use superpager_core::engine::Engine;
use superpager_core::trace::*;

fn engine(machine: &str) -> Engine {
    small_engine(machine, "base")
}

fn mmap(addr: u64, len: u64) -> Result<Access, Event> {
    Err(Event::Mmap { addr, len, prot: 3, flags: 0x22, fd: -1, offset: 0 })
}
fn munmap(addr: u64, len: u64) -> Result<Access, Event> {
    Err(Event::Munmap { addr, len })
}
fn store(va: u64) -> Result<Access, Event> {
    Ok(Access::new(va, AccessKind::Store, 8))
}

const A: u64 = 0x4002_844000;

#[test]
fn unmapping_one_of_two_mappings_that_share_a_base_page_keeps_the_page() {
    for machine in ["alpha21264", "amsqm09", "skylake"] {
        let mut e = engine(machine);
        let recs = vec![
            Err(Event::Context { pid: 1, tid: 1 }),
            // [A, A + 0x845f): ends 4KB into the 8KB page at A + 0x8000.
            mmap(A, 0x845f),
            // The next 4KB page, in the same 8KB page.
            mmap(A + 0x9000, 0x2000),
            store(A + 0x9aa8),
            munmap(A, 0x845f),
            store(A + 0x9aa8),
        ];
        run(&mut e, &recs);
        let p = &e.os.procs[0];
        assert!(p.alive, "{machine}: {:?}", p.killed);
        assert!(p.find_vma(A + 0x9aa8).is_some(), "{machine}: the second mapping is still there");
        assert!(p.find_vma(A).is_none(), "{machine}: the first mapping is gone");
        assert!(p.find_vma(A + 0x4000).is_none(), "{machine}: all of it");
    }
}

#[test]
fn a_page_no_mapping_still_holds_goes() {
    let mut e = engine("alpha21264");
    run(
        &mut e,
        &[
            Err(Event::Context { pid: 1, tid: 1 }),
            mmap(A, 0x845f),
            store(A + 0x8100),
            // Unmapped in two 4KB-granular steps: the shared 8KB page goes with the second.
            munmap(A + 0x8000, 0x1000),
            munmap(A, 0x8000),
        ],
    );
    let p = &e.os.procs[0];
    assert!(p.find_vma(A + 0x8000).is_none() && p.find_vma(A).is_none());
    assert!(p.partial_pages.is_empty(), "{:?}", p.partial_pages);
    assert_eq!(p.resident[0], 0);
}

#[test]
fn a_partial_unmap_inside_one_mapping_keeps_the_half_still_mapped() {
    let mut e = engine("alpha21264");
    run(&mut e, &[Err(Event::Context { pid: 1, tid: 1 }), mmap(A, 0x10000), munmap(A + 0x3000, 0x2000), store(A + 0x2800), store(A + 0x5800)]);
    let p = &e.os.procs[0];
    assert!(p.alive, "{:?}", p.killed);
    // [A + 0x3000, A + 0x5000) cuts into two 8KB pages, each still half mapped: both stay.
    assert!(p.find_vma(A + 0x2000).is_some() && p.find_vma(A + 0x4000).is_some());
}
