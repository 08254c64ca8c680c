//! CLOCK (second chance; Corbató 1968): pages sit on a ring in insertion order; the hand evicts
//! the first page whose referenced bit is clear, clearing the bits it passes.

use super::{PageRef, Replacement, Sees, Victim};
use crate::fasthash::FastMap;
use std::collections::VecDeque;

#[derive(Default)]
pub struct Clock {
    /// The ring; entries whose page left (or was re-inserted) are skipped when reached.
    ring: VecDeque<(PageRef, u64)>,
    /// Live pages: their referenced bit and the generation of their ring entry.
    live: FastMap<PageRef, (bool, u64)>,
    generation: u64,
    /// Pages whose bit the hand cleared, while `report` is on.
    cleared: Vec<PageRef>,
    report: bool,
    sees: Sees,
}

impl Clock {
    /// Clock hearing of the references `sees` names.
    pub fn seeing(sees: Sees) -> Clock {
        Clock { sees, ..Default::default() }
    }
}

impl Replacement for Clock {
    fn name(&self) -> String {
        "clock".into()
    }
    fn on_insert(&mut self, p: PageRef) {
        self.generation += 1;
        self.live.insert(p, (false, self.generation));
        self.ring.push_back((p, self.generation));
    }
    fn on_reference(&mut self, p: PageRef) {
        if let Some(e) = self.live.get_mut(&p) {
            e.0 = true;
        }
    }
    fn on_remove(&mut self, p: PageRef) {
        self.live.remove(&p);
        // Drop stale ring entries when they dominate, so the ring stays bounded.
        if self.ring.len() > 2 * self.live.len() + 64 {
            let live = &self.live;
            self.ring.retain(|(q, g)| live.get(q).is_some_and(|e| e.1 == *g));
        }
    }
    fn victim(&mut self) -> Option<Victim> {
        while let Some((p, g)) = self.ring.pop_front() {
            match self.live.get_mut(&p) {
                Some(e) if e.1 == g => {
                    if e.0 {
                        e.0 = false;
                        self.ring.push_back((p, g));
                        if self.report {
                            self.cleared.push(p);
                        }
                    } else {
                        self.live.remove(&p);
                        return Some(Victim::whole(p));
                    }
                }
                _ => {} // stale
            }
        }
        None
    }
    fn len(&self) -> usize {
        self.live.len()
    }
    fn sees_every_reference(&self) -> bool {
        self.sees == Sees::Every
    }
    fn report_cleared(&mut self, on: bool) {
        self.report = on;
        self.cleared.clear();
    }
    fn drain_cleared(&mut self, out: &mut Vec<PageRef>) {
        out.append(&mut self.cleared);
    }
}
