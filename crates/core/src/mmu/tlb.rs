//! One TLB structure: `sets` x `ways` entries, holding translations of one or more page sizes,
//! with true LRU, tree pseudo-LRU or seeded random replacement.
//!
//! Invariants:
//! - A tag is present at most once in the whole structure.
//! - LRU: each set's slice is kept in recency order, most recent first; empty slots (EMPTY) are
//!   at the tail. So a hit at way k rotates [0..=k] and a fill shifts the whole set, dropping the
//!   least recent entry.
//! - A large fully associative LRU structure (`slides`) keeps its one set as a window
//!   `tags[window..window + ways]` of a longer array: a miss moves the window one slot down and
//!   writes the new tag at its front (the least recent entry is left behind the window's end),
//!   instead of shifting every entry; when the window reaches the array's start it is copied back
//!   to the end. The window's order is the set's recency order, as above.
//! - PLRU and random: slots are unordered; PLRU keeps ways-1 tree bits per set (ways a power of
//!   two, at most 64).
//!
//! A tag is (asid, page number, page-size index) packed into one u64, so pages of different
//! sizes can share a set array without aliasing. The set index comes from the page number of
//! the entry's own size, as in hardware that probes a shared array once per size.

use super::lru_set;
use crate::trace::gen::Rng;

pub const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    Lru,
    Plru,
    Random,
}

impl Replacement {
    pub fn parse(s: &str) -> Option<Replacement> {
        match s {
            "lru" => Some(Replacement::Lru),
            "plru" | "tree-plru" => Some(Replacement::Plru),
            "random" => Some(Replacement::Random),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Replacement::Lru => "lru",
            Replacement::Plru => "plru",
            Replacement::Random => "random",
        }
    }
}

/// Size indices a tag can carry (its low 4 bits).
pub const TAG_SIZES: usize = 16;
const SIZE_MASK: u64 = TAG_SIZES as u64 - 1;

/// A value no tag of size index `si` equals (its low bits name another size), for the sizes
/// `probe_sizes` is not looking for. `EMPTY` carries size bits 15, so it matches none either.
#[inline(always)]
pub fn no_tag(si: usize) -> u64 {
    ((si as u64) + 1) & SIZE_MASK
}

/// Pack a tag. `vpn` is the page number at the entry's size; asid gets the top 16 bits.
#[inline(always)]
pub fn make_tag(asid: u16, vpn: u64, size_idx: u32) -> u64 {
    ((asid as u64) << 48) | ((vpn & ((1u64 << 44) - 1)) << 4) | size_idx as u64
}

/// Unpack a tag made by `make_tag`: (asid, page number at the entry's size, size index).
pub fn decode_tag(tag: u64) -> (u16, u64, u32) {
    ((tag >> 48) as u16, (tag >> 4) & ((1u64 << 44) - 1), (tag & 0xf) as u32)
}

#[derive(Clone, Debug)]
pub struct Tlb {
    pub sets: u32,
    pub ways: u32,
    ways_usize: usize,
    set_mask: u64,
    tags: Vec<u64>,
    repl: Replacement,
    plru_bits: Vec<u64>,
    rng: Rng,
    /// LRU lookups compare four tags per instruction (AVX2, detected at run time).
    pub(crate) wide: bool,
    /// Fully associative structures of at least `FILTER_MIN_WAYS` ways: how many held tags
    /// hash to each slot (empty when off). `probe_sizes` answers a miss from it without
    /// scanning the ways whenever no sought tag's slot is counted: with 64 ways and 4096
    /// slots, most misses. It never changes an answer, only how fast a miss is found.
    filter: Vec<u16>,
    /// A fully associative LRU structure of at least `FILTER_MIN_WAYS` ways whose set slides
    /// (module comment): a miss costs one write instead of a shift of every way.
    slides: bool,
    /// Where the set starts in `tags` (always 0 unless `slides`).
    window: usize,
}

/// Slots a sliding set can move down before it is copied back to the end of its array: the
/// copy (one set's worth of tags) is then paid once per this many misses.
const SLIDE_ROOM: usize = 1024;

/// Slots of the tag filter, and the ways from which a single-set structure keeps one.
const FILTER_BITS: u32 = 12;
const FILTER_MIN_WAYS: u32 = 32;
/// Ways `probe_sizes` scans before it asks the filter (first choice, not tuned).
const FILTER_AFTER: usize = 8;

#[inline(always)]
fn filter_slot(tag: u64) -> usize {
    (tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - FILTER_BITS)) as usize
}

/// Whether the filter counts a tag in the slot of any sought size's tag (`sought`: the sizes
/// whose tags are in `by_size`). If not, none of them is held.
#[inline(always)]
fn filter_may_hold(filter: &[u16], by_size: &[u64; TAG_SIZES], sought: u32) -> bool {
    let mut m = sought;
    let mut maybe = false;
    while m != 0 {
        let si = m.trailing_zeros() as usize & (TAG_SIZES - 1);
        m &= m - 1;
        maybe |= filter[filter_slot(by_size[si])] != 0;
    }
    maybe
}

impl Tlb {
    /// `sets` must be a power of two (validated by the machine loader).
    pub fn new(entries: u32, ways: u32, repl: Replacement, seed: u64) -> Tlb {
        let sets = (entries / ways).max(1);
        let slides = sets == 1 && ways >= FILTER_MIN_WAYS && repl == Replacement::Lru;
        let room = if slides { SLIDE_ROOM } else { 0 };
        Tlb {
            sets,
            ways,
            ways_usize: ways as usize,
            set_mask: sets as u64 - 1,
            tags: vec![EMPTY; (sets * ways) as usize + room],
            repl,
            plru_bits: if repl == Replacement::Plru { vec![0; sets as usize] } else { Vec::new() },
            rng: Rng::new(seed),
            wide: repl == Replacement::Lru && lru_set::wide_available(ways),
            filter: if sets == 1 && ways >= FILTER_MIN_WAYS { vec![0; 1 << FILTER_BITS] } else { Vec::new() },
            slides,
            window: room,
        }
    }

    /// Put `tag` at the front of a sliding set, whose least recent entry falls out (the caller
    /// has read it, and keeps the filter).
    #[inline(always)]
    fn slide_in(&mut self, tag: u64) {
        debug_assert!(self.slides);
        if self.window == 0 {
            self.tags.copy_within(0..self.ways_usize, SLIDE_ROOM);
            self.window = SLIDE_ROOM;
        }
        self.window -= 1;
        self.tags[self.window] = tag;
    }

    /// The slots that hold the sets (every set, in order).
    fn held(&self) -> &[u64] {
        &self.tags[self.window..self.window + (self.sets * self.ways) as usize]
    }

    /// The same structure without the tag filter (tests compare the two).
    pub fn without_filter(mut self) -> Tlb {
        self.filter = Vec::new();
        self
    }

    /// Keep the filter's counts as `tag_in` enters and `tag_out` leaves (EMPTY for none).
    #[inline(always)]
    fn filter_swap(&mut self, tag_in: u64, tag_out: u64) {
        if self.filter.is_empty() {
            return;
        }
        if tag_in != EMPTY {
            self.filter[filter_slot(tag_in)] += 1;
        }
        if tag_out != EMPTY {
            self.filter[filter_slot(tag_out)] -= 1;
        }
    }

    #[inline(always)]
    fn set_range(&self, vpn: u64) -> (usize, usize) {
        let s = (vpn & self.set_mask) as usize * self.ways_usize + self.window;
        (s, s + self.ways_usize)
    }

    /// Look up a tag; on a hit update the replacement state and return true.
    #[inline(always)]
    pub fn probe(&mut self, vpn: u64, tag: u64) -> bool {
        let (s, e) = self.set_range(vpn);
        let set = &mut self.tags[s..e];
        match self.repl {
            Replacement::Lru => {
                if set[0] == tag {
                    return true;
                }
                for k in 1..set.len() {
                    let t = set[k];
                    if t == tag {
                        // Move to front with a plain loop (no library call for a few words).
                        let mut j = k;
                        while j > 0 {
                            set[j] = set[j - 1];
                            j -= 1;
                        }
                        set[0] = tag;
                        return true;
                    }
                    if t == EMPTY {
                        return false;
                    }
                }
                false
            }
            Replacement::Plru => {
                for k in 0..set.len() {
                    if set[k] == tag {
                        let si = (vpn & self.set_mask) as usize;
                        plru_touch(&mut self.plru_bits[si], k, self.ways);
                        return true;
                    }
                }
                false
            }
            Replacement::Random => set.contains(&tag),
        }
    }

    /// `probe` for one tag per page size at once, in a structure with a single set (fully
    /// associative): one pass over its entries instead of one per size. `by_size[si]` is the
    /// tag sought at size index `si`, or `no_tag(si)` for a size not sought; each entry is
    /// compared only with the tag of its own size (a tag's low bits). Returns the size index
    /// found, with the same recency update as `probe` of that tag. Equals the `probe`s in turn
    /// when at most one of the tags is present (the MMU never holds two translations of one
    /// address: a promotion or demotion shoots down the old ones).
    #[inline]
    pub fn probe_sizes(&mut self, by_size: &[u64; TAG_SIZES], sought: u32) -> Option<u32> {
        debug_assert_eq!(self.sets, 1, "probe_sizes needs a single set");
        let w = self.window;
        let (set, filter) = (&mut self.tags[w..w + self.ways_usize], &self.filter);
        let lru = self.repl == Replacement::Lru;
        // The first ways, where an LRU structure keeps its recent entries and most hits are
        // found, are scanned before the filter is asked: a hit there costs no hashing.
        let head = set.len().min(FILTER_AFTER);
        let mut found = None;
        for (k, &t) in set.iter().enumerate() {
            if k == head && !filter.is_empty() && !filter_may_hold(filter, by_size, sought) {
                return None;
            }
            if by_size[(t & SIZE_MASK) as usize] == t {
                found = Some(k);
                break;
            }
            if lru && t == EMPTY {
                return None; // LRU keeps empty slots at the tail
            }
        }
        let k = found?;
        let si = (set[k] & SIZE_MASK) as u32;
        match self.repl {
            Replacement::Lru => set[..=k].rotate_right(1),
            Replacement::Plru => plru_touch(&mut self.plru_bits[0], k, self.ways),
            Replacement::Random => {}
        }
        Some(si)
    }

    /// Look up a tag and, on a miss, insert it at once: `probe` then `fill` in one pass over the
    /// set. Returns true on a hit. Same final state and result as the two calls.
    #[inline(always)]
    pub fn access(&mut self, vpn: u64, tag: u64) -> bool {
        // SAFETY: WIDE = false takes no AVX2 path.
        unsafe { self.access_in::<false>(vpn, tag) }
    }

    /// `access`, taking the AVX2 set operations where this structure can (`wide`) when WIDE.
    ///
    /// # Safety
    /// With WIDE, the caller must be compiled with AVX2 enabled (`#[target_feature]`) and run
    /// only where `lru_set::wide_available` said yes.
    #[inline(always)]
    pub unsafe fn access_in<const WIDE: bool>(&mut self, vpn: u64, tag: u64) -> bool {
        #[cfg(target_arch = "x86_64")]
        if WIDE && self.wide {
            let s = (vpn & self.set_mask) as usize * self.ways_usize;
            // SAFETY: the set index is below `sets`, so the set's ways lie inside `tags`
            // (sets * ways words).
            let set = unsafe { self.tags.get_unchecked_mut(s..s + self.ways_usize) };
            if set[0] == tag {
                return true;
            }
            let last = set[set.len() - 1];
            // SAFETY: `wide` is set only where the CPU has AVX2 and for set sizes it handles;
            // the caller's contract covers the rest.
            let hit = unsafe { lru_set::wide::access(set, tag) };
            if !hit {
                self.filter_swap(tag, last);
            }
            return hit;
        }
        if self.repl != Replacement::Lru {
            if self.probe(vpn, tag) {
                return true;
            }
            self.fill(vpn, tag);
            return false;
        }
        let (s, e) = self.set_range(vpn);
        if self.slides {
            return self.access_sliding(s, e, tag);
        }
        match lru_set::access(&mut self.tags[s..e], tag) {
            lru_set::Outcome::Hit => true,
            lru_set::Outcome::Miss { evicted } => {
                self.filter_swap(tag, evicted);
                false
            }
        }
    }

    /// `access` on a sliding set (a large fully associative LRU structure): its tag filter, when
    /// it keeps one, answers most misses without a scan; a miss slides the window, and a hit's
    /// recency shift is one memmove instead of a loop over up to 72 ways. Same result and set
    /// contents as `lru_set::access`.
    #[inline(never)]
    fn access_sliding(&mut self, s: usize, e: usize, tag: u64) -> bool {
        let set = &mut self.tags[s..e];
        if set[0] == tag {
            return true;
        }
        let maybe = self.filter.is_empty() || self.filter[filter_slot(tag)] != 0;
        let found = if maybe { position_chunked(set, tag) } else { None };
        match found {
            Some(k) => {
                set.copy_within(0..k, 1);
                set[0] = tag;
                true
            }
            None => {
                let evicted = set[set.len() - 1];
                self.slide_in(tag);
                self.filter_swap(tag, evicted);
                false
            }
        }
    }

    /// Insert a tag known to be absent. Returns the evicted tag, if any.
    #[inline]
    pub fn fill(&mut self, vpn: u64, tag: u64) -> Option<u64> {
        let victim = self.fill_in(vpn, tag);
        self.filter_swap(tag, victim.unwrap_or(EMPTY));
        victim
    }

    /// `fill` without the filter's update (the caller makes it).
    #[inline(always)]
    fn fill_in(&mut self, vpn: u64, tag: u64) -> Option<u64> {
        let (s, e) = self.set_range(vpn);
        let ways = self.ways;
        let si = (vpn & self.set_mask) as usize;
        let set = &mut self.tags[s..e];
        match self.repl {
            Replacement::Lru if self.slides => {
                let last = set[set.len() - 1];
                self.slide_in(tag);
                (last != EMPTY).then_some(last)
            }
            Replacement::Lru => {
                // Shift right by one from the front up to the first empty slot, or (a full
                // set, empty slots being kept at the tail) all but the last way, whose entry
                // falls out. One memmove instead of a chain of dependent moves: the 64-way
                // fully associative TLBs (amsqm09) shift 512 bytes per fill.
                let last = set.len() - 1;
                let (k, victim) = if set[last] != EMPTY { (last, Some(set[last])) } else { (set.iter().position(|&t| t == EMPTY).unwrap_or(last), None) };
                set.copy_within(0..k, 1);
                set[0] = tag;
                victim
            }
            Replacement::Plru => {
                let k = match set.iter().position(|&t| t == EMPTY) {
                    Some(k) => k,
                    None => plru_victim(self.plru_bits[si], ways),
                };
                let victim = set[k];
                set[k] = tag;
                plru_touch(&mut self.plru_bits[si], k, ways);
                (victim != EMPTY).then_some(victim)
            }
            Replacement::Random => {
                let k = match set.iter().position(|&t| t == EMPTY) {
                    Some(k) => k,
                    None => self.rng.below(ways as u64) as usize,
                };
                let victim = set[k];
                set[k] = tag;
                (victim != EMPTY).then_some(victim)
            }
        }
    }

    /// Remove a tag if present (a shootdown of one translation).
    pub fn invalidate(&mut self, vpn: u64, tag: u64) -> bool {
        if !self.filter.is_empty() && self.filter[filter_slot(tag)] == 0 {
            // Not held (a swap-out's victim seldom is): no scan of the ways.
            return false;
        }
        let (s, e) = self.set_range(vpn);
        let set = &mut self.tags[s..e];
        if let Some(k) = set.iter().position(|&t| t == tag) {
            if self.repl == Replacement::Lru {
                set.copy_within(k + 1.., k);
                let last = set.len() - 1;
                set[last] = EMPTY;
            } else {
                set[k] = EMPTY;
            }
            self.filter_swap(EMPTY, tag);
            true
        } else {
            false
        }
    }

    pub fn flush(&mut self) {
        self.tags.fill(EMPTY);
        self.plru_bits.fill(0);
        self.filter.fill(0);
    }

    /// The tags present, in no particular order.
    pub fn tags(&self) -> impl Iterator<Item = u64> + '_ {
        self.held().iter().copied().filter(|&t| t != EMPTY)
    }

    pub fn occupancy(&self) -> usize {
        self.held().iter().filter(|&&t| t != EMPTY).count()
    }
}

/// Whether the `wide` set operations are on in this process: the CPU has AVX2 and
/// `SUPERPAGER_SCALAR_TLB` is not set (it turns them off, to compare the two). Read when each
/// structure is built.
pub fn wide_set_operations() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::env::var_os("SUPERPAGER_SCALAR_TLB").is_none() && std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Tree-PLRU: node bits in heap order (root = bit 0); a bit of 0 means "the victim is on the
/// left". Touching way k points every node on its path away from it.
#[inline]
fn plru_touch(bits: &mut u64, way: usize, ways: u32) {
    let mut node = 0usize;
    let mut lo = 0usize;
    let mut span = ways as usize;
    while span > 1 {
        let half = span / 2;
        if way < lo + half {
            *bits |= 1 << node; // accessed left: victim goes right
            node = 2 * node + 1;
        } else {
            *bits &= !(1 << node);
            node = 2 * node + 2;
            lo += half;
        }
        span = half;
    }
}

#[inline]
fn plru_victim(bits: u64, ways: u32) -> usize {
    let mut node = 0usize;
    let mut lo = 0usize;
    let mut span = ways as usize;
    while span > 1 {
        let half = span / 2;
        if bits & (1 << node) != 0 {
            node = 2 * node + 2;
            lo += half;
        } else {
            node = 2 * node + 1;
        }
        span = half;
    }
    lo
}

/// The first way of `set` holding `tag`: four ways compared per step with one branch, since a
/// hit in a sliding set is often tens of ways deep (the 72-entry L1 TLBs on the Zipf trace).
#[inline(always)]
fn position_chunked(set: &[u64], tag: u64) -> Option<usize> {
    let mut chunks = set.chunks_exact(4);
    let mut base = 0;
    for c in &mut chunks {
        if (c[0] == tag) | (c[1] == tag) | (c[2] == tag) | (c[3] == tag) {
            return c.iter().position(|&t| t == tag).map(|k| base + k);
        }
        base += 4;
    }
    chunks.remainder().iter().position(|&t| t == tag).map(|k| base + k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recent() {
        let mut t = Tlb::new(2, 2, Replacement::Lru, 0);
        for v in [1u64, 2] {
            assert!(!t.probe(v, v));
            t.fill(v, v);
        }
        assert!(t.probe(1, 1)); // 1 is now most recent
        assert!(!t.probe(3, 3));
        assert_eq!(t.fill(3, 3), Some(2));
        assert!(t.probe(1, 1));
        assert!(!t.probe(2, 2));
    }

    #[test]
    fn set_index_uses_low_vpn_bits() {
        let mut t = Tlb::new(4, 2, Replacement::Lru, 0); // 2 sets
        for v in [0u64, 2, 4] {
            t.probe(v, v);
            t.fill(v, v);
        }
        // 0, 2, 4 all map to set 0: 0 was evicted; 1 (set 1) is untouched.
        assert!(!t.probe(0, 0));
        assert!(t.probe(4, 4));
        assert_eq!(t.occupancy(), 2);
    }

    #[test]
    fn plru_never_evicts_the_most_recent() {
        let mut t = Tlb::new(8, 8, Replacement::Plru, 0);
        for v in 0..8u64 {
            t.fill(v, v);
        }
        for step in 0..100u64 {
            let hot = step % 8;
            assert!(
                t.probe(hot, hot) || {
                    t.fill(hot, hot);
                    true
                }
            );
            let v = 100 + step;
            let ev = t.fill(v, v);
            assert_ne!(ev, Some(hot));
        }
    }

    #[test]
    fn access_equals_probe_then_fill() {
        use crate::trace::gen::Rng;
        // 72 and 64 ways, fully associative: the sliding path (`access_sliding`).
        for (entries, ways, repl) in [
            (64, 4, Replacement::Lru),
            (16, 16, Replacement::Lru),
            (72, 72, Replacement::Lru),
            (64, 64, Replacement::Lru),
            (8, 8, Replacement::Plru),
            (8, 2, Replacement::Random),
        ] {
            let mut a = Tlb::new(entries, ways, repl, 3);
            let mut b = Tlb::new(entries, ways, repl, 3).without_filter();
            let mut rng = Rng::new(9);
            for _ in 0..20_000 {
                let v = rng.below(100);
                let hit_b = b.probe(v, v);
                if !hit_b {
                    b.fill(v, v);
                }
                assert_eq!(a.access(v, v), hit_b);
            }
            assert_eq!(a.held(), b.held());
            if !a.filter.is_empty() {
                // The filter counts exactly the tags held.
                let mut counts = vec![0u16; a.filter.len()];
                a.tags().for_each(|t| counts[filter_slot(t)] += 1);
                assert_eq!(a.filter, counts, "{entries}x{ways}");
            }
        }
    }

    /// The AVX2 set operations against the scalar ones: same hit or miss on every access and
    /// the same set contents, in the same order, after each one (with shootdowns and flushes
    /// between, which both layouts share).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_lru_equals_scalar_lru() {
        #[target_feature(enable = "avx2")]
        unsafe fn access_wide(t: &mut Tlb, vpn: u64, tag: u64) -> bool {
            // SAFETY: compiled with AVX2, called only after the CPU was checked for it.
            unsafe { t.access_in::<true>(vpn, tag) }
        }
        if !std::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        use crate::trace::gen::Rng;
        for (entries, ways) in [(4, 4), (64, 4), (8, 8), (32, 8), (12, 12), (1536, 12), (16, 16), (64, 16)] {
            let mut wide = Tlb::new(entries, ways, Replacement::Lru, 0);
            let mut scalar = Tlb::new(entries, ways, Replacement::Lru, 0);
            scalar.wide = false;
            assert!(wide.wide, "{entries}x{ways} should take the wide path here");
            let mut rng = Rng::new(ways as u64 + entries as u64);
            let universe = entries as u64 * 2;
            for step in 0..50_000 {
                let v = rng.below(universe);
                let tag = make_tag(1, v, 0);
                if rng.below(50) == 0 {
                    assert_eq!(wide.invalidate(v, tag), scalar.invalidate(v, tag));
                } else {
                    // SAFETY: AVX2 checked above.
                    let hit = unsafe { access_wide(&mut wide, v, tag) };
                    assert_eq!(hit, scalar.access(v, tag), "step {step}, {entries}x{ways}");
                }
                if step % 10_000 == 9_999 {
                    wide.flush();
                    scalar.flush();
                }
                let (s, e) = wide.set_range(v);
                assert_eq!(wide.tags[s..e], scalar.tags[s..e], "step {step}, {entries}x{ways}");
            }
            assert_eq!(wide.tags, scalar.tags);
        }
    }

    #[test]
    fn random_is_seeded() {
        let run = |seed| {
            let mut t = Tlb::new(4, 4, Replacement::Random, seed);
            (0..50u64).map(|v| t.fill(v, v)).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn invalidate_keeps_lru_order() {
        let mut t = Tlb::new(4, 4, Replacement::Lru, 0);
        for v in 0..4u64 {
            t.fill(v, v);
        }
        assert!(t.invalidate(2, 2));
        assert!(!t.probe(2, 2));
        assert_eq!(t.fill(9, 9), None); // the freed slot absorbs the fill
        assert_eq!(t.fill(10, 10), Some(0));
    }

    /// One pass for a tag per size gives what `probe` of each in turn gives, contents and
    /// replacement state included, when at most one of them is present: three policies, tags of
    /// four sizes for one address, random accesses over regions whose page size changes now and
    /// then (their cached translations shot down first, as the MMU does).
    #[test]
    fn probe_sizes_equals_probes_in_turn() {
        let shifts = [0u32, 3, 6, 9];
        for repl in [Replacement::Lru, Replacement::Plru, Replacement::Random] {
            let mut rng = crate::trace::gen::Rng::new(7);
            let (mut one, mut each) = (Tlb::new(16, 16, repl, 3), Tlb::new(16, 16, repl, 3));
            // The page size mapping each 512-page region.
            let mut size_of: Vec<usize> = (0..8).map(|_| rng.below(4) as usize).collect();
            for step in 0..20_000 {
                if rng.below(300) == 0 {
                    let r = rng.below(8);
                    for t in one.tags().collect::<Vec<_>>() {
                        let (_, vpn, si) = decode_tag(t);
                        if (vpn << shifts[si as usize]) >> 9 == r {
                            assert!(one.invalidate(0, t) && each.invalidate(0, t));
                        }
                    }
                    size_of[r as usize] = rng.below(4) as usize;
                }
                let page = rng.below(8 << 9);
                let tags: Vec<u64> = shifts.iter().enumerate().map(|(si, sh)| make_tag(1, page >> sh, si as u32)).collect();
                let want = tags.iter().position(|&t| each.probe(0, t));
                let mut by_size: [u64; TAG_SIZES] = std::array::from_fn(no_tag);
                by_size[..4].copy_from_slice(&tags);
                assert_eq!(one.probe_sizes(&by_size, 0b1111), want.map(|i| i as u32), "{repl:?} step {step}");
                assert_eq!(one.held(), each.held(), "{repl:?} step {step}");
                assert_eq!(one.plru_bits, each.plru_bits, "{repl:?} step {step}");
                if want.is_none() {
                    let t = tags[size_of[(page >> 9) as usize]];
                    assert_eq!(one.fill(0, t), each.fill(0, t));
                }
            }
        }
    }

    /// The chunked search finds the first matching way, as a plain scan does, whatever the
    /// set's length (remainders past the last whole chunk included) and wherever the tag sits.
    #[test]
    fn chunked_position_equals_plain_position() {
        let mut rng = Rng::new(17);
        for len in 0..=21usize {
            for _ in 0..500 {
                let set: Vec<u64> = (0..len).map(|_| rng.below(8)).collect();
                let tag = rng.below(9);
                assert_eq!(position_chunked(&set, tag), set.iter().position(|&t| t == tag), "{set:?}, tag {tag}");
            }
        }
    }

    /// A sliding set (a large fully associative LRU structure) against a plain array shifted on
    /// every miss, the layout it replaces: the same answers and the same entries in the same
    /// order after every access, fill, shootdown and flush, over enough misses that the window
    /// is copied back to its array's end many times.
    #[test]
    fn sliding_set_equals_shifting_set() {
        for ways in [32u32, 72] {
            let mut t = Tlb::new(ways, ways, Replacement::Lru, 1);
            assert!(t.slides);
            let mut plain = vec![EMPTY; ways as usize];
            let mut rng = Rng::new(5);
            let mut misses = 0;
            for step in 0..50_000 {
                let tag = rng.below(3 * ways as u64);
                match rng.below(100) {
                    0..=69 => {
                        let want = lru_set::access(&mut plain, tag) == lru_set::Outcome::Hit;
                        misses += !want as usize;
                        assert_eq!(t.access(0, tag), want, "{ways} ways, step {step}");
                    }
                    70..=89 => {
                        let hit = t.probe(0, tag);
                        assert_eq!(hit, plain.contains(&tag), "{ways} ways, step {step}");
                        if !hit {
                            let last = plain[plain.len() - 1];
                            lru_set::access(&mut plain, tag);
                            assert_eq!(t.fill(0, tag), (last != EMPTY).then_some(last), "{ways} ways, step {step}");
                        } else {
                            lru_set::access(&mut plain, tag);
                        }
                    }
                    90..=98 => {
                        let at = plain.iter().position(|&x| x == tag);
                        if let Some(k) = at {
                            plain.remove(k);
                            plain.push(EMPTY);
                        }
                        assert_eq!(t.invalidate(0, tag), at.is_some(), "{ways} ways, step {step}");
                    }
                    _ => {
                        t.flush();
                        plain.fill(EMPTY);
                    }
                }
                assert_eq!(t.held(), &plain[..], "{ways} ways, step {step}");
            }
            assert!(misses > 4 * SLIDE_ROOM, "{ways} ways: only {misses} misses");
        }
    }

    /// The tag filter of a 64-way fully associative structure changes no answer and no
    /// content: the same random mix of multi-size probes, fills, accesses, shootdowns and
    /// flushes on a structure with it and one without, under each replacement policy, and the
    /// filter's counts always equal the tags held.
    #[test]
    fn tag_filter_changes_nothing() {
        let shifts = [0u32, 1, 2, 3, 4, 5, 6];
        for repl in [Replacement::Lru, Replacement::Plru, Replacement::Random] {
            let mut rng = crate::trace::gen::Rng::new(11);
            let mut with = Tlb::new(64, 64, repl, 5);
            let mut without = Tlb::new(64, 64, repl, 5).without_filter();
            assert!(!with.filter.is_empty() && without.filter.is_empty());
            for step in 0..100_000 {
                let asid = rng.below(3) as u16;
                let page = rng.below(1 << 9);
                let si = rng.below(7) as usize;
                let tag = make_tag(asid, page >> shifts[si], si as u32);
                match rng.below(100) {
                    0..=59 => {
                        // Probe every size at once; on a miss, load the page at one size (at
                        // most one size of an address is ever held, as in the MMU).
                        let sought = 0b111_1111u32;
                        let mut by_size: [u64; TAG_SIZES] = std::array::from_fn(no_tag);
                        for (k, sh) in shifts.iter().enumerate() {
                            by_size[k] = make_tag(asid, page >> sh, k as u32);
                        }
                        let got = with.probe_sizes(&by_size, sought);
                        assert_eq!(got, without.probe_sizes(&by_size, sought), "{repl:?} step {step}");
                        if got.is_none() {
                            let t = make_tag(asid, page >> shifts[0], 0);
                            assert_eq!(with.fill(0, t), without.fill(0, t));
                        }
                    }
                    60..=79 => {
                        let t = make_tag(asid, page, 0);
                        assert_eq!(with.access(0, t), without.access(0, t), "{repl:?} step {step}");
                    }
                    80..=98 => assert_eq!(with.invalidate(0, tag), without.invalidate(0, tag)),
                    _ => {
                        with.flush();
                        without.flush();
                    }
                }
                assert_eq!(with.held(), without.held(), "{repl:?} step {step}");
            }
            let mut counted = vec![0u16; 1 << FILTER_BITS];
            for t in with.tags() {
                counted[filter_slot(t)] += 1;
            }
            assert_eq!(counted, with.filter, "{repl:?}: the filter counts the tags held");
        }
    }
}
