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
//! Guest memory itself sits in host frames in order (host-physical = guest-physical) unless the
//! machine says the host scatters them (`HostFrames::Scattered`): then each host page of guest
//! memory goes to the host frame a fixed permutation of its number picks (`hpa`), so the caches
//! see a guest 2MB page's 4KB pieces in unrelated sets, as a real host backing the guest with
//! 4KB pages out of fragmented memory puts them.
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
    /// Scattered host frames: (host page shift, bits of the permuted frame numbers). Frames
    /// numbered below 2^bits are permuted among themselves (a bijection, so no two guest pages
    /// share a host frame); any above, in memory that is not a power of two, stay in order.
    scatter: Option<(u32, u32)>,
}

/// Odd multipliers of the frame permutation (any odd constant makes multiplication mod 2^bits a
/// bijection; these are the 64-bit golden ratio and splitmix64's second constant).
const MIX1: u64 = 0x9E37_79B9_7F4A_7C15;
const MIX2: u64 = 0x94D0_49BB_1331_11EB;

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
        HostTables { base, shift, end: at, scatter: None }
    }

    /// The same tables, with guest memory in host frames of `2^host_shift` bytes scattered
    /// (`HostFrames::Scattered`).
    pub fn scattered(mut self, memory: u64, host_shift: u32) -> HostTables {
        let frames = memory >> host_shift;
        if frames >= 2 {
            self.scatter = Some((host_shift, 63 - frames.leading_zeros()));
        }
        self
    }

    /// The host-physical address of guest-physical `gpa`.
    #[inline(always)]
    pub fn hpa(&self, gpa: u64) -> u64 {
        let Some((shift, bits)) = self.scatter else { return gpa };
        let frame = gpa >> shift;
        if frame >> bits != 0 {
            return gpa;
        }
        // Multiply (odd: a bijection mod 2^bits), fold the high half down (x ^ x >> s is one
        // too), twice: neighbouring frames end up far apart in every bit.
        let mask = (1u64 << bits) - 1;
        let half = bits.div_ceil(2);
        let mut x = frame.wrapping_mul(MIX1) & mask;
        x ^= x >> half;
        x = x.wrapping_mul(MIX2) & mask;
        x ^= x >> half;
        (x << shift) | (gpa & ((1u64 << shift) - 1))
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
    fn scattered_host_frames_are_a_permutation_that_keeps_page_offsets() {
        let mem = 64u64 << 20;
        let t = HostTables::new(mem, 12, 9, 4);
        assert_eq!(t.hpa(0x12345), 0x12345, "in order unless scattered");
        let t = t.scattered(mem, 12);
        let frames = (mem >> 12) as usize;
        let mut seen = vec![false; frames];
        let mut in_order = 0;
        for f in 0..frames as u64 {
            let h = t.hpa((f << 12) | 0x7c8);
            assert_eq!(h & 0xfff, 0x7c8, "the offset within the host page stays");
            assert!(h < mem, "inside guest memory's span");
            assert!(!std::mem::replace(&mut seen[(h >> 12) as usize], true), "two guest frames in host frame {}", h >> 12);
            in_order += (h >> 12 == f + 1 || (f > 0 && t.hpa((f - 1) << 12) >> 12 == (h >> 12) - 1)) as u32;
        }
        assert!(in_order < frames as u32 / 100, "{in_order} neighbours kept");
        // Bits 12-15 (a 1MiB 16-way L2's set bits above the page offset) of the 16 frames of each
        // 64KiB-aligned group: in order they repeat 0..16; scattered, any value.
        let t2 = HostTables::new(mem, 12, 9, 4).scattered(mem, 12);
        let same = (0..1024u64).filter(|g| (t2.hpa(g << 16) >> 12) & 15 == 0).count();
        assert!((20..130).contains(&same), "{same} of 1024 64KiB-aligned pages kept L2 set bits 0");
    }

    #[test]
    fn memory_that_is_not_a_power_of_two_keeps_its_top_in_order() {
        let mem = 96u64 << 20;
        let t = HostTables::new(mem, 12, 9, 4).scattered(mem, 12);
        assert_eq!(t.hpa((80 << 20) + 5), (80 << 20) + 5);
        assert!(t.hpa(5 << 12) < 64 << 20);
    }

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
