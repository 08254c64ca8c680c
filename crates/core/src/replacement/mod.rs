//! Page replacement (which resident page to evict under memory pressure) is its own pluggable
//! part, so that superpage-aware replacement (AMSQM) can be compared with CLOCK, LRU and ARC
//! under the same superpage policy.
//!
//! Replacement sees mappings of anonymous memory (a process, a start address, a page size): it
//! hears when one becomes resident, when the hardware would set its accessed bit (at every page
//! walk that resolves it: the OS learns of references only through accessed bits and faults),
//! and when it leaves; it names a victim when the OS must swap something out. The page cache
//! keeps its own CLOCK (os/pagecache.rs) and is reclaimed first.
//!
//! The OS owns one replacement (`Os::new`, built from a spec such as `clock` or, for a part
//! with parameters, `NAME:key=value`); nothing else drives it.

pub mod amsqm;
pub mod arc;
pub mod clock;
pub mod lists;
pub mod lru;

use crate::error::{Error, Result};
use crate::spec;

/// A resident page as replacement sees it: its process, start address and size index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PageRef {
    pub pid: u32,
    pub start: u64,
    pub size_idx: u32,
}

/// Hashed as one word, not three: the replacement policies look a page up at every TLB miss
/// and several times per swap-out. The size index goes into the start's low bits (clear in any
/// page start) and the pid mostly above the addresses page tables map (2^57); pages that still
/// collide cost a probe, never a wrong answer (equality compares the fields). No map keyed by
/// PageRef is ever iterated, so the hash changes no result.
impl std::hash::Hash for PageRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.start ^ (self.pid as u64).rotate_right(7) ^ self.size_idx as u64);
    }
}

/// Whether `on_remove(p)` is the OS unmapping the victim being evicted: ARC's and AMSQM's
/// `last`, the victim `victim` named, which the next insert clears. `victim` already made it a
/// ghost, and nothing since could have brought it back, so there is nothing to do and no need
/// to look it up.
#[inline]
pub(crate) fn unmapping_the_victim(last: Option<(PageRef, usize)>, p: PageRef) -> bool {
    last.is_some_and(|(v, _)| v == p)
}

/// A replacement's choice: the page to evict, and how much of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    pub page: PageRef,
    /// None: the OS's rule (the page whole; or, when the superpage policy demotes on eviction,
    /// demoted down to its first base page, which alone goes). Some: demote the page down to
    /// pages of this size, and evict only the piece holding that address.
    pub part: Option<Part>,
}

/// Part of a superpage to evict: the piece of size index `size_idx` that holds `va`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub va: u64,
    pub size_idx: u32,
}

impl Victim {
    /// Evict `page` by the OS's rule.
    pub fn whole(page: PageRef) -> Victim {
        Victim { page, part: None }
    }
}

pub trait Replacement: Send {
    fn name(&self) -> String;
    /// A page became resident.
    fn on_insert(&mut self, p: PageRef);
    /// A resident page was referenced (its accessed bit was set by a page walk).
    fn on_reference(&mut self, p: PageRef);
    /// A page left memory for another reason (unmap, exit, promotion, demotion).
    fn on_remove(&mut self, p: PageRef);
    /// Choose a victim and forget it, or None if nothing is evictable. The OS calls it when
    /// it must swap something out (direct reclaim, kswapd), and again if the page named is no
    /// longer what maps its address.
    fn victim(&mut self) -> Option<Victim>;
    /// Pages tracked.
    fn len(&self) -> usize;
    /// Start (or stop) keeping the pages whose referenced bit `victim` clears, for
    /// `drain_cleared` (Navarro et al.'s speculative demotion acts on them). Policies without
    /// reference bits keep nothing.
    fn report_cleared(&mut self, _on: bool) {}
    /// Move the pages whose referenced bit was cleared since the last call into `out`.
    fn drain_cleared(&mut self, _out: &mut Vec<PageRef>) {}
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The page `victim` just named could not be evicted after all (swap is full): take it
    /// back as it was. Policies without history just insert it again.
    fn restore(&mut self, p: PageRef) {
        self.on_insert(p);
    }
    /// Whether the fault that makes a page resident is the faulting access's one request, so
    /// that the page walk completing that access is not a second reference. False (the
    /// default): the walk sets the accessed bit as on hardware, and a policy reading bits sees
    /// it (CLOCK, LRU). ARC and AMSQM count requests, and say true.
    fn fault_is_the_reference(&self) -> bool {
        false
    }
    /// Whether the policy hears of every reference (`sees=every`), including those the TLB
    /// serves, as a trace-driven replacement study sees the reference string; false (the
    /// default, `sees=walks`): only faults and page walks, as an OS sees through accessed bits.
    fn sees_every_reference(&self) -> bool {
        false
    }
    /// The machine's page sizes, in base pages (ascending, the base page first), and the base
    /// page's bytes: told once, before any page (AMSQM keeps lists per size).
    fn set_page_sizes(&mut self, _pages: &[u64], _base_bytes: u64) {}
    /// The page `from` is about to be demoted: the pages inserted next are its pieces.
    fn note_demotion(&mut self, _from: PageRef) {}
    /// The population fraction at which the superpage policy should promote a reservation
    /// region, prefetching the rest, if this replacement sets it (AMSQM's threshold).
    fn promotion_threshold(&self) -> Option<f64> {
        None
    }
    /// Whether a write to a superpage demotes it into clean pieces (AMSQM): superpages are then
    /// mapped write-protected when made, and the first write demotes around the written page.
    fn demote_on_write(&self) -> bool {
        false
    }
    /// Whether a superpage that a write demoted is promoted again in place at the next reference
    /// to it (AMSQM's `repromote`: the seed checks for promotion at every request).
    fn repromote_after_write(&self) -> bool {
        false
    }
    /// The policy's own counters, if it keeps any (under `replacement.<name>.`).
    fn counters(&self) -> Option<&dyn crate::counters::Counters> {
        None
    }
    /// The policy's invariants (`Os::validate`). O(pages tracked).
    fn check(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}

pub const NAMES: [&str; 4] = ["clock", "lru", "arc", "amsqm"];

/// Which references a replacement policy hears of (every policy's `sees=` parameter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sees {
    /// Faults and page walks: what an OS learns through accessed bits. A reference the TLB
    /// serves leaves no trace, as on hardware.
    #[default]
    Walks,
    /// Every reference, TLB hits included (one per trace record: a record's same-page repeats
    /// are one request), as a trace-driven replacement simulator sees the reference string;
    /// the AMSQM seed's model (docs/AMSQM.md).
    Every,
}

/// `sees=walks|every` for the policies that take no other parameter.
pub const SEES_PARAM: &str = "sees=walks|every (which references the policy hears of: faults and page walks, as accessed bits show them, or every reference including TLB hits, as a trace-driven replacement study sees them; default walks)";

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct SeesOnly {
    sees: Sees,
}

/// Each replacement policy: name, one-line summary, parameters (`superpager policies`).
pub const REGISTRY: [(&str, &str, &str); 4] = [
    ("clock", "second chance over accessed bits (Corbató 1968); the default", SEES_PARAM),
    ("lru", "least recently used, by the references the OS sees (faults and page walks)", SEES_PARAM),
    ("arc", "Megiddo and Modha's Adaptive Replacement Cache: T1, T2 and ghost lists B1, B2 with an adaptive target (docs/AMSQM.md)", SEES_PARAM),
    ("amsqm", "Itshak and Wiseman's AMSQM: ARC per superpage size class, fraction buffers for demoted pieces, rank-based choice of the class that gives up memory; drives navarro's promotion threshold and demotes on writes (docs/AMSQM.md)", amsqm::PARAMS),
];

/// Build a replacement from `NAME[:key=value,...]`.
pub fn build(spec: &str) -> Result<Box<dyn Replacement>> {
    let (name, params) = spec::parse("replacement", spec, &NAMES.join(", "))?;
    // CLOCK, LRU and ARC take only `sees`; AMSQM reads it with its own parameters.
    let sees = || spec::from_params::<SeesOnly>("replacement", &name, &params).map(|p| p.sees);
    match name.as_str() {
        "clock" => sees().map(|s| Box::new(clock::Clock::seeing(s)) as Box<dyn Replacement>),
        "lru" => sees().map(|s| Box::new(lru::Lru::seeing(s)) as Box<dyn Replacement>),
        "arc" => sees().map(|s| Box::new(arc::Arc::seeing(s)) as Box<dyn Replacement>),
        "amsqm" => amsqm::Amsqm::build(&params).map(|a| Box::new(a) as Box<dyn Replacement>),
        o => Err(Error::usage(format!("unknown replacement '{o}'; available: {}", NAMES.join(", ")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u64) -> PageRef {
        PageRef { pid: 1, start: i << 12, size_idx: 0 }
    }

    #[test]
    fn lru_evicts_the_least_recently_referenced() {
        let mut r = build("lru").unwrap();
        for i in 0..4 {
            r.on_insert(p(i));
        }
        r.on_reference(p(0));
        r.on_reference(p(2));
        assert_eq!(r.victim().map(|v| v.page), Some(p(1)));
        assert_eq!(r.victim().map(|v| v.page), Some(p(3)));
        assert_eq!(r.victim().map(|v| v.page), Some(p(0)));
        r.on_remove(p(2));
        assert_eq!(r.victim().map(|v| v.page), None);
    }

    #[test]
    fn clock_gives_referenced_pages_a_second_chance() {
        let mut r = build("clock").unwrap();
        for i in 0..4 {
            r.on_insert(p(i));
        }
        r.on_reference(p(0));
        r.on_reference(p(1));
        assert_eq!(r.victim().map(|v| v.page), Some(p(2)), "0 and 1 were referenced: spared once");
        assert_eq!(r.victim().map(|v| v.page), Some(p(3)));
        assert_eq!(r.victim().map(|v| v.page), Some(p(0)), "their bits were cleared as the hand passed");
        r.on_remove(p(1));
        assert_eq!(r.victim().map(|v| v.page), None);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn specs_take_no_unknown_parameters() {
        assert_eq!(build("clock:").unwrap().name(), "clock");
        let e = build("lru:depth=4").err().unwrap().to_string();
        assert!(e.contains("replacement lru: unknown parameter 'depth'"), "{e}");
        let e = build("arc:sees=all").err().unwrap().to_string();
        assert!(e.contains("replacement arc: sees=all"), "{e}");
        for name in NAMES {
            assert!(!build(name).unwrap().sees_every_reference(), "{name}: walks by default");
            assert!(build(&format!("{name}:sees=every")).unwrap().sees_every_reference(), "{name}");
        }
        let e = build(":x=1").err().unwrap().to_string();
        assert!(e.contains("empty replacement name"), "{e}");
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let e = build("arc2").err().unwrap().to_string();
        assert!(e.contains("clock") && e.contains("lru"));
    }
}
