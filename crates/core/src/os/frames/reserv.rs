//! Reservations (Navarro et al. 2002, §A.2.2 of docs/notes; FreeBSD's vm_reserv.c is the same
//! idea in production): at a first touch, a policy sets aside an aligned extent of physical
//! frames for the aligned virtual extent around the fault, maps the touched page at the frame
//! with the matching offset, and keeps the rest for the neighbours' first touches, so that the
//! extent can later be promoted in place, without copying.
//!
//! This module is the physical side only (the OS maps from a reservation with
//! `Os::reserve_and_map` and `Os::map_from_reservation`, os/promote.rs): extents, their population maps, and what happens when
//! a frame inside one is freed. Which extent to reserve, when to promote and which reservation to
//! preempt are policy decisions (policy/navarro.rs).
//!
//! Invariants (checked by `validate_reservations`):
//! - A reservation is an extent of 2^order frames aligned to its size, recorded in `by_extent`
//!   under (first frame, order); extents of live reservations never overlap.
//! - Every frame of a live reservation has its bit set in `member`; no other frame has.
//! - Each frame of a reservation is its own allocation (order 0) or part of a larger allocation
//!   lying wholly inside the extent (a promoted superpage). A frame is *populated* (its bit set
//!   in `popmap`) exactly when its kind is not `Reservation`; `popcnt` counts them; a live
//!   reservation has at least one populated frame.
//! - Freeing a populated frame gives it back to its reservation (kind `Reservation` again), not
//!   to the buddy allocator; when the last one goes, the whole extent returns to the buddy
//!   allocator in one aligned block.

use super::{FrameKind, Owner, PhysMem};
use crate::fasthash::FastMap;
use crate::os::zeroed::ZeroedBuf;
use crate::units::{Order, Pfn};

/// One reservation.
#[derive(Clone, Debug)]
pub struct Reserv {
    pub pfn: u64,
    pub order: u8,
    /// Who the extent is for: the anonymous owner (process, virtual page) of its first frame.
    pub owner: Owner,
    /// Bit i: frame pfn + i is populated.
    pub popmap: Vec<u64>,
    pub popcnt: u32,
    /// Simulated time (cycles) of the latest frame allocation from it: the preemption order.
    pub last_alloc: u64,
}

impl Reserv {
    pub fn frames(&self) -> u64 {
        1u64 << self.order
    }
    pub fn is_populated(&self, i: u64) -> bool {
        self.popmap[(i / 64) as usize] >> (i % 64) & 1 != 0
    }
    /// Populated frames in [i, i + n).
    pub fn populated_in(&self, i: u64, n: u64) -> u64 {
        (i..i + n).filter(|&k| self.is_populated(k)).count() as u64
    }
}

/// What became of a reservation's pieces when it was split (preempted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SplitOutcome {
    /// Pieces with no populated frame, returned to the buddy allocator.
    pub freed: u32,
    /// Fully populated pieces, no longer reserved (their frames stay allocated).
    pub dropped_full: u32,
    /// Partly populated pieces, each now a reservation of the smaller order.
    pub partial: Vec<u32>,
}

/// The reservation table, kept by `PhysMem` because freeing a frame must consult it.
pub struct Reservations {
    slots: Vec<Option<Reserv>>,
    free_ids: Vec<u32>,
    by_extent: FastMap<(u64, u8), u32>,
    /// Orders with at least one live reservation (bit per order), to look a frame up quickly.
    orders: u32,
    live_by_order: [u32; 32],
    member: ZeroedBuf<u64>,
    pub counters: ReservCounters,
}

crate::counters! {
    /// Counted events of the reservation mechanism (by order where it matters).
    #[derive(Clone, Debug, Default)]
    pub struct ReservCounters {
        pub created: [u64; 32] = by_hand,
        pub create_failed: [u64; 32] = by_hand,
        pub frames_populated: u64 = "reserv.frames_populated",
        pub frames_returned: u64 = "reserv.frames_returned",
        /// Reservations that ended because their last populated frame was freed.
        pub emptied: u64 = "reserv.emptied",
        pub splits: u64 = "reserv.splits",
        pub dissolved: u64 = "reserv.dissolved",
        /// Reservations broken by the allocator itself because no free frame was left.
        pub reclaimed: u64 = "reserv.reclaimed",
    }
}

impl Reservations {
    pub fn new(frames: u64) -> Result<Reservations, String> {
        Ok(Reservations {
            slots: Vec::new(),
            free_ids: Vec::new(),
            by_extent: FastMap::default(),
            orders: 0,
            live_by_order: [0; 32],
            member: ZeroedBuf::new((frames as usize).div_ceil(64))?,
            counters: ReservCounters::default(),
        })
    }

    pub fn get(&self, id: u32) -> Option<&Reserv> {
        self.slots.get(id as usize).and_then(|s| s.as_ref())
    }

    pub fn live(&self) -> impl Iterator<Item = (u32, &Reserv)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|r| (i as u32, r)))
    }

    pub fn count(&self) -> usize {
        self.by_extent.len()
    }

    #[inline]
    pub fn is_member(&self, pfn: u64) -> bool {
        self.member[(pfn / 64) as usize] >> (pfn % 64) & 1 != 0
    }

    fn set_member(&mut self, pfn: u64, n: u64, on: bool) {
        for f in pfn..pfn + n {
            let w = &mut self.member[(f / 64) as usize];
            if on {
                *w |= 1 << (f % 64);
            } else {
                *w &= !(1 << (f % 64));
            }
        }
    }

    /// The reservation holding frame `pfn`, if any.
    pub fn of_frame(&self, pfn: u64) -> Option<u32> {
        if !self.is_member(pfn) {
            return None;
        }
        let mut o = self.orders;
        while o != 0 {
            let order = o.trailing_zeros() as u8;
            o &= o - 1;
            if let Some(&id) = self.by_extent.get(&(pfn & !((1u64 << order) - 1), order)) {
                return Some(id);
            }
        }
        None
    }

    fn insert(&mut self, r: Reserv) -> u32 {
        let key = (r.pfn, r.order);
        let order = r.order;
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(r);
                id
            }
            None => {
                self.slots.push(Some(r));
                (self.slots.len() - 1) as u32
            }
        };
        self.by_extent.insert(key, id);
        self.live_by_order[order as usize] += 1;
        self.orders |= 1 << order;
        id
    }

    fn remove(&mut self, id: u32) -> Reserv {
        let r = self.slots[id as usize].take().expect("removing a dead reservation");
        self.by_extent.remove(&(r.pfn, r.order));
        self.free_ids.push(id);
        self.live_by_order[r.order as usize] -= 1;
        if self.live_by_order[r.order as usize] == 0 {
            self.orders &= !(1 << r.order);
        }
        r
    }
}

impl PhysMem {
    /// Mechanism: reserve a free aligned extent of 2^order frames for `owner` (the anonymous
    /// owner its first frame would have). None (counted) if no free block of the order exists.
    pub fn reserv_create(&mut self, order: Order, owner: Owner, now: u64) -> Option<(u32, Pfn)> {
        let Some(pfn) = self.alloc(order, FrameKind::Reservation) else {
            self.reservs.counters.create_failed[order.0 as usize] += 1;
            return None;
        };
        self.split_allocation(pfn, Order(0));
        let n = 1u64 << order.0;
        self.reservs.set_member(pfn.0, n, true);
        let id = self.reservs.insert(Reserv { pfn: pfn.0, order: order.0, owner, popmap: vec![0; (n as usize).div_ceil(64)], popcnt: 0, last_alloc: now });
        self.reservs.counters.created[order.0 as usize] += 1;
        Some((id, pfn))
    }

    /// Mechanism: allocate frame `index` of reservation `id` as a base page of `kind`. The
    /// caller maps it. None if the frame is already populated.
    pub fn reserv_alloc(&mut self, id: u32, index: u64, kind: FrameKind, now: u64) -> Option<Pfn> {
        let r = self.reservs.slots[id as usize].as_mut()?;
        if index >= r.frames() || r.is_populated(index) {
            return None;
        }
        r.popmap[(index / 64) as usize] |= 1 << (index % 64);
        r.popcnt += 1;
        r.last_alloc = now;
        let pfn = Pfn(r.pfn + index);
        self.lose_cache_frame(pfn.0);
        self.set_kind(pfn, kind);
        self.reservs.counters.frames_populated += 1;
        Some(pfn)
    }

    /// Freeing the allocation at `pfn` (order `o`) that lies in reservation `id`: its frames go
    /// back to the reservation; an emptied reservation returns its extent to the buddy allocator.
    pub(super) fn reserv_free(&mut self, id: u32, pfn: u64, o: u8) {
        if o > 0 {
            self.split_allocation(Pfn(pfn), Order(0));
        }
        let base = self.reservs.slots[id as usize].as_ref().expect("free into a dead reservation").pfn;
        for f in pfn..pfn + (1u64 << o) {
            self.set_kind(Pfn(f), FrameKind::Reservation);
            self.set_owner(Pfn(f), Owner(0));
            let r = self.reservs.slots[id as usize].as_mut().unwrap();
            let i = f - base;
            debug_assert!(r.is_populated(i), "freeing an unpopulated reserved frame {f:#x}");
            r.popmap[(i / 64) as usize] &= !(1 << (i % 64));
            r.popcnt -= 1;
        }
        self.reservs.counters.frames_returned += 1 << o;
        if self.reservs.slots[id as usize].as_ref().unwrap().popcnt == 0 {
            self.reservs.counters.emptied += 1;
            let r = self.reservs.remove(id);
            self.release_extent_frames(r.pfn, 1u64 << r.order);
        }
    }

    /// Unreserved frames [from, from + n) of an extent (all kind `Reservation`, order-0
    /// allocations) go back to the buddy allocator as aligned blocks.
    fn release_extent_frames(&mut self, from: u64, n: u64) {
        self.reservs.set_member(from, n, false);
        let mut blocks: Vec<(u64, u8)> = (from..from + n).map(|f| (f, 0u8)).collect();
        self.free_many(&mut blocks);
    }

    /// Mechanism (preemption): split reservation `id` into pieces of 2^`to` frames. Empty pieces
    /// return to the buddy allocator; fully populated ones stop being reserved; partly populated
    /// ones become reservations of order `to` (same last-allocation time). `to` = 0 dissolves
    /// the reservation entirely.
    pub fn reserv_split(&mut self, id: u32, to: Order) -> SplitOutcome {
        let r = self.reservs.remove(id);
        debug_assert!(to.0 < r.order);
        self.reservs.counters.splits += 1;
        if to.0 == 0 {
            self.reservs.counters.dissolved += 1;
        }
        let step = 1u64 << to.0;
        let mut out = SplitOutcome::default();
        let mut i = 0u64;
        while i < r.frames() {
            let pop = r.populated_in(i, step);
            let pfn = r.pfn + i;
            if pop == 0 {
                self.release_extent_frames(pfn, step);
                out.freed += 1;
            } else if pop == step {
                self.reservs.set_member(pfn, step, false);
                out.dropped_full += 1;
            } else {
                let mut popmap = vec![0u64; (step as usize).div_ceil(64)];
                for k in 0..step {
                    if r.is_populated(i + k) {
                        popmap[(k / 64) as usize] |= 1 << (k % 64);
                    }
                }
                let owner = match r.owner.as_anon() {
                    Some((pi, vpn)) => Owner::anon(pi, vpn + i),
                    None => r.owner,
                };
                let nid = self.reservs.insert(Reserv { pfn, order: to.0, owner, popmap, popcnt: pop as u32, last_alloc: r.last_alloc });
                out.partial.push(nid);
            }
            i += step;
        }
        out
    }

    /// Frames free or set aside but unpopulated in reservations: what an allocation can have
    /// (FreeBSD counts a reservation's unpopulated pages as free, too).
    pub fn available_frames(&self) -> u64 {
        self.free_frames() + self.frames_by_kind()[FrameKind::Reservation as usize]
    }

    /// `alloc`, and if no free block of the order exists, dissolve reservations (oldest
    /// allocation first) until one does: their unpopulated frames count as free.
    pub fn alloc_or_unreserve(&mut self, order: Order, kind: FrameKind) -> Option<Pfn> {
        loop {
            if let Some(p) = self.alloc(order, kind) {
                return Some(p);
            }
            if !self.reserv_reclaim_one() {
                return None;
            }
        }
    }

    /// When no free frame is left: dissolve the reservation whose latest allocation is the
    /// oldest, returning its unpopulated frames (FreeBSD's vm_reserv_reclaim_inactive). Returns
    /// whether there was one with frames to give.
    pub fn reserv_reclaim_one(&mut self) -> bool {
        let victim = self.reservs.live().filter(|(_, r)| (r.popcnt as u64) < r.frames()).min_by_key(|(id, r)| (r.last_alloc, *id)).map(|(id, _)| id);
        match victim {
            Some(id) => {
                self.reserv_split(id, Order(0));
                self.reservs.counters.reclaimed += 1;
                true
            }
            None => false,
        }
    }

    /// Check the invariants in the module comment (O(reserved frames): tests only).
    pub fn validate_reservations(&self) -> Result<(), String> {
        let mut members = 0u64;
        for (id, r) in self.reservs.live() {
            let n = r.frames();
            if r.pfn & (n - 1) != 0 || r.pfn + n > self.total_frames() {
                return Err(format!("reservation {id} at {:#x} of order {} is misaligned or out of range", r.pfn, r.order));
            }
            if self.reservs.by_extent.get(&(r.pfn, r.order)) != Some(&id) {
                return Err(format!("reservation {id} is missing from the extent map"));
            }
            let mut pop = 0u32;
            let mut f = r.pfn;
            while f < r.pfn + n {
                if !self.is_head(f) {
                    return Err(format!("reservation {id}: frame {f:#x} is inside an allocation reaching outside the extent"));
                }
                let o = self.order_at(f);
                if f + (1u64 << o) > r.pfn + n {
                    return Err(format!("reservation {id}: the order-{o} allocation at {f:#x} crosses the extent's end"));
                }
                let kind = self.kind_of(f);
                for g in f..f + (1u64 << o) {
                    if !self.reservs.is_member(g) {
                        return Err(format!("reservation {id}: frame {g:#x} lacks its member bit"));
                    }
                    let populated = r.is_populated(g - r.pfn);
                    if populated == (kind == FrameKind::Reservation) || kind == FrameKind::Free {
                        return Err(format!("reservation {id}: frame {g:#x} is {} but its population bit is {populated}", kind.name()));
                    }
                    pop += populated as u32;
                }
                members += 1u64 << o;
                f += 1u64 << o;
            }
            if pop != r.popcnt || pop == 0 {
                return Err(format!("reservation {id}: {pop} populated frames, count says {} (a live reservation has at least one)", r.popcnt));
            }
        }
        let set: u64 = (0..self.total_frames().div_ceil(64) as usize).map(|w| self.reservs.member[w].count_ones() as u64).sum();
        if set != members {
            return Err(format!("{set} frames carry a reservation bit, {members} belong to live reservations"));
        }
        let reserved_kind = self.frames_by_kind()[FrameKind::Reservation as usize];
        let unpopulated: u64 = self.reservs.live().map(|(_, r)| r.frames() - r.popcnt as u64).sum();
        if reserved_kind != unpopulated {
            return Err(format!("{reserved_kind} frames of kind reservation, {unpopulated} unpopulated in live reservations"));
        }
        Ok(())
    }
}
