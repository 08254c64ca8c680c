//! Policy parameters are typed (spec::from_params): each mistake is a one-line error naming the
//! policy, the key and the value; good values reach the policy.
use superpager_core::mmu::machine::Machine;
use superpager_core::policy;

fn err(spec: &str) -> String {
    let m = Machine::load("skylake").unwrap();
    match policy::build(spec, &m.page_sizes) {
        Ok(_) => panic!("{spec}: accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn each_mistake_names_the_policy_key_and_value() {
    for (spec, want) in [
        ("navarro:threshold=2", "policy navarro: threshold=2: expected a fraction in (0, 1]"),
        ("navarro:demote_p=x", "policy navarro: demote_p=x: expected a probability in [0, 1]"),
        ("navarro:dirty=x", "policy navarro: dirty=x: expected demote, whole or hash"),
        ("navarro:fragmentation=x", "policy navarro: fragmentation=x: expected none, cache or daemon"),
        ("navarro:align_files=1", "policy navarro: align_files=1: expected true or false"),
        ("linux-thp:defrag=x", "policy linux-thp: defrag=x: expected always, defer, defer+madvise, madvise or never"),
        ("linux-thp:khugepaged=2", "policy linux-thp: khugepaged=2: expected 1 or 0"),
        ("linux-thp:pages_to_scan=-4", "policy linux-thp: pages_to_scan=-4: expected a whole number"),
        ("romer:online,miss_cycles=x", "policy romer: miss_cycles=x: expected a non-negative number"),
        ("romer:online,capacity_scan=z", "policy romer: capacity_scan=z: expected auto, linear or indexed"),
        ("fixed:2MiB,fit=x", "policy fixed: fit=x: expected none or vma"),
        ("base:x=1", "policy base: unknown parameter 'x' (known: none)"),
    ] {
        assert_eq!(err(spec), want, "{spec}");
    }
}

#[test]
fn good_values_are_taken() {
    let m = Machine::load("skylake").unwrap();
    for spec in
        ["navarro:threshold=0.5,dirty=hash,fragmentation=cache", "linux-thp:khugepaged=no,defrag=defer+madvise", "romer:asap,defer=false", "fixed:2MiB,fit=vma"]
    {
        assert!(policy::build(spec, &m.page_sizes).is_ok(), "{spec}");
    }
}
