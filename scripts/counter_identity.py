#!/usr/bin/env python3
"""Counter identity: run a fixed comparison set and record every counter of every run, so a
change meant to keep behaviour (a refactor) can show that it did.

    .venv/bin/python scripts/counter_identity.py --save before.json.gz    # old revision (make dev first)
    .venv/bin/python scripts/counter_identity.py --check before.json.gz   # new one: exit 1 on a difference

The set (docs/ARCHITECTURE.md, "Checking a refactor"):
  - synthetic traces (seq, stride, gups, zipf, chase, transpose, rbtree) x every machine preset x
    every policy variant that machine accepts, with ample memory;
  - the same traces under memory pressure (reclaim, compaction, preemption) and with swap
    (CLOCK and LRU);
  - the fuzz corpus's text traces (forks, exits, mmap/munmap/mremap/mprotect/madvise, brk,
    files), validated after every event, under the fuzz target's eight policies, with and
    without swap;
  - the bundled scenarios under three policies;
  - machines with data caches (`host`, and a file machine whose 12-way L1, 20-way L2 and hashed
    30MiB L3 take the padded-row, scalar and hashed-set paths) on four traces under five
    policies, with the caches replayed on a thread of their own and on the engine's thread;
  - `reproduce navarro --quick` and `reproduce romer --quick` (their reports, byte for byte),
    unless --no-reproduce.

Every run stores its counters, page-size mix, derived figures, kills and a digest of its time
series. --check prints each run whose figures differ, and counters that are new (allowed: a
refactor may add counters) apart from those that changed or vanished (not allowed).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import superpager as sp
from superpager import _core

ROOT = Path(__file__).resolve().parent.parent
# The workload suite's sources, for `reproduce` (also when superpager is imported from a copy
# of the package, as when saving the figures of an older build).
os.environ.setdefault("SUPERPAGER_WORKLOADS", str(ROOT / "workloads"))

MACHINES = ["skylake", "zen3", "neoverse-n1", "alpha21264", "romer95", "amsqm09"]

# Policy variants for every machine; those a machine refuses (check_policy) are skipped for it.
POLICIES = [
    "base",
    "fixed:2MiB",
    "fixed:64KiB",
    "fixed:size=2MiB,fit=vma",
    "linux-thp",
    "linux-thp:defrag=always",
    "linux-thp:enabled=madvise",
    "linux-thp:khugepaged=0",
    "linux-thp:hugepages-64kB=always,hugepages-2048kB=never",
    "navarro",
    "navarro:fragmentation=cache",
    "navarro:fragmentation=none",
    "navarro:threshold=0.5,retry_smaller=true",
    "navarro:pte_replication=true,dirty=whole",
    "romer:fixed",
    "romer:asap",
    "romer:asap-4-64",
]
# Romer's miss-driven variants are costly with 1GiB pages (their bookkeeping spans the
# largest page): they run on the machines the paper's reproduction uses.
ROMER_MACHINES = ["romer95", "alpha21264"]
ROMER_POLICIES = [
    "romer:approx-online",
    "romer:online",
    "romer:online,capacity_scan=linear",
    "romer:offline",
    "romer:online,past_vma=true",
]

# The traces: (name, gen kind, size, accesses, extra gen arguments).
TRACES = [
    ("seq", "seq", "64MiB", 0, {"passes": 2}),
    ("stride", "stride", "128MiB", 0, {"stride": "12KiB", "passes": 2}),
    ("gups", "gups", "256MiB", 400_000, {}),
    ("zipf", "zipf", "256MiB", 800_000, {"alpha": 1.1}),
    ("chase", "chase", "16MiB", 400_000, {}),
    ("transpose", "transpose", "8MiB", 0, {}),
    ("rbtree", "rbtree", "8MiB", 0, {}),
]

# (label, memory, swap, replacement, machines, policies): runs under memory pressure.
PRESSURE = [
    ("tight", "300MiB", "0", "clock", ["skylake", "alpha21264"], ["base", "linux-thp:defrag=always", "navarro", "navarro:fragmentation=cache", "fixed:2MiB"]),
    ("swap-clock", "96MiB", "256MiB", "clock", ["skylake", "alpha21264"], ["base", "linux-thp", "navarro"]),
    ("swap-lru", "96MiB", "256MiB", "lru", ["skylake"], ["base", "linux-thp", "navarro"]),
    ("swap-arc", "96MiB", "256MiB", "arc", ["skylake", "amsqm09"], ["base", "navarro"]),
    ("swap-amsqm", "96MiB", "256MiB", "amsqm", ["skylake", "amsqm09"], ["navarro"]),
    ("swap-amsqm-every", "96MiB", "256MiB", "amsqm:sees=every,repromote=true", ["amsqm09"], ["navarro"]),
]
PRESSURE_TRACES = ["gups", "zipf", "seq"]

# The fuzz target simulate_text's eight policies and machines (crates/core/src/fuzz_targets.rs).
FUZZ_POLICIES = ["base", "fixed:2MiB", "linux-thp:enabled=always", "navarro", "romer:asap", "romer:online",
                 "linux-thp:enabled=always,defrag=always", "navarro:fragmentation=cache"]

SCENARIO_POLICIES = [None, "navarro", "base"]

# Machines with data caches (issue 24): `host` (this machine's CPUID and calibration; compare
# on one machine only) and a file machine with the level shapes the replay treats apart.
CACHE_MACHINE_TOML = '''
name = "identity-caches"
base_page = "4KiB"
page_sizes = ["4KiB", "2MiB", "1GiB"]
[[tlb]]
name = "L1d"
level = 1
stream = "data"
entries = 64
ways = 4
page_sizes = ["4KiB"]
[[tlb]]
name = "L1d-big"
level = 1
stream = "data"
entries = 32
ways = 32
page_sizes = ["2MiB", "1GiB"]
[[tlb]]
name = "L2"
level = 2
entries = 1536
ways = 12
page_sizes = ["4KiB", "2MiB"]
hit_cycles = 7
[walker]
levels = 4
bits_per_level = 9
ref_cycles = 25
pwc = [ { level = 2, sets = 4, ways = 8 } ]
[cost]
cycles_per_access = 1
fault_cycles = 2500
zero_cycles_per_kib = 100
[cache]
levels = [{ name = "L1d", size = "48KiB", ways = 12, cycles = 5 },
          { name = "L2", size = "1280KiB", ways = 20, cycles = 14 },
          { name = "L3", size = "30MiB", ways = 12, cycles = 50 }]
dram_cycles = 300
mlp = 16
walkers = 4
rob = 512
'''
CACHE_TRACES = ["gups", "zipf", "chase", "seq"]
CACHE_POLICIES = ["base", "linux-thp", "navarro", "trident", "fixed:2MiB"]


def fuzz_machine(policy: str) -> str:
    return "alpha21264" if policy.startswith("navarro") else "romer95" if policy.startswith("romer") else "skylake"


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def record(r) -> dict:
    return {
        "counters": r.counters,
        "page_size_mix": r.page_size_mix,
        "derived": r.derived,
        "killed": r.killed,
        "series": digest(r.series),
        "truncated": r.trace_truncated,
    }


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def collect(work: Path, reproduce: bool) -> dict:
    out: dict = {"runs": {}, "skipped": [], "reports": {}}
    runs = out["runs"]
    t0 = time.time()
    traces = {}
    for name, kind, size, accesses, extra in TRACES:
        path = work / f"{name}.spt"
        sp.gen(kind, str(path), size=size, accesses=accesses, seed=7, **extra)
        traces[name] = path
    pairs = []
    for m in MACHINES:
        for p in POLICIES + (ROMER_POLICIES if m in ROMER_MACHINES else []):
            try:
                _core.check_policy(p, m)
            except _core.SuperpagerError as e:
                out["skipped"].append(f"{m} {p}: {e}")
                continue
            pairs.append((m, p))
    for name, path in traces.items():
        say(f"[{time.time() - t0:6.0f}s] {name}: {len(pairs)} machine x policy runs")
        for (m, p), r in zip(pairs, sp.run(path, pairs, memory="64GiB", sample_every=1 << 16, progress=False)):
            runs[f"trace={name} machine={m} policy={p}"] = record(r)
    for label, memory, swap, repl, machines, policies in PRESSURE:
        ps = [(m, p) for m in machines for p in policies]
        for name in PRESSURE_TRACES:
            say(f"[{time.time() - t0:6.0f}s] {label}: {name}")
            try:
                results = sp.run(traces[name], ps, memory=memory, sample_every=1 << 16, progress=False, swap=swap, replacement=repl)
            except _core.SuperpagerError as e:
                # An out-of-memory stop is a result too: it must stay the same.
                for m, p in ps:
                    runs[f"{label} trace={name} machine={m} policy={p}"] = {"error": str(e)}
                continue
            for (m, p), r in zip(ps, results):
                runs[f"{label} trace={name} machine={m} policy={p}"] = record(r)
    corpus = sorted((ROOT / "fuzz" / "corpus" / "simulate_text").iterdir())
    say(f"[{time.time() - t0:6.0f}s] fuzz corpus: {len(corpus)} text traces")
    for f in corpus:
        # The target's first byte picks its policy; the rest is the trace (all eight run here).
        text = work / f"corpus-{f.name}"
        text.write_bytes(f.read_bytes()[1:])
        spt = work / f"corpus-{f.name}.spt"
        sp.trace_import(str(text), "text", str(spt), progress=False)
        for swap in ("0", "8MiB"):
            for p in FUZZ_POLICIES:
                key = f"corpus={f.name} swap={swap} machine={fuzz_machine(p)} policy={p}"
                try:
                    r = sp.run(spt, [(fuzz_machine(p), p)], memory="64MiB", sample_every=64, validate=True, progress=False, swap=swap)[0]
                    runs[key] = record(r)
                except _core.SuperpagerError as e:
                    runs[key] = {"error": str(e)}
    cache_file = work / "identity-caches.toml"
    cache_file.write_text(CACHE_MACHINE_TOML)
    for thread in ("1", "0"):
        os.environ["SUPERPAGER_CACHE_THREAD"] = thread
        for m in ("host", str(cache_file)):
            label = "identity-caches" if m != "host" else m
            say(f"[{time.time() - t0:6.0f}s] caches: {label}, replay thread {thread}")
            for name in CACHE_TRACES:
                for p in CACHE_POLICIES:
                    r = sp.simulate(str(traces[name]), machine=m, policy=p, memory="8GiB", progress=False)
                    runs[f"caches trace={name} machine={label} policy={p} thread={thread}"] = record(r)
    os.environ.pop("SUPERPAGER_CACHE_THREAD", None)
    for name, _ in sp.scenarios():
        for p in SCENARIO_POLICIES:
            say(f"[{time.time() - t0:6.0f}s] scenario {name} policy={p or '(its own)'}")
            r = sp.simulate(scenario=name, policy=p, progress=False)
            runs[f"scenario={name} policy={p or '(its own)'}"] = record(r)
    if reproduce:
        from superpager import reproduce as rp
        for paper, fn in (("navarro", rp.navarro), ("romer", rp.romer)):
            say(f"[{time.time() - t0:6.0f}s] reproduce {paper} --quick")
            out["reports"][f"reproduce {paper} --quick"] = fn(quick=True)
    say(f"[{time.time() - t0:6.0f}s] {len(runs)} runs, {sum(len(v.get('counters', {})) for v in runs.values())} counters")
    return out


def compare(before: dict, after: dict) -> list[str]:
    bad = []
    added: dict[str, int] = {}
    for key, b in before["runs"].items():
        a = after["runs"].get(key)
        if a is None:
            bad.append(f"{key}: missing from this run")
            continue
        for field in ("page_size_mix", "killed", "series", "truncated", "error"):
            if b.get(field) != a.get(field):
                bad.append(f"{key}: {field} differs: {b.get(field)!r} -> {a.get(field)!r}")
        # Derived figures: every saved one must be unchanged; new ones are allowed, as counters.
        bd, ad = b.get("derived") or {}, a.get("derived") or {}
        for d, v in bd.items():
            if ad.get(d) != v:
                bad.append(f"{key}: derived {d}: {v!r} -> {ad.get(d)!r}")
        for d in ad.keys() - bd.keys():
            added[f"derived.{d}"] = added.get(f"derived.{d}", 0) + 1
        bc, ac = b.get("counters", {}), a.get("counters", {})
        for c, v in bc.items():
            if c not in ac:
                bad.append(f"{key}: counter {c} vanished (was {v})")
            elif ac[c] != v:
                bad.append(f"{key}: counter {c}: {v} -> {ac[c]}")
        for c in ac.keys() - bc.keys():
            added[c] = added.get(c, 0) + 1
    for key in after["runs"].keys() - before["runs"].keys():
        bad.append(f"{key}: a run the saved set does not have")
    for name, text in before.get("reports", {}).items():
        if name in after.get("reports", {}) and after["reports"][name] != text:
            bad.append(f"{name}: the report differs")
    for c, n in sorted(added.items()):
        say(f"new counter (allowed): {c} in {n} runs")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", metavar="FILE", help="write every run's figures here (.json or .json.gz)")
    g.add_argument("--check", metavar="FILE", help="compare with a file written by --save; exit 1 on a difference")
    ap.add_argument("--no-reproduce", action="store_true", help="skip the two `reproduce --quick` reports (about 6 minutes)")
    a = ap.parse_args()
    before = None
    if a.check:
        opener = gzip.open if a.check.endswith(".gz") else open
        with opener(a.check, "rt") as f:
            before = json.load(f)
    with tempfile.TemporaryDirectory(prefix="superpager-identity-") as tmp:
        after = collect(Path(tmp), reproduce=not a.no_reproduce and (before is None or bool(before.get("reports"))))
    after["revision"] = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    if a.save:
        opener = gzip.open if a.save.endswith(".gz") else open
        text = json.dumps(after, sort_keys=True, indent=0)
        with opener(a.save, "wt") as f:
            f.write(text)
        say(f"wrote {a.save}: {len(after['runs'])} runs at {after['revision']}")
        return 0
    bad = compare(before, after)
    n = sum(len(v.get("counters", {})) for v in before["runs"].values())
    if bad:
        for line in bad[:200]:
            print(line)
        print(f"DIFFERENT: {len(bad)} differences; saved at {before.get('revision')}, now {after['revision']}")
        return 1
    print(f"IDENTICAL: {len(before['runs'])} runs, {n} counters, {len(after.get('reports', {}))} reports compared; "
          f"saved at {before.get('revision')}, now {after['revision']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
