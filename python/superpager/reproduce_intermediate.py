"""`superpager reproduce intermediate`: Solomon's intermediate page sizes (AMD PTE coalescing, the
ARM contiguous bit), each claim of the thesis's abstract beside ours.

Only the abstract survives (the thesis was embargoed), so the claims are qualitative: the Linux
and FreeBSD allocators give too little contiguity for coalescing, and reservation-based
allocation gives much more; on ARM, FreeBSD with 64KB contiguous-bit pages beside 2MB ones
speeds up exec and compile workloads, more so with a more aggressive promotion policy. The
sections: the coalescing opportunity under each allocator, on fresh and on aged memory; what
coalescing does to `zen3`'s TLB misses; 64KB + 2MB against 2MB alone and base pages on
`neoverse-n1`; the `promote_at` sweep with its bloat; and 64KB demotions by reason
(docs/INTERMEDIATE.md).
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from . import api
from . import workloads as W
from .reproduce import pool, trace_for
from .reproduce_trident import verdict_lines

MACHINE = "zen3"
MEMORY = "1GiB"
# (workload, size, quick size): small programs, whose heaps are where 4KB pages stay.
WORKLOADS = [
    ("compile", "8MiB", "2MiB"),
    ("sqlite3", "4MiB", None),
    ("python3", "8MiB", None),
    ("rbtree", "16MiB", "4MiB"),
    ("hashjoin", "64MiB", "16MiB"),
]
# The allocators: Linux's buddy allocator behind base pages, the same with THP and mTHP off,
# and reservations (FreeBSD's, as Navarro et al. built them).
NO_PROMOTION = "navarro:promote=false"
# FreeBSD reserves past the end of an anonymous object, speculating that it grows
# (vm_reserv_alloc_page, sys/vm/vm_reserv.c), where the paper caps the extent at the object's
# size: small heaps and mappings get reservations only this way.
SPECULATE = "navarro:speculate=true"
SPECULATE_NO_PROMOTION = "navarro:speculate=true,promote=false"
MTHP = "linux-thp:enabled=never,hugepages-16kB=always,hugepages-32kB=always,hugepages-64kB=always"
# FreeBSD's later arm64 reservations have a 64KB level inside the 2MB one (VM_NRESERVLEVEL == 2,
# sys/arm64/include/vmparam.h), so small mappings, which a 2MB reservation cannot cover, are
# reserved too. `zen3` has no 64KB page for the level to promote to, so these two run on
# `neoverse-n1`: same memory, same base page and the same allocator; the contiguity measured
# reads page tables only, so it does not depend on the TLBs.
LEVEL64 = "navarro:sizes=64KiB+2MiB,promote=false"
LEVEL64_MACHINE = "neoverse-n1"
ALLOCATORS = [("buddy (`base`)", "base"), ("buddy (`linux-thp:enabled=never`)", "linux-thp:enabled=never"),
              ("buddy, mTHP folios of 64/32/16KB (`linux-thp`, mTHP on)", MTHP),
              ("reservations (`navarro`)", "navarro"),
              ("reservations, no promotion (`navarro:promote=false`)", NO_PROMOTION),
              (f"reservations past the object's end, as FreeBSD makes them (`{SPECULATE}`)", SPECULATE),
              (f"reservations past the object's end, no promotion (`{SPECULATE_NO_PROMOTION}`)", SPECULATE_NO_PROMOTION),
              ("reservations with a 64KB level (`navarro:sizes=64KiB+2MiB`, on `neoverse-n1`)", "navarro:sizes=64KiB+2MiB"),
              (f"reservations with a 64KB level, no promotion (`{LEVEL64}`, on `neoverse-n1`)", LEVEL64)]
GROUPS = ["16KiB", "32KiB", "64KiB"]


def scenario(d: str, name: str, trace: str, aged: bool) -> str:
    """One process on `MEMORY`; aged: Navarro's web-server prelude first (files read and
    cached until memory is full, the page cache scattered over it)."""
    lines = [f'memory = "{MEMORY}"', "seed = 1", f'machine = "{MACHINE}"', "sample_every = 0"]
    if aged:
        lines += ["[[prelude]]", 'kind = "webserver"', ""]
    lines += ["[[process]]", f'trace = "{trace}"']
    p = os.path.join(d, f"{name}-{'aged' if aged else 'fresh'}.toml")
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")
    return p


def share(r: api.Result, group: str) -> float:
    n = r["contiguity.base_pages"]
    return r.counters.get(f"contiguity.grouped.{group}", 0) / n if n else 0.0


def contiguous_share(r: api.Result) -> float:
    """Of the resident memory at exit, the share in physically contiguous units of 64KB or more:
    base pages in aligned contiguous groups of 16, and every page a superpage maps (a 2MB page
    is contiguity too, which `share` leaves out)."""
    total = r["footprint.bytes"]
    big = sum(v for k, v in r.counters.items()
              if k.startswith("footprint.bytes.") and W.parse_size(k.removeprefix("footprint.bytes.")) >= 64 << 10)
    return (big + r.counters.get("contiguity.grouped.64KiB", 0) * 4096) / total if total else 0.0


def workload_traces(quick: bool, progress: Callable[[str], None]) -> list[tuple[str, str, str]]:
    """(workload, size, trace) of each workload this run measures: quick leaves out those
    without a quick size, and any this machine cannot capture."""
    out = []
    for name, size, qsize in WORKLOADS:
        if W.available(W.get(name)) or (quick and qsize is None):
            continue
        sz = (qsize or size) if quick else size
        out.append((name, sz, trace_for(name, sz, progress)))
    return out


def coalescible(quick: bool, d: str, progress: Callable[[str], None]) -> list[str]:
    out = ["### The coalescing opportunity under each allocator (Phase 1)", "",
           "Thesis (abstract): \"the contiguity generated by the Linux and FreeBSD physical memory allocators is "
           "insufficient to enable much coalescing\", and \"reservation-based allocation is a good technique for "
           "generating additional contiguity\". Ours: of the resident 4KB mappings at exit, the share in aligned, "
           "physically contiguous groups of 4, 8 and 16 pages with one protection (`contiguity.grouped.<size>` "
           f"over `contiguity.base_pages`), on `{MACHINE}` with {MEMORY}, on fresh memory and after Navarro's "
           "web-server prelude (aged). The contiguity reservations create is measured with promotion off "
           "(`navarro:promote=false`: pages are placed at their offsets in reservations and stay 4KB, as on a machine "
           "that relies on coalescing); under `navarro` itself, what stays 4KB is what reservations did not turn into "
           "2MB pages: stacks, small mappings, partly touched reservations. Navarro's preferred size caps a reservation "
           "at the object's size, so a 2MB reservation covers only mappings of 2MB or more and small programs, whose "
           "mappings are smaller, get none. FreeBSD drops that cap for anonymous memory, speculating that the object "
           f"grows (`{SPECULATE}`: the whole aligned 2MB extent around the fault is reserved, and its free frames are "
           "preempted under pressure like any reservation's). FreeBSD's arm64 reservations also have a "
           "64KB level inside the 2MB one, measured here on `neoverse-n1` (the contiguity read from the page tables "
           "does not depend on the TLBs). The last column counts what promotion made too: of the resident memory, "
           "the share in contiguous units of 64KB or more (groups of 16 base pages, or superpages).", "",
           "| workload | memory | allocator | base pages | in 16KB groups | in 32KB groups | in 64KB groups | resident memory in ≥ 64KB contiguous units |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    verdicts = []
    # Every run is queued before any is awaited: the pool takes them in order, beside the other
    # papers' runs in `reproduce all`.
    submitted = []
    for name, sz, t in workload_traces(quick, progress):
        for aged in (False, True):
            sc = scenario(d, name, t, aged)
            submitted.append((name, sz, aged, {pol: pool().submit_scenario(sc, policy=pol, machine=LEVEL64_MACHINE if "64KiB" in pol else MACHINE)
                                               for _label, pol in ALLOCATORS}))
    for name, sz, aged, pending in submitted:
        got = {}
        for label, pol in ALLOCATORS:
            progress(f"coalescing opportunity: {name} at {sz}, {'aged' if aged else 'fresh'}, {pol}")
            r = pending[pol].resolve()
            got[pol] = r
            out.append(f"| {name} ({sz}) | {'aged' if aged else 'fresh'} | {label} | {r['contiguity.base_pages']:,} | "
                       + " | ".join(f"{share(r, g):.1%}" for g in GROUPS) + f" | {contiguous_share(r):.1%} |")
        when = "aged" if aged else "fresh"
        b = share(got["base"], "64KiB")
        for pol, what in ((NO_PROMOTION, "reservations (2MB level, no promotion)"),
                          (SPECULATE_NO_PROMOTION, "reservations past the object's end (FreeBSD, no promotion)"),
                          (LEVEL64, "reservations with a 64KB level (no promotion)")):
            n = share(got[pol], "64KiB")
            verdicts.append((f"{name}, {when}: {what} put more base pages in 64KB groups than the buddy allocator",
                             n > b, f"{n:.1%} against {b:.1%}"))
        bc = contiguous_share(got["base"])
        for pol, what in (("navarro", "`navarro`"), (SPECULATE, f"`{SPECULATE}`"),
                          ("navarro:sizes=64KiB+2MiB", "`navarro` with a 64KB level")):
            n = contiguous_share(got[pol])
            verdicts.append((f"{name}, {when}: {what} puts more resident memory in ≥ 64KB contiguous units than the buddy allocator",
                             n > bc, f"{n:.1%} against {bc:.1%}"))
    out.append("")
    return out + verdict_lines(verdicts)


MISS_POLICIES = ["base", MTHP, "navarro", NO_PROMOTION, SPECULATE_NO_PROMOTION]


def coalescing_submit(quick: bool, progress: Callable[[str], None]) -> list[tuple[str, str, Any]]:
    """The coalescing-on-and-off runs, queued on the pool: (workload, size, pending results)."""
    out = []
    for name, sz, t in workload_traces(quick, progress):
        out.append((name, sz, pool().submit(t, [(m, p) for p in MISS_POLICIES for m in (f"{MACHINE}+nocoalesce", MACHINE)], MEMORY, 0)))
    return out


def coalescing_misses(submitted: list[tuple[str, str, Any]], progress: Callable[[str], None]) -> list[str]:
    out = [f"### `{MACHINE}`: TLB misses with PTE coalescing on and off", "",
           "Ours: L2 data TLB misses (`tlb.L2d.misses`) and walks on `zen3` and `zen3+nocoalesce`, fresh memory, "
           "under the buddy allocator (`base`), with mTHP folios (`linux-thp` with every mTHP size up to 64KB "
           "`always` and the PMD size `never`) and reservations (`navarro`, and with promotion off, within the object and, as "
           f"FreeBSD reserves, past its end: `{SPECULATE_NO_PROMOTION}`); and the share of all TLB hits that "
           "coalesced entries served (`coalesce.hits`).", "",
           "| workload | allocator | L2 misses, off | L2 misses, on | fewer | walks, off | walks, on | hits served by coalesced entries |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    labels = {MTHP: "mTHP 64/32/16KB", NO_PROMOTION: "navarro, no promotion",
              SPECULATE_NO_PROMOTION: "navarro past the object's end, no promotion"}
    for name, sz, pending in submitted:
        progress(f"coalescing on and off: {name} at {sz}")
        rs = pending.result()
        for i, p in enumerate(MISS_POLICIES):
            off, on = rs[2 * i], rs[2 * i + 1]
            hits = sum(v for k, v in on.counters.items() if k.startswith("tlb.") and k.endswith(".hits") and k.count(".") == 2)
            lo, ln = off["tlb.L2d.misses"], on["tlb.L2d.misses"]
            fewer = f"{1 - ln / lo:.1%}" if lo else "-"
            out.append(f"| {name} ({sz}) | {labels.get(p, p)} | {lo:,} | {ln:,} | {fewer} | {off['walks']:,} | {on['walks']:,} | "
                       f"{on['coalesce.hits'] / hits if hits else 0:.2%} |")
    return out + [""]


ARM = "neoverse-n1"
ARM_MEMORY = "4GiB"
# The thesis's system is FreeBSD: a fault that reads a file page from disk reads ahead
# (VM_FAULT_READ_AHEAD_INIT = 15 pages, sys/vm/vm_map.h), and a write to a copy-on-write
# superpage demotes the writer's mapping (pmap); anonymous memory is reserved past the object's
# end (SPECULATE above).
FREEBSD = "readahead=15,cow=split,speculate=true"
ARM_CONFIGS = [("base pages", "base"), ("2MB only", f"navarro:sizes=2MiB,{FREEBSD}"),
               ("64KB + 2MB", f"navarro:sizes=64KiB+2MiB,{FREEBSD}")]
# The thesis's workloads of many short processes, captured with instruction fetches:
# (workload, size, quick size, thesis's speed-up for 64KB + 2MB, and with the more aggressive
# policy). Quick `cc` has a quarter of the shared headers: 690M records against 1,053M, the same
# direction (64KB + 2MB +1.06% against 2MB alone +0.07%; promote_at=1 +4.94%, measured).
RUNS = [("exec", "4MiB", None, "13.83%", None), ("cc", "256KiB", "64KiB", "11.18%", "15.67%")]
PROMOTE_AT = [16, 8, 4, 2, 1]


def cpu_cycles(r: api.Result) -> int:
    """Simulated cycles without disk I/O: the benchmarks run warm, with their files cached."""
    return r["cycles.total"] - r["cycles.io"]


def arm_row(label: str, r: api.Result, base: api.Result) -> str:
    speed = cpu_cycles(base) / cpu_cycles(r) - 1
    return (f"| {label} | {r['tlb.L1i.misses']:,} | {r['tlb.L1d.misses']:,} | {r['tlb.L2.misses']:,} | {r['faults']:,} | "
            f"{cpu_cycles(r) / 1e6:,.1f}M | {speed:+.2%} |")


def arm_submit(quick: bool, progress: Callable[[str], None]) -> dict[tuple[str, str], Any]:
    """Phase 2's runs (the three page-size configurations and the promote_at sweep, per
    workload) submitted to the pool together, before any is awaited: `cc`'s trace is the
    longest here, and its two sets of runs then share the workers."""
    out: dict[tuple[str, str], Any] = {}
    for name, size, qsize, _thesis, _aggressive in RUNS:
        if W.available(W.get(name)):
            continue
        t = trace_for(name, (qsize or size) if quick else size, progress, fetches=True)
        out[name, "sizes"] = pool().submit(t, [(ARM, p) for _, p in ARM_CONFIGS], ARM_MEMORY, 0)
        pols = ["base"] + [f"navarro:sizes=64KiB+2MiB,{FREEBSD},promote_at={k}" for k in PROMOTE_AT]
        out[name, "promote_at"] = pool().submit(t, [(ARM, p) for p in pols], ARM_MEMORY, 0, bloat=True)
    return out


def arm_sizes(quick: bool, progress: Callable[[str], None], submitted: dict[tuple[str, str], Any]) -> list[str]:
    out = [f"### `{ARM}`: 64KB contiguous-bit pages beside 2MB (Phase 2)", "",
           "Thesis (abstract): FreeBSD managing 64KB (contiguous bit) and 2MB superpages together, for file-backed and "
           "anonymous memory, speeds up an exec() microbenchmark by 13.83% and a compilation workload by 11.18% on ARM. "
           f"Ours: `{ARM}` with {ARM_MEMORY}; base pages (`base`), 2MB only and 64KB + 2MB (two-level reservations, "
           f"`navarro:sizes=...,{FREEBSD}`). `exec` is {W.EXEC_RUNS} short runs of one small dynamically linked program, "
           f"`cc` is {W.CC_UNITS} cc1 processes over sources that include the same headers; both captured with instruction "
           "fetches, one process at a time, and joined (docs/INTERMEDIATE.md). Time is simulated cycles without disk I/O "
           "(the benchmarks run warm); speed-up is against base pages.", ""]
    verdicts = []
    for name, size, qsize, thesis, _ in RUNS:
        size = (qsize or size) if quick else size
        why = W.available(W.get(name))
        if why:
            out += [f"{name}: not run ({why}).", ""]
            continue
        progress(f"{ARM}: {name}, base pages / 2MB only / 64KB + 2MB")
        rs = submitted[name, "sizes"].result()
        out += [f"**{name}** ({size}; thesis: {thesis} for 64KB + 2MB)", "",
                "| pages | L1 iTLB misses | L1 dTLB misses | L2 TLB misses | faults | cycles | speed-up |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        out += [arm_row(label, r, rs[0]) for (label, _), r in zip(ARM_CONFIGS, rs)]
        out.append("")
        two, both = rs[1], rs[2]
        verdicts.append((f"{name}: 64KB + 2MB is faster than 2MB alone", cpu_cycles(both) < cpu_cycles(two),
                         f"{cpu_cycles(two) / cpu_cycles(both) - 1:+.2%} ({cpu_cycles(both) / 1e6:,.1f}M against {cpu_cycles(two) / 1e6:,.1f}M cycles)"))
        verdicts.append((f"{name}: 64KB + 2MB has fewer instruction TLB misses than 2MB alone",
                         both["tlb.L1i.misses"] < two["tlb.L1i.misses"],
                         f"{both['tlb.L1i.misses']:,} against {two['tlb.L1i.misses']:,}"))
    return out + verdict_lines(verdicts)


def promote_at_sweep(quick: bool, progress: Callable[[str], None], submitted: dict[tuple[str, str], Any]) -> list[str]:
    out = ["### The promotion threshold for 64KB pages (`promote_at`)", "",
           "Thesis (abstract): with \"the right\" (more aggressive) promotion policy the compilation workload's "
           "speed-up grows from 11.18% to 15.67%. Ours: `navarro:sizes=64KiB+2MiB,...,promote_at=K` promotes a 64KB "
           "page once K of its 16 pages are touched, zeroing the rest; bloat is the bytes of resident superpages never "
           "touched at exit (`bloat.64KiB` + `bloat.2MiB`). File superpages mapped whole at a fault count their untouched "
           "pages too, though those were already in the page cache: at full population that is all of the bloat.", ""]
    verdicts = []
    for name, size, qsize, _, aggressive in RUNS:
        size = (qsize or size) if quick else size
        if W.available(W.get(name)):
            continue
        progress(f"{ARM}: {name}, promote_at sweep")
        rs = submitted[name, "promote_at"].result()
        out += [f"**{name}** ({size}" + (f"; thesis: {aggressive} with the more aggressive policy" if aggressive else "") + ")", "",
                "| promote_at | L1 iTLB misses | L1 dTLB misses | L2 TLB misses | faults | cycles | speed-up | bloat |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for k, r in zip(PROMOTE_AT, rs[1:]):
            bloat = r.counters.get("bloat.64KiB", 0) + r.counters.get("bloat.2MiB", 0)
            out.append(arm_row(f"{k}{' (full population)' if k == 16 else ''}", r, rs[0]) + f" {bloat / 2**20:,.2f}MiB |")
        out.append("")
        if aggressive:
            full = cpu_cycles(rs[1])
            best_k, best = min(((k, cpu_cycles(r)) for k, r in zip(PROMOTE_AT[1:], rs[2:])), key=lambda x: x[1])
            verdicts.append((f"{name}: a more aggressive threshold is faster than full population",
                             best < full, f"promote_at={best_k}: {full / best - 1:+.2%} against promote_at=16"))
    return out + verdict_lines(verdicts)


DEMOTE_REASONS = ["protection", "partial_unmap", "cow", "dirty", "reclaim"]


def demotions(progress: Callable[[str], None]) -> list[str]:
    name, size = "protfork", "64MiB"
    out = ["### Contiguous-bit demotions by reason", "",
           "Any change to one of a 64KB page's 16 PTEs breaks it (break-before-make, with a TLB shootdown). Ours: "
           f"`{name}` ({size} heap, a 16MiB shared file, 4 forked writers; docs/INTERMEDIATE.md) on `{ARM}` under "
           f"`navarro:sizes=64KiB+2MiB,{FREEBSD}`, with memory to spare and with 64MiB and 1GiB of swap (reclaim), "
           "counting `demote.<reason>.<size>`.", "",
           "| memory | size | " + " | ".join(DEMOTE_REASONS) + " |", "|---|---|" + "---:|" * len(DEMOTE_REASONS)]
    if W.available(W.get(name)):
        return out[:2] + [f"not run: {W.available(W.get(name))}", ""]
    t = trace_for(name, size, progress)
    pol = f"navarro:sizes=64KiB+2MiB,{FREEBSD}"
    seen = set()
    runs = [(mem, swap, pool().submit(t, [(ARM, pol)], mem, 0, swap=swap)) for mem, swap in [(ARM_MEMORY, "0"), ("64MiB", "1GiB")]]
    for mem, swap, pending in runs:
        progress(f"{ARM}: {name} demotions, {mem}")
        r = pending.result()[0]
        for sz in ("64KiB", "2MiB"):
            got = [r.counters.get(f"demote.{why}.{sz}", 0) for why in DEMOTE_REASONS]
            seen |= {why for why, n in zip(DEMOTE_REASONS, got) if n and sz == "64KiB"}
            out.append(f"| {mem}{' + swap' if swap != '0' else ''} | {sz} | " + " | ".join(f"{n:,}" for n in got) + " |")
    out.append("")
    missing = [w for w in DEMOTE_REASONS if w not in seen]
    return out + verdict_lines([("every reason demotes 64KB pages on this workload", not missing,
                                 "all five" if not missing else "none for " + ", ".join(missing))])


def intermediate(quick: bool = False, progress: Callable[[str], None] = lambda m: None) -> str:
    out = ["## Solomon, intermediate page sizes (thesis abstract)", "", (__doc__ or "").split("\n\n", 1)[1].strip(), ""]
    # Everything is queued before anything is awaited, the longest runs (Phase 2's `cc`) first,
    # so the pool never waits on this paper's order.
    phase2 = arm_submit(quick, progress)
    misses = coalescing_submit(quick, progress)
    with tempfile.TemporaryDirectory(prefix="superpager-intermediate-") as d:
        out += coalescible(quick, d, progress)
    out += coalescing_misses(misses, progress)
    out += arm_sizes(quick, progress, phase2)
    out += promote_at_sweep(quick, progress, phase2)
    out += demotions(progress)
    return "\n".join(out)
