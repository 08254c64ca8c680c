//! Page-walk caches: small caches of upper-level page-table entries, keyed by the address bits
//! above each level, that let a walk start below the top (the PML4E, PDPTE and PDE caches of
//! x86 walkers).
//!
//! One `Pwcs` serves the guest's walk (`Mmu::walk_refs`) and, on a nested machine with data
//! caches, another the host's walks of each guest-physical address (`Mmu::host_pwcs`): AMD's
//! walker caches the entries of both dimensions of a two-dimensional walk (Bhargava et al.,
//! ASPLOS 2008, "Accelerating two-dimensional page walks for virtualized systems": the Opteron's
//! page walk cache exploits the reuse of a 2D walk's entries).
//!
//! Invariants: the caches are sorted by level, lowest (the PDE cache) first; each holds entries
//! of its own level only, tagged by (asid, address >> its key shift).

use super::machine::PwcSpec;
use super::tlb::{make_tag, Replacement, Tlb};

#[derive(Clone, Debug)]
pub struct Pwcs {
    /// (page-table level, shift of the address bits that key it, cache), lowest level first.
    caches: Vec<(u8, u32, Tlb)>,
}

impl Pwcs {
    /// Caches as `specs` describe them, for tables whose level-1 entries map `2^base_shift`
    /// bytes and each level above `2^bits` times more; `seed` seeds their replacement.
    pub fn new(specs: &[PwcSpec], base_shift: u32, bits: u32, seed: u64) -> Pwcs {
        let mut specs = specs.to_vec();
        specs.sort_by_key(|p| p.level);
        let caches = specs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let key_shift = base_shift + bits * (p.level as u32 - 1);
                (p.level, key_shift, Tlb::new(p.sets * p.ways, p.ways, Replacement::Lru, seed + i as u64))
            })
            .collect();
        Pwcs { caches }
    }

    pub fn tlbs(&self) -> impl Iterator<Item = &Tlb> {
        self.caches.iter().map(|c| &c.2)
    }

    /// The level of the first entry a walk of `addr` from level `top` down to `leaf` must read:
    /// the caches are consulted deepest level first, the first hit decides, and each that missed
    /// on the way learns the entry the walk reads (`access` probes and, on a miss, fills in one
    /// pass). Adds the caches consulted to `hits` and `misses`.
    ///
    /// # Safety
    /// With WIDE, as for `Tlb::access_in`.
    #[inline(always)]
    pub unsafe fn start<const WIDE: bool>(&mut self, addr: u64, asid: u16, top: u8, leaf: u8, hits: &mut u64, misses: &mut u64) -> u8 {
        for (lvl, key_shift, pwc) in self.caches.iter_mut() {
            if *lvl <= leaf || *lvl > top {
                continue;
            }
            let key = addr >> *key_shift;
            // SAFETY: the caller's contract.
            if unsafe { pwc.access_in::<WIDE>(key, make_tag(asid, key, 0)) } {
                *hits += 1;
                return *lvl - 1;
            }
            *misses += 1;
        }
        top
    }

    /// Drop every entry (after unmapping page tables).
    pub fn flush(&mut self) {
        for (_, _, p) in self.caches.iter_mut() {
            p.flush();
        }
    }
}

/// A nested walk's caches of the host's entries and what they did (`pwc.host.hits|misses`).
/// The host's tables never change and are one address space (guest-physical memory), so
/// nothing flushes them and every entry is tagged asid 0.
#[derive(Clone, Debug)]
pub struct HostPwcs {
    pwcs: Pwcs,
    pub hits: u64,
    pub misses: u64,
}

impl HostPwcs {
    pub fn new(pwcs: Pwcs) -> HostPwcs {
        HostPwcs { pwcs, hits: 0, misses: 0 }
    }

    pub fn tlbs(&self) -> impl Iterator<Item = &Tlb> {
        self.pwcs.tlbs()
    }

    /// Where a host walk of guest-physical `gpa` from level `walk.0` down to `walk.1` starts
    /// (`Pwcs::start`).
    ///
    /// # Safety
    /// With WIDE, as for `Tlb::access_in`.
    #[inline(always)]
    pub unsafe fn start<const WIDE: bool>(&mut self, gpa: u64, walk: (u8, u8)) -> u8 {
        // SAFETY: the caller's contract.
        unsafe { self.pwcs.start::<WIDE>(gpa, 0, walk.0, walk.1, &mut self.hits, &mut self.misses) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x86-64's three caches (PML4E, PDPTE, PDE) over 4KB pages and 512-entry tables.
    fn x86() -> Pwcs {
        let spec = |level, sets, ways| PwcSpec { level, sets, ways };
        Pwcs::new(&[spec(4, 1, 4), spec(3, 2, 4), spec(2, 4, 8)], 12, 9, 7)
    }

    /// A walk from level 4 to the PTE: where it starts, and the (hits, misses) it counted.
    fn walk(p: &mut Pwcs, addr: u64) -> (u8, u64, u64) {
        let (mut h, mut m) = (0, 0);
        let s = unsafe { p.start::<false>(addr, 0, 4, 1, &mut h, &mut m) };
        (s, h, m)
    }

    #[test]
    fn a_walk_starts_below_the_deepest_entry_cached() {
        let mut p = x86();
        // Cold: all three miss and learn, the walk reads all four levels.
        assert_eq!(walk(&mut p, 0x4000_1000), (4, 0, 3));
        // The same 2MB: the PDE cache holds it, only the PTE is read.
        assert_eq!(walk(&mut p, 0x4000_5000), (1, 1, 0));
        // Another 2MB of the same 1GB: the PDE cache misses, the PDPTE cache hits.
        assert_eq!(walk(&mut p, 0x4060_0000), (2, 1, 1));
        // Another 1GB of the same 512GB: the PML4E cache.
        assert_eq!(walk(&mut p, 0x8000_0000), (3, 1, 2));
        // A walk to a 2MB leaf (level 2) does not consult the PDE cache.
        let (mut h, mut m) = (0, 0);
        assert_eq!(unsafe { p.start::<false>(0x4000_0000, 0, 4, 2, &mut h, &mut m) }, 2);
        assert_eq!((h, m), (1, 0), "the PDPTE cache's hit");
        // Flushed, everything is read again.
        p.flush();
        assert_eq!(walk(&mut p, 0x4000_5000), (4, 0, 3));
    }

    #[test]
    fn caches_above_the_tables_top_are_not_consulted() {
        // Three-level tables (the walk's top is 3): the PML4E cache has nothing to give.
        let mut p = x86();
        let (mut h, mut m) = (0, 0);
        assert_eq!(unsafe { p.start::<false>(0x1000, 0, 3, 1, &mut h, &mut m) }, 3);
        assert_eq!((h, m), (0, 2));
    }
}
