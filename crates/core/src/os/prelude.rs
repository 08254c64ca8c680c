//! Fragmentation preludes: what ran on the machine before the traced program, leaving physical
//! memory in the state the experiment needs. Each is deterministic given the scenario's seed.
//!
//! - `trident`: Trident's recipe (Ram, Panwar and Basu, MICRO 2021; the artifact's fragment.py): fill the page cache with
//!   two files of half of memory each, then read small random pieces of them. Memory ends full
//!   of clean page-cache pages in an order unrelated to their frames, so reclaiming them for a
//!   program frees scattered 4KB frames.
//! - `wired`: unmovable kernel pages scattered over memory (Navarro et al. section 4.8: wired
//!   pages that are not clustered destroy contiguity permanently, since nothing can move them).
//!   Under a policy with wired-page clustering they come from contiguous pools instead.
//! - `webserver`: a web-server-like small-file workload (Navarro et al. section 6.4 uses a web
//!   server replaying an access log as its fragmenter): many files of log-uniform sizes,
//!   requested with Zipf popularity and read whole through the page cache. The server closes
//!   its files when it ends (their pages become inactive under deactivate-on-close).

use super::frames::FrameKind;
use super::Os;
use crate::error::{Error, Result};
use crate::trace::gen::{Rng, Zipf};

#[derive(Clone, Debug, PartialEq)]
pub enum Prelude {
    Trident {
        /// Random reads after the fill (each `read_size` bytes).
        reads: u64,
        read_size: u64,
    },
    Wired {
        /// Frames to wire.
        count: u64,
        /// ... among the frames below this one (the kernel's own allocations sit low in
        /// physical memory; all of memory by default).
        below: u64,
    },
    Webserver {
        files: u64,
        min_size: u64,
        max_size: u64,
        requests: u64,
        alpha: f64,
    },
}

impl Prelude {
    pub fn name(&self) -> &'static str {
        match self {
            Prelude::Trident { .. } => "trident",
            Prelude::Wired { .. } => "wired",
            Prelude::Webserver { .. } => "webserver",
        }
    }

    /// Run the prelude on `os`, reporting progress (0..1) through `progress`.
    pub fn apply(&self, os: &mut Os, seed: u64, progress: &mut dyn FnMut(f64)) -> Result<()> {
        os.in_prelude = true;
        let r = self.run(os, seed, progress);
        os.in_prelude = false;
        r
    }

    fn run(&self, os: &mut Os, seed: u64, progress: &mut dyn FnMut(f64)) -> Result<()> {
        let mut rng = Rng::new(seed ^ 0x5052_454c);
        let page = os.base.bytes();
        match *self {
            Prelude::Trident { reads, read_size } => {
                let half = os.memory.0 / 2;
                let pages = half / page;
                let a = os.files.cache.create();
                let b = os.files.cache.create();
                let total = 2 * pages + reads;
                let mut done = 0u64;
                for f in [a, b] {
                    for i in 0..pages {
                        os.read_file(f, i * page, page)?;
                        done += 1;
                        if done & 0xffff == 0 {
                            progress(done as f64 / total as f64);
                        }
                    }
                }
                for _ in 0..reads {
                    let f = if rng.below(2) == 0 { a } else { b };
                    let off = rng.below(half.saturating_sub(read_size).max(1));
                    os.read_file(f, off, read_size)?;
                    done += 1;
                    if done & 0xffff == 0 {
                        progress(done as f64 / total as f64);
                    }
                }
            }
            Prelude::Wired { count, below } => {
                let frames = os.phys.total_frames().min(below);
                let mut placed = 0u64;
                let mut tries = 0u64;
                while placed < count && os.features().wired_clustering {
                    // Wired-page clustering: from contiguous pools, not scattered.
                    let Some(f) = os.alloc_wired_clustered() else {
                        return Err(Error::Sim(format!("prelude wired: could place only {placed} of {count} wired frames (memory is full)")));
                    };
                    os.wired.place(f);
                    placed += 1;
                }
                while placed < count {
                    tries += 1;
                    if tries > count.saturating_mul(64).max(1 << 20) {
                        return Err(Error::Sim(format!("prelude wired: could place only {placed} of {count} wired frames (memory is too full)")));
                    }
                    let f = rng.below(frames);
                    if os.phys.alloc_at(f, 0, FrameKind::Wired) {
                        placed += 1;
                        os.wired.place(f);
                        if placed & 0xffff == 0 {
                            progress(placed as f64 / count as f64);
                        }
                    }
                }
            }
            Prelude::Webserver { files, min_size, max_size, requests, alpha } => {
                let (lo, hi) = ((min_size.max(1) as f64).ln(), (max_size.max(min_size).max(1) as f64).ln());
                let mut ids = Vec::with_capacity(files as usize);
                for i in 0..files {
                    let size = (lo + (hi - lo) * rng.unit()).exp() as u64;
                    // Files by name: the same web server run again reads the same files.
                    let path = format!("/prelude/www/{i}");
                    let id = os.files.id_of(&path);
                    ids.push((id, size.max(1)));
                }
                // Popular files are scattered over the id space, as in a real log.
                let zipf = Zipf::new(files.max(1), alpha);
                let perm = rng.next_u64() | 1;
                for r in 0..requests {
                    let k = zipf.sample(&mut rng).saturating_sub(1);
                    let (id, size) = ids[((k.wrapping_mul(perm)) % files.max(1)) as usize];
                    os.read_file(id, 0, size)?;
                    if r & 0xfff == 0 {
                        progress(r as f64 / requests as f64);
                    }
                }
                // The server exits, closing its files: with deactivate-on-close their pages
                // become inactive.
                if os.features().deactivate_on_close {
                    for &(id, _) in &ids {
                        os.files.cache.deactivate(id);
                    }
                }
            }
        }
        progress(1.0);
        Ok(())
    }
}
