//! Every input in fuzz/corpus/<target>/ and fuzz/regressions/<target>/ (each crash the fuzzers
//! ever found, named after what it broke) runs through its target here, on stable, in every
//! `make test`: none may panic. The fuzzers themselves: scripts/fuzz.sh, docs/RELIABILITY.md.

use std::path::PathBuf;
use superpager_core::fuzz_targets;

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz").join(kind).join(target);
    let mut v: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(d) => d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect(),
        Err(_) => vec![],
    };
    v.sort();
    v
}

fn replay(kind: &str) -> usize {
    let mut n = 0;
    for t in fuzz_targets::TARGETS {
        for p in inputs(kind, t) {
            let data = std::fs::read(&p).unwrap();
            let r = std::panic::catch_unwind(|| fuzz_targets::run(t, &data));
            assert!(r.is_ok(), "fuzz target {t} panics on {}", p.display());
            n += 1;
        }
    }
    n
}

#[test]
fn every_corpus_input_runs_without_panicking() {
    let n = replay("corpus");
    // The seed corpus is in the repository: an empty replay means the path broke.
    assert!(n >= fuzz_targets::TARGETS.len(), "only {n} corpus inputs found");
    for t in fuzz_targets::TARGETS {
        assert!(!inputs("corpus", t).is_empty(), "no corpus for target {t}");
    }
}

#[test]
fn every_crash_found_stays_fixed() {
    replay("regressions");
}
