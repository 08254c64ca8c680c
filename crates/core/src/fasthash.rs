//! The hash map for the model's integer keys (page numbers, region indices, ids): rustc's
//! FxHasher, one multiply per word instead of SipHash, and no random state, so a map built the
//! same way iterates the same way on every run. The keys come from traces the user chose to
//! run, not from an adversary, so flooding resistance buys nothing here; the policies'
//! population maps do several lookups per fault.
//!
//! This was a hand-written multiply-rotate hasher until issue 19 weighed the `rustc-hash`
//! crate against it: the same counters on the 916 runs of `scripts/counter_identity.py`, and
//! the same speed within the machine's noise (`bench --against`, 9 rounds: geometric mean of
//! new/old 1.017, cases 0.89 to 1.16 with overlapping ranges; docs/REFACTOR.md), for 60 fewer
//! lines to keep.

pub type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_built_alike_iterate_alike() {
        // Results are byte-identical for the same inputs only if nothing hashes with a random
        // state; a map type with one would fail this (almost surely).
        let build = || {
            let mut m: FastMap<(u32, u64), u64> = FastMap::default();
            for i in 0..10_000u64 {
                m.insert(((i % 7) as u32, i * 4096), i);
            }
            m.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(build(), build());
    }
}
