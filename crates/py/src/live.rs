//! Bindings of superpager-live: inspect a process, the navarro-live scanner, the hot-range
//! ranking damon-live uses, and one collapse. Reports cross as JSON text (serde), decoded in
//! Python; the scans themselves run in Rust with the GIL released.

use crate::{FileAccessError, UsageError};
use pyo3::exceptions::{PyPermissionError, PyProcessLookupError};
use pyo3::prelude::*;
use superpager_live::collapse::Pidfd;
use superpager_live::inspect::{inspect, InspectOptions};
use superpager_live::navarro::NavarroLive;
use superpager_live::rank::{rank_ranges, HotRegion};
use superpager_live::reserve::ReserveMode;
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

/// MADV_COLLAPSE of [addr, addr+len) in process `pid`: (True, "", 0) or (False, reason, errno).
#[pyfunction]
fn live_collapse(py: Python<'_>, pid: i32, addr: u64, len: u64) -> PyResult<(bool, String, i32)> {
    let fd = Pidfd::open(pid).map_err(|e| live_err(LiveError::from_io(pid, &format!("pidfd_open({pid})"), &e)))?;
    Ok(match py.allow_threads(|| fd.collapse(addr, len)) {
        Ok(_) => (true, String::new(), 0),
        Err((f, e)) => (false, f.name().to_string(), e),
    })
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
        let Some(mode) = ReserveMode::parse(reserve) else {
            return Err(UsageError::new_err(format!("navarro-live: reserve must be on, off or auto, got '{reserve}'")));
        };
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
        v["reserve"] = serde_json::to_value(&self.inner.reserve.counters).map_err(err)?;
        serde_json::to_string(&v).map_err(err)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(live_inspect, m)?)?;
    m.add_function(wrap_pyfunction!(live_rank, m)?)?;
    m.add_function(wrap_pyfunction!(live_collapse, m)?)?;
    m.add_class::<PyNavarroLive>()?;
    Ok(())
}
