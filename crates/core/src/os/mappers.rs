//! The reverse map of shared frames: every mapping of each page-cache frame, and of each frame
//! shared after fork. Its own part of the OS model so that the files table (which holds it) and
//! the page cache (whose reclaim reads it) both name it without naming each other.

use super::frames::Owner;
use crate::fasthash::FastMap;

/// Frames mapped into processes, with every mapping (the reverse map of page-cache frames and
/// of frames shared after fork), read as a map. Changes go through the methods below, which
/// count them: page-cache reclaim remembers the count at which a scan freed nothing, and skips
/// the scans that would free nothing again (os/pagecache.rs).
#[derive(Default)]
pub struct Mappers {
    map: FastMap<u64, Vec<Owner>>,
    changes: u64,
}

impl std::ops::Deref for Mappers {
    type Target = FastMap<u64, Vec<Owner>>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl Mappers {
    /// Changes made so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// `m` maps `pfn` too.
    pub fn add(&mut self, pfn: u64, m: Owner) {
        self.changes += 1;
        self.map.entry(pfn).or_default().push(m);
    }

    /// Every mapping of `pfn`, taken out.
    pub fn take(&mut self, pfn: u64) -> Option<Vec<Owner>> {
        self.changes += 1;
        self.map.remove(&pfn)
    }

    /// `list` maps `pfn` (a block moved there).
    pub fn put(&mut self, pfn: u64, list: Vec<Owner>) {
        self.changes += 1;
        self.map.insert(pfn, list);
    }

    /// `m` no longer maps `pfn`; a frame with no mapping left leaves the map.
    pub fn unlist(&mut self, pfn: u64, m: Owner) {
        self.changes += 1;
        if let Some(list) = self.map.get_mut(&pfn) {
            if let Some(i) = list.iter().position(|&x| x == m) {
                list.swap_remove(i);
            }
            if list.is_empty() {
                self.map.remove(&pfn);
            }
        }
    }
}
