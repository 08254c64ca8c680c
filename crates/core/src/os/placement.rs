//! Aligned placement of file mappings (Navarro et al., OSDI 2002, implementation notes on multiple
//! mappings of one file: a mapping with no fixed address goes to an address aligned to the
//! largest superpage size no larger than the mapping).
//!
//! When two processes map one file at virtual addresses whose offsets modulo a superpage size
//! differ, at most one of them can map the shared page-cache extent with a superpage. Navarro
//! et al.'s kernel therefore places a file mapping that names no address at one aligned to the
//! largest superpage size no larger than the mapping. We ask for the general form of that rule:
//! the virtual address is congruent to the file offset modulo that size (for offset 0, simply
//! aligned), which is what in-place promotion of the file's pages needs (os/filemap.rs).
//!
//! Shared file mappings are moved, and private ones too when the machine's base page is the
//! trace's 4KiB: the OS model promotes both in place (a private mapping's read-only page-cache
//! pages, a program's text; os/filemap.rs). With a larger base page, moving a private mapping
//! would part pieces of neighbouring mappings that shared a base page (ld.so's segments).
//!
//! A trace carries the addresses the real kernel chose. When a policy asks for aligned placement
//! (`Policy::file_mapping_alignment`) and the trace's address disagrees, the OS model moves the
//! mapping to a fresh address in a *placement window* that the trace does not use, and from then
//! on translates every trace address inside the moved range, accesses and events alike, by the
//! same distance: the program sees its mapping where the kernel put it.
//!
//! Invariants: a process's `Relocations` are disjoint trace ranges, sorted by start, each moved
//! by a multiple of 4KiB (trace addresses of one access record stay in one 4KiB page); window
//! ranges are handed out once and never overlap one another; a trace range is relocated only
//! while the mapping that was moved still covers it (munmap trims it, exit clears it).

use crate::error::{Error, Result};
use crate::trace::Event;

crate::counters! {
    /// Counted outcomes of the placement decision for each mmap of a file (`placement.*`).
    #[derive(Clone, Debug, Default)]
    pub struct PlacementCounters {
        /// Moved into the placement window at an address congruent to the offset.
        pub moved: u64 = "placement.moved",
        /// The trace's address already had the wanted congruence: left where it was.
        pub already_aligned: u64 = "placement.already_aligned",
        /// The program asked for its address (MAP_FIXED): not moved.
        pub fixed_address: u64 = "placement.fixed_address",
        /// A private file mapping on a machine whose base page is larger than the trace's 4KiB:
        /// not moved, since that would part pieces of neighbouring mappings that shared a base
        /// page.
        pub private_mapping: u64 = "placement.private_mapping",
        /// Smaller than every superpage size the policy uses: nothing to align to.
        pub smaller_than_superpage: u64 = "placement.smaller_than_superpage",
        /// Placed inside a range already moved (ld.so's MAP_FIXED segments over its first mapping):
        /// moved with it.
        pub inside_moved: u64 = "placement.inside_moved",
    }
}

/// Aligned placement's state: the window moved mappings go to (made at the first move) and
/// its counted decisions.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    pub window: Option<PlacementWindow>,
    pub counters: PlacementCounters,
}

/// One trace range [start, end) that the simulated process sees at [to, to + end - start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    pub start: u64,
    pub end: u64,
    pub to: u64,
}

/// A process's relocated ranges (see the invariants above).
#[derive(Clone, Debug, Default)]
pub struct Relocations {
    ranges: Vec<Relocation>,
}

impl Relocations {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn ranges(&self) -> &[Relocation] {
        &self.ranges
    }

    /// Where the simulated process sees trace address `va`.
    #[inline]
    pub fn translate(&self, va: u64) -> u64 {
        let i = self.ranges.partition_point(|r| r.start <= va);
        match i.checked_sub(1).map(|k| &self.ranges[k]) {
            Some(r) if va < r.end => va - r.start + r.to,
            _ => va,
        }
    }

    /// Split the trace range [start, end) where relocations begin and end: each piece as
    /// (trace start, trace end, simulated start, moved).
    pub fn pieces(&self, start: u64, end: u64, out: &mut Vec<(u64, u64, u64, bool)>) {
        out.clear();
        let mut cur = start;
        let first = self.ranges.partition_point(|r| r.end <= start);
        for r in &self.ranges[first..] {
            if cur >= end || r.start >= end {
                break;
            }
            if r.start > cur {
                out.push((cur, r.start, cur, false));
                cur = r.start;
            }
            let e = r.end.min(end);
            out.push((cur, e, cur - r.start + r.to, true));
            cur = e;
        }
        if cur < end {
            out.push((cur, end, cur, false));
        }
    }

    /// Add a relocation; its trace range must not overlap an existing one.
    pub fn insert(&mut self, r: Relocation) {
        let i = self.ranges.partition_point(|x| x.start < r.start);
        debug_assert!(i == 0 || self.ranges[i - 1].end <= r.start, "relocations overlap");
        debug_assert!(i == self.ranges.len() || r.end <= self.ranges[i].start, "relocations overlap");
        self.ranges.insert(i, r);
    }

    /// The trace range [start, end) is no longer mapped: stop translating it (a relocation
    /// partly inside it keeps its outside parts).
    pub fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for r in self.ranges.drain(..) {
            if r.end <= start || r.start >= end {
                kept.push(r);
                continue;
            }
            if r.start < start {
                kept.push(Relocation { start: r.start, end: start, to: r.to });
            }
            if r.end > end {
                kept.push(Relocation { start: end, end: r.end, to: r.to + (end - r.start) });
            }
        }
        self.ranges = kept;
    }

    /// The relocation holding trace address `va`, if any.
    pub fn holding(&self, va: u64) -> Option<&Relocation> {
        let i = self.ranges.partition_point(|r| r.start <= va);
        i.checked_sub(1).map(|k| &self.ranges[k]).filter(|r| va < r.end)
    }

    /// Grow the relocation holding `va` to end at `end` (an mremap that grew in place).
    pub fn extend(&mut self, va: u64, end: u64) {
        let i = self.ranges.partition_point(|r| r.start <= va);
        if let Some(k) = i.checked_sub(1) {
            let next = self.ranges.get(k + 1).map_or(u64::MAX, |r| r.start);
            let r = &mut self.ranges[k];
            if va < r.end && end > r.end {
                r.end = end.min(next);
            }
        }
    }
}

/// Gap left after each moved mapping, so that one grown in place by mremap does not run into
/// the next (1GiB: a generous bound on in-place growth; the window is tens of terabytes).
const WINDOW_GAP: u64 = 1 << 30;

/// The simulated addresses handed out to moved mappings: [start, next).
#[derive(Clone, Debug)]
pub struct PlacementWindow {
    pub start: u64,
    pub next: u64,
}

impl PlacementWindow {
    /// A window a quarter of the way up the machine's virtual address space: 64TiB on a 48-bit
    /// space, well clear of where Linux puts programs (low addresses, the heap after them) and
    /// mappings (down from just below 128TiB), so traces from Linux do not reach it.
    pub fn for_limit(va_limit: u64) -> PlacementWindow {
        let start = va_limit >> 2;
        PlacementWindow { start, next: start }
    }

    /// Hand out `len` bytes at an address congruent to `offset` modulo `align` (a power of two).
    pub fn take(&mut self, len: u64, align: u64, offset: u64, va_limit: u64) -> Result<u64> {
        let want = offset & (align - 1);
        let base = self.next.next_multiple_of(align) + want;
        let end = base.checked_add(len).filter(|&e| e <= va_limit).ok_or_else(|| {
            Error::Sim(format!("aligned placement: the placement window ({:#x}..{va_limit:#x}) has no room for a {len}-byte mapping", self.start))
        })?;
        self.next = end.saturating_add(WINDOW_GAP);
        Ok(base)
    }

    /// Whether a trace range [start, end) that is not relocated runs into moved mappings.
    pub fn clashes(&self, start: u64, end: u64) -> bool {
        self.next > self.start && start < self.next && end > self.start
    }
}

impl super::Os {
    /// Translate one address-space event of process `pi` from trace addresses to simulated ones,
    /// into `out` (a range that straddles moved and unmoved parts becomes one event per part),
    /// placing a new file mapping when `align` names the size to align an mmap of its length to
    /// (`Policy::file_mapping_alignment`; ignored for anonymous memory). Updates the process's
    /// relocations.
    pub fn place_event(&mut self, pi: usize, e: &Event, align: Option<u64>, out: &mut Vec<Event>) -> Result<()> {
        use crate::trace::MAP_FIXED;
        out.clear();
        let mut pieces = Vec::new();
        let page = 0xfff; // trace ranges are in 4KiB pages whatever the machine's base page
        let up = |x: u64| x.saturating_add(page) & !page;
        match *e {
            Event::Mmap { addr, len, prot, flags, fd, offset } => {
                let end = up(addr.saturating_add(len));
                self.procs[pi].relocs.pieces(addr, end, &mut pieces);
                if pieces.iter().any(|p| p.3) {
                    for &(s, e2, to, moved) in &pieces {
                        self.placement.counters.inside_moved += moved as u64;
                        out.push(Event::Mmap { addr: to, len: e2 - s, prot, flags, fd, offset: offset + (s - addr) });
                    }
                    return self.check_window(pi, &pieces);
                }
                let file = fd >= 0 && flags & crate::trace::MAP_ANONYMOUS == 0;
                let to = match align.filter(|_| file) {
                    Some(_) if flags & crate::trace::MAP_SHARED == 0 && self.base.bytes() != 4096 => {
                        self.placement.counters.private_mapping += 1;
                        addr
                    }
                    Some(_) if flags & MAP_FIXED != 0 => {
                        self.placement.counters.fixed_address += 1;
                        addr
                    }
                    Some(a) if (addr.wrapping_sub(offset)) & (a - 1) == 0 => {
                        self.placement.counters.already_aligned += 1;
                        addr
                    }
                    Some(a) => {
                        let limit = self.procs[pi].pt.va_limit();
                        let w = self.placement.window.get_or_insert_with(|| PlacementWindow::for_limit(limit));
                        let to = w.take(end - addr, a, offset, limit)?;
                        self.procs[pi].relocs.insert(Relocation { start: addr, end, to });
                        self.placement.counters.moved += 1;
                        to
                    }
                    None => {
                        if file {
                            self.placement.counters.smaller_than_superpage += 1;
                        }
                        addr
                    }
                };
                out.push(Event::Mmap { addr: to, len, prot, flags, fd, offset });
                if to == addr {
                    return self.check_window(pi, &[(addr, end, addr, false)]);
                }
            }
            Event::Munmap { addr, len } | Event::Mprotect { addr, len, .. } | Event::Madvise { addr, len, .. } => {
                let end = up(addr.saturating_add(len));
                self.procs[pi].relocs.pieces(addr, end, &mut pieces);
                for &(s, e2, to, _) in &pieces {
                    out.push(match *e {
                        Event::Munmap { .. } => Event::Munmap { addr: to, len: e2 - s },
                        Event::Mprotect { prot, .. } => Event::Mprotect { addr: to, len: e2 - s, prot },
                        Event::Madvise { advice, .. } => Event::Madvise { addr: to, len: e2 - s, advice },
                        _ => unreachable!(),
                    });
                }
                if let Event::Munmap { .. } = e {
                    self.procs[pi].relocs.remove(addr, end);
                }
                return self.check_window(pi, &pieces);
            }
            Event::Mremap { old_addr, old_len, new_addr, new_len } => {
                // Where the trace puts the result when it is not a moved mapping grown in place.
                let unmoved = [(new_addr, up(new_addr.saturating_add(new_len)), new_addr, false)];
                let Some(r) = self.procs[pi].relocs.holding(old_addr).copied() else {
                    out.push(e.clone());
                    return self.check_window(pi, &unmoved);
                };
                let to = old_addr - r.start + r.to;
                if new_addr == old_addr {
                    // Resized in place: the moved mapping keeps its distance, so its simulated
                    // range grows too and must not reach another moved mapping.
                    let (grown_from, grown_to) = (up(to.saturating_add(old_len)), up(to.saturating_add(new_len)));
                    if new_len > old_len && self.moved_overlap(grown_from, grown_to) {
                        return Err(Error::Sim(format!(
                            "aligned placement: mremap grows the moved mapping at {old_addr:#x} in place to {new_len} bytes, into another moved mapping; run with align_files=false"
                        )));
                    }
                    out.push(Event::Mremap { old_addr: to, old_len, new_addr: to, new_len });
                    if new_len > old_len {
                        self.procs[pi].relocs.extend(old_addr, up(old_addr.saturating_add(new_len)));
                    } else {
                        self.procs[pi].relocs.remove(up(old_addr + new_len), up(old_addr.saturating_add(old_len)));
                    }
                } else {
                    // Moved by the kernel: it lands where the trace says.
                    out.push(Event::Mremap { old_addr: to, old_len, new_addr, new_len });
                    self.procs[pi].relocs.remove(old_addr, up(old_addr.saturating_add(old_len)));
                    return self.check_window(pi, &unmoved);
                }
            }
            _ => out.push(e.clone()),
        }
        Ok(())
    }

    /// Whether simulated range [start, end) overlaps any process's moved mapping.
    fn moved_overlap(&self, start: u64, end: u64) -> bool {
        self.procs.iter().flat_map(|p| p.relocs.ranges()).any(|r| r.to < end && start < r.to + (r.end - r.start))
    }

    /// A trace range left where the trace put it must not run into moved mappings.
    fn check_window(&self, pi: usize, pieces: &[(u64, u64, u64, bool)]) -> Result<()> {
        let Some(w) = &self.placement.window else { return Ok(()) };
        match pieces.iter().find(|p| !p.3 && w.clashes(p.0, p.1)) {
            Some(p) => Err(Error::Sim(format!(
                "aligned placement: process {} maps {:#x}..{:#x}, inside the placement window where moved file mappings go ({:#x}..); run with align_files=false",
                self.procs[pi].pid, p.0, p.1, w.start
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(ranges: &[(u64, u64, u64)]) -> Relocations {
        let mut r = Relocations::default();
        for &(start, end, to) in ranges {
            r.insert(Relocation { start, end, to });
        }
        r
    }

    #[test]
    fn translate_moves_only_inside_ranges() {
        let r = rel(&[(0x1000, 0x3000, 0x10_0000), (0x8000, 0x9000, 0x20_0000)]);
        assert_eq!(r.translate(0xfff), 0xfff);
        assert_eq!(r.translate(0x1000), 0x10_0000);
        assert_eq!(r.translate(0x2abc), 0x10_1abc);
        assert_eq!(r.translate(0x3000), 0x3000);
        assert_eq!(r.translate(0x8fff), 0x20_0fff);
    }

    #[test]
    fn pieces_split_at_range_edges() {
        let r = rel(&[(0x1000, 0x3000, 0x10_0000)]);
        let mut out = Vec::new();
        r.pieces(0x0, 0x4000, &mut out);
        assert_eq!(out, vec![(0x0, 0x1000, 0x0, false), (0x1000, 0x3000, 0x10_0000, true), (0x3000, 0x4000, 0x3000, false)]);
        r.pieces(0x2000, 0x2800, &mut out);
        assert_eq!(out, vec![(0x2000, 0x2800, 0x10_1000, true)]);
        r.pieces(0x5000, 0x6000, &mut out);
        assert_eq!(out, vec![(0x5000, 0x6000, 0x5000, false)]);
    }

    #[test]
    fn remove_trims_and_splits() {
        let mut r = rel(&[(0x1000, 0x5000, 0x10_0000)]);
        r.remove(0x2000, 0x3000);
        assert_eq!(r.ranges(), &[Relocation { start: 0x1000, end: 0x2000, to: 0x10_0000 }, Relocation { start: 0x3000, end: 0x5000, to: 0x10_2000 }]);
        assert_eq!(r.translate(0x3000), 0x10_2000);
        r.remove(0, u64::MAX);
        assert!(r.is_empty());
    }

    #[test]
    fn window_hands_out_congruent_disjoint_ranges() {
        let mut w = PlacementWindow::for_limit(1 << 48);
        let a = w.take(5 << 20, 4 << 20, 0x2000, 1 << 48).unwrap();
        assert_eq!(a % (4 << 20), 0x2000);
        let b = w.take(1 << 20, 64 << 10, 0, 1 << 48).unwrap();
        assert_eq!(b % (64 << 10), 0);
        assert!(b >= a + (5 << 20));
        assert!(w.clashes(a, a + 1) && !w.clashes(0x7fff_0000_0000, 0x7fff_0001_0000));
        assert!(w.take(1 << 48, 4 << 20, 0, 1 << 48).is_err());
    }
}
