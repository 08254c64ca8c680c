"""`superpager demo` (what `make demo` runs): make a few workloads, simulate several policies on
two machines, print a comparison table per workload, and write the results."""
from __future__ import annotations

import os
from typing import Any

from . import api
from .fmt import compare_table, human

WORKLOADS: list[tuple[str, str, dict[str, Any]]] = [
    # (name, kind, extra gen options)
    ("gups", "gups", {"accesses": 2_000_000}),
    ("seq", "seq", {}),
    ("zipf", "zipf", {"accesses": 2_000_000, "alpha": 0.99}),
    ("transpose", "transpose", {"accesses": 2_000_000}),
]
MACHINES = ["skylake", "zen3"]
POLICIES = ["base", "linux-thp", "fixed:2MiB", "fixed:1GiB"]


def main(a) -> int:
    traces = os.path.join(a.out, "traces")
    os.makedirs(traces, exist_ok=True)
    print(f"superpager demo: {len(WORKLOADS)} workloads of {a.size}, machines {', '.join(MACHINES)}, "
          f"policies {', '.join(POLICIES)}\n")
    for name, kind, opts in WORKLOADS:
        path = os.path.join(traces, f"{name}.spt")
        s = api.gen(kind, path, size=a.size, seed=1, **opts)
        rs = api.compare(path, MACHINES, POLICIES)
        out = os.path.join(a.out, "results", name)
        api.write_results(rs, out)
        print(f"== {name}: {human(s['accesses'])} accesses, trace {human(s['bytes'])}B -> {out}/")
        print(compare_table(rs))
        print()
    print(f"results (JSON and Parquet) are under {a.out}/results/; with `. .venv/bin/activate` (after make demo), try:\n"
          f"  superpager simulate {os.path.join(traces, 'gups.spt')} --machine skylake --policy fixed:2MiB\n"
          f"  python3 -c \"import pandas as pd; print(pd.read_parquet('{a.out}/results/gups/counters.parquet').T)\"")
    return 0
