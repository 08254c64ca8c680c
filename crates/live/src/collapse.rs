//! MADV_COLLAPSE on another process: `process_madvise(pidfd, [range], MADV_COLLAPSE)`.
//! The kernel copies the range's pages into a new huge page and maps it with one PMD; the
//! contents are kept (mm/khugepaged.c, `madvise_collapse`). Needs CAP_SYS_NICE and ptrace
//! read access to the target (mm/madvise.c, process_madvise), i.e. root here.

use serde::Serialize;

/// include/uapi/asm-generic/mman-common.h
pub const MADV_COLLAPSE: i32 = 25;
/// arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h (the same numbers).
const SYS_PIDFD_OPEN: libc::c_long = 434;
const SYS_PROCESS_MADVISE: libc::c_long = 440;

/// Why a collapse failed, from the errno the kernel returned (madvise(2), "MADV_COLLAPSE").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CollapseFailure {
    /// EAGAIN: a transient condition (a page locked or under writeback, the mmap lock).
    Busy,
    /// ENOMEM: no free 2MB block and compaction could not make one (or a memcg charge failed).
    NoHugePage,
    /// EINVAL: the range is not eligible (VMA flags, not anonymous or file THP-capable, gone).
    NotEligible,
    /// EPERM: the caller lacks CAP_SYS_NICE or the target refuses THP (PR_SET_THP_DISABLE).
    NotPermitted,
    /// ESRCH: the process exited.
    Gone,
    /// Any other errno.
    Other,
}

impl CollapseFailure {
    pub fn from_errno(e: i32) -> CollapseFailure {
        match e {
            libc::EAGAIN => CollapseFailure::Busy,
            libc::ENOMEM => CollapseFailure::NoHugePage,
            libc::EINVAL | libc::EFAULT => CollapseFailure::NotEligible,
            libc::EPERM | libc::EACCES => CollapseFailure::NotPermitted,
            libc::ESRCH => CollapseFailure::Gone,
            _ => CollapseFailure::Other,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            CollapseFailure::Busy => "busy",
            CollapseFailure::NoHugePage => "no_huge_page",
            CollapseFailure::NotEligible => "not_eligible",
            CollapseFailure::NotPermitted => "not_permitted",
            CollapseFailure::Gone => "gone",
            CollapseFailure::Other => "other",
        }
    }
    pub const ALL: [CollapseFailure; 6] = [
        CollapseFailure::Busy,
        CollapseFailure::NoHugePage,
        CollapseFailure::NotEligible,
        CollapseFailure::NotPermitted,
        CollapseFailure::Gone,
        CollapseFailure::Other,
    ];
}

/// A pidfd: the target stays the same process even if its PID is reused after it exits.
pub struct Pidfd {
    fd: libc::c_int,
    pub pid: i32,
}

impl Pidfd {
    pub fn open(pid: i32) -> std::io::Result<Pidfd> {
        let fd = unsafe { libc::syscall(SYS_PIDFD_OPEN, pid, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Pidfd { fd: fd as libc::c_int, pid })
    }

    /// Collapses [addr, addr+len) of the target. Ok(bytes advised) or the typed failure and errno.
    pub fn collapse(&self, addr: u64, len: u64) -> Result<u64, (CollapseFailure, i32)> {
        let iov = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len as usize };
        let r = unsafe { libc::syscall(SYS_PROCESS_MADVISE, self.fd, &iov as *const libc::iovec, 1usize, MADV_COLLAPSE, 0u32) };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err((CollapseFailure::from_errno(e), e));
        }
        Ok(r as u64)
    }
}

impl Drop for Pidfd {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}
