//! superpager's live face: the page tables of a real Linux process, read through the interfaces
//! the kernel already offers, and the same policies applied to it.
//!
//! - `procfs`: a process's VMAs with the kernel's own per-VMA accounting (`/proc/PID/smaps`).
//! - `pagemap`: `/proc/PID/pagemap` entries and `/proc/kpageflags`, decoded
//!   (Documentation/admin-guide/mm/pagemap.rst); PFNs and page flags need CAP_SYS_ADMIN.
//! - `inspect`: mapping sizes, folio sizes, bloat (sampled) and physical contiguity per VMA.
//! - `collapse`: `process_madvise(MADV_COLLAPSE)` on another process, with typed failures.
//! - `navarro`: Navarro's incremental promotion, live: collapse an aligned 2MB range once its
//!   population reaches the threshold; every decision counted by reason.
//! - `reserve`: 2MB frames faulted in by superpager and freed right before each collapse, so the
//!   copy does not wait on the hypervisor (a VM whose host takes freed memory back).
//! - `rank`: ranks a process's 2MB ranges by physical-address access counts (DAMON's regions).
//!
//! Nothing here writes to the target's memory: the only action on a process is MADV_COLLAPSE,
//! which copies pages into a huge page and keeps their contents (the reserve writes only to
//! superpager's own mappings).

pub mod collapse;
pub mod error;
pub mod inspect;
pub mod navarro;
pub mod pagemap;
pub mod procfs;
pub mod ranges;
pub mod rank;
pub mod reserve;

pub use error::LiveError;

/// Base page of the processes we read (x86-64 and the 4KB-granule arm64 kernels).
pub const BASE_PAGE: u64 = 4096;
/// Pages in a PMD-mapped huge page (2MB / 4KB).
pub const PMD_PAGES: u64 = 512;
/// Bytes in a PMD-mapped huge page.
pub const PMD_BYTES: u64 = PMD_PAGES * BASE_PAGE;
/// Pages in a PUD-mapped huge page (1GB / 4KB).
pub const PUD_PAGES: u64 = 512 * 512;
/// Bytes in a PUD-mapped huge page.
pub const PUD_BYTES: u64 = PUD_PAGES * BASE_PAGE;
