//! PyO3 bindings: a thin layer that converts arguments and errors. All logic lives in
//! superpager-core and superpager-live (live.rs); Python holds the CLI and orchestration. Long calls release the GIL.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::collections::BTreeMap;
use std::io::BufReader;
use superpager_core as core;
use superpager_core::engine::EngineConfig;
use superpager_core::mmu::machine::{self, Machine};
use superpager_core::trace::spt::{SptReader, SptWriter};
use superpager_core::trace::{self as tr, Chunk, Event, RecordSink};
use superpager_core::units::{Bytes, PageSize};

mod live;

create_exception!(_core, SuperpagerError, PyException, "A superpager error: bad input, configuration or simulation state.");
// One subclass per kind of core error, so that a caller can catch what it can act on.
create_exception!(_core, TraceError, SuperpagerError, "A trace file is malformed; the message names the file and byte offset.");
create_exception!(_core, ConfigError, SuperpagerError, "A machine, policy or scenario file is wrong; the message names the file and key.");
create_exception!(_core, FileAccessError, SuperpagerError, "A file could not be read or written (the operating system's reason).");
create_exception!(_core, UsageError, SuperpagerError, "A request that cannot be carried out: an unknown name, a bad parameter.");
create_exception!(_core, SimulationError, SuperpagerError, "The simulated system cannot go on (out of simulated memory, a broken invariant).");

fn err(e: core::Error) -> PyErr {
    let m = e.to_string();
    match e {
        core::Error::Trace { .. } => TraceError::new_err(m),
        core::Error::Config { .. } => ConfigError::new_err(m),
        core::Error::Io { .. } => FileAccessError::new_err(m),
        core::Error::Usage(_) => UsageError::new_err(m),
        core::Error::Sim(_) => SimulationError::new_err(m),
    }
}

fn usage(m: String) -> PyErr {
    UsageError::new_err(m)
}

/// A machine from a spec: a preset name, a TOML path, or `tlb:ENTRIES:WAYS[:PAGESIZE]`.
fn load_machine(spec: &str) -> PyResult<Machine> {
    match spec.strip_prefix("tlb:") {
        Some(t) => Machine::adhoc_tlb(t).map_err(err),
        None => Machine::load(spec).map_err(err),
    }
}

fn parse_bytes(s: &str, what: &str) -> PyResult<Bytes> {
    Bytes::parse(s).map_err(|m| usage(format!("{what}: {m}")))
}

/// Preset machines: list of (name, description, summary).
#[pyfunction]
fn machines() -> PyResult<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    for name in machine::preset_names() {
        let m = Machine::load(name).map_err(err)?;
        out.push((name.to_string(), m.description.clone(), m.summary()));
    }
    Ok(out)
}

/// A machine preset's TOML source (`host`: as built from this CPU), or None for an unknown name.
#[pyfunction]
fn preset_toml(name: &str) -> Option<String> {
    core::mmu::machine::preset_source(name)
}

/// The calibrated host machine file from `superpager calibrate`'s measurements (JSON of
/// `host::CalibrationInput`).
#[pyfunction]
fn calibrated_host_toml(input_json: &str) -> PyResult<String> {
    use superpager_core::mmu::host;
    let mut c: host::CalibrationInput = serde_json::from_str(input_json).map_err(|e| UsageError::new_err(format!("calibration: {e}")))?;
    // The host machine as CPUID and sysfs give it, without any earlier calibration.
    let r = host::detect(&host::NativeCpuid, std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"));
    if c.cpu.is_empty() {
        c.cpu = r.model_name.clone();
    }
    let template = machine::PRESETS.iter().find(|p| p.0 == "host").expect("host is a preset").1;
    host::calibrated_toml(&r.machine_toml(template), &c).map_err(|e| UsageError::new_err(format!("calibration: {e}")))
}

/// Run physical addresses through a cache hierarchy of `levels` [(bytes, ways)] with `line`-byte
/// lines (mmu/cache.rs): per level (then memory), the references it served. For checking the
/// cache model against an independent simulator.
#[pyfunction]
fn cache_served(levels: Vec<(u64, u32)>, line: u32, addrs: Vec<u64>) -> PyResult<Vec<u64>> {
    use superpager_core::mmu::cache::{CacheLevelSpec, CacheSpec, Caches, Requester, MAX_LEVELS};
    if levels.is_empty() || levels.len() > MAX_LEVELS {
        return Err(UsageError::new_err(format!("cache_served: 1 to {MAX_LEVELS} levels, not {}", levels.len())));
    }
    if !line.is_power_of_two() || levels.iter().any(|&(b, w)| w == 0 || b < line as u64 || !(b / line as u64).is_multiple_of(w as u64)) {
        return Err(UsageError::new_err("cache_served: each level's lines must divide into its ways, and line be a power of two"));
    }
    let spec = CacheSpec::of_levels(
        line,
        levels.iter().enumerate().map(|(i, &(bytes, ways))| CacheLevelSpec { name: format!("L{}", i + 1), bytes, ways, cycles: 0.0 }).collect(),
    );
    let mut c = Caches::new(&spec);
    // The engine's path: queued, applied in batches (what the comparison should check).
    for a in addrs {
        c.defer(a, Requester::Data);
    }
    Ok(c.served(Requester::Data))
}

/// The data-cache levels of this CPU as CPUID or sysfs give them (no calibration):
/// [(name, bytes, ways)].
#[pyfunction]
fn host_cache_levels() -> Vec<(String, u64, u32)> {
    use superpager_core::mmu::host;
    let r = host::detect(&host::NativeCpuid, std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"));
    r.data_caches().iter().map(|g| (g.model_name(), g.bytes, g.ways)).collect()
}

/// The `host` machine as read from this CPU: ([(item, value, source)], notes).
#[pyfunction]
fn host_explain() -> (Vec<(String, String, String)>, Vec<String>) {
    use superpager_core::mmu::host;
    let r = host::detect_here();
    (r.explain(), r.notes)
}

/// Details of one machine as a dict.
#[pyfunction]
fn machine_info(py: Python<'_>, spec: &str) -> PyResult<PyObject> {
    let m = load_machine(spec)?;
    let d = PyDict::new(py);
    d.set_item("name", &m.name)?;
    d.set_item("description", &m.description)?;
    d.set_item("origin", &m.origin)?;
    d.set_item("base_page", m.base_page.to_string())?;
    d.set_item("page_sizes", m.page_sizes.iter().map(|p| p.to_string()).collect::<Vec<_>>())?;
    let tl = PyList::empty(py);
    for t in &m.tlbs {
        let x = PyDict::new(py);
        x.set_item("name", &t.name)?;
        x.set_item("level", t.level)?;
        x.set_item("stream", format!("{:?}", t.stream).to_lowercase())?;
        x.set_item("entries", t.entries)?;
        x.set_item("ways", t.ways)?;
        x.set_item("page_sizes", t.sizes.iter().map(|&s| m.page_sizes[s as usize].to_string()).collect::<Vec<_>>())?;
        x.set_item("replacement", t.replacement.name())?;
        x.set_item("hit_cycles", t.hit_cycles)?;
        tl.append(x)?;
    }
    d.set_item("tlbs", tl)?;
    d.set_item("walk_levels", m.walk_levels)?;
    d.set_item("walk_ref_cycles", m.walk_ref_cycles)?;
    d.set_item("software_handler_cycles", m.software_handler_cycles)?;
    d.set_item("page_walk_caches", m.pwc.iter().map(|p| (p.level, p.sets, p.ways)).collect::<Vec<_>>())?;
    d.set_item("nested", m.nested.as_ref().map(|n| n.host_page.to_string()))?;
    d.set_item("coalescing", m.coalescing.to_string_for(&m))?;
    d.set_item("clock_ghz", m.clock_ghz)?;
    d.set_item("cycles_per_access", m.cycles_per_access)?;
    d.set_item("frame_scatter", m.frame_scatter)?;
    match &m.cache {
        None => d.set_item("cache", py.None())?,
        Some(c) => {
            let x = PyDict::new(py);
            x.set_item("line_bytes", c.line_bytes)?;
            x.set_item("levels", c.levels.iter().map(|l| (l.name.clone(), l.bytes, l.ways, l.cycles)).collect::<Vec<_>>())?;
            x.set_item("dram_cycles", c.dram_cycles)?;
            x.set_item("mlp", c.mlp)?;
            x.set_item("walkers", c.walkers)?;
            x.set_item("walk_fill_buffers", c.walk_fill_buffers)?;
            x.set_item("rob", c.rob)?;
            x.set_item("instructions_per_access", c.instructions_per_access)?;
            x.set_item("ipc", c.ipc)?;
            x.set_item("dependence", c.dependence)?;
            x.set_item("walk_ahead", c.walk_ahead)?;
            x.set_item("walk_ahead2", c.walk_ahead2)?;
            x.set_item("walk_ahead3", c.walk_ahead3)?;
            x.set_item("stream_ahead", c.stream_ahead)?;
            x.set_item("stream_prefetch", c.stream_prefetch)?;
            x.set_item("dram_line_cycles", c.dram_line_cycles)?;
            x.set_item("walk_hiding", c.walk_hiding)?;
            x.set_item("tenant_fill_rate", c.tenant_fill_rate)?;
            x.set_item("share_exponent", c.share_exponent)?;
            x.set_item("share_law", c.share_law.name())?;
            x.set_item("bounds_norm", c.bounds_norm)?;
            d.set_item("cache", x)?;
        }
    }
    Ok(d.into())
}

/// Policies: list of (name, summary, parameters).
#[pyfunction]
fn policies() -> Vec<(String, String, String)> {
    core::policy::REGISTRY.iter().map(|p| (p.name.to_string(), p.summary.to_string(), p.params.to_string())).collect()
}

/// Replacement policies (`--replacement`): list of (name, summary, parameters).
#[pyfunction]
fn replacements() -> Vec<(String, String, String)> {
    core::replacement::REGISTRY.iter().map(|(n, s, p)| (n.to_string(), s.to_string(), p.to_string())).collect()
}

/// Synthetic workload kinds: list of (name, description).
#[pyfunction]
fn gen_kinds() -> Vec<(String, String)> {
    tr::gen::KINDS.iter().map(|(k, d)| (k.to_string(), d.to_string())).collect()
}

/// Check a policy spec against a machine without running anything.
#[pyfunction]
fn check_policy(policy: &str, machine: &str) -> PyResult<String> {
    let m = load_machine(machine)?;
    let p = core::policy::build(policy, &m.page_sizes).map_err(err)?;
    Ok(p.name())
}

/// Passes over the trace a run of `policy` on `machine` makes at most: one, plus its planning
/// passes (Romer et al.'s OFFLINE plans over the whole trace first). The pool weighs runs by it.
#[pyfunction]
fn policy_passes(policy: &str, machine: &str) -> PyResult<u32> {
    let m = load_machine(machine)?;
    let p = core::policy::build(policy, &m.page_sizes).map_err(err)?;
    Ok(1 + p.features().planning_passes)
}

/// `--map-region SIZE`: the map's cell size as a shift (a power of two, at least 4KiB).
fn map_region_shift(size: Option<&str>) -> PyResult<Option<u32>> {
    let Some(s) = size else { return Ok(None) };
    let b = parse_bytes(s, "--map-region")?.0;
    if !b.is_power_of_two() || b < 4096 {
        return Err(usage(format!("--map-region {s}: a power of two of at least 4KiB")));
    }
    Ok(Some(b.trailing_zeros()))
}

/// A simulation of one trace under one or more (machine, policy) runs, stepped from Python so
/// it can show progress; each step releases the GIL.
#[pyclass(unsendable)]
struct Simulation {
    inner: core::sim::Simulation,
}

#[pymethods]
impl Simulation {
    #[new]
    #[pyo3(signature = (trace, runs, memory="64GiB", sample_every=1<<20, allow_truncated=false, validate=false, swap="0", replacement="clock", progress=None, bloat=false, map_every=0, map_region=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        trace: &str,
        runs: Vec<(String, String)>,
        memory: &str,
        sample_every: u64,
        allow_truncated: bool,
        validate: bool,
        swap: &str,
        replacement: &str,
        progress: Option<PyObject>,
        bloat: bool,
        map_every: u64,
        map_region: Option<&str>,
    ) -> PyResult<Self> {
        let mut rs = Vec::new();
        for (m, p) in runs {
            rs.push((load_machine(&m)?, p));
        }
        let cfg = EngineConfig {
            memory: parse_bytes(memory, "--memory")?,
            sample_every,
            validate,
            swap: parse_bytes(swap, "--swap")?,
            replacement: replacement.to_string(),
            bloat,
            map_every,
            map_region_shift: map_region_shift(map_region)?,
            ..EngineConfig::default()
        };
        // `progress(label, fraction)` hears about work before the first chunk (OFFLINE's planning).
        let mut cb_err = None;
        let mut report = |label: &str, f: f64| forward_progress(py, &progress, &mut cb_err, |cb| cb.call1(py, (label, f)));
        let inner = core::sim::Simulation::open_with_progress(trace, rs, cfg, allow_truncated, &mut report).map_err(err)?;
        if let Some(e) = cb_err {
            return Err(e);
        }
        Ok(Simulation { inner })
    }

    /// Process up to `chunks` chunks; False when the trace is done.
    #[pyo3(signature = (chunks=4))]
    fn step(&mut self, py: Python<'_>, chunks: usize) -> PyResult<bool> {
        let inner = &mut self.inner;
        py.allow_threads(|| inner.step(chunks)).map_err(err)
    }

    fn progress(&self) -> f64 {
        self.inner.progress()
    }

    fn truncated(&self) -> bool {
        self.inner.meta().truncated()
    }

    /// Seconds each run's engine spent on the trace so far (its own share of the shared pass).
    fn busy_seconds(&self) -> Vec<f64> {
        self.inner.busy_seconds()
    }

    /// Results of every run, as JSON strings.
    fn results_json(&mut self) -> Vec<String> {
        self.inner.results().iter().map(|r| r.to_json()).collect()
    }
}

/// A scenario run (one machine, one policy): prelude, then the scenario's processes.
#[pyclass(unsendable)]
struct ScenarioRun {
    inner: core::sim::ScenarioRun,
    machine: String,
    policy: String,
}

#[pymethods]
impl ScenarioRun {
    /// `machine` / `policy` override the scenario's (None: the scenario's, else skylake / base).
    /// `progress(label, fraction)` hears about trace generation and the prelude.
    #[new]
    #[pyo3(signature = (scenario, machine=None, policy=None, sample_every=None, validate=false, progress=None, bloat=false, map_every=0, map_region=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        scenario: &str,
        machine: Option<String>,
        policy: Option<String>,
        sample_every: Option<u64>,
        validate: bool,
        progress: Option<PyObject>,
        bloat: bool,
        map_every: u64,
        map_region: Option<&str>,
    ) -> PyResult<Self> {
        let mut sc = core::scenario::Scenario::load(scenario).map_err(err)?;
        // The command line's sampling interval wins over the scenario's.
        if sample_every.is_some() {
            sc.sample_every = sample_every;
        }
        let machine = machine.or(sc.machine.clone()).unwrap_or_else(|| "skylake".into());
        let policy = policy.or(sc.policy.clone()).unwrap_or_else(|| "base".into());
        let m = load_machine(&machine)?;
        let mut cb_err: Option<PyErr> = None;
        let mut report = |label: &str, f: f64| forward_progress(py, &progress, &mut cb_err, |cb| cb.call1(py, (label, f)));
        core::scenario::ensure_traces(&sc, &mut report).map_err(err)?;
        let cfg = EngineConfig {
            memory: sc.memory,
            validate,
            swap: sc.swap,
            replacement: sc.replacement.clone(),
            bloat,
            map_every,
            map_region_shift: map_region_shift(map_region)?,
            ..EngineConfig::default()
        };
        let inner = core::sim::ScenarioRun::open(&sc, m, &policy, cfg, &mut report);
        if let Some(e) = cb_err {
            return Err(e);
        }
        let inner = inner.map_err(err)?;
        Ok(ScenarioRun { inner, machine, policy })
    }

    #[pyo3(signature = (chunks=4))]
    fn step(&mut self, py: Python<'_>, chunks: usize) -> PyResult<bool> {
        let inner = &mut self.inner;
        py.allow_threads(|| inner.step(chunks)).map_err(err)
    }

    fn progress(&self) -> f64 {
        self.inner.progress()
    }

    #[getter]
    fn machine(&self) -> String {
        self.machine.clone()
    }

    #[getter]
    fn policy(&self) -> String {
        self.policy.clone()
    }

    fn results_json(&mut self) -> String {
        self.inner.results().to_json()
    }
}

/// Navarro et al.'s fragmentation experiment (core::experiment::fragmentation): wired pages,
/// a web server filling memory, `program` run `runs` times in a row, the web server again.
/// Returns the outcome as JSON. `progress(label, fraction)` hears about each phase.
#[pyfunction]
#[pyo3(signature = (machine, policy, memory, program, runs=4, seed=1, wired=0, web_files=20000, web_min="4KiB", web_max="64KiB", web_requests=100000, web_alpha=0.8, sample_every=1_000_000, validate=false, progress=None))]
#[allow(clippy::too_many_arguments)]
fn fragmentation_experiment(
    py: Python<'_>,
    machine: &str,
    policy: &str,
    memory: &str,
    program: &str,
    runs: u32,
    seed: u64,
    wired: u64,
    web_files: u64,
    web_min: &str,
    web_max: &str,
    web_requests: u64,
    web_alpha: f64,
    sample_every: u64,
    validate: bool,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let setup = core::experiment::FragmentationSetup {
        machine: load_machine(machine)?,
        policy: policy.to_string(),
        memory: parse_bytes(memory, "memory")?,
        seed,
        wired,
        web: core::os::prelude::Prelude::Webserver {
            files: web_files,
            min_size: parse_bytes(web_min, "web_min")?.0,
            max_size: parse_bytes(web_max, "web_max")?.0,
            requests: web_requests,
            alpha: web_alpha,
        },
        program: program.to_string(),
        runs,
        sample_every,
        validate,
    };
    let mut cb_err: Option<PyErr> = None;
    let mut report = |label: &str, f: f64| forward_progress(py, &progress, &mut cb_err, |cb| cb.call1(py, (label, f)));
    let out = core::experiment::fragmentation(&setup, &mut report);
    if let Some(e) = cb_err {
        return Err(e);
    }
    let out = out.map_err(err)?;
    serde_json::to_string(&out).map_err(|e| usage(format!("fragmentation experiment: {e}")))
}

/// Navarro et al.'s strided-preemption adversary (core::experiment::strided_preemption):
/// memory wired except `free_extents` extents of the largest size, free whole (`extents`) or
/// reserved and nearly filled by another process (`scattered`); one write every `stride`
/// bytes, `touches` times. Returns the outcome as JSON.
#[pyfunction]
#[pyo3(signature = (machine, policy, memory, free_extents, stride, touches, free_memory="extents"))]
fn strided_preemption(machine: &str, policy: &str, memory: &str, free_extents: u64, stride: &str, touches: u64, free_memory: &str) -> PyResult<String> {
    let how = core::experiment::FreeMemory::parse(free_memory).map_err(err)?;
    let out = core::experiment::strided_preemption(
        load_machine(machine)?,
        policy,
        parse_bytes(memory, "memory")?,
        free_extents,
        how,
        parse_bytes(stride, "stride")?.0,
        touches,
        false,
    )
    .map_err(err)?;
    serde_json::to_string(&out).map_err(|e| usage(format!("strided preemption: {e}")))
}

/// Navarro et al.'s dirty-file adversary (core::experiment::dirty_file): map a file shared,
/// read every page, write every `every`-th page; returns the outcome as JSON.
#[pyfunction]
#[pyo3(signature = (machine, policy, memory, file_size, every))]
fn dirty_file(machine: &str, policy: &str, memory: &str, file_size: &str, every: u64) -> PyResult<String> {
    let out = core::experiment::dirty_file(load_machine(machine)?, policy, parse_bytes(memory, "memory")?, parse_bytes(file_size, "file_size")?.0, every)
        .map_err(err)?;
    serde_json::to_string(&out).map_err(|e| usage(format!("dirty file: {e}")))
}

/// Aligned placement of file mappings (core::experiment::shared_file): `processes` processes map
/// one file shared at Linux-like addresses and read it `passes` times; returns JSON.
#[pyfunction]
#[pyo3(signature = (machine, policy, memory, file_size, processes, passes))]
fn shared_file(machine: &str, policy: &str, memory: &str, file_size: &str, processes: u32, passes: u32) -> PyResult<String> {
    let out = core::experiment::shared_file(
        load_machine(machine)?,
        policy,
        parse_bytes(memory, "memory")?,
        parse_bytes(file_size, "file_size")?.0,
        processes,
        passes,
    )
    .map_err(err)?;
    serde_json::to_string(&out).map_err(|e| usage(format!("shared file: {e}")))
}

/// Forward progress to a Python callback through `call`; the first error (or a Ctrl-C) is kept
/// in `err` and ends the reporting, so the long-running Rust side can stop cleanly.
fn forward_progress(py: Python<'_>, cb: &Option<PyObject>, err: &mut Option<PyErr>, call: impl FnOnce(&PyObject) -> PyResult<PyObject>) {
    if err.is_some() {
        return;
    }
    if let Err(e) = py.check_signals() {
        *err = Some(e);
        return;
    }
    if let Some(cb) = cb {
        if let Err(e) = call(cb) {
            *err = Some(e);
        }
    }
}

fn provenance(py_meta: BTreeMap<String, String>) -> tr::Provenance {
    let mut p = tr::Provenance::new();
    p.insert("format".into(), "superpager .spt v2".into());
    p.insert("producer".into(), format!("superpager {}", env!("CARGO_PKG_VERSION")).into());
    for (k, v) in py_meta {
        p.insert(k, v.into());
    }
    p
}

fn summary_dict(py: Python<'_>, s: &tr::spt::WriteSummary, path: &str) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    d.set_item("path", path)?;
    d.set_item("records", s.records)?;
    d.set_item("accesses", s.accesses)?;
    d.set_item("chunks", s.chunks)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("truncated", s.truncated)?;
    Ok(d.into())
}

/// Refuse an output path that must not be replaced (a device, FIFO or directory, or one of
/// `inputs`): the one rule every writer uses, Rust's and Python's (`superpager.output`).
#[pyfunction]
#[pyo3(signature = (path, inputs=vec![]))]
fn check_output(path: &str, inputs: Vec<String>) -> PyResult<()> {
    let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    tr::spt::check_output(path, &inputs).map_err(err)
}

/// Generate a synthetic workload into an .spt file.
#[pyfunction]
#[pyo3(signature = (kind, out, size="64MiB", accesses=0, seed=1, stride="4KiB", elem=8, alpha=0.99, base=0x7f00_0000_0000u64, passes=1, progress=None, warm=false, collapse="page"))]
#[allow(clippy::too_many_arguments)]
fn gen(
    py: Python<'_>,
    kind: &str,
    out: &str,
    size: &str,
    accesses: u64,
    seed: u64,
    stride: &str,
    elem: u64,
    alpha: f64,
    base: u64,
    passes: u64,
    progress: Option<PyObject>,
    warm: bool,
    collapse: &str,
) -> PyResult<PyObject> {
    let block = collapse_block("gen", collapse, false)?.unwrap_or(tr::COLLAPSE_SHIFT);
    let p = tr::gen::GenParams {
        kind: kind.to_string(),
        size: parse_bytes(size, "--size")?.0,
        accesses,
        seed,
        stride: parse_bytes(stride, "--stride")?.0,
        elem,
        alpha,
        base,
        passes,
        warm,
    };
    let mut meta = BTreeMap::new();
    meta.insert("source".to_string(), format!("superpager gen {kind}"));
    meta.insert(
        "params".to_string(),
        format!(
            "size={size} accesses={accesses} seed={seed} stride={stride} elem={elem} alpha={alpha} base={base:#x} passes={passes}{}",
            if warm { " warm" } else { "" }
        ),
    );
    meta.insert("collapse".to_string(), collapse.to_string());
    tr::spt::check_output(out, &[]).map_err(err)?;
    let tmp = format!("{out}.partial");
    let mut w = SptWriter::create(&tmp, &provenance(meta)).map_err(err)?;
    w.set_collapse_shift(block);
    let mut cb_err: Option<PyErr> = None;
    let mut report = |f: f64| forward_progress(py, &progress, &mut cb_err, |cb| cb.call1(py, (f,)));
    let r = tr::gen::generate(&p, &mut w, &mut report);
    if let Some(e) = cb_err {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    let s = w.finish().map_err(err)?;
    std::fs::rename(&tmp, out).map_err(|e| err(core::Error::io(out, &e)))?;
    summary_dict(py, &s, out)
}

/// The block a run collapse named `page` or `line` (`capture --collapse`, `trace import
/// --collapse`) joins accesses within, as the log2 of its size; `none` (import only) is None.
fn collapse_block(what: &str, collapse: &str, none_allowed: bool) -> PyResult<Option<u32>> {
    match collapse {
        "page" => Ok(Some(tr::COLLAPSE_SHIFT)),
        "line" => Ok(Some(tr::LINE_COLLAPSE_SHIFT)),
        "none" if none_allowed => Ok(None),
        other => Err(usage(format!("{what}: unknown collapse '{other}'; use page{} or line", if none_allowed { ", none" } else { "" }))),
    }
}

/// Convert a foreign trace (lackey, champsim, text) into .spt. `collapse`: `page`, `line` or
/// `none` (every access its own record).
#[pyfunction]
#[pyo3(signature = (src, fmt, out, fetches=true, collapse="page", progress=None))]
fn trace_import(py: Python<'_>, src: &str, fmt: &str, out: &str, fetches: bool, collapse: &str, progress: Option<PyObject>) -> PyResult<PyObject> {
    let block = collapse_block("trace import", collapse, true)?;
    let total = std::fs::metadata(src).map(|m| m.len()).unwrap_or(1).max(1);
    let mut report = |done: u64| -> bool { report_progress(&progress, done as f64 / total as f64) };
    let mut meta = BTreeMap::new();
    meta.insert("source".to_string(), format!("imported from {fmt}"));
    meta.insert("original".to_string(), std::path::Path::new(src).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default());
    meta.insert("collapse".to_string(), collapse.to_string());
    tr::spt::check_output(out, &[src]).map_err(err)?;
    let tmp = format!("{out}.partial");
    let s = py
        .allow_threads(|| -> core::Result<tr::spt::WriteSummary> {
            let mut w = SptWriter::create(&tmp, &provenance(meta))?;
            w.set_collapse(block.is_some());
            w.set_collapse_shift(block.unwrap_or(tr::COLLAPSE_SHIFT));
            let open = || std::fs::File::open(src).map_err(|e| core::Error::io(src, &e));
            match fmt {
                "lackey" => {
                    let r = BufReader::with_capacity(1 << 20, open()?);
                    let mut f = FetchFilter { inner: &mut w, fetches };
                    let (_, complete) = tr::lackey::import_with_end(r, src, &mut f, &mut report)?;
                    if !complete {
                        w.mark_truncated();
                    }
                }
                "champsim" => {
                    tr::champsim::import(src, fetches, &mut w, &mut report)?;
                }
                "text" => {
                    let r = BufReader::new(open()?);
                    tr::text::import(r, src, &mut w, &mut report)?;
                }
                other => return Err(core::Error::usage(format!("unknown import format '{other}'; use lackey, champsim or text"))),
            }
            w.finish()
        })
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })?;
    std::fs::rename(&tmp, out).map_err(|e| err(core::Error::io(out, &e)))?;
    summary_dict(py, &s, out)
}

/// Several input traces into one output trace, as `join` or `merge` do: the output is
/// checked against the inputs, written to OUT.partial and renamed at the end (removed on an
/// error); the provenance names the inputs and `source`.
fn combine_traces<S: Send>(
    py: Python<'_>,
    inputs: &[String],
    out: &str,
    mut meta: BTreeMap<String, String>,
    work: impl FnOnce(&[&str], &str, &core::trace::Provenance) -> core::Result<S> + Send,
) -> PyResult<S> {
    let ins: Vec<&str> = inputs.iter().map(String::as_str).collect();
    tr::spt::check_output(out, &ins).map_err(err)?;
    let names: Vec<String> = inputs.iter().map(|p| std::path::Path::new(p).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()).collect();
    meta.insert("inputs".to_string(), names.join(" "));
    let tmp = format!("{out}.partial");
    let s = py.allow_threads(|| work(&ins, &tmp, &provenance(meta))).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })?;
    std::fs::rename(&tmp, out).map_err(|e| err(core::Error::io(out, &e)))?;
    Ok(s)
}

/// Join traces one after another into one trace of several processes (trace/join.rs).
#[pyfunction]
#[pyo3(signature = (inputs, out, progress=None))]
fn trace_join(py: Python<'_>, inputs: Vec<String>, out: &str, progress: Option<PyObject>) -> PyResult<PyObject> {
    let meta = BTreeMap::from([("source".to_string(), "joined".to_string())]);
    let n = inputs.len().max(1);
    let s = combine_traces(py, &inputs, out, meta, |ins, tmp, prov| tr::join::join(ins, tmp, prov, &mut |i| report_progress(&progress, i as f64 / n as f64)))?;
    let d = summary_dict(py, &s.write, out)?;
    d.bind(py).set_item("processes", s.processes)?;
    Ok(d)
}

/// Merge traces side by side into one trace of several processes (trace/merge.rs): by
/// instruction clocks, `slice` at a time, or round robin with `quantum` accesses per turn.
#[pyfunction]
#[pyo3(signature = (inputs, out, slice=10_000, quantum=None, progress=None))]
fn trace_merge(py: Python<'_>, inputs: Vec<String>, out: &str, slice: u64, quantum: Option<u64>, progress: Option<PyObject>) -> PyResult<PyObject> {
    let how = match quantum {
        Some(n) => tr::merge::Interleave::Quantum(n),
        None => tr::merge::Interleave::Instructions { slice },
    };
    let interleave = match how {
        tr::merge::Interleave::Quantum(n) => format!("round robin, {n} accesses per turn"),
        tr::merge::Interleave::Instructions { slice } => format!("lowest instruction clock first, {slice} instructions per slice"),
    };
    let meta = BTreeMap::from([("source".to_string(), "merged".to_string()), ("interleave".to_string(), interleave)]);
    let s = combine_traces(py, &inputs, out, meta, |ins, tmp, prov| tr::merge::merge(ins, tmp, how, prov, &mut |f| report_progress(&progress, f)))?;
    let d = summary_dict(py, &s.write, out)?;
    d.bind(py).set_item("processes", s.processes)?;
    d.bind(py).set_item("switches", s.switches)?;
    Ok(d)
}

/// Call a Python progress callback from a thread without the GIL; false if the user pressed
/// Ctrl-C (or the callback failed), to stop the work.
fn report_progress(cb: &Option<PyObject>, fraction: f64) -> bool {
    Python::with_gil(|py| {
        if py.check_signals().is_err() {
            return false;
        }
        match cb {
            Some(cb) => cb.call1(py, (fraction,)).is_ok(),
            None => true,
        }
    })
}

struct FetchFilter<'a, S: RecordSink> {
    inner: &'a mut S,
    fetches: bool,
}

impl<'a, S: RecordSink> RecordSink for FetchFilter<'a, S> {
    fn access(&mut self, a: tr::Access) -> core::Result<()> {
        if a.kind.is_fetch() && !self.fetches {
            return Ok(());
        }
        self.inner.access(a)
    }
    fn event(&mut self, e: Event) -> core::Result<()> {
        self.inner.event(e)
    }
}

/// Records and accesses of a trace from its index alone (no chunk is read): a run's cost
/// estimate for scheduling; None for a trace cut short (no index).
#[pyfunction]
fn trace_totals(path: &str) -> PyResult<Option<(u64, u64)>> {
    let (meta, _) = core::trace::spt::open_meta(path).map_err(err)?;
    Ok(meta.totals())
}

/// Summary of a trace: header, record counts, accesses by kind, footprint per page size, VMAs.
#[pyfunction]
#[pyo3(signature = (path, page_sizes=vec!["4KiB".to_string(), "2MiB".to_string(), "1GiB".to_string()], allow_truncated=false, progress=None))]
fn trace_info(py: Python<'_>, path: &str, page_sizes: Vec<String>, allow_truncated: bool, progress: Option<PyObject>) -> PyResult<PyObject> {
    let sizes: Vec<PageSize> = page_sizes.iter().map(|s| PageSize::parse(s).map_err(|m| usage(format!("page size: {m}")))).collect::<PyResult<_>>()?;
    let mut reader = SptReader::open(path).map_err(err)?;
    reader.allow_truncated(allow_truncated);
    let meta = reader.meta.clone();
    let info = py.allow_threads(|| tr::info::analyze(&mut reader, &sizes, &mut |f| report_progress(&progress, f))).map_err(err)?;
    let d = PyDict::new(py);
    d.set_item("path", path)?;
    d.set_item("truncated", meta.truncated())?;
    d.set_item("provenance", serde_json::to_string(&meta.provenance).unwrap_or_default())?;
    d.set_item("bytes", meta.file_len)?;
    d.set_item("chunks", info.chunks)?;
    d.set_item("records", info.records)?;
    let k = PyDict::new(py);
    for (i, n) in ["load", "store", "modify", "fetch"].iter().enumerate() {
        k.set_item(*n, info.kinds[i])?;
    }
    d.set_item("accesses", info.accesses())?;
    d.set_item("accesses_by_kind", k)?;
    d.set_item("events", info.events.into_iter().collect::<Vec<_>>())?;
    let fp = PyDict::new(py);
    for (s, n) in sizes.iter().zip(&info.footprint_pages) {
        fp.set_item(s.to_string(), *n)?;
    }
    d.set_item("footprint_pages", fp)?;
    d.set_item("processes", info.pids.into_iter().collect::<Vec<_>>())?;
    d.set_item("address_space_events", info.address_space_events)?;
    Ok(d.into())
}

/// Streams a trace as text lines.
#[pyclass(unsendable)]
struct TraceDumper {
    reader: SptReader,
    chunk: Chunk,
    ai: usize,
    ei: usize,
    done: bool,
}

#[pymethods]
impl TraceDumper {
    #[new]
    #[pyo3(signature = (path, allow_truncated=false))]
    fn new(path: &str, allow_truncated: bool) -> PyResult<Self> {
        let mut reader = SptReader::open(path).map_err(err)?;
        reader.allow_truncated(allow_truncated);
        Ok(TraceDumper { reader, chunk: Chunk::default(), ai: 0, ei: 0, done: false })
    }

    fn header(&self) -> String {
        serde_json::to_string(&self.reader.meta.provenance).unwrap_or_default()
    }

    /// Up to n more lines (an empty list at the end).
    fn lines(&mut self, n: usize) -> PyResult<Vec<String>> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n && !self.done {
            let c = &self.chunk;
            if self.ei < c.events.len() && c.events[self.ei].0 as usize <= self.ai {
                out.push(tr::text::format_event(&c.events[self.ei].1));
                self.ei += 1;
            } else if self.ai < c.accesses.len() {
                out.push(tr::text::format_access(&c.accesses[self.ai]));
                self.ai += 1;
            } else if self.ei < c.events.len() {
                out.push(tr::text::format_event(&c.events[self.ei].1));
                self.ei += 1;
            } else {
                self.ai = 0;
                self.ei = 0;
                if !self.reader.next_chunk(&mut self.chunk).map_err(err)? {
                    self.done = true;
                }
            }
        }
        Ok(out)
    }
}

/// Misses of a fully associative LRU TLB for every size 1..=max_entries, in one pass.
#[pyfunction]
#[pyo3(signature = (path, page_size="4KiB", max_entries=1536, stream="all", progress=None))]
fn mrc(py: Python<'_>, path: &str, page_size: &str, max_entries: usize, stream: &str, progress: Option<PyObject>) -> PyResult<(u64, u64, Vec<u64>)> {
    let ps = PageSize::parse(page_size).map_err(|m| usage(format!("--page-size: {m}")))?;
    if max_entries == 0 || max_entries > 1 << 24 {
        return Err(usage("--max-entries must be between 1 and 16777216".into()));
    }
    let want: fn(&tr::Access) -> bool = match stream {
        "all" => |_| true,
        "data" => |a| !a.kind.is_fetch(),
        "instruction" => |a| a.kind.is_fetch(),
        o => return Err(usage(format!("--stream {o}: use all, data or instruction"))),
    };
    let mut reader = SptReader::open(path).map_err(err)?;
    py.allow_threads(|| -> core::Result<(u64, u64, Vec<u64>)> {
        let mut sd = core::mrc::StackDistance::new(ps.shift(), max_entries);
        let mut c = Chunk::default();
        let total = reader.meta.file_len.max(1) as f64;
        while reader.next_chunk(&mut c)? {
            if !report_progress(&progress, reader.position() as f64 / total) {
                return Err(core::Error::usage("interrupted"));
            }
            for a in c.accesses.iter().filter(|a| want(a)) {
                sd.access(a);
            }
        }
        Ok((sd.accesses, sd.cold, sd.curve()))
    })
    .map_err(err)
}

/// Every access address (run counts expanded), little-endian u64, up to `limit` (0 = all).
#[pyfunction]
#[pyo3(signature = (path, limit=0, data_only=false))]
fn read_addresses<'py>(py: Python<'py>, path: &str, limit: u64, data_only: bool) -> PyResult<Bound<'py, PyBytes>> {
    let mut reader = SptReader::open(path).map_err(err)?;
    let v = py
        .allow_threads(|| -> core::Result<Vec<u8>> {
            let mut out = Vec::new();
            let mut c = Chunk::default();
            let mut n = 0u64;
            'outer: while reader.next_chunk(&mut c)? {
                for a in &c.accesses {
                    if data_only && a.kind.is_fetch() {
                        continue;
                    }
                    for _ in 0..a.count {
                        if limit > 0 && n >= limit {
                            break 'outer;
                        }
                        out.extend_from_slice(&a.addr.to_le_bytes());
                        n += 1;
                    }
                }
            }
            Ok(out)
        })
        .map_err(err)?;
    Ok(PyBytes::new(py, &v))
}

/// Time the one-structure TLB model on a buffer of u64 addresses. Returns (hits, misses, seconds).
#[pyfunction]
#[pyo3(signature = (addresses, entries=64, ways=4, page_size="4KiB"))]
fn tlb_only(py: Python<'_>, addresses: &[u8], entries: u32, ways: u32, page_size: &str) -> PyResult<(u64, u64, f64)> {
    let ps = PageSize::parse(page_size).map_err(|m| usage(format!("page size: {m}")))?;
    Machine::adhoc_tlb(&format!("{entries}:{ways}:{page_size}")).map_err(err)?;
    let addrs: Vec<u64> = addresses.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect();
    Ok(py.allow_threads(|| {
        let t0 = std::time::Instant::now();
        let (h, m) = core::sim::tlb_only(&addrs, entries, ways, ps.shift());
        (h, m, t0.elapsed().as_secs_f64())
    }))
}

/// Whether TLB sets use the AVX2 set operations in this process (the CPU has AVX2 and
/// SUPERPAGER_SCALAR_TLB is not set).
#[pyfunction]
fn wide_tlb() -> bool {
    core::mmu::tlb::wide_set_operations()
}

/// The receiving end of a capture (the qemu-user plugin's socket), writing an .spt file on a
/// thread of its own while Python runs and watches the traced program.
#[pyclass]
struct CaptureSession {
    progress: std::sync::Arc<tr::capture::Progress>,
    worker: Option<std::thread::JoinHandle<(tr::capture::Receiver, core::Result<()>)>>,
}

#[pymethods]
impl CaptureSession {
    /// `fd`: the receiving socket; `root_pid`: the host pid of the traced command;
    /// `meta`: provenance for the trace header (JSON object text); `collapse`: runs collapse
    /// within a 4KiB page (`page`) or a 64-byte line (`line`), as the plugin was told.
    #[new]
    #[pyo3(signature = (fd, out, root_pid, meta, collapse = "page"))]
    fn new(fd: i32, out: &str, root_pid: u32, meta: &str, collapse: &str) -> PyResult<Self> {
        let block = collapse_block("capture", collapse, false)?.unwrap_or(tr::COLLAPSE_SHIFT);
        let extra: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(meta).map_err(|e| usage(format!("capture metadata is not a JSON object: {e}")))?;
        let mut prov = provenance(BTreeMap::new());
        prov.extend(extra);
        let mut rx = tr::capture::Receiver::create(out, &prov, root_pid).map_err(err)?;
        rx.set_collapse_shift(block);
        let progress = std::sync::Arc::new(tr::capture::Progress::default());
        let p = progress.clone();
        let worker = std::thread::Builder::new()
            .name("spt-capture".into())
            .spawn(move || {
                let r = rx.receive(fd, &p);
                (rx, r)
            })
            .map_err(|e| usage(format!("cannot start the capture thread: {e}")))?;
        Ok(CaptureSession { progress, worker: Some(worker) })
    }

    /// (accesses, packets, bytes received, receiving finished, writing failed)
    fn progress(&self) -> (u64, u64, u64, bool, bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let p = &self.progress;
        let done = self.worker.as_ref().is_none_or(|w| w.is_finished());
        (p.accesses.load(Relaxed), p.packets.load(Relaxed), p.bytes_in.load(Relaxed), done, p.write_failed.load(Relaxed))
    }

    /// Stop receiving (the program is being stopped); `finish` follows.
    fn stop(&self) {
        self.progress.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Wait for the receiving thread, end the trace, and report.
    #[pyo3(signature = (interrupted=false))]
    fn finish(&mut self, py: Python<'_>, interrupted: bool) -> PyResult<PyObject> {
        let w = self.worker.take().ok_or_else(|| usage("capture already finished".into()))?;
        let (rx, recv) = py.allow_threads(|| w.join()).map_err(|_| usage("the capture thread panicked".into()))?;
        let stream_error = recv.err().map(|e| e.to_string());
        let s = py.allow_threads(|| rx.finish(interrupted || stream_error.is_some())).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("records", s.write.records)?;
        d.set_item("accesses", s.write.accesses)?;
        d.set_item("chunks", s.write.chunks)?;
        d.set_item("bytes", s.write.bytes)?;
        d.set_item("processes", s.processes)?;
        d.set_item("threads", s.threads)?;
        d.set_item("packets", s.packets)?;
        d.set_item("orphans", s.orphans)?;
        d.set_item("phase_marks", s.phase_marks)?;
        d.set_item("truncated", s.truncated)?;
        d.set_item("write_error", s.write_error)?;
        d.set_item("stream_error", stream_error)?;
        let ends = PyList::empty(py);
        for (pid, host, end) in s.endings {
            let e = PyDict::new(py);
            e.set_item("pid", pid)?;
            e.set_item("host_pid", host)?;
            match end {
                Some(tr::capture::Ending::Exit(c)) => {
                    e.set_item("end", "exit")?;
                    e.set_item("code", c)?;
                }
                Some(tr::capture::Ending::Exec(p)) => {
                    e.set_item("end", "exec")?;
                    e.set_item("program", p)?;
                }
                Some(tr::capture::Ending::Signal) => e.set_item("end", "signal")?,
                None => e.set_item("end", "cut")?,
            }
            ends.append(e)?;
        }
        d.set_item("endings", ends)?;
        Ok(d.into())
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SuperpagerError", m.py().get_type::<SuperpagerError>())?;
    m.add("TraceError", m.py().get_type::<TraceError>())?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("FileAccessError", m.py().get_type::<FileAccessError>())?;
    m.add("UsageError", m.py().get_type::<UsageError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(machines, m)?)?;
    m.add_function(wrap_pyfunction!(machine_info, m)?)?;
    m.add_function(wrap_pyfunction!(host_explain, m)?)?;
    m.add_function(wrap_pyfunction!(preset_toml, m)?)?;
    m.add_function(wrap_pyfunction!(calibrated_host_toml, m)?)?;
    m.add_function(wrap_pyfunction!(host_cache_levels, m)?)?;
    m.add_function(wrap_pyfunction!(cache_served, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(policy_passes, m)?)?;
    m.add_function(wrap_pyfunction!(check_output, m)?)?;
    m.add_function(wrap_pyfunction!(gen, m)?)?;
    m.add_function(wrap_pyfunction!(gen_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(trace_import, m)?)?;
    m.add_function(wrap_pyfunction!(trace_join, m)?)?;
    m.add_function(wrap_pyfunction!(trace_merge, m)?)?;
    m.add_function(wrap_pyfunction!(replacements, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(trace_totals, m)?)?;
    m.add_function(wrap_pyfunction!(mrc, m)?)?;
    m.add_function(wrap_pyfunction!(read_addresses, m)?)?;
    m.add_function(wrap_pyfunction!(tlb_only, m)?)?;
    m.add_function(wrap_pyfunction!(wide_tlb, m)?)?;
    m.add_function(wrap_pyfunction!(fragmentation_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(strided_preemption, m)?)?;
    m.add_function(wrap_pyfunction!(dirty_file, m)?)?;
    m.add_function(wrap_pyfunction!(shared_file, m)?)?;
    m.add_class::<Simulation>()?;
    m.add_class::<ScenarioRun>()?;
    m.add_class::<TraceDumper>()?;
    m.add_class::<CaptureSession>()?;
    live::register(m)?;
    Ok(())
}
