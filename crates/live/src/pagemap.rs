//! `/proc/PID/pagemap` and `/proc/kpageflags`, decoded. Bit positions from the kernel's
//! Documentation/admin-guide/mm/pagemap.rst and include/uapi/linux/kernel-page-flags.h.
//! Without CAP_SYS_ADMIN the kernel zeroes pagemap's PFN field and refuses kpageflags: both
//! readers say so (`pfns_visible`, `KpageFlagsFile::open` returning None) instead of failing.

use crate::LiveError;
use std::fs::File;
use std::os::unix::fs::FileExt;
use superpager_core::units::Pfn;

/// One pagemap entry (64 bits per virtual page).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PagemapEntry(pub u64);

impl PagemapEntry {
    const PRESENT: u64 = 1 << 63; // pagemap.rst: "Bit 63 page present"
    const SWAPPED: u64 = 1 << 62; // "Bit 62 page swapped"
    const FILE_OR_SHARED: u64 = 1 << 61; // "Bit 61 page is file-page or shared-anon"
    const PFN_MASK: u64 = (1 << 55) - 1; // "Bits 0-54 page frame number (PFN) if present"

    pub fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }
    pub fn swapped(self) -> bool {
        self.0 & Self::SWAPPED != 0
    }
    pub fn file_or_shared(self) -> bool {
        self.0 & Self::FILE_OR_SHARED != 0
    }
    /// The frame, when present and visible (the kernel reports 0 to unprivileged readers).
    pub fn pfn(self) -> Option<Pfn> {
        let p = self.0 & Self::PFN_MASK;
        (self.present() && p != 0).then_some(Pfn(p))
    }
}

/// One kpageflags word (include/uapi/linux/kernel-page-flags.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct KpageFlags(pub u64);

impl KpageFlags {
    pub const ANON: u32 = 12;
    pub const COMPOUND_HEAD: u32 = 15;
    pub const COMPOUND_TAIL: u32 = 16;
    /// A hugetlb page.
    pub const HUGE: u32 = 17;
    pub const NOPAGE: u32 = 20;
    /// Part of a transparent huge page (a large anonymous or page-cache folio).
    pub const THP: u32 = 22;
    pub const ZERO_PAGE: u32 = 24;

    pub fn has(self, bit: u32) -> bool {
        self.0 >> bit & 1 != 0
    }
    pub fn head(self) -> bool {
        self.has(Self::COMPOUND_HEAD)
    }
    pub fn tail(self) -> bool {
        self.has(Self::COMPOUND_TAIL)
    }
    pub fn zero_page(self) -> bool {
        self.has(Self::ZERO_PAGE)
    }
}

/// Reads a process's pagemap with positioned reads (no seek state, no allocation per read).
pub struct Pagemap {
    /// Reopened when the process execs: an open pagemap keeps the old address space, which
    /// reads as empty once it is gone.
    file: std::cell::RefCell<File>,
    pid: i32,
    path: String,
}

impl Pagemap {
    pub fn open(pid: i32) -> Result<Pagemap, LiveError> {
        let path = format!("/proc/{pid}/pagemap");
        let file = File::open(&path).map_err(|e| LiveError::from_io(pid, &path, &e))?;
        Ok(Pagemap { file: std::cell::RefCell::new(file), pid, path })
    }

    /// Fills `out` with the entries of the virtual pages from `vaddr` on. A range the process
    /// no longer maps reads as zeros (not present), as the kernel reports it.
    pub fn read(&self, vaddr: u64, out: &mut [u64]) -> Result<(), LiveError> {
        let off = vaddr / crate::BASE_PAGE * 8;
        let io = |e: std::io::Error| LiveError::from_io(self.pid, &self.path, &e);
        let mut got = read_words(&self.file.borrow(), off, out).map_err(io)?;
        if got < out.len() {
            if !crate::procfs::is_alive(self.pid) {
                return Err(LiveError::Gone { pid: self.pid });
            }
            if got == 0 {
                // Nothing at all: the process may have exec'd; read its new address space.
                *self.file.borrow_mut() = File::open(&self.path).map_err(io)?;
                got = read_words(&self.file.borrow(), off, out).map_err(io)?;
            }
            out[got..].fill(0);
        }
        Ok(())
    }
}

/// Positioned reads of 64-bit words from byte `off` of `file` into `out`, until it is full or
/// the file ends: the number of whole words read. Shared by pagemap and kpageflags.
fn read_words(file: &File, off: u64, out: &mut [u64]) -> std::io::Result<usize> {
    // SAFETY: the byte view covers exactly `out`, and every bit pattern is a valid u64.
    let bytes = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, out.len() * 8) };
    let mut done = 0;
    while done < bytes.len() {
        match file.read_at(&mut bytes[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done / 8)
}

/// `/proc/kpageflags`: flags per physical frame. Root only.
pub struct KpageFlagsFile {
    file: File,
}

impl KpageFlagsFile {
    /// None when this user may not read it (not root).
    pub fn open() -> Option<KpageFlagsFile> {
        File::open("/proc/kpageflags").ok().map(|file| KpageFlagsFile { file })
    }

    /// Fills `out` with the flags of the frames from `pfn` on; frames past the end read as NOPAGE.
    pub fn read(&self, pfn: Pfn, out: &mut [u64]) -> Result<(), LiveError> {
        let got = read_words(&self.file, pfn.0 * 8, out).map_err(|e| LiveError::Io { path: "/proc/kpageflags".into(), msg: e.to_string() })?;
        out[got..].fill(1 << KpageFlags::NOPAGE);
        Ok(())
    }

    pub fn one(&self, pfn: Pfn) -> Result<KpageFlags, LiveError> {
        let mut w = [0u64; 1];
        self.read(pfn, &mut w)?;
        Ok(KpageFlags(w[0]))
    }
}

/// Reads the flags of every present page in `entries` into `flags` (same length), one read per
/// run of consecutive frames, so a process backed by huge pages costs a few reads per 2MB.
/// Pages not present (or with hidden frames) get 0.
pub fn flags_for(kf: &KpageFlagsFile, entries: &[u64], flags: &mut [u64]) -> Result<(), LiveError> {
    debug_assert_eq!(entries.len(), flags.len());
    let mut i = 0;
    while i < entries.len() {
        let Some(p) = PagemapEntry(entries[i]).pfn() else {
            flags[i] = 0;
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < entries.len() && PagemapEntry(entries[j]).pfn() == Some(Pfn(p.0 + (j - i) as u64)) {
            j += 1;
        }
        kf.read(p, &mut flags[i..j])?;
        i = j;
    }
    Ok(())
}
