//! Physical memory: a frame table and a binary buddy allocator up to the machine's largest page
//! (order 18 = 1GB on x86), with Linux's grouping by mobility.
//!
//! Structures and their invariants (checked by `validate`):
//! - Every frame has a kind (`FrameKind`). Frames of a free block are all `Free`; frames of an
//!   allocation all carry the allocation's kind.
//! - A block (free or allocated) is a naturally aligned extent of 2^order frames; its first
//!   frame (the head) has the HEAD flag and `order[head] == order`; no other frame of the block
//!   has the HEAD flag. Every frame belongs to exactly one block.
//! - Every free block is on exactly one free list, the one for (its order, the migrate type of
//!   the pageblock holding its head), linked through `next`/`prev` of its head.
//! - No two free buddies of the same order coexist (freeing merges them).
//! - `pb_free[b]` is the number of free frames in pageblock b; `free` is their sum.
//! - *Regions* are the aligned extents of the largest block (2^max_order frames: 1GB on x86).
//!   `region_free[r]` counts the free frames of region r and `region_unmovable[r]` its frames
//!   of a kind compaction cannot move (`FrameKind::pins`): Trident's per-1GB-region counters
//!   (Ram et al., ASPLOS'21 §5.3; its kernel's `pageblock_freepages[]` and
//!   `pageblock_unmovablepages[]`, kept on every buddy operation). A block never spans two
//!   regions (it is aligned and at most a region long), so each operation changes one entry.
//!   `region_chosen_at[r]` is when smart compaction last took r as its source (0: never).
//! - `region_zeroed[r]`: region r's contents are known to be zero (Trident's asynchronous
//!   pre-zeroing, the authors' `async_zeroing` branch). Only `prezero_one` sets it, on a region
//!   that is one free block of the largest order, and moves that block to the tail of its list,
//!   so allocations that need no zeroed memory take other blocks first. Any free into the
//!   region clears it (a split returns pieces to the lists, so it clears too); allocating the
//!   whole block keeps it for the allocator's caller to take (`take_zeroed`). So a set flag
//!   means the region is one free block, or one block just allocated whole.
//! - An allocated head's `owner` says who maps it (the reverse map compaction uses).
//! - *Cache frames* (Navarro et al. §A.2.9: cache pages coalesced into the buddy lists): a frame
//!   with its bit in `cache_bits` is free (or set aside, unpopulated, in a reservation) yet still
//!   holds a page-cache page's contents, named by its `owner`. The contents survive until the
//!   frame is allocated for real (a buddy allocation or a reservation populating it), which
//!   clears the bit (`cache_lost`). `cache_frames` counts the bits. Blocks freed with a cache
//!   page go to the *tail* of their list, so allocations take truly free blocks first and
//!   cache pages in the order they were cached.
//!
//! Memory per frame: 18 bytes (kind, order, two u32 links, owner), allocated zeroed so that the
//! host only commits the pages of the table that a run touches: 384 GiB of simulated memory is
//! 100M frames and at most 1.8 GB of table.
//!
//! Mobility grouping follows Linux (mm/page_alloc.c): memory is divided into pageblocks of
//! 2^pageblock_order frames (order 9, one 2MB page, on x86), each labelled unmovable, movable
//! or reclaimable; an allocation takes from its own type's lists first and otherwise steals the
//! largest free block of a fallback type, claiming the whole pageblock when the block is at
//! least half a pageblock or the request is not movable (`can_steal_fallback`).
//!
//! Invariant: a free block is on the list of its pageblock's type, except under
//! `steal_moves_free_blocks` (Linux 4.x, Trident's kernel): there a steal that may claim (an
//! unmovable or reclaimable request, or a block of half a pageblock) but does not relabel the
//! pageblock still moves the pageblock's free blocks to the requester's lists
//! (`steal_suitable_fallback` calls `move_freepages_block` before deciding), so a free block
//! may sit on another type's list until it is allocated, or freed and merged (a freed block
//! goes to its pageblock's list); there a split leaves its remainders on the list the block
//! came from (`expand`).

pub mod reserv;

use crate::os::zeroed::ZeroedBuf;
use crate::units::{Order, Pfn};
use reserv::Reservations;

pub const NIL: u32 = u32::MAX;
/// Largest order any machine uses (x86 1GB = order 18; 8KB-base machines stay below it).
pub const MAX_ORDER: usize = 20;
/// The largest block a migrate-type fallback steals: Linux's MAX_PAGE_ORDER (10, 4MB on x86;
/// include/linux/mmzone.h). This model's buddy goes up to the largest page (1GB) so that 1GB
/// pages come from it, but mobility grouping keeps Linux's granularity.
const STEAL_MAX_ORDER: u8 = 10;

const KIND_MASK: u8 = 0x0f;
const HEAD: u8 = 0x80;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum FrameKind {
    Free = 0,
    /// Anonymous memory of a process.
    Anon = 1,
    /// Page cache (file contents).
    File = 2,
    /// A page-table page.
    PageTable = 3,
    /// Wired (pinned, unmovable) kernel memory: slab, DMA buffers, inodes.
    Wired = 4,
    /// Reserved at boot (firmware, kernel image): never freed.
    Reserved = 5,
    /// Set aside in a reservation (os/frames/reserv.rs), not yet populated.
    Reservation = 6,
}

impl FrameKind {
    pub const ALL: [FrameKind; 7] =
        [FrameKind::Free, FrameKind::Anon, FrameKind::File, FrameKind::PageTable, FrameKind::Wired, FrameKind::Reserved, FrameKind::Reservation];
    fn from_u8(v: u8) -> FrameKind {
        FrameKind::ALL[(v & KIND_MASK) as usize]
    }
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Free => "free",
            FrameKind::Anon => "anon",
            FrameKind::File => "file",
            FrameKind::PageTable => "page_table",
            FrameKind::Wired => "wired",
            FrameKind::Reserved => "reserved",
            FrameKind::Reservation => "reservation",
        }
    }
    /// The migrate type an allocation of this kind asks for (Linux: GFP_HIGHUSER_MOVABLE for
    /// user and page-cache pages; page tables and kernel objects are unmovable).
    pub fn migrate_type(self) -> MigrateType {
        match self {
            FrameKind::Anon | FrameKind::File | FrameKind::Reservation => MigrateType::Movable,
            _ => MigrateType::Unmovable,
        }
    }
    /// Whether compaction may move a block of this kind.
    pub fn movable(self) -> bool {
        matches!(self, FrameKind::Anon | FrameKind::File)
    }
    /// Whether a frame of this kind pins its region: allocated, and not movable by compaction
    /// (Trident's unmovable and reclaimable allocations; a reservation's unpopulated frames
    /// are set aside, not pinned).
    pub fn pins(self) -> bool {
        matches!(self, FrameKind::PageTable | FrameKind::Wired | FrameKind::Reserved)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum MigrateType {
    Unmovable = 0,
    Movable = 1,
    Reclaimable = 2,
}

impl MigrateType {
    pub const ALL: [MigrateType; 3] = [MigrateType::Unmovable, MigrateType::Movable, MigrateType::Reclaimable];
    pub fn name(self) -> &'static str {
        ["unmovable", "movable", "reclaimable"][self as usize]
    }
    /// Linux's fallback order (mm/page_alloc.c `fallbacks[]`).
    fn fallbacks(self) -> [MigrateType; 2] {
        match self {
            MigrateType::Unmovable => [MigrateType::Reclaimable, MigrateType::Movable],
            MigrateType::Movable => [MigrateType::Reclaimable, MigrateType::Unmovable],
            MigrateType::Reclaimable => [MigrateType::Unmovable, MigrateType::Movable],
        }
    }
}

/// Who maps an allocated block: the reverse map. Packed in one u64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Owner(pub u64);

impl Owner {
    pub const NONE: Owner = Owner(0);
    /// Mapped by several processes (after fork): `Os::shared` lists them.
    pub const SHARED: Owner = Owner(1 << 62);
    const FILE: u64 = 1 << 63;
    /// Anonymous page of process slot `pi` at base-page number `vpn`.
    pub fn anon(pi: usize, vpn: u64) -> Owner {
        Owner(((pi as u64 + 1) << 46) | vpn)
    }
    /// Page `index` of file `file` in the page cache.
    pub fn file(file: u32, index: u64) -> Owner {
        Owner(Self::FILE | ((file as u64) << 36) | index)
    }
    pub fn as_anon(self) -> Option<(usize, u64)> {
        (self.0 != 0 && self.0 & Self::FILE == 0 && self != Self::SHARED).then(|| (((self.0 >> 46) - 1) as usize, self.0 & ((1 << 46) - 1)))
    }
    pub fn as_file(self) -> Option<(u32, u64)> {
        (self.0 & Self::FILE != 0).then_some((((self.0 >> 36) & 0x7ff_ffff) as u32, self.0 & ((1 << 36) - 1)))
    }
}

crate::counters! {
    #[derive(Clone, Debug, Default)]
    pub struct PhysCounters {
        pub allocs: [u64; MAX_ORDER + 1] = by_hand,
        pub alloc_failures: [u64; MAX_ORDER + 1] = by_hand,
        /// Allocations served from another migrate type's free list.
        pub fallbacks: u64 = "buddy.fallbacks",
        /// Pageblocks relabelled by a fallback steal.
        pub pageblocks_claimed: u64 = "buddy.pageblocks_claimed",
        /// Pageblocks whose free blocks a steal moved to its own lists without relabelling
        /// them (`steal_moves_free_blocks`, Linux 4.x).
        pub pageblocks_raided: u64 = "buddy.pageblocks_raided",
        pub splits: u64 = "buddy.splits",
        pub merges: u64 = "buddy.merges",
        /// Page-cache pages whose frames went to the buddy lists with their contents (cache pages).
        pub cache_freed: u64 = "buddy.cache_freed",
        /// Cache pages whose frames were allocated for something else: their contents are gone.
        pub cache_lost: u64 = "buddy.cache_lost",
        /// Cache pages referenced again and taken back out of the buddy lists, contents reused.
        pub cache_reclaimed: u64 = "buddy.cache_reclaimed",
        /// ... of which out of a reservation, which was preempted (dissolved) for it.
        pub cache_reclaimed_preempting: u64 = "buddy.cache_reclaimed_preempting",
        /// Free blocks of the largest order zeroed ahead of need (`prezero_one`), and
        /// allocations of such a block whose caller used the zeroed contents (`take_zeroed`).
        pub prezeroed: u64 = "prezero.blocks_zeroed",
        pub prezeroed_used: u64 = "prezero.blocks_used",
        /// Scattered 4KB anonymous frames (`Scatter`): allocations that started a new run at
        /// a free frame picked at random, that continued the run of the one before, and that
        /// found no free movable frame in SCATTER_TRIES picks and took the lists' own.
        pub scatter_new_runs: u64 = "buddy.scatter_new_runs",
        pub scatter_run_continued: u64 = "buddy.scatter_run_continued",
        pub scatter_fallbacks: u64 = "buddy.scatter_fallbacks",
    }
}

/// Random picks a scattered allocation makes before it takes the lists' own block.
const SCATTER_TRIES: usize = 16;

/// Pageblocks (2MB on x86) a scattered allocation picks its frame among: 512, a 1GiB window.
/// ESTIMATE, chosen for the simulator's speed: picks over all of a 64GiB memory touched the
/// frame table at random and split a 1GB block each time, three times the cost of a whole
/// `host+nocache` run on the Zipf bench trace (docs/PERFORMANCE.md). Any pageblock gives a
/// frame's bits 12-20 at random, which is what a cache's set index takes from a frame; the
/// kernel spreads more (a 1GiB region's frames over 3,244 pageblocks on the Sapphire Rapids VM).
const SCATTER_POOL: usize = 512;

/// Where a process's 4KB anonymous frames come from when they are scattered (the machine's
/// `[frames] scatter`). A buddy allocator on fresh memory hands them out in address order
/// (`take_and_split` keeps each split's lower half and lists the upper, which the next
/// allocation takes), so a process's pages sit on consecutive frames and the data caches,
/// indexed by physical address, see its virtual layout. A running kernel's are not so:
/// `/proc/PID/pagemap` on the development VMs shows a sequentially touched 256MiB region in
/// runs of one to four frames that start anywhere (`superpager calibrate` measures it,
/// docs/RUNTIME_MODEL.md "Scattered frames"). So each such allocation starts a new run at a free
/// frame picked at random with probability `fraction`, and otherwise takes the frame after the
/// one before if it is free (else starts a new run too).
///
/// Invariant: only order-0 `Anon` allocations are placed so, only on free, movable,
/// non-cache frames (`scatter_target`); everything else allocates as before.
pub struct Scatter {
    fraction: f64,
    rng: crate::trace::gen::Rng,
    /// The frame the last scattered allocation took.
    last: Option<u64>,
    /// The pageblocks new runs start in (`SCATTER_POOL`); NIL: not chosen yet. A slot whose
    /// pageblock is down to an eighth free takes the next pageblock the lists would split.
    pool: Vec<u32>,
}

impl Scatter {
    /// None for a fraction of 0: the allocator keeps its own order, unchanged.
    pub fn new(fraction: f64, seed: u64) -> Option<Scatter> {
        (fraction > 0.0).then(|| Scatter { fraction, rng: crate::trace::gen::Rng::new(seed ^ 0x5343_4154), last: None, pool: vec![NIL; SCATTER_POOL] })
    }

    /// A new run's pick from `rng`: a pool slot and an offset in its pageblock of `span` frames.
    /// One function for the pick and for the look ahead at it (`prefetch_next_scattered`), so
    /// the two draw alike.
    #[inline(always)]
    fn pick(rng: &mut crate::trace::gen::Rng, span: u64) -> (usize, u64) {
        (rng.below(SCATTER_POOL as u64) as usize, rng.below(span))
    }
}

/// Names blocks (pfn, order) by calling the function it is given on each.
pub type BlockVisitor<'a> = &'a mut dyn FnMut(&mut dyn FnMut(u64, u8));

pub struct PhysMem {
    frames: u64,
    max_order: u8,
    pageblock_order: u8,
    /// Linux 4.x's fallback steal (see the header); off: Linux's own lists stay by pageblock.
    pub steal_moves_free_blocks: bool,
    kind: ZeroedBuf<u8>,
    order: ZeroedBuf<u8>,
    next: ZeroedBuf<u32>,
    prev: ZeroedBuf<u32>,
    /// Raw `Owner` values.
    owner: ZeroedBuf<u64>,
    heads: [[u32; MAX_ORDER + 1]; 3],
    tails: [[u32; MAX_ORDER + 1]; 3],
    list_len: [[u64; MAX_ORDER + 1]; 3],
    pb_type: Vec<u8>,
    pb_free: Vec<u32>,
    free: u64,
    used_by_kind: [u64; 7],
    /// Per region (2^max_order frames): free frames, pinned frames, when last chosen as a
    /// smart-compaction source (see the header).
    region_free: Vec<u32>,
    region_unmovable: Vec<u32>,
    region_chosen_at: Vec<u64>,
    region_zeroed: Vec<bool>,
    pub counters: PhysCounters,
    /// Reservations (os/frames/reserv.rs): freeing a frame inside one gives it back to it.
    pub reservs: Reservations,
    /// Frames holding a cache page's contents while free or reserved (see the header).
    cache_bits: ZeroedBuf<u64>,
    cache_frames: u64,
    /// Scattered 4KB anonymous frames (`Scatter`); None: the lists' own order.
    pub scatter: Option<Scatter>,
}

impl PhysMem {
    /// `frames` base frames, blocks up to `max_order`, pageblocks of 2^`pageblock_order`.
    /// Everything starts free and movable (Linux marks all pageblocks movable at boot).
    pub fn new(frames: u64, max_order: u8, pageblock_order: u8) -> Result<PhysMem, String> {
        if frames >= NIL as u64 {
            return Err(format!("{frames} frames is more than this model's frame table holds (2^32 - 1)"));
        }
        if max_order as usize > MAX_ORDER {
            return Err(format!("order {max_order} is above the model's limit {MAX_ORDER}"));
        }
        let pbo = pageblock_order.min(max_order);
        let n = frames as usize;
        let pbs = ((frames + (1 << pbo) - 1) >> pbo) as usize;
        let regions = frames.div_ceil(1 << max_order) as usize;
        let mut m = PhysMem {
            frames,
            max_order,
            pageblock_order: pbo,
            steal_moves_free_blocks: false,
            kind: ZeroedBuf::new(n)?,
            order: ZeroedBuf::new(n)?,
            next: ZeroedBuf::new(n)?,
            prev: ZeroedBuf::new(n)?,
            owner: ZeroedBuf::new(n)?,
            heads: [[NIL; MAX_ORDER + 1]; 3],
            tails: [[NIL; MAX_ORDER + 1]; 3],
            list_len: [[0; MAX_ORDER + 1]; 3],
            pb_type: vec![MigrateType::Movable as u8; pbs],
            pb_free: vec![0; pbs],
            free: 0,
            used_by_kind: [0; 7],
            region_free: vec![0; regions],
            region_unmovable: vec![0; regions],
            region_chosen_at: vec![0; regions],
            region_zeroed: vec![false; regions],
            counters: PhysCounters::default(),
            reservs: Reservations::new(frames)?,
            cache_bits: ZeroedBuf::new((n).div_ceil(64))?,
            cache_frames: 0,
            scatter: None,
        };
        // Cut memory into maximal aligned blocks (a size that is not a multiple of the largest
        // block leaves smaller blocks at the top).
        let mut pfn = 0u64;
        while pfn < frames {
            let o = (max_order as u32).min(pfn.trailing_zeros()).min(63 - (frames - pfn).leading_zeros());
            m.used_by_kind[0] += 1 << o;
            m.add_free_block(pfn, o as u8);
            pfn += 1 << o;
        }
        Ok(m)
    }

    pub fn total_frames(&self) -> u64 {
        self.frames
    }
    pub fn free_frames(&self) -> u64 {
        self.free
    }
    pub fn max_order(&self) -> u8 {
        self.max_order
    }
    pub fn pageblock_order(&self) -> u8 {
        self.pageblock_order
    }
    pub fn pageblocks(&self) -> usize {
        self.pb_type.len()
    }
    pub fn pageblock_type(&self, pb: usize) -> MigrateType {
        MigrateType::ALL[self.pb_type[pb] as usize]
    }
    /// Frames in use by kind (index = FrameKind as usize; index 0 counts free frames).
    pub fn frames_by_kind(&self) -> [u64; 7] {
        self.used_by_kind
    }
    /// Free blocks per order (all migrate types).
    pub fn free_blocks(&self, order: u8) -> u64 {
        (0..3).map(|t| self.list_len[t][order as usize]).sum()
    }

    #[inline]
    pub fn kind_of(&self, pfn: u64) -> FrameKind {
        FrameKind::from_u8(self.kind[pfn as usize])
    }
    #[inline]
    pub fn is_head(&self, pfn: u64) -> bool {
        self.kind[pfn as usize] & HEAD != 0
    }
    /// The order of the block whose head is `pfn`.
    #[inline]
    pub fn order_at(&self, pfn: u64) -> u8 {
        self.order[pfn as usize]
    }
    pub fn owner(&self, pfn: u64) -> Owner {
        Owner(self.owner[pfn as usize])
    }
    pub fn set_owner(&mut self, pfn: Pfn, o: Owner) {
        debug_assert!(self.is_head(pfn.0) && self.kind_of(pfn.0) != FrameKind::Free);
        self.owner[pfn.0 as usize] = o.0;
    }

    /// The largest order with a free block of any migrate type, if any.
    pub fn largest_free_order(&self) -> Option<u8> {
        (0..=self.max_order).rev().find(|&o| self.free_blocks(o) > 0)
    }

    #[inline]
    fn pb_of(&self, pfn: u64) -> usize {
        (pfn >> self.pageblock_order) as usize
    }

    /// The region (aligned extent of 2^max_order frames) holding `pfn`.
    #[inline]
    pub fn region_of(&self, pfn: u64) -> usize {
        (pfn >> self.max_order) as usize
    }
    /// Regions of memory (the last may be shorter than the others).
    pub fn regions(&self) -> usize {
        self.region_free.len()
    }
    /// Free frames in region `r`.
    pub fn region_free(&self, r: usize) -> u64 {
        self.region_free[r] as u64
    }
    /// Frames in region `r` that compaction cannot move (`FrameKind::pins`).
    pub fn region_unmovable(&self, r: usize) -> u64 {
        self.region_unmovable[r] as u64
    }
    /// When region `r` was last chosen as a smart-compaction source (0: never).
    pub fn region_chosen_at(&self, r: usize) -> u64 {
        self.region_chosen_at[r]
    }
    /// Smart compaction chose region `r` as its source at `now`.
    pub fn note_region_chosen(&mut self, r: usize, now: u64) {
        self.region_chosen_at[r] = now;
    }

    /// Zero one free block of the largest order that is not yet zeroed (pre-zeroing): flag its
    /// region and move it to the tail of its list. Returns its first frame, or None when every
    /// such block is zeroed already. Zeroed blocks gather at the tails, so the first list head
    /// that is not zeroed is the one to take.
    pub fn prezero_one(&mut self) -> Option<u64> {
        let o = self.max_order as usize;
        for mt in [MigrateType::Movable, MigrateType::Reclaimable, MigrateType::Unmovable] {
            let h = self.heads[mt as usize][o];
            if h == NIL || self.region_zeroed[self.region_of(h as u64)] {
                continue;
            }
            let h = h as u64;
            let r = self.region_of(h);
            self.region_zeroed[r] = true;
            self.list_to_tail(h);
            self.counters.prezeroed += 1;
            return Some(h);
        }
        None
    }

    /// Allocate like `alloc`, but for a block of the largest order take a pre-zeroed one
    /// first, from its list's tail (an anonymous fault, which must hand out zeroed memory).
    pub fn alloc_zeroed_first(&mut self, order: Order, kind: FrameKind) -> Option<Pfn> {
        if order.0 == self.max_order {
            let mt = kind.migrate_type() as usize;
            let t = self.tails[mt][order.0 as usize];
            if t != NIL && self.region_zeroed[self.region_of(t as u64)] {
                self.take_and_split(t as u64, order.0, order.0);
                self.mark_allocated(t as u64, order.0, kind);
                return Some(Pfn(t as u64));
            }
        }
        self.alloc(order, kind)
    }

    /// Whether the block just allocated at `pfn` is pre-zeroed; taking it clears the flag (its
    /// new owner is about to write it).
    pub fn take_zeroed(&mut self, pfn: Pfn) -> bool {
        let r = self.region_of(pfn.0);
        let whole = self.is_head(pfn.0) && self.order[pfn.0 as usize] == self.max_order;
        let z = std::mem::take(&mut self.region_zeroed[r]) && whole;
        self.counters.prezeroed_used += z as u64;
        z
    }

    /// Free blocks of the largest order that are zeroed.
    pub fn zeroed_free_blocks(&self) -> u64 {
        self.region_zeroed.iter().enumerate().filter(|&(r, &z)| z && self.region_free[r] > 0).count() as u64
    }

    /// `n` frames of the block at `pfn` leave kind `from` for kind `to` (either may be Free):
    /// the per-kind totals and the region's pinned count follow.
    #[inline]
    fn recount_kind(&mut self, pfn: u64, n: u64, from: FrameKind, to: FrameKind) {
        self.used_by_kind[from as usize] -= n;
        self.used_by_kind[to as usize] += n;
        if from.pins() != to.pins() {
            let r = self.region_of(pfn);
            let u = &mut self.region_unmovable[r];
            *u = if to.pins() { *u + n as u32 } else { *u - n as u32 };
        }
    }

    #[inline]
    fn list_push(&mut self, pfn: u64, o: u8) {
        self.list_push_as(pfn, o, self.pb_type[self.pb_of(pfn)] as usize);
    }

    /// Push a free block on the lists of type `mt` (its pageblock's, but for a moved block).
    fn list_push_as(&mut self, pfn: u64, o: u8, mt: usize) {
        let p = pfn as u32;
        let h = self.heads[mt][o as usize];
        self.next[p as usize] = h;
        self.prev[p as usize] = NIL;
        if h != NIL {
            self.prev[h as usize] = p;
        } else {
            self.tails[mt][o as usize] = p;
        }
        self.heads[mt][o as usize] = p;
        self.list_len[mt][o as usize] += 1;
        // Remember which list holds it (the pageblock's type may change later).
        self.kind[pfn as usize] = HEAD | FrameKind::Free as u8 | ((mt as u8) << 4);
        self.order[pfn as usize] = o;
    }

    #[inline]
    fn list_remove(&mut self, pfn: u64) {
        let mt = ((self.kind[pfn as usize] >> 4) & 3) as usize;
        let o = self.order[pfn as usize] as usize;
        let (n, p) = (self.next[pfn as usize], self.prev[pfn as usize]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.heads[mt][o] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        } else {
            self.tails[mt][o] = p;
        }
        self.list_len[mt][o] -= 1;
        self.kind[pfn as usize] = FrameKind::Free as u8;
    }

    #[inline]
    fn add_free_counts(&mut self, pfn: u64, o: u8, sign: i64) {
        let n = 1u64 << o;
        if o >= self.pageblock_order {
            let per = 1u32 << self.pageblock_order;
            for pb in self.pb_of(pfn)..self.pb_of(pfn + n - 1) + 1 {
                self.pb_free[pb] = if sign > 0 { self.pb_free[pb] + per } else { self.pb_free[pb] - per };
            }
        } else {
            let pb = self.pb_of(pfn);
            self.pb_free[pb] = if sign > 0 { self.pb_free[pb] + n as u32 } else { self.pb_free[pb] - n as u32 };
        }
        self.free = if sign > 0 { self.free + n } else { self.free - n };
        let r = self.region_of(pfn);
        self.region_free[r] = if sign > 0 { self.region_free[r] + n as u32 } else { self.region_free[r] - n as u32 };
        if sign > 0 {
            // Freed (or split) memory holds whatever was written there.
            self.region_zeroed[r] = false;
        }
    }

    /// A free block enters the lists (frames already marked free).
    #[inline]
    fn add_free_block(&mut self, pfn: u64, o: u8) {
        self.add_free_counts(pfn, o, 1);
        self.list_push(pfn, o);
    }

    /// Move the free block at `pfn` (just pushed at its list's head) to the list's tail.
    fn list_to_tail(&mut self, pfn: u64) {
        let mt = ((self.kind[pfn as usize] >> 4) & 3) as usize;
        let o = self.order[pfn as usize] as usize;
        let t = self.tails[mt][o];
        if t == pfn as u32 {
            return;
        }
        let n = self.next[pfn as usize];
        debug_assert!(self.heads[mt][o] == pfn as u32 && n != NIL);
        self.heads[mt][o] = n;
        self.prev[n as usize] = NIL;
        self.next[t as usize] = pfn as u32;
        self.prev[pfn as usize] = t;
        self.next[pfn as usize] = NIL;
        self.tails[mt][o] = pfn as u32;
    }

    /// Whether frame `pfn` holds a cache page's contents while free or reserved.
    pub fn is_cache_frame(&self, pfn: u64) -> bool {
        self.cache_frames > 0 && self.cache_bits[(pfn / 64) as usize] >> (pfn % 64) & 1 != 0
    }

    pub fn cache_frames(&self) -> u64 {
        self.cache_frames
    }

    fn clear_cache_bit(&mut self, pfn: u64) {
        self.cache_bits[(pfn / 64) as usize] &= !(1u64 << (pfn % 64));
        self.cache_frames -= 1;
    }

    /// Frames [pfn, pfn + n) are being allocated for real: cache contents in them are lost.
    fn lose_cache(&mut self, pfn: u64, n: u64) {
        if self.cache_frames == 0 {
            return;
        }
        let mut f = pfn;
        while f < pfn + n {
            let w = self.cache_bits[(f / 64) as usize] >> (f % 64);
            if w == 0 {
                f = (f / 64 + 1) * 64;
                continue;
            }
            f += w.trailing_zeros() as u64;
            if f >= pfn + n {
                break;
            }
            self.clear_cache_bit(f);
            self.counters.cache_lost += 1;
            f += 1;
        }
    }

    /// A reserved frame is being populated: a cache page in it is lost.
    pub(super) fn lose_cache_frame(&mut self, pfn: u64) {
        self.lose_cache(pfn, 1);
    }

    /// Mechanism (Navarro et al.'s cache pages): free the order-0 page-cache frame `pfn` into
    /// the buddy lists keeping its contents, named by `owner`. The block it merges into goes to
    /// the tail of its list.
    pub fn free_to_cache(&mut self, pfn: u64, owner: Owner) {
        debug_assert!(self.is_head(pfn) && self.order[pfn as usize] == 0 && self.kind_of(pfn) == FrameKind::File);
        if let Some(id) = self.reservs.of_frame(pfn) {
            // A file reservation's page: the frame goes back to the reservation, contents kept.
            self.cache_bits[(pfn / 64) as usize] |= 1u64 << (pfn % 64);
            self.cache_frames += 1;
            self.counters.cache_freed += 1;
            self.reserv_free(id, pfn, 0);
            self.owner[pfn as usize] = owner.0;
            return;
        }
        self.mark_block_free(pfn, 0);
        self.owner[pfn as usize] = owner.0;
        self.cache_bits[(pfn / 64) as usize] |= 1u64 << (pfn % 64);
        self.cache_frames += 1;
        self.counters.cache_freed += 1;
        self.merge_in(pfn, 0);
    }

    /// The cache page in frame `pfn`, if its contents are still there, under `owner`.
    pub fn cache_owner(&self, pfn: u64) -> Option<Owner> {
        self.is_cache_frame(pfn).then(|| Owner(self.owner[pfn as usize]))
    }

    /// Mechanism: a referenced cache page comes back out of the buddy lists (or out of the
    /// reservation that holds its frame, which is preempted: dissolved) as an allocated order-0
    /// `File` frame with its contents. Returns false if the frame no longer holds them.
    pub fn reclaim_cache_frame(&mut self, pfn: u64, owner: Owner) -> bool {
        if self.cache_owner(pfn) != Some(owner) {
            return false;
        }
        if self.kind_of(pfn) == FrameKind::Reservation {
            let id = self.reservs.of_frame(pfn).expect("a reserved frame outside any reservation");
            self.reserv_split(id, Order(0));
            self.counters.cache_reclaimed_preempting += 1;
        }
        self.clear_cache_bit(pfn);
        let ok = self.alloc_at(pfn, 0, FrameKind::File);
        debug_assert!(ok, "a cache frame that is not free");
        self.owner[pfn as usize] = owner.0;
        self.counters.cache_reclaimed += 1;
        ok
    }

    fn is_free_head_of_order(&self, pfn: u64, o: u8) -> bool {
        let k = self.kind[pfn as usize];
        k & HEAD != 0 && k & KIND_MASK == FrameKind::Free as u8 && self.order[pfn as usize] == o
    }

    /// Take the free block at `pfn` (order `o`) off its list and split it down to order `want`,
    /// returning the pieces above `want` to the lists (Linux's `expand`).
    #[inline]
    fn take_and_split(&mut self, pfn: u64, o: u8, want: u8) {
        // Under Linux 4.x's steal the remainders go on the list the block came from (its
        // `expand`), which may be another type's; otherwise on their own pageblock's list (a
        // block larger than a pageblock may span pageblocks of different types).
        let came_from = ((self.kind[pfn as usize] >> 4) & 3) as usize;
        self.list_remove(pfn);
        self.add_free_counts(pfn, o, -1);
        let mut cur = o;
        while cur > want {
            cur -= 1;
            self.counters.splits += 1;
            let upper = pfn + (1 << cur);
            self.kind[upper as usize] = FrameKind::Free as u8;
            let mt = if self.steal_moves_free_blocks { came_from } else { self.pb_type[self.pb_of(upper)] as usize };
            self.add_free_counts(upper, cur, 1);
            self.list_push_as(upper, cur, mt);
        }
    }

    #[inline]
    fn mark_allocated(&mut self, pfn: u64, o: u8, kind: FrameKind) {
        let n = 1usize << o;
        if kind != FrameKind::Reservation {
            // A reservation keeps the cache pages in its extent until it populates them.
            self.lose_cache(pfn, n as u64);
        }
        let k = kind as u8;
        if n > 1 {
            // (A base page is the common case: no fill call for one byte.)
            self.kind[pfn as usize + 1..pfn as usize + n].fill(k);
        }
        self.kind[pfn as usize] = k | HEAD;
        self.order[pfn as usize] = o;
        if !self.is_cache_frame(pfn) {
            self.owner[pfn as usize] = 0;
        }
        self.recount_kind(pfn, n as u64, FrameKind::Free, kind);
        self.counters.allocs[o as usize] += 1;
    }

    /// Allocate an aligned block of 2^order frames for `kind`, or None (counted) if no free
    /// block of that order exists in any migrate type.
    pub fn alloc(&mut self, order: Order, kind: FrameKind) -> Option<Pfn> {
        let want = order.0;
        debug_assert!(kind != FrameKind::Free);
        if want > self.max_order {
            self.counters.alloc_failures[(want as usize).min(MAX_ORDER)] += 1;
            return None;
        }
        if want == 0 && kind == FrameKind::Anon && self.scatter.is_some() {
            if let Some(p) = self.alloc_scattered() {
                return Some(p);
            }
        }
        let mt = kind.migrate_type();
        // Own type, smallest sufficient order first (`__rmqueue_smallest`).
        for o in want..=self.max_order {
            let h = self.heads[mt as usize][o as usize];
            if h != NIL {
                self.take_and_split(h as u64, o, want);
                self.mark_allocated(h as u64, want, kind);
                return Some(Pfn(h as u64));
            }
        }
        // Fallback: the largest free block of another type (`__rmqueue_fallback`).
        for ft in mt.fallbacks() {
            for o in (want..=self.max_order).rev() {
                let h = self.heads[ft as usize][o as usize];
                if h == NIL {
                    continue;
                }
                self.counters.fallbacks += 1;
                let h = h as u64;
                let mut o = o;
                let cap = STEAL_MAX_ORDER.max(want).max(self.pageblock_order);
                if o > cap {
                    // Linux's buddy has no free block above MAX_PAGE_ORDER, so a steal never
                    // takes more than that: cut this block down and leave the rest to its type.
                    self.take_and_split(h, o, cap);
                    self.kind[h as usize] = FrameKind::Free as u8;
                    self.add_free_block(h, cap);
                    o = cap;
                }
                if o >= self.pageblock_order / 2 || mt != MigrateType::Movable {
                    self.claim_pageblocks(h, o, mt);
                    if self.steal_moves_free_blocks && self.pb_type[self.pb_of(h)] != mt as u8 {
                        self.move_free_blocks(self.pb_of(h), mt);
                    }
                }
                self.take_and_split(h, o, want);
                self.mark_allocated(h, want, kind);
                return Some(Pfn(h));
            }
        }
        self.counters.alloc_failures[want as usize] += 1;
        None
    }

    /// A frame a scattered allocation may take: free, in a movable pageblock, holding no cache
    /// page (the lists give those out last).
    fn scatter_target(&self, pfn: u64) -> bool {
        pfn < self.frames && self.kind_of(pfn) == FrameKind::Free && self.pb_type[self.pb_of(pfn)] == MigrateType::Movable as u8 && !self.is_cache_frame(pfn)
    }

    /// An order-0 anonymous frame placed as `Scatter` says, or None (counted) where no free
    /// movable frame turned up: the caller then takes the lists' own.
    fn alloc_scattered(&mut self) -> Option<Pfn> {
        let s = self.scatter.as_mut()?;
        let new_run = s.rng.unit() < s.fraction;
        let next = s.last.map(|l| l + 1).filter(|_| !new_run);
        let got = match next.filter(|&n| self.scatter_target(n)) {
            Some(n) => {
                self.counters.scatter_run_continued += 1;
                Some(self.take_scattered(n))
            }
            None => self.scatter_new_run(),
        };
        self.prefetch_next_scattered();
        got
    }

    /// Where the next scattered allocation would start a new run on its first pick (the pool's
    /// pageblock and offset its generator's next draws give, read from a copy of it), bring the
    /// frame-table lines it will read toward the host's caches: a new run's frame is picked at
    /// random, and taking it off its free block waited on each of them in turn. A hint only:
    /// the generator itself is not advanced, and no result changes.
    #[inline]
    fn prefetch_next_scattered(&self) {
        let Some(s) = self.scatter.as_ref() else { return };
        let mut rng = s.rng.clone();
        // `alloc_scattered`'s draw of whether a new run starts, then the pick.
        let _ = rng.unit();
        let (slot, offset) = Scatter::pick(&mut rng, 1u64 << self.pageblock_order);
        let pb = s.pool[slot];
        if pb == NIL {
            return;
        }
        let block = (pb as u64) << self.pageblock_order;
        for f in [block + offset, block] {
            if f < self.frames {
                let i = f as usize;
                crate::hint::prefetch(&self.kind[i]);
                crate::hint::prefetch(&self.order[i]);
                crate::hint::prefetch(&self.next[i]);
                crate::hint::prefetch(&self.prev[i]);
            }
        }
    }

    /// A scattered allocation's new run: a frame picked at random in the pool's pageblocks.
    fn scatter_new_run(&mut self) -> Option<Pfn> {
        let span = 1u64 << self.pageblock_order;
        for _ in 0..SCATTER_TRIES {
            let s = self.scatter.as_mut().expect("checked above");
            let (slot, offset) = Scatter::pick(&mut s.rng, span);
            let mut pb = s.pool[slot];
            if pb == NIL || (self.pb_free[pb as usize] as u64) < span / 8 {
                // The next pageblock the lists would split: the head of the smallest movable
                // list at a pageblock's order or above.
                let Some(h) = (self.pageblock_order..=self.max_order).map(|o| self.heads[MigrateType::Movable as usize][o as usize]).find(|&h| h != NIL) else {
                    break;
                };
                pb = (h as u64 >> self.pageblock_order) as u32;
                self.scatter.as_mut().expect("checked above").pool[slot] = pb;
            }
            let pfn = ((pb as u64) << self.pageblock_order) + offset;
            if self.scatter_target(pfn) {
                self.counters.scatter_new_runs += 1;
                return Some(self.take_scattered(pfn));
            }
        }
        self.counters.scatter_fallbacks += 1;
        None
    }

    /// Take free frame `pfn` (checked by `scatter_target`) for an anonymous page and make it
    /// the run's last, so the next allocation may continue after it.
    fn take_scattered(&mut self, pfn: u64) -> Pfn {
        let ok = self.alloc_at(pfn, 0, FrameKind::Anon);
        debug_assert!(ok, "a free frame alloc_at refused");
        if let Some(s) = self.scatter.as_mut() {
            s.last = Some(pfn);
        }
        Pfn(pfn)
    }

    /// Relabel the pageblock(s) under a stolen block for `mt`. A block of pageblock size or
    /// more is claimed outright; a smaller one claims its pageblock when at least half of it is
    /// free (Linux's `steal_suitable_fallback`). Free blocks in a relabelled pageblock move to
    /// the new type's lists.
    fn claim_pageblocks(&mut self, pfn: u64, o: u8, mt: MigrateType) {
        let first = self.pb_of(pfn);
        let last = self.pb_of(pfn + (1 << o) - 1);
        for pb in first..=last {
            if self.pb_type[pb] == mt as u8 {
                continue;
            }
            if o < self.pageblock_order && self.pb_free[pb] < (1 << self.pageblock_order) / 2 {
                continue;
            }
            self.set_pageblock_type(pb, mt);
        }
    }

    /// Linux 4.x's `move_freepages_block` without the relabel: the free blocks that start in
    /// pageblock `pb` go to `mt`'s lists, its label stays (`steal_moves_free_blocks`).
    fn move_free_blocks(&mut self, pb: usize, mt: MigrateType) {
        self.counters.pageblocks_raided += 1;
        self.relist_free_blocks(pb, mt);
    }

    /// Move the free blocks that start in pageblock `pb` to `mt`'s lists.
    fn relist_free_blocks(&mut self, pb: usize, mt: MigrateType) {
        let start = (pb as u64) << self.pageblock_order;
        let end = (start + (1 << self.pageblock_order)).min(self.frames);
        let mut f = start;
        while f < end {
            if self.is_head(f) {
                let o = self.order[f as usize];
                if self.kind_of(f) == FrameKind::Free {
                    self.list_remove(f);
                    self.list_push_as(f, o, mt as usize);
                }
                f += 1 << o;
            } else {
                f += 1;
            }
        }
    }

    /// Change a pageblock's migrate type and re-list the free blocks that start inside it.
    pub fn set_pageblock_type(&mut self, pb: usize, mt: MigrateType) {
        if self.pb_type[pb] == mt as u8 {
            return;
        }
        self.pb_type[pb] = mt as u8;
        self.counters.pageblocks_claimed += 1;
        self.relist_free_blocks(pb, mt);
    }

    /// Allocate the specific free frames [pfn, pfn + 2^order) (they must all be free). Used to
    /// place fragmentation at chosen spots and by compaction's free scanner.
    pub fn alloc_at(&mut self, pfn: u64, order: u8, kind: FrameKind) -> bool {
        let n = 1u64 << order;
        if pfn & (n - 1) != 0 || pfn + n > self.frames {
            return false;
        }
        // Find the free block containing pfn: scan down for its head.
        let Some((head, ho)) = self.free_block_containing(pfn) else { return false };
        if ho < order {
            return false;
        }
        // Split the containing block until [pfn, pfn+n) is a block of its own.
        self.list_remove(head);
        self.add_free_counts(head, ho, -1);
        let (mut base, mut cur) = (head, ho);
        while cur > order {
            cur -= 1;
            self.counters.splits += 1;
            let half = 1u64 << cur;
            let (keep, give) = if pfn >= base + half { (base + half, base) } else { (base, base + half) };
            self.kind[give as usize] = FrameKind::Free as u8;
            self.add_free_block(give, cur);
            base = keep;
        }
        debug_assert_eq!(base, pfn);
        self.mark_allocated(pfn, order, kind);
        true
    }

    /// The free block that contains `pfn`, as (head, order).
    pub fn free_block_containing(&self, pfn: u64) -> Option<(u64, u8)> {
        if pfn >= self.frames || self.kind_of(pfn) != FrameKind::Free {
            return None;
        }
        for o in 0..=self.max_order {
            let head = pfn & !((1u64 << o) - 1);
            if self.is_head(head) {
                let ho = self.order[head as usize];
                return (self.kind_of(head) == FrameKind::Free && head + (1 << ho) > pfn).then_some((head, ho));
            }
        }
        None
    }

    /// Free the block at `pfn` of `order` (a whole allocation, or a piece of one that was
    /// split with `split_allocation`), merging with free buddies (`__free_one_page`).
    pub fn free(&mut self, pfn: Pfn, order: Order) {
        let (pfn, o) = (pfn.0, order.0);
        debug_assert!(self.is_head(pfn), "free of a non-head frame {pfn:#x}");
        debug_assert_eq!(self.order[pfn as usize], o, "free with the wrong order at {pfn:#x}");
        if let Some(id) = self.reservs.of_frame(pfn) {
            self.reserv_free(id, pfn, o);
            return;
        }
        self.mark_block_free(pfn, o);
        self.merge_in(pfn, o);
    }

    /// The frames of the allocated block at `pfn` become free (not yet on any list).
    #[inline]
    fn mark_block_free(&mut self, pfn: u64, o: u8) {
        let kind = self.kind_of(pfn);
        debug_assert!(kind != FrameKind::Free && kind != FrameKind::Reserved, "double free at {pfn:#x}");
        let n = 1usize << o;
        if n > 1 {
            self.kind[pfn as usize + 1..pfn as usize + n].fill(FrameKind::Free as u8);
        }
        self.kind[pfn as usize] = FrameKind::Free as u8;
        if !self.is_cache_frame(pfn) {
            self.owner[pfn as usize] = 0;
        }
        self.recount_kind(pfn, n as u64, kind, FrameKind::Free);
    }

    /// Free many blocks at once (process exit, a large unmap): the blocks are marked in a
    /// bitmap over their frame range, and runs of adjacent freed frames are released as
    /// maximal aligned extents, so a run of N frames costs about log N list operations instead
    /// of N frees with their merges (and no sort of the blocks).
    pub fn free_many(&mut self, blocks: &mut [(u64, u8)]) {
        if self.reservs.count() > 0 && blocks.iter().any(|b| self.reservs.is_member(b.0)) {
            // Frames inside reservations go back to them, one by one; the rest as below.
            let mut rest: Vec<(u64, u8)> = Vec::with_capacity(blocks.len());
            for &(pfn, o) in blocks.iter() {
                match self.reservs.of_frame(pfn) {
                    Some(id) => self.reserv_free(id, pfn, o),
                    None => rest.push((pfn, o)),
                }
            }
            return self.free_many(&mut rest);
        }
        if blocks.len() < 64 {
            for &(pfn, o) in blocks.iter() {
                self.free(Pfn(pfn), Order(o));
            }
            return;
        }
        let lo = blocks.iter().map(|b| b.0).min().unwrap_or(0);
        let hi = blocks.iter().map(|b| b.0 + (1u64 << b.1)).max().unwrap_or(0);
        self.free_blocks_visited(Some((lo, hi)), &mut |f| {
            for &(pfn, o) in blocks.iter() {
                f(pfn, o);
            }
        });
    }

    /// `free_many` for blocks that `visit` names by calling its argument on each (pfn, order)
    /// instead of a list (a process's exit frees its frames straight from its page table).
    /// `range`: frames [lo, hi) known to hold every block, or None for all of memory (the
    /// marks then go in a bitmap over every frame, which the host maps lazily). None of the
    /// blocks may lie in a reservation. Returns how many blocks were freed.
    pub fn free_blocks_visited(&mut self, range: Option<(u64, u64)>, visit: BlockVisitor<'_>) -> u64 {
        let (lo, end) = range.unwrap_or((0, self.frames));
        if lo >= end {
            return 0;
        }
        let mut bits = vec![0u64; ((end - lo) as usize).div_ceil(64)];
        let (mut first, mut hi) = (u64::MAX, 0u64);
        let mut count = 0u64;
        visit(&mut |pfn, o| {
            debug_assert!(self.is_head(pfn) && self.order[pfn as usize] == o, "free of a non-block at {pfn:#x}");
            debug_assert!(self.reservs.count() == 0 || !self.reservs.is_member(pfn), "free_blocks_visited inside a reservation at {pfn:#x}");
            debug_assert!(pfn >= lo && pfn + (1u64 << o) <= end, "a block outside the range given");
            // Only the bitmap here: the frames are marked free in the scan below, in frame
            // order (the visit comes in address order, which scatters over the frame tables).
            let (a, b) = ((pfn - lo) as usize, (pfn - lo) as usize + (1usize << o));
            debug_assert!(bits[a / 64] >> (a % 64) & 1 == 0, "block at {pfn:#x} freed twice");
            for i in a..b {
                bits[i / 64] |= 1 << (i % 64);
            }
            first = first.min(pfn);
            hi = hi.max(pfn + (1u64 << o));
            count += 1;
        });
        if count == 0 {
            return 0;
        }
        // Scan for runs of set bits (from the first marked frame): each is frames now free
        // and on no list.
        let n = (hi - lo) as usize;
        let mut i = (first - lo) as usize;
        while i < n {
            let w = bits[i / 64] >> (i % 64);
            if w == 0 {
                i = (i / 64 + 1) * 64;
                continue;
            }
            i += w.trailing_zeros() as usize;
            let start = i;
            while i < n && bits[i / 64] >> (i % 64) & 1 != 0 {
                let w = !(bits[i / 64] >> (i % 64));
                i += if w == 0 { 64 - i % 64 } else { (w.trailing_zeros() as usize).min(64 - i % 64) };
            }
            let end = i.min(n);
            let (mut pfn, end) = (lo + start as u64, lo + end as u64);
            // The run is whole freed blocks, so it starts at a block's head.
            let mut head = pfn;
            while head < end {
                let o = self.order[head as usize];
                self.mark_block_free(head, o);
                head += 1 << o;
            }
            while pfn < end {
                let o = (self.max_order as u32).min(pfn.trailing_zeros()).min(63 - (end - pfn).leading_zeros());
                self.merge_in(pfn, o as u8);
                pfn += 1 << o;
            }
        }
        count
    }

    /// Insert the free block at `pfn` (frames already marked free), merging with buddies.
    /// Returns the head of the block it ended in.
    fn merge_in(&mut self, mut pfn: u64, mut o: u8) -> u64 {
        while o < self.max_order {
            let buddy = pfn ^ (1u64 << o);
            if buddy + (1u64 << o) > self.frames || !self.is_free_head_of_order(buddy, o) {
                break;
            }
            self.list_remove(buddy);
            self.add_free_counts(buddy, o, -1);
            self.counters.merges += 1;
            pfn = pfn.min(buddy);
            o += 1;
        }
        self.kind[pfn as usize] = FrameKind::Free as u8;
        self.add_free_block(pfn, o);
        if self.cache_frames > 0 && self.holds_cache(pfn, 1u64 << o) {
            self.list_to_tail(pfn);
        }
        pfn
    }

    /// Whether any frame of [pfn, pfn + n) holds a cache page.
    fn holds_cache(&self, pfn: u64, n: u64) -> bool {
        let (mut f, end) = (pfn, pfn + n);
        while f < end {
            let take = (64 - f % 64).min(end - f);
            let mask = if take == 64 { u64::MAX } else { ((1u64 << take) - 1) << (f % 64) };
            if self.cache_bits[(f / 64) as usize] & mask != 0 {
                return true;
            }
            f += take;
        }
        false
    }

    /// Turn an allocated block into 2^(order-to) allocated blocks of order `to` (a demotion or
    /// split of a large page: each piece can then be freed or moved on its own).
    pub fn split_allocation(&mut self, pfn: Pfn, to: Order) {
        let o = self.order[pfn.0 as usize];
        debug_assert!(self.is_head(pfn.0) && to.0 <= o);
        let kind = self.kind_of(pfn.0) as u8;
        // (A cache frame's owner names its contents, not the allocation: leave those alone.)
        let owner = if self.is_cache_frame(pfn.0) { Owner::NONE } else { Owner(self.owner[pfn.0 as usize]) };
        let step = 1u64 << to.0;
        let mut f = pfn.0;
        let mut i = 0u64;
        while f < pfn.0 + (1 << o) {
            self.kind[f as usize] = kind | HEAD;
            self.order[f as usize] = to.0;
            // Anonymous owners advance with the address; others keep the head's.
            if !self.is_cache_frame(f) {
                self.owner[f as usize] = match owner.as_anon() {
                    Some((pi, vpn)) => Owner::anon(pi, vpn + i * step).0,
                    None => owner.0,
                };
            }
            f += step;
            i += 1;
        }
    }

    /// Join the allocated blocks tiling [pfn, pfn + 2^order) into one allocation (promotion in
    /// place: the frames were already contiguous). They must all be allocated, of one kind.
    /// The joined block keeps the first block's owner. Returns false, changing nothing, if not.
    pub fn merge_allocation(&mut self, pfn: Pfn, order: Order) -> bool {
        let (start, n) = (pfn.0, 1u64 << order.0);
        if start & (n - 1) != 0 || start + n > self.frames || order.0 > self.max_order {
            return false;
        }
        let kind = self.kind_of(start);
        if kind == FrameKind::Free {
            return false;
        }
        let mut f = start;
        while f < start + n {
            if !self.is_head(f) || self.kind_of(f) != kind {
                return false;
            }
            f += 1u64 << self.order[f as usize];
        }
        if f != start + n {
            return false;
        }
        let mut f = start + (1u64 << self.order[start as usize]);
        while f < start + n {
            let o = self.order[f as usize];
            self.kind[f as usize] &= !HEAD;
            self.owner[f as usize] = 0;
            f += 1u64 << o;
        }
        self.order[start as usize] = order.0;
        true
    }

    /// Change the kind of an allocated block (e.g. a free-looking reservation becoming anon).
    pub fn set_kind(&mut self, pfn: Pfn, kind: FrameKind) {
        let o = self.order[pfn.0 as usize];
        let old = self.kind_of(pfn.0);
        debug_assert!(self.is_head(pfn.0) && old != FrameKind::Free && kind != FrameKind::Free);
        let n = 1usize << o;
        self.kind[pfn.0 as usize..pfn.0 as usize + n].fill(kind as u8);
        self.kind[pfn.0 as usize] |= HEAD;
        self.recount_kind(pfn.0, n as u64, old, kind);
    }

    /// Check every invariant in the header comment (O(frames): tests only).
    pub fn validate(&self) -> Result<(), String> {
        let mut f = 0u64;
        let mut free = 0u64;
        let mut pb_free = vec![0u32; self.pb_type.len()];
        let mut region_free = vec![0u32; self.region_free.len()];
        let mut region_unmovable = vec![0u32; self.region_free.len()];
        let mut by_kind = [0u64; 7];
        let mut listed = [[0u64; MAX_ORDER + 1]; 3];
        while f < self.frames {
            if !self.is_head(f) {
                return Err(format!("frame {f:#x} belongs to no block (no head before it)"));
            }
            let o = self.order[f as usize];
            let n = 1u64 << o;
            if f & (n - 1) != 0 || f + n > self.frames || o > self.max_order {
                return Err(format!("block at {f:#x} of order {o} is misaligned or out of range"));
            }
            let k = self.kind_of(f);
            for g in f + 1..f + n {
                if self.is_head(g) || self.kind_of(g) != k {
                    return Err(format!("frame {g:#x} inside the order-{o} block at {f:#x} disagrees with its head"));
                }
            }
            by_kind[k as usize] += n;
            if k.pins() {
                region_unmovable[self.region_of(f)] += n as u32;
            }
            if k == FrameKind::Free {
                free += n;
                region_free[self.region_of(f)] += n as u32;
                let mt = ((self.kind[f as usize] >> 4) & 3) as usize;
                if mt != self.pb_type[self.pb_of(f)] as usize && !self.steal_moves_free_blocks {
                    return Err(format!(
                        "free block {f:#x} is on the {} list but its pageblock is {}",
                        MigrateType::ALL[mt].name(),
                        self.pageblock_type(self.pb_of(f)).name()
                    ));
                }
                listed[mt][o as usize] += 1;
                for g in f..f + n {
                    pb_free[self.pb_of(g)] += 1;
                }
                if o < self.max_order {
                    let b = f ^ n;
                    if b + n <= self.frames && self.is_free_head_of_order(b, o) {
                        return Err(format!("free buddies {f:#x} and {b:#x} of order {o} were not merged"));
                    }
                }
            }
            f += n;
        }
        if free != self.free || by_kind != self.used_by_kind {
            return Err(format!("frame counts disagree: free {} vs {}, by kind {:?} vs {:?}", free, self.free, by_kind, self.used_by_kind));
        }
        if pb_free != self.pb_free {
            return Err("per-pageblock free counts disagree with the frame table".into());
        }
        for r in 0..region_free.len() {
            if region_free[r] != self.region_free[r] || region_unmovable[r] != self.region_unmovable[r] {
                return Err(format!(
                    "region {r}: {} free and {} unmovable frames counted, the frame table has {} and {}",
                    self.region_free[r], self.region_unmovable[r], region_free[r], region_unmovable[r]
                ));
            }
        }
        for (r, &z) in self.region_zeroed.iter().enumerate() {
            let whole = 1u32 << self.max_order;
            let start = (r as u64) << self.max_order;
            let one_free_block = self.region_free[r] == whole && self.is_head(start) && self.order[start as usize] == self.max_order;
            if z && !one_free_block && self.region_free[r] != 0 {
                return Err(format!("region {r} is marked pre-zeroed but is neither one free block nor allocated whole"));
            }
        }
        let mut cached = 0u64;
        for (w, &bits) in self.cache_bits.iter().enumerate() {
            let mut b = bits;
            while b != 0 {
                let f = w as u64 * 64 + b.trailing_zeros() as u64;
                b &= b - 1;
                cached += 1;
                let k = self.kind_of(f);
                if k != FrameKind::Free && k != FrameKind::Reservation {
                    return Err(format!("frame {f:#x} holds a cache page but is allocated ({})", k.name()));
                }
                if Owner(self.owner[f as usize]).as_file().is_none() {
                    return Err(format!("cache frame {f:#x} names no file page"));
                }
            }
        }
        if cached != self.cache_frames {
            return Err(format!("{cached} cache frames in the bitmap, counted {}", self.cache_frames));
        }
        // Walk every list: lengths and membership.
        for mt in 0..3 {
            for o in 0..=self.max_order as usize {
                let mut n = 0u64;
                let mut p = self.heads[mt][o];
                let mut prev = NIL;
                while p != NIL {
                    if !self.is_free_head_of_order(p as u64, o as u8) || self.prev[p as usize] != prev {
                        return Err(format!("free list ({}, order {o}) holds {p:#x}, which is not a free order-{o} head", MigrateType::ALL[mt].name()));
                    }
                    n += 1;
                    if n > self.frames {
                        return Err("free list cycle".into());
                    }
                    prev = p;
                    p = self.next[p as usize];
                }
                if prev != self.tails[mt][o] && n > 0 {
                    return Err(format!("free list ({}, order {o}) ends at {prev:#x} but its tail says {:#x}", MigrateType::ALL[mt].name(), self.tails[mt][o]));
                }
                if n != self.list_len[mt][o] || n != listed[mt][o] {
                    return Err(format!(
                        "free list ({}, order {o}) has {n} entries, counted {}, frame table says {}",
                        MigrateType::ALL[mt].name(),
                        self.list_len[mt][o],
                        listed[mt][o]
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_as_maximal_blocks() {
        let m = PhysMem::new(3 * 512 + 7, 9, 9).unwrap();
        assert_eq!(m.free_blocks(9), 3);
        assert_eq!(m.free_blocks(2), 1);
        assert_eq!(m.free_blocks(1), 1);
        assert_eq!(m.free_blocks(0), 1);
        assert_eq!(m.free_frames(), 3 * 512 + 7);
        m.validate().unwrap();
    }

    #[test]
    fn split_and_merge_back() {
        let mut m = PhysMem::new(1024, 10, 9).unwrap();
        let a = m.alloc(Order(0), FrameKind::Anon).unwrap();
        assert_eq!(m.free_frames(), 1023);
        assert_eq!(m.free_blocks(10), 0);
        m.validate().unwrap();
        let b = m.alloc(Order(9), FrameKind::Anon).unwrap();
        assert_eq!(b.0 % 512, 0);
        m.validate().unwrap();
        m.free(a, Order(0));
        m.free(b, Order(9));
        m.validate().unwrap();
        assert_eq!(m.free_blocks(10), 1, "everything merged back into one block");
    }

    #[test]
    fn unmovable_steals_a_pageblock() {
        let mut m = PhysMem::new(2048, 10, 9).unwrap();
        let p = m.alloc(Order(0), FrameKind::Wired).unwrap();
        assert_eq!(m.counters.fallbacks, 1);
        let pb = (p.0 >> 9) as usize;
        assert_eq!(m.pageblock_type(pb), MigrateType::Unmovable);
        // The next unmovable allocation comes from the claimed pageblock, not a fallback.
        let q = m.alloc(Order(0), FrameKind::PageTable).unwrap();
        assert_eq!(m.counters.fallbacks, 1);
        assert_eq!(q.0 >> 9, p.0 >> 9);
        m.validate().unwrap();
    }

    /// Memory full of movable frames but for every 4th frame of pageblocks 1 and 2 (16 each),
    /// then unmovable allocations: no pageblock is half free, so no steal relabels one.
    fn unmovable_steals_from_full_memory(linux4: bool) -> (PhysMem, Vec<u64>) {
        let mut m = PhysMem::new(2048, 10, 9).unwrap();
        m.steal_moves_free_blocks = linux4;
        let all: Vec<Pfn> = (0..2048).map(|_| m.alloc(Order(0), FrameKind::Anon).unwrap()).collect();
        for p in all.iter().filter(|p| (512..1536).contains(&p.0) && p.0 % 32 == 0) {
            m.free(*p, Order(0));
        }
        let got = (0..8).map(|_| m.alloc(Order(0), FrameKind::PageTable).unwrap().0).collect();
        m.validate().unwrap();
        (m, got)
    }

    #[test]
    fn a_linux4_steal_moves_the_pageblocks_free_blocks_to_the_requesters_lists() {
        let (m, got) = unmovable_steals_from_full_memory(true);
        assert_eq!(m.counters.pageblocks_claimed, 0, "less than half free: no relabel");
        assert_eq!(m.counters.fallbacks, 1, "one steal, then the moved blocks serve the rest");
        assert_eq!(m.counters.pageblocks_raided, 1);
        assert!(got.iter().all(|&p| p >> 9 == got[0] >> 9), "every page table in one pageblock: {got:?}");
        let (m, _) = unmovable_steals_from_full_memory(false);
        assert_eq!(m.counters.fallbacks, 8, "without it every page table steals again");
        assert_eq!(m.counters.pageblocks_raided, 0);
    }

    #[test]
    fn alloc_at_places_a_block() {
        let mut m = PhysMem::new(1024, 10, 9).unwrap();
        assert!(!m.alloc_at(302, 2, FrameKind::Wired), "misaligned");
        assert!(m.alloc_at(304, 2, FrameKind::Wired));
        assert!(!m.alloc_at(304, 0, FrameKind::Wired), "already taken");
        m.validate().unwrap();
        assert_eq!(m.free_frames(), 1020);
        assert_eq!(m.largest_free_order(), Some(9));
        m.free(Pfn(304), Order(2));
        m.validate().unwrap();
        assert_eq!(m.largest_free_order(), Some(10));
    }

    #[test]
    fn split_allocation_frees_piecewise() {
        let mut m = PhysMem::new(1024, 10, 9).unwrap();
        let p = m.alloc(Order(9), FrameKind::Anon).unwrap();
        m.set_owner(p, Owner::anon(0, 0x200));
        m.split_allocation(p, Order(0));
        assert_eq!(m.owner(p.0 + 5), Owner::anon(0, 0x205));
        m.validate().unwrap();
        for i in 0..512 {
            m.free(Pfn(p.0 + i), Order(0));
        }
        m.validate().unwrap();
        assert_eq!(m.free_blocks(10), 1);
    }

    /// Every free list, in list order (head first), per migrate type and order.
    fn lists(m: &PhysMem) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        for mt in 0..3 {
            for o in 0..=m.max_order as usize {
                let mut l = Vec::new();
                let mut p = m.heads[mt][o];
                while p != NIL {
                    l.push(p);
                    p = m.next[p as usize];
                }
                out.push(l);
            }
        }
        out
    }

    #[test]
    fn freeing_visited_blocks_in_any_order_equals_free_many() {
        let setup = || {
            let mut m = PhysMem::new(4096, 12, 9).unwrap();
            let mut got = Vec::new();
            for i in 0..600u64 {
                let o = [0u8, 0, 3, 0, 1][(i % 5) as usize];
                got.push((m.alloc(Order(o), FrameKind::Anon).unwrap().0, o));
            }
            (m, got)
        };
        let (mut a, got) = setup();
        let (mut b, _) = setup();
        let mut blocks: Vec<(u64, u8)> = got.iter().copied().filter(|b| b.0 % 3 != 1).collect();
        a.free_many(&mut blocks.clone());
        // The page table's order is not the allocation order: visit them reversed and twice
        // interleaved, over all of memory (no range given).
        blocks.reverse();
        let freed = b.free_blocks_visited(None, &mut |f| {
            for &(p, o) in blocks.iter().step_by(2).chain(blocks.iter().skip(1).step_by(2)) {
                f(p, o);
            }
        });
        assert_eq!(freed, blocks.len() as u64);
        a.validate().unwrap();
        b.validate().unwrap();
        assert_eq!(lists(&a), lists(&b));
        assert_eq!(a.free_frames(), b.free_frames());
        assert_eq!(b.free_blocks_visited(None, &mut |_| {}), 0, "nothing named, nothing freed");
    }

    #[test]
    fn free_many_equals_one_by_one() {
        let mut a = PhysMem::new(4096, 12, 9).unwrap();
        let mut got = Vec::new();
        for i in 0..700u64 {
            let o = [0u8, 0, 2, 0, 9, 1][(i % 6) as usize];
            if let Some(p) = a.alloc(Order(o), FrameKind::Anon) {
                got.push((p.0, o));
            }
        }
        let mut b_blocks: Vec<(u64, u8)> = got.iter().copied().step_by(3).collect();
        let keep: Vec<(u64, u8)> = got.iter().copied().enumerate().filter(|(i, _)| i % 3 != 0).map(|(_, b)| b).collect();
        let mut one = PhysMem::new(4096, 12, 9).unwrap();
        for &(p, o) in &got {
            assert!(one.alloc_at(p, o, FrameKind::Anon));
        }
        for &(p, o) in &b_blocks {
            one.free(Pfn(p), Order(o));
        }
        a.free_many(&mut b_blocks);
        a.validate().unwrap();
        one.validate().unwrap();
        for o in 0..=12 {
            assert_eq!(a.free_blocks(o), one.free_blocks(o), "order {o}");
        }
        let mut rest = keep.clone();
        a.free_many(&mut rest);
        a.validate().unwrap();
        assert_eq!(a.free_blocks(12), 1);
    }

    #[test]
    fn merge_allocation_joins_contiguous_blocks() {
        let mut m = PhysMem::new(1024, 10, 9).unwrap();
        for f in 0..512u64 {
            assert!(m.alloc_at(512 + f, 0, FrameKind::Anon));
        }
        assert!(!m.merge_allocation(Pfn(256), Order(9)), "misaligned");
        assert!(m.merge_allocation(Pfn(512), Order(9)));
        m.validate().unwrap();
        assert_eq!(m.order_at(512), 9);
        m.free(Pfn(512), Order(9));
        m.validate().unwrap();
        assert_eq!(m.free_blocks(10), 1);
        assert!(!m.merge_allocation(Pfn(0), Order(9)), "free frames cannot be joined");
    }

    #[test]
    fn exhaustion_is_counted() {
        let mut m = PhysMem::new(16, 4, 9).unwrap();
        assert!(m.alloc(Order(4), FrameKind::Anon).is_some());
        assert!(m.alloc(Order(0), FrameKind::Anon).is_none());
        assert_eq!(m.counters.alloc_failures[0], 1);
    }

    #[test]
    fn owners_round_trip() {
        let o = Owner::anon(7, 0x7_ffff_ffff);
        assert_eq!(o.as_anon(), Some((7, 0x7_ffff_ffff)));
        assert_eq!(o.as_file(), None);
        let f = Owner::file(3, 12345);
        assert_eq!(f.as_file(), Some((3, 12345)));
        assert_eq!(f.as_anon(), None);
    }

    /// Allocate `n` order-0 anonymous frames on fresh memory scattered by `fraction`; the frames
    /// and the share of consecutive allocations that took neighbouring frames.
    fn scattered(fraction: f64, seed: u64, n: usize) -> (PhysMem, Vec<u64>, f64) {
        // 4GiB: more pageblocks than the scatter's window.
        let mut m = PhysMem::new(1 << 20, 12, 9).unwrap();
        m.scatter = Scatter::new(fraction, seed);
        let got: Vec<u64> = (0..n).map(|_| m.alloc(Order(0), FrameKind::Anon).unwrap().0).collect();
        m.validate().unwrap();
        let adjacent = got.windows(2).filter(|w| w[1] == w[0] + 1).count() as f64 / (n - 1) as f64;
        (m, got, adjacent)
    }

    #[test]
    fn unscattered_frames_come_in_address_order() {
        assert!(Scatter::new(0.0, 1).is_none(), "a fraction of 0 changes nothing");
        let (m, got, adjacent) = scattered(0.0, 1, 1000);
        assert_eq!(adjacent, 1.0);
        assert_eq!(got[1], got[0] + 1);
        assert_eq!(m.counters.scatter_new_runs + m.counters.scatter_run_continued, 0);
    }

    #[test]
    fn scattered_frames_start_new_runs_at_the_fraction_asked() {
        for (fraction, lo, hi) in [(1.0, 0.0, 0.01), (0.5, 0.45, 0.55), (0.13, 0.83, 0.91)] {
            let (m, got, adjacent) = scattered(fraction, 7, 4000);
            assert!((lo..=hi).contains(&adjacent), "fraction {fraction}: {adjacent} of neighbours adjacent");
            let c = &m.counters;
            assert_eq!(c.scatter_new_runs + c.scatter_run_continued, 4000);
            assert_eq!(c.scatter_fallbacks, 0);
            // Spread over memory: the frames' low bits (what indexes a cache's sets) take
            // every value, which address order would not for frames 64KiB apart.
            let mut low = [0u32; 16];
            for &f in got.iter().step_by(16) {
                low[(f & 15) as usize] += 1;
            }
            assert!(fraction < 0.5 || low.iter().all(|&k| k > 0), "{low:?}");
            let blocks: std::collections::BTreeSet<u64> = got.iter().map(|f| f >> 9).collect();
            assert!(fraction < 0.5 || blocks.len() > 256, "spread over many pageblocks: {}", blocks.len());
        }
    }

    #[test]
    fn scatter_is_deterministic_and_leaves_other_allocations_alone() {
        let (_, a, _) = scattered(0.5, 3, 500);
        let (_, b, _) = scattered(0.5, 3, 500);
        let (_, c, _) = scattered(0.5, 4, 500);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut plain = PhysMem::new(1 << 16, 12, 9).unwrap();
        let mut m = PhysMem::new(1 << 16, 12, 9).unwrap();
        m.scatter = Scatter::new(1.0, 1);
        for (order, kind) in [(0, FrameKind::PageTable), (9, FrameKind::Anon), (0, FrameKind::File)] {
            assert_eq!(m.alloc(Order(order), kind), plain.alloc(Order(order), kind), "{kind:?} of order {order} takes the lists' order");
        }
        assert_eq!(m.counters.scatter_new_runs, 0);
    }

    #[test]
    fn scatter_falls_back_to_the_lists_when_no_pick_is_free() {
        let mut m = PhysMem::new(1024, 10, 9).unwrap();
        m.scatter = Scatter::new(1.0, 1);
        // Fill all but two frames, then ask for them: random picks mostly miss, and every
        // allocation still succeeds.
        assert!(m.alloc(Order(9), FrameKind::Anon).is_some());
        for _ in 0..510 {
            assert!(m.alloc(Order(0), FrameKind::Wired).is_some());
        }
        assert!(m.alloc(Order(0), FrameKind::Anon).is_some());
        assert!(m.alloc(Order(0), FrameKind::Anon).is_some());
        assert!(m.alloc(Order(0), FrameKind::Anon).is_none());
        m.validate().unwrap();
        assert!(m.counters.scatter_fallbacks >= 1, "{:?}", m.counters.scatter_fallbacks);
    }
}
