//! navarro-live: Navarro's incremental promotion on a real process. The simulated `navarro`
//! promotes a 2MB reservation once all of its 512 pages are populated (or `promote_at`); on
//! Linux the frames are not reserved, so the live policy watches population through pagemap
//! and asks the kernel to collapse the range (MADV_COLLAPSE), which copies when the frames are
//! not already contiguous. Every range visited gets one counted `ScanResult`, as khugepaged's
//! `scan_result` does; every VMA passed over gets a counted `VmaSkip`.

use crate::collapse::CollapseFailure;
use crate::pagemap::{KpageFlagsFile, Pagemap};
use crate::procfs::{read_vmas, Vma};
use crate::ranges::{eligible, RangeReader, RangeState, VmaSkip};
use crate::reserve::{ReserveMode, ReservedCollapse};
use crate::{LiveError, PMD_BYTES, PMD_PAGES};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// Counters of a navarro-live run; every field is a decision count a user can read.
#[derive(Clone, Debug, Default, Serialize)]
pub struct NavarroCounters {
    pub steps: u64,
    pub ranges_scanned: u64,
    pub collapsed: u64,
    pub bytes_collapsed: u64,
    pub already_huge: u64,
    /// Populated below the threshold this step (Navarro: the reservation is not full yet).
    pub below_threshold: u64,
    pub empty: u64,
    /// Met the threshold but the step's collapse budget was spent: retried next step.
    pub deferred: u64,
    /// Collapses the kernel refused, by reason.
    pub failed: BTreeMap<&'static str, u64>,
    /// VMAs passed over, by reason (counted once per step).
    pub vma_skipped: BTreeMap<&'static str, u64>,
}

/// What one step did.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct StepOutcome {
    pub collapsed: u32,
    pub failed: u32,
    pub deferred: u32,
    /// 2MB ranges of eligible VMAs this step read from pagemap (known-huge ones are not re-read).
    pub read: u32,
    /// Bytes of eligible VMAs' 2MB ranges that are huge after the step.
    pub huge_bytes: u64,
}

/// Known-huge ranges are read again every this many steps (a split by mprotect or a partial
/// munmap changes the maps and clears them at once; a split by reclaim or migration does not).
const REVERIFY_STEPS: u64 = 64;

pub struct NavarroLive {
    pid: i32,
    /// /proc/PID/maps as last read, and the VMAs smaps gave for it: smaps walks every page
    /// table to count Rss, so it is read again only when the maps change.
    maps: String,
    vmas: Vec<Vma>,
    /// Ranges found huge since the maps last changed: not re-read every step.
    known_huge: HashSet<u64>,
    /// Ranges that met the threshold and wait for a collapse (the step's budget was spent, or
    /// the kernel refused): population only grows while the maps stay the same, so they are not
    /// re-read by every scan; each is read once more just before its collapse, which decides.
    ready: HashSet<u64>,
    pm: Pagemap,
    kf: Option<KpageFlagsFile>,
    /// Pages of 512 that must be populated before a range is collapsed (512 = full, Navarro).
    pub promote_at: u32,
    /// Each collapse, with a frame faulted in by us and freed right before it (reserve.rs).
    pub collapser: ReservedCollapse,
    pub counters: NavarroCounters,
}

impl NavarroLive {
    pub fn new(pid: i32, promote_at: u32, reserve: ReserveMode) -> Result<NavarroLive, LiveError> {
        if promote_at == 0 || promote_at > PMD_PAGES as u32 {
            return Err(LiveError::Io { path: "navarro-live".into(), msg: format!("promote_at must be 1..512 pages, got {promote_at}") });
        }
        let pm = Pagemap::open(pid)?;
        let collapser = ReservedCollapse::new(pid, reserve)?;
        Ok(NavarroLive {
            pid,
            maps: String::new(),
            vmas: Vec::new(),
            known_huge: HashSet::new(),
            ready: HashSet::new(),
            pm,
            kf: KpageFlagsFile::open(),
            promote_at,
            collapser,
            counters: NavarroCounters::default(),
        })
    }

    /// One pass over the process: collapses at most `max_collapses` ranges that met the
    /// threshold, lowest address first. `Err(Gone)` once the process has exited.
    pub fn step(&mut self, max_collapses: u32) -> Result<StepOutcome, LiveError> {
        let path = format!("/proc/{}/maps", self.pid);
        let maps = std::fs::read_to_string(&path).map_err(|e| LiveError::from_io(self.pid, &path, &e))?;
        if maps.is_empty() && !crate::procfs::is_alive(self.pid) {
            return Err(LiveError::Gone { pid: self.pid });
        }
        if maps != self.maps || self.counters.steps.is_multiple_of(REVERIFY_STEPS) {
            self.vmas = read_vmas(self.pid)?;
            self.maps = maps;
            self.known_huge.clear();
            self.ready.clear();
        }
        self.counters.steps += 1;
        let mut out = StepOutcome::default();
        let mut reader = RangeReader::new(&self.pm, self.kf.as_ref());
        let mut skips = Vec::new();
        let mut todo = Vec::new();
        for v in &self.vmas {
            if let Err(s) = eligible(v) {
                if s != VmaSkip::NotAnonymous || v.anonymous > 0 {
                    skips.push(s);
                }
                continue;
            }
            let (mut a, end) = v.pmd_ranges();
            while a < end {
                self.counters.ranges_scanned += 1;
                if self.known_huge.contains(&a) {
                    self.counters.already_huge += 1;
                    out.huge_bytes += PMD_BYTES;
                    a += PMD_BYTES;
                    continue;
                }
                // A ready range's decision is made below, where it is read again.
                if self.ready.contains(&a) || classify(&mut reader, a, self.promote_at, &mut self.counters, &mut self.known_huge, &mut out)? {
                    todo.push(a);
                }
                a += PMD_BYTES;
            }
        }
        for s in skips {
            *self.counters.vma_skipped.entry(s.name()).or_default() += 1;
        }
        for a in todo {
            if out.collapsed + out.failed >= max_collapses {
                self.ready.insert(a);
                out.deferred += 1;
                self.counters.deferred += 1;
                continue;
            }
            // Read again just before the collapse: pages may have been freed (MADV_DONTNEED
            // does not change the maps) or the kernel may have made it huge meanwhile.
            self.ready.remove(&a);
            if !classify(&mut reader, a, self.promote_at, &mut self.counters, &mut self.known_huge, &mut out)? {
                continue;
            }
            // The copy's new frame: one we faulted in, freed just now (reserve.rs).
            match self.collapser.collapse(&self.pm, a) {
                Ok(_) => {
                    self.known_huge.insert(a);
                    out.collapsed += 1;
                    out.huge_bytes += PMD_BYTES;
                    self.counters.collapsed += 1;
                    self.counters.bytes_collapsed += PMD_BYTES;
                }
                Err((CollapseFailure::Gone, _)) => return Err(LiveError::Gone { pid: self.pid }),
                Err((f, _)) => {
                    self.ready.insert(a);
                    out.failed += 1;
                    *self.counters.failed.entry(f.name()).or_default() += 1;
                }
            }
        }
        Ok(out)
    }
}

/// Reads one range and counts its decision, unless it met the threshold: true then, and the
/// caller decides (collapse, or defer).
fn classify(
    reader: &mut RangeReader,
    a: u64,
    promote_at: u32,
    counters: &mut NavarroCounters,
    known_huge: &mut HashSet<u64>,
    out: &mut StepOutcome,
) -> Result<bool, LiveError> {
    out.read += 1;
    match reader.read(a)? {
        RangeState::Huge => {
            counters.already_huge += 1;
            out.huge_bytes += PMD_BYTES;
            known_huge.insert(a);
        }
        RangeState::Small { populated: 0, .. } => counters.empty += 1,
        RangeState::Small { populated, .. } if populated < promote_at => counters.below_threshold += 1,
        RangeState::Small { .. } => return Ok(true),
    }
    Ok(false)
}
