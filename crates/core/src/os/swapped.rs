//! One process's swapped-out pages, by start address.
//!
//! A major fault asks "which swapped page holds this address?" and a swap-out adds an entry;
//! under heavy paging (AMSQM's trace 4: a swap-in and a swap-out every 14 accesses) these two
//! run as often as the replacement lists. An ordered map answered them with a tree descent
//! each; here an entry is hashed by its start, and the page holding an address is found with
//! one probe per page size that has entries (the start is the address rounded down to that
//! size). Ranges, which munmap, mremap, collapse and promotion ask for, are rarer: they probe
//! the aligned starts in the range, or scan every entry when that is cheaper, and return the
//! entries sorted by start so that whatever consumes them does so in one order on every run.
//!
//! Invariants (checked by `check`, with `Os::validate_swap` checking that no entry overlaps a
//! mapped page): entries do not overlap, each starts aligned to its size, and `per_size`
//! counts the entries of each size index.

use super::swap::SwapEntry;
use crate::fasthash::FastMap;
use crate::mmu::MAX_SIZES;
use crate::units::PageSize;

#[derive(Clone, Debug, Default)]
pub struct SwappedPages {
    at: FastMap<u64, SwapEntry>,
    per_size: [u32; MAX_SIZES],
}

impl SwappedPages {
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Add the entry for the page starting at `start` (no entry may overlap it).
    pub fn insert(&mut self, start: u64, e: SwapEntry) {
        let old = self.at.insert(start, e);
        debug_assert!(old.is_none(), "two swap entries at {start:#x}");
        self.per_size[e.si as usize] += 1;
    }

    pub fn remove(&mut self, start: u64) -> Option<SwapEntry> {
        let e = self.at.remove(&start)?;
        self.per_size[e.si as usize] -= 1;
        Some(e)
    }

    /// The entry whose page contains `va`: (start, entry).
    #[inline]
    pub fn containing(&self, va: u64, sizes: &[PageSize]) -> Option<(u64, SwapEntry)> {
        if self.at.is_empty() {
            return None;
        }
        for (si, size) in sizes.iter().enumerate() {
            if self.per_size[si] == 0 {
                continue;
            }
            let start = va & !(size.bytes() - 1);
            if let Some(&e) = self.at.get(&start) {
                if e.si as usize == si {
                    return Some((start, e));
                }
            }
        }
        None
    }

    /// Probes of aligned starts that a range query over [start, end) would make.
    fn probes(&self, start: u64, end: u64, sizes: &[PageSize]) -> u64 {
        let span = end.saturating_sub(start);
        sizes.iter().enumerate().filter(|&(si, _)| self.per_size[si] > 0).map(|(_, s)| (span >> s.shift()) + 1).fold(0u64, u64::saturating_add)
    }

    /// Calls `f` for every entry whose start lies in [start, end), in no particular order.
    fn for_each_start_in(&self, start: u64, end: u64, sizes: &[PageSize], mut f: impl FnMut(u64, SwapEntry) -> bool) {
        if self.at.is_empty() || start >= end {
            return;
        }
        if self.probes(start, end, sizes) < self.at.len() as u64 {
            for (si, size) in sizes.iter().enumerate() {
                if self.per_size[si] == 0 {
                    continue;
                }
                let b = size.bytes();
                let mut k = start.next_multiple_of(b);
                while k < end {
                    if let Some(&e) = self.at.get(&k) {
                        if e.si as usize == si && !f(k, e) {
                            return;
                        }
                    }
                    let Some(n) = k.checked_add(b) else { break };
                    k = n;
                }
            }
        } else {
            for (&k, &e) in &self.at {
                if k >= start && k < end && !f(k, e) {
                    return;
                }
            }
        }
    }

    /// Whether any entry starts in [start, end).
    pub fn any_start_in(&self, start: u64, end: u64, sizes: &[PageSize]) -> bool {
        let mut any = false;
        self.for_each_start_in(start, end, sizes, |_, _| {
            any = true;
            false
        });
        any
    }

    /// The entries starting in [start, end), sorted by start.
    pub fn starting_in(&self, start: u64, end: u64, sizes: &[PageSize]) -> Vec<(u64, SwapEntry)> {
        let mut out = Vec::new();
        self.for_each_start_in(start, end, sizes, |k, e| {
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
        for (k, e) in self.entries() {
            let b = sizes.get(e.si as usize).ok_or_else(|| format!("swap entry at {k:#x}: size index {} unknown", e.si))?.bytes();
            if k & (b - 1) != 0 || k < end {
                return Err(format!("swap entry at {k:#x} is misaligned for its size or overlaps the one before"));
            }
            end = k + b;
            counted[e.si as usize] += 1;
        }
        if counted != self.per_size {
            return Err(format!("swap entries per size: {:?} counted, {counted:?} held", self.per_size));
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
        let s = sizes();
        let mut rng = crate::trace::gen::Rng::new(3);
        let mut ours = SwappedPages::default();
        let mut reference = std::collections::BTreeMap::new();
        for step in 0..20_000u64 {
            let si = rng.below(4) as u32;
            let b = s[si as usize].bytes();
            let start = rng.below(64 << 21) & !(b - 1);
            let overlaps = reference.range(..start + b).next_back().is_some_and(|(&k, v): (&u64, &SwapEntry)| k + s[v.si as usize].bytes() > start);
            if rng.below(3) > 0 && !overlaps {
                ours.insert(start, e(si, step));
                reference.insert(start, e(si, step));
            } else if let Some((&k, _)) = reference.range(start..).next() {
                assert_eq!(ours.remove(k), reference.remove(&k));
            }
            let va = rng.below(64 << 21);
            let want = reference.range(..=va).next_back().filter(|(&k, v)| va < k + s[v.si as usize].bytes()).map(|(&k, &v)| (k, v));
            assert_eq!(ours.containing(va, &s), want, "step {step}");
            let (lo, len) = (rng.below(64 << 21), [1u64 << 12, 1 << 21, 1 << 30][rng.below(3) as usize]);
            let want: Vec<_> = reference.range(lo..lo + len).map(|(&k, &v)| (k, v)).collect();
            assert_eq!(ours.any_start_in(lo, lo + len, &s), !want.is_empty());
            assert_eq!(ours.starting_in(lo, lo + len, &s), want, "step {step}");
        }
        ours.check(&s).unwrap();
        assert_eq!(ours.entries(), reference.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn a_page_of_another_size_at_the_same_start_is_not_taken_for_it() {
        let s = sizes();
        let mut p = SwappedPages::default();
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
