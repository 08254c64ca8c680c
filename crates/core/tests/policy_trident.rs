//! `trident`: 1GB, then 2MB, then 4KB at fault; background promotion to 1GB first.
mod common;
use common::*;
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;

fn gen_file(name: &str, kind: &str, size: u64, accesses: u64) -> String {
    common::gen_file(name, kind, size, accesses, 5)
}

fn run(path: &str, pol: &str) -> superpager_core::stats::Results {
    simulate(path, "skylake", pol, true)
}

#[test]
fn a_1gb_mappable_region_is_mapped_by_1gb_pages_at_fault() {
    let p = gen_file("trident-gups.spt", "gups", 2 << 30, 50_000);
    let r = run(&p, "trident");
    assert_eq!(r.page_size_mix["1GiB"], 1.0);
    assert_eq!(r.counters["policy.fault.1g_alloc"], 2);
    assert_eq!(r.counters["faults"], 2);
    assert_eq!(r.counters["os.zeroed_bytes"], 2 << 30, "a 1GB fault zero-fills the whole page");
}

#[test]
fn the_part_that_is_not_1gb_mappable_gets_2mb_pages() {
    // 1.5GiB: one aligned 1GB range, and 512MiB that only 2MB pages fit.
    let p = gen_file("trident-1536.spt", "gups", 1536 << 20, 50_000);
    let r = run(&p, "trident");
    let mix = |s: &str| r.page_size_mix[s];
    assert!((mix("1GiB") - 2.0 / 3.0).abs() < 1e-6 && (mix("2MiB") - 1.0 / 3.0).abs() < 1e-6, "{:?}", r.page_size_mix);
    assert_eq!(r.counters["policy.fault.1g_alloc"], 1);
    assert_eq!(r.counters["policy.fault.2m_alloc"], 256);
}

#[test]
fn without_1gb_faults_the_scanner_promotes_2mb_pages_to_1gb() {
    let p = gen_file("trident-pv.spt", "gups", 2 << 30, 400_000);
    let r = run(&p, "trident:fault_1g=false,scan_sleep_ms=1");
    assert_eq!(r.counters["policy.fault.1g_alloc"], 0);
    assert_eq!(r.counters["policy.fault.2m_alloc"], 1024);
    let scans: Vec<_> = r.counters.iter().filter(|(k, v)| k.starts_with("policy.khugepaged") && **v > 0).collect();
    assert_eq!(r.counters["policy.khugepaged.scan_1g.succeed"], 2, "{scans:?}");
    assert_eq!(r.page_size_mix["1GiB"], 1.0);
    // Promotion copied the 2MB pages into the new 1GB pages, beside the program.
    assert_eq!(r.counters["copy.bytes_background"], 2 << 30);
    let off = run(&p, "trident:fault_1g=false,khugepaged=0,scan_sleep_ms=1");
    assert_eq!(off.page_size_mix["2MiB"], 1.0);
}

#[test]
fn bad_parameters_are_one_line_errors() {
    let m = Machine::load("skylake").unwrap();
    let err = |s: &str| policy::build(s, &m.page_sizes).err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(err("trident:fault_1g=yes"), "policy trident: fault_1g=yes: expected true or false");
    assert_eq!(err("trident:max_cpu=150"), "policy trident: max_cpu=150: expected a percentage in [0, 100]");
    assert!(err("trident:colour=red").starts_with("policy trident: unknown parameter 'colour' (known: sizes, fault_1g,"));
    let romer95 = Machine::load("romer95").unwrap();
    assert!(policy::build("trident", &romer95.page_sizes).err().unwrap().to_string().contains("has no 1GiB page"));
}

#[test]
fn trident_pv_exchanges_2mb_mappings_by_hypercall_instead_of_copying() {
    let p = gen_file("trident-pv-exchange.spt", "gups", 2 << 30, 400_000);
    let pol = "trident:fault_1g=false,scan_sleep_ms=1";
    let copy = simulate(&p, "skylake+nested", pol, true);
    let pv = simulate(&p, "skylake+nested", &format!("{pol},pv=true"), true);
    for r in [&copy, &pv] {
        assert_eq!(r.counters["policy.promote_1g.count"], 2);
        assert_eq!(r.page_size_mix["1GiB"], 1.0);
    }
    assert_eq!(copy.counters["copy.bytes_background"], 2 << 30);
    assert_eq!(copy.counters["compact.exchange_hypercalls"], 0);
    // Each 1GB region held 512 2MB pages: one hypercall of 512 entries each, nothing copied.
    assert_eq!(pv.counters["compact.exchange_hypercalls"], 2);
    assert_eq!(pv.counters["compact.exchanged_pmds"], 1024);
    assert_eq!(pv.counters["copy.bytes_background"], 0);
    let per = |r: &superpager_core::stats::Results| r.counters["policy.promote_1g.cycles"] / r.counters["policy.promote_1g.count"];
    assert!(per(&pv) * 100 < per(&copy), "exchange {} cycles per region against copy {}", per(&pv), per(&copy));

    // A host that backs guest memory with 4KB pages cannot exchange 2MB mappings: the first
    // hypercall fails, the guest copies, and it makes no more hypercalls.
    let small = simulate(&p, "skylake+nested=4KiB", &format!("{pol},pv=true"), true);
    assert_eq!(small.counters["compact.exchange_hypercalls"], 1);
    assert_eq!(small.counters["compact.exchange_failed_pmds"], 512);
    assert_eq!(small.counters["policy.pv.hypercalls_stopped"], 1);
    assert_eq!(small.counters["copy.bytes_background"], 2 << 30);
}

#[test]
fn trident_pv_needs_a_guest_machine() {
    use superpager_core::engine::{Engine, EngineConfig};
    let m = Machine::load("skylake").unwrap();
    let pol = policy::build("trident:pv=true", &m.page_sizes).unwrap();
    let e = Engine::new(m, pol, EngineConfig::default()).err().expect("refused").to_string();
    assert!(e.contains("skylake+nested") && !e.contains('\n'), "{e}");
}
