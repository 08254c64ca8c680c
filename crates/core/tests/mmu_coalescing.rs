//! AMD PTE coalescing: a walk to a base PTE whose cache line holds an aligned, physically
//! contiguous, uniform group of 4 or 8 PTEs fills one 16KB or 32KB entry; any change to one of
//! its PTEs drops the entry (no stale translation), which the TLB-coherence validator checks.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;
use superpager_core::trace::*;
use superpager_core::units::Bytes;

/// One 2-entry fully associative TLB, so two other pages evict everything; coalescing in
/// groups of 4 and 8 as on zen3.
const TINY: &str = r#"
name = "tiny-amd"
base_page = "4KiB"
page_sizes = ["4KiB", "2MiB"]
[[tlb]]
name = "L1"
level = 1
entries = 2
ways = 2
page_sizes = ["4KiB", "2MiB"]
[walker]
levels = 4
bits_per_level = 9
ref_cycles = 25
[coalescing]
kind = "amd"
pages = 8
[cost]
cycles_per_access = 1
fault_cycles = 2500
zero_cycles_per_kib = 100
"#;

const BASE: u64 = 0x4000_0000;
const PAGE: u64 = 4096;

/// `navarro` reserves 2MB-aligned extents, so pages faulted in one extent sit at their own
/// offsets: physically contiguous and aligned, what coalescing needs.
fn engine(pol: &str) -> Engine {
    let m = Machine::from_toml(TINY, "tiny-amd.toml").unwrap();
    let p = policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: Bytes(256 << 20), validate: true, ..Default::default() }).unwrap()
}

fn chunk(recs: &[Rec]) -> Chunk {
    let mut c = Chunk::default();
    for r in recs {
        match r {
            Rec::A(a) => c.accesses.push(*a),
            Rec::E(e) => c.events.push((c.accesses.len() as u32, e.clone())),
        }
    }
    c
}

enum Rec {
    A(Access),
    E(Event),
}

fn load(va: u64) -> Rec {
    Rec::A(Access::new(va, AccessKind::Load, 8))
}
fn store(va: u64) -> Rec {
    Rec::A(Access::new(va, AccessKind::Store, 8))
}
fn start() -> Vec<Rec> {
    vec![
        Rec::E(Event::Context { pid: 1, tid: 1 }),
        Rec::E(Event::Mmap { addr: BASE, len: 4 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }),
    ]
}
/// Touch pages far away (another 2MB extent) so the 2-entry TLB forgets the group.
fn evict() -> Vec<Rec> {
    vec![load(BASE + (2 << 20)), load(BASE + (2 << 20) + PAGE)]
}

/// The coalescible shares of a time-series sample taken now.
fn stats_sample(e: &mut Engine) -> std::collections::BTreeMap<String, f64> {
    e.sample();
    e.series.last().unwrap().coalescible.clone()
}

fn counters(e: &mut Engine) -> std::collections::BTreeMap<String, u64> {
    e.results().counters
}

#[test]
fn a_contiguous_aligned_group_is_one_entry() {
    let mut e = engine("navarro");
    let mut recs = start();
    recs.extend((0..8).map(|i| store(BASE + i * PAGE)));
    recs.extend(evict());
    e.run_chunk(&chunk(&recs)).unwrap();
    assert!(e.os.base_group_contiguous(0, BASE, 8), "navarro placed the 8 pages contiguously");
    let before = counters(&mut e);
    // Back to the group: one walk fills a 32KB entry; the other seven pages hit it.
    e.run_chunk(&chunk(&(0..8).map(|i| load(BASE + i * PAGE + 64)).collect::<Vec<_>>())).unwrap();
    let after = counters(&mut e);
    assert_eq!(after["walks"] - before["walks"], 1);
    assert_eq!(after["coalesce.fills.32KiB"] - before["coalesce.fills.32KiB"], 1);
    assert_eq!(after["tlb.L1.hits.32KiB"] - before["tlb.L1.hits.32KiB"], 7);
    assert_eq!(after["coalesce.hits"] - before["coalesce.hits"], 7);
}

#[test]
fn without_coalescing_every_page_walks() {
    let src = TINY.replace("[coalescing]\nkind = \"amd\"", "[coalescing]\nkind = \"none\"");
    let m = Machine::from_toml(&src, "t.toml").unwrap();
    let p = policy::build("navarro", &m.page_sizes).unwrap();
    let mut e = Engine::new(m, p, EngineConfig { memory: Bytes(256 << 20), validate: true, ..Default::default() }).unwrap();
    let mut recs = start();
    recs.extend((0..8).map(|i| store(BASE + i * PAGE)));
    recs.extend(evict());
    e.run_chunk(&chunk(&recs)).unwrap();
    let before = counters(&mut e)["walks"];
    e.run_chunk(&chunk(&(0..8).map(|i| load(BASE + i * PAGE + 64)).collect::<Vec<_>>())).unwrap();
    let after = counters(&mut e);
    assert_eq!(after["walks"] - before, 8);
    assert!(!after.contains_key("coalesce.fills"));
}

#[test]
fn a_group_is_not_coalesced_unless_every_pte_agrees() {
    let mut e = engine("navarro");
    let mut recs = start();
    // Pages 0..7 but 5: the 8-group is incomplete; the 4-group 0..3 is whole.
    recs.extend((0..8).filter(|&i| i != 5).map(|i| store(BASE + i * PAGE)));
    recs.extend(evict());
    recs.push(load(BASE + PAGE));
    recs.push(load(BASE + 6 * PAGE));
    e.run_chunk(&chunk(&recs)).unwrap();
    let c = counters(&mut e);
    assert_eq!(c["coalesce.fills.32KiB"], 0);
    assert!(c["coalesce.fills.16KiB"] >= 1, "pages 0..3 form a 16KB group");
    // The 4-group 4..7 lacks page 5: the access to page 6 walked to a plain 4KB entry.
    assert!(!e.os.base_group_contiguous(0, BASE + 4 * PAGE, 4));
}

#[test]
fn changing_one_pte_drops_the_coalesced_entry() {
    for change in ["munmap", "mprotect", "fork-then-write"] {
        let mut e = engine("navarro");
        let mut recs = start();
        recs.extend((0..8).map(|i| store(BASE + i * PAGE)));
        recs.extend(evict());
        recs.push(load(BASE)); // a 32KB entry for pages 0..7
        e.run_chunk(&chunk(&recs)).unwrap();
        let before = counters(&mut e);
        let fills = before["coalesce.fills.32KiB"];
        assert!(fills >= 1, "{change}");
        // One PTE of the group changes; the validator (on after every chunk) would fail on a
        // coalesced entry left behind.
        let recs = match change {
            "munmap" => vec![Rec::E(Event::Munmap { addr: BASE + 3 * PAGE, len: PAGE })],
            "mprotect" => vec![Rec::E(Event::Mprotect { addr: BASE + 3 * PAGE, len: PAGE, prot: 1 })],
            _ => vec![Rec::E(Event::Fork { child: 2 }), Rec::E(Event::Context { pid: 1, tid: 1 }), store(BASE + 3 * PAGE)],
        };
        e.run_chunk(&chunk(&recs)).unwrap();
        e.validate().unwrap();
        // The next access to another page of the group misses the old entry and walks.
        let mid = counters(&mut e);
        e.run_chunk(&chunk(&[load(BASE + 6 * PAGE)])).unwrap();
        let after = counters(&mut e);
        assert_eq!(after["walks"] - mid["walks"], 1, "{change}: the access to page 6 must walk");
        // (A write to a copy-on-write page first walks while the group is still whole, then
        // breaks it: count from after the change.)
        assert_eq!(after["coalesce.fills.32KiB"], mid["coalesce.fills.32KiB"], "{change}: pages 0..7 are no longer one group");
        // Pages 4..7 still agree (after the fork all are write-protected alike): 16KB.
        assert_eq!(after["coalesce.fills.16KiB"] - mid["coalesce.fills.16KiB"], 1, "{change}");
    }
}

#[test]
fn the_validator_catches_a_coalesced_entry_left_stale() {
    let mut e = engine("navarro");
    let mut recs = start();
    recs.extend((0..8).map(|i| store(BASE + i * PAGE)));
    recs.extend(evict());
    recs.push(load(BASE));
    e.run_chunk(&chunk(&recs)).unwrap();
    e.validate().unwrap();
    // Change a PTE behind the MMU's back (no shootdown): the 32KB entry is now stale.
    let mut gone = Vec::new();
    e.os.procs[0].pt.unmap_range(BASE + 2 * PAGE, PAGE, &mut gone);
    assert_eq!(gone.len(), 1);
    let err = e.validate_tlbs().unwrap_err();
    assert!(err.contains("coalesced entry") && err.contains("0x40000000"), "{err}");
}

#[test]
fn the_opportunity_counts_pages_in_coalescible_groups() {
    // Pages touched in a scattered order inside reservations (so some aligned groups fill up
    // and some do not), some unmapped or protected again: the one-pass measure must agree
    // with testing every aligned group.
    let mut e = engine("navarro");
    let mut recs = start();
    let mut x = 12345u64;
    for _ in 0..600 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        recs.push(store(BASE + (x >> 33) % 1024 * PAGE));
    }
    recs.extend((0..64).map(|i| store(BASE + (1 << 20) + i * PAGE)));
    recs.push(Rec::E(Event::Munmap { addr: BASE + (1 << 20) + 9 * PAGE, len: PAGE }));
    recs.push(Rec::E(Event::Mprotect { addr: BASE + (1 << 20) + 30 * PAGE, len: 5 * PAGE, prot: 1 }));
    e.run_chunk(&chunk(&recs)).unwrap();
    let got = e.os.contiguity_of(0);
    let mut base_pages = 0;
    let mut want = [0u64; 3];
    for (k, n) in [4u64, 8, 16].into_iter().enumerate() {
        let mut gs = BASE;
        while gs < BASE + (4 << 20) {
            if e.os.base_group_contiguous(0, gs, n as u32) {
                want[k] += n;
            }
            gs += n * PAGE;
        }
    }
    e.os.procs[0].pt.for_each_page(&mut |t| base_pages += (t.size_idx == 0) as u64);
    assert_eq!(got.base_pages, base_pages);
    assert_eq!(got.grouped, want);
    assert!(want[0] > 0 && want[0] < base_pages, "a mix of grouped and scattered pages: {want:?} of {base_pages}");
    // A time-series sample taken now carries the same shares. Its pass over the page table is
    // bounded by the work since the previous sample: first too few accesses (none), then
    // enough (128 per resident base page).
    let s = stats_sample(&mut e);
    assert!(s.is_empty(), "{} accesses are too few to pay for a pass over {base_pages} pages", e.accesses);
    let loads: Vec<Rec> = (0..128 * base_pages).map(|_| load(BASE + (1 << 20))).collect();
    e.run_chunk(&chunk(&loads)).unwrap();
    let s = stats_sample(&mut e);
    let share = |g: u64| (g as f64 / base_pages as f64 * 1e6).round() / 1e6;
    assert_eq!(s.get("16KiB").copied(), Some(share(want[0])));
    assert_eq!(s.get("64KiB").copied(), Some(share(want[2])));
    // And the results report it, for the processes at exit too.
    e.run_chunk(&chunk(&[Rec::E(Event::Exit { code: 0 })])).unwrap();
    let r = e.results();
    assert_eq!(r.counters["contiguity.base_pages"], base_pages);
    assert_eq!(r.counters["contiguity.grouped.16KiB"], want[0]);
    assert_eq!(r.counters["contiguity.grouped.64KiB"], want[2]);
}

#[test]
fn bad_coalescing_keys_name_the_key() {
    for (from, to, want) in [
        ("pages = 8", "pages = 8\ngroups = [16]", "coalescing.groups"),
        ("pages = 8", "pages = 16\ngroups = [16]", "spans more than one 64-byte line"),
        ("pages = 8", "pages = 8\nstructures = [\"L9\"]", "no TLB structure is named 'L9'"),
        ("pages = 8", "pages = 8\nline_bytes = 60", "coalescing.line_bytes"),
    ] {
        let src = TINY.replace(from, to);
        let err = Machine::from_toml(&src, "t.toml").unwrap_err().to_string();
        assert!(err.contains(want) && err.contains("t.toml") && !err.contains('\n'), "{to}: {err}");
    }
}

#[test]
fn nocoalesce_turns_coalescing_off() {
    use superpager_core::mmu::machine::Coalescing;
    let on = Machine::load("zen3").unwrap();
    assert!(on.amd_coalescing().is_some_and(|a| a.groups == [4, 8] && a.line_ptes == 8));
    let off = Machine::load("zen3+nocoalesce").unwrap();
    assert_eq!(off.coalescing, Coalescing::None);
    assert_eq!(off.name, "zen3+nocoalesce");
    let both = Machine::load("zen3+nocoalesce+nested").unwrap();
    assert!(both.nested.is_some() && both.coalescing == Coalescing::None);
    let e = Machine::load("skylake+nocoalesce").unwrap_err().to_string();
    assert!(e.contains("does not coalesce"), "{e}");
}

#[test]
fn without_a_coalescible_group_coalescing_changes_nothing() {
    // Pages touched top-down get frames bottom-up: no group is ever contiguous. An mprotect
    // in the middle must not cost the coalescing machine any base entry either.
    let run = |src: &str| {
        let m = Machine::from_toml(src, "t.toml").unwrap();
        let p = policy::build("base", &m.page_sizes).unwrap();
        let mut e = Engine::new(m, p, EngineConfig { memory: Bytes(256 << 20), validate: true, ..Default::default() }).unwrap();
        let mut recs = start();
        recs.extend((0..64).rev().map(|i| store(BASE + i * PAGE)));
        recs.push(Rec::E(Event::Mprotect { addr: BASE + 10 * PAGE, len: 3 * PAGE, prot: 1 }));
        recs.extend((0..64).map(|i| load(BASE + i * PAGE)));
        recs.extend((0..2).map(|i| load(BASE + 9 * PAGE + i * PAGE)));
        e.run_chunk(&chunk(&recs)).unwrap();
        e.results().counters
    };
    // A TLB large enough that every page's entry survives until the loads.
    let big = TINY.replace("entries = 2\nways = 2", "entries = 128\nways = 128");
    let on = run(&big);
    let off = run(&big.replace("[coalescing]\nkind = \"amd\"", "[coalescing]\nkind = \"none\""));
    assert_eq!(on["coalesce.fills"], 0);
    for k in ["walks", "tlb.L1.hits", "tlb.L1.misses", "faults"] {
        assert_eq!(on[k], off[k], "{k}");
    }
}
