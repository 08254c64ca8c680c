//! Move-to-front on one LRU set: the operation the TLBs (mmu/tlb.rs) and the data caches
//! (mmu/cache.rs) share.
//!
//! A set is a slice of tags (u64 for the TLBs, u32 for the caches) in recency order, the most recent at way 0; empty slots
//! (u64::MAX in both users) sit only at the tail. An access either finds its tag at way k and
//! moves it to the front (ways 0..k move back by one), or does not find it and puts it in
//! front, every entry moving back by one and the last one falling out. Both users need exactly
//! this; one piece of code does it for both, in a scalar form and, on CPUs with AVX2, a form
//! that compares and shifts a whole set of 4, 8, 12 or 16 ways in registers.

/// What an access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<T = u64> {
    Hit,
    /// The tag went in front; `evicted` fell out of the last way (the empty tag if it was empty).
    Miss {
        evicted: T,
    },
}

/// Move `tag` to the front of `set` (a hit) or put it there (a miss). Scalar: one pass from the
/// front that stops at the tag. The TLBs' tags are u64, the caches' u32.
#[inline(always)]
pub fn access<T: Copy + PartialEq>(set: &mut [T], tag: T) -> Outcome<T> {
    if set[0] == tag {
        return Outcome::Hit;
    }
    // Shift right from the front until the tag (a hit: move to front) or the end (a miss: the
    // last entry falls out, the tag goes in front). Empty slots sit at the tail, so shifting
    // them too leaves the same contents as stopping at the first one.
    let mut carry = set[0];
    for slot in set[1..].iter_mut() {
        let t = *slot;
        *slot = carry;
        if t == tag {
            set[0] = tag;
            return Outcome::Hit;
        }
        carry = t;
    }
    set[0] = tag;
    Outcome::Miss { evicted: carry }
}

/// Whether LRU sets of `ways` ways take the `wide` routines in this process: the CPU has AVX2,
/// `SUPERPAGER_SCALAR_TLB` does not turn them off (`tlb::wide_set_operations`), and `wide`
/// handles the size. The TLBs and the data caches both ask this.
pub fn wide_available(ways: u32) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        wide::handles(ways) && super::tlb::wide_set_operations()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ways;
        false
    }
}

/// The row (lanes, a power of two) that sets of `ways` u32 tags are kept in when they take
/// `wide::access32` in this process: the CPU has AVX2, `SUPERPAGER_SCALAR_TLB` does not turn the
/// wide routines off, and `ways` is at most 16. None: rows of `ways` lanes and the scalar code.
pub fn wide32_row(ways: u32) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        wide::row32(ways).filter(|_| super::tlb::wide_set_operations())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ways;
        None
    }
}

/// LRU set operations on sets of 4, 8, 12 or 16 ways held in 256-bit registers: every tag
/// compared at once, the recency shift done with lane permutes and blends (no loop over the
/// ways). Same results and set contents as the scalar code (the tests run both).
#[cfg(target_arch = "x86_64")]
pub mod wide {
    use std::arch::x86_64::*;

    /// Whether `ways` is a size these routines handle.
    pub fn handles(ways: u32) -> bool {
        matches!(ways, 4 | 8 | 12 | 16)
    }

    /// `access` (the scalar one above) on a set of a size `handles`: move `tag` to the front,
    /// shifting the entries before it (a hit) or all but the last (a miss) one way back.
    /// Returns true on a hit.
    ///
    /// # Safety
    /// The CPU must have AVX2, `set.len()` must satisfy `handles`, and the caller must be
    /// compiled with AVX2 enabled (these routines are always inlined; elsewhere each intrinsic
    /// would be an out-of-line call).
    #[inline(always)]
    pub unsafe fn access(set: &mut [u64], tag: u64) -> bool {
        // SAFETY: the caller's contract, passed on; each kernel reads and writes exactly the
        // set's 4*C words.
        unsafe {
            match set.len() {
                4 => access_chunks::<1>(set, tag),
                8 => access_chunks::<2>(set, tag),
                12 => access_chunks::<3>(set, tag),
                _ => access_chunks::<4>(set, tag),
            }
        }
    }

    #[inline(always)]
    unsafe fn access_chunks<const C: usize>(set: &mut [u64], tag: u64) -> bool {
        assert_eq!(set.len(), 4 * C);
        let p = set.as_mut_ptr() as *mut __m256i;
        let needle = _mm256_set1_epi64x(tag as i64);
        let mut v = [_mm256_setzero_si256(); C];
        let mut hits = 0u32;
        for (j, vj) in v.iter_mut().enumerate() {
            // SAFETY: chunk j is words 4j..4j+4 of the set (checked length 4C).
            *vj = unsafe { _mm256_loadu_si256(p.add(j)) };
            hits |= (_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(*vj, needle))) as u32) << (4 * j);
        }
        // Ways 0..=k take the entry one way ahead of them (way 0 takes the tag): k is the hit's
        // way, or the last way on a miss (its entry falls out).
        let k = if hits != 0 { hits.trailing_zeros() as i64 } else { 4 * C as i64 - 1 };
        let upto = _mm256_set1_epi64x(k + 1);
        let mut ahead = needle; // lane 0: what enters the chunk's first way
        for (j, vj) in v.iter().enumerate() {
            let rotated = _mm256_permute4x64_epi64::<0b10_01_00_11>(*vj); // [w3, w0, w1, w2]
            let shifted = _mm256_blend_epi32::<0b0000_0011>(rotated, ahead);
            ahead = rotated; // its lane 0 is this chunk's last way, which enters the next chunk
            let base = 4 * j as i64;
            let way = _mm256_setr_epi64x(base, base + 1, base + 2, base + 3);
            let out = _mm256_blendv_epi8(*vj, shifted, _mm256_cmpgt_epi64(upto, way));
            // SAFETY: as for the load.
            unsafe { _mm256_storeu_si256(p.add(j), out) };
        }
        hits != 0
    }

    /// Row sizes `access32` takes: 8 or 16 u32 lanes, one or two registers.
    pub fn row32(ways: u32) -> Option<usize> {
        match ways {
            1..=8 => Some(8),
            9..=16 => Some(16),
            _ => None,
        }
    }

    /// `access` on u32 tags, for a set of `ways` ways kept in a row of `row32(ways)` lanes:
    /// lanes past `ways` hold the empty tag, which no access looks for, and are never changed.
    /// Returns true on a hit.
    ///
    /// # Safety
    /// As for `access`; `row.len()` must be `row32(ways)`, `tag` not u32::MAX.
    #[inline(always)]
    pub unsafe fn access32(row: &mut [u32], ways: usize, tag: u32) -> bool {
        // SAFETY: the caller's contract, passed on.
        unsafe { access32_way(row, ways, tag) < ways as u32 }
    }

    /// `access32`, returning the way the tag was found in before it moved to the front (its
    /// depth in the set's recency order: 0 most recent), or `ways` on a miss. A set of w < `ways`
    /// ways of the same sets would have hit exactly where that depth is below w (LRU keeps the
    /// w most recent lines of each set), which the last level's share reads (cache.rs).
    ///
    /// # Safety
    /// As for `access32`.
    #[inline(always)]
    pub unsafe fn access32_way(row: &mut [u32], ways: usize, tag: u32) -> u32 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if row.len() == 8 {
                access32_chunks::<1>(row, ways, tag)
            } else {
                access32_chunks::<2>(row, ways, tag)
            }
        }
    }

    #[inline(always)]
    unsafe fn access32_chunks<const C: usize>(row: &mut [u32], ways: usize, tag: u32) -> u32 {
        assert_eq!(row.len(), 8 * C);
        let p = row.as_mut_ptr() as *mut __m256i;
        let needle = _mm256_set1_epi32(tag as i32);
        let mut v = [_mm256_setzero_si256(); C];
        let mut hits = 0u32;
        for (j, vj) in v.iter_mut().enumerate() {
            // SAFETY: chunk j is lanes 8j..8j+8 of the row (checked length 8C).
            *vj = unsafe { _mm256_loadu_si256(p.add(j)) };
            hits |= (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(*vj, needle))) as u32) << (8 * j);
        }
        // Lanes 0..=k take the lane ahead of them (lane 0 takes the tag): k is the hit's way, or
        // the set's last way on a miss. Padding lanes never hold the tag, so a hit is a way.
        let k = if hits != 0 { hits.trailing_zeros() as i32 } else { ways as i32 - 1 };
        let upto = _mm256_set1_epi32(k + 1);
        let back_one = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
        let mut ahead = needle; // lane 0: what enters the chunk's first lane
        for (j, vj) in v.iter().enumerate() {
            let rotated = _mm256_permutevar8x32_epi32(*vj, back_one); // [w7, w0, .., w6]
            let shifted = _mm256_blend_epi32::<0b0000_0001>(rotated, ahead);
            ahead = rotated; // its lane 0 is this chunk's last lane, which enters the next chunk
            let base = 8 * j as i32;
            let way = _mm256_setr_epi32(base, base + 1, base + 2, base + 3, base + 4, base + 5, base + 6, base + 7);
            let out = _mm256_blendv_epi8(*vj, shifted, _mm256_cmpgt_epi32(upto, way));
            // SAFETY: as for the load.
            unsafe { _mm256_storeu_si256(p.add(j), out) };
        }
        if hits != 0 {
            hits.trailing_zeros()
        } else {
            ways as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::gen::Rng;

    /// The reference: position, then rotate (a hit) or shift in (a miss).
    fn naive(set: &mut [u64], tag: u64) -> Outcome {
        match set.iter().position(|&t| t == tag) {
            Some(k) => {
                set[..=k].rotate_right(1);
                Outcome::Hit
            }
            None => {
                let evicted = set[set.len() - 1];
                set.rotate_right(1);
                set[0] = tag;
                Outcome::Miss { evicted }
            }
        }
    }

    #[test]
    fn scalar_access_equals_position_and_rotate() {
        for ways in [1usize, 2, 3, 4, 8, 11, 16, 20] {
            let mut a = vec![u64::MAX; ways];
            let mut b = a.clone();
            let mut rng = Rng::new(ways as u64);
            for step in 0..20_000 {
                let tag = rng.below(ways as u64 * 2);
                assert_eq!(access(&mut a, tag), naive(&mut b, tag), "step {step}, {ways} ways");
                assert_eq!(a, b, "step {step}, {ways} ways");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_access_equals_scalar_access() {
        #[target_feature(enable = "avx2")]
        unsafe fn wide_access(set: &mut [u64], tag: u64) -> bool {
            // SAFETY: compiled with AVX2, called only after the CPU was checked for it.
            unsafe { wide::access(set, tag) }
        }
        if !std::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        for ways in [4usize, 8, 12, 16] {
            assert!(wide::handles(ways as u32));
            let mut a = vec![u64::MAX; ways];
            let mut b = a.clone();
            let mut rng = Rng::new(100 + ways as u64);
            for step in 0..20_000 {
                let tag = rng.below(ways as u64 * 2);
                // SAFETY: AVX2 checked above.
                let hit = unsafe { wide_access(&mut a, tag) };
                assert_eq!(hit, access(&mut b, tag) == Outcome::Hit, "step {step}, {ways} ways");
                assert_eq!(a, b, "step {step}, {ways} ways");
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_access32_on_padded_rows_equals_scalar_access() {
        #[target_feature(enable = "avx2")]
        unsafe fn wide_access32(row: &mut [u32], ways: usize, tag: u32) -> bool {
            // SAFETY: compiled with AVX2, called only after the CPU was checked for it.
            unsafe { wide::access32(row, ways, tag) }
        }
        if !std::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        for ways in 1..=16usize {
            let row = wide::row32(ways as u32).unwrap();
            let mut a = vec![u32::MAX; row];
            let mut b = vec![u32::MAX; ways];
            let mut rng = Rng::new(200 + ways as u64);
            for step in 0..20_000 {
                let tag = rng.below(ways as u64 * 2) as u32;
                // SAFETY: AVX2 checked above; the row has row32(ways) lanes.
                let hit = unsafe { wide_access32(&mut a, ways, tag) };
                assert_eq!(hit, access(&mut b, tag) == Outcome::Hit, "step {step}, {ways} ways");
                assert_eq!(&a[..ways], &b[..], "step {step}, {ways} ways");
                assert!(a[ways..].iter().all(|&t| t == u32::MAX), "padding changed: step {step}, {ways} ways");
            }
        }
    }
}
