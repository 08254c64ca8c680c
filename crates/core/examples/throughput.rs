//! Simulation throughput without Python in the way (for profiling the engine):
//! `cargo run --release --example throughput -- TRACE.spt [MACHINE] [POLICY] [REPEATS]`
//!
//! MACHINE `decode-only` times the reader alone. Environment: `PREDECODED=1` decodes the whole
//! trace first and times the engine alone (`PHASES=1` also prints each chunk's time: the
//! first-touch faults show in the first chunks, the process's exit in the last); `SERIAL=1`
//! decodes each chunk on the simulating thread (no reader thread beside it).
use superpager_core::engine::EngineConfig;
use superpager_core::mmu::machine::Machine;
use superpager_core::sim::Simulation;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: throughput TRACE.spt [MACHINE] [POLICY] [REPEATS]");
        std::process::exit(2);
    }
    let machine = args.get(2).map(String::as_str).unwrap_or("skylake");
    let policy = args.get(3).map(String::as_str).unwrap_or("base");
    let repeats: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut rates = Vec::new();
    if machine == "decode-only" {
        // How fast the reader alone decodes (the simulation's upper bound).
        for _ in 0..repeats {
            let t0 = std::time::Instant::now();
            let mut r = superpager_core::trace::spt::SptReader::open(&args[1]).unwrap_or_else(|e| panic!("{e}"));
            let mut c = superpager_core::trace::Chunk::default();
            let mut n = 0u64;
            while r.next_chunk(&mut c).unwrap_or_else(|e| panic!("{e}")) {
                n += c.accesses.len() as u64;
            }
            rates.push((n as f64 / t0.elapsed().as_secs_f64(), 0.0));
        }
        println!("decode only: {:.2}M records/s", median(&mut rates).0 / 1e6);
        return;
    }
    if std::env::var_os("SERIAL").is_some() {
        for _ in 0..repeats {
            let m = Machine::load(machine).unwrap_or_else(|e| panic!("{e}"));
            let pol = superpager_core::policy::build(policy, &m.page_sizes).unwrap_or_else(|e| panic!("{e}"));
            let t0 = std::time::Instant::now();
            let mut r = superpager_core::trace::spt::SptReader::open(&args[1]).unwrap_or_else(|e| panic!("{e}"));
            let mut c = superpager_core::trace::Chunk::default();
            let mut e = superpager_core::engine::Engine::new(m, pol, EngineConfig::default()).unwrap_or_else(|e| panic!("{e}"));
            while r.next_chunk(&mut c).unwrap_or_else(|e| panic!("{e}")) {
                e.run_chunk(&c).unwrap_or_else(|e| panic!("{e}"));
            }
            let n = e.results().counters["accesses"];
            rates.push((n as f64 / t0.elapsed().as_secs_f64(), 0.0));
        }
        println!("{:.2}M refs/s serial decode (median of {repeats})", median(&mut rates).0 / 1e6);
        return;
    }
    if std::env::var_os("PREDECODED").is_some() {
        // The engine alone, on chunks decoded beforehand (no reader thread running beside it).
        let mut r = superpager_core::trace::spt::SptReader::open(&args[1]).unwrap_or_else(|e| panic!("{e}"));
        let mut chunks = Vec::new();
        let mut c = superpager_core::trace::Chunk::default();
        while r.next_chunk(&mut c).unwrap_or_else(|e| panic!("{e}")) {
            chunks.push(std::mem::take(&mut c));
        }
        for _ in 0..repeats {
            let m = Machine::load(machine).unwrap_or_else(|e| panic!("{e}"));
            let pol = superpager_core::policy::build(policy, &m.page_sizes).unwrap_or_else(|e| panic!("{e}"));
            let t0 = std::time::Instant::now();
            let mut e = superpager_core::engine::Engine::new(m, pol, EngineConfig::default()).unwrap_or_else(|e| panic!("{e}"));
            let t1 = std::time::Instant::now();
            let mut per = Vec::new();
            let mut faults = Vec::new();
            for c in &chunks {
                let tc = std::time::Instant::now();
                let f0 = e.os.counters.faults;
                e.run_chunk(c).unwrap_or_else(|e| panic!("{e}"));
                per.push(tc.elapsed().as_secs_f64() * 1e3);
                faults.push(e.os.counters.faults - f0);
            }
            let t2 = std::time::Instant::now();
            let n = e.results().counters["accesses"];
            if std::env::var_os("PHASES").is_some() {
                let k = per.len();
                eprintln!(
                    "new {:.2}ms chunks {:.1}ms (first {:.2} mid {:.2} last {:.2}) results {:.2}ms",
                    (t1 - t0).as_secs_f64() * 1e3,
                    (t2 - t1).as_secs_f64() * 1e3,
                    per[0],
                    per[k / 2],
                    per[k - 1],
                    t2.elapsed().as_secs_f64() * 1e3
                );
                eprintln!("{}", per.iter().zip(&faults).map(|(x, f)| format!("{x:.2}/{f}")).collect::<Vec<_>>().join(" "));
            }
            let dt = t0.elapsed().as_secs_f64();
            rates.push((n as f64 / dt, 0.0));
        }
        println!("{:.2}M refs/s engine only (median of {repeats})", median(&mut rates).0 / 1e6);
        return;
    }
    for _ in 0..repeats {
        let m = Machine::load(machine).unwrap_or_else(|e| panic!("{e}"));
        let t0 = std::time::Instant::now();
        let mut s = Simulation::open(&args[1], vec![(m, policy.to_string())], EngineConfig::default(), false).unwrap_or_else(|e| panic!("{e}"));
        let t1 = t0.elapsed().as_secs_f64();
        let mut steps = Vec::new();
        loop {
            let ts = std::time::Instant::now();
            let more = s.step(1).unwrap_or_else(|e| panic!("{e}"));
            steps.push(ts.elapsed().as_secs_f64() * 1e3);
            if !more {
                break;
            }
        }
        let t2 = t0.elapsed().as_secs_f64();
        let r = s.results().remove(0);
        let dt = t0.elapsed().as_secs_f64();
        if std::env::var_os("PHASES").is_some() {
            eprintln!(
                "open {:.2}ms steps {:.1}ms results {:.2}ms; steps: {}",
                t1 * 1e3,
                (t2 - t1) * 1e3,
                (dt - t2) * 1e3,
                steps.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ")
            );
        }
        rates.push((r.counters["accesses"] as f64 / dt, r.counters["records"] as f64 / dt));
    }
    let (a, r) = median(&mut rates);
    println!("{:.2}M refs/s, {:.2}M records/s (median of {repeats})", a / 1e6, r / 1e6);
}

/// The middle of the rounds, by their first rate.
fn median(rates: &mut [(f64, f64)]) -> (f64, f64) {
    rates.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    rates[rates.len() / 2]
}
