//! The unit live policies act on: an aligned 2MB range of a private anonymous VMA, read from
//! pagemap, with whether it is already huge and how many of its pages are populated.

use crate::pagemap::{KpageFlags, KpageFlagsFile, Pagemap, PagemapEntry};
use crate::procfs::{Vma, VmaKind};
use crate::{LiveError, PMD_PAGES};
use serde::Serialize;

/// Why a VMA holds no range a collapse may act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VmaSkip {
    /// File-backed, shared, hugetlb or special: MADV_COLLAPSE of anonymous memory does not apply.
    NotAnonymous,
    /// The program asked for no huge pages (MADV_NOHUGEPAGE, VmFlags `nh`).
    NoHugepage,
    /// Smaller than, or not covering, one aligned 2MB range.
    TooSmall,
}

impl VmaSkip {
    /// The counter name (`vma_skipped.<name>`).
    pub fn name(self) -> &'static str {
        match self {
            VmaSkip::NotAnonymous => "not_anonymous",
            VmaSkip::NoHugepage => "nohugepage",
            VmaSkip::TooSmall => "too_small",
        }
    }
}

/// Whether a live policy may collapse ranges of `v`. Not smaps's THPeligible: that follows the
/// sysfs `enabled` mode, which MADV_COLLAPSE ignores (Documentation/admin-guide/mm/transhuge.rst).
pub fn eligible(v: &Vma) -> Result<(), VmaSkip> {
    if !v.anon_private() || v.kind() == VmaKind::Hugetlb {
        return Err(VmaSkip::NotAnonymous);
    }
    if v.has_flag("nh") {
        return Err(VmaSkip::NoHugepage);
    }
    let (a, b) = v.pmd_ranges();
    if a == b {
        return Err(VmaSkip::TooSmall);
    }
    Ok(())
}

/// What one read of a range found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeState {
    /// Mapped by one 2MB folio (all 512 frames consecutive, aligned, a large folio's head first).
    Huge,
    /// Not huge; this many pages populated (present and not the shared zero page), and swapped.
    Small { populated: u32, swapped: u32 },
}

/// Reads ranges with one reusable buffer.
pub struct RangeReader<'a> {
    pm: &'a Pagemap,
    kf: Option<&'a KpageFlagsFile>,
    entries: Vec<u64>,
    /// The shared zero page's frame, learnt the first time two pages map the same frame.
    zero_pfn: Option<u64>,
}

impl<'a> RangeReader<'a> {
    pub fn new(pm: &'a Pagemap, kf: Option<&'a KpageFlagsFile>) -> RangeReader<'a> {
        RangeReader { pm, kf, entries: vec![0; PMD_PAGES as usize], zero_pfn: None }
    }

    /// The entries of the range last read.
    pub fn entries(&self) -> &[u64] {
        &self.entries
    }

    pub fn read(&mut self, addr: u64) -> Result<RangeState, LiveError> {
        self.pm.read(addr, &mut self.entries)?;
        let (mut populated, mut swapped) = (0u32, 0u32);
        let mut contiguous = true;
        let first = PagemapEntry(self.entries[0]).pfn().map(|p| p.0);
        let mut prev: Option<u64> = None;
        for (i, &raw) in self.entries.iter().enumerate() {
            let e = PagemapEntry(raw);
            let pfn = e.pfn().map(|p| p.0);
            if !e.present() {
                swapped += e.swapped() as u32;
                contiguous = false;
                prev = None;
                continue;
            }
            if contiguous && (first.is_none() || pfn != first.map(|f| f + i as u64)) {
                contiguous = false;
            }
            if let (Some(p), Some(q)) = (pfn, prev) {
                if p == q && self.zero_pfn.is_none() {
                    if let Some(kf) = self.kf {
                        if kf.one(superpager_core::units::Pfn(p))?.zero_page() {
                            self.zero_pfn = Some(p);
                        }
                    }
                }
            }
            prev = pfn;
            if pfn.is_none() || pfn != self.zero_pfn {
                populated += 1;
            }
        }
        if contiguous && populated == PMD_PAGES as u32 {
            if let (Some(kf), Some(f)) = (self.kf, first) {
                if f % PMD_PAGES == 0 {
                    let fl = kf.one(superpager_core::units::Pfn(f))?;
                    if fl.head() && fl.has(KpageFlags::THP) {
                        return Ok(RangeState::Huge);
                    }
                }
            }
        }
        Ok(RangeState::Small { populated, swapped })
    }
}
