"""The `superpager` command line. Every subcommand has --help with examples.

Errors print one line, `superpager: error: ...`, naming the file and byte offset (traces) or
the file and key (configurations), and exit with status 2 (bad input) or 1 (simulation stopped).
"""
from __future__ import annotations


import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys

from . import _core
from . import api
from . import cli_live
from . import cli_model
from . import cli_results
from .fmt import compare_table, human, human_bytes, mix_str, table
from .progress import Progress

EPILOG_SIMULATE = """examples:
  superpager gen gups --size 1GiB --accesses 4M -o gups.spt
  superpager simulate gups.spt --machine skylake --policy base
  superpager simulate gups.spt --machine skylake --policy fixed:2MiB --json
  superpager simulate gups.spt --tlb 64:4 --json          # one 64-entry 4-way LRU TLB named L1
  superpager simulate gups.spt --machine my-machine.toml --policy my-policy.toml --out results/
  superpager simulate gups.spt --policy linux-thp:enabled=always,defrag=never
  superpager simulate --scenario trident-fragmented --policy linux-thp   # a bundled scenario
  superpager simulate --scenario my-scenario.toml --json                 # or your own file

a policy is NAME[:key=value,...] (see `superpager policies`) or a TOML file with name = "...";
a machine is a preset (see `superpager machines`) or a TOML file.
"""


def count(s: str) -> int:
    """Parse 4M, 10k, 1_000_000, 2G as counts (decimal)."""
    t = s.strip().replace("_", "").lower()
    mult = 1
    for suffix, m in (("k", 10**3), ("m", 10**6), ("g", 10**9)):
        if t.endswith(suffix):
            t, mult = t[:-1], m
            break
    try:
        v = float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: '{s}' (examples: 1000, 4M, 10k)") from None
    if not math.isfinite(v) or v < 0 or v != int(v) or v >= 2**64:
        raise argparse.ArgumentTypeError(f"not a whole non-negative count below 2^64: '{s}'")
    return int(v)


def int_in(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi] (a clear error, not a traceback, otherwise)."""

    def parse(s: str) -> int:
        try:
            v = int(s, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: '{s}'") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is out of range {lo}..{hi}")
        return v

    return parse


def finite_float(lo: float, hi: float):
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: '{s}'") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise argparse.ArgumentTypeError(f"{s} is not a finite number in {lo}..{hi}")
        return v

    return parse


def print_result(r: api.Result, spec: str | None = None) -> None:
    """The readable summary; `spec` (the policy as given) echoes its parameters."""
    c = r.counters
    acc = max(c["accesses"], 1)
    print(f"trace    {r.trace}")
    # The policy's parameters as given, when its name does not already show them.
    spec = f" ({spec.split(':', 1)[1]})" if spec and ":" in spec and not spec.endswith(".toml") and spec.split(":", 1)[1] not in r.policy else ""
    print(f"machine  {r.machine}    policy {r.policy}{spec}    memory {r.memory}")
    if r.trace_truncated:
        print("note     the trace is truncated (its writer was stopped): the run covers the part present")
    print(f"accesses {human(c['accesses'])}  (loads {human(c['accesses.load'])}, stores {human(c['accesses.store'])}, "
          f"modify {human(c['accesses.modify'])}, fetches {human(c['accesses.fetch'])})")
    info = _core.machine_info(r.machine) if r.machine in {m[0] for m in _core.machines()} else None
    names = [t["name"] for t in info["tlbs"]] if info else sorted({k.split(".")[1] for k in c if k.startswith("tlb.")})
    rows = []
    for n in names:
        h, m = c.get(f"tlb.{n}.hits", 0), c.get(f"tlb.{n}.misses", 0)
        rate = m / (h + m) if h + m else 0.0
        rows.append([n, "", human(h), human(m), f"{rate * 100:.2f}%"])
    print()
    print(table(rows, ["TLB", "", "hits", "misses", "miss rate"]))
    print()
    print(f"walks    {human(c['walks'])} ({c['walks'] / acc * 1000:.2f} per 1000 accesses), "
          f"{human(c['walk.refs'])} memory references, page-walk-cache hits {human(c['pwc.hits'])}")
    print(f"faults   {human(c['faults'])}    zeroed {human_bytes(c['os.zeroed_bytes'])}")
    if c.get("os.vmas_inferred"):
        print(f"note     the trace has no address-space events: {c['os.vmas_inferred']} anonymous regions were inferred")
    for pid, why in r.killed.items():
        print(f"killed   process {pid}: {why}")
    # Every part of the cost model that is not zero (access and walk always), in its order.
    order = ["cycles.access", "cycles.tlb", "cycles.walk", "cycles.fault", "cycles.zero", "cycles.copy", "cycles.io"]
    keys = order + sorted(k for k in c if k.startswith("cycles.") and k not in order and k not in ("cycles.total",))
    parts = ", ".join(f"{k.split('.', 1)[1]} {human(c[k])}" for k in keys if k in c and (c[k] or k in ("cycles.access", "cycles.walk")))
    os_line = [f"{label} {human(c[key])}" for key, label in (
        ("policy.thp_fault_fallback", "THP fault fallbacks"), ("collapse.succeed", "collapses"),
        ("compact.pages_migrated", "pages migrated"), ("faults.cow", "COW faults"), ("faults.major", "major faults"),
        ("swap.out", "swapped out"), ("pagecache.evicted", "page cache evicted"), ("os.direct_reclaims", "direct reclaims"),
    ) if c.get(key)]
    if os_line:
        print(f"os       {', '.join(os_line)}")
    print(f"cycles   {human(c['cycles.total'])} ({c['cycles.total'] / acc:.2f} per access): {parts}")
    print(f"pages    {mix_str(r.page_size_mix)} of {human_bytes(c['footprint.bytes'])} resident at the end")


def _out_lock(a):
    """Hold --out's lock for the whole run: a second run into the same directory stops at once,
    not after its simulation (superpager.output)."""
    from . import output

    return output.locked_dir(a.out) if a.out else contextlib.nullcontext()


def cmd_simulate(a) -> int:
    with _out_lock(a):
        return _simulate(a)


def _simulate(a) -> int:
    for flag, v in (("--policy", a.policy), ("--machine", a.machine), ("--memory", a.memory), ("--swap", a.swap)):
        if v is not None and not v.strip():
            raise _core.UsageError(f"{flag} is empty; leave it out for the default (superpager simulate --help)")
    if a.tlb and a.machine:
        raise _core.UsageError("give either --machine or --tlb, not both")
    if a.nested:
        if a.tlb:
            raise _core.UsageError("--nested needs a machine with a page walker, not --tlb")
        base = a.machine or (_scenario_machine(a.scenario) if a.scenario else "skylake")
        a.machine = with_nested(base, a.nested)
    if a.scenario:
        if a.trace:
            raise _core.UsageError("give a trace or --scenario, not both")
        for flag, v in (("--memory", a.memory), ("--swap", a.swap), ("--replacement", a.replacement)):
            if v is not None:
                raise _core.UsageError(f"{flag} does not apply to a scenario: its file sets it (docs/SCENARIOS.md)")
        run = lambda: api.simulate(scenario=a.scenario, machine=a.machine, policy=a.policy, tlb=a.tlb,  # noqa: E731
                                   sample_every=a.sample_every, validate=a.validate, bloat=a.bloat,
                                   map_every=a.map_every, map_region=a.map_region)
        spec = None
        if a.db:
            from .sweep import RunSpec
            from .store import scenario_sha256

            path = api.scenario_path(a.scenario)
            own = _scenario_keys(path)
            spec = RunSpec(trace=path, machine=api.machine_spec(a.machine, a.tlb) if (a.machine or a.tlb) else str(own.get("machine", "skylake")),
                           policy=a.policy or str(own.get("policy", "base")), memory=str(own.get("memory", "?")),
                           sample_every=a.sample_every or 0,
                           bloat=a.bloat, map_every=a.map_every, map_region=a.map_region,
                           trace_sha256=scenario_sha256(path))
    else:
        if not a.trace:
            raise _core.UsageError("simulate needs a trace file or --scenario FILE.toml (see superpager simulate --help)")
        run = lambda: api.simulate(a.trace, machine=a.machine or "skylake", policy=a.policy or "base", memory=a.memory or "64GiB",  # noqa: E731
                                   tlb=a.tlb, sample_every=a.sample_every, allow_truncated=a.allow_truncated, validate=a.validate,
                                   swap=a.swap or "0", replacement=a.replacement or "clock", bloat=a.bloat,
                                   map_every=a.map_every, map_region=a.map_region)
        spec = None
        if a.db:
            from .sweep import RunSpec

            if not os.path.exists(a.trace):
                raise _core.FileAccessError(f"{a.trace}: no such file")
            spec = RunSpec(trace=a.trace, machine=api.machine_spec(a.machine or "skylake", a.tlb), policy=a.policy or "base",
                           memory=a.memory or "64GiB", sample_every=(1 << 20) if a.sample_every is None else a.sample_every,
                           swap=a.swap or "0", replacement=a.replacement or "clock", bloat=a.bloat, map_every=a.map_every,
                           map_region=a.map_region)
    r = stored_or_run(a, spec, run)
    if a.out:
        api.write_results([r], a.out)
    if a.json:
        print(r.to_json())
    else:
        print_result(r, a.policy)
        if a.out:
            print(f"\nwrote {a.out}/results.json, counters.parquet, series.parquet")
    return 0


def stored_or_run(a, spec, run) -> api.Result:
    """With --db: the stored run of the same inputs (unless --force), else run and store it."""
    if spec is None:
        return run()
    import time

    from . import store as st

    with st.Store(a.db) as db:
        if not spec.trace_sha256:
            spec = dataclasses.replace(spec, trace_sha256=db.trace_sha256(spec.trace))
        key = spec.key()
        if not a.force:
            r = db.get(key)
            if r is not None:
                print(f"superpager: run {key.run_id} is in {a.db} already: showing it (--force runs it again)", file=sys.stderr)
                return r
        t0 = time.perf_counter()
        r = run()
        db.put(key, r, time.perf_counter() - t0)
    return r


def _compare_stored(a, machines: list[str], policies: list[str], every: int) -> api.ResultSet:
    """compare --db: runs already stored are taken from the store; the others run in one pass
    over the trace and are stored."""
    import time

    from . import store as st
    from .sweep import RunSpec

    if not os.path.exists(a.trace):
        raise _core.FileAccessError(f"{a.trace}: no such file")
    with st.Store(a.db) as db:
        h = db.trace_sha256(a.trace)
        specs = [RunSpec(trace=a.trace, machine=m, policy=p, memory=a.memory or "64GiB", sample_every=every, bloat=a.bloat,
                         map_every=a.map_every, map_region=a.map_region, trace_sha256=h) for m in machines for p in policies]
        got = {} if a.force else {i: db.get(s.key()) for i, s in enumerate(specs)}
        todo = [i for i, s in enumerate(specs) if got.get(i) is None]
        if len(todo) < len(specs):
            print(f"superpager: {len(specs) - len(todo)} of {len(specs)} runs are in {a.db} already (--force runs them again)", file=sys.stderr)
        if todo:
            t0 = time.perf_counter()
            fresh = api.run(a.trace, [(specs[i].machine, specs[i].policy) for i in todo], a.memory or "64GiB", every,
                            a.allow_truncated, False, None, label="comparing", bloat=a.bloat, map_every=a.map_every,
                            map_region=a.map_region)
            wall = (time.perf_counter() - t0) / len(todo)
            for i, r in zip(todo, fresh):
                db.put(specs[i].key(), r, wall)
                got[i] = r
    return api.ResultSet(got[i] for i in range(len(specs)))


def with_nested(machine: str, host: str) -> str:
    """`--nested[=HOST]`: the machine spec for the same machine running as a guest (MODEL.md)."""
    if "+nested" in machine:
        raise _core.UsageError(f"--nested: machine '{machine}' is already nested")
    return f"{machine}+nested" + ("" if host == "guest" else f"={host}")


def _scenario_keys(path: str) -> dict:
    """A scenario file's top-level keys ({} if it cannot be read: the scenario's own loader then
    reports the problem with its key and line)."""
    import tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _scenario_machine(scenario: str) -> str:
    return str(_scenario_keys(api.scenario_path(scenario)).get("machine", "skylake"))


def split_policies(s: str) -> list[str]:
    """Split a comma-separated list of policy specs, where a spec's own parameters are also
    comma-separated: a piece that is only `key=value` belongs to the spec before it
    (`base,romer:fixed,size=64KiB,navarro` is three policies)."""
    out: list[str] = []
    for piece in (p.strip() for p in s.split(",")):
        if not piece:
            continue
        if out and "=" in piece and ":" not in piece.split("=", 1)[0]:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


def cmd_compare(a) -> int:
    with _out_lock(a):
        return _compare(a)


def _compare(a) -> int:
    machines = [m.strip() for m in a.machines.split(",") if m.strip()]
    if a.nested:
        machines = machines + [with_nested(m, a.nested) for m in machines]
    if a.tlb:
        machines = [f"tlb:{t}" for t in a.tlb.split(",") if t.strip()] + ([] if a.machines == "skylake" else machines)
    policies = split_policies(a.policies)
    if not machines:
        raise _core.UsageError(f"--machines '{a.machines}' names no machine (e.g. --machines skylake,zen3; see superpager machines)")
    if not policies:
        raise _core.UsageError(f"--policies '{a.policies}' names no policy (e.g. --policies base,fixed:2MiB; see superpager policies)")
    for what, names in (("--machines", machines), ("--policies", policies)):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise _core.UsageError(f"{what} names {', '.join(dup)} more than once")
    every = (1 << 20) if a.sample_every is None else a.sample_every
    if a.db:
        rs = _compare_stored(a, machines, policies, every)
    else:
        rs = api.compare(a.trace, machines, policies, memory=a.memory or "64GiB", sample_every=every,
                         allow_truncated=a.allow_truncated, bloat=a.bloat, map_every=a.map_every, map_region=a.map_region)
    if a.out:
        api.write_results(rs, a.out)
    if a.json:
        print(json.dumps([r.to_dict() for r in rs], indent=2, sort_keys=True))
        return 0
    print(compare_table(rs))
    if a.out:
        print(f"\nwrote {a.out}/results.json, counters.parquet, series.parquet")
    return 0


def cmd_machines(a) -> int:
    if a.explain:
        if a.name != "host":
            print("superpager: error: --explain applies to the host machine only (superpager machines host --explain)", file=sys.stderr)
            return 2
        items, notes = _core.host_explain()
        if a.json:
            print(json.dumps({"items": [{"item": i, "value": v, "source": s} for i, v, s in items], "notes": notes}, indent=2))
            return 0
        print(table([list(r) for r in items], ["item", "value", "source"], left=3))
        for n in notes:
            print(f"note: {n}")
        return 0
    if a.name:
        info = _core.machine_info(a.name)
        if a.json:
            print(json.dumps(info, indent=2))
            return 0
        print(f"{info['name']}: {info['description']}")
        print(f"  from {info['origin']}; base page {info['base_page']}; page sizes {', '.join(info['page_sizes'])}")
        rows = [[t["name"], t["stream"], str(t["level"]), str(t["entries"]), str(t["ways"]), " ".join(t["page_sizes"]),
                 t["replacement"], f"{t['hit_cycles']:g}"] for t in info["tlbs"]]
        print(table(rows, ["TLB", "stream", "level", "entries", "ways", "page sizes", "repl", "hit cyc"]))
        walk = (f"software handler, {info['software_handler_cycles']:g} cycles per miss" if info["software_handler_cycles"] is not None
                else f"{info['walk_levels']}-level radix walk, {info['walk_ref_cycles']:g} cycles per reference"
                     + (f", nested (2D), host pages {info['nested']}" if info["nested"] else "")
                     + (f" (larger guest pages are splintered into {info['nested']} TLB entries)"
                        if info["nested"] not in (None, "guest", info["page_sizes"][-1]) else ""))
        print(f"  walker: {walk}; page-walk caches (level, sets, ways): {info['page_walk_caches'] or 'none'}")
        print(f"  coalescing: {info['coalescing']}")
        c = info["cache"]
        if c is None:
            print("  data caches: none (the linear cost model; docs/RUNTIME_MODEL.md)")
        else:
            lv = ", ".join(f"{n} {human_bytes(b)} {w}-way {cyc:g} cyc" for n, b, w, cyc in c["levels"])
            print(f"  data caches: {lv}; memory {c['dram_cycles']:g} cyc; {c['mlp']:g} misses and {c['walkers']:g} walks in flight"
                  f"{' (walk loads in the fill buffers too)' if c.get('walk_fill_buffers') else ''}, ROB {c['rob']:g}, dependence {c['dependence']:g}, walk ahead {c.get('walk_ahead', 0):g}{''.join(f'/{c[k]:g}' for k in ('walk_ahead2', 'walk_ahead3') if c.get(k))}, stream ahead {c.get('stream_ahead', 0):g}, stream prefetch {c.get('stream_prefetch', 0):g}, memory's line rate {c.get('dram_line_cycles', 0):g} cyc a line, walk hiding {c.get('walk_hiding', 0):g}"
                  f"{'; the last level shared with tenants filling ' + format(c['tenant_fill_rate'], 'g') + ' lines a ns' + (', shares grown by the exponent ' + format(c['share_exponent'], 'g') if c.get('share_exponent', 1) != 1 else '') + (', hits kept by the ' + c['share_law'] + ' law' if c.get('share_law') == 'reuse' else '') if c.get('tenant_fill_rate') else ''}"
                  f"{'; bounds combined by their ' + format(c['bounds_norm'], 'g') + '-norm' if c.get('bounds_norm') else ''}; clock {info['clock_ghz']:g} GHz")
        return 0
    ms = _core.machines()
    if a.json:
        print(json.dumps([{"name": n, "description": d, "summary": s} for n, d, s in ms], indent=2))
        return 0
    print(table([[n, s] for n, _, s in ms], ["machine", "page sizes [TLB structures entries x ways]"]))
    print("\nshow one: superpager machines NAME;  any machine may also be a TOML file path.")
    return 0


def cmd_policies(a) -> int:
    ps = _core.policies()
    rs = _core.replacements()
    if a.json:
        print(json.dumps([{"name": n, "summary": s, "params": p} for n, s, p in ps]
                         + [{"name": n, "kind": "replacement", "summary": s, "params": p} for n, s, p in rs], indent=2))
        return 0
    for n, s, p in ps:
        print(f"{n}\n    {s}\n    parameters: {p}")
    print("\nuse NAME or NAME:key=value,... (e.g. fixed:2MiB, fixed:size=64KiB,fit=vma), or a TOML file.")
    print("\nreplacement policies (--replacement NAME[:key=value,...], with --swap):")
    for n, s, p in rs:
        print(f"{n}\n    {s}\n    parameters: {p}")
    return 0


def cmd_scenarios(a) -> int:
    sc = api.scenarios()
    if a.json:
        print(json.dumps([{"name": n, "summary": d, "path": api.scenario_path(n)} for n, d in sc], indent=2))
        return 0
    for n, d in sc:
        print(f"{n}\n    {d}")
    print("\nrun one with: superpager simulate --scenario NAME [--policy P] [--machine M]; "
          "write your own: docs/SCENARIOS.md")
    return 0


def cmd_gen(a) -> int:
    s = api.gen(a.kind, a.out, size=a.size, accesses=a.accesses, seed=a.seed, stride=a.stride, elem=a.elem,
                alpha=a.alpha, base=a.base, passes=a.passes, warm=a.warm, collapse=a.collapse)
    note = f" ({human(a.accesses)} updates, each a load and a store)" if a.kind == "gups" and a.accesses else ""
    print(f"wrote {s['path']}: {human(s['accesses'])} accesses{note} in {human(s['records'])} records, "
          f"{human_bytes(s['bytes'])} ({s['bytes'] / max(s['accesses'], 1):.2f} bytes per access)")
    return 0


def cmd_trace_import(a) -> int:
    s = api.trace_import(a.file, a.fmt, a.out, fetches=not a.no_fetches, collapse=False if a.no_collapse else a.collapse)
    print(f"wrote {s['path']}: {human(s['accesses'])} accesses in {human(s['records'])} records, {human_bytes(s['bytes'])}")
    return 0


def cmd_trace_join(a) -> int:
    s = api.trace_join(a.files, a.out)
    print(f"wrote {s['path']}: {s['processes']} processes, {human(s['accesses'])} accesses in {human(s['records'])} records, "
          f"{human_bytes(s['bytes'])}")
    return 0


def cmd_trace_merge(a) -> int:
    s = api.trace_merge(a.files, a.out, slice=a.slice, quantum=a.quantum)
    print(f"wrote {s['path']}: {s['processes']} processes, {human(s['accesses'])} accesses in {human(s['records'])} records, "
          f"{s['switches']:,} switches between inputs, {human_bytes(s['bytes'])}")
    return 0


def cmd_trace_info(a) -> int:
    info = api.trace_info(a.file, a.page_sizes.split(","), a.allow_truncated)
    if a.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['path']}: {human_bytes(info['bytes'])}, {info['chunks']} chunks, {human(info['records'])} records"
          + ("  [TRUNCATED]" if info["truncated"] else ""))
    print(f"header     {info['provenance']}")
    k = info["accesses_by_kind"]
    print(f"accesses   {human(info['accesses'])}: loads {human(k['load'])}, stores {human(k['store'])}, "
          f"modify {human(k['modify'])}, fetches {human(k['fetch'])}")
    print("events     " + (", ".join(f"{n} {c}" for n, c in info["events"]) or "none"))
    print("footprint  " + ", ".join(f"{n} {c} pages" for n, c in info["footprint_pages"].items()))
    print(f"processes  {', '.join(map(str, info['processes'])) or '-'}")
    ev = info["address_space_events"]
    if ev:
        print(f"VMAs       {len(ev)} address-space events:")
        for pid, line in ev[: a.vmas]:
            print(f"  pid {pid}: {line}")
        if len(ev) > a.vmas:
            print(f"  ... {len(ev) - a.vmas} more (--vmas N to show more)")
    else:
        print("VMAs       none recorded (the simulator infers anonymous regions from the accesses)")
    return 0


def cmd_trace_dump(a) -> int:
    d = _core.TraceDumper(a.file, a.allow_truncated)
    out = sys.stdout
    out.write(f"# superpager text trace v1\n# header {d.header()}\n")
    left = a.limit if a.limit else None
    while left is None or left > 0:
        n = 65536 if left is None else min(left, 65536)
        lines = d.lines(n)
        if not lines:
            break
        out.write("\n".join(lines) + "\n")
        if left is not None:
            left -= len(lines)
    return 0


def cmd_mrc(a) -> int:
    r = api.mrc(a.trace, a.page_size, a.max_entries, a.stream)
    if a.json:
        print(json.dumps(r))
        return 0
    acc = max(r["accesses"], 1)
    curve = r["misses"]
    sizes = sorted({n for n in [1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 512, 1024, 1536, 2048, 4096, 8192] if n <= len(curve)} | {len(curve)})
    rows = [[str(n), human(curve[n - 1]), f"{curve[n - 1] / acc * 100:.3f}%"] for n in sizes]
    print(f"{a.trace}: fully associative LRU TLB of {a.page_size} pages, {human(r['accesses'])} accesses, "
          f"{human(r['cold_misses'])} cold misses")
    print(table(rows, ["entries", "misses", "miss ratio"]))
    return 0


def cmd_bench(a) -> int:
    # A --model-* or --live-* flag without its mode would be ignored by the bench that runs.
    for mode, prefix in (("model", "model_"), ("live", "live_")):
        given = [k for k, v in vars(a).items() if k.startswith(prefix) and v not in (None, False, 0.0)]
        if given and not getattr(a, mode):
            flag = "--" + given[0].replace("_", "-")
            raise _core.UsageError(f"bench: {flag} is for --{mode} (add --{mode})")
    if a.workdir:
        return _bench(a)
    # Traces go to a temporary directory that is removed afterwards, even on Ctrl-C (they take
    # 0.1 to 2 GB); --workdir keeps them.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="superpager-bench-") as work:
        a.workdir = work
        return _bench(a)


def _bench(a) -> int:
    if a.against and not a.pressure:
        from . import bench_builds

        return bench_builds.main(a)
    if a.os:
        from . import bench_os

        return bench_os.main(a)
    if a.capture:
        from . import bench_capture

        return bench_capture.main(a)
    if a.model:
        from . import bench_model
        return bench_model.main(a)
    if a.live:
        from . import bench_live

        return bench_live.main(a)
    if a.pressure:
        from . import bench_pressure

        return bench_pressure.main(a)
    from . import bench

    return bench.main(a)


EPILOG_CAPTURE = """examples:
  superpager capture -- gzip -k -f big.txt             # writes gzip.spt
  superpager capture --out ls.spt --fetches -- ls -l /   # instruction fetches too
  superpager capture --lackey -- ./prog                # Valgrind lackey (slow), for what qemu-user cannot run
  superpager capture --from-mark -- python3 workloads/model_dict.py 1024   # only the phase after its mark
  superpager capture --collapse line -o bs.spt -- ./bsearch   # a record per cache line, for `predict`
  superpager trace info gzip.spt && superpager simulate gzip.spt --policy linux-thp

The program runs under qemu-user with superpager's TCG plugin: every load and store (and with
--fetches every instruction fetch, one record per basic block), instruction counts, threads, and
the system calls that shape the address space (mmap, munmap, mremap, mprotect, brk, madvise,
fork, exit) or read files (openat, read, pread, close). Programs it execs run natively and are
not traced. Exit status: the program's own (128+N if signal N killed it); 127 if the command
does not exist; 1 if the trace could not be written. A trace whose program was killed, or that
was stopped by Ctrl-C or a full disk, is kept up to its last complete chunk and marked
truncated. Details: docs/CAPTURE.md."""

EPILOG_WORKLOADS = """examples:
  superpager workloads list
  superpager workloads capture gups --size 1GiB        # writes gups.spt
  superpager workloads capture all --size 16MiB --out traces/
"""


class _Counter:
    """A running count on stderr for work of unknown length (shown on a terminal only)."""

    def __init__(self, label: str):
        self.p = Progress(label)

    def __call__(self, accesses: int, seconds: float) -> None:
        p = self.p
        if not p.enabled or seconds < p.delay:
            return
        p.shown = True
        rate = accesses / max(seconds, 1e-9)
        sys.stderr.write(f"\r{p.label}: {human(accesses)} accesses recorded, {seconds:6.1f}s ({human(rate)}/s)   ")
        sys.stderr.flush()

    def close(self) -> None:
        self.p.close()


def report_capture(r, label: str) -> int:
    """Print what a capture produced; return the exit status."""
    extra = f", {r.processes} processes" if r.processes > 1 else ""
    extra += f", {r.threads} threads" if r.threads > 1 else ""
    print(f"wrote {r.path}: {human(r.accesses)} accesses in {human(r.records)} records, {human_bytes(r.bytes)} "
          f"({r.bytes_per_access:.3f} bytes per access){extra}; {r.seconds:.1f}s, {human(r.rate)} accesses/s",
          file=sys.stderr)  # stdout is the captured program's own
    for n in r.notes:
        print(f"note: {n}", file=sys.stderr)
    if r.write_error:
        print(f"superpager: error: {r.write_error}: stopped the program; the trace keeps the "
              f"{human(r.accesses)} accesses recorded until then and is marked truncated", file=sys.stderr)
        return 1
    if r.status > 128:
        sig = r.status - 128
        from .capture import _signal_name

        lost = "; its last records were lost and the trace is marked truncated" if r.truncated else \
            "; the trace holds everything it did until then"
        print(f"superpager: {label} was killed by signal {sig} ({_signal_name(sig)}){lost}", file=sys.stderr)
    elif r.truncated:
        print(f"superpager: the trace is marked truncated (the capture was stopped before {label} finished)", file=sys.stderr)
    elif r.status != 0:
        print(f"superpager: {label} exited with status {r.status}", file=sys.stderr)
    return r.status


def cmd_capture(a) -> int:
    from . import capture as cap

    cmd = list(a.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("superpager: error: no command to capture (usage: superpager capture [options] -- CMD ARGS)", file=sys.stderr)
        return 2
    out = a.out or (os.path.basename(cmd[0]) + ".spt")
    bar = _Counter("capture")
    try:
        r = cap.capture(cmd, out, fetches=a.fetches, lackey=a.lackey, progress=bar, from_mark=a.from_mark, collapse=a.collapse)
    except cap.CaptureError as e:
        bar.close()
        print(f"superpager: error: {e}", file=sys.stderr)
        return e.status
    bar.close()
    return report_capture(r, os.path.basename(cmd[0]))


def cmd_workloads_list(a) -> int:
    from . import workloads as W

    rows = []
    for w in W.WORKLOADS.values():
        why = W.available(w)
        rows.append([w.name, w.kind, w.default_size, w.description + (f"  [unavailable: {why}]" if why else ""), w.models])
    print(table(rows, ["name", "kind", "default size", "what it does", "modelled on"], left=5))
    return 0


def cmd_workloads_capture(a) -> int:
    from . import capture as cap
    from . import workloads as W

    names = list(W.WORKLOADS) if a.name == "all" else [a.name]
    status = 0
    for n in names:
        if a.name == "all" or (a.out and os.path.isdir(a.out)):
            out = os.path.join(a.out or ".", f"{n}.spt")
        else:
            out = a.out or f"{n}.spt"
        bar = _Counter(f"capture {n}")
        try:
            r = W.capture(n, out=out, size=a.size, fetches=a.fetches, progress=bar)
        except cap.CaptureError as e:
            bar.close()
            print(f"superpager: error: {e}", file=sys.stderr)
            status = status or e.status
            continue
        bar.close()
        status = report_capture(r, n) or status
    return status


def cmd_reproduce(a) -> int:
    from . import reproduce

    return reproduce.main(a)


def cmd_demo(a) -> int:
    from . import demo

    return demo.main(a)


def _help(parser: argparse.ArgumentParser) -> int:
    """A verb given without its subcommand: show its help, exit status 2."""
    parser.print_help()
    return 2


def add_collapse(p: argparse.ArgumentParser) -> None:
    """`--collapse page|line` of gen and trace import (capture words its own for a thread's accesses)."""
    p.add_argument("--collapse", choices=["page", "line"], default="page",
                   help="join consecutive accesses to one 4KiB page (page, the default) or one 64-byte cache line "
                        "(line: every line a run touches stays visible to the runtime model's caches, for predict) into one record")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="superpager",
        description="Superpage (huge page) management: simulate OS superpage policies on memory traces, capture real programs, and apply the policies to real processes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="start with:  superpager demo    (or: make demo)\nthen:        superpager gen --help, superpager simulate --help",
    )
    p.add_argument("--version", action="version", version=f"superpager {_core.__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    raw = argparse.RawDescriptionHelpFormatter

    s = sub.add_parser("simulate", help="replay a trace on one machine under one policy", epilog=EPILOG_SIMULATE, formatter_class=raw)
    s.add_argument("trace", nargs="?", help=".spt trace file (make one with `superpager gen` or `superpager trace import`)")
    s.add_argument("--scenario", metavar="FILE.toml", help="instead of a trace: a scenario (memory, fragmentation prelude, processes; docs/SCENARIOS.md)")
    s.add_argument("--machine", "-m", help="machine preset or TOML file (default: the scenario's, else skylake)")
    s.add_argument("--tlb", metavar="ENTRIES:WAYS[:PAGESIZE]", help="instead of --machine: one LRU TLB named L1 (ways = entries: fully associative)")
    s.add_argument("--policy", "-p", help="policy NAME[:key=value,...] or TOML file (default: the scenario's, else base)")
    s.add_argument("--nested", nargs="?", const="guest", metavar="HOST",
                   help="run the machine as a guest under a hypervisor (2D page walks; the same as MACHINE+nested[=HOST]). "
                        "HOST: the host's page size, or 'guest' (default): each guest page backed by a host page of its size. "
                        "Guest pages larger than HOST are splintered: the TLB holds them as HOST-sized entries")
    add_run_options(s)
    s.add_argument("--swap", metavar="SIZE", help="swap space, e.g. 8GiB (default none: running out of memory stops the run)")
    s.add_argument("--replacement", metavar="NAME[:k=v,...]",
                   help="which anonymous page to swap out: clock (default), lru, arc (Megiddo and Modha's adaptive "
                        "replacement), amsqm[:alpha=A,beta=B,gamma=G,threshold=T] (superpage-aware; with --policy "
                        "navarro); each takes sees=every to hear of every reference, TLB hits included, as a trace-driven "
                        "replacement study does (default sees=walks: faults and page walks); parameters: superpager policies; docs/AMSQM.md")
    s.add_argument("--validate", action="store_true", help="check the OS model's invariants after every event (slow; for debugging)")
    s.add_argument("--json", action="store_true", help="print one JSON object (counters, page_size_mix, series)")
    s.set_defaults(fn=cmd_simulate)

    c = sub.add_parser("compare", help="several machines x policies side by side, one pass over the trace",
                       formatter_class=raw,
                       epilog="example:\n  superpager compare gups.spt --machines skylake,zen3 --policies base,fixed:2MiB\n\n"
                              "'walks saved' compares each policy with the first policy on the same machine (negative: more walks).")
    c.add_argument("trace")
    c.add_argument("--machines", default="skylake", help="comma-separated machines (default: skylake)")
    c.add_argument("--tlb", help="comma-separated ad-hoc TLBs ENTRIES:WAYS[:PAGESIZE], added to --machines")
    c.add_argument("--nested", nargs="?", const="guest", metavar="HOST",
                   help="add each machine again as a guest under a hypervisor (MACHINE+nested[=HOST], 2D page walks); "
                        "HOST: the host's page size (larger guest pages are splintered into HOST-sized TLB entries), or 'guest' (default)")
    c.add_argument("--policies", default="base", help="comma-separated policies (default: base); a policy's own "
                   "key=value parameters follow it: base,romer:fixed,size=64KiB,romer:online")
    add_run_options(c)
    c.add_argument("--json", action="store_true", help="print a JSON list of results")
    c.set_defaults(fn=cmd_compare)

    m = sub.add_parser("machines", help="list machine presets, or show one")
    m.add_argument("name", nargs="?", help="a preset name or a TOML file")
    m.add_argument("--json", action="store_true")
    m.add_argument("--explain", action="store_true", help="with host: where each number of this CPU's TLBs and caches came from (CPUID, sysfs, this core's preset, calibrate) and what fell back")
    m.set_defaults(fn=cmd_machines)

    po = sub.add_parser("policies", help="list policies and their parameters")
    po.add_argument("--json", action="store_true")
    po.set_defaults(fn=cmd_policies)

    sc = sub.add_parser("scenarios", help="list bundled scenarios (memory, fragmentation prelude, processes)")
    sc.add_argument("--json", action="store_true")
    sc.set_defaults(fn=cmd_scenarios)

    kinds = "\n".join(f"  {k:10s} {d}" for k, d in GEN_KINDS)
    g = sub.add_parser("gen", help="generate a synthetic workload trace", formatter_class=raw,
                       epilog=f"kinds:\n{kinds}\n\nexamples:\n  superpager gen gups --size 4GiB --accesses 10M -o gups.spt\n"
                              "  superpager gen stride --size 1GiB --stride 4KiB -o stride.spt\n"
                              "  superpager gen zipf --size 2GiB --alpha 1.1 --seed 7 -o zipf.spt\n"
                              "  superpager gen seq --size 256MiB --collapse line -o seq.spt   # every line, for predict")
    g.add_argument("kind", choices=[k for k, _ in GEN_KINDS], metavar="KIND")
    g.add_argument("-o", "--out", required=True, help="output .spt file")
    g.add_argument("--size", default="64MiB", help="footprint, e.g. 256MiB, 4GiB (default 64MiB)")
    g.add_argument("--accesses", type=count, default=0, help="number of accesses, e.g. 4M (default: one pass, or 4M for random kinds); for gups, "
                   "the number of updates, each a load and a store: --accesses 4M gives 8M accesses")
    g.add_argument("--seed", type=int_in(0, 2**64 - 1), default=1, help="random seed (default 1): same seed, same trace")
    g.add_argument("--stride", default="4KiB", help="stride for `stride` (default 4KiB)")
    g.add_argument("--elem", type=int_in(1, 255), default=8, help="element size in bytes (default 8)")
    g.add_argument("--alpha", type=finite_float(0.0, 100.0), default=0.99, help="Zipf exponent (default 0.99)")
    g.add_argument("--passes", type=int_in(1, 2**32), default=1, help="passes for seq/stride (default 1)")
    g.add_argument("--warm", action="store_true",
                   help="chase only: write every page (in a random order) and run the cycle once (at most --accesses steps) "
                        "before a phase mark, so predict times the steady state, as calibrate's chase.c does")
    g.add_argument("--base", type=int_in(0, 2**64 - 1), default=0x7F0000000000,
                   help="start address of the main region (default 0x7f0000000000); region and size stay below 2^47")
    add_collapse(g)
    g.set_defaults(fn=cmd_gen)

    t = sub.add_parser("trace", help="import, inspect and dump traces")
    tsub = t.add_subparsers(dest="tcmd", metavar="SUBCOMMAND")
    ti = tsub.add_parser("import", help="convert lackey, ChampSim or text traces to .spt", formatter_class=raw,
                         epilog="examples:\n  valgrind --tool=lackey --trace-mem=yes ls 2> ls.lackey\n"
                                "  superpager trace import ls.lackey --from lackey -o ls.spt\n"
                                "  superpager trace import 600.perlbench.champsimtrace.xz --from champsim -o perl.spt\n"
                                "  superpager trace import hand.txt --from text -o hand.spt")
    ti.add_argument("file")
    ti.add_argument("--from", dest="fmt", required=True, choices=["lackey", "champsim", "text"])
    ti.add_argument("-o", "--out", required=True)
    ti.add_argument("--no-fetches", action="store_true", help="drop instruction fetches")
    ti.add_argument("--no-collapse", action="store_true", help="keep every access as its own record")
    add_collapse(ti)
    ti.set_defaults(fn=cmd_trace_import)
    tj = tsub.add_parser("join", help="several traces one after another, as one trace of several processes",
                         formatter_class=raw,
                         epilog="Each input's processes become new processes of the output (pids shifted past the\n"
                                "inputs before it); files are shared by path. Use it for runs of many short\n"
                                "processes, since capture does not follow exec:\n"
                                "  superpager capture --fetches --out a.spt -- /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet a.c\n"
                                "  superpager capture --fetches --out b.spt -- /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet b.c\n"
                                "  superpager trace join a.spt b.spt -o make.spt")
    tj.add_argument("files", nargs="+", metavar="file")
    tj.add_argument("-o", "--out", required=True)
    tj.set_defaults(fn=cmd_trace_join)
    tm = tsub.add_parser("merge", help="several traces side by side, interleaved as programs sharing a machine run",
                         formatter_class=raw,
                         epilog="The input whose instruction clock is lowest runs for --slice instructions, then the\n"
                                "lowest runs again, so inputs advance at the same rate (an input with no instruction\n"
                                "marks, such as a generated trace, counts accesses). --quantum N instead takes turns\n"
                                "of N accesses. Processes are renumbered in order of first appearance, so one trace\n"
                                "given four times is four programs (AMSQM's heavy traces):\n"
                                "  superpager trace merge gzip.spt gzip.spt bzip2.spt bzip2.spt -o trace5.spt")
    tm.add_argument("files", nargs="+", metavar="file")
    tm.add_argument("-o", "--out", required=True)
    tm.add_argument("--slice", type=int, default=10_000, help="instructions per turn (default 10000)")
    tm.add_argument("--quantum", type=int, help="instead: round robin, this many accesses per turn")
    tm.set_defaults(fn=cmd_trace_merge)
    tn = tsub.add_parser("info", help="events, accesses by kind, footprint per page size, VMAs")
    tn.add_argument("file")
    tn.add_argument("--page-sizes", default="4KiB,2MiB,1GiB", help="page sizes to count the footprint in")
    tn.add_argument("--vmas", type=int_in(0, 2**31), default=20, help="address-space events to list (default 20)")
    tn.add_argument("--allow-truncated", action="store_true")
    tn.add_argument("--json", action="store_true")
    tn.set_defaults(fn=cmd_trace_info)
    td = tsub.add_parser("dump", help="print records in the text form")
    td.add_argument("file")
    td.add_argument("--limit", type=count, default=0, help="at most N records (default: all)")
    td.add_argument("--allow-truncated", action="store_true")
    td.set_defaults(fn=cmd_trace_dump)
    t.set_defaults(fn=lambda a: _help(t))

    r = sub.add_parser("mrc", help="miss-ratio curve of a fully associative LRU TLB, every size in one pass")
    r.add_argument("trace")
    r.add_argument("--page-size", default="4KiB")
    r.add_argument("--max-entries", type=int_in(1, 1 << 24), default=1536,
                   help="largest TLB size in the curve (default 1536; at most 16M)")
    r.add_argument("--stream", default="all", choices=["all", "data", "instruction"])
    r.add_argument("--json", action="store_true", help="print {accesses, cold_misses, misses: [N=1..max]}")
    r.set_defaults(fn=cmd_mrc)

    b = sub.add_parser("bench", help="measure throughput against pycachesim (writes a markdown report)")
    b.add_argument("--os", action="store_true", help="instead: the OS model at scale (64GiB prelude time, 384GiB host RSS)")
    b.add_argument("--capture", action="store_true", help="instead: capture speed (vs native and lackey) and trace bytes per access")
    b.add_argument("--model", action="store_true", help="instead: the runtime model's predicted 2MB-page speedups against measured ones on this machine (root; docs/RUNTIME_MODEL.md)")
    b.add_argument("--model-sizes", metavar="MIB,...", help="with --model: table sizes in MiB (default 64,256,1024,4096)")
    b.add_argument("--model-traces", metavar="DIR", help="with --model: keep each capture as DIR/PROGRAM-MIB.spt, and predict from one "
                   "already there instead of capturing again (delete it to recapture; one collapsed by page, or that ran another command, is "
                   "captured again); default: captures are temporary")
    b.add_argument("--model-calibrate", action="store_true", help="with --model: run `superpager calibrate` first (its defaults, a few minutes; "
                   "the file SUPERPAGER_CALIBRATION names, else the default one, is replaced), so the predictions rest on the machine as it is "
                   "when the bench starts; on a shared host it drifts (docs/RUNTIME_MODEL.md)")
    b.add_argument("--model-at-calibration", action="store_true", help="with --model: predict from the calibration as written. By default "
                   "the bench reads calibrate's chase over the calibration's largest footprint (1GiB by default) after each round as well, and predicts (after the rounds) from calibrate's "
                   "fit redone with the median of those readings and the calibration's own, so that the model sees the machine as the "
                   "runs it is held against did; where the calibration has a share's fit, calibrate's two walk probes are read at the same moments "
                   "(about 35 s each time) and the share's fit is redone on their medians (docs/RUNTIME_MODEL.md, \"The machine's state through the bench\", "
                   "\"The share's probes through the bench\")")
    b.add_argument("--model-programs", metavar="NAME,...", help="with --model: programs (default rand,gups,chase,bsearch,btree,hashjoin,stream of model_access.c, and python3-dict, Debian's python3 on model_dict.py; also bsearchcmov and btreecmov, bsearch's searches and btree's lookups without their branches, and sweep, stream's reads without its division, only when named)")
    b.add_argument("--live", action="store_true", help="instead: real programs' access-phase speedup under the live policies on this machine (root; docs/LIVE.md)")
    b.add_argument("--live-sizes", metavar="MIB,...", help="with --live: table sizes in MiB (default 128,512,1024,4096, plus gups with holes at 1024 and a long gups at 4096)")
    b.add_argument("--live-programs", metavar="NAME,...", help="with --live: programs (default gups,chase,bsearch)")
    b.add_argument("--live-policy", action="append", metavar="SPEC", help="with --live: one more policy column, e.g. navarro-live:max_cpu=1 (repeatable)")
    b.add_argument("--live-idle", type=finite_float(0, 3600), default=0.0, metavar="SECONDS",
                   help="with --live: wait this long before each run (default 0), so that a VM's host has taken freed memory back, "
                        "as for a program started on an idle machine (12 s is enough with free page reporting; docs/LIVE.md)")
    b.add_argument("--pressure", action="store_true", help="instead: speed while memory is short and CLOCK, ARC or AMSQM choose victims (AMSQM's heavy traces)")
    b.add_argument("--against", metavar="DIR", help="instead: this build's simulation speed beside another build's, interleaved (DIR holds that build's superpager package); with --pressure, on the pressure cases")
    b.add_argument("--accesses", type=count, default=4_000_000, help="trace length (default 4M)")
    b.add_argument("--repeats", type=int_in(1, 1000), default=5, help="runs per measurement; the median is reported")
    b.add_argument("--out", help="write the markdown report here (e.g. docs/PERFORMANCE.md)")
    b.add_argument("--workdir", default=None, help="where traces go, kept afterwards (default: a temporary directory, removed at the end)")
    b.set_defaults(fn=cmd_bench)

    cp = sub.add_parser("capture", help="run a program and record its memory accesses and address-space syscalls",
                        usage="superpager capture [--out FILE] [--fetches] [--from-mark] [--collapse page|line] [--lackey] -- CMD [ARGS ...]",
                        epilog=EPILOG_CAPTURE, formatter_class=raw)
    cp.add_argument("--out", "-o", metavar="FILE", help="trace to write (default: CMD's name + .spt)")
    cp.add_argument("--fetches", action="store_true", help="record instruction fetches too (one run per basic block)")
    cp.add_argument("--from-mark", action="store_true",
                    help="record accesses only from the program's first phase mark (a zero-length madvise) on; "
                         "before it, the address-space events and touches of the resident pages near each and, at "
                         "the mark, of all of them (the build runs at qemu's speed, untraced)")
    cp.add_argument("--collapse", choices=["page", "line"], default="page",
                    help="a thread's consecutive data accesses join into one record while they stay in one 4KiB page "
                         "(page, the default) or one 64-byte cache line (line: bigger traces, but every line a run "
                         "touches reaches the runtime model's caches; `predict` wants it)")
    cp.add_argument("--lackey", action="store_true", help="use Valgrind lackey instead of qemu-user (100x slower)")
    cp.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the program to run, after --")
    cp.set_defaults(fn=cmd_capture)

    wl = sub.add_parser("workloads", help="the workload suite: list it, or build and capture a workload",
                        epilog=EPILOG_WORKLOADS, formatter_class=raw)
    wsub = wl.add_subparsers(dest="wcmd", metavar="SUBCOMMAND")
    wls = wsub.add_parser("list", help="the suite's programs and the real programs, with their size knobs")
    wls.set_defaults(fn=cmd_workloads_list)
    wlc = wsub.add_parser("capture", help="build (or prepare the input of) a workload and capture it")
    wlc.add_argument("name", help="a workload from `superpager workloads list`, or all")
    wlc.add_argument("--size", help="the workload's footprint or input size, e.g. 256MiB (default: its own)")
    wlc.add_argument("--out", "-o", help="trace file (default NAME.spt), or a directory")
    wlc.add_argument("--fetches", action="store_true", help="record instruction fetches too")
    wlc.set_defaults(fn=cmd_workloads_capture)
    wl.set_defaults(fn=lambda a: _help(wl))

    rp = sub.add_parser("reproduce", help="run a paper's experiments on the workload suite; its claims beside ours",
                        formatter_class=raw, epilog="examples:\n  superpager reproduce navarro --quick\n"
                        "  superpager reproduce navarro --out docs/NAVARRO_RESULTS.md\n"
                        "  superpager reproduce romer --out docs/ROMER_RESULTS.md\n"
                        "  superpager reproduce trident --quick --out /tmp/trident.md\n"
                        "  superpager reproduce intermediate --out docs/INTERMEDIATE_RESULTS.md\n"
                        "  superpager reproduce amsqm --out docs/AMSQM_RESULTS.md\n"
                        "  superpager reproduce all --quick --out /tmp/all.md     # every paper, one report\n"
                        "  superpager reproduce romer --jobs 1                    # serial\n\n"
                        "Traces are captured on first use (qemu-user) and cached in ~/.cache/superpager/traces.")
    rp.add_argument("paper", help="navarro, romer, trident, intermediate (Solomon's intermediate page sizes), amsqm "
                                  "(superpage-aware replacement), or all (every one, into one report)")
    rp.add_argument("--jobs", "-j", type=int, default=None, help="worker processes for the independent runs (default: every core; 1: serial); "
                                                              "with several, `all` runs the papers side by side")
    rp.add_argument("--db", metavar="FILE", help="also store the pooled runs in this results store (runs already there are reused)")
    rp.add_argument("--quick", action="store_true", help="smaller inputs (about 4x smaller): a first look in minutes (romer --quick about 4 on 2 cores)")
    rp.add_argument("--out", help="also write the report (markdown) here, and the pooled runs' HTML report in OUT's name + _report/")
    rp.set_defaults(fn=cmd_reproduce)

    d = sub.add_parser("demo", help="make a few workloads, compare policies on two machines, write results")
    d.add_argument("--out", default="demo-out", help="directory for traces and results (default demo-out)")
    d.add_argument("--size", default="512MiB", help="footprint of each workload (default 512MiB)")
    d.set_defaults(fn=cmd_demo)

    cli_live.add_parsers(sub, raw)
    cli_model.add_parsers(sub, raw)
    cli_results.add_parsers(sub, raw)

    ca = sub.add_parser("cache", help="show or clean what superpager keeps between runs (captured traces, built workloads)")
    ca.add_argument("action", nargs="?", choices=["show", "clean"], default="show")
    ca.set_defaults(fn=cmd_cache)

    for parsers in (sub.choices, tsub.choices, wsub.choices):
        for name, sp in parsers.items():
            if sp.epilog is None and name in EXAMPLES:
                sp.epilog = "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name])
                sp.formatter_class = raw
    return p


#: `--help` examples for the verbs whose parsers above give none of their own.
EXAMPLES = {
    "machines": ["superpager machines                 # every preset, one line each",
                 "superpager machines skylake         # one preset, structure by structure",
                 "superpager machines my-machine.toml --json"],
    "policies": ["superpager policies                 # names, what they do, their parameters",
                 "superpager policies --json"],
    "scenarios": ["superpager scenarios", "superpager simulate --scenario trident-fragmented --json"],
    "trace": ["superpager trace info gups.spt", "superpager trace dump gups.spt --limit 20",
              "superpager trace import ls.lackey --from lackey -o ls.spt"],
    "info": ["superpager trace info gups.spt", "superpager trace info gups.spt --vmas 100 --json",
             "superpager trace info cut.spt --allow-truncated   # a trace whose writer was stopped"],
    "dump": ["superpager trace dump gups.spt --limit 20", "superpager trace dump gups.spt > gups.txt   # edit, then:",
             "superpager trace import gups.txt --from text -o edited.spt"],
    "mrc": ["superpager mrc gups.spt --max-entries 2048", "superpager mrc gups.spt --page-size 2MiB --json"],
    "bench": ["superpager bench --out perf.md                # simulator throughput against pycachesim",
              "superpager bench --accesses 1M --repeats 3     # quicker, report on stdout only",
              "superpager bench --capture --out perf.md       # capture speed and trace size",
              "superpager bench --pressure --out perf.md      # replacement under memory pressure",
              "superpager bench --live --out docs/LIVE.md     # live policies on real programs (root)",
              "superpager bench --os --out os-scale.md        # the OS model at scale",
              "superpager bench --against /tmp/old             # this build beside another (DIR/superpager: its package)",
              "superpager bench --pressure --against /tmp/old  # the same, on the memory-pressure cases"],
    "list": ["superpager workloads list"],
    "capture": ["superpager workloads capture pagerank --size 256MiB",
                "superpager workloads capture all --size 16MiB --out traces/"],
    "demo": ["superpager demo", "superpager demo --size 128MiB --out /tmp/demo"],
    "cache": ["superpager cache          # where it is and how big", "superpager cache clean    # remove it all"],
}


def _cache_entries():
    """What superpager keeps between runs: (what, path)."""
    import glob
    import tempfile

    from .capture import cache_dir

    c = cache_dir()
    out = [("captured traces (reproduce)", str(c / "traces")), ("built workloads and inputs", str(c / "workloads"))]
    out += [("capture plugin build", p) for p in sorted(glob.glob(str(c / "spt_capture-*.so")))]
    out += [("scenario workload trace", p) for p in sorted(glob.glob(os.path.join(tempfile.gettempdir(), "superpager-gen-*.spt")))]
    return out


def _size_of(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    n = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                n += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return n


def cmd_cache(a) -> int:
    import shutil

    entries = [(w, p) for w, p in _cache_entries() if os.path.exists(p)]
    total = sum(_size_of(p) for _, p in entries)
    if a.action == "show":
        rows = [[w, p, f"{human_bytes(_size_of(p))}"] for w, p in entries]
        print(table(rows, ["what", "where", "size"], left=2) if rows else "nothing cached")
        print(f"\ntotal {human_bytes(total)}; remove it all with: superpager cache clean")
        return 0
    for _, p in entries:
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
    print(f"removed {len(entries)} entries, {human_bytes(total)}", file=sys.stderr)
    return 0


GEN_KINDS = _core.gen_kinds()  # (name, description), defined once in the Rust core


def add_run_options(s) -> None:
    s.add_argument("--memory", default=None, help="simulated physical memory (default 64GiB)")
    s.add_argument("--out", help="directory for results.json, counters.parquet, series.parquet")
    s.add_argument("--db", metavar="FILE", help="also store the runs in this results store (DuckDB, e.g. results.duckdb; docs/RESULTS.md); "
                                                "a run already there with the same inputs is shown, not run again")
    s.add_argument("--force", action="store_true", help="with --db: run again even if the store holds the run")
    s.add_argument("--map-every", type=count, default=None, metavar="N",
                   help="keep a frame of the physical-memory map every N accesses (for `superpager report`'s animated map)")
    s.add_argument("--map-region", metavar="SIZE", help="the map's cell size (default: the machine's largest page size)")
    s.add_argument("--sample-every", type=count, default=None, help="time-series sample every N accesses (default 1048576, or the scenario's)")
    s.add_argument("--allow-truncated", action="store_true", help="read a cut-short trace up to its last complete chunk")
    s.add_argument("--bloat", action="store_true",
                   help="record which base pages the program touches and report bloat.<size>: bytes of resident superpages never touched "
                        "(a lookup per access, so off by default)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if not getattr(a, "fn", None):
        parser.print_help()
        return 2
    try:
        return a.fn(a) or 0
    except _core.SuperpagerError as e:
        msg = str(e)
        print(f"superpager: error: {msg}", file=sys.stderr)
        return 1 if msg.startswith("simulation stopped") else 2
    except KeyboardInterrupt:
        print("superpager: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("superpager: error: out of host memory (a limit such as ulimit -v is below what this run needs: "
              "docs/RELIABILITY.md gives the bound)", file=sys.stderr)
        return 1
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except OSError as e:
        print(f"superpager: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
