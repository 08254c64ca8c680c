//! A process's VMAs with the kernel's own per-VMA accounting, from `/proc/PID/smaps`
//! (Documentation/filesystems/proc.rst, "smaps"). One read of the file; sizes in bytes.

use crate::LiveError;
use serde::Serialize;

/// One VMA as smaps shows it. Invariant: `start < end`, both page-aligned (the kernel's).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    pub inode: u64,
    /// The path or the kernel's name (`[heap]`, `[stack]`, `[vdso]`...); empty for anonymous.
    pub name: String,
    pub rss: u64,
    pub anonymous: u64,
    /// PMD-mapped anonymous THP (the kernel's AnonHugePages).
    pub anon_huge: u64,
    pub shmem_pmd: u64,
    pub file_pmd: u64,
    pub swap: u64,
    /// The VMA's page size: 4KB, or the hugetlb page size of a hugetlb VMA.
    pub kernel_page_size: u64,
    /// The kernel's THPeligible: a huge page may map this VMA.
    pub thp_eligible: bool,
    /// VmFlags as two-letter codes (`hg` = MADV_HUGEPAGE, `nh` = MADV_NOHUGEPAGE, `ht` = hugetlb).
    pub flags: Vec<String>,
}

/// What a VMA is, for the report and for a policy's eligibility.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VmaKind {
    /// Private anonymous memory (mmap, malloc arenas).
    Anon,
    Heap,
    Stack,
    /// Shared anonymous or tmpfs memory.
    Shmem,
    File,
    Hugetlb,
    /// vdso, vvar, vsyscall and the like.
    Special,
}

impl Vma {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
    pub fn has_flag(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x == f)
    }
    pub fn kind(&self) -> VmaKind {
        if self.has_flag("ht") {
            VmaKind::Hugetlb
        } else if self.name == "[heap]" {
            VmaKind::Heap
        } else if self.name.starts_with("[stack") {
            VmaKind::Stack
        } else if self.name.starts_with('[') {
            VmaKind::Special
        } else if self.inode == 0 && self.perms.ends_with('p') {
            VmaKind::Anon
        } else if self.perms.ends_with('s') && (self.inode == 0 || self.name.starts_with("/dev/zero") || self.name.starts_with("/memfd:")) {
            VmaKind::Shmem
        } else {
            VmaKind::File
        }
    }
    /// Private anonymous memory a 2MB anonymous THP may back (what MADV_COLLAPSE collapses).
    pub fn anon_private(&self) -> bool {
        matches!(self.kind(), VmaKind::Anon | VmaKind::Heap | VmaKind::Stack)
    }
    /// The aligned 2MB ranges that lie wholly inside this VMA: (first, end), end exclusive.
    pub fn pmd_ranges(&self) -> (u64, u64) {
        aligned_inside(self.start, self.end, crate::PMD_BYTES)
    }
}

/// The aligned `size` blocks wholly inside [start, end): (first block, end of the last).
pub fn aligned_inside(start: u64, end: u64, size: u64) -> (u64, u64) {
    let first = start.div_ceil(size) * size;
    let last = end / size * size;
    if first >= last {
        (first, first)
    } else {
        (first, last)
    }
}

fn kb_field(rest: &str) -> Option<u64> {
    let mut it = rest.split_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") => Some(n * 1024),
        _ => None,
    }
}

/// Parses smaps text. `path` names the file in errors.
pub fn parse_smaps(text: &str, path: &str) -> Result<Vec<Vma>, LiveError> {
    let mut out: Vec<Vma> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |msg: &str| LiveError::Parse { path: path.to_string(), line: i + 1, msg: msg.to_string() };
        if line.is_empty() {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                // A VMA header: start-end perms offset dev inode [name]
                let mut f = line.splitn(6, char::is_whitespace);
                f.next();
                let perms = f.next().ok_or_else(|| bad("no permissions"))?.to_string();
                let offset = u64::from_str_radix(f.next().ok_or_else(|| bad("no offset"))?, 16).map_err(|_| bad("bad offset"))?;
                f.next(); // device
                let inode: u64 = f.next().ok_or_else(|| bad("no inode"))?.parse().map_err(|_| bad("bad inode"))?;
                let name = f.next().unwrap_or("").trim().to_string();
                if start >= end {
                    return Err(bad("VMA with start >= end"));
                }
                out.push(Vma { start, end, perms, offset, inode, name, kernel_page_size: crate::BASE_PAGE, ..Default::default() });
                continue;
            }
        }
        let Some(v) = out.last_mut() else {
            return Err(bad("a field before any VMA header"));
        };
        let Some((key, rest)) = line.split_once(':') else {
            return Err(bad("neither a VMA header nor a 'Key: value' line"));
        };
        match key {
            "Rss" => v.rss = kb_field(rest).ok_or_else(|| bad("bad Rss"))?,
            "Anonymous" => v.anonymous = kb_field(rest).ok_or_else(|| bad("bad Anonymous"))?,
            "AnonHugePages" => v.anon_huge = kb_field(rest).ok_or_else(|| bad("bad AnonHugePages"))?,
            "ShmemPmdMapped" => v.shmem_pmd = kb_field(rest).ok_or_else(|| bad("bad ShmemPmdMapped"))?,
            "FilePmdMapped" => v.file_pmd = kb_field(rest).ok_or_else(|| bad("bad FilePmdMapped"))?,
            "Swap" => v.swap = kb_field(rest).ok_or_else(|| bad("bad Swap"))?,
            "KernelPageSize" => v.kernel_page_size = kb_field(rest).ok_or_else(|| bad("bad KernelPageSize"))?,
            "THPeligible" => v.thp_eligible = rest.trim() == "1",
            "VmFlags" => v.flags = rest.split_whitespace().map(str::to_string).collect(),
            _ => {}
        }
    }
    Ok(out)
}

/// Reads and parses `/proc/PID/smaps`. A process that has exited (or is a zombie) is `Gone`.
pub fn read_vmas(pid: i32) -> Result<Vec<Vma>, LiveError> {
    let path = format!("/proc/{pid}/smaps");
    let text = std::fs::read_to_string(&path).map_err(|e| LiveError::from_io(pid, &path, &e))?;
    if text.is_empty() && !is_alive(pid) {
        return Err(LiveError::Gone { pid });
    }
    parse_smaps(&text, &path)
}

/// The process exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the last ')' (the command name may hold spaces and parentheses).
    match s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().next()) {
        Some(st) => st != "Z" && st != "X",
        None => false,
    }
}
