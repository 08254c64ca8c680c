//! Physical contiguity of base-page mappings: what AMD PTE coalescing can use, and the
//! coalescing opportunity the results report.
//!
//! AMD coalescing is done by the hardware walker, which reads the PTEs sharing the fetched
//! cache line; the OS neither sets nor sees it. The walker only reads page tables, so the test
//! lives beside them: a group of `n` base pages (`n` a power of two) is coalescible when its
//! virtual start is aligned to `n` pages, every page is mapped by a base PTE, the frames are
//! `n` consecutive frames starting at a frame aligned to `n`, and the attributes agree (write
//! protection for copy-on-write, and the protection of the VMAs they lie in). Solomon's notes
//! (../shared/notes/seeds-trident-solomon-amsqm.md, D2) give these rules as inferred from
//! "aligned and contiguous groups of 4 KB base pages".

use super::Os;

impl Os {
    /// Whether the `n` base pages starting at `gs` (aligned to `n` pages) form a coalescible
    /// group in process `pi`.
    pub fn base_group_contiguous(&self, pi: usize, gs: u64, n: u32) -> bool {
        let p = &self.procs[pi];
        let page = self.base.bytes();
        let Some(first) = p.pt.lookup(gs) else { return false };
        if first.size_idx != 0 || first.pfn.0 % n as u64 != 0 {
            return false;
        }
        for i in 1..n as u64 {
            match p.pt.lookup(gs + i * page) {
                Some(t) if t.size_idx == 0 && t.pfn.0 == first.pfn.0 + i && t.cow == first.cow => {}
                _ => return false,
            }
        }
        self.one_protection(pi, gs, gs + n as u64 * page)
    }

    /// The index of the largest of `groups` (base pages, ascending) whose aligned group around
    /// `va` is coalescible, or None.
    pub fn coalescible_group(&self, pi: usize, va: u64, groups: &[u32]) -> Option<usize> {
        let page = self.base.bytes();
        // The common failure first, from the walked PTE alone: a group needs the page's frame
        // at the same offset in its group as the page (every group size is a multiple of the
        // smallest, so one test covers all).
        let t = self.procs[pi].pt.lookup(va)?;
        if t.size_idx != 0 || (t.pfn.0 ^ (va / page)) & (*groups.first()? as u64 - 1) != 0 {
            return None;
        }
        groups.iter().enumerate().rev().find(|&(_, &n)| self.base_group_contiguous(pi, va & !(n as u64 * page - 1), n)).map(|(k, _)| k)
    }

    /// Process `pi`'s coalescing opportunity: its resident base mappings, and for each of
    /// `CONTIGUITY_GROUPS` how many of them sit in a coalescible aligned group of that many
    /// base pages. One pass over the page table in address order; O(resident pages).
    pub fn contiguity_of(&self, pi: usize) -> Contiguity {
        let page = self.base.bytes();
        let mut c = Contiguity::default();
        // Runs of base pages consecutive in both address and frame with one write protection,
        // counted as each run ends (no list of runs: most runs are a page long, and a pass at
        // exit over a large resident set must stay cheap). A group is coalescible when it lies
        // in one run, its start is aligned in both spaces and its VMAs agree on protection.
        let mut run: Option<(u64, u64, u64, bool)> = None; // (first va, first pfn, pages, cow)
        let close = |run: (u64, u64, u64, bool), c: &mut Contiguity| {
            let (va, pfn, len, _) = run;
            if len < CONTIGUITY_GROUPS[0] as u64 {
                return;
            }
            for (k, &n) in CONTIGUITY_GROUPS.iter().enumerate() {
                let n = n as u64;
                // The first page of the run that starts an aligned group in both spaces.
                let skip = (n - (va / page) % n) % n;
                if !(pfn + skip).is_multiple_of(n) {
                    continue; // virtual and physical alignment differ along the whole run
                }
                let mut off = skip;
                while off + n <= len {
                    let gs = va + off * page;
                    if self.one_protection(pi, gs, gs + n * page) {
                        c.grouped[k] += n;
                    }
                    off += n;
                }
            }
        };
        self.procs[pi].pt.for_each_page(&mut |t| {
            if t.size_idx != 0 {
                if let Some(r) = run.take() {
                    close(r, &mut c);
                }
                return;
            }
            c.base_pages += 1;
            match &mut run {
                Some((va, pfn, len, cow)) if t.start == *va + *len * page && t.pfn.0 == *pfn + *len && t.cow == *cow => *len += 1,
                r => {
                    if let Some(done) = r.replace((t.start, t.pfn.0, 1, t.cow)) {
                        close(done, &mut c);
                    }
                }
            }
        });
        if let Some(r) = run {
            close(r, &mut c);
        }
        c
    }

    /// Whether every VMA overlapping [s, e) has the same protection.
    fn one_protection(&self, pi: usize, s: u64, e: u64) -> bool {
        let mut prot = None;
        self.procs[pi].vmas.range(..e).rev().map(|(_, v)| v).take_while(|v| v.end > s).all(|v| *prot.get_or_insert(v.prot) == v.prot)
    }

    /// The coalescing opportunity now: processes still alive, plus those that exited (as they
    /// were at exit).
    /// The live processes' coalescing opportunity now, or None when they have more than
    /// `limit` resident base mappings (the pass is O(resident pages); time-series samples
    /// bound it by the work done since the previous sample).
    pub fn live_contiguity(&self, limit: u64) -> Option<Contiguity> {
        let live = || self.procs.iter().enumerate().filter(|(_, p)| p.alive);
        if live().map(|(_, p)| p.resident[0]).sum::<u64>() > limit {
            return None;
        }
        let mut c = Contiguity::default();
        for (pi, _) in live() {
            c.add(&self.contiguity_of(pi));
        }
        Some(c)
    }

    /// The opportunity the results report: processes measured as they exited, and the live ones.
    pub fn end_contiguity(&self) -> Contiguity {
        let mut c = self.final_contiguity;
        c.add(&self.live_contiguity(u64::MAX).expect("no bound"));
        c
    }
}

/// Group sizes, in base pages, of the coalescing opportunity: AMD's 16KB and 32KB coalesced
/// entries and ARM's 64KB contiguous-bit entries with 4KB pages (Solomon D2).
pub const CONTIGUITY_GROUPS: [u32; 3] = [4, 8, 16];

/// Resident base mappings, and how many of them lie in coalescible groups of each size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contiguity {
    pub base_pages: u64,
    pub grouped: [u64; CONTIGUITY_GROUPS.len()],
}

impl Contiguity {
    pub fn add(&mut self, o: &Contiguity) {
        self.base_pages += o.base_pages;
        for k in 0..self.grouped.len() {
            self.grouped[k] += o.grouped[k];
        }
    }
}
