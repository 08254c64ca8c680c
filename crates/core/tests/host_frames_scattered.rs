//! A nested machine's host frames (`[walker.nested] host_frames`): the key, what scattering does
//! to the data caches (indexed by host-physical address), and calibrate's host-frames probe in
//! the calibration file, which decides it for a `host` whose TLB splinters 2MB pages.

use superpager_core::mmu::host::{calibrated_toml, read_calibration, CalibrationInput, HostFramesProbe, NearMemory, TlbProbe};
use superpager_core::mmu::machine::{HostFrames, Machine};

mod common;
use common::{host_template, simulate, skylake_file, strided_trace, tmp, TWO_LEVEL_CACHE};

/// skylake with a two-level data cache (an L2 of 1MiB in 8 ways: set index bits 6-16), nested
/// over 4KB host pages with the `host_frames` line given.
fn machine_file(name: &str, host_frames: &str) -> String {
    skylake_file(name, &format!("{TWO_LEVEL_CACHE}\n[walker.nested]\nhost_levels = 4\nhost_page_size = \"4KiB\"\n{host_frames}\n"))
}

#[test]
fn the_key_reads_in_order_by_default_and_refuses_bad_values() {
    let plain = Machine::load(&machine_file("hf-plain.toml", "")).unwrap();
    assert_eq!(plain.nested.as_ref().unwrap().host_frames, HostFrames::InOrder);
    let sc = Machine::load(&machine_file("hf-sc.toml", "host_frames = \"scattered\"")).unwrap();
    assert_eq!(sc.nested.as_ref().unwrap().host_frames, HostFrames::Scattered);
    let e = Machine::load(&machine_file("hf-bad.toml", "host_frames = \"random\"")).unwrap_err().to_string();
    assert!(e.contains("walker.nested.host_frames") && e.contains("'random'"), "{e}");
    let guest = machine_file("hf-guest.toml", "host_frames = \"scattered\"");
    std::fs::write(&guest, std::fs::read_to_string(&guest).unwrap().replace("host_page_size = \"4KiB\"", "host_page_size = \"guest\"")).unwrap();
    let e = Machine::load(&guest).unwrap_err().to_string();
    assert!(e.contains("walker.nested.host_frames") && e.contains("fixed host_page_size"), "{e}");
}

#[test]
fn scattered_host_frames_spread_a_2mb_pages_strided_lines_over_the_cache_sets() {
    let trace = strided_trace("hf-strided64k.spt");
    let in_order = simulate(&trace, &machine_file("hf-m0.toml", ""), "fixed:2MiB", true);
    let scattered = simulate(&trace, &machine_file("hf-m1.toml", "host_frames = \"scattered\""), "fixed:2MiB", true);
    let again = simulate(&trace, &machine_file("hf-m2.toml", "host_frames = \"scattered\""), "fixed:2MiB", true);
    let hits = |r: &superpager_core::stats::Results| r.counters["cache.L2.data.hits"];
    // On 2MB pages the guest's frames are in address order whatever the guest does, so the 256
    // lines share bits 6-15 and sit in 2 of the L2's 2048 sets (16 lines): every pass misses.
    assert!(hits(&in_order) < 300, "in order: {} L2 hits", hits(&in_order));
    // A host that scatters its 4KB frames spreads them over the sets bits 12-16 choose.
    assert!(hits(&scattered) > 4 * hits(&in_order).max(100), "scattered: {} L2 hits against {}", hits(&scattered), hits(&in_order));
    assert_eq!(scattered.counters, again.counters, "same machine, same host frames");
    // The TLBs and the walks do not see host frames: only the caches do.
    assert_eq!(in_order.counters["walks"], scattered.counters["walks"]);
}

fn probe(scattered: bool) -> HostFramesProbe {
    HostFramesProbe { lines: 96, strided_ns: if scattered { 5.1 } else { 19.7 }, control_ns: 4.8, scattered }
}

fn input(splintered: bool, host_frames: Option<HostFramesProbe>) -> CalibrationInput {
    let tlb = TlbProbe { lines: 8192, span: 32 << 20, packed_2m_ns: 4.1, sparse_2m_ns: if splintered { 15.9 } else { 4.2 }, sparse_4k_ns: 31.3, splintered };
    CalibrationInput {
        tlb_probe: Some(tlb),
        near_memory: Some(NearMemory { footprint: 8 << 20, ns: 143.4, cycles: 521.6 }),
        host_frames,
        ..common::calibration_input()
    }
}

fn host_frames_of(text: &str) -> Option<String> {
    let v: toml::Value = toml::from_str(text).unwrap();
    v.get("walker")?.get("nested")?.get("host_frames").and_then(|h| h.as_str()).map(String::from)
}

#[test]
fn the_probe_is_written_read_back_and_scatters_a_splintered_hosts_frames() {
    let text = calibrated_toml(&host_template(), &input(true, Some(probe(true)))).unwrap();
    assert_eq!(host_frames_of(&text).as_deref(), Some("scattered"), "{text}");
    let p = tmp("cal-host-frames.toml");
    std::fs::write(&p, &text).unwrap();
    let cal = read_calibration(std::path::Path::new(&p), "Test CPU", &mut Vec::new()).unwrap();
    assert_eq!(cal.host_frames, Some(probe(true)));
    assert!(probe(true).summary().contains("1.06x"), "{}", probe(true).summary());
    let m = Machine::load(&p).unwrap();
    assert_eq!(m.nested.as_ref().unwrap().host_frames, HostFrames::Scattered);

    let in_order = calibrated_toml(&host_template(), &input(true, Some(probe(false)))).unwrap();
    assert_eq!(host_frames_of(&in_order), None, "the probe saw the L2 crowded: in order, the default");
    assert!(in_order.contains("[calibration.host_frames]"), "{in_order}");
    let native = calibrated_toml(&host_template(), &input(false, Some(probe(true)))).unwrap();
    let v: toml::Value = toml::from_str(&native).unwrap();
    assert!(v["walker"].get("nested").is_none(), "2MB pages held whole: not nested, so no host frames: {native}");
    let none = calibrated_toml(&host_template(), &input(true, None)).unwrap();
    assert_eq!(host_frames_of(&none), None, "no probe (no 2MB pages): in order");
}
