//! AMSQM, Adaptive Multiple Super-page Queue Management (Itshak and Wiseman, IJIDS 2009;
//! ../shared/notes/seeds-trident-solomon-amsqm.md, D3): ARC per superpage size class, with a
//! buffer for demoted pieces, and a rank that decides which class gives up memory.
//!
//! Per size class i (the machine's page sizes, class 0 the base page; size_i in base pages):
//! - T1^i, T2^i: resident units of class i referenced once, and more than once, recently;
//! - B1^i, B2^i: ghosts of units of class i evicted from T1^i and T2^i (or from Q_i);
//! - Q_i: the fraction buffer, resident pieces of demoted superpages (FCFS; a reference moves a
//!   piece to T2^i);
//! - P_i: ARC's adaptive target size of T1^i; s_i: the class's target size in units (grown by
//!   a hot ghost hit in B2^i); c_i: its resident units, |T1^i| + |T2^i| + |Q_i|;
//! - count(x): a saturating reference count, aged when it reaches bound_i = β·size_i/size_0
//!   (reset to γ·bound_i).
//!
//! At reclaim the class that gives up memory is the one of highest rank
//! rank_i = α·dif_i + (1 − α)·rec_i, where dif_i = max(0, size_i·(c_i − s_i)) (base pages held
//! beyond the target, scaled by the largest over the classes) and rec_i is how old the class's
//! LRU unit is among the classes' LRU units (the oldest 1, the newest 0). Inside that class,
//! ARC's REPLACE with Q_i's LRU competing: the older of LRU(T1^i) and LRU(Q_i) goes to B1^i
//! when |T1^i| > P_i, else the older of LRU(T2^i) and LRU(Q_i) to B2^i. A unit is evicted
//! whole (a superpage is not demoted first).
//!
//! Promotion at `threshold` × size populated (prefetching the rest) is done by the superpage
//! policy that owns the reservations, `navarro`, which reads the threshold from here
//! (`Replacement::promotion_threshold`). Every decision where the seed's text is ambiguous or
//! lost, and how the OS's view of references shapes it, is in docs/AMSQM.md.

use super::lists::Lists;
use super::{PageRef, Part, Replacement, Sees, Victim};
use crate::error::{Error, Result};
use crate::spec::Params;

// A class's resident lists come first, so that ranking reads them as one slice.
const T1: usize = 0;
const T2: usize = 1;
const Q: usize = 2;
const B1: usize = 3;
const B2: usize = 4;
const PER_CLASS: usize = 5;
const _: () = assert!(T1 == 0 && T2 == 1 && Q == 2, "ranking reads T1, T2 and Q as one slice");
/// At most as many size classes as a machine has page sizes (mmu/machine.rs allows 16).
const MAX_CLASSES: usize = 16;

pub const PARAMS: &str = "alpha=A (weight of the class's excess over its target against its LRU's age when choosing the class that gives up memory, 0..1; default 0.5); \
beta=B (bound_i = B x size_i / size_0 caps a unit's reference count, at least 1; default 4); \
gamma=G (a count reaching its bound is reset to G x bound; a ghost hit in B2 with a count above 2G x bound is hot, 0..0.5; default 0.25); \
threshold=T (navarro promotes a reservation region once T of it is populated, prefetching the rest, 0..1; default 0.5); \
grow=hot|always (the seed's count reset and s_i += 1 after a B2 ghost hit: only in the hot branch, our reading, or after either branch, as printed; default hot); \
write_demote=true|false (a write to a superpage demotes it, one size at a time around the written page, into clean pieces that go to the fraction buffers; default true, the seed's); \
repromote=true|false (a superpage a write demoted is promoted again in place at the next reference to it, as the seed's promotion check at every request would, or stays demoted; default false: the write-and-promote-again cycle multiplies TLB misses, docs/AMSQM.md); \
new_to=t1|t2 (where a unit with no history enters while memory has room: T1, as ARC does, or T2, as the seed's Allocate prints it; default t1); \
sees=walks|every (which references it hears of: faults and page walks, as accessed bits show them, or every reference including TLB hits, as the seed's trace-driven simulator sees them; default walks)";

/// When a B2 ghost hit grows its class's target (the seed's lost indentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grow {
    Hot,
    Always,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct AmsqmParams {
    #[serde(deserialize_with = "crate::spec::probability")]
    alpha: f64,
    #[serde(deserialize_with = "crate::spec::non_negative")]
    beta: f64,
    #[serde(deserialize_with = "crate::spec::non_negative")]
    gamma: f64,
    #[serde(deserialize_with = "crate::spec::probability")]
    threshold: f64,
    grow: Grow,
    write_demote: bool,
    repromote: bool,
    new_to: NewTo,
    sees: Sees,
}

/// Where a unit with no history enters while memory has room (the seed's Allocate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NewTo {
    /// T1, as ARC places a miss (ours).
    T1,
    /// T2's MRU end, as the seed's Allocate prints it.
    T2,
}

impl Default for AmsqmParams {
    /// The seed's best values (§5: α = 0.5, β = 4, γ = 0.25, threshold = 0.5).
    fn default() -> Self {
        AmsqmParams {
            alpha: 0.5,
            beta: 4.0,
            gamma: 0.25,
            threshold: 0.5,
            grow: Grow::Hot,
            write_demote: true,
            repromote: false,
            new_to: NewTo::T1,
            sees: Sees::Walks,
        }
    }
}

crate::counters! {
    #[derive(Clone, Debug, Default)]
    pub struct AmsqmCounters {
        /// References the OS saw to resident units, by the list that held them.
        pub hits_t1: u64 = "replacement.amsqm.hits_t1",
        pub hits_t2: u64 = "replacement.amsqm.hits_t2",
        pub hits_q: u64 = "replacement.amsqm.hits_q",
        pub ghost_hits_b1: u64 = "replacement.amsqm.ghost_hits_b1",
        pub ghost_hits_b2: u64 = "replacement.amsqm.ghost_hits_b2",
        /// B2 ghost hits whose count was above 2γ·bound: the class's target grew.
        pub hot_ghost_hits: u64 = "replacement.amsqm.hot_ghost_hits",
        pub misses: u64 = "replacement.amsqm.misses",
        /// Pieces of demoted superpages put in a fraction buffer Q_i.
        pub demoted_pieces: u64 = "replacement.amsqm.demoted_pieces",
        /// Counts that reached their bound and were aged to γ·bound.
        pub counts_aged: u64 = "replacement.amsqm.counts_aged",
        /// Victims by the list they left, and how many were superpages.
        pub evict_t1: u64 = "replacement.amsqm.evict_t1",
        pub evict_t2: u64 = "replacement.amsqm.evict_t2",
        pub evict_q: u64 = "replacement.amsqm.evict_q",
        pub evict_superpages: u64 = "replacement.amsqm.evict_superpages",
        /// Victims taken from a class below its target (every class was).
        pub evict_under_target: u64 = "replacement.amsqm.evict_under_target",
        pub ghosts_dropped: u64 = "replacement.amsqm.ghosts_dropped",
        /// Memory size C learnt, in base pages.
        pub capacity: u64 = "replacement.amsqm.capacity",
    }
}

/// One size class's adaptive state.
#[derive(Clone, Copy, Debug, Default)]
struct Class {
    /// Base pages per unit.
    size: u64,
    /// Count bound β·size_i/size_0.
    bound: u32,
    /// ARC's target for |T1^i|.
    p: f64,
    /// Target size in units.
    s: f64,
}

pub struct Amsqm {
    lists: Lists,
    classes: Vec<Class>,
    alpha: f64,
    beta: f64,
    gamma: f64,
    threshold: f64,
    grow: Grow,
    write_demote: bool,
    repromote: bool,
    new_to: NewTo,
    sees: Sees,
    /// Memory size C in base pages, learnt as ARC learns it.
    c: u64,
    /// Resident base pages (Σ c_i·size_i).
    resident: u64,
    /// The superpage being demoted and its count: its pieces go to Q, with its count.
    demoting: Option<(PageRef, u32)>,
    /// Bytes of a base page (for a superpage's address range).
    base_bytes: u64,
    /// The unit made resident last: the page being faulted in, never the victim.
    fresh: Option<PageRef>,
    /// The last victim and the list it left, for `restore`; cleared by the next insert, so
    /// that while it is set the victim is a ghost (or gone) and `on_remove` can skip it.
    last: Option<(PageRef, usize)>,
    counters: AmsqmCounters,
}

impl Amsqm {
    pub fn build(params: &Params) -> Result<Amsqm> {
        let p: AmsqmParams = crate::spec::from_params("replacement", "amsqm", params)?;
        if p.beta < 1.0 {
            return Err(Error::usage(format!("replacement amsqm: beta={} must be at least 1", p.beta)));
        }
        if p.gamma > 0.5 {
            return Err(Error::usage(format!("replacement amsqm: gamma={} must be at most 0.5", p.gamma)));
        }
        let mut a = Amsqm {
            lists: Lists::default(),
            classes: Vec::new(),
            alpha: p.alpha,
            beta: p.beta,
            gamma: p.gamma,
            threshold: p.threshold,
            grow: p.grow,
            write_demote: p.write_demote,
            repromote: p.repromote,
            new_to: p.new_to,
            sees: p.sees,
            c: 0,
            resident: 0,
            demoting: None,
            base_bytes: 4096,
            fresh: None,
            last: None,
            counters: AmsqmCounters::default(),
        };
        a.set_page_sizes(&[1], 4096);
        Ok(a)
    }

    fn li(&self, class: usize, l: usize) -> usize {
        class * PER_CLASS + l
    }

    fn class_of(&self, p: &PageRef) -> usize {
        (p.size_idx as usize).min(self.classes.len() - 1)
    }

    /// Resident units of class i (c_i).
    fn units(&self, i: usize) -> usize {
        self.lists.len(self.li(i, T1)) + self.lists.len(self.li(i, T2)) + self.lists.len(self.li(i, Q))
    }

    /// A reference to the unit at node `n`: a hit if it is resident (to T2's MRU end, counted
    /// up), nothing for a ghost.
    fn hit_at(&mut self, n: u32) {
        let l = self.lists.list_at(n);
        let i = l / PER_CLASS;
        match l % PER_CLASS {
            T1 => self.counters.hits_t1 += 1,
            T2 => self.counters.hits_t2 += 1,
            Q => self.counters.hits_q += 1,
            _ => return,
        }
        self.lists.move_to_mru(n, self.li(i, T2));
        self.bump_at(n, i);
    }

    /// A reference: count(x) + 1, or aged to γ·bound at the bound.
    fn bump_at(&mut self, n: u32, i: usize) {
        let bound = self.classes[i].bound;
        let c = self.lists.aux_at(n);
        if c >= bound {
            self.lists.set_aux_at(n, (self.gamma * bound as f64) as u32);
            self.counters.counts_aged += 1;
        } else {
            self.lists.set_aux_at(n, c + 1);
        }
    }

    /// ARC's case IV upkeep inside class i, before a new unit enters it.
    fn trim(&mut self, i: usize) {
        let ci = self.units(i).max(1);
        let (t1, b1, b2) = (self.lists.len(self.li(i, T1)), self.lists.len(self.li(i, B1)), self.lists.len(self.li(i, B2)));
        let q = self.lists.len(self.li(i, Q));
        let total = ci + b1 + b2;
        if q + t1 + b1 >= ci && b1 > 0 {
            self.lists.pop_lru(self.li(i, B1));
            self.counters.ghosts_dropped += 1;
        } else if total >= 2 * ci && b2 > 0 {
            self.lists.pop_lru(self.li(i, B2));
            self.counters.ghosts_dropped += 1;
        }
    }

    /// The class that gives up memory and the list it gives from: the highest rank whose
    /// class has a unit to give (ties to the larger class, which frees more at once).
    ///
    /// Reclaim asks this once per victim, so it reads each class's three resident lists in one
    /// slice, keeps the classes with resident units in fixed arrays (it allocates nothing), and
    /// ranks only those.
    fn choose_victim_list(&self) -> Option<(usize, usize, usize)> {
        let mut class = [0usize; MAX_CLASSES];
        let mut dif = [0.0f64; MAX_CLASSES];
        let mut stamp = [0u64; MAX_CLASSES];
        let mut live = 0usize;
        let mut max_dif = 0.0f64;
        for (i, c) in self.classes.iter().enumerate() {
            let [(n1, a1), (n2, a2), (nq, aq)] = self.lists.lens_and_ages::<3>(self.li(i, T1));
            let units = n1 + n2 + nq;
            if units == 0 {
                continue;
            }
            // (Through i64: a signed conversion is one instruction, the same value below 2^53.)
            let d = (c.size as i64 as f64 * (units as i64 as f64 - c.s)).max(0.0);
            max_dif = max_dif.max(d);
            class[live] = i;
            dif[live] = d;
            // The age of the class's LRU unit: the oldest stamp among its resident lists.
            stamp[live] = a1.min(a2).min(aq);
            live += 1;
        }
        if live == 0 {
            return None;
        }
        let (class, dif, stamp) = (&class[..live], &dif[..live], &stamp[..live]);
        let mut rank = [0.0f64; MAX_CLASSES];
        let rank = &mut rank[..live];
        // The ranks, and the best as they come (ties to the later, larger class).
        let mut best = 0usize;
        for a in 0..live {
            let mine = stamp[a];
            let newer = stamp.iter().fold(0usize, |n, &s| n + (s > mine) as usize);
            let rec = if live > 1 { newer as i64 as f64 / (live - 1) as i64 as f64 } else { 1.0 };
            let d = if max_dif > 0.0 { dif[a] / max_dif } else { 0.0 };
            rank[a] = self.alpha * d + (1.0 - self.alpha) * rec;
            if rank[a] >= rank[best] {
                best = a;
            }
        }
        if let Some((from, first)) = self.release_list(class[best]) {
            return Some((class[best], from, first));
        }
        // Classes passed over because they had nothing to give (only the unit just made
        // resident): rare, so the next best is searched again rather than kept sorted.
        let mut passed = 1u32 << best;
        loop {
            let mut best: Option<usize> = None;
            for a in 0..live {
                if passed & (1 << a) == 0 && best.is_none_or(|b| rank[a] >= rank[b]) {
                    best = Some(a);
                }
            }
            let a = best?;
            if let Some((from, first)) = self.release_list(class[a]) {
                return Some((class[a], from, first));
            }
            passed |= 1 << a;
        }
    }

    /// Release in class i: the list to evict from (T1 or T2 by P_i, or Q when its LRU is
    /// older), passing over the unit just made resident (`fresh`: the page being faulted in,
    /// which the OS holds while it maps it). None if the class has nothing else.
    fn release_list(&self, i: usize) -> Option<(usize, usize)> {
        let (t1, t2, q) = (self.li(i, T1), self.li(i, T2), self.li(i, Q));
        let usable = |l: usize| self.lists.lru(l).is_some_and(|p| Some(p) != self.fresh);
        let over = self.lists.len(t1) as f64 > self.classes[i].p;
        let first = if (over && usable(t1)) || !usable(t2) { t1 } else { t2 };
        let from = match (usable(first).then(|| self.lists.lru_stamp(first)).flatten(), usable(q).then(|| self.lists.lru_stamp(q)).flatten()) {
            (Some(a), Some(b)) if b < a => q,
            (None, Some(_)) => q,
            (Some(_), _) => first,
            (None, None) => [t1, t2, q].into_iter().find(|&l| usable(l))?,
        };
        Some((from, first))
    }

    /// Per class, the lists from the MRU end: T1, T2, B1, B2, Q (tests).
    pub fn lists(&self, class: usize) -> [Vec<PageRef>; 5] {
        [T1, T2, B1, B2, Q].map(|l| self.lists.iter(self.li(class, l)).collect())
    }

    /// A unit's reference count (tests).
    pub fn count(&self, p: &PageRef) -> Option<u32> {
        self.lists.aux(p)
    }

    /// Class i's P_i and s_i (tests).
    pub fn targets(&self, class: usize) -> (f64, f64) {
        (self.classes[class].p, self.classes[class].s)
    }
}

impl Replacement for Amsqm {
    fn name(&self) -> String {
        "amsqm".into()
    }

    fn set_page_sizes(&mut self, pages: &[u64], base_bytes: u64) {
        self.base_bytes = base_bytes;
        self.classes =
            pages.iter().map(|&size| Class { size, bound: ((self.beta * size as f64 / pages[0] as f64).round() as u32).max(1), p: 0.0, s: 0.0 }).collect();
        self.lists = Lists::new(pages.len() * PER_CLASS);
    }

    fn on_insert(&mut self, x: PageRef) {
        self.last = None; // the victim's eviction is over (see `on_remove`)
        self.fresh = Some(x);
        let i = self.class_of(&x);
        let size = self.classes[i].size;
        // A piece of the superpage being demoted: into the fraction buffer.
        if let Some((d, count)) = self.demoting {
            let bytes = self.classes[self.class_of(&d)].size * self.base_bytes;
            if d.pid == x.pid && x.size_idx < d.size_idx && x.start >= d.start && x.start < d.start + bytes && self.lists.index_of(&x).is_none() {
                self.counters.demoted_pieces += 1;
                self.resident += size;
                let n = self.lists.push_mru(self.li(i, Q), x);
                self.lists.set_aux_at(n, count.min(self.classes[i].bound));
                return;
            }
            self.demoting = None;
        }
        let (b1, b2) = (self.lists.len(self.li(i, B1)) as f64, self.lists.len(self.li(i, B2)) as f64);
        // One probe of the page index; the steps below work on the node it found.
        let node = self.lists.index_of(&x).map(|n| {
            let l = self.lists.list_at(n);
            (n, l / PER_CLASS, l % PER_CLASS)
        });
        match node {
            Some((n, _, T1 | T2 | Q)) => {
                self.fresh = None; // as `on_reference` of the page just marked fresh
                self.hit_at(n)
            }
            Some((n, j, B1)) if j == i => {
                self.counters.ghost_hits_b1 += 1;
                let d = if b1 >= b2 { 1.0 } else { b2 / b1 };
                let ci = (self.units(i) + 1) as f64;
                self.classes[i].p = (self.classes[i].p + d).min(ci);
                self.resident += size;
                self.lists.move_to_mru(n, self.li(i, T2));
                self.bump_at(n, i);
            }
            Some((n, j, B2)) if j == i => {
                self.counters.ghost_hits_b2 += 1;
                let d = if b2 >= b1 { 1.0 } else { b1 / b2 };
                self.classes[i].p = (self.classes[i].p - d).max(0.0);
                let bound = self.classes[i].bound as f64;
                let hot = self.lists.aux_at(n) as f64 > 2.0 * self.gamma * bound;
                self.resident += size;
                self.lists.move_to_mru(n, self.li(i, T2));
                if hot {
                    self.counters.hot_ghost_hits += 1;
                }
                if hot || self.grow == Grow::Always {
                    // Grow class i: its target rises by a unit, and the count restarts.
                    self.classes[i].s += 1.0;
                    self.lists.set_aux_at(n, (self.gamma * bound) as u32);
                }
            }
            _ => {
                // A ghost of another class cannot match: a PageRef names its size.
                self.counters.misses += 1;
                self.trim(i);
                self.resident += size;
                // Memory has had room so far (no victim yet): the seed's Allocate.
                let l = if self.new_to == NewTo::T2 && self.c == 0 { T2 } else { T1 };
                let n = self.lists.push_mru(self.li(i, l), x);
                self.lists.set_aux_at(n, 0);
            }
        }
    }

    fn on_reference(&mut self, x: PageRef) {
        if self.fresh == Some(x) {
            self.fresh = None; // referenced again: its fault is long over
        }
        // One lookup for the whole hit: find, move to T2's MRU end, count.
        let Some(n) = self.lists.index_of(&x) else { return };
        self.hit_at(n);
    }

    fn on_remove(&mut self, x: PageRef) {
        if super::unmapping_the_victim(self.last, x) {
            return;
        }
        if let Some(l) = self.lists.remove_if(&x, |l| matches!(l % PER_CLASS, T1 | T2 | Q)) {
            self.resident -= self.classes[l / PER_CLASS].size;
        }
    }

    fn note_demotion(&mut self, from: PageRef) {
        self.demoting = Some((from, self.lists.aux(&from).unwrap_or(0)));
    }

    fn victim(&mut self) -> Option<Victim> {
        self.c = self.c.max(self.resident);
        self.counters.capacity = self.c;
        self.demoting = None;
        let (i, from, first) = self.choose_victim_list()?;
        if (self.units(i) as f64) < self.classes[i].s {
            self.counters.evict_under_target += 1;
        }
        let (t2, q) = (self.li(i, T2), self.li(i, Q));
        let n = self.lists.lru_index(from)?;
        let v = self.lists.page_at(n);
        let to = if from == t2 || (from == q && first == t2) { B2 } else { B1 };
        self.lists.move_to_mru(n, self.li(i, to));
        self.resident -= self.classes[i].size;
        // IncreaseBuffer's rule for the class that gave up a unit: c_r - 1, and its target
        // follows it down when it falls below (the seed's lost minus signs restored).
        if (self.units(i) as f64) < self.classes[i].s {
            self.classes[i].s = (self.classes[i].s - 1.0).max(0.0);
        }
        match from % PER_CLASS {
            T1 => self.counters.evict_t1 += 1,
            T2 => self.counters.evict_t2 += 1,
            _ => self.counters.evict_q += 1,
        }
        if i > 0 {
            self.counters.evict_superpages += 1;
        }
        self.last = Some((v, from));
        // Evict the unit whole: a superpage goes to swap as one page.
        Some(Victim { page: v, part: Some(Part { va: v.start, size_idx: v.size_idx }) })
    }

    fn restore(&mut self, p: PageRef) {
        match self.last.take() {
            Some((v, from)) if v == p => {
                self.lists.push_lru(from, p);
                self.resident += self.classes[self.class_of(&p)].size;
                match from % PER_CLASS {
                    T1 => self.counters.evict_t1 -= 1,
                    T2 => self.counters.evict_t2 -= 1,
                    _ => self.counters.evict_q -= 1,
                }
                if p.size_idx > 0 {
                    self.counters.evict_superpages -= 1;
                }
            }
            _ => self.on_insert(p),
        }
    }

    fn len(&self) -> usize {
        (0..self.classes.len()).map(|i| self.units(i)).sum()
    }

    fn sees_every_reference(&self) -> bool {
        self.sees == Sees::Every
    }
    fn fault_is_the_reference(&self) -> bool {
        true
    }

    fn promotion_threshold(&self) -> Option<f64> {
        Some(self.threshold)
    }

    fn demote_on_write(&self) -> bool {
        self.write_demote
    }

    fn repromote_after_write(&self) -> bool {
        self.write_demote && self.repromote
    }

    fn counters(&self) -> Option<&dyn crate::counters::Counters> {
        Some(&self.counters)
    }

    fn check(&self) -> std::result::Result<(), String> {
        self.lists.check()?;
        let held: u64 = (0..self.classes.len()).map(|i| self.units(i) as u64 * self.classes[i].size).sum();
        if held != self.resident {
            return Err(format!("amsqm: the lists hold {held} base pages of units, {} counted resident", self.resident));
        }
        if self.c > 0 && self.resident > self.c.max(self.resident) {
            return Err(format!("amsqm: Σ c_i·size_i = {} exceeds C = {}", self.resident, self.c));
        }
        for (i, k) in self.classes.iter().enumerate() {
            if k.p < 0.0 || k.s < 0.0 {
                return Err(format!("amsqm: class {i} has P = {} and s = {}", k.p, k.s));
            }
            for l in [T1, T2, B1, B2, Q] {
                if let Some(bad) = self.lists.iter(self.li(i, l)).find(|p| p.size_idx as usize != i) {
                    return Err(format!("amsqm: {bad:?} is listed in class {i}"));
                }
                if let Some(bad) = self.lists.iter(self.li(i, l)).find(|p| self.lists.aux(p).unwrap_or(0) > k.bound) {
                    return Err(format!("amsqm: {bad:?}'s count exceeds class {i}'s bound {}", k.bound));
                }
            }
        }
        Ok(())
    }
}
