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
use crate::engine::{Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::mmu::machine::Machine;
use crate::policy::{parse_spec, Policy};
use crate::trace::spt::PrefetchReader;
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

/// Plan over `trace` for the OFFLINE policy `spec` on `machine`, then return the policy with
/// its plan, ready for the measured run. `progress(pass, fraction)` reports each pass.
pub fn planned(trace: &str, machine: &Machine, spec: &str, cfg: &EngineConfig, progress: &mut dyn FnMut(u32, f64)) -> Result<Box<dyn Policy>> {
    let (_, params) = parse_spec(spec)?;
    let mut plan = Plan::default();
    let template = Romer::from_params(&params, &machine.page_sizes)?;
    let passes = template.planning_passes();
    let mut ran = 0;
    for pass in 0..passes {
        ran += 1;
        let mut pol = Romer::from_params(&params, &machine.page_sizes)?;
        pol.measure_with(plan.clone());
        let mut e = Engine::new(machine.clone(), Box::new(pol), cfg.clone())?;
        let mut reader = PrefetchReader::open(trace, false)?;
        let span = reader.meta.file_len.saturating_sub(reader.meta.data_offset).max(1);
        let data0 = reader.meta.data_offset;
        while let Some(c) = reader.next()? {
            e.run_chunk(&c)?;
            progress(pass, (c.end_offset - data0) as f64 / span as f64);
            reader.give_back(c);
        }
        let pol = e
            .policy
            .as_any_mut()
            .and_then(|a| a.downcast_mut::<Romer>())
            .ok_or_else(|| Error::Sim("internal: the OFFLINE planning policy is not romer".into()))?;
        let charges = pol.final_charges();
        let copy = pol.copy_cycles_per_kib();
        let miss = pol.miss_cycles();
        // Candidates that pay for their copy, best ratio first.
        let mut cands: Vec<(f64, u16, u64, usize)> = Vec::new();
        for (&(asid, start, level), &(p, c, _refd)) in &charges {
            let benefit = (p + c) as f64 * miss;
            let cost = copy * (pol.level_bytes(level) >> 10) as f64;
            if benefit > cost && !plan.covered(asid, start) {
                cands.push((benefit / cost, asid, start, level));
            }
        }
        if cands.is_empty() {
            break;
        }
        // Deterministic order: ratio descending, then larger first, then address.
        cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.3.cmp(&a.3)).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut chosen: Vec<(u16, u64, u64)> = Vec::new();
        let mut added = 0;
        for &(_, asid, start, level) in &cands {
            let bytes = pol.level_bytes(level);
            if chosen.iter().any(|&(a, s, b)| a == asid && start < s + b && s < start + bytes) {
                continue;
            }
            chosen.push((asid, start, bytes));
            plan.add(asid, start, level, bytes);
            added += 1;
        }
        if added == 0 {
            break;
        }
    }
    let mut pol = Romer::from_params(&params, &machine.page_sizes)?;
    pol.offline_passes = ran;
    pol.run_with(plan);
    Ok(Box::new(pol))
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
