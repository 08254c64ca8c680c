//! Several LRU lists over one set of pages, each page in at most one list: what ARC (T1, T2 and
//! the ghost lists B1, B2) and AMSQM (those four and Q per size class) are made of.
//!
//! Invariants (checked by `check`): every page the map knows sits in exactly the list its node
//! names, each list's links are consistent in both directions, and each list's length is the
//! number of nodes reached from its head. All operations are O(1) and allocate only when the
//! slab grows (freed nodes are reused).

use super::PageRef;
use crate::fasthash::FastMap;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    page: PageRef,
    list: u16,
    prev: u32, // towards the MRU end
    next: u32, // towards the LRU end
    /// Free for the user: AMSQM keeps its reference count here.
    aux: u32,
    /// When the page last went to an MRU end (a counter of such moves).
    stamp: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Ends {
    mru: Option<u32>,
    lru: Option<u32>,
    len: usize,
    /// The LRU node's stamp (0 when empty), kept here so that comparing the ages of many
    /// lists (AMSQM's ranks, at every eviction) reads no nodes.
    lru_stamp: u64,
}

/// `n` LRU lists sharing one page index.
#[derive(Clone, Debug, Default)]
pub struct Lists {
    nodes: Vec<Node>,
    free: Vec<u32>,
    at: FastMap<PageRef, u32>,
    ends: Vec<Ends>,
    clock: u64,
}

impl Lists {
    pub fn new(n: usize) -> Lists {
        Lists { ends: vec![Ends::default(); n], ..Default::default() }
    }

    /// `p`'s node, for the index-based operations below (one hash lookup for several steps).
    pub fn index_of(&self, p: &PageRef) -> Option<u32> {
        self.at.get(p).copied()
    }

    /// The list of node `i`.
    pub fn list_at(&self, i: u32) -> usize {
        self.nodes[i as usize].list as usize
    }

    pub fn aux_at(&self, i: u32) -> u32 {
        self.nodes[i as usize].aux
    }

    pub fn set_aux_at(&mut self, i: u32, v: u32) {
        self.nodes[i as usize].aux = v;
    }

    /// Move node `i` to the MRU end of `list`.
    pub fn move_to_mru(&mut self, i: u32, list: usize) {
        self.unlink(i);
        self.link_mru(list, i);
    }

    pub fn len(&self, list: usize) -> usize {
        self.ends[list].len
    }

    /// Pages in every list.
    pub fn total(&self) -> usize {
        self.at.len()
    }

    /// The least recently used page of `list`.
    pub fn lru(&self, list: usize) -> Option<PageRef> {
        self.ends[list].lru.map(|i| self.nodes[i as usize].page)
    }

    /// When the LRU page of `list` last went to an MRU end (smaller is older).
    pub fn lru_stamp(&self, list: usize) -> Option<u64> {
        let e = &self.ends[list];
        e.lru.map(|_| e.lru_stamp)
    }

    /// Each of the `N` lists from `first` on: its length and its LRU page's stamp (u64::MAX when
    /// empty), read from one slice (one bounds check). What ranking AMSQM's classes needs of a
    /// class's lists at every eviction.
    #[inline]
    pub fn lens_and_ages<const N: usize>(&self, first: usize) -> [(usize, u64); N] {
        let ends: &[Ends; N] = self.ends[first..first + N].try_into().expect("N lists from first");
        ends.map(|e| (e.len, if e.len > 0 { e.lru_stamp } else { u64::MAX }))
    }

    /// `p`'s auxiliary word (0 for a page just added).
    pub fn aux(&self, p: &PageRef) -> Option<u32> {
        self.at.get(p).map(|&i| self.nodes[i as usize].aux)
    }

    /// Put `p` at the MRU end of `list`, taking it out of the list it was in (keeping its
    /// auxiliary word), or adding it with aux 0. Returns its node.
    pub fn push_mru(&mut self, list: usize, p: PageRef) -> u32 {
        let i = self.detached(p);
        self.link_mru(list, i);
        i
    }

    /// The node of the least recently used page of `list`.
    pub fn lru_index(&self, list: usize) -> Option<u32> {
        self.ends[list].lru
    }

    /// The page of node `i`.
    pub fn page_at(&self, i: u32) -> PageRef {
        self.nodes[i as usize].page
    }

    /// Put `p` at the LRU end of `list` (ARC's undo of a victim the OS could not evict).
    pub fn push_lru(&mut self, list: usize, p: PageRef) {
        let i = self.detached(p);
        let e = &mut self.ends[list];
        let old = e.lru.unwrap_or(NIL);
        // As old as the page it goes behind.
        let stamp = if old != NIL { self.nodes[old as usize].stamp } else { 0 };
        self.nodes[i as usize] = Node { prev: old, next: NIL, list: list as u16, stamp, ..self.nodes[i as usize] };
        if old != NIL {
            self.nodes[old as usize].next = i;
        } else {
            e.mru = Some(i);
        }
        e.lru = Some(i);
        e.lru_stamp = stamp;
        e.len += 1;
    }

    /// Forget `p`; returns the list it was in.
    pub fn remove(&mut self, p: &PageRef) -> Option<usize> {
        self.remove_if(p, |_| true)
    }

    /// Forget `p` if the list it is in passes `from`; returns that list. One probe of the
    /// index (an eviction's release asks this of every page it unmaps).
    pub fn remove_if(&mut self, p: &PageRef, from: impl Fn(usize) -> bool) -> Option<usize> {
        let std::collections::hash_map::Entry::Occupied(o) = self.at.entry(*p) else { return None };
        let i = *o.get();
        let list = self.nodes[i as usize].list as usize;
        if !from(list) {
            return None;
        }
        o.remove();
        self.unlink(i);
        self.free.push(i);
        Some(list)
    }

    /// Take the LRU page of `list` out of every list.
    pub fn pop_lru(&mut self, list: usize) -> Option<PageRef> {
        let p = self.lru(list)?;
        self.remove(&p);
        Some(p)
    }

    /// Pages of `list` from the MRU end (tests and checks).
    pub fn iter(&self, list: usize) -> impl Iterator<Item = PageRef> + '_ {
        let mut i = self.ends[list].mru.unwrap_or(NIL);
        std::iter::from_fn(move || {
            if i == NIL {
                return None;
            }
            let n = &self.nodes[i as usize];
            i = n.next;
            Some(n.page)
        })
    }

    /// `p`'s node, taken out of the list it was in (keeping its auxiliary word), or a new
    /// node with aux 0; linked into no list.
    fn detached(&mut self, p: PageRef) -> u32 {
        // One probe of the index whether `p` is there or not.
        let slot = match self.at.entry(p) {
            std::collections::hash_map::Entry::Occupied(o) => {
                let i = *o.get();
                self.unlink(i);
                return i;
            }
            std::collections::hash_map::Entry::Vacant(v) => v,
        };
        let n = Node { page: p, list: 0, prev: NIL, next: NIL, aux: 0, stamp: 0 };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = n;
                i
            }
            None => {
                self.nodes.push(n);
                (self.nodes.len() - 1) as u32
            }
        };
        slot.insert(i);
        i
    }

    fn link_mru(&mut self, list: usize, i: u32) {
        self.clock += 1;
        let e = &mut self.ends[list];
        let old = e.mru.unwrap_or(NIL);
        let n = &mut self.nodes[i as usize];
        n.stamp = self.clock;
        n.list = list as u16;
        n.prev = NIL;
        n.next = old;
        if old != NIL {
            self.nodes[old as usize].prev = i;
        } else {
            e.lru = Some(i);
            e.lru_stamp = self.clock;
        }
        e.mru = Some(i);
        e.len += 1;
    }

    fn unlink(&mut self, i: u32) {
        let Node { list, prev, next, .. } = self.nodes[i as usize];
        let e = &mut self.ends[list as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            e.mru = (next != NIL).then_some(next);
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            e.lru = (prev != NIL).then_some(prev);
            e.lru_stamp = if prev != NIL { self.nodes[prev as usize].stamp } else { 0 };
        }
        e.len -= 1;
    }

    /// The invariants above. O(pages).
    pub fn check(&self) -> Result<(), String> {
        let mut seen = 0;
        for (l, e) in self.ends.iter().enumerate() {
            let mut n = 0;
            let mut prev = NIL;
            let mut i = e.mru.unwrap_or(NIL);
            while i != NIL {
                let node = &self.nodes[i as usize];
                if node.list as usize != l || node.prev != prev || self.at.get(&node.page) != Some(&i) {
                    return Err(format!(
                        "list {l}: the node of {:?} is linked into it but names list {} (or its links or index disagree)",
                        node.page, node.list
                    ));
                }
                n += 1;
                if n > self.at.len() {
                    return Err(format!("list {l} has a cycle"));
                }
                prev = i;
                i = node.next;
            }
            let stamp = if prev != NIL { self.nodes[prev as usize].stamp } else { 0 };
            if e.lru.unwrap_or(NIL) != prev || n != e.len || e.lru_stamp != stamp {
                return Err(format!("list {l}: {n} nodes reached, {} counted (or its LRU end or that end's stamp is wrong)", e.len));
            }
            seen += n;
        }
        if seen != self.at.len() {
            return Err(format!("{} pages indexed, {seen} in the lists", self.at.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u64) -> PageRef {
        PageRef { pid: 1, start: i << 12, size_idx: 0 }
    }

    #[test]
    fn pages_move_between_lists_and_keep_their_word() {
        let mut l = Lists::new(3);
        for i in 0..4 {
            l.push_mru(0, p(i));
        }
        let n = l.index_of(&p(1)).unwrap();
        l.set_aux_at(n, 7);
        l.push_mru(2, p(1));
        assert_eq!(l.iter(0).collect::<Vec<_>>(), vec![p(3), p(2), p(0)]);
        assert_eq!((l.index_of(&p(1)).map(|n| l.list_at(n)), l.aux(&p(1))), (Some(2), Some(7)));
        assert_eq!(l.pop_lru(0), Some(p(0)));
        l.push_lru(0, p(9));
        assert_eq!(l.lru(0), Some(p(9)));
        assert_eq!(l.remove(&p(3)), Some(0));
        assert_eq!((l.len(0), l.len(2), l.total()), (2, 1, 3));
        l.check().unwrap();
    }
}
