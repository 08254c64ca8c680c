//! Traces: the record model shared by every reader, writer, importer and generator.
//!
//! A trace is a stream of two kinds of record: **accesses** (a load, store, read-modify-write or
//! instruction fetch at a virtual address, possibly standing for a run of `count` accesses to the
//! same 4KiB page) and **events** (address-space system calls, process and thread switches,
//! instruction-count marks). Accesses belong to the process and thread named by the latest
//! `Context` event.

pub mod capture;
pub mod champsim;
pub mod gen;
pub mod info;
pub mod join;
pub mod lackey;
pub mod merge;
pub mod spt;
pub mod text;
pub mod varint;

/// The page granularity at which the writer collapses runs. 4KiB is the smallest base page of
/// every machine preset, so a run inside one 4KiB page is inside one page of any size.
pub const COLLAPSE_SHIFT: u32 = 12;
/// The finer granularity a writer may be asked for (`capture --collapse line`): one record per
/// cache line a run touches, so a data cache model sees every line (64 bytes, the line of
/// every machine preset), where a page-collapsed run hands it only the first.
pub const LINE_COLLAPSE_SHIFT: u32 = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AccessKind {
    Load = 0,
    Store = 1,
    /// A run that both loads and stores (lackey's `M`, or a merged load+store run).
    Modify = 2,
    Fetch = 3,
}

impl AccessKind {
    #[inline(always)]
    pub fn from_bits(b: u8) -> AccessKind {
        match b & 3 {
            0 => AccessKind::Load,
            1 => AccessKind::Store,
            2 => AccessKind::Modify,
            _ => AccessKind::Fetch,
        }
    }
    #[inline(always)]
    pub fn is_fetch(self) -> bool {
        self == AccessKind::Fetch
    }
    #[inline(always)]
    pub fn writes(self) -> bool {
        matches!(self, AccessKind::Store | AccessKind::Modify)
    }
    pub fn letter(self) -> char {
        match self {
            AccessKind::Load => 'L',
            AccessKind::Store => 'S',
            AccessKind::Modify => 'M',
            AccessKind::Fetch => 'F',
        }
    }
    /// Merge the kinds of two data accesses in one run.
    #[inline(always)]
    pub fn merge(self, other: AccessKind) -> AccessKind {
        if self == other {
            self
        } else {
            AccessKind::Modify
        }
    }
}

/// One access record. `count` >= 1 accesses, all within the 4KiB page of `addr`; `addr` and
/// `size` are those of the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub addr: u64,
    pub count: u32,
    pub kind: AccessKind,
    pub size: u8,
}

impl Access {
    pub fn new(addr: u64, kind: AccessKind, size: u8) -> Access {
        Access { addr, count: 1, kind, size }
    }
}

/// Protection bits as in mmap(2).
pub const PROT_READ: u8 = 1;
pub const PROT_WRITE: u8 = 2;
pub const PROT_EXEC: u8 = 4;

/// mmap flags (the Linux x86-64 values).
pub const MAP_SHARED: u32 = 0x01;
pub const MAP_PRIVATE: u32 = 0x02;
pub const MAP_FIXED: u32 = 0x10;
pub const MAP_ANONYMOUS: u32 = 0x20;
pub const MAP_GROWSDOWN: u32 = 0x100;
pub const MAP_HUGETLB: u32 = 0x40000;

/// madvise advice values (Linux).
pub const MADV_DONTNEED: u32 = 4;
pub const MADV_HUGEPAGE: u32 = 14;
pub const MADV_NOHUGEPAGE: u32 = 15;
pub const MADV_COLLAPSE: u32 = 25;

/// Address-space and bookkeeping events. Field meanings follow the Linux system calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Following accesses and events belong to this process and thread.
    Context {
        pid: u32,
        tid: u32,
    },
    Mmap {
        addr: u64,
        len: u64,
        prot: u8,
        flags: u32,
        fd: i32,
        offset: u64,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Mremap {
        old_addr: u64,
        old_len: u64,
        new_addr: u64,
        new_len: u64,
    },
    Mprotect {
        addr: u64,
        len: u64,
        prot: u8,
    },
    /// The program break after a successful brk(2).
    Brk {
        addr: u64,
    },
    Madvise {
        addr: u64,
        len: u64,
        advice: u32,
    },
    /// The current process forked `child`.
    Fork {
        child: u32,
    },
    /// The current process exited.
    Exit {
        code: i32,
    },
    FileOpen {
        fd: i32,
        path: String,
        size: u64,
    },
    FileClose {
        fd: i32,
    },
    FileRead {
        fd: i32,
        offset: u64,
        len: u64,
    },
    /// Instructions retired by the current thread since its previous mark.
    Insns {
        count: u64,
    },
}

impl Event {
    pub fn name(&self) -> &'static str {
        match self {
            Event::Context { .. } => "ctx",
            Event::Mmap { .. } => "mmap",
            Event::Munmap { .. } => "munmap",
            Event::Mremap { .. } => "mremap",
            Event::Mprotect { .. } => "mprotect",
            Event::Brk { .. } => "brk",
            Event::Madvise { .. } => "madvise",
            Event::Fork { .. } => "fork",
            Event::Exit { .. } => "exit",
            Event::FileOpen { .. } => "open",
            Event::FileClose { .. } => "close",
            Event::FileRead { .. } => "read",
            Event::Insns { .. } => "insns",
        }
    }
}

/// A decoded chunk: accesses in a flat array (the hot loop walks it) and the events that sit
/// between them, each with the index of the access it precedes.
#[derive(Default, Debug, Clone)]
pub struct Chunk {
    pub accesses: Vec<Access>,
    pub events: Vec<(u32, Event)>,
    /// Byte offset of the chunk in its file (for error messages and progress).
    pub file_offset: u64,
    /// Byte offset just past the chunk.
    pub end_offset: u64,
}

impl Chunk {
    pub fn clear(&mut self) {
        self.accesses.clear();
        self.events.clear();
    }
}

/// Anything that yields records in order: the .spt reader, importers, generators.
pub trait RecordSink {
    fn access(&mut self, a: Access) -> crate::error::Result<()>;
    fn event(&mut self, e: Event) -> crate::error::Result<()>;
}

/// Provenance of a trace, stored as JSON in the .spt header.
pub type Provenance = serde_json::Map<String, serde_json::Value>;
