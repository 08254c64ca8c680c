"""`superpager bench`: throughput measured in one run, against pycachesim as the peer.

1. The one-structure TLB model (64 entries, 4-way, LRU, 4KiB pages) and pycachesim set up as the
   same cache (16 sets x 4 ways of 4096-byte lines), on the same in-memory addresses. Both
   report misses, which must agree.
2. The full `skylake` preset with `base`, streaming and decoding the compressed .spt file, as
   users run it (with the AVX2 set operations where the CPU has them) and with the scalar TLB
   code forced (`SUPERPAGER_SCALAR_TLB=1`), which is what a CPU without AVX2 runs.

The machines are noisy: every figure is the median of --repeats runs, and ratios are computed
within the run.
"""
from __future__ import annotations

from typing import Any

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from . import _core, api
from .fmt import human
from .hostinfo import machine_line

ZIPF = "Zipf 0.99 (1GiB)"
ZIPF_LONGER = "Zipf 0.99 (1GiB), 4x longer"

TRACES: list[tuple[str, str, str, dict[str, Any]]] = [
    # name, gen kind, size, options
    ("random (GUPS, 1GiB)", "gups", "1GiB", {}),
    ("strided (4KiB stride, 1GiB)", "stride", "1GiB", {}),
    ("sequential (8-byte elements, 256MiB)", "seq", "256MiB", {}),
    (ZIPF, "zipf", "1GiB", {}),
    ("red-black-tree-like (8MiB of 48-byte nodes)", "rbtree", "8MiB", {}),
    # The same Zipf workload 4x longer: first-touch faults (a run's fixed OS work, which a real
    # trace of billions of references amortizes) weigh 4x less per reference.
    (ZIPF_LONGER, "zipf", "1GiB", {"longer": 4}),
]


# Runs measured beside `base` on `skylake` on the Zipf trace: (label, machine, policy, the label
# it is held against). Each must keep at least half of its reference's refs/s: trident against
# base (issue 20), zen3 with PTE coalescing against zen3 without (issue 21). None: a reference,
# held against nothing.
BASE_LABEL = "base"
NOCOALESCE = "base, zen3+nocoalesce"
RESERVED_NOCOALESCE = "navarro:promote=false, zen3+nocoalesce"
RESERVED_COALESCE = "navarro:promote=false, zen3 (PTE coalescing)"
NOCACHE = "base, host+nocache (linear model)"
WITH_CACHES = "base, host (data caches: runtime model)"
ONE_THREAD = "base, host, caches replayed on the engine's thread"
# Environment a case runs under: ONE_THREAD keeps the caches' replay off its second thread
# (mmu/replay_thread.rs), as a run that shares the machine with others does.
CASE_ENV = {ONE_THREAD: {"SUPERPAGER_CACHE_THREAD": "0"}}
# The runtime model's target (issue 24): the host machine with its data caches at 15M refs/s.
CACHES_TARGET = 15e6
POLICY_CASES = [
    ("linux-thp", "skylake", "linux-thp", BASE_LABEL),
    ("trident", "skylake", "trident", BASE_LABEL),
    (NOCOALESCE, "zen3+nocoalesce", "base", BASE_LABEL),
    ("base, zen3 (PTE coalescing)", "zen3", "base", NOCOALESCE),
    # Reservations place pages at their offsets (no promotion), so here coalesced entries are
    # filled and hit: the cost of coalescing at work, not only of the check.
    (RESERVED_NOCOALESCE, "zen3+nocoalesce", "navarro:promote=false", None),
    (RESERVED_COALESCE, "zen3", "navarro:promote=false", RESERVED_NOCOALESCE),
    (NOCACHE, "host+nocache", "base", BASE_LABEL),
    (WITH_CACHES, "host", "base", NOCACHE),
    (ONE_THREAD, "host", "base", None),
]


def pycachesim_run(addrs: list[int]):
    from cachesim import Cache, CacheSimulator, MainMemory

    mem = MainMemory()
    c = Cache("L1", 16, 4, 4096, "LRU")
    mem.load_to(c)
    mem.store_from(c)
    CacheSimulator(c, mem)
    c.backend.iterload(addrs, 1)
    return c.backend.MISS_count


SCALAR_ENV = "SUPERPAGER_SCALAR_TLB"


def simulate_scalar(path: str) -> api.Result:
    """The full run with the scalar TLB code (the variable is read when the machine is built)."""
    return simulate_with_env(path, "skylake", "base", {SCALAR_ENV: "1"})


def simulate_with_env(path: str, machine: str, policy: str, env: dict[str, str]) -> api.Result:
    """One run with `env` set around it (the variables are read when the run is opened)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return api.simulate(path, machine=machine, policy=policy, progress=False)
    finally:
        for k, v in old.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def main(a) -> int:
    try:
        import cachesim  # noqa: F401
        have_peer = True
    except ImportError:
        have_peer = False
        print("note: pycachesim is not installed (pip install pycachesim); the peer column stays empty", file=sys.stderr)
    work = a.workdir or tempfile.mkdtemp(prefix="superpager-bench-")
    os.makedirs(work, exist_ok=True)
    n = a.accesses
    # Prepare every trace first, then measure in rounds that visit every trace once, so a slow
    # spell of the (shared, noisy) machine falls on all of them alike; report medians.
    prepared = []
    for name, kind, size, opts in TRACES:
        opts = dict(opts)
        longer = opts.pop("longer", 1)
        path = os.path.join(work, f"bench-{kind}{f'-x{longer}' if longer > 1 else ''}.spt")
        accesses = (n // 2 if kind == "gups" else n) * longer  # GUPS emits a load and a store per update
        api.gen(kind, path, size=size, accesses=accesses, seed=42, **opts)
        raw = _core.read_addresses(path)
        addrs = None
        if have_peer:
            import array

            addrs = array.array("Q", raw).tolist()
        prepared.append((name, path, raw, addrs))
    t_ours: dict[str, list[float]] = {p[0]: [] for p in prepared}
    t_peer: dict[str, list[float]] = {p[0]: [] for p in prepared}
    t_full: dict[str, list[float]] = {p[0]: [] for p in prepared}
    t_scalar: dict[str, list[float]] = {p[0]: [] for p in prepared}
    t_policy: dict[str, list[float]] = {p: [] for p, *_r in POLICY_CASES}
    cpu_policy: dict[str, list[float]] = {p: [] for p, *_r in POLICY_CASES}
    policy_runs: dict[str, api.Result] = {}
    misses, peer_misses, full = {}, {}, {}
    for rnd in range(a.repeats):
        print(f"  round {rnd + 1}/{a.repeats}", file=sys.stderr)
        for name, path, raw, addrs in prepared:
            _, misses[name], secs = _core.tlb_only(raw, 64, 4, "4KiB")
            t_ours[name].append(secs)
            if addrs is not None:
                t0 = time.perf_counter()
                peer_misses[name] = pycachesim_run(addrs)
                t_peer[name].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            full[name] = api.simulate(path, machine="skylake", policy="base", progress=False)
            t_full[name].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            scalar = simulate_scalar(path)
            t_scalar[name].append(time.perf_counter() - t0)
            if scalar.counters != full[name].counters:
                raise SystemExit(f"error: {name}: the scalar TLB code gave different counters than the AVX2 code")
            if name == ZIPF:
                for label, machine, spec, _against in POLICY_CASES:
                    t0, c0 = time.perf_counter(), time.process_time()
                    policy_runs[label] = simulate_with_env(path, machine, spec, CASE_ENV.get(label, {}))
                    t_policy[label].append(time.perf_counter() - t0)
                    cpu_policy[label].append(time.process_time() - c0)
    rows_tlb: list[tuple[Any, ...]] = []
    rows_full: list[tuple[Any, ...]] = []
    for name, path, raw, _addrs in prepared:
        count = len(raw) // 8
        peer_rate = count / statistics.median(t_peer[name]) if t_peer[name] else None
        rows_tlb.append((name, count, count / statistics.median(t_ours[name]), peer_rate, misses[name], peer_misses.get(name)))
        r = full[name]
        med = statistics.median(t_full[name])
        spread = (r["accesses"] / max(t_full[name]), r["accesses"] / min(t_full[name]))
        scalar_rate = r["accesses"] / statistics.median(t_scalar[name])
        rows_full.append((name, r["accesses"], r["accesses"] / med, r["records"] / med, os.path.getsize(path), r["walks"], spread, r["faults"],
                          scalar_rate))

    lines = []
    lines.append("| trace | refs | superpager TLB model (refs/s) | pycachesim (refs/s) | ratio | misses (ours / pycachesim) |")
    lines.append("|---|---:|---:|---:|---:|---|")
    for name, count, ours, peer, m, pm in rows_tlb:
        ratio = f"{ours / peer:.1f}x" if peer else "-"
        agree = "" if pm is None else (" (agree)" if pm == m else " (DIFFER)")
        lines.append(f"| {name} | {human(count)} | {human(ours)} | {human(peer) if peer else '-'} | {ratio} | {m} / {pm if pm is not None else '-'}{agree} |")
    lines.append("")
    lines.append("| trace | refs | full `skylake` + `base`, streaming .spt (refs/s, median) | slowest – fastest round | records/s | scalar TLB code (refs/s, median) | walks per ref | faults per 1000 refs | trace bytes per ref |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, count, rate, rrate, size, walks, (lo, hi), faults, srate in rows_full:
        lines.append(f"| {name} | {human(count)} | {human(rate)} | {human(lo)} – {human(hi)} | {human(rrate)} | {human(srate)} | {walks / count:.3f} | {faults * 1000 / count:.1f} | {size / count:.3f} |")
    lines.append("")
    lines.append("### Against the targets")
    lines.append("")
    tlb_ok = [n for n, _, ours, *_ in rows_tlb if ours >= 100e6]
    full_ok = [n for n, _, rate, *_ in rows_full if rate >= 30e6]
    scalar_ok = [r[0] for r in rows_full if r[-1] >= 30e6]
    lines.append(f"- one-structure TLB at least 100M refs/s: met on {len(tlb_ok)} of {len(rows_tlb)} traces"
                 + (f" (not on: {', '.join(n for n, *_ in rows_tlb if n not in tlb_ok)})" if len(tlb_ok) < len(rows_tlb) else ""))
    lines.append(f"- full `skylake` at least 30M refs/s: met on {len(full_ok)} of {len(rows_full)} traces"
                 + (f" (not on: {', '.join(n for n, *_ in rows_full if n not in full_ok)})" if len(full_ok) < len(rows_full) else "")
                 + ("" if _core.wide_tlb() else " (the AVX2 set operations are off here, no AVX2 or SUPERPAGER_SCALAR_TLB set: both columns ran the scalar code)"))
    lines.append(f"- the same with the scalar TLB code (what a CPU without AVX2 runs): met on {len(scalar_ok)} of {len(rows_full)} traces"
                 + (f" (not on: {', '.join(r[0] for r in rows_full if r[0] not in scalar_ok)})" if len(scalar_ok) < len(rows_full) else ""))
    split = fixed_and_steady(rows_full, t_full)
    if split:
        lines.append(split)
    if policy_runs:
        rates = {BASE_LABEL: full[ZIPF]["accesses"] / statistics.median(t_full[ZIPF])}
        cpu_rates = {}
        for label, *_r in POLICY_CASES:
            rates[label] = policy_runs[label]["accesses"] / statistics.median(t_policy[label])
            cpu_rates[label] = policy_runs[label]["accesses"] / statistics.median(cpu_policy[label])
        if policy_runs[WITH_CACHES].counters != policy_runs[ONE_THREAD].counters:
            raise SystemExit("error: host with the caches' replay thread gave different counters than without it")
        lines += ["", f"### Policies and machines beside `base` on `skylake` ({ZIPF})", "",
                  "| run | machine | refs/s (median) | refs per CPU second (median; every thread) | held against | ratio | page sizes at the end | walks |",
                  "|---|---|---:|---:|---|---:|---|---:|",
                  f"| {BASE_LABEL} | skylake | {human(rates[BASE_LABEL])} | - | - | - | 4KiB 100% | {full[ZIPF]['walks']:,} |"]
        for label, machine, _spec, against in POLICY_CASES:
            r = policy_runs[label]
            mix = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r.page_size_mix.items(), key=lambda kv: -kv[1]) if v >= 0.005)
            ratio = f"{rates[label] / rates[against]:.2f}" if against else "-"
            lines.append(f"| {label} | {machine} | {human(rates[label])} | {human(cpu_rates[label])} | {against or '- (a reference)'} | {ratio} | {mix} | {r['walks']:,} |")
        held = [(label, against) for label, *_r, against in POLICY_CASES if against]
        half = [label for label, against in held if rates[label] >= rates[against] / 2]
        lines.append("")
        lines.append(f"- every run at least half of the refs/s of the run it is held against: met by {len(half)} of {len(held)}"
                     + (f" (not by: {', '.join(label for label, _a in held if label not in half)})" if len(half) < len(held) else ""))
        if WITH_CACHES in rates:
            ok = rates[WITH_CACHES] >= CACHES_TARGET
            lines.append(f"- `host` with its data caches (docs/RUNTIME_MODEL.md) at least {human(CACHES_TARGET)} refs/s: "
                         f"{'met' if ok else 'NOT met'} ({human(rates[WITH_CACHES])}, {rates[WITH_CACHES] / rates[NOCACHE]:.2f} of host+nocache; "
                         f"{human(cpu_rates[WITH_CACHES])} refs per CPU second with the caches' replay thread, which runs where a run has "
                         f"two cores to itself; {human(rates[ONE_THREAD])} with the replay on the engine's thread)")
        for on, off in (("base, zen3 (PTE coalescing)", NOCOALESCE), (RESERVED_COALESCE, RESERVED_NOCOALESCE)):
            co = policy_runs.get(on)
            if co is not None:
                lines.append(f"- PTE coalescing on `zen3` ({on.split(',')[0]}): {co['coalesce.fills']:,} of {co['walks']:,} walks filled a "
                             f"coalesced entry; {co['coalesce.hits']:,} TLB hits were served by one; walks {co['walks']:,} against "
                             f"{policy_runs[off]['walks']:,} without; {rates[on] / rates[off]:.2f} of the refs/s without (target: at least 0.5)")
    table = "\n".join(lines)
    print(table)
    if a.out:
        write_report(a, table)
        print(f"\nwrote {a.out}", file=sys.stderr)
    return 0


def fixed_and_steady(rows_full, t_full) -> str | None:
    """Split the Zipf row's time into a fixed part and a per-reference part, from the 1x and 4x
    rows (same generator and seed, 4x the references): time = fixed + refs * per_ref."""
    short = next((r for r in rows_full if r[0] == ZIPF), None)
    long_ = next((r for r in rows_full if r[0] == ZIPF_LONGER), None)
    if short is None or long_ is None or long_[1] <= short[1]:
        return None
    t1, t4 = statistics.median(t_full[short[0]]), statistics.median(t_full[long_[0]])
    per_ref = (t4 - t1) / (long_[1] - short[1])
    fixed = t1 - short[1] * per_ref
    if per_ref <= 0 or fixed < 0:
        return f"- Zipf: the 1x and 4x rows do not split into a fixed and a per-reference part this run ({t1 * 1e3:.0f} ms, {t4 * 1e3:.0f} ms)"
    return (f"- Zipf, from the 1x and 4x rows (time = fixed + refs x per-reference): a fixed part of {fixed * 1e3:.0f} ms "
            f"({fixed / t1:.0%} of the {human(short[1])}-reference run: set-up, the {human(short[7])} first-touch faults, the exit) "
            f"and {per_ref * 1e9:.1f} ns per reference after it ({human(1 / per_ref)} refs/s)")


def write_report(a, table: str) -> None:
    commit = ""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:
        pass
    header = f"""# Performance record

Produced by `superpager bench --accesses {a.accesses} --repeats {a.repeats} --out {a.out}`
(`make bench`) on {machine_line()}, Python {platform.python_version()},
superpager {_core.__version__}{f' at {commit}' if commit else ''}. Single core for superpager's
simulation loop (the full-machine runs also use a second thread to decompress and decode chunks,
and `host`'s data caches replay on a third where the run has two cores to itself).
Figures are medians of {a.repeats} rounds measured in the same process, each round visiting every
trace (so a slow spell of the machine falls on all of them alike); compare ratios, not absolute
rates across reports (these VMs are noisy: see the slowest and fastest rounds).

## Targets (issue 2)

- one-structure TLB (64 entries, 4-way, LRU): at least 100M refs/s (Dinero IV does about 18M/s here)
- full `skylake` preset with `base`, streaming from a compressed .spt: at least 30M refs/s

## Results

{table}

How each number is measured:
- *TLB model*: `_core.tlb_only` over the trace's addresses already in memory (a `Vec<u64>`),
  timed inside Rust; pycachesim gets the same addresses as a Python list through
  `Cache.backend.iterload` (its fastest interface), timed around the call.
- *full skylake*: `superpager.simulate(trace, machine="skylake", policy="base")`, wall time of
  the whole call: open, decompress and decode every chunk, the OS model (faults, page tables),
  five TLB structures, page-walk caches and walk costs.
- *scalar TLB code*: the same call with `SUPERPAGER_SCALAR_TLB=1`, which turns off the AVX2 set
  operations (docs/MODEL.md, "Wide set operations"); a CPU without AVX2 runs this code. Each round checks
  that both give the same counters.
- *refs* count every access; *records* are what the engine iterates over (a run of accesses to
  one 4KiB page is one record), so refs/s exceeds records/s where runs are long.

## Reading the full-machine figures

The cost of a reference depends on how far it gets. A reference that hits in a level-1 TLB costs
a few nanoseconds; one that misses everywhere probes the level-1 and level-2 structures, consults
the page-walk caches, resolves the page table (the simulator's own memory, which for a 1GiB
footprint no longer fits the host's L1 cache), fills the TLBs, and on first touch serves a fault.
The "walks per ref" column shows where each trace sits: the synthetic GUPS, strided, Zipf traces
are built to defeat the TLB (50-100% of references walk), the tree-like trace mostly hits, and
long same-page runs (the sequential sweep) cost one record per page.

The slowest rows are traces where nearly every reference is a last-level miss to a page chosen
at random from a 1GiB footprint (Zipf): each reference searches a 4-way level-1 set, a 12-way
STLB set and an 8-way page-walk-cache set, and shifts each one's recency order. The engine is
bound by instruction throughput there; with AVX2 each search and shift is a few vector
instructions instead of a loop over the ways, which is the difference between the two rate
columns. On these short traces a second cost is the OS model's per-page work: every first touch
is a fault served by the buddy allocator and the page table, and the process's exit frees every
page ("faults per 1000 refs"); the 4x longer Zipf row shows how much of the short run that is,
and the last line under "Against the targets" splits the Zipf time into that fixed part and a
per-reference part.
Base-pages runs use an exact single-pass lookup-and-fill (docs/MODEL.md, "Fast path");
superpage policies take the general path, which probes and fills separately (scalar code).

These VMs are noisy: the same run can vary by +-30% from one minute to the next, so compare the
ratios within one report.
"""
    # Replace only this report, the file's head: keep everything from the first section of
    # `bench --capture`, `--against`, `--pressure` or `--pressure --against` on, with the notes
    # written between those sections.
    from . import bench_builds, bench_capture, bench_pressure

    kept = ""
    if os.path.exists(a.out):
        with open(a.out) as f:
            old = f.read()
        starts = [old.index(m) for m in (bench_capture.START, bench_builds.START, bench_pressure.START, bench_pressure.AGAINST_START) if m in old]
        if starts:
            kept = "\n" + old[min(starts):]
    from .output import write_text

    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    write_text(a.out, header + kept)
