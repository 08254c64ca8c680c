//! Aligned placement of file mappings (Navarro et al.; notes §A.2.11; os/placement.rs): a file
//! mapping that names no address goes where its virtual and file offsets agree modulo the
//! largest superpage size no larger than it, so every process mapping a file can promote it.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const PAGE: u64 = 8192; // Alpha's base page
const MB: u64 = 1 << 20;
const ALIGNED: u64 = 0x1_0000_0000; // aligned to every superpage size
const MISALIGNED: u64 = 0x2_0020_0000; // 2MB-aligned (what Linux gives), not 4MB-aligned

fn engine(pol: &str) -> Engine {
    let m = Machine::load("alpha21264").unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(256 * MB), validate: true, ..Default::default() }).unwrap()
}

fn chunk(events: Vec<Event>, accesses: impl IntoIterator<Item = u64>) -> Chunk {
    let mut c = Chunk::default();
    for ev in events {
        c.events.push((0, ev));
    }
    for va in accesses {
        c.accesses.push(Access::new(va, AccessKind::Load, 8));
    }
    c
}

fn counter(e: &mut Engine, name: &str) -> u64 {
    let r = e.results();
    *r.counters.get(name).unwrap_or_else(|| panic!("no counter {name}"))
}

/// Process `pid` maps the 8MB file shared at `addr` and reads every page of it.
fn map_and_read(e: &mut Engine, pid: u32, addr: u64) {
    let open = Event::FileOpen { fd: 3, path: "/data/shared".into(), size: 8 * MB };
    let map = Event::Mmap { addr, len: 8 * MB, prot: 1, flags: MAP_SHARED, fd: 3, offset: 0 };
    e.run_chunk(&chunk(vec![Event::Context { pid, tid: pid }, open, map], (0..8 * MB / PAGE).map(|i| addr + i * PAGE))).unwrap();
}

fn proc(e: &mut Engine, pid: u32) -> &superpager_core::os::Process {
    let i = e.os.proc_index(pid);
    &e.os.procs[i]
}

/// The size index of the page that process `pid` reaches at trace address `va`.
fn size_seen(e: &mut Engine, pid: u32, va: u64) -> u32 {
    let p = proc(e, pid);
    p.pt.lookup(p.relocs.translate(va)).expect("mapped").size_idx
}

#[test]
fn both_processes_promote_a_shared_file_when_the_second_mapping_is_placed_aligned() {
    for (pol, second) in [("navarro", 3), ("navarro:align_files=false", 2)] {
        let mut e = engine(pol);
        map_and_read(&mut e, 1, ALIGNED);
        map_and_read(&mut e, 2, MISALIGNED);
        assert_eq!(size_seen(&mut e, 1, ALIGNED), 3, "{pol}: the first mapping is aligned: 4MB pages");
        assert_eq!(size_seen(&mut e, 2, MISALIGNED), second, "{pol}: the second mapping");
        assert_eq!(size_seen(&mut e, 2, MISALIGNED + 4 * MB), second, "{pol}: the second mapping");
        if second == 3 {
            assert_eq!(counter(&mut e, "placement.moved"), 1);
            assert_eq!(counter(&mut e, "placement.already_aligned"), 1);
            assert_eq!(counter(&mut e, "file.promote_refused.misaligned"), 0);
            let r = proc(&mut e, 2).relocs.ranges()[0];
            assert_eq!((r.start, r.end, r.to % (4 * MB)), (MISALIGNED, MISALIGNED + 8 * MB, 0));
        } else {
            assert_eq!(counter(&mut e, "placement.moved"), 0);
            // Fully mapped regions refused at promotion, or cached extents refused at a fault.
            let why = counter(&mut e, "file.promote_refused.misaligned") + counter(&mut e, "file.map_at_fault_refused.misaligned");
            assert!(why > 0, "{pol}: the refusals say why");
        }
    }
}

#[test]
fn a_mapping_is_aligned_to_its_file_offset_and_to_the_largest_size_that_fits() {
    // A 1MB mapping of the file from offset 64KB: the largest Alpha superpage that fits is
    // 512KB, and the virtual address must be 64KB past a 512KB boundary.
    let mut e = engine("navarro");
    let open = Event::FileOpen { fd: 3, path: "/data/f".into(), size: 4 * MB };
    let map = Event::Mmap { addr: ALIGNED, len: MB, prot: 1, flags: MAP_SHARED, fd: 3, offset: 64 << 10 };
    e.run_chunk(&chunk(vec![Event::Context { pid: 1, tid: 1 }, open, map], [])).unwrap();
    let r = proc(&mut e, 1).relocs.ranges()[0];
    assert_eq!((r.start, r.end), (ALIGNED, ALIGNED + MB), "moved: the trace's address is 0 past a 512KB boundary");
    assert_eq!(r.to % (512 << 10), 64 << 10);
    // Anonymous memory, small files, MAP_FIXED and private file mappings (which the OS model
    // does not promote) stay where the trace put them.
    let anon = Event::Mmap { addr: 0x3_0000_2000, len: 8 * MB, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 };
    let small = Event::Mmap { addr: 0x3_1000_2000, len: 16 << 10, prot: 1, flags: MAP_SHARED, fd: 3, offset: 0 };
    let fixed = Event::Mmap { addr: 0x3_2000_2000, len: MB, prot: 1, flags: MAP_SHARED | MAP_FIXED, fd: 3, offset: 0 };
    let private = Event::Mmap { addr: 0x3_3000_2000, len: MB, prot: 1, flags: MAP_PRIVATE, fd: 3, offset: 0 };
    e.run_chunk(&chunk(vec![anon, small, fixed, private], [])).unwrap();
    assert_eq!(proc(&mut e, 1).relocs.ranges().len(), 1);
    assert_eq!(counter(&mut e, "placement.smaller_than_superpage"), 1);
    assert_eq!(counter(&mut e, "placement.fixed_address"), 1);
    assert_eq!(counter(&mut e, "placement.private_mapping"), 1);
}

#[test]
fn later_events_on_a_moved_mapping_follow_it() {
    let mut e = engine("navarro");
    map_and_read(&mut e, 1, MISALIGNED);
    let pi = e.os.proc_index(1);
    let to = e.os.procs[pi].relocs.translate(MISALIGNED);
    assert_ne!(to, MISALIGNED);
    assert!(e.os.procs[pi].find_vma(to).is_some() && e.os.procs[pi].find_vma(MISALIGNED).is_none());
    // ld.so-style: a MAP_FIXED mapping over part of the moved range lands inside it.
    let over = Event::Mmap { addr: MISALIGNED + MB, len: 64 << 10, prot: 3, flags: MAP_PRIVATE | MAP_FIXED, fd: 3, offset: 0 };
    e.run_chunk(&chunk(vec![over], [])).unwrap();
    assert_eq!(counter(&mut e, "placement.inside_moved"), 1);
    let v = e.os.procs[pi].find_vma(to + MB).unwrap();
    assert_eq!((v.start, v.end), (to + MB, to + MB + (64 << 10)));
    // Unmapping the second half takes it away at its simulated address and stops translating it.
    e.run_chunk(&chunk(vec![Event::Munmap { addr: MISALIGNED + 4 * MB, len: 4 * MB }], [])).unwrap();
    let p = &e.os.procs[pi];
    assert!(p.find_vma(to + 4 * MB).is_none());
    assert!(p.find_vma(to).is_some());
    assert_eq!(p.relocs.translate(MISALIGNED + 4 * MB), MISALIGNED + 4 * MB);
    // A child inherits the placement; exit clears it.
    e.run_chunk(&chunk(vec![Event::Fork { child: 2 }], [])).unwrap();
    assert_eq!(proc(&mut e, 2).relocs.translate(MISALIGNED), to);
    e.run_chunk(&chunk(vec![Event::Exit { code: 0 }], [])).unwrap();
    assert!(e.os.procs[pi].relocs.is_empty());
}

#[test]
fn a_trace_mapping_inside_the_placement_window_is_a_clear_error() {
    let mut e = engine("navarro");
    map_and_read(&mut e, 1, MISALIGNED);
    let to = proc(&mut e, 1).relocs.translate(MISALIGNED);
    let clash = Event::Mmap { addr: to + 8 * MB, len: MB, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, fd: -1, offset: 0 };
    let err = e.run_chunk(&chunk(vec![clash], [])).unwrap_err().to_string();
    assert!(err.contains("placement window") && err.contains("align_files=false"), "{err}");
}

#[test]
fn policies_that_do_not_place_leave_every_address_alone() {
    let mut e = engine("base");
    map_and_read(&mut e, 1, MISALIGNED);
    assert!(proc(&mut e, 1).relocs.is_empty());
    assert_eq!(counter(&mut e, "placement.moved") + counter(&mut e, "placement.already_aligned"), 0);
}

#[test]
fn mremap_in_place_grows_a_moved_mapping_unless_it_would_reach_another() {
    let mut e = engine("navarro");
    map_and_read(&mut e, 1, MISALIGNED);
    let grow = Event::Mremap { old_addr: MISALIGNED, old_len: 8 * MB, new_addr: MISALIGNED, new_len: 16 * MB };
    e.run_chunk(&chunk(vec![grow], [])).unwrap();
    let r = proc(&mut e, 1).relocs.ranges()[0];
    assert_eq!(r.end, MISALIGNED + 16 * MB);
    let v = *proc(&mut e, 1).find_vma(r.to).unwrap();
    assert_eq!(v.end - v.start, 16 * MB);
    // A second moved mapping sits after the first one's gap; growing into it is refused.
    let other = 0x5_0020_0000;
    let map = Event::Mmap { addr: other, len: 8 * MB, prot: 1, flags: MAP_SHARED, fd: 3, offset: 0 };
    e.run_chunk(&chunk(vec![map], [])).unwrap();
    let too_far = Event::Mremap { old_addr: MISALIGNED, old_len: 16 * MB, new_addr: MISALIGNED, new_len: 4 << 30 };
    let err = e.run_chunk(&chunk(vec![too_far], [])).unwrap_err().to_string();
    assert!(err.contains("into another moved mapping"), "{err}");
}
