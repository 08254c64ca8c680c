//! Page replacement (which resident page to evict under memory pressure) is its own pluggable
//! part, so that superpage-aware replacement (AMSQM) can be compared with CLOCK, LRU and ARC
//! under the same superpage policy.
//!
//! Replacement sees mappings of anonymous memory (a process, a start address, a page size): it
//! hears when one becomes resident, when the hardware would set its accessed bit (at every page
//! walk that resolves it: the OS learns of references only through accessed bits and faults),
//! and when it leaves; it names a victim when the OS must swap something out. The page cache
//! keeps its own CLOCK (os/pagecache.rs) and is reclaimed first.

pub mod clock;
pub mod lru;

use crate::error::{Error, Result};

/// A resident page as replacement sees it: its process, start address and size index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageRef {
    pub pid: u32,
    pub start: u64,
    pub size_idx: u32,
}

pub trait Replacement: Send {
    fn name(&self) -> String;
    /// A page became resident.
    fn on_insert(&mut self, p: PageRef);
    /// A resident page was referenced (its accessed bit was set by a page walk).
    fn on_reference(&mut self, p: PageRef);
    /// A page left memory for another reason (unmap, exit, promotion, demotion).
    fn on_remove(&mut self, p: PageRef);
    /// Choose a victim and forget it, or None if nothing is evictable.
    fn victim(&mut self) -> Option<PageRef>;
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
}

pub const NAMES: [&str; 2] = ["clock", "lru"];

pub fn build(name: &str) -> Result<Box<dyn Replacement>> {
    match name {
        "clock" => Ok(Box::new(clock::Clock::default())),
        "lru" => Ok(Box::new(lru::Lru::default())),
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
        assert_eq!(r.victim(), Some(p(1)));
        assert_eq!(r.victim(), Some(p(3)));
        assert_eq!(r.victim(), Some(p(0)));
        r.on_remove(p(2));
        assert_eq!(r.victim(), None);
    }

    #[test]
    fn clock_gives_referenced_pages_a_second_chance() {
        let mut r = build("clock").unwrap();
        for i in 0..4 {
            r.on_insert(p(i));
        }
        r.on_reference(p(0));
        r.on_reference(p(1));
        assert_eq!(r.victim(), Some(p(2)), "0 and 1 were referenced: spared once");
        assert_eq!(r.victim(), Some(p(3)));
        assert_eq!(r.victim(), Some(p(0)), "their bits were cleared as the hand passed");
        r.on_remove(p(1));
        assert_eq!(r.victim(), None);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let e = build("arc2").err().unwrap().to_string();
        assert!(e.contains("clock") && e.contains("lru"));
    }
}
