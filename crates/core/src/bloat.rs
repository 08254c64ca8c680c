//! Bloat: resident memory the program never touched (Trident §7 reports it per workload; Linux
//! users see it as RSS that THP inflates). A superpage is resident whole once mapped, however
//! little of it the program uses, so bloat is the base pages inside resident superpages that no
//! access reached.
//!
//! Counting it needs to know which base pages were touched, which only the accesses tell (a
//! touch inside a superpage makes no fault). That costs a lookup per access, so it is opt-in
//! (`EngineConfig::bloat`, `--bloat`). Structure: per process, a map from each 512-base-page
//! block of virtual addresses to a 512-bit touched mask, and the last block used (accesses
//! cluster, so most touches skip the hash). Invariant: a bit is set iff an access reached that
//! base page since it was last unmapped (`forget`).

use crate::fasthash::FastMap;

/// Base pages per mask: the span of one last-level page table.
const BLOCK_BITS: u32 = 9;

#[derive(Default)]
struct ProcTouched {
    index: FastMap<u64, u32>,
    masks: Vec<[u64; 8]>,
    /// (block, index into `masks`) of the last touch; u64::MAX: none.
    last: (u64, u32),
}

/// Touched base pages of every process.
pub struct Touched {
    base_shift: u32,
    procs: Vec<ProcTouched>,
}

impl Touched {
    pub fn new(base_shift: u32) -> Touched {
        Touched { base_shift, procs: Vec::new() }
    }

    /// Process `pi` accessed `va`.
    #[inline]
    pub fn touch(&mut self, pi: usize, va: u64) {
        if pi >= self.procs.len() {
            self.procs.resize_with(pi + 1, || ProcTouched { last: (u64::MAX, 0), ..Default::default() });
        }
        let page = va >> self.base_shift;
        let block = page >> BLOCK_BITS;
        let p = &mut self.procs[pi];
        let i = if p.last.0 == block {
            p.last.1
        } else {
            let next = p.masks.len() as u32;
            let i = *p.index.entry(block).or_insert(next);
            if i == next {
                p.masks.push([0; 8]);
            }
            p.last = (block, i);
            i
        };
        let bit = (page & ((1 << BLOCK_BITS) - 1)) as usize;
        p.masks[i as usize][bit / 64] |= 1 << (bit % 64);
    }

    /// Base pages in [start, start + len) that process `pi` touched.
    pub fn touched_in(&self, pi: usize, start: u64, len: u64) -> u64 {
        let Some(p) = self.procs.get(pi) else { return 0 };
        let (first, end) = (start >> self.base_shift, (start + len) >> self.base_shift);
        let mut n = 0u64;
        let mut page = first;
        while page < end {
            let block = page >> BLOCK_BITS;
            let block_end = ((block + 1) << BLOCK_BITS).min(end);
            if let Some(&i) = p.index.get(&block) {
                let m = &p.masks[i as usize];
                if page & ((1 << BLOCK_BITS) - 1) == 0 && block_end - page == 1 << BLOCK_BITS {
                    n += m.iter().map(|w| w.count_ones() as u64).sum::<u64>();
                } else {
                    for q in page..block_end {
                        let bit = (q & ((1 << BLOCK_BITS) - 1)) as usize;
                        n += m[bit / 64] >> (bit % 64) & 1;
                    }
                }
            }
            page = block_end;
        }
        n
    }

    /// Process `pi` unmapped [start, end): what is mapped there later starts untouched.
    pub fn forget(&mut self, pi: usize, start: u64, end: u64) {
        let Some(p) = self.procs.get_mut(pi) else { return };
        if start == 0 && end == u64::MAX {
            *p = ProcTouched { last: (u64::MAX, 0), ..Default::default() };
            return;
        }
        if end <= start {
            return;
        }
        let (first, last) = (start >> self.base_shift, (end - 1) >> self.base_shift);
        let (fb, lb) = (first >> BLOCK_BITS, last >> BLOCK_BITS);
        // Visit the blocks of the range, or the blocks there are, whichever is fewer.
        let blocks: Vec<(u64, u32)> = if lb - fb < p.index.len() as u64 {
            (fb..=lb).filter_map(|b| p.index.get(&b).map(|&i| (b, i))).collect()
        } else {
            p.index.iter().filter(|(&b, _)| b >= fb && b <= lb).map(|(&b, &i)| (b, i)).collect()
        };
        for (block, i) in blocks {
            let (b0, b1) = (block << BLOCK_BITS, ((block + 1) << BLOCK_BITS) - 1);
            let m = &mut p.masks[i as usize];
            for q in b0.max(first)..=b1.min(last) {
                let bit = (q & ((1 << BLOCK_BITS) - 1)) as usize;
                m[bit / 64] &= !(1 << (bit % 64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touches_count_once_per_base_page_and_unmaps_forget_them() {
        let mut t = Touched::new(12);
        for va in [0x20_0000u64, 0x20_0fff, 0x20_1000, 0x40_0000 - 1, 0x40_0000] {
            t.touch(1, va);
        }
        assert_eq!(t.touched_in(1, 0x20_0000, 2 << 20), 3);
        assert_eq!(t.touched_in(1, 0, 1 << 30), 4);
        assert_eq!(t.touched_in(0, 0, 1 << 30), 0, "another process touched nothing");
        t.forget(1, 0x20_1000, 0x20_2000);
        assert_eq!(t.touched_in(1, 0, 1 << 30), 3);
        t.forget(1, 0, u64::MAX);
        assert_eq!(t.touched_in(1, 0, 1 << 30), 0);
        t.touch(1, 0x20_1000);
        assert_eq!(t.touched_in(1, 0x20_1000, 4096), 1);
    }
}
