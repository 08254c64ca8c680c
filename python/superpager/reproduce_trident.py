"""`superpager reproduce trident`: Ram, Panwar and Basu's Trident (1GB, 2MB and 4KB pages;
smart compaction; Trident-pv) on workloads shaped like its Table 2, each claim beside ours.

Scale. The paper's machine had 192GB per socket and workloads of 32 to 137GB running for
minutes; here memory and footprints are about 8 times smaller (quick: 16 times) and the traces
run for simulated seconds. khugepaged's periods are therefore compressed 1000 times (10 ms
instead of 10 s, for Linux's and Trident's scanner alike, and 1 ms instead of 1 s for the capped
scanner's least sleep), so that a run has about as many scanner passes as the paper's
minutes-long runs had. With 100 ms, the scanner of a fragmented run stops at a failed 2MB
collapse in the unaligned head of a VMA every pass, and never reaches the 1GB ranges before the
program ends. Every other setting is the paper's or its artifact's.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from . import api
from . import workloads as W
from .reproduce import trace_for

MACHINE = "skylake"
GHZ = 2.5  # skylake's clock_ghz (crates/core/src/machines/skylake.toml), to turn cycles into time
GiB = 1 << 30

# khugepaged every 10 ms (the paper's 10 s, compressed 1000x); Trident's 8GiB per pass.
TRIDENT_DAEMON = "scan_sleep_ms=10,alloc_sleep_ms=10"
# Linux's THP with the same compressed periods and Trident's scan rate, for comparison.
THP = "linux-thp:enabled=always,scan_sleep_millisecs=10,alloc_sleep_millisecs=10,pages_to_scan=2097152"
# Trident's kernel's 1GB pageblocks (not the policy's default: docs/TRIDENT.md).
PAGEBLOCK_1G = ",pageblock_1g=true"
# Table 3's three configurations.
MODES = [
    ("PF only", f"trident:khugepaged=0,{TRIDENT_DAEMON}"),
    ("normal compaction", f"trident:smart=false,{TRIDENT_DAEMON}"),
    ("smart compaction", f"trident:{TRIDENT_DAEMON}"),
]

# (workload, size, quick size, extra arguments, Table 2 row, how it allocates). Sizes keep the
# paper's proportions of memory where the traces stay affordable: XSBench about 60% of memory
# (117 of 192GB). GUPS is half of memory (the paper's was a sixth): a table loses the 1GB region
# at each unaligned end of its VMA, so it must span well over ten of them before 90% can be 1GB
# pages, as the paper's 32GB did; a quarter of HPCC's updates keeps its trace short. The capture
# runs the program for real, so no footprint may exceed this machine's 24GiB.
WORKLOADS = [
    ("xsbench", "20GiB", "10GiB", (), "XSBench (117GB)", "pre-allocating"),
    ("gups", "16GiB", "8GiB", ("0.25",), "GUPS (32GB)", "pre-allocating"),
    # Quick: the walk cycles' 128MiB trace; at either size no 1GB page fits (its claims are
    # not testable here), and the 512MiB runs were a sixth of `reproduce all --quick`'s work.
    ("graph500", "512MiB", "128MiB", (), "Graph500 (63.5GB)", "pre-allocating"),
    ("kvstore", "4GiB", "2GiB", (), "Redis (43.6GB)", "incremental"),
    ("slabcache", "4GiB", "2GiB", (), "Memcached (79GB)", "incremental"),
]
MEMORY = {False: "32GiB", True: "16GiB"}
# Table 4 (% of 1GB allocation attempts that fail, fragmented): page fault, promotion.
TABLE4 = {"xsbench": (94, 32), "gups": (71, 0), "graph500": (91, 38), "kvstore": (None, 36), "slabcache": (43, 81)}
# Table 3 as printed (GB of 1GB / 2MB pages), for the rows we model: UF PF, UF normal, UF smart,
# F PF, F normal, F smart.
TABLE3: dict[str, tuple[float, list[tuple[float, float]]]] = {
    "xsbench": (117, [(114, 2.94), (116, 1.2), (116, 1.2), (6, 5.3), (79, 38.1), (80, 37.1)]),
    "gups": (32, [(31, 1), (31, 1), (31, 1), (9, 2.5), (31, 1), (31, 1)]),
    "graph500": (63.5, [(59, 4.01), (60, 3.35), (60, 3.35), (5, 5.8), (37, 24.2), (38, 23.6)]),
    "kvstore": (44, [(0, 0.5), (39, 3.4), (39, 3.4), (0, 0), (25, 10.3), (28, 14.3)]),
    "slabcache": (137, [(16, 121), (121, 16), (121, 16), (9, 60), (12, 55), (16, 60)]),
}


def scenario_file(d: str, name: str, memory: str, trace: str | None, fragmented: bool, extra: str = "", wired: bool = True) -> str:
    """A scenario TOML: `memory`, Trident's fragmentation recipe when `fragmented`, one process."""
    lines = [f'memory = "{memory}"', "seed = 1", f'machine = "{MACHINE}"', "sample_every = 0"]
    if fragmented:
        # fragment.py: two files of half of memory each read whole, then small random reads
        # (one per 8 frames), leaving the page cache scattered over every 1GB region; and a
        # sprinkle of unmovable kernel pages (64) in the lowest 2GiB, where the kernel's own
        # allocations sit: those two 1GB regions can never be freed. The sprinkle comes after
        # the page cache, in the frames it left free, as the kernel's allocations made while
        # the files are read (inodes, page-cache tree nodes) do. (Placed first, before any page
        # cache, it costs the incremental workloads their 1GB pages: docs/TRIDENT.md.)
        lines += ["[[prelude]]", 'kind = "trident"']
        if wired:
            lines += ["", "[[prelude]]", 'kind = "wired"', "count = 64", 'below = "2GiB"']
    lines += ["", "[[process]]", f'trace = "{trace}"' if trace else extra]
    p = os.path.join(d, f"{name}.toml")
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")
    return p


def run_scenario(path: str, policy: str, machine: str = MACHINE, bloat: bool = False) -> api.Result:
    """A scenario run, started on reproduce's pool: it is awaited where its result is first read,
    so the runs of a table go side by side."""
    from .reproduce import pool

    return pool().submit_scenario(path, policy=policy, machine=machine, bloat=bloat)  # type: ignore[return-value]


def gib(b: float) -> str:
    return f"{b / GiB:.2f}"


def share(r: api.Result, size: str) -> float:
    total = r["footprint.bytes"]
    return r.counters.get(f"footprint.bytes.{size}", 0) / total if total else 0.0


def fail_pct(fail: int, ok: int) -> float | None:
    return 100 * fail / (fail + ok) if fail + ok else None


def fault_fail(r: api.Result) -> float | None:
    return fail_pct(r["policy.fault.1g_fallback"], r["policy.fault.1g_alloc"])


def promo_fail(r: api.Result) -> float | None:
    return fail_pct(r["policy.khugepaged.scan_1g.alloc_huge_page_fail"], r["policy.khugepaged.scan_1g.succeed"])


def pct(x: float | None) -> str:
    return "NA" if x is None else f"{x:.0f}%"


def table3(quick: bool, d: str, progress: Callable[[str], None]) -> tuple[Callable[[], list[str]], dict[str, Any]]:
    """Table 3's runs, queued; returns what formats them (awaiting them) and the runs."""
    memory = MEMORY[quick]
    runs: dict[str, Any] = {}
    for name, size, qsize, args, _row, _how in WORKLOADS:
        why = W.available(W.get(name))
        if why:
            runs[name] = why
            continue
        t = trace_for(name, qsize if quick else size, progress, args)
        rs = {}
        for frag in (False, True):
            sc = scenario_file(d, f"{name}-{'f' if frag else 'uf'}", memory, t, frag)
            for label, pol in MODES:
                progress(f"{name}: {'fragmented' if frag else 'un-fragmented'}, {label}")
                rs[(frag, label)] = run_scenario(sc, pol)
        runs[name] = rs
    return lambda: table3_lines(memory, runs), runs


def table3_lines(memory: str, runs: dict[str, Any]) -> list[str]:
    out = [f"### Table 3: footprint mapped by 1GB and 2MB pages (`{MACHINE}`, {memory} of memory)", "",
           "Paper: un-fragmented, the fault handler alone maps most of the pre-allocating workloads "
           "(XSBench, GUPS, Graph500) with 1GB pages (114 of 117GB, 31 of 32, 59 of 63.5); the incremental "
           "ones (Redis, Memcached) get almost none at fault and most from khugepaged (Redis: 0, then 39 of "
           "44GB). Fragmented, fault-time 1GB mostly fails, and promotion with compaction recovers much of "
           "it; smart compaction gives at least as many 1GB pages as normal compaction.", "",
           "Ours: GiB of the footprint (at exit) mapped by 1GB / 2MB pages; the paper's GB in brackets. "
           "UF: un-fragmented; F: after Trident's fragmentation recipe.", "",
           "| workload (models) | footprint | | PF only | normal compaction | smart compaction |",
           "|---|---:|---|---|---|---|"]
    for name, _size, _qsize, _args, row, how in WORKLOADS:
        rs = runs[name]
        if isinstance(rs, str):
            out.append(f"| {name} ({row}) | - | | not run: {rs} | | |")
            continue
        paper = TABLE3[name][1]
        for fi, frag in enumerate((False, True)):
            cells = []
            for mi, (label, _pol) in enumerate(MODES):
                r = rs[(frag, label)]
                p1, p2 = paper[fi * 3 + mi]
                cells.append(f"{gib(r.counters.get('footprint.bytes.1GiB', 0))} / {gib(r.counters.get('footprint.bytes.2MiB', 0))} "
                             f"({share(r, '1GiB'):.0%} 1GB) [{p1} / {p2}]")
            fp = rs[(frag, MODES[0][0])]["footprint.bytes"]
            out.append(f"| {name if fi == 0 else ''} ({row}, {how}) | {gib(fp)} | {'F' if frag else 'UF'} | " + " | ".join(cells) + " |")
    out.append("")
    # The shape checks.
    pre = [n for n, *_r, how in WORKLOADS if how == "pre-allocating" and not isinstance(runs[n], str)]
    inc = [n for n, *_r, how in WORKLOADS if how == "incremental" and not isinstance(runs[n], str)]
    too_small = {n for n in pre + inc if holds_no_1g(runs[n][(False, "PF only")])}

    def small(n: str) -> str:
        return no_1g_why(runs[n][(False, "PF only")])

    verdicts: list[tuple[str, bool | None, str]] = []
    for n in pre:
        s = share(runs[n][(False, "PF only")], "1GiB")
        verdicts.append((f"un-fragmented, {n} (pre-allocating) gets ≥ 90% of its footprint as 1GB at fault",
                         None if n in too_small else s >= 0.9, small(n) if n in too_small else f"{s:.1%}"))
    for n in inc:
        pf = share(runs[n][(False, "PF only")], "1GiB")
        sm = share(runs[n][(False, "smart compaction")], "1GiB")
        verdicts.append((f"un-fragmented, {n} (incremental) gets almost none at fault (≤ 10%) and most (≥ 50%) once the scanner runs",
                         pf <= 0.10 and sm >= 0.5, f"{pf:.1%} at fault, {sm:.1%} with the scanner"))
    for n in pre + inc:
        f = fault_fail(runs[n][(True, "PF only")])
        uf = share(runs[n][(False, "smart compaction")], "1GiB")
        fs = share(runs[n][(True, "smart compaction")], "1GiB")
        fpf = share(runs[n][(True, "PF only")], "1GiB")
        if f is not None:
            verdicts.append((f"fragmented, {n}: fault-time 1GB mostly fails (> 50% of attempts)", f > 50, f"{f:.0f}% failed"))
        if n in too_small:
            verdicts.append((f"fragmented, {n}: the scanner with compaction recovers most of the un-fragmented 1GB share; "
                             "smart compaction gives at least as many 1GB pages as normal", None, small(n)))
            continue
        verdicts.append((f"fragmented, {n}: the scanner with compaction recovers most of the un-fragmented 1GB share (≥ 50% of it)",
                         uf > 0 and fs >= 0.5 * uf and fs > fpf, f"{fpf:.1%} at fault → {fs:.1%} (un-fragmented {uf:.1%})"))
        nf = share(runs[n][(True, "normal compaction")], "1GiB")
        verdicts.append((f"fragmented, {n}: smart compaction gives at least as many 1GB pages as normal", fs >= nf, f"{fs:.1%} against {nf:.1%}"))
    out += verdict_lines(verdicts)
    return out


def verdict(ok: bool | None) -> str:
    """A claim's verdict; None: the claim cannot be tested at our scale (the row says why)."""
    return "not testable here" if ok is None else "holds" if ok else "DOES NOT HOLD"


def verdict_lines(vs: Sequence[tuple[str, bool | None, str]]) -> list[str]:
    out = ["| claim | ours | verdict |", "|---|---|---|"]
    for claim, ok, what in vs:
        out.append(f"| {claim} | {what} | {verdict(ok)} |")
    return out + [""]


def holds_no_1g(r: api.Result) -> bool:
    """Whether a run's footprint is too small to hold a single 1GB page anywhere: then no
    claim about its share of 1GB pages can be tested."""
    return r["footprint.bytes"] < GiB


def no_1g_why(r: api.Result) -> str:
    """What a claim `holds_no_1g` makes untestable says instead of a figure."""
    return f"footprint {gib(r['footprint.bytes'])} GiB: no 1GB page fits"


def table4(runs: dict[str, Any]) -> list[str]:
    out = ["### Table 4: 1GB allocation attempts that fail, fragmented (`trident`)", "",
           "Paper: at fault 43-94% for the workloads that try (Canneal 12%); NA where no 1GB-mappable range "
           "exists at fault; in promotion 0-92%. Ours: `policy.fault.1g_fallback` against `1g_alloc`, and "
           "khugepaged's 1GB collapses that found no free 1GB block even after compaction "
           "(`policy.khugepaged.scan_1g.alloc_huge_page_fail`) against those that succeeded.", "",
           "| workload | page fault, paper | ours | promotion, paper | ours |", "|---|---:|---:|---:|---:|"]
    for name, *_r in WORKLOADS:
        rs = runs.get(name)
        if not isinstance(rs, dict):
            continue
        r = rs[(True, "smart compaction")]
        pf, pp = TABLE4[name]
        out.append(f"| {name} | {pct(pf)} | {pct(fault_fail(r))} | {pct(pp)} | {pct(promo_fail(r))} |")
    return out + [""]


def compaction_rows(name: str, n: api.Result, s: api.Result) -> str:
    nb, sb = n["compact.bytes_migrated"], s["compact.bytes_migrated"]
    nr, sr = n["policy.khugepaged.scan_1g.succeed"], s["policy.khugepaged.scan_1g.succeed"]

    def per(b: int, k: int) -> float:
        return b / k if k else (float("inf") if b else 0.0)

    pn, ps = per(nb, nr), per(sb, sr)
    ok: bool | None
    if holds_no_1g(n):
        ratio, ok = no_1g_why(n), None
    elif pn == 0 and ps == 0:
        ratio, ok = "- (neither copied)", sr >= nr
    elif pn == float("inf"):
        ratio, ok = f"normal made no 1GB page for {nb / 2**20:,.0f} MiB", sr > 0
    else:
        ratio = f"{100 * (1 - ps / pn):.0f}% less" if ps <= pn else f"{100 * (ps / pn - 1):.0f}% MORE"
        ok = ps <= 0.5 * pn and sr >= nr

    def fmt(x: float) -> str:
        return "∞" if x == float("inf") else f"{x / 2**20:,.0f} MiB"

    return (f"| {name} | {nb / 2**20:,.0f} MiB | {nr} | {fmt(pn)} | {sb / 2**20:,.0f} MiB | {sr} | {fmt(ps)} | {ratio} | "
            f"{verdict(ok)} |")


COMPACTION_HEAD = ["| workload | normal: bytes copied | 1GB promotions | per promotion | smart: bytes copied | 1GB promotions | "
                   "per promotion | copied per 1GB page, smart against normal | verdict (≥ 50% less per page, never fewer pages) |",
                   "|---|---:|---:|---:|---:|---:|---:|---|---|"]


def compaction_work(runs: dict[str, Any], quick: bool, d: str, progress: Callable[[str], None]) -> Callable[[], list[str]]:
    """Figure 9's runs without the unmovable sprinkle, queued; returns what formats the figure."""
    # Without the sprinkle, with Linux's 2MB pageblocks and with Trident's 1GB ones (its kernel
    # fixes pageblock_order at 18): all four runs per workload submitted before any is read.
    pairs = []
    for name, size, qsize, args, _row, _how in WORKLOADS:
        if name not in ("gups", "xsbench") or not isinstance(runs.get(name), dict):
            continue
        t = trace_for(name, qsize if quick else size, progress, args)
        sc = scenario_file(d, f"{name}-f-nowired", MEMORY[quick], t, True, wired=False)
        # Quick leaves out XSBench with 1GB pageblocks: under Linux's compaction it copies 23GB,
        # the longest run of `reproduce all --quick` (175 s of its 1,789 pooled seconds).
        extras = ("",) if quick and name == "xsbench" else ("", PAGEBLOCK_1G)
        pairs.append((name, [run_scenario(sc, MODES[k][1] + extra) for extra in extras for k in (1, 2)]))
    return lambda: compaction_lines(runs, quick, pairs, progress)


def compaction_lines(runs: dict[str, Any], quick: bool, pairs: list[tuple[str, list[Any]]], progress: Callable[[str], None]) -> list[str]:
    out = ["### Figure 9: compaction work, fragmented", "",
           "Paper: smart compaction copies fewer bytes than Linux's compaction, often less than half and up "
           "to 85% less; XSBench gains least, as it needs nearly all memory. Ours: bytes compaction copied "
           "(`compact.bytes_migrated`: migration by either compactor, for 2MB and 1GB requests) and the 1GB pages "
           "the scanner made (`policy.khugepaged.scan_1g.succeed`), under `trident:smart=false` (Linux's "
           "compaction for 1GB requests) and `trident` (smart compaction), in the fragmented runs of Table 3.", ""]
    out += COMPACTION_HEAD
    for name, *_r in WORKLOADS:
        rs = runs.get(name)
        if isinstance(rs, dict):
            out.append(compaction_rows(name, rs[(True, "normal compaction")], rs[(True, "smart compaction")]))
    out += ["", "Linux's compaction starts its migrate scanner at the bottom of memory, where the kernel's unmovable "
            "pages keep the first two 1GB regions from ever being freed; it spends its free pages there. The same "
            "comparison without the unmovable sprinkle (page cache only):", ""]
    progress("compaction work without unmovable pages")
    out += COMPACTION_HEAD
    out += [compaction_rows(name, rs[0], rs[1]) for name, rs in pairs]
    out += ["", "The same, with Trident's 1GB pageblocks (`trident:pageblock_1g=true`, its kernel's pageblock_order of "
            "18): unmovable allocations gather in whole 1GB regions and Linux's compaction skips them, so both "
            "compactors free regions and the bytes each copies per 1GB page compare directly. (With the unmovable "
            "sprinkle as well, free memory drains into the migrate scanner's own 1GB pageblock and neither gets "
            "past the 2MB collapses: docs/TRIDENT.md, \"1GB pageblocks\".)"
            + (" Quick: GUPS only (XSBench's run under Linux's compaction is the quick run's longest)." if quick else ""), ""]
    out += COMPACTION_HEAD
    out += [compaction_rows(name, rs[2], rs[3]) for name, rs in pairs if len(rs) == 4]
    return out + [""]


# Walk cycles (Figures 12 and 14's direction, and Trident-1G-only's loss): GUPS- and B-tree-like
# workloads, and Graph500 for the 1GB-unmappable hot region. (workload, size, quick size, args;
# a size of None: Table 3's.) Quick: btree and graph500 at an eighth and a quarter, the quick
# run's longest traces otherwise (842M and 790M records at 1GiB and 512MiB).
WALK_WORKLOADS = [("gups", "4GiB", "2GiB", ("0.25",)), ("btree", "2GiB", "256MiB", ()), ("graph500", None, "128MiB", ())]
WALK_POLICIES = [("4KB", "base"), ("THP", THP), ("Trident", f"trident:{TRIDENT_DAEMON}"),
                 ("Trident-1G-only", f"trident:sizes=1GiB,{TRIDENT_DAEMON}")]


def walk_cycles(quick: bool, progress: Callable[[str], None]) -> Callable[[], list[str]]:
    """The walk-cycle runs, queued; returns what formats their table."""
    sizes = {n: (s, q) for n, s, q, _a, _r, _h in WORKLOADS}
    machines = [MACHINE, f"{MACHINE}+nested"]
    out = ["### Walk cycles: 4KB, THP, Trident and Trident-1G-only, natively and nested", "",
           "Paper (Figures 11-16): Trident's walk cycles are lower than THP's, natively and under virtualization "
           "(the reductions themselves are lost from our copy); Trident-1G-only is worse than THP on Graph500 and "
           "SVM, whose hottest region is mappable by 2MB pages but not by 1GB ones. Ours: `cycles.walk` "
           f"(page-walk references at `{MACHINE}`'s cost), un-fragmented memory ({MEMORY[quick]}); nested: "
           f"`{MACHINE}+nested`, the host backing each guest page with a page of its size (24/15/8 references).", "",
           "| workload | machine | " + " | ".join(l for l, _ in WALK_POLICIES) + " | 4KB > THP > Trident |",
           "|---|---|" + "---:|" * len(WALK_POLICIES) + "---|"]
    verdicts: list[tuple[str, bool | None, str]] = []
    from .reproduce import pool

    submitted = {}
    for name, size, qsize, args in WALK_WORKLOADS:
        if W.available(W.get(name)):
            continue
        sz = (qsize if quick else size) or (sizes[name][1] if quick else sizes[name][0])
        t = trace_for(name, sz, progress, args)
        submitted[name] = (sz, pool().submit(t, [(m, p) for m in machines for _l, p in WALK_POLICIES], MEMORY[quick], 0))
    return lambda: walk_lines(out, machines, submitted, verdicts, progress)


def walk_lines(out: list[str], machines: list[str], submitted: dict[str, Any], verdicts: list[tuple[str, bool | None, str]],
               progress: Callable[[str], None]) -> list[str]:
    for name, _size, _qsize, _args in WALK_WORKLOADS:
        why = W.available(W.get(name))
        if why:
            out.append(f"| {name} | - | not run: {why} |" + " |" * len(WALK_POLICIES))
            continue
        sz, pending = submitted[name]
        progress(f"walk cycles: {name} at {sz}, {len(machines) * len(WALK_POLICIES)} runs")
        rs = pending.result()
        for mi, m in enumerate(machines):
            w = {l: rs[mi * len(WALK_POLICIES) + k]["cycles.walk"] for k, (l, _p) in enumerate(WALK_POLICIES)}
            order = w["4KB"] > w["THP"] > w["Trident"]
            out.append(f"| {name} ({sz}) | {m} | " + " | ".join(f"{w[l]:,}" for l, _ in WALK_POLICIES) + f" | {'yes' if order else 'NO'} |")
            if name in ("gups", "btree"):
                tr = rs[mi * len(WALK_POLICIES) + [l for l, _p in WALK_POLICIES].index("Trident")]
                small = holds_no_1g(tr)
                verdicts.append((f"{name}, {m}: walk cycles 4KB > THP > Trident", None if small else order,
                                 f"{w['4KB']:,} > {w['THP']:,} > {w['Trident']:,}"
                                 + (f" ({no_1g_why(tr)})" if small else "")))
            if name == "graph500":
                verdicts.append((f"graph500, {m}: Trident-1G-only spends more walk cycles than THP", w["Trident-1G-only"] > w["THP"],
                                 f"{w['Trident-1G-only']:,} against {w['THP']:,}"))
    out.append("")
    return out + verdict_lines(verdicts)


def trident_pv(quick: bool, progress: Callable[[str], None]) -> Callable[[], list[str]]:
    """Promotion by exchange against by copy, with the guest scanner capped at 10% of a CPU: the
    runs, queued; returns what formats the section."""
    name = "gups"
    # The walk-cycle table's GUPS: a 4GiB table is written well before the first pass.
    size, args = next((q if quick else s, a) for n, s, q, a in WALK_WORKLOADS if n == name)
    assert size is not None, "WALK_WORKLOADS gives gups its own size"
    t = trace_for(name, size, progress, args)
    m = f"{MACHINE}+nested"
    # The first pass after the table is written (at 200 ms) finds its 2MB pages populated.
    base = "trident:fault_1g=false,max_cpu=10,cap_floor_ms=1,scan_sleep_ms=200,alloc_sleep_ms=10"
    pols = [("copy (Trident)", base), ("exchange (Trident-pv)", base + ",pv=true")]
    from .reproduce import pool

    pending = pool().submit(t, [(m, p) for _l, p in pols], MEMORY[quick], 1 << 20)
    return lambda: pv_lines(name, size, m, pols, pending, progress)


def pv_lines(name: str, size: str, m: str, pols: list[tuple[str, str]], pending: Any, progress: Callable[[str], None]) -> list[str]:
    progress("Trident-pv: promotion by copy and by exchange")
    rs = pending.result()
    out = ["### Trident-pv: promoting to 1GB by exchanging mappings (Figure 16)", "",
           "Paper: a guest promoting 2MB pages to a 1GB page asks the hypervisor to exchange guest-physical "
           "mappings, 512 per hypercall (~300 ns), instead of copying 1GB; with the guest's khugepaged capped at "
           "10% of a vCPU (the artifact's setting), Trident-pv promotes faster and gains 5% on average over "
           f"Trident in a VM. Ours: `{name}` at {size} on `{m}`, 1GB pages only by promotion (`fault_1g=false`, the "
           "Trident-pv kernel's branch), the scanner capped with `max_cpu=10` (its least sleep, the authors' 1 s, compressed to 1 ms) "
           "and first waking at 200 ms, when the table is written. Time per promotion: moving the data (copy, or "
           "hypercalls and host page-table writes) and zero-filling the range's unmapped 4KB slots; the cap "
           "turns it into regions per second.", "",
           "| promotion | 1GB promotions | hypercalls | 2MB mappings exchanged | bytes copied | moving the data, per region | "
           "zero-filling, per region | regions per second at the 10% cap | 1GB pages at the end |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    per = {}
    for (label, _p), r in zip(pols, rs):
        n = r["policy.promote_1g.count"]
        zero = r["policy.promote_1g.zero_cycles"] / n / (GHZ * 1e9) if n else 0.0
        move = (r["policy.promote_1g.cycles"] / n / (GHZ * 1e9) - zero) if n else 0.0
        rate = 0.10 / (move + zero) if move + zero else float("inf")
        per[label] = move
        out.append(f"| {label} | {n} | {r['compact.exchange_hypercalls']} | {r['compact.exchanged_pmds']:,} | "
                   f"{r['copy.bytes_background'] / 2**20:,.0f} MiB | {move * 1e6:,.1f} µs | {zero * 1e6:,.1f} µs | {rate:,.1f} | "
                   f"{r.counters.get('footprint.bytes.1GiB', 0) // GiB} |")
    c, e = per["copy (Trident)"], per["exchange (Trident-pv)"]
    faster = f"{c / e:,.0f}x faster" if e else "without measurable time"
    out += ["", f"Moving a region's data by exchange is {faster} than by copy ({e * 1e6:,.1f} µs against "
            f"{c * 1e3:,.2f} ms): one hypercall per 512 mappings (`hypercall_ns=300`, the paper's estimate) and two "
            "host page-table writes per exchanged 2MB mapping (an ESTIMATE), against copying at the machine's "
            "copy cost. A host that backs guest memory with 4KB pages cannot exchange 2MB mappings: the first "
            "hypercall fails and the guest copies (tested in crates/core/tests/policy_trident.rs).", ""]
    return out


def prezeroing(quick: bool, progress: Callable[[str], None], d: str) -> Callable[[], list[str]]:
    """1GB fault latency with and without the asynchronous zeroing daemon: the runs, queued;
    returns what formats the section."""
    size, idle = ("2GiB", 200) if quick else ("4GiB", 500)
    extra = f'gen = "gups"\nsize = "{size}"\naccesses = "2M"\nstart = "{idle}ms"'
    sc = scenario_file(d, "prezero", "8GiB", None, False, extra)
    rs = [(label, run_scenario(sc, f"trident:khugepaged=0{p}")) for label, p in (("zero at fault", ""), ("pre-zeroed", ",prezero=true"))]
    return lambda: prezero_lines(size, idle, rs, progress)


def prezero_lines(size: str, idle: int, rs: list[tuple[str, Any]], progress: Callable[[str], None]) -> list[str]:
    progress("pre-zeroing: 1GB faults with and without the daemon")
    ghz = GHZ
    out = ["### Pre-zeroing: 1GB fault latency (the artifact's `async_zeroing` branch)", "",
           "Paper: zeroing a 1GB page at fault is slow, so Trident zeroes free 1GB blocks asynchronously; its "
           "benefit depends on idle time to do it. Ours: a GUPS table of "
           f"{size} (1GB-aligned, all 1GB pages) starting after {idle} ms of idle time, on {MACHINE} with 8GiB; "
           "latency per 1GB fault = (fault + zero-fill cycles) / 1GB faults.", "",
           "| | 1GB faults | pre-zeroed blocks used | zeroed at fault | latency per 1GB fault | daemon's busy time | idle time before the program |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    lat = {}
    for label, r in rs:
        n = r.counters.get("faults.1GiB", 0)
        cyc = (r["cycles.fault"] + r["cycles.zero"]) / n if n else 0
        lat[label] = cyc
        out.append(f"| {label} | {n} | {r['prezero.blocks_used']} | {r['os.zeroed_bytes'] / 2**20:,.0f} MiB | {cyc / ghz / 1e6:,.2f} ms | "
                   f"{r['policy.prezero.busy_cycles'] / ghz / 1e6:,.1f} ms | {r['cycles.idle'] / ghz / 1e6:,.0f} ms |")
    a, b = lat["zero at fault"], lat["pre-zeroed"]
    out += ["", f"With the daemon a 1GB fault takes {b / a:.1%} of the time it takes without ({'shorter: holds' if b < a else 'NOT shorter'}); "
            "the zeroing moved into the idle time before the program started (a daemon with no idle CPU, "
            "`prezero_cpu=0`, zeroes nothing: tested in crates/core/tests/os_prezero.rs).", ""]
    return out


def bloat(quick: bool, progress: Callable[[str], None], d: str, runs: dict[str, Any]) -> Callable[[], list[str]]:
    """The bloat runs, queued; returns what formats the section."""
    memory = MEMORY[quick]
    out = ["### Bloat: resident memory never touched (§7)", "",
           "Paper: Trident adds 38GB (Memcached) and 13GB (Btree) of bloat over THP; the other workloads are "
           "unaffected. Ours: `bloat.total` (bytes of resident superpages no access touched), un-fragmented, "
           "under THP and Trident.", "", "| workload | footprint under Trident | bloat, THP | bloat, Trident | Trident adds |",
           "|---|---:|---:|---:|---:|"]
    pairs = []
    for name, size, qsize, args, _row, _how in WORKLOADS:
        if not isinstance(runs.get(name), dict):
            continue
        t = trace_for(name, qsize if quick else size, progress, args)
        sc = scenario_file(d, f"{name}-bloat", memory, t, False)
        pairs.append((name, run_scenario(sc, THP, bloat=True), run_scenario(sc, f"trident:{TRIDENT_DAEMON}", bloat=True)))
    return lambda: bloat_lines(out, pairs, progress)


def bloat_lines(out: list[str], pairs: list[tuple[str, Any, Any]], progress: Callable[[str], None]) -> list[str]:
    for name, th, tr in pairs:
        progress(f"bloat: {name}")
        out.append(f"| {name} | {gib(tr['footprint.bytes'])} GiB | {gib(th['bloat.total'])} GiB | {gib(tr['bloat.total'])} GiB | "
                   f"{gib(tr['bloat.total'] - th['bloat.total'])} GiB |")
    return out + [""]


def trident(quick: bool = False, progress: Callable[[str], None] = lambda m: None) -> str:
    out = [f"## Ram, Panwar and Basu, Trident (MICRO 2021) on `{MACHINE}`", "", (__doc__ or "").split("\n\n", 1)[1].strip(), ""]
    with tempfile.TemporaryDirectory(prefix="superpager-trident-") as d:
        # Every section's runs are queued before any is awaited, so the pool never waits on
        # this paper's order; each section is then formatted in turn.
        t3, runs = table3(quick, d, progress)
        sections = [t3, lambda: table4(runs), compaction_work(runs, quick, d, progress), walk_cycles(quick, progress),
                    trident_pv(quick, progress), prezeroing(quick, progress, d), bloat(quick, progress, d, runs)]
        for lines in sections:
            out += lines()
    return "\n".join(out)
