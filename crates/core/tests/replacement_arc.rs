//! ARC's list transitions against hand-worked sequences (Megiddo and Modha; the AMSQM seed's
//! §2). Lists are shown MRU first.

mod common;
use common::replacement_counter;
use superpager_core::replacement::arc::Arc;
use superpager_core::replacement::{PageRef, Replacement};

fn p(i: u64) -> PageRef {
    PageRef { pid: 1, start: i << 12, size_idx: 0 }
}

fn ps(v: &[u64]) -> Vec<PageRef> {
    v.iter().map(|&i| p(i)).collect()
}

fn counter(a: &Arc, key: &str) -> u64 {
    replacement_counter(a, key)
}

#[track_caller]
fn lists(a: &Arc, t1: &[u64], t2: &[u64], b1: &[u64], b2: &[u64]) {
    assert_eq!(a.lists(), [ps(t1), ps(t2), ps(b1), ps(b2)]);
    a.check().unwrap();
}

/// Three pages fill memory (C = 3 once the OS asks for a victim).
fn filled() -> Arc {
    let mut a = Arc::new();
    for i in 1..=3 {
        a.on_insert(p(i));
    }
    a
}

#[test]
fn a_miss_enters_t1_and_a_second_reference_moves_it_to_t2() {
    let mut a = filled();
    lists(&a, &[3, 2, 1], &[], &[], &[]);
    a.on_reference(p(1));
    lists(&a, &[3, 2], &[1], &[], &[]);
    a.on_reference(p(1));
    a.on_reference(p(2));
    lists(&a, &[3], &[2, 1], &[], &[]);
    assert_eq!((counter(&a, "replacement.arc.hits_t1"), counter(&a, "replacement.arc.hits_t2")), (2, 1));
    assert_eq!(counter(&a, "replacement.arc.misses"), 3);
}

#[test]
fn t1_over_its_target_gives_the_victim_and_b1_remembers_it() {
    let mut a = filled();
    a.on_reference(p(1));
    // p = 0 and |T1| = 2: T1's LRU goes, into B1.
    assert_eq!(a.victim().unwrap().page, p(2));
    lists(&a, &[3], &[1], &[2], &[]);
    assert_eq!(counter(&a, "replacement.arc.capacity"), 3);
}

#[test]
fn a_ghost_hit_in_b1_grows_t1s_target_and_enters_t2() {
    let mut a = filled();
    a.on_reference(p(1));
    a.victim();
    a.on_insert(p(4));
    assert_eq!(a.victim().unwrap().page, p(3));
    lists(&a, &[4], &[1], &[3, 2], &[]);
    // |B1| = 2 >= |B2| = 0: the step is 1.
    a.on_insert(p(2));
    assert_eq!(a.target(), 1.0);
    lists(&a, &[4], &[2, 1], &[3], &[]);
    assert_eq!(counter(&a, "replacement.arc.ghost_hits_b1"), 1);
}

#[test]
fn at_its_target_t1_is_spared_and_t2_gives_the_victim_into_b2() {
    let mut a = filled();
    a.on_reference(p(1));
    a.victim();
    a.on_insert(p(4));
    a.victim();
    a.on_insert(p(2)); // p = 1, |T1| = 1: a tie evicts from T2
    assert_eq!(a.victim().unwrap().page, p(1));
    lists(&a, &[4], &[2], &[3], &[1]);
    assert_eq!(counter(&a, "replacement.arc.evict_t2"), 1);
}

#[test]
fn a_ghost_hit_in_b2_shrinks_t1s_target() {
    let mut a = filled();
    a.on_reference(p(1));
    a.victim();
    a.on_insert(p(4));
    a.victim();
    a.on_insert(p(2));
    a.victim();
    lists(&a, &[4], &[2], &[3], &[1]);
    a.on_insert(p(5));
    a.on_reference(p(4)); // T1 = [5], T2 = [4, 2]
    assert_eq!(a.victim().unwrap().page, p(2), "|T1| = 1 = p: T2 gives");
    lists(&a, &[5], &[4], &[3], &[2, 1]);
    // |B2| = 2 >= |B1| = 1: the step is 1, and p = 1 - 1 = 0.
    a.on_insert(p(1));
    assert_eq!(a.target(), 0.0);
    lists(&a, &[5], &[1, 4], &[3], &[2]);
    assert_eq!(counter(&a, "replacement.arc.ghost_hits_b2"), 1);
}

#[test]
fn the_b1_step_is_the_ratio_when_b2_is_longer() {
    // Build |B1| = 1, |B2| = 2, then hit B1: p grows by 2.
    let mut a = Arc::new();
    for i in 1..=3 {
        a.on_insert(p(i));
        a.on_reference(p(i));
    }
    a.on_insert(p(4)); // T1 = [4], T2 = [3, 2, 1]
    assert_eq!(a.victim().unwrap().page, p(4)); // |T1| = 1 > p = 0
    assert_eq!(a.victim().unwrap().page, p(1)); // T1 empty: T2
    assert_eq!(a.victim().unwrap().page, p(2));
    lists(&a, &[], &[3], &[4], &[2, 1]);
    a.on_insert(p(4));
    assert_eq!(a.target(), 2.0);
    lists(&a, &[], &[4, 3], &[], &[2, 1]);
}

#[test]
fn the_directory_drops_b1s_oldest_ghost_when_l1_reaches_c() {
    let mut a = Arc::new();
    a.on_insert(p(1));
    a.on_insert(p(2));
    assert_eq!(a.victim().unwrap().page, p(1)); // C = 2
    lists(&a, &[2], &[], &[1], &[]);
    a.on_insert(p(3)); // |T1| + |B1| = 2 = C: 1 is forgotten
    lists(&a, &[3, 2], &[], &[], &[]);
    assert_eq!(counter(&a, "replacement.arc.ghosts_dropped"), 1);
    a.on_insert(p(1));
    assert_eq!(counter(&a, "replacement.arc.ghost_hits_b1"), 0, "a forgotten page comes back as a miss");
}

#[test]
fn a_victim_the_os_could_not_evict_is_restored_without_a_ghost_hit() {
    let mut a = filled();
    let v = a.victim().unwrap().page;
    assert_eq!(v, p(1));
    a.restore(v);
    lists(&a, &[3, 2, 1], &[], &[], &[]);
    assert_eq!(counter(&a, "replacement.arc.ghost_hits_b1"), 0);
    assert_eq!(counter(&a, "replacement.arc.evict_t1"), 0);
}

#[test]
fn an_unmapped_page_leaves_no_ghost() {
    let mut a = filled();
    a.on_remove(p(2));
    lists(&a, &[3, 1], &[], &[], &[]);
    assert_eq!(a.len(), 2);
}

#[test]
fn removing_the_victim_leaves_its_ghost_but_after_it_comes_back_removes_the_page() {
    let mut a = filled();
    a.on_reference(p(1));
    assert_eq!(a.victim().unwrap().page, p(2));
    // The OS unmaps the victim it is evicting: the ghost stays in B1.
    a.on_remove(p(2));
    lists(&a, &[3], &[1], &[2], &[]);
    // Faulted back (a ghost hit), then unmapped: it leaves every list.
    a.on_insert(p(2));
    lists(&a, &[3], &[2, 1], &[], &[]);
    a.on_remove(p(2));
    lists(&a, &[3], &[1], &[], &[]);
}
