//! Page replacement (which resident page to evict under memory pressure) is its own pluggable
//! part, so that superpage-aware replacement (AMSQM) can be compared with CLOCK, LRU and ARC
//! under the same superpage policy. The trait is fixed here; the implementations arrive with
//! the OS model's memory pressure.

/// A resident page as replacement sees it: its process, start address and size index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRef {
    pub pid: u32,
    pub start: u64,
    pub size_idx: u32,
}

pub trait Replacement: Send {
    fn name(&self) -> String;
    /// A page became resident.
    fn on_insert(&mut self, p: PageRef);
    /// A resident page was referenced (sampled or at a TLB miss, as the policy prefers).
    fn on_reference(&mut self, p: PageRef);
    /// A page left memory for another reason (unmap, exit, promotion, demotion).
    fn on_remove(&mut self, p: PageRef);
    /// Choose a victim, or None if nothing is evictable.
    fn victim(&mut self) -> Option<PageRef>;
}
