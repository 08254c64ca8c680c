//! A set of page numbers kept as 512-bit chunks in an ordered map: membership costs one
//! search among chunks (512 times fewer keys than a set of pages) and a bit test, a new chunk
//! is the only allocation, and ranges are visited in order. Used for populated pages, where a
//! `BTreeSet<u64>` of pages made every first touch a deep tree search and, often, a node
//! allocation.
//!
//! Invariant: no chunk is empty (a chunk whose last page leaves is removed), so `len` of the
//! map bounds the work of a range visit.

use std::collections::BTreeMap;

const WORDS: usize = 8;
const CHUNK_SHIFT: u32 = 9; // 512 pages per chunk

#[derive(Default, Clone, Debug)]
pub struct PageSet {
    chunks: BTreeMap<u64, [u64; WORDS]>,
}

#[inline]
fn split(page: u64) -> (u64, usize, u64) {
    let off = page & ((1 << CHUNK_SHIFT) - 1);
    (page >> CHUNK_SHIFT, (off >> 6) as usize, 1u64 << (off & 63))
}

impl PageSet {
    /// Add `page`; whether it was absent.
    pub fn insert(&mut self, page: u64) -> bool {
        let (c, w, bit) = split(page);
        let words = self.chunks.entry(c).or_insert([0; WORDS]);
        let absent = words[w] & bit == 0;
        words[w] |= bit;
        absent
    }

    /// Take `page` out; whether it was there.
    pub fn remove(&mut self, page: u64) -> bool {
        let (c, w, bit) = split(page);
        let Some(words) = self.chunks.get_mut(&c) else { return false };
        if words[w] & bit == 0 {
            return false;
        }
        words[w] &= !bit;
        if words.iter().all(|&x| x == 0) {
            self.chunks.remove(&c);
        }
        true
    }

    pub fn contains(&self, page: u64) -> bool {
        let (c, w, bit) = split(page);
        self.chunks.get(&c).is_some_and(|words| words[w] & bit != 0)
    }

    /// Visit the pages in `lo..hi`, in increasing order.
    pub fn for_each_in(&self, lo: u64, hi: u64, mut f: impl FnMut(u64)) {
        if lo >= hi {
            return;
        }
        for (&c, words) in self.chunks.range(lo >> CHUNK_SHIFT..=(hi - 1) >> CHUNK_SHIFT) {
            for (w, &word) in words.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let page = (c << CHUNK_SHIFT) + ((w as u64) << 6) + bits.trailing_zeros() as u64;
                    bits &= bits - 1;
                    if page >= lo && page < hi {
                        f(page);
                    }
                }
            }
        }
    }

    /// How many pages of `lo..hi` the set holds.
    pub fn count_in(&self, lo: u64, hi: u64) -> u64 {
        let mut n = 0;
        self.for_each_in(lo, hi, |_| n += 1);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn behaves_as_a_set_of_pages() {
        let mut s = PageSet::default();
        let mut want = BTreeSet::new();
        let mut x = 88172645463325252u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let page = (x >> 20) % 5000 + if x & 1 == 0 { 0 } else { 1 << 40 };
            if x & 2 == 0 {
                assert_eq!(s.insert(page), want.insert(page));
            } else {
                assert_eq!(s.remove(page), want.remove(&page));
            }
            assert_eq!(s.contains(page), want.contains(&page));
        }
        for (lo, hi) in [(0, 5000), (17, 4099), (511, 513), (1 << 40, (1 << 40) + 700), (0, u64::MAX), (9, 9)] {
            let mut got = Vec::new();
            s.for_each_in(lo, hi, |p| got.push(p));
            let expect: Vec<u64> = want.range(lo..hi).copied().collect();
            assert_eq!(got, expect, "{lo}..{hi}");
            assert_eq!(s.count_in(lo, hi), expect.len() as u64);
        }
        assert!(s.chunks.values().all(|w| w.iter().any(|&x| x != 0)), "no empty chunk");
    }
}
