//! OFFLINE (Romer et al. §5): a greedy, iterative approximation of the best *static* set of
//! superpages for a whole trace (choosing the optimal set is NP-complete, by reduction from
//! set cover). Superpages in the set exist from the start and each pays the worst-case copy.
//!
//! Each planning pass runs the trace with the current set mapped and charges every potential
//! superpage with the misses it would have saved (prefetch plus capacity charges, §4.2, a
//! miss counted once per superpage). A candidate's benefit is its charges times the miss cost;
//! its cost is the copy, `copy_cycles_per_kib` x KB. Candidates whose benefit exceeds their
//! cost join the set, best benefit/cost ratio first, none overlapping another chosen in the
//! same pass; then the miss stream is recomputed with the new set. Planning stops when no
//! candidate pays, or after `passes` passes.

use super::Romer;
use std::collections::{BTreeMap, HashMap};

/// Charges of each potential superpage after a pass: (asid, start, level) -> (prefetch,
/// capacity, referenced base pages).
pub type Charges = HashMap<(u16, u64, usize), (u64, u64, u64)>;

/// The superpages to make at first touch: per address space, start -> (level, end).
#[derive(Clone, Debug, Default)]
pub struct Plan {
    regions: BTreeMap<(u16, u64), (usize, u64)>,
}

impl Plan {
    /// The planned superpage containing `va` in `asid`, if any: its level.
    pub fn level_at(&self, asid: u16, va: u64) -> Option<usize> {
        let (&(a, _start), &(level, end)) = self.regions.range(..=(asid, va)).next_back()?;
        (a == asid && va < end).then_some(level)
    }

    pub fn len(&self) -> usize {
        self.regions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Add a superpage, replacing the planned ones inside it.
    fn add(&mut self, asid: u16, start: u64, level: usize, bytes: u64) {
        let inner: Vec<(u16, u64)> = self.regions.range((asid, start)..(asid, start + bytes)).map(|(k, _)| *k).collect();
        for k in inner {
            self.regions.remove(&k);
        }
        self.regions.insert((asid, start), (level, start + bytes));
    }

    /// Whether a planned superpage already covers [start, start + bytes) or part of it
    /// from outside (an ancestor).
    fn covered(&self, asid: u16, start: u64) -> bool {
        self.level_at(asid, start).is_some()
    }
}

impl Romer {
    /// OFFLINE, after planning pass `pass` ran the whole trace (`Policy::end_planning_pass`):
    /// add the superpages that pay for their copy to the plan, and become a fresh policy for
    /// the next pass (true) or, when none was added or the passes are spent, for the measured
    /// run (false).
    pub(super) fn end_offline_pass(&mut self, pass: u32) -> bool {
        let mut plan = self.plan.take().unwrap_or_default();
        let added = self.choose(&mut plan);
        let more = added > 0 && pass + 1 < self.planning_passes;
        let mut next = Romer::from_params(&self.params, &self.sizes).expect("the parameters built this policy once");
        if more {
            next.measure_with(plan);
        } else {
            next.planning = false;
            next.offline_passes = pass + 1;
            next.run_with(plan);
        }
        *self = next;
        more
    }

    /// Add this pass's paying candidates to `plan`, best benefit/cost first, none overlapping
    /// another chosen in the same pass. Returns how many were added.
    fn choose(&mut self, plan: &mut Plan) -> usize {
        let charges = self.final_charges();
        let copy = self.copy_cycles_per_kib();
        let miss = self.miss_cycles();
        // Candidates that pay for their copy, best ratio first.
        let mut cands: Vec<(f64, u16, u64, usize)> = Vec::new();
        for (&(asid, start, level), &(p, c, _refd)) in &charges {
            let benefit = (p + c) as f64 * miss;
            let cost = copy * (self.level_bytes(level) >> 10) as f64;
            if benefit > cost && !plan.covered(asid, start) {
                cands.push((benefit / cost, asid, start, level));
            }
        }
        // Deterministic order: ratio descending, then larger first, then address.
        cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.3.cmp(&a.3)).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut chosen: Vec<(u16, u64, u64)> = Vec::new();
        for &(_, asid, start, level) in &cands {
            let bytes = self.level_bytes(level);
            if chosen.iter().any(|&(a, s, b)| a == asid && start < s + b && s < start + bytes) {
                continue;
            }
            chosen.push((asid, start, bytes));
            plan.add(asid, start, level, bytes);
        }
        chosen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_finds_the_region_containing_an_address() {
        let mut p = Plan::default();
        p.add(1, 0x10000, 4, 0x10000);
        assert_eq!(p.level_at(1, 0x1ffff), Some(4));
        assert_eq!(p.level_at(1, 0x20000), None);
        assert_eq!(p.level_at(2, 0x10000), None);
        p.add(1, 0, 5, 0x20000); // a larger one replaces it
        assert_eq!(p.len(), 1);
        assert_eq!(p.level_at(1, 0x8000), Some(5));
    }
}
