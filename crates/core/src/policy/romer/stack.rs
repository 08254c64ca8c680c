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

use crate::fasthash::FastMap;

const NIL: u32 = u32::MAX;

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
    }

    /// Take `key` out (it was referenced again, or its page was promoted). Returns whether it
    /// was there.
    pub fn remove(&mut self, key: u64) -> bool {
        let Some(s) = self.index.remove(&key) else { return false };
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
}
