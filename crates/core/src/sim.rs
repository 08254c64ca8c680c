//! Driving runs from a trace file: one decode pipeline feeding one or more engines (so
//! `compare` reads and decodes the trace once for every machine and policy).

use crate::engine::{Engine, EngineConfig};
use crate::error::Result;
use crate::mmu::machine::Machine;
use crate::mmu::tlb::{make_tag, Tlb};
use crate::policy;
use crate::stats::Results;
use crate::trace::spt::{PrefetchReader, TraceMeta};

pub struct Simulation {
    reader: PrefetchReader,
    pub engines: Vec<Engine>,
    done: bool,
    pos: u64,
}

impl Simulation {
    /// `runs`: (machine name or path, or an Engine-ready Machine) x policy spec.
    pub fn open(trace: &str, runs: Vec<(Machine, String)>, cfg: EngineConfig, allow_truncated: bool) -> Result<Simulation> {
        let mut engines = Vec::new();
        for (m, p) in runs {
            let pol = policy::build(&p, &m.page_sizes)?;
            engines.push(Engine::new(m, pol, cfg.clone())?);
        }
        let reader = PrefetchReader::open(trace, allow_truncated)?;
        let pos = reader.meta.data_offset;
        Ok(Simulation { reader, engines, done: false, pos })
    }

    pub fn meta(&self) -> &TraceMeta {
        &self.reader.meta
    }

    /// Process up to `max_chunks` chunks. Returns false when the trace is finished.
    pub fn step(&mut self, max_chunks: usize) -> Result<bool> {
        for _ in 0..max_chunks {
            if self.done {
                return Ok(false);
            }
            match self.reader.next()? {
                Some(c) => {
                    for e in self.engines.iter_mut() {
                        e.run_chunk(&c)?;
                    }
                    self.pos = c.end_offset;
                    self.reader.give_back(c);
                }
                None => {
                    self.done = true;
                    return Ok(false);
                }
            }
        }
        Ok(!self.done)
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
