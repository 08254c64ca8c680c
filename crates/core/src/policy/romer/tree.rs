//! The tree of potential superpages (Romer et al., ISCA 1995, Appendix A), one per aligned
//! segment of the largest size the policy uses (8MB on `romer95`).
//!
//! Level 0 holds the base pages; level l the aligned pages of the policy's l-th size. On
//! `romer95` every power of two from 4KB to 8MB is a size, so the tree is the binary buddy tree
//! of the paper (2,047 potential superpages over 2,048 base pages); on other machines the
//! fan-out is the ratio of consecutive sizes (512 on x86).
//!
//! Per node and per eviction group (a last-level TLB: data and instruction on `romer95`):
//! - `tlbcount` — Appendix A's counter, generalised to any fan-out: -1 inside a promoted
//!   page; otherwise the number of children with a positive count, plus 1 while the node's own
//!   translation is in the TLB (a mapped unit has no children left, so that is 0 or 1). It is
//!   positive exactly when the node contains a TLB-resident translation, and positivity is
//!   inherited upwards: a node's count is positive iff some child's is, or it is resident.
//! - `rescount` — resident translations strictly below the node (ONLINE's capacity scan).
//!
//! Per node, shared by the groups: the `prefetch` and `capacity` charges, Appendix A's
//! `deferred` charge owed to every strict ancestor (kept at the deferral level and above), the
//! base pages ever referenced below it (`refd`), whether it is a promoted, mapped page, and the
//! outcome of its last failed promotion.

use crate::fasthash::FastMap;

/// Node counters for two eviction groups (data, instruction). A unified last-level TLB uses
/// group 0 only.
pub const GROUPS: usize = 2;

#[derive(Clone, Debug)]
pub struct Geometry {
    /// Page shift of each level; level 0 is the base page.
    pub shift: Vec<u32>,
    /// First node index of each level.
    pub offset: Vec<usize>,
    pub nodes: usize,
    /// Shift of the segment: the largest level's page.
    pub seg_shift: u32,
}

impl Geometry {
    pub fn new(shifts: &[u32]) -> Geometry {
        let seg_shift = *shifts.last().expect("at least the base page size");
        let mut offset = Vec::with_capacity(shifts.len());
        let mut nodes = 0usize;
        for &s in shifts {
            offset.push(nodes);
            nodes += 1usize << (seg_shift - s);
        }
        Geometry { shift: shifts.to_vec(), offset, nodes, seg_shift }
    }

    pub fn levels(&self) -> usize {
        self.shift.len()
    }

    /// The node of `level` containing `va`.
    #[inline]
    pub fn node(&self, level: usize, va: u64) -> usize {
        let in_seg = va & ((1u64 << self.seg_shift) - 1);
        self.offset[level] + (in_seg >> self.shift[level]) as usize
    }

    /// Base pages in a page of `level`.
    #[inline]
    pub fn pages(&self, level: usize) -> u64 {
        1u64 << (self.shift[level] - self.shift[0])
    }

    /// The level and in-segment index of a node.
    pub fn level_of(&self, node: usize) -> usize {
        self.offset.iter().rposition(|&o| o <= node).expect("node index in range")
    }

    /// The nodes of `level` inside the page of node `n` (at a level >= `level`), as a range.
    pub fn descendants(&self, n: usize, level: usize) -> std::ops::Range<usize> {
        let l = self.level_of(n);
        let idx = n - self.offset[l];
        let ratio = 1usize << (self.shift[l] - self.shift[level]);
        let first = self.offset[level] + idx * ratio;
        first..first + ratio
    }

    /// Virtual address of node `n` in the segment starting at `seg_va`.
    pub fn va_of(&self, seg_va: u64, n: usize) -> u64 {
        let l = self.level_of(n);
        seg_va + (((n - self.offset[l]) as u64) << self.shift[l])
    }
}

pub struct Segment {
    pub asid: u16,
    /// Virtual address of the segment's first byte.
    pub va: u64,
    pub tlbcount: Vec<[i16; GROUPS]>,
    pub rescount: Vec<[u16; GROUPS]>,
    pub prefetch: Vec<u32>,
    pub capacity: Vec<u32>,
    pub deferred: Vec<u32>,
    pub refd: Vec<u32>,
    pub promoted: Vec<bool>,
    /// 0: no failed promotion; else 1 + the CollapseResult of the last failure.
    pub failed: Vec<u8>,
    /// Nodes holding a deferred charge, and the sum of those charges.
    pub dirty: Vec<u32>,
    pub pending: u64,
    /// A lower bound on how many more charges any node above the deferral level can take
    /// before reaching its prefetch threshold: while `pending` stays below it, deferring is
    /// exact (no threshold can have been crossed).
    pub min_slack: u64,
    /// Scratch for ONLINE's capacity scan: per-scan counts, valid while `mark` equals the
    /// scan's epoch (no clearing between scans), and `seen` for visiting each node once.
    pub scratch: Vec<u32>,
    pub mark: Vec<u32>,
    pub seen: Vec<u32>,
}

impl Segment {
    fn new(g: &Geometry, asid: u16, va: u64) -> Segment {
        let n = g.nodes;
        Segment {
            asid,
            va,
            tlbcount: vec![[0; GROUPS]; n],
            rescount: vec![[0; GROUPS]; n],
            prefetch: vec![0; n],
            capacity: vec![0; n],
            deferred: vec![0; n],
            refd: vec![0; n],
            promoted: vec![false; n],
            failed: vec![0; n],
            dirty: Vec::new(),
            pending: 0,
            min_slack: 0,
            scratch: vec![0; n],
            mark: vec![0; n],
            seen: vec![0; n],
        }
    }
}

/// The key of the segment holding `va` of address space `asid`: the asid above the segment
/// number. `Segments` finds segments by it, and the capacity scan's order statistics count
/// entries under it.
#[inline]
pub fn segment_key(seg_shift: u32, asid: u16, va: u64) -> u64 {
    ((asid as u64) << 48) | (va >> seg_shift)
}

/// The segments touched so far, found by (asid, segment number).
pub struct Segments {
    pub geo: Geometry,
    pub list: Vec<Segment>,
    index: FastMap<u64, u32>,
    last: (u64, u32),
}

impl Segments {
    pub fn new(geo: Geometry) -> Segments {
        Segments { geo, list: Vec::new(), index: FastMap::default(), last: (u64::MAX, 0) }
    }

    #[inline]
    fn key(&self, asid: u16, va: u64) -> u64 {
        segment_key(self.geo.seg_shift, asid, va)
    }

    /// The segment holding `va` of address space `asid`, if touched.
    #[inline]
    pub fn find(&mut self, asid: u16, va: u64) -> Option<usize> {
        let k = self.key(asid, va);
        if self.last.0 == k {
            return Some(self.last.1 as usize);
        }
        let i = *self.index.get(&k)?;
        self.last = (k, i);
        Some(i as usize)
    }

    /// The segment holding `va`, created on first touch; `init` sets its deferral slack.
    pub fn get_or_create(&mut self, asid: u16, va: u64, init_slack: u64) -> usize {
        if let Some(i) = self.find(asid, va) {
            return i;
        }
        let k = self.key(asid, va);
        let seg_va = va & !((1u64 << self.geo.seg_shift) - 1);
        let mut s = Segment::new(&self.geo, asid, seg_va);
        s.min_slack = init_slack;
        self.list.push(s);
        let i = (self.list.len() - 1) as u32;
        self.index.insert(k, i);
        self.last = (k, i);
        i as usize
    }

    /// Forget the segments of `asid` entirely inside [start, end) (unmapped, or the process
    /// exited): their pages are gone.
    pub fn drop_range(&mut self, asid: u16, start: u64, end: u64) {
        let seg = 1u64 << self.geo.seg_shift;
        let before = self.list.len();
        self.list.retain(|s| !(s.asid == asid && s.va >= start && s.va.saturating_add(seg) <= end));
        if self.list.len() != before {
            self.index.clear();
            for (i, s) in self.list.iter().enumerate() {
                self.index.insert(segment_key(self.geo.seg_shift, s.asid, s.va), i as u32);
            }
            self.last = (u64::MAX, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_geometry_has_one_node_per_potential_superpage() {
        // 4KB..8MB: 2048 base pages and 2047 potential superpages (Appendix A).
        let shifts: Vec<u32> = (12..=23).collect();
        let g = Geometry::new(&shifts);
        assert_eq!(g.nodes, 4095);
        assert_eq!(g.node(0, 0x1000), 1);
        assert_eq!(g.node(11, 0x7f_ffff), 4094);
        assert_eq!(g.level_of(g.node(3, 0x123456)), 3);
        let n = g.node(2, 0x4000); // the 16KB page at 16KB
        assert_eq!(g.descendants(n, 0), 4..8);
        assert_eq!(g.va_of(0x80_0000, n), 0x80_4000);
    }
}
