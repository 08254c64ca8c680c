//! `linux-thp`: Linux's transparent huge pages, with its real knobs (sysfs names under
//! /sys/kernel/mm/transparent_hugepage/, Documentation/admin-guide/mm/transhuge.rst).
//!
//! - Fault time: an anonymous fault in an eligible VMA maps the aligned PMD-size page (2MB on
//!   x86) when the whole aligned range lies inside the VMA and nothing in it is mapped yet
//!   (`do_huge_pmd_anonymous_page` needs an empty PMD); mTHP sizes (`hugepages-<N>kB`) are tried
//!   next, largest first; otherwise one base page. An mTHP size the machine has as a page size
//!   (the ARM contiguous bit's 64KB) is mapped as one page; any other (x86) is a folio: one
//!   naturally aligned contiguous block, mapped by base PTEs over a range that must be unmapped
//!   (`alloc_anon_folio`), counted per size as Linux's anon_fault_alloc / anon_fault_fallback.
//! - `defrag` decides what a failed fault-time allocation does: `always` compacts directly,
//!   `defer` wakes kcompactd, `defer+madvise` compacts directly in MADV_HUGEPAGE regions and
//!   wakes kcompactd elsewhere, `madvise` compacts directly in MADV_HUGEPAGE regions only,
//!   `never` falls back at once.
//! - khugepaged wakes every `scan_sleep_millisecs`, scans `pages_to_scan` base pages' worth of
//!   eligible address space (each PMD range counts HPAGE_PMD_NR = 512, as khugepaged's progress
//!   does), and collapses a range by copy when at most `max_ptes_none` of its base pages are
//!   unmapped. A failed huge-page allocation (after direct compaction when
//!   `khugepaged_defrag=1`) ends the pass and sleeps `alloc_sleep_millisecs`. Every outcome is
//!   counted by its scan_result name.
//! - kcompactd, when woken, compacts for the PMD order in the background.
//!
//! Work done by the daemons runs on another core in Linux, so its copies are counted but not
//! charged to the simulated program's cycles; direct compaction at a fault is charged.
//!
//! Not modelled (docs/MODEL.md): the accessed-bit requirement (SCAN_LACK_REFERENCED_PAGE).

use super::{FaultDecision, FaultInfo, Features, Params, Policy, Sys};
use crate::error::{Error, Result};
use crate::os::compact::{CollapseLimits, CollapseResult, CompactResult};
use crate::os::Vma;
use crate::spec::SysfsFlag;
use crate::units::PageSize;

pub const PARAMS: &str = "enabled=always|madvise|never (default always, the kernel's Kconfig default); \
defrag=always|defer|defer+madvise|madvise|never (default madvise); khugepaged=1|0 (default 1); \
pages_to_scan=N (4096); scan_sleep_millisecs=MS (10000); alloc_sleep_millisecs=MS (60000); \
max_ptes_none=N (511); max_ptes_swap=N (64); max_ptes_shared=N (256); khugepaged_defrag=1|0 (1); \
hugepages-<N>kB=always|madvise|never|inherit (mTHP sizes; default never, inherit for the PMD size)";

/// linux-thp's parameters, the sysfs knobs of /sys/kernel/mm/transparent_hugepage (each
/// described in `PARAMS`); the mTHP keys `hugepages-<N>kB` are read apart (their names vary).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ThpParams {
    enabled: Mode,
    defrag: Defrag,
    khugepaged: SysfsFlag,
    pages_to_scan: u64,
    scan_sleep_millisecs: u64,
    alloc_sleep_millisecs: u64,
    max_ptes_none: u64,
    max_ptes_swap: u64,
    max_ptes_shared: u64,
    khugepaged_defrag: SysfsFlag,
}

impl Default for ThpParams {
    fn default() -> Self {
        // enabled: the kernel's Kconfig default (TRANSPARENT_HUGEPAGE_ALWAYS); defrag: madvise
        // since Linux 4.6. khugepaged: mm/khugepaged.c (khugepaged_pages_to_scan =
        // HPAGE_PMD_NR * 8, sleeps 10000 and 60000 ms, max_ptes_none = HPAGE_PMD_NR - 1,
        // max_ptes_swap = HPAGE_PMD_NR / 8, max_ptes_shared = HPAGE_PMD_NR / 2), with
        // HPAGE_PMD_NR = 512.
        ThpParams {
            enabled: Mode::Always,
            defrag: Defrag::Madvise,
            khugepaged: SysfsFlag(true),
            pages_to_scan: 4096,
            scan_sleep_millisecs: 10000,
            alloc_sleep_millisecs: 60000,
            max_ptes_none: 511,
            max_ptes_swap: 64,
            max_ptes_shared: 256,
            khugepaged_defrag: SysfsFlag(true),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Always,
    Madvise,
    Never,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Defrag {
    Always,
    Defer,
    #[serde(rename = "defer+madvise")]
    DeferMadvise,
    Madvise,
    Never,
}

pub struct LinuxThp {
    enabled: Mode,
    defrag: Defrag,
    khugepaged: bool,
    pages_to_scan: u64,
    scan_sleep_ms: f64,
    alloc_sleep_ms: f64,
    max_ptes_none: u64,
    max_ptes_swap: u64,
    max_ptes_shared: u64,
    khugepaged_defrag: bool,
    /// Size index of the PMD-size page (THP proper).
    pmd_si: u32,
    /// Per size index: the mTHP mode (None = not a THP size).
    modes: Vec<Option<Mode>>,
    /// mTHP sizes the machine has no page size for: (order, mode), largest first. Each is one
    /// contiguous block mapped by base PTEs, as on x86.
    folios: Vec<(u8, Mode)>,
    // khugepaged state
    next_wake: u64,
    cursor_pi: usize,
    cursor_addr: u64,
    kcompactd_wanted: bool,
    // counters (Linux /proc/vmstat names where they exist)
    fault_alloc: u64,
    fault_fallback: u64,
    kcompactd_wakes: u64,
    kcompactd_runs: [u64; CompactResult::ALL.len()],
    khugepaged_passes: u64,
    khugepaged_pages_scanned: u64,
    scan: [u64; CollapseResult::ALL.len()],
}

/// An mTHP size's mode (`hugepages-<N>kB=`): a THP mode or `inherit` (the PMD size's).
fn mthp_mode(key: &str, v: &str, inherit: Mode) -> Result<Mode> {
    Ok(match v {
        "always" => Mode::Always,
        "madvise" => Mode::Madvise,
        "never" => Mode::Never,
        "inherit" => inherit,
        o => return Err(Error::usage(format!("policy linux-thp: {key}={o}: expected always, madvise, inherit or never"))),
    })
}

pub fn build(params: &Params, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    // mTHP keys are hugepages-<N>kB, the sysfs directory names.
    let mthp_keys: Vec<String> = params.keys().filter(|k| k.starts_with("hugepages-")).cloned().collect();
    let mut plain = params.clone();
    for k in &mthp_keys {
        plain.remove(k);
    }
    let p: ThpParams = crate::spec::from_params("policy", "linux-thp", &plain)?;
    let enabled = p.enabled;
    // The PMD size: the page one last-level table spans (2MB with 4KB pages and 9 bits).
    let base = sizes[0];
    let pmd_bytes = base.bytes() << 9;
    let pmd_si = sizes.iter().position(|s| s.bytes() == pmd_bytes).ok_or_else(|| {
        Error::usage(format!(
            "policy linux-thp: this machine has no {} (PMD-size) page",
            PageSize::from_bytes(pmd_bytes).map(|p| p.to_string()).unwrap_or_default()
        ))
    })? as u32;
    let mut modes: Vec<Option<Mode>> = vec![None; sizes.len()];
    modes[pmd_si as usize] = Some(enabled);
    let mut folios: Vec<(u8, Mode)> = Vec::new();
    for k in &mthp_keys {
        let kb = k
            .strip_prefix("hugepages-")
            .and_then(|r| r.strip_suffix("kB"))
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| Error::usage(format!("policy linux-thp: unknown parameter '{k}' (mTHP sizes are hugepages-<N>kB, e.g. hugepages-64kB)")))?;
        let bytes = kb << 10;
        let m = mthp_mode(k, &params[k], enabled)?;
        if let Some(si) = sizes.iter().position(|s| s.bytes() == bytes).filter(|&i| i > 0 && (i as u32) <= pmd_si) {
            // The machine has this size (the ARM contiguous bit): map it as one page.
            modes[si] = Some(m);
            continue;
        }
        // Otherwise an mTHP folio: one contiguous block mapped by base PTEs (x86).
        let ok = bytes.is_power_of_two() && bytes > base.bytes() && bytes < pmd_bytes;
        if !ok {
            return Err(Error::usage(format!(
                "policy linux-thp: {k}: mTHP sizes are powers of two above the base page ({}KiB) and below the PMD size ({}KiB)",
                base.bytes() >> 10,
                pmd_bytes >> 10
            )));
        }
        folios.push(((bytes / base.bytes()).trailing_zeros() as u8, m));
    }
    folios.sort_by_key(|f| std::cmp::Reverse(f.0));
    Ok(Box::new(LinuxThp {
        enabled,
        defrag: p.defrag,
        khugepaged: p.khugepaged.0,
        pages_to_scan: p.pages_to_scan.max(1),
        scan_sleep_ms: p.scan_sleep_millisecs as f64,
        alloc_sleep_ms: p.alloc_sleep_millisecs as f64,
        max_ptes_none: p.max_ptes_none.min(511),
        max_ptes_swap: p.max_ptes_swap,
        max_ptes_shared: p.max_ptes_shared,
        khugepaged_defrag: p.khugepaged_defrag.0,
        pmd_si,
        modes,
        folios,
        next_wake: 0,
        cursor_pi: 0,
        cursor_addr: 0,
        kcompactd_wanted: false,
        fault_alloc: 0,
        fault_fallback: 0,
        kcompactd_wakes: 0,
        kcompactd_runs: [0; CompactResult::ALL.len()],
        khugepaged_passes: 0,
        khugepaged_pages_scanned: 0,
        scan: [0; CollapseResult::ALL.len()],
    }))
}

impl LinuxThp {
    /// Whether size `m` applies to this VMA (`hugepage_vma_check`): anonymous, not
    /// MADV_NOHUGEPAGE, and always or (madvise and MADV_HUGEPAGE).
    fn applies(m: Option<Mode>, v: &Vma) -> bool {
        v.is_anonymous()
            && v.thp_advice != Some(false)
            && match m {
                Some(Mode::Always) => true,
                Some(Mode::Madvise) => v.thp_advice == Some(true),
                _ => false,
            }
    }

    fn limits(&self) -> CollapseLimits {
        CollapseLimits { max_none: self.max_ptes_none, max_swap: self.max_ptes_swap, max_shared: self.max_ptes_shared, ..CollapseLimits::ANY }
    }

    fn khugepaged_scan(&mut self, sys: &mut Sys) {
        self.khugepaged_passes += 1;
        let len = sys.os.sizes[self.pmd_si as usize].bytes();
        let mut progress = 0u64;
        let n = sys.os.procs.len();
        let mut procs_seen = 0;
        while progress < self.pages_to_scan && procs_seen <= n {
            let pi = self.cursor_pi % n.max(1);
            let p = &sys.os.procs[pi];
            // The next PMD-aligned range at or after the cursor inside an eligible VMA.
            let mut cand = None;
            if p.alive && p.killed.is_none() {
                for v in p.vmas.values() {
                    if v.end <= self.cursor_addr || !Self::applies(Some(self.enabled), v) {
                        continue;
                    }
                    let a = v.start.max(self.cursor_addr).next_multiple_of(len);
                    if a + len <= v.end {
                        cand = Some(a);
                        break;
                    }
                }
            }
            let Some(a) = cand else {
                self.cursor_pi = (pi + 1) % n.max(1);
                self.cursor_addr = 0;
                procs_seen += 1;
                continue;
            };
            let r = sys.os.collapse(pi, a, self.pmd_si, self.limits(), self.khugepaged_defrag, sys.mmu);
            self.scan[r as usize] += 1;
            progress += len >> sys.os.base.shift();
            self.cursor_addr = a + len;
            if r == CollapseResult::AllocHugePageFail {
                self.next_wake = sys.now.0 + sys.ms(self.alloc_sleep_ms);
                break;
            }
        }
        self.khugepaged_pages_scanned += progress;
    }
}

impl Policy for LinuxThp {
    fn name(&self) -> String {
        "linux-thp".into()
    }

    fn on_fault(&mut self, f: &FaultInfo) -> FaultDecision {
        // Largest eligible size whose aligned range lies inside the VMA (the engine falls back
        // through the other eligible sizes if the range is partly mapped or memory lacks a block).
        let mut allowed = 1u32;
        for si in 1..=self.pmd_si as usize {
            if Self::applies(self.modes[si], f.vma) && f.vma.holds_aligned(f.va, f.sizes[si].bytes()) {
                allowed |= 1 << si;
            }
        }
        let mut folio_orders = 0u32;
        for &(order, m) in &self.folios {
            if Self::applies(Some(m), f.vma) && f.vma.holds_aligned(f.va, f.sizes[0].bytes() << order) {
                folio_orders |= 1 << order;
            }
        }
        let top = 31 - allowed.leading_zeros();
        if top == 0 && folio_orders == 0 {
            return FaultDecision::base();
        }
        let madvised = f.vma.thp_advice == Some(true);
        let direct = match self.defrag {
            Defrag::Always => true,
            Defrag::Madvise | Defrag::DeferMadvise => madvised,
            Defrag::Defer | Defrag::Never => false,
        };
        FaultDecision { size_idx: top, within_vma: true, fallback: allowed, direct_compact: direct, folio_orders }
    }

    fn features(&self) -> Features {
        Features { wants_tick: true, ..Features::default() }
    }

    fn on_fault_done(&mut self, wanted: u32, got: u32) {
        if wanted == self.pmd_si {
            if got == wanted {
                self.fault_alloc += 1;
            } else {
                self.fault_fallback += 1;
            }
        }
    }

    fn on_alloc_failure(&mut self, size_idx: u32) {
        if size_idx == self.pmd_si && matches!(self.defrag, Defrag::Defer | Defrag::DeferMadvise) {
            self.kcompactd_wanted = true;
        }
    }

    fn tick(&mut self, sys: &mut Sys) {
        if self.kcompactd_wanted {
            self.kcompactd_wanted = false;
            self.kcompactd_wakes += 1;
            let order = (sys.os.sizes[self.pmd_si as usize].shift() - sys.os.base.shift()) as u8;
            let was = sys.os.set_daemon(true);
            let r: CompactResult = sys.os.compact(order, sys.mmu);
            sys.os.set_daemon(was);
            self.kcompactd_runs[r as usize] += 1;
        }
        if self.khugepaged && self.enabled != Mode::Never && sys.now.0 >= self.next_wake {
            self.next_wake = sys.now.0 + sys.ms(self.scan_sleep_ms);
            let was = sys.os.set_daemon(true);
            self.khugepaged_scan(sys);
            sys.os.set_daemon(was);
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut c = vec![
            ("thp_fault_alloc".to_string(), self.fault_alloc),
            ("thp_fault_fallback".to_string(), self.fault_fallback),
            ("kcompactd_wakes".to_string(), self.kcompactd_wakes),
            ("khugepaged.passes".to_string(), self.khugepaged_passes),
            ("khugepaged.pages_scanned".to_string(), self.khugepaged_pages_scanned),
            ("khugepaged.max_ptes_none".to_string(), self.max_ptes_none),
            ("khugepaged.max_ptes_swap".to_string(), self.max_ptes_swap),
            ("khugepaged.max_ptes_shared".to_string(), self.max_ptes_shared),
        ];
        for r in CompactResult::ALL {
            c.push((format!("kcompactd.{}", r.name()), self.kcompactd_runs[r as usize]));
        }
        for r in CollapseResult::ALL {
            c.push((format!("khugepaged.scan.{}", r.name()), self.scan[r as usize]));
        }
        c
    }
}
