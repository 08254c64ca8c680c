//! Synthetic workload generators. Each writes a complete trace: a context, the mmap (or brk)
//! events that create its regions, the accesses, and an exit. Deterministic for a given seed.

use super::*;
use crate::error::{Error, Result};

/// SplitMix64: a small, fast, well-mixed generator; seeds are expanded through it.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, n) (Lemire's multiply-shift; bias below 2^-64 * n, irrelevant here).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    #[inline(always)]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Zipf sampler over ranks 1..=n by rejection-inversion (Hörmann and Derflinger, "Rejection-
/// inversion to generate variates from monotone discrete distributions", 1996). O(1) per sample.
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
}

impl Zipf {
    pub fn new(n: u64, exponent: f64) -> Zipf {
        let mut z = Zipf { n: n as f64, s: exponent, h_x1: 0.0, h_n: 0.0, cut: 0.0 };
        z.h_x1 = z.h_int(1.5) - 1.0;
        z.h_n = z.h_int(z.n + 0.5);
        z.cut = 2.0 - z.h_int_inv(z.h_int(2.5) - z.h(2.0));
        z
    }
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }
    fn h_int(&self, x: f64) -> f64 {
        let lx = x.ln();
        expm1_over_x((1.0 - self.s) * lx) * lx
    }
    fn h_int_inv(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.s);
        if t < -1.0 {
            t = -1.0;
        }
        (log1p_over_x(t) * x).exp()
    }
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.unit() * (self.h_x1 - self.h_n);
            let x = self.h_int_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.h_int(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// A bijection on [0, n) that scatters neighbours (for Zipf ranks and node placement):
/// multiply by a large odd constant modulo the next power of two, cycle-walking back into range.
pub struct Scatter {
    n: u64,
    mask: u64,
}

impl Scatter {
    pub fn new(n: u64) -> Scatter {
        Scatter { n, mask: n.next_power_of_two() - 1 }
    }
    #[inline]
    pub fn map(&self, mut x: u64) -> u64 {
        loop {
            x = (x.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1).wrapping_add(0x632B_E59B_D9B4_E019)) & self.mask;
            x ^= x >> 7;
            x &= self.mask;
            if x < self.n {
                return x;
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct GenParams {
    pub kind: String,
    /// Footprint of the main region in bytes.
    pub size: u64,
    /// Number of accesses (0 = the kind's default).
    pub accesses: u64,
    pub seed: u64,
    pub stride: u64,
    pub elem: u64,
    pub alpha: f64,
    pub base: u64,
    pub passes: u64,
    /// chase only: touch every page and run the chase round once before a phase mark, so that
    /// what follows the mark is the steady state calibrate's chase.c times (`warm` below).
    pub warm: bool,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            kind: "gups".into(),
            size: 64 << 20,
            accesses: 0,
            seed: 1,
            stride: 4096,
            elem: 8,
            alpha: 0.99,
            base: 0x7f00_0000_0000,
            passes: 1,
            warm: false,
        }
    }
}

pub const KINDS: [(&str, &str); 7] = [
    ("seq", "sequential sweep: read every element of the region, --passes times"),
    ("stride", "strided reads: every --stride bytes, wrapping around the region"),
    ("gups", "uniform random read-modify-write updates (HPCC RandomAccess / GUPS); --accesses counts updates, each a load and a store (2 accesses)"),
    ("zipf", "Zipf-distributed reads over elements (--alpha), popular elements scattered"),
    ("chase", "dependent pointer chase around one random cycle of 64-byte elements"),
    ("transpose", "non-blocked matrix transpose B[j][i] = A[i][j] of two --size matrices"),
    ("rbtree", "red-black-tree-like: many small brk-allocated nodes, inserts then lookups"),
];

fn anon_mmap(addr: u64, len: u64) -> Event {
    Event::Mmap { addr, len, prot: PROT_READ | PROT_WRITE, flags: MAP_PRIVATE | MAP_ANONYMOUS, fd: -1, offset: 0 }
}

/// One random cycle through every index of [0, n): a full-period LCG on the next power of two
/// (Hull-Dobell: a = 1 mod 4, c odd) visits every index of that range once, and skipping the
/// indices >= n keeps it one cycle on [0, n).
struct RandomCycle {
    a: u64,
    c: u64,
    mask: u64,
    n: u64,
}

impl RandomCycle {
    /// A cycle on [0, n) and a random place to start it (drawn in that order from `rng`).
    fn draw(rng: &mut Rng, n: u64) -> (RandomCycle, u64) {
        let a = (rng.next_u64() & !3) | 5;
        let c = rng.next_u64() | 1;
        let cycle = RandomCycle { a, c, mask: n.next_power_of_two() - 1, n };
        (cycle, rng.below(n))
    }

    fn next(&self, x: u64) -> u64 {
        let mut x = x;
        loop {
            x = x.wrapping_mul(self.a).wrapping_add(self.c) & self.mask;
            if x < self.n {
                return x;
            }
        }
    }
}

/// Round up to 2MiB so regions look like what a large malloc gets from mmap.
fn round_2m(x: u64) -> u64 {
    x.saturating_add((2 << 20) - 1) & !((2 << 20) - 1)
}

/// Generate a workload into a sink. `progress` is called now and then with the fraction done.
/// The top of the x86-64 user address space with 4-level paging (TASK_SIZE_MAX,
/// arch/x86/include/asm/page_64_types.h: 2^47 minus one page): generated regions stay below.
pub const USER_VA_TOP: u64 = (1 << 47) - 4096;

impl GenParams {
    /// Refuse parameters that make no trace: a region past the user address space (or
    /// wrapping past 2^64), zero passes, an alpha that is not a finite non-negative number.
    pub fn check(&self) -> Result<()> {
        if self.size < 4096 {
            return Err(Error::usage(format!("size must be at least 4KiB, got {}", self.size)));
        }
        // The region is rounded up to 2MiB; kinds with a second region (transpose) use two.
        let span = round_2m(self.size).saturating_mul(2);
        if self.base.checked_add(span).is_none_or(|end| end > USER_VA_TOP) {
            return Err(Error::usage(format!(
                "base {:#x} with size {} leaves the {:#x} user address space (x86-64, 47 bits); choose a lower base or a smaller size",
                self.base, self.size, USER_VA_TOP
            )));
        }
        if self.passes == 0 {
            return Err(Error::usage("passes must be at least 1"));
        }
        if !self.alpha.is_finite() || self.alpha < 0.0 {
            return Err(Error::usage(format!("alpha must be a finite number >= 0, got {}", self.alpha)));
        }
        if self.warm && self.kind != "chase" {
            return Err(Error::usage(format!("--warm applies to chase only, not {}", self.kind)));
        }
        Ok(())
    }
}

pub fn generate<S: RecordSink>(p: &GenParams, sink: &mut S, progress: &mut dyn FnMut(f64)) -> Result<u64> {
    p.check()?;
    if p.elem == 0 || p.elem > 255 {
        return Err(Error::usage("elem must be between 1 and 255 bytes"));
    }
    let mut rng = Rng::new(p.seed);
    let elems = (p.size / p.elem).max(1);
    let region = round_2m(p.size);
    sink.event(Event::Context { pid: 1, tid: 1 })?;
    let sz = p.elem as u8;
    let mut emitted = 0u64;
    let tick = |i: u64, n: u64, progress: &mut dyn FnMut(f64)| {
        if i & 0xFFFFF == 0 {
            progress(i as f64 / n.max(1) as f64)
        }
    };
    match p.kind.as_str() {
        "seq" => {
            sink.event(anon_mmap(p.base, region))?;
            let n = if p.accesses > 0 { p.accesses } else { elems * p.passes.max(1) };
            for i in 0..n {
                tick(i, n, progress);
                sink.access(Access::new(p.base + (i % elems) * p.elem, AccessKind::Load, sz))?;
            }
            emitted = n;
        }
        "stride" => {
            if p.stride == 0 {
                return Err(Error::usage("stride must be positive"));
            }
            sink.event(anon_mmap(p.base, region))?;
            let per_pass = (p.size / p.stride).max(1);
            let n = if p.accesses > 0 { p.accesses } else { per_pass * p.passes.max(1) };
            // Each pass starts one element later, so passes touch new bytes (not new pages).
            for i in 0..n {
                tick(i, n, progress);
                let pass = i / per_pass;
                let off = ((i % per_pass) * p.stride + (pass * p.elem) % p.stride) % p.size;
                sink.access(Access::new(p.base + off, AccessKind::Load, sz))?;
            }
            emitted = n;
        }
        "gups" => {
            sink.event(anon_mmap(p.base, region))?;
            let n = if p.accesses > 0 { p.accesses } else { 4 << 20 };
            for i in 0..n {
                tick(i, n, progress);
                let a = p.base + rng.below(elems) * p.elem;
                sink.access(Access::new(a, AccessKind::Load, sz))?;
                sink.access(Access::new(a, AccessKind::Store, sz))?;
            }
            emitted = 2 * n;
        }
        "zipf" => {
            // Written so that NaN fails too.
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            if !(p.alpha > 0.0) || p.alpha.is_infinite() {
                return Err(Error::usage("alpha must be a positive number"));
            }
            sink.event(anon_mmap(p.base, region))?;
            let n = if p.accesses > 0 { p.accesses } else { 4 << 20 };
            let z = Zipf::new(elems, p.alpha);
            let sc = Scatter::new(elems);
            for i in 0..n {
                tick(i, n, progress);
                let rank = z.sample(&mut rng) - 1;
                sink.access(Access::new(p.base + sc.map(rank) * p.elem, AccessKind::Load, sz))?;
            }
            emitted = n;
        }
        "chase" => {
            sink.event(anon_mmap(p.base, region))?;
            let line = 64u64;
            let nodes = (p.size / line).max(2);
            let n = if p.accesses > 0 { p.accesses } else { 4 << 20 };
            let (cycle, mut x) = RandomCycle::draw(&mut rng, nodes);
            if p.warm {
                // As calibrate's chase.c before it times: every page first written (in a random
                // order, as chase.c writes its cycle's pointers in the cycle's order), then
                // min(lines, accesses) steps untimed. Without this, a chase shorter than a few
                // passes over its pages is mostly first touches, whose frames come in allocation
                // order and so share their host entry lines: on a nested machine the model's
                // walks then look cheaper than the timed chase's (docs/RUNTIME_MODEL.md).
                let pages = p.size.div_ceil(4096).max(1);
                let (order, mut q) = RandomCycle::draw(&mut rng, pages);
                for _ in 0..pages {
                    sink.access(Access::new(p.base + q * 4096, AccessKind::Store, 8))?;
                    q = order.next(q);
                }
                for _ in 0..nodes.min(n) {
                    sink.access(Access::new(p.base + x * line, AccessKind::Load, 8))?;
                    x = cycle.next(x);
                }
                emitted += pages + nodes.min(n);
                sink.event(Event::Madvise { addr: p.base, len: 0, advice: 0 })?;
            }
            for i in 0..n {
                tick(i, n, progress);
                sink.access(Access::new(p.base + x * line, AccessKind::Load, 8))?;
                x = cycle.next(x);
            }
            emitted += n;
        }
        "transpose" => {
            let dim = ((p.size / 8) as f64).sqrt() as u64;
            if dim < 2 {
                return Err(Error::usage("size too small for a matrix"));
            }
            let bytes = dim * dim * 8;
            let a_base = p.base;
            let b_base = p.base + ((round_2m(bytes) + (1 << 30)) & !((1u64 << 30) - 1));
            sink.event(anon_mmap(a_base, round_2m(bytes)))?;
            sink.event(anon_mmap(b_base, round_2m(bytes)))?;
            let total = dim * dim;
            let n = if p.accesses > 0 { p.accesses.min(total * 2) / 2 } else { total };
            for k in 0..n {
                tick(k, n, progress);
                let (i, j) = (k / dim, k % dim);
                sink.access(Access::new(a_base + (i * dim + j) * 8, AccessKind::Load, 8))?;
                sink.access(Access::new(b_base + (j * dim + i) * 8, AccessKind::Store, 8))?;
            }
            emitted = 2 * n;
        }
        "rbtree" => {
            // Nodes of 48 bytes (three pointers, colour, key, value) from a brk heap grown in
            // 128KiB steps, as glibc malloc grows its main arena by default (M_TOP_PAD).
            const NODE: u64 = 48;
            const GROW: u64 = 128 << 10;
            let nodes = (p.size / NODE).max(2);
            let heap = 0x5555_5600_0000u64;
            let mut brk = heap;
            sink.event(Event::Brk { addr: brk })?;
            if nodes > u32::MAX as u64 {
                return Err(Error::usage("rbtree: size too large (at most 2^32 nodes)"));
            }
            // Keys are inserted in a scattered order; the i-th inserted key gets the i-th node.
            let order = Scatter::new(nodes);
            let mut slot_of_key = vec![0u32; nodes as usize];
            for i in 0..nodes {
                slot_of_key[order.map(i) as usize] = i as u32;
            }
            let depth = 64 - nodes.leading_zeros() as u64;
            let lookups = if p.accesses > 0 { p.accesses / depth.max(1) } else { nodes.min(1 << 20) };
            let total = nodes + lookups;
            let mut step = 0u64;
            // Walk down a balanced search tree over the keys, touching the nodes already
            // inserted (slot < upto), and the target's own node.
            let descend = |sink: &mut S, key: u64, upto: u64, write_leaf: bool| -> Result<u64> {
                let (mut lo, mut hi) = (0u64, nodes);
                let mut touched = 0;
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    let slot = slot_of_key[mid as usize] as u64;
                    if slot < upto || mid == key {
                        let kind = if mid == key && write_leaf { AccessKind::Store } else { AccessKind::Load };
                        sink.access(Access::new(heap + slot * NODE, kind, 8))?;
                        touched += 1;
                    }
                    if mid == key {
                        break;
                    }
                    if key < mid {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                Ok(touched)
            };
            for slot in 0..nodes {
                tick(step, total, progress);
                step += 1;
                let end = heap + (slot + 1) * NODE;
                while end > brk {
                    brk += GROW;
                    sink.event(Event::Brk { addr: brk })?;
                }
                emitted += descend(sink, order.map(slot), slot, true)?;
            }
            for _ in 0..lookups {
                tick(step, total, progress);
                step += 1;
                let key = rng.below(nodes);
                emitted += descend(sink, key, nodes, false)?;
            }
        }
        other => {
            let names: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
            return Err(Error::usage(format!("unknown workload kind '{other}'; choose one of: {}", names.join(", "))));
        }
    }
    sink.event(Event::Exit { code: 0 })?;
    progress(1.0);
    Ok(emitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accesses, events, and the number of accesses before each event.
    struct Collect(Vec<Access>, Vec<Event>, Vec<usize>);
    impl RecordSink for Collect {
        fn access(&mut self, a: Access) -> Result<()> {
            self.0.push(a);
            Ok(())
        }
        fn event(&mut self, e: Event) -> Result<()> {
            self.1.push(e);
            self.2.push(self.0.len());
            Ok(())
        }
    }

    impl Collect {
        /// The number of accesses before each phase mark (a zero-length madvise).
        fn marks(&self) -> Vec<usize> {
            self.1.iter().zip(&self.2).filter(|(e, _)| matches!(e, Event::Madvise { len: 0, .. })).map(|(_, &n)| n).collect()
        }
    }

    fn collect(p: &GenParams) -> Result<Collect> {
        let mut c = Collect(vec![], vec![], vec![]);
        generate(p, &mut c, &mut |_| {})?;
        Ok(c)
    }

    fn run(kind: &str, size: u64, accesses: u64, seed: u64) -> Collect {
        collect(&GenParams { kind: kind.into(), size, accesses, seed, ..Default::default() }).unwrap()
    }

    #[test]
    fn every_kind_stays_inside_its_regions_and_is_deterministic() {
        for (k, _) in KINDS {
            let a = run(k, 1 << 20, 5000, 7);
            let b = run(k, 1 << 20, 5000, 7);
            assert_eq!(a.0, b.0, "{k} not deterministic");
            assert!(!a.0.is_empty(), "{k} emitted nothing");
            let regions: Vec<(u64, u64)> = a.1.iter().filter_map(|e| if let Event::Mmap { addr, len, .. } = e { Some((*addr, *len)) } else { None }).collect();
            let brk_top = a.1.iter().filter_map(|e| if let Event::Brk { addr } = e { Some(*addr) } else { None }).max();
            for x in &a.0 {
                let inside = regions.iter().any(|(s, l)| x.addr >= *s && x.addr + x.size as u64 <= s + l)
                    || brk_top.is_some_and(|t| x.addr >= 0x5555_5600_0000 && x.addr < t);
                assert!(inside, "{k}: access {:#x} outside every region", x.addr);
            }
        }
    }

    #[test]
    fn a_warm_chase_touches_every_page_then_runs_the_cycle_once_before_its_mark() {
        let (size, accesses) = (256 * 1024u64, 10_000u64); // 64 pages, 4,096 lines
        let p = GenParams { kind: "chase".into(), size, accesses, seed: 3, warm: true, ..Default::default() };
        let mut m = Collect(vec![], vec![], vec![]);
        let n = generate(&p, &mut m, &mut |_| {}).unwrap();
        let (pages, lines) = (64usize, 4096usize);
        assert_eq!(m.marks(), vec![pages + lines], "one mark, after the touches and one pass of the cycle");
        assert_eq!(n as usize, m.0.len());
        assert_eq!(m.0.len(), pages + lines + accesses as usize);
        let touched: std::collections::HashSet<u64> = m.0[..pages].iter().map(|a| a.addr).collect();
        assert_eq!(touched.len(), pages, "every page written once");
        assert!(m.0[..pages].iter().all(|a| a.kind == AccessKind::Store && a.addr % 4096 == 0));
        assert!(m.0[..pages].windows(2).any(|w| w[1].addr != w[0].addr + 4096), "in a random order, not an address sweep");
        // After the mark, the chase goes on around the same cycle: its first pass after the mark
        // repeats the warm pass (the cycle has `lines` nodes).
        let warm = &m.0[pages..pages + lines];
        let timed = &m.0[pages + lines..];
        assert_eq!(warm.iter().map(|a| a.addr).collect::<std::collections::HashSet<_>>().len(), lines);
        assert_eq!(timed[..lines].iter().map(|a| a.addr).collect::<Vec<_>>(), warm.iter().map(|a| a.addr).collect::<Vec<_>>());
    }

    #[test]
    fn warm_is_refused_for_kinds_other_than_chase() {
        let p = GenParams { kind: "gups".into(), warm: true, ..Default::default() };
        let e = collect(&p).err().expect("refused");
        assert!(e.to_string().contains("--warm applies to chase only"), "{e}");
    }

    #[test]
    fn a_cold_chase_is_what_it_was() {
        // The warm pass draws its page order after the cycle's constants: without it the trace
        // is unchanged (traces generated before --warm existed stay reproducible).
        let cold = run("chase", 256 * 1024, 5000, 3);
        let p = GenParams { kind: "chase".into(), size: 256 * 1024, accesses: 5000, seed: 3, warm: true, ..Default::default() };
        let m = collect(&p).unwrap();
        assert_eq!(cold.0[..4096], m.0[64..64 + 4096], "the warm pass is the cold chase's first pass");
    }

    #[test]
    fn seeds_change_random_kinds() {
        assert_ne!(run("gups", 1 << 20, 1000, 1).0, run("gups", 1 << 20, 1000, 2).0);
    }

    #[test]
    fn chase_visits_distinct_nodes_until_the_cycle_closes() {
        let c = run("chase", 64 * 1024, 1024, 3);
        let mut seen = std::collections::HashSet::new();
        for a in &c.0 {
            assert!(seen.insert(a.addr), "chase revisited a node before the cycle closed");
        }
    }

    #[test]
    fn zipf_prefers_low_ranks() {
        let z = Zipf::new(1000, 1.0);
        let mut rng = Rng::new(1);
        let mut ones = 0;
        let mut tail = 0;
        for _ in 0..100_000 {
            let k = z.sample(&mut rng);
            assert!((1..=1000).contains(&k));
            if k == 1 {
                ones += 1;
            }
            if k > 500 {
                tail += 1;
            }
        }
        // P(1) = 1/H(1000) ~ 0.1336; P(k>500) ~ ln2/H ~ 0.0926.
        assert!((12_000..15_000).contains(&ones), "{ones}");
        assert!((8_000..10_500).contains(&tail), "{tail}");
    }

    #[test]
    fn scatter_is_a_bijection() {
        for n in [1u64, 7, 64, 1000] {
            let s = Scatter::new(n);
            let mut v: Vec<u64> = (0..n).map(|x| s.map(x)).collect();
            v.sort();
            assert_eq!(v, (0..n).collect::<Vec<_>>());
        }
    }
}
