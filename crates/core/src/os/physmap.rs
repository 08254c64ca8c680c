//! A picture of physical memory: one cell per aligned region (by default of the machine's
//! largest superpage size), each given one state. Reports draw these as a map, and a run that
//! asks (`EngineConfig::map_every`) keeps a frame every so many accesses, so the map animates.
//!
//! A cell's state, decided in this order (the first that applies):
//! - `unmovable`: it holds a frame compaction cannot move (a page table, wired or boot-reserved
//!   memory), so the region can never be one free block of its size;
//! - `free`: every frame is free;
//! - `superpage <size>`: at least half of its frames back mapped superpages, and this size backs
//!   the most of them;
//! - `reserved`: it holds frames of a reservation (Navarro et al.);
//! - `partly used`: anything else (base pages, page cache, some free frames).
//!
//! Cells are coded as one character each ('0' + code) so that a frame is a short string.

use super::frames::FrameKind;
use super::Os;

/// Codes of the cell states below the superpage sizes; superpage size index `si` (≥ 1) is
/// `SUPER_BASE + si - 1`.
pub const FREE: u8 = 0;
pub const PARTLY_USED: u8 = 1;
pub const RESERVED: u8 = 2;
pub const UNMOVABLE: u8 = 3;
pub const SUPER_BASE: u8 = 4;

impl Os {
    /// The legend: state name per code, for this OS's page sizes.
    pub fn map_legend(&self) -> Vec<String> {
        let mut v: Vec<String> = ["free", "partly used", "reserved", "unmovable"].iter().map(|s| s.to_string()).collect();
        v.extend(self.sizes.iter().skip(1).map(|s| format!("superpage {}", s.name())));
        v
    }

    /// One frame of the map: a cell per aligned region of `1 << region_shift` bytes.
    pub fn phys_map(&self, region_shift: u32) -> String {
        let base_shift = self.sizes[0].shift();
        let per = 1u64 << region_shift.saturating_sub(base_shift);
        let total = self.phys.total_frames();
        let cells = total.div_ceil(per) as usize;
        // Frames backing mapped superpages, per cell and size (a frame mapped by two processes
        // counts once per mapping: shared superpages are rare, and the share stays a hint).
        let nsizes = self.sizes.len();
        let mut sup = vec![0u64; cells * nsizes];
        for p in self.procs.iter().filter(|p| p.alive) {
            p.pt.for_each_page(&mut |t| {
                if t.size_idx == 0 {
                    return;
                }
                let n = self.sizes[t.size_idx as usize].bytes() >> base_shift;
                let mut f = t.pfn.0;
                let end = (t.pfn.0 + n).min(total);
                while f < end {
                    let c = (f / per) as usize;
                    let upto = ((c as u64 + 1) * per).min(end);
                    sup[c * nsizes + t.size_idx as usize] += upto - f;
                    f = upto;
                }
            });
        }
        let mut out = String::with_capacity(cells);
        for c in 0..cells {
            let (lo, hi) = (c as u64 * per, ((c as u64 + 1) * per).min(total));
            let (mut free, mut unmovable, mut reserv) = (0u64, 0u64, 0u64);
            for f in lo..hi {
                match self.phys.kind_of(f) {
                    FrameKind::Free => free += 1,
                    FrameKind::PageTable | FrameKind::Wired | FrameKind::Reserved => unmovable += 1,
                    FrameKind::Reservation => reserv += 1,
                    _ if self.phys.reservs.is_member(f) => reserv += 1,
                    _ => {}
                }
            }
            let row = &sup[c * nsizes..(c + 1) * nsizes];
            let (best, most) = row.iter().enumerate().max_by_key(|&(i, &n)| (n, i)).map(|(i, &n)| (i, n)).unwrap_or((0, 0));
            let superpaged: u64 = row.iter().sum();
            let code = if unmovable > 0 {
                UNMOVABLE
            } else if free == hi - lo {
                FREE
            } else if most > 0 && 2 * superpaged >= hi - lo {
                SUPER_BASE + best as u8 - 1
            } else if reserv > 0 {
                RESERVED
            } else {
                PARTLY_USED
            };
            out.push((b'0' + code) as char);
        }
        out
    }
}
