//! Bindings of superpager-live: inspect a process, the navarro-live scanner, the hot-range
//! ranking damon-live uses, and its collapses through the frame reserve. Reports cross as JSON
//! text (serde), decoded in Python; the scans themselves run in Rust with the GIL released.

use crate::{FileAccessError, UsageError};
use pyo3::exceptions::{PyPermissionError, PyProcessLookupError};
use pyo3::prelude::*;
use superpager_live::inspect::{inspect, InspectOptions};
use superpager_live::navarro::NavarroLive;
use superpager_live::pagemap::Pagemap;
use superpager_live::rank::{rank_ranges, HotRegion};
use superpager_live::reserve::{ReserveMode, ReservedCollapse};
use superpager_live::LiveError;

fn live_err(e: LiveError) -> PyErr {
    let m = e.to_string();
    match e {
        LiveError::Gone { .. } => PyProcessLookupError::new_err(m),
        LiveError::Permission { .. } => PyPermissionError::new_err(m),
        LiveError::Io { .. } | LiveError::Parse { .. } => FileAccessError::new_err(m),
    }
}

/// Inspects process `pid`: a JSON report (see superpager.live.inspect).
#[pyfunction]
#[pyo3(signature = (pid, bloat_samples=8, seed=1))]
fn live_inspect(py: Python<'_>, pid: i32, bloat_samples: u32, seed: u64) -> PyResult<String> {
    let r = py.allow_threads(|| inspect(pid, InspectOptions { bloat_samples, seed })).map_err(live_err)?;
    serde_json::to_string(&r).map_err(|e| UsageError::new_err(e.to_string()))
}

/// The 2MB ranges of `pid` not yet huge, hottest first: [(address, score)], from physical
/// regions [(start, end, accesses)] in bytes.
#[pyfunction]
fn live_rank(py: Python<'_>, pid: i32, regions: Vec<(u64, u64, u32)>) -> PyResult<Vec<(u64, u64)>> {
    let regions: Vec<HotRegion> = regions.into_iter().map(|(start, end, accesses)| HotRegion { start, end, accesses }).collect();
    py.allow_threads(|| rank_ranges(pid, &regions)).map_err(live_err)
}

fn reserve_mode(policy: &str, reserve: &str) -> PyResult<ReserveMode> {
    ReserveMode::parse(reserve).ok_or_else(|| UsageError::new_err(format!("{policy}: reserve must be on, off or auto, got '{reserve}'")))
}

/// damon-live's collapses of process `pid`'s 2MB ranges, each through the frame reserve (the
/// same path as navarro-live's).
#[pyclass(name = "LiveCollapser", unsendable)]
pub struct PyLiveCollapser {
    pid: i32,
    pm: Pagemap,
    inner: ReservedCollapse,
}

#[pymethods]
impl PyLiveCollapser {
    #[new]
    #[pyo3(signature = (pid, reserve="auto"))]
    fn new(pid: i32, reserve: &str) -> PyResult<Self> {
        let mode = reserve_mode("damon-live", reserve)?;
        let pm = Pagemap::open(pid).map_err(live_err)?;
        Ok(PyLiveCollapser { pid, pm, inner: ReservedCollapse::new(pid, mode).map_err(live_err)? })
    }

    /// MADV_COLLAPSE of the 2MB range at `addr` (2MB-aligned): (True, "", 0) or (False, reason,
    /// errno).
    fn collapse(&mut self, py: Python<'_>, addr: u64) -> PyResult<(bool, String, i32)> {
        if !addr.is_multiple_of(superpager_live::PMD_BYTES) {
            return Err(UsageError::new_err(format!("collapse: address {addr:#x} of process {} is not 2MB-aligned", self.pid)));
        }
        // By mutable reference: a Pagemap is Send, not Sync (its file sits in a RefCell).
        let (pm, inner) = (&mut self.pm, &mut self.inner);
        Ok(match py.allow_threads(move || inner.collapse(pm, addr)) {
            Ok(_) => (true, String::new(), 0),
            Err((f, e)) => (false, f.name().to_string(), e),
        })
    }

    /// The frame reserve's counters so far, as JSON.
    fn reserve_counters(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.reserve.counters).map_err(|e| UsageError::new_err(e.to_string()))
    }
}

/// navarro-live's scanner on one process (see superpager.live.policies).
#[pyclass(name = "NavarroLive", unsendable)]
pub struct PyNavarroLive {
    inner: NavarroLive,
}

#[pymethods]
impl PyNavarroLive {
    #[new]
    #[pyo3(signature = (pid, promote_at=512, reserve="auto"))]
    fn new(pid: i32, promote_at: u32, reserve: &str) -> PyResult<Self> {
        if promote_at == 0 || promote_at > 512 {
            return Err(UsageError::new_err(format!("navarro-live: promote_at must be 1..512 pages of a 2MB range, got {promote_at}")));
        }
        let mode = reserve_mode("navarro-live", reserve)?;
        Ok(PyNavarroLive { inner: NavarroLive::new(pid, promote_at, mode).map_err(live_err)? })
    }

    /// One pass: collapses up to `max_collapses` ranges; a JSON StepOutcome. ProcessLookupError
    /// once the process has exited.
    fn step(&mut self, py: Python<'_>, max_collapses: u32) -> PyResult<String> {
        let inner = &mut self.inner;
        let o = py.allow_threads(|| inner.step(max_collapses)).map_err(live_err)?;
        serde_json::to_string(&o).map_err(|e| UsageError::new_err(e.to_string()))
    }

    /// The run's counters so far, the frame reserve's under "reserve", as JSON.
    fn counters(&self) -> PyResult<String> {
        let err = |e: serde_json::Error| UsageError::new_err(e.to_string());
        let mut v = serde_json::to_value(&self.inner.counters).map_err(err)?;
        v["reserve"] = serde_json::to_value(&self.inner.collapser.reserve.counters).map_err(err)?;
        serde_json::to_string(&v).map_err(err)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(live_inspect, m)?)?;
    m.add_function(wrap_pyfunction!(live_rank, m)?)?;
    m.add_class::<PyLiveCollapser>()?;
    m.add_class::<PyNavarroLive>()?;
    Ok(())
}
