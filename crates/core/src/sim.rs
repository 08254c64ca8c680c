//! Driving runs from a trace file: one decode pipeline feeding one or more engines (so
//! `compare` reads and decodes the trace once for every machine and policy).

use crate::engine::{Engine, EngineConfig};
use crate::error::Result;
use crate::mmu::machine::Machine;
use crate::mmu::tlb::{make_tag, Tlb};
use crate::policy::{self, Policy};
use crate::scenario::Scenario;
use crate::stats::Results;
use crate::trace::spt::{PrefetchReader, TraceMeta};
use crate::trace::Chunk;
use std::time::{Duration, Instant};

pub struct Simulation {
    reader: PrefetchReader,
    pub engines: Vec<Engine>,
    done: bool,
    pos: u64,
    /// The chunks of the window being run (empty between steps).
    held: Vec<Chunk>,
    /// Time each engine spent running chunks (its share of a pass shared with others).
    busy: Vec<Duration>,
}

/// Chunks each engine runs in a row when several engines share one pass over a trace: a
/// scoped thread per window rather than per chunk, and each engine's state reloaded into the
/// caches once per window. (Measured on join, ten romer engines on one thread: 23.7, 23.3, 23.2
/// and 24.2 CPU seconds with windows of 1, 16, 64 and 256 chunks, against 27.0 for ten runs
/// each decoding the trace; docs/RESULTS.md, "reproduce romer, serial against the pool".)
pub const ENGINE_WINDOW: usize = 16;

/// Chunks a step takes at a time: a window when several engines share the pass, else one.
fn window_for(engines: usize) -> usize {
    if engines > 1 {
        ENGINE_WINDOW
    } else {
        1
    }
}

/// One process of a scenario: its trace, where its pids start, when it starts.
struct Source {
    reader: PrefetchReader,
    pid_base: u32,
    start_cycles: u64,
    done: bool,
    bytes_done: u64,
}

/// A scenario run: one engine (one machine, one policy), a prelude applied to its memory, and
/// several processes interleaved in round-robin quanta of one chunk each, each from its start
/// time; when no process is ready the machine idles (daemons keep running) until one is.
pub struct ScenarioRun {
    pub engine: Engine,
    sources: Vec<Source>,
    next: usize,
    total_bytes: u64,
}

impl ScenarioRun {
    pub fn open(sc: &Scenario, machine: Machine, policy_spec: &str, mut cfg: EngineConfig, progress: &mut dyn FnMut(&str, f64)) -> Result<ScenarioRun> {
        cfg.memory = sc.memory;
        cfg.swap = sc.swap;
        cfg.replacement = sc.replacement.clone();
        if let Some(n) = sc.sample_every {
            cfg.sample_every = n;
        }
        let pol = policy::build(policy_spec, &machine.page_sizes)?;
        if pol.features().planning_passes > 0 {
            return Err(crate::Error::usage(format!("policy {policy_spec}: OFFLINE plans over one trace; scenarios are not supported")));
        }
        let mut engine = Engine::new(machine, pol, cfg)?;
        place_cache_replay(std::slice::from_mut(&mut engine));
        for (i, p) in sc.prelude.iter().enumerate() {
            let label = format!("prelude {}", p.name());
            p.apply(&mut engine.os, sc.seed.wrapping_add(i as u64), &mut |f| progress(&label, f))?;
            if engine.cfg.validate {
                engine.validate().map_err(|m| crate::Error::Sim(format!("invariant broken after prelude {}: {m}", p.name())))?;
            }
        }
        let ghz = engine.mmu.machine.clock_ghz;
        let mut sources = Vec::new();
        let mut total_bytes = 0;
        for (i, p) in sc.processes.iter().enumerate() {
            let path = p.trace.to_string_lossy().to_string();
            let reader = PrefetchReader::open(&path, false)?;
            total_bytes += reader.meta.file_len.saturating_sub(reader.meta.data_offset);
            sources.push(Source {
                reader,
                // Process i's pids are its trace's pids plus i * 100000, so traces that
                // all call their process 1 stay apart.
                pid_base: i as u32 * 100_000,
                start_cycles: (p.start_ms * ghz * 1e6) as u64,
                done: false,
                bytes_done: 0,
            });
        }
        engine.sample();
        Ok(ScenarioRun { engine, sources, next: 0, total_bytes })
    }

    /// Run up to `max_chunks` quanta. Returns false when every process has finished.
    pub fn step(&mut self, max_chunks: usize) -> Result<bool> {
        for _ in 0..max_chunks {
            let now = self.engine.now();
            let n = self.sources.len();
            let ready = (0..n).map(|k| (self.next + k) % n).find(|&i| !self.sources[i].done && self.sources[i].start_cycles <= now);
            let Some(i) = ready else {
                // Nobody ready: idle until the next start, if any.
                match self.sources.iter().filter(|s| !s.done).map(|s| s.start_cycles).min() {
                    Some(t) => {
                        self.engine.idle_until(t);
                        continue;
                    }
                    None => return Ok(false),
                }
            };
            self.next = (i + 1) % n;
            let src = &mut self.sources[i];
            match src.reader.next()? {
                Some(c) => {
                    src.bytes_done = c.end_offset - src.reader.meta.data_offset;
                    self.engine.run_chunk_as(i as u32, src.pid_base, &c)?;
                    src.reader.give_back(c);
                }
                None => src.done = true,
            }
        }
        Ok(self.sources.iter().any(|s| !s.done))
    }

    pub fn progress(&self) -> f64 {
        if self.total_bytes == 0 {
            return 1.0;
        }
        self.sources.iter().map(|s| s.bytes_done).sum::<u64>() as f64 / self.total_bytes as f64
    }

    pub fn results(&mut self) -> Results {
        self.engine.results()
    }
}

/// Run a policy's planning passes (`Features::planning_passes`; Romer et al.'s OFFLINE): each
/// runs the whole `trace` in an engine of its own, then the policy, taken back, learns from it
/// (`Policy::end_planning_pass`) and says whether to go on. Returns the policy ready for the
/// measured run. `progress(pass, fraction)` hears about each pass.
pub fn plan(trace: &str, machine: &Machine, mut pol: Box<dyn Policy>, cfg: &EngineConfig, progress: &mut dyn FnMut(u32, f64)) -> Result<Box<dyn Policy>> {
    let passes = pol.features().planning_passes;
    for pass in 0..passes {
        let mut e = Engine::new(machine.clone(), pol, cfg.clone())?;
        let mut reader = PrefetchReader::open(trace, false)?;
        let span = reader.meta.file_len.saturating_sub(reader.meta.data_offset).max(1);
        let data0 = reader.meta.data_offset;
        while let Some(c) = reader.next()? {
            e.run_chunk(&c)?;
            progress(pass, (c.end_offset - data0) as f64 / span as f64);
            reader.give_back(c);
        }
        pol = e.into_policy();
        if !pol.end_planning_pass(pass) {
            break;
        }
    }
    Ok(pol)
}

impl Simulation {
    /// `runs`: (machine name or path, or an Engine-ready Machine) x policy spec.
    pub fn open(trace: &str, runs: Vec<(Machine, String)>, cfg: EngineConfig, allow_truncated: bool) -> Result<Simulation> {
        Self::open_with_progress(trace, runs, cfg, allow_truncated, &mut |_, _| {})
    }

    /// As `open`; `progress(label, fraction)` hears about the work done before the first chunk
    /// can run (Romer et al.'s OFFLINE planning passes over the whole trace).
    pub fn open_with_progress(
        trace: &str,
        runs: Vec<(Machine, String)>,
        cfg: EngineConfig,
        allow_truncated: bool,
        progress: &mut dyn FnMut(&str, f64),
    ) -> Result<Simulation> {
        let mut engines = Vec::new();
        for (m, p) in runs {
            let mut pol = policy::build(&p, &m.page_sizes)?;
            if pol.features().planning_passes > 0 {
                let mut report = |pass: u32, f: f64| progress(&format!("planning {p} on {}, pass {}", m.name, pass + 1), f);
                pol = plan(trace, &m, pol, &cfg, &mut report)?;
            }
            engines.push(Engine::new(m, pol, cfg.clone())?);
        }
        place_cache_replay(&mut engines);
        let window = window_for(engines.len());
        let reader = PrefetchReader::open_ahead(trace, allow_truncated, window + 1)?;
        let pos = reader.meta.data_offset;
        let busy = vec![Duration::ZERO; engines.len()];
        Ok(Simulation { reader, engines, done: false, pos, held: Vec::with_capacity(window), busy })
    }

    pub fn meta(&self) -> &TraceMeta {
        &self.reader.meta
    }

    /// Process at least `max_chunks` chunks (a whole window when several engines share the
    /// pass). Returns false when the trace is finished.
    pub fn step(&mut self, max_chunks: usize) -> Result<bool> {
        let window = window_for(self.engines.len());
        let mut ran = 0;
        while ran < max_chunks.max(1) && !self.done {
            while self.held.len() < window {
                match self.reader.next()? {
                    Some(c) => self.held.push(c),
                    None => {
                        self.done = true;
                        break;
                    }
                }
            }
            if self.held.is_empty() {
                break;
            }
            run_engines(&mut self.engines, &self.held, &mut self.busy)?;
            self.pos = self.held.last().map_or(self.pos, |c| c.end_offset);
            ran += self.held.len();
            for c in self.held.drain(..) {
                self.reader.give_back(c);
            }
        }
        Ok(!self.done)
    }

    /// Seconds each engine has spent running chunks: a run's own time when several share a
    /// pass (the decoding, shared, is not in it).
    pub fn busy_seconds(&self) -> Vec<f64> {
        self.busy.iter().map(|d| d.as_secs_f64()).collect()
    }

    /// Fraction of the file consumed.
    pub fn progress(&self) -> f64 {
        let m = &self.reader.meta;
        if m.file_len <= m.data_offset {
            return 1.0;
        }
        (self.pos - m.data_offset) as f64 / (m.file_len - m.data_offset) as f64
    }

    pub fn results(&mut self) -> Vec<Results> {
        self.engines.iter_mut().map(|e| e.results()).collect()
    }
}

/// The cores a run may use: SUPERPAGER_THREADS, else every one this process may run on
/// (SUPERPAGER_THREADS=1 keeps a run on one thread: a pool's workers already fill the cores).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::env::var("SUPERPAGER_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// Gives each engine's data caches a replay thread of their own (mmu/replay_thread.rs) when
/// there is a core for it: at least two cores per engine (run_engines already puts a second
/// engine on the second core). SUPERPAGER_CACHE_THREAD=1 or 0 decides instead. Results are the
/// same either way.
fn place_cache_replay(engines: &mut [Engine]) {
    let on = match std::env::var("SUPERPAGER_CACHE_THREAD").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => cores() >= 2 * engines.len(),
    };
    if on {
        for e in engines {
            if let Some(c) = e.mmu.caches.as_mut() {
                c.set_replay_thread(true);
            }
        }
    }
}

/// Run a window of chunks through every engine, each engine the whole window in a row (see
/// ENGINE_WINDOW). Engines share nothing, so with several of them and a second core the later
/// half runs on a scoped thread while this one runs the first half (the reader decodes ahead on
/// its own thread); every engine sees the same chunks in the same order, so results do not
/// depend on it. The error reported is the first failing engine's, in run order.
fn run_engines(engines: &mut [Engine], chunks: &[Chunk], busy: &mut [Duration]) -> Result<()> {
    let cores = cores();
    let run = |engines: &mut [Engine], busy: &mut [Duration]| -> Result<()> {
        engines.iter_mut().zip(busy.iter_mut()).try_for_each(|(e, b)| {
            let t = Instant::now();
            let r = chunks.iter().try_for_each(|c| e.run_chunk(c));
            *b += t.elapsed();
            r
        })
    };
    if engines.len() < 2 || cores < 2 {
        return run(engines, busy);
    }
    let mid = engines.len().div_ceil(2);
    let (first, second) = engines.split_at_mut(mid);
    let (busy_a, busy_b) = busy.split_at_mut(mid);
    let (a, b) = std::thread::scope(|s| {
        let other = s.spawn(|| run(second, busy_b));
        let a = run(first, busy_a);
        (a, other.join())
    });
    a?;
    match b {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// The TLB model alone on a flat array of addresses: one structure, one page size, no OS.
/// This is what the pycachesim comparison measures (a cache with page-sized lines).
/// Returns (hits, misses).
pub fn tlb_only(addrs: &[u64], entries: u32, ways: u32, page_shift: u32) -> (u64, u64) {
    let mut t = Tlb::new(entries, ways, crate::mmu::tlb::Replacement::Lru, 0);
    let mut misses = 0u64;
    for &a in addrs {
        let vpn = a >> page_shift;
        let tag = make_tag(0, vpn, 0);
        if !t.access(vpn, tag) {
            misses += 1;
        }
    }
    (addrs.len() as u64 - misses, misses)
}
