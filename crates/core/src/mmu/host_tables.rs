//! The host's page tables of a nested machine, as the data caches see them (issue 24).
//!
//! A guest's walk reads guest entries, and the hardware translates each of their
//! guest-physical addresses, and the final one, by a walk of the host's tables (`Mmu::walk_refs`
//! counts them). With data caches those host references go through the caches like any other,
//! by the host-physical address of the entry read. The hypervisor's tables themselves are not
//! simulated: the host is taken to map guest memory in order, so its tables are one array of
//! 8-byte entries per level over guest-physical memory, placed above it. Neighbouring guest
//! pages then share host entry lines, as they do under a hypervisor that backs guest memory with
//! one large allocation (KVM's memslots); which host frames hold the tables is made up, and
//! with it only which cache sets they fall in.
//!
//! Invariants: level `l` (1 = last) covers `span(l)` bytes an entry; its array starts at
//! `base[l]`, after the level below's, the first at `memory` rounded up to a 4KB frame; `end()`
//! is past the top level's, and every entry address is below it for a guest-physical address
//! below `memory`.

/// Levels a host's tables can have (the machine's walk levels: 2 to 5).
const LEVELS: usize = 6;

#[derive(Clone, Debug)]
pub struct HostTables {
    base: [u64; LEVELS],
    shift: [u32; LEVELS],
    end: u64,
}

impl HostTables {
    /// Tables of `levels` levels of `2^bits` entries over `memory` bytes of guest-physical memory
    /// with `2^page_shift`-byte base pages.
    pub fn new(memory: u64, page_shift: u32, bits: u32, levels: u8) -> HostTables {
        let frame = 1u64 << page_shift;
        let mut base = [0u64; LEVELS];
        let mut shift = [0u32; LEVELS];
        let mut at = memory.div_ceil(frame) * frame;
        for l in 1..=(levels as usize).min(LEVELS - 1) {
            shift[l] = page_shift + bits * (l as u32 - 1);
            base[l] = at;
            let entries = memory.div_ceil(1u64 << shift[l]).max(1);
            at += (entries * 8).div_ceil(frame) * frame;
        }
        HostTables { base, shift, end: at }
    }

    /// The host-physical address of the level-`level` entry translating guest-physical `gpa`.
    #[inline(always)]
    pub fn entry(&self, gpa: u64, level: u8) -> u64 {
        let l = level as usize % LEVELS;
        self.base[l] + (gpa >> self.shift[l]) * 8
    }

    /// The entries a host walk reads to translate `gpa`, top level first: `walk` is
    /// (top, leaf) as `Mmu::host_walk` gives it.
    #[inline(always)]
    pub fn walk(&self, gpa: u64, walk: (u8, u8)) -> impl Iterator<Item = u64> + '_ {
        (walk.1..=walk.0).rev().map(move |l| self.entry(gpa, l))
    }

    /// The first byte past the tables: the physical memory the caches must reach.
    pub fn end(&self) -> u64 {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_sit_above_guest_memory_one_after_another() {
        // 1GiB of guest memory, x86-64: 262,144 last-level entries (2MiB), 512 (4KiB), 1, 1.
        let t = HostTables::new(1 << 30, 12, 9, 4);
        assert_eq!(t.entry(0, 1), 1 << 30);
        assert_eq!(t.entry(4096, 1), (1 << 30) + 8, "the next 4KB page's entry is the next one");
        assert_eq!(t.entry((1 << 30) - 1, 1), (1 << 30) + (2 << 20) - 8);
        assert_eq!(t.entry(0, 2), (1 << 30) + (2 << 20));
        assert_eq!(t.entry(2 << 20, 2), (1 << 30) + (2 << 20) + 8, "level 2 entries span 2MB");
        assert_eq!(t.entry(0, 3), (1 << 30) + (2 << 20) + 4096);
        assert_eq!(t.entry(0, 4), (1 << 30) + (2 << 20) + 8192);
        assert_eq!(t.end(), (1 << 30) + (2 << 20) + 3 * 4096);
        // Every entry of guest memory lies below end().
        for level in 1..=4 {
            assert!(t.entry((1 << 30) - 1, level) < t.end());
        }
    }
}
