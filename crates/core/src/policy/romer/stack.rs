//! The part of the LRU stack of translations below the TLB, for ONLINE's capacity charges
//! (Romer et al. §4.2 and its footnote): the miss handler sees only misses, so it knows the
//! *set* of TLB-resident translations and, below them, the exact order of the others — the
//! order in which they left the TLB, most recent first. A translation referenced again
//! becomes resident and leaves this list.
//!
//! Bounded: a translation deeper than the largest potential superpage's base pages plus the
//! TLB's entries can never be charged (a superpage coalesces at most that many entries above
//! it), so the list keeps only that many and forgets the rest. Storage is a fixed slab with a
//! free list, so steady-state operation allocates nothing.
//!
//! Optionally (`with_depths`) the list also keeps order statistics by time of eviction, so that
//! the capacity scan can count the entries between two of them, in all and per segment,
//! without visiting them (`Depths`). Invariants, checked by `check` in the tests:
//! - every entry has a distinct time below `window`, and times decrease from the top down;
//! - the tree over all entries counts each entry's time once;
//! - each segment's count is the number of its entries (translations below the segment's own
//!   size), and a segment that has a tree holds exactly those entries' times in it.

use crate::fasthash::FastMap;

const NIL: u32 = u32::MAX;

/// Which segment root the capacity scan counts a key under: the segment of its address
/// space and address, or none for a translation of the segment's own (largest) size, which has
/// no root above it. Mirrors `Segments::find`'s key and the scan's `level < top` test.
#[derive(Clone, Copy, Debug)]
pub struct SegmentOf {
    pub base_shift: u32,
    pub seg_shift: u32,
    pub top_level: usize,
}

impl SegmentOf {
    #[inline]
    pub fn of(&self, k: u64) -> Option<u64> {
        let (asid, va, level) = super::unpack_key(self.base_shift, k);
        (level < self.top_level).then_some(super::tree::segment_key(self.seg_shift, asid, va))
    }
}

/// A Fenwick tree (binary indexed tree) of counts over times 0..n.
#[derive(Clone)]
struct Fenwick(Vec<u32>);

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick(vec![0; n + 1])
    }

    fn add(&mut self, t: u32, up: bool) {
        let mut i = t as usize + 1;
        while i < self.0.len() {
            if up {
                self.0[i] += 1;
            } else {
                self.0[i] -= 1;
            }
            i += i & i.wrapping_neg();
        }
    }

    /// Entries with time below `t`.
    fn below(&self, t: u32) -> u32 {
        let mut i = (t as usize).min(self.0.len() - 1);
        let mut n = 0;
        while i > 0 {
            n += self.0[i];
            i &= i - 1;
        }
        n
    }

    /// The time of the `k`-th entry in time order, from 1.
    fn kth(&self, mut k: u32) -> u32 {
        let n = self.0.len() - 1;
        let mut pos = 0usize;
        let mut step = if n == 0 { 0 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) };
        while step > 0 {
            if pos + step <= n && self.0[pos + step] < k {
                pos += step;
                k -= self.0[pos];
            }
            step >>= 1;
        }
        pos as u32
    }

    /// Rebuild from a 0/1 mark per time, in linear time.
    fn build(&mut self, marked: impl Iterator<Item = u32>) {
        self.0.fill(0);
        for t in marked {
            self.0[t as usize + 1] += 1;
        }
        for i in 1..self.0.len() {
            let j = i + (i & i.wrapping_neg());
            if j < self.0.len() {
                self.0[j] += self.0[i];
            }
        }
    }
}

struct SegCount {
    n: u32,
    tree: Option<Fenwick>,
}

/// Order statistics by time of eviction (see the module's comment).
struct Depths {
    seg_of: SegmentOf,
    time: Vec<u32>,
    now: u32,
    window: u32,
    all: Fenwick,
    segs: FastMap<u64, SegCount>,
    /// A segment gets its own tree once it holds `BIG` entries, while fewer than `MAX_TREES`
    /// segments have one: a scan that needs the count of a segment without a tree visits its
    /// entries instead, and that is short when the segment holds few (it can be charged only
    /// if it holds nearly every entry above the missed one).
    trees: usize,
}

const BIG: u32 = 1024;
/// Each tree takes 8 bytes per stack entry (2MB with 1GB pages): this bounds the memory.
const MAX_TREES: usize = 32;

pub struct EvictedStack {
    key: Vec<u64>,
    next: Vec<u32>,
    prev: Vec<u32>,
    head: u32,
    tail: u32,
    len: usize,
    cap: usize,
    free: Vec<u32>,
    index: FastMap<u64, u32>,
    depths: Option<Box<Depths>>,
}

impl EvictedStack {
    pub fn new(cap: usize) -> EvictedStack {
        EvictedStack {
            key: vec![0; cap],
            next: vec![NIL; cap],
            prev: vec![NIL; cap],
            head: NIL,
            tail: NIL,
            len: 0,
            cap,
            free: (0..cap as u32).rev().collect(),
            index: FastMap::with_capacity_and_hasher(cap * 2, Default::default()),
            depths: None,
        }
    }

    /// A stack that also keeps order statistics by time of eviction (`between`, `segment_between`).
    pub fn with_depths(cap: usize, seg_of: SegmentOf) -> EvictedStack {
        let mut s = EvictedStack::new(cap);
        let window = (2 * cap).max(64) as u32;
        s.depths =
            Some(Box::new(Depths { seg_of, time: vec![0; cap], now: 0, window, all: Fenwick::new(window as usize), segs: FastMap::default(), trees: 0 }));
        s
    }

    pub fn has_depths(&self) -> bool {
        self.depths.is_some()
    }

    /// The time of eviction of `key`, if it is in the stack and times are kept.
    pub fn time_of(&self, key: u64) -> Option<u32> {
        let d = self.depths.as_ref()?;
        self.index.get(&key).map(|&s| d.time[s as usize])
    }

    /// How many entries have a time strictly between `lo` and `hi`.
    pub fn between(&self, lo: u32, hi: u32) -> u32 {
        let d = self.depths.as_ref().expect("order statistics kept");
        d.all.below(hi).saturating_sub(d.all.below(lo + 1))
    }

    /// How many entries of segment `seg` the stack holds (0 without order statistics).
    pub fn segment_len(&self, seg: u64) -> u32 {
        self.depths.as_ref().and_then(|d| d.segs.get(&seg)).map_or(0, |c| c.n)
    }

    /// Entries of segment `seg` with a time strictly between `lo` and `hi`, and the latest such
    /// time; None when the segment has no tree of its own (too few entries).
    pub fn segment_between(&self, seg: u64, lo: u32, hi: u32) -> Option<(u32, Option<u32>)> {
        let c = self.depths.as_ref()?.segs.get(&seg)?;
        let t = c.tree.as_ref()?;
        let upto = t.below(hi);
        let n = upto.saturating_sub(t.below(lo + 1));
        Some((n, (n > 0).then(|| t.kth(upto))))
    }

    fn note_in(&mut self, slot: u32) {
        let Some(d) = self.depths.as_mut() else { return };
        let t = d.now;
        d.now += 1;
        d.time[slot as usize] = t;
        d.all.add(t, true);
        let key = self.key[slot as usize];
        let Some(seg) = d.seg_of.of(key) else { return };
        let c = d.segs.entry(seg).or_insert(SegCount { n: 0, tree: None });
        c.n += 1;
        if let Some(tree) = c.tree.as_mut() {
            tree.add(t, true);
        } else if c.n >= BIG && d.trees < MAX_TREES {
            d.trees += 1;
            let mut tree = Fenwick::new(d.window as usize);
            let (seg_of, time, keys) = (d.seg_of, &d.time, &self.key);
            let mut at = self.head;
            // The new entry is linked already: the walk finds it too.
            let mut members = Vec::with_capacity(c.n as usize);
            while at != NIL {
                if seg_of.of(keys[at as usize]) == Some(seg) {
                    members.push(time[at as usize]);
                }
                at = self.next[at as usize];
            }
            tree.build(members.into_iter());
            c.tree = Some(tree);
        }
    }

    fn note_out(&mut self, slot: u32) {
        let Some(d) = self.depths.as_mut() else { return };
        let t = d.time[slot as usize];
        d.all.add(t, false);
        let Some(seg) = d.seg_of.of(self.key[slot as usize]) else { return };
        let c = d.segs.get_mut(&seg).expect("a counted segment");
        c.n -= 1;
        if c.n == 0 {
            if d.segs.remove(&seg).is_some_and(|c| c.tree.is_some()) {
                d.trees -= 1;
            }
        } else if let Some(tree) = c.tree.as_mut() {
            tree.add(t, false);
        }
    }

    /// Times ran out of the window: number the entries again from 0, bottom up, and rebuild
    /// the trees (at most once per `window - cap` evictions).
    fn renumber(&mut self) {
        let d = self.depths.as_mut().expect("kept");
        let mut slots = Vec::with_capacity(self.len);
        let mut at = self.tail;
        while at != NIL {
            d.time[at as usize] = slots.len() as u32;
            slots.push(at);
            at = self.prev[at as usize];
        }
        d.now = slots.len() as u32;
        d.all.build(0..d.now);
        let (seg_of, time, keys) = (d.seg_of, &d.time, &self.key);
        for (&seg, c) in d.segs.iter_mut() {
            if let Some(tree) = c.tree.as_mut() {
                tree.build(slots.iter().filter(|&&s| seg_of.of(keys[s as usize]) == Some(seg)).map(|&s| time[s as usize]));
            }
        }
    }

    /// Check the order statistics' invariants (tests).
    pub fn check(&self) {
        let Some(d) = self.depths.as_ref() else { return };
        let mut at = self.head;
        let mut last = u32::MAX;
        let mut per: FastMap<u64, u32> = FastMap::default();
        while at != NIL {
            let t = d.time[at as usize];
            assert!(t < last && t < d.window, "times decrease from the top down");
            assert_eq!(d.all.below(t + 1) - d.all.below(t), 1, "the tree over all entries holds time {t}");
            if let Some(seg) = d.seg_of.of(self.key[at as usize]) {
                *per.entry(seg).or_default() += 1;
                if let Some(tree) = d.segs[&seg].tree.as_ref() {
                    assert_eq!(tree.below(t + 1) - tree.below(t), 1, "segment tree holds time {t}");
                }
            }
            last = t;
            at = self.next[at as usize];
        }
        assert_eq!(d.all.below(d.window), self.len as u32);
        assert_eq!(per.len(), d.segs.len(), "one count per segment with entries");
        assert_eq!(d.segs.values().filter(|c| c.tree.is_some()).count(), d.trees, "trees counted");
        for (seg, c) in &d.segs {
            assert_eq!(per[seg], c.n, "segment count");
            if let Some(tree) = c.tree.as_ref() {
                assert_eq!(tree.below(d.window), c.n, "segment tree size");
            }
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, key: u64) -> bool {
        self.index.contains_key(&key)
    }

    /// Put `key` on top (it just left the TLB). Drops the deepest entry when full.
    pub fn push_front(&mut self, key: u64) {
        if self.cap == 0 {
            return;
        }
        self.remove(key);
        if self.len == self.cap {
            let t = self.tail;
            let k = self.key[t as usize];
            self.remove(k);
        }
        if self.depths.as_ref().is_some_and(|d| d.now == d.window) {
            self.renumber();
        }
        let s = self.free.pop().expect("a free slot after making room");
        self.key[s as usize] = key;
        self.prev[s as usize] = NIL;
        self.next[s as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = s;
        } else {
            self.tail = s;
        }
        self.head = s;
        self.len += 1;
        self.index.insert(key, s);
        self.note_in(s);
    }

    /// Take `key` out (it was referenced again, or its page was promoted). Returns whether it
    /// was there.
    pub fn remove(&mut self, key: u64) -> bool {
        let Some(s) = self.index.remove(&key) else { return false };
        self.note_out(s);
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.head = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        } else {
            self.tail = p;
        }
        self.free.push(s);
        self.len -= 1;
        true
    }

    /// Keys from the top of the stack down.
    pub fn iter(&self) -> StackIter<'_> {
        StackIter { s: self, at: self.head }
    }

    /// Remove every key for which `f` holds.
    pub fn remove_where(&mut self, mut f: impl FnMut(u64) -> bool) {
        let mut at = self.head;
        while at != NIL {
            let nxt = self.next[at as usize];
            let k = self.key[at as usize];
            if f(k) {
                self.remove(k);
            }
            at = nxt;
        }
    }
}

pub struct StackIter<'a> {
    s: &'a EvictedStack,
    at: u32,
}

impl Iterator for StackIter<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        if self.at == NIL {
            return None;
        }
        let k = self.s.key[self.at as usize];
        self.at = self.s.next[self.at as usize];
        Some(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_recent_eviction_first_and_bounded() {
        let mut s = EvictedStack::new(3);
        for k in [1, 2, 3] {
            s.push_front(k);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![3, 2, 1]);
        s.push_front(4); // 1 falls off the bottom
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![4, 3, 2]);
        assert!(!s.contains(1));
        assert!(s.remove(3));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![4, 2]);
        s.push_front(2); // moves to the top
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![2, 4]);
        s.remove_where(|k| k == 4);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn order_statistics_count_what_a_walk_counts() {
        // Keys of 3 segments (8MB on 4KB pages, top level 11), pushed, re-pushed and removed
        // at random through several renumberings; every count is checked against a walk.
        let seg_of = SegmentOf { base_shift: 12, seg_shift: 23, top_level: 11 };
        let key = |seg: u64, page: u64| super::super::pack_key(12, 1, (seg << 23) + (page << 12), 0);
        let mut s = EvictedStack::with_depths(3000, seg_of);
        let mut x = 12345u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..40_000 {
            let r = rnd();
            // Segment 0 gets most keys, so it gets a tree; 1 and 2 may not.
            let seg = [0, 0, 0, 0, 0, 1, 2][(r % 7) as usize];
            let k = key(seg, (r >> 8) % 2048);
            if r & 0x10000 != 0 {
                s.remove(k);
            } else {
                s.push_front(k);
            }
            if step % 997 == 0 {
                s.check();
                let keys: Vec<u64> = s.iter().collect();
                if keys.len() < 2 {
                    continue;
                }
                let (i, j) = ((rnd() as usize) % keys.len(), (rnd() as usize) % keys.len());
                let (top, low) = (i.min(j), i.max(j));
                let (hi_t, lo_t) = (s.time_of(keys[top]).unwrap() + 1, s.time_of(keys[low]).unwrap());
                assert_eq!(s.between(lo_t, hi_t) as usize, low - top, "entries from {top} down to above {low}");
                for seg in 0..3 {
                    let sk = seg_of.of(key(seg, 0)).unwrap();
                    let walk: Vec<usize> = (top..low).filter(|&p| seg_of.of(keys[p]) == Some(sk)).collect();
                    assert_eq!(s.segment_len(sk) as usize, keys.iter().filter(|&&k| seg_of.of(k) == Some(sk)).count());
                    if let Some((n, latest)) = s.segment_between(sk, lo_t, hi_t) {
                        assert_eq!(n as usize, walk.len(), "segment {seg}");
                        assert_eq!(latest, walk.first().map(|&p| s.time_of(keys[p]).unwrap()), "segment {seg}'s latest");
                    } else {
                        assert!(s.segment_len(sk) < BIG, "segment {seg} has no tree though it holds {}", s.segment_len(sk));
                    }
                }
            }
        }
        assert!(s.segment_between(seg_of.of(key(0, 0)).unwrap(), 0, u32::MAX).is_some(), "the busy segment has a tree");
    }
}
