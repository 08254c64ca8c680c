//! ARC, the Adaptive Replacement Cache (Megiddo and Modha, FAST 2003), as the AMSQM seed
//! prints it (its §2; ../shared/notes/seeds-trident-solomon-amsqm.md, D3 1.0).
//!
//! Resident pages seen once recently are in T1, those seen at least twice in T2; B1 and B2
//! remember (as ghosts, no data) pages recently evicted from T1 and T2. `p`, the target size
//! of T1, grows on a hit in B1 (recency would have helped) and shrinks on a hit in B2
//! (frequency would have). The cache size C is what memory holds: the number of resident
//! pages when the OS first asks for a victim, and the most seen at any later request.
//!
//! How the OS drives it, and where that differs from the textbook loop (docs/AMSQM.md):
//! - a *request* is what the OS sees: the fault that makes a page resident (`on_insert`, a
//!   miss; the walk that completes the faulting access is the same request) and every later
//!   page walk that sets its accessed bit (`on_reference`, a hit); references served by the
//!   TLB are not seen, as on real hardware;
//! - REPLACE runs when the OS must free memory (`victim`), before the faulting page is known,
//!   so the tie rule "x in B2 and |T1| = p" cannot be applied: a tie evicts from T2;
//! - directory upkeep (ARC's case IV: drop the LRU of B1 when |T1| + |B1| reaches C, of B2
//!   when all four reach 2C) happens when a new page is inserted;
//! - units are the OS's pages: a superpage is one entry, as a base page is.

use super::lists::Lists;
use super::{PageRef, Replacement, Sees, Victim};

const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 2;
const B2: usize = 3;

crate::counters! {
    #[derive(Clone, Debug, Default)]
    pub struct ArcCounters {
        /// References to resident pages the OS saw, by the list that held them.
        pub hits_t1: u64 = "replacement.arc.hits_t1",
        pub hits_t2: u64 = "replacement.arc.hits_t2",
        /// Pages made resident while remembered in a ghost list (the adaptation steps).
        pub ghost_hits_b1: u64 = "replacement.arc.ghost_hits_b1",
        pub ghost_hits_b2: u64 = "replacement.arc.ghost_hits_b2",
        /// Pages made resident that no list remembered.
        pub misses: u64 = "replacement.arc.misses",
        /// Victims, by the list they left.
        pub evict_t1: u64 = "replacement.arc.evict_t1",
        pub evict_t2: u64 = "replacement.arc.evict_t2",
        /// Ghosts dropped to keep |L1| <= C and |L1| + |L2| <= 2C.
        pub ghosts_dropped: u64 = "replacement.arc.ghosts_dropped",
        /// The cache size C learnt (pages), and T1's target p (scaled by 1000), as they stand.
        pub capacity: u64 = "replacement.arc.capacity",
        pub target_t1_milli: u64 = "replacement.arc.target_t1_milli",
    }
}

#[derive(Default)]
pub struct Arc {
    lists: Lists,
    /// Target size of T1 (a real number: the B-hit steps are ratios).
    p: f64,
    /// Cache size C in pages (0 until the first victim is asked for).
    c: usize,
    /// The last victim and the list it left, for `restore`; cleared by the next insert, so
    /// that while it is set the victim is a ghost (or gone) and `on_remove` can skip it.
    last: Option<(PageRef, usize)>,
    counters: ArcCounters,
    sees: Sees,
}

impl Arc {
    pub fn new() -> Arc {
        Arc::seeing(Sees::Walks)
    }

    /// ARC hearing of the references `sees` names.
    pub fn seeing(sees: Sees) -> Arc {
        Arc { lists: Lists::new(4), sees, ..Default::default() }
    }

    fn resident(&self) -> usize {
        self.lists.len(T1) + self.lists.len(T2)
    }

    /// ARC's case IV upkeep before a new page enters T1.
    fn trim_directory(&mut self) {
        if self.c == 0 {
            return;
        }
        let l = &self.lists;
        if l.len(T1) + l.len(B1) >= self.c && l.len(B1) > 0 {
            self.lists.pop_lru(B1);
            self.counters.ghosts_dropped += 1;
        } else if l.total() >= 2 * self.c && l.len(B2) > 0 {
            self.lists.pop_lru(B2);
            self.counters.ghosts_dropped += 1;
        }
    }

    /// T1's target now (tests).
    pub fn target(&self) -> f64 {
        self.p
    }

    /// Pages of each list from the MRU end: T1, T2, B1, B2 (tests).
    pub fn lists(&self) -> [Vec<PageRef>; 4] {
        [T1, T2, B1, B2].map(|l| self.lists.iter(l).collect())
    }

    /// A reference to the page at node `n`: a hit if it is resident (to T2's MRU end),
    /// nothing for a ghost.
    fn hit_at(&mut self, n: u32) {
        match self.lists.list_at(n) {
            T1 => self.counters.hits_t1 += 1,
            T2 => self.counters.hits_t2 += 1,
            _ => return,
        }
        self.lists.move_to_mru(n, T2);
    }
}

impl Replacement for Arc {
    fn name(&self) -> String {
        "arc".into()
    }

    fn on_insert(&mut self, p: PageRef) {
        self.last = None; // the victim's eviction is over (see `on_remove`)
        let (b1, b2) = (self.lists.len(B1) as f64, self.lists.len(B2) as f64);
        // One probe of the page index; the steps below work on the node it found.
        let Some(n) = self.lists.index_of(&p) else {
            self.counters.misses += 1;
            self.trim_directory();
            self.lists.push_mru(T1, p);
            return;
        };
        match self.lists.list_at(n) {
            T1 | T2 => return self.hit_at(n),
            B1 => {
                // Recency would have kept it: give T1 more room.
                self.counters.ghost_hits_b1 += 1;
                let d = if b1 >= b2 { 1.0 } else { b2 / b1 };
                self.p = (self.p + d).min(self.c.max(self.resident()) as f64);
            }
            _ => {
                // Frequency would have kept it: give T2 more room.
                self.counters.ghost_hits_b2 += 1;
                let d = if b2 >= b1 { 1.0 } else { b1 / b2 };
                self.p = (self.p - d).max(0.0);
            }
        }
        self.counters.target_t1_milli = (self.p * 1000.0).round() as u64;
        self.lists.move_to_mru(n, T2);
    }

    fn on_reference(&mut self, p: PageRef) {
        if let Some(n) = self.lists.index_of(&p) {
            self.hit_at(n);
        }
    }

    fn on_remove(&mut self, p: PageRef) {
        if super::unmapping_the_victim(self.last, p) {
            return;
        }
        self.lists.remove_if(&p, |l| matches!(l, T1 | T2));
    }

    fn victim(&mut self) -> Option<Victim> {
        self.c = self.c.max(self.resident());
        self.counters.capacity = self.c as u64;
        let (t1, t2) = (self.lists.len(T1), self.lists.len(T2));
        // REPLACE: evict from T1 when it is over its target (or T2 is empty).
        let (from, to) = if t1 > 0 && (t1 as f64 > self.p || t2 == 0) { (T1, B1) } else { (T2, B2) };
        let n = self.lists.lru_index(from)?;
        let v = self.lists.page_at(n);
        self.lists.move_to_mru(n, to);
        if from == T1 {
            self.counters.evict_t1 += 1;
        } else {
            self.counters.evict_t2 += 1;
        }
        self.last = Some((v, from));
        Some(Victim::whole(v))
    }

    fn restore(&mut self, p: PageRef) {
        match self.last.take() {
            Some((v, from)) if v == p => {
                self.lists.push_lru(from, p);
                if from == T1 {
                    self.counters.evict_t1 -= 1;
                } else {
                    self.counters.evict_t2 -= 1;
                }
            }
            _ => self.on_insert(p),
        }
    }

    fn sees_every_reference(&self) -> bool {
        self.sees == Sees::Every
    }
    fn len(&self) -> usize {
        self.resident()
    }

    fn fault_is_the_reference(&self) -> bool {
        true
    }

    fn counters(&self) -> Option<&dyn crate::counters::Counters> {
        Some(&self.counters)
    }

    fn check(&self) -> Result<(), String> {
        self.lists.check()?;
        let l = &self.lists;
        if self.c > 0 && (l.len(T1) + l.len(B1) > self.c.max(self.resident()) + 1 || l.total() > 2 * self.c.max(self.resident()) + 1) {
            return Err(format!("arc: directory too large for C = {}: |T1| {} |T2| {} |B1| {} |B2| {}", self.c, l.len(T1), l.len(T2), l.len(B1), l.len(B2)));
        }
        if self.p < 0.0 || self.p > self.c.max(self.resident()) as f64 {
            return Err(format!("arc: target p = {} outside [0, C = {}]", self.p, self.c));
        }
        Ok(())
    }
}
