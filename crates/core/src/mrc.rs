//! Miss-ratio curves in one pass: the LRU stack distance of every access (Mattson et al., 1970)
//! gives the misses of a fully associative LRU TLB of every size at once. An access at stack
//! distance d (1 = the most recent page) hits in every TLB of at least d entries.
//!
//! Distances come from a Fenwick tree over access timestamps holding a 1 at each page's most
//! recent access, so a distance is a prefix count: O(log n) per access. When timestamps run
//! out the live ones are renumbered in order (constant memory in the trace length; linear in
//! the number of distinct pages).

use crate::fasthash::FastMap;
use crate::trace::Access;

pub struct StackDistance {
    last: FastMap<u64, u64>,
    tree: Vec<u32>,
    now: u64,
    live: u64,
    shift: u32,
    /// hist[d] = accesses at distance d, for d in 1..=max; hist[max+1] = farther.
    pub hist: Vec<u64>,
    pub cold: u64,
    pub accesses: u64,
    max: usize,
}

impl StackDistance {
    pub fn new(page_shift: u32, max_entries: usize) -> StackDistance {
        StackDistance {
            last: FastMap::default(),
            tree: vec![0; 1 << 20],
            now: 0,
            live: 0,
            shift: page_shift,
            hist: vec![0; max_entries + 2],
            cold: 0,
            accesses: 0,
            max: max_entries,
        }
    }

    fn add(&mut self, i: u64, v: i32) {
        let mut i = i as usize + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] = (self.tree[i - 1] as i64 + v as i64) as u32;
            i += i & i.wrapping_neg();
        }
    }

    fn prefix(&self, i: u64) -> u64 {
        // Sum over stamps [0, i].
        let mut i = i as usize + 1;
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i - 1] as u64;
            i &= i - 1;
        }
        s
    }

    fn compact(&mut self) {
        let mut v: Vec<(u64, u64)> = self.last.iter().map(|(&p, &t)| (t, p)).collect();
        v.sort_unstable();
        let cap = (v.len() * 2).max(1 << 20).next_power_of_two();
        self.tree = vec![0; cap];
        for (i, (_, p)) in v.iter().enumerate() {
            self.last.insert(*p, i as u64);
            self.add(i as u64, 1);
        }
        self.now = v.len() as u64;
    }

    #[inline]
    pub fn access(&mut self, a: &Access) {
        let page = a.addr >> self.shift;
        self.accesses += a.count as u64;
        if self.now as usize >= self.tree.len() {
            self.compact();
        }
        match self.last.insert(page, self.now) {
            Some(t) => {
                let d = self.live - self.prefix(t) + 1; // distinct pages since, plus itself
                let slot = (d as usize).min(self.max + 1);
                self.hist[slot] += 1;
                self.add(t, -1);
            }
            None => {
                self.cold += 1;
                self.live += 1;
            }
        }
        self.add(self.now, 1);
        self.now += 1;
        if a.count > 1 {
            self.hist[1] += a.count as u64 - 1;
        }
    }

    /// Misses of an LRU TLB of n entries (1 <= n <= max).
    pub fn misses(&self, n: usize) -> u64 {
        self.cold + self.hist[n + 1..].iter().sum::<u64>()
    }

    /// Misses for every size 1..=max.
    pub fn curve(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.max];
        let mut tail = self.hist[self.max + 1];
        for n in (1..=self.max).rev() {
            out[n - 1] = self.cold + tail;
            tail += self.hist[n];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::tlb::{Replacement, Tlb};
    use crate::trace::gen::Rng;
    use crate::trace::AccessKind;

    #[test]
    fn equals_direct_simulation_at_every_size() {
        let mut rng = Rng::new(5);
        let trace: Vec<Access> = (0..60_000)
            .map(|i| {
                let page = if i % 3 == 0 { rng.below(300) } else { rng.below(40) };
                Access::new(page << 12, AccessKind::Load, 8)
            })
            .collect();
        let mut sd = StackDistance::new(12, 128);
        // Force compactions to be exercised.
        sd.tree = vec![0; 1 << 12];
        for a in &trace {
            sd.access(a);
        }
        let curve = sd.curve();
        for n in [1usize, 2, 7, 32, 64, 100, 128] {
            let mut t = Tlb::new(n as u32, n as u32, Replacement::Lru, 0);
            let mut misses = 0;
            for a in &trace {
                let v = a.addr >> 12;
                if !t.probe(v, v) {
                    misses += 1;
                    t.fill(v, v);
                }
            }
            assert_eq!(curve[n - 1], misses, "n={n}");
            assert_eq!(sd.misses(n), misses);
        }
    }
}
