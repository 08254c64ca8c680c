//! The data caches' replay on a thread of its own (issue 24's speed): the engine's thread
//! decides translations and queues the physical lines they reference; this thread applies
//! them to the levels, in order, while the engine goes on. Nothing the engine decides depends
//! on which level served a reference, so the two overlap until someone reads a counter.
//!
//! Structure and invariants:
//! - A ring of `RING` batches. `head` counts batches published (written only by the engine's
//!   thread), `tail` batches applied (written only by the replay thread); `tail <= head <=
//!   tail + RING`. Slot `k % RING` holds batch k from its publication until `tail > k`.
//! - The levels (`Shared::state`) belong to the replay thread while `tail < head`, and to the
//!   engine's thread once it has seen `tail == head` (`drain`): the replay thread touches them
//!   only for a batch it has not yet counted in `tail`, and a batch is published only by the
//!   engine's thread, which does not publish while it holds them.
//! - Release on every counter store, Acquire on every load that is followed by reading what
//!   the other side wrote (the batch, or the levels). `sleeping` and `head` use SeqCst on both
//!   sides, so no wake is lost: the replay thread sleeps only on an empty ring, and either it
//!   sees a batch published as it goes to sleep, or the engine's thread sees it sleeping and
//!   unparks it once WAKE_AT batches wait (or at once in `drain`). The ring is never full
//!   while the replay thread sleeps (WAKE_AT < RING).
//! - The order references are applied in is the order they were queued in, on one thread, so
//!   every count is the one replaying on the engine's thread gives (tested in mmu/cache.rs).

use super::cache::{Batch, CacheState};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Batches in flight: 4,096 of BATCH (64) references, about 2.1MB. On two CPUs shared by three
/// threads the scheduler takes the replay thread off a CPU for a time slice (milliseconds) now
/// and then; a ring that holds that long of the engine's output keeps the engine from waiting.
/// Measured on the AMD EPYC VM (host, Zipf 1GiB, 9 alternating runs each, medians): 1,024
/// batches gave 1.17x the refs/s of 256, and 4,096 1.10x those of 1,024.
const RING: u64 = 4096;

/// How long the replay thread waits on an empty ring before it sleeps, in `backoff` rounds
/// (spins only): it sleeps as soon as it has caught up, and is woken again when WAKE_AT
/// batches wait, so it runs in bursts instead of spinning between batches. On 2 CPUs the
/// engine, this thread and the trace reader's thread share two cores, and a spinning thread
/// takes the time another would use; one wake per WAKE_AT batches (65,536 references) costs a
/// system call on each side, well under a nanosecond per reference.
const WAITS_BEFORE_SLEEP: u32 = 64;
const WAKE_AT: u64 = RING / 4;

struct Shared {
    ring: Box<[UnsafeCell<Batch>]>,
    head: AtomicU64,
    tail: AtomicU64,
    state: UnsafeCell<CacheState>,
    stop: AtomicBool,
    sleeping: AtomicBool,
}

// SAFETY: the ring slots and the levels are handed between the two threads by `head` and
// `tail` as the module comment states; no slot or level is touched by both at once.
unsafe impl Sync for Shared {}

pub struct ReplayThread {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    /// Batches published (the engine's thread's copy of `head`).
    head: u64,
}

impl ReplayThread {
    /// Starts the thread with the levels; gives them back if no thread can be started.
    pub fn spawn(state: CacheState) -> Result<ReplayThread, CacheState> {
        let shared = Arc::new(Shared {
            ring: (0..RING).map(|_| UnsafeCell::new(Batch::EMPTY)).collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            state: UnsafeCell::new(state),
            stop: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
        });
        let theirs = Arc::clone(&shared);
        match std::thread::Builder::new().name("superpager-caches".into()).spawn(move || replay_loop(&theirs)) {
            Ok(h) => Ok(ReplayThread { shared, handle: Some(h), head: 0 }),
            Err(_) => {
                let sh = Arc::try_unwrap(shared).ok().expect("no thread holds the levels");
                Err(sh.state.into_inner())
            }
        }
    }

    /// Hands one batch to the replay thread (waits while the ring is full).
    #[inline]
    pub fn publish(&mut self, batch: &Batch) {
        let mut spins = 0u32;
        while self.head - self.shared.tail.load(Ordering::Acquire) >= RING {
            backoff(&mut spins);
        }
        // SAFETY: slot head % RING held batch head - RING, which the replay thread has applied
        // (tail > head - RING, seen above with Acquire); it reads no slot at or past head.
        unsafe { *self.shared.ring[(self.head % RING) as usize].get() = *batch };
        self.head += 1;
        self.shared.head.store(self.head, Ordering::SeqCst);
        if self.shared.sleeping.load(Ordering::SeqCst) && self.head - self.shared.tail.load(Ordering::Acquire) >= WAKE_AT {
            self.wake();
        }
    }

    fn wake(&self) {
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }

    /// Waits until every published batch is applied: the levels are this thread's until the
    /// next `publish`.
    pub fn drain(&self) {
        if self.shared.sleeping.load(Ordering::SeqCst) {
            self.wake();
        }
        let mut spins = 0u32;
        while self.shared.tail.load(Ordering::Acquire) != self.head {
            backoff(&mut spins);
        }
    }

    /// # Safety
    /// Only after `drain`, with no `publish` since.
    pub unsafe fn state_mut(&mut self) -> &mut CacheState {
        // SAFETY: the caller's contract: the replay thread has nothing to apply; `&mut self`
        // keeps every other reference out.
        unsafe { &mut *self.shared.state.get() }
    }

    /// Stops the thread and takes the levels back.
    pub fn into_state(mut self) -> CacheState {
        self.drain();
        self.stop();
        // SAFETY: the thread has ended; nothing else holds the levels.
        std::mem::replace(unsafe { &mut *self.shared.state.get() }, CacheState::empty())
    }

    fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.shared.stop.store(true, Ordering::SeqCst);
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl Drop for ReplayThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Spin, then give the CPU away: the other side is a thread of this process, possibly waiting
/// for a CPU on a machine where sweeps run one simulation per CPU.
#[inline]
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

fn replay_loop(sh: &Shared) {
    let mut tail = 0u64;
    let mut idle = 0u32;
    // The batch before prefetched this one's first rows (`CacheState::replay_stream`).
    let mut ahead_done = false;
    loop {
        let head = sh.head.load(Ordering::Acquire);
        if tail < head {
            // SAFETY: batches `tail` and, when head > tail + 1, `tail + 1` were published (seen
            // with Acquire) and their slots are not rewritten until tail passes them; the
            // levels are this thread's while tail < head (module comment).
            unsafe {
                let batch = &*sh.ring[(tail % RING) as usize].get();
                let next: &[u64] = if tail + 1 < head { (*sh.ring[((tail + 1) % RING) as usize].get()).refs() } else { &[] };
                ahead_done = (*sh.state.get()).replay_stream(batch.refs(), next, ahead_done);
            }
            tail += 1;
            sh.tail.store(tail, Ordering::Release);
            idle = 0;
            continue;
        }
        if sh.stop.load(Ordering::Acquire) {
            return;
        }
        if idle < WAITS_BEFORE_SLEEP {
            backoff(&mut idle);
            continue;
        }
        sh.sleeping.store(true, Ordering::SeqCst);
        if tail == sh.head.load(Ordering::SeqCst) && !sh.stop.load(Ordering::SeqCst) {
            std::thread::park();
        }
        sh.sleeping.store(false, Ordering::SeqCst);
        idle = 0;
    }
}
