//! `superpager inspect PID`: what a real process is mapped with, and what it could be.
//!
//! Per VMA and for the whole process:
//! - bytes mapped at each size, from the page tables: a 2MB folio mapped whole at an aligned
//!   address counts as 2MB, a hugetlb VMA at its page size, everything else 4KB; the kernel's own
//!   AnonHugePages (smaps) is kept beside ours so that a difference (a PTE-mapped 2MB folio) shows;
//! - large folios by size (mTHP: 16KB..1MB, mapped by PTEs on x86), from kpageflags;
//! - bloat, where it can be told: 4KB pieces of huge pages that read as all zeros, sampled from
//!   `/proc/PID/mem` (read only) — an upper bound, since a program may have written zeros;
//! - physical contiguity: for every aligned 2MB and 1GB virtual range inside a VMA, how many of
//!   its pages sit at their own offset in one aligned physical block ("in place": promotable
//!   without copying once complete), and which ranges a collapse (MADV_COLLAPSE) could make huge.
//!
//! Without root the kernel hides frames and page flags: the report says so (`notes`) and keeps
//! what smaps and pagemap's present bits still show.

use crate::pagemap::{flags_for, KpageFlags, KpageFlagsFile, Pagemap, PagemapEntry};
use crate::procfs::{read_vmas, Vma, VmaKind};
use crate::{LiveError, BASE_PAGE, PMD_BYTES, PMD_PAGES, PUD_BYTES, PUD_PAGES};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use superpager_core::units::Bytes;

/// Options of one inspection.
#[derive(Clone, Copy, Debug)]
pub struct InspectOptions {
    /// 4KB pieces read per huge page to estimate bloat (0: no sampling).
    pub bloat_samples: u32,
    /// Seed of the sampled offsets (same seed, same pieces).
    pub seed: u64,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions { bloat_samples: 8, seed: 1 }
    }
}

/// Physical contiguity of the aligned 2MB and 1GB ranges inside a VMA (or a whole process).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Contiguity {
    /// Aligned 2MB ranges wholly inside the VMA.
    pub pmd_ranges: u64,
    /// ... mapped by one 2MB page.
    pub pmd_huge: u64,
    /// ... with all 512 pages present (huge or not).
    pub pmd_full: u64,
    /// ... not huge, all present, each at its offset in one aligned 2MB frame: promotable in place.
    pub pmd_in_place_full: u64,
    /// Bytes of non-huge ranges that sit at their offset in one aligned 2MB frame.
    pub pmd_in_place_bytes: u64,
    /// Non-huge ranges with at least one page present that MADV_COLLAPSE may collapse.
    pub pmd_collapsible: u64,
    /// Resident bytes in those ranges.
    pub pmd_collapsible_bytes: u64,
    /// Aligned 1GB ranges wholly inside the VMA.
    pub pud_ranges: u64,
    /// ... mapped by one 1GB (hugetlb) page.
    pub pud_huge: u64,
    /// Bytes of non-1GB ranges at their offset in one aligned 1GB frame.
    pub pud_in_place_bytes: u64,
}

impl Contiguity {
    fn add(&mut self, o: &Contiguity) {
        self.pmd_ranges += o.pmd_ranges;
        self.pmd_huge += o.pmd_huge;
        self.pmd_full += o.pmd_full;
        self.pmd_in_place_full += o.pmd_in_place_full;
        self.pmd_in_place_bytes += o.pmd_in_place_bytes;
        self.pmd_collapsible += o.pmd_collapsible;
        self.pmd_collapsible_bytes += o.pmd_collapsible_bytes;
        self.pud_ranges += o.pud_ranges;
        self.pud_huge += o.pud_huge;
        self.pud_in_place_bytes += o.pud_in_place_bytes;
    }
}

/// Bloat estimated from sampled pieces of huge pages.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Bloat {
    /// Bytes mapped by huge pages (2MB and larger) that were sampled.
    pub huge_bytes: u64,
    pub pieces_sampled: u64,
    pub pieces_zero: u64,
    /// huge_bytes x pieces_zero / pieces_sampled, rounded down to 4KB.
    pub estimate_bytes: u64,
}

/// The numbers shown for a VMA and summed for the process.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Usage {
    /// Resident bytes (present, not the shared zero page).
    pub present: u64,
    /// Bytes mapped to the shared zero page (read faults on untouched anonymous memory).
    pub zero_page: u64,
    pub swapped: u64,
    /// Mapping size name -> bytes ("4KiB", "2MiB", "1GiB").
    pub by_size: BTreeMap<String, u64>,
    /// Large folio size name -> bytes mapped whole (16KiB..2MiB).
    pub folios: BTreeMap<String, u64>,
    /// The kernel's smaps accounting: Rss, AnonHugePages, FilePmdMapped+ShmemPmdMapped, Swap.
    pub kernel_rss: u64,
    pub kernel_anon_huge: u64,
    pub kernel_pmd_other: u64,
    pub kernel_swap: u64,
    pub contiguity: Contiguity,
    pub bloat: Bloat,
}

impl Usage {
    fn add(&mut self, o: &Usage) {
        self.present += o.present;
        self.zero_page += o.zero_page;
        self.swapped += o.swapped;
        for (k, v) in &o.by_size {
            *self.by_size.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.folios {
            *self.folios.entry(k.clone()).or_default() += v;
        }
        self.kernel_rss += o.kernel_rss;
        self.kernel_anon_huge += o.kernel_anon_huge;
        self.kernel_pmd_other += o.kernel_pmd_other;
        self.kernel_swap += o.kernel_swap;
        self.contiguity.add(&o.contiguity);
        self.bloat.huge_bytes += o.bloat.huge_bytes;
        self.bloat.pieces_sampled += o.bloat.pieces_sampled;
        self.bloat.pieces_zero += o.bloat.pieces_zero;
        self.bloat.estimate_bytes += o.bloat.estimate_bytes;
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct VmaReport {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub name: String,
    pub kind: VmaKind,
    pub thp_eligible: bool,
    pub usage: Usage,
}

/// One 2MB block of the address space with something present: the picture's pixel.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub start: u64,
    /// The mapping size name, "mixed" for 4KB pages and large folios together.
    pub size: String,
    pub present_pages: u32,
    pub in_place_pages: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessReport {
    pub pid: i32,
    pub comm: String,
    /// Physical frames visible (root): contiguity and folio sizes are known.
    pub pfns_visible: bool,
    /// /proc/kpageflags readable: folio sizes and the zero page can be told.
    pub flags_visible: bool,
    pub notes: Vec<String>,
    pub total: Usage,
    pub vmas: Vec<VmaReport>,
    pub cells: Vec<Cell>,
}

/// A deterministic 64-bit mix (splitmix64's finaliser) for the sampled offsets.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Scanner<'a> {
    pm: &'a Pagemap,
    kf: Option<&'a KpageFlagsFile>,
    mem: Option<&'a File>,
    opts: InspectOptions,
    entries: Vec<u64>,
    flags: Vec<u64>,
    piece: Vec<u8>,
    /// Candidate aligned 2MB frames of one block (reused).
    bases: Vec<u64>,
}

impl Scanner<'_> {
    /// Samples pieces of the huge page at `addr` (`pages` base pages) for all-zero content.
    fn sample_bloat(&mut self, addr: u64, pages: u64, b: &mut Bloat) {
        let Some(mem) = self.mem else { return };
        if self.opts.bloat_samples == 0 {
            return;
        }
        let (mut sampled, mut zero) = (0u64, 0u64);
        for k in 0..self.opts.bloat_samples as u64 {
            let off = mix(self.opts.seed ^ addr ^ k.wrapping_mul(0x100_0000_01b3)) % pages;
            if mem.read_exact_at(&mut self.piece, addr + off * BASE_PAGE).is_ok() {
                sampled += 1;
                zero += self.piece.iter().all(|&x| x == 0) as u64;
            }
        }
        if sampled > 0 {
            let bytes = pages * BASE_PAGE;
            b.huge_bytes += bytes;
            b.pieces_sampled += sampled;
            b.pieces_zero += zero;
            b.estimate_bytes += (bytes as u128 * zero as u128 / sampled as u128) as u64 / BASE_PAGE * BASE_PAGE;
        }
    }

    fn scan_vma(&mut self, v: &Vma, cells: &mut Vec<Cell>) -> Result<Usage, LiveError> {
        let mut u =
            Usage { kernel_rss: v.rss, kernel_anon_huge: v.anon_huge, kernel_pmd_other: v.file_pmd + v.shmem_pmd, kernel_swap: v.swap, ..Default::default() };
        let hugetlb = v.kind() == VmaKind::Hugetlb;
        let (pmd_first, pmd_end) = v.pmd_ranges();
        let (pud_first, pud_end) = crate::procfs::aligned_inside(v.start, v.end, PUD_BYTES);
        u.contiguity.pmd_ranges = (pmd_end - pmd_first) / PMD_BYTES;
        u.contiguity.pud_ranges = (pud_end - pud_first) / PUD_BYTES;
        let collapsible_vma = crate::ranges::eligible(v).is_ok();
        let (mut pud_block, mut pud_base): (Option<u64>, Option<u64>) = (None, None);
        let (mut huge_2m, mut huge_tlb) = (0u64, 0u64);
        let mut block = v.start / PMD_BYTES * PMD_BYTES;
        while block < v.end {
            let lo = block.max(v.start);
            let hi = (block + PMD_BYTES).min(v.end);
            let n = ((hi - lo) / BASE_PAGE) as usize;
            self.pm.read(lo, &mut self.entries[..n])?;
            if let Some(kf) = self.kf {
                flags_for(kf, &self.entries[..n], &mut self.flags[..n])?;
            } else {
                self.flags[..n].fill(0);
            }
            let (mut present, mut swapped, mut zero) = (0u64, 0u64, 0u64);
            for i in 0..n {
                let e = PagemapEntry(self.entries[i]);
                if !e.present() {
                    swapped += e.swapped() as u64;
                } else if KpageFlags(self.flags[i]).zero_page() {
                    zero += 1;
                } else {
                    present += 1;
                }
            }
            // Large folios mapped whole at aligned addresses (needs page flags).
            let (mut folio_pages, mut folio_size, mut mixed) = (0u64, 0u64, false);
            let mut block_huge = false;
            if self.kf.is_some() && !hugetlb {
                let mut i = 0;
                while i < n {
                    let e = PagemapEntry(self.entries[i]);
                    let f = KpageFlags(self.flags[i]);
                    let Some(p) = e.pfn() else {
                        i += 1;
                        continue;
                    };
                    if !f.head() || f.zero_page() {
                        i += 1;
                        continue;
                    }
                    let mut j = i + 1;
                    while j < n && KpageFlags(self.flags[j]).tail() && PagemapEntry(self.entries[j]).pfn().map(|q| q.0) == Some(p.0 + (j - i) as u64) {
                        j += 1;
                    }
                    let len = (j - i) as u64;
                    let vpn = lo / BASE_PAGE + i as u64;
                    if len > 1 && len.is_power_of_two() && vpn.is_multiple_of(len) && p.0.is_multiple_of(len) {
                        *u.folios.entry(Bytes(len * BASE_PAGE).to_string()).or_default() += len * BASE_PAGE;
                        if folio_size != 0 && folio_size != len {
                            mixed = true;
                        }
                        folio_size = len;
                        folio_pages += len;
                        if len == PMD_PAGES {
                            block_huge = true;
                        }
                    }
                    i = j;
                }
            }
            u.present += present * BASE_PAGE;
            u.zero_page += zero * BASE_PAGE;
            u.swapped += swapped * BASE_PAGE;
            if hugetlb {
                huge_tlb += present;
            } else if block_huge {
                huge_2m += PMD_PAGES;
            }
            // In place: pages at their own offset in one aligned 2MB physical block. The block is
            // the one most present pages point to (a vote), so one stray page does not hide it.
            let whole = lo == block && hi == block + PMD_BYTES;
            let skip = (lo - block) / BASE_PAGE;
            self.bases.clear();
            for i in 0..n {
                if let Some(p) = PagemapEntry(self.entries[i]).pfn().filter(|_| !KpageFlags(self.flags[i]).zero_page()) {
                    let off = skip + i as u64;
                    if p.0 >= off && (p.0 - off).is_multiple_of(PMD_PAGES) {
                        self.bases.push(p.0 - off);
                    }
                }
            }
            self.bases.sort_unstable();
            let mut in_place = 0u64;
            let mut k = 0;
            while k < self.bases.len() {
                let run = self.bases[k..].iter().take_while(|&&b| b == self.bases[k]).count();
                in_place = in_place.max(run as u64);
                k += run;
            }
            let first = (0..n).find_map(|i| PagemapEntry(self.entries[i]).pfn().filter(|_| !KpageFlags(self.flags[i]).zero_page()).map(|p| (i, p.0)));
            if let Some((i0, p0)) = first {
                // 1GB: the aligned 1GB frame the range's first present page implies.
                let gb = block / PUD_BYTES * PUD_BYTES;
                if gb >= pud_first && gb < pud_end && !(hugetlb && v.kernel_page_size == PUD_BYTES) {
                    if pud_block != Some(gb) {
                        let goff = (lo - gb) / BASE_PAGE + i0 as u64;
                        pud_block = Some(gb);
                        pud_base = (p0 >= goff && (p0 - goff).is_multiple_of(PUD_PAGES)).then(|| p0 - goff);
                    }
                    if let Some(base) = pud_base {
                        let m = (0..n).filter(|&i| PagemapEntry(self.entries[i]).pfn().map(|p| p.0) == Some(base + (lo - gb) / BASE_PAGE + i as u64)).count();
                        u.contiguity.pud_in_place_bytes += m as u64 * BASE_PAGE;
                    }
                }
            }
            if whole {
                let c = &mut u.contiguity;
                let full = present == PMD_PAGES;
                c.pmd_full += full as u64;
                let is_huge = block_huge || (hugetlb && v.kernel_page_size >= PMD_BYTES && present > 0);
                if is_huge {
                    c.pmd_huge += 1;
                } else {
                    c.pmd_in_place_bytes += in_place * BASE_PAGE;
                    c.pmd_in_place_full += (full && in_place == PMD_PAGES) as u64;
                    if collapsible_vma && present > 0 {
                        c.pmd_collapsible += 1;
                        c.pmd_collapsible_bytes += present * BASE_PAGE;
                    }
                }
            }
            if block_huge {
                let mut b = std::mem::take(&mut u.bloat);
                self.sample_bloat(block, PMD_PAGES, &mut b);
                u.bloat = b;
            }
            if present > 0 {
                let size = if hugetlb {
                    Bytes(v.kernel_page_size).to_string()
                } else if block_huge {
                    "2MiB".to_string()
                } else if folio_pages == 0 {
                    "4KiB".to_string()
                } else if !mixed && folio_pages == present {
                    Bytes(folio_size * BASE_PAGE).to_string()
                } else {
                    "mixed".to_string()
                };
                cells.push(Cell { start: block, size, present_pages: present as u32, in_place_pages: in_place as u32 });
            }
            block += PMD_BYTES;
        }
        if hugetlb {
            if v.kernel_page_size == PUD_BYTES {
                u.contiguity.pud_huge = huge_tlb * BASE_PAGE / PUD_BYTES;
            }
            // hugetlb pages: sample each one for bloat (a hugetlb VMA is aligned to its page size).
            let pages = v.kernel_page_size / BASE_PAGE;
            let mut at = v.start;
            while at + v.kernel_page_size <= v.end && huge_tlb > 0 {
                let mut b = std::mem::take(&mut u.bloat);
                self.sample_bloat(at, pages, &mut b);
                u.bloat = b;
                at += v.kernel_page_size;
            }
        }
        // Mapping sizes: ours from the page tables when flags are visible, else the kernel's.
        let (big, big_name) = if hugetlb {
            (huge_tlb * BASE_PAGE, Bytes(v.kernel_page_size).to_string())
        } else if self.kf.is_some() {
            (huge_2m * BASE_PAGE, "2MiB".to_string())
        } else {
            ((v.anon_huge + v.file_pmd + v.shmem_pmd).min(u.present), "2MiB".to_string())
        };
        if big > 0 {
            u.by_size.insert(big_name, big);
        }
        if u.present > big {
            u.by_size.insert("4KiB".to_string(), u.present - big);
        }
        Ok(u)
    }
}

/// Inspects process `pid`.
pub fn inspect(pid: i32, opts: InspectOptions) -> Result<ProcessReport, LiveError> {
    let vmas = read_vmas(pid)?;
    let pm = Pagemap::open(pid)?;
    let kf = KpageFlagsFile::open();
    let mem = File::open(format!("/proc/{pid}/mem")).ok();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim().to_string()).unwrap_or_default();
    let mut s = Scanner {
        pm: &pm,
        kf: kf.as_ref(),
        mem: mem.as_ref(),
        opts,
        entries: vec![0; PMD_PAGES as usize],
        flags: vec![0; PMD_PAGES as usize],
        piece: vec![0; BASE_PAGE as usize],
        bases: Vec::with_capacity(PMD_PAGES as usize),
    };
    let mut total = Usage::default();
    let mut reports = Vec::with_capacity(vmas.len());
    let mut cells = Vec::new();
    for v in &vmas {
        if v.name == "[vsyscall]" {
            continue; // above the user address space: pagemap has nothing for it
        }
        let u = s.scan_vma(v, &mut cells)?;
        total.add(&u);
        reports.push(VmaReport {
            start: v.start,
            end: v.end,
            perms: v.perms.clone(),
            name: v.name.clone(),
            kind: v.kind(),
            thp_eligible: v.thp_eligible,
            usage: u,
        });
    }
    let pfns_visible = probe_pfns(&pm, &vmas)?;
    let mut notes = Vec::new();
    if !pfns_visible {
        notes.push(
            "physical frames are hidden (not root): no contiguity, folio sizes or zero-page detection; mapping sizes are the kernel's smaps figures"
                .to_string(),
        );
    } else if kf.is_none() {
        notes.push("/proc/kpageflags is not readable: folio sizes and the zero page cannot be told; 2MB mappings are the kernel's smaps figures".to_string());
    }
    if mem.is_none() && opts.bloat_samples > 0 {
        notes.push(format!("/proc/{pid}/mem is not readable: bloat is not sampled"));
    }
    let ours_2m = total.by_size.get("2MiB").copied().unwrap_or(0);
    let kernel_2m = total.kernel_anon_huge + total.kernel_pmd_other;
    if kf.is_some() && ours_2m != kernel_2m {
        notes.push(format!(
            "2MB folios mapped whole: {} by the page tables, {} PMD-mapped by smaps (AnonHugePages+FilePmdMapped+ShmemPmdMapped); the difference is PTE-mapped 2MB folios or a change between the two reads",
            Bytes(ours_2m),
            Bytes(kernel_2m)
        ));
    }
    Ok(ProcessReport { pid, comm, pfns_visible, flags_visible: kf.is_some(), notes, total, vmas: reports, cells })
}

/// Whether the kernel shows this reader frames: the first present page of the process says
/// (reading each resident VMA until one is found).
fn probe_pfns(pm: &Pagemap, vmas: &[Vma]) -> Result<bool, LiveError> {
    let mut buf = vec![0u64; PMD_PAGES as usize];
    for v in vmas.iter().filter(|v| v.rss > 0 && v.name != "[vsyscall]") {
        let mut at = v.start;
        while at < v.end {
            let n = (((v.end - at) / BASE_PAGE) as usize).min(buf.len());
            pm.read(at, &mut buf[..n])?;
            if let Some(&e) = buf[..n].iter().find(|&&e| PagemapEntry(e).present()) {
                return Ok(PagemapEntry(e).pfn().is_some());
            }
            at += n as u64 * BASE_PAGE;
        }
    }
    Ok(false)
}
