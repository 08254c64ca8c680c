//! Helpers shared by the integration tests.
#![allow(dead_code)]

use superpager_core::trace::spt::SptWriter;
use superpager_core::trace::{Access, Chunk, Event, Provenance, RecordSink};

/// A path for a test's file `name`, in this test process's own directory under Cargo's
/// temporary directory for integration tests (target/tmp), not the system's /tmp: the tests
/// write thousands of files a run and cannot remove them when the process exits, so the first
/// call removes what processes no longer running left behind.
pub fn tmp(name: &str) -> String {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("superpager-test");
        if let Ok(entries) = std::fs::read_dir(&base) {
            for e in entries.flatten() {
                let pid = e.file_name().to_string_lossy().strip_prefix('p').and_then(|p| p.parse::<u32>().ok());
                // A process still running keeps its directory (where /proc can't say, every one).
                let running = !cfg!(target_os = "linux") || pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
                if !running {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = base.join(format!("p{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    });
    dir.join(name).to_string_lossy().into_owned()
}

#[derive(Debug, PartialEq)]
pub enum Rec {
    A(Access),
    E(Event),
}

/// Write records to an .spt file, optionally small chunks and without collapsing.
pub fn write(path: &str, recs: &[Rec], chunk_records: u32, collapse: bool) {
    let mut w = SptWriter::create(path, &Provenance::new()).unwrap();
    w.set_chunk_records(chunk_records);
    w.set_collapse(collapse);
    for r in recs {
        match r {
            Rec::A(a) => w.access(*a).unwrap(),
            Rec::E(e) => w.event(e.clone()).unwrap(),
        }
    }
    w.finish().unwrap();
}

/// All records of a file, in order.
pub fn read_all(path: &str) -> superpager_core::Result<Vec<Rec>> {
    let mut r = superpager_core::trace::spt::SptReader::open(path)?;
    let mut out = Vec::new();
    let mut c = Chunk::default();
    while r.next_chunk(&mut c)? {
        let mut ev = c.events.iter().peekable();
        for (i, a) in c.accesses.iter().enumerate() {
            while let Some((p, e)) = ev.peek() {
                if *p as usize > i {
                    break;
                }
                out.push(Rec::E(e.clone()));
                ev.next();
            }
            out.push(Rec::A(*a));
        }
        for (_, e) in ev {
            out.push(Rec::E(e.clone()));
        }
    }
    Ok(out)
}

/// A generated trace (`superpager gen KIND`) of `size` bytes and `accesses` accesses.
pub fn gen_file(name: &str, kind: &str, size: u64, accesses: u64, seed: u64) -> String {
    use superpager_core::trace::gen::{generate, GenParams};
    let p = tmp(name);
    let mut w = SptWriter::create(&p, &Provenance::new()).unwrap();
    generate(&GenParams { kind: kind.into(), size, accesses, seed, ..Default::default() }, &mut w, &mut |_| {}).unwrap();
    w.finish().unwrap();
    p
}

/// A sequential read of `size` bytes, 8 at a time, in a trace that keeps each cache line as a
/// record (as `capture --collapse line`; a trace collapsed by page shows a page's first line
/// only), and its path.
pub fn line_sweep(name: &str, size: u64) -> String {
    use superpager_core::trace::gen::{generate, GenParams};
    let p = tmp(name);
    let mut w = SptWriter::create(&p, &Provenance::new()).unwrap();
    w.set_collapse_shift(superpager_core::trace::LINE_COLLAPSE_SHIFT);
    generate(&GenParams { kind: "seq".into(), size, ..Default::default() }, &mut w, &mut |_| {}).unwrap();
    w.finish().unwrap();
    p
}

/// The results of one simulation of `path` on `machine` under `policy`.
pub fn simulate(path: &str, machine: &str, policy: &str, validate: bool) -> superpager_core::stats::Results {
    let m = superpager_core::mmu::machine::Machine::load(machine).unwrap();
    let cfg = superpager_core::engine::EngineConfig { validate, ..Default::default() };
    let mut s = superpager_core::sim::Simulation::open(path, vec![(m, policy.to_string())], cfg, false).unwrap();
    while s.step(8).unwrap() {}
    s.results().remove(0)
}

/// A replacement policy's counter by its result key (panics if it has none such).
pub fn replacement_counter(r: &dyn superpager_core::replacement::Replacement, key: &str) -> u64 {
    let mut v = None;
    r.counters().expect("the policy keeps counters").each(&mut |k, n| {
        if k == key {
            v = Some(n);
        }
    });
    v.unwrap_or_else(|| panic!("no counter {key}"))
}

/// An engine on `machine` under `pol` with 64MiB of memory, validating after every event.
pub fn small_engine(machine: &str, pol: &str) -> superpager_core::engine::Engine {
    use superpager_core::engine::{Engine, EngineConfig};
    let m = superpager_core::mmu::machine::Machine::load(machine).unwrap();
    let p = superpager_core::policy::build(pol, &m.page_sizes).unwrap();
    Engine::new(m, p, EngineConfig { memory: superpager_core::units::Bytes(64 << 20), validate: true, ..Default::default() }).unwrap()
}

/// Run records (accesses as Ok, events as Err) as one chunk.
pub fn run_records(e: &mut superpager_core::engine::Engine, recs: &[Result<Access, Event>]) {
    let mut c = Chunk::default();
    for r in recs {
        match r {
            Ok(a) => c.accesses.push(*a),
            Err(ev) => c.events.push((c.accesses.len() as u32, ev.clone())),
        }
    }
    e.run_chunk(&c).unwrap();
}

/// Run a scenario given as TOML text (`name` in its errors) on `machine` under `policy`.
#[allow(dead_code)]
pub fn run_scenario(text: &str, name: &str, machine: &str, policy: &str, cfg: superpager_core::engine::EngineConfig) -> superpager_core::stats::Results {
    use superpager_core::scenario::{ensure_traces, Scenario};
    let sc = Scenario::parse(text, name).unwrap();
    ensure_traces(&sc, &mut |_, _| {}).unwrap();
    let m = superpager_core::mmu::machine::Machine::load(machine).unwrap();
    let mut r = superpager_core::sim::ScenarioRun::open(&sc, m, policy, cfg, &mut |_, _| {}).unwrap();
    while r.step(8).unwrap() {}
    r.results()
}

/// 16MiB touched page by page (as a program fills its array), then 8 passes over one line in
/// every 64KiB: 256 lines whose virtual addresses share cache set index bits 6-15.
pub fn strided_trace(name: &str) -> String {
    use superpager_core::trace::{AccessKind, MAP_ANONYMOUS, MAP_PRIVATE};
    let base = 0x4000_0000u64;
    let size = 16u64 << 20;
    let mut recs = vec![Rec::E(Event::Mmap { addr: base, len: size, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 })];
    recs.extend((0..size / 4096).map(|i| Rec::A(Access::new(base + i * 4096, AccessKind::Store, 8))));
    for _ in 0..8 {
        recs.extend((0..size / 65536).map(|i| Rec::A(Access::new(base + i * 65536, AccessKind::Load, 8))));
    }
    let p = tmp(name);
    write(&p, &recs, 4096, false);
    p
}

/// What `superpager calibrate` hands `calibrated_toml`, with no probes: a two-level machine at
/// 2.5 GHz. Tests change their own fields with struct update syntax.
pub fn calibration_input() -> superpager_core::mmu::host::CalibrationInput {
    superpager_core::mmu::host::CalibrationInput {
        cpu: "Test CPU".into(),
        date: "2026-12-03".into(),
        method: "test".into(),
        clock_ghz: 2.5,
        level_cycles: vec![4.0, 12.0],
        level_sizes: vec![String::new(), String::new()],
        dram_cycles: 500.0,
        points: vec![(1 << 20, "2m".into(), 5.0)],
        tlb_probe: None,
        walk_probe: None,
        near_memory: None,
        last_level_fit: None,
        frames: None,
        host_frames: None,
        window_probe: None,
        scan_probe: None,
        walk_probe_far: None,
        share_fit: None,
        stream_probe: None,
    }
}

/// A two-level `[cache]` for skylake-based machine files: an L2 of 1MiB in 8 ways (set index
/// bits 6-16).
pub const TWO_LEVEL_CACHE: &str = "\n[cache]\ndram_cycles = 300\nmlp = 10\nwalkers = 2\nrob = 224\n\
                                   [[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n\
                                   [[cache.levels]]\nname = \"L2\"\nsize = \"1MiB\"\nways = 8\ncycles = 14\n";

/// A machine file `name` (in the test's temporary directory): the skylake preset followed by
/// `extra` (sections to add), and its path.
pub fn skylake_file(name: &str, extra: &str) -> String {
    let sky = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/machines/skylake.toml")).unwrap();
    let p = tmp(name);
    std::fs::write(&p, format!("{sky}{extra}")).unwrap();
    p
}

/// A `[cache]` key of the overlap model, checked in a machine file and as a modifier: `bad` in
/// the file is refused naming the key; `good` in the file and `modifier` after it are read back
/// (through `field`); each of `refused` after it is refused naming the modifier; absent, it
/// reads 0. Returns nothing: it asserts.
pub fn check_cache_key(key: &str, field: fn(&superpager_core::mmu::cache::CacheSpec) -> f64, bad: &str, good: f64, modifier: f64, refused: &[&str]) {
    use superpager_core::mmu::machine::Machine;
    let with = |v: &str| TWO_LEVEL_CACHE.replacen("rob = 224\n", &format!("rob = 224\n{key} = {v}\n"), 1);
    let read = |spec: &str| field(&Machine::load(spec).unwrap().cache.unwrap());
    let e = Machine::load(&skylake_file(&format!("{key}-bad.toml"), &with(bad))).expect_err("refused").to_string();
    assert!(e.contains(key) && e.contains(bad), "{e}");
    let ok = skylake_file(&format!("{key}-ok.toml"), &with(&good.to_string()));
    assert_eq!(read(&ok), good);
    assert_eq!(read(&format!("{ok}+{key}={modifier}")), modifier);
    for v in refused {
        let e = Machine::load(&format!("{ok}+{key}={v}")).expect_err("refused").to_string();
        assert!(e.contains(&format!("+{key}={v}")), "{e}");
    }
    assert_eq!(read(&skylake_file(&format!("{key}-absent.toml"), TWO_LEVEL_CACHE)), 0.0, "absent: 0");
    let e = Machine::load(&format!("skylake+{key}=1")).expect_err("no [cache]").to_string();
    assert!(e.contains(&format!("+{key} needs a machine with a [cache] section")), "{e}");
}

/// The static host preset (TLBs, walker, costs) with a two-level `[cache]`, as CPUID gives one.
pub fn host_template() -> String {
    let cache = "\n[cache]\ndram_cycles = 300\nmlp = 10\nwalkers = 6\nrob = 256\n[[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n[[cache.levels]]\nname = \"L2\"\nsize = \"1MiB\"\nways = 8\ncycles = 14\n";
    format!("{}{cache}", include_str!("../src/machines/host.toml"))
}

/// A two-level host machine file for the calibration-file tests: what `calibrated_toml` writes
/// into.
pub const CALIBRATION_TEMPLATE: &str = r#"
name = "host"
description = "test"
page_sizes = ["4KiB", "2MiB"]
[cache]
dram_cycles = 300
[[cache.levels]]
name = "L1d"
size = "32KiB"
ways = 8
cycles = 5
[[cache.levels]]
name = "L2"
size = "1MiB"
ways = 8
cycles = 14
[cost]
clock_ghz = 2.0
"#;

/// A CPU whose every CPUID leaf reads zero: `detect` then builds a report the test fills in.
pub struct NoLeaves;

impl superpager_core::mmu::host::Cpuid for NoLeaves {
    fn query(&self, _leaf: u32, _sub: u32) -> [u32; 4] {
        [0; 4]
    }
}

/// A calibration file's `text` written to a directory of its own (named by `tag`) and read back
/// as `host` reads it, with no note; and the file's path (the caller removes its directory).
pub fn read_calibration_back(text: &str, tag: &str) -> (superpager_core::mmu::host::Calibration, std::path::PathBuf) {
    let (cal, path, notes) = read_calibration_noting(text, tag);
    assert!(notes.is_empty(), "{notes:?}");
    (cal, path)
}

/// `read_calibration_back` of a file whose probe `table` (`[calibration.<table>]`) does not
/// read: it asserts the one note, naming the table, that says it was left out, and says `why`
/// (the key it gave up on).
pub fn read_calibration_left_out(text: &str, tag: &str, table: &str, why: &str) -> (superpager_core::mmu::host::Calibration, std::path::PathBuf) {
    let (cal, path, notes) = read_calibration_noting(text, tag);
    assert!(notes.len() == 1 && notes[0].contains(&format!("[calibration.{table}] not read: {why}")), "{notes:?}");
    (cal, path)
}

fn read_calibration_noting(text: &str, tag: &str) -> (superpager_core::mmu::host::Calibration, std::path::PathBuf, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("sp-cal-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("host.toml");
    std::fs::write(&path, text).unwrap();
    let mut notes = Vec::new();
    let cal = superpager_core::mmu::host::read_calibration(&path, "Test CPU", &mut notes).expect("reads back");
    (cal, path, notes)
}

/// `host` as detected with no CPUID leaves, given two data caches (a 32KiB L1 in 8 ways and a
/// 16MiB L2 in 16), the test CPU's name and calibration `cal`.
pub fn two_level_report(cal: superpager_core::mmu::host::Calibration) -> superpager_core::mmu::host::HostReport {
    let mut r = superpager_core::mmu::host::detect(&NoLeaves, std::path::Path::new("/nonexistent"));
    let level = |level: u32, bytes: u64, ways: u32| superpager_core::mmu::host::CacheGeometry {
        level,
        kind: "Data".into(),
        bytes,
        ways,
        line: 64,
        sets: (bytes / 64 / ways as u64) as u32,
        source: "test".into(),
    };
    r.caches = vec![level(1, 32 << 10, 8), level(2, 16 << 20, 16)];
    r.model_name = "Test CPU".into();
    r.calibration = Some(cal);
    r
}

/// A `[cache]` of `levels` with 64-byte lines and the overlap model's plain settings
/// (`CacheSpec::of_levels`), which every cache test takes unless it says otherwise.
#[allow(dead_code)]
pub fn cache_spec(levels: Vec<superpager_core::mmu::cache::CacheLevelSpec>) -> superpager_core::mmu::cache::CacheSpec {
    superpager_core::mmu::cache::CacheSpec::of_levels(64, levels)
}

/// A skylake file (`tag` names it) with a two-level `[cache]`, an L1d of 32KiB and an L3 of 1MiB
/// in 16 ways, the L3 shared with tenants filling it at `rate` lines a ns (None: not shared).
pub fn shared_l3_file(tag: &str, rate: Option<f64>) -> String {
    let key = rate.map_or(String::new(), |r| format!("tenant_fill_rate = {r}\n"));
    let cache = format!(
        "\n[cache]\ndram_cycles = 300\nmlp = 10\nwalkers = 2\nrob = 224\n{key}\
         [[cache.levels]]\nname = \"L1d\"\nsize = \"32KiB\"\nways = 8\ncycles = 5\n\
         [[cache.levels]]\nname = \"L3\"\nsize = \"1MiB\"\nways = 16\ncycles = 40\n"
    );
    skylake_file(&format!("{tag}-{}.toml", rate.unwrap_or(0.0)), &cache)
}

/// One step of xorshift64 (Marsaglia, 2003; shifts 13, 7, 17): the tests' pseudo-random
/// sequences, the same on every run. Returns the new state.
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A reproducible stream of physical addresses with reuse at every distance, for the shared
/// last level's tests: 60,000 references, half to a hot 32KiB, the rest over 512KiB, of `line`
/// bytes each, the walker's every fifth; `seed` picks the sequence.
pub fn hot_and_wide_stream(seed: u64, line: u64) -> Vec<(u64, superpager_core::mmu::cache::Requester)> {
    use superpager_core::mmu::cache::Requester;
    let mut x = seed;
    (0..60_000)
        .map(|i| {
            let x = xorshift(&mut x);
            let span = if x & 1 == 0 { 32 << 10 } else { 512 << 10 };
            let who = if i % 5 == 0 { Requester::Walk } else { Requester::Data };
            ((x >> 8) % span / line * line, who)
        })
        .collect()
}

/// Caches of `spec` that have seen `stream` (`hot_and_wide_stream`).
pub fn caches_after(
    spec: &superpager_core::mmu::cache::CacheSpec,
    stream: &[(u64, superpager_core::mmu::cache::Requester)],
) -> superpager_core::mmu::cache::Caches {
    let mut c = superpager_core::mmu::cache::Caches::new(spec);
    for &(pa, who) in stream {
        c.defer(pa, who);
    }
    c
}

/// A result's counter `key`, which the test expects to be there.
pub fn count(r: &superpager_core::stats::Results, key: &str) -> u64 {
    *r.counters.get(key).unwrap_or_else(|| panic!("no counter {key}"))
}
