//! A fully associative LRU TLB that finds entries by region signature
//! (`Tlb::use_region_signatures`) answers, evicts and orders its entries exactly as the plain
//! scanned array does, through random lookups of every size, fills, shootdowns of whole regions
//! (a promotion or demotion changing a region's size), entries of two sizes for one address (as
//! AMD coalescing leaves them: the more recent answers) and flushes.
use superpager_core::mmu::tlb::{make_tag, no_tag, Replacement, Tlb, TAG_SIZES};
use superpager_core::trace::gen::Rng;

/// Four sizes, 4KB to 32KB: a region is the 32KB range (page-number shifts 3, 2, 1, 0).
const SHIFTS: [u32; 4] = [12, 13, 14, 15];

fn to_region() -> [u8; TAG_SIZES] {
    std::array::from_fn(|s| if s < SHIFTS.len() { (SHIFTS[SHIFTS.len() - 1] - SHIFTS[s]) as u8 } else { 0 })
}

fn tags_for(asid: u16, va: u64) -> [u64; TAG_SIZES] {
    let mut by_size: [u64; TAG_SIZES] = std::array::from_fn(no_tag);
    for (si, &sh) in SHIFTS.iter().enumerate() {
        by_size[si] = make_tag(asid, va >> sh, si as u32);
    }
    by_size
}

/// Run `steps` random operations on a TLB with signatures and a plain one of `ways` ways over
/// `regions` regions, comparing every answer and, now and then, the whole recency order. With
/// `overlap`, some misses are filled at another size than the region's, so that two entries
/// may match one address.
fn agree(ways: u32, regions: u64, steps: usize, seed: u64, overlap: bool) {
    let mut plain = Tlb::new(ways, ways, Replacement::Lru, 0);
    let mut signed = Tlb::new(ways, ways, Replacement::Lru, 0);
    assert!(signed.use_region_signatures(to_region()));
    assert!(!plain.uses_region_signatures() && signed.uses_region_signatures());
    let mut rng = Rng::new(seed);
    // Each region's page size now (one size per region: the MMU never holds two translations
    // of one address).
    let mut size_of = vec![0u32; regions as usize * 2];
    let all = (1u32 << SHIFTS.len()) - 1;
    for step in 0..steps {
        let asid = 1 + rng.below(2) as u16;
        let region = rng.below(regions);
        let va = (region << SHIFTS[3]) | rng.below(1 << SHIFTS[3]);
        let slot = (asid as usize - 1) * regions as usize + region as usize;
        let si = size_of[slot];
        let by_size = tags_for(asid, va);
        match rng.below(100) {
            // A promotion or demotion: the region's entries are shot down, it changes size.
            0..=2 => {
                let old = SHIFTS[si as usize];
                for k in 0..1u64 << (SHIFTS[3] - old) {
                    let vpn = (region << (SHIFTS[3] - old)) | k;
                    let t = make_tag(asid, vpn, si);
                    assert_eq!(plain.invalidate(vpn, t), signed.invalidate(vpn, t), "step {step}: invalidate");
                }
                size_of[slot] = rng.below(SHIFTS.len() as u64) as u32;
            }
            3 if rng.below(20) == 0 => {
                plain.flush();
                signed.flush();
            }
            // A lookup of one size (one live size), then a fill on a miss.
            4..=19 => {
                let (vpn, t) = (va >> SHIFTS[si as usize], by_size[si as usize]);
                let hit = plain.probe(vpn, t);
                assert_eq!(hit, signed.probe(vpn, t), "step {step}: probe");
                if !hit {
                    assert_eq!(plain.fill(vpn, t), signed.fill(vpn, t), "step {step}: fill's victim");
                }
            }
            // A lookup of every size at once, then a fill on a miss.
            _ => {
                let found = plain.probe_sizes(&by_size, all);
                assert_eq!(found, signed.probe_sizes(&by_size, all), "step {step}: probe_sizes");
                match found {
                    Some(f) => assert!(overlap || f == si, "step {step}: found the region's size"),
                    None => {
                        let fill = if overlap && rng.below(10) == 0 { rng.below(SHIFTS.len() as u64) as u32 } else { si };
                        let (vpn, t) = (va >> SHIFTS[fill as usize], by_size[fill as usize]);
                        assert_eq!(plain.fill(vpn, t), signed.fill(vpn, t), "step {step}: fill's victim");
                    }
                }
            }
        }
        if step % 97 == 0 {
            assert!(plain.tags().eq(signed.tags()), "step {step}: the ways differ");
        }
    }
    assert!(plain.tags().eq(signed.tags()));
    assert_eq!(plain.occupancy(), signed.occupancy());
}

#[test]
fn signatures_agree_with_the_scanned_array_when_regions_crowd() {
    // Few regions: long chains of one region's pages, and most lookups hit.
    agree(64, 24, 60_000, 1, false);
}

#[test]
fn signatures_agree_with_the_scanned_array_under_misses() {
    // Many regions: most lookups miss and every fill evicts.
    agree(64, 4096, 60_000, 2, false);
    agree(32, 700, 40_000, 3, false);
    // 48 ways: signatures padded to whole 16-byte chunks.
    agree(48, 300, 40_000, 4, false);
}

#[test]
fn with_two_entries_for_one_address_the_more_recent_answers_as_in_the_array() {
    agree(64, 24, 60_000, 5, true);
    agree(48, 200, 60_000, 6, true);
}

#[test]
fn signatures_built_over_a_full_array_keep_its_answers() {
    let mut plain = Tlb::new(32, 32, Replacement::Lru, 0);
    for v in 0..40u64 {
        let t = make_tag(1, v, 0);
        if !plain.probe(v, t) {
            plain.fill(v, t);
        }
    }
    plain.probe(20, make_tag(1, 20, 0));
    let mut signed = plain.clone();
    assert!(signed.use_region_signatures(to_region()));
    assert!(plain.tags().eq(signed.tags()));
    // The same entries are found where they are, and the next victim is the same.
    for v in [20u64, 39, 8, 7, 30] {
        let t = make_tag(1, v, 0);
        assert_eq!(plain.probe(v, t), signed.probe(v, t), "page {v}");
    }
    let t = make_tag(1, 99, 0);
    assert_eq!(plain.fill(99, t), signed.fill(99, t));
    assert!(plain.tags().eq(signed.tags()));
}

#[test]
fn only_fully_associative_lru_structures_of_32_to_64_ways_use_signatures() {
    assert!(!Tlb::new(64, 4, Replacement::Lru, 0).use_region_signatures(to_region()));
    assert!(!Tlb::new(16, 16, Replacement::Lru, 0).use_region_signatures(to_region()));
    assert!(!Tlb::new(128, 128, Replacement::Lru, 0).use_region_signatures(to_region()));
    assert!(!Tlb::new(64, 64, Replacement::Plru, 0).use_region_signatures(to_region()));
    assert!(Tlb::new(32, 32, Replacement::Lru, 0).use_region_signatures(to_region()));
}
