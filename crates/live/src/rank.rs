//! Ranks a process's 2MB ranges by how often their frames were accessed, from physical-address
//! access counts such as DAMON's `paddr` regions report: damon-live collapses the hottest first.

use crate::pagemap::{KpageFlagsFile, Pagemap, PagemapEntry};
use crate::procfs::read_vmas;
use crate::ranges::{eligible, RangeReader, RangeState};
use crate::{LiveError, BASE_PAGE, PMD_BYTES};

/// A physical region [start, end) in bytes with an access count (DAMON's `nr_accesses`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotRegion {
    pub start: u64,
    pub end: u64,
    pub accesses: u32,
}

/// The not-yet-huge 2MB ranges of `pid` with a positive score (the sum over their resident
/// pages of the accesses of the region holding each frame), hottest first, ties by address.
pub fn rank_ranges(pid: i32, regions: &[HotRegion]) -> Result<Vec<(u64, u64)>, LiveError> {
    let mut regions: Vec<HotRegion> = regions.iter().copied().filter(|r| r.end > r.start && r.accesses > 0).collect();
    if regions.is_empty() {
        // Nothing was accessed (or the monitor has not aggregated yet): every score would be 0,
        // so the process's page tables are not read at all.
        return Ok(Vec::new());
    }
    regions.sort_by_key(|r| r.start);
    let pm = Pagemap::open(pid)?;
    let kf = KpageFlagsFile::open();
    let mut reader = RangeReader::new(&pm, kf.as_ref());
    let mut out = Vec::new();
    for v in read_vmas(pid)?.iter().filter(|v| eligible(v).is_ok()) {
        let (mut a, end) = v.pmd_ranges();
        while a < end {
            if let RangeState::Small { populated, .. } = reader.read(a)? {
                if populated > 0 {
                    let score: u64 = reader
                        .entries()
                        .iter()
                        .filter_map(|&e| PagemapEntry(e).pfn())
                        .map(|p| {
                            let pa = p.0 * BASE_PAGE;
                            let i = regions.partition_point(|r| r.start <= pa);
                            if i > 0 && pa < regions[i - 1].end {
                                regions[i - 1].accesses as u64
                            } else {
                                0
                            }
                        })
                        .sum();
                    if score > 0 {
                        out.push((a, score));
                    }
                }
            }
            a += PMD_BYTES;
        }
    }
    out.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_accessed_region_ranks_nothing_without_reading_the_process() {
        // pid -1 names no process: reading it would be an error.
        assert_eq!(rank_ranges(-1, &[]).unwrap(), vec![]);
        let cold = [HotRegion { start: 0, end: 1 << 30, accesses: 0 }, HotRegion { start: 1 << 30, end: 1 << 30, accesses: 5 }];
        assert_eq!(rank_ranges(-1, &cold).unwrap(), vec![]);
        assert!(rank_ranges(-1, &[HotRegion { start: 0, end: 4096, accesses: 1 }]).is_err(), "with a hot region the process is read");
    }
}
