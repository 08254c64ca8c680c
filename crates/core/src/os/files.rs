//! Files: the page cache and what the OS knows of each file: its id by path, its size, its
//! pages' mappings into processes (the reverse map of page-cache frames), and the file
//! reservations file superpages come from (os/filemap.rs).
//!
//! Invariants (`Files::validate`; `Os::validate` checks them against the page tables and the
//! frame table): every path names a file the page cache has; every mapping list is non-empty
//! and names no mapping twice; a file reservation's first page index is aligned to its order.

use super::filemap::FileSuperpageCounters;
use super::mappers::Mappers;
use super::pagecache::PageCache;
use std::collections::HashMap;

#[derive(Default)]
pub struct Files {
    pub cache: PageCache,
    /// File ids by path (files outlive the processes that open them).
    pub ids: HashMap<String, u32>,
    /// File sizes in bytes, from the largest size an open announced.
    pub sizes: HashMap<u32, u64>,
    /// Live file reservations by (file, order, first page index of the extent): (reservation
    /// id, its first frame).
    pub reservs: HashMap<(u32, u8, u64), (u32, u64)>,
    /// Page-cache frames mapped into processes (file mappings), with every mapping.
    pub mappers: Mappers,
    pub counters: FileSuperpageCounters,
}

impl Files {
    /// The id of the file at `path`, made (with an empty page cache) at its first use.
    pub fn id_of(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.ids.get(path) {
            return id;
        }
        let id = self.cache.create();
        self.ids.insert(path.to_string(), id);
        id
    }

    /// An open of `path` announcing `size` bytes: its id; the file's size grows to `size`.
    pub fn open(&mut self, path: &str, size: u64) -> u32 {
        let id = self.id_of(path);
        let known = self.sizes.entry(id).or_insert(0);
        *known = (*known).max(size);
        self.cache.files[id as usize].open += 1;
        id
    }

    pub fn validate(&self) -> Result<(), String> {
        for (path, &id) in &self.ids {
            if id as usize >= self.cache.files.len() {
                return Err(format!("file {path:?} has id {id}, which the page cache does not have"));
            }
        }
        for (frame, list) in self.mappers.iter() {
            let distinct = list.iter().collect::<std::collections::HashSet<_>>().len();
            if list.is_empty() || distinct != list.len() {
                return Err(format!("page-cache frame {frame:#x}: {} mappings listed, {distinct} distinct", list.len()));
            }
        }
        for &(file, order, start) in self.reservs.keys() {
            if start & ((1u64 << order) - 1) != 0 {
                return Err(format!("file {file}: order-{order} reservation at page {start} is not aligned"));
            }
        }
        Ok(())
    }
}
