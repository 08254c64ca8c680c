//! Joining traces: several traces, one after another, as one trace of several processes.
//!
//! Why: qemu-user runs a program started by `execve` natively, untraced (docs/CAPTURE.md), so a
//! run of many short processes (an exec loop, a make of many compiler processes) is captured
//! one process at a time and joined here. Each input's pids and tids are shifted past those of
//! the inputs before it, so its processes are new ones; the OS model keeps files by path, so
//! processes that map the same binary, libraries and files share their page-cache pages.
//!
//! An input's records follow the previous input's whole; a process an input leaves running (a
//! synthetic trace has no `exit`) keeps its memory while the next input runs.

use super::spt::{SptReader, SptWriter, WriteSummary};
use super::{Access, Event, Provenance, RecordSink};
use crate::error::{Error, Result};

/// Shifts the pids and tids of one input and notes the largest it wrote.
struct Shift<'a, S: RecordSink> {
    inner: &'a mut S,
    pid_off: u32,
    tid_off: u32,
    max_pid: u32,
    max_tid: u32,
}

impl<S: RecordSink> Shift<'_, S> {
    fn pid(&mut self, p: u32) -> Result<u32> {
        let q = p.checked_add(self.pid_off).ok_or_else(|| Error::usage("trace join: too many processes (pid overflow)"))?;
        self.max_pid = self.max_pid.max(q);
        Ok(q)
    }
}

impl<S: RecordSink> RecordSink for Shift<'_, S> {
    fn access(&mut self, a: Access) -> Result<()> {
        self.inner.access(a)
    }
    fn event(&mut self, e: Event) -> Result<()> {
        let e = match e {
            Event::Context { pid, tid } => {
                let pid = self.pid(pid)?;
                let tid = tid.checked_add(self.tid_off).ok_or_else(|| Error::usage("trace join: too many threads (tid overflow)"))?;
                self.max_tid = self.max_tid.max(tid);
                Event::Context { pid, tid }
            }
            Event::Fork { child } => Event::Fork { child: self.pid(child)? },
            other => other,
        };
        self.inner.event(e)
    }
}

/// What a join wrote: the writer's summary and how many processes the output holds.
pub struct JoinSummary {
    pub write: WriteSummary,
    pub processes: u32,
}

/// Write `inputs`, in order, to `out` as one trace. `report(i)` is called as input `i` (from 0)
/// starts; returning false stops the join with an error. A truncated input is refused: its last
/// process would never end.
pub fn join(inputs: &[&str], out: &str, provenance: &Provenance, report: &mut dyn FnMut(usize) -> bool) -> Result<JoinSummary> {
    if inputs.is_empty() {
        return Err(Error::usage("trace join: no input traces"));
    }
    let mut w = SptWriter::create(out, provenance)?;
    let (mut pid_off, mut tid_off) = (0u32, 0u32);
    for (i, path) in inputs.iter().enumerate() {
        if !report(i) {
            return Err(Error::usage("trace join: interrupted"));
        }
        let mut r = SptReader::open(path)?;
        if r.meta.truncated() {
            return Err(Error::usage(format!("{path}: trace join: the trace is truncated (cut short); its last process never ends")));
        }
        let mut s = Shift { inner: &mut w, pid_off, tid_off, max_pid: pid_off, max_tid: tid_off };
        // A trace's records before its first `ctx` belong to process 1, thread 1.
        s.event(Event::Context { pid: 1, tid: 1 })?;
        r.replay(&mut s)?;
        (pid_off, tid_off) = (s.max_pid, s.max_tid);
    }
    Ok(JoinSummary { write: w.finish()?, processes: pid_off })
}
