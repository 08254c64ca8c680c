//! `trident`: Trident's use of three page sizes (Ram, Panwar and Basu, "Leveraging
//! Architectural Support of Three Page Sizes with Trident", arXiv 2011.12092; MICRO'21 as
//! "Trident: Harnessing Architectural Resources for All Page Sizes in x86 Processors").
//! Its goal: map as much of the address space as possible with 1GB pages, failing that 2MB,
//! and 4KB only where neither fits (§5). Built here so far:
//!
//! - **Fault path** (§5.2; the authors' kernel): an anonymous fault maps a 1GB page when the
//!   aligned 1GB range around it lies inside the VMA and a free 1GB block exists, else 2MB by
//!   the same rule, else 4KB. No direct compaction at fault (their kernel keeps THP's
//!   `defrag=madvise`, so a fault only takes a block that is already free). `fault_1g=false` is
//!   the Trident-pv branch, where 1GB pages come only from promotion.
//! - **Background promotion** (§5.3, Figure 7; khugepaged extended): each pass walks the
//!   processes' anonymous VMAs from a cursor. At a 1GB-aligned address whose 1GB range lies in
//!   the VMA it tries a 1GB collapse first (`scan_pud`: any swapped-out page or a page shared
//!   with another process refuses; up to `max_ptes_none_1g` unmapped base pages are zero-filled);
//!   if the range is refused it tries 2MB there and moves on by 2MB. If the 1GB block cannot
//!   be had (even after compaction, with `defrag`), the pass stops and the scanner sleeps
//!   `alloc_sleep_ms`, with no 2MB fallback in that pass, as in the authors' code. Ranges that
//!   are 2MB- but not 1GB-aligned get Linux's 2MB rules.
//!
//! - **Smart compaction** (§5.4, os/smart_compact.rs): when a 1GB promotion finds no free
//!   1GB block, the scanner reclaims page cache as Linux's direct reclaim would, then frees a
//!   1GB region by smart compaction (`retries`, `cooldown_ms`) and tries again. `smart=false`
//!   uses Linux's compaction instead (Trident-NC is `smart=false,retries=1`).
//!
//! - **Trident-pv** (§6): `pv=true` promotes 2MB-mapped ranges to 1GB by exchanging
//!   guest-physical mappings with the hypervisor (os/compact.rs `Exchange`).
//! - **Pre-zeroing** (the artifact's `async_zeroing` branch): `prezero=true` runs a daemon that
//!   zeroes free 1GB blocks (os/frames `prezero_one`), so 1GB faults skip the zero-fill.

use super::{parse_sizes, FaultDecision, FaultInfo, Features, Params, Policy, Sys};
use crate::error::{Error, Result};
use crate::mmu::machine::HostPage;
use crate::os::compact::{CollapseLimits, CollapseResult, Exchange};
use crate::os::smart_compact::{SmartLimits, SmartResult};
use crate::os::{OsFeatures, Vma};
use crate::spec::SysfsFlag;
use crate::units::PageSize;

pub const PARAMS: &str = "sizes=S1+S2 (superpage sizes to use, of 2MiB and 1GiB; default both; sizes=1GiB is Trident-1G-only); \
fault_1g=true|false (map 1GB pages at fault; false: only by promotion, Trident-pv's branch); \
khugepaged=1|0 (background promotion, default 1); pages_to_scan=N (base pages per pass, default 2097152, the artifact's); \
scan_sleep_ms=MS (10000); alloc_sleep_ms=MS (10000, Trident's); max_cpu=PCT (cap on the scanner's CPU share, 0 = none; Trident-pv used 10); \
cap_floor_ms=MS (with max_cpu, the least sleep after a pass: 1000, the authors'); defrag=1|0 (compact when a promotion finds no free block, default 1); smart=true|false (smart compaction for 1GB, default true; \
false: Linux's); retries=N (smart attempts per request, 5); cooldown_ms=MS (120: a source is not chosen again sooner); max_ptes_none_1g=N (262143); \
max_ptes_none=N (511); max_ptes_swap=N (64, 2MB only: any swapped page refuses 1GB); max_ptes_shared=N (256, 2MB only); \
pv=true|false (Trident-pv: a 1GB promotion exchanges 2MB mappings with the hypervisor by hypercall instead of copying; needs MACHINE+nested); \
hypercall_ns=NS (300, the paper's estimate of one hypercall); \
prezero=true|false (a daemon zeroes free 1GB blocks ahead of need, so a 1GB fault skips the zero-fill; default false, the authors' async_zeroing branch); \
prezero_cpu=PCT (share of one otherwise idle CPU the zeroing daemon may use, 100); \
pageblock_1g=true|false (Trident's kernel's buddy: 1GB pageblocks, pageblock_order = 18, and Linux 4.17's fallback steal; default false: Linux's 2MB pageblocks)";

/// trident's parameters (`PARAMS`); the defaults are the authors' kernel and artifact settings.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct TridentParams {
    /// Read by `parse_sizes`.
    #[allow(dead_code)]
    sizes: Option<String>,
    fault_1g: bool,
    khugepaged: SysfsFlag,
    pages_to_scan: u64,
    scan_sleep_ms: u64,
    alloc_sleep_ms: u64,
    max_cpu: u64,
    cap_floor_ms: u64,
    defrag: SysfsFlag,
    smart: bool,
    retries: u32,
    cooldown_ms: u64,
    max_ptes_none_1g: u64,
    max_ptes_none: u64,
    max_ptes_swap: u64,
    max_ptes_shared: u64,
    pv: bool,
    hypercall_ns: f64,
    prezero: bool,
    prezero_cpu: u64,
    pageblock_1g: bool,
}

impl Default for TridentParams {
    fn default() -> Self {
        TridentParams {
            sizes: None,
            fault_1g: true,
            khugepaged: SysfsFlag(true),
            // Trident-MICRO21-artifact scripts/common.sh: pages_to_scan=2097152 (8GiB of
            // address space per pass); alloc_sleep_millisecs=10000 in Trident's kernel (vanilla
            // 60000); scan_sleep_millisecs stays Linux's 10000.
            pages_to_scan: 2_097_152,
            scan_sleep_ms: 10_000,
            alloc_sleep_ms: 10_000,
            max_cpu: 0,
            // The authors' capped khugepaged loop sleeps at least a second after a pass.
            cap_floor_ms: 1000,
            // The artifact sets khugepaged defrag=1.
            defrag: SysfsFlag(true),
            // The artifact: compaction_smart=1, smart_compaction_retries=5; the kernel's
            // compaction_timeout is 120 ms.
            smart: true,
            retries: 5,
            cooldown_ms: 120,
            // Trident's mm/khugepaged.c: max_ptes_none for the PUD path is HPAGE_PUD_NR - 1;
            // the 2MB path keeps Linux's HPAGE_PMD_NR - 1, HPAGE_PMD_NR / 8, HPAGE_PMD_NR / 2.
            max_ptes_none_1g: 262_143,
            max_ptes_none: 511,
            max_ptes_swap: 64,
            max_ptes_shared: 256,
            pv: false,
            // Ram et al. §6: "a hypercall takes ~300ns".
            hypercall_ns: 300.0,
            // Off in Trident proper: asynchronous zeroing is the artifact's separate
            // `async_zeroing` branch. Its kernel thread runs on whatever CPU is free (ESTIMATE:
            // one whole CPU beside the program).
            prezero: false,
            prezero_cpu: 100,
            // Trident's kernel sets pageblock_order to 18 (1GB), so migrate-type grouping and
            // compaction work in 1GB regions (notes D1 §1.1). Off by default: on Table 3's
            // fragmented memory, Linux 4.17's compaction then gets stuck (docs/TRIDENT.md, "1GB
            // pageblocks").
            pageblock_1g: false,
        }
    }
}

pub struct Trident {
    /// Size indices of the 2MB (PMD) and 1GB (PUD) pages, if used.
    pmd_si: Option<u32>,
    pud_si: Option<u32>,
    p: TridentParams,
    next_wake: u64,
    cursor_pi: usize,
    cursor_addr: u64,
    // Counters.
    fault_alloc: [u64; 2],
    fault_fallback: [u64; 2],
    passes: u64,
    pages_scanned: u64,
    scan: [[u64; CollapseResult::ALL.len()]; 2],
    capped_sleeps: u64,
    smart_runs: [u64; SmartResult::ALL.len()],
    smart_attempts: u64,
    smart_bytes: u64,
    smart_regions: u64,
    /// Trident-pv: a hypercall failed, so the scanner copies from now on (the authors' static
    /// `skip` flag).
    pv_skip: bool,
    pv_cycles: u64,
    /// Successful 1GB promotions and the cycles they took (copy, zero-fill and exchange).
    promote_1g: u64,
    promote_1g_cycles: u64,
    /// ... of which zero-filling the range's unmapped parts.
    promote_1g_zero_cycles: u64,
    /// The zeroing daemon: when it last ran, the cycles it may still spend, and those it spent.
    prezero_at: u64,
    prezero_budget: u64,
    prezero_busy: u64,
}

pub fn build(params: &Params, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    let p: TridentParams = crate::spec::from_params("policy", "trident", params)?;
    let levels = parse_sizes("trident", params, sizes)?;
    let base = sizes[0];
    let find = |shift: u32| levels.iter().copied().find(|&si| sizes[si as usize].shift() == base.shift() + shift);
    // The PMD and PUD sizes: the pages one last-level table and one level above span.
    let (pmd_si, pud_si) = (find(9), find(18));
    if pud_si.is_none() && !params.contains_key("sizes") {
        return Err(Error::usage(format!(
            "policy trident: this machine has no {} page (Trident needs x86's 1GB pages; try --machine skylake)",
            PageSize::from_shift(base.shift() as u8 + 18).map(|s| s.to_string()).unwrap_or_default()
        )));
    }
    if let Some(&other) = levels[1..].iter().find(|&&si| Some(si) != pmd_si && Some(si) != pud_si) {
        return Err(Error::usage(format!("policy trident: sizes: {} is neither the 2MB nor the 1GB page (Trident uses those two)", sizes[other as usize])));
    }
    if !(p.hypercall_ns >= 0.0 && p.hypercall_ns < 1e9) {
        return Err(Error::usage(format!("policy trident: hypercall_ns={}: expected nanoseconds in [0, 1e9)", p.hypercall_ns)));
    }
    for (key, v) in [("max_cpu", p.max_cpu), ("prezero_cpu", p.prezero_cpu)] {
        if v > 100 {
            return Err(Error::usage(format!("policy trident: {key}={v}: expected a percentage in [0, 100]")));
        }
    }
    Ok(Box::new(Trident {
        pmd_si,
        pud_si,
        p,
        next_wake: 0,
        cursor_pi: 0,
        cursor_addr: 0,
        fault_alloc: [0; 2],
        fault_fallback: [0; 2],
        passes: 0,
        pages_scanned: 0,
        scan: [[0; CollapseResult::ALL.len()]; 2],
        capped_sleeps: 0,
        smart_runs: [0; SmartResult::ALL.len()],
        smart_attempts: 0,
        smart_bytes: 0,
        smart_regions: 0,
        pv_skip: false,
        pv_cycles: 0,
        promote_1g: 0,
        promote_1g_cycles: 0,
        promote_1g_zero_cycles: 0,
        prezero_at: 0,
        prezero_budget: 0,
        prezero_busy: 0,
    }))
}

/// Anonymous, not a file mapping, and not MADV_NOHUGEPAGE.
fn eligible(v: &Vma) -> bool {
    v.is_anonymous() && v.file.is_none() && v.thp_advice != Some(false)
}

impl Trident {
    /// Index of a size in the per-size counters: 0 for 2MB, 1 for 1GB.
    fn slot(&self, si: u32) -> Option<usize> {
        if Some(si) == self.pmd_si {
            Some(0)
        } else if Some(si) == self.pud_si {
            Some(1)
        } else {
            None
        }
    }

    fn limits(&self, pud: bool) -> CollapseLimits {
        if pud {
            // scan_pud: a swapped-out PTE aborts; every page must have page_count 1 (unshared).
            CollapseLimits { max_none: self.p.max_ptes_none_1g, max_swap: 0, max_shared: 0, ..CollapseLimits::ANY }
        } else {
            CollapseLimits {
                max_none: self.p.max_ptes_none.min(511),
                max_swap: self.p.max_ptes_swap,
                max_shared: self.p.max_ptes_shared,
                ..CollapseLimits::ANY
            }
        }
    }

    fn collapse(&mut self, sys: &mut Sys, pi: usize, addr: u64, si: u32) -> CollapseResult {
        let pud = Some(si) == self.pud_si;
        let mut lim = self.limits(pud);
        if pud && self.p.pv && !self.pv_skip {
            let host_backs_2m = sys.mmu.machine.nested.as_ref().is_some_and(|n| match n.host_page {
                HostPage::Guest => true,
                HostPage::Fixed(p) => p.shift() >= sys.os.base.shift() + 9,
            });
            lim.exchange = Exchange::Hypercall { host_backs_2m };
        }
        let before = (sys.os.compaction.clone(), self.pv_cycles);
        let r = self.collapse_with_compaction(sys, pi, addr, si, lim, pud);
        if pud {
            let (c, m) = (&sys.os.compaction, &sys.mmu.machine);
            let calls = c.exchange_hypercalls - before.0.exchange_hypercalls;
            let entries = c.exchanged_pmds - before.0.exchanged_pmds;
            // One hypercall's entry and exit, plus the host's swap of two PMD entries per
            // exchanged mapping (ESTIMATE: two page-table writes each).
            self.pv_cycles += (calls as f64 * self.p.hypercall_ns * m.clock_ghz + entries as f64 * 2.0 * m.pte_write_cycles) as u64;
            if c.exchange_failed_pmds > before.0.exchange_failed_pmds {
                self.pv_skip = true;
            }
            if r == CollapseResult::Succeed {
                let kib = |b: u64| b as f64 / 1024.0;
                let copy = kib(c.bytes_copied_background - before.0.bytes_copied_background) * m.copy_cycles_per_kib;
                let zero = kib(c.bytes_zeroed_background - before.0.bytes_zeroed_background) * m.zero_cycles_per_kib;
                self.promote_1g += 1;
                self.promote_1g_cycles += (copy + zero) as u64 + (self.pv_cycles - before.1);
                self.promote_1g_zero_cycles += zero as u64;
            }
        }
        r
    }

    fn collapse_with_compaction(&mut self, sys: &mut Sys, pi: usize, addr: u64, si: u32, lim: CollapseLimits, pud: bool) -> CollapseResult {
        let smart = pud && self.p.smart && self.p.defrag.0;
        let mut r = sys.os.collapse(pi, addr, si, lim, self.p.defrag.0 && !smart, sys.mmu);
        if smart && r == CollapseResult::AllocHugePageFail {
            // Direct reclaim, then smart compaction, then the allocation again.
            let order = sys.os.phys.max_order();
            sys.os.reclaim_for(order);
            if sys.os.phys.largest_free_order().is_none_or(|o| o < order) {
                let lim = SmartLimits { retries: self.p.retries, cooldown: sys.ms(self.p.cooldown_ms as f64) };
                let out = sys.os.smart_compact(sys.now.0, lim, sys.mmu);
                self.smart_runs[out.result as usize] += 1;
                self.smart_attempts += out.attempts as u64;
                self.smart_bytes += out.bytes_copied;
                self.smart_regions += out.regions_freed as u64;
            }
            r = sys.os.collapse(pi, addr, si, lim, false, sys.mmu);
        }
        self.scan[pud as usize][r as usize] += 1;
        r
    }

    /// The zeroing daemon (the authors' `async_zeroing` branch): in the time since it last ran,
    /// at `prezero_cpu` percent of a CPU, it zeroes free 1GB blocks one at a time. It does not
    /// bank time it had nothing to do in. Its cycles are its own, not the program's.
    fn prezero(&mut self, sys: &mut Sys) {
        let now = sys.now.0;
        let elapsed = now.saturating_sub(self.prezero_at);
        self.prezero_at = now;
        self.prezero_budget += elapsed / 100 * self.p.prezero_cpu;
        let m = &sys.mmu.machine;
        let cost = ((sys.os.base.bytes() << sys.os.phys.max_order()) as f64 / 1024.0 * m.zero_cycles_per_kib) as u64;
        while self.prezero_budget >= cost {
            if sys.os.phys.prezero_one().is_none() {
                self.prezero_budget = 0;
                return;
            }
            self.prezero_budget -= cost;
            self.prezero_busy += cost;
        }
    }

    /// The next address at or after the cursor, in process `pi`, where a 2MB-aligned range
    /// lies inside an eligible VMA: (address, end of its VMA).
    fn next_candidate(&self, sys: &Sys, pi: usize, pmd: u64) -> Option<(u64, u64)> {
        let p = &sys.os.procs[pi];
        if !p.alive || p.killed.is_some() {
            return None;
        }
        p.vmas.values().filter(|v| v.end > self.cursor_addr && eligible(v)).find_map(|v| {
            let a = v.start.max(self.cursor_addr).next_multiple_of(pmd);
            (a + pmd <= v.end).then_some((a, v.end))
        })
    }

    /// One khugepaged pass (Figure 7): up to `pages_to_scan` base pages of address space.
    fn scan_pass(&mut self, sys: &mut Sys) {
        self.passes += 1;
        let pmd = sys.os.base.bytes() << 9;
        let pud = sys.os.base.bytes() << 18;
        let shift = sys.os.base.shift();
        let n = sys.os.procs.len();
        let mut progress = 0u64;
        let mut procs_seen = 0;
        while progress < self.p.pages_to_scan && procs_seen <= n {
            let pi = self.cursor_pi % n.max(1);
            let Some((a, vma_end)) = self.next_candidate(sys, pi, pmd) else {
                self.cursor_pi = (pi + 1) % n.max(1);
                self.cursor_addr = 0;
                procs_seen += 1;
                continue;
            };
            if let Some(si) = self.pud_si.filter(|_| a % pud == 0 && a + pud <= vma_end) {
                let r = self.collapse(sys, pi, a, si);
                match r {
                    CollapseResult::Succeed | CollapseResult::PmdMapped | CollapseResult::PmdNull => {
                        progress += pud >> shift;
                        self.cursor_addr = a + pud;
                        continue;
                    }
                    CollapseResult::AllocHugePageFail => {
                        // No 2MB fallback in this pass (the authors' code); sleep, retry later.
                        progress += pud >> shift;
                        self.cursor_addr = a + pud;
                        self.next_wake = sys.now.0 + sys.ms(self.p.alloc_sleep_ms as f64);
                        break;
                    }
                    // Refused by scan_pud: take this range by 2MB pages, from here.
                    _ => {}
                }
            }
            progress += pmd >> shift;
            self.cursor_addr = a + pmd;
            if let Some(si) = self.pmd_si {
                if self.collapse(sys, pi, a, si) == CollapseResult::AllocHugePageFail {
                    self.next_wake = sys.now.0 + sys.ms(self.p.alloc_sleep_ms as f64);
                    break;
                }
            }
        }
        self.pages_scanned += progress;
    }
}

impl Policy for Trident {
    fn name(&self) -> String {
        "trident".into()
    }

    fn on_fault(&mut self, f: &FaultInfo) -> FaultDecision {
        if !eligible(f.vma) {
            return FaultDecision::base();
        }
        let mut allowed = 1u32;
        for si in [self.pmd_si, self.pud_si.filter(|_| self.p.fault_1g)].into_iter().flatten() {
            if f.vma.holds_aligned(f.va, f.sizes[si as usize].bytes()) {
                allowed |= 1 << si;
            }
        }
        let top = 31 - allowed.leading_zeros();
        FaultDecision { size_idx: top, within_vma: true, fallback: allowed, direct_compact: false, folio_orders: 0 }
    }

    fn on_fault_done(&mut self, wanted: u32, got: u32) {
        if let Some(k) = self.slot(wanted) {
            if got == wanted {
                self.fault_alloc[k] += 1;
            } else {
                self.fault_fallback[k] += 1;
            }
        }
    }

    fn features(&self) -> Features {
        // 1GB pageblocks only where 1GB pages are in use (sizes=2MiB keeps Linux's grouping).
        // 18: 1GB in 4KB frames (Trident is an x86-64 kernel).
        // With them, the buddy's fallback steal is Linux 4.17's, the kernel Trident is built on.
        let pageblock_order = (self.p.pageblock_1g && self.pud_si.is_some()).then_some(18);
        let os = OsFeatures { pageblock_order, steal_moves_free_blocks: pageblock_order.is_some(), ..OsFeatures::default() };
        Features { wants_tick: true, needs_nested: self.p.pv, os, ..Features::default() }
    }

    fn tick(&mut self, sys: &mut Sys) {
        if self.p.prezero {
            self.prezero(sys);
        }
        if !self.p.khugepaged.0 || sys.now.0 < self.next_wake {
            return;
        }
        let copied = sys.os.compaction.bytes_copied_background;
        let zeroed = sys.os.compaction.bytes_zeroed_background;
        let exchanging = self.pv_cycles;
        self.next_wake = sys.now.0 + sys.ms(self.p.scan_sleep_ms as f64);
        let was = sys.os.set_daemon(true);
        self.scan_pass(sys);
        sys.os.set_daemon(was);
        if self.p.max_cpu > 0 {
            // Trident-pv's CPU cap (its khugepaged loop): sleep max(cap_floor_ms, busy * 100 /
            // max_cpu), the pass's busy time being the copying, zeroing and hypercalls it did.
            let m = &sys.mmu.machine;
            let kib = |b: u64| b as f64 / 1024.0;
            let busy = kib(sys.os.compaction.bytes_copied_background - copied) * m.copy_cycles_per_kib
                + kib(sys.os.compaction.bytes_zeroed_background - zeroed) * m.zero_cycles_per_kib
                + (self.pv_cycles - exchanging) as f64;
            let sleep = (busy * 100.0 / self.p.max_cpu as f64) as u64;
            let floor = sys.ms(self.p.cap_floor_ms as f64);
            let wake = sys.now.0 + busy as u64 + sleep.max(floor);
            if wake > self.next_wake {
                self.capped_sleeps += 1;
                self.next_wake = self.next_wake.max(wake);
            }
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut c = vec![
            ("fault.2m_alloc".to_string(), self.fault_alloc[0]),
            ("fault.2m_fallback".to_string(), self.fault_fallback[0]),
            ("fault.1g_alloc".to_string(), self.fault_alloc[1]),
            ("fault.1g_fallback".to_string(), self.fault_fallback[1]),
            ("khugepaged.passes".to_string(), self.passes),
            ("khugepaged.pages_scanned".to_string(), self.pages_scanned),
            ("khugepaged.capped_sleeps".to_string(), self.capped_sleeps),
            ("smart_compaction.attempts".to_string(), self.smart_attempts),
            ("smart_compaction.bytes_copied".to_string(), self.smart_bytes),
            ("smart_compaction.regions_freed".to_string(), self.smart_regions),
            ("promote_1g.count".to_string(), self.promote_1g),
            ("promote_1g.cycles".to_string(), self.promote_1g_cycles),
            ("promote_1g.zero_cycles".to_string(), self.promote_1g_zero_cycles),
            ("pv.exchange_cycles".to_string(), self.pv_cycles),
            ("pv.hypercalls_stopped".to_string(), self.pv_skip as u64),
            ("prezero.busy_cycles".to_string(), self.prezero_busy),
        ];
        for r in SmartResult::ALL {
            c.push((format!("smart_compaction.{}", r.name()), self.smart_runs[r as usize]));
        }
        for (k, name) in ["2m", "1g"].iter().enumerate() {
            for r in CollapseResult::ALL {
                c.push((format!("khugepaged.scan_{name}.{}", r.name()), self.scan[k][r as usize]));
            }
        }
        c
    }
}
