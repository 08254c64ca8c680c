//! The `romer` policies on the OS model, with the invariant validator on: ASAP and ASAP-4-64's
//! reference rules, APPROX-ONLINE's threshold and the decrement of larger superpages, deferred
//! counters giving the same run as eager ones, and OFFLINE's plan.
mod common;
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy::{self, romer::Romer};
use superpager_core::trace::*;
use superpager_core::units::Bytes;

const BASE: u64 = 0x4000_0000; // 8MB-aligned
const FAR: u64 = 0x8000_0000; // another 8MB segment
const PAGE: u64 = 4096;

/// romer95 with one data TLB of `entries` entries (fully associative, LRU).
fn machine(entries: u32) -> Machine {
    let src = include_str!("../src/machines/romer95.toml");
    let dtlb_end = src.find("[[tlb]]\nname = \"ITLB\"").unwrap();
    let walker = src.find("[walker]").unwrap();
    let src = format!("{}{}", &src[..dtlb_end], &src[walker..]).replace("entries = 32\nways = 32", &format!("entries = {entries}\nways = {entries}"));
    Machine::from_toml(&src, "romer95-small").unwrap()
}

fn engine(pol: &str, entries: u32) -> Engine {
    let m = machine(entries);
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(512 << 20), validate: true, ..Default::default() }).unwrap()
}

/// Reference the addresses (the first call maps two 64MB regions, at BASE and FAR).
fn touch(e: &mut Engine, vas: impl IntoIterator<Item = u64>) {
    let mut c = Chunk::default();
    if e.accesses == 0 {
        c.events.push((0, Event::Context { pid: 1, tid: 1 }));
        for at in [BASE, FAR] {
            c.events.push((0, Event::Mmap { addr: at, len: 64 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
        }
    }
    for va in vas {
        c.accesses.push(Access::new(va, AccessKind::Load, 8));
    }
    e.run_chunk(&c).unwrap();
}

fn size_at(e: &mut Engine, va: u64) -> u64 {
    let pi = e.os.proc_index(1);
    let t = e.os.procs[pi].pt.lookup(va).expect("mapped");
    e.os.sizes[t.size_idx as usize].bytes()
}

fn counter(e: &mut Engine, name: &str) -> u64 {
    let r = e.results();
    *r.counters.get(name).unwrap_or_else(|| panic!("no counter {name}"))
}

fn romer(e: &mut Engine) -> &mut Romer {
    let r = (&mut *e.policy as &mut dyn std::any::Any).downcast_mut::<Romer>().unwrap();
    r.sync_evictions(&mut e.mmu);
    r
}

#[test]
fn asap_promotes_each_region_once_all_its_pages_are_referenced() {
    let mut e = engine("romer:asap", 32);
    touch(&mut e, [BASE, BASE + 2 * PAGE]);
    assert_eq!(size_at(&mut e, BASE), PAGE, "page 1 not referenced yet");
    touch(&mut e, [BASE + PAGE]);
    assert_eq!(size_at(&mut e, BASE), 2 * PAGE, "pages 0 and 1 referenced: an 8KB page");
    touch(&mut e, [BASE + 3 * PAGE]);
    assert_eq!(size_at(&mut e, BASE), 4 * PAGE, "pages 0..3: a 16KB page, copied again");
    assert_eq!(counter(&mut e, "policy.romer.promoted.8KiB"), 1);
    assert_eq!(counter(&mut e, "policy.romer.promoted.16KiB"), 1);
    // Copies are the whole superpage each time (worst case): 8KB + 16KB.
    assert_eq!(counter(&mut e, "policy.romer.copied_bytes"), 24 << 10);
    assert_eq!(counter(&mut e, "copy.bytes_direct"), 24 << 10);
    // A region with an unreferenced page never becomes a superpage, however hot.
    touch(&mut e, (0..1000).flat_map(|_| [BASE + 8 * PAGE, BASE + 10 * PAGE]));
    assert_eq!(size_at(&mut e, BASE + 8 * PAGE), PAGE);
    assert!(counter(&mut e, "policy.romer.not_promoted.8KiB.not_all_referenced") >= 2);
}

#[test]
fn asap_4_64_promotes_a_64kb_region_at_half_its_pages() {
    let mut e = engine("romer:asap-4-64", 32);
    touch(&mut e, (0..7).map(|i| BASE + i * 2 * PAGE));
    assert_eq!(size_at(&mut e, BASE), PAGE, "7 of 16 pages");
    touch(&mut e, [BASE + 14 * PAGE]);
    assert_eq!(size_at(&mut e, BASE), 64 << 10, "8 of 16 pages");
    // The untouched half was allocated by the promotion: memory overhead.
    assert_eq!(counter(&mut e, "footprint.bytes.64KiB"), 64 << 10);
    assert_eq!(counter(&mut e, "policy.romer.promoted.64KiB"), 1);
}

/// Misses that alternate between pages 0 and 1 while the other is resident: each charges
/// prefetch({0,1}) once. The pages between them are in another segment, so nothing else in
/// BASE's segment is charged except {0,1}'s ancestors.
fn ping_pong(e: &mut Engine, rounds: u64) {
    touch(e, (0..rounds).flat_map(|i| [BASE, FAR + (4 * i) * PAGE, BASE + PAGE, FAR + (4 * i + 2) * PAGE]));
}

#[test]
fn approx_online_promotes_at_the_threshold_and_decrements_larger_superpages() {
    // 8KB: R = 3000 x 8 / 30 = 800; threshold 0.125R = 100 prefetch charges.
    let mut e = engine("romer:approx-online", 3);
    ping_pong(&mut e, 50); // first reference to page 0 charges nothing: 99 charges
    let pi = e.os.proc_index(1);
    let asid = e.os.procs[pi].asid;
    assert_eq!(romer(&mut e).charges(asid, BASE, 2 * PAGE), Some((99, 0)));
    assert_eq!(size_at(&mut e, BASE), PAGE);
    touch(&mut e, [BASE]);
    assert_eq!(size_at(&mut e, BASE), 2 * PAGE, "promoted at the 100th charge");
    assert_eq!(counter(&mut e, "policy.romer.promoted.8KiB"), 1);
    // {0..3} had the same 100 charges; the threshold (100) was taken off.
    assert_eq!(romer(&mut e).charges(asid, BASE, 4 * PAGE), Some((0, 0)));
    // Bookkeeping: 100 cycles per miss beyond the 30-cycle handler (Table 3: 130).
    let misses = counter(&mut e, "policy.romer.misses");
    assert_eq!(counter(&mut e, "cycles.bookkeeping"), 100 * misses);
}

#[test]
fn a_higher_threshold_waits_longer() {
    let mut e = engine("romer:approx-online,threshold=0.25", 3);
    ping_pong(&mut e, 60);
    assert_eq!(size_at(&mut e, BASE), PAGE, "119 charges < 200");
    ping_pong(&mut e, 41);
    assert_eq!(size_at(&mut e, BASE), 2 * PAGE);
}

/// A reproducible mix of hot random pages and sweeps over 24MB.
fn mixed_trace() -> Vec<u64> {
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut v = Vec::new();
    for round in 0..40u64 {
        for _ in 0..20_000 {
            v.push(BASE + (common::xorshift(&mut x) % 6144) * PAGE);
        }
        for p in 0..512 {
            v.push(FAR + ((round * 512 + p) % 4096) * PAGE);
        }
    }
    v
}

#[test]
fn deferred_counters_change_nothing_but_their_own_bookkeeping() {
    let mut runs = Vec::new();
    for defer in ["true", "false"] {
        let mut e = engine(&format!("romer:online,defer={defer}"), 32);
        touch(&mut e, mixed_trace());
        let r = e.results();
        runs.push(r.counters);
    }
    let (a, b) = (&runs[0], &runs[1]);
    assert!(a["policy.romer.deferred_charges"] > 0, "deferral was exercised");
    assert_eq!(b["policy.romer.deferred_charges"], 0);
    let promoted: u64 = a.iter().filter(|(k, _)| k.starts_with("policy.romer.promoted.")).map(|(_, v)| v).sum();
    assert!(promoted > 0, "the trace promotes something");
    for (k, v) in a {
        if k.contains("deferred") {
            continue;
        }
        assert_eq!(Some(v), b.get(k), "counter {k} differs between deferred and eager");
    }
}

#[test]
fn online_and_approx_promote_the_hot_region_and_cut_misses() {
    let trace = mixed_trace();
    let mut walks = Vec::new();
    for pol in ["romer:fixed", "romer:approx-online", "romer:online"] {
        let mut e = engine(pol, 32);
        touch(&mut e, trace.iter().copied());
        walks.push(counter(&mut e, "walks"));
    }
    assert!(walks[1] * 2 < walks[0], "approx-online: {} walks vs {} with base pages", walks[1], walks[0]);
    assert!(walks[2] * 2 < walks[0], "online: {} walks vs {}", walks[2], walks[0]);
}

/// Random references over one 2MB region: about 376k misses with 4KB pages, more than R for
/// a 2MB superpage (204,800) but less than for 4MB (409,600).
fn hot_trace() -> Vec<u64> {
    let mut x = 0x0ddb_a11c_0ffe_e123u64;
    (0..400_000).map(|_| BASE + (common::xorshift(&mut x) % 512) * PAGE).collect()
}

#[test]
fn offline_plans_superpages_that_exist_from_the_start() {
    // OFFLINE needs a trace file: write the mixed trace as .spt.
    let dir = std::env::temp_dir().join(format!("superpager-romer-offline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mixed.spt");
    let mut w = superpager_core::trace::spt::SptWriter::create(path.to_str().unwrap(), &Default::default()).unwrap();
    w.event(Event::Context { pid: 1, tid: 1 }).unwrap();
    for at in [BASE, FAR] {
        w.event(Event::Mmap { addr: at, len: 64 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }).unwrap();
    }
    for va in hot_trace() {
        w.access(Access::new(va, AccessKind::Load, 8)).unwrap();
    }
    w.finish().unwrap();
    let m = machine(32);
    let cfg = EngineConfig { memory: Bytes(512 << 20), validate: true, ..Default::default() };
    let pol = policy::build("romer:offline", &m.page_sizes).unwrap();
    let pol = superpager_core::sim::plan(path.to_str().unwrap(), &m, pol, &cfg, &mut |_, _| {}).unwrap();
    let mut e = Engine::new(m, pol, cfg).unwrap();
    touch(&mut e, hot_trace());
    let walks = counter(&mut e, "walks");
    let promoted: u64 = e.results().counters.iter().filter(|(k, _)| k.starts_with("policy.romer.promoted.")).map(|(_, v)| v).sum();
    assert!(promoted >= 1, "OFFLINE planned superpages");
    // Greedy by benefit over cost: pages that each pay for their copy cover the hot 2MB and
    // exist from the first touch, so only their cold misses remain.
    for k in 0..512 {
        assert!(size_at(&mut e, BASE + k * PAGE) >= 512 << 10);
    }
    assert_eq!(counter(&mut e, "copy.bytes_direct"), 2 << 20);
    assert!(walks <= promoted, "{walks} misses for {promoted} superpages");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_parameters_are_named() {
    let m = machine(32);
    for (spec, want) in [
        ("romer", "needs a variant"),
        ("romer:sometimes", "unknown variant 'sometimes'"),
        ("romer:asap,size=64KiB", "size= is for romer:fixed"),
        ("romer:fixed,size=3KiB", "size"),
        ("romer:online,threshold=-1", "threshold=-1"),
        ("romer:online,defer=maybe", "defer=maybe"),
        ("romer:online,colour=red", "unknown parameter 'colour'"),
    ] {
        let err = policy::build(spec, &m.page_sizes).err().unwrap_or_else(|| panic!("{spec} was accepted")).to_string();
        assert!(err.contains(want), "{spec}: {err}");
    }
}

/// Two adjacent 32KB VMAs, all 16 pages referenced: the 64KB region is full but crosses the
/// VMA boundary, so ASAP falls back to the 32KB regions inside each (or, with past_vma=true,
/// takes the 64KB page as the paper's address-range model would).
#[test]
fn asap_falls_back_inside_a_vma_and_past_vma_crosses() {
    for (spec, want) in [("romer:asap", 32u64 << 10), ("romer:asap,past_vma=true", 64 << 10)] {
        let m = machine(32);
        let p = policy::build(spec, &m.page_sizes).unwrap();
        let mut e = Engine::new(m, p, EngineConfig { memory: Bytes(512 << 20), validate: true, ..Default::default() }).unwrap();
        let mut c = Chunk::default();
        c.events.push((0, Event::Context { pid: 1, tid: 1 }));
        c.events.push((0, Event::Mmap { addr: BASE, len: 8 * PAGE, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
        c.events.push((0, Event::Mmap { addr: BASE + 8 * PAGE, len: 8 * PAGE, prot: 1, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }));
        for i in 0..16 {
            c.accesses.push(Access::new(BASE + i * PAGE, AccessKind::Load, 8));
        }
        e.run_chunk(&c).unwrap();
        assert_eq!(size_at(&mut e, BASE), want, "{spec}");
        assert_eq!(size_at(&mut e, BASE + 8 * PAGE), want, "{spec}");
        let refused = counter(&mut e, "policy.romer.promote_failed.vma_check");
        assert_eq!(refused > 0, want == 32 << 10, "{spec}: {refused} refusals");
    }
}

#[test]
fn a_segment_unmapped_whole_leaves_no_resident_translations_behind() {
    // Translations of FAR's first 8MB segment are in the TLB when it is unmapped whole; their
    // shootdown arrives after the segment is forgotten. Mapped again and touched elsewhere, the
    // segment starts from zero counts, which must agree with the translations the policy holds
    // as resident (ONLINE's capacity scan counts them).
    let mut e = engine("romer:online", 32);
    touch(&mut e, (0..16).map(|i| FAR + i * 4 * PAGE));
    let mut c = Chunk::default();
    c.events.push((0, Event::Munmap { addr: FAR, len: 8 << 20 }));
    c.events.push((0, Event::Mmap { addr: FAR, len: 8 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, fd: -1, offset: 0 }));
    for i in 0..16 {
        c.accesses.push(Access::new(FAR + (4 << 20) + i * PAGE, AccessKind::Load, 8));
        c.accesses.push(Access::new(BASE + i * PAGE, AccessKind::Load, 8));
    }
    e.run_chunk(&c).unwrap();
    romer(&mut e).check_capacity_bookkeeping();
}

#[test]
fn translations_of_a_partly_unmapped_segment_leave_the_residents_and_every_stack() {
    // 4-entry TLB: of the 8 pages touched in BASE's segment, 4 are resident and 4 on the
    // stack. Unmapping the first 32 pages (the segment stays) makes all 8 translations dead:
    // none may stay resident or on the stack, where the capacity scan would count it.
    let mut e = engine("romer:online", 4);
    touch(&mut e, (0..8).map(|i| BASE + i * 4 * PAGE));
    let pi = e.os.proc_index(1);
    let asid = e.os.procs[pi].asid;
    assert!((0..8).any(|i| romer(&mut e).on_stack(0, asid, BASE + i * 4 * PAGE, PAGE)), "some were evicted");
    let mut c = Chunk::default();
    c.events.push((0, Event::Munmap { addr: BASE, len: 32 * PAGE }));
    c.accesses.push(Access::new(BASE + (1 << 20), AccessKind::Load, 8)); // a miss: shootdowns heard
    e.run_chunk(&c).unwrap();
    let r = romer(&mut e);
    for i in 0..8 {
        assert!(!r.on_stack(0, asid, BASE + i * 4 * PAGE, PAGE), "page {i}'s dead translation is on the stack");
    }
    r.check_capacity_bookkeeping();
}
