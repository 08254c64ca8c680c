//! A hash map for the model's integer keys (page numbers, region indices, ids): one multiply
//! per word instead of SipHash, and the same layout on every run. The keys come from traces
//! the user chose to run, not from an adversary, so flooding resistance buys nothing here;
//! the policies' population maps do several lookups per fault.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hashing of each word written (the scheme of rustc's FxHasher).
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

/// An odd constant with bits spread over the word (2^64 / golden ratio).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl FastHasher {
    #[inline(always)]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline(always)]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline(always)]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_small_keys_spread_over_the_top_bits() {
        // hashbrown takes its 7-bit tag from the top bits and the bucket from the low ones:
        // consecutive region indices must not pile up in either.
        let hash = |k: (u8, u64)| {
            let mut h = FastHasher::default();
            std::hash::Hash::hash(&k, &mut h);
            h.finish()
        };
        let tops: std::collections::HashSet<u64> = (0..4096u64).map(|i| hash((1, i)) >> 57).collect();
        let lows: std::collections::HashSet<u64> = (0..4096u64).map(|i| hash((1, i)) & 4095).collect();
        assert_eq!(tops.len(), 128);
        assert!(lows.len() > 2500, "{} distinct low parts of 4096", lows.len());
        assert_ne!(hash((1, 5)), hash((2, 5)));
    }
}
