//! The worked example of docs/ARCHITECTURE.md ("Adding a policy"), kept compiling and running:
//! a policy written against the public interface alone maps the largest page inside the VMA.
use superpager_core::engine::{Engine, EngineConfig};
use superpager_core::error::Result;
use superpager_core::mmu::machine::Machine;
use superpager_core::policy::{FaultDecision, FaultInfo, Params, Policy};
use superpager_core::spec::{from_params, NoParams};
use superpager_core::trace::*;
use superpager_core::units::{Bytes, PageSize};

/// `largest-fit`: every fault maps the largest page that lies inside its VMA.
pub struct LargestFit {
    faults: u64,
}

pub fn build(params: &Params, _sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    // No parameters: any key is refused with "policy largest-fit: unknown parameter ...".
    let NoParams {} = from_params("policy", "largest-fit", params)?;
    Ok(Box::new(LargestFit { faults: 0 }))
}

impl Policy for LargestFit {
    fn name(&self) -> String {
        "largest-fit".into()
    }
    fn on_fault(&mut self, f: &FaultInfo) -> FaultDecision {
        self.faults += 1;
        let fits = |s: &PageSize| {
            let start = f.va & !(s.bytes() - 1);
            start >= f.vma.start && start + s.bytes() <= f.vma.end
        };
        let si = f.sizes.iter().rposition(fits).unwrap_or(0);
        FaultDecision::size(si as u32, true)
    }
    fn counters(&self) -> Vec<(String, u64)> {
        vec![("largest-fit.faults".into(), self.faults)]
    }
}

#[test]
fn the_example_policy_maps_large_pages_inside_the_vma() {
    let m = Machine::load("skylake").unwrap();
    let pol = build(&Params::new(), &m.page_sizes).unwrap();
    let mut e = Engine::new(m, pol, EngineConfig { memory: Bytes(1 << 30), validate: true, ..Default::default() }).unwrap();
    let base = 0x4000_0000u64;
    let mut c = Chunk::default();
    // 5MiB: two aligned 2MiB pages, then 1MiB of base pages.
    c.events.push((0, Event::Mmap { addr: base, len: 5 << 20, prot: 3, flags: MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, fd: -1, offset: 0 }));
    for off in (0..5u64 << 20).step_by(4096) {
        c.accesses.push(Access::new(base + off, AccessKind::Store, 8));
    }
    e.run_chunk(&c).unwrap();
    let r = e.results();
    assert_eq!(r.counters["faults.2MiB"], 2);
    assert_eq!(r.counters["faults.4KiB"], 256);
    assert_eq!(r.counters["policy.largest-fit.faults"], 258);
}
