//! The reuse law of a shared last level (`[cache] share_law = "reuse"`; docs/RUNTIME_MODEL.md,
//! "A share that remembers when a line was last used").
//!
//! Under LRU, a line the program uses again survives in a level shared with other tenants if
//! fewer than W lines entered its set since its last use: d lines of the program's own (its
//! depth in the set, as the level simulated whole finds it) and T of the tenants'. The depth law
//! (`share_law = "depth"`) keeps a hit if d < w, w the ways the program's share gives it: right
//! on average, since T is about d (W / w - 1) when the program's fills are spread evenly, but
//! where w is a way or two the count d of a line's own few neighbours decides alone, and a
//! line used again every few milliseconds misses about as often as its set saw one of the
//! program's lines since. Here T is counted from the time since the line's last use instead:
//! the tenants bring R_e lines a ns into the level, spread over its S sets, so T is Poisson
//! with mean R_e t / S, and the hit is kept with the chance P(d + T < W). The time t is the
//! level's own references since the line's last use (its clock: `gap`) times the run's ns a
//! reference of the level, which the cost model gives (stats.rs `CostInputs::shared_by_reuse`
//! finds it as a fixed point, and R_e). Without tenants nothing is lost; as they grow busier
//! every hit is.
//!
//! The level counts its hits by (depth, gap bucket) (`CacheLevel::reuse`); the gap is bucketed
//! in quarter octaves, so a bucket's gaps are within 19% of the one it stands for.

/// Sub-buckets an octave of gaps is cut into.
const SUB: u32 = 4;
/// Octaves of gaps counted; gaps of 2^48 references or more fall in the last bucket.
const OCTAVES: u32 = 48;
/// Gap buckets a depth has (`bucket`): 0 to 3 the gaps themselves, then SUB an octave from 4.
pub const BUCKETS: usize = (SUB * OCTAVES) as usize;

/// The bucket of a gap of `gap` references: gaps under 4 each their own, then the octave's
/// quarter (buckets 4 to 7 are never used: the octave from 4 starts at 8).
#[inline(always)]
pub fn bucket(gap: u64) -> usize {
    if gap < 4 {
        return gap as usize;
    }
    let g = gap.min((1u64 << OCTAVES) - 1);
    let octave = 63 - g.leading_zeros();
    (octave * SUB + ((g >> (octave - 2)) & 3) as u32) as usize
}

/// The gap a bucket stands for: the mean of the gaps it holds.
pub fn gap_of(b: usize) -> f64 {
    if b < 4 {
        return b as f64;
    }
    let (octave, quarter) = (b as u32 / SUB, b as u64 % SUB as u64);
    let width = 1u64 << (octave - 2);
    let lo = (1u64 << octave) + quarter * width;
    lo as f64 + (width - 1) as f64 / 2.0
}

/// The hits a shared level keeps under the reuse law: `hist[d * BUCKETS + b]` hits found at
/// depth d with a gap in bucket b, of a level of `ways` ways, where the tenants bring in
/// `per_gap` lines to each set for every reference of the gap (the module's R_e t / S, per
/// reference). Each hit counts by its chance P(d + T < W), T Poisson of mean gap x `per_gap`.
/// A `per_gap` that is infinite or not a number keeps nothing.
pub fn kept(hist: &[u64], ways: usize, per_gap: f64) -> f64 {
    debug_assert_eq!(hist.len(), ways * BUCKETS);
    if !per_gap.is_finite() {
        return 0.0;
    }
    let mut cdf = [0.0f64; 64];
    let mut sum = 0.0;
    for b in 0..BUCKETS {
        if (0..ways).all(|d| hist[d * BUCKETS + b] == 0) {
            continue;
        }
        // P(T <= k) for k below the ways.
        let lambda = gap_of(b) * per_gap.max(0.0);
        let mut term = (-lambda).exp();
        let mut acc = term;
        for (k, c) in cdf.iter_mut().enumerate().take(ways) {
            if k > 0 {
                term *= lambda / k as f64;
                acc += term;
            }
            *c = acc.min(1.0);
        }
        for d in 0..ways {
            let n = hist[d * BUCKETS + b];
            if n > 0 {
                sum += n as f64 * cdf[ways - 1 - d];
            }
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_gaps_in_order_within_a_fifth_of_their_mean() {
        let mut last = 0;
        for g in 1..100_000u64 {
            let b = bucket(g);
            assert!(b >= last, "gap {g}");
            assert!(b < BUCKETS);
            last = b;
            let m = gap_of(b);
            assert!((g as f64 - m).abs() <= 0.19 * m + 0.5, "gap {g} in bucket {b} of mean {m}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn nothing_is_lost_without_tenants_and_everything_at_no_share() {
        let mut hist = vec![0u64; 4 * BUCKETS];
        hist[bucket(1000)] = 7;
        hist[3 * BUCKETS + bucket(50)] = 5;
        assert_eq!(kept(&hist, 4, 0.0), 12.0);
        assert_eq!(kept(&hist, 4, f64::INFINITY), 0.0);
    }

    #[test]
    fn a_hit_is_kept_by_the_poisson_chance_its_set_saw_fewer_tenants_than_its_room() {
        // Depth 1 of 4 ways: room for 2 tenants' lines; a gap of 100 at 0.01 a reference gives
        // a mean of 1: P(T <= 2) = e^-1 (1 + 1 + 1/2).
        let mut hist = vec![0u64; 4 * BUCKETS];
        let b = bucket(100);
        hist[BUCKETS + b] = 1000;
        let want = 1000.0 * (-gap_of(b) * 0.01f64).exp() * (1.0 + gap_of(b) * 0.01 + (gap_of(b) * 0.01).powi(2) / 2.0);
        assert!((kept(&hist, 4, 0.01) - want).abs() < 1e-9, "{} against {want}", kept(&hist, 4, 0.01));
        // A longer gap keeps less.
        let mut later = vec![0u64; 4 * BUCKETS];
        later[BUCKETS + bucket(400)] = 1000;
        assert!(kept(&later, 4, 0.01) < want);
    }
}
