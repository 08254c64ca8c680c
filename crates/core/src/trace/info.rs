//! `trace info`: what a trace holds, in one pass: records and accesses by kind, events by name,
//! processes, the footprint in pages of each size asked for, and the address-space events
//! (the first `MAX_LISTED_EVENTS`, as text lines).

use super::spt::SptReader;
use super::{Chunk, Event};
use crate::error::{Error, Result};
use crate::units::PageSize;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Address-space events listed at most (the counts in `events` cover them all).
pub const MAX_LISTED_EVENTS: usize = 10_000;

/// A trace's contents, counted.
#[derive(Clone, Debug, Default)]
pub struct TraceInfo {
    pub chunks: u64,
    pub records: u64,
    /// Accesses by kind: load, store, modify, fetch.
    pub kinds: [u64; 4],
    /// Events by name.
    pub events: BTreeMap<String, u64>,
    pub pids: BTreeSet<u32>,
    /// Distinct (process, page) pairs touched, for each page size asked for.
    pub footprint_pages: Vec<u64>,
    /// Address-space events (mmap, munmap, mremap, brk, mprotect, madvise) as (pid, text line).
    pub address_space_events: Vec<(u32, String)>,
}

impl TraceInfo {
    pub fn accesses(&self) -> u64 {
        self.kinds.iter().sum()
    }
}

/// Read the whole trace behind `reader`, counting. `progress(fraction)` returning false stops
/// the pass (a usage error, "interrupted").
pub fn analyze(reader: &mut SptReader, sizes: &[PageSize], progress: &mut dyn FnMut(f64) -> bool) -> Result<TraceInfo> {
    let mut inf = TraceInfo::default();
    let mut pages: Vec<HashSet<(u32, u64)>> = vec![HashSet::new(); sizes.len()];
    let mut c = Chunk::default();
    let mut pid = 0u32;
    let total = reader.meta.file_len.max(1) as f64;
    while reader.next_chunk(&mut c)? {
        if !progress(reader.position() as f64 / total) {
            return Err(Error::usage("interrupted"));
        }
        inf.chunks += 1;
        let mut ev = c.events.iter().peekable();
        for (i, a) in c.accesses.iter().enumerate() {
            while let Some((p, e)) = ev.peek() {
                if *p as usize > i {
                    break;
                }
                note_event(&mut inf, &mut pid, e);
                ev.next();
            }
            inf.records += 1;
            inf.kinds[a.kind as usize] += a.count as u64;
            for (k, s) in sizes.iter().enumerate() {
                pages[k].insert((pid, a.addr >> s.shift()));
            }
        }
        for (_, e) in ev {
            note_event(&mut inf, &mut pid, e);
        }
    }
    inf.footprint_pages = pages.iter().map(|p| p.len() as u64).collect();
    Ok(inf)
}

fn note_event(inf: &mut TraceInfo, pid: &mut u32, e: &Event) {
    *inf.events.entry(e.name().to_string()).or_default() += 1;
    match e {
        Event::Context { pid: p, .. } => {
            *pid = *p;
            inf.pids.insert(*p);
        }
        Event::Mmap { .. } | Event::Munmap { .. } | Event::Mremap { .. } | Event::Brk { .. } | Event::Mprotect { .. } | Event::Madvise { .. }
            if inf.address_space_events.len() < MAX_LISTED_EVENTS =>
        {
            inf.address_space_events.push((*pid, super::text::format_event(e)));
        }
        _ => {}
    }
}
