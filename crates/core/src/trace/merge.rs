//! Merging traces: several traces run side by side, as one trace of several processes.
//!
//! Why: AMSQM's heavy traces are four programs run in parallel and merged by timestamp (Itshak
//! and Wiseman 2009, §5; ../shared/notes/seeds-trident-solomon-amsqm.md, D3 §3), so that their
//! processes compete for memory. `join` runs traces one after another; `merge` interleaves
//! them.
//!
//! Each input keeps a clock. By default the clock is instructions retired (the captured `insns`
//! marks); an input that has shown no `insns` mark counts its accesses instead (a synthetic
//! trace). The merge gives the CPU to the input whose clock is lowest (ties to the earliest
//! input), lets it run until its clock has advanced by `slice`, and picks again: a scheduler
//! with a time slice, so that inputs advance at the same rate in instructions, as programs
//! sharing a machine's cores do. With `Interleave::Quantum(n)` the inputs instead take turns of
//! `n` accesses each, round robin.
//!
//! Processes are renumbered in order of first appearance across the output, as are threads, so
//! the same trace given twice is two sets of processes (the OS model keeps files by path, so
//! they share page-cache pages as copies of one program do). A `ctx` record names the process
//! and thread in force whenever the CPU passes to another input.

use super::spt::{SptReader, SptWriter, WriteSummary};
use super::{Access, Chunk, Event, Provenance, RecordSink};
use crate::error::{Error, Result};
use crate::fasthash::FastMap;

/// How the inputs share the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interleave {
    /// Lowest instruction clock first, `slice` instructions (or accesses, for an input with no
    /// `insns` marks) at a time.
    Instructions { slice: u64 },
    /// Round robin, this many accesses per turn.
    Quantum(u64),
}

/// One input being read: its decoded chunk, the position in it, its clock and its context.
struct Input {
    r: SptReader,
    chunk: Chunk,
    /// Next access, and next event, of `chunk` to emit.
    at: usize,
    ev: usize,
    done: bool,
    clock: u64,
    accesses: u64,
    insns: u64,
    saw_insns: bool,
    /// The input's own (pid, tid) in force.
    ctx: (u32, u32),
}

impl Input {
    /// Make sure a record is buffered; false at the input's end.
    fn fill(&mut self) -> Result<bool> {
        while !self.done && self.at >= self.chunk.accesses.len() && self.ev >= self.chunk.events.len() {
            if !self.r.next_chunk(&mut self.chunk)? {
                self.done = true;
            }
            self.at = 0;
            self.ev = 0;
        }
        Ok(!self.done)
    }
}

/// What a merge wrote: the writer's summary and how many processes the output holds.
pub struct MergeSummary {
    pub write: WriteSummary,
    pub processes: u32,
    /// Times the CPU passed from one input to another.
    pub switches: u64,
}

/// Renumbers (input, pid) and (input, tid) in order of first appearance.
#[derive(Default)]
struct Numbers {
    pids: FastMap<(usize, u32), u32>,
    tids: FastMap<(usize, u32), u32>,
}

impl Numbers {
    fn pid(&mut self, input: usize, p: u32) -> u32 {
        let n = self.pids.len() as u32 + 1;
        *self.pids.entry((input, p)).or_insert(n)
    }
    fn tid(&mut self, input: usize, t: u32) -> u32 {
        let n = self.tids.len() as u32 + 1;
        *self.tids.entry((input, t)).or_insert(n)
    }
}

/// Write `inputs` interleaved to `out` as one trace. `report(fraction)` is called now and then
/// with the share of input accesses written; returning false stops with an error. A truncated
/// input is refused: its last process would never end.
pub fn merge(inputs: &[&str], out: &str, how: Interleave, provenance: &Provenance, report: &mut dyn FnMut(f64) -> bool) -> Result<MergeSummary> {
    if inputs.is_empty() {
        return Err(Error::usage("trace merge: no input traces"));
    }
    match how {
        Interleave::Instructions { slice: 0 } => return Err(Error::usage("trace merge: --slice must be at least 1")),
        Interleave::Quantum(0) => return Err(Error::usage("trace merge: --quantum must be at least 1")),
        _ => {}
    }
    let mut ins = Vec::with_capacity(inputs.len());
    let mut total = 0u64;
    for path in inputs {
        let r = SptReader::open(path)?;
        if r.meta.truncated() {
            return Err(Error::usage(format!("{path}: trace merge: the trace is truncated (cut short); its last process never ends")));
        }
        total += r.meta.totals().map_or(0, |(_, accesses)| accesses);
        ins.push(Input { r, chunk: Chunk::default(), at: 0, ev: 0, done: false, clock: 0, accesses: 0, insns: 0, saw_insns: false, ctx: (1, 1) });
    }
    let mut w = SptWriter::create(out, provenance)?;
    let mut nums = Numbers::default();
    let mut written = 0u64;
    let mut next_report = 0u64;
    let mut switches = 0u64;
    let mut last: Option<usize> = None;
    let mut turn = 0usize;
    loop {
        // Who runs next.
        let mut pick = None;
        for k in 0..ins.len() {
            let i = match how {
                Interleave::Quantum(_) => (turn + k) % ins.len(),
                Interleave::Instructions { .. } => k,
            };
            if !ins[i].fill()? {
                continue;
            }
            match how {
                Interleave::Quantum(_) => {
                    pick = Some(i);
                    break;
                }
                Interleave::Instructions { .. } => {
                    if pick.is_none_or(|p: usize| ins[i].clock < ins[p].clock) {
                        pick = Some(i);
                    }
                }
            }
        }
        let Some(i) = pick else { break };
        turn = i + 1;
        // On a switch, the output must name this input's process before its next record
        // (unless that record is a `ctx` of its own).
        let mut need_ctx = last != Some(i);
        if need_ctx && last.is_some() {
            switches += 1;
        }
        last = Some(i);
        // Run it for one slice or quantum.
        let start = ins[i].clock;
        let budget = match how {
            Interleave::Instructions { slice } => slice,
            Interleave::Quantum(n) => n,
        };
        let inp = &mut ins[i];
        while inp.fill()? {
            // Events that precede the next access come first.
            let event_next = inp.ev < inp.chunk.events.len() && inp.chunk.events[inp.ev].0 as usize <= inp.at;
            if need_ctx {
                need_ctx = false;
                if !(event_next && matches!(inp.chunk.events[inp.ev].1, Event::Context { .. })) {
                    let (p, t) = inp.ctx;
                    w.event(Event::Context { pid: nums.pid(i, p), tid: nums.tid(i, t) })?;
                }
            }
            if event_next {
                let e = inp.chunk.events[inp.ev].1.clone();
                inp.ev += 1;
                let e = match e {
                    Event::Context { pid, tid } => {
                        inp.ctx = (pid, tid);
                        Event::Context { pid: nums.pid(i, pid), tid: nums.tid(i, tid) }
                    }
                    Event::Fork { child } => Event::Fork { child: nums.pid(i, child) },
                    Event::Insns { count } => {
                        inp.saw_insns = true;
                        inp.insns += count;
                        Event::Insns { count }
                    }
                    other => other,
                };
                w.event(e)?;
            } else if inp.at < inp.chunk.accesses.len() {
                let a: Access = inp.chunk.accesses[inp.at];
                inp.at += 1;
                inp.accesses += a.count as u64;
                written += a.count as u64;
                w.access(a)?;
                // A turn ends after an access (an `insns` mark belongs with the access after it).
                inp.clock = match how {
                    Interleave::Instructions { .. } if inp.saw_insns => inp.insns,
                    _ => inp.accesses,
                };
                if inp.clock - start.min(inp.clock) >= budget {
                    break;
                }
            }
        }
        if written >= next_report {
            next_report = written + (1 << 22);
            if !report(if total > 0 { written as f64 / total as f64 } else { 0.0 }) {
                return Err(Error::usage("trace merge: interrupted"));
            }
        }
    }
    Ok(MergeSummary { write: w.finish()?, processes: nums.pids.len() as u32, switches })
}
