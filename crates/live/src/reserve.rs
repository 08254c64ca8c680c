//! The frame reserve: 2MB frames superpager faults in, in its own address space, and hands to
//! the kernel one at a time, right before each collapse.
//!
//! Why: a collapse (MADV_COLLAPSE) allocates a fresh 2MB frame and copies the range into it
//! while it holds the target's mmap lock for writing, so the program stalls on any fault for as
//! long as the copy takes. In a virtual machine whose hypervisor takes freed guest memory back
//! (virtio-balloon free page reporting, VIRTIO_BALLOON_F_REPORTING), that fresh frame is usually
//! one the host has discarded, and the copy's first touch of it faults in the host for each of
//! its 4KB pieces: measured on the AMD EPYC VM of docs/LIVE.md, 5.5-7.6ms a collapse, against
//! 0.65-0.69ms when a frame faulted in beforehand was freed just before it (512MiB, 256
//! collapses by process_madvise from another process). The reserve moves that host fault out
//! of the target's critical section into superpager's own thread, where the CPU budget counts
//! it. It is the nearest Linux offers to Navarro's reservations: frames set aside before the
//! promotion that needs them.
//!
//! How a frame reaches the collapse: the reserve maps each frame alone (a 2MB-aligned anonymous
//! mapping, MADV_HUGEPAGE, one write: the kernel allocates and zeroes a huge page). `hand_over`
//! unmaps one; the freed 2MB block goes to this CPU's free list for its order (or the zone's
//! free list head), which is where the collapse's allocation, made by the same thread
//! immediately after, looks first. Nothing guarantees it, so every hand-over is checked: the
//! collapsed range's frame (the target's pagemap) is compared with the frame handed over, and
//! counted as used or missed.
//!
//! Invariants:
//! - `frames` holds only mappings of this process that were backed by a huge page when filled
//!   (checked through our own pagemap and kpageflags; one that got 4KB pages is unmapped at
//!   once and counted `not_huge`).
//! - Every frame is unmapped exactly once: by `hand_over`, or on drop.
//! - Nothing here touches the target's memory.

use crate::collapse::{CollapseFailure, Pidfd};
use crate::pagemap::{KpageFlags, KpageFlagsFile, Pagemap, PagemapEntry};
use crate::{LiveError, PMD_BYTES};
use serde::Serialize;
use superpager_core::units::Pfn;

/// Whether the reserve is used (`reserve=` of navarro-live).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReserveMode {
    On,
    Off,
    /// On where the hypervisor takes freed memory back (`host_reclaims_free_memory`).
    Auto,
}

impl ReserveMode {
    pub fn parse(s: &str) -> Option<ReserveMode> {
        match s {
            "on" => Some(ReserveMode::On),
            "off" => Some(ReserveMode::Off),
            "auto" => Some(ReserveMode::Auto),
            _ => None,
        }
    }
}

/// VIRTIO_BALLOON_F_REPORTING, include/uapi/linux/virtio_balloon.h: the guest reports free
/// pages and the host may discard them.
const VIRTIO_BALLOON_F_REPORTING: usize = 5;

/// Whether a virtio balloon with free page reporting is bound here: the host then discards
/// memory the guest frees, and a fresh frame costs a host fault on first touch. `features` of a
/// virtio device is its negotiated feature bits as a string of '0'/'1', bit 0 first
/// (drivers/virtio/virtio.c, features_show).
pub fn host_reclaims_free_memory(sys_virtio_balloon: &std::path::Path) -> bool {
    let Ok(dir) = std::fs::read_dir(sys_virtio_balloon) else { return false };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("virtio"))
        .any(|e| std::fs::read_to_string(e.path().join("features")).is_ok_and(|f| f.as_bytes().get(VIRTIO_BALLOON_F_REPORTING) == Some(&b'1')))
}

/// Where the virtio balloon driver lists its devices.
pub const SYS_VIRTIO_BALLOON: &str = "/sys/bus/virtio/drivers/virtio_balloon";

/// What the reserve did; every frame is counted once at each stage it reached.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReserveCounters {
    /// Whether the reserve is in use this run, and why (`reserve=on`, `off`, or what `auto` saw).
    pub mode: &'static str,
    /// Frames faulted in as huge pages.
    pub filled: u64,
    /// Fills the kernel backed with 4KB pages instead (no free 2MB block, or THP disabled):
    /// unmapped at once.
    pub not_huge: u64,
    /// Fills refused by mmap.
    pub map_failed: u64,
    /// Wall seconds spent filling, in superpager's thread (mmap, the fault and its zeroing, the
    /// check): per fill about 0.15ms where the host still backs the block, about 4ms where it
    /// took it back (docs/LIVE.md).
    pub fill_s: f64,
    /// GIVE_UP fills in a row got no huge page, and the reserve turned itself off.
    pub gave_up: bool,
    /// Frames unmapped right before a collapse.
    pub handed_over: u64,
    /// Collapses that took the frame handed over (the range's new frame is that frame).
    pub used: u64,
    /// Collapses that took another frame.
    pub missed: u64,
}

struct Frame {
    addr: u64,
    pfn: Pfn,
}

pub struct FrameReserve {
    enabled: bool,
    frames: Vec<Frame>,
    /// Our own pagemap (PFNs need CAP_SYS_ADMIN, as the policy does).
    own: Option<Pagemap>,
    kf: Option<KpageFlagsFile>,
    /// The frame `hand_over` unmapped last, until `check` compares it with the collapse's.
    handed: Option<Pfn>,
    /// Fills in a row that got no huge page; at GIVE_UP the reserve turns itself off.
    failures_in_a_row: u32,
    pub counters: ReserveCounters,
}

/// Fills in a row without a huge page after which the reserve stops trying (THP `never`, or no
/// free 2MB block anywhere): each one costs a mapping, a fault and a pagemap read for nothing.
const GIVE_UP: u32 = 16;

impl FrameReserve {
    pub fn new(mode: ReserveMode) -> FrameReserve {
        let (enabled, why) = match mode {
            ReserveMode::On => (true, "on"),
            ReserveMode::Off => (false, "off"),
            ReserveMode::Auto if host_reclaims_free_memory(std::path::Path::new(SYS_VIRTIO_BALLOON)) => (true, "auto: on, the host takes freed memory back"),
            ReserveMode::Auto => (false, "auto: off, no free page reporting seen"),
        };
        let own = if enabled { Pagemap::open(std::process::id() as i32).ok() } else { None };
        let kf = if enabled { KpageFlagsFile::open() } else { None };
        FrameReserve { enabled, frames: Vec::new(), own, kf, handed: None, failures_in_a_row: 0, counters: ReserveCounters { mode: why, ..Default::default() } }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Frames held now.
    pub fn held(&self) -> usize {
        self.frames.len()
    }

    /// Faults in frames until `n` are held (at most `n` attempts, so a kernel that gives no huge
    /// pages costs `n` small mappings, not a loop).
    pub fn fill_to(&mut self, n: usize) {
        if !self.enabled {
            return;
        }
        let mut tries = n.saturating_sub(self.frames.len());
        let started = std::time::Instant::now();
        while self.frames.len() < n && tries > 0 {
            tries -= 1;
            match map_huge_frame() {
                None => self.counters.map_failed += 1,
                Some(addr) => match self.huge_frame_at(addr) {
                    Some(pfn) => {
                        self.frames.push(Frame { addr, pfn });
                        self.counters.filled += 1;
                        self.failures_in_a_row = 0;
                        continue;
                    }
                    None => {
                        unmap(addr);
                        self.counters.not_huge += 1;
                    }
                },
            }
            self.failures_in_a_row += 1;
            if self.failures_in_a_row >= GIVE_UP {
                self.enabled = false;
                self.counters.gave_up = true;
                break;
            }
        }
        self.counters.fill_s += started.elapsed().as_secs_f64();
    }

    /// The frame backing our mapping at `addr`, if it is the head of a huge page. Without our
    /// PFNs (not root) a frame cannot be checked and is not kept.
    fn huge_frame_at(&self, addr: u64) -> Option<Pfn> {
        let mut e = [0u64; 1];
        self.own.as_ref()?.read(addr, &mut e).ok()?;
        let pfn = PagemapEntry(e[0]).pfn()?;
        if pfn.0 % crate::PMD_PAGES != 0 {
            return None;
        }
        match &self.kf {
            Some(kf) => {
                let f = kf.one(pfn).ok()?;
                (f.has(KpageFlags::THP) && f.head()).then_some(pfn)
            }
            None => Some(pfn),
        }
    }

    /// Frees one held frame for the collapse about to run; false when none is held.
    pub fn hand_over(&mut self) -> bool {
        let Some(f) = self.frames.pop() else { return false };
        unmap(f.addr);
        self.handed = Some(f.pfn);
        self.counters.handed_over += 1;
        true
    }

    /// After a successful collapse of `range` in the process `target` reads: whether it took the
    /// frame handed over just before (counted).
    pub fn check(&mut self, target: &Pagemap, range: u64) {
        let Some(handed) = self.handed.take() else { return };
        let mut e = [0u64; 1];
        let got = target.read(range, &mut e).ok().and_then(|_| PagemapEntry(e[0]).pfn());
        if got == Some(handed) {
            self.counters.used += 1;
        } else {
            self.counters.missed += 1;
        }
    }

    /// A hand-over whose collapse failed: the frame went back to the free lists unused.
    pub fn forget(&mut self) {
        if self.handed.take().is_some() {
            self.counters.missed += 1;
        }
    }
}

/// One collapse of a 2MB range of another process through the reserve: a frame filled, handed
/// over, the collapse, and the check of which frame it took (in the target's pagemap, which the
/// caller holds for its own reads). What navarro-live and damon-live share; with the reserve off
/// it is the collapse alone.
pub struct ReservedCollapse {
    pidfd: Pidfd,
    pub reserve: FrameReserve,
}

impl ReservedCollapse {
    pub fn new(pid: i32, mode: ReserveMode) -> Result<ReservedCollapse, LiveError> {
        let pidfd = Pidfd::open(pid).map_err(|e| LiveError::from_io(pid, &format!("pidfd_open({pid})"), &e))?;
        Ok(ReservedCollapse { pidfd, reserve: FrameReserve::new(mode) })
    }

    /// MADV_COLLAPSE of the 2MB range at `range` (2MB-aligned) of the process `target` reads.
    /// Ok(bytes advised) or the typed failure and errno; the reserve counts the hand-over either
    /// way.
    pub fn collapse(&mut self, target: &Pagemap, range: u64) -> Result<u64, (CollapseFailure, i32)> {
        self.reserve.fill_to(1);
        self.reserve.hand_over();
        let r = self.pidfd.collapse(range, PMD_BYTES);
        match r {
            Ok(_) => self.reserve.check(target, range),
            Err(_) => self.reserve.forget(),
        }
        r
    }
}

impl Drop for FrameReserve {
    fn drop(&mut self) {
        for f in self.frames.drain(..) {
            unmap(f.addr);
        }
    }
}

/// A 2MB-aligned anonymous mapping of 2MB, advised MADV_HUGEPAGE and written once, so that the
/// kernel backs it with a huge page (zeroing it, which faults it in on the host). None if mmap
/// fails.
fn map_huge_frame() -> Option<u64> {
    let len = 2 * PMD_BYTES as usize;
    // SAFETY: an anonymous private mapping at an address the kernel picks; nothing else refers
    // to it until it is returned.
    let raw = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let raw = raw as u64;
    let addr = raw.next_multiple_of(PMD_BYTES);
    // SAFETY: both trims lie inside the mapping just made; what stays is [addr, addr + 2MB).
    unsafe {
        if addr > raw {
            libc::munmap(raw as *mut libc::c_void, (addr - raw) as usize);
        }
        let end = raw + len as u64;
        if addr + PMD_BYTES < end {
            libc::munmap((addr + PMD_BYTES) as *mut libc::c_void, (end - addr - PMD_BYTES) as usize);
        }
        libc::madvise(addr as *mut libc::c_void, PMD_BYTES as usize, libc::MADV_HUGEPAGE);
        std::ptr::write_volatile(addr as *mut u8, 1);
    }
    Some(addr)
}

fn unmap(addr: u64) {
    // SAFETY: `addr` is a 2MB mapping `map_huge_frame` made, unmapped only here, once.
    unsafe { libc::munmap(addr as *mut libc::c_void, PMD_BYTES as usize) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balloon(dir: &std::path::Path, features: &str) {
        let d = dir.join("virtio0");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("features"), features).unwrap();
    }

    #[test]
    fn free_page_reporting_is_read_from_the_balloons_feature_bits() {
        let t = std::env::temp_dir().join(format!("superpager-reserve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        assert!(!host_reclaims_free_memory(&t), "no driver directory: no reporting");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("bind"), "").unwrap();
        assert!(!host_reclaims_free_memory(&t), "a driver with no device");
        balloon(&t, "0110000100000000\n");
        assert!(!host_reclaims_free_memory(&t), "bit 5 clear");
        balloon(&t, "0110010100000000\n");
        assert!(host_reclaims_free_memory(&t), "bit 5 set (this AMD EPYC VM's balloon)");
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn modes_parse_and_off_holds_nothing() {
        assert_eq!(ReserveMode::parse("auto"), Some(ReserveMode::Auto));
        assert_eq!(ReserveMode::parse("yes"), None);
        let mut r = FrameReserve::new(ReserveMode::Off);
        r.fill_to(4);
        assert_eq!(r.held(), 0);
        assert!(!r.hand_over());
        assert_eq!(r.counters.filled + r.counters.not_huge + r.counters.map_failed, 0);
    }

    #[test]
    fn every_fill_is_counted_once_and_only_huge_frames_are_held() {
        let mut r = FrameReserve::new(ReserveMode::On);
        r.fill_to(3);
        let c = &r.counters;
        assert_eq!(c.filled + c.not_huge + c.map_failed, 3, "three attempts, each counted once");
        assert_eq!(r.held() as u64, c.filled);
        // Without root or THP no frame can be shown huge, and none is held.
        while r.hand_over() {}
        assert_eq!(r.counters.handed_over, r.counters.filled);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn a_reserve_that_gets_no_huge_pages_gives_up_after_a_bounded_number_of_fills() {
        let mut r = FrameReserve::new(ReserveMode::On);
        // No pagemap of our own: no fill can be shown huge (as without root or THP).
        r.own = None;
        for _ in 0..100 {
            r.fill_to(1);
        }
        let c = &r.counters;
        assert!(c.gave_up && !r.enabled(), "still trying after {} failed fills", c.not_huge + c.map_failed);
        assert_eq!(c.not_huge + c.map_failed, GIVE_UP as u64);
        assert_eq!(c.filled, 0);
    }
}
