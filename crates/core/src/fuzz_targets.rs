//! What the fuzzers run (`fuzz/`, cargo-fuzz) and what the regression test replays
//! (`tests/fuzz_corpus.rs`, on stable): each target takes arbitrary bytes and must return,
//! never panic, hang or allocate without bound. An error (a clear `Error`) is a fine outcome;
//! a panic is a bug. Keeping the bodies here, not in the fuzz crate, lets every crash the
//! fuzzers found run as an ordinary test forever after.

use crate::engine::{Engine, EngineConfig};
use crate::error::Result;
use crate::mmu::machine::Machine;
use crate::trace::{Access, Chunk, Event, RecordSink};
use crate::units::Bytes;
use std::io::Write;

/// The targets, by the names `fuzz/fuzz_targets/*.rs` and the corpus folders use.
pub const TARGETS: &[&str] = &["spt", "text", "lackey", "champsim", "machine_toml", "scenario_toml", "policy_spec", "simulate_text", "predict_text"];

/// Run target `name` on `data`. Panics only on a bug (or on an unknown name).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "spt" => spt(data),
        "text" => text(data),
        "lackey" => lackey(data),
        "champsim" => champsim(data),
        "machine_toml" => machine_toml(data),
        "scenario_toml" => scenario_toml(data),
        "policy_spec" => policy_spec(data),
        "simulate_text" => simulate_text(data),
        "predict_text" => predict_text(data),
        _ => panic!("unknown fuzz target {name}"),
    }
}

/// Records an importer produced, as one chunk, up to a cap (inputs are small).
struct Collect {
    chunk: Chunk,
    records: usize,
}

const MAX_RECORDS: usize = 4096;

impl RecordSink for Collect {
    fn access(&mut self, a: Access) -> Result<()> {
        self.records += 1;
        if self.records <= MAX_RECORDS {
            self.chunk.accesses.push(a);
        }
        Ok(())
    }
    fn event(&mut self, e: Event) -> Result<()> {
        self.records += 1;
        if self.records <= MAX_RECORDS {
            self.chunk.events.push((self.chunk.accesses.len() as u32, e));
        }
        Ok(())
    }
}

fn collect() -> Collect {
    Collect { chunk: Chunk::default(), records: 0 }
}

/// A file of this process's own holding `data` (the readers take paths). /dev/shm when there.
fn scratch_file(tag: &str, data: &[u8]) -> std::path::PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { std::path::PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let p = dir.join(format!("superpager-fuzz-{}-{tag}", std::process::id()));
    let mut f = std::fs::File::create(&p).expect("scratch file");
    f.write_all(data).expect("scratch write");
    p
}

/// The .spt reader, strict and with `allow_truncated`, over every chunk.
pub fn spt(data: &[u8]) {
    let p = scratch_file("spt", data);
    let path = p.to_string_lossy().to_string();
    for allow in [false, true] {
        if let Ok(mut r) = crate::trace::spt::SptReader::open(&path) {
            r.allow_truncated(allow);
            let mut c = Chunk::default();
            while let Ok(true) = r.next_chunk(&mut c) {}
        }
    }
    let _ = std::fs::remove_file(p);
}

pub fn text(data: &[u8]) {
    let _ = crate::trace::text::import(data, "fuzz.txt", &mut collect(), &mut |_| true);
}

pub fn lackey(data: &[u8]) {
    let _ = crate::trace::lackey::import(data, "fuzz.lackey", &mut collect(), &mut |_| true);
}

pub fn champsim(data: &[u8]) {
    let p = scratch_file("champsim", data);
    for fetches in [false, true] {
        let _ = crate::trace::champsim::import(&p.to_string_lossy(), fetches, &mut collect(), &mut |_| true);
    }
    let _ = std::fs::remove_file(p);
}

pub fn machine_toml(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    if let Ok(m) = Machine::from_toml(src, "fuzz.toml") {
        // A machine that parses must build an MMU and an OS without panicking.
        if let Ok(pol) = crate::policy::build("base", &m.page_sizes) {
            let _ = Engine::new(m, pol, EngineConfig { memory: Bytes(64 << 20), ..EngineConfig::default() });
        }
    }
}

pub fn scenario_toml(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(sc) = crate::scenario::Scenario::parse(src, "fuzz.toml") else { return };
    // Apply the prelude to a small machine (a scenario's own memory may be large: that is a
    // resource the user asked for, not a bug; the prelude must still finish on small memory).
    let Ok(m) = Machine::load("skylake") else { return };
    let Ok(pol) = crate::policy::build("base", &m.page_sizes) else { return };
    let cfg = EngineConfig { memory: Bytes(sc.memory.0.min(64 << 20)), validate: true, ..EngineConfig::default() };
    let Ok(mut e) = Engine::new(m, pol, cfg) else { return };
    for (i, p) in sc.prelude.iter().enumerate() {
        if p.apply(&mut e.os, sc.seed.wrapping_add(i as u64), &mut |_| {}).is_err() {
            return;
        }
        if let Err(m) = e.validate() {
            panic!("invariant broken after prelude {}: {m}", p.name());
        }
    }
}

pub fn policy_spec(data: &[u8]) {
    let Ok(spec) = std::str::from_utf8(data) else { return };
    if spec.ends_with(".toml") {
        return; // a path: not this target's business
    }
    for machine in ["skylake", "alpha21264", "romer95"] {
        let m = Machine::load(machine).expect("preset");
        let _ = crate::policy::build(spec, &m.page_sizes);
    }
}

/// A text trace run through the whole simulator, validating every invariant after each
/// chunk: the first byte picks the policy and machine, the rest is the trace.
pub fn simulate_text(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else { return };
    let mut c = collect();
    if crate::trace::text::import(rest, "fuzz.txt", &mut c, &mut |_| true).is_err() {
        return;
    }
    const POLICIES: [&str; 8] = [
        "base",
        "fixed:2MiB",
        "linux-thp:enabled=always",
        "navarro",
        "romer:asap",
        "romer:online",
        "linux-thp:enabled=always,defrag=always",
        "navarro:fragmentation=cache",
    ];
    let policy = POLICIES[sel as usize % POLICIES.len()];
    let machine = if policy.starts_with("navarro") {
        "alpha21264"
    } else if policy.starts_with("romer") {
        "romer95"
    } else {
        "skylake"
    };
    let m = Machine::load(machine).expect("preset");
    let pol = crate::policy::build(policy, &m.page_sizes).expect("policy");
    let swap = if sel & 0x80 != 0 { Bytes(8 << 20) } else { Bytes(0) };
    let cfg = EngineConfig { memory: Bytes(64 << 20), swap, validate: true, sample_every: 64, ..EngineConfig::default() };
    let mut e = Engine::new(m, pol, cfg).expect("engine");
    if let Err(err) = e.run_chunk(&c.chunk) {
        let msg = err.to_string();
        assert!(!msg.contains("invariant broken"), "{policy} on {machine}: {msg}");
        return;
    }
    let _ = e.results();
}

/// The runtime model's machine for `predict_text`: skylake's TLBs and walker with three small
/// data-cache levels (so that a short trace evicts), the last shared with tenants, and every
/// part of the overlap model turned on. `{law}`, `{frames}` and `{nested}` are filled in by the
/// selector byte.
const PREDICT_MACHINE: &str = "
[cache]
dram_cycles = 300
dram_line_cycles = 16
mlp = 10
walkers = 4
rob = 224
walk_hiding = 0.5
stream_ahead = 1.0
stream_prefetch = 1.0
tenant_fill_rate = 0.3
share_exponent = 0.6
bounds_norm = 4
share_law = \"{law}\"
[[cache.levels]]
name = \"L1d\"
size = \"4KiB\"
ways = 4
cycles = 5
[[cache.levels]]
name = \"L2\"
size = \"16KiB\"
ways = 4
cycles = 14
[[cache.levels]]
name = \"L3\"
size = \"64KiB\"
ways = 8
cycles = 45
{frames}
{nested}
";

/// A text trace through the runtime model (data caches, nested walks, the overlap), twice:
/// the caches replaying on this thread and on a thread of their own must give the same
/// counters, and every level must account for each reference it saw (a hit, or a miss passed
/// on to the next level or to memory). Where nothing decides by the clock, a third run without
/// the caches must decide everything the same (below). The first byte picks the policy (bits 0-2), a nested
/// machine whose host scatters its frames (bit 3), the reuse law (bit 4), a dependent chain
/// with walks ahead (bit 5), swap (bit 6) and scattered guest frames (bit 7).
pub fn predict_text(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else { return };
    let mut c = collect();
    if crate::trace::text::import(rest, "fuzz.txt", &mut c, &mut |_| true).is_err() {
        return;
    }
    const POLICIES: [&str; 8] =
        ["base", "fixed:2MiB", "fixed:1GiB", "linux-thp:enabled=always", "navarro", "trident", "romer:asap", "linux-thp:enabled=always,defrag=always"];
    let policy = POLICIES[sel as usize % POLICIES.len()];
    let extra = PREDICT_MACHINE
        .replace("{law}", if sel & 0x10 != 0 { "reuse" } else { "depth" })
        .replace("{frames}", if sel & 0x80 != 0 { "[frames]\nscatter = 0.4" } else { "" })
        .replace("{nested}", if sel & 0x08 != 0 { "[walker.nested]\nhost_levels = 4\nhost_page_size = \"4KiB\"\nhost_frames = \"scattered\"" } else { "" });
    let src = format!("{}{extra}", include_str!("machines/skylake.toml"));
    let mut m = Machine::from_toml(&src, "fuzz-predict.toml").expect("the fuzz machine parses");
    if sel & 0x20 != 0 {
        let cs = m.cache.as_mut().expect("[cache]");
        (cs.dependence, cs.walk_ahead, cs.walk_ahead2, cs.walk_ahead3) = (0.8, 0.5, 0.3, 0.1);
    }
    let swap = if sel & 0x40 != 0 { Bytes(8 << 20) } else { Bytes(0) };
    let run = |m: &Machine, thread: bool| -> Option<crate::stats::Results> {
        let pol = crate::policy::build(policy, &m.page_sizes).expect("policy");
        let cfg = EngineConfig { memory: Bytes(64 << 20), swap, validate: true, sample_every: 64, ..EngineConfig::default() };
        let mut e = Engine::new(m.clone(), pol, cfg).expect("engine");
        if let Some(caches) = e.mmu.caches.as_mut() {
            caches.set_replay_thread(thread);
        }
        if let Err(err) = e.run_chunk(&c.chunk) {
            let msg = err.to_string();
            assert!(!msg.contains("invariant broken"), "{policy}: {msg}");
            return None;
        }
        Some(e.results())
    };
    let (Some(here), Some(there)) = (run(&m, false), run(&m, true)) else { return };
    assert_eq!(here.counters, there.counters, "{policy}: the caches' thread changed a count");
    assert_eq!(here.phase, there.phase, "{policy}: the caches' thread changed the phase");
    // The caches change what a run costs, never what the OS and the MMU decide, where nothing
    // decides by the clock (base and fixed pages, without swap, whose page daemon runs by it)
    // and the walks are one-dimensional (a nested machine's host page-walk caches are modelled
    // only with the data caches: docs/RUNTIME_MODEL.md, "Page-walk caches for the host's entries").
    if (policy.starts_with("base") || policy.starts_with("fixed")) && swap.0 == 0 && m.nested.is_none() {
        let plain = run(&Machine { cache: None, ..m.clone() }, false).expect("the run without caches fails where the one with them did not");
        // What only the cost model counts: the caches, the cycles, the overlap, the walks ahead.
        let cost = |k: &str| ["cache.", "cycles.", "overlap.", "walk_ahead."].iter().any(|p| k.starts_with(p));
        let decided = |r: &crate::stats::Results| -> std::collections::BTreeMap<String, u64> {
            r.counters.iter().filter(|(k, _)| !cost(k)).map(|(k, v)| (k.clone(), *v)).collect()
        };
        let (with, without) = (decided(&here), decided(&plain));
        let differ: Vec<_> = with.iter().filter(|(k, v)| without.get(*k) != Some(v)).map(|(k, v)| (k, v, without.get(k))).collect();
        assert!(differ.is_empty() && with.len() == without.len(), "{policy}: the caches changed a decision: {differ:?}");
    }
    let k = &here.counters;
    let get = |key: String| k.get(&key).copied().unwrap_or(0);
    for who in ["data", "walk"] {
        let mut reaching = None;
        for level in ["L1d", "L2", "L3"] {
            let (hits, misses) = (get(format!("cache.{level}.{who}.hits")), get(format!("cache.{level}.{who}.misses")));
            if let Some(r) = reaching {
                assert_eq!(hits + misses, r, "{policy}: {level} saw {hits} + {misses} {who} references, {r} reached it");
            }
            reaching = Some(misses);
        }
        assert_eq!(get(format!("cache.dram.{who}")), reaching.unwrap_or(0), "{policy}: memory's {who} references");
    }
}
