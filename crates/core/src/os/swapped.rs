//! One process's swapped-out pages, by start address.
//!
//! A major fault asks "which swapped page holds this address?" and a swap-out adds an entry;
//! under heavy paging (AMSQM's trace 4: a swap-in and a swap-out every 14 accesses) these two
//! run as often as the replacement lists. An ordered map answered them with a tree descent
//! each; here an entry is hashed by its start, and the page holding an address is found with
//! one probe per page size that has entries (the start is the address rounded down to that
//! size). Ranges, which munmap, mremap, collapse and promotion ask for (a promotion check, for
//! every 2MB region it considers), are answered from a bitmap per chunk of 512 base pages with
//! a bit where an entry starts: the chunks a range covers are looked up, chunks without
//! entries cost nothing, and within the others only the range's own bits are visited. A range
//! covering more chunks than there are chunks with entries (an exit's whole address space)
//! scans the entries instead. Ranges come back sorted by start, so whatever consumes them does
//! so in one order on every run.
//!
//! Invariants (checked by `check`, with `Os::validate_swap` checking that no entry overlaps a
//! mapped page): entries do not overlap, each starts aligned to its size, `per_size` counts the
//! entries of each size index and `held` has the bits of the sizes counted above zero, and
//! `starts` holds exactly their start bits (no empty chunk).

use super::swap::SwapEntry;
use crate::fasthash::FastMap;
use crate::mmu::MAX_SIZES;
use crate::units::PageSize;

/// The bits of word `w` of a chunk's bitmap that stand for pages [lo, hi] of the chunk.
#[inline(always)]
fn in_word(w: usize, lo: u64, hi: u64) -> u64 {
    let (w0, w1) = ((w as u64) << 6, ((w as u64) << 6) + 63);
    let from = lo.max(w0) - w0;
    let to = hi.min(w1) - w0;
    (u64::MAX >> (63 - to)) & (u64::MAX << from)
}

/// Base pages per chunk of the start bitmaps, and its words.
const CHUNK_SHIFT: u32 = 9;
const CHUNK_WORDS: usize = (1 << CHUNK_SHIFT) / 64;

#[derive(Clone, Debug)]
pub struct SwappedPages {
    at: FastMap<u64, SwapEntry>,
    per_size: [u32; MAX_SIZES],
    /// Bit `si` set when `per_size[si] > 0`.
    held: u32,
    /// Chunk (start >> (base shift + CHUNK_SHIFT)) -> a bit per base page where an entry starts.
    starts: FastMap<u64, [u64; CHUNK_WORDS]>,
    base_shift: u32,
}

impl SwappedPages {
    /// No entries, on a machine with this base page.
    pub fn new(base: PageSize) -> SwappedPages {
        SwappedPages { at: FastMap::default(), per_size: [0; MAX_SIZES], held: 0, starts: FastMap::default(), base_shift: base.shift() }
    }

    /// (chunk, word, bit) of the base page starting at `start`.
    #[inline(always)]
    fn bit_of(&self, start: u64) -> (u64, usize, u32) {
        let page = start >> self.base_shift;
        (page >> CHUNK_SHIFT, ((page >> 6) as usize) & (CHUNK_WORDS - 1), (page & 63) as u32)
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Add the entry for the page starting at `start` (no entry may overlap it).
    pub fn insert(&mut self, start: u64, e: SwapEntry) {
        let old = self.at.insert(start, e);
        debug_assert!(old.is_none(), "two swap entries at {start:#x}");
        self.per_size[e.si as usize] += 1;
        self.held |= 1 << e.si;
        let (c, w, b) = self.bit_of(start);
        self.starts.entry(c).or_insert([0; CHUNK_WORDS])[w] |= 1 << b;
    }

    pub fn remove(&mut self, start: u64) -> Option<SwapEntry> {
        let e = self.at.remove(&start)?;
        self.per_size[e.si as usize] -= 1;
        if self.per_size[e.si as usize] == 0 {
            self.held &= !(1 << e.si);
        }
        let (c, w, b) = self.bit_of(start);
        let bits = self.starts.get_mut(&c).expect("a swap entry's chunk");
        bits[w] &= !(1 << b);
        if bits.iter().all(|&x| x == 0) {
            self.starts.remove(&c);
        }
        Some(e)
    }

    /// The entry whose page contains `va`: (start, entry): a probe of the entries at the start
    /// `va` rounds down to, at each size that has entries.
    #[inline]
    pub fn containing(&self, va: u64, sizes: &[PageSize]) -> Option<(u64, SwapEntry)> {
        let mut held = self.held;
        while held != 0 {
            let si = held.trailing_zeros();
            held &= held - 1;
            let start = va & !(sizes[si as usize].bytes() - 1);
            if let Some(&e) = self.at.get(&start) {
                if e.si == si {
                    return Some((start, e));
                }
            }
        }
        None
    }

    /// Calls `f` for every entry whose start lies in [start, end), in no particular order,
    /// until it returns false.
    fn for_each_start_in(&self, start: u64, end: u64, mut f: impl FnMut(u64, SwapEntry) -> bool) {
        if self.at.is_empty() || start >= end {
            return;
        }
        let span = self.base_shift + CHUNK_SHIFT;
        let (c0, c1) = (start >> span, (end - 1) >> span);
        if c1 - c0 >= self.starts.len() as u64 {
            // More chunks in the range than chunks with entries: visit those instead.
            for (&k, &e) in &self.at {
                if k >= start && k < end && !f(k, e) {
                    return;
                }
            }
            return;
        }
        let (first, last) = (start.div_ceil(1 << self.base_shift), (end - 1) >> self.base_shift);
        if first > last {
            return;
        }
        for c in c0..=c1 {
            let Some(bits) = self.starts.get(&c) else { continue };
            // Only the words, and in them the bits, of base pages in [first, last].
            let base = c << CHUNK_SHIFT;
            let (lo, hi) = (first.max(base) - base, last.min(base + (1 << CHUNK_SHIFT) - 1) - base);
            for w in (lo >> 6) as usize..=(hi >> 6) as usize {
                let mut word = bits[w] & in_word(w, lo, hi);
                while word != 0 {
                    let b = word.trailing_zeros() as u64;
                    word &= word - 1;
                    let k = (base | ((w as u64) << 6) | b) << self.base_shift;
                    if !f(k, self.at[&k]) {
                        return;
                    }
                }
            }
        }
    }

    /// Whether any entry starts in [start, end).
    pub fn any_start_in(&self, start: u64, end: u64) -> bool {
        let mut any = false;
        self.for_each_start_in(start, end, |_, _| {
            any = true;
            false
        });
        any
    }

    /// The entries starting in [start, end), sorted by start.
    pub fn starting_in(&self, start: u64, end: u64) -> Vec<(u64, SwapEntry)> {
        let mut out = Vec::new();
        self.for_each_start_in(start, end, |k, e| {
            out.push((k, e));
            true
        });
        out.sort_unstable_by_key(|&(k, _)| k);
        out
    }

    /// Every entry, sorted by start.
    pub fn entries(&self) -> Vec<(u64, SwapEntry)> {
        let mut out: Vec<(u64, SwapEntry)> = self.at.iter().map(|(&k, &e)| (k, e)).collect();
        out.sort_unstable_by_key(|&(k, _)| k);
        out
    }

    /// The invariants above. O(entries log entries).
    pub fn check(&self, sizes: &[PageSize]) -> Result<(), String> {
        let mut counted = [0u32; MAX_SIZES];
        let mut end = 0u64;
        let mut bits: FastMap<u64, [u64; CHUNK_WORDS]> = FastMap::default();
        for (k, e) in self.entries() {
            let (c, w, b) = self.bit_of(k);
            bits.entry(c).or_insert([0; CHUNK_WORDS])[w] |= 1 << b;
            let bytes = sizes.get(e.si as usize).ok_or_else(|| format!("swap entry at {k:#x}: size index {} unknown", e.si))?.bytes();
            if k & (bytes - 1) != 0 || k < end {
                return Err(format!("swap entry at {k:#x} is misaligned for its size or overlaps the one before"));
            }
            end = k + bytes;
            counted[e.si as usize] += 1;
        }
        if counted != self.per_size {
            return Err(format!("swap entries per size: {:?} counted, {counted:?} held", self.per_size));
        }
        let held = counted.iter().enumerate().fold(0u32, |m, (si, &n)| if n > 0 { m | 1 << si } else { m });
        if held != self.held {
            return Err(format!("swap entries: sizes held {:#b}, {held:#b} counted", self.held));
        }
        if bits != self.starts {
            return Err("the swap entries' start bitmaps disagree with the entries".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> Vec<PageSize> {
        [12u8, 13, 16, 21].into_iter().map(|b| PageSize::from_shift(b).unwrap()).collect()
    }

    fn e(si: u32, slot: u64) -> SwapEntry {
        SwapEntry { si, slot }
    }

    /// The answers equal those of an ordered map searched the way the OS searched before:
    /// the last start at or below the address, if its page reaches it; starts in a range.
    #[test]
    fn answers_equal_an_ordered_map() {
        answers_equal_an_ordered_map_with(&sizes(), 64 << 21, 3);
        // Entries of one size (a base-pages-only run).
        answers_equal_an_ordered_map_with(&sizes()[1..2], 64 << 21, 4);
    }

    /// The same with pages larger than a chunk of the start bitmaps (1GB over 4KB base pages).
    #[test]
    fn answers_equal_an_ordered_map_with_pages_larger_than_a_chunk() {
        let s: Vec<PageSize> = [12u8, 21, 30].into_iter().map(|b| PageSize::from_shift(b).unwrap()).collect();
        answers_equal_an_ordered_map_with(&s, 8 << 30, 5);
    }

    fn answers_equal_an_ordered_map_with(s: &[PageSize], span: u64, seed: u64) {
        let mut rng = crate::trace::gen::Rng::new(seed);
        let mut ours = SwappedPages::new(s[0]);
        let mut reference = std::collections::BTreeMap::new();
        for step in 0..20_000u64 {
            let si = rng.below(s.len() as u64) as u32;
            let b = s[si as usize].bytes();
            let start = rng.below(span) & !(b - 1);
            let overlaps = reference.range(..start + b).next_back().is_some_and(|(&k, v): (&u64, &SwapEntry)| k + s[v.si as usize].bytes() > start);
            if rng.below(3) > 0 && !overlaps {
                ours.insert(start, e(si, step));
                reference.insert(start, e(si, step));
            } else if let Some((&k, _)) = reference.range(start..).next() {
                assert_eq!(ours.remove(k), reference.remove(&k));
            }
            let va = rng.below(span);
            let want = reference.range(..=va).next_back().filter(|(&k, v)| va < k + s[v.si as usize].bytes()).map(|(&k, &v)| (k, v));
            assert_eq!(ours.containing(va, s), want, "step {step}");
            let (lo, len) = (rng.below(span), [1u64 << 12, 1 << 18, 1 << 21, 1 << 30][rng.below(4) as usize]);
            let want: Vec<_> = reference.range(lo..lo + len).map(|(&k, &v)| (k, v)).collect();
            assert_eq!(ours.any_start_in(lo, lo + len), !want.is_empty());
            assert_eq!(ours.starting_in(lo, lo + len), want, "step {step}");
            if step % 1000 == 0 {
                ours.check(s).unwrap();
            }
        }
        ours.check(s).unwrap();
        assert_eq!(ours.entries(), reference.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn a_page_of_another_size_at_the_same_start_is_not_taken_for_it() {
        let s = sizes();
        let mut p = SwappedPages::new(s[0]);
        // A 4KB page at 8KB, and an 8KB page elsewhere so that 8KB starts are probed too: the
        // probe for an 8KB page at 0x2000 finds the 4KB entry and must pass over it.
        p.insert(0x2000, e(0, 1));
        p.insert(0x10000, e(1, 2));
        assert_eq!(p.containing(0x3000, &s), None);
        assert_eq!(p.containing(0x11fff, &s), Some((0x10000, e(1, 2))));
        assert_eq!(p.containing(0x2fff, &s), Some((0x2000, e(0, 1))));
        assert!(p.check(&s).is_ok());
    }
}
